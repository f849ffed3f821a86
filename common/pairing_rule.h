// pairing_rule.h — the one list of pairing rules (the [pairing] rule key):
// their names, what files make a pair under each, and what the broker needs
// to know of them. The configuration, the broker and the tests read it;
// the docs that list the rules are checked against it (tests/test_pairing.c).

#ifndef COMMON_PAIRING_RULE_H
#define COMMON_PAIRING_RULE_H

#include <limits.h>
#include <stddef.h>

// In the table's order (pairing_rule_get (PAIRING_AB) is the "ab" entry).
typedef enum {
    PAIRING_AB,
    PAIRING_SEQUENCE,
    PAIRING_SLIDING,
    PAIRING_MULTIPAGE,
    PAIRING_STEREO
} pairing_rule_t;

typedef struct {
    pairing_rule_t rule;  // its value
    const char *name;     // as pairing/rule takes it: "ab"
    const char *pairs;    // which files make a pair, in words: "<stem>_a.tif + <stem>_b.tif"
    int suffixes;         // 1: the rule needs pairing/a_suffix and b_suffix (two different)
    int pairs_per_file;   // how many pairs one file can be in (2: sliding)
    int frames;           // frames a pair has: 2 (a pair), 4 (stereo: two cameras' pairs)
} pairing_rule_info_t;

// The entry of 'rule'; NULL for a value out of range.
const pairing_rule_info_t *pairing_rule_get (int rule);

// The name of rule i, NULL past the last: the shape util_join and the
// configuration's choices take.
const char *pairing_rule_choice (int i);

// The entry named 'name' (exact, case-sensitive); NULL if none is.
const pairing_rule_info_t *pairing_rule_find (const char *name);

// The stereo rule's camera folders, "cam1,cam2" (pairing/cameras, 'pivctl
// piv EXP cameras=...'): two different plain folder names (as
// path_check_component takes a name, no comma), camera 1's first, into
// folders[0] and [1]. 0, or -1 with err ("bad camera folders 'cam1': ...").
int pairing_rule_cameras (const char *list, char folders[2][NAME_MAX + 1], char *err,
                          size_t errlen);

#endif
