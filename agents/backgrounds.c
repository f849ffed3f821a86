// backgrounds.c — the backgrounds of an agent thread's experiments. See
// backgrounds.h.

#include "agents/backgrounds.h"
#include "piv/background.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char experiment[256];   // whose frames ("": slot free)
    piv_background_t *bg;   // their sliding set
    unsigned long used;     // the use count when last applied (least: let go first)
} s_slot_t;

struct _backgrounds_t {
    s_slot_t slots[BACKGROUNDS_MAX];  // the sets kept
    unsigned long uses;               // applications so far
};

backgrounds_t *
backgrounds_new (void)
{
    return calloc (1, sizeof (backgrounds_t));
}

static void
s_free (s_slot_t *slot)
{
    piv_background_destroy (&slot->bg);
    slot->experiment[0] = '\0';
}

void
backgrounds_destroy (backgrounds_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    for (int i = 0; i < BACKGROUNDS_MAX; i++)
        s_free (&(*self_p)->slots[i]);
    free (*self_p);
    *self_p = NULL;
}

// The bytes of a set's frames.
static size_t
s_bytes (const piv_background_t *bg)
{
    return (size_t) piv_background_frames (bg) * piv_background_width (bg)
           * piv_background_height (bg) * sizeof (float);
}

// The slot of 'experiment' whose set fits the settings and a frame of w x
// h, made (the least recently used sets let go until the frames fit) or
// made anew. NULL with err.
static s_slot_t *
s_slot (backgrounds_t *self, const char *experiment, const piv_settings_t *s, int w, int h,
        char *err, size_t errlen)
{
    size_t need = (size_t) s->background_frames * w * h * sizeof (float);
    if (need > BACKGROUNDS_BYTES) {
        snprintf (err, errlen,
                  "background of experiment '%s': %d frames of %dx%d take %zu MiB, more than "
                  "the %zu MiB an agent thread keeps",
                  experiment, s->background_frames, w, h, need >> 20, BACKGROUNDS_BYTES >> 20);
        return NULL;
    }
    s_slot_t *slot = NULL;
    for (int i = 0; i < BACKGROUNDS_MAX && !slot; i++)
        if (self->slots[i].bg && strcmp (self->slots[i].experiment, experiment) == 0)
            slot = &self->slots[i];
    if (slot && piv_background_kind (slot->bg) == s->background
        && piv_background_frames (slot->bg) == s->background_frames
        && piv_background_width (slot->bg) == w && piv_background_height (slot->bg) == h)
        return slot;
    if (slot)
        s_free (slot);  // the settings or the camera changed: start again
    while (1) {
        size_t kept = 0;
        s_slot_t *oldest = NULL;
        for (int i = 0; i < BACKGROUNDS_MAX; i++) {
            s_slot_t *t = &self->slots[i];
            if (!t->bg)
                slot = slot ? slot : t;
            else {
                kept += s_bytes (t->bg);
                oldest = !oldest || t->used < oldest->used ? t : oldest;
            }
        }
        if (slot && kept + need <= BACKGROUNDS_BYTES)
            break;
        s_free (oldest);
    }
    if (!(slot->bg = piv_background_new (s->background, s->background_frames, w, h, err, errlen)))
        return NULL;
    snprintf (slot->experiment, sizeof slot->experiment, "%s", experiment);
    return slot;
}

int
backgrounds_apply (backgrounds_t *self, const char *experiment, const piv_settings_t *settings,
                   piv_image_t *a, piv_image_t *b, int *frames_p, char *err, size_t errlen)
{
    int w = piv_image_width (a), h = piv_image_height (a);
    s_slot_t *slot = s_slot (self, experiment, settings, w, h, err, errlen);
    if (!slot)
        return -1;
    slot->used = ++self->uses;
    if (piv_background_feed (slot->bg, a, err, errlen) != 0
        || (b && piv_background_feed (slot->bg, b, err, errlen) != 0)
        || piv_background_subtract (slot->bg, a, err, errlen) != 0
        || (b && piv_background_subtract (slot->bg, b, err, errlen) != 0))
        return -1;
    *frames_p = piv_background_count (slot->bg);
    return 0;
}
