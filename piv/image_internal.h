// image_internal.h — what the files of libpiv's images share: the image's
// struct, libtiff's per-handle messages and the error helpers (image.c).
// Not for use outside piv/image*.c (and budget.c, the loader's limits). The
// img_ prefix marks what is shared here; s_ stays file-local.

#ifndef PIV_IMAGE_INTERNAL_H
#define PIV_IMAGE_INTERNAL_H

#include "piv/image.h"

#include <stddef.h>
#include <tiffio.h>

struct _piv_image_t {
    int width;              // columns
    int height;             // rows
    int bits;               // bits per sample of the source file; 0 if made in memory
    float *data;            // width * height pixels, row-major, 64-byte aligned
    size_t cap;             // bytes allocated at data (a reloaded image keeps them)
    int mapped;             // data is an anonymous mapping (img_alloc), else malloc'd
    int floats;             // data holds the pixels (else they are in bytes alone)
    unsigned char *bytes;   // the pixels of an 8-bit file as it stores them (has_bytes)
    size_t bytes_cap;       // bytes allocated at bytes
    int bytes_mapped;       // bytes is an anonymous mapping
    int has_bytes;          // bytes holds the pixels (piv_image_bytes)
};

// Makes data hold the pixels, converting them from bytes the first time
// (an image loaded from an 8-bit file has only those). 0, or -1 when out
// of memory. Not thread-safe on one image: the engine calls it before its
// threads share the frames.
int img_floats (piv_image_t *self);

// A buffer of at least 'bytes' bytes, 64-byte aligned, *cap_p set to its
// size: from 1 MiB up (while piv_image_set_populate allows) a private
// anonymous mapping populated in one call, zero-filled (*mapped_p 1), else
// posix_memalign'd, not cleared (*mapped_p 0). NULL when out of memory.
void *img_alloc (size_t bytes, size_t *cap_p, int *mapped_p);
// Frees what img_alloc gave (NULL: nothing).
void img_free (void *data, size_t cap, int mapped);

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

// How the greyscale samples of a page are stored (image_samples.c).
typedef struct {
    int bits;     // 2 to 16 unsigned (8 and 16 also signed), 32 or 64 float
    int format;   // SAMPLEFORMAT_UINT (or VOID), _INT or _IEEEFP
    size_t step;  // samples from one pixel to the next: spp, or 1 for planes
    int invert;   // MinIsWhite: black is the largest value
} img_samples_t;

// Converts the first sample of n pixels of one decoded row (host order, as
// libtiff gives it) to floats: unsigned as they are, signed moved up by
// half their range (int16 -32768 is 0), inverted for MinIsWhite; floats
// as they are, for img_float_scale to finish.
void img_convert (const img_samples_t *k, const unsigned char *src, float *dst, size_t n);

// Finishes a frame of float samples: refuses NaN and infinite pixels (-1,
// their count in err, naming 'path'), then maps it into 0..65535 like a
// 16-bit frame: range[0..1] (SMin/SMaxSampleValue, NULL if undeclared)
// onto it, else [0, 1] times 65535, else values already in 0..65535 as
// they are, else the frame's own min..max. Inverts for MinIsWhite.
int img_float_scale (piv_image_t *self, const char *path, const double *range, int invert,
                     char *err, size_t errlen);

// Refuses sample kinds the decoders cannot read: greyscale takes 2 to 16
// bit unsigned, 8 or 16 bit signed, 32 or 64 bit float; colour (libtiff's
// RGBA reader) unsigned samples only. 0, or -1 with err naming 'path'.
int img_check_kind (const char *path, int grey, uint16_t bps, uint16_t format, char *err,
                    size_t errlen);

// Turns an image decoded in stored row order into the one its Orientation
// tag (TIFF 6.0, 1 to 8; others: as it is) means; 5 to 8 swap its width
// and height. 0, or -1 when out of memory (the image unchanged).
int img_orient (piv_image_t *self, uint16_t orientation);

// Writes "'path' is not a TIFF file (a PNG image): convert it, e.g. ..."
// into err, naming the format that the first bytes (data[0..size-1]) show.
void img_not_tiff (const char *path, const unsigned char *data, size_t size, char *err,
                   size_t errlen);

#endif
