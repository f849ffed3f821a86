// operate.c — what operators change through the control channel:
// experiments they create, settings, pairs skipped, retried or backfilled,
// fast space allocated and released, where archived files went.

#include "store/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t
store_experiment_create (store_t *self, const char *name, const char *source,
                         const char *settings, int64_t now_ns)
{
    sqlite3_stmt *stmt = self->stmts[S_EXPERIMENT_GET];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    int64_t id;
    int found, rc = st_query_int (self, stmt, &id, &found);
    if (rc != SQLITE_OK)
        return st_fail_read (self, rc, "cannot look up experiment '%s'", name);
    if (found) {
        st_error (self, "cannot create experiment '%s' in '%s': the name is taken", name,
                 self->path);
        return -1;
    }
    if (st_write_begin (self))
        return -1;
    // An experiment of its own files keeps source NULL, as store_experiment
    // makes them.
    if (source && (!*source || strcmp (source, name) == 0))
        source = NULL;
    stmt = self->stmts[S_EXPERIMENT_CREATE];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    st_bind_text (stmt, 2, source);
    sqlite3_bind_text (stmt, 3, settings ? settings : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 4, now_ns);
    rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        id = sqlite3_last_insert_rowid (self->db);
        st_event (self, &rc, "experiment", id, 0, now_ns, "source=%s settings=%s name=%s",
                 source ? source : name, settings ? settings : "", name);
    }
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot create experiment '%s'", name);
    st_write_end (self);
    return id;
}

int
store_experiment_adopt (store_t *self, int64_t id, const char *name, const char *source,
                        const char *settings, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_EXPERIMENT_ADOPT];
    sqlite3_bind_int64 (stmt, 1, id);
    st_bind_text (stmt, 2, source && *source && strcmp (source, name) != 0 ? source : NULL);
    sqlite3_bind_text (stmt, 3, settings ? settings : "", -1, SQLITE_STATIC);
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE && sqlite3_changes (self->db) == 0) {
        st_write_end (self);
        st_error (self, "experiment '%s' in '%s' has files of its own: choose another name",
                  name, self->path);
        return -1;
    }
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "experiment", id, 0, now_ns, "source=%s settings=%s name=%s",
                  source && *source ? source : name, settings ? settings : "", name);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot give experiment '%s' its replay", name);
    st_write_end (self);
    return 0;
}

int
store_pair_skip (store_t *self, int64_t pair, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    int last;
    int64_t experiment;
    if (st_pair_pending (self, pair, "cannot skip", &experiment, &last))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_PAIR_SKIP];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "pair", experiment, pair, now_ns, "skip");
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot skip pair %" PRId64, pair);
    return st_write_end (self);
}

int
store_setting_set (store_t *self, int64_t experiment, const char *key, const char *value,
                   int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[value ? S_SETTING_PUT : S_SETTING_DELETE];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, key, -1, SQLITE_STATIC);
    if (value) {
        sqlite3_bind_text (stmt, 3, value, -1, SQLITE_STATIC);
        sqlite3_bind_int64 (stmt, 4, now_ns);
    }
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE && !self->call_dirty) {
        st_write_nothing (self);  // removing what was not set changes nothing
        return 0;
    }
    if (rc == SQLITE_DONE && value)
        st_event (self, &rc, "setting", experiment, 0, now_ns, "%s=%s", key, value);
    else if (rc == SQLITE_DONE)
        st_event (self, &rc, "setting", experiment, 0, now_ns, "%s", key);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot set '%s' of experiment %" PRId64, key, experiment);
    return st_write_end (self);
}

// Moves one listed pair back to PENDING (store_pairs_reset), then tells fn.
static int
s_reset_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    st_list_t *list = ctx;
    store_t *self = list->store;
    int64_t pair = batch->num[r][0];
    int retry = list->value == STORE_FAILED;
    sqlite3_stmt *stmt = self->stmts[retry ? S_PAIR_RESET_FAILED : S_PAIR_RESET_SKIPPED];
    sqlite3_bind_int64 (stmt, 1, pair);
    *rc = st_exec (self, stmt);
    if (*rc == SQLITE_DONE)
        st_event (self, rc, "pair", list->experiment, pair, list->now_ns, "%s",
                 retry ? "retry" : "backfill");
    if (*rc != SQLITE_DONE)
        return 1;
    *rc = SQLITE_OK;
    return ((store_pair_fn *) list->fn) (list->arg, pair, st_batch_text (batch, r, 0),
                                         st_batch_text (batch, r, 1), st_batch_text (batch, r, 2),
                                         st_batch_text (batch, r, 3),
                                         retry ? 0 : (int) batch->num[r][1]);
}

int
store_pairs_reset (store_t *self, int64_t experiment, store_state_t from, int64_t now_ns,
                   store_pair_fn *fn, void *arg)
{
    if (from != STORE_FAILED && from != STORE_SKIPPED) {
        st_error (self, "cannot reset the pairs of experiment %" PRId64 " in '%s': state %d is "
                 "neither failed nor skipped", experiment, self->path, (int) from);
        return -1;
    }
    if (st_write_begin (self))
        return -1;
    st_stmt_id_t which = from == STORE_FAILED ? S_PAIRS_OF_FAILED : S_PAIRS_OF_SKIPPED;
    sqlite3_bind_int64 (self->stmts[which], 4, experiment);
    st_list_t list = {.store = self, .fn = fn, .arg = arg, .value = from,
                     .experiment = experiment, .now_ns = now_ns};
    int rc, moved = st_list (self, S_PAIRS_MAX, which, "iitttt", 0, 0, s_reset_row, &list, &rc);
    if (moved < 0)
        return st_fail (self, rc, "cannot %s the pairs of experiment %" PRId64,
                       from == STORE_FAILED ? "retry" : "backfill", experiment);
    return st_write_end_many (self, moved);
}

int
store_file_retry (store_t *self, int64_t experiment, int64_t file, int64_t now_ns,
                  store_pair_fn *fn, void *arg, int *done)
{
    *done = 0;
    sqlite3_stmt *stmt = self->stmts[S_FILE_VERSION];
    sqlite3_bind_int64 (stmt, 1, file);
    int rc = st_step (self, stmt);
    int64_t paired = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 2) : 0;
    sqlite3_reset (stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot list the pairs of file %" PRId64, file);
    if (paired == 0)
        return 0;  // in no pair yet: nothing to scan for
    if (st_write_begin (self))
        return -1;
    // A file is in two pairs at most: the listing is read whole before fn
    // runs, so that fn may write.
    st_batch_t *batch = calloc (1, sizeof *batch);
    if (!batch)
        return st_fail (self, SQLITE_NOMEM, "cannot list the pairs of file %" PRId64, file);
    stmt = self->stmts[S_FILE_PAIRS];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_int64 (stmt, 2, file);
    int rows = st_batch_fill (self, stmt, "iitttt", batch, &rc);
    int moved = 0, writes = 0, stop = 0;
    rc = rows < 0 ? rc : SQLITE_DONE;
    for (int r = 0; r < rows && rc == SQLITE_DONE; r++) {
        int64_t pair = batch->num[r][0];
        int state = (int) batch->num[r][1];
        if (state == STORE_DONE) {
            st_event (self, &rc, "file-rewritten", experiment, pair, now_ns,
                     "file=%" PRId64 " stem=%s", file, st_batch_text (batch, r, 1));
            writes++;
            (*done)++;
            continue;
        }
        if (state != STORE_FAILED)
            continue;  // pending or out: its agent reads the file as it is now
        stmt = self->stmts[S_PAIR_RESET_FAILED];
        sqlite3_bind_int64 (stmt, 1, pair);
        rc = st_exec (self, stmt);
        if (rc == SQLITE_DONE)
            st_event (self, &rc, "pair", experiment, pair, now_ns, "retry file=%" PRId64, file);
        if (rc != SQLITE_DONE)
            break;
        moved++;
        writes++;
        if (fn && !stop)
            stop = fn (arg, pair, st_batch_text (batch, r, 0), st_batch_text (batch, r, 1),
                       st_batch_text (batch, r, 2), st_batch_text (batch, r, 3), 0);
    }
    free (batch->chars);
    free (batch);
    if (rc != SQLITE_DONE) {
        *done = 0;
        return st_fail (self, rc, "cannot retry the pairs of file %" PRId64, file);
    }
    st_write_end_many (self, writes);
    return moved;
}

// ---------------------------------------------------------------------------
// The storage lifecycle (schema 3; doc/storage.md)

int64_t
store_allocation_add (store_t *self, int64_t experiment, const char *kind, const char *path,
                      int64_t size_bytes, int64_t expires_ns, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_ALLOC_ADD];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 3, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 4, size_bytes);
    sqlite3_bind_int64 (stmt, 5, now_ns);
    sqlite3_bind_int64 (stmt, 6, expires_ns);
    int rc = st_exec (self, stmt);
    int64_t id = -1;
    if (rc == SQLITE_DONE) {
        id = sqlite3_last_insert_rowid (self->db);
        st_event (self, &rc, "allocation", experiment, 0, now_ns,
                 "id=%" PRId64 " kind=%s size=%" PRId64 " expires_ns=%" PRId64 " path=%s", id,
                 kind, size_bytes, expires_ns, path);
    }
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot record the allocation of experiment %" PRId64,
                       experiment);
    st_write_end (self);
    return id;
}

int
store_allocation_state (store_t *self, int64_t id, int64_t experiment, const char *state,
                        int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_ALLOC_STATE];
    sqlite3_bind_int64 (stmt, 1, id);
    sqlite3_bind_text (stmt, 2, state, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 3, now_ns);
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "allocation", experiment, 0, now_ns, "id=%" PRId64 " state=%s", id,
                 state);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot change allocation %" PRId64, id);
    return st_write_end (self);
}

int
store_file_archived (store_t *self, int64_t file, int64_t experiment, const char *sha256,
                     const char *location, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_FILE_ARCHIVED];
    sqlite3_bind_int64 (stmt, 1, file);
    sqlite3_bind_text (stmt, 2, sha256, -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 3, location, -1, SQLITE_STATIC);
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "archived", experiment, 0, now_ns,
                 "file=%" PRId64 " sha256=%s location=%s", file, sha256, location);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot record where file %" PRId64 " was archived", file);
    return st_write_end (self);
}

// ---------------------------------------------------------------------------
// Purging an experiment (doc/storage.md, "Backup, purge, vacuum, forgetting
// agents"). An operator's rare command: its statements are prepared when it
// runs, not at open with the broker's (their text is constant, every value
// bound).

// Runs 'sql' (?1 the experiment, ?2 its name if it takes one) to its end
// as part of the current write call: rows changed in *changes. SQLite's
// code (SQLITE_DONE when it ran).
static int
s_run (store_t *self, const char *sql, int64_t experiment, const char *name, int64_t *changes)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db, sql, -1, &stmt, NULL);
    if (rc != SQLITE_OK) {
        snprintf (self->cause, sizeof self->cause, "%s", sqlite3_errmsg (self->db));
        return rc;
    }
    sqlite3_bind_int64 (stmt, 1, experiment);
    if (name)
        sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
    rc = st_exec (self, stmt);
    if (changes)
        *changes = rc == SQLITE_DONE ? sqlite3_changes (self->db) : 0;
    sqlite3_finalize (stmt);
    return rc;
}

// One integer of a query (?1 the experiment, ?2 its name if it takes it), into *value;
// its text (if text) into text. SQLite's code (SQLITE_OK).
static int
s_ask (store_t *self, const char *sql, int64_t experiment, const char *name, int64_t *value,
       char *text, size_t size)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db, sql, -1, &stmt, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64 (stmt, 1, experiment);
        if (sqlite3_bind_parameter_count (stmt) >= 2)
            sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
        rc = st_step (self, stmt);
        *value = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 0) : 0;
        if (text && size)
            snprintf (text, size, "%s",
                      rc == SQLITE_ROW && st_column_text (stmt, 1) ? st_column_text (stmt, 1) : "");
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    else
        snprintf (self->cause, sizeof self->cause, "%s", sqlite3_errmsg (self->db));
    sqlite3_finalize (stmt);
    return rc;
}

int
store_experiment_busy (store_t *self, int64_t experiment, const char *name,
                       store_experiment_busy_t *out)
{
    memset (out, 0, sizeof *out);
    // The pairs waiting or out are few: the partial indexes count them.
    int rc = s_ask (self, "SELECT count(*) FROM pairs INDEXED BY pairs_pending"
                          " WHERE state = 0 AND experiment = ?1",
                    experiment, name, &out->pending, NULL, 0);
    if (rc == SQLITE_OK)
        rc = s_ask (self, "SELECT count(*) FROM pairs INDEXED BY pairs_dispatched"
                          " WHERE state = 1 AND experiment = ?1",
                    experiment, name, &out->dispatched, NULL, 0);
    if (rc == SQLITE_OK)
        rc = s_ask (self, "SELECT count(*), min (id) FROM ensemble_jobs"
                          " WHERE experiment = ?1 AND state = 'running'",
                    experiment, name, &out->ensembles, out->ensemble, sizeof out->ensemble);
    if (rc == SQLITE_OK)
        rc = s_ask (self, "SELECT count(*), min (name) FROM experiments WHERE source = ?2"
                          " AND id != ?1",
                    experiment, name, &out->replays, out->replay, sizeof out->replay);
    if (rc != SQLITE_OK)
        return st_fail_read (self, rc, "cannot read what experiment '%s' is doing", name);
    return 0;
}

// Runs an open-time style statement (a constant, no values) straight
// through SQLite; SQLite's code, its message in 'cause'.
static int
s_exec (store_t *self, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec (self->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        snprintf (self->cause, sizeof self->cause, "%s", msg ? msg : sqlite3_errmsg (self->db));
    sqlite3_free (msg);
    return rc;
}

int
store_experiment_purge (store_t *self, int64_t experiment, const char *name, int64_t now_ns,
                        store_purge_counts_t *counts)
{
    memset (counts, 0, sizeof *counts);
    if (self->in_tx || self->readonly || self->detached || self->streaming || self->lost) {
        st_error (self, "cannot purge experiment '%s' in '%s': %s", name, self->path,
                  self->in_tx ? "a transaction is open (commit first)"
                  : self->detached ? self->detached
                                   : "the store takes no write now");
        return -1;
    }
    // A transaction of its own, without foreign-key checks: every child
    // row goes before its parent here, and the checks would scan the pairs
    // for every file deleted (no index on pairs' file columns: O(files x
    // pairs), 0.8 s for 2000 files of 1000 pairs). The pragma takes effect
    // only outside a transaction, hence not in the broker's group.
    int rc = s_exec (self, "PRAGMA foreign_keys = OFF");
    if (rc == SQLITE_OK) {
        self->in_begin = 1;  // another process's write lock: fail at once
        rc = s_exec (self, "BEGIN IMMEDIATE");
        self->in_begin = 0;
    }
    // Children first: what hangs off its jobs and pairs, then what names
    // it, then its pairs, files and itself.
#define S_OF_JOBS "(SELECT id FROM ensemble_jobs WHERE experiment = ?1)"
#define S_OF_PAIRS "(SELECT id FROM pairs WHERE experiment = ?1)"
    const struct {
        const char *sql;
        int64_t *count;
    } steps[] = {
        {"DELETE FROM ensemble_partials WHERE job IN " S_OF_JOBS, NULL},
        {"DELETE FROM ensemble_pairs WHERE job IN " S_OF_JOBS, NULL},
        {"DELETE FROM ensemble_jobs WHERE experiment = ?1", &counts->ensemble_jobs},
        {"DELETE FROM uncounted WHERE pair IN " S_OF_PAIRS, NULL},
        {"DELETE FROM results WHERE pair IN " S_OF_PAIRS, &counts->results},
        {"DELETE FROM attempts WHERE pair IN " S_OF_PAIRS, &counts->attempts},
        {"DELETE FROM stats WHERE experiment = ?1", &counts->stats},
        {"DELETE FROM allocations WHERE experiment = ?1", NULL},
        {"DELETE FROM settings WHERE experiment = ?1", &counts->settings},
        {"DELETE FROM events WHERE experiment = ?1", &counts->events},
        {"DELETE FROM pairs WHERE experiment = ?1", &counts->pairs},
        {"DELETE FROM files WHERE experiment = ?1", &counts->files},
        {"DELETE FROM experiments WHERE id = ?1", NULL},
    };
#undef S_OF_JOBS
#undef S_OF_PAIRS
    int began = rc == SQLITE_OK;
    rc = began ? SQLITE_DONE : rc;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && rc == SQLITE_DONE; i++)
        rc = s_run (self, steps[i].sql, experiment, NULL, steps[i].count);
    // The log keeps one line of it: under experiment 0, since its id may
    // be given again.
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "purge", 0, 0, now_ns,
                  "experiment=%s id=%" PRId64 " pairs=%" PRId64 " results=%" PRId64
                  " files=%" PRId64 " events=%" PRId64 " stats=%" PRId64
                  " ensemble_jobs=%" PRId64,
                  name, experiment, counts->pairs, counts->results, counts->files,
                  counts->events, counts->stats, counts->ensemble_jobs);
    if (rc == SQLITE_DONE)
        rc = s_exec (self, "COMMIT") == SQLITE_OK ? SQLITE_DONE : SQLITE_ERROR;
    if (rc != SQLITE_DONE && began && !sqlite3_get_autocommit (self->db))
        sqlite3_exec (self->db, "ROLLBACK", NULL, NULL, NULL);
    s_exec (self, "PRAGMA foreign_keys = ON");
    if (rc != SQLITE_DONE) {
        st_error (self, "cannot purge experiment '%s' in '%s': %s (nothing was removed)", name,
                  self->path, (rc & 0xff) == SQLITE_BUSY && !began
                                  ? "another process holds the store's write lock"
                                  : self->cause);
        memset (counts, 0, sizeof *counts);
        return -1;
    }
    return 0;
}

// The database's bytes as SQLite counts them: pages in use and free.
static int
s_pages (store_t *self, int64_t *bytes, int64_t *free_bytes)
{
    int64_t count = 0, size = 0, freelist = 0;
    int rc = s_ask (self, "PRAGMA page_count", 0, NULL, &count, NULL, 0);
    if (rc == SQLITE_OK)
        rc = s_ask (self, "PRAGMA page_size", 0, NULL, &size, NULL, 0);
    if (rc == SQLITE_OK)
        rc = s_ask (self, "PRAGMA freelist_count", 0, NULL, &freelist, NULL, 0);
    *bytes = count * size;
    if (free_bytes)
        *free_bytes = freelist * size;
    return rc;
}

int
store_vacuum (store_t *self, store_vacuum_t *out)
{
    memset (out, 0, sizeof *out);
    if (self->in_tx || self->readonly || self->detached) {
        st_error (self, "cannot vacuum '%s': %s", self->path,
                  self->readonly ? "it is open read-only"
                  : self->detached ? self->detached
                                   : "a transaction is open (commit first)");
        return -1;
    }
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    int rc = s_pages (self, &out->bytes_before, &out->free_before);
    // VACUUM rewrites the database through the WAL; the checkpoint then
    // writes it back and truncates the WAL, so that the file shrinks now.
    char *msg = NULL;
    if (rc == SQLITE_OK
        && (rc = sqlite3_exec (self->db, "VACUUM", NULL, NULL, &msg)) == SQLITE_OK)
        rc = sqlite3_exec (self->db, "PRAGMA wal_checkpoint (TRUNCATE)", NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        rc = s_pages (self, &out->bytes_after, NULL);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    out->seconds = (double) (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (rc != SQLITE_OK) {
        st_error (self, "cannot vacuum '%s': %s%s", self->path, msg ? msg : sqlite3_errmsg (self->db),
                  (rc & 0xff) == SQLITE_FULL ? " (VACUUM needs room for a copy of the database: "
                                               "free space on its volume)"
                                             : "");
        sqlite3_free (msg);
        return -1;
    }
    return 0;
}
