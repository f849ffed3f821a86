// vtk.c — legacy VTK files (STRUCTURED_GRID, which ParaView and python3-vtk
// read) of a vector field and of the statistics of a series, converted by a
// calibration. See stats.h and doc/units.md. The data are BINARY (big-endian
// float32 and int32 after ASCII keyword lines): VTK 9.1's legacy reader
// refuses "nan" in an ASCII file, and holes must stay NaN.

#include "piv/derived.h"
#include "piv/stats.h"
#include "piv/stats_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// A VTK title is one line of at most 255 bytes.
#define S_TITLE_MAX 255

// Writes the title line: the lines of 'title' joined by "; ", then the
// units and the calibration, cut at 255 bytes (on a UTF-8 boundary).
static void
s_title (FILE *out, const char *title, const piv_calib_t *c, const char *what)
{
    char line[1024], calib[256];
    size_t used = 0;
    for (const char *p = title ? title : ""; *p && used < sizeof line - 3; p++) {
        if (*p == '\n' && p[1])
            used += (size_t) snprintf (line + used, sizeof line - used, "; ");
        else if (*p != '\n' && *p != '\r')
            line[used++] = *p;
    }
    line[used] = '\0';
    piv_calib_describe (c, calib, sizeof calib);
    snprintf (line + used, sizeof line - used, "%s%s in %s, %s, %s; calibration %s",
              used ? "; " : "", what, piv_calib_unit (c, PIV_UNIT_LENGTH),
              piv_calib_unit (c, PIV_UNIT_VELOCITY), piv_calib_unit (c, PIV_UNIT_RATE), calib);
    size_t len = strlen (line);
    if (len > S_TITLE_MAX) {
        len = S_TITLE_MAX;
        while (len > 0 && ((unsigned char) line[len] & 0xC0) == 0x80)
            len--;
    }
    fprintf (out, "# vtk DataFile Version 3.0\n%.*s\nBINARY\nDATASET STRUCTURED_GRID\n", (int) len,
             line);
}

// A float32, big-endian as the legacy format wants it.
static void
s_number (FILE *out, double x)
{
    float f = (float) x;
    uint32_t bits;
    memcpy (&bits, &f, 4);
    for (int i = 3; i >= 0; i--)
        fputc ((int) (bits >> (8 * i)) & 0xFF, out);
}

// An int32, big-endian.
static void
s_int (FILE *out, int32_t x)
{
    for (int i = 3; i >= 0; i--)
        fputc ((int) ((uint32_t) x >> (8 * i)) & 0xFF, out);
}

// The grid's points, converted by c.
static void
s_points (FILE *out, int nx, int ny, const float *xs, const float *ys, double x0, double y0,
          double step, const piv_calib_t *c)
{
    fprintf (out, "DIMENSIONS %d %d 1\nPOINTS %ld float\n", nx, ny, (long) nx * ny);
    for (long k = 0; k < (long) nx * ny; k++) {
        double x, y;
        if (xs)
            piv_calib_position (c, xs[k], ys[k], &x, &y);
        else
            piv_calib_position (c, x0 + (double) (k % nx) * step, y0 + (double) (k / nx) * step, &x,
                                &y);
        s_number (out, x);
        s_number (out, y);
        s_number (out, 0);
    }
    fputc ('\n', out);
}

// One SCALARS float array of n values.
static void
s_scalars (FILE *out, const char *name, const float *values, long n)
{
    fprintf (out, "SCALARS %s float 1\nLOOKUP_TABLE default\n", name);
    for (long k = 0; k < n; k++)
        s_number (out, values[k]);
    fputc ('\n', out);
}

int
piv_field_write_vtk (const piv_field_t *field, FILE *out, const piv_calib_t *c, const char *title)
{
    return piv_field_write_vtk_more (field, out, c, title, NULL, 0);
}

int
piv_field_write_vtk_more (const piv_field_t *field, FILE *out, const piv_calib_t *c,
                          const char *title, const piv_column_t *more, int nmore)
{
    if (nmore < 0 || nmore > PIV_MORE_MAX)
        return -1;
    long n = (long) field->nx * field->ny;
    float *derived = malloc ((size_t) n * PIV_DERIVED_COUNT * sizeof (float));
    if (!derived)
        return -1;
    piv_field_derive_all (field, c, derived);
    double ku, kv;
    piv_calib_velocity (c, 1, 1, &ku, &kv);
    s_title (out, title, c, "pivfarm vector field");
    s_points (out, field->nx, field->ny, field->x, field->y, 0, 0, 0, c);
    fprintf (out, "POINT_DATA %ld\nVECTORS velocity float\n", n);
    for (long k = 0; k < n; k++) {
        // An invalid vector is a hole: no arrow.
        int hole = field->flags[k] >= PIV_FLAG_INVALID;
        s_number (out, hole ? NAN : field->u[k] * ku);
        s_number (out, hole ? NAN : field->v[k] * kv);
        // w along +Z: its sign is the sheet's normal, which y_up leaves alone.
        s_number (out, !field->w ? 0 : hole ? NAN : field->w[k] * fabs (ku));
    }
    fputc ('\n', out);
    for (int q = 0; q < PIV_DERIVED_COUNT; q++)
        s_scalars (out, piv_quantities[q].name, derived + q * n, n);
    s_scalars (out, "peak_ratio", field->peak_ratio, n);
    if (field->w && field->residual)
        s_scalars (out, "residual", field->residual, n);
    if (field->sigma_u && field->sigma_v) {
        // Each vector's standard uncertainty, in u's unit: a spread, so
        // scaled by |ku| whatever y_up does to v. A hole's stays NaN.
        for (int a = 0; a < 2; a++) {
            const float *sigma = a ? field->sigma_v : field->sigma_u;
            for (long k = 0; k < n; k++)
                derived[k] = (float) (sigma[k] * fabs (ku));
            s_scalars (out, a ? "sigma_v" : "sigma_u", derived, n);
        }
        // The vorticity's, in its unit (a rate: never turned by y_up).
        piv_field_derive_sigma_vorticity (field, PIV_STENCIL_DEFAULT, derived);
        for (long k = 0; k < n; k++)
            derived[k] = (float) piv_calib_divergence (c, derived[k]);
        s_scalars (out, "sigma_vorticity", derived, n);
    }
    for (int m = 0; m < nmore; m++)
        s_scalars (out, more[m].name, more[m].values, n);
    fprintf (out, "SCALARS flags int 1\nLOOKUP_TABLE default\n");
    for (long k = 0; k < n; k++)
        s_int (out, field->flags[k]);
    fputc ('\n', out);
    free (derived);
    return ferror (out) ? -1 : 0;
}

const char *
piv_stats_uv_unit (const piv_calib_t *c)
{
    return c && c->set ? "m^2/s^2" : "px^2/frame^2";
}

int
piv_stats_write_vtk (const piv_stats_t *self, FILE *out, const piv_calib_t *c, const char *header)
{
    long n = (long) self->nx * self->ny;
    double *col = malloc ((size_t) n * 8 * sizeof (double));
    int64_t *count = malloc ((size_t) n * sizeof (int64_t));
    float *values = malloc ((size_t) n * sizeof (float));
    if (!col || !count || !values) {
        free (col);
        free (count);
        free (values);
        return -1;
    }
    for (long k = 0; k < n; k++)
        piv_stats_columns (self, k, c, col + 8 * k, count + k);
    piv_stats_summary_t sum;
    piv_stats_summary (self, &sum);
    char what[128];
    snprintf (what, sizeof what, "pivfarm statistics of %lld fields (uv_mean %s)",
              (long long) sum.fields, piv_stats_uv_unit (c));
    s_title (out, header, c, what);
    s_points (out, self->nx, self->ny, NULL, NULL, self->x0, self->y0, self->step, c);
    fprintf (out, "POINT_DATA %ld\nVECTORS velocity_mean float\n", n);
    int three = piv_stats_has_w (self);
    for (long k = 0; k < n; k++) {
        piv_stats_point_t pt = {.w_mean = 0};
        if (three)
            piv_stats_point_in (self, k, c, &pt);
        s_number (out, col[8 * k + 2]);
        s_number (out, col[8 * k + 3]);
        s_number (out, pt.w_mean); // 0 in a planar series
    }
    fputc ('\n', out);
    static const char *const names[] = {"u_rms", "v_rms", "uv_mean", "vorticity_mean"};
    for (int a = 0; a < 4; a++) {
        for (long k = 0; k < n; k++)
            values[k] = (float) col[8 * k + 4 + a];
        s_scalars (out, names[a], values, n);
    }
    static const piv_stat_t stereo[] = {PIV_STAT_W_RMS, PIV_STAT_UW_MEAN, PIV_STAT_VW_MEAN};
    for (int a = 0; three && a < 3; a++) {
        for (long k = 0; k < n; k++) {
            piv_stats_point_t pt;
            piv_stats_point_in (self, k, c, &pt);
            values[k] = (float) piv_stat_value (&pt, stereo[a]);
        }
        s_scalars (out, piv_stat_figures[stereo[a]].name, values, n);
    }
    for (int f = PIV_STAT_U_MEAN_UNCERTAINTY; f <= PIV_STAT_N_EFF; f++) {
        if (piv_stat_figures[f].stereo && !three)
            continue;
        for (long k = 0; k < n; k++) {
            piv_stats_point_t pt;
            piv_stats_point_in (self, k, c, &pt);
            values[k] = (float) piv_stat_value (&pt, f);
        }
        s_scalars (out, piv_stat_figures[f].name, values, n);
    }
    const int64_t *counts[] = {count, self->count, self->r_count};
    static const char *const count_names[] = {"count", "n_valid", "n_replaced"};
    for (int a = 0; a < 3; a++) {
        fprintf (out, "SCALARS %s int 1\nLOOKUP_TABLE default\n", count_names[a]);
        for (long k = 0; k < n; k++)
            s_int (out, (int32_t) (counts[a][k] > INT32_MAX ? INT32_MAX : counts[a][k]));
        fputc ('\n', out);
    }
    free (col);
    free (count);
    free (values);
    return ferror (out) ? -1 : 0;
}
