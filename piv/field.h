// field.h — a PIV vector field on a regular grid, and its text formats
// (OpenPIV/PIVlab-style 'x y u v flags peak_ratio', Tecplot ASCII).

#ifndef PIV_FIELD_H
#define PIV_FIELD_H

#include <stdint.h>
#include <stdio.h>

// Vector flags, as written in the flags column.
enum { PIV_FLAG_VALID = 0, PIV_FLAG_REPLACED = 1, PIV_FLAG_INVALID = 2 };

typedef enum { PIV_FORMAT_TXT, PIV_FORMAT_TECPLOT } piv_format_t;

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
} piv_field_t;

// A new field of nx * ny zeroed vectors; NULL on bad size or no memory.
piv_field_t *piv_field_new (int nx, int ny);
void piv_field_destroy (piv_field_t **self_p);
piv_field_t *piv_field_dup (const piv_field_t *self);

// Writes the field; 'header' (may be NULL) holds lines written first, each
// prefixed with '# ' (txt) or as Tecplot TITLE/auxiliary comments. 0 or -1.
int piv_field_write (const piv_field_t *self, FILE *out, piv_format_t format,
                     const char *header);

// Reads a txt field written by piv_field_write (or any 'x y u v [flags
// [peak]]' text with '#' comments, grid order). NULL with err on failure.
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

#endif
