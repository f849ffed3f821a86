// status.c — the run: status (and --watch), agents, experiments, pairs and
// log, as tables of the broker's replies.

#include "ctl/ctl.h"

#include "common/cli.h"
#include "common/proto.h"
#include "common/util.h"

#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The numbers of an experiment in a status reply: member, field of ctl_exp_t.
static const struct {
    const char *member;
    size_t offset;
} s_numbers[] = {{"files", offsetof (ctl_exp_t, files)},
                 {"pending", offsetof (ctl_exp_t, pending)},
                 {"dispatched", offsetof (ctl_exp_t, dispatched)},
                 {"done", offsetof (ctl_exp_t, done)},
                 {"failed", offsetof (ctl_exp_t, failed)},
                 {"skipped", offsetof (ctl_exp_t, skipped)},
                 {"queue", offsetof (ctl_exp_t, queue)},
                 {"arrivals_10s", offsetof (ctl_exp_t, arrivals)},
                 {"rate_10s", offsetof (ctl_exp_t, rate10)},
                 {"rate_1m", offsetof (ctl_exp_t, rate60)},
                 {"latency_median_ms", offsetof (ctl_exp_t, p50)},
                 {"latency_p99_ms", offsetof (ctl_exp_t, p99)},
                 {"rate_limit", offsetof (ctl_exp_t, limit)},
                 {"replay.speed", offsetof (ctl_exp_t, replay_speed)},
                 {"replay.sent", offsetof (ctl_exp_t, replay_sent)},
                 {"replay.total", offsetof (ctl_exp_t, replay_total)}};

void
ctl_exp_read (jdoc_t *doc, int i, ctl_exp_t *e)
{
    char p[64];
    snprintf (p, sizeof p, "$.experiments[%d]", i);
    for (size_t k = 0; k < sizeof s_numbers / sizeof s_numbers[0]; k++)
        *(double *)((char *)e + s_numbers[k].offset) =
            jdoc_number (doc, NAN, "%s.%s", p, s_numbers[k].member);
    e->name = jdoc_string (doc, "%s.experiment", p);
    e->policy = jdoc_string (doc, "%s.policy", p);
    e->paused = jdoc_bool (doc, 0, "%s.paused", p);
    e->replay = jdoc_type_at (doc, "%s.replay", p) == JDOC_OBJECT;
    e->replay_of = jdoc_string (doc, "%s.replay.of", p);
    e->replay_finished = jdoc_bool (doc, 0, "%s.replay.finished", p);
    e->replay_feedback_only = jdoc_bool (doc, 0, "%s.replay.feedback_only", p);
}

int
ctl_exp_index (jdoc_t *doc, const char *name)
{
    int n = jdoc_length (doc, "$.experiments");
    for (int i = 0; i < n; i++) {
        const char *e = jdoc_string (doc, "$.experiments[%d].experiment", i);
        if (e && strcmp (e, name) == 0)
            return i;
    }
    return -1;
}

const char *
ctl_warning_level (jdoc_t *doc, int i)
{
    const char *level = jdoc_string (doc, "$.warnings[%d].level", i);
    return level && strcmp (level, "critical") == 0 ? "CRITICAL" : "WARNING";
}

// " (replay of 'run7' at 10x, 120/512 files sent)", or "" when not a replay.
static const char *
s_replay_note (const ctl_exp_t *e)
{
    static char buf[PROTO_MAX_STRING + 64]; // one per printf
    char speed[32] = "max";
    if (!e->replay)
        return "";
    if (!isnan (e->replay_speed))
        snprintf (speed, sizeof speed, "%gx", e->replay_speed);
    snprintf (buf, sizeof buf, " (replay of '%s' at %s, %.0f/%.0f %s sent)",
              e->replay_of ? e->replay_of : "?", speed, isnan (e->replay_sent) ? 0 : e->replay_sent,
              isnan (e->replay_total) ? 0 : e->replay_total,
              e->replay_feedback_only ? "messages" : "files");
    return buf;
}

// The rows of doc's 'array' (a list of the reply); with none, prints
// 'none' as a line and gives 0.
static int
s_rows (jdoc_t *doc, const char *array, const char *none)
{
    int n = jdoc_length (doc, "%s", array);
    if (n > 0)
        return n;
    printf ("%s\n", none);
    return 0;
}

// A whole number of experiment i's running ensemble job into buf ("-"
// when absent).
static const char *
s_ensemble_num (jdoc_t *doc, int i, const char *member, char *buf, size_t size)
{
    snprintf (buf, size, "%s",
              ctl_num (jdoc_number (doc, NAN, "$.experiments[%d].ensemble.%s", i, member), "%.0f"));
    return buf;
}

// The ensemble jobs running: "ensemble job 3 of run7: pass 2 of 3 (16 px),
// 12 of 25 chunk(s), 200 pairs".
static void
s_print_ensembles_of (jdoc_t *doc, int n)
{
    for (int i = 0, first = 1; i < n; i++) {
        if (jdoc_type_at (doc, "$.experiments[%d].ensemble", i) != JDOC_OBJECT)
            continue;
        if (first)
            printf ("\n"), first = 0;
        const char *name = jdoc_string (doc, "$.experiments[%d].experiment", i);
        char v[7][32];
        printf ("ensemble job %s of %s: pass %s of %s (%s px), %s of %s chunk(s), %s pairs\n",
                s_ensemble_num (doc, i, "job", v[0], sizeof v[0]), name ? name : "?",
                s_ensemble_num (doc, i, "pass", v[1], sizeof v[1]),
                s_ensemble_num (doc, i, "passes", v[2], sizeof v[2]),
                s_ensemble_num (doc, i, "window", v[3], sizeof v[3]),
                s_ensemble_num (doc, i, "chunks_done", v[4], sizeof v[4]),
                s_ensemble_num (doc, i, "chunks", v[5], sizeof v[5]),
                s_ensemble_num (doc, i, "pairs", v[6], sizeof v[6]));
    }
}

// The files of each experiment in no pair (nothing vanishes): "exp1: 2
// file(s) refused by the pairing rule 'ab' (a pair: <stem>_a.tif +
// <stem>_b.tif)", then the first few named with why.
static void
s_print_unpaired_of (jdoc_t *doc, int n)
{
    for (int i = 0, first = 1; i < n; i++) {
        const char *name = jdoc_string (doc, "$.experiments[%d].experiment", i);
        int64_t waiting = jdoc_int (doc, 0, "$.experiments[%d].unpaired.waiting", i);
        int64_t refused = jdoc_int (doc, 0, "$.experiments[%d].unpaired.refused", i);
        if (!waiting && !refused)
            continue;
        if (first)
            printf ("\n"), first = 0;
        const char *rule = jdoc_string (doc, "$.experiments[%d].unpaired.rule", i);
        const char *expects = jdoc_string (doc, "$.experiments[%d].unpaired.expects", i);
        printf ("%s: %lld file(s) in no pair: %lld refused by the pairing rule '%s' (a pair: %s), "
                "%lld waiting for a partner\n",
                name ? name : "?", (long long) (waiting + refused), (long long) refused,
                rule ? rule : "?", expects ? expects : "?", (long long) waiting);
        int files = jdoc_length (doc, "$.experiments[%d].unpaired.files", i);
        for (int f = 0; f < files; f++) {
            const char *file = jdoc_string (doc, "$.experiments[%d].unpaired.files[%d].name", i, f);
            const char *why = jdoc_string (doc, "$.experiments[%d].unpaired.files[%d].why", i, f);
            printf ("  %s: %s\n", file ? file : "?", why ? why : "?");
        }
    }
}

// The experiments of doc: pairs by state, then the flow of each.
static void
s_print_experiments_of (jdoc_t *doc)
{
    int n = s_rows (doc, "$.experiments", "no experiments yet");
    if (!n)
        return;
    int w = ctl_width (doc, "$.experiments", "experiment", 10, 40);
    printf ("%-*s %8s %8s %10s %8s %8s %8s\n", w, "EXPERIMENT", "FILES", "PENDING", "DISPATCHED",
            "DONE", "FAILED", "SKIPPED");
    for (int i = 0; i < n; i++) {
        ctl_exp_t e;
        ctl_exp_read (doc, i, &e);
        printf ("%-*s %8s %8s %10s %8s %8s %8s\n", w, e.name ? e.name : "?",
                ctl_num (e.files, "%.0f"), ctl_num (e.pending, "%.0f"),
                ctl_num (e.dispatched, "%.0f"), ctl_num (e.done, "%.0f"),
                ctl_num (e.failed, "%.0f"), ctl_num (e.skipped, "%.0f"));
    }
    printf ("\n%-*s %6s %9s %9s %9s %9s %9s  %-10s %-12s %s\n", w, "EXPERIMENT", "QUEUE", "PAIRS/s",
            "1 min", "ARRIVE/s", "LAT p50", "p99", "POLICY", "RATE LIMIT", "STATE");
    for (int i = 0; i < n; i++) {
        ctl_exp_t e;
        ctl_exp_read (doc, i, &e);
        printf ("%-*s %6s %9s %9s %9s %9s %9s  %-10s %-12s %s%s\n", w, e.name ? e.name : "?",
                ctl_num (e.queue, "%.0f"), ctl_num (e.rate10, "%.1f"), ctl_num (e.rate60, "%.1f"),
                ctl_num (e.arrivals, "%.1f"), ctl_ms (e.p50), ctl_ms (e.p99),
                e.policy ? e.policy : "-", isnan (e.limit) ? "max" : ctl_num (e.limit, "%g/s"),
                e.paused ? "paused" : "running", s_replay_note (&e));
    }
    s_print_unpaired_of (doc, n);
    s_print_ensembles_of (doc, n);
}

static void
s_print_agents_of (jdoc_t *doc)
{
    int n = s_rows (doc, "$.agents", "no agents connected");
    if (!n)
        return;
    int w = ctl_width (doc, "$.agents", "id", 5, 40);
    int wh = ctl_width (doc, "$.agents", "host", 4, 32);
    printf ("%-*s %-*s %5s %6s %6s %8s  %s\n", w, "AGENT", wh, "HOST", "CORES", "CREDIT", "TASKS",
            "DONE", "LAST HEARTBEAT");
    for (int i = 0; i < n; i++) {
        const char *id = jdoc_string (doc, "$.agents[%d].id", i);
        const char *host = jdoc_string (doc, "$.agents[%d].host", i);
        double age = jdoc_number (doc, NAN, "$.agents[%d].last_heartbeat_ms", i);
        printf ("%-*s %-*s %5s %6s %6s %8s  %s ago\n", w, id ? id : "?", wh, host ? host : "?",
                ctl_num (jdoc_number (doc, NAN, "$.agents[%d].cores", i), "%.0f"),
                ctl_num (jdoc_number (doc, NAN, "$.agents[%d].credit", i), "%.0f"),
                ctl_num (jdoc_number (doc, NAN, "$.agents[%d].tasks", i), "%.0f"),
                ctl_num (jdoc_number (doc, NAN, "$.agents[%d].done", i), "%.0f"),
                isnan (age) ? "-" : ctl_num (age / 1000, "%.1f s"));
    }
}

// Storage (doc/storage.md): warnings first, then allocations and archives.
static void
s_print_storage (jdoc_t *doc)
{
    int n = jdoc_length (doc, "$.warnings");
    for (int i = 0; i < n; i++) {
        const char *message = jdoc_string (doc, "$.warnings[%d].message", i);
        printf ("%s: %s\n", ctl_warning_level (doc, i), message ? message : "?");
    }
    if (jdoc_bool (doc, 0, "$.guard_paused"))
        printf ("DISPATCH PAUSED by the free-space guard: %s\n",
                jdoc_string (doc, "$.guard_why") ? jdoc_string (doc, "$.guard_why") : "?");
    int shown = 0, m = jdoc_length (doc, "$.experiments");
    for (int i = 0; i < m; i++) {
        const char *name = jdoc_string (doc, "$.experiments[%d].experiment", i);
        int alloc = jdoc_type_at (doc, "$.experiments[%d].allocation", i) == JDOC_OBJECT;
        int archive = jdoc_type_at (doc, "$.experiments[%d].archive", i) == JDOC_OBJECT;
        if (!alloc && !archive)
            continue;
        if (!shown++)
            printf ("storage:\n");
        printf ("  %s:", name ? name : "?");
        if (alloc) {
            char size[32], used[32];
            double expires = jdoc_number (doc, NAN, "$.experiments[%d].allocation.expires_ns", i);
            double left = (expires - (double)util_time_ns ()) / 1e9;
            int64_t u = jdoc_int (doc, -1, "$.experiments[%d].allocation.used_bytes", i);
            printf (
                " %s of %s at %s, %s used, %s %s%s",
                jdoc_string (doc, "$.experiments[%d].allocation.kind", i),
                util_format_size (jdoc_int (doc, 0, "$.experiments[%d].allocation.size_bytes", i),
                                  size, sizeof size),
                jdoc_string (doc, "$.experiments[%d].allocation.path", i),
                u >= 0 ? util_format_size (u, used, sizeof used) : "-",
                left >= 0 ? "expires in" : "expired", ctl_duration (fabs (left)),
                left >= 0 ? "" : " ago");
            const char *state = jdoc_string (doc, "$.experiments[%d].allocation.state", i);
            if (state && strcmp (state, "releasing") == 0)
                printf (", releasing");
        }
        if (archive) {
            const char *error = jdoc_string (doc, "$.experiments[%d].archive.error", i);
            printf (
                "%s archive to %s %s, %s/%s file(s) verified, %s removed%s%s", alloc ? ";" : "",
                jdoc_string (doc, "$.experiments[%d].archive.to", i),
                jdoc_string (doc, "$.experiments[%d].archive.state", i),
                ctl_num (jdoc_number (doc, NAN, "$.experiments[%d].archive.copied", i) +
                             jdoc_number (doc, NAN, "$.experiments[%d].archive.already", i),
                         "%.0f"),
                ctl_num (jdoc_number (doc, NAN, "$.experiments[%d].archive.files", i), "%.0f"),
                ctl_num (jdoc_number (doc, NAN, "$.experiments[%d].archive.removed", i), "%.0f"),
                error ? ": " : "", error ? error : "");
        }
        printf ("\n");
    }
    if (n || shown || jdoc_bool (doc, 0, "$.guard_paused"))
        printf ("\n");
}

// "showing 200 of 5000 experiments (...)" when the broker summarised a list.
static void
s_print_shown (jdoc_t *doc, const char *list)
{
    int64_t total = jdoc_int (doc, -1, "$.%s_total", list);
    int64_t shown = jdoc_int (doc, -1, "$.%s_shown", list);
    if (total < 0 || shown < 0 || shown >= total)
        return;
    int64_t page = jdoc_int (doc, 0, "$.page");
    if (page > 0)
        printf ("showing %lld of %lld %s: page %lld, by name (--page K for another)\n",
                (long long)shown, (long long)total, list, (long long)page);
    else
        printf ("showing %lld of %lld %s: the busiest (--page K for all, by name)\n",
                (long long)shown, (long long)total, list);
}

static void
s_print_status (jdoc_t *doc)
{
    double uptime = jdoc_number (doc, NAN, "$.uptime_s");
    const char *why = jdoc_string (doc, "$.store_error");
    const char *state = jdoc_string (doc, "$.store_state");
    const char *label = !state                        ? "  -- STORE CANNOT COMMIT: "
                        : strcmp (state, "busy") == 0 ? "  -- STORE BUSY: "
                        : strcmp (state, "lost") == 0 ? "  -- STORE LOST: "
                                                      : "  -- STORE CANNOT COMMIT: ";
    printf ("broker up %s, %s pair(s) queued, %s result(s) recorded since start%s%s\n",
            ctl_duration (uptime), ctl_num (jdoc_number (doc, NAN, "$.queue"), "%.0f"),
            ctl_num (jdoc_number (doc, NAN, "$.results"), "%.0f"),
            jdoc_bool (doc, 1, "$.store_ok") ? "" : label,
            jdoc_bool (doc, 1, "$.store_ok") || !why ? "" : why);
    printf ("rate: %s pairs/s over 10 s, %s pairs/s over 1 min\n",
            ctl_num (jdoc_number (doc, NAN, "$.rate_10s"), "%.1f"),
            ctl_num (jdoc_number (doc, NAN, "$.rate_1m"), "%.1f"));
    const char *policy = jdoc_string (doc, "$.policy");
    printf ("default: policy %s, rate limit %s, %s\n\n", policy ? policy : "-",
            ctl_limit (jdoc_number (doc, NAN, "$.rate_limit")),
            jdoc_bool (doc, 0, "$.paused") ? "paused" : "running");
    s_print_storage (doc);
    s_print_experiments_of (doc);
    s_print_shown (doc, "experiments");
    printf ("\n");
    s_print_agents_of (doc);
    s_print_shown (doc, "agents");
}

static void
s_print_agents (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    s_print_agents_of (doc);
    s_print_shown (doc, "agents");
}

static void
s_print_experiments (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    s_print_experiments_of (doc);
    s_print_shown (doc, "experiments");
    int n = jdoc_length (doc, "$.experiments");
    if (n <= 0)
        return;
    int w = ctl_width (doc, "$.experiments", "experiment", 10, 40);
    printf ("\n%-*s %-19s  %-*s %s\n", w, "EXPERIMENT", "CREATED", w, "SOURCE", "PIV SETTINGS");
    for (int i = 0; i < n; i++) {
        const char *name = jdoc_string (doc, "$.experiments[%d].experiment", i);
        const char *source = jdoc_string (doc, "$.experiments[%d].source", i);
        const char *settings = jdoc_string (doc, "$.experiments[%d].settings", i);
        int64_t created = jdoc_int (doc, 0, "$.experiments[%d].created_ns", i);
        char when[64] = "-";
        if (created > 0)
            snprintf (when, sizeof when, "%s %.8s", ctl_date (created), ctl_clock (created));
        printf ("%-*s %-19s  %-*s %s\n", w, name ? name : "?", when, w, source ? source : "-",
                settings && *settings ? settings : "(configured)");
    }
}

// Time to catch up with the camera: backlog / (rate - arrivals).
static const char *
s_catch_up (const ctl_exp_t *e)
{
    double backlog = e->pending + e->dispatched;
    double net = e->rate10 - e->arrivals;
    if (isnan (backlog) || backlog <= 0)
        return "caught up";
    if (e->paused)
        return "paused";
    if (isnan (net))
        return "-";
    static char buf[64]; // one per printf
    double scale = fmax (e->rate10, e->arrivals);
    if (net > 0.02 * scale && net > 0) {
        snprintf (buf, sizeof buf, "catches up in %s", ctl_duration (backlog / net));
        return buf;
    }
    if (e->rate10 <= 0)
        return "stalled (nothing computed in 10 s)";
    if (net >= -0.02 * scale)
        return "keeping up";
    snprintf (buf, sizeof buf, "falling behind by %.1f pairs/s", -net);
    return buf;
}

static void
s_print_progress (jdoc_t *doc)
{
    int n = jdoc_length (doc, "$.experiments");
    if (n <= 0)
        return;
    int w = ctl_width (doc, "$.experiments", "experiment", 10, 40);
    printf ("\n%-*s %-37s %15s  %s\n", w, "EXPERIMENT", "PROGRESS (done, failed, skipped)", "PAIRS",
            "BACKLOG");
    for (int i = 0; i < n; i++) {
        ctl_exp_t e;
        ctl_exp_read (doc, i, &e);
        double finished = e.done + e.failed + e.skipped;
        double all = finished + e.pending + e.dispatched;
        char count[48];
        snprintf (count, sizeof count, "%s/%s", ctl_num (finished, "%.0f"), ctl_num (all, "%.0f"));
        printf ("%-*s %-37s %15s  %s\n", w, e.name ? e.name : "?", ctl_bar (finished, all, 30),
                count, s_catch_up (&e));
    }
}

int
ctl_run_status (ctl_t *ctl, ctl_args_t *args)
{
    const char *text = ctl_value (args, "count");
    int watch = ctl_value (args, "watch") || text;
    long count = watch ? LONG_MAX : 1;
    if (text && (ctl_parse_count ("--count", text, LONG_MAX, &count) != 0))
        return EXIT_USAGE;
    int tty = isatty (STDOUT_FILENO);
    char *line = cli_join (args->nsend, args->send); // status [-e EXP] [--page K] [--limit N]
    if (!line) {
        ctl_error ("no memory");
        return EXIT_FAILED;
    }
    for (long k = 0; k < count && !ctl_stop; k++) {
        if (k > 0)
            ctl_nap (1000);
        if (ctl_stop)
            break;
        char *body;
        jdoc_t *doc;
        int rc = ctl_ask_json (ctl, line, &body, &doc);
        if (rc == CTL_INTERRUPTED)
            break;
        if (rc != 0) {
            free (line);
            return rc;
        }
        if (ctl->json)
            printf ("%s\n", body); // one snapshot per line
        else {
            if (watch && tty)
                printf ("\033[H\033[2J");
            else if (k > 0)
                printf ("\n");
            if (watch)
                printf ("pivctl status at %.8s (every second; Ctrl-C to stop)\n\n",
                        ctl_clock (util_time_ns ()));
            s_print_status (doc);
            if (watch)
                s_print_progress (doc);
        }
        fflush (stdout);
        jdoc_destroy (&doc);
        free (body);
    }
    free (line);
    return EXIT_OK;
}

static void
s_print_pairs (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    const char *name = jdoc_string (doc, "$.experiment");
    char none[PROTO_MAX_STRING + 64];
    snprintf (none, sizeof none, "%s: no pairs%s", name ? name : "?",
              ctl_value (args, "state") || ctl_value (args, "after") ? " of that kind" : " yet");
    int n = s_rows (doc, "$.pairs", none);
    if (!n)
        return;
    int64_t first = jdoc_int (doc, 0, "$.pairs[0].created_ns");
    printf ("%s: %d pair(s), local times of %s\n", name ? name : "?", n,
            first > 0 ? ctl_date (first) : "-");
    int ws = ctl_width (doc, "$.pairs", "stem", 4, 40);
    int wa = ctl_width (doc, "$.pairs", "agent", 5, 28);
    printf ("%8s  %-*s %-10s %3s  %-*s  %-12s  %-12s  %-12s %9s\n", "PAIR", ws, "STEM", "STATE",
            "TRY", wa, "AGENT", "CREATED", "DISPATCHED", "FINISHED", "LATENCY");
    int64_t last = 0;
    for (int i = 0; i < n; i++) {
        char p[32];
        snprintf (p, sizeof p, "$.pairs[%d]", i);
        const char *agent = jdoc_string (doc, "%s.agent", p);
        const char *error = jdoc_string (doc, "%s.error", p);
        const char *state = jdoc_string (doc, "%s.state", p);
        last = jdoc_int (doc, 0, "%s.pair", p);
        printf ("%8" PRId64 "  %-*s %-10s %3s  %-*s  %-12s  %-12s  %-12s %9s\n", last, ws,
                jdoc_string (doc, "%s.stem", p) ? jdoc_string (doc, "%s.stem", p) : "?",
                state ? state : "?", ctl_num (jdoc_number (doc, NAN, "%s.attempts", p), "%.0f"), wa,
                agent && *agent ? agent : "-", ctl_clock (jdoc_int (doc, 0, "%s.created_ns", p)),
                ctl_clock (jdoc_int (doc, 0, "%s.dispatched_ns", p)),
                ctl_clock (jdoc_int (doc, 0, "%s.finished_ns", p)),
                ctl_ms (jdoc_number (doc, NAN, "%s.latency_ms", p)));
        if (error && *error)
            printf ("%8s  error: %s\n", "", error);
    }
    if (jdoc_bool (doc, 0, "$.truncated"))
        printf ("(more pairs follow: add --after %" PRId64 ")\n", last);
}

static void
s_print_log (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    const char *name = jdoc_string (doc, "$.experiment");
    char none[PROTO_MAX_STRING + 64];
    snprintf (none, sizeof none, "%s: no events%s", name ? name : "?",
              ctl_value (args, "after") ? " after that" : "");
    int n = s_rows (doc, "$.events", none);
    if (!n)
        return;
    printf ("%s: %d event(s), local times\n", name ? name : "?", n);
    int wk = ctl_width (doc, "$.events", "kind", 4, 12);
    char day[16] = "";
    int64_t last = 0;
    for (int i = 0; i < n; i++) {
        int64_t ts = jdoc_int (doc, 0, "$.events[%d].ts_ns", i);
        if (ts > 0 && strcmp (ctl_date (ts), day) != 0) {
            snprintf (day, sizeof day, "%s", ctl_date (ts));
            printf ("-- %s\n", day);
        }
        last = jdoc_int (doc, 0, "$.events[%d].id", i);
        int64_t pair = jdoc_int (doc, 0, "$.events[%d].pair", i);
        const char *kind = jdoc_string (doc, "$.events[%d].kind", i);
        const char *payload = jdoc_string (doc, "$.events[%d].payload", i);
        char pair_text[32] = "";
        if (pair > 0)
            snprintf (pair_text, sizeof pair_text, "pair %" PRId64, pair);
        printf ("%-12s #%-7" PRId64 " %-*s %-12s %s\n", ctl_clock (ts), last, wk, kind ? kind : "?",
                pair_text, payload ? payload : "");
    }
    if (jdoc_bool (doc, 0, "$.truncated"))
        printf ("(more events follow: add --after %" PRId64 ")\n", last);
}

CTL_PRINTED (ctl_run_agents, s_print_agents)
CTL_PRINTED (ctl_run_experiments, s_print_experiments)
CTL_PRINTED (ctl_run_pairs, s_print_pairs)
CTL_PRINTED (ctl_run_log, s_print_log)
