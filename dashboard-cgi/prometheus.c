// prometheus.c — the status page as Prometheus metrics (?format=prometheus,
// /metrics): the text exposition format 0.0.4, the same figures as the page.
// Counters (_total, a histogram's buckets) only where the broker counts
// since it started: they never go down but when it restarts, which a
// scraper takes as a reset. Figures that go up and down (pairs by state,
// queue, rates, free space) are gauges. A family whose figures are
// unknown (the broker did not answer) is left out, never given as NaN;
// pivfarm_broker_up says whether it answered. doc/dashboard.md lists them.

#include "dashboard-cgi/dash.h"

#include "store/store.h"

#include <math.h>
#include <string.h>

// A metric family: its HELP and TYPE lines come before its first sample,
// once, and not at all when it has none.
typedef struct {
    FILE *out;
    const char *name;
    const char *type;   // "gauge", "counter", "histogram"
    const char *help;
    int started;
} s_family_t;

static s_family_t
s_family (FILE *out, const char *name, const char *type, const char *help)
{
    return (s_family_t) {.out = out, .name = name, .type = type, .help = help};
}

// A number as the format wants it: integers exactly, +Inf, -Inf, NaN.
static void
s_value (FILE *out, double x)
{
    if (isnan (x))
        fputs ("NaN", out);
    else if (isinf (x))
        fputs (x > 0 ? "+Inf" : "-Inf", out);
    else if (x == (double) (int64_t) x && fabs (x) < 9e15)
        fprintf (out, "%lld", (long long) x);
    else
        fprintf (out, "%.15g", x);  // what a double says, without the noise of its last bits
}

// One sample of the family: name + suffix {labels} value. 'labels' holds
// label names and values in turn, NULL-terminated; values are escaped.
static void
s_sample (s_family_t *f, const char *suffix, const char *const *labels, double value)
{
    if (!f->started) {
        fprintf (f->out, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
        f->started = 1;
    }
    fprintf (f->out, "%s%s", f->name, suffix);
    for (int i = 0; labels && labels[i]; i += 2) {
        fprintf (f->out, "%s%s=\"", i ? "," : "{", labels[i]);
        dash_put_prom_label (f->out, labels[i + 1]);
        fputc ('"', f->out);
    }
    if (labels && labels[0])
        fputc ('}', f->out);
    fputc (' ', f->out);
    s_value (f->out, value);
    fputc ('\n', f->out);
}

static const char *const s_states[5] = {"pending", "dispatched", "done", "failed", "skipped"};

static void
s_experiments (const dash_t *dash, FILE *out)
{
    s_family_t f = s_family (out, "pivfarm_files", "gauge",
                             "Files recorded in the store, by experiment.");
    for (int i = 0; i < dash->nexps; i++)
        s_sample (&f, "", (const char *[]) {"experiment", dash->exps[i].name, NULL},
                  (double) dash->exps[i].files);

    f = s_family (out, "pivfarm_pairs", "gauge",
                  "Pairs in the store by experiment and state (pending, dispatched, done, "
                  "failed, skipped): a pair moves between states, so each goes up and down.");
    for (int i = 0; i < dash->nexps; i++)
        for (int s = 0; s < 5; s++)
            s_sample (&f, "",
                      (const char *[]) {"experiment", dash->exps[i].name, "state", s_states[s],
                                        NULL},
                      (double) dash->exps[i].pairs[s]);

    f = s_family (out, "pivfarm_queue_pairs", "gauge",
                  "Pairs queued in the broker for dispatch, by experiment.");
    for (int i = 0; i < dash->nexps; i++)
        if (dash->exps[i].live && dash->exps[i].queue >= 0)
            s_sample (&f, "", (const char *[]) {"experiment", dash->exps[i].name, NULL},
                      (double) dash->exps[i].queue);

    f = s_family (out, "pivfarm_result_rate_per_second", "gauge",
                  "Results recorded per second over the last 10 s or 1 min, by experiment "
                  "(the broker's, else from the store's log).");
    for (int i = 0; i < dash->nexps; i++) {
        const dash_exp_t *x = &dash->exps[i];
        if (isfinite (x->rate_10s))
            s_sample (&f, "", (const char *[]) {"experiment", x->name, "window", "10s", NULL},
                      x->rate_10s);
        if (isfinite (x->rate_1m))
            s_sample (&f, "", (const char *[]) {"experiment", x->name, "window", "1m", NULL},
                      x->rate_1m);
    }

    f = s_family (out, "pivfarm_latency_seconds", "histogram",
                  "Time from the close of a pair's last frame to its result recorded, every "
                  "result since the broker started, by experiment.");
    for (int i = 0; i < dash->nexps; i++) {
        const dash_exp_t *x = &dash->exps[i];
        if (!x->live || x->hist_n == 0)
            continue;
        char le[32];
        for (int b = 0; b < x->hist_n; b++) {
            snprintf (le, sizeof le, "%g", x->hist_le_s[b]);
            s_sample (&f, "_bucket", (const char *[]) {"experiment", x->name, "le", le, NULL},
                      (double) x->hist_cumulative[b]);
        }
        s_sample (&f, "_bucket", (const char *[]) {"experiment", x->name, "le", "+Inf", NULL},
                  (double) x->hist_count);
        s_sample (&f, "_sum", (const char *[]) {"experiment", x->name, NULL}, x->hist_sum_s);
        s_sample (&f, "_count", (const char *[]) {"experiment", x->name, NULL},
                  (double) x->hist_count);
    }

    f = s_family (out, "pivfarm_latency_median_seconds", "gauge",
                  "Median latency of the latest 1024 results, by experiment.");
    for (int i = 0; i < dash->nexps; i++)
        if (isfinite (dash->exps[i].latency_median_ms))
            s_sample (&f, "", (const char *[]) {"experiment", dash->exps[i].name, NULL},
                      dash->exps[i].latency_median_ms / 1000);
    f = s_family (out, "pivfarm_latency_p99_seconds", "gauge",
                  "99th percentile latency of the latest 1024 results, by experiment.");
    for (int i = 0; i < dash->nexps; i++)
        if (isfinite (dash->exps[i].latency_p99_ms))
            s_sample (&f, "", (const char *[]) {"experiment", dash->exps[i].name, NULL},
                      dash->exps[i].latency_p99_ms / 1000);

    f = s_family (out, "pivfarm_experiment_paused", "gauge",
                  "1 when dispatch of the experiment is paused, else 0.");
    for (int i = 0; i < dash->nexps; i++)
        s_sample (&f, "", (const char *[]) {"experiment", dash->exps[i].name, NULL},
                  dash->exps[i].paused ? 1 : 0);
}

static void
s_agents (const dash_t *dash, FILE *out)
{
    s_family_t f = s_family (out, "pivfarm_agents_alive", "gauge",
                             "Agents connected to the broker and alive.");
    if (dash->broker_ok && dash->agents_total >= 0)
        s_sample (&f, "", NULL, (double) dash->agents_total);

    // The broker's agents only: they are alive and their figures current
    // (with thousands, the busiest it lists).
    f = s_family (out, "pivfarm_agent_tasks", "gauge", "Tasks an agent holds now.");
    for (int i = 0; i < dash->nagents; i++) {
        const dash_agent_t *a = &dash->agents[i];
        if (a->alive == 1 && a->tasks >= 0)
            s_sample (&f, "", (const char *[]) {"agent", a->id, "host", a->host, NULL},
                      a->tasks);
    }
    f = s_family (out, "pivfarm_agent_threads", "gauge", "Worker threads of an agent.");
    for (int i = 0; i < dash->nagents; i++) {
        const dash_agent_t *a = &dash->agents[i];
        if (a->alive == 1 && a->cores >= 0)
            s_sample (&f, "", (const char *[]) {"agent", a->id, "host", a->host, NULL},
                      a->cores);
    }
    f = s_family (out, "pivfarm_agent_results_total", "counter",
                  "Results an agent delivered since it introduced itself to the broker.");
    for (int i = 0; i < dash->nagents; i++) {
        const dash_agent_t *a = &dash->agents[i];
        if (a->alive == 1)
            s_sample (&f, "", (const char *[]) {"agent", a->id, "host", a->host, NULL},
                      (double) a->done);
    }
    f = s_family (out, "pivfarm_agent_heartbeat_age_seconds", "gauge",
                  "Seconds since an agent's last heartbeat.");
    for (int i = 0; i < dash->nagents; i++) {
        const dash_agent_t *a = &dash->agents[i];
        if (a->alive == 1 && isfinite (a->heartbeat_s))
            s_sample (&f, "", (const char *[]) {"agent", a->id, "host", a->host, NULL},
                      a->heartbeat_s);
    }
}

static void
s_storage (const dash_t *dash, FILE *out)
{
    s_family_t f = s_family (out, "pivfarm_store_size_bytes", "gauge",
                             "Size of the store's database file and its write-ahead log.");
    if (dash->store_bytes >= 0)
        s_sample (&f, "", NULL, (double) dash->store_bytes);
    f = s_family (out, "pivfarm_store_wal_bytes", "gauge",
                  "Size of the store's write-ahead log (0 when there is none): it grows "
                  "while a reader holds a snapshot, and shrinks at checkpoints.");
    if (dash->wal_bytes >= 0)
        s_sample (&f, "", NULL, (double) dash->wal_bytes);
    // The broker's own: the store's contention and the guard.
    f = s_family (out, "pivfarm_store_busy_total", "counter",
                  "Times the broker found its store locked by another process (SQLITE_BUSY) "
                  "since it opened it.");
    if (dash->broker_ok && dash->store_busy >= 0)
        s_sample (&f, "", NULL, (double) dash->store_busy);
    // Each volume whose lack of space pauses dispatch, 1 while it does.
    f = s_family (out, "pivfarm_guard_paused", "gauge",
                  "1 while the free-space guard pauses dispatch for lack of space on the "
                  "volume (below storage/critical_free), else 0.");
    for (int v = 0; v < dash->nvolumes && dash->broker_ok; v++)
        if (strcmp (dash->volumes[v].role, "watch root") != 0)
            s_sample (&f, "",
                      (const char *[]) {"volume", dash->volumes[v].role, "path",
                                        dash->volumes[v].path, NULL},
                      dash->volumes[v].pausing);

    f = s_family (out, "pivfarm_volume_free_bytes", "gauge",
                  "Free space of a volume the farm writes (watch root, results, store).");
    for (int v = 0; v < dash->nvolumes; v++)
        if (dash->volumes[v].free_bytes >= 0)
            s_sample (&f, "",
                      (const char *[]) {"volume", dash->volumes[v].role, "path",
                                        dash->volumes[v].path, NULL},
                      (double) dash->volumes[v].free_bytes);
    f = s_family (out, "pivfarm_volume_size_bytes", "gauge", "Size of a volume the farm writes.");
    for (int v = 0; v < dash->nvolumes; v++)
        if (dash->volumes[v].total_bytes >= 0)
            s_sample (&f, "",
                      (const char *[]) {"volume", dash->volumes[v].role, "path",
                                        dash->volumes[v].path, NULL},
                      (double) dash->volumes[v].total_bytes);

    // Every kind and level, 0 when none is in force: an alert can compare.
    static const char *const kinds[] = {"space", "allocation", "expiry", "archive"};
    static const char *const levels[] = {"warning", "critical"};
    f = s_family (out, "pivfarm_warnings", "gauge",
                  "Storage warnings in force (doc/storage.md), by kind and level.");
    if (!dash->broker_ok)
        return;
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 2; l++) {
            int count = 0;
            for (int i = 0; i < dash->nwarning_counts; i++)
                if (strcmp (dash->warning_counts[i].kind, kinds[k]) == 0
                    && strcmp (dash->warning_counts[i].level, levels[l]) == 0)
                    count = dash->warning_counts[i].count;
            s_sample (&f, "", (const char *[]) {"kind", kinds[k], "level", levels[l], NULL},
                      count);
        }
}

void
dash_prometheus (const dash_t *dash, FILE *out)
{
    s_family_t f = s_family (out, "pivfarm_broker_up", "gauge",
                             "1 when the broker answered the status page's status request, "
                             "else 0 (the other figures then come from the store alone).");
    s_sample (&f, "", NULL, dash->broker_ok ? 1 : 0);
    if (dash->broker_ok) {
        f = s_family (out, "pivfarm_broker_uptime_seconds", "gauge",
                      "Seconds since the broker started.");
        if (isfinite (dash->uptime_s))
            s_sample (&f, "", NULL, dash->uptime_s);
        f = s_family (out, "pivfarm_broker_store_ok", "gauge",
                      "1 when the broker's last commit to its store worked, else 0.");
        s_sample (&f, "", NULL, dash->store_ok ? 1 : 0);
        f = s_family (out, "pivfarm_results_total", "counter",
                      "Results recorded by the broker since it started, every experiment.");
        if (dash->results >= 0)
            s_sample (&f, "", NULL, (double) dash->results);
    }
    s_experiments (dash, out);
    s_agents (dash, out);
    s_storage (dash, out);
    f = s_family (out, "pivfarm_clock_skew_seconds", "gauge",
                  "A peer's clock less the broker's, as the broker estimates it (agents from "
                  "their heartbeats, watchers from their files' times), the 32 largest.");
    for (int i = 0; i < dash->nclocks && dash->broker_ok; i++)
        s_sample (&f, "", (const char *[]) {"peer", dash->clocks[i].peer, NULL},
                  dash->clocks[i].skew_s);
}
