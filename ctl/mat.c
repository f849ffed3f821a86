// mat.c — pivctl's MATLAB writer (mat.h): the one file that includes
// matio.h, built against libmatio alone (ctl/module.mk). A version-5
// MAT-file, since scipy.io.loadmat reads no version 7.3 (HDF5) file; its
// arrays are written whole, so the fields wait in memory, in MATLAB's
// column-major order, until the end.

#include "ctl/mat.h"

#include "common/version.h"
#include "piv/derived.h"

#include <matio.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The 3-D arrays: u, v, the derived quantities (piv_quantities' order),
// peak_ratio, then a stereo export's w and residual; flags apart (uint8).
enum { A_U, A_V, A_DERIVED, A_PEAK = A_DERIVED + PIV_DERIVED_COUNT, A_W, A_RESIDUAL, A_COUNT };

// The uncertainties: sigma_u, sigma_v (u's unit) and sigma_vorticity (the
// vorticity's, piv_field_derive_sigma_vorticity), made together.
enum { S_SIGMA_U, S_SIGMA_V, S_SIGMA_VORTICITY, S_SIGMAS };
static const char *const s_sigma_names[S_SIGMAS] = {"sigma_u", "sigma_v", "sigma_vorticity"};

// The arrays an export holds: a planar one stops before A_W.
#define S_ARRAYS(self) ((self)->three ? A_COUNT : A_W)

struct _ctl_mat_t {
    piv_calib_t c;         // how fields are converted
    char *title;           // the experiment
    char *settings;        // the PIV settings text ("" when none)
    int nx, ny;            // the grid, from the first field
    int three;             // the first field had w (stereo): so must the others
    double *x, *y;         // its coordinates, converted
    size_t fields, size;   // fields held, room for
    float *arrays[A_COUNT]; // [ny nx nt] each, column-major
    float *sigma[S_SIGMAS]; // S_SIGMA_* [ny nx nt], from the first field with them
    float *one;            // a field's sigma_vorticity [nx * ny], image units
    uint8_t *flags;        // [ny nx nt]
    double *time;          // [nt]
    char **pairs;          // [nt] stems
    int nmore;             // ctl_mat_more_add's arrays
    float *more[PIV_MORE_MAX]; // [ny nx] each, column-major
    char *more_name[PIV_MORE_MAX], *more_unit[PIV_MORE_MAX]; // their names and units
};

ctl_mat_t *
ctl_mat_new (const piv_calib_t *c, const char *title, const char *settings)
{
    ctl_mat_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->c = *c;
    self->title = strdup (title ? title : "");
    self->settings = strdup (settings ? settings : "");
    if (!self->title || !self->settings)
        ctl_mat_destroy (&self);
    return self;
}

void
ctl_mat_destroy (ctl_mat_t **self_p)
{
    ctl_mat_t *self = *self_p;
    if (!self)
        return;
    for (int a = 0; a < A_COUNT; a++)
        free (self->arrays[a]);
    for (int a = 0; a < S_SIGMAS; a++)
        free (self->sigma[a]);
    free (self->one);
    for (size_t t = 0; t < self->fields; t++)
        free (self->pairs[t]);
    free (self->pairs);
    for (int m = 0; m < self->nmore; m++) {
        free (self->more[m]);
        free (self->more_name[m]);
        free (self->more_unit[m]);
    }
    free (self->flags);
    free (self->time);
    free (self->x);
    free (self->y);
    free (self->title);
    free (self->settings);
    free (self);
    *self_p = NULL;
}

// Room for one more field (doubling). 0 or -1.
static int
s_grow (ctl_mat_t *self)
{
    if (self->fields < self->size)
        return 0;
    size_t size = self->size ? 2 * self->size : 16, n = (size_t)self->nx * self->ny;
    for (int a = 0; a < S_ARRAYS (self); a++) {
        float *more = realloc (self->arrays[a], size * n * sizeof *more);
        if (!more)
            return -1;
        self->arrays[a] = more;
    }
    for (int a = 0; a < S_SIGMAS && self->sigma[0]; a++) {
        float *more = realloc (self->sigma[a], size * n * sizeof *more);
        if (!more)
            return -1;
        self->sigma[a] = more;
    }
    uint8_t *flags = realloc (self->flags, size * n);
    if (flags)
        self->flags = flags;
    double *time = realloc (self->time, size * sizeof *time);
    if (time)
        self->time = time;
    char **pairs = realloc (self->pairs, size * sizeof *pairs);
    if (pairs)
        self->pairs = pairs;
    if (!flags || !time || !pairs)
        return -1;
    self->size = size;
    return 0;
}

// The grid's coordinates of the first field, converted.
static int
s_grid (ctl_mat_t *self, const piv_field_t *f)
{
    self->nx = f->nx;
    self->ny = f->ny;
    self->three = f->w && f->residual;
    self->x = malloc ((size_t)f->nx * sizeof *self->x);
    self->y = malloc ((size_t)f->ny * sizeof *self->y);
    if (!self->x || !self->y)
        return -1;
    double ignored;
    for (int i = 0; i < f->nx; i++)
        piv_calib_position (&self->c, f->x[i], f->y[0], &self->x[i], &ignored);
    for (int j = 0; j < f->ny; j++)
        piv_calib_position (&self->c, f->x[0], f->y[(size_t)j * f->nx], &ignored, &self->y[j]);
    return 0;
}

// sigma_u, sigma_v, sigma_vorticity at the first field that has them: NaN
// for the fields before it (a file of fields without has none). 0 or -1.
static int
s_sigma_begin (ctl_mat_t *self)
{
    size_t n = (size_t)self->nx * self->ny;
    if (!(self->one = malloc (n * sizeof (float))))
        return -1;
    for (int a = 0; a < S_SIGMAS; a++) {
        self->sigma[a] = malloc (self->size * n * sizeof (float));
        if (!self->sigma[a])
            return -1;
        for (size_t m = 0; m < self->fields * n; m++)
            self->sigma[a][m] = NAN;
    }
    return 0;
}

int
ctl_mat_field_add (ctl_mat_t *self, const piv_field_t *field, const float *derived,
                   double time_s, const char *stem, char *err, size_t errlen)
{
    if (!self->x && s_grid (self, field) != 0) {
        snprintf (err, errlen, "no memory for the grid of pair '%s'", stem);
        return -1;
    }
    if (field->nx != self->nx || field->ny != self->ny) {
        snprintf (err, errlen, "cannot add pair '%s': its grid %dx%d is not %dx%d", stem,
                  field->nx, field->ny, self->nx, self->ny);
        return -1;
    }
    if (!(field->w && field->residual) != !self->three) {
        snprintf (err, errlen, "cannot add pair '%s': its field is %s, the others %s", stem,
                  self->three ? "planar" : "stereo (w)", self->three ? "stereo (w)" : "planar");
        return -1;
    }
    char *name = strdup (stem);
    int sigma = field->sigma_u && field->sigma_v;
    if (!name || s_grow (self) != 0 || (sigma && !self->sigma[0] && s_sigma_begin (self) != 0)) {
        free (name);
        snprintf (err, errlen, "no memory for the field of pair '%s' (field %zu)", stem,
                  self->fields + 1);
        return -1;
    }
    size_t n = (size_t)self->nx * self->ny, t = self->fields;
    if (sigma)
        piv_field_derive_sigma_vorticity (field, PIV_STENCIL_DEFAULT, self->one);
    for (int j = 0; j < self->ny; j++)
        for (int i = 0; i < self->nx; i++) {
            size_t k = (size_t)j * self->nx + i;              // ours: rows of x
            size_t m = (size_t)j + (size_t)self->ny * i + n * t; // MATLAB's: columns first
            double u, v;
            piv_calib_velocity (&self->c, field->u[k], field->v[k], &u, &v);
            self->arrays[A_U][m] = (float)u;
            self->arrays[A_V][m] = (float)v;
            for (int q = 0; q < PIV_DERIVED_COUNT; q++)
                self->arrays[A_DERIVED + q][m] =
                    derived ? (float)piv_quantities[q].convert (&self->c, derived[q * n + k])
                            : NAN;
            self->arrays[A_PEAK][m] = field->peak_ratio[k];
            if (self->three) { // w along +Z scales as u, whatever y_up does to v
                self->arrays[A_W][m] = (float)piv_calib_speed (&self->c, field->w[k]);
                self->arrays[A_RESIDUAL][m] = field->residual[k];
            }
            self->flags[m] = field->flags[k];
            if (self->sigma[0]) { // spreads: never turned by y_up
                self->sigma[S_SIGMA_U][m] =
                    sigma ? (float)piv_calib_speed (&self->c, field->sigma_u[k]) : NAN;
                self->sigma[S_SIGMA_V][m] =
                    sigma ? (float)piv_calib_speed (&self->c, field->sigma_v[k]) : NAN;
                self->sigma[S_SIGMA_VORTICITY][m] =
                    sigma ? (float)piv_calib_divergence (&self->c, self->one[k]) : NAN;
            }
        }
    self->time[t] = time_s;
    self->pairs[t] = name;
    self->fields++;
    return 0;
}

int
ctl_mat_more_add (ctl_mat_t *self, const piv_column_t *more, int nmore, char *err,
                  size_t errlen)
{
    if (!self->x || nmore < 0 || self->nmore + nmore > PIV_MORE_MAX) {
        snprintf (err, errlen, "cannot add %d array(s) to the MAT-file: %s", nmore,
                  self->x ? "too many" : "no field yet");
        return -1;
    }
    size_t n = (size_t)self->nx * self->ny;
    for (int a = 0; a < nmore; a++) {
        int m = self->nmore;
        self->more[m] = malloc (n * sizeof (float));
        self->more_name[m] = strdup (more[a].name);
        self->more_unit[m] = strdup (more[a].unit ? more[a].unit : "1");
        self->nmore++; // freed by ctl_mat_destroy, made or not
        if (!self->more[m] || !self->more_name[m] || !self->more_unit[m]) {
            snprintf (err, errlen, "no memory for the array '%s'", more[a].name);
            return -1;
        }
        for (size_t k = 0; k < n; k++) // MATLAB's order: columns first
            self->more[m][k / (size_t)self->nx + (size_t)self->ny * (k % (size_t)self->nx)] =
                more[a].values[k];
    }
    return 0;
}

// A 1 x len char array of 'text' (UTF-8).
static matvar_t *
s_text (const char *name, const char *text)
{
    size_t dims[2] = {1, strlen (text)};
    return Mat_VarCreate (name, MAT_C_CHAR, MAT_T_UTF8, 2, dims, (void *)text, 0);
}

// Writes 'var' (NULL: it could not be made) and frees it. 0 or -1.
static int
s_put (mat_t *mat, matvar_t *var)
{
    int rc = var && Mat_VarWrite (mat, var, MAT_COMPRESSION_ZLIB) == 0 ? 0 : -1;
    Mat_VarFree (var);
    return rc;
}

// The name of 3-D array a.
static const char *
s_array_name (int a)
{
    return a == A_U          ? "u"
           : a == A_V        ? "v"
           : a == A_W        ? "w"
           : a == A_PEAK     ? "peak_ratio"
           : a == A_RESIDUAL ? "residual"
                             : piv_quantities[a - A_DERIVED].name;
}

// A 1 x 1 struct 'name' of the fields names[0 .. count - 1], each taking
// the variable vars[i] (freed here if the struct cannot be made).
static matvar_t *
s_struct (const char *name, const char **names, matvar_t **vars, int count)
{
    const char *list[64];
    size_t dims[2] = {1, 1};
    int ok = count < 64;
    for (int i = 0; ok && i < count; i++) {
        list[i] = names[i];
        ok = vars[i] != NULL;
    }
    list[ok ? count : 0] = NULL;
    matvar_t *var = ok ? Mat_VarCreateStruct2 (name, 2, dims, list) : NULL;
    for (int i = 0; i < count; i++) {
        if (var) // takes the field; gives back the one it held (none)
            Mat_VarFree (Mat_VarSetStructFieldByName (var, names[i], 0, vars[i]));
        else
            Mat_VarFree (vars[i]);
    }
    return var;
}

// The struct 'units': one char field per variable that has a unit.
static matvar_t *
s_units (const ctl_mat_t *self)
{
    const char *names[A_COUNT + S_SIGMAS + PIV_MORE_MAX + 3];
    const char *values[A_COUNT + S_SIGMAS + PIV_MORE_MAX + 3];
    int count = 0;
    names[count] = "x";
    values[count++] = piv_calib_unit (&self->c, PIV_UNIT_LENGTH);
    names[count] = "y";
    values[count++] = piv_calib_unit (&self->c, PIV_UNIT_LENGTH);
    for (int a = 0; a < S_ARRAYS (self); a++) {
        names[count] = s_array_name (a);
        values[count++] = a == A_PEAK       ? "1"
                          : a == A_RESIDUAL ? "px"
                          : a == A_U || a == A_V || a == A_W
                              ? piv_calib_unit (&self->c, PIV_UNIT_VELOCITY)
                              : piv_calib_unit (&self->c, piv_quantities[a - A_DERIVED].unit);
    }
    for (int a = 0; a < S_SIGMAS && self->sigma[0]; a++) {
        names[count] = s_sigma_names[a];
        values[count++] = piv_calib_unit (&self->c, a == S_SIGMA_VORTICITY ? PIV_UNIT_RATE
                                                                           : PIV_UNIT_VELOCITY);
    }
    for (int m = 0; m < self->nmore; m++) {
        names[count] = self->more_name[m];
        values[count++] = self->more_unit[m];
    }
    names[count] = "time";
    values[count++] = "s";
    matvar_t *vars[A_COUNT + S_SIGMAS + PIV_MORE_MAX + 3];
    for (int i = 0; i < count; i++)
        vars[i] = s_text (names[i], values[i]);
    return s_struct ("units", names, vars, count);
}

// A 1 x 1 double.
static matvar_t *
s_scalar (const char *name, double value)
{
    size_t dims[2] = {1, 1};
    return Mat_VarCreate (name, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, dims, &value, 0);
}

// The struct 'stats': the grid, every figure of piv_stat_figures as ny x nx
// (converted by c), the summary and the units.
static matvar_t *
s_stats (const piv_stats_t *stats, const piv_calib_t *c)
{
    int nx, ny, step, window;
    piv_stats_grid (stats, &nx, &ny, &step, &window);
    size_t n = (size_t)nx * ny, dims[2] = {(size_t)ny, (size_t)nx};
    size_t xd[2] = {1, (size_t)nx}, yd[2] = {(size_t)ny, 1};
    double *values = malloc (n * PIV_STAT_FIGURES * sizeof *values);
    double *x = malloc ((size_t)nx * sizeof *x), *y = malloc ((size_t)ny * sizeof *y);
    enum { EXTRA = 6, FIELDS = PIV_STAT_FIGURES + EXTRA };
    const char *names[FIELDS];
    matvar_t *vars[FIELDS] = {0};
    // The figures written: a planar series' leave out the stereo ones.
    int figure[PIV_STAT_FIGURES], figures = 0;
    for (int f = 0; f < PIV_STAT_FIGURES; f++)
        if (!piv_stat_figures[f].stereo || piv_stats_has_w (stats))
            figure[figures++] = f;
    for (int i = 0; i < figures; i++)
        names[i] = piv_stat_figures[figure[i]].name;
    if (values && x && y) {
        for (size_t k = 0; k < n; k++) {
            piv_stats_point_t p;
            piv_stats_point_in (stats, (long)k, c, &p);
            size_t m = k / (size_t)nx + (size_t)ny * (k % (size_t)nx); // MATLAB's order
            for (int f = 0; f < PIV_STAT_FIGURES; f++)
                values[f * n + m] = piv_stat_value (&p, (piv_stat_t)f);
            if (k < (size_t)nx)
                x[k] = p.x;
            if (k % (size_t)nx == 0)
                y[k / (size_t)nx] = p.y;
        }
        for (int i = 0; i < figures; i++)
            vars[i] = Mat_VarCreate (names[i], MAT_C_DOUBLE, MAT_T_DOUBLE, 2, dims,
                                     values + figure[i] * n, 0);
    }
    piv_stats_summary_t sum;
    piv_stats_summary (stats, &sum);
    const char *unit_names[PIV_STAT_FIGURES + 2] = {"x", "y"};
    matvar_t *unit_vars[PIV_STAT_FIGURES + 2];
    unit_vars[0] = s_text ("x", piv_calib_unit (c, PIV_UNIT_LENGTH));
    unit_vars[1] = s_text ("y", piv_calib_unit (c, PIV_UNIT_LENGTH));
    for (int i = 0; i < figures; i++) {
        unit_names[i + 2] = piv_stat_figures[figure[i]].name;
        unit_vars[i + 2] = s_text (unit_names[i + 2], piv_stat_unit (c, (piv_stat_t)figure[i]));
    }
    const char *extra[EXTRA] = {"x", "y", "fields", "valid_fraction", "convergence", "units"};
    matvar_t *extra_vars[EXTRA] = {
        x ? Mat_VarCreate ("x", MAT_C_DOUBLE, MAT_T_DOUBLE, 2, xd, x, 0) : NULL,
        y ? Mat_VarCreate ("y", MAT_C_DOUBLE, MAT_T_DOUBLE, 2, yd, y, 0) : NULL,
        s_scalar ("fields", (double)sum.fields),
        s_scalar ("valid_fraction", sum.valid_fraction),
        s_scalar ("convergence", sum.convergence),
        s_struct ("units", unit_names, unit_vars, figures + 2),
    };
    for (int i = 0; i < EXTRA; i++) {
        names[figures + i] = extra[i];
        vars[figures + i] = extra_vars[i];
    }
    free (values);
    free (x);
    free (y);
    return s_struct ("stats", names, vars, figures + EXTRA);
}

// The stems as an nt x 1 cell of char.
static matvar_t *
s_pairs (const ctl_mat_t *self)
{
    size_t dims[2] = {self->fields, 1};
    matvar_t *cell = Mat_VarCreate ("pair", MAT_C_CELL, MAT_T_CELL, 2, dims, NULL, 0);
    for (size_t t = 0; cell && t < self->fields; t++) {
        matvar_t *text = s_text ("", self->pairs[t]);
        if (!text) {
            Mat_VarFree (cell);
            return NULL;
        }
        Mat_VarFree (Mat_VarSetCell (cell, (int)t, text)); // as the struct's fields
    }
    return cell;
}

int
ctl_mat_write (ctl_mat_t *self, const piv_stats_t *stats, const piv_calib_t *stats_c,
               const char *open_as, const char *path, char *err, size_t errlen)
{
    char header[116], calib[512], description[512];
    snprintf (header, sizeof header, "MATLAB 5.0 MAT-file, pivfarm %s export of '%s'",
              PIVFARM_VERSION, self->title);
    errno = 0;
    mat_t *mat = Mat_CreateVer (open_as, header, MAT_FT_MAT5);
    if (!mat) {
        snprintf (err, errlen, "cannot write '%s': cannot create the MAT-file%s%s", path,
                  errno ? ": " : "", errno ? strerror (errno) : "");
        return -1;
    }
    piv_calib_format (&self->c, calib, sizeof calib);
    piv_calib_describe (&self->c, description, sizeof description);
    size_t xd[2] = {1, (size_t)self->nx}, yd[2] = {(size_t)self->ny, 1};
    size_t fd[3] = {(size_t)self->ny, (size_t)self->nx, self->fields}, td[2] = {self->fields, 1};
    int rc = s_put (mat, Mat_VarCreate ("x", MAT_C_DOUBLE, MAT_T_DOUBLE, 2, xd, self->x, 0));
    rc |= s_put (mat, Mat_VarCreate ("y", MAT_C_DOUBLE, MAT_T_DOUBLE, 2, yd, self->y, 0));
    for (int a = 0; a < S_ARRAYS (self); a++)
        rc |= s_put (mat, Mat_VarCreate (s_array_name (a), MAT_C_SINGLE, MAT_T_SINGLE, 3, fd,
                                         self->arrays[a], MAT_F_DONT_COPY_DATA));
    for (int a = 0; a < S_SIGMAS && self->sigma[0]; a++)
        rc |= s_put (mat, Mat_VarCreate (s_sigma_names[a], MAT_C_SINGLE, MAT_T_SINGLE, 3,
                                         fd, self->sigma[a], MAT_F_DONT_COPY_DATA));
    size_t md[2] = {(size_t)self->ny, (size_t)self->nx};
    for (int m = 0; m < self->nmore; m++)
        rc |= s_put (mat, Mat_VarCreate (self->more_name[m], MAT_C_SINGLE, MAT_T_SINGLE, 2, md,
                                         self->more[m], MAT_F_DONT_COPY_DATA));
    rc |= s_put (mat, Mat_VarCreate ("flags", MAT_C_UINT8, MAT_T_UINT8, 3, fd, self->flags,
                                     MAT_F_DONT_COPY_DATA));
    rc |= s_put (mat, Mat_VarCreate ("time", MAT_C_DOUBLE, MAT_T_DOUBLE, 2, td, self->time,
                                     MAT_F_DONT_COPY_DATA));
    rc |= s_put (mat, s_pairs (self));
    rc |= s_put (mat, s_units (self));
    rc |= s_put (mat, s_text ("calibration", calib));
    rc |= s_put (mat, s_text ("calibration_description", description));
    rc |= s_put (mat, s_text ("piv_settings", self->settings));
    rc |= s_put (mat, s_text ("title", self->title));
    if (stats)
        rc |= s_put (mat, s_stats (stats, stats_c));
    errno = 0;
    if (Mat_Close (mat) != 0 || rc != 0) {
        snprintf (err, errlen, "cannot write '%s': %s", path,
                  errno ? strerror (errno) : "libmatio could not write a variable");
        return -1;
    }
    return 0;
}
