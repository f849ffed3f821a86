// points.h — calibration points from files: the plain form ('X Y Z col row'
// a line, '#' comments; world mm, image px) and the XML of UVMAT/fluidimage
// (the PIV Challenge's case E: <PointCoord>X Y Z col row</PointCoord>, the
// world unit in <CoordUnit>; its col, row are 1-based, as Matlab's, and
// read 1 less, as the engine's). Not in libpiv: the XML comes through libxml2,
// which only the programs that read points link (piv/module.mk).

#ifndef PIV_POINTS_H
#define PIV_POINTS_H

#include "piv/camera.h"

#include <stddef.h>

// Caller-allocated; grows as files are read.
typedef struct {
    piv_point_t *p;     // the points, world in mm
    size_t n;           // how many
    size_t cap;         // room in p
} piv_points_t;

void piv_points_init (piv_points_t *pts);
void piv_points_release (piv_points_t *pts);
// Appends one point: 0, or -1 (out of memory).
int piv_points_add (piv_points_t *pts, const piv_point_t *pt);

// Appends the points of 'path' to pts: XML when the file's first
// non-blank character is '<', the plain form otherwise. A file with no
// point, a line (or PointCoord) that is not five finite numbers, an XML
// without a known <CoordUnit> (m, cm, mm) is refused: -1 with err naming
// the file and the line ("bad point in 'cam1.txt' line 4: expected 'X Y Z
// col row' (five numbers), got '1 2 3'"), pts as it was.
int piv_points_read (piv_points_t *pts, const char *path, char *err, size_t errlen);

#endif
