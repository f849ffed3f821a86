// validate.h — the median test's pieces other parts of libpiv use
// (libpiv internal; the test itself: piv.h, smooth.h).

#ifndef PIV_VALIDATE_H
#define PIV_VALIDATE_H

// The most values piv_median takes: a 5 x 5 neighbourhood less its centre.
#define PIV_MEDIAN_MAX 24

// The median of n values, 1 <= n <= PIV_MEDIAN_MAX (the mean of the middle
// two for an even n); vals is left as it was.
float piv_median (const float *vals, int n);

// The k-th smallest of v[0 .. n) (reorders v): a median of many values
// (the smoother's residuals, a frame's pixels) in linear time.
float piv_select (float *v, long n, long k);

#endif
