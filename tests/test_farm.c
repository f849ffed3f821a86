// test_farm.c — the whole pipeline as a user runs it: the real broker,
// watcher and agents as processes on ipc:// sockets in a temporary
// directory, camera files landing in an experiment directory, and the
// faults the farm must survive: an agent, the broker, the watcher killed.

#include "piv/field.h"
#include "store/store.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// One farm in a temporary directory.
typedef struct {
    const char *dir;     // the directory
    char conf[4096];     // its configuration file
    int broker;          // pids (0: not running)
    int watcher;
    int agents[4];
} s_farm_t;

static s_farm_t s_farm;

// Writes the farm's configuration; 'extra' (may be "") is appended: more
// sections or keys of the agent section.
static void
s_write_conf_extra (s_farm_t *farm, const char *processor, int threads, const char *extra)
{
    char text[8192];
    snprintf (text, sizeof text,
              "broker\n"
              "    ingest = ipc://%s/ingest\n"
              "    work = ipc://%s/work\n"
              "    control = ipc://%s/control\n"
              "    publish = ipc://%s/publish\n"
              "    store = ./farm.db\n"
              "    heartbeat_ms = 200\n"
              "    liveness = 3\n"
              "watcher\n"
              "    root = ./data\n"
              "    resend_ms = 100\n"
              "agent\n"
              "    threads = %d\n"
              "    results = ./results\n"
              "    processor = %s\n"
              "%s"
              "piv\n"
              "    passes = 32,16\n"
              "    iterations = 1\n",
              farm->dir, farm->dir, farm->dir, farm->dir, threads, processor, extra);
    snprintf (farm->conf, sizeof farm->conf, "%s", tu_path (farm->dir, "pivfarm.conf"));
    tu_spit (farm->conf, text, strlen (text));
}

static void
s_write_conf (s_farm_t *farm, const char *processor, int threads)
{
    s_write_conf_extra (farm, processor, threads, "");
}

static void
s_setup (void)
{
    memset (&s_farm, 0, sizeof s_farm);
    s_farm.dir = strdup (tu_tmpdir ());
    mkdir (tu_path (s_farm.dir, "data"), 0755);
    mkdir (tu_path (s_farm.dir, "data/exp1"), 0755);
    mkdir (tu_path (s_farm.dir, "src"), 0755);
    s_write_conf (&s_farm, "piv", 1);
}

static void
s_teardown (void)
{
    tu_stop (s_farm.watcher, SIGKILL, 5);
    for (int i = 0; i < 4; i++)
        tu_stop (s_farm.agents[i], SIGKILL, 5);
    tu_stop (s_farm.broker, SIGKILL, 5);
    tu_rmtree (s_farm.dir);
    free ((char *) s_farm.dir);
}

static int
s_start (const char *program, const char *log, const char *extra1, const char *extra2)
{
    char *argv[] = {(char *) tu_bin (program), "-c", s_farm.conf, (char *) extra1,
                    (char *) extra2, NULL};
    return tu_spawn (argv, tu_path (s_farm.dir, log));
}

// Pair counts of 'exp1' as the store says (read-only, as the status page
// reads it); -1 where the store cannot be read yet.
typedef struct {
    int64_t files, pending, dispatched, done, failed;
} s_counts_t;

static int
s_count_cb (void *arg, const store_counts_t *c)
{
    s_counts_t *out = arg;
    if (strcmp (c->name, "exp1") == 0) {
        out->files = c->files;
        out->pending = c->pairs[STORE_PENDING];
        out->dispatched = c->pairs[STORE_DISPATCHED];
        out->done = c->pairs[STORE_DONE];
        out->failed = c->pairs[STORE_FAILED];
    }
    return 0;
}

static s_counts_t
s_counts (void)
{
    s_counts_t c = {-1, -1, -1, -1, -1};
    char err[512];
    store_t *store = store_open_readonly (tu_path (s_farm.dir, "farm.db"), err, sizeof err);
    if (store) {
        c = (s_counts_t) {0, 0, 0, 0, 0};
        store_counts (store, s_count_cb, &c);
        store_destroy (&store);
    }
    return c;
}

// Waits until 'done' pairs of exp1 are done (or timeout_s); returns the counts.
static s_counts_t
s_wait_done (int64_t done, int timeout_s)
{
    s_counts_t c = s_counts ();
    for (int i = 0; i < timeout_s * 10 && c.done < done; i++) {
        usleep (100000);
        c = s_counts ();
    }
    return c;
}

// Renders n synthetic pairs (uniform 3.3, -1.7 px, 256 x 256) into src/.
static void
s_render (int n, const char *prefix)
{
    char count[16], out[4096];
    snprintf (count, sizeof count, "%d", n);
    snprintf (out, sizeof out, "%s/src/%s", s_farm.dir, prefix);
    char *argv[] = {(char *) tu_bin ("pivfarm-synth"), "--size", "256x256", "--count", count,
                    "-o", out, NULL};
    char log[4096];
    ck_assert_msg (tu_run (argv, log, sizeof log, 60) == 0, "%s", log);
}

// Copies src/<prefix>_<i>_{a,b}.tif for i in [first, last] into data/exp1,
// as a camera PC does: every other file under a temporary name, renamed.
static void
s_land (const char *prefix, int first, int last)
{
    for (int i = first; i <= last; i++)
        for (int side = 0; side < 2; side++) {
            char name[256], from[4096], tmp[4096], to[4096];
            snprintf (name, sizeof name, "%s_%04d_%c.tif", prefix, i, side ? 'b' : 'a');
            snprintf (from, sizeof from, "%s/src/%s", s_farm.dir, name);
            snprintf (to, sizeof to, "%s/data/exp1/%s", s_farm.dir, name);
            snprintf (tmp, sizeof tmp, "%s/data/exp1/.%s.part", s_farm.dir, name);
            size_t len;
            char *bytes = tu_slurp (from, &len);
            ck_assert_msg (bytes != NULL, "cannot read '%s'", from);
            tu_spit (i % 2 ? to : tmp, bytes, len);
            free (bytes);
            if (i % 2 == 0)
                ck_assert (rename (tmp, to) == 0);
        }
}

// Starts the broker and waits until its store exists.
static void
s_start_broker (void)
{
    s_farm.broker = s_start ("pivfarm-broker", "broker.log", NULL, NULL);
    for (int i = 0; i < 100 && access (tu_path (s_farm.dir, "farm.db"), F_OK) != 0; i++)
        usleep (50000);
    ck_assert_msg (tu_alive (s_farm.broker), "the broker did not start (see broker.log)");
}

// Checks every result file of pairs [first, last]: present, and a field of
// the known uniform shift.
static void
s_check_results (const char *prefix, int first, int last)
{
    for (int i = first; i <= last; i++) {
        char path[4096], err[512];
        snprintf (path, sizeof path, "%s/results/exp1/%s_%04d.txt", s_farm.dir, prefix, i);
        piv_field_t *f = piv_field_read_txt (path, err, sizeof err);
        ck_assert_msg (f != NULL, "%s", err);
        piv_field_stats_t st;
        piv_field_stats (f, PIV_FLAG_VALID, &st);
        ck_assert_msg (fabs (st.mean_u - 3.3) < 0.1 && fabs (st.mean_v + 1.7) < 0.1,
                       "%s: mean (%.3f, %.3f)", path, st.mean_u, st.mean_v);
        piv_field_destroy (&f);
    }
}

START_TEST (fifty_pairs_landing_in_an_experiment_are_each_recorded_once)
{
    s_render (50, "p");
    s_start_broker ();
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "a1");
    s_farm.agents[1] = s_start ("pivfarm-agent", "agent2.log", "--id", "a2");
    s_land ("p", 1, 50);
    s_counts_t c = s_wait_done (50, 120);
    ck_assert_msg (c.done == 50 && c.failed == 0 && c.pending == 0 && c.dispatched == 0,
                   "done %lld failed %lld pending %lld dispatched %lld", (long long) c.done,
                   (long long) c.failed, (long long) c.pending, (long long) c.dispatched);
    ck_assert_int_eq (c.files, 100);
    s_check_results ("p", 1, 50);
    // Everyone stops cleanly on SIGTERM.
    ck_assert_int_eq (tu_stop (s_farm.watcher, SIGTERM, 10), 0);
    ck_assert_int_eq (tu_stop (s_farm.agents[0], SIGTERM, 10), 0);
    ck_assert_int_eq (tu_stop (s_farm.agents[1], SIGTERM, 10), 0);
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.watcher = s_farm.agents[0] = s_farm.agents[1] = s_farm.broker = 0;
}
END_TEST

// An exec processor slow enough to be killed in the middle of a task.
static void
s_slow_processor (void)
{
    const char *script = tu_path (s_farm.dir, "slow.sh");
    const char *text = "#!/bin/sh\nsleep 1\necho \"x y u v flags\" > \"$3\"\n";
    tu_spit (script, text, strlen (text));
    chmod (script, 0755);
    char processor[4200];
    snprintf (processor, sizeof processor, "exec:%s", script);
    s_write_conf (&s_farm, processor, 1);
}

START_TEST (a_task_of_an_agent_killed_mid_task_completes_on_the_other)
{
    s_render (4, "k");
    s_slow_processor ();
    s_start_broker ();
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "victim");
    usleep (300000);
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_land ("k", 1, 4);
    // The victim holds a task (one thread, one credit) when it dies.
    s_counts_t c = s_counts ();
    for (int i = 0; i < 100 && c.dispatched < 1; i++, c = s_counts ())
        usleep (50000);
    ck_assert_msg (c.dispatched == 1, "dispatched %lld", (long long) c.dispatched);
    tu_stop (s_farm.agents[0], SIGKILL, 5);
    s_farm.agents[0] = 0;
    s_farm.agents[1] = s_start ("pivfarm-agent", "agent2.log", "--id", "survivor");
    c = s_wait_done (4, 60);
    ck_assert_msg (c.done == 4 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
}
END_TEST

START_TEST (the_broker_killed_under_load_loses_nothing_and_records_nothing_twice)
{
    s_render (40, "b");
    s_start_broker ();
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "a1");
    s_farm.agents[1] = s_start ("pivfarm-agent", "agent2.log", "--id", "a2");
    s_land ("b", 1, 20);
    s_counts_t c = s_counts ();
    for (int i = 0; i < 200 && c.done < 5; i++, c = s_counts ())
        usleep (50000);
    tu_stop (s_farm.broker, SIGKILL, 5);
    s_land ("b", 21, 40);  // files land while no broker runs
    usleep (500000);
    s_start_broker ();
    c = s_wait_done (40, 120);
    ck_assert_msg (c.done == 40 && c.failed == 0 && c.pending == 0,
                   "done %lld failed %lld pending %lld", (long long) c.done, (long long) c.failed,
                   (long long) c.pending);
    ck_assert_int_eq (c.files, 80);
    s_check_results ("b", 1, 40);
}
END_TEST

START_TEST (files_added_while_the_watcher_is_down_are_processed_after_its_restart)
{
    s_render (10, "w");
    s_start_broker ();
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "a1");
    s_land ("w", 1, 5);
    s_counts_t c = s_wait_done (5, 60);
    ck_assert_int_eq (c.done, 5);
    tu_stop (s_farm.watcher, SIGKILL, 5);
    s_land ("w", 6, 10);
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    c = s_wait_done (10, 60);
    ck_assert_msg (c.done == 10 && c.files == 20, "done %lld files %lld", (long long) c.done,
                   (long long) c.files);
    s_check_results ("w", 1, 10);
}
END_TEST


// Runs pivctl with 'args' (after -c conf) and returns its exit status; its
// output in out.
static int
s_pivctl (const char *a1, const char *a2, char *out, size_t len)
{
    char *argv[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, (char *) a1, (char *) a2, NULL};
    return tu_run (argv, out, len, 30);
}

START_TEST (pivctl_status_shows_pairs_by_state_and_the_agents)
{
    s_render (3, "s");
    s_start_broker ();
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "status-agent");
    s_land ("s", 1, 3);
    ck_assert_int_eq (s_wait_done (3, 60).done, 3);
    char out[16384];
    ck_assert_int_eq (s_pivctl ("status", NULL, out, sizeof out), 0);
    ck_assert_msg (strstr (out, "exp1") && strstr (out, "status-agent"), "%s", out);
    // The experiment's line: 6 files, 0 pending, 0 dispatched, 3 done.
    const char *line = strstr (out, "exp1");
    long files, pending, dispatched, done;
    ck_assert (sscanf (line, "exp1 %ld %ld %ld %ld", &files, &pending, &dispatched, &done) == 4);
    ck_assert (files == 6 && pending == 0 && dispatched == 0 && done == 3);
    ck_assert_msg (strstr (out, "rate: ") && strstr (out, "pairs/s over 1 min"), "%s", out);
    // Rates count complete seconds: once the second of the last result is
    // over, the last minute holds all 3 results.
    usleep (1100000);
    ck_assert_int_eq (s_pivctl ("--json", "status", out, sizeof out), 0);
    double rate = -1;
    const char *r = strstr (out, "\"rate_1m\":");
    ck_assert (r && sscanf (r, "\"rate_1m\":%lf", &rate) == 1);
    ck_assert_msg (fabs (rate - 3.0 / 59) < 0.001, "rate %.4f: %s", rate, out);
    ck_assert_msg (strstr (out, "\"experiment\":\"exp1\",\"files\":6,\"pending\":0,"
                                "\"dispatched\":0,\"done\":3")
                       && strstr (out, "\"id\":\"status-agent\""),
                   "%s", out);
    // A command the broker does not know is refused, naming it.
    ck_assert_int_eq (s_pivctl ("reboot", NULL, out, sizeof out), 2);
    ck_assert_msg (strstr (out, "'reboot'"), "%s", out);
    // No broker: an error naming the endpoint, exit status 1.
    tu_stop (s_farm.broker, SIGTERM, 10);
    s_farm.broker = 0;
    char *argv[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "--timeout", "300", "status",
                    NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 1);
    ck_assert_msg (strstr (out, "did not answer") && strstr (out, "/control"), "%s", out);
}
END_TEST

START_TEST (a_polling_watcher_finds_files_a_network_mount_hides_from_inotify)
{
    s_render (3, "n");
    s_write_conf_extra (&s_farm, "piv", 1, "");
    // watcher/mode = poll, scanned every 100 ms.
    char *conf = tu_slurp (s_farm.conf, NULL);
    char text[8192];
    char *w = strstr (conf, "    resend_ms = 100\n");
    ck_assert (w != NULL);
    snprintf (text, sizeof text, "%.*s    mode = poll\n    poll_ms = 100\n%s", (int) (w - conf),
              conf, w);
    tu_spit (s_farm.conf, text, strlen (text));
    free (conf);
    s_start_broker ();
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "a1");
    s_land ("n", 1, 3);
    s_counts_t c = s_wait_done (3, 60);
    ck_assert_msg (c.done == 3 && c.files == 6, "done %lld files %lld", (long long) c.done,
                   (long long) c.files);
    s_check_results ("n", 1, 3);
}
END_TEST

START_TEST (hidden_and_temporary_files_are_never_reported)
{
    s_render (1, "h");
    s_start_broker ();
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "a1");
    tu_spit (tu_path (s_farm.dir, "data/exp1/.h_0009_a.tif"), "x", 1);
    tu_spit (tu_path (s_farm.dir, "data/exp1/h_0009_b.tif.tmp"), "x", 1);
    tu_spit (tu_path (s_farm.dir, "data/exp1/h_0009_b.tif~"), "x", 1);
    s_land ("h", 1, 1);
    s_counts_t c = s_wait_done (1, 60);
    ck_assert_int_eq (c.done, 1);
    usleep (300000);
    ck_assert_int_eq (s_counts ().files, 2);
}
END_TEST

START_TEST (a_bad_pair_fails_after_three_attempts_with_its_reason)
{
    s_start_broker ();
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "a1");
    tu_spit (tu_path (s_farm.dir, "data/exp1/bad_0001_a.tif"), "not a tiff", 10);
    tu_spit (tu_path (s_farm.dir, "data/exp1/bad_0001_b.tif"), "not a tiff", 10);
    s_counts_t c = s_counts ();
    for (int i = 0; i < 300 && c.failed < 1; i++, c = s_counts ())
        usleep (100000);
    ck_assert_msg (c.failed == 1 && c.done == 0, "failed %lld done %lld", (long long) c.failed,
                   (long long) c.done);
    // The agent lives on, and the reason names the file.
    ck_assert (tu_alive (s_farm.agents[0]));
    size_t len;
    char *log = tu_slurp (tu_path (s_farm.dir, "agent1.log"), &len);
    ck_assert_msg (log && strstr (log, "bad_0001_a.tif") && strstr (log, "not a TIFF"), "%s",
                   log ? log : "(no log)");
    free (log);
}
END_TEST

START_TEST (an_agent_maps_the_broker_paths_to_its_own_mount)
{
    s_render (2, "m");
    // The agent sees the export under another name, as a compute node does.
    char from[4200], to[4200], extra[9000];
    snprintf (from, sizeof from, "%s/data", s_farm.dir);
    snprintf (to, sizeof to, "%s/mnt", s_farm.dir);
    ck_assert (symlink (from, to) == 0);
    snprintf (extra, sizeof extra, "    path_from = %s\n    path_to = %s\n", from, to);
    s_write_conf_extra (&s_farm, "piv", 1, extra);
    s_start_broker ();
    s_farm.watcher = s_start ("pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = s_start ("pivfarm-agent", "agent1.log", "--id", "mapped");
    s_land ("m", 1, 2);
    ck_assert_int_eq (s_wait_done (2, 60).done, 2);
    s_check_results ("m", 1, 2);
    size_t len;
    char *result = tu_slurp (tu_path (s_farm.dir, "results/exp1/m_0001.txt"), &len);
    ck_assert_msg (result && strstr (result, "/mnt/exp1/m_0001_a.tif"), "%s",
                   result ? result : "(no result)");
    free (result);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("farm");
    TCase *tc = tcase_create ("farm");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 240);
    tcase_add_test (tc, fifty_pairs_landing_in_an_experiment_are_each_recorded_once);
    tcase_add_test (tc, a_task_of_an_agent_killed_mid_task_completes_on_the_other);
    tcase_add_test (tc, the_broker_killed_under_load_loses_nothing_and_records_nothing_twice);
    tcase_add_test (tc, files_added_while_the_watcher_is_down_are_processed_after_its_restart);
    tcase_add_test (tc, pivctl_status_shows_pairs_by_state_and_the_agents);
    tcase_add_test (tc, a_polling_watcher_finds_files_a_network_mount_hides_from_inotify);
    tcase_add_test (tc, hidden_and_temporary_files_are_never_reported);
    tcase_add_test (tc, a_bad_pair_fails_after_three_attempts_with_its_reason);
    tcase_add_test (tc, an_agent_maps_the_broker_paths_to_its_own_mount);
    suite_add_tcase (suite, tc);
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? 1 : 0;
}
