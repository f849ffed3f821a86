// piv_resolution.h — section 10 of bench_piv (bench/piv_resolution.c): what
// the engine resolves and where it fails, on synthetic flows of known truth
// (issue 24): the modulation transfer of sine flows, the peak vorticity of
// small vortices, the vectors replaced on each, peak locking over sub-pixel
// positions (by sub-pixel estimator, and with the frames prefiltered), and
// sparse seeding and small particles, for the settings given and for the
// same with smooth=off, beside the goals.

#ifndef BENCH_PIV_RESOLUTION_H
#define BENCH_PIV_RESOLUTION_H

// Prints section 10 with the engine's defaults, passes 64,32,16, and
// 'settings_text' over them (a TASK's text, "smooth=final"; NULL: none).
// 0, or -1 (logged).
int resolution_section (const char *settings_text);

#endif
