// mask.h — an agent thread's copy of the mask image its tasks name: read
// once, kept while the file is the same, read again once it is replaced.

#ifndef AGENTS_MASK_H
#define AGENTS_MASK_H

#include <stddef.h>
#include "piv/image.h"

typedef struct _mask_cache_t mask_cache_t;

// A new, empty cache; NULL when memory runs out.
mask_cache_t *mask_cache_new (void);
void mask_cache_destroy (mask_cache_t **self_p);

// The mask 'path' names, from 'fd' (opened by the caller, who keeps it:
// not closed, read from offset 0): the cached image when path, device,
// inode, size, mtime and ctime are those it was read from, else the file
// read anew (piv_image_load_fd: a regular file, at most max_bytes, not
// sparse, at most max_pixels) in place of the cached one, which is then
// freed. *generation_p changes whenever the image does (a borrower of the
// previous one must let it go). The image stays the cache's. NULL with
// err naming the file on failure (the cache is then empty).
const piv_image_t *mask_cache_get (mask_cache_t *self, int fd, const char *path,
                                   size_t max_pixels, size_t max_bytes,
                                   unsigned *generation_p, char *err, size_t errlen);

#endif
