// cameras.h — a stereo rig's calibration: its cameras (camera.h), each by
// its number, and the calibration file that holds them (text, canonical:
// every number %.17g, so that reading it back gives the same bits).

#ifndef PIV_CAMERAS_H
#define PIV_CAMERAS_H

#include "piv/camera.h"

#include <stddef.h>

typedef struct _piv_cameras_t piv_cameras_t;

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

// The calibration file's text (malloc'd, caller frees; NULL: out of memory):
//   # comment lines
//   pivfarm-cameras 1
//   units mm
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

#endif
