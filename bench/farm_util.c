// farm_util.c — bench_farm's children and small helpers: every program it
// starts is killed, by pid, however the run ends (normal, failure, a
// signal); statistics of runs, /proc readings, files and stores removed.

#include "bench/farm.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

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
pid_t
bf_spawn (char *const argv[], const char *log)
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
int
bf_stop (pid_t pid, int sig, double timeout_s)
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
int
bf_wait (pid_t pid)
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
int
bf_alive (pid_t pid)
{
    int status;
    if (pid <= 0)
        return 0;
    if (waitpid (pid, &status, WNOHANG) == 0)
        return 1;
    s_forget_child (pid);
    return 0;
}

void
bf_kill_children (void)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s_children[i] > 0) {
            kill (s_children[i], SIGKILL);
            waitpid (s_children[i], NULL, 0);
            s_children[i] = 0;
        }
}

volatile sig_atomic_t bf_interrupted;  // the signal that asked us to stop, or 0

// SIGINT, SIGTERM, SIGHUP: the children die now; every wait of the bench
// sees the flag (or its child gone) and the run unwinds through its
// clean-up, which removes the temporary directory.
void
bf_on_signal (int sig)
{
    bf_interrupted = sig;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s_children[i] > 0)
            kill (s_children[i], SIGKILL);
}

int
bf_stopped (void)
{
    if (bf_interrupted)
        log_error ("interrupted by signal %d", (int) bf_interrupted);
    return bf_interrupted != 0;
}

// ---------------------------------------------------------------------------
// Small helpers

int
bf_cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

bf_stat_t
bf_stat (double *v, int n, int rate)
{
    qsort (v, (size_t) n, sizeof *v, bf_cmp_double);
    double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return (bf_stat_t) {rate ? v[n - 1] : v[0], median};
}

// The p-quantile (0..1) of n sorted values, nearest rank.
double
bf_quantile (const double *sorted, int n, double p)
{
    int k = (int) (p * n + 0.999999) - 1;
    return sorted[k < 0 ? 0 : k >= n ? n - 1 : k];
}

// VmHWM and VmRSS of pid, kB (-1 if unreadable).
void
bf_memory (pid_t pid, long *hwm_kb, long *rss_kb)
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
double
bf_cpu (pid_t pid)
{
    return bf_cpu_thread (pid, 0);
}

double
bf_cpu_thread (pid_t pid, pid_t tid)
{
    char path[64], buf[1024];
    if (tid)
        snprintf (path, sizeof path, "/proc/%d/task/%d/stat", (int) pid, (int) tid);
    else
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
double
bf_cpu_self (void)
{
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec
           + ru.ru_stime.tv_usec * 1e-6;
}

double
bf_cpu_host (void)
{
    FILE *f = fopen ("/proc/stat", "r");
    if (!f)
        return -1;
    // cpu  user nice system idle iowait irq softirq steal ...
    unsigned long long v[8] = {0};
    int n = fscanf (f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]);
    fclose (f);
    if (n < 7)
        return -1;
    return (double) (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double) sysconf (_SC_CLK_TCK);
}

double
bf_cpu_thread_self (void)
{
    struct rusage ru;
    getrusage (RUSAGE_THREAD, &ru);
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

void
bf_rmtree (const char *path)
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
            || strcmp (dot, ".db-shm") == 0 || strcmp (dot, ".tif") == 0
            || strcmp (dot, ".lock") == 0))
        remove (path);
    return 0;
}

// After a failure: the logs stay for reading, the stores (up to a GiB with
// the history) and frames go.
void
bf_rm_stores (const char *path)
{
    nftw (path, s_rm_store, 16, FTW_PHYS);
}

// Moves a store and its -wal and -shm files (if any). 0 or -1.
int
bf_move_db (const char *from, const char *to)
{
    // The lock file too: the broker's store refuses a missing database
    // whose lock file says it was in use, and the bench starts afresh.
    static const char *const sides[] = {"", "-wal", "-shm", ".lock"};
    for (int i = 0; i < 4; i++) {
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

void
bf_remove_db (const char *db)
{
    // The lock file too: the broker's store refuses a missing database
    // whose lock file says it was in use, and the bench starts afresh.
    static const char *const sides[] = {"", "-wal", "-shm", ".lock"};
    for (int i = 0; i < 4; i++) {
        char path[PATH_MAX + 40];
        snprintf (path, sizeof path, "%s%s", db, sides[i]);
        unlink (path);
    }
}

int
bf_mkdir (const char *path)
{
    if (mkdir (path, 0755) != 0 && errno != EEXIST) {
        log_error ("cannot make directory '%s': %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

int
bf_write_file (const char *path, const void *data, size_t len)
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
const char *
bf_fs_name (const char *path)
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
double
bf_fsync_floor (const char *dir, int n)
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
    return bf_stat (t, n, 0).median;
}


double
bf_mib (long kb)
{
    return kb / 1024.0;
}
