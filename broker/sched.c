// sched.c — the dispatch queue. Each experiment keeps its tasks in a treap
// keyed by pair id (min for all/sample, max for latest, any pair removable
// in O(log n)) plus a short stack of tasks put back; experiments sit in an
// array sorted by id (there are few), which the turns walk.

#include "broker/sched.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Nodes kept for reuse, so that putting back the task just taken needs no
// allocation.
#define SPARE_MAX 64

// A bucket that never dispatched (or was refunded) is full.
#define NEVER INT64_MIN

typedef struct _node_t node_t;
struct _node_t {
    int64_t pair;          // key
    uint64_t prio;         // treap heap order (random)
    void *task;            // the caller's
    node_t *left, *right;  // treap children; the put-back stack and spares link by 'right'
};

// Capacity 1 means a dispatch always empties the bucket: its state is the
// time of the last dispatch, and it is full again 1/rate later.
typedef struct {
    double rate;      // pairs per second, 0: no limit
    int64_t last_ns;  // last dispatch, NEVER when full
} s_bucket_t;

typedef struct {
    int64_t id;               // experiment id, > 0
    node_t *tree;             // queued tasks by pair id
    node_t *front;            // tasks put back, the last put back on top
    size_t size;              // tasks in tree and front
    int own_rate;             // bucket.rate is its own setting (else global only)
    s_bucket_t bucket;        // its own limit
    int own_policy;           // policy is its own setting (else the global one)
    sched_policy_t policy;    // its own policy, if own_policy
    int paused;               // its own pause flag
    int sample_count;         // fresh pairs since the policy was set, modulo n
} s_exp_t;

struct _sched_t {
    s_exp_t **exps;           // experiments by increasing id
    size_t nexps, maxexps;    // entries used, allocated
    int64_t turn;             // id of the experiment served last
    s_bucket_t bucket;        // global limit
    sched_policy_t policy;    // global policy
    int paused;               // global pause
    size_t size;              // tasks queued in all
    uint64_t seed;            // treap priorities
    node_t *spare;            // freed nodes kept for reuse
    size_t nspare;            // nodes in spare
};

// --------------------------------------------------------------------------
// Treap

static node_t *
s_merge (node_t *a, node_t *b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (a->prio > b->prio) {
        a->right = s_merge (a->right, b);
        return a;
    }
    b->left = s_merge (a, b->left);
    return b;
}

// Splits t into keys < pair (*l) and keys >= pair (*r).
static void
s_split (node_t *t, int64_t pair, node_t **l, node_t **r)
{
    if (!t)
        *l = *r = NULL;
    else if (t->pair < pair) {
        s_split (t->right, pair, &t->right, r);
        *l = t;
    }
    else {
        s_split (t->left, pair, l, &t->left);
        *r = t;
    }
}

static node_t *
s_insert (node_t *t, node_t *n)
{
    if (!t)
        return n;
    if (n->prio > t->prio) {
        s_split (t, n->pair, &n->left, &n->right);
        return n;
    }
    if (n->pair < t->pair)
        t->left = s_insert (t->left, n);
    else
        t->right = s_insert (t->right, n);
    return t;
}

// Removes the node of 'pair' from t into *out (left NULL if absent).
static node_t *
s_erase (node_t *t, int64_t pair, node_t **out)
{
    if (!t)
        return NULL;
    if (pair < t->pair)
        t->left = s_erase (t->left, pair, out);
    else if (pair > t->pair)
        t->right = s_erase (t->right, pair, out);
    else {
        *out = t;
        return s_merge (t->left, t->right);
    }
    return t;
}

static node_t *
s_find (node_t *t, int64_t pair)
{
    while (t && t->pair != pair)
        t = pair < t->pair ? t->left : t->right;
    return t;
}

// The lowest (highest if 'max') pair id in t; t not empty.
static int64_t
s_end (node_t *t, int max)
{
    while (max ? t->right : t->left)
        t = max ? t->right : t->left;
    return t->pair;
}

// --------------------------------------------------------------------------
// Nodes

static node_t *
s_node_new (sched_t *self, int64_t pair, void *task)
{
    node_t *n = self->spare;
    if (n) {
        self->spare = n->right;
        self->nspare--;
    }
    else if (!(n = malloc (sizeof *n)))
        return NULL;
    // splitmix64: priorities need only be well spread, not secret
    uint64_t z = (self->seed += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    *n = (node_t) {.pair = pair, .prio = z ^ (z >> 31), .task = task};
    return n;
}

// Frees n (keeping a few for reuse) and returns its task.
static void *
s_node_free (sched_t *self, node_t *n)
{
    void *task = n->task;
    if (self->nspare < SPARE_MAX) {
        n->right = self->spare;
        self->spare = n;
        self->nspare++;
    }
    else
        free (n);
    return task;
}

// Frees a whole tree, giving each task to fn in pair order.
static void
s_tree_clear (sched_t *self, node_t *t, void (*fn) (void *, void *), void *arg)
{
    if (!t)
        return;
    s_tree_clear (self, t->left, fn, arg);
    node_t *right = t->right;
    void *task = s_node_free (self, t);
    if (fn)
        fn (task, arg);
    s_tree_clear (self, right, fn, arg);
}

// --------------------------------------------------------------------------
// Experiments and buckets

// The index of exp in self->exps, or where it would go (*found 0).
static size_t
s_exp_index (sched_t *self, int64_t exp, int *found)
{
    size_t lo = 0, hi = self->nexps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (self->exps[mid]->id < exp)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < self->nexps && self->exps[lo]->id == exp;
    return lo;
}

static s_exp_t *
s_exp (sched_t *self, int64_t exp)
{
    int found;
    size_t i = s_exp_index (self, exp, &found);
    return found ? self->exps[i] : NULL;
}

// The experiment, made if new; NULL when out of memory or exp <= 0.
static s_exp_t *
s_exp_make (sched_t *self, int64_t exp)
{
    if (exp <= 0)
        return NULL;
    int found;
    size_t i = s_exp_index (self, exp, &found);
    if (found)
        return self->exps[i];
    if (self->nexps == self->maxexps) {
        size_t max = self->maxexps ? 2 * self->maxexps : 8;
        s_exp_t **exps = realloc (self->exps, max * sizeof *exps);
        if (!exps)
            return NULL;
        self->exps = exps;
        self->maxexps = max;
    }
    s_exp_t *e = calloc (1, sizeof *e);
    if (!e)
        return NULL;
    e->id = exp;
    e->bucket.last_ns = NEVER;
    memmove (self->exps + i + 1, self->exps + i, (self->nexps - i) * sizeof *self->exps);
    self->exps[i] = e;
    self->nexps++;
    return e;
}

static sched_policy_t
s_policy_of (sched_t *self, s_exp_t *e)
{
    return e && e->own_policy ? e->policy : self->policy;
}

// The earliest time the bucket holds a token.
static int64_t
s_ready (const s_bucket_t *b)
{
    if (b->rate <= 0 || b->last_ns == NEVER)
        return NEVER;
    double ns = 1e9 / b->rate;
    return b->last_ns + (ns < 1e18 ? (int64_t) llround (ns) : (int64_t) 1e18);
}

// The earliest time e may dispatch as far as the limits go.
static int64_t
s_exp_ready (sched_t *self, s_exp_t *e)
{
    int64_t global = s_ready (&self->bucket);
    int64_t own = e->own_rate ? s_ready (&e->bucket) : NEVER;
    return global > own ? global : own;
}

// --------------------------------------------------------------------------

sched_t *
sched_new (void)
{
    sched_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->bucket.last_ns = NEVER;
    self->policy = (sched_policy_t) {SCHED_ALL, 1};
    return self;
}

void
sched_destroy (sched_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sched_t *self = *self_p;
    sched_clear (self, NULL, NULL);
    for (size_t i = 0; i < self->nexps; i++)
        free (self->exps[i]);
    free (self->exps);
    while (self->spare) {
        node_t *next = self->spare->right;
        free (self->spare);
        self->spare = next;
    }
    free (self);
    *self_p = NULL;
}

// The node of (e, pair) in e's put-back stack, or NULL; *prev_p gets the
// link that points to it.
static node_t *
s_front_find (s_exp_t *e, int64_t pair, node_t ***prev_p)
{
    node_t **link = &e->front;
    while (*link && (*link)->pair != pair)
        link = &(*link)->right;
    if (prev_p)
        *prev_p = link;
    return *link;
}

static int
s_queued (s_exp_t *e, int64_t pair)
{
    return s_find (e->tree, pair) || s_front_find (e, pair, NULL);
}

int
sched_add (sched_t *self, int64_t exp, int64_t pair, void *task, int fresh)
{
    s_exp_t *e = task ? s_exp_make (self, exp) : NULL;
    if (!e || s_queued (e, pair))
        return -1;
    sched_policy_t policy = s_policy_of (self, e);
    int count = e->sample_count;
    if (fresh && policy.kind == SCHED_SAMPLE && policy.n > 1) {
        e->sample_count = (count + 1) % policy.n;
        if (count != 0)
            return SCHED_SKIPPED;
    }
    node_t *n = s_node_new (self, pair, task);
    if (!n) {
        e->sample_count = count;
        return -1;
    }
    e->tree = s_insert (e->tree, n);
    e->size++;
    self->size++;
    return SCHED_QUEUED;
}

int
sched_put_back (sched_t *self, int64_t exp, int64_t pair, void *task)
{
    s_exp_t *e = task ? s_exp_make (self, exp) : NULL;
    node_t *n = e && !s_queued (e, pair) ? s_node_new (self, pair, task) : NULL;
    if (!n)
        return -1;
    n->right = e->front;
    e->front = n;
    e->size++;
    self->size++;
    self->turn = exp - 1;
    self->bucket.last_ns = NEVER;
    e->bucket.last_ns = NEVER;
    return 0;
}

// Takes e's next task in its order.
static node_t *
s_exp_take (sched_t *self, s_exp_t *e)
{
    node_t *n = e->front;
    if (n)
        e->front = n->right;
    else {
        int64_t pair = s_end (e->tree, s_policy_of (self, e).kind == SCHED_LATEST);
        e->tree = s_erase (e->tree, pair, &n);
    }
    e->size--;
    self->size--;
    return n;
}

void *
sched_next (sched_t *self, int64_t now_ns, int64_t *exp_p, int64_t *pair_p)
{
    if (self->paused || self->size == 0 || now_ns < s_ready (&self->bucket))
        return NULL;
    int found;  // the turn goes to the first experiment after the last served
    size_t start = s_exp_index (self, self->turn, &found);
    start += found;
    for (size_t k = 0; k < self->nexps; k++) {
        s_exp_t *e = self->exps[(start + k) % self->nexps];
        if (e->size == 0 || e->paused || now_ns < s_exp_ready (self, e))
            continue;
        node_t *n = s_exp_take (self, e);
        self->turn = e->id;
        self->bucket.last_ns = now_ns;
        e->bucket.last_ns = now_ns;
        if (exp_p)
            *exp_p = e->id;
        if (pair_p)
            *pair_p = n->pair;
        return s_node_free (self, n);
    }
    return NULL;
}

int64_t
sched_next_time (sched_t *self, int64_t now_ns)
{
    if (self->paused)
        return -1;
    int64_t best = -1;
    for (size_t i = 0; i < self->nexps; i++) {
        s_exp_t *e = self->exps[i];
        if (e->size == 0 || e->paused)
            continue;
        int64_t t = s_exp_ready (self, e);
        t = t > now_ns ? t : now_ns;
        if (best < 0 || t < best)
            best = t;
    }
    return best;
}

void *
sched_remove (sched_t *self, int64_t exp, int64_t pair)
{
    s_exp_t *e = s_exp (self, exp);
    if (!e)
        return NULL;
    node_t **link, *n = s_front_find (e, pair, &link);
    if (n)
        *link = n->right;
    else
        e->tree = s_erase (e->tree, pair, &n);
    if (!n)
        return NULL;
    e->size--;
    self->size--;
    return s_node_free (self, n);
}

void
sched_clear (sched_t *self, void (*fn) (void *task, void *arg), void *arg)
{
    for (size_t i = 0; i < self->nexps; i++) {
        s_exp_t *e = self->exps[i];
        while (e->front) {
            node_t *n = e->front;
            e->front = n->right;
            void *task = s_node_free (self, n);
            if (fn)
                fn (task, arg);
        }
        node_t *tree = e->tree;
        e->tree = NULL;
        s_tree_clear (self, tree, fn, arg);
        e->size = 0;
    }
    self->size = 0;
}

// --------------------------------------------------------------------------
// Settings

int
sched_set_rate (sched_t *self, int64_t exp, double rate)
{
    if (!(rate >= 0) || !isfinite (rate))
        return -1;
    if (exp == 0) {
        self->bucket.rate = rate;
        return 0;
    }
    s_exp_t *e = s_exp_make (self, exp);
    if (!e)
        return -1;
    e->own_rate = 1;
    e->bucket.rate = rate;
    return 0;
}

int
sched_set_policy (sched_t *self, int64_t exp, sched_policy_t policy)
{
    if ((policy.kind != SCHED_ALL && policy.kind != SCHED_LATEST && policy.kind != SCHED_SAMPLE)
        || (policy.kind == SCHED_SAMPLE && policy.n < 1))
        return -1;
    if (policy.kind != SCHED_SAMPLE)
        policy.n = 1;
    if (exp == 0) {
        self->policy = policy;
        for (size_t i = 0; i < self->nexps; i++)
            if (!self->exps[i]->own_policy)
                self->exps[i]->sample_count = 0;
        return 0;
    }
    s_exp_t *e = s_exp_make (self, exp);
    if (!e)
        return -1;
    e->own_policy = 1;
    e->policy = policy;
    e->sample_count = 0;
    return 0;
}

int
sched_set_paused (sched_t *self, int64_t exp, int paused)
{
    if (exp == 0) {
        self->paused = paused != 0;
        return 0;
    }
    s_exp_t *e = s_exp_make (self, exp);
    if (!e)
        return -1;
    e->paused = paused != 0;
    return 0;
}

void
sched_inherit (sched_t *self, int64_t exp)
{
    s_exp_t *e = s_exp (self, exp);
    if (!e)
        return;
    if (e->own_policy)
        e->sample_count = 0;
    e->own_rate = 0;
    e->own_policy = 0;
}

double
sched_rate (sched_t *self, int64_t exp)
{
    s_exp_t *e = s_exp (self, exp);
    return e && e->own_rate ? e->bucket.rate : self->bucket.rate;
}

sched_policy_t
sched_policy (sched_t *self, int64_t exp)
{
    return s_policy_of (self, s_exp (self, exp));
}

int
sched_paused (sched_t *self, int64_t exp)
{
    s_exp_t *e = s_exp (self, exp);
    return self->paused || (e && e->paused);
}

size_t
sched_size (sched_t *self)
{
    return self->size;
}

size_t
sched_size_of (sched_t *self, int64_t exp)
{
    s_exp_t *e = s_exp (self, exp);
    return e ? e->size : 0;
}

// --------------------------------------------------------------------------
// Policy text

int
sched_policy_parse (int argc, char *const *argv, sched_policy_t *out, char *err, size_t errlen)
{
    sched_policy_t p = {SCHED_ALL, 1};
    int words = 1;
    if (argc < 1) {
        snprintf (err, errlen, "missing policy: expected all, latest or sample N");
        return -1;
    }
    if (strcmp (argv[0], "all") == 0)
        p.kind = SCHED_ALL;
    else if (strcmp (argv[0], "latest") == 0)
        p.kind = SCHED_LATEST;
    else if (strcmp (argv[0], "sample") == 0) {
        p.kind = SCHED_SAMPLE;
        words = 2;
        if (argc < 2) {
            snprintf (err, errlen, "missing N after 'sample': expected a whole number >= 1");
            return -1;
        }
        char *end;
        errno = 0;
        long n = strtol (argv[1], &end, 10);
        if (errno || end == argv[1] || *end || n < 1 || n > INT_MAX) {
            snprintf (err, errlen, "bad sample N '%s': expected a whole number >= 1", argv[1]);
            return -1;
        }
        p.n = (int) n;
    }
    else {
        snprintf (err, errlen, "bad policy '%s': expected all, latest or sample N", argv[0]);
        return -1;
    }
    if (argc > words) {
        snprintf (err, errlen, "unexpected word '%s' after the policy", argv[words]);
        return -1;
    }
    *out = p;
    return 0;
}

const char *
sched_policy_format (sched_policy_t p, char *buf, size_t size)
{
    if (p.kind == SCHED_SAMPLE)
        snprintf (buf, size, "sample %d", p.n);
    else
        snprintf (buf, size, "%s", p.kind == SCHED_LATEST ? "latest" : "all");
    return buf;
}
