// fuzz_image.c — the TIFF loader (piv/image.c) on arbitrary files: page 0,
// both pages of a multipage pair, and a pair of two files. The limit on
// pixels is lower than the default so that runs stay fast; every other
// limit is the one the programs use.

#include "fuzz/fuzz.h"
#include "piv/image.h"

#define FUZZ_MAX_PIXELS ((size_t) 1 << 20)

static volatile float s_sink;  // keeps the reads of the pixels

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    const char *path = fuzz_file (data, size);
    char err[512];
    piv_image_t *image = piv_image_load (path, 0, FUZZ_MAX_PIXELS, err, sizeof err);
    if (image) {
        size_t n = (size_t) piv_image_width (image) * (size_t) piv_image_height (image);
        const unsigned char *bytes = piv_image_bytes (image);
        const float *pixels = piv_image_cdata (image);
        float sum = 0;  // every pixel is read: ASan sees the whole buffer
        for (size_t i = 0; i < n; i++) {
            sum += pixels[i];
            // An 8-bit frame's bytes are its pixels.
            FUZZ_ASSERT (!bytes || pixels[i] == bytes[i]);
        }
        s_sink = sum;
        piv_image_destroy (&image);
    }
    piv_image_t *a = NULL, *b = NULL;
    if (piv_image_load_pair (path, NULL, FUZZ_MAX_PIXELS, &a, &b, err, sizeof err) == 0) {
        FUZZ_ASSERT (a && b && piv_image_width (a) == piv_image_width (b)
                     && piv_image_height (a) == piv_image_height (b));
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    else
        FUZZ_ASSERT (!a && !b && err[0]);
    if (piv_image_load_pair (path, path, FUZZ_MAX_PIXELS, &a, &b, err, sizeof err) == 0) {
        piv_image_destroy (&a);
        piv_image_destroy (&b);
    }
    return 0;
}
