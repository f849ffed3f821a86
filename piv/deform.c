// deform.c — sampling an image at positions moved by an interpolated
// displacement field, for window deformation between PIV passes. Four
// interpolators, compared by 'make bench': bilinear, Keys cubic convolution,
// and cubic and quintic B-splines on prefiltered coefficients (Unser 1999).

#include "piv/deform.h"
#include "piv/simd.h"

#include <math.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// The prefilter's steps over 'count' lines at once, four lanes at a time
// then one: the same operations per value as one at a time (C11 contracts
// no multiply-add), so the same results to the bit; written out because
// -O2 vectorizes no loop whose count it does not know. d and the other row
// never overlap (the lines' stride is at least count).

// d += a s
static void
s_add_scaled (float *d, const float *src, int count, float a)
{
    int l = 0;
    for (; l + 4 <= count; l += 4)
        v4_store (d + l, v4_load (d + l) + a * v4_load (src + l));
    for (; l < count; l++)
        d[l] += a * src[l];
}

// d = d a + b s
static void
s_causal (float *d, const float *src, int count, float a, float b)
{
    int l = 0;
    for (; l + 4 <= count; l += 4)
        v4_store (d + l, v4_load (d + l) * a + b * v4_load (src + l));
    for (; l < count; l++)
        d[l] = d[l] * a + b * src[l];
}

// d = a (s - d)
static void
s_anticausal (float *d, const float *src, int count, float a)
{
    int l = 0;
    for (; l + 4 <= count; l += 4)
        v4_store (d + l, a * (v4_load (src + l) - v4_load (d + l)));
    for (; l < count; l++)
        d[l] = a * (src[l] - d[l]);
}

// B-spline prefilter for one pole z: causal then anticausal recursion with
// mirror boundaries, run on 'count' independent lines at once: value k of
// line l is at data[k * stride + l], so the inner loop runs along memory and
// vectorizes, and no step waits on the one before it.
static void
s_prefilter (float *data, int n, long stride, int count, float z)
{
    const float gain = (1 - z) * (1 - 1 / z);
    if (n < 2)
        return;
    // Initial causal value: the mirror sum truncated where z^k < 1e-7.
    int horizon = (int) ceilf (logf (1e-7f) / logf (fabsf (z)));
    horizon = horizon < n ? horizon : n;
    float zk = z;
    for (int k = 1; k < horizon; k++, zk *= z)
        s_add_scaled (data, data + k * stride, count, zk);
    for (int l = 0; l < count; l++)
        data[l] *= gain;
    for (int k = 1; k < n; k++) {
        float *cur = data + k * stride;
        s_causal (cur, cur - stride, count, gain, z);
    }
    float *last = data + (n - 1) * stride;
    const float *before = last - stride;
    for (int l = 0; l < count; l++)
        last[l] = (z / (z * z - 1)) * (last[l] + z * before[l]);
    for (int k = n - 2; k >= 0; k--) {
        float *cur = data + k * stride;
        s_anticausal (cur, cur + stride, count, z);
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
    else if (deform == PIV_DEFORM_OMOMS)
        poles[npoles++] = -0.344131154255050f;  // (sqrt(105) - 13) / 8
    else if (deform == PIV_DEFORM_BSPLINE5) {
        poles[npoles++] = -0.430575347099973791f;
        poles[npoles++] = -0.0430962882032646567f;
    }
    if (npoles == 0)
        return;
    // Along rows: blocks of 16 rows transposed into a scratch buffer so that
    // they too run as independent contiguous lines.
    enum { BLOCK = 16 };
    float *tmp = malloc ((size_t) w * BLOCK * sizeof (float));
    for (int r = 0; r < h; r += BLOCK) {
        int rows = h - r < BLOCK ? h - r : BLOCK;
        float *blk = coef + (long) r * w;
        if (tmp) {
            for (int l = 0; l < rows; l++)
                for (int c = 0; c < w; c++)
                    tmp[(long) c * BLOCK + l] = blk[(long) l * w + c];
            for (int p = 0; p < npoles; p++)
                s_prefilter (tmp, w, BLOCK, rows, poles[p]);
            for (int l = 0; l < rows; l++)
                for (int c = 0; c < w; c++)
                    blk[(long) l * w + c] = tmp[(long) c * BLOCK + l];
        }
        else  // out of memory: one row at a time, slower, same result
            for (int l = 0; l < rows; l++)
                for (int p = 0; p < npoles; p++)
                    s_prefilter (blk + (long) l * w, w, 1, 1, poles[p]);
    }
    free (tmp);
    // Along columns: every column at once, sweeping down the image.
    for (int p = 0; p < npoles; p++)
        s_prefilter (coef, h, w, w, poles[p]);
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

// Tap weights as polynomials in t = x - floor(x), coefficients per tap:
// w = ((c3 t + c2) t + c1) t + c0 for the taps at floor(x) - 1 .. + 2.
typedef struct {
    v4sf c0, c1, c2, c3;  // coefficients of t^0 .. t^3, one lane per tap
} s_cubic_t;

static const s_cubic_t s_keys = {  // Keys (1981), a = -0.5
    {0, 1, 0, 0}, {-0.5f, 0, 0.5f, 0}, {1, -2.5f, 2, -0.5f}, {-0.5f, 1.5f, -1.5f, 0.5f}};
static const s_cubic_t s_bspline3 = {  // cubic B-spline
    {1 / 6.f, 4 / 6.f, 1 / 6.f, 0}, {-0.5f, 0, 0.5f, 0}, {0.5f, -1, 0.5f, 0},
    {-1 / 6.f, 0.5f, -0.5f, 1 / 6.f}};

static const s_cubic_t s_omoms = {  // cubic O-MOMS: beta3 + beta3'' / 42
    {8 / 42.f, 26 / 42.f, 8 / 42.f, 0}, {-22 / 42.f, 3 / 42.f, 18 / 42.f, 1 / 42.f},
    {21 / 42.f, -42 / 42.f, 21 / 42.f, 0}, {-7 / 42.f, 21 / 42.f, -21 / 42.f, 7 / 42.f}};

static inline v4sf
s_poly (const s_cubic_t *k, float t)
{
    v4sf vt = {t, t, t, t};
    return ((k->c3 * vt + k->c2) * vt + k->c1) * vt + k->c0;
}

// Quintic B-spline weights of taps floor(x) - 2 .. + 3, beta5 (t - k), as
// polynomials in t: coefficients of t^0 .. t^5 (times 120), one lane per tap,
// taps 0-3 in the first vector and 4-5 in the second (whose lanes 2 and 3
// are zero, so that a row of taps is two 4-float loads).
static const v4sf s_b5lo[6] = {{1, 26, 66, 26},     {-5, -50, 0, 50},  {10, 20, -60, 20},
                               {-10, 20, 0, -20},   {5, -20, 30, -20}, {-1, 5, -10, 10}};
static const v4sf s_b5hi[6] = {{1, 0, 0, 0},  {5, 0, 0, 0},  {10, 0, 0, 0},
                               {10, 0, 0, 0}, {5, 0, 0, 0},  {-5, 1, 0, 0}};

static inline __attribute__ ((always_inline)) void
s_poly5 (float t, v4sf *lo, v4sf *hi)
{
    v4sf vt = {t, t, t, t}, scale = {1 / 120.f, 1 / 120.f, 1 / 120.f, 1 / 120.f};
    v4sf a = s_b5lo[5], b = s_b5hi[5];
    for (int k = 4; k >= 0; k--) {
        a = a * vt + s_b5lo[k];
        b = b * vt + s_b5hi[k];
    }
    *lo = a * scale;
    *hi = b * scale;
}

// Tap weights tabulated at t = q / TABLE, q = 0 .. TABLE, per interpolator:
// 8 floats each (4 or 6 taps, zeros after). A sample then costs a lookup
// instead of two polynomial evaluations, nearly half its work; t rounded to
// 1/1024 px moves a sample by at most 0.0005 px, far below what PIV
// resolves.
#define TABLE 1024
static float s_table[PIV_DEFORM_KINDS][TABLE + 1][8];
static pthread_once_t s_table_once = PTHREAD_ONCE_INIT;

static void
s_table_init (void)
{
    for (int q = 0; q <= TABLE; q++) {
        float t = (float) q / TABLE;
        v4sf lo, hi;
        memcpy (s_table[PIV_DEFORM_BICUBIC][q], (v4sf[]) {s_poly (&s_keys, t)}, sizeof (v4sf));
        memcpy (s_table[PIV_DEFORM_BSPLINE][q], (v4sf[]) {s_poly (&s_bspline3, t)},
                sizeof (v4sf));
        memcpy (s_table[PIV_DEFORM_OMOMS][q], (v4sf[]) {s_poly (&s_omoms, t)}, sizeof (v4sf));
        s_poly5 (t, &lo, &hi);
        memcpy (s_table[PIV_DEFORM_BSPLINE5][q], &lo, sizeof lo);
        memcpy (s_table[PIV_DEFORM_BSPLINE5][q] + 4, &hi, sizeof hi);
    }
}

// One sample of a tabulated interpolator with its nearest-below pixel at
// (i, j) of the clamped position and the tap weights wx, wy (rows of
// s_table); taps beyond the edge read the mirror image (as the B-spline
// prefilter assumes).
static inline __attribute__ ((always_inline)) float
s_sample_taps (piv_deform_t deform, const float *src, int w, int h, int i, int j, const float *wx,
               const float *wy)
{
    int taps = deform == PIV_DEFORM_BSPLINE5 ? 6 : 4, before = taps / 2 - 1;
    int x0 = i - before, y0 = j - before;
    const float *p = src + (long) y0 * w + x0;
    long w2 = 2 * (long) w;
    // Interior: one 4-float load per row of taps (two for six taps, whose
    // last two weights are zero), rows summed as a tree rather than a
    // chain, so that a sample does not wait on the adder's latency.
    if (taps == 4 && __builtin_expect (x0 >= 0 && y0 >= 0 && x0 + 4 <= w && y0 + 4 <= h, 1)) {
        v4sf acc = ((v4sf) {wy[0], wy[0], wy[0], wy[0]} * v4_load (p)
                    + (v4sf) {wy[1], wy[1], wy[1], wy[1]} * v4_load (p + w))
                   + ((v4sf) {wy[2], wy[2], wy[2], wy[2]} * v4_load (p + w2)
                      + (v4sf) {wy[3], wy[3], wy[3], wy[3]} * v4_load (p + w2 + w));
        return v4_hsum (acc * v4_load (wx));
    }
    if (taps == 6 && __builtin_expect (x0 >= 0 && y0 >= 0 && x0 + 8 <= w && y0 + 6 <= h, 1)) {
        v4sf wr[6];
        for (int b = 0; b < 6; b++)
            wr[b] = (v4sf) {wy[b], wy[b], wy[b], wy[b]};
        long w4 = 2 * w2;
        v4sf lo = ((wr[0] * v4_load (p) + wr[1] * v4_load (p + w))
                   + (wr[2] * v4_load (p + w2) + wr[3] * v4_load (p + w2 + w)))
                  + (wr[4] * v4_load (p + w4) + wr[5] * v4_load (p + w4 + w));
        v4sf hi = ((wr[0] * v4_load (p + 4) + wr[1] * v4_load (p + w + 4))
                   + (wr[2] * v4_load (p + w2 + 4) + wr[3] * v4_load (p + w2 + w + 4)))
                  + (wr[4] * v4_load (p + w4 + 4) + wr[5] * v4_load (p + w4 + w + 4));
        return v4_hsum (lo * v4_load (wx) + hi * v4_load (wx + 4));
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

// One sample of the source at (x, y), clamped into the image.
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
    return s_sample_taps (deform, src, w, h, i, j, s_table[deform][(int) (tx * TABLE + 0.5f)],
                          s_table[deform][(int) (ty * TABLE + 0.5f)]);
}

// The samples of one interpolator; inlined into a copy per interpolator,
// as s_deform below.
static inline __attribute__ ((always_inline)) void
s_sample_all (piv_deform_t deform, const float *src, int w, int h, const float *col,
              const float *row, float *out, long n)
{
    for (long k = 0; k < n; k++)
        out[k] = isnan (col[k] + row[k]) ? 0 : s_sample (deform, src, w, h, col[k], row[k]);
}

void
piv_deform_sample (piv_deform_t deform, const float *src, int w, int h, const float *col,
                   const float *row, float *out, long n)
{
    pthread_once (&s_table_once, s_table_init);
    if (deform == PIV_DEFORM_BICUBIC)
        s_sample_all (PIV_DEFORM_BICUBIC, src, w, h, col, row, out, n);
    else if (deform == PIV_DEFORM_BSPLINE)
        s_sample_all (PIV_DEFORM_BSPLINE, src, w, h, col, row, out, n);
    else if (deform == PIV_DEFORM_OMOMS)
        s_sample_all (PIV_DEFORM_OMOMS, src, w, h, col, row, out, n);
    else if (deform == PIV_DEFORM_BSPLINE5)
        s_sample_all (PIV_DEFORM_BSPLINE5, src, w, h, col, row, out, n);
    else
        s_sample_all (PIV_DEFORM_BILINEAR, src, w, h, col, row, out, n);
}

// ------------------------------------------------------ located sampling

// The flags of a located position: in qx, the four-tap interpolators'
// taps cross the edge; in qy, the quintic's six do (or the position is NaN).
#define EDGE 0x8000u
#define QMASK 0x7fffu
#define UNSEEN UINT32_MAX

int
piv_deform_prefiltered (piv_deform_t deform)
{
    return deform == PIV_DEFORM_BSPLINE || deform == PIV_DEFORM_OMOMS ||
           deform == PIV_DEFORM_BSPLINE5;
}

int
piv_deform_locatable (piv_deform_t deform, int w, int h)
{
    return deform != PIV_DEFORM_BILINEAR && deform != PIV_DEFORM_OFFSET && w > 0 && h > 0 &&
           (uint64_t) w * (uint64_t) h < UNSEEN;
}

void
piv_deform_locate (int w, int h, const float *col, const float *row, piv_deform_pos_t *pos,
                   long n)
{
    for (long k = 0; k < n; k++) {
        float x = col[k], y = row[k];
        if (isnan (x + y)) {
            pos[k] = (piv_deform_pos_t) {UNSEEN, EDGE, EDGE};
            continue;
        }
        // As s_sample: clamped, then the table's row of each fraction.
        x = x < 0 ? 0 : (x > w - 1 ? w - 1 : x);
        y = y < 0 ? 0 : (y > h - 1 ? h - 1 : y);
        int i = (int) x, j = (int) y;
        unsigned qx = (unsigned) (int) ((x - i) * TABLE + 0.5f);
        unsigned qy = (unsigned) (int) ((y - j) * TABLE + 0.5f);
        if (!(i >= 1 && j >= 1 && i + 3 <= w && j + 3 <= h))
            qx |= EDGE;
        if (!(i >= 2 && j >= 2 && i + 6 <= w && j + 4 <= h))
            qy |= EDGE;
        pos[k] = (piv_deform_pos_t) {(uint32_t) j * (uint32_t) w + (uint32_t) i, (uint16_t) qx,
                                     (uint16_t) qy};
    }
}

// Position k the slow way: s_sample's result from its pixel and rows.
static inline __attribute__ ((always_inline)) float
s_located_one (piv_deform_t deform, const float *src, int w, int h, piv_deform_pos_t p)
{
    if (p.at == UNSEEN)
        return 0;
    int i = (int) (p.at % (uint32_t) w), j = (int) (p.at / (uint32_t) w);
    return s_sample_taps (deform, src, w, h, i, j, s_table[deform][p.qx & QMASK],
                          s_table[deform][p.qy & QMASK]);
}

static inline __attribute__ ((always_inline)) void
s_located_all (piv_deform_t deform, const float *src_a, const float *src_b, int w, int h,
               const piv_deform_pos_t *pos, float *out_a, float *out_b, long n)
{
    for (long k = 0; k < n; k++) {
        out_a[k] = s_located_one (deform, src_a, w, h, pos[k]);
        if (src_b)
            out_b[k] = s_located_one (deform, src_b, w, h, pos[k]);
    }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

// The located samples of both frames in one sweep, AVX2: a pixel's row of
// four taps of A in lanes 0-3 and of B in 4-7, so one weighting serves
// both frames, and four pixels' sums reduced together by horizontal adds.
// The same operations in the same order as s_sample_taps's interior (a
// horizontal add of (a, b) is a + b), so the same results to the bit.
__attribute__ ((target ("avx2"))) static inline __m256
s_row2 (const float *a, const float *b)
{
    return _mm256_insertf128_ps (_mm256_castps128_ps256 (_mm_loadu_ps (a)), _mm_loadu_ps (b), 1);
}

// The weighted taps of a 4 x 4 block at a (lanes 0-3) and at b (4-7):
// the rows' weights wr, the columns' wx, summed as s_sample_taps's.
__attribute__ ((target ("avx2"))) static inline __m256
s_taps4 (const float *a, const float *b, int w, const __m256 wr[4], __m256 wx)
{
    const float *a2 = a + 2 * w, *b2 = b + 2 * w;
    __m256 acc = _mm256_add_ps (_mm256_add_ps (_mm256_mul_ps (wr[0], s_row2 (a, b)),
                                               _mm256_mul_ps (wr[1], s_row2 (a + w, b + w))),
                                _mm256_add_ps (_mm256_mul_ps (wr[2], s_row2 (a2, b2)),
                                               _mm256_mul_ps (wr[3], s_row2 (a2 + w, b2 + w))));
    return _mm256_mul_ps (acc, wx);
}

__attribute__ ((target ("avx2"))) static void
s_located4_avx2 (piv_deform_t deform, const float *src_a, const float *src_b, int w, int h,
                 const piv_deform_pos_t *pos, float *out_a, float *out_b, long n)
{
    const float(*table)[8] = s_table[deform];
    long k = 0;
    if (!src_b)
        // One frame: pixel k + q in lanes 0-3 and k + 4 + q in 4-7, so
        // the same four reductions give eight pixels.
        for (; k + 8 <= n; k += 8) {
            const piv_deform_pos_t *p = pos + k;
            unsigned edge = 0;
            for (int q = 0; q < 8; q++)
                edge |= p[q].qx;
            if (edge & EDGE) {
                s_located_all (deform, src_a, NULL, w, h, p, out_a + k, NULL, 8);
                continue;
            }
            __m256 m[4];
            for (int q = 0; q < 4; q++) {
                const float *wx[2] = {table[p[q].qx & QMASK], table[p[q + 4].qx & QMASK]};
                const float *wy[2] = {table[p[q].qy & QMASK], table[p[q + 4].qy & QMASK]};
                const float *a = src_a + ((long) p[q].at - w - 1);
                const float *b = src_a + ((long) p[q + 4].at - w - 1);
                __m256 wr[4];
                for (int r = 0; r < 4; r++)
                    wr[r] = _mm256_insertf128_ps (_mm256_castps128_ps256 (_mm_set1_ps (wy[0][r])),
                                                  _mm_set1_ps (wy[1][r]), 1);
                m[q] = s_taps4 (a, b, w, wr, s_row2 (wx[0], wx[1]));
            }
            _mm256_storeu_ps (out_a + k, _mm256_hadd_ps (_mm256_hadd_ps (m[0], m[1]),
                                                         _mm256_hadd_ps (m[2], m[3])));
        }
    for (; k + 4 <= n; k += 4) {
        const piv_deform_pos_t *p = pos + k;
        if ((p[0].qx | p[1].qx | p[2].qx | p[3].qx) & EDGE) {
            s_located_all (deform, src_a, src_b, w, h, p, out_a + k, out_b ? out_b + k : NULL, 4);
            continue;
        }
        __m256 m[4];
        for (int q = 0; q < 4; q++) {
            const float *wx = table[p[q].qx & QMASK], *wy = table[p[q].qy & QMASK];
            long off = (long) p[q].at - w - 1;
            const float *a = src_a + off, *b = (src_b ? src_b : src_a) + off;
            __m256 wr[4] = {_mm256_set1_ps (wy[0]), _mm256_set1_ps (wy[1]), _mm256_set1_ps (wy[2]),
                            _mm256_set1_ps (wy[3])};
            m[q] = s_taps4 (a, b, w, wr, s_row2 (wx, wx));
        }
        __m256 s = _mm256_hadd_ps (_mm256_hadd_ps (m[0], m[1]), _mm256_hadd_ps (m[2], m[3]));
        _mm_storeu_ps (out_a + k, _mm256_castps256_ps128 (s));
        if (src_b)
            _mm_storeu_ps (out_b + k, _mm256_extractf128_ps (s, 1));
    }
    s_located_all (deform, src_a, src_b, w, h, pos + k, out_a + k, out_b ? out_b + k : NULL, n - k);
}

// The quintic's: per frame a row of six taps is one 8-float load (the
// last two weights are zero), the halves added as s_sample_taps's lo + hi,
// four pixels reduced together.
__attribute__ ((target ("avx2"))) static inline __m128
s_b5_half (const float *p, int w, const float *wx, const float *wy)
{
    long w2 = 2 * (long) w, w4 = 4 * (long) w;
#define ROW(o, r) _mm256_mul_ps (_mm256_set1_ps (wy[r]), _mm256_loadu_ps (p + (o)))
    __m256 acc = _mm256_add_ps (
        _mm256_add_ps (_mm256_add_ps (ROW (0, 0), ROW (w, 1)),
                       _mm256_add_ps (ROW (w2, 2), ROW (w2 + w, 3))),
        _mm256_add_ps (ROW (w4, 4), ROW (w4 + w, 5)));
#undef ROW
    __m256 m = _mm256_mul_ps (acc, _mm256_loadu_ps (wx));
    return _mm_add_ps (_mm256_castps256_ps128 (m), _mm256_extractf128_ps (m, 1));
}

__attribute__ ((target ("avx2"))) static void
s_located6_avx2 (const float *src_a, const float *src_b, int w, int h, const piv_deform_pos_t *pos,
                 float *out_a, float *out_b, long n)
{
    const float(*table)[8] = s_table[PIV_DEFORM_BSPLINE5];
    long k = 0;
    for (; k + 4 <= n; k += 4) {
        const piv_deform_pos_t *p = pos + k;
        if ((p[0].qy | p[1].qy | p[2].qy | p[3].qy) & EDGE) {
            s_located_all (PIV_DEFORM_BSPLINE5, src_a, src_b, w, h, p, out_a + k,
                           out_b ? out_b + k : NULL, 4);
            continue;
        }
        __m128 ha[4], hb[4];
        for (int q = 0; q < 4; q++) {
            const float *wx = table[p[q].qx & QMASK], *wy = table[p[q].qy & QMASK];
            long off = (long) p[q].at - 2 * (long) w - 2;
            ha[q] = s_b5_half (src_a + off, w, wx, wy);
            if (src_b)
                hb[q] = s_b5_half (src_b + off, w, wx, wy);
        }
        _mm_storeu_ps (out_a + k,
                       _mm_hadd_ps (_mm_hadd_ps (ha[0], ha[1]), _mm_hadd_ps (ha[2], ha[3])));
        if (src_b)
            _mm_storeu_ps (out_b + k,
                           _mm_hadd_ps (_mm_hadd_ps (hb[0], hb[1]), _mm_hadd_ps (hb[2], hb[3])));
    }
    s_located_all (PIV_DEFORM_BSPLINE5, src_a, src_b, w, h, pos + k, out_a + k,
                   out_b ? out_b + k : NULL, n - k);
}
#endif

void
piv_deform_sample_located (piv_deform_t deform, const float *src_a, const float *src_b, int w,
                           int h, const piv_deform_pos_t *pos, float *out_a, float *out_b, long n)
{
    pthread_once (&s_table_once, s_table_init);
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports ("avx2")) {
        if (deform == PIV_DEFORM_BSPLINE5)
            s_located6_avx2 (src_a, src_b, w, h, pos, out_a, out_b, n);
        else
            s_located4_avx2 (deform, src_a, src_b, w, h, pos, out_a, out_b, n);
        return;
    }
#endif
    if (deform == PIV_DEFORM_BICUBIC)
        s_located_all (PIV_DEFORM_BICUBIC, src_a, src_b, w, h, pos, out_a, out_b, n);
    else if (deform == PIV_DEFORM_BSPLINE)
        s_located_all (PIV_DEFORM_BSPLINE, src_a, src_b, w, h, pos, out_a, out_b, n);
    else if (deform == PIV_DEFORM_OMOMS)
        s_located_all (PIV_DEFORM_OMOMS, src_a, src_b, w, h, pos, out_a, out_b, n);
    else
        s_located_all (PIV_DEFORM_BSPLINE5, src_a, src_b, w, h, pos, out_a, out_b, n);
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
// du, dv: scratch of w floats for the displacement along the row.
static inline __attribute__ ((always_inline)) void
s_deform (piv_deform_t deform, const float *src_a, float *out_a, float scale_a,
          const float *src_b, float *out_b, float scale_b, int w, int h,
          const piv_field_t *field, int row0, int row1, const int *ci, const float *ct,
          float *du, float *dv)
{
    int nx = field->nx, ny = field->ny, step_i = nx > 1;
    float y0 = field->y[0], step = (float) field->step;
    for (int r = row0; r < row1; r++) {
        int j;
        float ty;
        s_axis ((r - y0) / step, ny, &j, &ty);
        int j1 = ny > 1 ? j + 1 : j;
        const float *u0 = field->u + (long) j * nx, *u1 = field->u + (long) j1 * nx;
        const float *v0 = field->v + (long) j * nx, *v1 = field->v + (long) j1 * nx;
        for (int c = 0; c < w; c++) {
            int i = ci[c], i1 = i + step_i;
            float tx = ct[c];
            float ua = u0[i] + tx * (u0[i1] - u0[i]), ub = u1[i] + tx * (u1[i1] - u1[i]);
            float va = v0[i] + tx * (v0[i1] - v0[i]), vb = v1[i] + tx * (v1[i1] - v1[i]);
            du[c] = ua + ty * (ub - ua);
            dv[c] = va + ty * (vb - va);
        }
        long row = (long) r * w;
        if (src_a)
            for (int c = 0; c < w; c++)
                out_a[row + c] =
                    s_sample (deform, src_a, w, h, c + scale_a * du[c], r + scale_a * dv[c]);
        for (int c = 0; c < w; c++)
            out_b[row + c] = s_sample (deform, src_b, w, h, c + scale_b * du[c], r + scale_b * dv[c]);
    }
}

void
piv_deform_rows (piv_deform_t deform, const float *src_a, float *out_a, float scale_a,
                 const float *src_b, float *out_b, float scale_b, int w, int h,
                 const piv_field_t *field, int row0, int row1)
{
    // The grid column and weight of every image column, the same for all rows.
    pthread_once (&s_table_once, s_table_init);
    int *ci = malloc ((size_t) w * sizeof (int));
    float *ct = malloc ((size_t) w * 3 * sizeof (float));
    float *du = ct + w, *dv = ct + 2 * w;
    int nx = field->nx;
    for (int c = 0; ci && ct && c < w; c++) {
        s_axis ((c - field->x[0]) / (float) field->step, nx, &ci[c], &ct[c]);
    }
    if (ci && ct)
        switch (deform) {
        case PIV_DEFORM_BILINEAR:
            s_deform (PIV_DEFORM_BILINEAR, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct, du, dv);
            break;
        case PIV_DEFORM_BICUBIC:
            s_deform (PIV_DEFORM_BICUBIC, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct, du, dv);
            break;
        case PIV_DEFORM_BSPLINE:
            s_deform (PIV_DEFORM_BSPLINE, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct, du, dv);
            break;
        case PIV_DEFORM_OMOMS:
            s_deform (PIV_DEFORM_OMOMS, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct, du, dv);
            break;
        default:
            s_deform (PIV_DEFORM_BSPLINE5, src_a, out_a, scale_a, src_b, out_b, scale_b, w, h,
                      field, row0, row1, ci, ct, du, dv);
            break;
        }
    free (ci);
    free (ct);
}
