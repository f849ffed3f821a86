// test_ensemble.c — ensemble correlation (issue 27, piv/ensemble.h): the
// mean flow read from synthetic runs, partial sums that merge into the
// run's sums to the bit, their bytes, and bytes that are not such sums.

#include "piv/ensemble.h"
#include "piv/flow.h"
#include "tests/testutil.h"

#include <check.h>
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 256

// Pair 'seed' of a synthetic run of 'spec' (SIZE^2, 'density' particles/px
// of 2.5 px, 2 % noise).
static void
s_pair (const char *spec, double density, int seed, piv_image_t **a, piv_image_t **b)
{
    char err[256] = "";
    piv_flow_t flow;
    ck_assert_msg (piv_flow_parse (&flow, spec, SIZE, SIZE, err, sizeof err) == 0, "%s", err);
    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = synth.height = SIZE;
    synth.density = density;
    synth.diameter = 2.5;
    synth.seed = (uint64_t) seed;
    ck_assert_msg (piv_synth_pair (&synth, &flow, a, b, err, sizeof err) == 0, "%s", err);
}

// A pass of 'window' px at 50 % over pairs [first, last) of 'spec'.
static piv_ensemble_t *
s_pass (const char *spec, double density, int window, const piv_field_t *predictor, int first,
        int last)
{
    char err[256] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    piv_ensemble_t *e = piv_ensemble_new (&settings, window, 50, SIZE, SIZE, predictor, err,
                                          sizeof err);
    ck_assert_msg (e != NULL, "%s", err);
    for (int i = first; i < last; i++) {
        piv_image_t *a = NULL, *b = NULL;
        s_pair (spec, density, i + 1, &a, &b);
        ck_assert_msg (piv_ensemble_add (e, a, b, err, sizeof err) == 0, "%s", err);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    return e;
}

static piv_field_t *
s_field (const piv_ensemble_t *e, float **stress)
{
    char err[256] = "";
    piv_field_t *f = piv_ensemble_field (e, stress, err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    return f;
}

// The encoding of e (caller frees).
static unsigned char *
s_bytes (const piv_ensemble_t *e, size_t *size)
{
    unsigned char *buf = NULL;
    ck_assert_int_eq (piv_ensemble_encode (e, &buf, size), 0);
    return buf;
}

// Decodes e's bytes (into *buf, *size: the caller frees) and checks that
// the decoded sums encode to the same bytes; the decoded object.
static piv_ensemble_t *
s_round_trip (const piv_ensemble_t *e, unsigned char **buf, size_t *size)
{
    *buf = s_bytes (e, size);
    char err[256] = "";
    piv_ensemble_t *d = piv_ensemble_decode (*buf, *size, err, sizeof err);
    ck_assert_msg (d != NULL, "%s", err);
    size_t again;
    unsigned char *buf2 = s_bytes (d, &again);
    ck_assert_msg (again == *size && memcmp (*buf, buf2, again) == 0,
                   "decoded sums encode to other bytes");
    free (buf2);
    return d;
}

START_TEST (a_uniform_shift_is_recovered_from_the_summed_planes)
{
    piv_ensemble_t *e = s_pass ("uniform:2.3,-1.4", 0.03, 16, NULL, 0, 8);
    piv_ensemble_info_t info;
    piv_ensemble_info (e, &info);
    ck_assert_int_eq (info.pairs, 8);
    ck_assert_int_eq (info.window, 16);
    ck_assert_int_eq (info.step, 8);
    ck_assert_int_eq (info.nx, (SIZE - 16) / 8 + 1);
    piv_field_t *f = s_field (e, NULL);
    ck_assert_int_eq (f->nx, info.nx);
    long n = (long) f->nx * f->ny, valid = 0;
    double worst = 0, bu = 0, bv = 0, e2 = 0;
    for (long k = 0; k < n; k++) {
        if (f->flags[k] != PIV_FLAG_VALID)
            continue;
        valid++;
        double du = f->u[k] - 2.3, dv = f->v[k] + 1.4, e = hypot (du, dv);
        bu += du, bv += dv, e2 += e * e;
        worst = e > worst ? e : worst;
    }
    ck_assert_msg (valid >= n * 98 / 100, "%ld of %ld vectors valid", valid, n);
    // 8 pairs of some 8 particles a window, no window offset: no bias, a
    // few hundredths of a pixel of random error (0.045 px measured).
    ck_assert_msg (fabs (bu / valid) < 0.01 && fabs (bv / valid) < 0.01, "bias %.4f, %.4f px",
                   bu / valid, bv / valid);
    ck_assert_msg (sqrt (e2 / valid) < 0.06, "RMS error %.3f px", sqrt (e2 / valid));
    ck_assert_msg (worst < 0.25, "a vector %.3f px from the shift", worst);
    piv_field_destroy (&f);
    piv_ensemble_destroy (&e);
}
END_TEST

START_TEST (the_sums_of_two_halves_merged_are_the_sums_of_the_whole_run_to_the_bit)
{
    piv_ensemble_t *whole = s_pass ("lamb-oseen:3,30", 0.02, 8, NULL, 0, 6);
    piv_ensemble_t *first = s_pass ("lamb-oseen:3,30", 0.02, 8, NULL, 0, 3);
    piv_ensemble_t *second = s_pass ("lamb-oseen:3,30", 0.02, 8, NULL, 3, 6);
    char err[256] = "";
    // In the other order too: integer sums do not care.
    ck_assert_msg (piv_ensemble_merge (second, first, err, sizeof err) == 0, "%s", err);
    size_t sw, sm;
    unsigned char *bw = s_bytes (whole, &sw), *bm = s_bytes (second, &sm);
    ck_assert_uint_eq (sw, sm);
    ck_assert_msg (memcmp (bw, bm, sw) == 0, "merged sums differ from the whole run's");
    piv_field_t *fw = s_field (whole, NULL), *fm = s_field (second, NULL);
    long n = (long) fw->nx * fw->ny;
    ck_assert (memcmp (fw->u, fm->u, n * sizeof (float)) == 0);
    ck_assert (memcmp (fw->v, fm->v, n * sizeof (float)) == 0);
    free (bw);
    free (bm);
    piv_field_destroy (&fw);
    piv_field_destroy (&fm);
    piv_ensemble_destroy (&whole);
    piv_ensemble_destroy (&first);
    piv_ensemble_destroy (&second);
}
END_TEST

// The run's pairs for piv_ensemble_run: pair i of 'spec' (seed i + 1),
// or, with shifts, a uniform flow of pair i's shift.
typedef struct {
    const char *spec;      // the flow, or NULL: shifts
    const double *shifts;  // u, v of pair i
    double density;        // particles/px
} s_run_t;

static int
s_run_pair (void *arg, long i, piv_image_t **a, piv_image_t **b, char *err, size_t errlen)
{
    const s_run_t *run = arg;
    char spec[64];
    if (!run->spec)
        snprintf (spec, sizeof spec, "uniform:%.17g,%.17g", run->shifts[2 * i],
                  run->shifts[2 * i + 1]);
    (void) err, (void) errlen;
    s_pair (run->spec ? run->spec : spec, run->density, (int) i + 1, a, b);
    return 0;
}

START_TEST (passes_with_a_predictor_follow_a_vortex_at_8_px_windows)
{
    char err[256] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    s_run_t run = {"lamb-oseen:4,24", NULL, 0.005};
    piv_field_t *f = piv_ensemble_run (&settings, 8, 50, SIZE, SIZE, 40, s_run_pair, &run, NULL,
                                       err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    ck_assert_int_eq (f->window, 8);
    piv_flow_t flow;
    ck_assert (piv_flow_parse (&flow, "lamb-oseen:4,24", SIZE, SIZE, err, sizeof err) == 0);
    piv_score_t score;
    ck_assert (piv_score (f, &flow, PIV_FLAG_VALID, 32, SIZE, SIZE, &score) >= 0);
    // 40 pairs of 0.3 particles a window: 0.030 px measured; a first pass
    // of 32 px alone misses the core by 0.21 px RMS, B deformed alone
    // (not A too) by 0.11 px.
    ck_assert_msg (score.count >= 2300, "%d vectors scored", score.count);
    ck_assert_msg (score.rms < 0.05, "RMS error %.4f px", score.rms);
    piv_field_destroy (&f);
}
END_TEST

START_TEST (the_stresses_of_random_shifts_are_their_covariance)
{
    // Shifts at the quantiles of a normal distribution, u' and v' paired
    // in another order: a Gaussian PDF, which the peak's Gaussian fit
    // assumes (60 random draws are lumpy: their mode's width is not their
    // variance, 0.87 of it for one such draw).
    enum { PAIRS = 60 };
    double shifts[2 * PAIRS], mu = 0, mv = 0;
    for (int i = 0; i < PAIRS; i++) {
        double g1 = gsl_cdf_ugaussian_Pinv ((i + 0.5) / PAIRS);
        double g2 = gsl_cdf_ugaussian_Pinv (((i * 37) % PAIRS + 0.5) / PAIRS);
        shifts[2 * i] = 2 + 0.8 * g1;
        shifts[2 * i + 1] = -1 + 0.3 * g1 + 0.5 * g2;
        mu += shifts[2 * i] / PAIRS, mv += shifts[2 * i + 1] / PAIRS;
    }
    double truth[3] = {0, 0, 0};
    for (int i = 0; i < PAIRS; i++) {
        double du = shifts[2 * i] - mu, dv = shifts[2 * i + 1] - mv;
        truth[0] += du * du / PAIRS, truth[1] += dv * dv / PAIRS, truth[2] += du * dv / PAIRS;
    }
    char err[256] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    s_run_t run = {NULL, shifts, 0.02};
    float *stress = NULL;
    piv_field_t *f = piv_ensemble_run (&settings, 8, 50, SIZE, SIZE, PAIRS, s_run_pair, &run,
                                       &stress, err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    long n = (long) f->nx * f->ny, count = 0;
    double mean[3] = {0, 0, 0};
    for (long k = 0; k < n; k++)
        if (f->flags[k] == PIV_FLAG_VALID && isfinite (stress[k]) && isfinite (stress[n + k])
            && isfinite (stress[2 * n + k])) {
            for (int q = 0; q < 3; q++)
                mean[q] += stress[q * n + k];
            count++;
        }
    ck_assert_msg (count > n / 2, "%ld of %ld windows have stresses", count, n);
    for (int q = 0; q < 3; q++) {
        mean[q] /= count;
        ck_assert_msg (fabs (mean[q] / truth[q] - 1) < 0.15, "stress %d: %.4f px^2 for %.4f", q,
                       mean[q], truth[q]);
    }
    free (stress);
    piv_field_destroy (&f);
    // The same pairs without fluctuation: no stress to speak of.
    for (int i = 0; i < PAIRS; i++)
        shifts[2 * i] = 2, shifts[2 * i + 1] = -1;
    f = piv_ensemble_run (&settings, 8, 50, SIZE, SIZE, 20, s_run_pair, &run, &stress, err,
                          sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    // 20 pairs of 1.3 particles a window: a window's own estimate is noisy
    // (their mean, over the windows inside the margin, is the figure).
    double sum[3] = {0, 0, 0};
    count = 0;
    for (long k = 0; k < n; k++)
        if (f->flags[k] == PIV_FLAG_VALID && isfinite (stress[k]) && f->x[k] > 32
            && f->y[k] > 32 && f->x[k] < SIZE - 33 && f->y[k] < SIZE - 33) {
            for (int q = 0; q < 3; q++)
                sum[q] += stress[q * n + k];
            count++;
        }
    ck_assert_int_gt (count, 2000);
    double worst = fmax (fabs (sum[0]), fmax (fabs (sum[1]), fabs (sum[2]))) / count;
    ck_assert_msg (worst < 0.03, "a mean stress of %.4f px^2 where there is none", worst);
    free (stress);
    piv_field_destroy (&f);
}
END_TEST

// Pairs [first, last) of a vortex into a new pass of 8 px (thread body).
typedef struct {
    int first, last;
    piv_ensemble_t *e;
} s_half_t;

static void *
s_half (void *arg)
{
    s_half_t *h = arg;
    h->e = s_pass ("lamb-oseen:3,30", 0.02, 8, NULL, h->first, h->last);
    return NULL;
}

START_TEST (sums_made_on_other_threads_merge_to_the_same_bytes)
{
    s_half_t halves[2] = {{0, 3, NULL}, {3, 6, NULL}};
    pthread_t threads[2];
    for (int t = 0; t < 2; t++)
        ck_assert_int_eq (pthread_create (&threads[t], NULL, s_half, &halves[t]), 0);
    for (int t = 0; t < 2; t++)
        pthread_join (threads[t], NULL);
    piv_ensemble_t *whole = s_pass ("lamb-oseen:3,30", 0.02, 8, NULL, 0, 6);
    char err[256] = "";
    ck_assert_msg (piv_ensemble_merge (halves[0].e, halves[1].e, err, sizeof err) == 0, "%s", err);
    size_t sw, sm;
    unsigned char *bw = s_bytes (whole, &sw), *bm = s_bytes (halves[0].e, &sm);
    ck_assert_uint_eq (sw, sm);
    ck_assert_msg (memcmp (bw, bm, sw) == 0, "sums made on threads differ");
    free (bw);
    free (bm);
    piv_ensemble_destroy (&whole);
    piv_ensemble_destroy (&halves[0].e);
    piv_ensemble_destroy (&halves[1].e);
}
END_TEST

START_TEST (the_median_test_flags_a_stray_window_invalid_and_keeps_its_mean)
{
    // A uniform shift, but over one window frame B holds A moved by (-1,
    // 2): that window sums another displacement (windows side by side,
    // overlap 0, so that its neighbours see none of it).
    char err[256] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    piv_ensemble_t *e = piv_ensemble_new (&settings, 16, 0, SIZE, SIZE, NULL, err, sizeof err);
    ck_assert_msg (e != NULL, "%s", err);
    int x0 = 128, y0 = 128;  // window (8, 8)
    for (int i = 0; i < 6; i++) {
        piv_image_t *a = NULL, *b = NULL;
        s_pair ("uniform:2.3,-1.4", 0.03, i + 1, &a, &b);
        const float *pa = piv_image_cdata (a);
        float *pb = piv_image_data (b);
        for (int r = 0; r < 16; r++)
            for (int c = 0; c < 16; c++)
                pb[(y0 + r) * SIZE + x0 + c] = pa[(y0 + r - 2) * SIZE + x0 + c + 1];
        ck_assert_msg (piv_ensemble_add (e, a, b, err, sizeof err) == 0, "%s", err);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    piv_field_t *f = s_field (e, NULL);
    long k = 8L * f->nx + 8;
    ck_assert (fabsf (f->x[k] - (x0 + 7.5f)) < 0.01f && fabsf (f->y[k] - (y0 + 7.5f)) < 0.01f);
    ck_assert_msg (f->flags[k] == PIV_FLAG_INVALID, "the stray window (%.3f, %.3f) is valid",
                   f->u[k], f->v[k]);
    ck_assert_msg (fabsf (f->u[k] + 1) < 0.3f && fabsf (f->v[k] - 2) < 0.3f,
                   "the stray window's mean (%.3f, %.3f) was replaced", f->u[k], f->v[k]);
    long replaced = 0;
    for (long q = 0; q < (long) f->nx * f->ny; q++)
        replaced += f->flags[q] == PIV_FLAG_REPLACED;
    ck_assert_int_eq (replaced, 0);
    piv_field_destroy (&f);
    piv_ensemble_destroy (&e);
}
END_TEST

START_TEST (windows_centred_in_the_mask_stay_invalid_and_the_rest_measure_the_flow)
{
    // A wall: the frames' left quarter is outside the flow.
    piv_image_t *mask = piv_image_new (SIZE, SIZE);
    ck_assert_ptr_nonnull (mask);
    float *m = piv_image_data (mask);
    for (int r = 0; r < SIZE; r++)
        for (int c = 0; c < SIZE; c++)
            m[r * SIZE + c] = c >= SIZE / 4;
    char err[256] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    settings.mask = mask;
    piv_ensemble_t *e = piv_ensemble_new (&settings, 16, 50, SIZE, SIZE, NULL, err, sizeof err);
    ck_assert_msg (e != NULL, "%s", err);
    for (int i = 0; i < 4; i++) {
        piv_image_t *a = NULL, *b = NULL;
        s_pair ("uniform:2.3,-1.4", 0.03, i + 1, &a, &b);
        ck_assert_msg (piv_ensemble_add (e, a, b, err, sizeof err) == 0, "%s", err);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    piv_field_t *f = s_field (e, NULL);
    long n = (long) f->nx * f->ny, inside = 0, good = 0;
    for (long k = 0; k < n; k++) {
        if (f->x[k] < SIZE / 4) {
            ck_assert_msg (f->flags[k] == PIV_FLAG_INVALID, "masked window at x %.1f is %d",
                           f->x[k], f->flags[k]);
            continue;
        }
        inside++;
        good += f->flags[k] == PIV_FLAG_VALID && fabsf (f->u[k] - 2.3f) < 0.2f
                && fabsf (f->v[k] + 1.4f) < 0.2f;
    }
    ck_assert_msg (good >= inside * 95 / 100, "%ld of %ld windows in the flow measure it", good,
                   inside);
    piv_field_destroy (&f);
    piv_ensemble_destroy (&e);
    piv_image_destroy (&mask);
}
END_TEST

START_TEST (decoded_sums_encode_to_the_same_bytes_and_give_the_same_field)
{
    piv_ensemble_t *e = s_pass ("uniform:1.2,0.4", 0.03, 8, NULL, 0, 3);
    size_t size;
    unsigned char *buf = NULL;
    piv_ensemble_t *d = s_round_trip (e, &buf, &size);
    char err[256] = "";
    piv_ensemble_info_t ie, id;
    piv_ensemble_info (e, &ie);
    piv_ensemble_info (d, &id);
    ck_assert (ie.window == id.window && ie.step == id.step && ie.nx == id.nx && ie.ny == id.ny
               && ie.radius == id.radius && ie.width == id.width && ie.height == id.height
               && ie.pairs == id.pairs);
    piv_field_t *fe = s_field (e, NULL), *fd = s_field (d, NULL);
    long n = (long) fe->nx * fe->ny;
    ck_assert (memcmp (fe->u, fd->u, n * sizeof (float)) == 0);
    ck_assert (memcmp (fe->flags, fd->flags, n) == 0);
    // A decoded partial still merges with its pass.
    ck_assert_msg (piv_ensemble_merge (d, e, err, sizeof err) == 0, "%s", err);
    piv_ensemble_info (d, &id);
    ck_assert_int_eq (id.pairs, 6);
    free (buf);
    piv_field_destroy (&fe);
    piv_field_destroy (&fd);
    piv_ensemble_destroy (&e);
    piv_ensemble_destroy (&d);
}
END_TEST

START_TEST (a_pass_with_a_predictor_travels_with_it_and_merges_only_with_its_own)
{
    piv_ensemble_t *first = s_pass ("uniform:2.3,-1.4", 0.03, 16, NULL, 0, 2);
    piv_field_t *pred = s_field (first, NULL);
    piv_ensemble_t *e = s_pass ("uniform:2.3,-1.4", 0.03, 8, pred, 0, 2);
    size_t size;
    unsigned char *buf = NULL;
    piv_ensemble_t *d = s_round_trip (e, &buf, &size);
    char err[256] = "";
    ck_assert_msg (piv_ensemble_merge (d, e, err, sizeof err) == 0, "%s", err);
    // The same pass after another prediction does not merge.
    pred->u[0] += 0.5f;
    piv_ensemble_t *other = s_pass ("uniform:2.3,-1.4", 0.03, 8, pred, 0, 1);
    ck_assert_int_eq (piv_ensemble_merge (d, other, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "another predictor") != NULL, "%s", err);
    // A predictor's displacement that is not a number: refused.
    uint32_t tlen = buf[36] | buf[37] << 8 | buf[38] << 16 | (uint32_t) buf[39] << 24;
    unsigned char *u0 = buf + 52 + tlen + 32;  // the predictor's first u (PVF1's header: 32)
    memcpy (u0, (const unsigned char[]) {0, 0, 0xc0, 0x7f}, 4);  // a float NaN
    ck_assert_ptr_null (piv_ensemble_decode (buf, size, err, sizeof err));
    ck_assert_msg (strstr (err, "bad ensemble: predictor") != NULL, "%s", err);
    free (buf);
    piv_field_destroy (&pred);
    piv_ensemble_destroy (&first);
    piv_ensemble_destroy (&e);
    piv_ensemble_destroy (&d);
    piv_ensemble_destroy (&other);
}
END_TEST

START_TEST (decode_refuses_truncated_oversized_and_foreign_bytes_naming_the_problem)
{
    piv_ensemble_t *e = s_pass ("uniform:1,1", 0.03, 8, NULL, 0, 1);
    size_t size;
    unsigned char *buf = s_bytes (e, &size);
    unsigned char *big = malloc (size + 8);
    ck_assert_ptr_nonnull (big);
    memcpy (big, buf, size);
    memset (big + size, 0, 8);
    char err[256] = "";
    ck_assert_ptr_null (piv_ensemble_decode (buf, size - 1, err, sizeof err));
    ck_assert_msg (strstr (err, "bad ensemble: truncated") != NULL, "%s", err);
    ck_assert_ptr_null (piv_ensemble_decode (buf, 20, err, sizeof err));
    ck_assert_msg (strstr (err, "bad ensemble: truncated") != NULL, "%s", err);
    ck_assert_ptr_null (piv_ensemble_decode (big, size + 8, err, sizeof err));
    ck_assert_msg (strstr (err, "bad ensemble: oversized") != NULL, "%s", err);
    memcpy (big, "PVF1", 4);
    ck_assert_ptr_null (piv_ensemble_decode (big, size, err, sizeof err));
    ck_assert_msg (strstr (err, "bad ensemble: magic 'PVF1'") != NULL, "%s", err);
    // A grid that does not follow from the pass.
    memcpy (big, buf, size);
    big[24] ^= 1;
    ck_assert_ptr_null (piv_ensemble_decode (big, size, err, sizeof err));
    ck_assert_msg (strstr (err, "bad ensemble: step") != NULL, "%s", err);
    // A window that counts more pairs than the sums hold.
    memcpy (big, buf, size);
    size_t at = size - 8 * (size_t) ((2 * 3 + 1) * (2 * 3 + 1) + 6);  // the last window's count
    big[at] = 9;
    ck_assert_ptr_null (piv_ensemble_decode (big, size, err, sizeof err));
    ck_assert_msg (strstr (err, "pairs of 1") != NULL, "%s", err);
    free (buf);
    free (big);
    piv_ensemble_destroy (&e);
}
END_TEST

START_TEST (merge_refuses_sums_of_another_pass_and_leaves_its_own)
{
    piv_ensemble_t *a = s_pass ("uniform:1,1", 0.03, 8, NULL, 0, 1);
    piv_ensemble_t *b = s_pass ("uniform:1,1", 0.03, 16, NULL, 0, 1);
    char err[256] = "";
    ck_assert_int_eq (piv_ensemble_merge (a, b, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "16 px windows") != NULL, "%s", err);
    piv_ensemble_info_t info;
    piv_ensemble_info (a, &info);
    ck_assert_int_eq (info.pairs, 1);
    piv_ensemble_destroy (&a);
    piv_ensemble_destroy (&b);
}
END_TEST

START_TEST (a_pass_refuses_frames_of_another_size_and_a_field_of_no_pairs)
{
    char err[256] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    ck_assert_ptr_null (piv_ensemble_new (&settings, 7, 50, SIZE, SIZE, NULL, err, sizeof err));
    ck_assert_msg (strstr (err, "window 7 px") != NULL, "%s", err);
    ck_assert_ptr_null (piv_ensemble_new (&settings, 8, 95, SIZE, SIZE, NULL, err, sizeof err));
    ck_assert_msg (strstr (err, "overlap 95") != NULL, "%s", err);
    piv_ensemble_t *e = piv_ensemble_new (&settings, 8, 50, 128, 128, NULL, err, sizeof err);
    ck_assert_msg (e != NULL, "%s", err);
    ck_assert_ptr_null (piv_ensemble_field (e, NULL, err, sizeof err));
    ck_assert_msg (strstr (err, "no pair") != NULL, "%s", err);
    piv_image_t *a = NULL, *b = NULL;
    s_pair ("uniform:1,1", 0.03, 1, &a, &b);
    ck_assert_int_eq (piv_ensemble_add (e, a, b, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "256 x 256") != NULL && strstr (err, "128 x 128") != NULL, "%s",
                   err);
    piv_ensemble_info_t info;
    piv_ensemble_info (e, &info);
    ck_assert_int_eq (info.pairs, 0);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    piv_ensemble_destroy (&e);
}
END_TEST

// Reads the rows of an ensemble text (9 columns, '#' lines skipped) into
// rows[9 k + c]; their number. The column line must be there.
static long
s_rows (const char *path, double *rows, long max)
{
    char *text = tu_slurp (path, NULL);
    ck_assert_msg (text != NULL, "cannot read '%s'", path);
    ck_assert_msg (strstr (text, "\n# x y u v flags peak_ratio uu vv uv\n") != NULL,
                   "no column line naming uu vv uv in '%s'", path);
    long n = 0;
    for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n")) {
        if (line[0] == '#')
            continue;
        ck_assert_int_lt (n, max);
        double *r = rows + 9 * n;
        int used = 0;
        ck_assert_msg (sscanf (line, "%lf %lf %lf %lf %lf %lf %lf %lf %lf%n", &r[0], &r[1],
                               &r[2], &r[3], &r[4], &r[5], &r[6], &r[7], &r[8], &used) == 9
                           && line[used] == '\0',
                       "row '%s' is not 9 columns", line);
        n++;
    }
    free (text);
    return n;
}

START_TEST (pivfarm_piv_writes_the_ensemble_of_its_pairs_in_px_and_in_si_units)
{
    const char *dir = tu_tmpdir ();
    char out[8192];
    const char *synth[] = {"-f", "uniform:2.3,-1.4", "-s", "128x128", "-c", "6",
                           "-o", tu_path (dir, "p"), NULL};
    ck_assert_int_eq (tu_run_bin ("pivfarm-synth", synth, out, sizeof out, 60), 0);
    char frames[12][4096], px[4096], si[4096], name[64];
    for (int i = 0; i < 12; i++) {
        snprintf (name, sizeof name, "p_%04d_%c.tif", i / 2 + 1, i % 2 ? 'b' : 'a');
        snprintf (frames[i], sizeof frames[i], "%s", tu_path (dir, name));
    }
    snprintf (px, sizeof px, "%s", tu_path (dir, "px.txt"));
    snprintf (si, sizeof si, "%s", tu_path (dir, "si.txt"));
    const char *args[20] = {"--ensemble", "-o", px};
    for (int i = 0; i < 12; i++)
        args[3 + i] = frames[i];
    ck_assert_msg (tu_run_bin ("pivfarm-piv", args, out, sizeof out, 60) == 0, "%s", out);
    const char *cal[20] = {"--ensemble", "--calibration", "scale=0.1mm/px dt=1ms", "-o", si};
    for (int i = 0; i < 12; i++)
        cal[5 + i] = frames[i];
    ck_assert_msg (tu_run_bin ("pivfarm-piv", cal, out, sizeof out, 60) == 0, "%s", out);
    // Two threads, each pass's pairs shared out: the same file to the byte.
    char px2[4096];
    snprintf (px2, sizeof px2, "%s", tu_path (dir, "px2.txt"));
    const char *two[20] = {"--ensemble", "-t", "2", "-o", px2};
    for (int i = 0; i < 12; i++)
        two[5 + i] = frames[i];
    ck_assert_msg (tu_run_bin ("pivfarm-piv", two, out, sizeof out, 60) == 0, "%s", out);
    size_t l1, l2;
    char *t1 = tu_slurp (px, &l1), *t2 = tu_slurp (px2, &l2);
    ck_assert (t1 && t2 && l1 == l2 && memcmp (t1, t2, l1) == 0);
    free (t1);
    free (t2);
    enum { MAX = 2000 };
    static double a[9 * MAX], b[9 * MAX];
    long n = s_rows (px, a, MAX);
    ck_assert_int_eq (n, 31 * 31);  // 8 px windows at 4 px over 128 px
    ck_assert_int_eq (s_rows (si, b, MAX), n);
    long valid = 0;
    double e2 = 0;
    for (long k = 0; k < n; k++) {
        double *r = a + 9 * k, *q = b + 9 * k;
        if (r[4] != PIV_FLAG_VALID)
            continue;
        valid++;
        e2 += (r[2] - 2.3) * (r[2] - 2.3) + (r[3] + 1.4) * (r[3] + 1.4);
        // 0.1 mm/px over 1 ms: 0.1 m/s a px, y up; a stress 0.01 m^2/s^2 a px^2.
        ck_assert (fabs (q[0] - r[0] * 1e-4) < 1e-9 && fabs (q[1] + r[1] * 1e-4) < 1e-9);
        ck_assert (fabs (q[2] - r[2] * 0.1) < 1e-6 && fabs (q[3] + r[3] * 0.1) < 1e-6);
        ck_assert (isnan (r[6]) || fabs (q[6] - r[6] * 0.01) < 1e-6 * (1 + fabs (r[6])));
        ck_assert (isnan (r[8]) || fabs (q[8] + r[8] * 0.01) < 1e-6 * (1 + fabs (r[8])));
    }
    ck_assert_int_gt (valid, n * 95 / 100);
    // 6 pairs of 1.3 particles a window: a few hundredths of a pixel.
    ck_assert_msg (sqrt (e2 / valid) < 0.1, "RMS error %.3f px", sqrt (e2 / valid));
    // Frames in pairs, or a usage error; a pair of another size names both.
    const char *odd[] = {"--ensemble", frames[0], frames[1], frames[2], NULL};
    ck_assert_int_eq (tu_run_bin ("pivfarm-piv", odd, out, sizeof out, 60), 2);
    ck_assert_msg (strstr (out, "expects frames in pairs") != NULL, "%s", out);
    const char *synth2[] = {"-s", "96x96", "-o", tu_path (dir, "q"), NULL};
    ck_assert_int_eq (tu_run_bin ("pivfarm-synth", synth2, out, sizeof out, 60), 0);
    char qa[4096], qb[4096];
    snprintf (qa, sizeof qa, "%s", tu_path (dir, "q_a.tif"));
    snprintf (qb, sizeof qb, "%s", tu_path (dir, "q_b.tif"));
    const char *mixed[] = {"--ensemble", frames[0], frames[1], qa, qb, NULL};
    ck_assert_int_eq (tu_run_bin ("pivfarm-piv", mixed, out, sizeof out, 60), 1);
    ck_assert_msg (strstr (out, "96 x 96") != NULL && strstr (out, "128 x 128") != NULL, "%s",
                   out);
    tu_rmtree (dir);
}
END_TEST

START_TEST (the_passes_of_a_run_halve_from_32_px_to_the_final_window)
{
    int w[8];
    ck_assert_int_eq (piv_ensemble_passes (8, w, 8), 3);
    ck_assert (w[0] == 32 && w[1] == 16 && w[2] == 8);
    ck_assert_int_eq (piv_ensemble_passes (6, w, 8), 3);
    ck_assert (w[0] == 24 && w[1] == 12 && w[2] == 6);
    ck_assert_int_eq (piv_ensemble_passes (64, w, 8), 1);
    ck_assert_int_eq (w[0], 64);
    ck_assert_int_eq (piv_ensemble_passes (8, w, 2), 2);
    ck_assert (w[0] == 16 && w[1] == 8);
    ck_assert_int_eq (piv_ensemble_passes (9, w, 8), -1);
    ck_assert_int_eq (piv_ensemble_passes (2, w, 8), -1);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *s = suite_create ("ensemble");
    TCase *tc = tcase_create ("ensemble");
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, a_uniform_shift_is_recovered_from_the_summed_planes);
    tcase_add_test (tc, the_sums_of_two_halves_merged_are_the_sums_of_the_whole_run_to_the_bit);
    tcase_add_test (tc, passes_with_a_predictor_follow_a_vortex_at_8_px_windows);
    tcase_add_test (tc, the_stresses_of_random_shifts_are_their_covariance);
    tcase_add_test (tc, sums_made_on_other_threads_merge_to_the_same_bytes);
    tcase_add_test (tc, the_median_test_flags_a_stray_window_invalid_and_keeps_its_mean);
    tcase_add_test (tc, windows_centred_in_the_mask_stay_invalid_and_the_rest_measure_the_flow);
    tcase_add_test (tc, decoded_sums_encode_to_the_same_bytes_and_give_the_same_field);
    tcase_add_test (tc, decode_refuses_truncated_oversized_and_foreign_bytes_naming_the_problem);
    tcase_add_test (tc, a_pass_with_a_predictor_travels_with_it_and_merges_only_with_its_own);
    tcase_add_test (tc, merge_refuses_sums_of_another_pass_and_leaves_its_own);
    tcase_add_test (tc, a_pass_refuses_frames_of_another_size_and_a_field_of_no_pairs);
    tcase_add_test (tc, the_passes_of_a_run_halve_from_32_px_to_the_final_window);
    tcase_add_test (tc, pivfarm_piv_writes_the_ensemble_of_its_pairs_in_px_and_in_si_units);
    suite_add_tcase (s, tc);
    return s;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
