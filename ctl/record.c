// record.c — what pivctl reads from the store itself, not through the
// broker: the store opened read-only (store_open_readonly) for export.c
// and stats.c, and the comparison of a replay with its original.

#include "ctl/ctl.h"

#include "common/path.h"
#include "common/proto.h"
#include "piv/field.h"
#include "store/store.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMPARE_BUDGET (256u << 20) // bytes of original fields held at once by the comparison

int
ctl_mkdirs (const char *path, char *err, size_t errlen)
{
    char buf[PATH_MAX];
    if (snprintf (buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        snprintf (err, errlen, "path too long: '%s'", path);
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        struct stat st;
        if (mkdir (buf, 0777) != 0 && errno != EEXIST) {
            snprintf (err, errlen, "cannot create '%s': %s", buf, strerror (errno));
            return -1;
        }
        if (stat (buf, &st) != 0) {
            snprintf (err, errlen, "cannot create '%s': %s", buf, strerror (errno));
            return -1;
        }
        if (!S_ISDIR (st.st_mode)) {
            snprintf (err, errlen, "cannot create '%s': a file of that name is in the way", buf);
            return -1;
        }
        *p = c;
        if (c == '\0')
            return 0;
    }
}

int
ctl_mkdirs_parent (const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    if (snprintf (dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        snprintf (err, errlen, "path too long: '%s'", path);
        return -1;
    }
    char *slash = strrchr (dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    return ctl_mkdirs (dir, err, errlen);
}

store_t *
ctl_open_store (ctl_t *ctl, const char *name, int64_t *experiment)
{
    char err[1024];
    store_t *store = store_open_readonly (ctl->cfg.broker.store, err, sizeof err);
    if (!store) {
        ctl_error ("%s", err);
        return NULL;
    }
    store_experiment_t found;
    int rc = store_experiment_find (store, name, &found);
    if (rc != 1) {
        if (rc == 0)
            ctl_error ("no experiment '%s' in the store '%s'", name, ctl->cfg.broker.store);
        else
            ctl_error ("cannot read the store '%s': %s", ctl->cfg.broker.store,
                       store_error (store));
        store_destroy (&store);
        return NULL;
    }
    *experiment = found.id;
    return store;
}

int
ctl_stem_file (const char *stem, int64_t pair, const char *ext, char *buf, size_t size, char *why,
               size_t whylen)
{
    size_t n = strlen (stem);
    int len = n == 0 || stem[n - 1] == '/'
                  ? snprintf (buf, size, "%spair-%" PRId64 ".%s", stem, pair, ext)
                  : snprintf (buf, size, "%s.%s", stem, ext);
    if (len < 0 || (size_t)len >= size) {
        snprintf (why, whylen, "%d bytes, over the %zu it may have", len, size - 1);
        return -1;
    }
    return path_check_relative (buf, why, whylen);
}

// A stem seen in the original, the replay or both.
typedef struct {
    int in_original, in_replay; // where it was seen
    unsigned char *field;       // the original's stored field, while its chunk is compared
    size_t field_size;          // its bytes
} s_stem_t;

typedef struct {
    zhashx_t *stems;       // stem -> s_stem_t
    int replay;            // listing the replay's pairs (else the original's)
    long index, skip;      // results of the original: seen so far, to skip (done before)
    size_t held;           // bytes of fields held
    long held_count;       // fields held
    int full;              // the chunk is full: list again from 'index'
    long compared;         // pairs whose fields were compared
    long grid_differs;     // of them, fields on different grids
    double max_difference; // max (|du|, |dv|, a stereo pair's |dw|) over them
    const char *error;     // the first unreadable field
} s_compare_t;

static void
s_stem_destroy (void **item)
{
    s_stem_t *stem = *item;
    if (stem)
        free (stem->field);
    free (stem);
    *item = NULL;
}

static int
s_note_pair (void *arg, const store_pair_info_t *p)
{
    s_compare_t *c = arg;
    s_stem_t *stem = zhashx_lookup (c->stems, p->stem);
    if (!stem) {
        stem = calloc (1, sizeof *stem);
        if (!stem)
            return 1;
        zhashx_insert (c->stems, p->stem, stem);
    }
    if (c->replay)
        stem->in_replay = 1;
    else
        stem->in_original = 1;
    return 0;
}

// Holds the fields of the original's results from 'skip' on, up to the budget.
static int
s_hold_field (void *arg, const store_result_info_t *r)
{
    s_compare_t *c = arg;
    if (c->index++ < c->skip)
        return 0;
    if (c->held_count > 0 && c->held + r->field_size > COMPARE_BUDGET) {
        c->index--;
        c->full = 1;
        return 1;
    }
    s_stem_t *stem = zhashx_lookup (c->stems, r->stem);
    if (!stem || !stem->in_replay || !r->field || !r->field_size)
        return 0;
    stem->field = malloc (r->field_size);
    if (!stem->field)
        return 1;
    memcpy (stem->field, r->field, r->field_size);
    stem->field_size = r->field_size;
    c->held += r->field_size;
    c->held_count++;
    return 0;
}

// Compares a result of the replay with the original's field held for it.
static int
s_compare_field (void *arg, const store_result_info_t *r)
{
    s_compare_t *c = arg;
    s_stem_t *stem = zhashx_lookup (c->stems, r->stem);
    if (!stem || !stem->field || !r->field || !r->field_size)
        return 0;
    char err[256];
    piv_field_t *a = piv_field_decode (stem->field, stem->field_size, err, sizeof err);
    piv_field_t *b = piv_field_decode (r->field, r->field_size, err, sizeof err);
    if (a && b && (a->nx != b->nx || a->ny != b->ny))
        c->grid_differs++;
    else if (a && b) {
        for (int k = 0; k < a->nx * a->ny; k++) {
            double d = fmax (fabs (a->u[k] - b->u[k]), fabs (a->v[k] - b->v[k]));
            if (a->w && b->w) // stereo: the third component differs as much
                d = fmax (d, fabs (a->w[k] - b->w[k]));
            if (d > c->max_difference) // NaN (both vectors invalid) compares false
                c->max_difference = d;
        }
    }
    else if (!c->error)
        c->error = "a stored field is unreadable";
    if (a && b)
        c->compared++;
    piv_field_destroy (&a);
    piv_field_destroy (&b);
    free (stem->field);
    stem->field = NULL;
    stem->field_size = 0;
    return 0;
}

// The arrival times of an experiment's files, in arrival order.
typedef struct {
    char **names;     // file names
    int64_t *seen_ns; // when the broker saw them
    size_t count, size;
} s_files_t;

static int
s_note_file (void *arg, int64_t file, const char *name, int64_t size, int64_t mtime_ns,
             int64_t seen_ns)
{
    (void)file, (void)size, (void)mtime_ns;
    s_files_t *f = arg;
    if (f->count == f->size) {
        size_t grown = f->size ? 2 * f->size : 1024;
        char **names = realloc (f->names, grown * sizeof (char *));
        if (names)
            f->names = names;
        int64_t *seen = names ? realloc (f->seen_ns, grown * sizeof (int64_t)) : NULL;
        if (!seen)
            return 1;
        f->seen_ns = seen;
        f->size = grown;
    }
    if (!(f->names[f->count] = strdup (name)))
        return 1;
    f->seen_ns[f->count++] = seen_ns;
    return 0;
}

static void
s_files_release (s_files_t *f)
{
    for (size_t i = 0; i < f->count; i++)
        free (f->names[i]);
    free (f->names);
    free (f->seen_ns);
    memset (f, 0, sizeof *f);
}

// The pacing of the replay against the original into r's pacing figures:
// files matched by name, intervals from the first matched file, expected
// (t_i - t_0) / speed.
static void
s_pacing (const s_files_t *original, const s_files_t *replay, double speed, ctl_compare_t *p)
{
    p->files = 0;
    p->expected_s = p->actual_s = 0;
    p->error_percent = p->max_deviation_ms = NAN;
    zhashx_t *seen = zhashx_new (); // name -> index in replay + 1
    for (size_t i = 0; seen && i < replay->count; i++)
        zhashx_insert (seen, replay->names[i], (void *)(uintptr_t)(i + 1));
    int64_t t0 = 0, r0 = 0;
    for (size_t i = 0; seen && i < original->count; i++) {
        uintptr_t k = (uintptr_t)zhashx_lookup (seen, original->names[i]);
        if (!k)
            continue;
        int64_t t = original->seen_ns[i], r = replay->seen_ns[k - 1];
        if (p->files++ == 0) {
            t0 = t;
            r0 = r;
            p->max_deviation_ms = 0;
        }
        double expected = isnan (speed) ? 0 : (t - t0) / 1e9 / speed;
        double actual = (r - r0) / 1e9;
        p->max_deviation_ms = fmax (p->max_deviation_ms, fabs (actual - expected) * 1e3);
        p->expected_s = expected;
        p->actual_s = actual;
    }
    if (p->expected_s > 0)
        p->error_percent = (p->actual_s - p->expected_s) / p->expected_s * 100;
    zhashx_destroy (&seen);
}

// Reads from the store what the comparison needs: the stems of both, the
// fields of both (the original's held chunk by chunk, each chunk compared
// with one listing of the replay's) and the files of both. As
// store_pairs_of: < 0 on a store error.
static int
s_gather (store_t *store, int64_t original, int64_t replay, s_compare_t *c, s_files_t *fo,
          s_files_t *fr)
{
    int rc = store_pairs_of (store, original, -1, 0, INT_MAX, s_note_pair, c);
    c->replay = 1;
    if (rc >= 0)
        rc = store_pairs_of (store, replay, -1, 0, INT_MAX, s_note_pair, c);
    while (rc >= 0) {
        c->index = 0;
        c->held = 0;
        c->held_count = 0;
        c->full = 0;
        rc = store_results_of (store, original, s_hold_field, c);
        if (rc >= 0 && c->held_count)
            rc = store_results_of (store, replay, s_compare_field, c);
        if (!c->full)
            break;
        c->skip = c->index;
    }
    if (rc >= 0)
        rc = store_files_of (store, original, s_note_file, fo);
    if (rc >= 0)
        rc = store_files_of (store, replay, s_note_file, fr);
    return rc;
}

// The report of what c found (r's pacing already in): the stems in one
// experiment alone listed in r->missing (NULL without memory: then none
// listed). Prints it as text or JSON.
static void
s_report (ctl_t *ctl, s_compare_t *c, ctl_compare_t *r)
{
    size_t n = zhashx_size (c->stems);
    r->missing = calloc (n ? n : 1, sizeof *r->missing);
    for (s_stem_t *s = zhashx_first (c->stems); s; s = zhashx_next (c->stems)) {
        r->matched += s->in_original && s->in_replay;
        if (s->in_original == s->in_replay)
            continue;
        if (r->missing)
            r->missing[r->nmissing++] = (ctl_missing_t){zhashx_cursor (c->stems), s->in_replay};
        r->only_original += s->in_original;
        r->only_replay += s->in_replay;
    }
    r->compared = c->compared;
    r->grid_differs = c->grid_differs;
    r->max_difference = c->compared ? c->max_difference : NAN;
    if (ctl->json)
        ctl_json_compare (r);
    else
        ctl_print_compare (r);
    free (r->missing);
    r->missing = NULL;
}

int
ctl_compare (ctl_t *ctl, const char *of, const char *name, double speed)
{
    int64_t original, replay;
    store_t *store = ctl_open_store (ctl, name, &replay);
    if (!store)
        return EXIT_FAILED;
    store_experiment_t found;
    if (store_experiment_find (store, of, &found) != 1) {
        ctl_error ("no experiment '%s' in the store '%s'", of, ctl->cfg.broker.store);
        store_destroy (&store);
        return EXIT_FAILED;
    }
    original = found.id;
    s_compare_t c = {.stems = zhashx_new ()};
    zhashx_set_destructor (c.stems, s_stem_destroy);
    s_files_t fo = {0}, fr = {0};
    int rc = s_gather (store, original, replay, &c, &fo, &fr);
    if (rc < 0)
        ctl_error ("cannot compare '%s' with '%s' in the store '%s': %s", name, of,
                   ctl->cfg.broker.store, store_error (store));
    else {
        ctl_compare_t report = {.of = of, .as = name, .speed = speed};
        s_pacing (&fo, &fr, speed, &report);
        s_report (ctl, &c, &report);
        if (c.error)
            ctl_error ("%s (pair fields that could not be decoded were left out)", c.error);
    }
    s_files_release (&fo);
    s_files_release (&fr);
    zhashx_destroy (&c.stems);
    store_destroy (&store);
    return rc < 0 ? EXIT_FAILED : EXIT_OK;
}
