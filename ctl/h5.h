// h5.h — pivctl's HDF5 writer (h5.c, the one file of pivfarm that includes
// hdf5.h): vector fields streamed one by one into extendible datasets
// shaped (time, y, x) over the dimension scales x, y, time, and statistics
// as a group, with CF attributes (units, long_name) on every dataset and
// the calibration as attributes (doc/units.md, Files): netCDF-4 readers
// and xarray (engine h5netcdf) see labelled coordinates. It knows piv fields,
// statistics and calibrations, nothing of the store or the broker.

#ifndef CTL_H5_H
#define CTL_H5_H

#include "piv/calib.h"
#include "piv/field.h"
#include "piv/stats.h"

#include <stddef.h>

typedef struct _ctl_h5_t ctl_h5_t;

// Creates (or truncates) 'open_as' (ctl_out_name's temporary), named 'path'
// in messages, with the root attributes pivfarm_version, title, and the
// calibration 'c' (calibration, calibration_description, units, and when
// calibrated scale_m_per_px, dt_s, origin_x_px, origin_y_px, y_axis) and
// 'settings' (piv_settings; may be NULL). NULL with err naming the file.
ctl_h5_t *ctl_h5_new (const char *open_as, const char *path, const char *title,
                      const piv_calib_t *c, const char *settings, char *err, size_t errlen);

// Starts the field datasets on the grid of 'first' converted by the
// calibration given to ctl_h5_new: the scales x (nx), y (ny), and empty,
// extendible u, v, the derived quantities of piv_quantities (piv/derived.h),
// flags, peak_ratio (time, ny, nx; one field a chunk, shuffle and deflate),
// the scale time and pair (time). sigma_u, sigma_v (the same, units as u)
// and sigma_vorticity (the vorticity's unit) come at the first field that
// has them, NaN for the fields without. 0, or -1 with err.
int ctl_h5_fields_begin (ctl_h5_t *self, const piv_field_t *first, char *err, size_t errlen);

// Appends one field (image units, on the grid given to ctl_h5_fields_begin)
// with its derived quantities in image units (piv_field_derive_all's with
// no calibration; NULL: NaN), the time in s and its stem. Holds one field's
// worth of memory whatever the count. 0, or -1 with err.
int ctl_h5_field_add (ctl_h5_t *self, const piv_field_t *field, const float *derived,
                      double time_s, const char *stem, char *err, size_t errlen);

// Writes 'stats' as group 'group' ("stats", or "stats/2": parents made):
// x, y (its own scales), u_mean, v_mean, u_rms, v_rms, uv_mean,
// vorticity_mean, count, n_valid, n_replaced shaped (y, x) converted by
// 'c', with attributes fields,
// valid_fraction, convergence, convergence_from, the calibration and
// 'settings' (may be NULL). 0, or -1 with err.
int ctl_h5_stats (ctl_h5_t *self, const char *group, const piv_stats_t *stats,
                  const piv_calib_t *c, const char *settings, char *err, size_t errlen);

// Writes an ensemble field's Reynolds stresses (stress: 3 nx ny floats,
// u'u', v'v', u'v' in px^2 per frame^2, as piv_ensemble_field gives them)
// as datasets uu, vv, uv shaped (y, x) over the scales of
// ctl_h5_fields_begin (same grid), converted to m^2/s^2 by the file's
// calibration. 0, or -1 with err.
int ctl_h5_stresses (ctl_h5_t *self, const float *stress, int nx, int ny, char *err,
                     size_t errlen);

// Closes the file: 0, or -1 with err (what was written may be incomplete).
// Accepts NULL.
int ctl_h5_close (ctl_h5_t **self_p, char *err, size_t errlen);

#endif
