// agent.c — the agent: a zloop over the broker's DEALER socket and an
// inproc socket on which worker threads return their results. Tasks wait
// for a worker in a locked queue; the agent never asks for more than it
// has workers, so the queue holds at most one task per idle worker. In
// latency mode (agent/latency) a worker that takes a pair while fewer
// pairs than workers are held runs it on the idle workers' share of the
// threads too (s_share).

#include "agents/agent.h"
#include "agents/process.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/secure.h"
#include "piv/budget.h"
#include "piv/piv.h"

#include <czmq.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 1024
#define GOODBYE_S 5    // at most this long to see results recorded then
// Latency mode: the most threads one pair runs on. Each worker's engine
// keeps this many less one threads asleep and their window buffers, for
// the pairs it runs alone; beyond 8 the pair's serial parts (reading the
// frames, writing the result) leave little to gain.
#define LATENCY_THREADS 8

// A task, and whether the broker that sent it is the one connected now
// (after a reconnect the broker no longer counts it as taking credit).
typedef struct {
    proto_msg_t msg;  // the TASK
    int orphan;       // sent by a previous broker connection
} s_job_t;

typedef struct {
    struct _agent_t *agent;  // owner
    int index;               // worker number
    pthread_t thread;        // its thread
    int started;             // thread running
} s_worker_t;

struct _agent_t {
    config_t cfg;                      // configuration
    char id[256];                      // agent id sent in HELLO
    char endpoint[CONFIG_STRING];      // broker work endpoint
    char results_endpoint[64];         // inproc endpoint of the results socket
    int nworkers;                      // worker threads
    s_worker_t workers[MAX_WORKERS];   // them
    pthread_mutex_t lock;              // guards the fields up to 'stopping'
    pthread_cond_t wake;               // a job is queued, or stopping
    zlistx_t *jobs;                    // s_job_t waiting for a worker
    int stopping;                      // workers exit when set
    int busy;                          // workers holding a job
    int latency;                       // agent/latency: a pair alone on several threads
    int running;                       // jobs a worker holds (main thread only)
    int orphans;                       // of those, from a previous connection
    zsock_t *broker;                   // DEALER to the broker
    zsock_t *results;                  // PULL: results from workers
    zloop_t *loop;                     // reactor
    zlistx_t *unrecorded;              // proto_msg_t* RESULT/FAILED not yet RECORDED
    process_t *inline_proc;            // noop: tasks done here, no worker hand-off
    proto_batch_t *out;                // its results, sent together after a batch of tasks
    int64_t broker_expires;            // reconnect if silent past this (ms clock)
    int64_t backoff_ms;                // next reconnect delay
    int64_t resend_at;                 // unrecorded results go again at this time (ms clock)
    int64_t done;                      // results recorded
    int draining;                      // stopping: new tasks are left to the broker
    int paused;                        // the results volume is full: no work taken
    int wisdom_warned;                 // a wisdom save failed (said once)
    int withheld;                      // credit owed to the broker once room returns
    int asked_again;                   // DISCONNECTs in a row, nothing else from the broker between
    int64_t hello_ms;                  // when the last HELLO went (ms clock)
    char instance[33];                 // this process's token, in every HELLO: the broker
                                       // knows a reconnect of it from a second agent of its id
    uint64_t budget;                   // bytes a worker may take for a pair (0: no limit)
    char budget_why[128];              // where that came from (process_budget)
};

static int64_t
s_ms (void)
{
    return zclock_mono ();
}

static void
s_job_destroy (s_job_t **self_p)
{
    if (self_p && *self_p) {
        proto_msg_release (&(*self_p)->msg);
        free (*self_p);
        *self_p = NULL;
    }
}

static void
s_msg_destroy (proto_msg_t **msg_p)
{
    if (msg_p && *msg_p) {
        proto_msg_release (*msg_p);
        free (*msg_p);
        *msg_p = NULL;
    }
}

// ---------------------------------------------------------------------------
// Workers

// The threads a worker that has just taken a job runs it on (under the
// lock): the workers' threads shared among the jobs held and waiting, all
// of them for a job alone, one each at full load (or with latency mode
// off). A share is fixed when its job starts: a job that arrives while
// another runs on every thread gets the rest (one, at least) and the two
// briefly hold more threads than there are workers.
static int
s_share (agent_t *self)
{
    if (!self->latency)
        return 1;
    int jobs = self->busy + (int) zlistx_size (self->jobs);
    int share = self->nworkers / (jobs > 0 ? jobs : 1);
    return share > 1 ? share : 1;
}

static void *
s_worker (void *arg)
{
    s_worker_t *worker = arg;
    agent_t *self = worker->agent;
    char err[1024];
    process_t *proc = process_new (&self->cfg, err, sizeof err);
    if (proc)
        process_set_budget (proc, self->budget, self->budget_why);
    int most = !self->latency ? 1 : self->nworkers < LATENCY_THREADS ? self->nworkers
                                                                       : LATENCY_THREADS;
    zsock_t *out = zsock_new_push (self->results_endpoint);
    for (;;) {
        pthread_mutex_lock (&self->lock);
        while (!self->stopping && zlistx_size (self->jobs) == 0)
            pthread_cond_wait (&self->wake, &self->lock);
        s_job_t *job = self->stopping ? NULL : zlistx_detach (self->jobs, NULL);
        int threads = 1;
        if (job) {
            self->busy++;
            threads = s_share (self);
        }
        pthread_mutex_unlock (&self->lock);
        if (!job)
            break;
        proto_msg_t result = {0};
        if (threads > 1)
            log_info ("pair %llu: on %d threads (latency mode: the agent had no other)",
                      (unsigned long long) job->msg.pair, threads);
        if (proc)
            process_set_threads (proc, threads, most);
        int rc = proc ? process_task (proc, &job->msg, &result, err, sizeof err) : -1;
        pthread_mutex_lock (&self->lock);
        self->busy--;
        pthread_mutex_unlock (&self->lock);
        if (rc != 0 && job->msg.command == PROTO_ENSEMBLE) {
            // A chunk that cannot be summed says why (the broker gives it
            // to another agent, or fails its job).
            proto_msg_release (&result);
            result = (proto_msg_t) {.command = PROTO_PARTIAL,
                                    .seq = job->msg.seq,
                                    .count = job->msg.count,
                                    .pair = job->msg.pair,
                                    .attempt = job->msg.attempt,
                                    .text = strdup (proc ? err : "no processor")};
            log_warning ("%s", proc ? err : "no processor");
        }
        else if (rc != 0) {
            // A full results volume defers the pair: it has not failed.
            proto_msg_release (&result);
            result = (proto_msg_t) {.command = rc == PROCESS_DEFER ? PROTO_DEFER : PROTO_FAILED,
                                    .pair = job->msg.pair,
                                    .attempt = job->msg.attempt,
                                    .text = strdup (err)};
            if (rc == PROCESS_DEFER)
                log_warning ("pair %llu deferred: %s", (unsigned long long) job->msg.pair, err);
            else
                log_warning ("%s", err);
        }
        // The result goes to the main thread, which sends it and keeps it
        // until the broker has recorded it; a first frame says whether the
        // task came over an earlier connection.
        zmsg_t *zmsg = proto_encode (&result);
        byte orphan = (byte) job->orphan;
        if (zmsg && zmsg_pushmem (zmsg, &orphan, 1) == 0)
            zmsg_send (&zmsg, out);
        zmsg_destroy (&zmsg);
        proto_msg_release (&result);
        s_job_destroy (&job);
    }
    zsock_destroy (&out);
    process_destroy (&proc);
    return NULL;
}

// ---------------------------------------------------------------------------
// Talking to the broker

// Not connected (a reconnect failed; the next tick tries again): nothing
// goes, results stay unrecorded and go after the next HELLO.
static void
s_send (agent_t *self, const proto_msg_t *msg)
{
    if (self->broker)
        proto_send (msg, NULL, self->broker);
}

static void
s_hello (agent_t *self)
{
    // Capabilities: the processor it runs (piv, noop, exec:...), and
    // 'ensemble' when it sums ensemble chunks (the piv processor): a
    // broker sends ENSEMBLE to no other agent (doc/protocol.md §4.14).
    // 'instance=' this process's token (§4.3).
    char caps[sizeof self->cfg.agent.processor + 64];
    snprintf (caps, sizeof caps, "%s%s instance=%s", self->cfg.agent.processor,
              strcmp (self->cfg.agent.processor, "piv") == 0 ? " ensemble" : "", self->instance);
    proto_msg_t hello = {.command = PROTO_HELLO,
                         .name = self->id,
                         .text = agent_hostname (),
                         .count = (uint32_t) self->nworkers,
                         .settings = caps};
    s_send (self, &hello);
    free (hello.text);
    self->hello_ms = s_ms ();
    // Credit: the workers that hold nothing this broker knows of. Orphans'
    // slots come back with READY when they finish.
    int free_slots = self->nworkers - self->running - self->withheld;
    if (free_slots > 0) {
        proto_msg_t ready = {.command = PROTO_READY, .count = (uint32_t) free_slots};
        s_send (self, &ready);
    }
    // Results the broker has not recorded go again: first result wins.
    for (proto_msg_t *r = zlistx_first (self->unrecorded); r; r = zlistx_next (self->unrecorded))
        s_send (self, r);
}

// A new connection after the broker went silent or said it forgot us:
// every task held becomes an orphan of the old connection.
static void
s_forget_connection (agent_t *self)
{
    pthread_mutex_lock (&self->lock);
    for (s_job_t *job = zlistx_first (self->jobs); job; job = zlistx_next (self->jobs))
        job->orphan = 1;
    pthread_mutex_unlock (&self->lock);
    self->orphans = self->running;
}

// 0, or -1 with err.
static int
s_connect (agent_t *self, char *err, size_t errlen)
{
    zsock_destroy (&self->broker);
    self->broker = secure_connect (ZMQ_DEALER, &self->cfg, self->endpoint, "the broker", 2000,
                                   err, errlen, NULL);
    if (!self->broker)
        return -1;
    self->broker_expires =
        s_ms () + (int64_t) self->cfg.broker.heartbeat_ms * self->cfg.broker.liveness;
    s_hello (self);
    return 0;
}

static int s_on_broker (zloop_t *loop, zsock_t *reader, void *arg);

static void
s_reconnect (agent_t *self)
{
    if (self->loop && self->broker)
        zloop_reader_end (self->loop, self->broker);
    s_forget_connection (self);
    char err[1024];
    if (s_connect (self, err, sizeof err) != 0)
        log_error ("%s", err);
    else if (self->loop)
        zloop_reader (self->loop, self->broker, s_on_broker, self);
}

static void
s_queue_job (agent_t *self, proto_msg_t *task)
{
    s_job_t *job = calloc (1, sizeof *job);
    if (!job) {
        proto_msg_release (task);
        return;
    }
    job->msg = *task;
    memset (task, 0, sizeof *task);
    pthread_mutex_lock (&self->lock);
    zlistx_add_end (self->jobs, job);
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
    self->running++;
}

static void
s_keep_unrecorded (agent_t *self, proto_msg_t *result)
{
    proto_msg_t *copy = malloc (sizeof *copy);
    if (!copy) {
        proto_msg_release (result);
        return;
    }
    *copy = *result;
    memset (result, 0, sizeof *result);
    zlistx_add_end (self->unrecorded, copy);
}

// A task of the noop processor costs less than handing it to a worker
// thread: it is answered here, and its credit never leaves the broker's
// count (the agent takes as many as it has workers, as ever).
static void
s_inline_task (agent_t *self, proto_msg_t *task)
{
    char err[1024];
    proto_msg_t result = {0};
    if (process_task (self->inline_proc, task, &result, err, sizeof err) != 0) {
        proto_msg_release (&result);
        result = (proto_msg_t) {.command = PROTO_FAILED,
                                .pair = task->pair,
                                .attempt = task->attempt,
                                .text = strdup (err)};
    }
    if (proto_batch_add (self->out, &result) != 0)
        s_send (self, &result);
    s_keep_unrecorded (self, &result);
}

// Credit for 'slots' workers goes back to the broker, or, while the results
// volume is full, is owed until room returns (s_tick).
static void
s_give_slots (agent_t *self, int slots)
{
    if (slots <= 0)
        return;
    if (self->paused) {
        self->withheld += slots;
        return;
    }
    proto_msg_t ready = {.command = PROTO_READY, .count = (uint32_t) slots};
    s_send (self, &ready);
}

// The results volume is full (a worker deferred a pair): no task is taken
// until s_tick finds room again.
static void
s_pause (agent_t *self, const char *why)
{
    if (!self->paused)
        log_warning ("%s: taking no work until there is room", why);
    self->paused = 1;
}

// A task taken while the results volume is full goes back at once as a
// DEFER, sent until recorded like a result; its credit is owed.
static void
s_defer_task (agent_t *self, proto_msg_t *task, const char *why)
{
    proto_msg_t defer = {.command = PROTO_DEFER,
                         .pair = task->pair,
                         .attempt = task->attempt,
                         .text = strdup (why)};
    s_send (self, &defer);
    s_keep_unrecorded (self, &defer);
    self->withheld++;
}

// One message from the broker (alone, or one of a BATCH).
static void
s_on_broker_msg (agent_t *self, proto_msg_t *msg)
{
    if (msg->command != PROTO_DISCONNECT)
        self->asked_again = 0;  // the broker knows us
    switch (msg->command) {
    case PROTO_TASK:
        if (self->draining) {
            // The broker requeues it when we say goodbye (or stop beating).
            log_info ("pair %llu: not taken, stopping", (unsigned long long) msg->pair);
            break;
        }
        log_info ("pair %llu attempt %u: %s", (unsigned long long) msg->pair, msg->attempt,
                  msg->path_a);
        char why[PATH_MAX + 128];
        int full = !self->inline_proc
                   && !process_room (self->cfg.agent.results, self->cfg.agent.min_free_mb, why,
                                     sizeof why);
        if (!self->inline_proc && (full || self->paused)) {
            if (!full)
                snprintf (why, sizeof why, "results volume '%s' was full: waiting for room",
                          self->cfg.agent.results);
            s_pause (self, why);
            s_defer_task (self, msg, why);
        }
        else if (self->inline_proc)
            s_inline_task (self, msg);
        else
            s_queue_job (self, msg);
        break;
    case PROTO_ENSEMBLE:
        if (self->draining) {
            log_info ("ensemble chunk %llu: not taken, stopping", (unsigned long long) msg->pair);
            break;
        }
        log_notice ("ensemble job %llu pass %u chunk %llu attempt %u", (unsigned long long) msg->seq,
                  msg->count + 1, (unsigned long long) msg->pair, msg->attempt);
        if (self->inline_proc) {
            proto_msg_t no = {.command = PROTO_PARTIAL,
                              .seq = msg->seq,
                              .count = msg->count,
                              .pair = msg->pair,
                              .attempt = msg->attempt,
                              .text = "the noop processor computes no correlation"};
            s_send (self, &no);
        }
        else
            s_queue_job (self, msg);
        break;
    case PROTO_RECORDED:
        for (proto_msg_t *r = zlistx_first (self->unrecorded); r;
             r = zlistx_next (self->unrecorded))
            if (r->pair == msg->pair && r->attempt == msg->attempt) {
                self->done += r->command != PROTO_DEFER;
                zlistx_delete (self->unrecorded, zlistx_cursor (self->unrecorded));
                break;
            }
        break;
    case PROTO_HEARTBEAT:
        break;
    case PROTO_DISCONNECT:
        // The broker restarted or forgot us: introduce ourselves again. Asked
        // on every heartbeat, it refuses our HELLO (another agent has our id,
        // or it knows enough agents): said now and then, not each second.
        // A DISCONNECT within a heartbeat of our HELLO answers what we sent
        // before it (or the READY of a refused HELLO): saying HELLO again for
        // each would make the broker forget us at once, over and over; a
        // broker that really forgot us says so again on the next heartbeat.
        if (s_ms () - self->hello_ms < self->cfg.broker.heartbeat_ms) {
            log_debug ("the broker at '%s' asked for a HELLO just sent", self->endpoint);
            break;
        }
        if (++self->asked_again == 1)
            log_notice ("the broker at '%s' asked us to introduce ourselves again", self->endpoint);
        else if (self->asked_again % 60 == 3)
            log_warning ("the broker at '%s' refuses agent '%s' (%d HELLOs in a row): another "
                         "agent connected under this id, or broker/max_agents reached (its log "
                         "says which)",
                         self->endpoint, self->id, self->asked_again - 1);
        s_forget_connection (self);
        s_hello (self);
        break;
    default:
        log_warning ("from the broker at '%s': unexpected %s", self->endpoint,
                     proto_command_name (msg->command));
    }
}

static int
s_on_broker (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    agent_t *self = arg;
    proto_msg_t msg;
    char err[512];
    int rc = proto_recv (reader, NULL, &msg, err, sizeof err);
    if (rc != 0) {
        if (rc == -1)
            log_warning ("from the broker at '%s': %s", self->endpoint, err);
        return 0;
    }
    self->broker_expires =
        s_ms () + (int64_t) self->cfg.broker.heartbeat_ms * self->cfg.broker.liveness;
    self->backoff_ms = 1000;
    for (size_t i = 0; i < proto_count (&msg); i++)
        s_on_broker_msg (self, proto_at (&msg, i));
    // The results of a batch of noop tasks go back together. One the broker
    // cannot take now is kept (unrecorded) and sent again.
    proto_batch_send (self->out, NULL, self->broker);
    proto_msg_release (&msg);
    return 0;
}

static int
s_on_result (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    agent_t *self = arg;
    zmsg_t *zmsg = zmsg_recv (reader);
    zframe_t *mark = zmsg ? zmsg_pop (zmsg) : NULL;
    int orphan = mark && zframe_size (mark) == 1 && zframe_data (mark)[0] != 0;
    zframe_destroy (&mark);
    proto_msg_t *msg = calloc (1, sizeof *msg);
    char err[512];
    if (!zmsg || !msg || proto_decode (&zmsg, msg, err, sizeof err) != 0) {
        zmsg_destroy (&zmsg);
        free (msg);
        return 0;
    }
    self->running--;
    s_send (self, msg);
    if (msg->command == PROTO_PARTIAL) {
        // Not kept: a partial the broker never gets is computed again by
        // whoever gets its chunk back (its slot returns with it).
        s_msg_destroy (&msg);
        if (orphan && self->orphans > 0) {
            self->orphans--;
            s_give_slots (self, 1);
        }
        return 0;
    }
    zlistx_add_end (self->unrecorded, msg);
    // The broker that counts our credit never knew an orphan's task; it
    // keeps the credit of a deferred one (the contract of DEFER): both
    // slots go back with READY, now or once the volume has room.
    int slots = 0;
    if (orphan && self->orphans > 0) {
        self->orphans--;
        slots = 1;
    }
    if (msg->command == PROTO_DEFER) {
        s_pause (self, msg->text ? msg->text : "results volume full");
        slots = 1;
    }
    s_give_slots (self, slots);
    return 0;
}

static void
s_beat (agent_t *self)
{
    proto_msg_t beat = {.command = PROTO_HEARTBEAT, .time_ns = zclock_time () * 1000000};
    s_send (self, &beat);
}

static int
s_tick (zloop_t *loop, int timer_id, void *arg)
{
    (void) loop, (void) timer_id;
    agent_t *self = arg;
    int64_t now = s_ms ();
    if (now > self->broker_expires) {
        log_warning ("the broker at '%s' is silent; reconnecting%s", self->endpoint,
                     secure_hint (&self->cfg));
        s_reconnect (self);
        self->broker_expires = now + self->backoff_ms;
        self->backoff_ms = self->backoff_ms * 2 > 30000 ? 30000 : self->backoff_ms * 2;
        return 0;
    }
    s_beat (self);
    // Plans the workers made for a new window size or grid are kept for the
    // node's next start (and its one-shot pivfarm-piv runs).
    // A cache only (no result depends on it): said once, at info level.
    if (piv_wisdom_save_new (piv_wisdom_default_path ()) < 0 && !self->wisdom_warned) {
        log_info ("cannot save FFTW wisdom to '%s': plans will be measured again at the "
                  "next start", piv_wisdom_default_path ());
        self->wisdom_warned = 1;
    }
    // Paused for a full results volume: once there is room, the owed
    // credit goes back and work resumes.
    char why[PATH_MAX + 128];
    if (self->paused
        && process_room (self->cfg.agent.results, self->cfg.agent.min_free_mb, why, sizeof why)) {
        log_notice ("results volume '%s' has room again (%s): taking work (%d slot(s))",
                    self->cfg.agent.results, why, self->withheld);
        self->paused = 0;
        int slots = self->withheld;
        self->withheld = 0;
        s_give_slots (self, slots);
    }
    // A result still unrecorded after a liveness interval was lost by a
    // broker that could not commit it (a full disk): it goes again, since
    // the connection, and so the resend at HELLO, may never break.
    int64_t interval = (int64_t) self->cfg.broker.heartbeat_ms * self->cfg.broker.liveness;
    if (now >= self->resend_at) {
        if (self->resend_at > 0)
            for (proto_msg_t *r = zlistx_first (self->unrecorded); r;
                 r = zlistx_next (self->unrecorded))
                s_send (self, r);
        self->resend_at = now + interval;
    }
    return 0;
}

// ---------------------------------------------------------------------------

char *
agent_hostname (void)
{
    char name[256] = "";
    if (gethostname (name, sizeof name - 1) != 0 || !*name)
        return NULL;
    return strdup (name);
}

agent_t *
agent_new (const config_t *cfg, const char *id, char *err, size_t errlen)
{
    // agent/broker (--broker) as a bind address (tcp://*:5551) connects nowhere.
    if (!config_connect (cfg, "agent/broker", err, errlen))
        return NULL;
    agent_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "cannot start the agent: out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    snprintf (self->endpoint, sizeof self->endpoint, "%s",
              *cfg->agent.broker ? cfg->agent.broker : cfg->broker.work);
    if (id)
        snprintf (self->id, sizeof self->id, "%s", id);
    else {
        // The same name after a restart: one series on the status page and
        // one row in the store per agent, not one per process. Instances of
        // pivfarm-agent@ on one host differ by their instance ('pivfarm',
        // the farm's own configuration, adds nothing).
        char *host = agent_hostname (), instance[128];
        if (daemon_unit_instance ("pivfarm-agent", instance, sizeof instance) == 0
            && strcmp (instance, "pivfarm") != 0)
            snprintf (self->id, sizeof self->id, "%s-%s", host ? host : "agent", instance);
        else
            snprintf (self->id, sizeof self->id, "%s", host ? host : "agent");
        free (host);
    }
    zuuid_t *token = zuuid_new ();
    if (!token) {
        snprintf (err, errlen, "cannot start the agent: out of memory");
        free (self);
        return NULL;
    }
    snprintf (self->instance, sizeof self->instance, "%s", zuuid_str (token));
    zuuid_destroy (&token);
    // The CPUs this process may run on (a Slurm step's, taskset's, a
    // cpuset's), not every CPU of the node.
    cpu_set_t cpus;
    long cores = sched_getaffinity (0, sizeof cpus, &cpus) == 0 ? CPU_COUNT (&cpus)
                                                                : sysconf (_SC_NPROCESSORS_ONLN);
    self->nworkers = cfg->agent.threads > 0 ? cfg->agent.threads : (int) (cores > 0 ? cores : 1);
    if (self->nworkers > MAX_WORKERS)
        self->nworkers = MAX_WORKERS;
    self->latency = cfg->agent.latency && self->nworkers > 1;
    process_budget (cfg, self->nworkers, &self->budget, self->budget_why, sizeof self->budget_why);
    // Plans measured once on this node serve every start after it.
    piv_wisdom_load (piv_wisdom_default_path ());
    // The processor is checked here, so that a bad one stops the agent at
    // start rather than failing every task.
    process_t *probe = process_new (cfg, err, errlen);
    if (!probe) {
        free (self);
        return NULL;
    }
    if (strcmp (cfg->agent.processor, "noop") == 0)
        self->inline_proc = probe;
    else
        process_destroy (&probe);
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->wake, NULL);
    self->jobs = zlistx_new ();
    self->unrecorded = zlistx_new ();
    self->out = proto_batch_new ();
    snprintf (self->results_endpoint, sizeof self->results_endpoint, "inproc://pivfarm-agent-%p",
              (void *) self);
    self->results = zsock_new_pull (self->results_endpoint);
    self->loop = zloop_new ();
    self->backoff_ms = 1000;
    if (!self->jobs || !self->unrecorded || !self->out || !self->results || !self->loop) {
        snprintf (err, errlen, "cannot start the agent: out of memory");
        agent_destroy (&self);
        return NULL;
    }
    zlistx_set_destructor (self->jobs, (zlistx_destructor_fn *) s_job_destroy);
    zlistx_set_destructor (self->unrecorded, (zlistx_destructor_fn *) s_msg_destroy);
    for (int i = 0; i < self->nworkers; i++) {
        self->workers[i] = (s_worker_t) {self, i, 0, 0};
        self->workers[i].started =
            pthread_create (&self->workers[i].thread, NULL, s_worker, &self->workers[i]) == 0;
    }
    if (s_connect (self, err, errlen) != 0) {
        agent_destroy (&self);
        return NULL;
    }
    zloop_reader (self->loop, self->broker, s_on_broker, self);
    zloop_reader (self->loop, self->results, s_on_result, self);
    zloop_timer (self->loop, (size_t) cfg->broker.heartbeat_ms, 0, s_tick, self);
    log_notice ("agent '%s': %d worker(s), processor %s, broker %s%s", self->id, self->nworkers,
                cfg->agent.processor, self->endpoint,
                self->latency ? ", latency mode (a pair alone runs on every idle thread)" : "");
    char size[32];
    if (strcmp (cfg->agent.processor, "piv") == 0)
        log_notice ("memory budget %s a thread (%s)",
                    self->budget ? piv_budget_size (self->budget, size, sizeof size) : "unlimited",
                    self->budget_why);
    return self;
}

void
agent_destroy (agent_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    agent_t *self = *self_p;
    pthread_mutex_lock (&self->lock);
    self->stopping = 1;
    pthread_cond_broadcast (&self->wake);
    pthread_mutex_unlock (&self->lock);
    for (int i = 0; i < self->nworkers; i++)
        if (self->workers[i].started)
            pthread_join (self->workers[i].thread, NULL);
    zloop_destroy (&self->loop);
    zsock_destroy (&self->broker);
    zsock_destroy (&self->results);
    zlistx_destroy (&self->jobs);
    zlistx_destroy (&self->unrecorded);
    proto_batch_destroy (&self->out);
    process_destroy (&self->inline_proc);
    pthread_cond_destroy (&self->wake);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

int
agent_run (agent_t *self)
{
    zloop_start (self->loop);
    // Stopping: finish what we hold, report it, wait a little for RECORDED;
    // take no new task, and beat on, lest the broker give ours to another.
    self->draining = 1;
    if (self->running > 0)
        log_notice ("stopping: finishing %d task(s)", self->running);
    zpoller_t *poller = zpoller_new (self->results, self->broker, NULL);
    if (poller)
        zpoller_set_nonstop (poller, true);
    int64_t deadline = s_ms () + (int64_t) self->cfg.agent.drain_s * 1000, beat = 0;
    while (poller && (self->running > 0 || zlistx_size (self->unrecorded) > 0)
           && s_ms () < deadline) {
        if (s_ms () >= beat) {
            s_beat (self);
            beat = s_ms () + self->cfg.broker.heartbeat_ms;
        }
        if (self->running == 0 && deadline > s_ms () + GOODBYE_S * 1000)
            deadline = s_ms () + GOODBYE_S * 1000;
        zsock_t *which = zpoller_wait (poller, self->cfg.broker.heartbeat_ms < 100
                                                   ? self->cfg.broker.heartbeat_ms : 100);
        if (which == self->results)
            s_on_result (NULL, which, self);
        else if (which == self->broker)
            s_on_broker (NULL, which, self);
    }
    zpoller_destroy (&poller);
    // What is still computing goes back with the goodbye: the broker
    // requeues every pair an agent held when it says DISCONNECT.
    if (self->running > 0) {
        int killed = process_kill_programs ();
        log_notice ("stopping: %d task(s) not finished within agent/drain_s = %d s, handed back "
                    "to the broker%s",
                    self->running, self->cfg.agent.drain_s,
                    killed ? " (their exec programs killed)" : "");
    }
    proto_msg_t bye = {.command = PROTO_DISCONNECT};
    s_send (self, &bye);
    log_notice ("stopped: %lld result(s) recorded, %zu not confirmed", (long long) self->done,
                zlistx_size (self->unrecorded));
    return 0;
}
