// control_lifecycle.c — the store's lifecycle over the control socket
// (doc/storage.md, "Backup, purge, vacuum, forgetting agents"): backup, on
// a thread of its own (a zactor with its own connection to the store, so
// the reactor serves on while gigabytes are copied and checked), and its
// state as 'backup status' reads it; purge of an experiment.
//
// Pipe protocol (string frames):
//   broker -> backup   $TERM (ends a copy under way: nothing is kept)
//   backup -> broker   DONE FILE BYTES PAGES SECONDS
//                      FAILED FILE MESSAGE

#include "broker/control_cmd.h"
#include "broker/replay.h"
#include "common/log.h"
#include "common/path.h"
#include "common/util.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct _lifecycle_t {
    zloop_t *loop;            // the backup's pipe is read here
    store_t *store;           // for the events
    zactor_t *backup;         // the copy under way, or NULL
    char state[16];           // of the last backup: "", running, done or failed
    char file[PATH_MAX];      // its file
    char error[1024];         // why it failed
    int64_t bytes, pages;     // done: the copy's size and pages
    double seconds;           // and how long it took (copy and check)
    int64_t started_ns;       // when it began
};

// What the backup thread is given (freed by it).
typedef struct {
    char *store;  // the store's path
    char *file;   // the backup's
} s_job_t;

// The stop flag of store_backup_file: a $TERM on the pipe.
static int
s_stopped (void *arg)
{
    zsock_t *pipe = arg;
    if (!(zsock_events (pipe) & ZMQ_POLLIN))
        return 0;
    char *command = zstr_recv (pipe);
    zstr_free (&command);
    return 1;  // $TERM, or anything: the broker wants it over
}

static void
s_backup_actor (zsock_t *pipe, void *args)
{
    s_job_t *job = args;
    zsock_signal (pipe, 0);
    store_backup_info_t info;
    char err[PATH_MAX * 2 + 512];
    int terminated = 0;
    if (store_backup_file (job->store, job->file, 0, s_stopped, pipe, &info, err, sizeof err) == 0) {
        char bytes[32], pages[32], seconds[32];
        snprintf (bytes, sizeof bytes, "%" PRId64, info.bytes);
        snprintf (pages, sizeof pages, "%" PRId64, info.pages);
        snprintf (seconds, sizeof seconds, "%.3f", info.seconds);
        zstr_sendx (pipe, "DONE", job->file, bytes, pages, seconds, NULL);
    }
    else {
        terminated = strstr (err, "was stopped") != NULL;
        zstr_sendx (pipe, "FAILED", job->file, err, NULL);
    }
    free (job->store);
    free (job->file);
    free (job);
    while (!terminated) {
        char *command = zstr_recv (pipe);
        terminated = !command || strcmp (command, "$TERM") == 0;
        zstr_free (&command);
    }
}

lifecycle_t *
lifecycle_new (zloop_t *loop, store_t *store)
{
    lifecycle_t *self = calloc (1, sizeof *self);
    if (self)
        *self = (lifecycle_t) {.loop = loop, .store = store};
    return self;
}

static void
s_end_backup (lifecycle_t *self)
{
    if (!self->backup)
        return;
    zloop_reader_end (self->loop, zactor_sock (self->backup));
    zactor_destroy (&self->backup);
}

void
lifecycle_destroy (lifecycle_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    // The loop is gone by now (the broker destroys it first): a copy under
    // way is told to stop ($TERM) and waited for, nothing kept.
    zactor_destroy (&(*self_p)->backup);
    free (*self_p);
    *self_p = NULL;
}

// The backup thread's answer: the copy is there and verified, or it failed
// (nothing left behind). Logged, and an event.
static int
s_on_backup (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    lifecycle_t *self = arg;
    char *what = NULL, *file = NULL, *a = NULL, *b = NULL, *c = NULL;
    if (zstr_recvx (reader, &what, &file, &a, &b, &c, NULL) < 3 || !what || !file) {
        zstr_free (&what), zstr_free (&file), zstr_free (&a), zstr_free (&b), zstr_free (&c);
        return 0;
    }
    int64_t now = util_time_ns ();
    if (strcmp (what, "DONE") == 0 && b && c) {
        snprintf (self->state, sizeof self->state, "done");
        self->bytes = strtoll (a, NULL, 10);
        self->pages = strtoll (b, NULL, 10);
        self->seconds = strtod (c, NULL);
        log_notice ("backup: the store is copied into '%s': %" PRId64 " bytes, %" PRId64
                    " pages in %.2f s, integrity ok",
                    file, self->bytes, self->pages, self->seconds);
        char payload[PATH_MAX + 128];
        snprintf (payload, sizeof payload, "file=%s bytes=%" PRId64 " pages=%" PRId64 " seconds=%.3f",
                  file, self->bytes, self->pages, self->seconds);
        if (store_event (self->store, "backup", 0, 0, payload, now) < 0)
            log_warning ("backup: cannot record the backup into '%s' in the log: %s", file,
                         store_error (self->store));
    }
    else {
        snprintf (self->state, sizeof self->state, "failed");
        snprintf (self->error, sizeof self->error, "%s", a ? a : "?");
        log_warning ("backup: %s", self->error);
    }
    zstr_free (&what), zstr_free (&file), zstr_free (&a), zstr_free (&b), zstr_free (&c);
    s_end_backup (self);
    return 0;
}

// The last backup as 'backup' and 'backup status' answer it.
static void
s_put_backup (control_cmd_t *cmd, lifecycle_t *self)
{
    text_put (&cmd->body, "{\"backup\":{\"state\":");
    text_put_string (&cmd->body, *self->state ? self->state : "none");
    if (*self->state) {
        text_put (&cmd->body, ",\"file\":");
        text_put_string (&cmd->body, self->file);
        text_put (&cmd->body, ",\"started_ns\":%" PRId64, self->started_ns);
    }
    if (strcmp (self->state, "done") == 0)
        text_put (&cmd->body,
                  ",\"bytes\":%" PRId64 ",\"pages\":%" PRId64 ",\"seconds\":%.3f,"
                  "\"integrity\":\"ok\",\"schema\":%d",
                  self->bytes, self->pages, self->seconds, STORE_SCHEMA_VERSION);
    if (strcmp (self->state, "failed") == 0) {
        text_put (&cmd->body, ",\"error\":");
        text_put_string (&cmd->body, self->error);
    }
    text_put (&cmd->body, "}}");
}

int
control_backup (control_cmd_t *cmd)
{
    const char *usage = "backup FILE | backup status";
    if (cmd_expect (cmd, 0, 2, 2, usage))
        return -1;
    lifecycle_t *self = cmd->self->lifecycle;
    if (strcmp (cmd->argv[1], "status") == 0) {
        s_put_backup (cmd, self);
        return 0;
    }
    const char *file = cmd->argv[1];
    if (cmd_refuse_path (cmd, "FILE", file))
        return -1;
    if (self->backup)
        return cmd_refuse (cmd, 409,
                           "backup: a backup into '%s' is under way: wait for it ('pivctl backup "
                           "status')",
                           self->file);
    // What is acknowledged so far goes into the copy.
    if (cmd_commit (cmd))
        return -1;
    char store[PATH_MAX];
    if (!realpath (cmd->self->cfg->broker.store, store))
        snprintf (store, sizeof store, "%s", cmd->self->cfg->broker.store);
    s_job_t *job = calloc (1, sizeof *job);
    if (job && (!(job->store = strdup (store)) || !(job->file = strdup (file)))) {
        free (job->store);
        free (job);
        job = NULL;
    }
    if (job)
        self->backup = zactor_new (s_backup_actor, job);
    if (!self->backup) {
        if (job)
            free (job->store), free (job->file), free (job);
        return cmd_refuse (cmd, 500, "backup: cannot start the backup thread for '%s'", file);
    }
    zloop_reader (self->loop, zactor_sock (self->backup), s_on_backup, self);
    snprintf (self->state, sizeof self->state, "running");
    snprintf (self->file, sizeof self->file, "%s", file);
    self->error[0] = '\0';
    self->bytes = self->pages = 0;
    self->seconds = 0;
    self->started_ns = util_time_ns ();
    log_notice ("backup: copying the store '%s' into '%s'", store, file);
    s_put_backup (cmd, self);
    return 0;
}

// ---------------------------------------------------------------------------
// purge EXP [--files]

// The files of a purged experiment to remove (--files), gathered before
// the purge: where each is, beneath which root.
typedef struct {
    const config_t *cfg;   // the watch root, the archive directory
    const char *exp;       // the experiment's directory under the watch root
    zlistx_t *roots;       // the root of each file (not owned: cfg's)
    zlistx_t *rels;        // its path beneath it (owned)
    int64_t outside;       // archived files not below storage/archive_dir: kept
} s_purge_files_t;

static int
s_purge_file (void *arg, const store_file_stored_t *file)
{
    s_purge_files_t *pf = arg;
    char rel[PATH_MAX * 2], why[PATH_WHY];
    const char *root, *under = NULL;
    if (file->location) {
        root = pf->cfg->storage.archive_dir;
        if (!*root || !path_under (file->location, root, &under)) {
            pf->outside++;
            return 0;
        }
        snprintf (rel, sizeof rel, "%s", under);
    }
    else {
        root = pf->cfg->watcher.root;
        snprintf (rel, sizeof rel, "%s/%s", pf->exp, file->name);
    }
    if (path_check_relative (rel, why, sizeof why) != 0) {
        pf->outside++;
        return 0;
    }
    char *copy = strdup (rel);
    if (!copy || !zlistx_add_end (pf->rels, copy) || !zlistx_add_end (pf->roots, (void *) root)) {
        free (copy);
        return 1;
    }
    return 0;
}

// Removes 'rel' beneath 'root': a regular file alone, reached through no
// symbolic link nor '..' (path_open_beneath). 1 removed, 0 gone already,
// -1 kept (errno).
static int
s_remove_beneath (const char *root, const char *rel)
{
    char dir[PATH_MAX * 2];
    snprintf (dir, sizeof dir, "%s", rel);
    char *slash = strrchr (dir, '/');
    const char *base = slash ? slash + 1 : dir;
    int fd = slash ? (*slash = '\0', path_open_beneath (root, dir, O_RDONLY | O_DIRECTORY, 0))
                   : open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    int rc;
    if (fstatat (fd, base, &st, AT_SYMLINK_NOFOLLOW) != 0)
        rc = errno == ENOENT ? 0 : -1;
    else if (!S_ISREG (st.st_mode))
        rc = (errno = EPERM, -1);  // a link, a directory: not a frame the store names
    else
        rc = unlinkat (fd, base, 0) == 0 ? 1 : -1;
    close (fd);
    return rc;
}

int
control_purge (control_cmd_t *cmd)
{
    const char *usage = "purge EXP [--files]";
    if (cmd_expect (cmd, CMD_OPT_FILES, 2, 2, usage))
        return -1;
    control_t *control = cmd->self;
    const char *name = cmd->argv[1];
    exp_t *exp = cmd_find_experiment (cmd, name);
    if (!exp)
        return -1;
    // What runs in memory: a replay feeding it or reading it (not done
    // sending; its pairs are counted below, and a replay's source is kept
    // while the replay is in the store), its fast space, its archive.
    if (exp->replay && !replay_finished (exp->replay))
        return cmd_refuse (cmd, 409,
                           "purge: refused: experiment '%s' is being replayed into (from '%s'): "
                           "wait for the replay to end",
                           name, replay_of (exp->replay));
    zhashx_t *all = ingest_experiments (control->ingest);
    for (exp_t *e = zhashx_first (all); e; e = zhashx_next (all))
        if (e->replay && !replay_finished (e->replay) && strcmp (replay_of (e->replay), name) == 0)
            return cmd_refuse (cmd, 409,
                               "purge: refused: experiment '%s' is being replayed as '%s': wait "
                               "for the replay to end, then purge '%s' first",
                               name, e->name, e->name);
    if (exp->storage.alloc)
        return cmd_refuse (cmd, 409,
                           "purge: refused: experiment '%s' holds fast space at '%s': 'pivctl "
                           "release %s' first",
                           name, exp->storage.alloc->path, name);
    if (exp->storage.archive && strcmp (exp->storage.archive->state, "done") != 0
        && strcmp (exp->storage.archive->state, "failed") != 0)
        return cmd_refuse (cmd, 409,
                           "purge: refused: experiment '%s' is being archived (%s): wait for it",
                           name, exp->storage.archive->state);
    store_t *store = control->store;
    store_experiment_busy_t busy;
    if (store_experiment_busy (store, exp->id, name, &busy) != 0)
        return cmd_refuse (cmd, 500, "purge: %s", store_error (store));
    if (busy.pending || busy.dispatched)
        return cmd_refuse (cmd, 409,
                           "purge: refused: experiment '%s' is running: %" PRId64
                           " pair(s) pending, %" PRId64
                           " dispatched; let them finish (pause it to stop new ones) first",
                           name, busy.pending, busy.dispatched);
    if (busy.ensembles)
        return cmd_refuse (cmd, 409,
                           "purge: refused: experiment '%s' has %" PRId64
                           " ensemble job(s) running (job %s): let them finish first",
                           name, busy.ensembles, busy.ensemble);
    if (busy.replays)
        return cmd_refuse (cmd, 409,
                           "purge: refused: experiment '%s' is the source of %" PRId64
                           " replay(s) ('%s'%s): purge them first",
                           name, busy.replays, busy.replay, busy.replays > 1 ? ", ..." : "");
    // The frames it names, gathered before its rows go (its own files
    // only: a replay reads another's).
    s_purge_files_t pf = {.cfg = control->cfg, .exp = exp->source,
                          .roots = zlistx_new (), .rels = zlistx_new ()};
    int own = strcmp (exp->source, exp->name) == 0;
    if (!pf.roots || !pf.rels) {
        zlistx_destroy (&pf.roots), zlistx_destroy (&pf.rels);
        return cmd_refuse (cmd, 500, "purge: no memory");
    }
    zlistx_set_destructor (pf.rels, (zlistx_destructor_fn *) zstr_free);
    if (cmd->files && own && store_files_stored (store, exp->id, s_purge_file, &pf) < 0) {
        zlistx_destroy (&pf.roots), zlistx_destroy (&pf.rels);
        return cmd_refuse (cmd, 500, "purge: %s", store_error (store));
    }
    // The purge is a transaction of its own: what waits is committed (and
    // acknowledged) first.
    int64_t now = util_time_ns ();
    store_purge_counts_t n;
    if (cmd_commit (cmd) || store_experiment_purge (store, exp->id, name, now, &n) != 0) {
        zlistx_destroy (&pf.roots), zlistx_destroy (&pf.rels);
        if (cmd->status == 200)
            cmd_refuse (cmd, 500, "purge: %s", store_error (store));
        return -1;
    }
    // Nothing of it is left in the store: then in memory.
    stats_forget (control->stages.stats, exp);
    ingest_forget (control->ingest, exp);
    int64_t removed = 0, kept = pf.outside, gone = 0;
    const char *root = zlistx_first (pf.roots);
    for (const char *rel = zlistx_first (pf.rels); rel; rel = zlistx_next (pf.rels)) {
        int rc = s_remove_beneath (root, rel);
        if (rc == 1)
            removed++;
        else if (rc == 0)
            gone++;
        else {
            kept++;
            log_warning ("purge: kept '%s/%s' of experiment '%s': %s", root, rel, name,
                         strerror (errno));
        }
        root = zlistx_next (pf.roots);
    }
    zlistx_destroy (&pf.roots), zlistx_destroy (&pf.rels);
    log_notice ("purge: experiment '%s' removed from the store: %" PRId64 " pairs, %" PRId64
                " results, %" PRId64 " files, %" PRId64 " events, %" PRId64 " statistics sets"
                "%s",
                name, n.pairs, n.results, n.files, n.events, n.stats,
                cmd->files ? "; its frames removed" : "; its frames left on disk");
    text_put (&cmd->body, "{\"experiment\":");
    text_put_string (&cmd->body, name);
    text_put (&cmd->body,
              ",\"purged\":{\"pairs\":%" PRId64 ",\"results\":%" PRId64 ",\"attempts\":%" PRId64
              ",\"files\":%" PRId64 ",\"events\":%" PRId64 ",\"stats\":%" PRId64
              ",\"settings\":%" PRId64 ",\"ensemble_jobs\":%" PRId64 "}",
              n.pairs, n.results, n.attempts, n.files, n.events, n.stats, n.settings,
              n.ensemble_jobs);
    if (cmd->files)
        text_put (&cmd->body,
                  ",\"frames\":{\"removed\":%" PRId64 ",\"gone\":%" PRId64 ",\"kept\":%" PRId64
                  ",\"replay\":%s}",
                  removed, gone, kept, own ? "false" : "true");
    text_put (&cmd->body, "}");
    return 0;
}

// ---------------------------------------------------------------------------
// vacuum

int
control_vacuum (control_cmd_t *cmd)
{
    if (cmd_expect (cmd, 0, 1, 1, "vacuum"))
        return -1;
    store_t *store = cmd->self->store;
    // VACUUM runs outside a transaction: what waits is committed (and
    // acknowledged) first.
    if (cmd_commit (cmd))
        return -1;
    log_notice ("vacuum: rebuilding the store '%s' (the broker waits for it)",
                cmd->self->cfg->broker.store);
    store_vacuum_t v;
    if (store_vacuum (store, &v) != 0)
        return cmd_refuse (cmd, 500, "vacuum: %s", store_error (store));
    log_notice ("vacuum: the store '%s' went from %" PRId64 " bytes (%" PRId64
                " of them free) to %" PRId64 " in %.2f s",
                cmd->self->cfg->broker.store, v.bytes_before, v.free_before, v.bytes_after,
                v.seconds);
    char payload[256];
    snprintf (payload, sizeof payload,
              "bytes_before=%" PRId64 " free_before=%" PRId64 " bytes_after=%" PRId64
              " seconds=%.3f",
              v.bytes_before, v.free_before, v.bytes_after, v.seconds);
    if (store_event (store, "vacuum", 0, 0, payload, util_time_ns ()) < 0 || cmd_commit (cmd))
        log_warning ("vacuum: cannot record the vacuum in the log: %s", store_error (store));
    cmd->status = 200;
    cmd->body.len = 0;
    text_put (&cmd->body,
              "{\"vacuum\":{\"bytes_before\":%" PRId64 ",\"free_before\":%" PRId64
              ",\"bytes_after\":%" PRId64 ",\"seconds\":%.3f}}",
              v.bytes_before, v.free_before, v.bytes_after, v.seconds);
    return 0;
}

// ---------------------------------------------------------------------------
// forget-agents --older-than DURATION

int
control_forget_agents (control_cmd_t *cmd)
{
    const char *usage = "forget-agents --older-than DURATION (7d, 12h, 30m)";
    if (cmd_expect (cmd, CMD_OPT_OLDER_THAN, 1, 1, usage))
        return -1;
    if (!cmd->older_than)
        return cmd_refuse (cmd, 400, "forget-agents needs --older-than; usage: %s", usage);
    // The configuration's durations (s, min, h, d), and 'm' for minutes
    // on the command line, where it cannot be taken for months.
    char text[32];
    size_t len = strlen (cmd->older_than);
    snprintf (text, sizeof text, "%s%s", cmd->older_than,
              len > 1 && cmd->older_than[len - 1] == 'm' && cmd->older_than[len - 2] != 'i' ? "in"
                                                                                              : "");
    long seconds = config_parse_duration (text);
    if (seconds <= 0)
        return cmd_refuse (cmd, 400,
                           "forget-agents: bad --older-than '%.64s': a whole number of s, m, h "
                           "or d such as 7d, 12h or 30m (at most 3650d)",
                           cmd->older_than);
    char names[2048];
    int64_t now = util_time_ns ();
    int n = dispatch_forget_agents (cmd->self->dispatch, (int64_t) seconds * 1000000000, now,
                                    names, sizeof names);
    if (n < 0)
        return cmd_refuse (cmd, 500, "forget-agents: %s", store_error (cmd->self->store));
    if (cmd_commit (cmd))
        return -1;
    if (n > 0)
        log_notice ("forget-agents: forgot %d agent(s) not seen for %s: %s", n, cmd->older_than,
                    names);
    text_put (&cmd->body, "{\"forgotten\":%d,\"older_than_s\":%ld,\"agents\":", n, seconds);
    text_put_string (&cmd->body, names);
    text_put (&cmd->body, "}");
    return 0;
}
