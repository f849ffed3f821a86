// field.h — a PIV vector field on a regular grid, its text formats
// (OpenPIV/PIVlab-style 'x y u v flags peak_ratio', Tecplot ASCII) and its
// binary encoding (RESULT's blob on the wire, the store's field column).

#ifndef PIV_FIELD_H
#define PIV_FIELD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Vector flags, as written in the flags column.
enum { PIV_FLAG_VALID = 0, PIV_FLAG_REPLACED = 1, PIV_FLAG_INVALID = 2 };

// PIV_FORMAT_VTK: a legacy VTK structured grid (piv/stats.h, piv_field_write_vtk).
typedef enum { PIV_FORMAT_TXT, PIV_FORMAT_TECPLOT, PIV_FORMAT_VTK } piv_format_t;

// A plain struct: consumers walk the arrays. Vector k = j * nx + i sits at
// column x[k], row y[k] of the image (pixels, origin top-left, y downward);
// u, v are the displacement from frame A to frame B in pixels (v downward).
typedef struct {
    int nx;             // grid columns
    int ny;             // grid rows
    int window;         // final interrogation window size, px
    int step;           // grid spacing, px
    int runs;           // runs of the final window size that made it
    float *x;           // window centre, column
    float *y;           // window centre, row
    float *u;           // displacement along x
    float *v;           // displacement along y
    float *peak_ratio;  // first to second correlation peak (>= 1)
    uint8_t *flags;     // PIV_FLAG_*
    // A stereo (3-component) field's, NULL in a planar field (piv_field_add_w):
    // positions and u, v are then on the stereo grid's dewarped pixels
    // (piv/stereo.h: a uniform scale of the world's mm, rows down, Y up),
    // w the out-of-plane displacement in the same pixels (along +Z), and
    // residual the misfit of the 4 equations in image px.
    float *w;
    float *residual;
    // Each vector's standard uncertainty, px (piv_field_add_sigma; the
    // engine's setting uncertainty=cs|mc), NULL unless computed; NaN where
    // the vector could not be measured (flag INVALID).
    float *sigma_u;
    float *sigma_v;
} piv_field_t;

// A new field of nx * ny zeroed vectors; NULL on bad size or no memory.
piv_field_t *piv_field_new (int nx, int ny);
void piv_field_destroy (piv_field_t **self_p);
piv_field_t *piv_field_dup (const piv_field_t *self);
// Gives a planar field its w and residual (zeroed): a 3-component field.
// 0 (also when it has them already), -1 on no memory.
int piv_field_add_w (piv_field_t *self);
// Gives a field its sigma_u and sigma_v (zeroed). 0 (also when it has them
// already), -1 on no memory.
int piv_field_add_sigma (piv_field_t *self);

// Writes the field; 'header' (may be NULL) holds lines written first, each
// prefixed with '# ' (txt) or as Tecplot TITLE/auxiliary comments. A
// stereo field (w) has the columns 'x y u v w flags peak_ratio residual'
// (w as u, residual as peak_ratio is written). 0 or -1.
int piv_field_write (const piv_field_t *self, FILE *out, piv_format_t format,
                     const char *header);
// The same with the derived quantities as columns after peak_ratio, named
// and ordered as piv_quantities (piv/derived.h): 'derived' holds them as
// piv_field_derive_all gives them (NULL: none, piv_field_write's file).
// Every number then has 7 significant digits (a field in metres and m/s
// too). With sigma_u, sigma_v and 'sigma_vorticity' (nx * ny, may be NULL:
// piv_field_derive_sigma_vorticity's, in the unit of the vorticity given)
// a column sigma_vorticity follows them. txt and Tecplot only.
int piv_field_write_derived (const piv_field_t *self, FILE *out, piv_format_t format,
                             const char *header, const float *derived,
                             const float *sigma_vorticity);

// A further per-point array a writer puts after its own (an ensemble
// field's Reynolds stresses): its name, its unit (NULL: none; the writers
// that carry units name it) and nx * ny values, grid order, already in
// that unit (the writer converts nothing).
typedef struct {
    const char *name;
    const char *unit;
    const float *values;
} piv_column_t;

// piv_field_write_derived with 'nmore' (0 to PIV_MORE_MAX) further columns
// 'more' last, 7 significant digits, "nan" where NaN (derived must then
// not be NULL). 0 or -1.
#define PIV_MORE_MAX 8
int piv_field_write_more (const piv_field_t *self, FILE *out, piv_format_t format,
                          const char *header, const float *derived, const float *sigma_vorticity,
                          const piv_column_t *more, int nmore);

// Reads a txt field written by piv_field_write (or any 'x y u v [flags
// [peak]]' text with '#' comments, grid order). A '# x y u v ...' column
// line before the vectors says where the columns are: one that names w
// (piv_field_write's or piv_field3_write's) gives a stereo field, its
// residual 0 where no column holds it; one that names sigma_u and sigma_v
// gives them back (piv_field_add_sigma; "nan" reads as NaN), wherever they
// sit among the columns. NULL with err on failure.
piv_field_t *piv_field_read_txt (const char *path, char *err, size_t errlen);

// Summary over vectors with flags <= max_flag: mean u, v, mean |V|; returns
// the count. valid_fraction is over all vectors (flag 0 only).
typedef struct {
    int count;              // vectors included
    double mean_u, mean_v;  // px
    double mean_speed;      // px
    double valid_fraction;  // flag 0 / all
} piv_field_stats_t;
int piv_field_stats (const piv_field_t *self, int max_flag, piv_field_stats_t *stats);

// Peak locking (the bias of the sub-pixel estimator towards whole pixels):
// the histogram of the fractional parts x - floor(x) of u and v of the
// VALID vectors, in PIV_LOCK_BINS bins of 0.1 px from 0, and Christensen's
// peak-locking degree (K. T. Christensen, Exp. Fluids 36:484-497, 2004),
// C = 4 (1 - Hmin / Hmax) over those bins: 0 for a flat histogram, 4 when
// a bin stays empty. It says something only where the true displacements
// spread over several pixels (a fraction's histogram of a uniform flow is
// one bin whatever the estimator). Returns the number of fractions (2 per
// vector); with none, index 0 and the bins 0.
#define PIV_LOCK_BINS 10
typedef struct {
    long bins[PIV_LOCK_BINS];  // fractions in [b / 10, (b + 1) / 10)
    long count;                // fractions counted: 2 per valid vector
    double index;              // Christensen's C, 0 .. 4
} piv_lock_t;
long piv_field_peak_locking (const piv_field_t *self, piv_lock_t *lock);

// A vector field as bytes, the same on the wire (RESULT's blob) and in the
// store: a 32-byte header (magic "PVF1", little-endian uint32 nx, ny,
// window, step, runs, float32 x0, y0: the first vector's position), then
// the arrays u[n], v[n], peak_ratio[n] (float32) and flags[n] (uint8), one
// after the other: 32 + 13 n bytes. A 3-component field (w != NULL) has
// magic "PVF3" and the arrays u, v, w, peak_ratio, residual (float32),
// flags: 32 + 21 n bytes. A field with sigma_u, sigma_v has magic "PVS1"
// (planar) or "PVS3" (3-component) and the same arrays, then sigma_u[n],
// sigma_v[n] (float32): 8 n bytes more. The grid must be regular: positions
// are rebuilt as x0 + i step, y0 + j step. (common/proto.c checks a
// RESULT's header against this layout byte by byte, without libpiv.)
// Encode: a malloc'd buffer (caller frees) in *buf_p, 0 or -1 (no memory).
// Decode: a new field, or NULL with err ("bad field: ...": bad magic, sizes
// that do not add up, absurd dimensions, flags out of range).
int piv_field_encode (const piv_field_t *field, unsigned char **buf_p, size_t *size_p);
piv_field_t *piv_field_decode (const void *buf, size_t size, char *err, size_t errlen);

#endif
