// prefilter.c — the Gaussian low-pass of a frame. See prefilter.h.

#include "piv/prefilter.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Four floats (GCC vector extensions, as piv.c's): -O2 does not vectorise
// the taps' loops below on its own (their trip count needs a tail).
typedef float v4sf __attribute__ ((vector_size (16)));

// d[x] += kt * q[x] for x in 0 .. w - 1, four at a time, the tail one by
// one: each sum the same, in the same order, as the plain loop's.
static inline void
s_axpy (float *d, const float *q, float kt, int w)
{
    const v4sf k4 = {kt, kt, kt, kt};
    int x = 0;
    for (; x + 4 <= w; x += 4) {
        v4sf a, b;
        memcpy (&a, d + x, sizeof a);
        memcpy (&b, q + x, sizeof b);
        a += k4 * b;
        memcpy (d + x, &a, sizeof a);
    }
    for (; x < w; x++)
        d[x] += kt * q[x];
}

// Clamps i to 0 .. n - 1: the frame's edge pixels repeated beyond it.
static inline int
s_clamp (int i, int n)
{
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

piv_image_t *
piv_prefilter (const piv_image_t *frame, double sigma, char *err, size_t errlen)
{
    int w = piv_image_width (frame), h = piv_image_height (frame);
    int r = (int) ceil (3 * sigma);
    r = r < 1 ? 1 : r;
    const float *src = piv_image_cdata (frame);
    piv_image_t *out = piv_image_new (w, h);
    float *dst = out ? piv_image_data (out) : NULL;
    float *tmp = malloc (sizeof (float) * (size_t) w * h);
    float *pad = malloc (sizeof (float) * (size_t) (w + 2 * r));
    float *k = malloc (sizeof (float) * (size_t) (2 * r + 1));
    if (!src || !dst || !tmp || !pad || !k) {
        snprintf (err, errlen, "cannot filter a frame of %dx%d: out of memory", w, h);
        piv_image_destroy (&out);
        free (tmp);
        free (pad);
        free (k);
        return NULL;
    }
    double sum = 0;
    for (int t = -r; t <= r; t++)
        sum += k[t + r] = (float) exp (-t * t / (2 * sigma * sigma));
    for (int t = 0; t <= 2 * r; t++)
        k[t] = (float) (k[t] / sum);
    // Rows into tmp (each first copied with its edge pixels repeated r times
    // either side), then columns into dst: both with the inner loop along x,
    // over contiguous memory, one tap at a time (s_axpy).
    for (int y = 0; y < h; y++) {
        const float *s = src + (size_t) y * w;
        for (int x = -r; x < w + r; x++)
            pad[x + r] = s[s_clamp (x, w)];
        float *d = tmp + (size_t) y * w;
        for (int x = 0; x < w; x++)
            d[x] = 0;
        for (int t = 0; t <= 2 * r; t++)
            s_axpy (d, pad + t, k[t], w);
    }
    for (int y = 0; y < h; y++) {
        float *d = dst + (size_t) y * w;
        for (int t = -r; t <= r; t++)
            s_axpy (d, tmp + (size_t) s_clamp (y + t, h) * w, k[t + r], w);
    }
    free (tmp);
    free (pad);
    free (k);
    return out;
}
