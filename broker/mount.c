// mount.c — the storage stage's dealings with the system (storage.h):
// mounting and unmounting a RAM disk (itself as root, or through
// storage/mount_helper), and resolving a path that may not exist yet.

#include "broker/storage.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

// Runs the mount helper: HELPER WHAT ARG [ARG2]; 0, or -1 with err.
static int
s_helper (const char *helper, const char *what, const char *arg, const char *arg2, char *err,
          size_t errlen)
{
    char *argv[] = {(char *) helper, (char *) what, (char *) arg, (char *) arg2, NULL};
    // The broker blocks SIGHUP (read through a signalfd): not the helper.
    posix_spawnattr_t attr;
    sigset_t none;
    sigemptyset (&none);
    posix_spawnattr_init (&attr);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int rc = posix_spawn (&pid, argv[0], NULL, &attr, argv, environ);
    posix_spawnattr_destroy (&attr);
    if (rc != 0) {
        snprintf (err, errlen, "cannot run the mount helper '%s': %s", argv[0], strerror (rc));
        return -1;
    }
    int status = 0;
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        snprintf (err, errlen, "the mount helper '%s %s' failed for '%s' (status %d)", argv[0],
                  what, arg2 ? arg2 : arg, WIFEXITED (status) ? WEXITSTATUS (status) : -1);
        return -1;
    }
    return 0;
}

int
storage_mount (const char *helper, const char *path, int64_t size, char *err, size_t errlen)
{
    char bytes[32];
    snprintf (bytes, sizeof bytes, "%lld", (long long) size);
    if (*helper)
        return s_helper (helper, "mount", bytes, path, err, errlen);
    if (geteuid () != 0) {
        snprintf (err, errlen,
                  "cannot mount a RAM disk at '%s': the broker is not root and "
                  "storage/mount_helper is not set; run the broker as root, give it a "
                  "privileged helper, or provision with --dir",
                  path);
        return -1;
    }
    char options[64];
    snprintf (options, sizeof options, "size=%lld,mode=0775", (long long) size);
    if (mount ("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) {
        snprintf (err, errlen, "cannot mount a RAM disk at '%s': %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

int
storage_umount (const char *helper, const char *path, char *err, size_t errlen)
{
    if (*helper)
        return s_helper (helper, "umount", path, NULL, err, errlen);
    if (umount (path) != 0) {
        snprintf (err, errlen, "cannot unmount '%s': %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

int
storage_resolve (const char *path, char *out, size_t outlen, char *why, size_t whylen)
{
    char head[PATH_MAX], tail[PATH_MAX] = "", real[PATH_MAX], tmp[PATH_MAX];
    snprintf (head, sizeof head, "%s", path);
    while (!realpath (head, real)) {
        struct stat st;
        if (errno != ENOENT || lstat (head, &st) == 0) {
            snprintf (why, whylen, "cannot resolve '%s': %s", head,
                      errno == ENOENT ? "a symbolic link to nowhere" : strerror (errno));
            return -1;
        }
        char *slash = strrchr (head, '/');
        if (!slash) {
            snprintf (why, whylen, "'%s' is not an absolute path", path);
            return -1;
        }
        const char *name = slash + 1;
        if (strcmp (name, "..") == 0) {
            snprintf (why, whylen, "'%s' has a '..' where nothing exists yet", path);
            return -1;
        }
        if (*name && strcmp (name, ".") != 0) {
            snprintf (tmp, sizeof tmp, "%s%s%s", name, *tail ? "/" : "", tail);
            snprintf (tail, sizeof tail, "%s", tmp);
        }
        if (slash == head)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    int n = snprintf (out, outlen, "%s%s%s", real, *tail && strcmp (real, "/") != 0 ? "/" : "",
                      tail);
    if (n < 0 || (size_t) n >= outlen) {
        snprintf (why, whylen, "'%s' is too long", path);
        return -1;
    }
    return 0;
}

