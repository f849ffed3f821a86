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
    if (!self->count || !self->r_count || !self->w_count || !self->sums
        || (field->w && !self->sums3)) {
        piv_stats_destroy (&self);
        return NULL;
    }
    // Snapshots of the mean: none yet.
    for (size_t k = 0; k < n; k++)
        for (int s = S_THEN_U; s < S_SUMS; s++)
            self->sums[k * S_SUMS + s] = NAN;
    return self;
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

int
piv_stats_add (piv_stats_t *self, const piv_field_t *field, const float *vorticity)
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
        }
        if (vorticity && isfinite (vorticity[k])) {
            double c = (double) ++self->w_count[k];
            s[S_MEAN_W] += (vorticity[k] - s[S_MEAN_W]) / c;
        }
    }
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
    // Both sums run over the same points: the ratio of RMS is that of sums.
    if (self->then_fields == 0)
        out->convergence = NAN;
    else if (mean > 0)
        out->convergence = sqrt (change / mean);
    else
        out->convergence = change == 0 ? 0 : NAN;
}

// ---------------------------------------------------------------------------
// The state as bytes: doc/units.md, "Statistics"

#define S_MAGIC "PVS1"
#define S_VERSION 2 // 1: without the replaced counts (decoded as none)
#define S_VERSION3 3 // a stereo series': version 2, then the S_SUMS3 sums
#define S_HEADER 56 // magic, version, nx, ny, step, window, x0, y0, 3 int64
#define S_PER_POINT(version) \
    (8 * ((version) >= 2 ? 3 : 2) + 8 * S_SUMS + ((version) >= 3 ? 8 * S_SUMS3 : 0))

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

int
piv_stats_encode (const piv_stats_t *self, unsigned char **buf_p, size_t *size_p)
{
    size_t n = (size_t) self->nx * (size_t) self->ny;
    // A planar series keeps version 2, byte for byte as before stereo.
    uint32_t version = self->sums3 ? S_VERSION3 : S_VERSION;
    size_t size = S_HEADER + n * S_PER_POINT (version);
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
    for (int s = 0; s < S_SUMS; s++)
        for (size_t k = 0; k < n; k++, p += 8) {
            uint64_t bits;
            memcpy (&bits, &self->sums[k * S_SUMS + s], 8);
            s_put64 (p, bits);
        }
    for (int s = 0; self->sums3 && s < S_SUMS3; s++)
        for (size_t k = 0; k < n; k++, p += 8) {
            uint64_t bits;
            memcpy (&bits, &self->sums3[k * S_SUMS3 + s], 8);
            s_put64 (p, bits);
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
    if (version < 1 || version > S_VERSION3)
        return "unknown version";
    uint32_t nx = s_get32 (p + 8), ny = s_get32 (p + 12);
    if (nx == 0 || ny == 0 || nx > 1u << 20 || ny > 1u << 20 || (uint64_t) nx * ny > 1u << 28)
        return "absurd grid size";
    if ((int32_t) s_get32 (p + 16) <= 0 || (int32_t) s_get32 (p + 20) < 0)
        return "bad step or window";
    if (size != S_HEADER + (uint64_t) nx * ny * S_PER_POINT (version))
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
    grid.w = version >= S_VERSION3 ? &w0 : NULL; // only its presence counts
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
    for (int s = 0; s < S_SUMS; s++)
        for (size_t k = 0; k < n; k++, p += 8) {
            uint64_t bits = s_get64 (p);
            memcpy (&self->sums[k * S_SUMS + s], &bits, 8);
        }
    for (int s = 0; self->sums3 && s < S_SUMS3; s++)
        for (size_t k = 0; k < n; k++, p += 8) {
            uint64_t bits = s_get64 (p);
            memcpy (&self->sums3[k * S_SUMS3 + s], &bits, 8);
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
        [PIV_STAT_COUNT] = (double) p->count,
        [PIV_STAT_N_VALID] = (double) p->n_valid,
        [PIV_STAT_N_REPLACED] = (double) p->n_replaced,
    };
    return f >= 0 && f < PIV_STAT_FIGURES ? values[f] : NAN;
}

const char *
piv_stat_unit (const piv_calib_t *c, piv_stat_t f)
{
    if (f >= PIV_STAT_COUNT)
        return "1";
    if (f == PIV_STAT_UV_MEAN || f == PIV_STAT_UW_MEAN || f == PIV_STAT_VW_MEAN)
        return piv_stats_uv_unit (c);
    return piv_calib_unit (c, f == PIV_STAT_VORTICITY_MEAN ? PIV_UNIT_RATE : PIV_UNIT_VELOCITY);
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
    if (format == PIV_FORMAT_TECPLOT) {
        fprintf (out, "TITLE = \"pivfarm statistics\"\n");
        fprintf (out, "VARIABLES = \"x\", \"y\", \"u_mean\", \"v_mean\", \"u_rms\", \"v_rms\", "
                      "\"uv_mean\", \"count\", \"vorticity_mean\", \"n_valid\", \"n_replaced\"%s\n",
                 three ? ", \"w_mean\", \"w_rms\", \"uw_mean\", \"vw_mean\"" : "");
        fprintf (out, "ZONE I=%d, J=%d, F=POINT\n", self->nx, self->ny);
    }
    else
        fprintf (out, "# x y u_mean v_mean u_rms v_rms uv_mean count n_valid n_replaced%s\n",
                 three ? " w_mean w_rms uw_mean vw_mean" : "");
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
        fprintf (out, "%lld %lld%c", (long long) self->count[k], (long long) self->r_count[k],
                 three ? ' ' : '\n');
        piv_stats_point_t pt;
        if (three && piv_stats_point_in (self, k, c, &pt) == 0) {
            s_text_number (out, pt.w_mean, ' ');
            s_text_number (out, pt.w_rms, ' ');
            s_text_number (out, pt.uw_mean, ' ');
            s_text_number (out, pt.vw_mean, '\n');
        }
    }
    return ferror (out) ? -1 : 0;
}
