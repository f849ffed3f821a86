// background.c — the minimum or mean of a sliding set of frames. See
// background.h.

#include "piv/background.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _piv_background_t {
    piv_background_kind_t kind;  // minimum or mean
    int frames;                  // most frames kept
    int width, height;           // their size
    int count;                   // frames kept now
    int next;                    // the ring's slot the next frame takes
    float *ring;                 // frames x width x height pixels
};

piv_background_t *
piv_background_new (piv_background_kind_t kind, int frames, int width, int height, char *err,
                    size_t errlen)
{
    if ((kind != PIV_BACKGROUND_MIN && kind != PIV_BACKGROUND_MEAN) || frames < 1
        || frames > PIV_BACKGROUND_MAX || width < 1 || height < 1) {
        snprintf (err, errlen, "bad background: kind %d of %d frames of %dx%d", (int) kind,
                  frames, width, height);
        return NULL;
    }
    piv_background_t *self = calloc (1, sizeof *self);
    if (self)
        self->ring = malloc ((size_t) frames * width * height * sizeof (float));
    if (!self || !self->ring) {
        snprintf (err, errlen, "cannot keep a background of %d frames of %dx%d: out of memory",
                  frames, width, height);
        piv_background_destroy (&self);
        return NULL;
    }
    self->kind = kind;
    self->frames = frames;
    self->width = width;
    self->height = height;
    return self;
}

void
piv_background_destroy (piv_background_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free ((*self_p)->ring);
    free (*self_p);
    *self_p = NULL;
}

// 0 if frame has the background's size, else -1 with err naming both.
static int
s_fits (const piv_background_t *self, const piv_image_t *frame, char *err, size_t errlen)
{
    if (piv_image_width (frame) == self->width && piv_image_height (frame) == self->height)
        return 0;
    snprintf (err, errlen, "frame of %dx%d does not fit a background of %dx%d",
              piv_image_width (frame), piv_image_height (frame), self->width, self->height);
    return -1;
}

int
piv_background_feed (piv_background_t *self, const piv_image_t *frame, char *err, size_t errlen)
{
    if (s_fits (self, frame, err, errlen) != 0)
        return -1;
    const float *p = piv_image_cdata (frame);
    if (!p) {
        snprintf (err, errlen, "cannot read a frame of %dx%d as floats: out of memory",
                  self->width, self->height);
        return -1;
    }
    size_t pixels = (size_t) self->width * self->height;
    memcpy (self->ring + (size_t) self->next * pixels, p, pixels * sizeof (float));
    self->next = (self->next + 1) % self->frames;
    self->count += self->count < self->frames;
    return 0;
}

int
piv_background_subtract (const piv_background_t *self, piv_image_t *frame, char *err,
                         size_t errlen)
{
    if (self->count == 0) {
        snprintf (err, errlen, "no frame in the background yet");
        return -1;
    }
    if (s_fits (self, frame, err, errlen) != 0)
        return -1;
    float *d = piv_image_data (frame);
    if (!d) {
        snprintf (err, errlen, "cannot subtract a background: out of memory");
        return -1;
    }
    // Pixel by pixel over the frames kept: the set changes with every
    // frame fed, and the sum recomputed is exact where a running one drifts.
    size_t pixels = (size_t) self->width * self->height;
    int mean = self->kind == PIV_BACKGROUND_MEAN;
    for (size_t k = 0; k < pixels; k++) {
        const float *q = self->ring + k;
        float low = q[0];
        double sum = q[0];
        for (int i = 1; i < self->count; i++) {
            float v = q[(size_t) i * pixels];
            low = v < low ? v : low;
            sum += v;
        }
        float bg = mean ? (float) (sum / self->count) : low;
        float v = d[k] - bg;
        d[k] = v > 0 ? v : 0;
    }
    return 0;
}

int
piv_background_count (const piv_background_t *self)
{
    return self->count;
}

piv_background_kind_t
piv_background_kind (const piv_background_t *self)
{
    return self->kind;
}

int
piv_background_frames (const piv_background_t *self)
{
    return self->frames;
}

int
piv_background_width (const piv_background_t *self)
{
    return self->width;
}

int
piv_background_height (const piv_background_t *self)
{
    return self->height;
}
