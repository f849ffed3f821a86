// util.c — small helpers every pivfarm program shares; see util.h.

#include "common/util.h"

#include <time.h>

double
util_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
