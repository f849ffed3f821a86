// farm_piv.c — section 3 of bench_farm, PIV end to end: frames landed in
// the watch root, through the real watcher, broker and agent, against the
// same compute in this process and through pivfarm-piv.

#include "bench/farm.h"
#include "common/log.h"
#include "common/util.h"
#include "piv/image.h"
#include "piv/piv.h"
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Section 3: PIV end to end, read back from the event log.

#define MAX_PIV_PAIRS 200

static int
s_collect (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
           int64_t pair, const char *payload)
{
    (void) id;
    bf_events_t *all = arg;
    if (strcmp (kind, "pair") && strcmp (kind, "file") && strcmp (kind, "result")
        && strcmp (kind, "experiment"))
        return 0;
    if (all->n == all->size) {
        size_t size = all->size ? 2 * all->size : 256;
        bf_event_t *events = realloc (all->events, size * sizeof *events);
        if (!events)
            return -1;
        all->events = events;
        all->size = size;
    }
    all->events[all->n++] = (bf_event_t) {strdup (kind), ts_ns, experiment, pair, strdup (payload)};
    return 0;
}

int
bf_events_read (bf_farm_t *farm, bf_events_t *all)
{
    memset (all, 0, sizeof *all);
    if (store_events (farm->reader, 0, 0, s_collect, all) >= 0)
        return 0;
    log_error ("cannot read the events of '%s': %s", farm->db, store_error (farm->reader));
    bf_events_free (all);
    return -1;
}

void
bf_events_free (bf_events_t *all)
{
    for (size_t i = 0; i < all->n; i++) {
        free (all->events[i].kind);
        free (all->events[i].payload);
    }
    free (all->events);
    memset (all, 0, sizeof *all);
}

// The value of "key=" in a payload (to the next space, or the end for the
// last key), or NULL.
static const char *
s_payload (const char *payload, const char *key, char *buf, size_t len)
{
    size_t n = strlen (key);
    for (const char *p = payload; (p = strstr (p, key)); p++)
        if ((p == payload || p[-1] == ' ') && p[n] == '=') {
            const char *v = p + n + 1, *end = strcmp (key, "name") && strcmp (key, "stem")
                                                  ? strchr (v, ' ')
                                                  : NULL;
            size_t l = end ? (size_t) (end - v) : strlen (v);
            snprintf (buf, len, "%.*s", (int) (l < len ? l : len - 1), v);
            return buf;
        }
    return NULL;
}

int
bf_pair_times (const bf_events_t *all, const char *exp_name, const char *stem, int64_t *seen_b,
              int64_t *recorded, int64_t *compute_ns)
{
    char buf[256], name_b[256];
    int64_t exp = 0, pair = 0;
    *seen_b = *recorded = *compute_ns = 0;
    snprintf (name_b, sizeof name_b, "%s_b.tif", stem);
    for (size_t i = 0; i < all->n && !exp; i++)
        if (strcmp (all->events[i].kind, "experiment") == 0
            && s_payload (all->events[i].payload, "name", buf, sizeof buf)
            && strcmp (buf, exp_name) == 0)
            exp = all->events[i].experiment;
    for (size_t i = 0; i < all->n; i++) {
        const bf_event_t *e = &all->events[i];
        if (e->experiment != exp || !exp)
            continue;
        if (strcmp (e->kind, "pair") == 0 && s_payload (e->payload, "stem", buf, sizeof buf)
            && strcmp (buf, stem) == 0)
            pair = e->pair;
        else if (strcmp (e->kind, "file") == 0 && s_payload (e->payload, "name", buf, sizeof buf)
                 && strcmp (buf, name_b) == 0)
            *seen_b = e->ts_ns;
    }
    for (size_t i = 0; i < all->n && pair; i++) {
        const bf_event_t *e = &all->events[i];
        if (strcmp (e->kind, "result") == 0 && e->pair == pair) {
            *recorded = e->ts_ns;
            if (s_payload (e->payload, "compute_ns", buf, sizeof buf))
                *compute_ns = strtoll (buf, NULL, 10);
        }
    }
    return pair && *seen_b && *recorded ? 0 : -1;
}

// Frames land as a camera PC that writes elsewhere and then moves the file
// in does it: each frame of src/ is hard-linked into stage/ (outside the
// watch root; no data is copied), then renamed into data/<exp>/, which the
// watcher sees as IN_MOVED_TO. The bench's own writing thus takes no CPU
// from the agent, and frame B's "close" is the moment of its rename.

int
bf_stage (const bf_farm_t *farm, const char *src, const char *exp, int i)
{
    for (int side = 0; side < 2; side++) {
        char from[PATH_MAX + 64], to[PATH_MAX + 64];
        snprintf (from, sizeof from, "%s/p_%04d_%c.tif", src, i, side ? 'b' : 'a');
        snprintf (to, sizeof to, "%s/stage/%s-p_%04d_%c.tif", farm->dir, exp, i, side ? 'b' : 'a');
        if (link (from, to) != 0) {
            log_error ("cannot link '%s' to '%s': %s", from, to, strerror (errno));
            return -1;
        }
    }
    return 0;
}

int
bf_land (const bf_farm_t *farm, const char *exp, int i, int64_t *closed_ns)
{
    for (int side = 0; side < 2; side++) {
        char from[PATH_MAX + 64], to[PATH_MAX + 64];
        snprintf (from, sizeof from, "%s/stage/%s-p_%04d_%c.tif", farm->dir, exp, i,
                  side ? 'b' : 'a');
        snprintf (to, sizeof to, "%s/data/%s/p_%04d_%c.tif", farm->dir, exp, i, side ? 'b' : 'a');
        if (rename (from, to) != 0) {
            log_error ("cannot rename '%s' to '%s': %s", from, to, strerror (errno));
            return -1;
        }
    }
    *closed_ns = util_time_ns ();
    return 0;
}

// Waits until n results of 'exp' are recorded; *last_ns: the last one's time.
static int
s_wait_results (bf_farm_t *farm, const char *exp, int n, double timeout_s, int64_t *last_ns)
{
    bf_tail_t tail = {.experiment = exp};
    farm->last_event = 0;
    double t0 = util_now ();
    while (tail.results < n) {
        if (bf_stopped () || bf_tail (farm, &tail) != 0 || !bf_farm_alive (farm))
            return -1;
        if (util_now () - t0 > timeout_s) {
            log_error ("only %lld of %d pairs of '%s' done within %.0f s: see '%s'",
                       (long long) tail.results, n, exp, timeout_s, farm->dir);
            return -1;
        }
        usleep (10000);
    }
    if (last_ns)
        *last_ns = tail.last_result_ns;
    return 0;
}

piv_t *
bf_compute_engine (int threads)
{
    char err[ERRLEN];
    piv_settings_t s;
    piv_settings_init (&s);
    s.overlap = 50;
    s.final_iterations = 1;
    s.threads = threads;
    piv_t *engine = NULL;
    if (piv_settings_set_passes (&s, PIV_PASSES, err, sizeof err) != 0
        || !(engine = piv_new (&s, err, sizeof err)))
        log_error ("cannot make a PIV engine for passes '%s': %s", PIV_PASSES, err);
    return engine;
}

// Pure compute, in this process: what an agent's worker does with a pair
// (load both frames, PIV) without the farm around it. Each thread has its
// own engine, made in the thread on its first pair as an agent's worker
// makes its own (a warm-up run, uncounted, does that), and takes the next
// pair when it is free, as the agent's workers take tasks.
typedef struct {
    const char *src;       // directory of p_NNNN_{a,b}.tif
    int last;              // pairs 1..last
    int *next;             // the next pair to take, shared ...
    pthread_mutex_t *lock; // ... under this lock
    piv_t *engine;         // this thread's (NULL: made on the first pair)
    double *times;         // per pair taken: load + PIV, s (may be NULL)
    const char *out;       // if not NULL, each field is also written here as txt ...
    double *write_times;   // ... taking this long, s
    int failed;            // a pair could not be loaded, processed or written
} s_compute_t;

static void *
s_compute (void *arg)
{
    s_compute_t *c = arg;
    char err[ERRLEN], a[PATH_MAX + 32], b[PATH_MAX + 32];
    if (!c->engine && !(c->engine = bf_compute_engine (1))) {
        c->failed = 1;
        return NULL;
    }
    for (int k = 0; !c->failed; k++) {
        pthread_mutex_lock (c->lock);
        int i = (*c->next)++;
        pthread_mutex_unlock (c->lock);
        if (i > c->last)
            break;
        snprintf (a, sizeof a, "%s/p_%04d_a.tif", c->src, i);
        snprintf (b, sizeof b, "%s/p_%04d_b.tif", c->src, i);
        piv_image_t *ia = NULL, *ib = NULL;
        double t0 = util_now ();
        piv_field_t *field = NULL;
        if (piv_image_load_pair (a, b, 0, &ia, &ib, err, sizeof err) == 0)
            field = piv_process (c->engine, ia, ib, err, sizeof err);
        double t1 = util_now ();
        if (c->times)
            c->times[k] = t1 - t0;
        if (!field) {
            log_error ("cannot process '%s' and '%s': %s", a, b, err);
            c->failed = 1;
        }
        else if (c->out) {
            // As the agent writes its result file.
            FILE *f = fopen (c->out, "w");
            int werr = !f || piv_field_write (field, f, PIV_FORMAT_TXT, "bench_farm") != 0;
            if ((f && fclose (f) != 0) || werr) {
                log_error ("cannot write '%s': %s", c->out, strerror (errno));
                c->failed = 1;
            }
            c->write_times[k] = util_now () - t1;
        }
        piv_field_destroy (&field);
        piv_image_destroy (&ia);
        piv_image_destroy (&ib);
    }
    return NULL;
}

// Pairs first..last on 'threads' threads at once; the wall time, or -1.
// With times (one thread only), the load + PIV time of each pair goes
// there; with out, each field is written there too and its time goes to
// write_times.
static double
s_compute_run (const char *src, int first, int last, int threads, piv_t **engines,
               double *times, const char *out, double *write_times)
{
    pthread_t tid[2];
    s_compute_t c[2];
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int next = first;
    double t0 = util_now ();
    for (int t = 0; t < threads; t++) {
        c[t] = (s_compute_t) {src,  last, &next, &lock, engines[t], t == 0 ? times : NULL,
                              t == 0 ? out : NULL, write_times, 0};
        if (pthread_create (&tid[t], NULL, s_compute, &c[t]) != 0) {
            log_error ("cannot start a thread: %s", strerror (errno));
            for (int u = 0; u < t; u++)
                pthread_join (tid[u], NULL);
            return -1;
        }
    }
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join (tid[t], NULL);
        engines[t] = c[t].engine;
        failed |= c[t].failed;
    }
    return failed ? -1 : util_now () - t0;
}

// Runs 'concurrent' pivfarm-piv processes at once, on pairs 1.., single pass
// 32 px, 50 %, one run, one thread each; returns the wall time, or -1.
static double
s_piv_runs (const char *src, const char *out_dir, int concurrent)
{
    char prog[PATH_MAX];
    bf_bin (prog, sizeof prog, "pivfarm-piv");
    pid_t pids[8];
    char a[8][PATH_MAX + 32], b[8][PATH_MAX + 32], out[8][PATH_MAX + 32], log[PATH_MAX + 32];
    snprintf (log, sizeof log, "%s/pivfarm-piv.log", out_dir);
    double t0 = util_now ();
    for (int k = 0; k < concurrent; k++) {
        snprintf (a[k], sizeof a[k], "%s/p_%04d_a.tif", src, k + 1);
        snprintf (b[k], sizeof b[k], "%s/p_%04d_b.tif", src, k + 1);
        snprintf (out[k], sizeof out[k], "%s/piv%d.txt", out_dir, k + 1);
        char *argv[] = {prog, "--passes", PIV_PASSES, "--overlap", "50", "--iterations", "1",
                        "--threads", "1", "-o", out[k], a[k], b[k], NULL};
        if ((pids[k] = bf_spawn (argv, log)) < 0)
            return -1;
    }
    int failed = 0;
    for (int k = 0; k < concurrent; k++)
        failed |= bf_wait (pids[k]) != 0;
    double t = util_now () - t0;
    if (failed) {
        log_error ("pivfarm-piv failed: see '%s'", log);
        return -1;
    }
    return t;
}

typedef struct {
    int wisdom;             // FFTW wisdom loaded for the in-process figures
    bf_stat_t pair_1t;      // in process, 1 thread: load + PIV of one pair, s
    bf_stat_t write_1t;     // ... and writing its field as txt, as the agent does, s
    bf_stat_t pair_idle;    // load + PIV of one pair after IDLE_S of idleness, s
    bf_stat_t rate_2t;      // in process, 2 threads: pairs/s
    bf_stat_t exec_alone;   // one pivfarm-piv run, s
    bf_stat_t exec_two;     // two at once, s
    double warm_s;          // the first two pairs through the farm (engine set-up included)
    bf_stat_t farm_rate;    // farm, every pair landed at once: pairs/s
    bf_stat_t ratio;        // farm / in process, run by run
    double latency[MAX_PIV_PAIRS];   // close of B to result recorded, s
    double to_broker[MAX_PIV_PAIRS]; // close of B to the broker's FILE of B, s
    double compute[MAX_PIV_PAIRS];   // the agent's compute time, s
    int n;                  // pairs in the latency run
    double pause_s;         // between pairs in the latency run
    long hwm_kb, rss_kb;    // the broker's memory
    long agent_hwm_kb;      // the agent's
} s_piv_t;

// Renders npairs pairs into src/ with pivfarm-synth (uniform 3.3, -1.7 px)
// and makes stage/ beside it. 0, or -1 (logged).
static int
s_render (bf_farm_t *farm, const char *src, const char *stage, int npairs)
{
    char count[16], prog[PATH_MAX], prefix[PATH_MAX + 64], log[PATH_MAX + 64];
    snprintf (prefix, sizeof prefix, "%s/p", src);
    snprintf (count, sizeof count, "%d", npairs);
    bf_bin (prog, sizeof prog, "pivfarm-synth");
    bf_farm_log (farm, log, sizeof log, "synth");
    if (bf_mkdir (src) != 0 || bf_mkdir (stage) != 0)
        return -1;
    char *argv[] = {prog, "--size", PIV_SIZE, "--count", count, "-o", prefix, NULL};
    double t0 = util_now ();
    pid_t synth = bf_spawn (argv, log);
    if (synth < 0 || bf_wait (synth) != 0) {
        log_error ("pivfarm-synth failed: see '%s'", log);
        return -1;
    }
    printf ("  %d pairs of %s rendered by pivfarm-synth in %.1f s (uniform 3.3, -1.7 px)\n",
            npairs, PIV_SIZE, util_now () - t0);
    fflush (stdout);
    return 0;
}

// The compute without the farm: in this process, then through
// pivfarm-piv. 0, or -1 (logged).
static int
s_compute_figures (const bf_farm_t *farm, const char *src, int npairs, int reps,
                   piv_t *engines[2], s_piv_t *out)
{
    // The plans pivfarm-piv uses (its wisdom), so that the in-process
    // figures are those of the engine, not of this process's planning.
    out->wisdom = piv_wisdom_load (piv_wisdom_default_path ()) == 0;
    // Pure compute, in process: after a warm-up, one thread pair by pair.
    // Two threads on every pair (as the agent's two workers) run in
    // s_throughput, each time just before the farm's throughput run.
    double times[MAX_REPS > MAX_PIV_PAIRS ? MAX_REPS : MAX_PIV_PAIRS];
    double writes[MAX_PIV_PAIRS];
    char txt[PATH_MAX + 32];
    snprintf (txt, sizeof txt, "%s/compute.txt", farm->dir);
    int ok = s_compute_run (src, 1, 2, 2, engines, NULL, NULL, NULL) > 0;
    int single = npairs < 6 ? npairs : 6;
    ok = ok && s_compute_run (src, 1, single, 1, engines, times, txt, writes) > 0;
    if (ok) {
        out->pair_1t = bf_stat (times, single, 0);
        out->write_1t = bf_stat (writes, single, 0);
    }
    // ... and one pair at a time after the pause of the latency run:
    // a pair that finds the machine idle takes longer than one of a busy
    // loop (caches, the hypervisor's scheduling), and the latency run's
    // pairs all find it idle.
    for (int i = 1; ok && i <= single; i++) {
        usleep ((useconds_t) (IDLE_S * 1e6));
        ok = s_compute_run (src, i, i, 1, engines, &times[i - 1], NULL, NULL) > 0;
    }
    if (ok)
        out->pair_idle = bf_stat (times, single, 0);
    if (!ok)
        return -1;
    // The same through pivfarm-piv: exec, wisdom, load, PIV, write.
    double t1[MAX_REPS], t2[MAX_REPS];
    if (s_piv_runs (src, farm->dir, 1) < 0)
        return -1;
    for (int r = 0; r < reps; r++)
        if ((t1[r] = s_piv_runs (src, farm->dir, 1)) < 0
            || (t2[r] = s_piv_runs (src, farm->dir, 2)) < 0)
            return -1;
    out->exec_alone = bf_stat (t1, reps, 0);
    out->exec_two = bf_stat (t2, reps, 0);
    return 0;
}

// The farm: its experiments' directories, then broker, one agent of two
// threads, the watcher; and two pairs, uncounted: the agent's engines are
// made on the first task of each thread. 0, or -1 (logged).
static int
s_farm_start (bf_farm_t *farm, const char *src, int reps, s_piv_t *out)
{
    for (int e = 0; e < 2 + reps; e++) {
        char path[PATH_MAX + 64];
        if (e < 2)
            snprintf (path, sizeof path, "%s/data/%s", farm->dir, e ? "latency" : "warm");
        else
            snprintf (path, sizeof path, "%s/data/throughput%d", farm->dir, e - 2);
        if (bf_mkdir (path) != 0)
            return -1;
    }
    if (bf_farm_broker (farm, 0) != 0 || bf_farm_agent (farm, "piv", 2) != 0
        || bf_farm_wait_agents (farm, 1) != 0 || bf_farm_watcher (farm) != 0)
        return -1;
    int64_t closed;
    double t0 = util_now ();
    if (bf_stage (farm, src, "warm", 1) != 0 || bf_stage (farm, src, "warm", 2) != 0
        || bf_land (farm, "warm", 1, &closed) != 0 || bf_land (farm, "warm", 2, &closed) != 0
        || s_wait_results (farm, "warm", 2, 120, NULL) != 0)
        return -1;
    out->warm_s = util_now () - t0;
    return 0;
}

// Throughput: every pair at once, each run right after the same pairs
// on two threads in this process (the farm idle), so that both see the
// machine at the same speed (this VM's drifts by a third over minutes).
// 0, or -1 (logged).
static int
s_throughput (bf_farm_t *farm, const char *src, int npairs, int reps, piv_t *engines[2],
              s_piv_t *out)
{
    double rates[MAX_REPS], farm_rates[MAX_REPS], ratios[MAX_REPS];
    int64_t closed, last_ns;
    for (int r = 0; r < reps; r++) {
        char exp[32];
        snprintf (exp, sizeof exp, "throughput%d", r);
        double t = s_compute_run (src, 1, npairs, 2, engines, NULL, NULL, NULL);
        if (t < 0)
            return -1;
        rates[r] = npairs / t;
        for (int i = 1; i <= npairs; i++)
            if (bf_stage (farm, src, exp, i) != 0)
                return -1;
        int64_t first_ns = util_time_ns ();
        for (int i = 1; i <= npairs; i++)
            if (bf_land (farm, exp, i, &closed) != 0)
                return -1;
        if (s_wait_results (farm, exp, npairs, 300, &last_ns) != 0)
            return -1;
        farm_rates[r] = npairs / ((last_ns - first_ns) / 1e9);
        ratios[r] = farm_rates[r] / rates[r];
    }
    out->rate_2t = bf_stat (rates, reps, 1);
    out->farm_rate = bf_stat (farm_rates, reps, 1);
    out->ratio = bf_stat (ratios, reps, 1);
    return 0;
}

// The latencies of the latency run's pairs (frame B closed at closed_b[i]),
// from the event log. 0, or -1 (logged).
static int
s_latencies (bf_farm_t *farm, int npairs, const int64_t *closed_b, s_piv_t *out)
{
    bf_events_t all;
    int rc = -1;
    if (bf_events_read (farm, &all) != 0)
        return -1;
    for (int i = 1; i <= npairs; i++) {
        char stem[32];
        int64_t seen_b, recorded, compute_ns;
        snprintf (stem, sizeof stem, "p_%04d", i);
        if (bf_pair_times (&all, "latency", stem, &seen_b, &recorded, &compute_ns) != 0) {
            log_error ("pair '%s' of 'latency' is not complete in the event log of '%s'", stem,
                       farm->db);
            goto done;
        }
        out->latency[i - 1] = (recorded - closed_b[i]) / 1e9;
        out->to_broker[i - 1] = (seen_b - closed_b[i]) / 1e9;
        out->compute[i - 1] = compute_ns / 1e9;
    }
    rc = 0;
done:
    bf_events_free (&all);
    return rc;
}

// Section 3's runs: the frames rendered, the compute alone, then the farm's
// warm-up, latency and throughput runs. 0, or -1 (logged).
static int
s_bench_piv (const char *parent, int npairs, int reps, s_piv_t *out)
{
    memset (out, 0, sizeof *out);
    bf_farm_t farm;
    piv_t *engines[2] = {NULL, NULL};
    int rc = -1;
    if (bf_farm_init (&farm, parent, "piv", "piv", 2) != 0)
        return -1;
    char src[PATH_MAX + 32], stage[PATH_MAX + 32];
    snprintf (src, sizeof src, "%s/src", farm.dir);
    snprintf (stage, sizeof stage, "%s/stage", farm.dir);
    if (s_render (&farm, src, stage, npairs) != 0
        || s_compute_figures (&farm, src, npairs, reps, engines, out) != 0
        || s_farm_start (&farm, src, reps, out) != 0)
        goto done;

    // Latency: one pair at a time, the next only after the last is done
    // and a pause longer than the compute time, so nothing queues.
    out->n = npairs;
    out->pause_s = IDLE_S;
    int64_t closed_b[MAX_PIV_PAIRS + 1];
    for (int i = 1; i <= npairs; i++) {
        if (bf_stage (&farm, src, "latency", i) != 0
            || bf_land (&farm, "latency", i, &closed_b[i]) != 0
            || s_wait_results (&farm, "latency", i, 120, NULL) != 0)
            goto done;
        usleep ((useconds_t) (out->pause_s * 1e6));
    }
    if (s_throughput (&farm, src, npairs, reps, engines, out) != 0)
        goto done;
    bf_memory (farm.broker, &out->hwm_kb, &out->rss_kb);
    long rss;
    bf_memory (farm.agents[0], &out->agent_hwm_kb, &rss);
    if (s_latencies (&farm, npairs, closed_b, out) != 0)
        goto done;
    rc = 0;
done:
    piv_destroy (&engines[0]);
    piv_destroy (&engines[1]);
    bf_farm_stop (&farm);
    if (rc == 0)
        bf_rmtree (farm.dir);
    return rc;
}

// Section 3's figures from its runs (pv's lists are sorted here).
static void
s_piv_print (const bf_run_t *run, s_piv_t *pv)
{
    qsort (pv->latency, (size_t) pv->n, sizeof (double), bf_cmp_double);
    qsort (pv->to_broker, (size_t) pv->n, sizeof (double), bf_cmp_double);
    qsort (pv->compute, (size_t) pv->n, sizeof (double), bf_cmp_double);
    double lat_med = bf_quantile (pv->latency, pv->n, 0.5);
    double lat_99 = bf_quantile (pv->latency, pv->n, 0.99);
    double agent_med = bf_quantile (pv->compute, pv->n, 0.5);
    double pure_pair = pv->pair_idle.median;
    printf ("  in process: FFTW wisdom %s '%s'\n",
            pv->wisdom ? "loaded from" : "not found (plans measured now) at",
            piv_wisdom_default_path ());
    printf ("  %-44s %9s %9s\n", "", "best", "median");
    printf ("  %-44s %9.1f %9.1f  ms\n", "load + PIV of one pair, in process, 1 thread",
            pv->pair_1t.best * 1e3, pv->pair_1t.median * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms\n", "its field written as txt (as the agent does)",
            pv->write_1t.best * 1e3, pv->write_1t.median * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms   (the latency run's compute)\n",
            "load + PIV, each pair after 0.4 s idle", pv->pair_idle.best * 1e3,
            pv->pair_idle.median * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms   (exec, wisdom, load, PIV, write)\n",
            "pivfarm-piv, one pair alone", pv->exec_alone.best * 1e3,
            pv->exec_alone.median * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms   (%.2f pairs/s at best)\n", "pivfarm-piv, two pairs at once",
            pv->exec_two.best * 1e3, pv->exec_two.median * 1e3, 2 / pv->exec_two.best);
    printf ("  throughput, %d pairs, %d run(s), each farm run right after an in-process one:\n",
            run->piv_pairs, run->compute_reps);
    printf ("  %-44s %9.2f %9.2f  pairs/s (load + PIV: the pure compute throughput)\n",
            "every pair on 2 threads, in process", pv->rate_2t.best, pv->rate_2t.median);
    printf ("  %-44s %9.2f %9.2f  pairs/s (first rename to last result recorded)\n",
            "farm, every pair landed at once", pv->farm_rate.best, pv->farm_rate.median);
    printf ("  %-44s %9.0f %9.0f  %%    target >= 80 %%\n", "farm / pure compute, run by run",
            100 * pv->ratio.best, 100 * pv->ratio.median);
    printf ("  latency: %d pairs one at a time, each landed %.0f ms after the last result\n",
            pv->n, pv->pause_s * 1e3);
    printf ("  %-44s %9s %9s\n", "", "median", "p99");
    printf ("  %-44s %9.1f %9.1f  ms   target: median <= compute + 20 ms = %.1f ms\n",
            "close of frame B -> result recorded", lat_med * 1e3, lat_99 * 1e3,
            (pure_pair + 0.020) * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms   (load, PIV, write, encode)\n",
            "compute time per pair, as the agent says", agent_med * 1e3,
            bf_quantile (pv->compute, pv->n, 0.99) * 1e3);
    printf ("  %-44s %9.1f %9s  ms   (the farm's own share of the latency)\n",
            "latency - agent compute (medians)", (lat_med - agent_med) * 1e3, "");
    printf ("  %-44s %9.1f %9.1f  ms\n", "close of frame B -> its FILE at the broker",
            bf_quantile (pv->to_broker, pv->n, 0.5) * 1e3,
            bf_quantile (pv->to_broker, pv->n, 0.99) * 1e3);
    printf ("  %-44s %9.2f %9s  s    (two pairs, the agent's engines made)\n",
            "first pairs through a fresh agent", pv->warm_s, "");
    printf ("  %-44s %9.1f %9.1f  MiB  (broker HWM, RSS; agent HWM %.1f MiB)\n", "memory",
            bf_mib (pv->hwm_kb), bf_mib (pv->rss_kb), bf_mib (pv->agent_hwm_kb));
    printf ("  compute: load + PIV in process, 1 thread, each pair after the same idle pause\n"
            "  (median). p99: nearest rank; of %d values, the largest%s\n",
            pv->n, pv->n < 100 ? "" : " but a few");
}

// 3. End to end on real PIV. 0, or -1.
int
bf_section_piv (const bf_run_t *run)
{
    printf ("\n3. End to end on real PIV: %s, single pass %s px, 50 %%, 1 run; watcher (inotify),\n"
            "   broker, 1 agent x 2 threads (processor piv). Frames are hard-linked outside the\n"
            "   watch root, then renamed in (the bench copies no data while the agent works)\n",
            PIV_SIZE, PIV_PASSES);
    s_piv_t pv;
    if (s_bench_piv (run->root, run->piv_pairs, run->compute_reps, &pv) != 0)
        return -1;
    s_piv_print (run, &pv);
    return 0;
}
