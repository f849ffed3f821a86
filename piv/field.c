// field.c — vector fields on a grid: allocation, the txt and Tecplot ASCII
// formats PIV users read, and summary figures.

#include "piv/field.h"

#include <errno.h>
#include <math.h>
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
    free (self);
    *self_p = NULL;
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
    return copy;
}

// Writes each line of 'header' with 'prefix' before it.
static void
s_write_header (FILE *out, const char *header, const char *prefix)
{
    while (header && *header) {
        const char *eol = strchr (header, '\n');
        int len = eol ? (int) (eol - header) : (int) strlen (header);
        fprintf (out, "%s%.*s\n", prefix, len, header);
        header += len + (eol ? 1 : 0);
    }
}

int
piv_field_write (const piv_field_t *self, FILE *out, piv_format_t format, const char *header)
{
    size_t n = (size_t) self->nx * (size_t) self->ny;
    if (format == PIV_FORMAT_TECPLOT) {
        s_write_header (out, header, "# ");
        fprintf (out, "TITLE = \"pivfarm vector field\"\n");
        fprintf (out, "VARIABLES = \"x\", \"y\", \"u\", \"v\", \"flags\", \"peak_ratio\"\n");
        fprintf (out, "ZONE I=%d, J=%d, F=POINT\n", self->nx, self->ny);
    }
    else {
        s_write_header (out, header, "# ");
        fprintf (out, "# x y u v flags peak_ratio\n");
    }
    // %.4f: a thousandth of a pixel is below any PIV uncertainty, and fixed
    // notation keeps the columns aligned for the eye.
    for (size_t k = 0; k < n; k++)
        fprintf (out, "%.1f %.1f %.4f %.4f %d %.3f\n", self->x[k], self->y[k], self->u[k],
                 self->v[k], self->flags[k], self->peak_ratio[k]);
    return ferror (out) ? -1 : 0;
}

piv_field_t *
piv_field_read_txt (const char *path, char *err, size_t errlen)
{
    FILE *f = fopen (path, "r");
    if (!f) {
        snprintf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return NULL;
    }
    size_t cap = 1024, n = 0;
    float *rows = malloc (cap * 6 * sizeof (float));
    char line[512];
    int lineno = 0, bad = 0;
    while (rows && fgets (line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        float r[6] = {0, 0, 0, 0, 0, 1};
        int got = sscanf (p, "%f %f %f %f %f %f", &r[0], &r[1], &r[2], &r[3], &r[4], &r[5]);
        if (got < 4) {
            snprintf (err, errlen, "bad vector file '%s': line %d is not 'x y u v [flags]'", path,
                      lineno);
            bad = 1;
            break;
        }
        if (n == cap) {
            cap *= 2;
            float *grown = realloc (rows, cap * 6 * sizeof (float));
            if (!grown) {
                free (rows);
                rows = NULL;
                break;
            }
            rows = grown;
        }
        memcpy (rows + 6 * n++, r, sizeof r);
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
    while (nx < n && rows[6 * nx + 1] == rows[1])
        nx++;
    if (n % nx != 0) {
        snprintf (err, errlen, "bad vector file '%s': %zu vectors do not form rows of %zu", path,
                  n, nx);
        free (rows);
        return NULL;
    }
    piv_field_t *self = piv_field_new ((int) nx, (int) (n / nx));
    if (!self) {
        snprintf (err, errlen, "cannot read '%s': out of memory", path);
        free (rows);
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        const float *r = rows + 6 * k;
        self->x[k] = r[0];
        self->y[k] = r[1];
        self->u[k] = r[2];
        self->v[k] = r[3];
        self->flags[k] = (uint8_t) r[4];
        self->peak_ratio[k] = r[5];
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
