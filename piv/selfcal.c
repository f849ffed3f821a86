// selfcal.c — stereo self-calibration: the disparity map between the two
// cameras' dewarped frames (FFT cross-correlation summed over instants:
// an ensemble, robust where one instant has few particles), each window's
// disparity triangulated by the cameras' lines of sight, and a plane fitted
// to the points (GSL's robust bisquare fit) as the rig's light sheet.

#include "piv/selfcal.h"
#include "piv/camera_internal.h"
#include "piv/smooth.h"
#include "piv/stereo.h"

#include <fftw3.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void
piv_selfcal_settings_init (piv_selfcal_settings_t *s)
{
    // 64 px windows hold enough particles at 0.05 a pixel (~200) for one
    // instant's peak, and a disparity of up to ~16 px (a sheet 1-2 mm off at
    // 10 px/mm and +-35 degrees) loses less than a quarter of them.
    s->window = 64;
    s->step = 32;
    s->iterations = 3;
    s->min_ratio = 1.5;
}

// One window of the disparity map.
typedef struct {
    int q0, r0;                 // its top-left grid pixel
    int seen;                   // both cameras see all of it
    fftwf_complex *cross;       // the cross spectrum summed over instants
    double dc, dr;              // disparity, px (camera 2 minus camera 1)
    double ratio;               // the peak over the second highest (0: no peak)
    double x, y, z;             // mm: the triangulated point
    int ok;                     // a clear peak and a triangulated point
} s_win_t;

// The run's work: transforms and buffers of one window size.
typedef struct {
    int n;                      // window size
    int nc;                     // complex columns of a half spectrum: n / 2 + 1
    float *in;                  // n x n real
    float *sum;                 // n x n: the windows' correlations about their peaks
    fftwf_complex *spec[2];     // each camera's window's spectrum
    fftwf_plan forward;         // in -> spec[0] (new-array execute for spec[1])
    fftwf_plan inverse;         // spec[0] -> in
} s_fft_t;

static void
s_fft_release (s_fft_t *f)
{
    piv_fftw_planner_lock ();
    if (f->forward)
        fftwf_destroy_plan (f->forward);
    if (f->inverse)
        fftwf_destroy_plan (f->inverse);
    piv_fftw_planner_unlock ();
    fftwf_free (f->in);
    free (f->sum);
    fftwf_free (f->spec[0]);
    fftwf_free (f->spec[1]);
    memset (f, 0, sizeof *f);
}

static int
s_fft_init (s_fft_t *f, int n)
{
    memset (f, 0, sizeof *f);
    f->n = n;
    f->nc = n / 2 + 1;
    f->in = fftwf_malloc (sizeof (float) * n * n);
    f->sum = malloc (sizeof (float) * n * n);
    f->spec[0] = fftwf_malloc (sizeof (fftwf_complex) * n * f->nc);
    f->spec[1] = fftwf_malloc (sizeof (fftwf_complex) * n * f->nc);
    if (!f->in || !f->sum || !f->spec[0] || !f->spec[1])
        return -1;
    // FFTW_ESTIMATE: a few thousand transforms a run, not worth measuring.
    piv_fftw_planner_lock ();
    f->forward = fftwf_plan_dft_r2c_2d (n, n, f->in, f->spec[0], FFTW_ESTIMATE);
    f->inverse = fftwf_plan_dft_c2r_2d (n, n, f->spec[0], f->in, FFTW_ESTIMATE);
    piv_fftw_planner_unlock ();
    return f->forward && f->inverse ? 0 : -1;
}

// The sheet's Z at (x, y).
static double
s_z (const piv_sheet_t *s, double x, double y)
{
    return s->z0 + s->dzdx * x + s->dzdy * y;
}

// Grid pixel (q, r) to the world on the sheet.
static void
s_world (const piv_stereo_grid_t *g, const piv_sheet_t *s, double q, double r, double p[3])
{
    p[0] = g->x0 + q * g->step;
    p[1] = g->y0 - r * g->step;
    p[2] = s_z (s, p[0], p[1]);
}

// Whether camera c images world p inside its w x h frame.
static int
s_inside (const piv_camera_t *c, const double p[3], int w, int h)
{
    double col, row;
    return piv_camera_project (c, p[0], p[1], p[2], &col, &row) == 0 && col >= 0 &&
           col <= w - 1 && row >= 0 && row <= h - 1;
}

// Window k's pixels of a dewarped frame, less their mean, into f->in, and
// its spectrum into spec. -1 when the window is flat (no particle).
static int
s_window_spectrum (s_fft_t *f, const float *img, int gw, const s_win_t *win, fftwf_complex *spec)
{
    int n = f->n;
    double sum = 0;
    for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++)
            sum += img[(long) (win->r0 + r) * gw + win->q0 + q];
    float mean = (float) (sum / ((double) n * n)), energy = 0;
    for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++) {
            float v = img[(long) (win->r0 + r) * gw + win->q0 + q] - mean;
            f->in[r * n + q] = v;
            energy += v * v;
        }
    if (!(energy > 0))
        return -1;
    fftwf_execute_dft_r2c (f->forward, f->in, spec);
    return 0;
}

// The value of the n x n circular correlation at shift (i, j), wrapped.
static float
s_at (const float *c, int n, int i, int j)
{
    i = (i % n + n) % n;
    j = (j % n + n) % n;
    return c[j * n + i];
}

// Sub-pixel offset of a peak from its neighbours: Gaussian three-point fit,
// parabolic where a value is not positive.
static double
s_subpixel (float m, float c, float p)
{
    if (m > 0 && c > 0 && p > 0) {
        double lm = log (m), lc = log (c), lp = log (p), d = 2 * (lm - 2 * lc + lp);
        if (d < 0)
            return (lm - lp) / d;
    }
    double d = 2.0 * (m - 2.0 * c + p);
    return d < 0 ? (m - p) / d : 0;
}

enum { MAX_SPAN = 8 };  // px: the widest peak fitted, each side
// A peak's span ends where the windows' summed correlation falls below this
// share of its height: ~1.8 sigma of a Gaussian peak, the width a fit needs
// to find a broad peak's centre (on the synthetic sheet, 0.5 (the half
// width) left 0.20 px of disparity, 0.2 0.13 px, 0.1 0.15 px).
#define SPAN_HEIGHT 0.2f

// The sub-pixel offset of the peak at (i, j) along (di, dj): the Gaussian
// three-point fit for a sharp peak (span 1), else a parabola fitted by
// least squares to the log of the correlation over span px each side
// (values not positive left out). Two cameras' views of a sheet of some
// thickness spread the peak along the disparity's direction (each depth
// its own disparity): three points on a broad, noisy ridge miss its centre
// by several times what a fit over its width does.
static double
s_fit_peak (const float *c, int n, int i, int j, int di, int dj, int span)
{
    float peak = s_at (c, n, i, j);
    if (span <= 1)
        return s_subpixel (s_at (c, n, i - di, j - dj), peak, s_at (c, n, i + di, j + dj));
    double m[3][4] = {{0}};  // normal equations of l = a + b x + c x^2, then their right side
    for (int d = -span; d <= span; d++) {
        double v = s_at (c, n, i + d * di, j + d * dj);
        if (!(v > 0))
            continue;
        double pw[5] = {1, d, (double) d * d, (double) d * d * d, (double) d * d * d * d};
        for (int r = 0; r < 3; r++) {
            for (int q = 0; q < 3; q++)
                m[r][q] += pw[r + q];
            m[r][3] += log (v) * pw[r];
        }
    }
    for (int r = 0; r < 3; r++)  // Gaussian elimination: the system is 3 x 3
        for (int q = r + 1; q < 3; q++) {
            double f = m[r][r] != 0 ? m[q][r] / m[r][r] : 0;
            for (int k = r; k < 4; k++)
                m[q][k] -= f * m[r][k];
        }
    if (m[2][2] == 0 || m[1][1] == 0)
        return 0;
    double c2 = m[2][3] / m[2][2], c1 = (m[1][3] - m[1][2] * c2) / m[1][1];
    double off = c2 < 0 ? -c1 / (2 * c2) : 0;
    return fabs (off) < span ? off : 0;  // beyond its span the fit is not the peak's
}

// Window win's correlation (the inverse of its summed cross spectrum) into
// f->in, and its highest value's shift (*bi, *bj) within the shifts
// searched, 2 px inside half the window (a peak beyond is a wrap).
static float
s_correlation (s_fft_t *f, const s_win_t *win, int *bi, int *bj)
{
    int n = f->n, half = n / 2 - 2;
    memcpy (f->spec[0], win->cross, sizeof (fftwf_complex) * n * f->nc);
    fftwf_execute_dft_c2r (f->inverse, f->spec[0], f->in);
    float best = -INFINITY;
    *bi = *bj = 0;
    for (int j = -half; j <= half; j++)
        for (int i = -half; i <= half; i++) {
            float v = s_at (f->in, n, i, j);
            if (v > best) {
                best = v;
                *bi = i;
                *bj = j;
            }
        }
    return best;
}

// The disparity and peak ratio of window win, its peak fitted over
// span[0] px along the columns, span[1] along the rows.
static void
s_peak (s_fft_t *f, s_win_t *win, const int span[2])
{
    int n = f->n, half = n / 2 - 2, bi, bj;
    float best = s_correlation (f, win, &bi, &bj);
    const float *c = f->in;
    win->ratio = 0;
    if (!(best > 0))
        return;
    // The second peak: the highest local maximum off the first's span.
    float second = 0;
    int ei = span[0] > 2 ? span[0] : 2, ej = span[1] > 2 ? span[1] : 2;
    for (int j = -half; j <= half; j++)
        for (int i = -half; i <= half; i++) {
            if (abs (i - bi) <= ei && abs (j - bj) <= ej)
                continue;
            float v = s_at (c, n, i, j);
            if (v <= second)
                continue;
            int local = 1;
            for (int dj = -1; dj <= 1 && local; dj++)
                for (int di = -1; di <= 1 && local; di++)
                    local = (di == 0 && dj == 0) || s_at (c, n, i + di, j + dj) <= v;
            if (local)
                second = v;
        }
    win->ratio = second > 0 ? best / second : INFINITY;
    win->dc = bi + s_fit_peak (c, n, bi, bj, 1, 0, span[0]);
    win->dr = bj + s_fit_peak (c, n, bi, bj, 0, 1, span[1]);
}

// The peak's span along each axis, the same for all windows of a map: the
// half width at SPAN_HEIGHT of all seen windows' correlations added up
// about their peaks (one window's own is too noisy to judge by). 1 (the
// three-point fit) for a peak as sharp as the particles'.
static void
s_spans (s_fft_t *f, const s_win_t *wins, int nwin, float *sum, int span[2])
{
    int n = f->n, bi, bj;
    memset (sum, 0, sizeof (float) * n * n);
    for (int k = 0; k < nwin; k++) {
        if (!wins[k].seen || !(s_correlation (f, &wins[k], &bi, &bj) > 0))
            continue;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < n; i++)
                sum[j * n + i] += s_at (f->in, n, bi + i - n / 2, bj + j - n / 2);
    }
    const float *centre = sum + (n / 2) * n + n / 2;
    int most = n / 2 - 1 < MAX_SPAN ? n / 2 - 1 : MAX_SPAN;
    for (int axis = 0; axis < 2; axis++) {
        long d = axis == 0 ? 1 : n;
        int s = 0;
        while (s < most && centre[(s + 1) * d] >= SPAN_HEIGHT * centre[0] &&
               centre[-(s + 1) * d] >= SPAN_HEIGHT * centre[0])
            s++;
        span[axis] = s > 1 ? s : 1;
    }
}

// Camera c's line of sight through world p: p and a second point, the
// same image point 1 mm further along Z. -1 where there is none.
static int
s_ray (const piv_camera_t *c, const double p[3], double dir[3])
{
    double col, row, x, y;
    if (piv_camera_project (c, p[0], p[1], p[2], &col, &row) != 0 ||
        piv_camera_unproject (c, col, row, p[2] + 1, &x, &y) != 0)
        return -1;
    dir[0] = x - p[0];
    dir[1] = y - p[1];
    dir[2] = 1;
    return 0;
}

// The point nearest both lines of sight of window win's disparity: camera
// 1 saw its particles at the window's centre less half the disparity,
// camera 2 at the centre plus half (grid px on the sheet).
static int
s_triangulate (const piv_camera_t *c1, const piv_camera_t *c2, const piv_stereo_grid_t *g,
               const piv_sheet_t *sheet, int n, s_win_t *win)
{
    double qc = win->q0 + (n - 1) / 2.0, rc = win->r0 + (n - 1) / 2.0;
    double p1[3], p2[3], d1[3], d2[3];
    s_world (g, sheet, qc - win->dc / 2, rc - win->dr / 2, p1);
    s_world (g, sheet, qc + win->dc / 2, rc + win->dr / 2, p2);
    if (s_ray (c1, p1, d1) || s_ray (c2, p2, d2))
        return -1;
    double w0[3] = {p1[0] - p2[0], p1[1] - p2[1], p1[2] - p2[2]};
    double a = 0, b = 0, c = 0, d = 0, e = 0;
    for (int i = 0; i < 3; i++) {
        a += d1[i] * d1[i];
        b += d1[i] * d2[i];
        c += d2[i] * d2[i];
        d += d1[i] * w0[i];
        e += d2[i] * w0[i];
    }
    double den = a * c - b * b;
    if (!(fabs (den) > 1e-12 * a * c))
        return -1;  // parallel lines of sight: no depth
    double t1 = (b * e - c * d) / den, t2 = (a * e - b * d) / den;
    win->x = (p1[0] + t1 * d1[0] + p2[0] + t2 * d2[0]) / 2;
    win->y = (p1[1] + t1 * d1[1] + p2[1] + t2 * d2[1]) / 2;
    win->z = (p1[2] + t1 * d1[2] + p2[2] + t2 * d2[2]) / 2;
    return 0;
}

static int
s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// The median length of the m windows' disparities that have a clear peak
// (NAN with no memory).
static double
s_median_length (const s_win_t *wins, int nwin, int m)
{
    double *len = malloc ((size_t) m * sizeof *len);
    if (!len)
        return NAN;
    int i = 0;
    for (int k = 0; k < nwin; k++)
        if (wins[k].ok)
            len[i++] = hypot (wins[k].dc, wins[k].dr);
    qsort (len, (size_t) m, sizeof *len, s_cmp_double);
    double med = m % 2 ? len[m / 2] : (len[m / 2 - 1] + len[m / 2]) / 2;
    free (len);
    return med;
}

// The disparity map on the rig's current sheet: each window's summed
// correlation, peak and triangulated point, and the map's figures.
static int
s_measure (const piv_cameras_t *rig, const piv_stereo_grid_t *g, const piv_selfcal_settings_t *s,
           const piv_image_t *const *frames, int nframes, s_fft_t *f, s_win_t *wins, int nwin,
           piv_selfcal_map_t *map, char *err, size_t errlen)
{
    const piv_camera_t *c1 = piv_cameras_get (rig, 0), *c2 = piv_cameras_get (rig, 1);
    int w = piv_image_width (frames[0]), h = piv_image_height (frames[0]), n = s->window;
    memset (map, 0, sizeof *map);
    piv_cameras_sheet (rig, &map->sheet);
    for (int k = 0; k < nwin; k++) {
        s_win_t *win = &wins[k];
        double p[3];
        win->seen = 1;
        for (int corner = 0; corner < 4 && win->seen; corner++) {
            s_world (g, &map->sheet, win->q0 + (corner & 1) * (n - 1),
                     win->r0 + (corner >> 1) * (n - 1), p);
            win->seen = s_inside (c1, p, w, h) && s_inside (c2, p, w, h);
        }
        win->ok = 0;
        win->ratio = 0;
        memset (win->cross, 0, sizeof (fftwf_complex) * n * f->nc);
        map->windows += win->seen;
    }
    piv_settings_t ps;
    piv_settings_init (&ps);
    piv_stereo_t *st = piv_stereo_new (rig, &ps, w, h, g, err, errlen);
    piv_image_t *dw[2] = {piv_image_new (g->width, g->height), piv_image_new (g->width, g->height)};
    int rc = -1;
    if (!st || !dw[0] || !dw[1]) {
        if (st)
            cam_seterr (err, errlen, "self-calibration: out of memory");
        goto done;
    }
    for (int i = 0; i < nframes; i++) {
        for (int c = 0; c < 2; c++)
            if (piv_stereo_dewarp (st, c, frames[2 * i + c], dw[c], err, errlen))
                goto done;
        const float *d0 = piv_image_cdata (dw[0]), *d1 = piv_image_cdata (dw[1]);
        for (int k = 0; k < nwin; k++) {
            s_win_t *win = &wins[k];
            if (!win->seen || s_window_spectrum (f, d0, g->width, win, f->spec[0]) ||
                s_window_spectrum (f, d1, g->width, win, f->spec[1]))
                continue;
            // conj (A) B: the correlation's peak is at camera 2's shift.
            for (int m = 0; m < n * f->nc; m++) {
                float ar = f->spec[0][m][0], ai = f->spec[0][m][1];
                float br = f->spec[1][m][0], bi = f->spec[1][m][1];
                win->cross[m][0] += ar * br + ai * bi;
                win->cross[m][1] += ar * bi - ai * br;
            }
        }
    }
    s_spans (f, wins, nwin, f->sum, map->span);
    double ss = 0, sc = 0, sr = 0;
    for (int k = 0; k < nwin; k++) {
        s_win_t *win = &wins[k];
        if (!win->seen)
            continue;
        s_peak (f, win, map->span);
        if (!(win->ratio >= s->min_ratio) ||
            s_triangulate (c1, c2, g, &map->sheet, n, win) != 0)
            continue;
        win->ok = 1;
        double len2 = win->dc * win->dc + win->dr * win->dr;
        ss += len2;
        sc += win->dc;
        sr += win->dr;
        map->max = fmax (map->max, sqrt (len2));
        map->used++;
    }
    if (map->used > 0) {
        map->median = s_median_length (wins, nwin, map->used);
        map->rms = sqrt (ss / map->used);
        map->mean_col = sc / map->used;
        map->mean_row = sr / map->used;
    }
    rc = 0;
done:
    piv_image_destroy (&dw[0]);
    piv_image_destroy (&dw[1]);
    piv_stereo_destroy (&st);
    return rc;
}

enum { MIN_WINDOWS = 6 };  // windows with a clear peak a plane needs

// The plane Z = z0 + a X + b Y through the windows' points: GSL's robust
// (bisquare) fit, X and Y taken about their means for conditioning. The
// windows the fit gave no weight are outliers. 0, or -1 with err.
static int
s_fit (s_win_t *wins, int nwin, piv_sheet_t *sheet, int *fitted, double *fit_rms, char *err,
       size_t errlen)
{
    int m = 0;
    double xm = 0, ym = 0;
    for (int k = 0; k < nwin; k++)
        if (wins[k].ok) {
            xm += wins[k].x;
            ym += wins[k].y;
            m++;
        }
    if (m < MIN_WINDOWS) {
        cam_seterr (err, errlen,
                    "self-calibration: %d windows with a clear disparity peak, at least %d "
                    "are needed (more pairs give clearer peaks, a smaller step more windows)",
                    m, MIN_WINDOWS);
        return -1;
    }
    xm /= m;
    ym /= m;
    gsl_matrix *X = gsl_matrix_alloc ((size_t) m, 3);
    gsl_vector *z = gsl_vector_alloc ((size_t) m), *c = gsl_vector_alloc (3);
    gsl_matrix *cov = gsl_matrix_alloc (3, 3);
    gsl_multifit_robust_workspace *ws =
        gsl_multifit_robust_alloc (gsl_multifit_robust_bisquare, (size_t) m, 3);
    int rc = -1;
    if (!X || !z || !c || !cov || !ws) {
        cam_seterr (err, errlen, "self-calibration: out of memory");
        goto done;
    }
    for (int k = 0, i = 0; k < nwin; k++)
        if (wins[k].ok) {
            gsl_matrix_set (X, (size_t) i, 0, 1);
            gsl_matrix_set (X, (size_t) i, 1, wins[k].x - xm);
            gsl_matrix_set (X, (size_t) i, 2, wins[k].y - ym);
            gsl_vector_set (z, (size_t) i, wins[k].z);
            i++;
        }
    // GSL_EMAXITER still leaves its best estimate: a usable plane.
    gsl_error_handler_t *old = gsl_set_error_handler_off ();
    int status = gsl_multifit_robust (X, z, c, cov, ws);
    gsl_set_error_handler (old);
    if (status != GSL_SUCCESS && status != GSL_EMAXITER) {
        cam_seterr (err, errlen, "self-calibration: the plane's fit failed: %s",
                    gsl_strerror (status));
        goto done;
    }
    gsl_multifit_robust_stats st = gsl_multifit_robust_statistics (ws);
    double a = gsl_vector_get (c, 1), b = gsl_vector_get (c, 2);
    sheet->dzdx = a;
    sheet->dzdy = b;
    sheet->z0 = gsl_vector_get (c, 0) - a * xm - b * ym;
    double ss = 0;
    *fitted = 0;
    for (int i = 0; i < m; i++)
        if (gsl_vector_get (st.weights, (size_t) i) > 0) {
            double r = gsl_vector_get (st.r, (size_t) i);
            ss += r * r;
            ++*fitted;
        }
    *fit_rms = *fitted ? sqrt (ss / *fitted) : NAN;
    rc = 0;
done:
    gsl_multifit_robust_free (ws);
    gsl_matrix_free (cov);
    gsl_vector_free (c);
    gsl_vector_free (z);
    gsl_matrix_free (X);
    return rc;
}

int
piv_selfcal_run (piv_cameras_t *rig, const piv_selfcal_settings_t *settings,
                 const piv_image_t *const *frames, int n, piv_selfcal_report_t *report, char *err,
                 size_t errlen)
{
    const piv_selfcal_settings_t *s = settings;
    memset (report, 0, sizeof *report);
    if (s->window < 8 || s->window > 256 || s->window % 2 || s->step < 1 ||
        s->iterations < 1 || s->iterations >= PIV_SELFCAL_MAX_PASSES) {
        cam_seterr (err, errlen,
                    "self-calibration: bad settings (window %d: even, 8 to 256; step %d: 1 or "
                    "more; iterations %d: 1 to %d)",
                    s->window, s->step, s->iterations, PIV_SELFCAL_MAX_PASSES - 1);
        return -1;
    }
    if (n < 1) {
        cam_seterr (err, errlen, "self-calibration: no frames");
        return -1;
    }
    int w = piv_image_width (frames[0]), h = piv_image_height (frames[0]);
    piv_sheet_t given;
    piv_cameras_sheet (rig, &given);
    piv_stereo_grid_t *g = &report->grid;
    if (piv_stereo_rig_grid (rig, w, h, g, err, errlen))
        return -1;
    int nq = g->width >= s->window ? (g->width - s->window) / s->step + 1 : 0;
    int nr = g->height >= s->window ? (g->height - s->window) / s->step + 1 : 0;
    if (nq * nr == 0) {
        cam_seterr (err, errlen, "self-calibration: the grid (%dx%d px) is smaller than a window "
                    "(%d px)", g->width, g->height, s->window);
        return -1;
    }
    int nwin = nq * nr, rc = -1;
    s_fft_t f;
    s_win_t *wins = calloc ((size_t) nwin, sizeof *wins);
    int fft_ok = s_fft_init (&f, s->window) == 0;
    if (!wins || !fft_ok)
        goto oom;
    for (int k = 0; k < nwin; k++) {
        wins[k].q0 = (k % nq) * s->step;
        wins[k].r0 = (k / nq) * s->step;
        if (!(wins[k].cross = fftwf_malloc (sizeof (fftwf_complex) * s->window * f.nc)))
            goto oom;
    }
    if (s_measure (rig, g, s, frames, n, &f, wins, nwin, &report->map[0], err, errlen))
        goto done;
    report->maps = 1;
    for (int it = 0; it < s->iterations; it++) {
        piv_sheet_t next;
        if (s_fit (wins, nwin, &next, &report->fitted, &report->fit_rms, err, errlen))
            goto done;
        if (piv_cameras_set_sheet (rig, &next)) {
            cam_seterr (err, errlen,
                        "self-calibration: the plane found (Z = %g + %g X + %g Y mm) is steeper "
                        "than 45 degrees: the disparity map is not the sheet's",
                        next.z0, next.dzdx, next.dzdy);
            goto done;
        }
        piv_selfcal_map_t *map = &report->map[report->maps];
        if (s_measure (rig, g, s, frames, n, &f, wins, nwin, map, err, errlen))
            goto done;
        report->maps++;
        const piv_selfcal_map_t *prev = &report->map[report->maps - 2];
        if (map->used >= MIN_WINDOWS && map->rms < report->map[report->best].rms)
            report->best = report->maps - 1;
        // Stopped falling: less than a tenth off the last map's.
        if (!(map->rms < 0.9 * prev->rms))
            break;
    }
    piv_cameras_set_sheet (rig, &report->map[report->best].sheet);
    rc = 0;
    goto done;
oom:
    cam_seterr (err, errlen, "self-calibration: out of memory");
done:
    if (rc)
        piv_cameras_set_sheet (rig, &given);
    for (int k = 0; wins && k < nwin; k++)
        fftwf_free (wins[k].cross);
    free (wins);
    s_fft_release (&f);
    return rc;
}
