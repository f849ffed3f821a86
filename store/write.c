// write.c — the broker's hot path: experiments, files and pairs as they
// arrive, dispatch, results, failures, requeues and agents; every write
// appends its events (their payloads are listed below).

#include "store/internal.h"

#include "common/util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Appends an event as part of the current write call, its payload the one
// in self->payload. Returns the event id, or -1 with the SQLite code in *rc.
static int64_t
s_event_insert (store_t *self, int *rc, const char *kind, int64_t experiment, int64_t pair,
             int64_t now_ns)
{
    sqlite3_stmt *stmt = self->stmts[S_EVENT_ADD];
    sqlite3_bind_int64 (stmt, 1, now_ns);
    sqlite3_bind_text (stmt, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 3, experiment);
    sqlite3_bind_int64 (stmt, 4, pair);
    sqlite3_bind_text (stmt, 5, self->payload, -1, SQLITE_STATIC);
    *rc = st_exec (self, stmt);
    return *rc == SQLITE_DONE ? sqlite3_last_insert_rowid (self->db) : -1;
}

// The same with the payload formatted.
int64_t
st_event (store_t *self, int *rc, const char *kind, int64_t experiment, int64_t pair,
         int64_t now_ns, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    vsnprintf (self->payload, sizeof self->payload, fmt, args);
    va_end (args);
    return s_event_insert (self, rc, kind, experiment, pair, now_ns);
}

// The payloads of the events every pair makes (file, pair, dispatch,
// result) are written word by word without printf, which took a twentieth
// of the store's time: the same text, cut where vsnprintf would cut it.
typedef struct {
    char *at, *end;  // where the next byte goes; the last byte's place
} s_words_t;

static s_words_t
s_words (store_t *self)
{
    self->payload[0] = '\0';
    return (s_words_t) {self->payload, self->payload + sizeof self->payload - 1};
}

// Appends key (with its '=' and the space before it) and value.
static void
s_word (s_words_t *words, const char *key, const char *value)
{
    for (const char *c = key; *c && words->at < words->end; c++)
        *words->at++ = *c;
    for (const char *c = value; c && *c && words->at < words->end; c++)
        *words->at++ = *c;
    *words->at = '\0';
}

static void
s_word_int (s_words_t *words, const char *key, int64_t value)
{
    char digits[UTIL_DECIMAL_SIZE];
    s_word (words, key, util_decimal_int64 (value, digits));
}

// ---------------------------------------------------------------------------
// Writes. Each public write is all or nothing (see st_fail), appends its
// events itself, and counts as one write for store_uncommitted.
//
// Event payloads (key=value, space separated; a value that may hold spaces
// comes last and runs to the end):
//   experiment  name=NAME, or from store_experiment_create
//               source=SOURCE settings=SETTINGS name=NAME (the settings,
//               key=value pairs themselves, run to ' name=')
//   file        file=ID size=BYTES mtime_ns=NS seen_ns=NS name=NAME
//   pair        file_a=ID file_b=ID [file_c=ID file_d=ID: a stereo set] stem=STEM
//   dispatch    attempt=N agent=AGENT
//   result      attempt=N agent=AGENT compute_ns=NS field=0|1
//   duplicate   attempt=N agent=AGENT
//   failure     attempt=N agent=AGENT error=TEXT
//   failed      attempts=N error=TEXT
//   requeue     attempt=N agent=AGENT reason=TEXT; attempt=N lost=N agent=AGENT
//               reason=TEXT when its agent was lost or its deadline passed (counted)
//   defer       attempt=N agent=AGENT text=TEXT (not counted)
//   file-changed file=ID size=OLD->NEW mtime_ns=OLD->NEW name=NAME
//   file-rewritten file=ID stem=STEM (a done pair's file changed: kept)
//   agent       agent=AGENT host=HOST cores=N capabilities=TEXT
//   pair        retry | backfill | skip (a pair moved by the control channel);
//               'retry file=ID' when its file changed after it failed
//   setting     KEY=VALUE, or KEY alone when the setting is removed
//   allocation  id=ID kind=KIND size=BYTES expires_ns=NS path=PATH, then
//               id=ID state=STATE as it is released
//   archived    file=ID sha256=HEX location=PATH

int64_t
store_experiment (store_t *self, const char *name, int64_t now_ns)
{
    sqlite3_stmt *stmt = self->stmts[S_EXPERIMENT_GET];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    int64_t id;
    int found, rc = st_query_int (self, stmt, &id, &found);
    if (rc != SQLITE_OK)
        return st_fail_read (self, rc, "cannot look up experiment '%s'", name);
    if (found)
        return id;
    if (st_write_begin (self))
        return -1;
    stmt = self->stmts[S_EXPERIMENT_ADD];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 2, now_ns);
    rc = st_exec (self, stmt);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot add experiment '%s'", name);
    id = sqlite3_last_insert_rowid (self->db);
    st_event (self, &rc, "experiment", id, 0, now_ns, "name=%s", name);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot add experiment '%s'", name);
    st_write_end (self);
    return id;
}

// Looks up the id of a file or pair that an insert found already there.
static int64_t
s_known (store_t *self, st_stmt_id_t id, int64_t experiment, const char *name, const char *what)
{
    sqlite3_stmt *stmt = self->stmts[id];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
    int64_t known;
    int found, rc = st_query_int (self, stmt, &known, &found);
    if (rc != SQLITE_OK)
        return st_fail_read (self, rc, "cannot look up %s '%s'", what, name);
    if (!found) {
        st_error (self, "cannot look up %s '%s' in '%s': gone", what, name, self->path);
        return -1;
    }
    return known;
}

// A file or a pair is inserted first and looked up only if it was there:
// files arrive once but for a watcher's resend or rescan, pairs are new but
// after a restart. (Measured: either order costs a third of an insert on
// the path it does not favour.) Runs 'insert' (bound by the caller; it does
// nothing on a conflict) and returns the new row's id with *inserted set,
// or the id of the row there ('get' looks it up by experiment and name),
// or -1.
static int64_t
s_insert_or_known (store_t *self, st_stmt_id_t insert, st_stmt_id_t get, int64_t experiment,
                   const char *name, const char *what, int *inserted)
{
    *inserted = 0;
    if (st_write_begin (self))
        return -1;
    int rc = st_exec (self, self->stmts[insert]);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot add %s '%s' of experiment %" PRId64, what, name,
                       experiment);
    if (!self->call_dirty) {
        st_write_nothing (self);
        return s_known (self, get, experiment, name, what);
    }
    *inserted = 1;
    return sqlite3_last_insert_rowid (self->db);
}

// A file event for a name already recorded: the same size and mtime is a
// resend (nothing written); another size or mtime is a new version of the
// file, which replaces the row's figures with a "file-changed" event.
// Returns id, or -1.
static int64_t
s_file_version (store_t *self, int64_t experiment, int64_t id, const char *name, int64_t size,
                int64_t mtime_ns, int64_t seen_ns, int *version)
{
    sqlite3_stmt *stmt = self->stmts[S_FILE_VERSION];
    sqlite3_bind_int64 (stmt, 1, id);
    int rc = st_step (self, stmt);
    int64_t old_size = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 0) : 0;
    int64_t old_mtime = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 1) : 0;
    sqlite3_reset (stmt);
    if (rc == SQLITE_DONE) {
        st_error (self, "cannot look up file '%s' in '%s': gone", name, self->path);
        return -1;
    }
    if (rc != SQLITE_ROW)
        return st_fail_read (self, rc, "cannot look up file '%s'", name);
    if (old_size == size && old_mtime == mtime_ns)
        return id;
    if (st_write_begin (self))
        return -1;
    stmt = self->stmts[S_FILE_UPDATE];
    sqlite3_bind_int64 (stmt, 1, id);
    sqlite3_bind_int64 (stmt, 2, size);
    sqlite3_bind_int64 (stmt, 3, mtime_ns);
    sqlite3_bind_int64 (stmt, 4, seen_ns);
    rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "file-changed", experiment, 0, seen_ns,
                 "file=%" PRId64 " size=%" PRId64 "->%" PRId64 " mtime_ns=%" PRId64 "->%" PRId64
                 " name=%s",
                 id, old_size, size, old_mtime, mtime_ns, name);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot record the new version of file '%s' of experiment %" PRId64,
                       name, experiment);
    st_write_end (self);
    *version = STORE_FILE_CHANGED;
    return id;
}

int64_t
store_file_add (store_t *self, int64_t experiment, const char *name, int64_t size,
                int64_t mtime_ns, int64_t seen_ns, int *version)
{
    *version = STORE_FILE_SAME;
    sqlite3_stmt *stmt = self->stmts[S_FILE_ADD];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 3, size);
    sqlite3_bind_int64 (stmt, 4, mtime_ns);
    sqlite3_bind_int64 (stmt, 5, seen_ns);
    int inserted, rc;
    int64_t id = s_insert_or_known (self, S_FILE_ADD, S_FILE_GET, experiment, name, "file",
                                    &inserted);
    if (id < 0)
        return -1;
    if (!inserted)
        return s_file_version (self, experiment, id, name, size, mtime_ns, seen_ns, version);
    // The arrival time is the event's time: a replay paces files by it.
    s_words_t words = s_words (self);
    s_word_int (&words, "file=", id);
    s_word_int (&words, " size=", size);
    s_word_int (&words, " mtime_ns=", mtime_ns);
    s_word_int (&words, " seen_ns=", seen_ns);
    s_word (&words, " name=", name);
    s_event_insert (self, &rc, "file", experiment, 0, seen_ns);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot add file '%s' of experiment %" PRId64, name, experiment);
    st_write_end (self);
    *version = STORE_FILE_NEW;
    return id;
}

int64_t
store_pair_add (store_t *self, int64_t experiment, const char *stem, int64_t file_a,
                int64_t file_b, int64_t now_ns, int *is_new)
{
    const int64_t files[4] = {file_a, file_b, 0, 0};
    return store_pair_add_set (self, experiment, stem, files, now_ns, is_new);
}

int64_t
store_pair_add_set (store_t *self, int64_t experiment, const char *stem, const int64_t files[4],
                    int64_t now_ns, int *is_new)
{
    *is_new = 0;
    int64_t file_a = files[0], file_b = files[1];
    sqlite3_stmt *stmt = self->stmts[S_PAIR_ADD];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, stem, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 3, file_a);
    // file_b, file_c, file_d: NULL when 0.
    static const int column[4] = {0, 4, 6, 7};
    for (int i = 1; i < 4; i++)
        if (files[i])
            sqlite3_bind_int64 (stmt, column[i], files[i]);
        else
            sqlite3_bind_null (stmt, column[i]);
    sqlite3_bind_int64 (stmt, 5, now_ns);
    int inserted, rc = SQLITE_DONE;
    int64_t id = s_insert_or_known (self, S_PAIR_ADD, S_PAIR_GET, experiment, stem, "pair",
                                    &inserted);
    if (!inserted)
        return id;
    // Each file counts the pairs it is in, so that a restart offers the
    // pairing rules only the files still short of theirs.
    for (int i = 0; i < 4 && rc == SQLITE_DONE; i++) {
        int64_t file = files[i];
        if (!file)
            continue;
        sqlite3_stmt *paired = self->stmts[S_FILE_PAIRED];
        sqlite3_bind_int64 (paired, 1, file);
        rc = st_exec (self, paired);
    }
    if (rc == SQLITE_DONE) {
        s_words_t words = s_words (self);
        s_word_int (&words, "file_a=", file_a);
        s_word_int (&words, " file_b=", file_b);
        if (files[2] || files[3]) {
            s_word_int (&words, " file_c=", files[2]);
            s_word_int (&words, " file_d=", files[3]);
        }
        s_word (&words, " stem=", stem);
        s_event_insert (self, &rc, "pair", experiment, id, now_ns);
    }
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot add pair '%s' of experiment %" PRId64, stem, experiment);
    st_write_end (self);
    *is_new = 1;
    return id;
}

// Reads a pair's state, experiment, attempt count (since its last retry)
// and the number of its last attempt. 1 if found, 0 if not (error set), -1
// on error.
static int
s_pair_state (store_t *self, int64_t pair, const char *what, int *state, int64_t *experiment,
              int *attempts, int *last)
{
    sqlite3_stmt *stmt = self->stmts[S_PAIR_STATE];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = st_step (self, stmt);
    if (rc == SQLITE_ROW) {
        *state = sqlite3_column_int (stmt, 0);
        *experiment = sqlite3_column_int64 (stmt, 1);
        *attempts = sqlite3_column_int (stmt, 2);
        *last = *attempts + sqlite3_column_int (stmt, 3);
    }
    sqlite3_reset (stmt);
    if (rc == SQLITE_DONE) {
        st_write_nothing (self);
        st_error (self, "%s pair %" PRId64 " in '%s': no such pair", what, pair, self->path);
        return 0;
    }
    if (rc != SQLITE_ROW)
        return st_fail_read (self, rc, "%s pair %" PRId64, what, pair);
    return 1;
}

// Reads a pair that must be PENDING for 'what' ("cannot dispatch"): its
// experiment and the number of its last attempt. 0, or -1 with the error
// set (no such pair, not pending, or a failed read).
int
st_pair_pending (store_t *self, int64_t pair, const char *what, int64_t *experiment, int *last)
{
    int state, attempts;
    if (s_pair_state (self, pair, what, &state, experiment, &attempts, last) != 1)
        return -1;
    if (state != STORE_PENDING) {
        st_write_nothing (self);
        st_error (self, "%s pair %" PRId64 " in '%s': it is not pending", what, pair, self->path);
        return -1;
    }
    return 0;
}

// Closes an attempt with its outcome.
static int
s_attempt_end (store_t *self, int64_t pair, int attempt, const char *outcome,
               const char *error, int64_t now_ns)
{
    sqlite3_stmt *stmt = self->stmts[S_ATTEMPT_END];
    sqlite3_bind_int64 (stmt, 1, pair);
    sqlite3_bind_int (stmt, 2, attempt);
    sqlite3_bind_text (stmt, 3, outcome, -1, SQLITE_STATIC);
    st_bind_text (stmt, 4, error);
    sqlite3_bind_int64 (stmt, 5, now_ns);
    return st_exec (self, stmt);
}

// A result for an attempt the store never saw: the broker sends a TASK
// before the commit that records it, and crashed in between. The attempt
// and its dispatch are recorded now, so that the log holds a 'dispatch'
// before every 'result'. SQLITE_DONE or the error.
static int
s_attempt_recovered (store_t *self, int64_t experiment, int64_t pair, int attempt,
                     const char *agent, int64_t now_ns)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db,
                                 "INSERT OR IGNORE INTO attempts (pair, attempt, agent, dispatched_ns)"
                                 " VALUES (?1, ?2, ?3, ?4)",
                                 -1, &stmt, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64 (stmt, 1, pair);
    sqlite3_bind_int (stmt, 2, attempt);
    st_bind_text (stmt, 3, agent);
    sqlite3_bind_int64 (stmt, 4, now_ns);
    rc = sqlite3_step (stmt);
    sqlite3_finalize (stmt);
    if (rc == SQLITE_DONE && sqlite3_changes (self->db) == 1) {
        st_event (self, &rc, "dispatch", experiment, pair, now_ns,
                 "attempt=%d agent=%s recovered=1", attempt, agent);
        if (rc == SQLITE_DONE)
            rc = s_attempt_end (self, pair, attempt, "done", NULL, now_ns);
    }
    return rc;
}

// The writes of a dispatch of 'pair' (PENDING, of 'experiment') as
// attempt 'attempt'; SQLITE_DONE or the error.
static int
s_dispatch_write (store_t *self, int64_t pair, int64_t experiment, int attempt,
                  const char *agent, int64_t now_ns)
{
    sqlite3_stmt *stmt = self->stmts[S_PAIR_DISPATCH];
    sqlite3_bind_int64 (stmt, 1, pair);
    st_bind_text (stmt, 2, agent);
    sqlite3_bind_int64 (stmt, 3, now_ns);
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_ATTEMPT_ADD];
        sqlite3_bind_int64 (stmt, 1, pair);
        sqlite3_bind_int (stmt, 2, attempt);
        st_bind_text (stmt, 3, agent);
        sqlite3_bind_int64 (stmt, 4, now_ns);
        rc = st_exec (self, stmt);
    }
    if (rc == SQLITE_DONE) {
        s_words_t words = s_words (self);
        s_word_int (&words, "attempt=", attempt);
        s_word (&words, " agent=", agent);
        s_event_insert (self, &rc, "dispatch", experiment, pair, now_ns);
    }
    return rc;
}

// A dispatch while another process holds the write lock: the pair is
// read (readers are never blocked) and its next attempt number given;
// the write waits in memory for the group to open (st_deferred_apply).
// The attempt number, or -1 (not pending, or too many waiting).
static int
s_dispatch_deferred (store_t *self, int64_t pair, const char *agent, int64_t now_ns)
{
    char busy[S_ERROR_MAX];
    snprintf (busy, sizeof busy, "%s", self->error);
    int last;
    int64_t experiment;
    if (self->ndeferred >= STORE_DEFERRED_MAX) {
        st_error (self, "%s; %d dispatches wait already", busy, self->ndeferred);
        return -1;
    }
    if (st_pair_pending (self, pair, "cannot dispatch", &experiment, &last))
        return -1;
    int attempt = last + 1;
    for (int i = 0; i < self->ndeferred; i++)
        if (self->deferred[i].pair == pair && self->deferred[i].attempt >= attempt)
            attempt = self->deferred[i].attempt + 1;
    if (self->ndeferred == self->deferred_room) {
        int room = self->deferred_room ? 2 * self->deferred_room : 256;
        st_deferred_t *d = realloc (self->deferred, (size_t) room * sizeof *d);
        if (!d) {
            st_error (self, "%s; no memory to keep a dispatch", busy);
            return -1;
        }
        self->deferred = d, self->deferred_room = room;
    }
    char *who = strdup (agent ? agent : "");
    if (!who) {
        st_error (self, "%s; no memory to keep a dispatch", busy);
        return -1;
    }
    self->deferred[self->ndeferred++] =
        (st_deferred_t) {.pair = pair, .now_ns = now_ns, .attempt = attempt, .agent = who};
    return attempt;
}

void
st_deferred_apply (store_t *self)
{
    int n = self->ndeferred;
    self->ndeferred = 0;  // the writes below must not defer again
    for (int i = 0; i < n; i++) {
        st_deferred_t *d = &self->deferred[i];
        int last;
        int64_t experiment;
        self->call_dirty = 0;
        if (st_pair_pending (self, d->pair, "cannot dispatch", &experiment, &last) == 0) {
            int rc = s_dispatch_write (self, d->pair, experiment, d->attempt, d->agent, d->now_ns);
            if (rc != SQLITE_DONE) {
                // The group is lost with it (st_fail): store_commit reports it.
                st_fail (self, rc, "cannot dispatch pair %" PRId64, d->pair);
                for (int j = i; j < n; j++)
                    free (self->deferred[j].agent);
                return;
            }
            st_write_end (self);
        }
        free (d->agent);
    }
}

void
st_deferred_free (store_t *self)
{
    for (int i = 0; i < self->ndeferred; i++)
        free (self->deferred[i].agent);
    free (self->deferred);
    self->deferred = NULL;
    self->ndeferred = self->deferred_room = 0;
}

int
store_deferred (store_t *self)
{
    return self->ndeferred;
}

int
store_pair_dispatch (store_t *self, int64_t pair, const char *agent, int64_t now_ns)
{
    if (st_write_begin (self)) {
        if (self->busy_since_ns && !self->in_tx && !self->detached)
            return s_dispatch_deferred (self, pair, agent, now_ns);
        return -1;
    }
    // Read, then change only if still pending: one writer, one transaction.
    // (UPDATE ... RETURNING would save the read but costs more than it.)
    int last;
    int64_t experiment;
    if (st_pair_pending (self, pair, "cannot dispatch", &experiment, &last))
        return -1;
    int attempt = last + 1;
    int rc = s_dispatch_write (self, pair, experiment, attempt, agent, now_ns);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot dispatch pair %" PRId64, pair);
    st_write_end (self);
    return attempt;
}

int64_t
store_pair_closed (store_t *self, int64_t pair)
{
    sqlite3_stmt *stmt = self->stmts[S_PAIR_CLOSED];
    sqlite3_bind_int64 (stmt, 1, pair);
    int64_t closed = 0;
    if (st_query_int (self, stmt, &closed, NULL) == SQLITE_OK)
        return closed > 0 ? closed : 0;
    st_error (self, "cannot read the frames of pair %" PRId64 " in '%s': %s", pair, self->path,
             sqlite3_errmsg (self->db));
    return -1;
}

int
store_pair_more (store_t *self, int64_t pair, char **name_c, char **name_d)
{
    *name_c = *name_d = NULL;
    sqlite3_stmt *stmt = self->stmts[S_PAIR_MORE];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = st_step (self, stmt);
    if (rc == SQLITE_ROW) {
        *name_c = strdup ((const char *) sqlite3_column_text (stmt, 0));
        *name_d = strdup ((const char *) sqlite3_column_text (stmt, 1));
    }
    sqlite3_reset (stmt);
    if (rc == SQLITE_ROW && *name_c && *name_d)
        return 1;
    free (*name_c), free (*name_d);
    *name_c = *name_d = NULL;
    if (rc == SQLITE_DONE)
        return 0;
    st_error (self, "cannot read the frames of pair %" PRId64 " in '%s': %s", pair, self->path,
              rc == SQLITE_ROW ? "no memory" : sqlite3_errmsg (self->db));
    return -1;
}

int
store_attempt_agent (store_t *self, int64_t pair, int attempt, char *out, size_t size)
{
    // Asked only for a result nobody holds (after a restart, or from an
    // agent presumed dead): rare enough for a statement of its own.
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db,
                                 "SELECT coalesce (agent, '') FROM attempts"
                                 " WHERE pair = ?1 AND attempt = ?2",
                                 -1, &stmt, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64 (stmt, 1, pair);
        sqlite3_bind_int (stmt, 2, attempt);
        rc = st_step (self, stmt);
    }
    int found = rc == SQLITE_ROW;
    if (found && out && size)
        snprintf (out, size, "%s", st_column_text (stmt, 0));
    sqlite3_finalize (stmt);
    if (found || rc == SQLITE_DONE)
        return found;
    st_error (self, "cannot read attempt %d of pair %" PRId64 " in '%s': %s", attempt, pair,
             self->path, sqlite3_errmsg (self->db));
    return -1;
}

int
store_pair_result (store_t *self, int64_t pair, int attempt, const char *agent,
                   const store_result_t *result, int64_t now_ns, int *recorded)
{
    *recorded = 0;
    if (!result) {
        st_error (self, "cannot record a result of pair %" PRId64 " in '%s': no result", pair,
                 self->path);
        return -1;
    }
    if (st_write_begin (self))
        return -1;
    int state, attempts, last;
    int64_t experiment;
    if (s_pair_state (self, pair, "cannot record a result of", &state, &experiment, &attempts,
                      &last)
        != 1)
        return -1;
    const char *who = agent ? agent : "";
    int rc;
    if (state == STORE_DONE) {
        // First result wins: a later one (a resend, or a slow agent whose
        // task was given to another) changes nothing but its attempt.
        rc = s_attempt_end (self, pair, attempt, "duplicate", NULL, now_ns);
        if (rc == SQLITE_DONE)
            st_event (self, &rc, "duplicate", experiment, pair, now_ns, "attempt=%d agent=%s",
                     attempt, who);
        if (rc != SQLITE_DONE)
            return st_fail (self, rc, "cannot record a result of pair %" PRId64, pair);
        return st_write_end (self);
    }
    // Any result is better than none: a late one is taken whatever the
    // pair's state (pending after a requeue, or even failed since).
    int keep = result->field && self->fields_every > 0
               && (self->fields_every == 1 || self->results_seen % self->fields_every == 0);
    sqlite3_stmt *stmt = self->stmts[S_RESULT_ADD];
    sqlite3_bind_int64 (stmt, 1, pair);
    sqlite3_bind_int (stmt, 2, attempt);
    st_bind_text (stmt, 3, agent);
    sqlite3_bind_double (stmt, 4, result->mean_u);
    sqlite3_bind_double (stmt, 5, result->mean_v);
    sqlite3_bind_double (stmt, 6, result->mean_speed);
    sqlite3_bind_double (stmt, 7, result->valid_fraction);
    sqlite3_bind_double (stmt, 8, result->vorticity);
    sqlite3_bind_int (stmt, 9, result->nx);
    sqlite3_bind_int (stmt, 10, result->ny);
    sqlite3_bind_int64 (stmt, 11, result->compute_ns);
    st_bind_text (stmt, 12, result->path);
    if (keep)
        sqlite3_bind_blob64 (stmt, 13, result->field, result->field_size, SQLITE_STATIC);
    else
        sqlite3_bind_null (stmt, 13);
    sqlite3_bind_int64 (stmt, 14, now_ns);
    st_bind_text (stmt, 15, result->settings);
    rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        // Counted by no statistics checkpoint yet (store_results_uncounted).
        stmt = self->stmts[S_UNCOUNTED_ADD];
        sqlite3_bind_int64 (stmt, 1, pair);
        rc = st_exec (self, stmt);
    }
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_PAIR_DONE];
        sqlite3_bind_int64 (stmt, 1, pair);
        st_bind_text (stmt, 2, agent);
        sqlite3_bind_int64 (stmt, 3, now_ns);
        rc = st_exec (self, stmt);
    }
    if (rc == SQLITE_DONE)
        rc = s_attempt_end (self, pair, attempt, "done", NULL, now_ns);
    if (rc == SQLITE_DONE && sqlite3_changes (self->db) == 0)
        rc = s_attempt_recovered (self, experiment, pair, attempt, who, now_ns);
    if (rc == SQLITE_DONE) {
        s_words_t words = s_words (self);
        s_word_int (&words, "attempt=", attempt);
        s_word (&words, " agent=", who);
        s_word_int (&words, " compute_ns=", result->compute_ns);
        s_word_int (&words, " field=", keep);
        s_event_insert (self, &rc, "result", experiment, pair, now_ns);
    }
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot record a result of pair %" PRId64, pair);
    self->results_seen++;
    *recorded = 1;
    return st_write_end (self);
}

int
store_pair_failure (store_t *self, int64_t pair, int attempt, const char *agent,
                    const char *error, int max_attempts, int64_t now_ns, int *failed)
{
    *failed = 0;
    if (st_write_begin (self))
        return -1;
    int state, attempts, last;
    int64_t experiment;
    if (s_pair_state (self, pair, "cannot record a failure of", &state, &experiment, &attempts,
                      &last)
        != 1)
        return -1;
    const char *why = error ? error : "";
    int rc = s_attempt_end (self, pair, attempt, "failed", why, now_ns);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "failure", experiment, pair, now_ns, "attempt=%d agent=%s error=%s",
                 attempt, agent ? agent : "", why);
    // Only the failure of the attempt in flight moves the pair: a done or
    // failed pair stays so, and an older attempt's failure must not pull
    // the pair back from the agent that has it now.
    int current = (state == STORE_DISPATCHED || state == STORE_PENDING) && attempt == last;
    if (rc == SQLITE_DONE && current && attempts >= max_attempts) {
        sqlite3_stmt *stmt = self->stmts[S_PAIR_FAIL];
        sqlite3_bind_int64 (stmt, 1, pair);
        sqlite3_bind_text (stmt, 2, why, -1, SQLITE_STATIC);
        sqlite3_bind_int64 (stmt, 3, now_ns);
        rc = st_exec (self, stmt);
        if (rc == SQLITE_DONE)
            st_event (self, &rc, "failed", experiment, pair, now_ns, "attempts=%d error=%s",
                     attempts, why);
        *failed = rc == SQLITE_DONE;
    }
    else if (rc == SQLITE_DONE && current) {
        sqlite3_stmt *stmt = self->stmts[S_PAIR_RETRY];
        sqlite3_bind_int64 (stmt, 1, pair);
        sqlite3_bind_text (stmt, 2, why, -1, SQLITE_STATIC);
        rc = st_exec (self, stmt);
    }
    if (rc != SQLITE_DONE) {
        *failed = 0;
        return st_fail (self, rc, "cannot record a failure of pair %" PRId64, pair);
    }
    return st_write_end (self);
}

int
store_pair_requeue (store_t *self, int64_t pair, const char *reason, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    int state, attempts, last;
    int64_t experiment;
    if (s_pair_state (self, pair, "cannot requeue", &state, &experiment, &attempts, &last) != 1)
        return -1;
    if (state != STORE_DISPATCHED) {
        st_write_nothing (self);  // answered or requeued already
        return 0;
    }
    char agent[256] = "";
    sqlite3_stmt *stmt = self->stmts[S_PAIR_AGENT];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = st_step (self, stmt);
    if (rc == SQLITE_ROW && sqlite3_column_text (stmt, 0))
        snprintf (agent, sizeof agent, "%s", st_column_text (stmt, 0));
    sqlite3_reset (stmt);
    if (rc != SQLITE_ROW)
        return st_fail_read (self, rc, "cannot requeue pair %" PRId64, pair);
    stmt = self->stmts[S_PAIR_REQUEUE];
    sqlite3_bind_int64 (stmt, 1, pair);
    rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE)
        rc = s_attempt_end (self, pair, last, "requeued", reason, now_ns);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "requeue", experiment, pair, now_ns, "attempt=%d agent=%s reason=%s",
                 last, agent, reason ? reason : "");
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot requeue pair %" PRId64, pair);
    return st_write_end (self);
}

// Reads the agent a pair went to last into agent (size bytes; "" if none).
static int
s_pair_agent (store_t *self, int64_t pair, char *agent, size_t size)
{
    *agent = '\0';
    sqlite3_stmt *stmt = self->stmts[S_PAIR_AGENT];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = st_step (self, stmt);
    if (rc == SQLITE_ROW && sqlite3_column_text (stmt, 0))
        snprintf (agent, size, "%s", st_column_text (stmt, 0));
    sqlite3_reset (stmt);
    return rc == SQLITE_ROW ? SQLITE_DONE : rc;
}

int
store_pair_lost (store_t *self, int64_t pair, int attempt, const char *reason, int max_attempts,
                 int64_t now_ns, int *failed)
{
    *failed = 0;
    if (st_write_begin (self))
        return -1;
    int state, attempts, last;
    int64_t experiment;
    if (s_pair_state (self, pair, "cannot requeue", &state, &experiment, &attempts, &last) != 1)
        return -1;
    if (state != STORE_DISPATCHED || attempt != last) {
        st_write_nothing (self);  // answered, requeued already, or out again
        return 0;
    }
    char agent[256];
    const char *why = reason ? reason : "";
    int rc = s_pair_agent (self, pair, agent, sizeof agent);
    int64_t lost = 0;
    sqlite3_stmt *stmt = self->stmts[S_PAIR_LOST];
    sqlite3_bind_int64 (stmt, 1, pair);
    if (rc == SQLITE_DONE)
        rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_PAIR_LOST_COUNT];
        sqlite3_bind_int64 (stmt, 1, pair);
        rc = st_query_int (self, stmt, &lost, NULL);
        rc = rc == SQLITE_OK ? SQLITE_DONE : rc;
    }
    if (rc == SQLITE_DONE)
        rc = s_attempt_end (self, pair, attempt, "requeued", why, now_ns);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "requeue", experiment, pair, now_ns,
                 "attempt=%d lost=%" PRId64 " agent=%s reason=%s", attempt, lost, agent, why);
    if (rc == SQLITE_DONE && lost >= max_attempts) {
        char error[1024];
        snprintf (error, sizeof error, "agent lost %" PRId64 " times on this pair (last: %s)",
                  lost, why);
        stmt = self->stmts[S_PAIR_FAIL];
        sqlite3_bind_int64 (stmt, 1, pair);
        sqlite3_bind_text (stmt, 2, error, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64 (stmt, 3, now_ns);
        rc = st_exec (self, stmt);
        if (rc == SQLITE_DONE)
            st_event (self, &rc, "failed", experiment, pair, now_ns, "attempts=%d error=%s",
                     attempts, error);
        *failed = rc == SQLITE_DONE;
    }
    if (rc != SQLITE_DONE) {
        *failed = 0;
        return st_fail (self, rc, "cannot requeue pair %" PRId64, pair);
    }
    return st_write_end (self);
}

int
store_pair_defer (store_t *self, int64_t pair, int attempt, const char *agent, const char *text,
                  int64_t now_ns, int *deferred)
{
    *deferred = 0;
    if (st_write_begin (self))
        return -1;
    int state, attempts, last;
    int64_t experiment;
    if (s_pair_state (self, pair, "cannot defer", &state, &experiment, &attempts, &last) != 1)
        return -1;
    if (state != STORE_DISPATCHED || attempt != last) {
        st_write_nothing (self);
        return 0;
    }
    const char *why = text ? text : "";
    sqlite3_stmt *stmt = self->stmts[S_PAIR_DEFER];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE)
        rc = s_attempt_end (self, pair, attempt, "requeued", why, now_ns);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "defer", experiment, pair, now_ns, "attempt=%d agent=%s text=%s",
                 attempt, agent ? agent : "", why);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot defer pair %" PRId64, pair);
    *deferred = 1;
    return st_write_end (self);
}

int
store_requeue_all (store_t *self, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    // Events first and attempts next: both find the dispatched pairs by
    // their state, which the last statement changes.
    sqlite3_stmt *stmt = self->stmts[S_REQUEUE_ALL_EVENTS];
    sqlite3_bind_int64 (stmt, 1, now_ns);
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_REQUEUE_ALL_ATTEMPTS];
        sqlite3_bind_int64 (stmt, 1, now_ns);
        rc = st_exec (self, stmt);
    }
    if (rc == SQLITE_DONE)
        rc = st_exec (self, self->stmts[S_REQUEUE_ALL_PAIRS]);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot requeue the dispatched pairs");
    return st_write_end_many (self, sqlite3_changes (self->db));
}

int
store_agent_seen (store_t *self, const char *agent, const char *host, int cores,
                  const char *capabilities, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    // Heartbeats only move last_seen; an event records a new agent or one
    // that came back different.
    sqlite3_stmt *stmt = self->stmts[S_AGENT_GET];
    sqlite3_bind_text (stmt, 1, agent, -1, SQLITE_STATIC);
    st_bind_text (stmt, 2, host);
    sqlite3_bind_int (stmt, 3, cores);
    st_bind_text (stmt, 4, capabilities);
    int64_t same;
    int found, rc = st_query_int (self, stmt, &same, &found);
    if (rc == SQLITE_OK && found && same) {
        stmt = self->stmts[S_AGENT_SEEN];
        sqlite3_bind_text (stmt, 1, agent, -1, SQLITE_STATIC);
        sqlite3_bind_int64 (stmt, 2, now_ns);
        rc = st_exec (self, stmt);
    }
    else if (rc == SQLITE_OK) {
        stmt = self->stmts[S_AGENT_PUT];
        sqlite3_bind_text (stmt, 1, agent, -1, SQLITE_STATIC);
        st_bind_text (stmt, 2, host);
        sqlite3_bind_int (stmt, 3, cores);
        st_bind_text (stmt, 4, capabilities);
        sqlite3_bind_int64 (stmt, 5, now_ns);
        rc = st_exec (self, stmt);
        if (rc == SQLITE_DONE)
            st_event (self, &rc, "agent", 0, 0, now_ns, "agent=%s host=%s cores=%d capabilities=%s",
                     agent, host ? host : "", cores, capabilities ? capabilities : "");
    }
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot record agent '%s'", agent);
    return st_write_end (self);
}

int
store_agent_touch (store_t *self, const char *agent, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_AGENT_SEEN];
    sqlite3_bind_text (stmt, 1, agent, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 2, now_ns);
    int rc = st_exec (self, stmt);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot record agent '%s' as seen", agent);
    if (!self->call_dirty) {
        st_write_nothing (self);  // no row: no write lock held for it
        return 0;
    }
    return st_write_end (self);
}

#define S_NAMES_MAX 2048  // bytes of the names an 'agents-forgotten' event lists

int
store_agents_forget (store_t *self, int64_t before_ns, int64_t now_ns, char *names, size_t size)
{
    // Listed first, outside the write: an hourly look that finds nobody
    // takes no write lock. The broker is the only writer, so the rows
    // deleted next are these.
    char list[S_NAMES_MAX] = "";
    size_t used = 0;
    int count = 0, shown = 0, rc;
    sqlite3_stmt *stmt = self->stmts[S_AGENTS_UNSEEN];
    sqlite3_bind_int64 (stmt, 1, before_ns);
    while ((rc = st_step (self, stmt)) == SQLITE_ROW) {
        const char *name = st_column_text (stmt, 0);
        size_t len = strlen (name ? name : "");
        // Room kept for the count of those left out (" and 1000000 more").
        if (shown == count && used + len + 4 + 24 < sizeof list) {
            used += (size_t) snprintf (list + used, sizeof list - used, "%s'%s'",
                                       count ? ", " : "", name ? name : "");
            shown++;
        }
        count++;
    }
    sqlite3_reset (stmt);
    if (rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot list the agents not seen since %" PRId64,
                             before_ns);
    if (shown < count)
        snprintf (list + used, sizeof list - used, " and %d more", count - shown);
    if (names && size)
        snprintf (names, size, "%s", list);
    if (names && size > 4 && strlen (list) >= size)
        memcpy (names + size - 4, "...", 4);
    if (count == 0)
        return 0;
    if (st_write_begin (self))
        return -1;
    stmt = self->stmts[S_AGENTS_FORGET];
    sqlite3_bind_int64 (stmt, 1, before_ns);
    rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "agents-forgotten", 0, 0, now_ns, "count=%d agents=%s", count,
                  list);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot forget %d agent(s) not seen since %" PRId64, count,
                        before_ns);
    st_write_end (self);
    return count;
}

int64_t
store_event (store_t *self, const char *kind, int64_t experiment, int64_t pair,
             const char *payload, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    int rc;
    int64_t id = st_event (self, &rc, kind, experiment, pair, now_ns, "%s", payload ? payload : "");
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot append a '%s' event", kind);
    st_write_end (self);
    return id;
}

void
store_set_fields (store_t *self, int every)
{
    self->fields_every = every > 0 ? every : 0;
}
