// image_samples.c — greyscale samples of every kind image.c accepts (8 and
// 16 bit, packed 2 to 16 bit, signed, 32 and 64 bit float) turned into the
// engine's floats, the kinds refused, the Orientation tag applied, and the
// plain name of a file that is not a TIFF at all.

#include "piv/image.h"
#include "piv/image_internal.h"

#include <math.h>
#include <stdint.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define S_X86 1
#endif
#include <stdio.h>
#include <string.h>
#include <tiffio.h>

// Float frames end in the range of 16-bit ones: 0 to this.
#define S_FLOAT_TOP 65535.0

// Sample i of a row of samples packed MSB first, 'bits' (2 to 16) each,
// rows starting on a byte (libtiff has undone FillOrder).
static inline unsigned
s_packed (const unsigned char *src, size_t i, int bits)
{
    uint64_t bit = (uint64_t) i * (uint64_t) bits;
    const unsigned char *p = src + (bit >> 3);
    int shift = (int) (bit & 7), need = (shift + bits + 7) / 8;
    uint32_t acc = 0;
    for (int j = 0; j < need; j++)
        acc = acc << 8 | p[j];
    return (unsigned) (acc >> (need * 8 - shift - bits)) & ((1u << bits) - 1);
}

#ifdef S_X86
// n (a multiple of 16) unsigned 8 or 16 bit samples to floats at dst
// (32-byte aligned) with AVX2: 8 at a time, stored past the cache.
__attribute__ ((target ("avx2"))) static void
s_unsigned_avx2 (const unsigned char *src, float *dst, size_t n, int bits)
{
    const uint16_t *s16 = (const uint16_t *) src;
    for (size_t i = 0; i < n; i += 16) {
        __m256i lo, hi;
        if (bits == 8) {
            lo = _mm256_cvtepu8_epi32 (_mm_loadl_epi64 ((const __m128i *) (src + i)));
            hi = _mm256_cvtepu8_epi32 (_mm_loadl_epi64 ((const __m128i *) (src + i + 8)));
        }
        else {
            lo = _mm256_cvtepu16_epi32 (_mm_loadu_si128 ((const __m128i *) (s16 + i)));
            hi = _mm256_cvtepu16_epi32 (_mm_loadu_si128 ((const __m128i *) (s16 + i + 8)));
        }
        _mm256_stream_ps (dst + i, _mm256_cvtepi32_ps (lo));
        _mm256_stream_ps (dst + i + 8, _mm256_cvtepi32_ps (hi));
    }
}

// The same with SSE2 (every x86-64), dst 16-byte aligned.
static void
s_unsigned_sse2 (const unsigned char *src, float *dst, size_t n, int bits)
{
    const uint16_t *s16 = (const uint16_t *) src;
    __m128i z = _mm_setzero_si128 ();
    for (size_t i = 0; i < n; i += 16) {
        __m128i a, b, c, d;
        if (bits == 8) {
            __m128i v = _mm_loadu_si128 ((const __m128i *) (src + i));
            __m128i l = _mm_unpacklo_epi8 (v, z), h = _mm_unpackhi_epi8 (v, z);
            a = _mm_unpacklo_epi16 (l, z), b = _mm_unpackhi_epi16 (l, z);
            c = _mm_unpacklo_epi16 (h, z), d = _mm_unpackhi_epi16 (h, z);
        }
        else {
            __m128i l = _mm_loadu_si128 ((const __m128i *) (s16 + i));
            __m128i h = _mm_loadu_si128 ((const __m128i *) (s16 + i + 8));
            a = _mm_unpacklo_epi16 (l, z), b = _mm_unpackhi_epi16 (l, z);
            c = _mm_unpacklo_epi16 (h, z), d = _mm_unpackhi_epi16 (h, z);
        }
        _mm_stream_ps (dst + i, _mm_cvtepi32_ps (a));
        _mm_stream_ps (dst + i + 4, _mm_cvtepi32_ps (b));
        _mm_stream_ps (dst + i + 8, _mm_cvtepi32_ps (c));
        _mm_stream_ps (dst + i + 12, _mm_cvtepi32_ps (d));
    }
}
#endif

// Unsigned 8 or 16 bit samples (bits) to floats. Frames are written once
// and read later by the engine: on x86-64, stores that bypass the cache (no
// read of each line before it is written), AVX2 where the CPU has it,
// convert a 2048^2 frame in about half the time of plain stores on this
// project's VM.
static void
s_unsigned (const unsigned char *src, float *dst, size_t n, int bits)
{
    size_t i = 0;
    const uint16_t *s16 = (const uint16_t *) src;
#ifdef S_X86
    if (n >= 64) {
        for (; ((uintptr_t) (dst + i) & 31) && i < n; i++)
            dst[i] = bits == 8 ? (float) src[i] : (float) s16[i];
        size_t body = (n - i) / 16 * 16;
        const unsigned char *from = src + i * (size_t) (bits / 8);
        if (__builtin_cpu_supports ("avx2"))
            s_unsigned_avx2 (from, dst + i, body, bits);
        else
            s_unsigned_sse2 (from, dst + i, body, bits);
        _mm_sfence ();  // the streamed stores are seen before what follows
        i += body;
    }
#endif
    for (; i < n; i++)
        dst[i] = bits == 8 ? (float) src[i] : (float) s16[i];
}

void
img_convert (const img_samples_t *k, const unsigned char *src, float *dst, size_t n)
{
    size_t step = k->step;
    int invert = k->invert;
    if (k->format == SAMPLEFORMAT_IEEEFP) {
        // libtiff has swapped them to host order; rows may be unaligned.
        for (size_t i = 0; i < n; i++) {
            if (k->bits == 32) {
                float v;
                memcpy (&v, src + i * step * 4, sizeof v);
                dst[i] = v;
            }
            else {
                double v;
                memcpy (&v, src + i * step * 8, sizeof v);
                dst[i] = (float) v;
            }
        }
        return;  // inverted, if at all, by img_float_scale
    }
    int is_signed = k->format == SAMPLEFORMAT_INT;
    if ((k->bits == 8 || k->bits == 16) && step == 1 && !invert && !is_signed)
        s_unsigned (src, dst, n, k->bits);
    else if (k->bits == 8 || k->bits == 16) {
        // Signed samples move up by half the range: -128..127 is 0..255.
        unsigned top = k->bits == 8 ? 255u : 65535u, half = top / 2 + 1;
        const uint16_t *s16 = (const uint16_t *) src;
        for (size_t i = 0; i < n; i++) {
            unsigned v = k->bits == 8 ? src[i * step] : s16[i * step];
            if (is_signed)
                v = (v + half) & top;  // two's complement plus half
            dst[i] = (float) (invert ? top - v : v);
        }
    }
    else {
        unsigned top = (1u << k->bits) - 1;
        for (size_t i = 0; i < n; i++) {
            unsigned v = s_packed (src, i * step, k->bits);
            dst[i] = (float) (invert ? top - v : v);
        }
    }
}

int
img_float_scale (piv_image_t *self, const char *path, const double *range, int invert,
                 char *err, size_t errlen)
{
    size_t n = (size_t) self->width * (size_t) self->height, bad = 0;
    float *d = self->data;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite (d[i]))
            bad++;
        else {
            lo = d[i] < lo ? d[i] : lo;
            hi = d[i] > hi ? d[i] : hi;
        }
    }
    if (bad) {
        img_seterr (err, errlen,
                    "cannot load '%s': %zu of %zu pixels are NaN or infinite (or beyond single "
                    "precision): replace them in the frame before PIV",
                    path, bad, n);
        return -1;
    }
    // The same rule for every frame of a run where the file allows it (a
    // declared range, [0, 1], camera counts), so that a background taken
    // over frames compares like with like; only frames outside all of
    // these get their own min-max.
    double off = 0, gain = 1;
    if (range && range[0] < range[1])
        off = range[0], gain = S_FLOAT_TOP / (range[1] - range[0]);
    else if (lo >= 0 && hi <= 1)
        gain = S_FLOAT_TOP;
    else if (lo >= 0 && hi <= S_FLOAT_TOP)
        gain = 1;
    else
        off = lo, gain = hi > lo ? S_FLOAT_TOP / (hi - lo) : 0;
    for (size_t i = 0; i < n; i++) {
        double v = ((double) d[i] - off) * gain;
        d[i] = (float) (invert ? S_FLOAT_TOP - v : v);
    }
    return 0;
}

// Turns an image decoded in the order its rows are stored into the one its
// Orientation tag (TIFF 6.0, 1 to 8) says is meant: 2 to 4 mirror it, 5 to
// 8 also swap rows and columns (its width and height). 0, or -1 when out of
// memory.
int
img_orient (piv_image_t *self, uint16_t orientation)
{
    if (orientation <= ORIENTATION_TOPLEFT || orientation > ORIENTATION_LEFTBOT)
        return 0;
    size_t sw = (size_t) self->width, sh = (size_t) self->height;
    int swap = orientation >= ORIENTATION_LEFTTOP;
    size_t cap, bytes = sw * sh * sizeof (float);
    int mapped;
    float *out = img_alloc (bytes, &cap, &mapped);
    if (!out)
        return -1;
    size_t ow = swap ? sh : sw;
    // Where stored row r, column c is seen: (x, y) of the meant image.
    for (size_t r = 0; r < sh; r++) {
        const float *src = self->data + r * sw;
        for (size_t c = 0; c < sw; c++) {
            size_t x, y;
            switch (orientation) {
            case ORIENTATION_TOPRIGHT: x = sw - 1 - c, y = r; break;
            case ORIENTATION_BOTRIGHT: x = sw - 1 - c, y = sh - 1 - r; break;
            case ORIENTATION_BOTLEFT: x = c, y = sh - 1 - r; break;
            case ORIENTATION_LEFTTOP: x = r, y = c; break;
            case ORIENTATION_RIGHTTOP: x = sh - 1 - r, y = c; break;
            case ORIENTATION_RIGHTBOT: x = sh - 1 - r, y = sw - 1 - c; break;
            default: x = r, y = sw - 1 - c; break;  // ORIENTATION_LEFTBOT
            }
            out[y * ow + x] = src[c];
        }
    }
    img_free (self->data, self->cap, self->mapped);
    self->data = out;
    self->cap = cap;
    self->mapped = mapped;
    self->width = (int) ow;
    self->height = (int) (swap ? sw : sh);
    return 0;
}

static const char *
s_format_name (uint16_t format)
{
    switch (format) {
    case SAMPLEFORMAT_UINT:
        return "unsigned integer";
    case SAMPLEFORMAT_INT:
        return "signed integer";
    case SAMPLEFORMAT_IEEEFP:
        return "IEEE float";
    case SAMPLEFORMAT_VOID:
        return "untyped";
    case SAMPLEFORMAT_COMPLEXINT:
        return "complex integer";
    case SAMPLEFORMAT_COMPLEXIEEEFP:
        return "complex float";
    default:
        return "unknown";
    }
}

// Refuses sample kinds the decoders cannot read: greyscale takes 2 to 16
// bit unsigned, 8 or 16 bit signed, 32 or 64 bit float; colour (libtiff's
// RGBA reader) unsigned samples only. 0, or -1 with err.
int
img_check_kind (const char *path, int grey, uint16_t bps, uint16_t format, char *err,
              size_t errlen)
{
    int uint = format == SAMPLEFORMAT_UINT || format == SAMPLEFORMAT_VOID;
    if (!grey && !uint) {
        img_seterr (err, errlen,
                    "cannot load '%s': unsupported sample format: %u-bit %s colour "
                    "(unsigned integer expected)",
                    path, (unsigned) bps, s_format_name (format));
        return -1;
    }
    if (!grey)
        return 0;
    if ((uint && bps >= 2 && bps <= 16)
        || (format == SAMPLEFORMAT_INT && (bps == 8 || bps == 16))
        || (format == SAMPLEFORMAT_IEEEFP && (bps == 32 || bps == 64)))
        return 0;
    img_seterr (err, errlen,
                "cannot load '%s': unsupported sample format: %u-bit %s greyscale "
                "(2 to 16 bit unsigned, 8 or 16 bit signed, 32 or 64 bit float expected)",
                path, (unsigned) bps, s_format_name (format));
    return -1;
}

// What the first bytes of a file say it is, as "a PNG image"; NULL if
// they say nothing known. 'text' is set for a file of printable ASCII.
static const char *
s_format_of (const unsigned char *h, size_t size, int *text)
{
    static const struct {
        const char *magic;
        size_t len;
        const char *name;
    } known[] = {
        {"\x89PNG\r\n\x1a\n", 8, "a PNG image"},
        {"\xff\xd8\xff", 3, "a JPEG image"},
        {"GIF87a", 6, "a GIF image"},
        {"GIF89a", 6, "a GIF image"},
        {"\0\0\0\x0cjP  \r\n\x87\n", 12, "a JPEG 2000 image"},
        {"\xff\x4f\xff\x51", 4, "a JPEG 2000 codestream"},
        {"\x89HDF\r\n\x1a\n", 8, "an HDF5 file"},
        {"\x93NUMPY", 6, "a NumPy array"},
        {"SIMPLE  =", 9, "a FITS image"},
        {"PCO-", 4, "a PCO B16 image"},
        {"%PDF", 4, "a PDF document"},
        {"PK\x03\x04", 4, "a ZIP archive"},
        {"\x1f\x8b", 2, "a gzip file"},
    };
    *text = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (size >= known[i].len && memcmp (h, known[i].magic, known[i].len) == 0)
            return known[i].name;
    if (size >= 12 && memcmp (h, "RIFF", 4) == 0 && memcmp (h + 8, "WEBP", 4) == 0)
        return "a WebP image";
    if (size >= 14 && h[0] == 'B' && h[1] == 'M')
        return "a BMP image";
    if (size >= 3 && h[0] == 'P' && h[1] >= '1' && h[1] <= '7'
        && (h[2] == ' ' || h[2] == '\n' || h[2] == '\r' || h[2] == '\t'))
        return "a Netpbm image";
    size_t look = size < 512 ? size : 512, printable = 0;
    for (size_t i = 0; i < look; i++)
        printable += (h[i] >= 32 && h[i] < 127) || h[i] == '\n' || h[i] == '\r' || h[i] == '\t';
    *text = printable == look;
    return *text ? "text" : NULL;
}

void
img_not_tiff (const char *path, const unsigned char *data, size_t size, char *err, size_t errlen)
{
    int text;
    const char *kind = s_format_of (data, size, &text);
    if (text) {
        img_seterr (err, errlen, "'%s' is not a TIFF file (it is text): PIV frames are TIFF images",
                    path);
        return;
    }
    // The suggested output: the same name ending in .tif.
    const char *slash = strrchr (path, '/'), *dot = strrchr (path, '.');
    int stem = dot && (!slash || dot > slash + 1) ? (int) (dot - path) : (int) strlen (path);
    if (!kind)
        img_seterr (err, errlen,
                    "'%s' is not a TIFF file (unknown format): convert it to TIFF, e.g. with "
                    "ImageMagick 'convert' or, for raw camera data, Python tifffile",
                    path);
    else if (strcmp (kind, "a NumPy array") == 0)
        img_seterr (err, errlen,
                    "'%s' is not a TIFF file (%s): convert it, e.g. with Python tifffile: "
                    "tifffile.imwrite('%.*s.tif', numpy.load('%s'))",
                    path, kind, stem, path, path);
    else
        img_seterr (err, errlen,
                    "'%s' is not a TIFF file (%s): convert it, e.g. with ImageMagick "
                    "'convert %s %.*s.tif'",
                    path, kind, path, stem, path);
}
