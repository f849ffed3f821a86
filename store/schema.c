// schema.c — opening the store: the schema and its migrations, the
// statements prepared at open, the checks that refuse a file that is not
// ours and the writer's lock (store_new, store_open_readonly, store_destroy).

#include "store/internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
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
//   file_c and file_d (schema 7) camera 2's frames of a stereo set, else NULL;
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
// - uncounted (schema 5): the results no statistics checkpoint (the stats
//   table) counts yet: a result's pair goes in with it and out with the
//   checkpoint that counts it, a second's worth. A narrow table of its own
//   rather than a flag on results: marking a result counted would rewrite
//   its row, field and all (19-35 us a result with a 13 KB field, measured;
//   deleting the small row costs a few).
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

    // 4 -> 5: run statistics (issue 16, doc/units.md): the broker's
    // checkpoints, one row per (experiment, set), and the results no
    // checkpoint counts yet (every result until one does: those of before
    // the upgrade too).
    "CREATE TABLE uncounted ("
    "    pair INTEGER PRIMARY KEY"
    ");"
    "INSERT INTO uncounted (pair) SELECT pair FROM results ORDER BY pair;"
    "CREATE TABLE stats ("
    "    experiment INTEGER NOT NULL REFERENCES experiments (id),"
    "    set_key TEXT NOT NULL,"
    "    settings TEXT NOT NULL,"
    "    calibration TEXT NOT NULL,"
    "    fields INTEGER NOT NULL,"
    "    first_pair INTEGER NOT NULL,"
    "    last_pair INTEGER NOT NULL,"
    "    state BLOB NOT NULL,"
    "    updated_ns INTEGER NOT NULL,"
    "    PRIMARY KEY (experiment, set_key)"
    ");",

    // 5 -> 6: settings per experiment (issue 25, doc/control.md 'piv'): the
    // PIV settings each result was made with, as its task carried them
    // (NULL: not known, a result from before the upgrade or answered to a
    // broker that did not send its task).
    "ALTER TABLE results ADD COLUMN settings TEXT;",

    // 6 -> 7: stereo sets (issue 26, doc/stereo.md): a task of four frames,
    // file_a and file_b camera 1's, file_c and file_d camera 2's (NULL for
    // a pair of two frames: every pair of before the upgrade).
    "ALTER TABLE pairs ADD COLUMN file_c INTEGER REFERENCES files (id);"
    "ALTER TABLE pairs ADD COLUMN file_d INTEGER REFERENCES files (id);",

    // 7 -> 8: ensemble correlation jobs (issue 27, doc/control.md
    // 'ensemble'): a job of an experiment, the pairs it sums in their
    // order (cut into chunks of 'chunk' pairs), one partial sum per
    // (job, pass, chunk) recorded once (the first wins), and the job's
    // field with its stresses once its last pass is merged.
    "CREATE TABLE ensemble_jobs ("
    "    id INTEGER PRIMARY KEY,"
    "    experiment INTEGER NOT NULL REFERENCES experiments (id),"
    "    window INTEGER NOT NULL,"
    "    overlap INTEGER NOT NULL,"
    "    asked TEXT NOT NULL,"
    "    settings TEXT NOT NULL,"
    "    chunk INTEGER NOT NULL,"
    "    passes INTEGER NOT NULL,"
    "    pass INTEGER NOT NULL,"
    "    pairs INTEGER NOT NULL,"
    "    counted INTEGER,"
    "    state TEXT NOT NULL CHECK (state = 'running' OR state = 'done' OR state = 'failed'),"
    "    error TEXT,"
    "    field BLOB,"
    "    stress BLOB,"
    "    created_ns INTEGER NOT NULL,"
    "    finished_ns INTEGER"
    ");"
    "CREATE INDEX ensemble_jobs_of ON ensemble_jobs (experiment, id);"
    "CREATE TABLE ensemble_pairs ("
    "    job INTEGER NOT NULL REFERENCES ensemble_jobs (id),"
    "    ord INTEGER NOT NULL,"
    "    pair INTEGER NOT NULL REFERENCES pairs (id),"
    "    PRIMARY KEY (job, ord)"
    ") WITHOUT ROWID;"
    "CREATE TABLE ensemble_partials ("
    "    job INTEGER NOT NULL REFERENCES ensemble_jobs (id),"
    "    pass INTEGER NOT NULL,"
    "    chunk INTEGER NOT NULL,"
    "    pairs INTEGER NOT NULL,"
    "    agent TEXT NOT NULL,"
    "    partial BLOB NOT NULL,"
    "    recorded_ns INTEGER NOT NULL,"
    "    PRIMARY KEY (job, pass, chunk)"
    ");",
};

_Static_assert (sizeof s_migrations / sizeof s_migrations[0] == STORE_SCHEMA_VERSION,
                "one migration step per schema version");
_Static_assert (S_APPLICATION_ID == 1346983494, "application id as in the first migration");

// ---------------------------------------------------------------------------
// Statements: all prepared at open, reused for the life of the store. Only
// constants appear in their text; every value is bound.

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

static const char *s_sql[S_NSTMTS] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_EXPERIMENT_GET] = "SELECT id FROM experiments WHERE name = ?1",
    [S_EXPERIMENT_ADD] = "INSERT INTO experiments (name, created_ns) VALUES (?1, ?2)",
    [S_EXPERIMENT_CREATE] = "INSERT INTO experiments (name, source, settings, created_ns)"
                            " VALUES (?1, ?2, ?3, ?4)",
    [S_EXPERIMENT_ADOPT] = "UPDATE experiments SET source = ?2, settings = ?3 WHERE id = ?1"
                           " AND NOT EXISTS (SELECT 1 FROM files WHERE experiment = ?1)",
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
                     " WHERE p.experiment = ?1 AND (p.file_a = ?2 OR p.file_b = ?2"
                     " OR p.file_c = ?2 OR p.file_d = ?2) ORDER BY p.id",
    [S_PAIR_GET] = "SELECT id FROM pairs WHERE experiment = ?1 AND stem = ?2",
    [S_PAIR_ADD] = "INSERT INTO pairs (experiment, stem, file_a, file_b, created_ns, file_c, file_d)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (experiment, stem) DO NOTHING",
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
                     " valid_fraction, vorticity, nx, ny, compute_ns, path, field, recorded_ns,"
                     " settings)"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
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
    [S_PAIR_MORE] = "SELECT fc.name, fd.name FROM pairs p JOIN files fc ON fc.id = p.file_c"
                    " JOIN files fd ON fd.id = p.file_d WHERE p.id = ?1",
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
    " ifnull (r.agent, ''), ifnull (r.path, ''), r.field, ifnull (r.settings, '')"               \
    " FROM pairs p"                                                                               \
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
    [S_AGENTS_UNSEEN] = "SELECT name FROM agents WHERE last_seen_ns < ?1 ORDER BY name",
    [S_AGENTS_FORGET] = "DELETE FROM agents WHERE last_seen_ns < ?1",
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
    [S_STATS_PUT] = "INSERT INTO stats (experiment, set_key, settings, calibration, fields,"
                    " first_pair, last_pair, state, updated_ns)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                    " ON CONFLICT (experiment, set_key) DO UPDATE SET settings = ?3,"
                    " calibration = ?4, fields = ?5, first_pair = ?6, last_pair = ?7, state = ?8,"
                    " updated_ns = ?9",
    [S_UNCOUNTED_ADD] = "INSERT INTO uncounted (pair) VALUES (?1)",
    // Only a result of the experiment saved, and only once.
    [S_STATS_COUNT] = "DELETE FROM uncounted WHERE pair = ?1"
                      " AND (SELECT experiment FROM pairs WHERE id = ?1) = ?2",
    [S_STATS_OF] = "SELECT experiment, fields, first_pair, last_pair, updated_ns, set_key,"
                   " settings, calibration, state FROM stats"
                   " WHERE ?1 = 0 OR experiment = ?1 ORDER BY experiment, first_pair",
    [S_STATS_DELETE] = "DELETE FROM stats WHERE experiment = ?1",
    [S_STATS_UNCOUNT] = "INSERT OR IGNORE INTO uncounted (pair) SELECT r.pair FROM results r"
                        " JOIN pairs p ON p.id = r.pair WHERE +p.experiment = ?1",
    // The results not counted (few: at most broker/stats_save_results an
    // experiment, besides a rebuild's), those after pair ?2: the same
    // columns as S_RESULT_COLUMNS, the uncounted table first.
    [S_RESULTS_UNCOUNTED] =
        "SELECT r.pair, r.attempt, r.nx, r.ny, r.compute_ns, ifnull (f.mtime_ns, 0),"
        " ifnull (a.dispatched_ns, ifnull (p.dispatched_ns, 0)), r.recorded_ns,"
        " r.mean_u, r.mean_v, r.mean_speed, r.valid_fraction, r.vorticity, p.stem,"
        " ifnull (r.agent, ''), ifnull (r.path, ''), r.field, ifnull (r.settings, '')"
        " FROM uncounted u CROSS JOIN results r ON r.pair = u.pair"
        " CROSS JOIN pairs p ON p.id = r.pair"
        " LEFT JOIN attempts a ON a.pair = r.pair AND a.attempt = r.attempt"
        " LEFT JOIN files f ON f.id = ifnull (p.file_b, p.file_a)"
        " WHERE (?1 = 0 OR p.experiment = ?1) AND u.pair > ?2 ORDER BY u.pair",
};

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
        st_errbuf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return -1;
    }
    if (!S_ISREG (st.st_mode)) {
        st_errbuf (err, errlen, "cannot open '%s': not a regular file", path);
        return -1;
    }
    *empty = st.st_size == 0;
    if (*empty)
        return 0;
    char header[100];
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        st_errbuf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return -1;
    }
    ssize_t got = read (fd, header, sizeof header);
    close (fd);
    if (got != (ssize_t) sizeof header || memcmp (header, "SQLite format 3", 16) != 0) {
        st_errbuf (err, errlen, "'%s' is not a pivfarm database (not an SQLite file)", path);
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
            const char *t = st_column_text (stmt, 0);
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
        st_errbuf (err, errlen, "%s '%s': %s", s_unreadable (rc), self->path,
                  sqlite3_errmsg (self->db));
        return -1;
    }
    if (strcmp (verdict, "ok") != 0) {
        for (char *nl = strchr (verdict, '\n'); nl; nl = strchr (nl, '\n'))
            *nl = ' ';  // the operator gets one line
        st_errbuf (err, errlen, "corrupt or truncated database '%s': %s", self->path, verdict);
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
        st_errbuf (err, errlen, "%s '%s': %s", s_unreadable (rc), self->path,
                  sqlite3_errmsg (self->db));
        return -1;
    }
    *version = 0;
    if (tables == 0 && (app == 0 || app == S_APPLICATION_ID))
        return 0;
    if (app != S_APPLICATION_ID) {
        st_errbuf (err, errlen, "'%s' is not a pivfarm database (application id 0x%08" PRIx32 ")",
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
        st_errbuf (err, errlen, "'%s' is not a pivfarm database (%s)", self->path,
                  rc == SQLITE_ROW ? "its meta table names another application"
                                   : "no meta table with its schema version");
        return -1;
    }
    char *end;
    long v = strtol (text, &end, 10);
    if (end == text || *end || v < 1 || v > 1000000) {
        st_errbuf (err, errlen, "'%s' is not a pivfarm database (schema version '%s')",
                  self->path, text);
        return -1;
    }
    if (v > STORE_SCHEMA_VERSION) {
        st_errbuf (err, errlen,
                  "'%s' has schema version %ld, newer than this pivfarm's %d: use the pivfarm "
                  "that wrote it, or a newer one",
                  self->path, v, STORE_SCHEMA_VERSION);
        return -1;
    }
    *version = (int) v;
    return 0;
}

// Tells options->note a line, if there is a note.
static void
s_note (const store_options_t *options, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_note (const store_options_t *options, const char *fmt, ...)
{
    if (!options || !options->note)
        return;
    char line[S_ERROR_MAX + PATH_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (line, sizeof line, fmt, args);
    va_end (args);
    options->note (options->arg, line);
}

// Brings the schema to STORE_SCHEMA_VERSION in one transaction, reading
// the version again inside it in case another process got there first.
// A store that holds a schema is copied first, if the options say so
// (st_backup_before_migration): before the transaction, so that a copy
// that fails leaves the store untouched.
static int
s_migrate (store_t *self, const store_options_t *options, char *err, size_t errlen)
{
    int version;
    if (s_check_identity (self, &version, err, errlen))
        return -1;
    if (version == STORE_SCHEMA_VERSION)
        return 0;
    if (version >= 1 && options->backup_before_migrate) {
        char file[PATH_MAX + 32], why[S_ERROR_MAX + PATH_MAX];
        struct timespec t0, t1;
        clock_gettime (CLOCK_MONOTONIC, &t0);
        if (st_backup_before_migration (self, version, file, sizeof file, why, sizeof why)) {
            st_errbuf (err, errlen,
                       "cannot bring the schema of '%s' from version %d to %d: its backup "
                       "failed, nothing was changed: %s (or set broker/backup_before_migrate "
                       "= off)",
                       self->path, version, STORE_SCHEMA_VERSION, why);
            return -1;
        }
        clock_gettime (CLOCK_MONOTONIC, &t1);
        struct stat st;
        s_note (options,
                "store '%s' has schema version %d: copied into '%s' before its migration "
                "(%lld bytes in %.2f s, integrity ok)",
                self->path, version, file, stat (file, &st) == 0 ? (long long) st.st_size : 0LL,
                (double) (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    }
    char *msg = NULL;
    int rc = sqlite3_exec (self->db, "BEGIN IMMEDIATE", NULL, NULL, &msg);
    if (rc == SQLITE_OK && s_check_identity (self, &version, err, errlen)) {
        sqlite3_exec (self->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    int from = version;
    while (rc == SQLITE_OK && version < STORE_SCHEMA_VERSION) {
        rc = sqlite3_exec (self->db, s_migrations[version], NULL, NULL, &msg);
        version++;
        if (rc == SQLITE_OK && from > 0)
            s_note (options, "store '%s': schema from version %d to %d (step %d of %d)",
                    self->path, version - 1, version, version - from,
                    STORE_SCHEMA_VERSION - from);
    }
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
        st_errbuf (err, errlen, "cannot bring the schema of '%s' to version %d: %s", self->path,
                  STORE_SCHEMA_VERSION, msg ? msg : sqlite3_errmsg (self->db));
        sqlite3_free (msg);
        if (!sqlite3_get_autocommit (self->db))
            sqlite3_exec (self->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    if (from > 0)
        s_note (options, "store '%s': schema brought from version %d to %d", self->path, from,
                STORE_SCHEMA_VERSION);
    return 0;
}

static int
s_prepare_all (store_t *self, char *err, size_t errlen)
{
    for (int i = 0; i < S_NSTMTS; i++) {
        int rc = sqlite3_prepare_v3 (self->db, s_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                     &self->stmts[i], NULL);
        if (rc != SQLITE_OK) {
            st_errbuf (err, errlen, "cannot prepare the statements of '%s': %s", self->path,
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
        st_errbuf (err, errlen, "cannot set up '%s' (%s): %s", self->path, sql,
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
        st_errbuf (err, errlen, "cannot open '%s': out of memory", path);
        free (self);
        return NULL;
    }
    self->lock_fd = -1;
    for (int i = 0; i < ST_NFILES; i++)
        self->files[i].fd = -1;
    self->fields_every = 1;
    self->readonly = (flags & SQLITE_OPEN_READONLY) != 0;
    int rc = sqlite3_open_v2 (path, &self->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        st_errbuf (err, errlen, "cannot open '%s': %s", path,
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
        st_errbuf (err, errlen, "cannot open '%s': cannot make its lock '%s': %s", path, lock,
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
            st_errbuf (err, errlen,
                      "cannot open '%s': another broker%s%s%s is using it (it holds '%s'); "
                      "stop it first, or give this one another store",
                      path, *pid ? " (pid " : "", pid, *pid ? ")" : "", lock);
        else
            st_errbuf (err, errlen, "cannot open '%s': cannot lock '%s': %s", path, lock,
                      strerror (errno));
        close (fd);
        return -1;
    }
    return fd;
}

// Whether a store may be opened at 'path' as it is, from what the lock
// file recorded of its life ('state': "open …", "closed …", "lost …", ""
// for a lock file without a record, as older brokers left it; NULL when
// there was no lock file): a store that was in use and is gone, one that
// was detached while a broker ran, and a WAL missing after a broker that
// did not stop cleanly are refused with what to do. 0, or -1 with err.
static int
s_check_record (const char *path, int exists, const char *state, int *restored, char *err,
                size_t errlen)
{
    *restored = 0;
    if (!state)
        return 0;  // no lock file: a first start if nothing is there
    char wal[PATH_MAX + 8];
    snprintf (wal, sizeof wal, "%s-wal", path);
    struct stat st;
    if (strncmp (state, "lost ", 5) == 0) {
        // The copy a broker saved, moved to the path: taken, once the WAL
        // of the store it replaces is gone (the copy holds all of it).
        const char *copy = strstr (state, " (copy ");
        unsigned long long dev, ino;
        if (exists && copy && sscanf (copy, " (copy %llu:%llu)", &dev, &ino) == 2
            && stat (path, &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
            if (stat (wal, &st) == 0 && st.st_size > 0) {
                st_errbuf (err, errlen,
                           "cannot open '%s' (the copy a broker saved): the WAL of the store it "
                           "replaces is still there: rm -f '%s' '%s-shm' first (the copy holds "
                           "all of it)",
                           path, wal, path);
                return -1;
            }
            *restored = 1;
            return 0;
        }
        st_errbuf (err, errlen,
                   "cannot open '%s': it was taken away while a broker ran (%s). To go on "
                   "with the copy the broker saved: rm -f '%s' '%s-shm' and move the copy to "
                   "'%s'; to use what is at the path now (or an empty store if nothing is), "
                   "remove '%s.lock'",
                   path, state + 5, wal, path, path, path);
        return -1;
    }
    if (!exists) {
        st_errbuf (err, errlen,
                   "cannot open '%s': the store is gone, but '%s.lock' shows it was in use%s%s%s; "
                   "nothing was created. Restore it from a backup (or from a copy a broker saved "
                   "as '%s.rescued-*'); to start an empty store on purpose, remove '%s.lock'",
                   path, path, *state ? " (" : "", state, *state ? ")" : "", path, path);
        return -1;
    }
    if (strncmp (state, "open ", 5) == 0 && stat (wal, &st) != 0 && errno == ENOENT) {
        st_errbuf (err, errlen,
                   "cannot open '%s': its WAL '%s' is missing, but the broker that last used it "
                   "did not stop cleanly (%s): what it committed since its last checkpoint would "
                   "be lost. Put the WAL back if it was moved; to use '%s' as it is, remove "
                   "'%s.lock'",
                   path, wal, state, path, path);
        return -1;
    }
    return 0;
}

store_t *
store_new (const char *path, store_durability_t durability, char *err, size_t errlen)
{
    store_options_t options = {.durability = durability, .backup_before_migrate = 1};
    return store_new_with (path, &options, err, errlen);
}

store_t *
store_new_with (const char *path, const store_options_t *options, char *err, size_t errlen)
{
    store_durability_t durability = options->durability;
    struct stat st;
    int exists = stat (path, &st) == 0, empty = 1, version, restored = 0;
    if (!exists && errno != ENOENT) {
        st_errbuf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return NULL;
    }
    // Before anything reads or writes the database (even its header).
    int lock_fd = strcmp (path, ":memory:") == 0 ? -2 : s_lock (path, err, errlen);
    if (lock_fd == -1)
        return NULL;
    if (lock_fd >= 0) {
        char state[1024];
        struct stat lst;
        int recorded = fstat (lock_fd, &lst) == 0 && lst.st_size > 0;
        if (recorded)
            st_lock_read (lock_fd, state, sizeof state);
        if (s_check_record (path, exists, recorded ? state : NULL, &restored, err, errlen) != 0) {
            close (lock_fd);
            return NULL;
        }
    }
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
        st_errbuf (err, errlen,
                  "cannot use '%s': its file system does not support SQLite's WAL mode "
                  "(journal mode '%s')",
                  path, mode);
        goto fail;
    }
    if (s_migrate (self, options, err, errlen) || s_prepare_all (self, err, errlen))
        goto fail;
    sqlite3_db_config (self->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
    // From now on a BEGIN never waits for another process's write lock
    // (store_begin); at open it waited (a migration is worth 5 s).
    self->nowait = 1;
    sqlite3_busy_handler (self->db, st_busy, self);
    self->created = !exists;
    self->restored = restored;
    if (self->lock_fd >= 0) {
        st_files_capture (self);
        st_lock_record (self, "open", NULL);
    }
    return self;
fail:
    store_destroy (&self);
    return NULL;
}

// 1 when no broker has the store at 'path' open: neither its -shm nor a
// non-empty -wal is there (a broker's close removes both).
static int
s_writer_gone (const char *path)
{
    char side[PATH_MAX + 8];
    struct stat st;
    snprintf (side, sizeof side, "%s-shm", path);
    if (stat (side, &st) == 0 || errno != ENOENT)
        return 0;
    snprintf (side, sizeof side, "%s-wal", path);
    return stat (side, &st) != 0 ? errno == ENOENT : st.st_size == 0;
}

// "file:PATH?immutable=1" with PATH percent-encoded where a URI needs it
// (malloc'd, caller frees; NULL when out of memory).
static char *
s_immutable_uri (const char *path)
{
    size_t len = strlen (path);
    char *uri = malloc (3 * len + 32);
    if (!uri)
        return NULL;
    size_t n = (size_t) sprintf (uri, "file:");
    for (const unsigned char *c = (const unsigned char *) path; *c; c++)
        if (isalnum (*c) || strchr ("/-._~", *c))
            uri[n++] = (char) *c;
        else
            n += (size_t) sprintf (uri + n, "%%%02X", *c);
    strcpy (uri + n, "?immutable=1");
    return uri;
}

store_t *
store_open_readonly (const char *path, char *err, size_t errlen)
{
    int empty, version;
    if (s_check_header (path, &empty, err, errlen))
        return NULL;
    if (empty) {
        st_errbuf (err, errlen, "'%s' is empty: no broker has written to it yet", path);
        return NULL;
    }
    store_t *self = s_new (path, SQLITE_OPEN_READONLY, err, errlen);
    if (!self)
        return NULL;
    // No integrity check here: readers (a status page) open the file often
    // and the broker checks it at every start.
    if (s_check_identity (self, &version, err, errlen)) {
        // A store whose broker stopped has no -shm, and a reader who may
        // not write its directory (the page's www-data, doc/deploy.md step
        // 11) cannot make one: SQLite says "attempt to write a readonly
        // database". With no -shm and no WAL left, nothing writes the file
        // and it holds every commit: it is read as immutable.
        if (!s_writer_gone (path))
            goto fail;
        store_destroy (&self);
        char *uri = s_immutable_uri (path);
        if (!uri) {
            st_errbuf (err, errlen, "cannot open '%s': out of memory", path);
            return NULL;
        }
        self = s_new (uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, err, errlen);
        free (uri);
        if (!self)
            return NULL;
        free (self->path);
        if (!(self->path = strdup (path))) {
            st_errbuf (err, errlen, "cannot open '%s': out of memory", path);
            goto fail;
        }
        if (s_check_identity (self, &version, err, errlen))
            goto fail;
    }
    if (version < STORE_SCHEMA_VERSION) {
        st_errbuf (err, errlen,
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
        st_rollback (self);
    st_rescue_end (self, 1);  // a copy not finished is no copy
    for (int i = 0; i < S_NSTMTS; i++)
        sqlite3_finalize (self->stmts[i]);
    int closed = sqlite3_close (self->db) == SQLITE_OK;
    if (self->lock_fd >= 0 && self->nowait && !self->detached && closed)
        st_lock_record (self, "closed", NULL);
    if (self->lock_fd >= 0)
        close (self->lock_fd);  // after the close: its last checkpoint is still ours
    st_files_release (self);
    st_deferred_free (self);
    free (self->detached);
    free (self->rescue_path);
    free (self->found);
    free (self->path);
    free (self);
    *self_p = NULL;
}

int
store_created (store_t *self)
{
    return self->created;
}

int
store_restored (store_t *self)
{
    return self->restored;
}
