// test_stereo.c — stereo PIV's reconstruction (piv/stereo.h): two
// symmetric pinhole cameras whose truth is known, frames rendered from
// particles on the plane Z = 0 moved by a known displacement, and the real
// particle pair of the 4th PIV Challenge's case E through pivfarm-calib and
// pivfarm-piv --cameras, as a user runs them.

#include "piv/camera.h"
#include "piv/cameras.h"
#include "piv/image.h"
#include "piv/piv.h"
#include "piv/selfcal.h"
#include "piv/stereo.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUN_TIMEOUT 120  // s, for one run of a program
#define PLANES 7        // case E's target planes
#define SIZE 512        // px, the synthetic cameras' frames
#define ANGLE 30.0      // degrees, each synthetic camera off the plane's normal

static char s_dir[4096];    // this test's temporary directory
static piv_sheet_t s_tilt;  // the plane s_render's particles are on (mid-time; zero: Z = 0)
static char s_out[1 << 16];  // stdout and stderr of the last program run

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "%s", tu_tmpdir ());
    s_tilt = (piv_sheet_t){0, 0, 0};
}

static void
s_teardown (void)
{
    tu_rmtree (s_dir);
}

// "<test dir>/<name>" (tu_file's own slots).
static const char *
s_p (const char *name)
{
    return tu_file (s_dir, name);
}

// Runs bin/<program> with args (NULL-terminated); its exit status.
static int
s_run (const char *program, const char *const *args)
{
    return tu_run_bin (program, args, s_out, sizeof s_out, RUN_TIMEOUT);
}

// ------------------------------------------------------ synthetic cameras

// The 3x4 projection of a pinhole camera 600 mm from the origin, turned by
// 'deg' about the world's Y axis, looking at the origin, 4 px per mm there
// (focal length 2400 px), X right and Y up in its SIZE x SIZE image.
static void
s_projection (double deg, double p[3][4])
{
    const double dist = 600, focal = 2400, centre = (SIZE - 1) / 2.0;
    double t = deg * M_PI / 180;
    double c[3] = {dist * sin (t), 0, dist * cos (t)};
    double f[3] = {-c[0] / dist, -c[1] / dist, -c[2] / dist};  // forward
    double down[3] = {0, -1, 0};
    double x[3] = {down[1] * f[2] - down[2] * f[1], down[2] * f[0] - down[0] * f[2],
                   down[0] * f[1] - down[1] * f[0]};
    double nx = sqrt (x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    for (int i = 0; i < 3; i++)
        x[i] /= nx;
    double y[3] = {f[1] * x[2] - f[2] * x[1], f[2] * x[0] - f[0] * x[2], f[0] * x[1] - f[1] * x[0]};
    const double *r[3] = {x, y, f};
    double k[3][3] = {{focal, 0, centre}, {0, focal, centre}, {0, 0, 1}};
    double rt[3][4];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++)
            rt[i][j] = r[i][j];
        rt[i][3] = -(r[i][0] * c[0] + r[i][1] * c[1] + r[i][2] * c[2]);
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            p[i][j] = k[i][0] * rt[0][j] + k[i][1] * rt[1][j] + k[i][2] * rt[2][j];
}

static void
s_apply (const double p[3][4], double x, double y, double z, double *col, double *row)
{
    double h[3];
    for (int i = 0; i < 3; i++)
        h[i] = p[i][0] * x + p[i][1] * y + p[i][2] * z + p[i][3];
    *col = h[0] / h[2];
    *row = h[1] / h[2];
}

// A camera fitted, as a user's would be, to the images of a dot lattice
// (10 mm, +-60 mm) on 3 planes Z = -2, 0, 2 mm projected through p.
static piv_camera_t *
s_fit (const double p[3][4], int id)
{
    piv_point_t pts[13 * 13 * 3];
    size_t n = 0;
    for (int z = -2; z <= 2; z += 2)
        for (int j = -6; j <= 6; j++)
            for (int i = -6; i <= 6; i++) {
                piv_point_t *q = &pts[n++];
                *q = (piv_point_t){10.0 * i, 10.0 * j, z, 0, 0, 0};
                s_apply (p, q->x, q->y, q->z, &q->col, &q->row);
            }
    char err[1024] = "";
    piv_camera_t *cam = piv_camera_fit (PIV_CAMERA_PINHOLE, pts, n, err, sizeof err);
    ck_assert_msg (cam, "%s", err);
    piv_camera_set_id (cam, id);
    return cam;
}

// The rig of two cameras at -ANGLE and +ANGLE, fitted from their points.
static piv_cameras_t *
s_rig (double p[2][3][4])
{
    piv_cameras_t *rig = piv_cameras_new ();
    ck_assert (rig);
    for (int c = 0; c < 2; c++) {
        s_projection (c == 0 ? -ANGLE : ANGLE, p[c]);
        piv_camera_t *cam = s_fit (p[c], c + 1);
        char err[1024] = "";
        ck_assert_msg (piv_cameras_add (rig, &cam, err, sizeof err) == 0, "%s", err);
    }
    return rig;
}

static double
s_phi (double x)
{
    return 0.5 * erfc (-x / M_SQRT2);
}

// Renders particles into a SIZE x SIZE frame through p: each a Gaussian of
// 2.5 px diameter (e^-2; sigma 0.625 px) integrated over the pixels,
// at world (x[k] + dx, y[k] + dy, dz).
static piv_image_t *
s_render (const double p[3][4], const double *x, const double *y, int n, double dx, double dy,
          double dz)
{
    const double sigma = 0.625, peak = 4000;
    piv_image_t *img = piv_image_new (SIZE, SIZE);
    ck_assert (img);
    float *px = piv_image_data (img);
    for (int k = 0; k < n; k++) {
        double col, row;
        double z = s_tilt.z0 + s_tilt.dzdx * x[k] + s_tilt.dzdy * y[k];
        s_apply (p, x[k] + dx, y[k] + dy, z + dz, &col, &row);
        int c0 = (int) floor (col) - 3, r0 = (int) floor (row) - 3;
        for (int r = r0; r <= r0 + 7; r++) {
            if (r < 0 || r >= SIZE)
                continue;
            double wy = s_phi ((r + 0.5 - row) / sigma) - s_phi ((r - 0.5 - row) / sigma);
            for (int c = c0; c <= c0 + 7; c++)
                if (c >= 0 && c < SIZE)
                    px[(long) r * SIZE + c] += (float) (peak * wy *
                                                      (s_phi ((c + 0.5 - col) / sigma) -
                                                       s_phi ((c - 0.5 - col) / sigma)));
        }
    }
    return img;
}

// The four frames of a displacement (u, v, w) mm of particles seeded on
// the plane Z = 0 (a sheet so thin that none leaves it: the other helper's
// renderer, pivfarm-synth --stereo, models the sheet), A and B about the
// particles' mid positions: A1 B1 (camera 1) A2 B2 (camera 2).
static void
s_frames (double p[2][3][4], double u, double v, double w, piv_image_t *fr[4])
{
    // ~0.05 particles a pixel: 4 px per mm, so 0.8 a mm2 over +-90 mm.
    enum { N = 26000 };
    static double x[N], y[N];
    unsigned s = 12345;
    for (int k = 0; k < N; k++) {
        s = s * 1103515245u + 12345u;
        x[k] = -90 + 180.0 * ((s >> 8) & 0xffff) / 65536.0;
        s = s * 1103515245u + 12345u;
        y[k] = -90 + 180.0 * ((s >> 8) & 0xffff) / 65536.0;
    }
    for (int c = 0; c < 2; c++) {
        fr[2 * c] = s_render (p[c], x, y, N, -u / 2, -v / 2, -w / 2);
        fr[2 * c + 1] = s_render (p[c], x, y, N, u / 2, v / 2, w / 2);
    }
}

// The RMS error of the valid vectors away from the field's border (px
// equivalent: mm over the grid's mm per px) in u, v and w; their count.
static long
s_errors (const piv_field3_t *f, double step, double u, double v, double w, double rms[3])
{
    long count = 0;
    double ss[3] = {0, 0, 0};
    for (int j = 1; j < f->ny - 1; j++)
        for (int i = 1; i < f->nx - 1; i++) {
            long k = (long) j * f->nx + i;
            if (f->flags[k] != PIV_FLAG_VALID)
                continue;
            double e[3] = {f->u[k] - u, f->v[k] - v, f->w[k] - w};
            for (int c = 0; c < 3; c++)
                ss[c] += e[c] * e[c];
            count++;
        }
    for (int c = 0; c < 3; c++)
        rms[c] = count ? sqrt (ss[c] / count) / step : NAN;
    return count;
}

static piv_field3_t *
s_stereo (piv_cameras_t *rig, piv_image_t *fr[4], piv_stereo_t **st_p)
{
    piv_settings_t settings;
    piv_settings_init (&settings);
    char err[1024] = "";
    ck_assert (piv_settings_set_passes (&settings, "64,32", err, sizeof err) == 0);
    piv_stereo_t *st = piv_stereo_new (rig, &settings, SIZE, SIZE, NULL, err, sizeof err);
    ck_assert_msg (st, "%s", err);
    piv_field3_t *f = piv_stereo_process (st, fr[0], fr[1], fr[2], fr[3], err, sizeof err);
    ck_assert_msg (f, "%s", err);
    *st_p = st;
    return f;
}

// The field of particles moved by (u, v, w) mm, seen by the symmetric
// rig: the valid vectors inside (most of them) are within tol_uv of (u, v)
// and tol_w of w (px-equivalent: the dewarped grid's pixels). The grid is
// checked as well: what both see within the points' +-60 mm, at about the
// cameras' 4 px per mm (3.7 at 30 degrees: the finer's).
static void
s_check_displacement (double u, double v, double w, double tol_uv, double tol_w)
{
    double p[2][3][4];
    piv_cameras_t *rig = s_rig (p);
    piv_image_t *fr[4];
    s_frames (p, u, v, w, fr);
    piv_stereo_t *st = NULL;
    piv_field3_t *f = s_stereo (rig, fr, &st);
    const piv_stereo_grid_t *g = piv_stereo_grid (st);
    ck_assert_msg (g->step > 0.2 && g->step < 0.3, "step %g mm", g->step);
    ck_assert_msg (g->x0 >= -60 && g->x0 + (g->width - 1) * g->step <= 60 && g->y0 <= 60 &&
                       g->width * g->step > 80 && g->height * g->step > 80,
                   "grid from %g, %g: %dx%d of %g mm", g->x0, g->y0, g->width, g->height,
                   g->step);
    double rms[3];
    long n = s_errors (f, g->step, u, v, w, rms), inside = (long) (f->nx - 2) * (f->ny - 2);
    printf ("stereo synthetic (%.1f, %.1f, %.1f) mm, +-%g deg: %ld of %ld vectors inside "
            "valid, rms error u %.4f v %.4f w %.4f px-equivalent (step %.4f mm)\n",
            u, v, w, ANGLE, n, inside, rms[0], rms[1], rms[2], g->step);
    ck_assert_msg (n > inside * 9 / 10, "%ld of %ld valid", n, inside);
    ck_assert_msg (rms[0] < tol_uv && rms[1] < tol_uv, "u %.4f v %.4f px", rms[0], rms[1]);
    ck_assert_msg (rms[2] < tol_w, "w %.4f px", rms[2]);
    piv_field3_destroy (&f);
    piv_stereo_destroy (&st);
    for (int i = 0; i < 4; i++)
        piv_image_destroy (&fr[i]);
    piv_cameras_destroy (&rig);
}

// An in-plane displacement seen by two symmetric cameras at +-30 degrees
// is recovered within 0.05 px in u and v, and w is nil as it should be.
START_TEST (symmetric_cameras_recover_an_in_plane_displacement_and_no_w)
{
    s_check_displacement (0.8, -0.5, 0, 0.05, 0.05);  // mm: ~3 and 2 px
}
END_TEST

// An out-of-plane displacement: the two cameras see it as opposite
// horizontal motions, and the solution puts it into w, not u. Its
// tolerance is u's times w's geometric factor at +-30 degrees (1 / tan 30 =
// 1.7, rounded up to 2).
START_TEST (symmetric_cameras_recover_an_out_of_plane_displacement)
{
    s_check_displacement (0.3, 0.2, 0.5, 0.05, 0.1);
}
END_TEST

// Particles on a tilted plane 0.4 mm off the calibration's Z = 0 (up to
// ~0.8 mm over the field): self-calibration on the one pair (two instants)
// finds the plane, its slopes included, the disparity then vanishes, and
// the reconstruction on it recovers the displacement as on a plane where
// the calibration put it.
START_TEST (self_calibration_finds_a_tilted_sheet_and_the_reconstruction_uses_it)
{
    const piv_sheet_t truth = {0.4, 0.01, -0.008};
    const double u = 0.8, v = -0.5, w = 0.2;
    s_tilt = truth;
    double p[2][3][4];
    piv_cameras_t *rig = s_rig (p);
    piv_image_t *fr[4];
    s_frames (p, u, v, w, fr);
    piv_selfcal_settings_t settings;
    piv_selfcal_settings_init (&settings);
    const piv_image_t *instants[4] = {fr[0], fr[2], fr[1], fr[3]};  // A1 A2, B1 B2
    piv_selfcal_report_t r;
    char err[1024] = "";
    ck_assert_msg (piv_selfcal_run (rig, &settings, instants, 2, &r, err, sizeof err) == 0, "%s",
                   err);
    piv_sheet_t found;
    piv_cameras_sheet (rig, &found);
    const piv_selfcal_map_t *before = &r.map[0], *after = &r.map[r.best];
    printf ("tilted sheet Z = %.3f + %.3f X + %.3f Y mm: found %.4f + %.5f X + %.5f Y, disparity "
            "%.4f -> %.4f px (%d windows, %d maps)\n",
            truth.z0, truth.dzdx, truth.dzdy, found.z0, found.dzdx, found.dzdy, before->rms,
            after->rms, after->used, r.maps);
    ck_assert_msg (fabs (found.z0 - truth.z0) < 0.02 && fabs (found.dzdx - truth.dzdx) < 5e-4 &&
                       fabs (found.dzdy - truth.dzdy) < 5e-4,
                   "found Z = %g + %g X + %g Y", found.z0, found.dzdx, found.dzdy);
    ck_assert_msg (before->rms > 1 && after->rms < 0.05, "disparity %.4f -> %.4f px", before->rms,
                   after->rms);
    ck_assert (memcmp (&found, &after->sheet, sizeof found) == 0);

    piv_stereo_t *st = NULL;
    piv_field3_t *f = s_stereo (rig, fr, &st);
    double rms[3];
    long n = s_errors (f, piv_stereo_grid (st)->step, u, v, w, rms);
    long inside = (long) (f->nx - 2) * (f->ny - 2);
    printf ("  on it: %ld of %ld vectors valid, rms error u %.4f v %.4f w %.4f px-equivalent\n",
            n, inside, rms[0], rms[1], rms[2]);
    ck_assert_msg (n > inside * 9 / 10, "%ld of %ld valid", n, inside);
    // w within a quarter of the flat sheet's tolerance: leaving out the
    // sheet's slope in each camera's in-plane move (dZ = dzdx dX + dzdy dY)
    // costs 0.05 px of w here.
    ck_assert_msg (rms[0] < 0.05 && rms[1] < 0.05 && rms[2] < 0.025, "u %.4f v %.4f w %.4f px",
                   rms[0], rms[1], rms[2]);
    piv_field3_destroy (&f);
    piv_stereo_destroy (&st);
    for (int i = 0; i < 4; i++)
        piv_image_destroy (&fr[i]);
    piv_cameras_destroy (&rig);
}
END_TEST

// The world position (mm) of the intensity-weighted centre of what is
// brighter than 1 in a dewarped frame on 'grid'; asserts there is some.
static void
s_centre (const piv_image_t *img, const piv_stereo_grid_t *grid, double *xw, double *yw)
{
    const float *px = piv_image_cdata (img);
    double sum = 0, sc = 0, sr = 0;
    for (int r = 0; r < grid->height; r++)
        for (int q = 0; q < grid->width; q++) {
            double a = px[(long) r * grid->width + q];
            if (a > 1) {
                sum += a;
                sc += a * q;
                sr += a * r;
            }
        }
    ck_assert (sum > 0);
    *xw = grid->x0 + sc / sum * grid->step;
    *yw = grid->y0 - sr / sum * grid->step;
}

// A dewarped frame is the camera's frame seen from above: a particle at a
// world point lands at that point's grid pixel in both cameras' dewarped
// frames, and where a camera does not see the plane the frame is black.
START_TEST (both_cameras_dewarp_a_particle_to_its_world_position)
{
    double p[2][3][4];
    piv_cameras_t *rig = s_rig (p);
    double x = 12.3, y = -7.9;
    piv_image_t *fr[2];
    for (int c = 0; c < 2; c++)
        fr[c] = s_render (p[c], &x, &y, 1, 0, 0, 0);
    piv_settings_t settings;
    piv_settings_init (&settings);
    char err[1024] = "";
    piv_stereo_grid_t grid = {-40, 40, 0.25, 321, 321};  // +-40 mm
    piv_stereo_t *st = piv_stereo_new (rig, &settings, SIZE, SIZE, &grid, err, sizeof err);
    ck_assert_msg (st, "%s", err);
    for (int c = 0; c < 2; c++) {
        piv_image_t *out = piv_image_new (grid.width, grid.height);
        ck_assert (piv_stereo_dewarp (st, c, fr[c], out, err, sizeof err) == 0);
        double xw, yw;  // the dewarped particle's centre
        s_centre (out, &grid, &xw, &yw);
        ck_assert_msg (fabs (xw - x) < 0.05 && fabs (yw - y) < 0.05,
                       "camera %d: particle at (%.3f, %.3f) mm, dewarped to (%.3f, %.3f)", c + 1, x,
                       y, xw, yw);
        piv_image_destroy (&out);
        piv_image_destroy (&fr[c]);
    }
    // A grid far beyond both views: nothing seen, the frames black.
    piv_stereo_destroy (&st);
    piv_stereo_grid_t away = {1000, 1040, 0.25, 64, 64};
    st = piv_stereo_new (rig, &settings, SIZE, SIZE, &away, err, sizeof err);
    ck_assert_msg (st, "%s", err);
    piv_image_t *in = piv_image_new (SIZE, SIZE), *out = piv_image_new (64, 64);
    for (long k = 0; k < (long) SIZE * SIZE; k++)
        piv_image_data (in)[k] = 100;
    ck_assert (piv_stereo_dewarp (st, 0, in, out, err, sizeof err) == 0);
    for (long k = 0; k < 64 * 64; k++)
        ck_assert (piv_image_cdata (out)[k] == 0);
    piv_image_destroy (&in);
    piv_image_destroy (&out);
    piv_stereo_destroy (&st);
    piv_cameras_destroy (&rig);
}
END_TEST

// Every interpolator the dewarping can be given puts a particle at its
// world position; a camera's pair dewarped in one sweep (as
// piv_stereo_process does), and on the settings' two threads, gives each
// frame exactly as dewarping it alone; offset, no interpolator, is refused.
START_TEST (every_dewarping_interpolator_dewarps_alike_alone_in_pairs_and_on_threads)
{
    double p[2][3][4];
    piv_cameras_t *rig = s_rig (p);
    double x = -20.6, y = 14.1;
    piv_image_t *fr[2][2];
    for (int c = 0; c < 2; c++)
        for (int f = 0; f < 2; f++)
            fr[c][f] = s_render (p[c], &x, &y, 1, 0.4 * f, -0.3 * f, 0);
    char err[1024] = "";
    piv_stereo_grid_t grid = {-40, 40, 0.25, 321, 321};
    piv_settings_t settings[2];
    piv_stereo_t *st[2];
    for (int t = 0; t < 2; t++) {
        piv_settings_init (&settings[t]);
        settings[t].threads = 1 + t;
        st[t] = piv_stereo_new (rig, &settings[t], SIZE, SIZE, &grid, err, sizeof err);
        ck_assert_msg (st[t], "%s", err);
    }
    ck_assert_int_eq (piv_stereo_dewarp_interp (st[0]), PIV_STEREO_DEWARP);
    ck_assert (piv_stereo_set_dewarp (st[0], PIV_DEFORM_OFFSET, err, sizeof err) == -1);
    ck_assert_msg (strstr (err, "offset"), "%s", err);
    piv_image_t *alone[2], *pair[2];
    for (int f = 0; f < 2; f++) {
        alone[f] = piv_image_new (grid.width, grid.height);
        pair[f] = piv_image_new (grid.width, grid.height);
    }
    size_t bytes = (size_t) grid.width * grid.height * sizeof (float);
    for (int d = PIV_DEFORM_BILINEAR; d < PIV_DEFORM_KINDS; d++)
        for (int t = 0; t < 2; t++) {
            ck_assert (piv_stereo_set_dewarp (st[t], (piv_deform_t) d, err, sizeof err) == 0);
            for (int c = 0; c < 2; c++) {
                for (int f = 0; f < 2; f++)
                    ck_assert (piv_stereo_dewarp (st[0], c, fr[c][f], alone[f], err, sizeof err) ==
                               0);
                ck_assert (piv_stereo_dewarp_pair (st[t], c, fr[c][0], fr[c][1], pair[0], pair[1],
                                                   err, sizeof err) == 0);
                for (int f = 0; f < 2; f++)
                    ck_assert_msg (memcmp (piv_image_cdata (alone[f]), piv_image_cdata (pair[f]),
                                           bytes) == 0,
                                   "%s, %d threads, camera %d, frame %c",
                                   piv_deform_name ((piv_deform_t) d), t + 1, c + 1, "AB"[f]);
                double xw, yw;  // frame A's particle, where the world has it
                s_centre (alone[0], &grid, &xw, &yw);
                ck_assert_msg (fabs (xw - x) < 0.05 && fabs (yw - y) < 0.05,
                               "%s, camera %d: particle at (%.3f, %.3f) mm, dewarped to (%.3f, "
                               "%.3f)",
                               piv_deform_name ((piv_deform_t) d), c + 1, x, y, xw, yw);
            }
        }
    for (int f = 0; f < 2; f++) {
        piv_image_destroy (&alone[f]);
        piv_image_destroy (&pair[f]);
    }
    for (int c = 0; c < 2; c++)
        for (int f = 0; f < 2; f++)
            piv_image_destroy (&fr[c][f]);
    for (int t = 0; t < 2; t++)
        piv_stereo_destroy (&st[t]);
    piv_cameras_destroy (&rig);
}
END_TEST

// ------------------------------------------------------------- program

// Writes the synthetic rig's calibration and frames of (u, v, 0) mm:
// rig.cal, a1.tif b1.tif a2.tif b2.tif in the test's directory.
static void
s_write_case (double u, double v)
{
    double p[2][3][4];
    piv_cameras_t *rig = s_rig (p);
    char err[1024] = "";
    ck_assert_msg (piv_cameras_save (rig, s_p ("rig.cal"), err, sizeof err) == 0, "%s", err);
    piv_image_t *fr[4];
    s_frames (p, u, v, 0, fr);
    const char *names[4] = {"a1.tif", "b1.tif", "a2.tif", "b2.tif"};
    for (int i = 0; i < 4; i++) {
        const piv_image_t *one[1] = {fr[i]};
        ck_assert_msg (piv_image_save (s_p (names[i]), one, 1, 16, err, sizeof err) == 0, "%s",
                       err);
        piv_image_destroy (&fr[i]);
    }
    piv_cameras_destroy (&rig);
}

// The column line and the rows of a stereo field file: the number of rows,
// of valid rows, their mean u (the file's unit) and median residual.
typedef struct {
    long rows, valid;
    double mean_u, mean_w, median_residual;
    double xmin, xmax, ymin, ymax;
} s_file_t;

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static void
s_read_field (const char *path, const char *unit, s_file_t *out)
{
    char *text = tu_slurp (path, NULL);
    ck_assert_msg (text, "no '%s'", path);
    char want[160];
    snprintf (want, sizeof want,
              "# x y u v w flags residual (x, y: mm; u, v, w: %s; residual: px)\n", unit);
    ck_assert_msg (strstr (text, want), "no column line '%s' in:\n%.2000s", want, text);
    *out = (s_file_t){0, 0, 0, 0, NAN, INFINITY, -INFINITY, INFINITY, -INFINITY};
    size_t cap = 1 << 16;
    double *res = malloc (cap * sizeof *res);
    ck_assert (res);
    for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n")) {
        if (line[0] == '#')
            continue;
        double x, y, u, v, w, r;
        int flags;
        ck_assert_msg (
            sscanf (line, "%lf %lf %lf %lf %lf %d %lf", &x, &y, &u, &v, &w, &flags, &r) == 7,
            "bad row '%s'", line);
        out->rows++;
        out->xmin = fmin (out->xmin, x);
        out->xmax = fmax (out->xmax, x);
        out->ymin = fmin (out->ymin, y);
        out->ymax = fmax (out->ymax, y);
        if (flags != 0)
            continue;
        ck_assert ((size_t) out->valid < cap);
        res[out->valid++] = r;
        out->mean_u += u;
        out->mean_w += w;
    }
    if (out->valid) {
        out->mean_u /= out->valid;
        out->mean_w /= out->valid;
        qsort (res, (size_t) out->valid, sizeof *res, s_cmp);
        out->median_residual = res[out->valid / 2];
    }
    free (res);
    free (text);
}

// pivfarm-piv --cameras as a user runs it on the synthetic rig: the field
// in mm per frame, in m/s with --dt; a calibration of one camera, frames of
// two sizes, a wrong number of frames refused, saying why.
START_TEST (pivfarm_piv_cameras_writes_the_3c_field_and_refuses_what_it_cannot_use)
{
    const double u = 0.8, v = -0.5;
    s_write_case (u, v);
    const char *args[] = {"--cameras",
                          s_p ("rig.cal"),
                          "-p",
                          "64,32",
                          s_p ("a1.tif"),
                          s_p ("b1.tif"),
                          s_p ("a2.tif"),
                          s_p ("b2.tif"),
                          "-o",
                          s_p ("f.txt"),
                          NULL};
    int rc = s_run ("pivfarm-piv", args);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    s_file_t f;
    s_read_field (s_p ("f.txt"), "mm per frame", &f);
    ck_assert_msg (f.valid > f.rows / 2 && fabs (f.mean_u - u) < 0.01 && fabs (f.mean_w) < 0.01,
                   "%ld of %ld valid, mean u %g w %g mm", f.valid, f.rows, f.mean_u, f.mean_w);
    ck_assert (f.xmin >= -60 && f.xmax <= 60 && f.ymin >= -60 && f.ymax <= 60);
    // --dt 0.001 s: mm per frame / 1000 / 0.001 = m/s, the same numbers here.
    const char *dt[] = {"--cameras",
                        s_p ("rig.cal"),
                        "-p",
                        "64,32",
                        "--dt",
                        "0.002",
                        s_p ("a1.tif"),
                        s_p ("b1.tif"),
                        s_p ("a2.tif"),
                        s_p ("b2.tif"),
                        "-o",
                        s_p ("g.txt"),
                        NULL};
    rc = s_run ("pivfarm-piv", dt);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    s_file_t g;
    s_read_field (s_p ("g.txt"), "m/s", &g);
    ck_assert_msg (fabs (g.mean_u - f.mean_u / 1000 / 0.002) < 1e-4, "%g m/s from %g mm", g.mean_u,
                   f.mean_u);
    // A bound below the noise: the residual invalidates vectors past it
    // (flag 2), and only those.
    const char *bound[] = {"--cameras", s_p ("rig.cal"), "-p", "64,32", "--max-residual",
                           "0.002", s_p ("a1.tif"), s_p ("b1.tif"), s_p ("a2.tif"),
                           s_p ("b2.tif"), "-o", s_p ("r.txt"), NULL};
    rc = s_run ("pivfarm-piv", bound);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    s_file_t r;
    s_read_field (s_p ("r.txt"), "mm per frame", &r);
    ck_assert_msg (r.rows == f.rows && r.valid < f.valid && r.median_residual <= 0.002,
                   "bound 0.002 px: %ld valid (%ld without), residual median %g", r.valid,
                   f.valid, r.median_residual);
    // A calibration of one camera.
    char err[1024] = "";
    piv_cameras_t *two = piv_cameras_load (s_p ("rig.cal"), err, sizeof err), *one;
    ck_assert_msg (two, "%s", err);
    one = piv_cameras_new ();
    piv_camera_t *cam = piv_camera_dup (piv_cameras_get (two, 0));
    ck_assert (piv_cameras_add (one, &cam, err, sizeof err) == 0);
    ck_assert (piv_cameras_save (one, s_p ("one.cal"), err, sizeof err) == 0);
    piv_cameras_destroy (&one);
    piv_cameras_destroy (&two);
    const char *lone[] = {"--cameras",    s_p ("one.cal"), s_p ("a1.tif"),
                          s_p ("b1.tif"), s_p ("a2.tif"),  s_p ("b2.tif"),
                          "-o",           s_p ("h.txt"),   NULL};
    rc = s_run ("pivfarm-piv", lone);
    ck_assert_msg (rc == 1 && strstr (s_out, "has 1 camera: stereo needs two") &&
                       strstr (s_out, "one.cal"),
                   "exit %d:\n%s", rc, s_out);
    ck_assert (access (s_p ("h.txt"), F_OK) != 0);
    // Camera 2's frames of another size.
    tu_tiff_zeros (s_p ("small_a.tif"), 256, 256, 16, 1, 16);
    tu_tiff_zeros (s_p ("small_b.tif"), 256, 256, 16, 1, 16);
    const char *sizes[] = {"--cameras",
                           s_p ("rig.cal"),
                           s_p ("a1.tif"),
                           s_p ("b1.tif"),
                           s_p ("small_a.tif"),
                           s_p ("small_b.tif"),
                           NULL};
    rc = s_run ("pivfarm-piv", sizes);
    ck_assert_msg (rc == 1 && strstr (s_out, "is 512x512") && strstr (s_out, "is 256x256") &&
                       strstr (s_out, "small_a.tif"),
                   "exit %d:\n%s", rc, s_out);
    // Three frames: bad usage.
    const char *three[] = {"--cameras",    s_p ("rig.cal"), s_p ("a1.tif"),
                           s_p ("b1.tif"), s_p ("a2.tif"),  NULL};
    rc = s_run ("pivfarm-piv", three);
    ck_assert_msg (rc == 2 && strstr (s_out, "four frames"), "exit %d:\n%s", rc, s_out);
}
END_TEST

// --------------------------------------------------------------- case E

// Case E's particle images (1024x1024, 16 bit, deflate-compressed in
// tests/data/stereo/caseE/particles; see tests/data/README.md).
static const char *
s_case_e_images (void)
{
    static char dir[4096];
    snprintf (dir, sizeof dir, "%s", tu_data ("stereo/caseE/particles"));
    return dir;
}

// pivfarm-calib on case E's given points (XML, both cameras, Soloff
// chosen) writes 'cal'.
static void
s_case_e_calibrate (const char *cal)
{
    int rc = tu_calib_case_e (cal, s_out, sizeof s_out);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
}

// Case E's calibration (caseE.cal in the test's directory) and its four
// frames: A1 B1 (camera 1), A2 B2 (camera 3).
static void
s_case_e (char fr[4][4200])
{
    const char *images = s_case_e_images ();
    s_case_e_calibrate (s_p ("caseE.cal"));
    for (int i = 0; i < 4; i++)
        snprintf (fr[i], 4200, "%s/Camera_0%d/im0000%d.tif", images, i < 2 ? 1 : 3, i % 2 + 1);
}

// pivfarm-piv --cameras CAL on the four frames, its field read into f.
static void
s_piv_file (const char *cal, char fr[4][4200], const char *field, s_file_t *f)
{
    const char *piv[] = {"--cameras", cal, fr[0], fr[1], fr[2], fr[3], "-o", field, NULL};
    int rc = s_run ("pivfarm-piv", piv);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    s_read_field (field, "mm per frame", f);
}

// Case E's real pair through the programs a user runs: pivfarm-calib on the
// given points (XML), then pivfarm-piv --cameras on both cameras' pairs:
// most vectors valid, the 4 equations met to well under half a pixel, the
// world grid within what both calibrations covered.
START_TEST (case_e_particle_pair_gives_a_plausible_3c_field)
{
    char fr[4][4200];
    s_case_e (fr);
    s_file_t f;
    s_piv_file (s_p ("caseE.cal"), fr, s_p ("E.txt"), &f);
    printf ("case E stereo: %ld vectors, %ld valid (%.1f %%), residual median %.4f px, "
            "mean u %.4f w %.4f mm per frame, x %.1f..%.1f y %.1f..%.1f mm\n",
            f.rows, f.valid, 100.0 * f.valid / f.rows, f.median_residual, f.mean_u, f.mean_w,
            f.xmin, f.xmax, f.ymin, f.ymax);
    ck_assert_msg (f.valid >= 0.9 * f.rows, "%ld of %ld valid", f.valid, f.rows);
    ck_assert_msg (f.median_residual < 0.5, "residual median %.4f px", f.median_residual);
    // Within both calibrations' X 0..45, Y -15..30 mm (camera 3's points).
    ck_assert (f.xmin >= 0 && f.xmax <= 45 && f.ymin >= -15 && f.ymax <= 30);
}
END_TEST

// What pivfarm-synth --score printed of a 3-component field: RMS errors
// (mm per frame) and the vectors scored.
typedef struct {
    long count;
    double u, v, w, plane, ratio;
} s_score3_t;

// Runs pivfarm-synth --score FIELD --truth TRUTH (valid vectors only) and
// reads what it printed.
static void
s_score3 (const char *field, const char *truth, s_score3_t *sc)
{
    const char *args[] = {"--score", field, "--truth", truth, "--max-flag", "0", NULL};
    int rc = s_run ("pivfarm-synth", args);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    const char *line = strstr (s_out, "vectors ");
    ck_assert_msg (line, "no score in:\n%s", s_out);
    long rows;
    double margin;
    int n = sscanf (line, "vectors %ld of %ld (margin %lf mm)  rms u %lf v %lf w %lf in-plane %lf",
                    &sc->count, &rows, &margin, &sc->u, &sc->v, &sc->w, &sc->plane);
    const char *ratio = strstr (line, "w/in-plane ");
    ck_assert_msg (n == 7 && ratio && sscanf (ratio, "w/in-plane %lf", &sc->ratio) == 1,
                   "unreadable score: %s", line);
}

// The chain a user runs to measure stereo's errors: pivfarm-synth
// --stereo renders a rig and its truth, pivfarm-piv --cameras measures the
// 3-C field, pivfarm-synth --score compares it with the flow. The errors
// are a fraction of a pixel (10 px a mm here) and w's within the ±35°
// geometric factor of the in-plane ones; the same field scored against a
// truth without w shows the 0.1 mm of w it measured.
START_TEST (synth_stereo_then_piv_cameras_then_score_gives_small_3c_errors)
{
    const char *synth[] = {"--stereo", "--size",     "512x512", "-d", "0.05", "--diameter", "2.5",
                           "-f",       "uniform:0.3,-0.2,0.1", "-o", s_p ("run/s"), NULL};
    int rc = s_run ("pivfarm-synth", synth);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    const char *piv[] = {"--cameras",          s_p ("run/s.cal"),      s_p ("run/cam1/s_a.tif"),
                         s_p ("run/cam1/s_b.tif"), s_p ("run/cam2/s_a.tif"), s_p ("run/cam2/s_b.tif"),
                         "-o",                 s_p ("s.txt"),          NULL};
    rc = s_run ("pivfarm-piv", piv);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    s_score3_t sc;
    s_score3 (s_p ("s.txt"), s_p ("run/s.truth"), &sc);
    printf ("stereo 512², ±35°, uniform (0.3, -0.2, 0.1) mm: %ld vectors, rms u %.4f v %.4f w "
            "%.4f mm, w/in-plane %.2f\n",
            sc.count, sc.u, sc.v, sc.w, sc.ratio);
    ck_assert_msg (sc.count >= 100, "%ld vectors scored", sc.count);
    // 0.1 px is ten times what the engine misses by on such images.
    ck_assert_msg (sc.plane < 0.01 && sc.w < 0.025 && sc.ratio < 3.5,
                   "rms in-plane %.4f w %.4f mm, ratio %.2f", sc.plane, sc.w, sc.ratio);

    const char *flat[] = {"--stereo", "--size", "512x512", "-f", "uniform:0.3,-0.2,0", "-o",
                          s_p ("flat/s"), NULL};
    rc = s_run ("pivfarm-synth", flat);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    s_score3_t wrong;
    s_score3 (s_p ("s.txt"), s_p ("flat/s.truth"), &wrong);
    ck_assert_msg (fabs (wrong.w - 0.1) < 0.01 && wrong.plane < 0.01,
                   "against w = 0: rms w %.4f in-plane %.4f mm", wrong.w, wrong.plane);
}
END_TEST

// ------------------------------------------------------ self-calibration

// What pivfarm-calib --self-calibrate printed: the disparity RMS (px)
// before and after, and the plane it found.
typedef struct {
    double before, after;  // px
    double z0, dzdx, dzdy;  // the sheet
} s_selfcal_t;

// What the last pivfarm-calib --self-calibrate printed.
static void
s_read_selfcal (s_selfcal_t *r)
{
    const char *before = strstr (s_out, "before: disparity rms ");
    const char *after = strstr (s_out, "after: disparity rms ");
    const char *sheet = strstr (s_out, "sheet z0 ");
    ck_assert_msg (before && after && sheet &&
                       sscanf (before, "before: disparity rms %lf", &r->before) == 1 &&
                       sscanf (after, "after: disparity rms %lf", &r->after) == 1 &&
                       sscanf (sheet, "sheet z0 %lf mm dzdx %lf dzdy %lf", &r->z0, &r->dzdx,
                               &r->dzdy) == 3,
                   "unreadable self-calibration:\n%s", s_out);
}

// Runs pivfarm-calib --self-calibrate CAL on the 'pairs' pairs DIR/cam1/
// STEM_000k_{a,b}.tif (k from 1), DIR/cam2/..., writing OUT, and reads
// what it printed.
static void
s_selfcal (const char *cal, const char *dir, const char *stem, int pairs, const char *out,
           s_selfcal_t *r)
{
    static char frames[16][4][4200];
    const char *args[6 + 16 * 5];
    int n = 0;
    args[n++] = "--self-calibrate";
    args[n++] = cal;
    ck_assert (pairs <= 16);
    for (int k = 0; k < pairs; k++) {
        args[n++] = "--pair";
        for (int f = 0; f < 4; f++) {
            snprintf (frames[k][f], sizeof frames[k][f], "%s/cam%d/%s_%04d_%c.tif", dir,
                      f / 2 + 1, stem, k + 1, f % 2 ? 'b' : 'a');
            args[n++] = frames[k][f];
        }
    }
    args[n++] = "-o";
    args[n++] = out;
    args[n] = NULL;
    int rc = s_run ("pivfarm-calib", args);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    s_read_selfcal (r);
}

// Runs pivfarm-piv --cameras CAL on pair 1 of DIR/STEM and scores the field
// against TRUTH.
static void
s_piv_score (const char *cal, const char *dir, const char *stem, const char *field,
             const char *truth, s_score3_t *sc)
{
    char fr[4][4200];
    for (int f = 0; f < 4; f++)
        snprintf (fr[f], sizeof fr[f], "%s/cam%d/%s_0001_%c.tif", dir, f / 2 + 1, stem,
                  f % 2 ? 'b' : 'a');
    const char *piv[] = {"--cameras", cal, fr[0], fr[1], fr[2], fr[3], "-o", field, NULL};
    int rc = s_run ("pivfarm-piv", piv);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    s_score3 (field, truth, sc);
}

// Renders PAIRS synthetic stereo pairs (512², +-35 degrees) of 'flow' with
// the sheet at 'sheet_z' mm (the calibration's Z = 0 elsewhere): DIR/s.
enum { PAIRS = 8 };  // the disparity map's ensemble: 16 instants

static void
s_synth_sheet (const char *dir, const char *flow, const char *sheet_z)
{
    char stem[4200], count[8];
    snprintf (stem, sizeof stem, "%s/s", dir);
    snprintf (count, sizeof count, "%d", PAIRS);
    const char *synth[] = {"--stereo", "--size", "512x512", "-d",      "0.05",  "--diameter",
                           "2.5",      "-f",     flow,      "--sheet-z", sheet_z, "-c",
                           count,      "-o",     stem,      NULL};
    int rc = s_run ("pivfarm-synth", synth);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
}

// The goal: a light sheet 0.5 mm from where the calibration puts it
// is found within 0.05 mm, the cameras' dewarped frames then agree within
// 0.1 px, and the 3-C field measured with the corrected calibration is
// closer to the flow (w most: a misplaced sheet makes the cameras see two
// places, and a vortex's in-plane difference between them reads as w). The
// written calibration is the given one plus its sheet line, byte for byte.
START_TEST (self_calibration_finds_a_sheet_misplaced_by_half_a_millimetre)
{
    const char *dir = s_p ("z5");
    s_synth_sheet (dir, "vortex:0.8,8,0.2", "0.5");
    char cal[4200], truth[4200];
    snprintf (cal, sizeof cal, "%s/s.cal", dir);
    snprintf (truth, sizeof truth, "%s/s.truth", dir);
    s_selfcal_t r;
    s_selfcal (cal, dir, "s", PAIRS, s_p ("sc.cal"), &r);
    printf ("self-calibration, sheet at Z 0.5 mm (512², +-35 deg, %d pairs): disparity rms %.4f "
            "-> %.4f px, plane Z = %.4f + %.6f X + %.6f Y mm\n",
            PAIRS, r.before, r.after, r.z0, r.dzdx, r.dzdy);
    ck_assert_msg (fabs (r.z0 - 0.5) <= 0.05, "z0 %.4f mm", r.z0);
    // Slopes: 0.05 mm of Z over the 50 mm field at most.
    ck_assert_msg (fabs (r.dzdx) < 1e-3 && fabs (r.dzdy) < 1e-3, "slopes %g %g", r.dzdx, r.dzdy);
    ck_assert_msg (r.after <= 0.1, "disparity after %.4f px", r.after);
    // 0.5 mm at +-35 degrees, 10 px/mm: 2 tan 35 x 0.5 x 9 px a mm of the grid.
    ck_assert_msg (r.before > 4, "disparity before %.4f px", r.before);

    // The file: the input's lines and one 'sheet' line.
    char *in = tu_slurp (cal, NULL), *out = tu_slurp (s_p ("sc.cal"), NULL);
    ck_assert (in && out);
    ck_assert_msg (!strstr (in, "\nsheet "), "the synthetic calibration has a sheet already");
    char *line = strstr (out, "\nsheet ");
    ck_assert_msg (line, "no sheet line in:\n%s", out);
    char *end = strchr (line + 1, '\n');
    ck_assert (end);
    memmove (line, end, strlen (end) + 1);
    ck_assert_msg (strcmp (in, out) == 0, "the rest of the calibration changed");
    free (in);
    free (out);

    s_score3_t before, after;
    s_piv_score (cal, dir, "s", s_p ("before.txt"), truth, &before);
    s_piv_score (s_p ("sc.cal"), dir, "s", s_p ("after.txt"), truth, &after);
    printf ("  3-C field: rms w %.4f -> %.4f mm, in-plane %.4f -> %.4f mm (%ld, %ld vectors)\n",
            before.w, after.w, before.plane, after.plane, before.count, after.count);
    ck_assert_msg (after.count >= 100, "%ld vectors scored", after.count);
    ck_assert_msg (after.w < 0.5 * before.w && after.plane < before.plane,
                   "rms w %.4f -> %.4f, in-plane %.4f -> %.4f mm", before.w, after.w,
                   before.plane, after.plane);
}
END_TEST

// Where the sheet is where the calibration puts it, self-calibration finds
// it there (Z 0 within a fifth of the goal's 0.05 mm), and refuses what it
// cannot use, saying why, writing nothing.
START_TEST (self_calibration_leaves_a_sheet_in_its_place_and_refuses_what_it_cannot_use)
{
    const char *dir = s_p ("z0");
    s_synth_sheet (dir, "uniform:0.3,-0.2,0.1", "0");
    char cal[4200];
    snprintf (cal, sizeof cal, "%s/s.cal", dir);
    s_selfcal_t r;
    s_selfcal (cal, dir, "s", PAIRS, s_p ("sc.cal"), &r);
    printf ("self-calibration, sheet at Z 0 (512², %d pairs): disparity rms %.4f -> %.4f px, "
            "plane Z = %.4f + %.6f X + %.6f Y mm\n",
            PAIRS, r.before, r.after, r.z0, r.dzdx, r.dzdy);
    ck_assert_msg (fabs (r.z0) <= 0.01, "z0 %.4f mm", r.z0);
    ck_assert_msg (r.before <= 0.1 && r.after <= r.before + 1e-9, "disparity %.4f -> %.4f px",
                   r.before, r.after);

    // Four frames a pair, the four files there, windows that fit the grid.
    const char *three[] = {"--self-calibrate", cal, "--pair", "a", "b", "c", NULL};
    int rc = s_run ("pivfarm-calib", three);
    ck_assert_msg (rc == 2 && strstr (s_out, "--pair expects four frames"), "exit %d: %s", rc,
                   s_out);
    const char *missing[] = {"--self-calibrate", cal,  "--pair", s_p ("no.tif"), s_p ("no.tif"),
                             s_p ("no.tif"),     s_p ("no.tif"), "-o", s_p ("x.cal"), NULL};
    rc = s_run ("pivfarm-calib", missing);
    ck_assert_msg (rc == 1 && strstr (s_out, "no.tif"), "exit %d: %s", rc, s_out);
    ck_assert_msg (access (s_p ("x.cal"), F_OK) != 0, "a calibration written after a failure");
    char fr[4][4200];
    for (int f = 0; f < 4; f++)
        snprintf (fr[f], sizeof fr[f], "%s/cam%d/s_0001_%c.tif", dir, f / 2 + 1, f % 2 ? 'b' : 'a');
    const char *odd[] = {"--self-calibrate", cal,   "--pair", fr[0], fr[1], fr[2], fr[3],
                         "--window",         "63",  NULL};
    rc = s_run ("pivfarm-calib", odd);
    ck_assert_msg (rc == 2 && strstr (s_out, "even"), "exit %d: %s", rc, s_out);
    // Two windows of 256 px on the 540 x 444 px grid: too few for a plane.
    const char *wide[] = {"--self-calibrate", cal, "--pair", fr[0], fr[1], fr[2], fr[3],
                          "--window", "256", "--step", "256", NULL};
    rc = s_run ("pivfarm-calib", wide);
    ck_assert_msg (rc == 1 && strstr (s_out, "windows with a clear disparity peak"), "exit %d: %s",
                   rc, s_out);
}
END_TEST

// Case E's particle pair (one pair: two instants): the disparity before and
// after self-calibration and the plane found, as doc/stereo.md states them;
// the corrected calibration's 3-C field meets the 4 equations at least as
// well as the given one's.
START_TEST (case_e_self_calibration_states_its_disparity_and_plane)
{
    char fr[4][4200];
    s_case_e (fr);
    const char *windows[2][2] = {{"--window", "64"}, {"--window", "128"}};
    double residual[2];
    for (int w = 0; w < 2; w++) {
        const char *args[] = {"--self-calibrate", s_p ("caseE.cal"), "--pair", fr[0], fr[1],
                              fr[2], fr[3], windows[w][0], windows[w][1], "--step",
                              w ? "64" : "32", "-o", s_p ("sc.cal"), NULL};
        int rc = s_run ("pivfarm-calib", args);
        ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
        s_selfcal_t r;
        s_read_selfcal (&r);
        printf ("case E self-calibration, windows %s px:\n%s", windows[w][1], s_out);
        ck_assert_msg (r.after < 0.5 * r.before, "disparity %.4f -> %.4f px", r.before, r.after);
        // The sheet within the target's planes (Z -3 .. 3 mm).
        ck_assert_msg (fabs (r.z0) < 3, "z0 %.4f mm", r.z0);
        s_file_t f;
        s_piv_file (s_p ("sc.cal"), fr, s_p ("E.txt"), &f);
        residual[w] = f.median_residual;
        printf ("  3-C field on it: %ld of %ld valid, residual median %.4f px\n", f.valid, f.rows,
                f.median_residual);
    }
    s_file_t f0;
    s_piv_file (s_p ("caseE.cal"), fr, s_p ("E0.txt"), &f0);
    printf ("  3-C field on the given calibration: residual median %.4f px\n",
            f0.median_residual);
    ck_assert_msg (residual[0] <= f0.median_residual && residual[1] <= f0.median_residual,
                   "residual median %.4f, %.4f px against %.4f", residual[0], residual[1],
                   f0.median_residual);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("stereo");
    TCase *tc = tcase_create ("stereo");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 4 * RUN_TIMEOUT);
    tcase_add_test (tc, symmetric_cameras_recover_an_in_plane_displacement_and_no_w);
    tcase_add_test (tc, symmetric_cameras_recover_an_out_of_plane_displacement);
    tcase_add_test (tc, both_cameras_dewarp_a_particle_to_its_world_position);
    tcase_add_test (tc, every_dewarping_interpolator_dewarps_alike_alone_in_pairs_and_on_threads);
    tcase_add_test (tc, pivfarm_piv_cameras_writes_the_3c_field_and_refuses_what_it_cannot_use);
    tcase_add_test (tc, case_e_particle_pair_gives_a_plausible_3c_field);
    tcase_add_test (tc, synth_stereo_then_piv_cameras_then_score_gives_small_3c_errors);
    tcase_add_test (tc, self_calibration_finds_a_tilted_sheet_and_the_reconstruction_uses_it);
    tcase_add_test (tc, self_calibration_finds_a_sheet_misplaced_by_half_a_millimetre);
    tcase_add_test (tc, self_calibration_leaves_a_sheet_in_its_place_and_refuses_what_it_cannot_use);
    tcase_add_test (tc, case_e_self_calibration_states_its_disparity_and_plane);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
