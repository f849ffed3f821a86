// deform.h — image interpolation for window deformation (libpiv internal):
// sampling an image at fractional positions, bilinear, Keys bicubic, or
// cubic B-spline on prefiltered coefficients.

#ifndef PIV_DEFORM_H
#define PIV_DEFORM_H

#include "piv/piv.h"

#include <stdint.h>

// Prepares the sampling source for 'deform': for B-spline, the interpolation
// coefficients (recursive prefilter, mirror boundaries) into coef, which has
// the image's size; otherwise a copy.
void piv_deform_prepare (piv_deform_t deform, const float *img, float *coef, int w, int h);

// Whether piv_deform_prepare prefilters for 'deform' (else it copies: the
// image is its own source).
int piv_deform_prefiltered (piv_deform_t deform);

// Samples the source prepared by piv_deform_prepare (w x h) at n positions
// (col[k], row[k]) into out[k], with the same interpolator and edge rule as
// the deformation below (positions outside the image read the edge; a NaN
// position gives 0, nothing seen there): the plain sampler, one position
// at a time, that stereo dewarping (piv/stereo.h) uses for bilinear and
// the located samplers below must equal. PIV_DEFORM_OFFSET, which has no
// interpolator, samples as bilinear.
void piv_deform_sample (piv_deform_t deform, const float *src, int w, int h, const float *col,
                        const float *row, float *out, long n);

// A sampling position located once for many frames (stereo dewarping's
// grid, fixed for a rig): the work of piv_deform_sample that depends on
// the position alone, its pixel and its weights' rows, 8 bytes. For the
// interpolators with tabulated weights (all but bilinear and offset).
typedef struct {
    uint32_t at;      // the clamped position's pixel, row * w + col; UINT32_MAX: NaN
    uint16_t qx, qy;  // the weights' rows (t * 1024, rounded); bit 15: taps cross the edge
} piv_deform_pos_t;

// Whether piv_deform_sample_located serves 'deform' on w x h frames.
int piv_deform_locatable (piv_deform_t deform, int w, int h);

// Locates n positions (col[k], row[k]) of w x h frames into pos[k]: for
// every locatable interpolator alike.
void piv_deform_locate (int w, int h, const float *col, const float *row, piv_deform_pos_t *pos,
                        long n);

// As piv_deform_sample at the located positions, to the bit, of two
// sources at once (each prepared by piv_deform_prepare, w x h): out_a[k]
// from src_a, out_b[k] from src_b, one lookup of the position and weights
// for both. src_b and out_b may be NULL (one frame).
void piv_deform_sample_located (piv_deform_t deform, const float *src_a, const float *src_b, int w,
                                int h, const piv_deform_pos_t *pos, float *out_a, float *out_b,
                                long n);

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
