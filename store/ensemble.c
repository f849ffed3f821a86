// ensemble.c — the store's part of ensemble correlation jobs (issue 27):
// jobs, the pairs each sums, the partial sum of each (job, pass, chunk)
// recorded once, and the field a job ends with. Rare writes (a job a run,
// a partial a chunk): statements are prepared per call, not kept.

#include "store/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A statement of 'sql', or NULL with the error set.
static sqlite3_stmt *
s_prepare (store_t *self, const char *sql, const char *what)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db, sql, -1, &stmt, NULL);
    if (rc != SQLITE_OK) {
        st_error (self, "cannot %s in '%s': %s", what, self->path, sqlite3_errmsg (self->db));
        sqlite3_finalize (stmt);
        return NULL;
    }
    return stmt;
}

// Runs one prepared write of a write call; SQLite's code.
static int
s_write (store_t *self, const char *sql, const char *what, sqlite3_stmt **stmt_p)
{
    *stmt_p = s_prepare (self, sql, what);
    return *stmt_p ? SQLITE_OK : SQLITE_ERROR;
}

void
store_ensemble_release (store_ensemble_t *job)
{
    if (!job)
        return;
    free (job->asked);
    free (job->settings);
    free (job->error);
    free (job->field);
    free (job->stress);
    memset (job, 0, sizeof *job);
}

int64_t
store_ensemble_new (store_t *self, const store_ensemble_t *job, const int64_t *pairs,
                    size_t npairs, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt;
    int rc = s_write (self,
                      "INSERT INTO ensemble_jobs (experiment, window, overlap, asked, settings,"
                      " chunk, passes, pass, pairs, state, created_ns)"
                      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8, 'running', ?9)",
                      "record an ensemble job", &stmt);
    if (rc != SQLITE_OK)
        return -1;
    sqlite3_bind_int64 (stmt, 1, job->experiment);
    sqlite3_bind_int (stmt, 2, job->window);
    sqlite3_bind_int (stmt, 3, job->overlap);
    sqlite3_bind_text (stmt, 4, job->asked ? job->asked : "", -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 5, job->settings ? job->settings : "", -1, SQLITE_STATIC);
    sqlite3_bind_int (stmt, 6, job->chunk);
    sqlite3_bind_int (stmt, 7, job->passes);
    sqlite3_bind_int64 (stmt, 8, (int64_t) npairs);
    sqlite3_bind_int64 (stmt, 9, now_ns);
    rc = st_exec (self, stmt);
    sqlite3_finalize (stmt);
    int64_t id = sqlite3_last_insert_rowid (self->db);
    if (rc == SQLITE_DONE
        && s_write (self, "INSERT INTO ensemble_pairs (job, ord, pair) VALUES (?1, ?2, ?3)",
                    "record an ensemble job's pairs", &stmt)
               == SQLITE_OK) {
        for (size_t i = 0; i < npairs && rc == SQLITE_DONE; i++) {
            sqlite3_bind_int64 (stmt, 1, id);
            sqlite3_bind_int64 (stmt, 2, (int64_t) i);
            sqlite3_bind_int64 (stmt, 3, pairs[i]);
            rc = st_exec (self, stmt);
        }
        sqlite3_finalize (stmt);
    }
    if (rc == SQLITE_DONE)
        st_event (self, &rc, "ensemble", job->experiment, 0, now_ns,
                  "job=%lld window=%d overlap=%d pairs=%zu asked=%s", (long long) id,
                  job->window, job->overlap, npairs, job->asked ? job->asked : "");
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot record an ensemble job of experiment %lld",
                        (long long) job->experiment);
    st_write_end (self);
    return id;
}

int
store_ensemble_partial (store_t *self, int64_t job, int pass, int chunk, int64_t pairs,
                        const char *agent, const void *partial, size_t size, int64_t now_ns,
                        int *recorded)
{
    *recorded = 0;
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt;
    if (s_write (self,
                 "INSERT INTO ensemble_partials (job, pass, chunk, pairs, agent, partial,"
                 " recorded_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                 " ON CONFLICT (job, pass, chunk) DO NOTHING",
                 "record a partial sum", &stmt)
        != SQLITE_OK)
        return -1;
    sqlite3_bind_int64 (stmt, 1, job);
    sqlite3_bind_int (stmt, 2, pass);
    sqlite3_bind_int (stmt, 3, chunk);
    sqlite3_bind_int64 (stmt, 4, pairs);
    sqlite3_bind_text (stmt, 5, agent, -1, SQLITE_STATIC);
    sqlite3_bind_blob64 (stmt, 6, partial, size, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 7, now_ns);
    int rc = st_exec (self, stmt);
    *recorded = rc == SQLITE_DONE && sqlite3_changes (self->db) > 0;
    sqlite3_finalize (stmt);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot record the partial sum of ensemble job %lld pass %d "
                        "chunk %d", (long long) job, pass, chunk);
    st_write_end (self);
    return 0;
}

int
store_ensemble_partial_get (store_t *self, int64_t job, int pass, int chunk,
                            unsigned char **buf_p, size_t *size_p)
{
    *buf_p = NULL;
    *size_p = 0;
    sqlite3_stmt *stmt = s_prepare (self,
                                    "SELECT partial FROM ensemble_partials"
                                    " WHERE job = ?1 AND pass = ?2 AND chunk = ?3",
                                    "read a partial sum");
    if (!stmt)
        return -1;
    sqlite3_bind_int64 (stmt, 1, job);
    sqlite3_bind_int (stmt, 2, pass);
    sqlite3_bind_int (stmt, 3, chunk);
    int rc = st_step (self, stmt);
    if (rc == SQLITE_ROW) {
        size_t n = (size_t) sqlite3_column_bytes (stmt, 0);
        unsigned char *buf = malloc (n ? n : 1);
        if (!buf) {
            sqlite3_finalize (stmt);
            st_error (self, "no memory for a partial sum of %zu bytes", n);
            return -1;
        }
        if (n)
            memcpy (buf, sqlite3_column_blob (stmt, 0), n);
        *buf_p = buf;
        *size_p = n;
        rc = SQLITE_DONE;
    }
    sqlite3_finalize (stmt);
    if (rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot read the partial sum of ensemble job %lld pass "
                             "%d chunk %d", (long long) job, pass, chunk);
    return 0;
}

int
store_ensemble_pass (store_t *self, int64_t job, int pass, int64_t now_ns)
{
    (void) now_ns;
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt;
    if (s_write (self, "UPDATE ensemble_jobs SET pass = ?2 WHERE id = ?1",
                 "move an ensemble job on", &stmt)
        != SQLITE_OK)
        return -1;
    sqlite3_bind_int64 (stmt, 1, job);
    sqlite3_bind_int (stmt, 2, pass);
    int rc = st_exec (self, stmt);
    sqlite3_finalize (stmt);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot move ensemble job %lld to pass %d", (long long) job,
                        pass);
    st_write_end (self);
    return 0;
}

int
store_ensemble_end (store_t *self, int64_t job, const char *error, const void *field,
                    size_t field_size, const void *stress, size_t stress_size, int64_t counted,
                    int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt;
    if (s_write (self,
                 "UPDATE ensemble_jobs SET state = ?2, error = ?3, field = ?4, stress = ?5,"
                 " finished_ns = ?6, counted = ?7 WHERE id = ?1 AND state = 'running'",
                 "end an ensemble job", &stmt)
        != SQLITE_OK)
        return -1;
    sqlite3_bind_int64 (stmt, 1, job);
    sqlite3_bind_text (stmt, 2, error ? "failed" : "done", -1, SQLITE_STATIC);
    st_bind_text (stmt, 3, error);
    if (field)
        sqlite3_bind_blob64 (stmt, 4, field, field_size, SQLITE_STATIC);
    if (stress)
        sqlite3_bind_blob64 (stmt, 5, stress, stress_size, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 6, now_ns);
    if (!error)
        sqlite3_bind_int64 (stmt, 7, counted);
    int rc = st_exec (self, stmt);
    sqlite3_finalize (stmt);
    // Its partials have served: the field holds what they summed.
    if (rc == SQLITE_DONE
        && s_write (self, "DELETE FROM ensemble_partials WHERE job = ?1",
                    "drop an ensemble job's partial sums", &stmt)
               == SQLITE_OK) {
        sqlite3_bind_int64 (stmt, 1, job);
        rc = st_exec (self, stmt);
        sqlite3_finalize (stmt);
    }
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot end ensemble job %lld", (long long) job);
    st_write_end (self);
    return 0;
}

int
store_ensemble_abandon (store_t *self, const char *error, int64_t now_ns)
{
    if (st_write_begin (self))
        return -1;
    sqlite3_stmt *stmt;
    if (s_write (self,
                 "UPDATE ensemble_jobs SET state = 'failed', error = ?1, finished_ns = ?2"
                 " WHERE state = 'running'",
                 "end the ensemble jobs left running", &stmt)
        != SQLITE_OK)
        return -1;
    sqlite3_bind_text (stmt, 1, error, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 2, now_ns);
    int rc = st_exec (self, stmt);
    int n = sqlite3_changes (self->db);
    sqlite3_finalize (stmt);
    if (rc != SQLITE_DONE)
        return st_fail (self, rc, "cannot end the ensemble jobs left running");
    st_write_end (self);
    return n;
}

// A copy of column i's bytes (NULL for NULL), its size in *size.
static void *
s_column_copy (sqlite3_stmt *stmt, int i, size_t *size, int text)
{
    *size = 0;
    if (sqlite3_column_type (stmt, i) == SQLITE_NULL)
        return NULL;
    const void *data = text ? (const void *) sqlite3_column_text (stmt, i)
                            : sqlite3_column_blob (stmt, i);
    size_t n = (size_t) sqlite3_column_bytes (stmt, i);
    unsigned char *copy = malloc (n + 1);
    if (!copy)
        return NULL;
    if (n)
        memcpy (copy, data, n);
    copy[n] = '\0';
    *size = n;
    return copy;
}

int
store_ensemble_latest (store_t *self, int64_t experiment, int done_only, store_ensemble_t *job)
{
    memset (job, 0, sizeof *job);
    sqlite3_stmt *stmt = s_prepare (
        self,
        "SELECT id, experiment, window, overlap, asked, settings, chunk, passes, pass, pairs,"
        " state, error, field, stress, created_ns, ifnull (finished_ns, 0),"
        " ifnull (counted, -1) FROM ensemble_jobs"
        " WHERE experiment = ?1 AND (?2 = 0 OR state = 'done') ORDER BY id DESC LIMIT 1",
        "read an ensemble job");
    if (!stmt)
        return -1;
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_int (stmt, 2, done_only);
    int rc = st_step (self, stmt), found = rc == SQLITE_ROW;
    if (found) {
        size_t n;
        job->id = sqlite3_column_int64 (stmt, 0);
        job->experiment = sqlite3_column_int64 (stmt, 1);
        job->window = sqlite3_column_int (stmt, 2);
        job->overlap = sqlite3_column_int (stmt, 3);
        job->asked = s_column_copy (stmt, 4, &n, 1);
        job->settings = s_column_copy (stmt, 5, &n, 1);
        job->chunk = sqlite3_column_int (stmt, 6);
        job->passes = sqlite3_column_int (stmt, 7);
        job->pass = sqlite3_column_int (stmt, 8);
        job->pairs = sqlite3_column_int64 (stmt, 9);
        snprintf (job->state, sizeof job->state, "%s", st_column_text (stmt, 10));
        job->error = s_column_copy (stmt, 11, &n, 1);
        job->field = s_column_copy (stmt, 12, &job->field_size, 0);
        job->stress = s_column_copy (stmt, 13, &job->stress_size, 0);
        job->created_ns = sqlite3_column_int64 (stmt, 14);
        job->finished_ns = sqlite3_column_int64 (stmt, 15);
        job->counted = sqlite3_column_int64 (stmt, 16);
        rc = SQLITE_DONE;
    }
    sqlite3_finalize (stmt);
    if (rc != SQLITE_DONE) {
        store_ensemble_release (job);
        return st_fail_read (self, rc, "cannot read the ensemble jobs of experiment %lld",
                             (long long) experiment);
    }
    return found;
}

int
store_pair_frames (store_t *self, int64_t experiment, store_pair_frames_fn *fn, void *arg)
{
    sqlite3_stmt *stmt =
        s_prepare (self,
                   "SELECT p.id, p.state, fa.name, fb.name, p.file_c IS NOT NULL FROM pairs p"
                   " JOIN files fa ON fa.id = p.file_a LEFT JOIN files fb ON fb.id = p.file_b"
                   " WHERE +p.experiment = ?1 ORDER BY p.id",
                   "list an experiment's pairs");
    if (!stmt)
        return -1;
    sqlite3_bind_int64 (stmt, 1, experiment);
    int rc, count = 0;
    while ((rc = st_step (self, stmt)) == SQLITE_ROW) {
        count++;
        if (fn (arg, sqlite3_column_int64 (stmt, 0), sqlite3_column_int (stmt, 1),
                st_column_text (stmt, 2), st_column_text (stmt, 3),
                sqlite3_column_int (stmt, 4))
            != 0) {
            rc = SQLITE_DONE;
            break;
        }
    }
    sqlite3_finalize (stmt);
    if (rc != SQLITE_DONE)
        return st_fail_read (self, rc, "cannot list the pairs of experiment %lld",
                             (long long) experiment);
    return count;
}
