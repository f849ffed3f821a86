// piv_cost.h — section 8 of bench_piv (bench/piv_cost.c): what a pair costs
// around the correlation: loading, the one-shot pivfarm-piv, an agent's
// steady state, and the cores the seed rig's stream needs.

#ifndef BENCH_PIV_COST_H
#define BENCH_PIV_COST_H

#include "piv/image.h"

// Prints section 8 for the pair a, b (2048^2, 8 bit when written), each
// figure the median of 'reps' runs (at least 3) and each ratio beside its
// goal; floor_s and single_s: the FFT floor (2 r2c + c2r) and the single
// pass's time measured beside it earlier in the run (bests, s).
// Temporary files under $TMPDIR (/tmp); pivfarm-piv from $PIVFARM_BIN,
// else the bin/ beside this program's build/bench/. 0, or -1 (logged).
int cost_section (const piv_image_t *a, const piv_image_t *b, double floor_s, double single_s,
                  int reps);

#endif
