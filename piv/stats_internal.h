// stats_internal.h — what piv/stats.c and piv/vtk.c share: the body of the
// statistics object and the helpers of the writers. Not for other modules.

#ifndef PIV_STATS_INTERNAL_H
#define PIV_STATS_INTERNAL_H

#include "piv/stats.h"

// The sums of a point, S_SUMS doubles each, in this order (also the order
// of the arrays in the encoding, doc/units.md).
enum {
    S_MEAN_U, // running mean of u, px/frame
    S_MEAN_V, // running mean of v
    S_M2_U,   // sum of squared deviations of u (Welford)
    S_M2_V,   // of v
    S_C_UV,   // co-moment sum of u'v'
    S_MEAN_W, // running mean of the finite vorticity samples, 1/frame
    S_THEN_U, // mean u when then_fields fields were counted (NaN: no sample then)
    S_THEN_V, // mean v then
    S_NEXT_U, // mean u when next_fields fields were counted
    S_NEXT_V, // mean v then
    S_SUMS
};

// The sums of a stereo series' point besides, S_SUMS3 doubles each (the
// state's version 3 appends them, doc/units.md).
enum {
    S3_MEAN_W, // running mean of w, px/frame (along +Z)
    S3_M2_W,   // sum of squared deviations of w
    S3_C_UW,   // co-moment sum of u'w'
    S3_C_VW,   // of v'w'
    S_SUMS3
};

struct _piv_stats_t {
    int nx, ny;          // grid columns and rows
    int step, window;    // grid spacing and final window, px
    float x0, y0;        // position of point 0, px
    int64_t fields;      // fields counted
    int64_t then_fields; // fields counted at the snapshot compared with (0: none)
    int64_t next_fields; // fields counted at the pending snapshot (0: none)
    int64_t *count;      // valid samples per point
    int64_t *r_count;    // replaced samples per point (the mean counts both)
    int64_t *w_count;    // finite vorticity samples per point
    double *sums;        // S_SUMS per point
    double *sums3;       // S_SUMS3 per point of a stereo series (fields with w), else NULL
};

// Point k's columns converted by c (may be NULL): x y u_mean v_mean u_rms
// v_rms uv_mean vorticity_mean, and its count.
void piv_stats_columns (const piv_stats_t *self, long k, const piv_calib_t *c, double col[8],
                        int64_t *count);

// The unit of mean(u'v'): "m^2/s^2" or "px^2/frame^2".
const char *piv_stats_uv_unit (const piv_calib_t *c);

// piv_stats_write's VTK form (piv/vtk.c).
int piv_stats_write_vtk (const piv_stats_t *self, FILE *out, const piv_calib_t *c,
                         const char *header);

// Writes each line of 'header' (may be NULL) with 'prefix' before it
// (piv/field.c).
void piv_write_header_lines (FILE *out, const char *header, const char *prefix);

#endif
