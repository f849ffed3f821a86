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

// Field i of a run on the n x n grid of 'f' (s_fill, with sigma), encoded
// into *blob_p (malloc'd, caller frees; freed first). 0 or -1.
static int
s_field_blob (piv_field_t *f, float *w, int n, int i, unsigned char **blob_p, size_t *size_p)
{
    s_fill (f, w, n, i);
    for (int k = 0; k < n * n; k++)
        f->sigma_u[k] = f->sigma_v[k] = 0.05f + 0.01f * (float) sin (k + i);
    free (*blob_p);
    *blob_p = NULL;
    return piv_field_encode (f, blob_p, size_p);
}

// A store, an experiment in it and the broker's statistics stage over
// them, with a field of n x n points (with sigma) to send.
typedef struct {
    char db[512];            // the store's file
    config_t cfg;            // the broker's configuration (defaults)
    store_t *store;
    exp_t exp;               // the experiment "run"
    zhashx_t *experiments;   // "run" -> exp
    stats_t *stats;
    piv_field_t *field;      // the field sent, refilled each pair
    float *vorticity;
    unsigned char *blob;     // its encoding
    size_t size;
} s_bench_t;

// Opens 'name' in 'dir' (a new store) with budget_kb_s as
// broker/stats_save_kb_s (-1: its default); the stage made unless 'later'.
// 0 or -1 (said).
static int
s_open (s_bench_t *b, const char *dir, const char *name, int n, int budget_kb_s, int later)
{
    char err[512];
    memset (b, 0, sizeof *b);
    snprintf (b->db, sizeof b->db, "%s/%s.db", dir, name);
    config_init (&b->cfg);
    if (budget_kb_s >= 0)
        b->cfg.broker.stats_save_kb_s = budget_kb_s;
    if (!(b->store = store_new (b->db, STORE_DURABILITY_FULL, err, sizeof err))) {
        fprintf (stderr, "bench_stats: %s\n", err);
        return -1;
    }
    b->exp = (exp_t) {.id = store_experiment (b->store, "run", util_time_ns ()), .name = "run"};
    b->exp.piv.settings = "passes=64,32";
    b->experiments = zhashx_new ();
    b->field = piv_field_new (n, n);
    b->vorticity = malloc ((size_t) n * n * sizeof *b->vorticity);
    stats_host_t host = {.store = b->store, .experiments = b->experiments, .cfg = &b->cfg};
    if (b->exp.id < 0 || !b->experiments || !b->field || !b->vorticity
        || piv_field_add_sigma (b->field) != 0
        || (!later && !(b->stats = stats_new (&host, err, sizeof err)))) {
        fprintf (stderr, "bench_stats: cannot set up a run in '%s': %s\n", b->db,
                 b->exp.id < 0 ? store_error (b->store) : "out of memory");
        return -1;
    }
    zhashx_insert (b->experiments, "run", &b->exp);
    b->field->step = 8;
    b->field->window = 16;
    return 0;
}

// Writes pair i of the run (field i, s_field_blob) as the broker does,
// committed: its id, or -1 (said).
static int64_t
s_write (s_bench_t *b, int i, int64_t now)
{
    char err[512];
    int64_t pair = -1;
    if (s_field_blob (b->field, b->vorticity, b->field->nx, i, &b->blob, &b->size) == 0)
        pair = s_pair (b->store, b->exp.id, i, b->blob, b->size, now);
    if (pair < 0 || store_commit (b->store, err, sizeof err) != 0) {
        fprintf (stderr, "bench_stats: cannot write pair %d to '%s': %s\n", i, b->db,
                 pair < 0 ? store_error (b->store) : err);
        return -1;
    }
    return pair;
}

// Closes what s_open made (the store last: its WAL checkpointed into the
// file); the file's size, bytes, before it is removed.
static double
s_close (s_bench_t *b)
{
    char wal[528];
    stats_destroy (&b->stats);
    zhashx_destroy (&b->experiments);
    store_destroy (&b->store);
    free (b->blob);
    free (b->vorticity);
    piv_field_destroy (&b->field);
    double size = s_file_size (b->db);
    unlink (b->db);
    const char *beside[] = {"-wal", "-shm", ".lock"};  // SQLite's files, the store's lock
    for (int i = 0; i < 3; i++) {
        snprintf (wal, sizeof wal, "%s%s", b->db, beside[i]);
        unlink (wal);
    }
    return size;
}

// 'seconds' of a run at RIG_RATE on an n x n grid in a new store in 'dir':
// each pair written and counted as the broker does, committed alone; every
// second the statistics' timer (stats_save_due) with its own commit,
// budget_kb_s as broker/stats_save_kb_s (0: every look). 0 or -1.
static int
s_run (const char *dir, int n, int budget_kb_s, int seconds, s_run_t *out)
{
    char name[64], wal[600], err[512];
    snprintf (name, sizeof name, "run-%d-%d", n, budget_kb_s);
    memset (out, 0, sizeof *out);
    s_bench_t b;
    int rc = -1, pairs = seconds * RIG_RATE;
    if (s_open (&b, dir, name, n, budget_kb_s, 0) != 0)
        goto done;
    snprintf (wal, sizeof wal, "%s-wal", b.db);
    s_fill (b.field, b.vorticity, n, 0);
    piv_stats_t *probe = piv_stats_new (b.field);
    out->state = probe ? piv_stats_state_size (probe) : 0;
    piv_stats_destroy (&probe);
    double add_s = 0, save_s = 0, save_bytes = 0;
    int64_t now = util_time_ns ();
    for (int i = 0; i < pairs; i++) {
        now += 1000000000 / RIG_RATE;
        int64_t pair = s_write (&b, i, now);
        if (pair < 0)
            goto done;
        out->field = b.size;
        double t = util_now ();
        stats_add (b.stats, &b.exp, pair, b.field, b.vorticity);
        add_s += util_now () - t;
        if ((i + 1) % RIG_RATE == 0) {  // a second: broker/stats_ms's look
            double bytes = s_written ();
            t = util_now ();
            if (stats_save_due (b.stats, now) != 0
                || store_commit (b.store, err, sizeof err) != 0) {
                fprintf (stderr, "bench_stats: cannot save the statistics in '%s'\n", b.db);
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
done:;
    double size = s_close (&b);
    out->pair_bytes = (size - (double) out->state) / pairs;
    return rc;
}

// A restart with 'count' results of an n x n grid not saved in the
// statistics (as after a SIGKILL with broker/stats_save_results of them
// waiting): the broker's time to count them again (stats_rebuild_step and
// its commits, as the reactor runs them every REBUILD_MS), the longest
// slice and how many. 0 or -1.
static int
s_restart (const char *dir, int n, int count)
{
    char name[64], err[512];
    snprintf (name, sizeof name, "restart-%d", n);
    s_bench_t b;
    int rc = -1;
    if (s_open (&b, dir, name, n, -1, 1) != 0)
        goto done;
    int64_t now = util_time_ns ();
    for (int i = 0; i < count; i++)
        if (s_write (&b, i, now += 1000000000 / RIG_RATE) < 0)
            goto done;
    stats_host_t host = {.store = b.store, .experiments = b.experiments, .cfg = &b.cfg};
    if (!(b.stats = stats_new (&host, err, sizeof err)) || stats_load (b.stats) != 0) {
        fprintf (stderr, "bench_stats: cannot load the statistics of '%s'\n", b.db);
        goto done;
    }
    double spent = 0, committing = 0, longest = 0;
    int slices = 0, more = 1;
    while (more > 0) {
        double t = util_now ();
        more = stats_rebuild_step (b.stats);
        double c = util_now ();
        if (more < 0 || store_commit (b.store, err, sizeof err) != 0) {
            fprintf (stderr, "bench_stats: the rebuild in '%s' failed: %s\n", b.db,
                     store_error (b.store));
            goto done;
        }
        double end = util_now ();
        spent += c - t;
        committing += end - c;
        longest = end - t > longest ? end - t : longest;
        slices++;
    }
    printf ("%4dx%-4d a restart counts %d results again: %.2f s of the broker (%.2f ms each; "
            "commits %.2f s more) in %d slices of at most %.0f ms, done in %.1f s with the "
            "slices 10 ms apart\n",
            n, n, count, spent, spent * 1e3 / count, committing, slices, longest * 1e3,
            spent + committing + slices * 0.010);
    rc = 0;
done:
    s_close (&b);
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
            fprintf (stderr, "usage: bench_stats [--section 1|2|3] [--seconds S]\n");
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
    if (section == 0 || section >= 2) {
        char dir[] = "/tmp/bench_stats.XXXXXX";
        if (!mkdtemp (dir)) {
            fprintf (stderr, "bench_stats: cannot make a directory in /tmp: %s\n",
                     strerror (errno));
            return 1;
        }
        log_set_level (LOG_LEVEL_WARNING);
        int rc = 0;
        if (section != 3) {
            printf ("\n2. the statistics' write cost during a run, and the store's growth "
                    "(issue 28; %d s at %d pairs/s, fields with sigma kept, durability full; "
                    "bytes from /proc/self/io wchar, growth: the file after the last close, the "
                    "statistics' row left out)\n",
                    seconds, RIG_RATE);
            rc = s_cost (dir, 128, seconds) != 0 || s_cost (dir, 256, seconds) != 0;
        }
        if (!rc && section != 2) {
            config_t defaults;
            config_init (&defaults);
            printf ("\n3. a restart after a SIGKILL: the results not saved counted again from "
                    "the store (issue 28; broker/stats_save_results = %d of them)\n",
                    defaults.broker.stats_save_results);
            rc = s_restart (dir, 128, defaults.broker.stats_save_results) != 0
                 || s_restart (dir, 256, defaults.broker.stats_save_results) != 0;
        }
        rmdir (dir);
        if (rc)
            return 1;
    }
    return 0;
}
