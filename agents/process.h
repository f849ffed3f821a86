// process.h — what an agent does with one task: run the PIV core on the
// pair (or nothing, for benchmarks, or an external program), write the
// result file and fill the RESULT message. No sockets here.

#ifndef AGENTS_PROCESS_H
#define AGENTS_PROCESS_H

#include "common/config.h"
#include "common/proto.h"

#include <stddef.h>
#include <stdint.h>

typedef struct _process_t process_t;

// A processor for one worker thread: cfg's agent section says which
// ("piv", "noop", "exec:PROGRAM"), where results go and how broker paths
// map to this node's mount. NULL with err for an unknown processor.
process_t *process_new (const config_t *cfg, char *err, size_t errlen);
void process_destroy (process_t **self_p);

// SIGKILLs the exec processor's programs running now (of every worker): an
// agent that hands its unfinished tasks back stops them so that it can
// exit. The tasks end failed, unreported. Returns how many were killed.
int process_kill_programs (void);

// The memory a worker thread may take for a pair (issue 23): agent/memory_mb
// if set, else 3/4 of what the agent may use (util_memory_limit: its
// cgroup's limit, else MemTotal), divided among its 'threads'. Fills
// *bytes (0: none known) and 'why' with where it came from, for the log
// and for refusals: "agent/memory_mb 2048, 4 threads", "3/4 of MemTotal
// 23.5 GiB, 4 threads".
void process_budget (const config_t *cfg, int threads, uint64_t *bytes, char *why, size_t len);
// Holds the piv processor's pairs to that budget: a pair whose frames'
// headers say it would take more (piv_budget_pair) fails before anything
// is allocated, naming the sizes, the need and the budget (why). 0 bytes:
// no budget. Pairs are always held to piv/max_ratio.
void process_set_budget (process_t *self, uint64_t bytes, const char *why);

// Latency mode (agent/latency): the piv processor's engine is made for
// 'most' threads (1 .. PIV_MAX_THREADS; its pool's most - 1 threads sleep
// while fewer are used) and the next pairs run on 'threads' of them (1 ..
// most). The fields are the same to the bit whatever 'threads'. The stereo
// engine and the other processors run on the calling thread alone. A change
// of 'most' makes the engine again at the next pair.
void process_set_threads (process_t *self, int threads, int most);

// Processes a TASK message (or an ENSEMBLE: 'result' a PARTIAL with the
// chunk's partial sum, its frames read and checked as a TASK's; -1 with
// err naming the job, pass, chunk and pair on failure). On success fills 'result' as a RESULT (figures,
// blob, written path, compute time) and returns 0; on failure fills err
// with one line naming the pair and files, and returns -1. Returns
// PROCESS_DEFER, err saying why, when the results volume is full (less
// than agent/min_free_mb free, or a write failed with ENOSPC or EDQUOT):
// the pair has not failed, the partial output is removed.
// Frames under the watch root (agent/path_from -> path_to applied to
// watcher/root) are opened beneath it: a '..' or a symbolic link leading
// out is refused; others must be plain absolute paths, not links. Neither
// may be anything but a regular file (a FIFO never blocks: it is refused).
// The TASK's output must be a plain relative path; it is created beneath
// agent/results, never through a link leading out of it.
#define PROCESS_DEFER 1
int process_task (process_t *self, const proto_msg_t *task, proto_msg_t *result, char *err,
                  size_t errlen);

// 1 if the volume of 'dir' (or of its nearest existing parent) has at
// least min_free_mb MiB free for an unprivileged writer (why: "N MiB
// free"); 0 otherwise with why: "results volume '<dir>' is full: N MiB
// free, M MiB needed".
int process_room (const char *dir, int min_free_mb, char *why, size_t whylen);

// Maps a broker path to this node: 'from' prefix replaced by 'to' (both
// from the configuration; unchanged if 'from' is empty or absent). The
// result is in buf; -1 if it does not fit.
int process_map_path (const char *path, const char *from, const char *to, char *buf,
                      size_t len);

#endif
