// stats.c — running statistics of a series of vector fields on one grid:
// Welford accumulation per point, the convergence of the mean, the state
// as bytes, and the txt and Tecplot writers (VTK: piv/vtk.c). See stats.h.

#include "piv/stats.h"
#include "piv/stats_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

piv_stats_t *
piv_stats_new (const piv_field_t *field)
{
    if (field->step <= 0 || field->nx <= 0 || field->ny <= 0)
        return NULL;
    piv_stats_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->nx = field->nx;
    self->ny = field->ny;
    self->step = field->step;
    self->window = field->window;
    self->x0 = field->x[0];
    self->y0 = field->y[0];
    size_t n = (size_t) self->nx * (size_t) self->ny;
    self->count = calloc (n, sizeof (int64_t));
    self->r_count = calloc (n, sizeof (int64_t));
    self->w_count = calloc (n, sizeof (int64_t));
    self->sums = calloc (n * S_SUMS, sizeof (double));
    if (field->w)
        self->sums3 = calloc (n * S_SUMS3, sizeof (double));
    self->comps = field->w ? 3 : 2;
    if (!self->count || !self->r_count || !self->w_count || !self->sums
        || (field->w && !self->sums3) || piv_stats_set_uncertainty (self, 1) != 0) {
        piv_stats_destroy (&self);
        return NULL;
    }
    // Snapshots of the mean: none yet.
    for (size_t k = 0; k < n; k++)
        for (int s = S_THEN_U; s < S_SUMS; s++)
            self->sums[k * S_SUMS + s] = NAN;
    self->seq_max = -1;
    self->released = -1;
    return self;
}

int
piv_stats_set_uncertainty (piv_stats_t *self, int on)
{
    if (!on || self->sumsu) {
        if (!on) {
            free (self->sumsu);
            free (self->ring);
            self->sumsu = NULL;
            self->ring = NULL;
        }
        return 0;
    }
    size_t n = (size_t) self->nx * (size_t) self->ny;
    self->sumsu = calloc (n * S_SUMSU, sizeof (double));
    self->ring = malloc (n * PIV_STATS_RING * (size_t) self->comps * sizeof (float));
    if (!self->sumsu || !self->ring) {
        piv_stats_set_uncertainty (self, 0);
        return -1;
    }
    // No field in time order yet (those counted so far come before any
    // counted from now), no shift fixed; empty slots hold NaN so that the
    // state's bytes depend on the fields counted alone.
    for (size_t k = 0; k < n; k++)
        for (int s = SU_K_U; s <= SU_K_W; s++)
            self->sumsu[k * S_SUMSU + s] = NAN;
    for (size_t i = 0; i < n * PIV_STATS_RING * (size_t) self->comps; i++)
        self->ring[i] = NAN;
    for (int i = 0; i < PIV_STATS_RING; i++)
        self->slot_seq[i] = -1;
    self->released = self->seq_max;
    return 0;
}

int
piv_stats_has_uncertainty (const piv_stats_t *self)
{
    return self->sumsu != NULL;
}

void
piv_stats_destroy (piv_stats_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_stats_t *self = *self_p;
    free (self->count);
    free (self->r_count);
    free (self->w_count);
    free (self->sums);
    free (self->sums3);
    free (self->sumsu);
    free (self->ring);
    free (self);
    *self_p = NULL;
}

int
piv_stats_fits (const piv_stats_t *self, const piv_field_t *field)
{
    return field->nx == self->nx && field->ny == self->ny && field->step == self->step &&
           field->window == self->window && field->x[0] == self->x0 && field->y[0] == self->y0
           && !field->w == !self->sums3;
}

// Copies the current mean of every point into the snapshot at 'slot'
// (S_THEN_U or S_NEXT_U; NaN where no sample yet).
static void
s_snapshot (piv_stats_t *self, int slot)
{
    size_t n = (size_t) self->nx * (size_t) self->ny;
    for (size_t k = 0; k < n; k++) {
        double *s = self->sums + k * S_SUMS;
        int any = self->count[k] + self->r_count[k] > 0;
        s[slot] = any ? s[S_MEAN_U] : NAN;
        s[slot + 1] = any ? s[S_MEAN_V] : NAN;
    }
}

// Releases the oldest pending field into the lag products: at every point
// where it has a sample, its product with each of the PIV_STATS_LAGS fields
// released before it that has one there (lag j: the j-th latest). The
// oldest of those then leaves its slot.
static void
s_release (piv_stats_t *self)
{
    int p = -1, hist[PIV_STATS_RING], nh = 0;
    for (int i = 0; i < PIV_STATS_RING; i++) {
        int64_t q = self->slot_seq[i];
        if (q > self->released && (p < 0 || q < self->slot_seq[p]))
            p = i;
        else if (q >= 0 && q <= self->released) {
            // Latest first (insertion: at most PIV_STATS_LAGS of them).
            int at = nh++;
            while (at > 0 && self->slot_seq[hist[at - 1]] < q) {
                hist[at] = hist[at - 1];
                at--;
            }
            hist[at] = i;
        }
    }
    if (p < 0)
        return;
    size_t n = (size_t) self->nx * (size_t) self->ny, m = (size_t) self->comps;
    size_t off[PIV_STATS_LAGS]; // lag j's values from the point's first slot
    for (int j = 0; j < nh; j++)
        off[j] = (size_t) hist[j] * m;
    for (size_t k = 0; k < n; k++) {
        const float *slots = self->ring + k * PIV_STATS_RING * m, *x = slots + (size_t) p * m;
        if (isnan (x[0]) || nh == 0)
            continue;
        double *u = self->sumsu + k * S_SUMSU;
        if (isnan (u[SU_K_U])) {
            // The shift: the mean at the point's first product, close to
            // the final mean, so that the products do not lose the
            // fluctuations' digits to the mean's (units.md).
            const double *s = self->sums + k * S_SUMS;
            u[SU_K_U] = s[S_MEAN_U];
            u[SU_K_V] = s[S_MEAN_V];
            u[SU_K_W] = m == 3 ? self->sums3[k * S_SUMS3 + S3_MEAN_W] : 0;
        }
        double xu = x[0] - u[SU_K_U], xv = x[1] - u[SU_K_V], xw = m == 3 ? x[2] - u[SU_K_W] : 0;
        for (int j = 0; j < nh; j++) {
            const float *y = slots + off[j];
            if (isnan (y[0]))
                continue;
            double prod = xu * (y[0] - u[SU_K_U]) + xv * (y[1] - u[SU_K_V]);
            if (m == 3)
                prod += xw * (y[2] - u[SU_K_W]);
            u[SU_LAG + j] += prod;
            u[SU_NLAG + j] += 1;
        }
    }
    self->released = self->slot_seq[p];
    if (nh == PIV_STATS_LAGS)
        self->slot_seq[hist[nh - 1]] = -1;
}

// Puts 'field' (at 'seq') among the pending fields, releasing the oldest
// when they are PIV_STATS_PENDING; or counts it late.
static void
s_order (piv_stats_t *self, const piv_field_t *field, int64_t seq)
{
    if (seq > self->seq_max)
        self->seq_max = seq;
    if (!self->sumsu)
        return;
    int pending = 0, slot = -1;
    for (int i = 0; i < PIV_STATS_RING; i++) {
        if (seq >= 0 && self->slot_seq[i] == seq)
            seq = -1; // the same place twice: the second is late
        pending += self->slot_seq[i] > self->released;
    }
    if (seq < 0 || seq <= self->released) {
        self->late++;
        return;
    }
    for (int i = 0; i < PIV_STATS_RING && slot < 0; i++)
        if (self->slot_seq[i] < 0)
            slot = i;
    size_t n = (size_t) self->nx * (size_t) self->ny;
    int m = self->comps;
    for (size_t k = 0; k < n; k++) {
        float *x = self->ring + (k * PIV_STATS_RING + (size_t) slot) * (size_t) m;
        float v[3] = {field->u[k], field->v[k], m == 3 ? field->w[k] : 0};
        int sample = field->flags[k] <= PIV_FLAG_REPLACED && isfinite (v[0])
                     && isfinite (v[1]) && isfinite (v[2]);
        for (int c = 0; c < m; c++)
            x[c] = sample ? v[c] : NAN;
    }
    self->slot_seq[slot] = seq;
    if (pending == PIV_STATS_PENDING)
        s_release (self);
}

int
piv_stats_add (piv_stats_t *self, const piv_field_t *field, const float *vorticity)
{
    return piv_stats_add_at (self, field, vorticity, self->seq_max + 1);
}

int
piv_stats_add_at (piv_stats_t *self, const piv_field_t *field, const float *vorticity,
                  int64_t seq)
{
    if (!piv_stats_fits (self, field))
        return -1;
    size_t n = (size_t) self->nx * (size_t) self->ny;
    for (size_t k = 0; k < n; k++) {
        double *s = self->sums + k * S_SUMS;
        double u = field->u[k], v = field->v[k], w = self->sums3 ? field->w[k] : 0;
        if (field->flags[k] <= PIV_FLAG_REPLACED && isfinite (u) && isfinite (v)
            && isfinite (w)) {
            // Welford: the mean, the squared deviations and the co-moment
            // updated with the deviation before and after the new mean.
            ++*(field->flags[k] == PIV_FLAG_VALID ? &self->count[k] : &self->r_count[k]);
            double c = (double) (self->count[k] + self->r_count[k]);
            double du = u - s[S_MEAN_U], dv = v - s[S_MEAN_V];
            s[S_MEAN_U] += du / c;
            s[S_MEAN_V] += dv / c;
            s[S_M2_U] += du * (u - s[S_MEAN_U]);
            s[S_M2_V] += dv * (v - s[S_MEAN_V]);
            s[S_C_UV] += du * (v - s[S_MEAN_V]);
            if (self->sums3) {
                double *t = self->sums3 + k * S_SUMS3, dw = w - t[S3_MEAN_W];
                t[S3_MEAN_W] += dw / c;
                t[S3_M2_W] += dw * (w - t[S3_MEAN_W]);
                t[S3_C_UW] += du * (w - t[S3_MEAN_W]);
                t[S3_C_VW] += dv * (w - t[S3_MEAN_W]);
            }
            double *su = self->sumsu ? self->sumsu + k * S_SUMSU : NULL;
            if (su && field->sigma_u && field->sigma_v && isfinite (field->sigma_u[k])
                && isfinite (field->sigma_v[k])) {
                double ns = ++su[SU_N_SIG], su2 = (double) field->sigma_u[k] * field->sigma_u[k],
                       sv2 = (double) field->sigma_v[k] * field->sigma_v[k];
                su[SU_SIG_U] += (su2 - su[SU_SIG_U]) / ns;
                su[SU_SIG_V] += (sv2 - su[SU_SIG_V]) / ns;
            }
        }
        if (vorticity && isfinite (vorticity[k])) {
            // Welford on the mean vorticity; a state decoded from a version
            // before 4 has its mean but no M2: the deviations from that
            // mean start it (SU_N_O counts them).
            double c = (double) ++self->w_count[k], d = vorticity[k] - s[S_MEAN_W];
            s[S_MEAN_W] += d / c;
            double *su = self->sumsu ? self->sumsu + k * S_SUMSU : NULL;
            if (su) {
                su[SU_M2_O] += d * (vorticity[k] - s[S_MEAN_W]);
                su[SU_N_O] += 1;
            }
        }
    }
    s_order (self, field, seq);
    self->fields++;
    // The snapshot compared with ("then") is the mean of about 90 % of the
    // fields: the pending one ("next") takes its place once 90 % of the
    // fields counted reach its count, and a new pending one is taken.
    if (self->next_fields == 0 || 9 * self->fields >= 10 * self->next_fields) {
        if (self->next_fields > 0) {
            for (size_t k = 0; k < n; k++) {
                double *s = self->sums + k * S_SUMS;
                s[S_THEN_U] = s[S_NEXT_U];
                s[S_THEN_V] = s[S_NEXT_V];
            }
            self->then_fields = self->next_fields;
        }
        s_snapshot (self, S_NEXT_U);
        self->next_fields = self->fields;
    }
    return 0;
}

int
piv_stats_has_w (const piv_stats_t *self)
{
    return self->sums3 != NULL;
}

void
piv_stats_grid (const piv_stats_t *self, int *nx, int *ny, int *step, int *window)
{
    *nx = self->nx;
    *ny = self->ny;
    *step = self->step;
    *window = self->window;
}

#define S_MIN_PAIRS 8     // pairs at a lag for its autocorrelation to count
#define S_TAIL_RATIO 0.98 // the geometric tail's ratio, at most

// The uncertainty figures of point k (its other figures in 'out' already):
// doc/units.md, "Uncertainty of the statistics".
static void
s_uncertainty (const piv_stats_t *self, long k, piv_stats_point_t *out)
{
    const double *s = self->sums + (size_t) k * S_SUMS;
    const double *t = self->sums3 ? self->sums3 + (size_t) k * S_SUMS3 : NULL;
    out->n_eff = out->u_mean_uncertainty = out->v_mean_uncertainty = NAN;
    out->u_rms_uncertainty = out->v_rms_uncertainty = out->vorticity_mean_uncertainty = NAN;
    out->w_mean_uncertainty = out->w_rms_uncertainty = NAN;
    out->sigma_u_rms = out->sigma_v_rms = NAN;
    if (!self->sumsu)
        return;
    const double *u = self->sumsu + (size_t) k * S_SUMSU;
    out->sigma_u_rms = u[SU_N_SIG] > 0 ? sqrt (u[SU_SIG_U]) : NAN;
    out->sigma_v_rms = u[SU_N_SIG] > 0 ? sqrt (u[SU_SIG_V]) : NAN;
    double c = (double) out->count;
    if (c < 2 || u[SU_NLAG] < S_MIN_PAIRS)
        return;
    // The autocorrelation of the velocity's fluctuations (all components
    // together): the lag products are about the shift K, so their mean
    // less |mean - K|^2 is the autocovariance at the mean.
    double var = (s[S_M2_U] + s[S_M2_V] + (t ? t[S3_M2_W] : 0)) / c;
    double shift = (s[S_MEAN_U] - u[SU_K_U]) * (s[S_MEAN_U] - u[SU_K_U])
                   + (s[S_MEAN_V] - u[SU_K_V]) * (s[S_MEAN_V] - u[SU_K_V])
                   + (t ? (t[S3_MEAN_W] - u[SU_K_W]) * (t[S3_MEAN_W] - u[SU_K_W]) : 0);
    double sum1 = 0, sum2 = 0, rho[PIV_STATS_LAGS];
    int lags = 0;
    for (int j = 0; var > 0 && j < PIV_STATS_LAGS && u[SU_NLAG + j] >= S_MIN_PAIRS; j++) {
        rho[j] = (u[SU_LAG + j] / u[SU_NLAG + j] - shift) / var;
        if (!(rho[j] > 0))
            break; // the first zero crossing ends the sum
        rho[j] = fmin (rho[j], 1);
        sum1 += rho[j];
        sum2 += rho[j] * rho[j];
        lags++;
    }
    if (lags == PIV_STATS_LAGS
        && rho[lags - 1] > 2 / sqrt (u[SU_NLAG + lags - 1])) {
        // Still correlated at the last lag kept, beyond the noise of an
        // estimate from that many pairs (2 / sqrt(n): white noise's 95 %):
        // the rest as the geometric series of the last two lags (exact for
        // an AR(1) process), its ratio at most S_TAIL_RATIO.
        double r = fmin (rho[lags - 1] / rho[lags - 2], S_TAIL_RATIO), last = rho[lags - 1];
        sum1 += last * r / (1 - r);
        sum2 += last * last * r * r / (1 - r * r);
    }
    double n_eff = c / (1 + 2 * sum1), n_eff2 = c / (1 + 2 * sum2);
    out->n_eff = n_eff;
    // The sample variance of correlated samples: M2 / (c - c / n_eff), the
    // (c - 1) of independent ones (Bayley & Hammersley 1946).
    double dof = n_eff > 1 ? c - c / n_eff : NAN;
    out->u_mean_uncertainty = sqrt (s[S_M2_U] / dof / n_eff);
    out->v_mean_uncertainty = sqrt (s[S_M2_V] / dof / n_eff);
    out->u_rms_uncertainty = out->u_rms / sqrt (2 * n_eff2);
    out->v_rms_uncertainty = out->v_rms / sqrt (2 * n_eff2);
    if (t) {
        out->w_mean_uncertainty = sqrt (t[S3_M2_W] / dof / n_eff);
        out->w_rms_uncertainty = out->w_rms / sqrt (2 * n_eff2);
    }
    // The vorticity with the velocity's n_eff, scaled to its own samples:
    // it decorrelates no slower than the velocity (units.md).
    double no = u[SU_N_O];
    if (no >= 2) {
        double n_o = fmax (1, n_eff * no / c);
        out->vorticity_mean_uncertainty
            = sqrt (u[SU_M2_O] / (n_o > 1 ? no - no / n_o : NAN) / n_o);
    }
}

int
piv_stats_point (const piv_stats_t *self, long k, piv_stats_point_t *out)
{
    if (k < 0 || k >= (long) self->nx * self->ny)
        return -1;
    const double *s = self->sums + (size_t) k * S_SUMS;
    int64_t c = self->count[k] + self->r_count[k];
    out->x = self->x0 + (double) (k % self->nx) * self->step;
    out->y = self->y0 + (double) (k / self->nx) * self->step;
    out->count = c;
    out->n_valid = self->count[k];
    out->n_replaced = self->r_count[k];
    out->u_mean = c ? s[S_MEAN_U] : NAN;
    out->v_mean = c ? s[S_MEAN_V] : NAN;
    out->u_rms = c ? sqrt (s[S_M2_U] / (double) c) : NAN;
    out->v_rms = c ? sqrt (s[S_M2_V] / (double) c) : NAN;
    out->uv_mean = c ? s[S_C_UV] / (double) c : NAN;
    out->vorticity_count = self->w_count[k];
    out->vorticity_mean = self->w_count[k] ? s[S_MEAN_W] : NAN;
    const double *t = self->sums3 ? self->sums3 + (size_t) k * S_SUMS3 : NULL;
    out->has_w = t != NULL;
    out->w_mean = t && c ? t[S3_MEAN_W] : NAN;
    out->w_rms = t && c ? sqrt (t[S3_M2_W] / (double) c) : NAN;
    out->uw_mean = t && c ? t[S3_C_UW] / (double) c : NAN;
    out->vw_mean = t && c ? t[S3_C_VW] / (double) c : NAN;
    s_uncertainty (self, k, out);
    return 0;
}

void
piv_stats_summary (const piv_stats_t *self, piv_stats_summary_t *out)
{
    size_t n = (size_t) self->nx * (size_t) self->ny;
    double samples = 0, change = 0, mean = 0;
    for (size_t k = 0; k < n; k++) {
        const double *s = self->sums + k * S_SUMS;
        samples += (double) self->count[k];
        if (self->then_fields == 0 || !(self->count[k] + self->r_count[k]) || isnan (s[S_THEN_U]))
            continue;
        double du = s[S_MEAN_U] - s[S_THEN_U], dv = s[S_MEAN_V] - s[S_THEN_V];
        change += du * du + dv * dv;
        mean += s[S_MEAN_U] * s[S_MEAN_U] + s[S_MEAN_V] * s[S_MEAN_V];
    }
    out->fields = self->fields;
    out->valid_fraction = self->fields ? samples / ((double) self->fields * (double) n) : NAN;
    out->convergence_from = self->then_fields;
    out->late = self->late;
    // Both sums run over the same points: the ratio of RMS is that of sums.
    if (self->then_fields == 0)
        out->convergence = NAN;
    else if (mean > 0)
        out->convergence = sqrt (change / mean);
    else
        out->convergence = change == 0 ? 0 : NAN;
}

double
piv_stats_mean_uncertainty (const piv_stats_t *self)
{
    if (!self->sumsu)
        return NAN;
    double sum = 0;
    long points = 0, n = (long) self->nx * self->ny;
    for (long k = 0; k < n; k++) {
        piv_stats_point_t p;
        piv_stats_point (self, k, &p);
        double w = self->sums3 ? p.w_mean_uncertainty : 0,
               sq = p.u_mean_uncertainty * p.u_mean_uncertainty
                    + p.v_mean_uncertainty * p.v_mean_uncertainty + w * w;
        if (isfinite (sq))
            sum += sq, points++;
    }
    return points ? sqrt (sum / (double) points) : NAN;
}

// ---------------------------------------------------------------------------
// The state as bytes: doc/units.md, "Statistics"

#define S_MAGIC "PVS1"
#define S_VERSION 4 // 1: without the replaced counts (decoded as none); 2: without the
                     // uncertainty (decoded as none)
#define S_VERSION5 5 // a stereo series': as 3 (version 2, then the S_SUMS3 sums), then
                     // the uncertainty as in 4
#define S_HEADER 56 // magic, version, nx, ny, step, window, x0, y0, 3 int64
#define S_STEREO(version) ((version) == 3 || (version) == 5)
#define S_UNC(version) ((version) >= 4)
#define S_PER_POINT(version)                                                                  \
    (8 * ((version) >= 2 ? 3 : 2) + 8 * S_SUMS + (S_STEREO (version) ? 8 * S_SUMS3 : 0)      \
     + (S_UNC (version) ? 8 * S_SUMSU + 4 * PIV_STATS_RING * (S_STEREO (version) ? 3 : 2) : 0))
#define S_SERIES(version) (S_UNC (version) ? 8 * (3 + PIV_STATS_RING) : 0) // released,
                     // seq_max, late, the slots' sequence numbers

// 'bytes' bytes of x, little-endian, at p; and back.
static void
s_put (unsigned char *p, uint64_t x, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char) (x >> (8 * i));
}

static uint64_t
s_get (const unsigned char *p, int bytes)
{
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++)
        x |= (uint64_t) p[i] << (8 * i);
    return x;
}
#define s_put64(p, x) s_put ((p), (x), 8)
#define s_put32(p, x) s_put ((p), (x), 4)
#define s_get64(p) s_get ((p), 8)
#define s_get32(p) ((uint32_t) s_get ((p), 4))

// The 'per' doubles of each of n points in 'sums' (point-major) as 'per'
// arrays over all points at p, each little-endian; the bytes after them.
static unsigned char *
s_put_sums (unsigned char *p, const double *sums, int per, size_t n)
{
    for (int s = 0; s < per; s++)
        for (size_t k = 0; k < n; k++, p += 8) {
            uint64_t bits;
            memcpy (&bits, &sums[k * (size_t) per + (size_t) s], 8);
            s_put64 (p, bits);
        }
    return p;
}

// And back: the bytes after them.
static const unsigned char *
s_get_sums (const unsigned char *p, double *sums, int per, size_t n)
{
    for (int s = 0; s < per; s++)
        for (size_t k = 0; k < n; k++, p += 8) {
            uint64_t bits = s_get64 (p);
            memcpy (&sums[k * (size_t) per + (size_t) s], &bits, 8);
        }
    return p;
}

// The version piv_stats_encode writes: without the uncertainty 2 or 3, as
// before it.
static uint32_t
s_version (const piv_stats_t *self)
{
    return self->sums3 ? (self->sumsu ? S_VERSION5 : 3) : (self->sumsu ? S_VERSION : 2);
}

size_t
piv_stats_state_size (const piv_stats_t *self)
{
    uint32_t version = s_version (self);
    return S_HEADER + (size_t) self->nx * (size_t) self->ny * S_PER_POINT (version)
           + S_SERIES (version);
}

int
piv_stats_encode (const piv_stats_t *self, unsigned char **buf_p, size_t *size_p)
{
    uint32_t version = s_version (self);
    size_t n = (size_t) self->nx * (size_t) self->ny;
    size_t size = piv_stats_state_size (self);
    unsigned char *buf = malloc (size), *p = buf;
    if (!buf)
        return -1;
    uint32_t x0, y0;
    memcpy (&x0, &self->x0, 4);
    memcpy (&y0, &self->y0, 4);
    memcpy (p, S_MAGIC, 4);
    uint32_t head[] = {version,
                       (uint32_t) self->nx,
                       (uint32_t) self->ny,
                       (uint32_t) self->step,
                       (uint32_t) self->window,
                       x0,
                       y0};
    for (int i = 0; i < 7; i++)
        s_put32 (p + 4 + 4 * i, head[i]);
    s_put64 (p + 32, (uint64_t) self->fields);
    s_put64 (p + 40, (uint64_t) self->then_fields);
    s_put64 (p + 48, (uint64_t) self->next_fields);
    p += S_HEADER;
    // Array by array: count, replaced count, vorticity count, then each sum.
    for (size_t k = 0; k < n; k++, p += 8)
        s_put64 (p, (uint64_t) self->count[k]);
    for (size_t k = 0; k < n; k++, p += 8)
        s_put64 (p, (uint64_t) self->r_count[k]);
    for (size_t k = 0; k < n; k++, p += 8)
        s_put64 (p, (uint64_t) self->w_count[k]);
    p = s_put_sums (p, self->sums, S_SUMS, n);
    if (self->sums3)
        p = s_put_sums (p, self->sums3, S_SUMS3, n);
    // Version 4 and 5: the fields in time order, then each uncertainty sum
    // over all points, then the slots' values (float32, point by point).
    if (!self->sumsu) {
        *buf_p = buf;
        *size_p = size;
        return 0;
    }
    s_put64 (p, (uint64_t) self->released);
    s_put64 (p + 8, (uint64_t) self->seq_max);
    s_put64 (p + 16, (uint64_t) self->late);
    p += 24;
    for (int i = 0; i < PIV_STATS_RING; i++, p += 8)
        s_put64 (p, (uint64_t) self->slot_seq[i]);
    p = s_put_sums (p, self->sumsu, S_SUMSU, n);
    for (size_t i = 0; i < n * PIV_STATS_RING * (size_t) self->comps; i++, p += 4) {
        uint32_t bits;
        memcpy (&bits, &self->ring[i], 4);
        s_put32 (p, bits);
    }
    *buf_p = buf;
    *size_p = size;
    return 0;
}

// Why the header at 'p' (size bytes in all) is not a state, or NULL.
static const char *
s_bad_header (const unsigned char *p, size_t size)
{
    if (size < S_HEADER || memcmp (p, S_MAGIC, 4) != 0)
        return "not a statistics state (no PVS1 header)";
    uint32_t version = s_get32 (p + 4);
    if (version < 1 || version > S_VERSION5)
        return "unknown version";
    uint32_t nx = s_get32 (p + 8), ny = s_get32 (p + 12);
    if (nx == 0 || ny == 0 || nx > 1u << 20 || ny > 1u << 20 || (uint64_t) nx * ny > 1u << 28)
        return "absurd grid size";
    if ((int32_t) s_get32 (p + 16) <= 0 || (int32_t) s_get32 (p + 20) < 0)
        return "bad step or window";
    if (size != S_HEADER + (uint64_t) nx * ny * S_PER_POINT (version) + S_SERIES (version))
        return "size does not match the grid";
    int64_t fields = (int64_t) s_get64 (p + 32), then = (int64_t) s_get64 (p + 40),
            next = (int64_t) s_get64 (p + 48);
    if (fields < 0 || then < 0 || next < then || next > fields)
        return "field counts do not add up";
    return NULL;
}

piv_stats_t *
piv_stats_decode (const void *buf, size_t size, char *err, size_t errlen)
{
    const unsigned char *p = buf;
    const char *bad = s_bad_header (p, size);
    if (bad) {
        snprintf (err, errlen, "bad statistics: %s", bad);
        return NULL;
    }
    uint32_t version = s_get32 (p + 4);
    piv_field_t grid = {.nx = (int) s_get32 (p + 8), .ny = (int) s_get32 (p + 12)};
    grid.step = (int) s_get32 (p + 16);
    grid.window = (int) s_get32 (p + 20);
    float x0, y0;
    uint32_t bits32 = s_get32 (p + 24);
    memcpy (&x0, &bits32, 4);
    bits32 = s_get32 (p + 28);
    memcpy (&y0, &bits32, 4);
    grid.x = &x0;
    grid.y = &y0;
    float w0 = 0;
    grid.w = S_STEREO (version) ? &w0 : NULL; // only its presence counts
    piv_stats_t *self = piv_stats_new (&grid);
    if (!self) {
        snprintf (err, errlen, "bad statistics: no memory");
        return NULL;
    }
    self->fields = (int64_t) s_get64 (p + 32);
    self->then_fields = (int64_t) s_get64 (p + 40);
    self->next_fields = (int64_t) s_get64 (p + 48);
    p += S_HEADER;
    size_t n = (size_t) self->nx * (size_t) self->ny;
    const char *why = NULL;
    for (size_t k = 0; k < n; k++, p += 8)
        self->count[k] = (int64_t) s_get64 (p);
    for (size_t k = 0; version >= 2 && k < n; k++, p += 8)
        self->r_count[k] = (int64_t) s_get64 (p);
    for (size_t k = 0; k < n; k++, p += 8)
        self->w_count[k] = (int64_t) s_get64 (p);
    for (size_t k = 0; k < n && !why; k++)
        if (self->count[k] < 0 || self->r_count[k] < 0
            || self->count[k] > self->fields - self->r_count[k] || self->w_count[k] < 0
            || self->w_count[k] > self->fields)
            why = "a point counts more samples than fields";
    p = s_get_sums (p, self->sums, S_SUMS, n);
    if (self->sums3)
        p = s_get_sums (p, self->sums3, S_SUMS3, n);
    if (S_UNC (version)) {
        self->released = (int64_t) s_get64 (p);
        self->seq_max = (int64_t) s_get64 (p + 8);
        self->late = (int64_t) s_get64 (p + 16);
        p += 24;
        int pending = 0, history = 0;
        for (int i = 0; i < PIV_STATS_RING; i++, p += 8) {
            int64_t q = self->slot_seq[i] = (int64_t) s_get64 (p);
            pending += q > self->released;
            history += q >= 0 && q <= self->released;
            if (q < -1 || q > self->seq_max)
                why = "a slot holds a field not counted";
        }
        if (self->released < -1 || self->seq_max < self->released || self->late < 0
            || self->late > self->fields || pending > PIV_STATS_PENDING
            || history > PIV_STATS_LAGS)
            why = "the fields in time order do not add up";
        p = s_get_sums (p, self->sumsu, S_SUMSU, n);
        for (size_t i = 0; i < n * PIV_STATS_RING * (size_t) self->comps; i++, p += 4) {
            uint32_t bits = s_get32 (p);
            memcpy (&self->ring[i], &bits, 4);
        }
    }
    else {
        // An older state: its fields come before any counted after it.
        piv_stats_set_uncertainty (self, 0);
        self->seq_max = self->released = self->fields - 1;
    }
    if (why) {
        snprintf (err, errlen, "bad statistics: %s", why);
        piv_stats_destroy (&self);
    }
    return self;
}

// ---------------------------------------------------------------------------
// Writers

int
piv_stats_point_in (const piv_stats_t *self, long k, const piv_calib_t *c, piv_stats_point_t *out)
{
    piv_stats_point_t pt;
    if (piv_stats_point (self, k, &pt) != 0)
        return -1;
    double ku, kv;
    *out = pt;
    piv_calib_position (c, pt.x, pt.y, &out->x, &out->y);
    piv_calib_velocity (c, pt.u_mean, pt.v_mean, &out->u_mean, &out->v_mean);
    piv_calib_velocity (c, 1, 1, &ku, &kv);
    out->u_rms = pt.u_rms * fabs (ku);
    out->v_rms = pt.v_rms * fabs (kv);
    out->uv_mean = pt.uv_mean * ku * kv;
    out->vorticity_mean = piv_calib_vorticity (c, pt.vorticity_mean);
    // w along +Z scales as u and keeps its sign; v'w' takes v's sign.
    out->w_mean = pt.w_mean * fabs (ku);
    out->w_rms = pt.w_rms * fabs (ku);
    out->uw_mean = pt.uw_mean * ku * fabs (ku);
    out->vw_mean = pt.vw_mean * kv * fabs (ku);
    // Uncertainties are magnitudes: scaled, never signed.
    out->u_mean_uncertainty = pt.u_mean_uncertainty * fabs (ku);
    out->v_mean_uncertainty = pt.v_mean_uncertainty * fabs (kv);
    out->u_rms_uncertainty = pt.u_rms_uncertainty * fabs (ku);
    out->v_rms_uncertainty = pt.v_rms_uncertainty * fabs (kv);
    out->w_mean_uncertainty = pt.w_mean_uncertainty * fabs (ku);
    out->w_rms_uncertainty = pt.w_rms_uncertainty * fabs (ku);
    out->sigma_u_rms = pt.sigma_u_rms * fabs (ku);
    out->sigma_v_rms = pt.sigma_v_rms * fabs (kv);
    out->vorticity_mean_uncertainty = fabs (piv_calib_vorticity (c, pt.vorticity_mean_uncertainty));
    return 0;
}

const piv_stat_info_t piv_stat_figures[PIV_STAT_FIGURES] = {
    [PIV_STAT_U_MEAN] = {"u_mean", "mean velocity along x"},
    [PIV_STAT_V_MEAN] = {"v_mean", "mean velocity along y"},
    [PIV_STAT_U_RMS] = {"u_rms", "RMS of the fluctuation of u"},
    [PIV_STAT_V_RMS] = {"v_rms", "RMS of the fluctuation of v"},
    [PIV_STAT_UV_MEAN] = {"uv_mean", "Reynolds shear stress mean(u'v')"},
    [PIV_STAT_VORTICITY_MEAN] = {"vorticity_mean", "mean vorticity dv/dx - du/dy"},
    [PIV_STAT_W_MEAN] = {"w_mean", "mean velocity along z (out of the light sheet)", 1},
    [PIV_STAT_W_RMS] = {"w_rms", "RMS of the fluctuation of w", 1},
    [PIV_STAT_UW_MEAN] = {"uw_mean", "Reynolds shear stress mean(u'w')", 1},
    [PIV_STAT_VW_MEAN] = {"vw_mean", "Reynolds shear stress mean(v'w')", 1},
    [PIV_STAT_U_MEAN_UNCERTAINTY] = {"u_mean_uncertainty",
                                     "standard uncertainty of u_mean: u' / sqrt(n_eff)"},
    [PIV_STAT_V_MEAN_UNCERTAINTY] = {"v_mean_uncertainty",
                                     "standard uncertainty of v_mean: v' / sqrt(n_eff)"},
    [PIV_STAT_U_RMS_UNCERTAINTY] = {"u_rms_uncertainty",
                                    "standard uncertainty of u_rms: u_rms / sqrt(2 n_eff)"},
    [PIV_STAT_V_RMS_UNCERTAINTY] = {"v_rms_uncertainty",
                                    "standard uncertainty of v_rms: v_rms / sqrt(2 n_eff)"},
    [PIV_STAT_VORTICITY_MEAN_UNCERTAINTY] = {"vorticity_mean_uncertainty",
                                             "standard uncertainty of vorticity_mean"},
    [PIV_STAT_W_MEAN_UNCERTAINTY] = {"w_mean_uncertainty",
                                     "standard uncertainty of w_mean: w' / sqrt(n_eff)", 1},
    [PIV_STAT_W_RMS_UNCERTAINTY] = {"w_rms_uncertainty",
                                    "standard uncertainty of w_rms: w_rms / sqrt(2 n_eff)", 1},
    [PIV_STAT_SIGMA_U_RMS] = {"sigma_u_rms", "RMS of the vectors' measurement uncertainty of u"},
    [PIV_STAT_SIGMA_V_RMS] = {"sigma_v_rms", "RMS of the vectors' measurement uncertainty of v"},
    [PIV_STAT_N_EFF] = {"n_eff", "effective number of independent samples (autocorrelation)"},
    [PIV_STAT_COUNT] = {"count", "samples of the mean: n_valid + n_replaced"},
    [PIV_STAT_N_VALID] = {"n_valid", "fields with a valid vector here"},
    [PIV_STAT_N_REPLACED] = {"n_replaced", "fields with a replaced vector here"},
};

double
piv_stat_value (const piv_stats_point_t *p, piv_stat_t f)
{
    const double values[PIV_STAT_FIGURES] = {
        [PIV_STAT_U_MEAN] = p->u_mean,
        [PIV_STAT_V_MEAN] = p->v_mean,
        [PIV_STAT_U_RMS] = p->u_rms,
        [PIV_STAT_V_RMS] = p->v_rms,
        [PIV_STAT_UV_MEAN] = p->uv_mean,
        [PIV_STAT_VORTICITY_MEAN] = p->vorticity_mean,
        [PIV_STAT_W_MEAN] = p->w_mean,
        [PIV_STAT_W_RMS] = p->w_rms,
        [PIV_STAT_UW_MEAN] = p->uw_mean,
        [PIV_STAT_VW_MEAN] = p->vw_mean,
        [PIV_STAT_U_MEAN_UNCERTAINTY] = p->u_mean_uncertainty,
        [PIV_STAT_V_MEAN_UNCERTAINTY] = p->v_mean_uncertainty,
        [PIV_STAT_U_RMS_UNCERTAINTY] = p->u_rms_uncertainty,
        [PIV_STAT_V_RMS_UNCERTAINTY] = p->v_rms_uncertainty,
        [PIV_STAT_VORTICITY_MEAN_UNCERTAINTY] = p->vorticity_mean_uncertainty,
        [PIV_STAT_W_MEAN_UNCERTAINTY] = p->w_mean_uncertainty,
        [PIV_STAT_W_RMS_UNCERTAINTY] = p->w_rms_uncertainty,
        [PIV_STAT_SIGMA_U_RMS] = p->sigma_u_rms,
        [PIV_STAT_SIGMA_V_RMS] = p->sigma_v_rms,
        [PIV_STAT_N_EFF] = p->n_eff,
        [PIV_STAT_COUNT] = (double) p->count,
        [PIV_STAT_N_VALID] = (double) p->n_valid,
        [PIV_STAT_N_REPLACED] = (double) p->n_replaced,
    };
    return f >= 0 && f < PIV_STAT_FIGURES ? values[f] : NAN;
}

const char *
piv_stat_unit (const piv_calib_t *c, piv_stat_t f)
{
    if (f >= PIV_STAT_N_EFF)
        return "1";
    if (f == PIV_STAT_UV_MEAN || f == PIV_STAT_UW_MEAN || f == PIV_STAT_VW_MEAN)
        return piv_stats_uv_unit (c);
    int rate = f == PIV_STAT_VORTICITY_MEAN || f == PIV_STAT_VORTICITY_MEAN_UNCERTAINTY;
    return piv_calib_unit (c, rate ? PIV_UNIT_RATE : PIV_UNIT_VELOCITY);
}

void
piv_stats_columns (const piv_stats_t *self, long k, const piv_calib_t *c, double col[8],
                   int64_t *count)
{
    piv_stats_point_t pt;
    piv_stats_point_in (self, k, c, &pt);
    double values[8] = {pt.x,     pt.y,     pt.u_mean,  pt.v_mean,
                        pt.u_rms, pt.v_rms, pt.uv_mean, pt.vorticity_mean};
    memcpy (col, values, sizeof values);
    *count = pt.count;
}

// A column: "nan" for every NaN (printf may write "-nan"), else 9
// significant digits; then 'after'.
static void
s_text_number (FILE *out, double x, char after)
{
    if (isnan (x))
        fprintf (out, "nan%c", after);
    else
        fprintf (out, "%.9g%c", x, after);
}

int
piv_stats_write (const piv_stats_t *self, FILE *out, piv_format_t format, const piv_calib_t *c,
                 const char *header)
{
    if (format == PIV_FORMAT_VTK)
        return piv_stats_write_vtk (self, out, c, header);
    piv_stats_summary_t sum;
    piv_stats_summary (self, &sum);
    char calib[256];
    piv_calib_describe (c, calib, sizeof calib);
    const char *len = piv_calib_unit (c, PIV_UNIT_LENGTH),
               *vel = piv_calib_unit (c, PIV_UNIT_VELOCITY);
    piv_write_header_lines (out, header, "# ");
    fprintf (out, "# calibration: %s\n", calib);
    fprintf (out, "# fields: %lld, valid fraction %.4f, grid %dx%d step %d px window %d px\n",
             (long long) sum.fields, sum.valid_fraction, self->nx, self->ny, self->step,
             self->window);
    fprintf (out, "# units: x y %s, u_mean v_mean u_rms v_rms %s, uv_mean %s, count samples "
                  "(n_valid valid and n_replaced replaced vectors)%s%s\n",
             len, vel, piv_stats_uv_unit (c),
             format == PIV_FORMAT_TECPLOT ? ", vorticity_mean " : "",
             format == PIV_FORMAT_TECPLOT ? piv_calib_unit (c, PIV_UNIT_RATE) : "");
    // A stereo series' columns come after the planar ones, which keep
    // their places for readers that count columns.
    int three = self->sums3 != NULL;
    if (three)
        fprintf (out, "# units: w_mean w_rms %s, uw_mean vw_mean %s (w along +z, out of the "
                      "light sheet)\n",
                 vel, piv_stats_uv_unit (c));
    // The uncertainty's columns come last, for the same readers.
    fputs ("# units:", out);
    for (int f = PIV_STAT_U_MEAN_UNCERTAINTY; f <= PIV_STAT_N_EFF; f++)
        if (three || !piv_stat_figures[f].stereo)
            fprintf (out, " %s %s%s", piv_stat_figures[f].name, piv_stat_unit (c, f),
                     f < PIV_STAT_N_EFF ? "," : "");
    fputs (" (standard uncertainties; n_eff from the autocorrelation, doc/units.md)\n", out);
    if (format == PIV_FORMAT_TECPLOT) {
        fprintf (out, "TITLE = \"pivfarm statistics\"\n");
        fprintf (out, "VARIABLES = \"x\", \"y\", \"u_mean\", \"v_mean\", \"u_rms\", \"v_rms\", "
                      "\"uv_mean\", \"count\", \"vorticity_mean\", \"n_valid\", \"n_replaced\"%s",
                 three ? ", \"w_mean\", \"w_rms\", \"uw_mean\", \"vw_mean\"" : "");
        for (int f = PIV_STAT_U_MEAN_UNCERTAINTY; f <= PIV_STAT_N_EFF; f++)
            if (three || !piv_stat_figures[f].stereo)
                fprintf (out, ", \"%s\"", piv_stat_figures[f].name);
        fputc ('\n', out);
        fprintf (out, "ZONE I=%d, J=%d, F=POINT\n", self->nx, self->ny);
    }
    else {
        fprintf (out, "# x y u_mean v_mean u_rms v_rms uv_mean count n_valid n_replaced%s",
                 three ? " w_mean w_rms uw_mean vw_mean" : "");
        for (int f = PIV_STAT_U_MEAN_UNCERTAINTY; f <= PIV_STAT_N_EFF; f++)
            if (three || !piv_stat_figures[f].stereo)
                fprintf (out, " %s", piv_stat_figures[f].name);
        fputc ('\n', out);
    }
    long n = (long) self->nx * self->ny;
    for (long k = 0; k < n; k++) {
        double col[8];
        int64_t count;
        piv_stats_columns (self, k, c, col, &count);
        for (int i = 0; i < 7; i++)
            s_text_number (out, col[i], ' ');
        fprintf (out, "%lld ", (long long) count);
        if (format == PIV_FORMAT_TECPLOT)
            s_text_number (out, col[7], ' ');
        fprintf (out, "%lld %lld ", (long long) self->count[k], (long long) self->r_count[k]);
        piv_stats_point_t pt;
        piv_stats_point_in (self, k, c, &pt);
        if (three) {
            s_text_number (out, pt.w_mean, ' ');
            s_text_number (out, pt.w_rms, ' ');
            s_text_number (out, pt.uw_mean, ' ');
            s_text_number (out, pt.vw_mean, ' ');
        }
        for (int f = PIV_STAT_U_MEAN_UNCERTAINTY; f <= PIV_STAT_N_EFF; f++)
            if (three || !piv_stat_figures[f].stereo)
                s_text_number (out, piv_stat_value (&pt, f), f < PIV_STAT_N_EFF ? ' ' : '\n');
    }
    return ferror (out) ? -1 : 0;
}
