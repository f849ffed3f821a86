// replay.h — the replay engine: what an experiment recorded (its file
// events, or its feedback messages) re-emitted into a new experiment at
// the original pace over a speed (doc/control.md, "replay").

#ifndef BROKER_REPLAY_H
#define BROKER_REPLAY_H

#include "broker/model.h"
#include "broker/text.h"
#include "store/store.h"

#include <czmq.h>

// Where a replayed file event goes (the ingest stage's file handling):
// 0, or -1 when it could not be taken (the store failed: tried again at
// the next tick).
typedef int (replay_file_fn) (void *arg, exp_t *exp, const char *name, int64_t size,
                              int64_t mtime_ns, int64_t closed_ns);

// What a replay works with.
typedef struct {
    store_t *store;        // what was recorded; its end is recorded as an event
    zloop_t *loop;         // its timer's reactor
    zsock_t *publish;      // feedback messages go out again here
    replay_file_fn *file;  // file events go here ...
    void *arg;             // ... with this
} replay_host_t;

// A replay of what 'of' recorded (its files, or its feedback messages with
// feedback_only) at 'speed' (0: all at once). NULL with err (no memory,
// the store).
replay_t *replay_new (const replay_host_t *host, const exp_t *of, double speed,
                      int feedback_only, char *err, size_t errlen);
// Starts feeding 'exp' (which then owns the replay: exp->replay), sending
// at once what is due.
void replay_start (replay_t *self, exp_t *exp, int64_t now);
void replay_destroy (replay_t **self_p);
// Items it re-emits, and the name of the experiment it replays.
size_t replay_total (const replay_t *self);
const char *replay_of (const replay_t *self);
// 1 once it has re-emitted everything (its pairs may still run).
int replay_finished (const replay_t *self);
// {"of":S,"speed":X,"sent":N,"total":M,"finished":B,"feedback_only":B}.
void replay_put_status (const replay_t *self, text_t *t);

#endif
