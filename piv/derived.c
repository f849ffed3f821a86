// derived.c — vorticity, divergence and speed of a vector field on its grid.
// Every stencil is one derivative rule d (along the derivative) times one
// smoothing rule s (across it), so that the three compared in
// tests/test_units.c share one walk and one rule for holes. See derived.h.

#include "piv/derived.h"

#include <math.h>
#include <stddef.h>

// Weights at offsets -2..2: the derivative (per grid step) and the
// smoothing across it.
typedef struct {
    const char *name; // as in doc/units.md
    double d[5];      // derivative weights, offsets -2..2
    double s[5];      // smoothing weights across, offsets -2..2
    int reach;        // largest offset with a weight
} s_stencil_t;

// Central: (f[+1] - f[-1]) / 2. Circulation: the line integral around the
// 3x3 neighbourhood by the trapezoidal rule over its area (2h)^2, which is
// the central difference smoothed 1/4, 1/2, 1/4 across. Least squares:
// (2 f[+2] + f[+1] - f[-1] - 2 f[-2]) / 10.
static const s_stencil_t s_stencils[] = {
    [PIV_STENCIL_CENTRAL] = {"central", {0, -0.5, 0, 0.5, 0}, {0, 0, 1, 0, 0}, 1},
    [PIV_STENCIL_CIRCULATION] = {"circulation", {0, -0.5, 0, 0.5, 0}, {0, 0.25, 0.5, 0.25, 0}, 1},
    [PIV_STENCIL_LEAST_SQUARES] = {"least-squares", {-0.2, -0.1, 0, 0.1, 0.2}, {0, 0, 1, 0, 0}, 2},
};

const char *
piv_stencil_name (piv_stencil_t stencil)
{
    return stencil >= 0 && stencil <= PIV_STENCIL_LEAST_SQUARES ? s_stencils[stencil].name : "?";
}

// The derivative of 'f' at (i, j) along x (along_x) or y, per grid step;
// NaN if the stencil leaves the grid or reaches an INVALID vector.
static double
s_derivative (const piv_field_t *field, const float *f, const s_stencil_t *st, int i, int j,
              int along_x)
{
    double sum = 0;
    for (int a = -st->reach; a <= st->reach; a++)
        for (int b = -st->reach; b <= st->reach; b++) {
            double w = st->d[a + 2] * st->s[b + 2];
            if (w == 0)
                continue;
            int ii = i + (along_x ? a : b), jj = j + (along_x ? b : a);
            if (ii < 0 || jj < 0 || ii >= field->nx || jj >= field->ny)
                return NAN;
            size_t k = (size_t) jj * (size_t) field->nx + (size_t) ii;
            if (field->flags[k] >= PIV_FLAG_INVALID)
                return NAN;
            sum += w * f[k];
        }
    return sum;
}

int
piv_field_derive_with (const piv_field_t *field, piv_stencil_t stencil, const piv_derived_t *out)
{
    if (field->step <= 0 || stencil < 0 || stencil > PIV_STENCIL_LEAST_SQUARES)
        return -1;
    static const piv_derived_t none = {0};
    if (!out)
        out = &none;
    const s_stencil_t *st = &s_stencils[stencil];
    double h = field->step;
    int finite = 0;
    for (int j = 0; j < field->ny; j++)
        for (int i = 0; i < field->nx; i++) {
            size_t k = (size_t) j * (size_t) field->nx + (size_t) i;
            int hole = field->flags[k] >= PIV_FLAG_INVALID;
            if (out->speed)
                out->speed[k] = hole ? NAN : hypotf (field->u[k], field->v[k]);
            float w = hole ? NAN
                           : (float) ((s_derivative (field, field->v, st, i, j, 1) -
                                       s_derivative (field, field->u, st, i, j, 0)) /
                                      h);
            finite += isfinite (w) != 0;
            if (out->vorticity)
                out->vorticity[k] = w;
            if (out->divergence)
                out->divergence[k] = hole ? NAN
                                          : (float) ((s_derivative (field, field->u, st, i, j, 1) +
                                                      s_derivative (field, field->v, st, i, j, 0)) /
                                                     h);
        }
    return finite;
}

int
piv_field_derive (const piv_field_t *field, const piv_derived_t *out)
{
    return piv_field_derive_with (field, PIV_STENCIL_DEFAULT, out);
}
