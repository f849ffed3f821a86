// json_out.c — the status page as JSON (?format=json): the same figures as
// the HTML, numbers as numbers, null where a figure is unknown.

#include "dashboard-cgi/dash.h"

#include "store/store.h"

#include <math.h>

static void
s_key (FILE *out, int *first, const char *key)
{
    fprintf (out, "%s\"%s\":", *first ? "" : ",", key);
    *first = 0;
}

static void
s_num (FILE *out, int *first, const char *key, double x)
{
    s_key (out, first, key);
    dash_put_json_number (out, x);
}

static void
s_int (FILE *out, int *first, const char *key, int64_t x)
{
    s_key (out, first, key);
    fprintf (out, "%lld", (long long) x);
}

// A time in ns since the epoch; 0 (never) is null.
static void
s_time (FILE *out, int *first, const char *key, int64_t ns)
{
    s_key (out, first, key);
    if (ns)
        fprintf (out, "%lld", (long long) ns);
    else
        fputs ("null", out);
}

static void
s_str (FILE *out, int *first, const char *key, const char *text)
{
    s_key (out, first, key);
    if (text)
        dash_put_json (out, text);
    else
        fputs ("null", out);
}

static void
s_bool (FILE *out, int *first, const char *key, int x)
{
    s_key (out, first, key);
    fputs (x < 0 ? "null" : x ? "true" : "false", out);
}

static void
s_experiment (FILE *out, const dash_exp_t *x)
{
    int first = 1;
    fputc ('{', out);
    s_str (out, &first, "experiment", x->name);
    s_str (out, &first, "source", x->source);
    s_int (out, &first, "created_ns", x->created_ns);
    s_int (out, &first, "files", x->files);
    s_int (out, &first, "pending", x->pairs[STORE_PENDING]);
    s_int (out, &first, "dispatched", x->pairs[STORE_DISPATCHED]);
    s_int (out, &first, "done", x->pairs[STORE_DONE]);
    s_int (out, &first, "failed", x->pairs[STORE_FAILED]);
    s_int (out, &first, "skipped", x->pairs[STORE_SKIPPED]);
    s_int (out, &first, "total", x->total);
    s_bool (out, &first, "live", x->live);
    s_num (out, &first, "queue", x->queue >= 0 ? (double) x->queue : NAN);
    s_num (out, &first, "rate_10s", x->rate_10s);
    s_num (out, &first, "rate_1m", x->rate_1m);
    s_num (out, &first, "latency_median_ms", x->latency_median_ms);
    s_num (out, &first, "latency_p99_ms", x->latency_p99_ms);
    s_str (out, &first, "policy", x->policy);
    s_num (out, &first, "rate_limit", x->rate_limit);
    s_bool (out, &first, "paused", x->paused);
    s_time (out, &first, "last_result_ns", x->last_result_ns);
    fputc ('}', out);
}

static void
s_agent (FILE *out, const dash_agent_t *a)
{
    int first = 1;
    fputc ('{', out);
    s_str (out, &first, "id", a->id);
    s_str (out, &first, "host", a->host[0] ? a->host : NULL);
    s_bool (out, &first, "alive", a->alive);
    s_num (out, &first, "cores", a->cores >= 0 ? a->cores : NAN);
    s_num (out, &first, "tasks", a->tasks >= 0 ? a->tasks : NAN);
    s_int (out, &first, "done", a->done);
    s_num (out, &first, "last_heartbeat_s", a->heartbeat_s);
    s_time (out, &first, "last_seen_ns", a->last_seen_ns);
    fputc ('}', out);
}

static void
s_failure (FILE *out, const dash_failure_t *f)
{
    int first = 1;
    fputc ('{', out);
    s_str (out, &first, "experiment", f->experiment);
    s_int (out, &first, "pair", f->pair);
    s_str (out, &first, "stem", f->stem);
    s_str (out, &first, "agent", f->agent);
    s_int (out, &first, "attempts", f->attempts);
    s_str (out, &first, "error", f->error);
    s_int (out, &first, "finished_ns", f->finished_ns);
    fputc ('}', out);
}

static void
s_field (FILE *out, const dash_page_t *page)
{
    const piv_field_t *f = page->field;
    int stride = dash_quiver_stride (f), shown = 0, first = 1;
    double max_speed = 0;
    for (int j = 0; j < f->ny; j += stride)
        for (int i = 0; i < f->nx; i += stride) {
            int n = j * f->nx + i;
            if (f->flags[n] != PIV_FLAG_INVALID && isfinite (f->u[n]) && isfinite (f->v[n])) {
                shown++;
                max_speed = fmax (max_speed, hypot (f->u[n], f->v[n]));
            }
        }
    fputc ('{', out);
    s_int (out, &first, "pair", page->field_pair);
    s_str (out, &first, "stem", page->field_stem);
    s_str (out, &first, "from", page->field_source);
    s_int (out, &first, "nx", f->nx);
    s_int (out, &first, "ny", f->ny);
    s_int (out, &first, "window", f->window);
    s_int (out, &first, "step", f->step);
    s_int (out, &first, "stride", stride);
    s_int (out, &first, "shown", shown);
    s_num (out, &first, "max_speed", max_speed);
    s_key (out, &first, "vectors");
    fputc ('[', out);
    int any = 0;
    for (int j = 0; j < f->ny; j += stride)
        for (int i = 0; i < f->nx; i += stride) {
            int n = j * f->nx + i;
            fprintf (out, "%s[", any++ ? "," : "");
            dash_put_json_number (out, f->x[n]);
            fputc (',', out);
            dash_put_json_number (out, f->y[n]);
            fputc (',', out);
            dash_put_json_number (out, f->u[n]);
            fputc (',', out);
            dash_put_json_number (out, f->v[n]);
            fprintf (out, ",%d]", f->flags[n]);
        }
    fputs ("]}", out);
}

static void
s_page (FILE *out, const dash_t *dash)
{
    const dash_page_t *page = dash->page;
    int first = 1;
    fputc ('{', out);
    s_str (out, &first, "name", page->exp->name);
    s_key (out, &first, "field");
    if (page->field)
        s_field (out, page);
    else
        fputs ("null", out);
    s_str (out, &first, "field_note", page->field ? NULL : page->field_note);
    s_key (out, &first, "feedback");
    fputc ('{', out);
    int inner = 1;
    s_str (out, &inner, "quantity", page->quantity);
    s_key (out, &inner, "points");
    fputc ('[', out);
    for (int i = 0; i < page->npoints; i++) {
        const dash_point_t *p = &page->series[i];
        int f = 1;
        fprintf (out, "%s{", i ? "," : "");
        s_int (out, &f, "t_ns", p->t_ns);
        s_num (out, &f, "value", p->value);
        s_num (out, &f, "setpoint", p->setpoint);
        s_num (out, &f, "output", p->output);
        fputc ('}', out);
    }
    fputs ("]}", out);
    s_key (out, &first, "rate_history");
    fputc ('{', out);
    inner = 1;
    s_int (out, &inner, "bucket_s", DASH_BUCKET_S);
    s_int (out, &inner, "end_ns", page->buckets_end_ns);
    s_time (out, &inner, "log_from_ns", page->tail_start_ns);
    s_key (out, &inner, "results");
    fputc ('[', out);
    for (int i = 0; i < DASH_BUCKETS; i++)
        fprintf (out, "%s%lld", i ? "," : "", (long long) page->buckets[i]);
    fputs ("]}}", out);
}

// A JSON array of n items of 'size' bytes, each written by fn.
typedef void (s_item_fn) (FILE *out, const void *item);
static void
s_array (FILE *out, const void *items, int n, size_t size, s_item_fn *fn)
{
    fputc ('[', out);
    for (int i = 0; i < n; i++) {
        if (i)
            fputc (',', out);
        fn (out, (const char *) items + (size_t) i * size);
    }
    fputc (']', out);
}

void
dash_json (const dash_t *dash, FILE *out)
{
    int first = 1;
    fputc ('{', out);
    s_int (out, &first, "generated_ns", dash->now_ns);
    s_key (out, &first, "broker");
    fputc ('{', out);
    int b = 1;
    s_bool (out, &b, "reachable", dash->broker_ok);
    s_str (out, &b, "error", dash->broker_ok ? NULL : dash->broker_error);
    s_num (out, &b, "answered", dash->broker_status ? (double) dash->broker_status : NAN);
    s_num (out, &b, "uptime_s", dash->uptime_s);
    s_num (out, &b, "queue", dash->queue >= 0 ? (double) dash->queue : NAN);
    s_num (out, &b, "results", dash->results >= 0 ? (double) dash->results : NAN);
    s_num (out, &b, "rate_10s", dash->rate_10s);
    s_num (out, &b, "rate_1m", dash->rate_1m);
    s_bool (out, &b, "store_ok", dash->broker_ok ? dash->store_ok : -1);
    s_str (out, &b, "policy", dash->policy);
    s_num (out, &b, "rate_limit", dash->rate_limit);
    s_bool (out, &b, "paused", dash->paused);
    s_key (out, &b, "warnings");
    fputc ('[', out);
    for (int i = 0; i < dash->nwarnings; i++) {
        fputs (i ? ",{" : "{", out);
        int w = 1;
        s_str (out, &w, "level", dash->warnings[i].level);
        s_str (out, &w, "message", dash->warnings[i].message);
        fputc ('}', out);
    }
    fputc (']', out);
    fputc ('}', out);
    s_key (out, &first, "experiments");
    s_array (out, dash->exps, dash->nexps, sizeof *dash->exps, (s_item_fn *) s_experiment);
    s_key (out, &first, "agents");
    s_array (out, dash->agents, dash->nagents, sizeof *dash->agents, (s_item_fn *) s_agent);
    s_key (out, &first, "failures");
    s_array (out, dash->failures, dash->nfailures, sizeof *dash->failures,
             (s_item_fn *) s_failure);
    s_key (out, &first, "log");
    fprintf (out, "{\"events_read\":%lld,\"whole\":%s}", (long long) dash->log_events,
             dash->log_whole ? "true" : "false");
    if (dash->page) {
        s_key (out, &first, "experiment");
        s_page (out, dash);
    }
    fputs ("}\n", out);
}
