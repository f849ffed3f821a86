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
// first, then renamed into place.
static void
s_land_into (const char *folder1, const char *folder2, int first, int last)
{
    for (int i = first; i <= last; i++)
        for (int k = 0; k < 4; k++) {
            const char *folder = k < 2 ? folder1 : folder2;
            char name[64], from[4200], tmp[4200], to[4200];
            snprintf (name, sizeof name, "s_%04d_%c.tif", i, k % 2 ? 'b' : 'a');
            snprintf (from, sizeof from, "%s/src/cam%d/%s", s_farm.dir, 1 + k / 2, name);
            snprintf (to, sizeof to, "%s/data/exp1/%s/%s", s_farm.dir, folder, name);
            snprintf (tmp, sizeof tmp, "%s/data/exp1/%s/.%s.part", s_farm.dir, folder, name);
            size_t len;
            char *bytes = tu_slurp (from, &len);
            ck_assert_msg (bytes != NULL, "cannot read '%s'", from);
            tu_spit (tmp, bytes, len);
            free (bytes);
            ck_assert (rename (tmp, to) == 0);
        }
}

static void
s_land (int first, int last)
{
    s_land_into ("cam1", "cam2", first, last);
}

// An agent of its own configuration whose processor waits for a gate that
// never opens: it holds the task it takes until it is killed.
static int
s_start_held_agent (void)
{
    char gate[4200], script[8192], victim[4200];
    snprintf (gate, sizeof gate, "%s", tu_path (s_farm.dir, "gate"));
    snprintf (script, sizeof script,
              "#!/bin/sh\nwhile [ ! -e '%s' ]; do sleep 0.05; done\necho held > \"$3\"\n", gate);
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
    char *text = tu_slurp (file, NULL);
    ck_assert_msg (text != NULL, "no export '%s': %s", file, out);
    int cu = s_column (text, "u"), cv = s_column (text, "v"), cw = s_column (text, "w"),
        cf = s_column (text, "flags");
    ck_assert_msg (cu >= 0 && cv >= 0 && cf >= 0, "%s: no column line", file);
    double sum[3] = {0, 0, 0};
    int n = 0;
    for (char *save, *line = strtok_r (text, "\n", &save); line;
         line = strtok_r (NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        double v[16];
        int got = 0;
        for (char *p = line, *end; got < 16; p = end, got++) {
            v[got] = strtod (p, &end);
            if (end == p)
                break;
        }
        if (got > cf && v[cf] == 0) {
            sum[0] += v[cu], sum[1] += v[cv], sum[2] += cw >= 0 && got > cw ? v[cw] : 0;
            n++;
        }
    }
    free (text);
    ck_assert_msg (n > 100, "%s: %d valid vectors", file, n);
    double dt = S_DT_MS * 1e-3;  // mm per frame / dt = 1e-3 m / dt per s
    printf ("export txt si: mean u %.4f v %.4f m/s (truth %.4f %.4f)\n", sum[0] / n,
            sum[1] / n, S_U * 1e-3 / dt, S_V * 1e-3 / dt);
    ck_assert_msg (cw >= 0, "%s: no w column", file);
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
    s_land_into ("left", "right", 1, 3);
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
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
