// validate.c — the normalized median test (Westerweel & Scarano 2005,
// "Universal outlier detection for PIV data", Exp. Fluids 39) with
// replacement of rejected vectors by the median of their valid neighbours.

#include "piv/piv.h"
#include "piv/smooth.h"
#include "piv/validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SORT2(a, b)                                                                         \
    do {                                                                                    \
        float lo_ = s[a] < s[b] ? s[a] : s[b], hi_ = s[a] < s[b] ? s[b] : s[a];              \
        s[a] = lo_, s[b] = hi_;                                                             \
    } while (0)

// The most neighbours: the 5 x 5 neighbourhood less the vector itself.
#define MAX_NEIGHBOURS PIV_MEDIAN_MAX

// Eight values, the common case inside the field, go through a
// 19-comparator sorting network (branch-free min and max); other counts
// through insertion sort.
float
piv_median (const float *vals, int n)
{
    float s[MAX_NEIGHBOURS];
    if (n == 8) {
        memcpy (s, vals, 8 * sizeof *s);
        SORT2 (0, 2); SORT2 (1, 3); SORT2 (4, 6); SORT2 (5, 7);
        SORT2 (0, 4); SORT2 (1, 5); SORT2 (2, 6); SORT2 (3, 7);
        SORT2 (0, 1); SORT2 (2, 3); SORT2 (4, 5); SORT2 (6, 7);
        SORT2 (2, 4); SORT2 (3, 5);
        SORT2 (1, 4); SORT2 (3, 6);
        SORT2 (1, 2); SORT2 (3, 4); SORT2 (5, 6);
        return 0.5f * (s[3] + s[4]);
    }
    for (int i = 0; i < n; i++) {
        float x = vals[i];
        int j = i;
        for (; j > 0 && s[j - 1] > x; j--)
            s[j] = s[j - 1];
        s[j] = x;
    }
    return n % 2 ? s[n / 2] : 0.5f * (s[n / 2 - 1] + s[n / 2]);
}

// Collects the u and v of the valid neighbours of vector (i, j) within
// 'radius' (1: 3 x 3, 2: 5 x 5), the vector itself excluded; 'skip' (may be
// NULL) excludes more vectors.
static int
s_neighbours_within (const piv_field_t *f, int i, int j, int radius, const uint8_t *skip,
                     float *nu, float *nv)
{
    int count = 0;
    for (int b = j - radius; b <= j + radius; b++)
        for (int a = i - radius; a <= i + radius; a++) {
            if (a < 0 || b < 0 || a >= f->nx || b >= f->ny || (a == i && b == j))
                continue;
            long k = (long) b * f->nx + a;
            if (f->flags[k] != PIV_FLAG_VALID || (skip && skip[k]))
                continue;
            nu[count] = f->u[k];
            nv[count] = f->v[k];
            count++;
        }
    return count;
}

// The valid 3 x 3 neighbours, as s_neighbours_within.
static int
s_neighbours (const piv_field_t *f, int i, int j, const uint8_t *skip, float *nu, float *nv)
{
    return s_neighbours_within (f, i, j, 1, skip, nu, nv);
}

// The neighbours a vector is judged against: the valid 3 x 3 ones, or,
// where fewer than 8 are valid (an edge, a corner, next to masked or failed
// windows), the valid 5 x 5 ones: there two or three wrong vectors that
// agree with each other can be half of the 3 x 3 neighbours, and pass.
static int
s_judges (const piv_field_t *f, int i, int j, float *nu, float *nv)
{
    int count = s_neighbours (f, i, j, NULL, nu, nv);
    return count < 8 ? s_neighbours_within (f, i, j, 2, NULL, nu, nv) : count;
}

// The normalized residual of (u, v) against neighbour medians (mu, mv) and
// median residuals (ru, rv).
static float
s_residual (float u, float v, float mu, float mv, float ru, float rv, float eps)
{
    float tu = fabsf (u - mu) / (ru + eps), tv = fabsf (v - mv) / (rv + eps);
    return sqrtf (tu * tu + tv * tv);
}

// The vector (i, j) as its neighbours predict it where the flow is curved:
// along each of the four lines through it (the row, the column, both
// diagonals), the cubic through the valid vectors 1 and 2 steps away on
// either side gives it (weights -1/6, 2/3, 2/3, -1/6: exact for a parabola
// along the line, so a crest or a trough is predicted as it is, where the
// neighbours' median is below it); the median of the lines that have their
// four vectors, so that one bad vector spoils one line and not the
// prediction. 1 with (*pu, *pv) when at least 'lines' lines have them (near
// an edge or a mask fewer do), else 0; 'skip' (may be NULL) marks vectors
// not to use.
static int
s_curved (const piv_field_t *f, int i, int j, const uint8_t *skip, int lines, float *pu,
          float *pv)
{
    static const int dirs[4][2] = {{1, 0}, {0, 1}, {1, 1}, {1, -1}};
    float lu[4], lv[4];
    int n = 0;
    for (int d = 0; d < 4; d++) {
        float su = 0, sv = 0;
        int t;
        for (t = -2; t <= 2; t++) {
            if (t == 0)
                continue;
            int a = i + t * dirs[d][0], b = j + t * dirs[d][1];
            if (a < 0 || b < 0 || a >= f->nx || b >= f->ny)
                break;
            long k = (long) b * f->nx + a;
            if (f->flags[k] != PIV_FLAG_VALID || (skip && skip[k]))
                break;
            float w = (t == 1 || t == -1) ? 2.0f / 3.0f : -1.0f / 6.0f;
            su += w * f->u[k];
            sv += w * f->v[k];
        }
        if (t <= 2)
            continue;  // the line lacks a vector
        lu[n] = su;
        lv[n] = sv;
        n++;
    }
    if (n < lines)
        return 0;
    *pu = piv_median (lu, n);
    *pv = piv_median (lv, n);
    return 1;
}

// Replaces each vector marked in 'reject' by the median of its valid 3 x 3
// neighbours not marked (flag REPLACED), or, with none, flags it INVALID.
// With 'curved', by the lines' prediction instead where they see a curve
// the median misses (off the median by more than the neighbours' scatter
// and eps): a replaced crest is not clipped, and where the field is only
// noisy (sparse seeding) the median, less noisy than a line, is kept.
static void
s_replace (piv_field_t *f, const uint8_t *reject, int curved, float eps)
{
    for (int j = 0; j < f->ny; j++)
        for (int i = 0; i < f->nx; i++) {
            long k = (long) j * f->nx + i;
            float nu[8], nv[8], pu, pv;
            if (!reject[k])
                continue;
            int count = s_neighbours (f, i, j, reject, nu, nv);
            if (count == 0) {
                f->flags[k] = PIV_FLAG_INVALID;
                continue;
            }
            float mu = piv_median (nu, count), mv = piv_median (nv, count);
            f->u[k] = mu;
            f->v[k] = mv;
            f->flags[k] = PIV_FLAG_REPLACED;
            if (curved && s_curved (f, i, j, reject, 2, &pu, &pv)) {
                float ru[8], rv[8];
                for (int c = 0; c < count; c++) {
                    ru[c] = fabsf (nu[c] - mu);
                    rv[c] = fabsf (nv[c] - mv);
                }
                if (s_residual (pu, pv, mu, mv, piv_median (ru, count), piv_median (rv, count), eps)
                    > 1) {
                    f->u[k] = pu;
                    f->v[k] = pv;
                }
            }
        }
}

int
piv_validate_median (piv_field_t *field, double eps, double threshold)
{
    return piv_validate_median_peaks (field, eps, threshold, NULL, NULL);
}

// The test of rows [first, last) of a field (piv_validate_median_pool):
// each vector's verdict in reject (1 rejected, 2 rejected but an other peak
// passed, taken from alt), rejections counted per thread.
typedef struct {
    piv_field_t *field;              // the field, read only until all rows are tested
    double eps, threshold;           // the test's
    int curved;                      // a second look against the four lines' prediction
    piv_candidates_fn *candidates;   // NULL, or the other peaks
    void *arg;                       // its argument
    uint8_t *reject;                 // out: verdicts
    float *alt;                      // out: the peaks taken
    int rejected[PIV_MAX_THREADS];   // out: rejections per thread
} s_test_t;

static void
s_test_rows (void *arg, int first, int last, int part)
{
    s_test_t *job = arg;
    const piv_field_t *f = job->field;
    int rejected = 0;
    // Test every valid vector against its neighbours as measured; a rejected
    // one may still pass with another peak of its window...
    for (int j = first; j < last; j++)
        for (int i = 0; i < f->nx; i++) {
            long k = (long) j * f->nx + i;
            float nu[MAX_NEIGHBOURS], nv[MAX_NEIGHBOURS], ru[MAX_NEIGHBOURS], rv[MAX_NEIGHBOURS];
            if (f->flags[k] != PIV_FLAG_VALID)
                continue;
            int count = s_judges (f, i, j, nu, nv);
            // Too few neighbours to judge (a corner among failed vectors).
            if (count < 3)
                continue;
            float mu = piv_median (nu, count), mv = piv_median (nv, count);
            for (int c = 0; c < count; c++) {
                ru[c] = fabsf (nu[c] - mu);
                rv[c] = fabsf (nv[c] - mv);
            }
            float rmu = piv_median (ru, count), rmv = piv_median (rv, count), e = (float) job->eps;
            if (s_residual (f->u[k], f->v[k], mu, mv, rmu, rmv, e) <= job->threshold)
                continue;
            // On a crest of a curved flow the neighbours' median lies below the
            // vector and their residuals collapse (a shear's rows are equal):
            // judged against what the lines through it predict, with the same
            // scale, a sound vector passes and an outlier does not.
            // Only where the lines see a curve the median misses (their
            // prediction off the median by more than the neighbours' scatter):
            // elsewhere it would only be a second chance for noise.
            float pu, pv;
            if (job->curved && s_curved (f, i, j, NULL, 1, &pu, &pv)
                && s_residual (pu, pv, mu, mv, rmu, rmv, e) > 1
                && s_residual (f->u[k], f->v[k], pu, pv, rmu, rmv, e) <= job->threshold)
                continue;
            job->reject[k] = 1;
            rejected++;
            float cu[4], cv[4];
            int nc = job->candidates ? job->candidates (job->arg, k, cu, cv, 4) : 0;
            for (int a = 0; a < nc; a++)
                if (s_residual (cu[a], cv[a], mu, mv, rmu, rmv, e) <= job->threshold) {
                    // Taken after the whole field is tested, so that every
                    // vector is judged against its neighbours as measured.
                    job->alt[2 * k] = cu[a];
                    job->alt[2 * k + 1] = cv[a];
                    job->reject[k] = 2;
                    break;
                }
        }
    job->rejected[part] += rejected;
}

int
piv_validate_median_peaks (piv_field_t *field, double eps, double threshold,
                           piv_candidates_fn *candidates, void *arg)
{
    return piv_validate_median_pool (field, eps, threshold, 1, candidates, arg, NULL, 1);
}

int
piv_validate_median_pool (piv_field_t *field, double eps, double threshold, int curved,
                          piv_candidates_fn *candidates, void *arg, piv_pool_t *pool,
                          int nthreads)
{
    piv_field_t *f = field;
    long n = (long) f->nx * f->ny;
    s_test_t job = {f, eps, threshold, curved, candidates, arg, calloc ((size_t) n, 1),
                    candidates ? malloc (2 * (size_t) n * sizeof (float)) : NULL, {0}};
    if (!job.reject || (candidates && !job.alt)) {
        free (job.reject);
        free (job.alt);
        return -1;
    }
    piv_pool_run (pool, nthreads, f->ny, s_test_rows, &job);
    int rejected = 0;
    for (int t = 0; t < PIV_MAX_THREADS; t++)
        rejected += job.rejected[t];
    for (long k = 0; k < n; k++)
        if (job.reject[k] == 2) {
            f->u[k] = job.alt[2 * k];
            f->v[k] = job.alt[2 * k + 1];
            job.reject[k] = 0;
        }
    // ...the others are replaced from the neighbours that passed.
    s_replace (f, job.reject, curved, (float) eps);
    free (job.reject);
    free (job.alt);
    return rejected;
}

int
piv_field_noise (const piv_field_t *field, piv_noise_t *noise)
{
    const piv_field_t *f = field;
    double sum = 0;
    long count = 0, out = 0;
    for (int j = 1; j < f->ny - 1; j++)
        for (int i = 1; i < f->nx - 1; i++) {
            long k = (long) j * f->nx + i;
            float nu[8], nv[8];
            int c = 0;
            if (f->flags[k] == PIV_FLAG_INVALID)
                continue;
            for (int b = j - 1; b <= j + 1; b++)
                for (int a = i - 1; a <= i + 1; a++) {
                    long q = (long) b * f->nx + a;
                    if (q == k || f->flags[q] == PIV_FLAG_INVALID)
                        continue;
                    nu[c] = f->u[q];
                    nv[c] = f->v[q];
                    c++;
                }
            if (c == 0)
                continue;
            double du = f->u[k] - piv_median (nu, c), dv = f->v[k] - piv_median (nv, c);
            double d = sqrt (du * du + dv * dv);
            if (d < 2) {
                sum += d * d;
                count++;
            }
            else if (f->flags[k] == PIV_FLAG_VALID)
                out++;
        }
    noise->noise = count ? sqrt (sum / count) : 0;
    noise->out = out;
    noise->count = count;
    return count ? 0 : -1;
}

int
piv_validate_peak_ratio (piv_field_t *field, double min_ratio)
{
    piv_field_t *f = field;
    long n = (long) f->nx * f->ny;
    uint8_t *low = calloc ((size_t) n, 1);
    if (!low)
        return -1;
    int rejected = 0;
    for (long k = 0; k < n; k++)
        if (f->flags[k] == PIV_FLAG_VALID && f->peak_ratio[k] < min_ratio) {
            low[k] = 1;
            rejected++;
        }
    s_replace (f, low, 0, 0);
    free (low);
    return rejected;
}

// Hoare's selection: linear on average, not the n log n of a sort.
float
piv_select (float *v, long n, long k)
{
    long lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        long i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}
