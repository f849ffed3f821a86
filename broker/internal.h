// internal.h — what broker.c (the reactor: ingest, work, commit) and
// control.c (the control socket: status, rate, policy, feedback, replay)
// share. Not for use outside broker/.

#ifndef BROKER_INTERNAL_H
#define BROKER_INTERNAL_H

#include "broker/broker.h"
#include "broker/feedback.h"
#include "broker/pairing.h"
#include "broker/sched.h"
#include "common/proto.h"
#include "store/store.h"

#include <czmq.h>
#include <limits.h>
#include <stdint.h>

#define LATENCY_KEPT 1024  // latencies kept per experiment for its median and p99
// Upper bounds (s) of the latency histogram's buckets (status, the status
// page's metrics), a +Inf bucket beyond: camera close to result recorded
// takes from tens of ms (a quiet farm) to minutes (a backlog).
#define LATENCY_BOUNDS_S {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
#define LATENCY_BUCKETS 12  // finite bounds in LATENCY_BOUNDS_S

typedef struct _replay_t replay_t;

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

// An experiment the broker has seen since it started.
typedef struct {
    int64_t id;                   // its id in the store
    char *name;                   // its name
    char *source;                 // the directory under the watch root of its files
    char *settings;               // the PIV settings its tasks carry
    double latency_ms[LATENCY_KEPT];  // close of the last frame -> result recorded, a ring
    int latencies;                // how many of them are set
    int latency_next;             // next slot
    int64_t latency_in[LATENCY_BUCKETS + 1];  // results since start by latency bucket
                                  // (not cumulative; the last one: beyond every bound)
    double latency_sum_s;         // their latencies added up, s
    rate_ring_t arrivals;         // pairs made per second
    rate_ring_t results;          // results recorded per second
    int feedback_own;             // it has its own feedback settings (else the global ones)
    feedback_settings_t feedback; // its own
    feedback_pi_t pi;             // its controller's state
    replay_t *replay;             // the replay feeding it, or NULL
    alloc_t *alloc;               // the fast space provisioned for it, or NULL
    archive_t *archive;           // its archive, or NULL
    int located;                  // some of its files were archived: look their path up
    int64_t last_file_ns;         // when its last file arrived (0: not known yet)
} exp_t;

// A pair ready to go to an agent, or out with one.
typedef struct {
    int64_t pair;        // pair id
    exp_t *exp;          // its experiment
    char *stem;          // its name within it
    char *name_a;        // frame A, relative to the experiment's directory
    char *name_b;        // frame B, or NULL (multipage)
    int attempt;         // attempt number once dispatched
    int64_t closed_ns;   // when its last frame was closed (0: unknown)
    int by_hand;         // queued again by a retry, backfill or changed file: its latency
                         // is published but left out of the experiment's median and p99
    int failures;        // FAILED answers since it was queued: the retry delay doubles
    int64_t not_before_ns;  // retried no earlier than this (broker.c, BACKOFF_BASE_MS)
    int64_t dispatched_ns;  // when it was sent
    int64_t deadline_ns;    // requeued for another agent past this (broker/task_deadline_ms)
    int expired;         // its deadline passed and a copy went back to the queue: this one
                         // only holds the agent's slot until it answers
} task_t;

#define COMPUTE_KEPT 16  // compute times kept per agent for its median (the deadline)

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
    int computes;        // how many of them are set
    int compute_next;    // next slot
    proto_batch_t *out;  // RECORDED and TASK for it, sent together (s_flush_agents)
    size_t out_tasks;    // how many of them are TASKs: the last ones in 'tasks'
    char key[64];        // its CURVE public key (Z85), or "" (curve off)
    int clamped;         // a READY beyond its cores was clamped (warned once)
} agent_rec_t;

// What a CURVE key may do (doc/security.md, "Threat model"): each role is
// a directory of public certificates under security/clients.
typedef enum {
    BROKER_ROLE_READER,    // anywhere under clients/: control's reads, publish
    BROKER_ROLE_WATCHER,   // clients/watchers/: ingest
    BROKER_ROLE_AGENT,     // clients/agents/: work
    BROKER_ROLE_OPERATOR,  // security/operators (clients/operators/): control's changes
} broker_role_t;

struct _broker_t {
    config_t cfg;             // configuration
    store_t *store;           // the durable state
    pairing_t *pairing;       // the pairing rules
    sched_t *sched;           // pairs ready to dispatch: policy, rate, pause
    zsock_t *ingest;          // ROUTER: watchers
    zsock_t *work;            // ROUTER: agents
    zsock_t *control;         // ROUTER: pivctl, the status page
    zsock_t *publish;         // PUB: results, state
    zactor_t *auth;           // zauth: CURVE clients allowed to connect (curve on), or NULL
    zcertstore_t *operators;  // keys allowed to change things (curve on), or NULL
    zcertstore_t *keys_clients;   // every admitted key (curve on), or NULL
    zcertstore_t *keys_watchers;  // keys that may use ingest (curve on), or NULL
    zcertstore_t *keys_agents;    // keys that may use work (curve on), or NULL
    zhashx_t *key_cache;      // "<role>:<key>" -> s_key_seen_t, each answer kept a second
    void *fd_watch;           // broker_poll_fd's watch (SIGHUP), freed with the broker
    int64_t quiet_second;     // refusals logged in this second ...
    int quiet_logged;         // ... this many ...
    int64_t quiet_dropped;    // ... and not logged since the last line that was
    zhashx_t *new_ids;        // peer -> agent ids first recorded in this hour (int64 in a ptr)
    zhashx_t *recorded_ids;   // agent ids recorded in the store since start (bounded)
    int64_t new_ids_hour;     // the hour new_ids counts
    int64_t new_ids_total;    // agent ids first recorded in this hour, all peers
    zloop_t *loop;            // the reactor
    int wake_timer;           // one-shot timer for a rate-limited queue, or -1
    zhashx_t *experiments;    // name -> exp_t
    zlistx_t *fresh;          // task_t of the open transaction: queued after commit
    zlistx_t *backoff;        // task_t that FAILED, waiting out their retry delay
    int backoff_timer;        // one-shot timer for the earliest of them, or -1
    zhashx_t *agents;         // identity (hex) -> agent_rec_t
    zlistx_t *after;          // messages sent after the next commit
    char settings[512];       // PIV settings of the configuration
    feedback_settings_t feedback;  // global feedback settings
    int fields_every;         // store_fields: 1 all, 0 none, n every n-th
    int store_failed;         // the last commit failed: acknowledge nothing
    char store_why[512];      // why it failed, for the status
    int64_t results;          // results recorded since start
    int64_t started_ns;       // start time
    rate_ring_t per_second;   // results recorded per second, all experiments
    zactor_t *archiver;       // the archiver thread (archive.c)
    exp_t *archiving;         // the experiment it works on, or NULL
    zlistx_t *archive_queue;  // exp_t waiting for the archiver
    int guard_paused;         // the free-space guard holds dispatch back
    char guard_why[600];      // ... why
    warning_t warnings[WARNINGS_MAX];  // the storage warnings in force
    int nwarnings;
    zhashx_t *cleared;        // warnings the operator cleared ("kind level exp path" -> "1"),
                              // hidden while they last (storage.c)
    int ncleared;             // how many of those arose in the last guard
    zhashx_t *clocks;         // peer -> clock_rec_t (broker.c), bounded
    double clock_limit_ms;    // broker_clock_limit_ms as computed ...
    int64_t clock_limit_ns;   // ... at this time (kept a second)
    char *state_published;    // the last JSON published on the 'state' topic
    int64_t io_size;          // storage/io_size in bytes
    struct {
        const char *role;     // "watch root", "results", "store"
        char path[PATH_MAX];  // the directory
        int64_t free_bytes;   // as last measured (-1: unknown)
        int64_t total_bytes;
    } volumes[3];
};

// broker.c
// The PIV settings a TASK carries, from the [piv] keys of cfg.
void broker_settings_format (const config_t *cfg, char *out, size_t size);
int broker_commit (broker_t *self);
void broker_dispatch (broker_t *self);
// The experiment 'name', from memory or the store (created if new); NULL on
// a store error.
exp_t *broker_experiment (broker_t *self, const char *name, int64_t now);
// A file event, from a watcher or a replay: records the file, offers it to
// the pairing rules. closed_ns is when its writer closed it (for latency).
// 0, or -1 if it could not be recorded (not to be acknowledged).
int broker_file (broker_t *self, exp_t *exp, const char *name, int64_t size, int64_t mtime_ns,
                 int64_t closed_ns);
// Queues a task for dispatch ('fresh': subject to sampling); a task sampling
// leaves out is marked skipped and freed.
void broker_enqueue (broker_t *self, task_t *task, int fresh);
task_t *broker_task_new (int64_t pair, exp_t *exp, const char *stem, const char *name_a,
                         const char *name_b);
void broker_task_destroy (task_t **self_p);
// A store_pair_fn (arg: the broker) for pairs the store brought back to
// PENDING (a retry, a backfill, a changed file): each is queued after the
// commit, never sampled out. 0, or -1 (no memory, or no experiment).
int broker_queue_again (void *arg, int64_t pair, const char *experiment, const char *stem,
                        const char *name_a, const char *name_b, int attempts);
// Results per second over the last 'seconds' complete seconds of a ring.
double broker_rate (rate_ring_t *ring, int64_t now, int seconds);
void broker_count (rate_ring_t *ring, int64_t now, int n);

// 1 if 'key' (Z85) may act in 'role' now: always with curve off; with it
// on, the key's certificate must be in the role's directory and under
// security/clients at this moment (a removed file revokes the key within
// a second, on open connections too). NULL key: 0 with curve on.
int broker_key_allowed (broker_t *self, const char *key, broker_role_t role);
// Logs a refused message of a peer, at most 20 lines a second (the rest
// counted and summed up in the next line logged): a flood of forged
// messages must not flood the log.
void broker_refused (broker_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

// Clock skew (doc/storage.md). A peer's clock measured: 'skew_ms' is its
// clock minus the broker's on receipt; logged (rate-limited) past the limit.
void broker_clock_sample (broker_t *self, const char *key, const char *peer, double skew_ms,
                          int64_t now);
// The skew past which clocks are reported: 100 ms, or the lowest median
// latency of an experiment if lower (at least 10 ms: heartbeat resolution);
// computed at most once a second.
double broker_clock_limit_ms (broker_t *self);

// control.c
int broker_on_control (zloop_t *loop, zsock_t *reader, void *arg);
// Applies the settings recorded in the store (rate, policy, pause,
// feedback) at start-up.
int broker_settings_load (broker_t *self);
// The feedback of a result just recorded: figures, controller, published
// on feedback.<exp> and logged.
void broker_feedback (broker_t *self, task_t *task, const proto_msg_t *result, int64_t now);
void broker_replay_destroy (replay_t **self_p);
// The storage warnings and guard state as JSON (malloc'd, caller frees; NULL
// without memory): what the 'state' topic carries.
char *broker_state_json (broker_t *self);

// storage.c (doc/storage.md): allocations, the archive, the free-space guard.
// Starts the archiver and the guard, loads allocations and resumes the
// archives a stop interrupted. 0, or -1 with err.
int storage_start (broker_t *self, char *err, size_t errlen);
void storage_stop (broker_t *self);
void storage_exp_release (exp_t *exp);
// The commands. Each returns a reply status (200, 400, 404, 500) with err
// saying why when it is not 200; the caller commits.
int storage_provision (broker_t *self, const char *name, int64_t size_bytes, double hours,
                       const char *dir, char *err, size_t errlen);
int storage_archive (broker_t *self, exp_t *exp, const char *to, int release, char *err,
                     size_t errlen);
int storage_release (broker_t *self, exp_t *exp, const char *to, char *err, size_t errlen);
// The path of frame 'name' of exp as an agent reads it: its archived copy
// when it has one, else under the watch root.
void storage_frame_path (broker_t *self, exp_t *exp, const char *name, char *out, size_t size);
// Clears warning 'which' (1-based, as status lists them) or all ('which'
// 0): each is hidden while its condition lasts (shown again if it ends and
// comes back), recorded as the setting 'warnings_cleared' and a "warning"
// event. The count cleared, or -1 with err (no such warning, store error).
int storage_warnings_clear (broker_t *self, int which, char *err, size_t errlen);
// Makes the directories of 'path' up to its last '/' (archive.c). 0 or -1
// (errno).
int broker_mkparents (const char *path);
// The thread of the archiver (archive.c).
void broker_archiver (zsock_t *pipe, void *args);

#endif
