// preprocess.c — intensity capping, high-pass and local contrast
// normalisation of a frame before correlation. See preprocess.h.

#include "piv/preprocess.h"
#include "piv/prefilter.h"
#include "piv/validate.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
piv_preprocess_on (const piv_settings_t *s)
{
    return s->cap > 0 || s->highpass > 0 || s->lcn > 0 || s->prefilter > 0;
}

// The mean and standard deviation of n values.
static void
s_moments (const float *p, size_t n, double *mean, double *sd)
{
    double s1 = 0, s2 = 0;
    for (size_t k = 0; k < n; k++) {
        s1 += p[k];
        s2 += (double) p[k] * p[k];
    }
    *mean = s1 / (double) n;
    double var = s2 / (double) n - *mean * *mean;
    *sd = var > 0 ? sqrt (var) : 0;
}

// The median of the n pixels of p (the lower middle one for an even n),
// from a histogram where they are all whole numbers 0 .. 65535 (what 8-
// and 16-bit files give: one pass, no copy), else by selection on a copy.
// 0, or -1 (no memory).
static int
s_frame_median (const float *p, size_t n, float *median)
{
    uint32_t *hist = calloc (65536, sizeof *hist);
    int whole = hist != NULL;
    for (size_t k = 0; k < n && whole; k++) {
        float v = p[k];
        whole = v >= 0 && v <= 65535 && v == (float) (int) v;
        if (whole)
            hist[(int) v]++;
    }
    if (whole) {
        size_t below = 0, half = n / 2;
        int v = 0;
        while (below + hist[v] <= half)
            below += hist[v++];
        *median = (float) v;
        free (hist);
        return 0;
    }
    free (hist);
    float *copy = malloc (n * sizeof *copy);
    if (!copy)
        return -1;
    memcpy (copy, p, n * sizeof *copy);
    *median = piv_select (copy, (long) n, (long) n / 2);
    free (copy);
    return 0;
}

int
piv_cap (piv_image_t *frame, double n, char *err, size_t errlen)
{
    int w = piv_image_width (frame), h = piv_image_height (frame);
    size_t count = (size_t) w * h;
    float *p = piv_image_data (frame);
    float median;
    if (!p || s_frame_median (p, count, &median) != 0) {
        snprintf (err, errlen, "cannot cap the intensity of a frame of %dx%d: out of memory", w,
                  h);
        return -1;
    }
    double mean, sd;
    s_moments (p, count, &mean, &sd);
    float level = (float) (median + n * sd);
    for (size_t k = 0; k < count; k++)
        p[k] = p[k] > level ? level : p[k];
    return 0;
}

int
piv_highpass (piv_image_t *frame, double sigma, char *err, size_t errlen)
{
    piv_image_t *low = piv_prefilter (frame, sigma, err, errlen);
    float *p = low ? piv_image_data (frame) : NULL;
    const float *q = low ? piv_image_cdata (low) : NULL;
    if (!p || !q) {
        if (low)
            snprintf (err, errlen, "cannot high-pass a frame: out of memory");
        piv_image_destroy (&low);
        return -1;
    }
    size_t count = (size_t) piv_image_width (frame) * piv_image_height (frame);
    for (size_t k = 0; k < count; k++) {
        float d = p[k] - q[k];
        p[k] = d > 0 ? d : 0;
    }
    piv_image_destroy (&low);
    return 0;
}

// Sums of row y's pixels and of their squares over columns x - r .. x + r
// (clipped) for every x, added with sign 'sign' into s1, s2: a running sum
// along the row, in doubles (16-bit pixels squared, summed over a tile).
static void
s_row_box (const float *row, int w, int r, double sign, double *s1, double *s2)
{
    double a1 = 0, a2 = 0;
    for (int x = 0; x < r && x < w; x++)
        a1 += row[x], a2 += (double) row[x] * row[x];
    for (int x = 0; x < w; x++) {
        if (x + r < w)
            a1 += row[x + r], a2 += (double) row[x + r] * row[x + r];
        if (x - r - 1 >= 0)
            a1 -= row[x - r - 1], a2 -= (double) row[x - r - 1] * row[x - r - 1];
        s1[x] += sign * a1;
        s2[x] += sign * a2;
    }
}

int
piv_lcn (piv_image_t *frame, int tile, char *err, size_t errlen)
{
    int w = piv_image_width (frame), h = piv_image_height (frame), r = tile / 2;
    size_t count = (size_t) w * h;
    float *p = piv_image_data (frame);
    float *src = malloc (2 * count * sizeof *src);
    double *s1 = calloc (2 * (size_t) w, sizeof *s1);
    if (!p || !src || !s1) {
        free (src);
        free (s1);
        snprintf (err, errlen, "cannot normalise the contrast of a frame of %dx%d: out of memory",
                  w, h);
        return -1;
    }
    memcpy (src, p, count * sizeof *src);
    double *s2 = s1 + w, sd_sum = 0;
    float *sd = src + count;  // each pixel's tile's standard deviation; p: its mean
    // Column sums of the rows' running sums over rows y - r .. y + r: each
    // row enters once and leaves once.
    for (int y = 0; y < r && y < h; y++)
        s_row_box (src + (size_t) y * w, w, r, 1, s1, s2);
    for (int y = 0; y < h; y++) {
        if (y + r < h)
            s_row_box (src + (size_t) (y + r) * w, w, r, 1, s1, s2);
        if (y - r - 1 >= 0)
            s_row_box (src + (size_t) (y - r - 1) * w, w, r, -1, s1, s2);
        int rows = (y + r < h ? y + r : h - 1) - (y - r > 0 ? y - r : 0) + 1;
        for (int x = 0; x < w; x++) {
            int cols = (x + r < w ? x + r : w - 1) - (x - r > 0 ? x - r : 0) + 1;
            double n = (double) rows * cols, m = s1[x] / n, var = s2[x] / n - m * m;
            size_t k = (size_t) y * w + x;
            p[k] = (float) m;
            sd[k] = (float) (var > 0 ? sqrt (var) : 0);
            sd_sum += sd[k];
        }
    }
    // The floor: a tenth of the mean tile's contrast, so that a dark,
    // empty region's camera noise is not raised to the particles' level.
    float floor = (float) (0.1 * sd_sum / (double) count);
    floor = floor > 1e-6f ? floor : 1e-6f;
    for (size_t k = 0; k < count; k++)
        p[k] = (src[k] - p[k]) / (sd[k] > floor ? sd[k] : floor);
    free (src);
    free (s1);
    return 0;
}

piv_image_t *
piv_preprocess (const piv_image_t *frame, const piv_settings_t *s, char *err, size_t errlen)
{
    if (!(s->cap > 0 || s->highpass > 0 || s->lcn > 0))
        return piv_prefilter (frame, s->prefilter, err, errlen);
    int w = piv_image_width (frame), h = piv_image_height (frame);
    piv_image_t *out = piv_image_new (w, h);
    const float *src = piv_image_cdata (frame);
    float *dst = out ? piv_image_data (out) : NULL;
    if (!src || !dst) {
        snprintf (err, errlen, "cannot preprocess a frame of %dx%d: out of memory", w, h);
        piv_image_destroy (&out);
        return NULL;
    }
    memcpy (dst, src, (size_t) w * h * sizeof *dst);
    if ((s->cap > 0 && piv_cap (out, s->cap, err, errlen) != 0)
        || (s->highpass > 0 && piv_highpass (out, s->highpass, err, errlen) != 0)
        || (s->lcn > 0 && piv_lcn (out, s->lcn, err, errlen) != 0)) {
        piv_image_destroy (&out);
        return NULL;
    }
    if (s->prefilter > 0) {
        piv_image_t *filtered = piv_prefilter (out, s->prefilter, err, errlen);
        piv_image_destroy (&out);
        out = filtered;
    }
    return out;
}
