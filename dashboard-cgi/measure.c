// measure.c — the experiment page's measurements, read from the store: the
// calibration in force, the run's statistics as the broker last saved them
// (its mean field) and the vorticity of the latest field. Everything stays
// in image units here (px, frame pairs); the renderers convert with the
// calibration (piv/calib.h) and say which one.

#include "dashboard-cgi/dash.h"

#include "common/feedback_quantity.h"
#include "common/util.h"
#include "piv/derived.h"
#include "store/store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// The calibration in force: the experiment's latest "calibration" setting,
// else the global one (scope 0), else the configuration's [calibration].

typedef struct {
    int64_t experiment;
    char *own;    // the experiment's setting (NULL: none)
    char *global; // scope 0's
} s_calib_settings_t;

static int
s_on_calibration (void *arg, int64_t experiment, const char *key, const char *value)
{
    s_calib_settings_t *s = arg;
    if (strcmp (key, "calibration") != 0 || !value)
        return 0;
    char **slot = experiment == s->experiment ? &s->own : experiment == 0 ? &s->global : NULL;
    if (slot) {
        free (*slot);
        *slot = strdup (value);
    }
    return 0;
}

// The configuration's [calibration] keys into c: 0, or -1 with err.
static int
s_config_calib (const config_t *cfg, piv_calib_t *c, char *err, size_t errlen)
{
    return piv_calib_from_keys (c, cfg->calibration.scale, cfg->calibration.dt,
                                cfg->calibration.origin, cfg->calibration.y_axis, err, errlen);
}

static int
s_calibration (dash_t *dash, store_t *store)
{
    dash_page_t *page = dash->page;
    s_calib_settings_t s = {.experiment = page->exp->id};
    if (store_settings (store, s_on_calibration, &s) < 0)
        return -1;
    char err[256] = "";
    const char *text = s.own ? s.own : s.global;
    piv_calib_init (&page->calib);
    page->calib_from = s.own ? "experiment" : s.global ? "global" : "configuration";
    int rc = text ? piv_calib_parse (text, &page->calib, err, sizeof err)
                  : s_config_calib (&dash->cfg, &page->calib, err, sizeof err);
    if (rc != 0) {
        piv_calib_init (&page->calib);
        snprintf (page->calib_note, sizeof page->calib_note,
                  "the %s calibration cannot be read (%s): figures in px", page->calib_from, err);
    }
    if (!page->calib.set)
        page->calib_from = "none";
    free (s.own);
    free (s.global);
    return 0;
}

// ---------------------------------------------------------------------------
// The statistics: the latest saved set (the one updated last).

static int
s_on_stats (void *arg, const store_stats_t *st)
{
    dash_page_t *page = arg;
    page->nsets++;
    if (page->stats && st->updated_ns < page->stats_updated_ns)
        return 0;
    char err[256];
    piv_stats_t *stats = piv_stats_decode (st->state, st->state_size, err, sizeof err);
    if (!stats) {
        char shown[64];
        snprintf (page->stats_note, sizeof page->stats_note,
                  "the saved statistics '%s' cannot be read: %s",
                  util_shorten (st->set ? st->set : "", shown, sizeof shown), err);
        return 0;
    }
    piv_stats_destroy (&page->stats);
    free (page->stats_set);
    free (page->stats_settings);
    page->stats = stats;
    page->stats_set = strdup (st->set ? st->set : "");
    page->stats_settings = strdup (st->settings ? st->settings : "");
    page->stats_updated_ns = st->updated_ns;
    piv_calib_init (&page->stats_calib);
    if (piv_calib_parse (st->calibration ? st->calibration : "none", &page->stats_calib, err,
                         sizeof err) != 0)
        piv_calib_init (&page->stats_calib);
    page->stats_note[0] = '\0';
    return 0;
}

// The mean field of page->stats as a field: mean u, v at every point,
// flagged INVALID where no sample was counted. NULL on no memory.
static piv_field_t *
s_mean_field (const piv_stats_t *stats)
{
    int nx, ny, step, window;
    piv_stats_grid (stats, &nx, &ny, &step, &window);
    piv_field_t *f = piv_field_new (nx, ny);
    if (!f)
        return NULL;
    f->step = step;
    f->window = window;
    for (long k = 0; k < (long)nx * ny; k++) {
        piv_stats_point_t p;
        piv_stats_point (stats, k, &p);
        f->x[k] = (float)p.x;
        f->y[k] = (float)p.y;
        f->u[k] = p.count > 0 ? (float)p.u_mean : NAN;
        f->v[k] = p.count > 0 ? (float)p.v_mean : NAN;
        f->flags[k] = p.count > 0 ? PIV_FLAG_VALID : PIV_FLAG_INVALID;
        f->peak_ratio[k] = NAN;
    }
    return f;
}

// The finite range of values[0 .. n - 1] into *lo, *hi (NAN when none).
static void
s_range (const float *values, long n, double *lo, double *hi)
{
    *lo = *hi = NAN;
    for (long k = 0; k < n; k++)
        if (isfinite (values[k])) {
            *lo = isnan (*lo) || values[k] < *lo ? values[k] : *lo;
            *hi = isnan (*hi) || values[k] > *hi ? values[k] : *hi;
        }
}

// The mean speed, converted by the calibration in force (one convention on
// the page: the statistics are counted in px whatever the calibration).
static void
s_mean_speed (dash_page_t *page)
{
    const piv_field_t *m = page->mean;
    long n = (long)m->nx * m->ny;
    page->speed = malloc (sizeof (float) * (size_t)n);
    for (long k = 0; page->speed && k < n; k++) {
        double u, v;
        piv_calib_velocity (&page->calib, m->u[k], m->v[k], &u, &v);
        page->speed[k] = m->flags[k] == PIV_FLAG_INVALID ? NAN : (float)hypot (u, v);
    }
    page->speed_min = page->speed_max = NAN;
    if (page->speed)
        s_range (page->speed, n, &page->speed_min, &page->speed_max);
}

// A new array of one value per vector of the latest field in *values
// (NULL on no memory), its range *lo, *hi NaN until s_range; its length.
static long
s_latest_array (const dash_page_t *page, float **values, double *lo, double *hi)
{
    long n = (long)page->field->nx * page->field->ny;
    *lo = *hi = NAN;
    *values = malloc (sizeof (float) * (size_t)n);
    return n;
}

// The latest field's vorticity, converted by the calibration in force.
static void
s_vorticity (dash_page_t *page)
{
    const piv_field_t *f = page->field;
    long n = s_latest_array (page, &page->vorticity, &page->vorticity_min, &page->vorticity_max);
    if (page->vorticity &&
        piv_field_derive (f, &(piv_derived_t){.vorticity = page->vorticity}) < 0) {
        free (page->vorticity);
        page->vorticity = NULL;
    }
    if (!page->vorticity)
        return;
    for (long k = 0; k < n; k++)
        if (isfinite (page->vorticity[k]))
            page->vorticity[k] = (float)piv_calib_vorticity (&page->calib, page->vorticity[k]);
    s_range (page->vorticity, n, &page->vorticity_min, &page->vorticity_max);
}

// A stereo latest field's w (along +z: y up leaves it).
static double
s_w_of (const piv_field_t *f, long k)
{
    return f->w[k];
}

// The latest field's uncertainty as one magnitude, |sigma| = sqrt
// (sigma_u^2 + sigma_v^2) (a spread); NaN where the engine had no estimate.
static double
s_sigma_of (const piv_field_t *f, long k)
{
    return hypot (f->sigma_u[k], f->sigma_v[k]);
}

// A magnitude of the latest field's vectors, of(f, k) in px a frame,
// converted as a speed by the calibration in force (never sign-flipped by
// y up) into *values, its range *lo, *hi; NaN at INVALID vectors, as the
// arrows.
static void
s_speed_like (dash_page_t *page, double (*of) (const piv_field_t *, long), float **values,
              double *lo, double *hi)
{
    const piv_field_t *f = page->field;
    long n = s_latest_array (page, values, lo, hi);
    if (!*values)
        return;
    for (long k = 0; k < n; k++)
        (*values)[k] = f->flags[k] == PIV_FLAG_INVALID
                           ? NAN
                           : (float)piv_calib_speed (&page->calib, of (f, k));
    s_range (*values, n, lo, hi);
}

// The feedback series in the calibration in force: points recorded in
// image units (before a calibration, or its quantity's figure in px)
// converted as the other plots are (y as calibrated for mean_v).
static void
s_feedback_units (dash_page_t *page)
{
    const piv_calib_t *c = &page->calib;
    const feedback_quantity_info_t *q =
        feedback_quantity_find (page->quantity ? page->quantity : "");
    if (!c->set || !q || q->unit == FEEDBACK_UNIT_NONE)
        return;
    for (int i = 0; i < page->npoints; i++) {
        dash_point_t *p = &page->series[i];
        if (!p->image_units)
            continue;
        double *values[2] = {&p->value, &p->setpoint};
        for (int k = 0; k < 2; k++) {
            double x = *values[k], u, v;
            if (!isfinite (x))
                continue;
            if (q->unit == FEEDBACK_UNIT_RATE)
                *values[k] = piv_calib_vorticity (c, x);
            else if (q->quantity == FEEDBACK_MEAN_V)
                piv_calib_velocity (c, 0, x, &u, &v), *values[k] = v;
            else
                piv_calib_velocity (c, x, 0, &u, &v), *values[k] = u;
        }
        p->image_units = 0;
    }
    snprintf (page->feedback_unit, sizeof page->feedback_unit, "%s",
              piv_calib_unit (c, q->unit == FEEDBACK_UNIT_RATE ? PIV_UNIT_RATE
                                                               : PIV_UNIT_VELOCITY));
}

// ---------------------------------------------------------------------------

int
dash_measure (dash_t *dash, store_t *store)
{
    dash_page_t *page = dash->page;
    if (s_calibration (dash, store) < 0 ||
        store_stats_of (store, page->exp->id, s_on_stats, page) < 0)
        return -1;
    if (page->stats) {
        page->mean = s_mean_field (page->stats);
        if (page->mean)
            s_mean_speed (page);
        else
            snprintf (page->stats_note, sizeof page->stats_note, "no memory for the mean field");
    }
    else if (!page->stats_note[0])
        snprintf (page->stats_note, sizeof page->stats_note,
                  page->exp->pairs[STORE_DONE] ? "no statistics saved yet (the broker saves them"
                                                 " every broker/stats_ms)"
                                               : "no result yet");
    if (page->field && page->field->step > 0)
        s_vorticity (page);
    if (page->field && page->field->w)
        s_speed_like (page, s_w_of, &page->w, &page->w_min, &page->w_max);
    if (page->field && page->field->sigma_u && page->field->sigma_v)
        s_speed_like (page, s_sigma_of, &page->sigma, &page->sigma_min, &page->sigma_max);
    s_feedback_units (page);
    return 0;
}

void
dash_measure_release (dash_page_t *page)
{
    piv_stats_destroy (&page->stats);
    piv_field_destroy (&page->mean);
    free (page->stats_set);
    free (page->stats_settings);
    free (page->speed);
    free (page->vorticity);
    free (page->w);
    free (page->sigma);
}

int
dash_array_stride (int nx, int ny)
{
    int longest = nx > ny ? nx : ny;
    return longest <= DASH_ARRAY_MAX ? 1 : (longest + DASH_ARRAY_MAX - 1) / DASH_ARRAY_MAX;
}
