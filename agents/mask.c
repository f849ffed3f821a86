// mask.c — the mask cache of an agent thread: the file's identity (path,
// device, inode, size, times) decides whether the image read last still
// stands. See mask.h.

#include "agents/mask.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct _mask_cache_t {
    char path[PATH_MAX];  // the file the image was read from ("": none)
    struct stat st;       // its identity then
    piv_image_t *image;   // the mask, NULL when empty
    unsigned generation;  // changes with the image
};

mask_cache_t *
mask_cache_new (void)
{
    return calloc (1, sizeof (mask_cache_t));
}

void
mask_cache_destroy (mask_cache_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_image_destroy (&(*self_p)->image);
    free (*self_p);
    *self_p = NULL;
}

// 1 when a and b are the same file, unchanged.
static int
s_same (const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size
           && a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec
           && a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

const piv_image_t *
mask_cache_get (mask_cache_t *self, int fd, const char *path, size_t max_pixels,
                size_t max_bytes, unsigned *generation_p, char *err, size_t errlen)
{
    struct stat st;
    if (fstat (fd, &st) != 0) {
        snprintf (err, errlen, "cannot read mask '%s': %s", path, strerror (errno));
        return NULL;
    }
    if (self->image && strcmp (self->path, path) == 0 && s_same (&self->st, &st)) {
        *generation_p = self->generation;
        return self->image;
    }
    piv_image_destroy (&self->image);
    self->path[0] = '\0';
    self->generation++;
    *generation_p = self->generation;
    self->image = piv_image_load_fd (fd, path, 0, max_pixels, max_bytes, err, errlen);
    if (!self->image)
        return NULL;
    snprintf (self->path, sizeof self->path, "%s", path);
    self->st = st;
    return self->image;
}
