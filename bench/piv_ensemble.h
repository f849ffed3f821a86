// piv_ensemble.h — section 13 of bench_piv (bench/piv_ensemble.c): the
// ensemble correlation (issue 27) against the mean of instantaneous fields
// on sparse synthetic runs of known truth, its stress estimate against
// known fluctuations, its cost per pair and the size of its partial sums.

#ifndef BENCH_PIV_ENSEMBLE_H
#define BENCH_PIV_ENSEMBLE_H

// Prints section 13: 'pairs' pairs a run (the 200; fewer for
// --quick). 0, or -1 (logged).
int ensemble_section (int pairs);

#endif
