// agent.h — a pivfarm worker agent: connects to the broker's work socket,
// announces itself and its credit, runs the tasks it receives on worker
// threads, sends results until the broker says they are recorded, and
// reconnects with backoff when the broker goes silent. When its results
// volume is full (agent/min_free_mb, ENOSPC) it answers DEFER instead of
// FAILED, sent until recorded, takes no work and keeps the credit of the
// deferred tasks until a heartbeat tick finds room, then sends READY.

#ifndef AGENTS_AGENT_H
#define AGENTS_AGENT_H

#include "common/config.h"

#include <stddef.h>

typedef struct _agent_t agent_t;

// This host's name as the kernel has it (gethostname), whether or not DNS or
// /etc/hosts knows it (czmq's zsys_hostname resolves it, and gives NULL on
// a node whose name does not resolve). malloc'd (caller frees); NULL when
// it has none or out of memory.
char *agent_hostname (void);

// An agent for cfg (agent section; agent/broker is the endpoint) named 'id'
// (NULL: host name and process id). Starts its worker threads. NULL with
// err on failure.
agent_t *agent_new (const config_t *cfg, const char *id, char *err, size_t errlen);
void agent_destroy (agent_t **self_p);

// Runs until SIGINT or SIGTERM; then finishes the tasks it holds, sends
// their results (waiting up to a few seconds for the broker to record
// them), says goodbye and returns 0.
int agent_run (agent_t *self);

#endif
