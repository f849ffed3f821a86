// smooth.c — Garcia's robust DCT-based penalized least squares ("smoothn")
// for vector fields: z minimises sum w (y - z)^2 + s |Laplacian z|^2, which
// the 2-D cosine transform (FFTW's REDFT10 and REDFT01) makes diagonal. See
// smooth.h.

#include "piv/smooth.h"
#include "piv/validate.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// Cosine transform plans per grid size, made once and shared (new-array
// execute on fftwf_malloc'd buffers is thread-safe).
typedef struct {
    int nx, ny;        // grid size
    fftwf_plan dct;    // DCT-II in both directions (REDFT10)
    fftwf_plan idct;   // DCT-III (REDFT01): idct (dct (x)) = 4 nx ny x
} s_dct_t;

#define MAX_DCT 32
static s_dct_t s_dcts[MAX_DCT];  // plans made so far
static int s_ndcts;              // entries used

static const s_dct_t *
s_dct_get (int nx, int ny)
{
    const s_dct_t *found = NULL;
    piv_fftw_planner_lock ();
    for (int i = 0; i < s_ndcts && !found; i++)
        if (s_dcts[i].nx == nx && s_dcts[i].ny == ny)
            found = &s_dcts[i];
    float *a = found ? NULL : fftwf_malloc (sizeof (float) * nx * ny);
    float *b = found ? NULL : fftwf_malloc (sizeof (float) * nx * ny);
    if (!found && a && b && s_ndcts < MAX_DCT) {
        // FFTW_MEASURE: a grid is at most a few hundred vectors a side, the
        // transforms are a small part of a pair's time, and patient
        // planning of odd sizes would cost seconds.
        s_dct_t *d = &s_dcts[s_ndcts];
        d->nx = nx;
        d->ny = ny;
        d->dct = fftwf_plan_r2r_2d (ny, nx, a, b, FFTW_REDFT10, FFTW_REDFT10, FFTW_MEASURE);
        d->idct = fftwf_plan_r2r_2d (ny, nx, a, b, FFTW_REDFT01, FFTW_REDFT01, FFTW_MEASURE);
        if (d->dct && d->idct) {
            s_ndcts++;
            piv_fftw_planned ();
            found = d;
        }
    }
    fftwf_free (a);
    fftwf_free (b);
    piv_fftw_planner_unlock ();
    return found;
}

// One smoothing problem: the data, its weights and the work arrays.
typedef struct {
    const s_dct_t *plan;      // transforms of the grid size
    long n;                   // vectors
    int dims;                 // dimensions longer than 1
    const float *y[2];        // data
    const float *w0;          // caller's weights (NULL: all 1)
    float *w;                 // weights in use (caller's times robust)
    float *lambda2;           // squared eigenvalues of the Laplacian
    float *dcty[2];           // transforms of the weighted data
    float *z[2];              // current estimate
    float *tmp;               // scratch
    float *scratch[2][2];     // per component: a transform's input and output
    piv_pool_t *pool;         // the components' transforms at once on it, or NULL
    long nof;                 // vectors of non-zero caller weight
    double searched;          // log10 s of the last GCV search, or NAN: none yet
} s_pls_t;

// out = idct (gamma * dcty) for component c, gamma = 1 / (1 + s lambda^2);
// tmp: scratch.
static void
s_apply (s_pls_t *p, int c, double s, float *tmp, float *out)
{
    float scale = 1.0f / (4.0f * p->plan->nx * p->plan->ny);
    for (long k = 0; k < p->n; k++)
        tmp[k] = p->dcty[c][k] * scale / (1.0f + (float) s * p->lambda2[k]);
    fftwf_execute_r2r (p->plan->idct, tmp, out);
}

// One component's share of a GCV score: its weighted residual sum of
// squares at s, from its own scratch (free between the halves of an
// iteration, when the searches run).
typedef struct {
    s_pls_t *p;
    double s;
    double rss[2];    // per component
    double trace[2];  // the trace of H over the first and the second half of the vectors
} s_gcv_job_t;

static void
s_gcv_part (void *arg, int first, int last, int part)
{
    (void) part;
    s_gcv_job_t *job = arg;
    s_pls_t *p = job->p;
    for (int c = first; c < last; c++) {
        float *out = p->scratch[c][1];
        s_apply (p, c, job->s, p->scratch[c][0], out);
        double rss = 0;
        for (long k = 0; k < p->n; k++)
            if (!p->w0 || p->w0[k] > 0) {
                double r = p->y[c][k] - out[k];
                rss += p->w[k] * r * r;
            }
        job->rss[c] = rss;
        // Half of the trace with it: the same sums whatever the threads.
        double trace = 0;
        long from = c == 0 ? 0 : p->n / 2, to = c == 0 ? p->n / 2 : p->n;
        for (long k = from; k < to; k++)
            trace += 1.0 / (1.0 + job->s * p->lambda2[k]);
        job->trace[c] = trace;
    }
}

// The GCV score of log10 s: weighted residual sum of squares per vector
// over (1 - trace (H) / n)^2. The two components at once on the pool (the
// searches are most of a single pass's smoothing: 27 of its 65 ms at
// 2048^2 were serial before); the same score whatever the threads, as each
// component's sum is its own.
static double
s_gcv (s_pls_t *p, double logs)
{
    s_gcv_job_t job = {p, pow (10, logs), {0, 0}, {0, 0}};
    piv_pool_run (p->pool, 2, 2, s_gcv_part, &job);
    double rss = job.rss[0] + job.rss[1], trace = job.trace[0] + job.trace[1];
    double den = 1 - trace / p->n;
    // Where the surface follows every vector, rss and den both vanish and
    // their ratio is rounding: no choice at all.
    if (den < 1e-3)
        return INFINITY;
    return rss / (p->nof ? p->nof : 1) / (den * den);
}

// The minimum of the GCV score over log10 s in [lo, hi]: the score
// at every decade first, then a golden-section search to 0.1 (smoothn's
// tolerance, as fminbnd) within a decade either side of the least.
// smoothn's fminbnd alone over the whole range ends in whichever minimum
// it meets: GCV is flat where s flattens the field entirely, and a search
// from the middle of 13 decades stopped there on a sine of 48 px (the
// field smoothed to its mean; measured, bench_piv --only resolution).
// Later searches of the same problem (the iterations refine the surface,
// the robust weights change a few vectors) refine within a half decade of
// the last choice (PIVFARM_PIV_PHASES=1, a 2048^2 single pass: smoothing
// 34-39 ms, 40-52 with every search over half decades, 21-25 with s fixed).
static double
s_gcv_min (s_pls_t *p, double lo, double hi)
{
    // The first search: every decade; the later ones refine the last choice.
    double best = p->searched, fbest = INFINITY, half = 0.5;
    if (!isfinite (best)) {
        for (double x = lo; x <= hi + 1e-9; x += 1) {
            double f = s_gcv (p, x);
            if (f < fbest)
                fbest = f, best = x;
        }
        half = 1;
    }
    const double g = 0.381966011250105;
    double a = best - half < lo ? lo : best - half, b = best + half > hi ? hi : best + half;
    double x1 = a + g * (b - a), x2 = b - g * (b - a);
    double f1 = s_gcv (p, x1), f2 = s_gcv (p, x2);
    while (b - a > 0.1) {
        if (f1 <= f2) {
            b = x2, x2 = x1, f2 = f1;
            x1 = a + g * (b - a);
            f1 = s_gcv (p, x1);
        }
        else {
            a = x1, x1 = x2, f1 = f2;
            x2 = b - g * (b - a);
            f2 = s_gcv (p, x2);
        }
    }
    double x = (f1 <= f2 ? f1 : f2) <= fbest ? (f1 <= f2 ? x1 : x2) : best;
    p->searched = x;
    return pow (10, x);
}

// The least scale of the residuals, px: the random error of a correlation
// peak (the median test's epsilon). Without it a field smoothed little
// (small s) has residuals near 0 almost everywhere, and a third of its
// vectors, at the edges and where the flow curves, read as outliers.
#define SCALE_FLOOR 0.1

// Bisquare weights of the residual vectors' lengths, studentized by their
// median absolute deviation and the leverage h (smoothn's RobustWeights)
// plus SCALE_FLOOR, times the caller's weights.
static void
s_robust_weights (s_pls_t *p, double s)
{
    long m = 0;
    for (long k = 0; k < p->n; k++)
        if (!p->w0 || p->w0[k] > 0) {
            double du = p->y[0][k] - p->z[0][k], dv = p->y[1][k] - p->z[1][k];
            p->tmp[m++] = (float) sqrt (du * du + dv * dv);
        }
    if (m == 0)
        return;
    float *r = malloc ((size_t) m * sizeof (float));
    if (!r)
        return;
    memcpy (r, p->tmp, (size_t) m * sizeof (float));
    float med = piv_select (p->tmp, m, m / 2);
    for (long k = 0; k < m; k++)
        p->tmp[k] = fabsf (r[k] - med);
    double mad = piv_select (p->tmp, m, m / 2);
    double h = sqrt (1 + 16 * s);
    h = pow (sqrt (1 + h) / sqrt (2) / h, p->dims);
    for (long k = 0, q = 0; k < p->n; k++) {
        double w0 = p->w0 ? p->w0[k] : 1;
        if (!(w0 > 0)) {
            p->w[k] = 0;
            continue;
        }
        double u = r[q] / (1.4826 * mad / sqrt (1 - h) + SCALE_FLOOR) / 4.685;
        q++;
        p->w[k] = (float) (u < 1 ? w0 * (1 - u * u) * (1 - u * u) : 0);
    }
    free (r);
}

// Fills z where the weight in use is 0 from the nearest vectors of non-zero
// weight (rings grown one vector at a time): smoothn's nearest-neighbour
// fill. The iterations below move such vectors only slowly when s is small;
// starting them from their neighbours makes a hole or an outlier's place
// converge at once.
static void
s_fill (s_pls_t *p, uint8_t *known)
{
    int nx = p->plan->nx, ny = p->plan->ny;
    for (long k = 0; k < p->n; k++)
        known[k] = p->w[k] > 0;
    for (int grown = 1; grown;) {
        grown = 0;
        for (int j = 0; j < ny; j++)
            for (int i = 0; i < nx; i++) {
                long k = (long) j * nx + i;
                if (known[k])
                    continue;
                static const int di[4] = {-1, 1, 0, 0}, dj[4] = {0, 0, -1, 1};
                double su = 0, sv = 0;
                int count = 0;
                for (int d = 0; d < 4; d++) {
                    int a = i + di[d], b = j + dj[d];
                    long q = (long) b * nx + a;
                    if (a < 0 || b < 0 || a >= nx || b >= ny || known[q] != 1)
                        continue;
                    su += p->z[0][q];
                    sv += p->z[1][q];
                    count++;
                }
                if (count) {
                    p->z[0][k] = (float) (su / count);
                    p->z[1][k] = (float) (sv / count);
                    known[k] = 2;  // known from the next sweep on
                    grown = 1;
                }
            }
        for (long k = 0; k < p->n; k++)
            known[k] = known[k] ? 1 : 0;
    }
}

// The initial guess: the data, missing values filled (s_fill). smoothn
// keeps only the lowest tenth of the cosine frequencies of that, a guess
// that takes some 30 iterations to undo where every vector but a few has
// weight 1, as in a validated PIV field; the filled data takes about 10.
static void
s_initial_guess (s_pls_t *p, uint8_t *known)
{
    for (long k = 0; k < p->n; k++)
        for (int c = 0; c < 2; c++)
            p->z[c][k] = p->w[k] > 0 ? p->y[c][k] : 0;
    s_fill (p, known);
}

// One half of an iteration for component c: (phase 0) dcty = dct (w (y - z)
// + z), or (phase 1) z = rf idct (gamma dcty) + (1 - rf) z, with the sums
// of its change and of z squared.
typedef struct {
    s_pls_t *p;      // the problem
    int c;           // component
    int phase;       // 0 or 1
    double s, rf;    // smoothing, over-relaxation
    double dz, zz;   // phase 1's sums
} s_half_t;

static void
s_half (s_half_t *h)
{
    s_pls_t *p = h->p;
    float *tmp = p->scratch[h->c][0], *out = p->scratch[h->c][1], *z = p->z[h->c];
    if (h->phase == 0) {
        for (long k = 0; k < p->n; k++) {
            float y = p->w[k] > 0 ? p->y[h->c][k] : 0;
            tmp[k] = p->w[k] * (y - z[k]) + z[k];
        }
        fftwf_execute_r2r (p->plan->dct, tmp, p->dcty[h->c]);
        return;
    }
    s_apply (p, h->c, h->s, tmp, out);
    h->dz = h->zz = 0;
    for (long k = 0; k < p->n; k++) {
        float zn = (float) (h->rf * out[k] + (1 - h->rf) * z[k]);
        h->dz += (double) (zn - z[k]) * (zn - z[k]);
        h->zz += (double) zn * zn;
        z[k] = zn;
    }
}

static void
s_half_part (void *arg, int first, int last, int part)
{
    (void) part;
    for (int c = first; c < last; c++)
        s_half ((s_half_t *) arg + c);
}

// Both components' halves, at once on the pool if there is one: threads
// kept across the iterations, not made for each (an iteration is two
// transforms of some 0.5 ms each).
static void
s_halves (s_pls_t *p, s_half_t h[2])
{
    piv_pool_run (p->pool, 2, 2, s_half_part, h);
}

// The iterations for the current weights: z = idct (gamma dct (w (y - z) +
// z)), over-relaxed, until z changes by less than 1e-3 relative (at once
// without weights); s chosen again at iterations 1, 2, 4, 8...
// smoothn over-relaxes weighted iterations by 1.75. Where nearly every
// weight is 1 (a field with a few holes: validation's replaced vectors)
// that factor makes the well-known points oscillate, decaying by 0.75 an
// iteration: 14 iterations on a 2048^2 single pass instead of 5, for
// fields that differ by under 0.01 px. The factor here grows with the
// share of weights below 1: 1 + 0.75 share (1.75 when every weight is).
static void
s_iterate (s_pls_t *p, int weighted, int autos, double *s, double lo, double hi)
{
    long low = 0;
    for (long k = 0; weighted && k < p->n; k++)
        low += p->w[k] < 1;
    double rf = weighted ? 1 + 0.75 * (double) low / (double) p->n : 1.0, tol = 1;
    for (int nit = 1; tol > 1e-3 && nit <= 100; nit++) {
        s_half_t h[2] = {{p, 0, 0, *s, rf, 0, 0}, {p, 1, 0, *s, rf, 0, 0}};
        s_halves (p, h);
        if (autos && (nit & (nit - 1)) == 0)
            *s = s_gcv_min (p, lo, hi);
        h[0].phase = h[1].phase = 1;
        h[0].s = h[1].s = *s;
        s_halves (p, h);
        double dz = h[0].dz + h[1].dz, zz = h[0].zz + h[1].zz;
        tol = weighted && zz > 0 ? sqrt (dz / zz) : 0;
    }
}

int
piv_smoothn (int nx, int ny, const float *u, const float *v, const float *w, double s,
             int robust, int threads, float *zu, float *zv, double *s_used, float *wout)
{
    // No pool (no memory): the same result, in one thread.
    piv_pool_t *pool = threads > 1 ? piv_pool_new (2) : NULL;
    int rc = piv_smoothn_pool (nx, ny, u, v, w, s, robust, pool, zu, zv, s_used, wout);
    piv_pool_destroy (&pool);
    return rc;
}

// piv_smoothn_pool on a grid whose sizes the transforms handle fast.
static int
s_smoothn_grid (int nx, int ny, const float *u, const float *v, const float *w, double s,
                int robust, piv_pool_t *pool, float *zu, float *zv, double *s_used, float *wout)
{
    long n = (long) nx * ny;
    if (n == 1) {
        // One vector: nothing to smooth against.
        *zu = *u, *zv = *v;
        if (s_used)
            *s_used = s;
        if (wout)
            *wout = w ? *w : 1;
        return 0;
    }
    const s_dct_t *plan = s_dct_get (nx, ny);
    s_pls_t p = {.plan = plan, .n = n, .dims = (nx > 1) + (ny > 1), .y = {u, v}, .w0 = w,
                 .searched = NAN};
    // Eleven arrays in one block, each starting 64-byte aligned as the
    // plans' were (a condition of FFTW's new-array execute).
    long st = (n + 15) & ~15L;
    float *buf = fftwf_malloc (sizeof (float) * 11 * (size_t) st);
    uint8_t *known = malloc ((size_t) n);
    double *eig = malloc ((size_t) (nx + ny) * sizeof (double));
    if (!plan || !buf || !known || !eig) {
        fftwf_free (buf);
        free (known);
        free (eig);
        return -1;
    }
    p.w = buf, p.lambda2 = buf + st, p.dcty[0] = buf + 2 * st, p.dcty[1] = buf + 3 * st;
    p.z[0] = buf + 4 * st, p.z[1] = buf + 5 * st, p.tmp = buf + 6 * st;
    p.scratch[0][0] = buf + 7 * st, p.scratch[0][1] = buf + 8 * st;
    p.scratch[1][0] = buf + 9 * st, p.scratch[1][1] = buf + 10 * st;
    p.pool = pool;
    int weighted = 0;
    // The Laplacian's eigenvalues per axis, once each rather than once per
    // vector: the same values, less of the serial work.
    for (int i = 0; i < nx; i++)
        eig[i] = -2 + 2 * cos (M_PI * i / nx);
    for (int j = 0; j < ny; j++)
        eig[nx + j] = -2 + 2 * cos (M_PI * j / ny);
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            long k = (long) j * nx + i;
            double l = eig[i] + eig[nx + j];
            p.lambda2[k] = (float) (l * l);
            p.w[k] = w ? (w[k] > 0 ? w[k] : 0) : 1;
            p.nof += p.w[k] > 0;
            weighted |= p.w[k] < 1;
        }
    // smoothn's bounds of s: leverages from 0.99 down to 1e-6.
    double hmin = 1e-6, hmax = 0.99, e = 2.0 / p.dims;
    double lo = pow ((1 + sqrt (1 + 8 * pow (hmax, e))) / 4 / pow (hmax, e), 2) - 1;
    double hi = pow ((1 + sqrt (1 + 8 * pow (hmin, e))) / 4 / pow (hmin, e), 2) - 1;
    lo = log10 (lo / 16), hi = log10 (hi / 16);
    int autos = !(s > 0);
    if (autos)
        s = pow (10, 0.5 * (lo + hi));
    if (p.nof == 0)
        memset (p.z[0], 0, 2 * (size_t) st * sizeof (float));
    else {
        s_initial_guess (&p, known);
        for (int step = 0; step < (robust ? 4 : 1); step++) {
            if (step > 0) {
                s_robust_weights (&p, s);
                s_fill (&p, known);
                weighted = 1;
            }
            s_iterate (&p, weighted, autos, &s, lo, hi);
        }
    }
    memcpy (zu, p.z[0], (size_t) n * sizeof (float));
    memcpy (zv, p.z[1], (size_t) n * sizeof (float));
    if (s_used)
        *s_used = s;
    if (wout)
        memcpy (wout, p.w, (size_t) n * sizeof (float));
    fftwf_free (buf);
    free (known);
    free (eig);
    return 0;
}

// The least size >= n whose factors are 2, 3, 5 and 7 only. FFTW's cosine
// transform of a size with a large prime factor takes ~9x as long: 127 (a
// 2048 px image's 32 px windows at 50 %) 0.90 ms a 2-D transform, 128 0.10.
static int
s_fast_size (int n)
{
    for (int m = n;; m++) {
        int r = m;
        static const int f[4] = {2, 3, 5, 7};
        for (int i = 0; i < 4; i++)
            while (r % f[i] == 0)
                r /= f[i];
        if (r == 1)
            return m;
    }
}

// A grid of a size with a large prime factor is smoothed within a larger
// one of fast sizes (s_fast_size): the extra columns (right) and rows
// (bottom) have weight 0, so that they hold no data and the surface simply
// continues into them; then the grid is cut back. The surface differs from
// the unpadded grid's only at its far edges, by less than the noise (the
// Neumann boundary moves out by the padding).
int
piv_smoothn_pool (int nx, int ny, const float *u, const float *v, const float *w, double s,
                  int robust, piv_pool_t *pool, float *zu, float *zv, double *s_used,
                  float *wout)
{
    int px = nx > 1 ? s_fast_size (nx) : nx, py = ny > 1 ? s_fast_size (ny) : ny;
    if (px == nx && py == ny)
        return s_smoothn_grid (nx, ny, u, v, w, s, robust, pool, zu, zv, s_used, wout);
    long n = (long) px * py;
    float *buf = malloc (6 * (size_t) n * sizeof (float));
    if (!buf)
        return -1;
    float *pu = buf, *pv = buf + n, *pw = buf + 2 * n, *qu = buf + 3 * n, *qv = buf + 4 * n,
          *qw = buf + 5 * n;
    memset (buf, 0, 3 * (size_t) n * sizeof (float));
    for (int j = 0; j < ny; j++) {
        memcpy (pu + (long) j * px, u + (long) j * nx, (size_t) nx * sizeof (float));
        memcpy (pv + (long) j * px, v + (long) j * nx, (size_t) nx * sizeof (float));
        for (int i = 0; i < nx; i++)
            pw[(long) j * px + i] = w ? w[(long) j * nx + i] : 1;
    }
    int rc = s_smoothn_grid (px, py, pu, pv, pw, s, robust, pool, qu, qv, s_used, qw);
    for (int j = 0; rc == 0 && j < ny; j++) {
        memcpy (zu + (long) j * nx, qu + (long) j * px, (size_t) nx * sizeof (float));
        memcpy (zv + (long) j * nx, qv + (long) j * px, (size_t) nx * sizeof (float));
        if (wout)
            memcpy (wout + (long) j * nx, qw + (long) j * px, (size_t) nx * sizeof (float));
    }
    free (buf);
    return rc;
}
