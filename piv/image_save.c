// image_save.c — writing images as TIFF files (8 or 16 bits, one page a
// frame) under a temporary name, synced, then renamed into place.

#include "piv/image.h"
#include "piv/image_internal.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>

// Writes one frame as the current directory of tif, in ~64 KiB strips.
static int
s_write_frame (TIFF *tif, const piv_image_t *frame, int page, int nframes, int bits)
{
    size_t w = (size_t) frame->width, h = (size_t) frame->height;
    size_t bytes = (size_t) bits / 8;
    size_t row_bytes = w * bytes;
    size_t rps = row_bytes >= 65536 ? 1 : 65536 / row_bytes;
    if (rps > h)
        rps = h;
    TIFFSetField (tif, TIFFTAG_IMAGEWIDTH, (uint32_t) w);
    TIFFSetField (tif, TIFFTAG_IMAGELENGTH, (uint32_t) h);
    TIFFSetField (tif, TIFFTAG_BITSPERSAMPLE, (uint16_t) bits);
    TIFFSetField (tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t) 1);
    TIFFSetField (tif, TIFFTAG_SAMPLEFORMAT, (uint16_t) SAMPLEFORMAT_UINT);
    TIFFSetField (tif, TIFFTAG_PHOTOMETRIC, (uint16_t) PHOTOMETRIC_MINISBLACK);
    TIFFSetField (tif, TIFFTAG_PLANARCONFIG, (uint16_t) PLANARCONFIG_CONTIG);
    TIFFSetField (tif, TIFFTAG_COMPRESSION, (uint16_t) COMPRESSION_NONE);
    TIFFSetField (tif, TIFFTAG_ORIENTATION, (uint16_t) ORIENTATION_TOPLEFT);
    TIFFSetField (tif, TIFFTAG_ROWSPERSTRIP, (uint32_t) rps);
    if (nframes > 1) {
        TIFFSetField (tif, TIFFTAG_SUBFILETYPE, (uint32_t) FILETYPE_PAGE);
        TIFFSetField (tif, TIFFTAG_PAGENUMBER, (uint16_t) page, (uint16_t) nframes);
    }
    const float *pixels = piv_image_cdata (frame);
    unsigned char *buf = pixels ? malloc (rps * row_bytes) : NULL;
    if (!buf)
        return -1;
    float top = bits == 8 ? 255.0f : 65535.0f;
    for (size_t row0 = 0; row0 < h; row0 += rps) {
        size_t rows = h - row0 < rps ? h - row0 : rps;
        const float *src = pixels + row0 * w;
        size_t n = rows * w;
        for (size_t i = 0; i < n; i++) {
            float v = src[i];
            // Round half up after clipping; NaN becomes 0.
            v = v > 0.0f ? (v < top ? floorf (v + 0.5f) : top) : 0.0f;
            if (bits == 8)
                buf[i] = (unsigned char) v;
            else
                ((uint16_t *) buf)[i] = (uint16_t) v;
        }
        uint32_t strip = (uint32_t) (row0 / rps);
        if (TIFFWriteEncodedStrip (tif, strip, buf, (tmsize_t) (n * bytes)) < 0) {
            free (buf);
            return -1;
        }
    }
    free (buf);
    return TIFFWriteDirectory (tif) ? 0 : -1;
}

int
piv_image_save (const char *path, const piv_image_t *const *frames, int nframes, int bits,
                char *err, size_t errlen)
{
    char ebuf[128];
    if (bits != 8 && bits != 16) {
        img_seterr (err, errlen, "cannot save '%s': %d bits per sample (8 or 16 expected)", path,
                    bits);
        return -1;
    }
    if (!frames || nframes < 1) {
        img_seterr (err, errlen, "cannot save '%s': no frames", path);
        return -1;
    }
    uint64_t total = 0;
    for (int i = 0; i < nframes; i++) {
        if (!frames[i]) {
            img_seterr (err, errlen, "cannot save '%s': frame %d is missing", path, i);
            return -1;
        }
        total += (uint64_t) frames[i]->width * (uint64_t) frames[i]->height * (uint64_t) bits / 8;
    }
    // Classic TIFF offsets are 32-bit: past ~4 GB the file must be BigTIFF.
    const char *mode = total > (uint64_t) 0xF0000000u ? "w8" : "w";

    size_t tmplen = strlen (path) + sizeof ".tmp-XXXXXX";
    char *tmp = malloc (tmplen);
    if (!tmp) {
        img_seterr (err, errlen, "cannot save '%s': out of memory", path);
        return -1;
    }
    snprintf (tmp, tmplen, "%s.tmp-XXXXXX", path);
    int fd = mkstemp (tmp);
    if (fd < 0) {
        img_seterr (err, errlen, "cannot save '%s': %s", path,
                    img_strerror (errno, ebuf, sizeof ebuf));
        free (tmp);
        return -1;
    }
    // mkstemp makes the file private; a saved image is an ordinary file.
    fchmod (fd, 0644);
    // A second descriptor outlives TIFFClose, so the data can be synced.
    int keep = dup (fd);
    img_tiffmsg_t msg = {""};
    TIFFOpenOptions *opts = img_open_options (&msg);
    TIFF *tif = opts && keep >= 0 ? TIFFFdOpenExt (fd, tmp, mode, opts) : NULL;
    TIFFOpenOptionsFree (opts);
    int rc = tif ? 0 : -1;
    if (!tif)
        close (fd);
    for (int i = 0; rc == 0 && i < nframes; i++)
        rc = s_write_frame (tif, frames[i], i, nframes, bits);
    if (tif)
        TIFFClose (tif);
    if (rc != 0) {
        const char *cause = msg.error[0] ? msg.error : "out of memory";
        if (keep < 0)
            cause = "out of file descriptors";
        img_seterr (err, errlen, "cannot save '%s': %s", path, cause);
    }
    else {
        // Late write errors (a full disk over NFS) surface here.
        int error = fsync (keep) == 0 ? 0 : errno;
        if (close (keep) != 0 && !error)
            error = errno;
        keep = -1;
        if (!error && rename (tmp, path) != 0)
            error = errno;
        if (error) {
            img_seterr (err, errlen, "cannot save '%s': %s", path,
                        img_strerror (error, ebuf, sizeof ebuf));
            rc = -1;
        }
    }
    if (keep >= 0)
        close (keep);
    if (rc != 0)
        unlink (tmp);
    free (tmp);
    return rc;
}
