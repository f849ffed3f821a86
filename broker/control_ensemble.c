// control_ensemble.c — the 'ensemble' command of the control stage
// (doc/control.md): starts an ensemble correlation job of an experiment,
// or reads the state of its latest one.

#include "broker/control_cmd.h"
#include "broker/ensemble.h"
#include "common/log.h"
#include "common/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_USAGE                                                                                    \
    "ensemble EXP [window=PX] [overlap=PERCENT] [pairs=A-B] | ensemble EXP status | ensemble "     \
    "EXP auto [window=PX] [overlap=PERCENT] [idle=S] | ensemble EXP auto off"

// 'ensemble EXP auto ...': the standing setting of exp recorded (the
// store's setting "ensemble"), then in force. 0, or -1 (refused).
static int
s_standing (control_cmd_t *cmd, exp_t *exp)
{
    int off = cmd->argc == 4 && strcmp (cmd->argv[3], "off") == 0;
    char words[256] = "", text[256], err[512];
    size_t used = 0;
    for (int i = 3; !off && i < cmd->argc; i++)
        used += (size_t) snprintf (words + used, used < sizeof words ? sizeof words - used : 0,
                                   "%s%s", used ? " " : "", cmd->argv[i]);
    if (used >= sizeof words)
        return cmd_refuse (cmd, 400, "ensemble: the auto words are too long; usage: %s", S_USAGE);
    exp_ensemble_t before = exp->ensemble;
    if (ensemble_standing_set (exp, off ? NULL : words, text, sizeof text, err, sizeof err)
        != 0)
        return cmd_refuse (cmd, 400, "ensemble %s: %s", exp->name, err);
    if (store_setting_set (cmd->self->store, exp->id, "ensemble", off ? NULL : text,
                           util_time_ns ())
        != 0) {
        exp->ensemble = before;
        return cmd_refuse (cmd, 500, "cannot record the setting: %s",
                           store_error (cmd->self->store));
    }
    if (cmd_commit (cmd)) {
        exp->ensemble = before;
        return -1;
    }
    log_notice ("control: standing ensemble of '%s': %s", exp->name, off ? "off" : text);
    return 0;
}

// A whole number in lo..hi from 'text': 0, or -1.
static int
s_int (const char *text, long lo, long hi, int *out)
{
    char *end;
    long v = strtol (text, &end, 10);
    if (end == text || *end || v < lo || v > hi)
        return -1;
    *out = (int) v;
    return 0;
}

int
control_ensemble (control_cmd_t *cmd)
{
    if (cmd_expect (cmd, 0, 2, 6, S_USAGE))
        return -1;
    // A standing setting may come before the run's first frame, as the
    // other settings of an experiment: it makes the experiment.
    int status = cmd->argc == 3 && strcmp (cmd->argv[2], "status") == 0;
    int standing = cmd->argc >= 3 && strcmp (cmd->argv[2], "auto") == 0;
    exp_t *exp = standing ? cmd_setting_experiment (cmd, cmd->argv[1])
                          : cmd_find_experiment (cmd, cmd->argv[1]);
    if (!exp)
        return -1;
    ensemble_t *ens = cmd->self->stages.ensemble;
    if (standing && cmd_expect (cmd, 0, 3, 6, S_USAGE))
        return -1;
    if (standing && s_standing (cmd, exp) != 0)
        return -1;
    if (!status && !standing) {
        int window = 8, overlap = 50;
        const char *range = NULL;
        for (int i = 2; i < cmd->argc; i++) {
            const char *word = cmd->argv[i], *eq = strchr (word, '=');
            const char *value = eq ? eq + 1 : "";
            size_t klen = eq ? (size_t) (eq - word) : strlen (word);
            int bad = !eq;
            if (!bad && klen == 6 && strncmp (word, "window", 6) == 0)
                bad = s_int (value, 4, 1024, &window) != 0;
            else if (!bad && klen == 7 && strncmp (word, "overlap", 7) == 0)
                bad = s_int (value, 0, 90, &overlap) != 0;
            else if (!bad && klen == 5 && strncmp (word, "pairs", 5) == 0)
                range = value;
            else if (!bad)
                return cmd_refuse (cmd, 400, "ensemble: no such key '%.*s' (window, overlap, "
                                   "pairs); usage: %s",
                                   (int) klen, word, S_USAGE);
            if (bad)
                return cmd_refuse (cmd, 400, "ensemble: bad %s '%s'%s; usage: %s",
                                   eq ? "value of" : "word", eq ? word : word,
                                   eq && strncmp (word, "window", 6) == 0 ? " (4..1024 px)"
                                   : eq && strncmp (word, "overlap", 7) == 0 ? " (0..90 %)"
                                                                               : "",
                                   S_USAGE);
        }
        char err[1024];
        int64_t job = ensemble_start (ens, exp, window, overlap, range, util_time_ns (), err,
                                      sizeof err);
        if (job < 0) {
            log_warning ("control: refused 'ensemble %s': %s", exp->name, err);
            return cmd_refuse (cmd, 400, "ensemble %s: %s", exp->name, err);
        }
        if (cmd_commit (cmd))
            return -1;
        dispatch_now (cmd->self->dispatch);
    }
    text_put (&cmd->body, "{\"experiment\":");
    text_put_string (&cmd->body, exp->name);
    text_put (&cmd->body, ",\"ensemble\":");
    if (ensemble_put_status (ens, exp, &cmd->body) != 0)
        return cmd_refuse (cmd, 500, "cannot read the store: %s", store_error (cmd->self->store));
    text_put (&cmd->body, ",\"auto\":");
    if (exp->ensemble.window > 0)
        text_put (&cmd->body, "{\"window\":%d,\"overlap\":%d,\"idle_s\":%d}",
                  exp->ensemble.window, exp->ensemble.overlap, exp->ensemble.idle_s);
    else
        text_put (&cmd->body, "null");
    text_put (&cmd->body, "}");
    return 0;
}
