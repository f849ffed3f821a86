// image.h — greyscale images for PIV as float pixels, read from and written
// to TIFF files through libtiff. Part of libpiv: no ZeroMQ, no SQLite.

#ifndef PIV_IMAGE_H
#define PIV_IMAGE_H

#include <stddef.h>
#include <stdint.h>

// Images larger than this many pixels are refused unless the caller sets
// another limit: 64 Mpx is far beyond any PIV camera, far below what would
// exhaust memory.
#define PIV_MAX_PIXELS_DEFAULT ((size_t) 64 * 1024 * 1024)

// Files larger than this are refused before they are read unless the
// caller sets another limit (the agent's piv/max_file_mb).
#define PIV_MAX_FILE_DEFAULT ((size_t) 1024 * 1024 * 1024)

// Files are read with few large reads (storage serves those best).
#define PIV_READ_BLOCK ((size_t) 4 * 1024 * 1024)

// Sets the size of those reads for the whole process (the agent's
// storage/io_size, doc/storage.md); 0 restores PIV_READ_BLOCK. Call it
// before threads load images.
void piv_image_set_read_block (size_t bytes);

typedef struct _piv_image_t piv_image_t;

// A new zero-filled image; NULL when width or height is not positive or
// memory runs out. Pixels are row-major, row 0 at the top, 64-byte aligned.
piv_image_t *piv_image_new (int width, int height);
void piv_image_destroy (piv_image_t **self_p);

int piv_image_width (const piv_image_t *self);
int piv_image_height (const piv_image_t *self);
// Bits per sample of the file the image came from (2 to 16, 32 or 64; 0
// if made in memory). Informative only: pixels are always floats in the
// file's scale (float files: see piv_image_load).
int piv_image_bits (const piv_image_t *self);
// The pixels as floats; NULL only when out of memory. An image loaded from
// an 8-bit file holds its pixels as bytes (piv_image_bytes) and converts
// them the first time floats are asked for: do that before threads share
// the image. piv_image_data (the caller may change them) drops the bytes.
float *piv_image_data (piv_image_t *self);
const float *piv_image_cdata (const piv_image_t *self);
// The pixels as the 8-bit file stored them (row-major, width bytes a row),
// for images loaded from 8-bit unsigned greyscale files that are
// unchanged since; NULL otherwise.
const unsigned char *piv_image_bytes (const piv_image_t *self);

// Loads page 'page' (0-based TIFF directory) of 'path'. Supports greyscale
// (MinIsBlack; MinIsWhite is inverted) of 2 to 16 bit unsigned samples
// (packed or in 16-bit containers: 12-bit data stay 0..4095, which the
// engine, blind to a linear scale, treats as the same data x16), 8 and 16
// bit signed (moved up by half the range: int16 -32768 is 0) and 32 and 64
// bit float (mapped into 0..65535: a declared SMin/SMaxSampleValue range,
// else [0, 1] x 65535, else 0..65535 as is, else the frame's own min-max;
// NaN or infinite pixels refuse the frame, with their count), in strips
// or tiles, contiguous or planar; palette images (colour map applied, then
// luminance) and RGB (luminance, Rec. 601 weights). Files without a
// SamplesPerPixel tag load (defaults).
// The Orientation tag (1 to 8) is honoured for every kind: row 0 of the
// image is its top, column 0 its left; 5 to 8 swap width and height.
// The file is opened without blocking and, before anything is read whole,
// refused unless it is a regular file (not a FIFO, device, directory or
// socket), at most PIV_MAX_FILE_DEFAULT bytes, not sparse (over 1 MiB with
// less than 1/8 of it stored), and its page's header says at most
// max_pixels pixels. On failure returns NULL and writes one line naming the
// file and the cause into err: not a TIFF (naming the format its first
// bytes show, and how to convert it), truncated, zero or absurd
// dimensions (more than max_pixels; 0 means PIV_MAX_PIXELS_DEFAULT),
// unsupported sample format, no such page, not a regular file, too large,
// sparse.
piv_image_t *piv_image_load (const char *path, int page, size_t max_pixels, char *err,
                             size_t errlen);

// The same from a descriptor the caller opened (and still owns: it is not
// closed, and read with pread from offset 0), 'name' naming it in
// messages; max_bytes (0: PIV_MAX_FILE_DEFAULT) limits the file's size.
piv_image_t *piv_image_load_fd (int fd, const char *name, int page, size_t max_pixels,
                                size_t max_bytes, char *err, size_t errlen);

// Loads a pair: frames A and B from two files, or, with path_b NULL, pages 0
// and 1 of the multipage file path_a. Refuses A and B of different sizes,
// naming both files and sizes, and, from its header, a compressed frame
// that declares more than PIV_MAX_RATIO_DEFAULT (budget.h) times its
// file's size in pixels (a decompression bomb, naming the sizes and the
// ratio). Returns 0, or -1 with the reason in err (and *a_p, *b_p left
// NULL).
int piv_image_load_pair (const char *path_a, const char *path_b, size_t max_pixels,
                         piv_image_t **a_p, piv_image_t **b_p, char *err, size_t errlen);

// The same from descriptors the caller opened and owns (fd_b < 0: pages 0
// and 1 of fd_a), named name_a and name_b in messages, each file at most
// max_bytes (0: PIV_MAX_FILE_DEFAULT).
int piv_image_load_pair_fd (int fd_a, const char *name_a, int fd_b, const char *name_b,
                            size_t max_pixels, size_t max_bytes, piv_image_t **a_p,
                            piv_image_t **b_p, char *err, size_t errlen);

// A loader for long-lived processes (an agent's worker thread): it keeps
// the file buffer and the two frames' pixels from pair to pair, so that a
// stream of pairs of one size touches no fresh memory after the first
// (fresh pages cost a fault each, ~11 us on some virtual machines). One
// loader per thread; not shared.
typedef struct _piv_loader_t piv_loader_t;
piv_loader_t *piv_loader_new (void);
void piv_loader_destroy (piv_loader_t **self_p);

// As piv_image_load_pair_fd, with the same checks and messages, but the
// frames are the loader's own, reloaded in place (another size: their
// buffers grow or are reshaped): *a_p and *b_p are borrowed, valid until
// the next call on the loader or its destruction; the caller may change
// their pixels (background subtraction), never destroy them. 0, or -1
// with err and *a_p, *b_p NULL.
int piv_loader_pair_fd (piv_loader_t *self, int fd_a, const char *name_a, int fd_b,
                        const char *name_b, size_t max_pixels, size_t max_bytes,
                        piv_image_t **a_p, piv_image_t **b_p, char *err, size_t errlen);
// The same from paths (path_b NULL: pages 0 and 1 of path_a), opened as
// piv_image_load opens them.
int piv_loader_pair (piv_loader_t *self, const char *path_a, const char *path_b,
                     size_t max_pixels, piv_image_t **a_p, piv_image_t **b_p, char *err,
                     size_t errlen);

// The loader's limits from now on (NULL: none but the default ratio):
// each frame's header is checked, before the file is read whole and again
// before its pixels are allocated, against the budget's ratio and memory
// (piv_budget_check: the pair refused with the sizes, the need and the
// limit in err). The settings the budget names are borrowed: they must
// outlive the loader's use of them (their contents may change between
// pairs). What the loader keeps from pair to pair follows the pair's size:
// a buffer more than twice what it needs is let go.
typedef struct _piv_budget_t piv_budget_t;
void piv_loader_set_budget (piv_loader_t *self, const piv_budget_t *budget);

// Lever for benchmarks: 0 makes image and file buffers be allocated and
// first touched page by page (malloc), 1 (the default) maps big ones
// populated in one call. Call it before threads load images.
void piv_image_set_populate (int on);

// Writes frames[0..nframes-1] as pages of one TIFF file at 'path', 8 or 16
// bits (values rounded and clipped to the range), one strip per ~64 KiB,
// no compression. Writes to a temporary name in the same directory, then
// renames into place, so readers never see a partial file. 0 or -1 with err.
int piv_image_save (const char *path, const piv_image_t *const *frames, int nframes, int bits,
                    char *err, size_t errlen);

// Background: the pixelwise minimum of n frames of one size (NULL with err
// if n < 1 or sizes differ). Subtract clamps at zero. Mask: pixels that are
// zero in 'mask' are outside the flow.
piv_image_t *piv_image_min (const piv_image_t *const *frames, int n, char *err, size_t errlen);
int piv_image_subtract (piv_image_t *self, const piv_image_t *background, char *err,
                        size_t errlen);

// Failure seam for tests: the next reads of files by this module return at
// most 'limit' bytes in total, as a short read would. SIZE_MAX restores.
void piv_image_test_read_limit (size_t limit);

#endif
