// h5.c — pivctl's HDF5 writer (h5.h): the one file that includes hdf5.h,
// built against HDF5 alone (ctl/module.mk). Fields go one by one into
// extendible datasets, one field a chunk, so the memory held is one field
// and the HDF5 chunk cache whatever the number of fields.

#include "ctl/h5.h"

#include "common/version.h"
#include "piv/derived.h"
#include "piv/ensemble.h"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFLATE_LEVEL 4   // gzip level of the field datasets (with shuffle)
#define SERIES_CHUNK 1024 // elements of a chunk of time and pair

// The field datasets: u, v, the derived quantities in the order of
// piv_quantities (piv/derived.h), flags, peak_ratio, the series, then a
// stereo field's w and residual (made only for fields with w), then
// sigma_u, sigma_v, sigma_vorticity (made at the first field that has them).
enum {
    D_U,
    D_V,
    D_DERIVED,
    D_FLAGS = D_DERIVED + PIV_DERIVED_COUNT,
    D_PEAK,
    D_TIME,
    D_PAIR,
    D_W,
    D_RESIDUAL,
    D_SIGMA_U,
    D_SIGMA_V,
    D_SIGMA_VORTICITY,
    D_COUNT
};

// Name and long_name (CF) of dataset d.
static void
s_dataset (int d, const char **name, const char **long_name)
{
    static const struct {
        const char *name, *long_name;
    } own[D_COUNT] = {
        [D_U] = {"u", "velocity along x"},
        [D_V] = {"v", "velocity along y"},
        [D_FLAGS] = {"flags", "vector flag: 0 valid, 1 replaced, 2 invalid or masked"},
        [D_PEAK] = {"peak_ratio", "first to second correlation peak"},
        [D_TIME] = {"time", "camera close time of frame B from the first exported pair"},
        [D_PAIR] = {"pair", "stem of the image pair"},
        [D_W] = {"w", "velocity along z (out of the light sheet, right-handed with x, y)"},
        [D_RESIDUAL] = {"residual", "misfit of the stereo reconstruction's 4 equations, image px"},
        [D_SIGMA_U] = {"sigma_u", "standard uncertainty of u"},
        [D_SIGMA_V] = {"sigma_v", "standard uncertainty of v"},
        [D_SIGMA_VORTICITY] = {"sigma_vorticity", "standard uncertainty of the vorticity"},
    };
    if (d >= D_DERIVED && d < D_FLAGS) {
        *name = piv_quantities[d - D_DERIVED].name;
        *long_name = piv_quantities[d - D_DERIVED].long_name;
    }
    else {
        *name = own[d].name;
        *long_name = own[d].long_name;
    }
}

struct _ctl_h5_t {
    char *path;           // the file, for messages
    hid_t file;           // the file
    piv_calib_t c;        // how fields are converted
    hid_t sets[D_COUNT];  // the field datasets, once begun (0: not yet)
    hid_t grid[2];        // the dimension scales y and x, once begun (0: not yet)
    int nx, ny;           // their grid
    int three;            // the fields have w (stereo): datasets w and residual
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

// 'units' and 'long_name' of a dataset (CF attributes): 0 or -1.
static int
s_cf (hid_t set, const char *units, const char *long_name)
{
    return (units && s_attr_string (set, "units", units) < 0)
                   || s_attr_string (set, "long_name", long_name) < 0
               ? -1
               : 0;
}

// Attaches the dimension scales scales[0 .. rank - 1] (outermost first) to
// 'set': HDF5's dimension scales, which netCDF-4, h5netcdf and xarray read
// as the named dimensions x, y, time. 0 or -1.
static int
s_attach (hid_t set, const hid_t *scales, int rank)
{
    for (int i = 0; i < rank; i++)
        if (H5DSattach_scale (set, scales[i], (unsigned)i) < 0)
            return -1;
    return 0;
}

// A dataset 'name' under loc, rank 1 (n = dims[0]) or 2 (dims ny, nx:
// one chunk, shuffle and deflate), written at once, with its units and
// long_name and the dimension scales 'scales' attached (NULL: none).
static int
s_write_array (hid_t loc, const char *name, int rank, const hsize_t *dims, hid_t file_type,
               hid_t mem_type, const void *values, const char *units, const char *long_name,
               const hid_t *scales)
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
                     || s_cf (set, units, long_name) < 0 || (scales && s_attach (set, scales, rank) < 0)
                 ? -1
                 : 0;
    if (set >= 0)
        H5Dclose (set);
    H5Pclose (plist);
    H5Sclose (space);
    return rc;
}

// The grid's coordinates x (nx) and y (ny) under loc, converted by c, made
// the dimension scales "x" and "y": their ids in scales[0] (y) and
// scales[1] (x), for the caller to attach and close. 0 or -1.
static int
s_write_grid (hid_t loc, const piv_calib_t *c, int nx, int ny, const float *xs, const float *ys,
              hid_t scales[2])
{
    scales[0] = scales[1] = -1;
    double *x = malloc ((size_t)(nx > ny ? nx : ny) * sizeof *x);
    if (!x)
        return -1;
    const char *units = piv_calib_unit (c, PIV_UNIT_LENGTH);
    double ignored;
    for (int i = 0; i < nx; i++)
        piv_calib_position (c, xs[i], ys[0], &x[i], &ignored);
    hsize_t n = (hsize_t)nx;
    int rc = s_write_array (loc, "x", 1, &n, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, x, units,
                            c->set ? "x from the calibration origin" : "image column", NULL);
    for (int j = 0; j < ny; j++)
        piv_calib_position (c, xs[0], ys[(size_t)j * nx], &ignored, &x[j]);
    n = (hsize_t)ny;
    rc |= s_write_array (loc, "y", 1, &n, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, x, units,
                         !c->set ? "image row (down)"
                         : c->y_up ? "y from the calibration origin (up)"
                                   : "y from the calibration origin (down)",
                         NULL);
    free (x);
    for (int i = 0; rc == 0 && i < 2; i++) {
        const char *name = i ? "x" : "y";
        scales[i] = H5Dopen2 (loc, name, H5P_DEFAULT);
        rc = scales[i] < 0 || H5DSset_scale (scales[i], name) < 0
                     || s_attr_string (scales[i], "axis", i ? "X" : "Y") < 0
                 ? -1
                 : 0;
    }
    return rc;
}

// An empty extendible dataset: rank 3 (time, y, x) compressed, one field a
// chunk, or rank 1 (time). 'fill' (NULL: HDF5's default) is what a float
// dataset reads where no field was written.
static hid_t
s_series (ctl_h5_t *self, const char *name, hid_t type, int rank, const float *fill)
{
    hsize_t dims[3] = {0, (hsize_t)self->ny, (hsize_t)self->nx};
    hsize_t max[3] = {H5S_UNLIMITED, dims[1], dims[2]};
    hsize_t chunk[3] = {rank == 3 ? 1 : SERIES_CHUNK, dims[1], dims[2]};
    hid_t space = H5Screate_simple (rank, dims, max);
    hid_t plist = H5Pcreate (H5P_DATASET_CREATE);
    H5Pset_chunk (plist, rank, chunk);
    if (fill)
        H5Pset_fill_value (plist, H5T_NATIVE_FLOAT, fill);
    if (rank == 3) {
        H5Pset_shuffle (plist);
        H5Pset_deflate (plist, DEFLATE_LEVEL);
    }
    hid_t set = H5Dcreate2 (self->file, name, type, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    H5Pclose (plist);
    H5Sclose (space);
    return set;
}

// The rank of field dataset d: the series time and pair are rank 1.
static int
s_rank (int d)
{
    return d == D_TIME || d == D_PAIR ? 1 : 3;
}

// The units of field dataset d (NULL: none, the stems).
static const char *
s_units (const ctl_h5_t *self, int d)
{
    if (d >= D_DERIVED && d < D_FLAGS)
        return piv_calib_unit (&self->c, piv_quantities[d - D_DERIVED].unit);
    if (d == D_SIGMA_VORTICITY)
        return piv_calib_unit (&self->c, PIV_UNIT_RATE);
    return d == D_U || d == D_V || d == D_W || d == D_SIGMA_U || d == D_SIGMA_V
               ? piv_calib_unit (&self->c, PIV_UNIT_VELOCITY)
           : d == D_TIME                    ? "s"
           : d == D_PAIR                    ? NULL
           : d == D_RESIDUAL                ? "px"
                                            : "1";
}

int
ctl_h5_fields_begin (ctl_h5_t *self, const piv_field_t *first, char *err, size_t errlen)
{
    self->nx = first->nx;
    self->ny = first->ny;
    self->three = first->w && first->residual;
    self->buf = malloc ((size_t)first->nx * first->ny * sizeof (float));
    errno = 0;
    if (!self->buf)
        return s_fail (self, err, errlen, "no memory for a field");
    if (s_write_grid (self->file, &self->c, first->nx, first->ny, first->x, first->y,
                      self->grid)
        != 0)
        return s_fail (self, err, errlen, "the grid x, y");
    hid_t text = H5Tcopy (H5T_C_S1);
    H5Tset_size (text, H5T_VARIABLE);
    H5Tset_cset (text, H5T_CSET_UTF8);
    // time first: the scale every other dataset's first dimension is.
    static const int order[D_SIGMA_U] = {D_TIME, D_U, D_V, D_DERIVED, D_DERIVED + 1, D_DERIVED + 2,
                                       D_FLAGS, D_PEAK, D_PAIR, D_W, D_RESIDUAL};
    _Static_assert (D_COUNT == 14 && PIV_DERIVED_COUNT == 3, "list every dataset in 'order'");
    for (int i = 0; i < D_SIGMA_U; i++) { // the uncertainties: s_sigma_begin
        int d = order[i];
        if ((d == D_W || d == D_RESIDUAL) && !self->three)
            continue; // a planar export's file is as before stereo
        const char *name, *long_name;
        s_dataset (d, &name, &long_name);
        hid_t type = d == D_FLAGS ? H5T_STD_U8LE
                     : d == D_TIME ? H5T_IEEE_F64LE
                     : d == D_PAIR ? text
                                   : H5T_IEEE_F32LE;
        self->sets[d] = s_series (self, name, type, s_rank (d), NULL);
        hid_t scales[3] = {self->sets[D_TIME], self->grid[0], self->grid[1]};
        int bad = self->sets[d] < 0 || s_cf (self->sets[d], s_units (self, d), long_name) != 0;
        if (!bad && d == D_TIME)
            bad = H5DSset_scale (self->sets[d], "time") < 0;
        else if (!bad)
            bad = s_attach (self->sets[d], scales, s_rank (d)) != 0;
        if (bad) {
            H5Tclose (text);
            char what[64];
            snprintf (what, sizeof what, "cannot create the dataset '%s'", name);
            return s_fail (self, err, errlen, what);
        }
    }
    H5Tclose (text);
    uint8_t flag_values[] = {PIV_FLAG_VALID, PIV_FLAG_REPLACED, PIV_FLAG_INVALID};
    hsize_t three = 3;
    hid_t space = H5Screate_simple (1, &three, NULL);
    hid_t attr = H5Acreate2 (self->sets[D_FLAGS], "flag_values", H5T_STD_U8LE, space, H5P_DEFAULT,
                             H5P_DEFAULT);
    int rc = attr < 0 || H5Awrite (attr, H5T_NATIVE_UINT8, flag_values) < 0 ? -1 : 0;
    if (attr >= 0)
        H5Aclose (attr);
    H5Sclose (space);
    if (rc != 0
        || s_attr_string (self->sets[D_FLAGS], "flag_meanings", "valid replaced invalid_or_masked")
               != 0
        || s_attr_string (self->sets[D_FLAGS], "meaning", "0 valid, 1 replaced, 2 invalid or masked")
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
    int rank = s_rank (d);
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

// The datasets sigma_u, sigma_v, sigma_vorticity, made at the first field
// with them (a field without: none, the file as before uncertainty). NaN
// is their fill: the fields before it read NaN, as do later ones without
// (written so).
static int
s_sigma_begin (ctl_h5_t *self)
{
    static const float nan_fill = NAN;
    hid_t scales[3] = {self->sets[D_TIME], self->grid[0], self->grid[1]};
    for (int d = D_SIGMA_U; d <= D_SIGMA_VORTICITY; d++) {
        const char *name, *long_name;
        s_dataset (d, &name, &long_name);
        self->sets[d] = s_series (self, name, H5T_IEEE_F32LE, 3, &nan_fill);
        if (self->sets[d] < 0 || s_cf (self->sets[d], s_units (self, d), long_name) != 0
            || s_attach (self->sets[d], scales, 3) != 0)
            return -1;
    }
    return 0;
}

int
ctl_h5_field_add (ctl_h5_t *self, const piv_field_t *field, const float *derived,
                  double time_s, const char *stem, char *err, size_t errlen)
{
    errno = 0;
    if (field->nx != self->nx || field->ny != self->ny) {
        snprintf (err, errlen, "cannot write pair '%s' into '%s': its grid %dx%d is not %dx%d",
                  stem, self->path, field->nx, field->ny, self->nx, self->ny);
        return -1;
    }
    if (!(field->w && field->residual) != !self->three) {
        snprintf (err, errlen, "cannot write pair '%s' into '%s': its field is %s, the file's %s",
                  stem, self->path, self->three ? "planar" : "stereo (w)",
                  self->three ? "stereo (w)" : "planar");
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
    for (int q = 0; q < PIV_DERIVED_COUNT && rc == 0; q++) {
        for (size_t k = 0; k < n; k++)
            self->buf[k] =
                derived ? (float)piv_quantities[q].convert (c, derived[q * n + k]) : NAN;
        rc = s_append (self, D_DERIVED + q, H5T_NATIVE_FLOAT, self->buf);
    }
    const char *name = stem;
    if (rc == 0)
        rc = s_append (self, D_FLAGS, H5T_NATIVE_UINT8, field->flags);
    if (rc == 0)
        rc = s_append (self, D_PEAK, H5T_NATIVE_FLOAT, field->peak_ratio);
    if (rc == 0 && self->three) {
        // w along +Z scales as u, whatever y_up does to v.
        for (size_t k = 0; k < n; k++)
            self->buf[k] = (float)piv_calib_speed (c, field->w[k]);
        rc = s_append (self, D_W, H5T_NATIVE_FLOAT, self->buf);
        if (rc == 0)
            rc = s_append (self, D_RESIDUAL, H5T_NATIVE_FLOAT, field->residual);
    }
    int sigma = field->sigma_u && field->sigma_v;
    if (rc == 0 && sigma && self->sets[D_SIGMA_U] <= 0)
        rc = s_sigma_begin (self);
    for (int d = D_SIGMA_U; d <= D_SIGMA_VORTICITY && rc == 0 && self->sets[D_SIGMA_U] > 0; d++) {
        // Spreads: scaled as a speed or a rate, never turned by y_up.
        if (sigma && d == D_SIGMA_VORTICITY) {
            piv_field_derive_sigma_vorticity (field, PIV_STENCIL_DEFAULT, self->buf);
            for (size_t k = 0; k < n; k++)
                self->buf[k] = (float)piv_calib_divergence (c, self->buf[k]);
        }
        else {
            const float *values = d == D_SIGMA_U ? field->sigma_u : field->sigma_v;
            for (size_t k = 0; k < n; k++)
                self->buf[k] = sigma ? (float)piv_calib_speed (c, values[k]) : NAN;
        }
        rc = s_append (self, d, H5T_NATIVE_FLOAT, self->buf);
    }
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

// The statistics' figures (piv_stat_figures), converted by c, into the
// group over its own scales y, x.
static int
s_write_stats (hid_t group, const piv_stats_t *stats, const piv_calib_t *c, int nx, int ny)
{
    size_t n = (size_t)nx * ny;
    hsize_t dims[2] = {(hsize_t)ny, (hsize_t)nx};
    double *col = malloc (n * PIV_STAT_FIGURES * sizeof *col);
    int64_t *count = malloc (n * sizeof *count);
    float *xs = malloc (2 * n * sizeof *xs);
    int rc = col && count && xs ? 0 : -1;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        piv_stats_point_t p, in;
        piv_stats_point (stats, (long)k, &p); // positions in px: s_write_grid converts them
        piv_stats_point_in (stats, (long)k, c, &in);
        for (int f = 0; f < PIV_STAT_FIGURES; f++)
            col[f * n + k] = piv_stat_value (&in, (piv_stat_t)f); // figure f at col + f * n
        xs[k] = (float)p.x;
        xs[n + k] = (float)p.y;
    }
    hid_t scales[2] = {-1, -1};
    if (rc == 0)
        rc = s_write_grid (group, c, nx, ny, xs, xs + n, scales);
    for (int f = 0; rc == 0 && f < PIV_STAT_FIGURES; f++) {
        if (piv_stat_figures[f].stereo && !piv_stats_has_w (stats))
            continue;
        const char *name = piv_stat_figures[f].name, *long_name = piv_stat_figures[f].long_name;
        const char *units = piv_stat_unit (c, (piv_stat_t)f);
        if (f < PIV_STAT_COUNT)
            rc = s_write_array (group, name, 2, dims, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                                col + f * n, units, long_name, scales);
        else {
            for (size_t k = 0; k < n; k++)
                count[k] = (int64_t)col[f * n + k];
            rc = s_write_array (group, name, 2, dims, H5T_STD_I64LE, H5T_NATIVE_INT64, count,
                                units, long_name, scales);
        }
    }
    for (int i = 0; i < 2; i++)
        if (scales[i] >= 0)
            H5Dclose (scales[i]);
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
             | s_attr_double (group, "mean_uncertainty",
                              piv_calib_speed (c, piv_stats_mean_uncertainty (stats)))
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
ctl_h5_stresses (ctl_h5_t *self, const float *stress, int nx, int ny, char *err, size_t errlen)
{
    static const char *names[3] = {"uu", "vv", "uv"};
    static const char *long_names[3] = {
        "Reynolds stress u'u' (ensemble correlation peak width)",
        "Reynolds stress v'v' (ensemble correlation peak width)",
        "Reynolds stress u'v' (ensemble correlation peak width)"};
    if (nx != self->nx || ny != self->ny || !self->buf) {
        errno = 0;
        return s_fail (self, err, errlen, "the stresses: not on the fields' grid");
    }
    // px^2/frame^2 to the fields' units squared (v's sign follows the y
    // axis, and so does u'v').
    double k[3];
    piv_ensemble_stress_factors (&self->c, k);
    const char *unit = piv_ensemble_stress_unit (&self->c);
    size_t n = (size_t) nx * (size_t) ny;
    hsize_t dims[2] = {(hsize_t) ny, (hsize_t) nx};
    for (int q = 0; q < 3; q++) {
        for (size_t i = 0; i < n; i++)
            self->buf[i] = (float) (stress[q * n + i] * k[q]);
        errno = 0;
        if (s_write_array (self->file, names[q], 2, dims, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                           self->buf, unit, long_names[q], self->grid)
            != 0)
            return s_fail (self, err, errlen, names[q]);
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
    for (int i = 0; i < 2; i++)
        if (self->grid[i] > 0)
            H5Dclose (self->grid[i]);
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
