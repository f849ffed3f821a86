// stages.h — the broker's stages as status, control and the start-up
// settings reach them: each through its own header, none through the
// reactor's state.

#ifndef BROKER_STAGES_H
#define BROKER_STAGES_H

#include "broker/dispatch.h"
#include "broker/ensemble.h"
#include "broker/ingest.h"
#include "broker/results.h"
#include "broker/stats.h"
#include "broker/storage.h"
#include "common/config.h"
#include "store/store.h"

#include <stdint.h>

// The stages (not owned), with the reactor's own figures.
typedef struct {
    const config_t *cfg;      // the broker's configuration
    store_t *store;           // the durable state
    ingest_t *ingest;         // experiments in memory
    dispatch_t *dispatch;     // agents, the queue and its policies
    results_t *results;       // results' counts and rates, global feedback settings
    storage_t *storage;       // warnings, guard, volumes (NULL before it starts)
    stats_t *stats;           // run statistics, calibrations
    ensemble_t *ensemble;     // ensemble correlation jobs
    int64_t started_ns;       // when the broker started
    void *arg;                // for store_error and store_state:
    // Why the store takes nothing now (its last commit failed, another
    // process holds it, its files were taken away), or NULL while it works.
    const char *(*store_error) (void *arg);
    // Which of those: "ok", "busy", "failing" or "lost".
    const char *(*store_state) (void *arg);
} stages_t;

#endif
