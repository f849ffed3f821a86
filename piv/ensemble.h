// ensemble.h — ensemble correlation (Meinhart, Wereley & Santiago 2000):
// the correlation planes of each window position summed over many pairs of
// one experiment, the mean field read from the summed planes' peaks, and
// the peak's width less the particle images' own (their summed
// autocorrelation) as the covariance of the displacements inside the
// window over the run: the Reynolds stresses in px^2 (Scharnowski, Hain &
// Kähler 2012). Sums over any subset of pairs merge into the sums over
// their union and encode to bytes, so a farm keeps one partial per chunk
// of pairs and merges them in a fixed order (the same bytes whoever
// computed them). A run is one or more passes, largest windows first; each
// pass after the first reads the frames displaced by the previous pass's
// ensemble field (the predictor: A by -U/2 and B by +U/2, or B alone by U
// with the settings' symmetric 0), so its planes keep only a few lags
// around the predicted displacement. Plain C over libpiv: no ZeroMQ, no
// SQLite. doc/piv.md, "Ensemble correlation", says how and why.

#ifndef PIV_ENSEMBLE_H
#define PIV_ENSEMBLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "piv/calib.h"
#include "piv/field.h"
#include "piv/image.h"
#include "piv/settings.h"

typedef struct _piv_ensemble_t piv_ensemble_t;

// The windows of the passes of a run ending at 'window' px, largest first
// (e.g. 32, 16, 8 for 8), at most 'max' of them; returns their number, or
// -1 for a window the engine cannot correlate (names nothing: the caller
// says which value was wrong).
int piv_ensemble_passes (int window, int *windows, int max);

// One pass: windows of 'window' px (even, 4..256) at 'overlap' percent
// (0..90) over frames of width x height, the frames read displaced by
// 'predictor' (NULL: no predictor, the first pass; a field of any regular
// grid, interpolated, copied, its INVALID vectors filled from their
// neighbours: the caller keeps its own), with the preprocessing, the
// interpolator, the sub-pixel fit and the median test of 'settings' (its
// windows, passes and iterations are not used; its mask is borrowed, as
// piv_new borrows it). No pair counted.
// NULL with err naming the bad argument (a window too small for the
// frames, an overlap out of range) or "no memory".
piv_ensemble_t *piv_ensemble_new (const piv_settings_t *settings, int window, int overlap,
                                  int width, int height, const piv_field_t *predictor, char *err,
                                  size_t errlen);
void piv_ensemble_destroy (piv_ensemble_t **self_p);

// What a pass is: the grid of its sums and the lags it keeps.
typedef struct {
    int window, step;   // windows and grid spacing, px
    int nx, ny;         // grid size (window centres as piv_process places them)
    int radius;         // lags kept each way around the prediction: planes of (2 radius + 1)^2
    int width, height;  // the frames' size
    int64_t pairs;      // pairs counted
} piv_ensemble_info_t;
void piv_ensemble_info (const piv_ensemble_t *self, piv_ensemble_info_t *out);

// Adds one pair's correlation planes (and frame A's autocorrelation) to
// the sums. One thread per object; objects of one pass may run on several
// threads at once. 0, or -1 with err (frames of another size than the pass
// was made for, naming both sizes; no memory): the sums are then as before.
int piv_ensemble_add (piv_ensemble_t *self, const piv_image_t *a, const piv_image_t *b, char *err,
                      size_t errlen);

// Adds the sums of 'other' (same pass: window, overlap, frames' size and
// predictor) to self's. 0, or -1 with err naming what differs (self then
// unchanged).
int piv_ensemble_merge (piv_ensemble_t *self, const piv_ensemble_t *other, char *err,
                        size_t errlen);

// The sums as bytes (versioned little-endian layout with the pass and its
// predictor, so that a decoded partial merges only with its own pass): a
// malloc'd buffer in *buf_p. 0 or -1 (no memory). Decode checks every size
// against the bytes given (they come from the wire): NULL with err ("bad
// ensemble: ...") for bytes that are not such sums.
int piv_ensemble_encode (const piv_ensemble_t *self, unsigned char **buf_p, size_t *size_p);
piv_ensemble_t *piv_ensemble_decode (const void *buf, size_t size, char *err, size_t errlen);

// The ensemble field of the sums: at each window the mean displacement
// (the prediction plus the summed peak's sub-pixel place), peak_ratio of
// the summed plane, flags VALID, or INVALID where the window had no peak
// (no particles in any pair) or it failed the normalized median test (not
// replaced: an ensemble field is a mean, not a guess). *stress_p (may be
// NULL) gets 3 * nx * ny floats, malloc'd: u'u', v'v', u'v' in px^2 per
// grid point (k, nx*ny + k, 2*nx*ny + k), NaN where the peak's width could
// not be measured. NULL with err (no pair counted, no memory).
piv_field_t *piv_ensemble_field (const piv_ensemble_t *self, float **stress_p, char *err,
                                 size_t errlen);

// A whole run offline (pivfarm-piv --ensemble, the bench): the passes of
// piv_ensemble_passes (window) at 'overlap' over frames of width x height,
// each over pairs 0 .. npairs - 1 in order, each pass's field the next
// one's predictor. 'pair' loads pair i into *a, *b (new images, destroyed
// here): 0, or -1 with err naming the files; with settings' threads > 1 it
// is called from that many threads at once (each pass's pairs shared out,
// the threads' sums merged: the same field for any number). The last pass's field and
// *stress_p (may be NULL) as piv_ensemble_field gives them; NULL with err
// (the pair's own, or the pass's).
typedef int (piv_ensemble_pair_fn) (void *arg, long i, piv_image_t **a, piv_image_t **b,
                                    char *err, size_t errlen);
piv_field_t *piv_ensemble_run (const piv_settings_t *settings, int window, int overlap,
                               int width, int height, long npairs, piv_ensemble_pair_fn *pair,
                               void *arg, float **stress_p, char *err, size_t errlen);

// Writes an ensemble field as text: '# ' header lines (may be NULL), the
// column line '# x y u v flags peak_ratio uu vv uv', then one line a
// vector (7 significant digits, nan where a stress was not measured).
// Uncalibrated (calib NULL or not set): x, y px, u, v px per pair, the
// stresses px^2; calibrated (piv/calib.h): m, m/s and m^2/s^2 (u'v' changes
// sign with y up, as v does). 0, or -1 (a write failed).
int piv_ensemble_write (const piv_field_t *field, const float *stress, const piv_calib_t *calib,
                        FILE *out, const char *header);

// The factors k[3] that take the stresses u'u', v'v', u'v' from px^2 per
// frame^2 to the units of 'calib' (NULL or not set: 1, 1, 1; set: to
// m^2/s^2, u'v''s changing sign with y up as v does): what every writer of
// an ensemble field applies.
void piv_ensemble_stress_factors (const piv_calib_t *calib, double k[3]);

// The unit of the stresses so converted: "m^2/s^2" or "px^2/frame^2".
const char *piv_ensemble_stress_unit (const piv_calib_t *calib);

#endif
