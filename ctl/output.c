// output.c — every file pivctl writes (export, stats, keygen) reaches its
// name whole and never through a link: written as a temporary of an
// unpredictable name beside it (made with O_EXCL | O_NOFOLLOW), synced, then
// renamed without replacing anything, or with --force replacing the name
// itself, never what a link there points to.

#include "ctl/ctl.h"

#include "common/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEMP_TRIES 100 // names drawn while each is taken already

// What is at a name, for a refusal.
static const char *
s_kind (mode_t mode)
{
    return S_ISREG (mode)    ? "a regular file"
           : S_ISLNK (mode)  ? "a symbolic link"
           : S_ISDIR (mode)  ? "a directory"
           : S_ISFIFO (mode) ? "a FIFO"
           : S_ISSOCK (mode) ? "a socket"
                             : "a device";
}

// The destination as the operator reads it: DIR/REL, or REL for a dir NULL.
static void
s_shown (const char *dir, const char *rel, char *path, size_t size)
{
    if (dir)
        snprintf (path, size, "%s/%s", dir, rel);
    else
        snprintf (path, size, "%s", rel);
}

// Why the directories 'sub' beneath 'dir' cannot be opened there: the first
// that is not a directory (a link is not followed beneath dir).
static void
s_in_the_way (const char *dir, const char *sub, const char *path, char *err, size_t errlen)
{
    char step[PATH_MAX + NAME_MAX + 2];
    struct stat st;
    for (const char *end = sub;; end++) {
        if (*end && *end != '/')
            continue;
        snprintf (step, sizeof step, "%s/%.*s", dir, (int)(end - sub), sub);
        if (lstat (step, &st) == 0 && !S_ISDIR (st.st_mode)) {
            snprintf (err, errlen, "cannot write '%s': '%s' on its way is %s%s", path, step,
                      s_kind (st.st_mode),
                      S_ISLNK (st.st_mode) ? " (not followed beneath the directory given)" : "");
            return;
        }
        if (!*end)
            break;
    }
    snprintf (err, errlen, "cannot write '%s': a symbolic link on its way leads out of '%s'", path,
              dir);
}

// Opens the directory that holds rel's last component (copied into 'name'):
// dir NULL: rel's directory as the operator named it; else rel's directories
// beneath dir, no link leading out followed, made first if 'make'. The
// descriptor; -2 when that directory does not exist yet (nor the file,
// then); -1 with err naming 'path'.
static int
s_parent (const char *dir, const char *rel, int make, const char *path, char *name, char *err,
          size_t errlen)
{
    const char *slash = strrchr (rel, '/');
    const char *last = slash ? slash + 1 : rel;
    if (!*last || strlen (last) > NAME_MAX) {
        snprintf (err, errlen, "cannot write '%s': %s", path,
                  *last ? strerror (ENAMETOOLONG) : "no file name after its last '/'");
        return -1;
    }
    snprintf (name, NAME_MAX + 1, "%s", last);
    char sub[PATH_MAX];
    snprintf (sub, sizeof sub, "%.*s", slash ? (int)(slash - rel) : 0, rel);
    int fd;
    if (!dir) // the operator's own path: followed as given
        fd = open (!slash ? "." : *sub ? sub : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    else if (!slash)
        fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    else if (make && path_mkdirs_beneath (dir, rel) != 0)
        fd = -1;
    else
        fd = path_open_beneath (dir, sub, O_RDONLY | O_DIRECTORY, 0);
    if (fd >= 0)
        return fd;
    if (errno == ENOENT && !make)
        return -2;
    if (dir && slash && (errno == EXDEV || errno == ELOOP || errno == ENOTDIR))
        s_in_the_way (dir, sub, path, err, errlen);
    else
        snprintf (err, errlen, "cannot write '%s': %s", path, strerror (errno));
    return -1;
}

// ctl_out_check, what is at the name in *mode when 1.
static int
s_check (const char *dir, const char *rel, int force, mode_t *mode, char *err, size_t errlen)
{
    char path[PATH_MAX + NAME_MAX + 2], name[NAME_MAX + 1];
    s_shown (dir, rel, path, sizeof path);
    int dirfd = s_parent (dir, rel, 0, path, name, err, errlen);
    if (dirfd == -2)
        return 0;
    if (dirfd < 0)
        return -1;
    struct stat st;
    int found = fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    int saved = errno;
    close (dirfd);
    if (!found && saved == ENOENT)
        return 0;
    if (!found) {
        snprintf (err, errlen, "cannot write '%s': %s", path, strerror (saved));
        return -1;
    }
    // A rename cannot put a file in a directory's place, forced or not.
    if (S_ISDIR (st.st_mode)) {
        snprintf (err, errlen, "cannot write '%s': a directory of that name is in the way", path);
        return -1;
    }
    if (force)
        return 0;
    snprintf (err, errlen, "cannot write '%s': it exists (%s)", path, s_kind (st.st_mode));
    *mode = st.st_mode;
    return 1;
}

int
ctl_out_check (const char *dir, const char *rel, int force, char *err, size_t errlen)
{
    mode_t mode;
    return s_check (dir, rel, force, &mode, err, errlen);
}

// A name taken after pivctl checked it: err says so, naming what is there.
static void
s_appeared (const char *path, mode_t mode, char *err, size_t errlen)
{
    snprintf (err, errlen,
              "cannot write '%s': it appeared while pivctl ran (%s) and is left as it is "
              "(--force replaces it)",
              path, s_kind (mode));
}

// The temporary beside the destination: ".NAME.XXXXXXXX.part", the X drawn
// from the kernel's random source (a name no one can foresee and plant),
// made by this call alone (O_EXCL), never through a link. Its descriptor,
// or -1 with errno.
static int
s_temp (ctl_out_t *self)
{
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int i = 0; i < TEMP_TRIES; i++) {
        unsigned char bytes[8];
        char suffix[sizeof bytes + 1];
        if (getrandom (bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes)
            return -1;
        for (size_t k = 0; k < sizeof bytes; k++)
            suffix[k] = digits[bytes[k] % (sizeof digits - 1)];
        suffix[sizeof bytes] = '\0';
        snprintf (self->temp, sizeof self->temp, ".%.*s.%s.part", NAME_MAX - 15, self->name,
                  suffix);
        int fd = openat (self->dirfd, self->temp,
                         O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

int
ctl_out_init (ctl_out_t *self, const char *dir, const char *rel, mode_t mode, int force, char *err,
              size_t errlen)
{
    memset (self, 0, sizeof *self);
    self->fd = self->dirfd = -1;
    self->force = force;
    s_shown (dir, rel, self->path, sizeof self->path);
    if (!mode) { // as fopen would make it
        mode_t mask = umask (0);
        umask (mask);
        mode = 0666 & ~mask;
    }
    self->mode = mode;
    mode_t there;
    int rc = s_check (dir, rel, force, &there, err, errlen);
    if (rc == 1) // the caller checked every name before the first file
        s_appeared (self->path, there, err, errlen);
    if (rc != 0)
        return -1;
    self->dirfd = s_parent (dir, rel, 1, self->path, self->name, err, errlen);
    if (self->dirfd < 0)
        return -1;
    self->fd = s_temp (self);
    if (self->fd < 0) {
        snprintf (err, errlen, "cannot write '%s': cannot make a temporary beside it: %s",
                  self->path, strerror (errno));
        close (self->dirfd);
        self->dirfd = -1;
        return -1;
    }
    self->state = 1;
    if (!(self->file = fdopen (self->fd, "w"))) {
        snprintf (err, errlen, "cannot write '%s': %s", self->path, strerror (errno));
        ctl_out_release (self);
        return -1;
    }
    snprintf (self->name_by_fd, sizeof self->name_by_fd, "/proc/self/fd/%d", self->fd);
    return 0;
}

const char *
ctl_out_name (ctl_out_t *self, char *err, size_t errlen)
{
    // The descriptor's name reaches the temporary itself, whatever its name
    // in the directory has become meanwhile.
    if (access (self->name_by_fd, W_OK) != 0) {
        snprintf (err, errlen, "cannot write '%s': '%s' is not there (is /proc mounted?): %s",
                  self->path, self->name_by_fd, strerror (errno));
        return NULL;
    }
    return self->name_by_fd;
}

// Puts the finished temporary at its name: renameat2 RENAME_NOREPLACE, or
// (file systems without it, such as NFS) a hard link, which never replaces
// either; with --force a rename, which replaces the name, never a link's
// target. 0, or -1 with errno.
static int
s_place (ctl_out_t *self)
{
    if (self->force)
        return renameat (self->dirfd, self->temp, self->dirfd, self->name);
    if (renameat2 (self->dirfd, self->temp, self->dirfd, self->name, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    if (linkat (self->dirfd, self->temp, self->dirfd, self->name, 0) != 0)
        return -1;
    unlinkat (self->dirfd, self->temp, 0);
    return 0;
}

int
ctl_out_commit (ctl_out_t *self, char *err, size_t errlen)
{
    errno = 0;
    int bad = fflush (self->file) != 0 || ferror (self->file);
    struct stat st;
    if (!bad)
        bad = fchmod (self->fd, self->mode) != 0 || fsync (self->fd) != 0 ||
              fstat (self->fd, &st) != 0;
    // Some file systems (NFS) report a failed write at the close alone.
    bad |= fclose (self->file) != 0;
    self->file = NULL;
    self->fd = -1;
    if (bad) {
        snprintf (err, errlen, "cannot write '%s': %s", self->path,
                  errno ? strerror (errno) : "write error");
        ctl_out_release (self);
        return -1;
    }
    if (s_place (self) != 0) {
        int saved = errno;
        struct stat there;
        if (saved == EEXIST && fstatat (self->dirfd, self->name, &there, AT_SYMLINK_NOFOLLOW) == 0)
            s_appeared (self->path, there.st_mode, err, errlen);
        else if (!self->force && (saved == EPERM || saved == EOPNOTSUPP))
            snprintf (err, errlen,
                      "cannot write '%s': its file system can neither rename without replacing "
                      "nor make a hard link (%s); --force renames it over whatever comes there",
                      self->path, strerror (saved));
        else
            snprintf (err, errlen, "cannot write '%s': %s", self->path, strerror (saved));
        ctl_out_release (self);
        return -1;
    }
    // Nothing held once it is in place: an export of many files keeps no
    // descriptor of those done.
    close (self->dirfd);
    self->dirfd = -1;
    self->state = 2;
    self->placed_dev = st.st_dev;
    self->placed_ino = st.st_ino;
    return 0;
}

void
ctl_out_retract (ctl_out_t *self)
{
    struct stat st;
    if (self->state == 2 && lstat (self->path, &st) == 0 && st.st_dev == self->placed_dev &&
        st.st_ino == self->placed_ino)
        unlink (self->path);
    ctl_out_release (self);
}

void
ctl_out_release (ctl_out_t *self)
{
    if (self->state == 1) {
        if (self->file)
            fclose (self->file);
        else if (self->fd >= 0)
            close (self->fd);
        unlinkat (self->dirfd, self->temp, 0);
        close (self->dirfd);
    }
    self->file = NULL;
    self->fd = self->dirfd = -1;
    self->state = 0;
}
