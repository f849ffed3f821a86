// testutil.h — what every Check suite of pivfarm needs: a fresh temporary
// directory per test, the paths of the built programs and of the shared
// real camera images, and running a program to capture its output.

#ifndef TESTS_TESTUTIL_H
#define TESTS_TESTUTIL_H

#include "common/proto.h"
#include "piv/field.h"

#include <check.h>
#include <czmq.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// Makes a new empty directory under $TMPDIR (or /tmp) and returns its path
// (static storage, valid until the next call). Aborts the test on failure.
const char *tu_tmpdir (void);
// Removes the directory made by tu_tmpdir and everything under it.
void tu_rmtree (const char *path);
// "<dir>/<name>" in a static rotating buffer (8 slots).
const char *tu_path (const char *dir, const char *name);
// pivfarm-calib on case E's given points (tests/data/stereo/caseE: both
// cameras, the 7 planes' XML) writing the rig's calibration to 'out'; its
// exit status, its output in out_text.
int tu_calib_case_e (const char *out, char *out_text, size_t out_len);
// The same in slots of its own (128, apart from those tu_path, tu_bin and
// tu_data share), a path too long for them failing the test: a suite's
// paths in its test directory, of which one test may hold many at once.
const char *tu_file (const char *dir, const char *name);
// $PIVFARM_BIN/<program> (default ./bin/<program>).
const char *tu_bin (const char *program);
// $PIVFARM_DATA/<name> (default tests/data/<name>).
const char *tu_data (const char *name);
// Runs argv (argv[0] a path) with stdout and stderr captured into 'out'
// (NUL-terminated, truncated to outlen - 1). Returns the exit status, or
// -1 if it did not exit normally. Kills it if it runs longer than timeout_s.
int tu_run (char *const argv[], char *out, size_t outlen, int timeout_s);
// tu_run of bin/<program> (tu_bin) with args (NULL-terminated, at most 62).
int tu_run_bin (const char *program, const char *const *args, char *out, size_t outlen,
                int timeout_s);
// Reads a whole file into a malloc'd NUL-terminated buffer (caller frees);
// NULL if unreadable. *len_p gets the size if not NULL.
char *tu_slurp (const char *path, size_t *len_p);
// The source tree's file 'path' (the tree $PIVFARM_BIN is in) as prose, so
// that a list a doc writes can be compared with the table it lists:
// backquotes dropped, "\|" (a table cell's |) read as '|', a line's leading
// '#' (a comment of the configuration file) dropped, each run of white space
// one space. malloc'd (caller frees); fails the test if it cannot be read.
char *tu_doc (const char *path);
// Writes len bytes to path; aborts the test on failure.
void tu_spit (const char *path, const void *data, size_t len);
// Copies the file 'from' to 'to' (made or truncated); fails the test if
// either cannot be.
void tu_copy (const char *from, const char *to);
// The entries of directory 'dir' ("." and ".." aside); fails the test if
// one is a hidden name (a temporary such as ".NAME.XXXXXXXX.part" left
// behind by a program that writes through one).
int tu_entries (const char *dir);

// Starts argv (argv[0] a path) in the background, its stdout and stderr
// appended to 'log'. The child dies with the test process (PDEATHSIG), so
// a failed assertion leaves nothing running. Returns its pid.
int tu_spawn (char *const argv[], const char *log);
// Sends 'sig' to pid and reaps it (waiting up to timeout_s, then SIGKILL).
// Returns its exit status, 128 + signal if killed, -1 if it was not ours.
int tu_stop (int pid, int sig, int timeout_s);
// 1 while pid runs (not exited, not a zombie: reaps it if it has exited).
int tu_alive (int pid);

// A farm for the integration suites: the real programs in a temporary
// directory on ipc:// sockets, the camera files landing in data/exp1.
typedef struct {
    const char *dir;    // the directory (malloc'd)
    char conf[4096];    // its configuration file
    int broker;         // pids, 0 when not running: tu_farm_release kills them
    int watcher;
    int agents[4];
    int others[4];      // anything else the test started
} tu_farm_t;

// Pair counts of 'exp1' as the store says (read-only); -1 where the store
// cannot be read yet.
typedef struct {
    int64_t files, pending, dispatched, done, failed, skipped;
} tu_counts_t;

// A new farm directory (data/exp1/, src/) and its configuration: processor
// piv, one thread, passes 32,16.
void tu_farm_init (tu_farm_t *farm);
// SIGKILLs every process of the farm, removes its directory.
void tu_farm_release (tu_farm_t *farm);
// A suite's one farm a test, as a Check fixture: tu_farm_setup
// (tu_farm_init of tu_the_farm) and tu_farm_teardown (tu_farm_release).
extern tu_farm_t tu_the_farm;
void tu_farm_setup (void);
void tu_farm_teardown (void);
// Writes the configuration: the agent's processor and threads, the PIV
// passes (one iteration), 'extra' (may be "") appended to the agent section.
void tu_farm_conf (tu_farm_t *farm, const char *processor, int threads, const char *passes,
                   const char *extra);
// Starts bin/<program> -c conf [extra1 [extra2]], output into <dir>/<log>.
int tu_farm_start (tu_farm_t *farm, const char *program, const char *log, const char *extra1,
                   const char *extra2);
// A farm busy with slow work: n placeholder pairs f_<i> landed for the
// broker, the watcher and one agent '--id id' (log <id>.log) of 'threads'
// threads whose processor (exec: <dir>/slow.sh) takes 'seconds' a pair and
// writes nothing; returns once the agent holds min(n, threads) tasks.
void tu_farm_slow (tu_farm_t *farm, int seconds, int n, int threads, const char *id);
// Starts the broker and waits until its store exists.
void tu_farm_start_broker (tu_farm_t *farm);
// Renders n synthetic pairs (the default uniform 3.3, -1.7 px, 256 x 256)
// as src/<prefix>_<i>_{a,b}.tif.
void tu_farm_render (tu_farm_t *farm, int n, const char *prefix);
// Copies the pairs first .. last of src/ into data/exp1 as a camera PC does
// (every other file under a temporary name, then renamed), gap_us between
// pairs.
void tu_farm_land (tu_farm_t *farm, const char *prefix, int first, int last, int gap_us);
tu_counts_t tu_farm_counts (tu_farm_t *farm);
// Replaces the first 'old' in the farm's configuration file with 'new';
// fails the test if 'old' is not there.
void tu_farm_conf_replace (tu_farm_t *farm, const char *old, const char *new);
// Writes n placeholder pairs src/<prefix>_<i>_{a,b}.tif of a few bytes, for
// the noop processor, which reads nothing: thousands of pairs in no time.
void tu_farm_fake (tu_farm_t *farm, int n, const char *prefix);
// tu_farm_land in a child process that dies with the test; returns its pid
// (it exits 0 once every pair has landed).
int tu_farm_land_async (tu_farm_t *farm, const char *prefix, int first, int last, int gap_us);
// The integer of 'sql' over the SQLite file 'path' (a store or a copy of
// it), opened read-only; -1 when it cannot be read.
int64_t tu_sql (const char *path, const char *sql);
// Takes the store at 'path' (its broker stopped) back to the schema before
// the current one, as the previous version's broker left it (the tables the
// last migration adds dropped); returns that version. Fails the test if it
// cannot.
int tu_store_to_previous (const char *path);
// The integer in the first column of the first row of 'sql' (printf-style)
// over the farm's store, opened read-only; -1 if it cannot be read.
int64_t tu_farm_sql (tu_farm_t *farm, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// The same for a text: malloc'd (caller frees), NULL if there is none.
char *tu_farm_sql_text (tu_farm_t *farm, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
// 1 when <dir>/<log> holds 'text' (waiting up to timeout_ms for it).
int tu_farm_log_has (tu_farm_t *farm, const char *log, const char *text, int timeout_ms);
// The times 'text' occurs in <farm>/<log> (0 without the file).
int tu_farm_log_count (tu_farm_t *farm, const char *log, const char *text);
// Waits until 'done' pairs of exp1 are done and none is pending or out (at
// most timeout_s); returns the counts.
tu_counts_t tu_farm_wait_done (tu_farm_t *farm, int64_t done, int timeout_s);

// Runs pivctl -c <farm's conf> --timeout 30000 with the words from 'first'
// (NULL-terminated): its exit status, its output (stdout and stderr) in out.
int tu_farm_pivctl_v (tu_farm_t *farm, char *out, size_t len, const char *first, va_list ap);
int tu_farm_pivctl (tu_farm_t *farm, char *out, size_t len, const char *first, ...);
// The same with '--json' last, which must succeed (the test fails
// otherwise): its answer parsed, progress lines before it skipped (caller
// destroys).
struct _jdoc_t *tu_farm_ask_v (tu_farm_t *farm, const char *first, va_list ap);

// TIFF files made with libtiff, for the limits of the loader (issue 23):
// a w x h frame of 'bits' (8 or 16) zeros, strips of 'rows' rows, stored
// with 'compression' (COMPRESSION_*): what a decompression bomb is.
void tu_tiff_zeros (const char *path, int w, int h, int bits, int compression, int rows);
// A real frame 'src' rewritten as 'dst' with 'compression', 16 rows a
// strip: its samples, photometric and colour map as they are.
void tu_tiff_recompress (const char *src, const char *dst, int compression);
// The peak resident memory of process pid (VmHWM of /proc/PID/status), in
// KiB; -1 if it cannot be read.
long tu_peak_rss_kb (int pid);
// Makes this process's peak its current resident memory (clear_refs 5):
// 0, or -1 where the kernel cannot.
int tu_peak_rss_reset (void);

// Waits up to timeout_ms for a message 'command' on a DEALER (alone or in a
// BATCH; of 'pair' unless 0); fills out (the caller releases it). As an
// 'agent' (on the work socket) it heartbeats meanwhile. 1 if it came.
int tu_proto_expect (zsock_t *sock, int agent, char command, uint64_t pair, proto_msg_t *out,
                     int timeout_ms);

// An agent of the farm spoken for over the protocol, to record a field no
// processor makes yet (a stereo field with w): a DEALER on the work socket
// says HELLO as 'id' (capabilities "noop") and READY 1, waits for a TASK
// (heartbeating; a pair of the farm's files must land meanwhile), answers
// RESULT with 'field' encoded (piv_field_encode: PVF3 when it has w) and
// its figures, and waits for the broker's RECORDED. The pair's id, or 0 if
// no TASK or no RECORDED came within timeout_ms (the caller fails).
uint64_t tu_farm_agent_result (tu_farm_t *farm, const char *id, const piv_field_t *field,
                               int timeout_ms);

// A seeded uniform in (0, 1) (splitmix64: the state advances) and a
// standard Gaussian from two of them (Box-Muller).
double tu_uniform (uint64_t *state);
double tu_gauss (uint64_t *state);

// Runs a suite (CK_NORMAL output) and frees it: the exit status of a
// suite program, 0 when every test passed, 1 otherwise.
int tu_run_suite (Suite *suite);

#endif
