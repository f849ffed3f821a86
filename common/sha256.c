// sha256.c — SHA-256 by libsodium (crypto_hash_sha256); see sha256.h.

#include "common/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert (sizeof (crypto_hash_sha256_state) <= sizeof ((sha256_t *) 0)->state,
                "sha256_t holds libsodium's state");
_Static_assert (_Alignof (crypto_hash_sha256_state) <= 16, "and is aligned for it");

static crypto_hash_sha256_state *
s_state (sha256_t *self)
{
    return (crypto_hash_sha256_state *) (void *) self->state;
}

void
sha256_init (sha256_t *self)
{
    // libsodium asks for sodium_init before its first use; SHA-256 itself
    // needs nothing of it (no CPU dispatch, no randomness), so a failure
    // there (it has none but a missing /dev/urandom) changes no digest.
    if (sodium_init () < 0) {
        // nothing to do: the digest does not depend on it
    }
    crypto_hash_sha256_init (s_state (self));
}

void
sha256_update (sha256_t *self, const void *data, size_t len)
{
    crypto_hash_sha256_update (s_state (self), data, len);
}

void
sha256_final (sha256_t *self, char hex[SHA256_HEX])
{
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final (s_state (self), digest);
    sodium_bin2hex (hex, SHA256_HEX, digest, sizeof digest);
}

int
sha256_file (const char *path, size_t block, char hex[SHA256_HEX], char *err, size_t errlen)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    char *buf = fd >= 0 ? malloc (block) : NULL;
    if (!buf) {
        snprintf (err, errlen, "cannot read '%s': %s", path, fd < 0 ? strerror (errno) : "out of memory");
        if (fd >= 0)
            close (fd);
        return -1;
    }
    sha256_t h;
    sha256_init (&h);
    ssize_t n;
    while ((n = read (fd, buf, block)) > 0)
        sha256_update (&h, buf, (size_t) n);
    int saved = errno;
    close (fd);
    free (buf);
    if (n < 0) {
        snprintf (err, errlen, "cannot read '%s': %s", path, strerror (saved));
        return -1;
    }
    sha256_final (&h, hex);
    return 0;
}
