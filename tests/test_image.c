// test_image.c — the image module: real TIFF files written with libtiff (and
// a few built byte by byte, to control their layout) are loaded back pixel
// for pixel; broken and unsupported files are refused with a clear reason.

#include "piv/budget.h"
#include "piv/image.h"
#include "piv/image_internal.h"  // the frames' forms (8-bit path)
#include "piv/piv.h"
#include "tests/testutil.h"

#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>

static char *s_dir;  // this test's temporary directory

static void
s_setup (void)
{
    s_dir = strdup (tu_tmpdir ());
}

static void
s_teardown (void)
{
    piv_image_test_read_limit (SIZE_MAX);
    tu_rmtree (s_dir);
    free (s_dir);
    s_dir = NULL;
}

#define ASSERT_ERR(err, path, cause)                                                            \
    ck_assert_msg (strstr ((err), (path)) && strstr ((err), (cause)),                          \
                   "error '%s' should name '%s' and say '%s'", (err), (path), (cause))

// How a test file is laid out.
typedef struct {
    int w, h;             // size in pixels
    int bps, spp;         // bits per sample, samples per pixel
    int photometric;      // PHOTOMETRIC_*
    int planar;           // PLANARCONFIG_*; 0 means contiguous
    int rps;              // rows per strip; 0: libtiff's default
    int tile_w, tile_h;   // tiled when non-zero
    int format;           // SAMPLEFORMAT_*; 0 leaves the tag out
    int omit_spp;         // leave the SamplesPerPixel tag out
    const uint16_t *cmap; // 3 x (1 << bps) colour map entries for palettes
    int orientation;      // ORIENTATION_*; 0 leaves the tag out
    double smin, smax;    // SMin/SMaxSampleValue, written when smin < smax
    const char *mode;     // TIFFOpen's mode: NULL "w" (this host's order), "wb" big-endian
    int compression;      // COMPRESSION_*; 0: none
    int fill;             // FILLORDER_*; 0 leaves the tag out
} s_layout_t;

// Writes pages with libtiff; samples[p] holds page p's samples, pixel after
// pixel (contiguous) or plane after plane (separate), rows padded to bytes.
static void
s_write_pages (const char *path, int npages, const s_layout_t *lay, const void *const *samples)
{
    TIFF *tif = TIFFOpen (path, lay[0].mode ? lay[0].mode : "w");
    ck_assert_msg (tif != NULL, "cannot create '%s'", path);
    for (int p = 0; p < npages; p++) {
        const s_layout_t *l = &lay[p];
        int planar = l->planar ? l->planar : PLANARCONFIG_CONTIG;
        int per_row = planar == PLANARCONFIG_CONTIG ? l->spp : 1;  // samples in a plane row
        size_t row_bytes = ((size_t) l->w * per_row * l->bps + 7) / 8;
        int planes = planar == PLANARCONFIG_CONTIG ? 1 : l->spp;
        TIFFSetField (tif, TIFFTAG_IMAGEWIDTH, (uint32_t) l->w);
        TIFFSetField (tif, TIFFTAG_IMAGELENGTH, (uint32_t) l->h);
        TIFFSetField (tif, TIFFTAG_BITSPERSAMPLE, (uint16_t) l->bps);
        if (!l->omit_spp)
            TIFFSetField (tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t) l->spp);
        TIFFSetField (tif, TIFFTAG_PHOTOMETRIC, (uint16_t) l->photometric);
        TIFFSetField (tif, TIFFTAG_PLANARCONFIG, (uint16_t) planar);
        TIFFSetField (tif, TIFFTAG_COMPRESSION,
                      (uint16_t) (l->compression ? l->compression : COMPRESSION_NONE));
        if (l->fill)
            TIFFSetField (tif, TIFFTAG_FILLORDER, (uint16_t) l->fill);
        if (l->format)
            TIFFSetField (tif, TIFFTAG_SAMPLEFORMAT, (uint16_t) l->format);
        if (l->orientation)
            TIFFSetField (tif, TIFFTAG_ORIENTATION, (uint16_t) l->orientation);
        if (l->smin < l->smax) {
            TIFFSetField (tif, TIFFTAG_SMINSAMPLEVALUE, l->smin);
            TIFFSetField (tif, TIFFTAG_SMAXSAMPLEVALUE, l->smax);
        }
        if (l->spp == 2) {
            uint16_t extra = EXTRASAMPLE_UNASSALPHA;
            TIFFSetField (tif, TIFFTAG_EXTRASAMPLES, (uint16_t) 1, &extra);
        }
        if (l->cmap) {
            size_t n = (size_t) 1 << l->bps;
            TIFFSetField (tif, TIFFTAG_COLORMAP, l->cmap, l->cmap + n, l->cmap + 2 * n);
        }
        if (npages > 1) {
            TIFFSetField (tif, TIFFTAG_SUBFILETYPE, (uint32_t) FILETYPE_PAGE);
            TIFFSetField (tif, TIFFTAG_PAGENUMBER, (uint16_t) p, (uint16_t) npages);
        }
        const unsigned char *src = samples[p];
        if (l->tile_w) {
            TIFFSetField (tif, TIFFTAG_TILEWIDTH, (uint32_t) l->tile_w);
            TIFFSetField (tif, TIFFTAG_TILELENGTH, (uint32_t) l->tile_h);
            size_t px = (size_t) per_row * l->bps / 8;
            size_t tile_bytes = (size_t) l->tile_w * l->tile_h * px;
            unsigned char *tile = malloc (tile_bytes);
            for (int plane = 0; plane < planes; plane++)
                for (int y0 = 0; y0 < l->h; y0 += l->tile_h)
                    for (int x0 = 0; x0 < l->w; x0 += l->tile_w) {
                        memset (tile, 0, tile_bytes);
                        for (int y = y0; y < y0 + l->tile_h && y < l->h; y++)
                            for (int x = x0; x < x0 + l->tile_w && x < l->w; x++)
                                memcpy (tile + ((size_t) (y - y0) * l->tile_w + (x - x0)) * px,
                                        src + (size_t) plane * l->h * row_bytes
                                            + (size_t) y * row_bytes + (size_t) x * px,
                                        px);
                        uint32_t t = TIFFComputeTile (tif, (uint32_t) x0, (uint32_t) y0, 0,
                                                      (uint16_t) plane);
                        ck_assert (TIFFWriteEncodedTile (tif, t, tile, (tmsize_t) tile_bytes)
                                   >= 0);
                    }
            free (tile);
        }
        else {
            int rps = l->rps ? l->rps : (int) TIFFDefaultStripSize (tif, 0);
            TIFFSetField (tif, TIFFTAG_ROWSPERSTRIP, (uint32_t) rps);
            for (int plane = 0; plane < planes; plane++)
                for (int y0 = 0; y0 < l->h; y0 += rps) {
                    int rows = l->h - y0 < rps ? l->h - y0 : rps;
                    uint32_t s = TIFFComputeStrip (tif, (uint32_t) y0, (uint16_t) plane);
                    const unsigned char *at =
                        src + (size_t) plane * l->h * row_bytes + (size_t) y0 * row_bytes;
                    ck_assert (TIFFWriteEncodedStrip (tif, s, (void *) at,
                                                      (tmsize_t) (rows * row_bytes))
                               >= 0);
                }
        }
        ck_assert (TIFFWriteDirectory (tif));
    }
    TIFFClose (tif);
}

static void
s_write_tiff (const char *path, const s_layout_t *lay, const void *samples)
{
    s_write_pages (path, 1, lay, &samples);
}

// An 8-bit greyscale page w x h with pixel (x, y) = (3x + 5y) mod 256.
static unsigned char *
s_ramp8 (int w, int h)
{
    unsigned char *p = malloc ((size_t) w * h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            p[y * w + x] = (unsigned char) ((3 * x + 5 * y) % 256);
    return p;
}

static void
s_write_grey8 (const char *path, int w, int h)
{
    unsigned char *p = s_ramp8 (w, h);
    s_layout_t lay = {.w = w, .h = h, .bps = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
                      .rps = 4};
    s_write_tiff (path, &lay, p);
    free (p);
}

static void
s_assert_ramp8 (const piv_image_t *img, int w, int h)
{
    ck_assert_int_eq (piv_image_width (img), w);
    ck_assert_int_eq (piv_image_height (img), h);
    const float *d = piv_image_cdata (img);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            ck_assert_msg (d[y * w + x] == (float) ((3 * x + 5 * y) % 256),
                           "pixel (%d, %d) is %g", x, y, d[y * w + x]);
}

// Little-endian TIFF surgery: the IFD entry of 'tag' in the first
// directory becomes one LONG with 'value'.
static void
s_patch_tag (unsigned char *buf, size_t len, uint16_t tag, uint32_t value)
{
    ck_assert (len >= 8 && buf[0] == 'I' && buf[1] == 'I');
    uint32_t ifd = buf[4] | buf[5] << 8 | buf[6] << 16 | (uint32_t) buf[7] << 24;
    ck_assert (ifd + 2 <= len);
    unsigned count = buf[ifd] | buf[ifd + 1] << 8;
    for (unsigned i = 0; i < count; i++) {
        unsigned char *e = buf + ifd + 2 + 12 * i;
        ck_assert (e + 12 <= buf + len);
        if ((e[0] | e[1] << 8) != tag)
            continue;
        uint32_t n = 1;
        e[2] = 4, e[3] = 0;  // LONG
        memcpy (e + 4, &n, 4);
        for (int b = 0; b < 4; b++)
            e[8 + b] = (unsigned char) (value >> (8 * b));
        return;
    }
    ck_abort_msg ("tag %u not found", tag);
}

static void
s_patch_file (const char *path, uint16_t tag, uint32_t value)
{
    size_t len;
    unsigned char *buf = (unsigned char *) tu_slurp (path, &len);
    ck_assert_ptr_nonnull (buf);
    s_patch_tag (buf, len, tag, value);
    tu_spit (path, buf, len);
    free (buf);
}

static void
s_put16 (unsigned char *p, unsigned v)
{
    p[0] = (unsigned char) v, p[1] = (unsigned char) (v >> 8);
}

static void
s_put32 (unsigned char *p, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (unsigned char) (v >> (8 * b));
}

// A little-endian 8-bit greyscale TIFF built by hand with its directory
// first and the pixels last, as many cameras write them, so that cutting
// the file loses pixel data, not the directory. Caller frees; *len_p gets
// the size. An optional 'unknown' tag 65000 makes libtiff warn.
static unsigned char *
s_raw_grey8 (int w, int h, int rps, int unknown_tag, size_t *len_p)
{
    int nstrips = (h + rps - 1) / rps;
    int nent = 9 + (unknown_tag ? 1 : 0);
    size_t ifd_len = 2 + 12 * (size_t) nent + 4;
    size_t arrays = 8 + ifd_len;  // strip offsets, then byte counts
    size_t data = arrays + 8 * (size_t) nstrips;
    size_t len = data + (size_t) w * h;
    unsigned char *buf = calloc (1, len);
    memcpy (buf, "II*\0", 4);
    s_put32 (buf + 4, 8);
    unsigned char *e = buf + 8;
    s_put16 (e, (unsigned) nent);
    e += 2;
    struct {
        unsigned tag, type;
        uint32_t count, value;
    } ent[] = {
        {256, 4, 1, (uint32_t) w},
        {257, 4, 1, (uint32_t) h},
        {258, 3, 1, 8},
        {259, 3, 1, 1},
        {262, 3, 1, 1},
        {273, 4, (uint32_t) nstrips, nstrips == 1 ? (uint32_t) data : (uint32_t) arrays},
        {277, 3, 1, 1},
        {278, 4, 1, (uint32_t) rps},
        {279, 4, (uint32_t) nstrips,
         nstrips == 1 ? (uint32_t) w * h : (uint32_t) (arrays + 4 * nstrips)},
        {65000, 4, 1, 42},
    };
    for (int i = 0; i < nent; i++, e += 12) {
        s_put16 (e, ent[i].tag);
        s_put16 (e + 2, ent[i].type);
        s_put32 (e + 4, ent[i].count);
        if (ent[i].type == 3)
            s_put16 (e + 8, (unsigned) ent[i].value);
        else
            s_put32 (e + 8, ent[i].value);
    }
    s_put32 (e, 0);  // no next directory
    for (int s = 0; s < nstrips; s++) {
        int rows = h - s * rps < rps ? h - s * rps : rps;
        s_put32 (buf + arrays + 4 * s, (uint32_t) (data + (size_t) s * rps * w));
        s_put32 (buf + arrays + 4 * (nstrips + s), (uint32_t) (rows * w));
    }
    unsigned char *ramp = s_ramp8 (w, h);
    memcpy (buf + data, ramp, (size_t) w * h);
    free (ramp);
    *len_p = len;
    return buf;
}

static double
s_mean (const piv_image_t *img, float *min_p, float *max_p)
{
    const float *d = piv_image_cdata (img);
    size_t n = (size_t) piv_image_width (img) * piv_image_height (img);
    double sum = 0;
    float lo = d[0], hi = d[0];
    for (size_t i = 0; i < n; i++) {
        sum += d[i];
        lo = d[i] < lo ? d[i] : lo;
        hi = d[i] > hi ? d[i] : hi;
    }
    *min_p = lo;
    *max_p = hi;
    return sum / (double) n;
}

// --- loading ----------------------------------------------------------------

START_TEST (loads_8bit_greyscale_in_strips)
{
    const char *path = tu_path (s_dir, "grey8.tif");
    s_write_grey8 (path, 37, 23);
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    s_assert_ramp8 (img, 37, 23);
    ck_assert_int_eq (piv_image_bits (img), 8);
    piv_image_destroy (&img);
    ck_assert_ptr_null (img);
}
END_TEST

START_TEST (loads_16bit_greyscale_in_partial_edge_tiles)
{
    const char *path = tu_path (s_dir, "tiles16.tif");
    int w = 100, h = 70;
    uint16_t *p = malloc (sizeof *p * w * h);
    for (int i = 0; i < w * h; i++)
        p[i] = (uint16_t) (i * 937u % 65536);
    s_layout_t lay = {.w = w, .h = h, .bps = 16, .spp = 1,
                      .photometric = PHOTOMETRIC_MINISBLACK, .tile_w = 32, .tile_h = 32};
    s_write_tiff (path, &lay, p);
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    ck_assert_int_eq (piv_image_width (img), w);
    ck_assert_int_eq (piv_image_height (img), h);
    ck_assert_int_eq (piv_image_bits (img), 16);
    const float *d = piv_image_cdata (img);
    for (int i = 0; i < w * h; i++)
        ck_assert_msg (d[i] == (float) p[i], "pixel %d is %g, not %u", i, d[i], p[i]);
    piv_image_destroy (&img);
    free (p);
}
END_TEST

START_TEST (loads_16bit_greyscale_in_strips_with_full_range)
{
    const char *path = tu_path (s_dir, "strips16.tif");
    int w = 64, h = 33;
    uint16_t *p = malloc (sizeof *p * w * h);
    for (int i = 0; i < w * h; i++)
        p[i] = (uint16_t) (i * 31u);
    p[0] = 65535;
    p[1] = 0;
    s_layout_t lay = {.w = w, .h = h, .bps = 16, .spp = 1,
                      .photometric = PHOTOMETRIC_MINISBLACK, .rps = 4};
    s_write_tiff (path, &lay, p);
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    const float *d = piv_image_cdata (img);
    for (int i = 0; i < w * h; i++)
        ck_assert_msg (d[i] == (float) p[i], "pixel %d is %g, not %u", i, d[i], p[i]);
    ck_assert_float_eq (d[0], 65535.0f);
    piv_image_destroy (&img);
    free (p);
}
END_TEST

START_TEST (loads_sample_0_of_grey_with_alpha)
{
    const char *path = tu_path (s_dir, "greyalpha.tif");
    int w = 19, h = 11;
    unsigned char *p = malloc ((size_t) 2 * w * h);
    for (int i = 0; i < w * h; i++) {
        p[2 * i] = (unsigned char) (i % 251);
        p[2 * i + 1] = 200;  // alpha, to be ignored
    }
    s_layout_t lay = {.w = w, .h = h, .bps = 8, .spp = 2,
                      .photometric = PHOTOMETRIC_MINISBLACK, .rps = 3};
    s_write_tiff (path, &lay, p);
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    const float *d = piv_image_cdata (img);
    for (int i = 0; i < w * h; i++)
        ck_assert_float_eq (d[i], (float) (i % 251));
    piv_image_destroy (&img);
    free (p);
}
END_TEST

START_TEST (loads_plane_0_of_separate_planes_in_strips_and_tiles)
{
    int w = 40, h = 36;
    uint16_t *p = malloc (sizeof *p * 2 * w * h);
    for (int i = 0; i < w * h; i++) {
        p[i] = (uint16_t) (1000 + i);  // plane 0
        p[w * h + i] = 7;              // plane 1
    }
    for (int tiled = 0; tiled < 2; tiled++) {
        const char *path = tu_path (s_dir, tiled ? "planes-tiled.tif" : "planes.tif");
        s_layout_t lay = {.w = w, .h = h, .bps = 16, .spp = 2,
                          .photometric = PHOTOMETRIC_MINISBLACK,
                          .planar = PLANARCONFIG_SEPARATE, .rps = 5,
                          .tile_w = tiled ? 16 : 0, .tile_h = tiled ? 16 : 0};
        s_write_tiff (path, &lay, p);
        char err[256] = "";
        piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
        ck_assert_msg (img != NULL, "%s", err);
        const float *d = piv_image_cdata (img);
        for (int i = 0; i < w * h; i++)
            ck_assert_float_eq (d[i], (float) (1000 + i));
        piv_image_destroy (&img);
    }
    free (p);
}
END_TEST

START_TEST (loads_both_pages_of_a_multipage_file_as_a_pair)
{
    const char *path = tu_path (s_dir, "pair.tif");
    int w = 24, h = 16;
    unsigned char *a = malloc ((size_t) w * h), *b = malloc ((size_t) w * h);
    for (int i = 0; i < w * h; i++) {
        a[i] = (unsigned char) (i % 200);
        b[i] = (unsigned char) (255 - i % 200);
    }
    s_layout_t lay[2] = {
        {.w = w, .h = h, .bps = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK, .rps = 5},
        {.w = w, .h = h, .bps = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK, .rps = 7},
    };
    const void *pages[2] = {a, b};
    s_write_pages (path, 2, lay, pages);

    char err[256] = "";
    piv_image_t *fa = NULL, *fb = NULL;
    ck_assert_msg (piv_image_load_pair (path, NULL, 0, &fa, &fb, err, sizeof err) == 0, "%s",
                   err);
    const float *da = piv_image_cdata (fa), *db = piv_image_cdata (fb);
    for (int i = 0; i < w * h; i++) {
        ck_assert_float_eq (da[i], (float) a[i]);
        ck_assert_float_eq (db[i], (float) b[i]);
    }
    // Page 1 on its own gives frame B.
    piv_image_t *page1 = piv_image_load (path, 1, 0, err, sizeof err);
    ck_assert_msg (page1 != NULL, "%s", err);
    ck_assert_mem_eq (piv_image_cdata (page1), db, sizeof (float) * w * h);
    piv_image_destroy (&page1);
    piv_image_destroy (&fa);
    piv_image_destroy (&fb);
    free (a);
    free (b);
}
END_TEST

START_TEST (loads_a_pair_from_two_files)
{
    const char *pa = tu_path (s_dir, "a.tif"), *pb = tu_path (s_dir, "b.tif");
    s_write_grey8 (pa, 30, 20);
    s_write_grey8 (pb, 30, 20);
    char err[256] = "";
    piv_image_t *fa = NULL, *fb = NULL;
    ck_assert_msg (piv_image_load_pair (pa, pb, 0, &fa, &fb, err, sizeof err) == 0, "%s", err);
    s_assert_ramp8 (fa, 30, 20);
    s_assert_ramp8 (fb, 30, 20);
    piv_image_destroy (&fa);
    piv_image_destroy (&fb);
}
END_TEST

START_TEST (applies_the_colour_map_of_a_palette_image)
{
    const char *path = tu_path (s_dir, "palette.tif");
    uint16_t cmap[3 * 256];
    for (int i = 0; i < 256; i++) {
        cmap[i] = (uint16_t) (((i * 37) % 256) * 257);  // red
        cmap[256 + i] = (uint16_t) ((255 - i) * 257);   // green
        cmap[512 + i] = (uint16_t) (((i * 3) % 256) * 257);  // blue
    }
    int w = 16, h = 16;
    unsigned char *p = malloc ((size_t) w * h);
    for (int i = 0; i < w * h; i++)
        p[i] = (unsigned char) i;
    s_layout_t lay = {.w = w, .h = h, .bps = 8, .spp = 1, .photometric = PHOTOMETRIC_PALETTE,
                      .rps = 4, .cmap = cmap};
    s_write_tiff (path, &lay, p);
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    ck_assert_int_eq (piv_image_bits (img), 8);
    const float *d = piv_image_cdata (img);
    for (int i = 0; i < w * h; i++) {
        double r = (i * 37) % 256, g = 255 - i, b = (i * 3) % 256;
        ck_assert_float_eq_tol (d[i], (float) (0.299 * r + 0.587 * g + 0.114 * b), 1e-3f);
    }
    // Not the raw indices: index 0 maps to green 255, luminance 149.685.
    ck_assert_float_eq_tol (d[0], 149.685f, 1e-3f);
    piv_image_destroy (&img);
    free (p);
}
END_TEST

START_TEST (converts_rgb_to_rec601_luminance)
{
    const char *path = tu_path (s_dir, "rgb.tif");
    int w = 13, h = 9;
    unsigned char *p = malloc ((size_t) 3 * w * h);
    for (int i = 0; i < w * h; i++) {
        p[3 * i] = (unsigned char) (i * 2);
        p[3 * i + 1] = (unsigned char) (255 - i);
        p[3 * i + 2] = (unsigned char) (i * 7 % 256);
    }
    s_layout_t lay = {.w = w, .h = h, .bps = 8, .spp = 3, .photometric = PHOTOMETRIC_RGB,
                      .rps = 2};
    s_write_tiff (path, &lay, p);
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    ck_assert_int_eq (piv_image_bits (img), 8);
    const float *d = piv_image_cdata (img);
    for (int i = 0; i < w * h; i++) {
        double lum = 0.299 * p[3 * i] + 0.587 * p[3 * i + 1] + 0.114 * p[3 * i + 2];
        ck_assert_float_eq_tol (d[i], (float) lum, 1e-3f);
    }
    piv_image_destroy (&img);
    free (p);
}
END_TEST

START_TEST (loads_a_file_without_a_samples_per_pixel_tag)
{
    const char *path = tu_path (s_dir, "nospp.tif");
    unsigned char *p = s_ramp8 (20, 10);
    s_layout_t lay = {.w = 20, .h = 10, .bps = 8, .spp = 1,
                      .photometric = PHOTOMETRIC_MINISBLACK, .rps = 3, .omit_spp = 1};
    s_write_tiff (path, &lay, p);
    free (p);
    // The tag is really absent from the file.
    TIFF *tif = TIFFOpen (path, "r");
    ck_assert_ptr_nonnull (tif);
    uint16_t spp = 99;
    ck_assert_int_eq (TIFFGetField (tif, TIFFTAG_SAMPLESPERPIXEL, &spp), 0);
    TIFFClose (tif);

    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    s_assert_ramp8 (img, 20, 10);
    piv_image_destroy (&img);
}
END_TEST

START_TEST (inverts_min_is_white_greyscale)
{
    int w = 10, h = 6;
    unsigned char *p8 = s_ramp8 (w, h);
    uint16_t *p16 = malloc (sizeof *p16 * w * h);
    for (int i = 0; i < w * h; i++)
        p16[i] = (uint16_t) (i * 1000);
    s_layout_t l8 = {.w = w, .h = h, .bps = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISWHITE,
                     .rps = 2};
    s_layout_t l16 = l8;
    l16.bps = 16;
    const char *path8 = tu_path (s_dir, "white8.tif"), *path16 = tu_path (s_dir, "white16.tif");
    s_write_tiff (path8, &l8, p8);
    s_write_tiff (path16, &l16, p16);
    char err[256] = "";
    piv_image_t *i8 = piv_image_load (path8, 0, 0, err, sizeof err);
    ck_assert_msg (i8 != NULL, "%s", err);
    piv_image_t *i16 = piv_image_load (path16, 0, 0, err, sizeof err);
    ck_assert_msg (i16 != NULL, "%s", err);
    for (int i = 0; i < w * h; i++) {
        ck_assert_float_eq (piv_image_cdata (i8)[i], (float) (255 - p8[i]));
        ck_assert_float_eq (piv_image_cdata (i16)[i], (float) (65535 - p16[i]));
    }
    piv_image_destroy (&i8);
    piv_image_destroy (&i16);
    free (p8);
    free (p16);
}
END_TEST

START_TEST (loads_a_file_larger_than_one_read_block)
{
    // 1600 x 1500 16-bit pixels: 4.8 MB, more than PIV_READ_BLOCK.
    const char *path = tu_path (s_dir, "big.tif");
    int w = 1600, h = 1500;
    uint16_t *p = malloc (sizeof *p * w * h);
    for (int i = 0; i < w * h; i++)
        p[i] = (uint16_t) (i % 65521);
    s_layout_t lay = {.w = w, .h = h, .bps = 16, .spp = 1,
                      .photometric = PHOTOMETRIC_MINISBLACK, .rps = 64};
    s_write_tiff (path, &lay, p);
    struct stat st;
    ck_assert (stat (path, &st) == 0 && (size_t) st.st_size > PIV_READ_BLOCK);
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    const float *d = piv_image_cdata (img);
    for (int i = 0; i < w * h; i++)
        if (d[i] != (float) p[i])
            ck_abort_msg ("pixel %d is %g, not %u", i, d[i], p[i]);
    piv_image_destroy (&img);
    free (p);
}
END_TEST

START_TEST (loads_a_file_with_an_unknown_tag)
{
    const char *path = tu_path (s_dir, "unknown.tif");
    size_t len;
    unsigned char *buf = s_raw_grey8 (21, 17, 4, 1, &len);
    tu_spit (path, buf, len);
    free (buf);
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    s_assert_ramp8 (img, 21, 17);
    piv_image_destroy (&img);
}
END_TEST

// --- real camera images -----------------------------------------------------

START_TEST (loads_the_real_8bit_greyscale_camera_image)
{
    char err[256] = "";
    piv_image_t *img = piv_image_load (tu_data ("B005_1.tif"), 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    ck_assert_int_eq (piv_image_width (img), 512);
    ck_assert_int_eq (piv_image_height (img), 512);
    ck_assert_int_eq (piv_image_bits (img), 8);
    float lo, hi;
    double mean = s_mean (img, &lo, &hi);
    // Sparse bright particles on a black background.
    ck_assert_msg (mean > 4.0 && mean < 12.0, "mean %g", mean);
    ck_assert_float_eq (lo, 0.0f);
    ck_assert_float_eq (hi, 248.0f);
    ck_assert_float_eq (piv_image_cdata (img)[10 * 512 + 10], 25.0f);
    piv_image_destroy (&img);
}
END_TEST

START_TEST (loads_the_real_palette_camera_image_through_its_colour_map)
{
    const char *path = tu_data ("2image_00.tif");
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    ck_assert_int_eq (piv_image_width (img), 1008);
    ck_assert_int_eq (piv_image_height (img), 1012);
    ck_assert_int_eq (piv_image_bits (img), 8);
    float lo, hi;
    double mean = s_mean (img, &lo, &hi);
    ck_assert_msg (mean > 25.0 && mean < 45.0, "mean %g", mean);
    ck_assert_float_eq (lo, 13.0f);
    ck_assert_float_eq (hi, 255.0f);

    // Each pixel is the luminance of its colour map entry (this camera's
    // map happens to be a grey ramp, entry i = i * 257).
    TIFF *tif = TIFFOpen (path, "r");
    ck_assert_ptr_nonnull (tif);
    uint16_t *r, *g, *b;
    ck_assert (TIFFGetField (tif, TIFFTAG_COLORMAP, &r, &g, &b));
    uint32_t rps = 0;
    TIFFGetField (tif, TIFFTAG_ROWSPERSTRIP, &rps);
    tmsize_t strip_size = TIFFStripSize (tif);
    unsigned char *strip = malloc ((size_t) strip_size);
    const float *d = piv_image_cdata (img);
    for (uint32_t s = 0; s < TIFFNumberOfStrips (tif); s += 9) {
        tmsize_t n = TIFFReadEncodedStrip (tif, s, strip, strip_size);
        ck_assert (n > 0);
        for (tmsize_t k = 0; k < n; k += 37) {
            unsigned idx = strip[k];
            double lum = 0.299 * (r[idx] >> 8) + 0.587 * (g[idx] >> 8) + 0.114 * (b[idx] >> 8);
            ck_assert_float_eq_tol (d[(size_t) s * rps * 1008 + (size_t) k], (float) lum, 1e-3f);
        }
    }
    free (strip);
    TIFFClose (tif);
    piv_image_destroy (&img);
}
END_TEST

START_TEST (loads_the_real_rgb_camera_image_as_luminance)
{
    char err[256] = "";
    piv_image_t *img = piv_image_load (tu_data ("exp1_001_a_rgb.tiff"), 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    ck_assert_int_eq (piv_image_width (img), 511);
    ck_assert_int_eq (piv_image_height (img), 369);
    ck_assert_int_eq (piv_image_bits (img), 8);
    float lo, hi;
    double mean = s_mean (img, &lo, &hi);
    ck_assert_msg (mean > 25.0 && mean < 50.0, "mean %g", mean);
    ck_assert_float_eq (lo, 0.0f);
    ck_assert_msg (hi > 240.0f && hi <= 255.0f, "max %g", hi);
    ck_assert_float_eq_tol (piv_image_cdata (img)[0], 17.0f, 1e-3f);
    ck_assert_float_eq_tol (piv_image_cdata (img)[10 * 511 + 10], 28.0f, 1e-3f);
    piv_image_destroy (&img);
}
END_TEST

START_TEST (loads_the_real_pairs_with_matching_sizes)
{
    const char *a[] = {"B005_1.tif", "2image_00.tif", "exp1_001_a_rgb.tiff"};
    const char *b[] = {"B005_2.tif", "2image_01.tif", "exp1_001_b_rgb.tiff"};
    for (int i = 0; i < 3; i++) {
        char pa[4096], pb[4096], err[256] = "";
        snprintf (pa, sizeof pa, "%s", tu_data (a[i]));
        snprintf (pb, sizeof pb, "%s", tu_data (b[i]));
        piv_image_t *fa = NULL, *fb = NULL;
        ck_assert_msg (piv_image_load_pair (pa, pb, 0, &fa, &fb, err, sizeof err) == 0, "%s",
                       err);
        // The frames differ: particles moved between A and B.
        size_t n = (size_t) piv_image_width (fa) * piv_image_height (fa);
        ck_assert (memcmp (piv_image_cdata (fa), piv_image_cdata (fb), n * sizeof (float)) != 0);
        piv_image_destroy (&fa);
        piv_image_destroy (&fb);
    }
}
END_TEST

// --- saving -----------------------------------------------------------------

static int
s_count_entries (const char *dir)
{
    char cmd[4200];
    snprintf (cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *f = popen (cmd, "r");
    int n = -1;
    ck_assert (f && fscanf (f, "%d", &n) == 1);
    pclose (f);
    return n;
}

START_TEST (saves_and_reloads_8bit_with_rounding_and_clipping)
{
    const char *path = tu_path (s_dir, "saved8.tif");
    piv_image_t *img = piv_image_new (7, 2);
    float in[14] = {-5.0f, 0.0f, 0.4f, 0.5f, 1.49f, 127.5f, 254.4f,
                    254.5f, 255.0f, 300.0f, NAN, 1e9f, -INFINITY, 42.0f};
    float out[14] = {0, 0, 0, 1, 1, 128, 254, 255, 255, 255, 0, 255, 0, 42};
    memcpy (piv_image_data (img), in, sizeof in);
    char err[256] = "";
    const piv_image_t *frames[] = {img};
    ck_assert_msg (piv_image_save (path, frames, 1, 8, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq (s_count_entries (s_dir), 1);  // no temporary left behind

    piv_image_t *back = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (back != NULL, "%s", err);
    ck_assert_int_eq (piv_image_bits (back), 8);
    ck_assert_mem_eq (piv_image_cdata (back), out, sizeof out);

    TIFF *tif = TIFFOpen (path, "r");
    ck_assert_ptr_nonnull (tif);
    uint16_t spp = 0, photometric = 99, compression = 0;
    ck_assert (TIFFGetField (tif, TIFFTAG_SAMPLESPERPIXEL, &spp) && spp == 1);
    ck_assert (TIFFGetField (tif, TIFFTAG_PHOTOMETRIC, &photometric)
               && photometric == PHOTOMETRIC_MINISBLACK);
    ck_assert (TIFFGetField (tif, TIFFTAG_COMPRESSION, &compression)
               && compression == COMPRESSION_NONE);
    TIFFClose (tif);
    piv_image_destroy (&img);
    piv_image_destroy (&back);
}
END_TEST

START_TEST (saves_and_reloads_16bit_pages_in_64k_strips)
{
    const char *path = tu_path (s_dir, "saved16.tif");
    int w = 300, h = 250;
    piv_image_t *a = piv_image_new (w, h), *b = piv_image_new (w, h);
    for (int i = 0; i < w * h; i++) {
        piv_image_data (a)[i] = (float) (i % 65536) + 0.25f;
        piv_image_data (b)[i] = (float) (i * 3 % 70000) - 2.0f;  // clips both ways
    }
    char err[256] = "";
    const piv_image_t *frames[] = {a, b};
    ck_assert_msg (piv_image_save (path, frames, 2, 16, err, sizeof err) == 0, "%s", err);

    piv_image_t *fa = NULL, *fb = NULL;
    ck_assert_msg (piv_image_load_pair (path, NULL, 0, &fa, &fb, err, sizeof err) == 0, "%s",
                   err);
    ck_assert_int_eq (piv_image_bits (fa), 16);
    for (int i = 0; i < w * h; i++) {
        float vb = (float) (i * 3 % 70000) - 2.0f;
        vb = vb < 0 ? 0 : vb > 65535 ? 65535 : vb;
        ck_assert_float_eq (piv_image_cdata (fa)[i], (float) (i % 65536));
        ck_assert_float_eq (piv_image_cdata (fb)[i], vb);
    }
    // Strips of about 64 KiB: 600-byte rows, 109 rows to a strip.
    TIFF *tif = TIFFOpen (path, "r");
    ck_assert_ptr_nonnull (tif);
    ck_assert_int_eq (TIFFNumberOfDirectories (tif), 2);
    uint32_t rps = 0;
    ck_assert (TIFFGetField (tif, TIFFTAG_ROWSPERSTRIP, &rps));
    ck_assert_uint_eq (rps, 65536 / 600);
    TIFFClose (tif);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    piv_image_destroy (&fa);
    piv_image_destroy (&fb);
}
END_TEST

START_TEST (saving_replaces_an_existing_file_whole)
{
    const char *path = tu_path (s_dir, "replace.tif");
    tu_spit (path, "old contents", 12);
    piv_image_t *img = piv_image_new (5, 5);
    piv_image_data (img)[12] = 99.0f;
    char err[256] = "";
    const piv_image_t *frames[] = {img};
    ck_assert_msg (piv_image_save (path, frames, 1, 8, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq (s_count_entries (s_dir), 1);
    piv_image_t *back = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (back != NULL, "%s", err);
    ck_assert_float_eq (piv_image_cdata (back)[12], 99.0f);
    piv_image_destroy (&img);
    piv_image_destroy (&back);
}
END_TEST

START_TEST (refuses_to_save_where_it_cannot_and_leaves_no_temporary)
{
    const char *path = tu_path (s_dir, "no/such/dir/out.tif");
    piv_image_t *img = piv_image_new (4, 4);
    char err[256] = "";
    const piv_image_t *frames[] = {img};
    ck_assert_int_eq (piv_image_save (path, frames, 1, 8, err, sizeof err), -1);
    ASSERT_ERR (err, path, "No such file or directory");
    ck_assert_int_eq (piv_image_save (tu_path (s_dir, "x.tif"), frames, 1, 12, err, sizeof err),
                      -1);
    ASSERT_ERR (err, "x.tif", "12 bits");
    ck_assert_int_eq (s_count_entries (s_dir), 0);
    // The file is written, but cannot take the place of a directory.
    const char *dir = tu_path (s_dir, "taken");
    ck_assert (mkdir (dir, 0700) == 0);
    ck_assert_int_eq (piv_image_save (dir, frames, 1, 8, err, sizeof err), -1);
    ASSERT_ERR (err, dir, "Is a directory");
    ck_assert_int_eq (s_count_entries (s_dir), 1);
    piv_image_destroy (&img);
}
END_TEST

// --- in memory --------------------------------------------------------------

START_TEST (makes_zeroed_aligned_images_and_destroys_null)
{
    piv_image_t *img = piv_image_new (33, 17);
    ck_assert_ptr_nonnull (img);
    ck_assert_int_eq (piv_image_bits (img), 0);
    ck_assert_uint_eq ((uintptr_t) piv_image_data (img) % 64, 0);
    for (int i = 0; i < 33 * 17; i++)
        ck_assert_float_eq (piv_image_cdata (img)[i], 0.0f);
    piv_image_destroy (&img);
    ck_assert_ptr_null (img);
    piv_image_destroy (&img);
    piv_image_destroy (NULL);
    ck_assert_ptr_null (piv_image_new (0, 5));
    ck_assert_ptr_null (piv_image_new (5, -1));
}
END_TEST

START_TEST (takes_the_pixelwise_minimum_and_subtracts_clamping_at_zero)
{
    piv_image_t *f[3];
    for (int k = 0; k < 3; k++) {
        f[k] = piv_image_new (4, 3);
        for (int i = 0; i < 12; i++)
            piv_image_data (f[k])[i] = (float) ((i + 4 * k) % 12);
    }
    char err[256] = "";
    piv_image_t *bg = piv_image_min ((const piv_image_t *const *) f, 3, err, sizeof err);
    ck_assert_msg (bg != NULL, "%s", err);
    for (int i = 0; i < 12; i++) {
        float lo = fminf (fminf ((float) (i % 12), (float) ((i + 4) % 12)), (float) ((i + 8) % 12));
        ck_assert_float_eq (piv_image_cdata (bg)[i], lo);
    }
    piv_image_data (bg)[0] = 5.0f;  // above f[0]'s 0: clamps
    ck_assert_int_eq (piv_image_subtract (f[0], bg, err, sizeof err), 0);
    ck_assert_float_eq (piv_image_cdata (f[0])[0], 0.0f);
    for (int i = 1; i < 12; i++) {
        float lo = fminf (fminf ((float) i, (float) ((i + 4) % 12)), (float) ((i + 8) % 12));
        ck_assert_float_eq (piv_image_cdata (f[0])[i], (float) i - lo);
    }
    for (int k = 0; k < 3; k++)
        piv_image_destroy (&f[k]);
    piv_image_destroy (&bg);
}
END_TEST

START_TEST (refuses_minimum_and_subtraction_of_different_sizes)
{
    piv_image_t *a = piv_image_new (4, 3), *b = piv_image_new (3, 4);
    const piv_image_t *frames[] = {a, b};
    char err[256] = "";
    ck_assert_ptr_null (piv_image_min (frames, 2, err, sizeof err));
    ck_assert_msg (strstr (err, "4x3") && strstr (err, "3x4"), "%s", err);
    ck_assert_ptr_null (piv_image_min (frames, 0, err, sizeof err));
    ck_assert_msg (strstr (err, "0 frames"), "%s", err);
    ck_assert_int_eq (piv_image_subtract (a, b, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "4x3") && strstr (err, "3x4"), "%s", err);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
}
END_TEST

// --- refusals ---------------------------------------------------------------

START_TEST (refuses_a_text_file_as_not_a_tiff)
{
    const char *path = tu_path (s_dir, "notes.tif");
    const char *text = "x y u v\n1 2 3 4\n";
    tu_spit (path, text, strlen (text));
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "is not a TIFF file");
}
END_TEST

START_TEST (refuses_an_empty_file)
{
    const char *path = tu_path (s_dir, "empty.tif");
    tu_spit (path, "", 0);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "empty");
}
END_TEST

START_TEST (refuses_a_tiff_cut_before_its_directory)
{
    // libtiff writes the directory after the pixels: half the file loses it.
    const char *path = tu_path (s_dir, "cut.tif");
    s_write_grey8 (path, 64, 64);
    size_t len;
    char *buf = tu_slurp (path, &len);
    tu_spit (path, buf, len / 2);
    free (buf);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "truncated or corrupt");
}
END_TEST

START_TEST (refuses_a_tiff_whose_pixel_data_is_cut_short)
{
    // Directory first, pixels last: the cut loses pixels, in several strips
    // or in the single strip of the whole image.
    int rps_list[] = {4, 40};
    for (int k = 0; k < 2; k++) {
        const char *path = tu_path (s_dir, k ? "cut-one-strip.tif" : "cut-strips.tif");
        size_t len;
        unsigned char *buf = s_raw_grey8 (50, 40, rps_list[k], 0, &len);
        tu_spit (path, buf, len);
        char err[256] = "";
        piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
        ck_assert_msg (img != NULL, "%s", err);  // whole, it loads
        s_assert_ramp8 (img, 50, 40);
        piv_image_destroy (&img);

        tu_spit (path, buf, len - 50 * 40 / 2);
        free (buf);
        ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
        ASSERT_ERR (err, path, "truncated or corrupt pixel data");
    }
}
END_TEST

START_TEST (refuses_a_truncated_colour_image)
{
    // Through libtiff's RGBA reader: the strip is moved so that its data
    // runs past the end of the file, as in a file cut short.
    const char *path = tu_path (s_dir, "rgb-cut.tif");
    int w = 40, h = 30;
    unsigned char *p = calloc (3, (size_t) w * h);
    s_layout_t lay = {.w = w, .h = h, .bps = 8, .spp = 3, .photometric = PHOTOMETRIC_RGB,
                      .rps = h};
    s_write_tiff (path, &lay, p);
    free (p);
    s_patch_file (path, TIFFTAG_STRIPOFFSETS, 3000);  // data runs past the end
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "truncated or corrupt");
}
END_TEST

START_TEST (refuses_zero_width_or_height)
{
    // libtiff itself refuses a zero width (with a message about scanline
    // sizes) but not a zero height; either way the user reads the size.
    const char *path = tu_path (s_dir, "zero.tif");
    s_write_grey8 (path, 16, 16);
    s_patch_file (path, TIFFTAG_IMAGEWIDTH, 0);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "zero size (0x16)");

    const char *flat = tu_path (s_dir, "flat.tif");
    s_write_grey8 (flat, 16, 16);
    s_patch_file (flat, TIFFTAG_IMAGELENGTH, 0);
    ck_assert_ptr_null (piv_image_load (flat, 0, 0, err, sizeof err));
    ASSERT_ERR (err, flat, "zero size (16x0)");
}
END_TEST

START_TEST (refuses_absurd_dimensions)
{
    const char *path = tu_path (s_dir, "huge.tif");
    unsigned char *p = s_ramp8 (16, 16);
    s_layout_t lay = {.w = 16, .h = 16, .bps = 8, .spp = 1,
                      .photometric = PHOTOMETRIC_MINISBLACK, .rps = 1000000};
    s_write_tiff (path, &lay, p);
    free (p);
    s_patch_file (path, TIFFTAG_IMAGEWIDTH, 100000);
    s_patch_file (path, TIFFTAG_IMAGELENGTH, 100000);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "100000x100000");
    ck_assert_msg (strstr (err, "limit of 67108864 pixels"), "%s", err);
}
END_TEST

START_TEST (refuses_more_pixels_than_the_caller_allows)
{
    const char *path = tu_path (s_dir, "small.tif");
    s_write_grey8 (path, 16, 16);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 100, err, sizeof err));
    ASSERT_ERR (err, path, "16x16");
    ck_assert_msg (strstr (err, "limit of 100 pixels"), "%s", err);
    piv_image_t *img = piv_image_load (path, 0, 256, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    piv_image_destroy (&img);
}
END_TEST

START_TEST (refuses_float_samples)
{
    // Half floats: libtiff hands them over undecoded.
    const char *path = tu_path (s_dir, "float.tif");
    uint16_t p[8 * 8] = {0};
    s_layout_t lay = {.w = 8, .h = 8, .bps = 16, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
                      .rps = 8, .format = SAMPLEFORMAT_IEEEFP};
    s_write_tiff (path, &lay, p);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "16-bit IEEE float");
}
END_TEST

START_TEST (refuses_signed_and_odd_sized_samples)
{
    const char *path = tu_path (s_dir, "signed.tif");
    int32_t p[8 * 8] = {0};
    s_layout_t lay = {.w = 8, .h = 8, .bps = 32, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
                      .rps = 8, .format = SAMPLEFORMAT_INT};
    s_write_tiff (path, &lay, p);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "32-bit signed integer");

    const char *path32 = tu_path (s_dir, "u32.tif");
    uint32_t q[8 * 8] = {0};
    lay.bps = 32;
    lay.format = SAMPLEFORMAT_UINT;
    s_write_tiff (path32, &lay, q);
    ck_assert_ptr_null (piv_image_load (path32, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path32, "32-bit unsigned integer");
}
END_TEST

START_TEST (refuses_1bit_bilevel)
{
    const char *path = tu_path (s_dir, "bilevel.tif");
    unsigned char p[16 * 2] = {0xAA};
    s_layout_t lay = {.w = 16, .h = 16, .bps = 1, .spp = 1, .photometric = PHOTOMETRIC_MINISWHITE,
                      .rps = 16};
    s_write_tiff (path, &lay, p);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "1-bit");
}
END_TEST

START_TEST (refuses_a_missing_page)
{
    const char *path = tu_path (s_dir, "single.tif");
    s_write_grey8 (path, 8, 8);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 1, 0, err, sizeof err));
    ASSERT_ERR (err, path, "has 1 page, page 1 not found");
    ck_assert_ptr_null (piv_image_load (path, -1, 0, err, sizeof err));
    ASSERT_ERR (err, path, "page -1");

    piv_image_t *a = (piv_image_t *) 1, *b = (piv_image_t *) 1;
    ck_assert_int_eq (piv_image_load_pair (path, NULL, 0, &a, &b, err, sizeof err), -1);
    ck_assert_ptr_null (a);
    ck_assert_ptr_null (b);
    ASSERT_ERR (err, path, "has 1 page, a pair needs 2");
}
END_TEST

START_TEST (refuses_a_pair_of_different_sizes)
{
    const char *pa = tu_path (s_dir, "a.tif"), *pb = tu_path (s_dir, "b.tif");
    s_write_grey8 (pa, 512, 512);
    s_write_grey8 (pb, 256, 256);
    char err[512] = "", expect[512];
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_int_eq (piv_image_load_pair (pa, pb, 0, &a, &b, err, sizeof err), -1);
    ck_assert_ptr_null (a);
    ck_assert_ptr_null (b);
    snprintf (expect, sizeof expect, "frames differ in size: '%s' is 512x512, '%s' is 256x256",
              pa, pb);
    ck_assert_str_eq (err, expect);
}
END_TEST

START_TEST (refuses_a_nonexistent_file_with_the_system_reason)
{
    const char *path = tu_path (s_dir, "missing.tif");
    char err[256] = "", expect[512];
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    snprintf (expect, sizeof expect, "cannot open '%s': No such file or directory", path);
    ck_assert_str_eq (err, expect);

    // In a pair, the missing file is the one named.
    const char *pa = tu_path (s_dir, "a.tif");
    s_write_grey8 (pa, 8, 8);
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_int_eq (piv_image_load_pair (pa, path, 0, &a, &b, err, sizeof err), -1);
    ck_assert_ptr_null (a);
    ck_assert_str_eq (err, expect);
}
END_TEST

START_TEST (reports_a_short_read)
{
    const char *path = tu_path (s_dir, "short.tif");
    s_write_grey8 (path, 64, 64);
    struct stat st;
    ck_assert (stat (path, &st) == 0);
    char err[256] = "", expect[512];
    piv_image_test_read_limit (1000);
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    snprintf (expect, sizeof expect, "cannot read '%s': short read (got 1000 of %lld bytes)", path,
              (long long) st.st_size);
    ck_assert_str_eq (err, expect);
    piv_image_test_read_limit (SIZE_MAX);
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    piv_image_destroy (&img);

    // The budget spans reads: frame A gets its bytes, frame B falls short.
    const char *pb = tu_path (s_dir, "b.tif");
    s_write_grey8 (pb, 64, 64);
    piv_image_test_read_limit ((size_t) st.st_size + 10);
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_int_eq (piv_image_load_pair (path, pb, 0, &a, &b, err, sizeof err), -1);
    ASSERT_ERR (err, pb, "short read (got 10 of");
}
END_TEST

START_TEST (prints_nothing_while_refusing_broken_files)
{
    // Broken files of several kinds, loaded while stderr goes to a file.
    const char *cut = tu_path (s_dir, "cut.tif");
    s_write_grey8 (cut, 64, 64);
    size_t len;
    char *buf = tu_slurp (cut, &len);
    tu_spit (cut, buf, len / 2);
    free (buf);
    const char *zero = tu_path (s_dir, "zero.tif");
    s_write_grey8 (zero, 16, 16);
    s_patch_file (zero, TIFFTAG_IMAGEWIDTH, 0);
    const char *pix = tu_path (s_dir, "pix.tif");
    unsigned char *raw = s_raw_grey8 (50, 40, 4, 1, &len);
    tu_spit (pix, raw, len - 1000);
    free (raw);
    const char *strip = tu_path (s_dir, "strip.tif");
    s_write_grey8 (strip, 16, 16);
    s_patch_file (strip, TIFFTAG_STRIPOFFSETS, 0xFFFFFF00u);
    const char *rgb = tu_path (s_dir, "rgb.tif");
    unsigned char px[3 * 8 * 8] = {0};
    s_layout_t lay = {.w = 8, .h = 8, .bps = 8, .spp = 3, .photometric = PHOTOMETRIC_RGB,
                      .rps = 8};
    s_write_tiff (rgb, &lay, px);
    s_patch_file (rgb, TIFFTAG_STRIPOFFSETS, 100000);
    const char *unknown = tu_path (s_dir, "unknown.tif");
    raw = s_raw_grey8 (10, 10, 10, 1, &len);
    tu_spit (unknown, raw, len);
    free (raw);

    const char *log = tu_path (s_dir, "stderr.txt");
    fflush (stderr);
    int saved = dup (2);
    int fd = open (log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert (saved >= 0 && fd >= 0);
    dup2 (fd, 2);
    close (fd);
    const char *bad[] = {cut, zero, pix, strip, rgb};
    char err[5][256];
    for (int i = 0; i < 5; i++) {
        err[i][0] = '\0';
        piv_image_t *img = piv_image_load (bad[i], 0, 0, err[i], sizeof err[i]);
        ck_assert_ptr_null (img);
    }
    char err2[256];
    piv_image_t *img = piv_image_load (unknown, 0, 0, err2, sizeof err2);
    fflush (stderr);
    dup2 (saved, 2);
    close (saved);
    for (int i = 0; i < 5; i++)
        ck_assert_msg (strstr (err[i], bad[i]) && !strchr (err[i], '\n'), "'%s'", err[i]);
    ck_assert_msg (img != NULL, "%s", err2);
    piv_image_destroy (&img);
    size_t loglen = 0;
    char *text = tu_slurp (log, &loglen);
    ck_assert_ptr_nonnull (text);
    ck_assert_msg (loglen == 0, "libtiff printed: %s", text);
    free (text);
}
END_TEST

typedef struct {
    const char *good, *bad;  // files to load, one loads and one does not
    int failures;            // wrong outcomes seen by the thread
} s_worker_t;

static void *
s_worker (void *arg)
{
    s_worker_t *job = arg;
    for (int i = 0; i < 30; i++) {
        char err[256] = "";
        piv_image_t *img = piv_image_load (job->good, 0, 0, err, sizeof err);
        if (!img || piv_image_width (img) != 37)
            job->failures++;
        piv_image_destroy (&img);
        img = piv_image_load (job->bad, 0, 0, err, sizeof err);
        if (img || !strstr (err, job->bad) || !strstr (err, "truncated or corrupt"))
            job->failures++;
        piv_image_destroy (&img);
    }
    return NULL;
}

START_TEST (loads_from_several_threads_with_errors_kept_apart)
{
    s_worker_t jobs[4];
    char names[4][2][64];
    for (int t = 0; t < 4; t++) {
        snprintf (names[t][0], sizeof names[t][0], "good%d.tif", t);
        snprintf (names[t][1], sizeof names[t][1], "bad%d.tif", t);
        jobs[t].good = strdup (tu_path (s_dir, names[t][0]));
        jobs[t].bad = strdup (tu_path (s_dir, names[t][1]));
        jobs[t].failures = 0;
        s_write_grey8 (jobs[t].good, 37, 29);
        size_t len;
        unsigned char *raw = s_raw_grey8 (40, 40, 4, 0, &len);
        tu_spit (jobs[t].bad, raw, len - 700);
        free (raw);
    }
    pthread_t tid[4];
    for (int t = 0; t < 4; t++)
        ck_assert (pthread_create (&tid[t], NULL, s_worker, &jobs[t]) == 0);
    for (int t = 0; t < 4; t++) {
        pthread_join (tid[t], NULL);
        ck_assert_int_eq (jobs[t].failures, 0);
        free ((char *) jobs[t].good);
        free ((char *) jobs[t].bad);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Orientation, and files refused before they are read (issue 13)

// Where stored row r, column c of a sw x sh raster is seen under
// Orientation o (TIFF 6.0), in the meant image.
static void
s_seen (int o, int sw, int sh, int r, int c, int *x, int *y)
{
    switch (o) {
    case 2: *x = sw - 1 - c, *y = r; break;
    case 3: *x = sw - 1 - c, *y = sh - 1 - r; break;
    case 4: *x = c, *y = sh - 1 - r; break;
    case 5: *x = r, *y = c; break;
    case 6: *x = sh - 1 - r, *y = c; break;
    case 7: *x = sh - 1 - r, *y = sw - 1 - c; break;
    case 8: *x = r, *y = sw - 1 - c; break;
    default: *x = c, *y = r; break;
    }
}

// The meant image: W x H, pixel (x, y) = 1 + x + 10 y (all distinct, < 256).
#define OW 7
#define OH 5

START_TEST (honours_the_orientation_tag_for_every_sample_kind)
{
    static uint16_t cmap[3 * 256];
    for (int i = 0; i < 256; i++)
        cmap[i] = cmap[256 + i] = cmap[512 + i] = (uint16_t) (i * 257);  // grey palette
    const struct {
        const char *kind;
        int bps, spp, photometric, tiled;
        int scale;  // stored value = meant * scale
    } kinds[] = {
        {"grey8 strips", 8, 1, PHOTOMETRIC_MINISBLACK, 0, 1},
        {"grey16 tiles", 16, 1, PHOTOMETRIC_MINISBLACK, 1, 100},
        {"palette", 8, 1, PHOTOMETRIC_PALETTE, 0, 1},
        {"rgb", 8, 3, PHOTOMETRIC_RGB, 0, 1},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int o = 1; o <= 8; o++) {
            int sw = o >= 5 ? OH : OW, sh = o >= 5 ? OW : OH;
            size_t bytes = (size_t) kinds[k].bps / 8;
            unsigned char *s = calloc ((size_t) sw * sh * kinds[k].spp, bytes);
            for (int r = 0; r < sh; r++)
                for (int c = 0; c < sw; c++) {
                    int x, y;
                    s_seen (o, sw, sh, r, c, &x, &y);
                    unsigned v = (unsigned) ((1 + x + 10 * y) * kinds[k].scale);
                    for (int i = 0; i < kinds[k].spp; i++) {
                        size_t at = ((size_t) r * sw + c) * kinds[k].spp + i;
                        if (bytes == 1)
                            s[at] = (unsigned char) v;
                        else
                            ((uint16_t *) s)[at] = (uint16_t) v;
                    }
                }
            s_layout_t lay = {.w = sw, .h = sh, .bps = kinds[k].bps, .spp = kinds[k].spp,
                              .photometric = kinds[k].photometric, .rps = 2,
                              .tile_w = kinds[k].tiled ? 16 : 0, .tile_h = kinds[k].tiled ? 16 : 0,
                              .cmap = kinds[k].photometric == PHOTOMETRIC_PALETTE ? cmap : NULL,
                              .orientation = o};
            const char *path = tu_path (s_dir, "oriented.tif");
            // Two pages, both oriented: the pair loader honours it too.
            const void *pages[2] = {s, s};
            s_layout_t lays[2] = {lay, lay};
            s_write_pages (path, 2, lays, pages);
            char err[256] = "";
            piv_image_t *a = NULL, *b = NULL;
            ck_assert_msg (piv_image_load_pair (path, NULL, 0, &a, &b, err, sizeof err) == 0,
                           "%s orientation %d: %s", kinds[k].kind, o, err);
            for (int f = 0; f < 2; f++) {
                const piv_image_t *img = f ? b : a;
                ck_assert_msg (piv_image_width (img) == OW && piv_image_height (img) == OH,
                               "%s orientation %d: %dx%d", kinds[k].kind, o,
                               piv_image_width (img), piv_image_height (img));
                const float *d = piv_image_cdata (img);
                for (int y = 0; y < OH; y++)
                    for (int x = 0; x < OW; x++)
                        ck_assert_msg (d[y * OW + x] == (float) ((1 + x + 10 * y) * kinds[k].scale),
                                       "%s orientation %d: pixel (%d, %d) is %g", kinds[k].kind,
                                       o, x, y, d[y * OW + x]);
            }
            piv_image_destroy (&a);
            piv_image_destroy (&b);
            free (s);
        }
}
END_TEST

// Writes 'img' as an 8-bit greyscale TIFF stored rotated by 180 degrees
// (its last pixel first), Orientation 3 saying so.
static void
s_write_rotated (const char *path, const piv_image_t *img)
{
    int w = piv_image_width (img), h = piv_image_height (img);
    unsigned char *s = malloc ((size_t) w * h);
    const float *d = piv_image_cdata (img);
    for (size_t i = 0; i < (size_t) w * h; i++)
        s[i] = (unsigned char) d[(size_t) w * h - 1 - i];
    s_layout_t lay = {.w = w, .h = h, .bps = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
                      .orientation = ORIENTATION_BOTRIGHT};
    s_write_tiff (path, &lay, s);
    free (s);
}

START_TEST (a_greyscale_pair_stored_rotated_180_degrees_gives_the_right_displacement)
{
    char prefix[4096], out[4096];
    snprintf (prefix, sizeof prefix, "%s", tu_path (s_dir, "s"));
    char *argv[] = {(char *) tu_bin ("pivfarm-synth"), "-s", "256x256", "-o", prefix, NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 60), 0);
    char err[256] = "";
    piv_image_t *a = NULL, *b = NULL;
    char pa[4200], pb[4200], ra[4200], rb[4200];
    snprintf (pa, sizeof pa, "%s_a.tif", prefix);
    snprintf (pb, sizeof pb, "%s_b.tif", prefix);
    snprintf (ra, sizeof ra, "%s_ra.tif", prefix);
    snprintf (rb, sizeof rb, "%s_rb.tif", prefix);
    ck_assert_msg (piv_image_load_pair (pa, pb, 0, &a, &b, err, sizeof err) == 0, "%s", err);
    s_write_rotated (ra, a);
    s_write_rotated (rb, b);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    ck_assert_msg (piv_image_load_pair (ra, rb, 0, &a, &b, err, sizeof err) == 0, "%s", err);
    piv_settings_t s;
    piv_settings_init (&s);
    ck_assert (piv_settings_set_passes (&s, "32,16", err, sizeof err) == 0);
    piv_t *engine = piv_new (&s, err, sizeof err);
    ck_assert_msg (engine != NULL, "%s", err);
    piv_field_t *field = piv_process (engine, a, b, err, sizeof err);
    ck_assert_msg (field != NULL, "%s", err);
    piv_field_stats_t st;
    piv_field_stats (field, PIV_FLAG_VALID, &st);
    printf ("rotated 180: mean u %.3f v %.3f (truth 3.3, -1.7)\n", st.mean_u, st.mean_v);
    ck_assert_msg (fabs (st.mean_u - 3.3) < 0.1 && fabs (st.mean_v + 1.7) < 0.1,
                   "mean (%.3f, %.3f), not (3.3, -1.7)", st.mean_u, st.mean_v);
    piv_field_destroy (&field);
    piv_destroy (&engine);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
}
END_TEST

START_TEST (refuses_a_fifo_a_sparse_and_an_oversized_file_before_reading_them)
{
    char err[512] = "";
    // A FIFO with no writer: refused at once (a blocking open would wait
    // for ever; the test's timeout says so).
    const char *fifo = tu_path (s_dir, "fifo.tif");
    ck_assert (mkfifo (fifo, 0644) == 0);
    ck_assert_ptr_null (piv_image_load (fifo, 0, 0, err, sizeof err));
    ASSERT_ERR (err, fifo, "not a regular file (a FIFO)");
    // A real frame followed by 16 MiB of holes.
    const char *sparse = tu_path (s_dir, "sparse.tif");
    s_write_grey8 (sparse, 64, 64);
    ck_assert (truncate (sparse, 16 << 20) == 0);
    ck_assert_ptr_null (piv_image_load (sparse, 0, 0, err, sizeof err));
    ASSERT_ERR (err, sparse, "sparse file");
    // Over the caller's size limit, through a descriptor it opened.
    const char *big = tu_path (s_dir, "big.tif");
    s_write_grey8 (big, 64, 64);
    int fd = open (big, O_RDONLY);
    ck_assert (fd >= 0);
    ck_assert_ptr_null (piv_image_load_fd (fd, big, 0, 0, 1024, err, sizeof err));
    ASSERT_ERR (err, big, "exceeds the limit of 1024 bytes");
    piv_image_t *img = piv_image_load_fd (fd, big, 0, 0, 1 << 20, err, sizeof err);
    ck_assert_msg (img != NULL, "%s", err);
    s_assert_ramp8 (img, 64, 64);
    piv_image_destroy (&img);
    ck_assert (fcntl (fd, F_GETFD) != -1);  // still the caller's
    close (fd);
    // Too many pixels by its header: refused with not a byte read whole
    // (the test seam allows none).
    const char *huge = tu_path (s_dir, "huge.tif");
    s_write_grey8 (huge, 16, 16);
    s_patch_file (huge, TIFFTAG_IMAGEWIDTH, 100000);
    s_patch_file (huge, TIFFTAG_IMAGELENGTH, 100000);
    piv_image_test_read_limit (0);
    ck_assert_ptr_null (piv_image_load (huge, 0, 0, err, sizeof err));
    piv_image_test_read_limit (SIZE_MAX);
    ASSERT_ERR (err, huge, "exceeds the limit of 67108864 pixels");
}
END_TEST

START_TEST (loads_a_pair_from_descriptors_the_caller_opened)
{
    const char *pa = tu_path (s_dir, "a.tif"), *pb = tu_path (s_dir, "b.tif");
    s_write_grey8 (pa, 30, 20);
    s_write_grey8 (pb, 30, 20);
    int fa = open (pa, O_RDONLY), fb = open (pb, O_RDONLY);
    ck_assert (fa >= 0 && fb >= 0);
    lseek (fa, 7, SEEK_SET);  // read from the start whatever the position
    char err[256] = "";
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_msg (piv_image_load_pair_fd (fa, pa, fb, pb, 0, 0, &a, &b, err, sizeof err) == 0,
                   "%s", err);
    s_assert_ramp8 (a, 30, 20);
    s_assert_ramp8 (b, 30, 20);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    close (fa);
    close (fb);
}
END_TEST

// Frames of every sample kind (issue 17): float, packed and 12-in-16 bit,
// signed; other formats named when refused

// Packs n values per row, 'bits' each, MSB first, rows padded to a byte,
// as TIFF stores them: the test's own packer, independent of the reader's.
static unsigned char *
s_pack (const unsigned *v, int w, int h, int bits)
{
    size_t row_bytes = ((size_t) w * bits + 7) / 8;
    unsigned char *out = calloc ((size_t) h, row_bytes);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int b = 0; b < bits; b++)
                if (v[y * w + x] >> (bits - 1 - b) & 1) {
                    size_t bit = (size_t) x * bits + b;
                    out[y * row_bytes + bit / 8] |= (unsigned char) (0x80 >> (bit % 8));
                }
    return out;
}

// Loads 'path' page 0, failing the test with the reason if it cannot.
static piv_image_t *
s_load_ok (const char *path)
{
    char err[256] = "";
    piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
    ck_assert_msg (img != NULL, "'%s': %s", path, err);
    return img;
}

START_TEST (loads_float_frames_into_the_16bit_range)
{
    enum { W = 8, H = 8, N = W * H };
    float f[N];
    double d[N];
    const char *path = tu_path (s_dir, "f.tif");
    s_layout_t lay = {.w = W, .h = H, .bps = 32, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
                      .rps = 3, .format = SAMPLEFORMAT_IEEEFP};
    // Each case: samples from i (0..63), and what pixel i must become.
    const struct {
        const char *what;
        double a, b;         // sample = a + b * i
        double smin, smax;   // declared range (none when equal)
        int photometric, bps;
        double ga, gb;       // pixel = ga + gb * i
    } cases[] = {
        {"[0, 1] float32", 0, 1.0 / 63, 0, 0, PHOTOMETRIC_MINISBLACK, 32, 0, 65535.0 / 63},
        {"[0, 1] float64", 0, 1.0 / 63, 0, 0, PHOTOMETRIC_MINISBLACK, 64, 0, 65535.0 / 63},
        {"camera counts", 10, 60, 0, 0, PHOTOMETRIC_MINISBLACK, 32, 10, 60},
        {"own min-max", -1, 4.0 / 63, 0, 0, PHOTOMETRIC_MINISBLACK, 32, 0, 65535.0 / 63},
        {"declared range", -1, 4.0 / 63, -5, 5, PHOTOMETRIC_MINISBLACK, 32, 4 * 6553.5,
         4.0 / 63 * 6553.5},
        {"min-is-white [0, 1]", 0, 1.0 / 63, 0, 0, PHOTOMETRIC_MINISWHITE, 32, 65535,
         -65535.0 / 63},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < N; i++) {
            f[i] = (float) (cases[c].a + cases[c].b * i);
            d[i] = cases[c].a + cases[c].b * i;
        }
        lay.bps = cases[c].bps;
        lay.photometric = cases[c].photometric;
        lay.smin = cases[c].smin, lay.smax = cases[c].smax;
        s_write_tiff (path, &lay, lay.bps == 32 ? (const void *) f : (const void *) d);
        piv_image_t *img = s_load_ok (path);
        ck_assert_int_eq (piv_image_bits (img), cases[c].bps);
        const float *p = piv_image_cdata (img);
        for (int i = 0; i < N; i++) {
            double want = cases[c].ga + cases[c].gb * i;
            ck_assert_msg (fabs (p[i] - want) <= 0.02, "%s: pixel %d is %.3f, not %.3f",
                           cases[c].what, i, p[i], want);
        }
        piv_image_destroy (&img);
    }
}
END_TEST

START_TEST (refuses_nan_and_infinite_float_pixels_naming_the_count)
{
    float f[8 * 8];
    for (int i = 0; i < 64; i++)
        f[i] = (float) i;
    f[3] = NAN, f[17] = NAN, f[40] = INFINITY, f[63] = -INFINITY;
    const char *path = tu_path (s_dir, "nan.tif");
    s_layout_t lay = {.w = 8, .h = 8, .bps = 32, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
                      .rps = 8, .format = SAMPLEFORMAT_IEEEFP};
    s_write_tiff (path, &lay, f);
    char err[256] = "";
    ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
    ASSERT_ERR (err, path, "4 of 64 pixels are NaN or infinite");
}
END_TEST

START_TEST (loads_packed_12_and_10_bit_and_signed_samples)
{
    enum { W = 5, H = 4, N = W * H };  // odd width: packed rows end mid-byte
    unsigned v[N];
    const char *path = tu_path (s_dir, "k.tif");
    for (int bits = 10; bits <= 12; bits += 2) {
        for (int i = 0; i < N; i++)
            v[i] = (unsigned) (i * 811 + 7) % (1u << bits);
        unsigned char *packed = s_pack (v, W, H, bits);
        s_layout_t lay = {.w = W, .h = H, .bps = bits, .spp = 1,
                          .photometric = PHOTOMETRIC_MINISBLACK, .rps = 3};
        s_write_tiff (path, &lay, packed);
        free (packed);
        piv_image_t *img = s_load_ok (path);
        for (int i = 0; i < N; i++)
            ck_assert_msg (piv_image_cdata (img)[i] == (float) v[i], "%d-bit pixel %d is %g, not %u",
                           bits, i, piv_image_cdata (img)[i], v[i]);
        piv_image_destroy (&img);
    }
    int16_t s16[N];
    int8_t s8[N];
    for (int i = 0; i < N; i++) {
        s16[i] = (int16_t) (-32768 + i * 3449);
        s8[i] = (int8_t) (-128 + i * 13);
    }
    s_layout_t lay = {.w = W, .h = H, .bps = 16, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
                      .rps = 2, .format = SAMPLEFORMAT_INT};
    s_write_tiff (path, &lay, s16);
    piv_image_t *img = s_load_ok (path);
    for (int i = 0; i < N; i++)
        ck_assert_msg (piv_image_cdata (img)[i] == (float) (s16[i] + 32768),
                       "int16 pixel %d is %g, not %d", i, piv_image_cdata (img)[i], s16[i] + 32768);
    piv_image_destroy (&img);
    lay.bps = 8;
    lay.tile_w = lay.tile_h = 16;
    s_write_tiff (path, &lay, s8);
    img = s_load_ok (path);
    for (int i = 0; i < N; i++)
        ck_assert_msg (piv_image_cdata (img)[i] == (float) (s8[i] + 128),
                       "int8 pixel %d is %g, not %d", i, piv_image_cdata (img)[i], s8[i] + 128);
    piv_image_destroy (&img);
}
END_TEST

START_TEST (honours_the_orientation_tag_for_float_packed_and_signed_samples)
{
    const struct {
        const char *kind;
        int bps, format, tiled;
    } kinds[] = {
        {"float32", 32, SAMPLEFORMAT_IEEEFP, 0},      {"float32 tiles", 32, SAMPLEFORMAT_IEEEFP, 1},
        {"float64", 64, SAMPLEFORMAT_IEEEFP, 0},      {"packed 12", 12, SAMPLEFORMAT_UINT, 0},
        {"int16 tiles", 16, SAMPLEFORMAT_INT, 1},     {"12 in 16", 16, SAMPLEFORMAT_UINT, 0},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int o = 1; o <= 8; o++) {
            int sw = o >= 5 ? OH : OW, sh = o >= 5 ? OW : OH;
            // Meant pixel (x, y) is 1 + x + 10 y: in the camera range, so a
            // float frame keeps it; int16 stores it minus 32768.
            unsigned v[OW * OH];
            unsigned char *s = calloc ((size_t) sw * sh, 8);
            for (int r = 0; r < sh; r++)
                for (int c = 0; c < sw; c++) {
                    int x, y, at = r * sw + c;
                    s_seen (o, sw, sh, r, c, &x, &y);
                    v[at] = (unsigned) (1 + x + 10 * y);
                    if (kinds[k].bps == 32)
                        ((float *) s)[at] = (float) v[at];
                    else if (kinds[k].bps == 64)
                        ((double *) s)[at] = v[at];
                    else if (kinds[k].format == SAMPLEFORMAT_INT)
                        ((int16_t *) s)[at] = (int16_t) ((int) v[at] - 32768);
                    else
                        ((uint16_t *) s)[at] = (uint16_t) v[at];
                }
            if (kinds[k].bps == 12) {
                free (s);
                s = s_pack (v, sw, sh, 12);
            }
            s_layout_t lay = {.w = sw, .h = sh, .bps = kinds[k].bps, .spp = 1,
                              .photometric = PHOTOMETRIC_MINISBLACK, .rps = 2,
                              .tile_w = kinds[k].tiled ? 16 : 0, .tile_h = kinds[k].tiled ? 16 : 0,
                              .format = kinds[k].format, .orientation = o};
            const char *path = tu_path (s_dir, "oriented.tif");
            s_write_tiff (path, &lay, s);
            free (s);
            piv_image_t *img = s_load_ok (path);
            ck_assert_msg (piv_image_width (img) == OW && piv_image_height (img) == OH,
                           "%s orientation %d: %dx%d", kinds[k].kind, o, piv_image_width (img),
                           piv_image_height (img));
            const float *d = piv_image_cdata (img);
            for (int y = 0; y < OH; y++)
                for (int x = 0; x < OW; x++)
                    ck_assert_msg (d[y * OW + x] == (float) (1 + x + 10 * y),
                                   "%s orientation %d: pixel (%d, %d) is %g", kinds[k].kind, o,
                                   x, y, d[y * OW + x]);
            piv_image_destroy (&img);
        }
}
END_TEST

// Writes 8-bit frame 'img' (values 0..255) as sample kind 'kind' of the
// test below, Orientation 3 (stored rotated 180 degrees) when 'rotate'.
static void
s_write_kind (const char *path, const piv_image_t *img, int kind, int rotate)
{
    int w = piv_image_width (img), h = piv_image_height (img);
    size_t n = (size_t) w * h;
    const float *d = piv_image_cdata (img);
    unsigned *u = malloc (n * sizeof *u);
    unsigned char *s = malloc (n * 8);
    s_layout_t lay = {.w = w, .h = h, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
                      .orientation = rotate ? ORIENTATION_BOTRIGHT : 0};
    for (size_t i = 0; i < n; i++) {
        float v = d[rotate ? n - 1 - i : i];
        u[i] = (unsigned) v;
        switch (kind) {
        case 0: s[i] = (unsigned char) v, lay.bps = 8; break;
        case 1: ((uint16_t *) s)[i] = (uint16_t) (v * 16), lay.bps = 16; break;  // 12 in 16
        case 2: u[i] *= 16, lay.bps = 12; break;                                // 12 packed
        case 3: ((uint16_t *) s)[i] = (uint16_t) (v * 257), lay.bps = 16; break;
        case 4:
            ((int16_t *) s)[i] = (int16_t) (v * 257 - 32768);
            lay.bps = 16, lay.format = SAMPLEFORMAT_INT;
            break;
        case 5:
            ((float *) s)[i] = v / 255.0f;  // normalised to [0, 1]
            lay.bps = 32, lay.format = SAMPLEFORMAT_IEEEFP;
            break;
        default:
            ((double *) s)[i] = v * 3.0 - 100;  // an arbitrary range: min-max
            lay.bps = 64, lay.format = SAMPLEFORMAT_IEEEFP;
            break;
        }
    }
    if (kind == 2) {
        free (s);
        s = s_pack (u, w, h, 12);
    }
    s_write_tiff (path, &lay, s);
    free (s);
    free (u);
}

START_TEST (the_same_pair_in_every_sample_kind_gives_the_same_field)
{
    static const char *const kinds[] = {"8-bit",       "12 in 16-bit", "12-bit packed",
                                        "16-bit",      "int16",        "float32 [0, 1]",
                                        "float64 min-max"};
    char prefix[4096], out[4096];
    snprintf (prefix, sizeof prefix, "%s", tu_path (s_dir, "s"));
    char *argv[] = {(char *) tu_bin ("pivfarm-synth"), "-s", "256x256", "-o", prefix, NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 60), 0);
    char err[256] = "", pa[4200], pb[4200], ka[4200], kb[4200];
    snprintf (pa, sizeof pa, "%s_a.tif", prefix);
    snprintf (pb, sizeof pb, "%s_b.tif", prefix);
    piv_image_t *a8 = NULL, *b8 = NULL;
    ck_assert_msg (piv_image_load_pair (pa, pb, 0, &a8, &b8, err, sizeof err) == 0, "%s", err);
    piv_settings_t s;
    piv_settings_init (&s);
    ck_assert (piv_settings_set_passes (&s, "32,16", err, sizeof err) == 0);
    piv_t *engine = piv_new (&s, err, sizeof err);
    ck_assert_msg (engine != NULL, "%s", err);
    piv_field_t *ref = NULL;
    int nk = (int) (sizeof kinds / sizeof kinds[0]);
    for (int k = 0; k < 2 * nk; k++) {
        int kind = k % nk, rotate = k >= nk;
        snprintf (ka, sizeof ka, "%s_k%d_a.tif", prefix, k);
        snprintf (kb, sizeof kb, "%s_k%d_b.tif", prefix, k);
        s_write_kind (ka, a8, kind, rotate);
        s_write_kind (kb, b8, kind, rotate);
        piv_image_t *a = NULL, *b = NULL;
        ck_assert_msg (piv_image_load_pair (ka, kb, 0, &a, &b, err, sizeof err) == 0, "%s: %s",
                       kinds[kind], err);
        piv_field_t *field = piv_process (engine, a, b, err, sizeof err);
        ck_assert_msg (field != NULL, "%s: %s", kinds[kind], err);
        piv_field_stats_t st;
        piv_field_stats (field, PIV_FLAG_VALID, &st);
        printf ("%s%s: mean u %.4f v %.4f (truth 3.3, -1.7)\n", kinds[kind],
                rotate ? " rotated 180" : "", st.mean_u, st.mean_v);
        ck_assert_msg (fabs (st.mean_u - 3.3) < 0.1 && fabs (st.mean_v + 1.7) < 0.1,
                       "%s%s: mean (%.3f, %.3f), not (3.3, -1.7)", kinds[kind],
                       rotate ? " rotated 180" : "", st.mean_u, st.mean_v);
        if (!ref)
            ref = field;
        else {
            float worst = 0;
            ck_assert_int_eq (field->nx * field->ny, ref->nx * ref->ny);
            for (int i = 0; i < ref->nx * ref->ny; i++) {
                ck_assert_msg (field->flags[i] == ref->flags[i], "%s: vector %d flags %u, not %u",
                               kinds[kind], i, field->flags[i], ref->flags[i]);
                float e = fmaxf (fabsf (field->u[i] - ref->u[i]), fabsf (field->v[i] - ref->v[i]));
                worst = e > worst ? e : worst;
            }
            printf ("%s%s: largest difference from 8-bit %.5f px\n", kinds[kind],
                    rotate ? " rotated 180" : "", worst);
            ck_assert_msg (worst <= 0.01f, "%s%s: a vector differs by %.4f px from 8-bit's",
                           kinds[kind], rotate ? " rotated 180" : "", worst);
            piv_field_destroy (&field);
        }
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    piv_field_destroy (&ref);
    piv_destroy (&engine);
    piv_image_destroy (&a8);
    piv_image_destroy (&b8);
}
END_TEST

// 8-bit frames keep their bytes, the engine reads its windows from them:
// the same field to the bit as from the same frames as floats (single
// pass, multipass, two threads), and floats are made only when asked for.
START_TEST (eight_bit_frames_are_correlated_from_their_bytes_as_from_floats)
{
    char prefix[4096], out[4096];
    snprintf (prefix, sizeof prefix, "%s", tu_path (s_dir, "e"));
    char *argv[] = {(char *) tu_bin ("pivfarm-synth"), "-s", "320x256", "-o", prefix, NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 60), 0);
    char err[256] = "", pa[4200], pb[4200];
    snprintf (pa, sizeof pa, "%s_a.tif", prefix);
    snprintf (pb, sizeof pb, "%s_b.tif", prefix);
    static const char *const passes[] = {"32", "64,32,16"};
    for (int t = 0; t < 4; t++) {
        piv_image_t *a = NULL, *b = NULL, *fa = NULL, *fb = NULL;
        ck_assert_msg (piv_image_load_pair (pa, pb, 0, &a, &b, err, sizeof err) == 0, "%s", err);
        ck_assert_msg (piv_image_load_pair (pa, pb, 0, &fa, &fb, err, sizeof err) == 0, "%s", err);
        ck_assert (piv_image_bytes (a) != NULL && piv_image_bytes (b) != NULL);
        // The same pixels as floats; piv_image_data drops the bytes.
        const unsigned char *bytes = piv_image_bytes (fa);
        const float *floats = piv_image_cdata (fa);
        for (int k = 0; k < 320 * 256; k++)
            ck_assert_msg (floats[k] == bytes[k], "pixel %d: %g for byte %u", k, floats[k],
                           bytes[k]);
        ck_assert (piv_image_data (fa) != NULL && piv_image_data (fb) != NULL);
        ck_assert (piv_image_bytes (fa) == NULL && piv_image_bytes (fb) == NULL);
        piv_settings_t s;
        piv_settings_init (&s);
        s.threads = 1 + t / 2;
        ck_assert (piv_settings_set_passes (&s, passes[t % 2], err, sizeof err) == 0);
        if (t % 2 == 0)
            s.final_iterations = 1;  // one run: no deformation
        piv_t *engine = piv_new (&s, err, sizeof err);
        ck_assert_msg (engine != NULL, "%s", err);
        piv_field_t *f8 = piv_process (engine, a, b, err, sizeof err);
        piv_field_t *ff = piv_process (engine, fa, fb, err, sizeof err);
        ck_assert (f8 && ff);
        long n = (long) f8->nx * f8->ny;
        ck_assert_int_eq (n, (long) ff->nx * ff->ny);
        ck_assert_msg (memcmp (f8->u, ff->u, n * sizeof (float)) == 0
                           && memcmp (f8->v, ff->v, n * sizeof (float)) == 0
                           && memcmp (f8->flags, ff->flags, n * sizeof *f8->flags) == 0,
                       "passes %s, %d thread(s): the field from bytes differs", passes[t % 2],
                       s.threads);
        piv_field_stats_t st;
        piv_field_stats (f8, PIV_FLAG_VALID, &st);
        ck_assert_msg (fabs (st.mean_u - 3.3) < 0.05 && fabs (st.mean_v + 1.7) < 0.05,
                       "mean (%.3f, %.3f)", st.mean_u, st.mean_v);
        // A single pass never needed the frames as floats.
        if (t % 2 == 0)
            ck_assert (((const struct _piv_image_t *) a)->floats == 0);
        piv_field_destroy (&f8);
        piv_field_destroy (&ff);
        piv_destroy (&engine);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
        piv_image_destroy (&fa);
        piv_image_destroy (&fb);
    }
    // Made in memory: no bytes. A blank 8-bit pair (every pixel 37) read
    // from its bytes: every vector invalid, as from floats.
    piv_image_t *blank = piv_image_new (128, 96);
    ck_assert (piv_image_bytes (blank) == NULL);
    float *px = piv_image_data (blank);
    for (int k = 0; k < 128 * 96; k++)
        px[k] = 37;
    const piv_image_t *frames[1] = {blank};
    char path[4200];
    snprintf (path, sizeof path, "%s_blank.tif", prefix);
    ck_assert_msg (piv_image_save (path, frames, 1, 8, err, sizeof err) == 0, "%s", err);
    piv_image_destroy (&blank);
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_msg (piv_image_load_pair (path, path, 0, &a, &b, err, sizeof err) == 0, "%s", err);
    ck_assert (piv_image_bytes (a) != NULL);
    piv_settings_t s;
    piv_settings_init (&s);
    s.final_iterations = 1;
    ck_assert (piv_settings_set_passes (&s, "16", err, sizeof err) == 0);
    piv_t *engine = piv_new (&s, err, sizeof err);
    piv_field_t *f = piv_process (engine, a, b, err, sizeof err);
    ck_assert_msg (f != NULL, "%s", err);
    for (int k = 0; k < f->nx * f->ny; k++)
        ck_assert_msg (f->flags[k] == PIV_FLAG_INVALID, "vector %d of a blank pair: flag %u", k,
                       f->flags[k]);
    piv_field_destroy (&f);
    piv_destroy (&engine);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
}
END_TEST

START_TEST (names_the_format_of_a_file_that_is_not_a_tiff_and_how_to_convert_it)
{
    static const struct {
        const char *name;
        const char *bytes;
        size_t len;
        const char *says;
    } files[] = {
        {"f.png", "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16, "(a PNG image): convert it, e.g. with "
                                                       "ImageMagick 'convert %s %s/f.tif'"},
        {"f.jpg", "\xff\xd8\xff\xe0\0\x10JFIF\0\1", 12, "(a JPEG image): convert it"},
        {"f.bmp", "BM\x36\x10\0\0\0\0\0\0\x36\0\0\0", 14, "(a BMP image): convert it"},
        {"f.tif", "GIF89a\x10\0\x10\0", 10, "(a GIF image): convert it, e.g. with ImageMagick "
                                            "'convert %s %s/f.tif'"},
        {"f.npy", "\x93NUMPY\1\0v\0", 10, "(a NumPy array): convert it, e.g. with Python "
                                          "tifffile"},
        {"notes.txt", "x y u v\n1 2 3 4\n", 16, "(it is text)"},
        {"f.raw", "\x01\x02\x03\x04\x05\x06\x07\x08\x09", 9, "(unknown format): convert it"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4200], says[9000], err[512] = "";
        snprintf (path, sizeof path, "%s", tu_path (s_dir, files[i].name));
        FILE *f = fopen (path, "wb");
        ck_assert (f && fwrite (files[i].bytes, 1, files[i].len, f) == files[i].len);
        fclose (f);
        snprintf (says, sizeof says, files[i].says, path, s_dir);
        ck_assert_ptr_null (piv_image_load (path, 0, 0, err, sizeof err));
        ASSERT_ERR (err, path, "is not a TIFF file");
        ASSERT_ERR (err, path, says);
    }
}
END_TEST

// Loading at the engine's speed (issue 18): a loader's frames reloaded in
// place, strips converted straight from the file, big buffers populated

// A w x h frame of 'bits' (8 or 16) written as TIFF at 'path', pixel (x, y)
// = s_frame_value, stored with libtiff in 'mode' ("w": this host's order,
// "wb": big-endian), 'compression' and 'fill' order, 16 rows a strip.
static float s_frame_value (int x, int y, int bits, int seed);
static void
s_write_frame (const char *path, int w, int h, int bits, int seed, const char *mode,
               int compression, int fill)
{
    size_t bpp = (size_t) bits / 8;
    unsigned char *px = malloc ((size_t) w * h * bpp);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint16_t v = (uint16_t) s_frame_value (x, y, bits, seed);
            if (bits == 8)
                px[(size_t) y * w + x] = (unsigned char) v;
            else
                memcpy (px + 2 * ((size_t) y * w + x), &v, 2);
        }
    s_layout_t lay = {.w = w, .h = h, .bps = bits, .spp = 1,
                      .photometric = PHOTOMETRIC_MINISBLACK, .rps = 16, .mode = mode,
                      .compression = compression, .fill = fill};
    s_write_tiff (path, &lay, px);
    free (px);
}

// What s_write_frame wrote at (x, y).
static float
s_frame_value (int x, int y, int bits, int seed)
{
    unsigned top = bits == 8 ? 255u : 65535u;
    unsigned v = (unsigned) (7 * x + 3 * y + seed) & top;
    return bits == 8 ? (float) v : (float) (uint16_t) (v * 13u);
}

static void
s_assert_frame (const piv_image_t *img, int w, int h, int bits, int seed, const char *what)
{
    ck_assert_msg (piv_image_width (img) == w && piv_image_height (img) == h,
                   "%s: %dx%d, expected %dx%d", what, piv_image_width (img),
                   piv_image_height (img), w, h);
    const float *d = piv_image_cdata (img);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            ck_assert_msg (d[(size_t) y * w + x] == s_frame_value (x, y, bits, seed),
                           "%s: pixel (%d, %d) is %g, expected %g", what, x, y,
                           d[(size_t) y * w + x], s_frame_value (x, y, bits, seed));
}

START_TEST (a_loader_reloads_frames_of_any_size_in_place_as_a_fresh_load_reads_them)
{
    // Sizes up and down (a buffer grown, then reused for less), 8 and 16
    // bit, one frame over 1 MiB of floats (a populated mapping), odd widths
    // (rows starting off the vector alignment).
    static const struct {
        int w, h, bits;
    } pairs[] = {{64, 48, 8}, {203, 67, 16}, {1031, 300, 8}, {33, 9, 8}, {203, 67, 16}};
    piv_loader_t *loader = piv_loader_new ();
    ck_assert (loader != NULL);
    piv_image_t *first_a = NULL;
    for (int i = 0; i < (int) (sizeof pairs / sizeof pairs[0]); i++) {
        int w = pairs[i].w, h = pairs[i].h, bits = pairs[i].bits;
        const char *pa = tu_path (s_dir, "la.tif"), *pb = tu_path (s_dir, "lb.tif");
        s_write_frame (pa, w, h, bits, i, "w", COMPRESSION_NONE, FILLORDER_MSB2LSB);
        s_write_frame (pb, w, h, bits, i + 100, "w", COMPRESSION_NONE, FILLORDER_MSB2LSB);
        int fa = open (pa, O_RDONLY), fb = open (pb, O_RDONLY);
        char err[256] = "";
        piv_image_t *a = NULL, *b = NULL, *fresh_a = NULL, *fresh_b = NULL;
        ck_assert_msg (piv_loader_pair_fd (loader, fa, pa, fb, pb, 0, 0, &a, &b, err, sizeof err)
                           == 0,
                       "%s", err);
        close (fa);
        close (fb);
        // The same image object every time: reloaded, not made anew.
        if (!first_a)
            first_a = a;
        ck_assert_ptr_eq (a, first_a);
        s_assert_frame (a, w, h, bits, i, "loader A");
        s_assert_frame (b, w, h, bits, i + 100, "loader B");
        ck_assert_int_eq (piv_image_bits (a), bits);
        piv_image_set_populate (i % 2);  // both ways of making fresh buffers
        ck_assert_msg (piv_image_load_pair (pa, pb, 0, &fresh_a, &fresh_b, err, sizeof err) == 0,
                       "%s", err);
        piv_image_set_populate (1);
        size_t n = (size_t) w * h * sizeof (float);
        ck_assert (memcmp (piv_image_cdata (a), piv_image_cdata (fresh_a), n) == 0);
        ck_assert (memcmp (piv_image_cdata (b), piv_image_cdata (fresh_b), n) == 0);
        piv_image_destroy (&fresh_a);
        piv_image_destroy (&fresh_b);
    }
    piv_loader_destroy (&loader);
    ck_assert_ptr_null (loader);
}
END_TEST

START_TEST (a_loader_refuses_a_bad_pair_and_then_loads_the_next_good_one)
{
    const char *pa = tu_path (s_dir, "a.tif"), *pb = tu_path (s_dir, "b.tif");
    const char *pm = tu_path (s_dir, "m.tif");
    s_write_frame (pa, 40, 30, 8, 1, "w", COMPRESSION_NONE, FILLORDER_MSB2LSB);
    s_write_frame (pb, 41, 30, 8, 2, "w", COMPRESSION_NONE, FILLORDER_MSB2LSB);
    piv_loader_t *loader = piv_loader_new ();
    char err[256] = "";
    piv_image_t *a = NULL, *b = NULL;
    int fa = open (pa, O_RDONLY), fb = open (pb, O_RDONLY);
    ck_assert_int_eq (piv_loader_pair_fd (loader, fa, pa, fb, pb, 0, 0, &a, &b, err, sizeof err),
                      -1);
    ck_assert_ptr_null (a);
    ck_assert_ptr_null (b);
    ASSERT_ERR (err, pb, "41x30");
    close (fb);
    // Frame B a text file: refused naming it.
    tu_spit (pb, "not a tiff\n", 11);
    fb = open (pb, O_RDONLY);
    ck_assert_int_eq (piv_loader_pair_fd (loader, fa, pa, fb, pb, 0, 0, &a, &b, err, sizeof err),
                      -1);
    ASSERT_ERR (err, pb, "not a TIFF");
    close (fa);
    close (fb);
    // Then a two-page file (fd_b < 0): both pages, right values.
    unsigned char *p0 = s_ramp8 (50, 20), *p1 = s_ramp8 (50, 20);
    s_layout_t lay[2] = {{.w = 50, .h = 20, .bps = 8, .spp = 1,
                          .photometric = PHOTOMETRIC_MINISBLACK, .rps = 4},
                         {.w = 50, .h = 20, .bps = 8, .spp = 1,
                          .photometric = PHOTOMETRIC_MINISBLACK, .rps = 4}};
    const void *pages[2] = {p0, p1};
    s_write_pages (pm, 2, lay, pages);
    int fm = open (pm, O_RDONLY);
    ck_assert_msg (piv_loader_pair_fd (loader, fm, pm, -1, NULL, 0, 0, &a, &b, err, sizeof err)
                       == 0,
                   "%s", err);
    close (fm);
    s_assert_ramp8 (a, 50, 20);
    s_assert_ramp8 (b, 50, 20);
    free (p0);
    free (p1);
    piv_loader_destroy (&loader);
}
END_TEST

START_TEST (strips_big_endian_compressed_or_bit_reversed_load_as_plain_ones)
{
    // Plain strips are converted straight from the file; these others go
    // through libtiff's decoding, and must read the same.
    static const struct {
        const char *mode;
        int compression, fill, bits;
        const char *what;
    } kinds[] = {
        {"w", COMPRESSION_NONE, FILLORDER_MSB2LSB, 8, "8-bit plain"},
        {"w", COMPRESSION_NONE, FILLORDER_MSB2LSB, 16, "16-bit plain"},
        {"wb", COMPRESSION_NONE, FILLORDER_MSB2LSB, 16, "16-bit big-endian"},
        {"wb", COMPRESSION_NONE, FILLORDER_MSB2LSB, 8, "8-bit big-endian"},
        {"w", COMPRESSION_LZW, FILLORDER_MSB2LSB, 8, "8-bit LZW"},
        {"w", COMPRESSION_ADOBE_DEFLATE, FILLORDER_MSB2LSB, 16, "16-bit deflate"},
        {"w", COMPRESSION_NONE, FILLORDER_LSB2MSB, 8, "8-bit bits reversed"},
    };
    for (int i = 0; i < (int) (sizeof kinds / sizeof kinds[0]); i++) {
        const char *path = tu_path (s_dir, "k.tif");
        s_write_frame (path, 130, 37, kinds[i].bits, 5, kinds[i].mode, kinds[i].compression,
                       kinds[i].fill);
        char err[256] = "";
        piv_image_t *img = piv_image_load (path, 0, 0, err, sizeof err);
        ck_assert_msg (img != NULL, "%s: %s", kinds[i].what, err);
        // (libtiff reverses the bits of LSB2MSB strips back as it reads.)
        s_assert_frame (img, 130, 37, kinds[i].bits, 5, kinds[i].what);
        piv_image_destroy (&img);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Memory (issue 23): a frame's cost known from its header

// The settings of the farm's tests: passes 32,16, one run of the final
// size (so deformed), the rest defaults.
static void
s_farm_settings (piv_settings_t *s)
{
    char err[256];
    piv_settings_init (s);
    ck_assert (piv_settings_set_passes (s, "32,16", err, sizeof err) == 0);
    s->final_iterations = 1;
}

START_TEST (a_compressed_frame_declaring_far_more_than_its_file_is_refused_as_a_bomb)
{
    // 8000 x 8000 zeros deflated: 63 KiB that say 61 MiB, a pair of which
    // took 1.6 GiB to process.
    const char *pa = tu_path (s_dir, "bomb_a.tif"), *pb = tu_path (s_dir, "bomb_b.tif");
    tu_tiff_zeros (pa, 8000, 8000, 8, COMPRESSION_ADOBE_DEFLATE, 2000);
    tu_tiff_zeros (pb, 8000, 8000, 8, COMPRESSION_ADOBE_DEFLATE, 2000);
    int reset = tu_peak_rss_reset () == 0;
    long before = tu_peak_rss_kb (getpid ());
    char err[512] = "";
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_int_eq (piv_image_load_pair (pa, pb, 0, &a, &b, err, sizeof err), -1);
    printf ("bomb: %s\n", err);
    ASSERT_ERR (err, pa, "declares 8000x8000 8-bit, 61 MiB of pixels, in a 63 KiB Deflate file");
    ASSERT_ERR (err, "at most 250:1", "refused as a decompression bomb");
    ck_assert_ptr_null (a);
    // A loader (the agent's) refuses it the same.
    piv_loader_t *loader = piv_loader_new ();
    piv_budget_t budget = {.max_ratio = 2000};
    ck_assert_int_eq (piv_loader_pair (loader, pa, pb, 0, &a, &b, err, sizeof err), -1);
    ASSERT_ERR (err, "ratio 986:1", "at most 250:1");
    // Allowed that ratio, it is held to its memory budget instead.
    snprintf (budget.memory_of, sizeof budget.memory_of, "a test's budget");
    budget.memory = 512 << 20;
    piv_settings_t s;
    s_farm_settings (&s);
    budget.settings = &s;
    piv_loader_set_budget (loader, &budget);
    ck_assert_int_eq (piv_loader_pair (loader, pa, pb, 0, &a, &b, err, sizeof err), -1);
    ASSERT_ERR (err, "8000x8000 8-bit frame would need 1.7 GiB to process", "over a test's budget");
    piv_loader_destroy (&loader);
    // Refused from the header: nothing of the frames was ever allocated.
    long after = tu_peak_rss_kb (getpid ());
    printf ("peak resident memory %ld KiB before the loads, %ld KiB after\n", before, after);
    if (reset)
        ck_assert_msg (after - before < 16 * 1024, "the loads took %ld KiB", after - before);
}
END_TEST

START_TEST (a_bomb_whose_header_the_peek_cannot_read_is_refused_by_the_decoder)
{
    // The width as a signed short: libtiff reads it, the header peek (which
    // knows SHORT, LONG and LONG8) does not; the check before the pixels
    // are allocated refuses it all the same.
    const char *pa = tu_path (s_dir, "a.tif"), *pb = tu_path (s_dir, "b.tif");
    tu_tiff_zeros (pa, 4000, 4000, 8, COMPRESSION_ADOBE_DEFLATE, 4000);
    size_t len;
    unsigned char *file = (unsigned char *) tu_slurp (pa, &len);
    ck_assert (file != NULL && len > 8 && file[0] == 'I');
    uint32_t ifd = file[4] | file[5] << 8 | file[6] << 16 | (uint32_t) file[7] << 24;
    unsigned entries = ifd + 2 <= len ? (unsigned) (file[ifd] | file[ifd + 1] << 8) : 0;
    int patched = 0;
    for (unsigned i = 0; i < entries && ifd + 2 + 12 * (i + 1) <= len; i++) {
        unsigned char *e = file + ifd + 2 + 12 * i;
        if ((e[0] | e[1] << 8) == TIFFTAG_IMAGEWIDTH && (e[2] | e[3] << 8) == TIFF_SHORT)
            e[2] = TIFF_SSHORT, patched = 1;
    }
    ck_assert (patched);
    tu_spit (pa, file, len);
    tu_spit (pb, file, len);
    free (file);
    char err[512] = "";
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_int_eq (piv_image_load_pair (pa, pb, 0, &a, &b, err, sizeof err), -1);
    ASSERT_ERR (err, pa, "declares 4000x4000 8-bit");
    ASSERT_ERR (err, "Deflate", "refused as a decompression bomb");
}
END_TEST

START_TEST (the_real_frames_compressed_every_usual_way_load_as_the_plain_ones)
{
    // What cameras and converters write: each real frame deflated, LZW'd
    // and PackBits'd (1.3 to 3.5 bytes in one) reads as its plain self,
    // under the ratio limit and through a loader held to a budget.
    static const char *const names[] = {"B005_1.tif", "2image_00.tif", "exp1_001_a_rgb.tiff"};
    static const int codecs[] = {COMPRESSION_ADOBE_DEFLATE, COMPRESSION_LZW, COMPRESSION_PACKBITS};
    piv_loader_t *loader = piv_loader_new ();
    piv_settings_t s;
    s_farm_settings (&s);
    piv_budget_t budget = {.memory = 64 << 20, .settings = &s};
    piv_loader_set_budget (loader, &budget);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char err[512] = "";
        piv_image_t *plain = piv_image_load (tu_data (names[i]), 0, 0, err, sizeof err);
        ck_assert_msg (plain != NULL, "%s", err);
        size_t n = (size_t) piv_image_width (plain) * piv_image_height (plain) * sizeof (float);
        for (size_t c = 0; c < sizeof codecs / sizeof codecs[0]; c++) {
            const char *path = tu_path (s_dir, "packed.tif");
            tu_tiff_recompress (tu_data (names[i]), path, codecs[c]);
            piv_image_t *a = NULL, *b = NULL;
            ck_assert_msg (piv_loader_pair (loader, path, path, 0, &a, &b, err, sizeof err) == 0,
                           "%s codec %d: %s", names[i], codecs[c], err);
            ck_assert_int_eq (piv_image_width (a), piv_image_width (plain));
            ck_assert_msg (memcmp (piv_image_cdata (a), piv_image_cdata (plain), n) == 0,
                           "%s codec %d reads otherwise", names[i], codecs[c]);
        }
        piv_image_destroy (&plain);
    }
    piv_loader_destroy (&loader);
}
END_TEST

START_TEST (a_loader_holds_each_frame_to_its_budget_before_allocating_it)
{
    const char *pa = tu_path (s_dir, "a.tif"), *pb = tu_path (s_dir, "b.tif");
    s_write_frame (pa, 256, 256, 8, 1, "w", COMPRESSION_NONE, FILLORDER_MSB2LSB);
    s_write_frame (pb, 256, 256, 8, 2, "w", COMPRESSION_NONE, FILLORDER_MSB2LSB);
    piv_settings_t s;
    s_farm_settings (&s);
    piv_budget_t budget = {.memory = 4 << 20, .settings = &s};
    snprintf (budget.memory_of, sizeof budget.memory_of, "this agent's budget of 4.0 MiB a thread");
    piv_loader_t *loader = piv_loader_new ();
    piv_loader_set_budget (loader, &budget);
    char err[512] = "";
    piv_image_t *a = NULL, *b = NULL;
    ck_assert_msg (piv_loader_pair (loader, pa, pb, 0, &a, &b, err, sizeof err) == 0, "%s", err);
    // Frame B of 4096 x 4096: refused naming it before its 16 MiB are
    // taken (without a budget it was read, then refused as another size).
    s_write_frame (pb, 4096, 4096, 8, 2, "w", COMPRESSION_NONE, FILLORDER_MSB2LSB);
    ck_assert_int_eq (piv_loader_pair (loader, pa, pb, 0, &a, &b, err, sizeof err), -1);
    ASSERT_ERR (err, pb, "4096x4096 8-bit frame would need ");
    ASSERT_ERR (err, "to process, over this agent's budget of 4.0 MiB a thread", "'");
    // Without settings the loading alone counts: the file and two frames.
    budget.settings = NULL;
    budget.memory_of[0] = '\0';
    piv_loader_set_budget (loader, &budget);
    ck_assert_int_eq (piv_loader_pair (loader, pb, pb, 0, &a, &b, err, sizeof err), -1);
    ASSERT_ERR (err, "would need 48 MiB to load", "over the limit of 4.0 MiB");
    // No budget: it loads.
    piv_loader_set_budget (loader, NULL);
    ck_assert_msg (piv_loader_pair (loader, pb, pb, 0, &a, &b, err, sizeof err) == 0, "%s", err);
    piv_loader_destroy (&loader);
}
END_TEST

START_TEST (the_cost_of_a_pair_follows_its_size_its_kind_and_the_settings)
{
    // The pair: 8000 x 8000 8-bit, passes 32,16 with deformation:
    // 1.6 GiB measured (VmHWM of pivfarm-piv, less its 6.5 MiB alone).
    piv_frame_info_t f = {.width = 8000, .height = 8000, .bits = 8, .samples = 1, .bytes = 1,
                          .file_bytes = 64922, .decode_bytes = 16000000};
    piv_settings_t s;
    s_farm_settings (&s);
    uint64_t deformed = piv_budget_pair (&f, &s);
    ck_assert_msg (deformed > (uint64_t) 1600 << 20 && deformed < (uint64_t) 1900 << 20, "%llu",
                   (unsigned long long) deformed);
    // Loading alone: the file, a strip, two frames of one byte a pixel.
    ck_assert_int_eq (piv_budget_pair (&f, NULL), 64922 + 16000000 + 2 * 64000000);
    // Integer offset only: no planes, no floats: less than a sixth.
    s.deform = PIV_DEFORM_OFFSET;
    uint64_t offset = piv_budget_pair (&f, &s);
    ck_assert (offset < deformed / 6);
    // 16-bit frames are kept as floats: 8 bytes a pixel more than 8-bit.
    piv_frame_info_t g = f;
    g.bits = 16, g.bytes = 0;
    ck_assert_int_eq (piv_budget_pair (&g, &s) - offset, 6 * (uint64_t) 64000000);
    // Finer grids cost their vectors: 8 px windows at 87 % overlap.
    char err[256];
    ck_assert (piv_settings_set_passes (&s, "8", err, sizeof err) == 0);
    s.overlap = 87;
    ck_assert (piv_budget_pair (&f, &s) > offset + (uint64_t) 7900 * 7900 * 100);
    char size[32];
    ck_assert_str_eq (piv_budget_size (deformed, size, sizeof size), "1.7 GiB");
    ck_assert_str_eq (piv_budget_size (4 << 20, size, sizeof size), "4.0 MiB");
    ck_assert_str_eq (piv_budget_size (512 << 20, size, sizeof size), "512 MiB");
    ck_assert_str_eq (piv_budget_size (1000, size, sizeof size), "1000 B");
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("image");
    TCase *tc = tcase_create ("image");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 30);
    tcase_add_test (tc, loads_8bit_greyscale_in_strips);
    tcase_add_test (tc, loads_16bit_greyscale_in_partial_edge_tiles);
    tcase_add_test (tc, loads_16bit_greyscale_in_strips_with_full_range);
    tcase_add_test (tc, loads_sample_0_of_grey_with_alpha);
    tcase_add_test (tc, loads_plane_0_of_separate_planes_in_strips_and_tiles);
    tcase_add_test (tc, loads_both_pages_of_a_multipage_file_as_a_pair);
    tcase_add_test (tc, loads_a_pair_from_two_files);
    tcase_add_test (tc, applies_the_colour_map_of_a_palette_image);
    tcase_add_test (tc, converts_rgb_to_rec601_luminance);
    tcase_add_test (tc, loads_a_file_without_a_samples_per_pixel_tag);
    tcase_add_test (tc, inverts_min_is_white_greyscale);
    tcase_add_test (tc, loads_a_file_larger_than_one_read_block);
    tcase_add_test (tc, loads_a_file_with_an_unknown_tag);
    tcase_add_test (tc, loads_the_real_8bit_greyscale_camera_image);
    tcase_add_test (tc, loads_the_real_palette_camera_image_through_its_colour_map);
    tcase_add_test (tc, loads_the_real_rgb_camera_image_as_luminance);
    tcase_add_test (tc, loads_the_real_pairs_with_matching_sizes);
    tcase_add_test (tc, saves_and_reloads_8bit_with_rounding_and_clipping);
    tcase_add_test (tc, saves_and_reloads_16bit_pages_in_64k_strips);
    tcase_add_test (tc, saving_replaces_an_existing_file_whole);
    tcase_add_test (tc, refuses_to_save_where_it_cannot_and_leaves_no_temporary);
    tcase_add_test (tc, makes_zeroed_aligned_images_and_destroys_null);
    tcase_add_test (tc, takes_the_pixelwise_minimum_and_subtracts_clamping_at_zero);
    tcase_add_test (tc, refuses_minimum_and_subtraction_of_different_sizes);
    tcase_add_test (tc, refuses_a_text_file_as_not_a_tiff);
    tcase_add_test (tc, refuses_an_empty_file);
    tcase_add_test (tc, refuses_a_tiff_cut_before_its_directory);
    tcase_add_test (tc, refuses_a_tiff_whose_pixel_data_is_cut_short);
    tcase_add_test (tc, refuses_a_truncated_colour_image);
    tcase_add_test (tc, refuses_zero_width_or_height);
    tcase_add_test (tc, refuses_absurd_dimensions);
    tcase_add_test (tc, refuses_more_pixels_than_the_caller_allows);
    tcase_add_test (tc, refuses_float_samples);
    tcase_add_test (tc, refuses_signed_and_odd_sized_samples);
    tcase_add_test (tc, refuses_1bit_bilevel);
    tcase_add_test (tc, refuses_a_missing_page);
    tcase_add_test (tc, refuses_a_pair_of_different_sizes);
    tcase_add_test (tc, refuses_a_nonexistent_file_with_the_system_reason);
    tcase_add_test (tc, reports_a_short_read);
    tcase_add_test (tc, prints_nothing_while_refusing_broken_files);
    tcase_add_test (tc, honours_the_orientation_tag_for_every_sample_kind);
    tcase_add_test (tc, a_greyscale_pair_stored_rotated_180_degrees_gives_the_right_displacement);
    tcase_add_test (tc, refuses_a_fifo_a_sparse_and_an_oversized_file_before_reading_them);
    tcase_add_test (tc, loads_a_pair_from_descriptors_the_caller_opened);
    tcase_add_test (tc, loads_from_several_threads_with_errors_kept_apart);
    tcase_add_test (tc, loads_float_frames_into_the_16bit_range);
    tcase_add_test (tc, refuses_nan_and_infinite_float_pixels_naming_the_count);
    tcase_add_test (tc, loads_packed_12_and_10_bit_and_signed_samples);
    tcase_add_test (tc, honours_the_orientation_tag_for_float_packed_and_signed_samples);
    tcase_add_test (tc, the_same_pair_in_every_sample_kind_gives_the_same_field);
    tcase_add_test (tc, names_the_format_of_a_file_that_is_not_a_tiff_and_how_to_convert_it);
    tcase_add_test (tc, a_loader_reloads_frames_of_any_size_in_place_as_a_fresh_load_reads_them);
    tcase_add_test (tc, a_loader_refuses_a_bad_pair_and_then_loads_the_next_good_one);
    tcase_add_test (tc, strips_big_endian_compressed_or_bit_reversed_load_as_plain_ones);
    tcase_add_test (tc, a_compressed_frame_declaring_far_more_than_its_file_is_refused_as_a_bomb);
    tcase_add_test (tc, a_bomb_whose_header_the_peek_cannot_read_is_refused_by_the_decoder);
    tcase_add_test (tc, the_real_frames_compressed_every_usual_way_load_as_the_plain_ones);
    tcase_add_test (tc, a_loader_holds_each_frame_to_its_budget_before_allocating_it);
    tcase_add_test (tc, the_cost_of_a_pair_follows_its_size_its_kind_and_the_settings);
    tcase_add_test (tc, eight_bit_frames_are_correlated_from_their_bytes_as_from_floats);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
