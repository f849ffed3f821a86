// process.c — one task on an agent: the PIV core on the pair, the noop
// processor (for benchmarks of the farm itself) or an external program.

#include "agents/process.h"
#include "agents/backgrounds.h"
#include "agents/mask.h"
#include "common/log.h"
#include "common/path.h"
#include "common/util.h"
#include "piv/budget.h"
#include "piv/derived.h"
#include "piv/ensemble.h"
#include "piv/image.h"
#include "piv/piv.h"
#include "piv/stereo.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef enum { PROCESS_PIV, PROCESS_NOOP, PROCESS_EXEC } process_kind_t;

struct _process_t {
    process_kind_t kind;          // what it runs
    char program[PATH_MAX];       // exec: the program
    char results[PATH_MAX];       // where result files go
    char from[PATH_MAX];          // broker path prefix ...
    char to[PATH_MAX];            // ... and what it is here
    char root[PATH_MAX];          // the watch root as mapped here ("": none)
    char settings[512];           // settings of 'parsed' ("": none yet)
    piv_settings_t parsed;        // ... read (its mask named, not loaded)
    mask_cache_t *masks;          // the mask they name, as last read
    backgrounds_t *backgrounds;   // experiments' backgrounds (settings key background)
    int background_count;         // frames the last pair's background was taken over
    unsigned engine_mask;         // generation of the mask 'engine' borrows (0: none)
    size_t max_pixels;            // largest image loaded (piv/max_pixels)
    size_t max_bytes;             // largest frame file read (piv/max_file_mb)
    int min_free_mb;              // free space needed to write a result
    int field_format;             // agent/result_format = field: .pvf, else .txt
    piv_t *engine;                // PIV engine for those settings, made for 'most' threads
    int most;                     // threads the engine is made for (process_set_threads; 1)
    int threads;                  // ... of which the next pair runs on
    piv_loader_t *loader;         // this thread's frames and file buffer, kept
    piv_loader_t *loader2;        // a stereo set's camera 2 frames, kept as 'loader' keeps
                                  // camera 1's (fresh pages cost a fault each)
    piv_budget_t budget;          // what a pair may take (process_set_budget), its ratio
    char *rig_text;               // stereo: the rig's calibration text of 'stereo' (NULL: none)
    char stereo_settings[512];    // ... the settings it was made for
    int stereo_width, stereo_height;  // ... and the frame size
    piv_stereo_t *stereo;         // the stereo engine for those, kept from set to set
};

process_t *
process_new (const config_t *cfg, char *err, size_t errlen)
{
    process_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "cannot make a processor: out of memory");
        return NULL;
    }
    const char *p = cfg->agent.processor;
    if (!(self->masks = mask_cache_new ()) || !(self->loader = piv_loader_new ())
        || !(self->loader2 = piv_loader_new ())
        || !(self->backgrounds = backgrounds_new ())) {
        snprintf (err, errlen, "cannot make a processor: out of memory");
        process_destroy (&self);
        return NULL;
    }
    if (strcmp (p, "piv") == 0)
        self->kind = PROCESS_PIV;
    else if (strcmp (p, "noop") == 0)
        self->kind = PROCESS_NOOP;
    else if (strncmp (p, "exec:", 5) == 0 && p[5]) {
        self->kind = PROCESS_EXEC;
        snprintf (self->program, sizeof self->program, "%s", p + 5);
    }
    else {
        snprintf (err, errlen, "bad agent/processor '%s': expected piv, noop or exec:PROGRAM", p);
        process_destroy (&self);
        return NULL;
    }
    snprintf (self->results, sizeof self->results, "%s", cfg->agent.results);
    snprintf (self->from, sizeof self->from, "%s", cfg->agent.path_from);
    snprintf (self->to, sizeof self->to, "%s", cfg->agent.path_to);
    self->max_pixels = (size_t) cfg->piv.max_pixels;
    self->max_bytes = (size_t) cfg->piv.max_file_mb << 20;
    self->budget.max_ratio = cfg->piv.max_ratio;
    self->budget.settings = &self->parsed;
    piv_loader_set_budget (self->loader, &self->budget);
    piv_loader_set_budget (self->loader2, &self->budget);
    self->min_free_mb = cfg->agent.min_free_mb;
    self->most = self->threads = 1;
    self->field_format = strcmp (cfg->agent.result_format, "field") == 0;
    if (*cfg->watcher.root
        && process_map_path (cfg->watcher.root, self->from, self->to, self->root,
                             sizeof self->root)
               != 0)
        self->root[0] = '\0';
    return self;
}

void
process_destroy (process_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_destroy (&(*self_p)->engine);
    piv_stereo_destroy (&(*self_p)->stereo);
    free ((*self_p)->rig_text);
    mask_cache_destroy (&(*self_p)->masks);
    backgrounds_destroy (&(*self_p)->backgrounds);
    piv_loader_destroy (&(*self_p)->loader);
    piv_loader_destroy (&(*self_p)->loader2);
    free (*self_p);
    *self_p = NULL;
}

void
process_budget (const config_t *cfg, int threads, uint64_t *bytes, char *why, size_t len)
{
    char size[32], source[64];
    uint64_t limit;
    threads = threads > 0 ? threads : 1;
    const char *s = threads == 1 ? "" : "s";
    *bytes = 0;
    if (cfg->agent.memory_mb > 0) {
        *bytes = ((uint64_t) cfg->agent.memory_mb << 20) / (uint64_t) threads;
        snprintf (why, len, "agent/memory_mb %d, %d thread%s", cfg->agent.memory_mb, threads, s);
    }
    else if (util_memory_limit (&limit, source, sizeof source) == 0) {
        // A quarter left for the agent itself, the page cache and others.
        *bytes = limit / 4 * 3 / (uint64_t) threads;
        snprintf (why, len, "3/4 of %s %s, %d thread%s", source,
                  piv_budget_size (limit, size, sizeof size), threads, s);
    }
    else
        snprintf (why, len, "neither agent/memory_mb nor the memory of this host is known");
}

void
process_set_budget (process_t *self, uint64_t bytes, const char *why)
{
    char size[32];
    self->budget.memory = bytes;
    snprintf (self->budget.memory_of, sizeof self->budget.memory_of,
              "this agent's budget of %s a thread (%s)", piv_budget_size (bytes, size, sizeof size),
              why);
    piv_loader_set_budget (self->loader, &self->budget);
    piv_loader_set_budget (self->loader2, &self->budget);
}

void
process_set_threads (process_t *self, int threads, int most)
{
    most = most < 1 ? 1 : most > PIV_MAX_THREADS ? PIV_MAX_THREADS : most;
    if (most != self->most)
        piv_destroy (&self->engine);  // made again for 'most' at the next pair
    self->most = most;
    self->threads = threads < 1 ? 1 : threads > most ? most : threads;
}

int
process_map_path (const char *path, const char *from, const char *to, char *buf, size_t len)
{
    size_t n = from ? strlen (from) : 0;
    int used;
    if (n > 0 && strncmp (path, from, n) == 0 && (path[n] == '/' || path[n] == '\0'))
        used = snprintf (buf, len, "%s%s", to, path + n);
    else
        used = snprintf (buf, len, "%s", path);
    return used >= 0 && (size_t) used < len ? 0 : -1;
}

// mkdir of one directory of the results path, shared with its parent's
// group when that parent is (path_share_with_group). 0 or -1 with errno.
static int
s_make_one (char *buf)
{
    if (mkdir (buf, 0755) != 0)
        return errno == EEXIST ? 0 : -1;
    char *slash = strrchr (buf, '/');
    struct stat pst;
    if (!slash)
        return stat (".", &pst) == 0 ? path_share_with_group (AT_FDCWD, buf, pst.st_mode) : -1;
    *slash = '\0';
    int rc = stat (slash == buf ? "/" : buf, &pst);
    *slash = '/';
    return rc == 0 ? path_share_with_group (AT_FDCWD, buf, pst.st_mode) : -1;
}

// mkdir -p of the results directory itself (the configuration's, trusted);
// what lies beneath it is made by path_mkdirs_beneath.
static int
s_make_dir (const char *dir)
{
    char buf[PATH_MAX];
    snprintf (buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (s_make_one (buf) != 0)
                return -1;
            *p = '/';
        }
    return s_make_one (buf);
}

int
process_room (const char *dir, int min_free_mb, char *why, size_t whylen)
{
    char buf[PATH_MAX];
    snprintf (buf, sizeof buf, "%s", dir);
    struct statvfs st;
    // The results directory may not exist yet: its nearest existing parent.
    while (statvfs (buf, &st) != 0) {
        char *slash = strrchr (buf, '/');
        if (!slash || slash == buf)
            return 1;
        *slash = '\0';
    }
    uint64_t free_mb = ((uint64_t) st.f_bavail * st.f_frsize) >> 20;
    if (free_mb >= (uint64_t) min_free_mb) {
        snprintf (why, whylen, "%llu MiB free", (unsigned long long) free_mb);
        return 1;
    }
    snprintf (why, whylen, "results volume '%s' is full: %llu MiB free, %d MiB needed", dir,
              (unsigned long long) free_mb, min_free_mb);
    return 0;
}

// 1 for the errors of a full volume: the pair waits, it has not failed.
static int
s_full (int error)
{
    return error == ENOSPC || error == EDQUOT;
}

// Opens a frame (or the mask: 'what') to read. Under the watch root (as
// mapped here) it is opened beneath it, so that neither '..' nor a symbolic
// link leads out; elsewhere (an archived copy, a mask) the path must be
// plain and not a link. Never blocks (a FIFO in a frame's place). The
// descriptor, or -1 with err.
static int
s_open_input (process_t *self, const proto_msg_t *task, const char *what, const char *given,
              char *err, size_t errlen)
{
    // Repeated slashes (a prefix mapped with a trailing one) are one.
    char path[PATH_MAX], why[128];
    size_t n = 0;
    for (const char *p = given; *p && n + 1 < sizeof path; p++)
        if (!(*p == '/' && n > 0 && path[n - 1] == '/'))
            path[n++] = *p;
    path[n] = '\0';
    unsigned long long pair = (unsigned long long) task->pair;
    const char *rel;
    int fd, beneath = *self->root && path_under (path, self->root, &rel);
    if (beneath) {
        if (!*rel || path_check_relative (rel, why, sizeof why) != 0) {
            snprintf (err, errlen, "pair %llu: refused %s '%s': %s", pair, what, path,
                      *rel ? why : "the watch root itself");
            return -1;
        }
        fd = path_open_beneath (self->root, rel, O_RDONLY | O_NONBLOCK, 0);
    }
    else {
        if (path[0] != '/' || path_check_relative (path + 1, why, sizeof why) != 0) {
            snprintf (err, errlen, "pair %llu: refused %s '%s': %s", pair, what, path,
                      path[0] != '/' ? "not an absolute path" : why);
            return -1;
        }
        fd = open (path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0 && (errno == EXDEV || errno == ELOOP))
        snprintf (err, errlen, "pair %llu: refused %s '%s': %s", pair, what, path,
                  beneath ? "a symbolic link, or it leads outside the watch root"
                          : "a symbolic link");
    else if (fd < 0)
        snprintf (err, errlen, "cannot open %s'%s': %s", strcmp (what, "mask") ? "" : "mask ",
                  path, strerror (errno));
    return fd;
}

// Why a path beneath the results directory could not be made or opened.
static const char *
s_why_beneath (int error)
{
    if (error == EXDEV || error == ELOOP)
        return "a symbolic link, or it leads outside the results directory";
    if (error == ENOTDIR)
        return "a symbolic link or a file where a directory should be";
    return strerror (error);
}

// Checks the TASK's output name and makes its directories beneath the
// results directory; 0, or -1 with err (1 when the volume is full).
static int
s_prepare_output (process_t *self, const proto_msg_t *task, char *err, size_t errlen)
{
    char why[128];
    const char *output = task->output ? task->output : "";
    if (path_check_relative (output, why, sizeof why) != 0) {
        snprintf (err, errlen, "pair %llu: refused output '%s': %s",
                  (unsigned long long) task->pair, output, why);
        return -1;
    }
    if (s_make_dir (self->results) != 0 || path_mkdirs_beneath (self->results, output) != 0) {
        int error = errno;
        snprintf (err, errlen, "cannot write '%s/%s': %s", self->results, output,
                  s_why_beneath (error));
        return s_full (error) ? 1 : -1;
    }
    if (!process_room (self->results, self->min_free_mb, err, errlen))
        return 1;
    return 0;
}

// Opens the output beneath the results directory, truncated. fd or -1.
static int
s_open_output (process_t *self, const proto_msg_t *task, char *err, size_t errlen)
{
    int fd = path_open_beneath (self->results, task->output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        snprintf (err, errlen, "cannot write '%s/%s': %s", self->results, task->output,
                  s_why_beneath (errno));
    return fd;
}

// Removes a partial output (beneath the results directory, never through
// a link).
static void
s_remove_output (process_t *self, const proto_msg_t *task)
{
    char dir[PATH_MAX];
    snprintf (dir, sizeof dir, "%s", task->output);
    char *slash = strrchr (dir, '/');
    int dirfd = slash ? (*slash = '\0',
                         path_open_beneath (self->results, dir, O_RDONLY | O_DIRECTORY, 0))
                      : open (self->results, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return;
    unlinkat (dirfd, slash ? slash + 1 : task->output, 0);
    close (dirfd);
}

// The mean vorticity the broker's feedback gives for the whole field
// (feedback_figures, roi=all; doc/control.md): piv_field_derive's values,
// the farm's one stencil, over the VALID vectors where they are finite, in
// grid order. 0 when there is none, where the feedback has null: RESULT
// figures are finite (doc/protocol.md). -1 on no memory.
static int
s_vorticity (const piv_field_t *f, double *mean)
{
    size_t n = (size_t) f->nx * (size_t) f->ny;
    float *w = malloc ((n ? n : 1) * sizeof *w);
    if (!w)
        return -1;
    double sum = 0;
    int count = 0;
    if (piv_field_derive (f, &(piv_derived_t){.vorticity = w}) >= 0)
        for (size_t k = 0; k < n; k++)
            if (f->flags[k] == PIV_FLAG_VALID && isfinite (w[k])) {
                sum += w[k];
                count++;
            }
    free (w);
    *mean = count ? sum / count : 0;
    return 0;
}

// The pair as the broker names it, its output without ".txt": "run9/0001".
static void
s_pair_name (const proto_msg_t *task, char *buf, size_t size)
{
    snprintf (buf, size, "%s", task->output ? task->output : "");
    char *dot = strrchr (buf, '.');
    if (dot && !strchr (dot, '/'))
        *dot = '\0';
}

// The task's settings read, kept while their text is the same. 0 or -1.
static int
s_settings (process_t *self, const proto_msg_t *task, char *err, size_t errlen)
{
    if (*self->settings && strcmp (self->settings, task->settings) == 0)
        return 0;
    piv_destroy (&self->engine);
    self->settings[0] = '\0';
    char why[1024];
    if (piv_settings_parse (task->settings, &self->parsed, why, sizeof why) != 0) {
        snprintf (err, errlen, "pair %llu: %s", (unsigned long long) task->pair, why);
        return -1;
    }
    snprintf (self->settings, sizeof self->settings, "%s", task->settings);
    return 0;
}

// The mask the settings name (*mask_p NULL for none), at its path mapped
// as the frames' are, opened as warily as they are, read once per file
// (the cache) and checked against the frames' size by the caller; then the
// engine for the settings and that mask, made anew when either changed
// (it borrows the cache's image). 0, or -1 with err naming the mask.
static int
s_engine (process_t *self, const proto_msg_t *task, const piv_image_t **mask_p, char *err,
          size_t errlen)
{
    const char *given = self->parsed.mask_path;
    char path[PATH_MAX], name[PATH_MAX], why[1024];
    unsigned generation = 0;
    *mask_p = NULL;
    if (*given) {
        if (process_map_path (given, self->from, self->to, path, sizeof path) != 0) {
            snprintf (err, errlen, "pair %llu: the path of mask '%s' is too long",
                      (unsigned long long) task->pair, given);
            return -1;
        }
        int fd = s_open_input (self, task, "mask", path, err, errlen);
        if (fd < 0)
            return -1;
        *mask_p = mask_cache_get (self->masks, fd, path, self->max_pixels, self->max_bytes,
                                  &generation, why, sizeof why);
        close (fd);
        s_pair_name (task, name, sizeof name);
        if (!*mask_p) {
            snprintf (err, errlen, "mask of pair '%s': %s", name, why);
            return -1;
        }
    }
    if (self->engine && self->engine_mask == generation)
        return 0;
    if (*mask_p)
        log_info ("mask '%s' read: %dx%d", path, piv_image_width (*mask_p),
                  piv_image_height (*mask_p));
    piv_destroy (&self->engine);
    piv_settings_t s = self->parsed;
    s.mask = *mask_p;
    s.threads = self->most;  // each pair runs on self->threads of them (piv_set_threads)
    if (!(self->engine = piv_new (&s, why, sizeof why))) {
        snprintf (err, errlen, "pair %llu: %s", (unsigned long long) task->pair, why);
        return -1;
    }
    self->engine_mask = generation;
    return 0;
}

// Frames A and B of the task (the loader's, borrowed until the next pair),
// and the mask (NULL: none) of their size. 0, or -1 with err.
static int
s_load_pair (process_t *self, const proto_msg_t *task, const char *a, const char *b,
             const piv_image_t *mask, piv_image_t **ia, piv_image_t **ib, char *err,
             size_t errlen)
{
    int fa = s_open_input (self, task, "frame", a, err, errlen), fb = -1;
    if (fa < 0 || (*b && (fb = s_open_input (self, task, "frame", b, err, errlen)) < 0)) {
        if (fa >= 0)
            close (fa);
        return -1;
    }
    int lrc = piv_loader_pair_fd (self->loader, fa, a, fb, *b ? b : NULL, self->max_pixels,
                                  self->max_bytes, ia, ib, err, errlen);
    close (fa);
    if (fb >= 0)
        close (fb);
    if (lrc != 0)
        return -1;
    int w = piv_image_width (*ia), h = piv_image_height (*ia);
    if (mask && (piv_image_width (mask) != w || piv_image_height (mask) != h)) {
        char name[PATH_MAX];
        s_pair_name (task, name, sizeof name);
        snprintf (err, errlen, "mask '%s' is %dx%d, the frames of pair '%s' are %dx%d",
                  self->parsed.mask_path, piv_image_width (mask), piv_image_height (mask), name,
                  w, h);
        *ia = *ib = NULL;
        return -1;
    }
    return 0;
}

// Writes the result file: the field as text with its header (txt), or the
// bytes of its encoding 'blob' (field). 0, or -1 with err (1: the volume is
// full; the partial output is removed).
static int
s_write_result (process_t *self, const proto_msg_t *task, const char *a, const char *b,
                const char *out, const piv_field_t *field, const piv_field3_t *f3,
                const proto_msg_t *result, char *err, size_t errlen)
{
    int prc = s_prepare_output (self, task, err, errlen);
    int fd = prc == 0 ? s_open_output (self, task, err, errlen) : -1;
    FILE *f = fd >= 0 ? fdopen (fd, "w") : NULL;
    if (!f) {
        int error = errno;
        if (fd >= 0) {
            close (fd);
            snprintf (err, errlen, "cannot write '%s': %s", out, strerror (error));
        }
        return prc == 1 || (prc == 0 && s_full (error)) ? 1 : -1;
    }
    errno = 0;
    int werr;
    if (self->field_format)
        werr = fwrite (result->blob, 1, result->blob_size, f) != result->blob_size;
    else {
        char header[PATH_MAX * 2 + 1024], bg[32] = "";
        int n = snprintf (header, sizeof header,
                          "pivfarm-agent pair %llu attempt %u\nframe_a %s\nframe_b %s\nsettings %s",
                          (unsigned long long) task->pair, task->attempt, a, *b ? b : a,
                          task->settings);
        // The background as it was: over fewer frames than asked for at
        // an experiment's start (or an agent thread's first pairs of it).
        if (self->parsed.background != PIV_BACKGROUND_NONE && n > 0 && (size_t) n < sizeof header)
            snprintf (header + n, sizeof header - (size_t) n,
                      "\nbackground %s of experiment '%s' over %d frames",
                      piv_background_text (self->parsed.background,
                                           self->parsed.background_frames, bg, sizeof bg),
                      task->experiment ? task->experiment : "", self->background_count);
        // A stereo set's: its 3-component field in the world's mm
        // (pivfarm-piv --cameras's columns), camera 2's frames named too.
        if (f3 && n > 0 && (size_t) n < sizeof header)
            snprintf (header + n, sizeof header - (size_t) n, "\nframe_c %s\nframe_d %s",
                      task->path_c, task->path_d);
        werr = f3 ? piv_field3_write (f3, f, 0, header)
                  : piv_field_write (field, f, PIV_FORMAT_TXT, header);
    }
    if (!werr && fflush (f) != 0)
        werr = 1;
    int error = errno;
    if (fclose (f) != 0 && !werr) {
        werr = 1;
        error = errno;
    }
    if (!werr)
        return 0;
    snprintf (err, errlen, "cannot write '%s': %s", out, error ? strerror (error) : "write error");
    s_remove_output (self, task);
    return s_full (error) ? 1 : -1;
}

static int s_finish (process_t *self, const proto_msg_t *task, const char *a, const char *b,
                     const char *out, piv_field_t *field, const piv_field3_t *f3,
                     double vorticity, proto_msg_t *result, char *err, size_t errlen);

static int
s_run_piv (process_t *self, const proto_msg_t *task, const char *a, const char *b,
           const char *out, proto_msg_t *result, char *err, size_t errlen)
{
    char why[1024];
    const piv_image_t *mask;
    piv_image_t *ia = NULL, *ib = NULL;
    if (s_settings (self, task, err, errlen) != 0 || s_engine (self, task, &mask, err, errlen) != 0
        || s_load_pair (self, task, a, b, mask, &ia, &ib, err, errlen) != 0)
        return -1;
    // The experiment's background, over its last frames this thread saw
    // (the pair's own included), off both frames (the loader's: theirs to
    // change).
    if (self->parsed.background != PIV_BACKGROUND_NONE
        && backgrounds_apply (self->backgrounds, task->experiment ? task->experiment : "",
                              &self->parsed, ia, ib, &self->background_count, why, sizeof why)
               != 0) {
        snprintf (err, errlen, "pair %llu: %s", (unsigned long long) task->pair, why);
        return -1;
    }
    // The frames are the loader's, kept for the next pair.
    piv_set_threads (self->engine, self->threads);
    piv_field_t *field = piv_process (self->engine, ia, ib, why, sizeof why);
    if (!field) {
        snprintf (err, errlen, "cannot process '%s' and '%s': %s", a, *b ? b : a, why);
        return -1;
    }
    double vorticity;
    if (s_vorticity (field, &vorticity) != 0
        || piv_field_encode (field, &result->blob, &result->blob_size) != 0) {
        snprintf (err, errlen, "pair %llu: out of memory", (unsigned long long) task->pair);
        piv_field_destroy (&field);
        return -1;
    }
    return s_finish (self, task, a, b, out, field, NULL, vorticity, result, err, errlen);
}

// Writes the result file of 'field' (f3: a stereo set's, else NULL) and
// fills RESULT's figures; takes the field. 0, or as s_write_result.
static int
s_finish (process_t *self, const proto_msg_t *task, const char *a, const char *b,
          const char *out, piv_field_t *field, const piv_field3_t *f3, double vorticity,
          proto_msg_t *result, char *err, size_t errlen)
{
    int rc = s_write_result (self, task, a, b, out, field, f3, result, err, errlen);
    if (rc != 0) {
        piv_field_destroy (&field);
        return rc;
    }
    piv_field_stats_t st;
    piv_field_stats (field, PIV_FLAG_VALID, &st);
    result->figures[PROTO_FIG_MEAN_U] = st.mean_u;
    result->figures[PROTO_FIG_MEAN_V] = st.mean_v;
    result->figures[PROTO_FIG_MEAN_SPEED] = st.mean_speed;
    result->figures[PROTO_FIG_VALID_FRACTION] = st.valid_fraction;
    result->figures[PROTO_FIG_NX] = field->nx;
    result->figures[PROTO_FIG_NY] = field->ny;
    result->figures[PROTO_FIG_VORTICITY] = vorticity;
    piv_field_destroy (&field);
    return 0;
}

// Frames A and B of one camera of a stereo set, opened as the pair's are
// (beneath the watch root), into 'loader' (borrowed until its next pair).
// 0, or -1 with err.
static int
s_load_camera (process_t *self, piv_loader_t *loader, const proto_msg_t *task, const char *a,
               const char *b, piv_image_t **ia, piv_image_t **ib, char *err, size_t errlen)
{
    int fa = s_open_input (self, task, "frame", a, err, errlen), fb = -1;
    if (fa < 0 || (fb = s_open_input (self, task, "frame", b, err, errlen)) < 0) {
        if (fa >= 0)
            close (fa);
        return -1;
    }
    int rc = piv_loader_pair_fd (loader, fa, a, fb, b, self->max_pixels, self->max_bytes, ia, ib,
                                 err, errlen);
    close (fa);
    close (fb);
    return rc;
}

// The stereo engine of the task's rig, settings and frame size: the one
// kept when all three are the same, else made anew. 0, or -1 with err.
static int
s_stereo_engine (process_t *self, const proto_msg_t *task, int width, int height, char *err,
                 size_t errlen)
{
    unsigned long long pair = (unsigned long long) task->pair;
    if (self->stereo && self->rig_text && strcmp (self->rig_text, task->cameras) == 0
        && strcmp (self->stereo_settings, task->settings) == 0 && self->stereo_width == width
        && self->stereo_height == height)
        return 0;
    piv_stereo_destroy (&self->stereo);
    free (self->rig_text);
    self->rig_text = NULL;
    char why[1024];
    piv_cameras_t *rig = piv_cameras_parse (task->cameras, "the experiment's rig", why, sizeof why);
    if (!rig) {
        snprintf (err, errlen, "pair %llu: %s", pair, why);
        return -1;
    }
    piv_settings_t s = self->parsed;
    s.mask = NULL;
    double t0 = util_now ();
    self->stereo = piv_stereo_new (rig, &s, width, height, NULL, why, sizeof why);
    piv_cameras_destroy (&rig);
    const piv_stereo_grid_t *g = self->stereo ? piv_stereo_grid (self->stereo) : NULL;
    if (g)
        log_info ("stereo engine for experiment '%s': %dx%d frames, grid %dx%d px, made in "
                  "%.0f ms (kept while its rig, settings and frame size stay)",
                  task->experiment, width, height, g->width, g->height, (util_now () - t0) * 1e3);
    if (!self->stereo || !(self->rig_text = strdup (task->cameras))) {
        snprintf (err, errlen, "pair %llu: %s", pair, self->stereo ? "out of memory" : why);
        piv_stereo_destroy (&self->stereo);
        return -1;
    }
    snprintf (self->stereo_settings, sizeof self->stereo_settings, "%s", task->settings);
    self->stereo_width = width, self->stereo_height = height;
    return 0;
}

// A stereo set: camera 1's frames a, b and camera 2's c, d, the rig the
// task carries; the 3-component field goes back as a field on the rig's
// grid pixels with w (piv_stereo_field), whose mm the experiment's
// calibration (piv_stereo_grid_calib, set with the rig) gives back.
static int
s_run_stereo (process_t *self, const proto_msg_t *task, const char *a, const char *b,
              const char *c, const char *d, const char *out, proto_msg_t *result, char *err,
              size_t errlen)
{
    unsigned long long pair = (unsigned long long) task->pair;
    if (!task->cameras || !*task->cameras) {
        snprintf (err, errlen, "pair %llu: a stereo set of experiment '%s' without the rig's "
                  "calibration: set it with 'pivctl calibrate %s --cameras FILE', then retry",
                  pair, task->experiment, task->experiment);
        return -1;
    }
    if (s_settings (self, task, err, errlen) != 0)
        return -1;
    if (*self->parsed.mask_path || self->parsed.background != PIV_BACKGROUND_NONE) {
        snprintf (err, errlen, "pair %llu: a stereo set takes no %s (in one camera's pixels)",
                  pair, *self->parsed.mask_path ? "mask" : "background subtraction");
        return -1;
    }
    piv_image_t *fr[4] = {NULL, NULL, NULL, NULL};
    piv_field3_t *f3 = NULL;
    piv_field_t *field = NULL;
    char why[1024];
    int rc = -1;
    // The loaders' frames, kept for the next set.
    if (s_load_camera (self, self->loader, task, a, b, &fr[0], &fr[1], err, errlen) != 0
        || s_load_camera (self, self->loader2, task, c, d, &fr[2], &fr[3], err, errlen) != 0)
        goto done;
    int width = piv_image_width (fr[0]), height = piv_image_height (fr[0]);
    if (piv_image_width (fr[2]) != width || piv_image_height (fr[2]) != height) {
        snprintf (err, errlen, "'%s' is %dx%d, '%s' is %dx%d: both cameras' frames must have "
                  "one size", a, width, height, c, piv_image_width (fr[2]),
                  piv_image_height (fr[2]));
        goto done;
    }
    if (s_stereo_engine (self, task, width, height, err, errlen) != 0)
        goto done;
    if (!(f3 = piv_stereo_process (self->stereo, fr[0], fr[1], fr[2], fr[3], why, sizeof why))) {
        snprintf (err, errlen, "cannot process '%s' '%s' '%s' '%s': %s", a, b, c, d, why);
        goto done;
    }
    field = piv_stereo_field (f3, piv_stereo_grid (self->stereo),
                              piv_stereo_planar (self->stereo, 0));
    double vorticity;
    if (!field || s_vorticity (field, &vorticity) != 0
        || piv_field_encode (field, &result->blob, &result->blob_size) != 0) {
        snprintf (err, errlen, "pair %llu: out of memory", pair);
        piv_field_destroy (&field);
        goto done;
    }
    rc = s_finish (self, task, a, b, out, field, f3, vorticity, result, err, errlen);
done:
    piv_field3_destroy (&f3);
    return rc;
}

// The exec processor's programs running now (each the leader of its process
// group), of every worker, so that an agent that hands its tasks back can
// stop them and what they started (process_kill_programs).
#define S_MAX_CHILDREN 1024
static pthread_mutex_t s_children_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t s_children[S_MAX_CHILDREN];

static void
s_child_set (pid_t old, pid_t pid)
{
    pthread_mutex_lock (&s_children_lock);
    for (int i = 0; i < S_MAX_CHILDREN; i++)
        if (s_children[i] == old) {
            s_children[i] = pid;
            break;
        }
    pthread_mutex_unlock (&s_children_lock);
}

int
process_kill_programs (void)
{
    int n = 0;
    pthread_mutex_lock (&s_children_lock);
    for (int i = 0; i < S_MAX_CHILDREN; i++)
        if (s_children[i] > 0 && kill (-s_children[i], SIGKILL) == 0)
            n++;
    pthread_mutex_unlock (&s_children_lock);
    return n;
}

// Runs PROGRAM A B OUT; its standard error becomes the reason of a failure.
static int
s_run_exec (process_t *self, const proto_msg_t *task, const char *a, const char *b,
            const char *out, char *err, size_t errlen)
{
    // The output is made here, beneath the results directory, so that the
    // program writes into a file that is there, not through a planted link.
    int prc = s_prepare_output (self, task, err, errlen), fd = -1;
    if (prc != 0 || (fd = s_open_output (self, task, err, errlen)) < 0)
        return prc == 1 ? 1 : -1;
    close (fd);
    int fds[2];
    if (pipe (fds) != 0) {
        snprintf (err, errlen, "pair %llu: cannot run '%s': %s", (unsigned long long) task->pair,
                  self->program, strerror (errno));
        return -1;
    }
    pid_t pid = fork ();
    if (pid == 0) {
        // A stop (systemd, Slurm's scancel) signals every process of the
        // agent: the task finishes all the same, as the agent drains, and
        // its result is reported rather than a failure.
        signal (SIGTERM, SIG_IGN);
        signal (SIGINT, SIG_IGN);
        // A group of its own: what it starts goes with it when the agent
        // hands the task back (process_kill_programs).
        setpgid (0, 0);
        sigset_t none;  // the agent blocks SIGHUP for its reload thread
        sigemptyset (&none);
        pthread_sigmask (SIG_SETMASK, &none, NULL);
        dup2 (fds[1], 2);
        close (fds[0]);
        close (fds[1]);
        execl (self->program, self->program, a, *b ? b : a, out, (char *) NULL);
        fprintf (stderr, "cannot run '%s': %s", self->program, strerror (errno));
        _exit (127);
    }
    close (fds[1]);
    if (pid > 0)
        s_child_set (0, pid);
    char text[1024] = "";
    size_t used = 0;
    ssize_t n;
    while (pid > 0 && (n = read (fds[0], text + used, sizeof text - 1 - used)) > 0)
        used += (size_t) n;
    text[used] = '\0';
    close (fds[0]);
    int status = 0;
    pid_t waited = pid < 0 ? -1 : waitpid (pid, &status, 0);
    if (pid > 0)
        s_child_set (pid, 0);
    if (waited != pid) {
        snprintf (err, errlen, "pair %llu: cannot run '%s': %s", (unsigned long long) task->pair,
                  self->program, strerror (errno));
        return -1;
    }
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        // A program that failed for want of space: the pair waits.
        if (!process_room (self->results, self->min_free_mb, err, errlen)) {
            s_remove_output (self, task);
            return 1;
        }
        char *nl;
        while ((nl = strrchr (text, '\n')) && nl[1] == '\0')
            *nl = '\0';
        snprintf (err, errlen, "'%s' on pair %llu %s %d: %s", self->program,
                  (unsigned long long) task->pair,
                  WIFEXITED (status) ? "exited with status" : "was killed by signal",
                  WIFEXITED (status) ? WEXITSTATUS (status) : WTERMSIG (status),
                  *text ? text : "(no message)");
        return -1;
    }
    return 0;
}

// An ENSEMBLE: each pair of the chunk read as a TASK's frames are (mapped,
// opened beneath the watch root, checked) and its correlation planes added
// to one partial sum of the pass, which goes back in 'result' as a
// PARTIAL. 0, or -1 with err naming the job, pass, chunk and what failed.
static int
s_run_ensemble (process_t *self, const proto_msg_t *task, proto_msg_t *result, char *err,
                size_t errlen)
{
    char where[128], why[1024];
    snprintf (where, sizeof where, "ensemble job %llu pass %u chunk %llu",
              (unsigned long long) task->seq, task->count + 1, (unsigned long long) task->pair);
    if (self->kind != PROCESS_PIV) {
        snprintf (err, errlen, "%s: this agent's processor computes no correlation (agent/"
                  "processor is not piv)", where);
        return -1;
    }
    const piv_image_t *mask;
    if (s_settings (self, task, why, sizeof why) != 0
        || s_engine (self, task, &mask, why, sizeof why) != 0) {
        snprintf (err, errlen, "%s: %s", where, why);
        return -1;
    }
    piv_field_t *predictor = NULL;
    if (task->blob_size
        && !(predictor = piv_field_decode (task->blob, task->blob_size, why, sizeof why))) {
        snprintf (err, errlen, "%s: bad predictor: %s", where, why);
        return -1;
    }
    piv_settings_t settings = self->parsed;
    settings.mask = mask;
    piv_ensemble_t *sum = NULL;
    int rc = 0, n = 0;
    const char *line = task->text ? task->text : "";
    while (*line && rc == 0) {
        const char *end_a = strchr (line, '\n'), *end_b = end_a ? strchr (end_a + 1, '\n') : NULL;
        if (!end_b) {
            snprintf (err, errlen, "%s: frames not in pairs of lines", where);
            rc = -1;
            break;
        }
        char given_a[PATH_MAX], given_b[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
        size_t la = (size_t) (end_a - line), lb = (size_t) (end_b - end_a - 1);
        n++;
        if (la >= sizeof given_a || lb >= sizeof given_b
            || (memcpy (given_a, line, la), given_a[la] = '\0',
                memcpy (given_b, end_a + 1, lb), given_b[lb] = '\0',
                process_map_path (given_a, self->from, self->to, a, sizeof a) != 0)
            || process_map_path (given_b, self->from, self->to, b, sizeof b) != 0) {
            snprintf (err, errlen, "%s: pair %d: a path is too long", where, n);
            rc = -1;
            break;
        }
        line = end_b + 1;
        piv_image_t *ia = NULL, *ib = NULL;
        if (s_load_pair (self, task, a, b, mask, &ia, &ib, why, sizeof why) != 0) {
            snprintf (err, errlen, "%s: pair %d of the chunk: %s", where, n, why);
            rc = -1;
            break;
        }
        if (!sum
            && !(sum = piv_ensemble_new (&settings, (int) task->window, (int) task->overlap,
                                         piv_image_width (ia), piv_image_height (ia), predictor,
                                         why, sizeof why))) {
            snprintf (err, errlen, "%s: %s", where, why);
            rc = -1;
            break;
        }
        if (piv_ensemble_add (sum, ia, ib, why, sizeof why) != 0) {
            snprintf (err, errlen, "%s: '%s' and '%s': %s", where, a, b, why);
            rc = -1;
        }
    }
    piv_field_destroy (&predictor);
    if (rc == 0 && !sum) {
        snprintf (err, errlen, "%s: no pairs", where);
        rc = -1;
    }
    if (rc == 0 && piv_ensemble_encode (sum, &result->blob, &result->blob_size) != 0) {
        snprintf (err, errlen, "%s: out of memory", where);
        rc = -1;
    }
    // A partial the protocol cannot carry would never arrive: the chunk
    // fails saying so (the job with it, on every agent alike).
    if (rc == 0 && result->blob_size > PROTO_MAX_FIELD) {
        piv_ensemble_info_t info;
        piv_ensemble_info (sum, &info);
        snprintf (err, errlen,
                  "%s: its partial sum is %zu bytes (%d x %d windows of %d px, lags +-%d), over "
                  "the %u bytes a message may carry: use larger windows or less overlap",
                  where, result->blob_size, info.nx, info.ny, info.window, info.radius,
                  PROTO_MAX_FIELD);
        free (result->blob);
        result->blob = NULL;
        result->blob_size = 0;
        rc = -1;
    }
    piv_ensemble_destroy (&sum);
    return rc;
}

int
process_task (process_t *self, const proto_msg_t *task, proto_msg_t *result, char *err,
              size_t errlen)
{
    memset (result, 0, sizeof *result);
    if (task->command == PROTO_ENSEMBLE) {
        *result = (proto_msg_t) {.command = PROTO_PARTIAL,
                                 .seq = task->seq,
                                 .count = task->count,
                                 .pair = task->pair,
                                 .attempt = task->attempt};
        int64_t t0 = (int64_t) (util_now () * 1e9);
        if (s_run_ensemble (self, task, result, err, errlen) != 0) {
            proto_msg_release (result);
            return -1;
        }
        result->time_ns = (int64_t) (util_now () * 1e9) - t0;
        return 0;
    }
    result->command = PROTO_RESULT;
    result->pair = task->pair;
    result->attempt = task->attempt;
    int64_t t0 = (int64_t) (util_now () * 1e9);
    char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX] = "", d[PATH_MAX] = "", out[PATH_MAX * 2],
        output[PATH_MAX];
    int stereo = task->path_c && *task->path_c;
    // agent/result_format = field: the broker's "<stem>.txt" becomes
    // "<stem>.pvf" (RESULT says which file was written).
    proto_msg_t named = *task;
    if (self->kind == PROCESS_PIV && self->field_format && task->output) {
        size_t n = strlen (task->output);
        if (n > 4 && strcmp (task->output + n - 4, ".txt") == 0)
            n -= 4;
        if ((size_t) snprintf (output, sizeof output, "%.*s.pvf", (int) n, task->output)
            >= sizeof output) {
            snprintf (err, errlen, "pair %llu: a path is too long",
                      (unsigned long long) task->pair);
            return -1;
        }
        named.output = output;
        task = &named;
    }
    if (process_map_path (task->path_a, self->from, self->to, a, sizeof a) != 0
        || process_map_path (task->path_b ? task->path_b : "", self->from, self->to, b, sizeof b)
               != 0
        || (stereo && (process_map_path (task->path_c, self->from, self->to, c, sizeof c) != 0
                       || process_map_path (task->path_d, self->from, self->to, d, sizeof d)
                              != 0))
        || (size_t) snprintf (out, sizeof out, "%s/%s", self->results, task->output)
               >= sizeof out) {
        snprintf (err, errlen, "pair %llu: a path is too long", (unsigned long long) task->pair);
        return -1;
    }
    // A full results volume: the pair waits, before any frame is read.
    if (self->kind != PROCESS_NOOP && !process_room (self->results, self->min_free_mb, err, errlen))
        return PROCESS_DEFER;
    int rc = 0;
    if (self->kind == PROCESS_PIV && stereo)
        rc = s_run_stereo (self, task, a, b, c, d, out, result, err, errlen);
    else if (self->kind == PROCESS_PIV)
        rc = s_run_piv (self, task, a, b, out, result, err, errlen);
    else if (self->kind == PROCESS_EXEC)
        rc = s_run_exec (self, task, a, b, out, err, errlen);
    if (rc != 0) {
        proto_msg_release (result);
        return rc > 0 ? PROCESS_DEFER : -1;
    }
    result->time_ns = (int64_t) (util_now () * 1e9) - t0;
    result->output = strdup (self->kind == PROCESS_NOOP ? "" : out);
    return result->output ? 0 : -1;
}
