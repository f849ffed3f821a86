// sha256.h — SHA-256, for the checksums of archived frames
// (doc/storage.md): libsodium's crypto_hash_sha256 (libzmq links libsodium
// for CURVE already) behind pivfarm's own small API, so that only
// common/sha256.c includes sodium.h. Checked against the FIPS 180-4 test
// vectors in tests/test_storage.c.

#ifndef COMMON_SHA256_H
#define COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_HEX 65  // bytes of a digest in hex, with its NUL

// A digest under way: room for libsodium's crypto_hash_sha256_state (104
// bytes; sha256.c checks that it fits), only ever touched by libsodium.
typedef struct {
    _Alignas (16) unsigned char state[128];
} sha256_t;

void sha256_init (sha256_t *self);
void sha256_update (sha256_t *self, const void *data, size_t len);
// The digest as 64 lowercase hex digits into hex; the state is spent.
void sha256_final (sha256_t *self, char hex[SHA256_HEX]);

// The digest of a whole file, read in 'block' bytes at a time, into hex.
// 0, or -1 with err naming the file.
int sha256_file (const char *path, size_t block, char hex[SHA256_HEX], char *err, size_t errlen);

#endif
