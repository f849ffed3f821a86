// budget.h — what a pair takes in memory, known from its frames' headers
// and the settings before anything is allocated, and the limits a loader
// holds frames to (issue 23): a memory budget, and the largest ratio of
// decoded to stored bytes a compressed frame may declare (a few KiB that
// say 8000 x 8000: a decompression bomb). Part of libpiv.

#ifndef PIV_BUDGET_H
#define PIV_BUDGET_H

#include <stddef.h>
#include <stdint.h>
#include "piv/settings.h"

// Compressed camera frames store 1.3 to 6 decoded bytes in one (the real
// pairs of tests/data with deflate, LZW or PackBits), a noiseless synthetic
// frame of sparse particles 35; a blank frame deflates 990 to 1 (LZW in
// one strip 1340). 250
// leaves real frames a margin of 40 and stops what only a writer of zeros
// makes (doc/piv.md, "Memory").
#define PIV_MAX_RATIO_DEFAULT 250

// What a frame's header says, as far as its cost depends on it.
typedef struct {
    uint64_t width, height;  // pixels
    int bits;                // bits per sample
    int samples;             // samples per pixel
    int compressed;          // any compression but none
    int compression;         // its TIFF code (COMPRESSION_*), for messages
    int bytes;               // the frame is kept as the file's bytes (8-bit grey as stored)
    uint64_t decode_bytes;   // what decoding takes besides the frame (strip, tile, colour raster)
    uint64_t file_bytes;     // the size of the file it is in
} piv_frame_info_t;

// Bytes that loading a pair of two frames like 'frame' and processing it
// with 'settings' (NULL: loading only) take at most, the process's own
// memory (libraries, FFTW plans) left out: the file buffer, the decoder's,
// both frames, and the engine's planes, fields and windows. The formula
// and its measurements: doc/piv.md, "Memory".
uint64_t piv_budget_pair (const piv_frame_info_t *frame, const piv_settings_t *settings);

// The bytes of pixels a frame declares: width x height x samples x bits / 8.
uint64_t piv_budget_declared (const piv_frame_info_t *frame);

// The limits of a loader (piv_loader_set_budget).
struct _piv_budget_t {
    uint64_t memory;                 // bytes a pair may take (piv_budget_pair); 0: no limit
    char memory_of[192];             // that limit in words, for messages: "this agent's
                                     // budget of 512 MiB a thread (agent/memory_mb 2048, 4
                                     // threads)"
    int max_ratio;                   // decoded bytes a stored byte a compressed frame may
                                     // declare; 0: PIV_MAX_RATIO_DEFAULT
    const piv_settings_t *settings;  // how the pairs are processed (borrowed); NULL: loading
};

// 'bytes' in binary units as the messages give them: "512 B", "63 KiB",
// "4.0 MiB", "1.7 GiB" (two digits at least). Returns buf.
const char *piv_budget_size (uint64_t bytes, char *buf, size_t size);

// Checks a frame against the limits: 0, or -1 with err naming 'path' and
// the sizes: "'a.tif': declares 8000x8000 8-bit, 61 MiB of pixels, in a
// 63 KiB Deflate file (ratio 986:1, at most 250:1): refused as a
// decompression bomb" (max_ratio > 0 and the frame compressed), or
// "'a.tif': 8000x8000 8-bit frame would need 1.6 GiB to process, over
// <memory_of>" (budget not NULL, its memory > 0).
int piv_budget_check (const char *path, const piv_frame_info_t *frame, int max_ratio,
                      const piv_budget_t *budget, char *err, size_t errlen);

#endif
