// status.c — what status, experiments, agents and the 'state' topic say
// (doc/control.md): the figures of the stages, read and rendered as JSON.
// It changes nothing but the rows' order.

#include "broker/status.h"
#include "broker/replay.h"
#include "common/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
s_compare_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// ,"latency_median_ms":M,"latency_p99_ms":P (of the latest LATENCY_KEPT
// results, null without any), "latency_histogram":{"le_s":[bounds],
// "cumulative":[results at or under each bound],"count":N,"sum_s":S}: every
// result since start, as a Prometheus histogram counts them.
static void
s_put_latency (text_t *t, exp_t *exp)
{
    if (exp) {
        static const double bounds[LATENCY_BUCKETS] = LATENCY_BOUNDS_S;
        int64_t below = 0;
        text_put (t, ",\"latency_histogram\":{\"le_s\":[");
        for (int b = 0; b < LATENCY_BUCKETS; b++) {
            text_put (t, "%s", b ? "," : "");
            text_put_number (t, bounds[b]);
        }
        text_put (t, "],\"cumulative\":[");
        for (int b = 0; b < LATENCY_BUCKETS; b++) {
            below += exp->results.latency_in[b];
            text_put (t, "%s%lld", b ? "," : "", (long long) below);
        }
        below += exp->results.latency_in[LATENCY_BUCKETS];
        text_put (t, "],\"count\":%lld", (long long) below);
        text_put_rounded (t, 0, "sum_s", exp->results.latency_sum_s, 6);
        text_put (t, "}");
    }
    if (!exp || exp->results.latencies == 0) {
        text_put (t, ",\"latency_median_ms\":null,\"latency_p99_ms\":null");
        return;
    }
    double sorted[LATENCY_KEPT];
    memcpy (sorted, exp->results.latency_ms, sizeof (double) * (size_t) exp->results.latencies);
    qsort (sorted, (size_t) exp->results.latencies, sizeof (double), s_compare_double);
    int n = exp->results.latencies;
    double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    int p99 = (int) ceil (0.99 * n) - 1;
    text_put_rounded (t, 0, "latency_median_ms", median, 3);
    text_put_rounded (t, 0, "latency_p99_ms", sorted[p99 < 0 ? 0 : p99], 3);
}

void
status_policy (text_t *t, const stages_t *self, int64_t id)
{
    char policy[32];
    sched_t *sched = dispatch_sched (self->dispatch);
    // Both limits apply: the one in force is the lower (0 is no limit).
    double rate = sched_rate (sched, id), global = sched_rate (sched, 0);
    if (global > 0 && (rate <= 0 || global < rate))
        rate = global;
    text_put (t, ",\"policy\":\"%s\",\"rate_limit\":",
           sched_policy_format (sched_policy (sched, id), policy, sizeof policy));
    text_put_number (t, rate > 0 ? rate : NAN);
    text_put (t, ",\"paused\":%s", sched_paused (sched, id) ? "true" : "false");
}

void
status_head (text_t *t, const stages_t *self)
{
    int64_t now = util_time_ns ();
    const char *store_why = self->store_error (self->arg);
    text_put (t, "{");
    text_put_rounded (t, 1, "uptime_s", (now - self->started_ns) / 1e9, 1);
    text_put (t, ",\"queue\":%zu,\"results\":%lld", sched_size (dispatch_sched (self->dispatch)),
              (long long) results_total (self->results));
    text_put_rounded (t, 0, "rate_10s", results_rate (self->results, now, 10), 2);
    text_put_rounded (t, 0, "rate_1m", results_rate (self->results, now, 59), 2);
    text_put (t, ",\"store_ok\":%s,\"store_state\":\"%s\",\"store_busy\":%lld",
              store_why ? "false" : "true", self->store_state (self->arg),
              (long long) (self->store ? store_busy_count (self->store) : 0));
    if (store_why) {
        text_put (t, ",\"store_error\":");
        text_put_string (t, store_why);
    }
    status_policy (t, self, 0);
    text_put (t, ",");
    storage_put_state (self->storage, t);
    text_put (t, ",");
    storage_put_volumes (self->storage, t);
    text_put (t, ",");
}

// ,"allocation":A|null,"archive":R|null of an experiment.
void
status_exp_storage (text_t *t, const exp_t *exp)
{
    const alloc_t *a = exp->storage.alloc;
    text_put (t, ",\"allocation\":");
    if (!a)
        text_put (t, "null");
    else {
        text_put (t, "{\"kind\":\"%s\",\"path\":", a->kind);
        text_put_string (t, a->path);
        text_put (t,
               ",\"size_bytes\":%lld,\"used_bytes\":%lld,\"created_ns\":%lld,"
               "\"expires_ns\":%lld,\"state\":\"%s\"}",
               (long long) a->size_bytes, (long long) a->used_bytes, (long long) a->created_ns,
               (long long) a->expires_ns, a->releasing ? "releasing" : "active");
    }
    const archive_t *r = exp->storage.archive;
    text_put (t, ",\"archive\":");
    if (!r) {
        text_put (t, "null");
        return;
    }
    text_put (t, "{\"to\":");
    text_put_string (t, r->to);
    text_put (t,
           ",\"state\":\"%s\",\"files\":%lld,\"copied\":%lld,\"already\":%lld,"
           "\"removed\":%lld,\"bytes\":%lld,\"release\":%s,\"error\":",
           r->state, (long long) r->files, (long long) r->copied, (long long) r->already,
           (long long) r->removed, (long long) r->bytes, r->release ? "true" : "false");
    if (*r->error)
        text_put_string (t, r->error);
    else
        text_put (t, "null");
    text_put (t, ",\"skipped\":%lld,\"notes\":", (long long) r->skipped);
    text_put_string (t, r->notes);
    text_put (t, "}");
}

// ---------------------------------------------------------------------------
// Lists that may be long: status's and experiments' experiments, the agents.
// Each row is rendered aside; a list is written whole while it fits its
// budget, else the busiest rows that fit (or a page of them, --page K, by
// name) with its total and how many are shown (doc/control.md).

#define STATUS_EXP_BUDGET (512 * 1024)    // bytes of experiments, at most
#define STATUS_AGENT_BUDGET (256 * 1024)  // bytes of agents, at most

typedef struct {
    char *name;      // sort key of a page
    int64_t busy;    // pairs pending and out (an agent: tasks out)
    double recent;   // recent activity (an agent: 0)
    int64_t total;   // files (an agent: results done)
    text_t text;   // the row's JSON
} s_row_t;

typedef struct {
    const stages_t *self;
    const status_query_t *q;
    s_row_t *rows;
    size_t count, cap;
} s_rows_t;

static s_row_t *
s_row_add (s_rows_t *rows, const char *name)
{
    if (rows->count == rows->cap) {
        size_t cap = rows->cap ? rows->cap * 2 : 64;
        s_row_t *grown = realloc (rows->rows, cap * sizeof *grown);
        if (!grown)
            return NULL;
        rows->rows = grown;
        rows->cap = cap;
    }
    s_row_t *row = &rows->rows[rows->count];
    *row = (s_row_t) {.name = strdup (name)};
    if (!row->name)
        return NULL;
    rows->count++;
    return row;
}

static void
s_rows_free (s_rows_t *rows)
{
    for (size_t i = 0; i < rows->count; i++) {
        free (rows->rows[i].name);
        free (rows->rows[i].text.data);
    }
    free (rows->rows);
    *rows = (s_rows_t) {0};
}

// The busiest first: most pairs pending and out, then the most recent
// activity, then the most files; by name among equals.
static int
s_compare_busy (const void *a, const void *b)
{
    const s_row_t *x = a, *y = b;
    if (x->busy != y->busy)
        return x->busy > y->busy ? -1 : 1;
    if (x->recent != y->recent)
        return x->recent > y->recent ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp (x->name, y->name);
}

static int
s_compare_name (const void *a, const void *b)
{
    return strcmp (((const s_row_t *) a)->name, ((const s_row_t *) b)->name);
}

// "KEY":[rows],"KEY_total":N,"KEY_shown":M: all rows in their order while
// they fit 'budget' and no page is asked for; else the busiest (or page
// --page K by name) up to --limit N (STATUS_ROWS) rows that fit. Sets
// *cut when rows are left out; -1 (refused) for a row without memory.
static int
s_put_rows (text_t *body, const status_query_t *q, const char *key, s_rows_t *rows,
            size_t budget, int *cut, char *err, size_t errlen)
{
    size_t all = 0, first = 0, most = q->most;
    for (size_t i = 0; i < rows->count; i++) {
        if (rows->rows[i].text.failed || !rows->rows[i].text.data) {
            snprintf (err, errlen, "no memory for the answer");
            return -1;
        }
        all += rows->rows[i].text.len + 1;
    }
    if (q->page > 0) {
        if (rows->count > 1)  // no rows: no array at all (qsort wants one)
            qsort (rows->rows, rows->count, sizeof (s_row_t), s_compare_name);
        first = (size_t) (q->page - 1) * most;
    }
    else if (all <= budget)
        most = rows->count;
    else if (rows->count > 1)
        qsort (rows->rows, rows->count, sizeof (s_row_t), s_compare_busy);
    text_put (body, "\"%s\":[", key);
    size_t shown = 0, used = 0;
    for (size_t i = first; i < rows->count && shown < most; i++) {
        if (used + rows->rows[i].text.len + 1 > budget)
            break;
        text_put (body, "%s%s", shown ? "," : "", rows->rows[i].text.data);
        used += rows->rows[i].text.len + 1;
        shown++;
    }
    text_put (body, "],\"%s_total\":%zu,\"%s_shown\":%zu", key, rows->count, key, shown);
    if (shown < rows->count)
        *cut = 1;
    return 0;
}

// ,"unpaired":{"waiting":W,"refused":R,"rule":"ab","expects":"<stem>_a.tif + ...",
// "files":[{"name":N,"state":"refused"|"waiting","why":Y},...]}: the files of
// 'exp' in no pair, the first few of each kind named (doc/control.md).
static void
s_put_unpaired (text_t *t, const stages_t *self, const exp_t *exp)
{
    pairing_unpaired_t u;
    char expects[256];
    const char *rule;
    ingest_unpaired (self->ingest, exp, &u, expects, sizeof expects, &rule);
    text_put (t, ",\"unpaired\":{\"waiting\":%zu,\"refused\":%zu,\"rule\":", u.waiting,
              u.refused);
    text_put_string (t, rule);
    text_put (t, ",\"expects\":");
    text_put_string (t, expects);
    text_put (t, ",\"files\":[");
    for (int i = 0; i < u.nrefused + u.nwaiting; i++) {
        int refused = i < u.nrefused;
        const pairing_note_t *note = refused ? &u.refused_files[i] : &u.waiting_files[i - u.nrefused];
        text_put (t, "%s{\"name\":", i ? "," : "");
        text_put_string (t, note->name);
        text_put (t, ",\"state\":\"%s\",\"why\":", refused ? "refused" : "waiting");
        text_put_string (t, note->why);
        text_put (t, "}");
    }
    text_put (t, "]}");
}

// One experiment's row of status and experiments, kept aside (s_rows_t).
static int
s_put_experiment (void *arg, const store_counts_t *c)
{
    s_rows_t *rows = arg;
    const stages_t *self = rows->self;
    if (rows->q->experiment && strcmp (c->name, rows->q->experiment) != 0)
        return 0;  // -e EXP: that one alone
    s_row_t *row = s_row_add (rows, c->name);
    if (!row)
        return -1;
    text_t *t = &row->text;
    int64_t now = util_time_ns ();
    exp_t *exp = ingest_experiment (self->ingest, c->name, now);
    row->busy = c->pairs[STORE_PENDING] + c->pairs[STORE_DISPATCHED];
    row->recent = exp ? broker_rate (&exp->results.rate, now, 59)
                            + broker_rate (&exp->in.arrivals, now, 10)
                      : 0;
    row->total = c->files;
    text_put (t, "{\"experiment\":");
    text_put_string (t, c->name);
    text_put (t, ",\"source\":");
    text_put_string (t, exp ? exp->source : c->name);
    text_put (t,
           ",\"files\":%lld,\"pending\":%lld,\"dispatched\":%lld,\"done\":%lld,\"failed\":%lld,"
           "\"skipped\":%lld",
           (long long) c->files, (long long) c->pairs[STORE_PENDING],
           (long long) c->pairs[STORE_DISPATCHED], (long long) c->pairs[STORE_DONE],
           (long long) c->pairs[STORE_FAILED], (long long) c->pairs[STORE_SKIPPED]);
    text_put (t, ",\"created_ns\":%lld", (long long) c->created_ns);
    if (!exp) {
        text_put (t, "}");
        return 0;
    }
    s_put_unpaired (t, self, exp);
    text_put (t, ",\"queue\":%zu", sched_size_of (dispatch_sched (self->dispatch), exp->id));
    text_put_rounded (t, 0, "arrivals_10s", broker_rate (&exp->in.arrivals, now, 10), 2);
    text_put_rounded (t, 0, "rate_10s", broker_rate (&exp->results.rate, now, 10), 2);
    text_put_rounded (t, 0, "rate_1m", broker_rate (&exp->results.rate, now, 59), 2);
    s_put_latency (t, exp);
    status_policy (t, self, exp->id);
    text_put (t, ",\"settings\":");
    text_put_string (t, exp->piv.settings);
    text_put (t, ",\"pairing\":\"%s\"", ingest_pairing_rule (self->ingest, exp)->name);
    if (self->stats)
        stats_put_status (self->stats, exp, t);
    const feedback_settings_t *fs =
        exp->feedback.own ? &exp->feedback.settings : results_feedback (self->results);
    text_put (t, ",\"feedback\":%s", fs->enabled ? "true" : "false");
    status_exp_storage (t, exp);
    text_put (t, ",\"replay\":");
    if (exp->replay)
        replay_put_status (exp->replay, t);
    else
        text_put (t, "null");
    if (self->ensemble)
        ensemble_put_running (self->ensemble, exp, t);
    text_put (t, "}");
    return 0;
}

int
status_agents (text_t *body, const stages_t *self, const status_query_t *q, int *cut, char *err,
               size_t errlen)
{
    int64_t now = util_time_ns ();
    int64_t window = (int64_t) self->cfg->broker.heartbeat_ms * self->cfg->broker.liveness * 1000000;
    s_rows_t rows = {.self = self, .q = q};
    zhashx_t *agents = dispatch_agents (self->dispatch);
    for (agent_rec_t *a = zhashx_first (agents); a; a = zhashx_next (agents)) {
        s_row_t *row = s_row_add (&rows, a->id);
        if (!row) {
            s_rows_free (&rows);
            snprintf (err, errlen, "no memory for the answer");
            return -1;
        }
        row->busy = (int64_t) zlistx_size (a->tasks);
        row->total = a->done;
        text_put (&row->text, "{\"id\":");
        text_put_string (&row->text, a->id);
        text_put (&row->text, ",\"host\":");
        text_put_string (&row->text, a->host);
        text_put (&row->text,
               ",\"cores\":%d,\"credit\":%u,\"tasks\":%zu,\"done\":%lld,\"last_heartbeat_ms\":%lld}",
               a->cores, a->credit, zlistx_size (a->tasks), (long long) a->done,
               (long long) ((now - (a->expires_ns - window)) / 1000000));
    }
    int rc = s_put_rows (body, q, "agents", &rows, STATUS_AGENT_BUDGET, cut, err, errlen);
    s_rows_free (&rows);
    return rc;
}

int
status_experiments (text_t *body, const stages_t *self, const status_query_t *q, int *cut, char *err,
                    size_t errlen)
{
    s_rows_t rows = {.self = self, .q = q};
    int rc = store_counts (self->store, s_put_experiment, &rows);
    if (rc < 0) {
        snprintf (err, errlen, "cannot read the store: %s", store_error (self->store));
        rc = -1;
    }
    else
        rc = s_put_rows (body, q, "experiments", &rows, STATUS_EXP_BUDGET, cut, err, errlen);
    s_rows_free (&rows);
    return rc;
}

// -e EXP of status and experiments: 0 if it is known (or not given),
// -1 (404) if not.
