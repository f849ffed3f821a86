// cameras.h — a stereo rig's calibration: its cameras (camera.h), each by
// its number, and the calibration file that holds them (text, canonical:
// every number %.17g, so that reading it back gives the same bits).

#ifndef PIV_CAMERAS_H
#define PIV_CAMERAS_H

#include "piv/camera.h"

#include <stddef.h>

typedef struct _piv_cameras_t piv_cameras_t;

// The world grid of a stereo rig's dewarped frames, on the light sheet:
// pixel (col, row) is at X = x0 + col step, Y = y0 - row step (mm; Y up as
// the world's, rows down as the engine's). A uniform scale: a field on it
// is in mm through piv_calib_t's scale = step mm/px, origin (-x0 / step,
// y0 / step) px, y up (piv/stereo.h, piv_stereo_grid_calib).
typedef struct {
    double x0, y0;  // mm: the world position of pixel (0, 0), the top-left
    double step;    // mm per px
    int width;      // px
    int height;     // px
} piv_stereo_grid_t;

// Where the light sheet is in the calibration's world: the plane
// Z = z0 + dzdx X + dzdy Y (mm). The calibration's Z = 0 (all zero) until
// self-calibration finds it.
typedef struct {
    double z0;          // mm
    double dzdx, dzdy;  // slopes, mm per mm
} piv_sheet_t;

// An empty rig (NULL: out of memory).
piv_cameras_t *piv_cameras_new (void);
void piv_cameras_destroy (piv_cameras_t **self_p);

// Adds a camera, taking it (*camera_p becomes NULL). -1 with err when the
// rig already has a camera of its number (the camera is then destroyed).
int piv_cameras_add (piv_cameras_t *self, piv_camera_t **camera_p, char *err, size_t errlen);
size_t piv_cameras_count (const piv_cameras_t *self);
// The i-th camera in the order added (the file's order), or NULL.
const piv_camera_t *piv_cameras_get (const piv_cameras_t *self, size_t i);
// The camera numbered id, or NULL.
const piv_camera_t *piv_cameras_find (const piv_cameras_t *self, int id);

// The rig's stereo grid (pivfarm-calib --size, or a program's choice):
// 1 with *grid when it has one, else 0. Set: grid NULL removes it; a grid
// with step <= 0, a size below 1 or not finite is refused (-1).
int piv_cameras_grid (const piv_cameras_t *self, piv_stereo_grid_t *grid);
int piv_cameras_set_grid (piv_cameras_t *self, const piv_stereo_grid_t *grid);
// The light sheet (all zero unless set); set refuses a plane not finite or
// steeper than 1 (45 degrees) with -1.
void piv_cameras_sheet (const piv_cameras_t *self, piv_sheet_t *sheet);
int piv_cameras_set_sheet (piv_cameras_t *self, const piv_sheet_t *sheet);

// The calibration file's text (malloc'd, caller frees; NULL: out of memory):
//   # comment lines
//   pivfarm-cameras 1
//   units mm
//   grid X0 Y0 STEP WIDTH HEIGHT   (optional: the stereo grid)
//   sheet Z0 DZDX DZDY             (optional: the light sheet, when not Z = 0)
//   camera ID
//   model soloff|pinhole
//   points N / planes N / rms PX / max PX / heldout_rms PX / heldout_max PX
//   bounds XMIN XMAX YMIN YMAX ZMIN ZMAX
//   coefs C1 C2 ...          (piv_camera_coefs' order)
//   end
// (heldout_* are left out when there was no plane to hold out).
char *piv_cameras_format (const piv_cameras_t *self);

// Writes the file under a temporary name, synced, then renamed into place.
// 0, or -1 with err ("cannot write 'rig.cal': No space left on device").
int piv_cameras_save (const piv_cameras_t *self, const char *path, char *err, size_t errlen);

// Reads a calibration file. NULL with err naming the file and the line of
// what is wrong ("bad calibration file 'rig.cal' line 7: 'rms' expects a
// number, got 'x'"). Unknown keys are refused: a file from a later version
// is not half-read.
piv_cameras_t *piv_cameras_load (const char *path, char *err, size_t errlen);
// The same from the file's text (as the control channel carries it); 'name'
// stands for the path in messages.
piv_cameras_t *piv_cameras_parse (const char *text, const char *name, char *err, size_t errlen);

#endif
