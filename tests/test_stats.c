// test_stats.c — run statistics and calibrations on a real farm (the
// broker, watcher and agent as processes, synthetic pairs of a known flow):
// every done pair counted once, across a broker killed mid-run; the
// 'calibrate', 'stats' and 'mask' commands on the control socket; the
// feedback in m/s once calibrated.

#include "common/ask.h"
#include "common/config.h"
#include "piv/calib.h"
#include "piv/field.h"
#include "piv/settings.h"
#include "piv/stats.h"
#include "store/store.h"
#include "tests/testutil.h"

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tu_farm_t s_farm;  // the farm of the running test
static tu_farm_t s_ref;   // a second farm of the test, if it runs one (dir NULL: none)

// The flow tu_farm_render draws: uniform, px per frame pair (y down).
#define T_U 3.3
#define T_V -1.7

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
}

static void
s_teardown (void)
{
    tu_farm_release (&s_farm);
    if (s_ref.dir)
        tu_farm_release (&s_ref);
}

// One request on the control socket: its status; the body (caller frees)
// in *body_p, or the refusal's line.
static int
s_ask (const char *line, char **body_p)
{
    config_t cfg;
    char err[1024];
    ck_assert_msg (config_load (&cfg, s_farm.conf, err, sizeof err) == 0, "%s", err);
    int status = 0;
    char *body = NULL;
    ask_result_t rc = ask_once (&cfg, line, 30000, &status, &body, err, sizeof err);
    ck_assert_msg (rc == ASK_OK || rc == ASK_REFUSED, "'%s': %s", line, err);
    *body_p = body ? body : strdup (err);
    return status;
}

// A request that must succeed: its JSON (caller decrefs).
static json_t *
s_json (const char *line)
{
    char *body;
    int status = s_ask (line, &body);
    ck_assert_msg (status == 200, "'%s': %d %s", line, status, body);
    json_error_t jerr;
    json_t *doc = json_loads (body, 0, &jerr);
    ck_assert_msg (doc != NULL, "'%s': not JSON: %s", line, body);
    free (body);
    return doc;
}

// A request that must be refused with 'status' and a line holding 'named'.
static void
s_refused (const char *line, int status, const char *named)
{
    char *body;
    int got = s_ask (line, &body);
    ck_assert_msg (got == status && strstr (body, named), "'%s': %d '%s', expected %d naming %s",
                   line, got, body, status, named);
    free (body);
}

// The broker, the watcher and one agent; 'extra' goes into the broker's
// section of the configuration.
static void
s_start (const char *broker_extra)
{
    if (broker_extra && *broker_extra) {
        char with[512];
        snprintf (with, sizeof with, "    store = ./farm.db\n%s", broker_extra);
        tu_farm_conf_replace (&s_farm, "    store = ./farm.db\n", with);
    }
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
}

// 'stats exp1' once the rebuild is over: its JSON.
static json_t *
s_stats_settled (void)
{
    for (int i = 0; i < 300; i++) {
        json_t *doc = s_json ("stats exp1");
        if (!json_is_true (json_object_get (doc, "rebuilding")))
            return doc;
        json_decref (doc);
        usleep (20000);
    }
    ck_abort_msg ("the statistics of exp1 are still rebuilding");
    return NULL;
}

// Fields counted over every set of a 'stats' reply.
static json_int_t
s_fields (json_t *doc)
{
    json_int_t n = 0;
    json_t *sets = json_object_get (doc, "sets");
    for (size_t i = 0; i < json_array_size (sets); i++)
        n += json_integer_value (json_object_get (json_array_get (sets, i), "fields"));
    return n;
}

// A farm (the broker with 'broker_lines') through n pairs landed at once:
// the settled statistics, which count them all (caller decrefs).
static json_t *
s_run_settled (int n, const char *broker_lines)
{
    tu_farm_render (&s_farm, n, "r");
    s_start (broker_lines);
    tu_farm_land (&s_farm, "r", 1, n, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, n, 120).done, n);
    json_t *doc = s_stats_settled ();
    ck_assert_int_eq (s_fields (doc), n);
    return doc;
}

START_TEST (a_run_counts_every_done_pair_once)
{
    const int n = 6;
    json_t *doc = s_run_settled (n, "");
    json_t *set = json_array_get (json_object_get (doc, "sets"), 0);
    ck_assert_int_eq (json_array_size (json_object_get (doc, "sets")), 1);
    ck_assert_str_eq (json_string_value (json_object_get (set, "calibration")), "none");
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (set, "units"),
                                                          "velocity")),
                      "px/frame");
    ck_assert (json_real_value (json_object_get (set, "valid_fraction")) > 0.9);
    // 6 fields: the uncertainty not known yet (null), none late.
    ck_assert (json_is_null (json_object_get (set, "mean_uncertainty")));
    ck_assert_int_eq (json_integer_value (json_object_get (set, "late")), 0);
    json_decref (doc);
    // Saved by 'stats' itself: every result is marked counted.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT sum (fields) FROM stats"), n);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM uncounted"), 0);
    // An unknown experiment is read as such.
    s_refused ("stats nope", 404, "no experiment 'nope'");
}
END_TEST

// The statistics of every stored field of exp1, recomputed from scratch.
static int
s_recount (void *arg, const store_result_info_t *r)
{
    piv_stats_t **stats = arg;
    char err[256];
    piv_field_t *field = piv_field_decode (r->field, r->field_size, err, sizeof err);
    ck_assert_msg (field != NULL, "%s", err);
    if (!*stats)
        *stats = piv_stats_new (field);
    ck_assert_int_eq (piv_stats_add (*stats, field, NULL), 0);
    piv_field_destroy (&field);
    return 0;
}

static int
s_saved (void *arg, const store_stats_t *row)
{
    piv_stats_t **stats = arg;
    char err[256];
    ck_assert_ptr_null (*stats);  // one set
    *stats = piv_stats_decode (row->state, row->state_size, err, sizeof err);
    ck_assert_msg (*stats != NULL, "%s", err);
    return 0;
}

// The one saved set of 'farm''s store (caller destroys).
static piv_stats_t *
s_saved_of (tu_farm_t *farm)
{
    char err[512];
    store_t *store = store_open_readonly (tu_path (farm->dir, "farm.db"), err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    piv_stats_t *saved = NULL;
    ck_assert_int_eq (store_stats_of (store, 0, s_saved, &saved), 1);
    store_destroy (&store);
    return saved;
}

// broker/stats_uncertainty = 0: the sets are saved as before the
// uncertainty (version 2, 104 bytes a point), their figures without it.
START_TEST (a_farm_without_the_statistics_uncertainty_saves_the_smaller_state)
{
    const int n = 4;
    json_decref (s_run_settled (n, "    stats_uncertainty = 0\n"));
    piv_stats_t *saved = s_saved_of (&s_farm);
    int nx, ny, step, window;
    piv_stats_grid (saved, &nx, &ny, &step, &window);
    ck_assert (!piv_stats_has_uncertainty (saved));
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT length (state) FROM stats"),
                      56 + 104 * nx * ny);
    piv_stats_point_t p;
    piv_stats_point (saved, nx * ny / 2, &p);
    ck_assert (p.count == n && isfinite (p.u_mean) && isnan (p.n_eff));
    piv_stats_destroy (&saved);
}
END_TEST

// The points of two sets that count n fields each on the same grid.
static long
s_points_of_both (const piv_stats_t *a, const piv_stats_t *b, int n)
{
    piv_stats_summary_t sa, sb;
    piv_stats_summary (a, &sa);
    piv_stats_summary (b, &sb);
    ck_assert_int_eq (sa.fields, n);
    ck_assert_int_eq (sb.fields, n);
    int nx, ny, mx, my, step, window;
    piv_stats_grid (a, &nx, &ny, &step, &window);
    piv_stats_grid (b, &mx, &my, &step, &window);
    ck_assert (nx == mx && ny == my);
    return (long) nx * ny;
}

// n pairs k_0001 ... landing 150 ms apart on a farm whose broker has
// 'broker_lines', the broker killed with SIGKILL once 'before' are done:
// the lander's pid, and in *done the pairs done at the kill.
static int
s_kill_mid_run (int n, const char *broker_lines, int before, int64_t *done)
{
    tu_farm_render (&s_farm, n, "k");
    s_start (broker_lines);
    int lander = tu_farm_land_async (&s_farm, "k", 1, n, 150000);
    tu_counts_t c = {0};
    for (int i = 0; i < 600 && c.done < before; i++) {
        usleep (20000);
        c = tu_farm_counts (&s_farm);
    }
    ck_assert_msg (c.done >= before && c.done < n, "done %lld before the kill",
                   (long long) c.done);
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGKILL, 5), 128 + SIGKILL);
    s_farm.broker = 0;
    *done = c.done;
    return lander;
}

// The broker started again after s_kill_mid_run: every pair done, the
// statistics settled, counting each once.
static void
s_resume (int n, int lander)
{
    tu_farm_start_broker (&s_farm);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, n, 180).done, n);
    ck_assert_int_eq (tu_stop (lander, SIGTERM, 5), 0);
    json_t *doc = s_stats_settled ();
    ck_assert_int_eq (s_fields (doc), n);
    json_decref (doc);
}

START_TEST (a_broker_killed_mid_run_neither_loses_nor_repeats_a_sample)
{
    const int n = 16;
    int64_t done;
    int lander = s_kill_mid_run (n, "    stats_ms = 150\n", 5, &done);
    s_resume (n, lander);
    // The saved state against the stored fields counted again.
    char err[512];
    store_t *store = store_open_readonly (tu_path (s_farm.dir, "farm.db"), err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    piv_stats_t *saved = NULL, *again = NULL;
    ck_assert_int_eq (store_stats_of (store, 0, s_saved, &saved), 1);
    ck_assert_int_eq (store_results_of (store, 1, s_recount, &again), n);
    store_destroy (&store);
    long points = s_points_of_both (saved, again, n);
    ck_assert (piv_stats_has_uncertainty (saved)); // broker/stats_uncertainty's default
    for (long k = 0; k < points; k++) {
        piv_stats_point_t p, q;
        ck_assert_int_eq (piv_stats_point (saved, k, &p), 0);
        ck_assert_int_eq (piv_stats_point (again, k, &q), 0);
        ck_assert_int_eq (p.count, q.count);
        if (p.count > 0) {
            ck_assert_double_eq_tol (p.u_mean, q.u_mean, 1e-9);
            ck_assert_double_eq_tol (p.v_mean, q.v_mean, 1e-9);
            ck_assert (isnan (p.n_eff) || (p.n_eff >= 1 && p.n_eff <= p.count));
        }
    }
    piv_stats_destroy (&saved);
    piv_stats_destroy (&again);
}
END_TEST

// The broker saves a set only as often as broker/stats_save_kb_s allows
// (here 1 KiB/s: once, then not for minutes), so a SIGKILL finds most
// results unsaved; after the restart they are counted again from the
// stored fields, and the statistics are those of the same frames run on
// a farm that was never killed, point by point.
START_TEST (a_broker_killed_between_saves_ends_with_the_statistics_of_a_run_without_the_kill)
{
    const int n = 24;
    int64_t done;
    int lander = s_kill_mid_run (n, "    stats_ms = 150\n    stats_save_kb_s = 1\n", 10, &done);
    // Most results were not saved: the budget held the saves back.
    int64_t saved = tu_farm_sql (&s_farm, "SELECT ifnull (sum (fields), 0) FROM stats");
    int64_t unsaved = tu_farm_sql (&s_farm, "SELECT count(*) FROM uncounted");
    ck_assert_msg (saved + 5 <= done && unsaved >= 5,
                   "%lld of %lld results saved before the kill, %lld not", (long long) saved,
                   (long long) done, (long long) unsaved);
    s_resume (n, lander);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM uncounted"), 0);

    // The same frames on a farm never killed (the default budget).
    tu_farm_t *ref = &s_ref;
    tu_farm_init (ref);
    for (int i = 1; i <= n; i++)
        for (int side = 0; side < 2; side++) {
            char name[64], from[4096];
            snprintf (name, sizeof name, "src/k_%04d_%c.tif", i, side ? 'b' : 'a');
            snprintf (from, sizeof from, "%s", tu_path (s_farm.dir, name));
            size_t len;
            char *bytes = tu_slurp (from, &len);
            ck_assert_msg (bytes != NULL, "cannot read '%s'", from);
            tu_spit (tu_path (ref->dir, name), bytes, len);
            free (bytes);
        }
    tu_farm_start_broker (ref);
    ref->watcher = tu_farm_start (ref, "pivfarm-watcher", "watcher.log", NULL, NULL);
    ref->agents[0] = tu_farm_start (ref, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (ref, "k", 1, n, 150000);
    ck_assert_int_eq (tu_farm_wait_done (ref, n, 180).done, n);
    char out[4096];
    ck_assert_msg (tu_farm_pivctl (ref, out, sizeof out, "stats", "exp1", NULL) == 0, "%s", out);
    piv_stats_t *killed = s_saved_of (&s_farm), *never = s_saved_of (ref);
    long points = s_points_of_both (killed, never, n);
    for (long k = 0; k < points; k++) {
        piv_stats_point_t p, q;
        ck_assert_int_eq (piv_stats_point (killed, k, &p), 0);
        ck_assert_int_eq (piv_stats_point (never, k, &q), 0);
        ck_assert_int_eq (p.count, q.count);
        ck_assert_int_eq (p.n_replaced, q.n_replaced);
        if (p.count == 0)
            continue;
        ck_assert_double_eq_tol (p.u_mean, q.u_mean, 1e-9);
        ck_assert_double_eq_tol (p.v_mean, q.v_mean, 1e-9);
        ck_assert_double_eq_tol (p.u_rms, q.u_rms, 1e-9);
        ck_assert_double_eq_tol (p.v_rms, q.v_rms, 1e-9);
        ck_assert_double_eq_tol (p.uv_mean, q.uv_mean, 1e-9);
        ck_assert (isnan (p.vorticity_mean) == isnan (q.vorticity_mean));
        if (!isnan (p.vorticity_mean))
            ck_assert_double_eq_tol (p.vorticity_mean, q.vorticity_mean, 1e-9);
        // n_eff by the lag products, which take the fields in the order
        // they reach the statistics: that order depends on when results
        // arrive (a run without a kill too), and so may n_eff (seen: the
        // same to the bit, 0.3 % and 9 % apart in 24 fields); plausible in
        // both, as the test above asks.
        ck_assert (isnan (p.n_eff) == isnan (q.n_eff));
        ck_assert (isnan (p.n_eff) || (p.n_eff >= 1 && p.n_eff <= p.count));
    }
    piv_stats_destroy (&killed);
    piv_stats_destroy (&never);
}
END_TEST

// n pairs landing 250 ms apart (the first save holds one or two) on a farm
// whose broker has 'broker_lines': the results its saved statistics
// count once they are done, waiting up to 5 s for n - 2 of them.
static int64_t
s_saved_after_run (int n, const char *broker_lines)
{
    tu_farm_render (&s_farm, n, "r");
    s_start (broker_lines);
    tu_farm_land (&s_farm, "r", 1, n, 250000);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, n, 120).done, n);
    int64_t saved = 0;
    for (int i = 0; i < 50 && saved < n - 2; i++) {
        usleep (100000);
        saved = tu_farm_sql (&s_farm, "SELECT ifnull (sum (fields), 0) FROM stats");
    }
    return saved;
}

// broker/stats_save_results bounds what waits unsaved whatever the budget:
// with 1 KiB/s (no save for minutes after the first) and 3 results, the
// store's statistics follow the run 3 results behind at most.
START_TEST (a_set_is_saved_once_stats_save_results_wait_whatever_the_budget)
{
    int64_t saved = s_saved_after_run (8, "    stats_ms = 100\n    stats_save_kb_s = 1\n"
                                          "    stats_save_results = 3\n");
    ck_assert_msg (saved >= 6, "%lld of 8 results saved", (long long) saved);
    ck_assert_int_le (tu_farm_sql (&s_farm, "SELECT count(*) FROM uncounted"), 2);
}
END_TEST

// Where the store keeps no field a restart could count again, the budget
// does not apply: the statistics are saved at every look, as before it.
START_TEST (without_the_fields_stored_the_statistics_are_saved_at_every_look)
{
    int64_t saved = s_saved_after_run (8, "    stats_ms = 100\n    stats_save_kb_s = 1\n"
                                          "    store_fields = none\n");
    ck_assert_msg (saved >= 6, "%lld of 8 results saved", (long long) saved);
}
END_TEST

// The latest "feedback" event's payload of exp1 (caller decrefs).
static json_t *
s_last_feedback (void)
{
    char *payload = tu_farm_sql_text (&s_farm, "SELECT payload FROM events WHERE kind = 'feedback'"
                                               " ORDER BY id DESC LIMIT 1");
    ck_assert_ptr_nonnull (payload);
    json_error_t jerr;
    json_t *doc = json_loads (payload, 0, &jerr);
    ck_assert_msg (doc != NULL, "%s", payload);
    free (payload);
    return doc;
}

START_TEST (a_calibration_set_before_the_first_frame_gives_metres_per_second)
{
    const int n = 3;
    tu_farm_render (&s_farm, n, "c");
    s_start ("");
    // exp1 has no file yet: the settings make it.
    json_t *doc = s_json ("calibrate exp1 scale=0.02mm/px dt=2ms");
    ck_assert (json_is_true (json_object_get (doc, "created")));
    json_t *cal = json_object_get (doc, "calibration");
    ck_assert_str_eq (json_string_value (json_object_get (cal, "source")), "experiment");
    ck_assert (json_is_true (json_object_get (cal, "calibrated")));
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (doc, "units"),
                                                          "velocity")),
                      "m/s");
    json_decref (doc);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind ="
                                            " 'experiment' AND payload LIKE '%%operator%%'"),
                      1);
    // A setpoint in m/s: u = 3.3 px * 2e-5 m/px / 2e-3 s = 0.033 m/s.
    doc = s_json ("feedback set -e exp1 quantity=mean_u setpoint=0.033 kp=1");
    json_decref (doc);
    doc = s_json ("feedback on -e exp1");
    json_decref (doc);
    doc = s_json ("calibrate exp1");
    ck_assert (json_object_get (doc, "created") == NULL);
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (doc, "calibration"),
                                                          "text")),
                      "scale=0.02mm/px dt=2ms origin=0,0 y_axis=up");
    json_decref (doc);
    tu_farm_land (&s_farm, "c", 1, n, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, n, 120).done, n);
    doc = s_stats_settled ();
    ck_assert_int_eq (s_fields (doc), n);
    json_t *set = json_array_get (json_object_get (doc, "sets"), 0);
    ck_assert_ptr_nonnull (strstr (json_string_value (json_object_get (set, "calibration")),
                                   "dt=2ms"));
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (set, "units"),
                                                          "velocity")),
                      "m/s");
    json_decref (doc);
    // The feedback in m/s: y up turns the image's -1.7 px into +0.017 m/s.
    json_t *fb = s_last_feedback ();
    ck_assert (json_is_true (json_object_get (fb, "calibrated")));
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (fb, "units"),
                                                          "velocity")),
                      "m/s");
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (fb, "units"), "rate")),
                      "1/s");
    double u = json_number_value (json_object_get (fb, "mean_u"));
    double v = json_number_value (json_object_get (fb, "mean_v"));
    double out = json_number_value (json_object_get (fb, "output"));
    printf ("calibrated feedback: mean_u %.6f m/s (exact %.6f), mean_v %.6f m/s (exact %.6f), "
            "output %.3g\n", u, T_U * 2e-5 / 2e-3, v, -T_V * 2e-5 / 2e-3, out);
    ck_assert_msg (fabs (u - T_U * 2e-5 / 2e-3) < 0.05 * 2e-5 / 2e-3, "mean_u %g m/s", u);
    ck_assert_msg (fabs (v + T_V * 2e-5 / 2e-3) < 0.05 * 2e-5 / 2e-3, "mean_v %g m/s", v);
    // On the setpoint: the output (kp * error) is within the PIV error.
    ck_assert_msg (fabs (out) < 0.05 * 2e-5 / 2e-3, "output %g", out);
    json_decref (fb);
    // The status carries the calibration and the statistics.
    doc = s_json ("status -e exp1");
    json_t *row = json_array_get (json_object_get (doc, "experiments"), 0);
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (row, "calibration"),
                                                          "source")),
                      "experiment");
    ck_assert_int_eq (json_integer_value (json_object_get (json_object_get (row, "stats"),
                                                           "fields")),
                      n);
    json_decref (doc);
}
END_TEST

START_TEST (bad_calibrations_are_refused_naming_the_key)
{
    const int n = 1;
    tu_farm_render (&s_farm, n, "b");
    s_start ("");
    s_refused ("calibrate exp1 scale=-1mm/px dt=1ms", 400, "scale");
    s_refused ("calibrate exp1 scale=0mm/px dt=1ms", 400, "scale");
    s_refused ("calibrate exp1 scale=0.05furlong/px dt=1ms", 400, "scale");
    s_refused ("calibrate exp1 scale=0.05mm/px dt=abc", 400, "dt");
    s_refused ("calibrate exp1 scale=0.05mm/px", 400, "scale and dt are both needed");
    s_refused ("calibrate exp1 scale=0.05mm/px dt=1ms y_axis=sideways", 400, "y_axis");
    s_refused ("calibrate exp1 speed=3", 400, "speed");
    s_refused ("calibrate exp1 0.05", 400, "KEY=VALUE");
    // Nothing refused made the experiment; a read of it is a 404.
    s_refused ("calibrate exp1", 404, "no experiment 'exp1'");
    // Once a result shows the image (256 x 256), an origin outside it is
    // refused; inside, taken.
    tu_farm_land (&s_farm, "b", 1, n, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, n, 120).done, n);
    json_decref (s_stats_settled ());
    s_refused ("calibrate exp1 scale=0.05mm/px dt=1ms origin=900,10", 400, "origin");
    json_t *doc = s_json ("calibrate exp1 scale=0.05mm/px dt=1ms origin=128,128 y_axis=down");
    json_decref (doc);
    // 'none' goes back to the default (here: not calibrated).
    doc = s_json ("calibrate exp1 none");
    json_t *cal = json_object_get (doc, "calibration");
    ck_assert_str_eq (json_string_value (json_object_get (cal, "source")), "none");
    json_decref (doc);
    // The global default: '*'.
    doc = s_json ("calibrate * scale=20px/mm dt=500us");
    json_decref (doc);
    doc = s_json ("calibrate exp1");
    cal = json_object_get (doc, "calibration");
    ck_assert_str_eq (json_string_value (json_object_get (cal, "source")), "global");
    json_decref (doc);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM settings"
                                            " WHERE key = 'calibration'"),
                      1);
}
END_TEST

START_TEST (settings_of_an_experiment_not_seen_yet_make_it)
{
    s_start ("");
    json_t *doc = s_json ("rate 5 -e run9");
    ck_assert (json_is_true (json_object_get (doc, "created")));
    json_decref (doc);
    doc = s_json ("policy latest -e run9");
    ck_assert (json_object_get (doc, "created") == NULL);  // made by 'rate'
    json_decref (doc);
    doc = s_json ("feedback set -e run10 setpoint=1");
    ck_assert (json_is_true (json_object_get (doc, "created")));
    json_decref (doc);
    // A refused setting makes nothing; reads of an unknown one are 404s.
    s_refused ("feedback set -e run11 kp=abc", 400, "kp");
    s_refused ("feedback show -e run11", 404, "no experiment 'run11'");
    // A mask: checked, then carried by the settings of the experiment's tasks.
    s_refused ("mask run12 /no/such/mask.tif", 400, "no such file");
    s_refused ("mask run12 relative.tif", 400, "absolute");
    tu_farm_render (&s_farm, 1, "m");
    char line[4200];
    snprintf (line, sizeof line, "mask run12 %s", tu_path (s_farm.dir, "src/m_0001_a.tif"));
    doc = s_json (line);
    ck_assert (json_is_true (json_object_get (doc, "created")));
    ck_assert_int_eq (json_integer_value (json_object_get (doc, "width")), 256);
    const char *settings = json_string_value (json_object_get (doc, "settings"));
    ck_assert_ptr_nonnull (strstr (settings, " mask="));
    ck_assert_ptr_nonnull (strstr (settings, "m_0001_a.tif"));
    json_decref (doc);
    doc = s_json ("mask run12 none");
    ck_assert_ptr_null (strstr (json_string_value (json_object_get (doc, "settings")), "mask="));
    json_decref (doc);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments"
                                            " WHERE name IN ('run9', 'run10', 'run12')"),
                      3);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments"
                                            " WHERE name = 'run11'"),
                      0);
}
END_TEST

// ---------------------------------------------------------------------------
// The uncertainty of the statistics, on series of known correlation: each
// point of a U_NX x U_NY grid is a run of its own (independent series).

enum { U_NX = 20, U_NY = 20, U_N = U_NX * U_NY };

// The next field of AR(1) series of lag-1 correlation 'rho', unit variance
// and mean 0 at every point: u, v and the vorticity (into w), each series
// going on from its value in 'state' (3 per point; NaN: start from the
// stationary distribution).
static void
s_ar1_next (piv_field_t *f, float *w, double *state, double rho, uint64_t *seed)
{
    for (int k = 0; k < U_N; k++) {
        f->x[k] = (float) (16 + 16 * (k % U_NX));
        f->y[k] = (float) (16 + 16 * (k / U_NX));
        f->flags[k] = PIV_FLAG_VALID;
        f->peak_ratio[k] = 2;
        for (int c = 0; c < 3; c++) {
            double *x = state + 3 * k + c;
            *x = isnan (*x) ? tu_gauss (seed) : rho * *x + sqrt (1 - rho * rho) * tu_gauss (seed);
        }
        f->u[k] = (float) state[3 * k];
        f->v[k] = (float) state[3 * k + 1];
        w[k] = (float) state[3 * k + 2];
    }
}

// The statistics of 'fields' fields of s_ar1_next, added in blocks of
// 'block' fields in reverse order (1: in time order), each with its place
// in time (piv_stats_add_at).
static piv_stats_t *
s_ar1_run (int fields, double rho, uint64_t seed, int block)
{
    piv_field_t *f[16];
    float w[16][U_N];
    double *state = malloc (3 * U_N * sizeof *state);
    ck_assert (block <= 16 && state);
    for (int i = 0; i < 3 * U_N; i++)
        state[i] = NAN;
    for (int b = 0; b < block; b++) {
        f[b] = piv_field_new (U_NX, U_NY);
        f[b]->step = 16;
        f[b]->window = 32;
    }
    piv_stats_t *st = NULL;
    for (int done = 0; done < fields; done += block) {
        int m = fields - done < block ? fields - done : block;
        for (int b = 0; b < m; b++)
            s_ar1_next (f[b], w[b], state, rho, &seed);
        if (!st)
            st = piv_stats_new (f[0]);
        for (int b = m - 1; b >= 0; b--)
            ck_assert_int_eq (piv_stats_add_at (st, f[b], w[b], done + b), 0);
    }
    for (int b = 0; b < block; b++)
        piv_field_destroy (&f[b]);
    free (state);
    return st;
}

// The mean n_eff over the points, and the smallest and largest.
static double
s_mean_n_eff (const piv_stats_t *st, double *lo, double *hi)
{
    double sum = 0;
    *lo = INFINITY, *hi = 0;
    for (long k = 0; k < U_N; k++) {
        piv_stats_point_t p;
        ck_assert_int_eq (piv_stats_point (st, k, &p), 0);
        ck_assert_msg (isfinite (p.n_eff) && p.n_eff >= 1 && p.n_eff <= p.count, "n_eff %g",
                       p.n_eff);
        sum += p.n_eff;
        *lo = fmin (*lo, p.n_eff), *hi = fmax (*hi, p.n_eff);
    }
    return sum / U_N;
}

// N_eff of an AR(1) series is N (1 - rho) / (1 + rho) (Bendat & Piersol):
// the estimate from the lag products, the sum to the first zero crossing
// and its geometric tail give it within 10 % on the mean of 400 runs.
START_TEST (an_ar1_series_gives_the_effective_sample_count_of_its_correlation)
{
    const int n = 2000;
    const double rhos[] = {0.5, 0.8, 0.95};
    for (int i = 0; i < 3; i++) {
        piv_stats_t *st = s_ar1_run (n, rhos[i], 100 + i, 1);
        double lo, hi, mean = s_mean_n_eff (st, &lo, &hi);
        double want = n * (1 - rhos[i]) / (1 + rhos[i]);
        printf ("AR(1) rho %.2f, %d fields: n_eff mean %.1f (%.1f..%.1f over %d runs), "
                "theory %.1f: ratio %.3f\n",
                rhos[i], n, mean, lo, hi, U_N, want, mean / want);
        ck_assert_msg (fabs (mean / want - 1) < 0.10, "rho %g: n_eff %g, theory %g", rhos[i],
                       mean, want);
        piv_stats_destroy (&st);
    }
}
END_TEST

// Independent samples: n_eff is about N (the sum stops at the first lag
// whose estimate is not positive: a little below N, never above).
START_TEST (independent_samples_count_as_about_as_many_as_they_are)
{
    const int n = 2000;
    piv_stats_t *st = s_ar1_run (n, 0, 7, 1);
    double lo, hi, mean = s_mean_n_eff (st, &lo, &hi);
    printf ("independent samples, %d fields: n_eff mean %.1f (%.1f..%.1f): ratio %.3f\n", n,
            mean, lo, hi, mean / n);
    ck_assert_msg (mean > 0.85 * n && hi <= n, "n_eff %g of %d", mean, n);
    // How well the mean field is known: u and v of unit variance, each
    // mean to 1 / sqrt (n_eff), together sqrt (2 / n_eff).
    double known = piv_stats_mean_uncertainty (st);
    ck_assert_msg (fabs (known / sqrt (2 / mean) - 1) < 0.05, "%g", known);
    ck_assert_int_eq (piv_stats_set_uncertainty (st, 0), 0);
    ck_assert (isnan (piv_stats_mean_uncertainty (st)));
    piv_stats_destroy (&st);
}
END_TEST

// The 95 % interval (1.96 standard uncertainties) of the mean of u, v and
// the vorticity, and of the RMS of u and v, holds the true value (0, and
// 1) in about 95 % of 400 short runs of 100 fields, correlated or not.
START_TEST (the_95_percent_interval_holds_the_true_mean_and_rms_as_often_as_it_says)
{
    const double rhos[] = {0, 0.5};
    for (int i = 0; i < 2; i++) {
        piv_stats_t *st = s_ar1_run (100, rhos[i], 300 + i, 1);
        int mean_in = 0, rms_in = 0, vort_in = 0;
        for (long k = 0; k < U_N; k++) {
            piv_stats_point_t p;
            piv_stats_point (st, k, &p);
            mean_in += fabs (p.u_mean) <= 1.96 * p.u_mean_uncertainty;
            mean_in += fabs (p.v_mean) <= 1.96 * p.v_mean_uncertainty;
            rms_in += fabs (p.u_rms - 1) <= 1.96 * p.u_rms_uncertainty;
            rms_in += fabs (p.v_rms - 1) <= 1.96 * p.v_rms_uncertainty;
            vort_in += fabs (p.vorticity_mean) <= 1.96 * p.vorticity_mean_uncertainty;
        }
        double mean_cover = mean_in / (2.0 * U_N), rms_cover = rms_in / (2.0 * U_N),
               vort_cover = vort_in / (double) U_N;
        printf ("rho %.1f, 100 fields, %d runs: the 95 %% interval holds the mean %.1f %%, the "
                "RMS %.1f %%, the mean vorticity %.1f %% of the time\n",
                rhos[i], U_N, 100 * mean_cover, 100 * rms_cover, 100 * vort_cover);
        ck_assert_msg (mean_cover > 0.92 && mean_cover < 0.98, "mean: %g", mean_cover);
        ck_assert_msg (rms_cover > 0.90 && rms_cover < 0.98, "rms: %g", rms_cover);
        ck_assert_msg (vort_cover > 0.90 && vort_cover < 0.985, "vorticity: %g", vort_cover);
        piv_stats_destroy (&st);
    }
}
END_TEST

// The farm records results out of order: fields held back among the 4
// latest are put in time order (the same n_eff as in order), and fields
// later than that count in every figure but the autocorrelation.
START_TEST (fields_out_of_order_give_the_autocorrelation_of_their_time_order)
{
    const int n = 1200;
    piv_stats_t *in_order = s_ar1_run (n, 0.6, 41, 1), *reversed = s_ar1_run (n, 0.6, 41, 3),
                *later = s_ar1_run (n, 0.6, 41, 6);
    piv_stats_summary_t a, b, c;
    piv_stats_summary (in_order, &a);
    piv_stats_summary (reversed, &b);
    piv_stats_summary (later, &c);
    ck_assert (a.fields == n && b.fields == n && c.fields == n);
    ck_assert (a.late == 0 && b.late == 0 && c.late > 0);
    double want = n * 0.4 / 1.6;
    for (long k = 0; k < U_N; k++) {
        piv_stats_point_t p, q, r;
        piv_stats_point (in_order, k, &p);
        piv_stats_point (reversed, k, &q);
        piv_stats_point (later, k, &r);
        ck_assert_double_eq_tol (p.u_mean, q.u_mean, 1e-9);
        ck_assert_msg (fabs (q.n_eff / p.n_eff - 1) < 1e-6, "%g against %g", q.n_eff, p.n_eff);
        ck_assert (isfinite (r.n_eff) && r.n_eff <= r.count);
    }
    // One field in 6 late: the lags among the others span its place (a
    // lag-1 product of every sixth is one of lag 2), so n_eff errs high.
    double lo, hi, mean = s_mean_n_eff (later, &lo, &hi);
    printf ("AR(1) rho 0.6, %d fields in blocks of 6 reversed: %lld late, n_eff mean %.1f, "
            "theory %.1f\n",
            n, (long long) c.late, mean, want);
    ck_assert_msg (fabs (mean / want - 1) < 0.25, "%g", mean);
    piv_stats_destroy (&in_order);
    piv_stats_destroy (&reversed);
    piv_stats_destroy (&later);
}
END_TEST

// Fields that carry each vector's sigma give the mean measurement
// uncertainty, the RMS of sigma, apart from the spread of the samples.
START_TEST (the_mean_measurement_uncertainty_is_the_rms_of_the_vectors_sigma)
{
    piv_field_t *f = piv_field_new (U_NX, U_NY);
    f->step = 16;
    f->window = 32;
    float w[U_N];
    double state[3 * U_N];
    for (int i = 0; i < 3 * U_N; i++)
        state[i] = NAN;
    uint64_t seed = 5;
    s_ar1_next (f, w, state, 0, &seed);
    piv_stats_t *st = piv_stats_new (f);
    piv_stats_add (st, f, w); // no sigma: not in the RMS of sigma
    ck_assert_int_eq (piv_field_add_sigma (f), 0);
    for (int i = 0; i < 40; i++) {
        s_ar1_next (f, w, state, 0, &seed);
        for (int k = 0; k < U_N; k++) {
            f->sigma_u[k] = i % 2 ? 0.1f : 0.3f;
            f->sigma_v[k] = k == 7 ? NAN : 0.05f;
        }
        piv_stats_add (st, f, w);
    }
    piv_stats_point_t p;
    piv_stats_point (st, 3, &p);
    ck_assert_double_eq_tol (p.sigma_u_rms, sqrt ((0.01 + 0.09) / 2), 1e-7);
    ck_assert_double_eq_tol (p.sigma_v_rms, 0.05, 1e-7);
    ck_assert_int_eq (p.count, 41);
    piv_stats_point (st, 7, &p); // sigma_v never finite there
    ck_assert (isnan (p.sigma_u_rms) && isnan (p.sigma_v_rms) && isfinite (p.u_mean_uncertainty));
    piv_stats_destroy (&st);
    piv_field_destroy (&f);
}
END_TEST

// Turned off, the statistics encode as version 2, the same bytes as the
// first of version 4's; turned on again, they count from the next field.
START_TEST (the_uncertainty_turned_off_leaves_the_state_of_version_2)
{
    piv_stats_t *on = s_ar1_run (60, 0.3, 9, 1), *off = s_ar1_run (60, 0.3, 9, 1);
    ck_assert_int_eq (piv_stats_set_uncertainty (off, 0), 0);
    ck_assert (piv_stats_has_uncertainty (on) && !piv_stats_has_uncertainty (off));
    unsigned char *a, *b;
    size_t na, nb;
    ck_assert_int_eq (piv_stats_encode (on, &a, &na), 0);
    ck_assert_int_eq (piv_stats_encode (off, &b, &nb), 0);
    ck_assert_uint_eq (nb, 56 + 104 * U_N);
    ck_assert (na > nb && b[4] == 2 && a[4] == 4);
    a[4] = 2;
    ck_assert (memcmp (a, b, nb) == 0);
    piv_stats_point_t p;
    piv_stats_point (off, 3, &p);
    ck_assert (isnan (p.n_eff) && isnan (p.u_mean_uncertainty) && isfinite (p.u_rms));
    // On again: NaN until 8 pairs of fields counted after it.
    ck_assert_int_eq (piv_stats_set_uncertainty (off, 1), 0);
    piv_field_t *f = piv_field_new (U_NX, U_NY);
    f->step = 16;
    f->window = 32;
    float w[U_N];
    double state[3 * U_N];
    uint64_t seed = 4;
    for (int i = 0; i < 3 * U_N; i++)
        state[i] = NAN;
    for (int i = 0; i < 20; i++) {
        s_ar1_next (f, w, state, 0.3, &seed);
        piv_stats_add (off, f, w);
        piv_stats_point (off, 3, &p);
        ck_assert_msg (i < 12 ? isnan (p.n_eff) : p.n_eff >= 1 && p.n_eff <= 80,
                       "after %d: n_eff %g", i + 1, p.n_eff);
    }
    free (a);
    free (b);
    piv_field_destroy (&f);
    piv_stats_destroy (&on);
    piv_stats_destroy (&off);
}
END_TEST

// The state's size for a 2048 x 2048 image at step 8 (256 x 256 points):
// printed against version 2's (before the uncertainty), as doc/units.md
// states it.
START_TEST (the_state_of_a_large_grid_has_the_size_the_doc_states)
{
    enum { NX = 256, NY = 256 };
    piv_field_t *f = piv_field_new (NX, NY);
    f->step = 8;
    f->window = 16;
    piv_stats_t *st = piv_stats_new (f);
    unsigned char *buf;
    size_t size;
    ck_assert_int_eq (piv_stats_encode (st, &buf, &size), 0);
    size_t n = (size_t) NX * NY, before = 56 + 104 * n;
    printf ("statistics state of a %dx%d grid (2048^2 px, step 8): version 2 %.2f MB, version "
            "4 %.2f MB (x%.2f)\n",
            NX, NY, before / 1e6, size / 1e6, (double) size / before);
    ck_assert_uint_eq (size, before + (8 * 24 + 4 * 13 * 2) * n + 8 * 16);
    free (buf);
    piv_stats_destroy (&st);
    piv_field_destroy (&f);
}
END_TEST

static Suite *
s_suite (void)
{
    config_rules ("piv", piv_settings_check_key);
    config_rules ("calibration", piv_calib_check_key);
    Suite *suite = suite_create ("stats");
    TCase *farm = tcase_create ("farm");
    tcase_add_checked_fixture (farm, s_setup, s_teardown);
    tcase_set_timeout (farm, 300);
    tcase_add_test (farm, a_run_counts_every_done_pair_once);
    tcase_add_test (farm, a_broker_killed_mid_run_neither_loses_nor_repeats_a_sample);
    tcase_add_test (farm,
                    a_broker_killed_between_saves_ends_with_the_statistics_of_a_run_without_the_kill);
    tcase_add_test (farm, a_set_is_saved_once_stats_save_results_wait_whatever_the_budget);
    tcase_add_test (farm, without_the_fields_stored_the_statistics_are_saved_at_every_look);
    tcase_add_test (farm, a_farm_without_the_statistics_uncertainty_saves_the_smaller_state);
    tcase_add_test (farm, a_calibration_set_before_the_first_frame_gives_metres_per_second);
    tcase_add_test (farm, bad_calibrations_are_refused_naming_the_key);
    tcase_add_test (farm, settings_of_an_experiment_not_seen_yet_make_it);
    suite_add_tcase (suite, farm);
    TCase *unc = tcase_create ("uncertainty");
    tcase_set_timeout (unc, 120);
    tcase_add_test (unc, an_ar1_series_gives_the_effective_sample_count_of_its_correlation);
    tcase_add_test (unc, independent_samples_count_as_about_as_many_as_they_are);
    tcase_add_test (unc, the_95_percent_interval_holds_the_true_mean_and_rms_as_often_as_it_says);
    tcase_add_test (unc, fields_out_of_order_give_the_autocorrelation_of_their_time_order);
    tcase_add_test (unc, the_mean_measurement_uncertainty_is_the_rms_of_the_vectors_sigma);
    tcase_add_test (unc, the_state_of_a_large_grid_has_the_size_the_doc_states);
    tcase_add_test (unc, the_uncertainty_turned_off_leaves_the_state_of_version_2);
    suite_add_tcase (suite, unc);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
