// flow.h — known synthetic flows, synthetic particle image pairs that follow
// them, and the scoring of a measured field against the truth.

#ifndef PIV_FLOW_H
#define PIV_FLOW_H

#include <stddef.h>
#include <stdint.h>
#include "piv/field.h"
#include "piv/image.h"

typedef enum {
    PIV_FLOW_UNIFORM,     // u = p0, v = p1
    PIV_FLOW_ROTATION,    // solid rotation, p0 = rad per frame about (xc, yc)
    PIV_FLOW_LAMB_OSEEN,  // vortex at (xc, yc): p0 = peak displacement px, p1 = core radius px
    PIV_FLOW_SHEAR,       // linear shear u = p0 * (y - yc), v = 0
    PIV_FLOW_SINE         // sinusoidal shear u = p0 * sin(2 pi y / p1), v = 0
} piv_flow_kind_t;

typedef struct {
    piv_flow_kind_t kind;  // which flow
    double p0, p1;         // parameters, see piv_flow_kind_t
    double xc, yc;         // centre, px (rotation, vortex, shear)
} piv_flow_t;

// Displacement (px, frame A to frame B) of the particle whose position at the
// pair's mid-time is (x, y). The synthetic images place each particle at
// m - d(m)/2 in A and m + d(m)/2 in B, so d is exact at mid-time positions.
void piv_flow_eval (const piv_flow_t *flow, double x, double y, double *u, double *v);

// Parses 'uniform:U,V', 'rotation:OMEGA', 'lamb-oseen:VMAX,RCORE',
// 'shear:RATE', 'sine:AMPLITUDE,WAVELENGTH'. The centre defaults to the
// middle of a width x height image. 0, or -1 with err naming the spec.
int piv_flow_parse (piv_flow_t *flow, const char *spec, int width, int height, char *err,
                    size_t errlen);

// The truth file written beside synthetic images: one 'key value' per line
// (kind, p0, p1, xc, yc). 0 or -1 with err.
int piv_flow_save (const piv_flow_t *flow, const char *path, char *err, size_t errlen);
int piv_flow_load (piv_flow_t *flow, const char *path, char *err, size_t errlen);

typedef struct {
    int width, height;  // px
    double density;     // particles per pixel
    double diameter;    // particle image diameter (e^-2 intensity), px
    double noise;       // Gaussian noise std, fraction of full scale
    int bits;           // 8 or 16 (scale of the pixel values)
    uint64_t seed;      // same seed, same images
} piv_synth_t;

// Defaults: 1024 x 1024, 0.02 particles/px, 2.6 px, 2 % noise, 8 bits, seed 1.
void piv_synth_init (piv_synth_t *synth);

// Renders frames A and B of 'flow' (each particle's Gaussian integrated over
// the pixel area; random peak intensities; particles also placed outside the
// frame so that none appear or vanish at the edges). 0 or -1 with err.
int piv_synth_pair (const piv_synth_t *synth, const piv_flow_t *flow, piv_image_t **a_p,
                    piv_image_t **b_p, char *err, size_t errlen);

// Error of a field against the truth over vectors with flags <= max_flag and
// whose centre is at least 'margin' px inside the image of width x height
// (margin 0: all vectors).
typedef struct {
    int count;              // vectors scored
    double rms;             // sqrt(mean(du^2 + dv^2)), px
    double rms_u, rms_v;    // per component, px
    double bias_u, bias_v;  // mean(du), mean(dv), px
    double max_error;       // largest |dV|, px
} piv_score_t;
int piv_score (const piv_field_t *field, const piv_flow_t *flow, int max_flag, double margin,
               int width, int height, piv_score_t *score);

#endif
