// test_feedback.c — the feedback module: its settings as the operator
// types them, the figures over a region of interest, the PI controller and
// the JSON the broker publishes.

#include "agents/process.h"
#include "broker/feedback.h"
#include "common/config.h"
#include "common/jdoc.h"
#include "common/proto.h"
#include "common/util.h"
#include "piv/derived.h"
#include "piv/field.h"
#include "tests/testutil.h"

#include <check.h>
#include <czmq.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Frame k at 15 Hz, in whole ns: a 1/15 s step is 66666666 or 66666667 ns,
// so figures after a fraction of a second hold to 1e-9 (relative), and
// exactly at whole seconds.
#define FRAME_NS(k) ((int64_t) (k) * 1000000000 / 15)

static feedback_settings_t
s_settings (const char *line)
{
    feedback_settings_t s;
    feedback_settings_init (&s);
    char copy[512], *argv[16];
    int argc = 0;
    snprintf (copy, sizeof copy, "%s", line);
    for (char *t = strtok (copy, " "); t && argc < 16; t = strtok (NULL, " "))
        argv[argc++] = t;
    char err[256] = "";
    ck_assert_msg (feedback_settings_apply (&s, argc, argv, err, sizeof err) == 0, "'%s': %s",
                   line, err);
    return s;
}

// Setting 'kv' on defaults fails, and err holds each of the two words.
static void
s_refused (const char *kv, const char *word1, const char *word2)
{
    feedback_settings_t s, before;
    feedback_settings_init (&s);
    before = s;
    char err[256] = "";
    ck_assert_msg (feedback_settings_set (&s, kv, err, sizeof err) == -1, "'%s' accepted", kv);
    ck_assert_msg (memcmp (&s, &before, sizeof s) == 0, "'%s' changed the settings", kv);
    ck_assert_msg (strstr (err, word1) != NULL, "'%s': err '%s' lacks '%s'", kv, err, word1);
    ck_assert_msg (strstr (err, word2) != NULL, "'%s': err '%s' lacks '%s'", kv, err, word2);
}

// An nx * ny grid at x = 16 + 16 i, y = 16 + 16 j, all vectors valid and (u, v) = (0, 0).
static piv_field_t *
s_grid (int nx, int ny)
{
    piv_field_t *f = piv_field_new (nx, ny);
    ck_assert (f != NULL);
    f->step = 16;
    f->window = 32;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            f->x[j * nx + i] = 16 + 16 * i;
            f->y[j * nx + i] = 16 + 16 * j;
        }
    return f;
}

// feedback_figures with the farm's vorticity (piv_field_derive), as the
// broker computes them.
static void
s_figures (const piv_field_t *field, const feedback_settings_t *s, feedback_figures_t *f)
{
    float *w = malloc ((size_t) field->nx * field->ny * sizeof *w);
    ck_assert_ptr_nonnull (w);
    piv_field_derive (field, &(piv_derived_t){.vorticity = w});
    feedback_figures (field, w, s, NULL, f);
    free (w);
}

static void
s_contains (const char *json, const char *member)
{
    ck_assert_msg (strstr (json, member) != NULL, "'%s' not in %s", member, json);
}

START_TEST (defaults_are_off_over_the_whole_field_on_mean_u_and_unbounded)
{
    feedback_settings_t s;
    feedback_settings_init (&s);
    ck_assert_int_eq (s.enabled, 0);
    ck_assert_int_eq (s.roi_set, 0);
    ck_assert_int_eq (s.quantity, FEEDBACK_MEAN_U);
    ck_assert (s.setpoint == 0 && s.kp == 0 && s.ki == 0);
    ck_assert (s.out_min == -INFINITY && s.out_max == INFINITY);
    char err[64];
    ck_assert_int_eq (feedback_settings_check (&s, err, sizeof err), 0);
}
END_TEST

START_TEST (every_key_is_set_by_key_equals_value)
{
    feedback_settings_t s = s_settings ("roi=10,20.5,300,400 setpoint=1.25 kp=-0.5 ki=2e-3 "
                                        "out_min=-10 out_max=10 quantity=vorticity enabled=on");
    ck_assert_int_eq (s.roi_set, 1);
    ck_assert (s.roi[0] == 10 && s.roi[1] == 20.5 && s.roi[2] == 300 && s.roi[3] == 400);
    ck_assert (s.setpoint == 1.25 && s.kp == -0.5 && s.ki == 2e-3);
    ck_assert (s.out_min == -10 && s.out_max == 10);
    ck_assert_int_eq (s.quantity, FEEDBACK_VORTICITY);
    ck_assert_int_eq (s.enabled, 1);
    const char *names[] = {"mean_u", "mean_v", "mean_speed", "vorticity", "valid_fraction"};
    for (int q = 0; q < 5; q++) {
        char kv[64], err[128] = "";
        snprintf (kv, sizeof kv, "quantity=%s", names[q]);
        ck_assert_msg (feedback_settings_set (&s, kv, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq (s.quantity, q);
        ck_assert_str_eq (feedback_quantity_name (s.quantity), names[q]);
    }
    char err[128] = "";
    ck_assert_int_eq (feedback_settings_set (&s, "roi=all", err, sizeof err), 0);
    ck_assert_int_eq (s.roi_set, 0);
    ck_assert_int_eq (feedback_settings_set (&s, "out_max=inf", err, sizeof err), 0);
    ck_assert (s.out_max == INFINITY);
    ck_assert_int_eq (feedback_settings_set (&s, "out_min=-inf", err, sizeof err), 0);
    ck_assert (s.out_min == -INFINITY);
    ck_assert_int_eq (feedback_settings_set (&s, "enabled=off", err, sizeof err), 0);
    ck_assert_int_eq (s.enabled, 0);
}
END_TEST

START_TEST (bad_numbers_are_refused_naming_key_and_value)
{
    s_refused ("kp=abc", "'kp'", "'abc'");
    s_refused ("ki=1.5x", "'ki'", "'1.5x'");
    s_refused ("setpoint=", "'setpoint'", "''");
    s_refused ("kp=nan", "'kp'", "'nan'");
    s_refused ("ki=inf", "'ki'", "'inf'");
    s_refused ("setpoint=1e999", "'setpoint'", "'1e999'");
    s_refused ("out_max=nan", "'out_max'", "'nan'");
    s_refused ("out_min=inf", "out_min", "inf");
    s_refused ("out_max=-inf", "out_max", "inf");
    s_refused ("quantity=speed", "'quantity'", "'speed'");
    s_refused ("enabled=yes", "'enabled'", "'yes'");
}
END_TEST

START_TEST (an_unknown_key_or_a_word_without_equals_is_refused_by_name)
{
    s_refused ("gain=3", "unknown", "'gain'");
    s_refused ("kp", "'kp'", "key=value");
    s_refused ("=3", "'=3'", "key=value");
}
END_TEST

START_TEST (a_roi_needs_four_finite_numbers_in_order)
{
    s_refused ("roi=1,2,3", "'roi'", "'1,2,3'");
    s_refused ("roi=1,2,3,4,5", "'roi'", "'1,2,3,4,5'");
    s_refused ("roi=1,,3,4", "'roi'", "'1,,3,4'");
    s_refused ("roi=1,2,inf,4", "'roi'", "'1,2,inf,4'");
    s_refused ("roi=none", "'roi'", "'none'");
    s_refused ("roi=30,0,10,50", "roi", "x0 <= x1");
    s_refused ("roi=0,50,10,40", "roi", "y0 <= y1");
    feedback_settings_t s = s_settings ("roi=5,5,5,5");  // a single point is a box
    ck_assert_int_eq (s.roi_set, 1);
}
END_TEST

START_TEST (apply_changes_all_or_nothing)
{
    feedback_settings_t s = s_settings ("kp=1 ki=2 out_min=0 out_max=1");
    feedback_settings_t before = s;
    char *bad[] = {"kp=5", "setpoint=3", "ki=oops", "quantity=mean_v"};
    char err[256] = "";
    ck_assert_int_eq (feedback_settings_apply (&s, 4, bad, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "'ki'") && strstr (err, "'oops'"), "%s", err);
    ck_assert (memcmp (&s, &before, sizeof s) == 0);

    // Each value is fine alone; together they contradict: refused whole.
    char *crossed[] = {"kp=5", "out_min=3"};
    ck_assert_int_eq (feedback_settings_apply (&s, 2, crossed, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "out_min") && strstr (err, "out_max"), "%s", err);
    ck_assert (memcmp (&s, &before, sizeof s) == 0);

    // Moving both limits past the old ones works in one apply, in any order.
    char *moved[] = {"out_min=5", "out_max=9"};
    ck_assert_msg (feedback_settings_apply (&s, 2, moved, err, sizeof err) == 0, "%s", err);
    ck_assert (s.out_min == 5 && s.out_max == 9);
    // ... but not one at a time through set.
    ck_assert_int_eq (feedback_settings_set (&s, "out_min=10", err, sizeof err), -1);
    ck_assert (s.out_min == 5);
}
END_TEST

START_TEST (formatted_settings_apply_back_to_the_same_settings)
{
    feedback_settings_t cases[3];
    cases[0] = s_settings ("roi=0.1,16,1023.75,2000 quantity=mean_speed setpoint=0.1 "
                           "kp=-0.3333333333333333 ki=1e-7 out_min=-2.5 out_max=7 enabled=on");
    cases[1] = s_settings ("quantity=valid_fraction setpoint=0.95");
    feedback_settings_init (&cases[2]);
    cases[2].setpoint = 1.0 / 3;
    cases[2].kp = 2.0 / 7;
    for (int c = 0; c < 3; c++) {
        char text[512];
        int len = feedback_settings_format (&cases[c], text, sizeof text);
        ck_assert_int_eq (len, (int) strlen (text));
        feedback_settings_t back = s_settings ("kp=99 out_min=-1 out_max=1 roi=1,1,2,2");
        char *argv[16];
        int argc = 0;
        for (char *t = strtok (text, " "); t; t = strtok (NULL, " "))
            argv[argc++] = t;
        char err[256] = "";
        ck_assert_msg (feedback_settings_apply (&back, argc, argv, err, sizeof err) == 0, "%s",
                       err);
        ck_assert_int_eq (back.enabled, cases[c].enabled);
        ck_assert_int_eq (back.roi_set, cases[c].roi_set);
        if (back.roi_set)
            ck_assert (memcmp (back.roi, cases[c].roi, sizeof back.roi) == 0);
        ck_assert_int_eq (back.quantity, cases[c].quantity);
        ck_assert (back.setpoint == cases[c].setpoint && back.kp == cases[c].kp
                   && back.ki == cases[c].ki);
        ck_assert (back.out_min == cases[c].out_min && back.out_max == cases[c].out_max);
    }
    char small[16];
    ck_assert_int_eq (feedback_settings_format (&cases[0], small, sizeof small), -1);
}
END_TEST

START_TEST (settings_json_has_every_member_of_f_with_nulls_for_what_does_not_exist)
{
    feedback_settings_t s = s_settings ("setpoint=1.5 kp=0.25 ki=2 out_max=3");
    char json[1024];
    int len = feedback_settings_json (&s, NULL, json, sizeof json);
    ck_assert_int_eq (len, (int) strlen (json));
    ck_assert_str_eq (json, "{\"enabled\":false,\"roi\":null,\"roi_units\":null,\"quantity\":\"mean_u\","
                            "\"setpoint\":1.5,\"kp\":0.25,\"ki\":2,\"out_min\":null,"
                            "\"out_max\":3,\"output\":null,\"integral\":null}");
    feedback_pi_t pi;
    feedback_pi_reset (&pi);
    feedback_settings_json (&s, &pi, json, sizeof json);
    s_contains (json, "\"output\":null,\"integral\":null}");

    ck_assert (feedback_settings_set (&s, "roi=0,8,64.5,128", json, sizeof json) == 0);
    ck_assert (feedback_settings_set (&s, "enabled=on", json, sizeof json) == 0);
    feedback_pi_step (&pi, &s, 0.5, 0);  // e = 1: output 0.25
    feedback_settings_json (&s, &pi, json, sizeof json);
    s_contains (json, "\"enabled\":true,");
    s_contains (json, "\"roi\":[0,8,64.5,128],\"roi_units\":\"px\",");
    s_contains (json, "\"output\":0.25,\"integral\":0}");
    ck_assert_int_eq (feedback_settings_json (&s, &pi, json, 40), -1);
}
END_TEST

START_TEST (the_stream_message_has_every_member_escaped_and_nulls)
{
    feedback_settings_t s = s_settings ("quantity=mean_v setpoint=-0.5 roi=0,0,100,50");
    feedback_figures_t f = {.n = 3,
                            .total = 4,
                            .mean_u = 1.0 / 3,
                            .mean_v = -0.25,
                            .mean_speed = 2,
                            .vorticity = NAN,
                            .valid_fraction = 0.75};
    feedback_message_t m = {.experiment = "run \"7\"\\a\n",
                            .pair = 1234567890123,
                            .stem = "x_0001\x01",
                            .closed_ns = 1700000000000000000,
                            .dispatched_ns = 1700000000010000000,
                            .computed_ns = 1700000000020000000,
                            .published_ns = 1700000000021500000,
                            .settings = &s,
                            .figures = &f,
                            .output = 4};
    char json[2048];
    int len = feedback_message_json (&m, json, sizeof json);
    ck_assert_int_eq (len, (int) strlen (json));
    ck_assert_msg (json[0] == '{' && json[len - 1] == '}', "%s", json);
    s_contains (json, "{\"experiment\":\"run \\\"7\\\"\\\\a\\n\",");
    s_contains (json, "\"pair\":1234567890123,\"stem\":\"x_0001\\u0001\",");
    s_contains (json, "\"closed_ns\":1700000000000000000,");
    s_contains (json, "\"dispatched_ns\":1700000000010000000,");
    s_contains (json, "\"computed_ns\":1700000000020000000,");
    s_contains (json, "\"published_ns\":1700000000021500000,");
    s_contains (json, "\"latency_ms\":21.5,");
    s_contains (json, "\"roi\":[0,0,100,50],\"roi_units\":\"px\",");
    s_contains (json, "\"n\":3,");
    s_contains (json, "\"mean_u\":0.333333333,");
    s_contains (json, "\"mean_v\":-0.25,");
    s_contains (json, "\"mean_speed\":2,");
    s_contains (json, "\"vorticity\":null,");
    s_contains (json, "\"valid_fraction\":0.75,");
    s_contains (json, "\"quantity\":\"mean_v\",");
    s_contains (json, "\"value\":-0.25,\"sigma\":null,\"units\":");
    ck_assert_msg (strstr (json, "uncertainty") == NULL, "%s", json); // a field without sigma
    s_contains (json, "\"enabled\":false,");
    s_contains (json, "\"setpoint\":-0.5,");
    s_contains (json, "\"output\":null}");  // disabled: no output, whatever was passed

    s.enabled = 1;
    s.roi_set = 0;
    s.quantity = FEEDBACK_VORTICITY;
    feedback_message_json (&m, json, sizeof json);
    s_contains (json, "\"roi\":null,\"roi_units\":null,");
    s_contains (json, "\"value\":null,");
    s_contains (json, "\"enabled\":true,");
    s_contains (json, "\"output\":4}");
    m.output = NAN;
    len = feedback_message_json (&m, json, sizeof json);
    s_contains (json, "\"output\":null}");

    // A field with sigma: the value's beside it, every mean's in "uncertainty".
    f.has_sigma = 1;
    f.sigma_mean_u = 0.125;
    f.sigma_mean_v = 0.0625;
    f.sigma_mean_speed = 0.25;
    f.sigma_vorticity = NAN;
    s.quantity = FEEDBACK_MEAN_V;
    feedback_message_json (&m, json, sizeof json);
    s_contains (json, "\"value\":-0.25,\"sigma\":0.0625,\"uncertainty\":{\"mean_u\":0.125,"
                      "\"mean_v\":0.0625,\"mean_speed\":0.25,\"vorticity\":null},\"units\":");
    len = feedback_message_json (&m, json, sizeof json);
    ck_assert_int_eq (feedback_message_json (&m, json, (size_t) len), -1);
    ck_assert_int_eq (feedback_message_json (&m, json, 0), -1);
}
END_TEST

START_TEST (a_uniform_field_has_exact_means_and_no_vorticity)
{
    piv_field_t *field = s_grid (9, 7);
    for (int k = 0; k < 9 * 7; k++) {
        field->u[k] = 2;
        field->v[k] = -1;
    }
    feedback_settings_t s;
    feedback_settings_init (&s);
    feedback_figures_t f;
    s_figures (field, &s, &f);
    ck_assert_int_eq (f.n, 63);
    ck_assert_int_eq (f.total, 63);
    ck_assert (f.mean_u == 2);
    ck_assert (f.mean_v == -1);
    ck_assert_double_eq_tol (f.mean_speed, sqrt (5), 1e-12);
    ck_assert (f.vorticity == 0);
    ck_assert (f.valid_fraction == 1);
    ck_assert (feedback_value (&f, FEEDBACK_MEAN_V) == -1);
    ck_assert (feedback_value (&f, FEEDBACK_VALID_FRACTION) == 1);
    piv_field_destroy (&field);
}
END_TEST

// The uncertainty of a mean as the test computes it by brute force over
// every pair of vectors: sum_l sum_m rho_lm a_l a_m s_l s_m, rho the share
// of window area the two have in common.
static double
s_brute_variance (const piv_field_t *f, const double *a, const double *sigma)
{
    int n = f->nx * f->ny;
    double sum = 0;
    for (int l = 0; l < n; l++)
        for (int m = 0; m < n; m++) {
            if (!a[l] || !a[m])
                continue;
            double rx = 1 - fabs (f->x[l] - f->x[m]) / f->window;
            double ry = 1 - fabs (f->y[l] - f->y[m]) / f->window;
            if (rx > 0 && ry > 0)
                sum += rx * ry * a[l] * a[m] * sigma[l] * sigma[m];
        }
    return sum;
}

// Each vector's sigma_u, sigma_v into su, sv, those without one (NaN) the
// RMS of the valid vectors' (as feedback_sigma counts them).
static void
s_known_sigmas (const piv_field_t *field, double *su, double *sv)
{
    int n = field->nx * field->ny, known = 0;
    double su2 = 0, sv2 = 0;
    for (int k = 0; k < n; k++)
        if (field->flags[k] == PIV_FLAG_VALID && !isnan (field->sigma_u[k])) {
            su2 += (double) field->sigma_u[k] * field->sigma_u[k];
            sv2 += (double) field->sigma_v[k] * field->sigma_v[k];
            known++;
        }
    for (int k = 0; k < n; k++) {
        su[k] = isnan (field->sigma_u[k]) ? sqrt (su2 / known) : field->sigma_u[k];
        sv[k] = isnan (field->sigma_v[k]) ? sqrt (sv2 / known) : field->sigma_v[k];
    }
}

// Every mean of a field with sigma comes with its uncertainty: for a
// uniform sigma and no overlap, sigma / sqrt (n) exactly; at 50 % overlap
// neighbours share a quarter to half their windows and the mean's sigma
// grows towards 2 sigma / sqrt (n); with sigmas varying, vectors without
// one (RMS of the valid ones') and holes, each figure is the brute-force
// sum over every pair, the vorticity's through its stencils' weights.
START_TEST (each_mean_comes_with_its_uncertainty_counting_shared_window_area)
{
    piv_field_t *field = s_grid (12, 10);
    int n = 12 * 10;
    for (int k = 0; k < n; k++) {
        field->u[k] = (float) (0.5 + 0.01 * (k % 11));
        field->v[k] = (float) (-0.25 + 0.02 * (k % 5));
    }
    feedback_settings_t s = s_settings ("roi=40,40,150,130 quantity=mean_speed");
    feedback_figures_t f;
    s_figures (field, &s, &f);
    ck_assert (!f.has_sigma && isnan (f.sigma_mean_u) && isnan (feedback_sigma (&f, s.quantity)));
    ck_assert_int_eq (piv_field_add_sigma (field), 0);
    for (int k = 0; k < n; k++)
        field->sigma_u[k] = field->sigma_v[k] = 0.1f;
    field->window = 16; // no overlap: independent vectors
    s_figures (field, &s, &f);
    ck_assert_int_eq (f.n, 7 * 6);
    ck_assert (f.has_sigma);
    ck_assert_double_eq_tol (f.sigma_mean_u, 0.1 / sqrt (42), 1e-9);
    ck_assert_double_eq_tol (f.sigma_mean_v, 0.1 / sqrt (42), 1e-9);
    ck_assert_double_eq_tol (f.sigma_mean_speed, 0.1 / sqrt (42), 1e-7);
    double alone = f.sigma_mean_u;
    field->window = 32; // 50 % overlap
    s_figures (field, &s, &f);
    fprintf (stderr, "mean of 7 x 6 vectors, sigma 0.1 px: %.5f px alone, %.5f px at 50 %% "
                     "overlap (x %.3f)\n", alone, f.sigma_mean_u, f.sigma_mean_u / alone);
    ck_assert (f.sigma_mean_u > 1.5 * alone && f.sigma_mean_u < 2 * alone);

    // Sigmas that vary, two vectors without one, a hole.
    for (int k = 0; k < n; k++) {
        field->sigma_u[k] = (float) (0.03 + 0.004 * (k % 13));
        field->sigma_v[k] = (float) (0.08 - 0.003 * (k % 7));
    }
    int hole = 4 * 12 + 5, replaced = 5 * 12 + 6, lost = 6 * 12 + 4;
    field->flags[hole] = PIV_FLAG_INVALID;
    field->flags[replaced] = PIV_FLAG_REPLACED;
    field->sigma_u[hole] = field->sigma_v[hole] = NAN;
    field->sigma_u[replaced] = field->sigma_v[replaced] = NAN;
    field->sigma_u[lost] = field->sigma_v[lost] = NAN; // valid, no peak of its own
    float *w = malloc (sizeof (float) * (size_t) n);
    piv_field_derive (field, &(piv_derived_t){.vorticity = w});
    feedback_figures (field, w, &s, NULL, &f);
    double su[120], sv[120], a[120], b[120], c[120], cu[120], cv[120];
    int nvort = 0;
    s_known_sigmas (field, su, sv);
    for (int k = 0; k < n; k++) {
        int in = field->flags[k] == PIV_FLAG_VALID && field->x[k] >= 40 && field->x[k] <= 150
                 && field->y[k] >= 40 && field->y[k] <= 130;
        double speed = hypot (field->u[k], field->v[k]);
        a[k] = in ? 1.0 / f.n : 0;
        b[k] = in ? field->u[k] / speed / f.n : 0;
        c[k] = in ? field->v[k] / speed / f.n : 0;
        nvort += in && isfinite (w[k]);
    }
    ck_assert_int_eq (f.n, 7 * 6 - 2);
    ck_assert_double_eq_tol (f.sigma_mean_u, sqrt (s_brute_variance (field, a, su)), 1e-12);
    ck_assert_double_eq_tol (f.sigma_mean_v, sqrt (s_brute_variance (field, a, sv)), 1e-12);
    ck_assert_double_eq_tol (
        f.sigma_mean_speed,
        sqrt (s_brute_variance (field, b, su) + s_brute_variance (field, c, sv)), 1e-12);
    for (int k = 0; k < n; k++)
        a[k] = a[k] && isfinite (w[k]) ? 1.0 / nvort : 0;
    ck_assert_int_eq (piv_field_vorticity_coefficients (field, PIV_STENCIL_DEFAULT, a, cu, cv), 0);
    double want = sqrt (s_brute_variance (field, cu, su) + s_brute_variance (field, cv, sv));
    ck_assert_msg (fabs (f.sigma_vorticity - want) < 1e-12, "%.9g, brute force %.9g 1/frame",
                   f.sigma_vorticity, want);
    ck_assert (feedback_sigma (&f, FEEDBACK_MEAN_SPEED) == f.sigma_mean_speed);
    ck_assert (isnan (feedback_sigma (&f, FEEDBACK_VALID_FRACTION)));
    // Calibrated: spreads scale, never flip (y up turns mean_v and the vorticity).
    piv_calib_t cal;
    ck_assert_int_eq (piv_calib_parse ("scale=0.02mm/px dt=2ms y_axis=up", &cal, NULL, 0), 0);
    feedback_figures_t g = f;
    feedback_figures_calibrate (&g, &cal);
    ck_assert_double_eq_tol (g.sigma_mean_v, f.sigma_mean_v * 0.01, 1e-12);
    ck_assert_double_eq_tol (g.sigma_vorticity, f.sigma_vorticity * 500, 1e-9);
    free (w);
    piv_field_destroy (&field);
}
END_TEST

START_TEST (solid_body_rotation_has_vorticity_twice_its_rate)
{
    piv_field_t *field = s_grid (12, 10);
    const double w = 1.0 / 64;  // rad per frame; exact in float
    for (int k = 0; k < 12 * 10; k++) {
        field->u[k] = (float) (-w * (field->y[k] - 80));
        field->v[k] = (float) (w * (field->x[k] - 96));
    }
    feedback_settings_t s = s_settings ("roi=48,48,144,128 quantity=vorticity");
    feedback_figures_t f;
    s_figures (field, &s, &f);
    ck_assert_int_eq (f.n, 7 * 6);
    ck_assert_double_eq_tol (f.vorticity, 2 * w, 1e-9);
    ck_assert_double_eq_tol (feedback_value (&f, s.quantity), 2 * w, 1e-9);
    // Linear in x and y: the one-sided differences at the edges agree.
    feedback_settings_init (&s);
    s_figures (field, &s, &f);
    ck_assert_double_eq_tol (f.vorticity, 2 * w, 1e-9);
    // The sign follows the rotation.
    for (int k = 0; k < 12 * 10; k++) {
        field->u[k] = -field->u[k];
        field->v[k] = -field->v[k];
    }
    s_figures (field, &s, &f);
    ck_assert_double_eq_tol (f.vorticity, -2 * w, 1e-9);
    piv_field_destroy (&field);
}
END_TEST

START_TEST (the_roi_selects_the_vectors_inside_its_box_edges_included)
{
    piv_field_t *field = s_grid (8, 8);
    for (int k = 0; k < 64; k++) {
        field->u[k] = field->x[k];  // 16, 32, ...
        field->v[k] = field->y[k];
    }
    // Columns x = 32, 48, 64 and rows y = 48, 64: the box edges sit on
    // vector positions.
    feedback_settings_t s = s_settings ("roi=32,48,64,64");
    feedback_figures_t f;
    s_figures (field, &s, &f);
    ck_assert_int_eq (f.total, 6);
    ck_assert_int_eq (f.n, 6);
    ck_assert (f.mean_u == 48);
    ck_assert (f.mean_v == 56);
    ck_assert (f.valid_fraction == 1);
    // Shear u = x, v = y has no vorticity, even on the box's edge points
    // whose central stencils reach outside it.
    ck_assert (f.vorticity == 0);
    piv_field_destroy (&field);
}
END_TEST

START_TEST (flagged_vectors_count_in_total_only_and_invalid_ones_stay_out_of_the_stencils)
{
    piv_field_t *field = s_grid (6, 6);
    const double a = 0.125;
    for (int k = 0; k < 36; k++) {
        field->u[k] = (float) (a * field->y[k]);  // shear: vorticity -a
        field->v[k] = 0;
    }
    field->u[2 * 6 + 2] = 1000;  // an outlier flagged invalid
    field->flags[2 * 6 + 2] = PIV_FLAG_INVALID;
    // A replaced vector (the validator's interpolation) is out of the means
    // but data for the farm's stencil (piv/derived.h): it holds the value
    // interpolated, here the exact one.
    field->u[4 * 6 + 4] = (float) (a * field->y[4 * 6 + 4]);
    field->flags[4 * 6 + 4] = PIV_FLAG_REPLACED;
    feedback_settings_t s;
    feedback_settings_init (&s);
    feedback_figures_t f;
    s_figures (field, &s, &f);
    ck_assert_int_eq (f.total, 36);
    ck_assert_int_eq (f.n, 34);
    ck_assert_double_eq_tol (f.valid_fraction, 34.0 / 36, 1e-15);
    double sum = 0;
    for (int k = 0; k < 36; k++)
        if (field->flags[k] == PIV_FLAG_VALID)
            sum += field->u[k];
    ck_assert_double_eq_tol (f.mean_u, sum / 34, 1e-12);
    ck_assert (f.mean_v == 0);
    // Had a stencil used the outlier, the mean would be far from -a.
    ck_assert_double_eq_tol (f.vorticity, -a, 1e-12);
    piv_field_destroy (&field);
}
END_TEST

// One vorticity (doc/control.md): the mean vorticity of the agent's RESULT
// is the feedback's over the whole field, on a real pair processed by the
// agent's own code. The field has replaced and invalid vectors, so the
// rule for holes shows (125x125 vectors, 620 replaced, 525 invalid): the
// agent's former figure (central differences over every interior vector
// whose four neighbours were not invalid) was 5.119e-4 1/frame here, the
// feedback's 5.920e-4.
START_TEST (the_agents_vorticity_figure_is_the_feedbacks_on_a_real_field)
{
    char dir[4096], conf[4096], err[1024] = "", a[4096], b[4096];
    snprintf (dir, sizeof dir, "%s", tu_tmpdir ());
    snprintf (conf, sizeof conf, "%s", tu_path (dir, "pivfarm.conf"));
    const char *text = "agent\n    processor = piv\n    results = ./results\n";
    tu_spit (conf, text, strlen (text));
    config_t cfg;
    ck_assert_msg (config_load (&cfg, conf, err, sizeof err) == 0, "%s", err);
    process_t *p = process_new (&cfg, err, sizeof err);
    ck_assert_msg (p != NULL, "%s", err);
    snprintf (a, sizeof a, "%s", tu_data ("2image_00.tif"));
    snprintf (b, sizeof b, "%s", tu_data ("2image_01.tif"));
    proto_msg_t task = {.command = PROTO_TASK,
                        .pair = 1,
                        .attempt = 1,
                        .experiment = "run",
                        .path_a = a,
                        .path_b = b,
                        .settings = "passes=32,16 overlap=50 iterations=1",
                        .output = "run/0001.txt"},
                result;
    ck_assert_msg (process_task (p, &task, &result, err, sizeof err) == 0, "%s", err);
    piv_field_t *field = piv_field_decode (result.blob, result.blob_size, err, sizeof err);
    ck_assert_msg (field != NULL, "%s", err);
    int flagged[3] = {0, 0, 0};
    for (int k = 0; k < field->nx * field->ny; k++)
        flagged[field->flags[k]]++;
    ck_assert (flagged[PIV_FLAG_REPLACED] > 0 && flagged[PIV_FLAG_INVALID] > 0);
    feedback_settings_t s;
    feedback_settings_init (&s);
    feedback_figures_t f;
    s_figures (field, &s, &f);
    double agent = result.figures[PROTO_FIG_VORTICITY];
    fprintf (stderr, "%dx%d vectors, %d replaced, %d invalid: vorticity %.9g 1/frame\n",
             field->nx, field->ny, flagged[PIV_FLAG_REPLACED], flagged[PIV_FLAG_INVALID], agent);
    ck_assert (isfinite (f.vorticity) && f.vorticity != 0);
    ck_assert_msg (agent == f.vorticity, "agent %.17g, feedback %.17g", agent, f.vorticity);
    piv_field_destroy (&field);
    proto_msg_release (&result);
    process_destroy (&p);
    tu_rmtree (dir);
}
END_TEST

START_TEST (an_roi_without_valid_vectors_gives_no_figures)
{
    piv_field_t *field = s_grid (4, 4);
    feedback_settings_t s = s_settings ("roi=17,17,31,31");  // between grid points
    feedback_figures_t f;
    s_figures (field, &s, &f);
    ck_assert_int_eq (f.n, 0);
    ck_assert_int_eq (f.total, 0);
    ck_assert (isnan (f.mean_u) && isnan (f.mean_v) && isnan (f.mean_speed));
    ck_assert (isnan (f.vorticity) && isnan (f.valid_fraction));
    // One vector inside, flagged: counted in total, valid fraction 0.
    field->flags[1 * 4 + 1] = PIV_FLAG_INVALID;
    feedback_settings_set (&s, "roi=32,32,32,32", NULL, 0);
    s_figures (field, &s, &f);
    ck_assert_int_eq (f.n, 0);
    ck_assert_int_eq (f.total, 1);
    ck_assert (f.valid_fraction == 0);
    ck_assert (isnan (f.mean_u) && isnan (f.vorticity));
    ck_assert (isnan (feedback_value (&f, FEEDBACK_MEAN_U)));
    piv_field_destroy (&field);
}
END_TEST

START_TEST (proportional_only_outputs_kp_times_the_error_at_once)
{
    feedback_settings_t s = s_settings ("setpoint=3 kp=0.5");
    feedback_pi_t pi;
    feedback_pi_reset (&pi);
    for (int k = 0; k < 10; k++) {
        double out = feedback_pi_step (&pi, &s, 1, FRAME_NS (k));
        ck_assert (out == 1);  // 0.5 * (3 - 1), from the very first step
        ck_assert (pi.integral == 0);
    }
    ck_assert (pi.started && pi.output == 1 && pi.last_ns == FRAME_NS (9));
}
END_TEST

START_TEST (integral_only_grows_linearly_with_frame_time)
{
    feedback_settings_t s = s_settings ("setpoint=3 ki=0.5");  // e = 2: 1 per second
    feedback_pi_t pi;
    feedback_pi_reset (&pi);
    ck_assert (feedback_pi_step (&pi, &s, 1, FRAME_NS (0)) == 0);  // dt 0 at the first step
    double out = 0;
    for (int k = 1; k <= 3; k++)
        out = feedback_pi_step (&pi, &s, 1, FRAME_NS (k));
    ck_assert_double_eq_tol (out, 0.2, 1e-12);
    ck_assert_double_eq_tol (pi.integral, 0.2, 1e-12);
    for (int k = 4; k <= 15; k++)
        out = feedback_pi_step (&pi, &s, 1, FRAME_NS (k));
    ck_assert_double_eq_tol (out, 1.0, 1e-12);
    // A gap of 2 s (frames dropped) counts as 2 s.
    out = feedback_pi_step (&pi, &s, 1, FRAME_NS (45));
    ck_assert_double_eq_tol (out, 3.0, 1e-12);
}
END_TEST

START_TEST (a_step_in_setpoint_moves_the_output_without_losing_the_integral)
{
    feedback_settings_t s = s_settings ("setpoint=1 kp=2 ki=3");
    feedback_pi_t pi;
    feedback_pi_reset (&pi);
    for (int k = 0; k <= 15; k++)
        feedback_pi_step (&pi, &s, 0.5, FRAME_NS (k));  // e = 0.5 for 1 s
    ck_assert_double_eq_tol (pi.integral, 1.5, 1e-12);
    ck_assert_double_eq_tol (pi.output, 2.5, 1e-12);
    char err[128];
    ck_assert (feedback_settings_set (&s, "setpoint=2", err, sizeof err) == 0);
    double out = feedback_pi_step (&pi, &s, 0.5, FRAME_NS (16));  // e = 1.5
    ck_assert_double_eq_tol (out, 2 * 1.5 + 1.5 + 3 * 1.5 / 15, 1e-8);
    ck_assert (feedback_settings_set (&s, "setpoint=0.5", err, sizeof err) == 0);
    out = feedback_pi_step (&pi, &s, 0.5, FRAME_NS (17));  // e = 0: holds the integral
    ck_assert_double_eq_tol (out, 1.5 + 0.3, 1e-8);
}
END_TEST

START_TEST (saturation_stops_the_integral_so_a_sign_change_leaves_the_limit_at_once)
{
    feedback_settings_t s = s_settings ("setpoint=1 ki=1 out_min=-0.5 out_max=0.5");
    feedback_pi_t pi;
    feedback_pi_reset (&pi);
    double out = 0;
    for (int k = 0; k <= 7; k++)  // e = 1: 7/15 in 7 frames, under the limit
        out = feedback_pi_step (&pi, &s, 0, FRAME_NS (k));
    ck_assert_double_eq_tol (out, 7.0 / 15, 1e-9);
    for (int k = 8; k <= 60; k++) {  // saturated for over 3 s
        out = feedback_pi_step (&pi, &s, 0, FRAME_NS (k));
        ck_assert (out == 0.5);
        ck_assert (pi.integral == 0.5);  // stopped on the limit, not 4 s worth
    }
    // The error turns negative: the output leaves the limit with this step.
    out = feedback_pi_step (&pi, &s, 1.1, FRAME_NS (61));
    ck_assert_double_eq_tol (out, 0.5 - 0.1 / 15, 1e-9);

    // With a proportional term the limit holds kp*e + integral; below too.
    s = s_settings ("setpoint=0 kp=1 ki=1 out_min=-0.5 out_max=0.5");
    feedback_pi_reset (&pi);
    for (int k = 0; k <= 30; k++)
        out = feedback_pi_step (&pi, &s, 0.25, FRAME_NS (k));  // e = -0.25
    ck_assert (out == -0.5);
    ck_assert_double_eq_tol (pi.integral, -0.25, 1e-12);
    out = feedback_pi_step (&pi, &s, -0.125, FRAME_NS (31));  // e = +0.125
    ck_assert_double_eq_tol (out, 0.125 - 0.25 + 0.125 / 15, 1e-9);
    ck_assert (out > -0.5);
}
END_TEST

START_TEST (a_proportional_kick_into_the_limit_keeps_the_integral)
{
    feedback_settings_t s = s_settings ("setpoint=1 kp=1 ki=1 out_max=2");
    feedback_pi_t pi;
    feedback_pi_reset (&pi);
    for (int k = 0; k <= 15; k++)
        feedback_pi_step (&pi, &s, 0.5, FRAME_NS (k));  // integral 0.5
    ck_assert_double_eq_tol (pi.integral, 0.5, 1e-12);
    char err[128];
    ck_assert (feedback_settings_set (&s, "setpoint=10", err, sizeof err) == 0);
    double out = feedback_pi_step (&pi, &s, 0.5, FRAME_NS (16));  // kp*e = 9.5 alone
    ck_assert (out == 2);
    ck_assert_double_eq_tol (pi.integral, 0.5, 1e-12);  // frozen, not pulled to 2 - 9.5
}
END_TEST

START_TEST (a_missing_value_or_a_late_frame_time_changes_nothing_it_should_not)
{
    feedback_settings_t s = s_settings ("setpoint=1 kp=1 ki=1");
    feedback_pi_t pi, before;
    feedback_pi_reset (&pi);
    ck_assert (isnan (feedback_pi_step (&pi, &s, NAN, FRAME_NS (0))));
    ck_assert_int_eq (pi.started, 0);  // still no output for F
    feedback_pi_step (&pi, &s, 0, FRAME_NS (15));  // the first step: dt 0
    ck_assert (pi.output == 1 && pi.integral == 0);
    before = pi;
    ck_assert (isnan (feedback_pi_step (&pi, &s, NAN, FRAME_NS (30))));
    ck_assert (isnan (feedback_pi_step (&pi, &s, INFINITY, FRAME_NS (30))));
    // Member by member: memcmp would read the padding after 'started'.
    ck_assert (pi.started == before.started && pi.last_ns == before.last_ns
               && pi.integral == before.integral && pi.output == before.output);
    // A result from an earlier frame arriving late: dt 0, the latest time kept.
    double out = feedback_pi_step (&pi, &s, 0, FRAME_NS (7));
    ck_assert (out == 1 && pi.integral == 0 && pi.last_ns == FRAME_NS (15));
    out = feedback_pi_step (&pi, &s, 0, FRAME_NS (30));  // 1 s after frame 15
    ck_assert_double_eq_tol (out, 2.0, 1e-12);
}
END_TEST

START_TEST (an_unknown_camera_time_gives_no_latency_and_a_replay_is_marked)
{
    feedback_settings_t s = s_settings ("quantity=mean_u");
    feedback_figures_t f = {.n = 1, .total = 1, .mean_u = 2, .valid_fraction = 1};
    feedback_message_t m = {.experiment = "run8",
                            .pair = 7,
                            .stem = "x_0007",
                            .closed_ns = 0,  // a pair whose frame time is not known
                            .dispatched_ns = 1796116330000000000,
                            .computed_ns = 1796116330100000000,
                            .published_ns = 1796116330200000000,
                            .settings = &s,
                            .figures = &f,
                            .output = NAN};
    char json[2048], replayed[2048];
    ck_assert (feedback_message_json (&m, json, sizeof json) > 0);
    s_contains (json, "{\"experiment\":\"run8\",\"replay\":false,\"source\":null,\"pair\":7,");
    s_contains (json, "\"closed_ns\":null,");
    s_contains (json, "\"latency_ms\":null,");  // not 1796116330200 ms since the epoch

    // A feedback-only replay re-publishes it under its own name, marked.
    m.closed_ns = 1796116330000000000;
    ck_assert (feedback_message_json (&m, json, sizeof json) > 0);
    int len = feedback_message_replayed (json, "run8.replay1", replayed, sizeof replayed);
    ck_assert_int_eq (len, (int) strlen (replayed));
    s_contains (replayed, "{\"experiment\":\"run8.replay1\",\"replay\":true,\"source\":\"run8\","
                          "\"pair\":7,\"stem\":\"x_0007\",\"closed_ns\":1796116330000000000,");
    s_contains (replayed, "\"latency_ms\":200,");  // its recorded times kept
    ck_assert_ptr_null (strstr (replayed, "\"replay\":false"));
    // A replay of the replay keeps the first source.
    char twice[2048];
    ck_assert (feedback_message_replayed (replayed, "r2", twice, sizeof twice) > 0);
    s_contains (twice, "{\"experiment\":\"r2\",\"replay\":true,\"source\":\"run8\",\"pair\":7,");
    // A message recorded before replays were marked gets the mark too.
    ck_assert (feedback_message_replayed ("{\"experiment\":\"a\\\"b\",\"pair\":1}", "c", twice,
                                          sizeof twice)
               > 0);
    ck_assert_str_eq (twice, "{\"experiment\":\"c\",\"replay\":true,\"source\":\"a\\\"b\",\"pair\":1}");
    ck_assert_int_eq (feedback_message_replayed ("{\"pair\":1}", "c", twice, sizeof twice), -1);
    ck_assert_int_eq (feedback_message_replayed (json, "c", twice, 10), -1);
}
END_TEST

START_TEST (an_unknown_quantity_is_refused_naming_every_quantity_of_the_table)
{
    feedback_settings_t s;
    feedback_settings_init (&s);
    char err[256] = "";
    ck_assert_int_eq (feedback_settings_set (&s, "quantity=speed", err, sizeof err), -1);
    ck_assert_str_eq (err, "bad value 'speed' for 'quantity': want mean_u, mean_v, mean_speed, "
                           "vorticity, valid_fraction, mean_w or mean_abs_w");
    // Every quantity of the table is taken, named back and has a figure.
    const feedback_quantity_info_t *q;
    feedback_figures_t f = {.n = 1, .total = 1};
    for (int i = 0; (q = feedback_quantity_get (i)); i++) {
        char kv[64];
        snprintf (kv, sizeof kv, "quantity=%s", q->name);
        ck_assert_msg (feedback_settings_set (&s, kv, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq (s.quantity, i);
        ck_assert_int_eq (q->quantity, i);
        ck_assert_str_eq (feedback_quantity_name (s.quantity), q->name);
        ck_assert (feedback_quantity_find (q->name) == q);
        ck_assert (q->figure < 0 || feedback_quantity_of_figure (q->figure) == q);
        ck_assert (!isnan (feedback_value (&f, s.quantity)));
    }
    ck_assert_str_eq (feedback_quantity_name ((feedback_quantity_t) 99), "?");
}
END_TEST

// A ROI with a length unit is physical, kept in metres: one unit after the
// last number for all four, or one on each; an unknown unit is named.
START_TEST (a_roi_with_a_length_unit_is_physical_in_metres)
{
    feedback_settings_t s = s_settings ("roi=0,-5,20,15mm");
    ck_assert (s.roi_set && s.roi_physical);
    ck_assert (s.roi[0] == 0 && s.roi[1] == -5 * 1e-3 && s.roi[2] == 20 * 1e-3
               && s.roi[3] == 15 * 1e-3);
    feedback_settings_t each = s_settings ("roi=0mm,-5mm,20mm,15mm");
    ck_assert (memcmp (each.roi, s.roi, sizeof s.roi) == 0 && each.roi_physical);
    each = s_settings ("roi=0um,-5000µm,0.02m,15mm");
    ck_assert (each.roi_physical && each.roi[1] == -5000 * 1e-6 && each.roi[2] == 0.02);
    s = s_settings ("roi=1,2,3,4");
    ck_assert (s.roi_set && !s.roi_physical);
    s_refused ("roi=1,2,3,4in", "'roi'", "unknown length unit 'in'");
    s_refused ("roi=1,2,3,4in", "um, mm, m", "'1,2,3,4in'");
    s_refused ("roi=1mm,2,3,4mm", "'roi'", "after the last or one after each");
    s_refused ("roi=1,2,3mm,4", "'roi'", "after the last or one after each");
    s_refused ("roi=1,2,3,xmm", "'roi'", "x0,y0,x1,y1");
    s_refused ("roi=3,2,1,4mm", "roi", "x0 <= x1");
    // Back to px, and the formatted text keeps the unit (the broker's
    // record, read at its restart) to the last bit.
    char text[512], err[256];
    s = s_settings ("roi=0.1,-5.3,20,15.7mm kp=1");
    ck_assert (feedback_settings_format (&s, text, sizeof text) > 0);
    feedback_settings_t back = s_settings ("roi=all");
    char *argv[16], *save;
    int argc = 0;
    for (char *t = strtok_r (text, " ", &save); t && argc < 16; t = strtok_r (NULL, " ", &save))
        argv[argc++] = t;
    ck_assert_msg (feedback_settings_apply (&back, argc, argv, err, sizeof err) == 0, "%s", err);
    ck_assert (back.roi_physical && memcmp (back.roi, s.roi, sizeof s.roi) == 0);
    ck_assert (feedback_settings_set (&s, "roi=1,2,3,4", err, sizeof err) == 0 && !s.roi_physical);
    // F: the four numbers in metres and their unit.
    s = s_settings ("roi=0,-5,20,15mm");
    feedback_settings_json (&s, NULL, text, sizeof text);
    s_contains (text, "\"roi\":[0,-0.005,0.02,0.015],\"roi_units\":\"m\",");
}
END_TEST

// Through a calibration, a physical ROI selects the vectors whose physical
// position lies inside: the same ones as the pixel box it maps to; with no
// calibration, none (no value).
START_TEST (a_physical_roi_selects_through_the_calibration_and_none_without_one)
{
    piv_field_t *field = s_grid (8, 8);  // x, y = 16 .. 128 px
    for (int k = 0; k < 64; k++)
        field->u[k] = (float) k;       // every vector its own u
    piv_calib_t c;
    char err[256];
    // 0.5 mm/px, origin (16, 128) px, y up: x = 0 .. 56 mm, y = 0 .. 56 mm.
    ck_assert (piv_calib_parse ("scale=0.5mm/px dt=1ms origin=16,128 y_axis=up", &c, err,
                                sizeof err)
               == 0);
    // x -1 .. 21 mm is columns 14 .. 58 px (vectors at 16, 32, 48); y 9 ..
    // 41 mm (up from row 128) is rows 46 .. 110 px (48, 64, 80, 96).
    feedback_settings_t mm = s_settings ("roi=-1,9,21,41mm");
    feedback_settings_t px = s_settings ("roi=14,46,58,110");
    feedback_figures_t a, b, none;
    feedback_figures (field, NULL, &mm, &c, &a);
    feedback_figures (field, NULL, &px, NULL, &b);
    double sum = 0;
    int n = 0;
    for (int k = 0; k < 64; k++) {
        double x, y;
        piv_calib_position (&c, field->x[k], field->y[k], &x, &y);
        if (x >= -1e-3 && x <= 21e-3 && y >= 9e-3 && y <= 41e-3)
            sum += field->u[k], n++;
    }
    ck_assert_int_eq (n, 12);
    ck_assert_int_eq (a.n, n);
    ck_assert_int_eq (b.n, n);
    ck_assert_int_eq (a.roi_uncalibrated, 0);
    ck_assert (a.mean_u == b.mean_u);
    ck_assert_double_eq_tol (a.mean_u, sum / n, 1e-12);
    feedback_figures (field, NULL, &mm, NULL, &none);
    ck_assert (none.n == 0 && none.total == 0 && none.roi_uncalibrated);
    ck_assert (isnan (feedback_value (&none, FEEDBACK_MEAN_U)));
    piv_field_destroy (&field);
}
END_TEST

// Quantity i in the order RESULT carries them, NULL past the last.
static const char *
s_by_figure (int i)
{
    for (int f = 0, n = 0; f < PROTO_FIG_RESERVED; f++) {
        const feedback_quantity_info_t *q = feedback_quantity_of_figure (f);
        if (q && n++ == i)
            return q->name;
    }
    return NULL;
}

// Tail's column heading of planar quantity i (the docs' example stream is
// planar: no w columns), NULL past the last.
static const char *
s_column (int i)
{
    const feedback_quantity_info_t *q;
    for (int k = 0, n = 0; (q = feedback_quantity_get (k)); k++)
        if (!q->stereo && n++ == i)
            return q->column;
    return NULL;
}

// The docs that list the quantities list the table's, in its order: a
// quantity added to common/feedback_quantity.h fails here until they say it.
START_TEST (the_docs_list_the_quantities_of_the_table)
{
    char list[512], expected[640];
    const struct {
        const char *doc;                  // which
        const char *(*item) (int i);      // what it lists
        const char *sep, *before, *after; // how: the list between before and after
    } places[] = {
        // The keys of 'feedback set'.
        {"doc/control.md", feedback_quantity_choice, "|", "quantity=", ", setpoint="},
        {"doc/pivctl.md", feedback_quantity_choice, "|", "quantity=", ", setpoint="},
        // The feedback message's members, and the design's summary.
        {"doc/control.md", feedback_quantity_choice, ", ", " n, ", ", quantity, value,"},
        {"doc/design.md", feedback_quantity_choice, ", ", "region of interest (", ")"},
        // The result topic's members, in RESULT's frame order.
        {"doc/protocol.md", s_by_figure, ", ", " path, ", ", nx, ny,"},
        // The header of pivctl tail in the example session.
        {"doc/pivctl.md", s_column, " ", " LATENCY N ", " VALUE OUTPUT "},
    };
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        util_join (places[i].item, places[i].sep, places[i].sep, list, sizeof list);
        snprintf (expected, sizeof expected, "%s%s%s", places[i].before, list, places[i].after);
        char *text = tu_doc (places[i].doc);
        ck_assert_msg (strstr (text, expected) != NULL, "%s does not list the quantities as '%s'",
                       places[i].doc, expected);
        free (text);
    }
}
END_TEST

// The correlation coefficient of the errors e (nx * ny, NaN: none) of
// vectors (di, dj) grid steps apart, over the grid 4 steps inside its
// border (away from the first pass's windows out of the frame).
static double
s_error_correlation (const double *e, int nx, int ny, int di, int dj)
{
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    long n = 0;
    for (int j = 4; j + dj < ny - 4; j++)
        for (int i = 4; i + di < nx - 4; i++) {
            double a = e[j * nx + i], b = e[(j + dj) * nx + i + di];
            if (isnan (a) || isnan (b))
                continue;
            sa += a, sb += b, saa += a * a, sbb += b * b, sab += a * b, n++;
        }
    double ca = saa - sa * sa / n, cb = sbb - sb * sb / n;
    return (sab - sa * sb / n) / sqrt (ca * cb);
}

// The evidence for feedback_sigma's correlation of neighbours: the
// engine's actual errors (uncertainty=cs, smooth=off: the measurement
// sigma describes) on two synthetic 1024 x 1024 pairs of a uniform
// 3.3, -1.7 px shift, noise 5 %, 16 px windows at 50 % overlap: neighbours
// along x correlate 0.40-0.45, diagonal ones ~0.19, two steps apart ~0;
// the model's 0.5, 0.25 and 0 bound them from above (a mean's sigma a
// little high, never low), within 0.15.
START_TEST (neighbours_errors_correlate_no_more_than_their_shared_window_area)
{
    const char *dir = tu_tmpdir ();
    char out[8192], prefix[4096], a[4096], b[4096], txt[4096], seed[16];
    double rho[2][3] = {{0}}; // u, v: along x, diagonal, two steps
    for (int pair = 1; pair <= 2; pair++) {
        snprintf (prefix, sizeof prefix, "%s", tu_path (dir, "p"));
        snprintf (seed, sizeof seed, "%d", pair);
        const char *synth[] = {"-s", "1024x1024", "-n", "0.05", "--seed", seed, "-o", prefix,
                               NULL};
        ck_assert_msg (tu_run_bin ("pivfarm-synth", synth, out, sizeof out, 120) == 0, "%s", out);
        snprintf (a, sizeof a, "%s", tu_path (dir, "p_a.tif"));
        snprintf (b, sizeof b, "%s", tu_path (dir, "p_b.tif"));
        snprintf (txt, sizeof txt, "%s", tu_path (dir, "f.txt"));
        const char *piv[] = {"-p", "32,16", "--smooth", "off", "--uncertainty", "cs", a, b,
                             "-o", txt, NULL};
        ck_assert_msg (tu_run_bin ("pivfarm-piv", piv, out, sizeof out, 300) == 0, "%s", out);
        char err[512];
        piv_field_t *f = piv_field_read_txt (txt, err, sizeof err);
        ck_assert_msg (f != NULL, "%s", err);
        int n = f->nx * f->ny;
        double *e = malloc (sizeof (double) * (size_t) n);
        for (int c = 0; c < 2; c++) {
            for (int k = 0; k < n; k++)
                e[k] = f->flags[k] != PIV_FLAG_VALID ? NAN : c ? f->v[k] + 1.7 : f->u[k] - 3.3;
            rho[c][0] += s_error_correlation (e, f->nx, f->ny, 1, 0) / 2;
            rho[c][1] += s_error_correlation (e, f->nx, f->ny, 1, 1) / 2;
            rho[c][2] += s_error_correlation (e, f->nx, f->ny, 2, 0) / 2;
        }
        free (e);
        piv_field_destroy (&f);
    }
    printf ("errors of neighbours at 50 %% overlap, correlation (u, v): along x %.3f, %.3f; "
            "diagonal %.3f, %.3f; two steps %.3f, %.3f (feedback_sigma's model: 0.5, 0.25, 0)\n",
            rho[0][0], rho[1][0], rho[0][1], rho[1][1], rho[0][2], rho[1][2]);
    static const double model[3] = {0.5, 0.25, 0};
    for (int c = 0; c < 2; c++)
        for (int d = 0; d < 3; d++)
            ck_assert_msg (rho[c][d] < model[d] + 0.05 && rho[c][d] > model[d] - 0.15,
                           "%s, distance %d: %.3f against the model's %.2f", c ? "v" : "u", d,
                           rho[c][d], model[d]);
    tu_rmtree (dir);
}
END_TEST

// pivctl over the farm 'farm' (tu_farm_pivctl_v), which must succeed.
static void
s_pivctl_ok (tu_farm_t *farm, const char *first, ...)
{
    char out[8192];
    va_list ap;
    va_start (ap, first);
    int rc = tu_farm_pivctl_v (farm, out, sizeof out, first, ap);
    va_end (ap);
    ck_assert_msg (rc == 0, "pivctl %s: %s", first, out);
}

// On the real farm (broker, pivfarm-agent with uncertainty=cs, a SUB on
// feedback.exp1/), calibrated 0.02 mm/px over 2 ms: the message of a real
// pair says each ROI mean's uncertainty in m/s and 1/s, "sigma" beside
// "value"; the test recomputes them by brute force from the agent's own
// result file (read back with its sigma_u, sigma_v columns), within 1 %
// (the file's 4 decimals).
START_TEST (the_farms_feedback_gives_each_roi_mean_its_uncertainty)
{
    tu_farm_t farm;
    tu_farm_init (&farm);
    tu_farm_conf_replace (&farm, "    iterations = 1\n",
                          "    iterations = 1\n    uncertainty = cs\n");
    tu_farm_render (&farm, 1, "p");
    tu_farm_start_broker (&farm);
    s_pivctl_ok (&farm, "calibrate", "exp1", "--scale", "0.02mm/px", "--dt", "2ms", NULL);
    s_pivctl_ok (&farm, "feedback", "set", "roi=40,40,200,180", "quantity=mean_v", "-e", "exp1",
                 NULL);
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/publish", farm.dir);
    zsock_t *sub = zsock_new_sub (endpoint, "feedback.exp1/");
    ck_assert_ptr_nonnull (sub);
    usleep (300000); // the subscription reaches the broker
    farm.agents[0] = tu_farm_start (&farm, "pivfarm-agent", "agent.log", NULL, NULL);
    farm.watcher = tu_farm_start (&farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_land (&farm, "p", 1, 1, 0);
    zpoller_t *poller = zpoller_new (sub, NULL);
    ck_assert_msg (zpoller_wait (poller, 60000) != NULL, "no feedback (see %s)", farm.dir);
    zpoller_destroy (&poller);
    char *topic = zstr_recv (sub), *json = zstr_recv (sub);
    zsock_destroy (&sub);
    ck_assert_str_eq (topic, "feedback.exp1/");
    jdoc_t *doc = jdoc_parse (json, NULL, 0);
    ck_assert_ptr_nonnull (doc);

    char path[4200], err[512];
    snprintf (path, sizeof path, "%s/results/exp1/p_0001.txt", farm.dir);
    piv_field_t *field = piv_field_read_txt (path, err, sizeof err);
    ck_assert_msg (field && field->sigma_u, "%s", err);
    field->window = 16; // the final pass of 32,16 at the default overlap 50 %
    field->step = 8;
    int n = field->nx * field->ny, count = 0, nvort = 0;
    double *a = calloc ((size_t) n, sizeof (double)), *cu = calloc ((size_t) n, sizeof (double)),
           *cv = calloc ((size_t) n, sizeof (double)), *su = calloc ((size_t) n, sizeof (double)),
           *sv = calloc ((size_t) n, sizeof (double));
    float *w = malloc (sizeof (float) * (size_t) n);
    piv_field_derive (field, &(piv_derived_t){.vorticity = w});
    s_known_sigmas (field, su, sv);
    for (int k = 0; k < n; k++) {
        a[k] = field->flags[k] == PIV_FLAG_VALID && field->x[k] >= 40 && field->x[k] <= 200
               && field->y[k] >= 40 && field->y[k] <= 180;
        count += a[k] != 0;
        nvort += a[k] && isfinite (w[k]);
    }
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.n"), count);
    for (int k = 0; k < n; k++)
        a[k] /= count;
    double want_u = sqrt (s_brute_variance (field, a, su)) * 0.01; // m/s
    double want_v = sqrt (s_brute_variance (field, a, sv)) * 0.01;
    for (int k = 0; k < n; k++)
        a[k] = a[k] && isfinite (w[k]) ? 1.0 / nvort : 0;
    ck_assert_int_eq (piv_field_vorticity_coefficients (field, PIV_STENCIL_DEFAULT, a, cu, cv), 0);
    double want_w =
        sqrt (s_brute_variance (field, cu, su) + s_brute_variance (field, cv, sv)) * 500;
    double got_u = jdoc_number (doc, NAN, "$.uncertainty.mean_u");
    double got_v = jdoc_number (doc, NAN, "$.uncertainty.mean_v");
    double got_w = jdoc_number (doc, NAN, "$.uncertainty.vorticity");
    printf ("feedback of a real pair, %d vectors in the roi: mean_v %.6f +- %.6f m/s "
            "(recomputed %.6f), vorticity %.3f +- %.3f 1/s (recomputed %.3f)\n",
            count, jdoc_number (doc, NAN, "$.mean_v"), got_v, want_v,
            jdoc_number (doc, NAN, "$.vorticity"), got_w, want_w);
    ck_assert_msg (fabs (got_u / want_u - 1) < 0.01, "mean_u +- %.9g m/s, want %.9g", got_u,
                   want_u);
    ck_assert_msg (fabs (got_v / want_v - 1) < 0.01, "mean_v +- %.9g m/s, want %.9g", got_v,
                   want_v);
    ck_assert_msg (fabs (got_w / want_w - 1) < 0.01, "vorticity +- %.9g 1/s, want %.9g", got_w,
                   want_w);
    ck_assert (jdoc_number (doc, NAN, "$.sigma") == got_v); // beside value, the same units
    ck_assert (jdoc_number (doc, NAN, "$.uncertainty.mean_speed") > 0);
    ck_assert_int_eq (jdoc_type_at (doc, "$.uncertainty.valid_fraction"), JDOC_MISSING);
    ck_assert_str_eq (jdoc_string (doc, "$.units.velocity"), "m/s");
    jdoc_destroy (&doc);
    zstr_free (&topic);
    zstr_free (&json);
    free (a);
    free (cu);
    free (cv);
    free (su);
    free (sv);
    free (w);
    piv_field_destroy (&field);
    tu_farm_release (&farm);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("feedback");
    TCase *tc = tcase_create ("settings");
    tcase_add_test (tc, defaults_are_off_over_the_whole_field_on_mean_u_and_unbounded);
    tcase_add_test (tc, every_key_is_set_by_key_equals_value);
    tcase_add_test (tc, bad_numbers_are_refused_naming_key_and_value);
    tcase_add_test (tc, an_unknown_key_or_a_word_without_equals_is_refused_by_name);
    tcase_add_test (tc, a_roi_needs_four_finite_numbers_in_order);
    tcase_add_test (tc, a_roi_with_a_length_unit_is_physical_in_metres);
    tcase_add_test (tc, apply_changes_all_or_nothing);
    tcase_add_test (tc, formatted_settings_apply_back_to_the_same_settings);
    tcase_add_test (tc, settings_json_has_every_member_of_f_with_nulls_for_what_does_not_exist);
    tcase_add_test (tc, the_stream_message_has_every_member_escaped_and_nulls);
    tcase_add_test (tc, an_unknown_quantity_is_refused_naming_every_quantity_of_the_table);
    tcase_add_test (tc, the_docs_list_the_quantities_of_the_table);
    suite_add_tcase (suite, tc);
    tc = tcase_create ("figures");
    tcase_add_test (tc, a_uniform_field_has_exact_means_and_no_vorticity);
    tcase_add_test (tc, solid_body_rotation_has_vorticity_twice_its_rate);
    tcase_add_test (tc, each_mean_comes_with_its_uncertainty_counting_shared_window_area);
    tcase_add_test (tc, an_unknown_camera_time_gives_no_latency_and_a_replay_is_marked);
    tcase_add_test (tc, the_roi_selects_the_vectors_inside_its_box_edges_included);
    tcase_add_test (tc, flagged_vectors_count_in_total_only_and_invalid_ones_stay_out_of_the_stencils);
    tcase_add_test (tc, an_roi_without_valid_vectors_gives_no_figures);
    tcase_add_test (tc, a_physical_roi_selects_through_the_calibration_and_none_without_one);
    tcase_add_test (tc, the_agents_vorticity_figure_is_the_feedbacks_on_a_real_field);
    suite_add_tcase (suite, tc);
    tc = tcase_create ("controller");
    tcase_add_test (tc, proportional_only_outputs_kp_times_the_error_at_once);
    tcase_add_test (tc, integral_only_grows_linearly_with_frame_time);
    tcase_add_test (tc, a_step_in_setpoint_moves_the_output_without_losing_the_integral);
    tcase_add_test (tc, saturation_stops_the_integral_so_a_sign_change_leaves_the_limit_at_once);
    tcase_add_test (tc, a_proportional_kick_into_the_limit_keeps_the_integral);
    tcase_add_test (tc, a_missing_value_or_a_late_frame_time_changes_nothing_it_should_not);
    suite_add_tcase (suite, tc);
    tc = tcase_create ("farm");
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, the_farms_feedback_gives_each_roi_mean_its_uncertainty);
    tcase_add_test (tc, neighbours_errors_correlate_no_more_than_their_shared_window_area);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
