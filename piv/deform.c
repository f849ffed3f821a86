// deform.c — sampling an image at positions moved by an interpolated
// displacement field, for window deformation between PIV passes. Four
// interpolators, compared by 'make bench': bilinear, Keys cubic convolution,
// and cubic and quintic B-splines on prefiltered coefficients (Unser 1999).

#include "piv/deform.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef float v4sf __attribute__ ((vector_size (16)));

static inline v4sf
s_load (const float *p)
{
    v4sf v;
    memcpy (&v, p, sizeof v);
    return v;
}

static inline float
s_hsum (v4sf v)
{
    return (v[0] + v[1]) + (v[2] + v[3]);
}

// B-spline prefilter for one pole z: causal then anticausal recursion, mirror
// boundaries, over 'count' lines of n values; value k of line l is at
// data[k * stride + l * lstride]. With lstride 1 the inner loop runs along
// contiguous memory (the recursion goes across lines, not along them).
static void
s_prefilter (float *data, int n, long stride, int count, long lstride, float z)
{
    const float gain = (1 - z) * (1 - 1 / z);
    if (n < 2)
        return;
    // Initial causal value: the mirror sum truncated where z^k < 1e-7.
    int horizon = (int) ceilf (logf (1e-7f) / logf (fabsf (z)));
    horizon = horizon < n ? horizon : n;
    for (int l = 0; l < count; l++) {
        float *d = data + l * lstride;
        float sum = 0, zk = 1;
        for (int k = 0; k < horizon; k++) {
            sum += zk * d[k * stride];
            zk *= z;
        }
        d[0] = sum * gain;
    }
    for (int k = 1; k < n; k++) {
        float *cur = data + k * stride, *prev = cur - stride;
        for (int l = 0; l < count; l++)
            cur[l * lstride] = cur[l * lstride] * gain + z * prev[l * lstride];
    }
    for (int l = 0; l < count; l++) {
        float *d = data + l * lstride;
        d[(n - 1) * stride] = (z / (z * z - 1)) * (d[(n - 1) * stride] + z * d[(n - 2) * stride]);
    }
    for (int k = n - 2; k >= 0; k--) {
        float *cur = data + k * stride, *next = cur + stride;
        for (int l = 0; l < count; l++)
            cur[l * lstride] = z * (next[l * lstride] - cur[l * lstride]);
    }
}

void
piv_deform_prepare (piv_deform_t deform, const float *img, float *coef, int w, int h)
{
    memcpy (coef, img, (size_t) w * (size_t) h * sizeof (float));
    float poles[2];
    int npoles = 0;
    if (deform == PIV_DEFORM_BSPLINE)
        poles[npoles++] = -0.267949192431122706f;  // sqrt(3) - 2
    else if (deform == PIV_DEFORM_BSPLINE5) {
        poles[npoles++] = -0.430575347099973791f;
        poles[npoles++] = -0.0430962882032646567f;
    }
    for (int p = 0; p < npoles; p++) {
        // Rows in blocks of 16, the recursion running down the columns of
        // the transposed view, so each step touches 16 independent rows
        // rather than waiting on the one before it. Then columns: all at
        // once, sweeping down the image.
        int r = 0;
        for (; r + 16 <= h; r += 16)
            s_prefilter (coef + (long) r * w, w, 1, 16, w, poles[p]);
        if (r < h)
            s_prefilter (coef + (long) r * w, w, 1, h - r, w, poles[p]);
        s_prefilter (coef, h, w, w, 1, poles[p]);
    }
}

static inline int
s_mirror (int i, int n)
{
    if (i < 0)
        i = -i;
    if (i >= n)
        i = 2 * (n - 1) - i;
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

// Weights of taps floor(x) - 1 .. floor(x) + 2 (cubic kernels) or
// floor(x) - 2 .. floor(x) + 3 (quintic), t = x - floor(x).
static inline void
s_weights (piv_deform_t deform, float t, float *wt)
{
    float s = 1 - t, t2 = t * t, t3 = t2 * t;
    switch (deform) {
    case PIV_DEFORM_BICUBIC:  // Keys (1981), a = -0.5
        wt[0] = 0.5f * (-t3 + 2 * t2 - t);
        wt[1] = 0.5f * (3 * t3 - 5 * t2 + 2);
        wt[2] = 0.5f * (-3 * t3 + 4 * t2 + t);
        wt[3] = 0.5f * (t3 - t2);
        break;
    case PIV_DEFORM_BSPLINE:
        wt[0] = s * s * s * (1.0f / 6);
        wt[1] = (3 * t3 - 6 * t2 + 4) * (1.0f / 6);
        wt[2] = (-3 * t3 + 3 * t2 + 3 * t + 1) * (1.0f / 6);
        wt[3] = t3 * (1.0f / 6);
        break;
    default: {  // quintic B-spline: beta5 (t - k) for k = -2 .. 3
        float p1 = 1 + t, p2 = 2 + t, q2 = 2 - t;
        float s5 = s * s * s * s * s, t5 = t2 * t3;
        float p15 = p1 * p1 * p1 * p1 * p1, q25 = q2 * q2 * q2 * q2 * q2;
        float p25 = p2 * p2 * p2 * p2 * p2, q3 = 3 - t, q35 = q3 * q3 * q3 * q3 * q3;
        wt[0] = s5 * (1.0f / 120);
        wt[1] = (q25 - 6 * s5) * (1.0f / 120);
        wt[2] = (q35 - 6 * q25 + 15 * s5) * (1.0f / 120);
        wt[3] = (p25 - 6 * p15 + 15 * t5) * (1.0f / 120);
        wt[4] = (p15 - 6 * t5) * (1.0f / 120);
        wt[5] = t5 * (1.0f / 120);
        break;
    }
    }
}

// One sample of the source at (x, y), clamped into the image; taps beyond
// the edge read the mirror image (as the B-spline prefilter assumes).
static inline __attribute__ ((always_inline)) float
s_sample (piv_deform_t deform, const float *src, int w, int h, float x, float y)
{
    x = x < 0 ? 0 : (x > w - 1 ? w - 1 : x);
    y = y < 0 ? 0 : (y > h - 1 ? h - 1 : y);
    int i = (int) x, j = (int) y;
    float tx = x - i, ty = y - j;
    if (deform == PIV_DEFORM_BILINEAR) {
        int i1 = i + 1 < w ? i + 1 : i, j1 = j + 1 < h ? j + 1 : j;
        const float *r0 = src + (long) j * w, *r1 = src + (long) j1 * w;
        float top = r0[i] + tx * (r0[i1] - r0[i]);
        float bot = r1[i] + tx * (r1[i1] - r1[i]);
        return top + ty * (bot - top);
    }
    int taps = deform == PIV_DEFORM_BSPLINE5 ? 6 : 4, before = taps / 2 - 1;
    float wx[8] = {0}, wy[8] = {0};
    s_weights (deform, tx, wx);
    s_weights (deform, ty, wy);
    int x0 = i - before, y0 = j - before;
    if (x0 >= 0 && y0 >= 0 && x0 + 8 <= w && y0 + taps <= h) {
        // Interior: each row of taps is one or two 4-float loads.
        const float *p = src + (long) y0 * w + x0;
        v4sf lo = {0}, hi = {0};
        for (int b = 0; b < taps; b++, p += w) {
            v4sf wb = {wy[b], wy[b], wy[b], wy[b]};
            lo += wb * s_load (p);
            if (taps > 4)
                hi += wb * s_load (p + 4);
        }
        v4sf wlo = s_load (wx), whi = s_load (wx + 4);
        return taps > 4 ? s_hsum (lo * wlo + hi * whi) : s_hsum (lo * wlo);
    }
    float sum = 0;
    for (int b = 0; b < taps; b++) {
        const float *row = src + (long) s_mirror (y0 + b, h) * w;
        float acc = 0;
        for (int a = 0; a < taps; a++)
            acc += wx[a] * row[s_mirror (x0 + a, w)];
        sum += wy[b] * acc;
    }
    return sum;
}

// Grid cell and weight along one axis of n vectors for grid coordinate g
// (0 at the first vector, 1 at the next): linear between vectors, and
// linear extrapolation up to one grid step beyond the outer ones, constant
// after that. Outer windows reach half a window past their centres, so
// clamping there would bend a strong gradient at the edge of the field.
static inline void
s_axis (float g, int n, int *i, float *t)
{
    if (n < 2) {
        *i = 0;
        *t = 0;
        return;
    }
    g = g < -1 ? -1 : (g > n ? n : g);
    int k = (int) floorf (g);
    k = k < 0 ? 0 : (k > n - 2 ? n - 2 : k);
    *i = k;
    *t = g - k;
}

void
piv_field_interp (const piv_field_t *f, float x, float y, float *u, float *v)
{
    int i, j;
    float tx, ty;
    s_axis ((x - f->x[0]) / f->step, f->nx, &i, &tx);
    s_axis ((y - f->y[0]) / f->step, f->ny, &j, &ty);
    int i1 = f->nx > 1 ? i + 1 : i, j1 = f->ny > 1 ? j + 1 : j;
    const float *p[2] = {f->u, f->v};
    float out[2];
    for (int c = 0; c < 2; c++) {
        const float *a = p[c] + (long) j * f->nx, *b = p[c] + (long) j1 * f->nx;
        float top = a[i] + tx * (a[i1] - a[i]);
        float bot = b[i] + tx * (b[i1] - b[i]);
        out[c] = top + ty * (bot - top);
    }
    *u = out[0];
    *v = out[1];
}

// The deformation of rows [row0, row1) for one interpolator; inlined into a
// copy per interpolator so the per-pixel work has no branch on the kind.
static inline __attribute__ ((always_inline)) void
s_deform (piv_deform_t deform, const float *src_a, float *out_a, float scale_a,
          const float *src_b, float *out_b, float scale_b, int w, int h,
          const piv_field_t *field, int row0, int row1, const int *ci, const float *ct)
{
    int nx = field->nx, ny = field->ny;
    float y0 = field->y[0], step = (float) field->step;
    for (int r = row0; r < row1; r++) {
        int j;
        float ty;
        s_axis ((r - y0) / step, ny, &j, &ty);
        int j1 = ny > 1 ? j + 1 : j, step_i = nx > 1;
        const float *u0 = field->u + (long) j * nx, *u1 = field->u + (long) j1 * nx;
        const float *v0 = field->v + (long) j * nx, *v1 = field->v + (long) j1 * nx;
        long row = (long) r * w;
        for (int c = 0; c < w; c++) {
            int i = ci[c], i1 = i + step_i;
            float tx = ct[c];
            float ua = u0[i] + tx * (u0[i1] - u0[i]), ub = u1[i] + tx * (u1[i1] - u1[i]);
            float va = v0[i] + tx * (v0[i1] - v0[i]), vb = v1[i] + tx * (v1[i1] - v1[i]);
            float du = ua + ty * (ub - ua), dv = va + ty * (vb - va);
            if (src_a)
                out_a[row + c] = s_sample (deform, src_a, w, h, c + scale_a * du, r + scale_a * dv);
            out_b[row + c] = s_sample (deform, src_b, w, h, c + scale_b * du, r + scale_b * dv);
        }
    }
}

void
piv_deform_rows (piv_deform_t deform, const float *src_a, float *out_a, float scale_a,
                 const float *src_b, float *out_b, float scale_b, int w, int h,
                 const piv_field_t *field, int row0, int row1)
{
    // The grid column and weight of every image column, the same for all rows.
    int *ci = malloc ((size_t) w * sizeof (int));
    float *ct = malloc ((size_t) w * sizeof (float));
    int nx = field->nx;
    for (int c = 0; ci && ct && c < w; c++) {
        s_axis ((c - field->x[0]) / (float) field->step, nx, &ci[c], &ct[c]);
    }
    if (ci && ct)
        switch (deform) {
        case PIV_DEFORM_BILINEAR:
            s_deform (PIV_DEFORM_BILINEAR, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct);
            break;
        case PIV_DEFORM_BICUBIC:
            s_deform (PIV_DEFORM_BICUBIC, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct);
            break;
        case PIV_DEFORM_BSPLINE:
            s_deform (PIV_DEFORM_BSPLINE, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct);
            break;
        default:
            s_deform (PIV_DEFORM_BSPLINE5, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct);
            break;
        }
    free (ci);
    free (ct);
}
