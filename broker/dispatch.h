// dispatch.h — the dispatch stage (dispatch.c): agents on the work socket,
// the scheduler's queue, retry delays, deadlines, and the TASKs sent. It
// reports back to the reactor through dispatch_host_t: RECORDED to send
// after the commit, tasks to queue after it ('fresh'), whether dispatch is
// held, where an agent reads a frame.

#ifndef BROKER_DISPATCH_H
#define BROKER_DISPATCH_H

#include "broker/clocks.h"
#include "broker/ensemble.h"
#include "broker/model.h"
#include "broker/peers.h"
#include "broker/results.h"
#include "broker/sched.h"
#include "common/config.h"
#include "common/proto.h"
#include "store/store.h"

#include <czmq.h>

typedef struct _dispatch_t dispatch_t;

// What the dispatch stage is given (not owned).
typedef struct {
    const config_t *cfg;   // the broker's configuration (a reload changes it in place)
    store_t *store;        // pairs dispatched, answers recorded
    zloop_t *loop;         // its timers: the rate limit's wake-up, retry delays
    results_t *results;    // recorded results and pairs failed for good go here
    clocks_t *clocks;      // agents' clocks, from their HEARTBEATs
    zlistx_t *fresh;       // the reactor's: task_t queued once the open transaction commits
    peers_t *peers;        // agents' keys checked, refusals logged
    void *arg;             // for the callbacks:
    // Sends msg, a RECORDED (its pair and attempt; its strings are freed),
    // to 'identity' after the next commit.
    void (*after) (void *arg, zframe_t *identity, proto_msg_t *msg);
    // 1 while new work is held back (the store failed, the guard pauses).
    int (*held) (void *arg);
    // The path of frame 'name' of exp as an agent reads it.
    void (*frame_path) (void *arg, exp_t *exp, const char *name, char *out, size_t size);
} dispatch_host_t;

// The stage, without sockets yet. NULL without memory.
dispatch_t *dispatch_new (const dispatch_host_t *host);
// Tells agents it is going (DISCONNECT: their tasks are gone), once the
// sockets are set.
void dispatch_goodbye (dispatch_t *self);
void dispatch_destroy (dispatch_t **self_p);
// The work socket (TASK, HEARTBEAT, DISCONNECT) and the publish socket (the
// 'agents' topic), once bound.
void dispatch_set_sockets (dispatch_t *self, zsock_t *work, zsock_t *publish);

// The ensemble stage whose chunks go to the credit live pairs leave (not
// owned; NULL: none). An agent lost gives them back (ensemble_lost).
void dispatch_set_ensemble (dispatch_t *self, ensemble_t *ensemble);

// The scheduler (policy, rate, pause: control, status, settings).
sched_t *dispatch_sched (dispatch_t *self);
// The agents: identity (hex) -> agent_rec_t (status reads them).
zhashx_t *dispatch_agents (dispatch_t *self);

// Queues a task for dispatch ('fresh': subject to sampling); a task sampling
// leaves out is marked skipped and freed.
void dispatch_enqueue (dispatch_t *self, task_t *task, int fresh);
// Holds a task that FAILED until its retry delay has passed (other pairs
// go on meanwhile); a task without a delay is queued at once.
void dispatch_backoff_add (dispatch_t *self, task_t *task, int64_t now);
// Forgets the queue and the tasks waiting out a retry delay (after a failed
// commit: the store's pending pairs are loaded again).
void dispatch_clear (dispatch_t *self);
// Gives queued tasks to agents with credit (unless held), then sends each
// agent's batch.
void dispatch_now (dispatch_t *self);
// A RECORDED the commit let go: into its agent's next batch, or sent now.
void dispatch_recorded (dispatch_t *self, zframe_t *identity, proto_msg_t *msg);

// One message of the work socket (alone or a BATCH), read from 'reader'
// (whose receive timeout is 0). 0 when one was read, -1 when none waits.
int dispatch_work_one (dispatch_t *self, zsock_t *reader);
// The heartbeat: HEARTBEAT to each live agent, the silent ones dropped
// (presumed dead, their tasks back in the queue), the deadlines checked.
void dispatch_heartbeat (dispatch_t *self, int64_t now);
// The broker's loop was held 'held_ns' (a long vacuum or purge, a stop, a
// frozen VM): it read nothing meanwhile, so the agents' silence and their
// tasks' time out are moved on by as much, before anyone is judged.
void dispatch_held (dispatch_t *self, int64_t held_ns);

// While another process holds the store's write lock (broker.c): the
// answers that need a write (RESULT, FAILED, DEFER, DISCONNECT, a known
// agent's HELLO, and a READY behind one of them) wait here in arrival
// order, at most DISPATCH_PARKED_MAX messages and DISPATCH_PARKED_BYTES of
// fields (past that they are dropped, unanswered: the agent sends them
// again); a RESULT or FAILED of a task held gives the agent's slot back at
// once, so that it takes more work (whose dispatch the store keeps in
// memory, store_pair_dispatch); HEARTBEATs and new agents are served as
// ever; the heartbeat neither presumes a silent agent dead nor takes a
// task past its deadline (nothing of it could be recorded).
#define DISPATCH_PARKED_MAX 20000
#define DISPATCH_PARKED_BYTES ((size_t) 256 << 20)
void dispatch_park (dispatch_t *self);
// The store answers again: what waited is handled in order, the agents
// that came meanwhile recorded, and the deadlines of the tasks out moved
// on by 'busy_ns' (the agents could not deliver meanwhile). Returns the
// messages handled; *dropped gets those dropped past the bound.
size_t dispatch_unpark (dispatch_t *self, int64_t busy_ns, size_t *dropped);
// Messages waiting, and the bytes of their fields.
size_t dispatch_parked (dispatch_t *self, size_t *bytes);

// Removes from the store the agents not seen for age_ns (an
// 'agents-forgotten' event), the agents connected now never (they are
// seen first); 'names' (size bytes) gets theirs. The count, or -1 (the
// store's error).
int dispatch_forget_agents (dispatch_t *self, int64_t age_ns, int64_t now, char *names,
                            size_t size);

#endif
