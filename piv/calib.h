// calib.h — the calibration of an experiment: how image pixels and frame
// pairs become metres and seconds (scale, time between frames, origin,
// direction of the physical y axis), its text forms (the configuration's
// [calibration] section, the control channel's 'calibrate', the store's
// setting) and the conversions every output applies. Results stay stored
// in pixels; units are applied on output. Plain C: no library.

#ifndef PIV_CALIB_H
#define PIV_CALIB_H

#include <stddef.h>
#include "piv/field.h"

// Caller-allocated; piv_calib_init gives "not calibrated".
typedef struct {
    int set;            // 1: calibrated (scale and dt known); 0: pixels and frames
    double scale;       // metres per pixel, > 0
    double dt;          // seconds between frame A and frame B, > 0
    double origin_x;    // image column (px) of the physical origin, >= 0 as typed (default
                        // 0); a stereo grid's (piv_stereo_grid_calib) may be < 0
    double origin_y;    // image row (px) of the physical origin, as origin_x
    int y_up;           // 1 (default): physical y points up, against the image rows
} piv_calib_t;

void piv_calib_init (piv_calib_t *c);

// Sets one key from text, as the configuration and 'calibrate' give it:
//   scale   "0.05 mm/px", "0.05mm/px", "20 px/mm", "50 um/px", "50 µm/px",
//           "2e-5 m/px" (length units um, µm, mm, m; either direction)
//   dt      "1 ms", "500 us", "500 µs", "0.002 s", "2ms" (units s, ms, us, µs, ns)
//   origin  "X,Y" in image pixels (column, row), each finite and >= 0
//   y_axis  "up" or "down"
// A number without unit, zero, negative, non-finite, an unknown unit or key
// is refused: -1 with err naming the key, the value and the accepted forms
// ("bad calibration scale '-1 mm/px': expected a positive length per pixel
// such as 0.05 mm/px or 20 px/mm (units um, mm, m)"); *c unchanged. c->set
// becomes 1 once scale and dt both have been given (in any order).
int piv_calib_set (piv_calib_t *c, const char *key, const char *value, char *err,
                   size_t errlen);

// The length units a length, a scale and an ROI take (doc/units.md), as
// every refusal names them.
#define PIV_CALIB_LENGTH_UNITS "um, mm, m"

// One length as typed: a finite decimal number, optionally followed (after
// blanks) by a length unit of piv_calib_set's scale ("5mm", "-5 mm", "50
// µm", "0.02m"): *number the number, *unit the unit's size in metres, 0
// when no unit follows (the caller decides what a bare number means). 0,
// or -1 with err saying why ("unknown length unit 'in': expected um, mm or
// m", "'x' is not a number").
int piv_calib_length (const char *text, double *number, double *unit, char *err, size_t errlen);

// The unit a person reads lengths of magnitude up to 'largest' (metres)
// in, as piv_calib_describe chooses it for a scale: "m" from 1 m, "mm"
// down to 0.01 mm, then "µm"; *size its size in metres.
const char *piv_calib_length_unit (double largest, double *size);

// Parses the whole text "scale=0.05mm/px dt=1ms origin=0,0 y_axis=up" (any
// order; keys left out keep their defaults; "" or "none": not calibrated).
// Values hold no spaces in this form (piv_calib_set's own forms accept
// "0.05 mm/px"). A recorded text's origin may be negative (a stereo grid's,
// outside the frames); piv_calib_set refuses one an operator types. All or nothing: -1 with err (as piv_calib_set's, or "bad
// calibration '...': scale and dt are both needed") and *c unchanged.
int piv_calib_parse (const char *text, piv_calib_t *c, char *err, size_t errlen);

// The four keys as the configuration's [calibration] section holds them
// (each "" when not given): a calibration from scratch, each key given set
// by piv_calib_set. 0, or -1 with its err (*c then not calibrated).
int piv_calib_from_keys (piv_calib_t *c, const char *scale, const char *dt, const char *origin,
                         const char *y_axis, char *err, size_t errlen);

// The canonical text piv_calib_parse reads back exactly: "none", or
// "scale=0.02mm/px dt=500us origin=0,0 y_axis=up": each value as it was
// most likely typed, the shortest number in the unit that reads best (mm/px
// down to 0.01 mm/px, then um/px; px/mm when only that form reads back; the
// largest time unit that keeps the number at 1 or more) that parses back to
// the same bits, else in m/px or s with up to 17 digits. ASCII only ("us").
// Its length, or -1 if size is too small.
int piv_calib_format (const piv_calib_t *c, char *buf, size_t size);

// For people, the same values with spaces and the micro sign: "0.02 mm/px,
// dt 500 µs, origin (0, 0) px, y up", or "not calibrated (px, frames)".
// Its length or -1.
int piv_calib_describe (const piv_calib_t *c, char *buf, size_t size);

// The origin inside a width x height image: 0, or -1 with err ("calibration
// origin 900,10 lies outside the 512x512 image").
int piv_calib_check_image (const piv_calib_t *c, int width, int height, char *err,
                           size_t errlen);

// The rules of the configuration's [calibration] keys (scale, dt, origin,
// y_axis; all optional, scale and dt together or neither) for config_rules
// (common/config.h), as piv_settings_check_key: 0 with the value kept in
// norm, or -1 with why ("is not a length per pixel: expected ...").
int piv_calib_check_key (const char *name, const char *value, char *norm, size_t normlen,
                         char *why, size_t whylen);

// Units of what a user reads: "m", "m/s", "1/s" when calibrated, else
// "px", "px/frame", "1/frame".
typedef enum { PIV_UNIT_LENGTH, PIV_UNIT_VELOCITY, PIV_UNIT_RATE } piv_unit_t;
const char *piv_calib_unit (const piv_calib_t *c, piv_unit_t unit);

// Conversions from image units (x right, y down, px; u, v px per frame
// pair; rates 1/frame as piv/derived.h computes them) to the calibrated
// ones; identities when not calibrated. With y_up the y axis and v change
// sign and so does the vorticity (a right-handed x, y, z); the divergence
// does not.
void piv_calib_position (const piv_calib_t *c, double x_px, double y_px, double *x, double *y);
void piv_calib_velocity (const piv_calib_t *c, double u_px, double v_px, double *u, double *v);
double piv_calib_vorticity (const piv_calib_t *c, double w_per_frame);
double piv_calib_divergence (const piv_calib_t *c, double d_per_frame);
double piv_calib_speed (const piv_calib_t *c, double speed_px_per_frame);

// A copy of 'field' with x, y, u, v (and w, sigma_u, sigma_v: magnitudes,
// scaled as piv_calib_speed) converted (window and step stay in px);
// NULL on no memory. The caller destroys it.
piv_field_t *piv_calib_field (const piv_calib_t *c, const piv_field_t *field);

#endif
