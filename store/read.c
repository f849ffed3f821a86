// read.c — listings and queries for the store's readers (pivctl, the
// status page, the broker when it starts): read in batches so that a
// callback may write; results streamed with their fields.

#include "store/internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Listings. Rows are read in batches of S_BATCH_ROWS and the statement is
// reset before the callbacks run, so that a callback may write to the
// store (dispatch the pair it is given, append an event) without disturbing
// the listing; rows added after the listing began are not listed.

const char *
st_batch_text (const st_batch_t *batch, int row, int column)
{
    ptrdiff_t offset = batch->text[row][column];
    return offset < 0 ? NULL : batch->chars + offset;
}

// Steps a bound statement to its end, copying each row: 'columns' says
// column by column 'i' (integer) or 't' (text). Returns the rows, or -1
// with the SQLite code in *rc (the error is the caller's to report).
int
st_batch_fill (store_t *self, sqlite3_stmt *stmt, const char *columns, st_batch_t *batch, int *rc)
{
    batch->rows = 0;
    batch->used = 0;
    while ((*rc = st_step (self, stmt)) == SQLITE_ROW && batch->rows < S_BATCH_ROWS) {
        int row = batch->rows, ni = 0, nt = 0;
        for (int c = 0; columns[c]; c++) {
            if (columns[c] == 'i') {
                batch->num[row][ni++] = sqlite3_column_int64 (stmt, c);
                continue;
            }
            const char *text = st_column_text (stmt, c);
            if (!text) {
                batch->text[row][nt++] = -1;
                continue;
            }
            size_t len = (size_t) sqlite3_column_bytes (stmt, c) + 1;
            if (batch->used + len > batch->size) {
                size_t size = (batch->size ? batch->size * 2 : 4096) + len;
                char *chars = realloc (batch->chars, size);
                if (!chars) {
                    *rc = SQLITE_NOMEM;
                    snprintf (self->cause, sizeof self->cause, "%s", sqlite3_errstr (*rc));
                    sqlite3_reset (stmt);
                    return -1;
                }
                batch->chars = chars;
                batch->size = size;
            }
            memcpy (batch->chars + batch->used, text, len);
            batch->text[row][nt++] = (ptrdiff_t) batch->used;
            batch->used += len;
        }
        batch->rows++;
    }
    sqlite3_reset (stmt);
    if (*rc != SQLITE_ROW && *rc != SQLITE_DONE)
        return -1;
    return batch->rows;
}

// Binds the window of one batch: ids after 'last' up to 'max', at most
// 'rows' of them.
static void
s_bind_window (sqlite3_stmt *stmt, int64_t last, int64_t max, int rows)
{
    sqlite3_bind_int64 (stmt, 1, last);
    sqlite3_bind_int64 (stmt, 2, max);
    sqlite3_bind_int (stmt, 3, rows);
}

// Runs a listing over the ids of a table: statement 'which' (?1, ?2 and ?3
// the window, see s_bind_window; its other parameters bound by the
// caller, which binding keeps across batches) is run for the ids after
// 'after' up to the largest (query 'max_id') when the listing began; its
// first column is the id. At most 'limit' rows (0: every one). Returns the
// rows counted, or -1 with the SQLite code in *rc, for the caller to
// report.
int
st_list (store_t *self, st_stmt_id_t max_id, st_stmt_id_t which, const char *columns,
        int64_t after, int limit, st_row_fn *row_fn, void *ctx, int *rc)
{
    st_batch_t *batch = calloc (1, sizeof *batch);
    if (!batch) {
        *rc = SQLITE_NOMEM;
        snprintf (self->cause, sizeof self->cause, "%s", sqlite3_errstr (*rc));
        return -1;
    }
    int64_t last = after, max;
    int calls = 0, stop = 0, rows = S_BATCH_ROWS, want = S_BATCH_ROWS;
    *rc = st_query_int (self, self->stmts[max_id], &max, NULL);
    while (*rc == SQLITE_OK && !stop && rows == want && (limit <= 0 || calls < limit)) {
        want = limit > 0 && limit - calls < S_BATCH_ROWS ? limit - calls : S_BATCH_ROWS;
        sqlite3_stmt *stmt = self->stmts[which];
        s_bind_window (stmt, last, max, want);
        rows = st_batch_fill (self, stmt, columns, batch, rc);
        if (rows < 0)
            break;
        *rc = SQLITE_OK;
        for (int r = 0; r < rows && !stop && *rc == SQLITE_OK; r++) {
            last = batch->num[r][0];
            stop = row_fn (ctx, batch, r, rc);
            calls += *rc == SQLITE_OK;
        }
    }
    free (batch->chars);
    free (batch);
    return *rc == SQLITE_OK ? calls : -1;
}

// st_list for a read: its failure is reported as "<fmt ...> in '<file>':
// <cause>". Returns the rows or -1.
static int
s_list_read (store_t *self, st_stmt_id_t max_id, st_stmt_id_t which, const char *columns,
             int64_t after, int limit, st_row_fn *row_fn, void *ctx, const char *fmt, ...)
    __attribute__ ((format (printf, 9, 10)));

static int
s_list_read (store_t *self, st_stmt_id_t max_id, st_stmt_id_t which, const char *columns,
             int64_t after, int limit, st_row_fn *row_fn, void *ctx, const char *fmt, ...)
{
    int rc, calls = st_list (self, max_id, which, columns, after, limit, row_fn, ctx, &rc);
    if (calls < 0) {
        va_list args;
        va_start (args, fmt);
        st_vfail (self, rc, 0, fmt, args);
        va_end (args);
    }
    return calls;
}

static int
s_pair_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    (void) rc;
    st_list_t *list = ctx;
    return ((store_pair_fn *) list->fn) (list->arg, batch->num[r][0], st_batch_text (batch, r, 0),
                                         st_batch_text (batch, r, 1), st_batch_text (batch, r, 2),
                                         st_batch_text (batch, r, 3), (int) batch->num[r][1]);
}

int
store_pairs_in_state (store_t *self, store_state_t state, store_pair_fn *fn, void *arg)
{
    static const st_stmt_id_t by_state[] = {S_PAIRS_PENDING, S_PAIRS_DISPATCHED, S_PAIRS_DONE,
                                           S_PAIRS_FAILED, S_PAIRS_SKIPPED};
    if ((int) state < 0 || (int) state > STORE_SKIPPED) {
        st_error (self, "cannot list pairs in '%s': no state %d", self->path, (int) state);
        return -1;
    }
    st_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_PAIRS_MAX, by_state[state], "iitttt", 0, 0, s_pair_row, &list,
                        "cannot list pairs");
}

static int
s_file_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    (void) rc;
    st_list_t *list = ctx;
    int stop = ((store_file_fn *) list->fn) (list->arg, st_batch_text (batch, r, 0),
                                             st_batch_text (batch, r, 1), batch->num[r][0]);
    list->value |= stop != 0;
    return stop;
}

// Lists the files of statement 'which'; *stop is set if fn stopped it.
static int
s_list_files (store_t *self, st_stmt_id_t which, store_file_fn *fn, void *arg, int *stop)
{
    st_list_t list = {.fn = fn, .arg = arg};
    int calls = s_list_read (self, S_FILES_MAX, which, "itt", 0, 0, s_file_row, &list,
                             "cannot list files");
    *stop = (int) list.value;
    return calls;
}

int
store_files (store_t *self, store_file_fn *fn, void *arg)
{
    int stop;
    return s_list_files (self, S_FILES, fn, arg, &stop);
}

int
store_files_waiting (store_t *self, int pairs_per_file, store_file_fn *fn, void *arg)
{
    int stop;
    int calls = s_list_files (self, S_FILES_UNPAIRED, fn, arg, &stop);
    if (calls >= 0 && pairs_per_file >= 2 && !stop) {
        int more = s_list_files (self, S_FILES_PAIRED_ONCE, fn, arg, &stop);
        calls = more < 0 ? -1 : calls + more;
    }
    return calls;
}

// Fills counts for one experiment: done is what the other states leave.
static int
s_count (store_t *self, int64_t experiment, store_counts_t *counts)
{
    int64_t all;
    sqlite3_stmt *stmt = self->stmts[S_COUNT_FILES];
    sqlite3_bind_int64 (stmt, 1, experiment);
    int rc = st_query_int (self, stmt, &counts->files, NULL);
    if (rc == SQLITE_OK) {
        stmt = self->stmts[S_COUNT_PAIRS];
        sqlite3_bind_int64 (stmt, 1, experiment);
        rc = st_query_int (self, stmt, &all, NULL);
    }
    if (rc != SQLITE_OK)
        return rc;
    stmt = self->stmts[S_COUNT_STATES];
    sqlite3_bind_int64 (stmt, 1, experiment);
    int64_t others = 0;
    while ((rc = st_step (self, stmt)) == SQLITE_ROW) {
        int state = sqlite3_column_int (stmt, 0);
        if (state >= 0 && state <= STORE_SKIPPED && state != STORE_DONE) {
            counts->pairs[state] = sqlite3_column_int64 (stmt, 1);
            others += counts->pairs[state];
        }
    }
    sqlite3_reset (stmt);
    counts->pairs[STORE_DONE] = all - others;
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int
s_counts_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    st_list_t *list = ctx;
    store_counts_t counts = {.name = st_batch_text (batch, r, 0), .created_ns = batch->num[r][1]};
    *rc = s_count (list->store, batch->num[r][0], &counts);
    return *rc == SQLITE_OK ? ((store_counts_fn *) list->fn) (list->arg, &counts) : 0;
}

int
store_counts (store_t *self, store_counts_fn *fn, void *arg)
{
    st_list_t list = {.store = self, .fn = fn, .arg = arg};
    return s_list_read (self, S_EXPERIMENTS_MAX, S_EXPERIMENTS, "iittt", 0, 0, s_counts_row,
                        &list, "cannot count pairs");
}

static int
s_experiment_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    (void) rc;
    st_list_t *list = ctx;
    store_experiment_t experiment = {.id = batch->num[r][0],
                                     .created_ns = batch->num[r][1],
                                     .name = st_batch_text (batch, r, 0),
                                     .source = st_batch_text (batch, r, 1),
                                     .settings = st_batch_text (batch, r, 2)};
    return ((store_experiment_fn *) list->fn) (list->arg, &experiment);
}

int
store_experiments (store_t *self, store_experiment_fn *fn, void *arg)
{
    st_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_EXPERIMENTS_MAX, S_EXPERIMENTS, "iittt", 0, 0, s_experiment_row,
                        &list, "cannot list experiments");
}

static int
s_pair_info_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    (void) rc;
    st_list_t *list = ctx;
    const int64_t *num = batch->num[r];
    store_pair_info_t pair = {.pair = num[0],
                              .state = (int) num[1],
                              .attempts = (int) num[2],
                              .created_ns = num[3],
                              .dispatched_ns = num[4],
                              .finished_ns = num[5],
                              .closed_ns = num[6],
                              .stem = st_batch_text (batch, r, 0),
                              .agent = st_batch_text (batch, r, 1),
                              .error = st_batch_text (batch, r, 2)};
    return ((store_pair_info_fn *) list->fn) (list->arg, &pair);
}

int
store_pairs_of (store_t *self, int64_t experiment, int state, int64_t after, int limit,
                store_pair_info_fn *fn, void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_PAIRS_OF];
    sqlite3_bind_int64 (stmt, 4, experiment);
    sqlite3_bind_int (stmt, 5, state);
    st_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_PAIRS_MAX, S_PAIRS_OF, "iiiiiiittt", after, limit,
                        s_pair_info_row, &list, "cannot list the pairs of experiment %" PRId64,
                        experiment);
}

static int
s_file_info_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    (void) rc;
    st_list_t *list = ctx;
    const int64_t *num = batch->num[r];
    return ((store_file_info_fn *) list->fn) (list->arg, num[0], st_batch_text (batch, r, 0),
                                              num[1], num[2], num[3]);
}

int
store_files_of (store_t *self, int64_t experiment, store_file_info_fn *fn, void *arg)
{
    sqlite3_bind_int64 (self->stmts[S_FILES_OF], 4, experiment);
    st_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_FILES_MAX, S_FILES_OF, "iiiit", 0, 0, s_file_info_row, &list,
                        "cannot list the files of experiment %" PRId64, experiment);
}

static int
s_event_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    (void) rc;
    st_list_t *list = ctx;
    const int64_t *num = batch->num[r];
    return ((store_event_fn *) list->fn) (list->arg, num[0], num[1], st_batch_text (batch, r, 0),
                                          num[2], num[3], st_batch_text (batch, r, 1));
}

int
store_events (store_t *self, int64_t experiment, int64_t after, store_event_fn *fn, void *arg)
{
    st_stmt_id_t which = experiment ? S_EVENTS_OF : S_EVENTS_ALL;
    if (experiment)
        sqlite3_bind_int64 (self->stmts[which], 4, experiment);
    st_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_EVENTS_MAX, which, "iiiitt", after, 0, s_event_row, &list,
                        "cannot list events");
}

int
store_events_of_kind (store_t *self, int64_t experiment, const char *kind, store_event_fn *fn,
                      void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_EVENTS_OF_KIND];
    sqlite3_bind_int64 (stmt, 4, experiment);
    st_bind_text (stmt, 5, kind);
    st_list_t list = {.fn = fn, .arg = arg};
    int calls = s_list_read (self, S_EVENTS_MAX, S_EVENTS_OF_KIND, "iiiitt", 0, 0, s_event_row,
                             &list, "cannot list the '%s' events", kind ? kind : "");
    sqlite3_bind_null (stmt, 5);  // the caller's string may not outlive the call
    return calls;
}

int
store_experiment_find (store_t *self, const char *name, store_experiment_t *out)
{
    sqlite3_stmt *stmt = self->stmts[S_EXPERIMENT_FIND];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    int rc = st_step (self, stmt);
    if (rc == SQLITE_ROW) {
        // The three strings, back to back in the store's buffer.
        size_t len[3], need = 0;
        for (int c = 0; c < 3; c++)
            need += (len[c] = (size_t) sqlite3_column_bytes (stmt, 2 + c) + 1);
        if (need > self->found_size) {
            char *found = realloc (self->found, need);
            if (!found) {
                sqlite3_reset (stmt);
                st_error (self, "cannot look up experiment '%s' in '%s': out of memory", name,
                         self->path);
                return -1;
            }
            self->found = found;
            self->found_size = need;
        }
        const char *text[3];
        char *at = self->found;
        for (int c = 0; c < 3; c++) {
            memcpy (at, st_column_text (stmt, 2 + c), len[c]);
            text[c] = at;
            at += len[c];
        }
        *out = (store_experiment_t) {.id = sqlite3_column_int64 (stmt, 0),
                                     .created_ns = sqlite3_column_int64 (stmt, 1),
                                     .name = text[0],
                                     .source = text[1],
                                     .settings = text[2]};
    }
    sqlite3_reset (stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot look up experiment '%s'", name);
    return rc == SQLITE_ROW;
}

// Settings have no id; their listing goes on from the last (experiment,
// key) it gave, so a setting that fn adds after that key is listed too.
int
store_settings (store_t *self, store_setting_fn *fn, void *arg)
{
    st_batch_t *batch = calloc (1, sizeof *batch);
    char *key = strdup ("");
    int64_t experiment = INT64_MIN;
    int calls = 0, stop = 0, rows = S_BATCH_ROWS;
    int rc = batch && key ? SQLITE_OK : SQLITE_NOMEM;
    while (rc == SQLITE_OK && !stop && rows == S_BATCH_ROWS) {
        sqlite3_stmt *stmt = self->stmts[S_SETTINGS];
        sqlite3_bind_int64 (stmt, 1, experiment);
        sqlite3_bind_text (stmt, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_int (stmt, 3, S_BATCH_ROWS);
        rows = st_batch_fill (self, stmt, "itt", batch, &rc);
        if (rows < 0)
            break;
        rc = SQLITE_OK;
        for (int r = 0; r < rows && !stop; r++) {
            calls++;
            stop = fn (arg, batch->num[r][0], st_batch_text (batch, r, 0),
                       st_batch_text (batch, r, 1));
        }
        if (rows > 0) {
            free (key);
            experiment = batch->num[rows - 1][0];
            if (!(key = strdup (st_batch_text (batch, rows - 1, 0))))
                rc = SQLITE_NOMEM;
        }
    }
    if (rc == SQLITE_NOMEM)
        snprintf (self->cause, sizeof self->cause, "%s", sqlite3_errstr (rc));
    if (batch)
        free (batch->chars);
    free (batch);
    free (key);
    if (rc != SQLITE_OK)
        return st_fail_read (self, rc, "cannot list settings");
    return calls;
}

// Results carry their field, too large to read ahead in batches: they are
// given to fn as they are stepped, and the store refuses writes meanwhile.
int
st_results (store_t *self, sqlite3_stmt *stmt, int64_t experiment, store_result_info_fn *fn,
           void *arg)
{
    sqlite3_bind_int64 (stmt, 1, experiment);
    int calls = 0, stop = 0, rc;
    self->streaming = 1;
    while (!stop && (rc = st_step (self, stmt)) == SQLITE_ROW) {
        store_result_info_t result = {
            .pair = sqlite3_column_int64 (stmt, 0),
            .attempt = sqlite3_column_int (stmt, 1),
            .nx = sqlite3_column_int (stmt, 2),
            .ny = sqlite3_column_int (stmt, 3),
            .compute_ns = sqlite3_column_int64 (stmt, 4),
            .closed_ns = sqlite3_column_int64 (stmt, 5),
            .dispatched_ns = sqlite3_column_int64 (stmt, 6),
            .recorded_ns = sqlite3_column_int64 (stmt, 7),
            .mean_u = sqlite3_column_double (stmt, 8),
            .mean_v = sqlite3_column_double (stmt, 9),
            .mean_speed = sqlite3_column_double (stmt, 10),
            .valid_fraction = sqlite3_column_double (stmt, 11),
            .vorticity = sqlite3_column_double (stmt, 12),
            .stem = st_column_text (stmt, 13),
            .agent = st_column_text (stmt, 14),
            .path = st_column_text (stmt, 15),
            .field = sqlite3_column_blob (stmt, 16),
        };
        result.field_size = result.field ? (size_t) sqlite3_column_bytes (stmt, 16) : 0;
        result.settings = st_column_text (stmt, 17);
        calls++;
        stop = fn (arg, &result);
    }
    self->streaming = 0;
    sqlite3_reset (stmt);
    if (!stop && rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot list the results of experiment %" PRId64,
                            experiment);
    return calls;
}

int
store_results_of (store_t *self, int64_t experiment, store_result_info_fn *fn, void *arg)
{
    return st_results (self, self->stmts[S_RESULTS_OF], experiment, fn, arg);
}

int
store_result_latest (store_t *self, int64_t experiment, store_result_info_fn *fn, void *arg)
{
    return st_results (self, self->stmts[S_RESULT_LATEST], experiment, fn, arg);
}

int64_t
store_event_last (store_t *self)
{
    int64_t last = 0;
    int found;
    int rc = st_query_int (self, self->stmts[S_EVENT_LAST], &last, &found);
    if (rc != SQLITE_OK)
        return st_fail_read (self, rc, "cannot read the event log");
    return last;
}

int
store_agents (store_t *self, store_agent_fn *fn, void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_AGENTS];
    int calls = 0, stop = 0, rc;
    while (!stop && (rc = st_step (self, stmt)) == SQLITE_ROW) {
        calls++;
        stop = fn (arg, st_column_text (stmt, 0), st_column_text (stmt, 1),
                   sqlite3_column_int (stmt, 2), st_column_text (stmt, 3),
                   sqlite3_column_int64 (stmt, 4), sqlite3_column_int64 (stmt, 5));
    }
    sqlite3_reset (stmt);
    if (!stop && rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot list the agents");
    return calls;
}

int
store_allocations (store_t *self, store_allocation_fn *fn, void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_ALLOCS];
    int rc, calls = 0, stop = 0;
    while (!stop && (rc = st_step (self, stmt)) == SQLITE_ROW) {
        store_allocation_t a = {.id = sqlite3_column_int64 (stmt, 0),
                                .experiment = sqlite3_column_int64 (stmt, 1),
                                .size_bytes = sqlite3_column_int64 (stmt, 2),
                                .created_ns = sqlite3_column_int64 (stmt, 3),
                                .expires_ns = sqlite3_column_int64 (stmt, 4),
                                .name = st_column_text (stmt, 5),
                                .kind = st_column_text (stmt, 6),
                                .path = st_column_text (stmt, 7),
                                .state = st_column_text (stmt, 8)};
        calls++;
        stop = fn (arg, &a);
    }
    sqlite3_reset (stmt);
    if (!stop && rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot list the allocations");
    return calls;
}

int
store_file_location (store_t *self, int64_t experiment, const char *name, char *out, size_t size)
{
    sqlite3_stmt *stmt = self->stmts[S_FILE_LOCATION];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
    int rc = st_step (self, stmt), found = 0;
    if (rc == SQLITE_ROW && st_column_text (stmt, 0)) {
        snprintf (out, size, "%s", st_column_text (stmt, 0));
        found = 1;
    }
    sqlite3_reset (stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot look up where '%s' is", name);
    return found;
}

static int
s_file_stored_row (void *ctx, const st_batch_t *batch, int r, int *rc)
{
    (void) rc;
    st_list_t *list = ctx;
    store_file_stored_t f = {.file = batch->num[r][0],
                             .size = batch->num[r][1],
                             .name = st_batch_text (batch, r, 0),
                             .sha256 = st_batch_text (batch, r, 1),
                             .location = st_batch_text (batch, r, 2)};
    return ((store_file_stored_fn *) list->fn) (list->arg, &f);
}

int
store_files_stored (store_t *self, int64_t experiment, store_file_stored_fn *fn, void *arg)
{
    sqlite3_bind_int64 (self->stmts[S_FILES_STORED], 4, experiment);
    st_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_FILES_MAX, S_FILES_STORED, "iittt", 0, 0, s_file_stored_row,
                        &list, "cannot list the files of experiment %" PRId64, experiment);
}

int64_t
store_file_last_seen (store_t *self, int64_t experiment)
{
    sqlite3_stmt *stmt = self->stmts[S_FILE_LAST_SEEN];
    sqlite3_bind_int64 (stmt, 1, experiment);
    int64_t ns;
    int rc = st_query_int (self, stmt, &ns, NULL);
    if (rc != SQLITE_OK)
        return st_fail_read (self, rc, "cannot read the files of experiment %" PRId64, experiment);
    return ns;
}
