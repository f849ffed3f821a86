// ensemble.h — the ensemble stage (ensemble.c): ensemble correlation jobs
// (issue 27, doc/control.md 'ensemble'). A job's pairs are cut into fixed
// chunks when it starts; each chunk of each pass goes to an agent as an
// ENSEMBLE and comes back as a PARTIAL sum, recorded once in the store
// keyed by (job, pass, chunk); when a pass has every chunk, the partials
// are merged in chunk order into the pass's field, the predictor of the
// next pass; the last pass's field and stresses are the experiment's
// ensemble field. An agent lost gives its chunks back to the queue.

#ifndef BROKER_ENSEMBLE_H
#define BROKER_ENSEMBLE_H

#include "broker/model.h"
#include "broker/text.h"
#include "common/config.h"
#include "common/proto.h"
#include "store/store.h"

#include <stdint.h>

#define ENSEMBLE_CHUNK 8  // pairs a chunk

typedef struct _ensemble_t ensemble_t;

// What the stage is given (not owned).
typedef struct {
    store_t *store;          // jobs, partials, fields
    const config_t *cfg;     // max_attempts (a chunk failing this often fails its job) and
                             // the deadlines (task_deadline_ms, deadline_floor_ms)
    void *arg;               // for frame_path:
    // The path of frame 'name' of exp as an agent reads it.
    void (*frame_path) (void *arg, exp_t *exp, const char *name, char *out, size_t size);
} ensemble_host_t;

// NULL without memory.
ensemble_t *ensemble_new (const ensemble_host_t *host);
void ensemble_destroy (ensemble_t **self_p);

// Starts a job over the pairs of 'exp' whose ordinal (1 = its first pair)
// is in 'range' ("A-B", "A", or NULL: every pair done), windows ending at
// 'window' px with 'overlap' %. Its id, or -1 with err saying what was
// refused (a job of exp runs already, a window the engine cannot do, a
// bad range, no pairs, stereo sets or multipage files) or the store's error.
int64_t ensemble_start (ensemble_t *self, exp_t *exp, int window, int overlap, const char *range,
                        int64_t now, char *err, size_t errlen);

// The next chunk for the agent 'holder' (its routing key; 'agent' its id,
// for messages), into msg (its strings and blob belong to the stage until
// the next call): 1, or 0 when no chunk waits.
int ensemble_next (ensemble_t *self, const char *holder, const char *agent, proto_msg_t *msg);

// A PARTIAL from 'holder' (agent 'agent', for messages): recorded once,
// checked first (piv_ensemble_decode, its pass and pair count: a bad one
// fails that chunk, naming the agent). 1 when 'holder' held that chunk
// (its slot is free again), else 0.
int ensemble_partial (ensemble_t *self, const char *holder, const char *agent,
                      const proto_msg_t *msg, int64_t now);

// The agent 'holder' is gone: its chunks go back to the queue.
void ensemble_lost (ensemble_t *self, const char *holder, const char *reason);

// Chunks out past their deadline go back to the queue for another agent
// (the broker's heartbeat): broker/task_deadline_ms, else 10 times the
// median compute time of the job's chunks, at least
// broker/deadline_floor_ms (10 minutes before any chunk came back). The
// holder keeps the slot until it answers (its answer, a late copy, is
// recorded if it comes first: ensemble_partial then says it held it).
void ensemble_deadlines (ensemble_t *self, int64_t now);
// The broker's loop was held 'held_ns' (dispatch_held): the chunks out
// have that much longer.
void ensemble_held (ensemble_t *self, int64_t held_ns);

// A standing setting of exp from its text "window=W overlap=O idle=S"
// (each optional: 8, 50, 30), NULL: none. 0, or -1 with err naming the bad
// word (exp then unchanged). 'text' (the store's form of it) gets the
// normalized words.
int ensemble_standing_set (exp_t *exp, const char *value, char *text, size_t size, char *err,
                           size_t errlen);

// The standing settings looked at (the broker's heartbeat): an experiment
// of one, with no job running, quiet for its idle_s (no file for that long,
// no pair pending or out) and pairs done that its latest job did not cover
// gets a job over its pairs done (logged). Started jobs' count.
int ensemble_tick (ensemble_t *self, zhashx_t *experiments, int64_t now);

// ,"ensemble":{job, pass, passes, window, pairs, chunks, chunks_done} of
// exp's running job into t (null when none runs): from memory, for the
// status of every experiment.
void ensemble_put_running (ensemble_t *self, const exp_t *exp, text_t *t);

// {"job":..,"state":..,...} of exp's latest job into t ("null" if none):
// its progress while it runs. 0, or -1 (the store's error).
int ensemble_put_status (ensemble_t *self, exp_t *exp, text_t *t);

#endif
