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

// The uncertainty of the run statistics (doc/units.md, "Uncertainty of the
// statistics"): lag products of the velocity's fluctuations for the
// autocorrelation, taken between fields in time order. A field waits among
// the PIV_STATS_PENDING latest until a later one pushes it out (the farm
// records results out of order), then pairs with the PIV_STATS_LAGS fields
// released before it. A field coming in takes a free slot first, then the
// oldest pending one (perhaps itself) is released.
#define PIV_STATS_LAGS 8
#define PIV_STATS_PENDING 4
#define PIV_STATS_RING (PIV_STATS_LAGS + PIV_STATS_PENDING + 1) // + the one coming in

// The uncertainty sums of a point, S_SUMSU doubles each (the state's
// versions 4 and 5 append them, doc/units.md).
enum {
    SU_LAG = 0,                             // sums of the lag-j products, j = 1..LAGS: the
                                            // sum over u, v (and w) of (x_i - K)(x_i+j - K)
    SU_NLAG = SU_LAG + PIV_STATS_LAGS,      // pairs counted at each lag
    SU_K_U = SU_NLAG + PIV_STATS_LAGS,      // the shift K of u (NaN: not fixed yet)
    SU_K_V,                                 // of v
    SU_K_W,                                 // of w (a stereo series')
    SU_M2_O,                                // sum of squared deviations of the vorticity
    SU_N_O,                                 // vorticity samples in SU_M2_O
    SU_SIG_U,                               // mean of sigma_u^2 over the samples with one, px^2
    SU_SIG_V,                               // of sigma_v^2
    SU_N_SIG,                               // samples with a finite sigma_u and sigma_v
    S_SUMSU
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
    double *sumsu;       // S_SUMSU per point
    int comps;           // velocity components: 2, or 3 in a stereo series
    float *ring;         // per point, PIV_STATS_RING slots of comps values (NaN: no sample)
    int64_t slot_seq[PIV_STATS_RING]; // the sequence number each slot holds (-1: free)
    int64_t released;    // the latest sequence number released to the lag products (-1: none)
    int64_t seq_max;     // the highest sequence number counted (-1: none)
    int64_t late;        // fields counted too late for the lag products
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
