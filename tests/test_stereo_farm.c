// test_stereo_farm.c — stereo PIV through the real farm (issue 26): two
// cameras' frames written into an experiment's camera folders as camera
// PCs write them, the real watcher, broker and agents on ipc:// sockets,
// the rig attached with the real pivctl; each instant's four frames one
// task, done exactly once when an agent is killed in the middle of one, and
// its three components where a scientist reads them.

#include "common/jdoc.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_SETS 6            // stereo sets (instants) landed
#define S_U 0.3             // the synthetic flow, mm per frame (uniform)
#define S_V -0.2
#define S_W 0.2
#define S_DT_MS 1.0         // the time between frames A and B given to calibrate

static tu_farm_t s_farm;

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
}

static void
s_teardown (void)
{
    tu_farm_release (&s_farm);
}

// pivctl with the arguments: its exit status, its output in out.
static int
s_pivctl (char *out, size_t len, const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    int rc = tu_farm_pivctl_v (&s_farm, out, len, first, ap);
    va_end (ap);
    return rc;
}

// Renders S_SETS stereo sets of the uniform flow (512 x 512 frames) into
// src/ (src/cam1/s_0001_a.tif ..., the target points src/s_cam1.points,
// the truth src/s.truth) and fits the rig from the points with its grid for
// frames of that size, as a lab does: src/rig.cal.
static void
s_render_and_calibrate (void)
{
    char flow[128], out[8192], prefix[4200], count[16];
    snprintf (flow, sizeof flow, "uniform:%g,%g,%g", S_U, S_V, S_W);
    snprintf (prefix, sizeof prefix, "%s", tu_path (s_farm.dir, "src/s"));
    snprintf (count, sizeof count, "%d", S_SETS);
    const char *synth[] = {"--stereo", "--size", "512x512", "-f", flow, "-c", count,
                           "-o",       prefix,   NULL};
    int rc = tu_run_bin ("pivfarm-synth", synth, out, sizeof out, 120);
    ck_assert_msg (rc == 0, "pivfarm-synth: %d: %s", rc, out);
    char p1[4200], p2[4200], rig[4200];
    snprintf (p1, sizeof p1, "%s", tu_path (s_farm.dir, "src/s_cam1.points"));
    snprintf (p2, sizeof p2, "%s", tu_path (s_farm.dir, "src/s_cam2.points"));
    snprintf (rig, sizeof rig, "%s", tu_path (s_farm.dir, "src/rig.cal"));
    const char *calib[] = {"--camera", "1",      "--points", p1,  "--camera", "2", "--points",
                           p2,         "--size", "512x512",  "-o", rig,        NULL};
    rc = tu_run_bin ("pivfarm-calib", calib, out, sizeof out, 120);
    ck_assert_msg (rc == 0 && strstr (out, "stereo grid for 512x512"), "pivfarm-calib: %d: %s",
                   rc, out);
}

// Writes sets first..last's four frames into data/exp1/<camera 1's
// folder>/ and <camera 2's>/ as camera PCs do: each under a hidden name
// first, then renamed into place; set i under the name of set i + shift
// (shift 0: its own; else the same frames again under another name).
static void
s_land_into (const char *folder1, const char *folder2, int first, int last, int shift)
{
    for (int i = first; i <= last; i++)
        for (int k = 0; k < 4; k++) {
            const char *folder = k < 2 ? folder1 : folder2;
            char name[64], from[4200], tmp[4200], to[4200];
            snprintf (name, sizeof name, "s_%04d_%c.tif", i, k % 2 ? 'b' : 'a');
            snprintf (from, sizeof from, "%s/src/cam%d/%s", s_farm.dir, 1 + k / 2, name);
            snprintf (name, sizeof name, "s_%04d_%c.tif", i + shift, k % 2 ? 'b' : 'a');
            snprintf (to, sizeof to, "%s/data/exp1/%s/%s", s_farm.dir, folder, name);
            snprintf (tmp, sizeof tmp, "%s/data/exp1/%s/.%s.part", s_farm.dir, folder, name);
            tu_copy (from, tmp);
            ck_assert (rename (tmp, to) == 0);
        }
}

static void
s_land (int first, int last)
{
    s_land_into ("cam1", "cam2", first, last, 0);
}

// An agent of its own configuration whose processor waits for a gate that
// never opens: it holds the task it takes until it is killed (the processor
// ends with its agent, so that nothing of the test outlives it).
static int
s_start_held_agent (void)
{
    char gate[4200], script[8192], victim[4200];
    snprintf (gate, sizeof gate, "%s", tu_path (s_farm.dir, "gate"));
    snprintf (script, sizeof script,
              "#!/bin/sh\nwhile [ ! -e '%s' ]; do\n  kill -0 $PPID 2>/dev/null || exit 1\n"
              "  sleep 0.05\ndone\necho held > \"$3\"\n",
              gate);
    const char *held = tu_path (s_farm.dir, "held.sh");
    tu_spit (held, script, strlen (script));
    chmod (held, 0755);
    char *conf = tu_slurp (s_farm.conf, NULL);
    ck_assert (conf != NULL);
    char *at = strstr (conf, "processor = piv");
    ck_assert (at != NULL);
    snprintf (victim, sizeof victim, "%s", tu_path (s_farm.dir, "victim.conf"));
    char text[16384];
    snprintf (text, sizeof text, "%.*sprocessor = exec:%s%s", (int) (at - conf), conf, held,
              at + strlen ("processor = piv"));
    tu_spit (victim, text, strlen (text));
    free (conf);
    char *argv[] = {(char *) tu_bin ("pivfarm-agent"), "-c", victim, "--id", "victim", NULL};
    return tu_spawn (argv, tu_path (s_farm.dir, "victim.log"));
}

// The means of u, v, w (mm per frame) of the valid vectors of a result
// file as the agent writes a stereo set's ('x y u v w flags residual', mm).
static int
s_result_means (const char *path, double mean[3])
{
    char *text = tu_slurp (path, NULL);
    ck_assert_msg (text != NULL, "no result '%s'", path);
    double sum[3] = {0, 0, 0};
    int n = 0;
    for (char *save, *line = strtok_r (text, "\n", &save); line;
         line = strtok_r (NULL, "\n", &save)) {
        double x, y, u, v, w, flags;
        if (line[0] != '#' && sscanf (line, "%lf %lf %lf %lf %lf %lf", &x, &y, &u, &v, &w, &flags)
                                  == 6
            && flags == 0) {
            sum[0] += u, sum[1] += v, sum[2] += w;
            n++;
        }
    }
    free (text);
    for (int c = 0; c < 3; c++)
        mean[c] = n ? sum[c] / n : NAN;
    return n;
}

// Set i's result file of experiment 'exp': the flow's three components.
static void
s_check_result (const char *exp, int i)
{
    char path[4200];
    snprintf (path, sizeof path, "%s/results/%s/s_%04d.txt", s_farm.dir, exp, i);
    double mean[3];
    int n = s_result_means (path, mean);
    printf ("%s set %d: %d valid vectors, mean u %.4f v %.4f w %.4f mm/frame (truth %g %g %g)\n",
            exp, i, n, mean[0], mean[1], mean[2], S_U, S_V, S_W);
    ck_assert_msg (n > 100, "%s: %d valid vectors", path, n);
    ck_assert_msg (fabs (mean[0] - S_U) < 0.01 && fabs (mean[1] - S_V) < 0.01
                       && fabs (mean[2] - S_W) < 0.015,
                   "%s: mean (%.4f, %.4f, %.4f), truth (%g, %g, %g)", path, mean[0], mean[1],
                   mean[2], S_U, S_V, S_W);
}

// The column 'name' of a txt export's column line ("x y u v w flags ..."),
// from 0; -1 when it has none.
static int
s_column (const char *text, const char *name)
{
    const char *line = strstr (text, "\n# x ");
    if (!line)
        return -1;
    int col = 0;
    for (const char *p = line + 3; *p && *p != '\n'; col++) {
        size_t len = strcspn (p, " \n");
        if (len == strlen (name) && strncmp (p, name, len) == 0)
            return col;
        p += len;
        while (*p == ' ')
            p++;
    }
    return -1;
}

// A field as exported in txt: x, y, u, v, w of the vectors with flags 0
// (w NaN without a w column).
typedef struct {
    int n;
    int has_w;  // the file has a w column
    double x[8192], y[8192], u[8192], v[8192], w[8192];
} s_vectors_t;

// Reads the txt export 'file' into *v; fails the test without its columns
// or with 100 valid vectors or fewer.
static void
s_read_export (const char *file, s_vectors_t *v)
{
    char *text = tu_slurp (file, NULL);
    ck_assert_msg (text != NULL, "no export '%s'", file);
    int cx = s_column (text, "x"), cy = s_column (text, "y"), cu = s_column (text, "u"),
        cv = s_column (text, "v"), cw = s_column (text, "w"), cf = s_column (text, "flags");
    ck_assert_msg (cx >= 0 && cy >= 0 && cu >= 0 && cv >= 0 && cf >= 0, "%s: no column line",
                   file);
    v->n = 0;
    v->has_w = cw >= 0;
    for (char *save, *line = strtok_r (text, "\n", &save); line;
         line = strtok_r (NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        double c[16];
        int got = 0;
        for (char *p = line, *end; got < 16; p = end, got++) {
            c[got] = strtod (p, &end);
            if (end == p)
                break;
        }
        if (got > cf && c[cf] == 0 && v->n < 8192) {
            v->x[v->n] = c[cx], v->y[v->n] = c[cy], v->u[v->n] = c[cu], v->v[v->n] = c[cv];
            v->w[v->n] = cw >= 0 && got > cw ? c[cw] : NAN;
            v->n++;
        }
    }
    free (text);
    ck_assert_msg (v->n > 100, "%s: %d valid vectors", file, v->n);
}

// The broker started, and experiment exp1 made a stereo one before its
// first frame lands: the stereo rule, its camera folders 'folders' and the
// rig src/rig.cal (dt 1 ms), as an operator sets them with pivctl.
static void
s_stereo_experiment (const char *folders)
{
    s_render_and_calibrate ();
    tu_farm_start_broker (&s_farm);
    char out[65536], rig[4200], word[256];
    snprintf (rig, sizeof rig, "%s", tu_path (s_farm.dir, "src/rig.cal"));
    snprintf (word, sizeof word, "cameras=%s", folders);
    int rc = s_pivctl (out, sizeof out, "piv", "exp1", "pairing=stereo", word, NULL);
    ck_assert_msg (rc == 0 && strstr (out, folders), "pivctl piv: %d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "calibrate", "exp1", "--cameras", rig, "--dt", "1ms", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "calibration of exp1") && strstr (out, "stereo rig   2 cameras; grid"),
                   "pivctl calibrate: %d: %s", rc, out);
}

START_TEST (stereo_sets_are_done_exactly_once_when_an_agent_dies_mid_task_with_their_w)
{
    s_stereo_experiment ("cam1,cam2");
    char out[65536];
    int rc;
    // The controller's view: mean w on the feedback topic.
    rc = s_pivctl (out, sizeof out, "feedback", "set", "quantity=mean_w", "-e", "exp1", NULL);
    ck_assert_msg (rc == 0, "pivctl feedback set: %d: %s", rc, out);
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/publish", s_farm.dir);
    zsock_t *sub = zsock_new_sub (endpoint, "feedback.exp1/");
    ck_assert_ptr_nonnull (sub);
    // The agent that will die holds a task before the others start.
    s_farm.others[0] = s_start_held_agent ();
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    // The camera folders are made as the cameras start, under the watch.
    mkdir (tu_path (s_farm.dir, "data/exp1/cam1"), 0755);
    mkdir (tu_path (s_farm.dir, "data/exp1/cam2"), 0755);
    usleep (200000);
    s_land (1, S_SETS);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 200 && (c.dispatched < 1 || c.files < 4 * S_SETS);
         i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_msg (c.dispatched == 1, "dispatched %lld (see broker.log)", (long long) c.dispatched);
    // Until an agent takes them, the sets wait whole: four frames each.
    ck_assert_int_eq ((int) tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs"), S_SETS);
    ck_assert_int_eq ((int) tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE file_c IS "
                                                  "NOT NULL AND file_d IS NOT NULL"),
                      S_SETS);
    tu_stop (s_farm.others[0], SIGKILL, 5);
    s_farm.others[0] = 0;
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "a2");
    c = tu_farm_wait_done (&s_farm, S_SETS, 180);
    ck_assert_msg (c.done == S_SETS && c.failed == 0 && c.pending == 0 && c.dispatched == 0,
                   "done %lld failed %lld pending %lld dispatched %lld (see agent1.log)",
                   (long long) c.done, (long long) c.failed, (long long) c.pending,
                   (long long) c.dispatched);
    ck_assert_int_eq (c.files, 4 * S_SETS);
    // Exactly once: one result a set, none of the dead agent's, and its set
    // requeued and done by another.
    ck_assert_int_eq ((int) tu_farm_sql (&s_farm, "SELECT count(*) FROM results"), S_SETS);
    ck_assert_int_eq ((int) tu_farm_sql (&s_farm, "SELECT count(*) FROM attempts WHERE outcome "
                                                  "= 'done'"),
                      S_SETS);
    ck_assert_int_eq ((int) tu_farm_sql (&s_farm, "SELECT count(*) FROM results WHERE agent = "
                                                  "'victim'"),
                      0);
    ck_assert_int_eq ((int) tu_farm_sql (&s_farm, "SELECT count(*) FROM attempts WHERE agent = "
                                                  "'victim' AND outcome = 'requeued'"),
                      1);
    // Feedback: a message a set (or fewer: the controller's pace), each
    // mean w in m/s at the truth's.
    int messages = 0;
    double last_w = NAN;
    zpoller_t *poller = zpoller_new (sub, NULL);
    while (zpoller_wait (poller, messages ? 500 : 10000)) {
        char *topic = zstr_recv (sub), *json = zstr_recv (sub);
        jdoc_t *doc = json ? jdoc_parse (json, NULL, 0) : NULL;
        ck_assert_msg (doc, "feedback: %s", json ? json : "(none)");
        last_w = jdoc_number (doc, NAN, "$.mean_w");
        ck_assert_str_eq (jdoc_string (doc, "$.units.velocity"), "m/s");
        jdoc_destroy (&doc);
        zstr_free (&topic);
        zstr_free (&json);
        messages++;
    }
    zpoller_destroy (&poller);
    zsock_destroy (&sub);
    printf ("feedback: %d messages, last mean_w %.4f m/s (truth %.4f)\n", messages, last_w,
            S_W / S_DT_MS);
    ck_assert_msg (messages >= 1 && fabs (last_w - S_W / S_DT_MS) < 0.015,
                   "%d feedback messages, mean_w %g m/s", messages, last_w);
    // Each set's field: the three components of the flow, mm per frame.
    for (int i = 1; i <= S_SETS; i++)
        s_check_result ("exp1", i);
    char *times = tu_farm_sql_text (&s_farm, "SELECT group_concat (agent || ' ' || (compute_ns / "
                                             "1000000), ' ms, ') FROM results");
    printf ("each set's compute time on its agent (512x512 frames, passes 32,16): %s ms\n",
            times ? times : "?");
    free (times);

    // The export in metres and m/s: the rig's grid is the experiment's
    // calibration, so u and v come out at U/dt, V/dt (the flow's m/s).
    const char *dir = tu_path (s_farm.dir, "export");
    char exported[4200];
    snprintf (exported, sizeof exported, "%s", dir);
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--format", "txt", "--units", "si", "-o",
                   exported, NULL);
    ck_assert_msg (rc == 0, "pivctl export: %d: %s", rc, out);
    char file[8400];
    snprintf (file, sizeof file, "%s/s_0001.txt", exported);
    s_vectors_t *vec = malloc (sizeof *vec);
    ck_assert (vec != NULL);
    s_read_export (file, vec);
    double sum[3] = {0, 0, 0};
    int n = vec->n;
    for (int k = 0; k < n; k++)
        sum[0] += vec->u[k], sum[1] += vec->v[k], sum[2] += vec->has_w ? vec->w[k] : 0;
    int txt_w = vec->has_w;
    free (vec);
    double dt = S_DT_MS * 1e-3;  // mm per frame / dt = 1e-3 m / dt per s
    printf ("export txt si: mean u %.4f v %.4f m/s (truth %.4f %.4f)\n", sum[0] / n,
            sum[1] / n, S_U * 1e-3 / dt, S_V * 1e-3 / dt);
    ck_assert_msg (txt_w, "%s: no w column", file);
    ck_assert (fabs (sum[0] / n - S_U * 1e-3 / dt) < 0.01
               && fabs (sum[1] / n - S_V * 1e-3 / dt) < 0.01);
    // The run statistics saved now (pivctl stats: a checkpoint), for the
    // HDF5 export's statistics.
    rc = s_pivctl (out, sizeof out, "stats", "exp1", NULL);
    ck_assert_msg (rc == 0, "pivctl stats: %d: %s", rc, out);
    // HDF5 (h5py): its u, v, w in m/s.
    char h5[4200];
    snprintf (h5, sizeof h5, "%s", tu_path (s_farm.dir, "exp1.h5"));
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--format", "hdf5", "--units", "si", "-o",
                   h5, NULL);
    ck_assert_msg (rc == 0, "pivctl export --format hdf5: %d: %s", rc, out);
    const char *script = tu_path (s_farm.dir, "h5.py");
    // The run statistics' mean w too (stats/w_mean).
    const char *check = "import sys, h5py, numpy as np\n"
                        "f = h5py.File(sys.argv[1], 'r'); ok = f['flags'][...] == 0\n"
                        "s = f['stats']['w_mean'][...] if 'stats' in f and 'w_mean' in f['stats'] "
                        "else np.array([np.nan])\n"
                        "print('means', ' '.join('%.6f' % (f[c][...][ok].mean() if c in f else "
                        "float('nan')) for c in ('u', 'v', 'w')), 'w' in f, "
                        "'%.6f' % np.nanmean(s))\n";
    tu_spit (script, check, strlen (check));
    char *py[] = {"/usr/bin/python3", (char *) script, h5, NULL};
    rc = tu_run (py, out, sizeof out, 120);
    double h[3], stats_w;
    char has_w[8] = "";
    const char *means = strstr (out, "means ");
    ck_assert_msg (rc == 0 && means
                       && sscanf (means, "means %lf %lf %lf %7s %lf", &h[0], &h[1], &h[2], has_w,
                                  &stats_w)
                              == 5,
                   "h5py: %s", out);
    printf ("export hdf5 si: mean u %.4f v %.4f w %.4f m/s\n", h[0], h[1], h[2]);
    ck_assert (fabs (h[0] - S_U * 1e-3 / dt) < 0.01 && fabs (h[1] - S_V * 1e-3 / dt) < 0.01);
    // w in both formats and the statistics, at the truth's m/s.
    ck_assert_msg (strcmp (has_w, "True") == 0, "hdf5 has no w: %s", out);
    printf ("export txt si: mean w %.4f m/s (truth %.4f)\n", sum[2] / n, S_W * 1e-3 / dt);
    ck_assert (fabs (sum[2] / n - S_W * 1e-3 / dt) < 0.015);
    ck_assert (fabs (h[2] - S_W * 1e-3 / dt) < 0.015);
    printf ("export hdf5 si: statistics' mean w %.4f m/s\n", stats_w);
    ck_assert (fabs (stats_w - S_W * 1e-3 / dt) < 0.015);
}
END_TEST

// A set whose experiment has no rig yet fails with the command that sets
// one; a rig of other than two cameras or without its grid is refused,
// naming why.
START_TEST (a_stereo_set_without_a_rig_fails_saying_how_to_attach_one)
{
    s_render_and_calibrate ();
    tu_farm_conf_replace (&s_farm, "\npiv\n", "\npairing\n    rule = stereo\npiv\n");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    tu_farm_start_broker (&s_farm);
    char out[65536], path[4200];
    // Refusals: a file that is no rig (pivctl names its line), one camera;
    // no grid line; no dt anywhere.
    snprintf (path, sizeof path, "%s", tu_path (s_farm.dir, "src/bad.cal"));
    const char *bad = "pivfarm-cameras 1\nunits mm\nlens 3\n";
    tu_spit (path, bad, strlen (bad));
    int rc = s_pivctl (out, sizeof out, "calibrate", "exp1", "--cameras", path, "--dt", "1ms", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "bad.cal") && strstr (out, "line 3"), "%d: %s", rc, out);
    snprintf (path, sizeof path, "%s", tu_path (s_farm.dir, "src/one.cal"));
    const char *one[] = {"--points", tu_path (s_farm.dir, "src/s_cam1.points"), "-o", path, NULL};
    rc = tu_run_bin ("pivfarm-calib", one, out, sizeof out, 120);
    ck_assert_msg (rc == 0, "pivfarm-calib: %d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "calibrate", "exp1", "--cameras", path, "--dt", "1ms", NULL);
    ck_assert_msg (rc != 0 && strstr (out, "calibration file has 1 camera: stereo needs two"),
                   "%d: %s", rc, out);
    snprintf (path, sizeof path, "%s", tu_path (s_farm.dir, "src/s.cal"));
    rc = s_pivctl (out, sizeof out, "calibrate", "exp1", "--cameras", path, "--dt", "1ms", NULL);
    ck_assert_msg (rc != 0 && strstr (out, "calibration file has no grid: run pivfarm-calib with "
                                           "--size WxH"),
                   "%d: %s", rc, out);
    snprintf (path, sizeof path, "%s", tu_path (s_farm.dir, "src/rig.cal"));
    rc = s_pivctl (out, sizeof out, "calibrate", "exp1", "--cameras", path, NULL);
    ck_assert_msg (rc != 0 && strstr (out, "dt needed"), "%d: %s", rc, out);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    mkdir (tu_path (s_farm.dir, "data/exp1/cam1"), 0755);
    mkdir (tu_path (s_farm.dir, "data/exp1/cam2"), 0755);
    usleep (200000);
    s_land (1, 1);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 600 && c.failed < 1; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_msg (c.failed == 1, "failed %lld done %lld", (long long) c.failed,
                   (long long) c.done);
    char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs");
    ck_assert_msg (error && strstr (error, "pivctl calibrate exp1 --cameras FILE"), "%s",
                   error ? error : "(none)");
    free (error);
    // Attached, then retried: done.
    rc = s_pivctl (out, sizeof out, "calibrate", "exp1", "--cameras", path, "--dt", "1ms", NULL);
    ck_assert_msg (rc == 0, "%d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "retry", "exp1", NULL);
    ck_assert_msg (rc == 0, "%d: %s", rc, out);
    c = tu_farm_wait_done (&s_farm, 1, 120);
    ck_assert_msg (c.done == 1 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
}
END_TEST


// Pairs of 'exp' in state 2 (done), as the store says.
static int
s_done_of (const char *exp)
{
    return (int) tu_farm_sql (&s_farm,
                              "SELECT count(*) FROM pairs p JOIN experiments e ON e.id = "
                              "p.experiment WHERE e.name = '%s' AND p.state = 2",
                              exp);
}

// Sets waiting for an agent when the broker is killed come back whole
// after its restart (their four frames, the experiment's rule, camera
// folders and rig from the store); a replay of the experiment pairs its
// files into the same sets and computes them again with the source's rig.
START_TEST (stereo_sets_survive_a_broker_restart_and_a_replay_computes_them_again)
{
    s_stereo_experiment ("left,right");
    char out[65536];
    int rc;
    mkdir (tu_path (s_farm.dir, "data/exp1/left"), 0755);
    mkdir (tu_path (s_farm.dir, "data/exp1/right"), 0755);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    s_land_into ("left", "right", 1, 3, 0);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 200 && (c.files < 12 || c.pending < 3); i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_msg (c.files == 12 && c.pending == 3, "files %lld pending %lld",
                   (long long) c.files, (long long) c.pending);
    tu_stop (s_farm.broker, SIGKILL, 5);
    tu_farm_start_broker (&s_farm);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    c = tu_farm_wait_done (&s_farm, 3, 120);
    ck_assert_msg (c.done == 3 && c.failed == 0, "done %lld failed %lld (see agent1.log)",
                   (long long) c.done, (long long) c.failed);
    for (int i = 1; i <= 3; i++)
        s_check_result ("exp1", i);
    rc = s_pivctl (out, sizeof out, "replay", "exp1", "--as", "again", "--speed", "max", NULL);
    ck_assert_msg (rc == 0, "pivctl replay: %d: %s", rc, out);
    for (int i = 0; i < 1200 && s_done_of ("again") < 3; i++)
        usleep (100000);
    ck_assert_int_eq (s_done_of ("again"), 3);
    for (int i = 1; i <= 3; i++)
        s_check_result ("again", i);
}
END_TEST

// The next message on a feedback subscription (waiting up to 180 s), parsed
// (caller destroys).
static jdoc_t *
s_next_feedback (zsock_t *sub)
{
    zpoller_t *poller = zpoller_new (sub, NULL);
    ck_assert_msg (zpoller_wait (poller, 180000) == sub, "no feedback message");
    zpoller_destroy (&poller);
    char *topic = zstr_recv (sub), *json = zstr_recv (sub);
    jdoc_t *doc = json ? jdoc_parse (json, NULL, 0) : NULL;
    ck_assert_msg (doc, "feedback: %s", json ? json : "(none)");
    zstr_free (&topic);
    zstr_free (&json);
    return doc;
}

// Exports exp1 in 'units' (px or si) into <dir>/export-<units>-<set> and
// reads set 'set''s file into *v.
static void
s_exported (const char *units, int set, s_vectors_t *v)
{
    char dir[4200], out[8192], file[8400];
    snprintf (dir, sizeof dir, "%s/export-%s-%d", s_farm.dir, units, set);
    int rc = s_pivctl (out, sizeof out, "export", "exp1", "--format", "txt", "--units", units,
                       "-o", dir, NULL);
    ck_assert_msg (rc == 0, "pivctl export: %d: %s", rc, out);
    snprintf (file, sizeof file, "%s/s_%04d.txt", dir, set);
    s_read_export (file, v);
}

// The mean u of the vectors of v inside the box, and how many (*n).
static double
s_box_mean (const s_vectors_t *v, const double box[4], int *n)
{
    double sum = 0;
    *n = 0;
    for (int k = 0; k < v->n; k++)
        if (v->x[k] >= box[0] && v->x[k] <= box[2] && v->y[k] >= box[1] && v->y[k] <= box[3]) {
            sum += v->u[k];
            (*n)++;
        }
    return *n ? sum / *n : NAN;
}

// The x halfway between the two middle columns of v's grid (a vector
// never lies on it) and the field's bounds: half the field lies left.
static double
s_middle_x (const s_vectors_t *v, double bounds[4])
{
    bounds[0] = bounds[1] = INFINITY, bounds[2] = bounds[3] = -INFINITY;
    for (int k = 0; k < v->n; k++) {
        bounds[0] = fmin (bounds[0], v->x[k]), bounds[2] = fmax (bounds[2], v->x[k]);
        bounds[1] = fmin (bounds[1], v->y[k]), bounds[3] = fmax (bounds[3], v->y[k]);
    }
    double mid = (bounds[0] + bounds[2]) / 2, below = -INFINITY, above = INFINITY;
    for (int k = 0; k < v->n; k++) {
        if (v->x[k] <= mid)
            below = fmax (below, v->x[k]);
        else
            above = fmin (above, v->x[k]);
    }
    return (below + above) / 2;
}

// Sets exp1's feedback ROI 'roi' (pivctl shows it in 'shown'), lands set
// 2's frames as set 2 + shift and waits until 'done' sets are: the value
// of its feedback message (whose roi_units is 'units'), its n in *n.
static double
s_roi_value (zsock_t *sub, const char *roi, const char *shown, const char *units, int shift,
             int done, double *n)
{
    char out[8192], unit[16];
    int rc = s_pivctl (out, sizeof out, "feedback", "set", roi, "-e", "exp1", NULL);
    snprintf (unit, sizeof unit, " %s\n", shown);
    ck_assert_msg (rc == 0 && strstr (out, unit), "%s: %d: %s", roi, rc, out);
    printf ("%s", out);
    s_land_into ("cam1", "cam2", 2, 2, shift);
    jdoc_t *doc = s_next_feedback (sub);
    ck_assert_str_eq (jdoc_string (doc, "$.roi_units"), units);
    double value = jdoc_number (doc, NAN, "$.value");
    *n = jdoc_number (doc, NAN, "$.n");
    jdoc_destroy (&doc);
    tu_counts_t c = tu_farm_wait_done (&s_farm, done, 180);
    ck_assert_int_eq ((int) c.done, done);
    return value;
}

// The feedback ROI in the experiment's units (issue 26): a calibrated
// stereo experiment's ROI typed in mm takes the vectors whose physical
// positions lie inside (the export's, in m), the same pixel box gives the
// same value on the same frames, a bad unit is refused by name, and an
// uncalibrated experiment's mm ROI gives no value. The ROI survives a
// broker restart in its unit.
START_TEST (a_feedback_roi_in_mm_takes_the_vectors_at_those_physical_positions)
{
    s_stereo_experiment ("cam1,cam2");
    char out[65536];
    int rc = s_pivctl (out, sizeof out, "feedback", "set", "roi=1,2,3,4in", "-e", "exp1", NULL);
    ck_assert_msg (rc != 0 && strstr (out, "unknown length unit 'in'") && strstr (out, "roi"),
                   "roi=1,2,3,4in: %d: %s", rc, out);
    // exp2: planar and never calibrated; its ROI in mm is accepted, shown in mm.
    rc = s_pivctl (out, sizeof out, "feedback", "set", "roi=0,0,5,5mm", "-e", "exp2", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "x 0 .. 5, y 0 .. 5 mm"), "exp2: %d: %s", rc, out);
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/publish", s_farm.dir);
    zsock_t *sub1 = zsock_new_sub (endpoint, "feedback.exp1/");
    zsock_t *sub2 = zsock_new_sub (endpoint, "feedback.exp2/");
    ck_assert (sub1 && sub2);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    mkdir (tu_path (s_farm.dir, "data/exp1/cam1"), 0755);
    mkdir (tu_path (s_farm.dir, "data/exp1/cam2"), 0755);
    mkdir (tu_path (s_farm.dir, "data/exp2"), 0755);
    usleep (200000);
    // Set 1 over the whole field; exp2's pair (camera 1's frames of set 1).
    s_land (1, 1);
    for (int k = 0; k < 2; k++) {
        char from[4200], to[4200];
        snprintf (from, sizeof from, "%s/src/cam1/s_0001_%c.tif", s_farm.dir, k ? 'b' : 'a');
        snprintf (to, sizeof to, "%s/data/exp2/p_0001_%c.tif", s_farm.dir, k ? 'b' : 'a');
        size_t len;
        char *bytes = tu_slurp (from, &len);
        ck_assert (bytes != NULL);
        tu_spit (to, bytes, len);
        free (bytes);
    }
    jdoc_t *doc = s_next_feedback (sub2);
    printf ("exp2 (no calibration), roi in mm: n %g, value %g, calibrated %d\n",
            jdoc_number (doc, NAN, "$.n"), jdoc_number (doc, NAN, "$.value"),
            jdoc_bool (doc, 1, "$.calibrated"));
    ck_assert (jdoc_number (doc, NAN, "$.n") == 0 && isnan (jdoc_number (doc, NAN, "$.value")));
    ck_assert_str_eq (jdoc_string (doc, "$.roi_units"), "m");
    jdoc_destroy (&doc);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "its roi is in metres", 5000));
    doc = s_next_feedback (sub1);
    ck_assert (jdoc_length (doc, "$.roi") < 0 || jdoc_length (doc, "$.roi") == 0);
    jdoc_destroy (&doc);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 1, 180);
    ck_assert_int_eq ((int) c.done, 1);

    // The field's physical extent from the export: the ROI is its left
    // half (x below the middle, cut between two columns), every y.
    s_vectors_t *si = malloc (sizeof *si), *px = malloc (sizeof *px);
    ck_assert (si && px);
    s_exported ("si", 1, si);
    double bounds[4], cut = s_middle_x (si, bounds);
    double box[4] = {bounds[0] - 1e-3, bounds[1] - 1e-3, cut, bounds[3] + 1e-3};
    char roi[256];
    snprintf (roi, sizeof roi, "roi=%.9g,%.9g,%.9g,%.9gmm", box[0] * 1e3, box[1] * 1e3,
              box[2] * 1e3, box[3] * 1e3);
    // The same box in px: the px export's vectors, the cut between the same columns.
    s_exported ("px", 1, px);
    double pbounds[4], pcut = s_middle_x (px, pbounds);
    double pbox[4] = {pbounds[0] - 1, pbounds[1] - 1, pcut, pbounds[3] + 1};
    char proi[256];
    snprintf (proi, sizeof proi, "roi=%.9g,%.9g,%.9g,%.9g", pbox[0], pbox[1], pbox[2], pbox[3]);
    printf ("field x %.4g .. %.4g, y %.4g .. %.4g m: %s; in px %s\n", bounds[0], bounds[2],
            bounds[1], bounds[3], roi, proi);
    // Set 2 under the mm ROI, then its frames again (set 12) under the px one.
    double n_mm, value_mm = s_roi_value (sub1, roi, "mm", "m", 0, 2, &n_mm);
    double n_px, value_px = s_roi_value (sub1, proi, "px", "px", 10, 3, &n_px);

    // Expected: the mean u (m/s) of set 2's exported vectors in the box.
    int n_si, n_pxbox;
    s_exported ("si", 2, si);
    double expected = s_box_mean (si, box, &n_si);
    s_exported ("px", 12, px);
    s_box_mean (px, pbox, &n_pxbox);
    printf ("roi in mm: n %g, mean u %.7g m/s; in px: n %g, mean u %.7g m/s; expected from the "
            "export: n %d (of %d), %.7g m/s\n",
            n_mm, value_mm, n_px, value_px, n_si, si->n, expected);
    ck_assert_msg (n_si > si->n / 3 && n_si < 2 * si->n / 3, "the box holds %d of %d", n_si,
                   si->n);
    ck_assert_int_eq ((int) n_mm, n_si);
    ck_assert_int_eq ((int) n_px, n_pxbox);
    ck_assert_int_eq ((int) n_px, n_si);
    ck_assert_msg (fabs (value_mm - expected) <= 1e-5 * fabs (expected), "%.9g vs %.9g",
                   value_mm, expected);
    ck_assert_msg (fabs (value_px - value_mm) <= 1e-5 * fabs (expected), "%.9g vs %.9g",
                   value_px, value_mm);

    // Back to mm; a broker restarted shows it as set.
    rc = s_pivctl (out, sizeof out, "feedback", "set", roi, "-e", "exp1", NULL);
    ck_assert_msg (rc == 0, "%s: %d: %s", roi, rc, out);
    char before[4096];
    snprintf (before, sizeof before, "%s", strstr (out, "  roi "));
    tu_stop (s_farm.broker, SIGTERM, 10);
    tu_farm_start_broker (&s_farm);
    rc = s_pivctl (out, sizeof out, "feedback", "show", "-e", "exp1", NULL);
    ck_assert_msg (rc == 0 && strstr (out, " mm\n"), "after a restart: %d: %s", rc, out);
    ck_assert_msg (strncmp (strstr (out, "  roi "), before, strcspn (before, "\n")) == 0,
                   "before: %s, after: %s", before, out);
    free (si);
    free (px);
    zsock_destroy (&sub1);
    zsock_destroy (&sub2);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("stereo_farm");
    TCase *tc = tcase_create ("farm");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 600);
    tcase_add_test (tc, stereo_sets_are_done_exactly_once_when_an_agent_dies_mid_task_with_their_w);
    tcase_add_test (tc, a_stereo_set_without_a_rig_fails_saying_how_to_attach_one);
    tcase_add_test (tc, stereo_sets_survive_a_broker_restart_and_a_replay_computes_them_again);
    tcase_add_test (tc, a_feedback_roi_in_mm_takes_the_vectors_at_those_physical_positions);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
