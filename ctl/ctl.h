// ctl.h — what the files of pivctl share: the command line as parsed
// (args.c), the round trip to the broker (request.c), the helpers that
// print tables (print.c) and JSON (json.c), and one run function per
// command, grouped by file as the usage groups them: status.c (the run),
// steer.c, tail.c, replay.c, record.c, export.c and stats.c (the record:
// they read the store directly, not through the broker, opened by
// record.c; units.c gives the calibration of each result; h5.c, with its
// own header h5.h, writes HDF5), storage.c, keys.c; output.c puts every
// file they write in place. pivctl.c holds the command table and main. Not
// for use outside ctl/.

#ifndef CTL_CTL_H
#define CTL_CTL_H

#include "common/ask.h"
#include "common/config.h"
#include "common/iobench.h"
#include "common/jdoc.h"
#include "piv/calib.h"

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define TIMEOUT_MS 3000    // default --timeout
#define REPLAY_WAIT_S 3600 // default replay --wait
#define REPLAY_POLL_MS 200 // status polls while a replay runs
#define VACUUM_TIMEOUT_MS 3600000 // vacuum's answer, without --timeout
#define MAX_WORDS 64       // words of a command line (the broker's limit)

// Exit statuses (doc/conventions.md), and what a run function returns.
enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };
#define CTL_INTERRUPTED (-1) // a wait ended by SIGINT/SIGTERM

extern volatile sig_atomic_t ctl_stop; // SIGINT or SIGTERM received

// ---------------------------------------------------------------------------
// Command lines (args.c): each command's options, checked before anything
// is sent.

typedef struct {
    const char *name; // long name, without "--"
    char letter;      // short name, or 0
    int has_arg;      // takes a value
    int local;        // pivctl's own: not sent to the broker
} ctl_option_t;

typedef struct _ctl_t ctl_t;
typedef struct _ctl_args_t ctl_args_t;
typedef int (ctl_run_fn) (ctl_t *ctl, ctl_args_t *args);

typedef struct {
    const char *name;            // the command
    int min_words, max_words;    // positional arguments after it
    const char *usage;           // for errors
    const ctl_option_t *options; // accepted options, ending with {NULL}
    ctl_run_fn *run;             // what runs it
} ctl_command_t;

struct _ctl_args_t {
    const ctl_command_t *command; // the command
    char *words[MAX_WORDS];       // its positional arguments
    int nwords;                   // their count
    char *send[MAX_WORDS + 1];    // the line sent to the broker, as words
    int nsend;                    // their count
    const char *values[16];       // per option of command->options: its value, "" for a
                                  // flag given, NULL not given
};

struct _ctl_t {
    config_t cfg;   // the configuration
    int json;       // --json
    int timeout_ms; // --timeout
    ask_t *ask;     // the connection to broker/control, once made
};

// The value of option 'name' of args' command, or NULL.
const char *ctl_value (const ctl_args_t *args, const char *name);

// Parses a positive integer option (1 .. max) given as 'text'. 0 or -1 (logged).
int ctl_parse_count (const char *option, const char *text, long max, long *out);

// --timeout MS into ctl->timeout_ms. 0 or -1 (logged).
int ctl_parse_timeout (ctl_t *ctl, const char *text);

// Splits the words after the command into options and positional words,
// and the line for the broker (the command, its positional words and the
// options that are not pivctl's own, as the user wrote them). --json and
// --timeout are taken anywhere. 0, or EXIT_USAGE (logged).
int ctl_parse_args (ctl_t *ctl, const ctl_command_t *command, int argc, char **argv,
                    ctl_args_t *args);

// 0 if 'name' is a plain experiment name (path_check_component); else says
// why, naming the command, and returns -1.
int ctl_check_name (const char *command, const char *name);

// ---------------------------------------------------------------------------
// Asking the broker (request.c)

// Sends 'line' and waits for the reply. 0 with the body (caller frees) for
// 200; EXIT_USAGE when the broker found the line wrong (400), EXIT_FAILED
// when it refused otherwise (its one line printed) or did not answer;
// CTL_INTERRUPTED on SIGINT/SIGTERM.
int ctl_ask (ctl_t *ctl, const char *line, char **body_p);

// ctl_ask, then the body read as JSON into *doc_p. Same returns.
int ctl_ask_json (ctl_t *ctl, const char *line, char **body_p, jdoc_t **doc_p);

// Prints a reply's JSON for a table.
typedef void (ctl_print_fn) (jdoc_t *doc, ctl_args_t *args);

// Sends the command line; prints the reply as it is (--json) or with 'print'.
// EXIT_OK, or as ctl_ask (an interruption is EXIT_FAILED).
int ctl_run_printed (ctl_t *ctl, ctl_args_t *args, ctl_print_fn *print);

// A run function that is ctl_run_printed with 'print'.
#define CTL_PRINTED(run, print)                                                                    \
    int run (ctl_t *ctl, ctl_args_t *args)                                                         \
    {                                                                                              \
        return ctl_run_printed (ctl, args, print);                                                 \
    }

// Asks "status -e NAME" (the name quoted as cli_split reads it): the status
// of that experiment alone, however many the broker has. As ctl_ask_json;
// EXIT_FAILED (said) for a name too long to ask for.
int ctl_ask_status_of (ctl_t *ctl, const char *name, char **body_p, jdoc_t **doc_p);

// For the commands that start something and wait for its end (replay,
// archive, release): reads --wait into *wait_s, sends the command line and
// gives the answer in *doc_p (caller destroys; NULL: not wanted). EXIT_OK,
// EXIT_USAGE or EXIT_FAILED (logged).
int ctl_start_waited (ctl_t *ctl, ctl_args_t *args, long *wait_s, jdoc_t **doc_p);

// Sleeps ms, or less when a signal comes.
void ctl_nap (int ms);

// ---------------------------------------------------------------------------
// Printing tables (print.c): numbers that do not exist (JSON null) print
// as "-". The helpers return rotating static buffers, so that several fit
// in a printf.

// Every error of pivctl: one line on stderr, "pivctl: " first.
void ctl_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

// x with printf 'fmt', or "-" for NAN.
const char *ctl_num (double x, const char *fmt);
// A duration in ms, readable: "85 ms", "2.3 s", "-".
const char *ctl_ms (double ms);
// A longer duration in seconds: "45 s", "3 min 20 s", "2 h 05 min".
const char *ctl_duration (double s);
// Local time of day of a time in ns: "14:02:11.123"; "-" for 0 (not yet).
const char *ctl_clock (int64_t ns);
// Local date of a time in ns: "2024-05-06".
const char *ctl_date (int64_t ns);
// "experiment 'run7'" or "all experiments (the default)" for a reply's scope.
const char *ctl_scope (jdoc_t *doc);
// A rate limit: "12.5 pairs/s" or "none" (null: max).
const char *ctl_limit (double rate);
// The width a column of strings needs: the longest, within [min, max].
int ctl_width (jdoc_t *doc, const char *array, const char *member, int min, int max);
// "[##########----------]  50%" (one static buffer: one per printf).
const char *ctl_bar (double part, double whole, int width);

// ---------------------------------------------------------------------------
// The figures of an experiment in a status reply (status.c)

typedef struct {
    const char *name;
    double files, pending, dispatched, done, failed, skipped;
    double queue, arrivals, rate10, rate60, p50, p99, limit;
    const char *policy;
    int paused;
    int replay;            // 1 if a replay
    const char *replay_of; // what it replays
    double replay_speed, replay_sent, replay_total;
    int replay_finished, replay_feedback_only;
} ctl_exp_t;

// Experiment i of doc's "experiments" into *e (strings belong to doc).
void ctl_exp_read (jdoc_t *doc, int i, ctl_exp_t *e);

// The index of experiment 'name' in doc's "experiments", or -1.
int ctl_exp_index (jdoc_t *doc, const char *name);

// "CRITICAL" or "WARNING" for warning i of doc's "warnings".
const char *ctl_warning_level (jdoc_t *doc, int i);

// ---------------------------------------------------------------------------
// The record (record.c reads the store; replay.c reports)

// Makes 'path' and its missing parents. 0, or -1 with err naming the path.
int ctl_mkdirs (const char *path, char *err, size_t errlen);
// ctl_mkdirs for the directory of file 'path' (nothing without a '/').
int ctl_mkdirs_parent (const char *path, char *err, size_t errlen);

typedef struct _store_t store_t;

// Opens the store read-only and finds experiment 'name' (its id in
// *experiment). The store, or NULL (logged: the store cannot be opened, or
// no such experiment).
store_t *ctl_open_store (ctl_t *ctl, const char *name, int64_t *experiment);

// Makes room for one more item in a malloc'd array (*array_p, *size items
// allocated, count used): doubles it when full. 0, or -1 (no memory; the
// array unchanged).
int ctl_grow (void *array_p, size_t *size, size_t count, size_t item);

// The file an export writes for pair 'pair' of stem 'stem', relative to
// its directory, with extension 'ext', into buf: the stem as it is, its
// '/' making subdirectories as the camera's did (the farm's rule for names,
// path_check_relative, keeps out control characters, '.' and '..' steps
// and absolute paths); a stem whose last part is empty (frames called
// '_a.tif' in a subdirectory) is named by its pair, 'cam1/pair-17.txt',
// never a hidden '.txt'. 0, or -1 with why (at most PATH_WHY bytes) when
// that is no plain relative path (a stem the farm would not have made).
int ctl_stem_file (const char *stem, int64_t pair, const char *ext, char *buf, size_t size,
                   char *why, size_t whylen);

// ---------------------------------------------------------------------------
// Files pivctl writes (output.c): export, stats, keygen. Each is written as
// a temporary beside its name (unpredictable, made with O_EXCL | O_NOFOLLOW,
// mode 0600 while written), synced, then renamed to it without replacing
// anything: a file or a link already there is refused and never followed;
// --force replaces the name (a link itself, never what it points to).

typedef struct {
    char path[PATH_MAX + NAME_MAX + 2]; // the destination, for messages
    char name[NAME_MAX + 1];            // its last component, in dirfd
    char temp[NAME_MAX + 1];            // the temporary's, in dirfd
    char name_by_fd[32];                // "/proc/self/fd/N" (ctl_out_name)
    int dirfd;                          // the destination's directory
    int fd;                             // the temporary
    FILE *file;                         // stdio over fd, for the writer
    mode_t mode;                        // the file's, set at the commit
    int force;                          // --force: replace what is at the name
    int state;                          // 0 nothing held, 1 the temporary, 2 put in place
                                        // (nothing held)
    dev_t placed_dev;                   // what was put in place (ctl_out_retract)
    ino_t placed_ino;
} ctl_out_t;

// Whether pivctl may write 'rel' beneath 'dir' (no link leading out of dir
// followed), or, dir NULL, at the operator's path 'rel' (its directories
// followed as given; its last component never). 0: nothing there (or
// 'force' and no directory); 1: something is (err "cannot write 'P': it
// exists (a symbolic link)"); -1: it cannot be written there (err says why:
// a directory in the way, a link out of dir, ...).
int ctl_out_check (const char *dir, const char *rel, int force, char *err, size_t errlen);

// Starts writing 'rel' as ctl_out_check names it: checks it alike, makes its
// directories beneath dir, then the temporary beside it. 'mode': the file's,
// set exactly at the commit (0: 0666 less the umask, as fopen's). 0 with
// self->file open for writing; -1 with err, nothing left behind.
int ctl_out_init (ctl_out_t *self, const char *dir, const char *rel, mode_t mode, int force,
                  char *err, size_t errlen);

// A name that opens the temporary itself whatever becomes of its name in the
// directory, for libraries that open files by name (HDF5, czmq):
// /proc/self/fd/N. NULL with err when /proc is not mounted.
const char *ctl_out_name (ctl_out_t *self, char *err, size_t errlen);

// Flushes, syncs and puts the temporary at its name. 0, nothing held any
// more; or -1 with err naming the file, the temporary removed and the name
// untouched: a write failed, or (without force) something appeared at the
// name meanwhile.
int ctl_out_commit (ctl_out_t *self, char *err, size_t errlen);

// After ctl_out_commit, for files that stand or fall together: removes the
// file put in place if it is still the one there (by path: no descriptor
// is held after the commit).
void ctl_out_retract (ctl_out_t *self);

// Before ctl_out_commit: removes the temporary and lets go of the
// directory. Accepts a zeroed, committed or released self.
void ctl_out_release (ctl_out_t *self);

// ---------------------------------------------------------------------------
// Units (units.c): the calibration in force for each result, the one rule
// export and stats apply.

typedef struct _ctl_calibs_t ctl_calibs_t;

// The calibration history of 'experiment': its "calibration" setting
// events, the global scope's (experiment 0) and cfg's default. NULL with
// err on a store error or no memory.
ctl_calibs_t *ctl_calibs_load (store_t *store, int64_t experiment, const config_t *cfg,
                               char *err, size_t errlen);
void ctl_calibs_destroy (ctl_calibs_t **self_p);

// The calibration in force for a result recorded at recorded_ns: the
// experiment's latest setting made before the result's epoch ended ("none"
// included; an epoch ends where a `calibrate --from now` began the next,
// the latest setting of all without one), else the global scope's, else the
// configuration's; not calibrated without any. INT64_MAX: the one in force
// now.
void ctl_calib_at (const ctl_calibs_t *self, int64_t recorded_ns, piv_calib_t *c);

// 1 if the experiment was ever calibrated (its own setting, the global
// one or the configuration's).
int ctl_calibs_ever (const ctl_calibs_t *self);

// A message when a recorded calibration could not be read (taken as not
// calibrated), else NULL.
const char *ctl_calibs_warning (const ctl_calibs_t *self);

// 1 if a and b convert alike (both not calibrated, or the same numbers).
int ctl_calib_same (const piv_calib_t *a, const piv_calib_t *b);

// A stem seen in the original or the replay alone.
typedef struct {
    const char *stem; // the stem
    int in_replay;    // 1: seen in the replay alone, 0: in the original alone
} ctl_missing_t;

// What the comparison of a replay with its original found.
typedef struct {
    const char *of, *as;     // the original, the replay
    double speed;            // the replay's speed, NAN for max
    long matched;            // stems in both
    long only_original;      // stems in the original alone
    long only_replay;        // stems in the replay alone
    ctl_missing_t *missing;  // those, in one order (NULL: no memory to list them)
    long nmissing;           // how many are listed in missing
    long compared;           // pairs whose fields were compared
    long grid_differs;       // of them, fields on different grids
    double max_difference;   // max (|du|, |dv|) over them, NAN without any
    long files;              // files matched by name, for the pacing
    double expected_s;       // expected duration of the replay (last matched file)
    double actual_s;         // its duration
    double error_percent;    // (actual - expected) / expected, NAN without a duration
    double max_deviation_ms; // largest |actual_i - expected_i|, NAN without files
} ctl_compare_t;

// Compares experiment 'name' (the replay) with 'of' in the store and
// prints the report (ctl_print_compare or ctl_json_compare). EXIT_OK, or
// EXIT_FAILED (logged).
int ctl_compare (ctl_t *ctl, const char *of, const char *name, double speed);

// The comparison's report as text (replay.c).
void ctl_print_compare (const ctl_compare_t *c);

// ---------------------------------------------------------------------------
// JSON that pivctl writes itself (json.c, with common/jout: one line on
// stdout each); replies of the broker are printed as they came.

// export's summary ('dir': the directory, or the HDF5 file).
void ctl_json_export (const char *experiment, const char *dir, const char *format,
                      const char *units, long written, long missing, long errors);
// replay --feedback-only's summary.
void ctl_json_republished (const char *experiment, const char *as, double sent, double speed);
// The comparison of a replay with its original.
void ctl_json_compare (const ctl_compare_t *c);
// A saved set of run statistics, as stats.c read it.
typedef struct {
    struct _piv_stats_t *stats; // decoded (piv/stats.h)
    piv_calib_t c;              // its calibration
    char *key;                  // the set's key (grid, settings, calibration)
    char *settings;             // its PIV settings
    char *calibration;          // its calibration's text
    int64_t first_pair, last_pair, updated_ns;
} ctl_stats_set_t;
// stats --json: the summary of each set; 'source' "broker" (a checkpoint
// just made) or "store" (the last one saved).
void ctl_json_stats (const char *experiment, const char *source, const ctl_stats_set_t *sets,
                     int count);
// iobench's rows; need in bytes/s (0: not asked).
void ctl_json_iobench (const char *dir, const iobench_row_t *rows, int best, double need,
                       int sustains);

// ---------------------------------------------------------------------------
// The commands: a run function each, given the parsed command line.
// EXIT_OK, EXIT_FAILED or EXIT_USAGE (logged).

// status.c: the run
int ctl_run_status (ctl_t *ctl, ctl_args_t *args);
int ctl_run_agents (ctl_t *ctl, ctl_args_t *args);
int ctl_run_experiments (ctl_t *ctl, ctl_args_t *args);
int ctl_run_pairs (ctl_t *ctl, ctl_args_t *args);
int ctl_run_log (ctl_t *ctl, ctl_args_t *args);
// steer.c: steering (ctl_run_pause for pause and resume, ctl_run_moved for
// retry and backfill)
int ctl_run_rate (ctl_t *ctl, ctl_args_t *args);
int ctl_run_policy (ctl_t *ctl, ctl_args_t *args);
int ctl_run_pause (ctl_t *ctl, ctl_args_t *args);
int ctl_run_moved (ctl_t *ctl, ctl_args_t *args);
int ctl_run_feedback (ctl_t *ctl, ctl_args_t *args);
// tail.c, record.c, replay.c: the stream and the record
int ctl_run_tail (ctl_t *ctl, ctl_args_t *args);
int ctl_run_export (ctl_t *ctl, ctl_args_t *args);
// stats.c: the statistics of a run; calibrate and mask (steer.c)
int ctl_run_stats (ctl_t *ctl, ctl_args_t *args);
int ctl_run_calibrate (ctl_t *ctl, ctl_args_t *args);
int ctl_run_mask (ctl_t *ctl, ctl_args_t *args);
int ctl_run_piv (ctl_t *ctl, ctl_args_t *args);
// ensemble.c: ensemble jobs, and export --ensemble (ctl_run_export hands
// it over)
int ctl_run_ensemble (ctl_t *ctl, ctl_args_t *args);
int ctl_export_ensemble (ctl_t *ctl, ctl_args_t *args);
int ctl_run_replay (ctl_t *ctl, ctl_args_t *args);
// storage.c: storage (ctl_run_archive for archive and release)
int ctl_run_provision (ctl_t *ctl, ctl_args_t *args);
int ctl_run_archive (ctl_t *ctl, ctl_args_t *args);
int ctl_run_iobench (ctl_t *ctl, ctl_args_t *args);
int ctl_run_warnings (ctl_t *ctl, ctl_args_t *args);
// and the store's lifecycle: backup (waits for the copy unless --no-wait)
int ctl_run_backup (ctl_t *ctl, ctl_args_t *args);
int ctl_run_purge (ctl_t *ctl, ctl_args_t *args);
int ctl_run_vacuum (ctl_t *ctl, ctl_args_t *args);
int ctl_run_forget_agents (ctl_t *ctl, ctl_args_t *args);
// keys.c: security
int ctl_run_keygen (ctl_t *ctl, ctl_args_t *args);

#endif
