// stats.h — running statistics of a series of vector fields on one grid:
// per grid point the count of valid samples, mean u and v, RMS of the
// fluctuations u' and v', the Reynolds shear stress mean(u'v') and the
// mean vorticity; per series the fields counted, the valid fraction and
// the convergence of the mean. Kept in image units (px, frame pairs) and
// converted on output (piv/calib.h). Accumulation is numerically stable
// (Welford) and its state encodes to bytes (the store's checkpoints),
// restored exactly. Plain C: no library.

#ifndef PIV_STATS_H
#define PIV_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "piv/calib.h"
#include "piv/field.h"

typedef struct _piv_stats_t piv_stats_t;

// Statistics on the grid of 'field' (nx, ny, x0, y0, step, window), none
// counted yet. NULL on no memory or a field without a regular grid.
piv_stats_t *piv_stats_new (const piv_field_t *field);
void piv_stats_destroy (piv_stats_t **self_p);

// The uncertainty of the statistics (its figures, the sums they need: 4x
// the state and the time of an add) kept (1, as piv_stats_new makes it)
// or not (0: those figures NaN, the state encoded as version 2 or 3).
// Turned on, it counts from the next field (a state decoded from version 2
// or 3 is off). 0, or -1 (no memory: left off).
int piv_stats_set_uncertainty (piv_stats_t *self, int on);
int piv_stats_has_uncertainty (const piv_stats_t *self);

// 1 if 'field' lies on the same grid (nx, ny, step, window and first
// position), else 0: a field that does not fits another series.
int piv_stats_fits (const piv_stats_t *self, const piv_field_t *field);

// Counts one field: each VALID or REPLACED vector is a sample of u, v at
// its point (a replaced vector is the validation's estimate there, as the
// derived quantities take it: without it a short run's mean has a hole
// wherever one field's vector was replaced), counted apart as n_valid and
// n_replaced so that a reader can judge the share of estimates;
// 'vorticity' (piv_field_derive's, may be NULL) adds its finite values to
// the mean vorticity. 0, or -1 if the field does not fit.
// The field is the one after the latest counted in time (piv_stats_add_at
// with the highest sequence number so far + 1). A field with sigma_u,
// sigma_v adds their squares to the mean measurement uncertainty.
int piv_stats_add (piv_stats_t *self, const piv_field_t *field, const float *vorticity);
// piv_stats_add of the field at 'seq' in time (the farm's pair id: any
// increasing numbering; the lags count fields in this order, not the gaps
// between numbers). Fields may come out of order: one waits among the 4
// latest before its lag products are taken; one older than a field already
// released (or seq < 0) counts in every figure but the autocorrelation
// (summary's 'late'). 0, or -1 if the field does not fit.
int piv_stats_add_at (piv_stats_t *self, const piv_field_t *field, const float *vorticity,
                      int64_t seq);

// One grid point, in image units.
typedef struct {
    double x, y;            // its position, px
    int64_t count;          // samples: n_valid + n_replaced
    int64_t n_valid;        // VALID vectors counted
    int64_t n_replaced;     // REPLACED vectors counted
    double u_mean, v_mean;  // px/frame; NaN when count is 0
    double u_rms, v_rms;    // RMS of u', v' (population: divided by count); NaN when count is 0
    double uv_mean;         // mean(u'v'), px^2/frame^2; NaN when count is 0
    double vorticity_mean;  // 1/frame; NaN without a finite sample
    int64_t vorticity_count;  // finite vorticity samples
    // A stereo series' (has_w 1; else 0 and the figures NaN), NaN when
    // count is 0: w along +Z, as u and v are (px/frame).
    int has_w;
    double w_mean, w_rms;     // mean w, RMS of w'
    double uw_mean, vw_mean;  // mean(u'w'), mean(v'w'), as uv_mean
    // Uncertainty (doc/units.md, "Uncertainty of the statistics"), standard
    // (one sigma), NaN until the autocorrelation is known (8 pairs at lag 1):
    double n_eff;             // independent samples among count: count / (1 + 2 sum rho_k)
    double u_mean_uncertainty, v_mean_uncertainty;  // u_rms / sqrt (n_eff)
    double u_rms_uncertainty, v_rms_uncertainty;    // u_rms / sqrt (2 n_eff'), n_eff' by rho_k^2
    double vorticity_mean_uncertainty;              // the vorticity's, with n_eff of the velocity
    double w_mean_uncertainty, w_rms_uncertainty;   // a stereo series' (else NaN)
    // The mean measurement uncertainty: RMS of the fields' sigma_u, sigma_v
    // here (NaN without fields that carry them). Already part of u_rms.
    double sigma_u_rms, sigma_v_rms;
} piv_stats_point_t;
// Grid size and point k (k = j * nx + i). 0 or -1 (k out of range).
void piv_stats_grid (const piv_stats_t *self, int *nx, int *ny, int *step, int *window);
int piv_stats_point (const piv_stats_t *self, long k, piv_stats_point_t *out);
// Point k converted by 'c' (NULL: image units), as every file writes it:
// x, y as positions, means and RMS as velocities, uv_mean as their product
// (the sign of v too), the vorticity as a rate; counts unchanged. 0 or -1.
int piv_stats_point_in (const piv_stats_t *self, long k, const piv_calib_t *c,
                        piv_stats_point_t *out);

// The figures of a point every statistics file of the export holds, in
// this order (ctl/h5.c, ctl/mat.c read the table); the counts come last.
typedef enum {
    PIV_STAT_U_MEAN,
    PIV_STAT_V_MEAN,
    PIV_STAT_U_RMS,
    PIV_STAT_V_RMS,
    PIV_STAT_UV_MEAN,
    PIV_STAT_VORTICITY_MEAN,
    PIV_STAT_W_MEAN,  // PIV_STAT_W_MEAN .. PIV_STAT_VW_MEAN: a stereo series' only
    PIV_STAT_W_RMS,
    PIV_STAT_UW_MEAN,
    PIV_STAT_VW_MEAN,
    PIV_STAT_U_MEAN_UNCERTAINTY,
    PIV_STAT_V_MEAN_UNCERTAINTY,
    PIV_STAT_U_RMS_UNCERTAINTY,
    PIV_STAT_V_RMS_UNCERTAINTY,
    PIV_STAT_VORTICITY_MEAN_UNCERTAINTY,
    PIV_STAT_W_MEAN_UNCERTAINTY, // stereo only
    PIV_STAT_W_RMS_UNCERTAINTY,  // stereo only
    PIV_STAT_SIGMA_U_RMS,
    PIV_STAT_SIGMA_V_RMS,
    PIV_STAT_N_EFF,  // a real number, unit "1"
    PIV_STAT_COUNT, // the first count: integers from here on
    PIV_STAT_N_VALID,
    PIV_STAT_N_REPLACED,
    PIV_STAT_FIGURES
} piv_stat_t;
typedef struct {
    const char *name;      // as datasets and fields are named
    const char *long_name; // for people (CF long_name)
    int stereo;            // 1: only a stereo series has it (piv_stats_has_w)
} piv_stat_info_t;
extern const piv_stat_info_t piv_stat_figures[PIV_STAT_FIGURES];
// 1 if the series counts fields with w (stereo: a state of version 3;
// piv_stats_new of a field with w), else 0. A series holds one kind only:
// a field of the other kind does not fit it.
int piv_stats_has_w (const piv_stats_t *self);
// Figure f of point 'p' (piv_stats_point_in's, converted), counts too.
double piv_stat_value (const piv_stats_point_t *p, piv_stat_t f);
// Its unit under 'c': "m/s" or "px/frame", "m^2/s^2", "1/s", "1" (counts, n_eff).
const char *piv_stat_unit (const piv_calib_t *c, piv_stat_t f);

// The series as a whole.
typedef struct {
    int64_t fields;           // fields counted
    double valid_fraction;    // VALID samples / (fields * points); NaN before a field
    double convergence;       // RMS change of the mean velocity over the last ~10 % of the
                              // fields, relative to the RMS of the mean speed; NaN until known
    int64_t convergence_from; // the field count the current mean is compared with
    int64_t late;             // fields counted too late for the autocorrelation (piv_stats_add_at)
} piv_stats_summary_t;
void piv_stats_summary (const piv_stats_t *self, piv_stats_summary_t *out);
// How well the mean field is known: the RMS over the points that have one
// of the mean velocity's standard uncertainty sqrt(u_mean_uncertainty^2 +
// v_mean_uncertainty^2 (+ w's)), px/frame (piv_calib_speed converts it);
// NaN where no point has one. O(points x lags): for a reader, not per field.
double piv_stats_mean_uncertainty (const piv_stats_t *self);

// The whole state as bytes (a versioned little-endian layout, doc/units.md;
// version 2 adds the replaced counts, version 1 states decode with none;
// versions 4 (planar) and 5 (stereo) append the uncertainty's sums to 2
// and 3, whose states decode with none: their uncertainty is NaN until
// enough fields are counted after them):
// a malloc'd buffer in *buf_p. 0 or -1 (no memory). Decode gives back the
// same statistics, or NULL with err ("bad statistics: ...") for bytes that
// are not such a state (wrong magic, sizes that do not add up).
int piv_stats_encode (const piv_stats_t *self, unsigned char **buf_p, size_t *size_p);
// The size piv_stats_encode gives the state now, bytes (its cost to save).
size_t piv_stats_state_size (const piv_stats_t *self);
piv_stats_t *piv_stats_decode (const void *buf, size_t size, char *err, size_t errlen);

// Writes the statistics field converted by 'c' (may be NULL: image units):
//   PIV_FORMAT_TXT      one line per point "x y u_mean v_mean u_rms v_rms uv_mean count"
//   PIV_FORMAT_TECPLOT  the same columns plus vorticity_mean as a Tecplot ASCII zone
//   PIV_FORMAT_VTK      a legacy VTK STRUCTURED_GRID (ParaView) with those as point data
// after '#' header lines (txt, tecplot: each line of 'header' prefixed "# ";
// vtk: the title line) stating the units of every column and the
// calibration. Points without samples write NaN ("nan"; VTK: a NaN in its
// BINARY data, since VTK's ASCII reader refuses "nan"). 0 or -1.
int piv_stats_write (const piv_stats_t *self, FILE *out, piv_format_t format,
                     const piv_calib_t *c, const char *header);

// A field as a legacy VTK STRUCTURED_GRID file ParaView opens (BINARY
// data: big-endian float32, int32): points (x, y, 0), vectors "velocity"
// (u, v, w; w 0 in a planar field; NaN at INVALID vectors), scalars
// vorticity, divergence, speed, peak_ratio (float), a stereo field's
// residual (image px), a field with uncertainty's sigma_u, sigma_v (u's
// unit), flags (int); converted by 'c' (NULL: image units);
// the title line holds 'title' (lines joined by "; "), the units and the
// calibration, cut at 255 bytes. 0 or -1.
int piv_field_write_vtk (const piv_field_t *field, FILE *out, const piv_calib_t *c,
                         const char *title);
// The same with 'nmore' (0 to PIV_MORE_MAX) further scalars 'more' (float,
// written as given: their unit is the caller's to convert to and to state
// in the title) before flags. 0 or -1.
int piv_field_write_vtk_more (const piv_field_t *field, FILE *out, const piv_calib_t *c,
                              const char *title, const piv_column_t *more, int nmore);

#endif
