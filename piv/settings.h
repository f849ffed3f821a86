// settings.h — the settings of the PIV core and every rule about them, in
// one place: the engine's checks (piv_new), the text a TASK carries
// ("passes=64,32,16 overlap=50 iterations=3 deform=bspline5": the broker
// writes it, agents read it) and the [piv] keys of the configuration file.
// Plain C: no FFTW, no libtiff, nothing of common/.

#ifndef PIV_SETTINGS_H
#define PIV_SETTINGS_H

#include <stddef.h>
#include "piv/image.h"

#define PIV_MAX_PASSES 8
#define PIV_MAX_WINDOW 256      // px, the largest window size (windows are even, >= 8)
#define PIV_MAX_THREADS 64
#define PIV_MAX_OVERLAP 87      // percent
#define PIV_MAX_ITERATIONS 10   // runs of the final window size
#define PIV_MASK_PATH_MAX 256   // bytes of a mask's path, its NUL included
#define PIV_PREFILTER_MAX 3.0   // px, the largest sigma of the prefilter (a 19-tap kernel)
#define PIV_CAP_MAX 10.0        // the largest n of intensity capping (median + n sigma)
#define PIV_HIGHPASS_MAX 64.0   // px, the largest sigma of the high-pass's low-pass
#define PIV_LCN_MAX 512         // px, the largest tile of local contrast normalisation
#define PIV_BACKGROUND_MAX 32   // frames, the largest sliding set of a background

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

// Robust penalized least squares smoothing (piv_smoothn, GCV) of the
// field between passes, as the next pass's predictor, and of the final
// field (vectors flagged valid weigh 1, the others 0).
typedef enum {
    PIV_SMOOTH_OFF,        // none (smooth_predictor's 3 x 3 filter, if set)
    PIV_SMOOTH_PREDICTOR,  // the predictor between passes only
    PIV_SMOOTH_FINAL,      // the final field only
    PIV_SMOOTH_BOTH        // the predictor and the final field
} piv_smooth_t;

// The sub-pixel estimator of a correlation peak (issue 24, 'make bench'
// section 10). Both divide out the windows' overlap weight first.
typedef enum {
    PIV_SUBPIXEL_GAUSS3,   // 3-point Gaussian per axis (a parabola where a value is not
                           // positive)
    PIV_SUBPIXEL_GAUSS2D   // 2-D Gaussian regression over the 3 x 3 neighbourhood
                           // (Nobach & Honkanen, Exp. Fluids 38, 2005); gauss3 where a
                           // value is not positive or the fit has no maximum there
} piv_subpixel_t;

// The uncertainty of each vector of the final pass (issue 27, piv/uncertainty.h;
// key uncertainty: auto, off, cs, mc): sigma_u, sigma_v in the field.
typedef enum {
    PIV_UNCERTAINTY_OFF,  // none: the field has no sigma_u, sigma_v
    PIV_UNCERTAINTY_CS,   // correlation statistics (Wieneke 2015)
    PIV_UNCERTAINTY_MC,   // moment of correlation (after Bhattacharya et al. 2018)
    PIV_UNCERTAINTY_AUTO  // the default: cs for more than one pass or iteration (+13-15 %
                          // of a multipass pair), off for a single run (the latency
                          // choice: cs would add half of it again); piv_uncertainty_method
} piv_uncertainty_t;

// Background subtraction from the experiment's own frames (key background:
// none, min:N, mean:N): the pixelwise minimum or mean of the last N frames
// seen, the pair's own included (piv/background.h). The engine does not
// apply it (it sees one pair): the agent keeps the frames of each
// experiment and subtracts it before piv_process.
typedef enum {
    PIV_BACKGROUND_NONE,  // no subtraction (the default)
    PIV_BACKGROUND_MIN,   // the minimum of the last N frames
    PIV_BACKGROUND_MEAN   // their mean
} piv_background_kind_t;

// Caller-allocated settings; piv_settings_init fills the defaults.
typedef struct {
    int passes[PIV_MAX_PASSES];  // window sizes, large to small, each even 8..256
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
    int median_curved;           // the median test's second look against the lines (1)
    const piv_image_t *mask;     // borrowed, may be NULL: zero pixels are outside the flow
    char mask_path[PIV_MASK_PATH_MAX];  // the mask's file, as a TASK names it ("": none);
                                        // its reader (the agent) sets 'mask' from it
    piv_smooth_t smooth;         // DCT-PLS smoothing, replaces smooth_predictor's filter
    double smooth_s;             // its parameter s (> 0), or 0: chosen by GCV
    int median_passes;           // median test repeated while it rejects, at most (>= 1)
    double peak_ratio_min;       // vectors of a lower peak ratio rejected (0: none)
    double contrast;             // windows of less contrast than this share of the median's:
                                 // no signal, INVALID (0.2; 0: off)
    double cbc;                  // windows whose correlation peak is below this share of
                                 // their 4 neighbours' mean, of an ambiguous peak (ratio < 2):
                                 // the sum of the 5 planes, where it moves them > 1 px
                                 // (sparse.c; 0.5; 0: off)
    piv_subpixel_t subpixel;     // sub-pixel estimator of every peak (gauss3)
    double prefilter;            // px, sigma of a Gaussian low-pass of both frames before
                                 // anything else (piv/prefilter.h; 0: none, the default)
    // Preprocessing of both frames (piv/preprocess.h), in this order, each
    // off (0) by default, the prefilter after them:
    double cap;                  // intensity capping at the frame's median + cap sigma
                                 // (Shavit et al. 2007; 0: off)
    double highpass;             // px, sigma of a Gaussian low-pass subtracted (0: off)
    int lcn;                     // px, tile of local contrast normalisation: each pixel
                                 // less its tile's mean, over its tile's std (0: off)
    piv_background_kind_t background;  // background from the experiment's frames (agent)
    int background_frames;       // ... over the last this many frames (1 .. 32)
    piv_uncertainty_t uncertainty;  // each vector's sigma_u, sigma_v (off)
} piv_settings_t;

// Validation and smoothing (issue 17, 'make bench' section 8, doc/piv.md):
// one normalized median test per pass (median_passes 1: repeating it costs
// the sine flow 25 %), no peak-ratio rejection (peak_ratio 0), the final
// field smoothed by piv_smoothn with s chosen per field by GCV (smooth=final,
// smooth_s=0; issue 24): small structures keep their peaks (bench_piv
// --only resolution: a 12 px vortex core 0.78 of its vorticity, a 32 px
// sine 0.75 of its amplitude, against 0.46 and 0.50 with the earlier fixed
// s = 0.1), where the real pairs keep more of their small-scale noise
// (B005, 2image, exp1: 0.096 / 0.201 / 0.252 px against 0.094 / 0.166 /
// 0.160; GCV takes exp1's noise, correlated between overlapping windows,
// for flow). smooth_s > 0 fixes s for every field.
// Sparse seeding: cbc 0.5 (sparse.h; doc/piv.md, "Validation": at 0.005
// particles/px RMS error 0.7 -> 0.14-0.35 px, nothing else moved beyond noise).
// Defaults: one pass of 32 px, 50 % overlap, the final window size run up
// to 3 times, until a run corrects its predictor by less than 0.1 px RMS
// (a uniform flow stops after one run, strong gradients take three); passes
// before the final window size predict by integer window offset, the final
// size by image deformation with the quintic B-spline, symmetric about
// mid-time; eps 0.1, threshold 2, 1 thread, predictor smoothing, no mask.
// The choice of interpolator rests on 'make bench' (section 5): bilinear and
// Keys bicubic leave a bias of 0.06 px on a uniform shift, the cubic
// B-spline 0.014 px, the quintic B-spline 0.004 px. Sub-pixel fit: the
// 3-point Gaussian (gauss2d has 2-25 % more random error on every synthetic
// and real pair and more peak locking at 1 px: 'make bench' section 10); no
// prefilter (0.7 px cuts the peak locking of 1-1.5 px particles by 2-3x but
// adds 15 % noise to the real pairs and costs 2.6 px particles: doc/piv.md).
// Each vector's uncertainty by correlation statistics for more than one
// run, none for a single run (uncertainty=auto, issue 27: 'make bench'
// section 12; 13-15 % of a multipass pair, half of a single pass again).
void piv_settings_init (piv_settings_t *settings);

// Parses "64,32,16" into settings->passes. 0, or -1 with err naming the list.
int piv_settings_set_passes (piv_settings_t *settings, const char *list, char *err,
                             size_t errlen);
// Sets settings->mask_path to 'path': an absolute path without spaces or
// control characters, shorter than PIV_MASK_PATH_MAX; "" or "none" is no
// mask. 0, or -1 with err ("bad settings: mask 'x.tif' is not an absolute
// path") and mask_path unchanged. 'mask' (the image) is not touched.
int piv_settings_set_mask (piv_settings_t *settings, const char *path, char *err, size_t errlen);

// Parses "offset", "bilinear", "bicubic", "bspline", "bspline5", "omoms". 0 or -1.
int piv_deform_parse (const char *name, piv_deform_t *deform, char *err, size_t errlen);
const char *piv_deform_name (piv_deform_t deform);

// Parses "gauss3", "gauss2d" (piv_subpixel_t). 0, or -1 with err ("bad
// settings: subpixel 'x': expected gauss3 or gauss2d").
int piv_subpixel_parse (const char *name, piv_subpixel_t *subpixel, char *err, size_t errlen);
const char *piv_subpixel_name (piv_subpixel_t subpixel);
// Parses "off", "cs", "mc", "auto" (piv_uncertainty_t). 0, or -1 with err
// ("bad settings: uncertainty 'x': expected auto, off, cs or mc").
int piv_uncertainty_parse (const char *name, piv_uncertainty_t *method, char *err,
                           size_t errlen);
const char *piv_uncertainty_name (piv_uncertainty_t method);
// The method the settings run: their uncertainty, auto resolved by their
// runs (cs for more than one pass or iteration, off for a single run).
// Never PIV_UNCERTAINTY_AUTO.
piv_uncertainty_t piv_uncertainty_method (const piv_settings_t *settings);

// Parses "none", "min:N" or "mean:N" (N frames, 1 to PIV_BACKGROUND_MAX)
// into *kind and *frames. 0, or -1 with err ("bad settings: background
// 'x': expected none, min:N or mean:N, N from 1 to 32").
int piv_background_parse (const char *text, piv_background_kind_t *kind, int *frames, char *err,
                          size_t errlen);
// "none", or "min:N" / "mean:N" into buf (at least 16 bytes); buf.
const char *piv_background_text (piv_background_kind_t kind, int frames, char *buf, size_t size);

// Parses "off", "predictor", "final" (piv_smooth_t). 0, or -1 with err.
int piv_smooth_parse (const char *name, piv_smooth_t *smooth, char *err, size_t errlen);
const char *piv_smooth_name (piv_smooth_t smooth);

// What piv_new accepts: 0, or -1 with err ("bad settings: ...") naming the
// first setting out of its range.
int piv_settings_check (const piv_settings_t *settings, char *err, size_t errlen);

// The settings of a TASK as text: "passes=64,32,16 overlap=50 iterations=3
// deform=bspline5 mask=/rig/wall.tif" (the keys the farm sets, mask only
// when there is one; the rest are defaults). Parse: piv_settings_init,
// then each key=value, in any order, any of them left out; 0, or -1 with
// err ("bad settings ...": not key=value, an unknown key, a list or an
// interpolator refused, a number that is not one, a mask path that is not
// absolute or holds a space). Ranges are piv_settings_check's, at piv_new.
// Text beyond 511 characters is not read. The mask is named, not loaded:
// settings->mask stays NULL.
int piv_settings_parse (const char *text, piv_settings_t *settings, char *err, size_t errlen);
// Format: that text of settings into buf; its length, or -1 if it does not
// fit (buf then holds a cut copy) or mask_path is one parse would refuse.
// piv_settings_parse reads it back.
int piv_settings_format (const piv_settings_t *settings, char *buf, size_t size);

// The rules of the configuration file's keys of the PIV settings (section
// [piv]: passes, overlap, iterations, deform, mask), for config_rules
// (common/config.h), which composes "value 'V' of 'piv/NAME' in 'FILE'
// <why>". Returns 0 with the value as it is to be kept in norm ("32, 16"
// becomes "32,16"), or -1 with why: "is not a number: expected an integer
// from 0 to 87", "is out of range: ...", "is not one of its choices:
// expected offset, ...", "is not valid: expected one to eight window
// sizes ...", or for another name "is not a setting of the PIV core".
// mask is a path, absolute or relative (config_load anchors it at the
// file's directory), without spaces or control characters; "" and "none"
// are no mask (norm ""). The preprocessing keys (issue 25) have their rules
// here: cap and highpass (numbers, 0 to 10 and 0 to 64), lcn (0 or 3 to
// 512), background (none, min:N, mean:N). Any other name is handed to
// piv_settings_parse as "name=value" and the result to piv_settings_check
// (norm: the value as given): the file and 'pivctl piv' take exactly the
// keys the engine parses, "is not a setting of the PIV core" for the others.
int piv_settings_check_key (const char *name, const char *value, char *norm, size_t normlen,
                            char *why, size_t whylen);

#endif
