// internal.h — what the files of store/ share: the store's struct, its
// statements (prepared at open by schema.c, by st_stmt_id_t), the batches
// of the listings, and the helpers of tx.c (statements, errors, the group's
// transaction) and of the other files. Not for use outside store/. The st_
// prefix marks what is shared here; s_ stays file-local.

#ifndef STORE_INTERNAL_H
#define STORE_INTERNAL_H

#include "store/store.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// ---------------------------------------------------------------------------
// Statements: all prepared at open (schema.c: their text), reused for the
// life of the store.

// Rows per batch of the listing functions (see st_batch_t).
#define S_BATCH_ROWS 256

typedef enum {
    S_BEGIN,
    S_COMMIT,
    S_ROLLBACK,
    S_EXPERIMENT_GET,
    S_EXPERIMENT_ADD,
    S_EXPERIMENT_CREATE,
    S_EXPERIMENT_ADOPT,
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
    S_PAIR_MORE,
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
    S_AGENTS_UNSEEN,
    S_AGENTS_FORGET,
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
    S_UNCOUNTED_ADD,
    S_STATS_PUT,
    S_STATS_COUNT,
    S_STATS_OF,
    S_STATS_DELETE,
    S_STATS_UNCOUNT,
    S_RESULTS_UNCOUNTED,
    S_NSTMTS
} st_stmt_id_t;

// ---------------------------------------------------------------------------
// The store.

// A file of the store as it was opened (files.c): its name, a descriptor
// of our own on it, and its identity then.
typedef struct {
    char *name;    // its path (the database's as SQLite resolved it; "-wal", "-shm")
    int fd;        // our descriptor of it, -1 when not captured (yet)
    dev_t dev;     // its device and inode when captured
    ino_t ino;
} st_file_t;

// A dispatch made while another process held the write lock (write.c):
// written first thing once the group opens again.
typedef struct {
    int64_t pair, now_ns;
    int attempt;
    char *agent;
} st_deferred_t;

enum { ST_FILE_DB, ST_FILE_WAL, ST_FILE_SHM, ST_NFILES };

#define S_ERROR_MAX 1024    // bytes of an error line
#define S_PAYLOAD_MAX 8192  // bytes of an event payload made here (longer is cut)

struct _store_t {
    char *path;                        // the database file, as given
    int lock_fd;                       // <path>.lock, flock'd by store_new; -1 for readers
    sqlite3 *db;                       // the connection
    sqlite3_stmt *stmts[S_NSTMTS];     // prepared statements, by st_stmt_id_t
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
    int created;                       // store_new made the database (a first start)
    int restored;                      // store_new opened the copy a broker had saved
    int held;                          // store_begin opened the group: kept open until commit
    int nowait;                        // BEGIN fails at once when the write lock is held
    int in_begin;                      // a BEGIN runs (the busy handler does not wait then)
    int64_t busy_since_ns;             // the write lock held by another since (0: it was not)
    int64_t busy_count;                // times a BEGIN found it held, or a statement waited for a lock
    char *detached;                    // why writes stopped for good (store_detach), or NULL
    st_file_t files[ST_NFILES];        // the files as opened (store_check_files)
    st_deferred_t *deferred;           // dispatches waiting for the write lock
    int ndeferred, deferred_room;      // how many, room for
    sqlite3 *rescue_db;                // store_rescue_*: the copy being made
    sqlite3_backup *rescue;            // and the backup into it
    char *rescue_path;                 // its name
};

// ---------------------------------------------------------------------------
// Listings (read.c).

#define S_BATCH_INTS 8   // integer columns a batch holds per row, at most
#define S_BATCH_TEXTS 4  // text columns

typedef struct {
    int rows;                                     // rows held
    int64_t num[S_BATCH_ROWS][S_BATCH_INTS];      // integer columns, in order
    ptrdiff_t text[S_BATCH_ROWS][S_BATCH_TEXTS];  // text columns: offset in chars, -1 for NULL
    char *chars;                                  // the texts, each NUL-terminated
    size_t used, size;                            // bytes of chars used and allocated
} st_batch_t;

// Called for each row of a listing; returns non-zero to stop it. A row
// that fails sets *rc (an SQLite code) and is not counted.
typedef int (st_row_fn) (void *ctx, const st_batch_t *batch, int row, int *rc);

typedef struct {
    store_t *store;      // the store listed
    void *fn;            // the caller's callback (its type as the listing's)
    void *arg;           // and its argument
    int64_t value;       // what the listing needs besides (store_pairs_reset: from)
    int64_t experiment;  // store_pairs_reset: the experiment of its events
    int64_t now_ns;      // and their time
} st_list_t;

// ---------------------------------------------------------------------------
// tx.c: statements and errors. Contracts at the definitions.

// Formats into an error buffer, if there is one.
void st_errbuf (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// Sets the last error of the store.
void st_error (store_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// Runs one step of a statement through the fault seam; SQLite's code.
int st_step (store_t *self, sqlite3_stmt *stmt);
// Binds text or NULL.
void st_bind_text (sqlite3_stmt *stmt, int index, const char *text);
const char *st_column_text (sqlite3_stmt *stmt, int column);
// The writer's busy handler (see tx.c).
int st_busy (void *arg, int count);
// Ends the group's transaction without committing it.
void st_rollback (store_t *self);
// A failed statement: sets the error, undoes what it left half done; -1.
int st_vfail (store_t *self, int rc, int write, const char *fmt, va_list args);
int st_fail (store_t *self, int rc, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
int st_fail_read (store_t *self, int rc, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// A write call: begin (0 or -1), run statements with st_exec, then end
// with st_write_end, st_write_nothing or st_write_end_many.
int st_write_begin (store_t *self);
int st_exec (store_t *self, sqlite3_stmt *stmt);
int st_write_end (store_t *self);
void st_write_nothing (store_t *self);
int st_write_end_many (store_t *self, int count);
// Runs a query of one integer; SQLITE_OK or the error.
int st_query_int (store_t *self, sqlite3_stmt *stmt, int64_t *value, int *found);

// ---------------------------------------------------------------------------
// files.c: the store's files and the lock file's record.

// Captures the identity of the database, WAL and shm files as SQLite has
// them open (after store_new, and for a WAL made later); a file it cannot
// open is left uncaptured (and so unchecked).
void st_files_capture (store_t *self);
void st_files_release (store_t *self);
// Writes the lock file's record: "<pid>\n<state> <UTC time>[: text]\n".
void st_lock_record (store_t *self, const char *state, const char *text);
// Reads the record of the lock file at 'fd' into 'state' (its second
// line, "" when it has none).
void st_lock_read (int fd, char *state, size_t size);
// The rescue's end: closes the copy, and on failure removes it.
void st_rescue_end (store_t *self, int failed);

// ---------------------------------------------------------------------------
// backup.c

// Copies the open store (schema 'version', before its migration) into
// '<path>.v<version>.bak' (its name in file), as store_backup_file does.
// 0, or -1 with err.
int st_backup_before_migration (store_t *self, int version, char *file, size_t size, char *err,
                                size_t errlen);

// ---------------------------------------------------------------------------
// write.c

// Appends an event to the current write call; its id, or -1 with *rc.
int64_t st_event (store_t *self, int *rc, const char *kind, int64_t experiment, int64_t pair,
                  int64_t now_ns, const char *fmt, ...) __attribute__ ((format (printf, 7, 8)));
// Writes the dispatches kept while the store was locked (the group has
// just opened); those that no longer apply are dropped.
void st_deferred_apply (store_t *self);
void st_deferred_free (store_t *self);
// Reads a pair that must be PENDING for 'what': its experiment and the
// number of its last attempt; 0, or -1 with the error set.
int st_pair_pending (store_t *self, int64_t pair, const char *what, int64_t *experiment,
                     int *last);

// ---------------------------------------------------------------------------
// read.c

// The text of a batch's row and text column, NULL for NULL.
const char *st_batch_text (const st_batch_t *batch, int row, int column);
// Steps a bound statement into a batch: its rows, or -1 with *rc.
int st_batch_fill (store_t *self, sqlite3_stmt *stmt, const char *columns, st_batch_t *batch,
                   int *rc);
// Streams the results of a bound statement (S_RESULT_COLUMNS' columns;
// ?1 the experiment) to fn, writes refused meanwhile: the count or -1.
int st_results (store_t *self, sqlite3_stmt *stmt, int64_t experiment, store_result_info_fn *fn,
                void *arg);
// A listing by id in batches: the rows counted, or -1 with *rc.
int st_list (store_t *self, st_stmt_id_t max_id, st_stmt_id_t which, const char *columns,
             int64_t after, int limit, st_row_fn *row_fn, void *ctx, int *rc);

#endif
