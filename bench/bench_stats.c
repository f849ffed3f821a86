// bench_stats.c — what the run statistics cost, on the grids of a 1024^2
// and a 2048^2 image at step 8. Section 1 (issue 27): the saved state's
// size and the time to count one field and to encode the state, with the
// uncertainty kept and without it. Section 2 (issue 28): a run at the
// rig's rate through the store and the broker's statistics stage, saving
// at every look (as before issue 28) and within broker/stats_save_kb_s:
// the bytes the saves write and the broker's time they take per second,
// and the store's growth per pair and per hour. Prints figures; never
// fails on time.

#include "broker/stats.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "piv/stats.h"
#include "store/store.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FIELDS 40 // counted per figure
#define REPS 5    // figures per case: best and median shown

static double
s_now (void)
{
    struct timespec t;
    clock_gettime (CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// A field of n x n points at step 8, every vector valid, varying with 'i'.
static void
s_fill (piv_field_t *f, float *w, int n, int i)
{
    for (int k = 0; k < n * n; k++) {
        f->x[k] = (float) (8 + 8 * (k % n));
        f->y[k] = (float) (8 + 8 * (k / n));
        f->u[k] = (float) (3 + 0.1 * sin (k + 0.7 * i));
        f->v[k] = (float) (-1 + 0.1 * cos (k + 0.3 * i));
        f->flags[k] = PIV_FLAG_VALID;
        f->peak_ratio[k] = 2;
        w[k] = (float) (0.01 * sin (0.1 * k + i));
    }
}

// One grid: both cases, a line each.
static int
s_grid (int n)
{
    piv_field_t *f = piv_field_new (n, n);
    float *w = malloc ((size_t) n * n * sizeof *w);
    if (!f || !w) {
        free (w);
        piv_field_destroy (&f);
        return -1;
    }
    f->step = 8;
    f->window = 16;
    s_fill (f, w, n, 0);
    double add_ms[2][REPS], encode_ms[2][REPS];
    size_t size[2] = {0, 0};
    for (int on = 0; on < 2; on++) {
        piv_stats_t *st = piv_stats_new (f);
        if (!st || piv_stats_set_uncertainty (st, on) != 0) {
            piv_stats_destroy (&st);
            free (w);
            piv_field_destroy (&f);
            return -1;
        }
        for (int r = 0; r < REPS; r++) {
            double t = s_now ();
            for (int i = 0; i < FIELDS; i++) {
                f->u[i % (n * n)] += 0.001f; // not the same field twice
                piv_stats_add (st, f, w);
            }
            add_ms[on][r] = (s_now () - t) * 1e3 / FIELDS;
            unsigned char *buf = NULL;
            t = s_now ();
            if (piv_stats_encode (st, &buf, &size[on]) != 0)
                size[on] = 0;
            encode_ms[on][r] = (s_now () - t) * 1e3;
            free (buf);
        }
        qsort (add_ms[on], REPS, sizeof (double), s_cmp);
        qsort (encode_ms[on], REPS, sizeof (double), s_cmp);
        piv_stats_destroy (&st);
    }
    for (int on = 0; on < 2; on++)
        printf ("%4dx%-4d %-22s state %7.2f MB  count a field %6.3f ms (median %6.3f)  "
                "encode %7.2f ms (median %7.2f)\n",
                n, n, on ? "with the uncertainty" : "without (version 2)", size[on] / 1e6,
                add_ms[on][0], add_ms[on][REPS / 2], encode_ms[on][0], encode_ms[on][REPS / 2]);
    printf ("%4dx%-4d ratio with / without: state x%.2f, count x%.2f (best times)\n", n, n,
            (double) size[1] / (double) size[0], add_ms[1][0] / add_ms[0][0]);
    free (w);
    piv_field_destroy (&f);
    return 0;
}

// ---------------------------------------------------------------------------
// Section 2: the statistics' write cost during a run, and the store's growth

#define RIG_RATE 30   // pairs/s: the rig's 2 cameras x 15 pairs/s
#define RUN_S 60      // simulated seconds of a run (--seconds)

// What a run measured.
typedef struct {
    size_t state;          // the set's state, bytes
    size_t field;          // a result's field as the store keeps it, bytes
    int saves;             // checkpoints that saved the set
    double save_bytes_s;   // bytes the checkpoints and their commits wrote, per second
    double save_ms_s;      // ms they took, per second (the broker's one thread)
    double add_ms_s;       // ms counting the results took, per second
    double pair_bytes;     // the store's growth per pair (the statistics' rows left out)
    double wal_max;        // the largest the WAL grew, bytes
} s_run_t;

// Bytes this process has written (write(2) and its kin: the store's WAL
// and, at checkpoints, its database), from /proc/self/io; -1 if unknown.
static double
s_written (void)
{
    FILE *f = fopen ("/proc/self/io", "r");
    if (!f)
        return -1;
    char line[128];
    double bytes = -1;
    while (fgets (line, sizeof line, f))
        if (strncmp (line, "wchar:", 6) == 0)
            bytes = atof (line + 6);
    fclose (f);
    return bytes;
}

static double
s_file_size (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0 ? (double) st.st_size : 0;
}

// Writes one pair as the broker does (both files, the pair, its dispatch,
// its result with 'blob', the feedback event): its id, or -1.
static int64_t
s_pair (store_t *store, int64_t exp, int i, const unsigned char *blob, size_t size, int64_t now)
{
    char a[32], b[32], stem[32];
    int is_new, recorded;
    snprintf (stem, sizeof stem, "r%07d", i);
    snprintf (a, sizeof a, "r%07d_a.tif", i);
    snprintf (b, sizeof b, "r%07d_b.tif", i);
    int64_t fa = store_file_add (store, exp, a, 4194974, now, now, &is_new);
    int64_t fb = fa < 0 ? -1 : store_file_add (store, exp, b, 4194974, now, now, &is_new);
    int64_t pair = fb < 0 ? -1 : store_pair_add (store, exp, stem, fa, fb, now, &is_new);
    int attempt = pair < 0 ? -1 : store_pair_dispatch (store, pair, "node-a-1", now);
    store_result_t result = {.mean_u = 3.3, .mean_v = -1.7, .mean_speed = 3.71,
                             .valid_fraction = 1, .nx = 0, .ny = 0,
                             .compute_ns = 30000000, .path = "", .field = blob,
                             .field_size = size, .settings = "passes=64,32"};
    if (attempt < 0
        || store_pair_result (store, pair, attempt, "node-a-1", &result, now, &recorded) != 0)
        return -1;
    char json[256];
    snprintf (json, sizeof json,
              "{\"pair\":%" PRId64 ",\"mean_u\":3.30012345,\"mean_v\":-1.70012345,"
              "\"mean_speed\":3.71234567,\"vorticity\":0.000123456789,"
              "\"valid_fraction\":0.998123456}",
              pair);
    return store_event (store, "feedback", exp, pair, json, now) < 0 ? -1 : pair;
}

// 'seconds' of a run at RIG_RATE on an n x n grid in a new store in 'dir':
// each pair written and counted as the broker does, committed alone; every
// second the statistics' timer (stats_save_due) with its own commit,
// budget_kb_s as broker/stats_save_kb_s (0: every look). 0 or -1.
static int
s_run (const char *dir, int n, int budget_kb_s, int seconds, s_run_t *out)
{
    char db[512], wal[520], err[512];
    snprintf (db, sizeof db, "%s/run-%d-%d.db", dir, n, budget_kb_s);
    snprintf (wal, sizeof wal, "%s-wal", db);
    memset (out, 0, sizeof *out);
    config_t cfg;
    config_init (&cfg);
    cfg.broker.stats_save_kb_s = budget_kb_s;
    store_t *store = store_new (db, STORE_DURABILITY_FULL, err, sizeof err);
    if (!store) {
        fprintf (stderr, "bench_stats: %s\n", err);
        return -1;
    }
    int64_t now = util_time_ns ();
    exp_t exp = {.id = store_experiment (store, "run", now), .name = "run"};
    exp.piv.settings = "passes=64,32";
    zhashx_t *experiments = zhashx_new ();
    piv_field_t *f = piv_field_new (n, n);
    float *w = malloc ((size_t) n * n * sizeof *w);
    stats_host_t host = {.store = store, .experiments = experiments, .cfg = &cfg};
    stats_t *stats = experiments ? stats_new (&host, err, sizeof err) : NULL;
    unsigned char *blob = NULL;
    int rc = -1;
    if (exp.id < 0 || !stats || !f || !w || piv_field_add_sigma (f) != 0) {
        fprintf (stderr, "bench_stats: cannot set up a run in '%s': %s\n", db,
                 exp.id < 0 ? store_error (store) : "out of memory");
        goto done;
    }
    zhashx_insert (experiments, "run", &exp);
    f->step = 8;
    f->window = 16;
    s_fill (f, w, n, 0);
    piv_stats_t *probe = piv_stats_new (f);
    out->state = probe ? piv_stats_state_size (probe) : 0;
    piv_stats_destroy (&probe);
    double add_s = 0, save_s = 0, save_bytes = 0;
    int pairs = seconds * RIG_RATE;
    for (int i = 0; i < pairs; i++) {
        s_fill (f, w, n, i);
        for (int k = 0; k < n * n; k++)
            f->sigma_u[k] = f->sigma_v[k] = 0.05f + 0.01f * (float) sin (k + i);
        size_t size;
        free (blob);
        blob = NULL;
        if (piv_field_encode (f, &blob, &size) != 0)
            goto done;
        out->field = size;
        now += 1000000000 / RIG_RATE;
        int64_t pair = s_pair (store, exp.id, i, blob, size, now);
        if (pair < 0 || store_commit (store, err, sizeof err) != 0) {
            fprintf (stderr, "bench_stats: cannot write pair %d to '%s': %s\n", i, db,
                     pair < 0 ? store_error (store) : err);
            goto done;
        }
        double t = util_now ();
        stats_add (stats, &exp, pair, f, w);
        add_s += util_now () - t;
        if ((i + 1) % RIG_RATE == 0) {  // a second: broker/stats_ms's look
            double bytes = s_written ();
            t = util_now ();
            if (stats_save_due (stats, now) != 0 || store_commit (store, err, sizeof err) != 0) {
                fprintf (stderr, "bench_stats: cannot save the statistics in '%s'\n", db);
                goto done;
            }
            double spent = util_now () - t, wrote = s_written () - bytes;
            save_s += spent;
            save_bytes += wrote;
            out->saves += wrote > (double) out->state / 2;
            double wal_now = s_file_size (wal);
            if (wal_now > out->wal_max)
                out->wal_max = wal_now;
        }
    }
    out->save_bytes_s = save_bytes / seconds;
    out->save_ms_s = save_s * 1e3 / seconds;
    out->add_ms_s = add_s * 1e3 / seconds;
    rc = 0;
done:
    stats_destroy (&stats);
    zhashx_destroy (&experiments);
    store_destroy (&store);  // the last connection: the WAL checkpointed into the file
    free (blob);
    free (w);
    piv_field_destroy (&f);
    if (rc == 0)
        out->pair_bytes = (s_file_size (db) - (double) out->state) / (seconds * RIG_RATE);
    unlink (db);
    unlink (wal);
    return rc;
}
// Section 2 on one grid: a run saving at every look, one within the
// default budget; a line each, and the growth.
static int
s_cost (const char *dir, int n, int seconds)
{
    s_run_t run[2];
    config_t defaults;
    config_init (&defaults);
    int budget[2] = {0, defaults.broker.stats_save_kb_s};
    for (int b = 0; b < 2; b++) {
        if (s_run (dir, n, budget[b], seconds, &run[b]) != 0)
            return -1;
        printf ("%4dx%-4d %-26s %3d saves in %d s: %7.2f MB/s written, %6.1f ms/s of the "
                "broker (counting: %6.1f ms/s), WAL up to %6.1f MB\n",
                n, n, b ? "stats_save_kb_s = 1024:" : "every look (before):", run[b].saves,
                seconds, run[b].save_bytes_s / 1e6, run[b].save_ms_s, run[b].add_ms_s,
                run[b].wal_max / 1e6);
    }
    printf ("%4dx%-4d state %.2f MB, a result's field %.1f KB; the saves write x%.1f less, "
            "take x%.1f less time\n",
            n, n, run[0].state / 1e6, run[0].field / 1e3,
            run[0].save_bytes_s / run[1].save_bytes_s, run[0].save_ms_s / run[1].save_ms_s);
    printf ("%4dx%-4d store growth: %.1f KB a pair (%.1f with the saves at every look), "
            "%.1f GB an hour at %d pairs/s\n",
            n, n, run[1].pair_bytes / 1e3, run[0].pair_bytes / 1e3,
            run[1].pair_bytes * RIG_RATE * 3600 / 1e9, RIG_RATE);
    return 0;
}

int
main (int argc, char **argv)
{
    int section = 0, seconds = RUN_S;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--section") == 0 && i + 1 < argc)
            section = atoi (argv[++i]);
        else if (strcmp (argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atoi (argv[++i]);
        else {
            fprintf (stderr, "usage: bench_stats [--section 1|2] [--seconds S]\n");
            return 2;
        }
    }
    if (seconds < 1) {
        fprintf (stderr, "bench_stats: --seconds must be at least 1\n");
        return 2;
    }
    if (section == 0 || section == 1) {
        printf ("\n1. the run statistics' uncertainty: state and time (issue 27; %d fields a "
                "figure, best of %d)\n",
                FIELDS, REPS);
        printf ("grid points (image at step 8: 128^2 = 1024^2 px, 256^2 = 2048^2 px)\n");
        if (s_grid (128) != 0 || s_grid (256) != 0) {
            fprintf (stderr, "bench_stats: out of memory\n");
            return 1;
        }
    }
    if (section == 0 || section == 2) {
        char dir[] = "/tmp/bench_stats.XXXXXX";
        if (!mkdtemp (dir)) {
            fprintf (stderr, "bench_stats: cannot make a directory in /tmp: %s\n",
                     strerror (errno));
            return 1;
        }
        log_set_level (LOG_LEVEL_WARNING);
        printf ("\n2. the statistics' write cost during a run, and the store's growth (issue "
                "28; %d s at %d pairs/s, fields with sigma kept, durability full; bytes from "
                "/proc/self/io wchar, growth: the file after the last close, the statistics' "
                "row left out)\n",
                seconds, RIG_RATE);
        int rc = s_cost (dir, 128, seconds) != 0 || s_cost (dir, 256, seconds) != 0;
        rmdir (dir);
        if (rc)
            return 1;
    }
    return 0;
}
