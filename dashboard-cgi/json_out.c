// json_out.c — the status page as JSON (?format=json): the same figures as
// the HTML, numbers as numbers, null where a figure is unknown. Built with
// jansson and written by common/jout.h: its number and string rules are the
// page's (jout_number: NAN is null; jout_string: NULL is null).

#include "dashboard-cgi/dash.h"

#include "common/jout.h"
#include "store/store.h"

#include <math.h>

// A yes/no figure that may be unknown (-1: null).
static json_t *
s_bool (int x)
{
    return x < 0 ? json_null () : json_boolean (x);
}

// A time in ns since the epoch; 0 (never) is null.
static json_t *
s_time (int64_t ns)
{
    return ns ? json_integer (ns) : json_null ();
}

// The files in no pair, as the broker said them; null when it did not.
static json_t *
s_unpaired (const dash_unpaired_t *u)
{
    if (!u)
        return json_null ();
    json_t *o = json_object (), *files = json_array ();
    jout_set (&o, "waiting", json_integer (u->waiting));
    jout_set (&o, "refused", json_integer (u->refused));
    jout_set (&o, "rule", jout_string (u->rule));
    jout_set (&o, "expects", jout_string (u->expects));
    for (int f = 0; f < u->nfiles; f++) {
        json_t *file = json_object ();
        jout_set (&file, "name", jout_string (u->files[f].name));
        jout_set (&file, "state", jout_string (u->files[f].state));
        jout_set (&file, "why", jout_string (u->files[f].why));
        jout_append (&files, file);
    }
    jout_set (&o, "files", files);
    return o;
}

static json_t *
s_experiment (const dash_exp_t *x)
{
    json_t *o = json_object ();
    jout_set (&o, "experiment", jout_string (x->name));
    jout_set (&o, "source", jout_string (x->source));
    jout_set (&o, "created_ns", json_integer (x->created_ns));
    jout_set (&o, "files", json_integer (x->files));
    jout_set (&o, "pending", json_integer (x->pairs[STORE_PENDING]));
    jout_set (&o, "dispatched", json_integer (x->pairs[STORE_DISPATCHED]));
    jout_set (&o, "done", json_integer (x->pairs[STORE_DONE]));
    jout_set (&o, "failed", json_integer (x->pairs[STORE_FAILED]));
    jout_set (&o, "skipped", json_integer (x->pairs[STORE_SKIPPED]));
    jout_set (&o, "total", json_integer (x->total));
    jout_set (&o, "live", s_bool (x->live));
    jout_set (&o, "queue", jout_number (x->queue >= 0 ? (double) x->queue : NAN));
    jout_set (&o, "rate_10s", jout_number (x->rate_10s));
    jout_set (&o, "rate_1m", jout_number (x->rate_1m));
    jout_set (&o, "latency_median_ms", jout_number (x->latency_median_ms));
    jout_set (&o, "latency_p99_ms", jout_number (x->latency_p99_ms));
    jout_set (&o, "policy", jout_string (x->policy));
    jout_set (&o, "rate_limit", jout_number (x->rate_limit));
    jout_set (&o, "paused", s_bool (x->paused));
    jout_set (&o, "last_result_ns", s_time (x->last_result_ns));
    jout_set (&o, "unpaired", s_unpaired (x->unpaired));
    return o;
}

static json_t *
s_agent (const dash_agent_t *a)
{
    json_t *o = json_object ();
    jout_set (&o, "id", jout_string (a->id));
    jout_set (&o, "host", jout_string (a->host[0] ? a->host : NULL));
    jout_set (&o, "alive", s_bool (a->alive));
    jout_set (&o, "cores", jout_number (a->cores >= 0 ? a->cores : NAN));
    jout_set (&o, "tasks", jout_number (a->tasks >= 0 ? a->tasks : NAN));
    jout_set (&o, "done", json_integer (a->done));
    jout_set (&o, "last_heartbeat_s", jout_number (a->heartbeat_s));
    jout_set (&o, "last_seen_ns", s_time (a->last_seen_ns));
    return o;
}

static json_t *
s_failure (const dash_failure_t *f)
{
    json_t *o = json_object ();
    jout_set (&o, "experiment", jout_string (f->experiment));
    jout_set (&o, "pair", json_integer (f->pair));
    jout_set (&o, "stem", jout_string (f->stem));
    jout_set (&o, "agent", jout_string (f->agent));
    jout_set (&o, "attempts", json_integer (f->attempts));
    jout_set (&o, "error", jout_string (f->error));
    jout_set (&o, "finished_ns", json_integer (f->finished_ns));
    return o;
}

static json_t *s_units (const piv_calib_t *c);

// The field's vectors, every stride-th in each direction: [x, y, u, v, flag]
// in the calibration's units and axes (identities when not calibrated).
static json_t *
s_vectors (const piv_field_t *f, const piv_calib_t *c, int stride)
{
    json_t *vectors = json_array ();
    for (int j = 0; j < f->ny; j += stride)
        for (int i = 0; i < f->nx; i += stride) {
            int n = j * f->nx + i;
            json_t *v = json_array ();
            double x, y, u, w;
            piv_calib_position (c, f->x[n], f->y[n], &x, &y);
            piv_calib_velocity (c, f->u[n], f->v[n], &u, &w);
            jout_append (&v, jout_number (x));
            jout_append (&v, jout_number (y));
            jout_append (&v, jout_number (u));
            jout_append (&v, jout_number (w));
            jout_append (&v, json_integer (f->flags[n]));
            jout_append (&vectors, v);
        }
    return vectors;
}

static json_t *
s_field (const dash_page_t *page)
{
    const piv_field_t *f = page->field;
    int stride = dash_quiver_stride (f), shown = 0;
    double max_speed = 0;
    for (int j = 0; j < f->ny; j += stride)
        for (int i = 0; i < f->nx; i += stride) {
            int n = j * f->nx + i;
            if (f->flags[n] != PIV_FLAG_INVALID && isfinite (f->u[n]) && isfinite (f->v[n])) {
                shown++;
                max_speed = fmax (max_speed, hypot (f->u[n], f->v[n]));
            }
        }
    json_t *o = json_object ();
    jout_set (&o, "pair", json_integer (page->field_pair));
    jout_set (&o, "stem", jout_string (page->field_stem));
    jout_set (&o, "from", jout_string (page->field_source));
    jout_set (&o, "nx", json_integer (f->nx));
    jout_set (&o, "ny", json_integer (f->ny));
    jout_set (&o, "window", json_integer (f->window));
    jout_set (&o, "step", json_integer (f->step));
    jout_set (&o, "stride", json_integer (stride));
    jout_set (&o, "shown", json_integer (shown));
    double per, unused;
    piv_calib_velocity (&page->calib, 1, 0, &per, &unused);
    jout_set (&o, "max_speed", jout_number (max_speed * per));
    jout_set (&o, "units", s_units (&page->calib));
    jout_set (&o, "vectors", s_vectors (f, &page->calib, stride));
    return o;
}

// The feedback time series.
static json_t *
s_feedback (const dash_page_t *page)
{
    json_t *points = json_array ();
    for (int i = 0; i < page->npoints; i++) {
        const dash_point_t *p = &page->series[i];
        json_t *o = json_object ();
        jout_set (&o, "t_ns", json_integer (p->t_ns));
        jout_set (&o, "value", jout_number (p->value));
        jout_set (&o, "setpoint", jout_number (p->setpoint));
        jout_set (&o, "output", jout_number (p->output));
        jout_append (&points, o);
    }
    json_t *o = json_object ();
    jout_set (&o, "quantity", jout_string (page->quantity));
    jout_set (&o, "unit", jout_string (page->feedback_unit[0] ? page->feedback_unit : NULL));
    jout_set (&o, "points", points);
    return o;
}

static json_t *
s_rate_history (const dash_page_t *page)
{
    json_t *results = json_array ();
    for (int i = 0; i < DASH_BUCKETS; i++)
        jout_append (&results, json_integer (page->buckets[i]));
    json_t *o = json_object ();
    jout_set (&o, "bucket_s", json_integer (DASH_BUCKET_S));
    jout_set (&o, "end_ns", json_integer (page->buckets_end_ns));
    jout_set (&o, "log_from_ns", s_time (page->tail_start_ns));
    jout_set (&o, "results", results);
    return o;
}

// ---------------------------------------------------------------------------
// Measurements: positions in m, velocities in m/s, rates in 1/s when
// calibrated (as pivctl stats and export), else px, px/frame, 1/frame.
// Arrays are whole up to DASH_ARRAY_MAX points a side, else every
// 'stride'-th point in each direction (said by "stride").

static json_t *
s_calibration (const piv_calib_t *c, const char *from)
{
    char text[256], words[256];
    piv_calib_format (c, text, sizeof text);
    piv_calib_describe (c, words, sizeof words);
    json_t *o = json_object ();
    jout_set (&o, "calibrated", json_boolean (c->set));
    jout_set (&o, "text", jout_string (text));
    jout_set (&o, "description", jout_string (words));
    if (from)
        jout_set (&o, "from", jout_string (from));
    jout_set (&o, "scale_m_per_px", jout_number (c->set ? c->scale : NAN));
    jout_set (&o, "dt_s", jout_number (c->set ? c->dt : NAN));
    json_t *origin = json_array ();
    jout_append (&origin, jout_number (c->origin_x));
    jout_append (&origin, jout_number (c->origin_y));
    jout_set (&o, "origin_px", origin);
    jout_set (&o, "y_axis", jout_string (c->y_up ? "up" : "down"));
    return o;
}

static json_t *
s_units (const piv_calib_t *c)
{
    json_t *o = json_object ();
    jout_set (&o, "position", jout_string (piv_calib_unit (c, PIV_UNIT_LENGTH)));
    jout_set (&o, "velocity", jout_string (piv_calib_unit (c, PIV_UNIT_VELOCITY)));
    jout_set (&o, "vorticity", jout_string (piv_calib_unit (c, PIV_UNIT_RATE)));
    return o;
}

// The grid's coordinates along x (row 0) and y (column 0), converted,
// every stride-th, as "x" and "y" of o.
static void
s_axes (json_t **o, const piv_field_t *g, const piv_calib_t *c, int stride)
{
    json_t *xs = json_array (), *ys = json_array ();
    double x, y;
    for (int i = 0; i < g->nx; i += stride) {
        piv_calib_position (c, g->x[i], g->y[0], &x, &y);
        jout_append (&xs, jout_number (x));
    }
    for (int j = 0; j < g->ny; j += stride) {
        piv_calib_position (c, g->x[0], g->y[j * g->nx], &x, &y);
        jout_append (&ys, jout_number (y));
    }
    jout_set (o, "x", xs);
    jout_set (o, "y", ys);
}

// Rows (j) of every stride-th value of an nx x ny grid: values[k], or
// with component 0 / 1 the converted u / v of field g.
static json_t *
s_rows (const piv_field_t *g, const float *values, const piv_calib_t *c, int component,
        int stride)
{
    json_t *rows = json_array ();
    for (int j = 0; j < g->ny; j += stride) {
        json_t *row = json_array ();
        for (int i = 0; i < g->nx; i += stride) {
            int k = j * g->nx + i;
            double u = NAN, v = NAN;
            if (!values)
                piv_calib_velocity (c, g->u[k], g->v[k], &u, &v);
            jout_append (&row, jout_number (values ? values[k] : component == 0 ? u : v));
        }
        jout_append (&rows, row);
    }
    return rows;
}

// The ensemble correlation (issue 27): its latest job, and the latest
// done's field in the page's units; null without a job.
static json_t *
s_ensemble (const dash_page_t *page)
{
    const dash_ensemble_t *e = page->ensemble;
    if (!e)
        return json_null ();
    json_t *o = json_object ();
    jout_set (&o, "job", json_integer (e->job));
    jout_set (&o, "state", jout_string (e->state));
    jout_set (&o, "pass", json_integer (e->pass));
    jout_set (&o, "passes", json_integer (e->passes));
    jout_set (&o, "pairs", json_integer (e->pairs));
    json_t *f = json_null ();
    if (e->field) {
        int stride = dash_array_stride (e->field->nx, e->field->ny);
        f = json_object ();
        jout_set (&f, "job", json_integer (e->done_job));
        jout_set (&f, "pairs", json_integer (e->done_pairs));
        jout_set (&f, "window", json_integer (e->window));
        jout_set (&f, "overlap", json_integer (e->overlap));
        jout_set (&f, "nx", json_integer (e->field->nx));
        jout_set (&f, "ny", json_integer (e->field->ny));
        jout_set (&f, "stride", json_integer (stride));
        jout_set (&f, "units", s_units (&page->calib));
        jout_set (&f, "vectors", s_vectors (e->field, &page->calib, stride));
    }
    jout_set (&o, "field", f);
    return o;
}

static json_t *
s_stats (const dash_page_t *page)
{
    piv_stats_summary_t sum;
    piv_stats_summary (page->stats, &sum);
    const piv_field_t *m = page->mean;
    int stride = dash_array_stride (m->nx, m->ny);
    json_t *o = json_object ();
    jout_set (&o, "set", jout_string (page->stats_set));
    jout_set (&o, "settings", jout_string (page->stats_settings));
    jout_set (&o, "sets", json_integer (page->nsets));
    jout_set (&o, "updated_ns", s_time (page->stats_updated_ns));
    jout_set (&o, "calibration", s_calibration (&page->stats_calib, NULL));
    jout_set (&o, "units", s_units (&page->calib));
    jout_set (&o, "fields", json_integer (sum.fields));
    jout_set (&o, "valid_fraction", jout_number (sum.valid_fraction));
    jout_set (&o, "convergence", jout_number (sum.convergence));
    jout_set (&o, "convergence_from", json_integer (sum.convergence_from));
    jout_set (&o, "mean_uncertainty",
              jout_number (piv_calib_speed (&page->calib,
                                            piv_stats_mean_uncertainty (page->stats))));
    jout_set (&o, "nx", json_integer (m->nx));
    jout_set (&o, "ny", json_integer (m->ny));
    jout_set (&o, "step_px", json_integer (m->step));
    jout_set (&o, "stride", json_integer (stride));
    jout_set (&o, "speed_min", jout_number (page->speed_min));
    jout_set (&o, "speed_max", jout_number (page->speed_max));
    s_axes (&o, m, &page->calib, stride);
    jout_set (&o, "u_mean", s_rows (m, NULL, &page->calib, 0, stride));
    jout_set (&o, "v_mean", s_rows (m, NULL, &page->calib, 1, stride));
    return o;
}

// Values of the latest field (its vorticity; a stereo field's w along +z;
// the magnitude of each vector's uncertainty)
// in 'unit', their range and grid.
static json_t *
s_latest_values (const dash_page_t *page, const float *values, piv_unit_t unit, double lo,
                 double hi)
{
    const piv_field_t *f = page->field;
    int stride = dash_array_stride (f->nx, f->ny);
    json_t *o = json_object ();
    jout_set (&o, "pair", json_integer (page->field_pair));
    jout_set (&o, "stem", jout_string (page->field_stem));
    jout_set (&o, "unit", jout_string (piv_calib_unit (&page->calib, unit)));
    jout_set (&o, "min", jout_number (lo));
    jout_set (&o, "max", jout_number (hi));
    jout_set (&o, "nx", json_integer (f->nx));
    jout_set (&o, "ny", json_integer (f->ny));
    jout_set (&o, "stride", json_integer (stride));
    s_axes (&o, f, &page->calib, stride);
    jout_set (&o, "values", s_rows (f, values, NULL, 0, stride));
    return o;
}

// One plot's convention: its axes' unit and y direction, the origin of
// its positions, the quantity it colours or plots and its unit.
static json_t *
s_plot (const char *id, const piv_calib_t *c, int positions, const char *quantity,
        const char *unit)
{
    json_t *o = json_object ();
    jout_set (&o, "id", jout_string (id));
    if (positions) {
        jout_set (&o, "position_unit", jout_string (dash_axis_unit (c)));
        jout_set (&o, "y_axis", jout_string (c->set && c->y_up ? "up" : "down"));
        json_t *origin = json_array ();
        jout_append (&origin, jout_number (c->set ? c->origin_x : 0));
        jout_append (&origin, jout_number (c->set ? c->origin_y : 0));
        jout_set (&o, "origin_px", origin);
    }
    jout_set (&o, "quantity", jout_string (quantity));
    jout_set (&o, "unit", jout_string (unit));
    return o;
}

// The convention of the page and of each plot it draws (doc/dashboard.md):
// once calibrated, every plot in the calibration's units and axes.
static json_t *
s_plots (const dash_page_t *page)
{
    const piv_calib_t *c = &page->calib;
    const char *velocity = piv_calib_unit (c, PIV_UNIT_VELOCITY);
    const char *rate = piv_calib_unit (c, PIV_UNIT_RATE);
    json_t *plots = json_array ();
    if (page->field)
        jout_append (&plots, s_plot ("field", c, 1, "|V|", velocity));
    if (page->mean && isfinite (page->speed_max))
        jout_append (&plots, s_plot ("mean-field", c, 1, "|V|", velocity));
    if (page->vorticity && isfinite (page->vorticity_max))
        jout_append (&plots, s_plot ("vorticity", c, 1, "\xCF\x89z", rate));
    if (page->w && isfinite (page->w_max))
        jout_append (&plots, s_plot ("w-field", c, 1, "w", velocity));
    if (page->sigma && isfinite (page->sigma_max))
        jout_append (&plots, s_plot ("sigma-field", c, 1, "|\xCF\x83|", velocity));
    if (page->npoints > 0)
        jout_append (&plots, s_plot ("feedback-series", c, 0, page->quantity ? page->quantity
                                                                              : "value",
                                     page->feedback_unit));
    jout_append (&plots, s_plot ("rate-history", c, 0, "results", "/s"));
    json_t *o = s_plot ("page", c, 1, NULL, NULL);
    jout_set (&o, "velocity_unit", jout_string (velocity));
    jout_set (&o, "rate_unit", jout_string (rate));
    jout_set (&o, "plots", plots);
    return o;
}

static json_t *
s_page (const dash_t *dash)
{
    const dash_page_t *page = dash->page;
    json_t *o = json_object ();
    jout_set (&o, "name", jout_string (page->exp->name));
    jout_set (&o, "field", page->field ? s_field (page) : json_null ());
    jout_set (&o, "field_note", jout_string (page->field ? NULL : page->field_note));
    jout_set (&o, "feedback", s_feedback (page));
    jout_set (&o, "rate_history", s_rate_history (page));
    jout_set (&o, "calibration", s_calibration (&page->calib, page->calib_from));
    jout_set (&o, "calibration_note", jout_string (page->calib_note[0] ? page->calib_note : NULL));
    jout_set (&o, "units", s_units (&page->calib));
    jout_set (&o, "convention", s_plots (page));
    jout_set (&o, "stats", page->mean ? s_stats (page) : json_null ());
    jout_set (&o, "ensemble", s_ensemble (page));
    jout_set (&o, "stats_note", jout_string (page->mean ? NULL : page->stats_note));
    jout_set (&o, "vorticity",
              page->vorticity ? s_latest_values (page, page->vorticity, PIV_UNIT_RATE,
                                                 page->vorticity_min, page->vorticity_max)
                              : json_null ());
    if (page->w) // a stereo field's only: a planar page's JSON is as before stereo
        jout_set (&o, "w", s_latest_values (page, page->w, PIV_UNIT_VELOCITY, page->w_min,
                                            page->w_max));
    if (page->sigma) // a field with uncertainty only: else the JSON is as before issue 27
        jout_set (&o, "sigma", s_latest_values (page, page->sigma, PIV_UNIT_VELOCITY,
                                                page->sigma_min, page->sigma_max));
    return o;
}

static json_t *
s_broker (const dash_t *dash)
{
    json_t *warnings = json_array ();
    for (int i = 0; i < dash->nwarnings; i++) {
        json_t *w = json_object ();
        jout_set (&w, "level", jout_string (dash->warnings[i].level));
        jout_set (&w, "message", jout_string (dash->warnings[i].message));
        jout_append (&warnings, w);
    }
    json_t *o = json_object ();
    jout_set (&o, "reachable", s_bool (dash->broker_ok));
    jout_set (&o, "error", jout_string (dash->broker_ok ? NULL : dash->broker_error));
    jout_set (&o, "answered",
              jout_number (dash->broker_status ? (double) dash->broker_status : NAN));
    jout_set (&o, "uptime_s", jout_number (dash->uptime_s));
    jout_set (&o, "queue", jout_number (dash->queue >= 0 ? (double) dash->queue : NAN));
    jout_set (&o, "results", jout_number (dash->results >= 0 ? (double) dash->results : NAN));
    jout_set (&o, "rate_10s", jout_number (dash->rate_10s));
    jout_set (&o, "rate_1m", jout_number (dash->rate_1m));
    jout_set (&o, "store_ok", s_bool (dash->broker_ok ? dash->store_ok : -1));
    if (dash->broker_ok && *dash->store_state)
        jout_set (&o, "store_state", jout_string (dash->store_state));
    if (dash->broker_ok && !dash->store_ok && *dash->store_error)
        jout_set (&o, "store_error", jout_string (dash->store_error));
    jout_set (&o, "policy", jout_string (dash->policy));
    jout_set (&o, "rate_limit", jout_number (dash->rate_limit));
    jout_set (&o, "paused", s_bool (dash->paused));
    jout_set (&o, "warnings", warnings);
    return o;
}

// A JSON array of n items of 'size' bytes, each made by fn.
typedef json_t *(s_item_fn) (const void *item);
static json_t *
s_array (const void *items, int n, size_t size, s_item_fn *fn)
{
    json_t *array = json_array ();
    for (int i = 0; i < n; i++)
        jout_append (&array, fn ((const char *) items + (size_t) i * size));
    return array;
}

// The page's document; NULL on no memory.
static json_t *
s_document (const dash_t *dash)
{
    json_t *log = json_object ();
    jout_set (&log, "events_read", json_integer (dash->log_events));
    jout_set (&log, "whole", json_boolean (dash->log_whole));
    json_t *o = json_object ();
    jout_set (&o, "generated_ns", json_integer (dash->now_ns));
    jout_set (&o, "broker", s_broker (dash));
    jout_set (&o, "experiments",
              s_array (dash->exps, dash->nexps, sizeof *dash->exps, (s_item_fn *) s_experiment));
    jout_set (&o, "agents",
              s_array (dash->agents, dash->nagents, sizeof *dash->agents, (s_item_fn *) s_agent));
    jout_set (&o, "failures", s_array (dash->failures, dash->nfailures, sizeof *dash->failures,
                                       (s_item_fn *) s_failure));
    jout_set (&o, "log", log);
    if (dash->page)
        jout_set (&o, "experiment", s_page (dash));
    return o;
}

void
dash_json (const dash_t *dash, FILE *out)
{
    json_t *doc = s_document (dash);
    if (jout_write (doc, out) == 0)
        fputc ('\n', out);
    else
        dash_json_error (out, "500 Internal Server Error", "no memory for the page's JSON");
    json_decref (doc);
}

void
dash_json_error (FILE *out, const char *status, const char *message)
{
    json_t *o = json_object ();
    jout_set (&o, "status", jout_string (status));
    jout_set (&o, "error", jout_string (message));
    if (jout_write (o, out) == 0)
        fputc ('\n', out);
    json_decref (o);
}
