// export.c — pivctl export: the stored vector fields of an experiment as
// files, read from the store field by field: txt and Tecplot (one file a
// field), VTK (one a field plus the statistics), one HDF5 file (h5.c) or
// one MAT-file (mat.c), in pixels or, with the calibration in force for
// each result, in metres and seconds (doc/units.md, Files). Every format
// carries the derived quantities of piv/derived.h's table.

#include "ctl/ctl.h"

#include "common/path.h"
#include "common/util.h"
#include "ctl/h5.h"
#include "ctl/mat.h"
#include "piv/derived.h"
#include "piv/field.h"
#include "piv/stats.h"
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SEGMENTS_SHOWN 6 // ranges a refusal names

typedef enum { F_TXT, F_TECPLOT, F_VTK, F_HDF5, F_MAT, F_COUNT } s_format_t;
static const char *s_formats[F_COUNT] = {"txt", "tecplot", "vtk", "hdf5", "mat"};

// HDF5 and MAT: one file for the whole export (-o FILE), on one grid.
#define S_ONE_FILE(format) ((format) == F_HDF5 || (format) == F_MAT)

// A run of consecutive results on one grid (and, in si, one calibration).
typedef struct {
    int64_t first_pair, last_pair;
    char first_stem[128], last_stem[128];
    int nx, ny, step, window;
    float x0, y0;
    piv_calib_t c;
    int three; // stereo fields (w): one file holds one kind
} s_segment_t;

typedef struct {
    ctl_t *ctl;
    const char *name;      // the experiment
    const char *out;       // -o: the directory, or the HDF5 or MAT file
    int force;             // --force: replace files already there
    ctl_out_t one_file;    // HDF5, MAT: the file, a temporary until complete
    s_format_t format;
    int si;                // convert to metres and seconds
    const char *settings;  // the PIV settings text
    ctl_calibs_t *calibs;  // the calibration history
    long total, written, missing, errors;
    int tty;               // stderr is a terminal: draw a progress bar
    float *derived;        // one field's derived quantities (image units; piv_field_derive_all)
    float *converted;      // txt, Tecplot: the same converted as the file is
    size_t derived_size;   // floats each holds
    ctl_h5_t *h5;          // HDF5: the file
    ctl_mat_t *mat;        // MAT: the fields until the file is written
    int64_t t0_ns;         // HDF5, MAT: close time of the first exported pair (0: none known)
    piv_stats_t *stats;    // over the exported fields (VTK, HDF5, MAT)
    piv_calib_t stats_c;   // their calibration
    long stats_left_out;   // fields on another grid or calibration
    s_segment_t *segments; // the runs seen
    size_t nsegments, segments_size;
    int mixed;             // HDF5, MAT: runs on other grids or calibrations, not written
    int failed;            // a write failed: the rest would fail alike
    int interrupted;       // SIGINT or SIGTERM: stopped before the end
    long uncalibrated;     // si: results recorded without a calibration, not written
    char uncalibrated_stem[128]; // the first of them
} s_export_t;

// The PIV settings text of the experiment, or the configured ones: for the
// results recorded without their own (before issue 25).
static void
s_settings_text (const config_t *cfg, const char *own, char *buf, size_t size)
{
    if (own && *own)
        snprintf (buf, size, "%s", own);
    else
        snprintf (buf, size, "passes=%s overlap=%d iterations=%d deform=%s", cfg->piv.passes,
                  cfg->piv.overlap, cfg->piv.iterations, cfg->piv.deform);
}

// Notes field's grid and calibration: the same run as the last, or a new
// one. 1 if a new run began after another, 0 if not, -1 on no memory.
static int
s_note_segment (s_export_t *x, const store_result_info_t *r, const piv_field_t *f,
                const piv_calib_t *c)
{
    s_segment_t *last = x->nsegments ? &x->segments[x->nsegments - 1] : NULL;
    if (last && last->nx == f->nx && last->ny == f->ny && last->step == f->step
        && last->window == f->window && last->x0 == f->x[0] && last->y0 == f->y[0]
        && last->three == (f->w != NULL) && (!x->si || ctl_calib_same (&last->c, c))) {
        last->last_pair = r->pair;
        snprintf (last->last_stem, sizeof last->last_stem, "%s", r->stem);
        return 0;
    }
    if (ctl_grow (&x->segments, &x->segments_size, x->nsegments, sizeof *x->segments) != 0)
        return -1;
    s_segment_t *s = &x->segments[x->nsegments++];
    *s = (s_segment_t){r->pair, r->pair, "", "", f->nx, f->ny, f->step, f->window, f->x[0],
                       f->y[0], *c, f->w != NULL};
    snprintf (s->first_stem, sizeof s->first_stem, "%s", r->stem);
    snprintf (s->last_stem, sizeof s->last_stem, "%s", r->stem);
    return x->nsegments > 1;
}

// The runs as "pairs 'a'..'b' (what), ..." for a refusal: the grid or the
// calibration of each, as 'by_grid' says.
static void
s_segments_text (const s_export_t *x, int by_grid, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < x->nsegments && used < size; i++) {
        const s_segment_t *s = &x->segments[i];
        char what[256];
        if (i == MAX_SEGMENTS_SHOWN) {
            snprintf (buf + used, size - used, ", and %zu more", x->nsegments - i);
            break;
        }
        if (by_grid)
            snprintf (what, sizeof what, "%dx%d %svectors, step %d px, window %d px", s->nx,
                      s->ny, s->three ? "stereo " : "", s->step, s->window);
        else
            piv_calib_describe (&s->c, what, sizeof what);
        used += (size_t)snprintf (buf + used, size - used, "%spairs '%s'..'%s' (%s)",
                                  i ? ", " : "", s->first_stem, s->last_stem, what);
    }
}

// 1 if the runs differ by grid (not only by calibration).
static int
s_grids_differ (const s_export_t *x)
{
    for (size_t i = 1; i < x->nsegments; i++) {
        const s_segment_t *a = &x->segments[0], *b = &x->segments[i];
        if (a->nx != b->nx || a->ny != b->ny || a->step != b->step || a->window != b->window
            || a->x0 != b->x0 || a->y0 != b->y0 || a->three != b->three)
            return 1;
    }
    return 0;
}

// Header lines of a txt or Tecplot file: where the field comes from, its
// units and its calibration.
static void
s_header (const s_export_t *x, const store_result_info_t *r, const piv_calib_t *c, int three,
          int sigma, char *buf, size_t size)
{
    char calib[256], text[512];
    piv_calib_t px;
    piv_calib_init (&px);
    piv_calib_describe (c, calib, sizeof calib);
    piv_calib_format (c, text, sizeof text);
    const piv_calib_t *applied = x->si ? c : &px;
    snprintf (buf, size,
              "pivfarm export of experiment '%s', pair %" PRId64 " ('%s')\n"
              "computed by agent '%s', attempt %d, in %.1f ms; results file '%s'\n"
              "units: x, y in %s; u, v%s%s in %s%s%s (%swindow and step in px)\n"
              "calibration: %s%s (%s)\n"
              "piv settings: %s",
              x->name, r->pair, r->stem, r->agent ? r->agent : "", r->attempt,
              r->compute_ns / 1e6, r->path ? r->path : "",
              piv_calib_unit (applied, PIV_UNIT_LENGTH), three ? ", w" : "",
              sigma ? ", sigma_u, sigma_v" : "", piv_calib_unit (applied, PIV_UNIT_VELOCITY),
              sigma ? "; sigma_vorticity in " : "",
              sigma ? piv_calib_unit (applied, PIV_UNIT_RATE) : "",
              three ? "w along z, out of the light sheet; residual in image px; " : "", calib, x->si || !c->set ? "" : ", not applied (--units px)", text,
              r->settings && *r->settings ? r->settings : x->settings);
}

// The file of one field beneath DIR, <stem>.txt|.dat|.vtk, as
// ctl_stem_file names it (a stem ending in '/' by its pair). 0, or -1 with
// why when the stem makes no plain relative path.
static int
s_field_file (const s_export_t *x, const char *stem, int64_t pair, char *rel, size_t size,
              char *why, size_t whylen)
{
    static const char *ext[] = {"txt", "dat", "vtk"};
    return ctl_stem_file (stem, pair, ext[x->format], rel, size, why, whylen);
}

// Writes one field into its own file DIR/<rel> (s_field_file's; output.c:
// whole, never through a link). 0, or -1 with err naming the file.
static int
s_write_file (s_export_t *x, const store_result_info_t *r, const piv_field_t *field,
              const piv_calib_t *c, const char *rel, char *err, size_t errlen)
{
    ctl_out_t file;
    if (ctl_out_init (&file, x->out, rel, 0, x->force, err, errlen) != 0)
        return -1;
    FILE *out = file.file;
    char header[2048];
    s_header (x, r, c, field->w != NULL, field->sigma_u != NULL, header, sizeof header);
    errno = 0;
    int bad;
    if (x->format == F_VTK) {
        char title[256], calib[160]; // VTK's title: one line, at most 256 characters
        piv_calib_t px;
        piv_calib_init (&px);
        piv_calib_describe (x->si ? c : &px, calib, sizeof calib);
        snprintf (title, sizeof title, "pivfarm %s '%s': x, y %s; u, v%s%s %s; %s", x->name,
                  r->stem, piv_calib_unit (x->si ? c : &px, PIV_UNIT_LENGTH),
                  field->w ? ", w" : "", field->sigma_u ? ", sigma_u, sigma_v" : "",
                  piv_calib_unit (x->si ? c : &px, PIV_UNIT_VELOCITY), calib);
        bad = piv_field_write_vtk (field, out, x->si ? c : NULL, title) != 0;
    }
    else {
        size_t n = (size_t)field->nx * field->ny;
        piv_field_t *converted = x->si ? piv_calib_field (c, field) : NULL;
        piv_derived_convert (x->si ? c : NULL, n, x->derived, x->converted);
        // The vorticity's uncertainty, in the vorticity's unit (a rate:
        // never turned by y_up).
        float *sigma_w = field->sigma_u ? malloc (n * sizeof *sigma_w) : NULL;
        if (sigma_w) {
            piv_field_derive_sigma_vorticity (field, PIV_STENCIL_DEFAULT, sigma_w);
            for (size_t k = 0; k < n; k++)
                sigma_w[k] = (float)piv_calib_divergence (x->si ? c : NULL, sigma_w[k]);
        }
        bad = (x->si && !converted) || (field->sigma_u && !sigma_w)
              || piv_field_write_derived (converted ? converted : field, out,
                                          x->format == F_TXT ? PIV_FORMAT_TXT : PIV_FORMAT_TECPLOT,
                                          header, x->converted, sigma_w)
                     != 0;
        free (sigma_w);
        piv_field_destroy (&converted);
    }
    if (bad) {
        snprintf (err, errlen, "cannot write '%s': %s", file.path,
                  errno ? strerror (errno) : "write error");
        ctl_out_release (&file);
        return -1;
    }
    return ctl_out_commit (&file, err, errlen);
}

// Adds the field to the one file (HDF5, MAT), begun with the first field.
static int
s_write_one_file (s_export_t *x, const store_result_info_t *r, const piv_field_t *field,
                  const piv_calib_t *c, char *err, size_t errlen)
{
    if (!x->h5 && !x->mat) {
        const char *name = NULL;
        // The settings the first field was made with (recorded with it
        // since issue 25); fields on another grid are refused below.
        const char *settings = r->settings && *r->settings ? r->settings : x->settings;
        if (ctl_out_init (&x->one_file, NULL, x->out, 0, x->force, err, errlen) == 0)
            name = ctl_out_name (&x->one_file, err, errlen);
        if (name && x->format == F_MAT && !(x->mat = ctl_mat_new (c, x->name, settings)))
            snprintf (err, errlen, "no memory");
        if (name && x->format == F_HDF5
            && (x->h5 = ctl_h5_new (name, x->out, x->name, c, settings, err, errlen))
            && ctl_h5_fields_begin (x->h5, field, err, errlen) != 0)
            return -1;
        if (!x->h5 && !x->mat)
            return -1;
    }
    if (!x->t0_ns)
        x->t0_ns = r->closed_ns; // the first exported pair's with a known time
    double t = r->closed_ns && x->t0_ns ? (r->closed_ns - x->t0_ns) / 1e9 : NAN;
    if (x->mat)
        return ctl_mat_field_add (x->mat, field, x->derived, t, r->stem, err, errlen);
    return ctl_h5_field_add (x->h5, field, x->derived, t, r->stem, err, errlen);
}

// The field's derived quantities into x->derived (image units) and, VTK,
// HDF5 and MAT, its sample into the statistics (the first grid and
// calibration; others left out). 0, or -1 on no memory.
static int
s_derive_and_count (s_export_t *x, const piv_field_t *field, const piv_calib_t *c)
{
    size_t points = (size_t)field->nx * field->ny, n = points * PIV_DERIVED_COUNT;
    if (n > x->derived_size) {
        float *more = realloc (x->derived, n * sizeof *more);
        if (more)
            x->derived = more;
        more = more ? realloc (x->converted, n * sizeof *more) : NULL;
        if (!more)
            return -1;
        x->converted = more;
        x->derived_size = n;
    }
    piv_field_derive_all (field, NULL, x->derived);
    if (x->format != F_VTK && x->format != F_HDF5 && x->format != F_MAT)
        return 0;
    if (!x->stats) {
        x->stats = piv_stats_new (field);
        x->stats_c = *c;
    }
    if (!x->stats || !ctl_calib_same (&x->stats_c, c)
        || piv_stats_add (x->stats, field, x->derived + PIV_DERIVED_VORTICITY * points) != 0)
        x->stats_left_out++;
    return 0;
}

static void
s_progress (s_export_t *x)
{
    if (!x->tty)
        return;
    long done = x->written + x->missing + x->errors;
    long whole = x->total > done ? x->total : done;
    fprintf (stderr, "\rexporting %s %s %ld/%ld", x->name, ctl_bar ((double)done, (double)whole, 30),
             done, whole);
}

static int
s_export_one (void *arg, const store_result_info_t *r)
{
    s_export_t *x = arg;
    if (ctl_stop) { // SIGINT or SIGTERM: what is half written is removed
        x->interrupted = 1;
        return 1;
    }
    if (!r->field || !r->field_size) {
        x->missing++;
        return 0;
    }
    // One file a field: DIR/<stem>.txt|.dat|.vtk (s_field_file).
    char rel[PATH_MAX], why[PATH_WHY], shown[UTIL_SHOWN];
    if (!S_ONE_FILE (x->format)
        && s_field_file (x, r->stem, r->pair, rel, sizeof rel, why, sizeof why) != 0) {
        ctl_error ("refusing to export pair %" PRId64 " ('%s') into '%s': %s", r->pair,
                   util_shorten (r->stem, shown, sizeof shown), x->out, why);
        x->errors++;
        return 0;
    }
    char err[PATH_MAX + 512];
    piv_field_t *field = piv_field_decode (r->field, r->field_size, err, sizeof err);
    if (!field) {
        ctl_error ("the stored field of pair %" PRId64 " ('%s') is unreadable: %s", r->pair,
                   r->stem, err);
        x->errors++;
        return 0;
    }
    piv_calib_t in_force, applied;
    ctl_calib_at (x->calibs, r->recorded_ns, &in_force);
    piv_calib_init (&applied);
    if (x->si)
        applied = in_force;
    int rc = 0, ok = 0;
    int mixed = S_ONE_FILE (x->format) ? s_note_segment (x, r, field, &applied) : 0;
    if (mixed < 0) {
        ctl_error ("no memory");
        x->failed = 1;
    }
    else if (mixed > 0 && !x->mixed) {
        x->mixed = 1; // one file cannot hold them all: the rest is only looked at
        ctl_h5_close (&x->h5, NULL, 0);
        ctl_mat_destroy (&x->mat);
    }
    if (x->mixed || x->failed)
        ok = -1; // not written, not an error of its own
    else if (x->si && !in_force.set) {
        if (!x->uncalibrated++) // said once at the end
            snprintf (x->uncalibrated_stem, sizeof x->uncalibrated_stem, "%s", r->stem);
        ok = -1;
    }
    else {
        rc = s_derive_and_count (x, field, &applied);
        if (rc != 0)
            snprintf (err, sizeof err, "no memory for the field of pair '%s'", r->stem);
        else if (S_ONE_FILE (x->format))
            rc = s_write_one_file (x, r, field, &applied, err, sizeof err);
        else
            rc = s_write_file (x, r, field, &in_force, rel, err, sizeof err);
        if (rc != 0 && !S_ONE_FILE (x->format) && x->written)
            ctl_error ("%s; the %ld file(s) written before it are whole and stay", err,
                       x->written);
        else if (rc != 0)
            ctl_error ("%s", err);
        x->failed |= rc != 0;
        ok = rc == 0;
    }
    piv_field_destroy (&field);
    x->written += ok == 1;
    x->errors += ok == 0;
    s_progress (x);
    return x->failed; // runs that differ: go on listing them for the refusal
}

// Where the export goes: -o DIR made and writable (one file a field), or
// -o FILE (HDF5, MAT; a directory: DIR/EXP.h5 or .mat), its directory made.
static int
s_prepare_output (s_export_t *x, char *h5_path, size_t size)
{
    char err[PATH_MAX + 512];
    struct stat st;
    if (S_ONE_FILE (x->format)) {
        if (stat (x->out, &st) == 0 && S_ISDIR (st.st_mode))
            snprintf (h5_path, size, "%s/%s.%s", x->out, x->name, x->format == F_MAT ? "mat" : "h5");
        else
            snprintf (h5_path, size, "%s", x->out);
        x->out = h5_path;
        if (ctl_mkdirs_parent (h5_path, err, sizeof err) != 0) {
            ctl_error ("%s", err);
            return -1;
        }
        return 0;
    }
    if (ctl_mkdirs (x->out, err, sizeof err) != 0) {
        ctl_error ("%s", err);
        return -1;
    }
    if (access (x->out, W_OK | X_OK) != 0) {
        ctl_error ("cannot write into '%s': %s", x->out, strerror (errno));
        return -1;
    }
    return 0;
}

// The statistics of the exported fields: DIR/stats.vtk, or the HDF5
// file's group stats/ (MAT: the struct stats, written with the file). 0 or
// -1 (logged).
static int
s_write_stats (s_export_t *x)
{
    char err[PATH_MAX + 512], header[512], calib[256];
    if (!x->stats)
        return 0;
    if (x->stats_left_out)
        ctl_error ("the statistics of '%s' leave out %ld field(s) on another grid or "
                   "calibration than the first",
                   x->name, x->stats_left_out);
    if (x->format == F_MAT)
        return 0;
    if (x->format == F_HDF5)
        return ctl_h5_stats (x->h5, "stats", x->stats, &x->stats_c, x->settings, err, sizeof err)
                       == 0
                   ? 0
                   : (ctl_error ("%s", err), -1);
    ctl_out_t file;
    if (ctl_out_init (&file, x->out, "stats.vtk", 0, x->force, err, sizeof err) != 0) {
        ctl_error ("%s", err);
        return -1;
    }
    piv_calib_describe (&x->stats_c, calib, sizeof calib);
    snprintf (header, sizeof header, "pivfarm %s statistics: %s", x->name, calib);
    errno = 0;
    if (piv_stats_write (x->stats, file.file, PIV_FORMAT_VTK, &x->stats_c, header) != 0) {
        ctl_error ("cannot write '%s': %s", file.path, errno ? strerror (errno) : "write error");
        ctl_out_release (&file);
        return -1;
    }
    if (ctl_out_commit (&file, err, sizeof err) != 0) {
        ctl_error ("%s", err);
        return -1;
    }
    return 0;
}

// After the listing: the refusal of runs that one HDF5 file cannot hold,
// or the file and the statistics finished. 0, or -1 (logged).
static int
s_finish (s_export_t *x)
{
    char err[PATH_MAX + 512];
    if (x->uncalibrated)
        ctl_error ("%ld result(s) of '%s' were recorded without a calibration (the first: pair "
                   "'%s') and were not exported in si units: export them with --units px",
                   x->uncalibrated, x->name, x->uncalibrated_stem);
    if (x->mixed) {
        char ranges[2048];
        int by_grid = s_grids_differ (x);
        s_segments_text (x, by_grid, ranges, sizeof ranges);
        if (by_grid)
            ctl_error ("cannot export '%s' to one %s file: its results lie on different grids "
                       "(settings changed during the run): %s; export with --format vtk or txt "
                       "(one file a field)",
                       x->name, x->format == F_MAT ? "MAT" : "HDF5", ranges);
        else
            ctl_error ("cannot export '%s' to one %s file in si units: its results were "
                       "recorded under different calibrations: %s; export with --units px",
                       x->name, x->format == F_MAT ? "MAT" : "HDF5", ranges);
        x->written = 0;
    }
    if (x->interrupted && S_ONE_FILE (x->format))
        ctl_error ("interrupted: nothing written to '%s'", x->out);
    else if (x->interrupted)
        ctl_error ("interrupted: %ld field(s) of '%s' written to '%s' (each file whole), the "
                   "rest not",
                   x->written, x->name, x->out);
    int rc = x->failed || x->mixed || x->interrupted ? -1 : 0;
    if (rc == 0 && (x->format == F_VTK || x->h5 || x->mat))
        rc = s_write_stats (x);
    if (x->h5 && ctl_h5_close (&x->h5, err, sizeof err) != 0) {
        ctl_error ("%s", err);
        rc = -1;
    }
    const char *name = x->mat && rc == 0 ? ctl_out_name (&x->one_file, err, sizeof err) : NULL;
    if (x->mat && rc == 0
        && (!name
            || ctl_mat_write (x->mat, x->stats, &x->stats_c, name, x->out, err, sizeof err) != 0)) {
        ctl_error ("%s", err);
        rc = -1;
    }
    ctl_mat_destroy (&x->mat);
    if (S_ONE_FILE (x->format) && x->written && rc == 0
        && ctl_out_commit (&x->one_file, err, sizeof err) != 0) {
        ctl_error ("%s", err);
        rc = -1;
    }
    ctl_out_release (&x->one_file); // the temporary, unless committed
    return rc;
}

// Every file the export writes, checked before the first is written: one
// already there is refused (unless --force) and nothing is written. The
// files are those of the experiment's done pairs (a pair whose field the
// store did not keep too: its name is taken the same).
typedef struct {
    s_export_t *x;
    long files, taken;     // files checked, of them already there
    int failed;            // one cannot be written at all
    char first[PATH_MAX + 512]; // the refusal of the first
} s_check_t;

static void
s_check_file (s_check_t *check, const char *dir, const char *rel)
{
    char err[PATH_MAX + 512];
    int rc = ctl_out_check (dir, rel, check->x->force, err, sizeof err);
    check->files++;
    if (rc != 0 && !check->taken && !check->failed)
        snprintf (check->first, sizeof check->first, "%s", err);
    check->taken += rc == 1;
    check->failed |= rc < 0;
}

static int
s_check_pair (void *arg, const store_pair_info_t *pair)
{
    s_check_t *check = arg;
    char rel[PATH_MAX], why[PATH_WHY];
    if (s_field_file (check->x, pair->stem, pair->pair, rel, sizeof rel, why, sizeof why) == 0)
        s_check_file (check, check->x->out, rel); // else refused alone when it comes
    return check->failed;
}

// 0: every file may be written; -1: refused (logged).
static int
s_check_outputs (s_export_t *x, store_t *store, int64_t experiment)
{
    s_check_t check = {.x = x};
    if (S_ONE_FILE (x->format))
        s_check_file (&check, NULL, x->out);
    else {
        if (x->format == F_VTK)
            s_check_file (&check, x->out, "stats.vtk");
        if (store_pairs_of (store, experiment, STORE_DONE, 0, 0, s_check_pair, &check) < 0) {
            ctl_error ("cannot read the pairs of '%s' from '%s': %s", x->name,
                       x->ctl->cfg.broker.store, store_error (store));
            return -1;
        }
    }
    if (check.failed)
        ctl_error ("%s; nothing written", check.first);
    else if (check.taken == 1)
        ctl_error ("%s; nothing written (--force replaces it)", check.first);
    else if (check.taken)
        ctl_error ("%s, and %ld more of the %ld files of this export; nothing written (--force "
                   "replaces them)",
                   check.first, check.taken - 1, check.files);
    return check.failed || check.taken ? -1 : 0;
}

// The number of done pairs of experiment 'name' (the results to export).
typedef struct {
    const char *name; // looked for
    long done;        // its done pairs
} s_done_t;

static int
s_done_of (void *arg, const store_counts_t *counts)
{
    s_done_t *d = arg;
    if (strcmp (counts->name, d->name) == 0)
        d->done = (long)counts->pairs[STORE_DONE];
    return 0;
}

// --format and --units into x (units: -1 not given). 0, or EXIT_USAGE.
static int
s_parse (s_export_t *x, ctl_args_t *args, int *units)
{
    const char *format = ctl_value (args, "format"), *u = ctl_value (args, "units");
    if (ctl_check_name ("export", x->name) != 0)
        return EXIT_USAGE;
    if (!x->out || !*x->out) {
        ctl_error ("export needs -o DIR (or -o FILE for hdf5 and mat); usage: pivctl %s",
                   args->command->usage);
        return EXIT_USAGE;
    }
    x->format = F_TXT;
    for (int i = 0; format && i < F_COUNT; i++)
        if (strcmp (format, s_formats[i]) == 0)
            x->format = (s_format_t)i;
    if (format && strcmp (format, s_formats[x->format]) != 0) {
        ctl_error ("bad --format '%s': txt, tecplot, vtk, hdf5 or mat", format);
        return EXIT_USAGE;
    }
    *units = !u ? -1 : strcmp (u, "si") == 0 ? 1 : strcmp (u, "px") == 0 ? 0 : -2;
    if (*units == -2) {
        ctl_error ("bad --units '%s': px or si", u);
        return EXIT_USAGE;
    }
    return 0;
}

int
ctl_run_export (ctl_t *ctl, ctl_args_t *args)
{
    if (ctl_value (args, "ensemble"))
        return ctl_export_ensemble (ctl, args);
    s_export_t x = {.ctl = ctl,
                    .name = args->words[0],
                    .out = ctl_value (args, "output"),
                    .force = ctl_value (args, "force") != NULL};
    int units;
    int rc = s_parse (&x, args, &units);
    if (rc != 0)
        return rc;
    int64_t experiment;
    store_t *store = ctl_open_store (ctl, x.name, &experiment);
    if (!store)
        return EXIT_FAILED;
    char err[1024], settings[1024], h5_path[PATH_MAX];
    store_experiment_t found;
    s_settings_text (&ctl->cfg, store_experiment_find (store, x.name, &found) == 1 ? found.settings
                                                                                  : NULL,
                     settings, sizeof settings);
    x.settings = settings;
    x.calibs = ctl_calibs_load (store, experiment, &ctl->cfg, err, sizeof err);
    rc = EXIT_FAILED;
    if (!x.calibs)
        ctl_error ("cannot read the calibrations of '%s' in '%s': %s", x.name,
                   ctl->cfg.broker.store, err);
    else if (units == 1 && !ctl_calibs_ever (x.calibs))
        ctl_error ("export: experiment '%s' is not calibrated, so --units si has nothing to "
                   "convert with: calibrate it (pivctl calibrate %s --scale S --dt T) or use "
                   "--units px",
                   x.name, x.name);
    else if (s_prepare_output (&x, h5_path, sizeof h5_path) == 0
             && s_check_outputs (&x, store, experiment) == 0)
        rc = EXIT_OK;
    if (rc != EXIT_OK) {
        ctl_calibs_destroy (&x.calibs);
        store_destroy (&store);
        return rc;
    }
    if (ctl_calibs_warning (x.calibs))
        ctl_error ("%s: %s", x.name, ctl_calibs_warning (x.calibs));
    if (units < 0) {
        piv_calib_t now;
        ctl_calib_at (x.calibs, INT64_MAX, &now);
        units = now.set;
    }
    x.si = units;
    s_done_t done = {x.name, 0};
    store_counts (store, s_done_of, &done);
    x.total = done.done;
    x.tty = isatty (STDERR_FILENO);
    int listed = store_results_of (store, experiment, s_export_one, &x);
    if (x.tty)
        fprintf (stderr, "\r\033[K");
    if (listed < 0)
        ctl_error ("cannot read the results of '%s' from '%s': %s", x.name, ctl->cfg.broker.store,
                   store_error (store));
    int finished = s_finish (&x);
    store_destroy (&store);
    if (ctl->json)
        ctl_json_export (x.name, x.out, s_formats[x.format], x.si ? "si" : "px", x.written,
                         x.missing, x.errors);
    else if (finished == 0)
        printf ("exported %ld field(s) of %s to %s in %s units (%ld result(s) without a stored "
                "field%s)\n",
                x.written, x.name, x.out, x.si ? "si" : "px", x.missing,
                x.errors ? ", errors above" : "");
    ctl_calibs_destroy (&x.calibs);
    piv_stats_destroy (&x.stats);
    free (x.derived);
    free (x.converted);
    free (x.segments);
    return listed < 0 || finished != 0 || x.errors || x.uncalibrated ? EXIT_FAILED : EXIT_OK;
}
