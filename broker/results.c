// results.c — what happens to each answer of an agent once recorded: a
// result's counts, latency ring and histogram, its feedback (figures, PI
// controller, the feedback topic and event) and its result and field
// topics; a pair failed for good on the failed topic. The place where
// per-result processing goes.

#include "broker/publish.h"
#include "broker/replay.h"
#include "broker/results.h"
#include "broker/stats.h"
#include "common/feedback_quantity.h"
#include "common/jout.h"
#include "common/log.h"
#include "common/util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _results_t {
    store_t *store;           // the durable state: feedback events
    zsock_t *publish;         // PUB: result, field, failed, feedback topics (NULL: not yet)
    int fields_every;         // store_fields: 1 all, 0 none, n every n-th
    int64_t results;          // results recorded since start
    rate_ring_t per_second;   // results recorded per second, all experiments
    feedback_settings_t feedback;  // global feedback settings
    stats_t *stats;           // run statistics and calibrations (NULL: none)
};

// "failed.<exp>/": a pair failed for good.
void
results_publish_failed (results_t *self, const task_t *task, int attempts, const char *error,
                  int64_t now)
{
    if (!publish_wanted (self->publish, PROTO_TOPIC_FAILED, task->exp->name))
        return;
    json_t *o = json_object ();
    jout_set (&o, "experiment", jout_string (task->exp->name));
    jout_set (&o, "pair", json_integer (task->pair));
    jout_set (&o, "stem", jout_string (task->stem ? task->stem : ""));
    jout_set (&o, "attempt", json_integer (task->attempt));
    jout_set (&o, "attempts", json_integer (attempts));
    jout_set (&o, "error", jout_string (error ? error : ""));
    jout_set (&o, "failed_ns", json_integer (now));
    publish_json (self->publish, PROTO_TOPIC_FAILED, task->exp->name, o, 4096, NULL, 0);
}

// "result.<exp>/": the summary figures of a result just recorded (as the
// store keeps them), its times and latency; then "field.<exp>/" with the
// field itself when the store keeps fields (broker/store_fields not none).
static void
s_publish_result (results_t *self, const task_t *task, const agent_rec_t *agent,
                  const proto_msg_t *msg, int64_t now)
{
    exp_t *exp = task->exp;
    // Nothing is built for topics nobody subscribed to.
    if (!publish_wanted (self->publish, PROTO_TOPIC_RESULT, exp->name)
        && !publish_wanted (self->publish, PROTO_TOPIC_FIELD, exp->name))
        return;
    json_t *o = json_object ();
    jout_set (&o, "experiment", jout_string (exp->name));
    jout_set (&o, "replay", json_boolean (exp->replay));
    jout_set (&o, "source", exp->replay ? jout_string (exp->source ? exp->source : "")
                                        : json_null ());
    jout_set (&o, "pair", json_integer (task->pair));
    jout_set (&o, "stem", jout_string (task->stem ? task->stem : ""));
    jout_set (&o, "attempt", json_integer (task->attempt));
    jout_set (&o, "agent", jout_string (agent && agent->id ? agent->id : ""));
    jout_set (&o, "path", jout_string (msg->output ? msg->output : ""));
    // The quantities RESULT carries, in its frame order (doc/protocol.md).
    for (int f = 0; f < PROTO_FIG_RESERVED; f++) {
        const feedback_quantity_info_t *q = feedback_quantity_of_figure (f);
        if (q)
            jout_set (&o, q->name, jout_number (msg->figures[f]));
    }
    jout_set (&o, "nx", json_integer ((int) msg->figures[PROTO_FIG_NX]));
    jout_set (&o, "ny", json_integer ((int) msg->figures[PROTO_FIG_NY]));
    jout_set (&o, "compute_ns", json_integer (msg->time_ns));
    jout_set (&o, "closed_ns", task->closed_ns > 0 ? json_integer (task->closed_ns) : json_null ());
    jout_set (&o, "dispatched_ns", json_integer (task->dispatched_ns));
    jout_set (&o, "recorded_ns", json_integer (now));
    jout_set (&o, "latency_ms",
              jout_number (task->closed_ns > 0 ? (now - task->closed_ns) / 1e6 : NAN));
    int field = self->fields_every != 0 && msg->blob && msg->blob_size;
    jout_set (&o, "field", json_boolean (field));
    if (publish_json (self->publish, PROTO_TOPIC_RESULT, exp->name, o, 8192, NULL, 0) != 0
        || !field)
        return;
    // The field's own header: which pair it is; then the field encoded as
    // on the work socket (piv_field_decode reads it).
    o = json_object ();
    jout_set (&o, "experiment", jout_string (exp->name));
    jout_set (&o, "pair", json_integer (task->pair));
    jout_set (&o, "stem", jout_string (task->stem ? task->stem : ""));
    jout_set (&o, "bytes", json_integer ((json_int_t) msg->blob_size));
    publish_json (self->publish, PROTO_TOPIC_FIELD, exp->name, o, 8192, msg->blob, msg->blob_size);
}

results_t *
results_new (store_t *store, int fields_every)
{
    results_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->store = store;
    self->fields_every = fields_every;
    feedback_settings_init (&self->feedback);
    return self;
}

void
results_destroy (results_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free (*self_p);
    *self_p = NULL;
}

void
results_set_publish (results_t *self, zsock_t *publish)
{
    self->publish = publish;
}

void
results_set_stats (results_t *self, stats_t *stats)
{
    self->stats = stats;
}

feedback_settings_t *
results_feedback (results_t *self)
{
    return &self->feedback;
}

void
results_recorded_untracked (results_t *self)
{
    if (self->stats)
        stats_recount (self->stats);
}

void
results_counted (results_t *self, int recorded, int64_t now)
{
    self->results += recorded;
    broker_count (&self->per_second, now, recorded);
}

int64_t
results_total (const results_t *self)
{
    return self->results;
}

double
results_rate (results_t *self, int64_t now, int seconds)
{
    return broker_rate (&self->per_second, now, seconds);
}

// The feedback of a result just recorded: figures (in the experiment's
// calibrated units), controller, published on feedback.<exp> and logged.
static void
s_feedback (results_t *self, task_t *task, const piv_field_t *field, const float *vorticity,
            int64_t now)
{
    exp_t *exp = task->exp;
    const feedback_settings_t *fs = exp->feedback.own ? &exp->feedback.settings : &self->feedback;
    const piv_calib_t *calib = self->stats ? stats_calib (self->stats, exp, NULL) : NULL;
    feedback_figures_t figures;
    feedback_figures (field, vorticity, fs, calib, &figures);
    feedback_figures_calibrate (&figures, calib);
    double value = feedback_value (&figures, fs->quantity);
    // A stereo quantity (mean_w) of a planar field is no value: the
    // message says null, the controller holds, the log says why once.
    const feedback_quantity_info_t *q = feedback_quantity_get ((int) fs->quantity);
    if (q && q->stereo && !figures.has_w && !exp->feedback.told_planar) {
        exp->feedback.told_planar = 1;
        log_warning ("feedback of '%s': quantity '%s' needs the out-of-plane velocity w, and "
                     "pair '%s' is planar (no w): no value, the controller holds",
                     exp->name, q->name, task->stem ? task->stem : "?");
    }
    // Likewise a physical ROI (mm) where no calibration says where a vector
    // lies.
    if (figures.roi_uncalibrated && !exp->feedback.told_uncalibrated) {
        exp->feedback.told_uncalibrated = 1;
        log_warning ("feedback of '%s': its roi is in metres and pair '%s' has no calibration "
                     "(pivctl calibrate %s ...): no value, the controller holds",
                     exp->name, task->stem ? task->stem : "?", exp->name);
    }
    double output =
        fs->enabled ? feedback_pi_step (&exp->feedback.pi, fs, value, task->closed_ns) : NAN;
    char json[4096], topic[PATH_MAX];
    int64_t published = util_time_ns ();
    feedback_message_t m = {.experiment = exp->name,
                            .source = exp->replay ? replay_of (exp->replay) : NULL,
                            .pair = task->pair,
                            .stem = task->stem,
                            .closed_ns = task->closed_ns,
                            .dispatched_ns = task->dispatched_ns,
                            .computed_ns = now,
                            .published_ns = published,
                            .settings = fs,
                            .figures = &figures,
                            .output = output,
                            .calib = calib};
    if (feedback_message_json (&m, json, sizeof json) < 0)
        return;
    snprintf (topic, sizeof topic, "%s%s%s", PROTO_TOPIC_FEEDBACK, exp->name, PROTO_TOPIC_END);
    zstr_sendm (self->publish, topic);
    zstr_send (self->publish, json);
    store_event (self->store, "feedback", exp->id, task->pair, json, now);
}

// The field of a result, decoded once for the feedback and the statistics,
// with its vorticity (piv_field_derive); NULL when it carried none (the
// noop and exec processors send none) or it cannot be decoded (logged).
static piv_field_t *
s_decode (const task_t *task, const proto_msg_t *msg, float **vorticity)
{
    *vorticity = NULL;
    if (!msg->blob || msg->blob_size == 0)
        return NULL;
    char err[256];
    piv_field_t *field = stats_field (msg->blob, msg->blob_size, vorticity, err, sizeof err);
    if (!field)
        log_warning ("pair %lld of '%s': no feedback nor statistics: %s", (long long) task->pair,
                     task->exp->name, err);
    return field;
}

// A result recorded for a task the broker sent: its experiment's counts and
// latency, its statistics, and the feedback it makes.
void
results_recorded (results_t *self, task_t *task, const agent_rec_t *agent, const proto_msg_t *msg,
                  int64_t now)
{
    exp_t *exp = task->exp;
    broker_count (&exp->results.rate, now, 1);
    // Live pairs only: a pair retried or backfilled by hand hours later
    // says nothing of how fast the farm keeps up.
    if (task->closed_ns > 0 && !task->by_hand) {
        exp->results.latency_ms[exp->results.latency_next] = (now - task->closed_ns) / 1e6;
        exp->results.latency_next = (exp->results.latency_next + 1) % LATENCY_KEPT;
        if (exp->results.latencies < LATENCY_KEPT)
            exp->results.latencies++;
        // The histogram counts every result since start; a clock stepped
        // back (negative latency) counts as 0.
        static const double bounds[LATENCY_BUCKETS] = LATENCY_BOUNDS_S;
        double s = now > task->closed_ns ? (now - task->closed_ns) / 1e9 : 0;
        int b = 0;
        while (b < LATENCY_BUCKETS && s > bounds[b])
            b++;
        exp->results.latency_in[b]++;
        exp->results.latency_sum_s += s;
    }
    float *vorticity;
    piv_field_t *field = s_decode (task, msg, &vorticity);
    // The feedback first: a controller waits for it, the statistics do not.
    if (field)
        s_feedback (self, task, field, vorticity, now);
    // Counted once: the store recorded this result (never a duplicate).
    if (self->stats)
        stats_add (self->stats, exp, task->pair, field, vorticity);
    free (vorticity);
    piv_field_destroy (&field);
    s_publish_result (self, task, agent, msg, now);
}
