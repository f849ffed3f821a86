// ensemble.c — pivctl ensemble: starts an ensemble correlation job of an
// experiment on the farm, or shows the state of its latest one
// (doc/pivctl.md). The line sent is "ensemble EXP window=W overlap=O
// [pairs=A-B]" or "ensemble EXP status"; the broker checks every value.

#include "ctl/ctl.h"

#include "ctl/h5.h"
#include "ctl/mat.h"
#include "piv/calib.h"
#include "piv/derived.h"
#include "piv/ensemble.h"
#include "piv/field.h"
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// {"experiment":..,"ensemble":{job, state, window, overlap, pairs, asked,
// passes, pass, chunks, chunks_done, chunk, error, ...} | null}
static void
s_print_ensemble (jdoc_t *doc, ctl_args_t *args)
{
    (void) args;
    const char *name = jdoc_string (doc, "$.experiment");
    double auto_window = jdoc_number (doc, NAN, "$.auto.window");
    if (isnan (auto_window))
        printf ("%s: no standing ensemble (pivctl ensemble %s --auto sets one)\n",
                name ? name : "?", name ? name : "EXP");
    else
        printf ("%s: standing ensemble of the pairs done once quiet for %s s: %s px windows, "
                "overlap %s %%\n",
                name ? name : "?", ctl_num (jdoc_number (doc, NAN, "$.auto.idle_s"), "%.0f"),
                ctl_num (auto_window, "%.0f"),
                ctl_num (jdoc_number (doc, NAN, "$.auto.overlap"), "%.0f"));
    const char *state = jdoc_string (doc, "$.ensemble.state");
    if (!state) {
        printf ("%s: no ensemble job yet\n", name ? name : "?");
        return;
    }
    const char *asked = jdoc_string (doc, "$.ensemble.asked");
    printf ("ensemble job %s of %s: %s\n", ctl_num (jdoc_number (doc, NAN, "$.ensemble.job"), "%.0f"),
            name ? name : "?", state);
    printf ("  windows    %s px, overlap %s %%\n",
            ctl_num (jdoc_number (doc, NAN, "$.ensemble.window"), "%.0f"),
            ctl_num (jdoc_number (doc, NAN, "$.ensemble.overlap"), "%.0f"));
    printf ("  pairs      %s (%s)\n", ctl_num (jdoc_number (doc, NAN, "$.ensemble.pairs"), "%.0f"),
            asked && *asked ? asked : "the pairs done");
    printf ("  progress   pass %s of %s, chunk(s) %s of %s\n",
            ctl_num (jdoc_number (doc, NAN, "$.ensemble.pass"), "%.0f"),
            ctl_num (jdoc_number (doc, NAN, "$.ensemble.passes"), "%.0f"),
            ctl_num (jdoc_number (doc, NAN, "$.ensemble.chunks_done"), "%.0f"),
            ctl_num (jdoc_number (doc, NAN, "$.ensemble.chunks"), "%.0f"));
    const char *error = jdoc_string (doc, "$.ensemble.error");
    if (error)
        printf ("  error      %s\n", error);
    if (strcmp (state, "done") == 0)
        printf ("  export     pivctl export %s --ensemble -o FILE\n", name ? name : "EXP");
}

int
ctl_run_ensemble (ctl_t *ctl, ctl_args_t *args)
{
    const char *name = args->words[0];
    if (ctl_check_name ("ensemble", name) != 0)
        return EXIT_USAGE;
    const char *window = ctl_value (args, "window"), *overlap = ctl_value (args, "overlap"),
               *pairs = ctl_value (args, "pairs"), *idle = ctl_value (args, "idle");
    int status = ctl_value (args, "status") != NULL, on = ctl_value (args, "auto") != NULL,
        off = ctl_value (args, "no-auto") != NULL;
    // Which form: a job, --status, --auto or --no-auto, each with its own
    // options.
    const char *why = status + on + off > 1               ? "--status, --auto and --no-auto exclude each other"
                      : (status || off) && (window || overlap || pairs || idle)
                          ? "--status and --no-auto take no --window, --overlap, --pairs or --idle"
                      : on && pairs ? "--auto sums the pairs done: it takes no --pairs"
                      : !on && idle ? "--idle goes with --auto"
                                    : NULL;
    if (why) {
        ctl_error ("ensemble: %s; usage: pivctl %s", why, args->command->usage);
        return EXIT_USAGE;
    }
    static char w[64], o[64], p[128], i[64];
    args->nsend = 2;
    if (status)
        args->send[args->nsend++] = "status";
    else if (off) {
        args->send[args->nsend++] = "auto";
        args->send[args->nsend++] = "off";
    }
    else {
        if (on)
            args->send[args->nsend++] = "auto";
        // Each value goes as one word without spaces (the broker names a
        // bad one).
        const char *values[4] = {window ? window : "8", overlap ? overlap : "50", pairs, idle};
        const char *keys[4] = {"window", "overlap", "pairs", "idle"};
        char *bufs[4] = {w, o, p, i};
        size_t sizes[4] = {sizeof w, sizeof o, sizeof p, sizeof i};
        for (int k = 0; k < 4; k++) {
            if (!values[k])
                continue;
            if (!*values[k] || strpbrk (values[k], " \t\n=")
                || (size_t) snprintf (bufs[k], sizes[k], "%s=%s", keys[k], values[k])
                       >= sizes[k]) {
                ctl_error ("ensemble: bad --%s '%s'; usage: pivctl %s", keys[k], values[k],
                           args->command->usage);
                return EXIT_USAGE;
            }
            args->send[args->nsend++] = bufs[k];
        }
    }
    args->send[args->nsend] = NULL;
    return ctl_run_printed (ctl, args, s_print_ensemble);
}

// ---------------------------------------------------------------------------
// export --ensemble: the experiment's latest ensemble field, read from the
// store (read-only, as every export), in every format of a run's export:
// txt (x y u v flags peak_ratio uu vv uv), Tecplot, VTK, HDF5 (the field
// as one time step) and MAT, each with the Reynolds stresses uu, vv, uv;
// in px or, calibrated, in m, m/s and m^2/s^2. The writers are the run
// export's, given the stresses as further columns (piv_column_t).

typedef enum { E_TXT, E_TECPLOT, E_VTK, E_HDF5, E_MAT, E_COUNT } s_format_t;
static const char *const s_formats[E_COUNT] = {"txt", "tecplot", "vtk", "hdf5", "mat"};

// What one export writes: the field, its stresses converted, the job.
typedef struct {
    const char *name;              // the experiment
    const char *out;               // -o FILE, as the user named it
    const store_ensemble_t *job;   // the job that made the field
    const piv_field_t *field;      // image units
    const float *stress;           // u'u', v'v', u'v' (3 n), px^2/frame^2
    const piv_calib_t *c;          // the calibration applied (not set: px)
    piv_column_t more[3];          // uu, vv, uv converted by c
} s_ensemble_out_t;

// The stresses of 'n' points from the store's little-endian floats into
// out (3 n); NaN past what the bytes hold.
static void
s_stress_read (const unsigned char *bytes, size_t size, size_t n, float *out)
{
    for (size_t i = 0; i < 3 * n; i++) {
        if ((i + 1) * 4 > size) {
            out[i] = NAN;
            continue;
        }
        uint32_t bits = 0;
        for (int k = 0; k < 4; k++)
            bits |= (uint32_t) bytes[i * 4 + k] << (8 * k);
        memcpy (&out[i], &bits, 4);
    }
}

// The header lines of a txt or Tecplot file: the job, its pairs, passes
// and units.
static void
s_header (const s_ensemble_out_t *e, char *header, size_t size)
{
    const store_ensemble_t *job = e->job;
    int si = e->c->set;
    snprintf (header, size,
              "pivfarm ensemble correlation of experiment '%s', job %" PRId64 ": %" PRId64
              " pair(s) (%s), %d pass(es) down to %d px windows at %d %% overlap\n"
              "units: x, y in %s; u, v in %s; uu, vv, uv (the Reynolds stresses u'u', v'v', "
              "u'v' from the correlation peak's width) in %s\n"
              "piv settings: %s",
              e->name, job->id, job->pairs, job->asked && *job->asked ? job->asked : "the pairs done",
              job->passes, job->window, job->overlap, si ? "m" : "px", si ? "m/s" : "px/frame",
              piv_ensemble_stress_unit (e->c), job->settings ? job->settings : "");
}

// Tecplot: the run export's columns (x y u v flags peak_ratio, the derived
// quantities) then uu vv uv. 0 or -1.
static int
s_write_tecplot (const s_ensemble_out_t *e, FILE *f)
{
    size_t n = (size_t) e->field->nx * (size_t) e->field->ny;
    char header[2048];
    s_header (e, header, sizeof header);
    float *derived = malloc (n * PIV_DERIVED_COUNT * sizeof *derived);
    piv_field_t *converted = e->c->set ? piv_calib_field (e->c, e->field) : NULL;
    int rc = -1;
    if (derived && (converted || !e->c->set)) {
        piv_field_derive_all (e->field, NULL, derived);
        piv_derived_convert (e->c, n, derived, derived);
        rc = piv_field_write_more (converted ? converted : e->field, f, PIV_FORMAT_TECPLOT, header,
                                   derived, NULL, e->more, 3);
    }
    piv_field_destroy (&converted);
    free (derived);
    return rc;
}

// VTK: the run export's point data with uu, vv, uv; their unit in the title.
static int
s_write_vtk (const s_ensemble_out_t *e, FILE *f)
{
    char title[256];
    snprintf (title, sizeof title,
              "pivfarm ensemble '%s' job %" PRId64 " (%" PRId64 " pairs): uu, vv, uv in %s",
              e->name, e->job->id, e->job->pairs, piv_ensemble_stress_unit (e->c));
    return piv_field_write_vtk_more (e->field, f, e->c->set ? e->c : NULL, title, e->more, 3);
}

// HDF5 or MAT (into ctl_out_name's temporary 'open_as'): the field as the one time
// step, with the stresses as (y, x) arrays. 0, or -1 with err.
static int
s_write_library (const s_ensemble_out_t *e, s_format_t format, const char *open_as, char *err,
                 size_t errlen)
{
    const char *settings = e->job->settings;
    if (format == E_HDF5) {
        char title[256];
        snprintf (title, sizeof title, "pivfarm ensemble correlation of '%s'", e->name);
        ctl_h5_t *h5 = ctl_h5_new (open_as, e->out, title, e->c, settings, err, errlen);
        if (!h5 || ctl_h5_fields_begin (h5, e->field, err, errlen) != 0
            || ctl_h5_field_add (h5, e->field, NULL, 0, "ensemble", err, errlen) != 0
            || ctl_h5_stresses (h5, e->stress, e->field->nx, e->field->ny, err, errlen) != 0
            || ctl_h5_close (&h5, err, errlen) != 0) {
            ctl_h5_close (&h5, NULL, 0);
            return -1;
        }
        return 0;
    }
    size_t n = (size_t) e->field->nx * (size_t) e->field->ny;
    float *derived = malloc (n * PIV_DERIVED_COUNT * sizeof *derived);
    ctl_mat_t *mat = derived ? ctl_mat_new (e->c, e->name, settings) : NULL;
    char stem[64];
    snprintf (stem, sizeof stem, "ensemble job %" PRId64, e->job->id);
    int rc = -1;
    if (!mat)
        snprintf (err, errlen, "no memory");
    else {
        piv_field_derive_all (e->field, NULL, derived);
        rc = ctl_mat_field_add (mat, e->field, derived, NAN, stem, err, errlen) == 0
                     && ctl_mat_more_add (mat, e->more, 3, err, errlen) == 0
                     && ctl_mat_write (mat, NULL, NULL, open_as, e->out, err, errlen) == 0
                 ? 0
                 : -1;
    }
    ctl_mat_destroy (&mat);
    free (derived);
    return rc;
}

// Writes the export into 'file' (ctl_out_init's; committed by the caller).
// 0, or -1 with err naming the file.
static int
s_write (const s_ensemble_out_t *e, s_format_t format, ctl_out_t *file, char *err,
         size_t errlen)
{
    if (format == E_HDF5 || format == E_MAT) {
        const char *open_as = ctl_out_name (file, err, errlen);
        return open_as ? s_write_library (e, format, open_as, err, errlen) : -1;
    }
    errno = 0;
    char header[2048];
    int rc;
    if (format == E_TXT) {
        // piv_ensemble_write: the writer pivfarm-piv --ensemble uses too.
        s_header (e, header, sizeof header);
        rc = piv_ensemble_write (e->field, e->stress, e->c, file->file, header);
    }
    else
        rc = format == E_TECPLOT ? s_write_tecplot (e, file->file) : s_write_vtk (e, file->file);
    if (rc != 0)
        snprintf (err, errlen, "cannot write '%s': %s", e->out,
                  errno ? strerror (errno) : "write error");
    return rc;
}

int
ctl_export_ensemble (ctl_t *ctl, ctl_args_t *args)
{
    const char *name = args->words[0], *out = ctl_value (args, "output"),
               *format_name = ctl_value (args, "format"), *units = ctl_value (args, "units");
    int force = ctl_value (args, "force") != NULL;
    if (ctl_check_name ("export", name) != 0)
        return EXIT_USAGE;
    s_format_t format = E_TXT;
    for (int i = 0; format_name && i < E_COUNT; i++)
        if (strcmp (format_name, s_formats[i]) == 0)
            format = (s_format_t) i;
    if (format_name && strcmp (format_name, s_formats[format]) != 0) {
        ctl_error ("export --ensemble: bad --format '%s': txt, tecplot, vtk, hdf5 or mat",
                   format_name);
        return EXIT_USAGE;
    }
    if (!out || !*out) {
        ctl_error ("export --ensemble needs -o FILE; usage: pivctl %s", args->command->usage);
        return EXIT_USAGE;
    }
    int si = !units ? -1 : strcmp (units, "si") == 0 ? 1 : strcmp (units, "px") == 0 ? 0 : -2;
    if (si == -2) {
        ctl_error ("bad --units '%s': px or si", units);
        return EXIT_USAGE;
    }
    int64_t experiment;
    store_t *store = ctl_open_store (ctl, name, &experiment);
    if (!store)
        return EXIT_FAILED;
    store_ensemble_t job;
    char err[1024];
    int rc = EXIT_FAILED, found = store_ensemble_latest (store, experiment, 1, &job);
    ctl_calibs_t *calibs = found == 1 ? ctl_calibs_load (store, experiment, &ctl->cfg, err,
                                                         sizeof err)
                                      : NULL;
    piv_field_t *field = NULL;
    float *stress = NULL;
    piv_calib_t c;
    piv_calib_init (&c);
    ctl_out_t file = {0};
    if (found < 0)
        ctl_error ("cannot read the ensemble jobs of '%s' in '%s': %s", name,
                   ctl->cfg.broker.store, store_error (store));
    else if (found == 0)
        ctl_error ("export: experiment '%s' has no ensemble field yet: run 'pivctl ensemble "
                   "%s' and wait until 'pivctl ensemble %s --status' says done",
                   name, name, name);
    else if (!calibs)
        ctl_error ("cannot read the calibrations of '%s': %s", name, err);
    else if (!(field = piv_field_decode (job.field, job.field_size, err, sizeof err)))
        ctl_error ("the ensemble field of '%s' (job %" PRId64 ") in the store is unreadable: %s",
                   name, job.id, err);
    else if (!(stress = malloc (3 * (size_t) field->nx * (size_t) field->ny * sizeof *stress)))
        ctl_error ("no memory");
    else {
        ctl_calib_at (calibs, INT64_MAX, &c);
        if (si < 0)
            si = c.set;
        if (si && !c.set)
            ctl_error ("export: experiment '%s' is not calibrated, so --units si has nothing "
                       "to convert with: calibrate it (pivctl calibrate %s --scale S --dt T) "
                       "or use --units px",
                       name, name);
        else if (ctl_out_init (&file, NULL, out, 0, force, err, sizeof err) != 0)
            ctl_error ("export: %s", err);
        else
            rc = EXIT_OK;
    }
    float *converted = rc == EXIT_OK ? malloc (3 * (size_t) field->nx * (size_t) field->ny
                                                * sizeof *converted)
                                     : NULL;
    if (rc == EXIT_OK && !converted) {
        ctl_error ("no memory");
        rc = EXIT_FAILED;
    }
    if (rc == EXIT_OK) {
        size_t n = (size_t) field->nx * (size_t) field->ny;
        s_stress_read (job.stress, job.stress_size, n, stress);
        piv_calib_t none;
        piv_calib_init (&none);
        const piv_calib_t *applied = si ? &c : &none;
        double k[3];
        piv_ensemble_stress_factors (applied, k);
        for (size_t i = 0; i < 3 * n; i++)
            converted[i] = (float) (stress[i] * k[i / n]);
        const char *unit = piv_ensemble_stress_unit (applied);
        s_ensemble_out_t e = {name, out, &job, field, stress, applied,
                              {{"uu", unit, converted}, {"vv", unit, converted + n},
                               {"uv", unit, converted + 2 * n}}};
        if (s_write (&e, format, &file, err, sizeof err) != 0
            || ctl_out_commit (&file, err, sizeof err) != 0) {
            ctl_error ("export: %s", err);
            rc = EXIT_FAILED;
        }
    }
    free (converted);
    ctl_out_release (&file);
    if (rc == EXIT_OK) {
        if (ctl->json)
            printf ("{\"experiment\":\"%s\",\"job\":%" PRId64 ",\"pairs\":%" PRId64
                    ",\"output\":\"%s\",\"format\":\"%s\",\"units\":\"%s\"}\n",
                    name, job.id, job.pairs, out, s_formats[format], si ? "si" : "px");
        else
            printf ("exported the ensemble field of %s (job %" PRId64 ", %" PRId64
                    " pairs) to %s (%s) in %s units\n",
                    name, job.id, job.pairs, out, s_formats[format], si ? "si" : "px");
    }
    free (stress);
    piv_field_destroy (&field);
    ctl_calibs_destroy (&calibs);
    if (found == 1)
        store_ensemble_release (&job);
    store_destroy (&store);
    return rc;
}
