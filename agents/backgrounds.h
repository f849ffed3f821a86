// backgrounds.h — an agent thread's backgrounds of the experiments whose
// tasks say background=min:N or mean:N (issue 25): one sliding set of
// frames (piv/background.h) per experiment and frame size, fed with each
// pair's two frames and subtracted from them before correlation. Memory
// is bounded: at most BACKGROUNDS_MAX sets and BACKGROUNDS_BYTES of
// frames per thread, the least recently used set let go first.

#ifndef AGENTS_BACKGROUNDS_H
#define AGENTS_BACKGROUNDS_H

#include "piv/image.h"
#include "piv/settings.h"

#include <stddef.h>

#define BACKGROUNDS_MAX 8                              // experiments' sets kept
#define BACKGROUNDS_BYTES ((size_t) 512 * 1024 * 1024)  // their frames, bytes

typedef struct _backgrounds_t backgrounds_t;

// A new, empty set of backgrounds; NULL when memory runs out.
backgrounds_t *backgrounds_new (void);
void backgrounds_destroy (backgrounds_t **self_p);

// Feeds frames a and b (b NULL: a alone) to the background of 'experiment'
// for their size and the settings' kind and count (made, or made anew when
// the kind, count or size changed), then subtracts it from both in place.
// *frames_p: the frames the background was taken over (the pair's
// included). 0, or -1 with err (the set would exceed BACKGROUNDS_BYTES
// alone, naming it; no memory).
int backgrounds_apply (backgrounds_t *self, const char *experiment,
                       const piv_settings_t *settings, piv_image_t *a, piv_image_t *b,
                       int *frames_p, char *err, size_t errlen);

#endif
