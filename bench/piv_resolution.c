// piv_resolution.c — section 10 of bench_piv: resolution and robustness on
// synthetic flows of known truth (issue 24). Every figure twice: with the
// settings given (the engine's defaults, passes 64,32,16, --settings over
// them) and with the same and smooth=off, so that what the correlation
// resolves and what the smoother takes away are seen apart. Each pair is
// 1024^2 with its own fixed seed; vectors within RES_MARGIN of the border
// are not scored (the first pass's window reaches out of the frame there).

#include "bench/piv_resolution.h"
#include "common/log.h"
#include "piv/derived.h"
#include "piv/field.h"
#include "piv/flow.h"
#include "piv/piv.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RES_SIZE 1024       // px, every pair of the section
#define RES_PASSES "64,32,16"
#define RES_MARGIN 64.0     // px
#define RES_SEED 2400       // + the case's number
#define VARIANTS 2          // the settings given, and the same with smooth=off
#define ERRLEN 512

// The goals.
#define GOAL_MTF_32 0.6     // modulation at a wavelength of 32 px, at least
#define GOAL_MTF_48 0.95    // ... of 48 px
#define GOAL_VORT_8 0.3     // peak vorticity of a core of 8 px, at least
#define GOAL_VORT_12 0.7    // ... of 12 px
#define GOAL_REPLACED 0.01  // share replaced on sines of 64 px and longer, at most
#define GROSS_PX 1.0        // an error vector longer than this is a gross error

// Peak locking: a solid rotation of LOCK_OMEGA rad/frame moves u by
// LOCK_STEP_U px from one row of vectors to the next (the final window of
// 16 px at 50 %: 8 px apart) and v likewise by column, so that the 100
// rows and columns from LOCK_FIRST take u and v to 100 distinct fractions,
// 0.005 to 0.995 px by 0.01 (3 is prime to 100): a flat histogram of the
// truth.
#define LOCK_STEP_U 0.03
#define LOCK_OMEGA (LOCK_STEP_U / 8.0)
#define LOCK_FIRST 10
#define LOCK_COUNT 100

// The peak-locking runs: each variant with each sub-pixel estimator, and B
// with the 3-point fit and the frames prefiltered (sigma LOCK_PREFILTER px).
#define LOCK_PREFILTER 0.7
#define LOCK_RUNS 5
static const struct {
    int variant;              // 0: A, 1: B
    piv_subpixel_t subpixel;  // the estimator
    double prefilter;         // px, or 0
} s_lock_runs[LOCK_RUNS] = {{0, PIV_SUBPIXEL_GAUSS3, 0},
                            {0, PIV_SUBPIXEL_GAUSS2D, 0},
                            {1, PIV_SUBPIXEL_GAUSS3, 0},
                            {1, PIV_SUBPIXEL_GAUSS2D, 0},
                            {1, PIV_SUBPIXEL_GAUSS3, LOCK_PREFILTER}};

typedef struct {
    double density;   // particles per px
    double diameter;  // px
    double noise;     // fraction of full scale
} s_particles_t;

// The bench's particle images (bench_piv's s_synth).
static const s_particles_t s_bench_particles = {0.02, 2.6, 0.02};

typedef struct {
    piv_settings_t settings[VARIANTS];
    char text[VARIANTS][600];  // the settings as a TASK carries them
    piv_t *engine[VARIANTS];
    piv_t *lock[LOCK_RUNS];    // the peak-locking runs (s_lock_runs)
    int seed;                  // the next pair's seed
} s_res_t;

// Parses 'spec' for a RES_SIZE^2 frame. 0, or -1 (logged).
static int
s_flow (const char *spec, piv_flow_t *flow)
{
    char err[ERRLEN];
    if (piv_flow_parse (flow, spec, RES_SIZE, RES_SIZE, err, sizeof err) != 0) {
        log_error ("%s", err);
        return -1;
    }
    return 0;
}

static void
s_fields_destroy (piv_field_t **fields, int count)
{
    for (int v = 0; v < count; v++)
        piv_field_destroy (&fields[v]);
}

// The fields of 'count' engines on a pair of 'flow' with particle images
// 'p' (8 bit, the section's next seed) in fields[]. 0, or -1 (logged; no
// field left).
static int
s_fields_of (s_res_t *res, piv_t *const *engines, int count, const piv_flow_t *flow,
             const s_particles_t *p, piv_field_t **fields)
{
    char err[ERRLEN];
    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = synth.height = RES_SIZE;
    synth.density = p->density;
    synth.diameter = p->diameter;
    synth.noise = p->noise;
    synth.bits = 8;
    synth.seed = (uint64_t) res->seed++;
    piv_image_t *a = NULL, *b = NULL;
    memset (fields, 0, count * sizeof fields[0]);
    if (piv_synth_pair (&synth, flow, &a, &b, err, sizeof err) != 0) {
        log_error ("cannot make a synthetic pair of %dx%d, seed %d: %s", RES_SIZE, RES_SIZE,
                   res->seed - 1, err);
        return -1;
    }
    int rc = 0;
    for (int v = 0; v < count && rc == 0; v++)
        if (!(fields[v] = piv_process (engines[v], a, b, err, sizeof err))) {
            log_error ("cannot process the synthetic pair of %dx%d, seed %d: %s", RES_SIZE,
                       RES_SIZE, res->seed - 1, err);
            rc = -1;
        }
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    if (rc != 0)
        s_fields_destroy (fields, count);
    return rc;
}

// The fields of both engines (the settings given, and smooth=off).
static int
s_fields (s_res_t *res, const piv_flow_t *flow, const s_particles_t *p,
          piv_field_t *fields[VARIANTS])
{
    return s_fields_of (res, res->engine, VARIANTS, flow, p, fields);
}

static int
s_inside (const piv_field_t *f, long k)
{
    return f->x[k] + 0.5 >= RES_MARGIN && RES_SIZE - 0.5 - f->x[k] >= RES_MARGIN
           && f->y[k] + 0.5 >= RES_MARGIN && RES_SIZE - 0.5 - f->y[k] >= RES_MARGIN;
}

// Shares of all vectors flagged replaced and invalid.
static void
s_flag_shares (const piv_field_t *f, double *replaced, double *invalid)
{
    long n = (long) f->nx * f->ny, r = 0, i = 0;
    for (long k = 0; k < n; k++) {
        r += f->flags[k] == PIV_FLAG_REPLACED;
        i += f->flags[k] == PIV_FLAG_INVALID;
    }
    *replaced = (double) r / n;
    *invalid = (double) i / n;
}

// The modulation of a sine flow (u = A sin(2 pi y / L)): the amplitude m of
// the least-squares fit of m sin(2 pi y / L), wavelength and phase known,
// to the measured u of the valid vectors inside the margin, over A.
static double
s_modulation (const piv_field_t *f, const piv_flow_t *flow)
{
    double us = 0, ss = 0;
    for (long k = 0; k < (long) f->nx * f->ny; k++) {
        if (f->flags[k] != PIV_FLAG_VALID || !s_inside (f, k))
            continue;
        double u, v;
        piv_flow_eval (flow, f->x[k], f->y[k], &u, &v);
        double s = u / flow->p0;  // sin (2 pi y / L)
        us += f->u[k] * s;
        ss += s * s;
    }
    return ss > 0 ? us / ss / flow->p0 : NAN;
}

// The peak vorticity of a vortex measured over the truth's, both by
// piv_field_derive (the farm's stencil, piv/derived.h): the truth sampled
// at the vector positions gives the extreme w_t at the centre, the measured
// field its largest value of the same sign within two core radii of it.
// *stencil: |w_t| over the flow's own vorticity at the centre (what the
// grid and the stencil keep of the peak before any measurement). NAN when
// no vorticity could be computed.
static double
s_vorticity_ratio (const piv_field_t *f, const piv_flow_t *flow, double *stencil)
{
    long n = (long) f->nx * f->ny, kt = -1;
    double ratio = NAN;
    piv_field_t *t = piv_field_dup (f);
    float *wm = malloc ((size_t) n * sizeof *wm), *wt = malloc ((size_t) n * sizeof *wt);
    if (!t || !wm || !wt) {
        log_error ("cannot compute the vorticity of a field of %ldx%d: out of memory",
                   (long) f->nx, f->ny);
        goto done;
    }
    for (long k = 0; k < n; k++) {
        double u, v;
        piv_flow_eval (flow, t->x[k], t->y[k], &u, &v);
        t->u[k] = (float) u;
        t->v[k] = (float) v;
        t->flags[k] = PIV_FLAG_VALID;
    }
    piv_field_derive (f, &(piv_derived_t){.vorticity = wm});
    piv_field_derive (t, &(piv_derived_t){.vorticity = wt});
    for (long k = 0; k < n; k++)
        if (isfinite (wt[k]) && (kt < 0 || fabsf (wt[k]) > fabsf (wt[kt])))
            kt = k;
    if (kt < 0)
        goto done;
    double sign = wt[kt] < 0 ? -1 : 1, best = -INFINITY;
    for (long k = 0; k < n; k++)
        if (isfinite (wm[k]) && hypot (f->x[k] - f->x[kt], f->y[k] - f->y[kt]) <= 2 * flow->p1
            && sign * wm[k] > best)
            best = sign * wm[k];
    ratio = isfinite (best) ? best / fabs (wt[kt]) : NAN;
    // The flow's vorticity dv/dx - du/dy at the centre, central differences.
    double h = 1e-3, u1, v1, u2, v2, u3, v3, u4, v4;
    piv_flow_eval (flow, flow->xc + h, flow->yc, &u1, &v1);
    piv_flow_eval (flow, flow->xc - h, flow->yc, &u2, &v2);
    piv_flow_eval (flow, flow->xc, flow->yc + h, &u3, &v3);
    piv_flow_eval (flow, flow->xc, flow->yc - h, &u4, &v4);
    *stencil = fabs (wt[kt]) / fabs ((v1 - v2) / (2 * h) - (u3 - u4) / (2 * h));
done:
    free (wm);
    free (wt);
    piv_field_destroy (&t);
    return ratio;
}

// One row of the resolution table: 'flow' run by both engines, the figure
// (modulation or peak vorticity) beside its goal (0: none) and the shares
// replaced and invalid beside theirs (0: none). 0, or -1.
static int
s_resolution_row (s_res_t *res, const char *spec, double goal, double replaced_goal)
{
    piv_flow_t flow;
    piv_field_t *fields[VARIANTS];
    if (s_flow (spec, &flow) != 0 || s_fields (res, &flow, &s_bench_particles, fields) != 0)
        return -1;
    int sine = flow.kind == PIV_FLOW_SINE;
    char g[16] = "-";
    if (goal > 0)
        snprintf (g, sizeof g, ">= %.2f", goal);
    printf ("  %-17s %-10s %7s |", spec, sine ? "modulation" : "vorticity", g);
    double stencil = NAN, figs[VARIANTS] = {NAN, NAN};
    for (int v = 0; v < VARIANTS; v++) {
        const piv_field_t *f = fields[v];
        double fig = sine ? s_modulation (f, &flow) : s_vorticity_ratio (f, &flow, &stencil);
        double repl, inv;
        figs[v] = fig;
        s_flag_shares (f, &repl, &inv);
        printf (" %6.3f%c %5.1f%c %5.1f |", fig, goal > 0 && !(fig >= goal) ? '!' : ' ',
                100 * repl, replaced_goal > 0 && repl > replaced_goal ? '!' : ' ', 100 * inv);
    }
    if (!sine)
        printf (" %5.3f | %5.3f %5.3f", stencil, figs[0] * stencil, figs[1] * stencil);
    printf ("\n");
    fflush (stdout);
    s_fields_destroy (fields, VARIANTS);
    return 0;
}

static int
s_resolution (s_res_t *res)
{
    static const int wavelengths[] = {24, 32, 48, 64, 96, 128, 256};
    static const int cores[] = {8, 12, 20};
    printf ("  Modulation: measured / true amplitude of sine:2,L (u = 2 px sin(2 pi y / L)): the\n"
            "  least-squares fit of the sine of known L and phase to u of the valid vectors.\n"
            "  Vorticity: peak measured / peak of the truth sampled at the vector positions,\n"
            "  both by piv_field_derive (the farm's circulation stencil), lamb-oseen:VMAX,RC\n"
            "  (peak displacement 4 px, core radius RC px).\n");
    printf ("  %-17s %-10s %7s | %-20s | %-20s | %5s | %-11s\n", "flow", "figure", "goal",
            "A: figure repl% inv%", "B: figure repl% inv%", "stncl", "flow: A  B");
    for (size_t i = 0; i < sizeof wavelengths / sizeof wavelengths[0]; i++) {
        char spec[32];
        int l = wavelengths[i];
        snprintf (spec, sizeof spec, "sine:2,%d", l);
        double goal = l == 32 ? GOAL_MTF_32 : l == 48 ? GOAL_MTF_48 : 0;
        if (s_resolution_row (res, spec, goal, l >= 64 ? GOAL_REPLACED : 0) != 0)
            return -1;
    }
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++) {
        char spec[32];
        int r = cores[i];
        snprintf (spec, sizeof spec, "lamb-oseen:4,%d", r);
        double goal = r == 8 ? GOAL_VORT_8 : r == 12 ? GOAL_VORT_12 : 0;
        if (s_resolution_row (res, spec, goal, 0) != 0)
            return -1;
    }
    printf ("  repl%%, inv%%: vectors flagged replaced (1), invalid (2), of all. '!' marks a miss\n"
            "  of the issue's goal (replaced: at most %.0f %% on sines of L >= 64 px; vorticity:\n"
            "  against the stencil on the truth). stncl: the truth's stencil peak over the flow's\n"
            "  own peak vorticity (what the grid and the stencil keep before any measurement);\n"
            "  flow: A's and B's measured peak over the flow's own (figure x stncl).\n",
            100 * GOAL_REPLACED);
    return 0;
}

// Peak locking: the rotation of LOCK_OMEGA about a centre placed so that
// the true fractions of u and v over the chosen block of vectors are
// 0.005 .. 0.995 px (see LOCK_STEP_U), for particles of 'diameter' px, one
// pair measured by each of s_lock_runs.
static int
s_lock_row (s_res_t *res, double diameter, double *truth_index)
{
    enum { RUNS = LOCK_RUNS };
    piv_flow_t flow;
    if (s_flow ("rotation:1", &flow) != 0)
        return -1;
    flow.p0 = LOCK_OMEGA;
    // u = omega (yc - y) with y = 7.5 + 8 j: yc puts u of row 0 at a
    // fraction of 0.005 + 0.01 k, near the middle of the frame.
    double base = LOCK_OMEGA * 7.5 + 0.005;
    double k = round ((LOCK_OMEGA * RES_SIZE / 2 - base) / 0.01);
    flow.xc = flow.yc = (base + 0.01 * k) / LOCK_OMEGA;
    s_particles_t p = s_bench_particles;
    p.diameter = diameter;
    piv_field_t *fields[RUNS];
    if (s_fields_of (res, res->lock, RUNS, &flow, &p, fields) != 0)
        return -1;
    int rc = 0;
    for (int r = 0; r < RUNS && rc == 0; r++) {
        const piv_field_t *f = fields[r];
        // The block alone: the rest flagged invalid in a copy, and the
        // truth in another copy for the bias by true fraction (Westerweel).
        piv_field_t *blk = piv_field_dup (f), *truth = piv_field_dup (f);
        double bias_sum[PIV_LOCK_BINS] = {0}, err2 = 0;
        long bias_n[PIV_LOCK_BINS] = {0}, count = 0;
        if (!blk || !truth) {
            log_error ("cannot copy a field of %dx%d: out of memory", f->nx, f->ny);
            rc = -1;
        }
        for (int j = 0; rc == 0 && j < f->ny; j++)
            for (int i = 0; i < f->nx; i++) {
                long q = (long) j * f->nx + i;
                double tu, tv;
                piv_flow_eval (&flow, f->x[q], f->y[q], &tu, &tv);
                truth->u[q] = (float) tu;
                truth->v[q] = (float) tv;
                int in = i >= LOCK_FIRST && i < LOCK_FIRST + LOCK_COUNT && j >= LOCK_FIRST
                         && j < LOCK_FIRST + LOCK_COUNT;
                truth->flags[q] = in ? PIV_FLAG_VALID : PIV_FLAG_INVALID;
                if (!in)
                    blk->flags[q] = PIV_FLAG_INVALID;
                if (!in || f->flags[q] != PIV_FLAG_VALID)
                    continue;
                double t[2] = {tu, tv}, m[2] = {f->u[q], f->v[q]};
                for (int c = 0; c < 2; c++) {
                    int bin = (int) ((t[c] - floor (t[c])) * PIV_LOCK_BINS);
                    bin = bin < PIV_LOCK_BINS ? bin : PIV_LOCK_BINS - 1;
                    bias_sum[bin] += m[c] - t[c];
                    bias_n[bin]++;
                    err2 += (m[c] - t[c]) * (m[c] - t[c]);
                    count++;
                }
            }
        piv_lock_t lock, tlock;
        if (rc == 0 && (piv_field_peak_locking (blk, &lock) == 0
                        || piv_field_peak_locking (truth, &tlock) == 0)) {
            log_error ("no valid vector in the peak-locking block, particles of %.1f px", diameter);
            rc = -1;
        }
        if (rc == 0) {
            *truth_index = tlock.index;
            double worst = 0;
            char pf[16] = "";
            if (s_lock_runs[r].prefilter > 0)
                snprintf (pf, sizeof pf, "pf%.1f", s_lock_runs[r].prefilter);
            printf ("  %4.1f  %c %-7s %-5s %5.2f |", diameter, 'A' + s_lock_runs[r].variant,
                    piv_subpixel_name (s_lock_runs[r].subpixel), pf, lock.index);
            for (int bin = 0; bin < PIV_LOCK_BINS; bin++)
                printf (" %4.1f", 100.0 * lock.bins[bin] / lock.count);
            printf (" |");
            for (int bin = 0; bin < PIV_LOCK_BINS; bin++) {
                double mean = bias_n[bin] ? bias_sum[bin] / bias_n[bin] : NAN;
                worst = fabs (mean) > worst ? fabs (mean) : worst;
                printf (" %+4.0f", 1000 * mean);
            }
            printf (" | %5.3f %5.3f\n", worst, sqrt (err2 / count));
            fflush (stdout);
        }
        piv_field_destroy (&blk);
        piv_field_destroy (&truth);
    }
    s_fields_destroy (fields, RUNS);
    return rc;
}

static int
s_peak_locking (s_res_t *res)
{
    static const double diameters[] = {1.0, 1.5, 2.6};
    printf ("\n  Peak locking by sub-pixel estimator: gauss3, the 3-point Gaussian per axis, and\n"
            "  gauss2d, the 2-D Gaussian regression over 3x3 (Nobach & Honkanen, Exp. Fluids 38,\n"
            "  2005), each with A's and B's other settings (a subpixel or prefilter of\n"
            "  --settings is overridden here), and B with the frames prefiltered (pf: Gaussian\n"
            "  low-pass of sigma %.1f px, prefilter=%.1f); one pair per dp. A rotation of %.5f\n"
            "  rad/frame (|d| < 2 px); over the %dx%d vectors of rows and columns %d..%d the\n"
            "  true u and v take each fraction 0.005, 0.015 .. 0.995 px alike. C: Christensen's\n"
            "  peak-locking degree (Exp. Fluids 36, 2004), 4 (1 - Hmin / Hmax) over the\n"
            "  histogram of the measured fractions of the valid vectors (0 flat, 4 a bin empty;\n"
            "  piv_field_peak_locking, as pivfarm-piv -v prints it); bias: mean error by true\n"
            "  fraction (Westerweel, Meas. Sci. Technol. 8, 1997), 10^-3 px; rms: RMS error per\n"
            "  component over the block's valid vectors, px.\n",
            LOCK_PREFILTER, LOCK_PREFILTER,
            LOCK_OMEGA, LOCK_COUNT, LOCK_COUNT, LOCK_FIRST, LOCK_FIRST + LOCK_COUNT - 1);
    printf ("  %4s  %-15s %5s | %-49s | %-49s | %5s %5s\n", "dp", "", "C",
            "measured fractions by 0.1 px bin, %", "bias by true fraction, 10^-3 px", "max|b|",
            "rms");
    double truth = 0;
    for (size_t d = 0; d < sizeof diameters / sizeof diameters[0]; d++)
        if (s_lock_row (res, diameters[d], &truth) != 0)
            return -1;
    printf ("  dp: particle image diameter, px; 0.02 per px, 2 %% noise. The truth's own C over\n"
            "  the same vectors: %.2f.\n",
            truth);
    return 0;
}

// Sparse seeding and small particles on the accuracy table's flows: RMS
// error per component and the share of gross errors, over the vectors a
// user gets (valid and replaced) inside the margin.
static int
s_sparse (s_res_t *res)
{
    static const struct {
        const char *name;
        s_particles_t p;
    } cases[] = {
        {"0.005 ppp, 2.6 px, 0 % noise", {0.005, 2.6, 0.0}},
        {"0.005 ppp, 2.6 px, 5 % noise", {0.005, 2.6, 0.05}},
        {"0.02 ppp, 1 px, 2 % noise", {0.02, 1.0, 0.02}},
        {"0.005 ppp, 1 px, 2 % noise", {0.005, 1.0, 0.02}},
    };
    static const char *specs[] = {"uniform:3.3,-1.7", "lamb-oseen:6,40", "sine:2.5,128"};
    printf ("\n  Sparse seeding and small particles, the accuracy table's flows (section 5)\n");
    printf ("  %-16s %-29s | %-28s | %-28s |\n", "flow", "particles",
            "A: rms u  rms v gross% inv%", "B: rms u  rms v gross% inv%");
    for (size_t c = 0; c < sizeof specs / sizeof specs[0] * sizeof cases / sizeof cases[0]; c++) {
        const char *spec = specs[c / (sizeof cases / sizeof cases[0])];
        const s_particles_t *p = &cases[c % (sizeof cases / sizeof cases[0])].p;
        piv_flow_t flow;
        piv_field_t *fields[VARIANTS];
        if (s_flow (spec, &flow) != 0 || s_fields (res, &flow, p, fields) != 0)
            return -1;
        printf ("  %-16s %-29s |", spec, cases[c % (sizeof cases / sizeof cases[0])].name);
        for (int v = 0; v < VARIANTS; v++) {
            const piv_field_t *f = fields[v];
            double suu = 0, svv = 0, repl, inv;
            long count = 0, gross = 0;
            for (long k = 0; k < (long) f->nx * f->ny; k++) {
                if (f->flags[k] > PIV_FLAG_REPLACED || !s_inside (f, k))
                    continue;
                double tu, tv;
                piv_flow_eval (&flow, f->x[k], f->y[k], &tu, &tv);
                double du = f->u[k] - tu, dv = f->v[k] - tv;
                suu += du * du;
                svv += dv * dv;
                gross += du * du + dv * dv > GROSS_PX * GROSS_PX;
                count++;
            }
            s_flag_shares (f, &repl, &inv);
            printf (" %6.3f %6.3f %6.2f %5.1f |", count ? sqrt (suu / count) : NAN,
                    count ? sqrt (svv / count) : NAN, count ? 100.0 * gross / count : NAN,
                    100 * inv);
        }
        printf ("\n");
        fflush (stdout);
        s_fields_destroy (fields, VARIANTS);
    }
    printf ("  rms u, rms v: px, over vectors flagged valid or replaced; gross%%: of them, an\n"
            "  error vector longer than %.0f px; inv%%: vectors flagged invalid, of all.\n",
            GROSS_PX);
    return 0;
}

int
resolution_section (const char *settings_text)
{
    static s_res_t res;
    memset (&res, 0, sizeof res);
    res.seed = RES_SEED + 1;
    int rc = -1;
    for (int v = 0; v < VARIANTS; v++) {
        char text[1024], err[ERRLEN];
        snprintf (text, sizeof text, "%s%s%s", settings_text ? settings_text : "",
                  settings_text && v ? " " : "", v ? "smooth=off" : "");
        piv_settings_t *s = &res.settings[v];
        if (piv_settings_parse (text, s, err, sizeof err) != 0
            || piv_settings_set_passes (s, RES_PASSES, err, sizeof err) != 0
            || !(res.engine[v] = piv_new (s, err, sizeof err))) {
            log_error ("%s", err);
            goto done;
        }
        if (piv_settings_format (s, res.text[v], sizeof res.text[v]) < 0)
            snprintf (res.text[v], sizeof res.text[v], "(settings too long to show)");
    }
    for (int r = 0; r < LOCK_RUNS; r++) {
        char err[ERRLEN];
        piv_settings_t ls = res.settings[s_lock_runs[r].variant];
        ls.subpixel = s_lock_runs[r].subpixel;
        ls.prefilter = s_lock_runs[r].prefilter;
        if (!(res.lock[r] = piv_new (&ls, err, sizeof err))) {
            log_error ("%s", err);
            goto done;
        }
    }
    printf ("\n10. Resolution and robustness (issue 24): synthetic %dx%d pairs, 0.02 particles/px,\n"
            "  2.6 px, 2 %% noise unless said, seeds from %d; vectors within %.0f px of the border\n"
            "  left out; 1 thread.\n"
            "  A: %s%s; smooth %s, s %g\n"
            "  B: %s; smooth %s\n",
            RES_SIZE, RES_SIZE, RES_SEED + 1, RES_MARGIN, res.text[0],
            settings_text ? " (--settings)" : " (the defaults)",
            piv_smooth_name (res.settings[0].smooth), res.settings[0].smooth_s, res.text[1],
            piv_smooth_name (res.settings[1].smooth));
    if (s_resolution (&res) == 0 && s_peak_locking (&res) == 0 && s_sparse (&res) == 0)
        rc = 0;
done:
    for (int v = 0; v < VARIANTS; v++)
        piv_destroy (&res.engine[v]);
    for (int r = 0; r < LOCK_RUNS; r++)
        piv_destroy (&res.lock[r]);
    return rc;
}
