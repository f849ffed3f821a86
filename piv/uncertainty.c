// uncertainty.c — each vector's uncertainty from its final-pass windows:
// correlation statistics (CS) and moment of correlation (MC), both from
// one pass of sums over the window's pixels (piv/uncertainty.h).

#include "piv/uncertainty.h"
#include "piv/simd.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t
piv_uncertainty_scratch (int n)
{
    // A's and B's windows with a border of 1 px, where it leaves the frame.
    return 2 * (size_t) (n + 2) * (n + 2);
}

static inline int
s_clamp (int i, int n)
{
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

// m 8-bit pixels as floats: eight at a time with SSE2 (a single pass of
// an 8-bit pair reads every window from bytes: a plain loop here cost as
// much as the sums).
static void
s_bytes_row (const unsigned char *src, float *dst, int m)
{
    int k = 0;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128 ();
    for (; k + 8 <= m; k += 8) {
        __m128i w = _mm_unpacklo_epi8 (_mm_loadl_epi64 ((const __m128i *) (src + k)), zero);
        _mm_storeu_ps (dst + k, _mm_cvtepi32_ps (_mm_unpacklo_epi16 (w, zero)));
        _mm_storeu_ps (dst + k + 4, _mm_cvtepi32_ps (_mm_unpackhi_epi16 (w, zero)));
    }
#endif
    for (; k < m; k++)
        dst[k] = src[k];
}

// The n x n window of the w x h frame (floats img, or else bytes) at (x0,
// y0), rolled by (lx, ly) and one row and column more, as the engine's
// circular correlation of two windows reads them at lag (lx, ly): dst[r][c]
// = window[(r + ly) mod n][(c + lx) mod n] for r, c in 0 .. n (stride n +
// 2). Pixels outside the frame (a window the engine placed partly outside)
// repeat its edge.
static void
s_rolled (const float *img, const unsigned char *bytes, int w, int h, int x0, int y0, int n,
          int lx, int ly, float *dst)
{
    int m = n + 2;
    int sx = (lx % n + n) % n, sy = (ly % n + n) % n;  // the roll, 0 .. n - 1
    int inside = sx == 0 && x0 >= 0 && x0 + n <= w;   // whole rows as they are
    long col[PIV_MAX_WINDOW + 1];
    if (!inside)
        for (int c = 0, i = sx; c <= n; c++, i = i + 1 == n ? 0 : i + 1)
            col[c] = s_clamp (x0 + i, w);
    for (int r = 0, i = sy; r <= n; r++, i = i + 1 == n ? 0 : i + 1) {
        long row = (long) s_clamp (y0 + i, h) * w;
        float *out = dst + (long) r * m;
        if (inside) {
            if (img)
                memcpy (out, img + row + x0, sizeof (float) * (size_t) n);
            else
                s_bytes_row (bytes + row + x0, out, n);
            out[n] = out[0];
        }
        else if (img)
            for (int c = 0; c <= n; c++)
                out[c] = img[row + col[c]];
        else
            for (int c = 0; c <= n; c++)
                out[c] = bytes[row + col[c]];
    }
}

// The mean of the n x n window at p (stride).
static float
s_mean (const float *p, int stride, int n)
{
    v4sf s = {0, 0, 0, 0};
    float tail = 0;
    int n4 = n & ~3;
    for (int r = 0; r < n; r++, p += stride) {
        for (int c = 0; c < n4; c += 4)
            s += v4_load (p + c);
        for (int c = n4; c < n; c++)
            tail += p[c];
    }
    return (v4_hsum (s) + tail) / ((float) n * n);
}

// The window pair's sums, each with its means removed: the correlation at
// the peak and its 4 neighbours (C-1 as A (x + 1) B (x), Wieneke's), each
// pixel pair's asymmetry dC = A (x) B (x + 1) - A (x + 1) B (x) summed and
// squared per axis, and for MC the windows' energies and autocorrelations
// at 1 px and the peak's pixel contributions p = A B summed and squared.
// For CS also each axis's shift regressor g = (A (x + 1) - A (x)) (B (x +
// 1) - B (x)) summed, squared and times dC: a residual sub-pixel shift s
// of B against A (the final run's correction, deformed by its predictor,
// not by the final field) adds s g to each dC, to first order (with
// forward differences for the particles' slopes: A (x + 1) B' (x) -
// A (x) B' (x + 1) ~ (A (x + 1) - A (x)) (B (x + 1) - B (x))), which the
// fit measures and is no uncertainty.
enum { S_C0, S_CXP, S_CXM, S_CYP, S_CYM, S_DX, S_DX2, S_DY, S_DY2, S_GX, S_GX2, S_GDX, S_GY,
       S_GY2, S_GDY, S_EA, S_EB, S_AX, S_AY, S_BX, S_BY, S_P2, S_COUNT };

static void
s_sums (const float *pa, int sa, const float *pb, int sb, int n, int mc, double *out)
{
    float ma = s_mean (pa, sa, n), mb = s_mean (pb, sb, n);
    const v4sf va = {ma, ma, ma, ma}, vb = {mb, mb, mb, mb};
    v4sf acc[S_COUNT];
    memset (acc, 0, sizeof acc);
    int n4 = n & ~3;
    for (int r = 0; r < n; r++, pa += sa, pb += sb) {
        for (int c = 0; c < n; c += 4) {
            v4sf a, ax, ay, b, bx, by;
            if (c < n4) {
                a = v4_load (pa + c) - va, ax = v4_load (pa + c + 1) - va;
                ay = v4_load (pa + sa + c) - va;
                b = v4_load (pb + c) - vb, bx = v4_load (pb + c + 1) - vb;
                by = v4_load (pb + sb + c) - vb;
            }
            else {
                // The last 2 pixels of a row of n % 4 == 2, in lanes 0 and 1.
                v4sf z = {0, 0, 0, 0};
                a = ax = ay = b = bx = by = z;
                for (int k = 0; k < 2; k++) {
                    a[k] = pa[c + k] - ma, ax[k] = pa[c + k + 1] - ma;
                    ay[k] = pa[sa + c + k] - ma;
                    b[k] = pb[c + k] - mb, bx[k] = pb[c + k + 1] - mb;
                    by[k] = pb[sb + c + k] - mb;
                }
            }
            v4sf p = a * b, dx = a * bx - ax * b, dy = a * by - ay * b;
            acc[S_C0] += p;
            acc[S_CXP] += a * bx;
            acc[S_CXM] += ax * b;
            acc[S_CYP] += a * by;
            acc[S_CYM] += ay * b;
            acc[S_DX] += dx;
            acc[S_DX2] += dx * dx;
            acc[S_DY] += dy;
            acc[S_DY2] += dy * dy;
            if (!mc) {
                v4sf gx = (ax - a) * (bx - b), gy = (ay - a) * (by - b);
                acc[S_GX] += gx;
                acc[S_GX2] += gx * gx;
                acc[S_GDX] += gx * dx;
                acc[S_GY] += gy;
                acc[S_GY2] += gy * gy;
                acc[S_GDY] += gy * dy;
            }
            else {
                // The autocorrelations at 1 px, circular as the rolled
                // windows wrap (as the engine's correlation does).
                acc[S_EA] += a * a;
                acc[S_EB] += b * b;
                acc[S_AX] += a * ax;
                acc[S_AY] += a * ay;
                acc[S_BX] += b * bx;
                acc[S_BY] += b * by;
                acc[S_P2] += p * p;
            }
        }
    }
    for (int k = 0; k < S_COUNT; k++)
        out[k] = v4_hsum (acc[k]);
}

// The 3-point Gaussian's peak offset from l = C(-1), c = C(0), r = C(+1)
// (a parabola where a value is not positive), as the engine fits peaks.
static double
s_offset (double l, double c, double r)
{
    if (l > 0 && c > 0 && r > 0) {
        double ll = log (l), lc = log (c), lr = log (r);
        double den = 2 * ll - 4 * lc + 2 * lr;
        return den != 0 ? (ll - lr) / den : 0;
    }
    double den = 2 * l - 4 * c + 2 * r;
    return den != 0 ? (l - r) / den : 0;
}

// The share of an n px window that overlaps itself moved by s px, as the
// engine weights its correlation plane (piv.c's s_overlap).
static double
s_share (int s, int n)
{
    double f = 1 - (double) abs (s) / n;
    return f > 0.5 / n ? f : 0.5 / n;
}

// CS: the variance of the sum of n2 pixels' asymmetries dC (sum d,
// squares d2) less what its regression on the shift regressor g (sums g,
// g2, gd) explains: the residual shift's share (see s_sums).
static double
s_cs_variance (double d, double d2, double g, double g2, double gd, double n2)
{
    double v = d2 - d * d / n2, gg = g2 - g * g / n2, cov = gd - g * d / n2;
    if (gg > 0)
        v -= cov * cov / gg;
    return v > 0 ? v : 0;
}

// CS: the fit's shift when C+1 and C-1 move apart by the standard
// deviation of their difference, each divided, as the engine fits them, by
// its share of overlapping pixels (wm, w0, wp).
static double
s_cs_sigma (double cm, double c0, double cp, double sd, double wm, double w0, double wp)
{
    double a = s_offset ((cm - sd / 2) / wm, c0 / w0, (cp + sd / 2) / wp);
    double b = s_offset ((cm + sd / 2) / wm, c0 / w0, (cp - sd / 2) / wp);
    double s = fabs (a - b) / 2;
    return s < 1 ? s : 1;  // the fit cannot place a peak further than 1 px
}

// The variance of the 3-point Gaussian through l, c, r, or -1 where the
// values are not a peak.
static double
s_width (double l, double c, double r)
{
    if (!(l > 0 && c > 0 && r > 0))
        return -1;
    double curv = 2 * log (c) - log (l) - log (r);
    return curv > 0 ? 1 / curv : -1;
}

int
piv_uncertainty_window (piv_uncertainty_t method, const piv_uncertainty_frames_t *frames,
                        int n, int ax, int ay, int bx, int by, int lx, int ly, float *scratch,
                        float *su, float *sv)
{
    *su = *sv = NAN;
    int m = n + 2, w = frames->w, h = frames->h;
    int mc = method == PIV_UNCERTAINTY_MC;
    double S[S_COUNT];
    float *pa = scratch, *pb = scratch + (size_t) m * m;
    s_rolled (frames->fa, frames->ba, w, h, ax, ay, n, 0, 0, pa);
    // The correlation must peak at the lag: C0 above its 4 neighbours.
    // Where it does not, the engine's peak (its own sums, by FFT, of
    // floats) rounded to the other side of a half pixel: once more one
    // pixel toward the higher neighbour; else no peak here (a vector from
    // elsewhere, see the header: its sigma from these windows said up to 1
    // px for vectors whose error was hundredths).
    for (int attempt = 0;; attempt++) {
        s_rolled (frames->fb, frames->bb, w, h, bx, by, n, lx, ly, pb);
        s_sums (pa, m, pb, m, n, mc, S);
        if (!(S[S_C0] > 0))
            return -1;
        int mx = S[S_CXP] >= S[S_C0] ? 1 : (S[S_CXM] >= S[S_C0] ? -1 : 0);
        int my = S[S_CYP] >= S[S_C0] ? 1 : (S[S_CYM] >= S[S_C0] ? -1 : 0);
        if (!mx && !my)
            break;
        if (attempt)
            return -1;
        lx += mx, ly += my;
    }
    double c0 = S[S_C0], pixels = (double) n * n;
    if (!mc) {
        // The variance of the sum of the pixels' asymmetries: as of
        // independent pixels (including the covariance of neighbours up to
        // 3 px apart moved the ratio to the actual error by 5 % on section
        // 12's pairs, at 3 times the cost).
        double vx = s_cs_variance (S[S_DX], S[S_DX2], S[S_GX], S[S_GX2], S[S_GDX], pixels);
        double vy = s_cs_variance (S[S_DY], S[S_DY2], S[S_GY], S[S_GY2], S[S_GDY], pixels);
        *su = (float) s_cs_sigma (S[S_CXM], c0, S[S_CXP], sqrt (vx), s_share (lx - 1, n),
                                  s_share (lx, n), s_share (lx + 1, n));
        *sv = (float) s_cs_sigma (S[S_CYM], c0, S[S_CYP], sqrt (vy), s_share (ly - 1, n),
                                  s_share (ly, n), s_share (ly + 1, n));
        return 0;
    }
    // MC. The autocorrelations' widths (symmetric: C(-1) = C(+1)); the
    // cross-correlation's, each an axis's Gaussian variance.
    double ea = S[S_EA], eb = S[S_EB];
    if (!(ea > 0 && eb > 0))
        return -1;
    double wa[2] = {s_width (S[S_AX], ea, S[S_AX]), s_width (S[S_AY], ea, S[S_AY])};
    double wb[2] = {s_width (S[S_BX], eb, S[S_BX]), s_width (S[S_BY], eb, S[S_BY])};
    double wc[2] = {s_width (S[S_CXM], c0, S[S_CXP]), s_width (S[S_CYM], c0, S[S_CYP])};
    double rho = c0 / sqrt (ea * eb);
    double carriers = S[S_P2] > 0 ? c0 * c0 / S[S_P2] : 0;  // pixels that carry the peak
    float out[2];
    for (int k = 0; k < 2; k++) {
        if (!(wa[k] > 0 && wb[k] > 0 && wc[k] > 0))
            return -1;  // no peak to take a width from
        double auto_var = (wa[k] + wb[k]) / 2;
        double moment = wc[k] - auto_var;
        // One Gaussian particle image of variance sp^2 carries the peak on
        // 2 pi sp^2 pixels, and its autocorrelation's variance is 2 sp^2:
        // pi auto_var pixels a particle.
        double neff = rho * carriers / (M_PI * auto_var);
        neff = neff > 1 ? neff : 1;
        double s = moment > 0 ? sqrt (moment / neff) : 0;
        out[k] = (float) (s < 1 ? s : 1);
    }
    *su = out[0];
    *sv = out[1];
    return 0;
}

void
piv_uncertainty_predictor (float *su, float *sv, int nx, int ny, float *scratch)
{
    long count = (long) nx * ny;
    memcpy (scratch, su, sizeof (float) * (size_t) count);
    memcpy (scratch + count, sv, sizeof (float) * (size_t) count);
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            long k = (long) j * nx + i;
            if (!isfinite (scratch[k]) || !isfinite (scratch[count + k]))
                continue;
            double u2 = 0, v2 = 0;
            int c = 0;
            for (int b = j - 1; b <= j + 1; b++)
                for (int a = i - 1; a <= i + 1; a++) {
                    long q = (long) b * nx + a;
                    if (a < 0 || b < 0 || a >= nx || b >= ny || !isfinite (scratch[q])
                        || !isfinite (scratch[count + q]))
                        continue;
                    u2 += (double) scratch[q] * scratch[q];
                    v2 += (double) scratch[count + q] * scratch[count + q];
                    c++;
                }
            double u = sqrt (scratch[k] * (double) scratch[k] + PIV_UNCERTAINTY_PREDICTOR * u2 / c);
            double v = sqrt (scratch[count + k] * (double) scratch[count + k]
                             + PIV_UNCERTAINTY_PREDICTOR * v2 / c);
            su[k] = (float) (u < 1 ? u : 1);
            sv[k] = (float) (v < 1 ? v : 1);
        }
}
