// test_ensemble_farm.c — ensemble correlation as a farm job (issue 27):
// the real watcher, broker and two agents on ipc:// sockets, the job
// started and followed with the real pivctl, its field exported as a user
// does; an agent SIGKILLed in the middle of a chunk changes the ensemble
// field by nothing, no pair is counted twice, and a bad request or a bad
// partial is refused with its reason while the farm goes on.

#include "common/jdoc.h"
#include "common/proto.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <sqlite3.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_PAIRS 24         // pairs landed: three chunks of eight
#define S_U 3.3            // the synthetic flow (tu_farm_render), px per frame
#define S_V -1.7

#define s_farm tu_the_farm  // each test's farm (tu_farm_setup, tu_farm_teardown)

// pivctl with the arguments: its exit status, its output in out.
#define s_pivctl(out, len, ...) tu_farm_pivctl (&s_farm, out, len, __VA_ARGS__)

// The farm with S_PAIRS pairs of the uniform flow done: broker, watcher,
// agents 'a1' and 'a2' (one thread each).
static void
s_farm_with_pairs_done (void)
{
    tu_farm_render (&s_farm, S_PAIRS, "e");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "a2");
    tu_farm_land (&s_farm, "e", 1, S_PAIRS, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, S_PAIRS, 120);
    ck_assert_msg (c.done == S_PAIRS, "done %lld of %d", (long long) c.done, S_PAIRS);
}

// The farm with two pairs pending (no agent): broker and watcher.
static void
s_farm_with_pairs_pending (void)
{
    tu_farm_render (&s_farm, 2, "e");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_land (&s_farm, "e", 1, 2, 0);
    for (int i = 0; i < 100 && tu_farm_counts (&s_farm).pending < 2; i++)
        usleep (50000);
}

// The state of exp1's latest job as 'pivctl ensemble exp1 --status'
// reports it, waiting up to timeout_s while it runs: its JSON (caller
// destroys).
static jdoc_t *
s_wait_job (int64_t job, int timeout_s)
{
    char out[8192];
    for (int i = 0; i < timeout_s * 10; i++) {
        int rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--status", "--json", NULL);
        ck_assert_msg (rc == 0, "status: %d: %s", rc, out);
        jdoc_t *doc = jdoc_parse (out, NULL, 0);
        ck_assert_msg (doc != NULL, "not JSON: %s", out);
        const char *state = jdoc_string (doc, "$.ensemble.state");
        if ((int64_t) jdoc_number (doc, -1, "$.ensemble.job") == job && state
            && strcmp (state, "running") != 0)
            return doc;
        jdoc_destroy (&doc);
        usleep (100000);
    }
    ck_abort_msg ("ensemble job %lld still running after %d s: %s", (long long) job, timeout_s,
                  out);
    return NULL;
}

// Starts a job of exp1 (the words after 'ensemble exp1'): its id.
static int64_t
s_start_job (const char *first, ...)
{
    char out[8192];
    const char *words[16] = {"ensemble", "exp1"};
    int n = 2;
    va_list ap;
    va_start (ap, first);
    for (const char *w = first; w && n < 13; w = va_arg (ap, const char *))
        words[n++] = w;
    va_end (ap);
    words[n++] = "--json";
    words[n] = NULL;
    int rc = s_pivctl (out, sizeof out, words[0], words[1], words[2], words[3], words[4],
                       words[5], words[6], words[7], words[8], words[9], words[10], words[11],
                       words[12], NULL);
    ck_assert_msg (rc == 0, "ensemble: %d: %s", rc, out);
    jdoc_t *doc = jdoc_parse (out, NULL, 0);
    ck_assert_msg (doc != NULL, "not JSON: %s", out);
    int64_t job = (int64_t) jdoc_number (doc, -1, "$.ensemble.job");
    ck_assert_msg (job > 0, "no job in %s", out);
    jdoc_destroy (&doc);
    return job;
}

// An exported ensemble field (txt): its columns x y u v flags peak_ratio uu
// vv uv, row after row.
typedef struct {
    int n;
    double *col[9];
} s_table_t;

static s_table_t
s_export (const char *name, const char *units)
{
    char out[8192];
    const char *path = tu_path (s_farm.dir, name);
    int rc = s_pivctl (out, sizeof out, "export", "exp1", "--ensemble", "-o", path, "--units",
                       units, NULL);
    ck_assert_msg (rc == 0, "export: %d: %s", rc, out);
    char *text = tu_slurp (path, NULL);
    ck_assert_ptr_nonnull (text);
    ck_assert_msg (strstr (text, "x y u v flags peak_ratio uu vv uv\n"),
                   "no column line in %.400s", text);
    s_table_t t = {0};
    for (int c = 0; c < 9; c++)
        t.col[c] = calloc (100000, sizeof (double));
    for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n")) {
        double v[9];
        if (line[0] == '#' || sscanf (line, "%lf %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1],
                                      &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8])
                                  != 9)
            continue;
        ck_assert (t.n < 100000);
        for (int c = 0; c < 9; c++)
            t.col[c][t.n] = v[c];
        t.n++;
    }
    free (text);
    ck_assert_msg (t.n > 0, "no vectors in '%s'", path);
    return t;
}

// The status page of exp1 (pivfarm.cgi, GET) as ?format=json, or as HTML
// into 'html' (size len): the JSON parsed (caller destroys).
static jdoc_t *
s_page (char *html, size_t len)
{
    static char out[1 << 21];
    setenv ("PIVFARM_CONF", s_farm.conf, 1);
    setenv ("REQUEST_METHOD", "GET", 1);
    char *argv[] = {(char *) tu_bin ("pivfarm.cgi"), NULL};
    setenv ("QUERY_STRING", "exp=exp1", 1);
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 0);
    snprintf (html, len, "%s", out);
    setenv ("QUERY_STRING", "exp=exp1&format=json", 1);
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 0);
    char *body = strstr (out, "\r\n\r\n");
    ck_assert_ptr_nonnull (body);
    jdoc_t *doc = jdoc_parse (body + 4, NULL, 0);
    ck_assert_msg (doc != NULL, "%.300s", body);
    return doc;
}

static void
s_table_free (s_table_t *t)
{
    for (int c = 0; c < 9; c++)
        free (t->col[c]);
}

// The ensemble field exported as Tecplot, VTK and MAT, read back by real
// readers (python3 vtk, scipy.io.loadmat; Tecplot's ASCII zone by its
// VARIABLES line), against the txt export (argv[1], si) to its 7 digits
// (the same stresses, NaN at uu[0] and the last 100 uv, as
// s_export_formats_read_back makes them):
// u, v, flags, peak_ratio, uu, vv, uv, NaN where the txt has nan; the
// stresses' unit named; argv[5], the MAT file in px: u'v' turned by y up.
static const char *s_formats_check =
    "import sys, numpy as np, scipy.io, vtk\n"
    "txt = np.loadtxt(sys.argv[1], comments='#')  # x y u v flags peak_ratio uu vv uv\n"
    "n = len(txt); names = ('u', 'v', 'flags', 'peak_ratio', 'uu', 'vv', 'uv')\n"
    "ref = {k: txt[:, c + 2] for c, k in enumerate(names)}\n"
    "nan_uu = int(np.isnan(ref['uu']).sum()); nan_uv = int(np.isnan(ref['uv']).sum())\n"
    "assert np.isnan(ref['uu'][0]) and np.isnan(ref['uv'][-100:]).all(), (nan_uu, nan_uv)\n"
    "def same(name, a, b, where=None):\n"
    "    a = np.asarray(a, float).ravel(); b = np.asarray(b, float).ravel()\n"
    "    assert a.shape == b.shape, (name, a.shape, b.shape)\n"
    "    if where is not None: a, b = a[where], b[where]\n"
    "    assert np.array_equal(np.isnan(a), np.isnan(b)), (name, 'nan', np.isnan(a).sum(), np.isnan(b).sum())\n"
    "    ok = ~np.isnan(b)\n"
    "    tol = 2e-6 * np.nanmax(abs(b)) if ok.any() else 0\n"
    "    assert ok.any() and np.max(abs(a[ok] - b[ok])) <= tol, (name, np.max(abs(a[ok] - b[ok])), tol)\n"
    "# Tecplot: '#' header lines, TITLE, VARIABLES, ZONE I=, J=, then the rows\n"
    "lines = open(sys.argv[2]).read().splitlines()\n"
    "head = [l for l in lines if l.startswith('#')]\n"
    "assert any('uu, vv, uv' in l and 'in m^2/s^2' in l for l in head), head\n"
    "var = [l for l in lines if l.startswith('VARIABLES')][0]\n"
    "cols = [v.strip().strip('\"') for v in var.split('=', 1)[1].split(',')]\n"
    "zone = [i for i, l in enumerate(lines) if l.startswith('ZONE')][0]\n"
    "assert 'I=' in lines[zone] and 'F=POINT' in lines[zone], lines[zone]\n"
    "rows = np.array([[float(t) for t in l.split()] for l in lines[zone + 1:] if l.strip()])\n"
    "assert rows.shape == (n, len(cols)), (rows.shape, cols)\n"
    "assert cols[-3:] == ['uu', 'vv', 'uv'] and 'vorticity' in cols, cols\n"
    "for c, k in enumerate(('x', 'y') + names): same('tecplot ' + k, rows[:, cols.index(k)], txt[:, c])\n"
    "# VTK: velocity (NaN at flag 2), the stresses as scalars, their unit in the title\n"
    "r = vtk.vtkStructuredGridReader(); r.SetFileName(sys.argv[3])\n"
    "r.ReadAllScalarsOn(); r.ReadAllVectorsOn(); r.Update()\n"
    "g = r.GetOutput(); pd = g.GetPointData()\n"
    "a = {pd.GetArrayName(i): pd.GetArray(i) for i in range(pd.GetNumberOfArrays())}\n"
    "assert g.GetNumberOfPoints() == n and {'velocity', 'uu', 'vv', 'uv', 'flags'} <= set(a), sorted(a)\n"
    "assert 'm^2/s^2' in r.GetHeader(), r.GetHeader()\n"
    "vel = np.array([a['velocity'].GetTuple3(k) for k in range(n)])\n"
    "good = ref['flags'] < 2\n"
    "same('vtk u', vel[:, 0], ref['u'], good); same('vtk v', vel[:, 1], ref['v'], good)\n"
    "assert np.isnan(vel[~good, :2]).all()\n"
    "for k in ('uu', 'vv', 'uv', 'flags', 'peak_ratio'):\n"
    "    same('vtk ' + k, [a[k].GetTuple1(i) for i in range(n)], ref[k])\n"
    "pts = np.array([g.GetPoint(k)[:2] for k in range(n)])\n"
    "same('vtk x', pts[:, 0], txt[:, 0]); same('vtk y', pts[:, 1], txt[:, 1])\n"
    "# MAT: u, v [ny nx 1], the stresses [ny nx], units named\n"
    "m = scipy.io.loadmat(sys.argv[4]); ny, nx = m['uu'].shape; assert nx * ny == n\n"
    "assert m['u'].shape[:2] == (ny, nx) and m['uu'].dtype == np.float32, m['u'].shape\n"
    "un = m['units'][0, 0]\n"
    "assert [str(un[k][0]) for k in ('u', 'uu', 'vv', 'uv', 'x')] == ['m/s'] + ['m^2/s^2'] * 3 + ['m'], un\n"
    "for k in names: same('mat ' + k, m[k][:, :, 0] if m[k].ndim == 3 else m[k], ref[k])\n"
    "X, Y = np.meshgrid(m['x'][0], m['y'][:, 0]); same('mat x', X, txt[:, 0]); same('mat y', Y, txt[:, 1])\n"
    "# In px the stresses are px^2; 0.1 mm/px, 1 ms, y up: x 0.01, u'v' turned\n"
    "p = scipy.io.loadmat(sys.argv[5])\n"
    "assert str(p['units'][0, 0]['uu'][0]) == 'px^2/frame^2'\n"
    "same('px uu', p['uu'] * 0.01, m['uu']); same('px uv', -p['uv'] * 0.01, m['uv'])\n"
    "print('ok', n, 'vectors,', nan_uu, 'without uu,', nan_uv, 'without uv,', int((~good).sum()), 'flagged')\n";

// Runs one SQL statement on the farm's store, read-write (the test's
// stand-in for what the store can hold); 0 or -1.
static int
s_store_exec (const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2 (tu_path (s_farm.dir, "farm.db"), &db, SQLITE_OPEN_READWRITE, NULL)
                     == SQLITE_OK
                 && sqlite3_busy_timeout (db, 5000) == SQLITE_OK
                 && sqlite3_exec (db, sql, NULL, NULL, NULL) == SQLITE_OK
             ? 0
             : -1;
    sqlite3_close (db);
    return rc;
}

// After a job: every format of the export, read back. First the latest
// job's stresses lose what a job can leave unmeasured: u'u' at the first
// window (NaN) and the last 100 floats (u'v' of the last windows: a short
// blob reads as NaN), so that NaN is seen to stay NaN.
static void
s_export_formats_read_back (void)
{
    char out[8192], paths[5][4096];
    ck_assert_int_eq (s_store_exec ("UPDATE ensemble_jobs SET stress = X'0000C07F' || "
                                    "substr (stress, 5, length (stress) - 404) WHERE id = "
                                    "(SELECT max (id) FROM ensemble_jobs)"),
                      0);
    static const char *const formats[5] = {"txt", "tecplot", "vtk", "mat", "mat"};
    static const char *const files[5] = {"ensemble_nan.txt", "ensemble.dat", "ensemble.vtk",
                                         "ensemble.mat", "ensemble_px.mat"};
    for (int f = 0; f < 5; f++) {
        snprintf (paths[f], sizeof paths[f], "%s", tu_path (s_farm.dir, files[f]));
        int rc = s_pivctl (out, sizeof out, "export", "exp1", "--ensemble", "--format",
                           formats[f], "-o", paths[f], "--units", f == 4 ? "px" : "si", NULL);
        ck_assert_msg (rc == 0 && strstr (out, "exported the ensemble field of exp1"),
                       "%s: %d: %s", formats[f], rc, out);
    }
    const char *script = tu_path (s_farm.dir, "formats.py");
    tu_spit (script, s_formats_check, strlen (s_formats_check));
    char *argv[] = {"/usr/bin/python3", (char *) script, paths[0], paths[1], paths[2], paths[3],
                    paths[4], NULL};
    static char said[1 << 16];
    int rc = tu_run (argv, said, sizeof said, 120);
    ck_assert_msg (rc == 0 && strstr (said, "ok"), "read back: %s", said);
    printf ("  ensemble export read back (Tecplot, python3 vtk, scipy.io.loadmat): %s", said);
    // A format that does not exist is named with the ones that do.
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--ensemble", "--format", "csv", "-o",
                   tu_path (s_farm.dir, "e.csv"), NULL);
    ck_assert_msg (rc == 2 && strstr (out, "bad --format 'csv': txt, tecplot, vtk, hdf5 or mat"),
                   "%d: %s", rc, out);
}

START_TEST (an_ensemble_of_a_uniform_shift_recovers_it_counting_each_pair_once)
{
    s_farm_with_pairs_done ();
    int64_t job = s_start_job ("--window", "8", NULL);
    jdoc_t *doc = s_wait_job (job, 120);
    ck_assert_str_eq (jdoc_string (doc, "$.ensemble.state"), "done");
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.pairs"), S_PAIRS);
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.counted"), S_PAIRS);
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.window"), 8);
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.chunks_done"),
                      (int) jdoc_number (doc, -2, "$.ensemble.chunks"));
    printf ("ensemble job of %d pairs, %g passes of %g chunk(s), on 2 agents of 1 thread: "
            "%.2f s from start to field\n",
            S_PAIRS, jdoc_number (doc, NAN, "$.ensemble.passes"),
            jdoc_number (doc, NAN, "$.ensemble.chunks"),
            (jdoc_number (doc, NAN, "$.ensemble.finished_ns")
             - jdoc_number (doc, NAN, "$.ensemble.created_ns")) / 1e9);
    jdoc_destroy (&doc);
    // Every chunk of every pass recorded once: S_PAIRS pairs a pass, no more.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM ensemble_pairs WHERE job = %lld",
                                   (long long) job),
                      S_PAIRS);
    // The mean of the windows away from the edges is the shift.
    s_table_t t = s_export ("ensemble.txt", "px");
    double su = 0, sv = 0, suu = 0;
    int n = 0, nuu = 0;
    for (int k = 0; k < t.n; k++)
        if (t.col[4][k] == 0 && t.col[0][k] > 16 && t.col[0][k] < 240 && t.col[1][k] > 16
            && t.col[1][k] < 240) {
            su += t.col[2][k];
            sv += t.col[3][k];
            n++;
            if (isfinite (t.col[6][k])) {
                suu += fabs (t.col[6][k]);
                nuu++;
            }
        }
    printf ("  u'u' measured at %d of %d inner windows, mean |u'u'| %.4f px^2 (a uniform "
            "shift: 0)\n",
            nuu, n, nuu ? suu / nuu : NAN);
    ck_assert_msg (nuu > n / 2 && suu / nuu < 0.1, "u'u' at %d of %d windows, mean |u'u'| %g px^2",
                   nuu, n, nuu ? suu / nuu : NAN);
    ck_assert_msg (n > t.n / 2, "%d valid inner vectors of %d", n, t.n);
    printf ("ensemble of %d pairs, 8 px windows: %d vectors, mean %.4f, %.4f px (truth %.2f, "
            "%.2f)\n",
            S_PAIRS, t.n, su / n, sv / n, S_U, S_V);
    ck_assert_msg (fabs (su / n - S_U) < 0.1 && fabs (sv / n - S_V) < 0.1,
                   "mean %.4f, %.4f px, truth %.2f, %.2f", su / n, sv / n, S_U, S_V);
    // The status page shows it beside the mean of the instantaneous fields.
    static char html[1 << 21];
    jdoc_t *page = s_page (html, sizeof html);
    ck_assert_msg (strstr (html, "id=\"ensemble-card\"") && strstr (html, "id=\"ensemble-field\"")
                       && strstr (html, "ensemble correlation of 24 pairs"),
                   "no ensemble card on the page");
    ck_assert_str_eq (jdoc_string (page, "$.experiment.ensemble.state"), "done");
    ck_assert_int_eq ((int) jdoc_number (page, -1, "$.experiment.ensemble.field.pairs"), S_PAIRS);
    ck_assert_int_eq ((int) jdoc_number (page, -1, "$.experiment.ensemble.field.window"), 8);
    ck_assert_msg (jdoc_length (page, "$.experiment.ensemble.field.vectors") > 0, "no vectors");
    jdoc_destroy (&page);
    s_table_free (&t);

    // Calibrated, the export is in m and m/s (y up: v changes sign), and
    // HDF5 writes the same field.
    char out[8192];
    int rc = s_pivctl (out, sizeof out, "calibrate", "exp1", "--scale", "0.1mm/px", "--dt", "1ms",
                       NULL);
    ck_assert_msg (rc == 0, "%d: %s", rc, out);
    t = s_export ("ensemble_si.txt", "si");
    char *text = tu_slurp (tu_path (s_farm.dir, "ensemble_si.txt"), NULL);
    ck_assert_msg (strstr (text, "u, v in m/s") && strstr (text, "in m^2/s^2"), "%.600s", text);
    free (text);
    su = sv = 0;
    n = 0;
    for (int k = 0; k < t.n; k++)
        if (t.col[4][k] == 0) {
            su += t.col[2][k];
            sv += t.col[3][k];
            n++;
        }
    ck_assert_msg (fabs (su / n - S_U * 0.1) < 0.01 && fabs (sv / n + S_V * 0.1) < 0.01,
                   "mean %.4f, %.4f m/s", su / n, sv / n);
    s_table_free (&t);
    const char *h5 = tu_path (s_farm.dir, "ensemble.h5");
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--ensemble", "--format", "hdf5", "-o", h5,
                   NULL);
    ck_assert_msg (rc == 0, "%d: %s", rc, out);
    size_t len;
    char *bytes = tu_slurp (h5, &len);
    ck_assert_msg (bytes && len > 1000 && memcmp (bytes, "\x89HDF", 4) == 0, "not HDF5");
    ck_assert_msg (memmem (bytes, len, "Reynolds stress u'v'", 20), "no uv dataset");
    // The stresses' units as every other export spells them.
    ck_assert_msg (memmem (bytes, len, "m^2/s^2", 7), "the stresses' units are not m^2/s^2");
    free (bytes);
    s_export_formats_read_back ();
}
END_TEST

START_TEST (an_agent_killed_mid_run_changes_the_ensemble_field_by_nothing)
{
    s_farm_with_pairs_done ();
    // The reference: a run without a kill.
    int64_t job = s_start_job ("--window", "16", "--pairs", "1-24", NULL);
    jdoc_t *doc = s_wait_job (job, 120);
    ck_assert_str_eq (jdoc_string (doc, "$.ensemble.state"), "done");
    jdoc_destroy (&doc);
    s_table_t ref = s_export ("reference.txt", "px");

    // The same job again; agent a1 is SIGKILLed as soon as it holds a chunk
    // of it, and a new agent takes its place.
    job = s_start_job ("--window", "16", "--pairs", "1-24", NULL);
    char mark[64];
    snprintf (mark, sizeof mark, "ensemble job %lld pass", (long long) job);
    ck_assert_msg (tu_farm_log_has (&s_farm, "agent1.log", mark, 60000),
                   "agent a1 never got a chunk of job %lld", (long long) job);
    tu_stop (s_farm.agents[0], SIGKILL, 5);
    s_farm.agents[0] = 0;
    s_farm.agents[2] = tu_farm_start (&s_farm, "pivfarm-agent", "agent3.log", "--id", "a3");
    doc = s_wait_job (job, 120);
    ck_assert_msg (strcmp (jdoc_string (doc, "$.ensemble.state"), "done") == 0, "%s: %s",
                   jdoc_string (doc, "$.ensemble.state"), jdoc_string (doc, "$.ensemble.error"));
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.pairs"), S_PAIRS);
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.counted"), S_PAIRS);
    jdoc_destroy (&doc);
    // The broker saw the death and gave the chunk to another agent.
    ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", "back in the queue", 1000),
                   "the victim's chunk never went back to the queue");
    s_table_t t = s_export ("after_kill.txt", "px");
    ck_assert_int_eq (t.n, ref.n);
    double worst = 0;
    for (int k = 0; k < t.n; k++)
        for (int c = 0; c < 9; c++) {
            double a = t.col[c][k], b = ref.col[c][k];
            if (isnan (a) || isnan (b))
                ck_assert_msg (isnan (a) && isnan (b), "row %d column %d: %g vs %g", k, c, a, b);
            else
                worst = fmax (worst, fabs (a - b));
        }
    printf ("ensemble with an agent killed mid-run vs without: largest difference %g over %d "
            "vectors\n",
            worst, t.n);
    ck_assert_msg (worst <= 1e-6, "largest difference %g", worst);
    s_table_free (&t);
    s_table_free (&ref);
}
END_TEST

START_TEST (a_bad_request_is_refused_naming_what_is_wrong)
{
    s_farm_with_pairs_pending ();
    char out[8192];
    int rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--window", "3", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "window"), "%d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--overlap", "95", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "overlap"), "%d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--pairs", "5-2", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "pairs '5-2'"), "%d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--pairs", "7-9", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "no pairs of 'exp1' in 7-9"), "%d: %s", rc, out);
    // Nothing done yet: the default (the pairs done) has none.
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "no pairs of 'exp1' are done"), "%d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "ensemble", "nosuch", NULL);
    ck_assert_msg (rc != 0 && strstr (out, "no experiment 'nosuch'"), "%d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "export", "exp1", "--ensemble", "-o",
                   tu_path (s_farm.dir, "e.txt"), NULL);
    ck_assert_msg (rc != 0 && strstr (out, "no ensemble field yet"), "%d: %s", rc, out);
    // A job of pending pairs runs; a second one while it does is refused.
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--pairs", "1-2", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "running"), "%d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--pairs", "1-2", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "is running"), "%d: %s", rc, out);
    // No agent: it waits at its first pass, as pivctl status shows.
    rc = s_pivctl (out, sizeof out, "status", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "ensemble job 1 of exp1: pass 1 of 3 (32 px), 0 of 1 "
                                           "chunk(s), 2 pairs"),
                   "%d: %s", rc, out);
}
END_TEST

// A job of exp1's two pairs pending (16 px windows), and a DEALER on the
// work socket for the test to play an agent with (caller destroys).
static zsock_t *
s_job_and_fake_agent (void)
{
    s_farm_with_pairs_pending ();
    char out[8192], endpoint[4200];
    int rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--pairs", "1-2", "--window", "16",
                       NULL);
    ck_assert_msg (rc == 0, "%d: %s", rc, out);
    snprintf (endpoint, sizeof endpoint, "ipc://%s/work", s_farm.dir);
    zsock_t *sock = zsock_new_dealer (endpoint);
    ck_assert_ptr_nonnull (sock);
    return sock;
}

START_TEST (a_bad_partial_fails_its_chunk_naming_the_agent_and_the_job_goes_on)
{
    // A hostile agent: it takes work and answers its chunk with bytes that
    // are no partial sum.
    zsock_t *evil = s_job_and_fake_agent ();
    // First as an agent that does not say 'ensemble' (an older release):
    // with room for more than the two pairs' TASKs, it gets no chunk.
    proto_msg_t hello = {.command = PROTO_HELLO, .name = "evil", .text = "host", .count = 4,
                         .settings = "piv"};
    ck_assert_int_eq (proto_send (&hello, NULL, evil), 0);
    proto_msg_t ready = {.command = PROTO_READY, .count = 4};
    ck_assert_int_eq (proto_send (&ready, NULL, evil), 0);
    proto_msg_t msg = {0};
    char err[512];
    zsock_set_rcvtimeo (evil, 300);
    int tasks = 0;
    for (int i = 0; i < 6; i++) {
        if (proto_recv (evil, NULL, &msg, err, sizeof err) != 0)
            continue;
        for (size_t k = 0; k < proto_count (&msg); k++) {
            ck_assert_msg (proto_at (&msg, k)->command != PROTO_ENSEMBLE,
                           "an agent without the capability got a chunk");
            tasks += proto_at (&msg, k)->command == PROTO_TASK;
        }
        proto_msg_release (&msg);
    }
    ck_assert_int_eq (tasks, 2);
    // Then it says it sums chunks (a HELLO again: its tasks go back, its
    // credit is what it announces): room for the TASKs and the chunk.
    hello.settings = "piv ensemble";
    ck_assert_int_eq (proto_send (&hello, NULL, evil), 0);
    ck_assert_int_eq (proto_send (&ready, NULL, evil), 0);
    zsock_set_rcvtimeo (evil, 10000);
    int got = 0;
    for (int i = 0; i < 50 && !got; i++) {
        proto_msg_release (&msg);
        if (proto_recv (evil, NULL, &msg, err, sizeof err) != 0)
            break;
        for (size_t k = 0; k < proto_count (&msg) && !got; k++)
            if (proto_at (&msg, k)->command == PROTO_ENSEMBLE)
                got = 1;
        // The pending pairs' TASKs go unanswered: the broker takes them back.
    }
    ck_assert_msg (got, "the hostile agent got no ENSEMBLE");
    proto_msg_t *task = NULL;
    for (size_t k = 0; k < proto_count (&msg); k++)
        if (proto_at (&msg, k)->command == PROTO_ENSEMBLE)
            task = proto_at (&msg, k);
    unsigned char junk[64] = "this is no partial sum at all";
    proto_msg_t bad = {.command = PROTO_PARTIAL,
                       .seq = task->seq,
                       .count = task->count,
                       .pair = task->pair,
                       .attempt = task->attempt,
                       .blob = junk,
                       .blob_size = sizeof junk};
    ck_assert_int_eq (proto_send (&bad, NULL, evil), 0);
    ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", "agent 'evil' sent a bad partial",
                                    10000),
                   "the broker did not name the agent of the bad partial");
    proto_msg_release (&msg);
    zsock_destroy (&evil);
    // A real agent finishes the job: the bad partial was not kept.
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    jdoc_t *doc = s_wait_job (1, 120);
    ck_assert_msg (strcmp (jdoc_string (doc, "$.ensemble.state"), "done") == 0, "%s: %s",
                   jdoc_string (doc, "$.ensemble.state"), jdoc_string (doc, "$.ensemble.error"));
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.pairs"), 2);
    jdoc_destroy (&doc);
}
END_TEST

START_TEST (a_standing_ensemble_runs_once_the_run_is_quiet_and_survives_a_restart)
{
    char out[8192];
    tu_farm_render (&s_farm, 8, "e");
    tu_farm_start_broker (&s_farm);
    // Set before the run (the experiment is made for it), quiet for 1 s.
    int rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--auto", "--window", "16", "--idle",
                       "1", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "once quiet for 1 s: 16 px windows"), "%d: %s", rc,
                   out);
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--auto", "--idle", "0", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "idle=0"), "%d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--auto", "--pairs", "1-2", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "takes no --pairs"), "%d: %s", rc, out);
    // The run subtracts a background of its own frames; the ensemble does
    // not (and says so): its record leaves the word out.
    rc = s_pivctl (out, sizeof out, "piv", "exp1", "background=min:4", NULL);
    ck_assert_msg (rc == 0, "%d: %s", rc, out);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "e", 1, 8, 0);
    tu_farm_wait_done (&s_farm, 8, 120);
    // No command: the broker starts job 1 over the 8 pairs once quiet.
    jdoc_t *doc = s_wait_job (1, 60);
    ck_assert_str_eq (jdoc_string (doc, "$.ensemble.state"), "done");
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.pairs"), 8);
    ck_assert_str_eq (jdoc_string (doc, "$.ensemble.asked"), "");
    jdoc_destroy (&doc);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "standing ensemble of 'exp1': quiet", 100));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "ensemble of 'exp1': its background subtraction is not applied",
                                100));
    s_table_t t = s_export ("standing.txt", "px");
    s_table_free (&t);
    char *text = tu_slurp (tu_path (s_farm.dir, "standing.txt"), NULL);
    ck_assert_msg (strstr (text, "piv settings:") && !strstr (text, "background="), "%.800s",
                   text);
    free (text);
    // Covered: no second job while nothing new comes, even after a restart,
    // which keeps the setting.
    tu_stop (s_farm.broker, SIGTERM, 10);
    tu_farm_start_broker (&s_farm);
    sleep (3);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM ensemble_jobs"), 1);
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--status", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "once quiet for 1 s: 16 px windows"), "%d: %s", rc,
                   out);
    rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--no-auto", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "no standing ensemble"), "%d: %s", rc, out);
}
END_TEST

START_TEST (a_chunk_past_its_deadline_on_a_live_agent_goes_to_another)
{
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    task_deadline_ms = 1500\n");
    // An agent that takes its chunk and sits on it, alive (it heartbeats).
    zsock_t *slow = s_job_and_fake_agent ();
    char out[8192], err[512];
    int rc;
    zsock_set_rcvtimeo (slow, 100);
    proto_msg_t hello = {.command = PROTO_HELLO, .name = "slow", .text = "host", .count = 4,
                         .settings = "piv ensemble"};
    proto_msg_t ready = {.command = PROTO_READY, .count = 4};
    ck_assert_int_eq (proto_send (&hello, NULL, slow), 0);
    ck_assert_int_eq (proto_send (&ready, NULL, slow), 0);
    int got = 0;
    for (int i = 0; i < 100 && !got; i++) {
        proto_msg_t msg = {0};
        if (proto_recv (slow, NULL, &msg, err, sizeof err) == 0)
            for (size_t k = 0; k < proto_count (&msg); k++)
                got |= proto_at (&msg, k)->command == PROTO_ENSEMBLE;
        proto_msg_release (&msg);
    }
    ck_assert_msg (got, "the slow agent got no chunk");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    const char *state = NULL;
    jdoc_t *doc = NULL;
    for (int i = 0; i < 300; i++) {
        proto_msg_t beat = {.command = PROTO_HEARTBEAT, .time_ns = zclock_time () * 1000000};
        ck_assert_int_eq (proto_send (&beat, NULL, slow), 0);
        proto_msg_t msg = {0};
        proto_recv (slow, NULL, &msg, err, sizeof err);  // what comes is left unanswered
        proto_msg_release (&msg);
        jdoc_destroy (&doc);
        rc = s_pivctl (out, sizeof out, "ensemble", "exp1", "--status", "--json", NULL);
        doc = rc == 0 ? jdoc_parse (out, NULL, 0) : NULL;
        state = doc ? jdoc_string (doc, "$.ensemble.state") : NULL;
        if (state && strcmp (state, "running") != 0)
            break;
    }
    ck_assert_msg (state && strcmp (state, "done") == 0, "%s: %s", state ? state : "?", out);
    ck_assert_int_eq ((int) jdoc_number (doc, -1, "$.ensemble.counted"), 2);
    jdoc_destroy (&doc);
    ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", "deadline of 2 s passed on agent 'slow'",
                                    1000),
                   "no deadline in the broker's log");
    zsock_destroy (&slow);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("ensemble_farm");
    TCase *tc = tcase_create ("farm");
    tcase_add_checked_fixture (tc, tu_farm_setup, tu_farm_teardown);
    tcase_set_timeout (tc, 600);
    tcase_add_test (tc, an_ensemble_of_a_uniform_shift_recovers_it_counting_each_pair_once);
    tcase_add_test (tc, an_agent_killed_mid_run_changes_the_ensemble_field_by_nothing);
    tcase_add_test (tc, a_bad_request_is_refused_naming_what_is_wrong);
    tcase_add_test (tc, a_bad_partial_fails_its_chunk_naming_the_agent_and_the_job_goes_on);
    tcase_add_test (tc, a_standing_ensemble_runs_once_the_run_is_quiet_and_survives_a_restart);
    tcase_add_test (tc, a_chunk_past_its_deadline_on_a_live_agent_goes_to_another);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
