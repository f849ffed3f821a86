// status.h — the JSON of status, experiments, agents and the 'state'
// topic (doc/control.md), read from the stages; it changes nothing.

#ifndef BROKER_STATUS_H
#define BROKER_STATUS_H

#include "broker/model.h"
#include "broker/stages.h"
#include "broker/text.h"

#define STATUS_ROWS 200  // rows summarised or paged (--limit N) by default

// Which rows a list shows.
typedef struct {
    const char *experiment;  // -e EXP: that one alone, or NULL
    long page;               // --page K (by name), 0: none
    size_t most;             // rows at most (STATUS_ROWS, or --limit N)
} status_query_t;

// {"uptime_s":...,"volumes":[...], of status: the broker's figures, its
// global policy, the storage warnings, guard and volumes.
void status_head (text_t *t, const stages_t *self);
// "experiments":[rows],"experiments_total":N,"experiments_shown":M: all
// rows while they fit, else the busiest (or page K by name) up to q->most
// that fit; *cut set when rows are left out. 0, or -1 with err (no memory,
// the store).
int status_experiments (text_t *body, const stages_t *self, const status_query_t *q, int *cut,
                        char *err, size_t errlen);
// The same for "agents" (q->experiment not used).
int status_agents (text_t *body, const stages_t *self, const status_query_t *q, int *cut, char *err,
                   size_t errlen);
// ,"policy":P,"rate_limit":R,"paused":B of experiment 'id' (0: global).
void status_policy (text_t *t, const stages_t *self, int64_t id);
// ,"allocation":A|null,"archive":R|null of an experiment.
void status_exp_storage (text_t *t, const exp_t *exp);

#endif
