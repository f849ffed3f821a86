// bench_farm.c — figures for the farm as a whole: the broker's durable full
// cycle with the noop processor, dispatch with a million pairs of history in
// the store, and PIV end to end through the real watcher, broker and agent.
// Starts the real programs ($PIVFARM_BIN) on ipc:// sockets in a temporary
// directory and kills every one of them, by pid, however the run ends.
// Prints figures next to their targets; never fails on time. Exit status:
// 0 done, 1 something broke (a program, the store, a file), 2 bad usage,
// 128 + N when signal N stopped it.

#include "bench/floor.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/util.h"
#include "common/version.h"
#include "piv/image.h"
#include "piv/piv.h"
#include "store/store.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// Sizes of the runs, default and --quick.
#define CYCLE_PAIRS 100000
#define CYCLE_PAIRS_QUICK 20000
#define HISTORY_PAIRS 1000000
#define HISTORY_PAIRS_QUICK 200000
#define HISTORY_RUN_PAIRS 50000
#define HISTORY_RUN_PAIRS_QUICK 10000
#define PIV_PAIRS 20
#define PIV_PAIRS_QUICK 8
#define REPS_DEFAULT 1    // farm runs: 100,000 pairs take a quarter of a minute each
#define COMPUTE_REPS 3    // PIV compute baselines: a few seconds each
#define COMPUTE_REPS_QUICK 2
#define MAX_REPS 20
#define MAX_WINDOWS 1200  // 1 s windows of a run

#define WINDOW 20000          // FILE events sent and not yet acknowledged, at most
#define FILE_BATCH 64         // FILE events a message, as a watcher sends one wake-up's
#define HISTORY_COMMIT 10000  // history pairs per commit
#define POLL_S 0.05           // the store is read this often during a run
#define STALL_S 3.0           // no ACK for this long: the outstanding ones are lost
#define GIVE_UP_S 60.0        // no progress at all for this long: the run failed
#define START_S 300.0         // at most this long for the broker to open its store
#define MAX_CHILDREN 16
#define MAX_AGENTS 4
#define ERRLEN 512

// Section 3: the layout (2048 x 2048, single pass 32 px, 50 %).
#define PIV_SIZE "2048x2048"
#define PIV_PASSES "32"
#define IDLE_S 0.4  // latency run: pause after each result (> the compute time)

// ---------------------------------------------------------------------------
// Children: every program started is in s_children until it is reaped, so
// that any exit (normal, failure, SIGINT) kills what is left. The children
// also die with us (PR_SET_PDEATHSIG) should we be killed outright.

static pid_t s_children[MAX_CHILDREN];

static void
s_forget_child (pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s_children[i] == pid)
            s_children[i] = 0;
}

// Starts argv (argv[0] a path) with stdin from /dev/null and stdout and
// stderr appended to 'log'. Returns its pid, or -1.
static pid_t
s_spawn (char *const argv[], const char *log)
{
    int slot = -1;
    for (int i = 0; i < MAX_CHILDREN && slot < 0; i++)
        if (s_children[i] == 0)
            slot = i;
    if (slot < 0) {
        log_error ("cannot start '%s': already %d programs running", argv[0], MAX_CHILDREN);
        return -1;
    }
    pid_t parent = getpid ();
    fflush (stdout);
    fflush (stderr);
    pid_t pid = fork ();
    if (pid < 0) {
        log_error ("cannot start '%s': %s", argv[0], strerror (errno));
        return -1;
    }
    if (pid == 0) {
        // Only async-signal-safe calls from here to exec: we are a copy of
        // a process with threads (czmq's).
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (127);
        int in = open ("/dev/null", O_RDONLY);
        int out = open (log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in >= 0)
            dup2 (in, 0);
        if (out >= 0) {
            dup2 (out, 1);
            dup2 (out, 2);
        }
        execv (argv[0], argv);
        static const char msg[] = "bench_farm: cannot run the program\n";
        ssize_t n = write (2, msg, sizeof msg - 1);
        (void) n;
        _exit (127);
    }
    s_children[slot] = pid;
    return pid;
}

// Sends 'sig' to pid and reaps it, waiting up to timeout_s before SIGKILL.
// Returns its exit status, 128 + signal if killed, -1 if it was not ours.
static int
s_stop (pid_t pid, int sig, double timeout_s)
{
    if (pid <= 0)
        return -1;
    kill (pid, sig);
    int status = 0;
    double until = util_now () + timeout_s;
    pid_t got;
    while ((got = waitpid (pid, &status, WNOHANG)) == 0 && util_now () < until)
        usleep (10000);
    if (got == 0) {
        kill (pid, SIGKILL);
        got = waitpid (pid, &status, 0);
    }
    s_forget_child (pid);
    if (got != pid)
        return -1;
    return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

// Waits for pid to exit; its exit status, 128 + signal, or -1.
static int
s_wait (pid_t pid)
{
    int status = 0;
    pid_t got;
    while ((got = waitpid (pid, &status, 0)) < 0 && errno == EINTR)
        ;
    s_forget_child (pid);
    if (got != pid)
        return -1;
    return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

// 1 while pid runs (reaps it if it has exited).
static int
s_alive (pid_t pid)
{
    int status;
    if (pid <= 0)
        return 0;
    if (waitpid (pid, &status, WNOHANG) == 0)
        return 1;
    s_forget_child (pid);
    return 0;
}

static void
s_kill_children (void)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s_children[i] > 0) {
            kill (s_children[i], SIGKILL);
            waitpid (s_children[i], NULL, 0);
            s_children[i] = 0;
        }
}

static volatile sig_atomic_t s_interrupted;  // the signal that asked us to stop, or 0

// SIGINT, SIGTERM, SIGHUP: the children die now; every wait of the bench
// sees the flag (or its child gone) and the run unwinds through its
// clean-up, which removes the temporary directory.
static void
s_on_signal (int sig)
{
    s_interrupted = sig;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s_children[i] > 0)
            kill (s_children[i], SIGKILL);
}

static int
s_stopped (void)
{
    if (s_interrupted)
        log_error ("interrupted by signal %d", (int) s_interrupted);
    return s_interrupted != 0;
}

// ---------------------------------------------------------------------------
// Small helpers

static int
s_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// Best (minimum, or maximum for rates) and median of n values; sorts v.
typedef struct {
    double best;    // the smallest time, or the largest rate
    double median;  // the median
} s_stat_t;

static s_stat_t
s_stat (double *v, int n, int rate)
{
    qsort (v, (size_t) n, sizeof *v, s_cmp_double);
    double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return (s_stat_t) {rate ? v[n - 1] : v[0], median};
}

// The p-quantile (0..1) of n sorted values, nearest rank.
static double
s_quantile (const double *sorted, int n, double p)
{
    int k = (int) (p * n + 0.999999) - 1;
    return sorted[k < 0 ? 0 : k >= n ? n - 1 : k];
}

// VmHWM and VmRSS of pid, kB (-1 if unreadable).
static void
s_memory (pid_t pid, long *hwm_kb, long *rss_kb)
{
    char path[64], line[256];
    *hwm_kb = *rss_kb = -1;
    snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *f = fopen (path, "r");
    if (!f)
        return;
    while (fgets (line, sizeof line, f)) {
        if (strncmp (line, "VmHWM:", 6) == 0)
            *hwm_kb = strtol (line + 6, NULL, 10);
        else if (strncmp (line, "VmRSS:", 6) == 0)
            *rss_kb = strtol (line + 6, NULL, 10);
    }
    fclose (f);
}

// CPU time (user + system) pid has used, s; -1 if unreadable.
static double
s_cpu (pid_t pid)
{
    char path[64], buf[1024];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *f = fopen (path, "r");
    if (!f)
        return -1;
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf[n] = '\0';
    // Fields after the command name (which may hold anything, in parens):
    // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime stime.
    const char *p = strrchr (buf, ')');
    unsigned long utime, stime;
    if (!p || sscanf (p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                      &stime)
                  != 2)
        return -1;
    return (double) (utime + stime) / (double) sysconf (_SC_CLK_TCK);
}

// CPU time this process (all its threads) has used, s.
static double
s_cpu_self (void)
{
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec
           + ru.ru_stime.tv_usec * 1e-6;
}

static int
s_rm_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st, (void) flag, (void) ftw;
    remove (path);
    return 0;
}

static void
s_rmtree (const char *path)
{
    nftw (path, s_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int
s_rm_store (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st, (void) ftw;
    const char *dot = strrchr (path, '.');
    if (flag == FTW_F && dot
        && (strcmp (dot, ".db") == 0 || strcmp (dot, ".db-wal") == 0
            || strcmp (dot, ".db-shm") == 0 || strcmp (dot, ".tif") == 0))
        remove (path);
    return 0;
}

// After a failure: the logs stay for reading, the stores (up to a GiB with
// the history) and frames go.
static void
s_rm_stores (const char *path)
{
    nftw (path, s_rm_store, 16, FTW_PHYS);
}

// Moves a store and its -wal and -shm files (if any). 0 or -1.
static int
s_move_db (const char *from, const char *to)
{
    static const char *const sides[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char a[PATH_MAX + 40], b[PATH_MAX + 40];
        snprintf (a, sizeof a, "%s%s", from, sides[i]);
        snprintf (b, sizeof b, "%s%s", to, sides[i]);
        if (rename (a, b) != 0 && (i == 0 || errno != ENOENT)) {
            log_error ("cannot move '%s' to '%s': %s", a, b, strerror (errno));
            return -1;
        }
    }
    return 0;
}

static void
s_remove_db (const char *db)
{
    static const char *const sides[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char path[PATH_MAX + 40];
        snprintf (path, sizeof path, "%s%s", db, sides[i]);
        unlink (path);
    }
}

static int
s_mkdir (const char *path)
{
    if (mkdir (path, 0755) != 0 && errno != EEXIST) {
        log_error ("cannot make directory '%s': %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

static int
s_write_file (const char *path, const void *data, size_t len)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        log_error ("cannot write '%s': %s", path, strerror (errno));
        return -1;
    }
    const char *p = data;
    while (len > 0) {
        ssize_t n = write (fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            log_error ("cannot write '%s': %s", path, strerror (errno));
            close (fd);
            return -1;
        }
        p += n;
        len -= (size_t) n;
    }
    if (close (fd) != 0) {
        log_error ("cannot write '%s': %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

// The name of the file system that holds 'path' (the store's fsyncs cost
// what it costs).
static const char *
s_fs_name (const char *path)
{
    struct statfs sf;
    if (statfs (path, &sf) != 0)
        return "?";
    switch ((unsigned long) sf.f_type) {
    case 0xEF53UL:
        return "ext2/3/4";
    case 0x58465342UL:
        return "xfs";
    case 0x9123683EUL:
        return "btrfs";
    case 0x01021994UL:
        return "tmpfs (no real fsync)";
    case 0x794C7630UL:
        return "overlayfs";
    default:
        return "other";
    }
}

// Median time of one 4 KiB write + fdatasync in dir, the floor under a
// durable commit; -1 on error.
static double
s_fsync_floor (const char *dir, int n)
{
    char path[PATH_MAX + 32], block[4096];
    double t[64];
    snprintf (path, sizeof path, "%s/fsync.probe", dir);
    memset (block, 'x', sizeof block);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    n = n > 64 ? 64 : n;
    for (int i = 0; i < n; i++) {
        double t0 = util_now ();
        if (pwrite (fd, block, sizeof block, (off_t) (i % 4) * 4096) != (ssize_t) sizeof block
            || fdatasync (fd) != 0) {
            close (fd);
            unlink (path);
            return -1;
        }
        t[i] = util_now () - t0;
    }
    close (fd);
    unlink (path);
    return s_stat (t, n, 0).median;
}

// ---------------------------------------------------------------------------
// A farm: a directory with a configuration file, a store and the programs
// running on it.

typedef struct {
    char dir[PATH_MAX];          // its directory
    char conf[PATH_MAX + 32];    // dir/pivfarm.conf
    char db[PATH_MAX + 32];      // dir/farm.db
    char ingest[PATH_MAX + 32];  // the ingest endpoint
    pid_t broker;                // pids, 0 when not running
    pid_t watcher;
    pid_t agents[MAX_AGENTS];
    int nagents;                 // agents started
    double start_s;              // the broker's start-up: spawn to its sockets bound
    store_t *reader;             // read-only store, to follow the event log
    int64_t last_event;          // the last event read
} s_farm_t;

static const char *s_bin_dir = "./bin";
static int s_commit_ms;  // broker/commit_ms written into the configuration (0: its default)

static void
s_bin (char *buf, size_t len, const char *program)
{
    snprintf (buf, len, "%s/%s", s_bin_dir, program);
}

// A fresh farm directory under 'parent' with data/ and a configuration:
// ipc:// endpoints in the directory, durability full, the agents' processor
// and threads, and the PIV settings of section 3 (passes 32, 50 %, 1 run).
static int
s_farm_init (s_farm_t *farm, const char *parent, const char *name, const char *processor,
             int threads)
{
    memset (farm, 0, sizeof *farm);
    snprintf (farm->dir, sizeof farm->dir, "%s/%s", parent, name);
    snprintf (farm->conf, sizeof farm->conf, "%s/pivfarm.conf", farm->dir);
    snprintf (farm->db, sizeof farm->db, "%s/farm.db", farm->dir);
    snprintf (farm->ingest, sizeof farm->ingest, "ipc://%s/ingest", farm->dir);
    // An ipc:// endpoint is a Unix socket path: 107 bytes at most.
    if (strlen (farm->dir) + 16 >= sizeof ((struct sockaddr_un *) 0)->sun_path) {
        log_error ("temporary directory '%s' is too long for ipc:// endpoints: set TMPDIR "
                   "to a shorter one",
                   farm->dir);
        return -1;
    }
    char data[PATH_MAX + 32];
    snprintf (data, sizeof data, "%s/data", farm->dir);
    if (s_mkdir (farm->dir) || s_mkdir (data))
        return -1;
    char text[8192], commit[64] = "";
    if (s_commit_ms > 0)
        snprintf (commit, sizeof commit, "    commit_ms = %d\n", s_commit_ms);
    snprintf (text, sizeof text,
              "# bench_farm: one farm on ipc:// sockets in this directory\n"
              "broker\n"
              "    ingest = ipc://%s/ingest\n"
              "    work = ipc://%s/work\n"
              "    control = ipc://%s/control\n"
              "    publish = ipc://%s/publish\n"
              "    store = ./farm.db\n"
              "    durability = full\n"
              "%s"
              "watcher\n"
              "    root = ./data\n"
              "agent\n"
              "    threads = %d\n"
              "    results = ./results\n"
              "    processor = %s\n"
              "piv\n"
              "    passes = %s\n"
              "    overlap = 50\n"
              "    iterations = 1\n",
              farm->dir, farm->dir, farm->dir, farm->dir, commit, threads, processor,
              PIV_PASSES);
    return s_write_file (farm->conf, text, strlen (text));
}

static void
s_farm_log (const s_farm_t *farm, char *buf, size_t len, const char *name)
{
    snprintf (buf, len, "%s/%s.log", farm->dir, name);
}

// Stops everything of the farm (SIGTERM, then SIGKILL) and closes its reader.
static void
s_farm_stop (s_farm_t *farm)
{
    store_destroy (&farm->reader);
    if (farm->watcher)
        s_stop (farm->watcher, SIGTERM, 5);
    for (int i = 0; i < farm->nagents; i++)
        if (farm->agents[i])
            s_stop (farm->agents[i], SIGKILL, 5);
    if (farm->broker)
        s_stop (farm->broker, SIGTERM, 30);
    farm->watcher = farm->broker = 0;
    memset (farm->agents, 0, sizeof farm->agents);
    farm->nagents = 0;
}

// Starts the broker and waits until it has bound its last socket (after
// opening the store and reloading what it holds); then opens the store
// read-only and skips the events already in it ('after').
static int
s_farm_broker (s_farm_t *farm, int64_t after)
{
    char prog[PATH_MAX], log[PATH_MAX + 64], sock[PATH_MAX + 32];
    s_bin (prog, sizeof prog, "pivfarm-broker");
    s_farm_log (farm, log, sizeof log, "broker");
    snprintf (sock, sizeof sock, "%s/publish", farm->dir);
    char *argv[] = {prog, "-c", farm->conf, NULL};
    double t0 = util_now ();
    if ((farm->broker = s_spawn (argv, log)) < 0)
        return -1;
    while (access (sock, F_OK) != 0) {
        if (s_stopped ())
            return -1;
        if (!s_alive (farm->broker)) {
            farm->broker = 0;
            log_error ("the broker stopped during start-up: see '%s'", log);
            return -1;
        }
        if (util_now () - t0 > START_S) {
            log_error ("the broker did not start within %.0f s: see '%s'", START_S, log);
            return -1;
        }
        usleep (2000);
    }
    farm->start_s = util_now () - t0;
    char err[ERRLEN];
    if (!(farm->reader = store_open_readonly (farm->db, err, sizeof err))) {
        log_error ("%s", err);
        return -1;
    }
    farm->last_event = after;
    return 0;
}

static int
s_farm_agent (s_farm_t *farm, const char *processor, int threads)
{
    if (farm->nagents >= MAX_AGENTS)
        return -1;
    char prog[PATH_MAX], log[PATH_MAX + 64], name[32], id[300], nthreads[16];
    s_bin (prog, sizeof prog, "pivfarm-agent");
    snprintf (name, sizeof name, "agent%d", farm->nagents + 1);
    s_farm_log (farm, log, sizeof log, name);
    // Named after the farm too: a store that saw agent1 in an earlier run
    // logs no new "agent" event for it, and that event is how
    // s_farm_wait_agents knows an agent is there.
    const char *farm_name = strrchr (farm->dir, '/');
    snprintf (id, sizeof id, "%.200s-%s", farm_name ? farm_name + 1 : farm->dir, name);
    snprintf (nthreads, sizeof nthreads, "%d", threads);
    char *argv[] = {prog, "-c", farm->conf, "--id", id, "--threads", nthreads, "--processor",
                    (char *) processor, NULL};
    pid_t pid = s_spawn (argv, log);
    if (pid < 0)
        return -1;
    farm->agents[farm->nagents++] = pid;
    return 0;
}

static int
s_farm_watcher (s_farm_t *farm)
{
    char prog[PATH_MAX], log[PATH_MAX + 64];
    s_bin (prog, sizeof prog, "pivfarm-watcher");
    s_farm_log (farm, log, sizeof log, "watcher");
    char *argv[] = {prog, "-c", farm->conf, NULL};
    return (farm->watcher = s_spawn (argv, log)) < 0 ? -1 : 0;
}

// Whether every program of the farm still runs; names the one that stopped.
static int
s_farm_alive (s_farm_t *farm)
{
    if (farm->broker && !s_alive (farm->broker)) {
        farm->broker = 0;
        log_error ("the broker stopped: see '%s/broker.log'", farm->dir);
        return 0;
    }
    for (int i = 0; i < farm->nagents; i++)
        if (farm->agents[i] && !s_alive (farm->agents[i])) {
            farm->agents[i] = 0;
            log_error ("agent%d stopped: see '%s/agent%d.log'", i + 1, farm->dir, i + 1);
            return 0;
        }
    if (farm->watcher && !s_alive (farm->watcher)) {
        farm->watcher = 0;
        log_error ("the watcher stopped: see '%s/watcher.log'", farm->dir);
        return 0;
    }
    return 1;
}

// ---------------------------------------------------------------------------
// Following the event log: what the store has committed is what counts.

typedef struct {
    const char *experiment;  // the experiment followed
    int64_t exp_id;          // its id, once its "experiment" event is read (0 before)
    int64_t results;         // its "result" events
    int64_t last_result_ns;  // the time of the latest (the broker's clock when it recorded it)
    int64_t agents;          // "agent" events (an agent said HELLO for the first time)
    int64_t last;            // the last event id read
    int64_t base_ns;         // results are also counted by 1 s windows from here ...
    int *windows;            // ... in these MAX_WINDOWS counters (NULL: not counted)
} s_tail_t;

static int
s_tail_event (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
              int64_t pair, const char *payload)
{
    (void) pair;
    s_tail_t *tail = arg;
    tail->last = id;
    if (strcmp (kind, "result") == 0) {
        if (experiment == tail->exp_id && tail->exp_id) {
            tail->results++;
            if (ts_ns > tail->last_result_ns)
                tail->last_result_ns = ts_ns;
            int64_t w = (ts_ns - tail->base_ns) / 1000000000;
            if (tail->windows && w >= 0 && w < MAX_WINDOWS)
                tail->windows[w]++;
        }
    }
    else if (strcmp (kind, "experiment") == 0) {
        if (tail->experiment && strncmp (payload, "name=", 5) == 0
            && strcmp (payload + 5, tail->experiment) == 0)
            tail->exp_id = experiment;
    }
    else if (strcmp (kind, "agent") == 0)
        tail->agents++;
    return 0;
}

// Reads the events committed since the last call. -1 on error.
static int
s_tail (s_farm_t *farm, s_tail_t *tail)
{
    tail->last = farm->last_event;
    if (store_events (farm->reader, 0, farm->last_event, s_tail_event, tail) < 0) {
        log_error ("cannot read the events of '%s': %s", farm->db, store_error (farm->reader));
        return -1;
    }
    farm->last_event = tail->last;
    return 0;
}

// Waits until n agents have said HELLO (their "agent" events committed).
static int
s_farm_wait_agents (s_farm_t *farm, int n)
{
    s_tail_t tail = {0};
    double t0 = util_now ();
    while (tail.agents < n) {
        if (s_stopped () || s_tail (farm, &tail) != 0 || !s_farm_alive (farm))
            return -1;
        if (util_now () - t0 > 30) {
            log_error ("only %lld of %d agents said hello within 30 s: see '%s'",
                       (long long) tail.agents, n, farm->dir);
            return -1;
        }
        usleep (5000);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Sections 1 and 2: the bench is the watcher. A DEALER on the ingest socket
// sends FILE events (p0000000_a.tif, p0000000_b.tif, ...) as fast as the
// broker acknowledges them, at most WINDOW unacknowledged, resending
// nothing; the store's event log says when every pair is done.

typedef struct {
    double cycle_s;         // first FILE sent to last result recorded
    double ingest_s;        // first FILE sent to last ACK received
    int64_t acked;          // FILE events acknowledged
    int64_t ack_msgs;       // ACK messages that acknowledged them
    int64_t lost;           // FILE events never acknowledged (given up after a stall)
    double window_rates[MAX_WINDOWS];  // pairs recorded in each whole 1 s window
    int nwindows;           // whole windows (the last, partial one left out)
    double broker_cpu_s;    // CPU time over the run: the broker,
    double agents_cpu_s;    // the agents,
    double self_cpu_s;      // this process (the watcher's part)
    long hwm_kb, rss_kb;    // the broker's peak and final resident memory
} s_cycle_t;

static double
s_agents_cpu (const s_farm_t *farm)
{
    double sum = 0;
    for (int i = 0; i < farm->nagents; i++)
        if (farm->agents[i])
            sum += s_cpu (farm->agents[i]);
    return sum;
}

// Runs npairs through the farm's broker in 'experiment'. With want_done 0
// (no agents) it ends when every event is acknowledged.
static int
s_cycle (s_farm_t *farm, const char *experiment, int npairs, int want_done, s_cycle_t *out)
{
    memset (out, 0, sizeof *out);
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    if (!dealer) {
        log_error ("cannot make a DEALER socket");
        return -1;
    }
    // The window bounds what is in flight; the pipes must not.
    zsock_set_sndhwm (dealer, 0);
    zsock_set_rcvhwm (dealer, 0);
    zsock_set_rcvtimeo (dealer, 0);
    zsock_set_linger (dealer, 0);
    zsock_set_maxmsgsize (dealer, PROTO_MAX_MESSAGE);
    if (zsock_connect (dealer, "%s", farm->ingest) != 0) {
        log_error ("cannot connect to '%s'", farm->ingest);
        zsock_destroy (&dealer);
        return -1;
    }
    proto_batch_t *batch = proto_batch_new ();
    if (!batch) {
        zsock_destroy (&dealer);
        return -1;
    }
    static int windows[MAX_WINDOWS];
    memset (windows, 0, sizeof windows);
    const int64_t files = 2 * (int64_t) npairs;
    int64_t sent = 0, acked = 0, lost = 0, ack_msgs = 0;
    int rc = -1;
    char err[ERRLEN];
    double cpu_broker = s_cpu (farm->broker), cpu_agents = s_agents_cpu (farm),
           cpu_self = s_cpu_self ();
    double t0 = util_now (), last_ack = t0, last_progress = t0, next_poll = t0 + POLL_S;
    int64_t t0_ns = util_time_ns ();
    s_tail_t tail = {.experiment = experiment, .base_ns = t0_ns, .windows = windows};
    for (;;) {
        if (s_stopped ())
            goto done;
        // Send while the window allows, FILE_BATCH events a message as the
        // watcher sends what one wake-up found.
        while (sent < files && sent - acked - lost < WINDOW) {
            int64_t first = sent;
            while (sent < files && sent - acked - lost < WINDOW
                   && proto_batch_size (batch) < FILE_BATCH) {
                char name[32];
                snprintf (name, sizeof name, "p%07lld_%c.tif", (long long) (sent / 2),
                          sent % 2 ? 'b' : 'a');
                proto_msg_t msg = {.command = PROTO_FILE,
                                   .seq = (uint64_t) sent + 1,
                                   .experiment = (char *) experiment,
                                   .name = name,
                                   .size = 4194974,
                                   .time_ns = t0_ns};
                if (proto_batch_add (batch, &msg) != 0)
                    break;
                sent++;
            }
            if (proto_batch_send (batch, NULL, dealer) != 0) {
                sent = first;
                break;
            }
        }
        // Wait for ACKs, at most until the next look at the store.
        double now = util_now ();
        int room = sent < files && sent - acked - lost < WINDOW;
        long wait_ms = room ? 0 : (long) ((next_poll - now) * 1000) + 1;
        zmq_pollitem_t item = {zsock_resolve (dealer), 0, ZMQ_POLLIN, 0};
        if (zmq_poll (&item, 1, wait_ms < 0 ? 0 : wait_ms) < 0 && errno != EINTR) {
            log_error ("cannot poll the ingest socket: %s", zmq_strerror (zmq_errno ()));
            goto done;
        }
        zmsg_t *zmsg;
        while ((zmsg = zmsg_recv (dealer))) {
            proto_msg_t ack = {0};
            if (proto_decode (&zmsg, &ack, err, sizeof err) != 0)
                log_warning ("from the broker at '%s': %s", farm->ingest, err);
            else if (ack.command != PROTO_ACK)
                log_warning ("from the broker at '%s': unexpected %s", farm->ingest,
                             proto_command_name (ack.command));
            else {
                acked += ack.count;
                ack_msgs++;
                last_ack = last_progress = util_now ();
            }
            proto_msg_release (&ack);
        }
        now = util_now ();
        if (acked >= files && out->ingest_s == 0)
            out->ingest_s = last_ack - t0;
        if (sent - acked - lost > 0 && now - last_ack > STALL_S) {
            // ACKs the broker dropped or never sent: count them, send on.
            log_warning ("%lld FILE events unacknowledged after %.0f s: counted as lost",
                         (long long) (sent - acked - lost), STALL_S);
            lost = sent - acked;
            last_ack = now;
        }
        if (now >= next_poll) {
            next_poll = now + POLL_S;
            int64_t before = tail.results;
            if (s_tail (farm, &tail) != 0)
                goto done;
            if (tail.results > before)
                last_progress = now;
            if (!s_farm_alive (farm))
                goto done;
        }
        if (want_done ? tail.results >= npairs && (acked + lost >= files || now - last_ack > 1)
                      : acked + lost >= files)
            break;
        if (now - last_progress > GIVE_UP_S) {
            log_error ("no progress for %.0f s: %lld of %lld events acknowledged, %lld of %d "
                       "pairs done; see '%s'",
                       GIVE_UP_S, (long long) acked, (long long) files,
                       (long long) tail.results, npairs, farm->dir);
            goto done;
        }
    }
    out->broker_cpu_s = s_cpu (farm->broker) - cpu_broker;
    out->agents_cpu_s = s_agents_cpu (farm) - cpu_agents;
    out->self_cpu_s = s_cpu_self () - cpu_self;
    if (want_done) {
        out->cycle_s = (tail.last_result_ns - t0_ns) / 1e9;
        int whole = (int) ((tail.last_result_ns - t0_ns) / 1000000000);
        for (int w = 0; w < whole && w < MAX_WINDOWS; w++)
            out->window_rates[out->nwindows++] = windows[w];
    }
    if (out->ingest_s == 0)
        out->ingest_s = last_ack - t0;
    out->acked = acked;
    out->ack_msgs = ack_msgs;
    out->lost = lost + (files - acked - lost);
    s_memory (farm->broker, &out->hwm_kb, &out->rss_kb);
    rc = 0;
done:
    proto_batch_destroy (&batch);
    zsock_destroy (&dealer);
    return rc;
}

// One farm with a fresh (or given) store: broker, agents, one cycle, stop.
typedef struct {
    int agents;           // agents (0: ingest only)
    int threads;          // threads of each
    const char *label;    // as printed
} s_config_t;

// With history_db, the farm runs on that store (moved in and back out) and
// *events says where its event log ends: the tail starts there and leaves
// it where this run ended, so that the next run does not read this one's.
static int
s_farm_cycle (const char *parent, const char *name, const s_config_t *config,
              const char *experiment, int npairs, const char *history_db, int64_t *events,
              s_cycle_t *out, double *start_s)
{
    s_farm_t farm;
    int rc = -1;
    if (s_farm_init (&farm, parent, name, "noop", config->threads) != 0)
        return -1;
    if (history_db && s_move_db (history_db, farm.db) != 0)
        return -1;
    if (s_farm_broker (&farm, history_db ? *events : 0) != 0)
        goto done;
    if (start_s)
        *start_s = farm.start_s;
    for (int i = 0; i < config->agents; i++)
        if (s_farm_agent (&farm, "noop", config->threads) != 0)
            goto done;
    if (config->agents && s_farm_wait_agents (&farm, config->agents) != 0)
        goto done;
    rc = s_cycle (&farm, experiment, npairs, config->agents > 0, out);
    if (events)
        *events = farm.last_event;
done:
    s_farm_stop (&farm);
    if (history_db && rc == 0 && s_move_db (farm.db, history_db) != 0)
        rc = -1;
    if (rc == 0)
        s_rmtree (farm.dir);
    return rc;
}

// ---------------------------------------------------------------------------
// Section 2: a store with history, written straight through the store API.
// The same writes, timed, are also the store's ceiling for section 1.

// Where the store's time goes for one pair, by call (s per pair).
enum {
    S_CALL_FILE_NEW,    // store_file_add x 2, as the files arrive
    S_CALL_PAIR,        // store_pair_add
    S_CALL_DISPATCH,    // store_pair_dispatch
    S_CALL_RESULT,      // store_pair_result
    S_CALL_COMMIT,      // store_commit, spread over the pairs
    S_CALLS
};

static const char *const s_call_names[S_CALLS] = {
    "store_file_add x2, files arriving", "store_pair_add", "store_pair_dispatch", "store_pair_result", "store_commit (share)"};

// Writes npairs DONE pairs of experiment 'exp_name' into the store at 'db'
// (created if absent) with the calls the broker makes for one pair: both
// files recorded as they arrive, the pair, its dispatch and its result. Commits every
// 'every' pairs, or, with every 0, whenever commit_s has passed since the
// last commit (as the broker's timer does). *last_event: the id of a marker
// event appended at the end, where later readers can start; calls (if not
// NULL): s per pair by call, and *event_s the cost of one event row alone
// (store_event with a payload like a file's, the same commits), of which
// each pair's calls write five. Returns pairs/s, or -1.
static double
s_write_pairs (const char *db, const char *exp_name, int npairs, int every, double commit_s,
               int64_t *last_event, double calls[S_CALLS], double *event_s)
{
    char err[ERRLEN];
    store_t *store = store_new (db, STORE_DURABILITY_FULL, err, sizeof err);
    if (!store) {
        log_error ("%s", err);
        return -1;
    }
    double spent[S_CALLS] = {0};
    double t0 = util_now (), last_commit = t0;
    int64_t now = util_time_ns ();
    int64_t exp = store_experiment (store, exp_name, now);
    store_result_t result = {.mean_u = 3.3,
                             .mean_v = -1.7,
                             .mean_speed = 3.71,
                             .valid_fraction = 1,
                             .nx = 127,
                             .ny = 127,
                             .compute_ns = 100000000,
                             .path = ""};
    if (exp < 0)
        goto fail;
    for (int i = 0; i < npairs; i++) {
        char name_a[32], name_b[32], stem[32];
        int is_new, recorded;
        if (i % 1024 == 0 && s_stopped ())
            goto fail_quiet;
        snprintf (stem, sizeof stem, "h%07d", i);
        snprintf (name_a, sizeof name_a, "h%07d_a.tif", i);
        snprintf (name_b, sizeof name_b, "h%07d_b.tif", i);
        now += 1000;
        double t[S_CALLS + 1];
        t[0] = util_now ();
        int64_t fa = store_file_add (store, exp, name_a, 4194974, now, now, &is_new);
        int64_t fb = fa < 0 ? -1 : store_file_add (store, exp, name_b, 4194974, now, now, &is_new);
        t[1] = util_now ();
        int64_t pair =
            fa < 0 || fb < 0 ? -1 : store_pair_add (store, exp, stem, fa, fb, now, &is_new);
        t[2] = util_now ();
        int attempt = pair < 0 ? -1 : store_pair_dispatch (store, pair, "history", now);
        t[3] = util_now ();
        if (attempt < 0
            || store_pair_result (store, pair, attempt, "history", &result, now, &recorded) != 0)
            goto fail;
        t[4] = t[5] = util_now ();
        int due = every ? (i + 1) % every == 0 : t[4] - last_commit >= commit_s;
        if (due) {
            if (store_commit (store, err, sizeof err) != 0) {
                log_error ("%s", err);
                goto fail_quiet;
            }
            last_commit = t[5] = util_now ();
        }
        for (int c = 0; c < S_CALLS; c++)
            spent[c] += t[c + 1] - t[c];
    }
    double rate = npairs / (util_now () - t0);
    if (event_s) {
        double t1 = util_now ();
        last_commit = t1;
        for (int i = 0; i < npairs; i++) {
            char payload[160];
            snprintf (payload, sizeof payload,
                      "file=%d size=4194974 mtime_ns=%" PRId64 " seen_ns=%" PRId64
                      " name=h%07d_a.tif", i, now, now, i);
            if (store_event (store, "file", exp, 0, payload, now) < 0)
                goto fail;
            if (util_now () - last_commit >= commit_s) {
                if (store_commit (store, err, sizeof err) != 0) {
                    log_error ("%s", err);
                    goto fail_quiet;
                }
                last_commit = util_now ();
            }
        }
        *event_s = (util_now () - t1) / npairs;
    }
    int64_t last = store_event (store, "bench", exp, 0, "pairs written", now);
    if (last < 0 || store_commit (store, err, sizeof err) != 0)
        goto fail;
    store_destroy (&store);
    if (last_event)
        *last_event = last;
    if (calls)
        for (int c = 0; c < S_CALLS; c++)
            calls[c] = spent[c] / npairs;
    return rate;
fail:
    log_error ("cannot write pairs to '%s': %s", db, store_error (store));
fail_quiet:
    store_destroy (&store);
    return -1;
}

// ---------------------------------------------------------------------------
// Section 3: PIV end to end, read back from the event log.

#define MAX_PIV_PAIRS 200

typedef struct {
    char *kind;        // "pair", "file", "result", "experiment"
    int64_t ts_ns;     // event time
    int64_t experiment;
    int64_t pair;
    char *payload;
} s_event_t;

typedef struct {
    s_event_t *events;
    size_t n, size;
} s_events_t;

static int
s_collect (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
           int64_t pair, const char *payload)
{
    (void) id;
    s_events_t *all = arg;
    if (strcmp (kind, "pair") && strcmp (kind, "file") && strcmp (kind, "result")
        && strcmp (kind, "experiment"))
        return 0;
    if (all->n == all->size) {
        size_t size = all->size ? 2 * all->size : 256;
        s_event_t *events = realloc (all->events, size * sizeof *events);
        if (!events)
            return -1;
        all->events = events;
        all->size = size;
    }
    all->events[all->n++] = (s_event_t) {strdup (kind), ts_ns, experiment, pair, strdup (payload)};
    return 0;
}

static void
s_events_free (s_events_t *all)
{
    for (size_t i = 0; i < all->n; i++) {
        free (all->events[i].kind);
        free (all->events[i].payload);
    }
    free (all->events);
    memset (all, 0, sizeof *all);
}

// The value of "key=" in a payload (to the next space, or the end for the
// last key), or NULL.
static const char *
s_payload (const char *payload, const char *key, char *buf, size_t len)
{
    size_t n = strlen (key);
    for (const char *p = payload; (p = strstr (p, key)); p++)
        if ((p == payload || p[-1] == ' ') && p[n] == '=') {
            const char *v = p + n + 1, *end = strcmp (key, "name") && strcmp (key, "stem")
                                                  ? strchr (v, ' ')
                                                  : NULL;
            size_t l = end ? (size_t) (end - v) : strlen (v);
            snprintf (buf, len, "%.*s", (int) (l < len ? l : len - 1), v);
            return buf;
        }
    return NULL;
}

// For pair 'stem' of experiment 'exp_name': when its frame B reached the
// broker (seen_ns), when its result was recorded, and the agent's compute
// time. 0 if found.
static int
s_pair_times (const s_events_t *all, const char *exp_name, const char *stem, int64_t *seen_b,
              int64_t *recorded, int64_t *compute_ns)
{
    char buf[256], name_b[256];
    int64_t exp = 0, pair = 0;
    *seen_b = *recorded = *compute_ns = 0;
    snprintf (name_b, sizeof name_b, "%s_b.tif", stem);
    for (size_t i = 0; i < all->n && !exp; i++)
        if (strcmp (all->events[i].kind, "experiment") == 0
            && s_payload (all->events[i].payload, "name", buf, sizeof buf)
            && strcmp (buf, exp_name) == 0)
            exp = all->events[i].experiment;
    for (size_t i = 0; i < all->n; i++) {
        const s_event_t *e = &all->events[i];
        if (e->experiment != exp || !exp)
            continue;
        if (strcmp (e->kind, "pair") == 0 && s_payload (e->payload, "stem", buf, sizeof buf)
            && strcmp (buf, stem) == 0)
            pair = e->pair;
        else if (strcmp (e->kind, "file") == 0 && s_payload (e->payload, "name", buf, sizeof buf)
                 && strcmp (buf, name_b) == 0)
            *seen_b = e->ts_ns;
    }
    for (size_t i = 0; i < all->n && pair; i++) {
        const s_event_t *e = &all->events[i];
        if (strcmp (e->kind, "result") == 0 && e->pair == pair) {
            *recorded = e->ts_ns;
            if (s_payload (e->payload, "compute_ns", buf, sizeof buf))
                *compute_ns = strtoll (buf, NULL, 10);
        }
    }
    return pair && *seen_b && *recorded ? 0 : -1;
}

// Frames land as a camera PC that writes elsewhere and then moves the file
// in does it: each frame of src/ is hard-linked into stage/ (outside the
// watch root; no data is copied), then renamed into data/<exp>/, which the
// watcher sees as IN_MOVED_TO. The bench's own writing thus takes no CPU
// from the agent, and frame B's "close" is the moment of its rename.

// Links pair i's frames into stage/ for experiment 'exp'.
static int
s_stage (const s_farm_t *farm, const char *exp, int i)
{
    for (int side = 0; side < 2; side++) {
        char from[PATH_MAX + 64], to[PATH_MAX + 64];
        snprintf (from, sizeof from, "%s/src/p_%04d_%c.tif", farm->dir, i, side ? 'b' : 'a');
        snprintf (to, sizeof to, "%s/stage/%s-p_%04d_%c.tif", farm->dir, exp, i, side ? 'b' : 'a');
        if (link (from, to) != 0) {
            log_error ("cannot link '%s' to '%s': %s", from, to, strerror (errno));
            return -1;
        }
    }
    return 0;
}

// Moves pair i (frames p_%04d_a.tif, then _b) into data/<exp>; *closed_ns:
// when frame B got its name there.
static int
s_land (const s_farm_t *farm, const char *exp, int i, int64_t *closed_ns)
{
    for (int side = 0; side < 2; side++) {
        char from[PATH_MAX + 64], to[PATH_MAX + 64];
        snprintf (from, sizeof from, "%s/stage/%s-p_%04d_%c.tif", farm->dir, exp, i,
                  side ? 'b' : 'a');
        snprintf (to, sizeof to, "%s/data/%s/p_%04d_%c.tif", farm->dir, exp, i, side ? 'b' : 'a');
        if (rename (from, to) != 0) {
            log_error ("cannot rename '%s' to '%s': %s", from, to, strerror (errno));
            return -1;
        }
    }
    *closed_ns = util_time_ns ();
    return 0;
}

// Waits until n results of 'exp' are recorded; *last_ns: the last one's time.
static int
s_wait_results (s_farm_t *farm, const char *exp, int n, double timeout_s, int64_t *last_ns)
{
    s_tail_t tail = {.experiment = exp};
    farm->last_event = 0;
    double t0 = util_now ();
    while (tail.results < n) {
        if (s_stopped () || s_tail (farm, &tail) != 0 || !s_farm_alive (farm))
            return -1;
        if (util_now () - t0 > timeout_s) {
            log_error ("only %lld of %d pairs of '%s' done within %.0f s: see '%s'",
                       (long long) tail.results, n, exp, timeout_s, farm->dir);
            return -1;
        }
        usleep (10000);
    }
    if (last_ns)
        *last_ns = tail.last_result_ns;
    return 0;
}

// The engine of the farm's configuration: passes 32, overlap 50, one run.
static piv_t *
s_compute_engine (void)
{
    char err[ERRLEN];
    piv_settings_t s;
    piv_settings_init (&s);
    s.overlap = 50;
    s.final_iterations = 1;
    s.threads = 1;
    piv_t *engine = NULL;
    if (piv_settings_set_passes (&s, PIV_PASSES, err, sizeof err) != 0
        || !(engine = piv_new (&s, err, sizeof err)))
        log_error ("cannot make a PIV engine for passes '%s': %s", PIV_PASSES, err);
    return engine;
}

// Pure compute, in this process: what an agent's worker does with a pair
// (load both frames, PIV) without the farm around it. Each thread has its
// own engine, made in the thread on its first pair as an agent's worker
// makes its own (a warm-up run, uncounted, does that), and takes the next
// pair when it is free, as the agent's workers take tasks.
typedef struct {
    const char *src;       // directory of p_NNNN_{a,b}.tif
    int last;              // pairs 1..last
    int *next;             // the next pair to take, shared ...
    pthread_mutex_t *lock; // ... under this lock
    piv_t *engine;         // this thread's (NULL: made on the first pair)
    double *times;         // per pair taken: load + PIV, s (may be NULL)
    const char *out;       // if not NULL, each field is also written here as txt ...
    double *write_times;   // ... taking this long, s
    int failed;            // a pair could not be loaded, processed or written
} s_compute_t;

static void *
s_compute (void *arg)
{
    s_compute_t *c = arg;
    char err[ERRLEN], a[PATH_MAX + 32], b[PATH_MAX + 32];
    if (!c->engine && !(c->engine = s_compute_engine ())) {
        c->failed = 1;
        return NULL;
    }
    for (int k = 0; !c->failed; k++) {
        pthread_mutex_lock (c->lock);
        int i = (*c->next)++;
        pthread_mutex_unlock (c->lock);
        if (i > c->last)
            break;
        snprintf (a, sizeof a, "%s/p_%04d_a.tif", c->src, i);
        snprintf (b, sizeof b, "%s/p_%04d_b.tif", c->src, i);
        piv_image_t *ia = NULL, *ib = NULL;
        double t0 = util_now ();
        piv_field_t *field = NULL;
        if (piv_image_load_pair (a, b, 0, &ia, &ib, err, sizeof err) == 0)
            field = piv_process (c->engine, ia, ib, err, sizeof err);
        double t1 = util_now ();
        if (c->times)
            c->times[k] = t1 - t0;
        if (!field) {
            log_error ("cannot process '%s' and '%s': %s", a, b, err);
            c->failed = 1;
        }
        else if (c->out) {
            // As the agent writes its result file.
            FILE *f = fopen (c->out, "w");
            int werr = !f || piv_field_write (field, f, PIV_FORMAT_TXT, "bench_farm") != 0;
            if ((f && fclose (f) != 0) || werr) {
                log_error ("cannot write '%s': %s", c->out, strerror (errno));
                c->failed = 1;
            }
            c->write_times[k] = util_now () - t1;
        }
        piv_field_destroy (&field);
        piv_image_destroy (&ia);
        piv_image_destroy (&ib);
    }
    return NULL;
}

// Pairs first..last on 'threads' threads at once; the wall time, or -1.
// With times (one thread only), the load + PIV time of each pair goes
// there; with out, each field is written there too and its time goes to
// write_times.
static double
s_compute_run (const char *src, int first, int last, int threads, piv_t **engines,
               double *times, const char *out, double *write_times)
{
    pthread_t tid[2];
    s_compute_t c[2];
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int next = first;
    double t0 = util_now ();
    for (int t = 0; t < threads; t++) {
        c[t] = (s_compute_t) {src,  last, &next, &lock, engines[t], t == 0 ? times : NULL,
                              t == 0 ? out : NULL, write_times, 0};
        if (pthread_create (&tid[t], NULL, s_compute, &c[t]) != 0) {
            log_error ("cannot start a thread: %s", strerror (errno));
            for (int u = 0; u < t; u++)
                pthread_join (tid[u], NULL);
            return -1;
        }
    }
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join (tid[t], NULL);
        engines[t] = c[t].engine;
        failed |= c[t].failed;
    }
    return failed ? -1 : util_now () - t0;
}

// Runs 'concurrent' pivfarm-piv processes at once, on pairs 1.., single pass
// 32 px, 50 %, one run, one thread each; returns the wall time, or -1.
static double
s_piv_runs (const char *src, const char *out_dir, int concurrent)
{
    char prog[PATH_MAX];
    s_bin (prog, sizeof prog, "pivfarm-piv");
    pid_t pids[8];
    char a[8][PATH_MAX + 32], b[8][PATH_MAX + 32], out[8][PATH_MAX + 32], log[PATH_MAX + 32];
    snprintf (log, sizeof log, "%s/pivfarm-piv.log", out_dir);
    double t0 = util_now ();
    for (int k = 0; k < concurrent; k++) {
        snprintf (a[k], sizeof a[k], "%s/p_%04d_a.tif", src, k + 1);
        snprintf (b[k], sizeof b[k], "%s/p_%04d_b.tif", src, k + 1);
        snprintf (out[k], sizeof out[k], "%s/piv%d.txt", out_dir, k + 1);
        char *argv[] = {prog, "--passes", PIV_PASSES, "--overlap", "50", "--iterations", "1",
                        "--threads", "1", "-o", out[k], a[k], b[k], NULL};
        if ((pids[k] = s_spawn (argv, log)) < 0)
            return -1;
    }
    int failed = 0;
    for (int k = 0; k < concurrent; k++)
        failed |= s_wait (pids[k]) != 0;
    double t = util_now () - t0;
    if (failed) {
        log_error ("pivfarm-piv failed: see '%s'", log);
        return -1;
    }
    return t;
}

typedef struct {
    int wisdom;             // FFTW wisdom loaded for the in-process figures
    s_stat_t pair_1t;       // in process, 1 thread: load + PIV of one pair, s
    s_stat_t write_1t;      // ... and writing its field as txt, as the agent does, s
    s_stat_t pair_idle;     // load + PIV of one pair after IDLE_S of idleness, s
    s_stat_t rate_2t;       // in process, 2 threads: pairs/s
    s_stat_t exec_alone;    // one pivfarm-piv run, s
    s_stat_t exec_two;      // two at once, s
    double warm_s;          // the first two pairs through the farm (engine set-up included)
    s_stat_t farm_rate;     // farm, every pair landed at once: pairs/s
    s_stat_t ratio;         // farm / in process, run by run
    double latency[MAX_PIV_PAIRS];   // close of B to result recorded, s
    double to_broker[MAX_PIV_PAIRS]; // close of B to the broker's FILE of B, s
    double compute[MAX_PIV_PAIRS];   // the agent's compute time, s
    int n;                  // pairs in the latency run
    double pause_s;         // between pairs in the latency run
    long hwm_kb, rss_kb;    // the broker's memory
    long agent_hwm_kb;      // the agent's
} s_piv_t;

static int
s_bench_piv (const char *parent, int npairs, int reps, s_piv_t *out)
{
    memset (out, 0, sizeof *out);
    s_farm_t farm;
    s_events_t all = {0};
    piv_t *engines[2] = {NULL, NULL};
    int rc = -1;
    if (s_farm_init (&farm, parent, "piv", "piv", 2) != 0)
        return -1;
    char src[PATH_MAX + 32], count[16], prog[PATH_MAX], prefix[PATH_MAX + 64],
        log[PATH_MAX + 64];
    char stage[PATH_MAX + 32];
    snprintf (src, sizeof src, "%s/src", farm.dir);
    snprintf (stage, sizeof stage, "%s/stage", farm.dir);
    snprintf (prefix, sizeof prefix, "%s/p", src);
    snprintf (count, sizeof count, "%d", npairs);
    s_bin (prog, sizeof prog, "pivfarm-synth");
    s_farm_log (&farm, log, sizeof log, "synth");
    if (s_mkdir (src) != 0 || s_mkdir (stage) != 0)
        goto done;
    char *argv[] = {prog, "--size", PIV_SIZE, "--count", count, "-o", prefix, NULL};
    double t0 = util_now ();
    pid_t synth = s_spawn (argv, log);
    if (synth < 0 || s_wait (synth) != 0) {
        log_error ("pivfarm-synth failed: see '%s'", log);
        goto done;
    }
    printf ("  %d pairs of %s rendered by pivfarm-synth in %.1f s (uniform 3.3, -1.7 px)\n",
            npairs, PIV_SIZE, util_now () - t0);
    fflush (stdout);
    // The plans pivfarm-piv uses (its wisdom), so that the in-process
    // figures are those of the engine, not of this process's planning.
    out->wisdom = piv_wisdom_load (piv_wisdom_default_path ()) == 0;
    // Pure compute, in process: after a warm-up, one thread pair by pair.
    // Two threads on every pair (as the agent's two workers) run below,
    // each time just before the farm's throughput run.
    double times[MAX_REPS > MAX_PIV_PAIRS ? MAX_REPS : MAX_PIV_PAIRS];
    double writes[MAX_PIV_PAIRS];
    char txt[PATH_MAX + 32];
    snprintf (txt, sizeof txt, "%s/compute.txt", farm.dir);
    int ok = s_compute_run (src, 1, 2, 2, engines, NULL, NULL, NULL) > 0;
    int single = npairs < 6 ? npairs : 6;
    ok = ok && s_compute_run (src, 1, single, 1, engines, times, txt, writes) > 0;
    if (ok) {
        out->pair_1t = s_stat (times, single, 0);
        out->write_1t = s_stat (writes, single, 0);
    }
    // ... and one pair at a time after the pause of the latency run below:
    // a pair that finds the machine idle takes longer than one of a busy
    // loop (caches, the hypervisor's scheduling), and the latency run's
    // pairs all find it idle.
    for (int i = 1; ok && i <= single; i++) {
        usleep ((useconds_t) (IDLE_S * 1e6));
        ok = s_compute_run (src, i, i, 1, engines, &times[i - 1], NULL, NULL) > 0;
    }
    if (ok)
        out->pair_idle = s_stat (times, single, 0);
    if (!ok)
        goto done;
    // The same through pivfarm-piv: exec, wisdom, load, PIV, write.
    double t1[MAX_REPS], t2[MAX_REPS];
    if (s_piv_runs (src, farm.dir, 1) < 0)
        goto done;
    for (int r = 0; r < reps; r++)
        if ((t1[r] = s_piv_runs (src, farm.dir, 1)) < 0
            || (t2[r] = s_piv_runs (src, farm.dir, 2)) < 0)
            goto done;
    out->exec_alone = s_stat (t1, reps, 0);
    out->exec_two = s_stat (t2, reps, 0);

    // The farm: broker, one agent of two threads, the watcher.
    for (int e = 0; e < 2 + reps; e++) {
        char path[PATH_MAX + 64];
        if (e < 2)
            snprintf (path, sizeof path, "%s/data/%s", farm.dir, e ? "latency" : "warm");
        else
            snprintf (path, sizeof path, "%s/data/throughput%d", farm.dir, e - 2);
        if (s_mkdir (path) != 0)
            goto done;
    }
    if (s_farm_broker (&farm, 0) != 0 || s_farm_agent (&farm, "piv", 2) != 0
        || s_farm_wait_agents (&farm, 1) != 0 || s_farm_watcher (&farm) != 0)
        goto done;
    // Two pairs first, uncounted: the agent's engines are made on the first
    // task of each thread.
    int64_t closed, last_ns;
    t0 = util_now ();
    if (s_stage (&farm, "warm", 1) != 0 || s_stage (&farm, "warm", 2) != 0
        || s_land (&farm, "warm", 1, &closed) != 0 || s_land (&farm, "warm", 2, &closed) != 0
        || s_wait_results (&farm, "warm", 2, 120, NULL) != 0)
        goto done;
    out->warm_s = util_now () - t0;

    // Latency: one pair at a time, the next only after the last is done
    // and a pause longer than the compute time, so nothing queues.
    out->n = npairs;
    out->pause_s = IDLE_S;
    int64_t closed_b[MAX_PIV_PAIRS + 1];
    for (int i = 1; i <= npairs; i++) {
        if (s_stage (&farm, "latency", i) != 0 || s_land (&farm, "latency", i, &closed_b[i]) != 0
            || s_wait_results (&farm, "latency", i, 120, NULL) != 0)
            goto done;
        usleep ((useconds_t) (out->pause_s * 1e6));
    }

    // Throughput: every pair at once, each run right after the same pairs
    // on two threads in this process (the farm idle), so that both see the
    // machine at the same speed (this VM's drifts by a third over minutes).
    double rates[MAX_REPS], farm_rates[MAX_REPS], ratios[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        char exp[32];
        snprintf (exp, sizeof exp, "throughput%d", r);
        double t = s_compute_run (src, 1, npairs, 2, engines, NULL, NULL, NULL);
        if (t < 0)
            goto done;
        rates[r] = npairs / t;
        for (int i = 1; i <= npairs; i++)
            if (s_stage (&farm, exp, i) != 0)
                goto done;
        int64_t first_ns = util_time_ns ();
        for (int i = 1; i <= npairs; i++)
            if (s_land (&farm, exp, i, &closed) != 0)
                goto done;
        if (s_wait_results (&farm, exp, npairs, 300, &last_ns) != 0)
            goto done;
        farm_rates[r] = npairs / ((last_ns - first_ns) / 1e9);
        ratios[r] = farm_rates[r] / rates[r];
    }
    out->rate_2t = s_stat (rates, reps, 1);
    out->farm_rate = s_stat (farm_rates, reps, 1);
    out->ratio = s_stat (ratios, reps, 1);
    s_memory (farm.broker, &out->hwm_kb, &out->rss_kb);
    long rss;
    s_memory (farm.agents[0], &out->agent_hwm_kb, &rss);

    // The latencies, from the event log.
    if (store_events (farm.reader, 0, 0, s_collect, &all) < 0) {
        log_error ("cannot read the events of '%s': %s", farm.db, store_error (farm.reader));
        goto done;
    }
    for (int i = 1; i <= npairs; i++) {
        char stem[32];
        int64_t seen_b, recorded, compute_ns;
        snprintf (stem, sizeof stem, "p_%04d", i);
        if (s_pair_times (&all, "latency", stem, &seen_b, &recorded, &compute_ns) != 0) {
            log_error ("pair '%s' of 'latency' is not complete in the event log of '%s'", stem,
                       farm.db);
            goto done;
        }
        out->latency[i - 1] = (recorded - closed_b[i]) / 1e9;
        out->to_broker[i - 1] = (seen_b - closed_b[i]) / 1e9;
        out->compute[i - 1] = compute_ns / 1e9;
    }
    rc = 0;
done:
    s_events_free (&all);
    piv_destroy (&engines[0]);
    piv_destroy (&engines[1]);
    s_farm_stop (&farm);
    if (rc == 0)
        s_rmtree (farm.dir);
    return rc;
}

// ---------------------------------------------------------------------------

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: bench_farm [--quick] [--reps N] [--section N] [--commit-ms N]\n"
             "  --quick        smaller runs: %d pairs per cycle, %d of history, %d PIV pairs\n"
             "  --reps N       runs of each farm figure (default %d) and of each compute figure\n"
             "                 (default %d, --quick %d); best and median shown\n"
             "  --section N    only section N (1 full cycle, 2 history, 3 PIV end to end)\n"
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

static double
s_mib (long kb)
{
    return kb / 1024.0;
}

// What one bench run does, from its arguments.
typedef struct {
    int quick;              // --quick: smaller runs
    int reps;               // runs of each farm run
    int only;               // --section: the one section run (0: all)
    int compute_reps;       // runs of each compute figure
    int commit_ms;          // the broker's commit interval
    char commit_text[32];   // and how to print it
    int cycle_pairs;        // pairs of a section 1 run
    int history_pairs;      // DONE pairs of section 2's history
    int history_run;        // pairs of a run over it (and of the store alone)
    int piv_pairs;          // pairs of section 3's throughput runs
    char root[PATH_MAX];    // the temporary directory of the farms
} s_run_t;

// Reads the arguments into run. -1 to go on, or the exit code.
static int
s_parse_args (int argc, char *argv[], s_run_t *run)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--quick") == 0)
            run->quick = 1;
        else if (strcmp (argv[i], "--reps") == 0 && i + 1 < argc) {
            if ((run->reps = s_number ("--reps", argv[++i], 1, MAX_REPS)) < 0)
                return 2;
        }
        else if (strcmp (argv[i], "--section") == 0 && i + 1 < argc) {
            if ((run->only = s_number ("--section", argv[++i], 1, 3)) < 0)
                return 2;
        }
        else if (strcmp (argv[i], "--commit-ms") == 0 && i + 1 < argc) {
            if ((s_commit_ms = s_number ("--commit-ms", argv[++i], 1, 10000)) < 0)
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
    run->commit_ms = s_commit_ms > 0 ? s_commit_ms : 2;
    snprintf (run->commit_text, sizeof run->commit_text, s_commit_ms > 0 ? "%d" : "%d (default)",
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
        s_bin_dir = bin;
    // Our handler, not czmq's: children are killed, then we die of the signal.
    zsys_handler_set (NULL);
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGHUP, &sa, NULL);
    for (const char *p = "pivfarm-broker\0pivfarm-agent\0pivfarm-watcher\0pivfarm-synth\0"
                         "pivfarm-piv\0";
         *p; p += strlen (p) + 1) {
        char path[PATH_MAX];
        s_bin (path, sizeof path, p);
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
s_section_machine (const s_run_t *run)
{
    printf ("\n0. Machine\n");
    double fsync_s = s_fsync_floor (run->root, 32);
    printf ("  %-44s %9ld\n", "CPUs online", sysconf (_SC_NPROCESSORS_ONLN));
    printf ("  %-44s %9s\n", "file system of the stores", s_fs_name (run->root));
    printf ("  %-44s %9.2f  ms   (median of 32: the floor under one commit)\n",
            "4 KiB write + fdatasync", fsync_s * 1e3);
}

// A noop agent takes as many tasks at once as it has threads. 8 is a
// compute node; 64 stands for the hundreds of workers a cluster that
// needs this rate has (25,000 pairs/s of 100 ms fields is 2,500 cores),
// so that the broker, not the round trip to a few agents, is measured.
static const s_config_t s_configs[] = {
    {1, 8, "1 agent x 8 threads"},
    {2, 8, "2 agents x 8 threads"},
    {2, 64, "2 agents x 64 threads"},
    {4, 64, "4 agents x 64 threads"},
    {0, 8, "ingest alone, no agents"},
};
#define S_NCONFIGS ((int) (sizeof s_configs / sizeof s_configs[0]))

// What section 1 keeps of its best configuration, for its summary.
typedef struct {
    double rate;          // pairs/s (median of runs)
    int config;           // which
    double cpu, broker;   // CPU us per pair: all three programs, the broker's
    double seqs_per_ack;  // FILE events per ACK (of the last configuration)
} s_best_t;

// Section 1, one configuration: its runs and its line. 0, or -1.
static int
s_cycle_config (const s_run_t *run, int c, s_best_t *best)
{
    double rate[MAX_REPS], ingest[MAX_REPS], cpu[3] = {0, 0, 0};
    static double windows[MAX_REPS * MAX_WINDOWS];
    int nwindows = 0, reps = run->reps;
    long hwm = 0, rss = 0, lost = 0;
    int64_t acked = 0, ack_msgs = 0;
    for (int r = 0; r < reps; r++) {
        s_cycle_t cy;
        char name[32];
        snprintf (name, sizeof name, "cycle%d-%d", c, r);
        if (s_farm_cycle (run->root, name, &s_configs[c], "bench", run->cycle_pairs, NULL, NULL,
                          &cy, NULL)
            != 0)
            return -1;
        rate[r] = s_configs[c].agents ? run->cycle_pairs / cy.cycle_s : 0;
        ingest[r] = cy.acked / cy.ingest_s;
        for (int w = 0; w < cy.nwindows; w++)
            windows[nwindows++] = cy.window_rates[w];
        cpu[0] += cy.broker_cpu_s, cpu[1] += cy.agents_cpu_s, cpu[2] += cy.self_cpu_s;
        hwm = cy.hwm_kb > hwm ? cy.hwm_kb : hwm;
        rss = cy.rss_kb > rss ? cy.rss_kb : rss;
        lost += cy.lost;
        acked += cy.acked, ack_msgs += cy.ack_msgs;
    }
    double per = 1e6 / ((double) run->cycle_pairs * reps);
    s_stat_t sr = s_stat (rate, reps, 1), si = s_stat (ingest, reps, 1);
    printf ("  %-26s", s_configs[c].label);
    if (!s_configs[c].agents)
        printf (" %9s %11s %7s", "", "", "");
    else if (nwindows >= 3 * reps) {
        // Seconds of a shorter run are mostly its ingest or its tail.
        s_stat_t sw = s_stat (windows, nwindows, 1);
        printf (" %9.0f %11.0f %7.0f", sr.median, sw.median, sw.best);
    }
    else
        printf (" %9.0f %11s %7s", sr.median, "-", "-");
    printf (" %9.0f %7.0f %7.0f %6.0f %6.1f %6.1f\n", si.median, cpu[0] * per, cpu[1] * per,
            cpu[2] * per, s_mib (hwm), s_mib (rss));
    if (lost)
        printf ("  %-26s %ld FILE events never acknowledged (ACKs lost)\n", "", lost);
    fflush (stdout);
    if (s_configs[c].agents && sr.median > best->rate) {
        best->rate = sr.median, best->config = c;
        best->cpu = (cpu[0] + cpu[1] + cpu[2]) * per, best->broker = cpu[0] * per;
    }
    best->seqs_per_ack = ack_msgs ? (double) acked / ack_msgs : 0;
    return 0;
}

// The store's share: the broker's store calls for the same pairs, in this
// process, committing every commit_ms like the broker. 0, or -1.
static int
s_store_alone (const s_run_t *run, const char *alone_db)
{
    double calls[S_CALLS], total = 0, event_s = 0;
    double alone = s_write_pairs (alone_db, "alone", run->history_run, 0, run->commit_ms / 1000.0,
                                  NULL, calls, &event_s);
    s_remove_db (alone_db);
    if (alone < 0)
        return -1;
    printf ("  the store alone: the broker's store calls for %d pairs, made in this process,\n"
            "  commit every %d ms, no messages:\n",
            run->history_run, run->commit_ms);
    for (int c = 0; c < S_CALLS; c++) {
        printf ("  %-44s %9.1f  us per pair\n", s_call_names[c], calls[c] * 1e6);
        total += calls[c];
    }
    printf ("  %-44s %9.1f  us per pair = %.0f pairs/s: the store's ceiling\n", "all", total * 1e6,
            alone);
    printf ("  %-44s %9.1f  us per row, %.0f %% of the above at 5 per pair\n",
            "an event row alone (store_event)", event_s * 1e6, 500 * event_s / total);
    return 0;
}

// The floor: SQLite alone, the rows a pair must leave and nothing else
// (bench/floor.c), then with each of the store's guarantees. Best of
// three, the variants taken in turn: this machine's speed drifts within
// minutes. 0, or -1.
static int
s_store_floor (const s_run_t *run, const char *alone_db)
{
    static const struct {
        int flags;
        const char *label;
    } floors[] = {
        {0, "the rows alone, no event rows"},
        {FLOOR_EVENTS, "+ 5 event rows: the floor"},
        {FLOOR_EVENTS | FLOOR_FK, "floor + foreign keys"},
        {FLOOR_EVENTS | FLOOR_STARTUP, "floor + start-up indexes"},
        {FLOOR_EVENTS | FLOOR_READS, "floor + state reads"},
        {FLOOR_EVENTS | FLOOR_FK | FLOOR_STARTUP | FLOOR_READS,
         "floor + all three (the store's shape)"},
    };
    enum { NFLOORS = sizeof floors / sizeof floors[0] };
    double floor_cpu[NFLOORS], floor_wall[NFLOORS];
    for (int f = 0; f < NFLOORS; f++)
        floor_cpu[f] = floor_wall[f] = 1e9;
    for (int rep = 0; rep < 3; rep++)
        for (int f = 0; f < NFLOORS; f++) {
            double c, w;
            if (floor_measure (alone_db, run->history_run, floors[f].flags, &c, &w) != 0) {
                log_error ("cannot measure the floor in '%s'", alone_db);
                return -1;
            }
            if (c < floor_cpu[f])
                floor_cpu[f] = c, floor_wall[f] = w;
        }
    printf ("  SQLite alone writing the rows a pair must leave (2 files, the pair, an attempt\n"
            "  opened and closed, a result) in the leanest schema, commit every 2 ms, FULL,\n"
            "  then with what the store guarantees beyond them (bench/floor.c):\n");
    for (int f = 0; f < NFLOORS; f++)
        printf ("  %-44s %9.1f  us CPU per pair = %.0f pairs/s on a whole CPU\n", floors[f].label,
                floor_cpu[f], 1e6 / floor_wall[f]);
    printf ("  at 25000 pairs/s the broker's one thread has 40 us a pair for its store\n"
            "  calls and its messages together (SQLite admits one writer)\n");
    return 0;
}

// 1. The broker's durable full cycle, then the store alone and its floor.
// 0, or -1.
static int
s_section_cycle (const s_run_t *run)
{
    printf ("\n1. Broker durable full cycle: FILE x2 -> pair -> TASK -> noop -> RESULT recorded\n"
            "   durability = full, commit_ms = %s, fresh store, %d pairs, at most %d FILE\n"
            "   events unacknowledged, nothing resent; this process is the watcher. Time: first\n"
            "   FILE sent to last result recorded (the broker's clock in the event log)\n",
            run->commit_text, run->cycle_pairs, WINDOW);
    printf ("  %-26s %-29s %9s %-22s %-13s\n", "", "---------- pairs/s ----------", "files/s",
            "---- CPU us/pair -----", "- broker MiB-");
    printf ("  %-26s %9s %11s %7s %9s %7s %7s %6s %6s %6s\n", "", "whole run", "1 s: median",
            "best", "acked", "broker", "agents", "bench", "HWM", "RSS");
    s_best_t best = {0, 0, 0, 0, 0};
    for (int c = 0; c < S_NCONFIGS; c++)
        if (s_cycle_config (run, c, &best) != 0)
            return -1;
    printf ("  %-26s %9.0f  pairs/s (%s)   target >= 25000\n", "best configuration", best.rate,
            s_configs[best.config].label);
    long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
    printf ("  at that rate the broker keeps %.0f %% of one CPU busy, the three programs %.0f %%\n"
            "  of the %ld CPUs (%.0f us of CPU per pair in all)\n",
            best.broker * best.rate / 1e4, best.cpu * best.rate / 1e4 / ncpu, ncpu, best.cpu);
    printf ("  for comparison: beanstalkd with binlog 6-16 k jobs/s, gearmand + SQLite 0.6 k"
            " jobs/s\n"
            "  whole run: pairs / run time (median of runs); 1 s: pairs recorded in each whole\n"
            "  second of a run (runs of 3 s or more); files/s: FILE events acknowledged per\n"
            "  second, first sent to last ACK; CPU: user + system over the run (bench: this\n"
            "  process, the watcher's part, FILEs in BATCHes of %d);\n"
            "  each ACK acknowledged %.2f FILE events on average (the protocol allows %d)\n",
            FILE_BATCH, best.seqs_per_ack, PROTO_MAX_ACK);
    char alone_db[PATH_MAX + 32];
    snprintf (alone_db, sizeof alone_db, "%s/alone.db", run->root);
    if (s_store_alone (run, alone_db) != 0 || s_store_floor (run, alone_db) != 0)
        return -1;
    fflush (stdout);
    return 0;
}

// Section 2's runs, on the empty store (h 0) and over the history (h 1).
typedef struct {
    double rate[2][MAX_REPS], start[2][MAX_REPS], cpu[2];
    double windows[2][MAX_REPS * MAX_WINDOWS];
    int nwindows[2];
    long hwm[2], rss[2];
} s_history_t;

// Section 2's table from its runs.
static void
s_history_print (const s_run_t *run, s_history_t *hi)
{
    int reps = run->reps;
    printf ("  %-26s %-29s %9s %8s %-13s\n", "", "---------- pairs/s ----------", "broker",
            "broker", "- broker MiB-");
    printf ("  %-26s %9s %11s %7s %9s %8s %6s %6s\n", "", "whole run", "1 s: median", "best",
            "start s", "CPU us/p", "HWM", "RSS");
    s_stat_t sr[2], sw[2] = {{0, 0}, {0, 0}}, ss[2];
    for (int h = 0; h < 2; h++) {
        char label[64];
        if (h)
            snprintf (label, sizeof label, "%d pairs of history", run->history_pairs);
        else
            snprintf (label, sizeof label, "empty store");
        sr[h] = s_stat (hi->rate[h], reps, 1);
        ss[h] = s_stat (hi->start[h], reps, 0);
        printf ("  %-26s %9.0f", label, sr[h].median);
        if (hi->nwindows[h] > 0) {
            sw[h] = s_stat (hi->windows[h], hi->nwindows[h], 1);
            printf (" %11.0f %7.0f", sw[h].median, sw[h].best);
        }
        else
            printf (" %11s %7s", "-", "-");
        printf (" %9.2f %8.0f %6.1f %6.1f\n", ss[h].median,
                hi->cpu[h] * 1e6 / run->history_run / reps, s_mib (hi->hwm[h]),
                s_mib (hi->rss[h]));
    }
    printf ("  %-26s %9.2f", "history / empty", sr[1].median / sr[0].median);
    if (hi->nwindows[0] > 0 && hi->nwindows[1] > 0)
        printf (" %11.2f %7.2f", sw[1].median / sw[0].median, sw[1].best / sw[0].best);
    else
        printf (" %11s %7s", "-", "-");
    printf (" %9s %8.2f %6.2f %6.2f\n", "", hi->cpu[1] / hi->cpu[0],
            (double) hi->hwm[1] / hi->hwm[0], (double) hi->rss[1] / hi->rss[0]);
    printf ("  target: pairs/s within 10 %% of the empty store (ratio >= 0.90); broker memory\n"
            "  independent of history. start s: spawn to sockets bound (the store opened and\n"
            "  checked, every file of every experiment offered again to the pairing rules)\n");
}

// 2. Dispatch with history against an empty store. 0, or -1.
static int
s_section_history (const s_run_t *run)
{
    printf ("\n2. Dispatch with history: %d DONE pairs already in the store, then %d new pairs\n"
            "   in a new experiment (1 agent x 8 threads), against the same on an empty store\n",
            run->history_pairs, run->history_run);
    char history_db[PATH_MAX + 32];
    snprintf (history_db, sizeof history_db, "%s/history.db", run->root);
    double t0 = util_now ();
    int64_t history_events = 0;
    if (s_write_pairs (history_db, "history", run->history_pairs, HISTORY_COMMIT, 0,
                       &history_events, NULL, NULL)
        < 0)
        return -1;
    double build_s = util_now () - t0;
    struct stat st;
    double db_mib = stat (history_db, &st) == 0 ? st.st_size / 1048576.0 : 0;
    printf ("  %-44s %9.1f  s    (%.0f pairs/s, %.0f MiB, commit every %d)\n",
            "history written with the store API", build_s, run->history_pairs / build_s, db_mib,
            HISTORY_COMMIT);
    fflush (stdout);
    static s_history_t hi;
    memset (&hi, 0, sizeof hi);
    for (int r = 0; r < run->reps; r++)
        for (int h = 0; h < 2; h++) {
            s_cycle_t cy;
            char name[32], experiment[32];
            snprintf (name, sizeof name, "%s-%d", h ? "history" : "empty", r);
            // Each run adds its pairs to the history in an experiment of
            // its own: run r sees history + r x history_run pairs.
            snprintf (experiment, sizeof experiment, "run%d", r);
            if (s_farm_cycle (run->root, name, &s_configs[0], experiment, run->history_run,
                              h ? history_db : NULL, h ? &history_events : NULL, &cy,
                              &hi.start[h][r])
                != 0)
                return -1;
            hi.rate[h][r] = run->history_run / cy.cycle_s;
            for (int w = 0; w < cy.nwindows; w++)
                hi.windows[h][hi.nwindows[h]++] = cy.window_rates[w];
            hi.cpu[h] += cy.broker_cpu_s;
            hi.hwm[h] = cy.hwm_kb > hi.hwm[h] ? cy.hwm_kb : hi.hwm[h];
            hi.rss[h] = cy.rss_kb > hi.rss[h] ? cy.rss_kb : hi.rss[h];
        }
    s_history_print (run, &hi);
    s_remove_db (history_db);
    fflush (stdout);
    return 0;
}

// Section 3's figures from its runs (pv's lists are sorted here).
static void
s_piv_print (const s_run_t *run, s_piv_t *pv)
{
    qsort (pv->latency, (size_t) pv->n, sizeof (double), s_cmp_double);
    qsort (pv->to_broker, (size_t) pv->n, sizeof (double), s_cmp_double);
    qsort (pv->compute, (size_t) pv->n, sizeof (double), s_cmp_double);
    double lat_med = s_quantile (pv->latency, pv->n, 0.5);
    double lat_99 = s_quantile (pv->latency, pv->n, 0.99);
    double agent_med = s_quantile (pv->compute, pv->n, 0.5);
    double pure_pair = pv->pair_idle.median;
    printf ("  in process: FFTW wisdom %s '%s'\n",
            pv->wisdom ? "loaded from" : "not found (plans measured now) at",
            piv_wisdom_default_path ());
    printf ("  %-44s %9s %9s\n", "", "best", "median");
    printf ("  %-44s %9.1f %9.1f  ms\n", "load + PIV of one pair, in process, 1 thread",
            pv->pair_1t.best * 1e3, pv->pair_1t.median * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms\n", "its field written as txt (as the agent does)",
            pv->write_1t.best * 1e3, pv->write_1t.median * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms   (the latency run's compute)\n",
            "load + PIV, each pair after 0.4 s idle", pv->pair_idle.best * 1e3,
            pv->pair_idle.median * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms   (exec, wisdom, load, PIV, write)\n",
            "pivfarm-piv, one pair alone", pv->exec_alone.best * 1e3,
            pv->exec_alone.median * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms   (%.2f pairs/s at best)\n", "pivfarm-piv, two pairs at once",
            pv->exec_two.best * 1e3, pv->exec_two.median * 1e3, 2 / pv->exec_two.best);
    printf ("  throughput, %d pairs, %d run(s), each farm run right after an in-process one:\n",
            run->piv_pairs, run->compute_reps);
    printf ("  %-44s %9.2f %9.2f  pairs/s (load + PIV: the pure compute throughput)\n",
            "every pair on 2 threads, in process", pv->rate_2t.best, pv->rate_2t.median);
    printf ("  %-44s %9.2f %9.2f  pairs/s (first rename to last result recorded)\n",
            "farm, every pair landed at once", pv->farm_rate.best, pv->farm_rate.median);
    printf ("  %-44s %9.0f %9.0f  %%    target >= 80 %%\n", "farm / pure compute, run by run",
            100 * pv->ratio.best, 100 * pv->ratio.median);
    printf ("  latency: %d pairs one at a time, each landed %.0f ms after the last result\n",
            pv->n, pv->pause_s * 1e3);
    printf ("  %-44s %9s %9s\n", "", "median", "p99");
    printf ("  %-44s %9.1f %9.1f  ms   target: median <= compute + 20 ms = %.1f ms\n",
            "close of frame B -> result recorded", lat_med * 1e3, lat_99 * 1e3,
            (pure_pair + 0.020) * 1e3);
    printf ("  %-44s %9.1f %9.1f  ms   (load, PIV, write, encode)\n",
            "compute time per pair, as the agent says", agent_med * 1e3,
            s_quantile (pv->compute, pv->n, 0.99) * 1e3);
    printf ("  %-44s %9.1f %9s  ms   (the farm's own share of the latency)\n",
            "latency - agent compute (medians)", (lat_med - agent_med) * 1e3, "");
    printf ("  %-44s %9.1f %9.1f  ms\n", "close of frame B -> its FILE at the broker",
            s_quantile (pv->to_broker, pv->n, 0.5) * 1e3,
            s_quantile (pv->to_broker, pv->n, 0.99) * 1e3);
    printf ("  %-44s %9.2f %9s  s    (two pairs, the agent's engines made)\n",
            "first pairs through a fresh agent", pv->warm_s, "");
    printf ("  %-44s %9.1f %9.1f  MiB  (broker HWM, RSS; agent HWM %.1f MiB)\n", "memory",
            s_mib (pv->hwm_kb), s_mib (pv->rss_kb), s_mib (pv->agent_hwm_kb));
    printf ("  compute: load + PIV in process, 1 thread, each pair after the same idle pause\n"
            "  (median). p99: nearest rank; of %d values, the largest%s\n",
            pv->n, pv->n < 100 ? "" : " but a few");
}

// 3. End to end on real PIV. 0, or -1.
static int
s_section_piv (const s_run_t *run)
{
    printf ("\n3. End to end on real PIV: %s, single pass %s px, 50 %%, 1 run; watcher (inotify),\n"
            "   broker, 1 agent x 2 threads (processor piv). Frames are hard-linked outside the\n"
            "   watch root, then renamed in (the bench copies no data while the agent works)\n",
            PIV_SIZE, PIV_PASSES);
    s_piv_t pv;
    if (s_bench_piv (run->root, run->piv_pairs, run->compute_reps, &pv) != 0)
        return -1;
    s_piv_print (run, &pv);
    return 0;
}

int
main (int argc, char *argv[])
{
    log_open ("bench_farm", 0);
    static s_run_t run;
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
    printf ("programs from '%s'; farms on ipc:// under '%s'\n", s_bin_dir, run.root);
    s_section_machine (&run);
    int rc = (s_want (run.only, 1) && s_section_cycle (&run) != 0)
                     || (s_want (run.only, 2) && s_section_history (&run) != 0)
                     || (s_want (run.only, 3) && s_section_piv (&run) != 0)
                 ? 1
                 : 0;

    s_kill_children ();
    if (rc == 0) {
        s_rmtree (run.root);
        printf ("\nwhole run %.1f s\n", util_now () - t_start);
    }
    else if (s_interrupted) {
        s_rmtree (run.root);
        return 128 + s_interrupted;
    }
    else {
        s_rm_stores (run.root);
        log_error ("stopped; the programs' logs are kept in '%s'", run.root);
    }
    return rc;
}
