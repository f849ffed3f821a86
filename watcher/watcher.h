// watcher.h — the watcher: finds complete frame files under the watch root
// (inotify, or polling on network mounts where inotify sees nothing) and
// reports each to the broker's ingest socket until the broker acknowledges
// it. An experiment is a first-level directory of the root. Complete:
// unchanged for watcher/settle_ms and, for a TIFF, as long as its header
// says (then at once if just closed); a file that changes after it was
// reported is reported again.

#ifndef WATCHER_WATCHER_H
#define WATCHER_WATCHER_H

#include "common/config.h"

#include <stddef.h>

typedef struct _watcher_t watcher_t;

// Watches cfg's watcher/root (which must exist) and connects to
// broker/ingest; NULL with err naming the root or the cause (the inotify
// watch limit, for one).
watcher_t *watcher_new (const config_t *cfg, char *err, size_t errlen);
void watcher_destroy (watcher_t **self_p);

// Sends every file already under the root (the broker drops those it has),
// then runs until SIGINT or SIGTERM. Returns 0.
int watcher_run (watcher_t *self);

// Applies what may change while the watcher runs from cfg, a configuration
// loaded again (SIGHUP): watcher/ignore (names seen from now on),
// settle_ms, resend_ms, max_pending; log/level is the caller's. Logs a
// notice naming what it applied and a warning naming each changed key read
// at start only (root, mode, poll_ms, broker/ingest, security). Returns 0.
int watcher_reload (watcher_t *self, const config_t *cfg);

// Watches the daemon's SIGHUP signalfd 'fd' in the reactor: on each SIGHUP
// the configuration is read again and watcher_reload applies what may change
// (daemon_watch_hangup). 0, or -1 out of memory.
int watcher_watch_hangup (watcher_t *self, int fd);

#endif
