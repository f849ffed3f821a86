// sched.h — the broker's queue of pairs ready to dispatch: per-experiment
// order (all, latest, sample N), rate limits (token buckets), pause, and
// turns between experiments. Pure data structure: no I/O, no clock (the
// caller passes the time in ns). Operations are O(log n) in the queued
// pairs; sched_next and sched_next_time also walk the experiments (few).

#ifndef BROKER_SCHED_H
#define BROKER_SCHED_H

#include <stddef.h>
#include <stdint.h>

typedef struct _sched_t sched_t;

typedef enum { SCHED_ALL, SCHED_LATEST, SCHED_SAMPLE } sched_kind_t;

// n counts for SAMPLE only (>= 1; sample 1 queues every pair, as all does).
typedef struct {
    sched_kind_t kind;  // which policy
    int n;              // SAMPLE: one pair in n is queued
} sched_policy_t;

enum { SCHED_QUEUED = 0, SCHED_SKIPPED = 1 };

// An empty queue: no limit, policy all, nothing paused. NULL if out of memory.
sched_t *sched_new (void);
// Frees the queue and its settings, never the tasks: call sched_clear first
// to get back those still queued. Accepts NULL; sets *self_p to NULL.
void sched_destroy (sched_t **self_p);

// Queues 'task' (not NULL; the caller's, held until sched hands it back) of
// experiment 'exp' (> 0) as pair 'pair' (pair ids grow with arrival within an
// experiment). 'fresh' is 1 for a pair that just arrived, which the sampling
// policy may leave out, 0 for one queued again (requeue, reload, retry,
// backfill), which is never left out. Returns SCHED_QUEUED; SCHED_SKIPPED when
// sampling leaves it out (the caller keeps the task and marks the pair
// skipped); -1 when out of memory, exp <= 0, task NULL, or the pair is
// already queued (the caller keeps the task).
int sched_add (sched_t *self, int64_t exp, int64_t pair, void *task, int fresh);

// Puts back the task sched_next just gave that could not be sent: it goes
// before every other task of its experiment, its experiment has the next
// turn, and the tokens it took are refunded. (If several are put back, the
// last put back goes first: put them back in the reverse order of taking.)
// Returns 0; -1 if (exp, pair) is already queued or, never right after the
// sched_next that gave it, out of memory (the caller keeps the task).
int sched_put_back (sched_t *self, int64_t exp, int64_t pair, void *task);

// The next task that may be dispatched at now_ns, removed from the queue;
// *exp_p and *pair_p (either may be NULL) receive its experiment and pair.
// NULL when none may go now: empty, paused, or held by a rate limit.
// Experiments take turns (round robin in id order over those with a task
// allowed to go). Within an experiment, tasks put back go first; then all
// and sample give the lowest pair id, latest the highest.
void *sched_next (sched_t *self, int64_t now_ns, int64_t *exp_p, int64_t *pair_p);

// When sched_next may next give a task: now_ns if one may go now, else the
// earliest time a rate limit lets one go; -1 if no task waits for a token
// (empty, or every experiment with tasks paused).
int64_t sched_next_time (sched_t *self, int64_t now_ns);

// Removes the queued task of (exp, pair) and returns it; NULL if not queued.
void *sched_remove (sched_t *self, int64_t exp, int64_t pair);

// Removes every queued task, calling fn (if not NULL) on each: experiment by
// experiment, tasks put back first, then by increasing pair id. Settings,
// sampling counts and rate state are kept.
void sched_clear (sched_t *self, void (*fn) (void *task, void *arg), void *arg);

// Settings. exp 0 is the global one, or an experiment id (> 0). Each returns
// 0, or -1 for a bad argument or when out of memory (nothing changes).
//
// rate: pairs per second, 0 for no limit (negative or not finite: -1). A
// token bucket of capacity 1, so dispatches are paced evenly ('rate 5' sends
// one every 200 ms). The global limit counts every dispatch, an
// experiment's own limit its own: both apply. A new rate counts from the
// last dispatch: the next may go 1/rate after it.
int sched_set_rate (sched_t *self, int64_t exp, double rate);
// The global policy is that of every experiment without its own. Setting a
// policy (global: of those following it) restarts the sampling count: after
// 'sample 3' the next fresh pair is queued, the two after skipped, and so on.
int sched_set_policy (sched_t *self, int64_t exp, sched_policy_t policy);
// Global pause stops every experiment; an experiment is paused while its own
// flag or the global one is set. Takes effect at the next sched_next.
int sched_set_paused (sched_t *self, int64_t exp, int paused);
// Drops the experiment's own rate and policy: it follows the global ones
// (its pause flag is kept). No-op for exp 0 or an experiment never set.
void sched_inherit (sched_t *self, int64_t exp);

// In force for exp: its own setting, or else the global one (exp 0: global).
double sched_rate (sched_t *self, int64_t exp);
sched_policy_t sched_policy (sched_t *self, int64_t exp);
// 1 if exp is paused (own flag or global); exp 0: the global flag.
int sched_paused (sched_t *self, int64_t exp);
// Tasks queued, in all and in one experiment.
size_t sched_size (sched_t *self);
size_t sched_size_of (sched_t *self, int64_t exp);

// Parses argv words: "all" | "latest" | "sample" "N". 0, or -1 with err
// naming the bad or missing word.
int sched_policy_parse (int argc, char *const *argv, sched_policy_t *out, char *err, size_t errlen);
// "all", "latest" or "sample N" into buf; returns buf.
const char *sched_policy_format (sched_policy_t p, char *buf, size_t size);

#endif
