// test_units.c — the science on top of the vectors: calibration and units
// (piv/calib.h), derived quantities and the evidence for their stencil
// (piv/derived.h), run statistics, their encoding and the files they are
// written to, read back by real readers (piv/stats.h).

#include "piv/calib.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
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
        {"scale", "0.05 mm/px", 5e-5},
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
    ck_assert_int_eq (piv_calib_format (&c, text, sizeof text), (int)strlen (text));
    ck_assert_str_eq (text, "scale=5.0000000000000002e-05m/px dt=0.001s origin=0,0 y_axis=up");
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

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("units");
    TCase *calib = tcase_create ("calibration");
    tcase_add_test (calib, every_accepted_calibration_form_means_its_value);
    tcase_add_test (calib, bad_calibration_values_are_refused_naming_the_key);
    tcase_add_test (calib, the_calibration_text_reads_back_exactly);
    tcase_add_test (calib, the_calibration_keys_of_the_configuration_follow_the_rules);
    tcase_add_test (calib, conversions_follow_the_scale_and_the_direction_of_y);
    suite_add_tcase (suite, calib);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
