// fuzz.c — the harnesses' shared helpers; see fuzz.h.

#include "fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char *
fuzz_file (const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create ("fuzz-input", 0);
        if (fd < 0) {
            perror ("fuzz: memfd_create");
            abort ();
        }
        snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate (fd, 0) != 0 || (size && pwrite (fd, data, size, 0) != (ssize_t) size)) {
        perror ("fuzz: cannot write the input file");
        abort ();
    }
    return path;
}

char *
fuzz_string (const uint8_t *data, size_t size)
{
    char *s = malloc (size + 1);
    if (!s)
        abort ();
    if (size)
        memcpy (s, data, size);
    s[size] = '\0';
    return s;
}
