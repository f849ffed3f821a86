// piv.h — FFT cross-correlation PIV: multipass with window offset or image
// deformation, sub-pixel peak fit, normalized median validation. FFTW plans
// are made once per window size per process and shared by every engine and
// thread (new-array execute); wisdom can be saved to and loaded from a file.

#ifndef PIV_PIV_H
#define PIV_PIV_H

#include <stddef.h>
#include "piv/field.h"
#include "piv/image.h"

#define PIV_MAX_PASSES 8
#define PIV_MAX_THREADS 64

// How each pass after the first uses the previous one's field.
typedef enum {
    PIV_DEFORM_OFFSET,    // integer window offset only, no deformation
    PIV_DEFORM_BILINEAR,  // image deformation, bilinear interpolation
    PIV_DEFORM_BICUBIC,   // image deformation, Keys cubic convolution (a = -0.5)
    PIV_DEFORM_BSPLINE,   // image deformation, cubic B-spline (prefiltered)
    PIV_DEFORM_BSPLINE5,  // image deformation, quintic B-spline (prefiltered)
    PIV_DEFORM_OMOMS      // image deformation, cubic O-MOMS (prefiltered; Blu et al. 2001)
} piv_deform_t;
#define PIV_DEFORM_KINDS 6

// Caller-allocated settings; piv_settings_init fills the defaults.
typedef struct {
    int passes[PIV_MAX_PASSES];  // window sizes, large to small, each a power of two 8..256
    int npasses;                 // number of entries in passes
    int overlap;                 // percent, 0..87
    int final_iterations;        // most runs of the final window size (>= 1)
    double converge;             // ... fewer once a run corrects less than this, px RMS
    piv_deform_t deform;         // predictor use between passes
    int symmetric;               // deform A and B by -d/2, +d/2 (1) or B only (0)
    double median_eps;           // normalized median test epsilon, px
    double median_threshold;     // normalized median test threshold
    int threads;                 // threads on one pair (1 = the calling thread)
    int smooth_predictor;        // 3 x 3 smoothing of the predictor between passes (1)
    int deform_every_pass;       // 0: integer offset before the final window size (0)
    const piv_image_t *mask;     // borrowed, may be NULL: zero pixels are outside the flow
} piv_settings_t;

// Defaults: one pass of 32 px, 50 % overlap, the final window size run up
// to 3 times, until a run corrects its predictor by less than 0.1 px RMS
// (a uniform flow stops after one run, strong gradients take three); passes
// before the final window size predict by integer window offset, the final
// size by image deformation with the quintic B-spline, symmetric about
// mid-time; eps 0.1, threshold 2, 1 thread, predictor smoothing, no mask.
// The choice of interpolator rests on 'make bench' (section 5): bilinear and
// Keys bicubic leave a bias of 0.06 px on a uniform shift, the cubic
// B-spline 0.014 px, the quintic B-spline 0.004 px.
void piv_settings_init (piv_settings_t *settings);

// Parses "64,32,16" into settings->passes. 0, or -1 with err naming the list.
int piv_settings_set_passes (piv_settings_t *settings, const char *list, char *err,
                             size_t errlen);
// Parses "offset", "bilinear", "bicubic", "bspline", "bspline5", "omoms". 0 or -1.
int piv_deform_parse (const char *name, piv_deform_t *deform, char *err, size_t errlen);
const char *piv_deform_name (piv_deform_t deform);

typedef struct _piv_t piv_t;

// An engine for one settings; checks them (NULL with err naming the bad
// setting) and makes or finds the FFTW plans. Not to be shared by threads:
// make one per thread that processes pairs (plans are shared underneath).
piv_t *piv_new (const piv_settings_t *settings, char *err, size_t errlen);
void piv_destroy (piv_t **self_p);

// Computes the field from frame A to frame B. NULL with err when the images
// differ in size, are smaller than the largest window, or memory runs out.
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

#endif
