// piv.c — the PIV engine: FFT cross-correlation of interrogation windows
// over a multipass grid, each pass predicted by the one before (integer
// window offset or image deformation), sub-pixel Gaussian peak fit, peak
// ratio, and normalized median validation between passes and at the end.

#include "piv/piv.h"
#include "piv/deform.h"
#include "piv/peak.h"
#include "piv/preprocess.h"
#include "piv/smooth.h"
#include "piv/simd.h"
#include "piv/sparse.h"
#include "piv/uncertainty.h"
#include "piv/validate.h"

#include <errno.h>
#include <fftw3.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// FFTW plans: per window size n, one forward n x n complex transform (frame
// A's window in the real part, B's in the imaginary part: one transform
// gives both spectra, cheaper than two real ones) and one inverse n x n
// complex transform, which turns the cross spectra of two windows into
// their two correlations at once (s_cross_plane). Made once per process
// and shared by every engine and thread through FFTW's new-array execute
// functions, which are thread-safe; planning is not, so it happens under
// s_fftw_lock, as does everything that touches wisdom.

typedef struct {
    int n;               // window size
    fftwf_plan forward;  // n x n complex, forward
    fftwf_plan inverse;  // n x n complex, backward (two windows' correlations at once)
} s_plan_t;

#define MAX_PLANS ((PIV_MAX_WINDOW - 8) / 2 + 1)  // every even size 8 .. PIV_MAX_WINDOW
static s_plan_t s_plans[MAX_PLANS];  // plans made so far
static int s_nplans;                 // entries used in s_plans
static pthread_mutex_t s_fftw_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned s_planned;           // plans made (under s_fftw_lock)
static unsigned s_planned_known;     // s_planned when s_known was taken
static char *s_known;                // the wisdom last loaded or saved

void
piv_fftw_planner_lock (void)
{
    pthread_mutex_lock (&s_fftw_lock);
}

void
piv_fftw_planned (void)
{
    s_planned++;
}

void
piv_fftw_planner_unlock (void)
{
    pthread_mutex_unlock (&s_fftw_lock);
}

// FFTW_PATIENT finds plans about 1.6 times faster than FFTW_MEASURE for PIV
// windows (measured here: 52 against 84 ms for a 2048 px frame of 32 px
// windows) and takes about 1 s for 64, 32 and 16 px; wisdom makes that a
// one-time cost. PIVFARM_FFTW_PLANNER = estimate | measure | patient.
unsigned
piv_fftw_planner_flags (void)
{
    const char *env = getenv ("PIVFARM_FFTW_PLANNER");
    if (env && strcmp (env, "estimate") == 0)
        return FFTW_ESTIMATE;
    if (env && strcmp (env, "measure") == 0)
        return FFTW_MEASURE;
    return FFTW_PATIENT;
}

static const s_plan_t *
s_plan_get (int n)
{
    const s_plan_t *found = NULL;
    pthread_mutex_lock (&s_fftw_lock);
    for (int i = 0; i < s_nplans && !found; i++)
        if (s_plans[i].n == n)
            found = &s_plans[i];
    if (!found && s_nplans < MAX_PLANS) {
        // Plan on scratch arrays from fftwf_malloc, as the engine's buffers
        // are, so that their alignment matches (a condition of new-array
        // execute). FFTW_MEASURE overwrites them; with wisdom it is instant.
        fftwf_complex *in = fftwf_malloc (sizeof (fftwf_complex) * n * n);
        fftwf_complex *out = fftwf_malloc (sizeof (fftwf_complex) * n * n);
        if (in && out) {
            s_plan_t *plan = &s_plans[s_nplans];
            plan->n = n;
            unsigned flags = piv_fftw_planner_flags ();
            plan->forward = fftwf_plan_dft_2d (n, n, in, out, FFTW_FORWARD, flags);
            plan->inverse = fftwf_plan_dft_2d (n, n, out, in, FFTW_BACKWARD, flags);
            if (plan->forward && plan->inverse) {
                s_nplans++;
                s_planned++;
                found = plan;
            }
        }
        fftwf_free (in);
        fftwf_free (out);
    }
    pthread_mutex_unlock (&s_fftw_lock);
    return found;
}

const char *
piv_wisdom_default_path (void)
{
    static char path[4096];
    const char *env = getenv ("PIVFARM_WISDOM");
    const char *cache = getenv ("XDG_CACHE_HOME");
    const char *home = getenv ("HOME");
    if (env && *env)
        snprintf (path, sizeof path, "%s", env);
    else if (cache && *cache)
        snprintf (path, sizeof path, "%s/pivfarm/fftw-wisdom", cache);
    else if (home && *home)
        snprintf (path, sizeof path, "%s/.cache/pivfarm/fftw-wisdom", home);
    else
        snprintf (path, sizeof path, "/tmp/pivfarm-fftw-wisdom");
    return path;
}

int
piv_wisdom_load (const char *path)
{
    pthread_mutex_lock (&s_fftw_lock);
    int ok = fftwf_import_wisdom_from_filename (path);
    if (ok) {
        free (s_known);
        s_known = fftwf_export_wisdom_to_string ();
        s_planned_known = s_planned;
    }
    pthread_mutex_unlock (&s_fftw_lock);
    return ok ? 0 : -1;
}

// mkdir -p of the directory part of 'path'.
static void
s_make_parent (const char *path)
{
    char dir[4096];
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (!slash || slash == dir)
        return;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir (dir, 0755);
            *p = '/';
        }
    mkdir (dir, 0755);
}

int
piv_wisdom_save (const char *path)
{
    s_make_parent (path);
    // Write then rename, so that concurrent processes never read half a file.
    char tmp[4200];
    snprintf (tmp, sizeof tmp, "%s.%d.tmp", path, (int) getpid ());
    pthread_mutex_lock (&s_fftw_lock);
    int ok = fftwf_export_wisdom_to_filename (tmp);
    pthread_mutex_unlock (&s_fftw_lock);
    if (!ok || rename (tmp, path) != 0) {
        unlink (tmp);
        return -1;
    }
    return 0;
}

int
piv_wisdom_save_new (const char *path)
{
    // A planner at work holds the lock for up to a second: come back later.
    if (pthread_mutex_trylock (&s_fftw_lock) != 0)
        return 0;
    char *now = NULL;
    int rc = 0;
    if (s_planned != s_planned_known) {
        // Plans made since: wisdom from the file (or from FFTW's own
        // planning of the same sizes) leaves the text as it was.
        now = fftwf_export_wisdom_to_string ();
        if (now && (!s_known || strcmp (now, s_known) != 0))
            rc = 1;
        s_planned_known = s_planned;
    }
    pthread_mutex_unlock (&s_fftw_lock);
    if (rc == 1) {
        rc = piv_wisdom_save (path) == 0 ? 1 : -1;
        pthread_mutex_lock (&s_fftw_lock);
        free (s_known);
        s_known = now;
        now = NULL;
        pthread_mutex_unlock (&s_fftw_lock);
    }
    free (now);
    return rc;
}

// ---------------------------------------------------------------------------
// The engine

typedef struct {
    float *ra, *rb;          // masked windows of A and B, mean removed; a plane to blank
    fftwf_complex *z;        // A + i B, and the inverse transform's output
    fftwf_complex *spec[2];  // the transforms of two windows' z
    fftwf_complex *cross;    // C1 + i C2: their cross spectra (s_cross_plane)
    float *corr;             // one window's correlation plane (s_measure)
    float *unc;              // piv_uncertainty_window's scratch, or NULL (uncertainty off)
} s_work_t;

struct _piv_t {
    piv_settings_t settings;          // copy of the caller's
    int nthreads;                     // threads on the next pair (piv_set_threads)
    int maxn;                         // largest window
    s_work_t work[PIV_MAX_THREADS];   // per-thread buffers
    size_t pixels;                    // capacity of the frame buffers below
    float *src_a, *src_b;             // interpolation sources of A and B
    float *def_a, *def_b;             // deformed A and B
    piv_pool_t *pool;                 // settings.threads - 1 workers, or NULL
    int phases;                       // PIVFARM_PIV_PHASES: phase times to stderr
    pthread_mutex_t candidates_lock;  // over work[0] in the median test
};

piv_t *
piv_new (const piv_settings_t *settings, char *err, size_t errlen)
{
    const piv_settings_t *s = settings;
    if (piv_settings_check (s, err, errlen) != 0)
        return NULL;
    piv_t *self = calloc (1, sizeof *self);
    if (!self)
        goto nomem;
    self->settings = *s;
    pthread_mutex_init (&self->candidates_lock, NULL);
    self->nthreads = s->threads;
    self->phases = getenv ("PIVFARM_PIV_PHASES") != NULL;
    self->maxn = s->passes[0];
    for (int i = 0; i < s->npasses; i++)
        if (!s_plan_get (s->passes[i])) {
            snprintf (err, errlen, "cannot make FFTW plans for %d px windows", s->passes[i]);
            piv_destroy (&self);
            return NULL;
        }
    if (self->nthreads > 1 && !(self->pool = piv_pool_new (self->nthreads)))
        goto nomem;
    // The threads' window buffers (budget.c counts them: 44 bytes a pixel
    // of the largest window, a thread).
    int n = self->maxn;
    for (int t = 0; t < self->nthreads; t++) {
        s_work_t *w = &self->work[t];
        w->ra = fftwf_malloc (sizeof (float) * n * n);
        w->rb = fftwf_malloc (sizeof (float) * n * n);
        w->corr = fftwf_malloc (sizeof (float) * n * n);
        w->z = fftwf_malloc (sizeof (fftwf_complex) * n * n);
        w->cross = fftwf_malloc (sizeof (fftwf_complex) * n * n);
        if (!w->ra || !w->rb || !w->corr || !w->z || !w->cross)
            goto nomem;
        for (int i = 0; i < 2; i++)
            if (!(w->spec[i] = fftwf_malloc (sizeof (fftwf_complex) * n * n)))
                goto nomem;
        if (piv_uncertainty_method (s) != PIV_UNCERTAINTY_OFF
            && !(w->unc = malloc (sizeof (float) * piv_uncertainty_scratch (n))))
            goto nomem;
    }
    return self;
nomem:
    piv_destroy (&self);
    snprintf (err, errlen, "cannot make a PIV engine: out of memory");
    return NULL;
}

int
piv_set_threads (piv_t *self, int threads)
{
    int most = self->settings.threads;
    self->nthreads = threads < 1 ? 1 : threads > most ? most : threads;
    return self->nthreads;
}

void
piv_destroy (piv_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    piv_t *self = *self_p;
    piv_pool_destroy (&self->pool);
    for (int t = 0; t < PIV_MAX_THREADS; t++) {
        fftwf_free (self->work[t].ra);
        fftwf_free (self->work[t].rb);
        fftwf_free (self->work[t].corr);
        fftwf_free (self->work[t].z);
        fftwf_free (self->work[t].cross);
        free (self->work[t].unc);
        for (int i = 0; i < 2; i++)
            fftwf_free (self->work[t].spec[i]);
    }
    fftwf_free (self->src_a);
    fftwf_free (self->src_b);
    fftwf_free (self->def_a);
    fftwf_free (self->def_b);
    pthread_mutex_destroy (&self->candidates_lock);
    free (self);
    *self_p = NULL;
}

// The engine's threads (piv_pool_t, see smooth.h): nthreads - 1 workers
// made once by piv_new and kept until piv_destroy, woken for each parallel
// step of a pair (some 30 a multipass pair: windows, deformation, the
// smoother's transforms). Threads made per step cost their creation each
// time and start on a cold core. A step's items go in chunks of about an
// eighth of a thread's share, each thread taking the next chunk when done
// with one: where another process takes part of a core (a shared machine),
// the other threads do more, instead of all waiting on the slowed one as
// with one fixed part each.
#define CHUNKS_PER_THREAD 8

typedef struct {
    piv_pool_t *pool;  // the pool it serves
    int index;         // its thread: 1 .. nworkers
} s_worker_t;

struct _piv_pool_t {
    pthread_mutex_t lock;                  // over everything below
    pthread_cond_t go;                     // a new step posted, or stop
    pthread_cond_t done;                   // the last part of a step finished
    pthread_t tids[PIV_MAX_THREADS];       // workers' threads, [1 .. nworkers]
    s_worker_t workers[PIV_MAX_THREADS];   // their arguments
    int nworkers;                          // workers started
    unsigned long step;                    // steps posted so far
    unsigned long pending;                 // workers' parts of this step not done
    int stop;                              // 1: the workers leave
    piv_part_fn *fn;                       // this step's work
    void *arg;                             // its argument
    int count;                             // items of this step
    int nparts;                            // threads on it
    int chunk;                             // items a chunk
    int next;                              // the next chunk's first item (atomic)
    int64_t spin_ns;                       // POOL_SPIN_NS, or 0: more threads than cores
};

// How long a worker, done with a step, and the caller, waiting on the
// workers' last chunks, watch for the next step or the end by spinning
// before they sleep on the condition variable. A sleeping thread wakes in
// 50-100 us here (a VM): longer than a step of the smoother (two cosine
// transforms of 0.1 ms), whose steps come back to back, so that without
// the spin the caller did every item itself before the worker woke (a
// 2048^2 single pass smoothed in 28.7 ms on 2 threads, 27.0 on 1).
// Only a pool in use spins (an engine run on one thread posts no step), and
// only a pool of no more threads than the machine has cores: spinning
// workers beyond them would take the cores from the threads with work.
#define POOL_SPIN_NS 200000

static int64_t
s_pool_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void
s_pool_relax (void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause ();
#endif
}

// Spins until (*word == value) == equal or spin_ns have passed; 1 if it
// came. The word is only read here; its writers hold the lock.
static int
s_pool_spin (const unsigned long *word, unsigned long value, int equal, int64_t spin_ns)
{
    if (spin_ns <= 0)
        return (__atomic_load_n (word, __ATOMIC_ACQUIRE) == value) == equal;
    int64_t until = 0;
    for (int i = 0;; i++) {
        if ((__atomic_load_n (word, __ATOMIC_ACQUIRE) == value) == equal)
            return 1;
        s_pool_relax ();
        if ((i & 63) == 63) {
            int64_t now = s_pool_now ();
            if (!until)
                until = now + spin_ns;
            else if (now > until)
                return 0;
        }
    }
}

// Thread t's share of the current step: chunks taken until none is left.
static void
s_pool_part (piv_pool_t *pool, int t)
{
    int first;
    while ((first = __atomic_fetch_add (&pool->next, pool->chunk, __ATOMIC_RELAXED))
           < pool->count) {
        int last = pool->count - first > pool->chunk ? first + pool->chunk : pool->count;
        pool->fn (pool->arg, first, last, t);
    }
}

static void *
s_pool_worker (void *p)
{
    s_worker_t *worker = p;
    piv_pool_t *pool = worker->pool;
    unsigned long seen = 0;
    pthread_mutex_lock (&pool->lock);
    while (1) {
        if (!pool->stop && pool->step == seen) {
            // Watch for the next step awhile before sleeping (POOL_SPIN_NS).
            pthread_mutex_unlock (&pool->lock);
            s_pool_spin (&pool->step, seen, 0, pool->spin_ns);
            pthread_mutex_lock (&pool->lock);
        }
        while (!pool->stop && pool->step == seen)
            pthread_cond_wait (&pool->go, &pool->lock);
        if (pool->stop)
            break;
        seen = pool->step;
        if (worker->index >= pool->nparts)
            continue;
        pthread_mutex_unlock (&pool->lock);
        s_pool_part (pool, worker->index);
        pthread_mutex_lock (&pool->lock);
        if (__atomic_sub_fetch (&pool->pending, 1, __ATOMIC_RELEASE) == 0)
            pthread_cond_signal (&pool->done);
    }
    pthread_mutex_unlock (&pool->lock);
    return NULL;
}

piv_pool_t *
piv_pool_new (int nthreads)
{
    piv_pool_t *pool = calloc (1, sizeof *pool);
    if (!pool)
        return NULL;
    pthread_mutex_init (&pool->lock, NULL);
    pthread_cond_init (&pool->go, NULL);
    pthread_cond_init (&pool->done, NULL);
    long cores = sysconf (_SC_NPROCESSORS_ONLN);
    pool->spin_ns = cores > 0 && nthreads <= cores ? POOL_SPIN_NS : 0;
    for (int t = 1; t < nthreads; t++) {
        pool->workers[t] = (s_worker_t) {pool, t};
        if (pthread_create (&pool->tids[t], NULL, s_pool_worker, &pool->workers[t]) != 0)
            break;
        pool->nworkers = t;
    }
    return pool;
}

void
piv_pool_destroy (piv_pool_t **pool_p)
{
    if (!pool_p || !*pool_p)
        return;
    piv_pool_t *pool = *pool_p;
    pthread_mutex_lock (&pool->lock);
    pool->stop = 1;
    pthread_cond_broadcast (&pool->go);
    pthread_mutex_unlock (&pool->lock);
    for (int t = 1; t <= pool->nworkers; t++)
        pthread_join (pool->tids[t], NULL);
    pthread_cond_destroy (&pool->done);
    pthread_cond_destroy (&pool->go);
    pthread_mutex_destroy (&pool->lock);
    free (pool);
    *pool_p = NULL;
}

void
piv_pool_run (piv_pool_t *pool, int nthreads, int count, piv_part_fn *fn, void *arg)
{
    int nparts = nthreads < count ? nthreads : count;
    if (pool && nparts > pool->nworkers + 1)
        nparts = pool->nworkers + 1;
    if (!pool || nparts <= 1) {
        fn (arg, 0, count, 0);
        return;
    }
    pthread_mutex_lock (&pool->lock);
    pool->fn = fn;
    pool->arg = arg;
    pool->count = count;
    pool->nparts = nparts;
    pool->chunk = count / (nparts * CHUNKS_PER_THREAD);
    pool->chunk = pool->chunk > 0 ? pool->chunk : 1;
    pool->next = 0;
    pool->pending = (unsigned long) nparts - 1;
    __atomic_add_fetch (&pool->step, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast (&pool->go);
    pthread_mutex_unlock (&pool->lock);
    s_pool_part (pool, 0);
    // The workers' last chunks: watched awhile, then slept on.
    s_pool_spin (&pool->pending, 0, 1, pool->spin_ns);
    pthread_mutex_lock (&pool->lock);
    while (pool->pending > 0)
        pthread_cond_wait (&pool->done, &pool->lock);
    pthread_mutex_unlock (&pool->lock);
}

// A regular grid of windows of size n, 'step' apart, centred in w x h.
static piv_field_t *
s_grid (int w, int h, int n, int step)
{
    int nx = (w - n) / step + 1, ny = (h - n) / step + 1;
    piv_field_t *f = piv_field_new (nx, ny);
    if (!f)
        return NULL;
    f->window = n;
    f->step = step;
    // Pixel centres at integer coordinates: a window over columns
    // x0 .. x0 + n - 1 has its centre at x0 + (n - 1) / 2.
    int mx = (w - n - (nx - 1) * step) / 2, my = (h - n - (ny - 1) * step) / 2;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            long k = (long) j * nx + i;
            f->x[k] = mx + i * step + (n - 1) * 0.5f;
            f->y[k] = my + j * step + (n - 1) * 0.5f;
        }
    return f;
}

enum { PREDICT_NONE, PREDICT_OFFSET, PREDICT_DEFORMED };

typedef struct {
    piv_t *self;             // engine
    const float *ia, *ib;    // frames to correlate
    int w, h;                // their size
    const s_plan_t *plan;    // FFTW plans for the window size
    piv_field_t *field;      // out
    int predict;             // PREDICT_*
    const float *mask;       // NULL or mask pixels (0 = outside the flow)
    float *pred_u, *pred_v;  // the predictor at each vector
    const unsigned char *ba, *bb;  // the frames' 8-bit pixels (windows read from these), or NULL
    float *height;           // each vector's correlation peak (sparse.c), or NULL
} s_corr_job_t;


// Four floats: the hot loops below are written with GCC vector extensions
// so that their sums and maxima use SIMD registers and several accumulators;
// plain C loops there are bound by the latency of one long chain of adds.
typedef int v4si __attribute__ ((vector_size (16)));

#if defined(__clang__)
#define SHUFFLE2(v, w, a, b, c, d) __builtin_shufflevector ((v), (w), a, b, c, d)
#else
#define SHUFFLE2(v, w, a, b, c, d) __builtin_shuffle ((v), (w), (v4si) {a, b, c, d})
#endif

static inline void
s_store (float *p, v4sf v)
{
    memcpy (p, &v, sizeof v);
}

static inline v4sf
s_vmax (v4sf a, v4sf b)
{
#if defined(__SSE__)
    return __builtin_ia32_maxps (a, b);  // a > b ? a : b, one instruction
#else
    v4si gt = a > b;
    return (v4sf) (((v4si) a & gt) | ((v4si) b & ~gt));
#endif
}

static inline float
s_hmax (v4sf v)
{
    float m = v[0];
    for (int i = 1; i < 4; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

// Index i (-n <= i < 2 n) of a circular plane of n rows or columns, modulo
// n: any even n is a window size (issue 25), so no mask of n - 1.
static inline int
s_wrap (int i, int n)
{
    return i < 0 ? i + n : (i >= n ? i - n : i);
}

// Copies the n x n window at (x0, y0) of a masked frame, its mean over the
// flow pixels removed and the others 0. Returns the sum of squares left:
// zero means an empty window. (Unmasked windows: s_window_pair.)
static float
s_window (const float *img, const float *mask, int w, int x0, int y0, int n, float *dst)
{
    const float *src = img + (long) y0 * w + x0;
    const float *m = mask + (long) y0 * w + x0;
    float sum = 0, count = 0, energy = 0;
    for (int r = 0; r < n; r++, src += w, m += w)
        for (int c = 0; c < n; c++) {
            float in = m[c] != 0;
            sum += src[c] * in;
            count += in;
        }
    float mean = count > 0 ? sum / count : 0;
    src = img + (long) y0 * w + x0;
    m = mask + (long) y0 * w + x0;
    for (int r = 0; r < n; r++, src += w, m += w)
        for (int c = 0; c < n; c++) {
            float d = m[c] != 0 ? src[c] - mean : 0;
            dst[r * n + c] = d;
            energy += d * d;
        }
    return energy;
}

// Both windows of a vector without a mask, straight into the transform's
// input z = A + i B (interleaved), their means left in: a mean only adds
// to the transform at frequency 0, which s_inverse sets to 0 in the cross
// spectrum (the same correlation as of the windows less their means, and a
// pass over each window and its copy fewer). Returns 0, or -1 when either
// window is empty (all its pixels equal). n is even: four pixels at a time,
// the last two of a row one by one where n is not a multiple of 4.
static int
s_window_pair (const float *ia, const float *ib, int w, int ax, int ay, int bx, int by, int n,
               float *z)
{
    const float *pa = ia + (long) ay * w + ax, *pb = ib + (long) by * w + bx;
    // Lanes that differ from each window's first pixel.
    const v4sf a0 = {pa[0], pa[0], pa[0], pa[0]}, b0 = {pb[0], pb[0], pb[0], pb[0]};
    v4si da = {0}, db = {0};
    int ta = 0, tb = 0;  // the same for the pixels of the rows' tails
    const int n4 = n & ~3;  // the pixels of a row taken four at a time
    for (int r = 0; r < n; r++, pa += w, pb += w) {
        float *d = z + 2 * r * n;
        // The next windows along the row start up to a window further on:
        // ask for those lines now, or the copy waits on memory (the rows of
        // a window are too many streams for the hardware prefetcher).
        __builtin_prefetch (pa + n, 0, 0);
        __builtin_prefetch (pa + n + 16, 0, 0);
        __builtin_prefetch (pb + n, 0, 0);
        __builtin_prefetch (pb + n + 16, 0, 0);
        for (int c = 0; c < n4; c += 4) {
            v4sf a = v4_load (pa + c), b = v4_load (pb + c);
            s_store (d + 2 * c, SHUFFLE2 (a, b, 0, 4, 1, 5));
            s_store (d + 2 * c + 4, SHUFFLE2 (a, b, 2, 6, 3, 7));
            da |= a != a0;
            db |= b != b0;
        }
        for (int c = n4; c < n; c++) {
            d[2 * c] = pa[c];
            d[2 * c + 1] = pb[c];
            ta |= pa[c] != a0[0];
            tb |= pb[c] != b0[0];
        }
    }
    return ((da[0] | da[1] | da[2] | da[3]) || ta) && ((db[0] | db[1] | db[2] | db[3]) || tb)
               ? 0
               : -1;
}

// s_window_pair from 8-bit frames (piv_image_bytes): the same values in z,
// from a quarter of the memory. n is even: eight pixels at a time, the
// rest of a row (2, 4 or 6) one by one.
static int
s_window_pair8 (const unsigned char *ia, const unsigned char *ib, int w, int ax, int ay, int bx,
                int by, int n, float *z)
{
    const unsigned char *pa = ia + (long) ay * w + ax, *pb = ib + (long) by * w + bx;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128 ();
    const __m128i a0 = _mm_set1_epi8 ((char) pa[0]), b0 = _mm_set1_epi8 ((char) pb[0]);
    const unsigned char first_a = pa[0], first_b = pb[0];
    __m128i da = zero, db = zero;
    int ta = 0, tb = 0;     // a tail's pixel differed from the first
    const int n8 = n & ~7;  // the pixels of a row taken eight at a time
    for (int r = 0; r < n; r++, pa += w, pb += w) {
        float *d = z + 2 * r * n;
        __builtin_prefetch (pa + n, 0, 0);
        __builtin_prefetch (pb + n, 0, 0);
        for (int c = 0; c < n8; c += 8) {
            // Eight pixels of each, interleaved a0 b0 a1 b1 ..., widened to
            // 32 bits and converted.
            __m128i a = _mm_loadl_epi64 ((const __m128i *) (pa + c));
            __m128i b = _mm_loadl_epi64 ((const __m128i *) (pb + c));
            da = _mm_or_si128 (da, _mm_xor_si128 (a, a0));
            db = _mm_or_si128 (db, _mm_xor_si128 (b, b0));
            __m128i ab = _mm_unpacklo_epi8 (a, b);
            __m128i lo = _mm_unpacklo_epi8 (ab, zero), hi = _mm_unpackhi_epi8 (ab, zero);
            _mm_storeu_ps (d + 2 * c, _mm_cvtepi32_ps (_mm_unpacklo_epi16 (lo, zero)));
            _mm_storeu_ps (d + 2 * c + 4, _mm_cvtepi32_ps (_mm_unpackhi_epi16 (lo, zero)));
            _mm_storeu_ps (d + 2 * c + 8, _mm_cvtepi32_ps (_mm_unpacklo_epi16 (hi, zero)));
            _mm_storeu_ps (d + 2 * c + 12, _mm_cvtepi32_ps (_mm_unpackhi_epi16 (hi, zero)));
        }
        for (int c = n8; c < n; c++) {
            d[2 * c] = pa[c];
            d[2 * c + 1] = pb[c];
            ta |= pa[c] != first_a;
            tb |= pb[c] != first_b;
        }
    }
    // Empty: none of the eight loaded bytes ever differed from the first pixel.
    int ea = (_mm_movemask_epi8 (_mm_cmpeq_epi8 (da, zero)) & 0xff) == 0xff && !ta;
    int eb = (_mm_movemask_epi8 (_mm_cmpeq_epi8 (db, zero)) & 0xff) == 0xff && !tb;
    return ea || eb ? -1 : 0;
#else
    const unsigned char a0 = pa[0], b0 = pb[0];
    int da = 0, db = 0;
    for (int r = 0; r < n; r++, pa += w, pb += w) {
        float *d = z + 2 * r * n;
        for (int c = 0; c < n; c++) {
            d[2 * c] = pa[c];
            d[2 * c + 1] = pb[c];
            da |= pa[c] != a0;
            db |= pb[c] != b0;
        }
    }
    return da && db ? 0 : -1;
#endif
}

// The largest of n values (n >= 8): eight at a time, the rest (a window of
// n % 4 == 2 px has planes of 8 k + 4 values) one by one.
static float
s_max (const float *p, int n)
{
    v4sf m0 = v4_load (p), m1 = v4_load (p + 4);
    int k = 8;
    for (; k + 8 <= n; k += 8) {
        m0 = s_vmax (v4_load (p + k), m0);
        m1 = s_vmax (v4_load (p + k + 4), m1);
    }
    float top = s_hmax (s_vmax (m0, m1));
    for (; k < n; k++)
        top = p[k] > top ? p[k] : top;
    return top;
}

// Index of the first largest of n values (n >= 32): the maxima of 32-value
// blocks with SIMD (the last one shorter where n is not a multiple of 32),
// then a scan of the block that holds it.
static int
s_argmax (const float *p, int n)
{
    int best = 0;
    float top = s_max (p, 32);
    for (int b = 32; b < n; b += 32) {
        float m = p[b];
        if (b + 32 <= n)
            m = s_max (p + b, 32);
        else
            for (int k = b + 1; k < n; k++)
                m = p[k] > m ? p[k] : m;
        if (m > top) {
            top = m;
            best = b;
        }
    }
    while (p[best] != top)
        best++;
    return best;
}

// Correlation peaks kept per window: the highest gives the vector; the
// others are candidates for the median test when the highest is rejected.
#define PEAKS 3

float
piv_peak_gauss3 (float l, float c, float r)
{
    float d;
    if (l > 0 && c > 0 && r > 0) {
        float ll = logf (l), lc = logf (c), lr = logf (r);
        float den = 2 * ll - 4 * lc + 2 * lr;
        d = den != 0 ? (ll - lr) / den : 0;
    }
    else {
        float den = 2 * l - 4 * c + 2 * r;
        d = den != 0 ? (l - r) / den : 0;
    }
    return d > 1 ? 1 : (d < -1 ? -1 : d);
}

// The fraction of an n px window that overlaps itself moved by s px.
static inline float
s_overlap (int s, int n)
{
    float f = 1 - (float) abs (s) / n;
    return f > 0.5f / n ? f : 0.5f / n;
}

// A correlation peak: the displacement of B from A it stands for.
typedef struct {
    float dx, dy;  // displacement of B from A, px
    float height;  // correlation value (0: no such peak)
} s_peak_t;

// Where a vector's windows are and what its correlation is measured from.
typedef struct {
    long k;              // the vector
    int ax, ay, bx, by;  // top left corners of its windows in A and B
    float bu, bv;        // displacement the windows' placing stands for
} s_slot_t;

// Places vector k's windows (by the predictor in offset mode). Returns 0,
// or -1 when the vector cannot be measured (its centre masked).
static int
s_place (const s_corr_job_t *job, long k, s_slot_t *sl)
{
    const piv_field_t *f = job->field;
    int n = job->plan->n, w = job->w, h = job->h;
    if (job->mask
        && job->mask[(long) lrintf (f->y[k] - 0.5f) * w + lrintf (f->x[k] - 0.5f)] == 0)
        return -1;
    int x0 = (int) (f->x[k] - (n - 1) * 0.5f), y0 = (int) (f->y[k] - (n - 1) * 0.5f);
    float pu = job->pred_u[k], pv = job->pred_v[k];
    *sl = (s_slot_t) {k, x0, y0, x0, y0, 0, 0};
    if (job->predict == PREDICT_OFFSET) {
        // Move A back and B forward by half the rounded predictor each,
        // keeping both windows inside the image.
        int ou = (int) lrintf (pu), ov = (int) lrintf (pv);
        int ax = x0 - ou / 2, ay = y0 - ov / 2, bx = ax + ou, by = ay + ov;
        sl->ax = ax < 0 ? 0 : (ax > w - n ? w - n : ax);
        sl->ay = ay < 0 ? 0 : (ay > h - n ? h - n : ay);
        sl->bx = bx < 0 ? 0 : (bx > w - n ? w - n : bx);
        sl->by = by < 0 ? 0 : (by > h - n ? h - n : by);
        sl->bu = (float) (sl->bx - sl->ax), sl->bv = (float) (sl->by - sl->ay);
    }
    else if (job->predict == PREDICT_DEFORMED)
        sl->bu = pu, sl->bv = pv;
    return 0;
}

// The slot's windows as z = A + i B, transformed into wk->spec[i]. Returns
// 0, or -1 for an empty window.
static int
s_transform (const s_corr_job_t *job, const s_slot_t *sl, s_work_t *wk, int i)
{
    int n = job->plan->n;
    float *z = (float *) wk->z;
    if (job->mask) {
        float ea = s_window (job->ia, job->mask, job->w, sl->ax, sl->ay, n, wk->ra);
        float eb = s_window (job->ib, job->mask, job->w, sl->bx, sl->by, n, wk->rb);
        if (!(ea > 0) || !(eb > 0))
            return -1;
        // Interleaved four values at a time.
        for (int k = 0; k < n * n; k += 4) {
            v4sf a = v4_load (wk->ra + k), b = v4_load (wk->rb + k);
            s_store (z + 2 * k, SHUFFLE2 (a, b, 0, 4, 1, 5));
            s_store (z + 2 * k + 4, SHUFFLE2 (a, b, 2, 6, 3, 7));
        }
    }
    else if (job->ba) {
        if (s_window_pair8 (job->ba, job->bb, job->w, sl->ax, sl->ay, sl->bx, sl->by, n, z) != 0)
            return -1;
    }
    else if (s_window_pair (job->ia, job->ib, job->w, sl->ax, sl->ay, sl->bx, sl->by, n, z) != 0)
        return -1;
    fftwf_execute_dft (job->plan->forward, wk->z, wk->spec[i]);
    return 0;
}

// The cross spectrum 4 conj (A) B of two frequencies k, k + 1 of one
// window's Z = A + i B, as [re im re im], from P = Z (k), Z (k + 1) and
// M = Z (-k), Z (-k - 1): A (k) = (P + conj M) / 2 and B (k) = (P - conj
// M) / 2i, so 4 conj (A) B = 2 Im (M P) - i (|P|^2 - |M|^2), Im (M P) =
// Mr Pi + Mi Pr. The factor 4 changes neither a peak's place nor the ratios
// used below.
static inline v4sf
s_cross2 (v4sf p, v4sf m)
{
    const v4sf two_one = {2, 1, 2, 1};
    v4sf prod = m * SHUFFLE2 (p, p, 1, 0, 3, 2);  // mr pi, mi pr
    v4sf sq = m * m - p * p;                       // mr^2 - pr^2, mi^2 - pi^2
    return (SHUFFLE2 (prod, sq, 0, 4, 2, 6) + SHUFFLE2 (prod, sq, 1, 5, 3, 7)) * two_one;
}

// The same for one frequency: P at p[0..1], M at m[0..1], into c[0..1],
// summed in s_cross2's order (the same values to the bit).
static inline void
s_cross1 (const float *p, const float *m, float *c)
{
    c[0] = (m[0] * p[1] + m[1] * p[0]) * 2;
    c[1] = (m[0] * m[0] - p[0] * p[0]) + (m[1] * m[1] - p[1] * p[1]);
}

// One row pair's step of s_cross_plane: W at (ky, kx) and (n - ky, n - kx)
// from the windows' transforms along rows p1, p2 (ky) and m1, m2 (n - ky),
// into row and mrow; kx 0 or n - 1 (their mirrors are not a pair in
// memory).
static inline void
s_cross_edge (int n, int kx, const float *p1, const float *m1, const float *p2,
              const float *m2, int count, float *row, float *mrow)
{
    int mx = s_wrap (n - kx, n);
    float c1[2], c2[2] = {0, 0};
    s_cross1 (p1 + 2 * kx, m1 + 2 * mx, c1);
    if (count == 2)
        s_cross1 (p2 + 2 * kx, m2 + 2 * mx, c2);
    row[2 * kx] = c1[0] - c2[1];
    row[2 * kx + 1] = c1[1] + c2[0];
    mrow[2 * mx] = c1[0] + c2[1];
    mrow[2 * mx + 1] = -c1[1] + c2[0];
}

// The same for kx and kx + 1 (1 <= kx, kx + 1 <= n - 2) with SIMD, their
// mirrors n - kx - 1, n - kx loaded and swapped.
static inline void
s_cross_pair (int n, int kx, const float *p1, const float *m1, const float *p2,
              const float *m2, int count, float *row, float *mrow)
{
    const v4sf flip = {-1, 1, -1, 1}, conj = {1, -1, 1, -1};
    v4sf m = v4_load (m1 + 2 * (n - kx - 1));
    v4sf c1 = s_cross2 (v4_load (p1 + 2 * kx), SHUFFLE2 (m, m, 2, 3, 0, 1));
    v4sf out = c1, mout = c1 * conj;
    if (count == 2) {
        m = v4_load (m2 + 2 * (n - kx - 1));
        v4sf c2 = s_cross2 (v4_load (p2 + 2 * kx), SHUFFLE2 (m, m, 2, 3, 0, 1));
        v4sf swapped = SHUFFLE2 (c2, c2, 1, 0, 3, 2);  // C2i C2r
        out += swapped * flip;                         // + i C2
        mout += swapped;                               // + i conj C2
    }
    s_store (row + 2 * kx, out);
    s_store (mrow + 2 * (n - kx - 1), SHUFFLE2 (mout, mout, 2, 3, 0, 1));
}

// W = C1 + i C2 over the whole n x n plane from the windows' transforms s1,
// s2 (count 1: C2 = 0). Both cross spectra are Hermitian (the
// correlations are real), so the inverse transform of W holds the first
// correlation in its real part and the second in its imaginary part: one
// complex inverse transform for two windows, which FFTW does in about half
// the time of one half-complex-to-real transform of this size (20 against
// 35 ms for a 2048^2 frame's 16129 windows of 32 px). The same symmetry
// gives W (-k) = conj C1 (k) + i conj C2 (k) from the values that give
// W (k): rows ky and n - ky are made together, from half the products (the
// same values to the bit as each on its own: the sums and products are
// the same, in the same order).
static inline void
s_cross_plane (int n, const float *s1, const float *s2, int count, float *w)
{
    for (int ky = 0; ky <= n / 2; ky++) {
        int my = s_wrap (n - ky, n);
        const float *p1 = s1 + 2 * ky * n, *m1 = s1 + 2 * my * n;
        const float *p2 = s2 + 2 * ky * n, *m2 = s2 + 2 * my * n;
        float *row = w + 2 * ky * n, *mrow = w + 2 * my * n;
        s_cross_edge (n, 0, p1, m1, p2, m2, count, row, mrow);
        for (int kx = 1; kx + 1 <= n - 2; kx += 2)
            s_cross_pair (n, kx, p1, m1, p2, m2, count, row, mrow);
        s_cross_edge (n, n - 1, p1, m1, p2, m2, count, row, mrow);
    }
}

#if defined(__x86_64__) || defined(__i386__)
// s_cross_plane of two windows, four frequencies at a time in AVX2's eight
// floats: the same operations on the same values, so the same results to
// the bit (C11 contracts no multiply-add into an FMA). Chosen at run time
// (s_inverse): the build targets any x86-64.
typedef float v8sf __attribute__ ((vector_size (32)));
typedef int v8si __attribute__ ((vector_size (32)));
#if defined(__clang__)
#define SHUFFLE8(v, ...) __builtin_shufflevector ((v), (v), __VA_ARGS__)
#define SHUFFLE8_2(v, w, ...) __builtin_shufflevector ((v), (w), __VA_ARGS__)
#else
#define SHUFFLE8(v, ...) __builtin_shuffle ((v), (v8si) {__VA_ARGS__})
#define SHUFFLE8_2(v, w, ...) __builtin_shuffle ((v), (w), (v8si) {__VA_ARGS__})
#endif
#define SWAP_PAIRS 1, 0, 3, 2, 5, 4, 7, 6     // re, im of each complex value swapped
#define REVERSED 6, 7, 4, 5, 2, 3, 0, 1       // four complex values, last first

__attribute__ ((target ("avx2"))) static inline v8sf
s_cross4 (v8sf p, v8sf m)
{
    const v8sf two_one = {2, 1, 2, 1, 2, 1, 2, 1};
    v8sf prod = m * SHUFFLE8 (p, SWAP_PAIRS);  // mr pi, mi pr
    v8sf sq = m * m - p * p;                   // mr^2 - pr^2, mi^2 - pi^2
    return (SHUFFLE8_2 (prod, sq, 0, 8, 2, 10, 4, 12, 6, 14)
            + SHUFFLE8_2 (prod, sq, 1, 9, 3, 11, 5, 13, 7, 15))
           * two_one;
}

__attribute__ ((target ("avx2"))) static void
s_cross_plane2_avx2 (int n, const float *s1, const float *s2, float *w)
{
    const v8sf flip = {-1, 1, -1, 1, -1, 1, -1, 1}, conj = {1, -1, 1, -1, 1, -1, 1, -1};
    for (int ky = 0; ky <= n / 2; ky++) {
        int my = s_wrap (n - ky, n);
        const float *p1 = s1 + 2 * ky * n, *m1 = s1 + 2 * my * n;
        const float *p2 = s2 + 2 * ky * n, *m2 = s2 + 2 * my * n;
        float *row = w + 2 * ky * n, *mrow = w + 2 * my * n;
        int kx = 1;
        for (; kx + 3 <= n - 2; kx += 4) {
            v8sf p, m, c1, c2;
            memcpy (&p, p1 + 2 * kx, sizeof p);
            memcpy (&m, m1 + 2 * (n - kx - 3), sizeof m);
            c1 = s_cross4 (p, SHUFFLE8 (m, REVERSED));
            memcpy (&p, p2 + 2 * kx, sizeof p);
            memcpy (&m, m2 + 2 * (n - kx - 3), sizeof m);
            c2 = s_cross4 (p, SHUFFLE8 (m, REVERSED));
            v8sf swapped = SHUFFLE8 (c2, SWAP_PAIRS);  // C2i C2r
            v8sf out = c1 + swapped * flip, mout = c1 * conj + swapped;
            mout = SHUFFLE8 (mout, REVERSED);
            memcpy (row + 2 * kx, &out, sizeof out);
            memcpy (mrow + 2 * (n - kx - 3), &mout, sizeof mout);
        }
        // The frequencies left (two where n is a multiple of 4, none
        // otherwise) and the edges, as s_cross_plane makes them.
        for (; kx + 1 <= n - 2; kx += 2)
            s_cross_pair (n, kx, p1, m1, p2, m2, 2, row, mrow);
        s_cross_edge (n, 0, p1, m1, p2, m2, 2, row, mrow);
        s_cross_edge (n, n - 1, p1, m1, p2, m2, 2, row, mrow);
    }
}
#endif

// The inverse transform of the cross spectra of the count (1 or 2)
// windows transformed into wk->spec[]: their correlation planes
// interleaved in wk->z (the first window's in the real parts, the second's
// in the imaginary ones). Frequency 0 is set to 0: it is the windows' means
// (s_window_pair leaves them in).
static void
s_inverse (const s_plan_t *plan, s_work_t *wk, int count)
{
    int n = plan->n;
    float *w = (float *) wk->cross;
    const float *s1 = (const float *) wk->spec[0], *s2 = (const float *) wk->spec[1];
    if (count == 1)
        s_cross_plane (n, s1, s2, 1, w);
#if defined(__x86_64__) || defined(__i386__)
    else if (__builtin_cpu_supports ("avx2"))
        s_cross_plane2_avx2 (n, s1, s2, w);
#endif
    else
        s_cross_plane (n, s1, s2, 2, w);
    w[0] = w[1] = 0;
    fftwf_execute_dft (plan->inverse, wk->cross, wk->z);
}

// The largest value of each row of both planes s_inverse left in o (n x n
// complex): rmax[0][j] of the first, rmax[1][j] of the second. One pass
// over the planes finds both windows' highest peaks and their runners-up
// (s_best).
static void
s_row_maxima (const float *o, int n, float *rmax0, float *rmax1)
{
    for (int j = 0; j < n; j++) {
        const float *row = o + 2 * j * n;
        v4sf m0 = v4_load (row), m1 = v4_load (row + 4);
        int c = 8;
        for (; c + 8 <= 2 * n; c += 8) {
            m0 = s_vmax (m0, v4_load (row + c));
            m1 = s_vmax (m1, v4_load (row + c + 4));
        }
        if (c < 2 * n)  // n % 4 == 2: two values of each plane left
            m0 = s_vmax (m0, v4_load (row + c));
        v4sf m = s_vmax (m0, m1);
        rmax0[j] = m[0] > m[2] ? m[0] : m[2];
        rmax1[j] = m[1] > m[3] ? m[1] : m[3];
    }
}

// Circular distance of indices a and b modulo n.
static inline int
s_cdist (int a, int b, int n)
{
    int d = s_wrap (a - b, n);
    return d > n / 2 ? n - d : d;
}

// The sub-pixel offset (*fx, *fy) of a peak from the logarithms L[j][i]
// of its 3 x 3 neighbourhood (L[1][1] the peak): the least-squares fit of
// ln C = c00 + c10 x + c01 y + c11 x y + c20 x^2 + c02 y^2 over the 9 points
// and the vertex of that paraboloid (Nobach & Honkanen, "Two-dimensional
// Gaussian regression for sub-pixel displacement estimation in particle
// image velocimetry or particle position estimation in particle tracking
// velocimetry", Exp. Fluids 38, 511-515, 2005). Unlike two 3-point fits it
// sees a peak elongated along a diagonal and averages three rows and three
// columns. Returns 0, or -1 where the paraboloid has no maximum within one
// pixel of the peak (the caller then fits per axis).
static int
s_gauss2d (const float L[3][3], float *fx, float *fy)
{
    float c10 = 0, c01 = 0, c11 = 0, c20 = 0, c02 = 0;
    for (int j = -1; j <= 1; j++)
        for (int i = -1; i <= 1; i++) {
            float l = L[j + 1][i + 1];
            c10 += i * l;
            c01 += j * l;
            c11 += i * j * l;
            c20 += (3 * i * i - 2) * l;
            c02 += (3 * j * j - 2) * l;
        }
    c10 /= 6;
    c01 /= 6;
    c11 /= 4;
    c20 /= 6;
    c02 /= 6;
    float det = 4 * c20 * c02 - c11 * c11;
    if (!(c20 < 0 && c02 < 0 && det > 0))
        return -1;
    float x = (c11 * c01 - 2 * c10 * c02) / det, y = (c11 * c10 - 2 * c01 * c20) / det;
    if (!(fabsf (x) <= 1 && fabsf (y) <= 1))
        return -1;
    *fx = x;
    *fy = y;
    return 0;
}

// s_gauss2d on the 3 x 3 neighbourhood of the peak at column pi, row pj of
// the plane cp (as s_fit's; lag sx, sy), each value divided by its two
// axes' overlap weights (s_fit). 0, or -1 where a value is not positive (no logarithm)
// or the fit has no maximum near the peak.
static int
s_fit2d (const float *cp, int stride, int n, int pi, int pj, int sx, int sy, float *fx, float *fy)
{
    float L[3][3];
    for (int dj = -1; dj <= 1; dj++)
        for (int di = -1; di <= 1; di++) {
            float c = cp[stride * (s_wrap (pj + dj, n) * n + s_wrap (pi + di, n))];
            c /= s_overlap (sx + di, n) * s_overlap (sy + dj, n);
            if (!(c > 0))
                return -1;
            L[dj + 1][di + 1] = logf (c);
        }
    return s_gauss2d ((const float (*)[3]) L, fx, fy);
}

// The sub-pixel displacement of the peak at column pi, row pj of the
// correlation plane whose value at (i, j) is cp[stride * (j * n + i)], by
// the estimator 'subpixel' (PIV_SUBPIXEL_*).
static void
s_fit (const float *cp, int stride, int n, int pi, int pj, int subpixel, s_peak_t *peak)
{
    // Fewer particle pairs overlap at larger lags: the correlation at lag s
    // is weighted by (1 - |s| / n) per axis, which pulls the sub-pixel fit
    // towards zero (Westerweel 1997); divide it out.
    int sx = pi >= n / 2 ? pi - n : pi, sy = pj >= n / 2 ? pj - n : pj;
    float fx, fy;
    if (subpixel == PIV_SUBPIXEL_GAUSS2D && s_fit2d (cp, stride, n, pi, pj, sx, sy, &fx, &fy) == 0) {
        peak->dx = sx + fx;
        peak->dy = sy + fy;
        return;
    }
    int il = s_wrap (pi - 1, n), ir = s_wrap (pi + 1, n);
    int ju = s_wrap (pj - 1, n), jd = s_wrap (pj + 1, n);
    float c = cp[stride * (pj * n + pi)];
    fx = piv_peak_gauss3 (cp[stride * (pj * n + il)] / s_overlap (sx - 1, n),
                          c / s_overlap (sx, n), cp[stride * (pj * n + ir)] / s_overlap (sx + 1, n));
    fy = piv_peak_gauss3 (cp[stride * (ju * n + pi)] / s_overlap (sy - 1, n),
                          c / s_overlap (sy, n), cp[stride * (jd * n + pi)] / s_overlap (sy + 1, n));
    peak->dx = sx + fx;
    peak->dy = sy + fy;
}

// The highest peak of the plane whose value at (i, j) is cp[2 * (j * n +
// i)] and whose row maxima are rmax, into peaks[0], and the height of the
// next one outside its 5 x 5 neighbourhood into peaks[1].height: the first
// of s_peaks's results with npeaks 1, without a copy of the plane or a
// pass to blank and search it. Returns 0, or -1 for a flat correlation.
static int
s_best (const float *cp, const float *rmax, int n, int subpixel, s_peak_t *peaks)
{
    int pj = 0;
    for (int j = 1; j < n; j++)
        if (rmax[j] > rmax[pj])
            pj = j;
    float top = rmax[pj];
    if (!(top > 0))
        return -1;
    const float *row = cp + 2 * pj * n;
    int pi = 0;
    while (row[2 * pi] != top)
        pi++;
    peaks[0].height = top;
    s_fit (cp, 2, n, pi, pj, subpixel, &peaks[0]);
    // The runner-up: whole rows away from the peak by rmax, the five rows
    // through its neighbourhood value by value, the five columns through it
    // left out (the n - 5 others: from pi + 3 on, circularly).
    float second = -1e30f;
    for (int j = 0; j < n; j++) {
        if (s_cdist (j, pj, n) > 2) {
            second = rmax[j] > second ? rmax[j] : second;
            continue;
        }
        // Columns pi + 3 .. pi + n - 3 circularly: up to the row's end,
        // then on from its start.
        const float *r = cp + 2 * j * n;
        int from = pi + 3, to = pi + n - 3;
        for (int x = from; x <= to && x < n; x++)
            second = r[2 * x] > second ? r[2 * x] : second;
        for (int x = from >= n ? from - n : 0; x <= to - n; x++)
            second = r[2 * x] > second ? r[2 * x] : second;
    }
    peaks[1].height = second > top * 1e-3f ? second : 0;
    return 0;
}

// The peaks of correlation plane cp (n x n), highest first, into
// peaks[0 .. npeaks - 1] (height 0: no such peak); with npeaks 1,
// peaks[1].height still gets the second peak's height, for the peak ratio,
// at no extra cost. Each peak is found, fitted on the plane as computed,
// then blanked with its 5 x 5 neighbourhood so that the next maximum is
// another peak; the fit of a later peak must not see an earlier blank: with
// several peaks the blanking is on a copy in scratch, with one on cp
// itself. Returns 0, or -1 for a flat correlation.
static int
s_peaks (float *cp, float *scratch, int n, int subpixel, s_peak_t *peaks, int npeaks)
{
    float *blank = cp;
    if (npeaks > 1) {
        blank = scratch;
        memcpy (blank, cp, sizeof (float) * n * n);
    }
    float top = 0;
    for (int q = 0; q < npeaks; q++) {
        int best = s_argmax (blank, n * n);
        float height = blank[best];
        if (q == 0) {
            if (!(height > 0))
                return -1;
            top = height;
        }
        else if (!(height > top * 1e-3f)) {
            peaks[q].height = 0;
            break;
        }
        peaks[q].height = height;
        int pi = best % n, pj = best / n;
        s_fit (cp, 1, n, pi, pj, subpixel, &peaks[q]);
        for (int dj = -2; dj <= 2; dj++) {
            float *row = blank + s_wrap (pj + dj, n) * n;
            for (int di = -2; di <= 2; di++)
                row[s_wrap (pi + di, n)] = -1e30f;
        }
    }
    if (npeaks == 1) {
        float second = s_max (blank, n * n);
        peaks[1].height = second > top * 1e-3f ? second : 0;
    }
    return 0;
}

// Vector k's windows and their correlation plane alone, into plane (n x n;
// sl: where its windows are). 0, or -1 when the vector cannot be measured
// (masked, empty window).
static int
s_correlate (const s_corr_job_t *job, long k, s_work_t *wk, float *plane, s_slot_t *sl)
{
    if (s_place (job, k, sl) != 0 || s_transform (job, sl, wk, 0) != 0)
        return -1;
    s_inverse (job->plan, wk, 1);
    int n = job->plan->n;
    const float *o = (const float *) wk->z;
    for (int i = 0; i < n * n; i++)
        plane[i] = o[2 * i];
    return 0;
}

// Measures vector k of the job's grid alone: its windows, their
// correlation, 'npeaks' peaks as displacements (predictor included).
// Returns 0, or -1 when the vector cannot be measured (masked, empty
// window, flat correlation).
static int
s_measure (const s_corr_job_t *job, long k, s_work_t *wk, s_peak_t *peaks, int npeaks)
{
    s_slot_t sl;
    if (s_correlate (job, k, wk, wk->corr, &sl) != 0
        || s_peaks (wk->corr, wk->ra, job->plan->n, job->self->settings.subpixel, peaks, npeaks) != 0)
        return -1;
    for (int q = 0; q < npeaks; q++) {
        peaks[q].dx += sl.bu;
        peaks[q].dy += sl.bv;
    }
    return 0;
}

// piv_plane_fn for sparse.c: vector k's correlation plane, as s_measure
// makes it, in thread part's buffers.
static int
s_plane (void *arg, long k, int part, float *plane, float *bu, float *bv)
{
    const s_corr_job_t *job = arg;
    s_slot_t sl;
    if (s_correlate (job, k, &job->self->work[part], plane, &sl) != 0)
        return -1;
    *bu = sl.bu, *bv = sl.bv;
    return 0;
}

// piv_plane_peak_fn for sparse.c: s_peaks's first peak.
static int
s_plane_peak (void *arg, float *plane, int n, float *dx, float *dy)
{
    const s_corr_job_t *job = arg;
    s_peak_t peaks[2] = {{0, 0, 0}, {0, 0, 0}};
    if (s_peaks (plane, NULL, n, job->self->settings.subpixel, peaks, 1) != 0)
        return -1;
    *dx = peaks[0].dx, *dy = peaks[0].dy;
    return 0;
}

// Vector k unmeasured: it keeps the predictor (or zero) for the next pass.
static void
s_unmeasured (const s_corr_job_t *job, long k)
{
    piv_field_t *f = job->field;
    int keep = job->predict == PREDICT_DEFORMED;
    f->u[k] = keep ? job->pred_u[k] : 0;
    f->v[k] = keep ? job->pred_v[k] : 0;
    f->peak_ratio[k] = 0;
    f->flags[k] = PIV_FLAG_INVALID;
}

// The vectors of the count slots whose windows wk->spec[] holds.
static void
s_finish (const s_corr_job_t *job, s_work_t *wk, const s_slot_t *sl, int count)
{
    piv_field_t *f = job->field;
    int n = job->plan->n;
    float rmax[2][PIV_MAX_WINDOW];
    s_inverse (job->plan, wk, count);
    s_row_maxima ((const float *) wk->z, n, rmax[0], rmax[1]);
    for (int i = 0; i < count; i++) {
        s_peak_t peaks[2] = {{0, 0, 0}, {0, 0, 0}};
        long k = sl[i].k;
        if (s_best ((const float *) wk->z + i, rmax[i], n, job->self->settings.subpixel, peaks)
            != 0) {
            s_unmeasured (job, k);
            continue;
        }
        f->u[k] = peaks[0].dx + sl[i].bu;
        f->v[k] = peaks[0].dy + sl[i].bv;
        f->peak_ratio[k] = peaks[1].height > 0 ? peaks[0].height / peaks[1].height : 1000;
        if (job->height)
            job->height[k] = peaks[0].height;
        f->flags[k] = PIV_FLAG_VALID;
    }
}

// The vectors of rows [first, last): vectors i and i + 1 of a row (i even)
// share the inverse transform (s_cross_plane) when both can be measured.
// The pairs are fixed by the grid, not by the threads' shares of it: the
// rounding of a vector's correlation depends on its partner, and the
// fields must be the same to the bit in any number of threads.
static void
s_corr_rows (void *arg, int first, int last, int thread)
{
    s_corr_job_t *job = arg;
    piv_field_t *f = job->field;
    s_work_t *wk = &job->self->work[thread];
    for (int j = first; j < last; j++)
        for (int i = 0; i < f->nx; i += 2) {
            s_slot_t sl[2];
            int have = 0;
            long k0 = (long) j * f->nx + i, end = k0 + (i + 1 < f->nx ? 2 : 1);
            for (long k = k0; k < end; k++)
                if (s_place (job, k, &sl[have]) != 0 || s_transform (job, &sl[have], wk, have) != 0)
                    s_unmeasured (job, k);
                else
                    have++;
            if (have)
                s_finish (job, wk, sl, have);
        }
}

// The median test's candidates for a rejected vector: the next peaks of
// its window, measured again (rejections are few; keeping every window's
// peaks would cost more than this). Called by the test's threads at once:
// they take turns at the first thread's buffers (few rejections, little
// waiting).
static int
s_candidates (void *arg, long k, float *u, float *v, int max)
{
    s_corr_job_t *job = arg;
    s_peak_t peaks[PEAKS];
    int count = 0;
    pthread_mutex_lock (&job->self->candidates_lock);
    int measured = s_measure (job, k, &job->self->work[0], peaks, PEAKS) == 0;
    pthread_mutex_unlock (&job->self->candidates_lock);
    if (measured)
        for (int q = 1; q < PEAKS && count < max && peaks[q].height > 0; q++) {
            u[count] = peaks[q].dx;
            v[count] = peaks[q].dy;
            count++;
        }
    return count;
}

// Each vector's uncertainty (piv/uncertainty.h) from the windows the final
// run correlated, where its correlation peak put B's: the rows [first,
// last) of the field. INVALID vectors (no measurement) get NaN.
typedef struct {
    const s_corr_job_t *job;           // the final run's
    piv_uncertainty_frames_t frames;  // its frames
} s_unc_job_t;

static void
s_unc_rows (void *arg, int first, int last, int thread)
{
    const s_unc_job_t *uj = arg;
    const s_corr_job_t *job = uj->job;
    piv_field_t *f = job->field;
    float *scratch = job->self->work[thread].unc;
    for (long k = (long) first * f->nx; k < (long) last * f->nx; k++) {
        s_slot_t sl;
        f->sigma_u[k] = f->sigma_v[k] = NAN;
        if (f->flags[k] == PIV_FLAG_INVALID || s_place (job, k, &sl) != 0)
            continue;
        int px = (int) lrintf (f->u[k] - sl.bu), py = (int) lrintf (f->v[k] - sl.bv);
        piv_uncertainty_window (piv_uncertainty_method (&job->self->settings), &uj->frames,
                                job->plan->n, sl.ax, sl.ay, sl.bx, sl.by, px, py, scratch,
                                &f->sigma_u[k], &f->sigma_v[k]);
    }
}

typedef struct {
    piv_t *self;                    // engine
    const piv_field_t *predictor;  // previous pass
    int w, h;                       // frame size
} s_deform_job_t;

static void
s_deform_part (void *arg, int first, int last, int thread)
{
    (void) thread;
    s_deform_job_t *job = arg;
    piv_t *self = job->self;
    int sym = self->settings.symmetric;
    piv_deform_rows (self->settings.deform, sym ? self->src_a : NULL, self->def_a,
                     sym ? -0.5f : 0, self->src_b, self->def_b, sym ? 0.5f : 1.0f, job->w,
                     job->h, job->predictor, first, last);
}

typedef struct {
    piv_t *self;                   // engine
    const float *a, *b;            // original frames
    int w, h;                      // their size
} s_prepare_job_t;

static void
s_prepare_part (void *arg, int first, int last, int thread)
{
    (void) thread;
    s_prepare_job_t *job = arg;
    for (int i = first; i < last; i++)
        piv_deform_prepare (job->self->settings.deform, i == 0 ? job->a : job->b,
                            i == 0 ? job->self->src_a : job->self->src_b, job->w, job->h);
}

// Smooths u and v in place with the 3 x 3 binomial kernel (1 2 1)^2 / 16,
// renormalised at the edges. Used on the predictor only: unfiltered, the
// noise of small windows feeds back through the deformation and grows with
// each iteration (Schrijer & Scarano 2008); the final field is not smoothed.
static int
s_smooth (piv_field_t *f)
{
    long n = (long) f->nx * f->ny;
    float *tmp = malloc (2 * (size_t) n * sizeof (float));
    if (!tmp)
        return -1;
    static const float k3[3] = {1, 2, 1};
    for (int j = 0; j < f->ny; j++)
        for (int i = 0; i < f->nx; i++) {
            float su = 0, sv = 0, sw = 0;
            for (int b = -1; b <= 1; b++)
                for (int a = -1; a <= 1; a++) {
                    int x = i + a, y = j + b;
                    if (x < 0 || y < 0 || x >= f->nx || y >= f->ny)
                        continue;
                    long k = (long) y * f->nx + x;
                    if (f->flags[k] == PIV_FLAG_INVALID)
                        continue;
                    float wt = k3[a + 1] * k3[b + 1];
                    su += wt * f->u[k];
                    sv += wt * f->v[k];
                    sw += wt;
                }
            long k = (long) j * f->nx + i;
            tmp[k] = sw > 0 ? su / sw : f->u[k];
            tmp[n + k] = sw > 0 ? sv / sw : f->v[k];
        }
    memcpy (f->u, tmp, (size_t) n * sizeof (float));
    memcpy (f->v, tmp + n, (size_t) n * sizeof (float));
    free (tmp);
    return 0;
}

// Smooths the field in place with piv_smoothn (robust): vectors flagged
// valid weigh 1, replaced and invalid ones (masked windows among them) 0,
// so that they neither pull the surface nor spread. As a predictor
// ('final' 0) every vector takes the surface, the others filled in from
// the valid ones; as the final field invalid vectors keep their values,
// and valid ones the robust weights call outliers become REPLACED. s > 0
// fixes the smoothing, 0 leaves it to GCV. 0, or -1 (no memory).
static int
s_smooth_pls (piv_field_t *f, double s, int final, piv_pool_t *pool)
{
    long n = (long) f->nx * f->ny;
    float *w = calloc (3 * (size_t) n, sizeof (float));
    if (!w)
        return -1;
    float *zu = w + n, *zv = w + 2 * n;
    for (long k = 0; k < n; k++)
        w[k] = f->flags[k] == PIV_FLAG_VALID;
    int rc = piv_smoothn_pool (f->nx, f->ny, f->u, f->v, w, s, 1, pool, zu, zv, NULL, NULL);
    for (long k = 0; rc == 0 && k < n; k++) {
        if (final && f->flags[k] == PIV_FLAG_INVALID)
            continue;
        f->u[k] = zu[k];
        f->v[k] = zv[k];
    }
    free (w);
    return rc;
}

// RMS over valid vectors of the change from the predictor (pred[k] for u,
// pred[n + k] for v) to the field.
static double
s_correction (const piv_field_t *f, const float *pred)
{
    long n = (long) f->nx * f->ny, count = 0;
    double sum = 0;
    for (long k = 0; k < n; k++)
        if (f->flags[k] == PIV_FLAG_VALID) {
            double du = f->u[k] - pred[k], dv = f->v[k] - pred[n + k];
            sum += du * du + dv * dv;
            count++;
        }
    return count ? sqrt (sum / count) : 0;
}

// Room for the four planes of a deformed pass (16 bytes a pixel: budget.c
// counts them), kept from pair to pair unless twice what this pair needs.
static int
s_reserve (piv_t *self, size_t pixels)
{
    if (pixels <= self->pixels && 2 * pixels >= self->pixels)
        return 0;
    float **bufs[] = {&self->src_a, &self->src_b, &self->def_a, &self->def_b};
    for (int i = 0; i < 4; i++) {
        fftwf_free (*bufs[i]);
        *bufs[i] = fftwf_malloc (pixels * sizeof (float));
        if (!*bufs[i]) {
            self->pixels = 0;
            return -1;
        }
    }
    self->pixels = pixels;
    return 0;
}

// Phase timers, on when PIVFARM_PIV_PHASES is set (read by piv_new): each
// pair's time per phase goes to stderr as wall / CPU of all threads / CPU
// of the calling thread, ms, with the process's page faults so far. The
// calling thread's CPU against the wall shows what the others wait on.
enum { PH_GRID, PH_PREP, PH_DEFORM, PH_CORR, PH_VALID, PH_SMOOTH, PH_COUNT };

typedef struct {
    int on;                  // PIVFARM_PIV_PHASES set
    double wall[PH_COUNT];   // s per phase
    double cpu[PH_COUNT];    // CPU s of the process
    double own[PH_COUNT];    // CPU s of the calling thread
    double t[3];             // the clocks at the last mark
    double start;            // wall at the first mark
} s_phases_t;

static double
s_clock (clockid_t clock)
{
    struct timespec ts;
    clock_gettime (clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Ends phase 'which' (-1: starts the first) at the clocks' current values.
static void
s_phase (s_phases_t *ph, int which)
{
    if (!ph->on)
        return;
    double t[3] = {s_clock (CLOCK_MONOTONIC), s_clock (CLOCK_PROCESS_CPUTIME_ID),
                   s_clock (CLOCK_THREAD_CPUTIME_ID)};
    if (which < 0)
        ph->start = t[0];
    else {
        ph->wall[which] += t[0] - ph->t[0];
        ph->cpu[which] += t[1] - ph->t[1];
        ph->own[which] += t[2] - ph->t[2];
    }
    memcpy (ph->t, t, sizeof t);
}

static void
s_phases_print (const s_phases_t *ph, int nthreads)
{
    static const char *const names[PH_COUNT] = {"grid",  "prepare",    "deform",
                                                "correlate", "validate", "smooth"};
    if (!ph->on)
        return;
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    fprintf (stderr, "piv phases, %d thread(s): %.1f ms, page faults %ld; wall/cpu/own ms:",
             nthreads, (s_clock (CLOCK_MONOTONIC) - ph->start) * 1e3, ru.ru_minflt);
    for (int i = 0; i < PH_COUNT; i++)
        fprintf (stderr, " %s %.1f/%.1f/%.1f", names[i], ph->wall[i] * 1e3, ph->cpu[i] * 1e3,
                 ph->own[i] * 1e3);
    fprintf (stderr, "\n");
}

// ---------------------------------------------------------------------------
// Windows without signal: a window over a part of the frames where there are
// no particle images (a dark body, an unlit strip) correlates the camera's
// noise with itself: its vector is as random as its neighbours', so the
// median test cannot see it, and replacing it invents flow where nothing was
// seen. Its contrast tells it: the standard deviation of its pixels in A and
// B (their geometric mean) below a share of the frame's median window
// contrast (settings' contrast, 0.2) flags it INVALID. Measured on the final
// grid, over the original frames.

typedef struct {
    const piv_field_t *field;       // the final field
    const float *fa, *fb;           // the frames as floats, or NULL
    const unsigned char *ba, *bb;   // or as bytes
    int w, h;                       // their size
    float *contrast;                // out: each vector's window's
} s_contrast_job_t;

static int
s_gcd (int a, int b)
{
    while (b) {
        int t = a % b;
        a = b, b = t;
    }
    return a;
}

// The sums of pixels and of their squares over the blocks of g x g pixels
// that tile the grid's windows from (x00, y00): nbx x nby blocks of the
// frame (bytes, or else floats), clipped to it (count: their pixels, may be
// NULL: the same for both frames); each pixel read once, where
// a window read on its own reads each pixel once per window over it (4
// times at 50 % overlap: 40 ms of a 32 px single pass).
static void
s_block_sums (const unsigned char *bytes, const float *floats, int w, int h, int x00, int y00,
              int g, int nbx, int nby, double *sum, double *sq, int *count)
{
    for (int bj = 0; bj < nby; bj++)
        for (int bi = 0; bi < nbx; bi++) {
            int x0 = x00 + bi * g, y0 = y00 + bj * g;
            int xa = x0 < 0 ? 0 : x0, xb = x0 + g < w ? x0 + g : w;
            int ya = y0 < 0 ? 0 : y0, yb = y0 + g < h ? y0 + g : h;
            double s1 = 0, s2 = 0;
            if (bytes) {
                // Exact: a row of at most 256 pixels of 255 sums in 32 bits
                // (a loop the compiler vectorises), the block in 64.
                int64_t i1 = 0, i2 = 0;
                for (int y = ya; y < yb; y++) {
                    const unsigned char *row = bytes + (size_t) y * w;
                    uint32_t r1 = 0, r2 = 0;
                    for (int x = xa; x < xb; x++) {
                        r1 += row[x];
                        r2 += (uint32_t) row[x] * row[x];
                    }
                    i1 += r1, i2 += r2;
                }
                s1 = (double) i1, s2 = (double) i2;
            }
            else
                for (int y = ya; y < yb; y++)
                    for (int x = xa; x < xb; x++) {
                        double p = floats[(size_t) y * w + x];
                        s1 += p;
                        s2 += p * p;
                    }
            long b = (long) bj * nbx + bi;
            sum[b] = s1, sq[b] = s2;
            if (count)
                count[b] = (xb > xa ? xb - xa : 0) * (yb > ya ? yb - ya : 0);
        }
}

// Each vector's window contrast (job->contrast) from the frames' block sums:
// a window of n px at step 'step' covers (n / g)^2 blocks, g = gcd (n, step).
// 0, or -1 without memory.
static int
s_contrasts (s_contrast_job_t *job)
{
    const piv_field_t *f = job->field;
    int n = f->window, step = f->step > 0 ? f->step : n, g = s_gcd (n, step), m = n / g;
    int x00 = (int) lrintf (f->x[0] - (n - 1) / 2.0f), y00 = (int) lrintf (f->y[0] - (n - 1) / 2.0f);
    int nbx = ((f->nx - 1) * step + n) / g, nby = ((f->ny - 1) * step + n) / g;
    size_t nb = (size_t) nbx * nby;
    double *sum = malloc (4 * nb * sizeof *sum);
    int *count = malloc (nb * sizeof *count);
    if (!sum || !count) {
        free (sum);
        free (count);
        return -1;
    }
    double *sq = sum + nb, *sum_b = sum + 2 * nb, *sq_b = sum + 3 * nb;
    s_block_sums (job->ba, job->fa, job->w, job->h, x00, y00, g, nbx, nby, sum, sq, count);
    s_block_sums (job->bb, job->fb, job->w, job->h, x00, y00, g, nbx, nby, sum_b, sq_b, NULL);
    for (int j = 0; j < f->ny; j++)
        for (int i = 0; i < f->nx; i++) {
            double s1a = 0, s2a = 0, s1b = 0, s2b = 0;
            long pixels = 0;
            for (int bj = j * step / g; bj < j * step / g + m; bj++)
                for (int bi = i * step / g; bi < i * step / g + m; bi++) {
                    long b = (long) bj * nbx + bi;
                    s1a += sum[b], s2a += sq[b], s1b += sum_b[b], s2b += sq_b[b];
                    pixels += count[b];
                }
            double va = 0, vb = 0;
            if (pixels > 0) {
                double ma = s1a / pixels, mb = s1b / pixels;
                va = s2a / pixels - ma * ma, vb = s2b / pixels - mb * mb;
            }
            job->contrast[(long) j * f->nx + i] =
                (float) sqrt (sqrt (va > 0 ? va : 0) * sqrt (vb > 0 ? vb : 0));
        }
    free (sum);
    free (count);
    return 0;
}

static int
s_cmp_float (const void *a, const void *b)
{
    float x = *(const float *) a, y = *(const float *) b;
    return (x > y) - (x < y);
}

// Flags the vectors of windows without signal INVALID; 0, or -1 (memory).
static int
s_no_signal (piv_field_t *field, const s_contrast_job_t *frames, double share)
{
    long count = (long) field->nx * field->ny;
    float *c = malloc (2 * (size_t) count * sizeof *c);
    if (!c)
        return -1;
    s_contrast_job_t job = *frames;
    job.field = field;
    job.contrast = c;
    if (s_contrasts (&job) != 0) {
        free (c);
        return -1;
    }
    memcpy (c + count, c, (size_t) count * sizeof *c);
    qsort (c + count, (size_t) count, sizeof *c, s_cmp_float);
    float floor = (float) (share * c[count + count / 2]);
    // A region, not a window: the median over the vector's 3 x 3 windows,
    // so that a window that only caught few particles among good ones
    // keeps its vector (a hole there would cost its neighbours' vorticity).
    for (int j = 0; j < field->ny; j++)
        for (int i = 0; i < field->nx; i++) {
            float r[9];
            int n = 0;
            for (int b = j - 1; b <= j + 1; b++)
                for (int a = i - 1; a <= i + 1; a++)
                    if (a >= 0 && b >= 0 && a < field->nx && b < field->ny)
                        r[n++] = c[(long) b * field->nx + a];
            if (piv_median (r, n) < floor)
                field->flags[(long) j * field->nx + i] = PIV_FLAG_INVALID;
        }
    free (c);
    return 0;
}

// piv_process on frames a and b as given (preprocessed or not); the test
// of windows without signal reads oa and ob (a and b themselves, or the
// frames before preprocessing: piv_process says which).
static piv_field_t *
s_process (piv_t *self, const piv_image_t *a, const piv_image_t *b, const piv_image_t *oa,
           const piv_image_t *ob, char *err, size_t errlen)
{
    const piv_settings_t *s = &self->settings;
    int w = piv_image_width (a), h = piv_image_height (a);
    if (w != piv_image_width (b) || h != piv_image_height (b)) {
        snprintf (err, errlen, "frames differ in size: %dx%d and %dx%d", w, h,
                  piv_image_width (b), piv_image_height (b));
        return NULL;
    }
    if (w < self->maxn || h < self->maxn) {
        snprintf (err, errlen, "frames of %dx%d are smaller than the %d px window", w, h,
                  self->maxn);
        return NULL;
    }
    if (s->mask && (piv_image_width (s->mask) != w || piv_image_height (s->mask) != h)) {
        snprintf (err, errlen, "mask of %dx%d does not fit frames of %dx%d",
                  piv_image_width (s->mask), piv_image_height (s->mask), w, h);
        return NULL;
    }
    int iterations = s->npasses - 1 + s->final_iterations;
    int deform = s->deform != PIV_DEFORM_OFFSET && iterations > 1;
    if (deform && s_reserve (self, (size_t) w * h) != 0) {
        snprintf (err, errlen, "cannot deform frames of %dx%d: out of memory", w, h);
        return NULL;
    }
    // Windows from the frames' 8-bit pixels where they have them (no mask:
    // masked windows take their means over flow pixels, from floats);
    // floats only where something needs them (deformation's sources).
    const unsigned char *ba = s->mask ? NULL : piv_image_bytes (a);
    const unsigned char *bb = s->mask ? NULL : piv_image_bytes (b);
    if (!ba || !bb)
        ba = bb = NULL;
    const float *fa = NULL, *fb = NULL;
    if ((!ba || deform) && (!(fa = piv_image_cdata (a)) || !(fb = piv_image_cdata (b)))) {
        snprintf (err, errlen, "cannot read frames of %dx%d as floats: out of memory", w, h);
        return NULL;
    }
    s_phases_t ph = {.on = self->phases};
    s_phase (&ph, -1);
    piv_field_t *prev = NULL;
    int prepared = 0;  // interpolation sources made for this pair
    for (int it = 0; it < iterations; it++) {
        int n = s->passes[it < s->npasses ? it : s->npasses - 1];
        int step = n * (100 - s->overlap) / 100;
        piv_field_t *field = s_grid (w, h, n, step > 0 ? step : 1);
        if (!field) {
            piv_field_destroy (&prev);
            snprintf (err, errlen, "cannot make a %d px grid: out of memory", n);
            return NULL;
        }
        long count = (long) field->nx * field->ny;
        // The predictor's u and v, then the vectors' peak heights.
        float *pred = calloc (3 * (size_t) count, sizeof (float));
        if (!pred) {
            piv_field_destroy (&field);
            piv_field_destroy (&prev);
            snprintf (err, errlen, "cannot make a %d px grid: out of memory", n);
            return NULL;
        }
        s_corr_job_t job = {self, fa, fb, w, h,
                            s_plan_get (n), field, PREDICT_NONE,
                            s->mask ? piv_image_cdata (s->mask) : NULL,
                            pred, pred + count, ba, bb,
                            it >= s->npasses - 1 && s->cbc > 0 ? pred + 2 * count : NULL};
        if (prev) {
            for (long k = 0; k < count; k++)
                piv_field_interp (prev, field->x[k], field->y[k], &pred[k], &pred[count + k]);
            // Passes before the final window size only make a predictor:
            // integer window offset serves them as well as deformation, at
            // no cost (measured: 'make bench'). The final size deforms.
            int final = it >= s->npasses - 1;
            job.predict = deform && (final || s->deform_every_pass) ? PREDICT_DEFORMED
                                                                    : PREDICT_OFFSET;
        }
        s_phase (&ph, PH_GRID);
        if (job.predict == PREDICT_DEFORMED) {
            if (!prepared) {
                s_prepare_job_t prep = {self, job.ia, job.ib, w, h};
                piv_pool_run (self->pool, self->nthreads, 2, s_prepare_part, &prep);
                prepared = 1;
                s_phase (&ph, PH_PREP);
            }
            s_deform_job_t dj = {self, prev, w, h};
            piv_pool_run (self->pool, self->nthreads, h, s_deform_part, &dj);
            if (s->symmetric)
                job.ia = self->def_a;
            job.ib = self->def_b;
            job.ba = job.bb = NULL;
            s_phase (&ph, PH_DEFORM);
        }
        piv_pool_run (self->pool, self->nthreads, field->ny, s_corr_rows, &job);
        // Windows that caught too few particles: their neighbours' planes
        // (sparse.c), at the final window size.
        if (it >= s->npasses - 1 && s->cbc > 0) {
            piv_cbc_t cbc = {.plane = s_plane, .peak = s_plane_peak, .arg = &job, .n = n,
                             .height = job.height, .share = s->cbc, .pool = self->pool,
                             .nthreads = self->nthreads};
            if (piv_sparse_correct (field, &cbc) < 0) {
                free (pred);
                piv_field_destroy (&field);
                piv_field_destroy (&prev);
                snprintf (err, errlen, "cannot correct the %d px pass's field: out of memory", n);
                return NULL;
            }
        }
        s_phase (&ph, PH_CORR);
        if (s->peak_ratio_min > 0)
            piv_validate_peak_ratio (field, s->peak_ratio_min);
        for (int v = 0; v < s->median_passes; v++)
            if (piv_validate_median_pool (field, s->median_eps, s->median_threshold,
                                          s->median_curved,
                                          s_candidates, &job, self->pool, self->nthreads) <= 0)
                break;
        // The final window size runs again while it still corrects its
        // predictor by more than s->converge px RMS: a flow with strong
        // gradients needs it, a smooth one does not (and the noise a run
        // adds to the predictor only costs it accuracy).
        s_phase (&ph, PH_VALID);
        int last = it + 1 == iterations;
        if (it >= s->npasses - 1 && prev && s_correction (field, pred) < s->converge)
            last = 1;
        // The uncertainty of the final run's vectors, before the smoother:
        // from the windows this run correlated (deformed by its predictor).
        if (last && piv_uncertainty_method (s) != PIV_UNCERTAINTY_OFF) {
            // The windows from the frames the run read: the 8-bit pixels
            // where it had them (job.ba), else floats.
            s_unc_job_t uj = {&job, {job.ba ? NULL : job.ia, job.ba ? NULL : job.ib, job.ba,
                                     job.bb, w, h}};
            // CS on deformed windows: the predictor's share (uncertainty.h).
            float *scratch = NULL;
            int predictor = piv_uncertainty_method (s) == PIV_UNCERTAINTY_CS
                            && job.predict == PREDICT_DEFORMED;
            if ((!uj.frames.fa && !uj.frames.ba) || piv_field_add_sigma (field) != 0
                || (predictor && !(scratch = malloc (2 * sizeof (float) * (size_t) count)))) {
                free (pred);
                piv_field_destroy (&field);
                piv_field_destroy (&prev);
                snprintf (err, errlen, "cannot measure the uncertainty of the %d px pass: out of memory", n);
                return NULL;
            }
            piv_pool_run (self->pool, self->nthreads, field->ny, s_unc_rows, &uj);
            if (scratch) {
                piv_uncertainty_predictor (field->sigma_u, field->sigma_v, field->nx, field->ny,
                                           scratch);
                free (scratch);
            }
            s_phase (&ph, PH_VALID);
        }
        free (pred);
        int smoothed = 0;
        piv_pool_t *pool = self->nthreads > 1 ? self->pool : NULL;  // the smoother's: 2 threads
        int pls_pred = s->smooth == PIV_SMOOTH_PREDICTOR || s->smooth == PIV_SMOOTH_BOTH;
        int pls_final = s->smooth == PIV_SMOOTH_FINAL || s->smooth == PIV_SMOOTH_BOTH;
        if (!last && pls_pred)
            smoothed = s_smooth_pls (field, s->smooth_s, 0, pool);
        else if (!last && s->smooth_predictor)
            smoothed = s_smooth (field);
        else if (last && pls_final)
            smoothed = s_smooth_pls (field, s->smooth_s, 1, pool);
        // The final field's windows without signal are said so (after the
        // smoother: it had their values as it always had).
        if (smoothed == 0 && last && s->contrast > 0) {
            s_contrast_job_t frames = {NULL, fa, fb, ba, bb, w, h, NULL};
            if (oa != a) {
                // The frames before preprocessing: both as bytes, else both
                // as floats (none: out of memory).
                frames.ba = piv_image_bytes (oa), frames.bb = piv_image_bytes (ob);
                frames.fa = frames.fb = NULL;
                if (!frames.ba || !frames.bb) {
                    frames.ba = frames.bb = NULL;
                    frames.fa = piv_image_cdata (oa), frames.fb = piv_image_cdata (ob);
                    frames.fa = frames.fb ? frames.fa : NULL;
                }
            }
            if ((!frames.ba && !frames.fa) || s_no_signal (field, &frames, s->contrast) != 0)
                smoothed = -1;
        }
        if (smoothed != 0) {
            piv_field_destroy (&field);
            piv_field_destroy (&prev);
            snprintf (err, errlen, "cannot smooth the %d px pass's field: out of memory", n);
            return NULL;
        }
        s_phase (&ph, PH_SMOOTH);
        field->runs = (prev ? prev->runs : 0) + (it >= s->npasses - 1);
        piv_field_destroy (&prev);
        prev = field;
        if (last)
            break;
    }
    s_phases_print (&ph, self->nthreads);
    return prev;
}

piv_field_t *
piv_process (piv_t *self, const piv_image_t *a, const piv_image_t *b, char *err, size_t errlen)
{
    if (!piv_preprocess_on (&self->settings) || piv_image_width (a) != piv_image_width (b)
        || piv_image_height (a) != piv_image_height (b))
        return s_process (self, a, b, a, b, err, errlen);
    piv_image_t *fa = piv_preprocess (a, &self->settings, err, errlen);
    piv_image_t *fb = fa ? piv_preprocess (b, &self->settings, err, errlen) : NULL;
    // Windows without signal are judged on the frames as recorded where
    // capping, high-pass or contrast normalisation changed them: these
    // raise a dark, empty region's camera noise towards the particles'
    // contrast (2image's dark body: 525 vectors found without signal, none
    // with lcn=32, 62 with cap=1). The prefilter alone keeps its frames'.
    const piv_settings_t *s = &self->settings;
    int originals = s->cap > 0 || s->highpass > 0 || s->lcn > 0;
    piv_field_t *field = fb ? s_process (self, fa, fb, originals ? a : fa, originals ? b : fb,
                                         err, errlen)
                            : NULL;
    piv_image_destroy (&fa);
    piv_image_destroy (&fb);
    return field;
}
