// watcher.c — inotify (recursive) or polling over the watch root; every
// complete file becomes a FILE event, kept and resent with backoff until
// the broker's ACK says it is committed. A file is complete once it is
// stable for watcher/settle_ms and, if it is a TIFF, as long as its header
// says (a TIFF that long and just closed is complete at once); a file that
// changes after it was reported is reported again.

#include "watcher/watcher.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/secure.h"
#include "common/util.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RESEND_MS 30000
// Events unacknowledged this long (at least; 10 x watcher/resend_ms) with
// nothing heard from the broker: a CURVE handshake that fails says nothing,
// so the watcher says it, with what to check (secure_hint).
#define SILENT_MIN_MS 2000
#define MAX_DEPTH 16          // directories below the root watched and scanned
#define MAX_FILES 1000000     // files remembered (reported or candidates), at most
#define MAX_SAID 10000        // paths left out (too deep, too long) remembered as said
#define SETTLE_SLACK_MS 10    // settle checks of candidates due this close are batched

// An event sent and not yet acknowledged.
typedef struct {
    proto_msg_t msg;      // the FILE event
    int64_t resend_ms;    // when to send it again (mono clock)
    int64_t backoff_ms;   // current backoff
} s_event_t;

// What was last reported of a file (or queued in the backlog).
typedef struct {
    int64_t size;     // bytes
    int64_t mtime;    // ns
    uint64_t scan;    // poll mode: the last scan that found it
} s_known_t;

// A file seen changed and not reported yet in its present state.
typedef struct {
    int64_t size;      // bytes at the last look
    int64_t mtime;     // ns at the last look
    int64_t since_ms;  // first seen with this size and mtime (mono clock)
    uint64_t scan;     // poll mode: the last scan that found it
    int waits;         // 1: empty, or a TIFF shorter than its header says: looked at
                       // again when it changes or after s_wait_ms
    int logged;        // the shortness is logged
} s_cand_t;

// How a file came to be looked at (s_consider).
enum {
    SEEN_CHANGED,  // an inotify event other than a close
    SEEN_CLOSED,   // closed after writing, renamed in, or hard-linked in
    SEEN_SCAN,     // an inotify-mode scan (start, new directory, overflow)
    SEEN_POLL      // a poll-mode scan
};

struct _watcher_t {
    config_t cfg;          // configuration
    char root[PATH_MAX];   // watch root, no trailing slash
    int poll;              // 1: poll mode
    int fd;                // inotify descriptor (-1 in poll mode)
    zhashx_t *dirs;        // inotify: watch descriptor ("%d") -> directory path
    zhashx_t *tops;        // inotify: every watched directory below the root -> "dev:inode"
                           // it was watched as (a file system mounted on it changes that)
    zhashx_t *known;       // path -> s_known_t: what was reported, MAX_FILES with cands
    zhashx_t *cands;       // path -> s_cand_t: files not complete yet
    int timer;             // the settle timer of the candidates, -1 when none is armed
    uint64_t scan;         // poll mode: scans of the whole root started
    int full_logged;       // MAX_FILES reached is logged
    zhashx_t *said;        // paths left out (too deep, too long) and logged: each said once
    zsock_t *broker;       // DEALER to the ingest socket
    proto_batch_t *out;    // FILE events of one wake-up, sent together (s_flush)
    zloop_t *loop;         // reactor
    zhashx_t *pending;     // seq ("%llu") -> s_event_t
    zlistx_t *backlog;     // paths of files found while max_pending were pending, in order
    zhashx_t *waiting;     // the same paths -> s_known_t found complete, to keep each once
    uint64_t next_seq;     // next sequence number
    int64_t sent;          // events sent
    int64_t acked;         // events acknowledged
    int64_t heard_ms;      // mono time of the broker's last message, or of the first event
                           // sent to a broker that owed nothing
    int silent;            // the broker's silence is logged (until it answers)
    void *fd_watch;        // watcher_watch_hangup's watch (SIGHUP)
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

// ---- TIFF length: how long a TIFF file must be to hold everything its
// header and IFDs point to (classic and BigTIFF, both byte orders).

#define TIFF_MAX_IFDS 64          // IFDs followed in one file (a loop ends here)
#define TIFF_MAX_ENTRIES 4096     // entries of one IFD
#define TIFF_MAX_OFFSETS 65536    // strips or tiles of one IFD

enum { TIFF_UNKNOWN, TIFF_SHORT, TIFF_COMPLETE };

// The unsigned integer of n bytes at p in the file's byte order.
static uint64_t
s_tiff_get (const unsigned char *p, int n, int le)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t) p[le ? i : n - 1 - i] << (8 * i);
    return v;
}

// The size in bytes of one value of TIFF field type 'type'; 0 if unknown.
static int
s_tiff_type_size (uint64_t type)
{
    static const int sizes[] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8, 8, 8};
    return type < sizeof sizes / sizeof sizes[0] ? sizes[type] : 0;
}

// Reads len bytes at off: 0, or -1 if the file holds fewer.
static int
s_pread_all (int fd, void *buf, size_t len, uint64_t off)
{
    if (off > (uint64_t) INT64_MAX)
        return -1;
    ssize_t n = pread (fd, buf, len, (off_t) off);
    return n == (ssize_t) len ? 0 : -1;
}

// One IFD entry's values as integers (types SHORT, LONG, LONG8) into a
// malloc'd array (caller frees); NULL if the type is not one of those, the
// count is over TIFF_MAX_OFFSETS or the values cannot be read.
static uint64_t *
s_tiff_values (int fd, const unsigned char *entry, int big, int le)
{
    int offlen = big ? 8 : 4;
    uint64_t type = s_tiff_get (entry + 2, 2, le);
    uint64_t count = s_tiff_get (entry + 4, big ? 8 : 4, le);
    int size = s_tiff_type_size (type);
    if ((type != 3 && type != 4 && type != 16) || count == 0 || count > TIFF_MAX_OFFSETS)
        return NULL;
    size_t bytes = (size_t) count * (size_t) size;
    unsigned char *raw = malloc (bytes);
    uint64_t *values = calloc ((size_t) count, sizeof *values);
    const unsigned char *field = entry + (big ? 12 : 8);
    int ok = raw && values;
    if (ok && bytes <= (size_t) offlen)
        memcpy (raw, field, bytes);
    else if (ok)
        ok = s_pread_all (fd, raw, bytes, s_tiff_get (field, offlen, le)) == 0;
    for (uint64_t i = 0; ok && i < count; i++)
        values[i] = s_tiff_get (raw + i * (size_t) size, size, le);
    free (raw);
    if (!ok) {
        free (values);
        return NULL;
    }
    return values;
}

// Whether the TIFF open at fd, 'size' bytes long, holds every byte its
// header, IFDs, their out-of-line values and its strips or tiles need:
// TIFF_COMPLETE, TIFF_SHORT (*need_p: the length known to be needed), or
// TIFF_UNKNOWN when it is not a TIFF or its header cannot tell (no IFD
// yet, no strip or tile offsets, more IFDs or strips than the bounds
// above, offsets past 2^63). Reads with a few small pread()s.
static int
s_tiff_state (int fd, int64_t size, int64_t *need_p)
{
    unsigned char h[16];
    ssize_t got = pread (fd, h, sizeof h, 0);
    if (got < 8)
        return TIFF_UNKNOWN;
    int le = h[0] == 'I' && h[1] == 'I';
    if (!le && !(h[0] == 'M' && h[1] == 'M'))
        return TIFF_UNKNOWN;
    uint64_t magic = s_tiff_get (h + 2, 2, le), ifd, need;
    int big = magic == 43;
    if (magic == 42)
        ifd = s_tiff_get (h + 4, 4, le), need = 8;
    else if (big && got < 16) {
        *need_p = 16;
        return TIFF_SHORT;
    }
    else if (big && s_tiff_get (h + 4, 2, le) == 8 && s_tiff_get (h + 6, 2, le) == 0)
        ifd = s_tiff_get (h + 8, 8, le), need = 16;
    else
        return TIFF_UNKNOWN;
    if (ifd == 0)  // a writer that puts its IFD last has not written it yet
        return TIFF_UNKNOWN;
    int cntlen = big ? 8 : 2, entlen = big ? 20 : 12, offlen = big ? 8 : 4;
    int state = TIFF_COMPLETE;
    for (int k = 0; ifd && k < TIFF_MAX_IFDS; k++) {
        unsigned char cnt[8];
        if (ifd > (uint64_t) INT64_MAX - 64 || s_pread_all (fd, cnt, (size_t) cntlen, ifd) != 0) {
            *need_p = (int64_t) (ifd > (uint64_t) INT64_MAX - 64 ? INT64_MAX : ifd + cntlen);
            return ifd > (uint64_t) INT64_MAX - 64 ? TIFF_UNKNOWN : TIFF_SHORT;
        }
        uint64_t n = s_tiff_get (cnt, cntlen, le);
        if (n == 0 || n > TIFF_MAX_ENTRIES)
            return TIFF_UNKNOWN;
        size_t len = (size_t) n * (size_t) entlen + (size_t) offlen;
        uint64_t end = ifd + (uint64_t) cntlen + len;
        need = end > need ? end : need;
        if (end > (uint64_t) size) {
            *need_p = (int64_t) need;
            return TIFF_SHORT;
        }
        unsigned char *entries = malloc (len);
        if (!entries || s_pread_all (fd, entries, len, ifd + (uint64_t) cntlen) != 0) {
            free (entries);
            return TIFF_UNKNOWN;  // shrunk meanwhile: the next look decides
        }
        const unsigned char *offsets = NULL, *counts = NULL;
        for (uint64_t i = 0; i < n && state != TIFF_UNKNOWN; i++) {
            const unsigned char *e = entries + i * (size_t) entlen;
            uint64_t tag = s_tiff_get (e, 2, le);
            uint64_t count = s_tiff_get (e + 4, big ? 8 : 4, le);
            int tsize = s_tiff_type_size (s_tiff_get (e + 2, 2, le));
            if (tsize == 0)
                continue;  // a type of a later TIFF: readers skip it too
            if (count > (uint64_t) INT64_MAX / 8)
                state = TIFF_UNKNOWN;
            else if (count * (uint64_t) tsize > (uint64_t) offlen) {
                uint64_t at = s_tiff_get (e + (big ? 12 : 8), offlen, le);
                uint64_t bytes = count * (uint64_t) tsize;
                if (at > (uint64_t) INT64_MAX - bytes)
                    state = TIFF_UNKNOWN;
                else if (at + bytes > need)
                    need = at + bytes;
            }
            if (tag == 273 || tag == 324)
                offsets = e;
            else if (tag == 279 || tag == 325)
                counts = e;
        }
        uint64_t next = s_tiff_get (entries + len - (size_t) offlen, offlen, le);
        if (state == TIFF_UNKNOWN || !offsets || !counts) {
            free (entries);
            return TIFF_UNKNOWN;
        }
        if (need > (uint64_t) size) {  // the offset arrays themselves are not there yet
            free (entries);
            *need_p = (int64_t) need;
            return TIFF_SHORT;
        }
        uint64_t *off = s_tiff_values (fd, offsets, big, le);
        uint64_t *bc = s_tiff_values (fd, counts, big, le);
        uint64_t noff = s_tiff_get (offsets + 4, big ? 8 : 4, le);
        uint64_t nbc = s_tiff_get (counts + 4, big ? 8 : 4, le);
        free (entries);
        if (!off || !bc || noff != nbc)
            state = TIFF_UNKNOWN;
        for (uint64_t i = 0; state != TIFF_UNKNOWN && i < noff; i++) {
            if (off[i] > (uint64_t) INT64_MAX - bc[i])
                state = TIFF_UNKNOWN;
            else if (off[i] + bc[i] > need)
                need = off[i] + bc[i];
        }
        free (off);
        free (bc);
        if (state == TIFF_UNKNOWN)
            return TIFF_UNKNOWN;
        ifd = next;
    }
    if (ifd)  // more IFDs than the bound, or a loop
        return TIFF_UNKNOWN;
    *need_p = (int64_t) need;
    return need <= (uint64_t) size ? TIFF_COMPLETE : TIFF_SHORT;
}

// s_tiff_state of the file at path (opened without following a link).
static int
s_tiff_file (const char *path, int64_t *need_p)
{
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return TIFF_UNKNOWN;
    struct stat st;
    int state = fstat (fd, &st) == 0 && S_ISREG (st.st_mode)
                    ? s_tiff_state (fd, (int64_t) st.st_size, need_p)
                    : TIFF_UNKNOWN;
    close (fd);
    return state;
}

// The modification time of st in nanoseconds.
static int64_t
s_mtime (const struct stat *st)
{
    return (int64_t) st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

// 1 if another entry fits under MAX_FILES; logs once when it does not.
static int
s_room (watcher_t *self)
{
    if (zhashx_size (self->known) + zhashx_size (self->cands) < MAX_FILES)
        return 1;
    if (!self->full_logged)
        log_warning ("more than %d files under '%s' to remember: files beyond are reported "
                     "without waiting to settle and again on each change (the broker drops "
                     "the copies)",
                     MAX_FILES, self->root);
    self->full_logged = 1;
    return 0;
}

// Remembers that 'path' was reported as st (in 'map': known or waiting).
static void
s_remember (watcher_t *self, zhashx_t *map, const char *path, const struct stat *st)
{
    s_known_t *known = zhashx_lookup (map, path);
    if (!known && (map != self->known || s_room (self))) {
        known = calloc (1, sizeof *known);
        if (known && zhashx_insert (map, path, known) != 0) {
            free (known);
            known = NULL;
        }
    }
    if (known)
        known->size = (int64_t) st->st_size, known->mtime = s_mtime (st), known->scan = self->scan;
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
        s_remember (self, self->known, path, st);
        return;
    }
    if (zhashx_size (self->pending) >= (size_t) self->cfg.watcher.max_pending) {
        // The broker is behind or gone: the file waits for room (s_drain).
        if (zhashx_lookup (self->waiting, path)) {
            s_remember (self, self->waiting, path, st);
            return;
        }
        if (zlistx_size (self->backlog) == 0)
            log_warning ("%zu events unacknowledged (watcher/max_pending): new files wait "
                         "until the broker catches up",
                         zhashx_size (self->pending));
        char *copy = strdup (path);
        if (copy && zlistx_add_end (self->backlog, copy))
            s_remember (self, self->waiting, path, st);
        else
            free (copy);
        return;
    }
    s_known_t *before = zhashx_lookup (self->known, path);
    if (before)
        log_notice ("'%s' changed since it was reported (%lld bytes then, %lld now): reporting "
                    "it again",
                    path, (long long) before->size, (long long) st->st_size);
    s_event_t *ev = calloc (1, sizeof *ev);
    if (!ev)
        return;
    ev->msg.command = PROTO_FILE;
    ev->msg.seq = self->next_seq++;
    ev->msg.experiment = strndup (rel, (size_t) (slash - rel));
    ev->msg.name = strdup (slash + 1);
    ev->msg.size = (int64_t) st->st_size;
    ev->msg.time_ns = s_mtime (st);
    ev->backoff_ms = self->cfg.watcher.resend_ms;
    ev->resend_ms = zclock_mono () + ev->backoff_ms;
    if (!ev->msg.experiment || !ev->msg.name) {
        s_event_destroy (&ev);
        return;
    }
    s_remember (self, self->known, path, st);
    // A name the protocol cannot carry would be resent for ever: say so once,
    // and why (the broker would refuse it: common/path.h).
    char why[PATH_WHY] = "", shown[UTIL_SHOWN];
    if (path_check_component (ev->msg.experiment, why, sizeof why) != 0
        || path_check_relative (ev->msg.name, why, sizeof why) != 0
        || s_out (self, &ev->msg) != 0) {
        log_warning ("cannot report '%s': %s", util_shorten (path, shown, sizeof shown),
                     *why ? why : "its name is over the protocol's limit");
        s_event_destroy (&ev);
        return;
    }
    self->sent++;
    char key[32];
    snprintf (key, sizeof key, "%llu", (unsigned long long) ev->msg.seq);
    if (zhashx_size (self->pending) == 0)
        self->heard_ms = zclock_mono ();
    zhashx_insert (self->pending, key, ev);
    log_info ("file %s/%s (%lld bytes)", ev->msg.experiment, ev->msg.name,
              (long long) ev->msg.size);
}

// How long a candidate that waits (empty, or a TIFF shorter than its
// header says) stays unchanged before it is reported as it is: a writer
// pausing this long is taken for one that stopped (a truncated frame),
// and its pair fails with the reason; if the file changes later it is
// reported again.
static int64_t
s_wait_ms (watcher_t *self)
{
    return 10 * (int64_t) self->cfg.watcher.settle_ms;
}

static int s_on_settle (zloop_t *loop, int timer_id, void *arg);

// Arms the one settle timer for the earliest candidate due (inotify mode;
// poll mode looks at candidates on its scans), unless it is armed.
static void
s_arm (watcher_t *self)
{
    if (self->poll || self->timer >= 0)
        return;
    int64_t first = INT64_MAX;
    for (s_cand_t *c = zhashx_first (self->cands); c; c = zhashx_next (self->cands)) {
        int64_t due = c->since_ms + (c->waits ? s_wait_ms (self) : self->cfg.watcher.settle_ms);
        if (due < first)
            first = due;
    }
    if (first == INT64_MAX)
        return;
    int64_t delay = first - zclock_mono ();
    delay = (delay > 0 ? delay : 0) + SETTLE_SLACK_MS;
    self->timer = zloop_timer (self->loop, (size_t) delay, 1, s_on_settle, self);
}

// Candidate 'path' (st as it is now) has settled, or was just closed
// ('closed'): reports it if it is complete, else leaves it waiting.
// Empty files are not complete; a closed file is complete at once only if
// it is a TIFF as long as its header says; a settled one if it is not a
// TIFF (or its header cannot tell) or is that long. A waiting file still
// unchanged after s_wait_ms is reported as it is.
static void
s_settled (watcher_t *self, const char *path, s_cand_t *cand, const struct stat *st, int closed)
{
    int late = !closed && cand->waits && zclock_mono () - cand->since_ms >= s_wait_ms (self);
    int64_t need = 0;
    int state = st->st_size == 0 ? TIFF_SHORT : s_tiff_file (path, &need);
    if (state == TIFF_COMPLETE || (state == TIFF_UNKNOWN && !closed) || late) {
        if (late)
            log_notice ("'%s' is still %lld bytes after %lld ms, its TIFF header says %lld: "
                        "reporting it as it is",
                        path, (long long) st->st_size, (long long) s_wait_ms (self),
                        (long long) need);
        zhashx_delete (self->cands, path);
        s_report (self, path, st);
        return;
    }
    if (closed)
        return;  // settle decides
    if (!cand->logged && st->st_size > 0)
        log_notice ("'%s' is %lld bytes, its TIFF header says %lld: waiting for the rest", path,
                    (long long) st->st_size, (long long) need);
    cand->waits = 1;
    cand->logged = st->st_size > 0;
}

// The attributes of 'path' as its server has them now (poll mode, before
// a file is taken for stable): NFS clients cache attributes for up to
// acregmax (60 s), so a stat() may say "unchanged" of a file still being
// written; an open() revalidates them (close-to-open consistency) and
// fstat() on it reads the fresh ones. CIFS revalidates on open too
// (actimeo). 0, or -1 (gone, not a regular file).
static int
s_revalidate (const char *path, struct stat *st)
{
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    int rc = fstat (fd, st) == 0 && S_ISREG (st->st_mode) ? 0 : -1;
    close (fd);
    return rc;
}

// A regular file, found as 'how' says: reported if complete, else kept as
// a candidate. A file reported with the same size and mtime is not
// reported again.
static void
s_consider (watcher_t *self, const char *path, const struct stat *st, int how)
{
    int64_t size = (int64_t) st->st_size, mtime = s_mtime (st), now = zclock_mono ();
    s_known_t *known = zhashx_lookup (self->known, path);
    if (known)
        known->scan = self->scan;
    if (known && known->size == size && known->mtime == mtime) {
        zhashx_delete (self->cands, path);
        return;
    }
    s_cand_t *cand = zhashx_lookup (self->cands, path);
    int fresh = !cand;
    if (fresh) {
        if (!s_room (self)) {
            s_report (self, path, st);
            return;
        }
        cand = calloc (1, sizeof *cand);
        if (!cand || zhashx_insert (self->cands, path, cand) != 0) {
            free (cand);
            return;
        }
    }
    if (fresh || cand->size != size || cand->mtime != mtime)
        cand->size = size, cand->mtime = mtime, cand->since_ms = now, cand->waits = 0;
    cand->scan = self->scan;
    int settle = self->cfg.watcher.settle_ms;
    struct stat fresh_st;
    if (how == SEEN_CLOSED)
        s_settled (self, path, cand, st, 1);
    else if (how == SEEN_POLL && !fresh && now - cand->since_ms >= settle
             && (!cand->waits || now - cand->since_ms >= s_wait_ms (self))) {
        // Stable as the scan saw it, which may be attributes an NFS client
        // cached: confirmed with what an open() fetches from the server.
        if (s_revalidate (path, &fresh_st) != 0)
            zhashx_delete (self->cands, path);  // gone: nothing to report
        else if ((int64_t) fresh_st.st_size != size || s_mtime (&fresh_st) != mtime)
            cand->size = (int64_t) fresh_st.st_size, cand->mtime = s_mtime (&fresh_st),
            cand->since_ms = now, cand->waits = 0;
        else
            s_settled (self, path, cand, &fresh_st, 0);
    }
    else if (how == SEEN_SCAN && !cand->waits) {
        // An old file found by a scan: its mtime says how long it has been
        // unchanged already.
        int64_t age_ms = (int64_t) zclock_time () - mtime / 1000000;
        if (age_ms >= s_wait_ms (self))
            cand->waits = 1, cand->since_ms = now - s_wait_ms (self);
        if (age_ms >= settle)
            s_settled (self, path, cand, st, 0);
    }
    s_arm (self);
}

// The settle timer: candidates unchanged for settle_ms are settled.
static int
s_on_settle (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    watcher_t *self = arg;
    self->timer = -1;
    int64_t now = zclock_mono ();
    zlistx_t *due = zlistx_new ();
    if (!due)
        return 0;
    zlistx_set_destructor (due, (zlistx_destructor_fn *) zstr_free);
    for (s_cand_t *c = zhashx_first (self->cands); c; c = zhashx_next (self->cands))
        if (now - c->since_ms >= (c->waits ? s_wait_ms (self) : self->cfg.watcher.settle_ms))
            zlistx_add_end (due, strdup (zhashx_cursor (self->cands)));
    for (char *path = zlistx_first (due); path; path = zlistx_next (due)) {
        s_cand_t *cand = zhashx_lookup (self->cands, path);
        struct stat st;
        if (!cand)
            continue;
        if (lstat (path, &st) != 0 || !S_ISREG (st.st_mode))
            zhashx_delete (self->cands, path);  // gone: nothing to report
        else if (cand->size != (int64_t) st.st_size || cand->mtime != s_mtime (&st))
            cand->size = (int64_t) st.st_size, cand->mtime = s_mtime (&st), cand->since_ms = now,
            cand->waits = 0;
        else
            s_settled (self, path, cand, &st, 0);
    }
    zlistx_destroy (&due);
    s_flush (self);
    s_arm (self);
    return 0;
}

// Whether the entry 'key' (item: an s_known_t in map 0, an s_cand_t in map
// 1) is to go.
typedef int (s_gone_fn) (watcher_t *self, int map, const char *key, void *item, const void *arg);

// Removes from 'known' and 'cands' every entry 'gone' says is to go.
static void
s_drop (watcher_t *self, s_gone_fn *gone, const void *arg)
{
    zhashx_t *maps[] = {self->known, self->cands};
    for (int m = 0; m < 2; m++) {
        zlistx_t *keys = zlistx_new ();
        if (!keys)
            return;
        zlistx_set_destructor (keys, (zlistx_destructor_fn *) zstr_free);
        for (void *v = zhashx_first (maps[m]); v; v = zhashx_next (maps[m]))
            if (gone (self, m, zhashx_cursor (maps[m]), v, arg))
                zlistx_add_end (keys, strdup (zhashx_cursor (maps[m])));
        for (char *key = zlistx_first (keys); key; key = zlistx_next (keys))
            zhashx_delete (maps[m], key);
        zlistx_destroy (&keys);
    }
}

// Under the directory 'arg'.
static int
s_under (watcher_t *self, int map, const char *key, void *item, const void *arg)
{
    (void) self, (void) map, (void) item;
    size_t len = strlen (arg);
    return strncmp (key, arg, len) == 0 && key[len] == '/';
}

// Not seen by the last scan.
static int
s_unseen (watcher_t *self, int map, const char *key, void *item, const void *arg)
{
    (void) key, (void) arg;
    return (map == 0 ? ((s_known_t *) item)->scan : ((s_cand_t *) item)->scan) != self->scan;
}

// Forgets 'path' and, if it was a directory, everything under it.
static void
s_forget (watcher_t *self, const char *path, int is_dir)
{
    zhashx_delete (self->known, path);
    zhashx_delete (self->cands, path);
    if (is_dir)
        s_drop (self, s_under, path);
}

// Poll mode, after a scan of the whole root: forgets the files it did not
// find (deleted or moved away), so memory follows the files present.
static void
s_sweep (watcher_t *self)
{
    s_drop (self, s_unseen, NULL);
}

static int s_watch_dir (watcher_t *self, const char *path, int depth);

// 1 the first time 'path' is left out, 0 after: a poll-mode scan, a
// rescan or a second event finds it again, and one line says it once.
static int
s_first_time (watcher_t *self, const char *path)
{
    if (zhashx_lookup (self->said, path))
        return 0;
    if (zhashx_size (self->said) < MAX_SAID)
        zhashx_insert (self->said, path, self);
    return 1;
}

// Says that the directory 'path', 'depth' levels below the root, is
// deeper than the watcher goes (MAX_DEPTH): one line, the limit named.
static void
s_too_deep (watcher_t *self, const char *path, int depth)
{
    char shown[UTIL_SHOWN];
    if (s_first_time (self, path))
        log_warning ("'%s' is %d directories below the root, over the %d the watcher "
                     "descends (its depth limit): not watched, its files not reported",
                     util_shorten (path, shown, sizeof shown), depth, MAX_DEPTH);
}

// Says that dir/name is longer than a path may be: neither the watcher
// nor an agent could open it by its path, so it is left out here, at the
// first door, rather than recorded and never processed.
static void
s_too_long (watcher_t *self, const char *dir, const char *name)
{
    char whole[PATH_MAX + NAME_MAX + 2], shown[UTIL_SHOWN];
    snprintf (whole, sizeof whole, "%s/%s", dir, name);
    if (s_first_time (self, whole))
        log_warning ("'%s' is %zu bytes long, over the %d PATH_MAX allows: not watched nor "
                     "reported",
                     util_shorten (whole, shown, sizeof shown), strlen (dir) + 1 + strlen (name),
                     PATH_MAX - 1);
}

// Walks 'path': every regular file below the root's own level goes to
// s_consider and, in inotify mode, every directory is watched. depth 0 is
// the root; directories more than MAX_DEPTH below it are logged and
// skipped, as the live watcher skips them.
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
            s_too_long (self, path, de->d_name);
            continue;
        }
        struct stat st;
        if (lstat (child, &st) != 0)
            continue;
        if (S_ISDIR (st.st_mode)) {
            if (depth >= MAX_DEPTH) {  // symlinks are not followed; depth bounds the rest
                s_too_deep (self, child, depth + 1);
                continue;
            }
            if (!self->poll)
                s_watch_dir (self, child, depth + 1);
            s_scan (self, child, depth + 1);
        }
        else if (S_ISREG (st.st_mode) && depth > 0)
            s_consider (self, child, &st, self->poll ? SEEN_POLL : SEEN_SCAN);
    }
    closedir (dir);
}

static int
s_watch_dir (watcher_t *self, const char *path, int depth)
{
    // A directory at any depth may later have a file system mounted on it
    // (a RAM disk for an experiment, doc/storage.md; an NFS or CIFS share
    // for a camera's day): the watch would stay on the directory below.
    // s_remounts compares what the path is now with this.
    struct stat st;
    if (depth >= 1 && stat (path, &st) == 0) {
        char id[64];
        snprintf (id, sizeof id, "%llu:%llu", (unsigned long long) st.st_dev,
                  (unsigned long long) st.st_ino);
        zhashx_update (self->tops, path, strdup (id));
    }
    int wd = inotify_add_watch (self->fd, path,
                                IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_ATTRIB | IN_DELETE
                                    | IN_MOVED_FROM | IN_DELETE_SELF | IN_ONLYDIR
                                    | IN_DONT_FOLLOW);
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
        if ((size_t) snprintf (path, sizeof path, "%s/%s", dir, ev->name) >= sizeof path) {
            if (!(ev->mask & (IN_DELETE | IN_MOVED_FROM)))
                s_too_long (self, dir, ev->name);
            continue;
        }
        if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
            s_forget (self, path, (ev->mask & IN_ISDIR) != 0);
            continue;
        }
        struct stat st;
        if (lstat (path, &st) != 0)
            continue;
        int depth = 0;
        for (const char *c = path + strlen (self->root); *c; c++)
            depth += *c == '/';
        if (S_ISDIR (st.st_mode) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
            if (depth > MAX_DEPTH) {
                s_too_deep (self, path, depth);
                continue;
            }
            // Files may land before the watch is in place: scan it too.
            s_watch_dir (self, path, depth);
            s_scan (self, path, depth);
        }
        else if (S_ISREG (st.st_mode)) {
            // A close after writing, a rename and a hard link (a new name
            // for a file written elsewhere: no close comes) may make a file
            // complete at once; a creation (touch) or an attribute change
            // (touch, utime) only starts its settle time.
            int closed = (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))
                         || ((ev->mask & IN_CREATE) && st.st_nlink > 1);
            s_consider (self, path, &st, closed ? SEEN_CLOSED : SEEN_CHANGED);
        }
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
    self->heard_ms = zclock_mono ();
    if (self->silent)
        log_notice ("the broker at '%s' answers again", self->cfg.watcher.broker);
    self->silent = 0;
    if (rc != 0) {
        if (rc == -1)
            log_warning ("from the broker at '%s': %s", self->cfg.watcher.broker, err);
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
// a file gone since is dropped (there is nothing left to process), one
// changed since it was found complete is looked at afresh.
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
        s_known_t found = {-1, -1, 0};
        s_known_t *w = zhashx_lookup (self->waiting, copy);
        if (w)
            found = *w;
        zhashx_delete (self->waiting, copy);
        struct stat st;
        if (lstat (copy, &st) != 0 || !S_ISREG (st.st_mode))
            continue;
        if (found.size == (int64_t) st.st_size && found.mtime == s_mtime (&st))
            s_report (self, copy, &st);
        else
            s_consider (self, copy, &st, SEEN_CHANGED);
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
    int64_t silent_ms = 10 * (int64_t) self->cfg.watcher.resend_ms;
    if (silent_ms < SILENT_MIN_MS)
        silent_ms = SILENT_MIN_MS;
    if (!self->silent && zhashx_size (self->pending) > 0 && now - self->heard_ms > silent_ms) {
        log_warning ("the broker at '%s' is silent: %zu event(s) unacknowledged for %lld ms; "
                     "resending%s",
                     self->cfg.watcher.broker, zhashx_size (self->pending),
                     (long long) (now - self->heard_ms), secure_hint (&self->cfg));
        self->silent = 1;
    }
    for (s_event_t *ev = zhashx_first (self->pending); ev; ev = zhashx_next (self->pending))
        if (now >= ev->resend_ms) {
            s_out (self, &ev->msg);
            ev->backoff_ms = ev->backoff_ms * 2 > MAX_RESEND_MS ? MAX_RESEND_MS : ev->backoff_ms * 2;
            ev->resend_ms = now + ev->backoff_ms;
        }
    s_flush (self);
    return 0;
}

// Watched directories that are no longer what was watched (a file system
// mounted on one, at any depth, or unmounted) are watched and scanned
// again. One stat() per watched directory every 500 ms: about a
// microsecond each from the dentry cache, 10 ms for 10,000 directories.
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
        unsigned long long was = strtoull (zhashx_lookup (self->tops, path), NULL, 10);
        zhashx_delete (self->tops, path);
        struct stat st;
        if (lstat (path, &st) == 0 && S_ISDIR (st.st_mode)) {
            int depth = 0;
            for (const char *c = path + strlen (self->root); *c; c++)
                depth += *c == '/';
            if ((unsigned long long) st.st_dev != was)
                log_notice ("'%s' is another file system now: watching it afresh", path);
            else
                log_info ("'%s' is another directory now: watching it afresh", path);
            s_watch_dir (self, path, depth);
            s_scan (self, path, depth);
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
    self->scan++;
    s_scan (self, self->root, 0);
    s_sweep (self);
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
    self->known = zhashx_new ();
    self->cands = zhashx_new ();
    self->timer = -1;
    self->pending = zhashx_new ();
    self->backlog = zlistx_new ();
    self->waiting = zhashx_new ();
    self->said = zhashx_new ();
    self->loop = zloop_new ();
    self->out = proto_batch_new ();
    if (!self->dirs || !self->tops || !self->known || !self->cands || !self->pending || !self->backlog || !self->waiting
        || !self->loop || !self->out) {
        snprintf (err, errlen, "cannot start the watcher: out of memory");
        watcher_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->dirs, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_destructor (self->tops, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_destructor (self->known, (zhashx_destructor_fn *) s_free);
    zhashx_set_destructor (self->cands, (zhashx_destructor_fn *) s_free);
    zhashx_set_destructor (self->waiting, (zhashx_destructor_fn *) s_free);
    zhashx_set_destructor (self->pending, (zhashx_destructor_fn *) s_event_destroy);
    zlistx_set_destructor (self->backlog, (zlistx_destructor_fn *) zstr_free);
    const char *endpoint = config_connect (cfg, "watcher/broker", err, errlen);
    self->broker = endpoint ? secure_connect (ZMQ_DEALER, cfg, endpoint, "the broker", 1000, err,
                                              errlen, NULL)
                            : NULL;
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
    free (self->fd_watch);
    zsock_destroy (&self->broker);
    proto_batch_destroy (&self->out);
    zhashx_destroy (&self->dirs);
    zhashx_destroy (&self->tops);
    zhashx_destroy (&self->known);
    zhashx_destroy (&self->cands);
    zhashx_destroy (&self->pending);
    zlistx_destroy (&self->backlog);
    zhashx_destroy (&self->waiting);
    zhashx_destroy (&self->said);
    free (self);
    *self_p = NULL;
}

int
watcher_run (watcher_t *self)
{
    // Files written while no watcher ran: the broker drops those it has.
    self->scan++;
    s_scan (self, self->root, 0);
    s_flush (self);
    // Said once every directory is watched (and its identity kept for the
    // remount check): a change after this line is seen.
    log_notice ("watching '%s' (%s), reporting to %s", self->root,
                self->poll ? "polling" : "inotify", self->cfg.watcher.broker);
    zloop_start (self->loop);
    log_notice ("stopped: %lld event(s) sent, %lld acknowledged, %zu unacknowledged, %zu "
                "file(s) not sent yet",
                (long long) self->sent, (long long) self->acked, zhashx_size (self->pending),
                zlistx_size (self->backlog));
    return 0;
}

// ---------------------------------------------------------------------------
// Reload (SIGHUP, 'systemctl reload')

// Appends ", name" to list (size bytes) when differs.
static void
s_differs (char *list, size_t size, int differs, const char *name)
{
    if (differs)
        snprintf (list + strlen (list), size - strlen (list), "%s%s", *list ? ", " : "", name);
}

int
watcher_reload (watcher_t *self, const config_t *cfg)
{
    const config_t *old = &self->cfg;
    char applied[512] = "", restart[512] = "";
    s_differs (applied, sizeof applied, strcmp (old->log.level, cfg->log.level) != 0, "log/level");
    s_differs (applied, sizeof applied, strcmp (old->watcher.ignore, cfg->watcher.ignore) != 0,
               "watcher/ignore");
    s_differs (applied, sizeof applied, old->watcher.settle_ms != cfg->watcher.settle_ms,
               "watcher/settle_ms");
    s_differs (applied, sizeof applied, old->watcher.resend_ms != cfg->watcher.resend_ms,
               "watcher/resend_ms");
    s_differs (applied, sizeof applied, old->watcher.max_pending != cfg->watcher.max_pending,
               "watcher/max_pending");
    s_differs (restart, sizeof restart, strcmp (old->watcher.root, cfg->watcher.root) != 0,
               "watcher/root");
    s_differs (restart, sizeof restart, strcmp (old->watcher.mode, cfg->watcher.mode) != 0,
               "watcher/mode");
    s_differs (restart, sizeof restart, old->watcher.poll_ms != cfg->watcher.poll_ms,
               "watcher/poll_ms");
    s_differs (restart, sizeof restart, strcmp (old->watcher.broker, cfg->watcher.broker) != 0,
               "watcher/broker");
    s_differs (restart, sizeof restart,
               memcmp (&old->security, &cfg->security, sizeof cfg->security) != 0, "security");
    // Read where they are used: the next name, settle and resend see them.
    memcpy (self->cfg.watcher.ignore, cfg->watcher.ignore, sizeof cfg->watcher.ignore);
    self->cfg.watcher.settle_ms = cfg->watcher.settle_ms;
    self->cfg.watcher.resend_ms = cfg->watcher.resend_ms;
    self->cfg.watcher.max_pending = cfg->watcher.max_pending;
    memcpy (self->cfg.log.level, cfg->log.level, sizeof cfg->log.level);
    log_notice ("reload: applied %s", *applied ? applied : "no change");
    if (*restart)
        log_warning ("reload: %s changed: read at start only, takes effect after a restart "
                     "(systemctl restart pivfarm-watcher)",
                     restart);
    return 0;
}

static int
s_reload (void *owner, const config_t *cfg)
{
    return watcher_reload (owner, cfg);
}

int
watcher_watch_hangup (watcher_t *self, int fd)
{
    void *watch = daemon_watch_hangup (self->loop, fd, s_reload, self);
    if (!watch)
        return -1;
    free (self->fd_watch);
    self->fd_watch = watch;
    return 0;
}
