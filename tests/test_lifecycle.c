// test_lifecycle.c — the store's lifecycle as an operator meets it
// (doc/storage.md, "Backup, purge, vacuum, forgetting agents"): the real
// broker, watcher and agents on ipc:// sockets, the real pivctl, and the
// copies and the store read with SQLite as the witness.

#include "common/jdoc.h"
#include "store/store.h"
#include "tests/testutil.h"

#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define s_farm tu_the_farm  // each test's farm (tu_farm_setup, tu_farm_teardown)

// Agent 'a<k>' (k from 1), its log agent<k>.log; its pid.
static int
s_agent (int k)
{
    char id[16], log[32];
    snprintf (id, sizeof id, "a%d", k);
    snprintf (log, sizeof log, "agent%d.log", k);
    return s_farm.agents[k - 1] = tu_farm_start (&s_farm, "pivfarm-agent", log, "--id", id);
}

// The broker, the watcher (its first scan done) and agent a1.
static void
s_start_farm (void)
{
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_agent (1);
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000),
                   "the watcher did not start");
}

// The text of 'sql' over 'path' (read-only) in out ("" if none).
static const char *
s_sql_text (const char *path, const char *sql, char *out, size_t size)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    out[0] = '\0';
    if (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK
        && sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL) == SQLITE_OK
        && sqlite3_step (stmt) == SQLITE_ROW && sqlite3_column_text (stmt, 0))
        snprintf (out, size, "%s", (const char *) sqlite3_column_text (stmt, 0));
    sqlite3_finalize (stmt);
    sqlite3_close (db);
    return out;
}

// ---------------------------------------------------------------------------
// backup

START_TEST (a_backup_taken_while_pairs_are_processed_is_verified_and_holds_the_pairs_done_then)
{
    tu_farm_conf (&s_farm, "noop", 2, "32", "");
    tu_farm_fake (&s_farm, 300, "k");
    s_start_farm ();
    int lander = tu_farm_land_async (&s_farm, "k", 1, 300, 8000);  // some 2.4 s of pairs
    tu_counts_t before = tu_farm_counts (&s_farm);
    for (int i = 0; i < 200 && before.done < 60; i++) {
        usleep (20000);
        before = tu_farm_counts (&s_farm);
    }
    ck_assert_msg (before.done >= 60, "no pairs done: %" PRId64, before.done);
    const char *copy = tu_file (s_farm.dir, "backups/store-1.db");
    mkdir (tu_path (s_farm.dir, "backups"), 0755);
    char out[8192];
    int rc = tu_farm_pivctl (&s_farm, out, sizeof out, "backup", copy, NULL);
    tu_counts_t after = tu_farm_counts (&s_farm);
    ck_assert_msg (rc == 0 && strstr (out, "integrity ok") && strstr (out, "bytes"), "%s", out);
    ck_assert_msg (after.done < 300 || after.pending || after.dispatched || tu_alive (lander),
                   "the run was over before the backup: it proves nothing (%s)", out);
    // The copy: sound, the store's schema, and what was done when it began.
    char text[256];
    ck_assert_str_eq (s_sql_text (copy, "PRAGMA integrity_check", text, sizeof text), "ok");
    ck_assert_int_eq (tu_sql (copy, "SELECT value FROM meta WHERE key = 'schema_version'"),
                      STORE_SCHEMA_VERSION);
    int64_t done = tu_sql (copy, "SELECT count(*) FROM pairs WHERE state = 2");
    ck_assert_msg (done >= before.done && done <= after.done,
                   "the copy holds %" PRId64 " pairs done, the store %" PRId64 " before and %" PRId64
                   " after the backup",
                   done, before.done, after.done);
    ck_assert_int_eq (tu_sql (copy, "SELECT count(*) FROM results"), done);
    ck_assert_str_eq (s_sql_text (copy, "PRAGMA journal_mode", text, sizeof text), "delete");
    ck_assert_msg (access (tu_path (s_farm.dir, "backups/store-1.db.partial"), F_OK) != 0,
                   "the partial copy is left behind");
    // The farm went on meanwhile, and the backup is in the log.
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 300, 60).done, 300);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "backup: the store is copied into", 0));
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'backup'"), 1);
    tu_stop (lander, SIGKILL, 5);
    // Restored as doc/storage.md says: the broker stopped, the WAL and
    // shared memory removed, the copy put in place; it starts on it.
    tu_stop (s_farm.watcher, SIGKILL, 5), s_farm.watcher = 0;
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    int64_t held = tu_sql (copy, "SELECT count(*) FROM pairs");
    size_t len;
    char *bytes = tu_slurp (copy, &len);
    ck_assert (bytes != NULL);
    unlink (tu_path (s_farm.dir, "farm.db-wal"));
    unlink (tu_path (s_farm.dir, "farm.db-shm"));
    tu_spit (tu_path (s_farm.dir, "farm.db"), bytes, len);
    free (bytes);
    tu_farm_start_broker (&s_farm);
    ck_assert (tu_farm_pivctl (&s_farm, out, sizeof out, "status", NULL) == 0);
    ck_assert (tu_farm_counts (&s_farm).done >= done);
    // It goes on from there: every pair it held is done (those pending or
    // out when the copy was made, by the agent still running).
    tu_counts_t c = tu_farm_wait_done (&s_farm, held, 60);
    ck_assert_msg (c.done == held, "%" PRId64 " of %" PRId64 " done",
                   c.done, held);
}
END_TEST

START_TEST (a_backup_is_refused_a_relative_existing_or_unreachable_file_and_leaves_nothing)
{
    // As root, a RAM disk too small for the copy, in a mount namespace of
    // this test's own (the broker started after it shares it; it vanishes
    // with them).
    int root = geteuid () == 0;
    if (root)
        ck_assert (unshare (CLONE_NEWNS) == 0
                   && mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    else
        fprintf (stderr, "a full disk: skipped: mounting a RAM disk (tmpfs) needs root\n");
    tu_farm_conf (&s_farm, "noop", 1, "32", "");
    tu_farm_fake (&s_farm, 3, "r");
    s_start_farm ();
    tu_farm_land (&s_farm, "r", 1, 3, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 3, 30).done, 3);
    char out[8192];
    // Relative: the broker's host has no idea of pivctl's directory.
    int rc = tu_farm_pivctl (&s_farm, out, sizeof out, "backup", "store.db", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "'store.db'") && strstr (out, "not an absolute path"),
                   "exit %d: %s", rc, out);
    // A file there already: never written over, left as it was.
    const char *there = tu_file (s_farm.dir, "there.db");
    tu_spit (there, "precious", 8);
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "backup", there, NULL);
    ck_assert_msg (rc == 1 && strstr (out, there) && strstr (out, "exists already"), "exit %d: %s",
                   rc, out);
    size_t len;
    char *bytes = tu_slurp (there, &len);
    ck_assert (bytes && len == 8 && memcmp (bytes, "precious", 8) == 0);
    free (bytes);
    // A symbolic link, even to nowhere: not followed.
    const char *link = tu_file (s_farm.dir, "link.db");
    ck_assert (symlink (tu_path (s_farm.dir, "nowhere.db"), link) == 0);
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "backup", link, NULL);
    ck_assert_msg (rc == 1 && strstr (out, "exists already"), "exit %d: %s", rc, out);
    ck_assert (access (tu_path (s_farm.dir, "nowhere.db"), F_OK) != 0);
    // A directory that is not there: said, nothing made.
    const char *lost = tu_file (s_farm.dir, "no/such/dir/store.db");
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "backup", lost, NULL);
    ck_assert_msg (rc == 1 && strstr (out, "directory") && strstr (out, "does not exist"),
                   "exit %d: %s", rc, out);
    ck_assert (access (tu_path (s_farm.dir, "no"), F_OK) != 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'backup'"), 0);
    // What status says, and the broker serves on.
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "backup", "status", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "failed") && strstr (out, "does not exist"), "%s", out);
    ck_assert_msg (tu_alive (s_farm.broker), "the broker died");
    // A full disk: said, nothing left on it.
    if (root) {
        const char *small = tu_file (s_farm.dir, "small");
        mkdir (small, 0755);
        ck_assert (mount ("tmpfs", small, "tmpfs", 0, "size=64k") == 0);
        const char *full = tu_file (s_farm.dir, "small/store.db");
        rc = tu_farm_pivctl (&s_farm, out, sizeof out, "backup", full, NULL);
        ck_assert_msg (rc == 1 && strstr (out, full) && strstr (out, "file system is full"),
                       "exit %d: %s", rc, out);
        ck_assert_int_eq (tu_entries (small), 0);
        rc = tu_farm_pivctl (&s_farm, out, sizeof out, "backup", "status", NULL);
        ck_assert_msg (rc == 0 && strstr (out, "file system is full"), "%s", out);
        tu_stop (s_farm.broker, SIGKILL, 5);  // before the mount goes
        s_farm.broker = 0;
        umount2 (small, MNT_DETACH);
    }
}
END_TEST


// ---------------------------------------------------------------------------
// purge

// Copies the pairs first .. last of src/<prefix>_* into data/<exp>/.
static void
s_land_into (const char *exp, const char *prefix, int first, int last)
{
    mkdir (tu_path (s_farm.dir, tu_path ("data", exp)), 0755);
    for (int i = first; i <= last; i++)
        for (int side = 0; side < 2; side++) {
            char name[128], from[4096], to[4096];
            snprintf (name, sizeof name, "%s_%04d_%c.tif", prefix, i, side ? 'b' : 'a');
            snprintf (from, sizeof from, "%s/src/%s", s_farm.dir, name);
            snprintf (to, sizeof to, "%s/data/%s/%s", s_farm.dir, exp, name);
            tu_copy (from, to);
        }
}

// Rows of 'table' (a column 'experiment') for experiment 'name', in the
// farm's store.
static int64_t
s_rows_of (const char *table, const char *name)
{
    return tu_farm_sql (&s_farm,
                        "SELECT count(*) FROM %s WHERE experiment = (SELECT id FROM experiments"
                        " WHERE name = '%s')",
                        table, name);
}

// 1 when 'pivctl status --json' lists experiment 'name'.
static int
s_status_lists (const char *name)
{
    char out[1 << 16];
    ck_assert (tu_farm_pivctl (&s_farm, out, sizeof out, "status", "--json", NULL) == 0);
    char quoted[300];
    snprintf (quoted, sizeof quoted, "\"experiment\":\"%s\"", name);
    return strstr (out, quoted) != NULL;
}

START_TEST (purge_refuses_a_running_experiment_then_removes_a_finished_one_and_nothing_else)
{
    tu_farm_conf (&s_farm, "piv", 2, "32", "");
    tu_farm_render (&s_farm, 7, "p");
    s_start_farm ();
    char out[8192];
    // exp1 paused with pairs waiting: running.
    ck_assert (tu_farm_pivctl (&s_farm, out, sizeof out, "pause", "-e", "exp1", NULL) == 0);
    tu_farm_land (&s_farm, "p", 1, 6, 0);
    s_land_into ("exp2", "p", 1, 3);
    for (int i = 0; i < 100 && tu_farm_counts (&s_farm).pending < 6; i++)
        usleep (50000);
    ck_assert_int_eq (tu_farm_counts (&s_farm).pending, 6);
    int rc = tu_farm_pivctl (&s_farm, out, sizeof out, "purge", "exp1", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "'exp1' is running: 6 pair(s) pending, 0 dispatched"),
                   "exit %d: %s", rc, out);
    ck_assert_int_eq (s_rows_of ("pairs", "exp1"), 6);
    // Finished: purged, counted; exp2 as it was.
    ck_assert (tu_farm_pivctl (&s_farm, out, sizeof out, "resume", "-e", "exp1", NULL) == 0);
    ck_assert (tu_farm_pivctl (&s_farm, out, sizeof out, "rate", "500", "-e", "exp1", NULL) == 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 6, 120).done, 6);
    for (int i = 0; i < 200 && tu_farm_sql (&s_farm, "SELECT count(*) FROM results") < 9; i++)
        usleep (50000);
    for (int i = 0; i < 100 && tu_farm_sql (&s_farm, "SELECT count(*) FROM stats") < 2; i++)
        usleep (50000);  // both checkpointed (broker/stats_ms)
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM stats"), 2);
    int64_t events2 = s_rows_of ("events", "exp2"), results = 0;
    results = tu_farm_sql (&s_farm, "SELECT count(*) FROM results");
    ck_assert_int_eq (results, 9);
    ck_assert (s_status_lists ("exp1"));
    int64_t id1 = tu_farm_sql (&s_farm, "SELECT id FROM experiments WHERE name = 'exp1'");
    ck_assert (s_rows_of ("events", "exp1") > 0 && s_rows_of ("settings", "exp1") > 0);
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "purge", "exp1", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "purged exp1: 6 pairs, 6 results, 12 files")
                       && strstr (out, "frames are left on disk"),
                   "exit %d: %s", rc, out);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments WHERE name = 'exp1'"),
                      0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results"), 3);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs"), 3);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files"), 6);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM attempts a JOIN pairs p"
                                            " ON p.id = a.pair"),
                      tu_farm_sql (&s_farm, "SELECT count(*) FROM attempts"));
    const char *tables[] = {"events", "settings", "stats", "pairs", "files", "allocations",
                            "ensemble_jobs"};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        ck_assert_msg (tu_farm_sql (&s_farm, "SELECT count(*) FROM %s WHERE experiment = %" PRId64,
                                    tables[t], id1) == 0,
                       "%s keeps rows of the purged exp1", tables[t]);
    ck_assert_int_eq (s_rows_of ("events", "exp2"), events2);
    ck_assert_int_eq (s_rows_of ("stats", "exp2"), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM stats"), 1);
    char *line = tu_farm_sql_text (&s_farm, "SELECT payload FROM events WHERE kind = 'purge'");
    ck_assert_msg (line && strstr (line, "experiment=exp1") && strstr (line, "pairs=6"), "%s",
                   line ? line : "(no purge event)");
    free (line);
    ck_assert (!s_status_lists ("exp1"));
    ck_assert (s_status_lists ("exp2"));
    ck_assert_int_eq (tu_entries (tu_path (s_farm.dir, "data/exp1")), 12);
    // The room it held goes back to the disk with a vacuum.
    ck_assert (tu_farm_pivctl (&s_farm, out, sizeof out, "vacuum", "--json", NULL) == 0);
    char why[256];
    jdoc_t *doc = jdoc_parse (out, why, sizeof why);
    ck_assert_msg (doc != NULL, "%s: %s", why, out);
    int64_t before = jdoc_int (doc, 0, "$.vacuum.bytes_before");
    int64_t after = jdoc_int (doc, 0, "$.vacuum.bytes_after");
    jdoc_destroy (&doc);
    struct stat st;
    ck_assert (stat (tu_path (s_farm.dir, "farm.db"), &st) == 0);
    ck_assert_msg (after > 0 && after < before && st.st_size == after,
                   "vacuum: %" PRId64 " -> %" PRId64 " bytes, the file %lld", before, after,
                   (long long) st.st_size);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'vacuum'"), 1);
    char text[64];
    ck_assert_str_eq (s_sql_text (tu_path (s_farm.dir, "farm.db"), "PRAGMA integrity_check", text,
                                  sizeof text),
                      "ok");
    // Unknown now; the farm goes on with exp2, and a new frame of exp1
    // makes a new experiment of that name.
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "purge", "exp1", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "no experiment 'exp1'"), "exit %d: %s", rc, out);
    s_land_into ("exp2", "p", 4, 4);
    tu_farm_land (&s_farm, "p", 7, 7, 0);
    for (int i = 0; i < 200 && tu_farm_sql (&s_farm, "SELECT count(*) FROM results") < 5; i++)
        usleep (50000);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results"), 5);
    ck_assert_int_eq (tu_farm_counts (&s_farm).done, 1);
    ck_assert_msg (tu_alive (s_farm.broker), "the broker died");
}
END_TEST

START_TEST (purge_files_removes_the_frames_the_store_names_and_follows_no_link)
{
    tu_farm_conf (&s_farm, "noop", 2, "32", "");
    tu_farm_fake (&s_farm, 4, "q");
    s_start_farm ();
    tu_farm_land (&s_farm, "q", 1, 4, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 4, 60).done, 4);
    // A frame swapped for a link to a file outside the root, and a file
    // the store does not name.
    const char *outside = tu_file (s_farm.dir, "outside.tif");
    tu_spit (outside, "keep", 4);
    const char *frame = tu_file (s_farm.dir, "data/exp1/q_0002_b.tif");
    ck_assert (unlink (frame) == 0 && symlink (outside, frame) == 0);
    tu_spit (tu_path (s_farm.dir, "data/exp1/notes.txt"), "mine", 4);
    char out[8192];
    int rc = tu_farm_pivctl (&s_farm, out, sizeof out, "purge", "exp1", "--files", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "frames: 7 removed, 0 gone already, 1 kept"),
                   "exit %d: %s", rc, out);
    ck_assert_int_eq (tu_entries (tu_path (s_farm.dir, "data/exp1")), 2);  // the link, notes.txt
    ck_assert (access (outside, F_OK) == 0);
    ck_assert (access (tu_path (s_farm.dir, "data/exp1/notes.txt"), F_OK) == 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "purge: kept", 0));
}
END_TEST

START_TEST (purge_refuses_the_source_of_a_replay_and_a_replay_keeps_its_source_frames)
{
    tu_farm_conf (&s_farm, "piv", 2, "32", "");
    tu_farm_render (&s_farm, 2, "s");
    s_start_farm ();
    tu_farm_land (&s_farm, "s", 1, 2, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 60).done, 2);
    char out[8192];
    int rc = tu_farm_pivctl (&s_farm, out, sizeof out, "replay", "exp1", "--as", "again",
                             "--speed", "max", "--wait", "60", NULL);
    ck_assert_msg (rc == 0, "replay: exit %d: %s", rc, out);
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "purge", "exp1", "--files", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "'exp1' is the source of 1 replay(s) ('again')"),
                   "exit %d: %s", rc, out);
    ck_assert_int_eq (tu_entries (tu_path (s_farm.dir, "data/exp1")), 4);
    // The replay goes, its source's frames stay; then the source may go.
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "purge", "again", "--files", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "purged again: 2 pairs, 2 results")
                       && strstr (out, "a replay's frames are its source's"),
                   "exit %d: %s", rc, out);
    ck_assert_int_eq (tu_entries (tu_path (s_farm.dir, "data/exp1")), 4);
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "purge", "exp1", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "purged exp1: 2 pairs"), "exit %d: %s", rc, out);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments"), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results"), 0);
}
END_TEST

// ---------------------------------------------------------------------------
// forget-agents

START_TEST (forget_agents_removes_those_long_gone_and_never_a_connected_one)
{
    tu_farm_conf (&s_farm, "noop", 1, "32", "");
    s_start_farm ();
    s_agent (2);
    for (int i = 0; i < 100 && tu_farm_sql (&s_farm, "SELECT count(*) FROM agents") < 2; i++)
        usleep (50000);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM agents"), 2);
    tu_stop (s_farm.agents[1], SIGKILL, 5);
    s_farm.agents[1] = 0;
    sleep (3);  // a2 gone for 3 s; a1 connected, its row untouched since its HELLO
    char out[8192];
    int rc = tu_farm_pivctl (&s_farm, out, sizeof out, "forget-agents", "--older-than", "2s", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "forgot 1 agent(s) not seen for 2s: 'a2'"),
                   "exit %d: %s", rc, out);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM agents WHERE name = 'a1'"), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM agents"), 1);
    char *line = tu_farm_sql_text (&s_farm, "SELECT payload FROM events"
                                            " WHERE kind = 'agents-forgotten'");
    ck_assert_msg (line && strstr (line, "count=1 agents='a2'"), "%s", line ? line : "(none)");
    free (line);
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "forget-agents", "--older-than", "30m", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "no agent unseen for 30m"), "exit %d: %s", rc, out);
    // a1 still works.
    tu_farm_fake (&s_farm, 2, "g");
    tu_farm_land (&s_farm, "g", 1, 2, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 30).done, 2);
    rc = tu_farm_pivctl (&s_farm, out, sizeof out, "forget-agents", "--older-than", "soon", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "bad --older-than 'soon'"), "exit %d: %s", rc, out);
}
END_TEST

// ---------------------------------------------------------------------------
// The migration's backup

// Starts the broker and waits for it to answer (1) or to exit (0).
static int
s_broker_starts (void)
{
    s_farm.broker = tu_farm_start (&s_farm, "pivfarm-broker", "broker.log", NULL, NULL);
    char out[4096];
    for (int i = 0; i < 100; i++) {
        if (!tu_alive (s_farm.broker)) {
            s_farm.broker = 0;
            return 0;
        }
        if (tu_farm_pivctl (&s_farm, out, sizeof out, "status", NULL) == 0)
            return 1;
        usleep (100000);
    }
    ck_abort_msg ("the broker neither answers nor exits");
    return 0;
}

START_TEST (a_migration_backs_the_store_up_first_and_a_failed_backup_changes_nothing)
{
    tu_farm_conf (&s_farm, "noop", 1, "32", "");
    tu_farm_fake (&s_farm, 3, "m");
    s_start_farm ();
    tu_farm_land (&s_farm, "m", 1, 3, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 3, 30).done, 3);
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    ck_assert_int_eq (tu_store_to_previous (tu_path (s_farm.dir, "farm.db")), 7);
    // The copy first, then the step, each said.
    const char *db = tu_file (s_farm.dir, "farm.db");
    const char *bak = tu_file (s_farm.dir, "farm.db.v7.bak");
    ck_assert (s_broker_starts ());
    char text[64];
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "has schema version 7: copied into '", 0));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "farm.db.v7.bak' before its migration", 0));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "schema from version 7 to 8 (step 1 of 1)", 0));
    ck_assert_str_eq (s_sql_text (bak, "PRAGMA integrity_check", text, sizeof text), "ok");
    ck_assert_int_eq (tu_sql (bak, "SELECT value FROM meta WHERE key = 'schema_version'"), 7);
    ck_assert_int_eq (tu_sql (bak, "SELECT count(*) FROM pairs WHERE state = 2"), 3);
    ck_assert_int_eq (tu_sql (bak, "SELECT count(*) FROM sqlite_master WHERE name = 'ensemble_jobs'"), 0);
    ck_assert_int_eq (tu_sql (db, "SELECT value FROM meta WHERE key = 'schema_version'"), 8);
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    // A backup that cannot be made (the name is taken): no start, the store
    // as it was.
    ck_assert_int_eq (tu_store_to_previous (tu_path (s_farm.dir, "farm.db")), 7);
    ck_assert (!s_broker_starts ());
    char *log = tu_slurp (tu_path (s_farm.dir, "broker.log"), NULL);
    ck_assert_msg (log && strstr (log, "its backup failed, nothing was changed")
                       && strstr (log, "farm.db.v7.bak': it exists already"),
                   "%s", log ? log : "(no log)");
    free (log);
    ck_assert_int_eq (tu_sql (db, "SELECT value FROM meta WHERE key = 'schema_version'"), 7);
    ck_assert_int_eq (tu_sql (db, "SELECT count(*) FROM sqlite_master WHERE name = 'ensemble_jobs'"), 0);
    ck_assert_int_eq (tu_sql (db, "SELECT count(*) FROM pairs WHERE state = 2"), 3);
    // Turned off: migrated without a copy.
    tu_farm_conf_replace (&s_farm, "    store = ./farm.db\n",
                          "    store = ./farm.db\n    backup_before_migrate = off\n");
    unlink (bak);
    ck_assert (s_broker_starts ());
    ck_assert (access (bak, F_OK) != 0);
    ck_assert_int_eq (tu_sql (db, "SELECT value FROM meta WHERE key = 'schema_version'"), 8);
    ck_assert_int_eq (tu_farm_counts (&s_farm).done, 3);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("lifecycle");
    TCase *tc = tcase_create ("store");
    tcase_add_checked_fixture (tc, tu_farm_setup, tu_farm_teardown);
    tcase_set_timeout (tc, 180);
    tcase_add_test (tc, a_backup_taken_while_pairs_are_processed_is_verified_and_holds_the_pairs_done_then);
    tcase_add_test (tc, a_backup_is_refused_a_relative_existing_or_unreachable_file_and_leaves_nothing);
    tcase_add_test (tc, purge_refuses_a_running_experiment_then_removes_a_finished_one_and_nothing_else);
    tcase_add_test (tc, purge_files_removes_the_frames_the_store_names_and_follows_no_link);
    tcase_add_test (tc, purge_refuses_the_source_of_a_replay_and_a_replay_keeps_its_source_frames);
    tcase_add_test (tc, forget_agents_removes_those_long_gone_and_never_a_connected_one);
    tcase_add_test (tc, a_migration_backs_the_store_up_first_and_a_failed_backup_changes_nothing);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
