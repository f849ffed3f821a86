// files.c — the store's own files under faults: whether the database, its
// WAL and shared-memory files are still the ones at their paths (an rm,
// an mv, a restore over them while the broker runs), the lock file's
// record of the store's life, and the rescue of what a detached store
// holds into a new file through the descriptors still open.

#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// The name SQLite gives each file of the database it has open.
static void
s_file_names (store_t *self, char *names[ST_NFILES])
{
    const char *db = sqlite3_db_filename (self->db, "main");
    const char *wal = db && *db ? sqlite3_filename_wal (db) : NULL;
    names[ST_FILE_DB] = db && *db ? strdup (db) : NULL;
    names[ST_FILE_WAL] = wal && *wal ? strdup (wal) : NULL;
    names[ST_FILE_SHM] = NULL;
    if (db && *db) {
        size_t n = strlen (db) + 5;
        if ((names[ST_FILE_SHM] = malloc (n)))
            snprintf (names[ST_FILE_SHM], n, "%s-shm", db);
    }
}

void
st_files_capture (store_t *self)
{
    char *names[ST_NFILES];
    s_file_names (self, names);
    for (int i = 0; i < ST_NFILES; i++) {
        st_file_t *f = &self->files[i];
        if (f->fd >= 0 || !names[i]) {
            free (names[i]);
            continue;
        }
        free (f->name);
        f->name = names[i];
        // Our own descriptor: its identity stays what SQLite opened,
        // whatever becomes of the name, and tells a file deleted (no link
        // left) from one moved away.
        int fd = open (f->name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        if (fd >= 0 && fstat (fd, &st) == 0 && S_ISREG (st.st_mode)) {
            f->fd = fd;
            f->dev = st.st_dev;
            f->ino = st.st_ino;
        }
        else if (fd >= 0)
            close (fd);
    }
}

void
st_files_release (store_t *self)
{
    for (int i = 0; i < ST_NFILES; i++) {
        if (self->files[i].fd >= 0)
            close (self->files[i].fd);
        self->files[i].fd = -1;
        free (self->files[i].name);
        self->files[i].name = NULL;
    }
}

static void
s_utc (char *out, size_t size)
{
    time_t now = time (NULL);
    struct tm tm;
    gmtime_r (&now, &tm);
    strftime (out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void
st_lock_read (int fd, char *state, size_t size)
{
    char text[1024];
    ssize_t n = pread (fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    const char *line = strchr (text, '\n');
    line = line ? line + 1 : "";
    snprintf (state, size, "%.*s", (int) strcspn (line, "\n"), line);
}

// Writes the record to 'fd'.
static void
s_lock_write (int fd, const char *state, const char *text)
{
    char record[2048], when[32];
    s_utc (when, sizeof when);
    int len = snprintf (record, sizeof record, "%ld\n%s %s%s%s\n", (long) getpid (), state, when,
                        text ? ": " : "", text ? text : "");
    if (len >= (int) sizeof record)
        len = (int) sizeof record - 1, record[len - 1] = '\n';
    if (ftruncate (fd, 0) != 0 || pwrite (fd, record, (size_t) len, 0) != len) {
        // The record is the operator's guide, not the lock: the lock holds.
    }
    fdatasync (fd);
}

void
st_lock_record (store_t *self, const char *state, const char *text)
{
    if (self->lock_fd >= 0)
        s_lock_write (self->lock_fd, state, text);
}

// "'name'" with how it left its path: deleted (no link left to our
// descriptor), moved, or replaced by another file. 0 when it is in place.
static int
s_file_moved (const st_file_t *f, const char *what, char *why, size_t whylen)
{
    if (f->fd < 0)
        return 0;
    struct stat mine, now;
    if (fstat (f->fd, &mine) != 0)
        return 0;
    if (stat (f->name, &now) == 0) {
        if (now.st_dev == f->dev && now.st_ino == f->ino)
            return 0;
        snprintf (why, whylen, "%s '%s' was replaced by another file", what, f->name);
        return 1;
    }
    if (errno != ENOENT && errno != ENOTDIR)
        return 0;  // cannot tell (EACCES, EIO): asked again at the next check
    snprintf (why, whylen, "%s '%s' was %s", what, f->name,
              mine.st_nlink == 0 ? "deleted" : "moved or renamed (it is no longer at its path)");
    return 1;
}

// The lock file: made again at its path when it was removed (so that a
// second broker cannot start on the store meanwhile); if another file
// that another process locks took its name, another broker may be at the
// store. 0 in place, 1 lost, 2 made again.
static int
s_lock_moved (store_t *self, char *why, size_t whylen)
{
    if (self->lock_fd < 0)
        return 0;
    char lock[PATH_MAX + 8];
    snprintf (lock, sizeof lock, "%s.lock", self->path);
    struct stat mine, now;
    if (fstat (self->lock_fd, &mine) != 0)
        return 0;
    if (stat (lock, &now) == 0 && now.st_dev == mine.st_dev && now.st_ino == mine.st_ino)
        return 0;
    int fd = open (lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        snprintf (why, whylen, "the lock file '%s' is gone and cannot be made again: %s", lock,
                  strerror (errno));
        return 1;
    }
    if (flock (fd, LOCK_EX | LOCK_NB) != 0) {
        close (fd);
        snprintf (why, whylen,
                  "the lock file '%s' was replaced, and another process holds the new one: "
                  "another broker may be using the store",
                  lock);
        return 1;
    }
    close (self->lock_fd);
    self->lock_fd = fd;
    s_lock_write (fd, "open", "the lock file was made again after it had gone");
    snprintf (why, whylen, "the lock file '%s' had gone: made again and locked", lock);
    return 2;
}

int
store_check_files (store_t *self, char *why, size_t whylen)
{
    *why = '\0';
    if (!self->db || self->readonly)
        return 0;
    static const char *what[ST_NFILES] = {"the database", "its WAL", "its shared-memory file"};
    for (int i = 0; i < ST_NFILES; i++)
        if (s_file_moved (&self->files[i], what[i], why, whylen))
            return 1;
    // A WAL made after the open (none was there then) is watched from now.
    if (self->files[ST_FILE_WAL].fd < 0 || self->files[ST_FILE_SHM].fd < 0)
        st_files_capture (self);
    return s_lock_moved (self, why, whylen);
}

void
store_detach (store_t *self, const char *why)
{
    if (self->detached)
        return;
    if (self->in_tx) {
        // Rolled back as a failed write would be: store_commit reports it,
        // so that nothing of the group is acknowledged.
        snprintf (self->cause, sizeof self->cause, "%s", why);
        int lost = self->uncommitted;
        st_rollback (self);
        if (lost > 0 && !self->lost) {
            self->lost = lost;
            snprintf (self->lost_cause, sizeof self->lost_cause, "%s", why);
        }
        self->uncommitted = 0;
    }
    self->detached = strdup (why);
    if (!self->detached)
        self->detached = strdup ("detached");
    // The names may be another file's now: our close must neither write
    // into them nor remove them.
    sqlite3_db_config (self->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    st_deferred_free (self);
    st_lock_record (self, "lost", why);
}

const char *
store_detached (store_t *self)
{
    return self->detached;
}

// A new empty file for the copy, never over an existing one: 'prefix'
// and a suffix. Its name in out; 0 or -1.
static int
s_rescue_file (const char *prefix, char *out, size_t size)
{
    char when[32];
    time_t now = time (NULL);
    struct tm tm;
    gmtime_r (&now, &tm);
    strftime (when, sizeof when, "%Y%m%d-%H%M%S", &tm);
    for (int n = 0; n < 100; n++) {
        if (n == 0)
            snprintf (out, size, "%s.rescued-%s", prefix, when);
        else
            snprintf (out, size, "%s.rescued-%s-%d", prefix, when, n);
        int fd = open (out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd >= 0) {
            close (fd);
            return 0;
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

int
store_rescue_begin (store_t *self, char *dest, size_t destlen, char *err, size_t errlen)
{
    if (self->rescue) {
        st_errbuf (err, errlen, "a rescue of '%s' is under way already", self->path);
        return -1;
    }
    char path[PATH_MAX + 64], fallback[PATH_MAX];
    const char *slash = strrchr (self->path, '/');
    snprintf (fallback, sizeof fallback, "/var/tmp/%s", slash ? slash + 1 : self->path);
    if (s_rescue_file (self->path, path, sizeof path) != 0
        && s_rescue_file (fallback, path, sizeof path) != 0) {
        st_errbuf (err, errlen, "cannot make a file to save '%s' into (beside it nor in /var/tmp): %s",
                   self->path, strerror (errno));
        return -1;
    }
    free (self->rescue_path);
    self->rescue_path = strdup (path);
    int rc = sqlite3_open_v2 (path, &self->rescue_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                              NULL);
    if (rc == SQLITE_OK)
        self->rescue = sqlite3_backup_init (self->rescue_db, "main", self->db, "main");
    if (!self->rescue) {
        st_errbuf (err, errlen, "cannot save '%s' into '%s': %s", self->path, path,
                   self->rescue_db ? sqlite3_errmsg (self->rescue_db) : sqlite3_errstr (rc));
        st_rescue_end (self, 1);
        unlink (path);
        return -1;
    }
    snprintf (dest, destlen, "%s", path);
    return 0;
}

int
store_rescue_step (store_t *self, int pages, char *err, size_t errlen)
{
    if (!self->rescue) {
        st_errbuf (err, errlen, "no rescue of '%s' under way", self->path);
        return -1;
    }
    int rc = sqlite3_backup_step (self->rescue, pages > 0 ? pages : -1);
    if (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
        return 0;
    if (rc != SQLITE_DONE) {
        st_errbuf (err, errlen, "cannot save '%s' into '%s': %s", self->path, self->rescue_path,
                   sqlite3_errstr (rc));
        st_rescue_end (self, 1);
        return -1;
    }
    st_rescue_end (self, 0);
    // The copy's identity: a broker started on it once it is moved to the
    // store's path knows it for the copy (store_new).
    struct stat st;
    char text[S_ERROR_MAX + PATH_MAX];
    if (stat (self->rescue_path, &st) == 0)
        snprintf (text, sizeof text, "%s; what it held is saved in '%s' (copy %llu:%llu)",
                  self->detached ? self->detached : "saved", self->rescue_path,
                  (unsigned long long) st.st_dev, (unsigned long long) st.st_ino);
    else
        snprintf (text, sizeof text, "%s; what it held is saved in '%s'",
                  self->detached ? self->detached : "saved", self->rescue_path);
    st_lock_record (self, "lost", text);
    return 1;
}

void
st_rescue_end (store_t *self, int failed)
{
    int active = self->rescue_db != NULL;
    if (self->rescue)
        sqlite3_backup_finish (self->rescue);
    self->rescue = NULL;
    if (self->rescue_db)
        sqlite3_close (self->rescue_db);
    self->rescue_db = NULL;
    if (failed && active && self->rescue_path) {
        unlink (self->rescue_path);
        char journal[PATH_MAX + 80];
        snprintf (journal, sizeof journal, "%s-journal", self->rescue_path);
        unlink (journal);
    }
}
