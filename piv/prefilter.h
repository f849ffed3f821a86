// prefilter.h — the Gaussian low-pass of a frame before correlation
// (settings key prefilter): particle images of 1-1.5 px are undersampled,
// and the deformation's interpolation of them, whatever the kernel, pulls
// the measured displacement towards whole pixels (peak locking). Widening
// them to about 2 px first removes most of it ('make bench' section 10).

#ifndef PIV_PREFILTER_H
#define PIV_PREFILTER_H

#include "piv/image.h"
#include "piv/settings.h"

#include <stddef.h>

// A new image: 'frame' convolved by a Gaussian of 'sigma' px (sigma > 0:
// at most PIV_PREFILTER_MAX as the prefilter, PIV_HIGHPASS_MAX as the
// high-pass's low-pass), separable, truncated at 3 sigma, the kernel's
// weights summing to 1 and the frame's edge pixels repeated beyond it.
// NULL when memory runs out (err says so).
piv_image_t *piv_prefilter (const piv_image_t *frame, double sigma, char *err, size_t errlen);

#endif
