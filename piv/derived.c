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

// f at (i + a, j + b) into *value: 0, or -1 off the grid or at an INVALID
// vector.
static int
s_at (const piv_field_t *field, const float *f, int i, int j, double *value)
{
    if (i < 0 || j < 0 || i >= field->nx || j >= field->ny)
        return -1;
    size_t k = (size_t) j * (size_t) field->nx + (size_t) i;
    if (field->flags[k] >= PIV_FLAG_INVALID)
        return -1;
    *value = f[k];
    return 0;
}

// w0 f0 + w1 f1 + w2 f2, or with 'var' ('f' being standard uncertainties)
// the variance of that sum for independent errors, sum of (w f)^2. With
// 'var' every rule below gives the variance of the derivative it computes
// without: the same weights over the same points.
static double
s_sum (int var, double w0, double f0, double w1, double f1, double w2, double f2)
{
    return var ? w0 * w0 * f0 * f0 + w1 * w1 * f1 * f1 + w2 * w2 * f2 * f2
               : w0 * f0 + w1 * f1 + w2 * f2;
}

// The stencil's derivative of 'f' at (i, j) along x (along_x) or y, per
// grid step (its variance with 'var'); NaN if it leaves the grid or reaches
// an INVALID vector.
static double
s_stencil_derivative (const piv_field_t *field, const float *f, const s_stencil_t *st, int i,
                      int j, int along_x, int var)
{
    double sum = 0, value;
    for (int a = -st->reach; a <= st->reach; a++)
        for (int b = -st->reach; b <= st->reach; b++) {
            double w = st->d[a + 2] * st->s[b + 2];
            if (w == 0)
                continue;
            if (s_at (field, f, i + (along_x ? a : b), j + (along_x ? b : a), &value) != 0)
                return NAN;
            sum += s_sum (var, w, value, 0, 0, 0, 0);
        }
    return sum;
}

// The derivative where the stencil has no data: the 2nd-order difference
// along the line through (i, j) alone, central if both neighbours are
// data, else one-sided over two steps, (-3 f0 + 4 f1 - f2) / 2 towards the
// side that has them; NaN if neither side has. (i, j) itself is data.
// (The halves are exact: the figures are those of (f1 - b1) / 2.)
static double
s_border_derivative (const piv_field_t *field, const float *f, int i, int j, int along_x,
                     int var)
{
    int di = along_x ? 1 : 0, dj = along_x ? 0 : 1;
    double f0 = f[(size_t) j * (size_t) field->nx + (size_t) i], f1, f2, b1, b2;
    int ahead = s_at (field, f, i + di, j + dj, &f1) == 0;
    int behind = s_at (field, f, i - di, j - dj, &b1) == 0;
    if (ahead && behind)
        return s_sum (var, 0.5, f1, -0.5, b1, 0, 0);
    if (ahead && s_at (field, f, i + 2 * di, j + 2 * dj, &f2) == 0)
        return s_sum (var, -1.5, f0, 2, f1, -0.5, f2);
    if (behind && s_at (field, f, i - 2 * di, j - 2 * dj, &b2) == 0)
        return s_sum (var, 1.5, f0, -2, b1, 0.5, b2);
    return NAN;
}

// The derivative of 'f' at (i, j) along x or y, per grid step (its
// variance with 'var'): the stencil's wherever it has its data (the same
// figures as without borders), else s_border_derivative's. Which rule
// applies depends on the flags alone, so a variance is always that of the
// derivative computed.
static double
s_derivative (const piv_field_t *field, const float *f, const s_stencil_t *st, int i, int j,
              int along_x, int var)
{
    double d = s_stencil_derivative (field, f, st, i, j, along_x, var);
    return isnan (d) ? s_border_derivative (field, f, i, j, along_x, var) : d;
}

// The quantities from the gradient (piv_quantities' rows). The rates
// divide the per-step derivatives by h once, as one expression.
static double
s_vorticity (const piv_gradient_t *g)
{
    return (g->dv_dx - g->du_dy) / g->h;
}

static double
s_divergence (const piv_gradient_t *g)
{
    return (g->du_dx + g->dv_dy) / g->h;
}

static double
s_speed (const piv_gradient_t *g)
{
    return hypotf ((float) g->u, (float) g->v);
}

const piv_quantity_info_t piv_quantities[PIV_DERIVED_COUNT] = {
    [PIV_DERIVED_VORTICITY] = {"vorticity", "vorticity dv/dx - du/dy", PIV_UNIT_RATE, s_vorticity,
                               piv_calib_vorticity},
    [PIV_DERIVED_DIVERGENCE] = {"divergence", "divergence du/dx + dv/dy", PIV_UNIT_RATE,
                                s_divergence, piv_calib_divergence},
    [PIV_DERIVED_SPEED] = {"speed", "speed |V|", PIV_UNIT_VELOCITY, s_speed, piv_calib_speed},
};

// The gradient at vector (i, j); derivatives NaN without a grid ('grid' 0).
static void
s_gradient (const piv_field_t *field, const s_stencil_t *st, int grid, int i, int j,
            piv_gradient_t *g)
{
    size_t k = (size_t) j * (size_t) field->nx + (size_t) i;
    g->u = field->u[k];
    g->v = field->v[k];
    g->h = field->step;
    g->du_dx = grid ? s_derivative (field, field->u, st, i, j, 1, 0) : NAN;
    g->du_dy = grid ? s_derivative (field, field->u, st, i, j, 0, 0) : NAN;
    g->dv_dx = grid ? s_derivative (field, field->v, st, i, j, 1, 0) : NAN;
    g->dv_dy = grid ? s_derivative (field, field->v, st, i, j, 0, 0) : NAN;
}

int
piv_field_derive_with (const piv_field_t *field, piv_stencil_t stencil, const piv_derived_t *out)
{
    if (stencil < 0 || stencil > PIV_STENCIL_LEAST_SQUARES)
        return -1;
    static const piv_derived_t none = {0};
    if (!out)
        out = &none;
    const s_stencil_t *st = &s_stencils[stencil];
    int grid = field->step > 0, finite = 0;
    for (int j = 0; j < field->ny; j++)
        for (int i = 0; i < field->nx; i++) {
            size_t k = (size_t) j * (size_t) field->nx + (size_t) i;
            int hole = field->flags[k] >= PIV_FLAG_INVALID;
            piv_gradient_t g;
            if (!hole)
                s_gradient (field, st, grid, i, j, &g);
            for (int q = 0; q < PIV_DERIVED_COUNT; q++) {
                float value = hole ? NAN : (float) piv_quantities[q].of (&g);
                if (q == PIV_DERIVED_VORTICITY)
                    finite += isfinite (value) != 0;
                if (out->of[q])
                    out->of[q][k] = value;
            }
        }
    return grid ? finite : -1;
}

int
piv_field_derive (const piv_field_t *field, const piv_derived_t *out)
{
    return piv_field_derive_with (field, PIV_STENCIL_DEFAULT, out);
}

int
piv_field_derive_sigma_vorticity (const piv_field_t *field, piv_stencil_t stencil, float *out)
{
    size_t n = (size_t) field->nx * (size_t) field->ny;
    int usable = field->sigma_u && field->sigma_v && field->step > 0 && stencil >= 0
                 && stencil <= PIV_STENCIL_LEAST_SQUARES;
    int finite = 0;
    for (size_t k = 0; k < n; k++) {
        int i = (int) (k % (size_t) field->nx), j = (int) (k / (size_t) field->nx);
        double value = NAN;
        if (usable && field->flags[k] < PIV_FLAG_INVALID) {
            const s_stencil_t *st = &s_stencils[stencil];
            // w = (dv/dx - du/dy) / h: the variances add (independent terms).
            double var = s_derivative (field, field->sigma_v, st, i, j, 1, 1)
                         + s_derivative (field, field->sigma_u, st, i, j, 0, 1);
            value = sqrt (var) / field->step;
        }
        out[k] = (float) value;
        finite += isfinite (out[k]) != 0;
    }
    return usable ? finite : -1;
}

void
piv_field_derive_all (const piv_field_t *field, const piv_calib_t *c, float *values)
{
    size_t n = (size_t) field->nx * (size_t) field->ny;
    piv_derived_t d;
    for (int q = 0; q < PIV_DERIVED_COUNT; q++)
        d.of[q] = values + (size_t) q * n;
    piv_field_derive (field, &d);
    piv_derived_convert (c, n, values, values);
}

void
piv_derived_convert (const piv_calib_t *c, size_t n, const float *in, float *out)
{
    for (int q = 0; q < PIV_DERIVED_COUNT; q++)
        for (size_t k = (size_t) q * n; k < (size_t) (q + 1) * n; k++)
            out[k] = (float) piv_quantities[q].convert (c, in[k]);
}
