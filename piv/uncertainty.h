// uncertainty.h — the uncertainty of each vector of the final pass (issue
// 27), from the two windows the pass correlated, deformed onto each other:
// correlation statistics (CS, Wieneke 2015) or the moment of correlation
// (MC, after Bhattacharya et al. 2018). libpiv internal: piv.c calls it.

#ifndef PIV_UNCERTAINTY_H
#define PIV_UNCERTAINTY_H

#include <stddef.h>
#include "piv/settings.h"

// Floats of scratch one thread needs for windows of n px.
size_t piv_uncertainty_scratch (int n);

// The standard uncertainty (px, one sigma) of both components of a vector
// whose n x n windows the final pass placed at (ax, ay) in frame A and at
// (bx, by) in frame B, and whose correlation peak (the engine's circular
// correlation of the two windows, means removed) is at the whole-pixel lag
// (lx, ly) (the vector less the displacement the windows' placing stands
// for, rounded). The sums below are the engine's correlation's own: B's
// window rolled by the lag, wrapping inside the window, and C+-1 divided
// by their share of overlapping pixels as the engine fits them. The frames
// as floats, or as bytes (an 8-bit pair the engine correlated from its
// bytes: no float copy of the frames for this), w x h, row-major; pixels
// outside the frame repeat its edge. scratch: piv_uncertainty_scratch (n)
// floats. 0, or -1 where the windows make no correlation peak at that lag
// or the next one (C0 not above its 4 neighbours; *su, *sv then NaN: the
// vector came from elsewhere, the median test's second peak or its
// neighbours' summed correlations (sparse.c)). At most 1 px: the most the
// peak fit can say.
//
// CS: the correlation peak C0 and its neighbours C+-1 along each axis
// are sums of pixel contributions; the difference of a pixel's
// contributions to C+1 and C-1 is the asymmetry it brings to the peak.
// That difference, A (x) B (x + 1) - A (x + 1) B (x), is 0 where the
// windows match, whatever the particles. The standard deviation of its sum
// over the window, sigma_dC (as of independent pixels), moves C+1 up and
// C-1 down by sigma_dC / 2: the 3-point Gaussian fit's shift is the
// uncertainty (Wieneke, Meas. Sci. Technol. 26 074002, 2015).
// MC: the correlation peak's width less the windows' own autocorrelation
// peak's (both as the 3-point Gaussian's variance) is the variance of the
// displacements the window holds (Bhattacharya, Charonko & Vlachos, Meas.
// Sci. Technol. 29 115301, 2018, with their phase correlation's width
// replaced by this deconvolution: one pass over the pixels, no transform);
// over the effective number of matched particle images, N_eff = rho P /
// (pi sigma_a^2) (rho: the windows' correlation coefficient at the peak,
// P the number of pixels that carry it, (sum p)^2 / sum p^2 of the pixel
// contributions p = A B, sigma_a^2: the autocorrelation's variance).
typedef struct {
    const float *fa, *fb;          // frames A and B as floats, or NULL: ...
    const unsigned char *ba, *bb;  // ... as 8-bit pixels
    int w, h;                      // their size
} piv_uncertainty_frames_t;
int piv_uncertainty_window (piv_uncertainty_t method, const piv_uncertainty_frames_t *frames,
                            int n, int ax, int ay, int bx, int by, int lx, int ly,
                            float *scratch, float *su, float *sv);

// CS on a run deformed by its predictor: the predictor's own error moves
// the particles of a window apart by different amounts (each where the
// deformation put it), which its correlation peak measures as a
// particle-weighted mean and the vector takes at its centre: an error no
// sum over the deformed windows sees. Measured with one correlation
// (iterations=1: RMS sigma / RMS error 1.00 on a pair of no displacement,
// 10 % noise, 0.05 ppp of 2.5 px) against two (the second deformed by the
// first, smoothed: 0.86), that error's variance is 0.33 of the run's own;
// the predictor's error, unknown, is taken as the 3 x 3 neighbourhood's
// mean sigma^2 (PIV_UNCERTAINTY_PREDICTOR of it added to each vector's
// sigma^2; NaN neighbours left out, NaN vectors kept, at most 1 px).
// su, sv: nx x ny, in place; scratch: 2 nx ny floats.
#define PIV_UNCERTAINTY_PREDICTOR 0.33
void piv_uncertainty_predictor (float *su, float *sv, int nx, int ny, float *scratch);

#endif
