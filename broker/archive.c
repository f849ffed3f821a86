// archive.c — the archiver: a thread of the broker (a zactor) that copies
// an experiment's frames to the archive tier in large sequential IOs,
// verifies every copy by SHA-256 and, once the broker has committed where
// each copy is, removes the originals. It never touches the store: it
// reports each verified copy to the broker thread, which records it, so
// that copying gigabytes never blocks the reactor (doc/storage.md).
//
// Pipe protocol (string frames):
//   broker -> archiver  JOB EXP TO SRCDIR IO_SIZE MB_S {ID NAME SRC SHA256 LOCATION}...
//                       (TO is <archive>/<exp> and SRCDIR <root>/<exp>, both
//                       resolved and checked by storage.c; NAME is opened
//                       beneath each, never through a symbolic link)
//                       REMOVE EXP       (every copy is recorded: remove originals)
//                       KEEP EXP         (the records failed: keep them)
//                       $TERM
//   archiver -> broker  FILE EXP ID SHA256 LOCATION BYTES
//                       SKIPPED EXP NAME WHY (not copied, never removed: the
//                                         job goes on; doc/storage.md)
//                       COPIED EXP COPIED_NOW ALREADY
//                       REMOVED EXP COUNT
//                       FAILED EXP MESSAGE   (nothing was removed)

#include "broker/storage.h"
#include "common/log.h"
#include "common/path.h"
#include "common/sha256.h"
#include "common/util.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *id, *name, *src, *sha256, *location;
    int skipped;          // not a regular file: not copied, never removed
    dev_t dev;            // the original's device and inode, as copied
    ino_t ino;
} s_file_t;

typedef struct {
    zsock_t *pipe;       // to the broker
    char *exp;           // the experiment of the job
    char *to;            // <archive>/<exp>
    char *srcdir;        // <root>/<exp>
    size_t io;           // bytes per read and write
    double rate;         // bytes/s at most (0: no limit)
    s_file_t *files;     // its files
    size_t nfiles;
    char *buf;           // io bytes
    int stop;            // $TERM seen
    double started;      // for the rate limit (monotonic s)
    int64_t moved;       // bytes copied in this job
} s_job_t;

static void
s_job_clear (s_job_t *job)
{
    for (size_t i = 0; i < job->nfiles; i++) {
        s_file_t *f = &job->files[i];
        free (f->id), free (f->name), free (f->src), free (f->sha256), free (f->location);
    }
    free (job->files);
    free (job->exp);
    free (job->to);
    free (job->srcdir);
    free (job->buf);
    zsock_t *pipe = job->pipe;
    int stop = job->stop;
    memset (job, 0, sizeof *job);
    job->pipe = pipe;
    job->stop = stop;
}

// A $TERM waiting on the pipe ends the job at the next block.
static int
s_stopped (s_job_t *job)
{
    if (!job->stop && (zsock_events (job->pipe) & ZMQ_POLLIN)) {
        char *command = zstr_recv (job->pipe);
        job->stop = !command || strcmp (command, "$TERM") == 0;
        zstr_free (&command);
    }
    return job->stop;
}

static void
s_failed (s_job_t *job, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
s_failed (s_job_t *job, const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (message, sizeof message, fmt, ap);
    va_end (ap);
    zstr_sendx (job->pipe, "FAILED", job->exp, message, NULL);
}

int
broker_mkparents (const char *path)
{
    char buf[PATH_MAX * 2 + 16];
    snprintf (buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir (buf, 0775) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

// An errno-like mark: the source is not a regular file.
#define S_NOT_REGULAR (-1)

// The SHA-256 of the open file 'fd' from where it stands, read with the
// job's buffer. 0, or -1 with errno.
static int
s_sha256_fd (s_job_t *job, int fd, char hex[SHA256_HEX])
{
    sha256_t h;
    sha256_init (&h);
    ssize_t n;
    while ((n = read (fd, job->buf, job->io)) > 0)
        sha256_update (&h, job->buf, (size_t) n);
    if (n < 0)
        return -1;
    sha256_final (&h, hex);
    return 0;
}

// Opens the directory of 'name' beneath 'root' (root itself for a plain
// name); *base_p points at the last component. fd or -1 (errno).
static int
s_open_parent (const char *root, const char *name, const char **base_p)
{
    char dir[PATH_MAX];
    snprintf (dir, sizeof dir, "%s", name);
    char *slash = strrchr (dir, '/');
    *base_p = slash ? name + (slash - dir) + 1 : name;
    if (!slash)
        return open (root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    *slash = '\0';
    return path_open_beneath (root, dir, O_RDONLY | O_DIRECTORY, 0);
}

// Copies the open file 'in' to <to>/<name>.part, a new file made beneath
// the archive directory (O_EXCL: a link planted there is never followed),
// hashing what it reads; then renames it to <to>/<name> unless that is the
// original itself. 0, or -1 with err.
static int
s_copy (s_job_t *job, s_file_t *f, int in, char hex[SHA256_HEX], char *err, size_t errlen)
{
    char dst[PATH_MAX * 2], part[PATH_MAX], check[SHA256_HEX];
    snprintf (dst, sizeof dst, "%s/%s", job->to, f->name);
    posix_fadvise (in, 0, 0, POSIX_FADV_SEQUENTIAL);
    const char *base;
    int dirfd = path_mkdirs_beneath (job->to, f->name) == 0
                    ? s_open_parent (job->to, f->name, &base)
                    : -1;
    if (dirfd < 0) {
        snprintf (err, errlen, "cannot write '%s': %s", dst,
                  errno == EXDEV || errno == ELOOP ? "a symbolic link on the way"
                                                  : strerror (errno));
        return -1;
    }
    snprintf (part, sizeof part, "%s.part", base);
    struct stat there;
    if (fstatat (dirfd, base, &there, AT_SYMLINK_NOFOLLOW) == 0 && there.st_dev == f->dev
        && there.st_ino == f->ino) {
        snprintf (err, errlen, "the copy '%s' would land on its own original '%s'", dst, f->src);
        close (dirfd);
        return -1;
    }
    unlinkat (dirfd, part, 0);  // an interrupted copy's
    int out = openat (dirfd, part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0) {
        snprintf (err, errlen, "cannot write '%s.part': %s", dst, strerror (errno));
        close (dirfd);
        return -1;
    }
    sha256_t h;
    sha256_init (&h);
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = read (in, job->buf, job->io)) != 0) {
        if (n < 0) {
            snprintf (err, errlen, "cannot read '%s': %s", f->src, strerror (errno));
            rc = -1;
            break;
        }
        sha256_update (&h, job->buf, (size_t) n);
        if (write (out, job->buf, (size_t) n) != n) {
            snprintf (err, errlen, "cannot write '%s.part': %s", dst,
                      errno ? strerror (errno) : "short write");
            rc = -1;
            break;
        }
        job->moved += n;
        // The bandwidth cap: sleep until the bytes so far are due.
        if (job->rate > 0) {
            double due = job->started + job->moved / job->rate - util_now ();
            if (due > 0)
                zclock_sleep ((int) (due * 1000));
        }
        if (s_stopped (job)) {
            snprintf (err, errlen, "stopped");
            rc = -1;
        }
    }
    if (rc == 0 && fsync (out) != 0) {
        snprintf (err, errlen, "cannot write '%s.part': %s", dst, strerror (errno));
        rc = -1;
    }
    if (close (out) != 0 && rc == 0) {
        snprintf (err, errlen, "cannot write '%s.part': %s", dst, strerror (errno));
        rc = -1;
    }
    if (rc == 0) {
        sha256_final (&h, hex);
        // Read back from the archive tier, not trusted from memory.
        char part_path[PATH_MAX * 2 + 8];
        snprintf (part_path, sizeof part_path, "%s.part", dst);
        int back = openat (dirfd, part, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (back < 0 || s_sha256_fd (job, back, check) != 0) {
            snprintf (err, errlen, "cannot read back '%s': %s", part_path, strerror (errno));
            rc = -1;
        }
        else if (strcmp (check, hex) != 0 || (*f->sha256 && strcmp (hex, f->sha256) != 0)) {
            snprintf (err, errlen,
                      "checksum mismatch: the copy '%s' has SHA-256 %s, the original '%s' %s",
                      part_path, check, f->src,
                      *f->sha256 && strcmp (hex, f->sha256) ? f->sha256 : hex);
            rc = -1;
        }
        if (back >= 0)
            close (back);
    }
    if (rc == 0 && renameat (dirfd, part, dirfd, base) != 0) {
        snprintf (err, errlen, "cannot rename '%s.part': %s", dst, strerror (errno));
        rc = -1;
    }
    if (rc != 0)
        unlinkat (dirfd, part, 0);
    close (dirfd);
    return rc;
}

// Skips 'f': not copied, never removed; logged and told to the broker,
// which keeps it in the job's notes.
static void
s_skip (s_job_t *job, s_file_t *f, const char *why, int *skipped)
{
    log_warning ("archive of '%s': skipped '%s': %s", job->exp, f->src, why);
    zstr_sendx (job->pipe, "SKIPPED", job->exp, f->name, why, NULL);
    f->skipped = 1;
    (*skipped)++;
}

// One file: copied and verified (reported to the broker), or found copied
// before and checked, or skipped (not a regular file: never followed nor
// removed; or gone since it was recorded: a camera's temporary file
// renamed, a frame deleted). 0, or -1 after a FAILED report (or a stop).
static int
s_one (s_job_t *job, s_file_t *f, int *already, int *skipped)
{
    char err[PATH_MAX * 2 + 256], hex[SHA256_HEX], check[SHA256_HEX];
    struct stat st;
    int in = path_open_beneath (job->srcdir, f->name, O_RDONLY | O_NONBLOCK, 0);
    int opened = errno;
    if (in >= 0 && (fstat (in, &st) != 0 || !S_ISREG (st.st_mode))) {
        close (in);
        in = -1;
        opened = S_NOT_REGULAR;
    }
    if (in < 0 && (opened == S_NOT_REGULAR || opened == ELOOP || opened == EXDEV)) {
        s_skip (job, f,
                opened == S_NOT_REGULAR ? "a special file, not a regular file; left in place"
                                        : "a symbolic link, not a regular file; left in place",
                skipped);
        return 0;
    }
    if (in < 0 && opened == ENOENT && !*f->location) {
        // Nothing is lost that the archive could keep: the file is gone.
        s_skip (job, f, "vanished since it was recorded (renamed or deleted)", skipped);
        return 0;
    }
    if (in >= 0) {
        f->dev = st.st_dev;
        f->ino = st.st_ino;
    }
    if (*f->location) {
        if (in >= 0)
            close (in);
        // Recorded before (an interrupted archive): the original goes only
        // if the copy still holds what was recorded.
        if (sha256_file (f->location, job->io, check, err, sizeof err) != 0) {
            s_failed (job, "the archived copy of '%s' is unreadable: %s; nothing removed",
                      f->name, err);
            return -1;
        }
        if (strcmp (check, f->sha256) != 0) {
            s_failed (job,
                      "checksum mismatch: the archived copy '%s' has SHA-256 %s, %s was recorded; "
                      "nothing removed",
                      f->location, check, f->sha256);
            return -1;
        }
        (*already)++;
        return 0;
    }
    if (in < 0) {
        s_failed (job, "cannot archive '%s': %s; nothing removed", f->src, strerror (opened));
        return -1;
    }
    int rc = s_copy (job, f, in, hex, err, sizeof err);
    close (in);
    if (rc != 0) {
        if (!job->stop)
            s_failed (job, "%s; nothing removed", err);
        return -1;
    }
    char dst[PATH_MAX * 2], bytes[32];
    snprintf (dst, sizeof dst, "%s/%s", job->to, f->name);
    snprintf (bytes, sizeof bytes, "%lld", (long long) st.st_size);
    zstr_sendx (job->pipe, "FILE", job->exp, f->id, hex, dst, bytes, NULL);
    return 0;
}

// Removes an original, beneath the experiment's directory, if it is still
// the file that was copied (or checked). 0 or -1.
static int
s_remove (s_job_t *job, s_file_t *f)
{
    if (f->skipped)
        return -1;
    const char *base;
    int dirfd = s_open_parent (job->srcdir, f->name, &base);
    if (dirfd < 0)
        return -1;
    struct stat st;
    int rc = -1;
    int found = fstatat (dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
    if (found == 0 && S_ISREG (st.st_mode)
        && (f->ino == 0 || (st.st_dev == f->dev && st.st_ino == f->ino)))
        rc = unlinkat (dirfd, base, 0);
    else if (found == ENOENT)
        log_notice ("archive of '%s': '%s' vanished since it was copied", job->exp, f->src);
    else
        log_warning ("archive of '%s': '%s' changed since it was copied; left in place",
                     job->exp, f->src);
    close (dirfd);
    return rc;
}

static void
s_run (s_job_t *job)
{
    int copied = 0, already = 0;
    job->started = util_now ();
    if (!job->buf) {
        s_failed (job, "cannot archive: out of memory");
        return;
    }
    int skipped = 0;
    for (size_t i = 0; i < job->nfiles; i++) {
        int had = already, had_skipped = skipped;
        if (s_one (job, &job->files[i], &already, &skipped) != 0)
            return;
        copied += already == had && skipped == had_skipped;
    }
    char now[16], before[16];
    snprintf (now, sizeof now, "%d", copied);
    snprintf (before, sizeof before, "%d", already);
    zstr_sendx (job->pipe, "COPIED", job->exp, now, before, NULL);
    // The originals wait until the broker has committed every location.
    char *command = NULL, *exp = NULL;
    if (zstr_recvx (job->pipe, &command, &exp, NULL) < 1 || strcmp (command, "REMOVE") != 0) {
        job->stop = !command || strcmp (command, "$TERM") == 0;  // KEEP: the job ends here
        zstr_free (&command), zstr_free (&exp);
        return;
    }
    zstr_free (&command), zstr_free (&exp);
    int removed = 0;
    for (size_t i = 0; i < job->nfiles; i++)
        removed += s_remove (job, &job->files[i]) == 0;
    snprintf (now, sizeof now, "%d", removed);
    zstr_sendx (job->pipe, "REMOVED", job->exp, now, NULL);
}

// Reads a JOB message into job; 0 or -1.
static int
s_read_job (s_job_t *job, zmsg_t *msg)
{
    job->exp = zmsg_popstr (msg);
    job->to = zmsg_popstr (msg);
    job->srcdir = zmsg_popstr (msg);
    char *io = zmsg_popstr (msg), *rate = zmsg_popstr (msg);
    job->io = io ? (size_t) atoll (io) : 0;
    job->rate = rate ? atof (rate) * 1e6 : 0;
    zstr_free (&io), zstr_free (&rate);
    size_t n = zmsg_size (msg) / 5;
    job->files = calloc (n ? n : 1, sizeof *job->files);
    if (!job->exp || !job->to || !job->srcdir || job->io < 4096 || !job->files)
        return -1;
    for (size_t i = 0; i < n; i++) {
        s_file_t *f = &job->files[job->nfiles++];
        f->id = zmsg_popstr (msg), f->name = zmsg_popstr (msg), f->src = zmsg_popstr (msg);
        f->sha256 = zmsg_popstr (msg), f->location = zmsg_popstr (msg);
    }
    job->buf = malloc (job->io);
    return 0;
}

void
broker_archiver (zsock_t *pipe, void *args)
{
    (void) args;
    s_job_t job = {.pipe = pipe};
    zsock_signal (pipe, 0);
    while (!job.stop) {
        zmsg_t *msg = zmsg_recv (pipe);
        if (!msg)
            break;
        char *command = zmsg_popstr (msg);
        if (!command || strcmp (command, "$TERM") == 0)
            job.stop = 1;
        else if (strcmp (command, "JOB") == 0) {
            if (s_read_job (&job, msg) == 0)
                s_run (&job);
            else
                zstr_sendx (pipe, "FAILED", job.exp ? job.exp : "", "bad job", NULL);
            s_job_clear (&job);
        }
        zstr_free (&command);
        zmsg_destroy (&msg);
    }
}
