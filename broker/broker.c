// broker.c — the broker's reactor. Everything it tells a peer about state
// (ACK of a file event, RECORDED for a result, a TASK for a new pair) goes
// out only after the commit that holds that state: a crash can then lose
// nothing that was acknowledged, and no pair id is ever handed out twice.

#include "broker/internal.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/secure.h"
#include "common/util.h"
#include "piv/settings.h"
#include "store/store.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

// Messages queued per socket and peer, each way (ZeroMQ's default, made
// explicit): with ZMQ_MAXMSGSIZE, what a peer can make the broker hold. A
// peer beyond it is pushed back (TCP), and what is dropped on the way out
// is resent by the protocol (ACK, RECORDED); agents stay below it by credit.
#define HWM 1000
// A pair that FAILED is dispatched again no sooner than BACKOFF_BASE_MS
// after its first failure, twice that after its second, and so on, at
// most BACKOFF_MAX_MS (counted from its last failure; a retry by hand
// starts again from the base).
#define BACKOFF_BASE_MS 1000
#define BACKOFF_MAX_MS 60000

// A message to send once the open transaction is committed.
typedef struct {
    zframe_t *identity;  // to whom
    proto_msg_t msg;     // what
} s_after_t;

task_t *
broker_task_new (int64_t pair, exp_t *exp, const char *stem, const char *name_a,
                 const char *name_b)
{
    task_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pair = pair;
    self->exp = exp;
    self->stem = strdup (stem);
    self->name_a = strdup (name_a);
    self->name_b = name_b ? strdup (name_b) : NULL;
    if (!self->stem || !self->name_a || (name_b && !self->name_b))
        broker_task_destroy (&self);
    return self;
}

void
broker_task_destroy (task_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    task_t *self = *self_p;
    free (self->stem);
    free (self->name_a);
    free (self->name_b);
    free (self);
    *self_p = NULL;
}

static void
s_exp_destroy (exp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    exp_t *self = *self_p;
    broker_replay_destroy (&self->replay);
    storage_exp_release (self);
    free (self->name);
    free (self->source);
    free (self->settings);
    free (self);
    *self_p = NULL;
}

static void
s_agent_destroy (agent_rec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    agent_rec_t *self = *self_p;
    zframe_destroy (&self->identity);
    free (self->id);
    free (self->host);
    zlistx_destroy (&self->tasks);
    proto_batch_destroy (&self->out);
    free (self);
    *self_p = NULL;
}

static void
s_after_destroy (s_after_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zframe_destroy (&(*self_p)->identity);
    proto_msg_release (&(*self_p)->msg);
    free (*self_p);
    *self_p = NULL;
}

// Queues msg (whose strings the queue takes over) for after the commit.
static void
s_after (broker_t *self, zframe_t *identity, proto_msg_t *msg)
{
    s_after_t *after = calloc (1, sizeof *after);
    if (!after) {
        proto_msg_release (msg);
        return;
    }
    after->identity = zframe_dup (identity);
    after->msg = *msg;
    memset (msg, 0, sizeof *msg);
    zlistx_add_end (self->after, after);
}

// ---------------------------------------------------------------------------
// The publish socket (doc/protocol.md §6)

// Sends 'json' on "<prefix><experiment>/" (experiment NULL: on 'prefix'
// alone), with 'blob' as a third frame when it is not NULL. ZeroMQ drops
// a message no subscriber asked for before it leaves the broker.
static void
s_publish (broker_t *self, const char *prefix, const char *experiment, const char *json,
           const void *blob, size_t blob_size)
{
    if (!self->publish)
        return;
    char topic[PATH_MAX];
    snprintf (topic, sizeof topic, "%s%s%s", prefix, experiment ? experiment : "",
              experiment ? PROTO_TOPIC_END : "");
    zmsg_t *msg = zmsg_new ();
    if (!msg)
        return;
    zmsg_addstr (msg, topic);
    zmsg_addstr (msg, json);
    if (blob)
        zmsg_addmem (msg, blob, blob_size);
    zmsg_send (&msg, self->publish);
    zmsg_destroy (&msg);
}

// Appends 'text' as a JSON string to buf at *len (util_json_string).
static void
s_json_put_string (char *buf, size_t size, size_t *len, const char *text)
{
    size_t room = *len < size ? size - *len : 0;
    *len += util_json_string (text, room ? buf + *len : NULL, room);
}

// Appends printf text to buf at *len.
static void
s_json_put (char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

static void
s_json_put (char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    size_t room = *len < size ? size - *len : 0;
    int n = vsnprintf (room ? buf + *len : NULL, room, fmt, ap);
    va_end (ap);
    if (n > 0)
        *len += (size_t) n;
}

// A number, null when not finite.
static void
s_json_put_number (char *buf, size_t size, size_t *len, double x)
{
    if (isfinite (x))
        s_json_put (buf, size, len, "%.9g", x);
    else
        s_json_put (buf, size, len, "null");
}

// "agents": an agent joined, left, or is presumed dead ('event').
static void
s_publish_agent (broker_t *self, const agent_rec_t *agent, const char *event, const char *reason)
{
    char json[2048];
    size_t len = 0, size = sizeof json;
    s_json_put (json, size, &len, "{\"event\":\"%s\",\"agent\":", event);
    s_json_put_string (json, size, &len, agent->id);
    s_json_put (json, size, &len, ",\"host\":");
    s_json_put_string (json, size, &len, agent->host);
    s_json_put (json, size, &len, ",\"cores\":%d,\"tasks\":%zu,\"reason\":", agent->cores,
                zlistx_size (agent->tasks));
    if (reason)
        s_json_put_string (json, size, &len, reason);
    else
        s_json_put (json, size, &len, "null");
    // Agents known once this event is through (a leaving one is still in
    // the table).
    size_t known = zhashx_size (self->agents) - (strcmp (event, "joined") == 0 ? 0 : 1);
    s_json_put (json, size, &len, ",\"agents\":%zu,\"published_ns\":%lld}", known,
                (long long) util_time_ns ());
    if (len < size)
        s_publish (self, PROTO_TOPIC_AGENTS, NULL, json, NULL, 0);
}

// "failed.<exp>/": a pair failed for good.
static void
s_publish_failed (broker_t *self, const task_t *task, int attempts, const char *error,
                  int64_t now)
{
    char json[4096];
    size_t len = 0, size = sizeof json;
    s_json_put (json, size, &len, "{\"experiment\":");
    s_json_put_string (json, size, &len, task->exp->name);
    s_json_put (json, size, &len, ",\"pair\":%lld,\"stem\":", (long long) task->pair);
    s_json_put_string (json, size, &len, task->stem);
    s_json_put (json, size, &len, ",\"attempt\":%d,\"attempts\":%d,\"error\":", task->attempt,
                attempts);
    s_json_put_string (json, size, &len, error);
    s_json_put (json, size, &len, ",\"failed_ns\":%lld}", (long long) now);
    if (len < size)
        s_publish (self, PROTO_TOPIC_FAILED, task->exp->name, json, NULL, 0);
}

// "result.<exp>/": the summary figures of a result just recorded (as the
// store keeps them), its times and latency; then "field.<exp>/" with the
// field itself when the store keeps fields (broker/store_fields not none).
static void
s_publish_result (broker_t *self, const task_t *task, const agent_rec_t *agent,
                  const proto_msg_t *msg, int64_t now)
{
    exp_t *exp = task->exp;
    char json[8192];
    size_t len = 0, size = sizeof json;
    s_json_put (json, size, &len, "{\"experiment\":");
    s_json_put_string (json, size, &len, exp->name);
    s_json_put (json, size, &len, ",\"replay\":%s,\"source\":", exp->replay ? "true" : "false");
    if (exp->replay)
        s_json_put_string (json, size, &len, exp->source);
    else
        s_json_put (json, size, &len, "null");
    s_json_put (json, size, &len, ",\"pair\":%lld,\"stem\":", (long long) task->pair);
    s_json_put_string (json, size, &len, task->stem);
    s_json_put (json, size, &len, ",\"attempt\":%d,\"agent\":", task->attempt);
    s_json_put_string (json, size, &len, agent ? agent->id : "");
    s_json_put (json, size, &len, ",\"path\":");
    s_json_put_string (json, size, &len, msg->output);
    const struct {
        const char *name;  // member
        int index;         // PROTO_FIG_*
    } figures[] = {{"mean_u", PROTO_FIG_MEAN_U},
                   {"mean_v", PROTO_FIG_MEAN_V},
                   {"mean_speed", PROTO_FIG_MEAN_SPEED},
                   {"valid_fraction", PROTO_FIG_VALID_FRACTION},
                   {"vorticity", PROTO_FIG_VORTICITY}};
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
        s_json_put (json, size, &len, ",\"%s\":", figures[i].name);
        s_json_put_number (json, size, &len, msg->figures[figures[i].index]);
    }
    s_json_put (json, size, &len, ",\"nx\":%d,\"ny\":%d,\"compute_ns\":%lld,\"closed_ns\":",
                (int) msg->figures[PROTO_FIG_NX], (int) msg->figures[PROTO_FIG_NY],
                (long long) msg->time_ns);
    if (task->closed_ns > 0)
        s_json_put (json, size, &len, "%lld", (long long) task->closed_ns);
    else
        s_json_put (json, size, &len, "null");
    s_json_put (json, size, &len, ",\"dispatched_ns\":%lld,\"recorded_ns\":%lld,\"latency_ms\":",
                (long long) task->dispatched_ns, (long long) now);
    s_json_put_number (json, size, &len,
                       task->closed_ns > 0 ? (now - task->closed_ns) / 1e6 : NAN);
    s_json_put (json, size, &len, ",\"field\":%s}",
                self->fields_every != 0 && msg->blob && msg->blob_size ? "true" : "false");
    if (len >= size)
        return;
    s_publish (self, PROTO_TOPIC_RESULT, exp->name, json, NULL, 0);
    if (self->fields_every == 0 || !msg->blob || msg->blob_size == 0)
        return;
    // The field's own header: which pair it is; then the field encoded as
    // on the work socket (piv_field_decode reads it).
    len = 0;
    s_json_put (json, size, &len, "{\"experiment\":");
    s_json_put_string (json, size, &len, exp->name);
    s_json_put (json, size, &len, ",\"pair\":%lld,\"stem\":", (long long) task->pair);
    s_json_put_string (json, size, &len, task->stem);
    s_json_put (json, size, &len, ",\"bytes\":%zu}", msg->blob_size);
    if (len < size)
        s_publish (self, PROTO_TOPIC_FIELD, exp->name, json, msg->blob, msg->blob_size);
}

// ---------------------------------------------------------------------------
// Retry delay

static int s_backoff_due (zloop_t *loop, int timer_id, void *arg);

// One timer, for the earliest task of the backoff list (none when it is
// empty). A timer that fires early (zloop counts whole milliseconds on
// another clock) finds the task not due and is armed again for it: no
// task waits for a timer that is gone.
static void
s_backoff_arm (broker_t *self, int64_t now)
{
    if (self->backoff_timer >= 0 && self->loop)
        zloop_timer_end (self->loop, self->backoff_timer);
    self->backoff_timer = -1;
    int64_t first = INT64_MAX;
    for (task_t *task = zlistx_first (self->backoff); task; task = zlistx_next (self->backoff))
        if (task->not_before_ns < first)
            first = task->not_before_ns;
    if (first == INT64_MAX || !self->loop)
        return;
    int64_t ms = first > now ? (first - now + 999999) / 1000000 + 1 : 1;
    self->backoff_timer = zloop_timer (self->loop, (size_t) ms, 1, s_backoff_due, self);
}

// Queues the tasks whose retry delay has passed.
static int
s_backoff_due (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    self->backoff_timer = -1;  // a one-shot timer: gone once it fired
    int64_t now = util_time_ns ();
    for (task_t *task = zlistx_first (self->backoff); task; task = zlistx_next (self->backoff))
        if (task->not_before_ns <= now) {
            zlistx_detach_cur (self->backoff);  // the cursor goes back one
            broker_enqueue (self, task, 0);
        }
    s_backoff_arm (self, now);
    broker_dispatch (self);
    return 0;
}

// Holds a task that FAILED until its retry delay has passed (other pairs
// go on meanwhile); a task without a delay is queued at once.
static void
s_backoff_add (broker_t *self, task_t *task, int64_t now)
{
    if (task->not_before_ns <= now || !self->loop || !zlistx_add_end (self->backoff, task)) {
        broker_enqueue (self, task, 0);  // no delay rather than no retry
        return;
    }
    s_backoff_arm (self, now);
    task_t *held;
    while (self->backoff_timer < 0 && (held = zlistx_detach (self->backoff, NULL)))
        broker_enqueue (self, held, 0);  // no timer: no delay rather than no retry
}

// ---------------------------------------------------------------------------
// Commit, then tell


// How many pairs a file can be in under the pairing rule.
static int
s_pairs_per_file (broker_t *self)
{
    return strcmp (self->cfg.pairing.rule, "sliding") == 0 ? 2 : 1;
}
static int s_reoffer (void *arg, const char *experiment, const char *name, int64_t file);
static agent_rec_t *s_agent (broker_t *self, zframe_t *identity);
static int s_load_pending (void *arg, int64_t pair, const char *experiment, const char *stem,
                           const char *name_a, const char *name_b, int attempts);

static void
s_task_free (void *task, void *arg)
{
    (void) arg;
    task_t *t = task;
    broker_task_destroy (&t);
}

// After a failed commit the broker's memory runs ahead of the store: the
// pairing rules consumed files, the experiments may hold ids, the queue
// pairs, none of which were committed. Start again from what the store
// holds (experiments stay, as tasks out with agents point to them; their
// ids are looked up again).
static void
s_resync (broker_t *self)
{
    char err[512];
    int64_t now = util_time_ns ();
    for (exp_t *exp = zhashx_first (self->experiments); exp; exp = zhashx_next (self->experiments))
        exp->id = store_experiment (self->store, exp->name, now);
    sched_clear (self->sched, s_task_free, NULL);
    pairing_t *fresh_rules = pairing_new (&self->cfg, err, sizeof err);
    if (fresh_rules) {
        pairing_destroy (&self->pairing);
        self->pairing = fresh_rules;
        store_files_waiting (self->store, s_pairs_per_file (self), s_reoffer, self);
    }
    zlistx_purge (self->fresh);
    zlistx_purge (self->backoff);  // pending in the store: loaded again
    store_pairs_in_state (self->store, STORE_PENDING, s_load_pending, self);
}

// Commits the open transaction; then sends what waited for it and makes the
// pairs it created dispatchable. On failure nothing is sent: watchers resend
// their events, agents their results, and the broker says why in its log.
int
broker_commit (broker_t *self)
{
    char err[512];
    if (store_uncommitted (self->store) == 0 && zlistx_size (self->after) == 0
        && zlistx_size (self->fresh) == 0)
        return 0;
    if (store_commit (self->store, err, sizeof err) != 0) {
        if (!self->store_failed)
            log_error ("cannot commit: %s; acknowledging nothing until it can", err);
        self->store_failed = 1;
        snprintf (self->store_why, sizeof self->store_why, "%s", err);
        // What waited for this commit is dropped: its senders will resend.
        zlistx_purge (self->after);
        s_resync (self);
        return -1;
    }
    if (self->store_failed)
        log_notice ("commits work again");
    self->store_failed = 0;
    // ACKs of one watcher go together, PROTO_MAX_ACK sequence numbers a
    // message. A message a peer cannot take now is dropped: the watcher
    // resends its events, the agent its results.
    proto_msg_t ack = {.command = PROTO_ACK};
    uint64_t seqs[PROTO_MAX_ACK];
    zframe_t *to = NULL;
    ack.seqs = seqs;
    for (s_after_t *a = zlistx_first (self->after); a; a = zlistx_next (self->after)) {
        if (a->msg.command != PROTO_ACK) {
            // RECORDED goes with the agent's next TASKs (broker_dispatch).
            agent_rec_t *agent = s_agent (self, a->identity);
            if (!agent || proto_batch_add (agent->out, &a->msg) != 0)
                proto_send (&a->msg, a->identity, self->work);
            continue;
        }
        if (to && (!zframe_eq (to, a->identity) || ack.count == PROTO_MAX_ACK)) {
            proto_send (&ack, to, self->ingest);
            ack.count = 0;
        }
        to = a->identity;
        seqs[ack.count++] = a->msg.seqs[0];
    }
    if (to && ack.count)
        proto_send (&ack, to, self->ingest);
    zlistx_purge (self->after);
    task_t *task;
    int64_t now = util_time_ns ();
    while ((task = zlistx_detach (self->fresh, NULL)))
        if (task->not_before_ns > now)
            s_backoff_add (self, task, now);  // it FAILED: retried after its delay
        else
            broker_enqueue (self, task, task->attempt == 0);  // a retry is never sampled out
    broker_dispatch (self);
    return 0;
}

static int
s_commit_timer (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_commit ((broker_t *) arg);
    return 0;
}

void
broker_enqueue (broker_t *self, task_t *task, int fresh)
{
    if (task->expired) {
        // A late FAILED of an attempt whose deadline passed: its copy is
        // queued or out already.
        broker_task_destroy (&task);
        return;
    }
    int rc = sched_add (self->sched, task->exp->id, task->pair, task, fresh);
    if (rc == SCHED_QUEUED)
        return;
    if (rc == SCHED_SKIPPED)
        store_pair_skip (self->store, task->pair, util_time_ns ());
    else
        log_error ("no memory to queue pair %lld", (long long) task->pair);
    broker_task_destroy (&task);
}

// ---------------------------------------------------------------------------
// Ingest: FILE events from watchers

exp_t *
broker_experiment (broker_t *self, const char *name, int64_t now)
{
    exp_t *exp = zhashx_lookup (self->experiments, name);
    if (exp)
        return exp;
    int64_t id = store_experiment (self->store, name, now);
    store_experiment_t found;
    if (id < 0 || store_experiment_find (self->store, name, &found) != 1)
        return NULL;
    exp = calloc (1, sizeof *exp);
    if (!exp)
        return NULL;
    exp->id = id;
    exp->name = strdup (name);
    exp->source = strdup (found.source);
    exp->settings = strdup (*found.settings ? found.settings : self->settings);
    if (!exp->name || !exp->source || !exp->settings) {
        s_exp_destroy (&exp);
        return NULL;
    }
    zhashx_insert (self->experiments, name, exp);
    return exp;
}

// Context of pairing_offer's callback.
typedef struct {
    broker_t *self;     // the broker
    int64_t now;        // event time
    exp_t *exp;         // experiment
    int64_t closed_ns;  // when the file that completes the pairs was closed
} s_offer_t;

static int
s_on_pair (void *arg, const char *experiment, const char *stem, const char *name_a,
           int64_t file_a, const char *name_b, int64_t file_b)
{
    (void) experiment;
    s_offer_t *ctx = arg;
    broker_t *self = ctx->self;
    // The files were offered with their rows' ids (broker_file, s_reoffer).
    int is_new = 0;
    int64_t pair =
        store_pair_add (self->store, ctx->exp->id, stem, file_a, file_b, ctx->now, &is_new);
    if (pair < 0)
        return -1;
    if (is_new) {
        task_t *task = broker_task_new (pair, ctx->exp, stem, name_a, name_b);
        if (task) {
            // A file offered again after a restart has no close time of its
            // own: its recorded mtime stands for it.
            task->closed_ns = ctx->closed_ns > 0 ? ctx->closed_ns : store_pair_closed (self->store, pair);
            zlistx_add_end (self->fresh, task);
        }
        broker_count (&ctx->exp->arrivals, ctx->now, 1);
    }
    return 0;
}

int
broker_queue_again (void *arg, int64_t pair, const char *experiment, const char *stem,
                    const char *name_a, const char *name_b, int attempts)
{
    (void) attempts;
    broker_t *self = arg;
    exp_t *exp = broker_experiment (self, experiment, util_time_ns ());
    task_t *task = exp ? broker_task_new (pair, exp, stem, name_a, name_b) : NULL;
    if (!task)
        return -1;
    task->attempt = -1;  // not fresh: never sampled out
    // The camera's time, not 0 (which would give a latency from the epoch);
    // published, but not counted in the live latency figures.
    task->closed_ns = store_pair_closed (self->store, pair);
    task->by_hand = 1;
    zlistx_add_end (self->fresh, task);
    return 0;
}

// A new version of a recorded file (another size or mtime): a pair of it
// that failed is retried, one that is done is kept and said to be so (the
// camera rewrote a frame whose result is out: the operator decides), one
// pending or out reads the file as it is now. 0, or -1 (not acknowledged).
static int
s_file_changed (broker_t *self, exp_t *exp, const char *name, int64_t file, int64_t now)
{
    int done = 0;
    int retried = store_file_retry (self->store, exp->id, file, now, broker_queue_again, self, &done);
    if (retried < 0) {
        log_error ("cannot retry the pairs of file '%s/%s': %s", exp->name, name,
                   store_error (self->store));
        return -1;
    }
    exp->last_file_ns = now;
    if (retried > 0)
        log_notice ("'%s/%s' changed after its pair failed: retried", exp->name, name);
    if (done > 0)
        log_warning ("'%s/%s' rewritten after its pair was done: result kept", exp->name, name);
    if (retried == 0 && done == 0)
        log_info ("'%s/%s' changed: its pairs read it as it is now", exp->name, name);
    return 0;
}

int
broker_file (broker_t *self, exp_t *exp, const char *name, int64_t size, int64_t mtime_ns,
             int64_t closed_ns)
{
    int64_t now = util_time_ns ();
    int version = STORE_FILE_SAME;
    int64_t file = store_file_add (self->store, exp->id, name, size, mtime_ns, now, &version);
    if (file < 0) {
        log_error ("cannot record file '%s/%s': %s", exp->name, name, store_error (self->store));
        return -1;  // not acknowledged: the watcher resends it
    }
    if (version == STORE_FILE_CHANGED)
        return s_file_changed (self, exp, name, file, now);
    if (version != STORE_FILE_NEW)
        return 0;
    exp->last_file_ns = now;
    char err[512] = "";
    s_offer_t ctx = {self, now, exp, closed_ns};
    int made =
        pairing_offer (self->pairing, exp->name, name, file, s_on_pair, &ctx, err, sizeof err);
    if (made == -2) {
        // The store refused the pair: the commit will fail and the broker
        // start again from the store; the watcher resends the file.
        log_error ("experiment '%s': %s: %s", exp->name, err, store_error (self->store));
        return -1;
    }
    if (made < 0) {
        // A name that is no frame is recorded and acknowledged, not paired.
        log_warning ("experiment '%s': %s", exp->name, err);
        char payload[600];
        snprintf (payload, sizeof payload, "unpaired reason=%s", err);
        store_event (self->store, "unpaired", exp->id, 0, payload, now);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Clocks (doc/storage.md): latency compares the writer's file times and
// the agents' with the broker's clock; a skew larger than the latency
// makes it meaningless, so it is measured and reported.

#define CLOCKS_MAX 4096                              // peers measured at once, at most
#define CLOCK_LOG_EVERY_NS (600 * (int64_t) 1000000000)  // a lasting skew is logged this often

static int
s_compare_ms (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

double
broker_clock_limit_ms (broker_t *self)
{
    int64_t now = util_time_ns ();
    if (self->clock_limit_ns && now - self->clock_limit_ns < 1000000000)
        return self->clock_limit_ms;
    double limit = 100;
    double sorted[LATENCY_KEPT];
    for (exp_t *exp = zhashx_first (self->experiments); exp;
         exp = zhashx_next (self->experiments)) {
        int n = exp->latencies;
        if (n == 0)
            continue;
        memcpy (sorted, exp->latency_ms, sizeof (double) * (size_t) n);
        qsort (sorted, (size_t) n, sizeof (double), s_compare_ms);
        double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
        if (median < limit)
            limit = median;
    }
    self->clock_limit_ms = limit < 10 ? 10 : limit;
    self->clock_limit_ns = now;
    return self->clock_limit_ms;
}

void
broker_clock_sample (broker_t *self, const char *key, const char *peer, double skew_ms,
                     int64_t now)
{
    if (!self->clocks && !(self->clocks = zhashx_new ()))
        return;
    clock_rec_t *c = zhashx_lookup (self->clocks, key);
    if (!c) {
        if (zhashx_size (self->clocks) >= CLOCKS_MAX || !(c = calloc (1, sizeof *c)))
            return;
        if (zhashx_insert (self->clocks, key, c) != 0) {
            free (c);
            return;
        }
    }
    snprintf (c->peer, sizeof c->peer, "%s", peer);
    c->sample_ms[c->next] = skew_ms;
    c->next = (c->next + 1) % CLOCK_SAMPLES;
    if (c->samples < CLOCK_SAMPLES)
        c->samples++;
    // Transit and a busy reactor only make a sample lower than the skew:
    // the largest of the last few is the estimate.
    double best = c->sample_ms[0];
    for (int i = 1; i < c->samples; i++)
        best = c->sample_ms[i] > best ? c->sample_ms[i] : best;
    c->skew_ms = best;
    c->seen_ns = now;
    double limit = broker_clock_limit_ms (self);
    if (fabs (c->skew_ms) > limit && (c->logged_ns == 0 || now - c->logged_ns >= CLOCK_LOG_EVERY_NS)) {
        log_warning ("clock skew: the clock of %s is %.0f ms %s the broker's (more than %.0f ms): "
                     "latencies and file times are off by as much; synchronise the clocks "
                     "(chrony, NTP)",
                     c->peer, fabs (c->skew_ms), c->skew_ms > 0 ? "ahead of" : "behind", limit);
        c->logged_ns = now;
    }
    else if (fabs (c->skew_ms) <= limit && c->logged_ns) {
        log_notice ("clock skew: the clock of %s is within %.0f ms of the broker's again",
                    c->peer, limit);
        c->logged_ns = 0;
    }
}

// A FILE's mtime against the broker's clock: a file closed in the future
// (by more than the sample can blur) says the clock of whoever wrote it
// (the camera's host, the NFS or CIFS server) is ahead. Files closed in
// the past say nothing (they waited to settle): such a sample counts as 0.
static void
s_clock_file (broker_t *self, zframe_t *identity, const char *experiment, int64_t mtime_ns,
              int64_t now)
{
    if (mtime_ns <= 0)
        return;
    char *hex = identity ? zframe_strhex (identity) : NULL;
    char key[160], peer[300];
    snprintf (key, sizeof key, "watcher %s", hex ? hex : "?");
    snprintf (peer, sizeof peer, "watcher %s (files of '%s')", hex ? hex : "?", experiment);
    free (hex);
    double ahead = (mtime_ns - now) / 1e6;
    broker_clock_sample (self, key, peer, ahead > 0 ? ahead : 0, now);
}

static void
s_on_file (broker_t *self, zframe_t *identity, proto_msg_t *msg)
{
    s_clock_file (self, identity, msg->experiment, msg->time_ns, util_time_ns ());
    exp_t *exp = broker_experiment (self, msg->experiment, util_time_ns ());
    if (!exp) {
        log_error ("cannot record experiment '%s': %s", msg->experiment,
                   store_error (self->store));
        return;
    }
    if (broker_file (self, exp, msg->name, msg->size, msg->time_ns, msg->time_ns) != 0)
        return;
    proto_msg_t ack = {.command = PROTO_ACK, .count = 1};
    ack.seqs = malloc (sizeof (uint64_t));
    if (!ack.seqs)
        return;
    ack.seqs[0] = msg->seq;
    s_after (self, identity, &ack);
}

static void s_ingest_one (broker_t *self, zsock_t *reader);
static void s_work_one (broker_t *self, zsock_t *reader);

// Up to this many messages are read per wake-up of the reactor: under load
// one poll per message would cost more than the message.
#define BATCH 256

// Handles up to BATCH waiting messages of 'reader' with 'one', then commits
// early if the group has grown large.
static void
s_drain (broker_t *self, zsock_t *reader, void (*one) (broker_t *, zsock_t *))
{
    for (int i = 0; i < BATCH && (zsock_events (reader) & ZMQ_POLLIN); i++)
        one (self, reader);
    if (store_uncommitted (self->store) > 5000)
        broker_commit (self);
}

static int
s_on_ingest (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    s_drain ((broker_t *) arg, reader, s_ingest_one);
    return 0;
}

// What a watcher sent that is not taken, with the watcher's identity.
static void
s_ingest_warn (broker_t *self, zframe_t *identity, const char *why)
{
    char *peer = identity ? zframe_strhex (identity) : NULL;
    broker_refused (self, "ingest: from watcher %s: %s", peer ? peer : "?", why);
    free (peer);
}

static void
s_ingest_one (broker_t *self, zsock_t *reader)
{
    zframe_t *identity = NULL;
    proto_msg_t msg;
    char err[512], key[64];
    int rc = proto_recv_from (reader, &identity, key, sizeof key, &msg, err, sizeof err);
    if (rc == -1)
        s_ingest_warn (self, identity, err);
    // With CURVE, only keys of clients/watchers/ feed the farm.
    if (rc == 0 && !broker_key_allowed (self, key, BROKER_ROLE_WATCHER)) {
        snprintf (err, sizeof err, "%s refused: key %s is not a watcher's (clients/watchers/)",
                  proto_command_name (msg.command), *key ? key : "(none)");
        s_ingest_warn (self, identity, err);
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
}

// ---------------------------------------------------------------------------
// Work: agents

// An agent's key in the table: its routing id in hex, in 'key' (a ROUTER's
// ids are at most 255 bytes), without the allocation of zframe_strhex.
static const char *
s_agent_key (zframe_t *identity, char key[512])
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *data = zframe_data (identity);
    size_t size = zframe_size (identity) < 255 ? zframe_size (identity) : 255;
    for (size_t i = 0; i < size; i++) {
        key[2 * i] = hex[data[i] >> 4];
        key[2 * i + 1] = hex[data[i] & 15];
    }
    key[2 * size] = '\0';
    return key;
}

static agent_rec_t *
s_agent (broker_t *self, zframe_t *identity)
{
    char key[512];
    return zhashx_lookup (self->agents, s_agent_key (identity, key));
}

static int64_t
s_expiry (broker_t *self, int64_t now)
{
    return now + (int64_t) self->cfg.broker.heartbeat_ms * self->cfg.broker.liveness * 1000000;
}

// ---------------------------------------------------------------------------
// Peers: who may do what (doc/security.md, "Threat model")

#define KEY_RECHECK_NS 1000000000LL  // a key's rights are looked up again after a second
#define KEY_CACHE_MAX 4096           // answers kept at once
#define REFUSED_PER_SECOND 20        // refusal lines logged a second, at most
#define AGENT_CORES_MAX 4096         // cores an agent may declare: its credit's cap
#define AGENT_IDS_PER_PEER 64        // agent ids one peer may add to the store an hour
#define AGENT_IDS_PER_HOUR_MIN 64    // ... and all peers, at least (else broker/max_agents)

typedef struct {
    int64_t until;  // the answer holds until then
    int ok;         // the answer
} s_key_seen_t;

static void
s_free_item (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

void
broker_refused (broker_t *self, const char *fmt, ...)
{
    int64_t second = util_time_ns () / 1000000000;
    if (second != self->quiet_second) {
        self->quiet_second = second;
        self->quiet_logged = 0;
    }
    if (self->quiet_logged >= REFUSED_PER_SECOND) {
        self->quiet_dropped++;
        return;
    }
    self->quiet_logged++;
    char line[1024];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (line, sizeof line, fmt, ap);
    va_end (ap);
    if (self->quiet_dropped)
        log_warning ("%s (and %lld refusal(s) not logged before it)", line,
                     (long long) self->quiet_dropped);
    else
        log_warning ("%s", line);
    self->quiet_dropped = 0;
}

int
broker_key_allowed (broker_t *self, const char *key, broker_role_t role)
{
    if (!self->auth)
        return 1;
    if (!key || !*key)
        return 0;
    char slot[64];
    snprintf (slot, sizeof slot, "%d:%s", (int) role, key);
    int64_t now = util_time_ns ();
    s_key_seen_t *seen = zhashx_lookup (self->key_cache, slot);
    if (seen && now < seen->until)
        return seen->ok;
    // zcertstore_lookup re-reads its directory when it changed: a file
    // removed takes the key's rights away, a file added gives them.
    zcertstore_t *store = role == BROKER_ROLE_WATCHER  ? self->keys_watchers
                          : role == BROKER_ROLE_AGENT  ? self->keys_agents
                          : role == BROKER_ROLE_OPERATOR ? self->operators
                                                         : NULL;
    int ok = zcertstore_lookup (self->keys_clients, key) != NULL
             && (!store || zcertstore_lookup (store, key) != NULL);
    if (!seen) {
        if (zhashx_size (self->key_cache) >= KEY_CACHE_MAX)
            zhashx_purge (self->key_cache);
        if (!(seen = calloc (1, sizeof *seen)))
            return ok;
        zhashx_insert (self->key_cache, slot, seen);
    }
    seen->until = now + KEY_RECHECK_NS;
    seen->ok = ok;
    return ok;
}

// The task of (pair, attempt) that 'agent' holds, left in its list with
// the list's cursor on it (zlistx_detach_cur takes it); NULL if it holds
// no such task. For RESULT, FAILED and DEFER: only the holder's answer
// counts.
static task_t *
s_held (agent_rec_t *agent, uint64_t pair, uint32_t attempt)
{
    if (!agent)
        return NULL;
    for (task_t *task = zlistx_first (agent->tasks); task; task = zlistx_next (agent->tasks))
        if (task->pair == (int64_t) pair)
            return task->attempt == (int) attempt ? task : NULL;
    return NULL;
}

// The agent that holds 'pair' in memory (any attempt), or NULL.
static agent_rec_t *
s_holder (broker_t *self, uint64_t pair)
{
    for (agent_rec_t *a = zhashx_first (self->agents); a; a = zhashx_next (self->agents))
        for (task_t *task = zlistx_first (a->tasks); task; task = zlistx_next (a->tasks))
            if (task->pair == (int64_t) pair)
                return a;
    return NULL;
}

// Whether the RESULT or FAILED 'msg' of 'agent' (NULL: its connection said
// no HELLO) may be acted on: the agent holds that attempt, or nobody holds
// the pair (the broker restarted, or presumed the holder dead) and the
// store says that attempt went to an agent of the sender's id. 1, or 0
// with why (the caller logs it and drops the message).
static int
s_may_answer (broker_t *self, agent_rec_t *agent, const proto_msg_t *msg, char *why,
              size_t whylen)
{
    if (!agent) {
        snprintf (why, whylen, "no HELLO on this connection");
        return 0;
    }
    if (s_held (agent, msg->pair, msg->attempt))
        return 1;
    agent_rec_t *holder = s_holder (self, msg->pair);
    if (holder) {
        snprintf (why, whylen, "the pair is out with agent '%s'%s", holder->id,
                  holder == agent ? " under another attempt" : "");
        return 0;
    }
    char sent_to[256] = "";
    int found = msg->attempt <= INT_MAX && msg->pair <= INT64_MAX
                    ? store_attempt_agent (self->store, (int64_t) msg->pair, (int) msg->attempt,
                                           sent_to, sizeof sent_to)
                    : 0;
    if (found == 1 && strcmp (sent_to, agent->id) == 0)
        return 1;
    if (found == 1)
        snprintf (why, whylen, "that attempt went to agent '%s'", sent_to);
    else
        snprintf (why, whylen, "%s",
                  found == 0 ? "no such attempt was dispatched" : store_error (self->store));
    return 0;
}

// A task whose agent was lost ('reason': presumed dead, or its deadline
// passed) goes back to the queue with the loss counted; a pair that has
// lost max_attempts agents fails instead (store_pair_lost). Takes task.
static void
s_task_lost (broker_t *self, task_t *task, const char *reason, int64_t now)
{
    int failed = 0;
    if (store_pair_lost (self->store, task->pair, task->attempt, reason,
                         self->cfg.broker.max_attempts, now, &failed)
        != 0)
        log_error ("cannot requeue pair %lld of '%s': %s", (long long) task->pair,
                   task->exp->name, store_error (self->store));
    if (failed) {
        log_warning ("pair %lld ('%s/%s') failed for good: agent lost %d times on this pair "
                     "(last: %s)",
                     (long long) task->pair, task->exp->name, task->stem,
                     self->cfg.broker.max_attempts, reason);
        char error[600];
        snprintf (error, sizeof error, "agent lost %d times on this pair (last: %s)",
                  self->cfg.broker.max_attempts, reason);
        s_publish_failed (self, task, self->cfg.broker.max_attempts, error, now);
        broker_task_destroy (&task);
        return;
    }
    broker_enqueue (self, task, 0);
}

// Puts an agent's tasks back at the head of the queue, oldest first; 'lost'
// counts it against each pair (the agent is presumed dead). A task whose
// deadline passed already went back: its place holder is dropped.
static void
s_requeue_tasks (broker_t *self, agent_rec_t *agent, const char *reason, int lost)
{
    task_t *task;
    while ((task = zlistx_last (agent->tasks))) {
        zlistx_detach (agent->tasks, zlistx_cursor (agent->tasks));
        int64_t now = util_time_ns ();
        if (task->expired)
            broker_task_destroy (&task);
        else if (lost)
            s_task_lost (self, task, reason, now);
        else {
            store_pair_requeue (self->store, task->pair, reason, now);
            broker_enqueue (self, task, 0);
        }
    }
}

// Forgets an agent; 'lost': it vanished (presumed dead), which counts
// against the pairs it held, rather than going politely.
static void
s_agent_drop (broker_t *self, agent_rec_t *agent, const char *reason, int lost)
{
    log_notice ("agent '%s' on %s %s; %zu task(s) back in the queue", agent->id,
                agent->host, reason, zlistx_size (agent->tasks));
    s_requeue_tasks (self, agent, reason, lost);
    char key[512];
    s_publish_agent (self, agent, lost ? "dead" : "left", reason);
    zhashx_delete (self->agents, s_agent_key (agent->identity, key));
}

// An agent gone for a benign reason (it said so, or hello again): its tasks
// go back without a loss counted.
static void
s_agent_forget (broker_t *self, agent_rec_t *agent, const char *reason)
{
    s_agent_drop (self, agent, reason, 0);
}

// How long a task may stay out with 'agent': broker/task_deadline_ms, or
// else 10 times the median compute time of its last results, at least
// 30 s; 10 minutes before it has any (a slow agent's first large fields
// must not be taken from it).
static int64_t
s_deadline_ns (broker_t *self, const agent_rec_t *agent)
{
    if (self->cfg.broker.task_deadline_ms > 0)
        return (int64_t) self->cfg.broker.task_deadline_ms * 1000000;
    if (agent->computes == 0)
        return (int64_t) 600 * 1000000000;
    int64_t sorted[COMPUTE_KEPT];
    int n = agent->computes;
    memcpy (sorted, agent->compute_ns, sizeof sorted[0] * (size_t) n);
    for (int i = 1; i < n; i++)  // a few values: insertion sort
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int64_t t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    int64_t deadline = 10 * sorted[n / 2];
    int64_t floor = (int64_t) 30 * 1000000000;
    return deadline > floor ? deadline : floor;
}

// Counts the compute time a RESULT of 'agent' reports, for its deadline.
static void
s_agent_compute (agent_rec_t *agent, const proto_msg_t *msg)
{
    if (!agent || msg->time_ns <= 0)
        return;
    agent->compute_ns[agent->compute_next] = msg->time_ns;
    agent->compute_next = (agent->compute_next + 1) % COMPUTE_KEPT;
    if (agent->computes < COMPUTE_KEPT)
        agent->computes++;
}

// The tasks out past their deadline, on agents that still answer
// heartbeats (a hung processor, a livelock): each goes back to the queue
// for another agent, counted as a lost agent. The holder keeps the slot
// (its credit) until it answers; its late answer is then a duplicate, or
// the result if none came first.
static void
s_check_deadlines (broker_t *self, int64_t now)
{
    for (agent_rec_t *agent = zhashx_first (self->agents); agent;
         agent = zhashx_next (self->agents))
        for (task_t *task = zlistx_first (agent->tasks); task;
             task = zlistx_next (agent->tasks)) {
            if (task->expired || task->deadline_ns == 0 || now <= task->deadline_ns)
                continue;
            task_t *copy =
                broker_task_new (task->pair, task->exp, task->stem, task->name_a, task->name_b);
            if (!copy)
                continue;  // tried again at the next heartbeat
            copy->closed_ns = task->closed_ns;
            copy->attempt = task->attempt;
            task->expired = 1;
            char reason[512];
            snprintf (reason, sizeof reason, "deadline of %.0f s passed on agent '%s'",
                      (task->deadline_ns - task->dispatched_ns) / 1e9, agent->id);
            log_warning ("pair %lld ('%s/%s'): %s: requeued for another agent",
                         (long long) task->pair, task->exp->name, task->stem, reason);
            s_task_lost (self, copy, reason, now);
        }
}

static int
s_wake (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    self->wake_timer = -1;
    broker_dispatch (self);
    return 0;
}

// Sends what an agent's batch holds. A batch the agent cannot take now
// (gone, or its queue full) puts its tasks back: the pairs wait for
// another agent (a gone one expires at the next heartbeat check); the
// RECORDED in it are lost, and the agent sends those results again.
static void
s_flush_agent (broker_t *self, agent_rec_t *agent)
{
    if (proto_batch_size (agent->out) == 0)
        return;
    size_t tasks = agent->out_tasks;
    agent->out_tasks = 0;
    if (proto_batch_send (agent->out, agent->identity, self->work) == 0)
        return;
    int64_t now = util_time_ns ();
    for (size_t i = 0; i < tasks; i++) {
        task_t *task = zlistx_last (agent->tasks);
        if (!task)
            break;
        zlistx_detach (agent->tasks, zlistx_cursor (agent->tasks));
        agent->credit++;
        store_pair_requeue (self->store, task->pair, "send failed", now);
        sched_put_back (self->sched, task->exp->id, task->pair, task);
    }
}

static void
s_flush_agents (broker_t *self)
{
    for (agent_rec_t *agent = zhashx_first (self->agents); agent;
         agent = zhashx_next (self->agents))
        s_flush_agent (self, agent);
}

// Gives one task to an agent: recorded as dispatched, and into the batch
// that s_flush_agents sends. 0, or -1 if it went back to the queue.
static int
s_send_task (broker_t *self, agent_rec_t *agent, task_t *task, int64_t now)
{
    for (task_t *held = zlistx_first (agent->tasks); held; held = zlistx_next (agent->tasks))
        if (held->pair == task->pair) {
            // Its deadline passed on this agent, which still holds it: the
            // pair waits for another.
            sched_put_back (self->sched, task->exp->id, task->pair, task);
            return -1;
        }
    int attempt = store_pair_dispatch (self->store, task->pair, agent->id, now);
    if (attempt < 0) {
        // Not pending any more (done by a late result): drop it.
        broker_task_destroy (&task);
        return 0;
    }
    task->attempt = attempt;
    task->dispatched_ns = now;
    task->deadline_ns = now + s_deadline_ns (self, agent);
    exp_t *exp = task->exp;
    char path_a[PATH_MAX * 2], path_b[PATH_MAX * 2] = "", output[PATH_MAX];
    // Under the watch root, or where the archive put them (doc/storage.md).
    storage_frame_path (self, exp, task->name_a, path_a, sizeof path_a);
    if (task->name_b)
        storage_frame_path (self, exp, task->name_b, path_b, sizeof path_b);
    snprintf (output, sizeof output, "%s/%s.txt", exp->name, task->stem);
    proto_msg_t msg = {.command = PROTO_TASK,
                       .pair = (uint64_t) task->pair,
                       .attempt = (uint32_t) attempt,
                       .experiment = exp->name,
                       .path_a = path_a,
                       .path_b = path_b,
                       .settings = exp->settings,
                       .output = output};
    if (proto_batch_size (agent->out) == PROTO_MAX_BATCH)
        s_flush_agent (self, agent);
    if (proto_batch_add (agent->out, &msg) != 0) {
        store_pair_requeue (self->store, task->pair, "cannot encode the task", now);
        sched_put_back (self->sched, exp->id, task->pair, task);
        return -1;
    }
    agent->out_tasks++;
    agent->credit--;
    zlistx_add_end (agent->tasks, task);
    return 0;
}

void
broker_dispatch (broker_t *self)
{
    // The free-space guard holds new work back while a volume it writes to
    // is critically full (doc/storage.md); tasks out finish.
    if (self->store_failed || self->guard_paused || sched_size (self->sched) == 0) {
        s_flush_agents (self);
        return;
    }
    int64_t now = util_time_ns ();
    // Round the agents with credit, one task each per round, so that work
    // spreads evenly; the scheduler says which pair goes next, if any may.
    int gave = 1, more = 1;
    while (gave && more) {
        gave = 0;
        for (agent_rec_t *agent = zhashx_first (self->agents); agent && more;
             agent = zhashx_next (self->agents)) {
            if (agent->credit == 0 || !broker_key_allowed (self, agent->key, BROKER_ROLE_AGENT))
                continue;
            int64_t exp, pair;
            task_t *task = sched_next (self->sched, now, &exp, &pair);
            if (!task)
                more = 0;
            else if (s_send_task (self, agent, task, now) == 0)
                gave = 1;
        }
    }
    s_flush_agents (self);
    // Held back by a rate limit: come back when a token is there.
    int64_t at = more ? -1 : sched_next_time (self->sched, now);
    if (at >= 0 && self->wake_timer < 0 && self->loop) {
        int64_t ms = (at - now + 999999) / 1000000;
        self->wake_timer = zloop_timer (self->loop, (size_t) (ms > 0 ? ms : 1), 1, s_wake, self);
    }
}

// Removes the task of 'pair' from the agent's list; NULL if it has none.
static task_t *
s_take_task (agent_rec_t *agent, int64_t pair)
{
    for (task_t *task = zlistx_first (agent->tasks); task; task = zlistx_next (agent->tasks))
        if (task->pair == pair)
            return zlistx_detach_cur (agent->tasks);
    return NULL;
}

// Counts 'n' in the second of 'now', clearing the seconds skipped since
// the ring's last count.
void
broker_count (rate_ring_t *ring, int64_t now, int n)
{
    int64_t this_second = now / 1000000000;
    if (this_second != ring->second) {
        int64_t gap = this_second - ring->second;
        for (int64_t s = 1; s <= gap && s <= 60; s++)
            ring->count[(ring->second + s) % 60] = 0;
        ring->second = this_second;
    }
    ring->count[this_second % 60] += n;
}

// Counts per second over the last 'seconds' complete seconds.
double
broker_rate (rate_ring_t *ring, int64_t now, int seconds)
{
    broker_count (ring, now, 0);
    int64_t sum = 0;
    for (int s = 1; s <= seconds; s++)
        sum += ring->count[(ring->second - s + 60) % 60];
    return (double) sum / seconds;
}

// A result recorded for a task the broker sent: its experiment's counts and
// latency, and the feedback it makes.
static void
s_recorded (broker_t *self, task_t *task, const agent_rec_t *agent, const proto_msg_t *msg,
            int64_t now)
{
    exp_t *exp = task->exp;
    broker_count (&exp->results, now, 1);
    // Live pairs only: a pair retried or backfilled by hand hours later
    // says nothing of how fast the farm keeps up.
    if (task->closed_ns > 0 && !task->by_hand) {
        exp->latency_ms[exp->latency_next] = (now - task->closed_ns) / 1e6;
        exp->latency_next = (exp->latency_next + 1) % LATENCY_KEPT;
        if (exp->latencies < LATENCY_KEPT)
            exp->latencies++;
        // The histogram counts every result since start; a clock stepped
        // back (negative latency) counts as 0.
        static const double bounds[LATENCY_BUCKETS] = LATENCY_BOUNDS_S;
        double s = now > task->closed_ns ? (now - task->closed_ns) / 1e9 : 0;
        int b = 0;
        while (b < LATENCY_BUCKETS && s > bounds[b])
            b++;
        exp->latency_in[b]++;
        exp->latency_sum_s += s;
    }
    broker_feedback (self, task, msg, now);
    s_publish_result (self, task, agent, msg, now);
}

// A RESULT or FAILED not acted on: logged (rate-limited), not stored, and
// answered so that the sender stops resending it: an agent that said no
// HELLO is asked for one (DISCONNECT: it introduces itself and resends,
// as after a broker restart); any other gets RECORDED (an honest agent
// whose task was taken back drops it; the pair's holder answers for it).
static void
s_refuse_answer (broker_t *self, zframe_t *identity, agent_rec_t *agent, const proto_msg_t *msg,
                 const char *why)
{
    char *peer = agent ? NULL : zframe_strhex (identity);
    broker_refused (self, "work: %s of pair %llu attempt %u from %s%s%s ignored: %s",
                    proto_command_name (msg->command), (unsigned long long) msg->pair,
                    msg->attempt, agent ? "agent '" : "connection ",
                    agent ? agent->id : (peer ? peer : "?"), agent ? "'" : "", why);
    free (peer);
    if (!agent) {
        proto_msg_t bye = {.command = PROTO_DISCONNECT};
        proto_send (&bye, identity, self->work);
        return;
    }
    proto_msg_t ok = {.command = PROTO_RECORDED, .pair = msg->pair, .attempt = msg->attempt};
    s_after (self, identity, &ok);
}

static void
s_on_result (broker_t *self, zframe_t *identity, agent_rec_t *agent, proto_msg_t *msg)
{
    int64_t now = util_time_ns ();
    char why[512];
    if (!s_may_answer (self, agent, msg, why, sizeof why)) {
        s_refuse_answer (self, identity, agent, msg, why);
        return;
    }
    s_agent_compute (agent, msg);  // only the holder's figures set its deadlines
    store_result_t r = {.mean_u = msg->figures[PROTO_FIG_MEAN_U],
                        .mean_v = msg->figures[PROTO_FIG_MEAN_V],
                        .mean_speed = msg->figures[PROTO_FIG_MEAN_SPEED],
                        .valid_fraction = msg->figures[PROTO_FIG_VALID_FRACTION],
                        .vorticity = msg->figures[PROTO_FIG_VORTICITY],
                        .nx = (int) msg->figures[PROTO_FIG_NX],
                        .ny = (int) msg->figures[PROTO_FIG_NY],
                        .compute_ns = msg->time_ns,
                        .path = msg->output,
                        .field = msg->blob,
                        .field_size = msg->blob_size};
    int recorded = 0;
    if (store_pair_result (self->store, (int64_t) msg->pair, (int) msg->attempt, agent->id, &r,
                           now, &recorded)
        != 0) {
        log_error ("cannot record the result of pair %llu: %s",
                   (unsigned long long) msg->pair, store_error (self->store));
        return;  // not RECORDED: the agent resends it
    }
    task_t *task = s_take_task (agent, (int64_t) msg->pair);
    if (task)
        agent->credit++;  // the slot the task held is free again
    agent->done += recorded;
    if (task && recorded)
        s_recorded (self, task, agent, msg, now);
    broker_task_destroy (&task);
    self->results += recorded;
    broker_count (&self->per_second, now, recorded);
    proto_msg_t ok = {.command = PROTO_RECORDED, .pair = msg->pair, .attempt = msg->attempt};
    s_after (self, identity, &ok);
}

static void
s_on_failed (broker_t *self, zframe_t *identity, agent_rec_t *agent, proto_msg_t *msg)
{
    int64_t now = util_time_ns ();
    char why[512];
    if (!s_may_answer (self, agent, msg, why, sizeof why)) {
        s_refuse_answer (self, identity, agent, msg, why);
        return;
    }
    int failed = 0;
    if (store_pair_failure (self->store, (int64_t) msg->pair, (int) msg->attempt,
                            agent->id, msg->text ? msg->text : "",
                            self->cfg.broker.max_attempts, now, &failed)
        != 0) {
        log_error ("cannot record the failure of pair %llu: %s",
                   (unsigned long long) msg->pair, store_error (self->store));
        return;
    }
    task_t *task = s_take_task (agent, (int64_t) msg->pair);
    if (task)
        agent->credit++;
    if (failed)
        log_warning ("pair %llu failed for good: %s", (unsigned long long) msg->pair,
                     msg->text ? msg->text : "");
    if (task && failed)
        s_publish_failed (self, task, self->cfg.broker.max_attempts, msg->text ? msg->text : "",
                          now);
    if (task && !failed) {
        // Another attempt, after the commit and a delay that doubles with
        // each failure: a pair that fails at once does not use up its
        // attempts in a few milliseconds.
        int64_t delay = BACKOFF_BASE_MS;
        for (int i = 1; i < task->failures + 1 && delay < BACKOFF_MAX_MS; i++)
            delay *= 2;
        task->failures++;
        task->not_before_ns = now + (delay < BACKOFF_MAX_MS ? delay : BACKOFF_MAX_MS) * 1000000;
        zlistx_add_end (self->fresh, task);
    }
    else
        broker_task_destroy (&task);
    proto_msg_t ok = {.command = PROTO_RECORDED, .pair = msg->pair, .attempt = msg->attempt};
    s_after (self, identity, &ok);
}

// Whether agent 'id' from 'peer' may get a row in the store's agents table
// now: an id already recorded since start may; a new one only while its
// peer (its CURVE key, else the host it names) has added fewer than
// AGENT_IDS_PER_PEER this hour, and all peers together fewer than
// broker/max_agents (at least AGENT_IDS_PER_HOUR_MIN). So HELLOs with ever
// new ids add a bounded number of rows an hour; the agent works either way.
static int
s_may_record_agent (broker_t *self, const char *peer, const char *id, int64_t now)
{
    if (zhashx_lookup (self->recorded_ids, id))
        return 1;
    int64_t hour = now / 3600000000000LL;
    if (hour != self->new_ids_hour) {
        self->new_ids_hour = hour;
        self->new_ids_total = 0;
        zhashx_purge (self->new_ids);
    }
    int64_t total_max = self->cfg.broker.max_agents > AGENT_IDS_PER_HOUR_MIN
                            ? self->cfg.broker.max_agents
                            : AGENT_IDS_PER_HOUR_MIN;
    intptr_t from_peer = (intptr_t) zhashx_lookup (self->new_ids, peer);
    if (from_peer >= AGENT_IDS_PER_PEER || self->new_ids_total >= total_max) {
        broker_refused (self,
                        "work: agent '%s' from %s not recorded in the store: %s new agent ids "
                        "this hour already (at most %d a peer, %lld in all)",
                        id, peer, from_peer >= AGENT_IDS_PER_PEER ? "its peer gave" : "peers gave",
                        AGENT_IDS_PER_PEER, (long long) total_max);
        return 0;
    }
    zhashx_update (self->new_ids, peer, (void *) (from_peer + 1));
    self->new_ids_total++;
    // Remembered since start, within the same bound (then forgotten: only
    // a few more rows an hour).
    if (zhashx_size (self->recorded_ids) >= (size_t) total_max * 4)
        zhashx_purge (self->recorded_ids);
    zhashx_insert (self->recorded_ids, id, (void *) 1);
    return 1;
}

// DEFER: the agent holding (pair, attempt) cannot do it now for a reason
// of its own (its results disk is full): the pair goes back to the queue
// without an attempt counted; the task's slot is freed but not its credit
// (the agent sends READY when it has room again). From anyone else it is
// stale and changes nothing. RECORDED either way, so that it stops
// resending.
static void
s_on_defer (broker_t *self, zframe_t *identity, agent_rec_t *agent, proto_msg_t *msg)
{
    task_t *task = NULL;
    for (task_t *t = agent ? zlistx_first (agent->tasks) : NULL; t;
         t = zlistx_next (agent->tasks))
        if (t->pair == (int64_t) msg->pair && t->attempt == (int) msg->attempt && !t->expired) {
            task = t;
            break;
        }
    if (task) {
        int deferred = 0;
        if (store_pair_defer (self->store, task->pair, task->attempt, agent->id,
                              msg->text ? msg->text : "", util_time_ns (), &deferred)
            != 0) {
            log_error ("cannot defer pair %lld: %s", (long long) task->pair,
                       store_error (self->store));
            return;  // not RECORDED: the agent sends it again
        }
        zlistx_detach_cur (agent->tasks);
        log_warning ("agent '%s' defers pair %lld ('%s/%s'): %s", agent->id,
                     (long long) task->pair, task->exp->name, task->stem,
                     msg->text ? msg->text : "");
        if (deferred) {
            task->attempt = -1;  // not fresh: never sampled out
            zlistx_add_end (self->fresh, task);  // queued again after the commit
        }
        else
            broker_task_destroy (&task);
    }
    proto_msg_t ok = {.command = PROTO_RECORDED, .pair = msg->pair, .attempt = msg->attempt};
    s_after (self, identity, &ok);
}

static void
s_on_hello (broker_t *self, zframe_t *identity, const char *key, proto_msg_t *msg)
{
    int64_t now = util_time_ns ();
    agent_rec_t *agent = s_agent (self, identity);
    if (agent)  // a reconnect under the same identity: its tasks start again
        s_agent_forget (self, agent, "said hello again");
    else if (zhashx_size (self->agents) >= (size_t) self->cfg.broker.max_agents) {
        // Not answered: the agent's heartbeats get DISCONNECT (an unknown
        // agent), so it tries again once a heartbeat, not in a tight loop.
        broker_refused (self, "work: HELLO of agent '%s' on %s refused: %zu agents known "
                              "already (broker/max_agents)",
                        msg->name ? msg->name : "?", msg->text ? msg->text : "?",
                        zhashx_size (self->agents));
        return;
    }
    agent = calloc (1, sizeof *agent);
    if (!agent)
        return;
    agent->identity = zframe_dup (identity);
    agent->id = strdup (msg->name && *msg->name ? msg->name : "?");
    agent->host = strdup (msg->text ? msg->text : "?");
    // Its credit is capped by its cores: a sane number of them.
    agent->cores = msg->count > AGENT_CORES_MAX ? AGENT_CORES_MAX : (int) msg->count;
    if (msg->count > AGENT_CORES_MAX)
        log_warning ("agent '%s' on %s declares %u cores: taken as %d", agent->id ? agent->id : "?",
                     agent->host ? agent->host : "?", msg->count, AGENT_CORES_MAX);
    snprintf (agent->key, sizeof agent->key, "%s", key ? key : "");
    agent->tasks = zlistx_new ();
    agent->out = proto_batch_new ();
    agent->expires_ns = s_expiry (self, now);
    if (!agent->identity || !agent->id || !agent->host || !agent->tasks || !agent->out) {
        s_agent_destroy (&agent);
        return;
    }
    zlistx_set_destructor (agent->tasks, (zlistx_destructor_fn *) broker_task_destroy);
    char slot[512];
    zhashx_insert (self->agents, s_agent_key (identity, slot), agent);
    if (s_may_record_agent (self, *agent->key ? agent->key : agent->host, agent->id, now))
        store_agent_seen (self->store, agent->id, agent->host, agent->cores,
                          msg->settings ? msg->settings : "", now);
    log_notice ("agent '%s' on %s with %d cores", agent->id, agent->host, agent->cores);
    s_publish_agent (self, agent, "joined", NULL);
}

static int
s_on_work (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    broker_t *self = arg;
    s_drain (self, reader, s_work_one);
    broker_dispatch (self);
    return 0;
}

// One message from an agent (alone, or one of a BATCH).
static void
s_work_msg (broker_t *self, zframe_t *identity, const char *key, proto_msg_t *msg)
{
    if (msg->command == PROTO_HELLO)
        s_on_hello (self, identity, key, msg);
    agent_rec_t *agent = s_agent (self, identity);
    if (!agent && msg->command != PROTO_RESULT && msg->command != PROTO_FAILED
        && msg->command != PROTO_HELLO && msg->command != PROTO_DEFER) {
        // An agent the broker does not know (it restarted): ask it to say
        // hello again, its state is gone.
        proto_msg_t bye = {.command = PROTO_DISCONNECT};
        proto_send (&bye, identity, self->work);
    }
    if (agent)
        agent->expires_ns = s_expiry (self, util_time_ns ());
    switch (msg->command) {
    case PROTO_READY:
        if (agent) {
            // Never more than its cores, less the tasks it holds: a READY
            // of 4294967295 must not take every task from the others.
            size_t held = zlistx_size (agent->tasks);
            uint64_t room = (size_t) agent->cores > held ? (size_t) agent->cores - held : 0;
            uint64_t credit = (uint64_t) agent->credit + msg->count;
            if (credit > room) {
                if (!agent->clamped)
                    log_warning ("work: agent '%s' on %s asks for %llu task(s) with %d core(s) "
                                 "and %zu task(s) held: given %llu",
                                 agent->id, agent->host, (unsigned long long) credit,
                                 agent->cores, held, (unsigned long long) room);
                agent->clamped = 1;
                credit = room;
            }
            agent->credit = (uint32_t) credit;
        }
        break;
    case PROTO_RESULT:
        s_on_result (self, identity, agent, msg);
        break;
    case PROTO_DEFER:
        s_on_defer (self, identity, agent, msg);
        break;
    case PROTO_FAILED:
        s_on_failed (self, identity, agent, msg);
        break;
    case PROTO_DISCONNECT:
        if (agent)
            s_agent_forget (self, agent, "disconnected");
        break;
    case PROTO_HEARTBEAT:
        if (agent && msg->time_ns > 0) {
            char key[300], peer[300];
            snprintf (key, sizeof key, "agent %s", agent->id);
            snprintf (peer, sizeof peer, "agent '%s' on %s", agent->id, agent->host);
            broker_clock_sample (self, key, peer, (msg->time_ns - util_time_ns ()) / 1e6,
                                 util_time_ns ());
        }
        break;
    case PROTO_HELLO:
        break;
    default:
        log_warning ("work: from agent '%s': unexpected %s", agent ? agent->id : "unknown",
                     proto_command_name (msg->command));
    }
}

static void
s_work_one (broker_t *self, zsock_t *reader)
{
    zframe_t *identity = NULL;
    proto_msg_t msg;
    char err[512], key[64];
    int rc = proto_recv_from (reader, &identity, key, sizeof key, &msg, err, sizeof err);
    agent_rec_t *agent = identity ? s_agent (self, identity) : NULL;
    if (rc != 0) {
        if (rc == -1)
            broker_refused (self, "work: from agent '%s': %s", agent ? agent->id : "unknown",
                            err);
        zframe_destroy (&identity);
        proto_msg_release (&msg);
        return;
    }
    // With CURVE, only keys of clients/agents/ use work, and only while
    // their certificate is there: a revoked agent is forgotten (its tasks
    // go back to the queue) and nothing it sends is taken.
    if (!broker_key_allowed (self, key, BROKER_ROLE_AGENT)) {
        broker_refused (self, "work: %s from key %s refused: not an agent's key (clients/agents/)%s",
                        proto_command_name (msg.command), *key ? key : "(none)",
                        agent ? "; its agent is forgotten" : "");
        if (agent)
            s_agent_forget (self, agent, "has a key no longer admitted");
        proto_msg_release (&msg);
        zframe_destroy (&identity);
        return;
    }
    for (size_t i = 0; i < proto_count (&msg); i++)
        s_work_msg (self, identity, key, proto_at (&msg, i));
    proto_msg_release (&msg);
    zframe_destroy (&identity);
}

static int
s_heartbeat (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    broker_t *self = arg;
    int64_t now = util_time_ns ();
    zlistx_t *dead = zlistx_new ();
    for (agent_rec_t *agent = zhashx_first (self->agents); agent;
         agent = zhashx_next (self->agents)) {
        if (now > agent->expires_ns)
            zlistx_add_end (dead, agent);
        else {
            proto_msg_t beat = {.command = PROTO_HEARTBEAT, .time_ns = now};
            proto_send (&beat, agent->identity, self->work);
        }
    }
    for (agent_rec_t *agent = zlistx_first (dead); agent; agent = zlistx_next (dead))
        s_agent_drop (self, agent, "is silent: presumed dead", 1);
    zlistx_destroy (&dead);
    s_check_deadlines (self, now);
    broker_dispatch (self);
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
    exp_t *exp = broker_experiment (self, experiment, util_time_ns ());
    task_t *task = exp ? broker_task_new (pair, exp, stem, name_a, name_b) : NULL;
    if (!task)
        return -1;
    task->closed_ns = store_pair_closed (self->store, pair);  // its frame's mtime
    broker_enqueue (self, task, 0);
    return 0;
}

static int
s_reoffer (void *arg, const char *experiment, const char *name, int64_t file)
{
    broker_t *self = arg;
    char err[512];
    int64_t now = util_time_ns ();
    s_offer_t ctx = {self, now, broker_experiment (self, experiment, now), 0};
    if (!ctx.exp)
        return -1;
    pairing_offer (self->pairing, experiment, name, file, s_on_pair, &ctx, err, sizeof err);
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

// A directory of certificates the configuration names with 'key'; 0, or -1
// with err.
static int
s_cert_dir (const char *path, const char *key, char *err, size_t errlen)
{
    struct stat st;
    int found = stat (path, &st) == 0;
    if (found && S_ISDIR (st.st_mode))
        return 0;
    snprintf (err, errlen, "cannot read the directory of certificates '%s' (%s): %s", path, key,
              found ? "not a directory" : strerror (errno));
    return -1;
}

// For security/curve on: the broker's certificate (the caller destroys it),
// and zauth admitting the clients of the clients directory on every socket
// of this process (zauth serves ZAP for the whole ZeroMQ context). NULL
// with err on failure.
static zcert_t *
s_secure (broker_t *self, char *err, size_t errlen)
{
    const config_t *cfg = &self->cfg;
    zcert_t *cert =
        secure_cert_load (cfg->security.broker_cert, "security/broker_cert", 1, err, errlen);
    if (!cert || s_cert_dir (cfg->security.clients, "security/clients", err, errlen)
        || s_cert_dir (cfg->security.operators, "security/operators", err, errlen))
        goto fail;
    self->auth = zactor_new (zauth, NULL);
    self->operators = zcertstore_new (cfg->security.operators);
    // The roles, beside zauth's own store: each message's key is looked up
    // in them (broker_key_allowed). The directories may be absent: no key
    // has that role until one is made.
    char dir[PATH_MAX + 16];
    self->keys_clients = zcertstore_new ((char *) cfg->security.clients);
    snprintf (dir, sizeof dir, "%s/watchers", cfg->security.clients);
    self->keys_watchers = zcertstore_new (dir);
    snprintf (dir, sizeof dir, "%s/agents", cfg->security.clients);
    self->keys_agents = zcertstore_new (dir);
    self->key_cache = zhashx_new ();
    if (self->key_cache)
        zhashx_set_destructor (self->key_cache, s_free_item);
    if (!self->auth || !self->operators || !self->keys_clients || !self->keys_watchers
        || !self->keys_agents || !self->key_cache) {
        snprintf (err, errlen, "cannot start the authenticator: out of memory");
        goto fail;
    }
    zstr_sendx (self->auth, "CURVE", cfg->security.clients, NULL);
    zsock_wait (self->auth);
    return cert;
fail:
    zcert_destroy (&cert);
    return NULL;
}

void
broker_settings_format (const config_t *cfg, char *out, size_t size)
{
    // The text agents read with piv_settings_parse; config_load checked
    // each value by piv_settings_check_key.
    piv_settings_t s;
    char err[256];
    piv_settings_init (&s);
    piv_settings_set_passes (&s, cfg->piv.passes, err, sizeof err);
    piv_deform_parse (cfg->piv.deform, &s.deform, err, sizeof err);
    s.overlap = cfg->piv.overlap;
    s.final_iterations = cfg->piv.iterations;
    piv_settings_format (&s, out, size);
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
    self->wake_timer = -1;
    feedback_settings_init (&self->feedback);
    self->experiments = zhashx_new ();
    self->sched = sched_new ();
    self->fresh = zlistx_new ();
    self->backoff = zlistx_new ();
    self->backoff_timer = -1;
    self->agents = zhashx_new ();
    self->after = zlistx_new ();
    self->new_ids = zhashx_new ();
    self->recorded_ids = zhashx_new ();
    if (!self->experiments || !self->sched || !self->fresh || !self->backoff || !self->agents
        || !self->after
        || !self->new_ids || !self->recorded_ids) {
        snprintf (err, errlen, "cannot start the broker: out of memory");
        goto fail;
    }
    zhashx_set_destructor (self->experiments, (zhashx_destructor_fn *) s_exp_destroy);
    zlistx_set_destructor (self->fresh, (zlistx_destructor_fn *) broker_task_destroy);
    zlistx_set_destructor (self->backoff, (zlistx_destructor_fn *) broker_task_destroy);
    zhashx_set_destructor (self->agents, (zhashx_destructor_fn *) s_agent_destroy);
    zlistx_set_destructor (self->after, (zlistx_destructor_fn *) s_after_destroy);
    // Counts and flags, not pointers: nothing to free (zhashx's default).

    if (strcmp (cfg->broker.store_fields, "all") == 0)
        self->fields_every = 1;
    else if (strcmp (cfg->broker.store_fields, "none") == 0)
        self->fields_every = 0;
    else
        self->fields_every = atoi (cfg->broker.store_fields + strlen ("every "));
    store_durability_t durability = strcmp (cfg->broker.durability, "normal") == 0
                                        ? STORE_DURABILITY_NORMAL
                                        : STORE_DURABILITY_FULL;
    if (!(self->store = store_new (cfg->broker.store, durability, err, errlen)))
        goto fail;
    store_set_fields (self->store, self->fields_every);
    if (!(self->pairing = pairing_new (cfg, err, errlen)))
        goto fail;

    int64_t now = util_time_ns ();
    int requeued = store_requeue_all (self->store, now);
    if (requeued > 0)
        log_notice ("%d pair(s) dispatched before a stop are pending again", requeued);
    if (requeued < 0 || store_files_waiting (self->store, s_pairs_per_file (self), s_reoffer, self) < 0
        || store_commit (self->store, err, errlen) != 0) {
        if (requeued < 0 || !*err)
            snprintf (err, errlen, "cannot read the store '%s': %s", cfg->broker.store,
                      store_error (self->store));
        goto fail;
    }
    // Pairs re-made above were already in the store: they are not fresh.
    zlistx_purge (self->fresh);
    if (broker_settings_load (self) != 0 || store_pairs_in_state (self->store, STORE_PENDING, s_load_pending, self) < 0) {
        snprintf (err, errlen, "cannot read the store '%s': %s", cfg->broker.store,
                  store_error (self->store));
        goto fail;
    }
    zcert_t *cert = NULL;
    if (secure_on (cfg) && !(cert = s_secure (self, err, errlen)))
        goto fail;
    self->ingest = s_bind (ZMQ_ROUTER, cfg->broker.ingest, cert, err, errlen);
    self->work = self->ingest ? s_bind (ZMQ_ROUTER, cfg->broker.work, cert, err, errlen) : NULL;
    self->control =
        self->work ? s_bind (ZMQ_ROUTER, cfg->broker.control, cert, err, errlen) : NULL;
    self->publish =
        self->control ? s_bind (ZMQ_PUB, cfg->broker.publish, cert, err, errlen) : NULL;
    zcert_destroy (&cert);
    if (!self->publish)
        goto fail;
    self->loop = zloop_new ();
    if (!self->loop) {
        snprintf (err, errlen, "cannot start the broker: out of memory");
        goto fail;
    }
    zloop_reader (self->loop, self->ingest, s_on_ingest, self);
    zloop_reader (self->loop, self->work, s_on_work, self);
    zloop_reader (self->loop, self->control, broker_on_control, self);
    zloop_timer (self->loop, cfg->broker.commit_ms > 0 ? (size_t) cfg->broker.commit_ms : 1, 0,
                 s_commit_timer, self);
    zloop_timer (self->loop, (size_t) cfg->broker.heartbeat_ms, 0, s_heartbeat, self);
    if (storage_start (self, err, errlen) != 0)
        goto fail;
    log_notice ("broker: %zu pair(s) pending; ingest %s, work %s, control %s, publish %s%s",
                sched_size (self->sched), broker_endpoint (self, "ingest"),
                broker_endpoint (self, "work"), broker_endpoint (self, "control"),
                broker_endpoint (self, "publish"), self->auth ? "; CURVE on" : "");
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
        broker_commit (self);
        // Agents learn at once that their tasks are gone, not after a timeout.
        if (self->work && self->agents)
            for (agent_rec_t *a = zhashx_first (self->agents); a; a = zhashx_next (self->agents)) {
                proto_msg_t bye = {.command = PROTO_DISCONNECT};
                proto_send (&bye, a->identity, self->work);
            }
    }
    zloop_destroy (&self->loop);
    free (self->fd_watch);
    storage_stop (self);
    zsock_destroy (&self->ingest);
    zsock_destroy (&self->work);
    zsock_destroy (&self->control);
    zsock_destroy (&self->publish);
    zactor_destroy (&self->auth);
    zcertstore_destroy (&self->operators);
    zcertstore_destroy (&self->keys_clients);
    zcertstore_destroy (&self->keys_watchers);
    zcertstore_destroy (&self->keys_agents);
    zhashx_destroy (&self->key_cache);
    zhashx_destroy (&self->new_ids);
    zhashx_destroy (&self->recorded_ids);
    zhashx_destroy (&self->agents);
    if (self->sched)
        sched_clear (self->sched, s_task_free, NULL);
    sched_destroy (&self->sched);
    zlistx_destroy (&self->fresh);
    zlistx_destroy (&self->backoff);
    zlistx_destroy (&self->after);
    zhashx_destroy (&self->experiments);
    pairing_destroy (&self->pairing);
    store_destroy (&self->store);
    free (self);
    *self_p = NULL;
}

int
broker_run (broker_t *self)
{
    zloop_start (self->loop);
    return broker_commit (self) == 0 ? 0 : -1;
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
    S_INT (broker, max_agents);
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
    if (self->key_cache)
        zhashx_purge (self->key_cache);
    log_notice ("reload: applied %s%s", *applied ? applied : "no change",
                self->auth ? "; certificates of clients and operators read again" : "");
    if (*restart)
        log_warning ("reload: %s changed: read at start only, takes effect after a restart "
                     "(systemctl restart pivfarm-broker)",
                     restart);
    return 0;
}

// A file descriptor the reactor watches for its owner (SIGHUP's signalfd).
typedef struct {
    broker_t *broker;
    void (*fn) (broker_t *, void *);
    void *arg;
} s_fd_watch_t;

static int
s_on_fd (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void) loop, (void) item;
    s_fd_watch_t *w = arg;
    w->fn (w->broker, w->arg);
    return 0;
}

int
broker_poll_fd (broker_t *self, int fd, void (*fn) (broker_t *, void *), void *arg)
{
    s_fd_watch_t *w = calloc (1, sizeof *w);
    if (!w)
        return -1;
    *w = (s_fd_watch_t) {self, fn, arg};
    zmq_pollitem_t item = {.fd = fd, .events = ZMQ_POLLIN};
    if (zloop_poller (self->loop, &item, s_on_fd, w) != 0) {
        free (w);
        return -1;
    }
    free (self->fd_watch);
    self->fd_watch = w;
    return 0;
}

const char *
broker_endpoint (broker_t *self, const char *socket)
{
    zsock_t *sock = strcmp (socket, "ingest") == 0    ? self->ingest
                    : strcmp (socket, "work") == 0    ? self->work
                    : strcmp (socket, "control") == 0 ? self->control
                    : strcmp (socket, "publish") == 0 ? self->publish
                                                      : NULL;
    return sock ? zsock_endpoint (sock) : NULL;
}
