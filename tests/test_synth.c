// test_synth.c — the known flows, their specs and truth files, the synthetic
// image pairs that follow them, and scoring a field against the truth.

#include "piv/flow.h"
#include "piv/piv.h"
#include "piv/synth_stereo.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// Where the Lamb-Oseen azimuthal displacement peaks, in core radii.
#define LAMB_OSEEN_PEAK_RADIUS 1.1209064227785340

static piv_flow_t
s_flow (piv_flow_kind_t kind, double p0, double p1, double xc, double yc)
{
    piv_flow_t flow = {kind, p0, p1, xc, yc};
    return flow;
}

// Renders a pair; fails the test if synthesis fails.
static void
s_pair (const piv_synth_t *synth, const char *spec, piv_image_t **a, piv_image_t **b)
{
    piv_flow_t flow;
    char err[256] = "";
    ck_assert_msg (piv_flow_parse (&flow, spec, synth->width, synth->height, err, sizeof err)
                       == 0,
                   "%s", err);
    ck_assert_msg (piv_synth_pair (synth, &flow, a, b, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq (piv_image_width (*a), synth->width);
    ck_assert_int_eq (piv_image_height (*b), synth->height);
}

static double
s_mean (const piv_image_t *image, int c0, int c1, int r0, int r1)
{
    const float *data = piv_image_cdata (image);
    int width = piv_image_width (image);
    double sum = 0;
    for (int r = r0; r < r1; r++)
        for (int c = c0; c < c1; c++)
            sum += data[(size_t) r * width + c];
    return sum / ((double) (c1 - c0) * (r1 - r0));
}

START_TEST (a_uniform_flow_moves_every_point_alike)
{
    piv_flow_t flow = s_flow (PIV_FLOW_UNIFORM, 3.3, -1.7, 10, 20);
    double u, v;
    piv_flow_eval (&flow, 0, 0, &u, &v);
    ck_assert (u == 3.3 && v == -1.7);
    piv_flow_eval (&flow, 1000, -77.25, &u, &v);
    ck_assert (u == 3.3 && v == -1.7);
}
END_TEST

START_TEST (a_positive_rotation_turns_the_x_axis_towards_y)
{
    piv_flow_t flow = s_flow (PIV_FLOW_ROTATION, 0.01, 0, 100, 50);
    double u, v;
    piv_flow_eval (&flow, 110, 50, &u, &v);
    ck_assert_double_eq_tol (u, 0, 1e-15);
    ck_assert_double_eq_tol (v, 0.1, 1e-15);
    piv_flow_eval (&flow, 100, 60, &u, &v);
    ck_assert_double_eq_tol (u, -0.1, 1e-15);
    ck_assert_double_eq_tol (v, 0, 1e-15);
    piv_flow_eval (&flow, 100, 50, &u, &v);
    ck_assert (u == 0 && v == 0);
}
END_TEST

START_TEST (a_lamb_oseen_vortex_peaks_at_vmax_near_1_12_core_radii)
{
    piv_flow_t flow = s_flow (PIV_FLOW_LAMB_OSEEN, 6, 40, 300, 200);
    double u, v;
    piv_flow_eval (&flow, 300, 200, &u, &v);
    ck_assert (u == 0 && v == 0);

    // The peak: on the +x side it points along +y, as a positive rotation.
    piv_flow_eval (&flow, 300 + LAMB_OSEEN_PEAK_RADIUS * 40, 200, &u, &v);
    ck_assert_double_eq_tol (u, 0, 1e-12);
    ck_assert_double_eq_tol (v, 6, 1e-12);
    piv_flow_eval (&flow, 300, 200 + LAMB_OSEEN_PEAK_RADIUS * 40, &u, &v);
    ck_assert_double_eq_tol (u, -6, 1e-12);
    ck_assert_double_eq_tol (v, 0, 1e-12);

    // Nowhere faster than Vmax; a solid-body core, a 1/r far field.
    double fastest = 0;
    for (double r = 0.01; r < 400; r += 0.01) {
        piv_flow_eval (&flow, 300 - r * 0.6, 200 + r * 0.8, &u, &v);
        fastest = fmax (fastest, hypot (u, v));
    }
    ck_assert_double_le_tol (fastest, 6, 1e-12);
    ck_assert_double_ge (fastest, 6 - 1e-6);
    double u1, v1, u2, v2;
    piv_flow_eval (&flow, 300.4, 200, &u1, &v1);
    piv_flow_eval (&flow, 300.8, 200, &u2, &v2);
    ck_assert_double_eq_tol (v2 / v1, 2, 1e-3);
    piv_flow_eval (&flow, 300 + 4000, 200, &u1, &v1);
    piv_flow_eval (&flow, 300 + 8000, 200, &u2, &v2);
    ck_assert_double_eq_tol (v1 / v2, 2, 1e-9);
    ck_assert_double_eq_tol (v1, 6 / 0.63817268633895148 * 40 / 4000, 1e-12);
}
END_TEST

START_TEST (shear_flows_vary_along_y_only)
{
    piv_flow_t shear = s_flow (PIV_FLOW_SHEAR, 0.02, 0, 64, 50);
    double u, v;
    piv_flow_eval (&shear, 7, 60, &u, &v);
    ck_assert_double_eq_tol (u, 0.2, 1e-15);
    ck_assert (v == 0);
    piv_flow_eval (&shear, 900, 40, &u, &v);
    ck_assert_double_eq_tol (u, -0.2, 1e-15);

    piv_flow_t sine = s_flow (PIV_FLOW_SINE, 2.5, 128, 64, 50);
    piv_flow_eval (&sine, 3, 32, &u, &v);
    ck_assert_double_eq_tol (u, 2.5, 1e-12);
    ck_assert (v == 0);
    piv_flow_eval (&sine, 500, 96, &u, &v);
    ck_assert_double_eq_tol (u, -2.5, 1e-12);
    piv_flow_eval (&sine, 500, 128, &u, &v);
    ck_assert_double_eq_tol (u, 0, 1e-12);
}
END_TEST

START_TEST (flow_specs_parse_with_the_centre_in_the_middle_of_the_image)
{
    static const struct {
        const char *spec;
        piv_flow_kind_t kind;
        double p0, p1;
    } cases[] = {
        {"uniform:3.3,-1.7", PIV_FLOW_UNIFORM, 3.3, -1.7},
        {"rotation:0.01", PIV_FLOW_ROTATION, 0.01, 0},
        {"lamb-oseen:6,40", PIV_FLOW_LAMB_OSEEN, 6, 40},
        {"shear:0.02", PIV_FLOW_SHEAR, 0.02, 0},
        {"sine:2.5,128", PIV_FLOW_SINE, 2.5, 128},
        {"uniform:1e-3,+2", PIV_FLOW_UNIFORM, 1e-3, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        piv_flow_t flow;
        char err[256] = "";
        ck_assert_msg (piv_flow_parse (&flow, cases[i].spec, 1024, 768, err, sizeof err) == 0,
                       "%s: %s", cases[i].spec, err);
        ck_assert_int_eq (flow.kind, cases[i].kind);
        ck_assert (flow.p0 == cases[i].p0 && flow.p1 == cases[i].p1);
        // Pixel centres run 0 .. width - 1.
        ck_assert (flow.xc == 511.5 && flow.yc == 383.5);
    }
}
END_TEST

START_TEST (bad_flow_specs_are_refused_naming_the_spec)
{
    static const struct {
        const char *spec;
        const char *cause;
    } cases[] = {
        {"foo:1", "unknown kind (uniform, rotation, lamb-oseen, shear, sine)"},
        {"", "expects kind:numbers"},
        {"Uniform:1,2", "unknown kind"},
        {"uniform", "expects 2 numbers"},
        {"uniform:1", "expects 2 numbers"},
        {"uniform:1,2,3", "expects 2 numbers"},
        {"uniform:1,2,", "expects 2 numbers"},
        {"uniform:1,,2", "expects 2 numbers"},
        {"uniform:1,x", "expects 2 numbers"},
        {"uniform:1,2px", "expects 2 numbers"},
        {"uniform:1,nan", "expects 2 numbers"},
        {"uniform:inf,0", "expects 2 numbers"},
        {"uniform:1e999,0", "expects 2 numbers"},
        {"rotation:", "expects 1 number"},
        {"shear:0.1,2", "expects 1 number"},
        {"lamb-oseen:6,0", "core radius must be positive"},
        {"lamb-oseen:6,-4", "core radius must be positive"},
        {"sine:2,0", "wavelength must not be zero"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        piv_flow_t flow = s_flow (PIV_FLOW_SHEAR, 7, 8, 9, 10);
        char err[256] = "", quoted[64];
        ck_assert_msg (piv_flow_parse (&flow, cases[i].spec, 64, 64, err, sizeof err) == -1,
                       "'%s' accepted", cases[i].spec);
        snprintf (quoted, sizeof quoted, "bad flow '%s'", cases[i].spec);
        ck_assert_msg (strstr (err, quoted) && strstr (err, cases[i].cause), "'%s': %s",
                       cases[i].spec, err);
        ck_assert (flow.kind == PIV_FLOW_SHEAR && flow.p0 == 7 && flow.yc == 10);
    }
}
END_TEST

START_TEST (a_truth_file_round_trips_exactly)
{
    const char *dir = tu_tmpdir ();
    const char *path = tu_path (dir, "truth.flow");
    piv_flow_t kinds[] = {
        s_flow (PIV_FLOW_UNIFORM, 3.3, -1.7, 511.5, 383.5),
        s_flow (PIV_FLOW_ROTATION, 1.0 / 3, 0, M_PI, -M_E),
        s_flow (PIV_FLOW_LAMB_OSEEN, 0.1, 40.000000000000007, 1e-300, 1e300),
        s_flow (PIV_FLOW_SHEAR, -0.02, 0, 0, 0),
        s_flow (PIV_FLOW_SINE, 2.5, 128, 4.9e-324, 1023.5),
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char err[256] = "";
        ck_assert_msg (piv_flow_save (&kinds[i], path, err, sizeof err) == 0, "%s", err);
        piv_flow_t back;
        memset (&back, 0xff, sizeof back);
        ck_assert_msg (piv_flow_load (&back, path, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq (back.kind, kinds[i].kind);
        ck_assert (memcmp (&back.p0, &kinds[i].p0, sizeof (double)) == 0);
        ck_assert (memcmp (&back.p1, &kinds[i].p1, sizeof (double)) == 0);
        ck_assert (memcmp (&back.xc, &kinds[i].xc, sizeof (double)) == 0);
        ck_assert (memcmp (&back.yc, &kinds[i].yc, sizeof (double)) == 0);
    }
    // Hand-written: comments, blank lines, any order, spare blanks.
    const char *text = "# truth\n\nyc 2\n  kind   lamb-oseen \r\np0 6\np1 40\nxc 1\n";
    tu_spit (path, text, strlen (text));
    piv_flow_t flow;
    char err[256] = "";
    ck_assert_msg (piv_flow_load (&flow, path, err, sizeof err) == 0, "%s", err);
    ck_assert (flow.kind == PIV_FLOW_LAMB_OSEEN && flow.p0 == 6 && flow.p1 == 40
               && flow.xc == 1 && flow.yc == 2);
    tu_rmtree (dir);
}
END_TEST

START_TEST (corrupted_truth_files_are_refused_naming_the_file)
{
    static const struct {
        const char *text;
        const char *cause;
    } cases[] = {
        {"kind uniform\np0 1\np1 2\nxc 3\nyc 4\nspeed 9\n", "line 6: unknown key 'speed'"},
        {"kind whirl\np0 1\np1 2\nxc 3\nyc 4\n", "line 1: unknown kind 'whirl'"},
        {"kind uniform\np0 1\np1 2\nxc 3\n", "no 'yc' line"},
        {"kind uniform\np0 1\np1 2x\nxc 3\nyc 4\n", "line 3: '2x' is not a number"},
        {"kind uniform\np0 1\np1\nxc 3\nyc 4\n", "line 3: '' is not a number"},
        {"kind uniform\np0 nan\np1 2\nxc 3\nyc 4\n", "line 2: 'nan' is not a number"},
        {"kind uniform\np0 1\np0 1\np1 2\nxc 3\nyc 4\n", "line 3: 'p0' given twice"},
        {"kind lamb-oseen\np0 1\np1 0\nxc 3\nyc 4\n", "core radius must be positive"},
        {"", "no 'kind' line"},
        {"\x89PNG\r\n\x1a\n", "unknown key"},
    };
    const char *dir = tu_tmpdir ();
    const char *path = tu_path (dir, "bad.flow");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_spit (path, cases[i].text, strlen (cases[i].text));
        piv_flow_t flow = s_flow (PIV_FLOW_SHEAR, 7, 8, 9, 10);
        char err[512] = "", quoted[4200];
        ck_assert_msg (piv_flow_load (&flow, path, err, sizeof err) == -1, "case %zu accepted",
                       i);
        snprintf (quoted, sizeof quoted, "bad flow file '%s'", path);
        ck_assert_msg (strstr (err, quoted) && strstr (err, cases[i].cause), "case %zu: %s", i,
                       err);
        ck_assert (flow.kind == PIV_FLOW_SHEAR && flow.p0 == 7);
    }
    char err[512] = "";
    piv_flow_t flow;
    const char *missing = tu_path (dir, "missing.flow");
    ck_assert (piv_flow_load (&flow, missing, err, sizeof err) == -1);
    ck_assert_msg (strstr (err, missing) && strstr (err, "No such file"), "%s", err);
    const char *nodir = tu_path (dir, "no/such/dir.flow");
    ck_assert (piv_flow_save (&flow, nodir, err, sizeof err) == -1);
    ck_assert_msg (strstr (err, "cannot write") && strstr (err, nodir), "%s", err);
    tu_rmtree (dir);
}
END_TEST

START_TEST (synthetic_pairs_repeat_for_a_seed_and_differ_between_seeds)
{
    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = 160;
    synth.height = 96;
    piv_image_t *a1, *b1, *a2, *b2, *a3, *b3;
    s_pair (&synth, "lamb-oseen:6,20", &a1, &b1);
    s_pair (&synth, "lamb-oseen:6,20", &a2, &b2);
    synth.seed = 2;
    s_pair (&synth, "lamb-oseen:6,20", &a3, &b3);
    size_t bytes = (size_t) 160 * 96 * sizeof (float);
    ck_assert (memcmp (piv_image_cdata (a1), piv_image_cdata (a2), bytes) == 0);
    ck_assert (memcmp (piv_image_cdata (b1), piv_image_cdata (b2), bytes) == 0);
    ck_assert (memcmp (piv_image_cdata (a1), piv_image_cdata (a3), bytes) != 0);
    ck_assert (memcmp (piv_image_cdata (b1), piv_image_cdata (b3), bytes) != 0);
    ck_assert (memcmp (piv_image_cdata (a1), piv_image_cdata (b1), bytes) != 0);
    piv_image_destroy (&a1);
    piv_image_destroy (&b1);
    piv_image_destroy (&a2);
    piv_image_destroy (&b2);
    piv_image_destroy (&a3);
    piv_image_destroy (&b3);
    ck_assert (a1 == NULL && b3 == NULL);
}
END_TEST

START_TEST (an_integer_uniform_shift_moves_frame_b_by_exactly_that)
{
    static const struct {
        const char *spec;
        int dx, dy;
    } cases[] = {{"uniform:4,0", 4, 0}, {"uniform:-3,2", -3, 2}, {"uniform:0,-7", 0, -7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        piv_synth_t synth;
        piv_synth_init (&synth);
        synth.width = 200;
        synth.height = 120;
        synth.noise = 0;
        synth.seed = 7 + i;
        piv_image_t *a, *b;
        s_pair (&synth, cases[i].spec, &a, &b);
        const float *da = piv_image_cdata (a), *db = piv_image_cdata (b);
        int dx = cases[i].dx, dy = cases[i].dy, compared = 0, lit = 0;
        for (int r = 0; r < 120; r++)
            for (int c = 0; c < 200; c++) {
                int cb = c + dx, rb = r + dy;
                if (cb < 0 || cb >= 200 || rb < 0 || rb >= 120)
                    continue;
                float va = da[r * 200 + c], vb = db[rb * 200 + cb];
                ck_assert_msg (va == vb, "%s: A(%d, %d) = %g but B(%d, %d) = %g", cases[i].spec,
                               c, r, va, cb, rb, vb);
                compared++;
                lit += va > 0;
            }
        ck_assert_int_gt (compared, 150 * 100);
        ck_assert_int_gt (lit, compared / 10);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
}
END_TEST

START_TEST (sixteen_bit_pairs_use_the_sixteen_bit_scale)
{
    // The same seed places the same particles: only the scale differs.
    int bits[] = {8, 16};
    double means[2];
    for (int i = 0; i < 2; i++) {
        piv_synth_t synth;
        piv_synth_init (&synth);
        synth.width = synth.height = 128;
        synth.bits = bits[i];
        piv_image_t *a, *b;
        s_pair (&synth, "rotation:0.01", &a, &b);
        double full = bits[i] == 8 ? 255 : 65535, top = 0;
        const float *data = piv_image_cdata (a);
        for (int k = 0; k < 128 * 128; k++) {
            ck_assert (data[k] >= 0 && data[k] <= full && data[k] == floorf (data[k]));
            top = fmax (top, data[k]);
        }
        // The brightest particles peak at 0.8 of full scale, plus noise.
        ck_assert_double_gt (top, 0.6 * full);
        means[i] = s_mean (a, 0, 128, 0, 128);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    ck_assert_double_eq_tol (means[1] / means[0], 65535.0 / 255, 0.02 * 65535 / 255);
}
END_TEST

START_TEST (mean_intensity_grows_in_proportion_to_the_density)
{
    // Each particle adds I0 / erf(h)^2 in all (h = 0.5 / (sigma sqrt 2), the
    // per-axis weights sum to 1 / erf(h)), and E[I0] = 0.75 * 0.8 * 255.
    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = synth.height = 384;
    synth.noise = 0;
    double h = 0.5 / (synth.diameter / 4 * M_SQRT2);
    double per_particle = 0.75 * 0.8 * 255 / (erf (h) * erf (h));
    double means[2], densities[2] = {0.01, 0.04};
    for (int i = 0; i < 2; i++) {
        synth.density = densities[i];
        piv_image_t *a, *b;
        s_pair (&synth, "uniform:2.5,1", &a, &b);
        means[i] = s_mean (a, 0, 384, 0, 384);
        ck_assert_double_eq_tol (means[i], densities[i] * per_particle,
                                 0.06 * densities[i] * per_particle);
        ck_assert_double_eq_tol (s_mean (b, 0, 384, 0, 384), means[i], 0.06 * means[i]);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    ck_assert_double_eq_tol (means[1] / means[0], 4, 0.3);
}
END_TEST

START_TEST (a_blank_frame_holds_clipped_noise_of_the_requested_level)
{
    // Without particles the noise is clipped at zero: half the pixels are
    // zero and the mean square is sigma^2 / 2 (plus rounding).
    int bits[] = {8, 16};
    for (int i = 0; i < 2; i++) {
        piv_synth_t synth;
        piv_synth_init (&synth);
        synth.width = synth.height = 256;
        synth.density = 0;
        synth.noise = 0.05;
        synth.bits = bits[i];
        double sigma = 0.05 * (bits[i] == 8 ? 255 : 65535);
        piv_image_t *a, *b;
        s_pair (&synth, "uniform:1,1", &a, &b);
        const float *da = piv_image_cdata (a), *db = piv_image_cdata (b);
        double sum2 = 0;
        int zeros = 0, same = 0, n = 256 * 256;
        for (int k = 0; k < n; k++) {
            sum2 += (double) da[k] * da[k];
            zeros += da[k] == 0;
            same += da[k] == db[k] && da[k] > 0;
        }
        ck_assert_double_eq_tol (sqrt (2 * sum2 / n), sigma, 0.02 * sigma);
        ck_assert_double_eq_tol (zeros, n / 2, n / 50);
        // A and B have independent noise.
        ck_assert_int_lt (same, n / 10);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
}
END_TEST

START_TEST (particles_fill_the_frame_edges_even_under_large_displacements)
{
    piv_synth_t synth;
    piv_synth_init (&synth);
    synth.width = 256;
    synth.height = 128;
    synth.density = 0.05;
    synth.noise = 0;
    piv_image_t *a, *b;
    // Frame B's left columns come from particles seeded left of the image,
    // frame A's right ones from particles seeded right of it.
    s_pair (&synth, "uniform:24,0", &a, &b);
    double mean = s_mean (a, 0, 256, 0, 128);
    ck_assert_double_gt (s_mean (b, 0, 12, 0, 128), 0.6 * mean);
    ck_assert_double_gt (s_mean (a, 244, 256, 0, 128), 0.6 * mean);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    // A fast rotation: the corners, far from the centre, too.
    s_pair (&synth, "rotation:0.15", &a, &b);
    mean = s_mean (a, 0, 256, 0, 128);
    ck_assert_double_gt (s_mean (a, 0, 16, 0, 16), 0.4 * mean);
    ck_assert_double_gt (s_mean (b, 240, 256, 112, 128), 0.4 * mean);
    ck_assert_double_gt (s_mean (b, 0, 16, 112, 128), 0.4 * mean);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
}
END_TEST

START_TEST (bad_synthesis_settings_are_refused)
{
    static const struct {
        const char *field;
        double value;
        const char *cause;
    } cases[] = {
        {"diameter", 0, "bad particle diameter '0'"},
        {"diameter", 100, "bad particle diameter '100'"},
        {"density", -1, "bad particle density '-1'"},
        {"density", 1e6, "too many"},
        {"noise", -0.1, "bad noise level '-0.1'"},
        {"bits", 12, "bad bit depth '12': must be 8 or 16"},
        {"width", 0, "bad synthetic image size '0x64'"},
    };
    piv_flow_t flow = s_flow (PIV_FLOW_UNIFORM, 1, 1, 0, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        piv_synth_t synth;
        piv_synth_init (&synth);
        synth.width = synth.height = 64;
        if (strcmp (cases[i].field, "diameter") == 0)
            synth.diameter = cases[i].value;
        else if (strcmp (cases[i].field, "density") == 0)
            synth.density = cases[i].value;
        else if (strcmp (cases[i].field, "noise") == 0)
            synth.noise = cases[i].value;
        else if (strcmp (cases[i].field, "bits") == 0)
            synth.bits = (int) cases[i].value;
        else
            synth.width = (int) cases[i].value;
        piv_image_t *a = (piv_image_t *) &flow, *b = a;
        char err[256] = "";
        ck_assert (piv_synth_pair (&synth, &flow, &a, &b, err, sizeof err) == -1);
        ck_assert_msg (strstr (err, cases[i].cause), "%s", err);
        ck_assert (a == NULL && b == NULL);
    }
}
END_TEST

// A 3 x 2 field on a 64 x 64 image against uniform (1, 0):
//   errors (0, 0), (0.5, 0), (0, -0.5) / (-0.375, 0.5), flagged (9, 10),
//   and (3, 4) at x = 2, near the left edge.
static piv_field_t *
s_hand_made_field (void)
{
    piv_field_t *field = piv_field_new (3, 2);
    ck_assert (field != NULL);
    float x[] = {16, 32, 48, 16, 32, 2}, y[] = {16, 16, 16, 48, 48, 48};
    float u[] = {1, 1.5f, 1, 0.625f, 10, 4}, v[] = {0, 0, -0.5f, 0.5f, 10, 4};
    uint8_t flags[] = {0, 1, 0, 0, PIV_FLAG_INVALID, 0};
    for (int k = 0; k < 6; k++) {
        field->x[k] = x[k];
        field->y[k] = y[k];
        field->u[k] = u[k];
        field->v[k] = v[k];
        field->flags[k] = flags[k];
    }
    return field;
}

START_TEST (a_score_gives_exact_errors_of_a_hand_made_field)
{
    piv_field_t *field = s_hand_made_field ();
    piv_flow_t truth = s_flow (PIV_FLOW_UNIFORM, 1, 0, 31.5, 31.5);
    piv_score_t score;

    // Valid and replaced vectors, the whole image.
    ck_assert_int_eq (piv_score (field, &truth, PIV_FLAG_REPLACED, 0, 64, 64, &score), 0);
    ck_assert_int_eq (score.count, 5);
    double uu = 0.25 + 0.140625 + 9, vv = 0.25 + 0.25 + 16;
    ck_assert_double_eq_tol (score.rms, sqrt ((uu + vv) / 5), 1e-12);
    ck_assert_double_eq_tol (score.rms_u, sqrt (uu / 5), 1e-12);
    ck_assert_double_eq_tol (score.rms_v, sqrt (vv / 5), 1e-12);
    ck_assert_double_eq_tol (score.bias_u, (0.5 - 0.375 + 3) / 5, 1e-12);
    ck_assert_double_eq_tol (score.bias_v, (-0.5 + 0.5 + 4) / 5, 1e-12);
    ck_assert_double_eq_tol (score.max_error, 5, 1e-12);

    // A margin of 8 px drops the vector at x = 2.
    ck_assert_int_eq (piv_score (field, &truth, PIV_FLAG_REPLACED, 8, 64, 64, &score), 0);
    ck_assert_int_eq (score.count, 4);
    uu = 0.25 + 0.140625, vv = 0.25 + 0.25;
    ck_assert_double_eq_tol (score.rms, sqrt ((uu + vv) / 4), 1e-12);
    ck_assert_double_eq_tol (score.rms_u, sqrt (uu / 4), 1e-12);
    ck_assert_double_eq_tol (score.rms_v, sqrt (vv / 4), 1e-12);
    ck_assert_double_eq_tol (score.bias_u, 0.125 / 4, 1e-12);
    ck_assert_double_eq_tol (score.bias_v, 0, 1e-12);
    ck_assert_double_eq_tol (score.max_error, 0.625, 1e-12);

    // Valid only: the replaced vector goes too; all flags: the invalid one counts.
    ck_assert_int_eq (piv_score (field, &truth, PIV_FLAG_VALID, 8, 64, 64, &score), 0);
    ck_assert_int_eq (score.count, 3);
    ck_assert_double_eq_tol (score.bias_u, -0.375 / 3, 1e-12);
    ck_assert_int_eq (piv_score (field, &truth, PIV_FLAG_INVALID, 8, 64, 64, &score), 0);
    ck_assert_int_eq (score.count, 5);
    ck_assert_double_eq_tol (score.max_error, hypot (9, 10), 1e-12);
    piv_field_destroy (&field);
}
END_TEST

START_TEST (a_score_margin_counts_from_the_image_edge)
{
    // The image spans -0.5 .. width - 0.5: a 32 px window at the very
    // corner has its centre at 15.5 and is 16 px inside.
    piv_field_t *field = s_hand_made_field ();
    field->x[0] = field->y[0] = 15.5f;
    field->x[2] = field->y[2] = 47.5f;
    field->y[3] = 47;
    piv_flow_t truth = s_flow (PIV_FLOW_UNIFORM, 1, 0, 31.5, 31.5);
    piv_score_t score;
    ck_assert_int_eq (piv_score (field, &truth, PIV_FLAG_VALID, 16, 64, 64, &score), 0);
    ck_assert_int_eq (score.count, 3);
    ck_assert_int_eq (piv_score (field, &truth, PIV_FLAG_VALID, 16.25, 64, 64, &score), 0);
    ck_assert_int_eq (score.count, 1);

    // Nothing left to score: -1 and a zeroed score.
    ck_assert_int_eq (piv_score (field, &truth, PIV_FLAG_VALID, 40, 64, 64, &score), -1);
    ck_assert_int_eq (score.count, 0);
    ck_assert (score.rms == 0 && score.max_error == 0);
    piv_field_destroy (&field);
}
END_TEST

START_TEST (a_score_against_a_synthetic_pair_truth_is_zero_for_the_truth_itself)
{
    // A field holding the truth at its own points scores zero for every kind.
    const char *specs[] = {"uniform:3.3,-1.7", "rotation:0.01", "lamb-oseen:6,40",
                           "shear:0.02", "sine:2.5,128"};
    piv_field_t *field = piv_field_new (8, 8);
    ck_assert (field != NULL);
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        piv_flow_t flow;
        char err[256] = "";
        ck_assert_msg (piv_flow_parse (&flow, specs[i], 256, 256, err, sizeof err) == 0, "%s",
                       err);
        for (int k = 0; k < 64; k++) {
            double u, v;
            field->x[k] = 16 + 32 * (k % 8);
            field->y[k] = 16 + 32 * (k / 8);
            piv_flow_eval (&flow, field->x[k], field->y[k], &u, &v);
            field->u[k] = (float) u;
            field->v[k] = (float) v;
        }
        piv_score_t score;
        ck_assert_int_eq (piv_score (field, &flow, 0, 0, 256, 256, &score), 0);
        ck_assert_int_eq (score.count, 64);
        ck_assert_double_lt (score.max_error, 1e-5);
    }
    piv_field_destroy (&field);
}
END_TEST


// ------------------------------------------------------------ stereo

// The default rig (+-35 deg, 500 mm, 50 mm, 10 um) on images of side px.
static piv_stereo_synth_t
s_rig (int side)
{
    piv_stereo_synth_t rig;
    piv_stereo_synth_init (&rig);
    rig.image.width = rig.image.height = side;
    rig.image.density = 0.05;
    rig.image.diameter = 2.5;
    return rig;
}

static piv_camera_t *
s_camera (const piv_stereo_synth_t *rig, int id)
{
    char err[256] = "";
    piv_camera_t *cam = piv_synth_camera_new (rig, id, err, sizeof err);
    ck_assert_msg (cam != NULL, "%s", err);
    return cam;
}

START_TEST (a_synthetic_camera_projects_points_as_its_geometry_says)
{
    // Camera 1 at +35 deg about Y, 500 mm from the origin, f = 5000 px:
    // X is foreshortened by cos 35 and by the depth D - X sin 35, Y is not,
    // Z moves the image towards the camera's side; camera 2 mirrors X and Z.
    piv_stereo_synth_t rig = s_rig (1024);
    double f = 5000, d = 500, c = cos (35 * M_PI / 180), s = sin (35 * M_PI / 180), cx = 511.5;
    for (int id = 1; id <= 2; id++) {
        piv_camera_t *cam = s_camera (&rig, id);
        double sg = id == 1 ? 1 : -1, col, row;
        ck_assert_int_eq (piv_camera_id (cam), id);
        ck_assert_int_eq (piv_camera_project (cam, 0, 0, 0, &col, &row), 0);
        ck_assert_double_eq_tol (col, cx, 1e-9);
        ck_assert_double_eq_tol (row, cx, 1e-9);
        // On the optical axis: the image's centre at any distance.
        ck_assert_int_eq (piv_camera_project (cam, sg * 100 * s, 0, 100 * c, &col, &row), 0);
        ck_assert_double_eq_tol (col, cx, 1e-9);
        ck_assert_double_eq_tol (row, cx, 1e-9);
        ck_assert_int_eq (piv_camera_project (cam, 20, 0, 0, &col, &row), 0);
        ck_assert_double_eq_tol (col, cx + f * c * 20 / (d - sg * s * 20), 1e-9);
        ck_assert_double_eq_tol (row, cx, 1e-9);
        ck_assert_int_eq (piv_camera_project (cam, 0, 20, 0, &col, &row), 0);
        ck_assert_double_eq_tol (col, cx, 1e-9);
        ck_assert_double_eq_tol (row, cx - f * 20 / d, 1e-9);
        ck_assert_int_eq (piv_camera_project (cam, 0, 0, 2, &col, &row), 0);
        ck_assert_double_eq_tol (col, cx - sg * f * s * 2 / (d - c * 2), 1e-9);
        ck_assert_double_eq_tol (row, cx, 1e-9);
        piv_camera_destroy (&cam);
    }
    // Radial distortion: the image's centre stays, a point off it moves
    // radially by 1 + k1 r^2 in focal lengths.
    rig.k1 = 0.2;
    piv_camera_t *cam = s_camera (&rig, 1);
    double col, row;
    ck_assert_int_eq (piv_camera_project (cam, 0, 0, 0, &col, &row), 0);
    ck_assert_double_eq_tol (col, cx, 1e-9);
    ck_assert_int_eq (piv_camera_project (cam, 0, 40, 0, &col, &row), 0);
    double yn = 40 / d;
    ck_assert_double_eq_tol (col, cx, 1e-9);
    ck_assert_double_eq_tol (row, cx - f * yn * (1 + 0.2 * yn * yn), 1e-9);
    piv_camera_destroy (&cam);
}
END_TEST

START_TEST (stereo_flows_follow_their_specs)
{
    char err[256] = "";
    piv_flow3_t flow;
    double u, v, w;
    ck_assert_msg (piv_flow3_parse (&flow, "uniform:0.3,-0.2,0.1", err, sizeof err) == 0, "%s",
                   err);
    piv_flow3_eval (&flow, 17, -3, 0.4, &u, &v, &w);
    ck_assert (u == 0.3 && v == -0.2 && w == 0.1);

    // The vortex: the planar Lamb-Oseen's peak (about the world origin), w
    // on its axis, falling off over a core radius.
    ck_assert_msg (piv_flow3_parse (&flow, "vortex:0.5,20,0.2", err, sizeof err) == 0, "%s",
                   err);
    piv_flow3_eval (&flow, LAMB_OSEEN_PEAK_RADIUS * 20, 0, 0, &u, &v, &w);
    ck_assert_double_eq_tol (u, 0, 1e-12);
    ck_assert_double_eq_tol (v, 0.5, 1e-12);
    piv_flow3_eval (&flow, 0, 0, 0.3, &u, &v, &w);
    ck_assert (u == 0 && v == 0);
    ck_assert_double_eq_tol (w, 0.2, 1e-15);
    piv_flow3_eval (&flow, 0, 20, 0, &u, &v, &w);
    ck_assert_double_eq_tol (w, 0.2 * exp (-1), 1e-15);
    ck_assert_double_lt (u, 0);

    // w across the sheet.
    ck_assert_msg (piv_flow3_parse (&flow, "wgrad:0.1,0,0.05,0.02", err, sizeof err) == 0, "%s",
                   err);
    piv_flow3_eval (&flow, 5, 5, 0.5, &u, &v, &w);
    ck_assert (u == 0.1 && v == 0);
    ck_assert_double_eq_tol (w, 0.05 + 0.02 * 0.5, 1e-15);
    piv_flow3_eval (&flow, 5, 5, -0.5, &u, &v, &w);
    ck_assert_double_eq_tol (w, 0.05 - 0.02 * 0.5, 1e-15);

    static const char *bad[] = {"uniform:1,2",   "uniform:1,2,3,4", "vortex:1,0,0",
                                "spin:1,2,3",    "uniform",         "wgrad:1,2,3,x",
                                "uniform:1,,3",  "uniform:1,2,inf", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg (piv_flow3_parse (&flow, bad[i], err, sizeof err) == -1, "%s", bad[i]);
        ck_assert_msg (strstr (err, "bad stereo flow '") && strstr (err, bad[i]), "%s", err);
    }
}
END_TEST

START_TEST (bad_stereo_rigs_are_refused)
{
    static const struct {
        const char *field;
        double value;
        const char *cause;
    } cases[] = {
        {"angle", 90, "bad stereo angle '90'"},
        {"angle", -5, "bad stereo angle '-5'"},
        {"focal", 500, "bad stereo focal length '500'"},
        {"pitch", 0, "bad stereo pixel pitch '0'"},
        {"thickness", 0, "bad stereo sheet thickness '0'"},
        {"sheet_z", 200, "bad stereo sheet position '200'"},
        {"k1", NAN, "bad stereo distortion 'nan'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        piv_stereo_synth_t rig = s_rig (64);
        double *field = strcmp (cases[i].field, "angle") == 0       ? &rig.angle
                        : strcmp (cases[i].field, "focal") == 0     ? &rig.focal
                        : strcmp (cases[i].field, "pitch") == 0     ? &rig.pitch
                        : strcmp (cases[i].field, "thickness") == 0 ? &rig.thickness
                        : strcmp (cases[i].field, "sheet_z") == 0   ? &rig.sheet_z
                                                                    : &rig.k1;
        *field = cases[i].value;
        char err[512] = "";
        piv_flow3_t flow;
        ck_assert (piv_flow3_parse (&flow, "uniform:0,0,0", err, sizeof err) == 0);
        piv_image_t *frames[2][2];
        ck_assert_int_eq (piv_stereo_synth_render (&rig, &flow, frames, err, sizeof err), -1);
        ck_assert_msg (strstr (err, cases[i].cause), "%s: %s", cases[i].cause, err);
        ck_assert (frames[0][0] == NULL && frames[1][1] == NULL);
        ck_assert (piv_synth_camera_new (&rig, 1, err, sizeof err) == NULL);
    }
}
END_TEST

START_TEST (the_rig_calibration_reprojects_the_target_points_within_0_01_px)
{
    // Distorted cameras: the pinhole with k1 is the true model, and the
    // evidence should choose it; the file read back reprojects as fitted.
    piv_stereo_synth_t rig = s_rig (1024);
    rig.k1 = 0.1;
    char err[512] = "";
    piv_cameras_t *cal = piv_stereo_synth_rig (&rig, err, sizeof err);
    ck_assert_msg (cal != NULL, "%s", err);
    const char *dir = tu_tmpdir ();
    const char *path = tu_path (dir, "rig.cal");
    ck_assert_msg (piv_cameras_save (cal, path, err, sizeof err) == 0, "%s", err);
    piv_cameras_destroy (&cal);
    cal = piv_cameras_load (path, err, sizeof err);
    ck_assert_msg (cal != NULL, "%s", err);
    ck_assert_int_eq (piv_cameras_count (cal), 2);
    for (int id = 1; id <= 2; id++) {
        size_t n;
        piv_point_t *pts = piv_stereo_synth_points (&rig, id, &n, err, sizeof err);
        ck_assert_msg (pts != NULL, "%s", err);
        ck_assert_uint_ge (n, 7 * 200);
        const piv_camera_t *cam = piv_cameras_find (cal, id);
        ck_assert (cam != NULL);
        piv_camera_info_t info;
        piv_camera_info (cam, &info);
        ck_assert_int_eq (info.planes, 7);
        ck_assert_double_eq (info.bounds[4], -3);
        ck_assert_double_eq (info.bounds[5], 3);
        double rms, max;
        piv_camera_residuals (cam, pts, n, &rms, &max);
        ck_assert_msg (max < 0.01, "camera %d: reprojection max %g px", id, max);
        // The whole image: target points are exact, on every plane.
        double cmin = 1e9, cmax = -1e9;
        for (size_t i = 0; i < n; i++) {
            cmin = fmin (cmin, pts[i].col);
            cmax = fmax (cmax, pts[i].col);
        }
        ck_assert_double_lt (cmin, 60);
        ck_assert_double_gt (cmax, 1024 - 60);
        free (pts);
    }
    piv_cameras_destroy (&cal);
    tu_rmtree (dir);
}
END_TEST

// The engine's field of camera 'id''s pair against the truth projected
// through the true camera's derivatives at each vector's point of the
// sheet: the mean measured and predicted image displacements, and the
// RMS of their difference over valid vectors (px).
static void
s_camera_error (const piv_stereo_synth_t *rig, const piv_flow3_t *flow, int id,
                piv_image_t *frames[2], double mean[2][2], double *rms)
{
    char err[256] = "";
    piv_settings_t settings;
    piv_settings_init (&settings);
    ck_assert (piv_settings_set_passes (&settings, "64,32", err, sizeof err) == 0);
    piv_t *piv = piv_new (&settings, err, sizeof err);
    ck_assert_msg (piv != NULL, "%s", err);
    piv_field_t *field = piv_process (piv, frames[0], frames[1], err, sizeof err);
    ck_assert_msg (field != NULL, "%s", err);
    piv_camera_t *cam = s_camera (rig, id);
    double sum[2][2] = {{0, 0}, {0, 0}}, e2 = 0;
    int n = 0;
    for (int k = 0; k < field->nx * field->ny; k++) {
        if (field->flags[k] != PIV_FLAG_VALID)
            continue;
        double x, y, d[2][3], u, v, w;
        ck_assert_int_eq (piv_camera_unproject (cam, field->x[k], field->y[k], rig->sheet_z, &x, &y),
                          0);
        ck_assert_int_eq (piv_camera_derivatives (cam, x, y, rig->sheet_z, d), 0);
        piv_flow3_eval (flow, x, y, rig->sheet_z, &u, &v, &w);
        double pc = d[0][0] * u + d[0][1] * v + d[0][2] * w;
        double pr = d[1][0] * u + d[1][1] * v + d[1][2] * w;
        sum[0][0] += field->u[k];
        sum[0][1] += field->v[k];
        sum[1][0] += pc;
        sum[1][1] += pr;
        e2 += (field->u[k] - pc) * (field->u[k] - pc) + (field->v[k] - pr) * (field->v[k] - pr);
        n++;
    }
    ck_assert_int_ge (n, 0.95 * field->nx * field->ny);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            mean[i][j] = sum[i][j] / n;
    *rms = sqrt (e2 / n);
    piv_camera_destroy (&cam);
    piv_field_destroy (&field);
    piv_destroy (&piv);
}

START_TEST (each_camera_sees_uniform_u_and_w_where_its_derivatives_put_them)
{
    // U and W: camera 1 sees them add along its columns, camera 2 see them
    // subtract (it looks from the other side of the Z axis).
    piv_stereo_synth_t rig = s_rig (512);
    piv_flow3_t flow;
    char err[512] = "";
    ck_assert (piv_flow3_parse (&flow, "uniform:0.3,0.1,0.2", err, sizeof err) == 0);
    piv_image_t *frames[2][2];
    ck_assert_msg (piv_stereo_synth_render (&rig, &flow, frames, err, sizeof err) == 0, "%s",
                   err);
    double mean[2][2][2], rms[2];
    for (int c = 0; c < 2; c++) {
        s_camera_error (&rig, &flow, c + 1, frames[c], mean[c], &rms[c]);
        ck_assert_msg (fabs (mean[c][0][0] - mean[c][1][0]) < 0.1
                           && fabs (mean[c][0][1] - mean[c][1][1]) < 0.1,
                       "camera %d: mean displacement (%.4f, %.4f) px, the cameras say (%.4f, "
                       "%.4f)",
                       c + 1, mean[c][0][0], mean[c][0][1], mean[c][1][0], mean[c][1][1]);
        ck_assert_msg (rms[c] < 0.1, "camera %d: %.4f px RMS from the projection", c + 1,
                       rms[c]);
        piv_image_destroy (&frames[c][0]);
        piv_image_destroy (&frames[c][1]);
    }
    // W shows: the cameras' column displacements differ by 2 f sin(35) W / D.
    double want = 2 * 5000 * sin (35 * M_PI / 180) * 0.2 / 500;
    ck_assert_double_eq_tol (mean[1][0][0] - mean[0][0][0], want, 0.1);
}
END_TEST

START_TEST (a_vortex_with_axial_flow_and_a_distorted_lens_images_as_the_cameras_say)
{
    piv_stereo_synth_t rig = s_rig (512);
    rig.k1 = 0.2;
    rig.image.seed = 7;
    piv_flow3_t flow;
    char err[512] = "";
    ck_assert (piv_flow3_parse (&flow, "vortex:0.3,10,0.2", err, sizeof err) == 0);
    piv_image_t *frames[2][2];
    ck_assert_msg (piv_stereo_synth_render (&rig, &flow, frames, err, sizeof err) == 0, "%s",
                   err);
    for (int c = 0; c < 2; c++) {
        double mean[2][2], rms;
        s_camera_error (&rig, &flow, c + 1, frames[c], mean, &rms);
        ck_assert_msg (rms < 0.15, "camera %d: %.4f px RMS from the projection", c + 1, rms);
        piv_image_destroy (&frames[c][0]);
        piv_image_destroy (&frames[c][1]);
    }
}
END_TEST

START_TEST (a_misplaced_sheet_moves_its_particles_along_z_only)
{
    // Sheets at Z = -0.5 and +0.5 mm hold the same particles 1 mm apart in
    // Z: each camera's frame A of one against the other moves as the
    // camera's derivatives say of (0, 0, 1) mm, and the truth is on the
    // sheet's plane.
    piv_stereo_synth_t lo = s_rig (512), hi = s_rig (512);
    lo.sheet_z = -0.5;
    hi.sheet_z = 0.5;
    lo.image.noise = hi.image.noise = 0;
    piv_flow3_t flow;
    char err[512] = "";
    ck_assert (piv_flow3_parse (&flow, "uniform:0,0,1", err, sizeof err) == 0);
    piv_image_t *a[2][2], *b[2][2];
    ck_assert_msg (piv_stereo_synth_render (&lo, &flow, a, err, sizeof err) == 0, "%s", err);
    ck_assert_msg (piv_stereo_synth_render (&hi, &flow, b, err, sizeof err) == 0, "%s", err);
    for (int c = 0; c < 2; c++) {
        // The displacement from the sheet at -0.5 to the one at +0.5 is the
        // flow (0, 0, 1) seen from the plane Z = 0 between them.
        piv_image_t *pair[2] = {a[c][0], b[c][0]};
        piv_stereo_synth_t mid = lo;
        mid.sheet_z = 0;
        double mean[2][2], rms;
        s_camera_error (&mid, &flow, c + 1, pair, mean, &rms);
        ck_assert_msg (rms < 0.1, "camera %d: %.4f px RMS from the projection", c + 1, rms);
        ck_assert_double_gt (fabs (mean[0][0]), 5);
        for (int f = 0; f < 2; f++) {
            piv_image_destroy (&a[c][f]);
            piv_image_destroy (&b[c][f]);
        }
    }
    const char *dir = tu_tmpdir ();
    const char *path = tu_path (dir, "p.truth");
    ck_assert_msg (piv_stereo_truth_save (&hi, &flow, 2, path, err, sizeof err) == 0, "%s", err);
    char *text = tu_slurp (path, NULL);
    ck_assert (text != NULL);
    ck_assert_msg (strstr (text, "# flow uniform:0,0,1\n") && strstr (text, "# sheet_z 0.5 "),
                   "%s", text);
    ck_assert_msg (strstr (text, "\n0 0 0.5 0 0 1\n"), "%.400s", text);
    free (text);
    tu_rmtree (dir);
}
END_TEST

// Reads a points file ('X Y Z col row' lines, '#' comments) as written by
// pivfarm-synth --stereo; malloc'd, count in *n.
static piv_point_t *
s_read_points (const char *path, size_t *n)
{
    char *text = tu_slurp (path, NULL);
    ck_assert_msg (text != NULL, "cannot read '%s'", path);
    size_t cap = 1;
    for (const char *c = text; *c; c++)
        cap += *c == '\n';
    piv_point_t *pts = malloc (cap * sizeof *pts);
    ck_assert (pts != NULL);
    *n = 0;
    for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n")) {
        if (line[0] == '#')
            continue;
        piv_point_t p = {0};
        ck_assert_msg (sscanf (line, "%lf %lf %lf %lf %lf", &p.x, &p.y, &p.z, &p.col, &p.row)
                           == 5,
                       "'%s': bad line '%s'", path, line);
        pts[(*n)++] = p;
    }
    free (text);
    return pts;
}

START_TEST (the_stereo_program_writes_both_cameras_pairs_the_calibration_and_the_truth)
{
    const char *dir = tu_tmpdir ();
    char prefix[4096], out[8192];
    snprintf (prefix, sizeof prefix, "%s/run/p", dir);
    char *argv[] = {(char *) tu_bin ("pivfarm-synth"), "--stereo", "-s", "256x192", "-d", "0.05",
                    "--distortion", "0.1", "--angle", "30", "-f", "vortex:0.3,10,0.2", "-c", "2",
                    "-o", prefix, NULL};
    int rc = tu_run (argv, out, sizeof out, 60);
    ck_assert_msg (rc == 0, "exit %d: %s", rc, out);
    char run[4096];
    snprintf (run, sizeof run, "%s", tu_path (dir, "run"));
    ck_assert_int_eq (tu_entries (run), 6);  // cam1 cam2 p.cal p.truth p_cam1/2.points
    for (int c = 1; c <= 2; c++) {
        char cam[4096], cname[8];
        snprintf (cname, sizeof cname, "cam%d", c);
        snprintf (cam, sizeof cam, "%s", tu_path (run, cname));
        ck_assert_int_eq (tu_entries (cam), 4);
        for (int i = 1; i <= 2; i++) {
            char a[4096], b[4096], err[512] = "";
            char name_a[32], name_b[32];
            snprintf (name_a, sizeof name_a, "p_%04d_a.tif", i);
            snprintf (name_b, sizeof name_b, "p_%04d_b.tif", i);
            snprintf (a, sizeof a, "%s", tu_path (cam, name_a));
            snprintf (b, sizeof b, "%s", tu_path (cam, name_b));
            piv_image_t *fa, *fb;
            ck_assert_msg (piv_image_load_pair (a, b, 0, &fa, &fb, err, sizeof err) == 0, "%s",
                           err);
            ck_assert_int_eq (piv_image_width (fa), 256);
            ck_assert_int_eq (piv_image_height (fb), 192);
            ck_assert_int_eq (piv_image_bits (fa), 8);
            // Particles in the frame: the mean is well above the noise's.
            ck_assert_double_gt (s_mean (fa, 0, 256, 0, 192), 5);
            piv_image_destroy (&fa);
            piv_image_destroy (&fb);
        }
    }

    // The calibration reprojects the points written beside it.
    char err[512] = "";
    piv_cameras_t *cal = piv_cameras_load (tu_path (run, "p.cal"), err, sizeof err);
    ck_assert_msg (cal != NULL, "%s", err);
    ck_assert_int_eq (piv_cameras_count (cal), 2);
    for (int id = 1; id <= 2; id++) {
        char name[64];
        snprintf (name, sizeof name, "p_cam%d.points", id);
        size_t n;
        piv_point_t *pts = s_read_points (tu_path (run, name), &n);
        ck_assert_uint_ge (n, 7 * 200);
        double rms, max;
        piv_camera_residuals (piv_cameras_find (cal, id), pts, n, &rms, &max);
        ck_assert_msg (max < 0.01, "camera %d: reprojection max %g px", id, max);
        free (pts);
    }
    piv_cameras_destroy (&cal);

    // The truth: the flow on its grid at the sheet's plane.
    char *text = tu_slurp (tu_path (run, "p.truth"), NULL);
    ck_assert (text != NULL);
    ck_assert_msg (strstr (text, "# flow vortex:0.3,10,0.2\n") && strstr (text, "# x y z u v w\n"),
                   "%s", text);
    piv_flow3_t flow;
    ck_assert (piv_flow3_parse (&flow, "vortex:0.3,10,0.2", err, sizeof err) == 0);
    int lines = 0, centre = 0;
    for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n")) {
        if (line[0] == '#')
            continue;
        double x, y, z, u, v, w, tu, tv, tw;
        ck_assert_msg (sscanf (line, "%lf %lf %lf %lf %lf %lf", &x, &y, &z, &u, &v, &w) == 6, "%s",
                       line);
        piv_flow3_eval (&flow, x, y, z, &tu, &tv, &tw);
        ck_assert_double_eq_tol (u, tu, 1e-8);
        ck_assert_double_eq_tol (v, tv, 1e-8);
        ck_assert_double_eq_tol (w, tw, 1e-8);
        ck_assert (z == 0);
        centre += x == 0 && y == 0 && w == 0.2;
        lines++;
    }
    ck_assert_int_ge (lines, 100);
    ck_assert_int_eq (centre, 1);
    free (text);
    tu_rmtree (dir);
}
END_TEST

START_TEST (the_target_images_calibrate_both_cameras_as_they_are)
{
    // pivfarm-calib finds the dots of the target's images, and the camera
    // it fits from them is the true one within the 0.1 px (0.05
    // measured) across the target.
    const char *dir = tu_tmpdir ();
    char prefix[4096], out[16384];
    snprintf (prefix, sizeof prefix, "%s", tu_path (dir, "p"));
    char *synth[] = {(char *) tu_bin ("pivfarm-synth"), "--stereo", "--targets", "-s", "512x512",
                     "--distortion", "0.1", "-o", prefix, NULL};
    int rc = tu_run (synth, out, sizeof out, 60);
    ck_assert_msg (rc == 0, "exit %d: %s", rc, out);
    char targets[4096], *unit = NULL;
    snprintf (targets, sizeof targets, "%s", tu_path (dir, "p_targets"));
    ck_assert_int_eq (tu_entries (targets), 15);
    unit = tu_slurp (tu_path (targets, "spacing"), NULL);
    ck_assert (unit != NULL);
    unit[strcspn (unit, "\n")] = '\0';
    char specs[14][4200], cal[4096];
    char bin[4096];  // tu_bin's buffer is tu_path's too
    snprintf (bin, sizeof bin, "%s", tu_bin ("pivfarm-calib"));
    char *calib[40] = {bin, "--spacing", unit};
    int n = 3;
    for (int id = 1; id <= 2; id++) {
        calib[n++] = "--camera";
        calib[n++] = id == 1 ? "1" : "2";
        for (int z = -3; z <= 3; z++) {
            char name[32];
            snprintf (name, sizeof name, "cam%d_z%d.tif", id, z);
            char *spec = specs[(id - 1) * 7 + z + 3];
            snprintf (spec, sizeof specs[0], "%d:%s", z, tu_path (targets, name));
            calib[n++] = "--image";
            calib[n++] = spec;
        }
    }
    snprintf (cal, sizeof cal, "%s", tu_path (dir, "t.cal"));
    calib[n++] = "-o";
    calib[n++] = cal;
    calib[n] = NULL;
    rc = tu_run (calib, out, sizeof out, 60);
    ck_assert_msg (rc == 0, "exit %d: %s", rc, out);
    char err[512] = "";
    piv_cameras_t *rig = piv_cameras_load (cal, err, sizeof err);
    ck_assert_msg (rig != NULL, "%s", err);
    piv_stereo_synth_t truth = s_rig (512);
    truth.k1 = 0.1;
    double box[4];
    ck_assert (piv_stereo_synth_fov (&truth, 0, box, err, sizeof err) == 0);
    for (int id = 1; id <= 2; id++) {
        piv_camera_t *cam = s_camera (&truth, id);
        const piv_camera_t *fit = piv_cameras_find (rig, id);
        ck_assert (fit != NULL);
        double worst = 0;
        for (int z = -2; z <= 2; z += 2)
            for (int i = 0; i <= 8; i++)
                for (int j = 0; j <= 8; j++) {
                    // Across the target's dots (3/4 of the common field:
                    // beyond them the fit extrapolates).
                    double x = 0.75 * (box[0] + (box[1] - box[0]) * i / 8);
                    double y = 0.75 * (box[2] + (box[3] - box[2]) * j / 8), c1, r1, c2, r2;
                    ck_assert (piv_camera_project (cam, x, y, z, &c1, &r1) == 0);
                    ck_assert (piv_camera_project (fit, x, y, z, &c2, &r2) == 0);
                    worst = fmax (worst, hypot (c1 - c2, r1 - r2));
                }
        ck_assert_msg (worst < 0.1, "camera %d: the fit is %g px from the truth", id, worst);
        piv_camera_destroy (&cam);
    }
    piv_cameras_destroy (&rig);
    free (unit);
    tu_rmtree (dir);
}
END_TEST

START_TEST (bad_stereo_options_are_refused_and_nothing_is_written)
{
    static const struct {
        const char *args[4];
        const char *message;
    } cases[] = {
        {{"--angle", "30"}, "--angle needs --stereo"},
        {{"--targets"}, "--targets needs --stereo"},
        {{"--stereo", "--multipage"}, "--stereo and --multipage exclude each other"},
        {{"--stereo", "--camera"}, "--stereo and --camera exclude each other"},
        {{"--stereo", "-f", "uniform:1,2"}, "bad stereo flow 'uniform:1,2'"},
        {{"--stereo", "-f", "lamb-oseen:1,2"}, "bad stereo flow 'lamb-oseen:1,2'"},
        {{"--stereo", "--focal", "600"}, "bad stereo focal length '600'"},
        {{"--stereo", "--angle", "95"}, "bad --angle '95'"},
        {{"--stereo", "--thickness", "0"}, "bad --thickness '0'"},
        {{"--stereo", "--grid", "x"}, "bad --grid 'x'"},
    };
    const char *dir = tu_tmpdir ();
    char prefix[4096], out[4096];
    snprintf (prefix, sizeof prefix, "%s/p", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[12] = {(char *) tu_bin ("pivfarm-synth"), "-s", "64x64", "-o", prefix};
        int k = 5;
        for (int j = 0; j < 4 && cases[i].args[j]; j++)
            argv[k++] = (char *) cases[i].args[j];
        argv[k] = NULL;
        int rc = tu_run (argv, out, sizeof out, 30);
        ck_assert_msg (rc == 2, "%s: exit %d: %s", cases[i].message, rc, out);
        ck_assert_msg (strstr (out, cases[i].message), "want '%s', got: %s", cases[i].message,
                       out);
        ck_assert_int_eq (tu_entries (dir), 0);
    }
    tu_rmtree (dir);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("synth");
    TCase *flow = tcase_create ("flow");
    tcase_add_test (flow, a_uniform_flow_moves_every_point_alike);
    tcase_add_test (flow, a_positive_rotation_turns_the_x_axis_towards_y);
    tcase_add_test (flow, a_lamb_oseen_vortex_peaks_at_vmax_near_1_12_core_radii);
    tcase_add_test (flow, shear_flows_vary_along_y_only);
    tcase_add_test (flow, flow_specs_parse_with_the_centre_in_the_middle_of_the_image);
    tcase_add_test (flow, bad_flow_specs_are_refused_naming_the_spec);
    tcase_add_test (flow, a_truth_file_round_trips_exactly);
    tcase_add_test (flow, corrupted_truth_files_are_refused_naming_the_file);
    suite_add_tcase (suite, flow);

    TCase *synth = tcase_create ("pairs");
    tcase_set_timeout (synth, 30);
    tcase_add_test (synth, synthetic_pairs_repeat_for_a_seed_and_differ_between_seeds);
    tcase_add_test (synth, an_integer_uniform_shift_moves_frame_b_by_exactly_that);
    tcase_add_test (synth, sixteen_bit_pairs_use_the_sixteen_bit_scale);
    tcase_add_test (synth, mean_intensity_grows_in_proportion_to_the_density);
    tcase_add_test (synth, a_blank_frame_holds_clipped_noise_of_the_requested_level);
    tcase_add_test (synth, particles_fill_the_frame_edges_even_under_large_displacements);
    tcase_add_test (synth, bad_synthesis_settings_are_refused);
    suite_add_tcase (suite, synth);

    TCase *score = tcase_create ("score");
    tcase_add_test (score, a_score_gives_exact_errors_of_a_hand_made_field);
    tcase_add_test (score, a_score_margin_counts_from_the_image_edge);
    tcase_add_test (score, a_score_against_a_synthetic_pair_truth_is_zero_for_the_truth_itself);
    suite_add_tcase (suite, score);

    TCase *stereo = tcase_create ("stereo");
    tcase_set_timeout (stereo, 120);
    tcase_add_test (stereo, a_synthetic_camera_projects_points_as_its_geometry_says);
    tcase_add_test (stereo, stereo_flows_follow_their_specs);
    tcase_add_test (stereo, bad_stereo_rigs_are_refused);
    tcase_add_test (stereo, the_rig_calibration_reprojects_the_target_points_within_0_01_px);
    tcase_add_test (stereo, each_camera_sees_uniform_u_and_w_where_its_derivatives_put_them);
    tcase_add_test (stereo, a_vortex_with_axial_flow_and_a_distorted_lens_images_as_the_cameras_say);
    tcase_add_test (stereo, a_misplaced_sheet_moves_its_particles_along_z_only);
    tcase_add_test (stereo, the_stereo_program_writes_both_cameras_pairs_the_calibration_and_the_truth);
    tcase_add_test (stereo, the_target_images_calibrate_both_cameras_as_they_are);
    tcase_add_test (stereo, bad_stereo_options_are_refused_and_nothing_is_written);
    suite_add_tcase (suite, stereo);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
