// control_piv.c — the control command 'piv' (issue 25, doc/control.md):
// the PIV settings and the pairing rule of one experiment, or with '*' the
// default of those without their own. Every key the engine parses is one
// (piv_settings_check_key hands it to piv_settings_parse); each change is
// a setting in the store ("piv": the experiment's own keys, "pairing": its
// rule), committed before the reply, applied to the pairs dispatched after.

#include "broker/control_cmd.h"
#include "common/log.h"
#include "common/pairing_rule.h"
#include "common/util.h"
#include "piv/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_OWN_MAX 512 // bytes of an experiment's own keys (a task's settings at most)

// {"scope":..,"settings":..,"own":..,"default":..,"base":..,"pairing":{..}}
static int
s_put_piv (control_cmd_t *cmd, exp_t *exp)
{
    ingest_t *ingest = cmd->self->ingest;
    cmd_put_scope (cmd, exp);
    text_put (&cmd->body, ",\"settings\":");
    text_put_string (&cmd->body, exp ? exp->piv.settings : ingest_piv_default (ingest));
    text_put (&cmd->body, ",\"own\":");
    text_put_string (&cmd->body, ingest_piv_own (ingest, exp));
    text_put (&cmd->body, ",\"default\":");
    text_put_string (&cmd->body, exp ? ingest_piv_default (ingest) : cmd->self->settings);
    text_put (&cmd->body, ",\"base\":");
    if (exp && exp->piv.base)
        text_put_string (&cmd->body, exp->piv.base);
    else
        text_put (&cmd->body, "null");
    const pairing_rule_info_t *rule = ingest_pairing_rule (ingest, exp);
    text_put (&cmd->body, ",\"pairing\":{\"rule\":");
    text_put_string (&cmd->body, rule->name);
    text_put (&cmd->body,
              ",\"own\":%s,\"pairs\":", ingest_pairing_own (ingest, exp) >= 0 ? "true" : "false");
    text_put_string (&cmd->body, rule->pairs);
    text_put (&cmd->body, ",\"cameras\":");
    text_put_string (&cmd->body, ingest_cameras (ingest, exp));
    text_put (&cmd->body, "}}");
    return 0;
}

// Sets 'key' to 'value' in the words of 'own' (value NULL: takes it out),
// in place; the other words keep their order. 0, or -1 when it would not
// fit.
static int
s_own_set (char *own, size_t size, const char *key, const char *value)
{
    char out[S_OWN_MAX * 2] = "";
    size_t used = 0, klen = strlen (key);
    char copy[S_OWN_MAX];
    snprintf (copy, sizeof copy, "%s", own);
    for (char *save, *w = strtok_r (copy, " ", &save); w; w = strtok_r (NULL, " ", &save))
        if (!(strncmp (w, key, klen) == 0 && w[klen] == '='))
            used += (size_t)snprintf (out + used, sizeof out - used, "%s%s", used ? " " : "", w);
    if (value)
        used += (size_t)snprintf (out + used, sizeof out - used, "%s%s=%s", used ? " " : "", key,
                                  value);
    if (used >= size)
        return -1;
    memcpy (own, out, used + 1);
    return 0;
}

// The words KEY=VALUE... (KEY=default: back to the default) applied to
// 'own'; the pairing rule into *rule (-2: not given, -1: default), the
// stereo camera folders into *cameras (NULL: not given, "": default). 0,
// or -1 refused naming the word and why.
static int
s_parse_words (control_cmd_t *cmd, char *own, size_t size, int *rule, const char **cameras)
{
    *rule = -2;
    *cameras = NULL;
    for (int i = 2; i < cmd->argc; i++) {
        const char *word = cmd->argv[i], *eq = strchr (word, '=');
        char key[64], norm[PIV_MASK_PATH_MAX], why[600];
        size_t len = eq ? (size_t)(eq - word) : 0;
        if (!eq || len == 0 || len >= sizeof key)
            return cmd_refuse (cmd, 400,
                               "bad piv argument '%.100s': expected KEY=VALUE (passes=32,16 "
                               "eps=0.1 pairing=sequence ...; KEY=default for the default)",
                               word);
        memcpy (key, word, len);
        key[len] = '\0';
        const char *value = eq + 1;
        int dflt = strcmp (value, "default") == 0;
        if (strcmp (key, "pairing") == 0) {
            const pairing_rule_info_t *info = dflt ? NULL : pairing_rule_find (value);
            char expected[128];
            if (!dflt && !info)
                return cmd_refuse (
                    cmd, 400,
                    "bad piv setting 'pairing=%.100s': expected %s, or "
                    "default",
                    value,
                    util_join (pairing_rule_choice, ", ", " or ", expected, sizeof expected));
            *rule = dflt ? -1 : (int)info->rule;
            continue;
        }
        if (strcmp (key, "cameras") == 0) {
            *cameras = dflt ? "" : value;
            continue;
        }
        if (strcmp (key, "mask") == 0)
            return cmd_refuse (cmd, 400,
                               "bad piv setting 'mask': the mask is set by 'mask EXP PATH' "
                               "(which checks the image)");
        if (!dflt && piv_settings_check_key (key, value, norm, sizeof norm, why, sizeof why) != 0)
            return cmd_refuse (cmd, 400, "bad piv setting '%s=%.100s': %s", key, value,
                               strncmp (why, "is ", 3) == 0 ? why + 3 : why);
        if (s_own_set (own, size, key, dflt ? NULL : norm) != 0)
            return cmd_refuse (cmd, 400, "bad piv settings: over the %zu bytes a task's may have",
                               size - 1);
    }
    return 0;
}

int
control_piv (control_cmd_t *cmd)
{
    const char *usage = "piv EXP|* [KEY=VALUE...] [KEY=default...] [--reset]";
    if (cmd_expect (cmd, CMD_OPT_RESET, 2, 40, usage))
        return -1;
    control_t *self = cmd->self;
    ingest_t *ingest = self->ingest;
    const char *name = cmd->argv[1];
    int global = strcmp (name, "*") == 0;
    if (!global && cmd_refuse_name (cmd, "experiment", name))
        return -1;
    exp_t *exp = NULL;
    if (cmd->argc == 2 && !(cmd->given & CMD_OPT_RESET)) {
        if (!global && !(exp = cmd_find_experiment (cmd, name)))
            return -1;
        return s_put_piv (cmd, exp);
    }
    // Checked before an unknown experiment is made for them: its keys are
    // merged with the default.
    exp = global ? NULL : zhashx_lookup (ingest_experiments (ingest), name);
    char own[S_OWN_MAX], old[S_OWN_MAX], merged[S_OWN_MAX], err[600];
    snprintf (old, sizeof old, "%s", ingest_piv_own (ingest, exp));
    snprintf (own, sizeof own, "%s", cmd->given & CMD_OPT_RESET ? "" : old);
    int rule, old_rule = ingest_pairing_own (ingest, exp);
    const char *cameras;
    if (s_parse_words (cmd, own, sizeof own, &rule, &cameras))
        return -1;
    if (global && cameras)
        return cmd_refuse (cmd, 400, "bad piv setting 'cameras': an experiment's own (the "
                           "default is pairing/cameras in the configuration)");
    if (cmd->given & CMD_OPT_RESET && rule == -2)
        rule = -1;
    if (!global && ingest_piv_merge (ingest, exp, own, merged, sizeof merged, err, sizeof err))
        return cmd_refuse (cmd, 400, "%s", err);
    if (!global && !(exp = cmd_setting_experiment (cmd, name)))
        return -1;
    if (ingest_piv_set (ingest, exp, own, err, sizeof err) != 0)
        return cmd_refuse (cmd, 400, "%s", err);
    int64_t id = exp ? exp->id : 0, now = util_time_ns ();
    int recorded = store_setting_set (self->store, id, "piv", *own ? own : NULL, now) == 0;
    if (recorded && rule != -2 && rule != old_rule) {
        // The files not yet paired go to the new rule (ingest_pairing_set):
        // in this transaction, with the setting.
        if (ingest_pairing_set (ingest, exp, rule, 1, err, sizeof err) != 0) {
            ingest_piv_set (ingest, exp, old, err, sizeof err);
            return cmd_refuse (cmd, 400, "%s", err);
        }
        recorded = store_setting_set (self->store, id, "pairing",
                                      rule >= 0 ? pairing_rule_get (rule)->name : NULL, now) == 0;
    }
    char old_cameras[CONFIG_STRING] = "";
    if (exp && cameras)
        snprintf (old_cameras, sizeof old_cameras, "%s", ingest_cameras (ingest, exp));
    if (recorded && cameras) {
        // As the rule: the files waiting offered again, in this transaction.
        if (ingest_cameras_set (ingest, exp, *cameras ? cameras : NULL, 1, err, sizeof err) != 0) {
            ingest_piv_set (ingest, exp, old, err + strlen (err), 0);
            if (rule != -2 && rule != old_rule)
                ingest_pairing_set (ingest, exp, old_rule, 0, err + strlen (err), 0);
            return cmd_refuse (cmd, 400, "bad piv setting 'cameras=%.100s': %s", cameras, err);
        }
        recorded = store_setting_set (self->store, id, "pairing_cameras",
                                      *cameras ? cameras : NULL, now) == 0;
    }
    if (!recorded) {
        ingest_piv_set (ingest, exp, old, err, sizeof err);
        return cmd_refuse (cmd, 500, "cannot record the PIV settings: %s",
                           store_error (self->store));
    }
    if (cmd_commit (cmd)) {
        // Not recorded: as it was (the pairs a new rule made go with the
        // failed transaction).
        ingest_piv_set (ingest, exp, old, err, sizeof err);
        if (rule != -2 && rule != old_rule)
            ingest_pairing_set (ingest, exp, old_rule, 0, err, sizeof err);
        if (cameras)
            ingest_cameras_set (ingest, exp, old_cameras, 0, err, sizeof err);
        return -1;
    }
    dispatch_now (self->dispatch);
    log_notice ("PIV settings of %s: %s%s%s", exp ? exp->name : "every experiment (the default)",
                exp ? exp->piv.settings : ingest_piv_default (ingest),
                rule != -2 ? "; pairing " : "",
                rule != -2 ? ingest_pairing_rule (ingest, exp)->name : "");
    return s_put_piv (cmd, exp);
}

int
control_replay_settings (control_cmd_t *cmd, const exp_t *of, char *out, size_t size, int *rule)
{
    char own[S_OWN_MAX] = "", norm[PIV_MASK_PATH_MAX], why[600], err[600] = "";
    const struct {
        const char *key, *value;
    } given[] = {{"passes", cmd->passes},
                 {"overlap", cmd->overlap},
                 {"iterations", cmd->iterations},
                 {"deform", cmd->deform}};
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
        if (!given[i].value)
            continue;
        if (piv_settings_check_key (given[i].key, given[i].value, norm, sizeof norm, why,
                                    sizeof why) != 0)
            return cmd_refuse (cmd, 400,
                               "bad --%s: value '%.100s' of 'piv/%s' in 'the replay "
                               "command' %s",
                               given[i].key, given[i].value, given[i].key, why);
        s_own_set (own, sizeof own, given[i].key, norm);
    }
    *rule = ingest_pairing_own (cmd->self->ingest, of);
    for (int i = 0; i < cmd->nset; i++) {
        const char *eq = strchr (cmd->set[i], '=');
        char key[64];
        size_t len = eq ? (size_t)(eq - cmd->set[i]) : 0;
        if (!eq || !len || len >= sizeof key)
            return cmd_refuse (cmd, 400, "bad --set '%.100s': expected KEY=VALUE", cmd->set[i]);
        memcpy (key, cmd->set[i], len);
        key[len] = '\0';
        if (strcmp (key, "pairing") == 0) {
            const pairing_rule_info_t *info = pairing_rule_find (eq + 1);
            if (!info)
                return cmd_refuse (cmd, 400, "bad --set 'pairing=%.100s': not a pairing rule",
                                   eq + 1);
            *rule = (int)info->rule;
            continue;
        }
        if (strcmp (key, "mask") == 0 || strcmp (eq + 1, "default") == 0 ||
            piv_settings_check_key (key, eq + 1, norm, sizeof norm, why, sizeof why) != 0)
            return cmd_refuse (cmd, 400, "bad --set '%.100s': %s", cmd->set[i],
                               strcmp (key, "mask") == 0 ? "the mask is the source's"
                               : strcmp (eq + 1, "default") == 0
                                   ? "a replay starts from its source's settings, not the default"
                               : strncmp (why, "is ", 3) == 0 ? why + 3
                                                              : why);
        if (s_own_set (own, sizeof own, key, norm) != 0)
            return cmd_refuse (cmd, 400, "bad --set: over the %zu bytes a task's settings may have",
                               sizeof own - 1);
    }
    // The source's settings are the replay's base; its mask is not among
    // them but the replay's own setting (s_replay_inherit in control.c), as
    // its calibration is.
    char text[S_OWN_MAX * 2];
    piv_settings_t s;
    snprintf (text, sizeof text, "%s%s%s", of->piv.settings, *own ? " " : "", own);
    if (strlen (text) >= S_OWN_MAX)
        return cmd_refuse (cmd, 400, "bad replay settings: too long");
    if (piv_settings_parse (text, &s, err, sizeof err) != 0)
        return cmd_refuse (cmd, 400, "bad replay settings: %s", err);
    s.mask_path[0] = '\0';
    if (piv_settings_check (&s, err, sizeof err) != 0 || piv_settings_format (&s, out, size) < 0)
        return cmd_refuse (cmd, 400, "bad replay settings: %s", err);
    return 0;
}
