// farm.h — what the files of bench_farm share: its sizes and limits, the
// children it starts (farm_util.c), a farm and its event log
// (farm_programs.c), the runs of section 1 that section 2 repeats
// (farm_cycle.c), the store's writes (farm_history.c) and the three
// sections. Not for use outside bench/. The bf_ prefix marks what is shared
// here; s_ stays file-local.

#ifndef BENCH_FARM_H
#define BENCH_FARM_H

#include "store/store.h"

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

// Sizes of the runs, default and --quick.
#define CYCLE_PAIRS 100000
#define CYCLE_PAIRS_QUICK 20000
#define HISTORY_PAIRS 1000000
#define HISTORY_PAIRS_QUICK 200000
#define HISTORY_RUN_PAIRS 50000
#define HISTORY_RUN_PAIRS_QUICK 10000
#define PIV_PAIRS 20
#define PIV_PAIRS_QUICK 8
#define REPS_DEFAULT 1    // farm runs: 100,000 pairs take a quarter of a minute each
#define COMPUTE_REPS 3    // PIV compute baselines: a few seconds each
#define COMPUTE_REPS_QUICK 2
#define MAX_REPS 20
#define MAX_WINDOWS 1200  // 1 s windows of a run

#define WINDOW 20000          // FILE events sent and not yet acknowledged, at most
#define FILE_BATCH 64         // FILE events a message, as a watcher sends one wake-up's
#define HISTORY_COMMIT 10000  // history pairs per commit
#define POLL_S 0.05           // the store is read this often during a run
#define STATS_S 1.0           // the broker's statistics checkpoint (broker/stats_ms default)
#define STALL_S 3.0           // no ACK for this long: the outstanding ones are lost
#define GIVE_UP_S 60.0        // no progress at all for this long: the run failed
#define START_S 300.0         // at most this long for the broker to open its store
#define MAX_CHILDREN 16
#define MAX_AGENTS 4
#define ERRLEN 512

// Section 3: the layout (2048 x 2048, single pass 32 px, 50 %).
#define PIV_SIZE "2048x2048"
#define PIV_PASSES "32"
#define IDLE_S 0.4  // latency run: pause after each result (> the compute time)

// What one bench run does, from its arguments.
typedef struct {
    int quick;              // --quick: smaller runs
    int reps;               // runs of each farm run
    int only;               // --section: the one section run (0: all)
    int compute_reps;       // runs of each compute figure
    int commit_ms;          // the broker's commit interval
    char commit_text[32];   // and how to print it
    int cycle_pairs;        // pairs of a section 1 run
    int history_pairs;      // DONE pairs of section 2's history
    int history_run;        // pairs of a run over it (and of the store alone)
    int piv_pairs;          // pairs of section 3's throughput runs
    char root[PATH_MAX];    // the temporary directory of the farms
} bf_run_t;

// ---------------------------------------------------------------------------
// farm_util.c: children (every program started is killed however the run
// ends), the signals that stop the bench, and small helpers.

pid_t bf_spawn (char *const argv[], const char *log);
int bf_stop (pid_t pid, int sig, double timeout_s);
int bf_wait (pid_t pid);
int bf_alive (pid_t pid);
void bf_kill_children (void);
extern volatile sig_atomic_t bf_interrupted;  // the signal that asked us to stop, or 0
void bf_on_signal (int sig);
int bf_stopped (void);

// Best (minimum, or maximum for rates) and median of n values; sorts v.
typedef struct {
    double best;    // the smallest time, or the largest rate
    double median;  // the median
} bf_stat_t;

int bf_cmp_double (const void *a, const void *b);
bf_stat_t bf_stat (double *v, int n, int rate);
double bf_quantile (const double *sorted, int n, double p);
void bf_memory (pid_t pid, long *hwm_kb, long *rss_kb);
double bf_cpu (pid_t pid);
double bf_cpu_thread (pid_t pid, pid_t tid);  // one thread's (tid 0: all of pid's), s
double bf_cpu_self (void);
double bf_cpu_thread_self (void);  // the calling thread's, s
double bf_cpu_host (void);  // every process's on this machine (/proc/stat, busy), s
void bf_rmtree (const char *path);
void bf_rm_stores (const char *path);
int bf_move_db (const char *from, const char *to);
void bf_remove_db (const char *db);
int bf_mkdir (const char *path);
int bf_write_file (const char *path, const void *data, size_t len);
const char *bf_fs_name (const char *path);
double bf_fsync_floor (const char *dir, int n);
double bf_mib (long kb);

// ---------------------------------------------------------------------------
// farm_programs.c: a farm, a directory with a configuration file, a store
// and the programs running on it; and its event log, followed.


typedef struct {
    char dir[PATH_MAX];          // its directory
    char conf[PATH_MAX + 32];    // dir/pivfarm.conf
    char db[PATH_MAX + 32];      // dir/farm.db
    char ingest[PATH_MAX + 32];  // the ingest endpoint
    pid_t broker;                // pids, 0 when not running
    pid_t watcher;
    pid_t agents[MAX_AGENTS];
    int nagents;                 // agents started
    double start_s;              // the broker's start-up: spawn to its sockets bound
    store_t *reader;             // read-only store, to follow the event log
    int64_t last_event;          // the last event read
} bf_farm_t;

extern const char *bf_bin_dir;  // the programs' directory ($PIVFARM_BIN, default ./bin)
extern int bf_commit_ms;  // broker/commit_ms written into the configuration (0: its default)
extern int bf_latency;    // agent/latency written into it (-1: not written, the default)

void bf_bin (char *buf, size_t len, const char *program);
int bf_farm_init (bf_farm_t *farm, const char *parent, const char *name, const char *processor,
                  int threads);
void bf_farm_log (const bf_farm_t *farm, char *buf, size_t len, const char *name);
void bf_farm_stop (bf_farm_t *farm);
int bf_farm_broker (bf_farm_t *farm, int64_t after);
int bf_farm_agent (bf_farm_t *farm, const char *processor, int threads);
int bf_farm_watcher (bf_farm_t *farm);
int bf_farm_alive (bf_farm_t *farm);


typedef struct {
    const char *experiment;  // the experiment followed
    int64_t exp_id;          // its id, once its "experiment" event is read (0 before)
    int64_t results;         // its "result" events
    int64_t last_result_ns;  // the time of the latest (the broker's clock when it recorded it)
    int64_t agents;          // "agent" events (an agent said HELLO for the first time)
    int64_t last;            // the last event id read
    int64_t base_ns;         // results are also counted by 1 s windows from here ...
    int *windows;            // ... in these MAX_WINDOWS counters (NULL: not counted)
} bf_tail_t;

int bf_tail (bf_farm_t *farm, bf_tail_t *tail);
int bf_farm_wait_agents (bf_farm_t *farm, int n);

// ---------------------------------------------------------------------------
// farm_cycle.c: section 1, the broker's durable full cycle; its runs are
// also section 2's.


typedef struct {
    double cycle_s;         // first FILE sent to last result recorded
    double ingest_s;        // first FILE sent to last ACK received
    int64_t acked;          // FILE events acknowledged
    int64_t ack_msgs;       // ACK messages that acknowledged them
    int64_t lost;           // FILE events never acknowledged (given up after a stall)
    double window_rates[MAX_WINDOWS];  // pairs recorded in each whole 1 s window
    int nwindows;           // whole windows (the last, partial one left out)
    double broker_cpu_s;    // CPU time over the run: the broker,
    double broker_main_cpu_s;  // ... of which its reactor (main) thread,
    double agents_cpu_s;    // the agents,
    double self_cpu_s;      // this process (the watcher's part)
    double host_cpu_s;      // every process on the machine (the others: the rest)
    long hwm_kb, rss_kb;    // the broker's peak and final resident memory
} bf_cycle_t;


// One farm with a fresh (or given) store: broker, agents, one cycle, stop.
typedef struct {
    int agents;           // agents (0: ingest only)
    int threads;          // threads of each
    const char *label;    // as printed
} bf_config_t;

extern const bf_config_t bf_configs[];  // section 1's configurations; [0]: 1 agent x 8 threads

int bf_farm_cycle (const char *parent, const char *name, const bf_config_t *config,
                   const char *experiment, int npairs, const char *history_db, int64_t *events,
                   bf_cycle_t *out, double *start_s);
int bf_section_cycle (const bf_run_t *run);

// ---------------------------------------------------------------------------
// farm_history.c: section 2, dispatch with history; the store's writes,
// which are also section 1's ceiling.


// Where the store's time goes for one pair, by call (s per pair).
enum {
    S_CALL_FILE_NEW,    // store_file_add x 2, as the files arrive
    S_CALL_PAIR,        // store_pair_add
    S_CALL_DISPATCH,    // store_pair_dispatch
    S_CALL_RESULT,      // store_pair_result
    S_CALL_STATS,       // store_stats_save marking the results counted, spread over the pairs
    S_CALL_COMMIT,      // store_commit, spread over the pairs
    S_CALLS
};


extern const char *const bf_call_names[S_CALLS];

double bf_write_pairs (const char *db, const char *exp_name, int npairs, int every,
                       double commit_s, int64_t *last_event, double calls[S_CALLS],
                       double *event_s, double *cpu_us);
int bf_section_history (const bf_run_t *run);

// ---------------------------------------------------------------------------
// farm_piv.c: section 3, PIV end to end; frames landed as a camera PC
// lands them, and the pairs' times read back from the event log (section 4
// too).

// Links pair i's frames src/p_NNNN_{a,b}.tif into the farm's stage/ for
// experiment 'exp' (no data copied; src on the farm's file system).
int bf_stage (const bf_farm_t *farm, const char *src, const char *exp, int i);
// Moves pair i (frame A, then B) from stage/ into data/<exp>; *closed_ns:
// when frame B got its name there (its "close"). 0, or -1 (logged).
int bf_land (const bf_farm_t *farm, const char *exp, int i, int64_t *closed_ns);

// The farm's event log: "pair", "file", "result" and "experiment" events.
typedef struct {
    char *kind;        // "pair", "file", "result", "experiment"
    int64_t ts_ns;     // event time
    int64_t experiment;
    int64_t pair;
    char *payload;
} bf_event_t;

typedef struct {
    bf_event_t *events;
    size_t n, size;
} bf_events_t;

// Reads them all through farm->reader; 0, or -1 (logged).
int bf_events_read (bf_farm_t *farm, bf_events_t *all);
void bf_events_free (bf_events_t *all);
// For pair 'stem' of experiment 'exp_name': when its frame B reached the
// broker (seen_b), when its result was recorded, and the agent's compute
// time. 0 if found.
int bf_pair_times (const bf_events_t *all, const char *exp_name, const char *stem,
                   int64_t *seen_b, int64_t *recorded, int64_t *compute_ns);

// The engine of the farm's configuration: passes 32, overlap 50, one run,
// made for 'threads'; NULL (logged) if it cannot be made.
struct _piv_t *bf_compute_engine (int threads);

int bf_section_piv (const bf_run_t *run);

// ---------------------------------------------------------------------------
// farm_latency.c: section 4, latency mode (issue 27).

int bf_section_latency (const bf_run_t *run);

#endif
