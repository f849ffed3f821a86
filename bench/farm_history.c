// farm_history.c — section 2 of bench_farm, dispatch with a store full of
// history against the same on an empty store; and the store's writes for a
// pair, made through the store API (section 1's ceiling too).

#include "bench/farm.h"
#include "common/log.h"
#include "common/util.h"
#include "store/store.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// Section 2: a store with history, written straight through the store API.
// The same writes, timed, are also the store's ceiling for section 1.

const char *const bf_call_names[S_CALLS] = {
    "store_file_add x2, files arriving", "store_pair_add", "store_pair_dispatch", "store_pair_result",
    "store_stats_save, results counted (share)", "store_commit (share)"};

// Writes npairs DONE pairs of experiment 'exp_name' into the store at 'db'
// (created if absent) with the calls the broker makes for one pair: both
// files recorded as they arrive, the pair, its dispatch and its result. Commits every
// 'every' pairs, or, with every 0, whenever commit_s has passed since the
// last commit (as the broker's timer does), and then also marks the results
// counted every STATS_S, as the broker's statistics checkpoint does for
// results without a field (broker/stats.c). *last_event: the id of a marker
// event appended at the end, where later readers can start; calls (if not
// NULL): s per pair by call, and *event_s the cost of one event row alone
// (store_event with a payload like a file's, the same commits), of which
// each pair's calls write five; *cpu_us (if not NULL): this thread's CPU
// per pair over the same time. Returns pairs/s, or -1.
double
bf_write_pairs (const char *db, const char *exp_name, int npairs, int every, double commit_s,
               int64_t *last_event, double calls[S_CALLS], double *event_s, double *cpu_us)
{
    char err[ERRLEN];
    store_t *store = store_new (db, STORE_DURABILITY_FULL, err, sizeof err);
    if (!store) {
        log_error ("%s", err);
        return -1;
    }
    double spent[S_CALLS] = {0};
    double cpu0 = bf_cpu_thread_self ();
    double t0 = util_now (), last_commit = t0, last_stats = t0;
    // The results the next statistics checkpoint marks counted.
    int64_t *marks = every ? NULL : malloc ((size_t) (npairs > 0 ? npairs : 1) * sizeof *marks);
    size_t nmarks = 0;
    if (!every && !marks) {
        log_error ("cannot write pairs to '%s': out of memory", db);
        store_destroy (&store);
        return -1;
    }
    int64_t now = util_time_ns ();
    int64_t exp = store_experiment (store, exp_name, now);
    store_result_t result = {.mean_u = 3.3,
                             .mean_v = -1.7,
                             .mean_speed = 3.71,
                             .valid_fraction = 1,
                             .nx = 127,
                             .ny = 127,
                             .compute_ns = 100000000,
                             .path = ""};
    if (exp < 0)
        goto fail;
    for (int i = 0; i < npairs; i++) {
        char name_a[32], name_b[32], stem[32];
        int is_new, recorded;
        if (i % 1024 == 0 && bf_stopped ())
            goto fail_quiet;
        snprintf (stem, sizeof stem, "h%07d", i);
        snprintf (name_a, sizeof name_a, "h%07d_a.tif", i);
        snprintf (name_b, sizeof name_b, "h%07d_b.tif", i);
        now += 1000;
        double t[S_CALLS + 1];
        t[0] = util_now ();
        int64_t fa = store_file_add (store, exp, name_a, 4194974, now, now, &is_new);
        int64_t fb = fa < 0 ? -1 : store_file_add (store, exp, name_b, 4194974, now, now, &is_new);
        t[1] = util_now ();
        int64_t pair =
            fa < 0 || fb < 0 ? -1 : store_pair_add (store, exp, stem, fa, fb, now, &is_new);
        t[2] = util_now ();
        int attempt = pair < 0 ? -1 : store_pair_dispatch (store, pair, "history", now);
        t[3] = util_now ();
        if (attempt < 0
            || store_pair_result (store, pair, attempt, "history", &result, now, &recorded) != 0)
            goto fail;
        t[4] = t[5] = t[6] = util_now ();
        if (marks) {
            marks[nmarks++] = pair;
            if (t[4] - last_stats >= STATS_S || i == npairs - 1) {
                store_stats_t counted = {.experiment = exp};
                if (store_stats_save (store, &counted, marks, nmarks, now) != 0)
                    goto fail;
                nmarks = 0;
                last_stats = t[5] = t[6] = util_now ();
            }
        }
        int due = every ? (i + 1) % every == 0 : t[5] - last_commit >= commit_s;
        if (due) {
            if (store_commit (store, err, sizeof err) != 0) {
                log_error ("%s", err);
                goto fail_quiet;
            }
            last_commit = t[6] = util_now ();
        }
        for (int c = 0; c < S_CALLS; c++)
            spent[c] += t[c + 1] - t[c];
    }
    double rate = npairs / (util_now () - t0);
    if (cpu_us)
        *cpu_us = (bf_cpu_thread_self () - cpu0) / npairs * 1e6;
    if (event_s) {
        double t1 = util_now ();
        last_commit = t1;
        for (int i = 0; i < npairs; i++) {
            char payload[160];
            snprintf (payload, sizeof payload,
                      "file=%d size=4194974 mtime_ns=%" PRId64 " seen_ns=%" PRId64
                      " name=h%07d_a.tif", i, now, now, i);
            if (store_event (store, "file", exp, 0, payload, now) < 0)
                goto fail;
            if (util_now () - last_commit >= commit_s) {
                if (store_commit (store, err, sizeof err) != 0) {
                    log_error ("%s", err);
                    goto fail_quiet;
                }
                last_commit = util_now ();
            }
        }
        *event_s = (util_now () - t1) / npairs;
    }
    int64_t last = store_event (store, "bench", exp, 0, "pairs written", now);
    if (last < 0 || store_commit (store, err, sizeof err) != 0)
        goto fail;
    store_destroy (&store);
    free (marks);
    if (last_event)
        *last_event = last;
    if (calls)
        for (int c = 0; c < S_CALLS; c++)
            calls[c] = spent[c] / npairs;
    return rate;
fail:
    log_error ("cannot write pairs to '%s': %s", db, store_error (store));
fail_quiet:
    store_destroy (&store);
    free (marks);
    return -1;
}

// Section 2's runs, on the empty store (h 0) and over the history (h 1).
typedef struct {
    double rate[2][MAX_REPS], start[2][MAX_REPS], cpu[2];
    double windows[2][MAX_REPS * MAX_WINDOWS];
    int nwindows[2];
    long hwm[2], rss[2];
} s_history_t;

// Section 2's table from its runs.
static void
s_history_print (const bf_run_t *run, s_history_t *hi)
{
    int reps = run->reps;
    printf ("  %-26s %-29s %9s %8s %-13s\n", "", "---------- pairs/s ----------", "broker",
            "broker", "- broker MiB-");
    printf ("  %-26s %9s %11s %7s %9s %8s %6s %6s\n", "", "whole run", "1 s: median", "best",
            "start s", "CPU us/p", "HWM", "RSS");
    bf_stat_t sr[2], sw[2] = {{0, 0}, {0, 0}}, ss[2];
    for (int h = 0; h < 2; h++) {
        char label[64];
        if (h)
            snprintf (label, sizeof label, "%d pairs of history", run->history_pairs);
        else
            snprintf (label, sizeof label, "empty store");
        sr[h] = bf_stat (hi->rate[h], reps, 1);
        ss[h] = bf_stat (hi->start[h], reps, 0);
        printf ("  %-26s %9.0f", label, sr[h].median);
        if (hi->nwindows[h] > 0) {
            sw[h] = bf_stat (hi->windows[h], hi->nwindows[h], 1);
            printf (" %11.0f %7.0f", sw[h].median, sw[h].best);
        }
        else
            printf (" %11s %7s", "-", "-");
        printf (" %9.2f %8.0f %6.1f %6.1f\n", ss[h].median,
                hi->cpu[h] * 1e6 / run->history_run / reps, bf_mib (hi->hwm[h]),
                bf_mib (hi->rss[h]));
    }
    printf ("  %-26s %9.2f", "history / empty", sr[1].median / sr[0].median);
    if (hi->nwindows[0] > 0 && hi->nwindows[1] > 0)
        printf (" %11.2f %7.2f", sw[1].median / sw[0].median, sw[1].best / sw[0].best);
    else
        printf (" %11s %7s", "-", "-");
    printf (" %9s %8.2f %6.2f %6.2f\n", "", hi->cpu[1] / hi->cpu[0],
            (double) hi->hwm[1] / hi->hwm[0], (double) hi->rss[1] / hi->rss[0]);
    printf ("  target: pairs/s within 10 %% of the empty store (ratio >= 0.90); broker memory\n"
            "  independent of history. start s: spawn to sockets bound (the store opened and\n"
            "  checked, every file of every experiment offered again to the pairing rules)\n");
}

// 2. Dispatch with history against an empty store. 0, or -1.
int
bf_section_history (const bf_run_t *run)
{
    printf ("\n2. Dispatch with history: %d DONE pairs already in the store, then %d new pairs\n"
            "   in a new experiment (1 agent x 8 threads), against the same on an empty store\n",
            run->history_pairs, run->history_run);
    char history_db[PATH_MAX + 32];
    snprintf (history_db, sizeof history_db, "%s/history.db", run->root);
    double t0 = util_now ();
    int64_t history_events = 0;
    if (bf_write_pairs (history_db, "history", run->history_pairs, HISTORY_COMMIT, 0,
                       &history_events, NULL, NULL, NULL)
        < 0)
        return -1;
    double build_s = util_now () - t0;
    struct stat st;
    double db_mib = stat (history_db, &st) == 0 ? st.st_size / 1048576.0 : 0;
    printf ("  %-44s %9.1f  s    (%.0f pairs/s, %.0f MiB, commit every %d)\n",
            "history written with the store API", build_s, run->history_pairs / build_s, db_mib,
            HISTORY_COMMIT);
    fflush (stdout);
    static s_history_t hi;
    memset (&hi, 0, sizeof hi);
    for (int r = 0; r < run->reps; r++)
        for (int h = 0; h < 2; h++) {
            bf_cycle_t cy;
            char name[32], experiment[32];
            snprintf (name, sizeof name, "%s-%d", h ? "history" : "empty", r);
            // Each run adds its pairs to the history in an experiment of
            // its own: run r sees history + r x history_run pairs.
            snprintf (experiment, sizeof experiment, "run%d", r);
            if (bf_farm_cycle (run->root, name, &bf_configs[0], experiment, run->history_run,
                              h ? history_db : NULL, h ? &history_events : NULL, &cy,
                              &hi.start[h][r])
                != 0)
                return -1;
            hi.rate[h][r] = run->history_run / cy.cycle_s;
            for (int w = 0; w < cy.nwindows; w++)
                hi.windows[h][hi.nwindows[h]++] = cy.window_rates[w];
            hi.cpu[h] += cy.broker_cpu_s;
            hi.hwm[h] = cy.hwm_kb > hi.hwm[h] ? cy.hwm_kb : hi.hwm[h];
            hi.rss[h] = cy.rss_kb > hi.rss[h] ? cy.rss_kb : hi.rss[h];
        }
    s_history_print (run, &hi);
    bf_remove_db (history_db);
    fflush (stdout);
    return 0;
}

