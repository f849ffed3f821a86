// dots.h — the dots of a calibration target in its image: bright blobs on a
// dark ground, their sub-pixel centres, and their place on the target's
// lattice from its two fiducial marks, so that each becomes a calibration
// point without anyone clicking on it.
//
// The target (that of the PIV Challenge's case E, LaVision's kind): a
// staggered lattice of unit S, dots where i + j is even, world X = i S,
// Y = j S (Y up); a square at (0, 1) and a triangle at (1, 0) in place of
// two dots, next to the origin dot (0, 0).

#ifndef PIV_DOTS_H
#define PIV_DOTS_H

#include "piv/image.h"

#include <limits.h>
#include <stddef.h>

enum { PIV_DOT = 0, PIV_DOT_SQUARE = 1, PIV_DOT_TRIANGLE = 2 };
#define PIV_DOT_UNINDEXED INT_MIN

typedef struct {
    double col, row;    // centre, px (the engine's pixel convention)
    double area;        // px
    double fill;        // area over its bounding box's: 0.79 a disk, 1 a square, 0.5 a triangle
    int kind;           // PIV_DOT, PIV_DOT_SQUARE or PIV_DOT_TRIANGLE
    int i, j;           // lattice index, PIV_DOT_UNINDEXED until piv_dots_index
} piv_dot_t;

// Finds the blobs of img: smoothed, thresholded 30 % of the way from the
// local ground to the local dots (tiles of 128 px), labelled; those touching
// the border or far from the median blob's area dropped. *dots_p
// (malloc'd, caller frees) gets *n_p of them. 0, or -1 with err (out of
// memory, or fewer than 4 blobs: "no target found").
int piv_dots_find (const piv_image_t *img, piv_dot_t **dots_p, size_t *n_p, char *err,
                   size_t errlen);

// Marks the square (the squarest blob) and the triangle (the least filled)
// and indexes every dot reachable from the origin dot by lattice steps,
// each found within 0.4 units of where its indexed neighbours predict it.
// The number indexed, or -1 with err ("no square and triangle: not the
// target of doc/stereo.md").
int piv_dots_index (piv_dot_t *dots, size_t n, char *err, size_t errlen);

#endif
