// gather.c — the status page's figures: the broker's `status` reply for what
// only the running broker knows (queue, rates, latency, policy in force,
// live agents), the store read-only for everything else, and the store alone
// when the broker does not answer. Every read is bounded: the log is read
// from its end (DASH_LOG_TAIL events), failures through their index.

#include "dashboard-cgi/dash.h"

#include "common/ask.h"
#include "common/feedback_quantity.h"
#include "common/proto.h"
#include "common/jdoc.h"
#include "store/store.h"

#include <czmq.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#define S_AGENTS_MAX 256   // agents listed, at most
#define S_FEEDBACK_RING 512  // feedback payloads kept per experiment that needs them

// Feedback payloads of one experiment, the latest S_FEEDBACK_RING, a ring.
typedef struct {
    char *payload[S_FEEDBACK_RING];
    int64_t count;          // payloads seen
    int wanted;             // 1: keep this experiment's payloads
} s_ring_t;

typedef struct {
    dash_t *dash;
    store_t *store;
    int64_t page_id;        // the page's experiment (0: none)
    s_ring_t *rings;        // per experiment (index as dash->exps), NULL where not kept
    int64_t first_ts;       // the first event of the tail
} s_gather_t;

// ---------------------------------------------------------------------------
// Asking the broker

// 'status' from the broker: the parsed reply, or NULL with the reason.
// 'status' only reads: the page's key needs to be a client's, never an
// operator's (doc/security.md).
// *answered gets the status of a REPLY that refused (0 when none came).
static jdoc_t *
s_ask_status (const config_t *cfg, int timeout_ms, char *err, size_t errlen, int *answered)
{
    char *body;
    jdoc_t *doc = NULL;
    int status;
    ask_result_t rc = ask_once (cfg, "status", timeout_ms, &status, &body, err, errlen);
    *answered = rc == ASK_REFUSED ? status : 0;
    if (rc == ASK_UNSENT)
        snprintf (err, errlen, "cannot send to the broker at '%s'", cfg->client.control);
    if (rc != ASK_OK)
        return NULL;
    char why[256];
    if (!(doc = jdoc_parse (body, why, sizeof why)))
        snprintf (err, errlen, "the broker at '%.200s' answered with %s", cfg->client.control, why);
    free (body);
    return doc;
}

// ---------------------------------------------------------------------------
// The store: experiments, counts, settings

static dash_exp_t *
s_exp_by_id (dash_t *dash, int64_t id)
{
    for (int i = 0; i < dash->nexps; i++)
        if (dash->exps[i].id == id)
            return &dash->exps[i];
    return NULL;
}

static dash_exp_t *
s_exp_by_name (dash_t *dash, const char *name)
{
    for (int i = 0; name && i < dash->nexps; i++)
        if (strcmp (dash->exps[i].name, name) == 0)
            return &dash->exps[i];
    return NULL;
}

static int
s_on_experiment (void *arg, const store_experiment_t *e)
{
    dash_t *dash = arg;
    dash_exp_t *grown = realloc (dash->exps, sizeof *grown * (size_t) (dash->nexps + 1));
    if (!grown)
        return -1;
    dash->exps = grown;
    dash_exp_t *x = &dash->exps[dash->nexps++];
    *x = (dash_exp_t) {.id = e->id,
                       .name = strdup (e->name),
                       .source = strdup (e->source),
                       .created_ns = e->created_ns,
                       .queue = -1,
                       .rate_10s = NAN,
                       .rate_1m = NAN,
                       .latency_median_ms = NAN,
                       .latency_p99_ms = NAN,
                       .rate_limit = NAN,
                       .policy = "all"};
    return 0;
}

static int
s_on_counts (void *arg, const store_counts_t *c)
{
    dash_exp_t *x = s_exp_by_name (arg, c->name);
    if (x) {
        x->files = c->files;
        x->total = 0;
        for (int s = 0; s < 5; s++) {
            x->pairs[s] = c->pairs[s];
            x->total += c->pairs[s];
        }
    }
    return 0;
}

// Settings as the broker keeps them (doc/control.md): an experiment's own,
// else the global one (experiment 0).
static void
s_apply_setting (char *policy, double *rate_limit, int *paused, const char *key,
                 const char *value)
{
    if (strcmp (key, "rate") == 0)
        *rate_limit = strcmp (value, "max") == 0 ? NAN : atof (value);
    else if (strcmp (key, "policy") == 0)
        snprintf (policy, 32, "%s", value);
    else if (strcmp (key, "paused") == 0)
        *paused = strcmp (value, "1") == 0;
}

static int
s_on_setting (void *arg, int64_t experiment, const char *key, const char *value)
{
    dash_t *dash = arg;
    if (experiment == 0) {
        // The global ones come first (experiment order): every experiment
        // starts from them.
        s_apply_setting (dash->policy, &dash->rate_limit, &dash->paused, key, value);
        for (int i = 0; i < dash->nexps; i++)
            s_apply_setting (dash->exps[i].policy, &dash->exps[i].rate_limit,
                             &dash->exps[i].paused, key, value);
    }
    else {
        dash_exp_t *x = s_exp_by_id (dash, experiment);
        if (x)
            s_apply_setting (x->policy, &x->rate_limit, &x->paused, key, value);
    }
    return 0;
}


// The value of "key=" in a key=value payload, up to the next space, into
// buf; NULL if absent.
static const char *
s_payload_value (const char *payload, const char *key, char *buf, size_t size)
{
    size_t klen = strlen (key);
    for (const char *p = payload; p && *p; p = strchr (p, ' '), p = p ? p + 1 : NULL)
        if (strncmp (p, key, klen) == 0 && p[klen] == '=') {
            const char *v = p + klen + 1;
            size_t n = strcspn (v, " ");
            if (n >= size)
                n = size - 1;
            memcpy (buf, v, n);
            buf[n] = '\0';
            return buf;
        }
    return NULL;
}

static dash_agent_t *
s_agent (dash_t *dash, const char *id)
{
    for (int i = 0; i < dash->nagents; i++)
        if (strcmp (dash->agents[i].id, id) == 0)
            return &dash->agents[i];
    if (dash->nagents >= S_AGENTS_MAX)
        return NULL;
    dash_agent_t *grown = realloc (dash->agents, sizeof *grown * (size_t) (dash->nagents + 1));
    if (!grown)
        return NULL;
    dash->agents = grown;
    dash_agent_t *a = &dash->agents[dash->nagents++];
    *a = (dash_agent_t) {.id = strdup (id), .host = strdup (""), .cores = -1, .tasks = -1,
                         .heartbeat_s = NAN, .alive = -1};
    return a;
}

static int
s_on_agent (void *arg, const char *name, const char *host, int cores, const char *capabilities,
            int64_t first_seen_ns, int64_t last_seen_ns)
{
    (void) capabilities, (void) first_seen_ns, (void) last_seen_ns;
    dash_agent_t *a = s_agent (arg, name);
    if (a) {
        free (a->host);
        a->host = strdup (host);
        a->cores = cores;
    }
    return 0;
}

static void
s_ring_add (s_ring_t *ring, const char *payload)
{
    int slot = (int) (ring->count++ % S_FEEDBACK_RING);
    free (ring->payload[slot]);
    ring->payload[slot] = strdup (payload);
}

static int
s_on_event (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
            int64_t pair, const char *payload)
{
    (void) id, (void) pair;
    s_gather_t *g = arg;
    dash_t *dash = g->dash;
    if (!g->first_ts)
        g->first_ts = ts_ns;
    dash->log_events++;
    char agent_id[256];
    int is_result = strcmp (kind, "result") == 0;
    if (is_result || strcmp (kind, "dispatch") == 0 || strcmp (kind, "failure") == 0
        || strcmp (kind, "agent") == 0) {
        dash_agent_t *a = s_payload_value (payload, "agent", agent_id, sizeof agent_id)
                              ? s_agent (dash, agent_id)
                              : NULL;
        if (a) {
            a->last_seen_ns = ts_ns;
            a->done += is_result;
            char host[256], cores[32];
            if (strcmp (kind, "agent") == 0 && s_payload_value (payload, "host", host, sizeof host)) {
                free (a->host);
                a->host = strdup (host);
                if (s_payload_value (payload, "cores", cores, sizeof cores))
                    a->cores = atoi (cores);
            }
        }
    }
    int index = -1;
    for (int i = 0; i < dash->nexps && index < 0; i++)
        if (dash->exps[i].id == experiment)
            index = i;
    if (index < 0)
        return 0;
    dash_exp_t *x = &dash->exps[index];
    if (is_result) {
        x->last_result_ns = ts_ns;
        x->tail_results++;
        if (!dash->broker_ok) {
            if (ts_ns > dash->now_ns - 10 * (int64_t) 1000000000)
                x->rate_10s = (isnan (x->rate_10s) ? 0 : x->rate_10s) + 1;
            if (ts_ns > dash->now_ns - 60 * (int64_t) 1000000000)
                x->rate_1m = (isnan (x->rate_1m) ? 0 : x->rate_1m) + 1;
        }
        if (dash->page && x->id == g->page_id) {
            dash_page_t *p = dash->page;
            int64_t width = (int64_t) DASH_BUCKET_S * 1000000000;
            int64_t back = (p->buckets_end_ns - ts_ns) / width;
            if (ts_ns <= p->buckets_end_ns && back < DASH_BUCKETS)
                p->buckets[DASH_BUCKETS - 1 - back]++;
        }
    }
    else if (strcmp (kind, "feedback") == 0 && g->rings[index].wanted)
        s_ring_add (&g->rings[index], payload);
    return 0;
}

// ---------------------------------------------------------------------------
// Feedback: latency figures (when the broker is away) and the time series

static int
s_compare_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// The ring's payloads, oldest first, as one JSON array parsed at once
// (NULL if none, or one of them is not JSON: then each alone).
static jdoc_t *
s_ring_parse (const s_ring_t *ring, int *n_p)
{
    int n = ring->count < S_FEEDBACK_RING ? (int) ring->count : S_FEEDBACK_RING;
    int first = ring->count < S_FEEDBACK_RING ? 0 : (int) (ring->count % S_FEEDBACK_RING);
    *n_p = 0;
    if (n == 0)
        return NULL;
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream (&text, &size);
    if (!f)
        return NULL;
    fputc ('[', f);
    for (int i = 0; i < n; i++)
        fprintf (f, "%s%s", i ? "," : "", ring->payload[(first + i) % S_FEEDBACK_RING]);
    fputc (']', f);
    fclose (f);
    char err[256];
    jdoc_t *doc = jdoc_parse (text, err, sizeof err);
    free (text);
    if (doc)
        *n_p = n;
    return doc;
}

static void
s_latencies (dash_exp_t *x, jdoc_t *doc, int n)
{
    double *ms = malloc (sizeof (double) * (size_t) (n ? n : 1));
    int k = 0;
    for (int i = n > DASH_LATENCIES ? n - DASH_LATENCIES : 0; ms && i < n; i++)
        if (jdoc_is_number (doc, "$[%d].latency_ms", i))
            ms[k++] = jdoc_number (doc, NAN, "$[%d].latency_ms", i);
    if (k > 0) {
        qsort (ms, (size_t) k, sizeof (double), s_compare_double);
        x->latency_median_ms = k % 2 ? ms[k / 2] : (ms[k / 2 - 1] + ms[k / 2]) / 2;
        int p99 = (int) ceil (0.99 * k) - 1;
        x->latency_p99_ms = ms[p99 < 0 ? 0 : p99];
    }
    free (ms);
}

// The unit member of a feedback message that names the unit of
// 'quantity' (units.velocity, units.rate; NULL: a pure number).
static const char *
s_unit_member (const char *quantity)
{
    const feedback_quantity_info_t *q = feedback_quantity_find (quantity ? quantity : "");
    return !q || q->unit == FEEDBACK_UNIT_NONE ? NULL
           : q->unit == FEEDBACK_UNIT_RATE     ? "units.rate"
                                               : "units.velocity";
}

static void
s_series (dash_page_t *page, jdoc_t *doc, int n)
{
    page->npoints = 0;
    for (int i = n > DASH_SERIES ? n - DASH_SERIES : 0; i < n; i++) {
        if (!jdoc_is_number (doc, "$[%d].value", i))
            continue;
        const char *quantity = jdoc_string (doc, "$[%d].quantity", i);
        if (quantity && (!page->quantity || strcmp (page->quantity, quantity) != 0)) {
            // The quantity changed: the series starts again.
            free (page->quantity);
            page->quantity = strdup (quantity);
            page->npoints = 0;
        }
        // Messages from before calibrations existed name no unit: image units.
        const char *member = s_unit_member (page->quantity);
        const char *unit = member ? jdoc_string (doc, "$[%d].%s", i, member) : NULL;
        page->series[page->npoints++] = (dash_point_t) {
            .t_ns = jdoc_int (doc, 0, "$[%d].computed_ns", i),
            .value = jdoc_number (doc, NAN, "$[%d].value", i),
            .setpoint = jdoc_bool (doc, 0, "$[%d].enabled", i)
                            ? jdoc_number (doc, NAN, "$[%d].setpoint", i)
                            : NAN,
            .output = jdoc_number (doc, NAN, "$[%d].output", i),
            .image_units = member && (!unit || strcmp (unit, "m/s") != 0)
                           && (!unit || strcmp (unit, "1/s") != 0)};
    }
    // The unit of the latest point (measure.c converts the series to the
    // calibration in force), named as the page's other plots name it (the
    // messages' "px" is px per frame pair).
    const char *member = s_unit_member (page->quantity);
    int rate = member && strcmp (member, "units.rate") == 0;
    const dash_point_t *last = page->npoints ? &page->series[page->npoints - 1] : NULL;
    snprintf (page->feedback_unit, sizeof page->feedback_unit, "%s",
              !member || !last       ? ""
              : last->image_units    ? (rate ? "1/frame" : "px/frame")
              : rate                 ? "1/s"
                                     : "m/s");
}

// ---------------------------------------------------------------------------
// The broker's figures over the store's

// The latency histogram of experiment i of the status reply into x; none
// unless it is whole: bounds increasing, counts cumulative, at most count.
static void
s_histogram (dash_exp_t *x, jdoc_t *doc, int i)
{
    int n = jdoc_length (doc, "$.experiments[%d].latency_histogram.le_s", i);
    if (n <= 0 || n > DASH_HIST_MAX
        || jdoc_length (doc, "$.experiments[%d].latency_histogram.cumulative", i) != n)
        return;
    x->hist_count = jdoc_int (doc, -1, "$.experiments[%d].latency_histogram.count", i);
    x->hist_sum_s = jdoc_number (doc, NAN, "$.experiments[%d].latency_histogram.sum_s", i);
    for (int b = 0; b < n; b++) {
        x->hist_le_s[b] = jdoc_number (doc, NAN, "$.experiments[%d].latency_histogram.le_s[%d]",
                                       i, b);
        x->hist_cumulative[b] =
            jdoc_int (doc, -1, "$.experiments[%d].latency_histogram.cumulative[%d]", i, b);
        if (!isfinite (x->hist_le_s[b]) || x->hist_cumulative[b] < 0
            || (b > 0 && (x->hist_le_s[b] <= x->hist_le_s[b - 1]
                          || x->hist_cumulative[b] < x->hist_cumulative[b - 1])))
            return;
    }
    if (x->hist_count < x->hist_cumulative[n - 1] || !isfinite (x->hist_sum_s))
        return;
    x->hist_n = n;
}

// One more warning of 'kind' and 'level' in force.
static void
s_count_warning (dash_t *dash, const char *kind, const char *level)
{
    kind = kind ? kind : "other";
    level = level ? level : "warning";
    for (int k = 0; k < dash->nwarning_counts; k++)
        if (strcmp (dash->warning_counts[k].kind, kind) == 0
            && strcmp (dash->warning_counts[k].level, level) == 0) {
            dash->warning_counts[k].count++;
            return;
        }
    if (dash->nwarning_counts == 16)
        return;
    int k = dash->nwarning_counts++;
    snprintf (dash->warning_counts[k].kind, sizeof dash->warning_counts[k].kind, "%s", kind);
    snprintf (dash->warning_counts[k].level, sizeof dash->warning_counts[k].level, "%s", level);
    dash->warning_counts[k].count = 1;
}

// The files of experiment i in no pair, when the broker says (a broker
// before issue 25 does not: unknown).
static void
s_unpaired (dash_exp_t *x, jdoc_t *doc, int i)
{
    if (jdoc_type_at (doc, "$.experiments[%d].unpaired", i) != JDOC_OBJECT
        || !(x->unpaired = calloc (1, sizeof *x->unpaired)))
        return;
    dash_unpaired_t *u = x->unpaired;
    u->waiting = jdoc_int (doc, 0, "$.experiments[%d].unpaired.waiting", i);
    u->refused = jdoc_int (doc, 0, "$.experiments[%d].unpaired.refused", i);
    const char *rule = jdoc_string (doc, "$.experiments[%d].unpaired.rule", i);
    const char *expects = jdoc_string (doc, "$.experiments[%d].unpaired.expects", i);
    snprintf (u->rule, sizeof u->rule, "%s", rule ? rule : "");
    snprintf (u->expects, sizeof u->expects, "%s", expects ? expects : "");
    int n = jdoc_length (doc, "$.experiments[%d].unpaired.files", i);
    for (int f = 0; f < n && u->nfiles < DASH_UNPAIRED; f++) {
        const char *name = jdoc_string (doc, "$.experiments[%d].unpaired.files[%d].name", i, f);
        const char *state = jdoc_string (doc, "$.experiments[%d].unpaired.files[%d].state", i, f);
        const char *why = jdoc_string (doc, "$.experiments[%d].unpaired.files[%d].why", i, f);
        snprintf (u->files[u->nfiles].name, sizeof u->files[0].name, "%s", name ? name : "?");
        snprintf (u->files[u->nfiles].state, sizeof u->files[0].state, "%s", state ? state : "?");
        snprintf (u->files[u->nfiles].why, sizeof u->files[0].why, "%s", why ? why : "");
        u->nfiles++;
    }
}

static void
s_merge_broker (dash_t *dash, jdoc_t *doc)
{
    dash->uptime_s = jdoc_number (doc, NAN, "$.uptime_s");
    dash->queue = jdoc_int (doc, -1, "$.queue");
    dash->results = jdoc_int (doc, -1, "$.results");
    dash->rate_10s = jdoc_number (doc, NAN, "$.rate_10s");
    dash->rate_1m = jdoc_number (doc, NAN, "$.rate_1m");
    dash->store_ok = jdoc_bool (doc, 1, "$.store_ok");
    const char *state = jdoc_string (doc, "$.store_state");
    const char *why = jdoc_string (doc, "$.store_error");
    snprintf (dash->store_state, sizeof dash->store_state, "%s", state ? state : "");
    snprintf (dash->store_error, sizeof dash->store_error, "%s", why ? why : "");
    dash->store_busy = jdoc_int (doc, -1, "$.store_busy");
    int nc = jdoc_length (doc, "$.clocks");
    for (int i = 0; i < nc && dash->nclocks < 32; i++) {
        const char *peer = jdoc_string (doc, "$.clocks[%d].peer", i);
        double ms = jdoc_number (doc, NAN, "$.clocks[%d].clock_skew_ms", i);
        if (!peer || !isfinite (ms))
            continue;
        snprintf (dash->clocks[dash->nclocks].peer, sizeof dash->clocks[0].peer, "%s", peer);
        dash->clocks[dash->nclocks++].skew_s = ms / 1000;
    }
    const char *policy = jdoc_string (doc, "$.policy");
    if (policy)
        snprintf (dash->policy, sizeof dash->policy, "%s", policy);
    dash->rate_limit = jdoc_number (doc, NAN, "$.rate_limit");
    dash->paused = jdoc_bool (doc, 0, "$.paused");
    int nw = jdoc_length (doc, "$.warnings");
    for (int i = 0; i < nw && dash->nwarnings < 8; i++) {
        const char *level = jdoc_string (doc, "$.warnings[%d].level", i);
        const char *message = jdoc_string (doc, "$.warnings[%d].message", i);
        snprintf (dash->warnings[dash->nwarnings].level, sizeof dash->warnings[0].level, "%s",
                  level ? level : "warning");
        snprintf (dash->warnings[dash->nwarnings++].message, sizeof dash->warnings[0].message,
                  "%s", message ? message : "");
    }
    for (int i = 0; i < nw; i++)
        s_count_warning (dash, jdoc_string (doc, "$.warnings[%d].kind", i),
                         jdoc_string (doc, "$.warnings[%d].level", i));
    int nv = jdoc_length (doc, "$.volumes");
    for (int i = 0; i < nv && dash->nvolumes < 3; i++) {
        const char *role = jdoc_string (doc, "$.volumes[%d].role", i);
        const char *path = jdoc_string (doc, "$.volumes[%d].path", i);
        if (!role || !path)
            continue;
        int v = dash->nvolumes++;
        dash->volumes[v].role = strcmp (role, "watch root") == 0 ? "watch root"
                                : strcmp (role, "results") == 0  ? "results"
                                                                 : "store";
        snprintf (dash->volumes[v].path, sizeof dash->volumes[v].path, "%s", path);
        dash->volumes[v].free_bytes = jdoc_int (doc, -1, "$.volumes[%d].free_bytes", i);
        dash->volumes[v].total_bytes = jdoc_int (doc, -1, "$.volumes[%d].total_bytes", i);
        dash->volumes[v].pausing = jdoc_bool (doc, 0, "$.volumes[%d].pausing", i);
    }
    int n = jdoc_length (doc, "$.experiments");
    for (int i = 0; i < n; i++) {
        dash_exp_t *x = s_exp_by_name (dash, jdoc_string (doc, "$.experiments[%d].experiment", i));
        if (!x || jdoc_type_at (doc, "$.experiments[%d].queue", i) == JDOC_MISSING)
            continue;
        x->live = 1;
        x->queue = jdoc_int (doc, -1, "$.experiments[%d].queue", i);
        x->rate_10s = jdoc_number (doc, NAN, "$.experiments[%d].rate_10s", i);
        x->rate_1m = jdoc_number (doc, NAN, "$.experiments[%d].rate_1m", i);
        x->latency_median_ms = jdoc_number (doc, NAN, "$.experiments[%d].latency_median_ms", i);
        x->latency_p99_ms = jdoc_number (doc, NAN, "$.experiments[%d].latency_p99_ms", i);
        x->rate_limit = jdoc_number (doc, NAN, "$.experiments[%d].rate_limit", i);
        x->paused = jdoc_bool (doc, 0, "$.experiments[%d].paused", i);
        policy = jdoc_string (doc, "$.experiments[%d].policy", i);
        if (policy)
            snprintf (x->policy, sizeof x->policy, "%s", policy);
        s_histogram (x, doc, i);
        s_unpaired (x, doc, i);
    }
    n = jdoc_length (doc, "$.agents");
    // A summary (thousands of agents) lists only some: the others are not
    // known dead.
    dash->agents_total = jdoc_int (doc, n, "$.agents_total");
    dash->agents_partial = dash->agents_total > n;
    for (int i = 0; i < n; i++) {
        const char *id = jdoc_string (doc, "$.agents[%d].id", i);
        dash_agent_t *a = id ? s_agent (dash, id) : NULL;
        if (!a)
            continue;
        const char *host = jdoc_string (doc, "$.agents[%d].host", i);
        free (a->host);
        a->host = strdup (host ? host : "");
        a->cores = (int) jdoc_int (doc, -1, "$.agents[%d].cores", i);
        a->tasks = (int) jdoc_int (doc, -1, "$.agents[%d].tasks", i);
        a->done = jdoc_int (doc, 0, "$.agents[%d].done", i);
        a->heartbeat_s = jdoc_number (doc, NAN, "$.agents[%d].last_heartbeat_ms", i) / 1000;
        a->alive = 1;
    }
}

// Alive first, then dead, then unknown; by id within each.
static int
s_compare_agents (const void *a, const void *b)
{
    const dash_agent_t *x = a, *y = b;
    int rx = x->alive == 1 ? 0 : x->alive == 0 ? 1 : 2;
    int ry = y->alive == 1 ? 0 : y->alive == 0 ? 1 : 2;
    return rx != ry ? rx - ry : strcmp (x->id, y->id);
}

// ---------------------------------------------------------------------------
// Failures: the failed pairs through their index, then the details of the
// latest few, each read from its own id on.

typedef struct {
    dash_t *dash;
    const char *only;        // experiment name, or NULL
    int64_t pair[DASH_FAILURES];
    char *experiment[DASH_FAILURES];
    int64_t count;
} s_failed_t;

static int
s_on_failed (void *arg, int64_t pair, const char *experiment, const char *stem,
             const char *name_a, const char *name_b, int attempts)
{
    (void) stem, (void) name_a, (void) name_b, (void) attempts;
    s_failed_t *f = arg;
    if (f->only && strcmp (f->only, experiment) != 0)
        return 0;
    int slot = (int) (f->count++ % DASH_FAILURES);
    free (f->experiment[slot]);
    f->pair[slot] = pair;
    f->experiment[slot] = strdup (experiment);
    return 0;
}

static int
s_on_failure_detail (void *arg, const store_pair_info_t *p)
{
    dash_failure_t *out = arg;
    out->stem = strdup (p->stem);
    out->agent = strdup (p->agent);
    out->error = strdup (p->error);
    out->attempts = p->attempts;
    out->finished_ns = p->finished_ns;
    return 1;
}

static int
s_compare_failures (const void *a, const void *b)
{
    const dash_failure_t *x = a, *y = b;
    return x->finished_ns != y->finished_ns ? (x->finished_ns < y->finished_ns ? 1 : -1)
                                            : (x->pair < y->pair ? 1 : -1);
}

static int
s_failures (dash_t *dash, store_t *store, const char *only)
{
    s_failed_t f = {.dash = dash, .only = only};
    int rc = store_pairs_in_state (store, STORE_FAILED, s_on_failed, &f);
    int n = f.count < DASH_FAILURES ? (int) f.count : DASH_FAILURES;
    for (int i = 0; rc >= 0 && i < n; i++) {
        dash_exp_t *x = s_exp_by_name (dash, f.experiment[i]);
        dash_failure_t *out = &dash->failures[dash->nfailures];
        *out = (dash_failure_t) {.pair = f.pair[i], .experiment = f.experiment[i]};
        f.experiment[i] = NULL;
        if (x && store_pairs_of (store, x->id, STORE_FAILED, f.pair[i] - 1, 1,
                                 s_on_failure_detail, out) == 1)
            dash->nfailures++;
        else {
            free (out->experiment);
            free (out->stem), free (out->agent), free (out->error);
        }
    }
    for (int i = 0; i < DASH_FAILURES; i++)
        free (f.experiment[i]);
    qsort (dash->failures, (size_t) dash->nfailures, sizeof (dash_failure_t), s_compare_failures);
    return rc < 0 ? -1 : 0;
}

// ---------------------------------------------------------------------------
// The latest field: from the store when the experiment's results are few
// enough to be listed every request (the store lists them all, oldest
// first), else from the result file the broker named for it.

typedef struct {
    unsigned char *blob;    // the latest field seen
    size_t size;
    size_t capacity;
    int64_t pair;
    char *stem;
} s_latest_t;

static int
s_on_result (void *arg, const store_result_info_t *r)
{
    s_latest_t *l = arg;
    if (!r->field || r->field_size == 0)
        return 0;
    if (r->field_size > l->capacity) {
        unsigned char *grown = realloc (l->blob, r->field_size);
        if (!grown)
            return -1;
        l->blob = grown;
        l->capacity = r->field_size;
    }
    memcpy (l->blob, r->field, r->field_size);
    l->size = r->field_size;
    l->pair = r->pair;
    free (l->stem);
    l->stem = strdup (r->stem);
    return 0;
}

static void
s_latest_field (dash_t *dash, store_t *store, const s_ring_t *ring)
{
    dash_page_t *page = dash->page;
    dash_exp_t *x = page->exp;
    char err[512] = "";
    if (x->pairs[STORE_DONE] == 0) {
        snprintf (page->field_note, sizeof page->field_note, "no result yet");
        return;
    }
    s_latest_t l = {0};
    if (store_result_latest (store, x->id, s_on_result, &l) > 0 && l.size > 0) {
        page->field = piv_field_decode (l.blob, l.size, err, sizeof err);
        page->field_pair = l.pair;
        page->field_stem = l.stem;
        snprintf (page->field_source, sizeof page->field_source, "store");
        l.stem = NULL;
    }
    free (l.blob);
    free (l.stem);
    if (page->field)
        return;
    if (!err[0])
        snprintf (err, sizeof err, "the store keeps no field of its results"
                  " (broker/store_fields)");
    // The latest feedback message names the latest result: its file.
    int n;
    jdoc_t *doc = ring->count > 0 ? s_ring_parse (ring, &n) : NULL;
    const char *stem = doc ? jdoc_string (doc, "$[%d].stem", n - 1) : NULL;
    if (stem) {
        char path[PATH_MAX * 2];
        snprintf (path, sizeof path, "%s/%s/%s.txt", dash->cfg.agent.results, x->name, stem);
        page->field = piv_field_read_txt (path, err, sizeof err);
        if (page->field) {
            page->field_pair = jdoc_int (doc, 0, "$[%d].pair", n - 1);
            page->field_stem = strdup (stem);
            snprintf (page->field_source, sizeof page->field_source, "file");
        }
    }
    jdoc_destroy (&doc);
    if (!page->field)
        snprintf (page->field_note, sizeof page->field_note, "no field to show: %s",
                  err[0] ? err : "no recent result in the log");
}

// ---------------------------------------------------------------------------
// Sizes: the store's files; the volumes measured here when the broker did
// not say (the same three it watches, doc/storage.md).

static void
s_sizes (dash_t *dash)
{
    const config_t *cfg = &dash->cfg;
    struct stat st;
    char wal[PATH_MAX + 8];
    dash->store_bytes = stat (cfg->broker.store, &st) == 0 ? (int64_t) st.st_size : -1;
    snprintf (wal, sizeof wal, "%s-wal", cfg->broker.store);
    dash->wal_bytes = dash->store_bytes < 0 ? -1 : 0;
    if (dash->store_bytes >= 0 && stat (wal, &st) == 0) {
        dash->store_bytes += (int64_t) st.st_size;
        dash->wal_bytes = (int64_t) st.st_size;
    }
    if (dash->nvolumes > 0)
        return;
    const char *roles[3] = {"watch root", "results", "store"};
    const char *paths[3] = {cfg->watcher.root, cfg->agent.results, cfg->broker.store};
    for (int v = 0; v < 3; v++) {
        dash->volumes[v].role = roles[v];
        snprintf (dash->volumes[v].path, sizeof dash->volumes[v].path, "%s", paths[v]);
        char *slash = strrchr (dash->volumes[v].path, '/');
        if (v == 2 && slash && slash != dash->volumes[v].path)
            *slash = '\0';  // the store's directory
        struct statvfs vfs;
        int ok = statvfs (dash->volumes[v].path, &vfs) == 0;
        dash->volumes[v].free_bytes = ok ? (int64_t) vfs.f_bavail * (int64_t) vfs.f_frsize : -1;
        dash->volumes[v].total_bytes = ok ? (int64_t) vfs.f_blocks * (int64_t) vfs.f_frsize : -1;
    }
    dash->nvolumes = 3;
}

// ---------------------------------------------------------------------------

int
dash_gather (dash_t *dash, const char *experiment, int timeout_ms, char *err, size_t errlen)
{
    dash->now_ns = zclock_time () * (int64_t) 1000000;
    struct timespec ts;
    if (clock_gettime (CLOCK_REALTIME, &ts) == 0)
        dash->now_ns = ts.tv_sec * (int64_t) 1000000000 + ts.tv_nsec;
    dash->queue = -1;
    dash->results = -1;
    dash->rate_10s = dash->rate_1m = dash->uptime_s = dash->rate_limit = NAN;
    dash->agents_total = -1;
    dash->store_busy = -1;
    snprintf (dash->policy, sizeof dash->policy, "all");

    jdoc_t *status = s_ask_status (&dash->cfg, timeout_ms, dash->broker_error,
                                   sizeof dash->broker_error, &dash->broker_status);
    dash->broker_ok = status != NULL;

    store_t *store = store_open_readonly (dash->cfg.broker.store, err, errlen);
    if (!store) {
        // The broker's word still counts (why its store is gone, say).
        if (status)
            s_merge_broker (dash, status);
        jdoc_destroy (&status);
        return -1;
    }
    int rc = -1;
    s_gather_t g = {.dash = dash, .store = store};
    if (store_experiments (store, s_on_experiment, dash) < 0
        || store_counts (store, s_on_counts, dash) < 0
        || store_settings (store, s_on_setting, dash) < 0)
        goto done;
    if (experiment) {
        dash_exp_t *x = s_exp_by_name (dash, experiment);
        if (!x) {
            rc = 1;
            goto done;
        }
        dash->page = calloc (1, sizeof *dash->page);
        if (!dash->page)
            goto done;
        dash->page->exp = x;
        dash->page->buckets_end_ns = dash->now_ns;
        g.page_id = x->id;
    }
    g.rings = calloc ((size_t) dash->nexps + 1, sizeof *g.rings);
    if (!g.rings)
        goto done;
    // Feedback is read for the page's experiment, and for every experiment
    // when the broker's latency figures are missing.
    for (int i = 0; i < dash->nexps; i++)
        g.rings[i].wanted = !dash->broker_ok || dash->exps[i].id == g.page_id;

    // Every agent the store knows, then the end of the log.
    if (store_agents (store, s_on_agent, dash) < 0)
        goto done;
    int64_t last = store_event_last (store);
    if (last < 0)
        goto done;
    int64_t after = last > DASH_LOG_TAIL ? last - DASH_LOG_TAIL : 0;
    dash->log_whole = after == 0;
    if (store_events (store, 0, after, s_on_event, &g) < 0)
        goto done;
    if (dash->page)
        dash->page->tail_start_ns = dash->log_whole ? 0 : g.first_ts;

    if (status)
        s_merge_broker (dash, status);
    for (int i = 0; i < dash->nagents; i++)
        if (status && !dash->agents_partial && dash->agents[i].alive != 1)
            dash->agents[i].alive = 0;
    qsort (dash->agents, (size_t) dash->nagents, sizeof (dash_agent_t), s_compare_agents);
    for (int i = 0; i < dash->nexps; i++) {
        dash_exp_t *x = &dash->exps[i];
        s_ring_t *ring = &g.rings[i];
        if (!x->live) {
            // From the log: results over the last 10 s and 1 min.
            x->rate_10s = isnan (x->rate_10s) ? 0 : x->rate_10s / 10;
            x->rate_1m = isnan (x->rate_1m) ? 0 : x->rate_1m / 60;
        }
        int n = 0;
        jdoc_t *doc = ring->count > 0 ? s_ring_parse (ring, &n) : NULL;
        if (doc && !x->live)
            s_latencies (x, doc, n);
        if (doc && dash->page && x->id == g.page_id)
            s_series (dash->page, doc, n);
        jdoc_destroy (&doc);
    }
    if (s_failures (dash, store, experiment) < 0)
        goto done;
    if (dash->page)
        for (int i = 0; i < dash->nexps; i++)
            if (dash->exps[i].id == g.page_id)
                s_latest_field (dash, store, &g.rings[i]);
    if (dash->page && (dash_measure (dash, store) < 0 || dash_ensemble_gather (dash, store) < 0))
        goto done;
    s_sizes (dash);
    rc = 0;
done:
    if (rc < 0)
        snprintf (err, errlen, "cannot read the store '%s': %s", dash->cfg.broker.store,
                  store_error (store));
    for (int i = 0; g.rings && i < dash->nexps; i++)
        for (int k = 0; k < S_FEEDBACK_RING; k++)
            free (g.rings[i].payload[k]);
    free (g.rings);
    jdoc_destroy (&status);
    store_destroy (&store);
    return rc;
}

void
dash_release (dash_t *dash)
{
    for (int i = 0; i < dash->nexps; i++) {
        free (dash->exps[i].name);
        free (dash->exps[i].source);
        free (dash->exps[i].unpaired);
    }
    free (dash->exps);
    for (int i = 0; i < dash->nagents; i++) {
        free (dash->agents[i].id);
        free (dash->agents[i].host);
    }
    free (dash->agents);
    for (int i = 0; i < dash->nfailures; i++) {
        dash_failure_t *f = &dash->failures[i];
        free (f->experiment), free (f->stem), free (f->agent), free (f->error);
    }
    if (dash->page) {
        dash_measure_release (dash->page);
        dash_ensemble_release (dash->page);
        piv_field_destroy (&dash->page->field);
        free (dash->page->field_stem);
        free (dash->page->quantity);
        free (dash->page);
    }
    memset (dash, 0, sizeof *dash);
}

int
dash_quiver_stride (const piv_field_t *field)
{
    int longest = field->nx > field->ny ? field->nx : field->ny;
    return (longest + DASH_QUIVER_MAX - 1) / DASH_QUIVER_MAX;
}
