// json.c — the JSON that pivctl writes itself (export, replay, iobench):
// every such writer is here, each built with jansson and written with
// common/jout's conventions (one number format, one rule for strings).
// Replies of the broker are printed as they came.

#include "ctl/ctl.h"

#include "common/jout.h"
#include "piv/stats.h"

#include <math.h>
#include <stdio.h>

// Writes 'doc' as one line on stdout and releases it.
static void
s_print (json_t *doc)
{
    if (jout_write (doc, stdout) == 0)
        fputc ('\n', stdout);
    else
        fputs ("null\n", stdout);  // no memory: still valid JSON
    json_decref (doc);
}

void
ctl_json_export (const char *experiment, const char *dir, const char *format, const char *units,
                 long written, long missing, long errors)
{
    json_t *doc = json_object ();
    jout_set (&doc, "experiment", jout_string (experiment));
    jout_set (&doc, "dir", jout_string (dir));
    jout_set (&doc, "format", jout_string (format));
    jout_set (&doc, "units", jout_string (units));
    jout_set (&doc, "written", json_integer (written));
    jout_set (&doc, "missing", json_integer (missing));
    jout_set (&doc, "errors", json_integer (errors));
    s_print (doc);
}

void
ctl_json_republished (const char *experiment, const char *as, double sent, double speed)
{
    json_t *doc = json_object ();
    jout_set (&doc, "experiment", jout_string (experiment));
    jout_set (&doc, "as", jout_string (as));
    jout_set (&doc, "feedback_only", json_true ());
    jout_set (&doc, "republished", jout_number (round (sent)));
    jout_set (&doc, "speed", jout_number (speed));
    s_print (doc);
}

void
ctl_json_compare (const ctl_compare_t *c)
{
    json_t *doc = json_object ();
    jout_set (&doc, "experiment", jout_string (c->of));
    jout_set (&doc, "as", jout_string (c->as));
    jout_set (&doc, "pairs_matched", json_integer (c->matched));
    jout_set (&doc, "pairs_missing", json_integer (c->only_original + c->only_replay));
    for (int side = 0; side < 2; side++) {
        json_t *stems = json_array ();
        for (long i = 0; i < c->nmissing; i++)
            if (c->missing[i].in_replay == side)
                jout_append (&stems, jout_string (c->missing[i].stem));
        jout_set (&doc, side ? "missing_in_original" : "missing_in_replay", stems);
    }
    jout_set (&doc, "fields_compared", json_integer (c->compared));
    jout_set (&doc, "fields_on_other_grids", json_integer (c->grid_differs));
    jout_set (&doc, "max_vector_difference", jout_number (c->max_difference));
    jout_set (&doc, "files_matched", json_integer (c->files));
    jout_set (&doc, "pacing_error_percent", jout_number (c->error_percent));
    jout_set (&doc, "pacing_max_deviation_ms", jout_number (c->max_deviation_ms));
    jout_set (&doc, "speed", jout_number (c->speed));
    s_print (doc);
}

void
ctl_json_iobench (const char *dir, const iobench_row_t *rows, int best, double need, int sustains)
{
    json_t *doc = json_object (), *list = json_array ();
    jout_set (&doc, "dir", jout_string (dir));
    for (int k = 0; k < IOBENCH_SIZES; k++) {
        json_t *row = json_object ();
        jout_set (&row, "io_size", json_integer ((json_int_t) rows[k].io_size));
        jout_set (&row, "bytes", json_integer (rows[k].bytes));
        jout_set (&row, "write_mb_s", jout_number (round (rows[k].write_mb_s * 10) / 10));
        jout_set (&row, "read_mb_s", jout_number (round (rows[k].read_mb_s * 10) / 10));
        jout_append (&list, row);
    }
    jout_set (&doc, "rows", list);
    jout_set (&doc, "best_io_size", json_integer ((json_int_t) rows[best].io_size));
    jout_set (&doc, "need_mb_s", jout_number (need > 0 ? need / 1e6 : NAN));
    jout_set (&doc, "sustains", need > 0 ? json_boolean (sustains) : json_null ());
    s_print (doc);
}

void
ctl_json_stats (const char *experiment, const char *source, const ctl_stats_set_t *sets,
                int count)
{
    json_t *doc = json_object (), *list = json_array ();
    jout_set (&doc, "experiment", jout_string (experiment));
    jout_set (&doc, "source", jout_string (source));
    for (int i = 0; i < count; i++) {
        piv_stats_summary_t sum;
        piv_stats_summary (sets[i].stats, &sum);
        char description[256];
        piv_calib_describe (&sets[i].c, description, sizeof description);
        json_t *set = json_object ();
        jout_set (&set, "set", jout_string (sets[i].key));
        jout_set (&set, "fields", json_integer (sum.fields));
        jout_set (&set, "valid_fraction", jout_number (sum.valid_fraction));
        jout_set (&set, "convergence", jout_number (sum.convergence));
        jout_set (&set, "convergence_from", json_integer (sum.convergence_from));
        jout_set (&set, "mean_uncertainty",
                  jout_number (piv_calib_speed (&sets[i].c,
                                                piv_stats_mean_uncertainty (sets[i].stats))));
        jout_set (&set, "late", json_integer (sum.late));
        jout_set (&set, "units", jout_string (sets[i].c.set ? "si" : "px"));
        jout_set (&set, "velocity_unit", jout_string (piv_calib_unit (&sets[i].c, PIV_UNIT_VELOCITY)));
        jout_set (&set, "calibration", jout_string (sets[i].calibration));
        jout_set (&set, "calibration_description", jout_string (description));
        jout_set (&set, "settings", jout_string (sets[i].settings));
        jout_set (&set, "first_pair", json_integer (sets[i].first_pair));
        jout_set (&set, "last_pair", json_integer (sets[i].last_pair));
        jout_append (&list, set);
    }
    jout_set (&doc, "sets", list);
    s_print (doc);
}
