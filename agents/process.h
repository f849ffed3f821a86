// process.h — what an agent does with one task: run the PIV core on the
// pair (or nothing, for benchmarks, or an external program), write the
// result file and fill the RESULT message. No sockets here.

#ifndef AGENTS_PROCESS_H
#define AGENTS_PROCESS_H

#include "common/config.h"
#include "common/proto.h"

#include <stddef.h>

typedef struct _process_t process_t;

// A processor for one worker thread: cfg's agent section says which
// ("piv", "noop", "exec:PROGRAM"), where results go and how broker paths
// map to this node's mount. NULL with err for an unknown processor.
process_t *process_new (const config_t *cfg, char *err, size_t errlen);
void process_destroy (process_t **self_p);

// Processes a TASK message. On success fills 'result' as a RESULT (figures,
// blob, written path, compute time) and returns 0; on failure fills err
// with one line naming the pair and files, and returns -1.
int process_task (process_t *self, const proto_msg_t *task, proto_msg_t *result, char *err,
                  size_t errlen);

// Maps a broker path to this node: 'from' prefix replaced by 'to' (both
// from the configuration; unchanged if 'from' is empty or absent). The
// result is in buf; -1 if it does not fit.
int process_map_path (const char *path, const char *from, const char *to, char *buf,
                      size_t len);

#endif
