// flow.c — the known synthetic flows (evaluation, 'kind:numbers' specs, the
// truth file written beside synthetic images) and the scoring of a measured
// field against them. See flow.h.

#include "piv/flow.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The maximum of (1 - exp(-s^2)) / s, reached at s = 1.1209064227785340:
// dividing by it makes p0 the peak displacement of the Lamb-Oseen vortex.
#define LAMB_OSEEN_PEAK 0.63817268633895148

static const struct {
    const char *name;     // as in specs and truth files
    piv_flow_kind_t kind;  // enum value
    int numbers;          // parameters after the colon
} s_kinds[] = {
    {"uniform", PIV_FLOW_UNIFORM, 2},       {"rotation", PIV_FLOW_ROTATION, 1},
    {"lamb-oseen", PIV_FLOW_LAMB_OSEEN, 2}, {"shear", PIV_FLOW_SHEAR, 1},
    {"sine", PIV_FLOW_SINE, 2},
};
#define KIND_COUNT ((int) (sizeof s_kinds / sizeof s_kinds[0]))
#define KIND_LIST "uniform, rotation, lamb-oseen, shear, sine"

// Index in s_kinds of the kind named by the first len chars of name, or -1.
static int
s_kind_find (const char *name, size_t len)
{
    for (int i = 0; i < KIND_COUNT; i++)
        if (strlen (s_kinds[i].name) == len && memcmp (s_kinds[i].name, name, len) == 0)
            return i;
    return -1;
}

static int
s_kind_index (piv_flow_kind_t kind)
{
    for (int i = 0; i < KIND_COUNT; i++)
        if (s_kinds[i].kind == kind)
            return i;
    return -1;
}

// Parses one finite double that spans all of [text, end) (end NULL: up to the
// terminating NUL). 0 or -1.
static int
s_parse_number (const char *text, const char *end, double *value)
{
    char buf[64];
    size_t len = end ? (size_t) (end - text) : strlen (text);
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy (buf, text, len);
    buf[len] = '\0';
    // Overflow gives HUGE_VAL, refused as not finite; underflow (ERANGE
    // too) gives the nearest subnormal or zero, which %.17g may have written.
    char *stop;
    double x = strtod (buf, &stop);
    if (stop == buf || *stop != '\0' || !isfinite (x))
        return -1;
    *value = x;
    return 0;
}

// Checks parameters that would make the flow undefined; NULL or the cause.
static const char *
s_flow_check (const piv_flow_t *flow)
{
    if (!isfinite (flow->p0) || !isfinite (flow->p1) || !isfinite (flow->xc)
        || !isfinite (flow->yc))
        return "parameters must be finite";
    if (flow->kind == PIV_FLOW_LAMB_OSEEN && !(flow->p1 > 0))
        return "core radius must be positive";
    if (flow->kind == PIV_FLOW_SINE && flow->p1 == 0)
        return "wavelength must not be zero";
    return NULL;
}

// Sign convention: with positive omega (rotation) or positive peak
// displacement (lamb-oseen) a particle on the +x side of the centre moves
// towards +y, i.e. from +x towards +y: counter-clockwise in the (x, y)
// coordinates, which on screen (y downward) looks clockwise.
void
piv_flow_eval (const piv_flow_t *flow, double x, double y, double *u, double *v)
{
    double dx = x - flow->xc, dy = y - flow->yc;
    switch (flow->kind) {
    case PIV_FLOW_UNIFORM:
        *u = flow->p0;
        *v = flow->p1;
        return;
    case PIV_FLOW_ROTATION:
        *u = -flow->p0 * dy;
        *v = flow->p0 * dx;
        return;
    case PIV_FLOW_LAMB_OSEEN: {
        // u_theta(r) = p0 / PEAK * (1 - exp(-s^2)) / s with s = r / rc; the
        // unit azimuthal vector is (-dy, dx) / r, hence one division by r^2.
        double r2 = dx * dx + dy * dy, rc = flow->p1;
        if (r2 == 0 || !(rc > 0)) {
            *u = *v = 0;
            return;
        }
        double k = flow->p0 / LAMB_OSEEN_PEAK * -expm1 (-r2 / (rc * rc)) * rc / r2;
        *u = -k * dy;
        *v = k * dx;
        return;
    }
    case PIV_FLOW_SHEAR:
        *u = flow->p0 * dy;
        *v = 0;
        return;
    case PIV_FLOW_SINE:
        *u = flow->p1 != 0 ? flow->p0 * sin (2 * M_PI * y / flow->p1) : 0;
        *v = 0;
        return;
    }
    *u = *v = 0;
}

int
piv_flow_parse (piv_flow_t *flow, const char *spec, int width, int height, char *err,
                size_t errlen)
{
    if (!spec || !*spec) {
        snprintf (err, errlen, "bad flow '': expects kind:numbers (" KIND_LIST ")");
        return -1;
    }
    const char *colon = strchr (spec, ':');
    size_t namelen = colon ? (size_t) (colon - spec) : strlen (spec);
    int index = s_kind_find (spec, namelen);
    if (index < 0) {
        snprintf (err, errlen, "bad flow '%s': unknown kind (" KIND_LIST ")", spec);
        return -1;
    }
    int want = s_kinds[index].numbers;
    double p[2] = {0, 0};
    int got = 0;
    const char *text = colon ? colon + 1 : NULL;
    while (text) {
        const char *comma = strchr (text, ',');
        if (got == want || s_parse_number (text, comma, &p[got]) != 0)
            goto bad_numbers;
        got++;
        text = comma ? comma + 1 : NULL;
    }
    if (got != want)
        goto bad_numbers;

    piv_flow_t parsed = {.kind = s_kinds[index].kind,
                         .p0 = p[0],
                         .p1 = p[1],
                         .xc = (width - 1) / 2.0,
                         .yc = (height - 1) / 2.0};
    const char *cause = s_flow_check (&parsed);
    if (cause) {
        snprintf (err, errlen, "bad flow '%s': %s", spec, cause);
        return -1;
    }
    *flow = parsed;
    return 0;

bad_numbers:
    snprintf (err, errlen, "bad flow '%s': %s expects %d number%s", spec, s_kinds[index].name,
              want, want == 1 ? "" : "s");
    return -1;
}

int
piv_flow_save (const piv_flow_t *flow, const char *path, char *err, size_t errlen)
{
    int index = s_kind_index (flow->kind);
    if (index < 0) {
        snprintf (err, errlen, "cannot write '%s': unknown flow kind %d", path, (int) flow->kind);
        return -1;
    }
    FILE *file = fopen (path, "w");
    if (!file) {
        snprintf (err, errlen, "cannot write '%s': %s", path, strerror (errno));
        return -1;
    }
    // %.17g: strtod reads back the very same doubles.
    fprintf (file, "kind %s\np0 %.17g\np1 %.17g\nxc %.17g\nyc %.17g\n", s_kinds[index].name,
             flow->p0, flow->p1, flow->xc, flow->yc);
    int failed = ferror (file);
    if (fclose (file) != 0)
        failed = 1;
    if (failed) {
        snprintf (err, errlen, "cannot write '%s': %s", path, strerror (errno ? errno : EIO));
        remove (path);
        return -1;
    }
    return 0;
}

int
piv_flow_load (piv_flow_t *flow, const char *path, char *err, size_t errlen)
{
    static const char *const keys[] = {"kind", "p0", "p1", "xc", "yc"};
    FILE *file = fopen (path, "r");
    if (!file) {
        snprintf (err, errlen, "cannot open '%s': %s", path, strerror (errno));
        return -1;
    }
    piv_flow_t loaded = {PIV_FLOW_UNIFORM, 0, 0, 0, 0};
    double *values[] = {NULL, &loaded.p0, &loaded.p1, &loaded.xc, &loaded.yc};
    int seen[5] = {0};
    char line[256];
    int lineno = 0;
    while (fgets (line, sizeof line, file)) {
        lineno++;
        size_t len = strlen (line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            snprintf (err, errlen, "bad flow file '%s': line %d is too long", path, lineno);
            goto fail;
        }
        // Strip the line end and surrounding blanks; skip blank and '#' lines.
        while (len > 0 && strchr (" \t\r\n", line[len - 1]))
            line[--len] = '\0';
        char *key = line + strspn (line, " \t");
        if (*key == '\0' || *key == '#')
            continue;
        size_t keylen = strcspn (key, " \t");
        char *value = key + keylen + strspn (key + keylen, " \t");
        key[keylen] = '\0';
        int k = 0;
        while (k < 5 && strcmp (key, keys[k]) != 0)
            k++;
        if (k == 5) {
            snprintf (err, errlen, "bad flow file '%s': line %d: unknown key '%s'", path,
                      lineno, key);
            goto fail;
        }
        if (seen[k]) {
            snprintf (err, errlen, "bad flow file '%s': line %d: '%s' given twice", path,
                      lineno, key);
            goto fail;
        }
        seen[k] = 1;
        if (k == 0) {
            int index = s_kind_find (value, strlen (value));
            if (index < 0) {
                snprintf (err, errlen,
                          "bad flow file '%s': line %d: unknown kind '%s' (" KIND_LIST ")",
                          path, lineno, value);
                goto fail;
            }
            loaded.kind = s_kinds[index].kind;
        }
        else if (s_parse_number (value, NULL, values[k]) != 0) {
            snprintf (err, errlen, "bad flow file '%s': line %d: '%s' is not a number", path,
                      lineno, value);
            goto fail;
        }
    }
    if (ferror (file)) {
        snprintf (err, errlen, "cannot read '%s': %s", path, strerror (errno ? errno : EIO));
        goto fail;
    }
    for (int k = 0; k < 5; k++)
        if (!seen[k]) {
            snprintf (err, errlen, "bad flow file '%s': no '%s' line", path, keys[k]);
            goto fail;
        }
    const char *cause = s_flow_check (&loaded);
    if (cause) {
        snprintf (err, errlen, "bad flow file '%s': %s", path, cause);
        goto fail;
    }
    fclose (file);
    *flow = loaded;
    return 0;

fail:
    fclose (file);
    return -1;
}

// Returns 0, or -1 (score zeroed) when the arguments are missing or no vector
// qualifies. The image spans [-0.5, width - 0.5] in pixel-centre
// coordinates, so a window of size w lying just inside has its centre w/2
// inside: margin = w/2 keeps every window wholly within the image.
int
piv_score (const piv_field_t *field, const piv_flow_t *flow, int max_flag, double margin,
           int width, int height, piv_score_t *score)
{
    if (!score)
        return -1;
    memset (score, 0, sizeof *score);
    if (!field || !flow)
        return -1;
    double sum_u = 0, sum_v = 0, sum_uu = 0, sum_vv = 0, max2 = 0;
    int count = 0;
    int n = field->nx * field->ny;
    for (int k = 0; k < n; k++) {
        if (field->flags[k] > max_flag)
            continue;
        double x = field->x[k], y = field->y[k];
        if (margin > 0
            && (x + 0.5 < margin || width - 0.5 - x < margin || y + 0.5 < margin
                || height - 0.5 - y < margin))
            continue;
        double u, v;
        piv_flow_eval (flow, x, y, &u, &v);
        double du = field->u[k] - u, dv = field->v[k] - v;
        sum_u += du;
        sum_v += dv;
        sum_uu += du * du;
        sum_vv += dv * dv;
        if (du * du + dv * dv > max2)
            max2 = du * du + dv * dv;
        count++;
    }
    if (count == 0)
        return -1;
    score->count = count;
    score->rms = sqrt ((sum_uu + sum_vv) / count);
    score->rms_u = sqrt (sum_uu / count);
    score->rms_v = sqrt (sum_vv / count);
    score->bias_u = sum_u / count;
    score->bias_v = sum_v / count;
    score->max_error = sqrt (max2);
    return 0;
}
