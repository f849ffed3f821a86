// peak.h — the correlation peak's pieces the engine (piv.c) and the
// ensemble correlation (ensemble.c) share (libpiv internal).

#ifndef PIV_PEAK_H
#define PIV_PEAK_H

// Sub-pixel offset of a peak from its value c and neighbours l, r: 3-point
// Gaussian fit, or a parabola where any value is not positive; within +-1.
float piv_peak_gauss3 (float l, float c, float r);

#endif
