// budget.c — the memory a pair takes, from its frames' headers and the
// settings, and the checks a loader makes with it before it allocates
// (budget.h). The figures follow the allocations of image.c and piv.c:
// change them together (doc/piv.md, "Memory", has the measurements).

#include "piv/budget.h"
#include "piv/image_internal.h"
#include "piv/preprocess.h"

#include <stdio.h>
#include <tiffio.h>

// The engine's planes of a deformed pass (piv.c, s_reserve): the
// interpolation sources and the deformed frames, four floats a pixel.
#define S_PLANE_BYTES 16
// An 8-bit frame as floats, made when the engine reads floats
// (deformation's sources, masked windows): four bytes a pixel, each frame.
#define S_FLOAT_BYTES 4
// A vector of the finest grid: the field and the previous pass's (x, y,
// u, v, peak ratio, flags: 21 bytes each), the predictor and the peak
// heights (12), the median test's candidates (9) and the smoother's weights
// and work (~60). Measured: 114 bytes a vector at most (2048^2 frames, 8 px
// windows at 87 % overlap, two runs of the final size, smoothing on),
// before the 4 bytes of the heights (sparse.c) and the 8 of sigma_u,
// sigma_v (uncertainty on): 126.
#define S_VECTOR_BYTES 128
// A thread's window buffers (piv.c, piv_new): three planes of floats and
// four of complex floats, per pixel of the largest window.
#define S_WINDOW_BYTES (3 * 4 + 4 * 8)
// Preprocessing (preprocess.c): frame A's preprocessed copy kept while B's
// is made, B's, and local contrast normalisation's two work planes: four
// planes of floats at most, on top of the engine's own.
#define S_PREPROCESS_BYTES (4 * 4)

uint64_t
piv_budget_declared (const piv_frame_info_t *frame)
{
    return frame->width * frame->height * (uint64_t) frame->samples * (uint64_t) frame->bits / 8;
}

// Vectors of the grid of n px windows at 'overlap' percent over w x h, as
// piv.c's s_grid makes it.
static uint64_t
s_vectors (uint64_t w, uint64_t h, int n, int overlap)
{
    uint64_t step = (uint64_t) (n * (100 - overlap) / 100);
    if (step == 0)
        step = 1;
    if (w < (uint64_t) n || h < (uint64_t) n)
        return 0;
    return ((w - (uint64_t) n) / step + 1) * ((h - (uint64_t) n) / step + 1);
}

uint64_t
piv_budget_pair (const piv_frame_info_t *frame, const piv_settings_t *settings)
{
    uint64_t pixels = frame->width * frame->height;
    // Loading: the file in memory, the decoder's buffer, the two frames.
    uint64_t kept = frame->bytes ? 1 : S_FLOAT_BYTES;
    uint64_t total = frame->file_bytes + frame->decode_bytes + 2 * kept * pixels;
    const piv_settings_t *s = settings;
    if (!s || s->npasses < 1)
        return total;
    int runs = s->npasses - 1 + s->final_iterations;
    int deform = s->deform != PIV_DEFORM_OFFSET && runs > 1;
    int mask = s->mask || s->mask_path[0];
    if (deform)
        total += S_PLANE_BYTES * pixels;
    if (frame->bytes && (deform || mask))
        total += 2 * S_FLOAT_BYTES * pixels;
    if (mask)
        total += S_FLOAT_BYTES * pixels;
    if (piv_preprocess_on (s))
        total += S_PREPROCESS_BYTES * pixels;
    total += S_VECTOR_BYTES * s_vectors (frame->width, frame->height,
                                         s->passes[s->npasses - 1], s->overlap);
    uint64_t n = (uint64_t) s->passes[0];
    total += (uint64_t) (s->threads > 0 ? s->threads : 1) * S_WINDOW_BYTES * n * n;
    // The uncertainty's scratch (piv/uncertainty.h): two windows of floats
    // with a border of 1 px, a thread.
    if (piv_uncertainty_method (s) != PIV_UNCERTAINTY_OFF)
        total += (uint64_t) (s->threads > 0 ? s->threads : 1) * 2 * 4 * (n + 2) * (n + 2);
    // CS's predictor share (piv_uncertainty_predictor): a copy of sigma_u,
    // sigma_v of the final grid, while the field and the previous pass live.
    if (piv_uncertainty_method (s) == PIV_UNCERTAINTY_CS)
        total += 2 * 4 * s_vectors (frame->width, frame->height, s->passes[s->npasses - 1],
                                    s->overlap);
    return total;
}

const char *
piv_budget_size (uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double) bytes;
    int u = 0;
    while (v >= 1024 && u < 5)
        v /= 1024, u++;
    if (u == 0)
        snprintf (buf, size, "%llu B", (unsigned long long) bytes);
    else
        snprintf (buf, size, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

// The codec's name as users know it.
static const char *
s_codec (int compression, char *buf, size_t size)
{
    switch (compression) {
    case COMPRESSION_LZW:
        return "LZW";
    case COMPRESSION_ADOBE_DEFLATE:
    case COMPRESSION_DEFLATE:
        return "Deflate";
    case COMPRESSION_PACKBITS:
        return "PackBits";
    case COMPRESSION_JPEG:
    case COMPRESSION_OJPEG:
        return "JPEG";
    case COMPRESSION_LZMA:
        return "LZMA";
    case COMPRESSION_ZSTD:
        return "ZSTD";
    case COMPRESSION_WEBP:
        return "WebP";
    case COMPRESSION_CCITTRLE:
    case COMPRESSION_CCITTFAX3:
    case COMPRESSION_CCITTFAX4:
        return "CCITT";
    default:
        snprintf (buf, size, "compression %d", compression);
        return buf;
    }
}

// "8000x8000 8-bit" or, with several samples a pixel, "8000x8000 3x8-bit".
static const char *
s_kind (const piv_frame_info_t *f, char *buf, size_t size)
{
    if (f->samples > 1)
        snprintf (buf, size, "%llux%llu %dx%d-bit", (unsigned long long) f->width,
                  (unsigned long long) f->height, f->samples, f->bits);
    else
        snprintf (buf, size, "%llux%llu %d-bit", (unsigned long long) f->width,
                  (unsigned long long) f->height, f->bits);
    return buf;
}

int
piv_budget_check (const char *path, const piv_frame_info_t *frame, int max_ratio,
                  const piv_budget_t *budget, char *err, size_t errlen)
{
    char kind[96], need[32], stored[32], codec[32];
    uint64_t declared = piv_budget_declared (frame);
    // A ratio no camera frame reaches: refused as what it is, whatever
    // memory there is (decoding zeros costs time too: 25 s a pair).
    if (max_ratio > 0 && frame->compressed && frame->file_bytes > 0
        && declared / (uint64_t) max_ratio > frame->file_bytes) {
        img_seterr (err, errlen,
                  "'%s': declares %s, %s of pixels, in a %s %s file (ratio %.0f:1, at most "
                  "%d:1): refused as a decompression bomb",
                  path, s_kind (frame, kind, sizeof kind),
                  piv_budget_size (declared, need, sizeof need),
                  piv_budget_size (frame->file_bytes, stored, sizeof stored),
                  s_codec (frame->compression, codec, sizeof codec),
                  (double) declared / (double) frame->file_bytes, max_ratio);
        return -1;
    }
    if (!budget || budget->memory == 0)
        return 0;
    uint64_t cost = piv_budget_pair (frame, budget->settings);
    if (cost <= budget->memory)
        return 0;
    char limit[32], dflt[64];
    if (!budget->memory_of[0])
        snprintf (dflt, sizeof dflt, "the limit of %s",
                  piv_budget_size (budget->memory, limit, sizeof limit));
    img_seterr (err, errlen, "'%s': %s frame would need %s to %s, over %s", path,
              s_kind (frame, kind, sizeof kind), piv_budget_size (cost, need, sizeof need),
              budget->settings ? "process" : "load",
              budget->memory_of[0] ? budget->memory_of : dflt);
    return -1;
}
