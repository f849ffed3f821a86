// control_units.c — the control commands of issue 16 (doc/control.md):
// 'calibrate' (an experiment's calibration, or the global default '*'),
// 'stats' (a checkpoint of an experiment's run statistics and their
// summary) and 'mask' (the mask image its agents apply). Each change is a
// setting in the store, committed before the reply.

#include "broker/control_cmd.h"
#include "broker/stats.h"
#include "common/util.h"
#include "piv/cameras.h"
#include "piv/image.h"
#include "piv/stereo.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// {"scope":..,"calibration":{text, describe, source, calibrated},"units":{..}}
static int
s_put_calibration (control_cmd_t *cmd, exp_t *exp)
{
    stats_t *stats = cmd->self->stages.stats;
    const piv_calib_t *c = stats_calib (stats, exp, NULL);
    cmd_put_scope (cmd, exp);
    stats_put_calibration (stats, exp, &cmd->body);
    // A stereo experiment's rig (calibrate --cameras): its grid, which the
    // calibration above is made from.
    char err[512];
    piv_cameras_t *rig = exp && exp->piv.cameras
                             ? piv_cameras_parse (exp->piv.cameras, "the rig", err, sizeof err)
                             : NULL;
    piv_stereo_grid_t g;
    if (rig && piv_cameras_grid (rig, &g))
        text_put (&cmd->body,
                  ",\"rig\":{\"cameras\":%zu,\"grid\":{\"x0\":%.17g,\"y0\":%.17g,\"step\":%.17g,"
                  "\"width\":%d,\"height\":%d}}",
                  piv_cameras_count (rig), g.x0, g.y0, g.step, g.width, g.height);
    piv_cameras_destroy (&rig);
    text_put (&cmd->body, ",\"units\":{\"length\":\"%s\",\"velocity\":\"%s\",\"rate\":\"%s\"}}",
              piv_calib_unit (c, PIV_UNIT_LENGTH), piv_calib_unit (c, PIV_UNIT_VELOCITY),
              piv_calib_unit (c, PIV_UNIT_RATE));
    return 0;
}

// The calibration the words KEY=VALUE... give, amending 'base' (the one in
// force when it is calibrated). 0, or -1 (refused, naming the key and the
// accepted forms).
static int
s_parse_calibration (control_cmd_t *cmd, const piv_calib_t *base, piv_calib_t *c)
{
    piv_calib_init (c);
    if (base->set)
        *c = *base;
    for (int i = 2; i < cmd->argc; i++) {
        char key[32], err[512];
        const char *eq = strchr (cmd->argv[i], '=');
        size_t len = eq ? (size_t) (eq - cmd->argv[i]) : 0;
        if (!eq || len == 0 || len >= sizeof key)
            return cmd_refuse (cmd, 400,
                               "bad calibrate argument '%s': expected KEY=VALUE with KEY scale, "
                               "dt, origin or y_axis (scale=0.05mm/px dt=1ms origin=0,0 "
                               "y_axis=up), or none",
                               cmd->argv[i]);
        memcpy (key, cmd->argv[i], len);
        key[len] = '\0';
        if (piv_calib_set (c, key, eq + 1, err, sizeof err) != 0)
            return cmd_refuse (cmd, 400, "%s", err);
    }
    if (!c->set)
        return cmd_refuse (cmd, 400,
                           "bad calibration: scale and dt are both needed (e.g. "
                           "scale=0.05mm/px dt=1ms)");
    return 0;
}

// calibrate EXP cameras=TEXT [dt=T] (pivctl's --cameras FILE): a stereo
// rig (two cameras and its grid line, pivfarm-calib --size) attached to the
// experiment, which its stereo sets carry (setting 'cameras'), and the
// experiment's calibration set to the rig's grid (piv_stereo_grid_calib),
// which turns its stereo fields (on the grid's pixels) into mm and m/s.
// dt: the command's, else the experiment's calibration's. 0 or -1.
static int
s_calibrate_cameras (control_cmd_t *cmd, const char *text, int from_now)
{
    const char *name = cmd->argv[1];
    if (strcmp (name, "*") == 0)
        return cmd_refuse (cmd, 400, "calibrate --cameras: a rig is one experiment's, not '*'");
    if (cmd_refuse_name (cmd, "experiment", name))
        return -1;
    char err[1024];
    piv_cameras_t *rig = piv_cameras_parse (text, "--cameras", err, sizeof err);
    if (!rig)
        return cmd_refuse (cmd, 400, "%s", err);
    piv_stereo_grid_t grid;
    size_t count = piv_cameras_count (rig);
    int has_grid = piv_cameras_grid (rig, &grid);
    char *canonical = count == 2 && has_grid ? piv_cameras_format (rig) : NULL;
    piv_cameras_destroy (&rig);
    if (count != 2)
        return cmd_refuse (cmd, 400, "calibration file has %zu camera%s: stereo needs two",
                           count, count == 1 ? "" : "s");
    if (!has_grid)
        return cmd_refuse (cmd, 400,
                           "calibration file has no grid: run pivfarm-calib with --size WxH");
    if (!canonical)
        return cmd_refuse (cmd, 500, "no memory for the rig of '%s'", name);
    // Its comments left out: the text every stereo task of the experiment
    // carries, within what a TASK's text may hold.
    if (strlen (util_drop_comments (canonical)) >= PROTO_MAX_STRING) {
        size_t len = strlen (canonical);
        free (canonical);
        return cmd_refuse (cmd, 400, "calibration file is %zu bytes without its comments, over "
                           "the %d a task carries", len, PROTO_MAX_STRING - 1);
    }
    stats_t *stats = cmd->self->stages.stats;
    exp_t *exp = zhashx_lookup (ingest_experiments (cmd->self->ingest), name);
    piv_calib_t c, given;
    piv_calib_init (&given);
    for (int i = 2; i < cmd->argc; i++)
        if (strncmp (cmd->argv[i], "dt=", 3) != 0
            || piv_calib_set (&given, "dt", cmd->argv[i] + 3, err, sizeof err) != 0) {
            free (canonical);
            return cmd_refuse (cmd, 400, "%s",
                               strncmp (cmd->argv[i], "dt=", 3) == 0
                                   ? err
                                   : "calibrate --cameras takes --dt alone: the rig's grid gives "
                                     "the scale and the origin");
        }
    const piv_calib_t *now_in_force = stats_calib (stats, exp, NULL);
    double dt = given.dt > 0 ? given.dt : now_in_force->set ? now_in_force->dt : 0;
    if (!(dt > 0)) {
        free (canonical);
        return cmd_refuse (cmd, 400, "dt needed: give --dt (the time between frames A and B); "
                           "'%s' has no calibration to take it from", name);
    }
    piv_stereo_grid_calib (&grid, dt, &c);
    char calib[512];
    if (piv_calib_format (&c, calib, sizeof calib) < 0) {
        free (canonical);
        return cmd_refuse (cmd, 400, "bad calibration: over the %zu bytes recorded of one",
                           sizeof calib - 1);
    }
    if (!(exp = cmd_setting_experiment (cmd, name))) {
        free (canonical);
        return -1;
    }
    int64_t now = util_time_ns ();
    char epoch[24];
    snprintf (epoch, sizeof epoch, "%" PRId64, now);
    store_t *store = cmd->self->store;
    if ((from_now && store_setting_set (store, exp->id, "calibration_from", epoch, now) != 0)
        || store_setting_set (store, exp->id, "cameras", canonical, now) != 0
        || store_setting_set (store, exp->id, "calibration", calib, now) != 0) {
        free (canonical);
        return cmd_refuse (cmd, 500, "cannot record the calibration: %s", store_error (store));
    }
    if (cmd_commit (cmd)) {
        free (canonical);
        return -1;
    }
    free (exp->piv.cameras);
    exp->piv.cameras = canonical;
    if (from_now)
        stats_set_epoch (stats, exp, now);
    stats_set_calib (stats, exp, &c);
    return s_put_calibration (cmd, exp);
}

int
control_calibrate (control_cmd_t *cmd)
{
    const char *usage =
        "calibrate EXP|* [scale=S dt=T [origin=X,Y] [y_axis=up|down] | none | cameras=TEXT "
        "[dt=T]] [from=now]";
    if (cmd_expect (cmd, 0, 2, 7, usage))
        return -1;
    // from=now (pivctl's --from now): a new epoch; without it the
    // calibration applies to the results recorded before it too.
    int from_now = 0;
    for (int i = 2; i < cmd->argc; i++)
        if (strncmp (cmd->argv[i], "from=", 5) == 0) {
            if (strcmp (cmd->argv[i] + 5, "now") != 0)
                return cmd_refuse (cmd, 400, "bad calibrate --from '%s': only 'now' (the "
                                   "calibration applies to results recorded from now on)",
                                   cmd->argv[i] + 5);
            from_now = 1;
            memmove (cmd->argv + i, cmd->argv + i + 1,
                     (size_t) (cmd->argc - i) * sizeof *cmd->argv);
            cmd->argc--, i--;
        }
    if (from_now && cmd->argc == 2)
        return cmd_refuse (cmd, 400, "calibrate --from now needs a calibration (or none) to "
                           "begin with; usage: %s", usage);
    for (int i = 2; i < cmd->argc; i++)
        if (strncmp (cmd->argv[i], "cameras=", 8) == 0) {
            const char *text = cmd->argv[i] + 8;
            memmove (cmd->argv + i, cmd->argv + i + 1,
                     (size_t) (cmd->argc - i) * sizeof *cmd->argv);
            cmd->argc--;
            return s_calibrate_cameras (cmd, text, from_now);
        }
    const char *name = cmd->argv[1];
    int global = strcmp (name, "*") == 0;
    if (!global && cmd_refuse_name (cmd, "experiment", name))
        return -1;
    stats_t *stats = cmd->self->stages.stats;
    exp_t *exp = NULL;
    if (cmd->argc == 2) {
        if (!global && !(exp = cmd_find_experiment (cmd, name)))
            return -1;
        return s_put_calibration (cmd, exp);
    }
    // Checked before an unknown experiment is made for it.
    exp = global ? NULL : zhashx_lookup (ingest_experiments (cmd->self->ingest), name);
    int none = cmd->argc == 3 && strcmp (cmd->argv[2], "none") == 0;
    piv_calib_t c;
    char text[512], err[512];
    if (!none) {
        if (s_parse_calibration (cmd, stats_calib (stats, exp, NULL), &c))
            return -1;
        int width, height;
        // A stereo rig's grid calibration may put the origin outside the
        // grid (piv_stereo_grid_calib): amended, it is not checked again.
        if (exp && !exp->piv.cameras && stats_image_extent (stats, exp, &width, &height)
            && piv_calib_check_image (&c, width, height, err, sizeof err) != 0)
            return cmd_refuse (cmd, 400, "%s (as its results' grid shows)", err);
        if (piv_calib_format (&c, text, sizeof text) < 0)
            return cmd_refuse (cmd, 400, "bad calibration: over the %zu bytes recorded of one",
                               sizeof text - 1);
    }
    if (!global && !(exp = cmd_setting_experiment (cmd, name)))
        return -1;
    int64_t now = util_time_ns ();
    char epoch[24];
    snprintf (epoch, sizeof epoch, "%" PRId64, now);
    if ((from_now
         && store_setting_set (cmd->self->store, exp ? exp->id : 0, "calibration_from", epoch, now)
                != 0)
        || store_setting_set (cmd->self->store, exp ? exp->id : 0, "calibration",
                              none ? NULL : text, now)
               != 0)
        return cmd_refuse (cmd, 500, "cannot record the calibration: %s",
                           store_error (cmd->self->store));
    if (cmd_commit (cmd))
        return -1;
    if (from_now)
        stats_set_epoch (stats, exp, now);
    stats_set_calib (stats, exp, none ? NULL : &c);
    return s_put_calibration (cmd, exp);
}

int
control_stats (control_cmd_t *cmd)
{
    if (cmd_expect (cmd, 0, 2, 2, "stats EXP"))
        return -1;
    exp_t *exp = cmd_find_experiment (cmd, cmd->argv[1]);
    if (!exp)
        return -1;
    stats_t *stats = cmd->self->stages.stats;
    // Saved now, so that what the reply says is in the store for pivctl.
    if (stats_checkpoint (stats, exp, util_time_ns ()) != 0)
        return cmd_refuse (cmd, 500, "cannot save the statistics of '%s': %s", exp->name,
                           store_error (cmd->self->store));
    if (cmd_commit (cmd))
        return -1;
    text_put (&cmd->body, "{\"experiment\":");
    text_put_string (&cmd->body, exp->name);
    text_put (&cmd->body, ",\"rebuilding\":%s,\"missing\":%" PRId64 ",\"sets\":",
              stats_rebuilding (stats, exp) ? "true" : "false", stats_missing (stats, exp));
    stats_put_sets (stats, exp, &cmd->body);
    text_put (&cmd->body, "}");
    return 0;
}

// A mask path: absolute, without spaces or control characters (it goes
// into the settings text, split on spaces), a regular file and no symlink,
// an image the agents can load. 0, or -1 (refused).
static int
s_check_mask (control_cmd_t *cmd, const char *path, int *width, int *height)
{
    const char *why = *path == '/' ? NULL : "not an absolute path";
    for (const char *p = path; *p && !why; p++)
        if ((unsigned char) *p <= 0x20 || *p == 0x7f)
            why = "a space or control character (not allowed in the settings text)";
    struct stat st;
    if (!why && lstat (path, &st) != 0)
        why = "no such file";
    else if (!why && S_ISLNK (st.st_mode))
        why = "a symbolic link (give the file it points to)";
    else if (!why && !S_ISREG (st.st_mode))
        why = "not a regular file";
    if (why)
        return cmd_refuse (cmd, 400, "bad mask '%.200s': %s", path, why);
    char err[512];
    piv_image_t *image = piv_image_load (path, 0, 0, err, sizeof err);
    if (!image)
        return cmd_refuse (cmd, 400, "bad mask: %s", err);
    *width = piv_image_width (image);
    *height = piv_image_height (image);
    piv_image_destroy (&image);
    return 0;
}

int
control_mask (control_cmd_t *cmd)
{
    if (cmd_expect (cmd, 0, 3, 3, "mask EXP PATH|none"))
        return -1;
    const char *path = cmd->argv[2];
    int none = strcmp (path, "none") == 0, width = 0, height = 0;
    if (!none && s_check_mask (cmd, path, &width, &height))
        return -1;
    exp_t *exp = cmd_setting_experiment (cmd, cmd->argv[1]);
    if (!exp)
        return -1;
    if (store_setting_set (cmd->self->store, exp->id, "mask", none ? NULL : path,
                           util_time_ns ())
        != 0)
        return cmd_refuse (cmd, 500, "cannot record the mask: %s", store_error (cmd->self->store));
    if (cmd_commit (cmd))
        return -1;
    if (stats_set_mask (exp, none ? NULL : path) != 0)
        return cmd_refuse (cmd, 500, "no memory for the mask of '%s'", exp->name);
    cmd_put_scope (cmd, exp);
    text_put (&cmd->body, ",\"mask\":");
    if (none)
        text_put (&cmd->body, "null");
    else {
        text_put_string (&cmd->body, path);
        text_put (&cmd->body, ",\"width\":%d,\"height\":%d", width, height);
    }
    text_put (&cmd->body, ",\"settings\":");
    text_put_string (&cmd->body, exp->piv.settings);
    text_put (&cmd->body, "}");
    return 0;
}
