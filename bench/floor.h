// floor.h — what SQLite alone costs for the rows of a pair (bench/floor.c),
// the floor that bench_farm prints beside the broker's figures.

#ifndef BENCH_FLOOR_H
#define BENCH_FLOOR_H

// The floor under the store (bench/floor.c): SQLite alone writing the rows
// of 'npairs' pairs in the leanest schema that keeps them (two files, the
// pair, an attempt opened and closed, a result), commit every 2 ms,
// synchronous FULL, in a scratch database at 'path' (removed after), with
// what 'flags' adds of the store's guarantees. CPU of this thread and wall
// time, us per pair. 0, or -1 if SQLite failed.
#define FLOOR_EVENTS    1   // the five event rows of a pair's transitions
#define FLOOR_FK        2   // foreign keys declared and enforced
#define FLOOR_STARTUP   4   // files' pair counts, partial indexes of waiting work
#define FLOOR_READS     8   // the pair's state read before dispatch and result
#define FLOOR_STATS     16  // the result uncounted until a checkpoint a second marks it
int floor_measure (const char *path, int npairs, int flags, double *cpu_us, double *wall_us);

#endif
