// camera.c — the two camera models of camera.h, their fits by GSL (SVD
// least squares for the Soloff polynomial and the DLT; Levenberg-Marquardt
// for the pinhole's distortion), their held-out check and their inversion.

#include "piv/camera.h"
#include "piv/camera_internal.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCOEF_MAX (2 * PIV_SOLOFF_TERMS)
#define NPINHOLE (PIV_PINHOLE_P + PIV_PINHOLE_K)

struct _piv_camera_t {
    piv_camera_info_t info;     // id, model, figures of the fit
    double c[NCOEF_MAX];        // coefficients, in piv_camera_coefs' order
    size_t nc;                  // how many of c the model has
};

void
cam_seterr (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
}

const char *
cam_strerror (int errnum, char *buf, size_t len)
{
    return strerror_r (errnum, buf, len);
}

const char *
piv_camera_model_name (piv_camera_model_t model)
{
    return model == PIV_CAMERA_PINHOLE ? "pinhole" : "soloff";
}

int
piv_camera_model_parse (const char *name, piv_camera_model_t *model)
{
    if (strcmp (name, "soloff") == 0)
        *model = PIV_CAMERA_SOLOFF;
    else if (strcmp (name, "pinhole") == 0)
        *model = PIV_CAMERA_PINHOLE;
    else
        return -1;
    return 0;
}

static size_t
s_ncoefs (piv_camera_model_t model)
{
    return model == PIV_CAMERA_PINHOLE ? NPINHOLE : NCOEF_MAX;
}

// ------------------------------------------------------------ Soloff

// The 19 terms at (x, y, z) and, if t_x is not NULL, their derivatives.
static void
s_soloff_terms (double x, double y, double z, double *t, double *t_x, double *t_y, double *t_z)
{
    double v[PIV_SOLOFF_TERMS] = {1,         x,         y,         z,         x * x,
                                  x * y,     y * y,     x * z,     y * z,     z * z,
                                  x * x * x, x * x * y, x * y * y, y * y * y, x * x * z,
                                  x * y * z, y * y * z, x * z * z, y * z * z};
    memcpy (t, v, sizeof v);
    if (!t_x)
        return;
    double dx[PIV_SOLOFF_TERMS] = {0,         1, 0,     0,         2 * x,     y,     0,
                                   z,         0, 0,     3 * x * x, 2 * x * y, y * y, 0,
                                   2 * x * z, y * z, 0, z * z,     0};
    double dy[PIV_SOLOFF_TERMS] = {0,         0,         1,         0, 0,     x,         2 * y,
                                   0,         z,         0,         0, x * x, 2 * x * y, 3 * y * y,
                                   0,         x * z,     2 * y * z, 0, z * z};
    double dz[PIV_SOLOFF_TERMS] = {0, 0,     0,     1,         0,         0,         0,
                                   x, y,     2 * z, 0,         0,         0,         0,
                                   x * x, x * y, y * y, 2 * x * z, 2 * y * z};
    memcpy (t_x, dx, sizeof dx);
    memcpy (t_y, dy, sizeof dy);
    memcpy (t_z, dz, sizeof dz);
}

static double
s_dot (const double *a, const double *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

// ------------------------------------------------------------ pinhole

// The intrinsic matrix of P's left 3x3 block M = K R (an RQ decomposition
// by Gram-Schmidt on M's rows from the last), scaled to K[2][2] = 1: the
// focal lengths fx, fy, the skew s and the principal point cx, cy, which
// the radial distortion needs to work in normalised camera coordinates.
static int
s_intrinsics (const double *p, double *fx, double *fy, double *s, double *cx, double *cy)
{
    const double *m1 = p, *m2 = p + 4, *m3 = p + 8;
    double n3 = sqrt (s_dot (m3, m3, 3));
    if (!(n3 > 0))
        return -1;
    double r3[3] = {m3[0] / n3, m3[1] / n3, m3[2] / n3};
    double k23 = s_dot (m2, r3, 3);
    double q2[3] = {m2[0] - k23 * r3[0], m2[1] - k23 * r3[1], m2[2] - k23 * r3[2]};
    double k22 = sqrt (s_dot (q2, q2, 3));
    if (!(k22 > 0))
        return -1;
    double r2[3] = {q2[0] / k22, q2[1] / k22, q2[2] / k22};
    double k13 = s_dot (m1, r3, 3), k12 = s_dot (m1, r2, 3);
    double q1[3];
    for (int i = 0; i < 3; i++)
        q1[i] = m1[i] - k13 * r3[i] - k12 * r2[i];
    double k11 = sqrt (s_dot (q1, q1, 3));
    if (!(k11 > 0))
        return -1;
    *fx = k11 / n3;
    *fy = k22 / n3;
    *s = k12 / n3;
    *cx = k13 / n3;
    *cy = k23 / n3;
    return 0;
}

// ------------------------------------------------------------ both

static int
s_project (piv_camera_model_t model, const double *c, double x, double y, double z, double *col,
           double *row)
{
    if (model == PIV_CAMERA_SOLOFF) {
        double t[PIV_SOLOFF_TERMS];
        s_soloff_terms (x, y, z, t, NULL, NULL, NULL);
        *col = s_dot (c, t, PIV_SOLOFF_TERMS);
        *row = s_dot (c + PIV_SOLOFF_TERMS, t, PIV_SOLOFF_TERMS);
        return 0;
    }
    const double *p = c;
    double w = p[8] * x + p[9] * y + p[10] * z + 1;
    if (!(fabs (w) > 1e-300))
        return -1;
    double u = (p[0] * x + p[1] * y + p[2] * z + p[3]) / w;
    double v = (p[4] * x + p[5] * y + p[6] * z + p[7]) / w;
    double k1 = c[PIV_PINHOLE_P], k2 = c[PIV_PINHOLE_P + 1];
    if (k1 == 0 && k2 == 0) {
        *col = u;
        *row = v;
        return 0;
    }
    double fx, fy, s, cx, cy;
    if (s_intrinsics (p, &fx, &fy, &s, &cx, &cy))
        return -1;
    // Brown's radial distortion in normalised coordinates: K^-1 (u, v, 1).
    double yn = (v - cy) / fy, xn = (u - cx - s * yn) / fx;
    double r2 = xn * xn + yn * yn, f = 1 + k1 * r2 + k2 * r2 * r2;
    double xd = xn * f, yd = yn * f;
    *col = cx + fx * xd + s * yd;
    *row = cy + fy * yd;
    return isfinite (*col) && isfinite (*row) ? 0 : -1;
}

// Plain linear least squares A c = b by GSL's SVD (columns balanced, which
// the mm-cubed terms of the Soloff polynomial need). 0, or -1.
static int
s_lstsq (gsl_matrix *a, gsl_vector *b, double *c)
{
    size_t n = a->size1, p = a->size2;
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc (n, p);
    gsl_vector *cv = gsl_vector_alloc (p);
    gsl_matrix *cov = gsl_matrix_alloc (p, p);
    double chisq;
    int rc = -1;
    if (w && cv && cov && gsl_multifit_linear (a, b, cv, cov, &chisq, w) == GSL_SUCCESS) {
        size_t rank = gsl_multifit_linear_rank (1e-12, w);
        if (rank == p) {
            for (size_t i = 0; i < p; i++)
                c[i] = gsl_vector_get (cv, i);
            rc = 0;
        }
    }
    gsl_multifit_linear_free (w);
    gsl_vector_free (cv);
    gsl_matrix_free (cov);
    return rc;
}

static int
s_fit_soloff (const piv_point_t *pts, size_t n, double *c)
{
    gsl_matrix *a = gsl_matrix_alloc (n, PIV_SOLOFF_TERMS);
    gsl_vector *b = gsl_vector_alloc (n);
    int rc = -1;
    if (a && b) {
        for (size_t i = 0; i < n; i++) {
            double t[PIV_SOLOFF_TERMS];
            s_soloff_terms (pts[i].x, pts[i].y, pts[i].z, t, NULL, NULL, NULL);
            for (int j = 0; j < PIV_SOLOFF_TERMS; j++)
                gsl_matrix_set (a, i, j, t[j]);
            gsl_vector_set (b, i, pts[i].col);
        }
        rc = s_lstsq (a, b, c);
        for (size_t i = 0; rc == 0 && i < n; i++)
            gsl_vector_set (b, i, pts[i].row);
        if (rc == 0)
            rc = s_lstsq (a, b, c + PIV_SOLOFF_TERMS);
    }
    gsl_matrix_free (a);
    gsl_vector_free (b);
    return rc;
}

// The DLT: P with P[2][3] = 1 from the 2n linear equations
// P0 X + P1 Y + P2 Z + P3 - u (P8 X + P9 Y + P10 Z) = u (and v alike).
static int
s_fit_dlt (const piv_point_t *pts, size_t n, double *p)
{
    gsl_matrix *a = gsl_matrix_calloc (2 * n, PIV_PINHOLE_P);
    gsl_vector *b = gsl_vector_alloc (2 * n);
    int rc = -1;
    if (a && b) {
        for (size_t i = 0; i < n; i++) {
            double w[3] = {pts[i].x, pts[i].y, pts[i].z}, uv[2] = {pts[i].col, pts[i].row};
            for (int k = 0; k < 2; k++) {
                size_t r = 2 * i + (size_t) k;
                for (int j = 0; j < 3; j++) {
                    gsl_matrix_set (a, r, (size_t) (4 * k + j), w[j]);
                    gsl_matrix_set (a, r, (size_t) (8 + j), -uv[k] * w[j]);
                }
                gsl_matrix_set (a, r, (size_t) (4 * k + 3), 1);
                gsl_vector_set (b, r, uv[k]);
            }
        }
        rc = s_lstsq (a, b, p);
    }
    gsl_matrix_free (a);
    gsl_vector_free (b);
    return rc;
}

typedef struct {
    const piv_point_t *pts;     // the points fitted
    size_t n;                   // their count
} s_lm_data_t;

// The 2n reprojection residuals of the pinhole x (13 parameters).
static int
s_lm_residuals (const gsl_vector *x, void *params, gsl_vector *f)
{
    const s_lm_data_t *d = params;
    double c[NPINHOLE];
    for (size_t j = 0; j < NPINHOLE; j++)
        c[j] = gsl_vector_get (x, j);
    for (size_t i = 0; i < d->n; i++) {
        double col, row;
        if (s_project (PIV_CAMERA_PINHOLE, c, d->pts[i].x, d->pts[i].y, d->pts[i].z, &col, &row))
            return GSL_EDOM;
        gsl_vector_set (f, 2 * i, col - d->pts[i].col);
        gsl_vector_set (f, 2 * i + 1, row - d->pts[i].row);
    }
    return GSL_SUCCESS;
}

// The pinhole: the DLT, then P, k1 and k2 together by Levenberg-Marquardt
// on the reprojection error (finite-difference Jacobian: GSL's).
static int
s_fit_pinhole (const piv_point_t *pts, size_t n, double *c)
{
    if (s_fit_dlt (pts, n, c))
        return -1;
    c[PIV_PINHOLE_P] = c[PIV_PINHOLE_P + 1] = 0;
    s_lm_data_t data = {pts, n};
    gsl_multifit_nlinear_fdf fdf = {.f = s_lm_residuals, .df = NULL, .fvv = NULL,
                                    .n = 2 * n, .p = NPINHOLE, .params = &data};
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters ();
    fp.trs = gsl_multifit_nlinear_trs_lm;
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc (gsl_multifit_nlinear_trust, &fp, 2 * n, NPINHOLE);
    if (!w)
        return -1;
    gsl_vector_view x0 = gsl_vector_view_array (c, NPINHOLE);
    int info, rc = -1;
    if (gsl_multifit_nlinear_init (&x0.vector, &fdf, w) == GSL_SUCCESS) {
        int status = gsl_multifit_nlinear_driver (500, 1e-14, 1e-14, 1e-14, NULL, NULL, &info, w);
        // GSL_EMAXITER still leaves the best point found, no worse than the DLT.
        if (status == GSL_SUCCESS || status == GSL_EMAXITER || status == GSL_ENOPROG) {
            gsl_vector *x = gsl_multifit_nlinear_position (w);
            for (size_t j = 0; j < NPINHOLE; j++)
                c[j] = gsl_vector_get (x, j);
            rc = 0;
        }
    }
    gsl_multifit_nlinear_free (w);
    return rc;
}

static int
s_fit (piv_camera_model_t model, const piv_point_t *pts, size_t n, double *c)
{
    // GSL's default handler aborts the process; its status codes suffice.
    gsl_set_error_handler_off ();
    return model == PIV_CAMERA_SOLOFF ? s_fit_soloff (pts, n, c) : s_fit_pinhole (pts, n, c);
}

static void
s_residuals (piv_camera_model_t model, const double *c, const piv_point_t *pts, size_t n,
             double *sum2, double *max)
{
    for (size_t i = 0; i < n; i++) {
        double col, row, e2;
        if (s_project (model, c, pts[i].x, pts[i].y, pts[i].z, &col, &row))
            e2 = INFINITY;
        else
            e2 = (col - pts[i].col) * (col - pts[i].col) + (row - pts[i].row) * (row - pts[i].row);
        *sum2 += e2;
        if (sqrt (e2) > *max)
            *max = sqrt (e2);
    }
}

void
piv_camera_residuals (const piv_camera_t *self, const piv_point_t *pts, size_t n, double *rms,
                      double *max)
{
    double sum2 = 0;
    *max = 0;
    s_residuals (self->info.model, self->c, pts, n, &sum2, max);
    *rms = n ? sqrt (sum2 / (double) n) : 0;
}

// Points within this of each other in Z are on one plane (the XML's cm
// become mm with rounding).
#define PLANE_TOL 1e-6

// The distinct Z values of the points, sorted (zs has room for n).
static int
s_planes (const piv_point_t *pts, size_t n, double *zs)
{
    int np = 0;
    for (size_t i = 0; i < n; i++) {
        int k = 0;
        while (k < np && fabs (zs[k] - pts[i].z) > PLANE_TOL)
            k++;
        if (k == np)
            zs[np++] = pts[i].z;
    }
    for (int i = 1; i < np; i++)
        for (int j = i; j > 0 && zs[j - 1] > zs[j]; j--) {
            double t = zs[j];
            zs[j] = zs[j - 1];
            zs[j - 1] = t;
        }
    return np;
}

// Leave one plane out: each plane predicted by a fit on all the others.
static void
s_heldout (piv_camera_model_t model, const piv_point_t *pts, size_t n, const double *zs, int np,
           double *rms, double *max)
{
    *rms = *max = NAN;
    if (np < 4)
        return;
    piv_point_t *fit = malloc (n * sizeof *fit), *test = malloc (n * sizeof *test);
    double sum2 = 0, mx = 0;
    int ok = fit && test;
    for (int k = 0; ok && k < np; k++) {
        size_t nf = 0, nt = 0;
        for (size_t i = 0; i < n; i++) {
            if (fabs (pts[i].z - zs[k]) <= PLANE_TOL)
                test[nt++] = pts[i];
            else
                fit[nf++] = pts[i];
        }
        double c[NCOEF_MAX];
        if (s_fit (model, fit, nf, c))
            ok = 0;
        else
            s_residuals (model, c, test, nt, &sum2, &mx);
    }
    if (ok) {
        *rms = sqrt (sum2 / (double) n);
        *max = mx;
    }
    free (fit);
    free (test);
}

static piv_camera_t *
s_new (piv_camera_model_t model)
{
    piv_camera_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->info.id = 1;
    self->info.model = model;
    self->info.heldout_rms = self->info.heldout_max = NAN;
    self->nc = s_ncoefs (model);
    return self;
}

piv_camera_t *
piv_camera_fit (piv_camera_model_t model, const piv_point_t *pts, size_t n, char *err,
                size_t errlen)
{
    const char *name = piv_camera_model_name (model);
    int need_points = model == PIV_CAMERA_SOLOFF ? PIV_SOLOFF_TERMS : 6;
    int need_planes = model == PIV_CAMERA_SOLOFF ? 3 : 2;
    if (n < (size_t) need_points) {
        cam_seterr (err, errlen, "cannot fit a %s model to %zu points: at least %d are needed", name,
                  n, need_points);
        return NULL;
    }
    double *zs = malloc (n * sizeof *zs);
    piv_camera_t *self = s_new (model);
    if (!zs || !self) {
        cam_seterr (err, errlen, "cannot fit a %s model: out of memory", name);
        goto fail;
    }
    int np = s_planes (pts, n, zs);
    if (np < need_planes) {
        cam_seterr (err, errlen,
                  "cannot fit a %s model to points on %d plane%s of Z: at least %d are needed",
                  name, np, np == 1 ? "" : "s", need_planes);
        goto fail;
    }
    if (s_fit (model, pts, n, self->c)) {
        cam_seterr (err, errlen, "cannot fit a %s model to these %zu points: they do not "
                  "determine it (a target's dots on a line?)", name, n);
        goto fail;
    }
    piv_camera_info_t *info = &self->info;
    info->points = n;
    info->planes = np;
    piv_camera_residuals (self, pts, n, &info->rms, &info->max);
    s_heldout (model, pts, n, zs, np, &info->heldout_rms, &info->heldout_max);
    double *b = info->bounds;
    b[0] = b[2] = b[4] = INFINITY;
    b[1] = b[3] = b[5] = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double w[3] = {pts[i].x, pts[i].y, pts[i].z};
        for (int j = 0; j < 3; j++) {
            b[2 * j] = fmin (b[2 * j], w[j]);
            b[2 * j + 1] = fmax (b[2 * j + 1], w[j]);
        }
    }
    free (zs);
    return self;
fail:
    free (zs);
    free (self);
    return NULL;
}

// 1 when a is better evidence than b: the lower held-out RMS where both
// have one, else the lower RMS.
static int
s_better (const piv_camera_info_t *a, const piv_camera_info_t *b)
{
    if (isfinite (a->heldout_rms) && isfinite (b->heldout_rms))
        return a->heldout_rms <= b->heldout_rms;
    if (isfinite (a->heldout_rms) != isfinite (b->heldout_rms))
        return isfinite (a->heldout_rms);
    return a->rms <= b->rms;
}

piv_camera_t *
piv_camera_choose (const piv_point_t *pts, size_t n, piv_camera_t **other_p, char *err,
                   size_t errlen)
{
    char err1[512], err2[512];
    piv_camera_t *soloff = piv_camera_fit (PIV_CAMERA_SOLOFF, pts, n, err1, sizeof err1);
    piv_camera_t *pinhole = piv_camera_fit (PIV_CAMERA_PINHOLE, pts, n, err2, sizeof err2);
    if (!soloff && !pinhole) {
        cam_seterr (err, errlen, "%s; %s", err1, err2);
        return NULL;
    }
    piv_camera_t *best = soloff, *other = pinhole;
    if (!soloff || (pinhole && s_better (&pinhole->info, &soloff->info))) {
        best = pinhole;
        other = soloff;
    }
    if (other_p)
        *other_p = other;
    else
        piv_camera_destroy (&other);
    return best;
}

void
piv_camera_destroy (piv_camera_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free (*self_p);
    *self_p = NULL;
}

piv_camera_t *
piv_camera_dup (const piv_camera_t *self)
{
    piv_camera_t *copy = malloc (sizeof *copy);
    if (copy)
        *copy = *self;
    return copy;
}

void
piv_camera_info (const piv_camera_t *self, piv_camera_info_t *info)
{
    *info = self->info;
}

int
piv_camera_id (const piv_camera_t *self)
{
    return self->info.id;
}

void
piv_camera_set_id (piv_camera_t *self, int id)
{
    self->info.id = id;
}

int
piv_camera_project (const piv_camera_t *self, double x, double y, double z, double *col,
                    double *row)
{
    return s_project (self->info.model, self->c, x, y, z, col, row);
}

int
piv_camera_derivatives (const piv_camera_t *self, double x, double y, double z, double d[2][3])
{
    if (self->info.model == PIV_CAMERA_SOLOFF) {
        double t[PIV_SOLOFF_TERMS], tx[PIV_SOLOFF_TERMS], ty[PIV_SOLOFF_TERMS],
            tz[PIV_SOLOFF_TERMS];
        s_soloff_terms (x, y, z, t, tx, ty, tz);
        for (int k = 0; k < 2; k++) {
            const double *c = self->c + k * PIV_SOLOFF_TERMS;
            d[k][0] = s_dot (c, tx, PIV_SOLOFF_TERMS);
            d[k][1] = s_dot (c, ty, PIV_SOLOFF_TERMS);
            d[k][2] = s_dot (c, tz, PIV_SOLOFF_TERMS);
        }
        return 0;
    }
    // The pinhole by central differences: its mapping is smooth at the
    // scale of 1 um, where their error (~1e-10 px/mm) is far below any use.
    const double h = 1e-3;
    double w[3] = {x, y, z};
    for (int j = 0; j < 3; j++) {
        double p[3] = {w[0], w[1], w[2]}, m[3] = {w[0], w[1], w[2]};
        p[j] += h;
        m[j] -= h;
        double cp, rp, cm, rm;
        if (piv_camera_project (self, p[0], p[1], p[2], &cp, &rp) ||
            piv_camera_project (self, m[0], m[1], m[2], &cm, &rm))
            return -1;
        d[0][j] = (cp - cm) / (2 * h);
        d[1][j] = (rp - rm) / (2 * h);
    }
    return 0;
}

int
piv_camera_unproject (const piv_camera_t *self, double col, double row, double z, double *x,
                      double *y)
{
    const piv_camera_info_t *info = &self->info;
    double cx = 0.5 * (info->bounds[0] + info->bounds[1]);
    double cy = 0.5 * (info->bounds[2] + info->bounds[3]);
    if (info->model == PIV_CAMERA_PINHOLE) {
        // The start: the plane's homography without distortion, solved exactly.
        const double *p = self->c;
        double a = p[0] - col * p[8], b = p[1] - col * p[9];
        double c = p[4] - row * p[8], d = p[5] - row * p[9];
        double e = col * (p[10] * z + 1) - p[2] * z - p[3];
        double f = row * (p[10] * z + 1) - p[6] * z - p[7];
        double det = a * d - b * c;
        if (fabs (det) > 0 && isfinite (det)) {
            cx = (e * d - b * f) / det;
            cy = (a * f - c * e) / det;
        }
    }
    double px = cx, py = cy, pc, pr;
    if (piv_camera_project (self, px, py, z, &pc, &pr))
        return -1;
    double r2 = (pc - col) * (pc - col) + (pr - row) * (pr - row);
    for (int it = 0; it < 100; it++) {
        double d[2][3];
        if (piv_camera_derivatives (self, px, py, z, d))
            return -1;
        double det = d[0][0] * d[1][1] - d[0][1] * d[1][0];
        if (!(fabs (det) > 0))
            return -1;
        double ec = col - pc, er = row - pr;
        double dx = (ec * d[1][1] - d[0][1] * er) / det;
        double dy = (d[0][0] * er - d[1][0] * ec) / det;
        // Halve a step that does not reduce the image error (far from the
        // calibrated volume a cubic can send Newton away).
        double step = 1, nx = px, ny = py, nc = pc, nr = pr, n2 = INFINITY;
        for (int h = 0; h < 40; h++, step *= 0.5) {
            nx = px + step * dx;
            ny = py + step * dy;
            if (piv_camera_project (self, nx, ny, z, &nc, &nr) == 0) {
                n2 = (nc - col) * (nc - col) + (nr - row) * (nr - row);
                if (n2 <= r2)
                    break;
            }
        }
        if (!(n2 <= r2))
            return r2 < 1e-18 ? (*x = px, *y = py, 0) : -1;
        px = nx;
        py = ny;
        pc = nc;
        pr = nr;
        r2 = n2;
        if (fabs (step * dx) < 1e-10 && fabs (step * dy) < 1e-10) {
            *x = px;
            *y = py;
            return 0;
        }
    }
    return -1;
}

size_t
piv_camera_coefs (const piv_camera_t *self, const double **coefs)
{
    *coefs = self->c;
    return self->nc;
}

piv_camera_t *
piv_camera_from_coefs (const piv_camera_info_t *info, const double *coefs, size_t n, char *err,
                       size_t errlen)
{
    size_t want = s_ncoefs (info->model);
    if (n != want) {
        cam_seterr (err, errlen, "a %s camera has %zu coefficients, not %zu",
                  piv_camera_model_name (info->model), want, n);
        return NULL;
    }
    piv_camera_t *self = s_new (info->model);
    if (!self) {
        cam_seterr (err, errlen, "out of memory");
        return NULL;
    }
    self->info = *info;
    memcpy (self->c, coefs, n * sizeof *coefs);
    return self;
}
