// piv_uncertainty.h — section 12 of bench_piv (bench/piv_uncertainty.c):
// each uncertainty method's sigma against the actual error on synthetic
// pairs of known truth, class by class (issue 27), and its cost.

#ifndef BENCH_PIV_UNCERTAINTY_H
#define BENCH_PIV_UNCERTAINTY_H

// Prints the synthetic part of section 12 and the cost, 'settings_text'
// over the engine's defaults (NULL: none), passes 64,32,16; reps rounds
// of the cost's timing; *noise_factor gets the real pairs' noise metric
// (piv_field_noise) over the RMS 2-D actual error on the synthetic pairs
// of linear flows (median), NaN without. 0, or -1 (logged).
int uncertainty_section (const char *settings_text, int reps, double *noise_factor);

#endif
