// stats.c — pivctl stats: the running statistics of an experiment. Asks
// the broker to checkpoint them (so the store is current), then reads the
// saved sets from the store and writes each, converted with the
// calibration its results were recorded under (doc/units.md, Files).

#include "ctl/ctl.h"

#include "common/cli.h"
#include "ctl/h5.h"
#include "piv/stats.h"
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SETS 1000 // sets read at once (one per change of grid or calibration)

typedef struct {
    ctl_stats_set_t *sets; // read so far
    int count;
    const char *error;     // the first set that could not be read
} s_sets_t;

static int
s_read_set (void *arg, const store_stats_t *row)
{
    s_sets_t *all = arg;
    if (all->count == MAX_SETS)
        return 1;
    char err[256];
    ctl_stats_set_t *set = &all->sets[all->count];
    memset (set, 0, sizeof *set);
    set->stats = piv_stats_decode (row->state, row->state_size, err, sizeof err);
    piv_calib_init (&set->c);
    if (!set->stats || piv_calib_parse (row->calibration, &set->c, err, sizeof err) != 0) {
        piv_stats_destroy (&set->stats);
        all->error = "a saved set of statistics is unreadable (left out)";
        return 0;
    }
    set->key = strdup (row->set ? row->set : "");
    set->settings = strdup (row->settings ? row->settings : "");
    set->calibration = strdup (row->calibration ? row->calibration : "none");
    set->first_pair = row->first_pair;
    set->last_pair = row->last_pair;
    set->updated_ns = row->updated_ns;
    all->count++;
    return !set->key || !set->settings || !set->calibration;
}

static void
s_sets_release (s_sets_t *all)
{
    for (int i = 0; i < all->count; i++) {
        piv_stats_destroy (&all->sets[i].stats);
        free (all->sets[i].key);
        free (all->sets[i].settings);
        free (all->sets[i].calibration);
    }
    free (all->sets);
}

// The header lines naming set i of n.
static void
s_header (const char *name, const ctl_stats_set_t *set, int i, int n, char *buf, size_t size)
{
    piv_stats_summary_t sum;
    piv_stats_summary (set->stats, &sum);
    char calib[256];
    piv_calib_describe (&set->c, calib, sizeof calib);
    snprintf (buf, size,
              "pivfarm statistics of experiment '%s', set %d of %d: %s\n"
              "piv settings: %s\n"
              "calibration: %s (%s)\n"
              "fields: %" PRId64 " (pairs %" PRId64 " to %" PRId64 "), valid fraction %.4f, "
              "convergence %.4g (against the mean at %" PRId64 " fields)\n"
              "mean velocity known to %.4g %s (RMS over the points of its standard "
              "uncertainty; nan: not known yet)",
              name, i + 1, n, set->key, set->settings, calib, set->calibration, sum.fields,
              set->first_pair, set->last_pair, sum.valid_fraction, sum.convergence,
              sum.convergence_from,
              piv_calib_speed (&set->c, piv_stats_mean_uncertainty (set->stats)),
              piv_calib_unit (&set->c, PIV_UNIT_VELOCITY));
}

// 'path' for set i of n: itself for one set, else "-<i+1>" before its
// extension (stats.txt -> stats-2.txt).
static void
s_set_path (const char *path, int i, int n, char *out, size_t size)
{
    if (n == 1) {
        snprintf (out, size, "%s", path);
        return;
    }
    const char *dot = strrchr (path, '.'), *slash = strrchr (path, '/');
    if (!dot || (slash && dot < slash))
        dot = path + strlen (path);
    snprintf (out, size, "%.*s-%d%s", (int)(dot - path), path, i + 1, dot);
}

// The files of the sets ('files' of them from 'path', as s_set_path names
// them) checked before the first is written: one already there is refused
// (unless 'force') and nothing is written. 0 or -1 (logged).
static int
s_check_files (const char *path, int files, int force)
{
    char file[PATH_MAX], err[PATH_MAX + 512], first[PATH_MAX + 512];
    int taken = 0;
    for (int i = 0; i < files; i++) {
        s_set_path (path, i, files, file, sizeof file);
        int rc = ctl_out_check (NULL, file, force, err, sizeof err);
        if (rc < 0) {
            ctl_error ("%s; nothing written", err);
            return -1;
        }
        if (rc == 1 && !taken++)
            snprintf (first, sizeof first, "%s", err);
    }
    if (taken == 1)
        ctl_error ("%s; nothing written (--force replaces it)", first);
    else if (taken)
        ctl_error ("%s, and %d more of the %d files of the sets; nothing written (--force "
                   "replaces them)",
                   first, taken - 1, files);
    return taken ? -1 : 0;
}

// Every set as txt, Tecplot or VTK: on stdout one after the other, or one
// file each (output.c: whole, never through a link). 0 or -1 (logged).
static int
s_write_text (const char *name, const s_sets_t *all, piv_format_t format, const char *path,
              int force)
{
    for (int i = 0; i < all->count; i++) {
        char file[PATH_MAX], header[2048], err[PATH_MAX + 512];
        s_header (name, &all->sets[i], i, all->count, header, sizeof header);
        if (format == PIV_FORMAT_VTK) // its title: one line
            *strchrnul (header, '\n') = '\0';
        ctl_out_t put = {0};
        FILE *out = stdout;
        if (path) {
            s_set_path (path, i, all->count, file, sizeof file);
            if (ctl_out_init (&put, NULL, file, 0, force, err, sizeof err) != 0) {
                ctl_error ("%s", err);
                return -1;
            }
            out = put.file;
        }
        errno = 0;
        int bad = piv_stats_write (all->sets[i].stats, out, format, &all->sets[i].c, header) != 0;
        if (!path)
            bad |= ferror (out);
        if (bad) {
            ctl_error ("cannot write '%s': %s", path ? file : "stdout",
                       errno ? strerror (errno) : "write error");
            ctl_out_release (&put);
            return -1;
        }
        if (path && ctl_out_commit (&put, err, sizeof err) != 0) {
            ctl_error ("%s", err);
            return -1;
        }
    }
    return 0;
}

// Every set into one HDF5 file, as groups stats/1, stats/2, ... (output.c:
// whole, never through a link). 0 or -1.
static int
s_write_h5 (const char *name, const s_sets_t *all, const char *path, int force)
{
    char err[PATH_MAX + 512], title[256], group[32];
    snprintf (title, sizeof title, "pivfarm statistics of experiment '%s'", name);
    ctl_out_t put;
    const char *open_as = NULL;
    if (ctl_out_init (&put, NULL, path, 0, force, err, sizeof err) == 0)
        open_as = ctl_out_name (&put, err, sizeof err);
    ctl_h5_t *h5 = open_as ? ctl_h5_new (open_as, path, title, &all->sets[0].c,
                                         all->sets[0].settings, err, sizeof err)
                           : NULL;
    int rc = h5 ? 0 : -1;
    for (int i = 0; rc == 0 && i < all->count; i++) {
        snprintf (group, sizeof group, "stats/%d", i + 1);
        rc = ctl_h5_stats (h5, group, all->sets[i].stats, &all->sets[i].c, all->sets[i].settings,
                           err, sizeof err);
    }
    if (h5 && ctl_h5_close (&h5, rc == 0 ? err : NULL, sizeof err) != 0)
        rc = -1;
    if (rc == 0 && ctl_out_commit (&put, err, sizeof err) != 0)
        rc = -1;
    if (rc != 0)
        ctl_error ("%s", err);
    ctl_out_release (&put);
    return rc;
}

// Asks the broker for a checkpoint. 0: done (a note on stderr when the
// broker is still rebuilding them: partial figures); 1: not reachable
// (said, with the fallback); EXIT_USAGE: the broker found the line wrong.
static int
s_checkpoint (ctl_t *ctl, const char *name)
{
    char *words[] = {"stats", (char *)name};
    char *line = cli_join (2, words), *body = NULL;
    jdoc_t *doc = NULL;
    int rc = line ? ctl_ask_json (ctl, line, &body, &doc) : EXIT_FAILED;
    free (line);
    free (body);
    if (rc == 0 && jdoc_bool (doc, 0, "$.rebuilding"))
        ctl_error ("the broker is still rebuilding the statistics of '%s' from the store "
                   "(%s result(s) not counted yet): the figures are partial",
                   name, ctl_num (jdoc_number (doc, NAN, "$.missing"), "%.0f"));
    jdoc_destroy (&doc);
    if (rc == 0 || rc == EXIT_USAGE)
        return rc;
    ctl_error ("no checkpoint from the broker: reading the last one of '%s' saved in the store",
               name);
    return 1;
}

int
ctl_run_stats (ctl_t *ctl, ctl_args_t *args)
{
    const char *name = args->words[0], *format = ctl_value (args, "format");
    const char *path = ctl_value (args, "output");
    int force = ctl_value (args, "force") != NULL;
    static const char *formats[] = {"txt", "tecplot", "vtk", "hdf5"};
    int f = format ? -1 : 0;
    for (int i = 0; format && i < 4; i++)
        if (strcmp (format, formats[i]) == 0)
            f = i;
    if (ctl_check_name ("stats", name) != 0)
        return EXIT_USAGE;
    if (f < 0) {
        ctl_error ("bad --format '%s': txt, tecplot, vtk or hdf5", format);
        return EXIT_USAGE;
    }
    if (f == 3 && (!path || !*path)) {
        ctl_error ("stats --format hdf5 needs -o FILE; usage: pivctl %s", args->command->usage);
        return EXIT_USAGE;
    }
    char err[PATH_MAX + 256];
    if (path && ctl_mkdirs_parent (path, err, sizeof err) != 0) {
        ctl_error ("%s", err);
        return EXIT_FAILED;
    }
    int asked = s_checkpoint (ctl, name);
    if (asked == EXIT_USAGE)
        return EXIT_USAGE;
    int64_t experiment;
    store_t *store = ctl_open_store (ctl, name, &experiment);
    if (!store)
        return EXIT_FAILED;
    s_sets_t all = {.sets = calloc (MAX_SETS, sizeof (ctl_stats_set_t))};
    int rc = all.sets ? store_stats_of (store, experiment, s_read_set, &all) : -1;
    if (rc < 0)
        ctl_error ("cannot read the statistics of '%s' from '%s': %s", name,
                   ctl->cfg.broker.store, all.sets ? store_error (store) : "no memory");
    store_destroy (&store);
    if (all.error)
        ctl_error ("%s: %s", name, all.error);
    int status = rc < 0 ? EXIT_FAILED : EXIT_OK;
    if (status == EXIT_OK && ctl->json)
        ctl_json_stats (name, asked == 0 ? "broker" : "store", all.sets, all.count);
    else if (status == EXIT_OK && all.count == 0) {
        ctl_error ("no statistics of '%s' yet: no result counted", name);
        status = EXIT_FAILED;
    }
    else if (status == EXIT_OK && path
             && s_check_files (path, f == 3 ? 1 : all.count, force) != 0)
        status = EXIT_FAILED;
    else if (status == EXIT_OK && f == 3)
        status = s_write_h5 (name, &all, path, force) == 0 ? EXIT_OK : EXIT_FAILED;
    else if (status == EXIT_OK)
        status = s_write_text (name, &all, (piv_format_t)f, path, force) == 0 ? EXIT_OK
                                                                              : EXIT_FAILED;
    if (status == EXIT_OK && path && !ctl->json)
        fprintf (stderr, "statistics of %s: %d set(s) written to %s%s\n", name, all.count, path,
                 all.count > 1 && f != 3 ? " (one file a set: -1, -2, ...)" : "");
    s_sets_release (&all);
    return status;
}
