// derived.h — quantities derived from a vector field on its grid: the
// vorticity w_z = dv/dx - du/dy, the divergence du/dx + dv/dy and the
// speed |V|, in image units (x right, y down, px and frame pairs: rates in
// 1/frame, speed in px/frame); piv/calib.h converts them. One stencil for
// the whole farm (exports, statistics, the status page, feedback), chosen
// on the evidence of tests/test_units.c and documented in doc/units.md.

#ifndef PIV_DERIVED_H
#define PIV_DERIVED_H

#include "piv/calib.h"
#include "piv/field.h"

// The quantities, in the order every file lists them (piv_quantities).
typedef enum {
    PIV_DERIVED_VORTICITY,
    PIV_DERIVED_DIVERGENCE,
    PIV_DERIVED_SPEED,
    PIV_DERIVED_COUNT
} piv_quantity_t;

// The quantities piv_field_derive fills: each member an array of nx * ny
// floats in the field's grid order, or NULL to skip that quantity. Callers
// name the members they want (&(piv_derived_t){.vorticity = w}), so that a
// quantity added here leaves every caller that does not show it unchanged;
// code that walks the table reaches the same arrays as of[q].
typedef union {
    struct {
        float *vorticity;  // w_z = dv/dx - du/dy, 1/frame
        float *divergence; // du/dx + dv/dy, 1/frame
        float *speed;      // |V|, px/frame
    };
    float *of[PIV_DERIVED_COUNT]; // by piv_quantity_t
} piv_derived_t;

// What a quantity is made of at one vector: its velocity and the four
// derivatives per grid step (NaN where no stencil has the data), and the
// step h in px.
typedef struct {
    double u, v;                       // px/frame
    double du_dx, du_dy, dv_dx, dv_dy; // px/frame per grid step
    double h;                          // grid step, px
} piv_gradient_t;

// One row per quantity: every file, writer and listing of derived
// quantities reads this table (a new quantity is a row here and a member
// above).
typedef struct {
    const char *name;      // as columns, datasets and variables are named
    const char *long_name; // for people (CF long_name)
    piv_unit_t unit;       // piv_calib_unit gives "1/frame" or "1/s", ...
    // The value in image units (1/frame, px/frame) from the gradient.
    double (*of) (const piv_gradient_t *g);
    // The value converted by a calibration (NULL or not set: unchanged).
    double (*convert) (const piv_calib_t *c, double image_units);
} piv_quantity_info_t;
extern const piv_quantity_info_t piv_quantities[PIV_DERIVED_COUNT];

// Fills the arrays 'out' names ('out' NULL: none, only the count). A
// vector flagged PIV_FLAG_INVALID (which covers masked ones) has NaN
// everywhere. Where the stencil leaves the grid or reaches an INVALID
// vector, each derivative falls back to the 2nd-order difference along its
// own line (central, else one-sided over two steps towards the data), so
// that the border and the edges of holes have values; vorticity and
// divergence are NaN only where neither side of a line has data: never a
// number computed from a hole. Inside, the figures are the stencil's.
// REPLACED vectors count as data. Returns the number of finite vorticity
// values (counted whether or not 'out' asks for the vorticity), or -1 for a
// field without a regular grid (step <= 0): its rates are then NaN, its
// speed filled all the same.
int piv_field_derive (const piv_field_t *field, const piv_derived_t *out);

// Every quantity of 'field' converted by 'c' (NULL: image units) into
// 'values', PIV_DERIVED_COUNT * nx * ny floats, quantity q from q * nx * ny:
// what a file writes. A field without a regular grid gets NaN but its speed.
void piv_field_derive_all (const piv_field_t *field, const piv_calib_t *c, float *values);

// Converts such values of n vectors in image units ('in') by 'c' into
// 'out' (may be 'in').
void piv_derived_convert (const piv_calib_t *c, size_t n, const float *in, float *out);

// The stencils compared in tests/test_units.c (doc/units.md gives the
// figures); piv_field_derive uses PIV_STENCIL_DEFAULT, the circulation: the
// lowest total error at 0.05 to 0.1 px of measurement noise. Central differences
// (2nd order, reach 1), the 8-point circulation around the 3x3 neighbourhood
// (Raffel et al., reach 1) and the least-squares 4-point differences
// (Raffel et al., Richardson extrapolation, reach 2). Within the reach of
// the border, each falls back as piv_field_derive says.
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

// The correlation the farm assumes between the errors of two vectors di,
// dj grid steps apart (either sign): the share of window area they have in
// common, (1 - |di| step / window) (1 - |dj| step / window), 0 beyond a
// window: a top-hat window's error taken as the sum of its pixels'. 0.5
// for neighbours at 50 % overlap, 0.25 diagonally; without overlap (or
// without window or step) 1 at (0, 0), else 0. The engine's actual errors
// correlate a little less (doc/control.md gives the figures): a bound.
double piv_field_error_correlation (const piv_field_t *field, int di, int dj);

// Each vector's standard uncertainty of the vorticity, 1/frame, into
// 'out' (nx * ny floats): the field's sigma_u, sigma_v carried through the
// very rule piv_field_derive_with uses at that vector (the stencil, or the
// border's fallback), sigma_w^2 h^2 = sum over pairs of dv/dx's points of
// rho c_m c_n sigma_v,m sigma_v,n + the same of du/dy's with sigma_u, for
// c the rule's weights and rho piv_field_error_correlation's: u's and v's
// errors independent, vectors' correlated by the window area they share
// (independent without overlap). NaN where the vorticity is NaN or a sigma
// is. Returns the number of finite values, or -1 (all NaN) for a field
// without sigma_u, sigma_v or without a regular grid, or a bad stencil.
// To convert: piv_calib_divergence (a rate, never turned by y_up).
int piv_field_derive_sigma_vorticity (const piv_field_t *field, piv_stencil_t stencil,
                                      float *out);

// The vorticity as the linear map it is: for weights c (nx * ny, 0 where
// unused), cu and cv (nx * ny each) such that sum_k c_k w_k = sum_l
// (cu_l u_l + cv_l v_l), w_k as piv_field_derive_with computes it (1/frame
// per px/frame: the rules' weights over h). What the uncertainty of a sum
// of vorticities (a mean over a region) needs when the vectors' errors
// are correlated: neighbours share stencil points. 0, or -1 (cu, cv 0 or
// partial) when a weighted vector has a NaN vorticity, the field has no
// grid or the stencil is bad.
int piv_field_vorticity_coefficients (const piv_field_t *field, piv_stencil_t stencil,
                                      const double *c, double *cu, double *cv);

#endif
