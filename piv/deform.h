// deform.h — image interpolation for window deformation (libpiv internal):
// sampling an image at fractional positions, bilinear, Keys bicubic, or
// cubic B-spline on prefiltered coefficients.

#ifndef PIV_DEFORM_H
#define PIV_DEFORM_H

#include "piv/piv.h"

// Prepares the sampling source for 'deform': for B-spline, the interpolation
// coefficients (recursive prefilter, mirror boundaries) into coef, which has
// the image's size; otherwise a copy. 
void piv_deform_prepare (piv_deform_t deform, const float *img, float *coef, int w, int h);

// Samples rows [row0, row1) of the deformed image: out(r, c) = source at
// (c + s * U(r, c), r + s * V(r, c)), where (U, V) is the displacement field
// interpolated bilinearly from the vectors of 'field' (clamped at its edge)
// and s = sign * scale. Positions outside the image read the nearest edge.
void piv_deform_rows (piv_deform_t deform, const float *coef, int w, int h,
                      const piv_field_t *field, float scale, float *out, int row0, int row1);

#endif
