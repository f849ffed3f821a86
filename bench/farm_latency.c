// farm_latency.c — section 4 of bench_farm, latency mode (issue 27): close
// of frame B -> its feedback received by a real SUB subscriber, one pair at
// a time, at 1024^2 and 2048^2, single pass, one agent of two threads, with
// agent/latency on and off; and throughput at full load, on against off, in
// the same run (the two farms' runs alternate, so that both see the
// machine at the same speed).

#include "bench/farm.h"
#include "broker/feedback.h"
#include "broker/stats.h"
#include "common/jdoc.h"
#include "common/log.h"
#include "common/util.h"
#include "piv/image.h"
#include "piv/piv.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LAT_PAIRS 30        // pairs of each size's latency run
#define LAT_PAIRS_QUICK 12  // ... with --quick
#define LAT_PAUSE_S 0.1     // after a pair's feedback, before the next pair lands
#define LAT_MAX 64          // pairs of a run, at most
#define FEEDBACK_S 120.0    // at most this long for a feedback

enum { SIZE_1024, SIZE_2048, SIZES };
static const int s_size[SIZES] = {1024, 2048};
static const double s_goal_ms[SIZES] = {15, 45};  // the issue's, median close -> feedback

// Where a pair's time went, s: each from the bench's rename of frame B (its
// close) to the subscriber's receipt of its feedback, and the stages between.
enum {
    T_TOTAL,     // close of frame B -> feedback received
    T_BROKER,    // -> the broker's FILE event of B (the watcher's share)
    T_DISPATCH,  // -> TASK sent (pairing, its commit, dispatch)
    T_TRANSIT,   // TASK sent -> RESULT received, less the agent's compute
    T_COMPUTE,   // the agent's: read the frames, PIV, write the result
    T_RECORD,    // RESULT received -> feedback sent (store, decode, statistics, figures, JSON)
    T_PUBLISH,   // feedback sent -> received
    T_PARTS
};
static const char *const s_part_name[T_PARTS] = {
    "close of frame B -> feedback received", "  close -> the broker's FILE of B",
    "  FILE -> TASK sent (pairing, commit)", "  TASK -> agent -> RESULT, less compute",
    "  agent compute (read, PIV, write)", "  RESULT -> feedback sent (record, build)",
    "  feedback sent -> received by the SUB"};

typedef struct {
    double t[T_PARTS][LAT_MAX];  // per pair
    int n;
} s_lat_t;

// The feedback message of one pair, as the subscriber received it.
typedef struct {
    int64_t received_ns;
    int64_t dispatched_ns, computed_ns, published_ns;
    char stem[64];
} s_feedback_t;

// A farm of one agent x 2 threads with agent/latency on or off, and a
// subscriber of its feedback.
typedef struct {
    bf_farm_t farm;
    int latency;    // agent/latency
    zsock_t *sub;   // SUB on feedback.<every experiment>
    s_lat_t lat[SIZES];
    double rates[MAX_REPS];  // throughput runs, pairs/s
    int64_t closed[LAT_MAX + 1];      // the latency run under way: frame B's close, by pair
    s_feedback_t fb[LAT_MAX + 1];     // ... and its feedback
} s_mode_t;

// A path printed into buf; -1 (logged) when it does not fit.
static int __attribute__ ((format (printf, 3, 4)))
s_path (char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int n = vsnprintf (buf, len, fmt, ap);
    va_end (ap);
    if (n >= 0 && (size_t) n < len)
        return 0;
    log_error ("a path under '%.64s...' is too long: set TMPDIR to a shorter directory", buf);
    return -1;
}


// The next feedback of experiment 'exp' (others are skipped); 0, or -1
// (logged) after FEEDBACK_S or when a program of the farm stopped.
static int
s_next_feedback (s_mode_t *m, const char *exp, s_feedback_t *fb)
{
    char topic[256];
    snprintf (topic, sizeof topic, "feedback.%s/", exp);
    double t0 = util_now ();
    while (!bf_stopped ()) {
        zmsg_t *msg = zmsg_recv (m->sub);
        int64_t now = util_time_ns ();
        if (!msg) {
            if (!bf_farm_alive (&m->farm))
                return -1;
            if (util_now () - t0 > FEEDBACK_S) {
                log_error ("no feedback of '%s' within %.0f s: see '%s'", exp, FEEDBACK_S,
                           m->farm.dir);
                return -1;
            }
            continue;
        }
        char *name = zmsg_popstr (msg), *json = zmsg_popstr (msg);
        int ours = name && json && strcmp (name, topic) == 0;
        jdoc_t *doc = NULL;
        char err[256];
        if (ours && !(doc = jdoc_parse (json, err, sizeof err)))
            log_error ("a feedback of '%s' is not JSON: %s", exp, err);
        if (doc) {
            *fb = (s_feedback_t) {.received_ns = now,
                                  .dispatched_ns = jdoc_int (doc, 0, "$.dispatched_ns"),
                                  .computed_ns = jdoc_int (doc, 0, "$.computed_ns"),
                                  .published_ns = jdoc_int (doc, 0, "$.published_ns")};
            const char *stem = jdoc_string (doc, "$.stem");
            snprintf (fb->stem, sizeof fb->stem, "%s", stem ? stem : "");
        }
        jdoc_destroy (&doc);
        free (name);
        free (json);
        zmsg_destroy (&msg);
        if (ours)
            return fb->stem[0] ? 0 : -1;
    }
    return -1;
}

// Makes the farm's directories, starts it and subscribes. 0, or -1.
static int
s_mode_start (s_mode_t *m, const char *parent, int latency, int reps)
{
    char name[32];
    snprintf (name, sizeof name, "latency-%s", latency ? "on" : "off");
    m->latency = latency;
    bf_latency = latency;
    int rc = bf_farm_init (&m->farm, parent, name, "piv", 2);
    bf_latency = -1;
    if (rc != 0)
        return -1;
    char path[PATH_MAX];
    if (s_path (path, sizeof path, "%s/stage", m->farm.dir) != 0 || bf_mkdir (path) != 0)
        return -1;
    for (int s = 0; s < SIZES; s++)
        for (int kind = 0; kind < 2; kind++)
            if (s_path (path, sizeof path, "%s/data/%s%d", m->farm.dir, kind ? "lat" : "warm",
                        s_size[s])
                    != 0
                || bf_mkdir (path) != 0)
                return -1;
    for (int r = 0; r < reps; r++)
        if (s_path (path, sizeof path, "%s/data/thr%d", m->farm.dir, r) != 0
            || bf_mkdir (path) != 0)
            return -1;
    if (bf_farm_broker (&m->farm, 0) != 0 || bf_farm_agent (&m->farm, "piv", 2) != 0
        || bf_farm_wait_agents (&m->farm, 1) != 0 || bf_farm_watcher (&m->farm) != 0)
        return -1;
    char endpoint[PATH_MAX];
    if (s_path (endpoint, sizeof endpoint, "ipc://%s/publish", m->farm.dir) != 0)
        return -1;
    if (!(m->sub = zsock_new_sub (endpoint, "feedback."))) {
        log_error ("cannot subscribe to '%s'", endpoint);
        return -1;
    }
    zsock_set_rcvtimeo (m->sub, 200);
    return 0;
}

static void
s_mode_stop (s_mode_t *m)
{
    zsock_destroy (&m->sub);
    bf_farm_stop (&m->farm);
}

// Lands pairs first..last of src into 'exp' at once and waits for their
// feedback; *first_ns: the first rename, *last_ns: the last receipt.
static int
s_land_all (s_mode_t *m, const char *src, const char *exp, int first, int last,
            int64_t *first_ns, int64_t *last_ns)
{
    int64_t closed;
    for (int i = first; i <= last; i++)
        if (bf_stage (&m->farm, src, exp, i) != 0)
            return -1;
    *first_ns = util_time_ns ();
    for (int i = first; i <= last; i++)
        if (bf_land (&m->farm, exp, i, &closed) != 0)
            return -1;
    s_feedback_t fb;
    for (int i = first; i <= last; i++)
        if (s_next_feedback (m, exp, &fb) != 0)
            return -1;
    *last_ns = fb.received_ns;
    return 0;
}

// Warm-up of a size: a pair alone, then two at once (each worker's engine
// made, its plans found). 0, or -1.
static int
s_warm (s_mode_t *m, const char *src, int size)
{
    char exp[32];
    snprintf (exp, sizeof exp, "warm%d", size);
    int64_t a, b;
    return s_land_all (m, src, exp, 1, 1, &a, &b) != 0 || s_land_all (m, src, exp, 2, 3, &a, &b) != 0
               ? -1
               : 0;
}

// Pair i of size s landed on m's farm, its feedback awaited. 0, or -1.
static int
s_latency_pair (s_mode_t *m, const char *src, int s, int i)
{
    char exp[32];
    snprintf (exp, sizeof exp, "lat%d", s_size[s]);
    return bf_stage (&m->farm, src, exp, i) != 0 || bf_land (&m->farm, exp, i, &m->closed[i]) != 0
                   || s_next_feedback (m, exp, &m->fb[i]) != 0
               ? -1
               : 0;
}

// The stages of the latency run of size s (pairs 1..npairs landed by
// s_latency_pair), from their feedback and the event log. 0, or -1.
static int
s_latency_times (s_mode_t *m, int s, int npairs)
{
    char exp[32];
    snprintf (exp, sizeof exp, "lat%d", s_size[s]);
    const int64_t *closed = m->closed;
    const s_feedback_t *fb = m->fb;
    bf_events_t all;
    if (bf_events_read (&m->farm, &all) != 0)
        return -1;
    s_lat_t *l = &m->lat[s];
    int rc = 0;
    for (int i = 1; i <= npairs && rc == 0; i++) {
        char stem[32];
        int64_t seen_b, recorded, compute_ns;
        snprintf (stem, sizeof stem, "p_%04d", i);
        if (bf_pair_times (&all, exp, stem, &seen_b, &recorded, &compute_ns) != 0
            || strcmp (fb[i].stem, stem) != 0) {
            log_error ("pair '%s' of '%s' is not complete in the event log of '%s'", stem, exp,
                       m->farm.db);
            rc = -1;
            break;
        }
        double *t[T_PARTS];
        for (int p = 0; p < T_PARTS; p++)
            t[p] = &l->t[p][i - 1];
        *t[T_TOTAL] = (fb[i].received_ns - closed[i]) / 1e9;
        *t[T_BROKER] = (seen_b - closed[i]) / 1e9;
        *t[T_DISPATCH] = (fb[i].dispatched_ns - seen_b) / 1e9;
        *t[T_COMPUTE] = compute_ns / 1e9;
        *t[T_TRANSIT] = (fb[i].computed_ns - fb[i].dispatched_ns - compute_ns) / 1e9;
        *t[T_RECORD] = (fb[i].published_ns - fb[i].computed_ns) / 1e9;
        *t[T_PUBLISH] = (fb[i].received_ns - fb[i].published_ns) / 1e9;
    }
    l->n = rc == 0 ? npairs : 0;
    bf_events_free (&all);
    return rc;
}

// In this process, for the breakdown: reading a pair's frames (a loader
// that keeps their buffers), and its PIV on 1 and on 2 threads (one engine),
// as an agent's worker does them, and the broker's build of its feedback
// (s_build); medians of 'reps' after a warm-up, s.
typedef struct {
    double read_s;      // a pair's frames read
    double piv_s[3];    // its PIV on [1] and [2] threads
    double decode_s;    // the broker's decode of its RESULT blob, with the vorticity
    double build_s;     // its feedback figures and JSON
} s_inproc_t;

// The broker's work between RESULT and feedback but the store's write, on
// field f: the blob decoded with its vorticity (stats_field), then the
// figures and the message (feedback_figures, feedback_message_json). 0, or
// -1 (logged).
static int
s_build (const piv_field_t *f, double *decode_s, double *build_s)
{
    unsigned char *blob = NULL;
    size_t size = 0;
    char err[ERRLEN], json[4096];
    if (piv_field_encode (f, &blob, &size) != 0) {
        log_error ("cannot encode a field: out of memory");
        return -1;
    }
    double t0 = util_now ();
    float *vorticity = NULL;
    piv_field_t *field = stats_field (blob, size, &vorticity, err, sizeof err);
    double t1 = util_now ();
    feedback_settings_t fs;
    feedback_settings_init (&fs);
    feedback_figures_t figures;
    int len = -1;
    if (field) {
        feedback_figures (field, vorticity, &fs, NULL, &figures);
        feedback_figures_calibrate (&figures, NULL);
        feedback_message_t m = {.experiment = "lat", .pair = 1, .stem = "p_0001",
                                .settings = &fs, .figures = &figures, .output = NAN};
        len = feedback_message_json (&m, json, sizeof json);
    }
    *build_s = util_now () - t1;
    *decode_s = t1 - t0;
    if (!field)
        log_error ("cannot decode a field: %s", err);
    free (vorticity);
    piv_field_destroy (&field);
    free (blob);
    return len < 0 ? -1 : 0;
}

static int
s_in_process (const char *src, int reps, s_inproc_t *out)
{
    char err[ERRLEN], a[PATH_MAX], b[PATH_MAX];
    piv_t *engine = bf_compute_engine (2);
    piv_loader_t *loader = piv_loader_new ();  // the frames' buffers kept, as an agent's worker
    if (!engine || !loader) {
        piv_destroy (&engine);
        piv_loader_destroy (&loader);
        return -1;
    }
    double t[5][MAX_REPS + 1];
    int rc = 0;
    for (int r = 0; r <= reps && rc == 0; r++) {
        if (s_path (a, sizeof a, "%s/p_%04d_a.tif", src, 1 + r % 3) != 0
            || s_path (b, sizeof b, "%s/p_%04d_b.tif", src, 1 + r % 3) != 0) {
            rc = -1;
            break;
        }
        piv_image_t *ia = NULL, *ib = NULL;
        double t0 = util_now ();
        if (piv_loader_pair (loader, a, b, 0, &ia, &ib, err, sizeof err) != 0) {
            log_error ("cannot read '%s' and '%s': %s", a, b, err);
            rc = -1;
            break;
        }
        double t1 = util_now ();
        for (int threads = 1; threads <= 2 && rc == 0; threads++) {
            piv_set_threads (engine, threads);
            double t2 = util_now ();
            piv_field_t *f = piv_process (engine, ia, ib, err, sizeof err);
            t[threads][r] = util_now () - t2;
            if (!f) {
                log_error ("cannot process '%s' and '%s': %s", a, b, err);
                rc = -1;
            }
            else if (threads == 2 && s_build (f, &t[3][r], &t[4][r]) != 0)
                rc = -1;
            piv_field_destroy (&f);
        }
        t[0][r] = t1 - t0;
    }
    piv_loader_destroy (&loader);
    piv_destroy (&engine);
    if (rc != 0)
        return -1;
    // The first run (r = 0) warmed up: left out.
    out->read_s = bf_stat (t[0] + 1, reps, 0).median;
    out->piv_s[1] = bf_stat (t[1] + 1, reps, 0).median;
    out->piv_s[2] = bf_stat (t[2] + 1, reps, 0).median;
    out->decode_s = bf_stat (t[3] + 1, reps, 0).median;
    out->build_s = bf_stat (t[4] + 1, reps, 0).median;
    return 0;
}

// Renders the pairs of one size into dir (pivfarm-synth, uniform 3.3,
// -1.7 px). 0, or -1.
static int
s_render (const char *dir, int size, int npairs)
{
    char prog[PATH_MAX], prefix[PATH_MAX], log[PATH_MAX], sz[32], count[16];
    bf_bin (prog, sizeof prog, "pivfarm-synth");
    snprintf (sz, sizeof sz, "%dx%d", size, size);
    snprintf (count, sizeof count, "%d", npairs);
    if (s_path (prefix, sizeof prefix, "%s/p", dir) != 0
        || s_path (log, sizeof log, "%s/synth.log", dir) != 0 || bf_mkdir (dir) != 0)
        return -1;
    char *argv[] = {prog, "--size", sz, "--count", count, "-o", prefix, NULL};
    pid_t synth = bf_spawn (argv, log);
    if (synth < 0 || bf_wait (synth) != 0) {
        log_error ("pivfarm-synth failed: see '%s'", log);
        return -1;
    }
    return 0;
}

static void
s_print_latency (s_mode_t *m, int s, const s_inproc_t *in)
{
    s_lat_t *l = &m->lat[s];
    printf ("  %d^2, agent/latency = %d: %d pairs one at a time, each %.0f ms after the last "
            "feedback\n",
            s_size[s], m->latency, l->n, LAT_PAUSE_S * 1e3);
    printf ("  %-44s %9s %9s\n", "", "median", "p99");
    for (int p = 0; p < T_PARTS; p++) {
        qsort (l->t[p], (size_t) l->n, sizeof (double), bf_cmp_double);
        printf ("  %-44s %9.1f %9.1f  ms", s_part_name[p], bf_quantile (l->t[p], l->n, 0.5) * 1e3,
                bf_quantile (l->t[p], l->n, 0.99) * 1e3);
        if (p == T_TOTAL && m->latency)
            printf ("   goal: median <= %.0f ms", s_goal_ms[s]);
        if (p == T_COMPUTE)
            printf ("   (in process: read %.1f, PIV %.1f on 1 thread, %.1f on 2)",
                    in->read_s * 1e3, in->piv_s[1] * 1e3, in->piv_s[2] * 1e3);
        if (p == T_RECORD)
            printf ("   (in process: decode %.2f, figures + JSON %.2f; the rest: the store)",
                    in->decode_s * 1e3, in->build_s * 1e3);
        printf ("\n");
    }
}

// 4. Latency mode. 0, or -1.
int
bf_section_latency (const bf_run_t *run)
{
    int npairs = run->quick ? LAT_PAIRS_QUICK : LAT_PAIRS;
    int thr_pairs = run->piv_pairs, reps = run->compute_reps;
    printf ("\n4. Latency mode (issue 27): single pass %s px, 50 %%, 1 run; watcher (inotify),\n"
            "   broker, 1 agent x 2 threads, feedback received by a SUB subscriber; the same\n"
            "   farm with agent/latency = 1 (a pair alone on both threads) and = 0 (one each)\n",
            PIV_PASSES);
    char dir[PATH_MAX], src[SIZES][PATH_MAX];
    if (s_path (dir, sizeof dir, "%s/latency", run->root) != 0 || bf_mkdir (dir) != 0)
        return -1;
    int most = npairs > thr_pairs ? npairs : thr_pairs;
    double t0 = util_now ();
    for (int s = 0; s < SIZES; s++) {
        if (s_path (src[s], sizeof src[s], "%s/src%d", dir, s_size[s]) != 0
            || s_render (src[s], s_size[s], most) != 0)
            return -1;
    }
    printf ("  %d pairs of 1024^2 and of 2048^2 rendered by pivfarm-synth in %.1f s\n", most,
            util_now () - t0);
    fflush (stdout);
    s_inproc_t inproc[SIZES];
    for (int s = 0; s < SIZES; s++)
        if (s_in_process (src[s], 5, &inproc[s]) != 0)
            return -1;
    static s_mode_t modes[2];
    memset (modes, 0, sizeof modes);
    int rc = -1;
    for (int k = 0; k < 2; k++)
        if (s_mode_start (&modes[k], dir, k == 0, reps) != 0)
            goto done;
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < SIZES; s++)
            if (s_warm (&modes[k], src[s], s_size[s]) != 0)
                goto done;
    // Latency: pair by pair, on one farm then the other (the order turns
    // each pair), the other farm idle: both see the machine as it is then.
    for (int s = 0; s < SIZES; s++) {
        for (int i = 1; i <= npairs; i++)
            for (int j = 0; j < 2; j++) {
                if (s_latency_pair (&modes[(i + j) % 2], src[s], s, i) != 0)
                    goto done;
                usleep ((useconds_t) (LAT_PAUSE_S * 1e6));
            }
        for (int k = 0; k < 2; k++)
            if (s_latency_times (&modes[k], s, npairs) != 0)
                goto done;
    }
    // Throughput at full load, 2048^2: every pair landed at once, on then
    // off, then off then on, ...
    double ratios[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        char exp[32];
        snprintf (exp, sizeof exp, "thr%d", r);
        for (int j = 0; j < 2; j++) {
            s_mode_t *m = &modes[(r + j) % 2];
            int64_t first, last;
            if (s_land_all (m, src[SIZE_2048], exp, 1, thr_pairs, &first, &last) != 0)
                goto done;
            m->rates[r] = thr_pairs / ((last - first) / 1e9);
        }
        ratios[r] = modes[0].rates[r] / modes[1].rates[r];
    }
    for (int s = 0; s < SIZES; s++) {
        // Pair i's on / off before the lists are sorted: the two ran one
        // after the other.
        double pair_ratio[LAT_MAX];
        for (int i = 0; i < npairs; i++)
            pair_ratio[i] = modes[0].lat[s].t[T_TOTAL][i] / modes[1].lat[s].t[T_TOTAL][i];
        for (int k = 0; k < 2; k++)
            s_print_latency (&modes[k], s, &inproc[s]);
        qsort (pair_ratio, (size_t) npairs, sizeof (double), bf_cmp_double);
        printf ("  %d^2: close -> feedback, on / off pair by pair: median %.0f %%\n", s_size[s],
                100 * bf_quantile (pair_ratio, npairs, 0.5));
    }
    printf ("  throughput at full load, 2048^2, %d pairs landed at once, %d run(s) of each,\n"
            "  alternating (first rename -> last feedback received):\n",
            thr_pairs, reps);
    printf ("  %-44s %9s %9s\n", "", "best", "median");
    for (int k = 0; k < 2; k++) {
        bf_stat_t st = bf_stat (modes[k].rates, reps, 1);
        char label[64];
        snprintf (label, sizeof label, "agent/latency = %d", modes[k].latency);
        printf ("  %-44s %9.2f %9.2f  pairs/s\n", label, st.best, st.median);
    }
    bf_stat_t ratio = bf_stat (ratios, reps, 1);
    printf ("  %-44s %9.0f %9.0f  %%    goal: 100 %% (+- noise)\n", "on / off, run by run",
            100 * ratio.best, 100 * ratio.median);
    printf ("  p99: nearest rank; of %d values, the largest. In process: one engine of 2\n"
            "  threads, medians of 5 pairs\n",
            npairs);
    rc = 0;
done:
    for (int k = 0; k < 2; k++)
        s_mode_stop (&modes[k]);
    if (rc == 0)
        bf_rmtree (dir);
    return rc;
}
