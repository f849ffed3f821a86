// fuzz.h — what the libFuzzer harnesses (fuzz/fuzz_*.c) share: the entry
// point libFuzzer calls, and a way to hand an input to code that reads
// files. Built only by 'make fuzz' (clang, -fsanitize=fuzzer).

#ifndef FUZZ_FUZZ_H
#define FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// libFuzzer's entry point, one per harness: 0 always (a finding is a crash).
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

// Puts data into a memory file (made once per process, rewritten at each
// call) and returns a path that opens it, "/proc/self/fd/N". Aborts when
// the file cannot be made: the harness is broken, not the code under test.
const char *fuzz_file (const uint8_t *data, size_t size);

// A NUL-terminated copy of data (caller frees); aborts on no memory.
char *fuzz_string (const uint8_t *data, size_t size);

// Ends the run as a finding when an invariant the code promises is broken.
#define FUZZ_ASSERT(cond)                                                                       \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf (stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);      \
            abort ();                                                                           \
        }                                                                                       \
    } while (0)

#endif
