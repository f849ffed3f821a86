// feedback.c — ROI figures of a vector field, the PI controller the
// broker runs on one of them, and their settings as text and JSON.
// No I/O: the broker stores, publishes and logs what these functions write.

#include "broker/feedback.h"
#include "common/jout.h"
#include "common/util.h"
#include "piv/derived.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
feedback_quantity_name (feedback_quantity_t q)
{
    const feedback_quantity_info_t *info = feedback_quantity_get ((int) q);
    return info ? info->name : "?";
}

void
feedback_settings_init (feedback_settings_t *s)
{
    memset (s, 0, sizeof *s);
    s->quantity = FEEDBACK_MEAN_U;
    s->out_min = -INFINITY;
    s->out_max = INFINITY;
}

// ---------------------------------------------------------------------------
// Settings from text

// A whole-string number (leading spaces aside); inf allowed, NaN never.
static int
s_parse_number (const char *text, double *x)
{
    char *end;
    double v = strtod (text, &end);
    if (end == text || *end != '\0' || isnan (v))
        return -1;
    *x = v;
    return 0;
}

static int
s_bad_value (const char *key, const char *value, const char *why, char *err, size_t errlen)
{
    char shown[UTIL_SHOWN];  // a long value never pushes the reason out
    snprintf (err, errlen, "bad value '%s' for '%s': %s", util_shorten (value, shown, sizeof shown),
              key, why);
    return -1;
}

// "0,-5,20,15mm" or "0mm,-5mm,20mm,15mm" (metres, physical) or "0,-5,20,15"
// (px): the units piv_calib_length knows, the calibration's own table.
static int
s_set_roi (feedback_settings_t *s, const char *value, char *err, size_t errlen)
{
    if (strcmp (value, "all") == 0) {
        s->roi_set = 0;
        s->roi_physical = 0;
        return 0;
    }
    static const char want[] = "want x0,y0,x1,y1 (finite numbers, px, or with a length unit "
                               "after the last or after each: " PIV_CALIB_LENGTH_UNITS ") or all";
    double roi[4], unit[4];
    char copy[256], why[480];
    if (strlen (value) >= sizeof copy) {
        snprintf (why, sizeof why, "%zu bytes, over the %zu a roi may have", strlen (value),
                  sizeof copy - 1);
        return s_bad_value ("roi", value, why, err, errlen);
    }
    strcpy (copy, value);
    int count = 0;
    char *field = copy;  // by hand: strtok would merge empty fields ("1,,2,3")
    for (;;) {
        char *comma = strchr (field, ',');
        if (comma)
            *comma = '\0';
        char bad[160];
        if (count == 4)
            return s_bad_value ("roi", value, want, err, errlen);
        if (piv_calib_length (field, &roi[count], &unit[count], bad, sizeof bad) != 0) {
            snprintf (why, sizeof why, "%s; %s", bad, want);
            return s_bad_value ("roi", value, why, err, errlen);
        }
        count++;
        if (!comma)
            break;
        field = comma + 1;
    }
    if (count != 4)
        return s_bad_value ("roi", value, want, err, errlen);
    // One unit after the last number applies to all four; else each has
    // its own, or none has.
    int with = (unit[0] > 0) + (unit[1] > 0) + (unit[2] > 0) + (unit[3] > 0);
    if (with == 1 && unit[3] > 0)
        unit[0] = unit[1] = unit[2] = unit[3];
    else if (with != 0 && with != 4)
        return s_bad_value ("roi", value,
                            "a unit on some numbers and not on others: put one after the "
                            "last or one after each",
                            err, errlen);
    for (int i = 0; i < 4; i++)
        if (with)
            roi[i] *= unit[i];
    s->roi_set = 1;
    s->roi_physical = with > 0;
    memcpy (s->roi, roi, sizeof roi);
    return 0;
}

// Sets one key without the consistency check (apply checks the whole).
static int
s_set_one (feedback_settings_t *s, const char *key_value, char *err, size_t errlen)
{
    const char *eq = strchr (key_value, '=');
    if (!eq || eq == key_value) {
        snprintf (err, errlen, "'%s' is not key=value", key_value);
        return -1;
    }
    char key[32];
    size_t klen = (size_t) (eq - key_value);
    if (klen >= sizeof key) {
        snprintf (err, errlen, "unknown feedback key '%.*s'", (int) klen, key_value);
        return -1;
    }
    memcpy (key, key_value, klen);
    key[klen] = '\0';
    const char *value = eq + 1;

    if (strcmp (key, "roi") == 0)
        return s_set_roi (s, value, err, errlen);
    if (strcmp (key, "quantity") == 0) {
        const feedback_quantity_info_t *q = feedback_quantity_find (value);
        if (q) {
            s->quantity = q->quantity;
            return 0;
        }
        char choices[200], want[256];
        snprintf (want, sizeof want, "want %s",
                  util_join (feedback_quantity_choice, ", ", " or ", choices, sizeof choices));
        return s_bad_value (key, value, want, err, errlen);
    }
    if (strcmp (key, "enabled") == 0) {
        if (strcmp (value, "on") == 0 || strcmp (value, "off") == 0) {
            s->enabled = strcmp (value, "on") == 0;
            return 0;
        }
        return s_bad_value (key, value, "want on or off", err, errlen);
    }
    struct {
        const char *key;  // its name
        double *field;    // where it goes
        int finite;       // 1: infinities refused
    } numbers[] = {{"setpoint", &s->setpoint, 1}, {"kp", &s->kp, 1},
                   {"ki", &s->ki, 1},             {"out_min", &s->out_min, 0},
                   {"out_max", &s->out_max, 0}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        if (strcmp (key, numbers[i].key) != 0)
            continue;
        double x;
        if (s_parse_number (value, &x) != 0 || (numbers[i].finite && !isfinite (x)))
            return s_bad_value (key, value, "not a finite number", err, errlen);
        *numbers[i].field = x;
        return 0;
    }
    snprintf (err, errlen, "unknown feedback key '%s'", key);
    return -1;
}

int
feedback_settings_check (const feedback_settings_t *s, char *err, size_t errlen)
{
    if (s->roi_set) {
        for (int i = 0; i < 4; i++)
            if (!isfinite (s->roi[i])) {
                snprintf (err, errlen, "roi: coordinates must be finite");
                return -1;
            }
        if (s->roi[0] > s->roi[2] || s->roi[1] > s->roi[3]) {
            snprintf (err, errlen, "roi %g,%g,%g,%g: want x0 <= x1 and y0 <= y1", s->roi[0],
                      s->roi[1], s->roi[2], s->roi[3]);
            return -1;
        }
    }
    if (!feedback_quantity_get ((int) s->quantity)) {
        snprintf (err, errlen, "quantity %d: unknown", (int) s->quantity);
        return -1;
    }
    if (!isfinite (s->setpoint) || !isfinite (s->kp) || !isfinite (s->ki)) {
        snprintf (err, errlen, "setpoint, kp and ki must be finite");
        return -1;
    }
    if (isnan (s->out_min) || isnan (s->out_max) || s->out_min == INFINITY
        || s->out_max == -INFINITY) {
        snprintf (err, errlen, "out_min %g, out_max %g: want out_min < inf and out_max > -inf",
                  s->out_min, s->out_max);
        return -1;
    }
    if (s->out_min > s->out_max) {
        snprintf (err, errlen, "out_min %.9g is above out_max %.9g", s->out_min, s->out_max);
        return -1;
    }
    return 0;
}

int
feedback_settings_apply (feedback_settings_t *s, int argc, char *const *argv, char *err,
                         size_t errlen)
{
    feedback_settings_t next = *s;
    for (int i = 0; i < argc; i++)
        if (s_set_one (&next, argv[i], err, errlen) != 0)
            return -1;
    if (feedback_settings_check (&next, err, errlen) != 0)
        return -1;
    *s = next;
    return 0;
}

int
feedback_settings_set (feedback_settings_t *s, const char *key_value, char *err, size_t errlen)
{
    char *argv[] = {(char *) key_value};
    return feedback_settings_apply (s, 1, argv, err, errlen);
}

// ---------------------------------------------------------------------------
// Writing text and JSON into a caller's buffer

typedef struct {
    char *buf;     // the caller's
    size_t size;   // its size
    size_t len;    // written so far (may pass size: then it overflowed)
} s_out_t;

static void
s_put (s_out_t *out, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    size_t room = out->len < out->size ? out->size - out->len : 0;
    int n = vsnprintf (room ? out->buf + out->len : NULL, room, fmt, ap);
    va_end (ap);
    if (n > 0)
        out->len += (size_t) n;
}

// The length written, or -1 if it did not fit (then buf holds a truncated
// NUL-terminated prefix, if size > 0).
static int
s_done (const s_out_t *out)
{
    return out->len < out->size && out->len <= INT32_MAX ? (int) out->len : -1;
}

// value's text (jout_dumpb) into buf, releasing value: its length, or -1
// if it did not fit or value is NULL (then buf holds a truncated
// NUL-terminated prefix, if size > 0).
static int
s_dump (json_t *value, char *buf, size_t size)
{
    size_t len = value ? jout_dumpb (value, buf, size) : 0;
    json_decref (value);
    if (!value && size)
        buf[0] = '\0';
    return len > 0 && len < size && len <= INT32_MAX ? (int) len : -1;
}

// "roi":..,"quantity":..: the members F and the stream share.
static void
s_set_roi_quantity (json_t **o, const feedback_settings_t *s)
{
    json_t *roi = s->roi_set ? json_array () : json_null ();
    for (int i = 0; s->roi_set && i < 4; i++)
        jout_append (&roi, jout_number (s->roi[i]));
    jout_set (o, "roi", roi);
    jout_set (o, "roi_units", s->roi_set ? jout_string (s->roi_physical ? "m" : "px") : json_null ());
    jout_set (o, "quantity", jout_string (feedback_quantity_name (s->quantity)));
}

int
feedback_settings_format (const feedback_settings_t *s, char *buf, size_t size)
{
    s_out_t out = {buf, size, 0};
    s_put (&out, "enabled=%s roi=", s->enabled ? "on" : "off");
    if (s->roi_set)
        // A physical ROI in metres: one unit after the last applies to all.
        s_put (&out, "%.17g,%.17g,%.17g,%.17g%s", s->roi[0], s->roi[1], s->roi[2], s->roi[3],
               s->roi_physical ? "m" : "");
    else
        s_put (&out, "all");
    // %.17g writes the infinities as inf and -inf, which strtod reads.
    s_put (&out, " quantity=%s setpoint=%.17g kp=%.17g ki=%.17g out_min=%.17g out_max=%.17g",
           feedback_quantity_name (s->quantity), s->setpoint, s->kp, s->ki, s->out_min,
           s->out_max);
    return s_done (&out);
}

int
feedback_settings_json (const feedback_settings_t *s, const feedback_pi_t *pi, char *buf,
                        size_t size)
{
    json_t *o = json_object ();
    jout_set (&o, "enabled", json_boolean (s->enabled));
    s_set_roi_quantity (&o, s);
    jout_set (&o, "setpoint", jout_number (s->setpoint));
    jout_set (&o, "kp", jout_number (s->kp));
    jout_set (&o, "ki", jout_number (s->ki));
    jout_set (&o, "out_min", jout_number (s->out_min));
    jout_set (&o, "out_max", jout_number (s->out_max));
    int started = pi && pi->started;
    jout_set (&o, "output", jout_number (started ? pi->output : NAN));
    jout_set (&o, "integral", jout_number (started ? pi->integral : NAN));
    return s_dump (o, buf, size);
}

int
feedback_message_json (const feedback_message_t *m, char *buf, size_t size)
{
    const feedback_settings_t *s = m->settings;
    const feedback_figures_t *f = m->figures;
    json_t *o = json_object ();
    jout_set (&o, "experiment", jout_string (m->experiment ? m->experiment : ""));
    // Right after the name: feedback_message_replayed rewrites the two.
    jout_set (&o, "replay", json_boolean (m->source));
    jout_set (&o, "source", jout_string (m->source));
    jout_set (&o, "pair", json_integer (m->pair));
    jout_set (&o, "stem", jout_string (m->stem ? m->stem : ""));
    // A pair whose camera time is unknown has no latency: 0 would give the
    // time since the epoch.
    jout_set (&o, "closed_ns", m->closed_ns > 0 ? json_integer (m->closed_ns) : json_null ());
    jout_set (&o, "dispatched_ns", json_integer (m->dispatched_ns));
    jout_set (&o, "computed_ns", json_integer (m->computed_ns));
    jout_set (&o, "published_ns", json_integer (m->published_ns));
    jout_set (&o, "latency_ms", jout_number (m->closed_ns > 0
                                                 ? (double) (m->published_ns - m->closed_ns) / 1e6
                                                 : NAN));
    s_set_roi_quantity (&o, s);
    jout_set (&o, "n", json_integer (f->n));
    const feedback_quantity_info_t *q;
    for (int i = 0; (q = feedback_quantity_get (i)); i++)
        if (!q->stereo || f->has_w)
            jout_set (&o, q->name, jout_number (feedback_value (f, q->quantity)));
    jout_set (&o, "value", jout_number (feedback_value (f, s->quantity)));
    // The value's uncertainty (null without), and each mean's when the
    // field had sigma (the member left out otherwise, as before issue 27).
    jout_set (&o, "sigma", jout_number (feedback_sigma (f, s->quantity)));
    if (f->has_sigma) {
        json_t *sigma = json_object ();
        for (int i = 0; (q = feedback_quantity_get (i)); i++)
            if (!q->stereo && q->quantity != FEEDBACK_VALID_FRACTION)
                jout_set (&sigma, q->name, jout_number (feedback_sigma (f, q->quantity)));
        jout_set (&o, "uncertainty", sigma);
    }
    json_t *units = json_object ();
    jout_set (&units, "velocity", jout_string (piv_calib_unit (m->calib, PIV_UNIT_VELOCITY)));
    jout_set (&units, "rate", jout_string (piv_calib_unit (m->calib, PIV_UNIT_RATE)));
    jout_set (&o, "units", units);
    jout_set (&o, "calibrated", json_boolean (m->calib && m->calib->set));
    jout_set (&o, "enabled", json_boolean (s->enabled));
    jout_set (&o, "setpoint", jout_number (s->setpoint));
    jout_set (&o, "output", jout_number (s->enabled ? m->output : NAN));
    return s_dump (o, buf, size);
}

// The end of the JSON string starting at text (a '"'): the character
// after its closing quote, or NULL if it has none.
static const char *
s_string_end (const char *text)
{
    if (*text != '"')
        return NULL;
    for (const char *p = text + 1; *p; p++) {
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

int
feedback_message_replayed (const char *payload, const char *as, char *buf, size_t size)
{
    static const char head[] = "{\"experiment\":";
    if (strncmp (payload, head, sizeof head - 1) != 0)
        return -1;
    const char *name = payload + sizeof head - 1;
    const char *name_end = s_string_end (name);
    if (!name_end)
        return -1;
    const char *rest = name_end;
    json_t *as_value = jout_string (as ? as : "");
    char *as_json = jout_dump (as_value);
    json_decref (as_value);
    static const char marked[] = ",\"replay\":true,\"source\":";
    static const char live[] = ",\"replay\":false,\"source\":null";
    s_out_t out = {buf, size, 0};
    if (!as_json)
        out.len = size;  // no memory: as if it did not fit
    else if (strncmp (rest, marked, sizeof marked - 1) == 0)
        // A replay of a replay: its first source stays.
        s_put (&out, "%s%s%s", head, as_json, rest);
    else {
        if (strncmp (rest, live, sizeof live - 1) == 0)
            rest += sizeof live - 1;
        s_put (&out, "%s%s%s%.*s%s", head, as_json, marked, (int) (name_end - name), name, rest);
    }
    free (as_json);
    return s_done (&out);
}

// ---------------------------------------------------------------------------
// Figures

static int
s_in_roi (const piv_field_t *field, const feedback_settings_t *s, const piv_calib_t *calib,
          size_t k)
{
    if (!s->roi_set)
        return 1;
    double x = field->x[k], y = field->y[k];
    if (s->roi_physical) {
        if (!calib || !calib->set)
            return 0;
        piv_calib_position (calib, field->x[k], field->y[k], &x, &y);
    }
    return x >= s->roi[0] && x <= s->roi[2] && y >= s->roi[1] && y <= s->roi[3];
}

// The correlation of two vectors' errors d grid steps apart along one axis
// (piv_field_error_correlation: the share of window area), for d = 0 .. r
// (r the reach of a window in steps: beyond it they share nothing) into
// rho; returns r. A field without window or step: independent vectors.
#define S_REACH_MAX 256 // a window of 256 px (PIV_MAX_WINDOW) at a step of 1 px reaches 255
static int
s_overlaps (const piv_field_t *field, double rho[S_REACH_MAX + 1])
{
    rho[0] = 1;
    if (field->window <= 0 || field->step <= 0)
        return 0;
    int r = (field->window - 1) / field->step;
    r = r > S_REACH_MAX ? S_REACH_MAX : r; // a field off the settings' bounds: cut there
    for (int d = 1; d <= r; d++)
        rho[d] = piv_field_error_correlation (field, d, 0);
    return r;
}

// sum_l sum_m rho_lm x_l x_m for x_l = a_l sigma_l over the grid, rho
// s_overlaps' in x times in y: separable, so R x is two passes of 2r + 1
// taps, not a sum over every pair.
static double
s_correlated_variance (const piv_field_t *field, const double *a, const double *sigma,
                       double *x, double *t)
{
    int nx = field->nx, ny = field->ny;
    double rho[S_REACH_MAX + 1];
    int r = s_overlaps (field, rho);
    size_t n = (size_t) nx * (size_t) ny;
    for (size_t k = 0; k < n; k++)
        x[k] = a[k] ? a[k] * sigma[k] : 0;
    for (int j = 0; j < ny; j++) // along x
        for (int i = 0; i < nx; i++) {
            const double *row = x + (size_t) j * nx;
            double sum = row[i];
            for (int d = 1; d <= r; d++)
                sum += rho[d] * ((i - d >= 0 ? row[i - d] : 0) + (i + d < nx ? row[i + d] : 0));
            t[(size_t) j * nx + (size_t) i] = sum;
        }
    double total = 0;
    for (int j = 0; j < ny; j++) // along y, then the product with x
        for (int i = 0; i < nx; i++) {
            size_t k = (size_t) j * nx + (size_t) i;
            if (x[k] == 0)
                continue;
            double sum = t[k];
            for (int d = 1; d <= r; d++)
                sum += rho[d] * ((j - d >= 0 ? t[k - (size_t) d * nx] : 0)
                                 + (j + d < ny ? t[k + (size_t) d * nx] : 0));
            total += x[k] * sum;
        }
    return total;
}

// The uncertainties of the means feedback_figures has just computed
// (feedback_sigma says how), when the field has sigma; else NaN.
static void
s_sigmas (const piv_field_t *field, const float *vorticity, const feedback_settings_t *s,
          const piv_calib_t *calib, feedback_figures_t *out)
{
    out->sigma_mean_u = out->sigma_mean_v = out->sigma_mean_speed = out->sigma_vorticity = NAN;
    out->has_sigma = field && field->sigma_u && field->sigma_v;
    if (!out->has_sigma || out->n == 0)
        return;
    size_t n = (size_t) field->nx * (size_t) field->ny;
    double *mem = malloc (7 * n * sizeof (double));
    if (!mem)
        return; // no memory: no uncertainty, the figures stand
    double *su = mem, *sv = su + n, *a = sv + n, *b = a + n, *c = b + n, *x = c + n, *t = x + n;
    // A vector without sigma counts with the RMS of the valid ones'.
    double sum2[2] = {0, 0};
    int known = 0;
    for (size_t k = 0; k < n; k++)
        if (field->flags[k] == PIV_FLAG_VALID && isfinite (field->sigma_u[k])
            && isfinite (field->sigma_v[k])) {
            sum2[0] += (double) field->sigma_u[k] * field->sigma_u[k];
            sum2[1] += (double) field->sigma_v[k] * field->sigma_v[k];
            known++;
        }
    double rms_u = known ? sqrt (sum2[0] / known) : NAN;
    double rms_v = known ? sqrt (sum2[1] / known) : NAN;
    for (size_t k = 0; k < n; k++) {
        su[k] = isfinite (field->sigma_u[k]) ? field->sigma_u[k] : rms_u;
        sv[k] = isfinite (field->sigma_v[k]) ? field->sigma_v[k] : rms_v;
    }
    // The means of u, v and the speed: the valid vectors in the ROI.
    int nvort = 0;
    for (size_t k = 0; k < n; k++) {
        int in = field->flags[k] == PIV_FLAG_VALID && s_in_roi (field, s, calib, k);
        double u = field->u[k], v = field->v[k], speed = sqrt (u * u + v * v);
        a[k] = in ? 1.0 / out->n : 0;
        // d|V| = (u du + v dv) / |V|; at |V| = 0, where it has no
        // derivative, as if along x.
        b[k] = in ? (speed > 0 ? u / speed : 1) / out->n : 0;
        c[k] = in ? (speed > 0 ? v / speed : 0) / out->n : 0;
        nvort += in && vorticity && isfinite (vorticity[k]);
    }
    out->sigma_mean_u = sqrt (s_correlated_variance (field, a, su, x, t));
    out->sigma_mean_v = sqrt (s_correlated_variance (field, a, sv, x, t));
    out->sigma_mean_speed = sqrt (s_correlated_variance (field, b, su, x, t)
                                  + s_correlated_variance (field, c, sv, x, t));
    // The mean vorticity: a linear map of u and v over every vector its
    // stencils reach (neighbours share them: their errors add up exactly).
    for (size_t k = 0; k < n; k++)
        a[k] = field->flags[k] == PIV_FLAG_VALID && s_in_roi (field, s, calib, k) && vorticity
                       && isfinite (vorticity[k])
                   ? 1.0 / nvort
                   : 0;
    if (nvort
        && piv_field_vorticity_coefficients (field, PIV_STENCIL_DEFAULT, a, b, c) == 0)
        out->sigma_vorticity = sqrt (s_correlated_variance (field, b, su, x, t)
                                     + s_correlated_variance (field, c, sv, x, t));
    free (mem);
}

// Vorticity is the mean of piv_field_derive's values (piv/derived.h: the
// one stencil of the farm, NaN at and around holes and on the border)
// over the valid vectors inside the ROI where it is finite. The stencil
// may reach outside the ROI: the ROI selects points, not the data their
// derivatives see.
void
feedback_figures (const piv_field_t *field, const float *vorticity, const feedback_settings_t *s,
                  const piv_calib_t *calib, feedback_figures_t *out)
{
    memset (out, 0, sizeof *out);
    out->roi_uncalibrated = s->roi_set && s->roi_physical && !(calib && calib->set);
    double su = 0, sv = 0, sspeed = 0, svort = 0, sw = 0, sabsw = 0;
    const float *w = field ? field->w : NULL;
    int nvort = 0;
    int nx = field ? field->nx : 0, ny = field ? field->ny : 0;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            size_t k = (size_t) j * (size_t) nx + (size_t) i;
            if (!s_in_roi (field, s, calib, k))
                continue;
            out->total++;
            if (field->flags[k] != PIV_FLAG_VALID)
                continue;
            out->n++;
            double u = field->u[k], v = field->v[k];
            su += u;
            sv += v;
            sspeed += sqrt (u * u + v * v);
            if (w) {
                sw += w[k];
                sabsw += fabs (w[k]);
            }
            if (vorticity && isfinite (vorticity[k])) {
                svort += vorticity[k];
                nvort++;
            }
        }
    out->mean_u = out->n ? su / out->n : NAN;
    out->mean_v = out->n ? sv / out->n : NAN;
    out->mean_speed = out->n ? sspeed / out->n : NAN;
    out->vorticity = nvort ? svort / nvort : NAN;
    out->valid_fraction = out->total ? (double) out->n / out->total : NAN;
    out->has_w = w != NULL;
    out->mean_w = w && out->n ? sw / out->n : NAN;
    out->mean_abs_w = w && out->n ? sabsw / out->n : NAN;
    s_sigmas (field, vorticity, s, calib, out);
}

void
feedback_figures_calibrate (feedback_figures_t *f, const piv_calib_t *c)
{
    if (!c || !c->set)
        return;
    double u, v, speed, zero;
    piv_calib_velocity (c, f->mean_u, f->mean_v, &u, &v);
    piv_calib_velocity (c, f->mean_speed, 0, &speed, &zero);
    f->mean_u = u;
    f->mean_v = v;
    f->mean_speed = speed;
    f->vorticity = piv_calib_vorticity (c, f->vorticity);
    f->mean_w = piv_calib_speed (c, f->mean_w);
    f->mean_abs_w = piv_calib_speed (c, f->mean_abs_w);
    f->sigma_mean_u = piv_calib_speed (c, f->sigma_mean_u);
    f->sigma_mean_v = piv_calib_speed (c, f->sigma_mean_v);
    f->sigma_mean_speed = piv_calib_speed (c, f->sigma_mean_speed);
    f->sigma_vorticity = piv_calib_divergence (c, f->sigma_vorticity);
}

double
feedback_value (const feedback_figures_t *f, feedback_quantity_t q)
{
    switch (q) {
    case FEEDBACK_MEAN_U:
        return f->mean_u;
    case FEEDBACK_MEAN_V:
        return f->mean_v;
    case FEEDBACK_MEAN_SPEED:
        return f->mean_speed;
    case FEEDBACK_VORTICITY:
        return f->vorticity;
    case FEEDBACK_VALID_FRACTION:
        return f->valid_fraction;
    case FEEDBACK_MEAN_W:
        return f->mean_w;
    case FEEDBACK_MEAN_ABS_W:
        return f->mean_abs_w;
    }
    return NAN;
}

double
feedback_sigma (const feedback_figures_t *f, feedback_quantity_t q)
{
    if (!f->has_sigma)
        return NAN;
    switch (q) {
    case FEEDBACK_MEAN_U:
        return f->sigma_mean_u;
    case FEEDBACK_MEAN_V:
        return f->sigma_mean_v;
    case FEEDBACK_MEAN_SPEED:
        return f->sigma_mean_speed;
    case FEEDBACK_VORTICITY:
        return f->sigma_vorticity;
    default:
        return NAN;
    }
}

// ---------------------------------------------------------------------------
// The PI controller

void
feedback_pi_reset (feedback_pi_t *pi)
{
    pi->started = 0;
    pi->last_ns = 0;
    pi->integral = 0;
    pi->output = NAN;
}

// Anti-windup, by conditional integration with the step clamped: with
// hi = out_max - kp*e and lo = out_min - kp*e (the integral that puts the
// output exactly on a limit) and cand = integral + ki*e*dt,
//   - lo <= cand <= hi: the integral becomes cand;
//   - cand > hi: it moves no further up than hi; if it already stood at or
//     above hi it stays (a step up is dropped, a step down is taken);
//   - cand < lo: the mirror image.
// So the integral never grows while the output is saturated in the
// direction of its growth, and at the moment of saturation it stops on the
// limit: when the error changes sign the output leaves the limit at that
// very step. Unlike clamping the integral into [lo, hi] outright, a large
// proportional kick (a setpoint step) never drags the integral down, so
// what it had accumulated survives the kick.
double
feedback_pi_step (feedback_pi_t *pi, const feedback_settings_t *s, double value, int64_t now_ns)
{
    if (!isfinite (value))
        return NAN;
    double e = s->setpoint - value;
    double dt = 0;
    if (pi->started && now_ns > pi->last_ns)
        dt = (double) (now_ns - pi->last_ns) / 1e9;
    double cand = pi->integral + s->ki * e * dt;
    double hi = s->out_max - s->kp * e, lo = s->out_min - s->kp * e;
    double integral = cand;
    if (cand > hi)
        integral = fmax (hi, fmin (pi->integral, cand));
    else if (cand < lo)
        integral = fmin (lo, fmax (pi->integral, cand));
    double output = fmin (fmax (s->kp * e + integral, s->out_min), s->out_max);
    // A late result (now_ns <= last_ns) keeps the latest time, so that the
    // next step's dt does not count the same interval twice.
    if (!pi->started || now_ns > pi->last_ns)
        pi->last_ns = now_ns;
    pi->started = 1;
    pi->integral = integral;
    pi->output = output;
    return output;
}
