// h5.c — pivctl's HDF5 writer (h5.h): the one file that includes hdf5.h,
// built against HDF5 alone (ctl/module.mk). Fields go one by one into
// extendible datasets, one field a chunk, so the memory held is one field
// and the HDF5 chunk cache whatever the number of fields.

#include "ctl/h5.h"

#include "common/version.h"

#include <hdf5.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFLATE_LEVEL 4   // gzip level of the field datasets (with shuffle)
#define SERIES_CHUNK 1024 // elements of a chunk of time and pair

enum { D_U, D_V, D_VORTICITY, D_FLAGS, D_PEAK, D_TIME, D_PAIR, D_COUNT };
static const char *s_names[D_COUNT] = {"u", "v", "vorticity", "flags", "peak_ratio", "time", "pair"};

struct _ctl_h5_t {
    char *path;           // the file, for messages
    hid_t file;           // the file
    piv_calib_t c;        // how fields are converted
    hid_t sets[D_COUNT];  // the field datasets, once begun (0: not yet)
    int nx, ny;           // their grid
    hsize_t fields;       // fields written
    float *buf;           // one field's worth of floats
};

// err "cannot write 'PATH': WHAT" and -1.
static int
s_fail (ctl_h5_t *self, char *err, size_t errlen, const char *what)
{
    snprintf (err, errlen, "cannot write '%s': %s%s%s", self->path, what,
              errno ? ": " : "", errno ? strerror (errno) : "");
    return -1;
}

static int
s_attr_string (hid_t loc, const char *name, const char *value)
{
    hid_t type = H5Tcopy (H5T_C_S1);
    H5Tset_size (type, H5T_VARIABLE);
    H5Tset_cset (type, H5T_CSET_UTF8);
    hid_t space = H5Screate (H5S_SCALAR);
    hid_t attr = H5Acreate2 (loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = attr < 0 || H5Awrite (attr, type, &value) < 0 ? -1 : 0;
    if (attr >= 0)
        H5Aclose (attr);
    H5Sclose (space);
    H5Tclose (type);
    return rc;
}

static int
s_attr_number (hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *value)
{
    hid_t space = H5Screate (H5S_SCALAR);
    hid_t attr = H5Acreate2 (loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = attr < 0 || H5Awrite (attr, mem_type, value) < 0 ? -1 : 0;
    if (attr >= 0)
        H5Aclose (attr);
    H5Sclose (space);
    return rc;
}

static int
s_attr_double (hid_t loc, const char *name, double value)
{
    return s_attr_number (loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

static int
s_attr_int64 (hid_t loc, const char *name, int64_t value)
{
    return s_attr_number (loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

// The calibration and settings as attributes of 'loc'.
static int
s_describe (hid_t loc, const piv_calib_t *c, const char *settings)
{
    char text[512], description[512];
    if (piv_calib_format (c, text, sizeof text) < 0
        || piv_calib_describe (c, description, sizeof description) < 0)
        return -1;
    int rc = s_attr_string (loc, "calibration", text);
    rc |= s_attr_string (loc, "calibration_description", description);
    rc |= s_attr_string (loc, "units", c->set ? "si" : "px");
    if (c->set) {
        rc |= s_attr_double (loc, "scale_m_per_px", c->scale);
        rc |= s_attr_double (loc, "dt_s", c->dt);
        rc |= s_attr_double (loc, "origin_x_px", c->origin_x);
        rc |= s_attr_double (loc, "origin_y_px", c->origin_y);
        rc |= s_attr_string (loc, "y_axis", c->y_up ? "up" : "down");
    }
    if (settings)
        rc |= s_attr_string (loc, "piv_settings", settings);
    return rc;
}

ctl_h5_t *
ctl_h5_new (const char *open_as, const char *path, const char *title, const piv_calib_t *c,
            const char *settings, char *err, size_t errlen)
{
    H5Eset_auto2 (H5E_DEFAULT, NULL, NULL); // errors are reported here, one line each
    ctl_h5_t *self = calloc (1, sizeof *self);
    if (!self || !(self->path = strdup (path))) {
        snprintf (err, errlen, "no memory");
        free (self);
        return NULL;
    }
    self->c = *c;
    errno = 0;
    self->file = H5Fcreate (open_as, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (self->file < 0) {
        s_fail (self, err, errlen, "cannot create the HDF5 file");
        ctl_h5_close (&self, NULL, 0);
        return NULL;
    }
    errno = 0;
    if (s_attr_string (self->file, "pivfarm_version", PIVFARM_VERSION) != 0
        || s_attr_string (self->file, "title", title) != 0
        || s_describe (self->file, c, settings) != 0) {
        s_fail (self, err, errlen, "its attributes");
        ctl_h5_close (&self, NULL, 0);
        return NULL;
    }
    return self;
}

// A dataset 'name' under loc, rank 1 (n = dims[0]) or 2 (dims ny, nx:
// one chunk, shuffle and deflate), written at once, with its units.
static int
s_write_array (hid_t loc, const char *name, int rank, const hsize_t *dims, hid_t file_type,
               hid_t mem_type, const void *values, const char *units)
{
    hid_t space = H5Screate_simple (rank, dims, NULL);
    hid_t plist = H5Pcreate (H5P_DATASET_CREATE);
    if (rank == 2) {
        H5Pset_chunk (plist, 2, dims);
        H5Pset_shuffle (plist);
        H5Pset_deflate (plist, DEFLATE_LEVEL);
    }
    hid_t set = H5Dcreate2 (loc, name, file_type, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    int rc = set < 0 || H5Dwrite (set, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0
                     || s_attr_string (set, "units", units) < 0
                 ? -1
                 : 0;
    if (set >= 0)
        H5Dclose (set);
    H5Pclose (plist);
    H5Sclose (space);
    return rc;
}

// The grid's coordinates x (nx) and y (ny) under loc, converted by c.
static int
s_write_grid (hid_t loc, const piv_calib_t *c, int nx, int ny, const float *xs, const float *ys)
{
    double *x = malloc ((size_t)(nx > ny ? nx : ny) * sizeof *x);
    if (!x)
        return -1;
    const char *units = piv_calib_unit (c, PIV_UNIT_LENGTH);
    double ignored;
    for (int i = 0; i < nx; i++)
        piv_calib_position (c, xs[i], ys[0], &x[i], &ignored);
    hsize_t n = (hsize_t)nx;
    int rc = s_write_array (loc, "x", 1, &n, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, x, units);
    for (int j = 0; j < ny; j++)
        piv_calib_position (c, xs[0], ys[(size_t)j * nx], &ignored, &x[j]);
    n = (hsize_t)ny;
    rc |= s_write_array (loc, "y", 1, &n, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, x, units);
    free (x);
    return rc;
}

// An empty extendible dataset: rank 3 (fields, ny, nx) compressed, one
// field a chunk, or rank 1 (fields).
static hid_t
s_series (ctl_h5_t *self, const char *name, hid_t type, int rank, const char *units)
{
    hsize_t dims[3] = {0, (hsize_t)self->ny, (hsize_t)self->nx};
    hsize_t max[3] = {H5S_UNLIMITED, dims[1], dims[2]};
    hsize_t chunk[3] = {rank == 3 ? 1 : SERIES_CHUNK, dims[1], dims[2]};
    hid_t space = H5Screate_simple (rank, dims, max);
    hid_t plist = H5Pcreate (H5P_DATASET_CREATE);
    H5Pset_chunk (plist, rank, chunk);
    if (rank == 3) {
        H5Pset_shuffle (plist);
        H5Pset_deflate (plist, DEFLATE_LEVEL);
    }
    hid_t set = H5Dcreate2 (self->file, name, type, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    H5Pclose (plist);
    H5Sclose (space);
    if (set >= 0 && units && s_attr_string (set, "units", units) < 0) {
        H5Dclose (set);
        return -1;
    }
    return set;
}

int
ctl_h5_fields_begin (ctl_h5_t *self, const piv_field_t *first, char *err, size_t errlen)
{
    const piv_calib_t *c = &self->c;
    self->nx = first->nx;
    self->ny = first->ny;
    self->buf = malloc ((size_t)first->nx * first->ny * sizeof (float));
    errno = 0;
    if (!self->buf)
        return s_fail (self, err, errlen, "no memory for a field");
    if (s_write_grid (self->file, c, first->nx, first->ny, first->x, first->y) != 0)
        return s_fail (self, err, errlen, "the grid x, y");
    hid_t text = H5Tcopy (H5T_C_S1);
    H5Tset_size (text, H5T_VARIABLE);
    H5Tset_cset (text, H5T_CSET_UTF8);
    const char *velocity = piv_calib_unit (c, PIV_UNIT_VELOCITY);
    self->sets[D_U] = s_series (self, "u", H5T_IEEE_F32LE, 3, velocity);
    self->sets[D_V] = s_series (self, "v", H5T_IEEE_F32LE, 3, velocity);
    self->sets[D_VORTICITY] =
        s_series (self, "vorticity", H5T_IEEE_F32LE, 3, piv_calib_unit (c, PIV_UNIT_RATE));
    self->sets[D_FLAGS] = s_series (self, "flags", H5T_STD_U8LE, 3, "1");
    self->sets[D_PEAK] = s_series (self, "peak_ratio", H5T_IEEE_F32LE, 3, "1");
    self->sets[D_TIME] = s_series (self, "time", H5T_IEEE_F64LE, 1, "s");
    self->sets[D_PAIR] = s_series (self, "pair", text, 1, NULL);
    H5Tclose (text);
    for (int d = 0; d < D_COUNT; d++)
        if (self->sets[d] < 0) {
            char what[64];
            snprintf (what, sizeof what, "cannot create the dataset '%s'", s_names[d]);
            return s_fail (self, err, errlen, what);
        }
    if (s_attr_string (self->sets[D_FLAGS], "meaning", "0 valid, 1 replaced, 2 invalid or masked")
            != 0
        || s_attr_string (self->sets[D_TIME], "meaning",
                          "camera close time of frame B, from the first exported pair")
               != 0)
        return s_fail (self, err, errlen, "the datasets' attributes");
    return 0;
}

// Writes element n of dataset d (rank 3: one field from buf; rank 1: one
// value) after growing it to n + 1.
static int
s_append (ctl_h5_t *self, int d, hid_t mem_type, const void *buf)
{
    hid_t set = self->sets[d];
    int rank = d == D_TIME || d == D_PAIR ? 1 : 3;
    hsize_t size[3] = {self->fields + 1, (hsize_t)self->ny, (hsize_t)self->nx};
    hsize_t start[3] = {self->fields, 0, 0};
    hsize_t count[3] = {1, (hsize_t)self->ny, (hsize_t)self->nx};
    if (H5Dset_extent (set, size) < 0)
        return -1;
    hid_t file_space = H5Dget_space (set);
    hid_t mem_space = H5Screate_simple (rank, count, NULL);
    int rc = H5Sselect_hyperslab (file_space, H5S_SELECT_SET, start, NULL, count, NULL) < 0
                     || H5Dwrite (set, mem_type, mem_space, file_space, H5P_DEFAULT, buf) < 0
                 ? -1
                 : 0;
    H5Sclose (mem_space);
    H5Sclose (file_space);
    return rc;
}

int
ctl_h5_field_add (ctl_h5_t *self, const piv_field_t *field, const float *vorticity,
                  double time_s, const char *stem, char *err, size_t errlen)
{
    errno = 0;
    if (field->nx != self->nx || field->ny != self->ny) {
        snprintf (err, errlen, "cannot write pair '%s' into '%s': its grid %dx%d is not %dx%d",
                  stem, self->path, field->nx, field->ny, self->nx, self->ny);
        return -1;
    }
    const piv_calib_t *c = &self->c;
    size_t n = (size_t)field->nx * field->ny;
    double u, v;
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (size_t k = 0; k < n; k++) {
            piv_calib_velocity (c, field->u[k], field->v[k], &u, &v);
            self->buf[k] = (float)(pass == 0 ? u : v);
        }
        rc = s_append (self, pass == 0 ? D_U : D_V, H5T_NATIVE_FLOAT, self->buf);
    }
    for (size_t k = 0; k < n; k++)
        self->buf[k] = vorticity ? (float)piv_calib_vorticity (c, vorticity[k]) : NAN;
    const char *name = stem;
    if (rc == 0)
        rc = s_append (self, D_VORTICITY, H5T_NATIVE_FLOAT, self->buf);
    if (rc == 0)
        rc = s_append (self, D_FLAGS, H5T_NATIVE_UINT8, field->flags);
    if (rc == 0)
        rc = s_append (self, D_PEAK, H5T_NATIVE_FLOAT, field->peak_ratio);
    if (rc == 0)
        rc = s_append (self, D_TIME, H5T_NATIVE_DOUBLE, &time_s);
    if (rc == 0) {
        hid_t text = H5Dget_type (self->sets[D_PAIR]);
        rc = s_append (self, D_PAIR, text, &name);
        H5Tclose (text);
    }
    if (rc != 0) {
        char what[512];
        snprintf (what, sizeof what, "the field of pair '%s'", stem);
        return s_fail (self, err, errlen, what);
    }
    self->fields++;
    return 0;
}

// The statistics' columns, converted by c, into the group.
enum { S_U, S_V, S_URMS, S_VRMS, S_UV, S_VORTICITY, S_COLUMNS };

static int
s_write_stats (hid_t group, const piv_stats_t *stats, const piv_calib_t *c, int nx, int ny)
{
    static const char *names[S_COLUMNS] = {"u_mean", "v_mean", "u_rms",
                                           "v_rms",  "uv_mean", "vorticity_mean"};
    size_t n = (size_t)nx * ny;
    hsize_t dims[2] = {(hsize_t)ny, (hsize_t)nx};
    double *col = malloc (n * S_COLUMNS * sizeof *col);
    int64_t *count = malloc (n * sizeof *count);
    float *xs = malloc (2 * n * sizeof *xs);
    int rc = col && count && xs ? 0 : -1;
    // u' and v' scale as u and v; u'v' as their product (the sign of v too).
    double su, sv;
    piv_calib_velocity (c, 1, 1, &su, &sv);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        piv_stats_point_t p;
        piv_stats_point (stats, (long)k, &p);
        double *row = col; // column-major: column s at col + s * n
        piv_calib_velocity (c, p.u_mean, p.v_mean, &row[S_U * n + k], &row[S_V * n + k]);
        row[S_URMS * n + k] = p.u_rms * fabs (su);
        row[S_VRMS * n + k] = p.v_rms * fabs (sv);
        row[S_UV * n + k] = p.uv_mean * su * sv;
        row[S_VORTICITY * n + k] = piv_calib_vorticity (c, p.vorticity_mean);
        count[k] = p.count;
        xs[k] = (float)p.x;
        xs[n + k] = (float)p.y;
    }
    if (rc == 0)
        rc = s_write_grid (group, c, nx, ny, xs, xs + n);
    char units[64];
    const char *velocity = piv_calib_unit (c, PIV_UNIT_VELOCITY);
    for (int s = 0; rc == 0 && s < S_COLUMNS; s++) {
        if (s == S_UV)
            snprintf (units, sizeof units, "(%s)^2", velocity);
        else
            snprintf (units, sizeof units, "%s",
                      s == S_VORTICITY ? piv_calib_unit (c, PIV_UNIT_RATE) : velocity);
        rc = s_write_array (group, names[s], 2, dims, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                            col + s * n, units);
    }
    if (rc == 0)
        rc = s_write_array (group, "count", 2, dims, H5T_STD_I64LE, H5T_NATIVE_INT64, count, "1");
    free (col);
    free (count);
    free (xs);
    return rc;
}

int
ctl_h5_stats (ctl_h5_t *self, const char *group_name, const piv_stats_t *stats,
              const piv_calib_t *c, const char *settings, char *err, size_t errlen)
{
    int nx, ny, step, window;
    piv_stats_grid (stats, &nx, &ny, &step, &window);
    piv_stats_summary_t sum;
    piv_stats_summary (stats, &sum);
    errno = 0;
    hid_t links = H5Pcreate (H5P_LINK_CREATE);
    H5Pset_create_intermediate_group (links, 1);
    hid_t group = H5Gcreate2 (self->file, group_name, links, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose (links);
    int rc = group < 0 ? -1 : 0;
    if (rc == 0)
        rc = s_write_stats (group, stats, c, nx, ny);
    if (rc == 0)
        rc = s_attr_int64 (group, "fields", sum.fields)
             | s_attr_double (group, "valid_fraction", sum.valid_fraction)
             | s_attr_double (group, "convergence", sum.convergence)
             | s_attr_int64 (group, "convergence_from", sum.convergence_from)
             | s_attr_int64 (group, "step_px", step) | s_attr_int64 (group, "window_px", window)
             | s_describe (group, c, settings);
    if (group >= 0)
        H5Gclose (group);
    if (rc != 0) {
        char what[256];
        snprintf (what, sizeof what, "the statistics group '%s'", group_name);
        return s_fail (self, err, errlen, what);
    }
    return 0;
}

int
ctl_h5_close (ctl_h5_t **self_p, char *err, size_t errlen)
{
    ctl_h5_t *self = *self_p;
    if (!self)
        return 0;
    int rc = 0;
    for (int d = 0; d < D_COUNT; d++)
        if (self->sets[d] > 0)
            H5Dclose (self->sets[d]);
    errno = 0;
    if (self->file >= 0 && self->file != 0 && H5Fclose (self->file) < 0) {
        if (err)
            s_fail (self, err, errlen, "closing the file");
        rc = -1;
    }
    free (self->buf);
    free (self->path);
    free (self);
    *self_p = NULL;
    return rc;
}
