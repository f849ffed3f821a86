// piv_ensemble.c — section 13 of bench_piv: does the ensemble correlation
// (piv/ensemble.h) give the mean flow of a sparse run at 8 px windows
// better than the mean of the engine's instantaneous 16 px fields (the
// issue's goal: RMS error at most half)? Synthetic runs of known truth at
// 0.005 particles/px; the stresses against known fluctuations (random
// uniform shifts per pair); the cost per pair; the partials' bytes.

#include "bench/piv_ensemble.h"
#include "common/log.h"
#include "common/util.h"
#include "piv/ensemble.h"
#include "piv/flow.h"
#include "piv/piv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENS_SIZE 512          // px, each synthetic pair
#define ENS_DENSITY 0.005     // particles/px: the sparse run
#define ENS_DIAMETER 2.5      // px
#define ENS_MARGIN 32.0       // px: the first pass's windows reach out of the frame there
#define ENS_WINDOW 8          // px, the ensemble's final windows
#define ENS_INSTANT "passes=32,16"  // the engine's instantaneous 16 px fields
#define ENS_GOAL 0.5          // the goal: ensemble RMS / instantaneous mean's
#define ENS_SEED 1300         // + the pair's number
#define STRESS_SIZE 256       // px, the stress case's pairs
#define STRESS_DENSITY 0.02   // particles/px
#define ERRLEN 512

// Flows with gradients 16 px windows flatten: section 10's small vortex
// (a 12 px core) and a sine of 64 px; and a 24 px core, which 16 px
// windows with deformation already follow.
static const char *const s_flows[] = {"lamb-oseen:3,12", "sine:2,64", "lamb-oseen:4,24"};
static const char *const s_flow_names[] = {"vortex (Lamb-Oseen 3 px, core 12 px)",
                                           "sine (2 px, wavelength 64 px)",
                                           "vortex (Lamb-Oseen 4 px, core 24 px)"};
#define NFLOWS 3

// The pairs of a run: each of 'flow' (or, with shifts, a uniform flow of
// pair i's shift), seeds from 'seed'; the time spent making them.
typedef struct {
    const piv_flow_t *flow;  // the run's flow, or NULL: shifts
    const double *shifts;    // 2 per pair: u, v of pair i's uniform flow
    int size;                // px
    double density;          // particles/px
    uint64_t seed;           // pair i's: seed + i
    double synth_s;          // s spent synthesizing
} s_run_t;

static int
s_pair (void *arg, long i, piv_image_t **a, piv_image_t **b, char *err, size_t errlen)
{
    s_run_t *run = arg;
    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = synth.height = run->size;
    synth.density = run->density;
    synth.diameter = ENS_DIAMETER;
    synth.seed = run->seed + (uint64_t) i;
    piv_flow_t shift = {PIV_FLOW_UNIFORM, 0, 0, 0, 0};
    if (!run->flow) {
        shift.p0 = run->shifts[2 * i];
        shift.p1 = run->shifts[2 * i + 1];
    }
    double t0 = util_now ();
    int rc = piv_synth_pair (&synth, run->flow ? run->flow : &shift, a, b, err, errlen);
    run->synth_s += util_now () - t0;
    return rc;
}

// The mean of the engine's fields of the run's pairs (valid and replaced
// vectors of each grid point), the engine's time per pair into *per_pair.
static piv_field_t *
s_instant_mean (s_run_t *run, long pairs, double *per_pair)
{
    char err[ERRLEN] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    if (piv_settings_parse (ENS_INSTANT, &settings, err, sizeof err) != 0) {
        log_error ("%s", err);
        return NULL;
    }
    piv_t *piv = piv_new (&settings, err, sizeof err);
    if (!piv) {
        log_error ("cannot make an engine: %s", err);
        return NULL;
    }
    piv_field_t *mean = NULL;
    long *count = NULL;
    double spent = 0;
    for (long i = 0; i < pairs; i++) {
        piv_image_t *a = NULL, *b = NULL;
        if (s_pair (run, i, &a, &b, err, sizeof err) != 0) {
            log_error ("cannot make pair %ld: %s", i, err);
            goto fail;
        }
        double t0 = util_now ();
        piv_field_t *f = piv_process (piv, a, b, err, sizeof err);
        spent += util_now () - t0;
        piv_image_destroy (&a);
        piv_image_destroy (&b);
        if (!f) {
            log_error ("cannot process pair %ld: %s", i, err);
            goto fail;
        }
        long n = (long) f->nx * f->ny;
        if (!mean) {
            mean = piv_field_dup (f);
            count = calloc ((size_t) n, sizeof *count);
            if (!mean || !count) {
                piv_field_destroy (&f);
                log_error ("no memory");
                goto fail;
            }
            memset (mean->u, 0, n * sizeof (float));
            memset (mean->v, 0, n * sizeof (float));
        }
        for (long k = 0; k < n; k++)
            if (f->flags[k] != PIV_FLAG_INVALID) {
                mean->u[k] += f->u[k];
                mean->v[k] += f->v[k];
                count[k]++;
            }
        piv_field_destroy (&f);
    }
    for (long k = 0; mean && k < (long) mean->nx * mean->ny; k++) {
        mean->flags[k] = count[k] ? PIV_FLAG_VALID : PIV_FLAG_INVALID;
        mean->u[k] = count[k] ? mean->u[k] / count[k] : 0;
        mean->v[k] = count[k] ? mean->v[k] / count[k] : 0;
    }
    *per_pair = spent / pairs;
    free (count);
    piv_destroy (&piv);
    return mean;
fail:
    piv_field_destroy (&mean);
    free (count);
    piv_destroy (&piv);
    return NULL;
}

// One flow's row: the ensemble's 8 px field and the instantaneous 16 px
// mean against the truth; their costs per pair.
static int
s_flow_row (int f, long pairs)
{
    char err[ERRLEN] = "";
    piv_flow_t flow;
    if (piv_flow_parse (&flow, s_flows[f], ENS_SIZE, ENS_SIZE, err, sizeof err) != 0) {
        log_error ("%s", err);
        return -1;
    }
    s_run_t run = {&flow, NULL, ENS_SIZE, ENS_DENSITY, ENS_SEED, 0};
    piv_settings_t settings;
    piv_settings_init (&settings);
    double t0 = util_now ();
    piv_field_t *ens = piv_ensemble_run (&settings, ENS_WINDOW, 50, ENS_SIZE, ENS_SIZE, pairs,
                                         s_pair, &run, NULL, err, sizeof err);
    double ens_s = util_now () - t0 - run.synth_s;
    if (!ens) {
        log_error ("ensemble of %s: %s", s_flows[f], err);
        return -1;
    }
    double inst_per_pair = 0;
    piv_field_t *inst = s_instant_mean (&run, pairs, &inst_per_pair);
    if (!inst) {
        piv_field_destroy (&ens);
        return -1;
    }
    piv_score_t se, si;
    piv_score (ens, &flow, PIV_FLAG_VALID, ENS_MARGIN, ENS_SIZE, ENS_SIZE, &se);
    piv_score (inst, &flow, PIV_FLAG_VALID, ENS_MARGIN, ENS_SIZE, ENS_SIZE, &si);
    long n = (long) ens->nx * ens->ny, valid = 0;
    for (long k = 0; k < n; k++)
        valid += ens->flags[k] == PIV_FLAG_VALID;
    printf ("  %s\n", s_flow_names[f]);
    printf ("    ensemble 32,16,8 px:          RMS error %.4f px (%d vectors, %.1f %% valid; "
            "bias %+.4f, %+.4f)\n", se.rms, se.count, 100.0 * valid / n, se.bias_u, se.bias_v);
    printf ("    mean of instantaneous 16 px:  RMS error %.4f px (%d vectors)\n", si.rms,
            si.count);
    printf ("    ratio %.2f (goal <= %.2f)    cost per pair: ensemble %.1f ms (3 passes), "
            "instantaneous %.1f ms, ratio %.2f\n", se.rms / si.rms, ENS_GOAL,
            1e3 * ens_s / pairs, 1e3 * inst_per_pair, ens_s / pairs / inst_per_pair);
    piv_field_destroy (&ens);
    piv_field_destroy (&inst);
    return 0;
}

// The stresses of a run of random uniform shifts about (2, -1) px, u' =
// su g1, v' = 0.3 g1 + sv g2 (g normal; su = sv = 0: no fluctuation, the
// estimate's floor): the ensemble's mean u'u', v'v', u'v' over the valid
// vectors inside the margin against the shifts' own sample covariance.
static int
s_stress_row (long pairs, double su, double sv)
{
    double *shifts = malloc (2 * (size_t) pairs * sizeof *shifts);
    if (!shifts) {
        log_error ("no memory");
        return -1;
    }
    // Box-Muller over erand48's fixed sequence.
    unsigned short xs[3] = {27, 13, 2026};
    double mu = 0, mv = 0, cv = su > 0 ? 0.3 : 0;
    for (long i = 0; i < pairs; i++) {
        double r = sqrt (-2 * log (1 - erand48 (xs))), t = 2 * M_PI * erand48 (xs);
        double g1 = r * cos (t), g2 = r * sin (t);
        shifts[2 * i] = 2 + su * g1;
        shifts[2 * i + 1] = -1 + cv * g1 + sv * g2;
        mu += shifts[2 * i], mv += shifts[2 * i + 1];
    }
    mu /= pairs, mv /= pairs;
    double truth[3] = {0, 0, 0};
    for (long i = 0; i < pairs; i++) {
        double du = shifts[2 * i] - mu, dv = shifts[2 * i + 1] - mv;
        truth[0] += du * du / pairs, truth[1] += dv * dv / pairs, truth[2] += du * dv / pairs;
    }
    s_run_t run = {NULL, shifts, STRESS_SIZE, STRESS_DENSITY, ENS_SEED + 5000, 0};
    piv_settings_t settings;
    piv_settings_init (&settings);
    char err[ERRLEN] = "";
    float *stress = NULL;
    piv_field_t *f = piv_ensemble_run (&settings, ENS_WINDOW, 50, STRESS_SIZE, STRESS_SIZE,
                                       pairs, s_pair, &run, &stress, err, sizeof err);
    free (shifts);
    if (!f) {
        log_error ("ensemble of the shifts: %s", err);
        return -1;
    }
    long n = (long) f->nx * f->ny, count = 0;
    double s[3] = {0, 0, 0}, s2[3] = {0, 0, 0}, mean_u = 0, mean_v = 0;
    for (long k = 0; k < n; k++) {
        if (f->flags[k] != PIV_FLAG_VALID || f->x[k] < ENS_MARGIN || f->y[k] < ENS_MARGIN
            || f->x[k] > STRESS_SIZE - 1 - ENS_MARGIN || f->y[k] > STRESS_SIZE - 1 - ENS_MARGIN
            || !isfinite (stress[k]) || !isfinite (stress[n + k]) || !isfinite (stress[2 * n + k]))
            continue;
        for (int q = 0; q < 3; q++)
            s[q] += stress[q * n + k], s2[q] += stress[q * n + k] * stress[q * n + k];
        mean_u += f->u[k], mean_v += f->v[k];
        count++;
    }
    if (su > 0)
        printf ("  stresses: %ld pairs of random uniform shifts about (2, -1) px, %dx%d, %.2f "
                "particles/px, 8 px windows (%ld vectors measured inside the margin)\n", pairs,
                STRESS_SIZE, STRESS_SIZE, STRESS_DENSITY, count);
    else
        printf ("  no fluctuation: the same pairs all shifted by (2, -1) px (the floor)\n");
    if (count > 0) {
        const char *names[3] = {"u'u'", "v'v'", "u'v'"};
        for (int q = 0; q < 3; q++) {
            double m = s[q] / count, sd = sqrt (fmax (0, s2[q] / count - m * m));
            printf ("    %s  estimated %.4f px^2 (spread %.4f between windows), the shifts' "
                    "own %.4f", names[q], m, sd, truth[q]);
            if (su > 0)
                printf (": ratio %.3f", m / truth[q]);
            putchar ('\n');
        }
        printf ("    mean (%.4f, %.4f) px, the shifts' own (%.4f, %.4f)\n", mean_u / count,
                mean_v / count, mu, mv);
    }
    free (stress);
    piv_field_destroy (&f);
    return 0;
}

// Bytes of one partial (the sums of any number of pairs) of a pass of
// 'window' px at 50 % over size^2 frames, with a predictor of the pass
// before's grid (2 window, 50 %) or, with none, the first pass.
static long
s_partial_bytes (int size, int window, int predicted, int *windows)
{
    char err[ERRLEN] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    piv_field_t *pred = NULL;
    if (predicted) {
        int n = 2 * window, step = n / 2, cells = (size - n) / step + 1;
        pred = piv_field_new (cells, cells);
        if (!pred)
            return -1;
        pred->step = step;
        pred->window = n;
        for (long k = 0; k < (long) cells * cells; k++) {
            pred->x[k] = (float) ((k % cells) * step + (n - 1) * 0.5);
            pred->y[k] = (float) ((k / cells) * step + (n - 1) * 0.5);
        }
    }
    piv_ensemble_t *e = piv_ensemble_new (&settings, window, 50, size, size, pred, err,
                                          sizeof err);
    piv_field_destroy (&pred);
    if (!e) {
        log_error ("%s", err);
        return -1;
    }
    unsigned char *buf = NULL;
    size_t bytes = 0;
    int rc = piv_ensemble_encode (e, &buf, &bytes);
    piv_ensemble_info_t info;
    piv_ensemble_info (e, &info);
    *windows = info.nx * info.ny;
    free (buf);
    piv_ensemble_destroy (&e);
    return rc == 0 ? (long) bytes : -1;
}

int
ensemble_section (int pairs)
{
    printf ("\n13. Ensemble correlation (issue 27): %d pairs of %dx%d at %.3f particles/px of "
            "%.1f px, 2 %% noise\n", pairs, ENS_SIZE, ENS_SIZE, ENS_DENSITY, ENS_DIAMETER);
    printf ("  the mean flow: the ensemble's passes 32,16,8 px at 50 %% against the mean of the\n"
            "  engine's fields (%s, defaults otherwise); RMS error over valid vectors %.0f px\n"
            "  inside the frame; cost: one thread's time a pair, synthesis left out\n",
            ENS_INSTANT, ENS_MARGIN);
    for (int f = 0; f < NFLOWS; f++)
        if (s_flow_row (f, pairs) != 0)
            return -1;
    if (s_stress_row (pairs, 0.8, 0.5) != 0 || s_stress_row (pairs, 0, 0) != 0)
        return -1;
    printf ("  bytes of one partial (any number of pairs), 50 %% overlap:\n");
    static const int sizes[2] = {1024, 2048};
    for (int i = 0; i < 2; i++) {
        int w8 = 0, w16 = 0, w32 = 0;
        long b8 = s_partial_bytes (sizes[i], 8, 1, &w8);
        long b16 = s_partial_bytes (sizes[i], 16, 1, &w16);
        long b32 = s_partial_bytes (sizes[i], 32, 0, &w32);
        if (b8 < 0 || b16 < 0 || b32 < 0)
            return -1;
        printf ("    %4d^2: the 8 px pass %.1f MB (%d windows, %.0f bytes each); 16 px %.1f MB "
                "(%.0f each); the first, 32 px, %.1f MB (%.0f each)\n", sizes[i], b8 / 1e6, w8,
                (double) b8 / w8, b16 / 1e6, (double) b16 / w16, b32 / 1e6, (double) b32 / w32);
    }
    return 0;
}
