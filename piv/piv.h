// piv.h — FFT cross-correlation PIV: multipass with window offset or image
// deformation, sub-pixel peak fit, normalized median validation. FFTW plans
// are made once per window size per process and shared by every engine and
// thread (new-array execute); wisdom can be saved to and loaded from a file.

#ifndef PIV_PIV_H
#define PIV_PIV_H

#include <stddef.h>
#include "piv/field.h"
#include "piv/image.h"
#include "piv/settings.h"

typedef struct _piv_t piv_t;

// An engine for one settings; checks them (piv_settings_check: NULL with
// err naming the bad setting) and makes or finds the FFTW plans. Not to be shared by threads:
// make one per thread that processes pairs (plans are shared underneath).
piv_t *piv_new (const piv_settings_t *settings, char *err, size_t errlen);
void piv_destroy (piv_t **self_p);

// The threads of the engine's next pairs: 1 .. its settings' threads (the
// threads it was made with; a count outside is brought into that range).
// The fields are the same to the bit whatever the count (the pairs of a
// step are fixed by the grid, not by the threads' shares): an agent runs a
// pair alone on all its threads and pairs side by side on one each
// (agent/latency) with one engine. Returns the count set. Not while a pair
// of this engine is being processed.
int piv_set_threads (piv_t *self, int threads);

// Computes the field from frame A to frame B (both first preprocessed when
// the settings ask for it, piv/preprocess.h: two frames' more memory
// meanwhile; windows without signal are then judged on A and B as given,
// unless the prefilter is the only filter). NULL with err
// when the images differ in size, are smaller than the largest window, or
// memory runs out.
piv_field_t *piv_process (piv_t *self, const piv_image_t *a, const piv_image_t *b, char *err,
                          size_t errlen);

// Normalized median test (Westerweel & Scarano 2005) over the 3x3
// neighbourhood; rejected vectors get the median of their valid neighbours
// (flag REPLACED) or, with none, flag INVALID. Returns the number rejected.
int piv_validate_median (piv_field_t *field, double eps, double threshold);

// The same, where a rejected vector first gets other candidates from
// 'candidates' (fills u[], v[] with at most max displacements for vector k,
// best first, and returns their number; the engine passes the next peaks of
// the vector's correlation): the first that passes the test against the
// same neighbours is taken and stays VALID (it is a measurement: the
// window's second choice), before the vector falls back to the median.
typedef int (piv_candidates_fn) (void *arg, long k, float *u, float *v, int max);
int piv_validate_median_peaks (piv_field_t *field, double eps, double threshold,
                               piv_candidates_fn *candidates, void *arg);

// The noise of a field on real images, where no ground truth exists (the
// metric of issue 17, the same for pivfarm and OpenPIV): the distance d of
// each vector from the component-wise median of its 8 neighbours, border
// row and column left out, INVALID vectors neither measured nor used as
// neighbours. noise = RMS of d over vectors with d < 2 px; out = vectors
// flagged VALID with d >= 2 px (outliers validation let through); count =
// the vectors in noise. 0, or -1 when no vector could be measured.
typedef struct {
    double noise;  // px
    long out;      // valid vectors 2 px or more from their neighbours' median
    long count;    // vectors in noise
} piv_noise_t;
int piv_field_noise (const piv_field_t *field, piv_noise_t *noise);

// Rejects valid vectors whose first correlation peak is less than
// min_ratio times the second (an ambiguous correlation): each gets the
// median of its valid neighbours that pass (REPLACED) or, with none, flag
// INVALID. Returns the number rejected, or -1 (no memory).
int piv_validate_peak_ratio (piv_field_t *field, double min_ratio);

// FFTW wisdom. The default path is $PIVFARM_WISDOM, else
// $XDG_CACHE_HOME/pivfarm/fftw-wisdom, else ~/.cache/pivfarm/fftw-wisdom.
// Load: 0, or -1 if absent or unreadable (harmless: plans are measured).
// Save: 0 or -1; creates the directory. Both are thread-safe.
const char *piv_wisdom_default_path (void);
// The FFTW planner flags the engine plans with: FFTW_PATIENT, or what
// $PIVFARM_FFTW_PLANNER says (estimate, measure, patient).
unsigned piv_fftw_planner_flags (void);
int piv_wisdom_load (const char *path);
int piv_wisdom_save (const char *path);
// Saves the wisdom to path if plans made since the last load or save of
// this process added to it: 1 saved, 0 nothing new (or the planner busy in
// another thread: ask again later), -1 cannot write. Cheap when nothing was
// planned: long-lived processes may ask after every pair.
int piv_wisdom_save_new (const char *path);

#endif
