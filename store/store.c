// store.c — the durable state of pivfarm in one SQLite file: the schema and
// its migrations, the checks that refuse a file that is not ours, grouped
// writes (one transaction per store_commit), and the queries of store.h.

#include "store/store.h"

#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// The schema. s_migrations[v] brings a database from version v to v + 1; a
// released step is never edited, only followed by new ones. Version 0 is an
// empty file. Every database of ours carries S_APPLICATION_ID in its header
// and meta('application') = 'pivfarm', so that a foreign SQLite file is
// refused before anything is written to it.
//
// Notes on the tables:
// - experiments: source is the directory its files are in, NULL for its
//   own name (a replay reads the files of another); settings the PIV
//   settings its tasks carry, '' for the configured ones.
// - pairs.state holds store_state_t; file_b is NULL for a multipage file;
//   agent is the last agent the pair went to, error its last error.
//   attempts counts the attempts since the pair was created or last
//   retried (what max_attempts limits); earlier_attempts those before the
//   last retry, and those the agent deferred (DEFER: not counted). lost
//   (schema 4) counts the times the pair went back to the queue because
//   its agent was lost (silent: presumed dead) or its deadline passed,
//   since it was created or last retried; at max_attempts the pair fails. Attempt numbers go on across a retry (the one in flight is
//   earlier_attempts + attempts), so that a late answer of an attempt from
//   before the retry is never taken for one of the attempts after it.
// - attempts: one row per dispatch; outcome NULL while in flight, then
//   'done', 'duplicate' (a result after the first), 'failed' or 'requeued'.
// - results: one row per pair (first result wins); field is NULL when
//   store_set_fields left it out.
// - settings: per experiment key/value (experiment 0: every experiment).
// - events: the append-only log. Its ids only grow because no event is
//   ever deleted: a plain INTEGER PRIMARY KEY takes max + 1. (Schema 1 had
//   AUTOINCREMENT, whose sqlite_sequence update cost 11% of a pair's
//   store time.) No index by experiment, nor by (experiment, kind): it
//   would cost a fifth of every event's insert, for the queries that list
//   an experiment's events from its start (a replay, rare), which the id
//   order serves by a scan; a tail (after = a recent id) reads only what
//   follows.
// - Listings of one experiment in id order (its files, pairs, results)
//   scan by id with the experiment test written '+experiment': without
//   statistics the planner would take the (experiment, name/stem) index
//   and sort the whole experiment for every batch. The scan reads some
//   8 M pairs/s, which pivctl can afford; an index on pairs (experiment)
//   would cost every pair insert instead.
// - The partial indexes keep dispatch and requeue independent of history:
//   they hold only the pairs in flight or waiting, however many are done.
//   Counts by state use them too (done = all - the others), rather than an
//   index on every pair's state, which cost a tenth of a pair's full cycle
//   to keep up to date.
// - allocations: fast space provisioned for an experiment (a RAM disk or a
//   directory) with its size and expiry; kept after release (state
//   'released') as the record of what was held. files.sha256 and
//   files.location: the checksum of a file and where it lives once
//   archived (NULL: at its source under the watch root).
// - CHECKs are written without IN (...): SQLite builds a temporary table
//   for an IN list at every execution, which tripled the cost of a write to
//   attempts.

#define S_APPLICATION_ID 0x50495646  // "PIVF"

static const char *s_migrations[] = {
    // 0 -> 1: the first schema.
    "CREATE TABLE meta ("
    "    key TEXT PRIMARY KEY,"
    "    value TEXT NOT NULL"
    ") WITHOUT ROWID;"
    "INSERT INTO meta (key, value) VALUES ('application', 'pivfarm');"
    "CREATE TABLE experiments ("
    "    id INTEGER PRIMARY KEY,"
    "    name TEXT NOT NULL UNIQUE,"
    "    created_ns INTEGER NOT NULL"
    ");"
    "CREATE TABLE files ("
    "    id INTEGER PRIMARY KEY,"
    "    experiment INTEGER NOT NULL REFERENCES experiments (id),"
    "    name TEXT NOT NULL,"
    "    size INTEGER NOT NULL,"
    "    mtime_ns INTEGER NOT NULL,"
    "    seen_ns INTEGER NOT NULL,"
    "    paired INTEGER NOT NULL DEFAULT 0,"
    "    UNIQUE (experiment, name)"
    ");"
    "CREATE INDEX files_unpaired ON files (id) WHERE paired = 0;"
    "CREATE INDEX files_paired_once ON files (id) WHERE paired = 1;"
    "CREATE TABLE pairs ("
    "    id INTEGER PRIMARY KEY,"
    "    experiment INTEGER NOT NULL REFERENCES experiments (id),"
    "    stem TEXT NOT NULL,"
    "    file_a INTEGER NOT NULL REFERENCES files (id),"
    "    file_b INTEGER REFERENCES files (id),"
    "    state INTEGER NOT NULL DEFAULT 0 CHECK (state BETWEEN 0 AND 4),"
    "    attempts INTEGER NOT NULL DEFAULT 0,"
    "    agent TEXT,"
    "    error TEXT,"
    "    created_ns INTEGER NOT NULL,"
    "    dispatched_ns INTEGER,"
    "    finished_ns INTEGER,"
    "    UNIQUE (experiment, stem)"
    ");"
    "CREATE INDEX pairs_pending ON pairs (id) WHERE state = 0;"
    "CREATE INDEX pairs_dispatched ON pairs (id) WHERE state = 1;"
    "CREATE INDEX pairs_failed_or_skipped ON pairs (experiment, state) WHERE state >= 3;"
    "CREATE TABLE attempts ("
    "    pair INTEGER NOT NULL REFERENCES pairs (id),"
    "    attempt INTEGER NOT NULL,"
    "    agent TEXT,"
    "    dispatched_ns INTEGER NOT NULL,"
    "    outcome TEXT CHECK (outcome = 'done' OR outcome = 'duplicate' OR outcome = 'failed'"
    "        OR outcome = 'requeued'),"
    "    error TEXT,"
    "    finished_ns INTEGER,"
    "    PRIMARY KEY (pair, attempt)"
    ") WITHOUT ROWID;"
    "CREATE TABLE results ("
    "    pair INTEGER PRIMARY KEY REFERENCES pairs (id),"
    "    attempt INTEGER NOT NULL,"
    "    agent TEXT,"
    "    mean_u REAL,"
    "    mean_v REAL,"
    "    mean_speed REAL,"
    "    valid_fraction REAL,"
    "    vorticity REAL,"
    "    nx INTEGER NOT NULL,"
    "    ny INTEGER NOT NULL,"
    "    compute_ns INTEGER NOT NULL,"
    "    path TEXT,"
    "    field BLOB,"
    "    recorded_ns INTEGER NOT NULL"
    ");"
    "CREATE TABLE agents ("
    "    name TEXT PRIMARY KEY,"
    "    host TEXT,"
    "    cores INTEGER NOT NULL,"
    "    capabilities TEXT,"
    "    first_seen_ns INTEGER NOT NULL,"
    "    last_seen_ns INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE settings ("
    "    experiment INTEGER NOT NULL,"
    "    key TEXT NOT NULL,"
    "    value TEXT NOT NULL,"
    "    changed_ns INTEGER NOT NULL,"
    "    PRIMARY KEY (experiment, key)"
    ") WITHOUT ROWID;"
    "CREATE TABLE events ("
    "    id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "    ts_ns INTEGER NOT NULL,"
    "    kind TEXT NOT NULL,"
    "    experiment INTEGER NOT NULL DEFAULT 0,"
    "    pair INTEGER NOT NULL DEFAULT 0,"
    "    payload TEXT NOT NULL DEFAULT ''"
    ");"
    "PRAGMA application_id = 1346983494;",

    // 1 -> 2: operating a run (doc/control.md): an experiment's source and
    // settings, retries that count attempts afresh, events without
    // AUTOINCREMENT (rebuilt: the keyword cannot be dropped in place).
    "ALTER TABLE experiments ADD COLUMN source TEXT;"
    "ALTER TABLE experiments ADD COLUMN settings TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE pairs ADD COLUMN earlier_attempts INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE events_2 ("
    "    id INTEGER PRIMARY KEY,"
    "    ts_ns INTEGER NOT NULL,"
    "    kind TEXT NOT NULL,"
    "    experiment INTEGER NOT NULL DEFAULT 0,"
    "    pair INTEGER NOT NULL DEFAULT 0,"
    "    payload TEXT NOT NULL DEFAULT ''"
    ");"
    "INSERT INTO events_2 (id, ts_ns, kind, experiment, pair, payload)"
    "    SELECT id, ts_ns, kind, experiment, pair, payload FROM events ORDER BY id;"
    "DROP TABLE events;"
    "ALTER TABLE events_2 RENAME TO events;"
    // (experiment, state) WHERE state >= 3 cannot serve 'state = 3' (a
    // partial index needs its own WHERE term in the query), nor give an
    // experiment's failed pairs in id order: one index per state can.
    "DROP INDEX pairs_failed_or_skipped;"
    "CREATE INDEX pairs_failed ON pairs (experiment) WHERE state = 3;"
    "CREATE INDEX pairs_skipped ON pairs (experiment) WHERE state = 4;",

    // 2 -> 3: the storage lifecycle (doc/storage.md): fast space provisioned
    // per experiment, and where each file went when it was archived, with
    // its checksum.
    "CREATE TABLE allocations ("
    "    id INTEGER PRIMARY KEY,"
    "    experiment INTEGER NOT NULL REFERENCES experiments (id),"
    "    kind TEXT NOT NULL CHECK (kind = 'tmpfs' OR kind = 'dir'),"
    "    path TEXT NOT NULL,"
    "    size_bytes INTEGER NOT NULL,"
    "    created_ns INTEGER NOT NULL,"
    "    expires_ns INTEGER NOT NULL,"
    "    state TEXT NOT NULL CHECK (state = 'active' OR state = 'releasing'"
    "        OR state = 'released'),"
    "    released_ns INTEGER"
    ");"
    "CREATE INDEX allocations_held ON allocations (id) WHERE state != 'released';"
    "ALTER TABLE files ADD COLUMN sha256 TEXT;"
    "ALTER TABLE files ADD COLUMN location TEXT;",

    // 3 -> 4: the task lifecycle (issue 13): the agents a pair lost (a
    // crash, an OOM kill, a deadline passed), so that a pair that kills its
    // agents fails instead of killing them forever.
    "ALTER TABLE pairs ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;",
};

_Static_assert (sizeof s_migrations / sizeof s_migrations[0] == STORE_SCHEMA_VERSION,
                "one migration step per schema version");
_Static_assert (S_APPLICATION_ID == 1346983494, "application id as in the first migration");

// ---------------------------------------------------------------------------
// Statements: all prepared at open, reused for the life of the store. Only
// constants appear in their text; every value is bound.

// Rows per batch of the listing functions (see s_batch_t).
#define S_BATCH_ROWS 256

// The listing of pairs in one state (of every experiment, or of ?4), one
// statement per state: the state is a literal so that the planner can use
// the partial indexes. For one experiment it must be told: it would take
// the (experiment, stem) index and sort the whole experiment every batch.
#define S_PAIRS_WHERE(pairs, where)                                                              \
    "SELECT p.id, p.attempts, e.name, p.stem, fa.name, fb.name FROM " pairs                      \
    " JOIN experiments e ON e.id = p.experiment JOIN files fa ON fa.id = p.file_a"               \
    " LEFT JOIN files fb ON fb.id = p.file_b"                                                    \
    " WHERE " where " AND p.id > ?1 AND p.id <= ?2 ORDER BY p.id LIMIT ?3"
#define S_PAIRS_IN_STATE(state) S_PAIRS_WHERE ("pairs p", "p.state = " #state)
#define S_PAIRS_OF_IN_STATE(state, index)                                                        \
    S_PAIRS_WHERE ("pairs p INDEXED BY " index, "p.state = " #state " AND p.experiment = ?4")

// An experiment as store_experiment_t has it.
#define S_EXPERIMENT_COLUMNS "id, created_ns, name, ifnull (source, name), settings"

typedef enum {
    S_BEGIN,
    S_COMMIT,
    S_ROLLBACK,
    S_EXPERIMENT_GET,
    S_EXPERIMENT_ADD,
    S_EXPERIMENT_CREATE,
    S_EXPERIMENT_FIND,
    S_FILE_GET,
    S_FILE_ADD,
    S_FILE_VERSION,
    S_FILE_UPDATE,
    S_FILE_PAIRS,
    S_PAIR_GET,
    S_PAIR_ADD,
    S_PAIR_STATE,
    S_PAIR_DISPATCH,
    S_PAIR_DONE,
    S_PAIR_RETRY,
    S_PAIR_FAIL,
    S_PAIR_REQUEUE,
    S_PAIR_LOST,
    S_PAIR_LOST_COUNT,
    S_PAIR_DEFER,
    S_PAIR_AGENT,
    S_PAIR_SKIP,
    S_PAIR_RESET_FAILED,
    S_PAIR_RESET_SKIPPED,
    S_ATTEMPT_ADD,
    S_ATTEMPT_END,
    S_RESULT_ADD,
    S_REQUEUE_ALL_EVENTS,
    S_REQUEUE_ALL_ATTEMPTS,
    S_REQUEUE_ALL_PAIRS,
    S_PAIRS_MAX,
    S_PAIRS_PENDING,
    S_PAIRS_DISPATCHED,
    S_PAIRS_DONE,
    S_PAIRS_FAILED,
    S_PAIRS_SKIPPED,
    S_PAIRS_OF_FAILED,
    S_PAIRS_OF_SKIPPED,
    S_PAIRS_OF,
    S_PAIR_CLOSED,
    S_FILES_MAX,
    S_FILES,
    S_FILES_UNPAIRED,
    S_FILES_PAIRED_ONCE,
    S_FILE_PAIRED,
    S_FILES_OF,
    S_RESULTS_OF,
    S_RESULT_LATEST,
    S_EVENT_LAST,
    S_AGENTS,
    S_EXPERIMENTS_MAX,
    S_EXPERIMENTS,
    S_COUNT_FILES,
    S_COUNT_PAIRS,
    S_COUNT_STATES,
    S_AGENT_GET,
    S_AGENT_PUT,
    S_AGENT_SEEN,
    S_SETTING_PUT,
    S_SETTING_DELETE,
    S_SETTINGS,
    S_EVENT_ADD,
    S_EVENTS_MAX,
    S_EVENTS_ALL,
    S_EVENTS_OF,
    S_EVENTS_OF_KIND,
    S_ALLOC_ADD,
    S_ALLOC_STATE,
    S_ALLOCS,
    S_FILE_ARCHIVED,
    S_FILE_LOCATION,
    S_FILES_STORED,
    S_FILE_LAST_SEEN,
    S_NSTMTS
} s_stmt_id_t;

static const char *s_sql[S_NSTMTS] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_EXPERIMENT_GET] = "SELECT id FROM experiments WHERE name = ?1",
    [S_EXPERIMENT_ADD] = "INSERT INTO experiments (name, created_ns) VALUES (?1, ?2)",
    [S_EXPERIMENT_CREATE] = "INSERT INTO experiments (name, source, settings, created_ns)"
                            " VALUES (?1, ?2, ?3, ?4)",
    [S_EXPERIMENT_FIND] = "SELECT " S_EXPERIMENT_COLUMNS " FROM experiments WHERE name = ?1",
    [S_FILE_GET] = "SELECT id FROM files WHERE experiment = ?1 AND name = ?2",
    [S_FILE_ADD] = "INSERT INTO files (experiment, name, size, mtime_ns, seen_ns)"
                   " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (experiment, name) DO NOTHING",
    [S_FILE_VERSION] = "SELECT size, mtime_ns, paired FROM files WHERE id = ?1",
    [S_FILE_UPDATE] = "UPDATE files SET size = ?2, mtime_ns = ?3, seen_ns = ?4 WHERE id = ?1",
    // A file's pairs (at most two): found through the (experiment, stem)
    // index, so a changed file costs a scan of its experiment's pairs; no
    // index by file on the hot insert path for an event this rare.
    [S_FILE_PAIRS] = "SELECT p.id, p.state, e.name, p.stem, fa.name, fb.name FROM pairs p"
                     " JOIN experiments e ON e.id = p.experiment JOIN files fa ON fa.id = p.file_a"
                     " LEFT JOIN files fb ON fb.id = p.file_b"
                     " WHERE p.experiment = ?1 AND (p.file_a = ?2 OR p.file_b = ?2) ORDER BY p.id",
    [S_PAIR_GET] = "SELECT id FROM pairs WHERE experiment = ?1 AND stem = ?2",
    [S_PAIR_ADD] = "INSERT INTO pairs (experiment, stem, file_a, file_b, created_ns)"
                   " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (experiment, stem) DO NOTHING",
    [S_PAIR_STATE] = "SELECT state, experiment, attempts, earlier_attempts FROM pairs"
                     " WHERE id = ?1",
    [S_PAIR_DISPATCH] = "UPDATE pairs SET state = 1, attempts = attempts + 1, agent = ?2,"
                        " dispatched_ns = ?3 WHERE id = ?1 AND state = 0",
    [S_PAIR_DONE] = "UPDATE pairs SET state = 2, agent = ?2, finished_ns = ?3 WHERE id = ?1",
    [S_PAIR_RETRY] = "UPDATE pairs SET state = 0, error = ?2 WHERE id = ?1",
    [S_PAIR_FAIL] = "UPDATE pairs SET state = 3, error = ?2, finished_ns = ?3 WHERE id = ?1",
    [S_PAIR_REQUEUE] = "UPDATE pairs SET state = 0 WHERE id = ?1 AND state = 1",
    [S_PAIR_LOST] = "UPDATE pairs SET state = 0, lost = lost + 1 WHERE id = ?1 AND state = 1",
    [S_PAIR_LOST_COUNT] = "SELECT lost FROM pairs WHERE id = ?1",
    // The deferred attempt moves to earlier_attempts: not counted, and its
    // number is never given again.
    [S_PAIR_DEFER] = "UPDATE pairs SET state = 0, attempts = attempts - 1,"
                     " earlier_attempts = earlier_attempts + 1 WHERE id = ?1 AND state = 1",
    [S_PAIR_AGENT] = "SELECT agent FROM pairs WHERE id = ?1",
    [S_PAIR_SKIP] = "UPDATE pairs SET state = 4 WHERE id = ?1 AND state = 0",
    [S_PAIR_RESET_FAILED] = "UPDATE pairs SET state = 0, earlier_attempts = earlier_attempts"
                            " + attempts, attempts = 0, lost = 0, error = NULL,"
                            " finished_ns = NULL WHERE id = ?1 AND state = 3",
    [S_PAIR_RESET_SKIPPED] = "UPDATE pairs SET state = 0 WHERE id = ?1 AND state = 4",
    [S_ATTEMPT_ADD] = "INSERT INTO attempts (pair, attempt, agent, dispatched_ns)"
                      " VALUES (?1, ?2, ?3, ?4)",
    // A late answer of a requeued attempt still says what became of it.
    [S_ATTEMPT_END] = "UPDATE attempts SET outcome = ?3, error = ?4, finished_ns = ?5"
                      " WHERE pair = ?1 AND attempt = ?2"
                      " AND (outcome IS NULL OR outcome = 'requeued')",
    [S_RESULT_ADD] = "INSERT INTO results (pair, attempt, agent, mean_u, mean_v, mean_speed,"
                     " valid_fraction, vorticity, nx, ny, compute_ns, path, field, recorded_ns)"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [S_REQUEUE_ALL_EVENTS] =
        "INSERT INTO events (ts_ns, kind, experiment, pair, payload)"
        " SELECT ?1, 'requeue', experiment, id, 'attempt=' || (earlier_attempts + attempts)"
        " || ' agent=' || ifnull (agent, '') || ' reason=restart' FROM pairs WHERE state = 1"
        " ORDER BY id",
    [S_REQUEUE_ALL_ATTEMPTS] = "UPDATE attempts SET outcome = 'requeued', finished_ns = ?1"
                               " WHERE outcome IS NULL AND (pair, attempt) IN"
                               " (SELECT id, earlier_attempts + attempts FROM pairs"
                               " WHERE state = 1)",
    [S_REQUEUE_ALL_PAIRS] = "UPDATE pairs SET state = 0 WHERE state = 1",
    [S_PAIRS_MAX] = "SELECT ifnull (max (id), 0) FROM pairs",
    [S_PAIRS_PENDING] = S_PAIRS_IN_STATE (0),
    [S_PAIRS_DISPATCHED] = S_PAIRS_IN_STATE (1),
    [S_PAIRS_DONE] = S_PAIRS_IN_STATE (2),
    [S_PAIRS_FAILED] = S_PAIRS_IN_STATE (3),
    [S_PAIRS_SKIPPED] = S_PAIRS_IN_STATE (4),
    [S_PAIRS_OF_FAILED] = S_PAIRS_OF_IN_STATE (3, "pairs_failed"),
    [S_PAIRS_OF_SKIPPED] = S_PAIRS_OF_IN_STATE (4, "pairs_skipped"),
    // closed_ns: the last frame's mtime (file_b, or file_a for a multipage
    // file); the same in S_RESULTS_OF.
    [S_PAIRS_OF] = "SELECT p.id, p.state, p.attempts, p.created_ns, ifnull (p.dispatched_ns, 0),"
                   " ifnull (p.finished_ns, 0), ifnull (f.mtime_ns, 0), p.stem,"
                   " ifnull (p.agent, ''), ifnull (p.error, '') FROM pairs p"
                   " LEFT JOIN files f ON f.id = ifnull (p.file_b, p.file_a)"
                   " WHERE +p.experiment = ?4 AND (?5 < 0 OR p.state = ?5)"
                   " AND p.id > ?1 AND p.id <= ?2 ORDER BY p.id LIMIT ?3",
    [S_PAIR_CLOSED] = "SELECT ifnull (f.mtime_ns, 0) FROM pairs p"
                      " LEFT JOIN files f ON f.id = ifnull (p.file_b, p.file_a) WHERE p.id = ?1",
    [S_FILES_MAX] = "SELECT ifnull (max (id), 0) FROM files",
    [S_FILES] = "SELECT f.id, e.name, f.name FROM files f JOIN experiments e"
                " ON e.id = f.experiment WHERE f.id > ?1 AND f.id <= ?2 ORDER BY f.id LIMIT ?3",
    [S_FILES_UNPAIRED] = "SELECT f.id, e.name, f.name FROM files f INDEXED BY files_unpaired"
                         " JOIN experiments e ON e.id = f.experiment WHERE f.paired = 0"
                         " AND f.id > ?1 AND f.id <= ?2 ORDER BY f.id LIMIT ?3",
    [S_FILES_PAIRED_ONCE] = "SELECT f.id, e.name, f.name FROM files f INDEXED BY files_paired_once"
                            " JOIN experiments e ON e.id = f.experiment WHERE f.paired = 1"
                            " AND f.id > ?1 AND f.id <= ?2 ORDER BY f.id LIMIT ?3",
    [S_FILE_PAIRED] = "UPDATE files SET paired = paired + 1 WHERE id = ?1",
    [S_FILES_OF] = "SELECT id, size, mtime_ns, seen_ns, name FROM files"
                   " WHERE +experiment = ?4 AND id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3",
    // dispatched_ns: when the attempt that gave the result was sent.
#define S_RESULT_COLUMNS                                                                          \
    "SELECT r.pair, r.attempt, r.nx, r.ny, r.compute_ns, ifnull (f.mtime_ns, 0),"                 \
    " ifnull (a.dispatched_ns, ifnull (p.dispatched_ns, 0)), r.recorded_ns,"                      \
    " r.mean_u, r.mean_v, r.mean_speed, r.valid_fraction, r.vorticity, p.stem,"                   \
    " ifnull (r.agent, ''), ifnull (r.path, ''), r.field FROM pairs p"                            \
    " JOIN results r ON r.pair = p.id"                                                            \
    " LEFT JOIN attempts a ON a.pair = r.pair AND a.attempt = r.attempt"                          \
    " LEFT JOIN files f ON f.id = ifnull (p.file_b, p.file_a)"
    [S_RESULTS_OF] = S_RESULT_COLUMNS " WHERE +p.experiment = ?1 ORDER BY p.id",
    // Newest first: the cost follows the results since the latest with a field.
    [S_RESULT_LATEST] = S_RESULT_COLUMNS " WHERE +p.experiment = ?1 AND r.field IS NOT NULL"
                                         " ORDER BY r.pair DESC LIMIT 1",
    [S_EVENT_LAST] = "SELECT ifnull (max (id), 0) FROM events",
    [S_AGENTS] = "SELECT name, ifnull (host, ''), cores, ifnull (capabilities, ''),"
                 " first_seen_ns, last_seen_ns FROM agents ORDER BY name",
    [S_EXPERIMENTS_MAX] = "SELECT ifnull (max (id), 0) FROM experiments",
    [S_EXPERIMENTS] = "SELECT " S_EXPERIMENT_COLUMNS " FROM experiments"
                      " WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3",
    [S_COUNT_FILES] = "SELECT count(*) FROM files WHERE experiment = ?1",
    [S_COUNT_PAIRS] = "SELECT count(*) FROM pairs WHERE experiment = ?1",
    // The pairs in flight or waiting are few, an experiment's pairs many:
    // the planner, without statistics, would guess the other way.
    [S_COUNT_STATES] = "SELECT 0, count(*) FROM pairs INDEXED BY pairs_pending"
                       " WHERE state = 0 AND experiment = ?1"
                       " UNION ALL SELECT 1, count(*) FROM pairs INDEXED BY pairs_dispatched"
                       " WHERE state = 1 AND experiment = ?1"
                       " UNION ALL SELECT 3, count(*) FROM pairs INDEXED BY pairs_failed"
                       " WHERE state = 3 AND experiment = ?1"
                       " UNION ALL SELECT 4, count(*) FROM pairs INDEXED BY pairs_skipped"
                       " WHERE state = 4 AND experiment = ?1",
    [S_AGENT_GET] = "SELECT host IS ?2 AND cores = ?3 AND capabilities IS ?4 FROM agents"
                    " WHERE name = ?1",
    [S_AGENT_PUT] = "INSERT INTO agents (name, host, cores, capabilities, first_seen_ns,"
                    " last_seen_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT (name) DO UPDATE"
                    " SET host = ?2, cores = ?3, capabilities = ?4, last_seen_ns = ?5",
    [S_AGENT_SEEN] = "UPDATE agents SET last_seen_ns = ?2 WHERE name = ?1",
    [S_SETTING_PUT] = "INSERT INTO settings (experiment, key, value, changed_ns)"
                      " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (experiment, key) DO UPDATE"
                      " SET value = ?3, changed_ns = ?4",
    [S_SETTING_DELETE] = "DELETE FROM settings WHERE experiment = ?1 AND key = ?2",
    // Settings have no id: batches go on from the last (experiment, key).
    [S_SETTINGS] = "SELECT experiment, key, value FROM settings"
                   " WHERE (experiment, key) > (?1, ?2) ORDER BY experiment, key LIMIT ?3",
    [S_EVENT_ADD] = "INSERT INTO events (ts_ns, kind, experiment, pair, payload)"
                    " VALUES (?1, ?2, ?3, ?4, ?5)",
    [S_EVENTS_MAX] = "SELECT ifnull (max (id), 0) FROM events",
    [S_EVENTS_ALL] = "SELECT id, ts_ns, experiment, pair, kind, payload FROM events"
                     " WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3",
    [S_EVENTS_OF] = "SELECT id, ts_ns, experiment, pair, kind, payload FROM events"
                    " WHERE experiment = ?4 AND id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3",
    [S_EVENTS_OF_KIND] = "SELECT id, ts_ns, experiment, pair, kind, payload FROM events"
                         " WHERE (?4 = 0 OR experiment = ?4) AND kind = ?5"
                         " AND id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3",
    [S_ALLOC_ADD] = "INSERT INTO allocations (experiment, kind, path, size_bytes, created_ns,"
                    " expires_ns, state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'active')",
    [S_ALLOC_STATE] = "UPDATE allocations SET state = ?2, released_ns = CASE WHEN ?2 = 'released'"
                      " THEN ?3 END WHERE id = ?1",
    [S_ALLOCS] = "SELECT a.id, a.experiment, a.size_bytes, a.created_ns, a.expires_ns, e.name,"
                 " a.kind, a.path, a.state FROM allocations a INDEXED BY allocations_held"
                 " JOIN experiments e ON e.id = a.experiment WHERE a.state != 'released'"
                 " ORDER BY a.id",
    [S_FILE_ARCHIVED] = "UPDATE files SET sha256 = ?2, location = ?3 WHERE id = ?1",
    [S_FILE_LOCATION] = "SELECT location FROM files WHERE experiment = ?1 AND name = ?2",
    [S_FILES_STORED] = "SELECT id, size, name, sha256, location FROM files"
                       " WHERE +experiment = ?4 AND id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3",
    [S_FILE_LAST_SEEN] = "SELECT ifnull (max (seen_ns), 0) FROM files WHERE experiment = ?1",
};

// ---------------------------------------------------------------------------
// The store.

#define S_ERROR_MAX 1024    // bytes of an error line
#define S_PAYLOAD_MAX 8192  // bytes of an event payload made here (longer is cut)

struct _store_t {
    char *path;                        // the database file, as given
    int lock_fd;                       // <path>.lock, flock'd by store_new; -1 for readers
    sqlite3 *db;                       // the connection
    sqlite3_stmt *stmts[S_NSTMTS];     // prepared statements, by s_stmt_id_t
    int readonly;                      // opened by store_open_readonly
    int in_tx;                         // the group's transaction is open
    int uncommitted;                   // writes since the last commit
    int call_dirty;                    // the current write call changed something
    int lost;                          // writes rolled back by an error, not yet reported
    char lost_cause[S_ERROR_MAX];      // why they were rolled back
    int fields_every;                  // keep every n-th field BLOB (0: none)
    int64_t results_seen;              // results recorded through this handle
    int fault_code;                    // store_test_fault: the code to inject (0: none)
    int fault_after;                   // executions left before it is injected
    int injected;                      // the last execution failed by injection
    char cause[S_ERROR_MAX];           // SQLite's message for the last failed execution
    char error[S_ERROR_MAX];           // the last error, one line
    char payload[S_PAYLOAD_MAX];       // event payload being built
    char *found;                       // strings of store_experiment_find's answer
    size_t found_size;                 // bytes allocated at found
    int streaming;                     // store_results_of is calling back: no writes
};

static void
s_errbuf (char *err, size_t errlen, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void
s_errbuf (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

// Sets the last error of the store.
static void
s_error (store_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_error (store_t *self, const char *fmt, ...)
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
static int
s_step (store_t *self, sqlite3_stmt *stmt)
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
static void
s_bind_text (sqlite3_stmt *stmt, int index, const char *text)
{
    if (text)
        sqlite3_bind_text (stmt, index, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null (stmt, index);
}

static const char *
s_column_text (sqlite3_stmt *stmt, int column)
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
static void
s_rollback (store_t *self)
{
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
    s_rollback (self);
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
static int
s_vfail (store_t *self, int rc, int write, const char *fmt, va_list args)
{
    char what[S_ERROR_MAX / 2];
    vsnprintf (what, sizeof what, fmt, args);
    int ended = sqlite3_get_autocommit (self->db);
    if (self->in_tx
        && (ended || (write && (self->call_dirty || !s_statement_error (rc))))) {
        int lost = self->uncommitted;
        s_lose_group (self);
        if (lost > 0)
            s_error (self, "%s in '%s': %s (the %d writes since the last commit were rolled back)",
                     what, self->path, self->cause, lost);
        else
            s_error (self, "%s in '%s': %s", what, self->path, self->cause);
    }
    else
        s_error (self, "%s in '%s': %s", what, self->path, self->cause);
    return -1;
}

static int
s_fail (store_t *self, int rc, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static int
s_fail (store_t *self, int rc, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    s_vfail (self, rc, 1, fmt, args);
    va_end (args);
    return -1;
}

static int
s_fail_read (store_t *self, int rc, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static int
s_fail_read (store_t *self, int rc, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    s_vfail (self, rc, 0, fmt, args);
    va_end (args);
    return -1;
}

// Opens the group's transaction on the first write after a commit. A write
// after a failure that rolled the group back is refused until store_commit
// has reported that failure: the caller must not believe later writes
// joined earlier ones that are gone.
static int
s_write_begin (store_t *self)
{
    self->call_dirty = 0;
    if (self->readonly) {
        s_error (self, "cannot write to '%s': it is open read-only", self->path);
        return -1;
    }
    if (self->streaming) {
        s_error (self, "cannot write to '%s' while store_results_of is listing", self->path);
        return -1;
    }
    if (self->lost) {
        s_error (self,
                 "cannot write to '%s': %d uncommitted writes were rolled back (%s) and "
                 "store_commit has not yet reported it",
                 self->path, self->lost, self->lost_cause);
        return -1;
    }
    if (self->in_tx && sqlite3_get_autocommit (self->db)) {
        // SQLite ended the group behind a failure that did not come
        // through s_fail: its writes are gone all the same.
        snprintf (self->cause, sizeof self->cause, "the transaction ended unexpectedly");
        s_lose_group (self);
        if (self->lost)
            return s_write_begin (self);
    }
    if (!self->in_tx) {
        sqlite3_stmt *stmt = self->stmts[S_BEGIN];
        int rc = s_step (self, stmt);
        sqlite3_reset (stmt);
        if (rc != SQLITE_DONE) {
            s_error (self, "cannot begin a transaction in '%s': %s", self->path, self->cause);
            return -1;
        }
        self->in_tx = 1;
    }
    return 0;
}

// Runs a write statement whose parameters are bound, to its end; returns
// SQLITE_DONE or the error. Marks the call as having changed something if
// the statement did.
static int
s_exec (store_t *self, sqlite3_stmt *stmt)
{
    int rc = s_step (self, stmt);
    while (rc == SQLITE_ROW)
        rc = s_step (self, stmt);
    sqlite3_reset (stmt);
    if (rc == SQLITE_DONE && sqlite3_changes (self->db) > 0)
        self->call_dirty = 1;
    return rc;
}

// The write call succeeded.
static int
s_write_end (store_t *self)
{
    if (self->call_dirty)
        self->uncommitted++;
    return 0;
}

// The write call found nothing to change. If it opened the group, the
// group is closed again at once (nothing to write, nothing to sync), so
// that no write lock is held for a caller that sees nothing uncommitted.
static void
s_write_nothing (store_t *self)
{
    if (self->in_tx && self->uncommitted == 0 && !self->call_dirty) {
        sqlite3_stmt *stmt = self->stmts[S_COMMIT];
        int rc = sqlite3_step (stmt);
        sqlite3_reset (stmt);
        if (rc != SQLITE_DONE)
            s_rollback (self);
        self->in_tx = 0;
    }
}

// The write call moved 'count' rows, each a write of its own. Returns it.
static int
s_write_end_many (store_t *self, int count)
{
    if (count > 0)
        self->uncommitted += count;
    else
        s_write_nothing (self);
    return count;
}

// Runs a query expected to give one integer; 0 when it gives no row.
static int
s_query_int (store_t *self, sqlite3_stmt *stmt, int64_t *value, int *found)
{
    int rc = s_step (self, stmt);
    if (found)
        *found = rc == SQLITE_ROW;
    *value = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 0) : 0;
    sqlite3_reset (stmt);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

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
    *rc = s_exec (self, stmt);
    return *rc == SQLITE_DONE ? sqlite3_last_insert_rowid (self->db) : -1;
}

// The same with the payload formatted.
static int64_t
s_event (store_t *self, int *rc, const char *kind, int64_t experiment, int64_t pair,
         int64_t now_ns, const char *fmt, ...) __attribute__ ((format (printf, 7, 8)));

static int64_t
s_event (store_t *self, int *rc, const char *kind, int64_t experiment, int64_t pair,
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
// Opening: a file is ours if it is empty (a new database) or an SQLite file
// with our application id, a meta table naming pivfarm and a schema version
// we know. Everything is checked before the first write to the file.

// Refuses what is not a regular SQLite file by its first bytes, so that
// SQLite never opens it. *empty is set for a zero-length file.
static int
s_check_header (const char *path, int *empty, char *err, size_t errlen)
{
    struct stat st;
    if (stat (path, &st) != 0) {
        s_errbuf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return -1;
    }
    if (!S_ISREG (st.st_mode)) {
        s_errbuf (err, errlen, "cannot open '%s': not a regular file", path);
        return -1;
    }
    *empty = st.st_size == 0;
    if (*empty)
        return 0;
    char header[100];
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        s_errbuf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return -1;
    }
    ssize_t got = read (fd, header, sizeof header);
    close (fd);
    if (got != (ssize_t) sizeof header || memcmp (header, "SQLite format 3", 16) != 0) {
        s_errbuf (err, errlen, "'%s' is not a pivfarm database (not an SQLite file)", path);
        return -1;
    }
    return 0;
}

// Runs an open-time query (a constant) and gives its first column as an
// integer or text. SQLITE_ROW, SQLITE_DONE or the error.
static int
s_peek (sqlite3 *db, const char *sql, const char *param, int64_t *value, char *text,
        size_t textlen)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL);
    if (rc != SQLITE_OK)
        return rc;
    if (param)
        sqlite3_bind_text (stmt, 1, param, -1, SQLITE_STATIC);
    rc = sqlite3_step (stmt);
    if (rc == SQLITE_ROW) {
        if (value)
            *value = sqlite3_column_int64 (stmt, 0);
        if (text) {
            const char *t = s_column_text (stmt, 0);
            snprintf (text, textlen, "%s", t ? t : "");
        }
    }
    sqlite3_finalize (stmt);
    return rc;
}

// How to name a failure to read a file being opened: damage, or not.
static const char *
s_unreadable (int rc)
{
    int primary = rc & 0xff;
    return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR
               ? "corrupt or truncated database"
               : "cannot read";
}

// Whether the file is sound, page by page. integrity_check also compares
// every index with its table; a small file gets it at every open. A large
// file gets quick_check (linear in its size: 0.7 s at 300 k pairs) only
// when the last writer did not close it: SQLite deletes the WAL file when
// the last connection closes cleanly, so a WAL left behind means a crash.
static int
s_check_integrity (store_t *self, char *err, size_t errlen)
{
    struct stat st;
    int thorough = stat (self->path, &st) == 0 && st.st_size < (64 << 20);
    if (!thorough) {
        char wal[PATH_MAX + 8];
        snprintf (wal, sizeof wal, "%s-wal", self->path);
        if (stat (wal, &st) != 0 || st.st_size == 0)
            return 0;
    }
    char verdict[256] = "";
    int rc = s_peek (self->db, thorough ? "PRAGMA integrity_check (1)" : "PRAGMA quick_check (1)",
                     NULL, NULL, verdict, sizeof verdict);
    if (rc != SQLITE_ROW) {
        s_errbuf (err, errlen, "%s '%s': %s", s_unreadable (rc), self->path,
                  sqlite3_errmsg (self->db));
        return -1;
    }
    if (strcmp (verdict, "ok") != 0) {
        for (char *nl = strchr (verdict, '\n'); nl; nl = strchr (nl, '\n'))
            *nl = ' ';  // the operator gets one line
        s_errbuf (err, errlen, "corrupt or truncated database '%s': %s", self->path, verdict);
        return -1;
    }
    return 0;
}

// Reads which database this is: *version 0 for an empty one. Refuses a
// foreign database or one from a newer pivfarm.
static int
s_check_identity (store_t *self, int *version, char *err, size_t errlen)
{
    int64_t app = 0, tables = 0;
    int rc = s_peek (self->db, "PRAGMA application_id", NULL, &app, NULL, 0);
    if (rc == SQLITE_ROW)
        rc = s_peek (self->db, "SELECT count(*) FROM sqlite_master", NULL, &tables, NULL, 0);
    if (rc != SQLITE_ROW) {
        s_errbuf (err, errlen, "%s '%s': %s", s_unreadable (rc), self->path,
                  sqlite3_errmsg (self->db));
        return -1;
    }
    *version = 0;
    if (tables == 0 && (app == 0 || app == S_APPLICATION_ID))
        return 0;
    if (app != S_APPLICATION_ID) {
        s_errbuf (err, errlen, "'%s' is not a pivfarm database (application id 0x%08" PRIx32 ")",
                  self->path, (uint32_t) app);
        return -1;
    }
    char application[64] = "", text[64] = "";
    rc = s_peek (self->db, "SELECT value FROM meta WHERE key = ?1", "application", NULL,
                 application, sizeof application);
    if (rc == SQLITE_ROW)
        rc = s_peek (self->db, "SELECT value FROM meta WHERE key = ?1", "schema_version", NULL,
                     text, sizeof text);
    if (rc != SQLITE_ROW || strcmp (application, "pivfarm") != 0) {
        s_errbuf (err, errlen, "'%s' is not a pivfarm database (%s)", self->path,
                  rc == SQLITE_ROW ? "its meta table names another application"
                                   : "no meta table with its schema version");
        return -1;
    }
    char *end;
    long v = strtol (text, &end, 10);
    if (end == text || *end || v < 1 || v > 1000000) {
        s_errbuf (err, errlen, "'%s' is not a pivfarm database (schema version '%s')",
                  self->path, text);
        return -1;
    }
    if (v > STORE_SCHEMA_VERSION) {
        s_errbuf (err, errlen,
                  "'%s' has schema version %ld, newer than this pivfarm's %d: use the pivfarm "
                  "that wrote it, or a newer one",
                  self->path, v, STORE_SCHEMA_VERSION);
        return -1;
    }
    *version = (int) v;
    return 0;
}

// Brings the schema to STORE_SCHEMA_VERSION in one transaction, reading
// the version again inside it in case another process got there first.
static int
s_migrate (store_t *self, char *err, size_t errlen)
{
    int version;
    if (s_check_identity (self, &version, err, errlen))
        return -1;
    if (version == STORE_SCHEMA_VERSION)
        return 0;
    char *msg = NULL;
    int rc = sqlite3_exec (self->db, "BEGIN IMMEDIATE", NULL, NULL, &msg);
    if (rc == SQLITE_OK && s_check_identity (self, &version, err, errlen)) {
        sqlite3_exec (self->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    while (rc == SQLITE_OK && version < STORE_SCHEMA_VERSION)
        rc = sqlite3_exec (self->db, s_migrations[version++], NULL, NULL, &msg);
    if (rc == SQLITE_OK) {
        char text[16];
        snprintf (text, sizeof text, "%d", STORE_SCHEMA_VERSION);
        sqlite3_stmt *stmt = NULL;
        rc = sqlite3_prepare_v2 (self->db,
                                 "INSERT OR REPLACE INTO meta (key, value)"
                                 " VALUES ('schema_version', ?1)",
                                 -1, &stmt, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text (stmt, 1, text, -1, SQLITE_STATIC);
            rc = sqlite3_step (stmt) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode (self->db);
            sqlite3_finalize (stmt);
        }
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec (self->db, "COMMIT", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        s_errbuf (err, errlen, "cannot bring the schema of '%s' to version %d: %s", self->path,
                  STORE_SCHEMA_VERSION, msg ? msg : sqlite3_errmsg (self->db));
        sqlite3_free (msg);
        if (!sqlite3_get_autocommit (self->db))
            sqlite3_exec (self->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

static int
s_prepare_all (store_t *self, char *err, size_t errlen)
{
    for (int i = 0; i < S_NSTMTS; i++) {
        int rc = sqlite3_prepare_v3 (self->db, s_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                     &self->stmts[i], NULL);
        if (rc != SQLITE_OK) {
            s_errbuf (err, errlen, "cannot prepare the statements of '%s': %s", self->path,
                      sqlite3_errmsg (self->db));
            return -1;
        }
    }
    return 0;
}

static int
s_pragma (store_t *self, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec (self->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        s_errbuf (err, errlen, "cannot set up '%s' (%s): %s", self->path, sql,
                  msg ? msg : sqlite3_errmsg (self->db));
        sqlite3_free (msg);
        return -1;
    }
    return 0;
}

// Before SQLite's first use: no memory statistics (nothing here reads them,
// and keeping them takes a global lock on every allocation). If SQLite was
// set up already, this changes nothing.
static void
s_configure_sqlite (void)
{
    sqlite3_config (SQLITE_CONFIG_MEMSTATUS, 0);
}

static store_t *
s_new (const char *path, int flags, char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once (&once, s_configure_sqlite);
    store_t *self = calloc (1, sizeof *self);
    if (!self || !(self->path = strdup (path))) {
        s_errbuf (err, errlen, "cannot open '%s': out of memory", path);
        free (self);
        return NULL;
    }
    self->lock_fd = -1;
    self->fields_every = 1;
    self->readonly = (flags & SQLITE_OPEN_READONLY) != 0;
    int rc = sqlite3_open_v2 (path, &self->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        s_errbuf (err, errlen, "cannot open '%s': %s", path,
                  self->db ? sqlite3_errmsg (self->db) : sqlite3_errstr (rc));
        store_destroy (&self);
        return NULL;
    }
    // A WAL the file came with (a crash) must not be checkpointed into it
    // by our close before the file has passed every check. An empty WAL
    // may be: then closing writes nothing and tidies the -wal and -shm.
    char wal[4096];
    struct stat st;
    snprintf (wal, sizeof wal, "%s-wal", path);
    if (stat (wal, &st) == 0 && st.st_size > 0)
        sqlite3_db_config (self->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_busy_timeout (self->db, 5000);
    return self;
}

// The writer's lock: an exclusive flock on '<path>.lock' (created beside
// the database, holding the pid of its holder), taken before the database
// is opened, so that a second writer touches nothing. Readers never look
// at it: they are never blocked. Returns the descriptor (closing it, or
// the holder's death, releases the lock), or -1 with err.
static int
s_lock (const char *path, char *err, size_t errlen)
{
    char lock[PATH_MAX + 8];
    snprintf (lock, sizeof lock, "%s.lock", path);
    int fd = open (lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        s_errbuf (err, errlen, "cannot open '%s': cannot make its lock '%s': %s", path, lock,
                  strerror (errno));
        return -1;
    }
    if (flock (fd, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        char pid[32] = "";
        ssize_t n = busy ? pread (fd, pid, sizeof pid - 1, 0) : -1;
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn (pid, "\n")] = '\0';
        if (busy)
            s_errbuf (err, errlen,
                      "cannot open '%s': another broker%s%s%s is using it (it holds '%s'); "
                      "stop it first, or give this one another store",
                      path, *pid ? " (pid " : "", pid, *pid ? ")" : "", lock);
        else
            s_errbuf (err, errlen, "cannot open '%s': cannot lock '%s': %s", path, lock,
                      strerror (errno));
        close (fd);
        return -1;
    }
    char pid[32];
    int len = snprintf (pid, sizeof pid, "%ld\n", (long) getpid ());
    if (ftruncate (fd, 0) != 0 || pwrite (fd, pid, (size_t) len, 0) != len) {
        // The lock holds without the pid; only the message of a second
        // broker is poorer.
    }
    return fd;
}

store_t *
store_new (const char *path, store_durability_t durability, char *err, size_t errlen)
{
    struct stat st;
    int exists = stat (path, &st) == 0, empty = 1, version;
    if (!exists && errno != ENOENT) {
        s_errbuf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return NULL;
    }
    // Before anything reads or writes the database (even its header).
    int lock_fd = strcmp (path, ":memory:") == 0 ? -2 : s_lock (path, err, errlen);
    if (lock_fd == -1)
        return NULL;
    if (exists && s_check_header (path, &empty, err, errlen)) {
        if (lock_fd >= 0)
            close (lock_fd);
        return NULL;
    }
    store_t *self = s_new (path, SQLITE_OPEN_READWRITE | (exists ? 0 : SQLITE_OPEN_CREATE), err,
                           errlen);
    if (!self) {
        if (lock_fd >= 0)
            close (lock_fd);
        return NULL;
    }
    self->lock_fd = lock_fd >= 0 ? lock_fd : -1;
    if (!empty && s_check_integrity (self, err, errlen))
        goto fail;
    if (s_check_identity (self, &version, err, errlen))
        goto fail;
    // WAL: readers never block the writer. synchronous NORMAL in WAL mode
    // keeps the database consistent on a power cut but may lose the last
    // commits; FULL syncs the WAL on every commit.
    if (s_pragma (self, "PRAGMA journal_mode = WAL", err, errlen)
        || s_pragma (self,
                     durability == STORE_DURABILITY_FULL ? "PRAGMA synchronous = FULL"
                                                         : "PRAGMA synchronous = NORMAL",
                     err, errlen)
        || s_pragma (self, "PRAGMA foreign_keys = ON", err, errlen)
        || s_pragma (self, "PRAGMA cache_size = -16384", err, errlen))
        goto fail;
    char mode[16] = "";
    s_peek (self->db, "PRAGMA journal_mode", NULL, NULL, mode, sizeof mode);
    if (strcmp (mode, "wal") != 0) {
        s_errbuf (err, errlen,
                  "cannot use '%s': its file system does not support SQLite's WAL mode "
                  "(journal mode '%s')",
                  path, mode);
        goto fail;
    }
    if (s_migrate (self, err, errlen) || s_prepare_all (self, err, errlen))
        goto fail;
    sqlite3_db_config (self->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
    return self;
fail:
    store_destroy (&self);
    return NULL;
}

store_t *
store_open_readonly (const char *path, char *err, size_t errlen)
{
    int empty, version;
    if (s_check_header (path, &empty, err, errlen))
        return NULL;
    if (empty) {
        s_errbuf (err, errlen, "'%s' is empty: no broker has written to it yet", path);
        return NULL;
    }
    store_t *self = s_new (path, SQLITE_OPEN_READONLY, err, errlen);
    if (!self)
        return NULL;
    // No integrity check here: readers (a status page) open the file often
    // and the broker checks it at every start.
    if (s_check_identity (self, &version, err, errlen))
        goto fail;
    if (version < STORE_SCHEMA_VERSION) {
        s_errbuf (err, errlen,
                  "'%s' has schema version %d, older than %d: start the broker once to "
                  "upgrade it",
                  path, version, STORE_SCHEMA_VERSION);
        goto fail;
    }
    if (s_pragma (self, "PRAGMA query_only = ON", err, errlen) || s_prepare_all (self, err, errlen))
        goto fail;
    return self;
fail:
    store_destroy (&self);
    return NULL;
}

void
store_destroy (store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    store_t *self = *self_p;
    if (self->db && self->in_tx && store_commit (self, NULL, 0) != 0)
        s_rollback (self);
    for (int i = 0; i < S_NSTMTS; i++)
        sqlite3_finalize (self->stmts[i]);
    sqlite3_close (self->db);
    if (self->lock_fd >= 0)
        close (self->lock_fd);  // after the close: its last checkpoint is still ours
    free (self->found);
    free (self->path);
    free (self);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------
// Group commit.

int
store_commit (store_t *self, char *err, size_t errlen)
{
    if (self->lost) {
        s_rollback (self);
        s_error (self,
                 "cannot commit '%s': %d writes were rolled back by an earlier error (%s); "
                 "nothing since the last commit was committed",
                 self->path, self->lost, self->lost_cause);
        self->lost = 0;
        self->uncommitted = 0;
        s_errbuf (err, errlen, "%s", self->error);
        return -1;
    }
    if (!self->in_tx)
        return 0;
    sqlite3_stmt *stmt = self->stmts[S_COMMIT];
    int rc = s_step (self, stmt);
    sqlite3_reset (stmt);
    if (rc != SQLITE_DONE) {
        // SQLite may have kept the transaction open (SQLITE_BUSY) or ended
        // it; either way, nothing of it is committed from here on.
        s_rollback (self);
        s_error (self, "cannot commit '%s': %s", self->path, self->cause);
        self->uncommitted = 0;
        s_errbuf (err, errlen, "%s", self->error);
        return -1;
    }
    self->in_tx = 0;
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

// ---------------------------------------------------------------------------
// Writes. Each public write is all or nothing (see s_fail), appends its
// events itself, and counts as one write for store_uncommitted.
//
// Event payloads (key=value, space separated; a value that may hold spaces
// comes last and runs to the end):
//   experiment  name=NAME, or from store_experiment_create
//               source=SOURCE settings=SETTINGS name=NAME (the settings,
//               key=value pairs themselves, run to ' name=')
//   file        file=ID size=BYTES mtime_ns=NS seen_ns=NS name=NAME
//   pair        file_a=ID file_b=ID stem=STEM
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
    int found, rc = s_query_int (self, stmt, &id, &found);
    if (rc != SQLITE_OK)
        return s_fail_read (self, rc, "cannot look up experiment '%s'", name);
    if (found)
        return id;
    if (s_write_begin (self))
        return -1;
    stmt = self->stmts[S_EXPERIMENT_ADD];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 2, now_ns);
    rc = s_exec (self, stmt);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot add experiment '%s'", name);
    id = sqlite3_last_insert_rowid (self->db);
    s_event (self, &rc, "experiment", id, 0, now_ns, "name=%s", name);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot add experiment '%s'", name);
    s_write_end (self);
    return id;
}

// Looks up the id of a file or pair that an insert found already there.
static int64_t
s_known (store_t *self, s_stmt_id_t id, int64_t experiment, const char *name, const char *what)
{
    sqlite3_stmt *stmt = self->stmts[id];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
    int64_t known;
    int found, rc = s_query_int (self, stmt, &known, &found);
    if (rc != SQLITE_OK)
        return s_fail_read (self, rc, "cannot look up %s '%s'", what, name);
    if (!found) {
        s_error (self, "cannot look up %s '%s' in '%s': gone", what, name, self->path);
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
s_insert_or_known (store_t *self, s_stmt_id_t insert, s_stmt_id_t get, int64_t experiment,
                   const char *name, const char *what, int *inserted)
{
    *inserted = 0;
    if (s_write_begin (self))
        return -1;
    int rc = s_exec (self, self->stmts[insert]);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot add %s '%s' of experiment %" PRId64, what, name,
                       experiment);
    if (!self->call_dirty) {
        s_write_nothing (self);
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
    int rc = s_step (self, stmt);
    int64_t old_size = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 0) : 0;
    int64_t old_mtime = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 1) : 0;
    sqlite3_reset (stmt);
    if (rc == SQLITE_DONE) {
        s_error (self, "cannot look up file '%s' in '%s': gone", name, self->path);
        return -1;
    }
    if (rc != SQLITE_ROW)
        return s_fail_read (self, rc, "cannot look up file '%s'", name);
    if (old_size == size && old_mtime == mtime_ns)
        return id;
    if (s_write_begin (self))
        return -1;
    stmt = self->stmts[S_FILE_UPDATE];
    sqlite3_bind_int64 (stmt, 1, id);
    sqlite3_bind_int64 (stmt, 2, size);
    sqlite3_bind_int64 (stmt, 3, mtime_ns);
    sqlite3_bind_int64 (stmt, 4, seen_ns);
    rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE)
        s_event (self, &rc, "file-changed", experiment, 0, seen_ns,
                 "file=%" PRId64 " size=%" PRId64 "->%" PRId64 " mtime_ns=%" PRId64 "->%" PRId64
                 " name=%s",
                 id, old_size, size, old_mtime, mtime_ns, name);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot record the new version of file '%s' of experiment %" PRId64,
                       name, experiment);
    s_write_end (self);
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
        return s_fail (self, rc, "cannot add file '%s' of experiment %" PRId64, name, experiment);
    s_write_end (self);
    *version = STORE_FILE_NEW;
    return id;
}

int64_t
store_pair_add (store_t *self, int64_t experiment, const char *stem, int64_t file_a,
                int64_t file_b, int64_t now_ns, int *is_new)
{
    *is_new = 0;
    sqlite3_stmt *stmt = self->stmts[S_PAIR_ADD];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, stem, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 3, file_a);
    if (file_b)
        sqlite3_bind_int64 (stmt, 4, file_b);
    else
        sqlite3_bind_null (stmt, 4);
    sqlite3_bind_int64 (stmt, 5, now_ns);
    int inserted, rc = SQLITE_DONE;
    int64_t id = s_insert_or_known (self, S_PAIR_ADD, S_PAIR_GET, experiment, stem, "pair",
                                    &inserted);
    if (!inserted)
        return id;
    // Each file counts the pairs it is in, so that a restart offers the
    // pairing rules only the files still short of theirs.
    for (int i = 0; i < 2 && rc == SQLITE_DONE; i++) {
        int64_t file = i ? file_b : file_a;
        if (!file)
            continue;
        sqlite3_stmt *paired = self->stmts[S_FILE_PAIRED];
        sqlite3_bind_int64 (paired, 1, file);
        rc = s_exec (self, paired);
    }
    if (rc == SQLITE_DONE) {
        s_words_t words = s_words (self);
        s_word_int (&words, "file_a=", file_a);
        s_word_int (&words, " file_b=", file_b);
        s_word (&words, " stem=", stem);
        s_event_insert (self, &rc, "pair", experiment, id, now_ns);
    }
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot add pair '%s' of experiment %" PRId64, stem, experiment);
    s_write_end (self);
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
    int rc = s_step (self, stmt);
    if (rc == SQLITE_ROW) {
        *state = sqlite3_column_int (stmt, 0);
        *experiment = sqlite3_column_int64 (stmt, 1);
        *attempts = sqlite3_column_int (stmt, 2);
        *last = *attempts + sqlite3_column_int (stmt, 3);
    }
    sqlite3_reset (stmt);
    if (rc == SQLITE_DONE) {
        s_write_nothing (self);
        s_error (self, "%s pair %" PRId64 " in '%s': no such pair", what, pair, self->path);
        return 0;
    }
    if (rc != SQLITE_ROW)
        return s_fail_read (self, rc, "%s pair %" PRId64, what, pair);
    return 1;
}

// Reads a pair that must be PENDING for 'what' ("cannot dispatch"): its
// experiment and the number of its last attempt. 0, or -1 with the error
// set (no such pair, not pending, or a failed read).
static int
s_pair_pending (store_t *self, int64_t pair, const char *what, int64_t *experiment, int *last)
{
    int state, attempts;
    if (s_pair_state (self, pair, what, &state, experiment, &attempts, last) != 1)
        return -1;
    if (state != STORE_PENDING) {
        s_write_nothing (self);
        s_error (self, "%s pair %" PRId64 " in '%s': it is not pending", what, pair, self->path);
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
    s_bind_text (stmt, 4, error);
    sqlite3_bind_int64 (stmt, 5, now_ns);
    return s_exec (self, stmt);
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
    s_bind_text (stmt, 3, agent);
    sqlite3_bind_int64 (stmt, 4, now_ns);
    rc = sqlite3_step (stmt);
    sqlite3_finalize (stmt);
    if (rc == SQLITE_DONE && sqlite3_changes (self->db) == 1) {
        s_event (self, &rc, "dispatch", experiment, pair, now_ns,
                 "attempt=%d agent=%s recovered=1", attempt, agent);
        if (rc == SQLITE_DONE)
            rc = s_attempt_end (self, pair, attempt, "done", NULL, now_ns);
    }
    return rc;
}

int
store_pair_dispatch (store_t *self, int64_t pair, const char *agent, int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    // Read, then change only if still pending: one writer, one transaction.
    // (UPDATE ... RETURNING would save the read but costs more than it.)
    int last;
    int64_t experiment;
    if (s_pair_pending (self, pair, "cannot dispatch", &experiment, &last))
        return -1;
    int attempt = last + 1;
    sqlite3_stmt *stmt = self->stmts[S_PAIR_DISPATCH];
    sqlite3_bind_int64 (stmt, 1, pair);
    s_bind_text (stmt, 2, agent);
    sqlite3_bind_int64 (stmt, 3, now_ns);
    int rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_ATTEMPT_ADD];
        sqlite3_bind_int64 (stmt, 1, pair);
        sqlite3_bind_int (stmt, 2, attempt);
        s_bind_text (stmt, 3, agent);
        sqlite3_bind_int64 (stmt, 4, now_ns);
        rc = s_exec (self, stmt);
    }
    if (rc == SQLITE_DONE) {
        s_words_t words = s_words (self);
        s_word_int (&words, "attempt=", attempt);
        s_word (&words, " agent=", agent);
        s_event_insert (self, &rc, "dispatch", experiment, pair, now_ns);
    }
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot dispatch pair %" PRId64, pair);
    s_write_end (self);
    return attempt;
}

int64_t
store_pair_closed (store_t *self, int64_t pair)
{
    sqlite3_stmt *stmt = self->stmts[S_PAIR_CLOSED];
    sqlite3_bind_int64 (stmt, 1, pair);
    int64_t closed = 0;
    if (s_query_int (self, stmt, &closed, NULL) == SQLITE_OK)
        return closed > 0 ? closed : 0;
    s_error (self, "cannot read the frames of pair %" PRId64 " in '%s': %s", pair, self->path,
             sqlite3_errmsg (self->db));
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
        rc = s_step (self, stmt);
    }
    int found = rc == SQLITE_ROW;
    if (found && out && size)
        snprintf (out, size, "%s", s_column_text (stmt, 0));
    sqlite3_finalize (stmt);
    if (found || rc == SQLITE_DONE)
        return found;
    s_error (self, "cannot read attempt %d of pair %" PRId64 " in '%s': %s", attempt, pair,
             self->path, sqlite3_errmsg (self->db));
    return -1;
}

int
store_pair_result (store_t *self, int64_t pair, int attempt, const char *agent,
                   const store_result_t *result, int64_t now_ns, int *recorded)
{
    *recorded = 0;
    if (!result) {
        s_error (self, "cannot record a result of pair %" PRId64 " in '%s': no result", pair,
                 self->path);
        return -1;
    }
    if (s_write_begin (self))
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
            s_event (self, &rc, "duplicate", experiment, pair, now_ns, "attempt=%d agent=%s",
                     attempt, who);
        if (rc != SQLITE_DONE)
            return s_fail (self, rc, "cannot record a result of pair %" PRId64, pair);
        return s_write_end (self);
    }
    // Any result is better than none: a late one is taken whatever the
    // pair's state (pending after a requeue, or even failed since).
    int keep = result->field && self->fields_every > 0
               && (self->fields_every == 1 || self->results_seen % self->fields_every == 0);
    sqlite3_stmt *stmt = self->stmts[S_RESULT_ADD];
    sqlite3_bind_int64 (stmt, 1, pair);
    sqlite3_bind_int (stmt, 2, attempt);
    s_bind_text (stmt, 3, agent);
    sqlite3_bind_double (stmt, 4, result->mean_u);
    sqlite3_bind_double (stmt, 5, result->mean_v);
    sqlite3_bind_double (stmt, 6, result->mean_speed);
    sqlite3_bind_double (stmt, 7, result->valid_fraction);
    sqlite3_bind_double (stmt, 8, result->vorticity);
    sqlite3_bind_int (stmt, 9, result->nx);
    sqlite3_bind_int (stmt, 10, result->ny);
    sqlite3_bind_int64 (stmt, 11, result->compute_ns);
    s_bind_text (stmt, 12, result->path);
    if (keep)
        sqlite3_bind_blob64 (stmt, 13, result->field, result->field_size, SQLITE_STATIC);
    else
        sqlite3_bind_null (stmt, 13);
    sqlite3_bind_int64 (stmt, 14, now_ns);
    rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_PAIR_DONE];
        sqlite3_bind_int64 (stmt, 1, pair);
        s_bind_text (stmt, 2, agent);
        sqlite3_bind_int64 (stmt, 3, now_ns);
        rc = s_exec (self, stmt);
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
        return s_fail (self, rc, "cannot record a result of pair %" PRId64, pair);
    self->results_seen++;
    *recorded = 1;
    return s_write_end (self);
}

int
store_pair_failure (store_t *self, int64_t pair, int attempt, const char *agent,
                    const char *error, int max_attempts, int64_t now_ns, int *failed)
{
    *failed = 0;
    if (s_write_begin (self))
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
        s_event (self, &rc, "failure", experiment, pair, now_ns, "attempt=%d agent=%s error=%s",
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
        rc = s_exec (self, stmt);
        if (rc == SQLITE_DONE)
            s_event (self, &rc, "failed", experiment, pair, now_ns, "attempts=%d error=%s",
                     attempts, why);
        *failed = rc == SQLITE_DONE;
    }
    else if (rc == SQLITE_DONE && current) {
        sqlite3_stmt *stmt = self->stmts[S_PAIR_RETRY];
        sqlite3_bind_int64 (stmt, 1, pair);
        sqlite3_bind_text (stmt, 2, why, -1, SQLITE_STATIC);
        rc = s_exec (self, stmt);
    }
    if (rc != SQLITE_DONE) {
        *failed = 0;
        return s_fail (self, rc, "cannot record a failure of pair %" PRId64, pair);
    }
    return s_write_end (self);
}

int
store_pair_requeue (store_t *self, int64_t pair, const char *reason, int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    int state, attempts, last;
    int64_t experiment;
    if (s_pair_state (self, pair, "cannot requeue", &state, &experiment, &attempts, &last) != 1)
        return -1;
    if (state != STORE_DISPATCHED) {
        s_write_nothing (self);  // answered or requeued already
        return 0;
    }
    char agent[256] = "";
    sqlite3_stmt *stmt = self->stmts[S_PAIR_AGENT];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = s_step (self, stmt);
    if (rc == SQLITE_ROW && sqlite3_column_text (stmt, 0))
        snprintf (agent, sizeof agent, "%s", s_column_text (stmt, 0));
    sqlite3_reset (stmt);
    if (rc != SQLITE_ROW)
        return s_fail_read (self, rc, "cannot requeue pair %" PRId64, pair);
    stmt = self->stmts[S_PAIR_REQUEUE];
    sqlite3_bind_int64 (stmt, 1, pair);
    rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE)
        rc = s_attempt_end (self, pair, last, "requeued", reason, now_ns);
    if (rc == SQLITE_DONE)
        s_event (self, &rc, "requeue", experiment, pair, now_ns, "attempt=%d agent=%s reason=%s",
                 last, agent, reason ? reason : "");
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot requeue pair %" PRId64, pair);
    return s_write_end (self);
}

// Reads the agent a pair went to last into agent (size bytes; "" if none).
static int
s_pair_agent (store_t *self, int64_t pair, char *agent, size_t size)
{
    *agent = '\0';
    sqlite3_stmt *stmt = self->stmts[S_PAIR_AGENT];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = s_step (self, stmt);
    if (rc == SQLITE_ROW && sqlite3_column_text (stmt, 0))
        snprintf (agent, size, "%s", s_column_text (stmt, 0));
    sqlite3_reset (stmt);
    return rc == SQLITE_ROW ? SQLITE_DONE : rc;
}

int
store_pair_lost (store_t *self, int64_t pair, int attempt, const char *reason, int max_attempts,
                 int64_t now_ns, int *failed)
{
    *failed = 0;
    if (s_write_begin (self))
        return -1;
    int state, attempts, last;
    int64_t experiment;
    if (s_pair_state (self, pair, "cannot requeue", &state, &experiment, &attempts, &last) != 1)
        return -1;
    if (state != STORE_DISPATCHED || attempt != last) {
        s_write_nothing (self);  // answered, requeued already, or out again
        return 0;
    }
    char agent[256];
    const char *why = reason ? reason : "";
    int rc = s_pair_agent (self, pair, agent, sizeof agent);
    int64_t lost = 0;
    sqlite3_stmt *stmt = self->stmts[S_PAIR_LOST];
    sqlite3_bind_int64 (stmt, 1, pair);
    if (rc == SQLITE_DONE)
        rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_PAIR_LOST_COUNT];
        sqlite3_bind_int64 (stmt, 1, pair);
        rc = s_query_int (self, stmt, &lost, NULL);
        rc = rc == SQLITE_OK ? SQLITE_DONE : rc;
    }
    if (rc == SQLITE_DONE)
        rc = s_attempt_end (self, pair, attempt, "requeued", why, now_ns);
    if (rc == SQLITE_DONE)
        s_event (self, &rc, "requeue", experiment, pair, now_ns,
                 "attempt=%d lost=%" PRId64 " agent=%s reason=%s", attempt, lost, agent, why);
    if (rc == SQLITE_DONE && lost >= max_attempts) {
        char error[1024];
        snprintf (error, sizeof error, "agent lost %" PRId64 " times on this pair (last: %s)",
                  lost, why);
        stmt = self->stmts[S_PAIR_FAIL];
        sqlite3_bind_int64 (stmt, 1, pair);
        sqlite3_bind_text (stmt, 2, error, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64 (stmt, 3, now_ns);
        rc = s_exec (self, stmt);
        if (rc == SQLITE_DONE)
            s_event (self, &rc, "failed", experiment, pair, now_ns, "attempts=%d error=%s",
                     attempts, error);
        *failed = rc == SQLITE_DONE;
    }
    if (rc != SQLITE_DONE) {
        *failed = 0;
        return s_fail (self, rc, "cannot requeue pair %" PRId64, pair);
    }
    return s_write_end (self);
}

int
store_pair_defer (store_t *self, int64_t pair, int attempt, const char *agent, const char *text,
                  int64_t now_ns, int *deferred)
{
    *deferred = 0;
    if (s_write_begin (self))
        return -1;
    int state, attempts, last;
    int64_t experiment;
    if (s_pair_state (self, pair, "cannot defer", &state, &experiment, &attempts, &last) != 1)
        return -1;
    if (state != STORE_DISPATCHED || attempt != last) {
        s_write_nothing (self);
        return 0;
    }
    const char *why = text ? text : "";
    sqlite3_stmt *stmt = self->stmts[S_PAIR_DEFER];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE)
        rc = s_attempt_end (self, pair, attempt, "requeued", why, now_ns);
    if (rc == SQLITE_DONE)
        s_event (self, &rc, "defer", experiment, pair, now_ns, "attempt=%d agent=%s text=%s",
                 attempt, agent ? agent : "", why);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot defer pair %" PRId64, pair);
    *deferred = 1;
    return s_write_end (self);
}

int
store_requeue_all (store_t *self, int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    // Events first and attempts next: both find the dispatched pairs by
    // their state, which the last statement changes.
    sqlite3_stmt *stmt = self->stmts[S_REQUEUE_ALL_EVENTS];
    sqlite3_bind_int64 (stmt, 1, now_ns);
    int rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        stmt = self->stmts[S_REQUEUE_ALL_ATTEMPTS];
        sqlite3_bind_int64 (stmt, 1, now_ns);
        rc = s_exec (self, stmt);
    }
    if (rc == SQLITE_DONE)
        rc = s_exec (self, self->stmts[S_REQUEUE_ALL_PAIRS]);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot requeue the dispatched pairs");
    return s_write_end_many (self, sqlite3_changes (self->db));
}

int
store_agent_seen (store_t *self, const char *agent, const char *host, int cores,
                  const char *capabilities, int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    // Heartbeats only move last_seen; an event records a new agent or one
    // that came back different.
    sqlite3_stmt *stmt = self->stmts[S_AGENT_GET];
    sqlite3_bind_text (stmt, 1, agent, -1, SQLITE_STATIC);
    s_bind_text (stmt, 2, host);
    sqlite3_bind_int (stmt, 3, cores);
    s_bind_text (stmt, 4, capabilities);
    int64_t same;
    int found, rc = s_query_int (self, stmt, &same, &found);
    if (rc == SQLITE_OK && found && same) {
        stmt = self->stmts[S_AGENT_SEEN];
        sqlite3_bind_text (stmt, 1, agent, -1, SQLITE_STATIC);
        sqlite3_bind_int64 (stmt, 2, now_ns);
        rc = s_exec (self, stmt);
    }
    else if (rc == SQLITE_OK) {
        stmt = self->stmts[S_AGENT_PUT];
        sqlite3_bind_text (stmt, 1, agent, -1, SQLITE_STATIC);
        s_bind_text (stmt, 2, host);
        sqlite3_bind_int (stmt, 3, cores);
        s_bind_text (stmt, 4, capabilities);
        sqlite3_bind_int64 (stmt, 5, now_ns);
        rc = s_exec (self, stmt);
        if (rc == SQLITE_DONE)
            s_event (self, &rc, "agent", 0, 0, now_ns, "agent=%s host=%s cores=%d capabilities=%s",
                     agent, host ? host : "", cores, capabilities ? capabilities : "");
    }
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot record agent '%s'", agent);
    return s_write_end (self);
}

int64_t
store_event (store_t *self, const char *kind, int64_t experiment, int64_t pair,
             const char *payload, int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    int rc;
    int64_t id = s_event (self, &rc, kind, experiment, pair, now_ns, "%s", payload ? payload : "");
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot append a '%s' event", kind);
    s_write_end (self);
    return id;
}

int64_t
store_experiment_create (store_t *self, const char *name, const char *source,
                         const char *settings, int64_t now_ns)
{
    sqlite3_stmt *stmt = self->stmts[S_EXPERIMENT_GET];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    int64_t id;
    int found, rc = s_query_int (self, stmt, &id, &found);
    if (rc != SQLITE_OK)
        return s_fail_read (self, rc, "cannot look up experiment '%s'", name);
    if (found) {
        s_error (self, "cannot create experiment '%s' in '%s': the name is taken", name,
                 self->path);
        return -1;
    }
    if (s_write_begin (self))
        return -1;
    // An experiment of its own files keeps source NULL, as store_experiment
    // makes them.
    if (source && (!*source || strcmp (source, name) == 0))
        source = NULL;
    stmt = self->stmts[S_EXPERIMENT_CREATE];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    s_bind_text (stmt, 2, source);
    sqlite3_bind_text (stmt, 3, settings ? settings : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 4, now_ns);
    rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE) {
        id = sqlite3_last_insert_rowid (self->db);
        s_event (self, &rc, "experiment", id, 0, now_ns, "source=%s settings=%s name=%s",
                 source ? source : name, settings ? settings : "", name);
    }
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot create experiment '%s'", name);
    s_write_end (self);
    return id;
}

int
store_experiment_find (store_t *self, const char *name, store_experiment_t *out)
{
    sqlite3_stmt *stmt = self->stmts[S_EXPERIMENT_FIND];
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    int rc = s_step (self, stmt);
    if (rc == SQLITE_ROW) {
        // The three strings, back to back in the store's buffer.
        size_t len[3], need = 0;
        for (int c = 0; c < 3; c++)
            need += (len[c] = (size_t) sqlite3_column_bytes (stmt, 2 + c) + 1);
        if (need > self->found_size) {
            char *found = realloc (self->found, need);
            if (!found) {
                sqlite3_reset (stmt);
                s_error (self, "cannot look up experiment '%s' in '%s': out of memory", name,
                         self->path);
                return -1;
            }
            self->found = found;
            self->found_size = need;
        }
        const char *text[3];
        char *at = self->found;
        for (int c = 0; c < 3; c++) {
            memcpy (at, s_column_text (stmt, 2 + c), len[c]);
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
        return s_fail_read (self, rc, "cannot look up experiment '%s'", name);
    return rc == SQLITE_ROW;
}

int
store_pair_skip (store_t *self, int64_t pair, int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    int last;
    int64_t experiment;
    if (s_pair_pending (self, pair, "cannot skip", &experiment, &last))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_PAIR_SKIP];
    sqlite3_bind_int64 (stmt, 1, pair);
    int rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE)
        s_event (self, &rc, "pair", experiment, pair, now_ns, "skip");
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot skip pair %" PRId64, pair);
    return s_write_end (self);
}

int
store_setting_set (store_t *self, int64_t experiment, const char *key, const char *value,
                   int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[value ? S_SETTING_PUT : S_SETTING_DELETE];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, key, -1, SQLITE_STATIC);
    if (value) {
        sqlite3_bind_text (stmt, 3, value, -1, SQLITE_STATIC);
        sqlite3_bind_int64 (stmt, 4, now_ns);
    }
    int rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE && !self->call_dirty) {
        s_write_nothing (self);  // removing what was not set changes nothing
        return 0;
    }
    if (rc == SQLITE_DONE && value)
        s_event (self, &rc, "setting", experiment, 0, now_ns, "%s=%s", key, value);
    else if (rc == SQLITE_DONE)
        s_event (self, &rc, "setting", experiment, 0, now_ns, "%s", key);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot set '%s' of experiment %" PRId64, key, experiment);
    return s_write_end (self);
}

void
store_set_fields (store_t *self, int every)
{
    self->fields_every = every > 0 ? every : 0;
}

void
store_test_fault (store_t *self, int code, int after)
{
    self->fault_code = code;
    self->fault_after = after > 0 ? after : 0;
}

// ---------------------------------------------------------------------------
// Listings. Rows are read in batches of S_BATCH_ROWS and the statement is
// reset before the callbacks run, so that a callback may write to the
// store (dispatch the pair it is given, append an event) without disturbing
// the listing; rows added after the listing began are not listed.

#define S_BATCH_INTS 8   // integer columns a batch holds per row, at most
#define S_BATCH_TEXTS 4  // text columns

typedef struct {
    int rows;                                     // rows held
    int64_t num[S_BATCH_ROWS][S_BATCH_INTS];      // integer columns, in order
    ptrdiff_t text[S_BATCH_ROWS][S_BATCH_TEXTS];  // text columns: offset in chars, -1 for NULL
    char *chars;                                  // the texts, each NUL-terminated
    size_t used, size;                            // bytes of chars used and allocated
} s_batch_t;

static const char *
s_batch_text (const s_batch_t *batch, int row, int column)
{
    ptrdiff_t offset = batch->text[row][column];
    return offset < 0 ? NULL : batch->chars + offset;
}

// Steps a bound statement to its end, copying each row: 'columns' says
// column by column 'i' (integer) or 't' (text). Returns the rows, or -1
// with the SQLite code in *rc (the error is the caller's to report).
static int
s_batch_fill (store_t *self, sqlite3_stmt *stmt, const char *columns, s_batch_t *batch, int *rc)
{
    batch->rows = 0;
    batch->used = 0;
    while ((*rc = s_step (self, stmt)) == SQLITE_ROW && batch->rows < S_BATCH_ROWS) {
        int row = batch->rows, ni = 0, nt = 0;
        for (int c = 0; columns[c]; c++) {
            if (columns[c] == 'i') {
                batch->num[row][ni++] = sqlite3_column_int64 (stmt, c);
                continue;
            }
            const char *text = s_column_text (stmt, c);
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

// Called for each row of a listing; returns non-zero to stop it. A row
// that fails sets *rc (an SQLite code) and is not counted.
typedef int (s_row_fn) (void *ctx, const s_batch_t *batch, int row, int *rc);

// Runs a listing over the ids of a table: statement 'which' (?1, ?2 and ?3
// the window, see s_bind_window; its other parameters bound by the
// caller, which binding keeps across batches) is run for the ids after
// 'after' up to the largest (query 'max_id') when the listing began; its
// first column is the id. At most 'limit' rows (0: every one). Returns the
// rows counted, or -1 with the SQLite code in *rc, for the caller to
// report.
static int
s_list (store_t *self, s_stmt_id_t max_id, s_stmt_id_t which, const char *columns,
        int64_t after, int limit, s_row_fn *row_fn, void *ctx, int *rc)
{
    s_batch_t *batch = calloc (1, sizeof *batch);
    if (!batch) {
        *rc = SQLITE_NOMEM;
        snprintf (self->cause, sizeof self->cause, "%s", sqlite3_errstr (*rc));
        return -1;
    }
    int64_t last = after, max;
    int calls = 0, stop = 0, rows = S_BATCH_ROWS, want = S_BATCH_ROWS;
    *rc = s_query_int (self, self->stmts[max_id], &max, NULL);
    while (*rc == SQLITE_OK && !stop && rows == want && (limit <= 0 || calls < limit)) {
        want = limit > 0 && limit - calls < S_BATCH_ROWS ? limit - calls : S_BATCH_ROWS;
        sqlite3_stmt *stmt = self->stmts[which];
        s_bind_window (stmt, last, max, want);
        rows = s_batch_fill (self, stmt, columns, batch, rc);
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

// s_list for a read: its failure is reported as "<fmt ...> in '<file>':
// <cause>". Returns the rows or -1.
static int
s_list_read (store_t *self, s_stmt_id_t max_id, s_stmt_id_t which, const char *columns,
             int64_t after, int limit, s_row_fn *row_fn, void *ctx, const char *fmt, ...)
    __attribute__ ((format (printf, 9, 10)));

static int
s_list_read (store_t *self, s_stmt_id_t max_id, s_stmt_id_t which, const char *columns,
             int64_t after, int limit, s_row_fn *row_fn, void *ctx, const char *fmt, ...)
{
    int rc, calls = s_list (self, max_id, which, columns, after, limit, row_fn, ctx, &rc);
    if (calls < 0) {
        va_list args;
        va_start (args, fmt);
        s_vfail (self, rc, 0, fmt, args);
        va_end (args);
    }
    return calls;
}

typedef struct {
    store_t *store;      // the store listed
    void *fn;            // the caller's callback (its type as the listing's)
    void *arg;           // and its argument
    int64_t value;       // what the listing needs besides (store_pairs_reset: from)
    int64_t experiment;  // store_pairs_reset: the experiment of its events
    int64_t now_ns;      // and their time
} s_list_t;

static int
s_pair_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    (void) rc;
    s_list_t *list = ctx;
    return ((store_pair_fn *) list->fn) (list->arg, batch->num[r][0], s_batch_text (batch, r, 0),
                                         s_batch_text (batch, r, 1), s_batch_text (batch, r, 2),
                                         s_batch_text (batch, r, 3), (int) batch->num[r][1]);
}

int
store_pairs_in_state (store_t *self, store_state_t state, store_pair_fn *fn, void *arg)
{
    static const s_stmt_id_t by_state[] = {S_PAIRS_PENDING, S_PAIRS_DISPATCHED, S_PAIRS_DONE,
                                           S_PAIRS_FAILED, S_PAIRS_SKIPPED};
    if ((int) state < 0 || (int) state > STORE_SKIPPED) {
        s_error (self, "cannot list pairs in '%s': no state %d", self->path, (int) state);
        return -1;
    }
    s_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_PAIRS_MAX, by_state[state], "iitttt", 0, 0, s_pair_row, &list,
                        "cannot list pairs");
}

static int
s_file_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    (void) rc;
    s_list_t *list = ctx;
    int stop = ((store_file_fn *) list->fn) (list->arg, s_batch_text (batch, r, 0),
                                             s_batch_text (batch, r, 1), batch->num[r][0]);
    list->value |= stop != 0;
    return stop;
}

// Lists the files of statement 'which'; *stop is set if fn stopped it.
static int
s_list_files (store_t *self, s_stmt_id_t which, store_file_fn *fn, void *arg, int *stop)
{
    s_list_t list = {.fn = fn, .arg = arg};
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
    int rc = s_query_int (self, stmt, &counts->files, NULL);
    if (rc == SQLITE_OK) {
        stmt = self->stmts[S_COUNT_PAIRS];
        sqlite3_bind_int64 (stmt, 1, experiment);
        rc = s_query_int (self, stmt, &all, NULL);
    }
    if (rc != SQLITE_OK)
        return rc;
    stmt = self->stmts[S_COUNT_STATES];
    sqlite3_bind_int64 (stmt, 1, experiment);
    int64_t others = 0;
    while ((rc = s_step (self, stmt)) == SQLITE_ROW) {
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
s_counts_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    s_list_t *list = ctx;
    store_counts_t counts = {.name = s_batch_text (batch, r, 0), .created_ns = batch->num[r][1]};
    *rc = s_count (list->store, batch->num[r][0], &counts);
    return *rc == SQLITE_OK ? ((store_counts_fn *) list->fn) (list->arg, &counts) : 0;
}

int
store_counts (store_t *self, store_counts_fn *fn, void *arg)
{
    s_list_t list = {.store = self, .fn = fn, .arg = arg};
    return s_list_read (self, S_EXPERIMENTS_MAX, S_EXPERIMENTS, "iittt", 0, 0, s_counts_row,
                        &list, "cannot count pairs");
}

static int
s_experiment_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    (void) rc;
    s_list_t *list = ctx;
    store_experiment_t experiment = {.id = batch->num[r][0],
                                     .created_ns = batch->num[r][1],
                                     .name = s_batch_text (batch, r, 0),
                                     .source = s_batch_text (batch, r, 1),
                                     .settings = s_batch_text (batch, r, 2)};
    return ((store_experiment_fn *) list->fn) (list->arg, &experiment);
}

int
store_experiments (store_t *self, store_experiment_fn *fn, void *arg)
{
    s_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_EXPERIMENTS_MAX, S_EXPERIMENTS, "iittt", 0, 0, s_experiment_row,
                        &list, "cannot list experiments");
}

static int
s_pair_info_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    (void) rc;
    s_list_t *list = ctx;
    const int64_t *num = batch->num[r];
    store_pair_info_t pair = {.pair = num[0],
                              .state = (int) num[1],
                              .attempts = (int) num[2],
                              .created_ns = num[3],
                              .dispatched_ns = num[4],
                              .finished_ns = num[5],
                              .closed_ns = num[6],
                              .stem = s_batch_text (batch, r, 0),
                              .agent = s_batch_text (batch, r, 1),
                              .error = s_batch_text (batch, r, 2)};
    return ((store_pair_info_fn *) list->fn) (list->arg, &pair);
}

int
store_pairs_of (store_t *self, int64_t experiment, int state, int64_t after, int limit,
                store_pair_info_fn *fn, void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_PAIRS_OF];
    sqlite3_bind_int64 (stmt, 4, experiment);
    sqlite3_bind_int (stmt, 5, state);
    s_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_PAIRS_MAX, S_PAIRS_OF, "iiiiiiittt", after, limit,
                        s_pair_info_row, &list, "cannot list the pairs of experiment %" PRId64,
                        experiment);
}

static int
s_file_info_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    (void) rc;
    s_list_t *list = ctx;
    const int64_t *num = batch->num[r];
    return ((store_file_info_fn *) list->fn) (list->arg, num[0], s_batch_text (batch, r, 0),
                                              num[1], num[2], num[3]);
}

int
store_files_of (store_t *self, int64_t experiment, store_file_info_fn *fn, void *arg)
{
    sqlite3_bind_int64 (self->stmts[S_FILES_OF], 4, experiment);
    s_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_FILES_MAX, S_FILES_OF, "iiiit", 0, 0, s_file_info_row, &list,
                        "cannot list the files of experiment %" PRId64, experiment);
}

static int
s_event_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    (void) rc;
    s_list_t *list = ctx;
    const int64_t *num = batch->num[r];
    return ((store_event_fn *) list->fn) (list->arg, num[0], num[1], s_batch_text (batch, r, 0),
                                          num[2], num[3], s_batch_text (batch, r, 1));
}

int
store_events (store_t *self, int64_t experiment, int64_t after, store_event_fn *fn, void *arg)
{
    s_stmt_id_t which = experiment ? S_EVENTS_OF : S_EVENTS_ALL;
    if (experiment)
        sqlite3_bind_int64 (self->stmts[which], 4, experiment);
    s_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_EVENTS_MAX, which, "iiiitt", after, 0, s_event_row, &list,
                        "cannot list events");
}

int
store_events_of_kind (store_t *self, int64_t experiment, const char *kind, store_event_fn *fn,
                      void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_EVENTS_OF_KIND];
    sqlite3_bind_int64 (stmt, 4, experiment);
    s_bind_text (stmt, 5, kind);
    s_list_t list = {.fn = fn, .arg = arg};
    int calls = s_list_read (self, S_EVENTS_MAX, S_EVENTS_OF_KIND, "iiiitt", 0, 0, s_event_row,
                             &list, "cannot list the '%s' events", kind ? kind : "");
    sqlite3_bind_null (stmt, 5);  // the caller's string may not outlive the call
    return calls;
}

// Moves one listed pair back to PENDING (store_pairs_reset), then tells fn.
static int
s_reset_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    s_list_t *list = ctx;
    store_t *self = list->store;
    int64_t pair = batch->num[r][0];
    int retry = list->value == STORE_FAILED;
    sqlite3_stmt *stmt = self->stmts[retry ? S_PAIR_RESET_FAILED : S_PAIR_RESET_SKIPPED];
    sqlite3_bind_int64 (stmt, 1, pair);
    *rc = s_exec (self, stmt);
    if (*rc == SQLITE_DONE)
        s_event (self, rc, "pair", list->experiment, pair, list->now_ns, "%s",
                 retry ? "retry" : "backfill");
    if (*rc != SQLITE_DONE)
        return 1;
    *rc = SQLITE_OK;
    return ((store_pair_fn *) list->fn) (list->arg, pair, s_batch_text (batch, r, 0),
                                         s_batch_text (batch, r, 1), s_batch_text (batch, r, 2),
                                         s_batch_text (batch, r, 3),
                                         retry ? 0 : (int) batch->num[r][1]);
}

int
store_pairs_reset (store_t *self, int64_t experiment, store_state_t from, int64_t now_ns,
                   store_pair_fn *fn, void *arg)
{
    if (from != STORE_FAILED && from != STORE_SKIPPED) {
        s_error (self, "cannot reset the pairs of experiment %" PRId64 " in '%s': state %d is "
                 "neither failed nor skipped", experiment, self->path, (int) from);
        return -1;
    }
    if (s_write_begin (self))
        return -1;
    s_stmt_id_t which = from == STORE_FAILED ? S_PAIRS_OF_FAILED : S_PAIRS_OF_SKIPPED;
    sqlite3_bind_int64 (self->stmts[which], 4, experiment);
    s_list_t list = {.store = self, .fn = fn, .arg = arg, .value = from,
                     .experiment = experiment, .now_ns = now_ns};
    int rc, moved = s_list (self, S_PAIRS_MAX, which, "iitttt", 0, 0, s_reset_row, &list, &rc);
    if (moved < 0)
        return s_fail (self, rc, "cannot %s the pairs of experiment %" PRId64,
                       from == STORE_FAILED ? "retry" : "backfill", experiment);
    return s_write_end_many (self, moved);
}

int
store_file_retry (store_t *self, int64_t experiment, int64_t file, int64_t now_ns,
                  store_pair_fn *fn, void *arg, int *done)
{
    *done = 0;
    sqlite3_stmt *stmt = self->stmts[S_FILE_VERSION];
    sqlite3_bind_int64 (stmt, 1, file);
    int rc = s_step (self, stmt);
    int64_t paired = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 2) : 0;
    sqlite3_reset (stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return s_fail_read (self, rc, "cannot list the pairs of file %" PRId64, file);
    if (paired == 0)
        return 0;  // in no pair yet: nothing to scan for
    if (s_write_begin (self))
        return -1;
    // A file is in two pairs at most: the listing is read whole before fn
    // runs, so that fn may write.
    s_batch_t *batch = calloc (1, sizeof *batch);
    if (!batch)
        return s_fail (self, SQLITE_NOMEM, "cannot list the pairs of file %" PRId64, file);
    stmt = self->stmts[S_FILE_PAIRS];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_int64 (stmt, 2, file);
    int rows = s_batch_fill (self, stmt, "iitttt", batch, &rc);
    int moved = 0, writes = 0, stop = 0;
    rc = rows < 0 ? rc : SQLITE_DONE;
    for (int r = 0; r < rows && rc == SQLITE_DONE; r++) {
        int64_t pair = batch->num[r][0];
        int state = (int) batch->num[r][1];
        if (state == STORE_DONE) {
            s_event (self, &rc, "file-rewritten", experiment, pair, now_ns,
                     "file=%" PRId64 " stem=%s", file, s_batch_text (batch, r, 1));
            writes++;
            (*done)++;
            continue;
        }
        if (state != STORE_FAILED)
            continue;  // pending or out: its agent reads the file as it is now
        stmt = self->stmts[S_PAIR_RESET_FAILED];
        sqlite3_bind_int64 (stmt, 1, pair);
        rc = s_exec (self, stmt);
        if (rc == SQLITE_DONE)
            s_event (self, &rc, "pair", experiment, pair, now_ns, "retry file=%" PRId64, file);
        if (rc != SQLITE_DONE)
            break;
        moved++;
        writes++;
        if (fn && !stop)
            stop = fn (arg, pair, s_batch_text (batch, r, 0), s_batch_text (batch, r, 1),
                       s_batch_text (batch, r, 2), s_batch_text (batch, r, 3), 0);
    }
    free (batch->chars);
    free (batch);
    if (rc != SQLITE_DONE) {
        *done = 0;
        return s_fail (self, rc, "cannot retry the pairs of file %" PRId64, file);
    }
    s_write_end_many (self, writes);
    return moved;
}

// Settings have no id; their listing goes on from the last (experiment,
// key) it gave, so a setting that fn adds after that key is listed too.
int
store_settings (store_t *self, store_setting_fn *fn, void *arg)
{
    s_batch_t *batch = calloc (1, sizeof *batch);
    char *key = strdup ("");
    int64_t experiment = INT64_MIN;
    int calls = 0, stop = 0, rows = S_BATCH_ROWS;
    int rc = batch && key ? SQLITE_OK : SQLITE_NOMEM;
    while (rc == SQLITE_OK && !stop && rows == S_BATCH_ROWS) {
        sqlite3_stmt *stmt = self->stmts[S_SETTINGS];
        sqlite3_bind_int64 (stmt, 1, experiment);
        sqlite3_bind_text (stmt, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_int (stmt, 3, S_BATCH_ROWS);
        rows = s_batch_fill (self, stmt, "itt", batch, &rc);
        if (rows < 0)
            break;
        rc = SQLITE_OK;
        for (int r = 0; r < rows && !stop; r++) {
            calls++;
            stop = fn (arg, batch->num[r][0], s_batch_text (batch, r, 0),
                       s_batch_text (batch, r, 1));
        }
        if (rows > 0) {
            free (key);
            experiment = batch->num[rows - 1][0];
            if (!(key = strdup (s_batch_text (batch, rows - 1, 0))))
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
        return s_fail_read (self, rc, "cannot list settings");
    return calls;
}

// Results carry their field, too large to read ahead in batches: they are
// given to fn as they are stepped, and the store refuses writes meanwhile.
static int
s_results (store_t *self, sqlite3_stmt *stmt, int64_t experiment, store_result_info_fn *fn,
           void *arg)
{
    sqlite3_bind_int64 (stmt, 1, experiment);
    int calls = 0, stop = 0, rc;
    self->streaming = 1;
    while (!stop && (rc = s_step (self, stmt)) == SQLITE_ROW) {
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
            .stem = s_column_text (stmt, 13),
            .agent = s_column_text (stmt, 14),
            .path = s_column_text (stmt, 15),
            .field = sqlite3_column_blob (stmt, 16),
        };
        result.field_size = result.field ? (size_t) sqlite3_column_bytes (stmt, 16) : 0;
        calls++;
        stop = fn (arg, &result);
    }
    self->streaming = 0;
    sqlite3_reset (stmt);
    if (!stop && rc != SQLITE_DONE)
        return s_fail_read (self, rc, "cannot list the results of experiment %" PRId64,
                            experiment);
    return calls;
}

int
store_results_of (store_t *self, int64_t experiment, store_result_info_fn *fn, void *arg)
{
    return s_results (self, self->stmts[S_RESULTS_OF], experiment, fn, arg);
}

int
store_result_latest (store_t *self, int64_t experiment, store_result_info_fn *fn, void *arg)
{
    return s_results (self, self->stmts[S_RESULT_LATEST], experiment, fn, arg);
}

int64_t
store_event_last (store_t *self)
{
    int64_t last = 0;
    int found;
    int rc = s_query_int (self, self->stmts[S_EVENT_LAST], &last, &found);
    if (rc != SQLITE_OK)
        return s_fail_read (self, rc, "cannot read the event log");
    return last;
}

int
store_agents (store_t *self, store_agent_fn *fn, void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_AGENTS];
    int calls = 0, stop = 0, rc;
    while (!stop && (rc = s_step (self, stmt)) == SQLITE_ROW) {
        calls++;
        stop = fn (arg, s_column_text (stmt, 0), s_column_text (stmt, 1),
                   sqlite3_column_int (stmt, 2), s_column_text (stmt, 3),
                   sqlite3_column_int64 (stmt, 4), sqlite3_column_int64 (stmt, 5));
    }
    sqlite3_reset (stmt);
    if (!stop && rc != SQLITE_DONE)
        return s_fail_read (self, rc, "cannot list the agents");
    return calls;
}

// ---------------------------------------------------------------------------
// The storage lifecycle (schema 3; doc/storage.md)

int64_t
store_allocation_add (store_t *self, int64_t experiment, const char *kind, const char *path,
                      int64_t size_bytes, int64_t expires_ns, int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_ALLOC_ADD];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 3, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 4, size_bytes);
    sqlite3_bind_int64 (stmt, 5, now_ns);
    sqlite3_bind_int64 (stmt, 6, expires_ns);
    int rc = s_exec (self, stmt);
    int64_t id = -1;
    if (rc == SQLITE_DONE) {
        id = sqlite3_last_insert_rowid (self->db);
        s_event (self, &rc, "allocation", experiment, 0, now_ns,
                 "id=%" PRId64 " kind=%s size=%" PRId64 " expires_ns=%" PRId64 " path=%s", id,
                 kind, size_bytes, expires_ns, path);
    }
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot record the allocation of experiment %" PRId64,
                       experiment);
    s_write_end (self);
    return id;
}

int
store_allocation_state (store_t *self, int64_t id, int64_t experiment, const char *state,
                        int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_ALLOC_STATE];
    sqlite3_bind_int64 (stmt, 1, id);
    sqlite3_bind_text (stmt, 2, state, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 3, now_ns);
    int rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE)
        s_event (self, &rc, "allocation", experiment, 0, now_ns, "id=%" PRId64 " state=%s", id,
                 state);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot change allocation %" PRId64, id);
    return s_write_end (self);
}

int
store_allocations (store_t *self, store_allocation_fn *fn, void *arg)
{
    sqlite3_stmt *stmt = self->stmts[S_ALLOCS];
    int rc, calls = 0, stop = 0;
    while (!stop && (rc = s_step (self, stmt)) == SQLITE_ROW) {
        store_allocation_t a = {.id = sqlite3_column_int64 (stmt, 0),
                                .experiment = sqlite3_column_int64 (stmt, 1),
                                .size_bytes = sqlite3_column_int64 (stmt, 2),
                                .created_ns = sqlite3_column_int64 (stmt, 3),
                                .expires_ns = sqlite3_column_int64 (stmt, 4),
                                .name = s_column_text (stmt, 5),
                                .kind = s_column_text (stmt, 6),
                                .path = s_column_text (stmt, 7),
                                .state = s_column_text (stmt, 8)};
        calls++;
        stop = fn (arg, &a);
    }
    sqlite3_reset (stmt);
    if (!stop && rc != SQLITE_DONE)
        return s_fail_read (self, rc, "cannot list the allocations");
    return calls;
}

int
store_file_archived (store_t *self, int64_t file, int64_t experiment, const char *sha256,
                     const char *location, int64_t now_ns)
{
    if (s_write_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmts[S_FILE_ARCHIVED];
    sqlite3_bind_int64 (stmt, 1, file);
    sqlite3_bind_text (stmt, 2, sha256, -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 3, location, -1, SQLITE_STATIC);
    int rc = s_exec (self, stmt);
    if (rc == SQLITE_DONE)
        s_event (self, &rc, "archived", experiment, 0, now_ns,
                 "file=%" PRId64 " sha256=%s location=%s", file, sha256, location);
    if (rc != SQLITE_DONE)
        return s_fail (self, rc, "cannot record where file %" PRId64 " was archived", file);
    return s_write_end (self);
}

int
store_file_location (store_t *self, int64_t experiment, const char *name, char *out, size_t size)
{
    sqlite3_stmt *stmt = self->stmts[S_FILE_LOCATION];
    sqlite3_bind_int64 (stmt, 1, experiment);
    sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
    int rc = s_step (self, stmt), found = 0;
    if (rc == SQLITE_ROW && s_column_text (stmt, 0)) {
        snprintf (out, size, "%s", s_column_text (stmt, 0));
        found = 1;
    }
    sqlite3_reset (stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return s_fail_read (self, rc, "cannot look up where '%s' is", name);
    return found;
}

static int
s_file_stored_row (void *ctx, const s_batch_t *batch, int r, int *rc)
{
    (void) rc;
    s_list_t *list = ctx;
    store_file_stored_t f = {.file = batch->num[r][0],
                             .size = batch->num[r][1],
                             .name = s_batch_text (batch, r, 0),
                             .sha256 = s_batch_text (batch, r, 1),
                             .location = s_batch_text (batch, r, 2)};
    return ((store_file_stored_fn *) list->fn) (list->arg, &f);
}

int
store_files_stored (store_t *self, int64_t experiment, store_file_stored_fn *fn, void *arg)
{
    sqlite3_bind_int64 (self->stmts[S_FILES_STORED], 4, experiment);
    s_list_t list = {.fn = fn, .arg = arg};
    return s_list_read (self, S_FILES_MAX, S_FILES_STORED, "iittt", 0, 0, s_file_stored_row,
                        &list, "cannot list the files of experiment %" PRId64, experiment);
}

int64_t
store_file_last_seen (store_t *self, int64_t experiment)
{
    sqlite3_stmt *stmt = self->stmts[S_FILE_LAST_SEEN];
    sqlite3_bind_int64 (stmt, 1, experiment);
    int64_t ns;
    int rc = s_query_int (self, stmt, &ns, NULL);
    if (rc != SQLITE_OK)
        return s_fail_read (self, rc, "cannot read the files of experiment %" PRId64, experiment);
    return ns;
}
