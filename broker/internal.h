// internal.h — what broker.c (the reactor: ingest, work, commit) and
// control.c (the control socket: status, rate, policy, feedback, replay)
// share. Not for use outside broker/.

#ifndef BROKER_INTERNAL_H
#define BROKER_INTERNAL_H

#include "broker/broker.h"
#include "broker/feedback.h"
#include "broker/pairing.h"
#include "broker/sched.h"
#include "common/proto.h"
#include "store/store.h"

#include <czmq.h>
#include <stdint.h>

#define LATENCY_KEPT 1024  // latencies kept per experiment for its median and p99

typedef struct _replay_t replay_t;

// An experiment the broker has seen since it started.
typedef struct {
    int64_t id;                   // its id in the store
    char *name;                   // its name
    char *source;                 // the directory under the watch root of its files
    char *settings;               // the PIV settings its tasks carry
    double latency_ms[LATENCY_KEPT];  // close of the last frame -> result recorded, a ring
    int latencies;                // how many of them are set
    int latency_next;             // next slot
    int64_t arrivals[60];         // pairs made in each of the last 60 s ...
    int64_t results[60];          // ... and results recorded ...
    int64_t second;               // ... counted up to this second (since the epoch)
    int feedback_own;             // it has its own feedback settings (else the global ones)
    feedback_settings_t feedback; // its own
    feedback_pi_t pi;             // its controller's state
    replay_t *replay;             // the replay feeding it, or NULL
} exp_t;

// A pair ready to go to an agent, or out with one.
typedef struct {
    int64_t pair;        // pair id
    exp_t *exp;          // its experiment
    char *stem;          // its name within it
    char *name_a;        // frame A, relative to the experiment's directory
    char *name_b;        // frame B, or NULL (multipage)
    int attempt;         // attempt number once dispatched
    int64_t closed_ns;   // when its last frame was closed (0: unknown)
    int64_t dispatched_ns;  // when it was sent
} task_t;

// An agent the broker knows on the work socket.
typedef struct {
    zframe_t *identity;  // its routing id
    char *id;            // the id it gave in HELLO
    char *host;          // its host name
    int cores;           // its cores
    uint32_t credit;     // tasks it can still take
    zlistx_t *tasks;     // task_t it holds
    int64_t expires_ns;  // dead if silent past this
    int64_t done;        // results it delivered
} agent_rec_t;

struct _broker_t {
    config_t cfg;             // configuration
    store_t *store;           // the durable state
    pairing_t *pairing;       // the pairing rules
    sched_t *sched;           // pairs ready to dispatch: policy, rate, pause
    zsock_t *ingest;          // ROUTER: watchers
    zsock_t *work;            // ROUTER: agents
    zsock_t *control;         // ROUTER: pivctl, the status page
    zsock_t *publish;         // PUB: results, state
    zactor_t *auth;           // zauth: CURVE clients allowed to connect (curve on), or NULL
    zcertstore_t *operators;  // keys allowed to change things (curve on), or NULL
    zloop_t *loop;            // the reactor
    int wake_timer;           // one-shot timer for a rate-limited queue, or -1
    zhashx_t *experiments;    // name -> exp_t
    zlistx_t *fresh;          // task_t of the open transaction: queued after commit
    zhashx_t *agents;         // identity (hex) -> agent_rec_t
    zlistx_t *after;          // messages sent after the next commit
    char settings[512];       // PIV settings of the configuration
    feedback_settings_t feedback;  // global feedback settings
    int fields_every;         // store_fields: 1 all, 0 none, n every n-th
    int store_failed;         // the last commit failed: acknowledge nothing
    char store_why[512];      // why it failed, for the status
    int64_t results;          // results recorded since start
    int64_t started_ns;       // start time
    int64_t per_second[60];   // results recorded in each of the last 60 s ...
    int64_t second;           // ... the slot of this second (s since the epoch)
};

// broker.c
int broker_commit (broker_t *self);
void broker_dispatch (broker_t *self);
// The experiment 'name', from memory or the store (created if new); NULL on
// a store error.
exp_t *broker_experiment (broker_t *self, const char *name, int64_t now);
// A file event, from a watcher or a replay: records the file, offers it to
// the pairing rules. closed_ns is when its writer closed it (for latency).
// 0, or -1 if it could not be recorded (not to be acknowledged).
int broker_file (broker_t *self, exp_t *exp, const char *name, int64_t size, int64_t mtime_ns,
                 int64_t closed_ns);
// Queues a task for dispatch ('fresh': subject to sampling); a task sampling
// leaves out is marked skipped and freed.
void broker_enqueue (broker_t *self, task_t *task, int fresh);
task_t *broker_task_new (int64_t pair, exp_t *exp, const char *stem, const char *name_a,
                         const char *name_b);
void broker_task_destroy (task_t **self_p);
// Results per second over the last 'seconds' complete seconds of a ring.
double broker_rate (int64_t *ring, int64_t *second, int64_t now, int seconds);
void broker_count (int64_t *ring, int64_t *second, int64_t now, int n);

// control.c
int broker_on_control (zloop_t *loop, zsock_t *reader, void *arg);
// Applies the settings recorded in the store (rate, policy, pause,
// feedback) at start-up.
int broker_settings_load (broker_t *self);
// The feedback of a result just recorded: figures, controller, published
// on feedback.<exp> and logged.
void broker_feedback (broker_t *self, task_t *task, const proto_msg_t *result, int64_t now);
void broker_replay_destroy (replay_t **self_p);

#endif
