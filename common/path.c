// path.c — names checked before they touch the file system, and files
// opened beneath a root; see path.h.

#include "common/path.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int
path_check_relative (const char *name, char *why, size_t whylen)
{
    size_t len = strlen (name), where;
    const char *bad = NULL;
    char ctl[80];
    if (len == 0)
        bad = "an empty name";
    else if (len >= PATH_MAX) {
        snprintf (ctl, sizeof ctl, "%zu bytes, over the %d PATH_MAX allows", len, PATH_MAX - 1);
        bad = ctl;
    }
    else if (name[0] == '/')
        bad = "an absolute path";
    else if (util_utf8_invalid ((const unsigned char *) name, len, &where))
        bad = "bytes that are not UTF-8";
    for (size_t i = 0; !bad && i < len; i++) {
        unsigned char c = (unsigned char) name[i];
        if (c < 0x20 || c == 0x7f) {
            snprintf (ctl, sizeof ctl, "a control character (0x%02x)", c);
            bad = ctl;
        }
    }
    // Components: between '/'s, none empty, "." or "..".
    for (const char *p = name; !bad && p <= name + len;) {
        const char *slash = strchr (p, '/');
        size_t n = slash ? (size_t) (slash - p) : strlen (p);
        if (n == 0)
            bad = "an empty component";
        else if (n == 1 && p[0] == '.')
            bad = "a '.' component";
        else if (n == 2 && p[0] == '.' && p[1] == '.')
            bad = "a '..' component";
        else if (n > NAME_MAX) {
            // No file system holds a longer file or directory name.
            snprintf (ctl, sizeof ctl, "%s%zu bytes, over the %d NAME_MAX allows",
                      n == len ? "" : "a component of ", n, NAME_MAX);
            bad = ctl;
        }
        if (!slash)
            break;
        p = slash + 1;
    }
    if (!bad)
        return 0;
    if (why && whylen)
        snprintf (why, whylen, "%s", bad);
    return -1;
}

int
path_check_component (const char *name, char *why, size_t whylen)
{
    if (path_check_relative (name, why, whylen) != 0)
        return -1;
    if (strchr (name, '/')) {
        if (why && whylen)
            snprintf (why, whylen, "a '/' in a single name");
        return -1;
    }
    return 0;
}

// Without openat2: each directory component with O_NOFOLLOW | O_DIRECTORY,
// the last with O_NOFOLLOW. Refuses every symbolic link, inside the root
// or not (stricter than RESOLVE_BENEATH, never weaker).
static int
s_open_walk (int dirfd, const char *rel, int flags, mode_t mode)
{
    char buf[PATH_MAX];
    snprintf (buf, sizeof buf, "%s", rel);
    int fd = dirfd;
    char *p = buf;
    for (char *slash; (slash = strchr (p, '/')); p = slash + 1) {
        *slash = '\0';
        int next = openat (fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        if (fd != dirfd)
            close (fd);
        if (next < 0) {
            errno = saved;
            return -1;
        }
        fd = next;
    }
    int out = openat (fd, p, flags, mode);
    int saved = errno;
    if (fd != dirfd)
        close (fd);
    errno = saved;
    return out;
}

int
path_open_beneath (const char *root, const char *rel, int flags, mode_t mode)
{
    if (path_check_relative (rel, NULL, 0) != 0) {
        errno = EINVAL;
        return -1;
    }
    int dirfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return -1;
    flags |= O_CLOEXEC | O_NOFOLLOW;
    struct open_how how = {.flags = (uint64_t) flags,
                           .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    int fd = (int) syscall (SYS_openat2, dirfd, rel, &how, sizeof how);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM))  // no openat2, or seccomp
        fd = s_open_walk (dirfd, rel, flags, mode);
    int saved = errno;
    close (dirfd);
    errno = saved;
    return fd;
}

int
path_mkdirs_beneath (const char *root, const char *rel)
{
    if (path_check_relative (rel, NULL, 0) != 0) {
        errno = EINVAL;
        return -1;
    }
    char buf[PATH_MAX];
    snprintf (buf, sizeof buf, "%s", rel);
    for (char *slash = strchr (buf, '/'); slash; slash = strchr (slash + 1, '/')) {
        *slash = '\0';
        int fd = path_open_beneath (root, buf, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0 && errno == ENOENT) {
            // Make it beneath its parent, itself opened beneath the root.
            char *last = strrchr (buf, '/');
            int parent = last ? (*last = '\0', path_open_beneath (root, buf, O_RDONLY | O_DIRECTORY, 0))
                              : open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (last)
                *last = '/';
            if (parent < 0)
                return -1;
            struct stat pst;
            int rc = mkdirat (parent, last ? last + 1 : buf, 0775);
            if (rc == 0 && fstat (parent, &pst) == 0)
                rc = path_share_with_group (parent, last ? last + 1 : buf, pst.st_mode);
            int saved = errno;
            close (parent);
            if (rc != 0 && saved != EEXIST) {
                errno = saved;
                return -1;
            }
            fd = path_open_beneath (root, buf, O_RDONLY | O_DIRECTORY, 0);
        }
        if (fd < 0)
            return -1;
        close (fd);
        *slash = '/';
    }
    return 0;
}

int
path_share_with_group (int dirfd, const char *name, mode_t parent_mode)
{
    if (!(parent_mode & S_ISGID) || !(parent_mode & S_IWGRP))
        return 0;
    struct stat st;
    if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return -1;
    mode_t want = (st.st_mode & 07777) | S_ISGID | S_IRGRP | S_IWGRP | S_IXGRP;
    return want == (st.st_mode & 07777) ? 0 : fchmodat (dirfd, name, want, 0);
}

int
path_under (const char *path, const char *dir, const char **rel_p)
{
    size_t n = strlen (dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (n == 0 || strncmp (path, dir, n) != 0)
        return 0;
    const char *rest = path + n;
    if (n == 1 && dir[0] == '/')
        rest = path + 1;
    else if (*rest == '/')
        rest++;
    else if (*rest != '\0')
        return 0;
    while (*rest == '/')
        rest++;
    if (rel_p)
        *rel_p = rest;
    return 1;
}
