// test_store.c — the SQLite store on real files: the pair state machine,
// deduplication, group commit, crashes and full disks, readers beside the
// writer, files that are not ours, and the event log a replay reads.

#include "store/store.h"
#include "tests/testutil.h"

#include <check.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define T_MS 1000000LL  // ns

static char s_dir[4096];  // this test's temporary directory

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "%s", tu_tmpdir ());
}

static void
s_teardown (void)
{
    tu_rmtree (s_dir);
}

static const char *
s_db (void)
{
    return tu_path (s_dir, "pivfarm.db");
}

// A path beside the store, in its own buffer.
static const char *
s_beside (const char *suffix)
{
    static char path[4][4200];
    static int next;
    char *p = path[next++ % 4];
    snprintf (p, sizeof path[0], "%s%s", s_db (), suffix);
    return p;
}

static store_t *
s_open (void)
{
    char err[512] = "";
    store_t *store = store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    return store;
}

static void
s_commit (store_t *store)
{
    char err[512] = "";
    ck_assert_msg (store_commit (store, err, sizeof err) == 0, "%s", err);
}

static int64_t
s_experiment (store_t *store, const char *name)
{
    int64_t id = store_experiment (store, name, 1 * T_MS);
    ck_assert_msg (id > 0, "%s", store_error (store));
    return id;
}

static int64_t
s_file (store_t *store, int64_t experiment, const char *name, int64_t now)
{
    int is_new;
    int64_t id = store_file_add (store, experiment, name, 1000, now - T_MS, now, &is_new);
    ck_assert_msg (id > 0, "%s", store_error (store));
    return id;
}

// Adds '<stem>_a.tif', '<stem>_b.tif' and their pair; returns the pair.
static int64_t
s_pair (store_t *store, int64_t experiment, const char *stem, int64_t now)
{
    char a[256], b[256];
    snprintf (a, sizeof a, "%s_a.tif", stem);
    snprintf (b, sizeof b, "%s_b.tif", stem);
    int64_t fa = s_file (store, experiment, a, now);
    int64_t fb = s_file (store, experiment, b, now);
    int is_new;
    int64_t pair = store_pair_add (store, experiment, stem, fa, fb, now, &is_new);
    ck_assert_msg (pair > 0, "%s", store_error (store));
    ck_assert (is_new);
    return pair;
}

// Adds the pairs f000 .. f<n-1>, the i-th at (i + 2) ms.
static void
s_pairs_add (store_t *store, int64_t experiment, int n)
{
    for (int i = 0; i < n; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        s_pair (store, experiment, stem, (i + 2) * T_MS);
    }
}

static int
s_dispatch (store_t *store, int64_t pair, const char *agent)
{
    int attempt = store_pair_dispatch (store, pair, agent, 10 * T_MS);
    ck_assert_msg (attempt > 0, "%s", store_error (store));
    return attempt;
}

static store_result_t
s_result (const void *field, size_t size)
{
    store_result_t result = {0.5, -0.25, 0.56, 0.98, 0.001, 63, 63, 40 * T_MS, "/r/x.txt",
                             field, size, NULL};
    return result;
}

// ---------------------------------------------------------------------------
// Collectors of the listing callbacks.

#define T_MAX 1024

// A listing returned as many calls as its callback counted.
static void
s_listed (store_t *store, int calls, int listed)
{
    ck_assert_msg (calls == listed, "%d calls, %d listed: %s", calls, listed,
                   store_error (store));
}

typedef struct {
    int n;
    int stop_after;  // stop the listing after this many (0: never)
    int64_t id[T_MAX];
    int attempts[T_MAX];
    char experiment[T_MAX][32], stem[T_MAX][32], a[T_MAX][32], b[T_MAX][32];
} s_pairs_t;

static int
s_pairs_fn (void *arg, int64_t pair, const char *experiment, const char *stem,
            const char *name_a, const char *name_b, int attempts)
{
    s_pairs_t *pairs = arg;
    ck_assert_int_lt (pairs->n, T_MAX);
    int k = pairs->n++;
    pairs->id[k] = pair;
    pairs->attempts[k] = attempts;
    snprintf (pairs->experiment[k], 32, "%s", experiment);
    snprintf (pairs->stem[k], 32, "%s", stem);
    snprintf (pairs->a[k], 32, "%s", name_a);
    snprintf (pairs->b[k], 32, "%s", name_b ? name_b : "(none)");
    return pairs->stop_after && pairs->n >= pairs->stop_after;
}

static s_pairs_t *
s_pairs (store_t *store, store_state_t state)
{
    static s_pairs_t pairs;
    memset (&pairs, 0, sizeof pairs);
    int calls = store_pairs_in_state (store, state, s_pairs_fn, &pairs);
    s_listed (store, calls, pairs.n);
    return &pairs;
}

typedef struct {
    int n;
    int64_t id[T_MAX], ts[T_MAX], experiment[T_MAX], pair[T_MAX];
    char kind[T_MAX][24], payload[T_MAX][160];
} s_events_t;

static int
s_events_fn (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
             int64_t pair, const char *payload)
{
    s_events_t *events = arg;
    ck_assert_int_lt (events->n, T_MAX);
    int k = events->n++;
    events->id[k] = id;
    events->ts[k] = ts_ns;
    events->experiment[k] = experiment;
    events->pair[k] = pair;
    snprintf (events->kind[k], sizeof events->kind[k], "%s", kind);
    snprintf (events->payload[k], 160, "%s", payload);
    return 0;
}

static s_events_t *
s_events (store_t *store, int64_t experiment, int64_t after)
{
    static s_events_t events;
    memset (&events, 0, sizeof events);
    int calls = store_events (store, experiment, after, s_events_fn, &events);
    s_listed (store, calls, events.n);
    return &events;
}

// How many events of 'kind' the log holds.
static int
s_count_kind (store_t *store, const char *kind)
{
    s_events_t *events = s_events (store, 0, 0);
    int n = 0;
    for (int k = 0; k < events->n; k++)
        n += strcmp (events->kind[k], kind) == 0;
    return n;
}

// The last event of 'kind'.
static const char *
s_last_payload (store_t *store, const char *kind)
{
    s_events_t *events = s_events (store, 0, 0);
    for (int k = events->n - 1; k >= 0; k--)
        if (strcmp (events->kind[k], kind) == 0)
            return events->payload[k];
    ck_abort_msg ("no '%s' event", kind);
    return NULL;
}

typedef struct {
    int n;
    char name[8][32];
    int64_t files[8];
    int64_t pairs[8][5];
} s_counts_t;

static int
s_counts_fn (void *arg, const store_counts_t *counts)
{
    s_counts_t *all = arg;
    ck_assert_int_lt (all->n, 8);
    int k = all->n++;
    snprintf (all->name[k], 32, "%s", counts->name);
    all->files[k] = counts->files;
    memcpy (all->pairs[k], counts->pairs, sizeof counts->pairs);
    return 0;
}

// Pairs of the first experiment in 'state'.
static int64_t
s_count (store_t *store, store_state_t state)
{
    s_counts_t counts = {0};
    ck_assert_msg (store_counts (store, s_counts_fn, &counts) >= 1, "%s", store_error (store));
    return counts.pairs[0][state];
}

static int
s_file_fn (void *arg, const char *experiment, const char *name, int64_t file)
{
    (void) experiment, (void) name, (void) file;
    (*(int *) arg)++;
    return 0;
}

static int
s_file_count (store_t *store)
{
    int n = 0;
    ck_assert_int_ge (store_files (store, s_file_fn, &n), 0);
    return n;
}

// Reads the database file; the caller frees.
static char *
s_slurp_db (size_t *len)
{
    char *data = tu_slurp (s_db (), len);
    ck_assert_msg (data != NULL, "cannot read '%s'", s_db ());
    return data;
}

// Writes a database of 'n' pairs and closes it.
static void
s_make_db (int n)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    for (int i = 0; i < n; i++) {
        char stem[64];
        snprintf (stem, sizeof stem, "frame-with-a-rather-long-name-%05d", i);
        s_pair (store, experiment, stem, (i + 2) * T_MS);
    }
    store_destroy (&store);
    ck_assert_ptr_null (store);
}

// ---------------------------------------------------------------------------
// Opening.

START_TEST (store_destroy_commits_what_is_pending)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    s_pair (store, experiment, "f001", 2 * T_MS);
    ck_assert_int_gt (store_uncommitted (store), 0);
    store_destroy (&store);
    store_destroy (&store);  // NULL is fine

    store = s_open ();
    ck_assert_int_eq (s_count (store, STORE_PENDING), 1);
    ck_assert_int_eq (s_file_count (store), 2);
    ck_assert_int_eq (store_uncommitted (store), 0);
    store_destroy (&store);
}
END_TEST

START_TEST (a_second_writer_is_refused_naming_the_first_and_readers_are_not)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    s_pair (store, experiment, "f001", 2 * T_MS);
    s_commit (store);
    // A second store_new on the same file (another broker) is refused
    // before it reads anything, naming the holder's pid and the lock.
    char err[512] = "", expected[512];
    ck_assert_ptr_null (store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err));
    snprintf (expected, sizeof expected, "another broker (pid %ld) is using it", (long) getpid ());
    ck_assert_msg (strstr (err, expected) && strstr (err, "pivfarm.db.lock'"), "%s", err);
    // Readers are never blocked by it.
    store_t *reader = store_open_readonly (s_db (), err, sizeof err);
    ck_assert_msg (reader != NULL, "%s", err);
    store_destroy (&reader);
    // Once the first is closed, the next writer opens it.
    store_destroy (&store);
    store = s_open ();
    ck_assert_int_eq (s_count (store, STORE_PENDING), 1);
    store_destroy (&store);
}
END_TEST

START_TEST (an_empty_file_becomes_a_new_database)
{
    tu_spit (s_db (), "", 0);
    store_t *store = s_open ();
    s_experiment (store, "run1");
    store_destroy (&store);
    size_t len;
    char *data = s_slurp_db (&len);
    ck_assert_int_gt (len, 100);
    ck_assert_mem_eq (data, "SQLite format 3", 16);
    free (data);
}
END_TEST

START_TEST (refuses_a_file_that_is_not_a_database)
{
    const char *text = "these are my notes on run 7, do not lose them\n";
    char long_text[8192];
    for (size_t i = 0; i < sizeof long_text; i++)
        long_text[i] = text[i % strlen (text)];
    tu_spit (s_db (), long_text, sizeof long_text);
    char err[512] = "";
    ck_assert_ptr_null (store_new (s_db (), STORE_DURABILITY_FULL, err, sizeof err));
    ck_assert_msg (strstr (err, s_db ()) && strstr (err, "not a pivfarm database"), "%s", err);
    err[0] = '\0';
    ck_assert_ptr_null (store_open_readonly (s_db (), err, sizeof err));
    ck_assert_msg (strstr (err, s_db ()) && strstr (err, "not a pivfarm database"), "%s", err);
    size_t len;
    char *data = s_slurp_db (&len);
    ck_assert_uint_eq (len, sizeof long_text);
    ck_assert_mem_eq (data, long_text, len);
    free (data);

    // A missing file is no database either for a reader, and not made.
    const char *missing = tu_path (s_dir, "missing.db");
    ck_assert_ptr_null (store_open_readonly (missing, err, sizeof err));
    ck_assert_msg (strstr (err, missing) && strstr (err, "No such file"), "%s", err);
    ck_assert_int_ne (access (missing, F_OK), 0);
}
END_TEST

START_TEST (refuses_a_truncated_database)
{
    s_make_db (2000);
    size_t len;
    char *data = s_slurp_db (&len);
    ck_assert_int_gt (len, 100000);
    ck_assert_int_eq (truncate (s_db (), (off_t) (len / 2)), 0);
    free (data);
    data = s_slurp_db (&len);

    char err[512] = "";
    ck_assert_ptr_null (store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err));
    ck_assert_msg (strstr (err, s_db ()) && strstr (err, "corrupt or truncated"), "%s", err);

    size_t after_len;
    char *after = s_slurp_db (&after_len);
    ck_assert_uint_eq (after_len, len);
    ck_assert_mem_eq (after, data, len);
    free (after);
    free (data);
}
END_TEST

START_TEST (refuses_a_corrupted_database)
{
    s_make_db (2000);
    size_t len;
    char *data = s_slurp_db (&len);
    // Scribble over two pages in the middle of the file.
    for (size_t i = len / 2; i < len / 2 + 8192; i++)
        data[i] = (char) (i * 7919 >> 3);
    tu_spit (s_db (), data, len);

    char err[512] = "";
    ck_assert_ptr_null (store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err));
    ck_assert_msg (strstr (err, s_db ()) && strstr (err, "corrupt"), "%s", err);
    size_t after_len;
    char *after = s_slurp_db (&after_len);
    ck_assert_uint_eq (after_len, len);
    ck_assert_mem_eq (after, data, len);
    free (after);
    free (data);
}
END_TEST

START_TEST (refuses_a_database_from_a_newer_schema)
{
    s_make_db (3);
    size_t len;
    char *data = s_slurp_db (&len);
    // meta is a WITHOUT ROWID table of text: its row is the key and the
    // value side by side. A later pivfarm would have written 9.
    char *row = memmem (data, len, "schema_version8", 15);
    ck_assert_ptr_nonnull (row);
    row[14] = '9';
    tu_spit (s_db (), data, len);

    char err[512] = "";
    ck_assert_ptr_null (store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err));
    ck_assert_msg (strstr (err, s_db ()) && strstr (err, "schema version 9, newer"), "%s", err);
    ck_assert_ptr_null (store_open_readonly (s_db (), err, sizeof err));
    ck_assert_msg (strstr (err, "newer"), "%s", err);
    size_t after_len;
    char *after = s_slurp_db (&after_len);
    ck_assert_uint_eq (after_len, len);
    ck_assert_mem_eq (after, data, len);
    free (after);
    free (data);
}
END_TEST

START_TEST (refuses_an_sqlite_database_of_another_application)
{
    s_make_db (3);
    size_t len;
    char *data = s_slurp_db (&len);
    memcpy (data + 68, "GPKG", 4);  // the header's application id: a GeoPackage
    tu_spit (s_db (), data, len);

    char err[512] = "";
    ck_assert_ptr_null (store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err));
    ck_assert_msg (strstr (err, s_db ()) && strstr (err, "not a pivfarm database"), "%s", err);
    free (data);
}
END_TEST

// ---------------------------------------------------------------------------
// Files and pairs.

START_TEST (a_resent_file_event_is_recorded_once)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int is_new;
    int64_t id = store_file_add (store, experiment, "f_a.tif", 1000, 5, 6, &is_new);
    ck_assert_int_gt (id, 0);
    ck_assert_int_eq (is_new, 1);
    ck_assert_int_eq (store_file_add (store, experiment, "f_a.tif", 1000, 5, 7, &is_new), id);
    ck_assert_int_eq (is_new, 0);
    s_commit (store);
    store_destroy (&store);

    // Also after a restart, and also while a group is open.
    store = s_open ();
    ck_assert_int_eq (store_experiment (store, "run1", 8), experiment);
    s_file (store, experiment, "g_a.tif", 9);
    ck_assert_int_eq (store_file_add (store, experiment, "f_a.tif", 1000, 5, 9, &is_new), id);
    ck_assert_int_eq (is_new, 0);
    ck_assert_int_eq (store_file_add (store, experiment, "g_a.tif", 1000, 9 - T_MS, 9, &is_new),
                      id + 1);
    ck_assert_int_eq (is_new, 0);
    ck_assert_int_eq (s_file_count (store), 2);
    ck_assert_int_eq (s_count_kind (store, "file"), 2);
    ck_assert_int_eq (s_count_kind (store, "experiment"), 1);

    // The same name in another experiment is another file.
    int64_t other = s_experiment (store, "run2");
    ck_assert_int_ne (store_file_add (store, other, "f_a.tif", 1000, 5, 9, &is_new), id);
    ck_assert_int_eq (is_new, 1);
    store_destroy (&store);
}
END_TEST

START_TEST (a_pair_is_added_once_per_stem)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t pair = s_pair (store, experiment, "f001", 2 * T_MS);
    int64_t fa = s_file (store, experiment, "f001_a.tif", 3 * T_MS);
    int is_new;
    ck_assert_int_eq (store_pair_add (store, experiment, "f001", fa, 0, 3 * T_MS, &is_new),
                      pair);
    ck_assert_int_eq (is_new, 0);
    ck_assert_int_eq (s_count (store, STORE_PENDING), 1);
    ck_assert_int_eq (s_count_kind (store, "pair"), 1);
    store_destroy (&store);
}
END_TEST


// Collects the names store_files_waiting lists, space-separated.
static int
s_waiting_cb (void *arg, const char *experiment, const char *name, int64_t file)
{
    (void) experiment, (void) file;
    char *out = arg;
    strcat (out, name);
    strcat (out, " ");
    return 0;
}

START_TEST (only_files_short_of_their_pairs_wait_after_a_restart)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t f1 = s_file (store, experiment, "f1.tif", 1 * T_MS);
    int64_t f2 = s_file (store, experiment, "f2.tif", 2 * T_MS);
    int64_t f3 = s_file (store, experiment, "f3.tif", 3 * T_MS);
    s_file (store, experiment, "lone.tif", 4 * T_MS);
    int is_new;
    // Sliding pairs: f1-f2 and f2-f3; f2 is in two pairs, f1 and f3 in one.
    store_pair_add (store, experiment, "f1", f1, f2, 5 * T_MS, &is_new);
    store_pair_add (store, experiment, "f2", f2, f3, 5 * T_MS, &is_new);
    // A pair added again counts nothing twice.
    store_pair_add (store, experiment, "f1", f1, f2, 6 * T_MS, &is_new);
    ck_assert_int_eq (is_new, 0);
    char err[256], once[256] = "", twice[256] = "";
    ck_assert_int_eq (store_commit (store, err, sizeof err), 0);
    ck_assert_int_eq (store_files_waiting (store, 1, s_waiting_cb, once), 1);
    ck_assert_str_eq (once, "lone.tif ");
    ck_assert_int_eq (store_files_waiting (store, 2, s_waiting_cb, twice), 3);
    ck_assert_str_eq (twice, "lone.tif f1.tif f3.tif ");
    store_destroy (&store);
}
END_TEST

START_TEST (pairs_in_state_lists_pending_oldest_first)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t p1 = s_pair (store, experiment, "f001", 2 * T_MS);
    int64_t p2 = s_pair (store, experiment, "f002", 3 * T_MS);
    int64_t p3 = s_pair (store, experiment, "f003", 4 * T_MS);
    int64_t multi = s_file (store, experiment, "f004.tif", 5 * T_MS);
    int is_new;
    int64_t p4 = store_pair_add (store, experiment, "f004", multi, 0, 5 * T_MS, &is_new);
    ck_assert_int_gt (p4, p3);
    s_dispatch (store, p1, "agent-a");
    s_dispatch (store, p2, "agent-a");
    ck_assert_int_eq (store_pair_requeue (store, p1, "test", 11 * T_MS), 0);

    s_pairs_t *pending = s_pairs (store, STORE_PENDING);
    ck_assert_int_eq (pending->n, 3);
    ck_assert_int_eq (pending->id[0], p1);
    ck_assert_int_eq (pending->id[1], p3);
    ck_assert_int_eq (pending->id[2], p4);
    ck_assert_str_eq (pending->experiment[0], "run1");
    ck_assert_str_eq (pending->stem[0], "f001");
    ck_assert_str_eq (pending->a[0], "f001_a.tif");
    ck_assert_str_eq (pending->b[0], "f001_b.tif");
    ck_assert_int_eq (pending->attempts[0], 1);
    ck_assert_int_eq (pending->attempts[1], 0);
    ck_assert_str_eq (pending->a[2], "f004.tif");
    ck_assert_str_eq (pending->b[2], "(none)");

    s_pairs_t *dispatched = s_pairs (store, STORE_DISPATCHED);
    ck_assert_int_eq (dispatched->n, 1);
    ck_assert_int_eq (dispatched->id[0], p2);
    ck_assert_int_eq (s_pairs (store, STORE_DONE)->n, 0);
    store_destroy (&store);
}
END_TEST

START_TEST (only_a_pending_pair_is_dispatched)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t pair = s_pair (store, experiment, "f001", 2 * T_MS);
    ck_assert_int_eq (s_dispatch (store, pair, "agent-a"), 1);
    ck_assert_int_eq (store_pair_dispatch (store, pair, "agent-b", 3 * T_MS), -1);
    ck_assert_msg (strstr (store_error (store), "not pending"), "%s", store_error (store));
    ck_assert_int_eq (store_pair_dispatch (store, 999, "agent-b", 3 * T_MS), -1);
    ck_assert_msg (strstr (store_error (store), "pair 999")
                       && strstr (store_error (store), s_db ()),
                   "%s", store_error (store));
    // Neither refusal harmed the group.
    s_commit (store);
    ck_assert_int_eq (s_count (store, STORE_DISPATCHED), 1);
    ck_assert_int_eq (store_pair_requeue (store, pair, "agent lost", 4 * T_MS), 0);
    ck_assert_int_eq (s_dispatch (store, pair, "agent-b"), 2);
    store_destroy (&store);
}
END_TEST

START_TEST (the_first_result_wins)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t pair = s_pair (store, experiment, "f001", 2 * T_MS);
    s_dispatch (store, pair, "agent-a");
    // agent-a is slow: the broker gives the pair to agent-b.
    ck_assert_int_eq (store_pair_requeue (store, pair, "timeout", 20 * T_MS), 0);
    ck_assert_int_eq (s_dispatch (store, pair, "agent-b"), 2);

    store_result_t first = s_result ("B", 1), second = s_result ("A", 1);
    int recorded = -1;
    ck_assert_int_eq (store_pair_result (store, pair, 2, "agent-b", &first, 30 * T_MS, &recorded),
                      0);
    ck_assert_int_eq (recorded, 1);
    ck_assert_int_eq (store_pair_result (store, pair, 1, "agent-a", &second, 31 * T_MS, &recorded),
                      0);
    ck_assert_int_eq (recorded, 0);
    // A resend of the first one changes nothing either.
    ck_assert_int_eq (store_pair_result (store, pair, 2, "agent-b", &first, 32 * T_MS, &recorded),
                      0);
    ck_assert_int_eq (recorded, 0);
    s_commit (store);

    ck_assert_int_eq (s_count (store, STORE_DONE), 1);
    ck_assert_int_eq (s_count_kind (store, "result"), 1);
    ck_assert_int_eq (s_count_kind (store, "duplicate"), 2);
    ck_assert_msg (strstr (s_last_payload (store, "result"), "agent=agent-b"), "%s",
                   s_last_payload (store, "result"));
    // A done pair is not dispatched again, and its failures are ignored.
    ck_assert_int_eq (store_pair_dispatch (store, pair, "agent-c", 40 * T_MS), -1);
    int failed = -1;
    ck_assert_int_eq (
        store_pair_failure (store, pair, 1, "agent-a", "late error", 3, 41 * T_MS, &failed), 0);
    ck_assert_int_eq (failed, 0);
    ck_assert_int_eq (s_count (store, STORE_DONE), 1);
    store_destroy (&store);
}
END_TEST

START_TEST (a_late_result_after_a_requeue_is_recorded)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t pair = s_pair (store, experiment, "f001", 2 * T_MS);
    s_dispatch (store, pair, "agent-a");
    ck_assert_int_eq (store_pair_requeue (store, pair, "agent-a dead", 20 * T_MS), 0);
    store_result_t result = s_result (NULL, 0);
    int recorded;
    ck_assert_int_eq (store_pair_result (store, pair, 1, "agent-a", &result, 21 * T_MS, &recorded),
                      0);
    ck_assert_int_eq (recorded, 1);
    ck_assert_int_eq (s_count (store, STORE_DONE), 1);
    ck_assert_int_eq (s_pairs (store, STORE_PENDING)->n, 0);
    store_destroy (&store);
}
END_TEST

START_TEST (a_pair_fails_after_max_attempts_with_its_last_error)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t pair = s_pair (store, experiment, "f001", 2 * T_MS);
    const char *errors[] = {"cannot read 'f001_a.tif': short read", "out of memory",
                            "cannot read 'f001_b.tif': not a TIFF file"};
    for (int i = 0; i < 3; i++) {
        int attempt = s_dispatch (store, pair, i % 2 ? "agent-b" : "agent-a");
        ck_assert_int_eq (attempt, i + 1);
        int failed = -1;
        ck_assert_int_eq (store_pair_failure (store, pair, attempt, "agent", errors[i], 3,
                                              (20 + i) * T_MS, &failed),
                          0);
        ck_assert_int_eq (failed, i == 2);
        ck_assert_int_eq (s_count (store, i == 2 ? STORE_FAILED : STORE_PENDING), 1);
    }
    s_pairs_t *failed_pairs = s_pairs (store, STORE_FAILED);
    ck_assert_int_eq (failed_pairs->n, 1);
    ck_assert_int_eq (failed_pairs->attempts[0], 3);
    ck_assert_str_eq (s_last_payload (store, "failed"),
                      "attempts=3 error=cannot read 'f001_b.tif': not a TIFF file");
    ck_assert_int_eq (s_count_kind (store, "failure"), 3);
    ck_assert_int_eq (store_pair_dispatch (store, pair, "agent-a", 30 * T_MS), -1);
    store_destroy (&store);
}
END_TEST

START_TEST (a_stale_failure_does_not_take_a_pair_from_its_new_agent)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t pair = s_pair (store, experiment, "f001", 2 * T_MS);
    s_dispatch (store, pair, "agent-a");
    ck_assert_int_eq (store_pair_requeue (store, pair, "agent-a dead", 20 * T_MS), 0);
    s_dispatch (store, pair, "agent-b");
    int failed = -1;
    ck_assert_int_eq (
        store_pair_failure (store, pair, 1, "agent-a", "killed", 2, 21 * T_MS, &failed), 0);
    ck_assert_int_eq (failed, 0);
    ck_assert_int_eq (s_count (store, STORE_DISPATCHED), 1);
    store_destroy (&store);
}
END_TEST

START_TEST (store_requeues_tasks_of_a_dead_agent)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t p1 = s_pair (store, experiment, "f001", 2 * T_MS);
    int64_t p2 = s_pair (store, experiment, "f002", 3 * T_MS);
    int64_t p3 = s_pair (store, experiment, "f003", 4 * T_MS);
    ck_assert_int_eq (store_agent_seen (store, "agent-a", "node1", 8, "piv", 5 * T_MS), 0);
    ck_assert_int_eq (store_agent_seen (store, "agent-b", "node2", 8, "piv", 5 * T_MS), 0);
    s_dispatch (store, p1, "agent-a");
    s_dispatch (store, p2, "agent-b");
    s_dispatch (store, p3, "agent-a");
    s_commit (store);

    // agent-a misses its heartbeats: the broker requeues its tasks.
    ck_assert_int_eq (store_pair_requeue (store, p1, "agent-a dead", 20 * T_MS), 0);
    ck_assert_int_eq (store_pair_requeue (store, p3, "agent-a dead", 20 * T_MS), 0);
    s_commit (store);
    s_pairs_t *pending = s_pairs (store, STORE_PENDING);
    ck_assert_int_eq (pending->n, 2);
    ck_assert_int_eq (pending->id[0], p1);
    ck_assert_int_eq (pending->id[1], p3);
    s_pairs_t *dispatched = s_pairs (store, STORE_DISPATCHED);
    ck_assert_int_eq (dispatched->n, 1);
    ck_assert_int_eq (dispatched->id[0], p2);
    ck_assert_str_eq (s_last_payload (store, "requeue"),
                      "attempt=1 agent=agent-a reason=agent-a dead");
    // A requeue of a pair that is not dispatched changes nothing.
    ck_assert_int_eq (store_pair_requeue (store, p1, "agent-a dead", 21 * T_MS), 0);
    ck_assert_int_eq (s_count_kind (store, "requeue"), 2);
    ck_assert_int_eq (store_pair_requeue (store, 999, "agent-a dead", 21 * T_MS), -1);
    // Its tasks go to agent-b as second attempts.
    ck_assert_int_eq (s_dispatch (store, p1, "agent-b"), 2);
    store_destroy (&store);
}
END_TEST

static int
s_agent_line (void *arg, const char *name, const char *host, int cores, const char *capabilities,
              int64_t first_seen_ns, int64_t last_seen_ns)
{
    char *seen = arg;
    size_t used = strlen (seen);
    snprintf (seen + used, 256 - used, "%s %s %d %s %lld %lld;", name, host, cores, capabilities,
              (long long) (first_seen_ns / T_MS), (long long) (last_seen_ns / T_MS));
    return 0;
}

START_TEST (agents_are_logged_when_new_or_changed)
{
    store_t *store = s_open ();
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq (store_agent_seen (store, "agent-a", "node1", 8, "piv", i * T_MS), 0);
    ck_assert_int_eq (s_count_kind (store, "agent"), 1);
    ck_assert_int_eq (store_agent_seen (store, "agent-a", "node1", 16, "piv", 9 * T_MS), 0);
    ck_assert_int_eq (s_count_kind (store, "agent"), 2);
    ck_assert_str_eq (s_last_payload (store, "agent"),
                      "agent=agent-a host=node1 cores=16 capabilities=piv");
    ck_assert_int_eq (store_agent_seen (store, "agent-0", "node2", 2, "noop", 10 * T_MS), 0);
    s_commit (store);
    // The agents table, by name, with what each said last.
    char seen[256] = "";
    ck_assert_int_eq (store_agents (store, s_agent_line, seen), 2);
    ck_assert_str_eq (seen, "agent-0 node2 2 noop 10 10;agent-a node1 16 piv 0 9;");
    store_destroy (&store);
}
END_TEST

static const char *s_sql_text (const char *sql);

START_TEST (agents_long_gone_are_forgotten_and_their_attempts_keep_their_names)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t pair = s_pair (store, experiment, "f001", 2 * T_MS);
    ck_assert_int_eq (store_agent_seen (store, "gone", "node1", 8, "piv", 1 * T_MS), 0);
    ck_assert_int_eq (store_agent_seen (store, "gone, too", "node2", 8, "piv", 2 * T_MS), 0);
    ck_assert_int_eq (store_agent_seen (store, "connected", "node3", 8, "piv", 3 * T_MS), 0);
    ck_assert_int_eq (store_agent_seen (store, "recent", "node4", 8, "piv", 9 * T_MS), 0);
    int recorded = 0;
    store_result_t r = s_result (NULL, 0);
    ck_assert_int_eq (store_pair_result (store, pair, s_dispatch (store, pair, "gone"), "gone", &r,
                                         11 * T_MS, &recorded),
                      0);
    // 'connected' said HELLO long ago and heartbeats: the broker says so
    // before it forgets. A name without a row changes nothing.
    ck_assert_int_eq (store_agent_touch (store, "connected", 20 * T_MS), 0);
    ck_assert_int_eq (store_agent_touch (store, "never recorded", 20 * T_MS), 0);
    s_commit (store);

    char names[64] = "?";
    ck_assert_int_eq (store_agents_forget (store, 8 * T_MS, 21 * T_MS, names, sizeof names), 2);
    ck_assert_str_eq (names, "'gone', 'gone, too'");
    ck_assert_str_eq (s_last_payload (store, "agents-forgotten"),
                      "count=2 agents='gone', 'gone, too'");
    s_commit (store);
    char seen[256] = "";
    ck_assert_int_eq (store_agents (store, s_agent_line, seen), 2);
    ck_assert_str_eq (seen, "connected node3 8 piv 3 20;recent node4 8 piv 9 9;");
    // What it did still names it.
    char agent[64] = "";
    ck_assert_int_eq (store_attempt_agent (store, pair, 1, agent, sizeof agent), 1);
    ck_assert_str_eq (agent, "gone");

    // Nobody to forget: no event, nothing written (no write lock taken).
    ck_assert_int_eq (store_agents_forget (store, 8 * T_MS, 22 * T_MS, names, sizeof names), 0);
    ck_assert_str_eq (names, "");
    ck_assert_int_eq (store_uncommitted (store), 0);
    ck_assert_int_eq (s_count_kind (store, "agents-forgotten"), 1);

    // Many: the names are cut, the count is whole.
    for (int i = 0; i < 300; i++) {
        char name[64];
        snprintf (name, sizeof name, "node-%03d.cluster.example.org", i);
        ck_assert_int_eq (store_agent_seen (store, name, "h", 1, "piv", 30 * T_MS), 0);
    }
    ck_assert_int_eq (store_agents_forget (store, 31 * T_MS, 32 * T_MS, names, sizeof names), 302);
    ck_assert_str_eq (names, "'connected', 'node-000.cluster.example.org', 'node-001.clust...");
    const char *payload = s_last_payload (store, "agents-forgotten");
    ck_assert_msg (strncmp (payload, "count=302 agents='connected', 'node-000.cluster.example.org'",
                            60) == 0,
                   "%s", payload);
    s_commit (store);
    ck_assert_int_eq (store_agents (store, s_agent_line, seen), 0);
    // The event's list is bounded too, the rest counted.
    const char *all = s_sql_text ("SELECT payload FROM events WHERE kind = 'agents-forgotten'"
                                  " ORDER BY id DESC LIMIT 1");
    size_t len = strlen (all);
    ck_assert_msg (len < 2100 && strstr (all, "' and ") && strcmp (all + len - 5, " more") == 0,
                   "%s", all);
    store_destroy (&store);
}
END_TEST

// ---------------------------------------------------------------------------
// Crashes: a child process writes and is killed; the parent reopens.

// Runs 'fn' in a child process, which then waits to be killed with
// SIGKILL from here, as an operator's kill -9 would: no exit handler, no
// close of the store.
static void
s_crash_child (int (*fn) (void))
{
    int fds[2];
    ck_assert_int_eq (pipe (fds), 0);
    pid_t pid = fork ();
    ck_assert_int_ge (pid, 0);
    if (pid == 0) {
        char done = fn () == 0 ? 'y' : 'n';
        if (write (fds[1], &done, 1) != 1)
            _exit (1);
        for (;;)
            pause ();
    }
    close (fds[1]);
    char done = 0;
    ssize_t got = read (fds[0], &done, 1);
    close (fds[0]);
    kill (pid, SIGKILL);
    int status;
    ck_assert_int_eq (waitpid (pid, &status, 0), pid);
    ck_assert_msg (got == 1 && done == 'y', "the child failed before its crash");
    ck_assert (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
}

// Two pairs dispatched and committed, a third pending.
static int
s_child_dispatches (void)
{
    char err[512];
    store_t *store = store_new (s_db (), STORE_DURABILITY_FULL, err, sizeof err);
    if (!store)
        return -1;
    int64_t experiment = store_experiment (store, "run1", 1);
    int is_new, failed = 0;
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf (name, sizeof name, "f%03d.tif", i);
        int64_t file = store_file_add (store, experiment, name, 1000, 1, 2, &is_new);
        int64_t pair = store_pair_add (store, experiment, name, file, 0, 3, &is_new);
        if (i < 2)
            failed |= store_pair_dispatch (store, pair, "agent-a", 4) != 1;
    }
    return failed || store_commit (store, err, sizeof err) ? -1 : 0;
}

START_TEST (dispatched_pairs_are_requeued_after_reopen)
{
    s_crash_child (s_child_dispatches);
    store_t *store = s_open ();
    ck_assert_int_eq (s_count (store, STORE_DISPATCHED), 2);
    ck_assert_int_eq (store_requeue_all (store, 100 * T_MS), 2);
    ck_assert_int_eq (store_uncommitted (store), 2);
    s_commit (store);
    s_pairs_t *pending = s_pairs (store, STORE_PENDING);
    ck_assert_int_eq (pending->n, 3);
    ck_assert_int_eq (pending->attempts[0], 1);
    ck_assert_int_eq (pending->attempts[1], 1);
    ck_assert_int_eq (pending->attempts[2], 0);
    ck_assert_int_eq (s_count_kind (store, "requeue"), 2);
    ck_assert_str_eq (s_last_payload (store, "requeue"), "attempt=1 agent=agent-a reason=restart");
    ck_assert_int_eq (store_requeue_all (store, 101 * T_MS), 0);
    // The next attempt is the second one.
    ck_assert_int_eq (s_dispatch (store, pending->id[0], "agent-b"), 2);
    store_destroy (&store);
    // The WAL the crash left behind is folded back into the file at close.
    ck_assert_int_ne (access (tu_path (s_dir, "pivfarm.db-wal"), F_OK), 0);
}
END_TEST

// Three files committed, two more written but not committed.
static int
s_child_commits_half (void)
{
    char err[512];
    store_t *store = store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err);
    if (!store)
        return -1;
    int64_t experiment = store_experiment (store, "run1", 1);
    int is_new, failed = 0;
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf (name, sizeof name, "f%03d.tif", i);
        failed |= store_file_add (store, experiment, name, 1000, 1, 2, &is_new) < 0;
        if (i == 2)
            failed |= store_commit (store, err, sizeof err);
    }
    return failed || store_uncommitted (store) != 2 ? -1 : 0;
}

START_TEST (uncommitted_writes_are_lost_and_committed_ones_kept)
{
    s_crash_child (s_child_commits_half);
    store_t *store = s_open ();
    ck_assert_int_eq (s_file_count (store), 3);
    ck_assert_int_eq (s_count_kind (store, "file"), 3);
    store_destroy (&store);
}
END_TEST

// ---------------------------------------------------------------------------
// Failures: a full disk, a busy database, a rejected write.

START_TEST (a_full_disk_during_commit_keeps_what_was_committed)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    s_pairs_add (store, experiment, 5);
    s_commit (store);
    int events = s_events (store, 0, 0)->n;
    s_pair (store, experiment, "f005", 9 * T_MS);
    s_pair (store, experiment, "f006", 9 * T_MS);
    ck_assert_int_eq (store_uncommitted (store), 6);

    store_test_fault (store, STORE_FAULT_FULL, 0);
    char err[512] = "";
    ck_assert_int_eq (store_commit (store, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "cannot commit") && strstr (err, s_db ())
                       && strstr (err, "database or disk is full"),
                   "%s", err);
    ck_assert_str_eq (store_error (store), err);
    ck_assert_int_eq (store_uncommitted (store), 0);
    store_test_fault (store, 0, 0);

    // What was committed is there, nothing of the failed group is.
    ck_assert_int_eq (s_count (store, STORE_PENDING), 5);
    ck_assert_int_eq (s_file_count (store), 10);
    ck_assert_int_eq (s_events (store, 0, 0)->n, events);

    // The store goes on: the lost pair can be added again.
    s_pair (store, experiment, "f005", 10 * T_MS);
    s_commit (store);
    store_destroy (&store);
    store = s_open ();
    ck_assert_int_eq (s_count (store, STORE_PENDING), 6);
    store_destroy (&store);
}
END_TEST

START_TEST (a_full_disk_during_a_write_rolls_back_its_group_and_the_commit_says_so)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    s_pair (store, experiment, "f001", 2 * T_MS);
    s_commit (store);
    int64_t fa = s_file (store, experiment, "f002_a.tif", 3 * T_MS);
    int64_t fb = s_file (store, experiment, "f002_b.tif", 3 * T_MS);

    // The pair goes in, its event does not: neither may stay.
    store_test_fault (store, STORE_FAULT_FULL, 1);
    int is_new;
    ck_assert_int_eq (store_pair_add (store, experiment, "f002", fa, fb, 4 * T_MS, &is_new), -1);
    ck_assert_msg (strstr (store_error (store), "database or disk is full")
                       && strstr (store_error (store), "rolled back")
                       && strstr (store_error (store), s_db ()),
                   "%s", store_error (store));
    store_test_fault (store, 0, 0);

    // Nothing more joins the lost group until the commit has said so.
    ck_assert_int_lt (store_experiment (store, "run2", 5 * T_MS), 0);
    char err[512] = "";
    ck_assert_int_eq (store_commit (store, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "rolled back") && strstr (err, "database or disk is full"), "%s",
                   err);
    ck_assert_int_eq (store_commit (store, err, sizeof err), 0);
    ck_assert_int_eq (s_file_count (store), 2);
    ck_assert_int_eq (s_count (store, STORE_PENDING), 1);

    s_pair (store, experiment, "f002", 6 * T_MS);
    s_commit (store);
    ck_assert_int_eq (s_count (store, STORE_PENDING), 2);
    store_destroy (&store);
}
END_TEST

START_TEST (a_rejected_write_costs_only_itself)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    s_pair (store, experiment, "f001", 2 * T_MS);
    int is_new;
    ck_assert_int_eq (store_pair_add (store, experiment, "f002", 999, 998, 3 * T_MS, &is_new), -1);
    ck_assert_msg (strstr (store_error (store), "f002")
                       && strstr (store_error (store), "FOREIGN KEY"),
                   "%s", store_error (store));
    s_pair (store, experiment, "f003", 4 * T_MS);
    s_commit (store);
    ck_assert_int_eq (s_count (store, STORE_PENDING), 2);
    store_destroy (&store);
}
END_TEST

START_TEST (a_busy_database_fails_the_write_and_leaves_the_store_usable)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    s_commit (store);
    store_test_fault (store, STORE_FAULT_BUSY, 0);
    ck_assert_int_lt (store_file_add (store, experiment, "f_a.tif", 1, 2, 3, &(int) {0}), 0);
    ck_assert_msg (strstr (store_error (store), "locked by another process"), "%s",
                   store_error (store));
    ck_assert_int_lt (store_counts (store, s_counts_fn, &(s_counts_t) {0}), 0);
    store_test_fault (store, 0, 0);
    s_file (store, experiment, "f_a.tif", 3);
    s_commit (store);
    ck_assert_int_eq (s_file_count (store), 1);
    store_destroy (&store);
}
END_TEST


// ---------------------------------------------------------------------------
// The store's own files under faults (files.c): taken away under the
// writer, held by another process, and what the next open makes of it.

// store_new at s_db () must be refused with 'expected' in its reason.
static void
s_open_refused (const char *expected)
{
    char err[4096] = "";
    store_t *store = store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err);
    ck_assert_msg (store == NULL && strstr (err, expected), "expected '%s': %s", expected, err);
}

// Saves what 'store' holds into a new file (store_rescue_*): its name.
static char *
s_rescue (store_t *store)
{
    char dest[4096], err[1024];
    ck_assert_msg (store_rescue_begin (store, dest, sizeof dest, err, sizeof err) == 0, "%s", err);
    int rc, steps = 0;
    while ((rc = store_rescue_step (store, 1, err, sizeof err)) == 0)
        steps++;
    ck_assert_msg (rc == 1, "%s", err);
    ck_assert_int_gt (steps, 1);  // a page at a time: it took several
    return strdup (dest);
}

START_TEST (a_store_deleted_under_its_writer_is_noticed_saved_and_refused_until_put_back)
{
    store_t *store = s_open ();
    ck_assert (store_created (store));
    int64_t experiment = s_experiment (store, "run1");
    s_pairs_add (store, experiment, 20);
    s_commit (store);
    char why[1024];
    ck_assert_int_eq (store_check_files (store, why, sizeof why), 0);
    // An admin's rm: SQLite writes on into the file it has open.
    ck_assert (unlink (s_db ()) == 0);
    s_pair (store, experiment, "f100", 30 * T_MS);
    s_commit (store);
    ck_assert_int_eq (store_check_files (store, why, sizeof why), 1);
    ck_assert_msg (strstr (why, "the database") && strstr (why, "was deleted"), "%s", why);
    // Detached: nothing more is written, and the group it had open is
    // reported lost by the next commit.
    s_file (store, experiment, "g_a.tif", 40 * T_MS);
    store_detach (store, why);
    char err[1024];
    ck_assert_int_lt (store_commit (store, err, sizeof err), 0);
    ck_assert_int_lt (store_file_add (store, experiment, "h_a.tif", 1, 2, 3, &(int) {0}), 0);
    ck_assert_msg (strstr (store_error (store), "was deleted"), "%s", store_error (store));
    ck_assert_str_eq (store_detached (store), why);
    // Saved through the descriptors it still holds: every committed pair.
    char *copy = s_rescue (store);
    store_t *saved = store_open_readonly (copy, err, sizeof err);
    ck_assert_msg (saved != NULL, "%s", err);
    ck_assert_int_eq (s_count (saved, STORE_PENDING), 21);
    store_destroy (&saved);
    store_destroy (&store);
    // The next broker makes no empty store in its place: it says what to do.
    s_open_refused ("taken away while a broker ran");
    s_open_refused (copy);
    // The copy put back while the store's old WAL is still there: refused.
    ck_assert (rename (copy, s_db ()) == 0);
    s_open_refused ("rm -f");
    unlink (s_beside ("-wal"));
    unlink (s_beside ("-shm"));
    store = s_open ();
    ck_assert (store_restored (store) && !store_created (store));
    ck_assert_int_eq (s_count (store, STORE_PENDING), 21);
    store_destroy (&store);
    free (copy);
    // From now on an ordinary store.
    store = s_open ();
    ck_assert (!store_restored (store));
    store_destroy (&store);
}
END_TEST

START_TEST (its_wal_deleted_a_file_replaced_or_moved_away_is_noticed)
{
    static const struct {
        const char *what;     // what is done to the store's files
        const char *expected; // in store_check_files' reason
    } cases[] = {{"wal", "its WAL"}, {"shm", "its shared-memory file"},
                 {"replace", "was replaced by another file"}, {"move", "moved or renamed"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unlink (s_db ());
        unlink (s_beside ("-wal"));
        unlink (s_beside ("-shm"));
        unlink (s_beside (".lock"));
        store_t *store = s_open ();
        s_experiment (store, "run1");
        s_commit (store);
        char why[1024];
        ck_assert_int_eq (store_check_files (store, why, sizeof why), 0);
        if (strcmp (cases[i].what, "wal") == 0)
            ck_assert (unlink (s_beside ("-wal")) == 0);
        else if (strcmp (cases[i].what, "shm") == 0)
            ck_assert (unlink (s_beside ("-shm")) == 0);
        else if (strcmp (cases[i].what, "replace") == 0) {
            size_t len;
            char *bytes = s_slurp_db (&len);
            tu_spit (s_beside (".old"), bytes, len);
            free (bytes);
            ck_assert (rename (s_beside (".old"), s_db ()) == 0);
        }
        else
            ck_assert (rename (s_db (), s_beside (".moved")) == 0);
        int rc = store_check_files (store, why, sizeof why);
        ck_assert_msg (rc == 1 && strstr (why, cases[i].expected), "%s: %d %s", cases[i].what,
                       rc, why);
        store_detach (store, why);
        store_destroy (&store);
        s_open_refused ("taken away");
        unlink (s_beside (".moved"));
    }
}
END_TEST

START_TEST (the_lock_file_deleted_under_its_writer_is_made_again_and_held)
{
    store_t *store = s_open ();
    ck_assert (unlink (s_beside (".lock")) == 0);
    char why[1024];
    ck_assert_int_eq (store_check_files (store, why, sizeof why), 2);
    ck_assert_msg (strstr (why, "made again"), "%s", why);
    ck_assert_int_eq (store_check_files (store, why, sizeof why), 0);
    // No second writer gets in meanwhile.
    s_open_refused ("another broker");
    store_destroy (&store);
    store = s_open ();
    store_destroy (&store);
}
END_TEST

START_TEST (a_store_gone_beside_its_lock_file_is_refused_and_a_first_start_is_said)
{
    store_t *store = s_open ();
    ck_assert (store_created (store));
    s_experiment (store, "run1");
    store_destroy (&store);
    store = s_open ();
    ck_assert (!store_created (store));
    store_destroy (&store);
    // Removed while no broker ran (a cleanup script): not made anew.
    ck_assert (unlink (s_db ()) == 0);
    s_open_refused ("the store is gone, but");
    ck_assert (access (s_db (), F_OK) != 0);
    // The operator's word that an empty store is wanted: the lock removed.
    ck_assert (unlink (s_beside (".lock")) == 0);
    store = s_open ();
    ck_assert (store_created (store));
    store_destroy (&store);
}
END_TEST

START_TEST (a_wal_missing_after_a_writer_that_did_not_stop_cleanly_is_refused)
{
    pid_t pid = fork ();
    if (pid == 0) {
        // A broker that dies with its commits in the WAL.
        char err[512];
        store_t *store = store_new (s_db (), STORE_DURABILITY_NORMAL, err, sizeof err);
        if (!store)
            _exit (1);
        int64_t experiment = store_experiment (store, "run1", 1);
        int is_new;
        store_file_add (store, experiment, "a.tif", 1, 2, 3, &is_new);
        _exit (experiment > 0 && store_commit (store, err, sizeof err) == 0 ? 0 : 1);
    }
    int status;
    ck_assert (waitpid (pid, &status, 0) == pid && WIFEXITED (status) && WEXITSTATUS (status) == 0);
    ck_assert (access (s_beside ("-wal"), F_OK) == 0);
    ck_assert (unlink (s_beside ("-wal")) == 0);
    s_open_refused ("its WAL");
    ck_assert (unlink (s_beside (".lock")) == 0);
    store_t *store = s_open ();  // as it is, on the operator's word
    store_destroy (&store);
}
END_TEST

START_TEST (a_store_locked_by_another_process_fails_at_once_and_keeps_dispatches)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    int64_t pair = s_pair (store, experiment, "f001", 2 * T_MS);
    s_commit (store);
    ck_assert_int_eq (store_busy_since (store), 0);
    // sqlite3 in a shell: BEGIN IMMEDIATE.
    sqlite3 *other = NULL;
    ck_assert (sqlite3_open (s_db (), &other) == SQLITE_OK);
    ck_assert (sqlite3_exec (other, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    ck_assert_int_lt (store_begin (store), 0);
    ck_assert_int_lt (store_file_add (store, experiment, "g_a.tif", 1, 2, 3, &(int) {0}), 0);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    ck_assert_msg (strstr (store_error (store), "locked by another process"), "%s",
                   store_error (store));
    ck_assert_int_gt (store_busy_since (store), 0);
    // Never the busy timeout of 5 s the store has at open.
    ck_assert_int_lt (t1.tv_sec - t0.tv_sec, 2);
    // Reads go on; a dispatch is given its attempt and kept in memory.
    ck_assert_int_eq (s_count (store, STORE_PENDING), 1);
    ck_assert_int_eq (store_pair_dispatch (store, pair, "agent-a", 5 * T_MS), 1);
    ck_assert_int_eq (store_deferred (store), 1);
    ck_assert_int_eq (s_count (store, STORE_PENDING), 1);
    ck_assert (sqlite3_exec (other, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close (other);
    // Free again: the dispatch is written first, then whatever follows.
    ck_assert_int_eq (store_begin (store), 0);
    ck_assert_int_eq (store_busy_since (store), 0);
    ck_assert_int_eq (store_deferred (store), 0);
    s_commit (store);
    ck_assert_int_eq (s_count (store, STORE_DISPATCHED), 1);
    char agent[64] = "";
    ck_assert_int_eq (store_attempt_agent (store, pair, 1, agent, sizeof agent), 1);
    ck_assert_str_eq (agent, "agent-a");
    // Attempt numbers go on from it.
    ck_assert_int_eq (store_pair_requeue (store, pair, "a restart", 20 * T_MS), 0);
    ck_assert_int_eq (s_dispatch (store, pair, "agent-b"), 2);
    store_destroy (&store);
}
END_TEST

// ---------------------------------------------------------------------------
// Readers beside the writer.

START_TEST (a_reader_sees_committed_state_while_the_writer_holds_the_database)
{
    store_t *writer = s_open ();
    int64_t experiment = s_experiment (writer, "run1");
    for (int i = 0; i < 3; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        s_pair (writer, experiment, stem, (i + 2) * T_MS);
    }
    s_commit (writer);
    s_pair (writer, experiment, "f003", 9 * T_MS);
    ck_assert_int_gt (store_uncommitted (writer), 0);

    char err[512] = "";
    store_t *reader = store_open_readonly (s_db (), err, sizeof err);
    ck_assert_msg (reader != NULL, "%s", err);
    ck_assert_int_eq (s_count (reader, STORE_PENDING), 3);
    ck_assert_int_eq (s_pairs (reader, STORE_PENDING)->n, 3);
    s_commit (writer);
    ck_assert_int_eq (s_count (reader, STORE_PENDING), 4);
    // The writer goes on while the reader lists.
    s_dispatch (writer, 1, "agent-a");
    ck_assert_int_eq (s_count (reader, STORE_DISPATCHED), 0);
    s_commit (writer);
    ck_assert_int_eq (s_count (reader, STORE_DISPATCHED), 1);

    // A reader never writes.
    ck_assert_int_eq (store_event (reader, "note", 0, 0, "hello", 1), -1);
    ck_assert_msg (strstr (store_error (reader), "read-only"), "%s", store_error (reader));
    ck_assert_int_eq (store_commit (reader, err, sizeof err), 0);
    store_destroy (&reader);
    store_destroy (&writer);
}
END_TEST

// ---------------------------------------------------------------------------
// The event log and the listings.

// Keeps the whole payload of the last event listed.
static int
s_keep_payload (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
                int64_t pair, const char *payload)
{
    (void) id, (void) ts_ns, (void) kind, (void) experiment, (void) pair;
    char **kept = arg;
    free (*kept);
    *kept = strdup (payload);
    return 0;
}

START_TEST (event_payloads_write_numbers_and_long_names_as_printf_would)
{
    store_t *store = s_open ();
    int64_t run = s_experiment (store, "run");
    int is_new;
    // The extremes of int64, and a name longer than a payload holds.
    int64_t f = store_file_add (store, run, "edge_a.tif", INT64_MAX, INT64_MIN, -5, &is_new);
    ck_assert_int_gt (f, 0);
    char expected[256];
    snprintf (expected, sizeof expected,
              "file=%" PRId64 " size=%" PRId64 " mtime_ns=%" PRId64 " seen_ns=-5 name=edge_a.tif",
              f, INT64_MAX, INT64_MIN);
    ck_assert_str_eq (s_last_payload (store, "file"), expected);
    static char longname[10000];
    memset (longname, 'x', sizeof longname - 7);
    strcpy (longname + sizeof longname - 7, "_b.tif");
    int64_t g = store_file_add (store, run, longname, 0, 0, 0, &is_new);
    ck_assert_int_gt (g, 0);
    char *full = NULL;
    ck_assert_int_gt (asprintf (&full, "file=%" PRId64 " size=0 mtime_ns=0 seen_ns=0 name=%s", g,
                                longname),
                      0);
    // Cut at the payload's limit, as vsnprintf cuts: a prefix of the whole.
    char *payload = NULL;
    ck_assert_int_ge (store_events_of_kind (store, run, "file", s_keep_payload, &payload), 0);
    ck_assert_ptr_nonnull (payload);
    ck_assert_uint_eq (strlen (payload), 8191);
    ck_assert (strncmp (payload, full, 8191) == 0);
    free (payload);
    free (full);
    store_destroy (&store);
}
END_TEST

START_TEST (events_replay_an_experiment_in_order)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t run2 = s_experiment (store, "run2");
    int is_new;
    int64_t fa = store_file_add (store, run1, "take 1_a.tif", 4194304, 900, 1000, &is_new);
    s_file (store, run2, "x_a.tif", 1100);
    int64_t fb = store_file_add (store, run1, "take 1_b.tif", 4194305, 1150, 1200, &is_new);
    int64_t pair = store_pair_add (store, run1, "take 1", fa, fb, 1300, &is_new);
    ck_assert_int_eq (store_pair_dispatch (store, pair, "agent-a", 1400), 1);
    store_result_t result = s_result (NULL, 0);
    int recorded;
    ck_assert_int_eq (store_pair_result (store, pair, 1, "agent-a", &result, 1500, &recorded), 0);
    int64_t note = store_event (store, "setting", run1, 0, "rate=10", 1600);
    ck_assert_int_gt (note, 0);
    s_commit (store);

    s_events_t *events = s_events (store, run1, 0);
    const char *kinds[] = {"experiment", "file", "file", "pair", "dispatch", "result", "setting"};
    const int64_t times[] = {1 * T_MS, 1000, 1200, 1300, 1400, 1500, 1600};
    ck_assert_int_eq (events->n, 7);
    for (int k = 0; k < 7; k++) {
        ck_assert_str_eq (events->kind[k], kinds[k]);
        ck_assert_int_eq (events->ts[k], times[k]);
        ck_assert_int_eq (events->experiment[k], run1);
        if (k > 0)
            ck_assert_int_gt (events->id[k], events->id[k - 1]);
    }
    ck_assert_str_eq (events->payload[0], "name=run1");
    char expected[160];
    snprintf (expected, sizeof expected,
              "file=%" PRId64 " size=4194304 mtime_ns=900 seen_ns=1000 name=take 1_a.tif", fa);
    ck_assert_str_eq (events->payload[1], expected);
    snprintf (expected, sizeof expected,
              "file=%" PRId64 " size=4194305 mtime_ns=1150 seen_ns=1200 name=take 1_b.tif", fb);
    ck_assert_str_eq (events->payload[2], expected);
    snprintf (expected, sizeof expected,
              "file_a=%" PRId64 " file_b=%" PRId64 " stem=take 1", fa, fb);
    ck_assert_str_eq (events->payload[3], expected);
    ck_assert_int_eq (events->pair[3], pair);
    ck_assert_str_eq (events->payload[4], "attempt=1 agent=agent-a");
    ck_assert_str_eq (events->payload[5], "attempt=1 agent=agent-a compute_ns=40000000 field=0");
    ck_assert_str_eq (events->payload[6], "rate=10");
    ck_assert_int_eq (events->id[6], note);

    // From an id on: what came after it.
    int64_t after = events->id[2];
    events = s_events (store, run1, after);
    ck_assert_int_eq (events->n, 4);
    ck_assert_str_eq (events->kind[0], "pair");
    // Every experiment: run2's events interleaved in order.
    events = s_events (store, 0, 0);
    ck_assert_int_eq (events->n, 9);
    ck_assert_str_eq (events->kind[1], "experiment");
    ck_assert_int_eq (events->experiment[1], run2);
    ck_assert_int_eq (events->experiment[3], run2);
    ck_assert_int_eq (s_events (store, run2, 0)->n, 2);
    store_destroy (&store);
}
END_TEST

START_TEST (counts_by_state)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t run2 = s_experiment (store, "run2");
    int64_t p[6];
    for (int i = 0; i < 6; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        p[i] = s_pair (store, run1, stem, (i + 2) * T_MS);
    }
    s_pair (store, run2, "g000", 9 * T_MS);
    s_file (store, run2, "lonely_a.tif", 9 * T_MS);
    s_dispatch (store, p[0], "agent-a");
    s_dispatch (store, p[1], "agent-a");
    s_dispatch (store, p[2], "agent-a");
    store_result_t result = s_result (NULL, 0);
    int recorded, failed;
    ck_assert_int_eq (store_pair_result (store, p[1], 1, "agent-a", &result, 20, &recorded), 0);
    ck_assert_int_eq (store_pair_failure (store, p[2], 1, "agent-a", "bad", 1, 21, &failed), 0);
    ck_assert_int_eq (failed, 1);

    s_counts_t counts = {0};
    ck_assert_int_eq (store_counts (store, s_counts_fn, &counts), 2);
    ck_assert_str_eq (counts.name[0], "run1");
    ck_assert_int_eq (counts.files[0], 12);
    ck_assert_int_eq (counts.pairs[0][STORE_PENDING], 3);
    ck_assert_int_eq (counts.pairs[0][STORE_DISPATCHED], 1);
    ck_assert_int_eq (counts.pairs[0][STORE_DONE], 1);
    ck_assert_int_eq (counts.pairs[0][STORE_FAILED], 1);
    ck_assert_int_eq (counts.pairs[0][STORE_SKIPPED], 0);
    ck_assert_str_eq (counts.name[1], "run2");
    ck_assert_int_eq (counts.files[1], 3);
    ck_assert_int_eq (counts.pairs[1][STORE_PENDING], 1);
    store_destroy (&store);
}
END_TEST

// Records 'n' results with 'size'-byte fields; returns the database size.
static off_t
s_size_with_fields (int every, int n, size_t size, char *kept, size_t keptlen)
{
    store_t *store = s_open ();
    store_set_fields (store, every);
    int64_t experiment = s_experiment (store, "run1");
    unsigned char *field = malloc (size);
    ck_assert_ptr_nonnull (field);
    for (size_t i = 0; i < size; i++)
        field[i] = (unsigned char) (i * 2654435761u >> 24);
    kept[0] = '\0';
    for (int i = 0; i < n; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        int64_t pair = s_pair (store, experiment, stem, (i + 2) * T_MS);
        s_dispatch (store, pair, "agent-a");
        store_result_t result = s_result (field, size);
        int recorded;
        ck_assert_int_eq (store_pair_result (store, pair, 1, "agent-a", &result, 20, &recorded),
                          0);
        const char *payload = s_last_payload (store, "result");
        strncat (kept, strstr (payload, "field=1") ? "1" : "0", keptlen - strlen (kept) - 1);
    }
    free (field);
    store_destroy (&store);
    struct stat st;
    ck_assert_int_eq (stat (s_db (), &st), 0);
    unlink (s_db ());
    unlink (s_beside (".lock"));  // a new store on purpose, not one gone
    return st.st_size;
}

START_TEST (store_fields_every_n_keeps_every_nth_blob)
{
    char kept[32];
    off_t all = s_size_with_fields (1, 10, 100000, kept, sizeof kept);
    ck_assert_str_eq (kept, "1111111111");
    off_t none = s_size_with_fields (0, 10, 100000, kept, sizeof kept);
    ck_assert_str_eq (kept, "0000000000");
    off_t third = s_size_with_fields (3, 10, 100000, kept, sizeof kept);
    ck_assert_str_eq (kept, "1001001001");
    ck_assert_int_gt (all, 1000000);
    ck_assert_int_lt (none, 200000);  // the schema's pages (27 in schema 5), and no field
    ck_assert_int_gt (third, 400000);
    ck_assert_int_lt (third, 600000);
}
END_TEST

START_TEST (store_uncommitted_counts_writes_since_the_last_commit)
{
    store_t *store = s_open ();
    ck_assert_int_eq (store_uncommitted (store), 0);
    int64_t experiment = s_experiment (store, "run1");
    ck_assert_int_eq (store_uncommitted (store), 1);
    s_file (store, experiment, "f_a.tif", 2);
    int is_new;
    store_file_add (store, experiment, "f_a.tif", 1000, 2 - T_MS, 2, &is_new);  // a resend
    ck_assert_int_eq (store_uncommitted (store), 2);
    ck_assert_int_gt (store_event (store, "note", experiment, 0, "x=1", 3), 0);
    ck_assert_int_eq (store_uncommitted (store), 3);
    s_commit (store);
    ck_assert_int_eq (store_uncommitted (store), 0);
    s_commit (store);  // nothing to commit is fine
    store_destroy (&store);
}
END_TEST

// Dispatches each pair it is given and adds a new one each time.
static int
s_dispatch_and_add_fn (void *arg, int64_t pair, const char *experiment, const char *stem,
                       const char *name_a, const char *name_b, int attempts)
{
    (void) experiment, (void) name_a, (void) name_b, (void) attempts;
    store_t *store = arg;
    ck_assert_int_eq (store_pair_dispatch (store, pair, "agent-a", 5), 1);
    char more[64];
    snprintf (more, sizeof more, "more-%s", stem);
    s_pair (store, 1, more, 6);
    return 0;
}

START_TEST (a_listing_callback_may_write_to_the_store)
{
    store_t *store = s_open ();
    int64_t experiment = s_experiment (store, "run1");
    ck_assert_int_eq (experiment, 1);
    for (int i = 0; i < 600; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        s_pair (store, experiment, stem, 2);
    }
    ck_assert_int_eq (store_pairs_in_state (store, STORE_PENDING, s_dispatch_and_add_fn, store),
                      600);
    ck_assert_int_eq (s_count (store, STORE_DISPATCHED), 600);
    ck_assert_int_eq (s_count (store, STORE_PENDING), 600);

    // A callback can also stop the listing.
    s_pairs_t pairs = {.stop_after = 5};
    ck_assert_int_eq (store_pairs_in_state (store, STORE_PENDING, s_pairs_fn, &pairs), 5);
    store_destroy (&store);
}
END_TEST

// ---------------------------------------------------------------------------
// Schema 2: operating a run (doc/control.md).

// Schema 1 as pivfarm 1 created it, word for word: what an upgrade starts
// from.
static const char *t_schema_1 =
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
    "PRAGMA application_id = 1346983494;";

// Runs SQL on the database file straight through SQLite.
static void
s_sql (const char *sql)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq (sqlite3_open (s_db (), &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec (db, sql, NULL, NULL, &msg);
    ck_assert_msg (rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "");
    sqlite3_close (db);
}

// The first column of the first row of a query on the database file, as
// text ("" for no row or NULL).
static const char *
s_sql_text (const char *sql)
{
    static char text[4096];
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    ck_assert_int_eq (sqlite3_open (s_db (), &db), SQLITE_OK);
    ck_assert_msg (sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL) == SQLITE_OK, "%s: %s", sql,
                   sqlite3_errmsg (db));
    text[0] = '\0';
    if (sqlite3_step (stmt) == SQLITE_ROW && sqlite3_column_text (stmt, 0))
        snprintf (text, sizeof text, "%s", (const char *) sqlite3_column_text (stmt, 0));
    sqlite3_finalize (stmt);
    sqlite3_close (db);
    return text;
}

static s_events_t *
s_events_of_kind (store_t *store, int64_t experiment, const char *kind)
{
    static s_events_t events;
    memset (&events, 0, sizeof events);
    int calls = store_events_of_kind (store, experiment, kind, s_events_fn, &events);
    s_listed (store, calls, events.n);
    return &events;
}

typedef struct {
    int n;
    int stop_after;  // stop the listing after this many (0: never)
    store_pair_info_t pair[T_MAX];
    char stem[T_MAX][32], agent[T_MAX][32], error[T_MAX][64];
} s_infos_t;

static int
s_info_fn (void *arg, const store_pair_info_t *pair)
{
    s_infos_t *infos = arg;
    ck_assert_int_lt (infos->n, T_MAX);
    int k = infos->n++;
    infos->pair[k] = *pair;
    snprintf (infos->stem[k], 32, "%s", pair->stem);
    snprintf (infos->agent[k], 32, "%s", pair->agent);
    snprintf (infos->error[k], 64, "%s", pair->error);
    return infos->stop_after && infos->n >= infos->stop_after;
}

static s_infos_t *
s_pairs_of (store_t *store, int64_t experiment, int state, int64_t after, int limit)
{
    static s_infos_t infos;
    memset (&infos, 0, sizeof infos);
    int calls = store_pairs_of (store, experiment, state, after, limit, s_info_fn, &infos);
    s_listed (store, calls, infos.n);
    return &infos;
}

typedef struct {
    int n;
    store_experiment_t experiment[8];
    char name[8][32], source[8][32], settings[8][64];
} s_experiments_t;

static int
s_experiment_fn (void *arg, const store_experiment_t *experiment)
{
    s_experiments_t *all = arg;
    ck_assert_int_lt (all->n, 8);
    int k = all->n++;
    all->experiment[k] = *experiment;
    snprintf (all->name[k], 32, "%s", experiment->name);
    snprintf (all->source[k], 32, "%s", experiment->source);
    snprintf (all->settings[k], 64, "%s", experiment->settings);
    return 0;
}

typedef struct {
    int n;
    int64_t file[T_MAX], size[T_MAX], mtime[T_MAX], seen[T_MAX];
    char name[T_MAX][32];
} s_files_t;

static int
s_file_info_fn (void *arg, int64_t file, const char *name, int64_t size, int64_t mtime_ns,
                int64_t seen_ns)
{
    s_files_t *files = arg;
    ck_assert_int_lt (files->n, T_MAX);
    int k = files->n++;
    files->file[k] = file;
    files->size[k] = size;
    files->mtime[k] = mtime_ns;
    files->seen[k] = seen_ns;
    snprintf (files->name[k], 32, "%s", name);
    return 0;
}

static s_files_t *
s_files_of (store_t *store, int64_t experiment)
{
    static s_files_t files;
    memset (&files, 0, sizeof files);
    int calls = store_files_of (store, experiment, s_file_info_fn, &files);
    s_listed (store, calls, files.n);
    return &files;
}

typedef struct {
    int n;
    char line[16][96];
} s_settings_t;

static int
s_setting_fn (void *arg, int64_t experiment, const char *key, const char *value)
{
    s_settings_t *settings = arg;
    ck_assert_int_lt (settings->n, 16);
    snprintf (settings->line[settings->n++], 96, "%" PRId64 " %s=%s", experiment, key, value);
    return 0;
}

START_TEST (a_version_1_database_is_upgraded_in_place_keeping_its_data)
{
    // pivfarm 1's database: an experiment, a multipage file and a pair of
    // two, a failed pair, and the events of all of it.
    s_sql (t_schema_1);
    s_sql ("INSERT INTO meta (key, value) VALUES ('schema_version', '1');"
           "INSERT INTO experiments (id, name, created_ns) VALUES (1, 'run1', 100);"
           "INSERT INTO files (id, experiment, name, size, mtime_ns, seen_ns, paired) VALUES"
           " (1, 1, 'm.tif', 10, 200, 210, 1), (2, 1, 'f_a.tif', 11, 300, 310, 1),"
           " (3, 1, 'f_b.tif', 12, 400, 410, 1);"
           "INSERT INTO pairs (id, experiment, stem, file_a, file_b, state, attempts, agent,"
           " error, created_ns, dispatched_ns, finished_ns) VALUES"
           " (1, 1, 'm', 1, NULL, 3, 2, 'agent-a', 'bad tiff', 220, 230, 240),"
           " (2, 1, 'f', 2, 3, 0, 0, NULL, NULL, 420, NULL, NULL);"
           "INSERT INTO attempts (pair, attempt, agent, dispatched_ns, outcome, error) VALUES"
           " (1, 1, 'agent-a', 225, 'failed', 'bad tiff'),"
           " (1, 2, 'agent-a', 230, 'failed', 'bad tiff');"
           "INSERT INTO events (ts_ns, kind, experiment, pair, payload) VALUES"
           " (100, 'experiment', 1, 0, 'name=run1'), (210, 'file', 1, 0, 'file=1'),"
           " (220, 'pair', 1, 1, 'stem=m'), (240, 'failed', 1, 1, 'attempts=2'),"
           " (310, 'file', 1, 0, 'file=2'), (410, 'file', 1, 0, 'file=3'),"
           " (420, 'pair', 1, 2, 'stem=f');"
           "PRAGMA application_id = 1346983494;");
    char err[512] = "";
    ck_assert_ptr_null (store_open_readonly (s_db (), err, sizeof err));
    ck_assert_msg (strstr (err, "schema version 1, older"), "%s", err);

    store_t *store = s_open ();
    ck_assert_str_eq (s_sql_text ("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
    ck_assert_ptr_null (strstr (s_sql_text ("SELECT sql FROM sqlite_master WHERE name = 'events'"),
                                "AUTOINCREMENT"));
    store_experiment_t experiment;
    ck_assert_int_eq (store_experiment_find (store, "run1", &experiment), 1);
    ck_assert_int_eq (experiment.id, 1);
    ck_assert_int_eq (experiment.created_ns, 100);
    ck_assert_str_eq (experiment.source, "run1");
    ck_assert_str_eq (experiment.settings, "");
    s_files_t *files = s_files_of (store, 1);
    ck_assert_int_eq (files->n, 3);
    ck_assert_str_eq (files->name[2], "f_b.tif");
    ck_assert_int_eq (files->mtime[2], 400);
    s_infos_t *infos = s_pairs_of (store, 1, -1, 0, 0);
    ck_assert_int_eq (infos->n, 2);
    ck_assert_str_eq (infos->stem[0], "m");
    ck_assert_int_eq (infos->pair[0].state, STORE_FAILED);
    ck_assert_int_eq (infos->pair[0].closed_ns, 200);  // multipage: its one file
    ck_assert_str_eq (infos->error[0], "bad tiff");
    ck_assert_int_eq (infos->pair[1].closed_ns, 400);
    s_events_t *events = s_events (store, 0, 0);
    ck_assert_int_eq (events->n, 7);
    for (int k = 0; k < 7; k++)
        ck_assert_int_eq (events->id[k], k + 1);
    ck_assert_str_eq (events->payload[6], "stem=f");

    // Event ids go on from the old ones, and an upgraded pair is retried
    // with attempt numbers that follow its old attempts.
    s_pairs_t moved = {0};
    ck_assert_int_eq (store_pairs_reset (store, 1, STORE_FAILED, 500, s_pairs_fn, &moved), 1);
    ck_assert_int_eq (s_dispatch (store, 1, "agent-b"), 3);
    s_commit (store);
    events = s_events (store, 0, 7);
    ck_assert_int_eq (events->n, 2);
    ck_assert_int_eq (events->id[0], 8);
    ck_assert_str_eq (events->payload[0], "retry");
    ck_assert_int_eq (events->id[1], 9);
    ck_assert_str_eq (events->kind[1], "dispatch");
    store_destroy (&store);

    // Upgraded once: a reader opens it, and reopening changes nothing.
    store_t *reader = store_open_readonly (s_db (), err, sizeof err);
    ck_assert_msg (reader != NULL, "%s", err);
    ck_assert_int_eq (s_events (reader, 0, 0)->n, 9);
    store_destroy (&reader);
    store = s_open ();
    ck_assert_int_eq (s_events (store, 0, 0)->n, 9);
    store_destroy (&store);
}
END_TEST

// Step 1 -> 2 as pivfarm 2 released it, word for word: with t_schema_1, a
// version 2 database.
static const char *t_schema_1_to_2 =
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
    "DROP INDEX pairs_failed_or_skipped;"
    "CREATE INDEX pairs_failed ON pairs (experiment) WHERE state = 3;"
    "CREATE INDEX pairs_skipped ON pairs (experiment) WHERE state = 4;";

typedef struct {
    int n;
    char name[4][32], kind[4][8], path[4][64], state[4][16];
    int64_t size[4], expires[4];
} s_allocs_t;

static int
s_alloc_fn (void *arg, const store_allocation_t *a)
{
    s_allocs_t *all = arg;
    ck_assert_int_lt (all->n, 4);
    int k = all->n++;
    snprintf (all->name[k], 32, "%s", a->name);
    snprintf (all->kind[k], 8, "%s", a->kind);
    snprintf (all->path[k], 64, "%s", a->path);
    snprintf (all->state[k], 16, "%s", a->state);
    all->size[k] = a->size_bytes;
    all->expires[k] = a->expires_ns;
    return 0;
}

typedef struct {
    int n;
    char sha[4][65], location[4][64];
} s_stored_t;

static int
s_stored_fn (void *arg, const store_file_stored_t *f)
{
    s_stored_t *all = arg;
    ck_assert_int_lt (all->n, 4);
    snprintf (all->sha[all->n], 65, "%s", f->sha256 ? f->sha256 : "-");
    snprintf (all->location[all->n++], 64, "%s", f->location ? f->location : "-");
    return 0;
}

START_TEST (a_version_2_database_is_upgraded_to_3_and_records_allocations_and_archives)
{
    s_sql (t_schema_1);
    s_sql (t_schema_1_to_2);
    s_sql ("INSERT INTO meta (key, value) VALUES ('schema_version', '2');"
           "INSERT INTO experiments (id, name, created_ns) VALUES (1, 'run1', 100);"
           "INSERT INTO files (id, experiment, name, size, mtime_ns, seen_ns, paired) VALUES"
           " (1, 1, 'f_a.tif', 11, 300, 310, 1), (2, 1, 'f_b.tif', 12, 400, 410, 1);"
           "INSERT INTO pairs (id, experiment, stem, file_a, file_b, state, attempts,"
           " created_ns) VALUES (1, 1, 'f', 1, 2, 2, 1, 420);"
           "INSERT INTO events (ts_ns, kind, experiment, pair, payload) VALUES"
           " (100, 'experiment', 1, 0, 'name=run1');"
           "PRAGMA application_id = 1346983494;");
    char err[512] = "";
    ck_assert_ptr_null (store_open_readonly (s_db (), err, sizeof err));
    ck_assert_msg (strstr (err, "schema version 2, older"), "%s", err);
    store_t *store = s_open ();
    ck_assert_str_eq (s_sql_text ("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
    // The old files are at their source, with no checksum yet.
    s_stored_t stored = {0};
    ck_assert_int_eq (store_files_stored (store, 1, s_stored_fn, &stored), 2);
    ck_assert_str_eq (stored.location[1], "-");
    char where[64];
    ck_assert_int_eq (store_file_location (store, 1, "f_b.tif", where, sizeof where), 0);
    ck_assert_int_eq (store_file_last_seen (store, 1), 410);
    // An archived copy, an allocation provisioned then released.
    const char *sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    ck_assert_int_eq (store_file_archived (store, 2, 1, sha, "/arch/run1/f_b.tif", 500), 0);
    int64_t a1 = store_allocation_add (store, 1, "tmpfs", "/data/run1", 1 << 30, 9000, 600);
    int64_t a2 = store_allocation_add (store, 1, "dir", "/data/run1", 1 << 20, 9500, 700);
    ck_assert_msg (a1 > 0 && a2 > a1, "%s", store_error (store));
    ck_assert_int_eq (store_allocation_add (store, 1, "nfs", "/x", 1, 1, 1), -1);
    ck_assert_int_eq (store_allocation_state (store, a1, 1, "released", 800), 0);
    ck_assert_int_eq (store_allocation_state (store, a2, 1, "releasing", 800), 0);
    s_commit (store);
    ck_assert_int_eq (store_file_location (store, 1, "f_b.tif", where, sizeof where), 1);
    ck_assert_str_eq (where, "/arch/run1/f_b.tif");
    memset (&stored, 0, sizeof stored);
    store_files_stored (store, 1, s_stored_fn, &stored);
    ck_assert_str_eq (stored.sha[1], sha);
    s_allocs_t allocs = {0};
    ck_assert_int_eq (store_allocations (store, s_alloc_fn, &allocs), 1);  // not the released
    ck_assert_str_eq (allocs.name[0], "run1");
    ck_assert_str_eq (allocs.kind[0], "dir");
    ck_assert_str_eq (allocs.state[0], "releasing");
    ck_assert_int_eq (allocs.size[0], 1 << 20);
    ck_assert_int_eq (allocs.expires[0], 9500);
    s_events_t *events = s_events (store, 1, 0);
    ck_assert_int_eq (events->n, 6);  // two allocations made, two changes
    ck_assert_str_eq (events->kind[1], "archived");
    ck_assert_str_eq (events->kind[5], "allocation");
    store_destroy (&store);
    store_t *reader = store_open_readonly (s_db (), err, sizeof err);
    ck_assert_msg (reader != NULL, "%s", err);
    store_destroy (&reader);
}
END_TEST

START_TEST (an_experiment_is_created_once_with_its_source_and_settings)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t replay = store_experiment_create (store, "run1.replay1", "run1",
                                              "passes=64,32 overlap=50", 5 * T_MS);
    ck_assert_msg (replay > run1, "%s", store_error (store));
    ck_assert_int_eq (store_experiment_create (store, "run1", NULL, NULL, 6 * T_MS), -1);
    ck_assert_msg (strstr (store_error (store), "'run1'") && strstr (store_error (store), "taken"),
                   "%s", store_error (store));
    int64_t own = store_experiment_create (store, "run2", "run2", NULL, 7 * T_MS);
    ck_assert_int_gt (own, replay);
    // store_experiment finds the one store_experiment_create made.
    ck_assert_int_eq (store_experiment (store, "run1.replay1", 8 * T_MS), replay);
    s_commit (store);

    store_experiment_t found;
    ck_assert_int_eq (store_experiment_find (store, "run1.replay1", &found), 1);
    ck_assert_int_eq (found.id, replay);
    ck_assert_str_eq (found.name, "run1.replay1");
    ck_assert_str_eq (found.source, "run1");
    ck_assert_str_eq (found.settings, "passes=64,32 overlap=50");
    ck_assert_int_eq (found.created_ns, 5 * T_MS);
    ck_assert_int_eq (store_experiment_find (store, "run9", &found), 0);

    s_experiments_t all = {0};
    ck_assert_int_eq (store_experiments (store, s_experiment_fn, &all), 3);
    ck_assert_str_eq (all.name[0], "run1");
    ck_assert_str_eq (all.source[0], "run1");
    ck_assert_str_eq (all.settings[0], "");
    ck_assert_str_eq (all.source[1], "run1");
    ck_assert_str_eq (all.settings[1], "passes=64,32 overlap=50");
    ck_assert_str_eq (all.name[2], "run2");
    ck_assert_str_eq (all.source[2], "run2");
    ck_assert_int_eq (all.experiment[2].created_ns, 7 * T_MS);

    s_events_t *events = s_events (store, replay, 0);
    ck_assert_int_eq (events->n, 1);
    ck_assert_str_eq (events->kind[0], "experiment");
    ck_assert_str_eq (events->payload[0],
                      "source=run1 settings=passes=64,32 overlap=50 name=run1.replay1");
    ck_assert_int_eq (s_count_kind (store, "experiment"), 3);
    store_destroy (&store);
}
END_TEST

START_TEST (pairs_of_lists_an_experiments_pairs_with_their_times)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t run2 = s_experiment (store, "run2");
    int64_t p[5];
    for (int i = 0; i < 5; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        p[i] = s_pair (store, run1, stem, (i + 2) * T_MS);
        s_pair (store, run2, stem, (i + 2) * T_MS);
    }
    int is_new;
    int64_t page = store_file_add (store, run1, "m.tif", 1, 40 * T_MS, 41 * T_MS, &is_new);
    int64_t multipage = store_pair_add (store, run1, "m", page, 0, 42 * T_MS, &is_new);
    s_dispatch (store, p[1], "agent-a");
    s_dispatch (store, p[2], "agent-b");
    store_result_t result = s_result (NULL, 0);
    int recorded, failed;
    ck_assert_int_eq (store_pair_result (store, p[1], 1, "agent-a", &result, 20 * T_MS, &recorded),
                      0);
    ck_assert_int_eq (store_pair_failure (store, p[2], 1, "agent-b", "short read", 1, 21 * T_MS,
                                          &failed),
                      0);
    s_commit (store);

    s_infos_t *infos = s_pairs_of (store, run1, -1, 0, 0);
    ck_assert_int_eq (infos->n, 6);
    ck_assert_int_eq (infos->pair[0].pair, p[0]);
    ck_assert_str_eq (infos->stem[0], "f000");
    ck_assert_int_eq (infos->pair[0].state, STORE_PENDING);
    ck_assert_str_eq (infos->agent[0], "");
    ck_assert_int_eq (infos->pair[0].created_ns, 2 * T_MS);
    ck_assert_int_eq (infos->pair[0].dispatched_ns, 0);
    ck_assert_int_eq (infos->pair[0].finished_ns, 0);
    ck_assert_int_eq (infos->pair[0].closed_ns, 1 * T_MS);  // f000_b.tif's mtime
    ck_assert_int_eq (infos->pair[1].state, STORE_DONE);
    ck_assert_str_eq (infos->agent[1], "agent-a");
    ck_assert_int_eq (infos->pair[1].attempts, 1);
    ck_assert_int_eq (infos->pair[1].dispatched_ns, 10 * T_MS);
    ck_assert_int_eq (infos->pair[1].finished_ns, 20 * T_MS);
    ck_assert_str_eq (infos->error[1], "");
    ck_assert_int_eq (infos->pair[2].state, STORE_FAILED);
    ck_assert_str_eq (infos->error[2], "short read");
    ck_assert_int_eq (infos->pair[5].pair, multipage);
    ck_assert_int_eq (infos->pair[5].closed_ns, 40 * T_MS);

    // One state; after an id; at most a limit; another experiment.
    infos = s_pairs_of (store, run1, STORE_PENDING, 0, 0);
    ck_assert_int_eq (infos->n, 4);
    ck_assert_int_eq (infos->pair[1].pair, p[3]);
    infos = s_pairs_of (store, run1, -1, p[2], 2);
    ck_assert_int_eq (infos->n, 2);
    ck_assert_int_eq (infos->pair[0].pair, p[3]);
    ck_assert_int_eq (infos->pair[1].pair, p[4]);
    infos = s_pairs_of (store, run2, STORE_FAILED, 0, 0);
    ck_assert_int_eq (infos->n, 0);
    ck_assert_int_eq (s_pairs_of (store, run2, -1, 0, 0)->n, 5);
    ck_assert_int_eq (s_pairs_of (store, 99, -1, 0, 0)->n, 0);
    store_destroy (&store);
}
END_TEST

START_TEST (pairs_of_reads_every_batch_up_to_its_limit)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t run2 = s_experiment (store, "run2");
    for (int i = 0; i < 700; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        s_pair (store, i % 3 ? run1 : run2, stem, 2);
    }
    s_infos_t *infos = s_pairs_of (store, run1, -1, 0, 0);
    ck_assert_int_eq (infos->n, 466);
    for (int k = 1; k < infos->n; k++)
        ck_assert_int_gt (infos->pair[k].pair, infos->pair[k - 1].pair);
    ck_assert_int_eq (s_pairs_of (store, run1, STORE_PENDING, 0, 300)->n, 300);
    ck_assert_int_eq (s_pairs_of (store, run2, -1, 0, 0)->n, 234);
    s_infos_t some = {.stop_after = 260};
    ck_assert_int_eq (store_pairs_of (store, run1, -1, 0, 0, s_info_fn, &some), 260);
    store_destroy (&store);
}
END_TEST

START_TEST (retry_moves_failed_pairs_back_with_attempts_counted_afresh)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t run2 = s_experiment (store, "run2");
    int64_t pair = s_pair (store, run1, "f001", 2 * T_MS);
    int64_t other = s_pair (store, run2, "g001", 2 * T_MS);
    int failed;
    for (int attempt = 1; attempt <= 2; attempt++) {
        ck_assert_int_eq (s_dispatch (store, pair, "agent-a"), attempt);
        ck_assert_int_eq (store_pair_failure (store, pair, attempt, "agent-a", "bad", 2,
                                              (20 + attempt) * T_MS, &failed),
                          0);
    }
    ck_assert_int_eq (failed, 1);
    ck_assert_int_eq (s_dispatch (store, other, "agent-a"), 1);
    ck_assert_int_eq (store_pair_failure (store, other, 1, "agent-a", "bad", 1, 22 * T_MS,
                                          &failed),
                      0);
    s_commit (store);

    s_pairs_t moved = {0};
    ck_assert_int_eq (store_pairs_reset (store, run1, STORE_FAILED, 30 * T_MS, s_pairs_fn, &moved),
                      1);
    ck_assert_int_eq (moved.n, 1);
    ck_assert_int_eq (moved.id[0], pair);
    ck_assert_str_eq (moved.experiment[0], "run1");
    ck_assert_str_eq (moved.stem[0], "f001");
    ck_assert_str_eq (moved.a[0], "f001_a.tif");
    ck_assert_str_eq (moved.b[0], "f001_b.tif");
    ck_assert_int_eq (moved.attempts[0], 0);
    ck_assert_int_eq (store_uncommitted (store), 1);
    s_infos_t *infos = s_pairs_of (store, run1, -1, 0, 0);
    ck_assert_int_eq (infos->pair[0].state, STORE_PENDING);
    ck_assert_int_eq (infos->pair[0].attempts, 0);
    ck_assert_str_eq (infos->error[0], "");
    ck_assert_int_eq (infos->pair[0].finished_ns, 0);
    s_events_t *events = s_events (store, run1, 0);
    ck_assert_str_eq (events->kind[events->n - 1], "pair");
    ck_assert_str_eq (events->payload[events->n - 1], "retry");
    ck_assert_int_eq (events->pair[events->n - 1], pair);
    ck_assert_int_eq (events->ts[events->n - 1], 30 * T_MS);
    // run2's failed pair stays failed; nothing more to retry in run1.
    ck_assert_int_eq (s_pairs_of (store, run2, STORE_FAILED, 0, 0)->n, 1);
    ck_assert_int_eq (store_pairs_reset (store, run1, STORE_FAILED, 31 * T_MS, s_pairs_fn,
                                         &(s_pairs_t) {0}),
                      0);

    // Attempt numbers go on (the old ones are in the attempts history); a
    // late failure of an old attempt does not move the pair; two fresh
    // failures fail it again.
    ck_assert_int_eq (s_dispatch (store, pair, "agent-b"), 3);
    ck_assert_int_eq (store_pair_failure (store, pair, 2, "agent-a", "late", 2, 32 * T_MS,
                                          &failed),
                      0);
    ck_assert_int_eq (s_pairs_of (store, run1, STORE_DISPATCHED, 0, 0)->n, 1);
    ck_assert_int_eq (store_pair_failure (store, pair, 3, "agent-b", "bad", 2, 33 * T_MS,
                                          &failed),
                      0);
    ck_assert_int_eq (failed, 0);
    ck_assert_int_eq (s_dispatch (store, pair, "agent-b"), 4);
    ck_assert_int_eq (store_pair_failure (store, pair, 4, "agent-b", "worse", 2, 34 * T_MS,
                                          &failed),
                      0);
    ck_assert_int_eq (failed, 1);
    ck_assert_str_eq (s_last_payload (store, "failed"), "attempts=2 error=worse");
    s_commit (store);
    // A requeue after a retry names the attempt in flight.
    ck_assert_int_eq (store_pairs_reset (store, run1, STORE_FAILED, 35 * T_MS, s_pairs_fn,
                                         &(s_pairs_t) {0}),
                      1);
    ck_assert_int_eq (s_dispatch (store, pair, "agent-c"), 5);
    ck_assert_int_eq (store_pair_requeue (store, pair, "agent lost", 36 * T_MS), 0);
    ck_assert_str_eq (s_last_payload (store, "requeue"),
                      "attempt=5 agent=agent-c reason=agent lost");
    ck_assert_int_eq (s_dispatch (store, pair, "agent-c"), 6);
    ck_assert_int_eq (store_requeue_all (store, 37 * T_MS), 1);
    ck_assert_str_eq (s_last_payload (store, "requeue"), "attempt=6 agent=agent-c reason=restart");
    s_commit (store);
    store_destroy (&store);
}
END_TEST

START_TEST (only_a_pending_pair_is_skipped_and_backfill_queues_it_again)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t p[4];
    for (int i = 0; i < 4; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        p[i] = s_pair (store, run1, stem, (i + 2) * T_MS);
    }
    s_commit (store);
    ck_assert_int_eq (store_pair_skip (store, p[0], 10 * T_MS), 0);
    ck_assert_int_eq (store_pair_skip (store, p[2], 11 * T_MS), 0);
    ck_assert_int_eq (store_pair_skip (store, p[2], 12 * T_MS), -1);
    ck_assert_msg (strstr (store_error (store), "not pending"), "%s", store_error (store));
    s_dispatch (store, p[1], "agent-a");
    ck_assert_int_eq (store_pair_skip (store, p[1], 13 * T_MS), -1);
    ck_assert_int_eq (store_pair_skip (store, 999, 13 * T_MS), -1);
    ck_assert_msg (strstr (store_error (store), "no such pair"), "%s", store_error (store));
    ck_assert_int_eq (s_count (store, STORE_SKIPPED), 2);
    ck_assert_int_eq (s_count_kind (store, "pair"), 4 + 2);
    ck_assert_str_eq (s_last_payload (store, "pair"), "skip");
    // Skipped pairs are not dispatched.
    ck_assert_int_eq (store_pair_dispatch (store, p[0], "agent-a", 14 * T_MS), -1);
    s_commit (store);

    ck_assert_int_eq (store_pairs_reset (store, run1, STORE_DONE, 15 * T_MS, s_pairs_fn,
                                         &(s_pairs_t) {0}),
                      -1);
    s_pairs_t moved = {0};
    ck_assert_int_eq (store_pairs_reset (store, run1, STORE_SKIPPED, 15 * T_MS, s_pairs_fn,
                                         &moved),
                      2);
    ck_assert_int_eq (moved.id[0], p[0]);
    ck_assert_int_eq (moved.id[1], p[2]);
    ck_assert_str_eq (s_last_payload (store, "pair"), "backfill");
    ck_assert_int_eq (s_count (store, STORE_SKIPPED), 0);
    ck_assert_int_eq (s_count (store, STORE_PENDING), 3);
    ck_assert_int_eq (s_dispatch (store, p[0], "agent-a"), 1);
    ck_assert_int_eq (store_pairs_reset (store, run1, STORE_SKIPPED, 16 * T_MS, s_pairs_fn,
                                         &(s_pairs_t) {0}),
                      0);
    store_destroy (&store);
}
END_TEST

START_TEST (a_retry_that_fails_midway_moves_nothing)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    for (int i = 0; i < 3; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        ck_assert_int_eq (store_pair_skip (store, s_pair (store, run1, stem, 2), 3), 0);
    }
    s_commit (store);
    store_test_fault (store, STORE_FAULT_FULL, 4);
    ck_assert_int_eq (store_pairs_reset (store, run1, STORE_SKIPPED, 4, s_pairs_fn,
                                         &(s_pairs_t) {0}),
                      -1);
    ck_assert_msg (strstr (store_error (store), "backfill"), "%s", store_error (store));
    store_test_fault (store, 0, 0);
    char err[512];
    store_commit (store, err, sizeof err);
    ck_assert_int_eq (s_count (store, STORE_SKIPPED), 3);
    ck_assert_int_eq (s_count_kind (store, "pair"), 6);
    store_destroy (&store);
}
END_TEST

START_TEST (settings_are_set_replaced_and_removed_with_an_event_each)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    ck_assert_int_eq (store_setting_set (store, 0, "rate", "10", 2 * T_MS), 0);
    ck_assert_int_eq (store_setting_set (store, run1, "policy", "latest", 3 * T_MS), 0);
    ck_assert_int_eq (store_setting_set (store, run1, "paused", "1", 4 * T_MS), 0);
    ck_assert_int_eq (store_setting_set (store, 0, "rate", "20", 5 * T_MS), 0);
    ck_assert_int_eq (store_setting_set (store, run1, "paused", NULL, 6 * T_MS), 0);
    ck_assert_int_eq (store_setting_set (store, run1, "nothing", NULL, 7 * T_MS), 0);
    s_commit (store);

    s_settings_t settings = {0};
    ck_assert_int_eq (store_settings (store, s_setting_fn, &settings), 2);
    ck_assert_str_eq (settings.line[0], "0 rate=20");
    ck_assert_str_eq (settings.line[1], "1 policy=latest");
    s_events_t *events = s_events (store, 0, 0);
    const char *payloads[] = {"rate=10", "policy=latest", "paused=1", "rate=20", "paused"};
    const int64_t scopes[] = {0, run1, run1, 0, run1};
    int k = events->n - 5;
    ck_assert_int_eq (s_count_kind (store, "setting"), 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_str_eq (events->kind[k + i], "setting");
        ck_assert_str_eq (events->payload[k + i], payloads[i]);
        ck_assert_int_eq (events->experiment[k + i], scopes[i]);
        ck_assert_int_eq (events->ts[k + i], (2 + i) * T_MS);
    }
    store_destroy (&store);
}
END_TEST

// Adds a setting of experiment 5 when it is given the first one.
static int
s_add_setting_fn (void *arg, int64_t experiment, const char *key, const char *value)
{
    (void) value;
    store_t *store = arg;
    if (experiment == 0 && strcmp (key, "k000") == 0)
        ck_assert_int_eq (store_setting_set (store, 5, "added", "1", 9), 0);
    return 0;
}

START_TEST (settings_are_listed_in_batches_that_fn_may_write_between)
{
    store_t *store = s_open ();
    for (int i = 0; i < 300; i++) {
        char key[16];
        snprintf (key, sizeof key, "k%03d", i);
        ck_assert_int_eq (store_setting_set (store, 0, key, "v", 2), 0);
    }
    // The one added sorts after those listed already, so it is listed too.
    ck_assert_int_eq (store_settings (store, s_add_setting_fn, store), 301);
    ck_assert_int_eq (s_count_kind (store, "setting"), 301);
    store_destroy (&store);
}
END_TEST

START_TEST (files_of_lists_an_experiments_files_in_arrival_order)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t run2 = s_experiment (store, "run2");
    int is_new;
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf (name, sizeof name, "f%03d.tif", i);
        int64_t experiment = i % 2 ? run2 : run1;
        ck_assert_int_gt (store_file_add (store, experiment, name, 1000 + i, 10 * i, 10 * i + 5,
                                          &is_new),
                          0);
    }
    s_files_t *files = s_files_of (store, run2);
    ck_assert_int_eq (files->n, 150);
    ck_assert_str_eq (files->name[0], "f001.tif");
    ck_assert_int_eq (files->size[0], 1001);
    ck_assert_int_eq (files->mtime[0], 10);
    ck_assert_int_eq (files->seen[0], 15);
    ck_assert_str_eq (files->name[149], "f299.tif");
    for (int k = 1; k < files->n; k++)
        ck_assert_int_gt (files->file[k], files->file[k - 1]);
    ck_assert_int_eq (s_files_of (store, run1)->n, 150);
    ck_assert_int_eq (s_files_of (store, 42)->n, 0);
    store_destroy (&store);
}
END_TEST

typedef struct {
    int n;
    store_t *store;  // if set, fn tries to write to it
    int write_refused;
    store_result_info_t result[8];
    char stem[8][32], agent[8][32], path[8][64];
    unsigned char field[8][16];
} s_results_t;

static int
s_result_fn (void *arg, const store_result_info_t *result)
{
    s_results_t *results = arg;
    ck_assert_int_lt (results->n, 8);
    int k = results->n++;
    results->result[k] = *result;
    snprintf (results->stem[k], 32, "%s", result->stem);
    snprintf (results->agent[k], 32, "%s", result->agent);
    snprintf (results->path[k], 64, "%s", result->path);
    if (result->field && result->field_size <= 16)
        memcpy (results->field[k], result->field, result->field_size);
    if (results->store)
        results->write_refused += store_event (results->store, "note", 0, 0, "x", 1) < 0;
    return 0;
}

START_TEST (results_of_gives_each_result_with_its_field_and_times)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t run2 = s_experiment (store, "run2");
    int64_t p[3];
    for (int i = 0; i < 3; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        p[i] = s_pair (store, run1, stem, (i + 2) * T_MS);
    }
    int64_t q = s_pair (store, run2, "g000", 9 * T_MS);
    const unsigned char field[12] = "vectors\0here";
    int recorded;
    // p[0]: requeued, then its first attempt answers: the result's
    // dispatch time is that attempt's.
    ck_assert_int_eq (store_pair_dispatch (store, p[0], "agent-a", 11 * T_MS), 1);
    ck_assert_int_eq (store_pair_requeue (store, p[0], "agent lost", 12 * T_MS), 0);
    ck_assert_int_eq (store_pair_dispatch (store, p[0], "agent-b", 13 * T_MS), 2);
    store_result_t result = s_result (field, sizeof field);
    ck_assert_int_eq (store_pair_result (store, p[0], 1, "agent-a", &result, 20 * T_MS, &recorded),
                      0);
    // p[2]: a result without its field.
    store_set_fields (store, 0);
    s_dispatch (store, p[2], "agent-b");
    result.mean_u = 1.5;
    ck_assert_int_eq (store_pair_result (store, p[2], 1, "agent-b", &result, 21 * T_MS, &recorded),
                      0);
    s_dispatch (store, q, "agent-b");
    ck_assert_int_eq (store_pair_result (store, q, 1, "agent-b", &result, 22 * T_MS, &recorded),
                      0);
    s_commit (store);

    s_results_t results = {.store = store};
    ck_assert_int_eq (store_results_of (store, run1, s_result_fn, &results), 2);
    ck_assert_int_eq (results.write_refused, 2);
    ck_assert_msg (strstr (store_error (store), "store_results_of"), "%s", store_error (store));
    store_result_info_t *r = &results.result[0];
    ck_assert_int_eq (r->pair, p[0]);
    ck_assert_str_eq (results.stem[0], "f000");
    ck_assert_int_eq (r->attempt, 1);
    ck_assert_str_eq (results.agent[0], "agent-a");
    ck_assert_double_eq (r->mean_u, 0.5);
    ck_assert_double_eq (r->mean_v, -0.25);
    ck_assert_double_eq (r->valid_fraction, 0.98);
    ck_assert_int_eq (r->nx, 63);
    ck_assert_int_eq (r->compute_ns, 40 * T_MS);
    ck_assert_str_eq (results.path[0], "/r/x.txt");
    ck_assert_uint_eq (r->field_size, sizeof field);
    ck_assert_mem_eq (results.field[0], field, sizeof field);
    ck_assert_int_eq (r->closed_ns, 1 * T_MS);  // f000_b.tif's mtime
    ck_assert_int_eq (r->dispatched_ns, 11 * T_MS);
    ck_assert_int_eq (r->recorded_ns, 20 * T_MS);
    r = &results.result[1];
    ck_assert_int_eq (r->pair, p[2]);
    ck_assert_double_eq (r->mean_u, 1.5);
    ck_assert_ptr_null (r->field);
    ck_assert_uint_eq (r->field_size, 0);
    ck_assert_int_eq (r->closed_ns, 3 * T_MS);
    ck_assert_int_eq (r->dispatched_ns, 10 * T_MS);
    // Writes work again once the listing is over.
    ck_assert_int_gt (store_event (store, "note", 0, 0, "after", 23 * T_MS), 0);

    s_results_t other = {0};
    ck_assert_int_eq (store_results_of (store, run2, s_result_fn, &other), 1);
    ck_assert_str_eq (other.stem[0], "g000");

    // The latest result with a field: p[0] (p[2], newer, kept none); run2
    // kept no field at all.
    s_results_t latest = {0};
    ck_assert_int_eq (store_result_latest (store, run1, s_result_fn, &latest), 1);
    ck_assert_int_eq (latest.result[0].pair, p[0]);
    ck_assert_mem_eq (latest.field[0], field, sizeof field);
    s_results_t none = {0};
    ck_assert_int_eq (store_result_latest (store, run2, s_result_fn, &none), 0);
    ck_assert_int_eq (none.n, 0);
    // The last event is the one just written.
    int64_t note = store_event (store, "note", 0, 0, "last", 24 * T_MS);
    ck_assert_int_gt (note, 0);
    ck_assert_int_eq (store_event_last (store), note);
    store_destroy (&store);
}
END_TEST

START_TEST (events_of_kind_lists_one_kind_of_one_experiment)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t run2 = s_experiment (store, "run2");
    for (int i = 0; i < 600; i++) {
        char payload[32];
        snprintf (payload, sizeof payload, "{\"n\": %d}", i);
        ck_assert_int_gt (store_event (store, i % 3 ? "feedback" : "note", i % 2 ? run2 : run1, 0,
                                       payload, 100 + i),
                          0);
    }
    s_events_t *events = s_events_of_kind (store, run1, "feedback");
    ck_assert_int_eq (events->n, 200);
    ck_assert_str_eq (events->payload[0], "{\"n\": 2}");
    ck_assert_int_eq (events->ts[0], 102);
    ck_assert_int_eq (events->experiment[0], run1);
    ck_assert_str_eq (events->kind[0], "feedback");
    for (int k = 1; k < events->n; k++) {
        ck_assert_int_gt (events->id[k], events->id[k - 1]);
        ck_assert_int_eq (events->experiment[k], run1);
        ck_assert_str_eq (events->kind[k], "feedback");
    }
    ck_assert_int_eq (s_events_of_kind (store, run2, "note")->n, 100);
    ck_assert_int_eq (s_events_of_kind (store, 0, "feedback")->n, 400);
    ck_assert_int_eq (s_events_of_kind (store, run1, "result")->n, 0);
    store_destroy (&store);
}
END_TEST

// Adds and commits a pair through the writer in arg for each pair listed.
static int
s_writer_adds_fn (void *arg, const store_pair_info_t *pair)
{
    store_t *writer = arg;
    char stem[32];
    snprintf (stem, sizeof stem, "new-%s", pair->stem);
    s_pair (writer, 1, stem, 50 * T_MS);
    s_commit (writer);
    return 0;
}

static int
s_writer_records_fn (void *arg, const store_result_info_t *result)
{
    store_t *writer = arg;
    (void) result;
    int64_t pair = s_pair (writer, 1, "during-results", 51 * T_MS);
    s_dispatch (writer, pair, "agent-a");
    store_result_t more = s_result (NULL, 0);
    int recorded;
    ck_assert_int_eq (store_pair_result (writer, pair, 1, "agent-a", &more, 52 * T_MS, &recorded),
                      0);
    s_commit (writer);
    return 0;
}

START_TEST (a_reader_lists_while_a_writer_adds_rows)
{
    store_t *writer = s_open ();
    int64_t run1 = s_experiment (writer, "run1");
    ck_assert_int_eq (run1, 1);
    for (int i = 0; i < 300; i++) {
        char stem[16];
        snprintf (stem, sizeof stem, "f%03d", i);
        int64_t pair = s_pair (writer, run1, stem, 2 * T_MS);
        if (i == 0) {
            s_dispatch (writer, pair, "agent-a");
            store_result_t result = s_result (NULL, 0);
            int recorded;
            ck_assert_int_eq (store_pair_result (writer, pair, 1, "agent-a", &result, 3 * T_MS,
                                                 &recorded),
                              0);
        }
    }
    ck_assert_int_eq (store_setting_set (writer, 0, "rate", "5", 4 * T_MS), 0);
    s_commit (writer);
    s_experiment (writer, "uncommitted");

    char err[512] = "";
    store_t *reader = store_open_readonly (s_db (), err, sizeof err);
    ck_assert_msg (reader != NULL, "%s", err);
    store_experiment_t found;
    ck_assert_int_eq (store_experiment_find (reader, "run1", &found), 1);
    ck_assert_int_eq (store_experiment_find (reader, "uncommitted", &found), 0);
    ck_assert_int_eq (store_experiments (reader, s_experiment_fn, &(s_experiments_t) {0}), 1);
    s_settings_t settings = {0};
    ck_assert_int_eq (store_settings (reader, s_setting_fn, &settings), 1);
    ck_assert_str_eq (settings.line[0], "0 rate=5");
    ck_assert_int_eq (s_files_of (reader, run1)->n, 600);
    ck_assert_int_eq (s_events_of_kind (reader, run1, "pair")->n, 300);

    // The writer commits while the reader's listings run: a listing gives
    // what was there when it began, the next one the rest.
    s_commit (writer);
    ck_assert_int_eq (store_pairs_of (reader, run1, -1, 0, 0, s_writer_adds_fn, writer), 300);
    ck_assert_int_eq (s_pairs_of (reader, run1, -1, 0, 0)->n, 600);
    ck_assert_int_eq (store_results_of (reader, run1, s_writer_records_fn, writer), 1);
    s_results_t results = {0};
    ck_assert_int_eq (store_results_of (reader, run1, s_result_fn, &results), 2);
    ck_assert_str_eq (results.stem[1], "during-results");
    ck_assert_int_eq (store_experiments (reader, s_experiment_fn, &(s_experiments_t) {0}), 2);

    // Only reads: a write through the reader is refused.
    ck_assert_int_eq (store_pair_skip (reader, 2, 5), -1);
    ck_assert_int_eq (store_setting_set (reader, 0, "rate", "6", 5), -1);
    ck_assert_int_eq (store_experiment_create (reader, "x", NULL, NULL, 5), -1);
    ck_assert_msg (strstr (store_error (reader), "read-only"), "%s", store_error (reader));
    store_destroy (&reader);
    store_destroy (&writer);
}
END_TEST


// ---------------------------------------------------------------------------
// The task lifecycle (issue 13): lost agents, DEFER, file versions, schema 4.

START_TEST (a_pair_that_loses_its_agent_max_attempts_times_fails_with_the_reason)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t pair = s_pair (store, run1, "f", 2 * T_MS);
    int failed = 1;
    // Lost once, then a benign requeue (a restart, a polite disconnect),
    // which is not counted.
    int attempt = s_dispatch (store, pair, "agent-a");
    ck_assert_int_eq (store_pair_lost (store, pair, attempt, "agent 'agent-a' is silent", 3,
                                       11 * T_MS, &failed), 0);
    ck_assert_int_eq (failed, 0);
    ck_assert_str_eq (s_last_payload (store, "requeue"),
                      "attempt=1 lost=1 agent=agent-a reason=agent 'agent-a' is silent");
    attempt = s_dispatch (store, pair, "agent-b");
    ck_assert_int_eq (store_pair_requeue (store, pair, "disconnected", 12 * T_MS), 0);
    // A stale loss (an attempt no longer out) changes nothing.
    attempt = s_dispatch (store, pair, "agent-c");
    ck_assert_int_eq (store_pair_lost (store, pair, attempt - 1, "late", 3, 13 * T_MS, &failed), 0);
    ck_assert_int_eq (s_pairs_of (store, run1, STORE_DISPATCHED, 0, 0)->n, 1);
    ck_assert_int_eq (store_pair_lost (store, pair, attempt, "agent 'agent-c' is silent", 3,
                                       14 * T_MS, &failed), 0);
    ck_assert_int_eq (failed, 0);
    attempt = s_dispatch (store, pair, "agent-d");
    ck_assert_int_eq (store_pair_lost (store, pair, attempt,
                                       "deadline of 30 s passed on agent 'agent-d'", 3,
                                       15 * T_MS, &failed), 0);
    ck_assert_int_eq (failed, 1);
    s_commit (store);
    s_infos_t *infos = s_pairs_of (store, run1, -1, 0, 0);
    ck_assert_int_eq (infos->pair[0].state, STORE_FAILED);
    ck_assert_str_eq (s_sql_text ("SELECT error FROM pairs WHERE id = 1"),
                      "agent lost 3 times on this pair (last: deadline of 30 s passed on agent "
                      "'agent-d')");
    ck_assert_str_eq (s_last_payload (store, "failed"),
                      "attempts=4 error=agent lost 3 times on this pair (last: deadline of 30 s "
                      "passed on agent 'agent-d')");
    // A retry counts losses afresh: one more loss does not fail it.
    s_pairs_t moved = {0};
    ck_assert_int_eq (store_pairs_reset (store, run1, STORE_FAILED, 16 * T_MS, s_pairs_fn, &moved),
                      1);
    attempt = s_dispatch (store, pair, "agent-e");
    ck_assert_int_eq (attempt, 5);
    ck_assert_int_eq (store_pair_lost (store, pair, attempt, "silent", 3, 17 * T_MS, &failed), 0);
    ck_assert_int_eq (failed, 0);
    ck_assert_int_eq (s_pairs (store, STORE_PENDING)->n, 1);
    store_destroy (&store);
}
END_TEST

START_TEST (a_deferred_attempt_is_not_counted_and_only_its_holder_defers_it)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t pair = s_pair (store, run1, "f", 2 * T_MS);
    int deferred = 0, failed = 1;
    int attempt = s_dispatch (store, pair, "agent-a");
    ck_assert_int_eq (store_pair_defer (store, pair, attempt, "agent-a",
                                        "results disk full: 12 MB free", 11 * T_MS, &deferred),
                      0);
    ck_assert_int_eq (deferred, 1);
    ck_assert_str_eq (s_last_payload (store, "defer"),
                      "attempt=1 agent=agent-a text=results disk full: 12 MB free");
    s_infos_t *infos = s_pairs_of (store, run1, -1, 0, 0);
    ck_assert_int_eq (infos->pair[0].state, STORE_PENDING);
    ck_assert_int_eq (infos->pair[0].attempts, 0);
    // Its number is not given again; the same DEFER resent changes nothing.
    ck_assert_int_eq (s_dispatch (store, pair, "agent-b"), 2);
    ck_assert_int_eq (store_pair_defer (store, pair, attempt, "agent-a", "again", 12 * T_MS,
                                        &deferred), 0);
    ck_assert_int_eq (deferred, 0);
    ck_assert_int_eq (s_count_kind (store, "defer"), 1);
    // With max_attempts 2 one failure leaves it pending: the deferral did
    // not count (it would have failed the pair before).
    ck_assert_int_eq (store_pair_failure (store, pair, 2, "agent-b", "bad frame", 2, 13 * T_MS,
                                          &failed), 0);
    ck_assert_int_eq (failed, 0);
    ck_assert_int_eq (s_pairs (store, STORE_PENDING)->n, 1);
    s_commit (store);
    store_destroy (&store);
}
END_TEST

START_TEST (a_changed_file_retries_its_failed_pair_and_keeps_a_done_one)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1");
    int64_t bad = s_pair (store, run1, "bad", 2 * T_MS);    // files 1000 bytes, mtime 1 ms
    int64_t good = s_pair (store, run1, "good", 2 * T_MS);
    int failed = 0, recorded = 0, version = -1, done = -1;
    int attempt = s_dispatch (store, bad, "agent-a");
    ck_assert_int_eq (store_pair_failure (store, bad, attempt, "agent-a", "not a TIFF", 1,
                                          3 * T_MS, &failed), 0);
    ck_assert_int_eq (failed, 1);
    store_result_t r = s_result (NULL, 0);
    ck_assert_int_eq (store_pair_result (store, good, s_dispatch (store, good, "agent-a"),
                                         "agent-a", &r, 4 * T_MS, &recorded), 0);
    // Resent with the same size and mtime: the same file.
    int64_t file = store_file_add (store, run1, "bad_b.tif", 1000, T_MS, 5 * T_MS, &version);
    ck_assert_int_gt (file, 0);
    ck_assert_int_eq (version, STORE_FILE_SAME);
    ck_assert_int_eq (s_count_kind (store, "file-changed"), 0);
    // Rewritten: a new version of the same row.
    ck_assert_int_eq (store_file_add (store, run1, "bad_b.tif", 4096, 6 * T_MS, 7 * T_MS,
                                      &version), file);
    ck_assert_int_eq (version, STORE_FILE_CHANGED);
    char want[256];
    snprintf (want, sizeof want, "file=%lld size=1000->4096 mtime_ns=1000000->6000000 "
              "name=bad_b.tif", (long long) file);
    ck_assert_str_eq (s_last_payload (store, "file-changed"), want);
    ck_assert_int_eq (s_file_count (store), 4);
    s_pairs_t moved = {0};
    ck_assert_int_eq (store_file_retry (store, run1, file, 8 * T_MS, s_pairs_fn, &moved, &done),
                      1);
    ck_assert_int_eq (done, 0);
    ck_assert_int_eq (moved.n, 1);
    ck_assert_str_eq (moved.stem[0], "bad");
    ck_assert_str_eq (moved.b[0], "bad_b.tif");
    s_infos_t *infos = s_pairs_of (store, run1, -1, 0, 0);
    ck_assert_int_eq (infos->pair[0].state, STORE_PENDING);
    ck_assert_int_eq (infos->pair[0].attempts, 0);
    ck_assert_str_eq (infos->error[0], "");
    // The done pair's frame rewritten: kept, with an event.
    int64_t good_a = store_file_add (store, run1, "good_a.tif", 1000, 9 * T_MS, 9 * T_MS, &version);
    ck_assert_int_eq (version, STORE_FILE_CHANGED);
    memset (&moved, 0, sizeof moved);
    ck_assert_int_eq (store_file_retry (store, run1, good_a, 10 * T_MS, s_pairs_fn, &moved, &done),
                      0);
    ck_assert_int_eq (done, 1);
    ck_assert_int_eq (moved.n, 0);
    snprintf (want, sizeof want, "file=%lld stem=good", (long long) good_a);
    ck_assert_str_eq (s_last_payload (store, "file-rewritten"), want);
    s_commit (store);
    ck_assert_int_eq (s_pairs (store, STORE_DONE)->n, 1);
    store_destroy (&store);
}
END_TEST

// Step 2 -> 3 as pivfarm 3 released it, word for word.
static const char *t_schema_2_to_3 =
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
    "ALTER TABLE files ADD COLUMN location TEXT;";

START_TEST (a_version_3_database_is_upgraded_to_4_and_counts_lost_agents)
{
    s_sql (t_schema_1);
    s_sql (t_schema_1_to_2);
    s_sql (t_schema_2_to_3);
    s_sql ("INSERT INTO meta (key, value) VALUES ('schema_version', '3');"
           "INSERT INTO experiments (id, name, created_ns) VALUES (1, 'run1', 100);"
           "INSERT INTO files (id, experiment, name, size, mtime_ns, seen_ns, paired) VALUES"
           " (1, 1, 'f_a.tif', 11, 300, 310, 1), (2, 1, 'f_b.tif', 12, 400, 410, 1);"
           "INSERT INTO pairs (id, experiment, stem, file_a, file_b, state, attempts,"
           " earlier_attempts, agent, created_ns, dispatched_ns) VALUES"
           " (1, 1, 'f', 1, 2, 1, 2, 0, 'agent-a', 420, 430);"
           "INSERT INTO attempts (pair, attempt, agent, dispatched_ns) VALUES"
           " (1, 1, 'agent-a', 425), (1, 2, 'agent-a', 430);"
           "INSERT INTO events (ts_ns, kind, experiment, pair, payload) VALUES"
           " (100, 'experiment', 1, 0, 'name=run1');"
           "PRAGMA application_id = 1346983494;");
    char err[512] = "";
    ck_assert_ptr_null (store_open_readonly (s_db (), err, sizeof err));
    ck_assert_msg (strstr (err, "schema version 3, older"), "%s", err);
    store_t *store = s_open ();
    ck_assert_str_eq (s_sql_text ("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
    ck_assert_str_eq (s_sql_text ("SELECT lost FROM pairs WHERE id = 1"), "0");
    // The pair out before the upgrade is lost once: counted, still pending.
    int failed = 1;
    ck_assert_int_eq (store_pair_lost (store, 1, 2, "silent", 2, 500, &failed), 0);
    ck_assert_int_eq (failed, 0);
    ck_assert_int_eq (s_dispatch (store, 1, "agent-b"), 3);
    ck_assert_int_eq (store_pair_lost (store, 1, 3, "silent", 2, 600, &failed), 0);
    ck_assert_int_eq (failed, 1);
    s_commit (store);
    ck_assert_str_eq (s_sql_text ("SELECT error FROM pairs WHERE id = 1"),
                      "agent lost 2 times on this pair (last: silent)");
    store_destroy (&store);
    store_t *reader = store_open_readonly (s_db (), err, sizeof err);
    ck_assert_msg (reader != NULL, "%s", err);
    store_destroy (&reader);
}
END_TEST


// ---------------------------------------------------------------------------
// Schema 5: run statistics' checkpoints (doc/units.md).

// Step 3 -> 4 as pivfarm 4 released it, word for word.
static const char *t_schema_3_to_4 = "ALTER TABLE pairs ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;";

typedef struct {
    int n;
    int64_t pair[T_MAX];
    int with_field;
} s_uncounted_t;

static int
s_uncounted_fn (void *arg, const store_result_info_t *r)
{
    s_uncounted_t *u = arg;
    ck_assert_int_lt (u->n, T_MAX);
    u->pair[u->n++] = r->pair;
    u->with_field += r->field != NULL;
    return 0;
}

static s_uncounted_t *
s_uncounted (store_t *store, int64_t experiment)
{
    static s_uncounted_t u;
    memset (&u, 0, sizeof u);
    int calls = store_results_uncounted (store, experiment, 0, s_uncounted_fn, &u);
    s_listed (store, calls, u.n);
    return &u;
}

typedef struct {
    int n;
    char set[8][64], settings[8][64], calibration[8][96], state[8][32];
    int64_t experiment[8], fields[8], first[8], last[8];
} s_stats_rows_t;

static int
s_stats_fn (void *arg, const store_stats_t *st)
{
    s_stats_rows_t *rows = arg;
    ck_assert_int_lt (rows->n, 8);
    int i = rows->n++;
    snprintf (rows->set[i], 64, "%s", st->set);
    snprintf (rows->settings[i], 64, "%s", st->settings);
    snprintf (rows->calibration[i], 96, "%s", st->calibration);
    snprintf (rows->state[i], 32, "%.*s", (int) st->state_size, (const char *) st->state);
    rows->experiment[i] = st->experiment;
    rows->fields[i] = st->fields;
    rows->first[i] = st->first_pair;
    rows->last[i] = st->last_pair;
    return 0;
}

static s_stats_rows_t *
s_stats_of (store_t *store, int64_t experiment)
{
    static s_stats_rows_t rows;
    memset (&rows, 0, sizeof rows);
    int calls = store_stats_of (store, experiment, s_stats_fn, &rows);
    s_listed (store, calls, rows.n);
    return &rows;
}

// A result of a new pair 'stem' of 'experiment'; its pair id.
static int64_t
s_done (store_t *store, int64_t experiment, const char *stem, const void *field, size_t size)
{
    int64_t pair = s_pair (store, experiment, stem, 20 * T_MS);
    int attempt = s_dispatch (store, pair, "agent-a"), recorded = 0;
    store_result_t r = s_result (field, size);
    ck_assert_int_eq (store_pair_result (store, pair, attempt, "agent-a", &r, 30 * T_MS,
                                         &recorded), 0);
    ck_assert_int_eq (recorded, 1);
    return pair;
}

START_TEST (a_version_4_database_is_upgraded_to_5_with_its_results_not_counted)
{
    s_sql (t_schema_1);
    s_sql (t_schema_1_to_2);
    s_sql (t_schema_2_to_3);
    s_sql (t_schema_3_to_4);
    s_sql ("INSERT INTO meta (key, value) VALUES ('schema_version', '4');"
           "INSERT INTO experiments (id, name, created_ns) VALUES (1, 'run1', 100);"
           "INSERT INTO files (id, experiment, name, size, mtime_ns, seen_ns, paired) VALUES"
           " (1, 1, 'f_a.tif', 11, 300, 310, 1), (2, 1, 'f_b.tif', 12, 400, 410, 1);"
           "INSERT INTO pairs (id, experiment, stem, file_a, file_b, state, attempts,"
           " agent, created_ns, dispatched_ns, finished_ns) VALUES"
           " (1, 1, 'f', 1, 2, 2, 1, 'agent-a', 420, 430, 440);"
           "INSERT INTO attempts (pair, attempt, agent, dispatched_ns, outcome, finished_ns)"
           " VALUES (1, 1, 'agent-a', 430, 'done', 440);"
           "INSERT INTO results (pair, attempt, agent, mean_u, mean_v, mean_speed,"
           " valid_fraction, vorticity, nx, ny, compute_ns, path, field, recorded_ns) VALUES"
           " (1, 1, 'agent-a', 1, 2, 3, 1, 0, 4, 4, 5, '/r/f.txt', x'0102', 440);"
           "PRAGMA application_id = 1346983494;");
    char err[512] = "";
    ck_assert_ptr_null (store_open_readonly (s_db (), err, sizeof err));
    ck_assert_msg (strstr (err, "schema version 4, older"), "%s", err);
    store_t *store = s_open ();
    ck_assert_str_eq (s_sql_text ("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
    // The result of before the upgrade is one to count, with its field.
    s_uncounted_t *u = s_uncounted (store, 1);
    ck_assert_int_eq (u->n, 1);
    ck_assert_int_eq (u->pair[0], 1);
    ck_assert_int_eq (u->with_field, 1);
    ck_assert_int_eq (s_stats_of (store, 0)->n, 0);
    int64_t pairs[] = {1};
    store_stats_t st = {.experiment = 1, .set = "64x64 step 16", .settings = "passes=1",
                        .calibration = "none", .fields = 1, .first_pair = 1, .last_pair = 1,
                        .state = "S1", .state_size = 2};
    ck_assert_int_eq (store_stats_save (store, &st, pairs, 1, 500), 0);
    s_commit (store);
    ck_assert_int_eq (s_uncounted (store, 0)->n, 0);
    store_destroy (&store);
    store_t *reader = store_open_readonly (s_db (), err, sizeof err);
    ck_assert_msg (reader != NULL, "%s", err);
    s_stats_rows_t *rows = s_stats_of (reader, 1);
    ck_assert_int_eq (rows->n, 1);
    ck_assert_str_eq (rows->state[0], "S1");
    store_destroy (&reader);
}
END_TEST


// Issue 26: schema 7 gives a pair camera 2's frames (a stereo set of
// four); a version 6 database's pairs stay pairs of two.
START_TEST (a_version_6_database_is_upgraded_to_7_and_keeps_stereo_sets_of_four_frames)
{
    s_sql (t_schema_1);
    s_sql (t_schema_1_to_2);
    s_sql (t_schema_2_to_3);
    s_sql (t_schema_3_to_4);
    s_sql ("CREATE TABLE uncounted (pair INTEGER PRIMARY KEY);"
           "CREATE TABLE stats (experiment INTEGER NOT NULL REFERENCES experiments (id),"
           " set_key TEXT NOT NULL, settings TEXT NOT NULL, calibration TEXT NOT NULL,"
           " fields INTEGER NOT NULL, first_pair INTEGER NOT NULL, last_pair INTEGER NOT NULL,"
           " state BLOB NOT NULL, updated_ns INTEGER NOT NULL, PRIMARY KEY (experiment, set_key));"
           "ALTER TABLE results ADD COLUMN settings TEXT;"
           "INSERT INTO meta (key, value) VALUES ('schema_version', '6');"
           "INSERT INTO experiments (id, name, created_ns) VALUES (1, 'run1', 100);"
           "INSERT INTO files (id, experiment, name, size, mtime_ns, seen_ns, paired) VALUES"
           " (1, 1, 'f_a.tif', 11, 300, 310, 1), (2, 1, 'f_b.tif', 12, 400, 410, 1);"
           "INSERT INTO pairs (id, experiment, stem, file_a, file_b, state, attempts,"
           " created_ns) VALUES (1, 1, 'f', 1, 2, 0, 0, 420);"
           "PRAGMA application_id = 1346983494;");
    store_t *store = s_open ();
    ck_assert_str_eq (s_sql_text ("SELECT value FROM meta WHERE key = 'schema_version'"), "8");
    char *c = NULL, *d = NULL;
    ck_assert_int_eq (store_pair_more (store, 1, &c, &d), 0);
    ck_assert (c == NULL && d == NULL);
    int64_t files[4];
    const char *names[4] = {"cam1/s_a.tif", "cam1/s_b.tif", "cam2/s_a.tif", "cam2/s_b.tif"};
    int version, is_new;
    for (int k = 0; k < 4; k++)
        files[k] = store_file_add (store, 1, names[k], 10, 500 + k, 510 + k, &version);
    int64_t set = store_pair_add_set (store, 1, "s", files, 520, &is_new);
    ck_assert (set > 1 && is_new);
    s_commit (store);
    store_destroy (&store);
    // After a restart the set is listed with its four frames: A, B as a
    // pair's, C, D from store_pair_more.
    store = s_open ();
    s_pairs_t *pairs = calloc (1, sizeof *pairs);
    ck_assert_int_eq (store_pairs_in_state (store, STORE_PENDING, s_pairs_fn, pairs), 2);
    ck_assert_str_eq (pairs->a[1], "cam1/s_a.tif");
    ck_assert_str_eq (pairs->b[1], "cam1/s_b.tif");
    free (pairs);
    ck_assert_int_eq (store_pair_more (store, set, &c, &d), 1);
    ck_assert_str_eq (c, "cam2/s_a.tif");
    ck_assert_str_eq (d, "cam2/s_b.tif");
    free (c), free (d);
    // Every frame of the set counts as paired: none is offered again.
    ck_assert_str_eq (s_sql_text ("SELECT count(*) FROM files WHERE paired = 1"), "6");
    store_destroy (&store);
}
END_TEST

// Ensemble jobs (schema 8): a chunk's partial recorded once, the job's
// field kept when it ends, a job a stop left running marked failed.
typedef struct {
    int n;
    int64_t ids[8];
} s_frames_t;

static int
s_frames_fn (void *arg, int64_t pair, int state, const char *a, const char *b, int stereo)
{
    s_frames_t *f = arg;
    ck_assert (state == STORE_PENDING && !stereo && a && b);
    f->ids[f->n++] = pair;
    return 0;
}

START_TEST (an_ensemble_partial_is_recorded_once_and_a_job_ends_with_its_field)
{
    store_t *store = s_open ();
    int64_t exp = store_experiment (store, "run1", 100);
    int version, is_new;
    for (int i = 0; i < 3; i++) {
        char a[32], b[32], stem[16];
        snprintf (a, sizeof a, "p%d_a.tif", i);
        snprintf (b, sizeof b, "p%d_b.tif", i);
        snprintf (stem, sizeof stem, "p%d", i);
        int64_t fa = store_file_add (store, exp, a, 10, 200, 210, &version);
        int64_t fb = store_file_add (store, exp, b, 10, 201, 211, &version);
        ck_assert (store_pair_add (store, exp, stem, fa, fb, 220, &is_new) > 0);
    }
    s_frames_t frames = {0};
    ck_assert_int_eq (store_pair_frames (store, exp, s_frames_fn, &frames), 3);
    store_ensemble_t job = {.experiment = exp, .window = 8, .overlap = 50, .asked = "1-3",
                            .settings = "passes=32,16", .chunk = 2, .passes = 3};
    int64_t id = store_ensemble_new (store, &job, frames.ids, 3, 300);
    ck_assert (id > 0);
    int recorded;
    ck_assert_int_eq (store_ensemble_partial (store, id, 0, 1, 1, "a1", "first", 5, 310, &recorded), 0);
    ck_assert_int_eq (recorded, 1);
    // A late copy of the same chunk (another agent) is dropped.
    ck_assert_int_eq (store_ensemble_partial (store, id, 0, 1, 1, "a2", "other", 5, 320, &recorded), 0);
    ck_assert_int_eq (recorded, 0);
    unsigned char *buf;
    size_t size;
    ck_assert_int_eq (store_ensemble_partial_get (store, id, 0, 1, &buf, &size), 0);
    ck_assert (size == 5 && memcmp (buf, "first", 5) == 0);
    free (buf);
    ck_assert_int_eq (store_ensemble_partial_get (store, id, 0, 0, &buf, &size), 0);
    ck_assert (buf == NULL && size == 0);
    s_commit (store);
    store_ensemble_t got;
    ck_assert_int_eq (store_ensemble_latest (store, exp, 1, &got), 0);  // none done yet
    ck_assert_int_eq (store_ensemble_latest (store, exp, 0, &got), 1);
    ck_assert_str_eq (got.state, "running");
    ck_assert_str_eq (got.asked, "1-3");
    ck_assert_int_eq ((int) got.pairs, 3);
    store_ensemble_release (&got);
    ck_assert_int_eq (store_ensemble_pass (store, id, 2, 330), 0);
    ck_assert_int_eq (store_ensemble_end (store, id, NULL, "field", 5, "stress", 6, 3, 340), 0);
    s_commit (store);
    ck_assert_int_eq (store_ensemble_latest (store, exp, 1, &got), 1);
    ck_assert_str_eq (got.state, "done");
    ck_assert (got.field_size == 5 && memcmp (got.field, "field", 5) == 0);
    ck_assert (got.stress_size == 6 && memcmp (got.stress, "stress", 6) == 0);
    ck_assert_int_eq (got.pass, 2);
    ck_assert_int_eq ((int) got.counted, 3);
    store_ensemble_release (&got);
    // Its partials went with its end; a second job a stop leaves running
    // is failed at the next start.
    ck_assert_str_eq (s_sql_text ("SELECT count(*) FROM ensemble_partials"), "0");
    int64_t second = store_ensemble_new (store, &job, frames.ids, 3, 400);
    ck_assert (second > id);
    ck_assert_int_eq (store_ensemble_abandon (store, "stopped", 500), 1);
    s_commit (store);
    ck_assert_int_eq (store_ensemble_latest (store, exp, 0, &got), 1);
    ck_assert_str_eq (got.state, "failed");
    ck_assert_str_eq (got.error, "stopped");
    store_ensemble_release (&got);
    store_destroy (&store);
}
END_TEST

START_TEST (a_checkpoint_marks_what_it_counts_and_a_crash_loses_both_or_neither)
{
    store_t *store = s_open ();
    int64_t run1 = s_experiment (store, "run1"), run2 = s_experiment (store, "run2");
    int64_t p1 = s_done (store, run1, "a", "F1", 2), p2 = s_done (store, run1, "b", NULL, 0);
    int64_t p3 = s_done (store, run2, "c", "F3", 2);
    s_commit (store);
    // Every result waits to be counted, its field with it (or not kept).
    s_uncounted_t *u = s_uncounted (store, 0);
    ck_assert_int_eq (u->n, 3);
    ck_assert_int_eq (u->pair[0], p1);
    ck_assert_int_eq (u->pair[2], p3);
    ck_assert_int_eq (u->with_field, 2);
    ck_assert_int_eq (s_uncounted (store, run1)->n, 2);
    // A duplicate result of p1 records nothing, and is nothing to count.
    int recorded = 1;
    store_result_t again = s_result ("F1", 2);
    ck_assert_int_eq (store_pair_result (store, p1, 1, "agent-b", &again, 41 * T_MS, &recorded),
                      0);
    ck_assert_int_eq (recorded, 0);
    ck_assert_int_eq (s_uncounted (store, run1)->n, 2);
    // A checkpoint of run1: its row and its results in one group; a pair
    // of another experiment given by mistake is not marked.
    int64_t pairs[] = {p1, p3};
    store_stats_t st = {.experiment = run1, .set = "grid A", .settings = "passes=2",
                        .calibration = "scale=2e-05m/px dt=0.002s origin=0,0 y_axis=up",
                        .fields = 1, .first_pair = p1, .last_pair = p1, .state = "v1",
                        .state_size = 2};
    ck_assert_int_eq (store_stats_save (store, &st, pairs, 2, 50 * T_MS), 0);
    // Not committed yet: a reader (what a crash would leave) sees neither.
    ck_assert_int_gt (store_uncommitted (store), 0);
    char err[512];
    store_t *reader = store_open_readonly (s_db (), err, sizeof err);
    ck_assert_msg (reader != NULL, "%s", err);
    ck_assert_int_eq (s_stats_of (reader, run1)->n, 0);
    ck_assert_int_eq (s_uncounted (reader, run1)->n, 2);
    s_commit (store);
    ck_assert_int_eq (s_stats_of (reader, run1)->n, 1);
    u = s_uncounted (reader, 0);
    ck_assert_int_eq (u->n, 2);  // p2 of run1 and p3 of run2
    ck_assert_int_eq (u->pair[0], p2);
    ck_assert_int_eq (u->pair[1], p3);
    // The result without a field is marked without a row.
    store_stats_t marks = {.experiment = run1};
    ck_assert_int_eq (store_stats_save (store, &marks, &p2, 1, 51 * T_MS), 0);
    // A second save of the same set replaces its row.
    st.fields = 2, st.last_pair = p2, st.state = "v2";
    ck_assert_int_eq (store_stats_save (store, &st, NULL, 0, 52 * T_MS), 0);
    s_commit (store);
    s_stats_rows_t *rows = s_stats_of (reader, 0);
    ck_assert_int_eq (rows->n, 1);
    ck_assert_str_eq (rows->set[0], "grid A");
    ck_assert_str_eq (rows->settings[0], "passes=2");
    ck_assert_str_eq (rows->calibration[0], "scale=2e-05m/px dt=0.002s origin=0,0 y_axis=up");
    ck_assert_str_eq (rows->state[0], "v2");
    ck_assert_int_eq (rows->fields[0], 2);
    ck_assert_int_eq (rows->first[0], p1);
    ck_assert_int_eq (rows->last[0], p2);
    ck_assert_int_eq (s_uncounted (reader, run1)->n, 0);
    // Cleared: no row, every result of run1 to count again; run2 untouched.
    ck_assert_int_eq (store_stats_clear (store, run1, 60 * T_MS), 0);
    s_commit (store);
    ck_assert_int_eq (s_stats_of (reader, run1)->n, 0);
    ck_assert_int_eq (s_uncounted (reader, run1)->n, 2);
    ck_assert_int_eq (s_uncounted (reader, run2)->n, 1);
    ck_assert_str_eq (s_last_payload (store, "stats"), "cleared");
    store_destroy (&reader);
    store_destroy (&store);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("store");
    TCase *open = tcase_create ("open");
    tcase_add_checked_fixture (open, s_setup, s_teardown);
    tcase_add_test (open, store_destroy_commits_what_is_pending);
    tcase_add_test (open, an_empty_file_becomes_a_new_database);
    tcase_add_test (open, refuses_a_file_that_is_not_a_database);
    tcase_add_test (open, refuses_a_truncated_database);
    tcase_add_test (open, refuses_a_corrupted_database);
    tcase_add_test (open, refuses_a_database_from_a_newer_schema);
    tcase_add_test (open, refuses_an_sqlite_database_of_another_application);
    tcase_add_test (open, a_version_1_database_is_upgraded_in_place_keeping_its_data);
    tcase_add_test (open, a_version_2_database_is_upgraded_to_3_and_records_allocations_and_archives);
    tcase_add_test (open, a_version_3_database_is_upgraded_to_4_and_counts_lost_agents);
    suite_add_tcase (suite, open);

    TCase *pairs = tcase_create ("pairs");
    tcase_add_checked_fixture (pairs, s_setup, s_teardown);
    tcase_add_test (pairs, a_resent_file_event_is_recorded_once);
    tcase_add_test (pairs, a_pair_is_added_once_per_stem);
    tcase_add_test (pairs, pairs_in_state_lists_pending_oldest_first);
    tcase_add_test (pairs, only_files_short_of_their_pairs_wait_after_a_restart);
    tcase_add_test (pairs, only_a_pending_pair_is_dispatched);
    tcase_add_test (pairs, the_first_result_wins);
    tcase_add_test (pairs, a_late_result_after_a_requeue_is_recorded);
    tcase_add_test (pairs, a_pair_fails_after_max_attempts_with_its_last_error);
    tcase_add_test (pairs, a_stale_failure_does_not_take_a_pair_from_its_new_agent);
    tcase_add_test (pairs, a_pair_that_loses_its_agent_max_attempts_times_fails_with_the_reason);
    tcase_add_test (pairs, a_deferred_attempt_is_not_counted_and_only_its_holder_defers_it);
    tcase_add_test (pairs, a_changed_file_retries_its_failed_pair_and_keeps_a_done_one);
    tcase_add_test (pairs, store_requeues_tasks_of_a_dead_agent);
    tcase_add_test (pairs, agents_are_logged_when_new_or_changed);
    tcase_add_test (pairs, agents_long_gone_are_forgotten_and_their_attempts_keep_their_names);
    suite_add_tcase (suite, pairs);

    TCase *faults = tcase_create ("faults");
    tcase_add_checked_fixture (faults, s_setup, s_teardown);
    tcase_add_test (faults, dispatched_pairs_are_requeued_after_reopen);
    tcase_add_test (faults, uncommitted_writes_are_lost_and_committed_ones_kept);
    tcase_add_test (faults, a_full_disk_during_commit_keeps_what_was_committed);
    tcase_add_test (faults, a_full_disk_during_a_write_rolls_back_its_group_and_the_commit_says_so);
    tcase_add_test (faults, a_rejected_write_costs_only_itself);
    tcase_add_test (faults, a_busy_database_fails_the_write_and_leaves_the_store_usable);
    tcase_add_test (faults, a_reader_sees_committed_state_while_the_writer_holds_the_database);
    tcase_add_test (faults, a_store_deleted_under_its_writer_is_noticed_saved_and_refused_until_put_back);
    tcase_add_test (faults, its_wal_deleted_a_file_replaced_or_moved_away_is_noticed);
    tcase_add_test (faults, the_lock_file_deleted_under_its_writer_is_made_again_and_held);
    tcase_add_test (faults, a_store_gone_beside_its_lock_file_is_refused_and_a_first_start_is_said);
    tcase_add_test (faults, a_wal_missing_after_a_writer_that_did_not_stop_cleanly_is_refused);
    tcase_add_test (faults, a_store_locked_by_another_process_fails_at_once_and_keeps_dispatches);
    suite_add_tcase (suite, faults);

    TCase *log = tcase_create ("log");
    tcase_add_checked_fixture (log, s_setup, s_teardown);
    tcase_add_test (log, events_replay_an_experiment_in_order);
    tcase_add_test (log, event_payloads_write_numbers_and_long_names_as_printf_would);
    tcase_add_test (log, counts_by_state);
    tcase_add_test (log, store_fields_every_n_keeps_every_nth_blob);
    tcase_add_test (log, store_uncommitted_counts_writes_since_the_last_commit);
    tcase_add_test (log, a_listing_callback_may_write_to_the_store);
    suite_add_tcase (suite, log);

    TCase *run = tcase_create ("operating a run");
    tcase_add_checked_fixture (run, s_setup, s_teardown);
    tcase_add_test (run, an_experiment_is_created_once_with_its_source_and_settings);
    tcase_add_test (run, pairs_of_lists_an_experiments_pairs_with_their_times);
    tcase_add_test (run, pairs_of_reads_every_batch_up_to_its_limit);
    tcase_add_test (run, retry_moves_failed_pairs_back_with_attempts_counted_afresh);
    tcase_add_test (run, only_a_pending_pair_is_skipped_and_backfill_queues_it_again);
    tcase_add_test (run, a_retry_that_fails_midway_moves_nothing);
    tcase_add_test (run, settings_are_set_replaced_and_removed_with_an_event_each);
    tcase_add_test (run, settings_are_listed_in_batches_that_fn_may_write_between);
    tcase_add_test (run, files_of_lists_an_experiments_files_in_arrival_order);
    tcase_add_test (run, results_of_gives_each_result_with_its_field_and_times);
    tcase_add_test (run, events_of_kind_lists_one_kind_of_one_experiment);
    tcase_add_test (run, a_reader_lists_while_a_writer_adds_rows);
    tcase_add_test (run, a_second_writer_is_refused_naming_the_first_and_readers_are_not);
    tcase_add_test (run, a_version_4_database_is_upgraded_to_5_with_its_results_not_counted);
    tcase_add_test (run, a_version_6_database_is_upgraded_to_7_and_keeps_stereo_sets_of_four_frames);
    tcase_add_test (run, an_ensemble_partial_is_recorded_once_and_a_job_ends_with_its_field);
    tcase_add_test (run, a_checkpoint_marks_what_it_counts_and_a_crash_loses_both_or_neither);
    suite_add_tcase (suite, run);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
