// floor.c — what SQLite itself costs for the rows one pair needs, without
// pivfarm's store around it: the floor under store.c on this machine. The
// schema keeps what a pair must leave behind (two files unique by name, the
// pair unique by stem with its state, one attempt opened and closed, one
// result, and with_events the five event rows of its transitions) and
// nothing else: no foreign keys, no partial indexes, no reads. WAL,
// synchronous FULL, one commit every 2 ms, as the broker. bench_farm
// prints it beside the broker's figures (doc/protocol.md has the rest).

#include "store/store.h"

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

enum { S_FILE, S_PAIR, S_DISPATCH, S_ATTEMPT, S_RESULT, S_DONE, S_CLOSE, S_EVENT, S_STMTS };

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
};

static int
s_run (sqlite3_stmt *stmt)
{
    int rc = sqlite3_step (stmt);
    sqlite3_reset (stmt);
    return rc == SQLITE_DONE ? 0 : -1;
}

int
store_floor (const char *path, int npairs, int with_events, double *cpu_us, double *wall_us)
{
    char wal[4096], shm[4096];
    snprintf (wal, sizeof wal, "%s-wal", path);
    snprintf (shm, sizeof shm, "%s-shm", path);
    unlink (path), unlink (wal), unlink (shm);
    sqlite3 *db = NULL;
    sqlite3_stmt *stmts[S_STMTS] = {0};
    int rc = -1;
    if (sqlite3_open (path, &db) != SQLITE_OK
        || sqlite3_exec (db,
                         "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                         "PRAGMA cache_size = -16384;"
                         "CREATE TABLE files (id INTEGER PRIMARY KEY, experiment INT, name TEXT,"
                         " size INT, mtime_ns INT, seen_ns INT, UNIQUE (experiment, name));"
                         "CREATE TABLE pairs (id INTEGER PRIMARY KEY, experiment INT, stem TEXT,"
                         " file_a INT, file_b INT, state INT, attempts INT, agent TEXT,"
                         " created_ns INT, dispatched_ns INT, finished_ns INT,"
                         " UNIQUE (experiment, stem));"
                         "CREATE TABLE attempts (pair INT, attempt INT, agent TEXT,"
                         " dispatched_ns INT, outcome TEXT, finished_ns INT,"
                         " PRIMARY KEY (pair, attempt)) WITHOUT ROWID;"
                         "CREATE TABLE results (pair INTEGER PRIMARY KEY, attempt INT, agent TEXT,"
                         " mean_u REAL, mean_v REAL, nx INT, ny INT, compute_ns INT, path TEXT,"
                         " field BLOB, recorded_ns INT);"
                         "CREATE TABLE events (id INTEGER PRIMARY KEY, ts_ns INT, kind TEXT,"
                         " experiment INT, pair INT, payload TEXT);",
                         NULL, NULL, NULL)
               != SQLITE_OK)
        goto done;
    for (int i = 0; i < S_STMTS; i++)
        if (sqlite3_prepare_v2 (db, s_sql[i], -1, &stmts[i], NULL) != SQLITE_OK)
            goto done;
    static const char *const kinds[] = {"file", "file", "pair", "dispatch", "result"};
    double cpu0 = s_cpu (), t0 = s_now (), last = t0;
    sqlite3_int64 ts = 1700000000000000000LL;
    if (sqlite3_exec (db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        goto done;
    for (int i = 0; i < npairs; i++) {
        char a[32], b[32], stem[32], payload[128];
        snprintf (a, sizeof a, "p%07d_a.tif", i);
        snprintf (b, sizeof b, "p%07d_b.tif", i);
        snprintf (stem, sizeof stem, "p%07d", i);
        ts += 1000;
        sqlite3_int64 file[2];
        for (int f = 0; f < 2; f++) {
            sqlite3_bind_text (stmts[S_FILE], 1, f ? b : a, -1, SQLITE_STATIC);
            sqlite3_bind_int64 (stmts[S_FILE], 2, ts);
            if (s_run (stmts[S_FILE]))
                goto done;
            file[f] = sqlite3_last_insert_rowid (db);
        }
        sqlite3_bind_text (stmts[S_PAIR], 1, stem, -1, SQLITE_STATIC);
        sqlite3_bind_int64 (stmts[S_PAIR], 2, file[0]);
        sqlite3_bind_int64 (stmts[S_PAIR], 3, file[1]);
        sqlite3_bind_int64 (stmts[S_PAIR], 4, ts);
        if (s_run (stmts[S_PAIR]))
            goto done;
        sqlite3_int64 pair = sqlite3_last_insert_rowid (db);
        for (int s = S_DISPATCH; s <= S_CLOSE; s++) {
            sqlite3_bind_int64 (stmts[s], 1, pair);
            sqlite3_bind_int64 (stmts[s], 2, ts);
            if (s_run (stmts[s]))
                goto done;
        }
        for (int e = 0; with_events && e < 5; e++) {
            int len = snprintf (payload, sizeof payload,
                                "file=%lld size=4194974 mtime_ns=%lld name=%s",
                                (long long) file[0], (long long) ts, a);
            sqlite3_bind_int64 (stmts[S_EVENT], 1, ts);
            sqlite3_bind_text (stmts[S_EVENT], 2, kinds[e], -1, SQLITE_STATIC);
            sqlite3_bind_int64 (stmts[S_EVENT], 3, pair);
            sqlite3_bind_text (stmts[S_EVENT], 4, payload, len, SQLITE_STATIC);
            if (s_run (stmts[S_EVENT]))
                goto done;
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
