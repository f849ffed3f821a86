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

// Samples the source prepared by piv_deform_prepare (w x h) at n positions
// (col[k], row[k]) into out[k], with the same interpolator and edge rule as
// the deformation below (positions outside the image read the edge; a NaN
// position gives 0, nothing seen there): what
// stereo dewarping (piv/stereo.h) resamples a camera's frame with.
// PIV_DEFORM_OFFSET, which has no interpolator, samples as bilinear.
void piv_deform_sample (piv_deform_t deform, const float *src, int w, int h, const float *col,
                        const float *row, float *out, long n);

// The displacement at (x, y) interpolated bilinearly from a grid field,
// extrapolated linearly up to one grid step beyond its outer vectors and
// constant further out. The deformation below uses the same rule.
void piv_field_interp (const piv_field_t *field, float x, float y, float *u, float *v);

// Samples rows [row0, row1) of the deformed frames: out_b(r, c) = src_b at
// (c + scale_b * U, r + scale_b * V), likewise for A, where (U, V) is the
// displacement field interpolated by piv_field_interp from 'field'. src_a may be NULL
// (frame A left as it is). Positions outside the image read the edge.
void piv_deform_rows (piv_deform_t deform, const float *src_a, float *out_a, float scale_a,
                      const float *src_b, float *out_b, float scale_b, int w, int h,
                      const piv_field_t *field, int row0, int row1);

#endif
