// testutil.h — what every Check suite of pivfarm needs: a fresh temporary
// directory per test, the paths of the built programs and of the shared
// real camera images, and running a program to capture its output.

#ifndef TESTS_TESTUTIL_H
#define TESTS_TESTUTIL_H

#include <stddef.h>

// Makes a new empty directory under $TMPDIR (or /tmp) and returns its path
// (static storage, valid until the next call). Aborts the test on failure.
const char *tu_tmpdir (void);
// Removes the directory made by tu_tmpdir and everything under it.
void tu_rmtree (const char *path);
// "<dir>/<name>" in a static rotating buffer (8 slots).
const char *tu_path (const char *dir, const char *name);
// $PIVFARM_BIN/<program> (default ./bin/<program>).
const char *tu_bin (const char *program);
// $PIVFARM_DATA/<name> (default ../shared/data/piv/<name>).
const char *tu_data (const char *name);
// Runs argv (argv[0] a path) with stdout and stderr captured into 'out'
// (NUL-terminated, truncated to outlen - 1). Returns the exit status, or
// -1 if it did not exit normally. Kills it if it runs longer than timeout_s.
int tu_run (char *const argv[], char *out, size_t outlen, int timeout_s);
// Reads a whole file into a malloc'd NUL-terminated buffer (caller frees);
// NULL if unreadable. *len_p gets the size if not NULL.
char *tu_slurp (const char *path, size_t *len_p);
// Writes len bytes to path; aborts the test on failure.
void tu_spit (const char *path, const void *data, size_t len);

// Starts argv (argv[0] a path) in the background, its stdout and stderr
// appended to 'log'. The child dies with the test process (PDEATHSIG), so
// a failed assertion leaves nothing running. Returns its pid.
int tu_spawn (char *const argv[], const char *log);
// Sends 'sig' to pid and reaps it (waiting up to timeout_s, then SIGKILL).
// Returns its exit status, 128 + signal if killed, -1 if it was not ours.
int tu_stop (int pid, int sig, int timeout_s);
// 1 while pid runs (not exited, not a zombie: reaps it if it has exited).
int tu_alive (int pid);

#endif
