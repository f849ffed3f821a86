// synth_stereo.h — synthetic stereo PIV: a light sheet seeded with particles,
// moved by a known 3-D flow, seen by two pinhole cameras placed by geometry
// (not fitted); the rig's calibration fitted to exact target points; the
// truth on a world grid. World X, Y, Z in mm, Z across the sheet, Y up.

#ifndef PIV_SYNTH_STEREO_H
#define PIV_SYNTH_STEREO_H

#include "piv/camera.h"
#include "piv/cameras.h"
#include "piv/flow.h"

#include <stddef.h>

typedef enum {
    PIV_FLOW3_UNIFORM, // (u, v, w) = (p0, p1, w)
    PIV_FLOW3_VORTEX,  // Lamb-Oseen about the Z axis through (0, 0): peak p0 mm at
                       // 1.12 core radii p1 mm, axial w_axis exp(-r^2 / p1^2)
    PIV_FLOW3_WGRAD    // (u, v) uniform, w = w + w_grad Z: w varying across the sheet
} piv_flow3_kind_t;

typedef struct {
    piv_flow3_kind_t kind; // which flow
    piv_flow_t plane;      // its in-plane part (piv_flow_eval, in mm)
    double w;              // out-of-plane displacement, mm per frame
    double w_axis;         // the vortex's axial displacement on its axis, mm per frame
    double w_grad;         // d w / d Z, per frame
    char spec[128];        // the spec it was parsed from
} piv_flow3_t;

// Parses 'uniform:U,V,W', 'vortex:VMAX,RCORE,WAXIS', 'wgrad:U,V,W,DWDZ'
// (mm per frame; DWDZ per frame). 0, or -1 with err naming the spec.
int piv_flow3_parse (piv_flow3_t *flow, const char *spec, char *err, size_t errlen);

// Displacement (mm, frame A to frame B) of the particle whose position at
// the pair's mid-time is (x, y, z): it is at m - d/2 in A, m + d/2 in B.
void piv_flow3_eval (const piv_flow3_t *flow, double x, double y, double z, double *u, double *v,
                     double *w);

typedef struct {
    piv_synth_t image; // each camera's images: size, particles per pixel, diameter,
                       // noise, bits, seed (piv_synth_init's defaults)
    double angle;      // deg: camera 1 at +angle about Y from the Z axis, camera 2 at -angle
    double distance;   // mm: each camera's centre from the world origin, looking at it
    double focal;      // mm: focal length
    double pitch;      // mm: pixel pitch
    double k1;         // radial distortion (Brown's k1, normalised coordinates)
    double thickness;  // mm: the light sheet's e^-2 full width (Gaussian profile in Z)
    double sheet_z;    // mm: the sheet's centre; not 0 misplaces it from the calibration
} piv_stereo_synth_t;

// Defaults: piv_synth_init's images, +-35 deg, 500 mm, 50 mm, 10 um, k1 0,
// 1 mm sheet at Z 0.
void piv_stereo_synth_init (piv_stereo_synth_t *synth);

// 0, or -1 with err naming what piv_stereo_synth_render would refuse.
int piv_stereo_synth_check (const piv_stereo_synth_t *synth, char *err, size_t errlen);

// A pinhole camera from geometry: camera 'id' (1: +angle, 2: -angle) at
// 'distance' from the origin looking at it, rows down as Y up, its
// principal point at the image's centre. Its fit figures are zero (it was
// not fitted). NULL with err.
piv_camera_t *piv_synth_camera_new (const piv_stereo_synth_t *synth, int id, char *err,
                                    size_t errlen);

// The rectangle of the plane Z = z seen by both cameras (box: X min, max,
// Y min, max, mm). 0, or -1 with err (a camera does not see the plane).
int piv_stereo_synth_fov (const piv_stereo_synth_t *synth, double z, double box[4], char *err,
                          size_t errlen);

// Renders frames A and B of both cameras (frames[c][0], frames[c][1] of
// camera c + 1) of the sheet's particles moved by 'flow'. Particles are
// seeded so that each pixel of camera 1 sees 'density' of them within the
// sheet's e^-2 width, each as bright as the sheet's profile where it is in
// each frame; particle images keep the diameter given (the magnification's
// variation is not rendered). 0, or -1 with err.
int piv_stereo_synth_render (const piv_stereo_synth_t *synth, const piv_flow3_t *flow,
                             piv_image_t *frames[2][2], char *err, size_t errlen);

// The target points of camera 'id': a grid in X and Y on the 7 planes
// Z = -3 .. 3 mm projected exactly through the true camera, those in its
// image. malloc'd (caller frees), their count in *n; NULL with err.
piv_point_t *piv_stereo_synth_points (const piv_stereo_synth_t *synth, int id, size_t *n, char *err,
                                      size_t errlen);

// The rig's calibration: each camera's model chosen by piv_camera_choose
// from its target points. NULL with err.
piv_cameras_t *piv_stereo_synth_rig (const piv_stereo_synth_t *synth, char *err, size_t errlen);

// Writes the truth: the displacement (mm per frame) on a grid of 'step' mm
// (multiples of step, over the field both cameras see) on the plane of the
// sheet's centre, 'x y z u v w' a line under a '#' header that names the
// flow, the sheet and the cameras. 0, or -1 with err.
int piv_stereo_truth_save (const piv_stereo_synth_t *synth, const piv_flow3_t *flow, double step,
                           const char *path, char *err, size_t errlen);

// Reads back what piv_stereo_truth_save wrote in a truth's header: the
// flow (its spec, parsed) and the rig's sheet and cameras (synth's other
// fields from piv_stereo_synth_init). The grid's lines are not read: the
// flow is exact anywhere. 0, or -1 with err naming the file.
int piv_stereo_truth_load (piv_stereo_synth_t *synth, piv_flow3_t *flow, const char *path,
                           char *err, size_t errlen);

// The calibration target's lattice unit (mm) for this rig: a few dots
// either side of the origin within what both cameras see (NaN when they
// see nothing in common).
double piv_stereo_synth_target_unit (const piv_stereo_synth_t *synth);

// Camera 'id''s image of the target on the plane Z = z (16-bit scale:
// ground 300, dots 3300; 2 x 2 samples a pixel): case E's kind, which
// pivfarm-calib --image reads with --spacing 'unit' (dots.h): dots where i
// + j is even on a lattice of 'unit' mm centred on the origin, as far as
// both cameras see them on every plane Z = -3 .. 3, a square at (0, 1) and
// a triangle at (1, 0). NULL with err.
piv_image_t *piv_stereo_synth_target (const piv_stereo_synth_t *synth, int id, double z,
                                      double unit, char *err, size_t errlen);

#endif
