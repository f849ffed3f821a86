// camera_internal.h — what the files of the stereo cameras share
// (camera.c, cameras.c, points.c): not part of libpiv's interface.

#ifndef PIV_CAMERA_INTERNAL_H
#define PIV_CAMERA_INTERNAL_H

#include <stddef.h>

// printf into err (nothing when err is NULL or errlen 0).
void cam_seterr (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

// strerror for libraries that may run in threads (strerror_r, GNU flavour:
// the build defines _GNU_SOURCE). The message, in buf or static storage.
const char *cam_strerror (int errnum, char *buf, size_t len);

#endif
