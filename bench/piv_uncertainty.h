// piv_uncertainty.h — section 12 of bench_piv (bench/piv_uncertainty.c):
// each uncertainty method's sigma against the actual error on synthetic
// pairs of known truth, class by class (issue 27), and its cost.

#ifndef BENCH_PIV_UNCERTAINTY_H
#define BENCH_PIV_UNCERTAINTY_H

// Prints the synthetic part of section 12 and the cost, 'settings_text'
// over the engine's defaults (NULL: none), passes 64,32,16; reps rounds
// of the cost's timing. 0, or -1 (logged).
int uncertainty_section (const char *settings_text, int reps);

#endif
