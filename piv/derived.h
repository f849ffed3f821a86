// derived.h — quantities derived from a vector field on its grid: the
// vorticity w_z = dv/dx - du/dy, the divergence du/dx + dv/dy and the
// speed |V|, in image units (x right, y down, px and frame pairs: rates in
// 1/frame, speed in px/frame); piv/calib.h converts them. One stencil for
// the whole farm (exports, statistics, the status page, feedback), chosen
// on the evidence of tests/test_units.c and documented in doc/units.md.

#ifndef PIV_DERIVED_H
#define PIV_DERIVED_H

#include "piv/field.h"

// The quantities piv_field_derive fills: each member an array of nx * ny
// floats in the field's grid order, or NULL to skip that quantity. Callers
// name the members they want (&(piv_derived_t){.vorticity = w}), so that a
// quantity added here leaves every caller that does not show it unchanged.
typedef struct {
    float *vorticity;   // w_z = dv/dx - du/dy, 1/frame
    float *divergence;  // du/dx + dv/dy, 1/frame
    float *speed;       // |V|, px/frame
} piv_derived_t;

// Fills the arrays 'out' names ('out' NULL: none, only the count). A
// vector flagged PIV_FLAG_INVALID (which covers masked ones) has NaN
// everywhere; vorticity and divergence are NaN where the stencil reaches an
// INVALID vector or leaves the grid: never a number computed from a hole.
// REPLACED vectors count as data. Returns the number of finite vorticity
// values (counted whether or not 'out' asks for the vorticity), or -1 for a
// field without a regular grid (step <= 0).
int piv_field_derive (const piv_field_t *field, const piv_derived_t *out);

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
// piv_field_derive with the stencil given. (An argument, not a member of
// piv_derived_t: a member left out would be 0, PIV_STENCIL_CENTRAL, not the
// farm's stencil.)
int piv_field_derive_with (const piv_field_t *field, piv_stencil_t stencil,
                           const piv_derived_t *out);

#endif
