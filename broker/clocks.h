// clocks.h — the measured clocks of the broker's peers (clocks.c,
// doc/storage.md): samples from FILE mtimes and HEARTBEATs, the skew past
// which they are reported, and the records status and the guard read.

#ifndef BROKER_CLOCKS_H
#define BROKER_CLOCKS_H

#include "broker/model.h"

#include <czmq.h>

typedef struct _clocks_t clocks_t;

// The clocks, with the experiments (name -> exp_t, not owned) whose median
// latencies set the limit. NULL without memory.
clocks_t *clocks_new (zhashx_t *experiments);
void clocks_destroy (clocks_t **self_p);
// A peer's clock measured: 'skew_ms' is its clock minus the broker's on
// receipt; logged (rate-limited) past the limit. At most CLOCKS_MAX peers.
void clocks_sample (clocks_t *self, const char *key, const char *peer, double skew_ms,
                    int64_t now);
// The skew past which clocks are reported: 100 ms, or the lowest median
// latency of an experiment if lower (at least 10 ms: heartbeat
// resolution); computed at most once a second.
double clocks_limit_ms (clocks_t *self);
// The records, in no order (NULL at the end); not to be changed between.
const clock_rec_t *clocks_first (clocks_t *self);
const clock_rec_t *clocks_next (clocks_t *self);
// Forgets the peers not measured for 'silent_ns'.
void clocks_forget (clocks_t *self, int64_t now, int64_t silent_ns);

#endif
