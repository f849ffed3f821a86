// synth_stereo.c — synthetic stereo PIV (synth_stereo.h): particles seeded
// in a Gaussian light sheet, moved by a known 3-D flow, projected through
// two pinhole cameras made from geometry and rendered as the planar
// renderer renders (synth.c); the calibration fitted to exact target points.

#include "piv/synth_stereo.h"
#include "piv/synth_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The calibration target: planes Z = -3 .. 3 mm (as case E's), a grid of
// TARGET_GRID x TARGET_GRID points over what the camera sees of each.
#define TARGET_PLANES 7
#define TARGET_GRID 25

// Particles are seeded over Z within this many sheet widths of its centre
// (the profile is e^-8 at one width: nothing visible beyond).
#define SEED_WIDTHS 1.0

// The seeded area's margin beyond what the cameras see, a fraction of its
// size: particles just outside the images whose spots reach in.
#define SEED_MARGIN 0.05

static const struct {
    const char *name;      // as in specs
    piv_flow3_kind_t kind; // enum value
    int numbers;           // parameters after the colon
} s_kinds[] = {
    {"uniform", PIV_FLOW3_UNIFORM, 3},
    {"vortex", PIV_FLOW3_VORTEX, 3},
    {"wgrad", PIV_FLOW3_WGRAD, 4},
};
#define KIND_COUNT ((int)(sizeof s_kinds / sizeof s_kinds[0]))
#define KIND_LIST "uniform:U,V,W, vortex:VMAX,RCORE,WAXIS, wgrad:U,V,W,DWDZ"

int
piv_flow3_parse (piv_flow3_t *flow, const char *spec, char *err, size_t errlen)
{
    const char *colon = spec ? strchr (spec, ':') : NULL;
    int index = -1;
    for (int i = 0; colon && i < KIND_COUNT; i++)
        if (strlen (s_kinds[i].name) == (size_t)(colon - spec) &&
            memcmp (s_kinds[i].name, spec, (size_t)(colon - spec)) == 0)
            index = i;
    if (index < 0) {
        snprintf (err, errlen, "bad stereo flow '%s': expected " KIND_LIST " (mm per frame)",
                  spec ? spec : "");
        return -1;
    }
    double p[4] = {0, 0, 0, 0};
    int want = s_kinds[index].numbers, got = 0;
    const char *at = colon + 1;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod (at, &end);
        if (end == at || errno || !isfinite (x) || got == want)
            break;
        p[got++] = x;
        at = end;
        if (*at != ',')
            break;
        at++;
    }
    if (got != want || *at) {
        snprintf (err, errlen, "bad stereo flow '%s': %s expects %d finite numbers", spec,
                  s_kinds[index].name, want);
        return -1;
    }
    memset (flow, 0, sizeof *flow);
    flow->kind = s_kinds[index].kind;
    flow->plane = (piv_flow_t){PIV_FLOW_UNIFORM, p[0], p[1], 0, 0};
    if (flow->kind == PIV_FLOW3_VORTEX) {
        if (!(p[1] > 0)) {
            snprintf (err, errlen, "bad stereo flow '%s': the core radius must be positive", spec);
            return -1;
        }
        flow->plane.kind = PIV_FLOW_LAMB_OSEEN;
        flow->w_axis = p[2];
    }
    else {
        flow->w = p[2];
        flow->w_grad = p[3];
    }
    snprintf (flow->spec, sizeof flow->spec, "%s", spec);
    return 0;
}

void
piv_flow3_eval (const piv_flow3_t *flow, double x, double y, double z, double *u, double *v,
                double *w)
{
    piv_flow_eval (&flow->plane, x, y, u, v);
    *w = flow->w + flow->w_grad * z;
    if (flow->kind == PIV_FLOW3_VORTEX) {
        double rc = flow->plane.p1;
        *w += flow->w_axis * exp (-(x * x + y * y) / (rc * rc));
    }
}

void
piv_stereo_synth_init (piv_stereo_synth_t *synth)
{
    piv_synth_init (&synth->image);
    synth->angle = 35;
    synth->distance = 500;
    synth->focal = 50;
    synth->pitch = 0.01;
    synth->k1 = 0;
    synth->thickness = 1;
    synth->sheet_z = 0;
}

int
piv_stereo_synth_check (const piv_stereo_synth_t *synth, char *err, size_t errlen)
{
    const char *what = NULL;
    double value = 0;
    if (!(synth->angle >= 0 && synth->angle < 80))
        what = "angle", value = synth->angle;
    else if (!(synth->distance > 0 && synth->distance < 1e6))
        what = "distance", value = synth->distance;
    else if (!(synth->focal > 0 && synth->focal < synth->distance))
        what = "focal length", value = synth->focal;
    else if (!(synth->pitch > 0 && synth->pitch < 1))
        what = "pixel pitch", value = synth->pitch;
    else if (!(fabs (synth->k1) <= 10))
        what = "distortion", value = synth->k1;
    else if (!(synth->thickness > 0 && synth->thickness < synth->distance / 4))
        what = "sheet thickness", value = synth->thickness;
    else if (!(fabs (synth->sheet_z) < synth->distance / 4))
        what = "sheet position", value = synth->sheet_z;
    if (what) {
        snprintf (err, errlen,
                  "bad stereo %s '%g': the angle must be 0 to 80 deg, the focal length below "
                  "the distance, the pitch below 1 mm, |k1| at most 10, the sheet's thickness "
                  "positive and the sheet within a quarter of the distance",
                  what, value);
        return -1;
    }
    if (synth->image.width < 8 || synth->image.height < 8) {
        snprintf (err, errlen, "bad synthetic image size '%dx%d': at least 8x8 for stereo",
                  synth->image.width, synth->image.height);
        return -1;
    }
    return 0;
}

// A synthetic camera's geometry.
typedef struct {
    double r[3][3]; // rows: the camera's x, y, z axes in the world
    double c[3];    // its centre, mm
    double f;       // focal length, px
    double cx, cy;  // principal point, px
    double k1;      // radial distortion
} s_geometry_t;

// Camera axes in the world: x right (X turned by the angle about Y), y
// down (-Y), z along the view towards the origin; its centre at distance
// D on -z.
static void
s_geometry (const piv_stereo_synth_t *synth, int id, s_geometry_t *g)
{
    double th = (id == 1 ? 1 : -1) * synth->angle * M_PI / 180, d = synth->distance;
    double r[3][3] = {{cos (th), 0, -sin (th)}, {0, -1, 0}, {-sin (th), 0, -cos (th)}};
    memcpy (g->r, r, sizeof r);
    for (int j = 0; j < 3; j++)
        g->c[j] = -d * r[2][j];
    g->f = synth->focal / synth->pitch;
    g->cx = (synth->image.width - 1) / 2.0;
    g->cy = (synth->image.height - 1) / 2.0;
    g->k1 = synth->k1;
}

// Where the ray through pixel (col, row) meets the plane Z = z: the
// distortion undone by fixed-point iteration, then the ray from the
// centre. Cheaper than piv_camera_unproject's Newton by far (target images
// need one a sample). 0, or -1 (the ray misses the plane).
static int
s_ray (const s_geometry_t *g, double col, double row, double z, double *x, double *y)
{
    double xd = (col - g->cx) / g->f, yd = (row - g->cy) / g->f, xn = xd, yn = yd;
    for (int it = 0; it < 20; it++) {
        double k = 1 + g->k1 * (xn * xn + yn * yn);
        xn = xd / k;
        yn = yd / k;
    }
    double dir[3];
    for (int j = 0; j < 3; j++)
        dir[j] = g->r[0][j] * xn + g->r[1][j] * yn + g->r[2][j];
    if (!(fabs (dir[2]) > 1e-12))
        return -1;
    double t = (z - g->c[2]) / dir[2];
    *x = g->c[0] + t * dir[0];
    *y = g->c[1] + t * dir[1];
    return t > 0 ? 0 : -1;
}

piv_camera_t *
piv_synth_camera_new (const piv_stereo_synth_t *synth, int id, char *err, size_t errlen)
{
    if (id != 1 && id != 2) {
        snprintf (err, errlen, "bad synthetic camera %d: 1 or 2", id);
        return NULL;
    }
    if (piv_stereo_synth_check (synth, err, errlen))
        return NULL;
    // P = K [R | -R C] / D, so that P[2][3] = 1.
    s_geometry_t g;
    s_geometry (synth, id, &g);
    double d = synth->distance, f = g.f, cx = g.cx, cy = g.cy;
    double c[PIV_PINHOLE_P + PIV_PINHOLE_K];
    for (int j = 0; j < 3; j++) {
        c[j] = (f * g.r[0][j] + cx * g.r[2][j]) / d;
        c[4 + j] = (f * g.r[1][j] + cy * g.r[2][j]) / d;
        c[8 + j] = g.r[2][j] / d;
    }
    c[3] = cx;
    c[7] = cy;
    c[PIV_PINHOLE_P] = synth->k1;
    c[PIV_PINHOLE_P + 1] = 0;
    piv_camera_info_t info = {
        .id = id, .model = PIV_CAMERA_PINHOLE, .heldout_rms = NAN, .heldout_max = NAN};
    return piv_camera_from_coefs (&info, c, PIV_PINHOLE_P + PIV_PINHOLE_K, err, errlen);
}

// Both true cameras: 0, or -1 with err (and none).
static int
s_cameras (const piv_stereo_synth_t *synth, piv_camera_t *cams[2], char *err, size_t errlen)
{
    cams[0] = piv_synth_camera_new (synth, 1, err, errlen);
    cams[1] = cams[0] ? piv_synth_camera_new (synth, 2, err, errlen) : NULL;
    if (!cams[1]) {
        piv_camera_destroy (&cams[0]);
        return -1;
    }
    return 0;
}

// What one camera sees of the plane Z = z: its image's border (corners and
// edges' middles) on the plane. inner: the rectangle inside it; outer: the
// one around it (X min, max, Y min, max), both grown or shrunk to
// combine with what they already hold. area: the footprint's (shoelace
// over the corners). 0, or -1 with err.
static int
s_footprint (const piv_camera_t *cam, const piv_synth_t *image, double z, double inner[4],
             double outer[4], double *area, char *err, size_t errlen)
{
    double c0 = -0.5, c1 = image->width - 0.5, r0 = -0.5, r1 = image->height - 0.5;
    double cm = (c0 + c1) / 2, rm = (r0 + r1) / 2;
    // Around the border from the top-left corner; side: 0 top, 1 right, 2
    // bottom, 3 left (rows down, Y up: the top is the largest Y).
    const double border[8][2] = {{c0, r0}, {cm, r0}, {c1, r0}, {c1, rm},
                                 {c1, r1}, {cm, r1}, {c0, r1}, {c0, rm}};
    const int sides[8][2] = {{0, 3}, {0, 0}, {0, 1}, {1, 1}, {1, 2}, {2, 2}, {2, 3}, {3, 3}};
    double x[8], y[8];
    for (int k = 0; k < 8; k++) {
        if (piv_camera_unproject (cam, border[k][0], border[k][1], z, &x[k], &y[k])) {
            snprintf (err, errlen, "synthetic camera %d does not see the plane Z = %g mm",
                      piv_camera_id (cam), z);
            return -1;
        }
        outer[0] = fmin (outer[0], x[k]);
        outer[1] = fmax (outer[1], x[k]);
        outer[2] = fmin (outer[2], y[k]);
        outer[3] = fmax (outer[3], y[k]);
        for (int s = 0; s < 2; s++)
            switch (sides[k][s]) {
            case 0:
                inner[3] = fmin (inner[3], y[k]);
                break;
            case 1:
                inner[1] = fmin (inner[1], x[k]);
                break;
            case 2:
                inner[2] = fmax (inner[2], y[k]);
                break;
            case 3:
                inner[0] = fmax (inner[0], x[k]);
                break;
            }
    }
    double a = 0;
    for (int k = 0; k < 8; k += 2)
        a += x[k] * y[(k + 2) % 8] - x[(k + 2) % 8] * y[k];
    *area = fabs (a) / 2;
    return 0;
}

static void
s_box_empty (double inner[4], double outer[4])
{
    inner[0] = inner[2] = -INFINITY;
    inner[1] = inner[3] = INFINITY;
    outer[0] = outer[2] = INFINITY;
    outer[1] = outer[3] = -INFINITY;
}

int
piv_stereo_synth_fov (const piv_stereo_synth_t *synth, double z, double box[4], char *err,
                      size_t errlen)
{
    piv_camera_t *cams[2];
    if (s_cameras (synth, cams, err, errlen))
        return -1;
    double outer[4], area;
    s_box_empty (box, outer);
    int rc = 0;
    for (int c = 0; c < 2 && rc == 0; c++)
        rc = s_footprint (cams[c], &synth->image, z, box, outer, &area, err, errlen);
    if (rc == 0 && !(box[0] < box[1] && box[2] < box[3])) {
        snprintf (err, errlen, "the synthetic cameras see no common field on Z = %g mm", z);
        rc = -1;
    }
    piv_camera_destroy (&cams[0]);
    piv_camera_destroy (&cams[1]);
    return rc;
}

// The largest displacement over the box and Z range (sampled, with room).
static double
s_max_displacement (const piv_flow3_t *flow, const double box[4], double z0, double z1)
{
    double most = 0;
    for (int i = 0; i <= 32; i++)
        for (int j = 0; j <= 32; j++)
            for (int k = 0; k <= 2; k++) {
                double x = box[0] + (box[1] - box[0]) * i / 32;
                double y = box[2] + (box[3] - box[2]) * j / 32, z = z0 + (z1 - z0) * k / 2;
                double u, v, w;
                piv_flow3_eval (flow, x, y, z, &u, &v, &w);
                most = fmax (most, sqrt (u * u + v * v + w * w));
            }
    return 1.25 * most;
}

// The brightness of the sheet's profile at z: 1 at its centre, e^-2 at
// half its thickness either side (as a particle image's diameter).
static double
s_profile (const piv_stereo_synth_t *synth, double z)
{
    double s = (z - synth->sheet_z) / synth->thickness;
    return exp (-8 * s * s);
}

int
piv_stereo_synth_render (const piv_stereo_synth_t *synth, const piv_flow3_t *flow,
                         piv_image_t *frames[2][2], char *err, size_t errlen)
{
    memset (frames, 0, 4 * sizeof (piv_image_t *));
    piv_camera_t *cams[2];
    if (s_cameras (synth, cams, err, errlen))
        return -1;
    synth_particle_t *parts[2] = {NULL, NULL};
    int rc = -1;

    // The seeded volume: what either camera sees of the sheet's slab, with
    // a margin for spots reaching in and for the displacement either way.
    // Its area depends on the sheet's distance from Z = 0, not on its side:
    // sheets at +dz and -dz hold the same particles, 2 dz apart in Z.
    double reach = SEED_WIDTHS * synth->thickness, far = reach + fabs (synth->sheet_z);
    double z0 = synth->sheet_z - reach, z1 = synth->sheet_z + reach;
    double inner[4], box[4], area1 = 0, area;
    s_box_empty (inner, box);
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 2; k++)
            if (s_footprint (cams[c], &synth->image, k ? far : -far, inner, box, &area, err,
                             errlen))
                goto done;
    if (s_footprint (cams[0], &synth->image, 0, inner, box, &area1, err, errlen))
        goto done;
    double grow = SEED_MARGIN * fmax (box[1] - box[0], box[3] - box[2]);
    double half = s_max_displacement (flow, box, z0, z1) / 2;
    box[0] -= grow + half;
    box[1] += grow + half;
    box[2] -= grow + half;
    box[3] += grow + half;
    z0 -= half;
    z1 += half;

    // Camera 1 sees 'density' particles a pixel within the sheet's e^-2
    // width (its footprint on Z = 0): so many per mm^3 of the slab.
    double per_mm3 =
        synth->image.density * synth->image.width * synth->image.height / area1 / synth->thickness;
    double want = per_mm3 * (box[1] - box[0]) * (box[3] - box[2]) * (z1 - z0);
    if (!(want <= 1e9)) {
        snprintf (err, errlen, "bad particle density '%g': %.0f particles are too many",
                  synth->image.density, want);
        goto done;
    }
    long count = lround (want);
    for (int c = 0; c < 2; c++)
        if (!(parts[c] = malloc ((size_t)(count > 0 ? count : 1) * sizeof *parts[c]))) {
            snprintf (err, errlen, "cannot draw %ld particles: out of memory", count);
            goto done;
        }
    uint64_t seeder = synth->image.seed;
    synth_rng_t rng;
    synth_rng_seed (&rng, &seeder);
    long n = 0;
    for (long k = 0; k < count; k++) {
        double m[3] = {box[0] + (box[1] - box[0]) * synth_rng_uniform (&rng),
                       box[2] + (box[3] - box[2]) * synth_rng_uniform (&rng),
                       z0 + (z1 - z0) * synth_rng_uniform (&rng)};
        // Peaks of 0.4 to 0.8 of full scale at the sheet's centre, as the
        // planar renderer's.
        double peak = (0.5 + 0.5 * synth_rng_uniform (&rng)) * 0.8, d[3];
        piv_flow3_eval (flow, m[0], m[1], m[2], &d[0], &d[1], &d[2]);
        double za = m[2] - d[2] / 2, zb = m[2] + d[2] / 2;
        int ok = 1;
        for (int c = 0; c < 2 && ok; c++) {
            synth_particle_t *p = parts[c] + n;
            ok = piv_camera_project (cams[c], m[0] - d[0] / 2, m[1] - d[1] / 2, za, &p->xa,
                                     &p->ya) == 0 &&
                 piv_camera_project (cams[c], m[0] + d[0] / 2, m[1] + d[1] / 2, zb, &p->xb,
                                     &p->yb) == 0;
            p->ia = peak * s_profile (synth, za);
            p->ib = peak * s_profile (synth, zb);
        }
        n += ok;
    }
    for (int c = 0; c < 2; c++)
        // Each camera's noise its own: seeds apart from the particles'.
        if (synth_render_pair (&synth->image, parts[c], n,
                               synth->image.seed ^ (0x5851f42d4c957f2dULL * (uint64_t)(c + 1)),
                               &frames[c][0], &frames[c][1], err, errlen))
            goto done;
    rc = 0;

done:
    if (rc)
        for (int c = 0; c < 2; c++) {
            piv_image_destroy (&frames[c][0]);
            piv_image_destroy (&frames[c][1]);
        }
    free (parts[0]);
    free (parts[1]);
    piv_camera_destroy (&cams[0]);
    piv_camera_destroy (&cams[1]);
    return rc;
}

piv_point_t *
piv_stereo_synth_points (const piv_stereo_synth_t *synth, int id, size_t *n, char *err,
                         size_t errlen)
{
    piv_camera_t *cam = piv_synth_camera_new (synth, id, err, errlen);
    if (!cam)
        return NULL;
    piv_point_t *pts = malloc ((size_t)TARGET_PLANES * TARGET_GRID * TARGET_GRID * sizeof *pts);
    *n = 0;
    if (!pts)
        snprintf (err, errlen, "cannot make the target points: out of memory");
    for (int k = 0; pts && k < TARGET_PLANES; k++) {
        double z = k - (TARGET_PLANES - 1) / 2, inner[4], outer[4], area;
        s_box_empty (inner, outer);
        if (s_footprint (cam, &synth->image, z, inner, outer, &area, err, errlen)) {
            free (pts);
            pts = NULL;
            break;
        }
        for (int i = 0; i < TARGET_GRID; i++)
            for (int j = 0; j < TARGET_GRID; j++) {
                piv_point_t p = {.x = outer[0] + (outer[1] - outer[0]) * i / (TARGET_GRID - 1),
                                 .y = outer[2] + (outer[3] - outer[2]) * j / (TARGET_GRID - 1),
                                 .z = z};
                if (piv_camera_project (cam, p.x, p.y, p.z, &p.col, &p.row) == 0 && p.col >= -0.5 &&
                    p.col <= synth->image.width - 0.5 && p.row >= -0.5 &&
                    p.row <= synth->image.height - 0.5)
                    pts[(*n)++] = p;
            }
    }
    piv_camera_destroy (&cam);
    return pts;
}

piv_cameras_t *
piv_stereo_synth_rig (const piv_stereo_synth_t *synth, char *err, size_t errlen)
{
    piv_cameras_t *rig = piv_cameras_new ();
    if (!rig) {
        snprintf (err, errlen, "cannot make the synthetic rig: out of memory");
        return NULL;
    }
    for (int id = 1; id <= 2; id++) {
        size_t n;
        piv_point_t *pts = piv_stereo_synth_points (synth, id, &n, err, errlen);
        piv_camera_t *cam = pts ? piv_camera_choose (pts, n, NULL, err, errlen) : NULL;
        free (pts);
        if (cam)
            piv_camera_set_id (cam, id);
        if (!cam || piv_cameras_add (rig, &cam, err, errlen)) {
            piv_cameras_destroy (&rig);
            return NULL;
        }
    }
    return rig;
}

int
piv_stereo_truth_save (const piv_stereo_synth_t *synth, const piv_flow3_t *flow, double step,
                       const char *path, char *err, size_t errlen)
{
    double box[4], z = synth->sheet_z;
    if (!(step > 0)) {
        snprintf (err, errlen, "bad truth grid step '%g': must be positive", step);
        return -1;
    }
    if (piv_stereo_synth_fov (synth, z, box, err, errlen))
        return -1;
    long i0 = (long)ceil (box[0] / step), i1 = (long)floor (box[1] / step);
    long j0 = (long)ceil (box[2] / step), j1 = (long)floor (box[3] / step);
    if (i1 < i0 || j1 < j0 || (double)(i1 - i0 + 1) * (j1 - j0 + 1) > 1e8) {
        snprintf (err, errlen, "bad truth grid step '%g': %g mm by %g mm holds no grid of it", step,
                  box[1] - box[0], box[3] - box[2]);
        return -1;
    }
    FILE *out = fopen (path, "w");
    if (!out) {
        snprintf (err, errlen, "cannot write '%s': %s", path, strerror (errno));
        return -1;
    }
    fprintf (out,
             "# pivfarm-synth --stereo truth: displacement from frame A to frame B, mm per "
             "frame,\n"
             "# of the particles whose mid-time position is the grid point (world mm, Y up)\n"
             "# flow %s\n"
             "# sheet_z %.17g thickness %.17g (mm; the calibration's Z = 0 is the cameras')\n"
             "# cameras angle +-%.17g deg distance %.17g mm focal %.17g mm pitch %.17g mm k1 "
             "%.17g size %dx%d\n"
             "# grid %ld x %ld step %.17g mm\n"
             "# x y z u v w\n",
             flow->spec, synth->sheet_z, synth->thickness, synth->angle, synth->distance,
             synth->focal, synth->pitch, synth->k1, synth->image.width, synth->image.height,
             i1 - i0 + 1, j1 - j0 + 1, step);
    // Rows from the top (the largest Y), as the engine's grid.
    for (long j = j1; j >= j0; j--)
        for (long i = i0; i <= i1; i++) {
            double x = (double)i * step, y = (double)j * step, u, v, w;
            piv_flow3_eval (flow, x, y, z, &u, &v, &w);
            fprintf (out, "%.9g %.9g %.9g %.9g %.9g %.9g\n", x, y, z, u, v, w);
        }
    if (ferror (out) | (fclose (out) != 0)) {
        snprintf (err, errlen, "cannot write '%s': %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

int
piv_stereo_truth_load (piv_stereo_synth_t *synth, piv_flow3_t *flow, const char *path, char *err,
                       size_t errlen)
{
    FILE *in = fopen (path, "r");
    if (!in) {
        snprintf (err, errlen, "cannot read '%s': %s", path, strerror (errno));
        return -1;
    }
    piv_stereo_synth_init (synth);
    char line[1024], spec[256] = "";
    int seen = 0; // bit 0: stereo truth, 1: flow, 2: sheet, 3: cameras
    while (fgets (line, sizeof line, in) && line[0] == '#') {
        if (strncmp (line, "# pivfarm-synth --stereo truth", 30) == 0)
            seen |= 1;
        else if (sscanf (line, "# flow %255s", spec) == 1)
            seen |= 2;
        else if (sscanf (line, "# sheet_z %lf thickness %lf", &synth->sheet_z, &synth->thickness)
                 == 2)
            seen |= 4;
        else if (sscanf (line, "# cameras angle +-%lf deg distance %lf mm focal %lf mm pitch %lf mm "
                               "k1 %lf size %dx%d",
                         &synth->angle, &synth->distance, &synth->focal, &synth->pitch, &synth->k1,
                         &synth->image.width, &synth->image.height)
                 == 7)
            seen |= 8;
    }
    fclose (in);
    if (seen != 15) {
        snprintf (err, errlen,
                  "bad truth '%s': not a pivfarm-synth --stereo truth (its header lacks the %s)",
                  path, !(seen & 1) ? "title" : !(seen & 2) ? "flow" : !(seen & 4) ? "sheet" : "cameras");
        return -1;
    }
    char why[512];
    if (piv_flow3_parse (flow, spec, why, sizeof why)) {
        snprintf (err, errlen, "bad truth '%s': %s", path, why);
        return -1;
    }
    return piv_stereo_synth_check (synth, err, errlen);
}

// The target: dots of radius 0.28 unit where i + j is even (|i| <= ni,
// |j| <= nj), a square (side 0.48 unit) at (0, 1) and a triangle (side
// 0.64 unit, apex up) at (1, 0), as case E's and pivfarm-calib's (dots.h).
// 1 inside, 0 outside.
static int
s_target_inside (double x, double y, double unit, long ni, long nj)
{
    long i = lround (x / unit), j = lround (y / unit);
    double u = (x - (double)i * unit) / unit, v = (y - (double)j * unit) / unit;
    if (labs (i) > ni || labs (j) > nj)
        return 0;
    if (i == 0 && j == 1)
        return fabs (u) <= 0.24 && fabs (v) <= 0.24;
    if (i == 1 && j == 0) {
        double h = 0.64 * sqrt (3) / 2; // centroid at the site: base at -h/3
        double t = v + h / 3;
        return t >= 0 && t <= h && fabs (u) <= 0.32 * (1 - t / h);
    }
    return (i + j) % 2 == 0 && u * u + v * v <= 0.28 * 0.28;
}

// The dots that fit within what both cameras see on every target plane:
// the half-extents in lattice units, or -1 with err.
static int
s_target_extent (const piv_stereo_synth_t *synth, double unit, long *ni, long *nj, char *err,
                 size_t errlen)
{
    double hx = INFINITY, hy = INFINITY;
    for (int k = 0; k < TARGET_PLANES; k++) {
        double box[4];
        if (piv_stereo_synth_fov (synth, k - (TARGET_PLANES - 1) / 2, box, err, errlen))
            return -1;
        hx = fmin (hx, fmin (-box[0], box[1]));
        hy = fmin (hy, fmin (-box[2], box[3]));
    }
    *ni = (long)floor (hx / unit - 0.5);
    *nj = (long)floor (hy / unit - 0.5);
    if (*ni < 2 || *nj < 2) {
        snprintf (err, errlen, "the target of unit %g mm does not fit what both cameras see", unit);
        return -1;
    }
    return 0;
}

double
piv_stereo_synth_target_unit (const piv_stereo_synth_t *synth)
{
    double box[4];
    char err[256];
    if (piv_stereo_synth_fov (synth, 0, box, err, sizeof err))
        return NAN;
    // 4 or more dots either side of the origin; a unit one can type (0.5
    // mm steps, or 0.1 below 1 mm).
    double unit = fmin (fmin (-box[0], box[1]), fmin (-box[2], box[3])) / 5;
    double step = unit >= 1 ? 0.5 : 0.1;
    return fmax (step, floor (unit / step) * step);
}

piv_image_t *
piv_stereo_synth_target (const piv_stereo_synth_t *synth, int id, double z, double unit, char *err,
                         size_t errlen)
{
    long ni, nj;
    piv_camera_t *cam = piv_synth_camera_new (synth, id, err, errlen);
    if (!cam)
        return NULL;
    piv_camera_destroy (&cam);
    if (!(unit > 0) || s_target_extent (synth, unit, &ni, &nj, err, errlen))
        return NULL;
    s_geometry_t g;
    s_geometry (synth, id, &g);
    int width = synth->image.width, height = synth->image.height, ss = 2;
    piv_image_t *img = piv_image_new (width, height);
    if (!img) {
        snprintf (err, errlen, "cannot make a %dx%d target image: out of memory", width, height);
        return NULL;
    }
    float *px = piv_image_data (img);
    for (int row = 0; row < height; row++)
        for (int col = 0; col < width; col++) {
            int in = 0;
            for (int a = 0; a < ss; a++)
                for (int b = 0; b < ss; b++) {
                    double x, y;
                    double c = col + (b + 0.5) / ss - 0.5, r = row + (a + 0.5) / ss - 0.5;
                    if (s_ray (&g, c, r, z, &x, &y) == 0)
                        in += s_target_inside (x, y, unit, ni, nj);
                }
            // A 16-bit camera's dark ground and bright dots.
            px[(size_t)row * width + col] = (float)(300 + 3000.0 * in / (ss * ss));
        }
    return img;
}
