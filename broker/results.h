// results.h — the results stage (results.c): what happens to an agent's
// answer once the store recorded it: counts, latency, feedback, and the
// result, field and failed topics. The one place for per-result work.

#ifndef BROKER_RESULTS_H
#define BROKER_RESULTS_H

#include "broker/feedback.h"
#include "broker/model.h"
#include "store/store.h"

#include <czmq.h>

typedef struct _results_t results_t;
typedef struct _stats_t stats_t;  // stats.h

// The stage over 'store', publishing fields as broker/store_fields says
// (fields_every: 1 all, 0 none, n every n-th). NULL without memory.
results_t *results_new (store_t *store, int fields_every);
void results_destroy (results_t **self_p);
// The publish socket, once bound (nothing is published before).
void results_set_publish (results_t *self, zsock_t *publish);
// The run statistics stage: every result recorded is counted there, and
// its calibrations give the feedback's units.
void results_set_stats (results_t *self, stats_t *stats);
// The global feedback settings (an experiment without its own uses them).
feedback_settings_t *results_feedback (results_t *self);

// A result recorded for 'task' (sent to 'agent', NULL if unknown): its
// experiment's counts and latency, its statistics (stats_add: the caller
// calls it only for a result the store recorded, so each counts once), the
// feedback it makes, and the result (and field) topics.
void results_recorded (results_t *self, task_t *task, const agent_rec_t *agent,
                       const proto_msg_t *msg, int64_t now);
// Counts 'recorded' results (a duplicate: 0) in the totals of status.
void results_counted (results_t *self, int recorded, int64_t now);
// "failed.<exp>/": a pair failed for good after 'attempts', with 'error'.
void results_publish_failed (results_t *self, const task_t *task, int attempts,
                             const char *error, int64_t now);
// Results since start, and per second over the last 'seconds'.
int64_t results_total (const results_t *self);
double results_rate (results_t *self, int64_t now, int seconds);

#endif
