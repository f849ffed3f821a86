// uncertainty.c — each vector's uncertainty from its final-pass windows:
// correlation statistics (CS) and moment of correlation (MC), both from
// one pass of sums over the window's pixels (piv/uncertainty.h).

#include "piv/uncertainty.h"
#include "piv/simd.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <math.h>
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

// The block of the w x h frame (floats img, or else bytes) whose window
// of n px is at (x0, y0), one pixel around it: a pointer to the window's
// first pixel in the frame (floats, stride w), or in dst (stride n + 2)
// where the block leaves the frame (edge pixels repeated) or the frame is
// bytes. *stride gets which.
static const float *
s_block (const float *img, const unsigned char *bytes, int w, int h, int x0, int y0, int n,
         float *dst, int *stride)
{
    int m = n + 2;
    *stride = m;
    if (x0 >= 1 && y0 >= 1 && x0 + n + 1 <= w && y0 + n + 1 <= h) {
        if (img) {
            *stride = w;
            return img + (long) y0 * w + x0;
        }
        for (int r = 0; r < m; r++)
            s_bytes_row (bytes + (long) (y0 - 1 + r) * w + x0 - 1, dst + (long) r * m, m);
        return dst + m + 1;
    }
    for (int r = 0; r < m; r++) {
        long row = (long) s_clamp (y0 - 1 + r, h) * w;
        for (int k = 0; k < m; k++) {
            long i = row + s_clamp (x0 - 1 + k, w);
            dst[(long) r * m + k] = img ? img[i] : bytes[i];
        }
    }
    return dst + m + 1;
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
enum { S_C0, S_CXP, S_CXM, S_CYP, S_CYM, S_DX, S_DX2, S_DY, S_DY2, S_EA, S_EB, S_AX, S_AY,
       S_BX, S_BY, S_P2, S_COUNT };

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
            if (mc) {
                // The autocorrelations at 1 px reach one pixel out of the
                // window: as good an estimate of their width.
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

// CS: the fit's shift when C+1 and C-1 move apart by the standard
// deviation of their difference.
static double
s_cs_sigma (double cm, double c0, double cp, double sd)
{
    double a = s_offset (cm - sd / 2, c0, cp + sd / 2);
    double b = s_offset (cm + sd / 2, c0, cp - sd / 2);
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
                        int n, int ax, int ay, int bx, int by, float *scratch, float *su,
                        float *sv)
{
    *su = *sv = NAN;
    int m = n + 2, sa, sb, w = frames->w, h = frames->h;
    const float *pa = s_block (frames->fa, frames->ba, w, h, ax, ay, n, scratch, &sa);
    const float *pb =
        s_block (frames->fb, frames->bb, w, h, bx, by, n, scratch + (size_t) m * m, &sb);
    double S[S_COUNT];
    int mc = method == PIV_UNCERTAINTY_MC;
    s_sums (pa, sa, pb, sb, n, mc, S);
    double c0 = S[S_C0], pixels = (double) n * n;
    if (!(c0 > 0))
        return -1;  // no peak at this lag: a vector from elsewhere (see the header)
    if (!mc) {
        // The variance of the sum of the pixels' asymmetries: as of
        // independent pixels (including the covariance of neighbours up to
        // 3 px apart moved the ratio to the actual error by 5 % on section
        // 12's pairs, at 3 times the cost).
        double vx = S[S_DX2] - S[S_DX] * S[S_DX] / pixels;
        double vy = S[S_DY2] - S[S_DY] * S[S_DY] / pixels;
        *su = (float) s_cs_sigma (S[S_CXM], c0, S[S_CXP], sqrt (vx > 0 ? vx : 0));
        *sv = (float) s_cs_sigma (S[S_CYM], c0, S[S_CYP], sqrt (vy > 0 ? vy : 0));
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
