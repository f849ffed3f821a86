// sha256.h — SHA-256 (FIPS 180-4), for the checksums of archived frames
// (doc/storage.md). No crypto library is among pivfarm's dependencies and
// czmq's zdigest is SHA-1; this one is checked against the FIPS test
// vectors in tests/test_storage.c.

#ifndef COMMON_SHA256_H
#define COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_HEX 65  // bytes of a digest in hex, with its NUL

typedef struct {
    uint32_t state[8];       // the hash so far
    uint64_t bytes;          // bytes hashed
    unsigned char block[64]; // the block being filled
    size_t used;             // its bytes
} sha256_t;

void sha256_init (sha256_t *self);
void sha256_update (sha256_t *self, const void *data, size_t len);
// The digest as 64 lowercase hex digits into hex; the state is spent.
void sha256_final (sha256_t *self, char hex[SHA256_HEX]);

// The digest of a whole file, read in 'block' bytes at a time, into hex.
// 0, or -1 with err naming the file.
int sha256_file (const char *path, size_t block, char hex[SHA256_HEX], char *err, size_t errlen);

#endif
