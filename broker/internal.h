// internal.h — the reactor's state (broker.c: sockets, commit cadence,
// ingest) with pointers to the stage objects that keep their own state
// (storage_t, results_t, clocks_t); dispatch.c, control.c and status.c
// still read it (doc/design.md, "broker/"). Not for use outside broker/.

#ifndef BROKER_INTERNAL_H
#define BROKER_INTERNAL_H

#include "broker/broker.h"
#include "broker/clocks.h"
#include "broker/control.h"
#include "broker/model.h"
#include "broker/results.h"
#include "broker/storage.h"
#include "broker/dispatch.h"
#include "broker/feedback.h"
#include "broker/ingest.h"
#include "broker/pairing.h"
#include "broker/peers.h"
#include "broker/sched.h"
#include "broker/settings.h"
#include "common/proto.h"
#include "store/store.h"

#include <czmq.h>
#include <limits.h>
#include <stdint.h>

struct _broker_t {
    config_t cfg;             // configuration
    store_t *store;           // the durable state
    zsock_t *ingest_sock;     // ROUTER: watchers
    zsock_t *work_sock;       // ROUTER: agents
    zsock_t *control_sock;    // ROUTER: pivctl, the status page
    zsock_t *publish_sock;    // PUB: results, state
    void *fd_watch;           // broker_poll_fd's watch (SIGHUP), freed with the broker
    zloop_t *loop;            // the reactor
    zlistx_t *fresh;          // task_t of the open transaction: queued after commit
    zlistx_t *after;          // messages sent after the next commit
    char settings[512];       // PIV settings of the configuration
    int store_failed;         // the last commit failed: acknowledge nothing
    char store_why[512];      // why it failed, for the status
    int64_t started_ns;       // start time
    dispatch_t *dispatch;     // the dispatch stage: agents, queue, retry delays, deadlines
    peers_t *peers;           // who may do what: keys, roles, refusals logged
    ingest_t *ingest;         // the ingest stage: files, pairs, experiments in memory
    control_t *control;       // the control stage: the command table
    storage_t *storage;       // the storage stage: allocations, archive, guard
    results_t *results;       // the results stage: counts, feedback, result topics
    clocks_t *clocks;         // peers' clocks
};

// broker.c
// Commits the open transaction, then sends what waited for it and queues
// the tasks it made. 0, or -1 (the store failed: nothing sent).
int broker_commit (broker_t *self);
// Queues msg (whose strings the queue takes over) for 'identity' after the
// next commit: ACK on ingest, RECORDED on work.
void broker_after (broker_t *self, zframe_t *identity, proto_msg_t *msg);

#endif
