// json.c — the JSON that pivctl writes itself (export, replay, iobench):
// every such writer is here. Replies of the broker are printed as they came.

#include "ctl/ctl.h"

#include "common/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void
ctl_json_string (const char *text)
{
    char small[512];
    size_t n = util_json_string (text, NULL, 0);
    char *json = n < sizeof small ? small : malloc (n + 1);
    if (!json) {
        fputs ("null", stdout); // no memory: still valid JSON
        return;
    }
    util_json_string (text, json, n + 1);
    fputs (json, stdout);
    if (json != small)
        free (json);
}

void
ctl_json_number (double x)
{
    if (isfinite (x))
        printf ("%.9g", x);
    else
        printf ("null");
}

void
ctl_json_export (const char *experiment, const char *dir, long written, long missing, long errors)
{
    printf ("{\"experiment\":");
    ctl_json_string (experiment);
    printf (",\"dir\":");
    ctl_json_string (dir);
    printf (",\"written\":%ld,\"missing\":%ld,\"errors\":%ld}\n", written, missing, errors);
}

void
ctl_json_republished (const char *experiment, const char *as, double sent, double speed)
{
    printf ("{\"experiment\":");
    ctl_json_string (experiment);
    printf (",\"as\":");
    ctl_json_string (as);
    printf (",\"feedback_only\":true,\"republished\":%s,\"speed\":", ctl_num (sent, "%.0f"));
    ctl_json_number (speed);
    printf ("}\n");
}

void
ctl_json_compare (const ctl_compare_t *c)
{
    printf ("{\"experiment\":");
    ctl_json_string (c->of);
    printf (",\"as\":");
    ctl_json_string (c->as);
    printf (",\"pairs_matched\":%ld,\"pairs_missing\":%ld", c->matched,
            c->only_original + c->only_replay);
    for (int side = 0; side < 2; side++) {
        printf (",\"%s\":[", side ? "missing_in_original" : "missing_in_replay");
        int first = 1;
        for (long i = 0; i < c->nmissing; i++)
            if (c->missing[i].in_replay == side) {
                printf ("%s", first ? "" : ",");
                ctl_json_string (c->missing[i].stem);
                first = 0;
            }
        printf ("]");
    }
    printf (",\"fields_compared\":%ld,\"fields_on_other_grids\":%ld", c->compared, c->grid_differs);
    printf (",\"max_vector_difference\":");
    ctl_json_number (c->max_difference);
    printf (",\"files_matched\":%ld,\"pacing_error_percent\":", c->files);
    ctl_json_number (c->error_percent);
    printf (",\"pacing_max_deviation_ms\":");
    ctl_json_number (c->max_deviation_ms);
    printf (",\"speed\":");
    ctl_json_number (c->speed);
    printf ("}\n");
}

void
ctl_json_iobench (const char *dir, const iobench_row_t *rows, int best, double need, int sustains)
{
    printf ("{\"dir\":");
    ctl_json_string (dir);
    printf (",\"rows\":[");
    for (int k = 0; k < IOBENCH_SIZES; k++)
        printf ("%s{\"io_size\":%zu,\"bytes\":%lld,\"write_mb_s\":%.1f,\"read_mb_s\":%.1f}",
                k ? "," : "", rows[k].io_size, (long long)rows[k].bytes, rows[k].write_mb_s,
                rows[k].read_mb_s);
    printf ("],\"best_io_size\":%zu,\"need_mb_s\":", rows[best].io_size);
    ctl_json_number (need > 0 ? need / 1e6 : NAN);
    printf (",\"sustains\":%s}\n", need > 0 ? (sustains ? "true" : "false") : "null");
}
