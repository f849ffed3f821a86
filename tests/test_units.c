// test_units.c — the science on top of the vectors: calibration and units
// (piv/calib.h), derived quantities and the evidence for their stencil
// (piv/derived.h), run statistics, their encoding and the files they are
// written to, read back by real readers (piv/stats.h).

#include "piv/calib.h"
#include "piv/derived.h"
#include "piv/flow.h"
#include "piv/piv.h"
#include "piv/stats.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Calibration

// Every accepted form of each key, and the value it means (m/px, s, or the
// origin's column).
START_TEST (every_accepted_calibration_form_means_its_value)
{
    static const struct {
        const char *key, *value;
        double expect;
    } good[] = {
        {"scale", " 0.05 mm/px ", 5e-5},
        {"scale", "0.05mm/px", 5e-5},
        {"scale", "20 px/mm", 5e-5},
        {"scale", "20px/mm", 5e-5},
        {"scale", "50 um/px", 5e-5},
        {"scale", "50 \xc2\xb5m/px", 5e-5},
        {"scale", "50 \xce\xbcm/px", 5e-5},
        {"scale", "2e-5 m/px", 2e-5},
        {"scale", "50000 px/m", 2e-5},
        {"scale", "0.02 px/um", 5e-5},
        {"dt", "1 ms", 1e-3},
        {"dt", "2ms", 2e-3},
        {"dt", "500 us", 5e-4},
        {"dt", "500 \xc2\xb5s", 5e-4},
        {"dt", "0.002 s", 2e-3},
        {"dt", "250 ns", 2.5e-7},
        {"origin", "12,34", 12},
        {"origin", "12.5, 3", 12.5},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        piv_calib_t c;
        piv_calib_init (&c);
        char err[256] = "";
        ck_assert_msg (piv_calib_set (&c, good[i].key, good[i].value, err, sizeof err) == 0,
                       "%s '%s' refused: %s", good[i].key, good[i].value, err);
        double got = good[i].key[0] == 's' ? c.scale : good[i].key[0] == 'd' ? c.dt : c.origin_x;
        ck_assert_msg (fabs (got - good[i].expect) <= 1e-12 * good[i].expect, "%s '%s' gave %.17g",
                       good[i].key, good[i].value, got);
        ck_assert_int_eq (c.set, 0); // one key is not a calibration
    }
    piv_calib_t c;
    piv_calib_init (&c);
    ck_assert_int_eq (c.y_up, 1); // as in every physics plot
    char err[256];
    ck_assert_int_eq (piv_calib_set (&c, "y_axis", "down", err, sizeof err), 0);
    ck_assert_int_eq (c.y_up, 0);
    ck_assert_int_eq (piv_calib_set (&c, "dt", "1 ms", err, sizeof err), 0);
    ck_assert_int_eq (c.set, 0);
    ck_assert_int_eq (piv_calib_set (&c, "scale", "20 px/mm", err, sizeof err), 0);
    ck_assert_int_eq (c.set, 1);
}
END_TEST

// Every refused value names the key, the value and the accepted forms, and
// leaves the calibration as it was.
START_TEST (bad_calibration_values_are_refused_naming_the_key)
{
    static const char *bad[][2] = {
        {"scale", "0 mm/px"},    {"scale", "-1 mm/px"}, {"scale", "0.05"},
        {"scale", "0.05 in/px"}, {"scale", "mm/px"},    {"scale", "inf mm/px"},
        {"scale", "nan mm/px"},  {"scale", "0x1 m/px"}, {"scale", "1 mm/mm"},
        {"scale", "0 px/mm"},    {"dt", "abc"},         {"dt", "1"},
        {"dt", "0 ms"},          {"dt", "-2 ms"},       {"dt", "1 min"},
        {"dt", "1 ms extra"},    {"origin", "-1,0"},    {"origin", "1"},
        {"origin", "a,b"},       {"origin", "1,2,3"},   {"y_axis", "left"},
        {"y_axis", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        piv_calib_t c, before;
        piv_calib_init (&c);
        char err[256] = "";
        ck_assert_int_eq (piv_calib_set (&c, "scale", "1 mm/px", err, sizeof err), 0);
        before = c;
        ck_assert_msg (piv_calib_set (&c, bad[i][0], bad[i][1], err, sizeof err) == -1,
                       "%s '%s' accepted", bad[i][0], bad[i][1]);
        char want[128];
        snprintf (want, sizeof want, "bad calibration %s '%s': expected ", bad[i][0], bad[i][1]);
        ck_assert_msg (strstr (err, want) == err, "message '%s'", err);
        ck_assert (memcmp (&c, &before, sizeof c) == 0);
    }
    piv_calib_t c;
    piv_calib_init (&c);
    char err[256];
    ck_assert_int_eq (piv_calib_set (&c, "focus", "1", err, sizeof err), -1);
    ck_assert_str_eq (err, "unknown calibration key 'focus': expected scale, dt, origin or y_axis");
    ck_assert_int_eq (piv_calib_set (&c, "scale", "-1 mm/px", err, sizeof err), -1);
    ck_assert_str_eq (err, "bad calibration scale '-1 mm/px': expected a positive length per "
                           "pixel such as 0.05 mm/px or 20 px/mm (units um, mm, m)");
}
END_TEST

// Issue 25: the canonical text and the words for people give the values as
// they were typed (0.02 mm/px, 500 us), not their doubles' 17 digits, and
// still read back to the same bits, whatever the value.
START_TEST (the_calibration_text_gives_the_values_as_typed)
{
    static const struct {
        const char *typed, *text, *words;
    } cases[] = {
        {"scale=0.02mm/px dt=500us", "scale=0.02mm/px dt=500us origin=0,0 y_axis=up",
         "0.02 mm/px, dt 500 \xc2\xb5s, origin (0, 0) px, y up"},
        {"scale=50\xc2\xb5m/px dt=2ms origin=12.5,0.1 y_axis=down",
         "scale=50um/px dt=2ms origin=12.5,0.1 y_axis=down",
         "50 \xc2\xb5m/px, dt 2 ms, origin (12.5, 0.1) px, y down"},
        {"scale=7px/um dt=1.5s", "scale=7px/um dt=1.5s origin=0,0 y_axis=up",
         "7 px/\xc2\xb5m, dt 1.5 s, origin (0, 0) px, y up"},
        {"scale=2e-5m/px dt=0.0005s", "scale=0.02mm/px dt=500us origin=0,0 y_axis=up",
         "0.02 mm/px, dt 500 \xc2\xb5s, origin (0, 0) px, y up"},
        // The old canonical form reads as before and is written the new way.
        {"scale=2.0000000000000002e-05m/px dt=0.00050000000000000001s origin=0,0 y_axis=up",
         "scale=0.02mm/px dt=500us origin=0,0 y_axis=up",
         "0.02 mm/px, dt 500 \xc2\xb5s, origin (0, 0) px, y up"},
    };
    char err[256], text[256], words[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        piv_calib_t c, back;
        ck_assert_msg (piv_calib_parse (cases[i].typed, &c, err, sizeof err) == 0, "%s", err);
        ck_assert (piv_calib_format (&c, text, sizeof text) > 0);
        ck_assert_str_eq (text, cases[i].text);
        ck_assert (piv_calib_describe (&c, words, sizeof words) > 0);
        ck_assert_str_eq (words, cases[i].words);
        ck_assert (piv_calib_parse (text, &back, err, sizeof err) == 0);
        ck_assert (memcmp (&c, &back, sizeof c) == 0);
    }
    // Any value reads back to its bits (a random walk over 12 decades).
    unsigned seed = 25;
    for (int i = 0; i < 2000; i++) {
        piv_calib_t c, back;
        piv_calib_init (&c);
        c.set = 1;
        c.scale = pow (10, -9 + 12.0 * rand_r (&seed) / RAND_MAX);
        c.dt = pow (10, -10 + 12.0 * rand_r (&seed) / RAND_MAX);
        c.origin_x = 1000.0 * rand_r (&seed) / RAND_MAX;
        ck_assert (piv_calib_format (&c, text, sizeof text) > 0);
        ck_assert_msg (piv_calib_parse (text, &back, err, sizeof err) == 0, "%s: %s", text, err);
        ck_assert_msg (back.scale == c.scale && back.dt == c.dt && back.origin_x == c.origin_x,
                       "%.17g %.17g %.17g: '%s'", c.scale, c.dt, c.origin_x, text);
    }
}
END_TEST

// Issue 26: a stereo grid's calibration (piv_stereo_grid_calib) may put
// the origin outside the frames, at negative pixels: its recorded text reads
// back to the same bits; an origin an operator types stays in the image.
START_TEST (a_recorded_origin_outside_the_frames_reads_back_and_a_typed_one_is_refused)
{
    piv_calib_t c, back;
    piv_calib_init (&c);
    c.set = 1, c.scale = 1.25e-4, c.dt = 1e-3, c.origin_x = -12.75, c.origin_y = -0.5;
    char text[256], err[256] = "";
    ck_assert (piv_calib_format (&c, text, sizeof text) > 0);
    ck_assert_msg (piv_calib_parse (text, &back, err, sizeof err) == 0, "%s: %s", text, err);
    ck_assert (back.origin_x == c.origin_x && back.origin_y == c.origin_y);
    piv_calib_init (&back);
    ck_assert_int_eq (piv_calib_set (&back, "origin", "-12.75,-0.5", err, sizeof err), -1);
    ck_assert_msg (strstr (err, ">= 0") != NULL, "%s", err);
}
END_TEST

// The canonical text reads back to the same bits; the whole-text parser is
// all or nothing.
START_TEST (the_calibration_text_reads_back_exactly)
{
    piv_calib_t c, back;
    char err[256] = "", text[256], again[256];
    ck_assert_msg (piv_calib_parse ("dt=0.7ms scale=0.0333mm/px origin=13.25,7 y_axis=down", &c,
                                    err, sizeof err) == 0,
                   "%s", err);
    ck_assert_int_eq (c.set, 1);
    ck_assert (piv_calib_format (&c, text, sizeof text) > 0);
    ck_assert_msg (piv_calib_parse (text, &back, err, sizeof err) == 0, "%s: %s", text, err);
    ck_assert (memcmp (&c, &back, sizeof c) == 0);
    ck_assert (piv_calib_format (&back, again, sizeof again) > 0);
    ck_assert_str_eq (text, again);
    piv_calib_init (&c);
    ck_assert_int_eq (piv_calib_parse ("scale=0.05mm/px dt=1ms", &c, err, sizeof err), 0);
    ck_assert_int_eq (piv_calib_format (&c, text, sizeof text), (int) strlen (text));
    ck_assert_str_eq (text, "scale=0.05mm/px dt=1ms origin=0,0 y_axis=up");
    ck_assert_int_eq (piv_calib_format (&c, text, 10), -1);
    ck_assert (piv_calib_describe (&c, text, sizeof text) > 0);
    ck_assert_str_eq (text, "0.05 mm/px, dt 1 ms, origin (0, 0) px, y up");
    // "" and "none": not calibrated.
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq (piv_calib_parse (i ? "none" : "", &back, err, sizeof err), 0);
        ck_assert_int_eq (back.set, 0);
        ck_assert_int_eq (piv_calib_format (&back, text, sizeof text), 4);
        ck_assert_str_eq (text, "none");
        ck_assert (piv_calib_describe (&back, text, sizeof text) > 0);
        ck_assert_str_eq (text, "not calibrated (px, frames)");
    }
    // All or nothing.
    back = c;
    ck_assert_int_eq (piv_calib_parse ("scale=0.05mm/px", &back, err, sizeof err), -1);
    ck_assert_str_eq (err, "bad calibration 'scale=0.05mm/px': scale and dt are both needed");
    ck_assert_int_eq (piv_calib_parse ("scale=0.05mm/px dt=abc", &back, err, sizeof err), -1);
    ck_assert (strstr (err, "bad calibration dt 'abc'") == err);
    ck_assert_int_eq (piv_calib_parse ("scale=1mm/px dt=1ms junk", &back, err, sizeof err), -1);
    ck_assert (memcmp (&c, &back, sizeof c) == 0);
}
END_TEST

// The configuration's rules keep a value piv_calib_set reads back as the
// same number and say why a bad one is refused; the origin is checked
// against the image.
START_TEST (the_calibration_keys_of_the_configuration_follow_the_rules)
{
    char norm[128], why[256];
    ck_assert_int_eq (piv_calib_check_key ("scale", "20 px/mm", norm, sizeof norm, why, sizeof why),
                      0);
    piv_calib_t c;
    piv_calib_init (&c);
    ck_assert_int_eq (piv_calib_set (&c, "scale", norm, why, sizeof why), 0);
    ck_assert (c.scale == 1e-3 / 20);
    ck_assert_int_eq (piv_calib_check_key ("dt", "500 us", norm, sizeof norm, why, sizeof why), 0);
    ck_assert_int_eq (piv_calib_set (&c, "dt", norm, why, sizeof why), 0);
    ck_assert (c.dt == 500 * 1e-6);
    ck_assert_int_eq (piv_calib_check_key ("origin", "3, 4", norm, sizeof norm, why, sizeof why),
                      0);
    ck_assert_str_eq (norm, "3,4");
    ck_assert_int_eq (piv_calib_check_key ("y_axis", "down", norm, sizeof norm, why, sizeof why),
                      0);
    ck_assert_str_eq (norm, "down");
    ck_assert_int_eq (piv_calib_check_key ("scale", "0", norm, sizeof norm, why, sizeof why), -1);
    ck_assert_msg (strstr (why, "is not a length per pixel: expected ") == why, "%s", why);
    ck_assert_int_eq (piv_calib_check_key ("dt", "abc", norm, sizeof norm, why, sizeof why), -1);
    ck_assert_msg (strstr (why, "is not a time between frames: expected ") == why, "%s", why);
    ck_assert_int_eq (piv_calib_check_key ("zoom", "2", norm, sizeof norm, why, sizeof why), -1);
    ck_assert_msg (strstr (why, "is not a calibration key") == why, "%s", why);
    ck_assert_int_eq (piv_calib_set (&c, "origin", "900,10", why, sizeof why), 0);
    ck_assert_int_eq (piv_calib_check_image (&c, 1024, 512, why, sizeof why), 0);
    ck_assert_int_eq (piv_calib_check_image (&c, 512, 512, why, sizeof why), -1);
    ck_assert_str_eq (why, "calibration origin 900,10 lies outside the 512x512 image");
}
END_TEST

// Positions, velocities and rates in SI with the signs of a right-handed
// x, y, z: y up flips y, v and the vorticity, never the divergence.
START_TEST (conversions_follow_the_scale_and_the_direction_of_y)
{
    piv_calib_t c;
    char err[256];
    piv_calib_init (&c);
    double x, y, u, v;
    piv_calib_position (&c, 10, 20, &x, &y);
    piv_calib_velocity (&c, 1.5, -2, &u, &v);
    ck_assert (x == 10 && y == 20 && u == 1.5 && v == -2); // identities when not calibrated
    ck_assert (piv_calib_vorticity (&c, 0.25) == 0.25);
    ck_assert_str_eq (piv_calib_unit (&c, PIV_UNIT_VELOCITY), "px/frame");
    ck_assert_str_eq (piv_calib_unit (&c, PIV_UNIT_RATE), "1/frame");
    ck_assert_str_eq (piv_calib_unit (NULL, PIV_UNIT_LENGTH), "px");
    ck_assert_int_eq (piv_calib_parse ("scale=0.02mm/px dt=2ms origin=100,50", &c, err, sizeof err),
                      0);
    ck_assert_str_eq (piv_calib_unit (&c, PIV_UNIT_LENGTH), "m");
    ck_assert_str_eq (piv_calib_unit (&c, PIV_UNIT_VELOCITY), "m/s");
    ck_assert_str_eq (piv_calib_unit (&c, PIV_UNIT_RATE), "1/s");
    piv_calib_position (&c, 150, 40, &x, &y);
    ck_assert (fabs (x - 50 * 2e-5) < 1e-15 && fabs (y - 10 * 2e-5) < 1e-15); // 10 px above
    piv_calib_velocity (&c, 1, 1, &u, &v);
    ck_assert (fabs (u - 0.01) < 1e-15 && fabs (v + 0.01) < 1e-15); // 1 px/2 ms = 10 mm/s
    ck_assert (fabs (piv_calib_vorticity (&c, 0.1) + 50) < 1e-12);
    ck_assert (fabs (piv_calib_divergence (&c, 0.1) - 50) < 1e-12);
    ck_assert_int_eq (piv_calib_set (&c, "y_axis", "down", err, sizeof err), 0);
    piv_calib_position (&c, 150, 40, &x, &y);
    piv_calib_velocity (&c, 1, 1, &u, &v);
    ck_assert (y < 0 && v > 0);
    ck_assert (fabs (piv_calib_vorticity (&c, 0.1) - 50) < 1e-12);
    ck_assert (fabs (piv_calib_divergence (&c, 0.1) - 50) < 1e-12);
    // A whole field: positions and velocities converted, grid in px.
    piv_field_t *f = piv_field_new (2, 1);
    f->step = f->window = 16;
    f->x[1] = 116;
    f->y[1] = 50;
    f->u[1] = 2;
    f->v[1] = NAN;
    f->flags[1] = PIV_FLAG_INVALID;
    piv_field_t *g = piv_calib_field (&c, f);
    ck_assert_ptr_nonnull (g);
    ck_assert (fabs (g->x[1] - 16 * 2e-5) < 1e-9 && g->y[1] == 0 && fabs (g->u[1] - 0.02) < 1e-7);
    ck_assert (isnan (g->v[1]) && g->flags[1] == PIV_FLAG_INVALID && g->step == 16);
    piv_field_destroy (&f);
    piv_field_destroy (&g);
}
END_TEST

// ---------------------------------------------------------------------------
// Derived quantities

// The exact vorticity dv/dx - du/dy of a flow in image axes, 1/frame.
static double
s_exact_vorticity (const piv_flow_t *flow, double x, double y)
{
    if (flow->kind == PIV_FLOW_ROTATION)
        return 2 * flow->p0;
    // u_theta = K rc (1 - exp(-r^2/rc^2)) / r: w = 2 K / rc exp(-r^2/rc^2),
    // K the peak displacement over the peak of (1 - exp(-s^2)) / s.
    double dx = x - flow->xc, dy = y - flow->yc, rc = flow->p1;
    double k = flow->p0 / 0.63817268633895148;
    return 2 * k / rc * exp (-(dx * dx + dy * dy) / (rc * rc));
}

// The flow sampled on a PIV grid of a size x size image (first point at
// 'step', as piv_process places a window of 2 step at 50 % overlap), with
// Gaussian noise of 'noise' px on u and v.
static piv_field_t *
s_sampled (const char *spec, int size, int step, double noise, uint64_t seed, piv_flow_t *flow)
{
    char err[256] = "";
    ck_assert_msg (piv_flow_parse (flow, spec, size, size, err, sizeof err) == 0, "%s", err);
    int n = size / step - 1;
    piv_field_t *field = piv_field_new (n, n);
    field->step = step;
    field->window = 2 * step;
    for (int k = 0; k < n * n; k++) {
        double u, v;
        field->x[k] = (float) (step + (k % n) * step - 0.5);
        field->y[k] = (float) (step + (k / n) * step - 0.5);
        piv_flow_eval (flow, field->x[k], field->y[k], &u, &v);
        field->u[k] = (float) (u + noise * tu_gauss (&seed));
        field->v[k] = (float) (v + noise * tu_gauss (&seed));
    }
    return field;
}

// Vorticity error of one stencil against the exact one over the points
// two steps inside the grid (every stencil defined there): RMS and largest.
typedef struct {
    double rms, max;
} s_error_t;
static s_error_t
s_vorticity_error (const piv_field_t *field, const piv_flow_t *flow, piv_stencil_t stencil)
{
    size_t n = (size_t) field->nx * (size_t) field->ny;
    float *w = malloc (n * sizeof (float));
    ck_assert_int_ge (piv_field_derive_with (field, stencil, &(piv_derived_t){.vorticity = w}), 0);
    double sum = 0;
    int count = 0;
    s_error_t e = {0, 0};
    for (int j = 2; j < field->ny - 2; j++)
        for (int i = 2; i < field->nx - 2; i++) {
            size_t k = (size_t) j * (size_t) field->nx + (size_t) i;
            ck_assert (isfinite (w[k]));
            double d = w[k] - s_exact_vorticity (flow, field->x[k], field->y[k]);
            sum += d * d;
            count++;
            e.max = fmax (e.max, fabs (d));
        }
    free (w);
    e.rms = sqrt (sum / count);
    return e;
}

// The evidence for the default stencil (doc/units.md, "Derived
// quantities"): each stencil against the exact vorticity of a solid
// rotation and of a Lamb-Oseen vortex of core radius 3 steps, exact and
// with 0.05 px of noise (RMS over 40 seeds), in % of the peak vorticity.
START_TEST (the_default_stencil_has_the_best_error_under_measurement_noise)
{
    static const struct {
        const char *spec;
        int step;
        double noise;
    } cases[] = {
        {"rotation:0.01", 16, 0},     {"rotation:0.01", 16, 0.05}, {"lamb-oseen:4,24", 8, 0},
        {"lamb-oseen:4,24", 8, 0.05}, {"lamb-oseen:4,48", 16, 0},  {"lamb-oseen:4,48", 16, 0.05},
        {"lamb-oseen:4,48", 16, 0.1},
    };
    double rms[7][3], max[7][3];
    for (int c = 0; c < 7; c++)
        for (int s = 0; s < 3; s++) {
            int seeds = cases[c].noise > 0 ? 40 : 1;
            double sum = 0, peak = 0, w0 = 0;
            for (int r = 0; r < seeds; r++) {
                piv_flow_t flow;
                piv_field_t *f =
                    s_sampled (cases[c].spec, 512, cases[c].step, cases[c].noise, 1000 + r, &flow);
                w0 = s_exact_vorticity (&flow, flow.xc, flow.yc);
                s_error_t e = s_vorticity_error (f, &flow, (piv_stencil_t) s);
                sum += e.rms * e.rms;
                peak = fmax (peak, e.max);
                piv_field_destroy (&f);
            }
            rms[c][s] = 100 * sqrt (sum / seeds) / w0;
            max[c][s] = 100 * peak / w0;
            fprintf (stderr, "%-16s step %2d noise %.2f px  %-13s  rms %6.2f %%  max %6.2f %%\n",
                     cases[c].spec, cases[c].step, cases[c].noise,
                     piv_stencil_name ((piv_stencil_t) s), rms[c][s], max[c][s]);
        }
    // Exact on a linear flow; noise alone: sigma / step times 1, 0.61, 0.45.
    for (int s = 0; s < 3; s++)
        ck_assert_double_lt (max[0][s], 1e-3);
    ck_assert (fabs (rms[1][0] / rms[1][1] - 1 / sqrt (0.375)) < 0.1);
    // The default's figures, as doc/units.md states them.
    const int d = PIV_STENCIL_DEFAULT;
    ck_assert_double_lt (rms[4][d], 1.0); // 0.79 %: the bias of the core
    ck_assert_double_lt (max[4][d], 8.5); // 7.8 % low at the centre
    ck_assert_double_lt (rms[3][d], 1.0); // 0.82 %
    ck_assert_double_lt (rms[5][d], 1.3); // 1.08 %
    // Its trade-off: the lowest RMS with noise, where the others lose to
    // noise (central) or to bias (least squares).
    for (int c = 3; c < 7; c += 2)
        for (int s = 0; s < 3; s++)
            ck_assert_msg (rms[c][d] <= rms[c][s], "%s: %s beats the default", cases[c].spec,
                           piv_stencil_name ((piv_stencil_t) s));
    ck_assert_double_lt (rms[6][d], rms[6][PIV_STENCIL_CENTRAL]);
    ck_assert_double_lt (max[4][d], max[4][PIV_STENCIL_LEAST_SQUARES] / 2);
}
END_TEST

// Invalid vectors are holes: NaN at the hole; its neighbours and the
// border get one-sided differences (exact on a linear flow); REPLACED
// vectors are data. A vector whose line has no data on either side has no
// derivative along it.
START_TEST (derived_quantities_are_defined_up_to_the_border_and_holes)
{
    piv_flow_t flow;
    piv_field_t *f = s_sampled ("rotation:0.01", 256, 16, 0, 1, &flow);
    int nx = f->nx, ny = f->ny, hole = 7 * nx + 7;
    f->flags[hole] = PIV_FLAG_INVALID;
    f->u[hole] = f->v[hole] = 0; // an agent writes 0: never used
    f->flags[3 * nx + 3] = PIV_FLAG_REPLACED;
    size_t n = (size_t) nx * (size_t) ny;
    float *w = malloc (n * sizeof (float)), *div = malloc (n * sizeof (float)),
          *speed = malloc (n * sizeof (float));
    int finite =
        piv_field_derive (f, &(piv_derived_t){.vorticity = w, .divergence = div, .speed = speed});
    ck_assert_int_eq (finite, nx * ny - 1);
    for (int k = 0; k < nx * ny; k++) {
        ck_assert_msg (isnan (w[k]) == (k == hole), "vorticity at %d,%d", k % nx, k / nx);
        ck_assert (isnan (div[k]) == (k == hole));
        ck_assert (isnan (speed[k]) == (k == hole));
        if (!isnan (w[k])) {
            ck_assert_msg (fabs (w[k] - 0.02) < 1e-6, "%g at %d,%d", w[k], k % nx, k / nx);
            ck_assert (fabs (div[k]) < 1e-6);
        }
    }
    ck_assert (fabs (speed[0] - hypot (f->u[0], f->v[0])) < 1e-6);
    ck_assert_int_eq (piv_field_derive (f, NULL), finite);
    // (10, 10) between holes left and right: no du/dx, dv/dx there.
    f->flags[10 * nx + 9] = f->flags[10 * nx + 11] = PIV_FLAG_INVALID;
    ck_assert_int_eq (piv_field_derive (f, &(piv_derived_t){.vorticity = w, .divergence = div}),
                      nx * ny - 4);
    ck_assert (isnan (w[10 * nx + 10]) && isnan (div[10 * nx + 10]));
    f->step = 0;
    ck_assert_int_eq (piv_field_derive (f, &(piv_derived_t){.vorticity = w}), -1);
    free (w);
    free (div);
    free (speed);
    piv_field_destroy (&f);
}
END_TEST

// Gaussian errors of unit variance on an nx x ny grid into e, correlated
// as piv_field_error_correlation says for windows twice the step
// ('overlap'): each the sum of the 2 x 2 white draws around it over 2, so
// that neighbours share half, diagonal ones a quarter; else independent.
static void
s_errors (uint64_t *seed, int nx, int ny, int overlap, double *white, double *e)
{
    for (int k = 0; k < (nx + 1) * (ny + 1); k++)
        white[k] = tu_gauss (seed);
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            const double *z = white + j * (nx + 1) + i;
            e[j * nx + i] = overlap ? (z[0] + z[1] + z[nx + 1] + z[nx + 2]) / 2 : z[0];
        }
}

// Each vector's uncertainty carried to the vorticity (issue 27): against a
// Monte-Carlo of 3000 fields perturbed by Gaussian errors of each vector's
// sigma_u, sigma_v (sigmas that vary from vector to vector), independent
// (windows of one step) or correlated as 50 % overlap makes them (0.5
// between neighbours, 0.25 diagonally), the spread of
// piv_field_derive_with's vorticity matches
// piv_field_derive_sigma_vorticity's at every vector within 6 % (the
// spread of 3000 draws is known to ~1.3 %), for every stencil, inside, at
// the border and around holes (where the rules fall back); NaN where the
// vorticity is; a field without sigma has none.
START_TEST (the_vorticitys_uncertainty_matches_a_monte_carlo_of_perturbed_fields)
{
    piv_flow_t flow;
    piv_field_t *f = s_sampled ("rotation:0.01", 192, 16, 0, 1, &flow);
    int nx = f->nx, ny = f->ny, n = nx * ny, draws = 3000;
    float *sigma = malloc (sizeof (float) * (size_t) n), *w = malloc (sizeof (float) * (size_t) n);
    ck_assert_int_eq (piv_field_derive_sigma_vorticity (f, PIV_STENCIL_DEFAULT, sigma), -1);
    ck_assert (isnan (sigma[0]) && isnan (sigma[n - 1]));
    ck_assert_int_eq (piv_field_add_sigma (f), 0);
    for (int k = 0; k < n; k++) {
        f->sigma_u[k] = (float) (0.05 + 0.01 * (k % 7));
        f->sigma_v[k] = (float) (0.09 - 0.008 * (k % 5));
    }
    f->flags[5 * nx + 5] = f->flags[5 * nx + 7] = PIV_FLAG_INVALID; // (6, 5): no d/dx
    f->flags[2 * nx + 8] = PIV_FLAG_INVALID;
    f->sigma_u[2 * nx + 8] = f->sigma_v[2 * nx + 8] = NAN;
    f->flags[8 * nx + 3] = PIV_FLAG_REPLACED;
    piv_field_t *noisy = piv_field_dup (f);
    double *sum = calloc ((size_t) n, sizeof (double)), *sq = calloc ((size_t) n, sizeof (double));
    double *white = malloc (sizeof (double) * (size_t) ((nx + 1) * (ny + 1)));
    double *eu = malloc (sizeof (double) * (size_t) n), *ev = malloc (sizeof (double) * (size_t) n);
    for (int run = 0; run < 6; run++) {
        int st = run % 3, overlap = run / 3;
        f->window = overlap ? 2 * f->step : f->step;
        double low = INFINITY, high = 0;
        memset (sum, 0, sizeof (double) * (size_t) n);
        memset (sq, 0, sizeof (double) * (size_t) n);
        uint64_t seed = 7 + (uint64_t) run;
        for (int d = 0; d < draws; d++) {
            s_errors (&seed, nx, ny, overlap, white, eu);
            s_errors (&seed, nx, ny, overlap, white, ev);
            for (int k = 0; k < n; k++) {
                noisy->u[k] = (float) (f->u[k] + f->sigma_u[k] * eu[k]);
                noisy->v[k] = (float) (f->v[k] + f->sigma_v[k] * ev[k]);
            }
            piv_field_derive_with (noisy, (piv_stencil_t) st, &(piv_derived_t){.vorticity = w});
            for (int k = 0; k < n; k++) {
                sum[k] += w[k];
                sq[k] += (double) w[k] * w[k];
            }
        }
        piv_field_derive_with (f, (piv_stencil_t) st, &(piv_derived_t){.vorticity = w});
        int finite = piv_field_derive_sigma_vorticity (f, (piv_stencil_t) st, sigma);
        // The three holes, (6, 5) between two, and the lines cut by (8, 2)
        // near the corner: (8, 0), (8, 1) have no d/dy, (9, 2), (10, 2) no d/dx.
        ck_assert_int_eq (finite, n - 8);
        for (int k = 0; k < n; k++) {
            ck_assert_msg (isnan (sigma[k]) == isnan (w[k]), "%s: NaN at %d,%d",
                           piv_stencil_name ((piv_stencil_t) st), k % nx, k / nx);
            if (isnan (sigma[k]))
                continue;
            double mean = sum[k] / draws, spread = sqrt (sq[k] / draws - mean * mean);
            low = fmin (low, spread / sigma[k]);
            high = fmax (high, spread / sigma[k]);
            ck_assert_msg (fabs (spread / sigma[k] - 1) < 0.06,
                           "%s at %d,%d: Monte-Carlo %.5g, propagated %.5g 1/frame",
                           piv_stencil_name ((piv_stencil_t) st), k % nx, k / nx, spread,
                           sigma[k]);
        }
        printf ("sigma_vorticity, %s, %s: Monte-Carlo spread / propagated %.3f .. %.3f over %d "
                "vectors (%d draws)\n",
                piv_stencil_name ((piv_stencil_t) st), overlap ? "50 % overlap" : "no overlap",
                low, high, finite, draws);
    }
    free (white);
    free (eu);
    free (ev);
    // The vorticity as a linear map: a weighted sum of vorticities is the
    // same sum over u and v with piv_field_vorticity_coefficients' weights.
    double *cw = calloc ((size_t) n, sizeof (double)), *cu = calloc ((size_t) n, sizeof (double)),
           *cv = calloc ((size_t) n, sizeof (double));
    for (int st = PIV_STENCIL_CENTRAL; st <= PIV_STENCIL_LEAST_SQUARES; st++) {
        piv_field_derive_with (noisy, (piv_stencil_t) st, &(piv_derived_t){.vorticity = w});
        double direct = 0, mapped = 0;
        for (int k = 0; k < n; k++) {
            cw[k] = isnan (w[k]) ? 0 : 1 + 0.1 * (k % 9);
            direct += cw[k] ? cw[k] * w[k] : 0;
        }
        ck_assert_int_eq (
            piv_field_vorticity_coefficients (noisy, (piv_stencil_t) st, cw, cu, cv), 0);
        for (int k = 0; k < n; k++)
            mapped += cu[k] || cv[k] ? cu[k] * noisy->u[k] + cv[k] * noisy->v[k] : 0;
        ck_assert_msg (fabs (direct - mapped) < 1e-9 + 1e-5 * fabs (direct),
                       "%s: %.9g, mapped %.9g", piv_stencil_name ((piv_stencil_t) st), direct,
                       mapped);
        cw[5 * nx + 6] = 1; // (6, 5) has no vorticity: refused
        ck_assert_int_eq (
            piv_field_vorticity_coefficients (noisy, (piv_stencil_t) st, cw, cu, cv), -1);
    }
    free (cw);
    free (cu);
    free (cv);
    // In 1/s under a calibration: a rate, never turned by y_up.
    piv_calib_t c;
    piv_calib_init (&c);
    c.set = 1;
    c.scale = 1e-4;
    c.dt = 0.002;
    c.y_up = 1;
    double rate = sigma[0] / 0.002;
    ck_assert (fabs (piv_calib_divergence (&c, sigma[0]) - rate) < 1e-6 * rate);
    free (sum);
    free (sq);
    free (sigma);
    free (w);
    piv_field_destroy (&noisy);
    piv_field_destroy (&f);
}
END_TEST

// The border of a 63x63 grid (248 points that were NaN) has values now, of
// the one-sided differences' accuracy, and the points inside keep the
// stencil's figures exactly: a 21x21 crop around a Lamb-Oseen vortex's core
// (its border 1.7 core radii out) has the whole grid's values one vector
// inside its own border.
START_TEST (the_border_has_values_and_the_inside_keeps_the_stencils_figures)
{
    piv_flow_t flow;
    piv_field_t *f = s_sampled ("lamb-oseen:4,48", 512, 8, 0, 1, &flow);
    int nx = f->nx, ny = f->ny;
    ck_assert_int_eq (nx, 63);
    float *w = malloc (sizeof (float) * (size_t) nx * ny);
    ck_assert_int_eq (piv_field_derive (f, &(piv_derived_t){.vorticity = w}), nx * ny);
    int cx = 21, cy = 21, o = (nx - cx) / 2;
    piv_field_t *crop = piv_field_new (cx, cy);
    crop->step = f->step;
    crop->window = f->window;
    for (int j = 0; j < cy; j++)
        for (int i = 0; i < cx; i++) {
            int k = j * cx + i, from = (j + o) * nx + i + o;
            crop->x[k] = f->x[from];
            crop->y[k] = f->y[from];
            crop->u[k] = f->u[from];
            crop->v[k] = f->v[from];
        }
    float *wc = malloc (sizeof (float) * (size_t) cx * cy);
    ck_assert_int_eq (piv_field_derive (crop, &(piv_derived_t){.vorticity = wc}), cx * cy);
    double w0 = s_exact_vorticity (&flow, flow.xc, flow.yc), sum = 0, peak = 0, inner = 0;
    int border = 0;
    for (int j = 0; j < cy; j++)
        for (int i = 0; i < cx; i++) {
            int k = j * cx + i, from = (j + o) * nx + i + o;
            if (i > 0 && j > 0 && i < cx - 1 && j < cy - 1) {
                ck_assert_msg (wc[k] == w[from], "%d,%d: %g against %g", i, j, wc[k], w[from]);
                continue;
            }
            double exact = s_exact_vorticity (&flow, crop->x[k], crop->y[k]), d = wc[k] - exact;
            sum += d * d;
            inner += (w[from] - exact) * (w[from] - exact); // the stencil's, same points
            peak = fmax (peak, fabs (d));
            border++;
        }
    double rms = 100 * sqrt (sum / border) / w0;
    fprintf (stderr, "border of a %dx%d crop of a Lamb-Oseen vortex: %d points, vorticity error "
             "rms %.3f %%, max %.3f %% of the peak (the stencil's at those points: rms %.3f %%)\n",
             cx, cy, border, rms, 100 * peak / w0, 100 * sqrt (inner / border) / w0);
    ck_assert_int_eq (border, 2 * (cx + cy) - 4);
    ck_assert_double_lt (100 * peak / w0, 2.0);
    free (w);
    free (wc);
    piv_field_destroy (&crop);
    piv_field_destroy (&f);
}
END_TEST

// Mean of the finite vorticity of 'field' converted by 'c'.
static double
s_mean_vorticity (const piv_field_t *field, const piv_calib_t *c)
{
    size_t n = (size_t) field->nx * (size_t) field->ny;
    float *w = malloc (n * sizeof (float));
    ck_assert_int_gt (piv_field_derive (field, &(piv_derived_t){.vorticity = w}), 0);
    double sum = 0;
    int count = 0;
    for (size_t k = 0; k < n; k++)
        if (isfinite (w[k])) {
            sum += piv_calib_vorticity (c, w[k]);
            count++;
        }
    free (w);
    return sum / count;
}

// A solid rotation of 0.01 rad per frame pair at 0.02 mm/px and dt 2 ms,
// y up: clockwise on the screen, so Omega = -5 rad/s in the physical axes.
// Mean vorticity within 0.5 % of 2 Omega on the exact field, within 2 % on
// a real PIV run of a synthetic pair.
START_TEST (a_solid_rotation_has_twice_its_angular_velocity_in_1_per_s)
{
    piv_calib_t c;
    char err[256] = "";
    ck_assert_int_eq (piv_calib_parse ("scale=0.02mm/px dt=2ms", &c, err, sizeof err), 0);
    const double omega = -0.01 / 2e-3;
    piv_flow_t flow;
    piv_field_t *exact = s_sampled ("rotation:0.01", 512, 16, 0, 1, &flow);
    double w = s_mean_vorticity (exact, &c);
    ck_assert_msg (fabs (w / (2 * omega) - 1) < 0.005, "exact field: %g 1/s", w);
    piv_field_destroy (&exact);

    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = synth.height = 512;
    piv_image_t *a, *b;
    ck_assert_int_eq (piv_synth_pair (&synth, &flow, &a, &b, err, sizeof err), 0);
    piv_settings_t settings;
    piv_settings_init (&settings);
    ck_assert_int_eq (piv_settings_set_passes (&settings, "64,32", err, sizeof err), 0);
    piv_t *piv = piv_new (&settings, err, sizeof err);
    ck_assert_msg (piv != NULL, "%s", err);
    piv_field_t *measured = piv_process (piv, a, b, err, sizeof err);
    ck_assert_msg (measured != NULL, "%s", err);
    w = s_mean_vorticity (measured, &c);
    fprintf (stderr, "solid rotation, real PIV: mean vorticity %.4f 1/s, 2 Omega %.4f 1/s\n", w,
             2 * omega);
    ck_assert_msg (fabs (w / (2 * omega) - 1) < 0.02, "PIV field: %g 1/s", w);
    piv_field_destroy (&measured);
    piv_destroy (&piv);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
}
END_TEST

// ---------------------------------------------------------------------------
// Statistics

// A random field on an nx x ny grid (step 16, window 32, first point at
// 16, 16): u around 100 + i, v correlated with u; about 10 % INVALID, 5 %
// REPLACED; point 0 always INVALID (a point that never has a sample).
static piv_field_t *
s_random_field (int nx, int ny, uint64_t *seed)
{
    piv_field_t *f = piv_field_new (nx, ny);
    f->step = 16;
    f->window = 32;
    for (int k = 0; k < nx * ny; k++) {
        f->x[k] = (float) (16 + 16 * (k % nx));
        f->y[k] = (float) (16 + 16 * (k / nx));
        double a = tu_gauss (seed), b = tu_gauss (seed), r = tu_uniform (seed);
        f->u[k] = (float) (100 + k % nx + 0.5 * a);
        f->v[k] = (float) (-1 + 0.3 * a + 0.2 * b);
        f->peak_ratio[k] = (float) (1.5 + r);
        f->flags[k] = k == 0 || r < 0.1 ? PIV_FLAG_INVALID : r < 0.15 ? PIV_FLAG_REPLACED : 0;
        if (f->flags[k] == PIV_FLAG_INVALID)
            f->u[k] = f->v[k] = 0;
    }
    return f;
}

// |got - want| within 1e-9 of 'scale'.
#define S_CLOSE(got, want, scale)                                                                  \
    ck_assert_msg (fabs ((got) - (want)) <= 1e-9 * (scale), "%s = %.17g, direct %.17g", #got,      \
                   (double) (got), (double) (want))

// Welford against a direct two-pass computation over the same samples
// (valid and replaced vectors): counts exact, each kind counted apart,
// mean, RMS, mean(u'v') and mean vorticity within 1e-9; the valid fraction
// of the valid ones alone.
START_TEST (statistics_match_a_direct_two_pass_computation)
{
    enum { NX = 6, NY = 5, N = NX * NY, FIELDS = 300 };
    uint64_t seed = 7;
    piv_field_t *fields[FIELDS];
    float *w = malloc (sizeof (float) * N * FIELDS);
    piv_stats_t *st = NULL;
    for (int f = 0; f < FIELDS; f++) {
        fields[f] = s_random_field (NX, NY, &seed);
        piv_field_derive (fields[f], &(piv_derived_t){.vorticity = w + f * N});
        if (!st)
            st = piv_stats_new (fields[0]);
        ck_assert_int_eq (piv_stats_add (st, fields[f], w + f * N), 0);
    }
    double samples = 0;
    for (int k = 0; k < N; k++) {
        double su = 0, sv = 0, sw = 0, n = 0, nw = 0, nv = 0;
        for (int f = 0; f < FIELDS; f++) {
            nv += fields[f]->flags[k] == PIV_FLAG_VALID;
            if (fields[f]->flags[k] <= PIV_FLAG_REPLACED)
                su += fields[f]->u[k], sv += fields[f]->v[k], n++;
            if (isfinite (w[f * N + k]))
                sw += w[f * N + k], nw++;
        }
        double mu = su / n, mv = sv / n, quu = 0, qvv = 0, quv = 0;
        for (int f = 0; f < FIELDS; f++)
            if (fields[f]->flags[k] <= PIV_FLAG_REPLACED) {
                double du = fields[f]->u[k] - mu, dv = fields[f]->v[k] - mv;
                quu += du * du, qvv += dv * dv, quv += du * dv;
            }
        piv_stats_point_t pt;
        ck_assert_int_eq (piv_stats_point (st, k, &pt), 0);
        ck_assert_int_eq (pt.count, (int64_t) n);
        ck_assert_int_eq (pt.n_valid, (int64_t) nv);
        ck_assert_int_eq (pt.n_replaced, (int64_t) (n - nv));
        ck_assert_int_eq (pt.vorticity_count, (int64_t) nw);
        ck_assert (pt.x == 16 + 16 * (k % NX) && pt.y == 16 + 16 * (k / NX));
        samples += nv;
        if (n == 0) { // point 0: never a sample
            ck_assert (isnan (pt.u_mean) && isnan (pt.v_mean) && isnan (pt.u_rms) &&
                       isnan (pt.v_rms) && isnan (pt.uv_mean) && isnan (pt.vorticity_mean));
            continue;
        }
        S_CLOSE (pt.u_mean, mu, fabs (mu));
        S_CLOSE (pt.v_mean, mv, fabs (mv));
        S_CLOSE (pt.u_rms, sqrt (quu / n), sqrt (quu / n));
        S_CLOSE (pt.v_rms, sqrt (qvv / n), sqrt (qvv / n));
        S_CLOSE (pt.uv_mean, quv / n, sqrt (quu / n) * sqrt (qvv / n));
        if (nw > 0)
            S_CLOSE (pt.vorticity_mean, sw / nw, fmax (fabs (sw / nw), 1e-3));
        else
            ck_assert (isnan (pt.vorticity_mean));
    }
    piv_stats_summary_t sum;
    piv_stats_summary (st, &sum);
    ck_assert_int_eq (sum.fields, FIELDS);
    S_CLOSE (sum.valid_fraction, samples / ((double) FIELDS * N), 1);
    ck_assert_int_eq (piv_stats_point (st, N, &(piv_stats_point_t){0}), -1);
    int nx, ny, step, window;
    piv_stats_grid (st, &nx, &ny, &step, &window);
    ck_assert (nx == NX && ny == NY && step == 16 && window == 32);
    for (int f = 0; f < FIELDS; f++)
        piv_field_destroy (&fields[f]);
    free (w);
    piv_stats_destroy (&st);
}
END_TEST

// The convergence compares the mean now with the mean at 81 to 90 % of the
// fields counted: RMS of the change over RMS of the mean, as a direct
// computation over the first 'convergence_from' fields gives it.
START_TEST (the_convergence_compares_the_mean_with_the_mean_of_ninety_percent)
{
    enum { NX = 4, NY = 3, N = NX * NY, FIELDS = 237 };
    uint64_t seed = 11;
    piv_field_t *fields[FIELDS];
    piv_stats_t *st = NULL;
    piv_stats_summary_t sum;
    for (int f = 0; f < FIELDS; f++) {
        fields[f] = s_random_field (NX, NY, &seed);
        for (int k = 0; k < N; k++)
            fields[f]->u[k] += (float) (10.0 / (f + 1)); // a mean still drifting
        if (!st) {
            st = piv_stats_new (fields[0]);
            piv_stats_summary (st, &sum);
            ck_assert (sum.fields == 0 && isnan (sum.valid_fraction) && isnan (sum.convergence));
        }
        piv_stats_add (st, fields[f], NULL);
        piv_stats_summary (st, &sum);
        if (f == 0)
            ck_assert (isnan (sum.convergence) && sum.convergence_from == 0);
        if (f >= 20)
            ck_assert_msg (sum.convergence_from >= 0.8 * (f + 1) &&
                               sum.convergence_from <= 0.9 * (f + 1),
                           "%d fields compared with %lld", f + 1, (long long) sum.convergence_from);
    }
    double change = 0, mean = 0;
    for (int k = 0; k < N; k++) {
        double u[2] = {0, 0}, v[2] = {0, 0}, n[2] = {0, 0};
        for (int f = 0; f < FIELDS; f++)
            for (int t = 0; t < 2; t++)
                if (fields[f]->flags[k] <= PIV_FLAG_REPLACED && (t == 0 || f < sum.convergence_from))
                    u[t] += fields[f]->u[k], v[t] += fields[f]->v[k], n[t]++;
        if (n[1] == 0)
            continue;
        double du = u[0] / n[0] - u[1] / n[1], dv = v[0] / n[0] - v[1] / n[1];
        change += du * du + dv * dv;
        mean += u[0] / n[0] * u[0] / n[0] + v[0] / n[0] * v[0] / n[0];
    }
    fprintf (stderr, "convergence after %d fields: %.3g from %lld\n", FIELDS, sum.convergence,
             (long long) sum.convergence_from);
    S_CLOSE (sum.convergence, sqrt (change / mean), sqrt (change / mean));
    ck_assert_double_gt (sum.convergence, 0);
    for (int f = 0; f < FIELDS; f++)
        piv_field_destroy (&fields[f]);
    piv_stats_destroy (&st);
    // The same field again and again: no change at all.
    seed = 3;
    piv_field_t *same = s_random_field (NX, NY, &seed);
    st = piv_stats_new (same);
    for (int f = 0; f < 30; f++)
        piv_stats_add (st, same, NULL);
    piv_stats_summary (st, &sum);
    ck_assert (sum.convergence == 0 && sum.convergence_from >= 24 && sum.convergence_from <= 27);
    piv_stats_destroy (&st);
    piv_field_destroy (&same);
}
END_TEST

// Fields of another grid are not counted: a different grid is another
// series.
START_TEST (a_field_of_another_grid_does_not_fit)
{
    uint64_t seed = 5;
    piv_field_t *f = s_random_field (5, 4, &seed);
    piv_stats_t *st = piv_stats_new (f);
    ck_assert_int_eq (piv_stats_fits (st, f), 1);
    for (int change = 0; change < 4; change++) {
        piv_field_t *g = change == 0 ? s_random_field (4, 4, &seed) : piv_field_dup (f);
        if (change == 1)
            g->step = 8;
        if (change == 2)
            g->window = 64;
        if (change == 3)
            g->x[0] = 8;
        ck_assert_int_eq (piv_stats_fits (st, g), 0);
        ck_assert_int_eq (piv_stats_add (st, g, NULL), -1);
        piv_field_destroy (&g);
    }
    piv_stats_summary_t sum;
    piv_stats_summary (st, &sum);
    ck_assert_int_eq (sum.fields, 0);
    f->step = 0;
    ck_assert_ptr_null (piv_stats_new (f));
    piv_stats_destroy (&st);
    piv_field_destroy (&f);
}
END_TEST

// The state as bytes: encode, decode, encode gives the same bytes; adding
// after a decode gives what adding without it gives; bytes that are not a
// state are refused.
START_TEST (the_statistics_state_is_restored_exactly)
{
    enum { NX = 7, NY = 4, N = NX * NY };
    uint64_t seed = 9;
    piv_field_t *f = s_random_field (NX, NY, &seed);
    piv_stats_t *st = piv_stats_new (f);
    float w[N];
    for (int i = 0; i < 57; i++) {
        piv_field_destroy (&f);
        f = s_random_field (NX, NY, &seed);
        piv_field_derive (f, &(piv_derived_t){.vorticity = w});
        piv_stats_add (st, f, w);
    }
    unsigned char *b1, *b2;
    size_t n1, n2;
    char err[256] = "";
    ck_assert_int_eq (piv_stats_encode (st, &b1, &n1), 0);
    // Version 4: version 2's 104 bytes a point, then the uncertainty's
    // (24 sums, 13 slots of u, v as float32) and the fields in time order.
    ck_assert_uint_eq (n1, 56 + (104 + 8 * 24 + 4 * 13 * 2) * N + 8 * (3 + 13));
    ck_assert (memcmp (b1, "PVS1", 4) == 0 && b1[4] == 4 && b1[8] == NX && b1[12] == NY);
    piv_stats_t *back = piv_stats_decode (b1, n1, err, sizeof err);
    ck_assert_msg (back != NULL, "%s", err);
    ck_assert_int_eq (piv_stats_encode (back, &b2, &n2), 0);
    ck_assert (n1 == n2 && memcmp (b1, b2, n1) == 0);
    free (b2);
    for (int i = 0; i < 40; i++) {
        piv_field_destroy (&f);
        f = s_random_field (NX, NY, &seed);
        piv_field_derive (f, &(piv_derived_t){.vorticity = w});
        piv_stats_add (st, f, w);
        piv_stats_add (back, f, w);
    }
    ck_assert_int_eq (piv_stats_encode (st, &b2, &n2), 0);
    unsigned char *b3;
    size_t n3;
    ck_assert_int_eq (piv_stats_encode (back, &b3, &n3), 0);
    ck_assert (n2 == n3 && memcmp (b2, b3, n2) == 0);
    free (b2);
    free (b3);
    // Not a state.
    unsigned char *bad = malloc (n1 + 1);
    memcpy (bad, b1, n1);
    bad[n1] = 0;
    const struct {
        size_t size;
        int at;
        unsigned char byte;
    } cases[] = {{n1 - 1, -1, 0}, {n1 + 1, -1, 0}, {n1, 0, 'X'}, {n1, 4, 3},
                 {n1, 8, 0},      {n1, 16, 0},     {n1, 32, 3},  {10, -1, 0},
                 {n1, 4, 6},      // no version 6
                 {n1, (int) (56 + 104 * N + 7), 0x80}, // released: far below -1
                 {n1, (int) (56 + 104 * N + 15), 0x80}}; // seq_max below released
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char keep = cases[i].at >= 0 ? bad[cases[i].at] : 0;
        if (cases[i].at >= 0)
            bad[cases[i].at] = cases[i].byte;
        err[0] = '\0';
        ck_assert_msg (piv_stats_decode (bad, cases[i].size, err, sizeof err) == NULL,
                       "case %zu decoded", i);
        ck_assert_msg (strncmp (err, "bad statistics: ", 16) == 0, "%s", err);
        if (cases[i].at >= 0)
            bad[cases[i].at] = keep;
    }
    free (bad);
    // A version 2 state (a checkpoint stored before the uncertainty): the
    // first bytes of version 4's decode, with every figure but the
    // uncertainty's, which is NaN until enough fields come after it is
    // turned on.
    size_t n_v2 = 56 + 104 * N;
    unsigned char *v2 = malloc (n_v2);
    memcpy (v2, b1, n_v2);
    v2[4] = 2;
    piv_stats_t *two = piv_stats_decode (v2, n_v2, err, sizeof err);
    ck_assert_msg (two != NULL, "%s", err);
    piv_stats_t *four = piv_stats_decode (b1, n1, err, sizeof err);
    for (long k = 0; k < N; k++) {
        piv_stats_point_t a, b;
        piv_stats_point (two, k, &a);
        piv_stats_point (four, k, &b);
        ck_assert (a.count == b.count && (!a.count || (a.u_mean == b.u_mean && a.v_rms == b.v_rms)));
        ck_assert (isnan (a.n_eff) && isnan (a.u_mean_uncertainty)
                   && isnan (a.vorticity_mean_uncertainty));
        ck_assert (b.count < 10 || (isfinite (b.n_eff) && b.u_mean_uncertainty > 0));
    }
    // Decoded without it; turned on (as the broker does by default), it
    // counts from the next field.
    ck_assert (!piv_stats_has_uncertainty (two) && piv_stats_has_uncertainty (four));
    ck_assert_int_eq (piv_stats_set_uncertainty (two, 1), 0);
    for (int i = 0; i < 30; i++) {
        piv_field_destroy (&f);
        f = s_random_field (NX, NY, &seed);
        piv_field_derive (f, &(piv_derived_t){.vorticity = w});
        piv_stats_add (two, f, w);
    }
    for (long k = 0; k < N; k++) {
        piv_stats_point_t a;
        piv_stats_point (two, k, &a);
        ck_assert_msg (a.count < 30 || (isfinite (a.n_eff) && a.u_mean_uncertainty > 0
                                        && a.vorticity_mean_uncertainty > 0),
                       "point %ld: %lld samples, n_eff %g", k, (long long) a.count, a.n_eff);
    }
    free (v2);
    piv_stats_destroy (&two);
    piv_stats_destroy (&four);
    // A version 1 state (a checkpoint stored before the replaced counts):
    // version 2's bytes without that array decode, with no replaced samples.
    n1 = n_v2;
    unsigned char *v1 = malloc (n1 - 8 * N);
    memcpy (v1, b1, 56 + 8 * N);
    memcpy (v1 + 56 + 8 * N, b1 + 56 + 16 * N, n1 - 56 - 16 * N);
    v1[4] = 1;
    piv_stats_t *old = piv_stats_decode (v1, n1 - 8 * N, err, sizeof err);
    ck_assert_msg (old != NULL, "%s", err);
    b1[4] = 2; // its first n_v2 bytes: version 2
    piv_stats_t *now = piv_stats_decode (b1, n1, err, sizeof err);
    ck_assert_msg (now != NULL, "%s", err);
    for (long k = 0; k < N; k++) {
        piv_stats_point_t a, b;
        piv_stats_point (old, k, &a);
        piv_stats_point (now, k, &b);
        ck_assert (a.n_replaced == 0 && a.n_valid == b.n_valid && a.count == b.n_valid);
    }
    free (v1);
    piv_stats_destroy (&old);
    piv_stats_destroy (&now);
    free (b1);
    piv_stats_destroy (&back);
    piv_stats_destroy (&st);
    piv_field_destroy (&f);
}
END_TEST

// The next line of 'text' after *pos (without its newline) into line.
static int
s_line (const char *text, size_t *pos, char *line, size_t size)
{
    if (!text[*pos])
        return 0;
    size_t len = strcspn (text + *pos, "\n");
    snprintf (line, size, "%.*s", (int) len, text + *pos);
    *pos += len + (text[*pos + len] ? 1 : 0);
    return 1;
}

// Writes the statistics in 'format' to a file and reads it back whole.
static char *
s_written (const piv_stats_t *st, piv_format_t format, const piv_calib_t *c, const char *header)
{
    const char *path = tu_path (tu_tmpdir (), "stats.out");
    FILE *out = fopen (path, "w");
    ck_assert_ptr_nonnull (out);
    ck_assert_int_eq (piv_stats_write (st, out, format, c, header), 0);
    fclose (out);
    char *text = tu_slurp (path, NULL);
    ck_assert_ptr_nonnull (text);
    return text;
}

// The txt layout: '# ' header lines (the caller's, the calibration, the
// fields, the units of every column), the column line, then one line per
// point "x y u_mean v_mean u_rms v_rms uv_mean count" converted to SI.
START_TEST (the_statistics_text_states_its_units_and_columns)
{
    uint64_t seed = 21;
    piv_field_t *f = s_random_field (3, 2, &seed);
    piv_stats_t *st = piv_stats_new (f);
    for (int i = 0; i < 25; i++) {
        piv_field_destroy (&f);
        f = s_random_field (3, 2, &seed);
        piv_stats_add (st, f, NULL);
    }
    piv_calib_t c;
    char err[256];
    ck_assert_int_eq (piv_calib_parse ("scale=0.02mm/px dt=2ms origin=16,0", &c, err, sizeof err),
                      0);
    char *text = s_written (st, PIV_FORMAT_TXT, &c, "experiment run9\nsettings passes=64,32");
    size_t pos = 0;
    char line[512];
    const char *head[] = {
        "# experiment run9",
        "# settings passes=64,32",
        "# calibration: 0.02 mm/px, dt 2 ms, origin (16, 0) px, y up",
        "# fields: 25, valid fraction ",
        "# units: x y m, u_mean v_mean u_rms v_rms m/s, uv_mean m^2/s^2, count samples",
        "# units: u_mean_uncertainty m/s, v_mean_uncertainty m/s, u_rms_uncertainty m/s, "
        "v_rms_uncertainty m/s, vorticity_mean_uncertainty 1/s, sigma_u_rms m/s, sigma_v_rms "
        "m/s, n_eff 1 (standard uncertainties",
        "# x y u_mean v_mean u_rms v_rms uv_mean count n_valid n_replaced u_mean_uncertainty "
        "v_mean_uncertainty u_rms_uncertainty v_rms_uncertainty vorticity_mean_uncertainty "
        "sigma_u_rms sigma_v_rms n_eff",
    };
    for (int i = 0; i < 7; i++) {
        ck_assert (s_line (text, &pos, line, sizeof line));
        ck_assert_msg (strncmp (line, head[i], strlen (head[i])) == 0, "line %d: '%s'", i, line);
    }
    for (long k = 0; k < 6; k++) {
        ck_assert (s_line (text, &pos, line, sizeof line));
        double col[7];
        long long count;
        char nan_word[8] = "";
        piv_stats_point_t pt;
        piv_stats_point (st, k, &pt);
        if (pt.count == 0) { // point 0
            ck_assert_int_eq (sscanf (line, "%lf %lf %7s", &col[0], &col[1], nan_word), 3);
            ck_assert_str_eq (nan_word, "nan");
            ck_assert (strstr (line, " nan nan nan nan nan 0 0 0") != NULL);
            continue;
        }
        long long valid, replaced;
        double unc[8];
        ck_assert_int_eq (sscanf (line,
                                  "%lf %lf %lf %lf %lf %lf %lf %lld %lld %lld %lf %lf %lf %lf "
                                  "%lf %lf %lf %lf",
                                  &col[0], &col[1], &col[2], &col[3], &col[4], &col[5], &col[6],
                                  &count, &valid, &replaced, &unc[0], &unc[1], &unc[2], &unc[3],
                                  &unc[4], &unc[5], &unc[6], &unc[7]),
                          18);
        // The uncertainty in m/s (25 random fields: n_eff known), never
        // signed; n_eff a count of samples.
        ck_assert_msg (pt.n_eff > 5 && pt.n_eff <= pt.count, "n_eff %g", pt.n_eff);
        S_CLOSE (unc[0], pt.u_mean_uncertainty * 0.01, 1e2 * unc[0]);
        S_CLOSE (unc[1], pt.v_mean_uncertainty * 0.01, 1e2 * unc[1]);
        S_CLOSE (unc[2], pt.u_rms_uncertainty * 0.01, 1e2 * unc[2]);
        S_CLOSE (unc[3], pt.v_rms_uncertainty * 0.01, 1e2 * unc[3]);
        ck_assert (unc[0] > 0 && unc[1] > 0 && isnan (unc[4]) && isnan (unc[5]));
        S_CLOSE (unc[7], pt.n_eff, 1e2 * unc[7]);
        ck_assert_int_eq (count, pt.count);
        ck_assert (valid == pt.n_valid && replaced == pt.n_replaced && valid + replaced == count);
        S_CLOSE (col[0], (pt.x - 16) * 2e-5, 1e-1);
        S_CLOSE (col[1], -pt.y * 2e-5, 1e-1);
        S_CLOSE (col[2], pt.u_mean * 0.01, 1e2 * fabs (col[2]));
        S_CLOSE (col[3], -pt.v_mean * 0.01, 1e2 * fabs (col[3]));
        S_CLOSE (col[4], pt.u_rms * 0.01, 1e2 * col[4]);
        S_CLOSE (col[5], pt.v_rms * 0.01, 1e2 * col[5]);
        S_CLOSE (col[6], -pt.uv_mean * 1e-4, 1e2 * fabs (col[6]));
    }
    ck_assert (!s_line (text, &pos, line, sizeof line));
    free (text);
    // Not calibrated: pixels and frames; Tecplot adds the mean vorticity.
    text = s_written (st, PIV_FORMAT_TECPLOT, NULL, NULL);
    ck_assert (strstr (text, "# calibration: not calibrated (px, frames)\n") == text);
    ck_assert (strstr (text, "# units: x y px, u_mean v_mean u_rms v_rms px/frame, uv_mean "
                             "px^2/frame^2, count samples (n_valid valid and n_replaced replaced "
                             "vectors), vorticity_mean 1/frame\n"));
    ck_assert (strstr (text, "\"count\", \"vorticity_mean\", \"n_valid\", \"n_replaced\", "
                             "\"u_mean_uncertainty\", \"v_mean_uncertainty\", "
                             "\"u_rms_uncertainty\", \"v_rms_uncertainty\", "
                             "\"vorticity_mean_uncertainty\", \"sigma_u_rms\", \"sigma_v_rms\", "
                             "\"n_eff\"\nZONE I=3, J=2, F=POINT\n"));
    ck_assert (strstr (text, "vorticity_mean_uncertainty 1/frame, sigma_u_rms px/frame"));
    free (text);
    piv_stats_destroy (&st);
    piv_field_destroy (&f);
}
END_TEST

// Reads a legacy VTK file with VTK's own reader (python3-vtk9) and prints
// what it found: "DIMS", "TITLE", "P k x y z", "V name k c...".
static char *
s_vtk_read (const char *path)
{
    static const char script[] =
        "import sys\n"
        "from vtkmodules.vtkIOLegacy import vtkStructuredGridReader\n"
        "r = vtkStructuredGridReader(); r.SetFileName(sys.argv[1])\n"
        "r.ReadAllScalarsOn(); r.ReadAllVectorsOn(); r.Update()\n"
        "g = r.GetOutput(); pd = g.GetPointData()\n"
        "print('DIMS', *g.GetDimensions()); print('TITLE', r.GetHeader())\n"
        "for k in range(g.GetNumberOfPoints()): print('P', k, *map(repr, g.GetPoint(k)))\n"
        "for i in range(pd.GetNumberOfArrays()):\n"
        "    a = pd.GetArray(i)\n"
        "    print('A', a.GetName(), a.GetNumberOfTuples(), a.GetNumberOfComponents())\n"
        "    for k in range(a.GetNumberOfTuples()): print('V', a.GetName(), k, *map(repr, "
        "a.GetTuple(k)))\n";
    char *out = malloc (1 << 20);
    char *argv[] = {"/usr/bin/python3", "-c", (char *) script, (char *) path, NULL};
    int rc = tu_run (argv, out, 1 << 20, 60);
    ck_assert_msg (rc == 0, "python3 vtk: %s", out);
    ck_assert_msg (!strstr (out, "ERR|") && !strstr (out, "WARN|"), "vtk complains: %s", out);
    return out;
}

// Component c of tuple k of array 'name' as VTK read it ("points": the
// points); aborts the test if absent.
static double
s_vtk_value (const char *text, const char *name, long k, int c)
{
    char key[64];
    if (strcmp (name, "points") == 0)
        snprintf (key, sizeof key, "\nP %ld ", k);
    else
        snprintf (key, sizeof key, "\nV %s %ld ", name, k);
    const char *p = strstr (text, key);
    ck_assert_msg (p != NULL, "no %s", key + 1);
    p += strlen (key);
    for (int i = 0; i < c; i++)
        p = strchr (p, ' ') + 1;
    return strtod (p, NULL); // "nan" reads as NaN
}

// The VTK files, read back by VTK itself: grid, converted points and
// vectors, derived scalars, flags, holes as NaN; the statistics likewise.
START_TEST (vtk_files_are_read_back_by_vtk)
{
    uint64_t seed = 31;
    piv_flow_t flow;
    piv_field_t *f = s_sampled ("rotation:0.01", 128, 16, 0, 1, &flow); // 7 x 7
    f->flags[12] = PIV_FLAG_INVALID;
    f->flags[3] = PIV_FLAG_REPLACED;
    for (int k = 0; k < 49; k++)
        f->peak_ratio[k] = (float) (2 + k);
    piv_calib_t c;
    char err[256];
    ck_assert_int_eq (piv_calib_parse ("scale=0.02mm/px dt=2ms", &c, err, sizeof err), 0);
    const char *path = tu_path (tu_tmpdir (), "field.vtk");
    FILE *out = fopen (path, "w");
    ck_assert_int_eq (piv_field_write_vtk (f, out, &c, "pair run9/a0001\nsecond line"), 0);
    fclose (out);
    char *got = s_vtk_read (path);
    ck_assert_msg (strstr (got, "DIMS 7 7 1\n"), "%s", got);
    ck_assert (strstr (got, "TITLE pair run9/a0001; second line; pivfarm vector field in m, m/s, "
                            "1/s; calibration 0.02 mm/px, dt 2 ms, origin (0, 0) px, y up\n"));
    float w[49];
    int finite = 0;
    piv_field_derive (f, &(piv_derived_t){.vorticity = w});
    for (int k = 0; k < 49; k++) {
        ck_assert (fabs (s_vtk_value (got, "points", k, 0) - f->x[k] * 2e-5) < 1e-9);
        ck_assert (fabs (s_vtk_value (got, "points", k, 1) + f->y[k] * 2e-5) < 1e-9);
        double u = s_vtk_value (got, "velocity", k, 0), v = s_vtk_value (got, "velocity", k, 1);
        double wv = s_vtk_value (got, "vorticity", k, 0);
        ck_assert_int_eq ((int) s_vtk_value (got, "flags", k, 0), f->flags[k]);
        ck_assert (s_vtk_value (got, "peak_ratio", k, 0) == 2 + k);
        ck_assert (isnan (wv) == isnan (w[k]));
        if (k == 12) {
            ck_assert (isnan (u) && isnan (v) && isnan (s_vtk_value (got, "speed", k, 0)));
            continue;
        }
        ck_assert (fabs (u - f->u[k] * 0.01) < 1e-7 && fabs (v + f->v[k] * 0.01) < 1e-7);
        ck_assert (fabs (s_vtk_value (got, "speed", k, 0) - hypot (u, v)) < 1e-7);
        finite += !isnan (wv);
        if (!isnan (wv))
            ck_assert_msg (fabs (wv + 10) < 1e-3, "vorticity %g 1/s", wv); // 2 Omega, y up
    }
    // All but the hole and (5, 0), (6, 1): their lines meet the hole on one
    // side and the border on the other. The rest of the border: one-sided.
    ck_assert_int_eq (finite, 7 * 7 - 3);
    free (got);
    // piv_field_write's VTK: the same file, in image units.
    char *bytes[2];
    for (int i = 0; i < 2; i++) {
        out = fopen (path, "w");
        ck_assert_int_eq (i ? piv_field_write (f, out, PIV_FORMAT_VTK, "t")
                            : piv_field_write_vtk (f, out, NULL, "t"),
                          0);
        fclose (out);
        bytes[i] = tu_slurp (path, NULL);
    }
    ck_assert_str_eq (bytes[0], bytes[1]);
    free (bytes[0]);
    free (bytes[1]);
    got = s_vtk_read (path);
    ck_assert (strstr (got, "TITLE t; pivfarm vector field in px, px/frame, 1/frame; "
                            "calibration not calibrated (px, frames)\n"));
    ck_assert (fabs (s_vtk_value (got, "vorticity", 29, 0) - 0.02) < 1e-6);
    free (got);
    // The statistics.
    piv_field_t *r = s_random_field (4, 3, &seed);
    piv_stats_t *st = piv_stats_new (r);
    for (int i = 0; i < 10; i++) {
        piv_field_destroy (&r);
        r = s_random_field (4, 3, &seed);
        piv_stats_add (st, r, NULL);
    }
    out = fopen (path, "w");
    ck_assert_int_eq (piv_stats_write (st, out, PIV_FORMAT_VTK, &c, "run9"), 0);
    fclose (out);
    got = s_vtk_read (path);
    ck_assert (strstr (got, "DIMS 4 3 1\n"));
    ck_assert (
        strstr (got, "TITLE run9; pivfarm statistics of 10 fields (uv_mean m^2/s^2) in m, m/s"));
    for (int k = 0; k < 12; k++) {
        piv_stats_point_t pt;
        piv_stats_point (st, k, &pt);
        ck_assert_int_eq ((int) s_vtk_value (got, "count", k, 0), (int) pt.count);
        double u = s_vtk_value (got, "velocity_mean", k, 0);
        ck_assert (isnan (u) == (pt.count == 0));
        ck_assert (isnan (s_vtk_value (got, "vorticity_mean", k, 0))); // none given
        if (pt.count) {
            ck_assert (fabs (u - pt.u_mean * 0.01) < 1e-6);
            ck_assert (fabs (s_vtk_value (got, "u_rms", k, 0) - pt.u_rms * 0.01) < 1e-7);
            ck_assert (fabs (s_vtk_value (got, "uv_mean", k, 0) + pt.uv_mean * 1e-4) < 1e-9);
        }
    }
    free (got);
    piv_stats_destroy (&st);
    piv_field_destroy (&r);
    piv_field_destroy (&f);
}
END_TEST

// A random stereo field: s_random_field's with w around 3 - 0.2 i, made to
// correlate with u (and so with v), and a residual.
static piv_field_t *
s_random_stereo_field (int nx, int ny, uint64_t *seed)
{
    piv_field_t *f = s_random_field (nx, ny, seed);
    ck_assert_int_eq (piv_field_add_w (f), 0);
    for (int k = 0; k < nx * ny; k++) {
        f->w[k] = (float) (3 - 0.2 * (k % nx) + 0.4 * (f->u[k] - 100 - k % nx)
                           + 0.2 * tu_gauss (seed));
        f->residual[k] = (float) (0.1 * tu_uniform (seed));
    }
    return f;
}

// A stereo series: mean w, w_rms, mean(u'w'), mean(v'w') as a direct
// two-pass computation gives them; a planar field does not fit it; its
// state (version 3) comes back to the same bytes; the text, Tecplot and
// VTK files carry the w figures after the planar ones, converted as u
// (v'w' with v's sign); a field's VTK velocity has w as its third
// component and the residual as a scalar.
START_TEST (a_stereo_series_has_the_statistics_of_w)
{
    enum { NX = 4, NY = 3, N = NX * NY, FIELDS = 200 };
    uint64_t seed = 11;
    piv_field_t *fields[FIELDS];
    piv_stats_t *st = NULL;
    for (int f = 0; f < FIELDS; f++) {
        fields[f] = s_random_stereo_field (NX, NY, &seed);
        if (!st)
            st = piv_stats_new (fields[0]);
        ck_assert_int_eq (piv_stats_add (st, fields[f], NULL), 0);
    }
    ck_assert (piv_stats_has_w (st));
    for (int k = 1; k < N; k++) {
        double su = 0, sv = 0, sw = 0, n = 0;
        for (int f = 0; f < FIELDS; f++)
            if (fields[f]->flags[k] <= PIV_FLAG_REPLACED)
                su += fields[f]->u[k], sv += fields[f]->v[k], sw += fields[f]->w[k], n++;
        double mu = su / n, mv = sv / n, mw = sw / n, qww = 0, quw = 0, qvw = 0;
        for (int f = 0; f < FIELDS; f++)
            if (fields[f]->flags[k] <= PIV_FLAG_REPLACED) {
                double du = fields[f]->u[k] - mu, dv = fields[f]->v[k] - mv,
                       dw = fields[f]->w[k] - mw;
                qww += dw * dw, quw += du * dw, qvw += dv * dw;
            }
        piv_stats_point_t pt;
        ck_assert_int_eq (piv_stats_point (st, k, &pt), 0);
        ck_assert (pt.has_w);
        S_CLOSE (pt.w_mean, mw, fabs (mw));
        S_CLOSE (pt.w_rms, sqrt (qww / n), sqrt (qww / n));
        S_CLOSE (pt.uw_mean, quw / n, sqrt (qww / n));
        S_CLOSE (pt.vw_mean, qvw / n, sqrt (qww / n));
        ck_assert_msg (quw > 0 && qvw > 0, "the w made correlates"); // not a vacuous 0
    }
    piv_stats_point_t none;
    piv_stats_point (st, 0, &none); // point 0: never a sample
    ck_assert (none.has_w && isnan (none.w_mean) && isnan (none.vw_mean));
    // A planar field on the same grid is another series; and the reverse.
    piv_field_t *planar = s_random_field (NX, NY, &seed);
    ck_assert (!piv_stats_fits (st, planar));
    piv_stats_t *flat = piv_stats_new (planar);
    ck_assert (!piv_stats_has_w (flat) && !piv_stats_fits (flat, fields[0]));
    piv_stats_point (flat, 5, &none);
    ck_assert (!none.has_w && isnan (none.w_mean));
    piv_stats_destroy (&flat);
    piv_field_destroy (&planar);
    // The state: version 3, 4 more sums a point, back to the same bytes.
    unsigned char *b1, *b2;
    size_t n1, n2;
    char err[256];
    ck_assert_int_eq (piv_stats_encode (st, &b1, &n1), 0);
    ck_assert_int_eq (b1[4], 5);
    ck_assert_uint_eq (n1, 56 + (104 + 32 + 8 * 24 + 4 * 13 * 3) * N + 8 * (3 + 13));
    piv_stats_t *back = piv_stats_decode (b1, n1, err, sizeof err);
    ck_assert_msg (back != NULL, "%s", err);
    ck_assert (piv_stats_has_w (back));
    ck_assert_int_eq (piv_stats_encode (back, &b2, &n2), 0);
    ck_assert (n1 == n2 && memcmp (b1, b2, n1) == 0);
    free (b1);
    free (b2);
    piv_stats_destroy (&back);
    // The files, in m/s with y up.
    piv_calib_t c;
    ck_assert_int_eq (piv_calib_parse ("scale=0.02mm/px dt=2ms", &c, err, sizeof err), 0);
    char *text = s_written (st, PIV_FORMAT_TXT, &c, NULL);
    ck_assert (strstr (text, "# units: w_mean w_rms m/s, uw_mean vw_mean m^2/s^2"));
    const char *names = "# x y u_mean v_mean u_rms v_rms uv_mean count n_valid n_replaced "
                        "w_mean w_rms uw_mean vw_mean u_mean_uncertainty v_mean_uncertainty "
                        "u_rms_uncertainty v_rms_uncertainty vorticity_mean_uncertainty "
                        "w_mean_uncertainty w_rms_uncertainty sigma_u_rms sigma_v_rms n_eff\n";
    const char *row = strstr (text, names);
    ck_assert_msg (row != NULL, "%.300s", text);
    row += strlen (names);
    for (int k = 0; k < N; k++) {
        double col[24];
        char nan_word[8];
        piv_stats_point_t pt;
        piv_stats_point (st, k, &pt);
        const char *eol = strchr (row, '\n');
        if (k == 0) {
            ck_assert (sscanf (row, "%lf %lf %7s", &col[0], &col[1], nan_word) == 3);
            row = eol + 1;
            continue;
        }
        for (int i = 0; i < 24; i++)
            col[i] = strtod (row, (char **) &row);
        ck_assert (row == eol);
        row = eol + 1;
        S_CLOSE (col[10], pt.w_mean * 0.01, 1e2 * fabs (col[10]));
        S_CLOSE (col[11], pt.w_rms * 0.01, 1e2 * col[11]);
        S_CLOSE (col[12], pt.uw_mean * 1e-4, 1e2 * fabs (col[12]));
        S_CLOSE (col[13], -pt.vw_mean * 1e-4, 1e2 * fabs (col[13])); // v up, w not flipped
        // w's uncertainty: 200 independent fields, a positive m/s.
        ck_assert_msg (pt.w_mean_uncertainty > 0 && pt.n_eff > 100, "n_eff %g", pt.n_eff);
        S_CLOSE (col[19], pt.w_mean_uncertainty * 0.01, 1e2 * col[19]);
        S_CLOSE (col[20], pt.w_rms_uncertainty * 0.01, 1e2 * col[20]);
        S_CLOSE (col[23], pt.n_eff, 1e2 * col[23]);
    }
    free (text);
    text = s_written (st, PIV_FORMAT_TECPLOT, NULL, NULL);
    ck_assert (strstr (text, "\"n_valid\", \"n_replaced\", \"w_mean\", \"w_rms\", \"uw_mean\", "
                             "\"vw_mean\", \"u_mean_uncertainty\""));
    free (text);
    const char *path = tu_path (tu_tmpdir (), "stereo.vtk");
    FILE *out = fopen (path, "w");
    ck_assert_int_eq (piv_stats_write (st, out, PIV_FORMAT_VTK, &c, "run9"), 0);
    fclose (out);
    char *got = s_vtk_read (path);
    for (int k = 1; k < N; k++) {
        piv_stats_point_t pt;
        piv_stats_point (st, k, &pt);
        ck_assert (fabs (s_vtk_value (got, "velocity_mean", k, 2) - pt.w_mean * 0.01) < 1e-6);
        ck_assert (fabs (s_vtk_value (got, "w_rms", k, 0) - pt.w_rms * 0.01) < 1e-7);
        ck_assert (fabs (s_vtk_value (got, "vw_mean", k, 0) + pt.vw_mean * 1e-4) < 1e-9);
        ck_assert (fabs (s_vtk_value (got, "w_mean_uncertainty", k, 0)
                         - pt.w_mean_uncertainty * 0.01) < 1e-7);
        ck_assert (fabs (s_vtk_value (got, "n_eff", k, 0) - pt.n_eff) < 1e-3 * pt.n_eff);
    }
    free (got);
    piv_field_t *f = fields[FIELDS - 1];
    out = fopen (path, "w");
    ck_assert_int_eq (piv_field_write_vtk (f, out, &c, "stereo pair"), 0);
    fclose (out);
    got = s_vtk_read (path);
    for (int k = 0; k < N; k++) {
        double w = s_vtk_value (got, "velocity", k, 2);
        ck_assert (f->flags[k] == PIV_FLAG_INVALID ? isnan (w) : fabs (w - f->w[k] * 0.01) < 1e-7);
        ck_assert (fabs (s_vtk_value (got, "residual", k, 0) - f->residual[k]) < 1e-7);
    }
    free (got);
    for (int i = 0; i < FIELDS; i++)
        piv_field_destroy (&fields[i]);
    piv_stats_destroy (&st);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("units");
    TCase *calib = tcase_create ("calibration");
    tcase_add_test (calib, every_accepted_calibration_form_means_its_value);
    tcase_add_test (calib, bad_calibration_values_are_refused_naming_the_key);
    tcase_add_test (calib, the_calibration_text_reads_back_exactly);
    tcase_add_test (calib, a_recorded_origin_outside_the_frames_reads_back_and_a_typed_one_is_refused);
    tcase_add_test (calib, the_calibration_text_gives_the_values_as_typed);
    tcase_add_test (calib, the_calibration_keys_of_the_configuration_follow_the_rules);
    tcase_add_test (calib, conversions_follow_the_scale_and_the_direction_of_y);
    suite_add_tcase (suite, calib);
    TCase *derived = tcase_create ("derived");
    tcase_set_timeout (derived, 60);
    tcase_add_test (derived, the_default_stencil_has_the_best_error_under_measurement_noise);
    tcase_add_test (derived, derived_quantities_are_defined_up_to_the_border_and_holes);
    tcase_add_test (derived, the_border_has_values_and_the_inside_keeps_the_stencils_figures);
    tcase_add_test (derived, the_vorticitys_uncertainty_matches_a_monte_carlo_of_perturbed_fields);
    tcase_add_test (derived, a_solid_rotation_has_twice_its_angular_velocity_in_1_per_s);
    suite_add_tcase (suite, derived);
    TCase *stats = tcase_create ("statistics");
    tcase_set_timeout (stats, 120);
    tcase_add_test (stats, statistics_match_a_direct_two_pass_computation);
    tcase_add_test (stats, the_convergence_compares_the_mean_with_the_mean_of_ninety_percent);
    tcase_add_test (stats, a_field_of_another_grid_does_not_fit);
    tcase_add_test (stats, the_statistics_state_is_restored_exactly);
    tcase_add_test (stats, the_statistics_text_states_its_units_and_columns);
    tcase_add_test (stats, vtk_files_are_read_back_by_vtk);
    tcase_add_test (stats, a_stereo_series_has_the_statistics_of_w);
    suite_add_tcase (suite, stats);
    return suite;
}

int
main (void)
{
    piv_wisdom_load (piv_wisdom_default_path ());
    return tu_run_suite (s_suite ());
}
