// smooth.h — robust smoothing of a vector field by penalized least squares
// on the discrete cosine transform (libpiv internal): Garcia's "smoothn"
// (Comput. Stat. Data Anal. 54, 2010; Exp. Fluids 50, 2011), its amount
// chosen by generalized cross-validation, outliers down-weighted by
// bisquare weights, vectors of weight 0 (invalid, masked) filled in.

#ifndef PIV_SMOOTH_H
#define PIV_SMOOTH_H

#include "piv/piv.h"

// Smooths the nx x ny components u and v (row-major, k = j * nx + i) with
// weights w (0 .. 1; 0: the value is missing and not read; NULL: all 1)
// into zu, zv (which may be u, v). s > 0 fixes the smoothing parameter,
// s <= 0 chooses it by minimising the GCV score; *s_used (may be NULL)
// gets it. robust: three reweighting steps with bisquare weights of the
// residuals, so that outliers do not pull the surface. threads > 1: the
// two components' transforms run in two threads. Where every weight is 0
// the components come out 0. wout (may be NULL) gets the weights
// last used: the caller's times the robust ones, 0 for an outlier. 0, or
// -1 (no memory, no FFTW plan).
int piv_smoothn (int nx, int ny, const float *u, const float *v, const float *w, double s,
                 int robust, int threads, float *zu, float *zv, double *s_used, float *wout);

// piv.c's pool of threads for one pair (the engine's, made once). Runs fn
// (arg, first, last, part) over [0, count) in chunks of contiguous items
// that up to nthreads threads take in turn, 'part' the thread's index (0:
// the calling thread; per-thread buffers); pool NULL: fn (arg, 0, count,
// 0) here. Returns when every item is done.
typedef struct _piv_pool_t piv_pool_t;
typedef void (piv_part_fn) (void *arg, int first, int last, int part);
// nthreads - 1 workers (fewer if threads cannot be made); NULL: no memory.
piv_pool_t *piv_pool_new (int nthreads);
void piv_pool_destroy (piv_pool_t **pool_p);
void piv_pool_run (piv_pool_t *pool, int nthreads, int count, piv_part_fn *fn, void *arg);

// As piv_smoothn, the components' transforms on 'pool' (NULL: in turn here).
int piv_smoothn_pool (int nx, int ny, const float *u, const float *v, const float *w, double s,
                      int robust, piv_pool_t *pool, float *zu, float *zv, double *s_used,
                      float *wout);

// piv_validate_median_peaks with the rows of the field tested at once on
// pool (NULL: here) in up to nthreads parts: the same result; candidates is
// then called from several threads at once. 'curved' 0 is the plain test
// (no second look against the lines' prediction, replacement by the
// neighbours' median): the settings' median=plain.
int piv_validate_median_pool (piv_field_t *field, double eps, double threshold, int curved,
                              piv_candidates_fn *candidates, void *arg, piv_pool_t *pool,
                              int nthreads);

// piv.c's lock over the FFTW planner (planning is not thread-safe): the
// smoother plans its cosine transforms under it.
void piv_fftw_planner_lock (void);
void piv_fftw_planner_unlock (void);
// Under the lock: a plan was made (piv_wisdom_save_new then looks).
void piv_fftw_planned (void);

#endif
