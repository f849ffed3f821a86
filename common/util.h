// util.h — small helpers every pivfarm program shares.

#ifndef COMMON_UTIL_H
#define COMMON_UTIL_H

#include <stdint.h>

// Seconds on the monotonic clock: for durations, never for dates.
double util_now (void);

// Nanoseconds since the epoch (the wall clock): for times stored and
// compared across processes, as the event log's.
int64_t util_time_ns (void);

#endif
