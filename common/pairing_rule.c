// pairing_rule.c — the table of pairing rules; see pairing_rule.h.

#include "common/pairing_rule.h"
#include "common/path.h"
#include "common/util.h"

#include <stdio.h>
#include <string.h>

static const pairing_rule_info_t s_rules[] = {
    [PAIRING_AB] = {PAIRING_AB, "ab", "<stem>_a.tif + <stem>_b.tif", 1, 1, 2},
    [PAIRING_SEQUENCE] = {PAIRING_SEQUENCE, "sequence", "frames 1-2, 3-4, ...", 0, 1, 2},
    [PAIRING_SLIDING] = {PAIRING_SLIDING, "sliding", "frames 1-2, 2-3, ...", 0, 2, 2},
    [PAIRING_MULTIPAGE] = {PAIRING_MULTIPAGE, "multipage", "one file holds both frames", 0, 1, 2},
    [PAIRING_STEREO] = {PAIRING_STEREO, "stereo",
                        "<stem>_a.tif + <stem>_b.tif in each of two camera folders", 1, 1, 4},
};
#define NRULES ((int) (sizeof s_rules / sizeof s_rules[0]))
_Static_assert (NRULES == PAIRING_STEREO + 1, "one entry per pairing_rule_t");

const pairing_rule_info_t *
pairing_rule_get (int rule)
{
    return rule >= 0 && rule < NRULES ? &s_rules[rule] : NULL;
}

const char *
pairing_rule_choice (int i)
{
    return i >= 0 && i < NRULES ? s_rules[i].name : NULL;
}

const pairing_rule_info_t *
pairing_rule_find (const char *name)
{
    return pairing_rule_get (util_choice_index (pairing_rule_choice, name));
}

int
pairing_rule_cameras (const char *list, char folders[2][NAME_MAX + 1], char *err, size_t errlen)
{
    const char *comma = strchr (list, ',');
    char why[PATH_WHY] = "";
    int bad = !comma || strchr (comma + 1, ',') || (size_t) (comma - list) > NAME_MAX
              || strlen (comma + 1) > NAME_MAX;
    if (!bad) {
        snprintf (folders[0], NAME_MAX + 1, "%.*s", (int) (comma - list), list);
        snprintf (folders[1], NAME_MAX + 1, "%s", comma + 1);
        bad = path_check_component (folders[0], why, sizeof why) != 0
              || path_check_component (folders[1], why, sizeof why) != 0
              || strcmp (folders[0], folders[1]) == 0;
    }
    if (bad) {
        char shown[UTIL_SHOWN];
        snprintf (err, errlen, "bad camera folders '%s': expected two different folder names, "
                  "camera 1's first (cam1,cam2)%s%s",
                  util_shorten (list, shown, sizeof shown), *why ? ": " : "", why);
        return -1;
    }
    return 0;
}
