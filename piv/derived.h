// derived.h — quantities derived from a vector field on its grid: the
// vorticity w_z = dv/dx - du/dy, the divergence du/dx + dv/dy and the
// speed |V|, in image units (x right, y down, px and frame pairs: rates in
// 1/frame, speed in px/frame); piv/calib.h converts them. One stencil for
// the whole farm (exports, statistics, the status page, feedback), chosen
// on the evidence of tests/test_units.c and documented in doc/units.md.

#ifndef PIV_DERIVED_H
#define PIV_DERIVED_H

#include "piv/field.h"

// Fills the arrays given (each nx * ny floats, grid order as the field; a
// NULL array is skipped). A vector flagged PIV_FLAG_INVALID (which covers
// masked ones) has NaN everywhere; vorticity and divergence are NaN where
// the stencil reaches an INVALID vector or leaves the grid: never a number
// computed from a hole. REPLACED vectors count as data. Returns the number
// of finite vorticity values, or -1 for a field without a regular grid
// (step <= 0).
int piv_field_derive (const piv_field_t *field, float *vorticity, float *divergence,
                      float *speed);

// The stencils compared in tests/test_units.c (doc/units.md gives the
// figures); piv_field_derive uses PIV_STENCIL_DEFAULT, the circulation: the
// lowest total error at 0.05 to 0.1 px of measurement noise. Central differences
// (2nd order, reach 1), the 8-point circulation around the 3x3 neighbourhood
// (Raffel et al., reach 1) and the least-squares 4-point differences
// (Raffel et al., Richardson extrapolation, reach 2). The NaN border is as
// wide as the reach.
typedef enum {
    PIV_STENCIL_CENTRAL,
    PIV_STENCIL_CIRCULATION,
    PIV_STENCIL_LEAST_SQUARES
} piv_stencil_t;
#define PIV_STENCIL_DEFAULT PIV_STENCIL_CIRCULATION
const char *piv_stencil_name (piv_stencil_t stencil);
// piv_field_derive with the stencil given.
int piv_field_derive_with (const piv_field_t *field, piv_stencil_t stencil, float *vorticity,
                           float *divergence, float *speed);

#endif
