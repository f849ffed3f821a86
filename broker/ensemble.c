// ensemble.c — ensemble correlation jobs on the farm (ensemble.h): the
// chunks of each pass queued and handed to agents, their partial sums
// checked and recorded once, each pass merged in chunk order into the
// next pass's predictor, the last into the experiment's ensemble field.

#include "broker/ensemble.h"

#include "common/log.h"
#include "common/util.h"
#include "piv/ensemble.h"
#include "piv/field.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_PASSES 8

typedef enum { S_QUEUED, S_OUT, S_DONE } s_chunk_state_t;

typedef struct {
    s_chunk_state_t state;  // waiting, with an agent, or its partial recorded
    char holder[512];       // the routing key of the agent it is out with
    char agent[256];        // ... and that agent's id
    int64_t sent_ns;        // when it went out
    uint32_t attempt;       // attempts of it in this pass
    int failures;           // failed answers (a bad partial, an error) in this pass
} s_chunk_t;

typedef struct {
    int64_t pair;           // pair id
    char *a, *b;            // its frames' names within the experiment
} s_pair_t;

typedef struct {
    int64_t id;             // its id in the store
    exp_t *exp;             // its experiment
    char *settings;         // the PIV settings it runs with
    int windows[S_MAX_PASSES], passes, pass;  // each pass's windows; the pass under way
    int overlap;            // %
    s_pair_t *pairs;        // the pairs it sums, in order
    int npairs;
    s_chunk_t *chunks;      // the chunks of the pass under way
    int nchunks, done;      // how many, and how many are recorded
    unsigned char *predictor;  // the pass's predictor (piv_field_encode), or NULL
    size_t predictor_size;
    int64_t compute_ns[16];    // compute times of its last good partials, a ring (deadlines)
    int computes;              // how many were counted
} s_job_t;

// A chunk whose deadline passed while its agent still held it: the agent's
// slot stays taken until that agent answers it (or goes).
typedef struct {
    char holder[512];       // the agent's routing key
    int64_t job;            // what it was given
    int pass, chunk;
    uint32_t attempt;
} s_late_t;

struct _ensemble_t {
    ensemble_host_t host;   // what it was given
    zlistx_t *jobs;         // s_job_t running
    zlistx_t *late;         // s_late_t: chunks taken back from agents that still hold them
    char frames[PROTO_MAX_CHUNK * 2 * (PATH_MAX * 2 + 1) + 1];  // ensemble_next's frames
};

static void
s_job_destroy (s_job_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_job_t *job = *self_p;
    for (int i = 0; i < job->npairs; i++) {
        free (job->pairs[i].a);
        free (job->pairs[i].b);
    }
    free (job->pairs);
    free (job->chunks);
    free (job->predictor);
    free (job->settings);
    free (job);
    *self_p = NULL;
}

static void
s_job_free (void **item)
{
    s_job_destroy ((s_job_t **) item);
}

static void
s_late_free (void **item)
{
    free (*item);
    *item = NULL;
}

ensemble_t *
ensemble_new (const ensemble_host_t *host)
{
    ensemble_t *self = calloc (1, sizeof *self);
    if (!self || !(self->jobs = zlistx_new ()) || !(self->late = zlistx_new ())) {
        if (self)
            zlistx_destroy (&self->jobs);
        free (self);
        return NULL;
    }
    zlistx_set_destructor (self->jobs, s_job_free);
    zlistx_set_destructor (self->late, s_late_free);
    self->host = *host;
    return self;
}

void
ensemble_destroy (ensemble_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zlistx_destroy (&(*self_p)->jobs);
    zlistx_destroy (&(*self_p)->late);
    free (*self_p);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------
// Starting a job

typedef struct {
    s_job_t *job;
    long first, last;       // ordinals asked (last -1: to the end); first 0: the pairs done
    long ord;               // ordinal of the pair seen last
    char *err;
    size_t errlen;
    int cap;
} s_pick_t;

static int
s_pick (void *arg, int64_t pair, int state, const char *a, const char *b, int stereo)
{
    s_pick_t *pick = arg;
    long ord = ++pick->ord;
    if (pick->first > 0 && (ord < pick->first || (pick->last >= 0 && ord > pick->last)))
        return 0;
    if (pick->first == 0 && state != STORE_DONE)
        return 0;
    if (state == STORE_FAILED)
        return 0;  // its frames could not be read: left out
    if (stereo || !b) {
        snprintf (pick->err, pick->errlen,
                  "pair %ld ('%s') is a %s: the ensemble sums pairs of two frames", ord, a,
                  stereo ? "stereo set" : "multipage file");
        return -1;
    }
    if (strchr (a, '\n') || strchr (b, '\n')) {
        snprintf (pick->err, pick->errlen, "pair %ld: a frame's name holds a line break", ord);
        return -1;
    }
    s_job_t *job = pick->job;
    if (job->npairs == pick->cap) {
        int cap = pick->cap ? pick->cap * 2 : 64;
        s_pair_t *more = realloc (job->pairs, (size_t) cap * sizeof *more);
        if (!more) {
            snprintf (pick->err, pick->errlen, "no memory");
            return -1;
        }
        job->pairs = more;
        pick->cap = cap;
    }
    s_pair_t *p = &job->pairs[job->npairs];
    p->pair = pair;
    p->a = strdup (a);
    p->b = strdup (b);
    job->npairs++;
    if (!p->a || !p->b) {
        snprintf (pick->err, pick->errlen, "no memory");
        return -1;
    }
    return 0;
}

// "A-B" or "A" (1-based ordinals, A <= B): 0, or -1.
static int
s_range (const char *range, long *first, long *last)
{
    char *end;
    long a = strtol (range, &end, 10), b = a;
    if (end == range || a < 1)
        return -1;
    if (*end == '-') {
        const char *from = end + 1;
        b = strtol (from, &end, 10);
        if (end == from || b < a)
            return -1;
    }
    if (*end)
        return -1;
    *first = a;
    *last = b;
    return 0;
}

// The chunks of the pass under way, all waiting. 0 or -1 (no memory).
static int
s_chunks_reset (s_job_t *job)
{
    job->nchunks = (job->npairs + ENSEMBLE_CHUNK - 1) / ENSEMBLE_CHUNK;
    free (job->chunks);
    job->chunks = calloc ((size_t) job->nchunks, sizeof *job->chunks);
    job->done = 0;
    return job->chunks ? 0 : -1;
}

static s_job_t *
s_job_of (ensemble_t *self, const exp_t *exp)
{
    for (s_job_t *job = zlistx_first (self->jobs); job; job = zlistx_next (self->jobs))
        if (job->exp == exp)
            return job;
    return NULL;
}

// The settings' words but background=...: the ensemble does not subtract
// an experiment's background (agents keep theirs over the frames each saw,
// which would make a chunk's sums depend on the agent that took it); it
// takes each window less the mean of the windows around it (doc/piv.md).
// NULL: no memory.
static char *
s_without_background (const char *settings)
{
    char *out = malloc (strlen (settings) + 1);
    if (!out)
        return NULL;
    size_t used = 0;
    for (const char *p = settings; *p;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn (p, " ");
        if (n && strncmp (p, "background=", 11) != 0) {
            if (used)
                out[used++] = ' ';
            memcpy (out + used, p, n);
            used += n;
        }
        p += n;
    }
    out[used] = '\0';
    return out;
}

int64_t
ensemble_start (ensemble_t *self, exp_t *exp, int window, int overlap, const char *range,
                int64_t now, char *err, size_t errlen)
{
    s_job_t *running = s_job_of (self, exp);
    if (running) {
        snprintf (err, errlen, "ensemble job %" PRId64 " of '%s' is running (pass %d of %d)",
                  running->id, exp->name, running->pass + 1, running->passes);
        return -1;
    }
    if (overlap < 0 || overlap > 90) {
        snprintf (err, errlen, "bad overlap '%d': not 0..90 %%", overlap);
        return -1;
    }
    s_job_t *job = calloc (1, sizeof *job);
    if (!job || !(job->settings = s_without_background (exp->piv.settings))) {
        s_job_destroy (&job);
        snprintf (err, errlen, "no memory");
        return -1;
    }
    if (strstr (exp->piv.settings, "background="))
        log_notice ("ensemble of '%s': its background subtraction is not applied (each "
                    "window is taken less the mean of the windows around it): settings '%s'",
                    exp->name, job->settings);
    job->exp = exp;
    job->overlap = overlap;
    job->passes = piv_ensemble_passes (window, job->windows, S_MAX_PASSES);
    if (job->passes <= 0) {
        s_job_destroy (&job);
        snprintf (err, errlen, "bad window '%d': the engine cannot correlate windows of %d px",
                  window, window);
        return -1;
    }
    s_pick_t pick = {.job = job, .first = 0, .last = -1, .err = err, .errlen = errlen};
    if (range && s_range (range, &pick.first, &pick.last) != 0) {
        s_job_destroy (&job);
        snprintf (err, errlen, "bad pairs '%s': not A-B or A (ordinals from 1, A <= B)", range);
        return -1;
    }
    *err = '\0';
    int listed = store_pair_frames (self->host.store, exp->id, s_pick, &pick);
    if (listed < 0 || *err) {
        if (!*err)
            snprintf (err, errlen, "%s", store_error (self->host.store));
        s_job_destroy (&job);
        return -1;
    }
    if (job->npairs == 0) {
        if (range)
            snprintf (err, errlen, "no pairs of '%s' in %s (it has %ld; failed ones are left "
                      "out)", exp->name, range, pick.ord);
        else
            snprintf (err, errlen, "no pairs of '%s' are done yet (give --pairs to sum "
                      "pending ones)", exp->name);
        s_job_destroy (&job);
        return -1;
    }
    if (s_chunks_reset (job) != 0) {
        s_job_destroy (&job);
        snprintf (err, errlen, "no memory");
        return -1;
    }
    int64_t *ids = malloc ((size_t) job->npairs * sizeof *ids);
    for (int i = 0; ids && i < job->npairs; i++)
        ids[i] = job->pairs[i].pair;
    store_ensemble_t rec = {.experiment = exp->id,
                            .window = window,
                            .overlap = overlap,
                            .asked = (char *) (range ? range : ""),
                            .settings = job->settings,
                            .chunk = ENSEMBLE_CHUNK,
                            .passes = job->passes};
    job->id = ids ? store_ensemble_new (self->host.store, &rec, ids, (size_t) job->npairs, now)
                  : -1;
    free (ids);
    if (job->id < 0) {
        snprintf (err, errlen, "%s", ids ? store_error (self->host.store) : "no memory");
        s_job_destroy (&job);
        return -1;
    }
    log_notice ("ensemble job %" PRId64 " of '%s': %d pair(s) in %d chunk(s), %d pass(es) "
                "down to %d px at %d %%",
                job->id, exp->name, job->npairs, job->nchunks, job->passes, window, overlap);
    zlistx_add_end (self->jobs, job);
    return job->id;
}

// ---------------------------------------------------------------------------
// Chunks out and back

int
ensemble_next (ensemble_t *self, const char *holder, const char *agent, proto_msg_t *msg)
{
    for (s_job_t *job = zlistx_first (self->jobs); job; job = zlistx_next (self->jobs))
        for (int c = 0; c < job->nchunks; c++) {
            s_chunk_t *chunk = &job->chunks[c];
            if (chunk->state != S_QUEUED)
                continue;
            size_t len = 0;
            int first = c * ENSEMBLE_CHUNK, end = first + ENSEMBLE_CHUNK;
            if (end > job->npairs)
                end = job->npairs;
            for (int i = first; i < end; i++) {
                char a[PATH_MAX * 2], b[PATH_MAX * 2];
                self->host.frame_path (self->host.arg, job->exp, job->pairs[i].a, a, sizeof a);
                self->host.frame_path (self->host.arg, job->exp, job->pairs[i].b, b, sizeof b);
                len += (size_t) snprintf (self->frames + len, sizeof self->frames - len,
                                          "%s\n%s\n", a, b);
            }
            chunk->state = S_OUT;
            chunk->attempt++;
            chunk->sent_ns = util_time_ns ();
            snprintf (chunk->holder, sizeof chunk->holder, "%s", holder);
            snprintf (chunk->agent, sizeof chunk->agent, "%s", agent);
            *msg = (proto_msg_t) {.command = PROTO_ENSEMBLE,
                                  .seq = (uint64_t) job->id,
                                  .count = (uint32_t) job->pass,
                                  .pair = (uint64_t) c,
                                  .attempt = chunk->attempt,
                                  .experiment = job->exp->name,
                                  .settings = job->settings,
                                  .window = (uint32_t) job->windows[job->pass],
                                  .overlap = (uint32_t) job->overlap,
                                  .text = self->frames,
                                  .blob = job->predictor,
                                  .blob_size = job->predictor_size};
            return 1;
        }
    return 0;
}

// Ends a job (failed with 'error', or done with its field) and forgets it.
// 'counted': the pairs its last pass's merged sums counted (done only).
static void
s_end (ensemble_t *self, s_job_t *job, const char *error, const void *field, size_t field_size,
       const void *stress, size_t stress_size, int64_t counted)
{
    int64_t now = util_time_ns ();
    if (store_ensemble_end (self->host.store, job->id, error, field, field_size, stress,
                            stress_size, counted, now)
        != 0)
        log_error ("cannot end ensemble job %" PRId64 " of '%s': %s", job->id, job->exp->name,
                   store_error (self->host.store));
    if (error)
        log_warning ("ensemble job %" PRId64 " of '%s' failed: %s", job->id, job->exp->name,
                     error);
    else
        log_notice ("ensemble job %" PRId64 " of '%s' done: %d pair(s), %d pass(es)", job->id,
                    job->exp->name, job->npairs, job->passes);
    for (s_job_t *j = zlistx_first (self->jobs); j; j = zlistx_next (self->jobs))
        if (j == job) {
            zlistx_delete (self->jobs, zlistx_cursor (self->jobs));
            break;
        }
}

// The stresses as little-endian floats (the store's layout), malloc'd.
static unsigned char *
s_stress_bytes (const float *stress, size_t n)
{
    unsigned char *out = malloc (n > 0 ? n * 4 : 1);
    for (size_t i = 0; out && i < n; i++) {
        uint32_t bits;
        memcpy (&bits, &stress[i], 4);
        for (int k = 0; k < 4; k++)
            out[i * 4 + k] = (unsigned char) (bits >> (8 * k));
    }
    return out;
}

// Every chunk of the pass is in: their partials merged in chunk order (the
// same sums whoever computed them), the pass's field read; the next pass
// starts with it as its predictor, or the job ends with it.
static void
s_pass_done (ensemble_t *self, s_job_t *job)
{
    char err[1024] = "", why[768];
    piv_ensemble_t *sum = NULL;
    for (int c = 0; c < job->nchunks && !*err; c++) {
        unsigned char *buf;
        size_t size;
        if (store_ensemble_partial_get (self->host.store, job->id, job->pass, c, &buf, &size)
                != 0
            || !buf) {
            snprintf (err, sizeof err, "pass %d chunk %d: %s", job->pass + 1, c,
                      buf ? store_error (self->host.store) : "its partial is not in the store");
            break;
        }
        piv_ensemble_t *part = piv_ensemble_decode (buf, size, why, sizeof why);
        free (buf);
        if (!part)
            snprintf (err, sizeof err, "pass %d chunk %d: %s", job->pass + 1, c, why);
        else if (!sum)
            sum = part;
        else {
            if (piv_ensemble_merge (sum, part, why, sizeof why) != 0)
                snprintf (err, sizeof err, "pass %d chunk %d: %s", job->pass + 1, c, why);
            piv_ensemble_destroy (&part);
        }
    }
    float *stress = NULL;
    piv_field_t *field = *err ? NULL : piv_ensemble_field (sum, &stress, why, sizeof why);
    if (!*err && !field)
        snprintf (err, sizeof err, "pass %d: %s", job->pass + 1, why);
    piv_ensemble_info_t info = {0};
    if (sum)
        piv_ensemble_info (sum, &info);
    piv_ensemble_destroy (&sum);
    unsigned char *bytes = NULL;
    size_t size = 0;
    if (field && piv_field_encode (field, &bytes, &size) != 0)
        snprintf (err, sizeof err, "pass %d: no memory for its field", job->pass + 1);
    if (!*err && info.pairs != job->npairs)
        snprintf (err, sizeof err, "pass %d counted %" PRId64 " pair(s), %d asked", job->pass + 1,
                  info.pairs, job->npairs);
    if (*err) {
        s_end (self, job, err, NULL, 0, NULL, 0, -1);
    }
    else if (job->pass + 1 < job->passes) {
        free (job->predictor);
        job->predictor = bytes;
        job->predictor_size = size;
        bytes = NULL;
        job->pass++;
        if (s_chunks_reset (job) != 0)
            s_end (self, job, "no memory", NULL, 0, NULL, 0, -1);
        else {
            store_ensemble_pass (self->host.store, job->id, job->pass, util_time_ns ());
            log_info ("ensemble job %" PRId64 " of '%s': pass %d of %d (%d px)", job->id,
                      job->exp->name, job->pass + 1, job->passes, job->windows[job->pass]);
        }
    }
    else {
        size_t n = 3 * (size_t) field->nx * (size_t) field->ny;
        unsigned char *sb = s_stress_bytes (stress, n);
        if (!sb)
            s_end (self, job, "no memory", NULL, 0, NULL, 0, -1);
        else
            s_end (self, job, NULL, bytes, size, sb, n * 4, info.pairs);
        free (sb);
    }
    free (bytes);
    free (stress);
    piv_field_destroy (&field);
}

// A chunk's answer was no partial ('why'): it goes back to the queue, or,
// failed max_attempts times in this pass, fails its job.
static void
s_chunk_failed (ensemble_t *self, s_job_t *job, int c, const char *why)
{
    s_chunk_t *chunk = &job->chunks[c];
    chunk->state = S_QUEUED;
    chunk->holder[0] = '\0';
    if (++chunk->failures >= self->host.cfg->broker.max_attempts) {
        char error[1200];
        snprintf (error, sizeof error, "pass %d chunk %d failed %d times (last: %s)",
                  job->pass + 1, c, chunk->failures, why);
        s_end (self, job, error, NULL, 0, NULL, 0, -1);
    }
}

// 1 if 'msg' answers a chunk taken back from 'holder' past its deadline
// (the agent's slot is free again; the entry goes).
static int
s_late_answered (ensemble_t *self, const char *holder, const proto_msg_t *msg)
{
    for (s_late_t *late = zlistx_first (self->late); late; late = zlistx_next (self->late))
        if ((uint64_t) late->job == msg->seq && (uint32_t) late->pass == msg->count
            && (uint64_t) late->chunk == msg->pair && late->attempt == msg->attempt
            && strcmp (late->holder, holder) == 0) {
            zlistx_delete (self->late, zlistx_cursor (self->late));
            return 1;
        }
    return 0;
}

static int
s_cmp_ns (const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

// How long a chunk of 'job' may stay out (ensemble_deadlines).
static int64_t
s_deadline_ns (const ensemble_t *self, const s_job_t *job)
{
    const config_t *cfg = self->host.cfg;
    if (cfg->broker.task_deadline_ms > 0)
        return (int64_t) cfg->broker.task_deadline_ms * 1000000;
    int n = job->computes < 16 ? job->computes : 16;
    if (n == 0)
        return 600 * 1000000000LL;
    int64_t sorted[16];
    memcpy (sorted, job->compute_ns, (size_t) n * sizeof sorted[0]);
    qsort (sorted, (size_t) n, sizeof sorted[0], s_cmp_ns);
    int64_t d = 10 * sorted[n / 2], floor = (int64_t) cfg->broker.deadline_floor_ms * 1000000;
    return d > floor ? d : floor;
}

void
ensemble_held (ensemble_t *self, int64_t held_ns)
{
    for (s_job_t *job = zlistx_first (self->jobs); job; job = zlistx_next (self->jobs))
        for (int c = 0; c < job->nchunks; c++)
            if (job->chunks[c].state == S_OUT)
                job->chunks[c].sent_ns += held_ns;
}

void
ensemble_deadlines (ensemble_t *self, int64_t now)
{
    for (s_job_t *job = zlistx_first (self->jobs); job; job = zlistx_next (self->jobs)) {
        int64_t deadline = s_deadline_ns (self, job);
        for (int c = 0; c < job->nchunks; c++) {
            s_chunk_t *chunk = &job->chunks[c];
            if (chunk->state != S_OUT || now - chunk->sent_ns <= deadline)
                continue;
            s_late_t *late = calloc (1, sizeof *late);
            if (!late)
                return;  // tried again at the next heartbeat
            snprintf (late->holder, sizeof late->holder, "%s", chunk->holder);
            late->job = job->id;
            late->pass = job->pass;
            late->chunk = c;
            late->attempt = chunk->attempt;
            zlistx_add_end (self->late, late);
            log_warning ("ensemble job %" PRId64 " of '%s': pass %d chunk %d: deadline of %.0f s "
                         "passed on agent '%s': requeued for another agent",
                         job->id, job->exp->name, job->pass + 1, c, deadline / 1e9, chunk->agent);
            chunk->state = S_QUEUED;
            chunk->holder[0] = '\0';
        }
    }
}

int
ensemble_partial (ensemble_t *self, const char *holder, const char *agent, const proto_msg_t *msg,
                  int64_t now)
{
    s_job_t *job = NULL;
    for (s_job_t *j = zlistx_first (self->jobs); j && !job; j = zlistx_next (self->jobs))
        if ((uint64_t) j->id == msg->seq)
            job = j;
    if (!job || msg->count != (uint32_t) job->pass || msg->pair >= (uint64_t) job->nchunks) {
        int late = s_late_answered (self, holder, msg);
        log_info ("ensemble: PARTIAL of job %" PRIu64 " pass %" PRIu32 " chunk %" PRIu64
                  " from agent '%s' dropped: no such chunk is waiting (a late copy)",
                  msg->seq, msg->count, msg->pair, agent);
        return late;
    }
    int c = (int) msg->pair;
    s_chunk_t *chunk = &job->chunks[c];
    // 'holds': the chunk is out with this agent now; 'held': its slot
    // frees (that, or a chunk taken back from it past its deadline).
    int holds = chunk->state == S_OUT && strcmp (chunk->holder, holder) == 0
                && chunk->attempt == msg->attempt;
    int held = holds | s_late_answered (self, holder, msg);
    if (chunk->state == S_DONE) {
        log_info ("ensemble job %" PRId64 ": pass %d chunk %d from agent '%s' dropped: "
                  "recorded already",
                  job->id, job->pass + 1, c, agent);
        return held;
    }
    int first = c * ENSEMBLE_CHUNK, end = first + ENSEMBLE_CHUNK;
    if (end > job->npairs)
        end = job->npairs;
    char why[1024] = "";
    if (msg->text && *msg->text)
        snprintf (why, sizeof why, "agent '%s': %s", agent, msg->text);
    else {
        // Bytes from the wire: decoded (every size checked) before they are
        // kept, and what they hold must be this chunk of this pass.
        char derr[768];
        piv_ensemble_t *part = piv_ensemble_decode (msg->blob, msg->blob_size, derr, sizeof derr);
        piv_ensemble_info_t info;
        if (!part)
            snprintf (why, sizeof why, "agent '%s' sent a bad partial: %s", agent, derr);
        else {
            piv_ensemble_info (part, &info);
            if (info.window != job->windows[job->pass] || info.pairs != end - first)
                snprintf (why, sizeof why,
                          "agent '%s' sent a partial of %d px windows over %" PRId64
                          " pair(s), the chunk is %d px over %d",
                          agent, info.window, info.pairs, job->windows[job->pass], end - first);
        }
        piv_ensemble_destroy (&part);
    }
    if (*why) {
        log_warning ("ensemble job %" PRId64 " of '%s': pass %d chunk %d (pairs %d-%d): %s",
                     job->id, job->exp->name, job->pass + 1, c, first + 1, end, why);
        // Only the holder's answer counts against the chunk: another
        // agent's (a late copy) cannot fail a job by repeating errors.
        if (holds)
            s_chunk_failed (self, job, c, why);
        return held;
    }
    int recorded = 0;
    if (store_ensemble_partial (self->host.store, job->id, job->pass, c, end - first, agent,
                                msg->blob, msg->blob_size, now, &recorded)
        != 0) {
        log_error ("ensemble job %" PRId64 ": cannot record pass %d chunk %d: %s (it is "
                   "computed again)",
                   job->id, job->pass + 1, c, store_error (self->host.store));
        if (holds) {
            chunk->state = S_QUEUED;
            chunk->holder[0] = '\0';
        }
        return held;
    }
    chunk->state = S_DONE;
    chunk->holder[0] = '\0';
    if (msg->time_ns > 0)
        job->compute_ns[job->computes++ % 16] = msg->time_ns;
    if (++job->done == job->nchunks)
        s_pass_done (self, job);
    return held;
}

void
ensemble_lost (ensemble_t *self, const char *holder, const char *reason)
{
    // Its slots go with it.
    for (s_late_t *late = zlistx_first (self->late); late; late = zlistx_next (self->late))
        if (strcmp (late->holder, holder) == 0)
            zlistx_delete (self->late, zlistx_cursor (self->late));
    for (s_job_t *job = zlistx_first (self->jobs); job; job = zlistx_next (self->jobs))
        for (int c = 0; c < job->nchunks; c++) {
            s_chunk_t *chunk = &job->chunks[c];
            if (chunk->state == S_OUT && strcmp (chunk->holder, holder) == 0) {
                log_notice ("ensemble job %" PRId64 ": pass %d chunk %d back in the queue: its "
                            "agent %s",
                            job->id, job->pass + 1, c, reason);
                chunk->state = S_QUEUED;
                chunk->holder[0] = '\0';
            }
        }
}

// ---------------------------------------------------------------------------
// Standing settings

int
ensemble_standing_set (exp_t *exp, const char *value, char *text, size_t size, char *err,
                       size_t errlen)
{
    if (!value) {
        exp->ensemble.window = 0;
        if (text && size)
            *text = '\0';
        return 0;
    }
    int v[3] = {8, 50, 30};
    static const char *keys[3] = {"window", "overlap", "idle"};
    static const int lo[3] = {4, 0, 1}, hi[3] = {1024, 90, 86400};
    char copy[256];
    snprintf (copy, sizeof copy, "%s", value);
    for (char *save, *w = strtok_r (copy, " ", &save); w; w = strtok_r (NULL, " ", &save)) {
        char *eq = strchr (w, '='), *end = NULL;
        int k = -1;
        for (int i = 0; eq && i < 3; i++)
            if ((size_t) (eq - w) == strlen (keys[i]) && strncmp (w, keys[i], strlen (keys[i])) == 0)
                k = i;
        long n = k >= 0 ? strtol (eq + 1, &end, 10) : 0;
        if (k < 0 || end == eq + 1 || *end || n < lo[k] || n > hi[k]) {
            snprintf (err, errlen, "bad standing ensemble word '%.100s': expected window=4..1024 "
                      "(px), overlap=0..90 (%%), idle=1..86400 (s)", w);
            return -1;
        }
        v[k] = (int) n;
    }
    int passes[S_MAX_PASSES];
    if (piv_ensemble_passes (v[0], passes, S_MAX_PASSES) <= 0) {
        snprintf (err, errlen, "bad window '%d': the engine cannot correlate windows of %d px",
                  v[0], v[0]);
        return -1;
    }
    exp->ensemble = (exp_ensemble_t) {.window = v[0], .overlap = v[1], .idle_s = v[2]};
    if (text)
        snprintf (text, size, "window=%d overlap=%d idle=%d", v[0], v[1], v[2]);
    return 0;
}

typedef struct {
    int64_t waiting, done;
} s_states_t;

static int
s_count_state (void *arg, int64_t pair, int state, const char *a, const char *b, int stereo)
{
    (void) pair, (void) a, (void) b, (void) stereo;
    s_states_t *n = arg;
    n->waiting += state == STORE_PENDING || state == STORE_DISPATCHED;
    n->done += state == STORE_DONE;
    return 0;
}

#define S_CHECK_EVERY_NS (5 * 1000000000LL)  // a quiet experiment's pairs counted this often

int
ensemble_tick (ensemble_t *self, zhashx_t *experiments, int64_t now)
{
    int started = 0;
    for (exp_t *exp = zhashx_first (experiments); exp; exp = zhashx_next (experiments)) {
        exp_ensemble_t *st = &exp->ensemble;
        if (st->window <= 0 || now < st->next_check_ns || s_job_of (self, exp))
            continue;
        if (exp->in.last_file_ns > 0 && now - exp->in.last_file_ns < st->idle_s * 1000000000LL)
            continue;
        st->next_check_ns = now + S_CHECK_EVERY_NS;
        s_states_t n = {0};
        if (store_pair_frames (self->host.store, exp->id, s_count_state, &n) < 0)
            continue;
        if (n.waiting > 0 || n.done == 0)
            continue;  // the run's pairs are not all in yet
        // What its latest job covered: a job over the pairs done, as many
        // as now (done or failed: a failed one waits for new pairs).
        store_ensemble_t last;
        int found = store_ensemble_latest (self->host.store, exp->id, 0, &last);
        int covered = found == 1 && last.asked && !*last.asked && last.pairs >= n.done;
        if (found == 1)
            store_ensemble_release (&last);
        if (found < 0 || covered)
            continue;
        char err[1024];
        int64_t job = ensemble_start (self, exp, st->window, st->overlap, NULL, now, err,
                                      sizeof err);
        if (job < 0)
            log_warning ("standing ensemble of '%s': cannot start a job: %s", exp->name, err);
        else {
            log_notice ("standing ensemble of '%s': quiet for %d s with %" PRId64
                        " pair(s) done: job %" PRId64,
                        exp->name, st->idle_s, n.done, job);
            started++;
        }
    }
    return started;
}

void
ensemble_put_running (ensemble_t *self, const exp_t *exp, text_t *t)
{
    s_job_t *job = s_job_of (self, exp);
    text_put (t, ",\"ensemble\":");
    if (!job) {
        text_put (t, "null");
        return;
    }
    text_put (t,
              "{\"job\":%" PRId64 ",\"pass\":%d,\"passes\":%d,\"window\":%d,\"pairs\":%d,"
              "\"chunks\":%d,\"chunks_done\":%d}",
              job->id, job->pass + 1, job->passes, job->windows[job->pass], job->npairs,
              job->nchunks, job->done);
}

int
ensemble_put_status (ensemble_t *self, exp_t *exp, text_t *t)
{
    store_ensemble_t rec;
    int found = store_ensemble_latest (self->host.store, exp->id, 0, &rec);
    if (found < 0)
        return -1;
    if (!found) {
        text_put (t, "null");
        return 0;
    }
    s_job_t *job = s_job_of (self, exp);
    text_put (t, "{\"job\":%" PRId64 ",\"state\":", rec.id);
    text_put_string (t, rec.state);
    text_put (t, ",\"window\":%d,\"overlap\":%d,\"pairs\":%" PRId64 ",\"counted\":",
              rec.window, rec.overlap, rec.pairs);
    if (rec.counted >= 0)
        text_put (t, "%" PRId64, rec.counted);
    else
        text_put (t, "null");
    text_put (t, ",\"asked\":");
    text_put_string (t, rec.asked ? rec.asked : "");
    // A job that ended is read from the store alone: every chunk of its
    // last pass in when done.
    int chunks = rec.chunk > 0 ? (int) ((rec.pairs + rec.chunk - 1) / rec.chunk) : 0;
    int done = strcmp (rec.state, "done") == 0 ? chunks : 0;
    text_put (t, ",\"passes\":%d,\"pass\":%d,\"chunks\":%d,\"chunks_done\":%d,\"chunk\":%d",
              rec.passes, (job ? job->pass : rec.pass) + 1, job ? job->nchunks : chunks,
              job ? job->done : done, rec.chunk);
    text_put (t, ",\"error\":");
    if (rec.error)
        text_put_string (t, rec.error);
    else
        text_put (t, "null");
    text_put (t, ",\"created_ns\":%" PRId64 ",\"finished_ns\":%" PRId64 "}", rec.created_ns,
              rec.finished_ns);
    store_ensemble_release (&rec);
    return 0;
}
