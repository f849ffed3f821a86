// stats.c — the run statistics' checkpoints (schema 5, doc/units.md): the
// broker's sets saved with the results they count marked in the same
// group, read back at start, the results not counted yet, and a rebuild
// from scratch.

#include "store/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int
store_stats_save (store_t *self, const store_stats_t *stats, const int64_t *pairs, size_t npairs,
                  int64_t now_ns)
{
    if (!stats || (stats->set && !stats->state)) {
        st_error (self, "cannot save statistics in '%s': no state", self->path);
        return -1;
    }
    if (st_write_begin (self))
        return -1;
    int rc = SQLITE_DONE;
    if (stats->set) {
        sqlite3_stmt *stmt = self->stmts[S_STATS_PUT];
        sqlite3_bind_int64 (stmt, 1, stats->experiment);
        sqlite3_bind_text (stmt, 2, stats->set, -1, SQLITE_STATIC);
        sqlite3_bind_text (stmt, 3, stats->settings ? stats->settings : "", -1, SQLITE_STATIC);
        sqlite3_bind_text (stmt, 4, stats->calibration ? stats->calibration : "none", -1,
                           SQLITE_STATIC);
        sqlite3_bind_int64 (stmt, 5, stats->fields);
        sqlite3_bind_int64 (stmt, 6, stats->first_pair);
        sqlite3_bind_int64 (stmt, 7, stats->last_pair);
        sqlite3_bind_blob64 (stmt, 8, stats->state, stats->state_size, SQLITE_STATIC);
        sqlite3_bind_int64 (stmt, 9, now_ns);
        rc = st_exec (self, stmt);
    }
    for (size_t i = 0; i < npairs && rc == SQLITE_DONE; i++) {
        sqlite3_stmt *stmt = self->stmts[S_STATS_COUNT];
        sqlite3_bind_int64 (stmt, 1, pairs[i]);
        sqlite3_bind_int64 (stmt, 2, stats->experiment);
        rc = st_exec (self, stmt);
    }
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot save the statistics of experiment %" PRId64,
                        stats->experiment);
    return st_write_end (self);
}

int
store_stats_of (store_t *self, int64_t experiment, store_stats_fn *fn, void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_STATS_OF];
    sqlite3_bind_int64 (stmt, 1, experiment);
    int rc, calls = 0, stop = 0;
    while (!stop && (rc = st_step (self, stmt)) == SQLITE_ROW) {
        store_stats_t s = {.experiment = sqlite3_column_int64 (stmt, 0),
                           .fields = sqlite3_column_int64 (stmt, 1),
                           .first_pair = sqlite3_column_int64 (stmt, 2),
                           .last_pair = sqlite3_column_int64 (stmt, 3),
                           .updated_ns = sqlite3_column_int64 (stmt, 4),
                           .set = st_column_text (stmt, 5),
                           .settings = st_column_text (stmt, 6),
                           .calibration = st_column_text (stmt, 7),
                           .state = sqlite3_column_blob (stmt, 8)};
        s.state_size = (size_t) sqlite3_column_bytes (stmt, 8);
        calls++;
        stop = fn (arg, &s);
    }
    sqlite3_reset (stmt);
    if (!stop && rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot read the statistics of experiment %" PRId64,
                             experiment);
    return calls;
}

int
store_results_uncounted (store_t *self, int64_t experiment, int64_t after,
                         store_result_info_fn *fn, void *arg)
{
    sqlite3_bind_int64 (self->stmts[S_RESULTS_UNCOUNTED], 2, after);
    return st_results (self, self->stmts[S_RESULTS_UNCOUNTED], experiment, fn, arg);
}

int
store_stats_clear (store_t *self, int64_t experiment, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_STATS_DELETE];
    sqlite3_bind_int64 (stmt, 1, experiment);
    int rc = st_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_STATS_UNCOUNT];
        sqlite3_bind_int64 (stmt, 1, experiment);
        rc = st_exec (self, stmt);
    }
    if (rc == SQLITE_DONE && self->call_dirty)
        st_event (self, &rc, "stats", experiment, 0, now_ns, "cleared");
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot clear the statistics of experiment %" PRId64,
                        experiment);
    if (!self->call_dirty)
        st_write_nothing (self);
    return st_write_end (self);
}
