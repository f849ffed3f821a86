// preprocess.h — image preprocessing of both frames before correlation
// (issue 25; settings keys cap, highpass, lcn, prefilter): what PIVlab and
// DaVis users switch on for uneven illumination, bright spots and
// reflections. Each is off by default; doc/piv.md measures each on the
// real pairs ('make bench' section 11).

#ifndef PIV_PREPROCESS_H
#define PIV_PREPROCESS_H

#include "piv/image.h"
#include "piv/settings.h"

#include <stddef.h>

// 1 if the settings ask for any preprocessing of the frames (cap,
// highpass, lcn or prefilter), 0 if piv_process correlates them as given.
int piv_preprocess_on (const piv_settings_t *settings);

// A new image: 'frame' preprocessed as the settings say, in this order:
// intensity capping, high-pass, local contrast normalisation, prefilter
// (with the prefilter alone, piv_prefilter's image, to the bit). NULL with
// err when memory runs out.
piv_image_t *piv_preprocess (const piv_image_t *frame, const piv_settings_t *settings, char *err,
                             size_t errlen);

// Intensity capping (Shavit, Lowe & Steinbuck, Exp. Fluids 42, 2007): every
// pixel brighter than the frame's median + n times its standard deviation
// is set to that level, so that a few bright particles or a reflection do
// not dominate a window's correlation. In place; 0, or -1 with err (memory).
int piv_cap (piv_image_t *frame, double n, char *err, size_t errlen);

// High-pass: the frame less its Gaussian low-pass of 'sigma' px
// (piv_prefilter's kernel), negative values set to 0: a slowly varying
// background (uneven light sheet, glow) removed. In place; 0, or -1.
int piv_highpass (piv_image_t *frame, double sigma, char *err, size_t errlen);

// Local contrast normalisation over tiles of 'tile' px (CLAHE-like, as a
// continuous filter): each pixel less the mean of the tile centred on it
// (clipped to the frame), over that tile's standard deviation, at least a
// tenth of the mean tile's (so that an empty, dark region's camera noise
// is not raised to the particles' contrast). Dim and bright regions then
// weigh alike in the correlation. In place; 0, or -1 with err.
int piv_lcn (piv_image_t *frame, int tile, char *err, size_t errlen);

#endif
