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

#endif
