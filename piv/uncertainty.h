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
// whose n x n window sits at (ax, ay) in frame A and, as the final pass
// measured it, at (bx, by) in frame B (the whole-pixel place of the
// correlation peak: the windows' offset plus the peak's integer lag). The
// frames as floats, or as bytes (an 8-bit pair the engine correlated from
// its bytes: no float copy of the frames for this), w x h, row-major; the
// windows are read with one pixel around them (edge pixels repeated
// outside the frame). scratch: piv_uncertainty_scratch (n)
// floats. 0, or -1 where the windows make no correlation peak at that lag
// (*su, *sv then NaN: the vector came from elsewhere, its neighbours'
// summed correlations (sparse.c) or their median). At most 1 px: the
// most the peak fit can say.
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
                            int n, int ax, int ay, int bx, int by, float *scratch, float *su,
                            float *sv);

#endif
