// image_internal.h — what the files of libpiv's images share: the image's
// struct, libtiff's per-handle messages and the error helpers (image.c).
// Not for use outside piv/image*.c. The img_ prefix marks what is shared
// here; s_ stays file-local.

#ifndef PIV_IMAGE_INTERNAL_H
#define PIV_IMAGE_INTERNAL_H

#include "piv/image.h"

#include <stddef.h>
#include <tiffio.h>

struct _piv_image_t {
    int width;    // columns
    int height;   // rows
    int bits;     // bits per sample of the source file; 0 if made in memory
    float *data;  // width * height pixels, row-major, 64-byte aligned
};

// Per-handle libtiff messages: the first error is usually the root cause.
typedef struct {
    char error[256];  // first error libtiff reported, "" if none
} img_tiffmsg_t;

// Writes the formatted message into err (nothing if err is NULL or errlen 0).
void img_seterr (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

// strerror is not thread-safe; this is, with either strerror_r flavour.
const char *img_strerror (int errnum, char *buf, size_t len);

// libtiff's open options with handlers that keep its first error in msg
// and silence its warnings; NULL if out of memory. Free with
// TIFFOpenOptionsFree.
TIFFOpenOptions *img_open_options (img_tiffmsg_t *msg);

#endif
