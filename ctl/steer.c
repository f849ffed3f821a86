// steer.c — steering: rate, policy, pause, resume, retry, backfill,
// feedback, calibrate, mask and piv, each a line sent to the broker and
// its answer printed.

#include "ctl/ctl.h"

#include "common/cli.h"
#include "common/util.h"
#include "piv/calib.h"
#include "piv/cameras.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_print_rate (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    printf ("rate limit of %s: %s\n", ctl_scope (doc),
            ctl_limit (jdoc_number (doc, NAN, "$.rate_limit")));
}

static void
s_print_policy (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    const char *policy = jdoc_string (doc, "$.policy");
    printf ("policy of %s: %s\n", ctl_scope (doc), policy ? policy : "-");
}

static void
s_print_paused (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    printf ("%s: %s\n", ctl_scope (doc),
            jdoc_bool (doc, 0, "$.paused") ? "paused (no new dispatch; tasks out finish)"
                                           : "running");
}

static void
s_print_moved (jdoc_t *doc, ctl_args_t *args)
{
    const char *name = jdoc_string (doc, "$.experiment");
    int retry = strcmp (args->command->name, "retry") == 0;
    printf ("%s: %s %s pair(s) back to pending\n", name ? name : "?",
            ctl_num (jdoc_number (doc, NAN, "$.moved"), "%.0f"), retry ? "failed" : "skipped");
}

static void
s_print_feedback (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    const char *f = "$.feedback";
    printf ("feedback of %s: %s\n", ctl_scope (doc),
            jdoc_bool (doc, 0, "%s.enabled", f) ? "on" : "off");
    if (jdoc_length (doc, "%s.roi", f) == 4) {
        // A physical ROI (metres) in the unit people read, as the
        // calibration's describe chooses it: "x 0 .. 20, y -5 .. 15 mm".
        const char *units = jdoc_string (doc, "%s.roi_units", f);
        double roi[4], largest = 0, size = 1;
        for (int i = 0; i < 4; i++) {
            roi[i] = jdoc_number (doc, NAN, "%s.roi[%d]", f, i);
            largest = fmax (largest, fabs (roi[i]));
        }
        const char *unit = "px";
        if (units && strcmp (units, "m") == 0)
            unit = piv_calib_length_unit (largest, &size);
        char num[4][64];
        for (int i = 0; i < 4; i++)
            snprintf (num[i], sizeof num[i], "%s", ctl_num (roi[i] / size, "%g"));
        printf ("  roi        x %s .. %s, y %s .. %s %s\n", num[0], num[2], num[1], num[3], unit);
    }
    else
        printf ("  roi        the whole field\n");
    const char *quantity = jdoc_string (doc, "%s.quantity", f);
    printf ("  quantity   %s\n", quantity ? quantity : "-");
    printf ("  setpoint   %s\n", ctl_num (jdoc_number (doc, NAN, "%s.setpoint", f), "%g"));
    printf ("  kp, ki     %s, %s\n", ctl_num (jdoc_number (doc, NAN, "%s.kp", f), "%g"),
            ctl_num (jdoc_number (doc, NAN, "%s.ki", f), "%g"));
    double lo = jdoc_number (doc, NAN, "%s.out_min", f),
           hi = jdoc_number (doc, NAN, "%s.out_max", f);
    printf ("  output     within [%s, %s]\n", isnan (lo) ? "-inf" : ctl_num (lo, "%g"),
            isnan (hi) ? "inf" : ctl_num (hi, "%g"));
    printf ("  last       output %s, integral %s\n",
            ctl_num (jdoc_number (doc, NAN, "%s.output", f), "%g"),
            ctl_num (jdoc_number (doc, NAN, "%s.integral", f), "%g"));
}

CTL_PRINTED (ctl_run_rate, s_print_rate)
CTL_PRINTED (ctl_run_policy, s_print_policy)
CTL_PRINTED (ctl_run_pause, s_print_paused)
CTL_PRINTED (ctl_run_moved, s_print_moved)
CTL_PRINTED (ctl_run_feedback, s_print_feedback)

// ---------------------------------------------------------------------------
// calibrate and mask: the line is built here (values without spaces, the
// mask's path absolute), checked first, then sent.

// Appends "key=value" (value's spaces removed: "0.05 mm/px" -> "0.05mm/px")
// to words after checking it as piv_calib_set would. 0 or -1 (logged).
static int
s_calib_word (const char *option, const char *key, const char *value, char *word, size_t size)
{
    char compact[256];
    size_t n = 0;
    for (const char *p = value; *p && n + 1 < sizeof compact; p++)
        if (*p != ' ' && *p != '\t')
            compact[n++] = *p;
    compact[n] = '\0';
    piv_calib_t c;
    piv_calib_init (&c);
    char err[512];
    if (piv_calib_set (&c, key, compact, err, sizeof err) != 0) {
        ctl_error ("calibrate: %s (--%s)", err, option);
        return -1;
    }
    snprintf (word, size, "%s=%s", key, compact);
    return 0;
}

// {"scope":..,"calibration":{text, describe, source, calibrated},"units":{..}}
static void
s_print_calibration (jdoc_t *doc, ctl_args_t *args)
{
    const char *name = args->words[0];
    const char *describe = jdoc_string (doc, "$.calibration.describe");
    const char *text = jdoc_string (doc, "$.calibration.text");
    const char *source = jdoc_string (doc, "$.calibration.source");
    printf ("calibration of %s: %s\n", strcmp (name, "*") == 0 ? "all experiments (the default)"
                                                                : name,
            describe ? describe : "-");
    if (source)
        printf ("  from         %s\n", source);
    if (text)
        printf ("  as recorded  %s\n", text);
    const char *length = jdoc_string (doc, "$.units.length");
    const char *velocity = jdoc_string (doc, "$.units.velocity");
    const char *rate = jdoc_string (doc, "$.units.rate");
    if (length && velocity && rate)
        printf ("  units        x, y %s; u, v %s; vorticity %s\n", length, velocity, rate);
    double cameras = jdoc_number (doc, NAN, "$.rig.cameras");
    if (isfinite (cameras))
        printf ("  stereo rig   %.0f cameras; grid %.0fx%.0f px from (%.6g, %.6g) mm, %.6g mm per "
                "px\n",
                cameras, jdoc_number (doc, NAN, "$.rig.grid.width"),
                jdoc_number (doc, NAN, "$.rig.grid.height"), jdoc_number (doc, NAN, "$.rig.grid.x0"),
                jdoc_number (doc, NAN, "$.rig.grid.y0"), jdoc_number (doc, NAN, "$.rig.grid.step"));
}

// --cameras FILE: the rig read and checked here (a message naming the
// file and the line), then sent as its canonical text without comments:
// the word "cameras=TEXT". NULL (logged) when unreadable; the caller frees.
static char *
s_cameras_word (const char *path)
{
    char err[1024];
    piv_cameras_t *rig = piv_cameras_load (path, err, sizeof err);
    if (!rig) {
        ctl_error ("calibrate: %s", err);
        return NULL;
    }
    char *text = piv_cameras_format (rig);
    piv_cameras_destroy (&rig);
    char *word = text ? malloc (strlen (text) + 16) : NULL;
    if (!word) {
        ctl_error ("calibrate: no memory for '%s'", path);
        free (text);
        return NULL;
    }
    stpcpy (stpcpy (word, "cameras="), util_drop_comments (text));
    free (text);
    return word;
}

int
ctl_run_calibrate (ctl_t *ctl, ctl_args_t *args)
{
    static const char *options[][2] = {
        {"scale", "scale"}, {"dt", "dt"}, {"origin", "origin"}, {"y-axis", "y_axis"}};
    const char *name = args->words[0]; // "*": the default of every experiment
    if (strcmp (name, "*") != 0 && ctl_check_name ("calibrate", name) != 0)
        return EXIT_USAGE;
    char words[4][300];
    args->nsend = 2; // the line is built here: "calibrate EXP key=value..."
    const char *cameras = ctl_value (args, "cameras");
    if (cameras) {
        for (int i = 0; i < 4; i++)
            if (i != 1 && ctl_value (args, options[i][0])) {
                ctl_error ("calibrate: --cameras takes --dt alone (the rig's grid gives the "
                           "scale and the origin); usage: pivctl %s", args->command->usage);
                return EXIT_USAGE;
            }
        if (ctl_value (args, "clear")) {
            ctl_error ("calibrate: --cameras and --clear: one of them; usage: pivctl %s",
                       args->command->usage);
            return EXIT_USAGE;
        }
    }
    for (int i = 0; i < 4; i++) {
        const char *value = ctl_value (args, options[i][0]);
        if (!value)
            continue;
        if (s_calib_word (options[i][0], options[i][1], value, words[i], sizeof words[i]) != 0)
            return EXIT_USAGE;
        args->send[args->nsend++] = words[i];
    }
    if (ctl_value (args, "clear")) {
        if (args->nsend > 2) {
            ctl_error ("calibrate: --clear takes no other option; usage: pivctl %s",
                       args->command->usage);
            return EXIT_USAGE;
        }
        args->send[args->nsend++] = "none";
    }
    const char *from = ctl_value (args, "from");
    if (from) {
        if (strcmp (from, "now") != 0) {
            ctl_error ("calibrate: bad --from '%s': only 'now' (without it the calibration "
                       "applies to the results recorded before it too); usage: pivctl %s",
                       from, args->command->usage);
            return EXIT_USAGE;
        }
        args->send[args->nsend++] = "from=now";
    }
    // The rig last: read once every option is known good.
    char *rig = cameras ? s_cameras_word (cameras) : NULL;
    if (cameras && !rig)
        return EXIT_USAGE;
    if (rig)
        args->send[args->nsend++] = rig;
    args->send[args->nsend] = NULL;
    int rc = ctl_run_printed (ctl, args, s_print_calibration);
    free (rig);
    return rc;
}

// {"scope":..,"mask":PATH|null,"width":W,"height":H,"settings":..}
static void
s_print_mask (jdoc_t *doc, ctl_args_t *args)
{
    const char *mask = jdoc_string (doc, "$.mask");
    if (mask)
        printf ("mask of %s: %s (%s x %s px)\n", args->words[0], mask,
                ctl_num (jdoc_number (doc, NAN, "$.width"), "%.0f"),
                ctl_num (jdoc_number (doc, NAN, "$.height"), "%.0f"));
    else
        printf ("mask of %s: none\n", args->words[0]);
}

int
ctl_run_mask (ctl_t *ctl, ctl_args_t *args)
{
    const char *name = args->words[0];
    if (ctl_check_name ("mask", name) != 0)
        return EXIT_USAGE;
    int clear = ctl_value (args, "clear") != NULL;
    if (clear == (args->nwords == 2)) {
        ctl_error ("mask needs FILE or --clear (one of them); usage: pivctl %s",
                   args->command->usage);
        return EXIT_USAGE;
    }
    char path[PATH_MAX];
    if (!clear && !realpath (args->words[1], path)) {
        ctl_error ("mask: cannot use '%s': %s", args->words[1], strerror (errno));
        return EXIT_USAGE;
    }
    args->send[2] = clear ? "none" : path; // "mask EXP /absolute/path|none"
    args->nsend = 3;
    args->send[3] = NULL;
    return ctl_run_printed (ctl, args, s_print_mask);
}

// ---------------------------------------------------------------------------
// piv: the line goes as it is (the broker checks each key with the engine's
// rules and names the one it refuses).

// {"scope":..,"settings":..,"own":..,"default":..,"base":..,"pairing":{..}}
static void
s_print_piv (jdoc_t *doc, ctl_args_t *args)
{
    int global = strcmp (args->words[0], "*") == 0;
    const char *settings = jdoc_string (doc, "$.settings");
    const char *own = jdoc_string (doc, "$.own");
    const char *dflt = jdoc_string (doc, "$.default");
    const char *base = jdoc_string (doc, "$.base");
    const char *rule = jdoc_string (doc, "$.pairing.rule");
    const char *pairs = jdoc_string (doc, "$.pairing.pairs");
    printf ("PIV settings of %s%s:\n", global ? "every experiment without its own (the default)"
                                               : args->words[0],
            args->nwords > 1 || args->values[0] ? " (for the pairs dispatched from now)" : "");
    printf ("  in force   %s\n", settings ? settings : "-");
    printf ("  own        %s\n", own && *own ? own : "none");
    if (base)
        printf ("  from       %s (its replayed source's, at the replay)\n", base);
    else
        printf ("  from       %s (%s)\n", dflt ? dflt : "-",
                global ? "the configuration's [piv]" : "the default: pivctl piv '*'");
    printf ("  pairing    %s%s: %s\n", rule ? rule : "-",
            jdoc_bool (doc, 0, "$.pairing.own") ? " (its own)" : " (the default)",
            pairs ? pairs : "-");
    const char *cameras = jdoc_string (doc, "$.pairing.cameras");
    if (rule && strcmp (rule, "stereo") == 0 && cameras)
        printf ("  cameras    %s (camera 1's folder first)\n", cameras);
}

int
ctl_run_piv (ctl_t *ctl, ctl_args_t *args)
{
    const char *name = args->words[0];  // "*": the default of every experiment
    if (strcmp (name, "*") != 0 && ctl_check_name ("piv", name) != 0)
        return EXIT_USAGE;
    for (int i = 1; i < args->nwords; i++)
        if (!strchr (args->words[i], '=')) {
            ctl_error ("piv: '%s' is not KEY=VALUE; usage: pivctl %s", args->words[i],
                       args->command->usage);
            return EXIT_USAGE;
        }
    return ctl_run_printed (ctl, args, s_print_piv);
}
