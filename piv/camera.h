// camera.h — the model of one camera of a stereo rig: where a point of the
// world (X, Y, Z in mm) lands in its images (col, row in px, pixel centres
// at integers, origin top-left, as the engine's). Two models are fitted to
// calibration points, and the evidence chooses: a Soloff polynomial (cubic
// in X and Y, quadratic in Z: 19 terms per image coordinate) and a pinhole
// with radial distortion (the 11 parameters of a DLT, k1 and k2). Fits by
// GSL (linear least squares; Levenberg-Marquardt).

#ifndef PIV_CAMERA_H
#define PIV_CAMERA_H

#include <stddef.h>

// One calibration point: a target dot's world position and its image.
typedef struct {
    double x, y, z;     // world, mm
    double col, row;    // image, px
    int line;           // line of its file, for messages (0: unknown)
} piv_point_t;

typedef enum { PIV_CAMERA_SOLOFF = 0, PIV_CAMERA_PINHOLE = 1 } piv_camera_model_t;

enum {
    PIV_SOLOFF_TERMS = 19,  // per image coordinate
    PIV_PINHOLE_P = 11,     // P row-major, P[2][3] = 1 left out
    PIV_PINHOLE_K = 2       // k1, k2
};

typedef struct _piv_camera_t piv_camera_t;

// What a fit found, for reports and the calibration file.
typedef struct {
    int id;                     // the camera's number (as the user named it; default 1)
    piv_camera_model_t model;
    size_t points;              // points fitted
    int planes;                 // distinct Z among them
    double rms, max;            // px: reprojection error over the points fitted
    double heldout_rms;         // px: each plane predicted by a fit on the others (NaN
    double heldout_max;         //     when fewer than 4 planes)
    double bounds[6];           // mm: X min, max, Y min, max, Z min, max of the points
} piv_camera_info_t;

// "soloff" or "pinhole"; piv_camera_model_parse reads them back (0, or -1).
const char *piv_camera_model_name (piv_camera_model_t model);
int piv_camera_model_parse (const char *name, piv_camera_model_t *model);

// Fits 'model' to the n points (world mm, image px) and measures it: the
// reprojection RMS and maximum, and the same for each Z plane left out of
// a fit on the others (planes are the points' distinct Z values). A
// Soloff polynomial needs 19 points on 3 planes at least, a pinhole 6 points
// on 2 planes. NULL with err ("cannot fit a soloff model to 12 points: at
// least 19 are needed") when the points cannot determine the model.
piv_camera_t *piv_camera_fit (piv_camera_model_t model, const piv_point_t *pts, size_t n,
                              char *err, size_t errlen);

// Fits both models and returns the one the evidence prefers: the lower
// held-out RMS (the lower RMS when there are too few planes to hold one
// out), so that a model that only follows its own points loses. The other
// fit goes to *other_p if not NULL (caller destroys; NULL if it could not be
// fitted). NULL with err when neither model can be fitted.
piv_camera_t *piv_camera_choose (const piv_point_t *pts, size_t n, piv_camera_t **other_p,
                                 char *err, size_t errlen);

void piv_camera_destroy (piv_camera_t **self_p);

// A copy (NULL: out of memory).
piv_camera_t *piv_camera_dup (const piv_camera_t *self);

void piv_camera_info (const piv_camera_t *self, piv_camera_info_t *info);
int piv_camera_id (const piv_camera_t *self);
void piv_camera_set_id (piv_camera_t *self, int id);

// World (mm) to image (px). -1 where the model has no image (a pinhole's
// point on its focal plane).
int piv_camera_project (const piv_camera_t *self, double x, double y, double z, double *col,
                        double *row);

// The local derivatives of the mapping at (x, y, z): d[0] = d col / d (X, Y,
// Z), d[1] = d row / d (X, Y, Z), px per mm. What the three-component
// reconstruction solves with. -1 where project fails.
int piv_camera_derivatives (const piv_camera_t *self, double x, double y, double z,
                            double d[2][3]);

// Image (px) to world on the plane Z = z: Newton's method on the forward
// model, to 1e-9 mm. -1 when it does not converge (a point far outside
// what the calibration saw).
int piv_camera_unproject (const piv_camera_t *self, double col, double row, double z, double *x,
                          double *y);

// The coefficients as stored: a Soloff model's 38 (col's 19 then row's, in
// the order 1 X Y Z X2 XY Y2 XZ YZ Z2 X3 X2Y XY2 Y3 X2Z XYZ Y2Z XZ2 YZ2), a
// pinhole's 13 (P row-major without P[2][3] = 1, then k1 k2). Returns the
// count.
size_t piv_camera_coefs (const piv_camera_t *self, const double **coefs);

// A camera from stored coefficients and figures (the calibration file's
// reader): n must be the model's count. NULL with err otherwise.
piv_camera_t *piv_camera_from_coefs (const piv_camera_info_t *info, const double *coefs,
                                     size_t n, char *err, size_t errlen);

// The reprojection RMS and maximum (px) of the camera over n points.
void piv_camera_residuals (const piv_camera_t *self, const piv_point_t *pts, size_t n,
                           double *rms, double *max);

#endif
