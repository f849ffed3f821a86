// test_ops.c — operating a run from the console, as an operator does: the
// real broker, watcher and agents on ipc:// sockets in a temporary
// directory, steered and watched with the real pivctl (doc/pivctl.md), its
// answers read as JSON, and the store read (read-only) as the witness of
// what was dispatched when.

#include "common/ask.h"
#include "common/config.h"
#include "common/proto.h"
#include "piv/field.h"
#include "piv/calib.h"
#include "piv/settings.h"
#include "common/jdoc.h"
#include "store/store.h"
#include "tests/testutil.h"

#include <check.h>
#include <czmq.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHIFT_U 3.3 // the flow pivfarm-synth renders by default, px
#define SHIFT_V -1.7

static tu_farm_t s_farm; // the farm of the running test; others[0]: a 'pivctl tail'

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
}

static void
s_teardown (void)
{
    tu_farm_release (&s_farm);
}

// The broker, the watcher and one agent 'a1'.
static void
s_start_farm (void)
{
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    // Files landing from now on arrive as they land, not all at once from
    // the watcher's first scan.
    char *log = NULL;
    for (int i = 0; i < 100 && !(log && strstr (log, "watching")); i++) {
        free (log);
        usleep (20000);
        log = tu_slurp (tu_path (s_farm.dir, "watcher.log"), NULL);
    }
    ck_assert_msg (log && strstr (log, "watching"), "the watcher did not start: %s",
                   log ? log : "");
    free (log);
}

// The farm of s_start_farm with n pairs <prefix>_0001 ... landed and done.
static void
s_start_farm_done (const char *prefix, int n)
{
    tu_farm_render (&s_farm, n, prefix);
    s_start_farm ();
    tu_farm_land (&s_farm, prefix, 1, n, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, n, 60).done, n);
}

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// ---------------------------------------------------------------------------
// The store, read-only, as the witness

// The pairs of exp1 as the store has them, id order.
#define PAIRS_MAX 256
typedef struct {
    int64_t pair;
    char stem[64];
    int state;
    int64_t dispatched_ns;
} s_pair_t;

typedef struct {
    s_pair_t pairs[PAIRS_MAX];
    int n;
} s_pairs_t;

static int
s_pair_cb (void *arg, const store_pair_info_t *p)
{
    s_pairs_t *out = arg;
    if (out->n == PAIRS_MAX)
        return 1;
    s_pair_t *q = &out->pairs[out->n++];
    q->pair = p->pair;
    snprintf (q->stem, sizeof q->stem, "%s", p->stem);
    q->state = p->state;
    q->dispatched_ns = p->dispatched_ns;
    return 0;
}

static void
s_read_pairs (s_pairs_t *out)
{
    char err[512];
    out->n = 0;
    store_t *store = store_open_readonly (tu_path (s_farm.dir, "farm.db"), err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    store_experiment_t exp;
    ck_assert (store_experiment_find (store, "exp1", &exp) == 1);
    ck_assert (store_pairs_of (store, exp.id, -1, 0, 0, s_pair_cb, out) >= 0);
    store_destroy (&store);
}

static int
s_by_dispatch (const void *a, const void *b)
{
    int64_t x = ((const s_pair_t *)a)->dispatched_ns, y = ((const s_pair_t *)b)->dispatched_ns;
    return (x > y) - (x < y);
}

// ---------------------------------------------------------------------------
// pivctl

// Runs pivctl -c conf with the arguments (NULL-terminated); its exit status,
// its output (stdout and stderr) in out.
static int
s_pivctl_v (char *out, size_t len, const char *first, va_list ap)
{
    return tu_farm_pivctl_v (&s_farm, out, len, first, ap);
}

static int
s_pivctl (char *out, size_t len, const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    int rc = s_pivctl_v (out, len, first, ap);
    va_end (ap);
    return rc;
}

// Runs 'pivctl --json' with the arguments, which must succeed, and returns
// its answer parsed (caller destroys).
static jdoc_t *
s_ask (const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    jdoc_t *doc = tu_farm_ask_v (&s_farm, first, ap);
    va_end (ap);
    return doc;
}

// The index of exp1 in the "experiments" array of doc; fails if absent.
static int
s_exp1 (jdoc_t *doc)
{
    int n = jdoc_length (doc, "$.experiments");
    for (int i = 0; i < n; i++) {
        const char *name = jdoc_string (doc, "$.experiments[%d].experiment", i);
        if (name && strcmp (name, "exp1") == 0)
            return i;
    }
    ck_abort_msg ("no exp1 among %d experiment(s)", n);
    return -1;
}

// Asserts that pivctl with the arguments exits 'expected' with one line
// starting "pivctl: " that holds 'named'.
static void
s_refused_ap (int expected, const char *named, const char *first, va_list ap)
{
    char out[8192];
    int rc = s_pivctl_v (out, sizeof out, first, ap);
    ck_assert_msg (rc == expected, "pivctl %s: exit %d, expected %d: %s", first, rc, expected,
                   out);
    ck_assert_msg (strncmp (out, "pivctl: ", 8) == 0 && strstr (out, named) &&
                       strchr (out, '\n') == out + strlen (out) - 1,
                   "pivctl %s: expected one line naming %s: %s", first, named, out);
}

// Refused at work (exit 1): no such experiment, no answer.
static void
s_refused (const char *named, const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    s_refused_ap (1, named, first, ap);
    va_end (ap);
}

// Refused as bad usage (exit 2), here or by the broker (400).
static void
s_bad_usage (const char *named, const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    s_refused_ap (2, named, first, ap);
    va_end (ap);
}

// Starts 'pivctl tail EXP --count N --json' in the background, and waits
// until it has subscribed.
static void
s_tail_start (const char *experiment, int count)
{
    char n[16];
    snprintf (n, sizeof n, "%d", count);
    unlink (tu_path (s_farm.dir, "tail.log"));
    // --new: exp1 may not exist yet (its files land after the tail starts).
    char *argv[] = {(char *)tu_bin ("pivctl"), "-c",      s_farm.conf, "--json", "tail",
                    (char *)experiment,        "--count", n,           "--new", NULL};
    s_farm.others[0] = tu_spawn (argv, tu_path (s_farm.dir, "tail.log"));
    usleep (500000); // a subscriber sees only what is published after it joined
}

// Waits until the tail has exited (its count seen), and parses its lines
// into docs (at most max). Returns how many.
static int
s_tail_wait (jdoc_t **docs, int max, int timeout_s)
{
    for (int i = 0; i < timeout_s * 20 && tu_alive (s_farm.others[0]); i++)
        usleep (50000);
    char *log = tu_slurp (tu_path (s_farm.dir, "tail.log"), NULL);
    ck_assert_msg (!tu_alive (s_farm.others[0]), "tail did not see its count: %s", log ? log : "");
    s_farm.others[0] = 0;
    ck_assert (log != NULL);
    int n = 0;
    for (char *line = strtok (log, "\n"); line; line = strtok (NULL, "\n")) {
        char err[256];
        ck_assert_msg (n < max, "more messages than expected: %s", line);
        docs[n] = jdoc_parse (line, err, sizeof err);
        ck_assert_msg (docs[n] != NULL, "not JSON: %s: %s", err, line);
        n++;
    }
    free (log);
    return n;
}

// ---------------------------------------------------------------------------
// The commands against a running farm

START_TEST (pivctl_queries_show_the_farm_as_the_store_records_it)
{
    s_start_farm_done ("q", 3);

    jdoc_t *doc = s_ask ("status", NULL);
    int e = s_exp1 (doc);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[%d].files", e), 6);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[%d].done", e), 3);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[%d].pending", e), 0);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.results"), 3);
    ck_assert_str_eq (jdoc_string (doc, "$.policy"), "all");
    ck_assert_int_eq (jdoc_type_at (doc, "$.rate_limit"), JDOC_NULL);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.paused"), 0);
    ck_assert_str_eq (jdoc_string (doc, "$.agents[0].id"), "a1");
    ck_assert (jdoc_is_number (doc, "$.experiments[%d].latency_median_ms", e));
    jdoc_destroy (&doc);

    doc = s_ask ("agents", NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.agents"), 1);
    ck_assert_str_eq (jdoc_string (doc, "$.agents[0].id"), "a1");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.agents[0].done"), 3);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.agents[0].tasks"), 0);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.agents[0].credit"), 1);
    ck_assert (jdoc_number (doc, -1, "$.agents[0].last_heartbeat_ms") < 1000);
    jdoc_destroy (&doc);

    doc = s_ask ("experiments", NULL);
    e = s_exp1 (doc);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[%d].source", e), "exp1");
    const char *settings = jdoc_string (doc, "$.experiments[%d].settings", e);
    ck_assert_msg (settings && strstr (settings, "passes=32,16"), "%s", settings);
    jdoc_destroy (&doc);

    doc = s_ask ("pairs", "exp1", "--state", "done", NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.pairs"), 3);
    for (int i = 0; i < 3; i++) {
        char stem[32];
        snprintf (stem, sizeof stem, "q_%04d", i + 1);
        ck_assert_str_eq (jdoc_string (doc, "$.pairs[%d].stem", i), stem);
        ck_assert_str_eq (jdoc_string (doc, "$.pairs[%d].state", i), "done");
        ck_assert_str_eq (jdoc_string (doc, "$.pairs[%d].agent", i), "a1");
        int64_t created = jdoc_int (doc, 0, "$.pairs[%d].created_ns", i);
        int64_t dispatched = jdoc_int (doc, 0, "$.pairs[%d].dispatched_ns", i);
        int64_t finished = jdoc_int (doc, 0, "$.pairs[%d].finished_ns", i);
        ck_assert (created > 0 && created <= dispatched && dispatched <= finished);
        ck_assert (jdoc_number (doc, -1, "$.pairs[%d].latency_ms", i) >= 0);
    }
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.truncated"), 0);
    jdoc_destroy (&doc);
    doc = s_ask ("pairs", "exp1", "--state", "pending", NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.pairs"), 0);
    jdoc_destroy (&doc);
    doc = s_ask ("pairs", "exp1", "--limit", "2", NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.pairs"), 2);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.truncated"), 1);
    int64_t second = jdoc_int (doc, 0, "$.pairs[1].pair");
    jdoc_destroy (&doc);
    char after[32];
    snprintf (after, sizeof after, "%lld", (long long)second);
    doc = s_ask ("pairs", "exp1", "--after", after, NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.pairs"), 1);
    ck_assert_str_eq (jdoc_string (doc, "$.pairs[0].stem"), "q_0003");
    jdoc_destroy (&doc);

    // The log: each file, pair, dispatch and result of exp1.
    doc = s_ask ("log", "exp1", NULL);
    int n = jdoc_length (doc, "$.events"), files = 0, dispatches = 0, results = 0;
    for (int i = 0; i < n; i++) {
        const char *kind = jdoc_string (doc, "$.events[%d].kind", i);
        files += strcmp (kind, "file") == 0;
        dispatches += strcmp (kind, "dispatch") == 0;
        results += strcmp (kind, "result") == 0;
    }
    ck_assert_msg (files == 6 && dispatches == 3 && results == 3,
                   "%d files %d dispatches %d results", files, dispatches, results);
    jdoc_destroy (&doc);

    // The same as tables: each shows what it names.
    char out[16384];
    const char *tables[][4] = {{"status", NULL, "exp1", "a1"},
                               {"agents", NULL, "a1", NULL},
                               {"experiments", NULL, "exp1", "passes=32,16"},
                               {"pairs", "exp1", "q_0003", "done"},
                               {"log", "exp1", "q_0002_b.tif", "result"},
                               {"feedback", "show", "mean_u", NULL}};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        const char **t = tables[i];
        ck_assert_int_eq (s_pivctl (out, sizeof out, t[0], t[1], NULL), 0);
        ck_assert_msg (strstr (out, t[2]) && (!t[3] || strstr (out, t[3])), "pivctl %s: %s", t[0],
                       out);
    }

    // export: the stored fields as pivfarm-piv txt files, the known flow.
    const char *dir = tu_path (s_farm.dir, "out/fields");
    char fields[4096];
    snprintf (fields, sizeof fields, "%s", dir);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "export", "exp1", "-o", fields, NULL), 0);
    ck_assert_msg (strstr (out, "exported 3 field(s) of exp1"), "%s", out);
    for (int i = 1; i <= 3; i++) {
        char path[4200], err[512];
        snprintf (path, sizeof path, "%s/q_%04d.txt", fields, i);
        piv_field_t *f = piv_field_read_txt (path, err, sizeof err);
        ck_assert_msg (f != NULL, "%s", err);
        piv_field_stats_t st;
        piv_field_stats (f, PIV_FLAG_VALID, &st);
        ck_assert_msg (fabs (st.mean_u - SHIFT_U) < 0.1 && fabs (st.mean_v - SHIFT_V) < 0.1,
                       "%s: mean (%.3f, %.3f)", path, st.mean_u, st.mean_v);
        piv_field_destroy (&f);
    }
}
END_TEST

START_TEST (pivctl_steering_commands_answer_with_the_setting_now_in_force)
{
    s_start_farm_done ("t", 1);

    jdoc_t *doc = s_ask ("rate", "5", "-e", "exp1", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.scope"), "exp1");
    ck_assert (jdoc_number (doc, -1, "$.rate_limit") == 5);
    jdoc_destroy (&doc);
    doc = s_ask ("policy", "sample", "3", "--experiment=exp1", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.scope"), "exp1");
    ck_assert_str_eq (jdoc_string (doc, "$.policy"), "sample 3");
    jdoc_destroy (&doc);
    doc = s_ask ("policy", "latest", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.scope"), "*");
    ck_assert_str_eq (jdoc_string (doc, "$.policy"), "latest");
    jdoc_destroy (&doc);
    doc = s_ask ("pause", "-e", "exp1", NULL);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.paused"), 1);
    jdoc_destroy (&doc);

    // status says what is in force: exp1's own, the global default.
    doc = s_ask ("status", NULL);
    int e = s_exp1 (doc);
    ck_assert (jdoc_number (doc, -1, "$.experiments[%d].rate_limit", e) == 5);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[%d].policy", e), "sample 3");
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.experiments[%d].paused", e), 1);
    ck_assert_int_eq (jdoc_type_at (doc, "$.rate_limit"), JDOC_NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.policy"), "latest");
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.paused"), 0);
    jdoc_destroy (&doc);

    doc = s_ask ("resume", "-e", "exp1", NULL);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.paused"), 0);
    jdoc_destroy (&doc);
    doc = s_ask ("rate", "max", "-e", "exp1", NULL);
    ck_assert_int_eq (jdoc_type_at (doc, "$.rate_limit"), JDOC_NULL);
    jdoc_destroy (&doc);
    doc = s_ask ("rate", "2.5", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.scope"), "*");
    ck_assert (jdoc_number (doc, -1, "$.rate_limit") == 2.5);
    jdoc_destroy (&doc);

    // feedback: show, set, on, off.
    doc = s_ask ("feedback", "show", "-e", "exp1", NULL);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.feedback.enabled"), 0);
    ck_assert_int_eq (jdoc_type_at (doc, "$.feedback.roi"), JDOC_NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.feedback.quantity"), "mean_u");
    jdoc_destroy (&doc);
    doc = s_ask ("feedback", "set", "roi=10,20,100,200", "quantity=mean_v", "setpoint=-1.5",
                 "kp=0.5", "ki=0.25", "out_min=-2", "out_max=2", "-e", "exp1", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.scope"), "exp1");
    ck_assert (jdoc_number (doc, -1, "$.feedback.roi[0]") == 10 &&
               jdoc_number (doc, -1, "$.feedback.roi[1]") == 20 &&
               jdoc_number (doc, -1, "$.feedback.roi[2]") == 100 &&
               jdoc_number (doc, -1, "$.feedback.roi[3]") == 200);
    ck_assert_str_eq (jdoc_string (doc, "$.feedback.quantity"), "mean_v");
    ck_assert (jdoc_number (doc, 0, "$.feedback.setpoint") == -1.5);
    ck_assert (jdoc_number (doc, 0, "$.feedback.kp") == 0.5);
    ck_assert (jdoc_number (doc, 0, "$.feedback.ki") == 0.25);
    ck_assert (jdoc_number (doc, 0, "$.feedback.out_min") == -2);
    ck_assert (jdoc_number (doc, 0, "$.feedback.out_max") == 2);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.feedback.enabled"), 0);
    jdoc_destroy (&doc);
    doc = s_ask ("feedback", "on", "-e", "exp1", NULL);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.feedback.enabled"), 1);
    ck_assert_str_eq (jdoc_string (doc, "$.feedback.quantity"), "mean_v"); // kept
    jdoc_destroy (&doc);
    doc = s_ask ("feedback", "show", NULL); // the global default is untouched
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.feedback.enabled"), 0);
    ck_assert_int_eq (jdoc_type_at (doc, "$.feedback.roi"), JDOC_NULL);
    jdoc_destroy (&doc);
    doc = s_ask ("feedback", "off", "-e", "exp1", NULL);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.feedback.enabled"), 0);
    jdoc_destroy (&doc);
    doc = s_ask ("feedback", "set", "roi=all", "-e", "exp1", NULL);
    ck_assert_int_eq (jdoc_type_at (doc, "$.feedback.roi"), JDOC_NULL);
    jdoc_destroy (&doc);

    // Every change is in the event log of its experiment.
    doc = s_ask ("log", "exp1", NULL);
    int n = jdoc_length (doc, "$.events"), rate5 = 0, paused = 0, feedback = 0;
    for (int i = 0; i < n; i++) {
        const char *kind = jdoc_string (doc, "$.events[%d].kind", i);
        const char *payload = jdoc_string (doc, "$.events[%d].payload", i);
        if (strcmp (kind, "setting") != 0)
            continue;
        ck_assert (jdoc_int (doc, 0, "$.events[%d].ts_ns", i) > 0);
        rate5 += strcmp (payload, "rate=5") == 0;
        paused += strcmp (payload, "paused=1") == 0;
        feedback += strncmp (payload, "feedback=", 9) == 0;
    }
    ck_assert_msg (rate5 == 1 && paused == 1 && feedback == 4, "rate %d paused %d feedback %d",
                   rate5, paused, feedback);
    jdoc_destroy (&doc);

    // The settings survive a restart of the broker.
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    tu_farm_start_broker (&s_farm);
    doc = s_ask ("status", NULL);
    e = s_exp1 (doc);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[%d].policy", e), "sample 3");
    ck_assert (jdoc_number (doc, -1, "$.experiments[%d].rate_limit", e) == 2.5);
    ck_assert (jdoc_number (doc, -1, "$.rate_limit") == 2.5);
    ck_assert_str_eq (jdoc_string (doc, "$.policy"), "latest");
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.experiments[%d].paused", e), 0);
    jdoc_destroy (&doc);
    doc = s_ask ("feedback", "show", "-e", "exp1", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.feedback.quantity"), "mean_v");
    ck_assert (jdoc_number (doc, 0, "$.feedback.ki") == 0.25);
    jdoc_destroy (&doc);
}
END_TEST

START_TEST (pivctl_refuses_unknown_experiments_bad_values_and_names_a_silent_broker)
{
    s_start_farm_done ("r", 1);
    char dir[4096];
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "out"));

    s_refused ("no experiment 'nope'", "pairs", "nope", NULL);
    s_refused ("'nope'", "log", "nope", NULL);
    // rate, policy and pause -e EXP make an unknown experiment (issue 16:
    // a run is prepared before its first frame); reading it is refused.
    s_refused ("'nope'", "feedback", "show", "-e", "nope", NULL);
    s_refused ("'nope'", "retry", "nope", NULL);
    s_refused ("'nope'", "backfill", "nope", NULL);
    s_refused ("'nope'", "replay", "nope", NULL);
    s_refused ("'nope'", "export", "nope", "-o", dir, NULL);
    // tail asks first: no silent wait for an experiment that does not exist.
    s_refused ("pivctl: no experiment 'nosuch'", "tail", "nosuch", "--count", "1", NULL);

    s_bad_usage ("'fast'", "rate", "fast", NULL);
    s_bad_usage ("'0'", "rate", "0", NULL);
    s_bad_usage ("'x'", "policy", "sample", "x", NULL);
    s_bad_usage ("'sometimes'", "policy", "sometimes", NULL);
    s_bad_usage ("'lost'", "pairs", "exp1", "--state", "lost", NULL);
    s_bad_usage ("'0'", "replay", "exp1", "--speed", "0", NULL);
    s_bad_usage ("'cubic' of 'piv/deform'", "replay", "exp1", "--deform", "cubic", NULL);
    s_bad_usage ("'64,47' of 'piv/passes'", "replay", "exp1", "--passes", "64,47", NULL);
    s_bad_usage ("'exp1'", "replay", "exp1", "--as", "exp1", NULL);
    s_bad_usage ("kp", "feedback", "set", "setpoint=2", "kp=abc", NULL);
    s_bad_usage ("'colour'", "feedback", "set", "colour=red", NULL);
    s_bad_usage ("roi", "feedback", "set", "roi=5,5,1,1", NULL);
    // A refused 'set' changed nothing, not even its good values.
    jdoc_t *doc = s_ask ("feedback", "show", NULL);
    ck_assert (jdoc_number (doc, -1, "$.feedback.setpoint") == 0);
    ck_assert_int_eq (jdoc_type_at (doc, "$.feedback.roi"), JDOC_NULL);
    jdoc_destroy (&doc);
    doc = s_ask ("status", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.policy"), "all");
    ck_assert_int_eq (jdoc_type_at (doc, "$.rate_limit"), JDOC_NULL);
    jdoc_destroy (&doc);

    // No broker: each command names the endpoint it asked.
    tu_stop (s_farm.broker, SIGKILL, 5);
    s_farm.broker = 0;
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "'ipc://%s/control'", s_farm.dir);
    s_refused ("did not answer", "--timeout", "300", "status", NULL);
    s_refused (endpoint, "--timeout", "300", "status", NULL);
    s_refused (endpoint, "--timeout", "300", "rate", "5", NULL);
    s_refused (endpoint, "--timeout", "300", "pairs", "exp1", NULL);
}
END_TEST

START_TEST (retry_sends_failed_pairs_again_and_they_complete)
{
    // A processor that fails until the file 'fixed' exists.
    const char *script = tu_path (s_farm.dir, "flaky.sh");
    char text[8192];
    snprintf (text, sizeof text,
              "#!/bin/sh\n"
              "if [ ! -e '%s/fixed' ]; then echo 'the camera is fogged' >&2; exit 1; fi\n"
              "echo \"x y u v flags\" > \"$3\"\n",
              s_farm.dir);
    tu_spit (script, text, strlen (text));
    chmod (script, 0755);
    char processor[4200];
    snprintf (processor, sizeof processor, "exec:%s", script);
    tu_farm_conf (&s_farm, processor, 2, "32,16", "");
    tu_farm_render (&s_farm, 2, "f");
    s_start_farm ();
    tu_farm_land (&s_farm, "f", 1, 2, 0);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 300 && c.failed < 2; i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    ck_assert_msg (c.failed == 2 && c.done == 0, "failed %lld done %lld", (long long)c.failed,
                   (long long)c.done);
    jdoc_t *doc = s_ask ("pairs", "exp1", "--state", "failed", NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.pairs"), 2);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.pairs[0].attempts"), 3);
    const char *error = jdoc_string (doc, "$.pairs[0].error");
    ck_assert_msg (error && strstr (error, "fogged"), "%s", error ? error : "(none)");
    jdoc_destroy (&doc);

    tu_spit (tu_path (s_farm.dir, "fixed"), "", 0);
    doc = s_ask ("retry", "exp1", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.experiment"), "exp1");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.moved"), 2);
    jdoc_destroy (&doc);
    c = tu_farm_wait_done (&s_farm, 2, 60);
    ck_assert_msg (c.done == 2 && c.failed == 0, "done %lld failed %lld", (long long)c.done,
                   (long long)c.failed);
    doc = s_ask ("retry", "exp1", NULL); // nothing left to retry
    ck_assert_int_eq (jdoc_int (doc, -1, "$.moved"), 0);
    jdoc_destroy (&doc);
}
END_TEST

// ---------------------------------------------------------------------------
// Steering the dispatch

START_TEST (rate_5_dispatches_five_pairs_a_second)
{
    tu_farm_conf (&s_farm, "noop", 4, "32,16", "");
    tu_farm_render (&s_farm, 25, "r");
    s_start_farm ();
    jdoc_t *doc = s_ask ("rate", "5", NULL);
    jdoc_destroy (&doc);
    tu_farm_land (&s_farm, "r", 1, 25, 0); // far faster than 5 pairs/s
    tu_counts_t c = tu_farm_wait_done (&s_farm, 25, 60);
    ck_assert_int_eq (c.done, 25);
    s_pairs_t p;
    s_read_pairs (&p);
    ck_assert_int_eq (p.n, 25);
    qsort (p.pairs, (size_t)p.n, sizeof p.pairs[0], s_by_dispatch);
    double mean_ms = (p.pairs[p.n - 1].dispatched_ns - p.pairs[0].dispatched_ns) / 1e6 / (p.n - 1);
    double min_ms = 1e9;
    for (int i = 1; i < p.n; i++)
        min_ms = fmin (min_ms, (p.pairs[i].dispatched_ns - p.pairs[i - 1].dispatched_ns) / 1e6);
    ck_assert_msg (fabs (mean_ms - 200) <= 20, "mean interval %.1f ms, expected 200", mean_ms);
    ck_assert_msg (min_ms >= 180, "a burst: two dispatches %.1f ms apart", min_ms);
}
END_TEST

START_TEST (latest_processes_the_newest_pair_first)
{
    tu_farm_conf (&s_farm, "noop", 1, "32,16", "");
    tu_farm_render (&s_farm, 8, "l");
    s_start_farm ();
    jdoc_t *doc = s_ask ("pause", NULL);
    jdoc_destroy (&doc);
    tu_farm_land (&s_farm, "l", 1, 8, 0);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 200 && c.pending < 8; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_int_eq (c.pending, 8);
    doc = s_ask ("policy", "latest", NULL);
    jdoc_destroy (&doc);
    doc = s_ask ("resume", NULL);
    jdoc_destroy (&doc);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 8, 60).done, 8);
    s_pairs_t p;
    s_read_pairs (&p);
    qsort (p.pairs, (size_t)p.n, sizeof p.pairs[0], s_by_dispatch);
    char order[256] = "";
    for (int i = 0; i < p.n; i++)
        snprintf (order + strlen (order), sizeof order - strlen (order), " %s", p.pairs[i].stem);
    for (int i = 1; i < p.n; i++)
        ck_assert_msg (p.pairs[i].pair < p.pairs[i - 1].pair, "dispatch order:%s", order);
    ck_assert_msg (p.pairs[0].pair == p.pairs[p.n - 1].pair + 7, "dispatch order:%s", order);
}
END_TEST

START_TEST (sample_3_skips_two_pairs_in_three_and_backfill_completes_them)
{
    tu_farm_conf (&s_farm, "noop", 2, "32,16", "");
    tu_farm_render (&s_farm, 9, "s");
    s_start_farm ();
    jdoc_t *doc = s_ask ("policy", "sample", "3", NULL);
    jdoc_destroy (&doc);
    tu_farm_land (&s_farm, "s", 1, 9, 20000);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 300 && (c.done < 3 || c.skipped < 6); i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    usleep (300000); // nothing more comes
    c = tu_farm_counts (&s_farm);
    ck_assert_msg (c.done == 3 && c.skipped == 6 && c.pending == 0,
                   "done %lld skipped %lld pending %lld", (long long)c.done, (long long)c.skipped,
                   (long long)c.pending);
    // The first of every three arrivals is the one computed.
    s_pairs_t p;
    s_read_pairs (&p);
    ck_assert_int_eq (p.n, 9);
    for (int i = 0; i < 9; i++)
        ck_assert_msg (p.pairs[i].state == (i % 3 == 0 ? STORE_DONE : STORE_SKIPPED),
                       "pair %d (%s) in state %d", i + 1, p.pairs[i].stem, p.pairs[i].state);
    doc = s_ask ("pairs", "exp1", "--state", "skipped", NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.pairs"), 6);
    jdoc_destroy (&doc);

    doc = s_ask ("backfill", "exp1", NULL);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.moved"), 6);
    jdoc_destroy (&doc);
    c = tu_farm_wait_done (&s_farm, 9, 60);
    ck_assert_msg (c.done == 9 && c.skipped == 0, "done %lld skipped %lld", (long long)c.done,
                   (long long)c.skipped);
}
END_TEST

START_TEST (pause_stops_dispatch_within_100_ms_and_resume_restarts_it)
{
    tu_farm_conf (&s_farm, "noop", 2, "32,16", "");
    tu_farm_render (&s_farm, 30, "p");
    s_start_farm ();
    tu_farm_land (&s_farm, "p", 1, 10, 30000);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 10, 60).done, 10);
    char out[4096];
    ck_assert_int_eq (s_pivctl (out, sizeof out, "pause", NULL), 0);
    int64_t replied = s_now_ns ();
    tu_farm_land (&s_farm, "p", 11, 30, 30000); // files keep landing
    usleep (500000);
    tu_counts_t c = tu_farm_counts (&s_farm);
    ck_assert_msg (c.files == 60 && c.pending == 20, "files %lld pending %lld", (long long)c.files,
                   (long long)c.pending);
    s_pairs_t p;
    s_read_pairs (&p);
    for (int i = 0; i < p.n; i++)
        ck_assert_msg (p.pairs[i].dispatched_ns <= replied + 100000000,
                       "%s dispatched %.0f ms after the pause", p.pairs[i].stem,
                       (p.pairs[i].dispatched_ns - replied) / 1e6);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "resume", NULL), 0);
    int64_t resumed = s_now_ns ();
    c = tu_farm_wait_done (&s_farm, 30, 60);
    ck_assert_int_eq (c.done, 30);
    s_read_pairs (&p);
    for (int i = 10; i < 30; i++)
        ck_assert (p.pairs[i].dispatched_ns >= resumed - 100000000);
}
END_TEST

// ---------------------------------------------------------------------------
// The feedback stream

// The valid vectors of results/exp1/<stem>.txt inside the box (all if NULL).
static int
s_vectors_inside (const char *stem, const double *roi)
{
    char path[4200], err[512];
    snprintf (path, sizeof path, "%s/results/exp1/%s.txt", s_farm.dir, stem);
    piv_field_t *f = piv_field_read_txt (path, err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    int n = 0;
    for (int k = 0; k < f->nx * f->ny; k++)
        n += f->flags[k] == PIV_FLAG_VALID && (!roi || (f->x[k] >= roi[0] && f->x[k] <= roi[2] &&
                                                        f->y[k] >= roi[1] && f->y[k] <= roi[3]));
    piv_field_destroy (&f);
    return n;
}

START_TEST (feedback_reports_every_result_with_the_figures_of_its_roi)
{
    tu_farm_render (&s_farm, 4, "b");
    s_start_farm ();
    s_tail_start ("exp1", 4);
    tu_farm_land (&s_farm, "b", 1, 2, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 60).done, 2);
    jdoc_t *doc = s_ask ("feedback", "set", "roi=60,60,180,180", NULL);
    jdoc_destroy (&doc);
    tu_farm_land (&s_farm, "b", 3, 4, 0);
    jdoc_t *m[4];
    ck_assert_int_eq (s_tail_wait (m, 4, 60), 4);
    const double roi[4] = {60, 60, 180, 180};
    for (int i = 0; i < 4; i++) {
        char stem[32];
        snprintf (stem, sizeof stem, "b_%04d", i + 1);
        ck_assert_str_eq (jdoc_string (m[i], "$.experiment"), "exp1");
        ck_assert_str_eq (jdoc_string (m[i], "$.stem"), stem);
        double u = jdoc_number (m[i], NAN, "$.mean_u"), v = jdoc_number (m[i], NAN, "$.mean_v");
        ck_assert_msg (fabs (u - SHIFT_U) < 0.1 && fabs (v - SHIFT_V) < 0.1, "%s: (%g, %g)", stem,
                       u, v);
        ck_assert (jdoc_number (m[i], NAN, "$.value") == u); // quantity mean_u
        ck_assert_msg (fabs (jdoc_number (m[i], NAN, "$.mean_speed") - hypot (SHIFT_U, SHIFT_V)) <
                           0.1,
                       "%s", stem);
        ck_assert_int_eq (jdoc_int (m[i], -1, "$.n"), s_vectors_inside (stem, i < 2 ? NULL : roi));
        ck_assert_int_eq (jdoc_type_at (m[i], "$.roi"), i < 2 ? JDOC_NULL : JDOC_ARRAY);
        ck_assert_int_eq (jdoc_type_at (m[i], "$.output"), JDOC_NULL); // controller off
        int64_t closed = jdoc_int (m[i], 0, "$.closed_ns");
        int64_t dispatched = jdoc_int (m[i], 0, "$.dispatched_ns");
        int64_t computed = jdoc_int (m[i], 0, "$.computed_ns");
        int64_t published = jdoc_int (m[i], 0, "$.published_ns");
        ck_assert (closed > 0 && closed <= dispatched && dispatched <= computed &&
                   computed <= published);
        ck_assert (fabs (jdoc_number (m[i], NAN, "$.latency_ms") - (published - closed) / 1e6) <
                   0.01);
    }
    ck_assert_int_lt (jdoc_int (m[2], 0, "$.n"), jdoc_int (m[0], 0, "$.n"));
    for (int i = 0; i < 4; i++)
        jdoc_destroy (&m[i]);
    // The same messages are in the event log.
    doc = s_ask ("log", "exp1", NULL);
    int n = jdoc_length (doc, "$.events"), feedback = 0;
    for (int i = 0; i < n; i++)
        feedback += strcmp (jdoc_string (doc, "$.events[%d].kind", i), "feedback") == 0;
    ck_assert_int_eq (feedback, 4);
    jdoc_destroy (&doc);
    // --feedback-only re-publishes them on the replay's topic, computing nothing.
    s_tail_start ("exp1.replay1", 4);
    doc = s_ask ("replay", "exp1", "--feedback-only", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.as"), "exp1.replay1");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.republished"), 4);
    jdoc_destroy (&doc);
    ck_assert_int_eq (s_tail_wait (m, 4, 60), 4);
    for (int i = 0; i < 4; i++) {
        char stem[32];
        snprintf (stem, sizeof stem, "b_%04d", i + 1);
        ck_assert_str_eq (jdoc_string (m[i], "$.stem"), stem);
        ck_assert (fabs (jdoc_number (m[i], NAN, "$.mean_u") - SHIFT_U) < 0.1);
        jdoc_destroy (&m[i]);
    }
    ck_assert_int_eq (tu_farm_counts (&s_farm).done, 4); // nothing computed afresh
}
END_TEST

START_TEST (the_pi_controller_follows_its_gains_and_a_step_in_setpoint)
{
    tu_farm_render (&s_farm, 11, "c");
    s_start_farm ();
    jdoc_t *doc = s_ask ("feedback", "set", "kp=0.5", "setpoint=3", NULL);
    jdoc_destroy (&doc);
    doc = s_ask ("feedback", "on", NULL);
    jdoc_destroy (&doc);
    // kp alone: output = kp * (setpoint - value), then a step to 5.
    s_tail_start ("exp1", 6);
    tu_farm_land (&s_farm, "c", 1, 3, 100000);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 3, 60).done, 3);
    doc = s_ask ("feedback", "set", "setpoint=5", NULL);
    jdoc_destroy (&doc);
    tu_farm_land (&s_farm, "c", 4, 6, 100000);
    jdoc_t *m[6];
    ck_assert_int_eq (s_tail_wait (m, 6, 60), 6);
    for (int i = 0; i < 6; i++) {
        double setpoint = i < 3 ? 3 : 5;
        double value = jdoc_number (m[i], NAN, "$.value");
        double output = jdoc_number (m[i], NAN, "$.output");
        ck_assert_msg (fabs (value - SHIFT_U) < 0.1, "value %g", value);
        ck_assert (jdoc_number (m[i], NAN, "$.setpoint") == setpoint);
        ck_assert_msg (fabs (output - 0.5 * (setpoint - value)) < 1e-6,
                       "message %d: output %.9g, value %.9g, setpoint %g", i + 1, output, value,
                       setpoint);
        jdoc_destroy (&m[i]);
    }
    // ki alone: each message adds ki * e * dt, dt between the frames' closing.
    doc = s_ask ("feedback", "set", "kp=0", "ki=0.2", NULL);
    jdoc_destroy (&doc);
    s_tail_start ("exp1", 4);
    tu_farm_land (&s_farm, "c", 7, 10, 250000);
    ck_assert_int_eq (s_tail_wait (m, 4, 60), 4);
    for (int i = 1; i < 4; i++) {
        double e = 5 - jdoc_number (m[i], NAN, "$.value");
        double dt =
            (jdoc_int (m[i], 0, "$.closed_ns") - jdoc_int (m[i - 1], 0, "$.closed_ns")) / 1e9;
        double step = jdoc_number (m[i], NAN, "$.output") - jdoc_number (m[i - 1], NAN, "$.output");
        ck_assert_msg (dt > 0.2, "dt %g", dt);
        ck_assert_msg (fabs (step - 0.2 * e * dt) < 1e-6, "message %d: step %.9g, ki*e*dt %.9g",
                       i + 1, step, 0.2 * e * dt);
    }
    for (int i = 0; i < 4; i++)
        jdoc_destroy (&m[i]);
    doc = s_ask ("feedback", "show", "-e", "exp1", NULL);
    ck_assert (jdoc_number (doc, NAN, "$.feedback.output") > 0);
    jdoc_destroy (&doc);
    // Off, then on again: the controller starts afresh, the time it was
    // off is not integrated.
    doc = s_ask ("feedback", "off", NULL);
    jdoc_destroy (&doc);
    usleep (500000);
    doc = s_ask ("feedback", "on", NULL);
    jdoc_destroy (&doc);
    s_tail_start ("exp1", 1);
    tu_farm_land (&s_farm, "c", 11, 11, 0);
    ck_assert_int_eq (s_tail_wait (m, 1, 60), 1);
    ck_assert_msg (jdoc_number (m[0], NAN, "$.output") == 0, "output %.9g after a restart",
                   jdoc_number (m[0], NAN, "$.output"));
    jdoc_destroy (&m[0]);
}
END_TEST

// ---------------------------------------------------------------------------
// Replay

static int
s_last_seen (void *arg, int64_t file, const char *name, int64_t size, int64_t mtime_ns,
             int64_t seen_ns)
{
    (void)file, (void)name, (void)size, (void)mtime_ns;
    int64_t *span = arg; // first, last
    if (span[0] == 0)
        span[0] = seen_ns;
    span[1] = seen_ns;
    return 0;
}

// From the first file of 'name' to its last, as the broker saw them, s.
static double
s_files_span (const char *name)
{
    char err[512];
    store_t *store = store_open_readonly (tu_path (s_farm.dir, "farm.db"), err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    store_experiment_t exp;
    ck_assert (store_experiment_find (store, name, &exp) == 1);
    int64_t span[2] = {0, 0};
    ck_assert_int_eq (store_files_of (store, exp.id, s_last_seen, span), 60);
    store_destroy (&store);
    return (span[1] - span[0]) / 1e9;
}

static void
s_check_replay (jdoc_t *doc, const char *as, double speed)
{
    ck_assert_str_eq (jdoc_string (doc, "$.experiment"), "exp1");
    ck_assert_str_eq (jdoc_string (doc, "$.as"), as);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.pairs_matched"), 30);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.pairs_missing"), 0);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.fields_compared"), 30);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.files_matched"), 60);
    double diff = jdoc_number (doc, NAN, "$.max_vector_difference");
    ck_assert_msg (diff <= 1e-6, "%s: vectors differ by %g px", as, diff);
    double pacing = jdoc_number (doc, NAN, "$.pacing_error_percent");
    ck_assert_msg (fabs (pacing) <= 5, "%s at speed %g: pacing off by %g %%", as, speed, pacing);
    // The store agrees: the replay lasted the original's time over speed.
    double original = s_files_span ("exp1"), replay = s_files_span (as);
    ck_assert_msg (original > 1.5 && fabs (replay * speed / original - 1) <= 0.05,
                   "%s: %.3f s against %.3f s / %g", as, replay, original, speed);
    ck_assert (jdoc_number (doc, NAN, "$.speed") == speed);
}

START_TEST (a_replay_gives_the_same_fields_at_the_pace_asked)
{
    tu_farm_conf (&s_farm, "piv", 2, "32", "");
    tu_farm_render (&s_farm, 30, "v");
    s_start_farm ();
    tu_farm_land (&s_farm, "v", 1, 30, 66000); // some 15 pairs/s, as a camera
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 30, 60).done, 30);
    jdoc_t *doc = s_ask ("replay", "exp1", "--speed", "1", NULL);
    s_check_replay (doc, "exp1.replay1", 1);
    jdoc_destroy (&doc);
    doc = s_ask ("replay", "exp1", "--speed", "10", NULL);
    s_check_replay (doc, "exp1.replay2", 10);
    jdoc_destroy (&doc);
    // The replays are experiments of their own, reading exp1's files.
    doc = s_ask ("experiments", NULL);
    int n = jdoc_length (doc, "$.experiments"), replays = 0;
    for (int i = 0; i < n; i++) {
        const char *name = jdoc_string (doc, "$.experiments[%d].experiment", i);
        if (strncmp (name, "exp1.replay", 11) != 0)
            continue;
        replays++;
        ck_assert_str_eq (jdoc_string (doc, "$.experiments[%d].source", i), "exp1");
        ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[%d].done", i), 30);
        ck_assert_int_eq (jdoc_bool (doc, -1, "$.experiments[%d].replay.finished", i), 1);
    }
    ck_assert_int_eq (replays, 2);
    jdoc_destroy (&doc);
    // New PIV settings for a replay: its tasks carry them, the rest is the
    // original's.
    doc = s_ask ("replay", "exp1", "--as", "fine", "--speed", "max", "--passes", "16",
                 "--overlap", "0", NULL);
    jdoc_destroy (&doc);
    doc = s_ask ("experiments", NULL);
    n = jdoc_length (doc, "$.experiments");
    int found = 0;
    for (int i = 0; i < n; i++)
        if (strcmp (jdoc_string (doc, "$.experiments[%d].experiment", i), "fine") == 0) {
            found = 1;
            const char *settings = jdoc_string (doc, "$.experiments[%d].settings", i);
            ck_assert_msg (strncmp (settings, "passes=16 overlap=0 iterations=", 31) == 0,
                           "%s", settings);
        }
    ck_assert (found);
    jdoc_destroy (&doc);
    ck_assert (access (tu_path (s_farm.dir, "results/exp1.replay2/v_0030.txt"), F_OK) == 0);
}
END_TEST

// ---------------------------------------------------------------------------
// Thousands of experiments

// 'n' experiments e0000 ... made the cheapest real way: one FILE event each
// on the ingest socket, as a watcher sends them (the frame A is on disk).
static void
s_many_experiments (int n)
{
    zsock_t *w = zsock_new (ZMQ_DEALER);
    ck_assert (w && zsock_connect (w, "ipc://%s/ingest", s_farm.dir) == 0);
    char exp[32], path[4200];
    for (int i = 0; i < n; i++) {
        snprintf (exp, sizeof exp, "e%04d", i);
        snprintf (path, sizeof path, "%s/data/%s", s_farm.dir, exp);
        mkdir (path, 0755);
        snprintf (path, sizeof path, "%s/data/%s/f_a.tif", s_farm.dir, exp);
        tu_spit (path, "x", 1);
        proto_msg_t file = {.command = PROTO_FILE, .seq = (uint64_t)i + 1, .size = 1,
                            .time_ns = s_now_ns (), .experiment = exp, .name = "f_a.tif"};
        ck_assert (proto_send (&file, NULL, w) == 0);
    }
    int64_t made = 0;
    for (int i = 0; i < 1200 && made < n; i++) {
        usleep (50000);
        made = tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments");
    }
    zsock_destroy (&w);
    ck_assert_int_eq (made, n);
}

START_TEST (status_summarises_thousands_of_experiments_and_pages_through_them)
{
    tu_farm_start_broker (&s_farm);
    s_many_experiments (3000);
    // One of them busy: its pair waits (no agent).
    zsock_t *w = zsock_new (ZMQ_DEALER);
    ck_assert (w && zsock_connect (w, "ipc://%s/ingest", s_farm.dir) == 0);
    tu_spit (tu_path (s_farm.dir, "data/e2999/f_b.tif"), "x", 1);
    proto_msg_t file = {.command = PROTO_FILE, .seq = 9999, .size = 1, .time_ns = s_now_ns (),
                        .experiment = "e2999", .name = "f_b.tif"};
    ck_assert (proto_send (&file, NULL, w) == 0);
    for (int i = 0; i < 200 && tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs") < 1; i++)
        usleep (50000);
    zsock_destroy (&w);

    // status: the totals and the busiest, under the reply's limit.
    static char out[1 << 20];
    char *argv[] = {(char *)tu_bin ("pivctl"), "-c", s_farm.conf, "--json", "status", NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 120), 0);
    printf ("status of 3000 experiments: %zu bytes\n", strlen (out));
    ck_assert (strlen (out) < 1024 * 1024);
    jdoc_t *doc = s_ask ("status", NULL);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments_total"), 3000);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments_shown"), 200);
    ck_assert_int_eq (jdoc_length (doc, "$.experiments"), 200);
    ck_assert (jdoc_bool (doc, 0, "$.truncated"));
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[0].experiment"), "e2999");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].pending"), 1);
    jdoc_destroy (&doc);
    // The table says so.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "status", NULL), 0);
    ck_assert_msg (strstr (out, "showing 200 of 3000 experiments"), "%.2000s", out);
    // Pages by name: all of them, 200 at a time; past the end, none.
    doc = s_ask ("status", "--page", "2", NULL);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments_shown"), 200);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[0].experiment"), "e0200");
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[199].experiment"), "e0399");
    jdoc_destroy (&doc);
    doc = s_ask ("experiments", "--page", "15", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[199].experiment"), "e2999");
    jdoc_destroy (&doc);
    doc = s_ask ("experiments", "--page", "16", NULL);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments_shown"), 0);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments_total"), 3000);
    jdoc_destroy (&doc);
    doc = s_ask ("experiments", "--page", "3", "--limit", "1000", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[0].experiment"), "e2000");
    jdoc_destroy (&doc);
    // One experiment alone, however many there are.
    doc = s_ask ("status", "-e", "e1234", NULL);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments_total"), 1);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[0].experiment"), "e1234");
    ck_assert (!jdoc_bool (doc, 1, "$.truncated"));
    jdoc_destroy (&doc);
    s_refused ("no experiment 'e9999'", "status", "-e", "e9999", NULL);
    // --watch goes on with the summary.
    ck_assert_int_eq (s_pivctl (out, sizeof out, "status", "--watch", "--count", "2", NULL), 0);
    ck_assert_msg (strstr (out, "showing 200 of 3000 experiments"), "%.2000s", out);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

// ---------------------------------------------------------------------------
// Clocks and warnings (issue 14)

// The clock warnings of status: how many, and the first one's message.
static int
s_clock_warnings (jdoc_t *doc, const char **first)
{
    int n = jdoc_length (doc, "$.warnings"), found = 0;
    *first = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp (jdoc_string (doc, "$.warnings[%d].kind", i), "clock") == 0 && !found++)
            *first = jdoc_string (doc, "$.warnings[%d].message", i);
    return found;
}

// An agent whose clock runs 5 s ahead (a test DEALER saying HELLO, then
// HEARTBEATs with its clock), and a file whose mtime is 5 s in the future
// (a test DEALER on ingest): both are logged and warned of in status with
// their clock_skew_ms. The operator clears the warnings: status shows them
// no more while the skew lasts, and the clear is recorded.
START_TEST (a_clock_5_s_ahead_is_warned_of_and_an_operator_clears_the_warning)
{
    tu_farm_conf (&s_farm, "noop", 1, "32", "storage\n    guard_ms = 200\n");
    tu_farm_start_broker (&s_farm);
    zsock_t *agent = zsock_new (ZMQ_DEALER), *watcher = zsock_new (ZMQ_DEALER);
    ck_assert (agent && zsock_connect (agent, "ipc://%s/work", s_farm.dir) == 0);
    ck_assert (watcher && zsock_connect (watcher, "ipc://%s/ingest", s_farm.dir) == 0);
    proto_msg_t hello = {.command = PROTO_HELLO, .name = "skewed", .text = "node9", .count = 1,
                         .settings = "noop"};
    ck_assert_int_eq (proto_send (&hello, NULL, agent), 0);
    mkdir (tu_path (s_farm.dir, "data/exp1"), 0755);
    tu_spit (tu_path (s_farm.dir, "data/exp1/f_0001_a.tif"), "x", 1);
    proto_msg_t file = {.command = PROTO_FILE, .seq = 1, .size = 1,
                        .time_ns = s_now_ns () + 5000000000LL, .experiment = "exp1",
                        .name = "f_0001_a.tif"};
    ck_assert_int_eq (proto_send (&file, NULL, watcher), 0);
    const char *message = NULL;
    jdoc_t *doc = NULL;
    for (int i = 0; i < 100; i++) {
        proto_msg_t beat = {.command = PROTO_HEARTBEAT, .time_ns = s_now_ns () + 5000000000LL};
        ck_assert_int_eq (proto_send (&beat, NULL, agent), 0);
        jdoc_destroy (&doc);
        doc = s_ask ("status", NULL);
        if (s_clock_warnings (doc, &message) >= 2)
            break;
        usleep (100000);
    }
    ck_assert_msg (s_clock_warnings (doc, &message) == 2, "clock warnings: %d",
                   s_clock_warnings (doc, &message));
    ck_assert_msg (strstr (message, "ms ahead of the broker's") && strstr (message, "NTP"), "%s",
                   message);
    // Each peer with its skew: about 5000 ms.
    int agents = 0, watchers = 0;
    for (int i = 0; i < jdoc_length (doc, "$.clocks"); i++) {
        const char *peer = jdoc_string (doc, "$.clocks[%d].peer", i);
        double skew = jdoc_number (doc, NAN, "$.clocks[%d].clock_skew_ms", i);
        if (strstr (peer, "agent 'skewed' on node9"))
            agents++, ck_assert_msg (skew > 4000 && skew < 5100, "agent skew %g", skew);
        if (strcmp (peer, "the writer of files of 'exp1'") == 0)
            watchers++, ck_assert_msg (skew > 4000 && skew < 5100, "file skew %g", skew);
    }
    ck_assert_int_eq (agents, 1);
    ck_assert_int_eq (watchers, 1);
    jdoc_destroy (&doc);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "clock skew: the clock of agent 'skewed' on node9 is", 0));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "clock skew: the clock of the writer of files of "
                                                "'exp1' is",
                                0));

    // The operator lists them, and clears them.
    char out[1 << 16];
    ck_assert_int_eq (s_pivctl (out, sizeof out, "warnings", NULL), 0);
    ck_assert_msg (strstr (out, "  1  WARNING   the clock of") && strstr (out, "  2  WARNING")
                       && strstr (out, "clock skew:"),
                   "%s", out);
    s_refused ("no warning 3 to clear", "warnings", "clear", "3", NULL);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "warnings", "clear", "1", NULL), 0);
    ck_assert_msg (strstr (out, "cleared 1 warning(s)"), "%s", out);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "warnings", "clear", "all", NULL), 0);
    ck_assert_msg (strstr (out, "cleared 1 warning(s)") && strstr (out, "no warning in force"),
                   "%s", out);
    // Still skewed, still hidden: the guard runs several times meanwhile.
    for (int i = 0; i < 5; i++) {
        proto_msg_t beat = {.command = PROTO_HEARTBEAT, .time_ns = s_now_ns () + 5000000000LL};
        ck_assert_int_eq (proto_send (&beat, NULL, agent), 0);
        usleep (200000);
    }
    doc = s_ask ("status", NULL);
    ck_assert_int_eq (s_clock_warnings (doc, &message), 0);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.warnings_cleared"), 2);
    ck_assert_int_eq (jdoc_length (doc, "$.clocks"), 2);
    jdoc_destroy (&doc);
    ck_assert_int_eq (s_pivctl (out, sizeof out, "status", NULL), 0);
    ck_assert_msg (!strstr (out, "the clock of"), "%s", out);
    // Recorded: an event each, and the setting a restart reads.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'warning'"
                                            " AND payload LIKE 'cleared kind=clock%%'"),
                      2);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM settings WHERE"
                                            " key = 'warnings_cleared' AND value LIKE"
                                            " '%%agent ''skewed''%%'"),
                      1);
    zsock_destroy (&agent);
    zsock_destroy (&watcher);
}
END_TEST

// ---------------------------------------------------------------------------
// Running the suite

// A test case of the suite: a fresh farm for each test.
// ---------------------------------------------------------------------------
// The publish socket (doc/protocol.md §6)

// A SUB socket on the farm's publish endpoint, subscribed to each topic
// given (NULL-terminated); waits until the subscriptions have reached the
// broker (ZeroMQ drops what no one has subscribed to yet).
static zsock_t *
s_subscribe (const char *first, ...)
{
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/publish", s_farm.dir);
    zsock_t *sub = zsock_new_sub (endpoint, NULL);
    ck_assert (sub != NULL);
    va_list ap;
    va_start (ap, first);
    for (const char *t = first; t; t = va_arg (ap, const char *))
        zsock_set_subscribe (sub, t);
    va_end (ap);
    usleep (500000);
    return sub;
}

// The next message on sub within timeout_ms: its topic into topic, its
// JSON parsed (NULL if none came); *blob_size gets a third frame's size.
static jdoc_t *
s_next (zsock_t *sub, int timeout_ms, char *topic, size_t size, size_t *blob_size)
{
    zpoller_t *poller = zpoller_new (sub, NULL);
    zmsg_t *msg = zpoller_wait (poller, timeout_ms) ? zmsg_recv (sub) : NULL;
    zpoller_destroy (&poller);
    if (!msg)
        return NULL;
    char *t = zmsg_popstr (msg), *json = zmsg_popstr (msg);
    zframe_t *blob = zmsg_pop (msg);
    snprintf (topic, size, "%s", t ? t : "");
    if (blob_size)
        *blob_size = blob ? zframe_size (blob) : 0;
    if (blob) { // the field, as the work socket encodes it
        char err[256];
        piv_field_t *field =
            piv_field_decode (zframe_data (blob), zframe_size (blob), err, sizeof err);
        ck_assert_msg (field != NULL, "field on '%s': %s", t, err);
        piv_field_destroy (&field);
    }
    char err[256];
    jdoc_t *doc = json ? jdoc_parse (json, err, sizeof err) : NULL;
    ck_assert_msg (doc != NULL, "message on '%s' is not JSON: %s", t, json ? json : "(none)");
    free (t);
    free (json);
    zframe_destroy (&blob);
    zmsg_destroy (&msg);
    return doc;
}

START_TEST (a_subscriber_of_one_experiment_gets_its_messages_alone_and_replays_are_marked)
{
    tu_farm_conf (&s_farm, "piv", 2, "32", "");
    tu_farm_render (&s_farm, 6, "t");
    s_start_farm ();
    tu_farm_land (&s_farm, "t", 1, 4, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 4, 60).done, 4);
    // One subscriber to exp1 as a controller makes it, one to its replay.
    zsock_t *own = s_subscribe ("feedback.exp1/", "result.exp1/", "field.exp1/", NULL);
    zsock_t *replay = s_subscribe ("feedback.exp1.replay1/", NULL);
    jdoc_t *doc = s_ask ("replay", "exp1", "--feedback-only", "--speed", "max", NULL);
    jdoc_destroy (&doc);
    tu_farm_land (&s_farm, "t", 5, 6, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 6, 60).done, 6);

    // exp1's subscriber: the two live pairs' feedback, result and field,
    // nothing of exp1.replay1 (whose topic its old prefix matched).
    int feedback = 0, results = 0, fields = 0;
    char topic[512];
    size_t blob = 0;
    while ((doc = s_next (own, 1500, topic, sizeof topic, &blob))) {
        ck_assert_str_eq (jdoc_string (doc, "$.experiment"), "exp1");
        if (strcmp (topic, "feedback.exp1/") == 0) {
            feedback++;
            ck_assert_int_eq (jdoc_bool (doc, -1, "$.replay"), 0);
            ck_assert_int_eq (jdoc_type_at (doc, "$.source"), JDOC_NULL);
        }
        else if (strcmp (topic, "result.exp1/") == 0) {
            results++;
            ck_assert_msg (fabs (jdoc_number (doc, NAN, "$.mean_u") - SHIFT_U) < 0.5, "mean_u %g",
                           jdoc_number (doc, NAN, "$.mean_u"));
            ck_assert_int_eq (jdoc_bool (doc, -1, "$.field"), 1);
            ck_assert (jdoc_int (doc, 0, "$.closed_ns") > 0);
            double latency = jdoc_number (doc, NAN, "$.latency_ms");
            ck_assert_msg (latency >= 0 && latency < 60000, "latency %g ms", latency);
        }
        else {
            ck_assert_str_eq (topic, "field.exp1/");
            ck_assert (blob > 32);
            fields++;
        }
        jdoc_destroy (&doc);
    }
    ck_assert_int_eq (feedback, 2);
    ck_assert_int_eq (results, 2);
    ck_assert_int_eq (fields, 2);

    // The replay's subscriber: the 4 recorded messages, under the replay's
    // name, marked as a replay of exp1, their recorded times kept.
    int replayed = 0;
    while ((doc = s_next (replay, 500, topic, sizeof topic, NULL))) {
        ck_assert_str_eq (topic, "feedback.exp1.replay1/");
        ck_assert_str_eq (jdoc_string (doc, "$.experiment"), "exp1.replay1");
        ck_assert_int_eq (jdoc_bool (doc, -1, "$.replay"), 1);
        ck_assert_str_eq (jdoc_string (doc, "$.source"), "exp1");
        ck_assert (jdoc_int (doc, 0, "$.closed_ns") > 0);
        replayed++;
        jdoc_destroy (&doc);
    }
    ck_assert_int_eq (replayed, 4);
    zsock_destroy (&own);
    zsock_destroy (&replay);
}
END_TEST

// The broker builds results only for topics somebody subscribed to (an
// XPUB): a subscriber of a shorter prefix, or of everything, still gets
// them, and so does one that subscribes after others left.
START_TEST (results_reach_subscribers_of_any_prefix_and_later_subscribers)
{
    tu_farm_render (&s_farm, 3, "g");
    s_start_farm ();
    zsock_t *some = s_subscribe ("result.", NULL), *all = s_subscribe ("", NULL);
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    char topic[512];
    jdoc_t *doc = s_next (some, 5000, topic, sizeof topic, NULL);
    ck_assert_msg (doc != NULL, "no result on 'result.'");
    ck_assert_str_eq (topic, "result.exp1/");
    ck_assert_str_eq (jdoc_string (doc, "$.stem"), "g_0001");
    jdoc_destroy (&doc);
    int results = 0;
    while ((doc = s_next (all, 2000, topic, sizeof topic, NULL))) {
        results += strcmp (topic, "result.exp1/") == 0;
        jdoc_destroy (&doc);
    }
    ck_assert_int_eq (results, 1);
    // Both leave; a new subscriber of the exact topic gets the next one.
    zsock_destroy (&some);
    zsock_destroy (&all);
    zsock_t *exact = s_subscribe ("result.exp1/", NULL);
    tu_farm_land (&s_farm, "g", 2, 2, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 60).done, 2);
    doc = s_next (exact, 5000, topic, sizeof topic, NULL);
    ck_assert_msg (doc != NULL, "no result on 'result.exp1/'");
    ck_assert_str_eq (jdoc_string (doc, "$.stem"), "g_0002");
    jdoc_destroy (&doc);
    zsock_destroy (&exact);
}
END_TEST

START_TEST (agents_joining_and_leaving_are_published)
{
    tu_farm_render (&s_farm, 1, "g");
    s_start_farm ();
    zsock_t *sub = s_subscribe ("agents", NULL);
    int a2 = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "a2");
    char topic[512];
    // The first agent may join after the subscription: its message is
    // skipped, a2's is awaited.
    jdoc_t *doc;
    while ((doc = s_next (sub, 10000, topic, sizeof topic, NULL))
           && strcmp (jdoc_string (doc, "$.agent") ? jdoc_string (doc, "$.agent") : "", "a2") != 0)
        jdoc_destroy (&doc);
    ck_assert_msg (doc != NULL, "no 'agents' message after a2 started");
    ck_assert_str_eq (topic, "agents");
    ck_assert_str_eq (jdoc_string (doc, "$.event"), "joined");
    ck_assert_str_eq (jdoc_string (doc, "$.agent"), "a2");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.agents"), 2);
    jdoc_destroy (&doc);
    tu_stop (a2, SIGTERM, 10);
    doc = s_next (sub, 10000, topic, sizeof topic, NULL);
    ck_assert_msg (doc != NULL, "no 'agents' message after a2 stopped");
    ck_assert_str_eq (jdoc_string (doc, "$.event"), "left");
    ck_assert_str_eq (jdoc_string (doc, "$.agent"), "a2");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.agents"), 1);
    jdoc_destroy (&doc);
    zsock_destroy (&sub);
}
END_TEST

// The dispatch times of the attempts of the pair of stem, in order.
static int
s_attempt_times (const char *stem, int64_t *times, int max)
{
    int n = 0;
    for (int a = 1; a <= max; a++) {
        times[n] = tu_farm_sql (&s_farm,
                                "SELECT t.dispatched_ns FROM attempts t JOIN pairs p"
                                " ON p.id = t.pair WHERE p.stem = '%s' AND t.attempt = %d",
                                stem, a);
        if (times[n] <= 0)
            break;
        n++;
    }
    return n;
}

START_TEST (a_failing_pair_is_retried_after_a_growing_delay_and_keeps_its_camera_time)
{
    // A processor that fails until the file 'fixed' exists.
    const char *script = tu_path (s_farm.dir, "flaky.sh");
    char text[8192];
    snprintf (text, sizeof text,
              "#!/bin/sh\n"
              "if [ ! -e '%s/fixed' ]; then echo 'the camera is fogged' >&2; exit 1; fi\n"
              "echo \"x y u v flags\" > \"$3\"\n",
              s_farm.dir);
    tu_spit (script, text, strlen (text));
    chmod (script, 0755);
    char processor[4200];
    snprintf (processor, sizeof processor, "exec:%s", script);
    tu_farm_conf (&s_farm, processor, 2, "32,16", "");
    tu_farm_render (&s_farm, 1, "k");
    s_start_farm ();
    zsock_t *sub = s_subscribe ("failed.exp1/", "result.exp1/", NULL);
    tu_farm_land (&s_farm, "k", 1, 1, 0);
    char topic[512];
    jdoc_t *doc = s_next (sub, 60000, topic, sizeof topic, NULL);
    if (!doc) {
        char *log = tu_slurp (tu_path (s_farm.dir, "broker.log"), NULL);
        ck_abort_msg ("no 'failed' message; broker.log: %s", log ? log : "(none)");
    }
    ck_assert_str_eq (topic, "failed.exp1/");
    ck_assert_str_eq (jdoc_string (doc, "$.stem"), "k_0001");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.attempts"), 3);
    ck_assert_msg (strstr (jdoc_string (doc, "$.error"), "fogged"), "%s",
                   jdoc_string (doc, "$.error"));
    jdoc_destroy (&doc);
    // Three attempts, the second at least the base delay (1 s) after the
    // first, the third later still after the second.
    int64_t t[4];
    ck_assert_int_eq (s_attempt_times ("k_0001", t, 4), 3);
    ck_assert_msg (t[1] - t[0] >= 1000000000LL, "attempts %.3f s apart", (t[1] - t[0]) / 1e9);
    ck_assert_msg (t[2] - t[1] > t[1] - t[0], "gaps %.3f s then %.3f s", (t[1] - t[0]) / 1e9,
                   (t[2] - t[1]) / 1e9);

    // Retried by hand: its result carries the frame's time (its mtime),
    // and its latency from it, not from 0.
    tu_spit (tu_path (s_farm.dir, "fixed"), "", 0);
    jdoc_destroy (&(jdoc_t *){s_ask ("retry", "exp1", NULL)});
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    doc = s_next (sub, 10000, topic, sizeof topic, NULL);
    ck_assert_msg (doc != NULL, "no 'result' message");
    ck_assert_str_eq (topic, "result.exp1/");
    struct stat st;
    ck_assert (stat (tu_path (s_farm.dir, "data/exp1/k_0001_b.tif"), &st) == 0);
    int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    ck_assert_int_eq (jdoc_int (doc, 0, "$.closed_ns"), mtime);
    double latency = jdoc_number (doc, NAN, "$.latency_ms");
    double expected = (jdoc_int (doc, 0, "$.recorded_ns") - mtime) / 1e6;
    ck_assert_msg (fabs (latency - expected) < 1e-3 && latency > 0 && latency < 600000,
                   "latency %g ms, expected %g", latency, expected);
    jdoc_destroy (&doc);
    // A pair retried by hand is no live pair: the p99 is not its wait (nor
    // 56 years).
    doc = s_ask ("status", NULL);
    int e = s_exp1 (doc);
    ck_assert_int_eq (jdoc_type_at (doc, "$.experiments[%d].latency_p99_ms", e), JDOC_NULL);
    jdoc_destroy (&doc);
    zsock_destroy (&sub);
}
END_TEST

START_TEST (experiments_shows_when_each_was_created)
{
    int64_t before = s_now_ns ();
    s_start_farm_done ("c", 1);
    jdoc_t *doc = s_ask ("experiments", NULL);
    int e = s_exp1 (doc);
    int64_t created = jdoc_int (doc, 0, "$.experiments[%d].created_ns", e);
    ck_assert_msg (created >= before - 1000000000LL && created <= s_now_ns (), "created_ns %lld",
                   (long long)created);
    jdoc_destroy (&doc);
    char out[8192];
    ck_assert_int_eq (s_pivctl (out, sizeof out, "experiments", NULL), 0);
    char *table = strstr (out, "CREATED"); // the listing's own table, after the counts
    char *line = table ? strstr (table, "\nexp1 ") : NULL;
    ck_assert_msg (line, "%s", out);
    char name[64], date[64];
    ck_assert_int_eq (sscanf (line, "%63s %63s", name, date), 2);
    ck_assert_msg (strcmp (date, "-") != 0 && strchr (date, '-'), "CREATED '%s': %s", date, out);
}
END_TEST

// common/ask.h, the round trip of pivctl and the status page, against the
// real broker: an answer, a refusal with its status and line, two questions
// on one connection, a wait cut short by the stop flag, and, once the broker
// is gone, silence named as silence.
START_TEST (ask_tells_an_answer_a_refusal_and_a_silent_broker_apart)
{
    tu_farm_start_broker (&s_farm);
    config_t cfg;
    char err[1024], *body;
    int status;
    ck_assert_int_eq (config_load (&cfg, s_farm.conf, err, sizeof err), 0);
    ck_assert_int_eq (ask_once (&cfg, "status", 5000, &status, &body, err, sizeof err), ASK_OK);
    ck_assert_int_eq (status, 200);
    jdoc_t *doc = jdoc_parse (body, err, sizeof err);
    ck_assert_msg (doc && jdoc_number (doc, NAN, "$.uptime_s") >= 0, "%s", body);
    jdoc_destroy (&doc);
    free (body);
    ck_assert_int_eq (ask_once (&cfg, "pairs nope", 5000, &status, &body, err, sizeof err),
                      ASK_REFUSED);
    ck_assert_int_eq (status, 404);
    ck_assert_ptr_null (body);
    ck_assert_str_eq (err, "no experiment 'nope'");
    // pivctl's waits ask again and again on one connection.
    ask_t *ask = ask_new (&cfg, err, sizeof err, NULL);
    ck_assert_msg (ask, "%s", err);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq (ask_request (ask, "agents", 5000, NULL, &status, &body, err, sizeof err),
                          ASK_OK);
        ck_assert_msg (strstr (body, "\"agents\""), "%s", body);
        free (body);
    }
    volatile sig_atomic_t stop = 1;
    ck_assert_int_eq (ask_request (ask, "status", 5000, &stop, &status, &body, err, sizeof err),
                      ASK_INTERRUPTED);
    ask_destroy (&ask);
    ck_assert_ptr_null (ask);
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    ck_assert_int_eq (ask_once (&cfg, "status", 300, &status, &body, err, sizeof err), ASK_SILENT);
    ck_assert_int_eq (status, 0);
    ck_assert_msg (strstr (err, "did not answer within 300 ms") && strstr (err, "/control'"), "%s",
                   err);
}
END_TEST

// ---------------------------------------------------------------------------
// Agent ids (issue 28): the host name by default, the same after a restart

// Waits up to timeout_ms for 'pivctl agents' to list 'want' agents; the
// last listing in out.
static int
s_agents_listed (int want, char *out, size_t len, int timeout_ms)
{
    int n = -1;
    for (int waited = 0; waited <= timeout_ms && n != want; waited += 100) {
        if (waited)
            usleep (100000);
        jdoc_t *doc = s_ask ("agents", NULL);
        n = jdoc_length (doc, "$.agents");
        jdoc_destroy (&doc);
        tu_farm_pivctl (&s_farm, out, len, "agents", NULL);
    }
    return n == want;
}

START_TEST (an_agent_is_named_after_its_host_across_restarts_and_a_second_of_that_name_waits)
{
    char host[256] = "";
    gethostname (host, sizeof host - 1);
    tu_farm_start_broker (&s_farm);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", NULL, NULL);
    char out[8192], first[8192];
    int one = s_agents_listed (1, first, sizeof first, 10000);
    // A second agent of the same host and default id: refused, said so by
    // the broker (naming the id and the way out) and by the agent.
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", NULL, NULL);
    char refusal[512];
    snprintf (refusal, sizeof refusal, "work: HELLO of agent '%s' on %s refused: an agent of that "
              "id is connected already", host, host);
    int refused = tu_farm_log_has (&s_farm, "broker.log", refusal, 10000)
                  && tu_farm_log_has (&s_farm, "broker.log", "give each agent its own id", 0);
    int told = tu_farm_log_has (&s_farm, "agent2.log", "refuses agent", 10000);
    int still_one = s_agents_listed (1, out, sizeof out, 0);
    // The first stops: the second joins under the name.
    tu_stop (s_farm.agents[0], SIGTERM, 20);
    s_farm.agents[0] = 0;
    char joined[512];
    snprintf (joined, sizeof joined, "agent '%s' on %s with", host, host);
    int took_over = 0;
    for (int i = 0; i < 100 && !took_over; i++) {
        took_over = tu_farm_log_count (&s_farm, "broker.log", joined) == 2;
        if (!took_over)
            usleep (100000);
    }
    // Killed and started again at once: the new process joins once the old
    // connection is found dead, under the same name: one row in the store.
    int before = tu_farm_log_count (&s_farm, "broker.log", joined);
    int64_t killed = s_now_ns ();
    tu_stop (s_farm.agents[1], SIGKILL, 10);
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent3.log", NULL, NULL);
    int back = 0;
    for (int i = 0; i < 100 && !back; i++) {
        back = tu_farm_log_count (&s_farm, "broker.log", joined) > before
               && s_agents_listed (1, out, sizeof out, 0);
        if (!back)
            usleep (100000);
    }
    // What the wait costs (heartbeat_ms 200, liveness 3 here).
    printf ("figures: agent-ids restarted_after_kill joined_in=%.1fs (heartbeat 0.2 s x 3)\n",
            (s_now_ns () - killed) / 1e9);
    char *rows = tu_farm_sql_text (&s_farm, "SELECT group_concat(name, ',') FROM agents");
    char *log = tu_slurp (tu_path (s_farm.dir, "broker.log"), NULL);
    // A refused agent says HELLO once a heartbeat, never twice in a row
    // once it is in (which would hand its tasks back each time).
    int churn = log && strstr (log, "said hello again");
    char shown[16384];
    snprintf (shown, sizeof shown, "pivctl agents:\n%s\nstore: %s\nbroker.log:\n%s", first,
              rows ? rows : "(none)", log ? log : "(none)");
    free (log);
    ck_assert_msg (one && strstr (first, host), "the agent is not listed as '%s':\n%s", host,
                   shown);
    ck_assert_msg (refused, "no refusal of the second '%s':\n%s", host, shown);
    ck_assert_msg (told, "the second agent did not say it is refused:\n%s",
                   tu_slurp (tu_path (s_farm.dir, "agent2.log"), NULL));
    ck_assert_msg (still_one, "two agents listed under one id:\n%s", out);
    ck_assert_msg (took_over, "the second agent did not join once the first left:\n%s", shown);
    ck_assert_msg (back, "the agent restarted after a kill did not join:\n%s", shown);
    ck_assert_msg (!churn, "an agent that joined was made to say HELLO again:\n%s", shown);
    ck_assert_msg (rows && strcmp (rows, host) == 0, "the store's agents are not just '%s':\n%s",
                   host, shown);
    free (rows);
}
END_TEST

static TCase *
s_tcase (Suite *suite, const char *name)
{
    TCase *tc = tcase_create (name);
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    suite_add_tcase (suite, tc);
    return tc;
}

int
main (void)
{
    config_rules ("piv", piv_settings_check_key);  // as every program does
    config_rules ("calibration", piv_calib_check_key);
    Suite *suite = suite_create ("ops");
    TCase *tc = s_tcase (suite, "commands");
    tcase_add_test (tc, pivctl_queries_show_the_farm_as_the_store_records_it);
    tcase_add_test (tc, pivctl_steering_commands_answer_with_the_setting_now_in_force);
    tcase_add_test (tc, pivctl_refuses_unknown_experiments_bad_values_and_names_a_silent_broker);
    tcase_add_test (tc, retry_sends_failed_pairs_again_and_they_complete);
    tcase_add_test (tc, status_summarises_thousands_of_experiments_and_pages_through_them);
    tc = s_tcase (suite, "dispatch");
    tcase_add_test (tc, rate_5_dispatches_five_pairs_a_second);
    tcase_add_test (tc, latest_processes_the_newest_pair_first);
    tcase_add_test (tc, sample_3_skips_two_pairs_in_three_and_backfill_completes_them);
    tcase_add_test (tc, pause_stops_dispatch_within_100_ms_and_resume_restarts_it);
    tc = s_tcase (suite, "feedback");
    tcase_add_test (tc, feedback_reports_every_result_with_the_figures_of_its_roi);
    tcase_add_test (tc, the_pi_controller_follows_its_gains_and_a_step_in_setpoint);
    tc = s_tcase (suite, "replay");
    tcase_add_test (tc, a_replay_gives_the_same_fields_at_the_pace_asked);
    tcase_add_test (tc, a_clock_5_s_ahead_is_warned_of_and_an_operator_clears_the_warning);
    tc = s_tcase (suite, "publish");
    tcase_add_test (tc, a_subscriber_of_one_experiment_gets_its_messages_alone_and_replays_are_marked);
    tcase_add_test (tc, agents_joining_and_leaving_are_published);
    tcase_add_test (tc, results_reach_subscribers_of_any_prefix_and_later_subscribers);
    tcase_add_test (tc, a_failing_pair_is_retried_after_a_growing_delay_and_keeps_its_camera_time);
    tcase_add_test (tc, experiments_shows_when_each_was_created);
    tcase_add_test (tc, ask_tells_an_answer_a_refusal_and_a_silent_broker_apart);
    tc = s_tcase (suite, "agent-ids");
    tcase_add_test (tc, an_agent_is_named_after_its_host_across_restarts_and_a_second_of_that_name_waits);
    return tu_run_suite (suite);
}
