// iobench.c — sequential IO throughput of a directory by IO size; see
// iobench.h. Each write pass ends with fsync, so that the figure is the
// volume's, not the page cache's; before each read pass the file's pages
// are dropped from the cache (POSIX_FADV_DONTNEED), which a RAM disk
// ignores: its read figure is memory's, as the camera's reader sees it.

#include "common/iobench.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
s_fail (char *err, size_t errlen, const char *what, const char *path)
{
    snprintf (err, errlen, "cannot %s '%s': %s", what, path, strerror (errno));
    return -1;
}

// One size: write 'bytes' in 'io' pieces, fsync, drop, read back.
static int
s_one (const char *path, size_t io, int64_t bytes, char *buf, iobench_row_t *row, char *err,
       size_t errlen)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return s_fail (err, errlen, "create", path);
    double t0 = util_now ();
    for (int64_t done = 0; done < bytes; done += (int64_t) io)
        if (write (fd, buf, io) != (ssize_t) io) {
            if (errno == 0)
                errno = ENOSPC;
            close (fd);
            return s_fail (err, errlen, "write", path);
        }
    if (fsync (fd) != 0 && errno != EINVAL) {
        close (fd);
        return s_fail (err, errlen, "sync", path);
    }
    double t1 = util_now ();
    posix_fadvise (fd, 0, 0, POSIX_FADV_DONTNEED);
    close (fd);
    fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return s_fail (err, errlen, "open", path);
    posix_fadvise (fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    double t2 = util_now ();
    ssize_t n;
    int64_t got = 0;
    while ((n = read (fd, buf, io)) > 0)
        got += n;
    double t3 = util_now ();
    close (fd);
    if (n < 0 || got != bytes) {
        if (n >= 0)
            errno = EIO;
        return s_fail (err, errlen, "read", path);
    }
    row->io_size = io;
    row->bytes = bytes;
    row->write_mb_s = bytes / 1e6 / (t1 - t0 > 1e-9 ? t1 - t0 : 1e-9);
    row->read_mb_s = bytes / 1e6 / (t3 - t2 > 1e-9 ? t3 - t2 : 1e-9);
    return 0;
}

int
iobench_run (const char *dir, int64_t total, iobench_row_t rows[IOBENCH_SIZES], int *best,
             char *err, size_t errlen)
{
    size_t largest = (size_t) 64 << 10 << (IOBENCH_SIZES - 1);
    char *buf = malloc (largest);
    if (!buf) {
        snprintf (err, errlen, "cannot measure '%s': out of memory", dir);
        return -1;
    }
    // Not zeros: a file system that compresses or dedups would flatter them.
    for (size_t i = 0; i < largest; i++)
        buf[i] = (char) (i * 2654435761u >> 13);
    char path[4096];
    snprintf (path, sizeof path, "%s/.pivfarm-iobench.%d", dir, (int) getpid ());
    int rc = 0;
    *best = 0;
    for (int k = 0; k < IOBENCH_SIZES && rc == 0; k++) {
        size_t io = (size_t) 64 << 10 << k;
        int64_t bytes = total / IOBENCH_SIZES / (int64_t) io * (int64_t) io;
        if (bytes < (int64_t) io)
            bytes = (int64_t) io;
        rc = s_one (path, io, bytes, buf, &rows[k], err, errlen);
        if (rc == 0 && 1 / rows[k].write_mb_s + 1 / rows[k].read_mb_s
                           < 1 / rows[*best].write_mb_s + 1 / rows[*best].read_mb_s)
            *best = k;
    }
    unlink (path);
    free (buf);
    return rc;
}
