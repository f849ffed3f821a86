// pairing.c — pairing rules: which files of an experiment make a pair.
// Files wait in one hash per pairing.c instance, keyed by experiment and
// stem (ab) or experiment, prefix and frame number (sequence, sliding).
// At most pairing/max_waiting files of one experiment wait: past that the
// oldest is forgotten, with a warning (at most one per experiment in
// S_WARN_EVERY_S, counting those it stands for).

#include "broker/pairing.h"
#include "common/log.h"
#include "common/util.h"

#include <czmq.h>
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_EXTENSIONS 16
#define S_WARN_EVERY_S 10.0  // warnings of forgotten files, per experiment
// Bytes of a key: an experiment's name and a file's, as long as the codec
// lets them be (common/path.h), with the separators and a frame number.
// Every name the farm takes pairs: no limit of its own here.
#define S_KEY_MAX (NAME_MAX + PATH_MAX + 32)

struct _pairing_t {
    pairing_rule_t rule;                  // the rule of experiments without their own
    pairing_rule_t configured;            // pairing/rule: what the default goes back to
    zhashx_t *rules;                      // experiment -> its own rule + 1 (a pointer-sized
                                          // integer), for those that have one
    char a_suffix[32], b_suffix[32];      // ab: frame A and B suffixes
    int ignore_case;                      // suffixes and extensions ignore case
    char extensions[MAX_EXTENSIONS][16];  // accepted extensions, without the dot
    int nextensions;                      // entries used in extensions
    zhashx_t *waiting;                    // key -> s_frame_t, files waiting for a partner
    zhashx_t *frames;                     // sliding: key -> s_frame_t
    zhashx_t *queues;                     // experiment -> s_queue_t: its waiting files by age
    size_t max_waiting;                   // files of one experiment that may wait
    char cameras[CONFIG_STRING];          // stereo: the default camera folders "cam1,cam2"
    char cameras_configured[CONFIG_STRING];  // pairing/cameras: what the default goes back to
    zhashx_t *folders;                    // experiment -> its own camera folders (strings)
};

// The files of one experiment that wait (in 'waiting' or 'frames'), oldest
// first, and the warnings about those forgotten; the files the rule refused.
typedef struct {
    zlistx_t *keys;      // their keys (strings), oldest first
    size_t dropped;      // forgotten since the last warning
    double warned;       // when it was (util_now), 0: never
    size_t refused;      // files refused (pairing_unpaired)
    int nrefused;        // entries used in refused_files
    pairing_note_t refused_files[PAIRING_SHOWN];  // the first ones refused
} s_queue_t;

// A file waiting for its partner, or (sliding) for its neighbours.
typedef struct {
    char *name;          // file name
    int64_t id;          // the caller's id of it
    int met;             // sliding: 1 met frame n - 1, 2 met n + 1
    s_queue_t *queue;    // its experiment's queue (NULL: none)
    void *handle;        // its key's place in the queue
} s_frame_t;

static s_frame_t *
s_frame_new (const char *name, int64_t id)
{
    s_frame_t *self = calloc (1, sizeof *self);
    if (self && !(self->name = strdup (name))) {
        free (self);
        self = NULL;
    }
    if (self)
        self->id = id;
    return self;
}

// Also takes its key out of its experiment's queue: a frame leaves the
// queue whenever it leaves its hash.
static void
s_frame_destroy (s_frame_t **self_p)
{
    if (self_p && *self_p) {
        if ((*self_p)->queue && (*self_p)->handle)
            zlistx_delete ((*self_p)->queue->keys, (*self_p)->handle);
        free ((*self_p)->name);
        free (*self_p);
        *self_p = NULL;
    }
}

static void
s_queue_destroy (s_queue_t **self_p)
{
    if (self_p && *self_p) {
        zlistx_destroy (&(*self_p)->keys);
        free (*self_p);
        *self_p = NULL;
    }
}

static void
s_key_free (void **item)
{
    free (*item);
    *item = NULL;
}

// The caller's emit refused a pair (its store write failed): -2, and why.
static int
s_emit_failed (const char *name, char *err, size_t errlen)
{
    snprintf (err, errlen, "cannot record the pair of '%s'", name);
    return -2;
}

pairing_t *
pairing_new (const config_t *cfg, char *err, size_t errlen)
{
    const pairing_rule_info_t *rule = pairing_rule_find (cfg->pairing.rule);
    if (!rule) {
        char expected[128];
        snprintf (err, errlen, "bad pairing/rule '%s': expected %s", cfg->pairing.rule,
                  util_join (pairing_rule_choice, ", ", " or ", expected, sizeof expected));
        return NULL;
    }
    if (rule->suffixes
        && (!*cfg->pairing.a_suffix || !*cfg->pairing.b_suffix
            || strcmp (cfg->pairing.a_suffix, cfg->pairing.b_suffix) == 0)) {
        snprintf (err, errlen, "bad pairing suffixes '%s' and '%s': two different, non-empty",
                  cfg->pairing.a_suffix, cfg->pairing.b_suffix);
        return NULL;
    }
    char folders[2][NAME_MAX + 1];
    if (pairing_rule_cameras (cfg->pairing.cameras, folders, err, errlen) != 0)
        return NULL;
    pairing_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "cannot make pairing rules: out of memory");
        return NULL;
    }
    self->rule = self->configured = rule->rule;
    snprintf (self->cameras, sizeof self->cameras, "%s", cfg->pairing.cameras);
    snprintf (self->cameras_configured, sizeof self->cameras_configured, "%s",
              cfg->pairing.cameras);
    snprintf (self->a_suffix, sizeof self->a_suffix, "%s", cfg->pairing.a_suffix);
    snprintf (self->b_suffix, sizeof self->b_suffix, "%s", cfg->pairing.b_suffix);
    self->ignore_case = cfg->pairing.ignore_case;
    char list[CONFIG_STRING];
    snprintf (list, sizeof list, "%s", cfg->pairing.extensions);
    for (char *save, *tok = strtok_r (list, ", ", &save); tok && self->nextensions < MAX_EXTENSIONS;
         tok = strtok_r (NULL, ", ", &save))
        snprintf (self->extensions[self->nextensions++], 16, "%s", tok[0] == '.' ? tok + 1 : tok);
    self->max_waiting = cfg->pairing.max_waiting > 0 ? (size_t) cfg->pairing.max_waiting : 100000;
    self->waiting = zhashx_new ();
    self->frames = zhashx_new ();
    self->queues = zhashx_new ();
    self->rules = zhashx_new ();
    self->folders = zhashx_new ();
    if (!self->waiting || !self->frames || !self->queues || !self->rules || !self->folders) {
        pairing_destroy (&self);
        snprintf (err, errlen, "cannot make pairing rules: out of memory");
        return NULL;
    }
    zhashx_set_destructor (self->waiting, (zhashx_destructor_fn *) s_frame_destroy);
    zhashx_set_destructor (self->frames, (zhashx_destructor_fn *) s_frame_destroy);
    zhashx_set_destructor (self->queues, (zhashx_destructor_fn *) s_queue_destroy);
    zhashx_set_destructor (self->folders, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_duplicator (self->folders, (zhashx_duplicator_fn *) strdup);
    return self;
}

void
pairing_destroy (pairing_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    // The frames first: they leave their queues as they go.
    zhashx_destroy (&(*self_p)->waiting);
    zhashx_destroy (&(*self_p)->frames);
    zhashx_destroy (&(*self_p)->queues);
    zhashx_destroy (&(*self_p)->rules);
    zhashx_destroy (&(*self_p)->folders);
    free (*self_p);
    *self_p = NULL;
}

static int
s_equal (const pairing_t *self, const char *a, const char *b, size_t n)
{
    return self->ignore_case ? strncasecmp (a, b, n) == 0 : strncmp (a, b, n) == 0;
}

// The length of 'name' without its extension, or 0 if the extension is not
// one of the rule's.
static size_t
s_base_length (const pairing_t *self, const char *name)
{
    const char *dot = strrchr (name, '.'), *slash = strrchr (name, '/');
    if (!dot || dot == name || (slash && dot < slash) || (slash && dot == slash + 1))
        return 0;
    for (int i = 0; i < self->nextensions; i++)
        if (strlen (dot + 1) == strlen (self->extensions[i])
            && s_equal (self, dot + 1, self->extensions[i], strlen (dot + 1)))
            return (size_t) (dot - name);
    return 0;
}

// Keys are "experiment" 0x1f "rest"; pairing_offer refuses names holding
// 0x1e or 0x1f, so keys of different files cannot collide.
static void
s_key (char *key, size_t len, const char *experiment, const char *rest)
{
    // snprintf (key, len, "%s\x1f%s", experiment, rest), without its cost
    // on the hot path (two keys a file).
    size_t le = strlen (experiment), lr = strlen (rest);
    if (le + 1 + lr >= len) {
        snprintf (key, len, "%s\x1f%s", experiment, rest);
        return;
    }
    memcpy (key, experiment, le);
    key[le] = '\x1f';
    memcpy (key + le + 1, rest, lr + 1);
}

// The queue of 'experiment', made when new (NULL: no memory).
static s_queue_t *
s_queue_of (pairing_t *self, const char *experiment)
{
    s_queue_t *queue = zhashx_lookup (self->queues, experiment);
    if (!queue) {
        queue = calloc (1, sizeof *queue);
        if (queue && !(queue->keys = zlistx_new ()))
            s_queue_destroy (&queue);
        if (queue) {
            zlistx_set_destructor (queue->keys, s_key_free);
            zhashx_insert (self->queues, experiment, queue);
        }
    }
    return queue;
}

void
pairing_refuse (pairing_t *self, const char *experiment, const char *name, const char *why)
{
    s_queue_t *queue = s_queue_of (self, experiment);
    if (!queue)
        return;
    queue->refused++;
    if (queue->nrefused < PAIRING_SHOWN) {
        pairing_note_t *note = &queue->refused_files[queue->nrefused++];
        util_shorten (name, note->name, sizeof note->name);
        snprintf (note->why, sizeof note->why, "%s", why);
    }
}

// A refusal of 'name' (-1): err is "'NAME' WHY" (the name shortened), and
// the file is counted as refused with WHY.
static int
s_refuse (pairing_t *self, const char *experiment, const char *name, char *err, size_t errlen,
          const char *format, ...)
{
    char why[320], shown[UTIL_SHOWN];
    va_list args;
    va_start (args, format);
    vsnprintf (why, sizeof why, format, args);
    va_end (args);
    snprintf (err, errlen, "'%s' %s", util_shorten (name, shown, sizeof shown), why);
    pairing_refuse (self, experiment, name, why);
    return -1;
}

// Puts 'frame' (a file of 'experiment' that waits) into 'hash' under 'key'
// and at the end of its experiment's queue; when that holds max_waiting
// files already, the oldest is forgotten first (a rate-limited warning
// names it and the bound). Takes 'frame' (NULL: no memory, nothing waits).
static void
s_wait (pairing_t *self, zhashx_t *hash, const char *experiment, const char *key,
        s_frame_t *frame)
{
    if (!frame)
        return;
    s_queue_t *queue = s_queue_of (self, experiment);
    while (queue && zlistx_size (queue->keys) >= self->max_waiting) {
        const char *oldest = zlistx_first (queue->keys);
        zhashx_t *in = zhashx_lookup (self->waiting, oldest) ? self->waiting : self->frames;
        s_frame_t *gone = zhashx_lookup (in, oldest);
        if (!gone) {  // cannot be: a key leaves with its frame
            zlistx_delete (queue->keys, zlistx_cursor (queue->keys));
            continue;
        }
        queue->dropped++;
        double now = util_now ();
        if (!queue->warned || now - queue->warned >= S_WARN_EVERY_S) {
            char shown[UTIL_SHOWN];
            log_warning ("experiment '%s': %zu file(s) wait for a partner, the bound "
                         "pairing/max_waiting: forgetting the oldest, '%s' (%zu forgotten "
                         "since the last warning)",
                         experiment, self->max_waiting, util_shorten (gone->name, shown, sizeof shown),
                         queue->dropped);
            queue->warned = now;
            queue->dropped = 0;
        }
        zhashx_delete (in, oldest);
    }
    if (queue) {
        char *copy = strdup (key);
        frame->queue = queue;
        frame->handle = copy ? zlistx_add_end (queue->keys, copy) : NULL;
        if (!frame->handle)
            free (copy), frame->queue = NULL;
    }
    zhashx_insert (hash, key, frame);
}

static int
s_offer_ab (pairing_t *self, const char *experiment, const char *name, int64_t id, size_t base,
            pairing_emit_fn *emit, void *arg, char *err, size_t errlen)
{
    size_t la = strlen (self->a_suffix), lb = strlen (self->b_suffix);
    int side = -1;
    size_t stem = 0;
    if (base > la && s_equal (self, name + base - la, self->a_suffix, la))
        side = 0, stem = base - la;
    else if (base > lb && s_equal (self, name + base - lb, self->b_suffix, lb))
        side = 1, stem = base - lb;
    if (side < 0)
        return s_refuse (self, experiment, name, err, errlen,
                         "does not fit pairing rule ab: expected <stem>%s or <stem>%s",
                         self->a_suffix, self->b_suffix);
    char stem_text[PATH_MAX], key[S_KEY_MAX];  // pairing_offer checked the name's length
    memcpy (stem_text, name, stem);
    stem_text[stem] = '\0';
    // The key folds case when the rule ignores it, so that run_A and run_b pair.
    char folded[PATH_MAX];
    for (size_t i = 0; i <= stem; i++)
        folded[i] = self->ignore_case ? (char) tolower ((unsigned char) stem_text[i]) : stem_text[i];
    char side_key[PATH_MAX + 2];
    memcpy (side_key, folded, stem);
    side_key[stem] = '\x1e';
    side_key[stem + 1] = side ? 'b' : 'a';
    side_key[stem + 2] = '\0';
    s_key (key, sizeof key, experiment, side_key);
    char other[S_KEY_MAX];
    side_key[stem + 1] = side ? 'a' : 'b';
    s_key (other, sizeof other, experiment, side_key);
    s_frame_t *partner = zhashx_lookup (self->waiting, other);
    if (!partner) {
        if (!zhashx_lookup (self->waiting, key))
            s_wait (self, self->waiting, experiment, key, s_frame_new (name, id));
        return 0;
    }
    // The partner leaves the table once emit has had its name.
    pairing_set_t set = {{side ? partner->name : name, side ? name : partner->name},
                         {side ? partner->id : id, side ? id : partner->id}};
    int rc = emit (arg, experiment, stem_text, &set);
    zhashx_delete (self->waiting, other);
    zhashx_delete (self->waiting, key);
    return rc < 0 ? s_emit_failed (name, err, errlen) : 1;
}

// Splits a base name into prefix and frame number (its trailing digits).
static int
s_frame_number (const char *name, size_t base, size_t *prefix, long long *number)
{
    size_t i = base;
    while (i > 0 && isdigit ((unsigned char) name[i - 1]))
        i--;
    if (i == base || base - i > 15)
        return -1;
    *prefix = i;
    *number = strtoll (name + i, NULL, 10);
    return 0;
}

// The key of frame 'number' with 'prefix' (prefix bytes of name).
static void
s_frame_key (char *key, size_t len, const char *experiment, const char *name, size_t prefix,
             long long number)
{
    snprintf (key, len, "%s\x1f%.*s\x1e%lld", experiment, (int) prefix, name, number);
}

// The stem of the pair whose frame A is 'name': its base name.
static int
s_emit_frames (pairing_emit_fn *emit, void *arg, const char *experiment, const char *name_a,
               int64_t id_a, const char *name_b, int64_t id_b, size_t base_a)
{
    char stem[PATH_MAX];
    snprintf (stem, sizeof stem, "%.*s", (int) base_a, name_a);
    pairing_set_t set = {{name_a, name_b}, {id_a, id_b}};
    return emit (arg, experiment, stem, &set);
}

static int
s_offer_frames (pairing_t *self, pairing_rule_t rule, const char *experiment, const char *name,
                int64_t id, size_t base, pairing_emit_fn *emit, void *arg, char *err,
                size_t errlen)
{
    size_t prefix;
    long long n;
    if (s_frame_number (name, base, &prefix, &n) != 0)
        return s_refuse (self, experiment, name, err, errlen,
                         "does not fit pairing rule %s: expected a frame number before the "
                         "extension (run_0001.tif)",
                         pairing_rule_get (rule)->name);
    char key[S_KEY_MAX];
    s_frame_key (key, sizeof key, experiment, name, prefix, n);
    if (zhashx_lookup (self->waiting, key) || zhashx_lookup (self->frames, key))
        return 0;  // offered again while waiting
    int emitted = 0;
    if (rule == PAIRING_SEQUENCE) {
        // Frames 1-2, 3-4, ...: an odd frame is A, the next one its B.
        long long partner_n = n % 2 ? n + 1 : n - 1;
        char pkey[S_KEY_MAX];
        s_frame_key (pkey, sizeof pkey, experiment, name, prefix, partner_n);
        s_frame_t *partner = zhashx_lookup (self->waiting, pkey);
        if (!partner) {
            s_wait (self, self->waiting, experiment, key, s_frame_new (name, id));
            return 0;
        }
        int rc = n % 2 ? s_emit_frames (emit, arg, experiment, name, id, partner->name,
                                        partner->id, s_base_length (self, name))
                       : s_emit_frames (emit, arg, experiment, partner->name, partner->id, name,
                                        id, s_base_length (self, partner->name));
        zhashx_delete (self->waiting, pkey);
        return rc < 0 ? s_emit_failed (name, err, errlen) : 1;
    }
    // Sliding: n pairs with n - 1 and n + 1. A frame waits, with a note of
    // which neighbours it has met, until it has met both (the first and the
    // last frame of a run wait for ever: one name per run, not per frame).
    s_frame_t *self_frame = s_frame_new (name, id);
    if (!self_frame) {
        char shown[UTIL_SHOWN];
        snprintf (err, errlen, "cannot pair '%s': out of memory",
                  util_shorten (name, shown, sizeof shown));
        return -1;
    }
    for (int side = -1; side <= 1; side += 2) {
        char nkey[S_KEY_MAX];
        s_frame_key (nkey, sizeof nkey, experiment, name, prefix, n + side);
        s_frame_t *neighbour = zhashx_lookup (self->frames, nkey);
        if (!neighbour)
            continue;
        int rc = side < 0 ? s_emit_frames (emit, arg, experiment, neighbour->name, neighbour->id,
                                           name, id, s_base_length (self, neighbour->name))
                          : s_emit_frames (emit, arg, experiment, name, id, neighbour->name,
                                           neighbour->id, s_base_length (self, name));
        if (rc < 0) {
            s_frame_destroy (&self_frame);
            return s_emit_failed (name, err, errlen);
        }
        emitted++;
        self_frame->met |= side < 0 ? 1 : 2;
        neighbour->met |= side < 0 ? 2 : 1;
        if (neighbour->met == 3)
            zhashx_delete (self->frames, nkey);
    }
    if (self_frame->met == 3)
        s_frame_destroy (&self_frame);
    else
        s_wait (self, self->frames, experiment, key, self_frame);
    return emitted;
}

// The camera folders of 'experiment': its own, else the default.
const char *
pairing_cameras (pairing_t *self, const char *experiment)
{
    const char *own = experiment && zhashx_size (self->folders)
                          ? zhashx_lookup (self->folders, experiment)
                          : NULL;
    return own ? own : self->cameras;
}

// Which frame of a stereo set 'name' is: 0, 1 camera 1's A, B; 2, 3
// camera 2's; -1 if it is none (not FOLDER/<stem>SUFFIX.EXT with FOLDER
// one of the two cameras'). *stem and *stem_len: the stem's place in name.
static int
s_stereo_slot (pairing_t *self, const char *experiment, const char *name, size_t base,
               size_t *stem, size_t *stem_len)
{
    char folders[2][NAME_MAX + 1], err[8];
    const char *slash = strchr (name, '/');
    if (!slash || strchr (slash + 1, '/')
        || pairing_rule_cameras (pairing_cameras (self, experiment), folders, err, sizeof err) != 0)
        return -1;
    size_t lf = (size_t) (slash - name);
    int cam = -1;
    for (int c = 0; c < 2 && cam < 0; c++)
        if (strlen (folders[c]) == lf && strncmp (name, folders[c], lf) == 0)
            cam = c;
    size_t la = strlen (self->a_suffix), lb = strlen (self->b_suffix), from = lf + 1;
    if (cam < 0 || base <= from)
        return -1;
    *stem = from;
    if (base - from > la && s_equal (self, name + base - la, self->a_suffix, la)) {
        *stem_len = base - la - from;
        return 2 * cam;
    }
    if (base - from > lb && s_equal (self, name + base - lb, self->b_suffix, lb)) {
        *stem_len = base - lb - from;
        return 2 * cam + 1;
    }
    return -1;
}

// The key of frame 'slot' of the stereo set of 'stem' (case folded when
// the rule ignores it).
static void
s_stereo_key (pairing_t *self, char *key, size_t len, const char *experiment, const char *stem,
              size_t stem_len, int slot)
{
    char rest[PATH_MAX + 3];
    for (size_t i = 0; i < stem_len; i++)
        rest[i] = self->ignore_case ? (char) tolower ((unsigned char) stem[i]) : stem[i];
    rest[stem_len] = '\x1e';
    rest[stem_len + 1] = (char) ('0' + slot);
    rest[stem_len + 2] = '\0';
    s_key (key, len, experiment, rest);
}

// Stereo: FOLDER/<stem>_a and _b of each camera folder make one set of
// four frames; each waits until the other three are there.
static int
s_offer_stereo (pairing_t *self, const char *experiment, const char *name, int64_t id,
                size_t base, pairing_emit_fn *emit, void *arg, char *err, size_t errlen)
{
    size_t stem, stem_len;
    int slot = s_stereo_slot (self, experiment, name, base, &stem, &stem_len);
    if (slot < 0) {
        char folders[2][NAME_MAX + 1];
        pairing_rule_cameras (pairing_cameras (self, experiment), folders, err, errlen);
        return s_refuse (self, experiment, name, err, errlen,
                         "does not fit pairing rule stereo: expected %s/<stem>%s or <stem>%s "
                         "(or the same in %s/)",
                         folders[0], self->a_suffix, self->b_suffix, folders[1]);
    }
    char keys[4][S_KEY_MAX];
    s_frame_t *frames[4] = {NULL};
    int present = 0;
    for (int k = 0; k < 4; k++) {
        s_stereo_key (self, keys[k], sizeof keys[k], experiment, name + stem, stem_len, k);
        if (k != slot && (frames[k] = zhashx_lookup (self->waiting, keys[k])))
            present++;
    }
    if (present < 3) {
        if (!zhashx_lookup (self->waiting, keys[slot]))
            s_wait (self, self->waiting, experiment, keys[slot], s_frame_new (name, id));
        return 0;
    }
    pairing_set_t set;
    for (int k = 0; k < 4; k++) {
        set.name[k] = k == slot ? name : frames[k]->name;
        set.id[k] = k == slot ? id : frames[k]->id;
    }
    // The stem as camera 1's frame A names it (its case, when ignored).
    char stem_text[PATH_MAX];
    size_t s0, l0;
    s_stereo_slot (self, experiment, set.name[0], s_base_length (self, set.name[0]), &s0, &l0);
    snprintf (stem_text, sizeof stem_text, "%.*s", (int) l0, set.name[0] + s0);
    int rc = emit (arg, experiment, stem_text, &set);
    for (int k = 0; k < 4; k++)
        if (k != slot)
            zhashx_delete (self->waiting, keys[k]);
    return rc < 0 ? s_emit_failed (name, err, errlen) : 1;
}

int
pairing_offer (pairing_t *self, const char *experiment, const char *name, int64_t id,
               pairing_emit_fn *emit, void *arg, char *err, size_t errlen)
{
    char shown[UTIL_SHOWN];
    if (strchr (experiment, '\x1f') || strchr (experiment, '\x1e') || strchr (name, '\x1f')
        || strchr (name, '\x1e'))
        return s_refuse (self, experiment, name, err, errlen,
                         "has a control character in its name");
    // The codec's limits (path_check_component, path_check_relative): what
    // passed them fits every key and stem here.
    size_t le = strlen (experiment), ln = strlen (name);
    if (le > NAME_MAX || ln >= PATH_MAX) {
        snprintf (err, errlen, "'%s' is %zu bytes long, over the %d %s allows",
                  util_shorten (le > NAME_MAX ? experiment : name, shown, sizeof shown),
                  le > NAME_MAX ? le : ln, le > NAME_MAX ? NAME_MAX : PATH_MAX - 1,
                  le > NAME_MAX ? "NAME_MAX" : "PATH_MAX");
        return -1;
    }
    size_t base = s_base_length (self, name);
    if (base == 0)
        return s_refuse (self, experiment, name, err, errlen,
                         "is not a frame: its extension is not one of '%s'",
                         self->nextensions ? self->extensions[0] : "");
    pairing_rule_t rule = pairing_rule_of (self, experiment)->rule;
    switch (rule) {
    case PAIRING_AB:
        return s_offer_ab (self, experiment, name, id, base, emit, arg, err, errlen);
    case PAIRING_SEQUENCE:
    case PAIRING_SLIDING:
        return s_offer_frames (self, rule, experiment, name, id, base, emit, arg, err, errlen);
    case PAIRING_STEREO:
        return s_offer_stereo (self, experiment, name, id, base, emit, arg, err, errlen);
    default: {
        char stem[PATH_MAX];
        snprintf (stem, sizeof stem, "%.*s", (int) base, name);
        pairing_set_t set = {{name}, {id}};
        return emit (arg, experiment, stem, &set) < 0 ? s_emit_failed (name, err, errlen) : 1;
    }
    }
}

static size_t
s_count (zhashx_t *hash, const char *experiment)
{
    size_t count = 0, len = strlen (experiment);
    for (void *item = zhashx_first (hash); item; item = zhashx_next (hash)) {
        const char *key = zhashx_cursor (hash);
        if (strncmp (key, experiment, len) == 0 && key[len] == '\x1f')
            count++;
    }
    return count;
}

size_t
pairing_waiting (pairing_t *self, const char *experiment)
{
    return s_count (self->waiting, experiment) + s_count (self->frames, experiment);
}

// What 'frame' (in no pair) waits for, into why: its partner's name (ab,
// sequence) or its neighbours' frame numbers (sliding).
static void
s_waits_for (pairing_t *self, const char *experiment, pairing_rule_t rule, const s_frame_t *frame,
             char *why, size_t size)
{
    const char *name = frame->name;
    size_t base = s_base_length (self, name), prefix, la = strlen (self->a_suffix),
           lb = strlen (self->b_suffix);
    long long n;
    char shown[UTIL_SHOWN], partner[PATH_MAX + 64];
    size_t stem, stem_len;
    int slot = rule == PAIRING_STEREO
                   ? s_stereo_slot (self, experiment, name, base, &stem, &stem_len)
                   : -1;
    if (slot >= 0) {
        // The first of the set's other frames that is not there.
        char folders[2][NAME_MAX + 1], key[S_KEY_MAX];
        partner[0] = '\0';
        pairing_rule_cameras (pairing_cameras (self, experiment), folders, why, size);
        for (int k = 0; k < 4; k++) {
            s_stereo_key (self, key, sizeof key, experiment, name + stem, stem_len, k);
            if (k == slot || zhashx_lookup (self->waiting, key))
                continue;
            snprintf (partner, sizeof partner, "%s/%.*s%s%s", folders[k / 2], (int) stem_len,
                      name + stem, k % 2 ? self->b_suffix : self->a_suffix, name + base);
            break;
        }
        snprintf (why, size, "waits for '%s' (a stereo set: four frames)",
                  util_shorten (partner, shown, sizeof shown));
    }
    else if (rule == PAIRING_AB) {
        int a = base > la && s_equal (self, name + base - la, self->a_suffix, la);
        size_t stem = base - (a ? la : lb);
        snprintf (partner, sizeof partner, "%.*s%s%s", (int) stem, name,
                  a ? self->b_suffix : self->a_suffix, name + base);
        snprintf (why, size, "waits for '%s'", util_shorten (partner, shown, sizeof shown));
    }
    else if (base && s_frame_number (name, base, &prefix, &n) == 0) {
        int digits = (int) (base - prefix);
        if (rule == PAIRING_SEQUENCE) {
            snprintf (partner, sizeof partner, "%.*s%0*lld%s", (int) prefix, name, digits,
                      n % 2 ? n + 1 : n - 1, name + base);
            snprintf (why, size, "waits for '%s'", util_shorten (partner, shown, sizeof shown));
        }
        else
            snprintf (why, size, "waits for frame %lld or %lld", n - 1, n + 1);
    }
    else
        snprintf (why, size, "waits for a partner");
}

void
pairing_unpaired (pairing_t *self, const char *experiment, pairing_unpaired_t *out)
{
    memset (out, 0, sizeof *out);
    s_queue_t *queue = zhashx_lookup (self->queues, experiment);
    if (!queue)
        return;
    pairing_rule_t rule = pairing_rule_of (self, experiment)->rule;
    out->refused = queue->refused;
    out->nrefused = queue->nrefused;
    memcpy (out->refused_files, queue->refused_files, sizeof out->refused_files);
    for (const char *key = zlistx_first (queue->keys); key; key = zlistx_next (queue->keys)) {
        s_frame_t *frame = zhashx_lookup (self->waiting, key);
        if (!frame)
            frame = zhashx_lookup (self->frames, key);
        if (!frame || frame->met)
            continue;  // sliding: a frame that met a neighbour is in a pair
        if (out->nwaiting < PAIRING_SHOWN) {
            pairing_note_t *note = &out->waiting_files[out->nwaiting++];
            util_shorten (frame->name, note->name, sizeof note->name);
            s_waits_for (self, experiment, rule, frame, note->why, sizeof note->why);
        }
        out->waiting++;
    }
}

void
pairing_expects (pairing_t *self, const char *experiment, char *buf, size_t size)
{
    const char *ext = self->nextensions ? self->extensions[0] : "tif";
    pairing_rule_t rule = pairing_rule_of (self, experiment)->rule;
    if (rule == PAIRING_AB)
        snprintf (buf, size, "<stem>%s.%s + <stem>%s.%s", self->a_suffix, ext, self->b_suffix, ext);
    else if (rule == PAIRING_STEREO) {
        char folders[2][NAME_MAX + 1];
        pairing_rule_cameras (pairing_cameras (self, experiment), folders, buf, size);
        snprintf (buf, size, "%s/<stem>%s.%s + %s/<stem>%s.%s + %s/<stem>%s.%s + %s/<stem>%s.%s",
                  folders[0], self->a_suffix, ext, folders[0], self->b_suffix, ext, folders[1],
                  self->a_suffix, ext, folders[1], self->b_suffix, ext);
    }
    else if (rule == PAIRING_MULTIPAGE)
        snprintf (buf, size, "one .%s file holds both frames", ext);
    else
        snprintf (buf, size, "%s (<prefix><frame number>.%s)", pairing_rule_get (rule)->pairs,
                  ext);
}

const char *
pairing_rule_name (pairing_t *self, const char *experiment)
{
    return pairing_rule_of (self, experiment)->name;
}

const pairing_rule_info_t *
pairing_rule_of (pairing_t *self, const char *experiment)
{
    // Most farms give no experiment a rule of its own: no lookup per file.
    void *own = zhashx_size (self->rules) ? zhashx_lookup (self->rules, experiment) : NULL;
    return pairing_rule_get (own ? (int) ((intptr_t) own - 1) : (int) self->rule);
}

// 1 if the key (experiment 0x1f rest) is of 'experiment', or with NULL of
// an experiment without a rule of its own.
static int
s_key_follows (pairing_t *self, const char *key, const char *experiment)
{
    const char *sep = strchr (key, '\x1f');
    size_t len = sep ? (size_t) (sep - key) : strlen (key);
    if (experiment)
        return strlen (experiment) == len && strncmp (key, experiment, len) == 0;
    char name[S_KEY_MAX];
    snprintf (name, sizeof name, "%.*s", (int) len, key);
    return !zhashx_lookup (self->rules, name);
}

// Forgets the waiting files of 'experiment' (NULL: of the experiments
// that follow the default) in 'hash'.
static void
s_forget (pairing_t *self, zhashx_t *hash, const char *experiment)
{
    zlistx_t *gone = zlistx_new ();
    if (!gone)
        return;
    for (void *item = zhashx_first (hash); item; item = zhashx_next (hash))
        if (s_key_follows (self, zhashx_cursor (hash), experiment))
            zlistx_add_end (gone, (void *) zhashx_cursor (hash));
    for (const char *key = zlistx_first (gone); key; key = zlistx_next (gone))
        zhashx_delete (hash, key);
    zlistx_destroy (&gone);
}

int
pairing_set_rule (pairing_t *self, const char *experiment, int rule, char *err, size_t errlen)
{
    const pairing_rule_info_t *info =
        pairing_rule_get (rule < 0 && !experiment ? (int) self->configured : rule);
    if (rule >= 0 && !info) {
        snprintf (err, errlen, "bad pairing rule %d", rule);
        return -1;
    }
    if (info && info->suffixes
        && (!*self->a_suffix || !*self->b_suffix || strcmp (self->a_suffix, self->b_suffix) == 0)) {
        snprintf (err, errlen,
                  "pairing rule %s needs two different, non-empty suffixes: set "
                  "pairing/a_suffix and pairing/b_suffix in the configuration",
                  info->name);
        return -1;
    }
    // The keys of the waiting files are read while the rule of theirs is
    // still the old one: the default's followers before it moves.
    s_forget (self, self->waiting, experiment);
    s_forget (self, self->frames, experiment);
    if (!experiment)
        self->rule = info->rule;
    else if (rule < 0)
        zhashx_delete (self->rules, experiment);
    else
        zhashx_update (self->rules, experiment, (void *) (intptr_t) (rule + 1));
    return 0;
}

int
pairing_set_cameras (pairing_t *self, const char *experiment, const char *list, char *err,
                     size_t errlen)
{
    char folders[2][NAME_MAX + 1];
    if (list && (strlen (list) >= sizeof self->cameras
                 || pairing_rule_cameras (list, folders, err, errlen) != 0)) {
        if (strlen (list) >= sizeof self->cameras)
            snprintf (err, errlen, "bad camera folders: over %zu bytes", sizeof self->cameras - 1);
        return -1;
    }
    s_forget (self, self->waiting, experiment);
    if (!experiment) {
        snprintf (self->cameras, sizeof self->cameras, "%s", list ? list : self->cameras_configured);
        return 0;
    }
    if (list)
        zhashx_update (self->folders, experiment, (void *) list);
    else
        zhashx_delete (self->folders, experiment);
    return 0;
}

void
pairing_forget (pairing_t *self, const char *experiment)
{
    s_forget (self, self->waiting, experiment);
    s_forget (self, self->frames, experiment);
    zhashx_delete (self->rules, experiment);
    zhashx_delete (self->folders, experiment);
}
