// bench_farm.c — figures for the farm as a whole: the broker's durable full
// cycle with the noop processor, dispatch with a million pairs of history in
// the store, and PIV end to end through the real watcher, broker and agent.
// Starts the real programs ($PIVFARM_BIN) on ipc:// sockets in a temporary
// directory and kills every one of them, by pid, however the run ends.
// Prints figures next to their targets; never fails on time. Exit status:
// 0 done, 1 something broke (a program, the store, a file), 2 bad usage,
// 128 + N when signal N stopped it. This file holds the options and main;
// the sections are farm_cycle.c, farm_history.c, farm_piv.c and
// farm_latency.c, over farm_programs.c and farm_util.c (bench/farm.h).

#include "bench/farm.h"
#include "common/log.h"
#include "common/util.h"
#include "common/version.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: bench_farm [--quick] [--reps N] [--section N] [--commit-ms N]\n"
             "  --quick        smaller runs: %d pairs per cycle, %d of history, %d PIV pairs\n"
             "  --reps N       runs of each farm figure (default %d) and of each compute figure\n"
             "                 (default %d, --quick %d); best and median shown\n"
             "  --section N    only section N (1 full cycle, 2 history, 3 PIV end to end,\n"
             "                 4 latency mode: close -> feedback, throughput on/off)\n"
             "  --commit-ms N  broker/commit_ms of sections 1 and 2 (default: the broker's, 2)\n"
             "Programs from $PIVFARM_BIN (default ./bin); temporary files under $TMPDIR (/tmp).\n",
             CYCLE_PAIRS_QUICK, HISTORY_PAIRS_QUICK, PIV_PAIRS_QUICK, REPS_DEFAULT, COMPUTE_REPS,
             COMPUTE_REPS_QUICK);
}

// Parses a whole number from 'lo' to 'hi' for option 'name'; -1 if bad.
static int
s_number (const char *name, const char *text, int lo, int hi)
{
    char *end;
    errno = 0;
    long n = strtol (text, &end, 10);
    if (errno || end == text || *end || n < lo || n > hi) {
        log_error ("bad %s '%s': expected a whole number from %d to %d", name, text, lo, hi);
        return -1;
    }
    return (int) n;
}

// Whether section n runs (only: 0 for all).
static int
s_want (int only, int n)
{
    return only == 0 || only == n;
}

// Reads the arguments into run. -1 to go on, or the exit code.
static int
s_parse_args (int argc, char *argv[], bf_run_t *run)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--quick") == 0)
            run->quick = 1;
        else if (strcmp (argv[i], "--reps") == 0 && i + 1 < argc) {
            if ((run->reps = s_number ("--reps", argv[++i], 1, MAX_REPS)) < 0)
                return 2;
        }
        else if (strcmp (argv[i], "--section") == 0 && i + 1 < argc) {
            if ((run->only = s_number ("--section", argv[++i], 1, 4)) < 0)
                return 2;
        }
        else if (strcmp (argv[i], "--commit-ms") == 0 && i + 1 < argc) {
            if ((bf_commit_ms = s_number ("--commit-ms", argv[++i], 1, 10000)) < 0)
                return 2;
        }
        else if (strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0) {
            s_usage (stdout);
            return 0;
        }
        else {
            log_error ("bad argument '%s'", argv[i]);
            s_usage (stderr);
            return 2;
        }
    }
    int quick = run->quick;
    if (run->reps == 0)
        run->reps = REPS_DEFAULT;
    run->compute_reps = run->reps > 1 ? run->reps : quick ? COMPUTE_REPS_QUICK : COMPUTE_REPS;
    run->commit_ms = bf_commit_ms > 0 ? bf_commit_ms : 2;
    snprintf (run->commit_text, sizeof run->commit_text, bf_commit_ms > 0 ? "%d" : "%d (default)",
              run->commit_ms);
    run->cycle_pairs = quick ? CYCLE_PAIRS_QUICK : CYCLE_PAIRS;
    run->history_pairs = quick ? HISTORY_PAIRS_QUICK : HISTORY_PAIRS;
    run->history_run = quick ? HISTORY_RUN_PAIRS_QUICK : HISTORY_RUN_PAIRS;
    run->piv_pairs = quick ? PIV_PAIRS_QUICK : PIV_PAIRS;
    return -1;
}

// Our signal handler, and the programs the bench runs found. 0, or -1
// with the program that is missing logged.
static int
s_setup (void)
{
    const char *bin = getenv ("PIVFARM_BIN");
    if (bin && *bin)
        bf_bin_dir = bin;
    // Our handler, not czmq's: children are killed, then we die of the signal.
    zsys_handler_set (NULL);
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = bf_on_signal;
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGHUP, &sa, NULL);
    for (const char *p = "pivfarm-broker\0pivfarm-agent\0pivfarm-watcher\0pivfarm-synth\0"
                         "pivfarm-piv\0";
         *p; p += strlen (p) + 1) {
        char path[PATH_MAX];
        bf_bin (path, sizeof path, p);
        if (access (path, X_OK) != 0) {
            log_error ("cannot run '%s': %s (build with 'make programs'; PIVFARM_BIN names "
                       "the directory)",
                       path, strerror (errno));
            return -1;
        }
    }
    return 0;
}

// 0. The machine under the figures.
static void
s_section_machine (const bf_run_t *run)
{
    printf ("\n0. Machine\n");
    double fsync_s = bf_fsync_floor (run->root, 32);
    printf ("  %-44s %9ld\n", "CPUs online", sysconf (_SC_NPROCESSORS_ONLN));
    printf ("  %-44s %9s\n", "file system of the stores", bf_fs_name (run->root));
    printf ("  %-44s %9.2f  ms   (median of 32: the floor under one commit)\n",
            "4 KiB write + fdatasync", fsync_s * 1e3);
}


int
main (int argc, char *argv[])
{
    log_open ("bench_farm", 0);
    static bf_run_t run;
    int code = s_parse_args (argc, argv, &run);
    if (code >= 0)
        return code;
    if (s_setup () != 0)
        return 1;
    const char *tmp = getenv ("TMPDIR");
    snprintf (run.root, sizeof run.root, "%s/pivfarm-bench-farm-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp (run.root)) {
        log_error ("cannot make a temporary directory '%s': %s", run.root, strerror (errno));
        return 1;
    }

    double t_start = util_now ();
    printf ("pivfarm %s bench_farm: %d run(s) of each farm run, %d of each compute figure%s\n",
            PIVFARM_VERSION, run.reps, run.compute_reps, run.quick ? ", --quick" : "");
    printf ("programs from '%s'; farms on ipc:// under '%s'\n", bf_bin_dir, run.root);
    s_section_machine (&run);
    int rc = (s_want (run.only, 1) && bf_section_cycle (&run) != 0)
                     || (s_want (run.only, 2) && bf_section_history (&run) != 0)
                     || (s_want (run.only, 3) && bf_section_piv (&run) != 0)
                     || (s_want (run.only, 4) && bf_section_latency (&run) != 0)
                 ? 1
                 : 0;

    bf_kill_children ();
    if (rc == 0) {
        bf_rmtree (run.root);
        printf ("\nwhole run %.1f s\n", util_now () - t_start);
    }
    else if (bf_interrupted) {
        bf_rmtree (run.root);
        return 128 + bf_interrupted;
    }
    else {
        bf_rm_stores (run.root);
        log_error ("stopped; the programs' logs are kept in '%s'", run.root);
    }
    return rc;
}
