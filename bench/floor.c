// floor.c — what SQLite itself costs for the rows one pair needs, without
// pivfarm's store around it: the floor under store/ on this machine, and
// what each of the store's guarantees adds to it. The lean schema keeps
// what a pair must leave behind (two files unique by name, the pair unique
// by stem with its state, one attempt opened and closed, one result) and
// nothing else; FLOOR_* add the event rows, foreign keys, the indexes
// that keep start-up independent of history, the state reads, and the
// statistics' row of each result until a checkpoint (every second) counts it. WAL,
// synchronous FULL, one commit every 2 ms, as the broker. bench_farm
// prints the figures beside the broker's.
//
// A benchmark, so it lives in bench/; it is, with store/, the only code that
// includes sqlite3.h (the Makefile gives SQLite's flags to store/ and bench/
// alone).

#include "bench/floor.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double
s_now (void)
{
    struct timespec t;
    clock_gettime (CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static double
s_cpu (void)
{
    struct rusage r;
    getrusage (RUSAGE_THREAD, &r);
    return (double) (r.ru_utime.tv_sec + r.ru_stime.tv_sec)
           + (double) (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

// The tables; the foreign keys are declared only with FLOOR_FK.
static const char s_schema[] =
    "CREATE TABLE experiments (id INTEGER PRIMARY KEY, name TEXT);"
    "INSERT INTO experiments (id, name) VALUES (1, 'floor');"
    "CREATE TABLE files (id INTEGER PRIMARY KEY, experiment INT %s, name TEXT, size INT,"
    " mtime_ns INT, seen_ns INT, paired INT NOT NULL DEFAULT 0, UNIQUE (experiment, name));"
    "CREATE TABLE pairs (id INTEGER PRIMARY KEY, experiment INT %s, stem TEXT,"
    " file_a INT %s, file_b INT %s, state INT, attempts INT, agent TEXT, created_ns INT,"
    " dispatched_ns INT, finished_ns INT, UNIQUE (experiment, stem));"
    "CREATE TABLE attempts (pair INT %s, attempt INT, agent TEXT, dispatched_ns INT,"
    " outcome TEXT, finished_ns INT, PRIMARY KEY (pair, attempt)) WITHOUT ROWID;"
    "CREATE TABLE results (pair INTEGER PRIMARY KEY %s, attempt INT, agent TEXT, mean_u REAL,"
    " mean_v REAL, nx INT, ny INT, compute_ns INT, path TEXT, field BLOB, recorded_ns INT);"
    "CREATE TABLE events (id INTEGER PRIMARY KEY, ts_ns INT, kind TEXT, experiment INT,"
    " pair INT, payload TEXT);"
    "CREATE TABLE uncounted (pair INTEGER PRIMARY KEY);";

// As store.c keeps start-up independent of history.
static const char s_startup[] =
    "CREATE INDEX files_unpaired ON files (id) WHERE paired = 0;"
    "CREATE INDEX files_paired_once ON files (id) WHERE paired = 1;"
    "CREATE INDEX pairs_pending ON pairs (id) WHERE state = 0;"
    "CREATE INDEX pairs_dispatched ON pairs (id) WHERE state = 1;";

enum {
    S_FILE, S_PAIR, S_DISPATCH, S_ATTEMPT, S_RESULT, S_DONE, S_CLOSE, S_EVENT, S_PAIRED,
    S_STATE, S_UNCOUNTED, S_COUNTED, S_STMTS
};

static const char *const s_sql[S_STMTS] = {
    [S_FILE] = "INSERT INTO files (experiment, name, size, mtime_ns, seen_ns)"
               " VALUES (1, ?1, 4194974, ?2, ?2)",
    [S_PAIR] = "INSERT INTO pairs (experiment, stem, file_a, file_b, state, attempts, created_ns)"
               " VALUES (1, ?1, ?2, ?3, 0, 0, ?4)",
    [S_DISPATCH] = "UPDATE pairs SET state = 1, attempts = attempts + 1, agent = 'agent-1',"
                   " dispatched_ns = ?2 WHERE id = ?1",
    [S_ATTEMPT] = "INSERT INTO attempts (pair, attempt, agent, dispatched_ns)"
                  " VALUES (?1, 1, 'agent-1', ?2)",
    [S_RESULT] = "INSERT INTO results (pair, attempt, agent, mean_u, mean_v, nx, ny, compute_ns,"
                 " path, recorded_ns) VALUES (?1, 1, 'agent-1', 0, 0, 0, 0, 10, 'e/x.txt', ?2)",
    [S_DONE] = "UPDATE pairs SET state = 2, finished_ns = ?2 WHERE id = ?1",
    [S_CLOSE] = "UPDATE attempts SET outcome = 'done', finished_ns = ?2"
                " WHERE pair = ?1 AND attempt = 1",
    [S_EVENT] = "INSERT INTO events (ts_ns, kind, experiment, pair, payload)"
                " VALUES (?1, ?2, 1, ?3, ?4)",
    [S_PAIRED] = "UPDATE files SET paired = paired + 1 WHERE id = ?1",
    [S_STATE] = "SELECT state, experiment, attempts FROM pairs WHERE id = ?1",
    [S_UNCOUNTED] = "INSERT INTO uncounted (pair) VALUES (?1)",
    [S_COUNTED] = "DELETE FROM uncounted WHERE pair = ?1"
                  " AND (SELECT experiment FROM pairs WHERE id = ?1) = 1",
};

// Steps stmt to its end and resets it; 0, or -1.
static int
s_run (sqlite3_stmt *stmt)
{
    int rc;
    while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
        ;
    sqlite3_reset (stmt);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int
s_event (sqlite3_stmt *stmt, const char *kind, sqlite3_int64 ts, sqlite3_int64 pair,
         sqlite3_int64 file, const char *name)
{
    char payload[128];
    int len = snprintf (payload, sizeof payload, "file=%lld size=4194974 mtime_ns=%lld name=%s",
                        (long long) file, (long long) ts, name);
    sqlite3_bind_int64 (stmt, 1, ts);
    sqlite3_bind_text (stmt, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 3, pair);
    sqlite3_bind_text (stmt, 4, payload, len, SQLITE_STATIC);
    return s_run (stmt);
}

// One pair's rows; 0, or -1.
static int
s_pair (sqlite3 *db, sqlite3_stmt **stmts, int flags, int i, sqlite3_int64 ts)
{
    char name[2][32], stem[32];
    snprintf (name[0], sizeof name[0], "p%07d_a.tif", i);
    snprintf (name[1], sizeof name[1], "p%07d_b.tif", i);
    snprintf (stem, sizeof stem, "p%07d", i);
    int events = flags & FLOOR_EVENTS;
    sqlite3_int64 file[2];
    for (int f = 0; f < 2; f++) {
        sqlite3_bind_text (stmts[S_FILE], 1, name[f], -1, SQLITE_STATIC);
        sqlite3_bind_int64 (stmts[S_FILE], 2, ts);
        if (s_run (stmts[S_FILE]))
            return -1;
        file[f] = sqlite3_last_insert_rowid (db);
        if (events && s_event (stmts[S_EVENT], "file", ts, 0, file[f], name[f]))
            return -1;
    }
    sqlite3_bind_text (stmts[S_PAIR], 1, stem, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmts[S_PAIR], 2, file[0]);
    sqlite3_bind_int64 (stmts[S_PAIR], 3, file[1]);
    sqlite3_bind_int64 (stmts[S_PAIR], 4, ts);
    if (s_run (stmts[S_PAIR]))
        return -1;
    sqlite3_int64 pair = sqlite3_last_insert_rowid (db);
    for (int f = 0; (flags & FLOOR_STARTUP) && f < 2; f++) {
        sqlite3_bind_int64 (stmts[S_PAIRED], 1, file[f]);
        if (s_run (stmts[S_PAIRED]))
            return -1;
    }
    if (events && s_event (stmts[S_EVENT], "pair", ts, pair, file[0], stem))
        return -1;
    // Dispatch, then the result: each read first with FLOOR_READS.
    static const int steps[2][3] = {{S_DISPATCH, S_ATTEMPT, -1}, {S_RESULT, S_DONE, S_CLOSE}};
    static const char *const kinds[2] = {"dispatch", "result"};
    for (int k = 0; k < 2; k++) {
        if (flags & FLOOR_READS) {
            sqlite3_bind_int64 (stmts[S_STATE], 1, pair);
            if (s_run (stmts[S_STATE]))
                return -1;
        }
        for (int s = 0; s < 3 && steps[k][s] >= 0; s++) {
            sqlite3_bind_int64 (stmts[steps[k][s]], 1, pair);
            sqlite3_bind_int64 (stmts[steps[k][s]], 2, ts);
            if (s_run (stmts[steps[k][s]]))
                return -1;
        }
        if (events && s_event (stmts[S_EVENT], kinds[k], ts, pair, file[0], stem))
            return -1;
    }
    if (flags & FLOOR_STATS) {
        sqlite3_bind_int64 (stmts[S_UNCOUNTED], 1, pair);
        if (s_run (stmts[S_UNCOUNTED]))
            return -1;
    }
    return 0;
}

// The statistics' checkpoint: the results since the last one marked
// counted, pairs 'from' to 'to'. 0, or -1.
static int
s_counted (sqlite3_stmt *stmt, sqlite3_int64 from, sqlite3_int64 to)
{
    for (sqlite3_int64 pair = from; pair <= to; pair++) {
        sqlite3_bind_int64 (stmt, 1, pair);
        if (s_run (stmt))
            return -1;
    }
    return 0;
}

int
floor_measure (const char *path, int npairs, int flags, double *cpu_us, double *wall_us)
{
    char wal[4096], shm[4096], schema[4096];
    snprintf (wal, sizeof wal, "%s-wal", path);
    snprintf (shm, sizeof shm, "%s-shm", path);
    unlink (path), unlink (wal), unlink (shm);
    const char *fk = flags & FLOOR_FK ? "REFERENCES experiments (id)" : "";
    const char *fk_file = flags & FLOOR_FK ? "REFERENCES files (id)" : "";
    const char *fk_pair = flags & FLOOR_FK ? "REFERENCES pairs (id)" : "";
    snprintf (schema, sizeof schema, s_schema, fk, fk, fk_file, fk_file, fk_pair, fk_pair);
    sqlite3 *db = NULL;
    sqlite3_stmt *stmts[S_STMTS] = {0};
    int rc = -1;
    if (sqlite3_open (path, &db) != SQLITE_OK
        || sqlite3_exec (db,
                         flags & FLOOR_FK
                             ? "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                               " PRAGMA cache_size = -16384; PRAGMA foreign_keys = ON;"
                             : "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                               " PRAGMA cache_size = -16384;",
                         NULL, NULL, NULL)
               != SQLITE_OK
        || sqlite3_exec (db, schema, NULL, NULL, NULL) != SQLITE_OK
        || ((flags & FLOOR_STARTUP)
            && sqlite3_exec (db, s_startup, NULL, NULL, NULL) != SQLITE_OK))
        goto done;
    for (int i = 0; i < S_STMTS; i++)
        if (sqlite3_prepare_v2 (db, s_sql[i], -1, &stmts[i], NULL) != SQLITE_OK)
            goto done;
    double cpu0 = s_cpu (), t0 = s_now (), last = t0, last_stats = t0;
    sqlite3_int64 unmarked = 1;  // the first pair no checkpoint marked yet (ids from 1)
    sqlite3_int64 ts = 1700000000000000000LL;
    if (sqlite3_exec (db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        goto done;
    for (int i = 0; i < npairs; i++) {
        ts += 1000;
        if (s_pair (db, stmts, flags, i, ts))
            goto done;
        if ((flags & FLOOR_STATS) && (s_now () - last_stats >= 1.0 || i == npairs - 1)) {
            if (s_counted (stmts[S_COUNTED], unmarked, i + 1))
                goto done;
            unmarked = i + 2;
            last_stats = s_now ();
        }
        if (s_now () - last >= 0.002) {
            if (sqlite3_exec (db, "COMMIT; BEGIN", NULL, NULL, NULL) != SQLITE_OK)
                goto done;
            last = s_now ();
        }
    }
    if (sqlite3_exec (db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto done;
    *cpu_us = (s_cpu () - cpu0) / npairs * 1e6;
    *wall_us = (s_now () - t0) / npairs * 1e6;
    rc = 0;
done:
    for (int i = 0; i < S_STMTS; i++)
        sqlite3_finalize (stmts[i]);
    sqlite3_close (db);
    unlink (path), unlink (wal), unlink (shm);
    return rc;
}
