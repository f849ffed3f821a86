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

#define S_USAGE "ensemble EXP [window=PX] [overlap=PERCENT] [pairs=A-B] | ensemble EXP status"

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
    if (cmd_expect (cmd, 0, 2, 5, S_USAGE))
        return -1;
    exp_t *exp = cmd_find_experiment (cmd, cmd->argv[1]);
    if (!exp)
        return -1;
    ensemble_t *ens = cmd->self->stages.ensemble;
    int status = cmd->argc == 3 && strcmp (cmd->argv[2], "status") == 0;
    if (!status) {
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
    text_put (&cmd->body, "}");
    return 0;
}
