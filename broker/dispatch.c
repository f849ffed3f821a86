// dispatch.c — the dispatch stage: agents on the work socket (HELLO,
// READY within a credit capped by cores, liveness, deadlines, lost agents,
// DEFER, the holder check of every answer), the scheduler's queue, the
// retry delay of failed pairs, and TASKs sent in batches. What is recorded
// goes to the results stage (results.c); what must wait for the commit
// (RECORDED) goes to the reactor's 'after' list.

#include "broker/dispatch.h"
#include "broker/publish.h"
#include "broker/results.h"
#include "common/jout.h"
#include "common/log.h"
#include "common/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A pair that FAILED is dispatched again no sooner than BACKOFF_BASE_MS
// after its first failure, twice that after its second, and so on, at
// most BACKOFF_MAX_MS (counted from its last failure; a retry by hand
// starts again from the base).
#define BACKOFF_BASE_MS 1000
#define BACKOFF_MAX_MS 60000
#define AGENT_CORES_MAX 4096         // cores an agent may declare: its credit's cap
#define AGENT_IDS_PER_PEER 64        // agent ids one peer may add to the store an hour
#define AGENT_IDS_PER_HOUR_MIN 64    // ... and all peers, at least (else broker/max_agents)
// Agents long gone (broker/forget_agents_after) are looked for every tenth
// of that time, at least FORGET_TICK_MS and at most FORGET_EVERY_MAX_NS
// apart: a timer ticks, the time since the last look decides (a reload
// changes it).
#define FORGET_TICK_MS 1000
#define FORGET_EVERY_MAX_NS (3600 * 1000000000LL)
// The deadline of a task while nobody has a result of its experiment.
#define GUESSED_DEADLINE_NS (600 * 1000000000LL)

struct _dispatch_t {
    const config_t *cfg;      // configuration
    store_t *store;           // the durable state
    zloop_t *loop;            // the reactor
    zsock_t *work;            // ROUTER: agents (NULL until bound)
    zsock_t *publish;         // PUB: the 'agents' topic (NULL until bound)
    results_t *results;       // the results stage
    clocks_t *clocks;         // peers' clocks
    zlistx_t *fresh;          // the reactor's: queued after the commit
    peers_t *peers;           // agents' keys, refusals logged
    void *arg;                // the host's callbacks, with their argument
    void (*after) (void *arg, zframe_t *identity, proto_msg_t *msg);
    int (*held) (void *arg);
    void (*frame_path) (void *arg, exp_t *exp, const char *name, char *out, size_t size);
    sched_t *sched;           // pairs ready to dispatch: policy, rate, pause
    zhashx_t *agents;         // identity (hex) -> agent_rec_t
    int wake_timer;           // one-shot timer for a rate-limited queue, or -1
    zlistx_t *backoff;        // task_t that FAILED, waiting out their retry delay
    int backoff_timer;        // one-shot timer for the earliest of them, or -1
    zhashx_t *new_ids;        // peer -> agent ids first recorded in this hour (int64 in a ptr)
    zhashx_t *recorded_ids;   // agent ids recorded in the store since start (bounded)
    int64_t new_ids_hour;     // the hour new_ids counts
    int64_t new_ids_total;    // agent ids first recorded in this hour, all peers
    int parking;              // the store is busy: answers wait in 'parked' (dispatch_park)
    zlistx_t *parked;         // s_parked_t, in arrival order
    zhashx_t *parked_keys;    // "command pair attempt" of the answers among them
    size_t parked_bytes;      // the bytes of their fields
    size_t parked_dropped;    // dropped past the bound since parking began
    int64_t forgot_ns;        // agents long gone were last looked for then (0: not yet)
    ensemble_t *ensemble;     // ensemble jobs' chunks, given to agents a live pair leaves
                              // idle (NULL: none)
};

// A message waiting for the store (dispatch_park).
typedef struct {
    zframe_t *identity;  // its sender
    char key[64];        // the sender's CURVE key
    proto_msg_t msg;     // the message, owned
} s_parked_t;

static void
s_parked_destroy (s_parked_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zframe_destroy (&(*self_p)->identity);
    proto_msg_release (&(*self_p)->msg);
    free (*self_p);
    *self_p = NULL;
}

static int s_backoff_due (zloop_t *loop, int timer_id, void *arg);
static void s_check_deadlines (dispatch_t *self, int64_t now);
static void s_agent_drop (dispatch_t *self, agent_rec_t *agent, const char *reason, int lost);

static void
s_agent_destroy (agent_rec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    agent_rec_t *self = *self_p;
    zframe_destroy (&self->identity);
    free (self->id);
    free (self->host);
    free (self->capabilities);
    zlistx_destroy (&self->tasks);
    proto_batch_destroy (&self->out);
    free (self);
    *self_p = NULL;
}

static void
s_task_free (void *task, void *arg)
{
    (void) arg;
    task_t *t = task;
    broker_task_destroy (&t);
}

dispatch_t *
dispatch_new (const dispatch_host_t *host)
{
    dispatch_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->cfg = host->cfg;
    self->store = host->store;
    self->loop = host->loop;
    self->results = host->results;
    self->clocks = host->clocks;
    self->fresh = host->fresh;
    self->peers = host->peers;
    self->arg = host->arg;
    self->after = host->after;
    self->held = host->held;
    self->frame_path = host->frame_path;
    self->wake_timer = -1;
    self->backoff_timer = -1;
    self->sched = sched_new ();
    self->agents = zhashx_new ();
    self->backoff = zlistx_new ();
    self->new_ids = zhashx_new ();
    self->recorded_ids = zhashx_new ();
    self->parked = zlistx_new ();
    self->parked_keys = zhashx_new ();
    if (!self->sched || !self->agents || !self->backoff || !self->new_ids || !self->recorded_ids
        || !self->parked || !self->parked_keys) {
        dispatch_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->agents, (zhashx_destructor_fn *) s_agent_destroy);
    zlistx_set_destructor (self->backoff, (zlistx_destructor_fn *) broker_task_destroy);
    zlistx_set_destructor (self->parked, (zlistx_destructor_fn *) s_parked_destroy);
    // new_ids, recorded_ids: counts and flags, not pointers: nothing to
    // free (zhashx's default).
    return self;
}

void
dispatch_goodbye (dispatch_t *self)
{
    // Agents learn at once that their tasks are gone, not after a timeout.
    if (self->work)
        for (agent_rec_t *a = zhashx_first (self->agents); a; a = zhashx_next (self->agents)) {
            proto_msg_t bye = {.command = PROTO_DISCONNECT};
            proto_send (&bye, a->identity, self->work);
        }
}

void
dispatch_destroy (dispatch_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    dispatch_t *self = *self_p;
    zhashx_destroy (&self->new_ids);
    zhashx_destroy (&self->recorded_ids);
    zhashx_destroy (&self->agents);
    if (self->sched)
        sched_clear (self->sched, s_task_free, NULL);
    sched_destroy (&self->sched);
    zlistx_destroy (&self->backoff);
    zlistx_destroy (&self->parked);
    zhashx_destroy (&self->parked_keys);
    free (self);
    *self_p = NULL;
}

static int s_forget_tick (zloop_t *loop, int timer_id, void *arg);

void
dispatch_set_sockets (dispatch_t *self, zsock_t *work, zsock_t *publish)
{
    self->work = work;
    self->publish = publish;
    if (self->loop)
        zloop_timer (self->loop, FORGET_TICK_MS, 0, s_forget_tick, self);
}

sched_t *
dispatch_sched (dispatch_t *self)
{
    return self->sched;
}

zhashx_t *
dispatch_agents (dispatch_t *self)
{
    return self->agents;
}

void
dispatch_clear (dispatch_t *self)
{
    sched_clear (self->sched, s_task_free, NULL);
    zlistx_purge (self->backoff);  // pending in the store: loaded again
}

// "agents": an agent joined, left, or is presumed dead ('event').
static void
s_publish_agent (dispatch_t *self, const agent_rec_t *agent, const char *event, const char *reason)
{
    json_t *o = json_object ();
    jout_set (&o, "event", jout_string (event));
    jout_set (&o, "agent", jout_string (agent->id ? agent->id : ""));
    jout_set (&o, "host", jout_string (agent->host ? agent->host : ""));
    jout_set (&o, "cores", json_integer (agent->cores));
    jout_set (&o, "tasks", json_integer ((json_int_t) zlistx_size (agent->tasks)));
    jout_set (&o, "reason", jout_string (reason));
    // Agents known once this event is through (a leaving one is still in
    // the table).
    size_t known = zhashx_size (self->agents) - (strcmp (event, "joined") == 0 ? 0 : 1);
    jout_set (&o, "agents", json_integer ((json_int_t) known));
    jout_set (&o, "published_ns", json_integer (util_time_ns ()));
    publish_json (self->publish, PROTO_TOPIC_AGENTS, NULL, o, 2048, NULL, 0);
}

// One timer, for the earliest task of the backoff list (none when it is
// empty). A timer that fires early (zloop counts whole milliseconds on
// another clock) finds the task not due and is armed again for it: no
// task waits for a timer that is gone.
static void
s_backoff_arm (dispatch_t *self, int64_t now)
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
    dispatch_t *self = arg;
    self->backoff_timer = -1;  // a one-shot timer: gone once it fired
    int64_t now = util_time_ns ();
    for (task_t *task = zlistx_first (self->backoff); task; task = zlistx_next (self->backoff))
        if (task->not_before_ns <= now) {
            zlistx_detach_cur (self->backoff);  // the cursor goes back one
            dispatch_enqueue (self, task, 0);
        }
    s_backoff_arm (self, now);
    dispatch_now (self);
    return 0;
}

// Holds a task that FAILED until its retry delay has passed (other pairs
// go on meanwhile); a task without a delay is queued at once.
void
dispatch_backoff_add (dispatch_t *self, task_t *task, int64_t now)
{
    if (task->not_before_ns <= now || !self->loop || !zlistx_add_end (self->backoff, task)) {
        dispatch_enqueue (self, task, 0);  // no delay rather than no retry
        return;
    }
    s_backoff_arm (self, now);
    task_t *held;
    while (self->backoff_timer < 0 && (held = zlistx_detach (self->backoff, NULL)))
        dispatch_enqueue (self, held, 0);  // no timer: no delay rather than no retry
}

void
dispatch_enqueue (dispatch_t *self, task_t *task, int fresh)
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
s_agent (dispatch_t *self, zframe_t *identity)
{
    char key[512];
    return zhashx_lookup (self->agents, s_agent_key (identity, key));
}

void
dispatch_set_ensemble (dispatch_t *self, ensemble_t *ensemble)
{
    self->ensemble = ensemble;
}

void
dispatch_recorded (dispatch_t *self, zframe_t *identity, proto_msg_t *msg)
{
    agent_rec_t *agent = s_agent (self, identity);
    if (!agent || proto_batch_add (agent->out, msg) != 0)
        proto_send (msg, identity, self->work);
}

static int64_t
s_expiry (dispatch_t *self, int64_t now)
{
    return now + (int64_t) self->cfg->broker.heartbeat_ms * self->cfg->broker.liveness * 1000000;
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
s_holder (dispatch_t *self, uint64_t pair)
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
s_may_answer (dispatch_t *self, agent_rec_t *agent, const proto_msg_t *msg, char *why,
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
s_task_lost (dispatch_t *self, task_t *task, const char *reason, int64_t now)
{
    int failed = 0;
    if (store_pair_lost (self->store, task->pair, task->attempt, reason,
                         self->cfg->broker.max_attempts, now, &failed)
        != 0)
        log_error ("cannot requeue pair %lld of '%s': %s", (long long) task->pair,
                   task->exp->name, store_error (self->store));
    if (failed) {
        log_warning ("pair %lld ('%s/%s') failed for good: agent lost %d times on this pair "
                     "(last: %s)",
                     (long long) task->pair, task->exp->name, task->stem,
                     self->cfg->broker.max_attempts, reason);
        char error[600];
        snprintf (error, sizeof error, "agent lost %d times on this pair (last: %s)",
                  self->cfg->broker.max_attempts, reason);
        results_publish_failed (self->results, task, self->cfg->broker.max_attempts, error, now);
        broker_task_destroy (&task);
        return;
    }
    dispatch_enqueue (self, task, 0);
}

// Puts an agent's tasks back at the head of the queue, oldest first; 'lost'
// counts it against each pair (the agent is presumed dead). A task whose
// deadline passed already went back: its place holder is dropped.
static void
s_requeue_tasks (dispatch_t *self, agent_rec_t *agent, const char *reason, int lost)
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
            dispatch_enqueue (self, task, 0);
        }
    }
}

// Forgets an agent; 'lost': it vanished (presumed dead), which counts
// against the pairs it held, rather than going politely.
static void
s_agent_drop (dispatch_t *self, agent_rec_t *agent, const char *reason, int lost)
{
    log_notice ("agent '%s' on %s %s; %zu task(s) back in the queue", agent->id,
                agent->host, reason, zlistx_size (agent->tasks));
    s_requeue_tasks (self, agent, reason, lost);
    char key[512];
    if (self->ensemble && agent->ens_held > 0)
        ensemble_lost (self->ensemble, s_agent_key (agent->identity, key), reason);
    s_publish_agent (self, agent, lost ? "dead" : "left", reason);
    zhashx_delete (self->agents, s_agent_key (agent->identity, key));
}

// An agent gone for a benign reason (it said so, or hello again): its tasks
// go back without a loss counted.
static void
s_agent_forget (dispatch_t *self, agent_rec_t *agent, const char *reason)
{
    s_agent_drop (self, agent, reason, 0);
}

// The median of n values (n > 0; a few dozen: insertion sort of a copy).
static int64_t
s_median (const int64_t *values, int n)
{
    int64_t sorted[EXP_COMPUTE_KEPT > COMPUTE_KEPT ? EXP_COMPUTE_KEPT : COMPUTE_KEPT];
    memcpy (sorted, values, sizeof sorted[0] * (size_t) n);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int64_t t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    return sorted[n / 2];
}

// The median compute time of the agent's recent results of experiment
// 'exp' (an id), 0 if it has none. Sorted once per new result and
// experiment asked for, not once per task given.
static int64_t
s_agent_median (agent_rec_t *agent, int64_t exp)
{
    if (agent->computes == 0)
        return 0;
    if (agent->median_ns < 0 || agent->median_exp != exp) {
        int64_t mine[COMPUTE_KEPT];
        int n = 0;
        for (int i = 0; i < agent->computes; i++)
            if (agent->compute_exp[i] == exp)
                mine[n++] = agent->compute_ns[i];
        agent->median_exp = exp;
        agent->median_ns = n > 0 ? s_median (mine, n) : 0;
    }
    return agent->median_ns;
}

// The median compute time of the experiment's recent results from any
// agent, 0 if it has none.
static int64_t
s_exp_median (exp_t *exp)
{
    if (exp->dispatch.computes == 0)
        return 0;
    if (exp->dispatch.median_ns < 0)
        exp->dispatch.median_ns = s_median (exp->dispatch.compute_ns, exp->dispatch.computes);
    return exp->dispatch.median_ns;
}

// How long a task of 'exp' may stay out with 'agent': broker/task_deadline_ms,
// or else 10 times the median compute time of the agent's recent results
// of that experiment, or of the experiment's from any agent when the agent
// has none (a silent agent's first task moves as soon as the floor has
// passed, if the others are quick), at least broker/deadline_floor_ms; 10
// minutes when nobody has a result of it (a slow agent's first large
// fields must not be taken from it), and *guessed set. Per experiment, as
// experiments differ in image size and settings: a quick one must not
// shorten the deadline of a slow one on the same agent.
static int64_t
s_deadline_ns (dispatch_t *self, agent_rec_t *agent, exp_t *exp, int *guessed)
{
    *guessed = 0;
    if (self->cfg->broker.task_deadline_ms > 0)
        return (int64_t) self->cfg->broker.task_deadline_ms * 1000000;
    int64_t floor = (int64_t) self->cfg->broker.deadline_floor_ms * 1000000;
    int64_t median = s_agent_median (agent, exp->id);
    if (median == 0)
        median = s_exp_median (exp);
    if (median == 0) {
        *guessed = 1;
        return GUESSED_DEADLINE_NS > floor ? GUESSED_DEADLINE_NS : floor;
    }
    return 10 * median > floor ? 10 * median : floor;
}

// Counts the compute time a RESULT of 'agent' reports, for the deadlines:
// the agent's and its experiment's (that of the task it answers; an
// answer for a task the broker no longer tracks counts for neither).
static void
s_agent_compute (agent_rec_t *agent, const proto_msg_t *msg)
{
    task_t *task = s_held (agent, msg->pair, msg->attempt);
    if (!task || msg->time_ns <= 0)
        return;
    exp_t *exp = task->exp;
    agent->compute_ns[agent->compute_next] = msg->time_ns;
    agent->compute_exp[agent->compute_next] = exp->id;
    agent->median_ns = -1;
    agent->compute_next = (agent->compute_next + 1) % COMPUTE_KEPT;
    if (agent->computes < COMPUTE_KEPT)
        agent->computes++;
    exp->dispatch.compute_ns[exp->dispatch.compute_next] = msg->time_ns;
    exp->dispatch.median_ns = -1;
    exp->dispatch.compute_next = (exp->dispatch.compute_next + 1) % EXP_COMPUTE_KEPT;
    if (exp->dispatch.computes < EXP_COMPUTE_KEPT)
        exp->dispatch.computes++;
}

// A deadline set while nobody had a result of the task's experiment, set
// again from dispatch once somebody has: an agent that took a task at the
// start and never answers loses it once the floor has passed, not after
// 10 minutes.
static void
s_deadline_learn (dispatch_t *self, agent_rec_t *agent, task_t *task)
{
    int guessed;
    int64_t deadline = s_deadline_ns (self, agent, task->exp, &guessed);
    if (guessed)
        return;
    task->deadline_ns = task->dispatched_ns + deadline;
    task->guessed = 0;
}

// The tasks out past their deadline, on agents that still answer
// heartbeats (a hung processor, a livelock): each goes back to the queue
// for another agent, counted as a lost agent. The holder keeps the slot
// (its credit) until it answers; its late answer is then a duplicate, or
// the result if none came first.
static void
s_check_deadlines (dispatch_t *self, int64_t now)
{
    for (agent_rec_t *agent = zhashx_first (self->agents); agent;
         agent = zhashx_next (self->agents))
        for (task_t *task = zlistx_first (agent->tasks); task;
             task = zlistx_next (agent->tasks)) {
            if (task->guessed && !task->expired)
                s_deadline_learn (self, agent, task);
            if (task->expired || task->deadline_ns == 0 || now <= task->deadline_ns)
                continue;
            task_t *copy =
                broker_task_new (task->pair, task->exp, task->stem, task->name_a, task->name_b);
            if (copy && task->name_c && broker_task_set_more (copy, task->name_c, task->name_d))
                broker_task_destroy (&copy);
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
    dispatch_t *self = arg;
    self->wake_timer = -1;
    dispatch_now (self);
    return 0;
}

// Sends what an agent's batch holds. A batch the agent cannot take now
// (gone, or its queue full) puts its tasks back: the pairs wait for
// another agent, and this one gets no task until it is heard from again
// (a live agent heartbeats; a gone one expires at the next heartbeat
// check) rather than task after task sent into the void; the RECORDED in
// it are lost, and the agent sends those results again.
static void
s_flush_agent (dispatch_t *self, agent_rec_t *agent)
{
    if (proto_batch_size (agent->out) == 0)
        return;
    size_t tasks = agent->out_tasks;
    agent->out_tasks = 0;
    if (proto_batch_send (agent->out, agent->identity, self->work) == 0)
        return;
    agent->unreachable = 1;
    if (agent->ens_held > 0 && self->ensemble) {
        // Its chunks go to others; an answer it sends for one later is a
        // late copy (the first partial recorded wins).
        char key[512];
        ensemble_lost (self->ensemble, s_agent_key (agent->identity, key),
                       "could not be reached");
        agent->credit += (uint32_t) agent->ens_held;
        agent->ens_held = 0;
    }
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
s_flush_agents (dispatch_t *self)
{
    for (agent_rec_t *agent = zhashx_first (self->agents); agent;
         agent = zhashx_next (self->agents))
        s_flush_agent (self, agent);
}

// Gives one task to an agent: recorded as dispatched, and into the batch
// that s_flush_agents sends. 0, or -1 if it went back to the queue.
static int
s_send_task (dispatch_t *self, agent_rec_t *agent, task_t *task, int64_t now)
{
    for (task_t *held = zlistx_first (agent->tasks); held; held = zlistx_next (agent->tasks))
        if (held->pair == task->pair) {
            // Its deadline passed on this agent, which still holds it: the
            // pair waits for another.
            sched_put_back (self->sched, task->exp->id, task->pair, task);
            return -1;
        }
    int attempt = store_pair_dispatch (self->store, task->pair, agent->id, now);
    if (attempt < 0 && (store_busy_since (self->store) || store_detached (self->store))) {
        // The store cannot record it now (held by another process, with
        // its memory for dispatches full; or taken away): it waits.
        sched_put_back (self->sched, task->exp->id, task->pair, task);
        return -1;
    }
    if (attempt < 0) {
        // Not pending any more (done by a late result): drop it.
        broker_task_destroy (&task);
        return 0;
    }
    task->attempt = attempt;
    task->dispatched_ns = now;
    task->deadline_ns = now + s_deadline_ns (self, agent, task->exp, &task->guessed);
    exp_t *exp = task->exp;
    char path_a[PATH_MAX * 2], path_b[PATH_MAX * 2] = "", output[PATH_MAX];
    char path_c[PATH_MAX * 2] = "", path_d[PATH_MAX * 2] = "";
    // Under the watch root, or where the archive put them (doc/storage.md).
    self->frame_path (self->arg, exp, task->name_a, path_a, sizeof path_a);
    if (task->name_b)
        self->frame_path (self->arg, exp, task->name_b, path_b, sizeof path_b);
    if (task->name_c) {
        self->frame_path (self->arg, exp, task->name_c, path_c, sizeof path_c);
        self->frame_path (self->arg, exp, task->name_d, path_d, sizeof path_d);
    }
    snprintf (output, sizeof output, "%s/%s.txt", exp->name, task->stem);
    // What it is sent with, for its result: a change of the experiment's
    // settings applies to the pairs dispatched after it.
    if (!task->settings || strcmp (task->settings, exp->piv.settings) != 0) {
        free (task->settings);
        task->settings = strdup (exp->piv.settings);
    }
    proto_msg_t msg = {.command = PROTO_TASK,
                       .pair = (uint64_t) task->pair,
                       .attempt = (uint32_t) attempt,
                       .experiment = exp->name,
                       .path_a = path_a,
                       .path_b = path_b,
                       .settings = exp->piv.settings,
                       .output = output,
                       .path_c = path_c,
                       .path_d = path_d,
                       // A stereo set carries its experiment's rig (none yet:
                       // the agent fails it, naming the command that sets one).
                       .cameras = task->name_c ? exp->piv.cameras : NULL};
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

// 1 if the agent said it sums ensemble chunks (the word 'ensemble' among
// its HELLO's capabilities): an older agent, or one of another processor,
// gets none.
static int
s_sums_chunks (const agent_rec_t *agent)
{
    const char *caps = agent->capabilities ? agent->capabilities : "";
    for (const char *p = strstr (caps, "ensemble"); p; p = strstr (p + 1, "ensemble"))
        if ((p == caps || p[-1] == ' ') && (p[8] == '\0' || p[8] == ' '))
            return 1;
    return 0;
}

// Gives the credit live pairs left to ensemble chunks (doc/control.md
// 'ensemble': a reduce over a run never delays a pair the camera just
// wrote), one chunk an agent a round.
static void
s_dispatch_chunks (dispatch_t *self)
{
    if (!self->ensemble)
        return;
    int gave = 1;
    while (gave) {
        gave = 0;
        for (agent_rec_t *agent = zhashx_first (self->agents); agent;
             agent = zhashx_next (self->agents)) {
            if (agent->credit == 0 || agent->unreachable || !s_sums_chunks (agent)
                || !peers_allowed (self->peers, agent->key, BROKER_ROLE_AGENT))
                continue;
            char key[512];
            proto_msg_t msg;
            if (!ensemble_next (self->ensemble, s_agent_key (agent->identity, key), agent->id,
                                &msg))
                return;
            if (proto_batch_size (agent->out) == PROTO_MAX_BATCH)
                s_flush_agent (self, agent);
            if (proto_batch_add (agent->out, &msg) != 0) {
                ensemble_lost (self->ensemble, key, "could not be sent the chunk");
                return;
            }
            agent->credit--;
            agent->ens_held++;
            gave = 1;
        }
    }
}

void
dispatch_now (dispatch_t *self)
{
    // The free-space guard holds new work back while a volume it writes to
    // is critically full (doc/storage.md); tasks out finish.
    if (self->held (self->arg)) {
        s_flush_agents (self);
        return;
    }
    if (sched_size (self->sched) == 0) {
        s_dispatch_chunks (self);
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
            if (agent->credit == 0 || agent->unreachable
                || !peers_allowed (self->peers, agent->key, BROKER_ROLE_AGENT))
                continue;
            int64_t exp, pair;
            task_t *task = sched_next (self->sched, now, &exp, &pair);
            if (!task)
                more = 0;
            else if (s_send_task (self, agent, task, now) == 0)
                gave = 1;
        }
    }
    s_dispatch_chunks (self);
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

// A RESULT or FAILED not acted on: logged (rate-limited), not stored, and
// answered so that the sender stops resending it: an agent that said no
// HELLO is asked for one (DISCONNECT: it introduces itself and resends,
// as after a broker restart); any other gets RECORDED (an honest agent
// whose task was taken back drops it; the pair's holder answers for it).
static void
s_refuse_answer (dispatch_t *self, zframe_t *identity, agent_rec_t *agent, const proto_msg_t *msg,
                 const char *why)
{
    char *peer = agent ? NULL : zframe_strhex (identity);
    peers_refused (self->peers, "work: %s of pair %llu attempt %u from %s%s%s ignored: %s",
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
    self->after (self->arg, identity, &ok);
}

static void
s_on_result (dispatch_t *self, zframe_t *identity, agent_rec_t *agent, proto_msg_t *msg)
{
    int64_t now = util_time_ns ();
    char why[512];
    if (!s_may_answer (self, agent, msg, why, sizeof why)) {
        s_refuse_answer (self, identity, agent, msg, why);
        return;
    }
    s_agent_compute (agent, msg);  // only the holder's figures set its deadlines
    // The settings the attempt was sent with, when this broker sent it.
    const task_t *sent = NULL;
    for (task_t *t = zlistx_first (agent->tasks); t && !sent; t = zlistx_next (agent->tasks))
        if (t->pair == (int64_t) msg->pair && t->attempt == (int) msg->attempt)
            sent = t;
    store_result_t r = {.settings = sent ? sent->settings : NULL,
                        .mean_u = msg->figures[PROTO_FIG_MEAN_U],
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
    if (task && !task->answered)
        agent->credit++;  // the slot the task held is free again
    agent->done += recorded;
    if (task && recorded)
        results_recorded (self->results, task, agent, msg, now);
    else if (recorded)
        results_recorded_untracked (self->results);  // its statistics count it from the store
    broker_task_destroy (&task);
    results_counted (self->results, recorded, now);
    proto_msg_t ok = {.command = PROTO_RECORDED, .pair = msg->pair, .attempt = msg->attempt};
    self->after (self->arg, identity, &ok);
}

static void
s_on_failed (dispatch_t *self, zframe_t *identity, agent_rec_t *agent, proto_msg_t *msg)
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
                            self->cfg->broker.max_attempts, now, &failed)
        != 0) {
        log_error ("cannot record the failure of pair %llu: %s",
                   (unsigned long long) msg->pair, store_error (self->store));
        return;
    }
    task_t *task = s_take_task (agent, (int64_t) msg->pair);
    if (task && !task->answered)
        agent->credit++;
    if (failed)
        log_warning ("pair %llu failed for good: %s", (unsigned long long) msg->pair,
                     msg->text ? msg->text : "");
    if (task && failed)
        results_publish_failed (self->results, task, self->cfg->broker.max_attempts, msg->text ? msg->text : "",
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
    self->after (self->arg, identity, &ok);
}

// Whether agent 'id' from 'peer' may get a row in the store's agents table
// now: an id already recorded since start may; a new one only while its
// peer (its CURVE key, else the host it names) has added fewer than
// AGENT_IDS_PER_PEER this hour, and all peers together fewer than
// broker/max_agents (at least AGENT_IDS_PER_HOUR_MIN). So HELLOs with ever
// new ids add a bounded number of rows an hour; the agent works either way.
static int
s_may_record_agent (dispatch_t *self, const char *peer, const char *id, int64_t now)
{
    if (zhashx_lookup (self->recorded_ids, id))
        return 1;
    int64_t hour = now / 3600000000000LL;
    if (hour != self->new_ids_hour) {
        self->new_ids_hour = hour;
        self->new_ids_total = 0;
        zhashx_purge (self->new_ids);
    }
    int64_t total_max = self->cfg->broker.max_agents > AGENT_IDS_PER_HOUR_MIN
                            ? self->cfg->broker.max_agents
                            : AGENT_IDS_PER_HOUR_MIN;
    intptr_t from_peer = (intptr_t) zhashx_lookup (self->new_ids, peer);
    if (from_peer >= AGENT_IDS_PER_PEER || self->new_ids_total >= total_max) {
        peers_refused (self->peers,
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

// The agent's row in the store, within s_may_record_agent's bounds.
static void
s_record_agent (dispatch_t *self, agent_rec_t *agent, int64_t now)
{
    agent->unrecorded = 0;
    if (s_may_record_agent (self, *agent->key ? agent->key : agent->host, agent->id, now))
        store_agent_seen (self->store, agent->id, agent->host, agent->cores,
                          agent->capabilities ? agent->capabilities : "", now);
}

// The rows of agents not seen for broker/forget_agents_after go from the
// store ('agents-forgotten' event, a notice naming them). The agents
// connected now are seen first: their heartbeats write nothing, and none
// of them may go however long ago it said HELLO.
int
dispatch_forget_agents (dispatch_t *self, int64_t age_ns, int64_t now, char *names, size_t size)
{
    for (agent_rec_t *a = zhashx_first (self->agents); a; a = zhashx_next (self->agents))
        if (store_agent_touch (self->store, a->id, now) != 0)
            return -1;
    return store_agents_forget (self->store, now - age_ns, now, names, size);
}

static void
s_forget_agents (dispatch_t *self, int64_t age_ns, int64_t now)
{
    char names[1024];
    int n = dispatch_forget_agents (self, age_ns, now, names, sizeof names);
    if (n < 0)
        log_warning ("cannot forget agents long gone: %s", store_error (self->store));
    else if (n > 0) {
        // The time as the key is written: 30d, 12h, 90min, 45s.
        static const struct {
            int seconds;
            const char *unit;
        } units[] = {{86400, "d"}, {3600, "h"}, {60, "min"}, {1, "s"}};
        int age = self->cfg->broker.forget_agents_after, u = 0;
        while (age % units[u].seconds)
            u++;
        char text[32];
        snprintf (text, sizeof text, "%d%s", age / units[u].seconds, units[u].unit);
        log_notice ("forgot %d agent(s) not seen for %s (broker/forget_agents_after): %s", n,
                    text, names);
    }
}

static int
s_forget_tick (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    dispatch_t *self = arg;
    int64_t age = (int64_t) self->cfg->broker.forget_agents_after * 1000000000;
    int64_t every = age / 10 < FORGET_EVERY_MAX_NS ? age / 10 : FORGET_EVERY_MAX_NS;
    int64_t now = util_time_ns ();
    // Not while the store is held by another process: the next tick does it.
    if (age > 0 && now - self->forgot_ns >= every && !self->parking) {
        self->forgot_ns = now;
        s_forget_agents (self, age, now);
    }
    return 0;
}

// DEFER: the agent holding (pair, attempt) cannot do it now for a reason
// of its own (its results disk is full): the pair goes back to the queue
// without an attempt counted; the task's slot is freed but not its credit
// (the agent sends READY when it has room again). From anyone else it is
// stale and changes nothing. RECORDED either way, so that it stops
// resending.
static void
s_on_defer (dispatch_t *self, zframe_t *identity, agent_rec_t *agent, proto_msg_t *msg)
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
    self->after (self->arg, identity, &ok);
}

// Splits HELLO's capabilities 'words' into the agent's process token (the
// word 'instance=TOKEN', "" when there is none: an older agent) and the
// other words.
static void
s_split_instance (const char *words, char *instance, size_t isize, char *caps, size_t csize)
{
    *instance = *caps = '\0';
    size_t used = 0;
    for (const char *p = words ? words : ""; *p;) {
        size_t n = strcspn (p, " ");
        if (n > 9 && strncmp (p, "instance=", 9) == 0)
            snprintf (instance, isize, "%.*s", (int) (n - 9), p + 9);
        else if (n > 0 && used + n + 2 <= csize)
            used += (size_t) snprintf (caps + used, csize - used, "%s%.*s", used ? " " : "",
                                       (int) n, p);
        p += n;
        p += strspn (p, " ");
    }
}

// The agent connected under 'id', or NULL.
static agent_rec_t *
s_agent_named (dispatch_t *self, const char *id)
{
    for (agent_rec_t *a = zhashx_first (self->agents); a && id; a = zhashx_next (self->agents))
        if (strcmp (a->id, id) == 0)
            return a;
    return NULL;
}

static void
s_on_hello (dispatch_t *self, zframe_t *identity, const char *key, proto_msg_t *msg)
{
    int64_t now = util_time_ns ();
    agent_rec_t *agent = s_agent (self, identity);
    char instance[sizeof agent->instance], caps[1024];
    s_split_instance (msg->settings, instance, sizeof instance, caps, sizeof caps);
    agent_rec_t *named = agent ? NULL : s_agent_named (self, msg->name);
    if (agent)  // a reconnect under the same identity: its tasks start again
        s_agent_forget (self, agent, "said hello again");
    else if (named && *instance && strcmp (named->instance, instance) == 0
             && strcmp (named->key, key ? key : "") == 0)
        // The same process (its token, and its CURVE key) on a new
        // connection: it found this broker silent (held by a long vacuum,
        // stopped, or a network cut) and connected again. Its tasks go back
        // unpunished; what it finishes of them still comes (first result
        // wins).
        s_agent_forget (self, named, "connected again (it found the broker silent)");
    else if ((agent = named)) {
        // Another connection under an id in use: two agents given one name
        // (its rows, results and series would mix), or an agent restarted
        // after a kill whose old connection has not yet been found dead.
        // Not answered: its heartbeats get DISCONNECT and it says HELLO
        // again each heartbeat, joining once the other is gone.
        peers_refused_agent (self->peers, msg->name, now,
                             "work: HELLO of agent '%s' on %s refused: an agent of that id is "
                             "connected already (on %s, %d cores); it joins once that one leaves "
                             "or is found dead: give each agent its own id (--id, or one "
                             "pivfarm-agent@ instance each)",
                             msg->name, msg->text ? msg->text : "?", agent->host, agent->cores);
        return;
    }
    else if (zhashx_size (self->agents) >= (size_t) self->cfg->broker.max_agents) {
        // Not answered: the agent's heartbeats get DISCONNECT (an unknown
        // agent), so it tries again once a heartbeat, not in a tight loop.
        peers_refused (self->peers, "work: HELLO of agent '%s' on %s refused: %zu agents known "
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
    free (agent->capabilities);
    agent->capabilities = strdup (caps);
    snprintf (agent->instance, sizeof agent->instance, "%s", instance);
    if (self->parking)
        agent->unrecorded = 1;  // written once the store answers (dispatch_unpark)
    else
        s_record_agent (self, agent, now);
    log_notice ("agent '%s' on %s with %d cores", agent->id, agent->host, agent->cores);
    s_publish_agent (self, agent, "joined", NULL);
}

// One message from an agent (alone, or one of a BATCH).
static int s_park (dispatch_t *self, zframe_t *identity, const char *key, proto_msg_t *msg);

static void
s_work_msg (dispatch_t *self, zframe_t *identity, const char *key, proto_msg_t *msg)
{
    if (self->parking && s_park (self, identity, key, msg))
        return;
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
    if (agent) {
        agent->expires_ns = s_expiry (self, util_time_ns ());
        agent->unreachable = 0;  // heard from: it takes tasks again
    }
    switch (msg->command) {
    case PROTO_READY:
        if (agent) {
            // Never more than its cores, less the tasks it holds: a READY
            // of 4294967295 must not take every task from the others.
            size_t held = zlistx_size (agent->tasks) + (size_t) agent->ens_held;
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
    case PROTO_PARTIAL:
        if (agent && self->ensemble) {
            char hex[512];
            if (ensemble_partial (self->ensemble, s_agent_key (identity, hex), agent->id, msg,
                                  util_time_ns ())
                && agent->ens_held > 0) {
                agent->ens_held--;
                agent->credit++;  // the slot the chunk held is free again
            }
        }
        break;
    case PROTO_HEARTBEAT:
        if (agent && msg->time_ns > 0) {
            char key[300], peer[300];
            snprintf (key, sizeof key, "agent %s", agent->id);
            snprintf (peer, sizeof peer, "agent '%s' on %s", agent->id, agent->host);
            clocks_sample (self->clocks, key, peer, (msg->time_ns - util_time_ns ()) / 1e6,
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

int
dispatch_work_one (dispatch_t *self, zsock_t *reader)
{
    zframe_t *identity = NULL;
    proto_msg_t msg;
    char err[512], key[64];
    int rc = proto_recv_from (reader, &identity, key, sizeof key, &msg, err, sizeof err);
    agent_rec_t *agent = identity ? s_agent (self, identity) : NULL;
    if (rc != 0) {
        if (rc == -1)
            peers_refused (self->peers, "work: from agent '%s': %s", agent ? agent->id : "unknown",
                           err);
        zframe_destroy (&identity);
        proto_msg_release (&msg);
        return rc == -2 ? -1 : 0;
    }
    // With CURVE, only keys of clients/agents/ use work, and only while
    // their certificate is there: a revoked agent is forgotten (its tasks
    // go back to the queue) and nothing it sends is taken.
    if (!peers_allowed (self->peers, key, BROKER_ROLE_AGENT)) {
        // Once per key: a revoked agent retries for as long as it runs.
        peers_refused_key (self->peers, "work", key, util_time_ns (),
                           "work: %s from key %s refused: not an agent's key "
                           "(clients/agents/)%s%s%s; put its certificate there if it should "
                           "work, else stop the agent that uses it (its further messages are "
                           "counted, once a minute)",
                           proto_command_name (msg.command), *key ? key : "(none)",
                           agent ? "; agent '" : "", agent ? agent->id : "",
                           agent ? "' is forgotten" : "");
        if (agent)
            s_agent_forget (self, agent, "has a key no longer admitted");
        proto_msg_release (&msg);
        zframe_destroy (&identity);
        return 0;
    }
    for (size_t i = 0; i < proto_count (&msg); i++)
        s_work_msg (self, identity, key, proto_at (&msg, i));
    proto_msg_release (&msg);
    zframe_destroy (&identity);
    return 0;
}


// The heartbeat: HEARTBEAT to each live agent, the silent ones dropped
// (presumed dead), then the deadlines checked.
void
dispatch_heartbeat (dispatch_t *self, int64_t now)
{
    if (self->parking) {
        // Nothing of a presumed death or a deadline could be recorded: both
        // wait for the store (an agent's silence is judged once it answers).
        for (agent_rec_t *agent = zhashx_first (self->agents); agent;
             agent = zhashx_next (self->agents)) {
            proto_msg_t beat = {.command = PROTO_HEARTBEAT, .time_ns = now};
            proto_send (&beat, agent->identity, self->work);
        }
        return;
    }
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
}

// The deadlines of the tasks 'agent' holds moved on by 'ns' (the broker
// could not hear it meanwhile).
static void
s_deadlines_later (agent_rec_t *agent, int64_t ns)
{
    for (task_t *task = zlistx_first (agent->tasks); task; task = zlistx_next (agent->tasks))
        if (task->deadline_ns)
            task->deadline_ns += ns;
}

void
dispatch_held (dispatch_t *self, int64_t held_ns)
{
    for (agent_rec_t *agent = zhashx_first (self->agents); agent;
         agent = zhashx_next (self->agents)) {
        agent->expires_ns += held_ns;
        s_deadlines_later (agent, held_ns);
    }
}

// ---------------------------------------------------------------------------
// A busy store (dispatch_park)

// Whether 'msg' from 'identity' waits for the store: an answer that needs
// a write, or a READY behind a waiting HELLO or DISCONNECT of its agent (so
// that its credit is not given to the agent record that goes). Takes msg
// (zeroed) when it waits or is dropped past the bound: 1; 0 to handle it now.
static int
s_park (dispatch_t *self, zframe_t *identity, const char *key, proto_msg_t *msg)
{
    agent_rec_t *agent = s_agent (self, identity);
    // A HELLO of a known connection, or of an id in use (the same agent
    // connected again), takes tasks back: it waits too.
    int waits = msg->command == PROTO_RESULT || msg->command == PROTO_FAILED
                || msg->command == PROTO_DEFER || msg->command == PROTO_DISCONNECT
                || (msg->command == PROTO_HELLO && (agent || s_agent_named (self, msg->name)));
    if (!waits && msg->command == PROTO_READY)
        for (s_parked_t *p = zlistx_first (self->parked); p && !waits;
             p = zlistx_next (self->parked))
            waits = zframe_eq (p->identity, identity)
                    && (p->msg.command == PROTO_HELLO || p->msg.command == PROTO_DISCONNECT);
    if (!waits)
        return 0;
    // An answer sent again while it waits (agents resend what is not
    // RECORDED after a liveness interval) waits once.
    char answer[64] = "";
    if (msg->command == PROTO_RESULT || msg->command == PROTO_FAILED
        || msg->command == PROTO_DEFER) {
        snprintf (answer, sizeof answer, "%c %llu %u", msg->command,
                  (unsigned long long) msg->pair, msg->attempt);
        if (zhashx_lookup (self->parked_keys, answer)) {
            proto_msg_release (msg);
            return 1;
        }
    }
    if (zlistx_size (self->parked) >= DISPATCH_PARKED_MAX
        || self->parked_bytes + msg->blob_size > DISPATCH_PARKED_BYTES) {
        if (self->parked_dropped++ == 0)
            log_warning ("work: %zu messages (%zu MiB of fields) wait for the store already: "
                         "further answers are dropped unanswered until it answers (their "
                         "agents send them again)",
                         zlistx_size (self->parked), self->parked_bytes >> 20);
        proto_msg_release (msg);
        return 1;
    }
    s_parked_t *p = calloc (1, sizeof *p);
    if (!p || !(p->identity = zframe_dup (identity))) {
        free (p);
        return 0;  // handled now: it fails to write, and its agent sends it again
    }
    snprintf (p->key, sizeof p->key, "%s", key ? key : "");
    p->msg = *msg;
    memset (msg, 0, sizeof *msg);
    self->parked_bytes += p->msg.blob_size;
    zlistx_add_end (self->parked, p);
    if (*answer)
        zhashx_insert (self->parked_keys, answer, (void *) 1);
    // Its agent's slot is free at once: the agent takes more work meanwhile.
    task_t *task = (p->msg.command == PROTO_RESULT || p->msg.command == PROTO_FAILED)
                       ? s_held (agent, p->msg.pair, p->msg.attempt)
                       : NULL;
    if (task && !task->answered) {
        task->answered = 1;
        agent->credit++;
    }
    return 1;
}

void
dispatch_park (dispatch_t *self)
{
    if (!self->parking)
        self->parked_dropped = 0;
    self->parking = 1;
}

size_t
dispatch_unpark (dispatch_t *self, int64_t busy_ns, size_t *dropped)
{
    self->parking = 0;
    int64_t now = util_time_ns ();
    for (agent_rec_t *agent = zhashx_first (self->agents); agent;
         agent = zhashx_next (self->agents)) {
        if (agent->unrecorded)
            s_record_agent (self, agent, now);
        s_deadlines_later (agent, busy_ns);
    }
    size_t handled = 0;
    s_parked_t *p;
    while ((p = zlistx_detach (self->parked, NULL))) {
        self->parked_bytes -= p->msg.blob_size;
        s_work_msg (self, p->identity, p->key, &p->msg);
        s_parked_destroy (&p);
        handled++;
    }
    self->parked_bytes = 0;
    zhashx_purge (self->parked_keys);
    if (dropped)
        *dropped = self->parked_dropped;
    return handled;
}

size_t
dispatch_parked (dispatch_t *self, size_t *bytes)
{
    if (bytes)
        *bytes = self->parked_bytes;
    return zlistx_size (self->parked);
}
