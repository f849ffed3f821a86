// mat.h — pivctl's MATLAB writer (mat.c, the one file of pivfarm that
// includes matio.h): the exported fields as one MAT-file, version 5 (what
// scipy.io.loadmat, Octave and MATLAB all read), as PIVlab users find
// them: 3-D arrays [ny nx nt] per quantity and the grid as vectors
// (doc/units.md, Files). It knows piv fields and calibrations, nothing of
// the store or the broker.

#ifndef CTL_MAT_H
#define CTL_MAT_H

#include "piv/calib.h"
#include "piv/field.h"
#include "piv/stats.h"

#include <stddef.h>

typedef struct _ctl_mat_t ctl_mat_t;

// A MAT-file to come, converted by 'c', titled 'title' (the experiment),
// with 'settings' (may be NULL). NULL on no memory.
ctl_mat_t *ctl_mat_new (const piv_calib_t *c, const char *title, const char *settings);

// Adds one field (image units; the grid of the first field) with its
// derived quantities (piv_field_derive_all's in image units, NULL: NaN),
// the time in s and its stem. A version-5 MAT-file holds each array whole,
// so the fields are kept in memory until ctl_mat_write: 25 bytes a vector
// a field (room grows by doubling). 0, or -1 with err (no memory, another grid).
int ctl_mat_field_add (ctl_mat_t *self, const piv_field_t *field, const float *derived,
                       double time_s, const char *stem, char *err, size_t errlen);

// Adds 'nmore' (0 to PIV_MORE_MAX) arrays of the file as a whole (an
// ensemble field's Reynolds stresses), written ny x nx (single) after the
// fields' with their units in the units struct: 'more' as piv/field.h has
// them (grid order, values already in their unit; copied). Call after the
// first field (its grid). 0, or -1 with err (no memory, no field yet, too many).
int ctl_mat_more_add (ctl_mat_t *self, const piv_column_t *more, int nmore, char *err,
                      size_t errlen);

// Writes the file 'open_as' (ctl_out_name's temporary), named 'path' in
// messages: x (1 x nx), y (ny x 1), u, v, the derived quantities,
// peak_ratio (and sigma_u, sigma_v, sigma_vorticity once a field had
// them: NaN for those without) (single, ny x nx x nt), flags (uint8, ny x nx x nt), time
// (nt x 1), pair (nt x 1 cell of char), units (a struct of char: one field
// per variable), calibration, calibration_description, piv_settings and
// title (char), and with 'stats' (may be NULL) the struct stats: x, y and
// the figures of piv_stat_figures (ny x nx double) converted by 'stats_c',
// fields, valid_fraction, convergence and its own units struct.
// Compressed. 0, or -1 with err naming the file.
int ctl_mat_write (ctl_mat_t *self, const piv_stats_t *stats, const piv_calib_t *stats_c,
                   const char *open_as, const char *path, char *err, size_t errlen);

// Accepts NULL.
void ctl_mat_destroy (ctl_mat_t **self_p);

#endif
