// calib.c — the calibration of an experiment: its text forms (one key at a
// time, the whole canonical text, the configuration's rules), the words a
// person reads, and the conversions from image units. See calib.h.

#include "piv/calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// What each key accepts, in the words of every refusal.
#define S_SCALE_FORMS                                                                              \
    "a positive length per pixel such as 0.05 mm/px or 20 px/mm (units " PIV_CALIB_LENGTH_UNITS ")"
#define S_DT_FORMS                                                                                 \
    "a positive time between frames such as 1 ms, 500 us or 0.002 s (units s, ms, us, ns)"
#define S_ORIGIN_FORMS "X,Y in image pixels (column, row), each >= 0, such as 0,0"
#define S_YAXIS_FORMS "up or down"
#define S_KEYS "scale, dt, origin or y_axis"

// Units by name and their size in metres or seconds. "µ" is accepted as the
// micro sign (U+00B5) and as the Greek letter mu (U+03BC).
typedef struct {
    const char *name; // as written after the number
    double size;      // metres or seconds
} s_unit_t;
static const s_unit_t s_lengths[] = {{"um", 1e-6}, {"\xc2\xb5m", 1e-6}, {"\xce\xbcm", 1e-6},
                                     {"mm", 1e-3}, {"m", 1.0},          {NULL, 0}};
static const s_unit_t s_times[] = {
    {"s", 1.0},          {"ms", 1e-3}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6},
    {"\xce\xbcs", 1e-6}, {"ns", 1e-9}, {NULL, 0}};

void
piv_calib_init (piv_calib_t *c)
{
    memset (c, 0, sizeof *c);
    c->y_up = 1;
}

// The size of the unit named by the len chars at 'name' in 'units', or 0.
static double
s_unit (const s_unit_t *units, const char *name, size_t len)
{
    for (int i = 0; units[i].name; i++)
        if (strlen (units[i].name) == len && memcmp (units[i].name, name, len) == 0)
            return units[i].size;
    return 0;
}

// A finite decimal number at the start of 'text' after blanks (no hex, inf
// or nan) into *x; the rest, after blanks, in *rest. 0 or -1.
static int
s_number (const char *text, double *x, const char **rest)
{
    while (*text == ' ' || *text == '\t')
        text++;
    const char *p = text;
    if (*p == '+' || *p == '-')
        p++;
    if (!((*p >= '0' && *p <= '9') || *p == '.') || (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')))
        return -1;
    char *end;
    *x = strtod (text, &end);
    if (end == text || !isfinite (*x))
        return -1;
    while (*end == ' ' || *end == '\t')
        end++;
    *rest = end;
    return 0;
}

// Length of 'text' without trailing blanks.
static size_t
s_trimmed (const char *text)
{
    size_t len = strlen (text);
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
        len--;
    return len;
}

// "0.05 mm/px" or "20 px/mm" into metres per pixel. 0 or -1.
static int
s_parse_scale (const char *text, double *scale)
{
    double x;
    const char *unit;
    if (s_number (text, &x, &unit) != 0 || !(x > 0))
        return -1;
    size_t len = s_trimmed (unit);
    double size = 0;
    if (len > 3 && memcmp (unit + len - 3, "/px", 3) == 0)
        size = s_unit (s_lengths, unit, len - 3) * x;
    else if (len > 3 && memcmp (unit, "px/", 3) == 0) {
        double per = s_unit (s_lengths, unit + 3, len - 3);
        size = per > 0 ? per / x : 0;
    }
    if (!(size > 0) || !isfinite (size))
        return -1;
    *scale = size;
    return 0;
}

int
piv_calib_length (const char *text, double *number, double *unit, char *err, size_t errlen)
{
    double x;
    const char *rest;
    if (s_number (text, &x, &rest) != 0) {
        snprintf (err, errlen, "'%s' is not a number", text);
        return -1;
    }
    size_t len = s_trimmed (rest);
    double size = len ? s_unit (s_lengths, rest, len) : 0;
    if (len && !(size > 0)) {
        snprintf (err, errlen, "unknown length unit '%.*s': expected " PIV_CALIB_LENGTH_UNITS,
                  (int) len, rest);
        return -1;
    }
    *number = x;
    *unit = size;
    return 0;
}

const char *
piv_calib_length_unit (double largest, double *size)
{
    // The scale's thresholds (s_scale_text), for a length as for a length
    // per pixel.
    const s_unit_t *u = largest >= 1 ? &s_lengths[4] : largest >= 1e-5 ? &s_lengths[3]
                                                                          : &s_lengths[1];
    *size = u->size;
    return u->name;
}

// "1 ms" into seconds. 0 or -1.
static int
s_parse_dt (const char *text, double *dt)
{
    double x;
    const char *unit;
    if (s_number (text, &x, &unit) != 0 || !(x > 0))
        return -1;
    double size = s_unit (s_times, unit, s_trimmed (unit)) * x;
    if (!(size > 0) || !isfinite (size))
        return -1;
    *dt = size;
    return 0;
}

// "X,Y" (blanks around each allowed), each finite, and >= 0 unless
// 'anywhere' (a recorded calibration: a stereo grid's origin may lie
// outside the frames, piv_stereo_grid_calib; one an operator types lies in
// the image). 0 or -1.
static int
s_parse_origin (const char *text, int anywhere, double *ox, double *oy)
{
    const char *rest;
    double x, y;
    if (s_number (text, &x, &rest) != 0 || *rest != ',' || (x < 0 && !anywhere))
        return -1;
    rest++;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    if (s_number (rest, &y, &rest) != 0 || *rest != '\0' || (y < 0 && !anywhere))
        return -1;
    *ox = x;
    *oy = y;
    return 0;
}

// Applies one key to *c. NULL, or what the key accepts ('*known' 0 when the
// key itself is unknown); *c unchanged on failure.
static const char *
s_apply (piv_calib_t *c, const char *key, const char *value, int anywhere, int *known)
{
    *known = 1;
    if (strcmp (key, "scale") == 0)
        return s_parse_scale (value, &c->scale) == 0 ? NULL : S_SCALE_FORMS;
    if (strcmp (key, "dt") == 0)
        return s_parse_dt (value, &c->dt) == 0 ? NULL : S_DT_FORMS;
    if (strcmp (key, "origin") == 0)
        return s_parse_origin (value, anywhere, &c->origin_x, &c->origin_y) == 0 ? NULL
                                                                                 : S_ORIGIN_FORMS;
    if (strcmp (key, "y_axis") == 0) {
        size_t len = s_trimmed (value);
        while (*value == ' ')
            value++, len--;
        if (len == 2 && memcmp (value, "up", 2) == 0)
            c->y_up = 1;
        else if (len == 4 && memcmp (value, "down", 4) == 0)
            c->y_up = 0;
        else
            return S_YAXIS_FORMS;
        return NULL;
    }
    *known = 0;
    return S_KEYS;
}

// piv_calib_set, the origin anywhere when 'anywhere' (s_parse_origin).
static int
s_set (piv_calib_t *c, const char *key, const char *value, int anywhere, char *err,
       size_t errlen)
{
    piv_calib_t next = *c;
    int known;
    const char *forms = s_apply (&next, key, value, anywhere, &known);
    if (forms) {
        if (known)
            snprintf (err, errlen, "bad calibration %s '%s': expected %s", key, value, forms);
        else
            snprintf (err, errlen, "unknown calibration key '%s': expected %s", key, forms);
        return -1;
    }
    next.set = next.scale > 0 && next.dt > 0;
    *c = next;
    return 0;
}

int
piv_calib_set (piv_calib_t *c, const char *key, const char *value, char *err, size_t errlen)
{
    return s_set (c, key, value, 0, err, errlen);
}

int
piv_calib_from_keys (piv_calib_t *c, const char *scale, const char *dt, const char *origin,
                     const char *y_axis, char *err, size_t errlen)
{
    const char *keys[4] = {"scale", "dt", "origin", "y_axis"};
    const char *values[4] = {scale, dt, origin, y_axis};
    piv_calib_init (c);
    for (int k = 0; k < 4; k++)
        if (values[k] && values[k][0] && piv_calib_set (c, keys[k], values[k], err, errlen) != 0) {
            piv_calib_init (c);
            return -1;
        }
    return 0;
}

int
piv_calib_parse (const char *text, piv_calib_t *c, char *err, size_t errlen)
{
    piv_calib_t next;
    piv_calib_init (&next);
    size_t len = strlen (text);
    char *copy = malloc (len + 1);
    if (!copy) {
        snprintf (err, errlen, "bad calibration '%s': no memory", text);
        return -1;
    }
    memcpy (copy, text, len + 1);
    int rc = 0, words = 0, none = 0;
    char *save = NULL;
    for (char *word = strtok_r (copy, " \t\n", &save); word && rc == 0;
         word = strtok_r (NULL, " \t\n", &save), words++) {
        char *eq = strchr (word, '=');
        if (strcmp (word, "none") == 0)
            none = 1;
        else if (!eq) {
            snprintf (err, errlen, "bad calibration '%s': '%s' is not key=value", text, word);
            rc = -1;
        }
        else {
            *eq = '\0';
            rc = s_set (&next, word, eq + 1, 1, err, errlen);
        }
    }
    free (copy);
    if (rc == 0 && none && words > 1) {
        snprintf (err, errlen, "bad calibration '%s': 'none' stands alone", text);
        rc = -1;
    }
    if (rc == 0 && words > 0 && !none && !next.set) {
        snprintf (err, errlen, "bad calibration '%s': scale and dt are both needed", text);
        rc = -1;
    }
    if (rc == 0)
        *c = next;
    return rc;
}

// 'value' to p significant digits, as a plain decimal (500, 0.02) where one
// reads well, else with an exponent; and whether it parses back to x (as
// a value times 'size', or with 'per' 'size' over it).
static int
s_digits (double x, double value, double size, int per, int p, char *buf, size_t len)
{
    char e[32];
    snprintf (e, sizeof e, "%.*e", p - 1, value);
    int exponent = atoi (strchr (e, 'e') + 1);
    if (exponent >= -6 && exponent < 15)
        snprintf (buf, len, "%.*f", p - 1 - exponent > 0 ? p - 1 - exponent : 0, value);
    else
        snprintf (buf, len, "%s", e);
    double back = strtod (buf, NULL);
    return (per ? size / back : back * size) == x;
}

// The shortest decimal text of at most 'most' significant digits that
// parses back to x (a value times 'size', or with 'per' 'size' over the
// value: "20 px/mm"), into buf. 0, or -1 when none does. A unit whose
// 'most' digits do not read back is not tried further: the broker formats
// the calibration of every result, and a value typed in another unit
// would cost every length in every unit.
static int
s_shortest (double x, double size, int per, int most, char *buf, size_t len)
{
    double value = per ? size / x : x / size;
    for (int p = 1; p <= most; p++) {
        // Typed values have few digits: past 3, check the unit at all first.
        if (p == 4 && most < 17 && !s_digits (x, value, size, per, most, buf, len))
            return -1;
        if (s_digits (x, value, size, per, p, buf, len))
            return 0;
    }
    return -1;
}

// Digits a prefixed unit may take before the next is tried: past this
// the value was not typed in it. The base unit's %.17g always reads back.
#define S_TYPED_DIGITS 15

// The value as it was most likely typed: the first unit of 'units' (in
// order of preference) in which a short number reads back exactly to x,
// "0.02" and "mm"; the base unit (size 1, which 'units' holds) takes any
// x. 'per' (scale): each unit also as "px/UNIT" after the "UNIT/px" ones.
// 'people': "µs" and "µm" (else "us" and "um"), and at most 6 digits: past
// them, the value rounded in the first unit (what people read, not what
// reads back). Fills num and unit (after the number: "mm/px", "px/mm", "ms").
static void
s_as_typed (double x, const s_unit_t *const *units, int per, int people, char *num,
            size_t numlen, char *unit, size_t unitlen)
{
    int base = 0;
    while (units[base]->size != 1.0)
        base++;
    const s_unit_t *u = NULL;
    int form = 0;
    for (form = 0; form <= per && !u; form++)
        for (int i = 0; units[i] && !u; i++)
            if (s_shortest (x, units[i]->size, form, people ? 6 : S_TYPED_DIGITS, num, numlen)
                == 0)
                u = units[i];
    form--;
    if (!u && people) {
        snprintf (num, numlen, "%.6g", x / units[0]->size);
        u = units[0], form = 0;
    }
    if (!u) {  // the base unit reads back at 17 digits
        s_shortest (x, 1.0, 0, 17, num, numlen);
        u = units[base], form = 0;
    }
    const char *name = u->name, *micro = people && name[0] == 'u' ? "\xc2\xb5" : "";
    if (*micro)
        name++;
    snprintf (unit, unitlen, "%s%s%s%s", per && form ? "px/" : "", micro, name,
              per && !form ? "/px" : "");
}

// The units to try for a scale or a time, the one that reads best first:
// lengths per pixel in mm down to 0.01 mm/px, then in um (in m from 1
// m/px); times in the largest unit that keeps the number at 1 or more.
static void
s_scale_text (double scale, int people, char *num, size_t numlen, char *unit, size_t unitlen)
{
    const s_unit_t *mm = &s_lengths[3], *um = &s_lengths[0], *m = &s_lengths[4];
    const s_unit_t *order[] = {scale >= 1 ? m : scale >= 1e-5 ? mm : um,
                               scale >= 1 || scale < 1e-5 ? mm : um, scale >= 1 ? um : m, NULL};
    s_as_typed (scale, order, 1, people, num, numlen, unit, unitlen);
}

static void
s_dt_text (double dt, int people, char *num, size_t numlen, char *unit, size_t unitlen)
{
    const s_unit_t *s = &s_times[0], *ms = &s_times[1], *us = &s_times[2], *ns = &s_times[5];
    const s_unit_t *first = dt >= 1 ? s : dt >= 1e-3 ? ms : dt >= 1e-6 ? us : ns;
    const s_unit_t *rest[] = {ms, us, ns, s}, *order[6] = {first};
    int k = 1;
    for (int i = 0; i < 4; i++)
        if (rest[i] != first)
            order[k++] = rest[i];
    order[k] = NULL;
    s_as_typed (dt, order, 0, people, num, numlen, unit, unitlen);
}

int
piv_calib_format (const piv_calib_t *c, char *buf, size_t size)
{
    int n;
    if (c->set) {
        char scale[32], scale_unit[16], dt[32], dt_unit[16], ox[32], oy[32];
        s_scale_text (c->scale, 0, scale, sizeof scale, scale_unit, sizeof scale_unit);
        s_dt_text (c->dt, 0, dt, sizeof dt, dt_unit, sizeof dt_unit);
        s_shortest (c->origin_x, 1.0, 0, 17, ox, sizeof ox);
        s_shortest (c->origin_y, 1.0, 0, 17, oy, sizeof oy);
        n = snprintf (buf, size, "scale=%s%s dt=%s%s origin=%s,%s y_axis=%s", scale, scale_unit, dt,
                      dt_unit, ox, oy, c->y_up ? "up" : "down");
    }
    else
        n = snprintf (buf, size, "none");
    return n >= 0 && (size_t) n < size ? n : -1;
}

int
piv_calib_describe (const piv_calib_t *c, char *buf, size_t size)
{
    int n;
    if (!c || !c->set)
        n = snprintf (buf, size, "not calibrated (px, frames)");
    else {
        // As the canonical text (as typed), with spaces and the micro sign;
        // rounded to 6 digits.
        char scale[32], scale_unit[16], dt[32], dt_unit[16];
        s_scale_text (c->scale, 1, scale, sizeof scale, scale_unit, sizeof scale_unit);
        s_dt_text (c->dt, 1, dt, sizeof dt, dt_unit, sizeof dt_unit);
        n = snprintf (buf, size, "%s %s, dt %s %s, origin (%g, %g) px, y %s", scale, scale_unit, dt,
                      dt_unit, c->origin_x, c->origin_y, c->y_up ? "up" : "down");
    }
    return n >= 0 && (size_t) n < size ? n : -1;
}

int
piv_calib_check_image (const piv_calib_t *c, int width, int height, char *err, size_t errlen)
{
    if (c->origin_x < width && c->origin_y < height)
        return 0;
    snprintf (err, errlen, "calibration origin %g,%g lies outside the %dx%d image", c->origin_x,
              c->origin_y, width, height);
    return -1;
}

int
piv_calib_check_key (const char *name, const char *value, char *norm, size_t normlen, char *why,
                     size_t whylen)
{
    piv_calib_t c;
    piv_calib_init (&c);
    int known;
    const char *forms = s_apply (&c, name, value, 0, &known);
    if (forms && !known) {
        snprintf (why, whylen, "is not a calibration key: expected " S_KEYS);
        return -1;
    }
    if (forms) {
        const char *what = name[0] == 's'   ? "is not a length per pixel"
                           : name[0] == 'd' ? "is not a time between frames"
                           : name[0] == 'o' ? "is not an image position"
                                            : "is not a direction";
        snprintf (why, whylen, "%s: expected %s", what, forms);
        return -1;
    }
    // The value kept is the canonical one, which piv_calib_set reads back.
    int n = name[0] == 's'   ? snprintf (norm, normlen, "%.17g m/px", c.scale)
            : name[0] == 'd' ? snprintf (norm, normlen, "%.17g s", c.dt)
            : name[0] == 'o' ? snprintf (norm, normlen, "%.17g,%.17g", c.origin_x, c.origin_y)
                             : snprintf (norm, normlen, "%s", c.y_up ? "up" : "down");
    if (n < 0 || (size_t) n >= normlen) {
        snprintf (why, whylen, "is too long");
        return -1;
    }
    return 0;
}

const char *
piv_calib_unit (const piv_calib_t *c, piv_unit_t unit)
{
    int si = c && c->set;
    switch (unit) {
    case PIV_UNIT_LENGTH:
        return si ? "m" : "px";
    case PIV_UNIT_VELOCITY:
        return si ? "m/s" : "px/frame";
    case PIV_UNIT_RATE:
        return si ? "1/s" : "1/frame";
    }
    return "";
}

void
piv_calib_position (const piv_calib_t *c, double x_px, double y_px, double *x, double *y)
{
    if (!c || !c->set) {
        *x = x_px;
        *y = y_px;
        return;
    }
    *x = (x_px - c->origin_x) * c->scale;
    *y = (y_px - c->origin_y) * c->scale * (c->y_up ? -1 : 1);
}

void
piv_calib_velocity (const piv_calib_t *c, double u_px, double v_px, double *u, double *v)
{
    if (!c || !c->set) {
        *u = u_px;
        *v = v_px;
        return;
    }
    double k = c->scale / c->dt;
    *u = u_px * k;
    *v = v_px * k * (c->y_up ? -1 : 1);
}

double
piv_calib_vorticity (const piv_calib_t *c, double w_per_frame)
{
    if (!c || !c->set)
        return w_per_frame;
    return w_per_frame / c->dt * (c->y_up ? -1 : 1);
}

double
piv_calib_divergence (const piv_calib_t *c, double d_per_frame)
{
    return c && c->set ? d_per_frame / c->dt : d_per_frame;
}

double
piv_calib_speed (const piv_calib_t *c, double speed_px_per_frame)
{
    double ku, kv;
    piv_calib_velocity (c, 1, 1, &ku, &kv);
    return speed_px_per_frame * fabs (ku);
}

piv_field_t *
piv_calib_field (const piv_calib_t *c, const piv_field_t *field)
{
    piv_field_t *copy = piv_field_dup (field);
    if (!copy)
        return NULL;
    size_t n = (size_t) field->nx * (size_t) field->ny;
    for (size_t k = 0; k < n; k++) {
        double x, y, u, v;
        piv_calib_position (c, field->x[k], field->y[k], &x, &y);
        piv_calib_velocity (c, field->u[k], field->v[k], &u, &v);
        copy->x[k] = (float) x;
        copy->y[k] = (float) y;
        copy->u[k] = (float) u;
        copy->v[k] = (float) v;
        if (copy->w) // along +Z, scaled as u (residual stays in image px)
            copy->w[k] = (float) piv_calib_speed (c, field->w[k]);
        if (copy->sigma_u && copy->sigma_v) { // a spread: scaled, never turned by y_up
            copy->sigma_u[k] = (float) piv_calib_speed (c, field->sigma_u[k]);
            copy->sigma_v[k] = (float) piv_calib_speed (c, field->sigma_v[k]);
        }
    }
    return copy;
}
