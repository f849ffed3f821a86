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

// piv.c's lock over the FFTW planner (planning is not thread-safe): the
// smoother plans its cosine transforms under it.
void piv_fftw_planner_lock (void);
void piv_fftw_planner_unlock (void);

#endif
