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

// The integer of 'sql' over the SQLite file 'path', opened read-only; -1
// when it cannot be read.
static int64_t
s_sql (const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    int64_t value = -1;
    if (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK
        && sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL) == SQLITE_OK
        && sqlite3_step (stmt) == SQLITE_ROW)
        value = sqlite3_column_int64 (stmt, 0);
    sqlite3_finalize (stmt);
    sqlite3_close (db);
    return value;
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
    ck_assert_int_eq (s_sql (copy, "SELECT value FROM meta WHERE key = 'schema_version'"),
                      STORE_SCHEMA_VERSION);
    int64_t done = s_sql (copy, "SELECT count(*) FROM pairs WHERE state = 2");
    ck_assert_msg (done >= before.done && done <= after.done,
                   "the copy holds %" PRId64 " pairs done, the store %" PRId64 " before and %" PRId64
                   " after the backup",
                   done, before.done, after.done);
    ck_assert_int_eq (s_sql (copy, "SELECT count(*) FROM results"), done);
    ck_assert_str_eq (s_sql_text (copy, "PRAGMA journal_mode", text, sizeof text), "delete");
    ck_assert_msg (access (tu_path (s_farm.dir, "backups/store-1.db.partial"), F_OK) != 0,
                   "the partial copy is left behind");
    // The farm went on meanwhile, and the backup is in the log.
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 300, 60).done, 300);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "backup: the store is copied into", 0));
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'backup'"), 1);
    tu_stop (lander, SIGKILL, 5);
}
END_TEST

START_TEST (a_backup_is_refused_a_relative_existing_or_unreachable_file_and_leaves_nothing)
{
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
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
