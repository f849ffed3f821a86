// ensemble.c — ensemble correlation (piv/ensemble.h): each pair's
// correlation planes of every window, and frame A's autocorrelation, added
// as integers into sums that merge exactly in any grouping; the mean field,
// the normalized median test and the Reynolds stresses read from the sums.

#include "piv/ensemble.h"
#include "piv/deform.h"
#include "piv/peak.h"
#include "piv/preprocess.h"
#include "piv/smooth.h"
#include "piv/stats_internal.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Each pair's correlation values are scaled to a correlation coefficient
// against the frames' own contrast (1 / (n^2 sigma_A sigma_B)), then
// counted in units of 2^-24 as 64-bit integers: integer sums are the same
// whatever the order of the additions, so a merge of partial sums equals
// the sums of one run over the same pairs to the bit (float sums would
// differ in the last bits with the grouping), and 2^24 steps of the
// typical peak leave the rounding far below the fit's own noise. A window
// holds at most the frame's pixels' share of its energy: the sums stay
// within 2^63 for more than 2^20 pairs even of one bright window in a
// dark 2048^2 frame.
#define QUANTUM 16777216.0  // 2^24 counts per unit of normalized correlation

// The autocorrelation's lags kept: (0, 0), (1, 0), (0, 1), (1, 1), (1, -1);
// the others follow by symmetry (A (-s) = A (s)). Its width comes from the
// four lags around 0, not lag 0 itself (s_read): the camera's noise,
// correlated with itself at lag 0 only, would make the particle images
// look narrower and the stresses larger (a zero-displacement run at 2 %
// noise: 0.031 px^2 with lag 0 in a 3 x 3 fit, 0.005 without), and lags
// 1 and 2 would weigh the images' tails, which are not quite Gaussian
// (0.03 px^2 where no fluctuation is). Lag 0 is kept for what may want it.
#define AUTO_LAGS 5
static const int s_auto_dx[AUTO_LAGS] = {0, 1, 0, 1, 1};
static const int s_auto_dy[AUTO_LAGS] = {0, 0, 1, 1, -1};

// The bytes' header: magic, then 10 little-endian uint32 (window, overlap,
// step, width, height, nx, ny, radius, settings' text length, predictor's
// bytes length), then int64 pairs.
#define MAGIC "PVE1"
#define HEADER 52
#define MAX_SIDE 65536             // px, frames' width or height
#define MAX_PREDICTOR (64 << 20)   // bytes of an encoded predictor
#define SETTINGS_MAX 512           // bytes of the settings' text, NUL included

struct _piv_ensemble_t {
    piv_settings_t settings;     // the caller's (mask borrowed), windows normalized
    char text[SETTINGS_MAX];     // settings as piv_settings_format writes them
    int window, overlap, step;   // the pass
    int nx, ny;                  // its grid
    int x00, y00;                // top left corner of the first window
    int radius;                  // lags kept each way
    int lags;                    // (2 radius + 1)^2
    int stride;                  // int64 per window: count, cross[lags], auto[AUTO_LAGS]
    int width, height;           // the frames'
    int64_t pairs;               // pairs counted
    int64_t *sums;               // nx * ny * stride
    piv_field_t *predictor;      // the filled copy, or NULL (first pass)
    unsigned char *pred_bytes;   // its encoding (merge compares it), or NULL
    size_t pred_size;            // its length
    float *pu, *pv;              // the predictor at each window centre (0 without)
    // What piv_ensemble_add needs, made at its first call:
    fftwf_plan forward, inverse; // n x n complex transforms (FFTW_ESTIMATE)
    fftwf_complex *z;            // A + i B, its transform, then the inverse's (in place)
    double *sum_a, *sum_b;       // each window's sum of pixels in A and B
    long *count;                 // ... its flow pixels (0: not correlated)
    float *mean_a, *mean_b;      // ... the background taken from it (s_background)
    float *coef_a, *coef_b;      // the frames' interpolation sources
    float *def_a, *def_b;        // the frames displaced by the predictor
};

// Little-endian writing and reading.
static void
s_put32 (unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char) (v >> (8 * i));
}

static void
s_put64 (unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char) (v >> (8 * i));
}

static uint32_t
s_get32 (const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t
s_get64 (const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

int
piv_ensemble_passes (int window, int *windows, int max)
{
    if (window < 4 || window > PIV_MAX_WINDOW || window % 2 != 0 || max < 1)
        return -1;
    // Halving from 32 px (or the window itself, if larger): the first pass
    // finds displacements up to a quarter of 32 px, each next one refines.
    int all[16], count = 0;
    for (int n = window; count < 16; n *= 2) {
        all[count++] = n;
        if (n * 2 > 32)
            break;
    }
    // Largest first; with more than max, the largest are left out.
    int take = count < max ? count : max;
    for (int i = 0; i < take; i++)
        windows[i] = all[take - 1 - i];
    return take;
}

// The grid of a pass as piv_process places it: nx x ny windows 'step'
// apart, centred in the frames.
static void
s_grid (int width, int height, int n, int step, int *nx, int *ny, int *x00, int *y00)
{
    *nx = (width - n) / step + 1;
    *ny = (height - n) / step + 1;
    *x00 = (width - n - (*nx - 1) * step) / 2;
    *y00 = (height - n - (*ny - 1) * step) / 2;
}

static int
s_step (int n, int overlap)
{
    int step = n * (100 - overlap) / 100;
    return step < 1 ? 1 : step;
}

// Lags kept: a first pass (no prediction) up to a quarter of the window
// and one more for the fit's neighbours (the quarter rule: beyond it too
// few particles stay in both windows); a pass with a prediction n / 8 + 1,
// at least 2 (8 px: +-2, 16 px: +-3): a 3 x 3 fit around a peak up to
// n / 8 px from the prediction (a 16 px pass after 32 px windows that
// flatten a 64 px sine finds its peak at the edge of +-2 lags in 65 of
// 961 windows, of +-3 in 8). Both below n / 2 (the circular plane's own
// limit).
static int
s_radius (int n, int predicted)
{
    int r = predicted ? (n / 8 + 1 > 2 ? n / 8 + 1 : 2) : n / 4 + 1;
    return r > n / 2 - 1 ? n / 2 - 1 : r;
}

// Why a predictor cannot serve (a message into err), or 0: a regular grid
// of finite positions.
static int
s_check_predictor (const piv_field_t *p, const char *what, char *err, size_t errlen)
{
    long n = (long) p->nx * p->ny;
    int bad = p->nx < 1 || p->ny < 1 || p->step < 1;
    for (long k = 0; k < n && !bad; k++)
        bad = !isfinite (p->x[k]) || !isfinite (p->y[k]);
    if (bad)
        snprintf (err, errlen, "%spredictor of %d x %d vectors %d px apart is not a regular grid "
                  "of finite positions", what, p->nx, p->ny, p->step);
    return bad ? -1 : 0;
}

// The predictor as the pass keeps it: a copy of u, v on the same regular
// grid, INVALID vectors filled from their filled neighbours (the mean of
// those among the 8 around), sweep after sweep; none valid: zero.
static piv_field_t *
s_predictor_copy (const piv_field_t *p)
{
    piv_field_t *f = piv_field_new (p->nx, p->ny);
    if (!f)
        return NULL;
    f->window = p->window;
    f->step = p->step;
    f->runs = p->runs;
    long n = (long) p->nx * p->ny;
    uint8_t *known = malloc ((size_t) n);
    if (!known) {
        piv_field_destroy (&f);
        return NULL;
    }
    long missing = 0;
    for (long k = 0; k < n; k++) {
        f->x[k] = p->x[k];
        f->y[k] = p->y[k];
        known[k] = p->flags[k] != PIV_FLAG_INVALID && isfinite (p->u[k]) && isfinite (p->v[k]);
        f->u[k] = known[k] ? p->u[k] : 0;
        f->v[k] = known[k] ? p->v[k] : 0;
        f->flags[k] = PIV_FLAG_VALID;
        f->peak_ratio[k] = p->peak_ratio[k];
        missing += !known[k];
    }
    while (missing > 0) {
        long filled = 0;
        // Each sweep reads the vectors known before it (2: filled in it).
        for (long k = 0; k < n; k++) {
            if (known[k])
                continue;
            int i = (int) (k % p->nx), j = (int) (k / p->nx), c = 0;
            double su = 0, sv = 0;
            for (int dj = -1; dj <= 1; dj++)
                for (int di = -1; di <= 1; di++) {
                    int ii = i + di, jj = j + dj;
                    if (ii < 0 || jj < 0 || ii >= p->nx || jj >= p->ny)
                        continue;
                    long q = (long) jj * p->nx + ii;
                    if (known[q] == 1) {
                        su += f->u[q], sv += f->v[q], c++;
                    }
                }
            if (c > 0) {
                f->u[k] = (float) (su / c);
                f->v[k] = (float) (sv / c);
                known[k] = 2;
                filled++;
            }
        }
        if (filled == 0)
            break;  // nothing valid anywhere: zeros
        for (long k = 0; k < n; k++)
            if (known[k] == 2)
                known[k] = 1, missing--;
    }
    free (known);
    return f;
}

// A pass over a grid of the given size (after the caller's checks).
// 'text' is the normalized settings' text; predictor the filled copy
// (owned from now on) and pred_bytes its encoding (owned), or NULL.
static piv_ensemble_t *
s_make (const piv_settings_t *settings, const char *text, int window, int overlap, int width,
        int height, piv_field_t *predictor, unsigned char *pred_bytes, size_t pred_size)
{
    piv_ensemble_t *self = calloc (1, sizeof *self);
    if (!self) {
        piv_field_destroy (&predictor);
        free (pred_bytes);
        return NULL;
    }
    self->settings = *settings;
    snprintf (self->text, sizeof self->text, "%s", text);
    self->window = window;
    self->overlap = overlap;
    self->step = s_step (window, overlap);
    self->width = width;
    self->height = height;
    s_grid (width, height, window, self->step, &self->nx, &self->ny, &self->x00, &self->y00);
    self->radius = s_radius (window, predictor != NULL);
    self->lags = (2 * self->radius + 1) * (2 * self->radius + 1);
    self->stride = 1 + self->lags + AUTO_LAGS;
    self->predictor = predictor;
    self->pred_bytes = pred_bytes;
    self->pred_size = pred_size;
    size_t nwin = (size_t) self->nx * self->ny;
    self->sums = calloc (nwin * self->stride, sizeof *self->sums);
    self->pu = calloc (nwin, sizeof (float));
    self->pv = calloc (nwin, sizeof (float));
    if (!self->sums || !self->pu || !self->pv) {
        piv_ensemble_destroy (&self);
        return NULL;
    }
    if (predictor)
        for (int j = 0; j < self->ny; j++)
            for (int i = 0; i < self->nx; i++) {
                long k = (long) j * self->nx + i;
                float cx = self->x00 + i * self->step + (window - 1) * 0.5f;
                float cy = self->y00 + j * self->step + (window - 1) * 0.5f;
                piv_field_interp (predictor, cx, cy, &self->pu[k], &self->pv[k]);
            }
    return self;
}

// The settings' text with what does not change the sums' meaning for a
// pass (its windows, overlap, iterations) at the defaults. 0 or -1.
static int
s_settings_text (const piv_settings_t *settings, piv_settings_t *out, char *text, size_t size)
{
    piv_settings_t d;
    piv_settings_init (&d);
    *out = *settings;
    memcpy (out->passes, d.passes, sizeof d.passes);
    out->npasses = d.npasses;
    out->overlap = d.overlap;
    out->final_iterations = d.final_iterations;
    return piv_settings_format (out, text, size) < 0 ? -1 : 0;
}

// Why a pass cannot be made of these: a message into err, or 0.
static int
s_check_pass (int window, int overlap, int width, int height, char *err, size_t errlen)
{
    if (window < 4 || window > PIV_MAX_WINDOW || window % 2 != 0) {
        snprintf (err, errlen, "ensemble: window %d px: expected an even size from 4 to %d",
                  window, PIV_MAX_WINDOW);
        return -1;
    }
    if (overlap < 0 || overlap > 90) {
        snprintf (err, errlen, "ensemble: overlap %d %%: expected 0 to 90", overlap);
        return -1;
    }
    if (width < window || height < window || width > MAX_SIDE || height > MAX_SIDE) {
        snprintf (err, errlen, "ensemble: frames of %d x %d px cannot hold %d px windows", width,
                  height, window);
        return -1;
    }
    return 0;
}

piv_ensemble_t *
piv_ensemble_new (const piv_settings_t *settings, int window, int overlap, int width, int height,
                  const piv_field_t *predictor, char *err, size_t errlen)
{
    if (s_check_pass (window, overlap, width, height, err, errlen) != 0)
        return NULL;
    piv_settings_t s;
    char text[SETTINGS_MAX];
    if (s_settings_text (settings, &s, text, sizeof text) != 0) {
        snprintf (err, errlen, "ensemble: settings cannot be written as text (mask path?)");
        return NULL;
    }
    if (piv_settings_check (&s, err, errlen) != 0)
        return NULL;
    if (s.mask && (piv_image_width (s.mask) != width || piv_image_height (s.mask) != height)) {
        snprintf (err, errlen, "ensemble: mask of %d x %d px for frames of %d x %d px",
                  piv_image_width (s.mask), piv_image_height (s.mask), width, height);
        return NULL;
    }
    piv_field_t *copy = NULL;
    unsigned char *bytes = NULL;
    size_t size = 0;
    if (predictor) {
        if (s_check_predictor (predictor, "ensemble: ", err, errlen) != 0)
            return NULL;
        copy = s_predictor_copy (predictor);
        if (!copy || piv_field_encode (copy, &bytes, &size) != 0) {
            piv_field_destroy (&copy);
            snprintf (err, errlen, "ensemble: no memory");
            return NULL;
        }
    }
    piv_ensemble_t *self = s_make (&s, text, window, overlap, width, height, copy, bytes, size);
    if (!self)
        snprintf (err, errlen, "ensemble: no memory");
    return self;
}

void
piv_ensemble_destroy (piv_ensemble_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_ensemble_t *self = *self_p;
    if (self->forward || self->inverse) {
        piv_fftw_planner_lock ();
        if (self->forward)
            fftwf_destroy_plan (self->forward);
        if (self->inverse)
            fftwf_destroy_plan (self->inverse);
        piv_fftw_planner_unlock ();
    }
    fftwf_free (self->z);
    free (self->sum_a);
    free (self->sum_b);
    free (self->count);
    free (self->mean_a);
    free (self->mean_b);
    fftwf_free (self->coef_a);
    fftwf_free (self->coef_b);
    fftwf_free (self->def_a);
    fftwf_free (self->def_b);
    piv_field_destroy (&self->predictor);
    free (self->pred_bytes);
    free (self->sums);
    free (self->pu);
    free (self->pv);
    free (self);
    *self_p = NULL;
}

void
piv_ensemble_info (const piv_ensemble_t *self, piv_ensemble_info_t *out)
{
    *out = (piv_ensemble_info_t) {self->window, self->step, self->nx, self->ny, self->radius,
                                  self->width, self->height, self->pairs};
}

// The transforms and buffers of add, at its first call. 0 or -1.
static int
s_ready (piv_ensemble_t *self)
{
    if (self->forward)
        return 0;
    int n = self->window;
    self->z = fftwf_malloc (sizeof (fftwf_complex) * n * n);
    size_t nwin = (size_t) self->nx * self->ny;
    self->sum_a = malloc (nwin * sizeof (double));
    self->sum_b = malloc (nwin * sizeof (double));
    self->count = malloc (nwin * sizeof (long));
    self->mean_a = malloc (nwin * sizeof (float));
    self->mean_b = malloc (nwin * sizeof (float));
    if (!self->z || !self->sum_a || !self->sum_b || !self->count || !self->mean_a
        || !self->mean_b)
        return -1;
    if (self->predictor) {
        size_t pixels = (size_t) self->width * self->height;
        self->coef_a = fftwf_malloc (sizeof (float) * pixels);
        self->coef_b = fftwf_malloc (sizeof (float) * pixels);
        self->def_a = fftwf_malloc (sizeof (float) * pixels);
        self->def_b = fftwf_malloc (sizeof (float) * pixels);
        if (!self->coef_a || !self->coef_b || !self->def_a || !self->def_b)
            return -1;
    }
    // FFTW_ESTIMATE, in place: the plan is chosen without measuring, and
    // no wisdom applies to it (FFTW takes wisdom of a more rigorous
    // planner for the same problem: the engine's patient plans are out of
    // place), so every object of every process with this FFTW on this
    // kind of CPU computes the same values and agents' partials merge to
    // the bytes one agent would make.
    piv_fftw_planner_lock ();
    self->forward = fftwf_plan_dft_2d (n, n, self->z, self->z, FFTW_FORWARD, FFTW_ESTIMATE);
    self->inverse = fftwf_plan_dft_2d (n, n, self->z, self->z, FFTW_BACKWARD, FFTW_ESTIMATE);
    piv_fftw_planner_unlock ();
    return self->forward && self->inverse ? 0 : -1;
}

// The standard deviation of a frame's pixels.
static double
s_contrast (const float *p, size_t n)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++)
        s += p[i];
    double mean = s / n;
    for (size_t i = 0; i < n; i++)
        s2 += (p[i] - mean) * (p[i] - mean);
    return sqrt (s2 / n);
}

// The sums of the flow pixels (not masked) of the n x n window at (x0,
// y0) of img into *sum, *sum2, and their number (the return value).
static long
s_window_sums (const float *img, const float *mask, int w, int x0, int y0, int n, double *sum,
               double *sum2)
{
    double s = 0, s2 = 0;
    long count = 0;
    for (int r = 0; r < n; r++) {
        const float *row = img + (long) (y0 + r) * w + x0;
        const float *mrow = mask ? mask + (long) (y0 + r) * w + x0 : NULL;
        for (int c = 0; c < n; c++)
            if (!mrow || mrow[c] != 0)
                s += row[c], s2 += (double) row[c] * row[c], count++;
    }
    *sum = s;
    *sum2 = s2;
    return count;
}

// Copies the n x n window at (x0, y0) of img into the real (part 0) or
// imaginary (part 1) parts of z, less 'mean', the masked pixels 0.
static void
s_window (const float *img, const float *mask, int w, int x0, int y0, int n, float mean,
          float *z, int part)
{
    for (int r = 0; r < n; r++) {
        const float *row = img + (long) (y0 + r) * w + x0;
        const float *mrow = mask ? mask + (long) (y0 + r) * w + x0 : NULL;
        float *out = z + 2 * (r * n) + part;
        for (int c = 0; c < n; c++)
            out[2 * c] = (!mrow || mrow[c] != 0) ? row[c] - mean : 0;
    }
}

// The background each window's pixels are taken from: the mean of the
// flow pixels of the windows within about 2 window sizes of it (sum and
// count: the grid's window sums), so that the window's own particles
// make little of it. Its own mean would make each plane sum to zero over
// its lags: a negative baseline of the peak's volume over n^2 lags,
// which narrows the summed peak of small windows (8 px: stresses 0.3 px^2
// too small for fluctuations of 0.6 px^2); a frame's mean instead would
// leave uneven illumination in the planes.
static void
s_background (const piv_ensemble_t *self, const double *sum, const long *count, float *mean)
{
    int reach = (2 * self->window + self->step - 1) / self->step;
    for (int j = 0; j < self->ny; j++)
        for (int i = 0; i < self->nx; i++) {
            double s = 0;
            long c = 0;
            for (int jj = j - reach; jj <= j + reach; jj++)
                for (int ii = i - reach; ii <= i + reach; ii++)
                    if (ii >= 0 && jj >= 0 && ii < self->nx && jj < self->ny) {
                        long q = (long) jj * self->nx + ii;
                        s += sum[q], c += count[q];
                    }
            mean[(long) j * self->nx + i] = c ? (float) (s / c) : 0;
        }
}

// Window k's planes into its sums: the transform of z = A + i B, the cross
// spectrum conj (A) B plus i (|A|^2 + |B|^2), one inverse transform (both
// are Hermitian: the cross-correlation in the real parts, the sum of the
// windows' autocorrelations in the imaginary ones). Both windows' (not
// A's alone): the deformation's interpolation widens the particle images
// of a displaced frame a little, and the cross-correlation with them.
static void
s_add_window (piv_ensemble_t *self, int64_t *sums, double scale_c, double scale_a)
{
    int n = self->window, r = self->radius, side = 2 * r + 1;
    fftwf_execute (self->forward);
    float *s = (float *) self->z;
    // In place, each frequency k with its mirror -k (both written at once).
    for (int ky = 0; ky < n; ky++) {
        int my = ky == 0 ? 0 : n - ky;
        for (int kx = 0; kx < n; kx++) {
            int mx = kx == 0 ? 0 : n - kx;
            long p = (long) ky * n + kx, m = (long) my * n + mx;
            if (m < p)
                continue;
            float pr = s[2 * p], pi = s[2 * p + 1], mr = s[2 * m], mi = s[2 * m + 1];
            // A (k) = (P + conj M) / 2, B (k) = (P - conj M) / 2i.
            float ar = (pr + mr) * 0.5f, ai = (pi - mi) * 0.5f;
            float br = (pi + mi) * 0.5f, bi = -(pr - mr) * 0.5f;
            float cr = ar * br + ai * bi, ci = ar * bi - ai * br;  // conj (A) B
            float aa = ar * ar + ai * ai + br * br + bi * bi;      // |A|^2 + |B|^2
            // W (k) = C (k) + i S (k); W (-k) = conj C (k) + i S (k).
            s[2 * p] = cr;
            s[2 * p + 1] = ci + aa;
            s[2 * m] = cr;
            s[2 * m + 1] = -ci + aa;
        }
    }
    fftwf_execute (self->inverse);
    const float *o = (const float *) self->z;
    sums[0]++;
    int64_t *cross = sums + 1, *aut = sums + 1 + self->lags;
    for (int dy = -r; dy <= r; dy++) {
        int jy = dy < 0 ? dy + n : dy;
        for (int dx = -r; dx <= r; dx++) {
            int ix = dx < 0 ? dx + n : dx;
            cross[(dy + r) * side + dx + r] += llrint (o[2 * ((long) jy * n + ix)] * scale_c);
        }
    }
    for (int q = 0; q < AUTO_LAGS; q++) {
        int ix = s_auto_dx[q], jy = s_auto_dy[q] < 0 ? s_auto_dy[q] + n : s_auto_dy[q];
        aut[q] += llrint (o[2 * ((long) jy * n + ix) + 1] * scale_a);
    }
}

int
piv_ensemble_add (piv_ensemble_t *self, const piv_image_t *a, const piv_image_t *b, char *err,
                  size_t errlen)
{
    int w = piv_image_width (a), h = piv_image_height (a);
    if (w != self->width || h != self->height || piv_image_width (b) != w
        || piv_image_height (b) != h) {
        snprintf (err, errlen, "ensemble: frames of %d x %d and %d x %d px for a pass over %d x "
                  "%d px", w, h, piv_image_width (b), piv_image_height (b), self->width,
                  self->height);
        return -1;
    }
    if (self->settings.mask_path[0] && !self->settings.mask) {
        snprintf (err, errlen, "ensemble: mask '%s' not loaded", self->settings.mask_path);
        return -1;
    }
    if (s_ready (self) != 0) {
        snprintf (err, errlen, "ensemble: no memory");
        return -1;
    }
    piv_image_t *pa = NULL, *pb = NULL;
    if (piv_preprocess_on (&self->settings)) {
        pa = piv_preprocess (a, &self->settings, err, errlen);
        pb = pa ? piv_preprocess (b, &self->settings, err, errlen) : NULL;
        if (!pa || !pb) {
            piv_image_destroy (&pa);
            piv_image_destroy (&pb);
            return -1;
        }
        a = pa, b = pb;
    }
    const float *fa = piv_image_cdata (a), *fb = piv_image_cdata (b);
    if (!fa || !fb) {
        piv_image_destroy (&pa);
        piv_image_destroy (&pb);
        snprintf (err, errlen, "ensemble: no memory");
        return -1;
    }
    if (self->predictor) {
        // The frames read where the prediction says the particles were at
        // A's and B's times: A'(x) = A (x - U (x) / 2), B'(x) = B (x + U (x)
        // / 2), so that what is left is a small lag and the window's
        // vector is the displacement of the particles at its centre at
        // mid-time. (B alone, B (x + U (x)), would measure the particles
        // that start there: a bias of U / 2 times the gradient, 0.3 px in
        // a vortex core of 4 px displacement; settings' symmetric 0.)
        piv_deform_t kind = self->settings.deform == PIV_DEFORM_OFFSET ? PIV_DEFORM_BSPLINE5
                                                                       : self->settings.deform;
        int sym = self->settings.symmetric;
        if (sym) {
            piv_deform_prepare (kind, fa, self->coef_a, w, h);
        }
        piv_deform_prepare (kind, fb, self->coef_b, w, h);
        piv_deform_rows (kind, sym ? self->coef_a : NULL, self->def_a, -0.5f, self->coef_b,
                         self->def_b, sym ? 0.5f : 1.0f, w, h, self->predictor, 0, h);
        fa = sym ? self->def_a : fa;
        fb = self->def_b;
    }
    size_t pixels = (size_t) w * h;
    double sa = s_contrast (fa, pixels), sb = s_contrast (fb, pixels);
    int n = self->window;
    double n4 = (double) n * n * n * n;  // n^2 of the sums, n^2 of the unnormalized inverse
    double scale_c = QUANTUM / (n4 * sa * sb), scale_a = QUANTUM / (n4 * (sa * sa + sb * sb));
    self->pairs++;
    if (!(sa > 0) || !(sb > 0) || !isfinite (scale_c) || !isfinite (scale_a)) {
        // Blank frames: the pair is counted, it shows nothing.
        piv_image_destroy (&pa);
        piv_image_destroy (&pb);
        return 0;
    }
    const float *mask = self->settings.mask ? piv_image_cdata (self->settings.mask) : NULL;
    // Each window's sums first (a window whose centre is masked, or whose
    // pixels are all equal in A or B, is not correlated: count 0), then
    // the backgrounds from them, then the planes.
    for (int j = 0; j < self->ny; j++)
        for (int i = 0; i < self->nx; i++) {
            int x0 = self->x00 + i * self->step, y0 = self->y00 + j * self->step;
            long k = (long) j * self->nx + i;
            double sa2, sb2;
            self->count[k] = 0;
            self->sum_a[k] = self->sum_b[k] = 0;
            // The centre as the engine takes it (x0 + (n - 1) / 2, rounded down).
            if (mask && mask[(long) (y0 + n / 2 - 1) * w + x0 + n / 2 - 1] == 0)
                continue;
            long c = s_window_sums (fa, mask, w, x0, y0, n, &self->sum_a[k], &sa2);
            s_window_sums (fb, mask, w, x0, y0, n, &self->sum_b[k], &sb2);
            double va = sa2 - self->sum_a[k] * self->sum_a[k] / (c ? c : 1);
            double vb = sb2 - self->sum_b[k] * self->sum_b[k] / (c ? c : 1);
            if (c > 0 && va > 1e-9 * sa2 && vb > 1e-9 * sb2)
                self->count[k] = c;
            else
                self->sum_a[k] = self->sum_b[k] = 0;
        }
    s_background (self, self->sum_a, self->count, self->mean_a);
    s_background (self, self->sum_b, self->count, self->mean_b);
    float *z = (float *) self->z;
    for (int j = 0; j < self->ny; j++)
        for (int i = 0; i < self->nx; i++) {
            long k = (long) j * self->nx + i;
            if (self->count[k] == 0)
                continue;
            int x0 = self->x00 + i * self->step, y0 = self->y00 + j * self->step;
            s_window (fa, mask, w, x0, y0, n, self->mean_a[k], z, 0);
            s_window (fb, mask, w, x0, y0, n, self->mean_b[k], z, 1);
            s_add_window (self, self->sums + k * self->stride, scale_c, scale_a);
        }
    piv_image_destroy (&pa);
    piv_image_destroy (&pb);
    return 0;
}

// What makes two passes' sums not addable: a message into err, or 0.
static int
s_same_pass (const piv_ensemble_t *self, const piv_ensemble_t *other, char *err, size_t errlen)
{
    if (self->window != other->window || self->overlap != other->overlap
        || self->width != other->width || self->height != other->height) {
        snprintf (err, errlen, "ensemble: cannot merge %d px windows at %d %% over %d x %d px "
                  "with %d px windows at %d %% over %d x %d px", other->window, other->overlap,
                  other->width, other->height, self->window, self->overlap, self->width,
                  self->height);
        return -1;
    }
    if (self->pred_size != other->pred_size
        || (self->pred_size && memcmp (self->pred_bytes, other->pred_bytes, self->pred_size))) {
        snprintf (err, errlen, "ensemble: cannot merge sums made with another predictor");
        return -1;
    }
    if (strcmp (self->text, other->text) != 0) {
        snprintf (err, errlen, "ensemble: cannot merge sums of settings '%s' with '%s'",
                  other->text, self->text);
        return -1;
    }
    return 0;
}

int
piv_ensemble_merge (piv_ensemble_t *self, const piv_ensemble_t *other, char *err, size_t errlen)
{
    if (s_same_pass (self, other, err, errlen) != 0)
        return -1;
    // Added as unsigned: sums decoded from hostile bytes may wrap, never
    // make the addition undefined.
    size_t count = (size_t) self->nx * self->ny * self->stride;
    for (size_t i = 0; i < count; i++)
        self->sums[i] = (int64_t) ((uint64_t) self->sums[i] + (uint64_t) other->sums[i]);
    self->pairs = (int64_t) ((uint64_t) self->pairs + (uint64_t) other->pairs);
    return 0;
}

int
piv_ensemble_encode (const piv_ensemble_t *self, unsigned char **buf_p, size_t *size_p)
{
    size_t text = strlen (self->text);
    size_t count = (size_t) self->nx * self->ny * self->stride;
    size_t size = HEADER + text + self->pred_size + 8 * count;
    unsigned char *buf = malloc (size);
    if (!buf)
        return -1;
    memcpy (buf, MAGIC, 4);
    uint32_t head[10] = {(uint32_t) self->window, (uint32_t) self->overlap,
                         (uint32_t) self->step,   (uint32_t) self->width,
                         (uint32_t) self->height, (uint32_t) self->nx,
                         (uint32_t) self->ny,     (uint32_t) self->radius,
                         (uint32_t) text,         (uint32_t) self->pred_size};
    for (int i = 0; i < 10; i++)
        s_put32 (buf + 4 + 4 * i, head[i]);
    s_put64 (buf + 44, (uint64_t) self->pairs);
    unsigned char *p = buf + HEADER;
    memcpy (p, self->text, text);
    p += text;
    if (self->pred_size)
        memcpy (p, self->pred_bytes, self->pred_size);
    p += self->pred_size;
    for (size_t i = 0; i < count; i++, p += 8)
        s_put64 (p, (uint64_t) self->sums[i]);
    *buf_p = buf;
    *size_p = size;
    return 0;
}

piv_ensemble_t *
piv_ensemble_decode (const void *data, size_t size, char *err, size_t errlen)
{
    const unsigned char *buf = data;
    if (size < HEADER) {
        snprintf (err, errlen, "bad ensemble: truncated: %zu bytes, shorter than the %d-byte "
                  "header", size, HEADER);
        return NULL;
    }
    if (memcmp (buf, MAGIC, 4) != 0) {
        char magic[17] = "";
        for (int i = 0; i < 4; i++) {
            size_t at = strlen (magic);
            snprintf (magic + at, sizeof magic - at,
                      buf[i] >= 32 && buf[i] < 127 && buf[i] != '\'' ? "%c" : "\\x%02x", buf[i]);
        }
        snprintf (err, errlen, "bad ensemble: magic '%s', expected '%s'", magic, MAGIC);
        return NULL;
    }
    uint32_t h[10];
    for (int i = 0; i < 10; i++)
        h[i] = s_get32 (buf + 4 + 4 * i);
    int64_t pairs = (int64_t) s_get64 (buf + 44);
    if (h[0] > PIV_MAX_WINDOW || h[1] > 90 || h[3] > MAX_SIDE || h[4] > MAX_SIDE
        || s_check_pass ((int) h[0], (int) h[1], (int) h[3], (int) h[4], err, errlen) != 0) {
        snprintf (err, errlen, "bad ensemble: a pass of %u px windows at %u %% over %u x %u px",
                  h[0], h[1], h[3], h[4]);
        return NULL;
    }
    int window = (int) h[0], overlap = (int) h[1], width = (int) h[3], height = (int) h[4];
    int nx, ny, x00, y00;
    s_grid (width, height, window, s_step (window, overlap), &nx, &ny, &x00, &y00);
    int predicted = h[9] > 0;
    int radius = s_radius (window, predicted);
    if (h[2] != (uint32_t) s_step (window, overlap) || h[5] != (uint32_t) nx
        || h[6] != (uint32_t) ny || h[7] != (uint32_t) radius) {
        snprintf (err, errlen, "bad ensemble: step %u, grid %u x %u, radius %u do not follow from "
                  "%d px windows at %d %% over %d x %d px (step %d, grid %d x %d, radius %d)",
                  h[2], h[5], h[6], h[7], window, overlap, width, height,
                  s_step (window, overlap), nx, ny, radius);
        return NULL;
    }
    if (h[8] >= SETTINGS_MAX || h[9] > MAX_PREDICTOR) {
        snprintf (err, errlen, "bad ensemble: absurd lengths: settings %u bytes, predictor %u",
                  h[8], h[9]);
        return NULL;
    }
    size_t stride = 1 + (size_t) (2 * radius + 1) * (2 * radius + 1) + AUTO_LAGS;
    size_t count = (size_t) nx * ny * stride;
    size_t need = HEADER + (size_t) h[8] + h[9] + 8 * count;
    if (size != need) {
        snprintf (err, errlen, "bad ensemble: %s: %zu bytes, a pass of %d x %d windows of %d px "
                  "needs %zu", size < need ? "truncated" : "oversized", size, nx, ny, window,
                  need);
        return NULL;
    }
    if (pairs < 0) {
        snprintf (err, errlen, "bad ensemble: %lld pairs", (long long) pairs);
        return NULL;
    }
    char text[SETTINGS_MAX];
    memcpy (text, buf + HEADER, h[8]);
    text[h[8]] = '\0';
    piv_settings_t settings;
    char why[256];
    if (strlen (text) != h[8] || piv_settings_parse (text, &settings, why, sizeof why) != 0) {
        snprintf (err, errlen, "bad ensemble: settings: %s",
                  strlen (text) != h[8] ? "a NUL inside" : why);
        return NULL;
    }
    piv_settings_t normal;
    char again[SETTINGS_MAX];
    if (s_settings_text (&settings, &normal, again, sizeof again) != 0
        || strcmp (again, text) != 0) {
        snprintf (err, errlen, "bad ensemble: settings '%s' are not as a pass writes them", text);
        return NULL;
    }
    piv_field_t *predictor = NULL;
    unsigned char *pred_bytes = NULL;
    if (h[9]) {
        predictor = piv_field_decode (buf + HEADER + h[8], h[9], why, sizeof why);
        if (!predictor) {
            snprintf (err, errlen, "bad ensemble: predictor: %s", why);
            return NULL;
        }
        long nv = (long) predictor->nx * predictor->ny;
        int finite = 1;
        for (long k = 0; k < nv && finite; k++)
            finite = isfinite (predictor->u[k]) && isfinite (predictor->v[k]);
        if (s_check_predictor (predictor, "bad ensemble: ", err, errlen) != 0 || !finite) {
            if (!finite)
                snprintf (err, errlen, "bad ensemble: predictor holds a displacement that is not "
                          "a number");
            piv_field_destroy (&predictor);
            return NULL;
        }
        if (!(pred_bytes = malloc (h[9]))) {
            piv_field_destroy (&predictor);
            snprintf (err, errlen, "ensemble: no memory");
            return NULL;
        }
        memcpy (pred_bytes, buf + HEADER + h[8], h[9]);
    }
    piv_ensemble_t *self = s_make (&normal, text, window, overlap, width, height, predictor,
                                   pred_bytes, h[9]);
    if (!self) {
        snprintf (err, errlen, "ensemble: no memory");
        return NULL;
    }
    self->pairs = pairs;
    const unsigned char *p = buf + HEADER + h[8] + h[9];
    for (size_t i = 0; i < count; i++, p += 8)
        self->sums[i] = (int64_t) s_get64 (p);
    for (size_t k = 0; k < (size_t) nx * ny; k++) {
        int64_t c = self->sums[k * stride];
        if (c < 0 || c > pairs) {
            snprintf (err, errlen, "bad ensemble: window %zu counts %lld pairs of %lld", k,
                      (long long) c, (long long) pairs);
            piv_ensemble_destroy (&self);
            return NULL;
        }
    }
    return self;
}

// ---------------------------------------------------------------------------
// The field of the sums

// The fraction of an n px window that overlaps itself moved by s px: the
// circular correlation's weight at lag s per axis, divided out before any
// fit (as the engine does, Westerweel 1997).
static double
s_weight (int s, int n)
{
    double f = 1 - (double) abs (s) / n;
    return f > 0.5 / n ? f : 0.5 / n;
}

// The least-squares fit of ln C = c00 + c10 x + c01 y + c11 x y + c20 x^2 +
// c02 y^2 over the 3 x 3 values v[j][i] (x = i - 1, y = j - 1; all > 0):
// a 2-D Gaussian exp (-1/2 d^T S^-1 d). Its vertex into (*fx, *fy) and its
// covariance S into s[3] (xx, yy, xy), px^2. 0, or -1 where a value is not
// positive or the paraboloid has no maximum.
static int
s_gauss2d (const double v[3][3], double *fx, double *fy, double s[3])
{
    double L[3][3];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++) {
            if (!(v[j][i] > 0))
                return -1;
            L[j][i] = log (v[j][i]);
        }
    double sx = 0, sy = 0, sxy = 0, sxx = 0, syy = 0;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++) {
            int x = i - 1, y = j - 1;
            sx += x * L[j][i];
            sy += y * L[j][i];
            sxy += x * y * L[j][i];
            sxx += (3 * x * x - 2) * L[j][i];
            syy += (3 * y * y - 2) * L[j][i];
        }
    double c10 = sx / 6, c01 = sy / 6, c11 = sxy / 4, c20 = sxx / 6, c02 = syy / 6;
    // The inverse covariance M = -[[2 c20, c11], [c11, 2 c02]], positive definite.
    double m11 = -2 * c20, m22 = -2 * c02, m12 = -c11;
    double det = m11 * m22 - m12 * m12;
    if (!(m11 > 0) || !(det > 0))
        return -1;
    // Vertex: M d = (c10, c01).
    *fx = (m22 * c10 - m12 * c01) / det;
    *fy = (m11 * c01 - m12 * c10) / det;
    s[0] = m22 / det;
    s[1] = m11 / det;
    s[2] = -m12 / det;
    return 0;
}

// A window's summed planes and what is read from them.
typedef struct {
    float u, v;        // displacement, px
    float ratio;       // peak ratio
    int ok;            // a peak inside the lags kept
    float stress[3];   // u'u', v'v', u'v', px^2 (NaN: not measured)
} s_read_t;

// Window k's reading; plane: scratch of (2 radius + 1)^2 doubles.
static void
s_read (const piv_ensemble_t *self, long k, double *plane, s_read_t *out)
{
    int n = self->window, r = self->radius, side = 2 * r + 1;
    const int64_t *sums = self->sums + k * self->stride;
    const int64_t *cross = sums + 1, *aut = sums + 1 + self->lags;
    out->u = self->pu[k];
    out->v = self->pv[k];
    out->ratio = 0;
    out->ok = 0;
    out->stress[0] = out->stress[1] = out->stress[2] = NAN;
    if (sums[0] == 0)
        return;
    // The plane with the circular correlation's weights divided out.
    int best = 0;
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++) {
            int q = (dy + r) * side + dx + r;
            plane[q] = (double) cross[q] / (s_weight (dx, n) * s_weight (dy, n));
            if (plane[q] > plane[best])
                best = q;
        }
    int bx = best % side, by = best / side;
    double top = plane[best];
    if (!(top > 0) || bx == 0 || by == 0 || bx == side - 1 || by == side - 1)
        return;  // no peak, or at the edge of the lags kept: not measured
    double second = 0;
    for (int q = 0; q < side * side; q++)
        if ((abs (q % side - bx) > 1 || abs (q / side - by) > 1) && plane[q] > second)
            second = plane[q];
    out->ratio = second > top * 1e-3 ? (float) (top / second) : 1000;
    double nb[3][3];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++)
            nb[j][i] = plane[(by + j - 1) * side + bx + i - 1];
    double fx, fy, sc[3];
    int fit = s_gauss2d (nb, &fx, &fy, sc);
    if (self->settings.subpixel != PIV_SUBPIXEL_GAUSS2D || fit != 0 || fabs (fx) > 1
        || fabs (fy) > 1) {
        fx = piv_peak_gauss3 ((float) nb[1][0], (float) nb[1][1], (float) nb[1][2]);
        fy = piv_peak_gauss3 ((float) nb[0][1], (float) nb[1][1], (float) nb[2][1]);
    }
    out->u += (float) (bx - r + fx);
    out->v += (float) (by - r + fy);
    out->ok = 1;
    // The particle images' own width: the windows' autocorrelations, the
    // Gaussian ln a (s) = c - s^T M s / 2 through the lags (1, 0), (0, 1),
    // (1, 1), (1, -1): c = L10 + L01 - (L11 + L1-1) / 2, M11 = 2 (c - L10),
    // M22 = 2 (c - L01), M12 = (L1-1 - L11) / 2; its covariance M^-1.
    double a[AUTO_LAGS];
    for (int q = 0; q < AUTO_LAGS; q++)
        a[q] = (double) aut[q] / (s_weight (s_auto_dx[q], n) * s_weight (s_auto_dy[q], n));
    double sa[3];
    int afit = -1;
    if (a[1] > 0 && a[2] > 0 && a[3] > 0 && a[4] > 0) {
        double L10 = log (a[1]), L01 = log (a[2]), L11 = log (a[3]), L1m = log (a[4]);
        double c = L10 + L01 - (L11 + L1m) / 2;
        double m11 = 2 * (c - L10), m22 = 2 * (c - L01), m12 = (L1m - L11) / 2;
        double det = m11 * m22 - m12 * m12;
        if (m11 > 0 && det > 0) {
            sa[0] = m22 / det, sa[1] = m11 / det, sa[2] = -m12 / det;
            afit = 0;
        }
    }
    if (fit == 0 && afit == 0)
        for (int c = 0; c < 3; c++)
            out->stress[c] = (float) (sc[c] - sa[c]);
}

piv_field_t *
piv_ensemble_field (const piv_ensemble_t *self, float **stress_p, char *err, size_t errlen)
{
    if (stress_p)
        *stress_p = NULL;
    if (self->pairs == 0) {
        snprintf (err, errlen, "ensemble: no pair counted");
        return NULL;
    }
    long n = (long) self->nx * self->ny;
    piv_field_t *f = piv_field_new (self->nx, self->ny);
    float *stress = stress_p ? malloc (3 * (size_t) n * sizeof *stress) : NULL;
    double *plane = malloc ((size_t) self->lags * sizeof *plane);
    if (!f || (stress_p && !stress) || !plane) {
        piv_field_destroy (&f);
        free (stress);
        free (plane);
        snprintf (err, errlen, "ensemble: no memory");
        return NULL;
    }
    f->window = self->window;
    f->step = self->step;
    f->runs = 1;
    for (int j = 0; j < self->ny; j++)
        for (int i = 0; i < self->nx; i++) {
            long k = (long) j * self->nx + i;
            f->x[k] = self->x00 + i * self->step + (self->window - 1) * 0.5f;
            f->y[k] = self->y00 + j * self->step + (self->window - 1) * 0.5f;
            s_read_t rd;
            s_read (self, k, plane, &rd);
            f->u[k] = rd.u;
            f->v[k] = rd.v;
            f->peak_ratio[k] = rd.ratio;
            f->flags[k] = rd.ok ? PIV_FLAG_VALID : PIV_FLAG_INVALID;
            if (stress)
                for (int c = 0; c < 3; c++)
                    stress[c * n + k] = rd.ok ? rd.stress[c] : NAN;
        }
    free (plane);
    // The normalized median test on a copy: what it rejects is flagged
    // INVALID here, its value kept (a mean, not a guess).
    piv_field_t *test = piv_field_dup (f);
    if (!test) {
        piv_field_destroy (&f);
        free (stress);
        snprintf (err, errlen, "ensemble: no memory");
        return NULL;
    }
    piv_validate_median (test, self->settings.median_eps, self->settings.median_threshold);
    for (long k = 0; k < n; k++)
        if (f->flags[k] == PIV_FLAG_VALID && test->flags[k] != PIV_FLAG_VALID) {
            f->flags[k] = PIV_FLAG_INVALID;
            if (stress)
                for (int c = 0; c < 3; c++)
                    stress[c * n + k] = NAN;
        }
    piv_field_destroy (&test);
    if (stress_p)
        *stress_p = stress;
    return f;
}

// ---------------------------------------------------------------------------
// A run offline, and its text

// One thread's share of a pass of piv_ensemble_run: pairs t, t + T, ...
typedef struct {
    piv_ensemble_t *e;           // its own sums
    long first, stride, npairs;  // its pairs
    piv_ensemble_pair_fn *pair;  // their loader
    void *arg;                   // its argument
    int rc;                      // 0, or -1 with err
    char err[512];               // why it stopped
} s_share_t;

static void *
s_share (void *arg)
{
    s_share_t *sh = arg;
    for (long i = sh->first; i < sh->npairs && sh->rc == 0; i += sh->stride) {
        piv_image_t *a = NULL, *b = NULL;
        sh->rc = sh->pair (sh->arg, i, &a, &b, sh->err, sizeof sh->err);
        if (sh->rc == 0)
            sh->rc = piv_ensemble_add (sh->e, a, b, sh->err, sizeof sh->err);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    return NULL;
}

// One pass over the pairs on 'threads' threads (one object each, merged
// in their order: integer sums, the same bytes for any number). 0, or -1
// with err.
static int
s_run_pass (piv_ensemble_t *e, int threads, long npairs, piv_ensemble_pair_fn *pair, void *arg,
            const piv_field_t *predictor, char *err, size_t errlen)
{
    s_share_t shares[PIV_MAX_THREADS];
    pthread_t ids[PIV_MAX_THREADS];
    int made = 0, rc = 0;
    memset (shares, 0, sizeof shares);
    piv_ensemble_info_t info;
    piv_ensemble_info (e, &info);
    for (int t = 0; t < threads; t++) {
        s_share_t *sh = &shares[t];
        *sh = (s_share_t) {e, t, threads, npairs, pair, arg, 0, ""};
        if (t > 0) {
            sh->e = piv_ensemble_new (&e->settings, info.window, e->overlap, info.width,
                                      info.height, predictor, err, errlen);
            if (!sh->e) {
                rc = -1;
                break;
            }
            if (pthread_create (&ids[t], NULL, s_share, sh) != 0) {
                piv_ensemble_destroy (&sh->e);
                snprintf (err, errlen, "ensemble: cannot start a thread");
                rc = -1;
                break;
            }
        }
        made = t + 1;
    }
    if (rc == 0)
        s_share (&shares[0]);
    for (int t = 1; t < made; t++)
        pthread_join (ids[t], NULL);
    for (int t = 0; t < made; t++) {
        if (rc == 0 && shares[t].rc != 0) {
            snprintf (err, errlen, "%s", shares[t].err);
            rc = -1;
        }
        if (t > 0) {
            if (rc == 0 && piv_ensemble_merge (e, shares[t].e, err, errlen) != 0)
                rc = -1;
            piv_ensemble_destroy (&shares[t].e);
        }
    }
    return rc;
}

piv_field_t *
piv_ensemble_run (const piv_settings_t *settings, int window, int overlap, int width, int height,
                  long npairs, piv_ensemble_pair_fn *pair, void *arg, float **stress_p, char *err,
                  size_t errlen)
{
    if (stress_p)
        *stress_p = NULL;
    int windows[PIV_MAX_PASSES];
    int passes = piv_ensemble_passes (window, windows, PIV_MAX_PASSES);
    if (passes < 0) {
        snprintf (err, errlen, "ensemble: window %d px: expected an even size from 4 to %d",
                  window, PIV_MAX_WINDOW);
        return NULL;
    }
    int threads = settings->threads < 1 ? 1 : settings->threads;
    threads = threads > PIV_MAX_THREADS ? PIV_MAX_THREADS : threads;
    threads = npairs < threads ? (int) (npairs > 0 ? npairs : 1) : threads;
    piv_field_t *field = NULL;
    for (int p = 0; p < passes; p++) {
        piv_ensemble_t *e = piv_ensemble_new (settings, windows[p], overlap, width, height, field,
                                              err, errlen);
        int rc = e ? s_run_pass (e, threads, npairs, pair, arg, field, err, errlen) : -1;
        piv_field_destroy (&field);
        if (rc == 0)
            field = piv_ensemble_field (e, p == passes - 1 ? stress_p : NULL, err, errlen);
        piv_ensemble_destroy (&e);
        if (!field)
            return NULL;
    }
    return field;
}

void
piv_ensemble_stress_factors (const piv_calib_t *calib, double k[3])
{
    k[0] = k[1] = k[2] = 1;
    if (!calib || !calib->set)
        return;
    // A stress is a displacement squared: speed^2, u'v' with v's sign.
    double s1 = piv_calib_speed (calib, 1.0), su, sv;
    piv_calib_velocity (calib, 1.0, 1.0, &su, &sv);
    k[0] = k[1] = s1 * s1;
    k[2] = su * sv;
}

const char *
piv_ensemble_stress_unit (const piv_calib_t *calib)
{
    return calib && calib->set ? "m^2/s^2" : "px^2/frame^2";
}

int
piv_ensemble_write (const piv_field_t *field, const float *stress, const piv_calib_t *calib,
                    FILE *out, const char *header)
{
    piv_calib_t none;
    piv_calib_init (&none);
    const piv_calib_t *c = calib && calib->set ? calib : &none;
    double k[3];
    piv_ensemble_stress_factors (c, k);
    piv_write_header_lines (out, header, "# ");
    fprintf (out, "# x y u v flags peak_ratio uu vv uv\n");
    long n = (long) field->nx * field->ny;
    for (long i = 0; i < n; i++) {
        double x, y, u, v;
        piv_calib_position (c, field->x[i], field->y[i], &x, &y);
        piv_calib_velocity (c, field->u[i], field->v[i], &u, &v);
        fprintf (out, "%.7g %.7g %.7g %.7g %d %.7g", x, y, u, v, field->flags[i],
                 field->peak_ratio[i]);
        for (int q = 0; q < 3; q++)
            fprintf (out, " %.7g", stress ? stress[q * n + i] * k[q] : NAN);
        fputc ('\n', out);
    }
    return ferror (out) ? -1 : 0;
}
