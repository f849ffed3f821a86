// storage.c — the storage lifecycle in the broker (doc/storage.md): fast
// space provisioned per experiment (a RAM disk it mounts, or a directory),
// the free-space guard (a timer: statvfs of the watch root, the results
// directory and the store's volume), warnings, and the archive jobs it
// gives its archiver thread (archive.c), recording in the store each copy
// the archiver verified before any original is removed.

#include "broker/storage.h"
#include "broker/text.h"
#include "common/log.h"
#include "common/path.h"
#include "common/util.h"

#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define S_FULL_WARN 0.8                                  // an allocation this full is reported
#define S_EXPIRY_WARN_NS (3600 * (int64_t) 1000000000)   // expiry this close is reported
#define S_GROWTH_WINDOW_NS (60 * (int64_t) 1000000000)   // a volume's growth: over the last minute
#define S_GROWTH_SAMPLES 64                              // ... sampled this many times at most

// A volume the guard measures.
typedef struct {
    const char *role;         // "watch root", "results", "store"
    char path[PATH_MAX];      // the directory
    int64_t free_bytes;       // as last measured (-1: unknown)
    int64_t total_bytes;
    int64_t sample_ns[S_GROWTH_SAMPLES];    // when free space was sampled: a ring (0: none)
    int64_t sample_free[S_GROWTH_SAMPLES];  // ... and how much there was, bytes
    int next_sample;          // the ring's next slot
    double growth;            // bytes/s its free space fell by over the last minute (<0: rose)
    int pausing;              // critical (threshold or growth): it pauses dispatch
} s_volume_t;

struct _storage_t {
    storage_host_t host;      // the reactor: commit, dispatch, experiments by name
    const config_t *cfg;      // the broker's configuration (a reload changes it in place)
    store_t *store;           // the durable state
    zloop_t *loop;            // the reactor's loop: the guard's timer, the archiver's pipe
    zsock_t *publish;         // PUB: the 'state' topic
    zhashx_t *experiments;    // name -> exp_t (not owned): allocations, archives
    clocks_t *clocks;         // peers' clocks (not owned): the guard reports them
    zactor_t *archiver;       // the archiver thread (archive.c)
    exp_t *archiving;         // the experiment it works on, or NULL
    zlistx_t *archive_queue;  // exp_t waiting for the archiver
    int guard_paused;         // the free-space guard holds dispatch back
    char guard_why[600];      // ... why
    warning_t warnings[WARNINGS_MAX];  // the storage warnings in force
    int nwarnings;
    zhashx_t *cleared;        // warnings the operator cleared ("kind level exp path" -> "1"),
                              // hidden while they last
    int ncleared;             // how many of those arose in the last guard
    char *state_published;    // the last JSON published on the 'state' topic
    int64_t io_size;          // storage/io_size in bytes
    s_volume_t volumes[3];    // watch root, results, store
};

// Commits through the reactor (what the archiver builds on, what an
// original's removal waits for). 0 or -1.
static int
s_commit (storage_t *self)
{
    return self->host.commit (self->host.arg);
}

static void s_archive_next (storage_t *self);

void
storage_exp_release (exp_t *exp)
{
    if (exp->storage.alloc)
        free (exp->storage.alloc->path);
    free (exp->storage.alloc);
    exp->storage.alloc = NULL;
    if (exp->storage.archive)
        free (exp->storage.archive->to);
    free (exp->storage.archive);
    exp->storage.archive = NULL;
}

// ---------------------------------------------------------------------------
// Provisioning

static alloc_t *
s_alloc_new (int64_t id, const char *kind, const char *path, int64_t size, int64_t created_ns,
             int64_t expires_ns)
{
    alloc_t *a = calloc (1, sizeof *a);
    if (!a || !(a->path = strdup (path))) {
        free (a);
        return NULL;
    }
    a->id = id;
    snprintf (a->kind, sizeof a->kind, "%s", kind);
    a->size_bytes = size;
    a->created_ns = created_ns;
    a->expires_ns = expires_ns;
    a->used_bytes = -1;
    return a;
}

// 1 if the directory holds anything.
static int
s_dir_busy (const char *path)
{
    DIR *dir = opendir (path);
    if (!dir)
        return 0;
    struct dirent *de;
    int busy = 0;
    while (!busy && (de = readdir (dir)))
        busy = strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0;
    closedir (dir);
    return busy;
}

int
storage_provision (storage_t *self, const char *name, int64_t size, double hours, const char *dir,
                   char *err, size_t errlen)
{
    // control.c took it as any experiment's name (path_check_component);
    // a hidden directory is one the watcher leaves out (watcher/ignore).
    if (name[0] == '.') {
        snprintf (err, errlen, "bad experiment name '%s': a hidden name, which the watcher "
                  "leaves out", name);
        return 400;
    }
    int64_t now = util_time_ns ();
    exp_t *exp = zhashx_lookup (self->experiments, name);
    if (exp && exp->storage.alloc) {
        snprintf (err, errlen, "experiment '%s' has an allocation already (%s at '%s')", name,
                  exp->storage.alloc->kind, exp->storage.alloc->path);
        return 400;
    }
    char path[PATH_MAX * 2];
    snprintf (path, sizeof path, "%s/%s", self->cfg->watcher.root, name);
    if (dir) {
        // A directory someone else provides (an admin's mount point): it
        // must be the experiment's directory, which the watcher sees.
        char want[PATH_MAX], got[PATH_MAX];
        mkdir (path, 0775);
        if (!realpath (path, want) || !realpath (dir, got) || strcmp (want, got) != 0) {
            snprintf (err, errlen,
                      "--dir '%s' is not the directory of experiment '%s' under the watch root "
                      "('%s'): the watcher sees only that one",
                      dir, name, path);
            return 400;
        }
    }
    else {
        // A RAM disk is memory: past half of it, the broker, the agents and
        // the page cache that serves the frames would be pushed into swap
        // or the OOM killer as it fills.
        long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGE_SIZE);
        int64_t ram = pages > 0 && page > 0 ? (int64_t) pages * page : 0;
        if (ram > 0 && size > ram / 2) {
            char want[32], have[32], half[32];
            snprintf (err, errlen,
                      "--size %s for the RAM disk of '%s' is more than half of this host's "
                      "memory (%s): give at most %s, or provision with --dir",
                      util_format_size (size, want, sizeof want), name,
                      util_format_size (ram, have, sizeof have),
                      util_format_size (ram / 2, half, sizeof half));
            return 400;
        }
        if (s_dir_busy (path)) {
            snprintf (err, errlen,
                      "'%s' holds files already: a RAM disk mounted there would hide them", path);
            return 400;
        }
        if (mkdir (path, 0775) != 0 && errno != EEXIST) {
            snprintf (err, errlen, "cannot create '%s': %s", path, strerror (errno));
            return 500;
        }
        if (storage_mount (self->cfg->storage.mount_helper, path, size, err, errlen) != 0) {
            rmdir (path);
            return geteuid () != 0 && !*self->cfg->storage.mount_helper ? 400 : 500;
        }
    }
    int64_t expires = now + (int64_t) llround (hours * 3600e9);
    exp = self->host.experiment (self->host.arg, name, now);
    int64_t id = exp ? store_allocation_add (self->store, exp->id, dir ? "dir" : "tmpfs", path,
                                             size, expires, now)
                     : -1;
    alloc_t *a = id > 0 ? s_alloc_new (id, dir ? "dir" : "tmpfs", path, size, now, expires) : NULL;
    if (!a) {
        snprintf (err, errlen, "cannot record the allocation of '%s': %s", name,
                  store_error (self->store));
        if (!dir)
            storage_umount (self->cfg->storage.mount_helper, path, err + strlen (err), 0), rmdir (path);
        return 500;
    }
    exp->storage.alloc = a;
    log_notice ("provisioned '%s': %s of %lld bytes at '%s' for %.2f h", name, a->kind,
                (long long) size, path, hours);
    return 200;
}

// The allocation is archived: it goes (unmounted, its directory removed).
static void
s_release_finish (storage_t *self, exp_t *exp)
{
    alloc_t *a = exp->storage.alloc;
    char err[1024] = "";
    if (strcmp (a->kind, "tmpfs") == 0 && storage_umount (self->cfg->storage.mount_helper, a->path, err, sizeof err) != 0) {
        log_error ("releasing '%s': %s", exp->name, err);
        snprintf (exp->storage.archive->error, sizeof exp->storage.archive->error, "%s", err);
        return;  // stays 'releasing': the warning says so
    }
    if (rmdir (a->path) != 0 && errno != ENOENT)
        log_warning ("releasing '%s': cannot remove '%s': %s", exp->name, a->path,
                     strerror (errno));
    store_allocation_state (self->store, a->id, exp->id, "released", util_time_ns ());
    log_notice ("released the %s of '%s' at '%s'", a->kind, exp->name, a->path);
    free (a->path);
    free (a);
    exp->storage.alloc = NULL;
}

int
storage_release (storage_t *self, exp_t *exp, const char *to, char *err, size_t errlen)
{
    if (!exp->storage.alloc) {
        snprintf (err, errlen, "experiment '%s' has no allocation to release", exp->name);
        return 400;
    }
    if (!to || !*to)
        to = self->cfg->storage.archive_dir;
    if (!*to) {
        snprintf (err, errlen,
                  "release archives the frames of '%s' first: give --to DIR or set "
                  "storage/archive_dir",
                  exp->name);
        return 400;
    }
    int status = storage_archive (self, exp, to, 1, err, errlen);
    if (status == 200 && !exp->storage.alloc->releasing) {
        exp->storage.alloc->releasing = 1;
        store_allocation_state (self->store, exp->storage.alloc->id, exp->id, "releasing",
                                util_time_ns ());
    }
    return status;
}

// ---------------------------------------------------------------------------
// Archive jobs

// 1 if 'path' lies under or is 'dir' (both resolved).
static int
s_inside (const char *path, const char *dir)
{
    return path_under (path, dir, NULL);
}

// 1 if both exist and are the same directory (a bind mount, a hard link).
static int
s_same_file (const char *a, const char *b)
{
    struct stat sa, sb;
    return stat (a, &sa) == 0 && stat (b, &sb) == 0 && sa.st_dev == sb.st_dev
           && sa.st_ino == sb.st_ino;
}

// Where the frames of exp go for an archive to 'to': <to>/<exp> resolved
// into 'target', its source directory (<root>/<exp>) resolved into 'source'
// (both PATH_MAX). Refused (400 with err, nothing created) when the target
// lies in the watch root or the source, holds the root, is the source or
// the root by another name (a symbolic link at <to> or <to>/<exp>, a bind
// mount), or cannot be resolved; 200 otherwise.
static int
s_archive_target (storage_t *self, exp_t *exp, const char *to, char *target, char *source,
                  char *err, size_t errlen)
{
    char root[PATH_MAX], path[PATH_MAX * 2], why[PATH_MAX + 128];
    if (!realpath (self->cfg->watcher.root, root)) {
        snprintf (err, errlen, "cannot resolve the watch root '%s': %s", self->cfg->watcher.root,
                  strerror (errno));
        return 500;
    }
    snprintf (path, sizeof path, "%s/%s", root, exp->name);
    if (storage_resolve (path, source, PATH_MAX, why, sizeof why) != 0) {
        snprintf (err, errlen, "cannot archive '%s': %s", exp->name, why);
        return 400;
    }
    snprintf (path, sizeof path, "%s/%s", to, exp->name);
    if (storage_resolve (path, target, PATH_MAX, why, sizeof why) != 0) {
        snprintf (err, errlen, "bad --to '%s': %s", to, why);
        return 400;
    }
    if (s_inside (target, root) || s_inside (root, target) || s_inside (target, source)
        || s_same_file (target, source) || s_same_file (target, root)) {
        char resolved[PATH_MAX + 32] = "";
        if (strcmp (target, path) != 0)
            snprintf (resolved, sizeof resolved, " (it resolves to '%s')", target);
        snprintf (err, errlen,
                  "the archive '%s'%s lies under the watch root '%s' or is the experiment's "
                  "own directory: the watcher would take the copies for new frames, or the "
                  "copies would replace their originals; nothing was created or removed",
                  path, resolved, self->cfg->watcher.root);
        return 400;
    }
    return 200;
}

// Makes 'path' and its parents; 0 or -1 (errno).
static int
s_mkdirs (const char *path)
{
    char buf[PATH_MAX + 2];
    snprintf (buf, sizeof buf, "%s/", path);
    return broker_mkparents (buf);
}

int
storage_archive (storage_t *self, exp_t *exp, const char *to, int release, char *err,
                 size_t errlen)
{
    if (strcmp (exp->source, exp->name) != 0) {
        snprintf (err, errlen, "'%s' reads the files of '%s': archive '%s'", exp->name,
                  exp->source, exp->source);
        return 400;
    }
    archive_t *ar = exp->storage.archive;
    if (ar && (strcmp (ar->state, "done") != 0 && strcmp (ar->state, "failed") != 0)) {
        if (strcmp (ar->to, to) == 0) {
            ar->release |= release;
            return 200;  // under way already
        }
        snprintf (err, errlen, "an archive of '%s' to '%s' is under way", exp->name, ar->to);
        return 400;
    }
    if (to[0] != '/') {
        snprintf (err, errlen, "bad --to '%s': an absolute path", to);
        return 400;
    }
    // Every check before anything is made: a refusal creates nothing.
    char target[PATH_MAX], source[PATH_MAX];
    int status = s_archive_target (self, exp, to, target, source, err, errlen);
    if (status != 200)
        return status;
    if (store_setting_set (self->store, exp->id, "archive", to, util_time_ns ()) != 0) {
        snprintf (err, errlen, "cannot record the archive of '%s': %s", exp->name,
                  store_error (self->store));
        return 500;
    }
    if (!ar && !(ar = exp->storage.archive = calloc (1, sizeof *ar))) {
        snprintf (err, errlen, "no memory for an archive");
        return 500;
    }
    free (ar->to);
    *ar = (archive_t) {.to = strdup (to), .release = release, .started_ns = util_time_ns ()};
    snprintf (ar->state, sizeof ar->state, "queued");
    zlistx_add_end (self->archive_queue, exp);
    s_archive_next (self);
    return 200;
}

// Adds to the notes of an archive that 'name' was skipped and why; past
// the room of the notes, only counts it ("... and N more").
static void
s_archive_note (archive_t *ar, const char *name, const char *why)
{
    ar->skipped++;
    size_t len = strlen (ar->notes), room = sizeof ar->notes - 40;  // kept for "and N more"
    char one[PATH_MAX + 300];
    int n = snprintf (one, sizeof one, "%s'%s' %s", len ? "; " : "skipped ", name, why);
    char *more = strstr (ar->notes, "; ... and ");
    if (!more && n > 0 && len + (size_t) n < room)
        memcpy (ar->notes + len, one, (size_t) n + 1);
    else {
        long long others = more ? atoll (more + 10) + 1 : 1;
        if (more)
            *more = '\0';
        len = strlen (ar->notes);
        snprintf (ar->notes + len, sizeof ar->notes - len, "; ... and %lld more", others);
    }
}

// 1 if a component of 'name' (relative to the experiment) matches a
// pattern of watcher/ignore: a temporary file the watcher would not report
// now (a camera's, a copy's), recorded before the patterns covered it.
static int
s_ignored (storage_t *self, const char *name)
{
    char list[CONFIG_STRING], part[PATH_MAX];
    snprintf (part, sizeof part, "%s", name);
    for (char *psave, *c = strtok_r (part, "/", &psave); c; c = strtok_r (NULL, "/", &psave)) {
        snprintf (list, sizeof list, "%s", self->cfg->watcher.ignore);
        for (char *save, *pat = strtok_r (list, ",", &save); pat;
             pat = strtok_r (NULL, ",", &save))
            if (fnmatch (pat, c, 0) == 0)
                return 1;
    }
    return 0;
}

// Context of the listing that makes a JOB.
typedef struct {
    storage_t *self;
    exp_t *exp;
    zmsg_t *msg;
} s_job_t;

static int
s_job_file (void *arg, const store_file_stored_t *f)
{
    s_job_t *job = arg;
    char id[32], src[PATH_MAX * 2];
    if (!f->location && s_ignored (job->self, f->name)) {
        // Not archived, and not removed by the archive: a release unmounts
        // it with the RAM disk (doc/storage.md).
        log_warning ("archive of '%s': skipped '%s': its name matches watcher/ignore (%s), a "
                     "temporary file",
                     job->exp->name, f->name, job->self->cfg->watcher.ignore);
        s_archive_note (job->exp->storage.archive, f->name, "ignored (watcher/ignore)");
        return 0;
    }
    snprintf (id, sizeof id, "%lld", (long long) f->file);
    snprintf (src, sizeof src, "%s/%s/%s", job->self->cfg->watcher.root, job->exp->name, f->name);
    zmsg_addstr (job->msg, id);
    zmsg_addstr (job->msg, f->name);
    zmsg_addstr (job->msg, src);
    zmsg_addstr (job->msg, f->sha256 ? f->sha256 : "");
    zmsg_addstr (job->msg, f->location ? f->location : "");
    job->exp->storage.archive->files++;
    return 0;
}

static void
s_archive_failed (storage_t *self, exp_t *exp, const char *why)
{
    archive_t *ar = exp->storage.archive;
    snprintf (ar->state, sizeof ar->state, "failed");
    snprintf (ar->error, sizeof ar->error, "%s", why);
    ar->finished_ns = util_time_ns ();
    log_error ("archive of '%s' to '%s' failed: %s", exp->name, ar->to, why);
    char payload[1200];
    snprintf (payload, sizeof payload, "failed to=%s error=%s", ar->to, why);
    store_event (self->store, "archive", exp->id, 0, payload, ar->finished_ns);
    if (exp->storage.alloc && exp->storage.alloc->releasing) {
        exp->storage.alloc->releasing = 0;
        store_allocation_state (self->store, exp->storage.alloc->id, exp->id, "active",
                                ar->finished_ns);
    }
    if (self->archiving == exp)
        self->archiving = NULL;
    s_commit (self);
}

// Gives the archiver the next job when it is free.
static void
s_archive_next (storage_t *self)
{
    exp_t *exp;
    while (!self->archiving && (exp = zlistx_detach (self->archive_queue, NULL))) {
        archive_t *ar = exp->storage.archive;
        char target[PATH_MAX], source[PATH_MAX], io[32], rate[32], err[PATH_MAX + 1024];
        // Checked again: a link may have been planted since it was queued.
        if (s_archive_target (self, exp, ar->to, target, source, err, sizeof err) != 200) {
            s_archive_failed (self, exp, err);
            continue;
        }
        if (s_mkdirs (target) != 0) {
            snprintf (err, sizeof err, "cannot create '%s': %s", target, strerror (errno));
            s_archive_failed (self, exp, err);
            continue;
        }
        snprintf (io, sizeof io, "%lld", (long long) self->io_size);
        snprintf (rate, sizeof rate, "%d", self->cfg->storage.archive_mb_s);
        s_job_t job = {self, exp, zmsg_new ()};
        zmsg_addstr (job.msg, "JOB");
        zmsg_addstr (job.msg, exp->name);
        zmsg_addstr (job.msg, target);
        zmsg_addstr (job.msg, source);
        zmsg_addstr (job.msg, io);
        zmsg_addstr (job.msg, rate);
        ar->files = 0, ar->skipped = 0, ar->notes[0] = '\0';
        // What was recorded up to now is what the archiver builds on.
        s_commit (self);
        if (store_files_stored (self->store, exp->id, s_job_file, &job) < 0) {
            zmsg_destroy (&job.msg);
            s_archive_failed (self, exp, store_error (self->store));
            continue;
        }
        snprintf (ar->state, sizeof ar->state, "copying");
        self->archiving = exp;
        log_notice ("archiving '%s' to '%s': %lld file(s)", exp->name, target,
                    (long long) ar->files);
        zmsg_send (&job.msg, self->archiver);
    }
}

static exp_t *
s_job_exp (storage_t *self, const char *name)
{
    exp_t *exp = self->archiving;
    return exp && name && strcmp (exp->name, name) == 0 ? exp : NULL;
}

static int
s_on_archiver (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    storage_t *self = arg;
    zmsg_t *msg = zmsg_recv (reader);
    if (!msg)
        return 0;
    char *what = zmsg_popstr (msg), *name = zmsg_popstr (msg);
    exp_t *exp = s_job_exp (self, name);
    int64_t now = util_time_ns ();
    if (!exp || !what)
        log_warning ("archiver: unexpected '%s' for '%s'", what ? what : "", name ? name : "");
    else if (strcmp (what, "FILE") == 0) {
        char *id = zmsg_popstr (msg), *sha = zmsg_popstr (msg), *loc = zmsg_popstr (msg),
             *bytes = zmsg_popstr (msg);
        if (id && sha && loc && bytes
            && store_file_archived (self->store, atoll (id), exp->id, sha, loc, now) == 0) {
            exp->storage.archive->copied++;
            exp->storage.archive->bytes += atoll (bytes);
            if (!exp->storage.located) {
                store_setting_set (self->store, exp->id, "located", "1", now);
                exp->storage.located = 1;
            }
        }
        else
            log_error ("cannot record the archived copy '%s': %s", loc ? loc : "?",
                       store_error (self->store));
        zstr_free (&id), zstr_free (&sha), zstr_free (&loc), zstr_free (&bytes);
    }
    else if (strcmp (what, "SKIPPED") == 0) {
        char *file = zmsg_popstr (msg), *why = zmsg_popstr (msg);
        s_archive_note (exp->storage.archive, file ? file : "?", why ? why : "?");
        zstr_free (&file), zstr_free (&why);
    }
    else if (strcmp (what, "COPIED") == 0) {
        char *copied = zmsg_popstr (msg), *already = zmsg_popstr (msg);
        exp->storage.archive->already = already ? atoll (already) : 0;
        zstr_free (&copied), zstr_free (&already);
        // Every location is committed before any original goes.
        if (s_commit (self) == 0) {
            snprintf (exp->storage.archive->state, sizeof exp->storage.archive->state, "removing");
            zstr_sendx (self->archiver, "REMOVE", exp->name, NULL);
        }
        else {
            zstr_sendx (self->archiver, "KEEP", exp->name, NULL);
            s_archive_failed (self, exp, "the store cannot commit where the copies are");
        }
    }
    else if (strcmp (what, "REMOVED") == 0) {
        char *removed = zmsg_popstr (msg);
        archive_t *ar = exp->storage.archive;
        ar->removed = removed ? atoll (removed) : 0;
        zstr_free (&removed);
        snprintf (ar->state, sizeof ar->state, "done");
        ar->finished_ns = now;
        char payload[PATH_MAX + 1400];
        snprintf (payload, sizeof payload,
                  "done to=%s files=%lld copied=%lld removed=%lld skipped=%lld%s%s", ar->to,
                  (long long) ar->files, (long long) (ar->copied + ar->already),
                  (long long) ar->removed, (long long) ar->skipped, *ar->notes ? " notes=" : "",
                  ar->notes);
        store_event (self->store, "archive", exp->id, 0, payload, now);
        store_setting_set (self->store, exp->id, "archive", NULL, now);
        log_notice ("archived '%s' to '%s': %lld file(s) copied, %lld before, %lld removed, "
                    "%lld skipped%s%s",
                    exp->name, ar->to, (long long) ar->copied, (long long) ar->already,
                    (long long) ar->removed, (long long) ar->skipped, *ar->notes ? ": " : "",
                    ar->notes);
        if (ar->release && exp->storage.alloc)
            s_release_finish (self, exp);
        self->archiving = NULL;
        s_commit (self);
    }
    else if (strcmp (what, "FAILED") == 0) {
        char *why = zmsg_popstr (msg);
        s_archive_failed (self, exp, why ? why : "?");
        zstr_free (&why);
    }
    zstr_free (&what), zstr_free (&name);
    zmsg_destroy (&msg);
    s_archive_next (self);
    return 0;
}

void
storage_frame_path (storage_t *self, exp_t *exp, const char *name, char *out, size_t size)
{
    exp_t *src = strcmp (exp->source, exp->name) == 0
                     ? exp
                     : self->host.experiment (self->host.arg, exp->source, util_time_ns ());
    if (src && src->storage.located
        && store_file_location (self->store, src->id, name, out, size) == 1)
        return;
    snprintf (out, size, "%s/%s/%s", self->cfg->watcher.root, exp->source, name);
}

// ---------------------------------------------------------------------------
// The guard

// What names a warning for the operator's 'warnings clear': its kind,
// level, experiment and path, not its message (a figure in it changes).
static void
s_warning_key (char *key, size_t size, const char *kind, const char *level,
               const char *experiment, const char *path)
{
    snprintf (key, size, "%s %s %s %s", kind, level, experiment ? experiment : "",
              path ? path : "");
}

// Records the cleared warnings as the setting 'warnings_cleared' (one key
// a line) so that a restart keeps them cleared. 0 or -1.
static int
s_cleared_save (storage_t *self, int64_t now)
{
    size_t len = 1;
    for (void *v = zhashx_first (self->cleared); v; v = zhashx_next (self->cleared))
        len += strlen (zhashx_cursor (self->cleared)) + 1;
    char *text = calloc (1, len);
    if (!text)
        return -1;
    for (void *v = zhashx_first (self->cleared); v; v = zhashx_next (self->cleared)) {
        strcat (text, zhashx_cursor (self->cleared));
        strcat (text, "\n");
    }
    int rc = store_setting_set (self->store, 0, "warnings_cleared", *text ? text : NULL, now);
    free (text);
    return rc;
}

static void
s_warn (storage_t *self, const char *kind, const char *level, const char *experiment,
        const char *path, const char *fmt, ...) __attribute__ ((format (printf, 6, 7)));

static void
s_warn (storage_t *self, const char *kind, const char *level, const char *experiment,
        const char *path, const char *fmt, ...)
{
    if (self->nwarnings == WARNINGS_MAX)
        return;
    char key[sizeof ((warning_t *) 0)->experiment + PATH_MAX + 64];
    s_warning_key (key, sizeof key, kind, level, experiment, path);
    if (self->cleared && zhashx_lookup (self->cleared, key)) {
        zhashx_update (self->cleared, key, strdup ("1"));  // still there: stays cleared
        self->ncleared++;
        return;
    }
    warning_t *w = &self->warnings[self->nwarnings++];
    w->kind = kind;
    w->level = level;
    snprintf (w->experiment, sizeof w->experiment, "%s", experiment ? experiment : "");
    snprintf (w->path, sizeof w->path, "%s", path ? path : "");
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (w->message, sizeof w->message, fmt, ap);
    va_end (ap);
}

// Bytes of 'threshold' ("10%" of total, or a size); 0 if unreadable.
static int64_t
s_threshold (const char *threshold, int64_t total)
{
    int64_t bytes;
    double percent;
    if (util_parse_space (threshold, &bytes, &percent) != 0)
        return 0;
    return percent >= 0 ? (int64_t) (percent / 100 * (double) total) : bytes;
}

// Free space below a threshold ("10%" of total, or a size)?
static int
s_below (const char *threshold, int64_t free_bytes, int64_t total)
{
    return free_bytes < s_threshold (threshold, total);
}

// statvfs of 'path', or of its nearest existing parent.
static int
s_statvfs (const char *path, struct statvfs *st)
{
    char buf[PATH_MAX];
    snprintf (buf, sizeof buf, "%s", path);
    while (statvfs (buf, st) != 0) {
        char *slash = strrchr (buf, '/');
        if (!slash || slash == buf)
            return statvfs ("/", st);
        *slash = '\0';
    }
    return 0;
}

static int64_t s_du_total;
static int
s_du_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) path, (void) flag, (void) ftw;
    s_du_total += (int64_t) st->st_blocks * 512;
    return 0;
}

// Bytes used by an allocation: its file system's (a RAM disk of its own)
// or the files under it.
static int64_t
s_used (alloc_t *a)
{
    struct statvfs st;
    if (strcmp (a->kind, "tmpfs") == 0)
        return statvfs (a->path, &st) == 0
                   ? (int64_t) (st.f_blocks - st.f_bfree) * (int64_t) st.f_frsize
                   : -1;
    s_du_total = 0;
    return nftw (a->path, s_du_one, 16, FTW_PHYS) == 0 ? s_du_total : -1;
}

static const char *
s_size (int64_t bytes)
{
    static char buf[4][32];
    static int next;
    next = (next + 1) % 4;
    return util_format_size (bytes, buf[next], sizeof buf[next]);
}

// A volume's free space 'free_bytes' at 'now' into its samples (one every
// 1/S_GROWTH_SAMPLES of the window); the bytes per second it fell by since
// the oldest sample of the last minute (negative: it rose; 0 before a
// second of samples).
static double
s_growth (s_volume_t *vol, int64_t free_bytes, int64_t now)
{
    int last = (vol->next_sample + S_GROWTH_SAMPLES - 1) % S_GROWTH_SAMPLES;
    if (!vol->sample_ns[last]
        || now - vol->sample_ns[last] >= S_GROWTH_WINDOW_NS / S_GROWTH_SAMPLES) {
        vol->sample_ns[vol->next_sample] = now;
        vol->sample_free[vol->next_sample] = free_bytes;
        vol->next_sample = (vol->next_sample + 1) % S_GROWTH_SAMPLES;
    }
    int oldest = -1;
    for (int i = 0; i < S_GROWTH_SAMPLES; i++)
        if (vol->sample_ns[i] && now - vol->sample_ns[i] <= S_GROWTH_WINDOW_NS
            && (oldest < 0 || vol->sample_ns[i] < vol->sample_ns[oldest]))
            oldest = i;
    double span_s = oldest < 0 ? 0 : (double) (now - vol->sample_ns[oldest]) / 1e9;
    return span_s < 1 ? 0 : (double) (vol->sample_free[oldest] - free_bytes) / span_s;
}

// Volumes: free space against the thresholds, and against the growth of
// the last minute (storage/headroom_s); the results and store volumes
// pause dispatch when critical.
static void
s_guard_volumes (storage_t *self, char *why, size_t whylen, int64_t now)
{
    for (int v = 0; v < 3; v++) {
        struct statvfs st;
        self->volumes[v].pausing = 0;
        if (s_statvfs (self->volumes[v].path, &st) != 0) {
            self->volumes[v].free_bytes = self->volumes[v].total_bytes = -1;
            continue;
        }
        int64_t free_bytes = (int64_t) st.f_bavail * (int64_t) st.f_frsize;
        int64_t total = (int64_t) st.f_blocks * (int64_t) st.f_frsize;
        self->volumes[v].free_bytes = free_bytes;
        self->volumes[v].total_bytes = total;
        const char *role = self->volumes[v].role, *path = self->volumes[v].path;
        // How long until critical_free at the last minute's growth.
        double growth = self->volumes[v].growth = s_growth (&self->volumes[v], free_bytes, now);
        int headroom = self->cfg->storage.headroom_s;
        int64_t above = free_bytes - s_threshold (self->cfg->storage.critical_free, total);
        double left_s = growth > 0 ? (double) above / growth : -1;
        if (above < 0) {  // below storage/critical_free
            int pauses = v > 0;  // results, store: work writes there
            s_warn (self, "space", "critical", NULL, path,
                    "%s '%s': %s free of %s, below storage/critical_free (%s)%s", role, path,
                    s_size (free_bytes), s_size (total), self->cfg->storage.critical_free,
                    pauses ? ": no new work is dispatched until space returns"
                           : ": archive or release experiments");
            self->volumes[v].pausing = pauses;
            if (pauses && !*why)
                snprintf (why, whylen, "%s '%s' has %s free, below %s", role, path,
                          s_size (free_bytes), self->cfg->storage.critical_free);
        }
        else if (headroom > 0 && growth > 0 && left_s < headroom) {
            int pauses = v > 0;
            self->volumes[v].pausing = pauses;
            char rate[32];
            snprintf (rate, sizeof rate, "%s/s", s_size ((int64_t) growth));
            s_warn (self, "space", "critical", NULL, path,
                    "%s '%s': %s free, falling by %s over the last minute: at "
                    "storage/critical_free (%s) in %.0f s, within storage/headroom_s (%d s)%s",
                    role, path, s_size (free_bytes), rate, self->cfg->storage.critical_free,
                    left_s, headroom,
                    pauses ? ": no new work is dispatched until it slows or space returns"
                           : ": archive or release experiments");
            if (pauses && !*why)
                snprintf (why, whylen,
                          "%s '%s' has %s free, falling by %s: at %s within %.0f s, less than "
                          "storage/headroom_s (%d s)",
                          role, path, s_size (free_bytes), rate, self->cfg->storage.critical_free,
                          left_s, headroom);
        }
        else if (s_below (self->cfg->storage.warn_free, free_bytes, total))
            s_warn (self, "space", "warning", NULL, path,
                    "%s '%s': %s free of %s, below storage/warn_free (%s)", role, path,
                    s_size (free_bytes), s_size (total), self->cfg->storage.warn_free);
    }
}

// Experiments: allocations (fill, expiry) and failed archives.
static void
s_guard_experiments (storage_t *self, int64_t now)
{
    for (exp_t *exp = zhashx_first (self->experiments); exp;
         exp = zhashx_next (self->experiments)) {
        alloc_t *a = exp->storage.alloc;
        if (a) {
            a->used_bytes = s_used (a);
            if (a->used_bytes >= S_FULL_WARN * (double) a->size_bytes)
                s_warn (self, "allocation", a->used_bytes >= 0.95 * a->size_bytes ? "critical"
                                                                                  : "warning",
                        exp->name, a->path, "the %s of '%s' is %.0f %% full (%s of %s)",
                        strcmp (a->kind, "tmpfs") == 0 ? "RAM disk" : "directory", exp->name,
                        100.0 * a->used_bytes / a->size_bytes, s_size (a->used_bytes),
                        s_size (a->size_bytes));
            if (now >= a->expires_ns)
                s_warn (self, "expiry", "critical", exp->name, a->path,
                        "the %s of '%s' expired %.0f min ago: nothing is deleted before it is "
                        "archived; pivctl release %s --to DIR",
                        a->kind, exp->name, (now - a->expires_ns) / 60e9, exp->name);
            else if (a->expires_ns - now <= S_EXPIRY_WARN_NS)
                s_warn (self, "expiry", "warning", exp->name, a->path,
                        "the %s of '%s' expires in %.0f min", a->kind, exp->name,
                        ceil ((a->expires_ns - now) / 60e9));
            // Expired, with an archive tier configured: archived, then released.
            char err[1024];
            if (now >= a->expires_ns && !a->releasing && *self->cfg->storage.archive_dir
                && (!exp->storage.archive || strcmp (exp->storage.archive->state, "failed") != 0)
                && storage_release (self, exp, NULL, err, sizeof err) != 200)
                log_error ("cannot release expired '%s': %s", exp->name, err);
        }
        if (exp->storage.archive && strcmp (exp->storage.archive->state, "failed") == 0)
            s_warn (self, "archive", "critical", exp->name, exp->storage.archive->to,
                    "the archive of '%s' failed: %s", exp->name, exp->storage.archive->error);
    }
}

// Clocks: peers whose clock is off by more than clocks_limit_ms; the
// records of peers silent for 5 minutes go.
static void
s_guard_clocks (storage_t *self, int64_t now)
{
    double limit = clocks_limit_ms (self->clocks);
    clocks_forget (self->clocks, now, 300 * (int64_t) 1000000000);
    for (const clock_rec_t *c = clocks_first (self->clocks); c; c = clocks_next (self->clocks))
        if (fabs (c->skew_ms) > limit)
            s_warn (self, "clock", "warning", NULL, c->peer,
                    "the clock of %s is %.0f ms %s the broker's (clock_skew_ms %.0f, more than "
                    "%.0f ms): latencies and file times are off by as much; synchronise the "
                    "clocks (chrony, NTP)",
                    c->peer, fabs (c->skew_ms), c->skew_ms > 0 ? "ahead of" : "behind",
                    c->skew_ms, limit);
}

// Forgets the cleared warnings that did not arise in this guard: the
// condition is over, and if it comes back it is shown again.
static void
s_cleared_prune (storage_t *self, int64_t now)
{
    zlistx_t *over = zlistx_new ();
    if (!over)
        return;
    zlistx_set_destructor (over, (zlistx_destructor_fn *) zstr_free);
    for (char *v = zhashx_first (self->cleared); v; v = zhashx_next (self->cleared))
        if (strcmp (v, "0") == 0)
            zlistx_add_end (over, strdup (zhashx_cursor (self->cleared)));
    for (char *key = zlistx_first (over); key; key = zlistx_next (over))
        zhashx_delete (self->cleared, key);
    if (zlistx_size (over) > 0 && s_cleared_save (self, now) == 0)
        s_commit (self);
    zlistx_destroy (&over);
}

int
storage_warnings_clear (storage_t *self, int which, char *err, size_t errlen)
{
    if (which < 0 || which > self->nwarnings || self->nwarnings == 0) {
        snprintf (err, errlen, "no warning %d to clear: %d in force (pivctl warnings lists them)",
                  which, self->nwarnings);
        return -1;
    }
    int64_t now = util_time_ns ();
    int first = which ? which - 1 : 0, last = which ? which : self->nwarnings;
    for (int i = first; i < last; i++) {
        const warning_t *w = &self->warnings[i];
        char key[sizeof w->experiment + PATH_MAX + 64], payload[sizeof key + 700];
        s_warning_key (key, sizeof key, w->kind, w->level, w->experiment, w->path);
        zhashx_update (self->cleared, key, strdup ("1"));
        snprintf (payload, sizeof payload, "cleared kind=%s level=%s path=%s message=%s", w->kind,
                  w->level, w->path, w->message);
        int64_t id = 0;
        exp_t *exp = *w->experiment ? zhashx_lookup (self->experiments, w->experiment) : NULL;
        if (exp)
            id = exp->id;
        store_event (self->store, "warning", id, 0, payload, now);
        log_notice ("warning cleared by the operator: %s: %s", w->kind, w->message);
    }
    if (s_cleared_save (self, now) != 0) {
        snprintf (err, errlen, "cannot record the cleared warnings: %s",
                  store_error (self->store));
        return -1;
    }
    // Shown no more from now on, not at the next guard only.
    int n = last - first;
    memmove (&self->warnings[first], &self->warnings[last],
             (size_t) (self->nwarnings - last) * sizeof self->warnings[0]);
    self->nwarnings -= n;
    self->ncleared += n;
    return n;
}

// The automatic archive: experiments whose pairs are all done or failed
// and which have had no new file for storage/archive_idle_s.
typedef struct {
    storage_t *self;
    int64_t now;
} s_auto_t;

static int
s_auto_one (void *arg, const store_counts_t *c)
{
    s_auto_t *ctx = arg;
    storage_t *self = ctx->self;
    exp_t *exp = zhashx_lookup (self->experiments, c->name);
    if (!exp || strcmp (exp->source, exp->name) != 0 || c->files == 0
        || c->pairs[STORE_PENDING] + c->pairs[STORE_DISPATCHED] + c->pairs[STORE_SKIPPED] > 0
        || c->pairs[STORE_DONE] + c->pairs[STORE_FAILED] == 0)
        return 0;
    if (exp->storage.archive ? strcmp (exp->storage.archive->state, "done") != 0
                           || exp->in.last_file_ns <= exp->storage.archive->finished_ns
                     : exp->storage.located)
        return 0;
    if (exp->in.last_file_ns == 0)
        exp->in.last_file_ns = store_file_last_seen (self->store, exp->id);
    if (exp->in.last_file_ns <= 0
        || ctx->now - exp->in.last_file_ns
               < (int64_t) self->cfg->storage.archive_idle_s * 1000000000)
        return 0;
    char err[1024];
    log_notice ("'%s' is processed and idle for %d s: archiving it to '%s'", exp->name,
                self->cfg->storage.archive_idle_s, self->cfg->storage.archive_dir);
    if (storage_archive (self, exp, self->cfg->storage.archive_dir, 0, err, sizeof err) != 200)
        log_error ("cannot archive '%s': %s", exp->name, err);
    return 0;
}

// ---------------------------------------------------------------------------
// What status and the 'state' topic say

// "warnings_cleared":N,"clocks":[{"peer":S,"clock_skew_ms":X}...]: the
// peers whose clock was measured (doc/storage.md), the largest skew first,
// at most 32.
static void
s_put_clocks (text_t *t, storage_t *self)
{
    const clock_rec_t *list[32];
    size_t n = 0;
    for (const clock_rec_t *c = clocks_first (self->clocks); c; c = clocks_next (self->clocks)) {
        if (n < 32)
            list[n++] = c;
        else if (fabs (list[31]->skew_ms) < fabs (c->skew_ms))
            list[31] = c;  // the smallest gives way
        else
            continue;
        for (size_t at = n - 1; at > 0 && fabs (list[at - 1]->skew_ms) < fabs (list[at]->skew_ms);
             at--) {
            const clock_rec_t *swap = list[at - 1];
            list[at - 1] = list[at], list[at] = swap;
        }
    }
    text_put (t, "\"warnings_cleared\":%d,\"clocks\":[", self->ncleared);
    for (size_t i = 0; i < n; i++) {
        text_put (t, "%s{\"peer\":", i ? "," : "");
        text_put_string (t, list[i]->peer);
        text_put_rounded (t, 0, "clock_skew_ms", list[i]->skew_ms, 0);
        text_put (t, "}");
    }
    text_put (t, "]");
}

// "warnings":[...],"guard_paused":B,"guard_why":S (doc/storage.md).
void
storage_put_state (storage_t *self, text_t *t)
{
    text_put (t, "\"warnings\":[");
    for (int i = 0; i < self->nwarnings; i++) {
        const warning_t *w = &self->warnings[i];
        text_put (t, "%s{\"kind\":\"%s\",\"level\":\"%s\",\"experiment\":", i ? "," : "",
               w->kind, w->level);
        if (*w->experiment)
            text_put_string (t, w->experiment);
        else
            text_put (t, "null");
        text_put (t, ",\"path\":");
        text_put_string (t, w->path);
        text_put (t, ",\"message\":");
        text_put_string (t, w->message);
        text_put (t, "}");
    }
    text_put (t, "],");
    s_put_clocks (t, self);
    text_put (t, ",\"guard_paused\":%s,\"guard_why\":", self->guard_paused ? "true" : "false");
    if (self->guard_paused)
        text_put_string (t, self->guard_why);
    else
        text_put (t, "null");
}

char *
storage_state_json (storage_t *self)
{
    text_t t = {0};
    text_put (&t, "{");
    storage_put_state (self, &t);
    text_put (&t, "}");
    if (t.failed) {
        free (t.data);
        return NULL;
    }
    return t.data;
}

static void
s_publish_state (storage_t *self)
{
    char *json = storage_state_json (self);
    if (!json)
        return;
    if (self->state_published && strcmp (json, self->state_published) == 0) {
        free (json);
        return;
    }
    zstr_sendm (self->publish, PROTO_TOPIC_STATE);
    zstr_send (self->publish, json);
    free (self->state_published);
    self->state_published = json;
}

static int
s_guard (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    storage_t *self = arg;
    int64_t now = util_time_ns ();
    char why[600] = "";
    self->nwarnings = 0;
    self->ncleared = 0;
    for (void *v = zhashx_first (self->cleared); v; v = zhashx_next (self->cleared))
        zhashx_update (self->cleared, zhashx_cursor (self->cleared), strdup ("0"));
    s_guard_volumes (self, why, sizeof why, now);
    s_guard_experiments (self, now);
    s_guard_clocks (self, now);
    s_cleared_prune (self, now);
    if (*self->cfg->storage.archive_dir) {
        s_auto_t ctx = {self, now};
        store_counts (self->store, s_auto_one, &ctx);
    }
    if (*why && !self->guard_paused) {
        log_warning ("free-space guard: %s: dispatch paused until space returns", why);
        store_event (self->store, "guard", 0, 0, why, now);
    }
    else if (!*why && self->guard_paused) {
        log_notice ("free-space guard: space is back: dispatch resumes");
        store_event (self->store, "guard", 0, 0, "resumed", now);
    }
    int resumed = self->guard_paused && !*why;
    self->guard_paused = *why != '\0';
    snprintf (self->guard_why, sizeof self->guard_why, "%s", why);
    s_publish_state (self);
    if (resumed)
        self->host.dispatch (self->host.arg);
    return 0;
}

// ---------------------------------------------------------------------------
// Start and stop

static int
s_load_alloc (void *arg, const store_allocation_t *a)
{
    storage_t *self = arg;
    exp_t *exp = self->host.experiment (self->host.arg, a->name, util_time_ns ());
    if (!exp || exp->storage.alloc)
        return 0;
    exp->storage.alloc =
        s_alloc_new (a->id, a->kind, a->path, a->size_bytes, a->created_ns, a->expires_ns);
    if (exp->storage.alloc)
        exp->storage.alloc->releasing = strcmp (a->state, "releasing") == 0;
    return 0;
}

static int
s_load_setting (void *arg, int64_t experiment, const char *key, const char *value)
{
    storage_t *self = arg;
    if (experiment == 0 && strcmp (key, "warnings_cleared") == 0) {
        char *copy = strdup (value), *save;
        for (char *line = copy ? strtok_r (copy, "\n", &save) : NULL; line;
             line = strtok_r (NULL, "\n", &save))
            zhashx_update (self->cleared, line, strdup ("1"));
        free (copy);
        return 0;
    }
    exp_t *exp = NULL;
    for (exp_t *e = zhashx_first (self->experiments); e && !exp; e = zhashx_next (self->experiments))
        if (e->id == experiment)
            exp = e;
    if (!exp)
        return 0;
    if (strcmp (key, "located") == 0)
        exp->storage.located = 1;
    else if (strcmp (key, "archive") == 0) {
        // An archive a stop interrupted goes on where it was.
        char err[1024];
        log_notice ("resuming the archive of '%s' to '%s'", exp->name, value);
        int release = exp->storage.alloc && exp->storage.alloc->releasing;
        if (storage_archive (self, exp, value, release, err, sizeof err)
            != 200)
            log_error ("cannot resume the archive of '%s': %s", exp->name, err);
    }
    return 0;
}

storage_t *
storage_new (const storage_host_t *host, char *err, size_t errlen)
{
    storage_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "cannot start the archiver: out of memory");
        return NULL;
    }
    self->host = *host;
    self->cfg = host->cfg;
    self->store = host->store;
    self->loop = host->loop;
    self->publish = host->publish;
    self->experiments = host->experiments;
    self->clocks = host->clocks;
    const config_t *cfg = self->cfg;
    util_parse_size (cfg->storage.io_size, &self->io_size);
    self->volumes[0].role = "watch root";
    self->volumes[1].role = "results";
    self->volumes[2].role = "store";
    snprintf (self->volumes[0].path, PATH_MAX, "%s", cfg->watcher.root);
    snprintf (self->volumes[1].path, PATH_MAX, "%s", cfg->agent.results);
    snprintf (self->volumes[2].path, PATH_MAX, "%s", cfg->broker.store);
    char *slash = strrchr (self->volumes[2].path, '/');
    if (slash && slash != self->volumes[2].path)
        *slash = '\0';
    self->archive_queue = zlistx_new ();
    self->archiver = zactor_new (broker_archiver, NULL);
    self->cleared = zhashx_new ();
    if (!self->archive_queue || !self->archiver || !self->cleared) {
        snprintf (err, errlen, "cannot start the archiver: out of memory");
        goto fail;
    }
    zhashx_set_destructor (self->cleared, (zhashx_destructor_fn *) zstr_free);
    if (store_allocations (self->store, s_load_alloc, self) < 0
        || store_settings (self->store, s_load_setting, self) < 0
        || s_commit (self) != 0) {
        snprintf (err, errlen, "cannot read the store '%s': %s", cfg->broker.store,
                  store_error (self->store));
        goto fail;
    }
    zloop_reader (self->loop, zactor_sock (self->archiver), s_on_archiver, self);
    zloop_timer (self->loop, (size_t) cfg->storage.guard_ms, 0, s_guard, self);
    s_guard (self->loop, -1, self);
    return self;
fail:
    storage_destroy (&self);
    return NULL;
}

void
storage_destroy (storage_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    storage_t *self = *self_p;
    zactor_destroy (&self->archiver);
    zlistx_destroy (&self->archive_queue);
    zhashx_destroy (&self->cleared);
    free (self->state_published);
    free (self);
    *self_p = NULL;
}

int
storage_warnings (const storage_t *self)
{
    return self->nwarnings;
}

int
storage_paused (const storage_t *self)
{
    return self->guard_paused;
}

void
storage_put_volumes (const storage_t *self, text_t *t)
{
    text_put (t, "\"volumes\":[");
    for (int v = 0; v < 3; v++) {
        text_put (t, "%s{\"role\":", v ? "," : "");
        text_put_string (t, self->volumes[v].role);
        text_put (t, ",\"path\":");
        text_put_string (t, self->volumes[v].path);
        text_put (t,
                  ",\"free_bytes\":%lld,\"total_bytes\":%lld,\"growth_bytes_s\":%.0f,"
                  "\"pausing\":%s}",
                  (long long) self->volumes[v].free_bytes, (long long) self->volumes[v].total_bytes,
                  self->volumes[v].growth, self->volumes[v].pausing ? "true" : "false");
    }
    text_put (t, "]");
}
