// watcher.c — inotify (recursive) or polling over the watch root; every
// complete file becomes a FILE event, kept and resent with backoff until
// the broker's ACK says it is committed.

#include "watcher/watcher.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/secure.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RESEND_MS 30000

// An event sent and not yet acknowledged.
typedef struct {
    proto_msg_t msg;      // the FILE event
    int64_t resend_ms;    // when to send it again (mono clock)
    int64_t backoff_ms;   // current backoff
} s_event_t;

// Poll mode: what a file looked like at the last scan.
typedef struct {
    int64_t size;     // bytes
    int64_t mtime;    // ns
    int stable;       // scans it has stayed the same
    int sent;         // reported
} s_seen_t;

struct _watcher_t {
    config_t cfg;          // configuration
    char root[PATH_MAX];   // watch root, no trailing slash
    int poll;              // 1: poll mode
    int fd;                // inotify descriptor (-1 in poll mode)
    zhashx_t *dirs;        // inotify: watch descriptor ("%d") -> directory path
    zhashx_t *tops;        // inotify: experiment directory -> "dev:inode" it was watched as
    zhashx_t *seen;        // poll mode: path -> s_seen_t
    zsock_t *broker;       // DEALER to the ingest socket
    proto_batch_t *out;    // FILE events of one wake-up, sent together (s_flush)
    zloop_t *loop;         // reactor
    zhashx_t *pending;     // seq ("%llu") -> s_event_t
    zlistx_t *backlog;     // paths of files found while max_pending were pending, in order
    zhashx_t *waiting;     // the same paths, to keep each once
    uint64_t next_seq;     // next sequence number
    int64_t sent;          // events sent
    int64_t acked;         // events acknowledged
};

static void
s_event_destroy (s_event_t **self_p)
{
    if (self_p && *self_p) {
        proto_msg_release (&(*self_p)->msg);
        free (*self_p);
        *self_p = NULL;
    }
}

static void
s_free (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

// 1 if the base name matches an ignore pattern (hidden and temporary files).
static int
s_ignored (watcher_t *self, const char *name)
{
    char list[CONFIG_STRING];
    snprintf (list, sizeof list, "%s", self->cfg.watcher.ignore);
    for (char *save, *pat = strtok_r (list, ",", &save); pat; pat = strtok_r (NULL, ",", &save))
        if (fnmatch (pat, name, 0) == 0)
            return 1;
    return 0;
}

// Sends what the batch holds. Events the broker cannot take now stay
// pending and go again after their backoff.
static void
s_flush (watcher_t *self)
{
    proto_batch_send (self->out, NULL, self->broker);
}

// An event into the batch of this wake-up: 0, or -1 if the protocol
// cannot carry it (the encoder refuses it) or there is no memory.
static int
s_out (watcher_t *self, const proto_msg_t *msg)
{
    if (proto_batch_size (self->out) == PROTO_MAX_BATCH)
        s_flush (self);
    return proto_batch_add (self->out, msg);
}

// Reports 'path' (under the root) to the broker, if it is in an experiment.
static void
s_report (watcher_t *self, const char *path, const struct stat *st)
{
    const char *rel = path + strlen (self->root);
    while (*rel == '/')
        rel++;
    const char *slash = strchr (rel, '/');
    if (!slash) {
        log_warning ("'%s' is not in an experiment directory: ignored", path);
        return;
    }
    if (zhashx_size (self->pending) >= (size_t) self->cfg.watcher.max_pending) {
        // The broker is behind or gone: the file waits for room (s_drain).
        if (zhashx_lookup (self->waiting, path))
            return;
        if (zlistx_size (self->backlog) == 0)
            log_warning ("%zu events unacknowledged (watcher/max_pending): new files wait "
                         "until the broker catches up",
                         zhashx_size (self->pending));
        char *copy = strdup (path);
        if (copy && zhashx_insert (self->waiting, path, "") == 0)
            zlistx_add_end (self->backlog, copy);
        else
            free (copy);
        return;
    }
    s_event_t *ev = calloc (1, sizeof *ev);
    if (!ev)
        return;
    ev->msg.command = PROTO_FILE;
    ev->msg.seq = self->next_seq++;
    ev->msg.experiment = strndup (rel, (size_t) (slash - rel));
    ev->msg.name = strdup (slash + 1);
    ev->msg.size = (int64_t) st->st_size;
    ev->msg.time_ns = (int64_t) st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    ev->backoff_ms = self->cfg.watcher.resend_ms;
    ev->resend_ms = zclock_mono () + ev->backoff_ms;
    if (!ev->msg.experiment || !ev->msg.name) {
        s_event_destroy (&ev);
        return;
    }
    // A name the protocol cannot carry would be resent for ever: say so once.
    if (s_out (self, &ev->msg) != 0) {
        log_warning ("cannot report '%s': its name is not valid UTF-8 or is over %d bytes",
                     path, PROTO_MAX_STRING);
        s_event_destroy (&ev);
        return;
    }
    self->sent++;
    char key[32];
    snprintf (key, sizeof key, "%llu", (unsigned long long) ev->msg.seq);
    zhashx_insert (self->pending, key, ev);
    log_info ("file %s/%s (%lld bytes)", ev->msg.experiment, ev->msg.name,
              (long long) ev->msg.size);
}

static int s_watch_dir (watcher_t *self, const char *path, int depth);

// Walks 'path': reports complete files (inotify mode: every regular file;
// poll mode: the ones unchanged since the previous scan) and, in inotify
// mode, watches every directory. depth 0 is the root.
static void
s_scan (watcher_t *self, const char *path, int depth)
{
    DIR *dir = opendir (path);
    if (!dir) {
        if (errno != ENOENT)
            log_warning ("cannot read directory '%s': %s", path, strerror (errno));
        return;
    }
    struct dirent *de;
    while ((de = readdir (dir))) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
            || s_ignored (self, de->d_name))
            continue;
        char child[PATH_MAX];
        if ((size_t) snprintf (child, sizeof child, "%s/%s", path, de->d_name) >= sizeof child) {
            log_warning ("path too long under '%s': ignored", path);
            continue;
        }
        struct stat st;
        if (lstat (child, &st) != 0)
            continue;
        if (S_ISDIR (st.st_mode)) {
            if (depth < 16) {  // symlinks are not followed; depth bounds the rest
                if (!self->poll)
                    s_watch_dir (self, child, depth + 1);
                s_scan (self, child, depth + 1);
            }
        }
        else if (S_ISREG (st.st_mode)) {
            if (!self->poll) {
                if (depth > 0)
                    s_report (self, child, &st);
                continue;
            }
            s_seen_t *seen = zhashx_lookup (self->seen, child);
            int64_t mtime = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
            if (!seen) {
                seen = calloc (1, sizeof *seen);
                if (!seen)
                    continue;
                seen->size = st.st_size, seen->mtime = mtime;
                zhashx_insert (self->seen, child, seen);
                continue;
            }
            if (seen->size == st.st_size && seen->mtime == mtime)
                seen->stable++;
            else
                *seen = (s_seen_t) {st.st_size, mtime, 0, 0};
            // Unchanged over two scans: the camera has finished writing it.
            if (seen->stable >= 1 && !seen->sent && depth > 0) {
                s_report (self, child, &st);
                seen->sent = 1;
            }
        }
    }
    closedir (dir);
}

static int
s_watch_dir (watcher_t *self, const char *path, int depth)
{
    // An experiment's directory may later have a file system mounted on it
    // (a RAM disk, doc/storage.md): the watch would stay on the directory
    // below. s_remounts compares what the path is now with this.
    struct stat st;
    if (depth == 1 && stat (path, &st) == 0) {
        char id[64];
        snprintf (id, sizeof id, "%llu:%llu", (unsigned long long) st.st_dev,
                  (unsigned long long) st.st_ino);
        zhashx_update (self->tops, path, strdup (id));
    }
    int wd = inotify_add_watch (self->fd, path,
                                IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF
                                    | IN_ONLYDIR | IN_DONT_FOLLOW);
    if (wd < 0) {
        if (errno == ENOSPC) {
            FILE *f = fopen ("/proc/sys/fs/inotify/max_user_watches", "r");
            long limit = -1;
            if (f) {
                if (fscanf (f, "%ld", &limit) != 1)
                    limit = -1;
                fclose (f);
            }
            log_error ("cannot watch '%s': the inotify watch limit is reached "
                       "(fs.inotify.max_user_watches = %ld); raise it with sysctl or set "
                       "watcher/mode = poll",
                       path, limit);
        }
        else
            log_warning ("cannot watch '%s': %s", path, strerror (errno));
        return -1;
    }
    char key[16];
    snprintf (key, sizeof key, "%d", wd);
    zhashx_update (self->dirs, key, strdup (path));
    return 0;
}

static int
s_on_inotify (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void) loop, (void) item;
    watcher_t *self = arg;
    char buf[64 * 1024] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
    ssize_t n = read (self->fd, buf, sizeof buf);
    for (char *p = buf; n > 0 && p < buf + n;) {
        struct inotify_event *ev = (struct inotify_event *) p;
        p += sizeof *ev + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
            log_warning ("inotify queue overflowed: rescanning '%s'", self->root);
            s_scan (self, self->root, 0);
            continue;
        }
        char key[16];
        snprintf (key, sizeof key, "%d", ev->wd);
        const char *dir = zhashx_lookup (self->dirs, key);
        if (ev->mask & (IN_DELETE_SELF | IN_IGNORED)) {
            zhashx_delete (self->dirs, key);
            continue;
        }
        if (!dir || ev->len == 0 || s_ignored (self, ev->name))
            continue;
        char path[PATH_MAX];
        if ((size_t) snprintf (path, sizeof path, "%s/%s", dir, ev->name) >= sizeof path)
            continue;
        struct stat st;
        if (lstat (path, &st) != 0)
            continue;
        int depth = 0;
        for (const char *c = path + strlen (self->root); *c; c++)
            depth += *c == '/';
        if (S_ISDIR (st.st_mode) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
            // Files may land before the watch is in place: scan it too.
            s_watch_dir (self, path, depth);
            s_scan (self, path, depth);
        }
        else if (S_ISREG (st.st_mode) && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
            s_report (self, path, &st);
    }
    s_flush (self);
    return 0;
}

static int
s_on_broker (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    watcher_t *self = arg;
    proto_msg_t msg;
    char err[512];
    int rc = proto_recv (reader, NULL, &msg, err, sizeof err);
    if (rc != 0) {
        if (rc == -1)
            log_warning ("from the broker at '%s': %s", self->cfg.broker.ingest, err);
        return 0;
    }
    for (size_t m = 0; m < proto_count (&msg); m++) {
        const proto_msg_t *ack = proto_at (&msg, m);
        if (ack->command != PROTO_ACK)
            continue;
        for (uint32_t i = 0; i < ack->count; i++) {
            char key[32];
            snprintf (key, sizeof key, "%llu", (unsigned long long) ack->seqs[i]);
            if (zhashx_lookup (self->pending, key)) {
                zhashx_delete (self->pending, key);
                self->acked++;
            }
        }
    }
    proto_msg_release (&msg);
    return 0;
}

// Reports the files of the backlog while there is room under max_pending;
// a file gone since is dropped (there is nothing left to process).
static void
s_drain (watcher_t *self)
{
    size_t had = zlistx_size (self->backlog);
    const char *path;
    while (zhashx_size (self->pending) < (size_t) self->cfg.watcher.max_pending
           && (path = zlistx_first (self->backlog))) {
        char copy[PATH_MAX];
        snprintf (copy, sizeof copy, "%s", path);
        zlistx_delete (self->backlog, NULL);
        zhashx_delete (self->waiting, copy);
        struct stat st;
        if (lstat (copy, &st) == 0 && S_ISREG (st.st_mode))
            s_report (self, copy, &st);
    }
    if (had && zlistx_size (self->backlog) == 0)
        log_notice ("the backlog of files is sent");
}

static int
s_tick (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    watcher_t *self = arg;
    s_drain (self);
    int64_t now = zclock_mono ();
    for (s_event_t *ev = zhashx_first (self->pending); ev; ev = zhashx_next (self->pending))
        if (now >= ev->resend_ms) {
            s_out (self, &ev->msg);
            ev->backoff_ms = ev->backoff_ms * 2 > MAX_RESEND_MS ? MAX_RESEND_MS : ev->backoff_ms * 2;
            ev->resend_ms = now + ev->backoff_ms;
        }
    s_flush (self);
    return 0;
}

// Experiment directories that are no longer what was watched (a RAM disk
// mounted on one, or unmounted) are watched and scanned again.
static int
s_remounts (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    watcher_t *self = arg;
    zlistx_t *changed = zlistx_new ();
    if (!changed)
        return 0;
    zlistx_set_destructor (changed, (zlistx_destructor_fn *) zstr_free);
    for (const char *id = zhashx_first (self->tops); id; id = zhashx_next (self->tops)) {
        const char *path = zhashx_cursor (self->tops);
        struct stat st;
        char now[64] = "";
        if (stat (path, &st) == 0)
            snprintf (now, sizeof now, "%llu:%llu", (unsigned long long) st.st_dev,
                      (unsigned long long) st.st_ino);
        if (strcmp (now, id) != 0)
            zlistx_add_end (changed, strdup (path));
    }
    for (char *path = zlistx_first (changed); path; path = zlistx_next (changed)) {
        zhashx_delete (self->tops, path);
        struct stat st;
        if (lstat (path, &st) == 0 && S_ISDIR (st.st_mode)) {
            log_notice ("'%s' is another file system now: watching it afresh", path);
            s_watch_dir (self, path, 1);
            s_scan (self, path, 1);
        }
    }
    zlistx_destroy (&changed);
    s_flush (self);
    return 0;
}

static int
s_poll_scan (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    watcher_t *self = arg;
    s_scan (self, self->root, 0);
    s_flush (self);
    return 0;
}

watcher_t *
watcher_new (const config_t *cfg, char *err, size_t errlen)
{
    struct stat st;
    if (stat (cfg->watcher.root, &st) != 0 || !S_ISDIR (st.st_mode)) {
        snprintf (err, errlen, "cannot watch '%s': %s", cfg->watcher.root,
                  errno && !S_ISDIR (st.st_mode) ? strerror (errno) : "not a directory");
        return NULL;
    }
    watcher_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "cannot start the watcher: out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    snprintf (self->root, sizeof self->root, "%s", cfg->watcher.root);
    size_t len = strlen (self->root);
    while (len > 1 && self->root[len - 1] == '/')
        self->root[--len] = '\0';
    self->poll = strcmp (cfg->watcher.mode, "poll") == 0;
    self->fd = -1;
    self->next_seq = (uint64_t) zclock_time () * 1000;  // distinct from a previous run's
    self->dirs = zhashx_new ();
    self->tops = zhashx_new ();
    self->seen = zhashx_new ();
    self->pending = zhashx_new ();
    self->backlog = zlistx_new ();
    self->waiting = zhashx_new ();
    self->loop = zloop_new ();
    self->out = proto_batch_new ();
    if (!self->dirs || !self->tops || !self->seen || !self->pending || !self->backlog || !self->waiting
        || !self->loop || !self->out) {
        snprintf (err, errlen, "cannot start the watcher: out of memory");
        watcher_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->dirs, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_destructor (self->tops, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_destructor (self->seen, (zhashx_destructor_fn *) s_free);
    zhashx_set_destructor (self->pending, (zhashx_destructor_fn *) s_event_destroy);
    zlistx_set_destructor (self->backlog, (zlistx_destructor_fn *) zstr_free);
    self->broker = secure_connect (ZMQ_DEALER, cfg, cfg->broker.ingest, "the broker", 1000, err,
                                   errlen, NULL);
    if (!self->broker) {
        watcher_destroy (&self);
        return NULL;
    }
    if (!self->poll) {
        self->fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
        if (self->fd < 0 || s_watch_dir (self, self->root, 0) != 0) {
            snprintf (err, errlen, "cannot watch '%s' with inotify: %s (watcher/mode = poll "
                      "works without it)", self->root, strerror (errno));
            watcher_destroy (&self);
            return NULL;
        }
        zmq_pollitem_t item = {NULL, self->fd, ZMQ_POLLIN, 0};
        zloop_poller (self->loop, &item, s_on_inotify, self);
        zloop_timer (self->loop, 500, 0, s_remounts, self);
    }
    else
        zloop_timer (self->loop, (size_t) cfg->watcher.poll_ms, 0, s_poll_scan, self);
    zloop_reader (self->loop, self->broker, s_on_broker, self);
    zloop_timer (self->loop, 100, 0, s_tick, self);
    return self;
}

void
watcher_destroy (watcher_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    watcher_t *self = *self_p;
    if (self->fd >= 0)
        close (self->fd);
    zloop_destroy (&self->loop);
    zsock_destroy (&self->broker);
    proto_batch_destroy (&self->out);
    zhashx_destroy (&self->dirs);
    zhashx_destroy (&self->tops);
    zhashx_destroy (&self->seen);
    zhashx_destroy (&self->pending);
    zlistx_destroy (&self->backlog);
    zhashx_destroy (&self->waiting);
    free (self);
    *self_p = NULL;
}

int
watcher_run (watcher_t *self)
{
    log_notice ("watching '%s' (%s), reporting to %s", self->root,
                self->poll ? "polling" : "inotify", self->cfg.broker.ingest);
    // Files written while no watcher ran: the broker drops those it has.
    s_scan (self, self->root, 0);
    s_flush (self);
    zloop_start (self->loop);
    log_notice ("stopped: %lld event(s) sent, %lld acknowledged, %zu unacknowledged, %zu "
                "file(s) not sent yet",
                (long long) self->sent, (long long) self->acked, zhashx_size (self->pending),
                zlistx_size (self->backlog));
    return 0;
}
