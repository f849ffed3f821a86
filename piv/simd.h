// simd.h — four floats in one SIMD register (GCC vector extensions), for
// libpiv's hot loops: sums with their own accumulators per lane, where a
// plain C sum is one long chain of adds that the compiler may not reorder.

#ifndef PIV_SIMD_H
#define PIV_SIMD_H

#include <string.h>

typedef float v4sf __attribute__ ((vector_size (16)));

// Four floats from p, any alignment.
static inline v4sf
v4_load (const float *p)
{
    v4sf v;
    memcpy (&v, p, sizeof v);
    return v;
}

// Four floats to p, any alignment.
static inline void
v4_store (float *p, v4sf v)
{
    memcpy (p, &v, sizeof v);
}

// The sum of the four lanes, in pairs.
static inline float
v4_hsum (v4sf v)
{
    return (v[0] + v[1]) + (v[2] + v[3]);
}

#endif
