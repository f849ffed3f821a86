// test_farm.c — the whole pipeline as a user runs it: the real broker,
// watcher and agents as processes on ipc:// sockets in a temporary
// directory, camera files landing in an experiment directory, and the
// faults the farm must survive: an agent, the broker, the watcher killed.

#include "common/jdoc.h"
#include "common/proto.h"
#include "piv/field.h"
#include "piv/image.h"
#include "tests/testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static tu_farm_t s_farm;  // the farm of the running test

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
    tu_farm_render (&s_farm, 50, "p");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "a2");
    tu_farm_land (&s_farm, "p", 1, 50, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 50, 120);
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

// An exec processor, one thread, of the shell script 'text'.
static void
s_exec_processor (const char *text)
{
    const char *script = tu_path (s_farm.dir, "processor.sh");
    tu_spit (script, text, strlen (text));
    chmod (script, 0755);
    char processor[4200];
    snprintf (processor, sizeof processor, "exec:%s", script);
    tu_farm_conf (&s_farm, processor, 1, "32,16", "");
}

// An exec processor slow enough to be killed in the middle of a task.
static void
s_slow_processor (void)
{
    s_exec_processor ("#!/bin/sh\nsleep 1\necho \"x y u v flags\" > \"$3\"\n");
}

// The counts once at least n pairs are dispatched (or after 5 s).
static tu_counts_t
s_wait_dispatched (int64_t n)
{
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 100 && c.dispatched < n; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    return c;
}

START_TEST (a_task_of_an_agent_killed_mid_task_completes_on_the_other)
{
    tu_farm_render (&s_farm, 4, "k");
    s_slow_processor ();
    tu_farm_start_broker (&s_farm);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "victim");
    usleep (300000);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_land (&s_farm, "k", 1, 4, 0);
    // The victim holds a task (one thread, one credit) when it dies.
    tu_counts_t c = s_wait_dispatched (1);
    ck_assert_msg (c.dispatched == 1, "dispatched %lld", (long long) c.dispatched);
    tu_stop (s_farm.agents[0], SIGKILL, 5);
    s_farm.agents[0] = 0;
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "survivor");
    c = tu_farm_wait_done (&s_farm, 4, 60);
    ck_assert_msg (c.done == 4 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
}
END_TEST

// An agent stopped (SIGTERM: scancel, a requeue, systemctl stop) while a
// task runs past its agent/drain_s hands it back at its goodbye: it exits
// 0 at once, the pair is pending again without waiting for the agent to be
// presumed dead, and another agent does it.
START_TEST (an_agent_stopped_past_its_drain_time_hands_its_task_back)
{
    tu_farm_render (&s_farm, 2, "h");
    // Slow (30 s) while the marker exists; then quick.
    char marker[4200];  // tu_path's buffers are reused
    snprintf (marker, sizeof marker, "%s", tu_path (s_farm.dir, "slow"));
    tu_spit (marker, "", 0);
    char text[5000];
    snprintf (text, sizeof text,
              "#!/bin/sh\nif [ -e '%s' ]; then sleep 30; fi\necho \"x y u v flags\" > \"$3\"\n",
              marker);
    s_exec_processor (text);
    tu_farm_start_broker (&s_farm);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--drain-s", "1");
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_land (&s_farm, "h", 1, 2, 0);
    tu_counts_t c = s_wait_dispatched (1);
    ck_assert_msg (c.dispatched == 1, "dispatched %lld", (long long) c.dispatched);
    int64_t t0 = zclock_mono ();
    ck_assert_int_eq (tu_stop (s_farm.agents[0], SIGTERM, 10), 0);
    int64_t took = zclock_mono () - t0;
    s_farm.agents[0] = 0;
    ck_assert_msg (took < 5000, "the agent took %lld ms to stop with --drain-s 1", (long long) took);
    ck_assert (tu_farm_log_has (&s_farm, "agent1.log",
                                "1 task(s) not finished within agent/drain_s = 1 s, handed back",
                                100));
    // Back in the queue at once (liveness would take heartbeat x liveness).
    c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 20 && c.dispatched > 0; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_msg (c.dispatched == 0 && c.pending == 2 && c.failed == 0,
                   "after the goodbye: pending %lld dispatched %lld failed %lld",
                   (long long) c.pending, (long long) c.dispatched, (long long) c.failed);
    unlink (marker);
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "next");
    c = tu_farm_wait_done (&s_farm, 2, 60);
    ck_assert_msg (c.done == 2 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
}
END_TEST

START_TEST (the_broker_killed_under_load_loses_nothing_and_records_nothing_twice)
{
    tu_farm_render (&s_farm, 40, "b");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "a2");
    tu_farm_land (&s_farm, "b", 1, 20, 0);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 200 && c.done < 5; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    tu_stop (s_farm.broker, SIGKILL, 5);
    tu_farm_land (&s_farm, "b", 21, 40, 0);  // files land while no broker runs
    usleep (500000);
    tu_farm_start_broker (&s_farm);
    c = tu_farm_wait_done (&s_farm, 40, 120);
    ck_assert_msg (c.done == 40 && c.failed == 0 && c.pending == 0,
                   "done %lld failed %lld pending %lld", (long long) c.done, (long long) c.failed,
                   (long long) c.pending);
    ck_assert_int_eq (c.files, 80);
    s_check_results ("b", 1, 40);
}
END_TEST

START_TEST (files_added_while_the_watcher_is_down_are_processed_after_its_restart)
{
    tu_farm_render (&s_farm, 10, "w");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "w", 1, 5, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 5, 60);
    ck_assert_int_eq (c.done, 5);
    tu_stop (s_farm.watcher, SIGKILL, 5);
    tu_farm_land (&s_farm, "w", 6, 10, 0);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    c = tu_farm_wait_done (&s_farm, 10, 60);
    ck_assert_msg (c.done == 10 && c.files == 20, "done %lld files %lld", (long long) c.done,
                   (long long) c.files);
    s_check_results ("w", 1, 10);
}
END_TEST


// Runs pivctl with 'args' (after -c conf) and returns its exit status; its
// output in out.
// The broker, the watcher and agent 'id', and pairs s_0001 to s_N landed.
static void
s_farm_of_one_agent (const char *id, int n)
{
    tu_farm_render (&s_farm, n, "s");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", id);
    tu_farm_land (&s_farm, "s", 1, n, 0);
}

static int
s_pivctl (const char *a1, const char *a2, char *out, size_t len)
{
    char *argv[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, (char *) a1, (char *) a2, NULL};
    return tu_run (argv, out, len, 30);
}

START_TEST (pivctl_status_shows_pairs_by_state_and_the_agents)
{
    s_farm_of_one_agent ("status-agent", 3);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 3, 60).done, 3);
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
    ck_assert_msg (strstr (out, "\"experiment\":\"exp1\",\"source\":\"exp1\",\"files\":6,"
                                "\"pending\":0,\"dispatched\":0,\"done\":3")
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

// Polls 'pivctl --json status' until exp1's files in no pair are 'waiting'
// and 'refused' (at most 30 s); the reply, in out.
static int
s_unpaired_reaches (long waiting, long refused, char *out, size_t len)
{
    for (int i = 0; i < 300; i++) {
        if (s_pivctl ("--json", "status", out, len) == 0) {
            char err[256];
            jdoc_t *doc = jdoc_parse (out, err, sizeof err);
            int e = doc ? jdoc_length (doc, "$.experiments") : 0, ok = 0;
            for (int k = 0; k < e; k++)
                if (strcmp (jdoc_string (doc, "$.experiments[%d].experiment", k), "exp1") == 0)
                    ok = jdoc_int (doc, -1, "$.experiments[%d].unpaired.waiting", k) == waiting
                         && jdoc_int (doc, -1, "$.experiments[%d].unpaired.refused", k) == refused;
            jdoc_destroy (&doc);
            if (ok)
                return 1;
        }
        usleep (100000);
    }
    return 0;
}

// Nothing vanishes (issue 25): files the rule 'ab' refuses (B005_1.tif,
// B005_2.tif) and one waiting for its partner are counted and named in
// status, text and JSON, with what the rule expects; after a restart of
// the broker too.
START_TEST (files_outside_the_pairing_rule_are_counted_and_named_in_status)
{
    s_farm_of_one_agent ("node-u", 2);
    size_t len;
    char *frame = tu_slurp (tu_path (s_farm.dir, "src/s_0001_a.tif"), &len);
    ck_assert (frame != NULL);
    tu_spit (tu_path (s_farm.dir, "data/exp1/B005_1.tif"), frame, len);
    tu_spit (tu_path (s_farm.dir, "data/exp1/B005_2.tif"), frame, len);
    tu_spit (tu_path (s_farm.dir, "data/exp1/B006_a.tif"), frame, len);
    free (frame);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 60).done, 2);
    static char out[65536];
    ck_assert_msg (s_unpaired_reaches (1, 2, out, sizeof out), "%s", out);
    char err[256];
    jdoc_t *doc = jdoc_parse (out, err, sizeof err);
    ck_assert_msg (doc != NULL, "%s", err);
    int e = -1;
    for (int k = 0; k < jdoc_length (doc, "$.experiments"); k++)
        if (strcmp (jdoc_string (doc, "$.experiments[%d].experiment", k), "exp1") == 0)
            e = k;
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[%d].files", e), 7);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[%d].unpaired.rule", e), "ab");
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[%d].unpaired.expects", e),
                      "<stem>_a.tif + <stem>_b.tif");
    ck_assert_int_eq (jdoc_length (doc, "$.experiments[%d].unpaired.files", e), 3);
    int b005 = 0;
    for (int f = 0; f < 3; f++) {
        const char *name = jdoc_string (doc, "$.experiments[%d].unpaired.files[%d].name", e, f);
        const char *state = jdoc_string (doc, "$.experiments[%d].unpaired.files[%d].state", e, f);
        const char *why = jdoc_string (doc, "$.experiments[%d].unpaired.files[%d].why", e, f);
        if (strncmp (name, "B005_", 5) == 0) {
            b005++;
            ck_assert_str_eq (state, "refused");
            ck_assert_str_eq (why, "does not fit pairing rule ab: expected <stem>_a or <stem>_b");
        }
        else {
            ck_assert_str_eq (name, "B006_a.tif");
            ck_assert_str_eq (state, "waiting");
            ck_assert_str_eq (why, "waits for 'B006_b.tif'");
        }
    }
    ck_assert_int_eq (b005, 2);
    jdoc_destroy (&doc);
    // The table says so too, with the names.
    ck_assert_int_eq (s_pivctl ("status", NULL, out, sizeof out), 0);
    ck_assert_msg (strstr (out, "exp1: 3 file(s) in no pair: 2 refused by the pairing rule 'ab' "
                                "(a pair: <stem>_a.tif + <stem>_b.tif), 1 waiting for a partner")
                       && strstr (out, "  B005_1.tif: does not fit pairing rule ab")
                       && strstr (out, "  B005_2.tif: does not fit pairing rule ab")
                       && strstr (out, "  B006_a.tif: waits for 'B006_b.tif'"),
                   "%s", out);
    // A broker started again offers the store's files again: the same counts.
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    tu_farm_start_broker (&s_farm);
    ck_assert_msg (s_unpaired_reaches (1, 2, out, sizeof out), "%s", out);
    // The partner comes: one file fewer waits.
    frame = tu_slurp (tu_path (s_farm.dir, "src/s_0001_b.tif"), &len);
    tu_spit (tu_path (s_farm.dir, "data/exp1/B006_b.tif"), frame, len);
    free (frame);
    ck_assert_msg (s_unpaired_reaches (0, 2, out, sizeof out), "%s", out);
}
END_TEST

START_TEST (an_agent_long_gone_is_forgotten_and_a_connected_one_kept_however_old_its_hello)
{
    tu_farm_conf (&s_farm, "noop", 1, "32,16", "");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n",
                          "    liveness = 3\n    forget_agents_after = 2s\n");
    tu_farm_fake (&s_farm, 1, "f");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "old.log", "--id", "old");
    tu_farm_land (&s_farm, "f", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    ck_assert_int_eq (tu_stop (s_farm.agents[0], SIGTERM, 10), 0);
    s_farm.agents[0] = 0;
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "live.log", "--id", "live");
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "agent 'live' on", 10000));
    int64_t old = 1;
    for (int i = 0; i < 100 && old != 0; i++) {
        usleep (100000);
        old = tu_farm_sql (&s_farm, "SELECT count(*) FROM agents WHERE name = 'old'");
    }
    ck_assert_int_eq (old, 0);
    // Its HELLO, long past the age, is the last write of its row: it stays
    // while it is connected.
    usleep (3500000);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM agents WHERE name = 'live'"), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM agents"), 1);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "forgot 1 agent(s) not seen for 2s (broker/forget_agents_after): "
                                "'old'",
                                0));
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind ="
                                            " 'agents-forgotten' AND payload ="
                                            " 'count=1 agents=''old'''"),
                      1);
    // What it did still names it; pivctl and the status page go on (the
    // page shows the agents of the log's recent events too, as gone).
    char *doer = tu_farm_sql_text (&s_farm, "SELECT agent FROM results");
    ck_assert_str_eq (doer ? doer : "", "old");
    free (doer);
    char out[16384];
    ck_assert_int_eq (s_pivctl ("agents", NULL, out, sizeof out), 0);
    ck_assert_msg (strstr (out, "live") && !strstr (out, "old"), "%s", out);
    setenv ("PIVFARM_CONF", s_farm.conf, 1);
    setenv ("REQUEST_METHOD", "GET", 1);
    setenv ("QUERY_STRING", "format=json", 1);
    char *argv[] = {(char *) tu_bin ("pivfarm.cgi"), NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 0);
    const char *body = strstr (out, "\r\n\r\n");
    ck_assert_msg (strncmp (out, "Status: 200", 11) == 0 && body, "%.500s", out);
    char err[256];
    jdoc_t *page = jdoc_parse (body + 4, err, sizeof err);
    ck_assert_msg (page != NULL, "%s: %.500s", err, body);
    int listed = jdoc_length (page, "$.agents"), live = 0;
    for (int i = 0; i < listed; i++) {
        const char *id = jdoc_string (page, "$.agents[%d].id", i);
        id = id ? id : "";
        int alive = jdoc_bool (page, -1, "$.agents[%d].alive", i);
        live += strcmp (id, "live") == 0 && alive == 1;
        ck_assert_msg (strcmp (id, "old") != 0 || alive == 0, "%s", body);
    }
    ck_assert_msg (live == 1, "%s", body);
    jdoc_destroy (&page);
}
END_TEST

START_TEST (a_polling_watcher_finds_files_a_network_mount_hides_from_inotify)
{
    tu_farm_render (&s_farm, 3, "n");
    tu_farm_conf (&s_farm, "piv", 1, "32,16", "");
    // watcher/mode = poll, scanned every 100 ms.
    char *conf = tu_slurp (s_farm.conf, NULL);
    char text[8192];
    char *w = strstr (conf, "    resend_ms = 100\n");
    ck_assert (w != NULL);
    snprintf (text, sizeof text, "%.*s    mode = poll\n    poll_ms = 100\n%s", (int) (w - conf),
              conf, w);
    tu_spit (s_farm.conf, text, strlen (text));
    free (conf);
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "n", 1, 3, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 3, 60);
    ck_assert_msg (c.done == 3 && c.files == 6, "done %lld files %lld", (long long) c.done,
                   (long long) c.files);
    s_check_results ("n", 1, 3);
}
END_TEST

START_TEST (hidden_and_temporary_files_are_never_reported)
{
    tu_farm_render (&s_farm, 1, "h");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_spit (tu_path (s_farm.dir, "data/exp1/.h_0009_a.tif"), "x", 1);
    tu_spit (tu_path (s_farm.dir, "data/exp1/h_0009_b.tif.tmp"), "x", 1);
    tu_spit (tu_path (s_farm.dir, "data/exp1/h_0009_b.tif~"), "x", 1);
    tu_farm_land (&s_farm, "h", 1, 1, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 1, 60);
    ck_assert_int_eq (c.done, 1);
    usleep (300000);
    ck_assert_int_eq (tu_farm_counts (&s_farm).files, 2);
}
END_TEST

START_TEST (a_bad_pair_fails_after_three_attempts_with_its_reason)
{
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_spit (tu_path (s_farm.dir, "data/exp1/bad_0001_a.tif"), "not a tiff", 10);
    tu_spit (tu_path (s_farm.dir, "data/exp1/bad_0001_b.tif"), "not a tiff", 10);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 300 && c.failed < 1; i++, c = tu_farm_counts (&s_farm))
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
    tu_farm_render (&s_farm, 2, "m");
    // The agent sees the export under another name, as a compute node does.
    char from[4200], to[4200], extra[9000];
    snprintf (from, sizeof from, "%s/data", s_farm.dir);
    snprintf (to, sizeof to, "%s/mnt", s_farm.dir);
    ck_assert (symlink (from, to) == 0);
    snprintf (extra, sizeof extra, "    path_from = %s\n    path_to = %s\n", from, to);
    tu_farm_conf (&s_farm, "piv", 1, "32,16", extra);
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "mapped");
    tu_farm_land (&s_farm, "m", 1, 2, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 60).done, 2);
    s_check_results ("m", 1, 2);
    size_t len;
    char *result = tu_slurp (tu_path (s_farm.dir, "results/exp1/m_0001.txt"), &len);
    ck_assert_msg (result && strstr (result, "/mnt/exp1/m_0001_a.tif"), "%s",
                   result ? result : "(no result)");
    free (result);
}
END_TEST


START_TEST (a_deferred_pair_waits_for_another_agent_without_an_attempt_counted)
{
    tu_farm_conf (&s_farm, "noop", 1, "32,16", "");
    tu_farm_fake (&s_farm, 1, "d");
    tu_farm_start_broker (&s_farm);
    // An agent whose results disk is full, as the protocol sees it.
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/work", s_farm.dir);
    zsock_t *fake = zsock_new_dealer (endpoint);
    ck_assert_ptr_nonnull (fake);
    proto_msg_t hello = {.command = PROTO_HELLO, .name = "full", .text = "node1", .count = 1,
                         .settings = "noop"};
    ck_assert_int_eq (proto_send (&hello, NULL, fake), 0);
    proto_msg_t ready = {.command = PROTO_READY, .count = 1};
    ck_assert_int_eq (proto_send (&ready, NULL, fake), 0);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_land (&s_farm, "d", 1, 1, 0);
    proto_msg_t task;
    ck_assert_msg (tu_proto_expect (fake, 1, PROTO_TASK, 0, &task, 10000), "no TASK for 'full'");
    proto_msg_t defer = {.command = PROTO_DEFER, .pair = task.pair, .attempt = task.attempt,
                         .text = "results disk full: 12 MB free"};
    ck_assert_int_eq (proto_send (&defer, NULL, fake), 0);
    proto_msg_t recorded;
    ck_assert_msg (tu_proto_expect (fake, 1, PROTO_RECORDED, task.pair, &recorded, 10000),
                   "DEFER not answered");
    ck_assert_uint_eq (recorded.attempt, task.attempt);
    proto_msg_release (&recorded);
    // Pending again, the attempt not counted; the broker says who and why.
    tu_counts_t c = tu_farm_counts (&s_farm);
    ck_assert_int_eq (c.pending, 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT attempts FROM pairs"), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'defer'"
                                            " AND payload LIKE '%%agent=full%%disk full%%'"),
                      1);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "agent 'full' defers pair", 5000));
    // Its credit is not given back: the pair waits for a real agent.
    ck_assert (!tu_proto_expect (fake, 1, PROTO_TASK, 0, &task, 1000));
    ck_assert_int_eq (tu_farm_counts (&s_farm).pending, 1);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    c = tu_farm_wait_done (&s_farm, 1, 30);
    ck_assert_int_eq (c.done, 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results WHERE agent = 'a1'"), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT attempts FROM pairs"), 1);
    proto_msg_release (&task);
    zsock_destroy (&fake);
}
END_TEST

// Sends a FILE for data/exp1/<name> as the watcher does (its size and
// mtime as they are now) and waits for its ACK.
static void
s_send_file (zsock_t *ingest, const char *name, uint64_t seq)
{
    struct stat st;
    char path[4200];
    snprintf (path, sizeof path, "%s/data/exp1/%s", s_farm.dir, name);
    ck_assert_msg (stat (path, &st) == 0, "%s", path);
    proto_msg_t file = {.command = PROTO_FILE, .seq = seq, .experiment = "exp1",
                        .name = (char *) name, .size = st.st_size,
                        .time_ns = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
    ck_assert_int_eq (proto_send (&file, NULL, ingest), 0);
    proto_msg_t ack;
    ck_assert_msg (tu_proto_expect (ingest, 0, PROTO_ACK, 0, &ack, 10000), "'%s' not acknowledged",
                   name);
    proto_msg_release (&ack);
}

// Copies src/<name> to data/exp1/<name> with the mtime 'mtime_s'.
static void
s_place (const char *name, const char *as, time_t mtime_s)
{
    size_t len;
    char *data = tu_slurp (tu_path (s_farm.dir, name), &len);
    ck_assert_ptr_nonnull (data);
    char path[4200];
    snprintf (path, sizeof path, "%s/data/exp1/%s", s_farm.dir, as);
    tu_spit (path, data, len);
    free (data);
    struct timeval times[2] = {{mtime_s, 0}, {mtime_s, 0}};
    ck_assert (utimes (path, times) == 0);
}

START_TEST (a_frame_rewritten_after_its_pair_failed_is_retried_and_after_done_is_kept)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 2\n");
    tu_farm_start_broker (&s_farm);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/ingest", s_farm.dir);
    zsock_t *ingest = zsock_new_dealer (endpoint);
    ck_assert_ptr_nonnull (ingest);
    // Frame B lands as garbage: the pair fails max_attempts times.
    s_place ("src/g_0001_a.tif", "g_0001_a.tif", 1000000);
    tu_spit (tu_path (s_farm.dir, "data/exp1/g_0001_b.tif"), "not a tiff", 10);
    s_send_file (ingest, "g_0001_a.tif", 1);
    s_send_file (ingest, "g_0001_b.tif", 2);
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 300 && c.failed < 1; i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    ck_assert_int_eq (c.failed, 1);
    char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs");
    ck_assert_msg (error && strstr (error, "not a TIFF"), "%s", error ? error : "(none)");
    free (error);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT attempts FROM pairs"), 2);
    // The same event again (a resend) changes nothing.
    s_send_file (ingest, "g_0001_b.tif", 3);
    ck_assert_int_eq (tu_farm_counts (&s_farm).failed, 1);
    // Rewritten correctly under the same name: retried, and done.
    s_place ("src/g_0001_b.tif", "g_0001_b.tif", 1000010);
    s_send_file (ingest, "g_0001_b.tif", 4);
    c = tu_farm_wait_done (&s_farm, 1, 60);
    ck_assert_msg (c.done == 1 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "'exp1/g_0001_b.tif' changed after its pair failed: retried", 5000));
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'file-changed'"),
                      1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files"), 2);
    s_check_results ("g", 1, 1);
    // Rewritten once more after done: said so, the result kept, not redone.
    s_place ("src/g_0001_b.tif", "g_0001_b.tif", 1000020);
    s_send_file (ingest, "g_0001_b.tif", 5);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "'exp1/g_0001_b.tif' rewritten after its pair was done: result kept",
                                5000));
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events"
                                            " WHERE kind = 'file-rewritten'"), 1);
    usleep (500000);
    c = tu_farm_counts (&s_farm);
    ck_assert_int_eq (c.done, 1);
    ck_assert_int_eq (c.pending + c.dispatched, 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results"), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM attempts"), 3);
    zsock_destroy (&ingest);
}
END_TEST

// src/<name>'s bytes (the test fails if it cannot be read); *len_p its size.
static char *
s_src (const char *name, size_t *len_p)
{
    char *bytes = tu_slurp (tu_path (tu_path (s_farm.dir, "src"), name), len_p);
    ck_assert_msg (bytes != NULL, "cannot read src/%s", name);
    return bytes;
}

// Appends bytes to path as a writer that opens, appends and closes.
static void
s_append (const char *path, const char *bytes, size_t len)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    ck_assert_msg (fd >= 0, "cannot open '%s'", path);
    ck_assert (write (fd, bytes, len) == (ssize_t) len);
    close (fd);
}

// Lands pair 'stem' (src/<stem>_{a,b}.tif) into data/exp1 as a camera PC
// over CIFS does: both files opened, appended and closed in 'chunks'
// pieces, with pauses longer than watcher/settle_ms between them.
static void
s_land_in_chunks (const char *stem, int chunks)
{
    char *bytes[2];
    size_t len[2];
    char names[2][256], paths[2][4200];
    for (int s = 0; s < 2; s++) {
        snprintf (names[s], sizeof names[s], "%s_%c.tif", stem, s ? 'b' : 'a');
        bytes[s] = s_src (names[s], &len[s]);
        snprintf (paths[s], sizeof paths[s], "%s/data/exp1/%s", s_farm.dir, names[s]);
    }
    for (int c = 0; c < chunks; c++) {
        for (int s = 0; s < 2; s++) {
            size_t from = len[s] * (size_t) c / (size_t) chunks;
            size_t to = len[s] * (size_t) (c + 1) / (size_t) chunks;
            s_append (paths[s], bytes[s] + from, to - from);
        }
        if (c + 1 < chunks)
            usleep (800000);  // settle_ms is 500
    }
    free (bytes[0]);
    free (bytes[1]);
}

// Asserts that pair 1 of 'stem' is done, none failed, and that the watcher
// reported each of its files once (-v logs each report).
static void
s_assert_done_once (const char *stem)
{
    tu_counts_t c = tu_farm_wait_done (&s_farm, 1, 60);
    ck_assert_msg (c.done == 1 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    for (int s = 0; s < 2; s++) {
        char line[300];
        snprintf (line, sizeof line, "file exp1/%s_%c.tif (", stem, s ? 'b' : 'a');
        ck_assert_msg (tu_farm_log_count (&s_farm, "watcher.log", line) == 1,
                       "'%s' reported %d times", line,
                       tu_farm_log_count (&s_farm, "watcher.log", line));
    }
}

START_TEST (a_frame_written_in_chunks_with_pauses_is_reported_only_once_complete)
{
    tu_farm_render (&s_farm, 1, "c");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    s_land_in_chunks ("c_0001", 3);
    s_assert_done_once ("c_0001");
    // The wait was logged, naming the file.
    ck_assert (tu_farm_log_count (&s_farm, "watcher.log", "c_0001_a.tif' is ") >= 1);
}
END_TEST

START_TEST (a_polling_watcher_waits_for_a_tiff_written_in_chunks)
{
    tu_farm_render (&s_farm, 1, "q");
    tu_farm_conf_replace (&s_farm, "    resend_ms = 100\n",
                          "    resend_ms = 100\n    mode = poll\n    poll_ms = 100\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    s_land_in_chunks ("q_0001", 3);
    s_assert_done_once ("q_0001");
}
END_TEST

START_TEST (a_frame_touched_then_filled_later_is_reported_once_filled)
{
    tu_farm_render (&s_farm, 1, "t");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    const char *a = tu_path (s_farm.dir, "data/exp1/t_0001_a.tif");
    const char *b = tu_path (s_farm.dir, "data/exp1/t_0001_b.tif");
    s_append (a, "", 0);  // touch
    s_append (b, "", 0);
    usleep (800000);
    size_t len;
    char *bytes = s_src ("t_0001_a.tif", &len);
    s_append (a, bytes, len);
    free (bytes);
    bytes = s_src ("t_0001_b.tif", &len);
    s_append (b, bytes, len);
    free (bytes);
    s_assert_done_once ("t_0001");
}
END_TEST

START_TEST (a_directory_moved_in_while_its_files_are_written_is_processed)
{
    tu_farm_render (&s_farm, 1, "d");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    const char *out = tu_path (s_farm.dir, "run7");
    ck_assert (mkdir (out, 0755) == 0);
    int fd[2];
    char *bytes[2];
    size_t len[2];
    for (int s = 0; s < 2; s++) {
        char name[64];
        snprintf (name, sizeof name, "d_0001_%c.tif", s ? 'b' : 'a');
        bytes[s] = s_src (name, &len[s]);
        fd[s] = open (tu_path (out, name), O_WRONLY | O_CREAT, 0644);
        ck_assert (fd[s] >= 0);
        ck_assert (write (fd[s], bytes[s], len[s] / 2) == (ssize_t) (len[s] / 2));
    }
    ck_assert (rename (out, tu_path (s_farm.dir, "data/exp1/run7")) == 0);
    usleep (800000);
    for (int s = 0; s < 2; s++) {
        size_t rest = len[s] - len[s] / 2;
        ck_assert (write (fd[s], bytes[s] + len[s] / 2, rest) == (ssize_t) rest);
        close (fd[s]);
        free (bytes[s]);
    }
    s_assert_done_once ("run7/d_0001");
}
END_TEST

START_TEST (a_frame_published_with_ln_is_reported_live)
{
    tu_farm_render (&s_farm, 1, "l");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    // Hard links from outside the watched tree: no close of the new name.
    for (int s = 0; s < 2; s++) {
        char name[64], from[4200], to[4200];
        snprintf (name, sizeof name, "l_0001_%c.tif", s ? 'b' : 'a');
        snprintf (from, sizeof from, "%s/src/%s", s_farm.dir, name);
        snprintf (to, sizeof to, "%s/data/exp1/%s", s_farm.dir, name);
        ck_assert (link (from, to) == 0);
    }
    s_assert_done_once ("l_0001");
}
END_TEST

START_TEST (a_frame_replaced_after_its_report_is_reported_again_and_an_unchanged_one_not)
{
    tu_farm_render (&s_farm, 1, "r");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "r", 1, 1, 0);
    s_assert_done_once ("r_0001");
    // chmod changes neither size nor mtime: not reported again.
    ck_assert (chmod (tu_path (s_farm.dir, "data/exp1/r_0001_a.tif"), 0600) == 0);
    // b replaced by a rename over it, with other content (one byte more).
    size_t len;
    char *bytes = s_src ("r_0001_b.tif", &len);
    bytes = realloc (bytes, len + 1);
    bytes[len] = '\0';
    const char *tmp = tu_path (s_farm.dir, "data/exp1/.r_0001_b.tif.part");
    tu_spit (tmp, bytes, len + 1);
    free (bytes);
    ck_assert (rename (tmp, tu_path (s_farm.dir, "data/exp1/r_0001_b.tif")) == 0);
    char line[300];
    snprintf (line, sizeof line, "file exp1/r_0001_b.tif (%zu bytes)", len + 1);
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", line, 10000), "no '%s'", line);
    ck_assert (tu_farm_log_count (&s_farm, "watcher.log",
                                  "r_0001_b.tif' changed since it was reported")
               == 1);
    usleep (800000);
    ck_assert_int_eq (tu_farm_log_count (&s_farm, "watcher.log", "file exp1/r_0001_a.tif ("), 1);
}
END_TEST

START_TEST (files_two_directories_deep_landing_while_the_watcher_is_down_are_found_at_restart)
{
    tu_farm_render (&s_farm, 1, "z");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    tu_stop (s_farm.watcher, SIGKILL, 5);
    s_farm.watcher = 0;
    // While it is down: a pair two directories deep, and a directory deeper
    // than the watcher goes (17 levels below the root).
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp1/day1"), 0755) == 0);
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp1/day1/cam2"), 0755) == 0);
    for (int s = 0; s < 2; s++) {
        char name[64], to[4200];
        snprintf (name, sizeof name, "z_0001_%c.tif", s ? 'b' : 'a');
        size_t len;
        char *bytes = s_src (name, &len);
        snprintf (to, sizeof to, "%s/data/exp1/day1/cam2/%s", s_farm.dir, name);
        tu_spit (to, bytes, len);
        free (bytes);
    }
    char deep[4200];
    int at = snprintf (deep, sizeof deep, "%s/data/exp1", s_farm.dir);
    for (int i = 2; i <= 17; i++) {
        at += snprintf (deep + at, sizeof deep - (size_t) at, "/l%d", i);
        ck_assert (mkdir (deep, 0755) == 0);
    }
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_assert_done_once ("day1/cam2/z_0001");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log",
                                "/l17' is 17 directories below the root, over the 16 the "
                                "watcher descends (its depth limit)",
                                5000));
}
END_TEST

// Issue 14: a RAM disk (as an NFS or CIFS share would be) mounted two
// levels below an experiment while the watcher runs: the frames landing in
// it are reported; with the default watcher/ignore, the temporary names of
// cameras, Windows and rsync landing there are not (before: nothing in the
// mount was seen, and x.tif.tmp-AB12CD was reported).
START_TEST (a_file_system_mounted_two_levels_deep_is_watched_and_temporary_names_are_left_out)
{
    if (geteuid () != 0) {
        printf ("skipped: mounting a tmpfs needs root\n");
        return;
    }
    if (unshare (CLONE_NEWNS) != 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        printf ("skipped: cannot make a mount namespace: %s\n", strerror (errno));
        return;
    }
    tu_farm_conf (&s_farm, "noop", 1, "32", "");
    char day[4096];
    snprintf (day, sizeof day, "%s", tu_path (s_farm.dir, "data/exp1/cam1/day2"));
    mkdir (tu_path (s_farm.dir, "data/exp1"), 0755);
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp1/cam1"), 0755) == 0
               && mkdir (day, 0755) == 0);
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    ck_assert_msg (mount ("tmpfs", day, "tmpfs", 0, "size=4m") == 0, "mount: %s",
                   strerror (errno));
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log",
                                    "day2' is another file system now: watching it afresh", 5000),
                   "the watcher did not notice the mount");
    static const char *temporary[] = {"x_0001_a.tif.tmp-AB12CD", ".x_0001_b.tif.Xy12Ab",
                                      "~$notes.docx", "Thumbs.db", "desktop.ini",
                                      "x_0002_a.tif.part", "x_0002_b.tif.partial",
                                      "scan.crdownload", "x.TMP", "x_0003_a.tif~"};
    char path[4200];
    for (size_t i = 0; i < sizeof temporary / sizeof temporary[0]; i++) {
        snprintf (path, sizeof path, "%s/%s", day, temporary[i]);
        tu_spit (path, "temporary", 9);
    }
    snprintf (path, sizeof path, "%s/x_0001_a.tif", day);
    tu_spit (path, "frame a", 7);
    snprintf (path, sizeof path, "%s/x_0001_b.tif", day);
    tu_spit (path, "frame b", 7);
    for (int i = 0; i < 100 && tu_farm_sql (&s_farm, "SELECT count(*) FROM files") < 2; i++)
        usleep (100000);
    // A last frame, written once the temporary files had time to settle
    // (watcher/settle_ms, 500): when it is recorded, they would have been.
    usleep (600000);
    snprintf (path, sizeof path, "%s/x_0002_a.tif", day);
    tu_spit (path, "frame c", 7);
    for (int i = 0; i < 100 && tu_farm_sql (&s_farm, "SELECT count(*) FROM files") < 3; i++)
        usleep (100000);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files WHERE name IN"
                                            " ('cam1/day2/x_0001_a.tif', 'cam1/day2/x_0001_b.tif',"
                                            " 'cam1/day2/x_0002_a.tif')"),
                      3);
    char *names = tu_farm_sql_text (&s_farm, "SELECT group_concat(name, ' ') FROM files");
    ck_assert_msg (tu_farm_sql (&s_farm, "SELECT count(*) FROM files") == 3, "recorded: %s",
                   names);
    free (names);
    tu_stop (s_farm.watcher, SIGTERM, 5), s_farm.watcher = 0;
    umount2 (day, MNT_DETACH);
}
END_TEST

// ---------------------------------------------------------------------------
// Masks (issue 16, section 5): piv/mask of the configuration names a mask
// image every agent applies.

// Writes a mask of w x h into the farm's directory as 'name' (8-bit TIFF):
// 255 (the flow) but for rows [y0, y1), zero (a wall). In place: the file
// keeps its inode, as a mask rewritten by an editor would.
static void
s_write_mask (const char *name, int w, int h, int y0, int y1)
{
    piv_image_t *mask = piv_image_new (w, h);
    ck_assert (mask != NULL);
    for (int r = 0; r < h; r++)
        for (int c = 0; c < w; c++)
            piv_image_data (mask)[r * w + c] = r >= y0 && r < y1 ? 0 : 255;
    char err[512];
    const char *tmp = tu_path (s_farm.dir, "mask-new.tif");
    const piv_image_t *frames[] = {mask};
    ck_assert_msg (piv_image_save (tmp, frames, 1, 8, err, sizeof err) == 0, "%s", err);
    piv_image_destroy (&mask);
    size_t len;
    char *bytes = tu_slurp (tmp, &len);
    ck_assert (bytes != NULL);
    tu_spit (tu_path (s_farm.dir, name), bytes, len);
    free (bytes);
    unlink (tmp);
}

// Sets piv/mask = ./mask.tif (relative: the configuration's directory) and
// starts the farm with one agent.
static void
s_start_masked_farm (void)
{
    tu_farm_conf_replace (&s_farm, "    iterations = 1\n",
                          "    iterations = 1\n    mask = ./mask.tif\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
}

// Checks the field written for pair <prefix>_<i>: every vector whose window
// centre lies in rows [y0, y1) is flag 2 (outside the flow), every other
// one measured, nearly all valid at the known uniform shift; the store's
// valid fraction is the file's; the file's header names the mask.
static void
s_check_masked (const char *prefix, int i, int y0, int y1)
{
    char path[4096], err[512], stem[64];
    snprintf (stem, sizeof stem, "%s_%04d", prefix, i);
    snprintf (path, sizeof path, "%s/results/exp1/%s.txt", s_farm.dir, stem);
    piv_field_t *f = piv_field_read_txt (path, err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    int in = 0, in_masked = 0, out = 0, out_valid = 0, out_masked = 0;
    for (int k = 0; k < f->nx * f->ny; k++) {
        long row = lrintf (f->y[k] - 0.5f);
        if (row >= y0 && row < y1) {
            in++;
            in_masked += f->flags[k] == PIV_FLAG_INVALID;
            continue;
        }
        out++;
        out_masked += f->flags[k] == PIV_FLAG_INVALID;
        out_valid += f->flags[k] == PIV_FLAG_VALID && fabsf (f->u[k] - 3.3f) < 0.2f
                     && fabsf (f->v[k] + 1.7f) < 0.2f;
    }
    ck_assert_msg (in > 0 && in_masked == in, "%s: %d of the %d vectors in the band masked",
                   stem, in_masked, in);
    ck_assert_msg (out_masked == 0 && out_valid >= out * 95 / 100,
                   "%s: outside the band %d masked, %d of %d valid", stem, out_masked, out_valid,
                   out);
    int64_t stored = tu_farm_sql (&s_farm,
                                  "SELECT CAST (round (r.valid_fraction * 10000) AS INTEGER) "
                                  "FROM results r JOIN pairs p ON p.id = r.pair WHERE p.stem = '%s'",
                                  stem);
    int valid = 0;
    for (int k = 0; k < f->nx * f->ny; k++)
        valid += f->flags[k] == PIV_FLAG_VALID;
    ck_assert_int_eq (stored, lrint (10000.0 * valid / (f->nx * f->ny)));
    piv_field_destroy (&f);
    char *text = tu_slurp (path, NULL), expect[4200];
    snprintf (expect, sizeof expect, " mask=%s/mask.tif\n", s_farm.dir);
    ck_assert_msg (text && strstr (text, expect), "%s", text ? text : "(no result)");
    free (text);
}

START_TEST (a_mask_marks_the_vectors_of_a_wall_outside_the_flow_and_leaves_the_rest)
{
    tu_farm_render (&s_farm, 2, "p");
    s_write_mask ("mask.tif", 256, 256, 100, 156);
    s_start_masked_farm ();
    tu_farm_land (&s_farm, "p", 1, 2, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 2, 120);
    ck_assert_msg (c.done == 2 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    s_check_masked ("p", 1, 100, 156);
    s_check_masked ("p", 2, 100, 156);
}
END_TEST

// Waits (up to a minute) until exp1 has at least 'failed' failed and 'done'
// done pairs; asserts it has exactly those, and that the agent still runs.
static void
s_wait_failed_done (int64_t failed, int64_t done)
{
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 600 && (c.failed < failed || c.done < done); i++)
        usleep (100000), c = tu_farm_counts (&s_farm);
    ck_assert_msg (c.failed == failed && c.done == done, "failed %lld done %lld",
                   (long long) c.failed, (long long) c.done);
    ck_assert (tu_alive (s_farm.agents[0]));
}

// Asserts that the reason recorded for pair 'stem' holds 'expect' (in which
// %s is the farm's directory).
static void
s_check_reason (const char *stem, const char *expect)
{
    char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs WHERE stem = '%s'", stem);
    char text[4200];
    snprintf (text, sizeof text, expect, s_farm.dir);
    ck_assert_msg (error && strstr (error, text), "%s: %s", stem, error ? error : "(no error)");
    free (error);
}

START_TEST (a_mask_of_the_wrong_size_fails_the_pair_with_its_sizes_and_the_agent_goes_on)
{
    tu_farm_render (&s_farm, 3, "w");
    s_write_mask ("mask.tif", 128, 64, 10, 20);
    s_start_masked_farm ();
    tu_farm_land (&s_farm, "w", 1, 1, 0);
    s_wait_failed_done (1, 0);
    s_check_reason ("w_0001",
                    "mask '%s/mask.tif' is 128x64, the frames of pair 'exp1/w_0001' are 256x256");
    // The mask put right, the next pair is done.
    s_write_mask ("mask.tif", 256, 256, 100, 156);
    tu_farm_land (&s_farm, "w", 2, 2, 0);
    s_wait_failed_done (1, 1);
    s_check_masked ("w", 2, 100, 156);
    // A mask that is not there fails the pair naming it.
    unlink (tu_path (s_farm.dir, "mask.tif"));
    tu_farm_land (&s_farm, "w", 3, 3, 0);
    s_wait_failed_done (2, 1);
    s_check_reason ("w_0003", "cannot open mask '%s/mask.tif': No such file or directory");
}
END_TEST

START_TEST (a_mask_rewritten_between_pairs_is_read_again)
{
    tu_farm_render (&s_farm, 2, "r");
    s_write_mask ("mask.tif", 256, 256, 36, 60);
    s_start_masked_farm ();
    tu_farm_land (&s_farm, "r", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 120).done, 1);
    // Same size, same inode, the wall moved: only its times tell.
    struct stat before, after;
    ck_assert (stat (tu_path (s_farm.dir, "mask.tif"), &before) == 0);
    s_write_mask ("mask.tif", 256, 256, 164, 188);
    ck_assert (stat (tu_path (s_farm.dir, "mask.tif"), &after) == 0);
    ck_assert (before.st_ino == after.st_ino && before.st_size == after.st_size);
    tu_farm_land (&s_farm, "r", 2, 2, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 120).done, 2);
    s_check_masked ("r", 1, 36, 60);
    s_check_masked ("r", 2, 164, 188);
}
END_TEST

// agent/result_format = field (issue 18): the agent writes <stem>.pvf, the
// field's binary encoding, which piv_field_decode reads back to the known
// shift, byte for byte the blob the store keeps; no txt beside it.
START_TEST (an_agent_writes_binary_fields_where_the_configuration_says)
{
    tu_farm_render (&s_farm, 2, "v");
    tu_farm_conf (&s_farm, "piv", 1, "32,16", "    result_format = field\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "v", 1, 2, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 60).done, 2);
    for (int i = 1; i <= 2; i++) {
        char stem[64], path[4200], txt[4200], err[256];
        snprintf (stem, sizeof stem, "v_%04d", i);
        snprintf (path, sizeof path, "%s/results/exp1/%s.pvf", s_farm.dir, stem);
        snprintf (txt, sizeof txt, "%s/results/exp1/%s.txt", s_farm.dir, stem);
        ck_assert_msg (access (txt, F_OK) != 0, "'%s' written too", txt);
        size_t len = 0;
        unsigned char *bytes = (unsigned char *) tu_slurp (path, &len);
        ck_assert_msg (bytes != NULL, "no '%s'", path);
        piv_field_t *f = piv_field_decode (bytes, len, err, sizeof err);
        ck_assert_msg (f != NULL, "%s: %s", path, err);
        piv_field_stats_t st;
        piv_field_stats (f, PIV_FLAG_VALID, &st);
        ck_assert_msg (fabs (st.mean_u - 3.3) < 0.1 && fabs (st.mean_v + 1.7) < 0.1,
                       "%s: mean (%.3f, %.3f)", path, st.mean_u, st.mean_v);
        // 13 bytes a vector, 21 with each vector's uncertainty (the default).
        ck_assert_int_eq (len, 32 + (f->sigma_u ? 21 : 13) * (size_t) f->nx * f->ny);
        piv_field_destroy (&f);
        // The store's blob and path: the same bytes, the .pvf named.
        char *hex = malloc (2 * len + 1);
        for (size_t k = 0; k < len; k++)
            snprintf (hex + 2 * k, 3, "%02X", bytes[k]);
        char *stored = tu_farm_sql_text (&s_farm,
                                         "SELECT hex (r.field) FROM results r JOIN pairs p "
                                         "ON p.id = r.pair WHERE p.stem = '%s'",
                                         stem);
        ck_assert_msg (stored && strcmp (stored, hex) == 0, "%s: the store holds another field",
                       stem);
        char *named = tu_farm_sql_text (&s_farm,
                                        "SELECT r.path FROM results r JOIN pairs p "
                                        "ON p.id = r.pair WHERE p.stem = '%s'",
                                        stem);
        ck_assert_msg (named && strstr (named, ".pvf"), "%s: the store names '%s'", stem,
                       named ? named : "(nothing)");
        free (named);
        free (stored);
        free (hex);
        free (bytes);
    }
}
END_TEST

// Latency mode (agent/latency, issue 27): a pair that finds the agent's
// other worker idle runs on both threads, its field the same to the byte
// as one thread makes of the same frames (an agent with latency = 0).
START_TEST (a_pair_alone_runs_on_every_thread_and_gives_the_bytes_of_one_thread)
{
    tu_farm_render (&s_farm, 3, "a");
    // The same frames again under other names, for the one-thread agent.
    for (int i = 1; i <= 3; i++)
        for (int side = 0; side < 2; side++) {
            char from[64], to[64];
            snprintf (from, sizeof from, "src/a_%04d_%c.tif", i, side ? 'b' : 'a');
            snprintf (to, sizeof to, "src/b_%04d_%c.tif", i, side ? 'b' : 'a');
            size_t len;
            char *bytes = tu_slurp (tu_path (s_farm.dir, from), &len);
            ck_assert_ptr_nonnull (bytes);
            tu_spit (tu_path (s_farm.dir, to), bytes, len);
            free (bytes);
        }
    tu_farm_conf (&s_farm, "piv", 2, "32,16", "    latency = 1\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "-v", NULL);
    for (int i = 1; i <= 3; i++) {
        tu_farm_land (&s_farm, "a", i, i, 0);
        ck_assert_int_eq (tu_farm_wait_done (&s_farm, i, 60).done, i);
    }
    ck_assert_msg (tu_farm_log_has (&s_farm, "agent1.log", "on 2 threads (latency mode", 2000),
                   "no pair alone ran on both threads (agent1.log)");
    ck_assert_int_eq (tu_stop (s_farm.agents[0], SIGTERM, 10), 0);
    s_farm.agents[0] = 0;
    tu_farm_conf_replace (&s_farm, "latency = 1", "latency = 0");
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "-v", NULL);
    tu_farm_land (&s_farm, "b", 1, 3, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 6, 60).done, 6);
    ck_assert_msg (!tu_farm_log_has (&s_farm, "agent2.log", "on 2 threads", 0),
                   "agent/latency = 0 ran a pair on 2 threads (agent2.log)");
    for (int i = 1; i <= 3; i++) {
        const char *q = "SELECT hex (r.field) FROM results r JOIN pairs p ON p.id = r.pair "
                        "WHERE p.stem = '%c_%04d'";
        char *wide = tu_farm_sql_text (&s_farm, q, 'a', i);
        char *one = tu_farm_sql_text (&s_farm, q, 'b', i);
        ck_assert_msg (wide && one && strlen (wide) > 64, "pair %d: no field stored", i);
        ck_assert_msg (strcmp (wide, one) == 0,
                       "pair %d: the field on 2 threads differs from the one on 1", i);
        free (wide);
        free (one);
    }
}
END_TEST

// The next feedback message's stem (malloc'd), or NULL after 30 s.
static char *
s_feedback_stem (zsock_t *sub)
{
    zpoller_t *poller = zpoller_new (sub, NULL);
    char *stem = NULL;
    if (zpoller_wait (poller, 30000)) {
        char *topic = zstr_recv (sub), *json = zstr_recv (sub);
        jdoc_t *doc = json ? jdoc_parse (json, NULL, 0) : NULL;
        const char *s = doc ? jdoc_string (doc, "$.stem") : NULL;
        stem = s ? strdup (s) : NULL;
        jdoc_destroy (&doc);
        zstr_free (&topic);
        zstr_free (&json);
    }
    zpoller_destroy (&poller);
    return stem;
}

// Latency mode under load: pairs landing all at once (each worker one)
// after one alone (both threads) are each recorded once, and the feedback
// of every pair reaches a subscriber once.
START_TEST (pairs_landing_at_once_under_latency_mode_are_each_recorded_once_with_their_feedback)
{
    enum { N = 16 };
    tu_farm_render (&s_farm, N, "m");
    tu_farm_conf (&s_farm, "piv", 2, "32,16", "");  // agent/latency: on by default
    tu_farm_start_broker (&s_farm);
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/publish", s_farm.dir);
    zsock_t *sub = zsock_new_sub (endpoint, "feedback.exp1/");
    ck_assert_ptr_nonnull (sub);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "-v", NULL);
    int seen[N + 1] = {0};
    tu_farm_land (&s_farm, "m", 1, 1, 0);
    char *stem = s_feedback_stem (sub);
    ck_assert_msg (stem && strcmp (stem, "m_0001") == 0, "feedback of '%s', not of m_0001",
                   stem ? stem : "(none)");
    free (stem);
    seen[1] = 1;
    tu_farm_land (&s_farm, "m", 2, N, 0);
    for (int k = 2; k <= N; k++) {
        stem = s_feedback_stem (sub);
        ck_assert_msg (stem != NULL, "only %d feedback messages of %d pairs", k - 1, N);
        int i = 0;
        ck_assert_msg (sscanf (stem, "m_%d", &i) == 1 && i >= 1 && i <= N, "feedback of '%s'",
                       stem);
        seen[i]++;
        free (stem);
    }
    for (int i = 1; i <= N; i++)
        ck_assert_msg (seen[i] == 1, "pair m_%04d: %d feedback messages", i, seen[i]);
    tu_counts_t c = tu_farm_wait_done (&s_farm, N, 60);
    ck_assert_msg (c.done == N && c.failed == 0 && c.pending == 0 && c.dispatched == 0,
                   "done %lld failed %lld pending %lld dispatched %lld", (long long) c.done,
                   (long long) c.failed, (long long) c.pending, (long long) c.dispatched);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count (*) FROM results"), N);
    s_check_results ("m", 1, N);
    ck_assert (tu_farm_log_has (&s_farm, "agent1.log", "on 2 threads (latency mode", 2000));
    zsock_destroy (&sub);
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
    tcase_add_test (tc, an_agent_stopped_past_its_drain_time_hands_its_task_back);
    tcase_add_test (tc, the_broker_killed_under_load_loses_nothing_and_records_nothing_twice);
    tcase_add_test (tc, files_added_while_the_watcher_is_down_are_processed_after_its_restart);
    tcase_add_test (tc, pivctl_status_shows_pairs_by_state_and_the_agents);
    tcase_add_test (tc, files_outside_the_pairing_rule_are_counted_and_named_in_status);
    tcase_add_test (tc,
                    an_agent_long_gone_is_forgotten_and_a_connected_one_kept_however_old_its_hello);
    tcase_add_test (tc, a_polling_watcher_finds_files_a_network_mount_hides_from_inotify);
    tcase_add_test (tc, hidden_and_temporary_files_are_never_reported);
    tcase_add_test (tc, a_bad_pair_fails_after_three_attempts_with_its_reason);
    tcase_add_test (tc, an_agent_maps_the_broker_paths_to_its_own_mount);
    tcase_add_test (tc, a_deferred_pair_waits_for_another_agent_without_an_attempt_counted);
    tcase_add_test (tc, a_frame_rewritten_after_its_pair_failed_is_retried_and_after_done_is_kept);
    tcase_add_test (tc, an_agent_writes_binary_fields_where_the_configuration_says);
    suite_add_tcase (suite, tc);
    // How files arrive: in chunks, touched then filled, in a directory
    // moved in, hard-linked, replaced, deep while the watcher is down.
    TCase *arrival = tcase_create ("arrival");
    tcase_add_checked_fixture (arrival, s_setup, s_teardown);
    tcase_set_timeout (arrival, 240);
    tcase_add_test (arrival, a_frame_written_in_chunks_with_pauses_is_reported_only_once_complete);
    tcase_add_test (arrival, a_polling_watcher_waits_for_a_tiff_written_in_chunks);
    tcase_add_test (arrival, a_frame_touched_then_filled_later_is_reported_once_filled);
    tcase_add_test (arrival, a_directory_moved_in_while_its_files_are_written_is_processed);
    tcase_add_test (arrival, a_frame_published_with_ln_is_reported_live);
    tcase_add_test (arrival, a_frame_replaced_after_its_report_is_reported_again_and_an_unchanged_one_not);
    tcase_add_test (arrival, files_two_directories_deep_landing_while_the_watcher_is_down_are_found_at_restart);
    tcase_add_test (arrival, a_file_system_mounted_two_levels_deep_is_watched_and_temporary_names_are_left_out);
    suite_add_tcase (suite, arrival);
    TCase *masks = tcase_create ("masks");
    tcase_add_checked_fixture (masks, s_setup, s_teardown);
    tcase_set_timeout (masks, 240);
    tcase_add_test (masks, a_mask_marks_the_vectors_of_a_wall_outside_the_flow_and_leaves_the_rest);
    tcase_add_test (masks, a_mask_of_the_wrong_size_fails_the_pair_with_its_sizes_and_the_agent_goes_on);
    tcase_add_test (masks, a_mask_rewritten_between_pairs_is_read_again);
    suite_add_tcase (suite, masks);
    TCase *latency = tcase_create ("latency");
    tcase_add_checked_fixture (latency, s_setup, s_teardown);
    tcase_set_timeout (latency, 240);
    tcase_add_test (latency, a_pair_alone_runs_on_every_thread_and_gives_the_bytes_of_one_thread);
    tcase_add_test (latency,
                    pairs_landing_at_once_under_latency_mode_are_each_recorded_once_with_their_feedback);
    suite_add_tcase (suite, latency);
    return tu_run_suite (suite);
}
