// test_uncertainty.c — each vector's uncertainty (issue 27): what the
// engine's sigma_u, sigma_v say about noisy and clean synthetic pairs, the
// columns pivfarm-piv writes, and the field's codec with them.

#include "piv/field.h"
#include "piv/flow.h"
#include "piv/piv.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 384
#define MARGIN 48.0  // px: the first pass's windows reach out of the frame there

// A pair of SIZE^2 of the flow 'flow_text' with the given noise, seeding
// (particles/px) and particle diameter (px), processed with 'settings_text'
// and 'method' (sigma is the uncertainty of the correlation's vectors:
// the settings turn the smoother off). The truth in *flow.
static piv_field_t *
s_field_with (const char *flow_text, const char *settings_text, double noise, double density,
              double diameter, piv_uncertainty_t method, piv_flow_t *flow)
{
    char err[256] = "";
    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = synth.height = SIZE;
    synth.noise = noise;
    synth.density = density;
    synth.diameter = diameter;
    synth.seed = 27;
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_msg (piv_flow_parse (flow, flow_text, SIZE, SIZE, err, sizeof err) == 0, "%s", err);
    ck_assert_msg (piv_synth_pair (&synth, flow, &a, &b, err, sizeof err) == 0, "%s", err);
    piv_settings_t settings;
    piv_settings_init (&settings);
    ck_assert_msg (piv_settings_parse (settings_text, &settings, err, sizeof err) == 0, "%s", err);
    settings.uncertainty = method;
    piv_t *piv = piv_new (&settings, err, sizeof err);
    ck_assert_msg (piv != NULL, "%s", err);
    piv_field_t *field = piv_process (piv, a, b, err, sizeof err);
    ck_assert_msg (field != NULL, "%s", err);
    piv_destroy (&piv);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    return field;
}

// A uniform shift of 3.3, -1.7 px, passes 64,32,16, smoothing off.
static piv_field_t *
s_field_of (double noise, double density, double diameter, piv_uncertainty_t method,
            piv_flow_t *flow)
{
    return s_field_with ("uniform:3.3,-1.7", "passes=64,32,16 smooth=off", noise, density,
                         diameter, method, flow);
}

// The same at seeding 0.05 particles/px of 2.5 px.
static piv_field_t *
s_field (double noise, piv_uncertainty_t method, piv_flow_t *flow)
{
    return s_field_of (noise, 0.05, 2.5, method, flow);
}

static int
s_cmp_float (const void *a, const void *b)
{
    float x = *(const float *) a, y = *(const float *) b;
    return (x > y) - (x < y);
}

// Over the valid vectors inside the margin that have a sigma (at least the
// share 'have' of them): the median of sigma_u and sigma_v together, and RMS sigma
// over RMS actual error.
static void
s_measure_share (const piv_field_t *f, const piv_flow_t *flow, double have, double *median,
                 double *ratio)
{
    long n = (long) f->nx * f->ny, count = 0, valid = 0;
    float *s = malloc (2 * (size_t) n * sizeof *s);
    ck_assert_ptr_nonnull (s);
    double s2 = 0, e2 = 0;
    for (long k = 0; k < n; k++) {
        if (f->flags[k] != PIV_FLAG_VALID || f->x[k] < MARGIN || f->y[k] < MARGIN
            || f->x[k] > SIZE - 1 - MARGIN || f->y[k] > SIZE - 1 - MARGIN)
            continue;
        valid++;
        if (!isfinite (f->sigma_u[k]) || !isfinite (f->sigma_v[k]))
            continue;  // no peak at its lag: the vector came from its neighbours
        ck_assert_msg (f->sigma_u[k] >= 0 && f->sigma_v[k] >= 0 && f->sigma_u[k] <= 1
                           && f->sigma_v[k] <= 1,
                       "valid vector %ld has sigma %g, %g", k, f->sigma_u[k], f->sigma_v[k]);
        double u, v;
        piv_flow_eval (flow, f->x[k], f->y[k], &u, &v);
        s[count++] = f->sigma_u[k];
        s[count++] = f->sigma_v[k];
        s2 += (double) f->sigma_u[k] * f->sigma_u[k] + (double) f->sigma_v[k] * f->sigma_v[k];
        e2 += (f->u[k] - u) * (f->u[k] - u) + (f->v[k] - v) * (f->v[k] - v);
    }
    ck_assert_int_gt (count, 100);
    ck_assert_msg (count >= 2 * have * valid, "%ld of %ld valid vectors have a sigma", count / 2,
                   valid);
    qsort (s, (size_t) count, sizeof *s, s_cmp_float);
    *median = s[count / 2];
    *ratio = e2 > 0 ? sqrt (s2 / e2) : INFINITY;
    free (s);
}

// s_measure_share where 98 % of the valid vectors have a sigma.
static void
s_measure (const piv_field_t *f, const piv_flow_t *flow, double *median, double *ratio)
{
    s_measure_share (f, flow, 0.98, median, ratio);
}

// s_measure of s_field's CS field at 'noise'.
static void
s_cs (double noise, double *median, double *ratio)
{
    piv_flow_t flow;
    piv_field_t *f = s_field (noise, PIV_UNCERTAINTY_CS, &flow);
    s_measure (f, &flow, median, ratio);
    piv_field_destroy (&f);
}

START_TEST (a_field_has_no_sigma_unless_the_settings_ask_for_it)
{
    piv_flow_t flow;
    piv_field_t *f = s_field (0.05, PIV_UNCERTAINTY_OFF, &flow);
    ck_assert_ptr_null (f->sigma_u);
    ck_assert_ptr_null (f->sigma_v);
    piv_field_destroy (&f);
}
END_TEST

START_TEST (sigma_grows_with_the_images_noise)
{
    static const piv_uncertainty_t methods[] = {PIV_UNCERTAINTY_CS, PIV_UNCERTAINTY_MC};
    static const double noise[] = {0.02, 0.10, 0.20};
    for (int m = 0; m < 2; m++) {
        double prev = 0;
        for (int i = 0; i < 3; i++) {
            piv_flow_t flow;
            piv_field_t *f = s_field (noise[i], methods[m], &flow);
            double median, ratio;
            s_measure (f, &flow, &median, &ratio);
            ck_assert_msg (median > prev * 1.2,
                           "%s: median sigma %.4f px at %g %% noise, %.4f px at less",
                           piv_uncertainty_name (methods[m]), median, 100 * noise[i], prev);
            prev = median;
            piv_field_destroy (&f);
        }
    }
}
END_TEST

START_TEST (sigma_on_a_noise_free_uniform_shift_is_a_few_hundredths_of_a_pixel)
{
    double median, ratio;
    s_cs (0, &median, &ratio);
    ck_assert_msg (median < 0.03, "median sigma %.4f px on a clean shift", median);
}
END_TEST

START_TEST (sigma_on_a_noisy_pair_says_the_actual_error_within_a_factor_of_two)
{
    double median, ratio;
    s_cs (0.10, &median, &ratio);
    ck_assert_msg (ratio > 0.5 && ratio < 2, "RMS sigma / RMS error %.3f (median sigma %.4f px)",
                   ratio, median);
}
END_TEST

// Sparse seeding of large particles without noise: the windows that hold
// one particle image or none, whose vectors came from elsewhere (the
// median test's second peak, the neighbours' summed planes), had a sigma
// from windows without a peak at that lag, up to 1 px where the vectors
// erred by hundredths (RMS sigma 4 times the RMS error on section 12's
// pair); and the final run's residual shift counted as uncertainty. Such
// vectors (6 % here) now have none.
START_TEST (sigma_on_a_clean_sparse_pair_is_not_several_times_the_actual_error)
{
    piv_flow_t flow;
    piv_field_t *f = s_field_of (0, 0.01, 4, PIV_UNCERTAINTY_CS, &flow);
    double median, ratio;
    s_measure_share (f, &flow, 0.9, &median, &ratio);
    ck_assert_msg (ratio > 0.5 && ratio < 2, "RMS sigma / RMS error %.3f (median sigma %.4f px)",
                   ratio, median);
    piv_field_destroy (&f);
}
END_TEST

// CS on no displacement, 10 % noise, 0.05 ppp of 2.5 px with passes=16
// and 'settings' over them: RMS sigma within 10 % of the RMS error.
static void
s_within_ten_per_cent (const char *settings)
{
    char text[128];
    snprintf (text, sizeof text, "passes=16 smooth=off %s", settings);
    piv_flow_t flow;
    piv_field_t *f = s_field_with ("uniform:0,0", text, 0.10, 0.05, 2.5, PIV_UNCERTAINTY_CS, &flow);
    double median, ratio;
    s_measure (f, &flow, &median, &ratio);
    ck_assert_msg (ratio > 0.9 && ratio < 1.1, "%s: RMS sigma / RMS error %.3f (median %.4f px)",
                   settings, ratio, median);
    piv_field_destroy (&f);
}

// One correlation, no deformation: CS's own setting, where sigma must say
// the RMS error (the sums are the engine's correlation's: circular
// windows, C+-1 weighted as its fit weights them).
START_TEST (with_one_correlation_sigma_says_the_rms_error_within_ten_per_cent)
{
    s_within_ten_per_cent ("iterations=1");
}
END_TEST

// A second run deformed by the first: the predictor's error adds to the
// vector's, unseen by the deformed windows' sums (RMS sigma / RMS error
// 0.80-0.82 without its share).
START_TEST (a_run_deformed_by_a_noisy_predictor_has_sigma_that_counts_the_predictor)
{
    s_within_ten_per_cent ("iterations=2");
}
END_TEST

START_TEST (the_uncertainty_key_reads_back_and_a_bad_method_is_refused)
{
    piv_settings_t s;
    piv_settings_init (&s);
    char err[256] = "", text[1024];
    ck_assert_msg (piv_settings_parse ("uncertainty=mc", &s, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq (s.uncertainty, PIV_UNCERTAINTY_MC);
    piv_settings_format (&s, text, sizeof text);
    ck_assert_msg (strstr (text, "uncertainty=mc") != NULL, "formatted: '%s'", text);
    ck_assert_int_eq (piv_settings_parse ("uncertainty=ie", &s, err, sizeof err), -1);
    ck_assert_str_eq (err, "bad settings: uncertainty 'ie': expected auto, off, cs or mc");
}
END_TEST

// The default, auto: cs for more than one run (the farm's 64,32,16, the
// engine's own 32 px of up to 3 iterations), off for a single run (one
// pass, one iteration: the latency setting); off and cs as asked.
START_TEST (the_default_is_cs_unless_a_single_run)
{
    piv_settings_t s;
    piv_settings_init (&s);
    char err[256] = "", text[1024];
    ck_assert_int_eq (s.uncertainty, PIV_UNCERTAINTY_AUTO);
    ck_assert_int_eq (piv_uncertainty_method (&s), PIV_UNCERTAINTY_CS);
    piv_settings_format (&s, text, sizeof text);
    ck_assert_msg (strstr (text, "uncertainty") == NULL, "formatted: '%s'", text);
    ck_assert_msg (piv_settings_parse ("passes=64,32,16 iterations=1", &s, err, sizeof err) == 0,
                   "%s", err);
    ck_assert_int_eq (piv_uncertainty_method (&s), PIV_UNCERTAINTY_CS);
    ck_assert_msg (piv_settings_parse ("passes=32 iterations=1", &s, err, sizeof err) == 0, "%s",
                   err);
    ck_assert_int_eq (piv_uncertainty_method (&s), PIV_UNCERTAINTY_OFF);
    ck_assert_msg (piv_settings_parse ("passes=32 iterations=1 uncertainty=cs", &s, err,
                                       sizeof err) == 0,
                   "%s", err);
    ck_assert_int_eq (piv_uncertainty_method (&s), PIV_UNCERTAINTY_CS);
    piv_settings_init (&s);
    ck_assert_msg (piv_settings_parse ("uncertainty=off", &s, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq (piv_uncertainty_method (&s), PIV_UNCERTAINTY_OFF);
    piv_settings_format (&s, text, sizeof text);
    ck_assert_msg (strstr (text, "uncertainty=off") != NULL, "formatted: '%s'", text);
    ck_assert_msg (piv_settings_parse ("uncertainty=auto", &s, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq (s.uncertainty, PIV_UNCERTAINTY_AUTO);
}
END_TEST

START_TEST (pivfarm_piv_writes_sigma_u_and_sigma_v_as_its_last_named_columns)
{
    const char *dir = tu_tmpdir ();
    char out[8192];
    const char *synth_args[] = {"-s", "256x256", "-n", "0.05", "-o", tu_path (dir, "p"), NULL};
    ck_assert_int_eq (tu_run_bin ("pivfarm-synth", synth_args, out, sizeof out, 60), 0);
    char a[4096], b[4096], txt[4096];
    snprintf (a, sizeof a, "%s", tu_path (dir, "p_a.tif"));
    snprintf (b, sizeof b, "%s", tu_path (dir, "p_b.tif"));
    snprintf (txt, sizeof txt, "%s", tu_path (dir, "f.txt"));
    const char *args[] = {"--uncertainty", "cs", "-p", "32,16", a, b, "-o", txt, NULL};
    ck_assert_msg (tu_run_bin ("pivfarm-piv", args, out, sizeof out, 60) == 0, "%s", out);
    char *text = tu_slurp (txt, NULL);
    ck_assert_ptr_nonnull (text);
    ck_assert_msg (strstr (text, "\n# x y u v flags peak_ratio sigma_u sigma_v\n") != NULL,
                   "no column line naming sigma_u sigma_v");
    // Every vector's row has the two columns more, sigma 0 .. 1 px where valid
    // (NaN for a few).
    long rows = 0, unknown = 0;
    for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n")) {
        if (line[0] == '#')
            continue;
        float x, y, u, v, peak, su, sv;
        int flags, used = 0;
        ck_assert_msg (sscanf (line, "%f %f %f %f %d %f %f %f%n", &x, &y, &u, &v, &flags, &peak,
                               &su, &sv, &used) == 8 && line[used] == '\0',
                       "row '%s' is not 8 columns", line);
        if (flags == PIV_FLAG_VALID && isnan (su) && isnan (sv))
            unknown++;  // no peak at its lag: the vector came from its neighbours
        else
            ck_assert_msg (flags != PIV_FLAG_VALID || (su >= 0 && sv >= 0 && su <= 1 && sv <= 1),
                           "row '%s'", line);
        rows++;
    }
    ck_assert_int_gt (rows, 100);
    ck_assert_msg (unknown <= rows / 50, "%ld of %ld valid rows without a sigma", unknown, rows);
    free (text);
    const char *bad[] = {"--uncertainty", "best", a, b, NULL};
    ck_assert_int_eq (tu_run_bin ("pivfarm-piv", bad, out, sizeof out, 60), 2);
    ck_assert_msg (strstr (out, "uncertainty 'best': expected auto, off, cs or mc") != NULL, "%s",
                   out);
    // By default (auto) the columns are there for the engine's own runs
    // (32 px, up to 3 iterations), not for a single run.
    const char *plain[] = {a, b, "-o", txt, NULL};
    ck_assert_msg (tu_run_bin ("pivfarm-piv", plain, out, sizeof out, 60) == 0, "%s", out);
    text = tu_slurp (txt, NULL);
    ck_assert_msg (text && strstr (text, "\n# x y u v flags peak_ratio sigma_u sigma_v\n"),
                   "the default run has no sigma columns");
    free (text);
    const char *single[] = {"-i", "1", a, b, "-o", txt, NULL};
    ck_assert_msg (tu_run_bin ("pivfarm-piv", single, out, sizeof out, 60) == 0, "%s", out);
    text = tu_slurp (txt, NULL);
    ck_assert_msg (text && strstr (text, "\n# x y u v flags peak_ratio\n"),
                   "a single run has sigma columns");
    free (text);
    tu_rmtree (dir);
}
END_TEST

// The lines of 'text' from its column line on ('# x y u v ...' and the
// rows): what a reader must give back, whatever header comes before.
static const char *
s_from_columns (const char *text)
{
    const char *at = strstr (text, "# x y u v");
    ck_assert_ptr_nonnull (at);
    return at;
}

// pivfarm-piv's file read back (piv_field_read_txt, by its column line)
// and written again gives the same columns and rows, byte for byte: every
// sigma_u, sigma_v (and "nan") comes back where it was.
START_TEST (a_pivfarm_piv_file_with_sigma_reads_back_to_the_same_rows)
{
    const char *dir = tu_tmpdir ();
    char out[8192], err[256];
    const char *synth_args[] = {"-s", "256x256", "-n", "0.1", "-o", tu_path (dir, "p"), NULL};
    ck_assert_int_eq (tu_run_bin ("pivfarm-synth", synth_args, out, sizeof out, 60), 0);
    char a[4096], b[4096], txt[4096], again[4096];
    snprintf (a, sizeof a, "%s", tu_path (dir, "p_a.tif"));
    snprintf (b, sizeof b, "%s", tu_path (dir, "p_b.tif"));
    snprintf (txt, sizeof txt, "%s", tu_path (dir, "f.txt"));
    snprintf (again, sizeof again, "%s", tu_path (dir, "g.txt"));
    const char *args[] = {"--uncertainty", "mc", "-p", "32,16", a, b, "-o", txt, NULL};
    ck_assert_msg (tu_run_bin ("pivfarm-piv", args, out, sizeof out, 60) == 0, "%s", out);
    piv_field_t *f = piv_field_read_txt (txt, err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    ck_assert (f->sigma_u && f->sigma_v && !f->w);
    int n = f->nx * f->ny, measured = 0;
    for (int k = 0; k < n; k++)
        measured += f->sigma_u[k] > 0 && f->sigma_v[k] > 0 && f->sigma_u[k] < 1;
    ck_assert_int_gt (measured, n / 2);
    FILE *o = fopen (again, "w");
    ck_assert (o && piv_field_write (f, o, PIV_FORMAT_TXT, NULL) == 0);
    fclose (o);
    char *first = tu_slurp (txt, NULL), *second = tu_slurp (again, NULL);
    ck_assert_str_eq (s_from_columns (second), s_from_columns (first));
    free (first);
    free (second);
    piv_field_destroy (&f);
    // A file whose column line names sigma_u, sigma_v after derived
    // quantities (an export's) and a stereo one: found by name.
    o = fopen (txt, "w");
    fprintf (o, "# x y u v w flags peak_ratio residual vorticity sigma_u sigma_v\n"
                "8 8 0.5 0.25 0.125 0 2 0.01 0.003 0.0625 0.03125\n"
                "16 8 0.5 0.25 0.125 2 1 0.01 nan nan nan\n");
    fclose (o);
    f = piv_field_read_txt (txt, err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    ck_assert (f->nx == 2 && f->w && f->sigma_u && f->sigma_v);
    ck_assert (f->sigma_u[0] == 0.0625f && f->sigma_v[0] == 0.03125f && f->w[0] == 0.125f);
    ck_assert (isnan (f->sigma_u[1]) && isnan (f->sigma_v[1]) && f->flags[1] == 2);
    piv_field_destroy (&f);
    // A row short of the sigma columns the column line names is refused.
    o = fopen (txt, "w");
    fprintf (o, "# x y u v flags peak_ratio sigma_u sigma_v\n8 8 0.5 0.25 0 2 0.06\n");
    fclose (o);
    ck_assert_ptr_null (piv_field_read_txt (txt, err, sizeof err));
    ck_assert_msg (strstr (err, "line 2 is not 'x y u v [flags] ... sigma_u sigma_v'") != NULL,
                   "%s", err);
    tu_rmtree (dir);
}
END_TEST

START_TEST (the_codec_carries_sigma_to_the_bit_and_old_fields_decode_without_it)
{
    for (int three = 0; three < 2; three++) {
        piv_field_t *f = piv_field_new (5, 4);
        ck_assert_ptr_nonnull (f);
        ck_assert_int_eq (piv_field_add_sigma (f), 0);
        if (three)
            ck_assert_int_eq (piv_field_add_w (f), 0);
        f->window = 16;
        f->step = 8;
        for (int k = 0; k < 20; k++) {
            f->x[k] = 7.5f + 8 * (k % 5);
            f->y[k] = 7.5f + 8 * (k / 5);
            f->u[k] = 0.1f * k;
            f->v[k] = -0.3f * k;
            f->peak_ratio[k] = 1.5f;
            f->sigma_u[k] = 0.01f * (k + 1);
            f->sigma_v[k] = k == 7 ? NAN : 0.02f * (k + 1);
            f->flags[k] = k == 7 ? PIV_FLAG_INVALID : PIV_FLAG_VALID;
            if (three)
                f->w[k] = 0.5f * k;
        }
        unsigned char *buf = NULL;
        size_t size = 0;
        ck_assert_int_eq (piv_field_encode (f, &buf, &size), 0);
        ck_assert_int_eq (size, 32 + 20 * (three ? 29 : 21));
        ck_assert_int_eq (memcmp (buf, three ? "PVS3" : "PVS1", 4), 0);
        char err[256] = "";
        piv_field_t *g = piv_field_decode (buf, size, err, sizeof err);
        ck_assert_msg (g != NULL, "%s", err);
        ck_assert_ptr_nonnull (g->sigma_u);
        ck_assert_int_eq (g->w != NULL, three);
        ck_assert_int_eq (memcmp (g->sigma_u, f->sigma_u, 20 * sizeof (float)), 0);
        ck_assert_int_eq (memcmp (g->sigma_v, f->sigma_v, 20 * sizeof (float)), 0);
        ck_assert_int_eq (memcmp (g->u, f->u, 20 * sizeof (float)), 0);
        piv_field_t *copy = piv_field_dup (g);
        ck_assert_int_eq (memcmp (copy->sigma_v, f->sigma_v, 20 * sizeof (float)), 0);
        piv_field_destroy (&copy);
        piv_field_destroy (&g);
        free (buf);
        // Without sigma: the layouts of before, decoded without it.
        free (f->sigma_u);
        free (f->sigma_v);
        f->sigma_u = f->sigma_v = NULL;
        ck_assert_int_eq (piv_field_encode (f, &buf, &size), 0);
        ck_assert_int_eq (memcmp (buf, three ? "PVF3" : "PVF1", 4), 0);
        ck_assert_int_eq (size, 32 + 20 * (three ? 21 : 13));
        g = piv_field_decode (buf, size, err, sizeof err);
        ck_assert_msg (g != NULL, "%s", err);
        ck_assert_ptr_null (g->sigma_u);
        // A sigma magic on a blob of the old size is refused.
        memcpy (buf, three ? "PVS3" : "PVS1", 4);
        ck_assert_ptr_null (piv_field_decode (buf, size, err, sizeof err));
        ck_assert_msg (strstr (err, "vectors need") != NULL, "%s", err);
        piv_field_destroy (&g);
        free (buf);
        piv_field_destroy (&f);
    }
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("uncertainty");
    TCase *engine = tcase_create ("engine");
    tcase_set_timeout (engine, 120);
    tcase_add_test (engine, a_field_has_no_sigma_unless_the_settings_ask_for_it);
    tcase_add_test (engine, sigma_grows_with_the_images_noise);
    tcase_add_test (engine, sigma_on_a_noise_free_uniform_shift_is_a_few_hundredths_of_a_pixel);
    tcase_add_test (engine, sigma_on_a_noisy_pair_says_the_actual_error_within_a_factor_of_two);
    tcase_add_test (engine, sigma_on_a_clean_sparse_pair_is_not_several_times_the_actual_error);
    tcase_add_test (engine, with_one_correlation_sigma_says_the_rms_error_within_ten_per_cent);
    tcase_add_test (engine, a_run_deformed_by_a_noisy_predictor_has_sigma_that_counts_the_predictor);
    tcase_add_test (engine, the_uncertainty_key_reads_back_and_a_bad_method_is_refused);
    tcase_add_test (engine, the_default_is_cs_unless_a_single_run);
    suite_add_tcase (suite, engine);
    TCase *files = tcase_create ("files");
    tcase_set_timeout (files, 120);
    tcase_add_test (files, pivfarm_piv_writes_sigma_u_and_sigma_v_as_its_last_named_columns);
    tcase_add_test (files, the_codec_carries_sigma_to_the_bit_and_old_fields_decode_without_it);
    tcase_add_test (files, a_pivfarm_piv_file_with_sigma_reads_back_to_the_same_rows);
    suite_add_tcase (suite, files);
    return suite;
}

int
main (void)
{
    // Plans made once for the forked tests (FFTW_PATIENT: a second without wisdom).
    piv_wisdom_load (piv_wisdom_default_path ());
    return tu_run_suite (s_suite ());
}
