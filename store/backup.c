// backup.c — copies of the store made with SQLite's backup API: the
// operator's online backup (pivctl backup, on a thread of the broker with a
// connection of its own) and the copy made before a migration. Each copy is
// written as FILE.partial, verified, then put at FILE, never over a file.

#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// Pages a step when the caller gives none: 16 MB of 4 KB pages between two
// looks at its stop flag.
#define S_STEP_PAGES 4096

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

// Removes the partial copy and whatever SQLite made beside it.
static void
s_remove_partial (const char *partial)
{
    static const char *suffixes[] = {"", "-journal", "-wal", "-shm"};
    char name[PATH_MAX + 32];
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf (name, sizeof name, "%s%s", partial, suffixes[i]);
        unlink (name);
    }
}

// Makes 'partial' (FILE.partial) for the copy: created here, never an
// existing file nor a symbolic link; 'file' itself must not exist. 0, or -1
// with err saying what is wrong with FILE and what to do.
static int
s_make_partial (const char *file, const char *partial, char *err, size_t errlen)
{
    struct stat st;
    if (file[0] != '/') {
        st_errbuf (err, errlen,
                   "cannot back up into '%s': not an absolute path (the broker writes it on its "
                   "own host): give one such as /var/backups/pivfarm/store.db",
                   file);
        return -1;
    }
    if (lstat (file, &st) == 0) {
        st_errbuf (err, errlen,
                   "cannot back up into '%s': it exists already (a backup never replaces a "
                   "file): give a new name, or remove it first",
                   file);
        return -1;
    }
    int fd = open (partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd < 0) {
        int e = errno;
        char dir[PATH_MAX];
        snprintf (dir, sizeof dir, "%s", file);
        char *slash = strrchr (dir, '/');
        if (slash)
            slash[slash == dir ? 1 : 0] = '\0';
        if (e == EEXIST)
            st_errbuf (err, errlen,
                       "cannot back up into '%s': '%s' exists (a backup under way, or one that "
                       "was stopped): remove it first",
                       file, partial);
        else if (e == ENOENT || e == ENOTDIR)
            st_errbuf (err, errlen,
                       "cannot back up into '%s': directory '%s' does not exist: make it first",
                       file, dir);
        else
            st_errbuf (err, errlen, "cannot back up into '%s': cannot create '%s': %s", file,
                       partial, strerror (e));
        return -1;
    }
    close (fd);
    return 0;
}

// The copy at 'partial' as a reader finds it: integrity_check "ok" and
// schema version 'version'. 0, or -1 with err.
static int
s_verify (const char *file, const char *partial, int version, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char verdict[256] = "", text[32] = "";
    int rc = sqlite3_open_v2 (partial, &db,
                              SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                              NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2 (db, "PRAGMA integrity_check (1)", -1, &stmt, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step (stmt)) == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text (stmt, 0);
        snprintf (verdict, sizeof verdict, "%s", v ? (const char *) v : "");
        rc = SQLITE_OK;
    }
    sqlite3_finalize (stmt);
    stmt = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2 (db, "SELECT value FROM meta WHERE key = 'schema_version'", -1,
                                 &stmt, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step (stmt)) == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text (stmt, 0);
        snprintf (text, sizeof text, "%s", v ? (const char *) v : "");
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        st_errbuf (err, errlen, "cannot verify the backup '%s': %s", file,
                   db ? sqlite3_errmsg (db) : sqlite3_errstr (rc));
    sqlite3_finalize (stmt);
    sqlite3_close (db);
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        return -1;
    if (strcmp (verdict, "ok") != 0) {
        for (char *nl = strchr (verdict, '\n'); nl; nl = strchr (nl, '\n'))
            *nl = ' ';
        st_errbuf (err, errlen, "the backup '%s' fails its integrity check: %s", file, verdict);
        return -1;
    }
    if (atoi (text) != version) {
        st_errbuf (err, errlen, "the backup '%s' has schema version '%s', not the store's %d",
                   file, text, version);
        return -1;
    }
    return 0;
}

// Copies 'src' (schema 'version') into 'file' as store.h says of
// store_backup_file; 'name' is the store's path for messages.
static int
s_backup (sqlite3 *src, const char *name, const char *file, int version, int step,
          int (*stop) (void *arg), void *arg, store_backup_info_t *info, char *err,
          size_t errlen)
{
    char partial[PATH_MAX + 16];
    double started = s_now ();
    if (snprintf (partial, sizeof partial, "%s.partial", file) >= (int) sizeof partial) {
        st_errbuf (err, errlen, "cannot back up into '%s': the path is too long", file);
        return -1;
    }
    if (s_make_partial (file, partial, err, errlen))
        return -1;
    sqlite3 *dest = NULL;
    sqlite3_backup *backup = NULL;
    // NOFOLLOW: the partial made above, not a link put in its place since.
    int rc = sqlite3_open_v2 (partial, &dest,
                              SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                              NULL);
    if (rc == SQLITE_OK)
        backup = sqlite3_backup_init (dest, "main", src, "main");
    if (!backup) {
        st_errbuf (err, errlen, "cannot back up '%s' into '%s': %s", name, file,
                   dest ? sqlite3_errmsg (dest) : sqlite3_errstr (rc));
        goto fail;
    }
    int stopped = 0;
    do {
        rc = sqlite3_backup_step (backup, step > 0 ? step : S_STEP_PAGES);
        stopped = rc != SQLITE_DONE && stop && stop (arg);
    } while ((rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && !stopped);
    int64_t pages = sqlite3_backup_pagecount (backup);
    sqlite3_backup_finish (backup);
    if (stopped) {
        st_errbuf (err, errlen, "the backup of '%s' into '%s' was stopped (the broker stops)",
                   name, file);
        goto fail;
    }
    if (rc != SQLITE_DONE) {
        st_errbuf (err, errlen, "cannot back up '%s' into '%s': %s%s", name, file,
                   sqlite3_errstr (rc),
                   (rc & 0xff) == SQLITE_FULL ? " (its file system is full: free space, or "
                                                "give another place)"
                                              : "");
        goto fail;
    }
    // The copy has the store's header, which says WAL: made a file of its
    // own (a rollback journal), which is copied as one file and read
    // without a -shm beside it.
    char *msg = NULL;
    if (sqlite3_exec (dest, "PRAGMA journal_mode = DELETE", NULL, NULL, &msg) != SQLITE_OK) {
        st_errbuf (err, errlen, "cannot finish the backup '%s': %s", file,
                   msg ? msg : sqlite3_errmsg (dest));
        sqlite3_free (msg);
        goto fail;
    }
    if (sqlite3_close (dest) != SQLITE_OK) {
        st_errbuf (err, errlen, "cannot close the backup '%s': %s", file, sqlite3_errmsg (dest));
        goto fail;
    }
    dest = NULL;
    if (s_verify (file, partial, version, err, errlen))
        goto fail;
    // link, not rename: a file made at FILE meanwhile is never replaced.
    if (link (partial, file) != 0) {
        st_errbuf (err, errlen, "cannot put the backup at '%s': %s%s", file, strerror (errno),
                   errno == EEXIST ? " (made while the backup ran: the copy is not kept)" : "");
        goto fail;
    }
    unlink (partial);
    struct stat st;
    info->bytes = stat (file, &st) == 0 ? (int64_t) st.st_size : 0;
    info->pages = pages;
    info->schema = version;
    info->seconds = s_now () - started;
    return 0;
fail:
    sqlite3_close (dest);
    s_remove_partial (partial);
    return -1;
}

int
store_backup_file (const char *path, const char *file, int step, int (*stop) (void *arg),
                   void *arg, store_backup_info_t *info, char *err, size_t errlen)
{
    memset (info, 0, sizeof *info);
    sqlite3 *src = NULL;
    int rc = sqlite3_open_v2 (path, &src, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        st_errbuf (err, errlen, "cannot back up '%s': cannot open it: %s", path,
                   src ? sqlite3_errmsg (src) : sqlite3_errstr (rc));
        sqlite3_close (src);
        return -1;
    }
    sqlite3_busy_timeout (src, 5000);
    // One read transaction for the whole copy: a snapshot of what was
    // committed when it began. The writer goes on (WAL); the backup is not
    // restarted by its commits, as it would be between two transactions.
    char *msg = NULL;
    int done = -1;
    if (sqlite3_exec (src, "BEGIN; SELECT count(*) FROM sqlite_master", NULL, NULL, &msg)
        != SQLITE_OK) {
        st_errbuf (err, errlen, "cannot back up '%s': cannot read it: %s", path,
                   msg ? msg : sqlite3_errmsg (src));
        sqlite3_free (msg);
    }
    else
        done = s_backup (src, path, file, STORE_SCHEMA_VERSION, step, stop, arg, info, err,
                         errlen);
    sqlite3_exec (src, "COMMIT", NULL, NULL, NULL);
    sqlite3_close (src);
    return done;
}

int
st_backup_before_migration (store_t *self, int version, char *file, size_t size, char *err,
                            size_t errlen)
{
    snprintf (file, size, "%s.v%d.bak", self->path, version);
    store_backup_info_t info;
    return s_backup (self->db, self->path, file, version, 0, NULL, NULL, &info, err, errlen);
}
