// util.h — small helpers every pivfarm program shares.

#ifndef COMMON_UTIL_H
#define COMMON_UTIL_H

// Seconds on the monotonic clock: for durations, never for dates.
double util_now (void);

#endif
