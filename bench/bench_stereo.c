// bench_stereo.c — figures for stereo PIV (issue 26): what a stereo pair
// costs against a planar one (2048^2, the farm's default settings, one
// thread) and where its time goes, the cores the seed rig needs in stereo;
// the accuracy at +-35 deg against a fair planar reference (the planar
// engine on camera 1's own pair of the same render); and case E's real
// pair. Prints figures next to their goals; never fails on them. Exit
// status: 0 done, 1 something broke (synthesis, engine, files), 2 bad usage.

#include "common/log.h"
#include "common/util.h"
#include "common/version.h"
#include "piv/camera.h"
#include "piv/cameras.h"
#include "piv/piv.h"
#include "piv/points.h"
#include "piv/stereo.h"
#include "piv/synth_stereo.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ERRLEN 1024
#define REPS_DEFAULT 5
#define REPS_QUICK 3
#define MAX_REPS 100

#define COST_SIZE 2048          // the seed rig's 4 MP frames
#define ACC_SIZE 1024           // the accuracy goals' frames
#define SEED_RIG_HZ 15.0        // pairs per second of each camera
#define SEED_PAPER_CORES 150.0  // plain cross-correlation of the seed rig, 2011
#define GOAL_COST 2.5           // stereo pair / planar pair, single pass
#define GOAL_CORES 8.0          // the seed rig in stereo, single pass
#define GOAL_W 2.5              // w error / in-plane error (the geometry of +-35 deg)
#define GOAL_PLANE 1.3          // stereo in-plane error / the planar engine's

// The synthetic particle images of the goals: 2.5 px, 0.05 per px.
#define SYNTH_DIAMETER 2.5
#define SYNTH_DENSITY 0.05

static int
s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// The median of n values; sorts v.
static double
s_median (double *v, int n)
{
    qsort (v, (size_t) n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The engine's defaults (the farm's: overlap 50, 3 iterations, quintic
// B-spline, smoothing of the final pass) with these passes, one thread;
// 'one_run': a single run of the last window, the single pass of bench_piv
// and of its seed rig's cores (no iteration of the deformation).
static int
s_settings (const char *passes, int one_run, piv_settings_t *settings)
{
    char err[ERRLEN];
    piv_settings_init (settings);
    settings->threads = 1;
    if (one_run)
        settings->final_iterations = 1, settings->converge = 0;
    if (piv_settings_set_passes (settings, passes, err, sizeof err) != 0) {
        log_error ("bad passes '%s': %s", passes, err);
        return -1;
    }
    return 0;
}

// A rig of the geometry (+-35 deg) rendering size^2 frames.
static void
s_synth (piv_stereo_synth_t *synth, int size, int seed)
{
    piv_stereo_synth_init (synth);
    synth->image.width = size;
    synth->image.height = size;
    synth->image.diameter = SYNTH_DIAMETER;
    synth->image.density = SYNTH_DENSITY;
    synth->image.seed = (uint64_t) seed;
}

static void
s_frames_destroy (piv_image_t *frames[2][2])
{
    for (int c = 0; c < 2; c++)
        for (int f = 0; f < 2; f++)
            piv_image_destroy (&frames[c][f]);
}

// Renders both cameras' pairs of 'spec'. 0, or -1 (logged).
static int
s_render (const piv_stereo_synth_t *synth, const char *spec, piv_flow3_t *flow,
          piv_image_t *frames[2][2])
{
    char err[ERRLEN];
    memset (frames, 0, 4 * sizeof frames[0][0]);
    if (piv_flow3_parse (flow, spec, err, sizeof err) != 0
        || piv_stereo_synth_render (synth, flow, frames, err, sizeof err) != 0) {
        log_error ("cannot render the synthetic stereo pair '%s' of %dx%d: %s", spec,
                   synth->image.width, synth->image.height, err);
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------- cost

// Now, wall and this thread's CPU time (s): the CPU time is what a core
// spends on the pair, and hardly moves when other processes share the
// machine, which stretches the wall time.
typedef struct {
    double wall, cpu;
} s_clock_t;

static s_clock_t
s_clock (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
    return (s_clock_t) {util_now (), (double) ts.tv_sec + ts.tv_nsec * 1e-9};
}

// One setting's runs: the planar pair, the stereo pair, and the stereo
// pair's parts run alone (its dewarping of 4 frames, the engine on both
// dewarped pairs), in turns, so that a drift of the machine falls on all.
// Medians, [0] wall, [1] CPU, s; 'rest' is the median of each run's stereo
// time less its parts' (the solve, the fields' copies).
typedef struct {
    double planar[2], stereo[2], dewarp[2], engines[2], rest[2];
    double setup;             // piv_stereo_new, wall s
    int grid_w, grid_h;       // the stereo grid, px
    int vectors[2];           // planar, stereo
} s_cost_t;

enum { T_PLANAR, T_STEREO, T_DEWARP, T_ENGINES, T_REST, T_N };

static int
s_cost_run (const piv_cameras_t *rig, const char *passes, int one_run, piv_deform_t dewarp,
            piv_image_t *frames[2][2], int reps, s_cost_t *out)
{
    char err[ERRLEN] = "";
    piv_settings_t settings;
    piv_t *planar = NULL, *engine = NULL;
    piv_stereo_t *st = NULL;
    piv_image_t *dw[4] = {NULL, NULL, NULL, NULL};
    static double t[2][T_N][MAX_REPS];
    int rc = -1;
    if (s_settings (passes, one_run, &settings) != 0)
        return -1;
    double t0 = util_now ();
    if (!(st = piv_stereo_new (rig, &settings, COST_SIZE, COST_SIZE, NULL, err, sizeof err))
        || (dewarp != piv_stereo_dewarp_interp (st)
            && piv_stereo_set_dewarp (st, dewarp, err, sizeof err) != 0)) {
        log_error ("cannot make the stereo engine (passes %s, dewarp %s): %s", passes,
                   piv_deform_name (dewarp), err);
        goto done;
    }
    out->setup = util_now () - t0;
    const piv_stereo_grid_t *g = piv_stereo_grid (st);
    out->grid_w = g->width;
    out->grid_h = g->height;
    if (!(planar = piv_new (&settings, err, sizeof err))
        || !(engine = piv_new (&settings, err, sizeof err))) {
        log_error ("cannot make an engine (passes %s): %s", passes, err);
        goto done;
    }
    for (int f = 0; f < 4; f++)
        if (!(dw[f] = piv_image_new (g->width, g->height))) {
            log_error ("cannot allocate a dewarped frame of %dx%d: out of memory", g->width,
                       g->height);
            goto done;
        }
    // Round -1 warms every path up (plans, pages) and is not counted.
    for (int r = -1; r < reps; r++) {
        s_clock_t s[5];
        s[0] = s_clock ();
        piv_field_t *fp = piv_process (planar, frames[0][0], frames[0][1], err, sizeof err);
        s[1] = s_clock ();
        piv_field3_t *f3 = fp ? piv_stereo_process (st, frames[0][0], frames[0][1], frames[1][0],
                                                    frames[1][1], err, sizeof err)
                              : NULL;
        s[2] = s_clock ();
        int bad = !fp || !f3;
        for (int c = 0; c < 2 && !bad; c++)
            bad = piv_stereo_dewarp_pair (st, c, frames[c][0], frames[c][1], dw[2 * c],
                                          dw[2 * c + 1], err, sizeof err);
        s[3] = s_clock ();
        piv_field_t *fe[2] = {NULL, NULL};
        for (int c = 0; c < 2 && !bad; c++)
            bad = !(fe[c] = piv_process (engine, dw[2 * c], dw[2 * c + 1], err, sizeof err));
        s[4] = s_clock ();
        if (!bad) {
            out->vectors[0] = fp->nx * fp->ny;
            out->vectors[1] = f3->nx * f3->ny;
        }
        piv_field_destroy (&fp);
        piv_field3_destroy (&f3);
        piv_field_destroy (&fe[0]);
        piv_field_destroy (&fe[1]);
        if (bad) {
            log_error ("cannot process the 2048^2 pairs (passes %s): %s", passes, err);
            goto done;
        }
        for (int k = 0; k < 2 && r >= 0; k++) {
            for (int i = 0; i < 4; i++)
                t[k][i][r] = k ? s[i + 1].cpu - s[i].cpu : s[i + 1].wall - s[i].wall;
            t[k][T_REST][r] = t[k][T_STEREO][r] - t[k][T_DEWARP][r] - t[k][T_ENGINES][r];
        }
    }
    for (int k = 0; k < 2; k++) {
        out->planar[k] = s_median (t[k][T_PLANAR], reps);
        out->stereo[k] = s_median (t[k][T_STEREO], reps);
        out->dewarp[k] = s_median (t[k][T_DEWARP], reps);
        out->engines[k] = s_median (t[k][T_ENGINES], reps);
        out->rest[k] = s_median (t[k][T_REST], reps);
    }
    rc = 0;
done:
    for (int f = 0; f < 4; f++)
        piv_image_destroy (&dw[f]);
    piv_stereo_destroy (&st);
    piv_destroy (&planar);
    piv_destroy (&engine);
    return rc;
}

// Section 1. 0, or -1 (logged).
static int
s_section_cost (int reps)
{
    static const struct {
        const char *passes;
        int one_run;
        const char *label;
    } runs[] = {{"32", 1, "single pass 32 px"}, {"64,32,16", 0, "multipass 64,32,16"}};
    char err[ERRLEN] = "";
    piv_stereo_synth_t synth;
    piv_flow3_t flow;
    piv_image_t *frames[2][2];
    s_cost_t cost[2];
    s_synth (&synth, COST_SIZE, 1);
    printf ("\n1. Cost: a stereo pair (2 cameras' pairs of %dx%d) against a planar pair (camera\n"
            "   1's own pair of the same render), the farm's default settings, 1 thread, median\n"
            "   of %d runs in turns; synthetic +-35 deg, uniform:0.3,-0.2,0.1 mm per frame\n",
            COST_SIZE, COST_SIZE, reps);
    double t0 = util_now ();
    if (s_render (&synth, "uniform:0.3,-0.2,0.1", &flow, frames) != 0)
        return -1;
    double t1 = util_now ();
    piv_cameras_t *rig = piv_stereo_synth_rig (&synth, err, sizeof err);
    if (!rig) {
        log_error ("cannot fit the synthetic rig of %dx%d: %s", COST_SIZE, COST_SIZE, err);
        s_frames_destroy (frames);
        return -1;
    }
    printf ("  (rendering the 4 frames %.1f s, fitting the rig %.1f s: not counted)\n", t1 - t0,
            util_now () - t1);
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = s_cost_run (rig, runs[i].passes, runs[i].one_run, PIV_STEREO_DEWARP, frames, reps,
                         &cost[i]);
    // The dewarping's other interpolators (piv_stereo_set_dewarp), single pass.
    piv_deform_t levers[PIV_DEFORM_KINDS];
    int nlevers = 0;
    for (int d = PIV_DEFORM_BILINEAR; d < PIV_DEFORM_KINDS; d++)
        if (d != PIV_STEREO_DEWARP)
            levers[nlevers++] = (piv_deform_t) d;
    s_cost_t lever[PIV_DEFORM_KINDS];
    for (int i = 0; i < nlevers && rc == 0; i++)
        rc = s_cost_run (rig, "32", 1, levers[i], frames, reps, &lever[i]);
    piv_cameras_destroy (&rig);
    s_frames_destroy (frames);
    if (rc != 0)
        return -1;
    printf ("  stereo grid %dx%d px (%.2f of a frame's pixels); vectors: planar %d and %d,\n"
            "  stereo %d and %d\n",
            cost[0].grid_w, cost[0].grid_h,
            (double) cost[0].grid_w * cost[0].grid_h / ((double) COST_SIZE * COST_SIZE),
            cost[0].vectors[0], cost[1].vectors[0], cost[0].vectors[1], cost[1].vectors[1]);
    printf ("  %-34s %21s %21s\n", "", runs[0].label, runs[1].label);
    printf ("  %-34s %10s %10s %10s %10s\n", "median ms", "wall", "cpu", "wall", "cpu");
    static const char *rows[] = {"planar pair", "stereo pair", "  dewarping 4 frames",
                                 "  engine on 2 dewarped pairs", "  solve, the rest (difference)"};
    for (int i = 0; i < 5; i++) {
        const double *v[2][5] = {
            {cost[0].planar, cost[0].stereo, cost[0].dewarp, cost[0].engines, cost[0].rest},
            {cost[1].planar, cost[1].stereo, cost[1].dewarp, cost[1].engines, cost[1].rest}};
        printf ("  %-34s %10.1f %10.1f %10.1f %10.1f\n", rows[i], v[0][i][0] * 1e3,
                v[0][i][1] * 1e3, v[1][i][0] * 1e3, v[1][i][1] * 1e3);
    }
    printf ("  %-34s %10.1f %10s %10.1f %10s  (once per engine: projections, plans)\n",
            "stereo engine setup", cost[0].setup * 1e3, "", cost[1].setup * 1e3, "");
    printf ("  %-34s %9.2fx %9.2fx %9.2fx %9.2fx  goal <= %.1fx single pass\n", "stereo / planar",
            cost[0].stereo[0] / cost[0].planar[0], cost[0].stereo[1] / cost[0].planar[1],
            cost[1].stereo[0] / cost[1].planar[0], cost[1].stereo[1] / cost[1].planar[1],
            GOAL_COST);
    printf ("  %-34s %10.2f %10.2f %10.2f %10.2f  goal <= %.0f single pass\n",
            "cores for the seed rig in stereo", SEED_RIG_HZ * cost[0].stereo[0],
            SEED_RIG_HZ * cost[0].stereo[1], SEED_RIG_HZ * cost[1].stereo[0],
            SEED_RIG_HZ * cost[1].stereo[1], GOAL_CORES);
    printf ("  (%.0f stereo pairs/s x one stereo pair; the seed paper needed %.0f cores in 2011\n"
            "  for plain cross-correlation of the planar rig. The cpu columns are the thread's\n"
            "  own time, which other processes stretch much less than the wall time: the figures\n"
            "  to judge. Single pass: one run of 32 px windows, as bench_piv's)\n",
            SEED_RIG_HZ, SEED_PAPER_CORES);
    printf ("  the dewarping's interpolator (the first the default), single pass, cpu (accuracy:\n"
            "  section 2)\n");
    printf ("  %-34s %10s %10s %10s %10s\n", "", "dewarp ms", "stereo ms", "/ planar", "cores");
    for (int i = -1; i < nlevers; i++) {
        const s_cost_t *c = i < 0 ? &cost[0] : &lever[i];
        printf ("  %-34s %10.1f %10.1f %9.2fx %10.2f\n",
                piv_deform_name (i < 0 ? PIV_STEREO_DEWARP : levers[i]), c->dewarp[1] * 1e3,
                c->stereo[1] * 1e3, c->stereo[1] / c->planar[1], SEED_RIG_HZ * c->stereo[1]);
    }
    return 0;
}

// ------------------------------------------------------------ accuracy

// A stereo field's errors against the flow, over valid vectors at least a
// tenth of the field's smaller side inside its extent (as pivfarm-synth
// --score): sums of squares (mm^2) and the box scored (X, Y min, max).
typedef struct {
    long n;
    double sq[3];
    double box[4];
} s_err3_t;

static void
s_score3 (const piv_field3_t *f, const piv_flow3_t *flow, double sheet_z, s_err3_t *e)
{
    long n = (long) f->nx * f->ny;
    double box[4] = {INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (long k = 0; k < n; k++) {
        box[0] = fmin (box[0], f->x[k]), box[1] = fmax (box[1], f->x[k]);
        box[2] = fmin (box[2], f->y[k]), box[3] = fmax (box[3], f->y[k]);
    }
    double margin = fmin (box[1] - box[0], box[3] - box[2]) / 10;
    e->box[0] = box[0] + margin, e->box[1] = box[1] - margin;
    e->box[2] = box[2] + margin, e->box[3] = box[3] - margin;
    memset (e->sq, 0, sizeof e->sq);
    e->n = 0;
    for (long k = 0; k < n; k++) {
        if (f->flags[k] != PIV_FLAG_VALID || f->x[k] < e->box[0] || f->x[k] > e->box[1]
            || f->y[k] < e->box[2] || f->y[k] > e->box[3])
            continue;
        double t[3];
        piv_flow3_eval (flow, f->x[k], f->y[k], sheet_z, &t[0], &t[1], &t[2]);
        double m[3] = {f->u[k], f->v[k], f->w[k]};
        for (int c = 0; c < 3; c++)
            e->sq[c] += (m[c] - t[c]) * (m[c] - t[c]);
        e->n++;
    }
}

// The planar engine's field of camera 1's own pair against the true image
// displacement: the flow at each vector's point of the sheet projected
// through the true camera's derivatives. Valid vectors whose point lies in
// 'box' (the stereo field's scored area) count: their number in *n, the
// RMS of one component (col and row pooled, px) returned; -1 on error.
static double
s_score_planar (const piv_field_t *f, const piv_camera_t *cam, const piv_flow3_t *flow,
                double sheet_z, const double box[4], long *n)
{
    double e2 = 0;
    *n = 0;
    for (long k = 0; k < (long) f->nx * f->ny; k++) {
        double x, y, d[2][3], t[3];
        if (f->flags[k] != PIV_FLAG_VALID
            || piv_camera_unproject (cam, f->x[k], f->y[k], sheet_z, &x, &y) != 0
            || x < box[0] || x > box[1] || y < box[2] || y > box[3]
            || piv_camera_derivatives (cam, x, y, sheet_z, d) != 0)
            continue;
        piv_flow3_eval (flow, x, y, sheet_z, &t[0], &t[1], &t[2]);
        double pc = d[0][0] * t[0] + d[0][1] * t[1] + d[0][2] * t[2];
        double pr = d[1][0] * t[0] + d[1][1] * t[1] + d[1][2] * t[2];
        e2 += (f->u[k] - pc) * (f->u[k] - pc) + (f->v[k] - pr) * (f->v[k] - pr);
        (*n)++;
    }
    return *n ? sqrt (e2 / (2.0 * (double) *n)) : -1;
}

// One row of section 2: flow 'spec', seed 'seed'. The in-plane and planar
// errors (px) and the ratios into ratios[0] (w / in-plane) and ratios[1]
// (in-plane / planar). 0, or -1 (logged).
static int
s_accuracy_row (piv_stereo_t *st, piv_t *planar, const piv_camera_t *cam1, double ppm,
                const char *spec, int seed, double ratios[2])
{
    char err[ERRLEN] = "";
    piv_stereo_synth_t synth;
    piv_flow3_t flow;
    piv_image_t *frames[2][2];
    piv_field3_t *f3 = NULL;
    piv_field_t *fp = NULL;
    int rc = -1;
    s_synth (&synth, ACC_SIZE, seed);
    if (s_render (&synth, spec, &flow, frames) != 0)
        return -1;
    if (!(f3 = piv_stereo_process (st, frames[0][0], frames[0][1], frames[1][0], frames[1][1], err,
                                   sizeof err))
        || !(fp = piv_process (planar, frames[0][0], frames[0][1], err, sizeof err))) {
        log_error ("cannot process '%s' seed %d: %s", spec, seed, err);
        goto done;
    }
    s_err3_t e;
    long np;
    s_score3 (f3, &flow, synth.sheet_z, &e);
    double ref = s_score_planar (fp, cam1, &flow, synth.sheet_z, e.box, &np);
    if (e.n == 0 || ref <= 0) {
        log_error ("cannot score '%s' seed %d: %ld stereo and %ld planar vectors valid inside",
                   spec, seed, e.n, np);
        goto done;
    }
    double rms[3];
    for (int c = 0; c < 3; c++)
        rms[c] = sqrt (e.sq[c] / (double) e.n);
    double plane = sqrt ((e.sq[0] + e.sq[1]) / (2.0 * (double) e.n));
    ratios[0] = rms[2] / plane;
    ratios[1] = plane * ppm / ref;
    printf ("  %-22s %4d %5ld %7.4f %7.4f %7.4f %8.4f %6.2f %5ld %8.4f %6.2f\n", spec, seed, e.n,
            rms[0], rms[1], rms[2], plane * ppm, ratios[0], np, ref, ratios[1]);
    rc = 0;
done:
    piv_field3_destroy (&f3);
    piv_field_destroy (&fp);
    s_frames_destroy (frames);
    return rc;
}

// What the dewarping's interpolator costs in accuracy (section 1 has its
// time): piv_stereo_set_dewarp's each, a single run of 32 px windows (no
// deformation, so the dewarping's error shows alone); seed 1, the planar
// reference with the same single run. 0, or -1 (logged).
static int
s_accuracy_levers (const piv_cameras_t *rig, const piv_camera_t *cam1, double ppm)
{
    static const piv_deform_t kinds[] = {PIV_DEFORM_BSPLINE5, PIV_DEFORM_BSPLINE,
                                         PIV_DEFORM_OMOMS, PIV_DEFORM_BICUBIC,
                                         PIV_DEFORM_BILINEAR};
    static const char *flows[] = {"uniform:0.3,-0.2,0.1", "vortex:0.5,20,0.2"};
    printf ("  the dewarping's interpolator, a single run of 32 px (no deformation: the planar\n"
            "  reference alike), seed 1:\n");
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char err[ERRLEN] = "";
        piv_settings_t settings;
        if (s_settings ("32", 1, &settings) != 0)
            return -1;
        piv_stereo_t *st =
            piv_stereo_new (rig, &settings, ACC_SIZE, ACC_SIZE, NULL, err, sizeof err);
        if (st && piv_stereo_set_dewarp (st, kinds[i], err, sizeof err) != 0)
            piv_stereo_destroy (&st);
        piv_t *planar = st ? piv_new (&settings, err, sizeof err) : NULL;
        int rc = st && planar ? 0 : -1;
        if (rc != 0)
            log_error ("cannot make the engines of deform %s: %s", piv_deform_name (kinds[i]), err);
        else
            printf ("  dewarp %s%s\n", piv_deform_name (kinds[i]),
                    kinds[i] == PIV_STEREO_DEWARP ? " (the default)" : "");
        for (size_t f = 0; f < sizeof flows / sizeof flows[0] && rc == 0; f++) {
            double ratios[2];
            rc = s_accuracy_row (st, planar, cam1, ppm, flows[f], 1, ratios);
        }
        piv_destroy (&planar);
        piv_stereo_destroy (&st);
        if (rc != 0)
            return -1;
    }
    return 0;
}

// Section 2. 0, or -1 (logged).
static int
s_section_accuracy (int seeds)
{
    static const char *flows[] = {"uniform:0.3,-0.2,0", "uniform:0.3,-0.2,0.1",
                                  "vortex:0.5,20,0.2"};
    char err[ERRLEN] = "";
    piv_stereo_synth_t synth;
    piv_settings_t settings;
    piv_cameras_t *rig = NULL;
    piv_camera_t *cam1 = NULL;
    piv_stereo_t *st = NULL;
    piv_t *planar = NULL;
    double d[2][3];
    int rc = -1;
    printf ("\n2. Accuracy: synthetic +-35 deg, %dx%d, dp %.1f px, %.2f particles/px, seeds 1-%d,\n"
            "   the engine's defaults (passes 32, as pivfarm-piv's); valid vectors a tenth of the\n"
            "   field's smaller side inside it. Stereo: u v w and in-plane (u, v pooled) RMS, mm\n"
            "   per frame, in-plane also in px-equivalent (camera 1's px per mm along Y at the\n"
            "   origin). Planar: the engine on camera 1's own pair against the true image\n"
            "   displacement (the 3-D flow through camera 1's derivatives), one component's RMS\n"
            "   (col, row pooled), px, over the same area of the sheet\n",
            ACC_SIZE, ACC_SIZE, SYNTH_DIAMETER, SYNTH_DENSITY, seeds);
    s_synth (&synth, ACC_SIZE, 1);
    if (s_settings ("32", 0, &settings) != 0)
        return -1;
    // The rig is fitted to exact target points: one for every seed.
    if (!(rig = piv_stereo_synth_rig (&synth, err, sizeof err))
        || !(cam1 = piv_synth_camera_new (&synth, 1, err, sizeof err))
        || !(st = piv_stereo_new (rig, &settings, ACC_SIZE, ACC_SIZE, NULL, err, sizeof err))
        || !(planar = piv_new (&settings, err, sizeof err))
        || piv_camera_derivatives (cam1, 0, 0, synth.sheet_z, d) != 0) {
        log_error ("cannot set the accuracy runs up: %s", err);
        goto done;
    }
    double ppm = fabs (d[1][1]);
    printf ("  %.3f px/mm; goals: w/in-plane <= %.1f, in-plane/planar <= %.1f\n", ppm, GOAL_W,
            GOAL_PLANE);
    printf ("  %-22s %4s %5s %7s %7s %7s %8s %6s %5s %8s %6s\n", "flow (mm per frame)", "seed",
            "n", "u", "v", "w", "plane px", "w/pl", "n", "planar", "pl/pla");
    for (size_t i = 0; i < sizeof flows / sizeof flows[0]; i++) {
        double worst[2] = {0, 0};
        for (int seed = 1; seed <= seeds; seed++) {
            double ratios[2];
            if (s_accuracy_row (st, planar, cam1, ppm, flows[i], seed, ratios) != 0)
                goto done;
            worst[0] = fmax (worst[0], ratios[0]);
            worst[1] = fmax (worst[1], ratios[1]);
        }
        printf ("  %-22s worst w/in-plane %.2f (goal <= %.1f: %s), in-plane/planar %.2f (goal "
                "<= %.1f: %s)\n",
                "", worst[0], GOAL_W, worst[0] <= GOAL_W ? "met" : "NOT met", worst[1], GOAL_PLANE,
                worst[1] <= GOAL_PLANE ? "met" : "NOT met");
    }
    rc = s_accuracy_levers (rig, cam1, ppm);
done:
    piv_destroy (&planar);
    piv_stereo_destroy (&st);
    piv_camera_destroy (&cam1);
    piv_cameras_destroy (&rig);
    return rc;
}

// -------------------------------------------------------------- case E

// The directory of the test data: $PIVFARM_DATA, else tests/data.
static const char *
s_data_dir (void)
{
    const char *env = getenv ("PIVFARM_DATA");
    return env && *env ? env : "tests/data";
}

// Camera 'id' (1 or 3) of case E fitted to its 7 planes of given points
// (the model the evidence chooses), added to rig. 0, or -1 (logged).
static int
s_casee_camera (piv_cameras_t *rig, int id)
{
    char err[ERRLEN] = "", path[4096];
    piv_points_t pts;
    piv_points_init (&pts);
    for (int k = 0; k < 7; k++) {
        snprintf (path, sizeof path, "%s/stereo/caseE/Camera_0%d/img_%d.xml", s_data_dir (), id,
                  k);
        if (piv_points_read (&pts, path, err, sizeof err) != 0) {
            log_error ("cannot read case E's points: %s", err);
            piv_points_release (&pts);
            return -1;
        }
    }
    piv_camera_t *cam = piv_camera_choose (pts.p, pts.n, NULL, err, sizeof err);
    piv_points_release (&pts);
    if (cam)
        piv_camera_set_id (cam, id);
    if (!cam || piv_cameras_add (rig, &cam, err, sizeof err) != 0) {
        log_error ("cannot fit case E's camera %d: %s", id, err);
        return -1;
    }
    return 0;
}

// Section 3. 0, or -1 (logged).
static int
s_section_casee (int reps)
{
    char err[ERRLEN] = "", path[4096];
    piv_settings_t settings;
    piv_cameras_t *rig = piv_cameras_new ();
    piv_image_t *fr[4] = {NULL, NULL, NULL, NULL};
    piv_stereo_t *st = NULL;
    piv_field3_t *f = NULL;
    double t[MAX_REPS], *res = NULL;
    int rc = -1;
    printf ("\n3. Case E of the 4th PIV Challenge (%s/stereo/caseE: the given points, Soloff\n"
            "   or pinhole by evidence; the particle pair of cameras 1 and 3, 1024^2 16 bit), the\n"
            "   engine's defaults (passes 32), 1 thread, the default grid; median of %d runs\n",
            s_data_dir (), reps);
    if (!rig || s_settings ("32", 0, &settings) != 0 || s_casee_camera (rig, 1) != 0
        || s_casee_camera (rig, 3) != 0)
        goto done;
    for (int i = 0; i < 4; i++) {
        snprintf (path, sizeof path, "%s/stereo/caseE/particles/Camera_0%d/im0000%d.tif",
                  s_data_dir (), i < 2 ? 1 : 3, i % 2 + 1);
        if (!(fr[i] = piv_image_load (path, 0, 0, err, sizeof err))) {
            log_error ("cannot load case E's particle image: %s", err);
            goto done;
        }
    }
    double t0 = util_now ();
    if (!(st = piv_stereo_new (rig, &settings, piv_image_width (fr[0]), piv_image_height (fr[0]),
                               NULL, err, sizeof err))) {
        log_error ("cannot make case E's stereo engine: %s", err);
        goto done;
    }
    double setup = util_now () - t0;
    for (int r = -1; r < reps; r++) {
        piv_field3_destroy (&f);
        double s0 = util_now ();
        if (!(f = piv_stereo_process (st, fr[0], fr[1], fr[2], fr[3], err, sizeof err))) {
            log_error ("cannot process case E's pair: %s", err);
            goto done;
        }
        if (r >= 0)
            t[r] = util_now () - s0;
    }
    long n = (long) f->nx * f->ny, count[3] = {0, 0, 0};
    int used = 0;
    if (!(res = malloc ((size_t) n * sizeof *res))) {
        log_error ("cannot score case E's field: out of memory");
        goto done;
    }
    for (long k = 0; k < n; k++) {
        count[f->flags[k] <= 2 ? f->flags[k] : 2]++;
        if (f->flags[k] == PIV_FLAG_VALID)
            res[used++] = f->residual[k];
    }
    const piv_stereo_grid_t *g = piv_stereo_grid (st);
    printf ("  grid X %.2f..%.2f Y %.2f..%.2f mm, %.4f mm/px, %dx%d px; %dx%d vectors\n", g->x0,
            g->x0 + (g->width - 1) * g->step, g->y0 - (g->height - 1) * g->step, g->y0, g->step,
            g->width, g->height, f->nx, f->ny);
    printf ("  %-36s %9.1f %%  (%ld of %ld; replaced %ld, invalid %ld)\n", "valid",
            100.0 * count[0] / n, count[0], n, count[1], count[2]);
    printf ("  %-36s %9.4f px  (valid vectors; the bound is %.1f px)\n", "residual median",
            used ? s_median (res, used) : NAN, PIV_STEREO_MAX_RESIDUAL);
    printf ("  %-36s %9.1f ms  (engine setup %.1f ms, once)\n", "time per stereo pair",
            s_median (t, reps) * 1e3, setup * 1e3);
    rc = 0;
done:
    piv_cameras_destroy (&rig);
    for (int i = 0; i < 4; i++)
        piv_image_destroy (&fr[i]);
    piv_stereo_destroy (&st);
    piv_field3_destroy (&f);
    free (res);
    return rc;
}

// ---------------------------------------------------------------- main

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: bench_stereo [--quick] [--reps N] [--only cost|accuracy|casee]\n"
             "Prints stereo PIV's figures beside issue 26's goals: cost against a planar pair\n"
             "(2048^2), accuracy at +-35 deg (1024^2), case E (from $PIVFARM_DATA, default\n"
             "tests/data). Never fails on a figure.\n"
             "  --quick    %d runs per time and seed 1 only (default %d runs, seeds 1-3)\n"
             "  --reps N   runs per time (1 to %d)\n"
             "  --only S   one section\n",
             REPS_QUICK, REPS_DEFAULT, MAX_REPS);
}

// -1 to go on, else the exit code.
static int
s_parse_args (int argc, char *argv[], int *reps, int *seeds, const char **only)
{
    static const struct option longs[] = {{"quick", no_argument, NULL, 'q'},
                                          {"reps", required_argument, NULL, 'r'},
                                          {"only", required_argument, NULL, 'o'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    int opt, quick = 0, n = 0;
    char tail;
    while ((opt = getopt_long (argc, argv, "h", longs, NULL)) != -1) {
        if (opt == 'q')
            quick = 1;
        else if (opt == 'r' && sscanf (optarg, "%d%c", &n, &tail) == 1 && n >= 1 && n <= MAX_REPS)
            *reps = n;
        else if (opt == 'o'
                 && (!strcmp (optarg, "cost") || !strcmp (optarg, "accuracy")
                     || !strcmp (optarg, "casee")))
            *only = optarg;
        else if (opt == 'h') {
            s_usage (stdout);
            return 0;
        }
        else {
            if (opt == 'r' || opt == 'o')
                log_error ("bad --%s '%s'", opt == 'r' ? "reps" : "only", optarg);
            s_usage (stderr);
            return 2;
        }
    }
    if (optind < argc) {
        log_error ("bad argument '%s'", argv[optind]);
        s_usage (stderr);
        return 2;
    }
    if (quick) {
        *reps = n ? n : REPS_QUICK;
        *seeds = 1;
    }
    return -1;
}

int
main (int argc, char *argv[])
{
    log_open ("bench_stereo", 0);
    int reps = REPS_DEFAULT, seeds = 3;
    const char *only = NULL;
    int code = s_parse_args (argc, argv, &reps, &seeds, &only);
    if (code >= 0)
        return code;
    printf ("bench_stereo %s: stereo PIV (issue 26); the machine's speed swings: compare only\n"
            "figures of one run\n",
            PIVFARM_VERSION);
    const char *wisdom = piv_wisdom_default_path ();
    printf ("FFTW wisdom '%s': %s\n", wisdom,
            piv_wisdom_load (wisdom) == 0 ? "loaded" : "none yet (plans measured now)");
    int bad = 0;
    if (!only || strcmp (only, "cost") == 0)
        bad |= s_section_cost (reps) != 0;
    if (!only || strcmp (only, "accuracy") == 0)
        bad |= s_section_accuracy (seeds) != 0;
    if (!only || strcmp (only, "casee") == 0)
        bad |= s_section_casee (reps) != 0;
    // Plans made now serve the next run (as bench_piv's).
    if (piv_wisdom_save_new (wisdom) < 0)
        log_warning ("cannot save the FFTW wisdom to '%s'", wisdom);
    fflush (stdout);
    return bad ? 1 : 0;
}
