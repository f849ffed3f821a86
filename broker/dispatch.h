// dispatch.h — the dispatch stage (dispatch.c): agents, the scheduler's
// queue, retry delays, deadlines, and the TASKs sent.

#ifndef BROKER_DISPATCH_H
#define BROKER_DISPATCH_H

#include "broker/internal.h"

// One message of the work socket (alone or a BATCH), read from 'reader'.
void dispatch_work_one (broker_t *self, zsock_t *reader);
// The heartbeat: HEARTBEAT to each live agent, the silent ones dropped
// (presumed dead, their tasks back in the queue), the deadlines checked.
void dispatch_heartbeat (broker_t *self, int64_t now);
// Holds a task that FAILED until its retry delay has passed (other pairs
// go on meanwhile); a task without a delay is queued at once.
void dispatch_backoff_add (broker_t *self, task_t *task, int64_t now);
// The agent of routing id 'identity', or NULL.
agent_rec_t *dispatch_agent (broker_t *self, zframe_t *identity);
void dispatch_agent_destroy (agent_rec_t **self_p);

#endif
