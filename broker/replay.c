// replay.c — the replay engine (doc/control.md, "replay"): the recorded
// file events of an experiment (or its feedback messages) re-emitted into
// another at their original pace over 'speed'. File events go to the
// ingest stage through the callback it was given; feedback messages are
// published again, marked as replayed.

#include "broker/replay.h"
#include "broker/feedback.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// What a replay re-emits: a file event, or a feedback message.
typedef struct {
    char *name;         // file name, or NULL for a feedback message
    int64_t size;       // file size
    int64_t mtime_ns;   // file time
    char *payload;      // the feedback message
    int64_t at_ns;      // its time after the first one
} s_item_t;

struct _replay_t {
    store_t *store;     // where the events are read and its end recorded
    zloop_t *loop;      // the reactor its timer runs in
    zsock_t *publish;   // where feedback messages go again
    replay_file_fn *file;  // where file events go (ingest) ...
    void *arg;          // ... with this
    exp_t *exp;         // the experiment it feeds
    char *of;           // the experiment it replays
    double speed;       // pace divisor; 0: all at once
    int feedback_only;  // re-publishes feedback, computes nothing
    s_item_t *items;    // what it re-emits, in order
    size_t total, next; // how many, and the next to go
    int64_t start_ns;   // when it started
    int timer;          // its one-shot timer, or -1
};

void
replay_destroy (replay_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    replay_t *self = *self_p;
    if (self->timer >= 0 && self->loop)
        zloop_timer_end (self->loop, self->timer);
    for (size_t i = 0; i < self->total; i++) {
        free (self->items[i].name);
        free (self->items[i].payload);
    }
    free (self->items);
    free (self->of);
    free (self);
    *self_p = NULL;
}

// Sends what is due, then sleeps until the next item is.
static int
s_replay_tick (zloop_t *loop, int timer_id, void *arg)
{
    (void) timer_id;
    replay_t *r = arg;
    r->timer = -1;
    int64_t now = util_time_ns ();
    while (r->next < r->total) {
        s_item_t *item = &r->items[r->next];
        int64_t due = r->start_ns + (r->speed > 0 ? (int64_t) (item->at_ns / r->speed) : 0);
        if (due > now)
            break;
        if (item->name) {
            if (r->file (r->arg, r->exp, item->name, item->size, item->mtime_ns, now) != 0)
                break;  // the store failed: try again at the next tick
        }
        else {
            // Marked as a replay, under the replay's own name: a controller
            // subscribed to the original never takes it for live feedback.
            char topic[PATH_MAX], json[8192];
            snprintf (topic, sizeof topic, "%s%s%s", PROTO_TOPIC_FEEDBACK, r->exp->name,
                      PROTO_TOPIC_END);
            if (feedback_message_replayed (item->payload, r->exp->name, json, sizeof json) < 0)
                log_warning ("replay of '%s' as '%s': a recorded feedback message is not "
                             "one the broker wrote: skipped",
                             r->of, r->exp->name);
            else {
                zstr_sendm (r->publish, topic);
                zstr_send (r->publish, json);
            }
        }
        r->next++;
    }
    if (r->next == r->total) {
        log_notice ("replay of '%s' as '%s': all %zu %s sent", r->of, r->exp->name, r->total,
                    r->feedback_only ? "feedback messages" : "file events");
        store_event (r->store, "replay", r->exp->id, 0, "finished", now);
        return 0;
    }
    int64_t due = r->start_ns + (r->speed > 0 ? (int64_t) (r->items[r->next].at_ns / r->speed) : 0);
    int64_t ms = (due - util_time_ns () + 999999) / 1000000;
    r->timer = zloop_timer (loop, (size_t) (ms > 0 ? ms : 1), 1, s_replay_tick, r);
    return 0;
}

static int
s_add_item (replay_t *r, const char *name, int64_t size, int64_t mtime_ns, const char *payload,
            int64_t t_ns)
{
    if ((r->total & (r->total - 1)) == 0) {  // 0, 1, 2, 4 ...: grow
        s_item_t *items = realloc (r->items, sizeof (s_item_t) * (r->total ? 2 * r->total : 1));
        if (!items)
            return -1;
        r->items = items;
    }
    s_item_t *item = &r->items[r->total];
    *item = (s_item_t) {name ? strdup (name) : NULL, size, mtime_ns,
                        payload ? strdup (payload) : NULL, t_ns};
    if ((name && !item->name) || (payload && !item->payload))
        return -1;
    r->total++;
    return 0;
}

static int
s_replay_file (void *arg, int64_t file, const char *name, int64_t size, int64_t mtime_ns,
               int64_t seen_ns)
{
    (void) file;
    return s_add_item (arg, name, size, mtime_ns, NULL, seen_ns);
}

static int
s_replay_feedback (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
                   int64_t pair, const char *payload)
{
    (void) id, (void) kind, (void) experiment, (void) pair;
    return s_add_item (arg, NULL, 0, 0, payload, ts_ns);
}

replay_t *
replay_new (const replay_host_t *host, const exp_t *of, double speed, int feedback_only,
            char *err, size_t errlen)
{
    replay_t *r = calloc (1, sizeof *r);
    if (!r) {
        snprintf (err, errlen, "no memory for a replay");
        return NULL;
    }
    r->store = host->store;
    r->loop = host->loop;
    r->publish = host->publish;
    r->file = host->file;
    r->arg = host->arg;
    r->timer = -1;
    r->speed = speed;
    r->feedback_only = feedback_only;
    r->of = strdup (of->name);
    int rc = feedback_only
                 ? store_events_of_kind (r->store, of->id, "feedback", s_replay_feedback, r)
                 : store_files_of (r->store, of->id, s_replay_file, r);
    if (rc < 0 || !r->of) {
        snprintf (err, errlen, "cannot read what '%s' recorded: %s", of->name,
                  store_error (r->store));
        replay_destroy (&r);
        return NULL;
    }
    for (size_t i = r->total; i-- > 0;)
        r->items[i].at_ns -= r->items[0].at_ns;
    return r;
}

void
replay_start (replay_t *self, exp_t *exp, int64_t now)
{
    self->exp = exp;
    exp->replay = self;
    self->start_ns = now;
    s_replay_tick (self->loop, -1, self);
}

size_t
replay_total (const replay_t *self)
{
    return self->total;
}

const char *
replay_of (const replay_t *self)
{
    return self->of;
}

void
replay_put_status (const replay_t *r, text_t *t)
{
    text_put (t, "{\"of\":");
    text_put_string (t, r->of);
    text_put (t, ",\"speed\":");
    text_put_number (t, r->speed > 0 ? r->speed : NAN);
    text_put (t, ",\"sent\":%zu,\"total\":%zu,\"finished\":%s,\"feedback_only\":%s}", r->next,
              r->total, r->next == r->total ? "true" : "false",
              r->feedback_only ? "true" : "false");
}

int
replay_finished (const replay_t *r)
{
    return r->next == r->total;
}
