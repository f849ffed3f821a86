// testutil.c — shared helpers of the Check suites; see testutil.h.

#include "tests/testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char s_tmpdir[4096];  // last directory made by tu_tmpdir

const char *
tu_tmpdir (void)
{
    const char *base = getenv ("TMPDIR");
    snprintf (s_tmpdir, sizeof s_tmpdir, "%s/pivfarm-test-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_msg (mkdtemp (s_tmpdir) != NULL, "mkdtemp: %s", strerror (errno));
    return s_tmpdir;
}

static int
s_unlink_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st, (void) flag, (void) ftw;
    return remove (path);
}

void
tu_rmtree (const char *path)
{
    if (path && *path)
        nftw (path, s_unlink_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *
tu_path (const char *dir, const char *name)
{
    static char slots[8][4096];
    static int next;
    char *buf = slots[next++ % 8];
    snprintf (buf, 4096, "%s/%s", dir, name);
    return buf;
}

const char *
tu_bin (const char *program)
{
    const char *dir = getenv ("PIVFARM_BIN");
    return tu_path (dir && *dir ? dir : "./bin", program);
}

const char *
tu_data (const char *name)
{
    const char *dir = getenv ("PIVFARM_DATA");
    return tu_path (dir && *dir ? dir : "../shared/data/piv", name);
}

int
tu_run (char *const argv[], char *out, size_t outlen, int timeout_s)
{
    int fds[2];
    ck_assert (pipe (fds) == 0);
    pid_t pid = fork ();
    ck_assert (pid >= 0);
    if (pid == 0) {
        dup2 (fds[1], 1);
        dup2 (fds[1], 2);
        close (fds[0]);
        close (fds[1]);
        execv (argv[0], argv);
        fprintf (stderr, "cannot run '%s': %s\n", argv[0], strerror (errno));
        _exit (127);
    }
    close (fds[1]);
    fcntl (fds[0], F_SETFL, O_NONBLOCK);
    size_t used = 0;
    int status = 0, done = 0;
    time_t deadline = time (NULL) + timeout_s;
    while (!done) {
        char buf[4096];
        ssize_t n = read (fds[0], buf, sizeof buf);
        if (n > 0) {
            size_t room = outlen - 1 - used;
            size_t take = (size_t) n < room ? (size_t) n : room;
            memcpy (out + used, buf, take);
            used += take;
            continue;
        }
        if (waitpid (pid, &status, WNOHANG) == pid) {
            // Drain what is left in the pipe.
            while ((n = read (fds[0], buf, sizeof buf)) > 0) {
                size_t room = outlen - 1 - used;
                size_t take = (size_t) n < room ? (size_t) n : room;
                memcpy (out + used, buf, take);
                used += take;
            }
            done = 1;
            break;
        }
        if (time (NULL) > deadline) {
            kill (pid, SIGKILL);
            waitpid (pid, &status, 0);
            done = 1;
            status = -1;
            break;
        }
        usleep (2000);
    }
    close (fds[0]);
    out[used] = '\0';
    if (status == -1 || !WIFEXITED (status))
        return -1;
    return WEXITSTATUS (status);
}

char *
tu_slurp (const char *path, size_t *len_p)
{
    FILE *f = fopen (path, "rb");
    if (!f)
        return NULL;
    fseek (f, 0, SEEK_END);
    long len = ftell (f);
    fseek (f, 0, SEEK_SET);
    char *buf = malloc ((size_t) len + 1);
    if (buf && fread (buf, 1, (size_t) len, f) != (size_t) len) {
        free (buf);
        buf = NULL;
    }
    fclose (f);
    if (buf) {
        buf[len] = '\0';
        if (len_p)
            *len_p = (size_t) len;
    }
    return buf;
}

void
tu_spit (const char *path, const void *data, size_t len)
{
    FILE *f = fopen (path, "wb");
    ck_assert_msg (f != NULL, "cannot write '%s': %s", path, strerror (errno));
    ck_assert (fwrite (data, 1, len, f) == len);
    ck_assert (fclose (f) == 0);
}

int
tu_spawn (char *const argv[], const char *log)
{
    pid_t parent = getpid ();
    pid_t pid = fork ();
    ck_assert (pid >= 0);
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (127);
        int fd = open (log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2 (fd, 1);
            dup2 (fd, 2);
            close (fd);
        }
        execv (argv[0], argv);
        fprintf (stderr, "cannot run '%s': %s\n", argv[0], strerror (errno));
        _exit (127);
    }
    return (int) pid;
}

int
tu_stop (int pid, int sig, int timeout_s)
{
    int status = 0;
    if (pid <= 0 || kill (pid, sig) != 0)
        return -1;
    for (int i = 0; i < timeout_s * 100; i++) {
        pid_t got = waitpid (pid, &status, WNOHANG);
        if (got == pid)
            return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
        if (got < 0)
            return -1;
        usleep (10000);
    }
    kill (pid, SIGKILL);
    waitpid (pid, &status, 0);
    return 128 + SIGKILL;
}

int
tu_alive (int pid)
{
    int status;
    return pid > 0 && waitpid (pid, &status, WNOHANG) == 0;
}
