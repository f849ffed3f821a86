// store.h — the durable state of the farm in SQLite: experiments, files,
// pairs and their attempts, results (vector fields as BLOBs plus summary
// figures), agents, settings, and an append-only event log from which any
// experiment can be replayed. store/ is the only code in pivfarm that
// includes sqlite3.h (bench/floor.c, which measures SQLite alone, and the
// tests aside; the Makefile enforces it). WAL mode; writes are grouped: the
// first write after a commit opens a transaction, store_commit closes it
// (the broker commits every few milliseconds and only then acknowledges
// what it committed).

#ifndef STORE_STORE_H
#define STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA_VERSION 8

typedef struct _store_t store_t;

typedef enum {
    STORE_DURABILITY_NORMAL,  // synchronous = NORMAL: a power cut may lose the last commits
    STORE_DURABILITY_FULL     // synchronous = FULL: every commit survives a power cut
} store_durability_t;

// Pair states, as stored (numbers are part of the schema).
typedef enum {
    STORE_PENDING = 0,     // waiting for an agent
    STORE_DISPATCHED = 1,  // sent to an agent, no answer yet
    STORE_DONE = 2,        // one result recorded
    STORE_FAILED = 3,      // failed max_attempts times; 'error' says why
    STORE_SKIPPED = 4      // left out by sampling; can be backfilled
} store_state_t;

// A store_t belongs to one thread (SQLite is opened without its mutexes).

// Opens (creating if absent) the database at 'path' and brings its schema
// to STORE_SCHEMA_VERSION. Refuses, with err naming the file, a file that
// is not a pivfarm database, is corrupt or truncated, or has a newer schema:
// it never recreates or overwrites one. Only one store_new at a time per
// database, across processes: it first takes an exclusive lock on
// '<path>.lock' (which records its pid) and, when another holds it,
// fails naming the file and that pid, having read and written nothing.
// The lock file also records the store's life: "open" while a broker has
// it, "closed" after a clean stop, "lost: why" once store_detach stopped
// it. From that record store_new refuses, saying what to do, a store that
// was in use and is gone (the database missing beside a lock file), one
// detached while a broker ran, and one whose WAL is missing after a broker
// that did not stop cleanly; removing the lock file is the operator's way
// to say "start anyway". Readers (store_open_readonly) ignore the lock.
// NULL on failure.
store_t *store_new (const char *path, store_durability_t durability, char *err, size_t errlen);
// How store_new_with opens the store.
typedef struct {
    store_durability_t durability;
    // Before a migration of a store that holds a schema (version >= 1),
    // copy it to '<path>.v<A>.bak' (A its version) with the backup API and
    // verify the copy, before the migration's transaction; a copy that
    // fails (the file there already, no room) fails the open with the
    // store as it was. store_new does (1).
    int backup_before_migrate;
    // Called with each line worth the operator's log (the backup made,
    // each step "from version A to B"), or NULL.
    void (*note) (void *arg, const char *line);
    void *arg;
} store_options_t;
// store_new with its options.
store_t *store_new_with (const char *path, const store_options_t *options, char *err,
                         size_t errlen);
// Read-only access for readers (the status page, pivctl): never blocks the
// writer (WAL), never writes. NULL with err on failure.
store_t *store_open_readonly (const char *path, char *err, size_t errlen);
// Commits what is pending, then closes.
void store_destroy (store_t **self_p);

// Whether store_new made the database (no file was at its path, and no
// lock file beside it said a store had been there): a first start.
int store_created (store_t *self);
// Whether it opened the copy a broker saved of its store (store_rescue_*)
// once an operator had moved it to the store's path.
int store_restored (store_t *self);

// Commits the open transaction, if any. 0, or -1 with err (disk full, I/O
// error: the transaction is rolled back and nothing of it was committed).
// A write that fails in the middle of a group rolls the whole group back;
// every later write is then refused until store_commit has reported the
// loss with -1, so that nothing lost can be acknowledged.
int store_commit (store_t *self, char *err, size_t errlen);
// Number of writes since the last commit.
int store_uncommitted (store_t *self);
// The last error of this store, one line.
const char *store_error (store_t *self);

// ---------------------------------------------------------------------------
// The store under faults: another process holding it, its files taken
// away (doc/storage.md, "The store's own files").

// Opens the group's transaction now, taking SQLite's write lock, and keeps
// it open until store_commit even if no write follows: a caller that
// opens it before handling a batch of messages is sure that no write of
// the batch finds the store locked by another process half way through.
// Never waits for the lock (after store_new): 0, or -1 when another
// process holds it (store_busy_since then says since when) or the store
// is detached (store_detached).
int store_begin (store_t *self);
// Whether the group's transaction is open (store_begin, or a write since
// the last commit).
int store_in_group (store_t *self);
// When the write lock was first found held by another process, in the
// run of failed attempts that has not ended yet (CLOCK_REALTIME ns); 0
// when the last attempt got it. A write that finds it held fails at once,
// having changed nothing, with "'X' is locked by another process".
int64_t store_busy_since (store_t *self);
// How many times since store_new the writer found the database locked by
// another process (SQLITE_BUSY: a BEGIN that failed, or a statement that
// waited in the busy handler), each wait counted once.
int64_t store_busy_count (store_t *self);

// Dispatches taken while another process held the write lock: a
// store_pair_dispatch that finds the store locked reads the pair (readers
// are never blocked), gives it its next attempt number, and keeps the
// write in memory (at most STORE_DEFERRED_MAX) to make it first thing once
// the group can be opened again (store_begin or the next write). A crash
// before then loses the record, not the pair: the store has it pending,
// and the agent's result is taken as a recovered attempt.
#define STORE_DEFERRED_MAX 65536
// The dispatches waiting for the write lock.
int store_deferred (store_t *self);

// Whether the files SQLite has open are still the ones at the store's
// paths: the database, its WAL and its shared-memory file against what is
// named there now (an admin's rm or mv, a backup restored over it, a
// cleanup script), and the lock file. Costs a few stat calls. Returns 0
// when all are in place; 1 when a file of the store is gone or another
// file has its name, 'why' saying which and how ("'X-wal' was deleted");
// 2 when only the lock file had gone and was made again (and locked)
// at its path, 'why' saying so.
int store_check_files (store_t *self, char *why, size_t whylen);
// Stops every write of this handle for good: the open group is rolled
// back (the next store_commit reports it, so nothing of it is
// acknowledged), later writes are refused naming 'why', the close will
// neither checkpoint nor remove the WAL (its name may be another file's
// now), and the lock file records 'why' so that no broker starts on the
// path until an operator has chosen (store_new refuses it).
void store_detach (store_t *self, const char *why);
// Why the store was detached, or NULL.
const char *store_detached (store_t *self);
// Saves everything committed, read through the descriptors this handle
// still holds whatever became of the names, into a new database next to
// the store: '<path>.rescued-<UTC time>' (else in /var/tmp when the store's
// directory cannot take it), created never over an existing file, its
// name in 'dest'. Call store_rescue_step until it returns 1 (done) or -1
// (err); 0: more to copy. Each step copies at most 'pages' pages (4 KiB
// each), so that the reactor can serve between steps. On success the lock
// file names the copy.
int store_rescue_begin (store_t *self, char *dest, size_t destlen, char *err, size_t errlen);
int store_rescue_step (store_t *self, int pages, char *err, size_t errlen);

// Experiment id for 'name', created (with an event) if new; -1 on error.
int64_t store_experiment (store_t *self, const char *name, int64_t now_ns);

// What store_file_add made of a file event.
#define STORE_FILE_SAME 0     // a resend: same experiment, name, size and mtime
#define STORE_FILE_NEW 1      // a new file
#define STORE_FILE_CHANGED 2  // a new version of a recorded name: another size or mtime

// Records a complete file of an experiment; *version says which of
// STORE_FILE_* it was. A new version replaces the row's size, mtime and
// time seen (the id stays), with a "file-changed" event giving the old and
// new figures. Returns the file id, or -1 on error.
int64_t store_file_add (store_t *self, int64_t experiment, const char *name, int64_t size,
                        int64_t mtime_ns, int64_t seen_ns, int *version);

// Records a pair (state PENDING) of files file_b may be 0 for a multipage
// file). 'stem' names the pair within its experiment; a pair with the same
// stem is not added again (*is_new 0). Returns the pair id or -1.
int64_t store_pair_add (store_t *self, int64_t experiment, const char *stem, int64_t file_a,
                        int64_t file_b, int64_t now_ns, int *is_new);
// The same for a set of frames: files[0], [1] A and B as store_pair_add's;
// files[2], [3] a stereo set's camera 2 A and B (0, 0 for a pair).
int64_t store_pair_add_set (store_t *self, int64_t experiment, const char *stem,
                            const int64_t files[4], int64_t now_ns, int *is_new);
// The frames of a stereo set's camera 2 (C, D: names relative to the
// experiment, allocated, the caller frees): 1 with them; 0 for a pair of
// two frames (NULLs); -1 on a read error (store_error).
int store_pair_more (store_t *self, int64_t pair, char **name_c, char **name_d);

// PENDING -> DISPATCHED to 'agent', attempts + 1; returns the attempt number
// or -1 (error, or the pair is not PENDING any more).
int store_pair_dispatch (store_t *self, int64_t pair, const char *agent, int64_t now_ns);
// When the last frame of 'pair' was closed: the modification time the
// store recorded for it (file_b, or file_a for a multipage file); 0 when
// unknown (no such pair, or no time recorded); -1 on a read error
// (store_error).
int64_t store_pair_closed (store_t *self, int64_t pair);
// The agent attempt 'attempt' of 'pair' was dispatched to, into out: 1;
// 0 when the store has no such attempt; -1 on a read error (store_error).
int store_attempt_agent (store_t *self, int64_t pair, int attempt, char *out, size_t size);

// Summary figures of a result.
typedef struct {
    double mean_u, mean_v;     // px
    double mean_speed;         // px
    double valid_fraction;     // 0..1
    double vorticity;          // mean, 1/frame
    int nx, ny;                // grid
    int64_t compute_ns;        // time the agent spent
    const char *path;          // where the agent wrote the txt file
    const void *field;         // the vector field (common/proto field encoding), may be NULL
    size_t field_size;         // its bytes
    const char *settings;      // the PIV settings its task carried, or NULL: not known
} store_result_t;

// Records the result of 'pair' from 'agent' (attempt 'attempt'): the first
// result wins; a later one is ignored (*recorded 0, a "duplicate" event).
// Any state but DONE -> DONE (a late result after a requeue, or after the
// pair failed, is a result all the same). 0 or -1.
// Whether the field BLOB is kept follows store_set_fields.
int store_pair_result (store_t *self, int64_t pair, int attempt, const char *agent,
                       const store_result_t *result, int64_t now_ns, int *recorded);

// A failed attempt: back to PENDING, or FAILED with 'error' once attempts
// reach max_attempts (*failed 1). Only the attempt in flight moves the pair;
// the failure of an older attempt, or of a pair already DONE, is recorded
// and changes nothing. 0 or -1.
int store_pair_failure (store_t *self, int64_t pair, int attempt, const char *agent,
                        const char *error, int max_attempts, int64_t now_ns, int *failed);

// DISPATCHED -> PENDING for a benign 'reason' (a restart, a polite
// disconnect, a task not delivered): no loss counted. A pair in another
// state is left as it is. 0, or -1 for an unknown pair or an error.
int store_pair_requeue (store_t *self, int64_t pair, const char *reason, int64_t now_ns);
// Attempt 'attempt' of 'pair' lost: its agent is presumed dead, or its
// deadline passed ('reason' says which, on which agent). DISPATCHED ->
// PENDING with the pair's losses counted (a "requeue" event with lost=N);
// at max_attempts losses -> FAILED with the error "agent lost N times on
// this pair (last: <reason>)" (*failed 1). Anything but the attempt in
// flight is left as it is. 0 or -1.
int store_pair_lost (store_t *self, int64_t pair, int attempt, const char *reason,
                     int max_attempts, int64_t now_ns, int *failed);
// The agent holding attempt 'attempt' cannot do it now ('text': its
// results disk is full): DISPATCHED -> PENDING, the attempt not counted
// against max_attempts (its number is not given again), a "defer" event
// (*deferred 1). Anything but the attempt in flight is left as it is
// (*deferred 0). 0 or -1.
int store_pair_defer (store_t *self, int64_t pair, int attempt, const char *agent,
                      const char *text, int64_t now_ns, int *deferred);
// Every DISPATCHED pair -> PENDING (start-up after a crash); returns how many
// or -1.
int store_requeue_all (store_t *self, int64_t now_ns);

// Listings call fn in batches read ahead, so fn may write to the store
// (rows added meanwhile are not listed); fn returning non-zero stops the
// listing.

// Calls fn for every pair in 'state', oldest first (id order), with the
// paths the agent needs. Returns the number of calls or -1.
typedef int (store_pair_fn) (void *arg, int64_t pair, const char *experiment, const char *stem,
                             const char *name_a, const char *name_b, int attempts);
int store_pairs_in_state (store_t *self, store_state_t state, store_pair_fn *fn, void *arg);

// After a new version of 'file' (of 'experiment'): each of its FAILED pairs
// -> PENDING, attempts and losses counted afresh as a retry does (a "pair"
// event 'retry file=ID'), fn called for it (as store_pairs_reset: attempts
// 0, fn may write) for the caller to queue it; each DONE pair is kept, with
// a "file-rewritten" event, and counted in *done. Pending and dispatched
// pairs are left alone (their agent reads the file as it is now). Costs a
// scan of the experiment's pairs when the file is in one. Returns the pairs
// moved (*done not counted), or -1.
int store_file_retry (store_t *self, int64_t experiment, int64_t file, int64_t now_ns,
                      store_pair_fn *fn, void *arg, int *done);

// Calls fn for every file of every experiment, in arrival order (the broker
// offers them to its pairing rules again after a restart). Returns the
// number of calls or -1.
typedef int (store_file_fn) (void *arg, const char *experiment, const char *name, int64_t file);
int store_files (store_t *self, store_file_fn *fn, void *arg);
// The same for the files in fewer than 'pairs_per_file' pairs (1 for the
// rules that use a file once, 2 for sliding pairs): what the pairing rules
// still wait for. Its cost follows the files waiting, not the history.
int store_files_waiting (store_t *self, int pairs_per_file, store_file_fn *fn, void *arg);

// Per experiment: pair counts by state. Returns the number of experiments
// or -1.
typedef struct {
    const char *name;  // experiment
    int64_t created_ns;  // when it was created
    int64_t files;     // files recorded
    int64_t pairs[5];  // indexed by store_state_t
} store_counts_t;
typedef int (store_counts_fn) (void *arg, const store_counts_t *counts);
int store_counts (store_t *self, store_counts_fn *fn, void *arg);

// Agents: seen (insert or update host, cores, capabilities, last seen).
int store_agent_seen (store_t *self, const char *agent, const char *host, int cores,
                      const char *capabilities, int64_t now_ns);
// Agent 'agent' is still there (connected: its heartbeats write nothing):
// its last seen moves to now_ns; a name without a row changes nothing. 0,
// or -1 with the error.
int store_agent_touch (store_t *self, const char *agent, int64_t now_ns);
// Forgets the agents last seen before 'before_ns': their rows go (the
// attempts and results they made keep their names), with one
// 'agents-forgotten' event naming them. Their names, quoted and
// comma-separated, in 'names' (cut to its size with "..."; "" when none).
// Returns how many went, or -1 with the error (none went).
int store_agents_forget (store_t *self, int64_t before_ns, int64_t now_ns, char *names,
                         size_t size);

// Appends an event to the log (kinds: "file", "pair", "dispatch", "result",
// "failure", "requeue", "agent", "setting", ...; payload free text, usually
// key=value pairs). The store logs every state change itself; callers add
// what only they know. Returns the event id or -1.
int64_t store_event (store_t *self, const char *kind, int64_t experiment, int64_t pair,
                     const char *payload, int64_t now_ns);
// Calls fn for each event of 'experiment' (0: all) with id > after, in
// order. Returns the number of calls or -1.
typedef int (store_event_fn) (void *arg, int64_t id, int64_t ts_ns, const char *kind,
                              int64_t experiment, int64_t pair, const char *payload);
int store_events (store_t *self, int64_t experiment, int64_t after, store_event_fn *fn, void *arg);


// ---------------------------------------------------------------------------
// Operating a run (schema 2; doc/control.md)

// An experiment: 'source' is the directory under the watch root that holds
// its files (its own name, except for a replay, which reads the files of
// the experiment it replays); 'settings' the PIV settings its tasks carry
// instead of the configured ones ("" for the configured ones).
typedef struct {
    int64_t id;
    const char *name;
    const char *source;
    const char *settings;
    int64_t created_ns;
} store_experiment_t;

// Creates experiment 'name' (an "experiment" event); -1 when the name is
// taken (store_error says so, naming it) or on error. 'source' NULL, "" or
// 'name' itself: its own files; 'settings' NULL: "".
int64_t store_experiment_create (store_t *self, const char *name, const char *source,
                                 const char *settings, int64_t now_ns);
// Gives experiment 'id', made by an operator's command before any file of
// its own (calibrate, mask...), the source and settings of a replay (an
// "experiment" event as store_experiment_create's). -1 when it has files
// (store_error says so, naming it) or on error.
int store_experiment_adopt (store_t *self, int64_t id, const char *name, const char *source,
                            const char *settings, int64_t now_ns);
// Looks 'name' up: 1 found (*out filled; its strings last until the next
// call on this store), 0 unknown, -1 error.
int store_experiment_find (store_t *self, const char *name, store_experiment_t *out);
// Calls fn for each experiment, id order (a listing: fn may write). Returns
// the count or -1.
typedef int (store_experiment_fn) (void *arg, const store_experiment_t *experiment);
int store_experiments (store_t *self, store_experiment_fn *fn, void *arg);

// A pair as listed by pivctl. closed_ns: modification time of its last
// frame (when the camera closed it); 0 for times not reached yet.
typedef struct {
    int64_t pair;
    const char *stem;
    int state;           // store_state_t
    int attempts;        // since it was created or last retried
    const char *agent;   // "" if never dispatched
    const char *error;   // its last error ("" if none, or retried since)
    int64_t created_ns, dispatched_ns, finished_ns, closed_ns;
} store_pair_info_t;
typedef int (store_pair_info_fn) (void *arg, const store_pair_info_t *pair);
// Pairs of 'experiment' with id > after, id order, in 'state' (-1: any), at
// most 'limit' (0: all); a listing (fn may write). It reads the pairs of
// every experiment from 'after' on until it has 'limit' (no index by
// experiment on the hot insert path: some 8 M pairs/s). Returns the count
// or -1.
int store_pairs_of (store_t *self, int64_t experiment, int state, int64_t after, int limit,
                    store_pair_info_fn *fn, void *arg);

// Every pair of 'experiment' in state 'from' (FAILED: retry, attempts
// counted afresh and error cleared; SKIPPED: backfill) -> PENDING, with an
// event each; fn is called for each pair moved (as store_pairs_in_state,
// attempts 0 after a retry; fn may write) so the caller can queue it.
// Attempt numbers go on after a retry (its next dispatch after 3 attempts
// is attempt 4), so that an answer to an attempt from before the retry is
// never taken for a later one. Returns how many (each counts as a write),
// or -1: error, or 'from' neither FAILED nor SKIPPED.
int store_pairs_reset (store_t *self, int64_t experiment, store_state_t from, int64_t now_ns,
                       store_pair_fn *fn, void *arg);
// PENDING -> SKIPPED (sampling), with an event. 0, or -1 (error, or not
// PENDING).
int store_pair_skip (store_t *self, int64_t pair, int64_t now_ns);

// Settings of the control channel: (experiment, key) -> value; experiment 0
// is the global default. value NULL removes the setting. Each change is a
// "setting" event 'key=value' (or 'key' alone for a removal; removing
// what is not set changes nothing and logs nothing). 0 or -1.
int store_setting_set (store_t *self, int64_t experiment, const char *key, const char *value,
                       int64_t now_ns);
typedef int (store_setting_fn) (void *arg, int64_t experiment, const char *key,
                                const char *value);
// Calls fn for every setting in (experiment, key) order (a listing: fn may
// write; a setting it adds after the one it is given is listed too).
// Returns the count or -1.
int store_settings (store_t *self, store_setting_fn *fn, void *arg);

// The files of 'experiment' in arrival order (what a replay re-emits); a
// listing (fn may write). Returns the count or -1.
typedef int (store_file_info_fn) (void *arg, int64_t file, const char *name, int64_t size,
                                  int64_t mtime_ns, int64_t seen_ns);
int store_files_of (store_t *self, int64_t experiment, store_file_info_fn *fn, void *arg);

// The results of 'experiment', pair id order, with their field when kept
// (field NULL, field_size 0 otherwise); for export and replay comparison.
// dispatched_ns is when the attempt that gave the result was sent. Fields
// are too large to read ahead: fn is called as rows are read, its strings
// and field last until it returns, and it must not write to this store
// (writes fail until the listing ends). Returns the count or -1.
typedef struct {
    int64_t pair;
    const char *stem;
    int attempt;
    const char *agent;
    double mean_u, mean_v, mean_speed, valid_fraction, vorticity;
    int nx, ny;
    int64_t compute_ns;
    const char *path;
    const void *field;
    size_t field_size;
    int64_t closed_ns, dispatched_ns, recorded_ns;
    const char *settings;      // the PIV settings it was made with ("": not known)
} store_result_info_t;
typedef int (store_result_info_fn) (void *arg, const store_result_info_t *result);
int store_results_of (store_t *self, int64_t experiment, store_result_info_fn *fn, void *arg);

// The latest result of 'experiment' with a stored field (fn called once),
// as store_results_of; returns 1, 0 if there is none, or -1.
int store_result_latest (store_t *self, int64_t experiment, store_result_info_fn *fn, void *arg);

// The id of the last event (0: an empty log), or -1.
int64_t store_event_last (store_t *self);

// The agents ever seen, by name. fn must not write to the store.
typedef int (store_agent_fn) (void *arg, const char *name, const char *host, int cores,
                              const char *capabilities, int64_t first_seen_ns,
                              int64_t last_seen_ns);
int store_agents (store_t *self, store_agent_fn *fn, void *arg);

// Events of 'experiment' (0: all) of one 'kind' (e.g. "feedback"), id
// order; a listing (fn may write). It reads the whole log (no index on the
// hot insert path: some 10 M events/s), which a replay can afford. Returns
// the count or -1.
int store_events_of_kind (store_t *self, int64_t experiment, const char *kind,
                          store_event_fn *fn, void *arg);

// Which result fields are kept: every (1), none (0), or every n-th result
// (n > 1). Summary figures are always kept.
void store_set_fields (store_t *self, int every);

// ---------------------------------------------------------------------------
// The storage lifecycle (schema 3; doc/storage.md)

// Fast space held for an experiment: a RAM disk ("tmpfs") or a directory
// ("dir") at 'path', 'size_bytes' large, until expires_ns; state "active",
// or "releasing" while it is archived before it goes.
typedef struct {
    int64_t id;
    int64_t experiment;
    const char *name;   // the experiment's
    const char *kind;
    const char *path;
    int64_t size_bytes, created_ns, expires_ns;
    const char *state;
} store_allocation_t;
// Records a new active allocation (an "allocation" event). Its id or -1.
int64_t store_allocation_add (store_t *self, int64_t experiment, const char *kind,
                              const char *path, int64_t size_bytes, int64_t expires_ns,
                              int64_t now_ns);
// Moves allocation 'id' (of 'experiment', for its event) to 'state'
// ("active", "releasing" or "released": no longer listed). 0 or -1.
int store_allocation_state (store_t *self, int64_t id, int64_t experiment, const char *state,
                            int64_t now_ns);
// Calls fn for every allocation not released, id order; fn must not write
// (the table is small and read in one statement). The count or -1.
typedef int (store_allocation_fn) (void *arg, const store_allocation_t *allocation);
int store_allocations (store_t *self, store_allocation_fn *fn, void *arg);

// Records that file 'file' (of 'experiment') now lives at 'location' (an
// absolute path), its content checksummed 'sha256' (64 hex digits); an
// "archived" event. 0 or -1.
int store_file_archived (store_t *self, int64_t file, int64_t experiment, const char *sha256,
                         const char *location, int64_t now_ns);
// Where file 'name' of 'experiment' lives once archived: 1 with its path in
// out, 0 when it is at its source (or unknown), -1 on error.
int store_file_location (store_t *self, int64_t experiment, const char *name, char *out,
                         size_t size);
// The files of 'experiment' with their checksum and location (NULL when
// not archived), id order; a listing (fn may write). The count or -1.
typedef struct {
    int64_t file;
    const char *name;
    int64_t size;
    const char *sha256;    // NULL: none recorded
    const char *location;  // NULL: at its source
} store_file_stored_t;
typedef int (store_file_stored_fn) (void *arg, const store_file_stored_t *file);
int store_files_stored (store_t *self, int64_t experiment, store_file_stored_fn *fn, void *arg);
// When the last file of 'experiment' arrived (0: none), or -1.
int64_t store_file_last_seen (store_t *self, int64_t experiment);

// ---------------------------------------------------------------------------
// Run statistics (schema 5; doc/units.md)

// The statistics of a run are kept by the broker in memory and saved here
// as checkpoints: one row per (experiment, set), a set being the results
// on one grid under one PIV settings and one calibration. 'state' is
// piv_stats_encode's bytes (the store does not read them). Exactly once:
// a result is "uncounted" from its recording until a checkpoint counts it;
// a checkpoint marks the results it counts in the same transaction, so
// after a crash the results not marked are the ones to add again
// (store_results_uncounted).
typedef struct {
    int64_t experiment;
    const char *set;          // its key: grid, settings and calibration, one line
    const char *settings;     // the PIV settings text of its results
    const char *calibration;  // piv_calib_format's text in force ("none")
    int64_t fields;           // fields counted
    int64_t first_pair, last_pair;  // pair ids of its first and latest counted result
    const void *state;        // piv_stats_encode's bytes
    size_t state_size;
    int64_t updated_ns;       // saved when
} store_stats_t;

// Saves (inserts or replaces) the row of stats->set for stats->experiment,
// then marks pairs[0 .. npairs - 1] (results of that experiment) counted;
// one group of writes. stats->set NULL saves no row and only marks (the
// results whose field the store did not keep, which no set can count).
// 0 or -1.
int store_stats_save (store_t *self, const store_stats_t *stats, const int64_t *pairs,
                      size_t npairs, int64_t now_ns);
// Calls fn for each saved set of 'experiment' (0: every experiment), in
// (experiment, first_pair) order; strings and state last until fn returns;
// fn must not write. Returns the count or -1.
typedef int (store_stats_fn) (void *arg, const store_stats_t *stats);
int store_stats_of (store_t *self, int64_t experiment, store_stats_fn *fn, void *arg);
// Results of 'experiment' (0: all) not counted in saved statistics, of
// pairs after 'after' (0: all; a rebuild goes on where its last slice
// ended), pair order, as store_results_of (fn must not write; field NULL
// when the store did not keep it). Returns the count or -1.
int store_results_uncounted (store_t *self, int64_t experiment, int64_t after,
                             store_result_info_fn *fn, void *arg);
// Removes the saved statistics of 'experiment' and marks its results not
// counted (a rebuild from scratch). 0 or -1.
int store_stats_clear (store_t *self, int64_t experiment, int64_t now_ns);

// ---------------------------------------------------------------------------
// Ensemble correlation jobs (store/ensemble.c, doc/storage.md)

// A job as stored. Strings and blobs are owned by the record
// (store_ensemble_release frees them).
typedef struct {
    int64_t id, experiment;
    int window, overlap;       // the last pass's windows, px, and their overlap, %
    char *asked;               // the pairs asked for, as the operator wrote them ("" : done)
    char *settings;            // the PIV settings it runs with
    int chunk, passes, pass;   // pairs a chunk, its passes, the pass under way (0-based)
    int64_t pairs;             // pairs it sums
    int64_t counted;           // done: the pairs its last pass's merged sums counted (-1: not done)
    char state[16];            // running, done or failed
    char *error;               // why it failed, or NULL
    unsigned char *field;      // done: the ensemble field (piv_field_encode), else NULL
    size_t field_size;
    unsigned char *stress;     // done: u'u', v'v', u'v' (3 nx ny little-endian floats, px^2)
    size_t stress_size;
    int64_t created_ns, finished_ns;
} store_ensemble_t;
void store_ensemble_release (store_ensemble_t *job);

// A new running job over 'pairs' (in that order), pass 0. Its id, or -1.
int64_t store_ensemble_new (store_t *self, const store_ensemble_t *job, const int64_t *pairs,
                            size_t npairs, int64_t now_ns);
// Records the partial sum of (job, pass, chunk) computed by 'agent' over
// 'pairs' pairs, unless one is recorded already: *recorded 1 if this one
// was, 0 if it was a duplicate (dropped). 0 or -1.
int store_ensemble_partial (store_t *self, int64_t job, int pass, int chunk, int64_t pairs,
                            const char *agent, const void *partial, size_t size,
                            int64_t now_ns, int *recorded);
// The partial of (job, pass, chunk), malloc'd into *buf_p (NULL, 0 when
// there is none). 0 or -1.
int store_ensemble_partial_get (store_t *self, int64_t job, int pass, int chunk,
                                unsigned char **buf_p, size_t *size_p);
// The job moves on to 'pass'. 0 or -1.
int store_ensemble_pass (store_t *self, int64_t job, int pass, int64_t now_ns);
// The job ends: done with its field and stresses and the pairs its merged
// sums counted, or failed with 'error'. 0 or -1.
int store_ensemble_end (store_t *self, int64_t job, const char *error, const void *field,
                        size_t field_size, const void *stress, size_t stress_size,
                        int64_t counted, int64_t now_ns);
// Running jobs left by a broker that stopped are marked failed with
// 'error' (they are run again by hand). The number marked, or -1.
int store_ensemble_abandon (store_t *self, const char *error, int64_t now_ns);
// The latest job of 'experiment' (done_only: the latest done). 1 with
// *job filled, 0 when there is none, -1 on error.
int store_ensemble_latest (store_t *self, int64_t experiment, int done_only,
                           store_ensemble_t *job);
// Calls fn for each pair of 'experiment' in id order: its id, state, its
// frames' names (b NULL for a multipage file) and whether it is a stereo
// set; fn returns 0 to go on. The count or -1.
typedef int (store_pair_frames_fn) (void *arg, int64_t pair, int state, const char *a,
                                    const char *b, int stereo);
int store_pair_frames (store_t *self, int64_t experiment, store_pair_frames_fn *fn, void *arg);

// ---------------------------------------------------------------------------
// Purging an experiment (store/operate.c, doc/storage.md)

// What keeps an experiment from being purged: its pairs waiting or out,
// its ensemble jobs running (the first's id), the experiments replaying
// it (the first's name).
typedef struct {
    int64_t pending, dispatched, ensembles, replays;
    char ensemble[32], replay[256];
} store_experiment_busy_t;
// Fills *out for experiment 'experiment' named 'name'. 0 or -1.
int store_experiment_busy (store_t *self, int64_t experiment, const char *name,
                           store_experiment_busy_t *out);

// Rows an experiment's purge removed, by table.
typedef struct {
    int64_t pairs, results, attempts, files, events, stats, settings, ensemble_jobs;
} store_purge_counts_t;
// Removes experiment 'experiment' ('name') and everything of it: its
// ensemble jobs with their pairs and partials, its results (and their
// 'uncounted' marks), attempts, statistics, allocations, settings,
// events, pairs, files and its row, with one "purge" event (experiment 0:
// its id may be given again) naming it with the counts; one transaction
// of its own, committed here (refused while the group's is open:
// store_commit first), foreign-key checks off for its length (it removes
// children first). The caller checks first that nothing runs
// (store_experiment_busy). 0 with *counts, or -1 with nothing removed.
int store_experiment_purge (store_t *self, int64_t experiment, const char *name, int64_t now_ns,
                            store_purge_counts_t *counts);

// What a VACUUM did: the database's bytes (pages x page size) before,
// of which free pages, and after; how long it took.
typedef struct {
    int64_t bytes_before, free_before, bytes_after;
    double seconds;
} store_vacuum_t;
// Rebuilds the database without its free pages (VACUUM), then
// checkpoints and truncates the WAL so that the file shrinks at once. The
// connection's thread waits for it, and other writers with it; it needs
// room for a copy of the database. Refused while the group's transaction
// is open (store_commit first). 0 with *out, or -1 with the error.
int store_vacuum (store_t *self, store_vacuum_t *out);

// ---------------------------------------------------------------------------
// Backups (store/backup.c, doc/storage.md)

typedef struct {
    int64_t bytes;   // the copy's size
    int64_t pages;   // pages copied
    int schema;      // its schema version
    double seconds;  // the copy and its check, wall-clock
} store_backup_info_t;
// Copies the store at 'path' into 'file' with SQLite's backup API, 'step'
// pages a step (0: 4096), calling stop(arg) (may be NULL) between steps:
// non-zero abandons the copy. A snapshot of what was committed when it
// began: a broker writing meanwhile is never blocked (WAL) and its commits
// do not restart the copy. 'file' must be absolute and must not exist; the
// copy is written as 'file.partial' (created here, never through a
// symbolic link), made a rollback-journal file, verified read-only
// (integrity_check ok, schema version STORE_SCHEMA_VERSION), then linked
// to 'file' (never over a file made meanwhile). Uses connections of its
// own: may run on any thread. 0 with *info, or -1 with err naming the file
// and what to do; then nothing is left at 'file' nor 'file.partial'.
int store_backup_file (const char *path, const char *file, int step, int (*stop) (void *arg),
                       void *arg, store_backup_info_t *info, char *err, size_t errlen);

// Failure seam for tests: after 'after' more statement executions, every
// execution fails with SQLite error 'code' (STORE_FAULT_*) until called
// again with code 0.
#define STORE_FAULT_BUSY 5     // SQLITE_BUSY
#define STORE_FAULT_IOERR 10   // SQLITE_IOERR
#define STORE_FAULT_FULL 13    // SQLITE_FULL
void store_test_fault (store_t *self, int code, int after);

#endif
