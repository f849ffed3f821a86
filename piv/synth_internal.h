// synth_internal.h — what the planar and the stereo renderers share
// (synth.c, synth_stereo.c): the random generator and the rendering of
// particles already placed in frames A and B. Not part of libpiv's interface.

#ifndef PIV_SYNTH_INTERNAL_H
#define PIV_SYNTH_INTERNAL_H

#include "piv/flow.h"

#include <stdint.h>

// xoshiro256** (Blackman and Vigna), seeded through splitmix64.
typedef struct {
    uint64_t s[4]; // generator state
} synth_rng_t;

// Seeds rng from the splitmix64 stream 'seeder' (advanced): successive
// calls on one seeder give independent streams.
void synth_rng_seed (synth_rng_t *rng, uint64_t *seeder);
// Uniform in [0, 1), 53 random bits.
double synth_rng_uniform (synth_rng_t *rng);

// One particle: where frames A and B show it, and its peak intensity in
// each (a particle crossing a light sheet's profile changes brightness).
typedef struct {
    double xa, ya; // frame A, px
    double xb, yb; // frame B, px
    double ia, ib; // peak intensity in A and in B, full-scale units
    int band;      // band of rows, for the renderer's sort
} synth_particle_t;

// Renders n particles into frames A and B of synth's size, diameter, bit
// depth and noise (peaks as fractions of full scale: 1 is white), the
// noise streams drawn from 'noise_seed'. The particles are reordered and
// their peaks scaled to the bit depth's full scale. 0,
// or -1 with err (bad settings, out of memory).
int synth_render_pair (const piv_synth_t *synth, synth_particle_t *particles, long n,
                       uint64_t noise_seed, piv_image_t **a_p, piv_image_t **b_p, char *err,
                       size_t errlen);

#endif
