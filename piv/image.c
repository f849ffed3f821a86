// image.c — greyscale float images read from and written to TIFF files.
// A file is read whole with a few large reads, then decoded by libtiff from
// memory; errors are captured per handle, so loads can run on many threads.
// Writing TIFF files is image_save.c's; both share image_internal.h.

#include "piv/image.h"
#include "piv/budget.h"
#include "piv/image_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>

// What is left of the test seam's byte budget; SIZE_MAX: no limit.
static _Atomic size_t s_read_budget = SIZE_MAX;

// Big buffers are mapped populated while this is set (piv_image_set_populate).
static _Atomic int s_populate = 1;
// ... from this size up: below it, malloc's own pools serve better.
#define S_POPULATE_MIN ((size_t) 1 << 20)

// A buffer kept from file to file (a loader's), or for one file only.
typedef struct {
    unsigned char *data;  // img_alloc'd, NULL: none yet
    size_t cap;           // its size, bytes
    int mapped;           // ... mapped (img_alloc)
} s_buf_t;

// A file held in memory, served to libtiff by the client procedures below.
typedef struct {
    unsigned char *data;  // the whole file
    size_t size;          // its length in bytes
    uint64_t pos;         // libtiff's read position, may pass the end
} s_memfile_t;

// The tags of a page that its cost depends on (budget.h), as the file
// says them or their defaults (TIFF 6.0; the photometric and sample format
// as s_decode takes an absent one).
typedef struct {
    uint64_t w, h;                      // ImageWidth, ImageLength (0: not given)
    uint64_t bits, spp, compression;    // BitsPerSample (the first), SamplesPerPixel
    uint64_t photometric, orientation;  // PhotometricInterpretation, Orientation
    uint64_t format, planar, fill;      // SampleFormat (the first), PlanarConfig, FillOrder
    uint64_t rps, tile_w, tile_h;       // RowsPerStrip; TileWidth, TileLength (0: strips)
    int swapped;                        // 16-bit samples not in this host's order
} s_tags_t;

static const s_tags_t s_tag_defaults = {
    .bits = 1,
    .spp = 1,
    .compression = COMPRESSION_NONE,
    .photometric = PHOTOMETRIC_MINISBLACK,
    .orientation = ORIENTATION_TOPLEFT,
    .format = SAMPLEFORMAT_UINT,
    .planar = PLANARCONFIG_CONTIG,
    .fill = FILLORDER_MSB2LSB,
    .rps = UINT32_MAX};

// The limits of one load (budget.h): a frame's pixels, the ratio of
// decoded to stored bytes of a pair's compressed frames (0: not checked,
// for masks, whose zeros and ones compress as they like), a loader's
// budget (NULL: none).
typedef struct {
    size_t max_pixels;           // 0: PIV_MAX_PIXELS_DEFAULT
    int max_ratio;               // 0: any ratio
    const piv_budget_t *budget;  // NULL: no memory budget
} s_limits_t;

void
img_seterr (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
}

// strerror is not thread-safe; this is, with either strerror_r flavour.
const char *
img_strerror (int errnum, char *buf, size_t len)
{
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r (errnum, buf, len);
#else
    if (strerror_r (errnum, buf, len) != 0)
        snprintf (buf, len, "error %d", errnum);
    return buf;
#endif
}

void
piv_image_set_populate (int on)
{
    atomic_store (&s_populate, on ? 1 : 0);
}

void *
img_alloc (size_t bytes, size_t *cap_p, int *mapped_p)
{
    if (bytes >= S_POPULATE_MIN && atomic_load (&s_populate)) {
        // One call fills every page: first touch page by page costs a
        // fault each (~11 us on this project's VM: 92 ms for 32 MiB against
        // 8 ms populated).
        size_t page = (size_t) sysconf (_SC_PAGESIZE), len = (bytes + page - 1) / page * page;
        void *p = mmap (NULL, len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p != MAP_FAILED) {
            *cap_p = len;
            *mapped_p = 1;
            return p;
        }
    }
    void *p = NULL;
    if (posix_memalign (&p, 64, bytes ? bytes : 1) != 0)
        return NULL;
    *cap_p = bytes;
    *mapped_p = 0;
    return p;
}

void
img_free (void *data, size_t cap, int mapped)
{
    if (data && mapped)
        munmap (data, cap);
    else
        free (data);
}

// Makes *buf_p (*cap_p bytes, *mapped_p) at least 'bytes' long, keeping it
// when it is large enough but not twice as large (its contents are then
// stale): a buffer follows the size of what it holds now. 0, or -1.
static int
s_room (void **buf_p, size_t *cap_p, int *mapped_p, size_t bytes)
{
    if (*buf_p && *cap_p >= bytes && *cap_p <= 2 * bytes)
        return 0;
    img_free (*buf_p, *cap_p, *mapped_p);
    *cap_p = 0;
    return (*buf_p = img_alloc (bytes, cap_p, mapped_p)) ? 0 : -1;
}

// Room for the float pixels of the image's size (stale until written).
static int
s_float_room (piv_image_t *self)
{
    return s_room ((void **) &self->data, &self->cap, &self->mapped,
                   (size_t) self->width * (size_t) self->height * sizeof (float));
}

// Room for its 8-bit pixels.
static int
s_byte_room (piv_image_t *self)
{
    return s_room ((void **) &self->bytes, &self->bytes_cap, &self->bytes_mapped,
                   (size_t) self->width * (size_t) self->height);
}

// Makes 'self' a width x height image without pixels yet: the decoder
// makes room for the form it writes (s_float_room, s_byte_room), keeping
// buffers that are large enough. 0, or -1 when the size overflows.
static int
s_reshape (piv_image_t *self, int width, int height)
{
    if (width <= 0 || height <= 0
        || (size_t) width > SIZE_MAX / sizeof (float) / (size_t) height)
        return -1;
    self->width = width;
    self->height = height;
    self->floats = self->has_bytes = 0;
    return 0;
}

piv_image_t *
piv_image_new (int width, int height)
{
    piv_image_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    if (s_reshape (self, width, height) != 0 || s_float_room (self) != 0) {
        free (self);
        return NULL;
    }
    if (!self->mapped)  // a fresh mapping is zero already
        memset (self->data, 0, (size_t) width * (size_t) height * sizeof (float));
    self->floats = 1;
    return self;
}

void
piv_image_destroy (piv_image_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_image_t *self = *self_p;
    img_free (self->data, self->cap, self->mapped);
    img_free (self->bytes, self->bytes_cap, self->bytes_mapped);
    free (self);
    *self_p = NULL;
}

int
img_floats (piv_image_t *self)
{
    if (self->floats)
        return 0;
    if (s_float_room (self) != 0)
        return -1;
    size_t n = (size_t) self->width * (size_t) self->height;
    if (self->has_bytes) {
        img_samples_t kind = {.bits = 8, .format = SAMPLEFORMAT_UINT, .step = 1, .invert = 0};
        img_convert (&kind, self->bytes, self->data, n);
    }
    else
        memset (self->data, 0, n * sizeof (float));
    self->floats = 1;
    return 0;
}

int
piv_image_width (const piv_image_t *self)
{
    return self->width;
}

int
piv_image_height (const piv_image_t *self)
{
    return self->height;
}

int
piv_image_bits (const piv_image_t *self)
{
    return self->bits;
}

float *
piv_image_data (piv_image_t *self)
{
    if (img_floats (self) != 0)
        return NULL;
    self->has_bytes = 0;  // the caller may change the floats
    return self->data;
}

const float *
piv_image_cdata (const piv_image_t *self)
{
    // Converting 8-bit pixels the first time changes no pixel's value.
    piv_image_t *me = (piv_image_t *) self;
    return img_floats (me) == 0 ? me->data : NULL;
}

const unsigned char *
piv_image_bytes (const piv_image_t *self)
{
    return self->has_bytes ? self->bytes : NULL;
}

void
piv_image_test_read_limit (size_t limit)
{
    atomic_store (&s_read_budget, limit);
}

// How many of 'want' bytes the test seam lets the next read return.
static size_t
s_budget_take (size_t want)
{
    size_t left = atomic_load (&s_read_budget);
    for (;;) {
        if (left == SIZE_MAX)
            return want;
        size_t take = want < left ? want : left;
        if (atomic_compare_exchange_weak (&s_read_budget, &left, left - take))
            return take;
    }
}

static size_t s_read_block = PIV_READ_BLOCK;  // bytes per read()

void
piv_image_set_read_block (size_t bytes)
{
    s_read_block = bytes ? bytes : PIV_READ_BLOCK;
}

// A file smaller than this is never called sparse: small files are often
// stored inline or in one block, whatever their size.
#define S_SPARSE_MIN ((uint64_t) 1 << 20)
// ... a larger one with less than 1/S_SPARSE_RATIO of it on disk is: a file
// of holes (truncate -s), which costs nothing to make and its full size in
// memory to read. Compressing file systems (ZFS, btrfs) report what is
// stored compressed; camera frames compress far less than 8 to 1.
#define S_SPARSE_RATIO 8

static int s_peek_tags (const s_memfile_t *file, int page, s_tags_t *t);
static int s_check_frame (const char *path, const s_tags_t *t, uint64_t file_bytes,
                          const s_limits_t *lim, char *err, size_t errlen);

// Checks what fstat says of the open file 'fd' before anything is read:
// a regular file, not empty, within max_bytes, not sparse. 0, or -1 with err.
static int
s_check_file (int fd, const char *path, size_t max_bytes, struct stat *st, char *err,
              size_t errlen)
{
    char ebuf[128];
    if (fstat (fd, st) != 0) {
        img_seterr (err, errlen, "cannot read '%s': %s", path,
                    img_strerror (errno, ebuf, sizeof ebuf));
        return -1;
    }
    if (S_ISDIR (st->st_mode)) {
        img_seterr (err, errlen, "cannot read '%s': %s", path,
                    img_strerror (EISDIR, ebuf, sizeof ebuf));
        return -1;
    }
    if (!S_ISREG (st->st_mode)) {
        const char *kind = S_ISFIFO (st->st_mode)   ? "a FIFO"
                           : S_ISCHR (st->st_mode)  ? "a character device"
                           : S_ISBLK (st->st_mode)  ? "a block device"
                           : S_ISSOCK (st->st_mode) ? "a socket"
                           : S_ISLNK (st->st_mode)  ? "a symbolic link"
                                                    : "not a file";
        img_seterr (err, errlen, "cannot read '%s': not a regular file (%s)", path, kind);
        return -1;
    }
    if (st->st_size == 0) {
        img_seterr (err, errlen, "'%s' is not a TIFF file: it is empty", path);
        return -1;
    }
    uint64_t stored = (uint64_t) st->st_blocks * 512;
    if ((uint64_t) st->st_size > S_SPARSE_MIN
        && stored < (uint64_t) st->st_size / S_SPARSE_RATIO) {
        img_seterr (err, errlen,
                    "cannot read '%s': sparse file: %lld bytes long, only %llu bytes stored "
                    "(less than 1/%d of it)",
                    path, (long long) st->st_size, (unsigned long long) stored, S_SPARSE_RATIO);
        return -1;
    }
    if (max_bytes == 0)
        max_bytes = PIV_MAX_FILE_DEFAULT;
    if ((uint64_t) st->st_size > (uint64_t) SSIZE_MAX
        || (uint64_t) st->st_size > (uint64_t) max_bytes) {
        img_seterr (err, errlen,
                    "cannot read '%s': file of %lld bytes exceeds the limit of %zu bytes "
                    "(%zu MiB)",
                    path, (long long) st->st_size, max_bytes, max_bytes >> 20);
        return -1;
    }
    return 0;
}

// Page 'page' checked from its directory, read with a few small preads
// (the directory of a file libtiff wrote lies at its end), before the file
// is read whole: its pixels against max_pixels, then its cost (the ratio,
// the budget: s_check_frame). A directory that cannot be peeked is left to
// libtiff; s_decode checks the same again from what libtiff makes of it.
static int
s_check_header (int fd, const char *path, off_t size, int page, const s_limits_t *lim,
                char *err, size_t errlen)
{
    size_t max_pixels = lim->max_pixels ? lim->max_pixels : PIV_MAX_PIXELS_DEFAULT;
    s_memfile_t peek = {.data = NULL, .size = (size_t) size, .pos = (uint64_t) fd};
    s_tags_t t;
    if (!s_peek_tags (&peek, page, &t) || t.w == 0 || t.h == 0)
        return 0;
    uint64_t w = t.w, h = t.h;
    if (w * h / h != w || w * h > (uint64_t) max_pixels || w > INT_MAX || h > INT_MAX) {
        img_seterr (err, errlen,
                    "cannot load '%s': image of %llux%llu pixels exceeds the limit of %zu pixels",
                    path, (unsigned long long) w, (unsigned long long) h, max_pixels);
        return -1;
    }
    return s_check_frame (path, &t, (uint64_t) size, lim, err, errlen);
}

// Reads the whole of the open file 'fd' ('path' names it in messages) into
// buf (grown as needed; file->data points into it) in s_read_block reads
// from offset 0, after s_check_file and s_check_header on the pages a
// caller wants (pages[0..npages-1]).
static int
s_read_fd (int fd, const char *path, const int *pages, int npages, const s_limits_t *lim,
           size_t max_bytes, s_buf_t *buf, s_memfile_t *file, char *err, size_t errlen)
{
    char ebuf[128];
    memset (file, 0, sizeof *file);
    struct stat st;
    if (s_check_file (fd, path, max_bytes, &st, err, errlen) != 0)
        return -1;
    for (int i = 0; i < npages; i++)
        if (s_check_header (fd, path, st.st_size, pages[i], lim, err, errlen) != 0)
            return -1;
    file->size = (size_t) st.st_size;
    if (!buf->data || buf->cap < file->size || buf->cap > 2 * file->size) {
        img_free (buf->data, buf->cap, buf->mapped);
        buf->data = img_alloc (file->size, &buf->cap, &buf->mapped);
    }
    if (!(file->data = buf->data)) {
        buf->cap = 0;
        img_seterr (err, errlen, "cannot read '%s': out of memory for %zu bytes", path, file->size);
        goto fail;
    }
    size_t got = 0;
    while (got < file->size) {
        size_t want = file->size - got;
        if (want > s_read_block)
            want = s_read_block;
        want = s_budget_take (want);
        ssize_t n = want ? pread (fd, file->data + got, want, (off_t) got) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            img_seterr (err, errlen, "cannot read '%s': %s", path,
                        img_strerror (errno, ebuf, sizeof ebuf));
            goto fail;
        }
        if (n == 0)
            break;
        got += (size_t) n;
    }
    if (got < file->size) {
        img_seterr (err, errlen, "cannot read '%s': short read (got %zu of %zu bytes)", path, got,
                    file->size);
        goto fail;
    }
    return 0;

fail:
    memset (file, 0, sizeof *file);
    return -1;
}

// s_read_fd of 'path', opened without blocking (a FIFO in its place must
// not stall the caller) and checked to be a regular file before any read.
static int
s_read_file (const char *path, const int *pages, int npages, const s_limits_t *lim,
             s_buf_t *buf, s_memfile_t *file, char *err, size_t errlen)
{
    char ebuf[128];
    memset (file, 0, sizeof *file);
    int fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        img_seterr (err, errlen, "cannot open '%s': %s", path,
                    img_strerror (errno, ebuf, sizeof ebuf));
        return -1;
    }
    int rc = s_read_fd (fd, path, pages, npages, lim, PIV_MAX_FILE_DEFAULT, buf, file, err, errlen);
    close (fd);
    return rc;
}

static tmsize_t
s_mem_read (thandle_t handle, void *buf, tmsize_t size)
{
    s_memfile_t *file = handle;
    if (size <= 0 || file->pos >= file->size)
        return 0;
    uint64_t left = file->size - file->pos;
    size_t n = (uint64_t) size < left ? (size_t) size : (size_t) left;
    memcpy (buf, file->data + file->pos, n);
    file->pos += n;
    return (tmsize_t) n;
}

static tmsize_t
s_mem_write (thandle_t handle, void *buf, tmsize_t size)
{
    (void) handle, (void) buf, (void) size;
    return -1;  // opened for reading only
}

static toff_t
s_mem_seek (thandle_t handle, toff_t off, int whence)
{
    s_memfile_t *file = handle;
    uint64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? file->pos : file->size;
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END)
        return (toff_t) -1;
    // libtiff passes negative offsets as wrapped unsigned values.
    uint64_t pos = base + off;
    if ((int64_t) off < 0 && pos > base)
        return (toff_t) -1;
    if ((int64_t) pos < 0)
        return (toff_t) -1;
    file->pos = pos;
    return pos;
}

static int
s_mem_close (thandle_t handle)
{
    (void) handle;  // the buffer belongs to the caller
    return 0;
}

static toff_t
s_mem_size (thandle_t handle)
{
    s_memfile_t *file = handle;
    return file->size;
}

static int
s_mem_map (thandle_t handle, void **base, toff_t *size)
{
    s_memfile_t *file = handle;
    *base = file->data;
    *size = file->size;
    return 1;
}

static void
s_mem_unmap (thandle_t handle, void *base, toff_t size)
{
    (void) handle, (void) base, (void) size;
}

// Keeps libtiff's first error for the message; returning 1 stops libtiff
// from calling its global handlers, which would print to stderr.
static int
s_on_error (TIFF *tif, void *user_data, const char *module, const char *fmt, va_list ap)
{
    (void) tif, (void) module;
    img_tiffmsg_t *msg = user_data;
    if (msg && msg->error[0] == '\0') {
        vsnprintf (msg->error, sizeof msg->error, fmt, ap);
        size_t len = strlen (msg->error);
        while (len > 0 && (msg->error[len - 1] == '\n' || msg->error[len - 1] == '.'))
            msg->error[--len] = '\0';
    }
    return 1;
}

// Warnings (unknown tags, odd but readable files) are not worth a line.
static int
s_on_warning (TIFF *tif, void *user_data, const char *module, const char *fmt, va_list ap)
{
    (void) tif, (void) user_data, (void) module, (void) fmt, (void) ap;
    return 1;
}

TIFFOpenOptions *
img_open_options (img_tiffmsg_t *msg)
{
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc ();
    if (!opts)
        return NULL;
    TIFFOpenOptionsSetErrorHandlerExtR (opts, s_on_error, msg);
    TIFFOpenOptionsSetWarningHandlerExtR (opts, s_on_warning, msg);
    return opts;
}

static int
s_is_tiff (const s_memfile_t *file)
{
    if (file->size < 8)
        return 0;
    const unsigned char *h = file->data;
    return (h[0] == 'I' && h[1] == 'I' && (h[2] == 42 || h[2] == 43) && h[3] == 0)
           || (h[0] == 'M' && h[1] == 'M' && h[2] == 0 && (h[3] == 42 || h[3] == 43));
}

// Reads an unsigned integer of 'bytes' bytes at 'off', in the file's byte
// order; 0 if outside the file. A file not in memory (data NULL) is read
// with pread from the descriptor kept in 'pos'.
static int
s_peek_uint (const s_memfile_t *file, uint64_t off, int bytes, uint64_t *value)
{
    if (off > file->size || (uint64_t) bytes > file->size - off)
        return 0;
    unsigned char head[1], buf[8];
    const unsigned char *p;
    int big_endian;
    if (file->data) {
        p = file->data + off;
        big_endian = file->data[0] == 'M';
    }
    else {
        int fd = (int) file->pos;
        if (pread (fd, head, 1, 0) != 1 || pread (fd, buf, (size_t) bytes, (off_t) off) != bytes)
            return 0;
        p = buf;
        big_endian = head[0] == 'M';
    }
    *value = 0;
    for (int i = 0; i < bytes; i++)
        *value |= (uint64_t) p[big_endian ? bytes - 1 - i : i] << (8 * i);
    return 1;
}

// Where tag 'tag' goes in t (NULL: a tag not read here).
static uint64_t *
s_tag_field (s_tags_t *t, uint64_t tag)
{
    switch (tag) {
    case TIFFTAG_IMAGEWIDTH: return &t->w;
    case TIFFTAG_IMAGELENGTH: return &t->h;
    case TIFFTAG_BITSPERSAMPLE: return &t->bits;
    case TIFFTAG_COMPRESSION: return &t->compression;
    case TIFFTAG_PHOTOMETRIC: return &t->photometric;
    case TIFFTAG_FILLORDER: return &t->fill;
    case TIFFTAG_ORIENTATION: return &t->orientation;
    case TIFFTAG_SAMPLESPERPIXEL: return &t->spp;
    case TIFFTAG_ROWSPERSTRIP: return &t->rps;
    case TIFFTAG_PLANARCONFIG: return &t->planar;
    case TIFFTAG_TILEWIDTH: return &t->tile_w;
    case TIFFTAG_TILELENGTH: return &t->tile_h;
    case TIFFTAG_SAMPLEFORMAT: return &t->format;
    default: return NULL;
    }
}

// The tags of directory 'page' (s_tags_t), read straight from the file:
// libtiff refuses some directories (zero width) with a message about its
// internals, and the user deserves the plain reason; and a frame's cost is
// known before the file is read whole. 1 when the directory could be read
// and gives a width and a height, else 0.
static int
s_peek_tags (const s_memfile_t *file, int page, s_tags_t *t)
{
    uint64_t magic, dir, order;
    *t = s_tag_defaults;
    if (!s_peek_uint (file, 2, 2, &magic) || !s_peek_uint (file, 0, 1, &order))
        return 0;
    int big = magic == 43;  // BigTIFF: 64-bit offsets and counts
    int count_bytes = big ? 8 : 2, entry_bytes = big ? 20 : 12, off_bytes = big ? 8 : 4;
    if (!s_peek_uint (file, big ? 8 : 4, off_bytes, &dir))
        return 0;
    for (int i = 0; i < page; i++) {
        uint64_t n;
        if (!s_peek_uint (file, dir, count_bytes, &n) || n > file->size
            || !s_peek_uint (file, dir + count_bytes + n * entry_bytes, off_bytes, &dir))
            return 0;
    }
    uint64_t n;
    if (!s_peek_uint (file, dir, count_bytes, &n) || n > file->size)
        return 0;
    int found = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t at = dir + count_bytes + i * entry_bytes, tag, type, count, value;
        if (!s_peek_uint (file, at, 2, &tag) || !s_peek_uint (file, at + 2, 2, &type))
            return 0;
        uint64_t *field = s_tag_field (t, tag);
        if (!field)
            continue;
        int bytes = type == TIFF_SHORT ? 2 : type == TIFF_LONG ? 4 : type == TIFF_LONG8 ? 8 : 0;
        // The first value: in the entry, or where it points when all of
        // them do not fit there (BitsPerSample of RGB).
        uint64_t where = at + 4 + off_bytes;
        int size = tag == TIFFTAG_IMAGEWIDTH || tag == TIFFTAG_IMAGELENGTH;
        if (!bytes || !s_peek_uint (file, at + 4, off_bytes, &count) || count == 0
            || (count > (uint64_t) off_bytes / bytes
                && !s_peek_uint (file, where, off_bytes, &where))
            || !s_peek_uint (file, where, bytes, &value)) {
            if (size)
                return 0;
            continue;  // libtiff decides what it makes of the others
        }
        *field = value;
        found |= tag == TIFFTAG_IMAGEWIDTH ? 1 : tag == TIFFTAG_IMAGELENGTH ? 2 : 0;
    }
    // Samples of one byte read the same in either order.
    uint16_t one = 1;
    int host_big = *(const unsigned char *) &one == 0;
    t->swapped = t->bits > 8 && (order == 'M') != host_big;
    return found == 3;
}

// The ImageWidth and ImageLength tags of directory 'page' (s_peek_tags).
static int
s_peek_size (const s_memfile_t *file, int page, uint64_t *w, uint64_t *h)
{
    s_tags_t t;
    if (!s_peek_tags (file, page, &t))
        return 0;
    *w = t.w, *h = t.h;
    return 1;
}

// Reports a directory libtiff could not read, in the user's terms if the
// cause is a zero size.
static void
s_unreadable (const char *path, const s_memfile_t *file, int page, const char *cause, char *err,
              size_t errlen)
{
    uint64_t w = 1, h = 1;
    if (s_peek_size (file, page, &w, &h) && (w == 0 || h == 0))
        img_seterr (err, errlen, "cannot load '%s': image has zero size (%llux%llu)", path,
                    (unsigned long long) w, (unsigned long long) h);
    else if (page > 0)
        img_seterr (err, errlen, "cannot read '%s': truncated or corrupt TIFF: page %d: %s", path,
                    page, cause[0] ? cause : "unreadable directory");
    else
        img_seterr (err, errlen, "cannot read '%s': truncated or corrupt TIFF: %s", path,
                    cause[0] ? cause : "no readable directory");
}

// Opens the in-memory file with libtiff, reading its first directory.
static TIFF *
s_open_mem (const char *path, s_memfile_t *file, img_tiffmsg_t *msg, char *err, size_t errlen)
{
    if (!s_is_tiff (file)) {
        img_not_tiff (path, file->data, file->size, err, errlen);
        return NULL;
    }
    TIFFOpenOptions *opts = img_open_options (msg);
    if (!opts) {
        img_seterr (err, errlen, "cannot read '%s': out of memory", path);
        return NULL;
    }
    file->pos = 0;
    TIFF *tif = TIFFClientOpenExt (path, "r", file, s_mem_read, s_mem_write, s_mem_seek,
                                   s_mem_close, s_mem_size, s_mem_map, s_mem_unmap, opts);
    TIFFOpenOptionsFree (opts);
    if (!tif)
        s_unreadable (path, file, 0, msg->error, err, errlen);
    return tif;
}

// Makes 'page' the current directory, telling a missing page from a
// corrupt one.
static int
s_set_page (TIFF *tif, const char *path, const s_memfile_t *file, int page, img_tiffmsg_t *msg,
            char *err, size_t errlen)
{
    if (page < 0) {
        img_seterr (err, errlen, "cannot load '%s': page %d does not exist", path, page);
        return -1;
    }
    if (TIFFCurrentDirectory (tif) == (tdir_t) page)
        return 0;
    msg->error[0] = '\0';
    if (TIFFSetDirectory (tif, (tdir_t) page))
        return 0;
    char cause[sizeof msg->error];
    snprintf (cause, sizeof cause, "%s", msg->error);
    tdir_t pages = TIFFNumberOfDirectories (tif);
    if ((tdir_t) page >= pages)
        img_seterr (err, errlen, "'%s' has %u page%s, page %d not found (pages count from 0)",
                    path, (unsigned) pages, pages == 1 ? "" : "s", page);
    else
        s_unreadable (path, file, page, cause, err, errlen);
    return -1;
}

// 1 if the page's strips hold the samples as they are, in this host's
// order: no compression, the usual FillOrder, not byte-swapped beyond one
// byte per sample; they are then converted straight from the file in memory.
static int
s_direct (TIFF *tif, const img_samples_t *kind)
{
    uint16_t compression = COMPRESSION_NONE, fill = FILLORDER_MSB2LSB;
    TIFFGetFieldDefaulted (tif, TIFFTAG_COMPRESSION, &compression);
    TIFFGetFieldDefaulted (tif, TIFFTAG_FILLORDER, &fill);
    return compression == COMPRESSION_NONE && fill == FILLORDER_MSB2LSB
           && (kind->bits <= 8 || !TIFFIsByteSwapped (tif));
}

// Decodes strip 'strip' (want bytes) through libtiff into *buf_p, made of
// 'size' bytes at the first call. 0, or -1 with err.
static int
s_read_strip (TIFF *tif, const char *path, uint32_t strip, size_t size, unsigned char **buf_p,
              tmsize_t want, img_tiffmsg_t *msg, char *err, size_t errlen)
{
    if (!*buf_p && !(*buf_p = malloc (size))) {
        img_seterr (err, errlen, "cannot load '%s': out of memory", path);
        return -1;
    }
    if (TIFFReadEncodedStrip (tif, strip, *buf_p, want) == want)
        return 0;
    if (msg->error[0])
        img_seterr (err, errlen, "cannot read '%s': truncated or corrupt pixel data: %s", path,
                    msg->error);
    else
        img_seterr (err, errlen,
                    "cannot read '%s': truncated or corrupt pixel data: strip %u is short", path,
                    (unsigned) strip);
    return -1;
}

// Samples of n pixels of one decoded row into the image from pixel 'at' on:
// its 8-bit pixels as they are stored (to_bytes), else floats.
static inline void
s_put (piv_image_t *self, int to_bytes, const img_samples_t *kind, const unsigned char *src,
       size_t at, size_t n)
{
    if (to_bytes)
        memcpy (self->bytes + at, src, n);
    else
        img_convert (kind, src, self->data + at, n);
}

// Greyscale of any kind img_samples_t describes, in strips or tiles,
// contiguous (sample 0 of each pixel) or separate planes (plane 0). Row
// sizes are libtiff's, so packed samples and padded rows count right.
// to_bytes: the samples are 8-bit unsigned, one per pixel, kept as they
// are in self->bytes (s_decode decides), else converted to floats.
static int
s_decode_grey (TIFF *tif, const char *path, piv_image_t *self, const img_samples_t *kind,
               int to_bytes, img_tiffmsg_t *msg, char *err, size_t errlen)
{
    size_t w = (size_t) self->width, h = (size_t) self->height;
    unsigned char *buf = NULL;
    msg->error[0] = '\0';

    if (TIFFIsTiled (tif)) {
        uint32_t tw = 0, th = 0;
        TIFFGetField (tif, TIFFTAG_TILEWIDTH, &tw);
        TIFFGetField (tif, TIFFTAG_TILELENGTH, &th);
        // The tile buffer follows from these two tags alone: a tile larger
        // than the image (or 1 Mpx, for small images) is no writer's, and
        // would cost up to 2 GiB for a file of a few bytes.
        uint64_t tile_max = (uint64_t) w * h > (1u << 20) ? (uint64_t) w * h : (1u << 20);
        if (tw == 0 || th == 0 || (uint64_t) tw * th > tile_max) {
            img_seterr (err, errlen, "cannot load '%s': unsupported tile size %ux%u", path,
                        (unsigned) tw, (unsigned) th);
            return -1;
        }
        size_t tile_row = (size_t) TIFFTileRowSize64 (tif);
        size_t tile_bytes = (size_t) th * tile_row;
        buf = tile_row ? malloc (tile_bytes) : NULL;
        if (!buf)
            goto nomem;
        for (size_t y0 = 0; y0 < h; y0 += th) {
            for (size_t x0 = 0; x0 < w; x0 += tw) {
                uint32_t tile = TIFFComputeTile (tif, (uint32_t) x0, (uint32_t) y0, 0, 0);
                tmsize_t n = TIFFReadEncodedTile (tif, tile, buf, (tmsize_t) tile_bytes);
                if (n != (tmsize_t) tile_bytes) {
                    if (msg->error[0])
                        img_seterr (err, errlen,
                                    "cannot read '%s': truncated or corrupt pixel data: %s", path,
                                    msg->error);
                    else
                        img_seterr (err, errlen,
                                    "cannot read '%s': truncated or corrupt pixel data: "
                                    "tile %u is short",
                                    path, (unsigned) tile);
                    goto fail;
                }
                size_t rows = h - y0 < th ? h - y0 : th;
                size_t cols = w - x0 < tw ? w - x0 : tw;
                for (size_t r = 0; r < rows; r++)
                    s_put (self, to_bytes, kind, buf + r * tile_row, (y0 + r) * w + x0, cols);
            }
        }
    }
    else {
        uint32_t rps = 0;
        TIFFGetFieldDefaulted (tif, TIFFTAG_ROWSPERSTRIP, &rps);
        if (rps == 0 || rps > h)
            rps = (uint32_t) h;
        size_t row_bytes = (size_t) TIFFScanlineSize64 (tif);
        if (!row_bytes)
            goto nomem;
        int direct = s_direct (tif, kind);
        int unpadded = (uint64_t) row_bytes * 8 == (uint64_t) w * kind->step * kind->bits;
        const s_memfile_t *file = TIFFClientdata (tif);
        for (size_t row0 = 0; row0 < h; row0 += rps) {
            size_t rows = h - row0 < rps ? h - row0 : rps;
            uint32_t strip = TIFFComputeStrip (tif, (uint32_t) row0, 0);
            tmsize_t want = (tmsize_t) (rows * row_bytes);
            const unsigned char *src = buf;
            uint64_t off = direct ? TIFFGetStrileOffset (tif, strip) : 0;
            if (direct && off <= file->size && (uint64_t) want <= file->size - off
                && TIFFGetStrileByteCount (tif, strip) >= (uint64_t) want)
                src = file->data + off;  // stored as they are: decoded in place
            else if (s_read_strip (tif, path, strip, rps * row_bytes, &buf, want, msg, err,
                                   errlen) != 0)
                goto fail;
            else
                src = buf;
            if (unpadded)  // the strip's rows follow each other: one call for all
                s_put (self, to_bytes, kind, src, row0 * w, rows * w);
            else
                for (size_t r = 0; r < rows; r++)
                    s_put (self, to_bytes, kind, src + r * row_bytes, (row0 + r) * w, w);
        }
    }
    free (buf);
    return 0;

nomem:
    img_seterr (err, errlen, "cannot load '%s': out of memory", path);
fail:
    free (buf);
    return -1;
}

// Palette, RGB, YCbCr and other colour models through libtiff's RGBA
// reader, then Rec. 601 luminance in 0..255.
static int
s_decode_colour (TIFF *tif, const char *path, piv_image_t *self, img_tiffmsg_t *msg, char *err,
                 size_t errlen)
{
    char emsg[1024] = "";
    if (!TIFFRGBAImageOK (tif, emsg)) {
        img_seterr (err, errlen, "cannot load '%s': unsupported image: %s", path, emsg);
        return -1;
    }
    size_t n = (size_t) self->width * (size_t) self->height;
    uint32_t *raster = malloc (n * sizeof *raster);
    if (!raster) {
        img_seterr (err, errlen, "cannot load '%s': out of memory", path);
        return -1;
    }
    msg->error[0] = '\0';
    // Stop on the first error: otherwise a truncated file reads as black.
    if (!TIFFReadRGBAImageOriented (tif, (uint32_t) self->width, (uint32_t) self->height, raster,
                                    ORIENTATION_TOPLEFT, 1)
        || msg->error[0]) {
        img_seterr (err, errlen, "cannot read '%s': truncated or corrupt pixel data: %s", path,
                    msg->error[0] ? msg->error : "cannot decode colour image");
        free (raster);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t p = raster[i];
        // Integer weights keep grey exact: R = G = B = v gives v.
        unsigned sum = 299u * TIFFGetR (p) + 587u * TIFFGetG (p) + 114u * TIFFGetB (p);
        self->data[i] = (float) (sum / 1000.0);
    }
    free (raster);
    return 0;
}

// 1 when a frame is kept as the 8-bit samples its file stores (one byte a
// pixel): the engine reads its windows from them (a quarter of the memory
// of floats, and no conversion pass); floats are made only if something
// asks for them (piv_image_cdata). Unsigned greyscale, one sample read a
// pixel, not inverted, not turned by its Orientation tag.
static int
s_keeps_bytes (const s_tags_t *t)
{
    int grey = t->photometric == PHOTOMETRIC_MINISBLACK;
    int step1 = t->spp == 1 || t->planar == PLANARCONFIG_SEPARATE;
    int turned = t->orientation > ORIENTATION_TOPLEFT && t->orientation <= ORIENTATION_LEFTBOT;
    return grey && t->bits == 8 && t->format != SAMPLEFORMAT_INT && step1 && !turned;
}

// What a page's tags make of its cost (budget.h) in a file of file_bytes.
// Tags no decoder accepts are the decoder's to refuse: 0 is returned for
// them, and nothing is estimated.
static int
s_frame_info (const s_tags_t *t, uint64_t file_bytes, piv_frame_info_t *f)
{
    if (t->spp == 0 || t->spp > 65535 || t->bits == 0 || t->bits > 64)
        return 0;
    int grey = t->photometric == PHOTOMETRIC_MINISBLACK || t->photometric == PHOTOMETRIC_MINISWHITE;
    uint64_t pixels = t->w * t->h, per_row = t->planar == PLANARCONFIG_SEPARATE ? 1 : t->spp;
    *f = (piv_frame_info_t) {.width = t->w,
                             .height = t->h,
                             .bits = (int) t->bits,
                             .samples = (int) t->spp,
                             .compressed = t->compression != COMPRESSION_NONE,
                             .compression = (int) t->compression,
                             .bytes = s_keeps_bytes (t),
                             .file_bytes = file_bytes};
    // The decoder's buffer: a tile (s_decode_grey refuses one over the
    // image or 1 Mpx), or a strip unless the strips are read straight from
    // the file (s_direct).
    uint64_t tile_max = pixels > (1u << 20) ? pixels : (1u << 20);
    uint64_t rows = t->rps == 0 || t->rps > t->h ? t->h : t->rps, decode;
    if (t->tile_w && t->tile_h)
        decode = t->tile_w > tile_max || t->tile_h > tile_max || t->tile_w * t->tile_h > tile_max
                     ? 0
                     : t->tile_h * ((t->tile_w * per_row * t->bits + 7) / 8);
    else if (t->compression == COMPRESSION_NONE && t->fill == FILLORDER_MSB2LSB && !t->swapped)
        decode = 0;
    else
        decode = rows * ((t->w * per_row * t->bits + 7) / 8);
    int turned = t->orientation > ORIENTATION_TOPLEFT && t->orientation <= ORIENTATION_LEFTBOT;
    if (!grey)  // libtiff's RGBA raster, beside its strip
        decode += pixels * sizeof (uint32_t);
    else if (turned && decode < pixels * sizeof (float))  // img_orient's copy
        decode = pixels * sizeof (float);
    f->decode_bytes = decode;
    return 1;
}

static int
s_check_frame (const char *path, const s_tags_t *t, uint64_t file_bytes, const s_limits_t *lim,
               char *err, size_t errlen)
{
    piv_frame_info_t f;
    if (!s_frame_info (t, file_bytes, &f))
        return 0;
    return piv_budget_check (path, &f, lim->max_ratio, lim->budget, err, errlen);
}

// The tags of the current directory as libtiff reads them (s_tags_t).
static void
s_tags_of (TIFF *tif, s_tags_t *t)
{
    uint32_t w = 0, h = 0, rps = UINT32_MAX, tw = 0, th = 0;
    uint16_t spp = 1, bps = 1, compression = COMPRESSION_NONE, format = SAMPLEFORMAT_UINT;
    uint16_t planar = PLANARCONFIG_CONTIG, fill = FILLORDER_MSB2LSB;
    uint16_t photometric = PHOTOMETRIC_MINISBLACK, orientation = ORIENTATION_TOPLEFT;
    TIFFGetField (tif, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField (tif, TIFFTAG_IMAGELENGTH, &h);
    TIFFGetFieldDefaulted (tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted (tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted (tif, TIFFTAG_COMPRESSION, &compression);
    TIFFGetFieldDefaulted (tif, TIFFTAG_SAMPLEFORMAT, &format);
    TIFFGetFieldDefaulted (tif, TIFFTAG_PLANARCONFIG, &planar);
    TIFFGetFieldDefaulted (tif, TIFFTAG_FILLORDER, &fill);
    TIFFGetFieldDefaulted (tif, TIFFTAG_ORIENTATION, &orientation);
    TIFFGetFieldDefaulted (tif, TIFFTAG_ROWSPERSTRIP, &rps);
    if (TIFFIsTiled (tif)) {
        TIFFGetField (tif, TIFFTAG_TILEWIDTH, &tw);
        TIFFGetField (tif, TIFFTAG_TILELENGTH, &th);
    }
    if (!TIFFGetField (tif, TIFFTAG_PHOTOMETRIC, &photometric))
        photometric = PHOTOMETRIC_MINISBLACK;
    *t = (s_tags_t) {.w = w, .h = h, .bits = bps, .spp = spp, .compression = compression,
                     .photometric = photometric, .orientation = orientation, .format = format,
                     .planar = planar, .fill = fill, .rps = rps, .tile_w = tw, .tile_h = th,
                     .swapped = bps > 8 && TIFFIsByteSwapped (tif)};
}

// Lets go of a buffer kept from a larger frame: more than twice 'bytes'.
static void
s_trim (void **buf_p, size_t *cap_p, int mapped, size_t bytes)
{
    if (*buf_p && *cap_p > 2 * bytes) {
        img_free (*buf_p, *cap_p, mapped);
        *buf_p = NULL;
        *cap_p = 0;
    }
}

// Decodes the current directory of tif into a new image, or into 'reuse'
// (reshaped; left to its owner on failure) when not NULL, after the checks
// of its size and cost (lim) from what libtiff read of its tags.
static piv_image_t *
s_decode (TIFF *tif, const char *path, const s_limits_t *lim, piv_image_t *reuse,
          img_tiffmsg_t *msg, char *err, size_t errlen)
{
    size_t max_pixels = lim->max_pixels ? lim->max_pixels : PIV_MAX_PIXELS_DEFAULT;
    s_tags_t t;
    s_tags_of (tif, &t);
    uint32_t w = (uint32_t) t.w, h = (uint32_t) t.h;
    if (w == 0 || h == 0) {
        img_seterr (err, errlen, "cannot load '%s': image has zero size (%ux%u)", path,
                    (unsigned) w, (unsigned) h);
        return NULL;
    }
    if ((uint64_t) w * h > (uint64_t) max_pixels || w > INT_MAX || h > INT_MAX) {
        img_seterr (err, errlen,
                    "cannot load '%s': image of %ux%u pixels exceeds the limit of %zu pixels",
                    path, (unsigned) w, (unsigned) h, max_pixels);
        return NULL;
    }
    uint16_t spp = (uint16_t) t.spp, bps = (uint16_t) t.bits, format = (uint16_t) t.format;
    uint16_t planar = (uint16_t) t.planar, photometric = (uint16_t) t.photometric;
    int grey = photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE;
    if (spp == 0) {
        img_seterr (err, errlen, "cannot load '%s': unsupported image: 0 samples per pixel", path);
        return NULL;
    }
    if (img_check_kind (path, grey, bps, format, err, errlen) != 0)
        return NULL;
    if (grey && spp > 16) {
        img_seterr (err, errlen, "cannot load '%s': unsupported image: %u samples per pixel", path,
                    (unsigned) spp);
        return NULL;
    }
    const s_memfile_t *file = TIFFClientdata (tif);
    if (s_check_frame (path, &t, file->size, lim, err, errlen) != 0)
        return NULL;
    piv_image_t *self = reuse;
    if (!self && (self = calloc (1, sizeof *self)) == NULL) {
        img_seterr (err, errlen, "cannot load '%s': out of memory", path);
        return NULL;
    }
    if (s_reshape (self, (int) w, (int) h) != 0) {
        img_seterr (err, errlen, "cannot load '%s': out of memory for %ux%u pixels", path,
                    (unsigned) w, (unsigned) h);
        if (self != reuse)
            piv_image_destroy (&self);
        return NULL;
    }
    // Every kind is decoded in stored order, then turned as the Orientation
    // tag says (libtiff's RGBA reader would mirror colour images, but not
    // transpose them, and leaves grey ones to us).
    uint16_t orientation = (uint16_t) t.orientation;
    int rc;
    img_samples_t kind = {.bits = bps, .format = format,
                          .step = planar == PLANARCONFIG_SEPARATE ? 1 : spp,
                          .invert = photometric == PHOTOMETRIC_MINISWHITE};
    int to_bytes = s_keeps_bytes (&t);
    self->floats = !to_bytes;
    // A reloaded image lets go of what a larger frame left (the form it
    // does not write now included), so that what a thread keeps follows
    // the pairs it has now (budget.h), not the largest it ever had.
    size_t pixels = (size_t) w * h;
    s_trim ((void **) &self->data, &self->cap, self->mapped, pixels * sizeof (float));
    s_trim ((void **) &self->bytes, &self->bytes_cap, self->bytes_mapped, pixels);
    if ((rc = to_bytes ? s_byte_room (self) : s_float_room (self)) != 0)
        img_seterr (err, errlen, "cannot load '%s': out of memory for %ux%u pixels", path,
                    (unsigned) w, (unsigned) h);
    else if (grey) {
        self->bits = bps;
        rc = s_decode_grey (tif, path, self, &kind, to_bytes, msg, err, errlen);
        if (rc == 0 && format == SAMPLEFORMAT_IEEEFP) {
            double lo = 0, hi = 0, range[2];
            int declared = TIFFGetField (tif, TIFFTAG_SMINSAMPLEVALUE, &lo)
                           && TIFFGetField (tif, TIFFTAG_SMAXSAMPLEVALUE, &hi) && isfinite (lo)
                           && isfinite (hi);
            range[0] = lo, range[1] = hi;
            rc = img_float_scale (self, path, declared ? range : NULL, kind.invert, err, errlen);
        }
    }
    else {
        self->bits = 8;
        TIFFSetField (tif, TIFFTAG_ORIENTATION, (uint16_t) ORIENTATION_TOPLEFT);
        rc = s_decode_colour (tif, path, self, msg, err, errlen);
    }
    self->has_bytes = rc == 0 && to_bytes;
    if (rc == 0 && img_orient (self, orientation) != 0) {
        img_seterr (err, errlen, "cannot load '%s': out of memory for %ux%u pixels", path,
                    (unsigned) w, (unsigned) h);
        rc = -1;
    }
    if (rc != 0 && self != reuse)
        piv_image_destroy (&self);
    return rc == 0 ? self : NULL;
}

// Page 'page' of a file already in memory.
static piv_image_t *
s_load_mem (const char *path, s_memfile_t *file, int page, const s_limits_t *lim,
            piv_image_t *reuse, char *err, size_t errlen)
{
    img_tiffmsg_t msg = {""};
    piv_image_t *self = NULL;
    TIFF *tif = s_open_mem (path, file, &msg, err, errlen);
    if (tif && s_set_page (tif, path, file, page, &msg, err, errlen) == 0)
        self = s_decode (tif, path, lim, reuse, &msg, err, errlen);
    if (tif)
        TIFFClose (tif);
    return self;
}

piv_image_t *
piv_image_load (const char *path, int page, size_t max_pixels, char *err, size_t errlen)
{
    s_memfile_t file;
    s_buf_t buf = {NULL, 0, 0};
    piv_image_t *self = NULL;
    s_limits_t lim = {max_pixels, 0, NULL};
    if (s_read_file (path, &page, 1, &lim, &buf, &file, err, errlen) == 0)
        self = s_load_mem (path, &file, page, &lim, NULL, err, errlen);
    img_free (buf.data, buf.cap, buf.mapped);
    return self;
}

piv_image_t *
piv_image_load_fd (int fd, const char *name, int page, size_t max_pixels, size_t max_bytes,
                   char *err, size_t errlen)
{
    s_memfile_t file;
    s_buf_t buf = {NULL, 0, 0};
    piv_image_t *self = NULL;
    s_limits_t lim = {max_pixels, 0, NULL};
    if (s_read_fd (fd, name, &page, 1, &lim, max_bytes, &buf, &file, err, errlen) == 0)
        self = s_load_mem (name, &file, page, &lim, NULL, err, errlen);
    img_free (buf.data, buf.cap, buf.mapped);
    return self;
}

// Both frames from pages 0 and 1 of one file in memory (into reuse[0] and
// reuse[1] when they are not NULL).
static int
s_two_pages_mem (const char *path, s_memfile_t *file, const s_limits_t *lim,
                 piv_image_t *const *reuse, piv_image_t **a_p, piv_image_t **b_p, char *err,
                 size_t errlen)
{
    img_tiffmsg_t msg = {""};
    int rc = -1;
    TIFF *tif = s_open_mem (path, file, &msg, err, errlen);
    if (!tif)
        goto done;
    *a_p = s_decode (tif, path, lim, reuse[0], &msg, err, errlen);
    if (!*a_p)
        goto done;
    msg.error[0] = '\0';
    if (!TIFFReadDirectory (tif)) {
        if (msg.error[0])
            s_unreadable (path, file, 1, msg.error, err, errlen);
        else
            img_seterr (err, errlen, "'%s' has 1 page, a pair needs 2 (frame B not found)", path);
        goto done;
    }
    *b_p = s_decode (tif, path, lim, reuse[1], &msg, err, errlen);
    if (*b_p)
        rc = 0;
done:
    if (tif)
        TIFFClose (tif);
    return rc;
}

// Frames A and B (fd_b < 0: pages 0 and 1 of fd_a), each file read once
// into buf; path_* are NULL for descriptors the caller opened, names for
// messages; reuse[0..1]: images to decode into (NULL: new ones).
static int
s_load_pair (const char *path_a, int fd_a, const char *name_a, const char *path_b, int fd_b,
             const char *name_b, const s_limits_t *lim, size_t max_bytes, s_buf_t *buf,
             piv_image_t *const *reuse, piv_image_t **a_p, piv_image_t **b_p, char *err,
             size_t errlen)
{
    static const int both[] = {0, 1}, first[] = {0};
    int two_pages = path_a ? !path_b : fd_b < 0;
    s_memfile_t file;
    int rc = path_a ? s_read_file (path_a, two_pages ? both : first, two_pages ? 2 : 1, lim, buf,
                                   &file, err, errlen)
                    : s_read_fd (fd_a, name_a, two_pages ? both : first, two_pages ? 2 : 1, lim,
                                 max_bytes, buf, &file, err, errlen);
    if (rc != 0)
        return -1;
    if (two_pages)
        return s_two_pages_mem (name_a, &file, lim, reuse, a_p, b_p, err, errlen);
    if (!(*a_p = s_load_mem (name_a, &file, 0, lim, reuse[0], err, errlen)))
        return -1;
    rc = path_a ? s_read_file (path_b, first, 1, lim, buf, &file, err, errlen)
                : s_read_fd (fd_b, name_b, first, 1, lim, max_bytes, buf, &file, err, errlen);
    if (rc != 0)
        return -1;
    *b_p = s_load_mem (name_b, &file, 0, lim, reuse[1], err, errlen);
    return *b_p ? 0 : -1;
}

// Refuses frames of different sizes (-1 with err naming both), else 0.
static int
s_same_size (const char *name_a, const char *name_b, const piv_image_t *a, const piv_image_t *b,
             char *err, size_t errlen)
{
    if (a->width == b->width && a->height == b->height)
        return 0;
    if (name_b)
        img_seterr (err, errlen, "frames differ in size: '%s' is %dx%d, '%s' is %dx%d", name_a,
                    a->width, a->height, name_b, b->width, b->height);
    else
        img_seterr (err, errlen, "frames differ in size: '%s' page 0 is %dx%d, page 1 is %dx%d",
                    name_a, a->width, a->height, b->width, b->height);
    return -1;
}

// Refuses frames of different sizes, frees both on any failure.
static int
s_pair_done (int rc, const char *name_a, const char *name_b, piv_image_t **a_p,
             piv_image_t **b_p, char *err, size_t errlen)
{
    if (rc == 0)
        rc = s_same_size (name_a, name_b, *a_p, *b_p, err, errlen);
    if (rc != 0) {
        piv_image_destroy (a_p);
        piv_image_destroy (b_p);
    }
    return rc;
}

int
piv_image_load_pair (const char *path_a, const char *path_b, size_t max_pixels,
                     piv_image_t **a_p, piv_image_t **b_p, char *err, size_t errlen)
{
    if (!a_p || !b_p || !path_a) {
        img_seterr (err, errlen, "cannot load pair: no file or no place for the frames");
        return -1;
    }
    *a_p = *b_p = NULL;
    s_buf_t buf = {NULL, 0, 0};
    piv_image_t *const fresh[2] = {NULL, NULL};
    s_limits_t lim = {max_pixels, PIV_MAX_RATIO_DEFAULT, NULL};
    int rc = s_load_pair (path_a, -1, path_a, path_b, -1, path_b, &lim, 0, &buf, fresh, a_p, b_p,
                          err, errlen);
    img_free (buf.data, buf.cap, buf.mapped);
    return s_pair_done (rc, path_a, path_b, a_p, b_p, err, errlen);
}

int
piv_image_load_pair_fd (int fd_a, const char *name_a, int fd_b, const char *name_b,
                        size_t max_pixels, size_t max_bytes, piv_image_t **a_p,
                        piv_image_t **b_p, char *err, size_t errlen)
{
    if (!a_p || !b_p || fd_a < 0 || !name_a || (fd_b >= 0 && !name_b)) {
        img_seterr (err, errlen, "cannot load pair: no file or no place for the frames");
        return -1;
    }
    *a_p = *b_p = NULL;
    s_buf_t buf = {NULL, 0, 0};
    piv_image_t *const fresh[2] = {NULL, NULL};
    s_limits_t lim = {max_pixels, PIV_MAX_RATIO_DEFAULT, NULL};
    int rc = s_load_pair (NULL, fd_a, name_a, NULL, fd_b, name_b, &lim, max_bytes, &buf, fresh,
                          a_p, b_p, err, errlen);
    img_free (buf.data, buf.cap, buf.mapped);
    return s_pair_done (rc, name_a, fd_b >= 0 ? name_b : NULL, a_p, b_p, err, errlen);
}

struct _piv_loader_t {
    s_buf_t file;         // the last file read, its buffer kept
    piv_image_t *im[2];   // frames A and B, reloaded in place
    piv_budget_t budget;  // what a pair may take (piv_loader_set_budget)
};

piv_loader_t *
piv_loader_new (void)
{
    piv_loader_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    // Images without pixels yet: the first pair gives them their size.
    for (int i = 0; i < 2; i++)
        if (!(self->im[i] = calloc (1, sizeof *self->im[i]))) {
            piv_loader_destroy (&self);
            return NULL;
        }
    return self;
}

void
piv_loader_destroy (piv_loader_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_loader_t *self = *self_p;
    img_free (self->file.data, self->file.cap, self->file.mapped);
    piv_image_destroy (&self->im[0]);
    piv_image_destroy (&self->im[1]);
    free (self);
    *self_p = NULL;
}

void
piv_loader_set_budget (piv_loader_t *self, const piv_budget_t *budget)
{
    if (budget)
        self->budget = *budget;
    else
        memset (&self->budget, 0, sizeof self->budget);
}

// Both frames into the loader's images (path_a NULL: from the descriptors).
static int
s_loader_pair (piv_loader_t *self, const char *path_a, int fd_a, const char *name_a,
               const char *path_b, int fd_b, const char *name_b, size_t max_pixels,
               size_t max_bytes, piv_image_t **a_p, piv_image_t **b_p, char *err, size_t errlen)
{
    if (!self || !a_p || !b_p || !name_a || (path_a ? 0 : fd_a < 0 || (fd_b >= 0 && !name_b))) {
        img_seterr (err, errlen, "cannot load pair: no file or no place for the frames");
        return -1;
    }
    *a_p = *b_p = NULL;
    piv_image_t *a = NULL, *b = NULL;
    int ratio = self->budget.max_ratio ? self->budget.max_ratio : PIV_MAX_RATIO_DEFAULT;
    s_limits_t lim = {max_pixels, ratio, &self->budget};
    int rc = s_load_pair (path_a, fd_a, name_a, path_b, fd_b, name_b, &lim, max_bytes,
                          &self->file, self->im, &a, &b, err, errlen);
    const char *second = path_a ? path_b : fd_b >= 0 ? name_b : NULL;
    if (rc == 0 && s_same_size (name_a, second, a, b, err, errlen) != 0)
        rc = -1;
    if (rc == 0)
        *a_p = a, *b_p = b;
    return rc;
}

int
piv_loader_pair_fd (piv_loader_t *self, int fd_a, const char *name_a, int fd_b,
                    const char *name_b, size_t max_pixels, size_t max_bytes, piv_image_t **a_p,
                    piv_image_t **b_p, char *err, size_t errlen)
{
    return s_loader_pair (self, NULL, fd_a, name_a, NULL, fd_b, name_b, max_pixels, max_bytes,
                          a_p, b_p, err, errlen);
}

int
piv_loader_pair (piv_loader_t *self, const char *path_a, const char *path_b, size_t max_pixels,
                 piv_image_t **a_p, piv_image_t **b_p, char *err, size_t errlen)
{
    return s_loader_pair (self, path_a, -1, path_a, path_b, -1, path_b, max_pixels, 0, a_p, b_p,
                          err, errlen);
}

piv_image_t *
piv_image_min (const piv_image_t *const *frames, int n, char *err, size_t errlen)
{
    if (!frames || n < 1) {
        img_seterr (err, errlen, "cannot take the minimum of %d frames", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!frames[i]) {
            img_seterr (err, errlen, "cannot take the minimum: frame %d is missing", i);
            return NULL;
        }
        if (frames[i]->width != frames[0]->width || frames[i]->height != frames[0]->height) {
            img_seterr (err, errlen, "frames differ in size: frame 0 is %dx%d, frame %d is %dx%d",
                        frames[0]->width, frames[0]->height, i, frames[i]->width,
                        frames[i]->height);
            return NULL;
        }
    }
    piv_image_t *self = piv_image_new (frames[0]->width, frames[0]->height);
    if (!self) {
        img_seterr (err, errlen, "cannot take the minimum: out of memory");
        return NULL;
    }
    self->bits = frames[0]->bits;
    size_t count = (size_t) self->width * (size_t) self->height;
    for (int i = 0; i < n; i++)
        if (!piv_image_cdata (frames[i])) {
            piv_image_destroy (&self);
            img_seterr (err, errlen, "cannot take the minimum: out of memory");
            return NULL;
        }
    memcpy (self->data, frames[0]->data, count * sizeof (float));
    for (int i = 1; i < n; i++) {
        const float *src = frames[i]->data;
        for (size_t k = 0; k < count; k++)
            if (src[k] < self->data[k])
                self->data[k] = src[k];
    }
    return self;
}

int
piv_image_subtract (piv_image_t *self, const piv_image_t *background, char *err, size_t errlen)
{
    if (!self || !background) {
        img_seterr (err, errlen, "cannot subtract background: no image");
        return -1;
    }
    if (self->width != background->width || self->height != background->height) {
        img_seterr (err, errlen,
                    "cannot subtract background: image is %dx%d, background is %dx%d",
                    self->width, self->height, background->width, background->height);
        return -1;
    }
    size_t count = (size_t) self->width * (size_t) self->height;
    float *d = piv_image_data (self);
    const float *bg = piv_image_cdata (background);
    if (!d || !bg) {
        img_seterr (err, errlen, "cannot subtract background: out of memory");
        return -1;
    }
    for (size_t k = 0; k < count; k++) {
        float v = d[k] - bg[k];
        d[k] = v > 0.0f ? v : 0.0f;
    }
    return 0;
}
