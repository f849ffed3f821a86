// field.c — vector fields on a grid: allocation, the txt and Tecplot ASCII
// formats PIV users read, summary figures, and the binary encoding that the
// wire (RESULT) and the store carry.

#include "piv/field.h"
#include "piv/derived.h"
#include "piv/stats_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

piv_field_t *
piv_field_new (int nx, int ny)
{
    if (nx <= 0 || ny <= 0 || (size_t) nx > (size_t) 1 << 20 || (size_t) ny > (size_t) 1 << 20
        || (size_t) nx * (size_t) ny > (size_t) 1 << 28)
        return NULL;
    size_t n = (size_t) nx * (size_t) ny;
    piv_field_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->nx = nx;
    self->ny = ny;
    self->x = calloc (n, sizeof (float));
    self->y = calloc (n, sizeof (float));
    self->u = calloc (n, sizeof (float));
    self->v = calloc (n, sizeof (float));
    self->peak_ratio = calloc (n, sizeof (float));
    self->flags = calloc (n, 1);
    if (!self->x || !self->y || !self->u || !self->v || !self->peak_ratio || !self->flags)
        piv_field_destroy (&self);
    return self;
}

void
piv_field_destroy (piv_field_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_field_t *self = *self_p;
    free (self->x);
    free (self->y);
    free (self->u);
    free (self->v);
    free (self->peak_ratio);
    free (self->flags);
    free (self->w);
    free (self->residual);
    free (self->sigma_u);
    free (self->sigma_v);
    free (self);
    *self_p = NULL;
}

int
piv_field_add_w (piv_field_t *self)
{
    if (self->w && self->residual)
        return 0;
    size_t n = (size_t) self->nx * (size_t) self->ny;
    if (!self->w)
        self->w = calloc (n, sizeof (float));
    if (!self->residual)
        self->residual = calloc (n, sizeof (float));
    if (!self->w || !self->residual) {
        free (self->w);
        free (self->residual);
        self->w = self->residual = NULL;
        return -1;
    }
    return 0;
}

int
piv_field_add_sigma (piv_field_t *self)
{
    if (self->sigma_u && self->sigma_v)
        return 0;
    size_t n = (size_t) self->nx * (size_t) self->ny;
    if (!self->sigma_u)
        self->sigma_u = calloc (n, sizeof (float));
    if (!self->sigma_v)
        self->sigma_v = calloc (n, sizeof (float));
    if (!self->sigma_u || !self->sigma_v) {
        free (self->sigma_u);
        free (self->sigma_v);
        self->sigma_u = self->sigma_v = NULL;
        return -1;
    }
    return 0;
}

piv_field_t *
piv_field_dup (const piv_field_t *self)
{
    piv_field_t *copy = piv_field_new (self->nx, self->ny);
    if (!copy)
        return NULL;
    size_t n = (size_t) self->nx * (size_t) self->ny;
    copy->window = self->window;
    copy->step = self->step;
    copy->runs = self->runs;
    memcpy (copy->x, self->x, n * sizeof (float));
    memcpy (copy->y, self->y, n * sizeof (float));
    memcpy (copy->u, self->u, n * sizeof (float));
    memcpy (copy->v, self->v, n * sizeof (float));
    memcpy (copy->peak_ratio, self->peak_ratio, n * sizeof (float));
    memcpy (copy->flags, self->flags, n);
    if (self->w && self->residual) {
        if (piv_field_add_w (copy) != 0) {
            piv_field_destroy (&copy);
            return NULL;
        }
        memcpy (copy->w, self->w, n * sizeof (float));
        memcpy (copy->residual, self->residual, n * sizeof (float));
    }
    if (self->sigma_u && self->sigma_v) {
        if (piv_field_add_sigma (copy) != 0) {
            piv_field_destroy (&copy);
            return NULL;
        }
        memcpy (copy->sigma_u, self->sigma_u, n * sizeof (float));
        memcpy (copy->sigma_v, self->sigma_v, n * sizeof (float));
    }
    return copy;
}

void
piv_write_header_lines (FILE *out, const char *header, const char *prefix)
{
    while (header && *header) {
        const char *eol = strchr (header, '\n');
        int len = eol ? (int) (eol - header) : (int) strlen (header);
        fprintf (out, "%s%.*s\n", prefix, len, header);
        header += len + (eol ? 1 : 0);
    }
}

// Writes v as printf's "%.<decimals>f" would (decimals 1 to 4), then
// 'after'; returns the end. A float times 10^4 is exact in a double (24 +
// 14 bits), so rounding it to an integer, ties to even, is printf's
// rounding of v's exact value; what that cannot hold goes to snprintf.
static char *
s_fixed (char *p, float v, int decimals, char after)
{
    static const double scale[] = {1, 10, 100, 1000, 10000};
    double s = (double) v * scale[decimals];
    if (!(fabs (s) < 9e15)) {  // NaN, infinite, or too large for the digits below
        p += sprintf (p, "%.*f%c", decimals, (double) v, after);
        return p;
    }
    double r = nearbyint (fabs (s));  // the default mode rounds ties to even
    uint64_t m = (uint64_t) r;
    char digits[24];
    int nd = 0;
    do {
        digits[nd++] = (char) ('0' + m % 10);
        m /= 10;
    } while (m || nd <= decimals);
    if (signbit (v))  // printf writes -0.0000 for small negatives, as for -0
        *p++ = '-';
    for (int i = nd - 1; i >= 0; i--) {
        *p++ = digits[i];
        if (i == decimals)
            *p++ = '.';
    }
    *p++ = after;
    return p;
}

// 'v' with 7 significant digits ("nan" for any NaN), then 'after'.
static char *
s_general (char *p, float v, char after)
{
    return p + (isnan (v) ? sprintf (p, "nan%c", after) : sprintf (p, "%.7g%c", (double) v, after));
}

int
piv_field_write (const piv_field_t *self, FILE *out, piv_format_t format, const char *header)
{
    return piv_field_write_derived (self, out, format, header, NULL, NULL);
}

// ' name' of each derived quantity (Tecplot: ', "name"') after the columns.
static void
s_derived_names (FILE *out, const float *derived, int quoted)
{
    for (int q = 0; derived && q < PIV_DERIVED_COUNT; q++)
        fprintf (out, quoted ? ", \"%s\"" : " %s", piv_quantities[q].name);
}

int
piv_field_write_derived (const piv_field_t *self, FILE *out, piv_format_t format,
                         const char *header, const float *derived,
                         const float *sigma_vorticity)
{
    return piv_field_write_more (self, out, format, header, derived, sigma_vorticity, NULL, 0);
}

int
piv_field_write_more (const piv_field_t *self, FILE *out, piv_format_t format,
                      const char *header, const float *derived, const float *sigma_vorticity,
                      const piv_column_t *more, int nmore)
{
    if (format == PIV_FORMAT_VTK)
        return piv_field_write_vtk_more (self, out, NULL, header, more, nmore);
    if (nmore < 0 || nmore > PIV_MORE_MAX || (nmore && !derived))
        return -1;
    size_t n = (size_t) self->nx * (size_t) self->ny;
    int three = self->w && self->residual, sigma = self->sigma_u && self->sigma_v;
    const float *sigma_w = derived && sigma ? sigma_vorticity : NULL;
    if (format == PIV_FORMAT_TECPLOT) {
        piv_write_header_lines (out, header, "# ");
        fprintf (out, "TITLE = \"pivfarm vector field\"\n");
        // A stereo field's w after v, its residual after peak_ratio: the
        // planar columns keep their names and order around them.
        fprintf (out, "VARIABLES = \"x\", \"y\", \"u\", \"v\"%s, \"flags\", \"peak_ratio\"%s",
                 three ? ", \"w\"" : "", three ? ", \"residual\"" : "");
        s_derived_names (out, derived, 1);
        if (sigma)
            fprintf (out, ", \"sigma_u\", \"sigma_v\"%s", sigma_w ? ", \"sigma_vorticity\"" : "");
        for (int m = 0; m < nmore; m++)
            fprintf (out, ", \"%s\"", more[m].name);
        fputc ('\n', out);
        fprintf (out, "ZONE I=%d, J=%d, F=POINT\n", self->nx, self->ny);
    }
    else {
        piv_write_header_lines (out, header, "# ");
        fprintf (out, "# x y u v%s flags peak_ratio%s", three ? " w" : "", three ? " residual" : "");
        s_derived_names (out, derived, 0);
        if (sigma)
            fprintf (out, " sigma_u sigma_v%s", sigma_w ? " sigma_vorticity" : "");
        for (int m = 0; m < nmore; m++)
            fprintf (out, " %s", more[m].name);
        fputc ('\n', out);
    }
    // %.4f: a thousandth of a pixel is below any PIV uncertainty, and fixed
    // notation keeps the columns aligned for the eye. The rows are those of
    // "%.1f %.1f %.4f %.4f %d %.3f\n", byte for byte, formatted without
    // printf (1.6 ms for 127^2 vectors against 11 to 18 ms), a buffer at a
    // time. With derived quantities (an export, perhaps in metres and m/s,
    // where fixed decimals would say 0.0) every number has 7 significant
    // digits instead, "nan" where undefined.
    char buf[1 << 16];
    size_t used = 0;
    for (size_t k = 0; k < n; k++) {
        if (used > sizeof buf - 512 - 16 * PIV_MORE_MAX) {
            fwrite (buf, 1, used, out);
            used = 0;
        }
        char *p = buf + used;
        float row[5] = {self->x[k], self->y[k], self->u[k], self->v[k], three ? self->w[k] : 0};
        static const int decimals[5] = {1, 1, 4, 4, 4};
        for (int c = 0; c < 4 + three; c++)
            p = derived ? s_general (p, row[c], ' ') : s_fixed (p, row[c], decimals[c], ' ');
        unsigned f = self->flags[k];
        if (f >= 100)
            *p++ = (char) ('0' + f / 100);
        if (f >= 10)
            *p++ = (char) ('0' + f / 10 % 10);
        *p++ = (char) ('0' + f % 10);
        *p++ = ' ';
        if (!derived) {
            p = s_fixed (p, self->peak_ratio[k], 3, three ? ' ' : '\n');
            if (three)
                p = s_fixed (p, self->residual[k], 3, '\n');
        }
        else {
            p = s_general (p, self->peak_ratio[k], ' ');
            if (three)
                p = s_general (p, self->residual[k], ' ');
        }
        for (int q = 0; derived && q < PIV_DERIVED_COUNT; q++)
            p = s_general (p, derived[(size_t) q * n + k], q == PIV_DERIVED_COUNT - 1 ? '\n' : ' ');
        if (sigma) {
            // The uncertainty last, after whatever the row had ('\n' becomes ' ').
            p[-1] = ' ';
            float su = self->sigma_u[k], sv = self->sigma_v[k];
            if (derived || isnan (su) || isnan (sv))
                p = s_general (s_general (p, su, ' '), sv, '\n');
            else
                p = s_fixed (s_fixed (p, su, 4, ' '), sv, 4, '\n');
            if (sigma_w) {
                p[-1] = ' ';
                p = s_general (p, sigma_w[k], '\n');
            }
        }
        for (int m = 0; m < nmore; m++) { // last, after whatever the row had
            p[-1] = ' ';
            p = s_general (p, more[m].values[k], '\n');
        }
        used = (size_t) (p - buf);
    }
    fwrite (buf, 1, used, out);
    return ferror (out) ? -1 : 0;
}

// The columns piv_field_read_txt knows, by name in a file's column line.
enum { C_X, C_Y, C_U, C_V, C_FLAGS, C_PEAK, C_W, C_RESIDUAL, C_SIGMA_U, C_SIGMA_V, C_KNOWN };
static const char *const s_column_names[C_KNOWN] = {"x", "y", "u", "v", "flags", "peak_ratio",
                                                     "w", "residual", "sigma_u", "sigma_v"};

// If 'line' (after its '#') is a column line, 'x y u v ...', sets where
// each known column sits (-1: absent) and returns 1; else 0. Names after
// the last known one (derived quantities, a "(units ...)" note) are skipped.
static int
s_column_line (const char *line, int where[C_KNOWN])
{
    char names[512];
    snprintf (names, sizeof names, "%s", line);
    int found[C_KNOWN], column = 0;
    for (int c = 0; c < C_KNOWN; c++)
        found[c] = -1;
    for (char *save = NULL, *t = strtok_r (names, " \t\r\n", &save); t;
         t = strtok_r (NULL, " \t\r\n", &save), column++) {
        if (*t == '(')
            break;
        for (int c = 0; c < C_KNOWN; c++)
            if (strcmp (t, s_column_names[c]) == 0 && found[c] < 0)
                found[c] = column;
    }
    if (found[C_X] != 0 || found[C_Y] != 1 || found[C_U] != 2 || found[C_V] != 3)
        return 0;
    memcpy (where, found, sizeof found);
    return 1;
}

piv_field_t *
piv_field_read_txt (const char *path, char *err, size_t errlen)
{
    FILE *f = fopen (path, "r");
    if (!f) {
        snprintf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return NULL;
    }
    // Without a column line: 'x y u v [flags [peak]]'.
    int where[C_KNOWN] = {0, 1, 2, 3, 4, 5, -1, -1, -1, -1};
    size_t cap = 1024, n = 0;
    float *rows = malloc (cap * C_KNOWN * sizeof (float));
    char line[4096];
    int lineno = 0, bad = 0, three = 0, sigma = 0;
    while (rows && fgets (line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' && n == 0 && s_column_line (p + 1, where)) {
            three = where[C_W] >= 0;
            sigma = where[C_SIGMA_U] >= 0 && where[C_SIGMA_V] >= 0;
        }
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        float cols[C_KNOWN + 8], r[C_KNOWN] = {0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
        int got = 0;
        for (char *end; got < C_KNOWN + 8; got++, p = end) {
            cols[got] = strtof (p, &end);
            if (end == p)
                break;
        }
        for (int c = 0; c < C_KNOWN; c++)
            if (where[c] >= 0 && where[c] < got)
                r[c] = cols[where[c]];
        if (got < 4 || (three && got <= where[C_W])
            || (sigma && (got <= where[C_SIGMA_U] || got <= where[C_SIGMA_V]))) {
            snprintf (err, errlen, "bad vector file '%s': line %d is not 'x y u v%s [flags]%s'",
                      path, lineno, three ? " w" : "", sigma ? " ... sigma_u sigma_v" : "");
            bad = 1;
            break;
        }
        if (n == cap) {
            cap *= 2;
            float *grown = realloc (rows, cap * C_KNOWN * sizeof (float));
            if (!grown) {
                free (rows);
                rows = NULL;
                break;
            }
            rows = grown;
        }
        memcpy (rows + C_KNOWN * n++, r, sizeof r);
    }
    fclose (f);
    if (!rows) {
        snprintf (err, errlen, "cannot read '%s': out of memory", path);
        return NULL;
    }
    if (bad) {
        free (rows);
        return NULL;
    }
    if (n == 0) {
        snprintf (err, errlen, "bad vector file '%s': no vectors", path);
        free (rows);
        return NULL;
    }
    // Grid order: x varies fastest; the first row ends where y changes.
    size_t nx = 1;
    while (nx < n && rows[C_KNOWN * nx + C_Y] == rows[C_Y])
        nx++;
    if (n % nx != 0) {
        snprintf (err, errlen, "bad vector file '%s': %zu vectors do not form rows of %zu", path,
                  n, nx);
        free (rows);
        return NULL;
    }
    piv_field_t *self = piv_field_new ((int) nx, (int) (n / nx));
    if (self
        && ((three && piv_field_add_w (self) != 0) || (sigma && piv_field_add_sigma (self) != 0)))
        piv_field_destroy (&self);
    if (!self) {
        snprintf (err, errlen, "cannot read '%s': out of memory", path);
        free (rows);
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        const float *r = rows + C_KNOWN * k;
        self->x[k] = r[C_X];
        self->y[k] = r[C_Y];
        self->u[k] = r[C_U];
        self->v[k] = r[C_V];
        self->flags[k] = (uint8_t) r[C_FLAGS];
        self->peak_ratio[k] = r[C_PEAK];
        if (three) {
            self->w[k] = r[C_W];
            self->residual[k] = r[C_RESIDUAL];
        }
        if (sigma) {
            self->sigma_u[k] = r[C_SIGMA_U];
            self->sigma_v[k] = r[C_SIGMA_V];
        }
    }
    if (nx > 1)
        self->step = (int) lrintf (self->x[1] - self->x[0]);
    free (rows);
    return self;
}

int
piv_field_stats (const piv_field_t *self, int max_flag, piv_field_stats_t *stats)
{
    size_t n = (size_t) self->nx * (size_t) self->ny;
    double su = 0, sv = 0, ss = 0;
    int count = 0, valid = 0;
    for (size_t k = 0; k < n; k++) {
        if (self->flags[k] == PIV_FLAG_VALID)
            valid++;
        if (self->flags[k] > max_flag)
            continue;
        su += self->u[k];
        sv += self->v[k];
        ss += hypot (self->u[k], self->v[k]);
        count++;
    }
    stats->count = count;
    stats->mean_u = count ? su / count : 0;
    stats->mean_v = count ? sv / count : 0;
    stats->mean_speed = count ? ss / count : 0;
    stats->valid_fraction = n ? (double) valid / (double) n : 0;
    return count;
}

long
piv_field_peak_locking (const piv_field_t *self, piv_lock_t *lock)
{
    memset (lock, 0, sizeof *lock);
    size_t n = (size_t) self->nx * (size_t) self->ny;
    for (size_t k = 0; k < n; k++) {
        if (self->flags[k] != PIV_FLAG_VALID)
            continue;
        double d[2] = {self->u[k], self->v[k]};
        for (int c = 0; c < 2; c++) {
            if (!isfinite (d[c]))
                continue;
            // floor, not truncation: -0.3 px is 0.7 past the pixel below.
            int b = (int) ((d[c] - floor (d[c])) * PIV_LOCK_BINS);
            lock->bins[b < PIV_LOCK_BINS ? b : PIV_LOCK_BINS - 1]++;
            lock->count++;
        }
    }
    long lo = lock->bins[0], hi = lock->bins[0];
    for (int b = 1; b < PIV_LOCK_BINS; b++) {
        lo = lock->bins[b] < lo ? lock->bins[b] : lo;
        hi = lock->bins[b] > hi ? lock->bins[b] : hi;
    }
    lock->index = hi > 0 ? 4.0 * (1.0 - (double) lo / (double) hi) : 0;
    return lock->count;
}

// ---------------------------------------------------------------------------
// The binary encoding: a 32-byte header, then the arrays one after another.

#define FIELD_MAGIC "PVF1"
#define FIELD_MAGIC3 "PVF3"
#define FIELD_HEADER 32
#define FIELD_VECTOR 13   // bytes per vector: u, v, peak_ratio, flags
#define FIELD_VECTOR3 21  // a 3-component field's: u, v, w, peak_ratio, residual, flags
// A field with sigma_u, sigma_v: magic "PVS1" or "PVS3" and both arrays
// after the flags (8 bytes a vector more).
#define FIELD_MAGIC_S "PVS1"
#define FIELD_MAGIC3_S "PVS3"
#define FIELD_SIGMA 8

static void
s_put_u32 (unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char) v;
    p[1] = (unsigned char) (v >> 8);
    p[2] = (unsigned char) (v >> 16);
    p[3] = (unsigned char) (v >> 24);
}

static void
s_put_f32 (unsigned char *p, float f)
{
    uint32_t v;
    memcpy (&v, &f, sizeof v);
    s_put_u32 (p, v);
}

static uint32_t
s_get_u32 (const unsigned char *p)
{
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static float
s_get_f32 (const unsigned char *p)
{
    uint32_t v = s_get_u32 (p);
    float f;
    memcpy (&f, &v, sizeof f);
    return f;
}

int
piv_field_encode (const piv_field_t *field, unsigned char **buf_p, size_t *size_p)
{
    if (!field || field->nx <= 0 || field->ny <= 0)
        return -1;
    size_t n = (size_t) field->nx * (size_t) field->ny;
    int three = field->w && field->residual, sigma = field->sigma_u && field->sigma_v;
    size_t size = FIELD_HEADER + n * ((three ? FIELD_VECTOR3 : FIELD_VECTOR) + (sigma ? FIELD_SIGMA : 0));
    unsigned char *buf = malloc (size);
    if (!buf)
        return -1;
    memcpy (buf, sigma ? (three ? FIELD_MAGIC3_S : FIELD_MAGIC_S) : (three ? FIELD_MAGIC3 : FIELD_MAGIC), 4);
    s_put_u32 (buf + 4, (uint32_t) field->nx);
    s_put_u32 (buf + 8, (uint32_t) field->ny);
    s_put_u32 (buf + 12, (uint32_t) field->window);
    s_put_u32 (buf + 16, (uint32_t) field->step);
    s_put_u32 (buf + 20, (uint32_t) field->runs);
    s_put_f32 (buf + 24, field->x[0]);
    s_put_f32 (buf + 28, field->y[0]);
    unsigned char *u = buf + FIELD_HEADER, *v = u + 4 * n, *w = v + 4 * n;
    unsigned char *peak = three ? w + 4 * n : w, *residual = peak + 4 * n;
    unsigned char *flags = three ? residual + 4 * n : residual;
    for (size_t k = 0; k < n; k++) {
        s_put_f32 (u + 4 * k, field->u[k]);
        s_put_f32 (v + 4 * k, field->v[k]);
        s_put_f32 (peak + 4 * k, field->peak_ratio[k]);
        if (three) {
            s_put_f32 (w + 4 * k, field->w[k]);
            s_put_f32 (residual + 4 * k, field->residual[k]);
        }
        flags[k] = field->flags[k];
        if (sigma) {
            s_put_f32 (flags + n + 4 * k, field->sigma_u[k]);
            s_put_f32 (flags + 5 * n + 4 * k, field->sigma_v[k]);
        }
    }
    *buf_p = buf;
    *size_p = size;
    return 0;
}

static void
s_field_error (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

// "bad field: <formatted>" into err (may be NULL).
static void
s_field_error (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    int len = snprintf (err, errlen, "bad field: ");
    if (len < 0 || (size_t) len >= errlen)
        return;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err + len, errlen - (size_t) len, fmt, ap);
    va_end (ap);
}

// The 4 bytes of a magic as text fit to quote: printable ASCII as it is,
// other bytes, quote and backslash as \xNN. out holds at least 17 bytes.
static const char *
s_magic_text (const unsigned char *magic, char *out)
{
    char *o = out;
    for (int i = 0; i < 4; i++) {
        unsigned c = magic[i];
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
            *o++ = (char) c;
        else
            o += sprintf (o, "\\x%02x", c);
    }
    *o = '\0';
    return out;
}

piv_field_t *
piv_field_decode (const void *buf, size_t size, char *err, size_t errlen)
{
    const unsigned char *p = buf;
    char quoted[17];
    if (!p || size < FIELD_HEADER) {
        s_field_error (err, errlen, "%zu bytes, shorter than its %d-byte header", p ? size : 0,
                       FIELD_HEADER);
        return NULL;
    }
    int sigma = memcmp (p, FIELD_MAGIC_S, 4) == 0 || memcmp (p, FIELD_MAGIC3_S, 4) == 0;
    int three = memcmp (p, FIELD_MAGIC3, 4) == 0 || memcmp (p, FIELD_MAGIC3_S, 4) == 0;
    if (!three && !sigma && memcmp (p, FIELD_MAGIC, 4) != 0) {
        s_field_error (err, errlen, "magic '%s', expected '%s', '%s', '%s' or '%s'",
                       s_magic_text (p, quoted), FIELD_MAGIC, FIELD_MAGIC3, FIELD_MAGIC_S,
                       FIELD_MAGIC3_S);
        return NULL;
    }
    uint32_t nx = s_get_u32 (p + 4), ny = s_get_u32 (p + 8);
    uint32_t window = s_get_u32 (p + 12), step = s_get_u32 (p + 16), runs = s_get_u32 (p + 20);
    // Both below 2^32: the product and the size cannot overflow 64 bits.
    uint64_t n = (uint64_t) nx * ny;
    uint64_t expected = FIELD_HEADER + n * ((three ? FIELD_VECTOR3 : FIELD_VECTOR) + (sigma ? FIELD_SIGMA : 0));
    if (window > INT_MAX || step > INT_MAX || runs > INT_MAX) {
        s_field_error (err, errlen, "window %" PRIu32 ", step %" PRIu32 " or runs %" PRIu32
                       " out of range", window, step, runs);
        return NULL;
    }
    if (nx == 0 || ny == 0 || nx > INT_MAX || ny > INT_MAX) {
        s_field_error (err, errlen, "absurd dimensions %" PRIu32 " x %" PRIu32, nx, ny);
        return NULL;
    }
    if (expected != size) {
        s_field_error (err, errlen,
                       "%zu bytes, but %" PRIu32 " x %" PRIu32 " vectors need %" PRIu64, size,
                       nx, ny, expected);
        return NULL;
    }
    piv_field_t *field = piv_field_new ((int) nx, (int) ny);
    if (!field) {
        s_field_error (err, errlen,
                       "%" PRIu32 " x %" PRIu32 " vectors refused (too many, or no memory)", nx,
                       ny);
        return NULL;
    }
    if ((three && piv_field_add_w (field) != 0) || (sigma && piv_field_add_sigma (field) != 0)) {
        s_field_error (err, errlen, "no memory for w of %" PRIu32 " x %" PRIu32 " vectors", nx,
                       ny);
        piv_field_destroy (&field);
        return NULL;
    }
    field->window = (int) window;
    field->step = (int) step;
    field->runs = (int) runs;
    double x0 = s_get_f32 (p + 24), y0 = s_get_f32 (p + 28);
    const unsigned char *u = p + FIELD_HEADER, *v = u + 4 * n, *w = v + 4 * n;
    const unsigned char *peak = three ? w + 4 * n : w, *residual = peak + 4 * n;
    const unsigned char *flags = three ? residual + 4 * n : residual;
    for (uint32_t j = 0, k = 0; j < ny; j++)
        for (uint32_t i = 0; i < nx; i++, k++) {
            if (flags[k] > PIV_FLAG_INVALID) {
                s_field_error (err, errlen, "vector %" PRIu32 " has flags %u", k, flags[k]);
                piv_field_destroy (&field);
                return NULL;
            }
            // The grid is regular: each position is exact from x0, y0 and step.
            field->x[k] = (float) (x0 + (double) i * step);
            field->y[k] = (float) (y0 + (double) j * step);
            field->u[k] = s_get_f32 (u + 4 * (size_t) k);
            field->v[k] = s_get_f32 (v + 4 * (size_t) k);
            field->peak_ratio[k] = s_get_f32 (peak + 4 * (size_t) k);
            if (three) {
                field->w[k] = s_get_f32 (w + 4 * (size_t) k);
                field->residual[k] = s_get_f32 (residual + 4 * (size_t) k);
            }
            field->flags[k] = flags[k];
            if (sigma) {
                field->sigma_u[k] = s_get_f32 (flags + n + 4 * (size_t) k);
                field->sigma_v[k] = s_get_f32 (flags + 5 * n + 4 * (size_t) k);
            }
        }
    return field;
}
