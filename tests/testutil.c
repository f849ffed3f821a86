// testutil.c — shared helpers of the Check suites; see testutil.h.

#include "tests/testutil.h"
#include "store/store.h"
#include "common/jdoc.h"
#include "piv/derived.h"

#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tiffio.h>
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

// Removes what the directory 'fd' holds and closes it. Each step is
// relative to its parent's descriptor, so that trees deeper than a path
// may be long are removed too (glibc's nftw aborts on them).
static void
s_remove_in (int fd)
{
    DIR *dir = fdopendir (fd);
    if (!dir) {
        close (fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir (dir))) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
            || unlinkat (dirfd (dir), de->d_name, 0) == 0)
            continue;
        int sub = openat (dirfd (dir), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
            s_remove_in (sub);
            unlinkat (dirfd (dir), de->d_name, AT_REMOVEDIR);
        }
    }
    closedir (dir);
}

void
tu_rmtree (const char *path)
{
    if (!path || !*path)
        return;
    int fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        unlink (path);
        return;
    }
    s_remove_in (fd);
    rmdir (path);
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

int
tu_calib_case_e (const char *out, char *out_text, size_t out_len)
{
    const char *args[40];
    static char xml[2][7][4096];  // the 7 target planes of cameras 1 and 3
    int n = 0;
    for (int c = 0; c < 2; c++) {
        args[n++] = "--camera";
        args[n++] = c == 0 ? "1" : "3";
        for (int k = 0; k < 7; k++) {
            char name[128];
            snprintf (name, sizeof name, "stereo/caseE/Camera_0%d/img_%d.xml", c == 0 ? 1 : 3, k);
            snprintf (xml[c][k], sizeof xml[c][k], "%s", tu_data (name));
            args[n++] = "--points";
            args[n++] = xml[c][k];
        }
    }
    args[n++] = "-o";
    args[n++] = out;
    args[n] = NULL;
    return tu_run_bin ("pivfarm-calib", args, out_text, out_len, 120);
}

const char *
tu_file (const char *dir, const char *name)
{
    static char slots[128][4096];
    static int next;
    char *buf = slots[next++ % 128];
    int n = snprintf (buf, sizeof slots[0], "%s/%s", dir, name);
    ck_assert_msg (n > 0 && n < (int) sizeof slots[0], "path too long: %s/%s", dir, name);
    return buf;
}

int
tu_run_bin (const char *program, const char *const *args, char *out, size_t outlen, int timeout_s)
{
    char *argv[64];
    int n = 0;
    argv[n++] = (char *) tu_bin (program);
    for (int i = 0; args[i]; i++) {
        ck_assert (n < 63);
        argv[n++] = (char *) args[i];
    }
    argv[n] = NULL;
    return tu_run (argv, out, outlen, timeout_s);
}

const char *
tu_bin (const char *program)
{
    const char *dir = getenv ("PIVFARM_BIN");
    return tu_path (dir && *dir ? dir : "./bin", program);
}

char *
tu_doc (const char *path)
{
    char full[4096];
    snprintf (full, sizeof full, "%s/%s", tu_bin (".."), path);
    char *text = tu_slurp (full, NULL);
    ck_assert_msg (text != NULL, "cannot read '%s'", full);
    char *out = text;
    int line_start = 1;  // nothing but blanks since the last newline
    for (const char *c = text; *c; c++) {
        if (*c == '`' || (*c == '\\' && c[1] == '|') || (*c == '#' && line_start))
            continue;
        if (isspace ((unsigned char) *c)) {
            line_start |= *c == '\n';
            if (out > text && out[-1] != ' ')
                *out++ = ' ';
            continue;
        }
        line_start = 0;
        *out++ = *c;
    }
    *out = '\0';
    return text;
}

const char *
tu_data (const char *name)
{
    const char *dir = getenv ("PIVFARM_DATA");
    return tu_path (dir && *dir ? dir : "tests/data", name);
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

void
tu_copy (const char *from, const char *to)
{
    size_t len;
    char *bytes = tu_slurp (from, &len);
    ck_assert_msg (bytes != NULL, "cannot read '%s'", from);
    tu_spit (to, bytes, len);
    free (bytes);
}

int
tu_entries (const char *dir)
{
    DIR *d = opendir (dir);
    ck_assert_msg (d != NULL, "cannot list '%s'", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir (d));) {
        if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
            continue;
        ck_assert_msg (e->d_name[0] != '.', "a temporary is left in '%s': '%s'", dir, e->d_name);
        n++;
    }
    closedir (d);
    return n;
}

// Forks a child that dies with the test process (PDEATHSIG); fork's answer.
static pid_t
s_fork_tied (void)
{
    pid_t parent = getpid ();
    pid_t pid = fork ();
    ck_assert (pid >= 0);
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (127);
    }
    return pid;
}

int
tu_spawn (char *const argv[], const char *log)
{
    pid_t pid = s_fork_tied ();
    if (pid == 0) {
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

// ---------------------------------------------------------------------------
// A farm

void
tu_farm_init (tu_farm_t *farm)
{
    memset (farm, 0, sizeof *farm);
    farm->dir = strdup (tu_tmpdir ());
    ck_assert (farm->dir != NULL);
    mkdir (tu_path (farm->dir, "data"), 0755);
    mkdir (tu_path (farm->dir, "data/exp1"), 0755);
    mkdir (tu_path (farm->dir, "src"), 0755);
    tu_farm_conf (farm, "piv", 1, "32,16", "");
}

void
tu_farm_release (tu_farm_t *farm)
{
    for (int i = 0; i < 4; i++)
        tu_stop (farm->others[i], SIGKILL, 5);
    tu_stop (farm->watcher, SIGKILL, 5);
    for (int i = 0; i < 4; i++)
        tu_stop (farm->agents[i], SIGKILL, 5);
    tu_stop (farm->broker, SIGKILL, 5);
    tu_rmtree (farm->dir);
    free ((char *) farm->dir);
    memset (farm, 0, sizeof *farm);
}

tu_farm_t tu_the_farm;

void
tu_farm_setup (void)
{
    tu_farm_init (&tu_the_farm);
}

void
tu_farm_teardown (void)
{
    tu_farm_release (&tu_the_farm);
}

void
tu_farm_conf (tu_farm_t *farm, const char *processor, int threads, const char *passes,
              const char *extra)
{
    const char *d = farm->dir;
    char text[8192];
    snprintf (text, sizeof text,
              "broker\n"
              "    ingest = ipc://%s/ingest\n"
              "    work = ipc://%s/work\n"
              "    control = ipc://%s/control\n"
              "    publish = ipc://%s/publish\n"
              "    store = ./farm.db\n"
              "    heartbeat_ms = 200\n"
              "    liveness = 3\n"
              "watcher\n"
              "    root = ./data\n"
              "    resend_ms = 100\n"
              "agent\n"
              "    threads = %d\n"
              "    results = ./results\n"
              "    processor = %s\n"
              "%s"
              "piv\n"
              "    passes = %s\n"
              "    iterations = 1\n",
              d, d, d, d, threads, processor, extra, passes);
    snprintf (farm->conf, sizeof farm->conf, "%s", tu_path (d, "pivfarm.conf"));
    tu_spit (farm->conf, text, strlen (text));
}

int
tu_farm_start (tu_farm_t *farm, const char *program, const char *log, const char *extra1,
               const char *extra2)
{
    char *argv[] = {(char *) tu_bin (program), "-c", farm->conf, (char *) extra1,
                    (char *) extra2, NULL};
    return tu_spawn (argv, tu_path (farm->dir, log));
}

void
tu_farm_start_broker (tu_farm_t *farm)
{
    farm->broker = tu_farm_start (farm, "pivfarm-broker", "broker.log", NULL, NULL);
    for (int i = 0; i < 100 && access (tu_path (farm->dir, "farm.db"), F_OK) != 0; i++)
        usleep (50000);
    ck_assert_msg (tu_alive (farm->broker), "the broker did not start (see broker.log)");
}

void
tu_farm_render (tu_farm_t *farm, int n, const char *prefix)
{
    char count[16], out[4096];
    snprintf (count, sizeof count, "%d", n);
    snprintf (out, sizeof out, "%s/src/%s", farm->dir, prefix);
    char *argv[] = {(char *) tu_bin ("pivfarm-synth"), "--size", "256x256", "--count", count,
                    "-o", out, NULL};
    char log[4096];
    ck_assert_msg (tu_run (argv, log, sizeof log, 60) == 0, "%s", log);
}

void
tu_farm_land (tu_farm_t *farm, const char *prefix, int first, int last, int gap_us)
{
    for (int i = first; i <= last; i++) {
        for (int side = 0; side < 2; side++) {
            char name[256], from[4096], tmp[4096], to[4096];
            snprintf (name, sizeof name, "%s_%04d_%c.tif", prefix, i, side ? 'b' : 'a');
            snprintf (from, sizeof from, "%s/src/%s", farm->dir, name);
            snprintf (to, sizeof to, "%s/data/exp1/%s", farm->dir, name);
            snprintf (tmp, sizeof tmp, "%s/data/exp1/.%s.part", farm->dir, name);
            size_t len;
            char *bytes = tu_slurp (from, &len);
            ck_assert_msg (bytes != NULL, "cannot read '%s'", from);
            tu_spit (i % 2 ? to : tmp, bytes, len);
            free (bytes);
            if (i % 2 == 0)
                ck_assert (rename (tmp, to) == 0);
        }
        if (gap_us > 0 && i < last)
            usleep ((useconds_t) gap_us);
    }
}

static int
s_count_cb (void *arg, const store_counts_t *c)
{
    tu_counts_t *out = arg;
    if (strcmp (c->name, "exp1") == 0)
        *out = (tu_counts_t) {c->files,
                              c->pairs[STORE_PENDING],
                              c->pairs[STORE_DISPATCHED],
                              c->pairs[STORE_DONE],
                              c->pairs[STORE_FAILED],
                              c->pairs[STORE_SKIPPED]};
    return 0;
}

tu_counts_t
tu_farm_counts (tu_farm_t *farm)
{
    tu_counts_t c = {-1, -1, -1, -1, -1, -1};
    char err[512];
    store_t *store = store_open_readonly (tu_path (farm->dir, "farm.db"), err, sizeof err);
    if (store) {
        c = (tu_counts_t) {0, 0, 0, 0, 0, 0};
        store_counts (store, s_count_cb, &c);
        store_destroy (&store);
    }
    return c;
}

tu_counts_t
tu_farm_wait_done (tu_farm_t *farm, int64_t done, int timeout_s)
{
    tu_counts_t c = tu_farm_counts (farm);
    for (int i = 0; i < timeout_s * 10 && (c.done < done || c.pending || c.dispatched); i++) {
        usleep (100000);
        c = tu_farm_counts (farm);
    }
    return c;
}

void
tu_farm_conf_replace (tu_farm_t *farm, const char *old, const char *new)
{
    char *conf = tu_slurp (farm->conf, NULL);
    ck_assert (conf != NULL);
    char *at = strstr (conf, old);
    ck_assert_msg (at != NULL, "no '%s' in the configuration", old);
    size_t head = (size_t) (at - conf), len = strlen (conf) - strlen (old) + strlen (new);
    char *text = malloc (len + 1);
    ck_assert (text != NULL);
    snprintf (text, len + 1, "%.*s%s%s", (int) head, conf, new, at + strlen (old));
    tu_spit (farm->conf, text, len);
    free (text);
    free (conf);
}

void
tu_farm_slow (tu_farm_t *farm, int seconds, int n, int threads, const char *id)
{
    char script[4096], text[64];
    snprintf (script, sizeof script, "%s/slow.sh", farm->dir);
    snprintf (text, sizeof text, "#!/bin/sh\nsleep %d\n", seconds);
    tu_spit (script, text, strlen (text));
    ck_assert (chmod (script, 0755) == 0);
    tu_farm_fake (farm, n, "f");
    char processor[4200];
    snprintf (processor, sizeof processor, "exec:%s", script);
    tu_farm_conf (farm, processor, threads, "32,16", "");
    tu_farm_start_broker (farm);
    char log[256], hello[256];
    snprintf (log, sizeof log, "%s.log", id);
    snprintf (hello, sizeof hello, "agent '%s'", id);
    farm->agents[0] = tu_farm_start (farm, "pivfarm-agent", log, "--id", id);
    ck_assert (tu_farm_log_has (farm, "broker.log", hello, 5000));
    farm->watcher = tu_farm_start (farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_land (farm, "f", 1, n, 0);
    int64_t want = n < threads ? n : threads;
    tu_counts_t c = tu_farm_counts (farm);
    for (int i = 0; i < 100 && c.dispatched < want; i++, c = tu_farm_counts (farm))
        usleep (50000);
    ck_assert_msg (c.dispatched == want, "%lld of %lld tasks out (see broker.log)",
                   (long long) c.dispatched, (long long) want);
}

void
tu_farm_fake (tu_farm_t *farm, int n, const char *prefix)
{
    for (int i = 1; i <= n; i++)
        for (int side = 0; side < 2; side++) {
            char name[256];
            snprintf (name, sizeof name, "src/%s_%04d_%c.tif", prefix, i, side ? 'b' : 'a');
            tu_spit (tu_path (farm->dir, name), "fake", 4);
        }
}

int
tu_farm_land_async (tu_farm_t *farm, const char *prefix, int first, int last, int gap_us)
{
    pid_t pid = s_fork_tied ();
    if (pid == 0) {
        tu_farm_land (farm, prefix, first, last, gap_us);
        _exit (0);
    }
    return (int) pid;
}

// Runs 'sql' over the farm's store, read-only: the first column of its
// first row as an integer (-1 if none) and, if text is not NULL, as text.
static int64_t
s_farm_sql (tu_farm_t *farm, const char *fmt, va_list ap, char **text)
{
    char sql[4096];
    vsnprintf (sql, sizeof sql, fmt, ap);
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    int64_t value = -1;
    if (sqlite3_open_v2 (tu_path (farm->dir, "farm.db"), &db, SQLITE_OPEN_READONLY, NULL)
            == SQLITE_OK
        && sqlite3_busy_timeout (db, 5000) == SQLITE_OK
        && sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL) == SQLITE_OK
        && sqlite3_step (stmt) == SQLITE_ROW) {
        value = sqlite3_column_int64 (stmt, 0);
        const unsigned char *t = sqlite3_column_text (stmt, 0);
        if (text && t)
            *text = strdup ((const char *) t);
    }
    sqlite3_finalize (stmt);
    sqlite3_close (db);
    return value;
}

// The integer of 'sql' over the SQLite file 'path', opened read-only; -1
// when it cannot be read.
int64_t
tu_sql (const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    int64_t value = -1;
    if (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK
        && sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL) == SQLITE_OK
        && sqlite3_step (stmt) == SQLITE_ROW)
        value = sqlite3_column_int64 (stmt, 0);
    sqlite3_finalize (stmt);
    sqlite3_close (db);
    return value;
}

// Takes the store at 'path' (its broker stopped) back to the schema
// before STORE_SCHEMA_VERSION: schema 7, without the three tables the step
// from 7 to 8 adds (issue 27), as a broker of before issue 27 left it. A
// newer schema must be undone here too. Returns the version it wrote.
int
tu_store_to_previous (const char *path)
{
    ck_assert_msg (STORE_SCHEMA_VERSION == 8, "undo the steps after 8 here too");
    sqlite3 *db = NULL;
    ck_assert (sqlite3_open (path, &db) == SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec (db, "DROP TABLE ensemble_partials; DROP TABLE ensemble_pairs;"
                               " DROP TABLE ensemble_jobs;"
                               " UPDATE meta SET value = '7' WHERE key = 'schema_version';",
                           NULL, NULL, &msg);
    ck_assert_msg (rc == SQLITE_OK, "'%s': %s", path, msg ? msg : "?");
    sqlite3_close (db);
    return 7;
}

int64_t
tu_farm_sql (tu_farm_t *farm, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int64_t value = s_farm_sql (farm, fmt, ap, NULL);
    va_end (ap);
    return value;
}

char *
tu_farm_sql_text (tu_farm_t *farm, const char *fmt, ...)
{
    char *text = NULL;
    va_list ap;
    va_start (ap, fmt);
    s_farm_sql (farm, fmt, ap, &text);
    va_end (ap);
    return text;
}

int
tu_farm_log_count (tu_farm_t *farm, const char *log, const char *text)
{
    char *all = tu_slurp (tu_path (farm->dir, log), NULL);
    int n = 0;
    for (const char *at = all; at && (at = strstr (at, text)); at++)
        n++;
    free (all);
    return n;
}

int
tu_farm_log_has (tu_farm_t *farm, const char *log, const char *text, int timeout_ms)
{
    for (int waited = 0;; waited += 20) {
        char *all = tu_slurp (tu_path (farm->dir, log), NULL);
        int found = all && strstr (all, text);
        free (all);
        if (found || waited >= timeout_ms)
            return found;
        usleep (20000);
    }
}

void
tu_tiff_zeros (const char *path, int w, int h, int bits, int compression, int rows)
{
    TIFF *tif = TIFFOpen (path, "w");
    ck_assert_msg (tif != NULL, "cannot create '%s'", path);
    TIFFSetField (tif, TIFFTAG_IMAGEWIDTH, (uint32_t) w);
    TIFFSetField (tif, TIFFTAG_IMAGELENGTH, (uint32_t) h);
    TIFFSetField (tif, TIFFTAG_BITSPERSAMPLE, (uint16_t) bits);
    TIFFSetField (tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t) 1);
    TIFFSetField (tif, TIFFTAG_PHOTOMETRIC, (uint16_t) PHOTOMETRIC_MINISBLACK);
    TIFFSetField (tif, TIFFTAG_COMPRESSION, (uint16_t) compression);
    TIFFSetField (tif, TIFFTAG_ROWSPERSTRIP, (uint32_t) rows);
    size_t row_bytes = (size_t) w * (size_t) bits / 8;
    unsigned char *zeros = calloc ((size_t) rows, row_bytes);
    ck_assert (zeros != NULL);
    for (int row = 0, strip = 0; row < h; row += rows, strip++) {
        int n = h - row < rows ? h - row : rows;
        ck_assert (TIFFWriteEncodedStrip (tif, (uint32_t) strip, zeros, (tmsize_t) (n * row_bytes))
                   >= 0);
    }
    free (zeros);
    TIFFClose (tif);
}

void
tu_tiff_recompress (const char *src, const char *dst, int compression)
{
    TIFF *in = TIFFOpen (src, "r"), *out = TIFFOpen (dst, "w");
    ck_assert_msg (in && out, "cannot read '%s' or create '%s'", src, dst);
    uint32_t w = 0, h = 0;
    uint16_t bps = 8, spp = 1, photometric = PHOTOMETRIC_MINISBLACK, planar = PLANARCONFIG_CONTIG;
    TIFFGetField (in, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField (in, TIFFTAG_IMAGELENGTH, &h);
    TIFFGetFieldDefaulted (in, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted (in, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted (in, TIFFTAG_PLANARCONFIG, &planar);
    TIFFGetField (in, TIFFTAG_PHOTOMETRIC, &photometric);
    ck_assert (planar == PLANARCONFIG_CONTIG && !TIFFIsTiled (in));
    TIFFSetField (out, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField (out, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField (out, TIFFTAG_BITSPERSAMPLE, bps);
    TIFFSetField (out, TIFFTAG_SAMPLESPERPIXEL, spp);
    TIFFSetField (out, TIFFTAG_PHOTOMETRIC, photometric);
    TIFFSetField (out, TIFFTAG_PLANARCONFIG, planar);
    TIFFSetField (out, TIFFTAG_COMPRESSION, (uint16_t) compression);
    TIFFSetField (out, TIFFTAG_ROWSPERSTRIP, (uint32_t) 16);
    uint16_t *r, *g, *b;
    if (photometric == PHOTOMETRIC_PALETTE && TIFFGetField (in, TIFFTAG_COLORMAP, &r, &g, &b))
        TIFFSetField (out, TIFFTAG_COLORMAP, r, g, b);
    tmsize_t row_bytes = TIFFScanlineSize (in);
    unsigned char *row = malloc ((size_t) row_bytes);
    ck_assert (row != NULL);
    for (uint32_t y = 0; y < h; y++)
        ck_assert (TIFFReadScanline (in, row, y, 0) == 1 && TIFFWriteScanline (out, row, y, 0) == 1);
    free (row);
    TIFFClose (in);
    TIFFClose (out);
}

long
tu_peak_rss_kb (int pid)
{
    char path[64], line[256];
    snprintf (path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen (path, "r");
    long kb = -1;
    while (f && fgets (line, sizeof line, f))
        if (sscanf (line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose (f);
    return kb;
}

int
tu_peak_rss_reset (void)
{
    FILE *f = fopen ("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs ("5", f) >= 0;
    return fclose (f) == 0 && ok ? 0 : -1;
}

int
tu_run_suite (Suite *suite)
{
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed ? 1 : 0;
}

int
tu_farm_pivctl (tu_farm_t *farm, char *out, size_t len, const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    int rc = tu_farm_pivctl_v (farm, out, len, first, ap);
    va_end (ap);
    return rc;
}

int
tu_farm_pivctl_v (tu_farm_t *farm, char *out, size_t len, const char *first, va_list ap)
{
    // A generous wait: a status of thousands of experiments under the
    // sanitizers (make check-asan) takes more than the default 3 s.
    char *argv[40] = {(char *) tu_bin ("pivctl"), "-c", farm->conf, "--timeout", "30000"};
    int n = 5;
    for (const char *a = first; a && n < 38; a = va_arg (ap, const char *))
        argv[n++] = (char *) a;
    argv[n] = NULL;
    return tu_run (argv, out, len, 120);
}

jdoc_t *
tu_farm_ask_v (tu_farm_t *farm, const char *first, va_list ap)
{
    static char out[1 << 20];
    // --json may follow the command (doc/pivctl.md): it goes last.
    char *argv[40] = {(char *) tu_bin ("pivctl"), "-c", farm->conf, "--timeout", "30000"};
    int n = 5;
    for (const char *a = first; a && n < 37; a = va_arg (ap, const char *))
        argv[n++] = (char *) a;
    argv[n++] = "--json";
    argv[n] = NULL;
    int rc = tu_run (argv, out, sizeof out, 120);
    ck_assert_msg (rc == 0, "pivctl %s: exit %d: %s", first, rc, out);
    // Progress lines (replay) come first, on stderr.
    char *json = out[0] == '{' ? out : strstr (out, "\n{");
    char err[256];
    jdoc_t *doc = json ? jdoc_parse (json, err, sizeof err) : NULL;
    ck_assert_msg (doc != NULL, "pivctl %s: not JSON: %s", first, out);
    return doc;
}

int
tu_proto_expect (zsock_t *sock, int agent, char command, uint64_t pair, proto_msg_t *out,
                 int timeout_ms)
{
    zpoller_t *poller = zpoller_new (sock, NULL);
    int found = 0;
    for (int waited = 0; !found && waited < timeout_ms; waited += 100) {
        if (agent) {
            proto_msg_t beat = {.command = PROTO_HEARTBEAT};
            proto_send (&beat, NULL, sock);
        }
        if (!zpoller_wait (poller, 100))
            continue;
        proto_msg_t msg;
        char err[256];
        if (proto_recv (sock, NULL, &msg, err, sizeof err) != 0)
            continue;
        for (size_t i = 0; i < proto_count (&msg) && !found; i++) {
            proto_msg_t *one = proto_at (&msg, i);
            if (one->command == command && (!pair || one->pair == pair)) {
                *out = *one;
                memset (one, 0, sizeof *one);
                found = 1;
            }
        }
        proto_msg_release (&msg);
    }
    zpoller_destroy (&poller);
    return found;
}

uint64_t
tu_farm_agent_result (tu_farm_t *farm, const char *id, const piv_field_t *field, int timeout_ms)
{
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/work", farm->dir);
    zsock_t *sock = zsock_new_dealer (endpoint);
    ck_assert_ptr_nonnull (sock);
    proto_msg_t hello = {.command = PROTO_HELLO, .name = (char *) id, .text = "testhost",
                         .count = 1, .settings = "noop"};
    ck_assert_int_eq (proto_send (&hello, NULL, sock), 0);
    proto_msg_t ready = {.command = PROTO_READY, .count = 1};
    ck_assert_int_eq (proto_send (&ready, NULL, sock), 0);
    proto_msg_t task, recorded;
    uint64_t pair = 0;
    if (tu_proto_expect (sock, 1, PROTO_TASK, 0, &task, timeout_ms)) {
        // The figures an agent sends with its field (agents/process.c).
        piv_field_stats_t st;
        piv_field_stats (field, PIV_FLAG_VALID, &st);
        size_t n = (size_t) field->nx * field->ny;
        float *vorticity = malloc (n * sizeof *vorticity);
        ck_assert_ptr_nonnull (vorticity);
        double sum = 0;
        int finite = 0;
        piv_field_derive (field, &(piv_derived_t){.vorticity = vorticity});
        for (size_t k = 0; k < n; k++)
            if (field->flags[k] == PIV_FLAG_VALID && isfinite (vorticity[k]))
                sum += vorticity[k], finite++;
        free (vorticity);
        proto_msg_t result = {.command = PROTO_RESULT, .pair = task.pair,
                              .attempt = task.attempt, .time_ns = 1000000,
                              .output = task.output};
        result.figures[PROTO_FIG_MEAN_U] = st.count ? st.mean_u : 0;
        result.figures[PROTO_FIG_MEAN_V] = st.count ? st.mean_v : 0;
        result.figures[PROTO_FIG_MEAN_SPEED] = st.count ? st.mean_speed : 0;
        result.figures[PROTO_FIG_VALID_FRACTION] = st.valid_fraction;
        result.figures[PROTO_FIG_NX] = field->nx;
        result.figures[PROTO_FIG_NY] = field->ny;
        result.figures[PROTO_FIG_VORTICITY] = finite ? sum / finite : 0;
        ck_assert_int_eq (piv_field_encode (field, &result.blob, &result.blob_size), 0);
        ck_assert_int_eq (proto_send (&result, NULL, sock), 0);
        free (result.blob);
        if (tu_proto_expect (sock, 1, PROTO_RECORDED, task.pair, &recorded, timeout_ms)) {
            pair = task.pair;
            proto_msg_release (&recorded);
        }
        proto_msg_release (&task);
    }
    zsock_destroy (&sock);
    return pair;
}

double
tu_uniform (uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double
tu_gauss (uint64_t *state)
{
    double a = tu_uniform (state), b = tu_uniform (state);
    return sqrt (-2 * log (a)) * cos (2 * M_PI * b);
}
