// broker.h — the pivfarm broker: one zloop reactor over four sockets
// (ingest, work, control, publish; doc/protocol.md), with its state in the
// SQLite store. It pairs the files the watcher reports, dispatches pairs to
// agents within the credit they announce, tracks agents by heartbeat and
// records results, acknowledging nothing before it is committed.

#ifndef BROKER_BROKER_H
#define BROKER_BROKER_H

#include "common/config.h"

#include <stddef.h>

typedef struct _broker_t broker_t;

// Opens the store (requeueing pairs dispatched before a crash), rebuilds
// the pairing state from the recorded files, binds the sockets. NULL with
// err naming the store file or endpoint at fault.
broker_t *broker_new (const config_t *cfg, char *err, size_t errlen);

// Commits what is pending, tells agents it is going, closes everything.
void broker_destroy (broker_t **self_p);

// Runs the reactor until SIGINT or SIGTERM (zsys_interrupted). Returns 0,
// or -1 if the store cannot commit and the broker cannot go on.
int broker_run (broker_t *self);

// The endpoint a socket is bound to ("ingest", "work", "control",
// "publish"), with ephemeral ports resolved; NULL for another name.
const char *broker_endpoint (broker_t *self, const char *socket);

#endif
