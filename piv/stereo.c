// stereo.c — stereo PIV (2D3C) from two calibrated cameras: dewarping onto
// a world grid on the light sheet's plane (the rig's sheet, Z = 0 until
// self-calibration finds it) with one of the deformation's interpolators
// (piv/deform.h; Keys bicubic by default), the planar engine on each
// camera's dewarped pair, and the least-squares solution of
// the 4 equations in (u, v, w) at each vector (Soloff et al. 1997, MST 8).

#include "piv/stereo.h"
#include "piv/camera_internal.h"
#include "piv/deform.h"
#include "piv/piv.h"
#include "piv/smooth.h"
#include "piv/stats_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct _piv_stereo_t {
    piv_camera_t *cam[2];    // copies of the rig's first two cameras
    int width, height;       // the cameras' frames, px
    piv_stereo_grid_t grid;  // the dewarped frames' world grid
    piv_sheet_t sheet;       // the plane the grid lies on (the rig's)
    piv_settings_t settings;  // the engine's, as given
    piv_deform_t interp;     // the dewarping's interpolator
    double max_residual;     // px; <= 0: no bound
    // Each grid pixel's position in each camera's frame: located (pixel and
    // weights' rows, 8 bytes) for the interpolators that can be, else as
    // floats (NaN where the camera does not see it); the other NULL.
    piv_deform_pos_t *pos[2];
    float *col[2], *row[2];
    float *coef[2];          // frame-sized scratch: interpolation coefficients of A, B
    piv_pool_t *pool;        // the settings' threads on one pair (NULL: one)
    piv_t *piv;              // the planar engine, run on each camera in turn
    piv_image_t *dw[4];      // the dewarped A1 B1 A2 B2
    piv_field_t *planar[2];  // each camera's field of the last pair
};

// --------------------------------------------------------------- field3

piv_field3_t *
piv_field3_new (int nx, int ny)
{
    if (nx < 1 || ny < 1 || (long) nx * ny > (1L << 28))
        return NULL;
    size_t n = (size_t) nx * (size_t) ny;
    piv_field3_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->nx = nx;
    self->ny = ny;
    self->x = calloc (n, sizeof (double));
    self->y = calloc (n, sizeof (double));
    self->u = calloc (n, sizeof (float));
    self->v = calloc (n, sizeof (float));
    self->w = calloc (n, sizeof (float));
    self->residual = calloc (n, sizeof (float));
    self->flags = calloc (n, 1);
    if (!self->x || !self->y || !self->u || !self->v || !self->w || !self->residual || !self->flags)
        piv_field3_destroy (&self);
    return self;
}

void
piv_field3_destroy (piv_field3_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_field3_t *self = *self_p;
    free (self->x);
    free (self->y);
    free (self->u);
    free (self->v);
    free (self->w);
    free (self->residual);
    free (self->flags);
    free (self);
    *self_p = NULL;
}

int
piv_field3_write (const piv_field3_t *self, FILE *out, double dt, const char *header)
{
    // mm per frame to m/s: / dt (s) / 1000 (mm per m).
    double scale = dt > 0 ? 1e-3 / dt : 1;
    piv_write_header_lines (out, header, "# ");
    fprintf (out, "# x y u v w flags residual (x, y: mm; u, v, w: %s; residual: px)\n",
             dt > 0 ? "m/s" : "mm per frame");
    size_t n = (size_t) self->nx * (size_t) self->ny;
    // x, y to the micrometre; u, v, w with 7 significant digits, whatever
    // their unit.
    for (size_t k = 0; k < n; k++)
        fprintf (out, "%.3f %.3f %.7g %.7g %.7g %d %.4f\n", self->x[k], self->y[k],
                 self->u[k] * scale, self->v[k] * scale, self->w[k] * scale, self->flags[k],
                 self->residual[k]);
    return ferror (out) ? -1 : 0;
}

// ----------------------------------------------------------------- grid

// The sheet's Z at world (x, y): all zero gives exactly 0.
static double
s_sheet_z (const piv_sheet_t *sheet, double x, double y)
{
    return sheet->z0 + sheet->dzdx * x + sheet->dzdy * y;
}

// Whether camera c sees world (x, y, z) inside its frame of w x h px, and
// where (*col, *row).
static int
s_sees (const piv_camera_t *c, double x, double y, double z, int w, int h, double *col,
        double *row)
{
    double cc, rr;
    if (piv_camera_project (c, x, y, z, &cc, &rr) != 0 || !isfinite (cc) || !isfinite (rr))
        return 0;
    if (col)
        *col = cc;
    if (row)
        *row = rr;
    return cc >= 0 && cc <= w - 1 && rr >= 0 && rr <= h - 1;
}

// px per mm of camera c on the plane Z = z at (x, y): the square root of
// the area ratio of its mapping there (an oblique camera compresses one axis).
static double
s_px_per_mm (const piv_camera_t *c, double x, double y, double z)
{
    double d[2][3];
    if (piv_camera_derivatives (c, x, y, z, d) != 0)
        return NAN;
    return sqrt (fabs (d[0][0] * d[1][1] - d[0][1] * d[1][0]));
}

enum { LATTICE = 200 };  // samples a side of the region searched for the overlap

// piv_stereo_default_grid on the sheet's plane instead of Z = 0.
static int
s_default_grid (const piv_camera_t *c1, const piv_camera_t *c2, const piv_sheet_t *sheet,
                int width, int height, piv_stereo_grid_t *grid, char *err, size_t errlen)
{
    piv_camera_info_t a, b;
    piv_camera_info (c1, &a);
    piv_camera_info (c2, &b);
    // What both calibrations covered: a Soloff polynomial is only known there.
    double x0 = fmax (a.bounds[0], b.bounds[0]), x1 = fmin (a.bounds[1], b.bounds[1]);
    double y0 = fmax (a.bounds[2], b.bounds[2]), y1 = fmin (a.bounds[3], b.bounds[3]);
    if (!(x1 > x0 && y1 > y0)) {
        cam_seterr (err, errlen,
                    "cameras %d and %d: their calibrations cover no common area of the "
                    "light sheet's plane",
                    a.id, b.id);
        return -1;
    }
    unsigned char *seen = malloc ((size_t) LATTICE * LATTICE);
    if (!seen) {
        cam_seterr (err, errlen, "cannot make the stereo grid: out of memory");
        return -1;
    }
    int i0 = LATTICE, i1 = -1, j0 = LATTICE, j1 = -1;
    for (int j = 0; j < LATTICE; j++)
        for (int i = 0; i < LATTICE; i++) {
            double x = x0 + (x1 - x0) * i / (LATTICE - 1), y = y0 + (y1 - y0) * j / (LATTICE - 1);
            double z = s_sheet_z (sheet, x, y);
            int s = s_sees (c1, x, y, z, width, height, NULL, NULL) &&
                    s_sees (c2, x, y, z, width, height, NULL, NULL);
            seen[j * LATTICE + i] = (unsigned char) s;
            if (s) {
                i0 = i < i0 ? i : i0;
                i1 = i > i1 ? i : i1;
                j0 = j < j0 ? j : j0;
                j1 = j > j1 ? j : j1;
            }
        }
    // Shrink the bounding box of what both see until all of it is seen: each
    // time the side with the largest share of unseen samples moves in.
    while (i0 < i1 && j0 < j1) {
        double miss[4] = {0, 0, 0, 0};  // left, right, bottom, top
        for (int j = j0; j <= j1; j++) {
            miss[0] += !seen[j * LATTICE + i0];
            miss[1] += !seen[j * LATTICE + i1];
        }
        for (int i = i0; i <= i1; i++) {
            miss[2] += !seen[j0 * LATTICE + i];
            miss[3] += !seen[j1 * LATTICE + i];
        }
        miss[0] /= j1 - j0 + 1;
        miss[1] /= j1 - j0 + 1;
        miss[2] /= i1 - i0 + 1;
        miss[3] /= i1 - i0 + 1;
        int side = 0;
        for (int s = 1; s < 4; s++)
            side = miss[s] > miss[side] ? s : side;
        if (miss[side] == 0)
            break;
        if (side == 0)
            i0++;
        else if (side == 1)
            i1--;
        else if (side == 2)
            j0++;
        else
            j1--;
    }
    free (seen);
    if (!(i0 < i1 && j0 < j1)) {
        cam_seterr (err, errlen,
                    "cameras %d and %d see no common area of the light sheet's plane in their "
                    "%dx%d frames",
                    a.id, b.id, width, height);
        return -1;
    }
    double xa = x0 + (x1 - x0) * i0 / (LATTICE - 1), xb = x0 + (x1 - x0) * i1 / (LATTICE - 1);
    double ya = y0 + (y1 - y0) * j0 / (LATTICE - 1), yb = y0 + (y1 - y0) * j1 / (LATTICE - 1);
    double xc = (xa + xb) / 2, yc = (ya + yb) / 2;
    double zc = s_sheet_z (sheet, xc, yc);
    double ppm = fmax (s_px_per_mm (c1, xc, yc, zc), s_px_per_mm (c2, xc, yc, zc));
    if (!(ppm > 0) || !isfinite (ppm)) {
        cam_seterr (err, errlen, "cameras %d and %d: no resolution at (%g, %g) mm", a.id, b.id, xc,
                    yc);
        return -1;
    }
    grid->step = 1 / ppm;
    grid->x0 = xa;
    grid->y0 = yb;
    grid->width = (int) floor ((xb - xa) * ppm) + 1;
    grid->height = (int) floor ((yb - ya) * ppm) + 1;
    return 0;
}

int
piv_stereo_default_grid (const piv_camera_t *c1, const piv_camera_t *c2, int width, int height,
                         piv_stereo_grid_t *grid, char *err, size_t errlen)
{
    const piv_sheet_t plane = {0, 0, 0};
    return s_default_grid (c1, c2, &plane, width, height, grid, err, errlen);
}

int
piv_stereo_rig_grid (const piv_cameras_t *rig, int width, int height, piv_stereo_grid_t *grid,
                     char *err, size_t errlen)
{
    if (piv_cameras_count (rig) != 2) {
        cam_seterr (err, errlen, "stereo needs a calibration of two cameras, this one has %zu",
                    piv_cameras_count (rig));
        return -1;
    }
    if (piv_cameras_grid (rig, grid))
        return 0;  // the rig's own (pivfarm-calib --size)
    piv_sheet_t sheet;
    piv_cameras_sheet (rig, &sheet);
    return s_default_grid (piv_cameras_get (rig, 0), piv_cameras_get (rig, 1), &sheet, width,
                           height, grid, err, errlen);
}

// --------------------------------------------------------------- engine

// Frees the grid pixels' positions of both cameras.
static void
s_positions_free (piv_stereo_t *self)
{
    for (int c = 0; c < 2; c++) {
        free (self->pos[c]);
        free (self->col[c]);
        free (self->row[c]);
        self->pos[c] = NULL;
        self->col[c] = self->row[c] = NULL;
    }
}

piv_stereo_t *
piv_stereo_new (const piv_cameras_t *rig, const piv_settings_t *settings, int width, int height,
                const piv_stereo_grid_t *grid, char *err, size_t errlen)
{
    if (piv_cameras_count (rig) != 2) {
        cam_seterr (err, errlen, "stereo needs a calibration of two cameras, this one has %zu",
                    piv_cameras_count (rig));
        return NULL;
    }
    if (width < 1 || height < 1) {
        cam_seterr (err, errlen, "stereo: bad frame size %dx%d", width, height);
        return NULL;
    }
    if (settings->mask) {
        cam_seterr (err, errlen,
                    "stereo: a mask is not supported yet (it would be in one camera's "
                    "pixels)");
        return NULL;
    }
    piv_stereo_t *self = calloc (1, sizeof *self);
    if (!self) {
        cam_seterr (err, errlen, "stereo: out of memory");
        return NULL;
    }
    self->width = width;
    self->height = height;
    self->settings = *settings;
    self->max_residual = PIV_STEREO_MAX_RESIDUAL;
    piv_cameras_sheet (rig, &self->sheet);
    for (int c = 0; c < 2; c++)
        if (!(self->cam[c] = piv_camera_dup (piv_cameras_get (rig, (size_t) c)))) {
            cam_seterr (err, errlen, "stereo: out of memory");
            goto fail;
        }
    if (grid)
        self->grid = *grid;
    else if (piv_stereo_rig_grid (rig, width, height, &self->grid, err, errlen))
        goto fail;
    const piv_stereo_grid_t *g = &self->grid;
    if (g->width < 1 || g->height < 1 || !(g->step > 0) ||
        (long) g->width * g->height > (1L << 26)) {
        cam_seterr (err, errlen, "bad stereo grid: %dx%d px of %g mm", g->width, g->height,
                    g->step);
        goto fail;
    }
    if (!(self->piv = piv_new (settings, err, errlen)))
        goto fail;
    for (int f = 0; f < 4; f++)
        self->dw[f] = piv_image_new (g->width, g->height);
    if (settings->threads > 1)
        self->pool = piv_pool_new (settings->threads);
    if (!self->dw[0] || !self->dw[1] || !self->dw[2] || !self->dw[3] ||
        (settings->threads > 1 && !self->pool)) {
        cam_seterr (err, errlen, "stereo: out of memory for a %dx%d grid", g->width, g->height);
        goto fail;
    }
    if (piv_stereo_set_dewarp (self, PIV_STEREO_DEWARP, err, errlen))
        goto fail;
    return self;
fail:
    piv_stereo_destroy (&self);
    return NULL;
}

void
piv_stereo_destroy (piv_stereo_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_stereo_t *self = *self_p;
    for (int c = 0; c < 2; c++) {
        piv_camera_destroy (&self->cam[c]);
        free (self->coef[c]);
        piv_field_destroy (&self->planar[c]);
    }
    for (int f = 0; f < 4; f++)
        piv_image_destroy (&self->dw[f]);
    s_positions_free (self);
    piv_pool_destroy (&self->pool);
    piv_destroy (&self->piv);
    free (self);
    *self_p = NULL;
}

const piv_stereo_grid_t *
piv_stereo_grid (const piv_stereo_t *self)
{
    return &self->grid;
}

void
piv_stereo_sheet (const piv_stereo_t *self, piv_sheet_t *sheet)
{
    *sheet = self->sheet;
}

void
piv_stereo_set_max_residual (piv_stereo_t *self, double px)
{
    self->max_residual = px;
}

const piv_field_t *
piv_stereo_planar (const piv_stereo_t *self, int cam)
{
    return cam == 0 || cam == 1 ? self->planar[cam] : NULL;
}

// ------------------------------------------------------------- dewarping

piv_deform_t
piv_stereo_dewarp_interp (const piv_stereo_t *self)
{
    return self->interp;
}

int
piv_stereo_set_dewarp (piv_stereo_t *self, piv_deform_t interp, char *err, size_t errlen)
{
    if (interp == PIV_DEFORM_OFFSET || interp < 0 || interp >= PIV_DEFORM_KINDS) {
        cam_seterr (err, errlen, "stereo: '%s' is no interpolator to dewarp with",
                    piv_deform_name (interp));
        return -1;
    }
    const piv_stereo_grid_t *g = &self->grid;
    int w = self->width, h = self->height, located = piv_deform_locatable (interp, w, h);
    size_t n = (size_t) g->width * (size_t) g->height;
    s_positions_free (self);
    self->interp = interp;
    int bad = 0;
    for (int c = 0; c < 2; c++) {
        if (located)
            bad |= !(self->pos[c] = malloc (n * sizeof (piv_deform_pos_t)));
        else {
            bad |= !(self->col[c] = malloc (n * sizeof (float)));
            bad |= !(self->row[c] = malloc (n * sizeof (float)));
        }
        // A frame's own pixels are the source unless prefiltered.
        if (piv_deform_prefiltered (interp) && !self->coef[c])
            bad |= !(self->coef[c] = malloc ((size_t) w * (size_t) h * sizeof (float)));
    }
    // One grid row's positions, located as they come (no frame-sized floats).
    float *line = malloc ((size_t) g->width * 2 * sizeof (float));
    if (bad || !line) {
        free (line);
        s_positions_free (self);  // s_dewarp refuses then
        cam_seterr (err, errlen, "stereo: out of memory for a %dx%d grid", g->width, g->height);
        return -1;
    }
    // Where each grid pixel lands in each frame, once for all pairs.
    for (int c = 0; c < 2; c++)
        for (int r = 0; r < g->height; r++) {
            size_t k0 = (size_t) r * g->width;
            float *lc = located ? line : self->col[c] + k0;
            float *lr = located ? line + g->width : self->row[c] + k0;
            for (int q = 0; q < g->width; q++) {
                double col, row, x = g->x0 + q * g->step, y = g->y0 - r * g->step;
                int in = s_sees (self->cam[c], x, y, s_sheet_z (&self->sheet, x, y), w, h, &col,
                                 &row);
                lc[q] = in ? (float) col : NAN;
                lr[q] = in ? (float) row : NAN;
            }
            if (located)
                piv_deform_locate (w, h, lc, lr, self->pos[c] + k0, g->width);
        }
    free (line);
    return 0;
}

// One camera's dewarping: its frames' sources and the grid's outputs.
typedef struct {
    const piv_stereo_t *self;
    int cam;
    const float *src[2];
    float *out[2];  // [1] NULL: one frame
} s_dewarp_t;

// Grid rows [first, last) of a dewarping (a part of the pool's).
static void
s_dewarp_rows (void *arg, int first, int last, int part)
{
    (void) part;
    const s_dewarp_t *d = arg;
    const piv_stereo_t *self = d->self;
    long gw = self->grid.width, k0 = first * gw, n = (last - first) * gw;
    int w = self->width, h = self->height;
    if (self->pos[d->cam]) {
        // Both frames in one sweep: one lookup of each position.
        piv_deform_sample_located (self->interp, d->src[0], d->src[1], w, h,
                                   self->pos[d->cam] + k0, d->out[0] + k0,
                                   d->out[1] ? d->out[1] + k0 : NULL, n);
        return;
    }
    for (int f = 0; f < 2 && d->out[f]; f++)
        piv_deform_sample (self->interp, d->src[f], w, h, self->col[d->cam] + k0,
                           self->row[d->cam] + k0, d->out[f] + k0, n);
}

// Checks a frame of camera 'cam' and its dewarped frame's size. 0 or -1.
static int
s_check (const piv_stereo_t *self, int cam, const piv_image_t *frame, const piv_image_t *out,
         char *err, size_t errlen)
{
    const piv_stereo_grid_t *g = &self->grid;
    if (piv_image_width (frame) != self->width || piv_image_height (frame) != self->height) {
        cam_seterr (err, errlen,
                    "a frame of camera %d is %dx%d, the calibration's frames are %dx%d",
                    piv_camera_id (self->cam[cam]), piv_image_width (frame),
                    piv_image_height (frame), self->width, self->height);
        return -1;
    }
    if (piv_image_width (out) != g->width || piv_image_height (out) != g->height) {
        cam_seterr (err, errlen, "stereo: the dewarped frame is %dx%d, the grid %dx%d",
                    piv_image_width (out), piv_image_height (out), g->width, g->height);
        return -1;
    }
    if (!piv_image_cdata (frame) || !piv_image_data ((piv_image_t *) out)) {
        cam_seterr (err, errlen, "stereo: out of memory");
        return -1;
    }
    return 0;
}

// Dewarps frame a (and b unless NULL) of camera 'cam' into out_a (out_b).
static int
s_dewarp (const piv_stereo_t *self, int cam, const piv_image_t *a, const piv_image_t *b,
          piv_image_t *out_a, piv_image_t *out_b, char *err, size_t errlen)
{
    if (s_check (self, cam, a, out_a, err, errlen) ||
        (b && s_check (self, cam, b, out_b, err, errlen)))
        return -1;
    if (!self->pos[cam] && !self->col[cam]) {  // a failed piv_stereo_set_dewarp
        cam_seterr (err, errlen, "stereo: no grid positions to dewarp camera %d's frames with",
                    piv_camera_id (self->cam[cam]));
        return -1;
    }
    s_dewarp_t d = {self, cam, {piv_image_cdata (a), b ? piv_image_cdata (b) : NULL},
                    {piv_image_data (out_a), b ? piv_image_data (out_b) : NULL}};
    // The coefficients are the stereo engine's scratch: dewarping is not
    // to be run by two threads on one engine (as piv_process).
    for (int f = 0; f < 2 && d.src[f]; f++)
        if (piv_deform_prefiltered (self->interp)) {
            float *coef = ((piv_stereo_t *) self)->coef[f];
            piv_deform_prepare (self->interp, d.src[f], coef, self->width, self->height);
            d.src[f] = coef;
        }
    // Unseen grid pixels (NaN positions) come out 0.
    piv_pool_run (self->pool, self->settings.threads, self->grid.height, s_dewarp_rows, &d);
    return 0;
}

int
piv_stereo_dewarp (const piv_stereo_t *self, int cam, const piv_image_t *frame, piv_image_t *out,
                   char *err, size_t errlen)
{
    return s_dewarp (self, cam, frame, NULL, out, NULL, err, errlen);
}

int
piv_stereo_dewarp_pair (const piv_stereo_t *self, int cam, const piv_image_t *a,
                        const piv_image_t *b, piv_image_t *out_a, piv_image_t *out_b, char *err,
                        size_t errlen)
{
    return s_dewarp (self, cam, a, b, out_a, out_b, err, errlen);
}

// -------------------------------------------------------- reconstruction

// Solves the 4 x 3 system a x = b by least squares (normal equations, 3 x 3
// by cofactors: the system is small and, for cameras apart by tens of
// degrees, well conditioned). -1 when it is nearly singular (cameras that
// look along the same line cannot tell w).
static int
s_solve (const double a[4][3], const double b[4], double x[3], double *residual)
{
    double n[3][3] = {{0}}, g[3] = {0};
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 3; i++) {
            g[i] += a[r][i] * b[r];
            for (int j = 0; j < 3; j++)
                n[i][j] += a[r][i] * a[r][j];
        }
    double c[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int i1 = (i + 1) % 3, i2 = (i + 2) % 3, j1 = (j + 1) % 3, j2 = (j + 2) % 3;
            c[j][i] = n[i1][j1] * n[i2][j2] - n[i1][j2] * n[i2][j1];  // adjugate
        }
    double det = n[0][0] * c[0][0] + n[0][1] * c[1][0] + n[0][2] * c[2][0];
    double tr = n[0][0] + n[1][1] + n[2][2];
    if (!(fabs (det) > 1e-9 * tr * tr * tr))
        return -1;
    for (int i = 0; i < 3; i++)
        x[i] = (c[i][0] * g[0] + c[i][1] * g[1] + c[i][2] * g[2]) / det;
    double ss = 0;
    for (int r = 0; r < 4; r++) {
        double e = b[r] - (a[r][0] * x[0] + a[r][1] * x[1] + a[r][2] * x[2]);
        ss += e * e;
    }
    *residual = sqrt (ss);
    return 0;
}

// Vector k of the two planar fields into out: the world position, and
// (u, v, w) from each camera's displacement on the plane. A particle moved
// by (U, V, W) moves in camera c's image by J_c (U, V, W) (J_c its mapping's
// derivatives there, px per mm); camera c's dewarped displacement is the
// move on the sheet that would give the same image motion, (dX, dY) and
// the sheet's dZ = dzdx dX + dzdy dY, so J_c times (dX, dY, dZ) is that
// image motion: 2 equations per camera, 4 in all, 3 unknowns.
static void
s_vector (const piv_stereo_t *self, long k, piv_field3_t *out)
{
    const piv_stereo_grid_t *g = &self->grid;
    const piv_field_t *f[2] = {self->planar[0], self->planar[1]};
    double x = g->x0 + f[0]->x[k] * g->step, y = g->y0 - f[0]->y[k] * g->step;
    double z = s_sheet_z (&self->sheet, x, y);
    out->x[k] = x;
    out->y[k] = y;
    int flag = f[0]->flags[k] > f[1]->flags[k] ? f[0]->flags[k] : f[1]->flags[k];
    double a[4][3], b[4], sol[3], residual;
    for (int c = 0; c < 2; c++) {
        double d[2][3];
        if (!s_sees (self->cam[c], x, y, z, self->width, self->height, NULL, NULL) ||
            piv_camera_derivatives (self->cam[c], x, y, z, d) != 0)
            goto unseen;
        double dx = f[c]->u[k] * g->step, dy = -f[c]->v[k] * g->step;
        double dz = self->sheet.dzdx * dx + self->sheet.dzdy * dy;
        for (int r = 0; r < 2; r++) {
            memcpy (a[2 * c + r], d[r], sizeof d[r]);
            // A flat sheet adds nothing: the sum is Z = 0's bit for bit.
            b[2 * c + r] = d[r][0] * dx + d[r][1] * dy;
            if (dz != 0)
                b[2 * c + r] += d[r][2] * dz;
        }
    }
    if (s_solve (a, b, sol, &residual) != 0)
        goto unseen;
    out->u[k] = (float) sol[0];
    out->v[k] = (float) sol[1];
    out->w[k] = (float) sol[2];
    out->residual[k] = (float) residual;
    if (self->max_residual > 0 && residual > self->max_residual)
        flag = PIV_FLAG_INVALID;
    out->flags[k] = (uint8_t) flag;
    return;
unseen:
    out->u[k] = out->v[k] = out->w[k] = 0;
    out->residual[k] = NAN;
    out->flags[k] = PIV_FLAG_INVALID;
}

piv_field_t *
piv_stereo_field (const piv_field3_t *f3, const piv_stereo_grid_t *grid,
                  const piv_field_t *planar)
{
    piv_field_t *f = piv_field_new (f3->nx, f3->ny);
    if (!f || piv_field_add_w (f) != 0) {
        piv_field_destroy (&f);
        return NULL;
    }
    double s = grid->step;
    long n = (long) f3->nx * f3->ny;
    for (long k = 0; k < n; k++) {
        if (!planar) {  // else the planar field's exact grid pixels, below
            f->x[k] = (float) ((f3->x[k] - grid->x0) / s);
            f->y[k] = (float) ((grid->y0 - f3->y[k]) / s);
        }
        f->u[k] = (float) (f3->u[k] / s);
        f->v[k] = (float) (-f3->v[k] / s);
        f->w[k] = (float) (f3->w[k] / s);
        f->residual[k] = f3->residual[k];
        f->flags[k] = f3->flags[k];
        f->peak_ratio[k] = planar ? planar->peak_ratio[k] : 0;
    }
    if (planar) {
        f->window = planar->window;
        f->step = planar->step;
        f->runs = planar->runs;
        // The positions as the planar field's: exact grid pixels.
        memcpy (f->x, planar->x, (size_t) n * sizeof (float));
        memcpy (f->y, planar->y, (size_t) n * sizeof (float));
    }
    return f;
}

void
piv_stereo_grid_calib (const piv_stereo_grid_t *grid, double dt, piv_calib_t *c)
{
    piv_calib_init (c);
    c->scale = grid->step * 1e-3;  // m per px
    c->dt = dt;
    c->origin_x = -grid->x0 / grid->step;
    c->origin_y = grid->y0 / grid->step;
    c->y_up = 1;
    c->set = dt > 0;
}

piv_field3_t *
piv_stereo_process (piv_stereo_t *self, const piv_image_t *a1, const piv_image_t *b1,
                    const piv_image_t *a2, const piv_image_t *b2, char *err, size_t errlen)
{
    const piv_image_t *in[4] = {a1, b1, a2, b2};
    for (int c = 0; c < 2; c++)
        if (piv_stereo_dewarp_pair (self, c, in[2 * c], in[2 * c + 1], self->dw[2 * c],
                                    self->dw[2 * c + 1], err, errlen))
            return NULL;
    for (int c = 0; c < 2; c++) {
        piv_field_destroy (&self->planar[c]);
        char why[512];
        if (!(self->planar[c] =
                  piv_process (self->piv, self->dw[2 * c], self->dw[2 * c + 1], why, sizeof why))) {
            cam_seterr (err, errlen, "camera %d's dewarped pair: %s", piv_camera_id (self->cam[c]),
                        why);
            return NULL;
        }
    }
    const piv_field_t *f0 = self->planar[0], *f1 = self->planar[1];
    if (f0->nx != f1->nx || f0->ny != f1->ny) {  // one grid, one settings: never
        cam_seterr (err, errlen, "stereo: the cameras' fields differ (%dx%d, %dx%d)", f0->nx,
                    f0->ny, f1->nx, f1->ny);
        return NULL;
    }
    piv_field3_t *out = piv_field3_new (f0->nx, f0->ny);
    if (!out) {
        cam_seterr (err, errlen, "stereo: out of memory");
        return NULL;
    }
    long n = (long) f0->nx * f0->ny;
    for (long k = 0; k < n; k++)
        s_vector (self, k, out);
    return out;
}
