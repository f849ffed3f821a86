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

// 1 if (i, j) is data: on the grid and not an INVALID vector.
static int
s_data (const piv_field_t *field, int i, int j)
{
    return i >= 0 && j >= 0 && i < field->nx && j < field->ny
           && field->flags[(size_t) j * (size_t) field->nx + (size_t) i] < PIV_FLAG_INVALID;
}

// One point of a rule: vector k with weight w.
typedef struct {
    size_t k;
    double w;
} s_term_t;
#define S_TERMS 25 // the most a rule has: a 5 x 5 stencil

// The stencil's rule for the derivative at (i, j) along x (along_x) or y,
// per grid step, into t: its count, or 0 if it leaves the grid or reaches
// an INVALID vector.
static int
s_stencil_rule (const piv_field_t *field, const s_stencil_t *st, int i, int j, int along_x,
                s_term_t *t)
{
    int n = 0;
    for (int a = -st->reach; a <= st->reach; a++)
        for (int b = -st->reach; b <= st->reach; b++) {
            double w = st->d[a + 2] * st->s[b + 2];
            if (w == 0)
                continue;
            int x = i + (along_x ? a : b), y = j + (along_x ? b : a);
            if (!s_data (field, x, y))
                return 0;
            t[n++] = (s_term_t) {(size_t) y * (size_t) field->nx + (size_t) x, w};
        }
    return n;
}

// The rule where the stencil has no data: the 2nd-order difference along
// the line through (i, j) alone, central if both neighbours are data, else
// one-sided over two steps, (-3 f0 + 4 f1 - f2) / 2 towards the side that
// has them; 0 (no rule) if neither side has. (i, j) itself is data. (The
// halves are exact: summed as terms, the figures are those of
// (f1 - b1) / 2 and (-3 f0 + 4 f1 - f2) / 2.)
static int
s_border_rule (const piv_field_t *field, int i, int j, int along_x, s_term_t *t)
{
    int di = along_x ? 1 : 0, dj = along_x ? 0 : 1;
#define S_DATA(m) s_data (field, i + (m) * di, j + (m) * dj)
#define S_TERM(m, weight)                                                                         \
    ((s_term_t) {(size_t) (j + (m) * dj) * (size_t) field->nx + (size_t) (i + (m) * di), weight})
    int ahead = S_DATA (1), behind = S_DATA (-1), n = 0;
    if (ahead && behind) {
        t[n++] = S_TERM (1, 0.5);
        t[n++] = S_TERM (-1, -0.5);
    }
    else if (ahead && S_DATA (2)) {
        t[n++] = S_TERM (0, -1.5);
        t[n++] = S_TERM (1, 2);
        t[n++] = S_TERM (2, -0.5);
    }
    else if (behind && S_DATA (-2)) {
        t[n++] = S_TERM (0, 1.5);
        t[n++] = S_TERM (-1, -2);
        t[n++] = S_TERM (-2, 0.5);
    }
#undef S_DATA
#undef S_TERM
    return n;
}

// The rule of the derivative at (i, j) along x or y, per grid step: the
// stencil's wherever it has its data (the same figures as without
// borders), else s_border_rule's. Its count, 0 for none (NaN). Which rule
// applies depends on the flags alone.
static int
s_rule (const piv_field_t *field, const s_stencil_t *st, int i, int j, int along_x, s_term_t *t)
{
    int n = s_stencil_rule (field, st, i, j, along_x, t);
    return n ? n : s_border_rule (field, i, j, along_x, t);
}

double
piv_field_error_correlation (const piv_field_t *field, int di, int dj)
{
    if (field->window <= 0 || field->step <= 0)
        return di == 0 && dj == 0;
    double along_x = 1 - fabs ((double) di) * field->step / field->window;
    double along_y = 1 - fabs ((double) dj) * field->step / field->window;
    return along_x > 0 && along_y > 0 ? along_x * along_y : 0;
}

// The derivative of 'f' by a rule of n terms (NaN for none), or with 'var'
// ('f' being standard uncertainties) its variance, sum over pairs of terms
// of rho w_m w_n f_m f_n, rho piv_field_error_correlation's.
static double
s_apply (const piv_field_t *field, const float *f, const s_term_t *t, int n, int var)
{
    if (n == 0)
        return NAN;
    double sum = 0;
    size_t nx = (size_t) field->nx;
    for (int m = 0; m < n; m++) {
        if (!var) {
            sum += t[m].w * f[t[m].k];
            continue;
        }
        for (int o = 0; o < n; o++) {
            int di = (int) (t[m].k % nx) - (int) (t[o].k % nx);
            int dj = (int) (t[m].k / nx) - (int) (t[o].k / nx);
            double rho = piv_field_error_correlation (field, di, dj);
            if (rho != 0)
                sum += rho * t[m].w * t[o].w * f[t[m].k] * f[t[o].k];
        }
    }
    return sum;
}

// The derivative of 'f' at (i, j) along x or y, per grid step (its
// variance with 'var').
static double
s_derivative (const piv_field_t *field, const float *f, const s_stencil_t *st, int i, int j,
              int along_x, int var)
{
    s_term_t t[S_TERMS];
    return s_apply (field, f, t, s_rule (field, st, i, j, along_x, t), var);
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
            // w = (dv/dx - du/dy) / h: the variances add (u's and v's
            // errors independent).
            double var = s_derivative (field, field->sigma_v, st, i, j, 1, 1)
                         + s_derivative (field, field->sigma_u, st, i, j, 0, 1);
            value = sqrt (var) / field->step;
        }
        out[k] = (float) value;
        finite += isfinite (out[k]) != 0;
    }
    return usable ? finite : -1;
}

int
piv_field_vorticity_coefficients (const piv_field_t *field, piv_stencil_t stencil,
                                  const double *c, double *cu, double *cv)
{
    size_t n = (size_t) field->nx * (size_t) field->ny;
    for (size_t k = 0; k < n; k++)
        cu[k] = cv[k] = 0;
    if (field->step <= 0 || stencil < 0 || stencil > PIV_STENCIL_LEAST_SQUARES)
        return -1;
    const s_stencil_t *st = &s_stencils[stencil];
    s_term_t t[S_TERMS];
    for (size_t k = 0; k < n; k++) {
        if (c[k] == 0 || field->flags[k] >= PIV_FLAG_INVALID)
            continue;
        int i = (int) (k % (size_t) field->nx), j = (int) (k / (size_t) field->nx);
        // w = (dv/dx - du/dy) / h: both rules or none (a NaN vorticity).
        s_term_t tu[S_TERMS];
        int nv = s_rule (field, st, i, j, 1, t), nu = s_rule (field, st, i, j, 0, tu);
        if (nv == 0 || nu == 0)
            return -1;
        for (int m = 0; m < nv; m++)
            cv[t[m].k] += c[k] * t[m].w / field->step;
        for (int m = 0; m < nu; m++)
            cu[tu[m].k] -= c[k] * tu[m].w / field->step;
    }
    return 0;
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
