// sparse.h — robustness where seeding is sparse (libpiv internal): a
// second opinion for a vector whose window caught too few particle images,
// from the correlation planes of its overlapping neighbours (a local
// ensemble of correlations, after Hart's correlation-based correction,
// Exp. Fluids 29, 2000).

#ifndef PIV_SPARSE_H
#define PIV_SPARSE_H

#include "piv/field.h"
#include "piv/smooth.h"

// Vector k's correlation plane (n x n floats, circular: lag (dx, dy) at
// ((dy mod n) * n + (dx mod n))), made with thread 'part''s
// buffers, and the displacement its windows' placing stands for (the
// plane's lag (0, 0)). 0, or -1: not measurable (masked, empty window).
typedef int (piv_plane_fn) (void *arg, long k, int part, float *plane, float *bu, float *bv);

// The highest peak of plane (n x n, as above; the plane may be changed):
// its sub-pixel lag, by the estimator the engine uses (arg: plane's). 0, or
// -1 for a flat plane.
typedef int (piv_plane_peak_fn) (void *arg, float *plane, int n, float *dx, float *dy);

typedef struct {
    piv_plane_fn *plane;     // the planes
    piv_plane_peak_fn *peak; // their peaks
    void *arg;               // plane's and peak's argument
    int n;                   // window size
    const float *height;      // each vector's correlation peak as measured, or NULL
    double share;            // settings' cbc: weak below this share of the neighbours' peaks
    piv_pool_t *pool;        // threads (NULL: here)
    int nthreads;            // at most this many
} piv_cbc_t;

// Vectors with an ambiguous peak (VALID, peak ratio below 2) whose own
// correlation peak is lower than cbc->share times the mean of their four
// neighbours' (left, right, up, down: the windows that overlap them most)
// get the peak of the sum of the five planes; where it is more than 1 px
// from their own, they take it and stay VALID (a measurement, of the
// neighbourhood's particles). The field's grid is the one the planes are
// made on. Returns the number of vectors changed, or -1 (no memory).
int piv_sparse_correct (piv_field_t *field, const piv_cbc_t *cbc);

#endif
