// stats.c — the run statistics stage (stats.h; doc/units.md). Every result
// the store recorded is added once to its experiment's set for its grid,
// settings and calibration; the pairs added since the last checkpoint are
// kept, and a checkpoint saves the changed sets and marks those pairs in
// the same group of writes. After a crash the results not marked are added
// again from the store, in bounded slices (the rebuild), so that a long
// history (a database upgraded from schema 4) never stalls the reactor.
// Since every field changes every point, a save rewrites the whole state
// (26 MB at 256 x 256 points): the sets are saved only as often as
// broker/stats_save_kb_s allows, or once broker/stats_save_results results
// wait unsaved; the stored fields make the rest up after a crash.

#include "broker/stats.h"
#include "common/log.h"
#include "common/util.h"
#include "piv/derived.h"
#include "piv/stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATS_SLICE 128  // results of one rebuild slice, at most
#define STATS_SLICE_NS 2000000  // ... and the time it may take, ns (checked after each result)
#define KEY_MAX 2048     // bytes of a set's key

// One set: the results on one grid under one settings text and calibration
// epoch (its calibration follows the experiment's while the epoch is in force).
typedef struct {
    char *key;               // "NXxNY step S window W from X0,Y0; SETTINGS" and, after a
                             // calibrate --from now, "; calibration from NS"
    char *settings;          // the PIV settings of its results
    char *calibration;       // piv_calib_format's text in force
    piv_calib_t calib;       // the same, parsed (its units)
    piv_stats_t *stats;      // the running statistics
    int64_t first_pair;      // its first counted result's pair
    int64_t last_pair;       // its latest
    int dirty;               // changed since its last checkpoint
    int64_t epoch_ns;        // its calibration epoch (0: the first; -1: a set keyed by its
                             // calibration before issue 25, never recalibrated)
} s_set_t;

// An experiment's statistics.
typedef struct {
    exp_t *exp;              // the experiment (ingest's)
    zlistx_t *sets;          // s_set_t, in creation order
    int64_t *pairs;          // results counted since the last checkpoint (to mark)
    size_t npairs, cap;
    int64_t missing;         // results without a field (counted missing) since start
    int rebuild;             // waits for (or is in) its rebuild
    int64_t cursor;          // the rebuild's last pair listed (it goes on after it)
    int64_t saved_ns;        // its last checkpoint, ns (0: none since start)
} s_exp_t;

struct _stats_t {
    stats_host_t host;       // the store, the experiments, the configuration
    piv_calib_t config;      // the configured default ([calibration])
    piv_calib_t global;      // 'calibrate *': the global default
    int global_set;          // it is set
    int64_t global_epoch_ns; // 'calibrate * --from now': when the epoch began, or 0
    zhashx_t *exps;          // "ID" -> s_exp_t
    int wanted;              // some experiment waits for its rebuild
};

static void
s_set_destroy (s_set_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_set_t *self = *self_p;
    piv_stats_destroy (&self->stats);
    free (self->key);
    free (self->settings);
    free (self->calibration);
    free (self);
    *self_p = NULL;
}

static void
s_exp_destroy (s_exp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zlistx_destroy (&(*self_p)->sets);
    free ((*self_p)->pairs);
    free (*self_p);
    *self_p = NULL;
}

// The statistics of 'exp', made when new; NULL without memory.
static s_exp_t *
s_exp_of (stats_t *self, exp_t *exp)
{
    char key[32];
    snprintf (key, sizeof key, "%" PRId64, exp->id);
    s_exp_t *e = zhashx_lookup (self->exps, key);
    if (e) {
        e->exp = exp;
        return e;
    }
    e = calloc (1, sizeof *e);
    if (!e || !(e->sets = zlistx_new ())) {
        free (e);
        return NULL;
    }
    zlistx_set_destructor (e->sets, (zlistx_destructor_fn *) s_set_destroy);
    e->exp = exp;
    zhashx_insert (self->exps, key, e);
    return e;
}

static const s_exp_t *
s_exp_find (const stats_t *self, const exp_t *exp)
{
    char key[32];
    snprintf (key, sizeof key, "%" PRId64, exp->id);
    return zhashx_lookup (self->exps, key);
}

stats_t *
stats_new (const stats_host_t *host, char *err, size_t errlen)
{
    stats_t *self = calloc (1, sizeof *self);
    if (!self || !(self->exps = zhashx_new ())) {
        free (self);
        snprintf (err, errlen, "cannot start the broker: out of memory");
        return NULL;
    }
    self->host = *host;
    zhashx_set_destructor (self->exps, (zhashx_destructor_fn *) s_exp_destroy);
    piv_calib_init (&self->global);
    const config_t *cfg = host->cfg;
    char why[512];
    if (piv_calib_from_keys (&self->config, cfg->calibration.scale, cfg->calibration.dt,
                             cfg->calibration.origin, cfg->calibration.y_axis, why, sizeof why)
        != 0) {
        snprintf (err, errlen, "cannot start the broker: [calibration] %s", why);
        stats_destroy (&self);
        return NULL;
    }
    return self;
}

void
stats_destroy (stats_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zhashx_destroy (&(*self_p)->exps);
    free (*self_p);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------
// Calibration and mask

const piv_calib_t *
stats_calib (const stats_t *self, const exp_t *exp, const char **source)
{
    const char *from = "none";
    const piv_calib_t *c = &self->config;
    if (exp && exp->calib.own)
        from = "experiment", c = &exp->calib.calib;
    else if (self->global_set)
        from = "global", c = &self->global;
    else if (self->config.set)
        from = "config";
    if (source)
        *source = from;
    return c;
}

// The calibration epoch of 'exp' in force.
static int64_t
s_epoch (const stats_t *self, const exp_t *exp)
{
    return exp->calib.epoch_ns > self->global_epoch_ns ? exp->calib.epoch_ns
                                                       : self->global_epoch_ns;
}

// The sets of the epoch in force of 'exp' take its calibration now.
static void
s_recalibrate (stats_t *self, s_exp_t *e)
{
    const piv_calib_t *c = stats_calib (self, e->exp, NULL);
    char text[512];
    if (piv_calib_format (c, text, sizeof text) < 0)
        return;
    int64_t epoch = s_epoch (self, e->exp);
    for (s_set_t *s = zlistx_first (e->sets); s; s = zlistx_next (e->sets)) {
        if (s->epoch_ns != epoch || strcmp (s->calibration, text) == 0)
            continue;
        char *copy = strdup (text);
        if (!copy)
            continue;  // keeps the one it had
        free (s->calibration);
        s->calibration = copy;
        s->calib = *c;
        s->dirty = 1;
    }
}

void
stats_set_calib (stats_t *self, exp_t *exp, const piv_calib_t *c)
{
    if (exp) {
        exp->calib.own = c != NULL;
        if (c)
            exp->calib.calib = *c;
    }
    else {
        self->global_set = c != NULL;
        if (c)
            self->global = *c;
    }
    for (s_exp_t *e = zhashx_first (self->exps); e; e = zhashx_next (self->exps))
        if (e->exp == exp || (!exp && !e->exp->calib.own))
            s_recalibrate (self, e);
}

void
stats_set_epoch (stats_t *self, exp_t *exp, int64_t ts_ns)
{
    if (exp)
        exp->calib.epoch_ns = ts_ns;
    else
        self->global_epoch_ns = ts_ns;
}

int
stats_set_mask (exp_t *exp, const char *path)
{
    // The settings end with " mask=OLD" (or are "mask=OLD"): cut it.
    size_t len = strlen (exp->piv.settings);
    if (exp->piv.mask) {
        size_t old = strlen (exp->piv.mask) + strlen ("mask=");
        if (len >= old && strncmp (exp->piv.settings + len - old, "mask=", 5) == 0
            && strcmp (exp->piv.settings + len - old + 5, exp->piv.mask) == 0) {
            len -= old;
            if (len > 0 && exp->piv.settings[len - 1] == ' ')
                len--;
        }
    }
    size_t need = len + (path ? strlen (path) + 7 : 0) + 1;
    char *settings = malloc (need);
    char *mask = path ? strdup (path) : NULL;
    if (!settings || (path && !mask)) {
        free (settings);
        free (mask);
        return -1;
    }
    memcpy (settings, exp->piv.settings, len);
    settings[len] = '\0';
    if (path)
        snprintf (settings + len, need - len, "%smask=%s", len ? " " : "", path);
    free (exp->piv.settings);
    free (exp->piv.mask);
    exp->piv.settings = settings;
    exp->piv.mask = mask;
    return 0;
}

// ---------------------------------------------------------------------------
// Counting

// Remembers 'pair' to be marked at the next checkpoint. -1 without memory.
static int
s_remember (s_exp_t *e, int64_t pair)
{
    if (e->npairs == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        int64_t *pairs = realloc (e->pairs, cap * sizeof *pairs);
        if (!pairs)
            return -1;
        e->pairs = pairs, e->cap = cap;
    }
    e->pairs[e->npairs++] = pair;
    return 0;
}

// The set of 'field' under the experiment's settings and calibration now,
// made when new. NULL without memory (or a field without a grid).
static s_set_t *
s_set_for (stats_t *self, s_exp_t *e, const piv_field_t *field)
{
    const piv_calib_t *c = stats_calib (self, e->exp, NULL);
    char calibration[512], key[KEY_MAX], epoch[48] = "";
    if (piv_calib_format (c, calibration, sizeof calibration) < 0)
        return NULL;
    int64_t epoch_ns = s_epoch (self, e->exp);
    if (epoch_ns)
        snprintf (epoch, sizeof epoch, "; calibration from %" PRId64, epoch_ns);
    // A stereo field (w) never joins a planar set: its statistics have w's
    // figures (piv_stats_has_w); a planar set's key is as before stereo.
    snprintf (key, sizeof key, "%dx%d%s step %d window %d from %.9g,%.9g; %s%s", field->nx,
              field->ny, field->w ? " stereo" : "", field->step, field->window,
              field->x ? field->x[0] : 0.0, field->y ? field->y[0] : 0.0, e->exp->piv.settings,
              epoch);
    for (s_set_t *s = zlistx_last (e->sets); s; s = zlistx_prev (e->sets))
        if (strcmp (s->key, key) == 0)
            return s;
    s_set_t *s = calloc (1, sizeof *s);
    if (!s)
        return NULL;
    s->key = strdup (key);
    s->settings = strdup (e->exp->piv.settings);
    s->calibration = strdup (calibration);
    s->calib = *c;
    s->epoch_ns = epoch_ns;
    s->stats = piv_stats_new (field);
    if (!s->key || !s->settings || !s->calibration || !s->stats
        || piv_stats_set_uncertainty (s->stats, self->host.cfg->broker.stats_uncertainty) != 0) {
        s_set_destroy (&s);
        return NULL;
    }
    zlistx_add_end (e->sets, s);
    return s;
}

void
stats_add (stats_t *self, exp_t *exp, int64_t pair, const piv_field_t *field,
           const float *vorticity)
{
    s_exp_t *e = s_exp_of (self, exp);
    if (!e || s_remember (e, pair) != 0) {
        log_error ("pair %" PRId64 " of '%s': not counted in the statistics: out of memory",
                   pair, exp->name);
        return;
    }
    if (!field) {
        // Nothing to count: marked all the same, so that it is not tried
        // again at every start (doc/units.md).
        e->missing++;
        return;
    }
    s_set_t *s = s_set_for (self, e, field);
    // The pair's id orders the fields in time (ids grow as frames arrive;
    // the autocorrelation takes the fields of the set in that order).
    if (!s || piv_stats_add_at (s->stats, field, vorticity, pair) != 0) {
        e->npairs--;  // not counted: found again at the next start
        log_error ("pair %" PRId64 " of '%s': not counted in the statistics: %s", pair,
                   exp->name, s ? "its grid does not fit its set" : "out of memory");
        return;
    }
    if (!s->first_pair)
        s->first_pair = pair;
    s->last_pair = pair;
    s->dirty = 1;
}

// Saves the changed sets of one experiment, then marks its pairs.
static int
s_checkpoint (stats_t *self, s_exp_t *e, int64_t now)
{
    store_t *store = self->host.store;
    for (s_set_t *s = zlistx_first (e->sets); s; s = zlistx_next (e->sets)) {
        if (!s->dirty)
            continue;
        unsigned char *state = NULL;
        size_t size = 0;
        piv_stats_summary_t sum;
        piv_stats_summary (s->stats, &sum);
        if (piv_stats_encode (s->stats, &state, &size) != 0) {
            log_error ("cannot save the statistics of '%s': out of memory", e->exp->name);
            return -1;
        }
        store_stats_t row = {.experiment = e->exp->id,
                             .set = s->key,
                             .settings = s->settings,
                             .calibration = s->calibration,
                             .fields = sum.fields,
                             .first_pair = s->first_pair,
                             .last_pair = s->last_pair,
                             .state = state,
                             .state_size = size};
        int rc = store_stats_save (store, &row, NULL, 0, now);
        free (state);
        if (rc != 0)
            return -1;
        s->dirty = 0;
    }
    e->saved_ns = now;
    if (e->npairs == 0)
        return 0;
    store_stats_t marks = {.experiment = e->exp->id};
    if (store_stats_save (store, &marks, e->pairs, e->npairs, now) != 0)
        return -1;
    e->npairs = 0;
    return 0;
}

// 1 if 'e' is to be saved at 'now': it counted results not saved and the
// bytes of its changed sets fit the budget of broker/stats_save_kb_s since
// its last save, or stats_save_results results wait; at once where the
// store does not keep every field (those results could not be counted
// again after a crash), or without a budget.
static int
s_due (const stats_t *self, const s_exp_t *e, int64_t now)
{
    const config_t *cfg = self->host.cfg;
    double bytes = 0;
    for (s_set_t *s = zlistx_first (e->sets); s; s = zlistx_next (e->sets))
        if (s->dirty)
            bytes += (double) piv_stats_state_size (s->stats);
    if (bytes == 0 && e->npairs == 0)
        return 0;
    if (cfg->broker.stats_save_kb_s <= 0 || strcmp (cfg->broker.store_fields, "all") != 0
        || e->npairs >= (size_t) cfg->broker.stats_save_results)
        return 1;
    return (double) (now - e->saved_ns) >= bytes / (cfg->broker.stats_save_kb_s * 1024.0) * 1e9;
}

int
stats_save_due (stats_t *self, int64_t now)
{
    int rc = 0;
    for (s_exp_t *e = zhashx_first (self->exps); e; e = zhashx_next (self->exps))
        if (s_due (self, e, now) && s_checkpoint (self, e, now) != 0)
            rc = -1;
    if (rc != 0)
        log_error ("cannot save the run statistics: %s", store_error (self->host.store));
    return rc;
}

int
stats_checkpoint (stats_t *self, exp_t *exp, int64_t now)
{
    if (exp) {
        s_exp_t *e = s_exp_of (self, exp);
        return e ? s_checkpoint (self, e, now) : -1;
    }
    int rc = 0;
    for (s_exp_t *e = zhashx_first (self->exps); e; e = zhashx_next (self->exps))
        if (s_checkpoint (self, e, now) != 0)
            rc = -1;
    if (rc != 0)
        log_error ("cannot save the run statistics: %s", store_error (self->host.store));
    return rc;
}

// ---------------------------------------------------------------------------
// Start-up and the rebuild

static exp_t *
s_exp_by_id (stats_t *self, int64_t id)
{
    zhashx_t *experiments = self->host.experiments;
    for (exp_t *exp = zhashx_first (experiments); exp; exp = zhashx_next (experiments))
        if (exp->id == id)
            return exp;
    return NULL;
}

static int
s_load_set (void *arg, const store_stats_t *row)
{
    stats_t *self = arg;
    exp_t *exp = s_exp_by_id (self, row->experiment);
    s_exp_t *e = exp ? s_exp_of (self, exp) : NULL;
    if (!e)
        return 0;  // an experiment the broker does not know (or no memory: rebuilt)
    char err[256];
    s_set_t *s = calloc (1, sizeof *s);
    if (!s)
        return 0;
    s->stats = piv_stats_decode (row->state, row->state_size, err, sizeof err);
    // As configured now: a state saved without the uncertainty starts it
    // from the next result, one saved with it drops it.
    if (s->stats
        && piv_stats_set_uncertainty (s->stats, self->host.cfg->broker.stats_uncertainty) != 0) {
        snprintf (err, sizeof err, "out of memory");
        piv_stats_destroy (&s->stats);
    }
    s->key = strdup (row->set);
    s->settings = strdup (row->settings);
    s->calibration = strdup (row->calibration);
    piv_calib_init (&s->calib);
    piv_calib_parse (row->calibration, &s->calib, err, sizeof err);
    s->first_pair = row->first_pair;
    s->last_pair = row->last_pair;
    // Its epoch from its key (s_set_for); a key that ends in its calibration
    // (sets made before issue 25) keeps that calibration.
    const char *from = strstr (row->set, "; calibration from ");
    size_t len = strlen (row->set), clen = strlen (row->calibration);
    s->epoch_ns = from ? strtoll (from + strlen ("; calibration from "), NULL, 10)
                  : len > clen && strcmp (row->set + len - clen, row->calibration) == 0
                          && row->set[len - clen - 2] == ';'
                      ? -1
                      : 0;
    if (!s->stats || !s->key || !s->settings || !s->calibration) {
        log_error ("statistics set '%s' of '%s' not loaded: %s", row->set, exp->name,
                   s->stats ? "out of memory" : err);
        s_set_destroy (&s);
        return 0;
    }
    zlistx_add_end (e->sets, s);
    return 0;
}

int
stats_load (stats_t *self)
{
    zhashx_purge (self->exps);
    if (store_stats_of (self->host.store, 0, s_load_set, self) < 0) {
        log_error ("cannot read the run statistics: %s", store_error (self->host.store));
        return -1;
    }
    stats_recount (self);
    // What the store holds counts as saved now: the rebuild's first slice
    // does not rewrite a large state for the one result it counted.
    int64_t now = util_time_ns ();
    for (s_exp_t *e = zhashx_first (self->exps); e; e = zhashx_next (self->exps))
        e->saved_ns = now;
    return 0;
}

void
stats_recount (stats_t *self)
{
    zhashx_t *experiments = self->host.experiments;
    for (exp_t *exp = zhashx_first (experiments); exp; exp = zhashx_next (experiments)) {
        s_exp_t *e = s_exp_of (self, exp);
        if (e)
            e->rebuild = 1, e->cursor = 0;
    }
    self->wanted = 1;
}

int
stats_rebuild_wanted (const stats_t *self)
{
    return self->wanted;
}

void
stats_resync (stats_t *self)
{
    stats_load (self);
}

int
stats_rebuilding (const stats_t *self, const exp_t *exp)
{
    const s_exp_t *e = s_exp_find (self, exp);
    return e && e->rebuild;
}

// One uncounted result of the experiment being rebuilt.
typedef struct {
    stats_t *self;
    s_exp_t *e;
    int n;  // results added in this slice
    int64_t until_ns;  // the slice ends after the result that passes this time
    int cut;           // it ended there: more may remain
} s_slice_t;

piv_field_t *
stats_field (const void *blob, size_t size, float **vorticity, char *err, size_t errlen)
{
    *vorticity = NULL;
    piv_field_t *field = piv_field_decode (blob, size, err, errlen);
    if (field && (*vorticity = malloc ((size_t) field->nx * (size_t) field->ny
                                       * sizeof **vorticity)))
        piv_field_derive (field, &(piv_derived_t){.vorticity = *vorticity});
    return field;
}

// 1 if 'pair' of 'e' is counted and waits for its checkpoint.
static int
s_counted (const s_exp_t *e, int64_t pair)
{
    for (size_t i = 0; i < e->npairs; i++)
        if (e->pairs[i] == pair)
            return 1;
    return 0;
}

static int
s_rebuild_one (void *arg, const store_result_info_t *r)
{
    s_slice_t *slice = arg;
    slice->e->cursor = r->pair;
    // Counted live, or by this rebuild before the listing began again
    // (stats_recount), and not saved yet: not again.
    if (s_counted (slice->e, r->pair))
        return slice->cut = util_time_ns () >= slice->until_ns;
    piv_field_t *field = NULL;
    float *vorticity = NULL;
    char err[256];
    if (r->field
        && !(field = stats_field (r->field, r->field_size, &vorticity, err, sizeof err)))
        log_warning ("pair %" PRId64 " of '%s': its stored field is not counted: %s", r->pair,
                     slice->e->exp->name, err);
    stats_add (slice->self, slice->e->exp, r->pair, field, vorticity);
    free (vorticity);
    piv_field_destroy (&field);
    slice->cut = ++slice->n >= STATS_SLICE || util_time_ns () >= slice->until_ns;
    return slice->cut;
}

int
stats_rebuild_step (stats_t *self)
{
    s_exp_t *e = NULL;
    for (s_exp_t *x = zhashx_first (self->exps); x && !e; x = zhashx_next (self->exps))
        if (x->rebuild)
            e = x;
    if (!e)
        return self->wanted = 0;
    int64_t now = util_time_ns ();
    // The listing goes on after the last pair the previous slice saw, and
    // skips the results counted but not saved yet; a slice saves only when
    // due (a save of a large set costs more than many slices), the last
    // one always.
    s_slice_t slice = {self, e, 0, now + STATS_SLICE_NS, 0};
    int listed = store_results_uncounted (self->host.store, e->exp->id, e->cursor,
                                          s_rebuild_one, &slice);
    if (listed < 0
        || ((!slice.cut || s_due (self, e, now)) && s_checkpoint (self, e, now) != 0)) {
        log_error ("cannot rebuild the statistics of '%s': %s", e->exp->name,
                   store_error (self->host.store));
        return -1;
    }
    if (!slice.cut) {
        e->rebuild = 0;
        e->cursor = 0;
        if (e->missing > 0)
            log_notice ("statistics of '%s': %" PRId64 " result(s) without a stored field "
                        "counted missing", e->exp->name, e->missing);
    }
    for (s_exp_t *x = zhashx_first (self->exps); x; x = zhashx_next (self->exps))
        if (x->rebuild)
            return 1;
    return self->wanted = 0;
}

// ---------------------------------------------------------------------------
// JSON

// {set, settings, calibration, units, fields, ... of one set, left open.
static void
s_put_set (const s_set_t *s, text_t *t)
{
    piv_stats_summary_t sum;
    piv_stats_summary (s->stats, &sum);
    text_put (t, "{\"set\":");
    text_put_string (t, s->key);
    text_put (t, ",\"settings\":");
    text_put_string (t, s->settings);
    text_put (t, ",\"calibration\":");
    text_put_string (t, s->calibration);
    text_put (t, ",\"units\":{\"length\":");
    text_put_string (t, piv_calib_unit (&s->calib, PIV_UNIT_LENGTH));
    text_put (t, ",\"velocity\":");
    text_put_string (t, piv_calib_unit (&s->calib, PIV_UNIT_VELOCITY));
    text_put (t, ",\"rate\":");
    text_put_string (t, piv_calib_unit (&s->calib, PIV_UNIT_RATE));
    text_put (t, "},\"fields\":%" PRId64 ",\"valid_fraction\":", sum.fields);
    text_put_number (t, sum.valid_fraction);
    text_put (t, ",\"convergence\":");
    text_put_number (t, sum.convergence);
    text_put (t, ",\"convergence_from\":%" PRId64 ",\"first_pair\":%" PRId64
                 ",\"last_pair\":%" PRId64,
              sum.convergence_from, s->first_pair, s->last_pair);
}

void
stats_put_sets (const stats_t *self, const exp_t *exp, text_t *t)
{
    const s_exp_t *e = s_exp_find (self, exp);
    text_put (t, "[");
    int first = 1;
    if (e)
        for (s_set_t *s = zlistx_first (e->sets); s; s = zlistx_next (e->sets)) {
            text_put (t, first ? "" : ",");
            s_put_set (s, t);
            // The uncertainty's summary here only, not in every status:
            // it takes a pass over the points' lags.
            piv_stats_summary_t sum;
            piv_stats_summary (s->stats, &sum);
            text_put (t, ",\"mean_uncertainty\":");
            text_put_number (t, piv_calib_speed (&s->calib,
                                                 piv_stats_mean_uncertainty (s->stats)));
            text_put (t, ",\"late\":%" PRId64, sum.late);
            text_put (t, "}");
            first = 0;
        }
    text_put (t, "]");
}

void
stats_put_calibration (const stats_t *self, const exp_t *exp, text_t *t)
{
    const char *source;
    const piv_calib_t *c = stats_calib (self, exp, &source);
    char text[512], describe[512];
    if (piv_calib_format (c, text, sizeof text) < 0)
        snprintf (text, sizeof text, "?");
    if (piv_calib_describe (c, describe, sizeof describe) < 0)
        snprintf (describe, sizeof describe, "?");
    text_put (t, ",\"calibration\":{\"text\":");
    text_put_string (t, text);
    text_put (t, ",\"describe\":");
    text_put_string (t, describe);
    text_put (t, ",\"source\":\"%s\",\"calibrated\":%s}", source, c->set ? "true" : "false");
}

void
stats_put_status (const stats_t *self, const exp_t *exp, text_t *t)
{
    stats_put_calibration (self, exp, t);
    const s_exp_t *e = s_exp_find (self, exp);
    s_set_t *latest = e ? zlistx_last (e->sets) : NULL;
    text_put (t, ",\"stats\":");
    if (!latest) {
        text_put (t, "null");
        return;
    }
    s_put_set (latest, t);
    text_put (t, ",\"sets\":%zu,\"missing\":%" PRId64 ",\"rebuilding\":%s}",
              zlistx_size (e->sets), e->missing, e->rebuild ? "true" : "false");
}

int64_t
stats_missing (const stats_t *self, const exp_t *exp)
{
    const s_exp_t *e = s_exp_find (self, exp);
    return e ? e->missing : 0;
}

int
stats_has_w (const stats_t *self, const exp_t *exp)
{
    const s_exp_t *e = s_exp_find (self, exp);
    s_set_t *latest = e ? zlistx_last (e->sets) : NULL;
    return latest ? piv_stats_has_w (latest->stats) : -1;
}

int
stats_image_extent (const stats_t *self, const exp_t *exp, int *width, int *height)
{
    const s_exp_t *e = s_exp_find (self, exp);
    s_set_t *latest = e ? zlistx_last (e->sets) : NULL;
    if (!latest)
        return 0;
    int nx, ny, step, window;
    piv_stats_grid (latest->stats, &nx, &ny, &step, &window);
    piv_stats_point_t first;
    if (piv_stats_point (latest->stats, 0, &first) != 0)
        return 0;
    // The last window's far edge: the image is at least this large.
    *width = (int) ceil (first.x + (double) (nx - 1) * step + window / 2.0);
    *height = (int) ceil (first.y + (double) (ny - 1) * step + window / 2.0);
    return 1;
}

void
stats_forget (stats_t *self, const exp_t *exp)
{
    char key[32];
    snprintf (key, sizeof key, "%" PRId64, exp->id);
    zhashx_delete (self->exps, key);
}
