// archive.c — the archiver: a thread of the broker (a zactor) that copies
// an experiment's frames to the archive tier in large sequential IOs,
// verifies every copy by SHA-256 and, once the broker has committed where
// each copy is, removes the originals. It never touches the store: it
// reports each verified copy to the broker thread, which records it, so
// that copying gigabytes never blocks the reactor (doc/storage.md).
//
// Pipe protocol (string frames):
//   broker -> archiver  JOB EXP TO IO_SIZE MB_S {ID NAME SRC SHA256 LOCATION}...
//                       REMOVE EXP       (every copy is recorded: remove originals)
//                       KEEP EXP         (the records failed: keep them)
//                       $TERM
//   archiver -> broker  FILE EXP ID SHA256 LOCATION BYTES
//                       COPIED EXP COPIED_NOW ALREADY
//                       REMOVED EXP COUNT
//                       FAILED EXP MESSAGE   (nothing was removed)

#include "broker/internal.h"
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
} s_file_t;

typedef struct {
    zsock_t *pipe;       // to the broker
    char *exp;           // the experiment of the job
    char *to;            // <archive>/<exp>
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

// Copies src to dst (a new file) hashing what it reads. 0, or -1 with err.
static int
s_copy (s_job_t *job, const char *src, const char *dst, char hex[SHA256_HEX], char *err,
        size_t errlen)
{
    int in = open (src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf (err, errlen, "cannot read '%s': %s", src, strerror (errno));
        return -1;
    }
    posix_fadvise (in, 0, 0, POSIX_FADV_SEQUENTIAL);
    int out = broker_mkparents (dst) == 0 ? open (dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                                     : -1;
    if (out < 0) {
        snprintf (err, errlen, "cannot write '%s': %s", dst, strerror (errno));
        close (in);
        return -1;
    }
    sha256_t h;
    sha256_init (&h);
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = read (in, job->buf, job->io)) != 0) {
        if (n < 0) {
            snprintf (err, errlen, "cannot read '%s': %s", src, strerror (errno));
            rc = -1;
            break;
        }
        sha256_update (&h, job->buf, (size_t) n);
        if (write (out, job->buf, (size_t) n) != n) {
            snprintf (err, errlen, "cannot write '%s': %s", dst,
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
        snprintf (err, errlen, "cannot write '%s': %s", dst, strerror (errno));
        rc = -1;
    }
    if (close (out) != 0 && rc == 0) {
        snprintf (err, errlen, "cannot write '%s': %s", dst, strerror (errno));
        rc = -1;
    }
    close (in);
    if (rc == 0)
        sha256_final (&h, hex);
    return rc;
}

// One file: copied and verified (reported to the broker), or found copied
// before and checked. 0, or -1 after a FAILED report (or a stop).
static int
s_one (s_job_t *job, s_file_t *f, int *already)
{
    char err[PATH_MAX * 2 + 256], hex[SHA256_HEX], check[SHA256_HEX];
    struct stat st;
    int src_there = stat (f->src, &st) == 0;
    if (*f->location) {
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
    if (!src_there) {
        s_failed (job, "cannot archive '%s': %s; nothing removed", f->src, strerror (errno));
        return -1;
    }
    char dst[PATH_MAX * 2], part[PATH_MAX * 2 + 8];
    snprintf (dst, sizeof dst, "%s/%s", job->to, f->name);
    snprintf (part, sizeof part, "%s.part", dst);
    if (s_copy (job, f->src, part, hex, err, sizeof err) != 0) {
        if (!job->stop)
            s_failed (job, "%s; nothing removed", err);
        return -1;
    }
    // Read back from the archive tier, not trusted from memory.
    if (sha256_file (part, job->io, check, err, sizeof err) != 0) {
        s_failed (job, "%s; nothing removed", err);
        return -1;
    }
    if (strcmp (check, hex) != 0 || (*f->sha256 && strcmp (hex, f->sha256) != 0)) {
        s_failed (job,
                  "checksum mismatch: the copy '%s' has SHA-256 %s, the original '%s' %s; "
                  "nothing removed",
                  part, check, f->src, *f->sha256 && strcmp (hex, f->sha256) ? f->sha256 : hex);
        return -1;
    }
    if (rename (part, dst) != 0) {
        s_failed (job, "cannot rename '%s': %s; nothing removed", part, strerror (errno));
        return -1;
    }
    char bytes[32];
    snprintf (bytes, sizeof bytes, "%lld", (long long) st.st_size);
    zstr_sendx (job->pipe, "FILE", job->exp, f->id, hex, dst, bytes, NULL);
    return 0;
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
    for (size_t i = 0; i < job->nfiles; i++) {
        int had = already;
        if (s_one (job, &job->files[i], &already) != 0)
            return;
        copied += already == had;
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
        removed += unlink (job->files[i].src) == 0;
    snprintf (now, sizeof now, "%d", removed);
    zstr_sendx (job->pipe, "REMOVED", job->exp, now, NULL);
}

// Reads a JOB message into job; 0 or -1.
static int
s_read_job (s_job_t *job, zmsg_t *msg)
{
    job->exp = zmsg_popstr (msg);
    job->to = zmsg_popstr (msg);
    char *io = zmsg_popstr (msg), *rate = zmsg_popstr (msg);
    job->io = io ? (size_t) atoll (io) : 0;
    job->rate = rate ? atof (rate) * 1e6 : 0;
    zstr_free (&io), zstr_free (&rate);
    size_t n = zmsg_size (msg) / 5;
    job->files = calloc (n ? n : 1, sizeof *job->files);
    if (!job->exp || !job->to || job->io < 4096 || !job->files)
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
