// tx.c — how the store runs its statements: the fault seam
// (store_test_fault), errors that name the file and say what was lost, and
// the group's transaction, open from the first write to store_commit.

#include "store/internal.h"

#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void
st_errbuf (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

// Sets the last error of the store.
void
st_error (store_t *self, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    vsnprintf (self->error, sizeof self->error, fmt, args);
    va_end (args);
}

// Every execution of a statement goes through here, so that
// store_test_fault can fail any of them (ROLLBACK does not come here: it
// needs no space and is how every error path recovers). On failure,
// 'cause' holds SQLite's message, or the injected code's.
int
st_step (store_t *self, sqlite3_stmt *stmt)
{
    int rc;
    self->injected = 0;
    if (self->fault_code && self->fault_after-- <= 0) {
        self->fault_after = 0;
        self->injected = 1;
        rc = self->fault_code;
    }
    else
        rc = sqlite3_step (stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        snprintf (self->cause, sizeof self->cause, "%s",
                  self->injected ? sqlite3_errstr (rc) : sqlite3_errmsg (self->db));
    return rc;
}

// Binds text or NULL; the caller's string outlives the execution.
void
st_bind_text (sqlite3_stmt *stmt, int index, const char *text)
{
    if (text)
        sqlite3_bind_text (stmt, index, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null (stmt, index);
}

const char *
st_column_text (sqlite3_stmt *stmt, int column)
{
    return (const char *) sqlite3_column_text (stmt, column);
}

// Errors that are the statement's alone: SQLite undid that statement and
// nothing else. Any other error may have ended the transaction.
static int
s_statement_error (int rc)
{
    int primary = rc & 0xff;
    return primary == SQLITE_CONSTRAINT || primary == SQLITE_TOOBIG || primary == SQLITE_MISMATCH
           || primary == SQLITE_RANGE;
}

// Ends the group's transaction without committing it.
void
st_rollback (store_t *self)
{
    self->held = 0;
    if (!sqlite3_get_autocommit (self->db)) {
        // Straight to SQLite: past the fault seam, and leaving 'cause' to
        // the error that brought us here.
        sqlite3_stmt *stmt = self->stmts[S_ROLLBACK];
        sqlite3_step (stmt);
        sqlite3_reset (stmt);
    }
    self->in_tx = 0;
}

// The group's writes were rolled back because of 'cause': remember it, so
// that the next commit reports that they were not committed.
static void
s_lose_group (store_t *self)
{
    st_rollback (self);
    if (self->uncommitted > 0 && !self->lost) {
        self->lost = self->uncommitted;
        snprintf (self->lost_cause, sizeof self->lost_cause, "%s", self->cause);
    }
    self->uncommitted = 0;
}

// A statement failed with rc: sets the error "<what> in '<file>': <cause>"
// and undoes what the failure left half done. 'write' is set when the call
// is a write: a statement error (SQLite undid that statement alone) in a
// call that had not yet changed anything costs only that call; any other
// failure of a write rolls back the whole group, which the next
// store_commit then reports. A failed read costs nothing unless SQLite
// ended the transaction. Returns -1.
int
st_vfail (store_t *self, int rc, int write, const char *fmt, va_list args)
{
    char what[S_ERROR_MAX / 2];
    vsnprintf (what, sizeof what, fmt, args);
    int ended = sqlite3_get_autocommit (self->db);
    if (self->in_tx
        && (ended || (write && (self->call_dirty || !s_statement_error (rc))))) {
        int lost = self->uncommitted;
        s_lose_group (self);
        if (lost > 0)
            st_error (self, "%s in '%s': %s (the %d writes since the last commit were rolled back)",
                     what, self->path, self->cause, lost);
        else
            st_error (self, "%s in '%s': %s", what, self->path, self->cause);
    }
    else
        st_error (self, "%s in '%s': %s", what, self->path, self->cause);
    return -1;
}

int
st_fail (store_t *self, int rc, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    st_vfail (self, rc, 1, fmt, args);
    va_end (args);
    return -1;
}

int
st_fail_read (store_t *self, int rc, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    st_vfail (self, rc, 0, fmt, args);
    va_end (args);
    return -1;
}

// SQLite's busy handler of the writer once it is open: a BEGIN never
// waits for another process's write lock (the broker's one thread would
// stop with it: store_begin fails, and the caller waits without
// blocking); anything else (a read meeting a WAL recovery) waits up to
// 100 ms.
int
st_busy (void *arg, int count)
{
    store_t *self = arg;
    if (count == 0)
        self->busy_count++;
    if (self->nowait && self->in_begin)
        return 0;
    if (count >= 100)
        return 0;
    struct timespec ms = {0, 1000000};
    nanosleep (&ms, NULL);
    return 1;
}

// BEGIN IMMEDIATE: the group's transaction and SQLite's write lock. When
// another process holds the lock, fails at once having changed nothing,
// and remembers since when the store is busy. Once the group is open, the
// dispatches kept while it was busy are written first.
static int
s_begin (store_t *self)
{
    sqlite3_stmt *stmt = self->stmts[S_BEGIN];
    self->in_begin = 1;
    int rc = st_step (self, stmt);
    self->in_begin = 0;
    sqlite3_reset (stmt);
    if ((rc & 0xff) == SQLITE_BUSY) {
        int64_t now = util_time_ns ();
        if (!self->busy_since_ns)
            self->busy_since_ns = now;
        st_error (self, "'%s' is locked by another process (for %.0f s): nothing written",
                  self->path, (now - self->busy_since_ns) / 1e9);
        return -1;
    }
    if (rc != SQLITE_DONE) {
        st_error (self, "cannot begin a transaction in '%s': %s", self->path, self->cause);
        return -1;
    }
    self->busy_since_ns = 0;
    self->in_tx = 1;
    if (self->ndeferred) {
        // Held meanwhile: a dispatch that no longer applies must not close
        // the group under the write call that opened it.
        int held = self->held;
        self->held = 1;
        st_deferred_apply (self);
        self->held = held && self->in_tx;
        self->call_dirty = 0;
        if (!self->in_tx)
            return -1;  // lost with a failed write (st_fail): store_commit reports it
    }
    return 0;
}

// Opens the group's transaction on the first write after a commit. A write
// after a failure that rolled the group back is refused until store_commit
// has reported that failure: the caller must not believe later writes
// joined earlier ones that are gone.
int
st_write_begin (store_t *self)
{
    self->call_dirty = 0;
    if (self->readonly) {
        st_error (self, "cannot write to '%s': it is open read-only", self->path);
        return -1;
    }
    if (self->detached) {
        st_error (self, "cannot write to '%s': %s", self->path, self->detached);
        return -1;
    }
    if (self->streaming) {
        st_error (self, "cannot write to '%s' while store_results_of is listing", self->path);
        return -1;
    }
    if (self->lost) {
        st_error (self,
                 "cannot write to '%s': %d uncommitted writes were rolled back (%s) and "
                 "store_commit has not yet reported it",
                 self->path, self->lost, self->lost_cause);
        return -1;
    }
    if (self->in_tx && sqlite3_get_autocommit (self->db)) {
        // SQLite ended the group behind a failure that did not come
        // through st_fail: its writes are gone all the same.
        snprintf (self->cause, sizeof self->cause, "the transaction ended unexpectedly");
        s_lose_group (self);
        if (self->lost)
            return st_write_begin (self);
    }
    if (!self->in_tx)
        return s_begin (self);
    return 0;
}

int
store_begin (store_t *self)
{
    if (st_write_begin (self))
        return -1;
    self->held = 1;
    return 0;
}

int
store_in_group (store_t *self)
{
    return self->in_tx;
}

int64_t
store_busy_since (store_t *self)
{
    return self->busy_since_ns;
}

int64_t
store_busy_count (store_t *self)
{
    return self->busy_count;
}

// Runs a write statement whose parameters are bound, to its end; returns
// SQLITE_DONE or the error. Marks the call as having changed something if
// the statement did.
int
st_exec (store_t *self, sqlite3_stmt *stmt)
{
    int rc = st_step (self, stmt);
    while (rc == SQLITE_ROW)
        rc = st_step (self, stmt);
    sqlite3_reset (stmt);
    if (rc == SQLITE_DONE && sqlite3_changes (self->db) > 0)
        self->call_dirty = 1;
    return rc;
}

// The write call succeeded.
int
st_write_end (store_t *self)
{
    if (self->call_dirty)
        self->uncommitted++;
    return 0;
}

// The write call found nothing to change. If it opened the group, the
// group is closed again at once (nothing to write, nothing to sync), so
// that no write lock is held for a caller that sees nothing uncommitted.
void
st_write_nothing (store_t *self)
{
    if (self->in_tx && !self->held && self->uncommitted == 0 && !self->call_dirty) {
        sqlite3_stmt *stmt = self->stmts[S_COMMIT];
        int rc = sqlite3_step (stmt);
        sqlite3_reset (stmt);
        if (rc != SQLITE_DONE)
            st_rollback (self);
        self->in_tx = 0;
    }
}

// The write call moved 'count' rows, each a write of its own. Returns it.
int
st_write_end_many (store_t *self, int count)
{
    if (count > 0)
        self->uncommitted += count;
    else
        st_write_nothing (self);
    return count;
}

// Runs a query expected to give one integer; 0 when it gives no row.
int
st_query_int (store_t *self, sqlite3_stmt *stmt, int64_t *value, int *found)
{
    int rc = st_step (self, stmt);
    if (found)
        *found = rc == SQLITE_ROW;
    *value = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 0) : 0;
    sqlite3_reset (stmt);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

// ---------------------------------------------------------------------------
// Group commit.

int
store_commit (store_t *self, char *err, size_t errlen)
{
    if (self->lost) {
        st_rollback (self);
        st_error (self,
                 "cannot commit '%s': %d writes were rolled back by an earlier error (%s); "
                 "nothing since the last commit was committed",
                 self->path, self->lost, self->lost_cause);
        self->lost = 0;
        self->uncommitted = 0;
        st_errbuf (err, errlen, "%s", self->error);
        return -1;
    }
    if (!self->in_tx)
        return 0;
    sqlite3_stmt *stmt = self->stmts[S_COMMIT];
    int rc = st_step (self, stmt);
    sqlite3_reset (stmt);
    if (rc != SQLITE_DONE) {
        // SQLite may have kept the transaction open (SQLITE_BUSY) or ended
        // it; either way, nothing of it is committed from here on.
        st_rollback (self);
        st_error (self, "cannot commit '%s': %s", self->path, self->cause);
        self->uncommitted = 0;
        st_errbuf (err, errlen, "%s", self->error);
        return -1;
    }
    self->in_tx = 0;
    self->held = 0;
    self->uncommitted = 0;
    return 0;
}

int
store_uncommitted (store_t *self)
{
    return self->uncommitted;
}

const char *
store_error (store_t *self)
{
    return self->error;
}

void
store_test_fault (store_t *self, int code, int after)
{
    self->fault_code = code;
    self->fault_after = after > 0 ? after : 0;
}
