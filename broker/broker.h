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

// Applies what may change while the broker runs from cfg, a configuration
// loaded again (SIGHUP): log/level (the caller applies it), the policy
// defaults (broker/liveness, max_attempts, task_deadline_ms, max_agents),
// the storage thresholds and rates (storage/warn_free, critical_free,
// archive_dir, archive_idle_s, archive_mb_s, mount_helper), and reads the
// clients' and operators' certificates again. Logs a notice naming what it
// applied and a warning naming each changed key read at start only
// (endpoints, store, pairing, piv, the broker's certificate...), which
// needs a restart. Returns 0.
int broker_reload (broker_t *self, const config_t *cfg);

// Watches the daemon's SIGHUP signalfd 'fd' in the reactor: on each SIGHUP
// the configuration is read again and broker_reload applies what may change
// (daemon_watch_hangup). 0, or -1 out of memory.
int broker_watch_hangup (broker_t *self, int fd);

// The endpoint a socket is bound to ("ingest", "work", "control",
// "publish"), with ephemeral ports resolved; NULL for another name.
const char *broker_endpoint (broker_t *self, const char *socket);

#endif
