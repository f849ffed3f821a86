// stereo.h — stereo PIV (2D3C): each camera's frames dewarped onto one
// world grid on the light-sheet plane (the rig's sheet, piv_cameras_sheet:
// Z = 0 until self-calibration, piv/selfcal.h, finds where the sheet
// really is), the planar engine run on each
// camera's dewarped pair on that grid, and the three velocity components
// solved at each vector from both cameras' displacements and the local
// derivatives of their mappings (4 equations, least squares).

#ifndef PIV_STEREO_H
#define PIV_STEREO_H

#include "piv/calib.h"
#include "piv/cameras.h"
#include "piv/field.h"
#include "piv/image.h"
#include "piv/settings.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// The world grid of the dewarped frames: piv_stereo_grid_t (cameras.h).

// A residual above this (px, the misfit of the 4 equations; see
// piv_field3_t) invalidates the vector: ~10 times the engine's random error
// on one camera (0.05-0.1 px), so noise never reaches it, while a vector
// that one camera got wrong, or the cameras saw at different places, does.
#define PIV_STEREO_MAX_RESIDUAL 1.0

// A 3-component field on the world grid (a plain struct, as piv_field_t):
// vector k = j * nx + i.
typedef struct {
    int nx, ny;        // grid columns, rows
    double *x, *y;     // world, mm (Y up)
    float *u, *v, *w;  // displacement A to B, mm per frame (w along +Z)
    float *residual;   // px: the norm of the 4 equations' misfit, image pixels
    uint8_t *flags;    // PIV_FLAG_*: the worse of the two cameras', INVALID where a
                       // camera does not see it or the residual is too high
} piv_field3_t;

piv_field3_t *piv_field3_new (int nx, int ny);
void piv_field3_destroy (piv_field3_t **self_p);

// Writes 'x y u v w flags residual' a line after the header's lines (each
// prefixed '# ') and a column line that names them with their units: x, y
// in mm, u, v, w in mm per frame, or in m/s when dt > 0 (s between frames
// A and B). 0 or -1.
int piv_field3_write (const piv_field3_t *self, FILE *out, double dt, const char *header);

typedef struct _piv_stereo_t piv_stereo_t;

// The default grid for frames of width x height px of cameras c1 and c2:
// the largest rectangle found (greedily) on Z = 0 that both cameras see and
// both calibrations covered (their bounds), at the finer of the cameras'
// resolutions at its centre. 0, or -1 with err when the cameras see no
// common area.
int piv_stereo_default_grid (const piv_camera_t *c1, const piv_camera_t *c2, int width, int height,
                             piv_stereo_grid_t *grid, char *err, size_t errlen);

// The grid piv_stereo_new takes when given none: the rig's own if it has
// one, else the default grid of its first two cameras on its sheet's plane.
// 0, or -1 with err (not two cameras, no common area).
int piv_stereo_rig_grid (const piv_cameras_t *rig, int width, int height, piv_stereo_grid_t *grid,
                         char *err, size_t errlen);

// The dewarping's interpolator unless piv_stereo_set_dewarp says another:
// its own, apart from the settings' deform (the engine's between passes),
// chosen by bench_stereo's cost and accuracy (doc/stereo.md).
#define PIV_STEREO_DEWARP PIV_DEFORM_BICUBIC

// A stereo engine for the rig's first two cameras (in the file's order),
// frames of width x height px, the engine's settings (their threads also
// dewarp), on 'grid' (NULL: the default grid), dewarping with
// PIV_STEREO_DEWARP. The settings' mask is refused (it is in one camera's
// pixels). NULL with err when the
// rig has not two cameras, the settings are bad, or the grid is empty.
piv_stereo_t *piv_stereo_new (const piv_cameras_t *rig, const piv_settings_t *settings, int width,
                              int height, const piv_stereo_grid_t *grid, char *err, size_t errlen);
void piv_stereo_destroy (piv_stereo_t **self_p);

const piv_stereo_grid_t *piv_stereo_grid (const piv_stereo_t *self);
// The sheet the grid lies on (the rig's when the engine was made).
void piv_stereo_sheet (const piv_stereo_t *self, piv_sheet_t *sheet);
// The residual bound (px; default PIV_STEREO_MAX_RESIDUAL, <= 0: none).
void piv_stereo_set_max_residual (piv_stereo_t *self, double px);

// The dewarping's interpolator: any but offset (which has none). Locates
// each grid pixel in both frames again (as piv_stereo_new: a setup's
// time). 0, or -1 with err (offset, no memory: the engine is then unusable).
int piv_stereo_set_dewarp (piv_stereo_t *self, piv_deform_t interp, char *err, size_t errlen);
piv_deform_t piv_stereo_dewarp_interp (const piv_stereo_t *self);

// Dewarps a frame of camera 'cam' (0 or 1: the rig's order) onto the grid:
// 'out' (grid-sized) gets the frame sampled at each grid pixel's image
// position, 0 where the camera does not see it. 0, or -1 with err on a
// frame of another size or no memory.
int piv_stereo_dewarp (const piv_stereo_t *self, int cam, const piv_image_t *frame,
                       piv_image_t *out, char *err, size_t errlen);

// Dewarps frames a and b of camera 'cam' into out_a and out_b, as
// piv_stereo_dewarp each, in one sweep (each grid pixel's position and
// weights looked up once for both): what piv_stereo_process does.
int piv_stereo_dewarp_pair (const piv_stereo_t *self, int cam, const piv_image_t *a,
                            const piv_image_t *b, piv_image_t *out_a, piv_image_t *out_b,
                            char *err, size_t errlen);

// The 3-component field of frames A1 B1 (camera 0) and A2 B2 (camera 1).
// NULL with err when a frame has another size, the engine fails, or memory
// runs out.
piv_field3_t *piv_stereo_process (piv_stereo_t *self, const piv_image_t *a1, const piv_image_t *b1,
                                  const piv_image_t *a2, const piv_image_t *b2, char *err,
                                  size_t errlen);

// The farm's form of a 3-component field: a piv_field_t with w and
// residual (field.h) on the grid's pixels: x = (X - x0) / step, y = (y0 -
// Y) / step, u = U / step, v = -V / step (rows down), w = W / step, so that
// piv_stereo_grid_calib's calibration gives mm and m/s back. window, step
// and runs are the engine's (planar: its dewarped field's). NULL on no
// memory or a field that is not a regular grid.
piv_field_t *piv_stereo_field (const piv_field3_t *f3, const piv_stereo_grid_t *grid,
                               const piv_field_t *planar);
// The calibration that turns the grid's pixels into the world's mm: scale
// step mm/px, origin (-x0 / step, y0 / step), y up, and dt (s; > 0) as
// given: c->set. The origin may lie outside the frames.
void piv_stereo_grid_calib (const piv_stereo_grid_t *grid, double dt, piv_calib_t *c);

// The two cameras' planar fields of the last piv_stereo_process (dewarped
// px on the grid), for reports; NULL before.
const piv_field_t *piv_stereo_planar (const piv_stereo_t *self, int cam);

#endif
