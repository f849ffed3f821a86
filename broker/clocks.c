// clocks.c — the clocks of the broker's peers (doc/storage.md): latency
// compares the writer's file times and the agents' with the broker's
// clock; a skew larger than the latency makes it meaningless, so it is
// measured (FILE mtimes in ingest, HEARTBEATs on the work socket), logged,
// and reported by the storage guard and status.

#include "broker/clocks.h"
#include "common/log.h"
#include "common/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLOCKS_MAX 4096                              // peers measured at once, at most
#define CLOCK_LOG_EVERY_NS (600 * (int64_t) 1000000000)  // a lasting skew is logged this often

struct _clocks_t {
    zhashx_t *clocks;            // peer -> clock_rec_t, bounded
    zhashx_t *experiments;       // name -> exp_t (not owned): their latencies set the limit
    double limit_ms;             // clocks_limit_ms as computed ...
    int64_t limit_ns;            // ... at this time (kept a second)
};

static void
s_free_clock (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

clocks_t *
clocks_new (zhashx_t *experiments)
{
    clocks_t *self = calloc (1, sizeof *self);
    if (!self || !(self->clocks = zhashx_new ())) {
        free (self);
        return NULL;
    }
    zhashx_set_destructor (self->clocks, (zhashx_destructor_fn *) s_free_clock);
    self->experiments = experiments;
    return self;
}

void
clocks_destroy (clocks_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zhashx_destroy (&(*self_p)->clocks);
    free (*self_p);
    *self_p = NULL;
}

static int
s_compare_ms (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

double
clocks_limit_ms (clocks_t *self)
{
    int64_t now = util_time_ns ();
    if (self->limit_ns && now - self->limit_ns < 1000000000)
        return self->limit_ms;
    double limit = 100;
    double sorted[LATENCY_KEPT];
    for (exp_t *exp = zhashx_first (self->experiments); exp;
         exp = zhashx_next (self->experiments)) {
        int n = exp->results.latencies;
        if (n == 0)
            continue;
        memcpy (sorted, exp->results.latency_ms, sizeof (double) * (size_t) n);
        qsort (sorted, (size_t) n, sizeof (double), s_compare_ms);
        double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
        if (median < limit)
            limit = median;
    }
    self->limit_ms = limit < 10 ? 10 : limit;
    self->limit_ns = now;
    return self->limit_ms;
}

void
clocks_sample (clocks_t *self, const char *key, const char *peer, double skew_ms, int64_t now)
{
    clock_rec_t *c = zhashx_lookup (self->clocks, key);
    if (!c) {
        if (zhashx_size (self->clocks) >= CLOCKS_MAX || !(c = calloc (1, sizeof *c)))
            return;
        if (zhashx_insert (self->clocks, key, c) != 0) {
            free (c);
            return;
        }
    }
    snprintf (c->peer, sizeof c->peer, "%s", peer);
    c->sample_ms[c->next] = skew_ms;
    c->next = (c->next + 1) % CLOCK_SAMPLES;
    if (c->samples < CLOCK_SAMPLES)
        c->samples++;
    // Transit and a busy reactor only make a sample lower than the skew:
    // the largest of the last few is the estimate.
    double best = c->sample_ms[0];
    for (int i = 1; i < c->samples; i++)
        best = c->sample_ms[i] > best ? c->sample_ms[i] : best;
    c->skew_ms = best;
    c->seen_ns = now;
    double limit = clocks_limit_ms (self);
    if (fabs (c->skew_ms) > limit && (c->logged_ns == 0 || now - c->logged_ns >= CLOCK_LOG_EVERY_NS)) {
        log_warning ("clock skew: the clock of %s is %.0f ms %s the broker's (more than %.0f ms): "
                     "latencies and file times are off by as much; synchronise the clocks "
                     "(chrony, NTP)",
                     c->peer, fabs (c->skew_ms), c->skew_ms > 0 ? "ahead of" : "behind", limit);
        c->logged_ns = now;
    }
    else if (fabs (c->skew_ms) <= limit && c->logged_ns) {
        log_notice ("clock skew: the clock of %s is within %.0f ms of the broker's again",
                    c->peer, limit);
        c->logged_ns = 0;
    }
}


const clock_rec_t *
clocks_first (clocks_t *self)
{
    return zhashx_first (self->clocks);
}

const clock_rec_t *
clocks_next (clocks_t *self)
{
    return zhashx_next (self->clocks);
}

void
clocks_forget (clocks_t *self, int64_t now, int64_t silent_ns)
{
    zlistx_t *gone = zlistx_new ();
    if (!gone)
        return;
    zlistx_set_destructor (gone, (zlistx_destructor_fn *) zstr_free);
    for (clock_rec_t *c = zhashx_first (self->clocks); c; c = zhashx_next (self->clocks))
        if (now - c->seen_ns > silent_ns)
            zlistx_add_end (gone, strdup (zhashx_cursor (self->clocks)));
    for (char *key = zlistx_first (gone); key; key = zlistx_next (gone))
        zhashx_delete (self->clocks, key);
    zlistx_destroy (&gone);
}
