// background.h — the background of an experiment from its own frames
// (settings key background=min:N or mean:N, issue 25): the pixelwise
// minimum or mean of a sliding set of the last N frames fed, for the agent
// to subtract before correlation (pivfarm-piv -b takes a list of files
// instead). Memory: N frames of floats, 4 bytes a pixel each.

#ifndef PIV_BACKGROUND_H
#define PIV_BACKGROUND_H

#include "piv/image.h"
#include "piv/settings.h"

#include <stddef.h>

typedef struct _piv_background_t piv_background_t;

// A background of 'kind' (PIV_BACKGROUND_MIN or _MEAN) over the last
// 'frames' (1 .. PIV_BACKGROUND_MAX) frames of width x height. NULL with
// err for a bad kind, count or size, or no memory.
piv_background_t *piv_background_new (piv_background_kind_t kind, int frames, int width,
                                      int height, char *err, size_t errlen);
void piv_background_destroy (piv_background_t **self_p);

// Adds 'frame' to the set, the oldest leaving once it holds 'frames'. 0, or
// -1 with err when its size is not the background's (or no memory).
int piv_background_feed (piv_background_t *self, const piv_image_t *frame, char *err,
                         size_t errlen);

// Subtracts the background of the frames fed so far from 'frame' in place
// (clamped at 0, as piv_image_subtract). 0, or -1 with err: no frame fed,
// another size, no memory.
int piv_background_subtract (const piv_background_t *self, piv_image_t *frame, char *err,
                             size_t errlen);

// The frames in the set now (0 .. frames), and the set's kind and size.
int piv_background_count (const piv_background_t *self);
piv_background_kind_t piv_background_kind (const piv_background_t *self);
int piv_background_frames (const piv_background_t *self);
int piv_background_width (const piv_background_t *self);
int piv_background_height (const piv_background_t *self);

#endif
