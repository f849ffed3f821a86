// selfcal.h — stereo self-calibration (after Wieneke 2005, Exp. Fluids 39):
// where the light sheet really is in the calibration's world. Both cameras'
// frames of one instant, dewarped onto the rig's sheet, show the same
// particles at the same grid pixels only if the sheet is where the
// calibration puts it; else one is shifted from the other (the disparity).
// The disparity of each window, summed over all the instants given,
// triangulated by the cameras' lines of sight, gives the particles' Z there;
// a plane fitted to them is the rig's new sheet (piv_cameras_set_sheet).

#ifndef PIV_SELFCAL_H
#define PIV_SELFCAL_H

#include "piv/cameras.h"
#include "piv/image.h"

#include <stddef.h>

enum { PIV_SELFCAL_MAX_PASSES = 8 };  // disparity maps at most (iterations + 1)

typedef struct {
    int window;        // px of the dewarped grid, even, 8 .. 256 (default 64)
    int step;          // px between windows (default 32)
    int iterations;    // planes fitted at most, 1 .. PIV_SELFCAL_MAX_PASSES - 1 (default 3)
    double min_ratio;  // a window's summed correlation peak over its second highest
                       // below this leaves the window out (default 1.5)
} piv_selfcal_settings_t;

void piv_selfcal_settings_init (piv_selfcal_settings_t *s);

// One disparity map: what it measured on one sheet.
typedef struct {
    piv_sheet_t sheet;        // the plane the frames were dewarped onto
    int windows;              // windows both cameras see entirely
    int used;                 // of them, with a clear peak (and, for the fit, not outliers)
    double rms;               // px of the grid: RMS of the disparity's length over 'used'
    double mean_col, mean_row;  // px: its mean, camera 2's position minus camera 1's
    double max;               // px: the largest disparity's length over 'used'
    double median;            // px: its median length over 'used' (a few windows of a
                              // wrong peak raise the RMS, not this)
    int span[2];              // px: the peaks fitted over this each side, along the
                              // columns and the rows (1: a three-point fit)
} piv_selfcal_map_t;

typedef struct {
    piv_selfcal_map_t map[PIV_SELFCAL_MAX_PASSES];  // map[0] on the rig's sheet as given,
    int maps;                                        // then on each plane fitted
    int best;                 // the map of the lowest RMS: its sheet is the result
    int fitted;               // windows in the last plane's fit (outliers dropped)
    double fit_rms;           // mm: their Z about that plane
    piv_stereo_grid_t grid;   // the dewarped grid (the rig's, as given)
} piv_selfcal_report_t;

// Self-calibrates 'rig' (its first two cameras) from n instants: frames[2 i]
// camera 1's frame of instant i, frames[2 i + 1] camera 2's (both of one
// size; an instant is one frame, A or B, of a pair). Fits a plane, moves the
// rig's sheet there, measures again, until the disparity stops falling or
// after 'iterations' planes; the rig ends with the sheet of the lowest
// disparity (report->best; its grid is kept as given or as the default on
// the first sheet, so all maps are on one grid). 0, or -1 with err (frames
// of other sizes, no common area, fewer than 3 windows with a clear peak,
// a plane steeper than 45 degrees) leaving the rig's sheet as it was.
int piv_selfcal_run (piv_cameras_t *rig, const piv_selfcal_settings_t *settings,
                     const piv_image_t *const *frames, int n, piv_selfcal_report_t *report,
                     char *err, size_t errlen);

#endif
