// broker.c — the broker's reactor. Everything it tells a peer about state
// (ACK of a file event, RECORDED for a result, a TASK for a new pair) goes
// out only after the commit that holds that state: a crash can then lose
// nothing that was acknowledged, and no pair id is ever handed out twice.
// The stages (ingest.c, dispatch.c, results.c, storage.c, peers.c,
// clocks.c, control.c) hold the rest, each with its own state, and talk
// back through their host structs; doc/design.md, "broker/", says which
// holds what.

#include "broker/broker.h"
#include "broker/clocks.h"
#include "broker/control.h"
#include "broker/dispatch.h"
#include "broker/ensemble.h"
#include "broker/ingest.h"
#include "broker/peers.h"
#include "broker/publish.h"
#include "broker/results.h"
#include "broker/settings.h"
#include "broker/stages.h"
#include "broker/stats.h"
#include "broker/storage.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/secure.h"
#include "common/util.h"
#include "store/store.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Messages queued per socket and peer, each way (ZeroMQ's default, made
// explicit): with ZMQ_MAXMSGSIZE, what a peer can make the broker hold. A
// peer beyond it is pushed back (TCP), and what is dropped on the way out
// is resent by the protocol (ACK, RECORDED); agents stay below it by credit.
#define HWM 1000

// Answers that wait for the commit of the open transaction: the ACKs of
// its FILE events (a sequence number each) or the RECORDED of its results
// (a pair and an attempt each), in arrival order, each with the peer to
// answer (an index into 'who': a routing id is kept once for the entries
// of a peer that come close together). Arrays that grow, not allocations
// an answer.
typedef struct {
    uint64_t *a;       // sequence number, or pair
    uint32_t *b;       // 0, or attempt
    uint32_t *owner;   // index in 'who' of the peer
    size_t n, room;
    zframe_t **who;    // peers' routing ids (owned)
    size_t nwho, whoroom;
} s_replies_t;

// What the reactor itself owns: the sockets and the loop, the store and
// the commit's state (what waits for it, whether the last one failed), and
// the stages, each with its own state (doc/design.md, "broker/").
struct _broker_t {
    config_t cfg;             // configuration (a reload changes some keys in place)
    char settings[512];       // PIV settings of the configuration
    int64_t started_ns;       // start time
    store_t *store;           // the durable state
    zloop_t *loop;            // the reactor
    void *fd_watch;           // broker_watch_hangup's watch (SIGHUP), freed with the broker
    zsock_t *ingest_sock;     // ROUTER: watchers
    zsock_t *work_sock;       // ROUTER: agents
    zsock_t *control_sock;    // ROUTER: pivctl, the status page
    zsock_t *publish_sock;    // PUB: results, state
    zlistx_t *fresh;          // task_t of the open transaction: queued after commit
    s_replies_t acks;         // FILE events acknowledged after the next commit
    s_replies_t recorded;     // results (and failures) said RECORDED after it
    int store_failed;         // the last commit failed: acknowledge nothing
    char store_why[512];      // why it failed, for the status
    peers_t *peers;           // who may do what: keys, roles, refusals logged
    ingest_t *ingest;         // files, pairs, experiments in memory
    clocks_t *clocks;         // peers' clocks
    results_t *results;       // counts, feedback, result topics
    dispatch_t *dispatch;     // agents, queue, retry delays, deadlines
    storage_t *storage;       // allocations, archive, guard
    control_t *control;       // the command table
    stats_t *stats;           // run statistics, calibrations
    ensemble_t *ensemble;     // ensemble correlation jobs
    int rebuild_timer;        // the statistics' rebuild runs (its timer id), or 0
    int64_t busy_since_ns;    // another process holds the store's write lock since, or 0
    int64_t beat_ns;          // when the last heartbeat ran (a held loop shows as a gap)
    int64_t busy_logged_ns;   // when that was last logged
    int probe_timer;          // asks the busy store again every PROBE_MS (its id), or 0
    int ingest_paused;        // the ingest socket is not read: the store takes nothing
    char *gone;               // the store's files were taken away: why, what was saved and
                              // what to do (NULL while they are in place)
    int rescue_timer;         // saves what the store held, a slice at a time, or 0
    char rescued[4096];       // the file it is saved into
    char why[1536];           // store_error's answer
};

// Queues an answer (a, b) to 'identity' for after the next commit. 0, or
// -1 without memory (not answered: the peer sends again).
static int
s_reply_add (s_replies_t *r, zframe_t *identity, uint64_t a, uint32_t b)
{
    if (r->n == r->room) {
        size_t room = r->room ? 2 * r->room : 1024;
        uint64_t *pa = realloc (r->a, room * sizeof *pa);
        if (pa)
            r->a = pa;
        uint32_t *pb = pa ? realloc (r->b, room * sizeof *pb) : NULL;
        if (pb)
            r->b = pb;
        uint32_t *po = pb ? realloc (r->owner, room * sizeof *po) : NULL;
        if (!po)
            return -1;
        r->owner = po, r->room = room;
    }
    // The peer among the last few kept (agents' results interleave).
    size_t w = r->nwho, last = r->nwho > 8 ? r->nwho - 8 : 0;
    while (w > last && !zframe_eq (r->who[w - 1], identity))
        w--;
    if (w == last) {
        if (r->nwho == r->whoroom) {
            size_t room = r->whoroom ? 2 * r->whoroom : 64;
            zframe_t **who = realloc (r->who, room * sizeof *who);
            if (!who)
                return -1;
            r->who = who, r->whoroom = room;
        }
        if (!(r->who[r->nwho] = zframe_dup (identity)))
            return -1;
        w = ++r->nwho;
    }
    r->a[r->n] = a;
    r->b[r->n] = b;
    r->owner[r->n++] = (uint32_t) (w - 1);
    return 0;
}

// Forgets the answers queued (sent, or dropped with a failed commit).
static void
s_replies_purge (s_replies_t *r)
{
    for (size_t i = 0; i < r->nwho; i++)
        zframe_destroy (&r->who[i]);
    r->n = r->nwho = 0;
}

static void
s_replies_free (s_replies_t *r)
{
    s_replies_purge (r);
    free (r->a), free (r->b), free (r->owner), free (r->who);
    memset (r, 0, sizeof *r);
}

// Sends the ACKs queued, those of one watcher together, PROTO_MAX_ACK
// sequence numbers a message. A message a watcher cannot take now is
// dropped: it resends its events.
static void
s_acks_send (s_replies_t *r, zsock_t *ingest)
{
    proto_msg_t ack = {.command = PROTO_ACK};
    uint64_t seqs[PROTO_MAX_ACK];
    ack.seqs = seqs;
    for (size_t i = 0; i < r->n; i++) {
        if (ack.count && (r->owner[i] != r->owner[i - 1] || ack.count == PROTO_MAX_ACK)) {
            proto_send (&ack, r->who[r->owner[i - 1]], ingest);
            ack.count = 0;
        }
        seqs[ack.count++] = r->a[i];
    }
    if (ack.count)
        proto_send (&ack, r->who[r->owner[r->n - 1]], ingest);
    s_replies_purge (r);
}

// ---------------------------------------------------------------------------
// Commit, then tell

static int s_load_pending (void *arg, int64_t pair, const char *experiment, const char *stem,
                           const char *name_a, const char *name_b, int attempts);

// One slice of the statistics' rebuild every REBUILD_MS, until it is done:
// the reactor serves between slices. stats.c bounds a slice to 128
// results and 2 ms, so the rebuild takes at most a fifth of the reactor:
// a store upgraded with a million results not counted (a v4 file) once
// halved the dispatch of live work while a slice ran every millisecond
// (bench_farm section 2: history / empty 0.51).
#define REBUILD_MS 10
static int
s_rebuild_timer (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = arg;
    if (stats_rebuild_step (self->stats) <= 0) {
        zloop_timer_end (loop, timer_id);
        self->rebuild_timer = 0;
    }
    return 0;
}

static void
s_rebuild_start (broker_t *self)
{
    if (!self->rebuild_timer && self->loop)
        self->rebuild_timer = zloop_timer (self->loop, REBUILD_MS, 0, s_rebuild_timer, self);
}

// ---------------------------------------------------------------------------
// The store under faults: another process holding its write lock (it
// waits, the reactor does not), its files taken away (it stops, saves what
// it holds, and says what to do). doc/storage.md, "The store's own files".

#define PROBE_MS 100          // a busy store is asked again this often
#define BUSY_LOG_EVERY_S 10   // and said to be busy in the log this often
#define FILES_CHECK_MS 500    // the store's files are checked against their paths
#define RESCUE_PAGES 2048     // pages copied a slice when saving a lost store (8 MiB)

static int s_on_ingest (zloop_t *loop, zsock_t *reader, void *arg);
static int s_store_ready (broker_t *self);
static int s_commit (broker_t *self);

// Stops reading the ingest socket: FILE events wait in its queue (bounded
// by its high-water mark; watchers keep theirs and send again), until the
// store takes them.
static void
s_ingest_pause (broker_t *self)
{
    if (!self->ingest_paused && self->loop && self->ingest_sock) {
        zloop_reader_end (self->loop, self->ingest_sock);
        self->ingest_paused = 1;
    }
}

static void
s_ingest_resume (broker_t *self)
{
    if (self->ingest_paused && self->loop && self->ingest_sock && !self->gone) {
        zloop_reader (self->loop, self->ingest_sock, s_on_ingest, self);
        self->ingest_paused = 0;
    }
}

static int
s_probe (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    if (s_store_ready (self))
        s_commit (self);
    else if (self->busy_since_ns) {
        int64_t now = util_time_ns ();
        if (now - self->busy_logged_ns >= (int64_t) BUSY_LOG_EVERY_S * 1000000000) {
            size_t bytes, parked = dispatch_parked (self->dispatch, &bytes);
            log_warning ("store '%s' still locked by another process, for %.0f s: %zu answer(s) "
                         "of agents (%zu MiB) and %d dispatch(es) wait in memory",
                         self->cfg.broker.store, (now - self->busy_since_ns) / 1e9, parked,
                         bytes >> 20, store_deferred (self->store));
            self->busy_logged_ns = now;
        }
    }
    return 0;
}

// The store was found locked by another process: what needs a write waits.
static void
s_store_busy (broker_t *self)
{
    if (self->busy_since_ns)
        return;
    self->busy_since_ns = store_busy_since (self->store);
    if (!self->busy_since_ns)
        self->busy_since_ns = util_time_ns ();
    self->busy_logged_ns = util_time_ns ();
    log_warning ("store '%s' is locked by another process: file events and results wait "
                 "until it answers; control, heartbeats and dispatch go on",
                 self->cfg.broker.store);
    s_ingest_pause (self);
    dispatch_park (self->dispatch);
    if (!self->probe_timer && self->loop)
        self->probe_timer = zloop_timer (self->loop, PROBE_MS, 0, s_probe, self);
}

// The store answers again (the group is open): what waited is written.
static void
s_store_answers (broker_t *self)
{
    int64_t busy_ns = util_time_ns () - self->busy_since_ns;
    self->busy_since_ns = 0;
    if (self->probe_timer && self->loop)
        zloop_timer_end (self->loop, self->probe_timer);
    self->probe_timer = 0;
    size_t dropped = 0, handled = dispatch_unpark (self->dispatch, busy_ns, &dropped);
    log_notice ("store '%s' answers again after %.1f s: %zu answer(s) of agents written%s",
                self->cfg.broker.store, busy_ns / 1e9, handled,
                dropped ? " (more were dropped past the bound: their agents send them again)"
                        : "");
    s_ingest_resume (self);
}

// Whether the group is open for the messages about to be handled: 1; 0
// when the store takes nothing now (busy: what needs a write waits; its
// files gone: nothing is taken). Opening it takes the write lock until the
// commit, so that no write of the batch finds the store locked half way.
static int
s_store_ready (broker_t *self)
{
    if (self->gone)
        return 0;
    if (store_in_group (self->store))
        return 1;
    if (store_begin (self->store) == 0) {
        if (self->busy_since_ns)
            s_store_answers (self);
        return 1;
    }
    if (store_busy_since (self->store))
        s_store_busy (self);
    return 0;
}

static int
s_rescue_timer (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    char err[1024];
    int rc = store_rescue_step (self->store, RESCUE_PAGES, err, sizeof err);
    if (rc == 0)
        return 0;
    zloop_timer_end (self->loop, self->rescue_timer);
    self->rescue_timer = 0;
    char *gone = NULL;
    if (rc < 0) {
        log_error ("%s", err);
        if (asprintf (&gone, "%s; saving what it held failed (%s): stop the broker and copy its "
                             "files from /proc/%d/fd before anything else",
                      store_detached (self->store), err, (int) getpid ()) < 0)
            gone = NULL;
    }
    else {
        const char *name = self->rescued;
        if (asprintf (&gone,
                      "%s; what it held is saved in '%s': stop the broker, rm -f '%s-wal' "
                      "'%s-shm', move '%s' to '%s' and start it again (nothing acknowledged is "
                      "lost: watchers and agents send again what was not)",
                      store_detached (self->store), name, self->cfg.broker.store,
                      self->cfg.broker.store, name, self->cfg.broker.store) < 0)
            gone = NULL;
        log_notice ("store: %s", gone ? gone : "saved");
    }
    if (gone) {
        free (self->gone);
        self->gone = gone;
    }
    return 0;
}

// The store's files are not the ones at their paths any more ('why'): no
// commit goes into files nobody will find again, and nothing more is
// acknowledged; what the store held is saved, through the descriptors it
// still has, into a file it names.
static void
s_store_gone (broker_t *self, const char *why)
{
    store_detach (self->store, why);
    s_commit (self);  // reports the group rolled back: nothing of it is answered
    s_ingest_pause (self);
    char err[1024];
    char *gone = NULL;
    if (store_rescue_begin (self->store, self->rescued, sizeof self->rescued, err, sizeof err)
        == 0) {
        if (asprintf (&gone, "%s; nothing is acknowledged since; saving it into '%s'", why,
                      self->rescued)
            < 0)
            gone = NULL;
        self->rescue_timer = zloop_timer (self->loop, 1, 0, s_rescue_timer, self);
    }
    else if (asprintf (&gone, "%s; nothing is acknowledged since; %s", why, err) < 0)
        gone = NULL;
    self->gone = gone ? gone : strdup (why);
    log_error ("store: %s", self->gone ? self->gone : why);
}

static int
s_files_timer (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    if (self->gone)
        return 0;
    char why[1024];
    int rc = store_check_files (self->store, why, sizeof why);
    if (rc == 1)
        s_store_gone (self, why);
    else if (rc == 2)
        log_warning ("store: %s", why);
    return 0;
}

// The statistics' checkpoint (broker/stats_ms) of the experiments whose
// save is due, in the open group.
static int
s_stats_timer (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    if (s_store_ready (self))
        stats_save_due (self->stats, util_time_ns ());
    return 0;
}

// After a failed commit the broker's memory runs ahead of the store: the
// pairing rules consumed files, the experiments may hold ids, the queue
// pairs, none of which were committed. Start again from what the store
// holds (experiments stay, as tasks out with agents point to them; their
// ids are looked up again).
static void
s_resync (broker_t *self)
{
    ingest_resync (self->ingest);
    dispatch_clear (self->dispatch);
    zlistx_purge (self->fresh);
    store_pairs_in_state (self->store, STORE_PENDING, s_load_pending, self);
    // The statistics counted results that are gone: counted again from
    // what the store holds.
    stats_resync (self->stats);
    s_rebuild_start (self);
}

// Commits the open transaction; then sends what waited for it and makes the
// pairs it created dispatchable. On failure nothing is sent: watchers resend
// their events, agents their results, and the broker says why in its log.
static int
s_commit (broker_t *self)
{
    char err[512];
    int writes = store_uncommitted (self->store);
    if (writes == 0 && self->recorded.n == 0 && self->acks.n == 0
        && zlistx_size (self->fresh) == 0 && !store_in_group (self->store))
        return 0;
    if (store_commit (self->store, err, sizeof err) != 0) {
        if (!self->store_failed)
            log_error ("cannot commit: %s; acknowledging nothing until it can", err);
        self->store_failed = 1;
        snprintf (self->store_why, sizeof self->store_why, "%s", err);
        // What waited for this commit is dropped: its senders will resend.
        s_replies_purge (&self->recorded);
        s_replies_purge (&self->acks);
        s_resync (self);
        return -1;
    }
    // Only a commit that wrote says the store takes writes again (an empty
    // group commits on a full disk too).
    if (self->store_failed && writes > 0) {
        log_notice ("commits work again");
        self->store_failed = 0;
    }
    s_acks_send (&self->acks, self->ingest_sock);
    // RECORDED goes with the agent's next TASKs (dispatch_now); one the
    // agent cannot take now is dropped: it resends its result.
    for (size_t i = 0; i < self->recorded.n; i++) {
        proto_msg_t ok = {.command = PROTO_RECORDED,
                          .pair = self->recorded.a[i],
                          .attempt = self->recorded.b[i]};
        dispatch_recorded (self->dispatch, self->recorded.who[self->recorded.owner[i]], &ok);
    }
    s_replies_purge (&self->recorded);
    task_t *task;
    int64_t now = util_time_ns ();
    while ((task = zlistx_detach (self->fresh, NULL)))
        if (task->not_before_ns > now)
            dispatch_backoff_add (self->dispatch, task, now);  // it FAILED: retried after its delay
        else  // a retry is never sampled out
            dispatch_enqueue (self->dispatch, task, task->attempt == 0);
    dispatch_now (self->dispatch);
    return 0;
}

static int
s_commit_timer (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    s_commit (self);
    if (stats_rebuild_wanted (self->stats))
        s_rebuild_start (self);
    return 0;
}

// ---------------------------------------------------------------------------
// Ingest: FILE events from watchers

static void
s_on_file (broker_t *self, zframe_t *identity, proto_msg_t *msg)
{
    if (ingest_file_event (self->ingest, self->clocks, msg) != 0)
        return;
    s_reply_add (&self->acks, identity, msg->seq, 0);
}

static int s_ingest_one (broker_t *self, zsock_t *reader);

// Up to this many messages are read per wake-up of the reactor: under load
// one poll per message would cost more than the message.
#define BATCH 256

// Handles up to BATCH waiting messages of 'reader' with 'one' (0: one was
// read, -1: none waits), then commits early if the group has grown large.
// The reader's receive timeout is 0 (s_bind): a read that finds nothing
// says so at once, and a message waiting costs no system call, where
// asking ZMQ_EVENTS before each read cost two (poll, getpid) a message.
static void
s_drain (broker_t *self, zsock_t *reader, int (*one) (broker_t *, zsock_t *))
{
    for (int i = 0; i < BATCH && one (self, reader) == 0; i++)
        ;
    if (store_uncommitted (self->store) > 5000)
        s_commit (self);
}

static int
s_on_ingest (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    broker_t *self = arg;
    if (!s_store_ready (self)) {
        s_ingest_pause (self);  // read again once the store answers
        return 0;
    }
    s_drain (self, reader, s_ingest_one);
    return 0;
}

// What a watcher sent that is not taken, with the watcher's identity.
static void
s_ingest_warn (broker_t *self, zframe_t *identity, const char *why)
{
    char *peer = identity ? zframe_strhex (identity) : NULL;
    peers_refused (self->peers, "ingest: from watcher %s: %s", peer ? peer : "?", why);
    free (peer);
}

static int
s_ingest_one (broker_t *self, zsock_t *reader)
{
    zframe_t *identity = NULL;
    proto_msg_t msg;
    char err[512], key[64];
    int rc = proto_recv_from (reader, &identity, key, sizeof key, &msg, err, sizeof err);
    if (rc == -2) {
        proto_msg_release (&msg);
        zframe_destroy (&identity);
        return -1;  // nothing waits (or interrupted)
    }
    if (rc == -1)
        s_ingest_warn (self, identity, err);
    // With CURVE, only keys of clients/watchers/ feed the farm.
    if (rc == 0 && !peers_allowed (self->peers, key, BROKER_ROLE_WATCHER)) {
        // Once per key: a revoked watcher resends for as long as it runs.
        char *peer = identity ? zframe_strhex (identity) : NULL;
        peers_refused_key (self->peers, "ingest", key, util_time_ns (),
                           "ingest: from watcher %s: %s refused: key %s is not a watcher's "
                           "(clients/watchers/); put its certificate there if it should feed "
                           "files, else stop the watcher that uses it (its further messages "
                           "are counted, once a minute)",
                           peer ? peer : "?", proto_command_name (msg.command),
                           *key ? key : "(none)");
        free (peer);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < proto_count (&msg); i++) {
        proto_msg_t *one = proto_at (&msg, i);
        if (one->command == PROTO_FILE)
            s_on_file (self, identity, one);
        else {
            snprintf (err, sizeof err, "unexpected %s", proto_command_name (one->command));
            s_ingest_warn (self, identity, err);
        }
    }
    proto_msg_release (&msg);
    zframe_destroy (&identity);
    return 0;
}

// ---------------------------------------------------------------------------
// Peers: who may do what (doc/security.md, "Threat model")

static int
s_work_one (broker_t *self, zsock_t *reader)
{
    return dispatch_work_one (self->dispatch, reader);
}

static int
s_on_work (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    broker_t *self = arg;
    // Whoever subscribed before these results came gets them.
    publish_subscriptions (self->publish_sock);
    s_store_ready (self);  // or answers wait (dispatch_park)
    s_drain (self, reader, s_work_one);
    dispatch_now (self->dispatch);
    return 0;
}

static int s_dispatch_held (void *arg);

static int
s_heartbeat (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    // Held past two heartbeats (a long vacuum or purge, SIGSTOP, a frozen
    // VM), the broker read nothing: nobody is judged for that time.
    int64_t now = util_time_ns (), interval = (int64_t) self->cfg.broker.heartbeat_ms * 1000000;
    if (self->beat_ns && now - self->beat_ns > 2 * interval) {
        int64_t held = now - self->beat_ns - interval;
        log_warning ("the broker was held %.1f s (nothing read or sent meanwhile): agents' "
                     "silence and tasks' deadlines are counted from now",
                     held / 1e9);
        dispatch_held (self->dispatch, held);
        ensemble_held (self->ensemble, held);
    }
    self->beat_ns = now;
    s_store_ready (self);
    dispatch_heartbeat (self->dispatch, util_time_ns ());
    ensemble_deadlines (self->ensemble, util_time_ns ());
    if (!s_dispatch_held (self))
        ensemble_tick (self->ensemble, ingest_experiments (self->ingest), util_time_ns ());
    dispatch_now (self->dispatch);
    peers_tick (self->peers, util_time_ns ());
    return 0;
}

// ---------------------------------------------------------------------------
// Start-up

static int
s_load_pending (void *arg, int64_t pair, const char *experiment, const char *stem,
                const char *name_a, const char *name_b, int attempts)
{
    (void) attempts;
    broker_t *self = arg;
    exp_t *exp = ingest_experiment (self->ingest, experiment, util_time_ns ());
    task_t *task = ingest_task_of (self->store, exp, pair, stem, name_a, name_b);
    if (!task)
        return -1;
    task->closed_ns = store_pair_closed (self->store, pair);  // its frame's mtime
    dispatch_enqueue (self->dispatch, task, 0);
    return 0;
}

// A socket bound to endpoint; a CURVE server with cert when cert is not NULL.
static zsock_t *
s_bind (int type, const char *endpoint, zcert_t *cert, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new (type);
    if (!sock) {
        snprintf (err, errlen, "cannot make a socket for '%s'", endpoint);
        return NULL;
    }
    zsock_set_maxmsgsize (sock, PROTO_MAX_MESSAGE);
    zsock_set_sndhwm (sock, HWM);
    zsock_set_rcvhwm (sock, HWM);
    zsock_set_linger (sock, 0);
    // A ROUTER that cannot deliver says so (proto_send fails) instead of
    // dropping the message: a TASK lost in silence would leave its pair
    // dispatched to an agent that never got it.
    if (type == ZMQ_ROUTER)
        zsock_set_router_mandatory (sock, 1);
    if (cert)
        secure_server (sock, cert);
    if (zsock_bind (sock, "%s", endpoint) < 0) {
        snprintf (err, errlen, "cannot bind '%s': %s", endpoint, zmq_strerror (zmq_errno ()));
        zsock_destroy (&sock);
    }
    return sock;
}

// What status reads of the reactor (stages_t): why the store takes nothing
// now, if it does not.
static const char *
s_store_error (void *arg)
{
    broker_t *self = arg;
    if (self->gone)
        return self->gone;
    if (self->busy_since_ns) {
        size_t bytes, parked = dispatch_parked (self->dispatch, &bytes);
        snprintf (self->why, sizeof self->why,
                  "store busy for %.0f s (locked by another process): file events, %zu answer(s) "
                  "of agents (%zu MiB) and %d dispatch(es) wait for it",
                  (util_time_ns () - self->busy_since_ns) / 1e9, parked, bytes >> 20,
                  store_deferred (self->store));
        return self->why;
    }
    return self->store_failed ? self->store_why : NULL;
}

static const char *
s_store_state (void *arg)
{
    broker_t *self = arg;
    return self->gone             ? "lost"
           : self->busy_since_ns  ? "busy"
           : self->store_failed   ? "failing"
                                  : "ok";
}

// The stages, as status and control reach them.
static void
s_stages (broker_t *self, stages_t *stages)
{
    *stages = (stages_t) {.cfg = &self->cfg,
                          .store = self->store,
                          .ingest = self->ingest,
                          .dispatch = self->dispatch,
                          .results = self->results,
                          .storage = self->storage,
                          .stats = self->stats,
                          .ensemble = self->ensemble,
                          .started_ns = self->started_ns,
                          .arg = self,
                          .store_error = s_store_error,
                          .store_state = s_store_state};
}

// Subscriptions arriving on the publish socket (an XPUB).
static int
s_on_publish (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop, (void) arg;
    publish_subscriptions (reader);
    return 0;
}

static int
s_on_control (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    broker_t *self = arg;
    control_on_request (self->control, reader);
    return 0;
}

// What the storage stage asks of the reactor (storage_host_t).
static int
s_storage_commit (void *arg)
{
    return s_commit (arg);
}

static void
s_storage_dispatch (void *arg)
{
    broker_t *self = arg;
    dispatch_now (self->dispatch);
}

// What the dispatch stage asks of the reactor (dispatch_host_t).
static void
s_dispatch_after (void *arg, zframe_t *identity, proto_msg_t *msg)
{
    // RECORDED: its pair and attempt are all that is kept.
    broker_t *self = arg;
    s_reply_add (&self->recorded, identity, msg->pair, msg->attempt);
    proto_msg_release (msg);
}

static int
s_dispatch_held (void *arg)
{
    broker_t *self = arg;
    // The free-space guard holds new work back while a volume it writes to
    // is critically full (doc/storage.md); tasks out finish.
    return self->store_failed || self->gone
           || (self->storage && storage_paused (self->storage));
}

static void
s_frame_path (void *arg, exp_t *exp, const char *name, char *out, size_t size)
{
    broker_t *self = arg;
    storage_frame_path (self->storage, exp, name, out, size);
}

static exp_t *
s_storage_experiment (void *arg, const char *name, int64_t now)
{
    broker_t *self = arg;
    return ingest_experiment (self->ingest, name, now);
}

// The store and the stages over it (ingest, clocks, results, dispatch).
// 0, or -1 with err.
// The store's lines at open (a migration's backup and steps), for the log.
static void
s_store_note (void *arg, const char *line)
{
    (void) arg;
    log_notice ("%s", line);
}

static int
s_stages_new (broker_t *self, char *err, size_t errlen)
{
    const config_t *cfg = &self->cfg;
    int fields_every;
    if (strcmp (cfg->broker.store_fields, "all") == 0)
        fields_every = 1;
    else if (strcmp (cfg->broker.store_fields, "none") == 0)
        fields_every = 0;
    else
        fields_every = atoi (cfg->broker.store_fields + strlen ("every "));
    store_durability_t durability = strcmp (cfg->broker.durability, "normal") == 0
                                        ? STORE_DURABILITY_NORMAL
                                        : STORE_DURABILITY_FULL;
    store_options_t options = {
        .durability = durability,
        .backup_before_migrate = strcmp (cfg->broker.backup_before_migrate, "on") == 0,
        .note = s_store_note};
    if (!(self->store = store_new_with (cfg->broker.store, &options, err, errlen)))
        return -1;
    if (store_created (self->store))
        log_notice ("first start: no store was at '%s' (nor its lock file): made a new one",
                    cfg->broker.store);
    if (store_restored (self->store))
        log_notice ("store '%s' is the copy a broker saved of the store taken away: going on "
                    "with it",
                    cfg->broker.store);
    store_set_fields (self->store, fields_every);
    if (!(self->results = results_new (self->store, fields_every))) {
        snprintf (err, errlen, "cannot start the broker: out of memory");
        return -1;
    }
    ingest_host_t ingest = {.cfg = cfg,
                            .store = self->store,
                            .fresh = self->fresh,
                            .settings = self->settings};
    if (!(self->ingest = ingest_new (&ingest, err, errlen)))
        return -1;
    self->clocks = clocks_new (ingest_experiments (self->ingest));
    dispatch_host_t dispatch = {.cfg = cfg,
                                .store = self->store,
                                .loop = self->loop,
                                .results = self->results,
                                .clocks = self->clocks,
                                .fresh = self->fresh,
                                .peers = self->peers,
                                .arg = self,
                                .after = s_dispatch_after,
                                .held = s_dispatch_held,
                                .frame_path = s_frame_path};
    if (!self->clocks || !(self->dispatch = dispatch_new (&dispatch))) {
        snprintf (err, errlen, "cannot start the broker: out of memory");
        return -1;
    }
    stats_host_t stats = {.store = self->store,
                          .experiments = ingest_experiments (self->ingest),
                          .cfg = cfg};
    if (!(self->stats = stats_new (&stats, err, errlen)))
        return -1;
    results_set_stats (self->results, self->stats);
    ensemble_host_t ensemble = {.store = self->store,
                                .cfg = cfg,
                                .arg = self,
                                .frame_path = s_frame_path};
    if (!(self->ensemble = ensemble_new (&ensemble))) {
        snprintf (err, errlen, "cannot start the broker: out of memory");
        return -1;
    }
    dispatch_set_ensemble (self->dispatch, self->ensemble);
    return 0;
}

// What the store holds at start: pairs dispatched before a stop pending
// again, the files waiting for a partner offered again, the settings, the
// pending pairs queued. 0, or -1 with err.
static int
s_load (broker_t *self, char *err, size_t errlen)
{
    int64_t now = util_time_ns ();
    stages_t stages;
    s_stages (self, &stages);
    // The settings first: the files waiting pair by their experiment's rule.
    if (settings_load (&stages) != 0) {
        snprintf (err, errlen, "cannot read the store '%s': %s", self->cfg.broker.store,
                  store_error (self->store));
        return -1;
    }
    // An ensemble job's chunks live in memory only: a job left running by
    // a stop is ended, and said so (the operator runs it again).
    int abandoned = store_ensemble_abandon (self->store, "the broker stopped while it ran: run "
                                            "'pivctl ensemble' again", now);
    if (abandoned > 0)
        log_notice ("%d ensemble job(s) left running by a stop are marked failed", abandoned);
    int requeued = store_requeue_all (self->store, now);
    if (requeued > 0)
        log_notice ("%d pair(s) dispatched before a stop are pending again", requeued);
    if (requeued < 0 || ingest_reoffer (self->ingest) < 0
        || store_commit (self->store, err, errlen) != 0) {
        if (requeued < 0 || !*err)
            snprintf (err, errlen, "cannot read the store '%s': %s", self->cfg.broker.store,
                      store_error (self->store));
        return -1;
    }
    // Pairs re-made above were already in the store: they are not fresh.
    zlistx_purge (self->fresh);
    if (stats_load (self->stats) != 0
        || store_pairs_in_state (self->store, STORE_PENDING, s_load_pending, self) < 0) {
        snprintf (err, errlen, "cannot read the store '%s': %s", self->cfg.broker.store,
                  store_error (self->store));
        return -1;
    }
    return 0;
}

// The four sockets bound (CURVE servers with security/curve on), read by
// the reactor, with its timers. 0, or -1 with err.
static int
s_sockets_new (broker_t *self, char *err, size_t errlen)
{
    const config_t *cfg = &self->cfg;
    zcert_t *cert = NULL;
    if (secure_on (cfg) && !(cert = peers_secure (self->peers, cfg, err, errlen)))
        return -1;
    self->ingest_sock = s_bind (ZMQ_ROUTER, cfg->broker.ingest, cert, err, errlen);
    self->work_sock =
        self->ingest_sock ? s_bind (ZMQ_ROUTER, cfg->broker.work, cert, err, errlen) : NULL;
    self->control_sock =
        self->work_sock ? s_bind (ZMQ_ROUTER, cfg->broker.control, cert, err, errlen) : NULL;
    self->publish_sock =
        self->control_sock ? s_bind (ZMQ_XPUB, cfg->broker.publish, cert, err, errlen) : NULL;
    zcert_destroy (&cert);
    if (!self->publish_sock)
        return -1;
    // Drained until a read finds nothing (s_drain).
    zsock_set_rcvtimeo (self->ingest_sock, 0);
    zsock_set_rcvtimeo (self->work_sock, 0);
    results_set_publish (self->results, self->publish_sock);
    dispatch_set_sockets (self->dispatch, self->work_sock, self->publish_sock);
    zloop_reader (self->loop, self->ingest_sock, s_on_ingest, self);
    zloop_reader (self->loop, self->work_sock, s_on_work, self);
    zloop_reader (self->loop, self->control_sock, s_on_control, self);
    zloop_reader (self->loop, self->publish_sock, s_on_publish, self);
    zloop_timer (self->loop, cfg->broker.commit_ms > 0 ? (size_t) cfg->broker.commit_ms : 1, 0,
                 s_commit_timer, self);
    zloop_timer (self->loop, (size_t) cfg->broker.heartbeat_ms, 0, s_heartbeat, self);
    if (cfg->broker.stats_ms > 0)
        zloop_timer (self->loop, (size_t) cfg->broker.stats_ms, 0, s_stats_timer, self);
    zloop_timer (self->loop, FILES_CHECK_MS, 0, s_files_timer, self);
    s_rebuild_start (self);
    return 0;
}

broker_t *
broker_new (const config_t *cfg, char *err, size_t errlen)
{
    broker_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "cannot start the broker: out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    self->started_ns = util_time_ns ();
    broker_settings_format (cfg, self->settings, sizeof self->settings);
    self->fresh = zlistx_new ();
    self->loop = zloop_new ();
    self->peers = peers_new ();
    if (!self->fresh || !self->loop || !self->peers) {
        snprintf (err, errlen, "cannot start the broker: out of memory");
        goto fail;
    }
    zlistx_set_destructor (self->fresh, (zlistx_destructor_fn *) broker_task_destroy);
    if (s_stages_new (self, err, errlen) || s_load (self, err, errlen)
        || s_sockets_new (self, err, errlen))
        goto fail;
    storage_host_t storage = {.cfg = &self->cfg,
                              .store = self->store,
                              .loop = self->loop,
                              .publish = self->publish_sock,
                              .experiments = ingest_experiments (self->ingest),
                              .clocks = self->clocks,
                              .arg = self,
                              .commit = s_storage_commit,
                              .dispatch = s_storage_dispatch,
                              .experiment = s_storage_experiment};
    if (!(self->storage = storage_new (&storage, err, errlen)))
        goto fail;
    control_host_t control = {.loop = self->loop,
                              .publish = self->publish_sock,
                              .settings = self->settings,
                              .peers = self->peers,
                              .arg = self,
                              .commit = s_storage_commit};
    s_stages (self, &control.stages);
    if (!(self->control = control_new (&control))) {
        snprintf (err, errlen, "cannot start the broker: out of memory");
        goto fail;
    }
    log_notice ("broker: %zu pair(s) pending; ingest %s, work %s, control %s, publish %s%s",
                sched_size (dispatch_sched (self->dispatch)), broker_endpoint (self, "ingest"),
                broker_endpoint (self, "work"), broker_endpoint (self, "control"),
                broker_endpoint (self, "publish"), peers_curve (self->peers) ? "; CURVE on" : "");
    return self;
fail:
    broker_destroy (&self);
    return NULL;
}

void
broker_destroy (broker_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    broker_t *self = *self_p;
    if (self->store) {
        // A clean stop saves the statistics with the last commit (unless
        // the store takes nothing now).
        if (self->stats && !self->gone && !self->busy_since_ns)
            stats_checkpoint (self->stats, NULL, util_time_ns ());
        s_commit (self);
        if (self->dispatch)
            dispatch_goodbye (self->dispatch);
    }
    zloop_destroy (&self->loop);
    free (self->fd_watch);
    control_destroy (&self->control);
    storage_destroy (&self->storage);
    clocks_destroy (&self->clocks);
    zsock_destroy (&self->ingest_sock);
    zsock_destroy (&self->work_sock);
    zsock_destroy (&self->control_sock);
    publish_forget (self->publish_sock);
    zsock_destroy (&self->publish_sock);
    peers_destroy (&self->peers);
    dispatch_destroy (&self->dispatch);
    ensemble_destroy (&self->ensemble);
    zlistx_destroy (&self->fresh);
    s_replies_free (&self->recorded);
    s_replies_free (&self->acks);
    ingest_destroy (&self->ingest);
    results_destroy (&self->results);
    stats_destroy (&self->stats);
    store_destroy (&self->store);
    free (self->gone);
    free (self);
    *self_p = NULL;
}

int
broker_run (broker_t *self)
{
    zloop_start (self->loop);
    return s_commit (self) == 0 ? 0 : -1;
}

// ---------------------------------------------------------------------------
// Reload (SIGHUP, 'systemctl reload')

// Appends ", name" to list (size bytes) when the two values differ.
static void
s_differs (char *list, size_t size, int differs, const char *name)
{
    if (differs)
        snprintf (list + strlen (list), size - strlen (list), "%s%s", *list ? ", " : "", name);
}

#define S_INT(sec, key) s_differs (list, size, old->sec.key != new->sec.key, #sec "/" #key)
#define S_STR(sec, key) s_differs (list, size, strcmp (old->sec.key, new->sec.key) != 0, #sec "/" #key)

// The keys that differ and that this broker reads only at start, as
// "a/b, c/d" in list; "" when none.
static void
s_restart_keys (const config_t *old, const config_t *new, char *list, size_t size)
{
    *list = 0;
    S_STR (broker, ingest), S_STR (broker, work), S_STR (broker, control);
    S_STR (broker, publish), S_STR (broker, store), S_STR (broker, durability);
    S_INT (broker, commit_ms), S_INT (broker, heartbeat_ms), S_STR (broker, store_fields);
    S_STR (watcher, root);
    S_STR (pairing, rule), S_STR (pairing, a_suffix), S_STR (pairing, b_suffix);
    S_INT (pairing, ignore_case), S_STR (pairing, extensions), S_INT (pairing, max_waiting);
    S_STR (piv, passes), S_INT (piv, overlap), S_INT (piv, iterations), S_STR (piv, deform);
    S_STR (security, curve), S_STR (security, broker_cert), S_STR (security, clients);
    S_STR (security, operators);
    S_STR (storage, io_size), S_INT (storage, guard_ms);
}

// The keys that differ and that a reload applies, as in s_restart_keys.
static void
s_applied_keys (const config_t *old, const config_t *new, char *list, size_t size)
{
    *list = 0;
    S_STR (log, level);
    S_INT (broker, liveness), S_INT (broker, max_attempts), S_INT (broker, task_deadline_ms);
    S_INT (broker, max_agents), S_INT (broker, deadline_floor_ms);
    S_INT (broker, forget_agents_after);
    S_STR (storage, warn_free), S_STR (storage, critical_free), S_STR (storage, archive_dir);
    S_INT (storage, archive_idle_s), S_INT (storage, archive_mb_s), S_STR (storage, mount_helper);
}

#undef S_INT
#undef S_STR

int
broker_reload (broker_t *self, const config_t *cfg)
{
    char applied[1024], restart[1024];
    s_applied_keys (&self->cfg, cfg, applied, sizeof applied);
    s_restart_keys (&self->cfg, cfg, restart, sizeof restart);
    // Policy defaults, the storage rates and thresholds: read where they
    // are used, so taking them is enough.
    self->cfg.broker.liveness = cfg->broker.liveness;
    self->cfg.broker.max_attempts = cfg->broker.max_attempts;
    self->cfg.broker.task_deadline_ms = cfg->broker.task_deadline_ms;
    self->cfg.broker.max_agents = cfg->broker.max_agents;
    self->cfg.broker.deadline_floor_ms = cfg->broker.deadline_floor_ms;
    self->cfg.broker.forget_agents_after = cfg->broker.forget_agents_after;
    memcpy (self->cfg.storage.warn_free, cfg->storage.warn_free, sizeof cfg->storage.warn_free);
    memcpy (self->cfg.storage.critical_free, cfg->storage.critical_free,
            sizeof cfg->storage.critical_free);
    memcpy (self->cfg.storage.archive_dir, cfg->storage.archive_dir,
            sizeof cfg->storage.archive_dir);
    self->cfg.storage.archive_idle_s = cfg->storage.archive_idle_s;
    self->cfg.storage.archive_mb_s = cfg->storage.archive_mb_s;
    memcpy (self->cfg.storage.mount_helper, cfg->storage.mount_helper,
            sizeof cfg->storage.mount_helper);
    memcpy (self->cfg.log.level, cfg->log.level, sizeof cfg->log.level);
    // Certificates: the clients' and operators' directories are read again
    // at the next message of each key (a key removed loses its rights now,
    // not after the cache's recheck interval).
    peers_recheck (self->peers);
    log_notice ("reload: applied %s%s", *applied ? applied : "no change",
                peers_curve (self->peers) ? "; certificates of clients and operators read again"
                                          : "");
    if (*restart)
        log_warning ("reload: %s changed: read at start only, takes effect after a restart "
                     "(systemctl restart pivfarm-broker)",
                     restart);
    return 0;
}

static int
s_reload (void *owner, const config_t *cfg)
{
    return broker_reload (owner, cfg);
}

int
broker_watch_hangup (broker_t *self, int fd)
{
    void *watch = daemon_watch_hangup (self->loop, fd, s_reload, self);
    if (!watch)
        return -1;
    free (self->fd_watch);
    self->fd_watch = watch;
    return 0;
}

const char *
broker_endpoint (broker_t *self, const char *socket)
{
    zsock_t *sock = strcmp (socket, "ingest") == 0    ? self->ingest_sock
                    : strcmp (socket, "work") == 0    ? self->work_sock
                    : strcmp (socket, "control") == 0 ? self->control_sock
                    : strcmp (socket, "publish") == 0 ? self->publish_sock
                                                      : NULL;
    return sock ? zsock_endpoint (sock) : NULL;
}
