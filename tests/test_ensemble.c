// test_ensemble.c — ensemble correlation (issue 27, piv/ensemble.h): the
// mean flow read from synthetic runs, partial sums that merge into the
// run's sums to the bit, their bytes, and bytes that are not such sums.

#include "piv/ensemble.h"
#include "piv/flow.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
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

START_TEST (decoded_sums_encode_to_the_same_bytes_and_give_the_same_field)
{
    piv_ensemble_t *e = s_pass ("uniform:1.2,0.4", 0.03, 8, NULL, 0, 3);
    size_t size, again;
    unsigned char *buf = s_bytes (e, &size);
    char err[256] = "";
    piv_ensemble_t *d = piv_ensemble_decode (buf, size, err, sizeof err);
    ck_assert_msg (d != NULL, "%s", err);
    unsigned char *buf2 = s_bytes (d, &again);
    ck_assert_uint_eq (size, again);
    ck_assert (memcmp (buf, buf2, size) == 0);
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
    free (buf2);
    piv_field_destroy (&fe);
    piv_field_destroy (&fd);
    piv_ensemble_destroy (&e);
    piv_ensemble_destroy (&d);
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
    tcase_add_test (tc, decoded_sums_encode_to_the_same_bytes_and_give_the_same_field);
    tcase_add_test (tc, decode_refuses_truncated_oversized_and_foreign_bytes_naming_the_problem);
    tcase_add_test (tc, merge_refuses_sums_of_another_pass_and_leaves_its_own);
    tcase_add_test (tc, a_pass_refuses_frames_of_another_size_and_a_field_of_no_pairs);
    tcase_add_test (tc, the_passes_of_a_run_halve_from_32_px_to_the_final_window);
    suite_add_tcase (s, tc);
    return s;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
