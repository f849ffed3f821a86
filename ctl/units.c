// units.c — the calibration in force for each result of an experiment, as
// export and stats apply it. A calibration follows the measurement (issue
// 25): it applies to every result of the experiment, recorded before it was
// set or after, up to the next change made with `calibrate --from now`,
// which starts a new epoch (a setup changed mid-run): a result takes the
// latest change made before its epoch ended, the experiment's own, else the
// global scope's, else the configuration's [calibration] section. The
// store's "setting" events are the history (doc/units.md, Files).

#include "ctl/ctl.h"

#include "store/store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CALIB_KEY "calibration"
#define CALIB_FROM_KEY "calibration_from" // its value: when the epoch began (ns)

// One change of the setting: a value set (calibrated or "none"), or the
// setting removed (the scope falls back to the next one).
typedef struct {
    int64_t ts_ns;   // when it was recorded
    int removed;     // 1: the setting was removed
    piv_calib_t c;   // the calibration set (removed 0)
} s_change_t;

typedef struct {
    s_change_t *changes; // in log order
    size_t count, size;
} s_scope_t;

// When each epoch began (a `--from now` change), in log order.
typedef struct {
    int64_t *ts_ns;
    size_t count, size;
} s_epochs_t;

struct _ctl_calibs_t {
    int64_t experiment;  // whose
    s_scope_t own;       // the experiment's changes
    s_scope_t global;    // the global scope's (experiment 0)
    s_epochs_t epochs;   // the experiment's epochs and the global scope's
    piv_calib_t config;  // the configuration's default
    const char *error;   // the first bad setting met, or NULL
};

int
ctl_grow (void *array_p, size_t *size, size_t count, size_t item)
{
    if (count < *size)
        return 0;
    size_t grown = *size ? 2 * *size : 16;
    void *more = realloc (*(void **)array_p, grown * item);
    if (!more)
        return -1;
    *(void **)array_p = more;
    *size = grown;
    return 0;
}

static int
s_push (s_scope_t *scope, const s_change_t *change)
{
    if (ctl_grow (&scope->changes, &scope->size, scope->count, sizeof *change) != 0)
        return -1;
    scope->changes[scope->count++] = *change;
    return 0;
}

static int
s_on_setting (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
              int64_t pair, const char *payload)
{
    (void)id, (void)kind, (void)pair;
    ctl_calibs_t *self = arg;
    if (experiment != 0 && experiment != self->experiment)
        return 0;
    size_t from = strlen (CALIB_FROM_KEY);
    if (payload && strncmp (payload, CALIB_FROM_KEY "=", from + 1) == 0) {
        s_epochs_t *e = &self->epochs;
        if (ctl_grow (&e->ts_ns, &e->size, e->count, sizeof *e->ts_ns) != 0)
            return 1;
        e->ts_ns[e->count++] = strtoll (payload + from + 1, NULL, 10);
        return 0;
    }
    size_t len = strlen (CALIB_KEY);
    if (!payload || strncmp (payload, CALIB_KEY, len) != 0
        || (payload[len] != '=' && payload[len] != '\0'))
        return 0;
    s_change_t change = {.ts_ns = ts_ns, .removed = payload[len] == '\0'};
    piv_calib_init (&change.c);
    char err[256];
    if (!change.removed && piv_calib_parse (payload + len + 1, &change.c, err, sizeof err) != 0) {
        self->error = "a recorded calibration is unreadable (taken as not calibrated)";
        piv_calib_init (&change.c);
    }
    return s_push (experiment ? &self->own : &self->global, &change) == 0 ? 0 : 1;
}

// The configuration's [calibration] section (scale and dt together, or
// not calibrated).
static void
s_config_calib (const config_t *cfg, piv_calib_t *c)
{
    char err[256];
    // config_load checked the keys: a failure is not reached, and leaves c
    // not calibrated.
    piv_calib_from_keys (c, cfg->calibration.scale, cfg->calibration.dt, cfg->calibration.origin,
                         cfg->calibration.y_axis, err, sizeof err);
}

ctl_calibs_t *
ctl_calibs_load (store_t *store, int64_t experiment, const config_t *cfg, char *err,
                 size_t errlen)
{
    ctl_calibs_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "no memory");
        return NULL;
    }
    self->experiment = experiment;
    s_config_calib (cfg, &self->config);
    if (store_events_of_kind (store, 0, "setting", s_on_setting, self) < 0) {
        snprintf (err, errlen, "cannot read the settings' history: %s", store_error (store));
        ctl_calibs_destroy (&self);
    }
    return self;
}

void
ctl_calibs_destroy (ctl_calibs_t **self_p)
{
    if (!*self_p)
        return;
    free ((*self_p)->own.changes);
    free ((*self_p)->global.changes);
    free ((*self_p)->epochs.ts_ns);
    free (*self_p);
    *self_p = NULL;
}

// The last change of 'scope' at or before ts_ns, or NULL.
static const s_change_t *
s_last (const s_scope_t *scope, int64_t ts_ns)
{
    const s_change_t *last = NULL;
    for (size_t i = 0; i < scope->count && scope->changes[i].ts_ns <= ts_ns; i++)
        last = &scope->changes[i];
    return last;
}

// The end of the epoch of a result recorded at recorded_ns: the first
// epoch's start after it, or INT64_MAX (the epoch in force now).
static int64_t
s_epoch_end (const ctl_calibs_t *self, int64_t recorded_ns)
{
    int64_t end = INT64_MAX;
    for (size_t i = 0; i < self->epochs.count; i++)
        if (self->epochs.ts_ns[i] > recorded_ns && self->epochs.ts_ns[i] < end)
            end = self->epochs.ts_ns[i];
    return end;
}

void
ctl_calib_at (const ctl_calibs_t *self, int64_t recorded_ns, piv_calib_t *c)
{
    // The changes made before the epoch ended; the change that began the
    // next epoch was recorded at its start, so it is not among them.
    int64_t before = s_epoch_end (self, recorded_ns);
    before = before == INT64_MAX ? INT64_MAX : before - 1;
    const s_change_t *own = s_last (&self->own, before);
    const s_change_t *global = s_last (&self->global, before);
    if (own && !own->removed)
        *c = own->c;
    else if (global && !global->removed)
        *c = global->c;
    else
        *c = self->config;
}

int
ctl_calibs_ever (const ctl_calibs_t *self)
{
    const s_scope_t *scopes[] = {&self->own, &self->global};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < scopes[s]->count; i++)
            if (!scopes[s]->changes[i].removed && scopes[s]->changes[i].c.set)
                return 1;
    return self->config.set;
}

const char *
ctl_calibs_warning (const ctl_calibs_t *self)
{
    return self->error;
}

int
ctl_calib_same (const piv_calib_t *a, const piv_calib_t *b)
{
    if (!a->set || !b->set)
        return a->set == b->set;
    return a->scale == b->scale && a->dt == b->dt && a->origin_x == b->origin_x
           && a->origin_y == b->origin_y && a->y_up == b->y_up;
}
