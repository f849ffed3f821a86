// feedback.h — what the broker feeds back on every result: figures over a
// region of interest of the vector field, a PI controller on one of them,
// and the JSON of doc/control.md ("The feedback stream", F). Pure
// computation, no I/O.

#ifndef BROKER_FEEDBACK_H
#define BROKER_FEEDBACK_H

#include "common/feedback_quantity.h"
#include "piv/calib.h"
#include "piv/field.h"

#include <stddef.h>
#include <stdint.h>

// Caller-allocated; feedback_settings_init gives the defaults.
typedef struct {
    int enabled;                   // controller on (default 0)
    int roi_set;                   // 0: the whole field (default)
    double roi[4];                 // x0, y0, x1, y1: inclusive box over vector positions
    int roi_physical;              // 1: roi in metres, physical positions (piv_calib_position
                                   // through the result's calibration); 0: image px
    feedback_quantity_t quantity;  // default FEEDBACK_MEAN_U
    double setpoint;               // default 0
    double kp, ki;                 // gains, default 0; either sign (reverse acting)
    double out_min, out_max;       // output limits, default -INFINITY, +INFINITY
} feedback_settings_t;

// The controller's state, per experiment (caller-allocated).
typedef struct {
    int started;      // 0 until the first step with a value
    int64_t last_ns;  // latest frame time stepped, ns
    double integral;  // the integral term, in output units
    double output;    // the last output; NAN before the first step
} feedback_pi_t;

void feedback_settings_init (feedback_settings_t *s);

// Applies one "key=value": roi=x0,y0,x1,y1 | roi=all (numbers alone: image
// px; with a length unit of piv_calib_length, one after the last number
// for all four or one after each: metres, physical),
// quantity=NAME (a name of common/feedback_quantity.h), setpoint,
// kp, ki, out_min, out_max (finite numbers; out_min may be -inf, out_max
// inf), and enabled=on|off (written by feedback_settings_format so that the
// stored text keeps it). 0, or -1 with err naming the key and the bad
// value; the result must pass feedback_settings_check, else *s is unchanged.
int feedback_settings_set (feedback_settings_t *s, const char *key_value, char *err,
                           size_t errlen);

// Applies argv[0 .. argc - 1] as feedback_settings_set does, all or
// nothing: the result is checked once all are applied (so "out_min=5
// out_max=9" may raise both limits past the old ones); on error *s is
// unchanged and err names the first bad argument.
int feedback_settings_apply (feedback_settings_t *s, int argc, char *const *argv, char *err,
                             size_t errlen);

// Consistency: roi x0 <= x1 and y0 <= y1, all finite; setpoint and gains
// finite; no NaN limit, out_min < +inf, out_max > -inf, out_min <= out_max.
// 0, or -1 with err.
int feedback_settings_check (const feedback_settings_t *s, char *err, size_t errlen);

// The settings as "enabled=.. roi=.. quantity=.. setpoint=.. kp=.. ki=..
// out_min=.. out_max=.." (numbers %.17g, so they read back exactly), text
// that split on spaces feedback_settings_apply takes back. Writes buf
// (NUL-terminated); the length, or -1 if size is too small.
int feedback_settings_format (const feedback_settings_t *s, char *buf, size_t size);

// F of doc/control.md as a whole JSON object {enabled, roi, roi_units,
// quantity, setpoint, kp, ki, out_min, out_max, output, integral}: roi null
// for the whole field (roi_units then null, else "px" or "m"), infinite limits null, output and integral null while pi is
// NULL or not started. The length, or -1 if size is too small.
int feedback_settings_json (const feedback_settings_t *s, const feedback_pi_t *pi, char *buf,
                            size_t size);

// The quantity's name (common/feedback_quantity.h); "?" for a value out
// of range.
const char *feedback_quantity_name (feedback_quantity_t q);

// Figures over the ROI of a field. NAN figures when n == 0 (valid_fraction
// when total == 0; vorticity also when no point has a usable stencil).
typedef struct {
    int n;                  // valid vectors (flag 0) positioned inside the ROI
    int total;              // all vectors positioned inside the ROI
    double mean_u, mean_v;  // px per frame pair (m/s once calibrated)
    double mean_speed;      // mean |(u, v)|, px per frame pair (m/s once calibrated)
    double vorticity;       // mean dv/dx - du/dy, 1/frame (image axes, y down), or 1/s
                            // once calibrated (feedback_figures_calibrate: y up flips it)
    double valid_fraction;  // n / total
    int has_w;              // the field has w (stereo); else mean_w, mean_abs_w NaN
    double mean_w;          // mean w (along +z), px per frame pair (m/s once calibrated)
    double mean_abs_w;      // mean |w|, likewise
    int roi_uncalibrated;   // a physical ROI and no calibration: no vector selected
    // The standard uncertainty of each mean, in its units, when the field has
    // sigma_u, sigma_v (has_sigma); else NaN (feedback_sigma says how).
    int has_sigma;
    double sigma_mean_u, sigma_mean_v, sigma_mean_speed, sigma_vorticity;
} feedback_figures_t;

// 'vorticity' is piv_field_derive's array for the field (NULL: none, the
// vorticity NaN): one stencil for the farm. A field with sigma_u, sigma_v
// gives each mean its uncertainty (feedback_sigma); a field without, NaN.
// 'calib' is the calibration in force for the field (NULL: none), through
// which a physical ROI selects its vectors; without one a physical ROI
// selects none.
void feedback_figures (const piv_field_t *field, const float *vorticity,
                       const feedback_settings_t *s, const piv_calib_t *calib,
                       feedback_figures_t *out);
// The figures in the units of calibration 'c' (piv_calib_velocity for
// mean_u, mean_v and mean_speed, piv_calib_speed for mean_w and
// mean_abs_w: y up leaves w alone, piv_calib_vorticity): m/s and 1/s once
// calibrated; unchanged when c is NULL or not calibrated. The
// uncertainties are spreads: scaled, never sign-flipped by y up.
void feedback_figures_calibrate (feedback_figures_t *f, const piv_calib_t *c);
// The figure named by q (NAN for a q out of range).
double feedback_value (const feedback_figures_t *f, feedback_quantity_t q);
// The standard uncertainty of the figure named by q, in its units: of
// mean_u, mean_v, mean_speed and the vorticity when the field had sigma;
// NAN otherwise (valid_fraction, mean_w, mean_abs_w have none). A mean of
// n vectors, sum_l a_l e_l for errors e_l of standard deviation sigma_l
// (a_l = 1/n; the speed's linearised, a_l = u_l / (n |V_l|) on u and
// v_l / (n |V_l|) on v; the vorticity's from piv_field_vorticity_coefficients,
// over every vector its stencils reach), has the variance
// sum_l sum_m rho_lm a_l a_m sigma_l sigma_m: u's errors and v's
// independent, two vectors' correlated by the share of window area they
// have in common (piv_field_error_correlation: 0.5 for neighbours at 50 %
// overlap, 0.25 diagonal). A vector
// without sigma (replaced, or valid without a peak of its own) counts
// with the RMS sigma of the field's valid vectors.
double feedback_sigma (const feedback_figures_t *f, feedback_quantity_t q);

void feedback_pi_reset (feedback_pi_t *pi);

// One controller step at frame time now_ns (the close time of the pair's
// second frame, so that a replay computes the same outputs): e = setpoint
// - value; integral += ki * e * dt (dt in s since the latest step, 0 at
// the first step and when now_ns <= last_ns); output = clamp (kp * e +
// integral, out_min, out_max), with the anti-windup rule of feedback.c.
// Returns the output; a non-finite value leaves pi unchanged, returns NAN.
double feedback_pi_step (feedback_pi_t *pi, const feedback_settings_t *s, double value,
                         int64_t now_ns);

// One message of the feedback stream.
typedef struct {
    const char *experiment;             // its name
    int64_t pair;                       // the pair's id
    const char *stem;                   // the pair's stem
    const char *source;                 // the experiment it replays, or NULL (live)
    int64_t closed_ns;                  // second frame closed (its mtime); 0: unknown
    int64_t dispatched_ns;              // TASK sent
    int64_t computed_ns;                // RESULT received
    int64_t published_ns;               // this message
    const feedback_settings_t *settings;  // roi, quantity, enabled, setpoint
    const feedback_figures_t *figures;  // over the ROI
    double output;                      // the controller's; null unless enabled
    const piv_calib_t *calib;           // the figures' calibration (NULL: px, frames)
} feedback_message_t;

// The JSON object of doc/control.md "The feedback stream" (with "units":
// {"velocity","rate"} and "calibrated" from m->calib): value is the
// figure of settings->quantity, latency_ms = (published - closed) / 1e6;
// closed_ns and latency_ms null when closed_ns is 0 (unknown: never a
// latency from the epoch); replay true and source the replayed experiment
// when source is set, else false and null. Strings escaped, NAN and
// infinities as null, doubles %.9g. Writes buf (NUL-terminated); the
// length, or -1 if size is too small.
int feedback_message_json (const feedback_message_t *m, char *buf, size_t size);

// A recorded feedback message (feedback_message_json's, as the event log
// holds it) as a feedback-only replay re-publishes it: its "experiment"
// becomes 'as', followed by "replay":true and "source" (the experiment
// it was recorded for); the other members, times included, as recorded
// (a message already marked keeps its first source). Writes buf; the
// length, or -1 if 'payload' does not start with {"experiment":"..."
// or size is too small.
int feedback_message_replayed (const char *payload, const char *as, char *buf, size_t size);

#endif
