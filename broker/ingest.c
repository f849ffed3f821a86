// ingest.c — the ingest stage: file events to pairs (ingest.h). What it
// records is acknowledged by the reactor after the commit; the tasks of the
// pairs it makes wait in the reactor's 'fresh' list until then.

#include "broker/ingest.h"
#include "broker/pairing.h"
#include "broker/replay.h"
#include "broker/storage.h"
#include "common/log.h"
#include "common/util.h"
#include "piv/settings.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _ingest_t {
    ingest_host_t host;       // the store, the reactor's 'fresh' list
    pairing_t *pairing;       // the pairing rules
    zhashx_t *experiments;    // name -> exp_t
    char *star;               // the keys of 'pivctl piv *' ("key=value ..."), or NULL
    char *dflt;               // the farm's settings (host.settings) with them: what an
                              // experiment without a base starts from
    int star_pairing;         // the rule of 'pivctl piv * pairing=RULE', or -1: pairing/rule
};

static void
s_exp_destroy (exp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    exp_t *self = *self_p;
    replay_destroy (&self->replay);
    storage_exp_release (self);
    free (self->name);
    free (self->source);
    free (self->piv.settings);
    free (self->piv.mask);
    free (self->piv.base);
    free (self->piv.own);
    free (self->piv.cameras);
    free (self);
    *self_p = NULL;
}

ingest_t *
ingest_new (const ingest_host_t *host, char *err, size_t errlen)
{
    ingest_t *self = calloc (1, sizeof *self);
    if (!self || !(self->experiments = zhashx_new ())) {
        free (self);
        snprintf (err, errlen, "cannot start the broker: out of memory");
        return NULL;
    }
    self->host = *host;
    self->star_pairing = -1;
    if (!(self->dflt = strdup (host->settings))) {
        zhashx_destroy (&self->experiments);
        free (self);
        snprintf (err, errlen, "cannot start the broker: out of memory");
        return NULL;
    }
    zhashx_set_destructor (self->experiments, (zhashx_destructor_fn *) s_exp_destroy);
    if (!(self->pairing = pairing_new (host->cfg, err, errlen)))
        ingest_destroy (&self);
    return self;
}

void
ingest_destroy (ingest_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ingest_t *self = *self_p;
    zhashx_destroy (&self->experiments);
    pairing_destroy (&self->pairing);
    free (self->star);
    free (self->dflt);
    free (self);
    *self_p = NULL;
}

zhashx_t *
ingest_experiments (ingest_t *self)
{
    return self->experiments;
}

// Bytes of a settings text: what piv_settings_parse reads.
#define S_SETTINGS_MAX 512

// The settings text of the layers 'base', then 'own' (keys that replace
// the base's: piv_settings_parse takes the last of a key), then 'mask'
// (NULL: none), in the canonical form of piv_settings_format. 0, or -1
// with err naming the key and why (as the engine says it), or the text
// too long.
static int
s_merge (const char *base, const char *own, const char *mask, char *out, size_t size, char *err,
         size_t errlen)
{
    char text[S_SETTINGS_MAX * 2];
    int n = snprintf (text, sizeof text, "%s%s%s%s%s", base, own && *own ? " " : "",
                      own ? own : "", mask ? " mask=" : "", mask ? mask : "");
    piv_settings_t s;
    if (n < 0 || n >= S_SETTINGS_MAX) {
        snprintf (err, errlen, "bad settings: over the %d bytes a task's settings may have",
                  S_SETTINGS_MAX - 1);
        return -1;
    }
    if (piv_settings_parse (text, &s, err, errlen) != 0 || piv_settings_check (&s, err, errlen) != 0)
        return -1;
    if (piv_settings_format (&s, out, size) < 0) {
        snprintf (err, errlen, "bad settings: over the %zu bytes a task's settings may have",
                  size - 1);
        return -1;
    }
    return 0;
}

exp_t *
ingest_experiment (ingest_t *self, const char *name, int64_t now)
{
    exp_t *exp = zhashx_lookup (self->experiments, name);
    if (exp)
        return exp;
    store_t *store = self->host.store;
    int64_t id = store_experiment (store, name, now);
    store_experiment_t found;
    if (id < 0 || store_experiment_find (store, name, &found) != 1)
        return NULL;
    exp = calloc (1, sizeof *exp);
    if (!exp)
        return NULL;
    exp->id = id;
    exp->name = strdup (name);
    exp->source = strdup (found.source);
    exp->piv.pairing = -1;
    exp->piv.base = *found.settings ? strdup (found.settings) : NULL;
    char merged[S_SETTINGS_MAX], err[512];
    // A base this broker cannot read (written by another version) is
    // carried as it is: the agents say what is wrong with it.
    if (s_merge (exp->piv.base ? exp->piv.base : self->dflt, NULL, NULL, merged, sizeof merged,
                 err, sizeof err)
        != 0)
        snprintf (merged, sizeof merged, "%s", exp->piv.base ? exp->piv.base : self->dflt);
    exp->piv.settings = strdup (merged);
    if (!exp->name || !exp->source || !exp->piv.settings || (*found.settings && !exp->piv.base)) {
        s_exp_destroy (&exp);
        return NULL;
    }
    zhashx_insert (self->experiments, name, exp);
    return exp;
}

int
ingest_adopt (ingest_t *self, exp_t *exp, const char *source, const char *settings, int64_t now,
              char *err, size_t errlen)
{
    char merged[S_SETTINGS_MAX];
    if (s_merge (settings, exp->piv.own, exp->piv.mask, merged, sizeof merged, err, errlen) != 0)
        return -1;
    char *s = strdup (source), *b = strdup (settings), *t = strdup (merged);
    if (!s || !b || !t
        || store_experiment_adopt (self->host.store, exp->id, exp->name, source, settings, now)
               != 0) {
        snprintf (err, errlen, "%s", s && b && t ? store_error (self->host.store) : "no memory");
        free (s);
        free (b);
        free (t);
        return -1;
    }
    free (exp->source);
    free (exp->piv.base);
    free (exp->piv.settings);
    exp->source = s;
    exp->piv.base = b;
    exp->piv.settings = t;
    return 0;
}

// Context of pairing_offer's callback.
typedef struct {
    ingest_t *self;     // the stage
    int64_t now;        // event time
    exp_t *exp;         // experiment
    int64_t closed_ns;  // when the file that completes the pairs was closed
} s_offer_t;

static int
s_on_pair (void *arg, const char *experiment, const char *stem, const pairing_set_t *set)
{
    (void) experiment;
    s_offer_t *ctx = arg;
    store_t *store = ctx->self->host.store;
    // The files were offered with their rows' ids (ingest_file, s_reoffer).
    int is_new = 0;
    int64_t pair = store_pair_add_set (store, ctx->exp->id, stem, set->id, ctx->now, &is_new);
    if (pair < 0)
        return -1;
    if (is_new) {
        task_t *task = broker_task_new (pair, ctx->exp, stem, set->name[0], set->name[1]);
        if (task && set->name[2] && broker_task_set_more (task, set->name[2], set->name[3]) != 0)
            broker_task_destroy (&task);
        if (task) {
            // A file offered again after a restart has no close time of its
            // own: its recorded mtime stands for it.
            task->closed_ns = ctx->closed_ns > 0 ? ctx->closed_ns : store_pair_closed (store, pair);
            zlistx_add_end (ctx->self->host.fresh, task);
        }
        broker_count (&ctx->exp->in.arrivals, ctx->now, 1);
    }
    return 0;
}

task_t *
ingest_task_of (store_t *store, exp_t *exp, int64_t pair, const char *stem, const char *name_a,
                const char *name_b)
{
    task_t *task = exp ? broker_task_new (pair, exp, stem, name_a, name_b) : NULL;
    char *c = NULL, *d = NULL;
    int more = task ? store_pair_more (store, pair, &c, &d) : -1;
    if (more < 0 || (more > 0 && broker_task_set_more (task, c, d) != 0))
        broker_task_destroy (&task);
    free (c), free (d);
    return task;
}

int
ingest_queue_again (void *arg, int64_t pair, const char *experiment, const char *stem,
                    const char *name_a, const char *name_b, int attempts)
{
    (void) attempts;
    ingest_t *self = arg;
    exp_t *exp = ingest_experiment (self, experiment, util_time_ns ());
    task_t *task = ingest_task_of (self->host.store, exp, pair, stem, name_a, name_b);
    if (!task)
        return -1;
    task->attempt = -1;  // not fresh: never sampled out
    // The camera's time, not 0 (which would give a latency from the epoch);
    // published, but not counted in the live latency figures.
    task->closed_ns = store_pair_closed (self->host.store, pair);
    task->by_hand = 1;
    zlistx_add_end (self->host.fresh, task);
    return 0;
}

// A new version of a recorded file (another size or mtime): a pair of it
// that failed is retried, one that is done is kept and said to be so (the
// camera rewrote a frame whose result is out: the operator decides), one
// pending or out reads the file as it is now. 0, or -1 (not acknowledged).
static int
s_file_changed (ingest_t *self, exp_t *exp, const char *name, int64_t file, int64_t now)
{
    int done = 0;
    int retried = store_file_retry (self->host.store, exp->id, file, now, ingest_queue_again,
                                    self, &done);
    if (retried < 0) {
        log_error ("cannot retry the pairs of file '%s/%s': %s", exp->name, name,
                   store_error (self->host.store));
        return -1;
    }
    exp->in.last_file_ns = now;
    if (retried > 0)
        log_notice ("'%s/%s' changed after its pair failed: retried", exp->name, name);
    if (done > 0)
        log_warning ("'%s/%s' rewritten after its pair was done: result kept", exp->name, name);
    if (retried == 0 && done == 0)
        log_info ("'%s/%s' changed: its pairs read it as it is now", exp->name, name);
    return 0;
}

// 1 with why (the file counted as refused) when a task of the file could not be written: its path as
// agents are given it (the watch root, the experiment's directory, the
// name) or its result's name (the experiment, the name, ".txt") over what
// a path may have (PATH_MAX). The watcher refuses what its own root makes
// too long; a broker whose watch root is longer (another mount point)
// refuses the rest here, at its first door, rather than pair what no
// agent could open.
static int
s_too_long (ingest_t *self, exp_t *exp, const char *name, char *why, size_t size)
{
    size_t path = strlen (self->host.cfg->watcher.root) + strlen (exp->source) + strlen (name) + 2;
    size_t output = strlen (exp->name) + strlen (name) + strlen ("/.txt");
    if (path < PATH_MAX && output < PATH_MAX)
        return 0;
    char shown[UTIL_SHOWN], reason[256];
    snprintf (reason, sizeof reason, "is not paired: its %s would be %zu bytes long, over the %d "
              "PATH_MAX allows",
              path >= PATH_MAX ? "path under the watch root" : "result's name",
              path >= PATH_MAX ? path : output, PATH_MAX - 1);
    snprintf (why, size, "'%s' %s", util_shorten (name, shown, sizeof shown), reason);
    pairing_refuse (self->pairing, exp->name, name, reason);
    return 1;
}

int
ingest_file (ingest_t *self, exp_t *exp, const char *name, int64_t size, int64_t mtime_ns,
             int64_t closed_ns)
{
    store_t *store = self->host.store;
    int64_t now = util_time_ns ();
    int version = STORE_FILE_SAME;
    int64_t file = store_file_add (store, exp->id, name, size, mtime_ns, now, &version);
    if (file < 0) {
        log_error ("cannot record file '%s/%s': %s", exp->name, name, store_error (store));
        return -1;  // not acknowledged: the watcher resends it
    }
    if (version == STORE_FILE_CHANGED)
        return s_file_changed (self, exp, name, file, now);
    if (version != STORE_FILE_NEW)
        return 0;
    exp->in.last_file_ns = now;
    char err[1024] = "";  // pairing.c shortens the names it gives
    s_offer_t ctx = {self, now, exp, closed_ns};
    int made = s_too_long (self, exp, name, err, sizeof err)
                   ? -1
                   : pairing_offer (self->pairing, exp->name, name, file, s_on_pair, &ctx, err,
                                    sizeof err);
    if (made == -2) {
        // The store refused the pair: the commit will fail and the broker
        // start again from the store; the watcher resends the file.
        log_error ("experiment '%s': %s: %s", exp->name, err, store_error (store));
        return -1;
    }
    if (made < 0) {
        // A name that is no frame is recorded and acknowledged, not paired.
        log_warning ("experiment '%s': %s", exp->name, err);
        char payload[sizeof err + 16];
        snprintf (payload, sizeof payload, "unpaired reason=%s", err);
        store_event (store, "unpaired", exp->id, 0, payload, now);
    }
    return 0;
}

// A FILE's mtime against the broker's clock: a file closed in the future
// (by more than the sample can blur) says the clock of whoever wrote it
// (the camera's host, the NFS or CIFS server) is ahead. Files closed in
// the past say nothing (they waited to settle): such a sample counts as 0.
// The peer is the experiment's files, whichever watcher (connection)
// reported them: one series across watcher restarts.
static void
s_clock_file (clocks_t *clocks, const char *experiment, int64_t mtime_ns, int64_t now)
{
    if (mtime_ns <= 0)
        return;
    char key[300], peer[300];
    snprintf (key, sizeof key, "files %s", experiment);
    snprintf (peer, sizeof peer, "the writer of files of '%s'", experiment);
    double ahead = (mtime_ns - now) / 1e6;
    clocks_sample (clocks, key, peer, ahead > 0 ? ahead : 0, now);
}

int
ingest_file_event (ingest_t *self, clocks_t *clocks, const proto_msg_t *msg)
{
    s_clock_file (clocks, msg->experiment, msg->time_ns, util_time_ns ());
    exp_t *exp = ingest_experiment (self, msg->experiment, util_time_ns ());
    if (!exp) {
        log_error ("cannot record experiment '%s': %s", msg->experiment,
                   store_error (self->host.store));
        return -1;
    }
    return ingest_file (self, exp, msg->name, msg->size, msg->time_ns, msg->time_ns);
}

// How many pairs a file can be in under the pairing rules in force: the
// most of the default's and the experiments' own.
static int
s_pairs_per_file (ingest_t *self)
{
    int most = ingest_pairing_rule (self, NULL)->pairs_per_file;
    for (exp_t *e = zhashx_first (self->experiments); e; e = zhashx_next (self->experiments))
        if (e->piv.pairing >= 0 && pairing_rule_get (e->piv.pairing)->pairs_per_file > most)
            most = pairing_rule_get (e->piv.pairing)->pairs_per_file;
    return most;
}

static int
s_reoffer (void *arg, const char *experiment, const char *name, int64_t file)
{
    ingest_t *self = arg;
    char err[512];
    int64_t now = util_time_ns ();
    s_offer_t ctx = {self, now, ingest_experiment (self, experiment, now), 0};
    if (!ctx.exp)
        return -1;
    // A file refused for its length was said so when it came (its event).
    if (!s_too_long (self, ctx.exp, name, err, sizeof err))
        pairing_offer (self->pairing, experiment, name, file, s_on_pair, &ctx, err, sizeof err);
    return 0;
}

void
ingest_unpaired (ingest_t *self, const exp_t *exp, pairing_unpaired_t *out, char *expects,
                 size_t size, const char **rule)
{
    pairing_unpaired (self->pairing, exp->name, out);
    pairing_expects (self->pairing, exp->name, expects, size);
    *rule = pairing_rule_name (self->pairing, exp->name);
}

int
ingest_reoffer (ingest_t *self)
{
    return store_files_waiting (self->host.store, s_pairs_per_file (self), s_reoffer, self) < 0
               ? -1
               : 0;
}

void
ingest_resync (ingest_t *self)
{
    char err[512];
    int64_t now = util_time_ns ();
    for (exp_t *exp = zhashx_first (self->experiments); exp; exp = zhashx_next (self->experiments))
        exp->id = store_experiment (self->host.store, exp->name, now);
    pairing_t *fresh_rules = pairing_new (self->host.cfg, err, sizeof err);
    if (fresh_rules) {
        pairing_destroy (&self->pairing);
        self->pairing = fresh_rules;
        // The rules set by 'piv' (they were checked when set).
        if (self->star_pairing >= 0)
            pairing_set_rule (self->pairing, NULL, self->star_pairing, err, sizeof err);
        for (exp_t *e = zhashx_first (self->experiments); e; e = zhashx_next (self->experiments))
            if (e->piv.pairing >= 0)
                pairing_set_rule (self->pairing, e->name, e->piv.pairing, err, sizeof err);
        ingest_reoffer (self);
    }
}

// ---------------------------------------------------------------------------
// Settings and pairing rules per experiment ('pivctl piv')

const char *
ingest_piv_default (ingest_t *self)
{
    return self->dflt;
}

const char *
ingest_piv_own (ingest_t *self, const exp_t *exp)
{
    const char *own = exp ? exp->piv.own : self->star;
    return own ? own : "";
}

// The settings of 'exp' merged anew over 'dflt' (its base if it has one)
// into out. 0, or -1 with err.
static int
s_exp_merge (const exp_t *exp, const char *dflt, const char *own, char *out, size_t size,
             char *err, size_t errlen)
{
    return s_merge (exp->piv.base ? exp->piv.base : dflt, own, exp->piv.mask, out, size, err,
                    errlen);
}

int
ingest_piv_merge (ingest_t *self, const exp_t *exp, const char *own, char *out, size_t size,
                  char *err, size_t errlen)
{
    if (!exp)
        return s_merge (self->dflt, own, NULL, out, size, err, errlen);
    return s_exp_merge (exp, self->dflt, own, out, size, err, errlen);
}

// Replaces *text_p by a copy of 'text' (NULL or "": none). 0, or -1 (no
// memory, *text_p unchanged).
static int
s_replace (char **text_p, const char *text)
{
    char *copy = text && *text ? strdup (text) : NULL;
    if (text && *text && !copy)
        return -1;
    free (*text_p);
    *text_p = copy;
    return 0;
}

int
ingest_piv_set (ingest_t *self, exp_t *exp, const char *own, char *err, size_t errlen)
{
    char merged[S_SETTINGS_MAX], dflt[S_SETTINGS_MAX];
    if (exp) {
        if (s_exp_merge (exp, self->dflt, own, merged, sizeof merged, err, errlen) != 0)
            return -1;
        char *settings = strdup (merged);
        if (!settings || s_replace (&exp->piv.own, own) != 0) {
            free (settings);
            snprintf (err, errlen, "no memory for the settings of '%s'", exp->name);
            return -1;
        }
        free (exp->piv.settings);
        exp->piv.settings = settings;
        return 0;
    }
    // The default: every experiment that follows it must still have
    // settings the engine takes, or nothing changes.
    if (s_merge (self->host.settings, own, NULL, dflt, sizeof dflt, err, errlen) != 0)
        return -1;
    for (exp_t *e = zhashx_first (self->experiments); e; e = zhashx_next (self->experiments)) {
        char why[512];
        if (!e->piv.base
            && s_exp_merge (e, dflt, e->piv.own, merged, sizeof merged, why, sizeof why) != 0) {
            snprintf (err, errlen, "%s (with the own settings of experiment '%s')", why, e->name);
            return -1;
        }
    }
    char *copy = strdup (dflt);
    if (!copy || s_replace (&self->star, own) != 0) {
        free (copy);
        snprintf (err, errlen, "no memory for the default settings");
        return -1;
    }
    free (self->dflt);
    self->dflt = copy;
    for (exp_t *e = zhashx_first (self->experiments); e; e = zhashx_next (self->experiments)) {
        char *settings;
        if (e->piv.base
            || s_exp_merge (e, dflt, e->piv.own, merged, sizeof merged, err, errlen) != 0
            || !(settings = strdup (merged)))
            continue;  // checked above: only memory can fail here, keeping the old
        free (e->piv.settings);
        e->piv.settings = settings;
    }
    return 0;
}

const pairing_rule_info_t *
ingest_pairing_rule (ingest_t *self, const exp_t *exp)
{
    return pairing_rule_of (self->pairing, exp ? exp->name : "\x1f");
}

int
ingest_pairing_own (ingest_t *self, const exp_t *exp)
{
    return exp ? exp->piv.pairing : self->star_pairing;
}

// Context of a re-offer after a rule changed: its experiment, or NULL for
// those that follow the default.
typedef struct {
    ingest_t *self;
    const char *experiment;
} s_again_t;

static int
s_reoffer_again (void *arg, const char *experiment, const char *name, int64_t file)
{
    s_again_t *again = arg;
    if (again->experiment && strcmp (experiment, again->experiment) != 0)
        return 0;
    exp_t *exp = zhashx_lookup (again->self->experiments, experiment);
    if (!again->experiment && exp && exp->piv.pairing >= 0)
        return 0;
    return s_reoffer (again->self, experiment, name, file);
}

int
ingest_pairing_set (ingest_t *self, exp_t *exp, int rule, int reoffer, char *err, size_t errlen)
{
    if (pairing_set_rule (self->pairing, exp ? exp->name : NULL, rule, err, errlen) != 0)
        return -1;
    if (exp)
        exp->piv.pairing = rule;
    else
        self->star_pairing = rule;
    if (!reoffer)
        return 0;
    // The files waiting under the old rule (forgotten by it) and those it
    // refused, offered to the new one: a rule set right pairs the files
    // that came before it.
    s_again_t again = {self, exp ? exp->name : NULL};
    const pairing_rule_info_t *info = ingest_pairing_rule (self, exp);
    if (store_files_waiting (self->host.store, info->pairs_per_file, s_reoffer_again, &again) < 0) {
        snprintf (err, errlen, "cannot read the files waiting: %s",
                  store_error (self->host.store));
        return -1;
    }
    return 0;
}

int
ingest_cameras_set (ingest_t *self, exp_t *exp, const char *list, int reoffer, char *err,
                    size_t errlen)
{
    if (pairing_set_cameras (self->pairing, exp ? exp->name : NULL, list, err, errlen) != 0)
        return -1;
    if (!reoffer)
        return 0;
    // As a new rule: the files that waited for the old folders, offered again.
    s_again_t again = {self, exp ? exp->name : NULL};
    if (store_files_waiting (self->host.store, 1, s_reoffer_again, &again) < 0) {
        snprintf (err, errlen, "cannot read the files waiting: %s",
                  store_error (self->host.store));
        return -1;
    }
    return 0;
}

const char *
ingest_cameras (ingest_t *self, const exp_t *exp)
{
    return pairing_cameras (self->pairing, exp ? exp->name : NULL);
}

void
ingest_forget (ingest_t *self, exp_t *exp)
{
    pairing_forget (self->pairing, exp->name);
    char *name = strdup (exp->name);
    if (name)
        zhashx_delete (self->experiments, name);  // its destructor frees exp
    free (name);
}
