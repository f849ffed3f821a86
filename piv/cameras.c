// cameras.c — a rig's cameras and their calibration file (cameras.h). The
// file is plain text so that people can read and diff it; %.17g makes
// every double read back to the same bits.

#include "piv/cameras.h"
#include "piv/camera_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAGIC "pivfarm-cameras"
#define FILE_VERSION 1
#define MAX_CAMERAS 16
#define MAX_COEFS 64

struct _piv_cameras_t {
    piv_camera_t *cam[MAX_CAMERAS];     // owned, in the order added
    size_t n;                           // how many
    int has_grid;                       // 1: grid is set
    piv_stereo_grid_t grid;             // the stereo grid
    piv_sheet_t sheet;                  // the light sheet (zero: Z = 0)
};

piv_cameras_t *
piv_cameras_new (void)
{
    return calloc (1, sizeof (piv_cameras_t));
}

void
piv_cameras_destroy (piv_cameras_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_cameras_t *self = *self_p;
    for (size_t i = 0; i < self->n; i++)
        piv_camera_destroy (&self->cam[i]);
    free (self);
    *self_p = NULL;
}

int
piv_cameras_add (piv_cameras_t *self, piv_camera_t **camera_p, char *err, size_t errlen)
{
    int id = piv_camera_id (*camera_p);
    if (piv_cameras_find (self, id)) {
        cam_seterr (err, errlen, "camera %d is given twice", id);
        piv_camera_destroy (camera_p);
        return -1;
    }
    if (self->n == MAX_CAMERAS) {
        cam_seterr (err, errlen, "too many cameras: at most %d", MAX_CAMERAS);
        piv_camera_destroy (camera_p);
        return -1;
    }
    self->cam[self->n++] = *camera_p;
    *camera_p = NULL;
    return 0;
}

size_t
piv_cameras_count (const piv_cameras_t *self)
{
    return self->n;
}

const piv_camera_t *
piv_cameras_get (const piv_cameras_t *self, size_t i)
{
    return i < self->n ? self->cam[i] : NULL;
}

const piv_camera_t *
piv_cameras_find (const piv_cameras_t *self, int id)
{
    for (size_t i = 0; i < self->n; i++)
        if (piv_camera_id (self->cam[i]) == id)
            return self->cam[i];
    return NULL;
}

int
piv_cameras_grid (const piv_cameras_t *self, piv_stereo_grid_t *grid)
{
    if (self->has_grid && grid)
        *grid = self->grid;
    return self->has_grid;
}

static int
s_grid_ok (const piv_stereo_grid_t *g)
{
    return isfinite (g->x0) && isfinite (g->y0) && isfinite (g->step) && g->step > 0
           && g->width >= 1 && g->height >= 1 && g->width <= 1 << 16 && g->height <= 1 << 16;
}

int
piv_cameras_set_grid (piv_cameras_t *self, const piv_stereo_grid_t *grid)
{
    if (!grid) {
        self->has_grid = 0;
        return 0;
    }
    if (!s_grid_ok (grid))
        return -1;
    self->grid = *grid;
    self->has_grid = 1;
    return 0;
}

void
piv_cameras_sheet (const piv_cameras_t *self, piv_sheet_t *sheet)
{
    *sheet = self->sheet;
}

static int
s_sheet_ok (const piv_sheet_t *s)
{
    return isfinite (s->z0) && isfinite (s->dzdx) && isfinite (s->dzdy) && fabs (s->dzdx) <= 1
           && fabs (s->dzdy) <= 1;
}

int
piv_cameras_set_sheet (piv_cameras_t *self, const piv_sheet_t *sheet)
{
    if (!s_sheet_ok (sheet))
        return -1;
    self->sheet = *sheet;
    return 0;
}

char *
piv_cameras_format (const piv_cameras_t *self)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream (&buf, &size);
    if (!f)
        return NULL;
    fprintf (f, "# pivfarm camera calibration: world X, Y, Z (mm) to image col, row (px, pixel\n"
                "# centres at integers, origin top-left); written by pivfarm-calib\n");
    fprintf (f, "%s %d\nunits mm\n", FILE_MAGIC, FILE_VERSION);
    if (self->has_grid)
        fprintf (f, "grid %.17g %.17g %.17g %d %d\n", self->grid.x0, self->grid.y0,
                 self->grid.step, self->grid.width, self->grid.height);
    if (self->sheet.z0 != 0 || self->sheet.dzdx != 0 || self->sheet.dzdy != 0)
        fprintf (f, "sheet %.17g %.17g %.17g\n", self->sheet.z0, self->sheet.dzdx,
                 self->sheet.dzdy);
    for (size_t i = 0; i < self->n; i++) {
        piv_camera_info_t info;
        piv_camera_info (self->cam[i], &info);
        const double *c;
        size_t nc = piv_camera_coefs (self->cam[i], &c);
        fprintf (f, "camera %d\nmodel %s\npoints %zu\nplanes %d\n", info.id,
                 piv_camera_model_name (info.model), info.points, info.planes);
        fprintf (f, "rms %.17g\nmax %.17g\n", info.rms, info.max);
        if (isfinite (info.heldout_rms))
            fprintf (f, "heldout_rms %.17g\nheldout_max %.17g\n", info.heldout_rms,
                     info.heldout_max);
        fprintf (f, "bounds");
        for (int j = 0; j < 6; j++)
            fprintf (f, " %.17g", info.bounds[j]);
        fprintf (f, "\ncoefs");
        for (size_t j = 0; j < nc; j++)
            fprintf (f, " %.17g", c[j]);
        fprintf (f, "\nend\n");
    }
    if (fclose (f) != 0) {
        free (buf);
        return NULL;
    }
    return buf;
}

int
piv_cameras_save (const piv_cameras_t *self, const char *path, char *err, size_t errlen)
{
    char ebuf[128];
    char *text = piv_cameras_format (self);
    size_t tmplen = strlen (path) + sizeof ".tmp-XXXXXX";
    char *tmp = malloc (tmplen);
    if (!text || !tmp) {
        cam_seterr (err, errlen, "cannot write '%s': out of memory", path);
        free (text);
        free (tmp);
        return -1;
    }
    snprintf (tmp, tmplen, "%s.tmp-XXXXXX", path);
    int fd = mkstemp (tmp), error = 0;
    if (fd < 0)
        error = errno;
    else {
        // mkstemp makes the file private; a calibration is an ordinary file.
        fchmod (fd, 0644);
        size_t len = strlen (text), done = 0;
        while (!error && done < len) {
            ssize_t w = write (fd, text + done, len - done);
            if (w < 0 && errno != EINTR)
                error = errno;
            else if (w > 0)
                done += (size_t) w;
        }
        if (!error && fsync (fd) != 0)
            error = errno;
        if (close (fd) != 0 && !error)
            error = errno;
        if (!error && rename (tmp, path) != 0)
            error = errno;
        if (error)
            unlink (tmp);
    }
    if (error)
        cam_seterr (err, errlen, "cannot write '%s': %s", path,
                   cam_strerror (error, ebuf, sizeof ebuf));
    free (text);
    free (tmp);
    return error ? -1 : 0;
}

// ------------------------------------------------------------ reading

typedef struct {
    const char *path;   // the file, for messages
    long line;          // the line being read
    char *err;
    size_t errlen;
} s_reader_t;

static int
s_bad (s_reader_t *r, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static int
s_bad (s_reader_t *r, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (what, sizeof what, fmt, ap);
    va_end (ap);
    cam_seterr (r->err, r->errlen, "bad calibration file '%s' line %ld: %s", r->path, r->line,
              what);
    return -1;
}

// The numbers after the key: exactly n (n > 0), or any count up to max
// (n == 0; *got gets it). Finite numbers only.
static int
s_numbers (s_reader_t *r, const char *key, char *rest, double *v, size_t n, size_t max,
           size_t *got)
{
    size_t k = 0;
    char *save = NULL;
    for (char *tok = strtok_r (rest, " \t\r\n", &save); tok; tok = strtok_r (NULL, " \t\r\n", &save)) {
        char *end;
        errno = 0;
        double x = strtod (tok, &end);
        if (end == tok || *end || errno == ERANGE || !isfinite (x))
            return s_bad (r, "'%s' expects numbers, got '%.40s'", key, tok);
        if (k == (n ? n : max))
            return s_bad (r, "'%s' has more than %zu numbers", key, n ? n : max);
        v[k++] = x;
    }
    if (n && k != n)
        return s_bad (r, "'%s' expects %zu number%s, got %zu", key, n, n == 1 ? "" : "s", k);
    if (got)
        *got = k;
    return 0;
}

// What one camera block has seen so far.
typedef struct {
    piv_camera_info_t info;     // the figures read
    double coefs[MAX_COEFS];    // the coefficients read
    size_t ncoefs;
    unsigned seen;              // a bit per key (s_keys' index)
} s_block_t;

static const char *s_keys[] = {"model", "points", "planes", "rms", "max", "heldout_rms",
                               "heldout_max", "bounds", "coefs"};
enum { KEY_MODEL, KEY_POINTS, KEY_PLANES, KEY_RMS, KEY_MAX, KEY_HRMS, KEY_HMAX, KEY_BOUNDS,
       KEY_COEFS, NKEYS };
// Every key but heldout_*, which a fit on fewer than 4 planes has not.
#define REQUIRED_KEYS ((1u << NKEYS) - 1 - (1u << KEY_HRMS) - (1u << KEY_HMAX))

static int
s_block_key (s_reader_t *r, s_block_t *b, const char *key, char *rest)
{
    int k = 0;
    while (k < NKEYS && strcmp (key, s_keys[k]) != 0)
        k++;
    if (k == NKEYS)
        return s_bad (r, "unknown key '%.40s'", key);
    if (b->seen & (1u << k))
        return s_bad (r, "'%s' given twice for camera %d", key, b->info.id);
    b->seen |= 1u << k;
    double v[1];
    switch (k) {
    case KEY_MODEL: {
        char *save = NULL, *name = strtok_r (rest, " \t\r\n", &save);
        if (!name || strtok_r (NULL, " \t\r\n", &save) ||
            piv_camera_model_parse (name, &b->info.model))
            return s_bad (r, "'model' expects soloff or pinhole");
        return 0;
    }
    case KEY_POINTS:
    case KEY_PLANES:
        if (s_numbers (r, key, rest, v, 1, 1, NULL))
            return -1;
        if (v[0] < 0 || v[0] > 1e12 || v[0] != floor (v[0]))
            return s_bad (r, "'%s' expects a count", key);
        if (k == KEY_POINTS)
            b->info.points = (size_t) v[0];
        else
            b->info.planes = (int) v[0];
        return 0;
    case KEY_RMS:
    case KEY_MAX:
    case KEY_HRMS:
    case KEY_HMAX: {
        double *dst = k == KEY_RMS    ? &b->info.rms
                      : k == KEY_MAX  ? &b->info.max
                      : k == KEY_HRMS ? &b->info.heldout_rms
                                      : &b->info.heldout_max;
        return s_numbers (r, key, rest, dst, 1, 1, NULL);
    }
    case KEY_BOUNDS:
        return s_numbers (r, key, rest, b->info.bounds, 6, 6, NULL);
    default:
        return s_numbers (r, key, rest, b->coefs, 0, MAX_COEFS, &b->ncoefs);
    }
}

static int
s_block_end (s_reader_t *r, s_block_t *b, piv_cameras_t *self)
{
    unsigned missing = REQUIRED_KEYS & ~b->seen;
    if (missing) {
        int k = 0;
        while (!(missing & (1u << k)))
            k++;
        return s_bad (r, "camera %d has no '%s'", b->info.id, s_keys[k]);
    }
    if (!(b->seen & (1u << KEY_HRMS)) != !(b->seen & (1u << KEY_HMAX)))
        return s_bad (r, "camera %d has one of heldout_rms and heldout_max without the other",
                      b->info.id);
    char why[256];
    piv_camera_t *cam = piv_camera_from_coefs (&b->info, b->coefs, b->ncoefs, why, sizeof why);
    if (!cam)
        return s_bad (r, "camera %d: %s", b->info.id, why);
    if (piv_cameras_add (self, &cam, why, sizeof why))
        return s_bad (r, "%s", why);
    return 0;
}

// One line (comments and blank lines already skipped): the state machine
// header, units, then blocks 'camera ID' ... 'end'. *block_p is NULL
// outside a block.
static int
s_line (s_reader_t *r, char *line, int *stage, s_block_t *block, int *in_block,
        piv_cameras_t *self)
{
    char *save = NULL, *key = strtok_r (line, " \t\r\n", &save);
    char *rest = save ? save : (char *) "";
    double v[1];
    if (*stage == 0) {
        if (strcmp (key, FILE_MAGIC) != 0)
            return s_bad (r, "expected '%s %d' first: not a camera calibration", FILE_MAGIC,
                          FILE_VERSION);
        if (s_numbers (r, key, rest, v, 1, 1, NULL))
            return -1;
        if (v[0] != FILE_VERSION)
            return s_bad (r, "version %g is not known to this pivfarm (it reads %d)", v[0],
                          FILE_VERSION);
        *stage = 1;
        return 0;
    }
    if (*stage == 1) {
        char *unit = strtok_r (NULL, " \t\r\n", &save);
        if (strcmp (key, "units") != 0 || !unit || strcmp (unit, "mm") != 0 ||
            strtok_r (NULL, " \t\r\n", &save))
            return s_bad (r, "expected 'units mm'");
        *stage = 2;
        return 0;
    }
    if (!*in_block && *stage == 2 && self->n == 0 && strcmp (key, "grid") == 0) {
        double g[5];
        if (self->has_grid)
            return s_bad (r, "'grid' given twice");
        if (s_numbers (r, key, rest, g, 5, 5, NULL))
            return -1;
        piv_stereo_grid_t grid = {g[0], g[1], g[2], (int) g[3], (int) g[4]};
        if (g[3] != floor (g[3]) || g[4] != floor (g[4]) || g[3] > 1 << 16 || g[4] > 1 << 16
            || piv_cameras_set_grid (self, &grid))
            return s_bad (r, "'grid' expects X0 Y0 STEP WIDTH HEIGHT: mm, mm, a step > 0 mm "
                             "per px, and a size of 1 to 65536 px");
        return 0;
    }
    if (!*in_block && *stage == 2 && self->n == 0 && strcmp (key, "sheet") == 0) {
        double z[3];
        if (s_numbers (r, key, rest, z, 3, 3, NULL))
            return -1;
        piv_sheet_t sheet = {z[0], z[1], z[2]};
        if (piv_cameras_set_sheet (self, &sheet))
            return s_bad (r, "'sheet' expects Z0 DZDX DZDY: mm and slopes of at most 1");
        return 0;
    }
    if (!*in_block) {
        if (strcmp (key, "camera") != 0)
            return s_bad (r, "expected 'camera ID', got '%.40s'", key);
        if (s_numbers (r, key, rest, v, 1, 1, NULL))
            return -1;
        if (v[0] < 0 || v[0] > 999 || v[0] != floor (v[0]))
            return s_bad (r, "bad camera number %g: expected 0 to 999", v[0]);
        memset (block, 0, sizeof *block);
        block->info.id = (int) v[0];
        block->info.heldout_rms = block->info.heldout_max = NAN;
        *in_block = 1;
        return 0;
    }
    if (strcmp (key, "camera") == 0)
        return s_bad (r, "camera %d has no 'end'", block->info.id);
    if (strcmp (key, "end") == 0) {
        *in_block = 0;
        return s_block_end (r, block, self);
    }
    return s_block_key (r, block, key, rest);
}

static piv_cameras_t *
s_read (FILE *f, const char *path, char *err, size_t errlen)
{
    char ebuf[128];
    piv_cameras_t *self = piv_cameras_new ();
    s_block_t *block = malloc (sizeof *block);
    s_reader_t r = {path, 0, err, errlen};
    char *line = NULL;
    size_t cap = 0;
    int stage = 0, in_block = 0, rc = self && block ? 0 : -1;
    if (rc)
        cam_seterr (err, errlen, "cannot read '%s': out of memory", path);
    while (rc == 0 && getline (&line, &cap, f) >= 0) {
        r.line++;
        char *s = line;
        while (isspace ((unsigned char) *s))
            s++;
        if (!*s || *s == '#')
            continue;
        rc = s_line (&r, s, &stage, block, &in_block, self);
    }
    if (rc == 0 && ferror (f)) {
        cam_seterr (err, errlen, "cannot read '%s': %s", path,
                   cam_strerror (errno, ebuf, sizeof ebuf));
        rc = -1;
    }
    if (rc == 0 && (stage < 2 || in_block || self->n == 0)) {
        r.line++;
        rc = s_bad (&r, "%s", in_block ? "the last camera has no 'end'"
                             : stage < 2 ? "the file ends before its header"
                                         : "no camera");
    }
    free (line);
    free (block);
    if (rc)
        piv_cameras_destroy (&self);
    return self;
}

piv_cameras_t *
piv_cameras_load (const char *path, char *err, size_t errlen)
{
    char ebuf[128];
    FILE *f = fopen (path, "r");
    if (!f) {
        cam_seterr (err, errlen, "cannot open '%s': %s", path,
                   cam_strerror (errno, ebuf, sizeof ebuf));
        return NULL;
    }
    piv_cameras_t *self = s_read (f, path, err, errlen);
    fclose (f);
    return self;
}

piv_cameras_t *
piv_cameras_parse (const char *text, const char *name, char *err, size_t errlen)
{
    FILE *f = fmemopen ((void *) text, strlen (text), "r");
    if (!f) {
        cam_seterr (err, errlen, "cannot read '%s': out of memory", name);
        return NULL;
    }
    piv_cameras_t *self = s_read (f, name, err, errlen);
    fclose (f);
    return self;
}
