// iobench.h — sequential write and read throughput of a directory for IO
// sizes from 64 KiB to 16 MiB (pivctl iobench; doc/storage.md): which IO
// size a volume (the export, a RAM disk, the archive) serves best.

#ifndef COMMON_IOBENCH_H
#define COMMON_IOBENCH_H

#include <stddef.h>
#include <stdint.h>

#define IOBENCH_SIZES 9  // 64 KiB, 128 KiB ... 16 MiB

typedef struct {
    size_t io_size;       // bytes per write() and read()
    int64_t bytes;        // written, then read
    double write_mb_s;    // MB/s (1e6 bytes), write + fsync
    double read_mb_s;     // MB/s, after the page cache dropped the file
} iobench_row_t;

// Writes and reads one file per IO size in 'dir' (removed after), about
// total / IOBENCH_SIZES bytes each (at least one IO of the size). rows gets
// IOBENCH_SIZES rows; *best the index of the size with the shortest
// write-then-read time. 0, or -1 with err naming the file.
int iobench_run (const char *dir, int64_t total, iobench_row_t rows[IOBENCH_SIZES], int *best,
                 char *err, size_t errlen);

#endif
