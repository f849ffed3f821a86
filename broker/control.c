// control.c — the broker's control socket (doc/control.md): status and
// listings, rate, policy, pause, retry, backfill, feedback, replay. Every
// change is a setting or event in the store, committed before the reply.

#include "broker/control.h"
#include "broker/control_cmd.h"
#include "broker/replay.h"
#include "broker/status.h"
#include "broker/text.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/path.h"
#include "common/secure.h"
#include "common/util.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_DEFAULT 1000  // rows of 'pairs' and 'log' by default
#define LIST_MAX 10000     // and at most

int
cmd_refuse (control_cmd_t *cmd, uint32_t status, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char line[1024];
    vsnprintf (line, sizeof line, fmt, ap);
    va_end (ap);
    cmd->status = status;
    cmd->body.len = 0;
    text_put (&cmd->body, "%s", line);
    return -1;
}

static int
s_parse_options (control_cmd_t *cmd, int argc, char **argv)
{
    static const struct option options[] = {{"experiment", required_argument, NULL, 'e'},
                                             {"state", required_argument, NULL, 's'},
                                             {"limit", required_argument, NULL, 'l'},
                                             {"after", required_argument, NULL, 'a'},
                                             {"as", required_argument, NULL, 'A'},
                                             {"speed", required_argument, NULL, 'S'},
                                             {"passes", required_argument, NULL, 'p'},
                                             {"overlap", required_argument, NULL, 'o'},
                                             {"iterations", required_argument, NULL, 'i'},
                                             {"deform", required_argument, NULL, 'd'},
                                             {"feedback-only", no_argument, NULL, 'F'},
                                             {"size", required_argument, NULL, 'z'},
                                             {"hours", required_argument, NULL, 'H'},
                                             {"tmpfs", no_argument, NULL, 'T'},
                                             {"dir", required_argument, NULL, 'D'},
                                             {"to", required_argument, NULL, 't'},
                                             {"page", required_argument, NULL, 'P'},
                                             {"reset", no_argument, NULL, 'R'},
                                             {"set", required_argument, NULL, 'X'},
                                             {"files", no_argument, NULL, 'L'},
                                             {"older-than", required_argument, NULL, 'O'},
                                             {NULL, 0, NULL, 0}};
    // The options whose value is kept as it is: where, and their bit.
    static const struct {
        int opt;
        size_t offset;
        unsigned bit;
    } text_options[] = {{'e', offsetof (control_cmd_t, experiment), CMD_OPT_EXP},
                        {'s', offsetof (control_cmd_t, state), CMD_OPT_STATE},
                        {'A', offsetof (control_cmd_t, as), CMD_OPT_AS},
                        {'S', offsetof (control_cmd_t, speed), CMD_OPT_SPEED},
                        {'p', offsetof (control_cmd_t, passes), CMD_OPT_PIV},
                        {'o', offsetof (control_cmd_t, overlap), CMD_OPT_PIV},
                        {'i', offsetof (control_cmd_t, iterations), CMD_OPT_PIV},
                        {'d', offsetof (control_cmd_t, deform), CMD_OPT_PIV},
                        {'z', offsetof (control_cmd_t, size), CMD_OPT_SIZE},
                        {'H', offsetof (control_cmd_t, hours), CMD_OPT_HOURS},
                        {'D', offsetof (control_cmd_t, dir), CMD_OPT_DIR},
                        {'t', offsetof (control_cmd_t, to), CMD_OPT_TO},
                        {'O', offsetof (control_cmd_t, older_than), CMD_OPT_OLDER_THAN}};
    cmd->limit = LIST_DEFAULT;
    optind = 0;  // GNU: start afresh
    opterr = 0;
    int opt;
    char *end;
    // '-' first: words that are no options stay in order (returned as 1);
    // getopt starts after argv[0], the command, which stays first.
    int words = 1;
    char **kept = argv;
    while ((opt = getopt_long (argc, argv, "-:e:", options, NULL)) != -1) {
        switch (opt) {
        case 1:
            kept[words++] = optarg;
            break;
        case 'e':
        case 's':
        case 'A':
        case 'S':
        case 'p':
        case 'o':
        case 'i':
        case 'd':
        case 'z':
        case 'H':
        case 'D':
        case 't':
        case 'O':
            for (size_t i = 0; i < sizeof text_options / sizeof text_options[0]; i++)
                if (text_options[i].opt == opt) {
                    *(const char **) ((char *) cmd + text_options[i].offset) = optarg;
                    cmd->given |= text_options[i].bit;
                }
            break;
        case 'l':
            cmd->limit = strtol (optarg, &end, 10);
            if (*end || end == optarg || cmd->limit < 1 || cmd->limit > LIST_MAX)
                return cmd_refuse (cmd, 400, "bad --limit '%s': 1 to %d", optarg, LIST_MAX);
            cmd->given |= CMD_OPT_LIMIT;
            break;
        case 'a':
            cmd->after = strtoll (optarg, &end, 10);
            if (*end || end == optarg || cmd->after < 0)
                return cmd_refuse (cmd, 400, "bad --after '%s': an id, 0 or more", optarg);
            cmd->given |= CMD_OPT_AFTER;
            break;
        case 'P':
            cmd->page = strtol (optarg, &end, 10);
            if (*end || end == optarg || cmd->page < 1 || cmd->page > 1000000)
                return cmd_refuse (cmd, 400, "bad --page '%s': 1 or more", optarg);
            cmd->given |= CMD_OPT_PAGE;
            break;
        case 'F':
            cmd->feedback_only = 1, cmd->given |= CMD_OPT_FEEDBACK_ONLY;
            break;
        case 'T':
            cmd->tmpfs = 1, cmd->given |= CMD_OPT_TMPFS;
            break;
        case 'R':
            cmd->reset = 1, cmd->given |= CMD_OPT_RESET;
            break;
        case 'L':
            cmd->files = 1, cmd->given |= CMD_OPT_FILES;
            break;
        case 'X':
            if (cmd->nset == (int) (sizeof cmd->set / sizeof cmd->set[0]))
                return cmd_refuse (cmd, 400, "at most %zu --set options",
                                   sizeof cmd->set / sizeof cmd->set[0]);
            cmd->set[cmd->nset++] = optarg, cmd->given |= CMD_OPT_SET;
            break;
        case ':':
            return cmd_refuse (cmd, 400, "option '%s' needs a value", argv[optind - 1]);
        default:
            return cmd_refuse (cmd, 400, "unknown option '%s'", argv[optind - 1]);
        }
    }
    cmd->argc = words;
    cmd->argv = kept;
    return 0;
}

// Refuses options the command does not take, and a word count out of range.
int
cmd_expect (control_cmd_t *cmd, unsigned options, int min_words, int max_words, const char *usage)
{
    if (cmd->given & ~options)
        return cmd_refuse (cmd, 400, "'%s' takes no such option; usage: %s", cmd->argv[0], usage);
    if (cmd->argc < min_words || cmd->argc > max_words)
        return cmd_refuse (cmd, 400, "usage: %s", usage);
    return 0;
}

// The experiment named, or NULL with a 404.
exp_t *
cmd_find_experiment (control_cmd_t *cmd, const char *name)
{
    store_experiment_t found;
    int rc = store_experiment_find (cmd->self->store, name, &found);
    if (rc < 0) {
        cmd_refuse (cmd, 500, "cannot read the store: %s", store_error (cmd->self->store));
        return NULL;
    }
    if (rc == 0) {
        cmd_refuse (cmd, 404, "no experiment '%s'", name);
        return NULL;
    }
    exp_t *exp = ingest_experiment (cmd->self->ingest, name, util_time_ns ());
    if (!exp)
        cmd_refuse (cmd, 500, "cannot read the store: %s", store_error (cmd->self->store));
    return exp;
}

exp_t *
cmd_setting_experiment (control_cmd_t *cmd, const char *name)
{
    store_t *store = cmd->self->store;
    store_experiment_t found;
    int rc = store_experiment_find (store, name, &found);
    if (rc == 0) {
        int64_t now = util_time_ns ();
        char what[256];
        snprintf (what, sizeof what, "created by the operator's '%s' before its first file",
                  cmd->argv[0]);
        if (store_experiment_create (store, name, NULL, NULL, now) < 0
            || store_event (store, "experiment", 0, 0, "", now) < 0)
            rc = -1;
        else {
            store_experiment_find (store, name, &found);
            store_event (store, "experiment", found.id, 0, what, now);
            cmd->created = 1;
        }
    }
    if (rc < 0) {
        cmd_refuse (cmd, 500, "cannot create experiment '%s': %s", name, store_error (store));
        return NULL;
    }
    exp_t *exp = ingest_experiment (cmd->self->ingest, name, util_time_ns ());
    if (!exp)
        cmd_refuse (cmd, 500, "cannot read the store: %s", store_error (store));
    return exp;
}

// The scope of -e EXP: its id, or 0 for the global default; -1 (refused)
// for an unknown experiment. A command that sets something ('sets') makes
// an unknown experiment instead (cmd_setting_experiment).
static int64_t
s_scope (control_cmd_t *cmd, exp_t **exp_p, int sets)
{
    *exp_p = NULL;
    if (!cmd->experiment)
        return 0;
    *exp_p = sets ? cmd_setting_experiment (cmd, cmd->experiment)
                  : cmd_find_experiment (cmd, cmd->experiment);
    return *exp_p ? (*exp_p)->id : -1;
}

void
cmd_put_scope (control_cmd_t *cmd, exp_t *exp)
{
    text_put (&cmd->body, "{\"scope\":");
    text_put_string (&cmd->body, exp ? exp->name : "*");
    if (cmd->created)
        text_put (&cmd->body, ",\"created\":true");
}

// Commits a change before it is answered; a 500 if the store fails.
int
cmd_commit (control_cmd_t *cmd)
{
    if (cmd->self->commit (cmd->self->arg) != 0)
        return cmd_refuse (cmd, 500, "cannot commit the change: %s", store_error (cmd->self->store));
    return 0;
}

// ---------------------------------------------------------------------------
// status, agents, experiments (status.c renders them)

// "KEY":[rows],... of status, experiments and agents (status_experiments,
// status_agents) within the command's -e, --page and --limit.
static int
s_put_list (control_cmd_t *cmd, int (*put) (text_t *, const stages_t *, const status_query_t *, int *,
                                      char *, size_t),
            int *cut)
{
    status_query_t q = {.experiment = cmd->experiment,
                        .page = cmd->page,
                        .most = cmd->given & CMD_OPT_LIMIT ? (size_t) cmd->limit : STATUS_ROWS};
    char err[600];
    if (put (&cmd->body, &cmd->self->stages, &q, cut, err, sizeof err) != 0)
        return cmd_refuse (cmd, 500, "%s", err);
    return 0;
}

// ,"page":K|null,"truncated":B: whether a list was cut.
static void
s_put_cut (control_cmd_t *cmd, int cut)
{
    if (cmd->page > 0)
        text_put (&cmd->body, ",\"page\":%ld", cmd->page);
    else
        text_put (&cmd->body, ",\"page\":null");
    text_put (&cmd->body, ",\"truncated\":%s", cut ? "true" : "false");
}

// -e EXP of status and experiments: 0 if it is known (or not given),
// -1 (404) if not.
static int
s_only (control_cmd_t *cmd)
{
    exp_t *exp;
    return s_scope (cmd, &exp, 0) < 0 ? -1 : 0;
}

static int
s_status (control_cmd_t *cmd)
{
    control_t *self = cmd->self;
    if (cmd_expect (cmd, CMD_OPT_EXP | CMD_OPT_PAGE | CMD_OPT_LIMIT, 1, 1,
                  "status [-e EXP] [--page K] [--limit N]"))
        return -1;
    self->commit (self->arg);  // what the status says is committed
    if (s_only (cmd))
        return -1;
    status_head (&cmd->body, &self->stages);
    int cut = 0;
    if (s_put_list (cmd, status_experiments, &cut))
        return -1;
    text_put (&cmd->body, ",");
    if (s_put_list (cmd, status_agents, &cut))
        return -1;
    s_put_cut (cmd, cut);
    text_put (&cmd->body, "}");
    return 0;
}

static int
s_agents (control_cmd_t *cmd)
{
    if (cmd_expect (cmd, CMD_OPT_PAGE | CMD_OPT_LIMIT, 1, 1, "agents [--page K] [--limit N]"))
        return -1;
    int cut = 0;
    text_put (&cmd->body, "{");
    if (s_put_list (cmd, status_agents, &cut))
        return -1;
    s_put_cut (cmd, cut);
    text_put (&cmd->body, "}");
    return 0;
}

static int
s_experiments (control_cmd_t *cmd)
{
    if (cmd_expect (cmd, CMD_OPT_EXP | CMD_OPT_PAGE | CMD_OPT_LIMIT, 1, 1,
                  "experiments [-e EXP] [--page K] [--limit N]"))
        return -1;
    cmd->self->commit (cmd->self->arg);
    if (s_only (cmd))
        return -1;
    int cut = 0;
    text_put (&cmd->body, "{");
    if (s_put_list (cmd, status_experiments, &cut))
        return -1;
    s_put_cut (cmd, cut);
    text_put (&cmd->body, "}");
    return 0;
}

// ---------------------------------------------------------------------------
// pairs, log

static const char *s_states[] = {"pending", "dispatched", "done", "failed", "skipped"};

typedef struct {
    control_cmd_t *cmd;
    long rows;
} s_list_t;

static int
s_put_pair (void *arg, const store_pair_info_t *p)
{
    s_list_t *list = arg;
    text_t *t = &list->cmd->body;
    if (list->rows++ == list->cmd->limit)
        return 1;
    text_put (t, "%s{\"pair\":%lld,\"stem\":", list->rows > 1 ? "," : "", (long long) p->pair);
    text_put_string (t, p->stem);
    text_put (t, ",\"state\":\"%s\",\"attempts\":%d,\"agent\":",
           p->state >= 0 && p->state <= 4 ? s_states[p->state] : "?", p->attempts);
    text_put_string (t, p->agent);
    text_put (t, ",\"error\":");
    text_put_string (t, p->error);
    text_put (t, ",\"created_ns\":%lld,\"dispatched_ns\":%lld,\"finished_ns\":%lld,\"latency_ms\":",
           (long long) p->created_ns, (long long) p->dispatched_ns, (long long) p->finished_ns);
    text_put_number (t, p->state == STORE_DONE && p->closed_ns > 0 && p->finished_ns > 0
                         ? (p->finished_ns - p->closed_ns) / 1e6
                         : NAN);
    text_put (t, "}");
    return 0;
}

static int
s_pairs (control_cmd_t *cmd)
{
    const char *usage = "pairs EXP [--state S] [--limit N] [--after ID]";
    if (cmd_expect (cmd, CMD_OPT_STATE | CMD_OPT_LIMIT | CMD_OPT_AFTER, 2, 2, usage))
        return -1;
    int state = -1;
    if (cmd->state) {
        for (int i = 0; i < 5; i++)
            if (strcmp (cmd->state, s_states[i]) == 0)
                state = i;
        if (state < 0)
            return cmd_refuse (cmd, 400,
                             "unknown state '%s' (known: pending, dispatched, done, failed, "
                             "skipped)",
                             cmd->state);
    }
    cmd->self->commit (cmd->self->arg);
    exp_t *exp = cmd_find_experiment (cmd, cmd->argv[1]);
    if (!exp)
        return -1;
    text_put (&cmd->body, "{\"experiment\":");
    text_put_string (&cmd->body, exp->name);
    text_put (&cmd->body, ",\"pairs\":[");
    s_list_t list = {cmd, 0};
    if (store_pairs_of (cmd->self->store, exp->id, state, cmd->after, (int) cmd->limit + 1,
                        s_put_pair, &list)
        < 0)
        return cmd_refuse (cmd, 500, "cannot read the store: %s", store_error (cmd->self->store));
    text_put (&cmd->body, "],\"truncated\":%s}", list.rows > cmd->limit ? "true" : "false");
    return 0;
}

static int
s_put_event (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
             int64_t pair, const char *payload)
{
    (void) experiment;
    s_list_t *list = arg;
    text_t *t = &list->cmd->body;
    if (list->rows++ == list->cmd->limit)
        return 1;
    text_put (t, "%s{\"id\":%lld,\"ts_ns\":%lld,\"kind\":", list->rows > 1 ? "," : "",
           (long long) id, (long long) ts_ns);
    text_put_string (t, kind);
    text_put (t, ",\"pair\":%lld,\"payload\":", (long long) pair);
    text_put_string (t, payload);
    text_put (t, "}");
    return 0;
}

static int
s_log (control_cmd_t *cmd)
{
    if (cmd_expect (cmd, CMD_OPT_LIMIT | CMD_OPT_AFTER, 2, 2, "log EXP [--after ID] [--limit N]"))
        return -1;
    cmd->self->commit (cmd->self->arg);
    exp_t *exp = cmd_find_experiment (cmd, cmd->argv[1]);
    if (!exp)
        return -1;
    text_put (&cmd->body, "{\"experiment\":");
    text_put_string (&cmd->body, exp->name);
    text_put (&cmd->body, ",\"events\":[");
    s_list_t list = {cmd, 0};
    if (store_events (cmd->self->store, exp->id, cmd->after, s_put_event, &list) < 0)
        return cmd_refuse (cmd, 500, "cannot read the store: %s", store_error (cmd->self->store));
    text_put (&cmd->body, "],\"truncated\":%s}", list.rows > cmd->limit ? "true" : "false");
    return 0;
}

// ---------------------------------------------------------------------------
// rate, policy, pause, resume

static int
s_rate (control_cmd_t *cmd)
{
    const char *usage = "rate N|max [-e EXP]";
    if (cmd_expect (cmd, CMD_OPT_EXP, 2, 2, usage))
        return -1;
    double rate = 0;
    char *end;
    if (strcmp (cmd->argv[1], "max") != 0) {
        rate = strtod (cmd->argv[1], &end);
        if (*end || end == cmd->argv[1] || !(rate >= 0.01 && rate <= 1e6))
            return cmd_refuse (cmd, 400, "bad rate '%s': pairs per second from 0.01 to 1e6, or max",
                             cmd->argv[1]);
    }
    exp_t *exp;
    int64_t id = s_scope (cmd, &exp, 1);
    if (id < 0)
        return -1;
    if (store_setting_set (cmd->self->store, id, "rate", cmd->argv[1], util_time_ns ()) != 0)
        return cmd_refuse (cmd, 500, "cannot record the rate: %s", store_error (cmd->self->store));
    if (cmd_commit (cmd))
        return -1;
    sched_set_rate (dispatch_sched (cmd->self->dispatch), id, rate);
    dispatch_now (cmd->self->dispatch);
    cmd_put_scope (cmd, exp);
    text_put (&cmd->body, ",\"rate_limit\":");
    text_put_number (&cmd->body, rate > 0 ? rate : NAN);
    text_put (&cmd->body, "}");
    return 0;
}

static int
s_policy (control_cmd_t *cmd)
{
    const char *usage = "policy all|latest|sample N [-e EXP]";
    if (cmd_expect (cmd, CMD_OPT_EXP, 2, 3, usage))
        return -1;
    sched_policy_t policy;
    char err[256], text[32];
    if (sched_policy_parse (cmd->argc - 1, cmd->argv + 1, &policy, err, sizeof err) != 0)
        return cmd_refuse (cmd, 400, "%s; usage: %s", err, usage);
    exp_t *exp;
    int64_t id = s_scope (cmd, &exp, 1);
    if (id < 0)
        return -1;
    sched_policy_format (policy, text, sizeof text);
    if (store_setting_set (cmd->self->store, id, "policy", text, util_time_ns ()) != 0)
        return cmd_refuse (cmd, 500, "cannot record the policy: %s", store_error (cmd->self->store));
    if (cmd_commit (cmd))
        return -1;
    sched_set_policy (dispatch_sched (cmd->self->dispatch), id, policy);
    dispatch_now (cmd->self->dispatch);
    cmd_put_scope (cmd, exp);
    text_put (&cmd->body, ",\"policy\":\"%s\"}", text);
    return 0;
}

static int
s_pause (control_cmd_t *cmd, int paused)
{
    if (cmd_expect (cmd, CMD_OPT_EXP, 1, 1, paused ? "pause [-e EXP]" : "resume [-e EXP]"))
        return -1;
    exp_t *exp;
    int64_t id = s_scope (cmd, &exp, 1);
    if (id < 0)
        return -1;
    if (store_setting_set (cmd->self->store, id, "paused", paused ? "1" : NULL, util_time_ns ())
        != 0)
        return cmd_refuse (cmd, 500, "cannot record the pause: %s", store_error (cmd->self->store));
    if (cmd_commit (cmd))
        return -1;
    sched_set_paused (dispatch_sched (cmd->self->dispatch), id, paused);
    dispatch_now (cmd->self->dispatch);
    cmd_put_scope (cmd, exp);
    text_put (&cmd->body, ",\"paused\":%s}", paused ? "true" : "false");
    return 0;
}

// ---------------------------------------------------------------------------
// retry, backfill

static int
s_reset (control_cmd_t *cmd, store_state_t from)
{
    if (cmd_expect (cmd, 0, 2, 2, from == STORE_FAILED ? "retry EXP" : "backfill EXP"))
        return -1;
    exp_t *exp = cmd_find_experiment (cmd, cmd->argv[1]);
    if (!exp)
        return -1;
    int moved = store_pairs_reset (cmd->self->store, exp->id, from, util_time_ns (),
                                   ingest_queue_again, cmd->self->ingest);
    if (moved < 0)
        return cmd_refuse (cmd, 500, "cannot move the pairs of '%s': %s", exp->name,
                         store_error (cmd->self->store));
    if (cmd_commit (cmd))
        return -1;
    text_put (&cmd->body, "{\"experiment\":");
    text_put_string (&cmd->body, exp->name);
    text_put (&cmd->body, ",\"moved\":%d}", moved);
    return 0;
}

// ---------------------------------------------------------------------------
// feedback

static int
s_put_feedback (control_cmd_t *cmd, exp_t *exp)
{
    control_t *self = cmd->self;
    const feedback_settings_t *fs =
        exp && exp->feedback.own ? &exp->feedback.settings : results_feedback (self->results);
    feedback_pi_t none;
    feedback_pi_reset (&none);
    char json[2048];
    if (feedback_settings_json (fs, exp ? &exp->feedback.pi : &none, json, sizeof json) < 0)
        return cmd_refuse (cmd, 500, "feedback settings over the %zu bytes shown of them",
                           sizeof json - 1);
    cmd_put_scope (cmd, exp);
    text_put (&cmd->body, ",\"feedback\":%s}", json);
    return 0;
}

// Records feedback settings: "enabled=0|1 key=value ...".
static int
s_save_feedback (control_cmd_t *cmd, int64_t id, const feedback_settings_t *fs)
{
    char text[1024];
    if (feedback_settings_format (fs, text, sizeof text) < 0)
        return cmd_refuse (cmd, 500, "feedback settings over the %zu bytes recorded of them",
                           sizeof text - 1);
    if (store_setting_set (cmd->self->store, id, "feedback", text, util_time_ns ()) != 0)
        return cmd_refuse (cmd, 500, "cannot record the feedback settings: %s",
                         store_error (cmd->self->store));
    return cmd_commit (cmd);
}

static int
s_feedback (control_cmd_t *cmd)
{
    const char *usage = "feedback show|on|off|set KEY=VALUE... [-e EXP]";
    if (cmd_expect (cmd, CMD_OPT_EXP, 2, 40, usage))
        return -1;
    exp_t *exp;
    const char *what = cmd->argv[1];
    if (strcmp (what, "show") == 0 && cmd->argc == 2)
        return s_scope (cmd, &exp, 0) < 0 ? -1 : s_put_feedback (cmd, exp);
    // Checked before an unknown experiment is made for them: its settings
    // would be the global ones.
    exp = cmd->experiment ? zhashx_lookup (ingest_experiments (cmd->self->ingest), cmd->experiment)
                          : NULL;
    feedback_settings_t fs =
        exp && exp->feedback.own ? exp->feedback.settings : *results_feedback (cmd->self->results);
    if ((strcmp (what, "on") == 0 || strcmp (what, "off") == 0) && cmd->argc == 2)
        fs.enabled = strcmp (what, "on") == 0;
    else if (strcmp (what, "set") == 0 && cmd->argc > 2) {
        char err[512];
        if (feedback_settings_apply (&fs, cmd->argc - 2, cmd->argv + 2, err, sizeof err) != 0)
            return cmd_refuse (cmd, 400, "%s", err);
        // w only a stereo experiment's fields have: an experiment known
        // to be planar would follow a value that is never there.
        const feedback_quantity_info_t *q = feedback_quantity_get ((int) fs.quantity);
        if (q && q->stereo && exp && stats_has_w (cmd->self->stages.stats, exp) == 0)
            return cmd_refuse (cmd, 400,
                               "quantity '%s' of experiment '%s' refused: it needs the "
                               "out-of-plane velocity w, and its fields are planar (one "
                               "camera, no w)",
                               q->name, exp->name);
    }
    else
        return cmd_refuse (cmd, 400, "usage: %s", usage);
    int64_t id = s_scope (cmd, &exp, 1);
    if (id < 0)
        return -1;
    if (s_save_feedback (cmd, id, &fs))
        return -1;
    if (exp) {
        exp->feedback.settings = fs;
        exp->feedback.own = 1;
    }
    else
        *results_feedback (cmd->self->results) = fs;
    // 'on' starts afresh the controllers it turns on: the time it was off
    // is no interval to integrate over.
    if (strcmp (what, "on") == 0 && exp)
        feedback_pi_reset (&exp->feedback.pi);
    else if (strcmp (what, "on") == 0) {
        zhashx_t *experiments = ingest_experiments (cmd->self->ingest);
        for (exp_t *e = zhashx_first (experiments); e; e = zhashx_next (experiments))
            if (!e->feedback.own)
                feedback_pi_reset (&e->feedback.pi);
    }
    return s_put_feedback (cmd, exp);
}

// ---------------------------------------------------------------------------
// replay (the engine: replay.c)

// A replayed file event: into ingest as a watcher's would go.
static int
s_replay_file_event (void *arg, exp_t *exp, const char *name, int64_t size, int64_t mtime_ns,
                     int64_t closed_ns)
{
    return ingest_file (arg, exp, name, size, mtime_ns, closed_ns);
}

// What a replay takes from the experiment it replays, unless it has its own
// (an experiment made by `calibrate NAME` or `mask NAME` before `replay
// --as NAME`): the calibration and the mask, recorded as its settings. 0 or
// -1 (refused).
static int
s_replay_inherit (control_cmd_t *cmd, const exp_t *of, exp_t *exp, int64_t now)
{
    control_t *self = cmd->self;
    char text[512];
    if (!exp->calib.own && of->calib.own) {
        if (piv_calib_format (&of->calib.calib, text, sizeof text) < 0
            || store_setting_set (self->store, exp->id, "calibration", text, now) != 0)
            return cmd_refuse (cmd, 500, "cannot record the calibration of '%s': %s", exp->name,
                               store_error (self->store));
        stats_set_calib (self->stages.stats, exp, &of->calib.calib);
    }
    // A stereo source's rig and camera folders (issue 26): its sets pair
    // and compute as the source's did.
    if (of->piv.cameras && !exp->piv.cameras) {
        char *rig = strdup (of->piv.cameras);
        if (!rig || store_setting_set (self->store, exp->id, "cameras", rig, now) != 0) {
            free (rig);
            return cmd_refuse (cmd, 500, "cannot record the rig of '%s': %s", exp->name,
                               store_error (self->store));
        }
        exp->piv.cameras = rig;
    }
    const char *folders = ingest_cameras (self->ingest, of);
    if (strcmp (folders, ingest_cameras (self->ingest, exp)) != 0) {
        char why[512], copy[CONFIG_STRING];
        snprintf (copy, sizeof copy, "%s", folders);
        if (ingest_cameras_set (self->ingest, exp, copy, 0, why, sizeof why) != 0
            || store_setting_set (self->store, exp->id, "pairing_cameras", copy, now) != 0)
            return cmd_refuse (cmd, 500, "cannot set the camera folders of '%s': %s", exp->name,
                               store_error (self->store));
    }
    // Its own mask (if any) again over its new settings, else the source's.
    int own = exp->piv.mask != NULL;
    const char *from = own ? exp->piv.mask : of->piv.mask;
    char *mask = from ? strdup (from) : NULL;
    if (from && !mask)
        return cmd_refuse (cmd, 500, "no memory for the mask of '%s'", exp->name);
    int rc = 0;
    if (mask && ((!own && store_setting_set (self->store, exp->id, "mask", mask, now) != 0)
                 || stats_set_mask (exp, mask) != 0))
        rc = cmd_refuse (cmd, 500, "cannot record the mask of '%s': %s", exp->name,
                         store_error (self->store));
    free (mask);
    return rc;
}

static int
s_replay (control_cmd_t *cmd)
{
    control_t *self = cmd->self;
    const char *usage = "replay EXP [--as NAME] [--speed X|max] [--passes P] [--overlap O] "
                        "[--iterations I] [--deform D] [--set KEY=VALUE]... [--feedback-only]";
    if (cmd_expect (cmd, CMD_OPT_AS | CMD_OPT_SPEED | CMD_OPT_PIV | CMD_OPT_SET
                        | CMD_OPT_FEEDBACK_ONLY,
                    2, 2, usage))
        return -1;
    double speed = 1;
    char *end;
    if (cmd->speed && strcmp (cmd->speed, "max") == 0)
        speed = 0;
    else if (cmd->speed) {
        speed = strtod (cmd->speed, &end);
        if (*end || end == cmd->speed || !(speed >= 0.01 && speed <= 1e6))
            return cmd_refuse (cmd, 400, "bad --speed '%s': 0.01 to 1e6, or max", cmd->speed);
    }
    if (cmd->feedback_only && (cmd->given & (CMD_OPT_PIV | CMD_OPT_SET)))
        return cmd_refuse (cmd, 400, "--feedback-only computes nothing: PIV options make no sense");
    exp_t *of = cmd_find_experiment (cmd, cmd->argv[1]);
    if (!of)
        return -1;
    char name[PATH_MAX];
    store_experiment_t found;
    exp_t *adopted = NULL;  // --as an experiment a command made, without files of its own
    if (cmd->as) {
        snprintf (name, sizeof name, "%s", cmd->as);  // s_check_names took it
        int rc = store_experiment_find (self->store, name, &found);
        if (rc < 0)
            return cmd_refuse (cmd, 500, "cannot read the store: %s", store_error (self->store));
        if (rc == 1 && (!(adopted = ingest_experiment (self->ingest, name, util_time_ns ()))
                        || adopted->replay || adopted == of))
            return cmd_refuse (cmd, 400, "experiment '%s' exists already: choose another --as",
                               name);
    }
    else
        for (int k = 1;; k++) {
            // NAME.replayK, NAME cut between two characters where the whole
            // would be over NAME_MAX: a name the farm takes, like any other.
            char suffix[24];
            size_t tail = (size_t) snprintf (suffix, sizeof suffix, ".replay%d", k);
            size_t keep = strlen (of->name);
            if (keep + tail > NAME_MAX)
                for (keep = NAME_MAX - tail; keep && (of->name[keep] & 0xc0) == 0x80;)
                    keep--;
            snprintf (name, sizeof name, "%.*s%s", (int) keep, of->name, suffix);
            if (store_experiment_find (self->store, name, &found) == 0)
                break;
        }
    char settings[512];
    int rule;
    if (control_replay_settings (cmd, of, settings, sizeof settings, &rule))
        return -1;
    char err[PATH_MAX + 600];
    replay_host_t host = {self->store, self->loop, self->publish, s_replay_file_event,
                          self->ingest};
    replay_t *r = replay_new (&host, of, speed, cmd->feedback_only, err, sizeof err);
    if (!r)
        return cmd_refuse (cmd, 500, "%s", err);
    int64_t now = util_time_ns ();
    // Its own settings, the source's as they are now: a later change of
    // the default is not the source's.
    if (adopted && ingest_adopt (self->ingest, adopted, of->source, settings, now, err,
                                 sizeof err)
                       != 0) {
        replay_destroy (&r);
        return cmd_refuse (cmd, 400, "cannot replay as '%s': %s", name, err);
    }
    if (!adopted && store_experiment_create (self->store, name, of->source, settings, now) < 0) {
        replay_destroy (&r);
        return cmd_refuse (cmd, 500, "cannot create '%s': %s", name, store_error (self->store));
    }
    exp_t *exp = adopted ? adopted : ingest_experiment (self->ingest, name, now);
    if (!exp) {
        replay_destroy (&r);
        return cmd_refuse (cmd, 500, "cannot create '%s': %s", name, store_error (self->store));
    }
    if (s_replay_inherit (cmd, of, exp, now) != 0 || cmd_commit (cmd)) {
        replay_destroy (&r);
        return -1;
    }
    if (rule >= 0) {
        // The source's own rule (or --set pairing=RULE): the files it
        // replays pair as the source's did.
        char why[512];
        if (ingest_pairing_set (self->ingest, exp, rule, 0, why, sizeof why) != 0
            || store_setting_set (self->store, exp->id, "pairing", pairing_rule_get (rule)->name,
                                  now)
                   != 0
            || cmd_commit (cmd)) {
            replay_destroy (&r);
            return cmd->status != 200 ? -1 : cmd_refuse (cmd, 500, "cannot set the pairing rule "
                                                                   "of '%s': %s",
                                                         name, why);
        }
    }
    size_t total = replay_total (r);
    log_notice ("replaying '%s' as '%s': %zu %s at speed %s", of->name, name, total,
                cmd->feedback_only ? "feedback messages" : "file events",
                cmd->speed ? cmd->speed : "1");
    replay_start (r, exp, now);
    text_put (&cmd->body, "{\"experiment\":");
    text_put_string (&cmd->body, of->name);
    text_put (&cmd->body, ",\"as\":");
    text_put_string (&cmd->body, name);
    text_put (&cmd->body, ",\"speed\":");
    text_put_number (&cmd->body, speed > 0 ? speed : NAN);
    text_put (&cmd->body, ",\"files\":%zu,\"feedback_only\":%s}", cmd->feedback_only ? 0 : total,
              cmd->feedback_only ? "true" : "false");
    return 0;
}

// ---------------------------------------------------------------------------
// provision, release, archive (doc/storage.md)

// A storage call's status: 200 goes on (the change committed), others are
// refused with its message.
static int
s_storage_status (control_cmd_t *cmd, int status, const char *err)
{
    if (status != 200)
        return cmd_refuse (cmd, (uint32_t) status, "%s", err);
    return cmd_commit (cmd);
}

// The reply of provision, release and archive: the experiment's storage.
static void
s_put_exp_reply (control_cmd_t *cmd, exp_t *exp)
{
    text_put (&cmd->body, "{\"experiment\":");
    text_put_string (&cmd->body, exp->name);
    status_exp_storage (&cmd->body, exp);
    text_put (&cmd->body, "}");
}

static int
s_provision (control_cmd_t *cmd)
{
    const char *usage = "provision EXP --size SIZE --hours H [--tmpfs|--dir PATH]";
    if (cmd_expect (cmd, CMD_OPT_SIZE | CMD_OPT_HOURS | CMD_OPT_TMPFS | CMD_OPT_DIR, 2, 2, usage))
        return -1;
    int64_t size;
    double hours;
    char *end;
    if (!cmd->size || !cmd->hours)
        return cmd_refuse (cmd, 400, "provision needs --size and --hours; usage: %s", usage);
    if (util_parse_size (cmd->size, &size) != 0 || size < (1 << 20))
        return cmd_refuse (cmd, 400, "bad --size '%s': a size of 1M or more, such as 20G",
                         cmd->size);
    hours = strtod (cmd->hours, &end);
    if (*end || end == cmd->hours || !(hours >= 0.001 && hours <= 24 * 366))
        return cmd_refuse (cmd, 400, "bad --hours '%s': 0.001 to 8784", cmd->hours);
    if (cmd->tmpfs && cmd->dir)
        return cmd_refuse (cmd, 400, "--tmpfs and --dir exclude each other; usage: %s", usage);
    char err[PATH_MAX * 2];
    int status = storage_provision (cmd->self->storage, cmd->argv[1], size, hours, cmd->dir, err,
                                    sizeof err);
    if (s_storage_status (cmd, status, err))
        return -1;
    s_put_exp_reply (cmd, zhashx_lookup (ingest_experiments (cmd->self->ingest), cmd->argv[1]));
    return 0;
}

static int
s_archive_or_release (control_cmd_t *cmd, int release)
{
    if (cmd_expect (cmd, CMD_OPT_TO, 2, 2, release ? "release EXP [--to DIR]" : "archive EXP --to DIR"))
        return -1;
    exp_t *exp = cmd_find_experiment (cmd, cmd->argv[1]);
    if (!exp)
        return -1;
    const char *to = cmd->to ? cmd->to : cmd->self->cfg->storage.archive_dir;
    if (!release && !*to)
        return cmd_refuse (cmd, 400, "archive needs --to DIR (or storage/archive_dir)");
    char err[PATH_MAX * 2];
    int status = release ? storage_release (cmd->self->storage, exp, cmd->to, err, sizeof err)
                         : storage_archive (cmd->self->storage, exp, to, 0, err, sizeof err);
    if (s_storage_status (cmd, status, err))
        return -1;
    s_put_exp_reply (cmd, exp);
    return 0;
}

static int
s_archive_cmd (control_cmd_t *cmd)
{
    return s_archive_or_release (cmd, 0);
}

static int
s_release_cmd (control_cmd_t *cmd)
{
    return s_archive_or_release (cmd, 1);
}

// ---------------------------------------------------------------------------
// warnings (doc/storage.md)

// warnings [list]: the warnings in force, numbered as 'clear' takes them;
// warnings clear N|all: hides them while they last (an operator's change).
static int
s_warnings (control_cmd_t *cmd)
{
    const char *usage = "warnings [list] | warnings clear N|all";
    if (cmd_expect (cmd, 0, 1, 3, usage))
        return -1;
    control_t *self = cmd->self;
    int cleared = 0;
    if (cmd->argc > 1 && strcmp (cmd->argv[1], "clear") == 0) {
        if (cmd->argc != 3)
            return cmd_refuse (cmd, 400, "warnings clear needs N (as listed) or all; usage: %s",
                             usage);
        long which = 0;
        char *end, err[512];
        if (strcmp (cmd->argv[2], "all") != 0) {
            which = strtol (cmd->argv[2], &end, 10);
            if (*end || end == cmd->argv[2] || which < 1 || which > WARNINGS_MAX)
                return cmd_refuse (cmd, 400, "bad warning '%s': a number as listed (1 to %d), or all",
                                 cmd->argv[2], storage_warnings (self->storage));
        }
        cleared = storage_warnings_clear (self->storage, (int) which, err, sizeof err);
        if (cleared < 0)
            return cmd_refuse (cmd, strstr (err, "no warning") ? 404 : 500, "%s", err);
        if (cmd_commit (cmd))
            return -1;
    }
    else if (cmd->argc > 2 || (cmd->argc == 2 && strcmp (cmd->argv[1], "list") != 0))
        return cmd_refuse (cmd, 400, "usage: %s", usage);
    text_put (&cmd->body, "{\"cleared\":%d,", cleared);
    storage_put_state (self->storage, &cmd->body);
    text_put (&cmd->body, "}");
    return 0;
}

// ---------------------------------------------------------------------------
// The socket

static int
s_pause_cmd (control_cmd_t *cmd)
{
    return s_pause (cmd, 1);
}

static int
s_resume_cmd (control_cmd_t *cmd)
{
    return s_pause (cmd, 0);
}

static int
s_retry_cmd (control_cmd_t *cmd)
{
    return s_reset (cmd, STORE_FAILED);
}

static int
s_backfill_cmd (control_cmd_t *cmd)
{
    return s_reset (cmd, STORE_SKIPPED);
}

// Every command, and whether it changes the farm: with security/curve on,
// only an operator's key may run those (doc/security.md). 'reads' is the
// one first argument with which a changing command only reads ("" : with
// its first argument alone, as 'calibrate EXP'); 'names' is 1 when its
// first argument is an experiment's name ('calibrate' checks its own: '*'
// is the global default).
static const struct {
    const char *name;
    int (*run) (control_cmd_t *cmd);
    int changes;
    const char *reads;
    int names;
} s_commands[] = {
    {"status", s_status, 0, NULL, 0},
    {"agents", s_agents, 0, NULL, 0},
    {"experiments", s_experiments, 0, NULL, 0},
    {"pairs", s_pairs, 0, NULL, 1},
    {"log", s_log, 0, NULL, 1},
    {"rate", s_rate, 1, NULL, 0},
    {"policy", s_policy, 1, NULL, 0},
    {"pause", s_pause_cmd, 1, NULL, 0},
    {"resume", s_resume_cmd, 1, NULL, 0},
    {"retry", s_retry_cmd, 1, NULL, 1},
    {"backfill", s_backfill_cmd, 1, NULL, 1},
    {"feedback", s_feedback, 1, "show", 0},
    {"replay", s_replay, 1, NULL, 1},
    {"provision", s_provision, 1, NULL, 1},
    {"archive", s_archive_cmd, 1, NULL, 1},
    {"release", s_release_cmd, 1, NULL, 1},
    {"warnings", s_warnings, 1, "list", 0},
    {"calibrate", control_calibrate, 1, "", 0},
    {"stats", control_stats, 0, NULL, 1},
    {"mask", control_mask, 1, NULL, 1},
    {"piv", control_piv, 1, "", 0},
    {"ensemble", control_ensemble, 1, "status", 1},
    {"backup", control_backup, 1, "status", 0},
    {"purge", control_purge, 1, NULL, 1},
    {"vacuum", control_vacuum, 1, NULL, 0},
    {"forget-agents", control_forget_agents, 1, NULL, 0},
};

// 'text' as it may be shown in a reply line and the log (at most 'size' -
// 1 bytes): control characters, and every byte above 0x7e when the text is
// not valid UTF-8, as \xNN; cut with "..." past 120 bytes.
static const char *
s_printable (const char *text, char *out, size_t size)
{
    size_t n = strlen (text), where, len = 0;
    int invalid = util_utf8_invalid ((const unsigned char *) text, n, &where);
    for (size_t i = 0; i < n && len + 8 < size; i++) {
        unsigned char c = (unsigned char) text[i];
        if (i == 120) {
            len += (size_t) snprintf (out + len, size - len, "...");
            break;
        }
        if (c < 0x20 || c == 0x7f || (invalid && c > 0x7e))
            len += (size_t) snprintf (out + len, size - len, "\\x%02x", c);
        else
            out[len++] = (char) c;
    }
    out[len] = '\0';
    return out;
}

// Refuses a name the operator gave that is no plain experiment name
// (path_check_component), logging why; 'what' is how the command line
// names it ("--as", "-e", "experiment").
int
cmd_refuse_name (control_cmd_t *cmd, const char *what, const char *name)
{
    char why[128], shown[512];
    if (path_check_component (name, why, sizeof why) == 0)
        return 0;
    s_printable (name, shown, sizeof shown);
    log_warning ("control: refused '%s': bad %s '%s': %s", cmd->argv[0], what, shown, why);
    return cmd_refuse (cmd, 400, "%s: bad %s '%s': %s", cmd->argv[0], what, shown, why);
}

// The same for a directory given with --to or --dir, or a file: an
// absolute path without control characters (storage.c checks where it
// leads).
int
cmd_refuse_path (control_cmd_t *cmd, const char *what, const char *dir)
{
    char shown[512];
    const char *why = NULL;
    for (const char *p = dir; *p && !why; p++)
        if ((unsigned char) *p < 0x20 || *p == 0x7f)
            why = "a control character";
    if (*dir != '/')
        why = "not an absolute path (one on the broker's host)";
    if (!why)
        return 0;
    s_printable (dir, shown, sizeof shown);
    log_warning ("control: refused '%s': bad %s '%s': %s", cmd->argv[0], what, shown, why);
    return cmd_refuse (cmd, 400, "%s: bad %s '%s': %s", cmd->argv[0], what, shown, why);
}

// Every name and directory of the command, checked before it runs (before
// the store is read or written): -1 (refused, logged) for the first bad one.
static int
s_check_names (control_cmd_t *cmd, size_t command)
{
    if (cmd->experiment && cmd_refuse_name (cmd, "-e", cmd->experiment))
        return -1;
    if (cmd->as && cmd_refuse_name (cmd, "--as", cmd->as))
        return -1;
    if (s_commands[command].names && cmd->argc > 1
        && cmd_refuse_name (cmd, "experiment", cmd->argv[1]))
        return -1;
    if (cmd->to && cmd_refuse_path (cmd, "--to", cmd->to))
        return -1;
    if (cmd->dir && cmd_refuse_path (cmd, "--dir", cmd->dir))
        return -1;
    return 0;
}

// 1 if the command changes the farm as given (not its reading form).
static int
s_changes (control_cmd_t *cmd, size_t command)
{
    const char *reads = s_commands[command].reads;
    if (!s_commands[command].changes)
        return 0;
    if (reads && cmd->argc > 1 && strcmp (cmd->argv[1], reads) == 0)
        return 0;
    // An option makes a change of the one-word form ('piv EXP --reset').
    return !(reads && !*reads && cmd->argc == 2 && !cmd->given);
}

// 1 if the command may run for this client: it only reads, CURVE is off,
// or the client's key is an operator's.
static int
s_allowed (control_cmd_t *cmd, size_t command)
{
    control_t *self = cmd->self;
    // A key whose certificate was removed reads nothing more either.
    if (!peers_allowed (self->peers, cmd->peer, BROKER_ROLE_READER))
        return 0;
    if (!s_changes (cmd, command) || !peers_curve (self->peers))
        return 1;
    return peers_allowed (self->peers, cmd->peer, BROKER_ROLE_OPERATOR);
}

static void
s_run (control_cmd_t *cmd, const char *line)
{
    char **words = NULL, err[256];
    int n = cli_split (line, &words, err, sizeof err);
    if (n < 0) {
        cmd_refuse (cmd, 400, "bad command line: %s", err);
        return;
    }
    if (n == 0) {
        cmd_refuse (cmd, 400, "empty command");
        free (words);
        return;
    }
    if (s_parse_options (cmd, n, words) == 0) {
        int (*run) (control_cmd_t *) = NULL;
        size_t command = 0;
        for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
            if (strcmp (cmd->argv[0], s_commands[i].name) == 0) {
                run = s_commands[i].run;
                command = i;
            }
        cmd->status = 200;
        if (!run)
            cmd_refuse (cmd, 400,
                      "unknown command '%.100s' (known: status, agents, experiments, pairs, log, "
                      "rate, policy, pause, resume, retry, backfill, feedback, replay, provision, "
                      "archive, release, warnings, calibrate, stats, mask, piv, ensemble, backup, purge, vacuum, forget-agents)",
                      cmd->argv[0]);
        else if (!s_allowed (cmd, command)) {
            cmd_refuse (cmd, 403,
                      "refused: '%s' changes the farm and your key is not an operator's",
                      s_commands[command].name);
            log_warning ("control: refused '%s' to key %s, not an operator's",
                         s_commands[command].name, cmd->peer ? cmd->peer : "(none)");
        }
        else if (s_check_names (cmd, command))
            ;  // refused, logged
        else if (s_changes (cmd, command) && store_begin (cmd->self->store) != 0)
            // Another process holds the store, or its files are gone: the
            // change could not be recorded, so it is not made.
            cmd_refuse (cmd, 503, "'%s' not done: the store takes no change now: %s",
                        cmd->argv[0], store_error (cmd->self->store));
        else if (run (cmd) == 0 && cmd->body.failed)
            cmd_refuse (cmd, 500, "no memory for the answer");
        else if (cmd->status == 200 && cmd->body.len > PROTO_MAX_BODY)
            cmd_refuse (cmd, 500, "the answer is over %d bytes: ask for fewer rows (--limit)",
                      PROTO_MAX_BODY);
    }
    free (words);
}

control_t *
control_new (const control_host_t *host)
{
    control_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->stages = host->stages;
    self->cfg = host->stages.cfg;
    self->store = host->stages.store;
    self->ingest = host->stages.ingest;
    self->dispatch = host->stages.dispatch;
    self->results = host->stages.results;
    self->storage = host->stages.storage;
    self->loop = host->loop;
    self->publish = host->publish;
    self->settings = host->settings;
    self->peers = host->peers;
    self->arg = host->arg;
    self->commit = host->commit;
    if (!(self->lifecycle = lifecycle_new (host->loop, host->stages.store))) {
        free (self);
        return NULL;
    }
    return self;
}

void
control_destroy (control_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    lifecycle_destroy (&(*self_p)->lifecycle);
    free (*self_p);
    *self_p = NULL;
}

void
control_on_request (control_t *self, zsock_t *reader)
{
    zmsg_t *zmsg = zmsg_recv (reader);
    if (!zmsg)
        return;
    zframe_t *identity = zmsg_pop (zmsg);
    proto_msg_t msg = {0}, reply = {.command = PROTO_REPLY};
    char err[512];
    // The frames the client sent carry the key ZAP authenticated (the
    // identity the ROUTER adds does not, always); kept past the decoding,
    // which frees them.
    char peer[64] = "";
    const char *key = secure_peer_key (zmsg_first (zmsg));
    if (key)
        snprintf (peer, sizeof peer, "%s", key);
    control_cmd_t cmd = {.self = self, .peer = *peer ? peer : NULL};
    if (proto_decode (&zmsg, &msg, err, sizeof err) != 0 || msg.command != PROTO_REQUEST)
        cmd_refuse (&cmd, 400, "bad request: %s", msg.command ? "expected REQUEST" : err);
    else {
        s_run (&cmd, msg.text);
        if (cmd.status == 200 && strcmp (msg.text, "status") != 0)
            log_info ("control: %s", msg.text);
    }
    reply.status = cmd.status;
    reply.text = cmd.body.data ? cmd.body.data : "";
    proto_send (&reply, identity, reader);
    free (cmd.body.data);
    proto_msg_release (&msg);
    zframe_destroy (&identity);
}
