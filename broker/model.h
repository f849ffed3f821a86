// model.h — the records the broker's stages share: experiments, tasks,
// agents, allocations and archives, per-second rings. Plain structs: the
// stage that owns each says so in its comment. Not for use outside broker/.

#ifndef BROKER_MODEL_H
#define BROKER_MODEL_H

#include "broker/feedback.h"
#include "common/config.h"
#include "common/proto.h"
#include "piv/calib.h"

#include <czmq.h>
#include <limits.h>
#include <stdint.h>

#define LATENCY_KEPT 1024  // latencies kept per experiment for its median and p99
#define EXP_COMPUTE_KEPT 64  // compute times kept per experiment (dispatch.c, deadlines)
// Upper bounds (s) of the latency histogram's buckets (status, the status
// page's metrics), a +Inf bucket beyond: camera close to result recorded
// takes from tens of ms (a quiet farm) to minutes (a backlog).
#define LATENCY_BOUNDS_S {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
#define LATENCY_BUCKETS 12  // finite bounds in LATENCY_BOUNDS_S

typedef struct _replay_t replay_t;  // replay.c

// Counts in each of the last 60 seconds, and the second (since the epoch)
// counted last: each ring has its own, so that counting in one never skips
// the clearing of another.
typedef struct {
    int64_t count[60];
    int64_t second;
} rate_ring_t;

#define WARNINGS_MAX 32  // warnings kept at once (doc/storage.md)

// Something the operator should know about storage, shown by status, the
// status page and on the 'state' topic.
typedef struct {
    const char *kind;       // "space", "allocation", "expiry", "archive" or "clock"
    const char *level;      // "warning" or "critical"
    char experiment[256];   // the experiment concerned, or ""
    char path[PATH_MAX];    // the volume or directory
    char message[600];      // one line saying what and what to do
} warning_t;

// A peer's clock as the broker measured it (broker.c, doc/storage.md): an
// agent's from its HEARTBEATs, a watcher's from FILE mtimes in the future.
#define CLOCK_SAMPLES 8
typedef struct {
    char peer[300];         // "agent ID on HOST" or "watcher HEX (EXP)"
    double sample_ms[CLOCK_SAMPLES];  // its clock minus the broker's at receipt, a ring
    int samples, next;
    double skew_ms;         // the estimate: the largest sample (transit only lowers one);
                            // a watcher's is 0 unless a file came from the future
    int64_t seen_ns;        // last measured (broker's clock)
    int64_t logged_ns;      // last logged (at most every 10 min while it lasts)
} clock_rec_t;

// Fast space held for an experiment (store_allocation_t in memory).
typedef struct {
    int64_t id;             // its id in the store
    char kind[8];           // "tmpfs" or "dir"
    char *path;             // the experiment's directory under the watch root
    int64_t size_bytes;     // its size
    int64_t created_ns;     // when it was provisioned
    int64_t expires_ns;     // when it expires
    int releasing;          // archived, then unmounted and removed
    int64_t used_bytes;     // as the guard last measured (-1: unknown)
} alloc_t;

// An archive of an experiment: queued, under way, or ended.
typedef struct {
    char *to;               // the archive directory: files go to <to>/<experiment>/
    char state[16];         // queued, copying, removing, done or failed
    int release;            // its allocation goes once it is done
    int64_t files;          // files of the job
    int64_t copied;         // copied and verified by this job
    int64_t already;        // copied and verified before (an interrupted archive)
    int64_t removed;        // originals removed
    int64_t bytes;          // bytes copied
    char error[1024];       // why it failed
    int64_t skipped;        // files skipped: vanished, ignored, not regular (never removed)
    char notes[1024];       // which, and why ("" when none)
    int64_t started_ns, finished_ns;
} archive_t;

// An experiment's parts, one per stage: each part is written only by the
// stage its comment names (others read it: status, the page's figures), so
// that a stage's state is found in one place and a new stage adds a part
// instead of fields among the others'.

// What its tasks carry and how its files pair (ingest.c merges the
// settings from their layers when the experiment is made and whenever one
// changes: the farm's default or the experiment's 'base', then its 'own'
// keys, then its mask; stats.c's stats_set_mask adds the mask; dispatch.c
// sends them).
typedef struct {
    char *settings;               // the PIV settings its tasks carry
    char *mask;                   // its mask image (settings carry " mask=PATH"), or NULL
    char *base;                   // what it starts from instead of the farm's default (a
                                  // replay: its source's settings; the store's
                                  // experiments.settings), or NULL
    char *own;                    // its own keys ('pivctl piv EXP'): "key=value ...", or NULL
    int pairing;                  // its own pairing rule (pairing_rule_t), or -1: the default
    char *cameras;                // its stereo rig's calibration text ('pivctl calibrate EXP
                                  // --cameras'), which its stereo tasks carry, or NULL
} exp_piv_t;

// Its files as they arrive (ingest.c).
typedef struct {
    rate_ring_t arrivals;         // pairs made per second
    int64_t last_file_ns;         // when its last file arrived (0: not known yet)
} exp_ingest_t;

// How long its pairs take on the agents (dispatch.c: the deadline of an
// agent new to it).
typedef struct {
    int64_t compute_ns[EXP_COMPUTE_KEPT];  // compute times of its last results from any
                                  // agent, a ring
    int computes;                 // how many of them are set
    int compute_next;             // next slot
    int64_t median_ns;            // their median, or -1 until asked for since the last one came
} exp_dispatch_t;

// Its results as they are recorded (results.c).
typedef struct {
    double latency_ms[LATENCY_KEPT];  // close of the last frame -> result recorded, a ring
    int latencies;                // how many of them are set
    int latency_next;             // next slot
    int64_t latency_in[LATENCY_BUCKETS + 1];  // results since start by latency bucket
                                  // (not cumulative; the last one: beyond every bound)
    double latency_sum_s;         // their latencies added up, s
    rate_ring_t rate;             // results recorded per second
} exp_results_t;

// Its feedback (control.c sets, results.c computes and steps the controller).
typedef struct {
    int own;                      // it has its own feedback settings (else the global ones)
    feedback_settings_t settings; // its own
    feedback_pi_t pi;             // its controller's state
    int told_planar;              // logged once: its quantity needs w, a field had none
    int told_uncalibrated;        // logged once: its roi is physical, a field had no calibration
} exp_feedback_t;

// Its calibration (stats.c).
typedef struct {
    int own;                      // it has its own calibration (else the global default)
    piv_calib_t calib;            // its own
    int64_t epoch_ns;             // its calibration's epoch began (calibrate --from now), or 0
} exp_calib_t;

// Its space and archive (storage.c).
typedef struct {
    alloc_t *alloc;               // the fast space provisioned for it, or NULL
    archive_t *archive;           // its archive, or NULL
    int located;                  // some of its files were archived: look their path up
} exp_storage_t;

// Its standing ensemble setting (ensemble.c: 'ensemble EXP auto'): an
// ensemble job over its pairs done once it has been quiet for idle_s.
typedef struct {
    int window;                   // the last pass's windows, px (0: no standing setting)
    int overlap;                  // %
    int idle_s;                   // quiet this long (no new file, no pair waiting) first
    int64_t next_check_ns;        // not looked at again before this
} exp_ensemble_t;

// An experiment the broker has seen since it started: made and owned by
// ingest.c (its identity), with a part per stage.
typedef struct {
    int64_t id;                   // its id in the store
    char *name;                   // its name
    char *source;                 // the directory under the watch root of its files
    exp_piv_t piv;                // what its tasks carry
    exp_ingest_t in;              // its files as they arrive
    exp_dispatch_t dispatch;      // its compute times
    exp_results_t results;        // its latencies and result rate
    exp_feedback_t feedback;      // its feedback settings and controller
    exp_calib_t calib;            // its calibration
    exp_storage_t storage;        // its space and archive
    exp_ensemble_t ensemble;      // its standing ensemble setting
    replay_t *replay;             // the replay feeding it, or NULL (replay.c)
} exp_t;

// A pair ready to go to an agent, or out with one.
typedef struct {
    int64_t pair;        // pair id
    exp_t *exp;          // its experiment
    char *stem;          // its name within it
    char *name_a;        // frame A, relative to the experiment's directory
    char *name_b;        // frame B, or NULL (multipage)
    char *name_c;        // a stereo set's camera 2 frame A, or NULL (a pair)
    char *name_d;        // a stereo set's camera 2 frame B, or NULL (a pair)
    int attempt;         // attempt number once dispatched
    int64_t closed_ns;   // when its last frame was closed (0: unknown)
    int by_hand;         // queued again by a retry, backfill or changed file: its latency
                         // is published but left out of the experiment's median and p99
    int failures;        // FAILED answers since it was queued: the retry delay doubles
    int64_t not_before_ns;  // retried no earlier than this (broker.c, BACKOFF_BASE_MS)
    int64_t dispatched_ns;  // when it was sent
    int64_t deadline_ns;    // requeued for another agent past this (broker/task_deadline_ms)
    int guessed;            // its deadline was set while nobody had a result of its
                            // experiment: set again once somebody has
    int expired;         // its deadline passed and a copy went back to the queue: this one
                         // only holds the agent's slot until it answers
    int answered;        // its answer waits for a busy store (dispatch_park): the agent's
                         // slot was given back when it came
    char *settings;      // the PIV settings it was sent with (dispatch.c), recorded with
                         // its result: the experiment's may change while it is out
} task_t;

#define COMPUTE_KEPT 16  // compute times kept per agent for its medians (the deadlines)

// An agent the broker knows on the work socket.
typedef struct {
    zframe_t *identity;  // its routing id
    char *id;            // the id it gave in HELLO
    char *host;          // its host name
    int cores;           // its cores
    uint32_t credit;     // tasks it can still take
    zlistx_t *tasks;     // task_t it holds
    int64_t expires_ns;  // dead if silent past this
    int64_t done;        // results it delivered
    int64_t compute_ns[COMPUTE_KEPT];  // compute times of its last results, a ring
    int64_t compute_exp[COMPUTE_KEPT]; // the experiment (id) of each
    int computes;        // how many of them are set
    int compute_next;    // next slot
    int64_t median_exp;  // the experiment whose median median_ns holds ...
    int64_t median_ns;   // ... (0: it has none of it), or -1 until asked for since the
                         // last one came
    proto_batch_t *out;  // RECORDED and TASK for it, sent together (s_flush_agents)
    size_t out_tasks;    // how many of them are TASKs: the last ones in 'tasks'
    char key[64];        // its CURVE public key (Z85), or "" (curve off)
    int clamped;         // a READY beyond its cores was clamped (warned once)
    int unreachable;     // a send to it failed: no task until it is heard from again
    char *capabilities;  // what it said it can do (HELLO), for its row in the store
    char instance[40];   // its process's token (HELLO 'instance='), or "": a HELLO of
                         // the same id and token is this agent reconnecting
    int unrecorded;      // came while the store was busy: its row is written once it answers
    int ens_held;        // ensemble chunks it holds (ensemble.c), each taking a slot
} agent_rec_t;

// A task of 'pair' (its names copied); NULL without memory.
task_t *broker_task_new (int64_t pair, exp_t *exp, const char *stem, const char *name_a,
                         const char *name_b);
void broker_task_destroy (task_t **self_p);
// Makes 'self' a stereo set's task: camera 2's frames (copied). 0, or -1
// without memory (the task as it was).
int broker_task_set_more (task_t *self, const char *name_c, const char *name_d);
// Counts 'n' in the second of 'now', clearing the seconds skipped since
// the ring's last count.
void broker_count (rate_ring_t *ring, int64_t now, int n);
// Counts per second over the last 'seconds' complete seconds of a ring.
double broker_rate (rate_ring_t *ring, int64_t now, int seconds);
// The PIV settings a TASK carries, from the [piv] keys of cfg.
void broker_settings_format (const config_t *cfg, char *out, size_t size);

#endif
