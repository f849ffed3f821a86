// synth.c — synthetic PIV image pairs of a known flow: Gaussian particle
// images integrated over the pixel area, a deterministic generator of our
// own (same seed, same images on every platform), camera-like noise.

#include "piv/flow.h"
#include "piv/synth_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Beyond this many particles a request is refused rather than run for ever.
#define MAX_PARTICLES ((double) 1e9)

// Positions are multiples of 2^-20 px: then m - d/2 and m + d/2 are exact for
// integer d, and a uniform integer shift moves a frame by exactly that much.
#define POSITION_QUANTUM (1.0 / 1048576.0)

// Particles drawn and sorted at a time, and the rows of one sorting band.
#define CHUNK (1L << 18)
#define BAND 4

typedef synth_particle_t particle_t;
typedef synth_rng_t rng_t;

static uint64_t
s_splitmix64 (uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void
s_rng_seed (rng_t *rng, uint64_t *seeder)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = s_splitmix64 (seeder);
}

static inline uint64_t
s_rotl (uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t
s_rng_next (rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = s_rotl (s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s_rotl (s[3], 45);
    return result;
}

// Uniform in [0, 1), 53 random bits.
static inline double
s_rng_uniform (rng_t *rng)
{
    return (double) (s_rng_next (rng) >> 11) * (1.0 / 9007199254740992.0);
}

// Uniform in (0, 1): never 0, for logarithms.
static inline double
s_rng_open (rng_t *rng)
{
    return ((double) (s_rng_next (rng) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normals by the ziggurat method (Marsaglia and Tsang, in Doornik's
// form ZIGNOR, which takes the layer and the abscissa from independent bits).
// Noise is most of the work on a large pair: the ziggurat needs one random
// number and one comparison in 99 % of draws, where Box-Muller needs a
// logarithm and a square root, and makes a 2048 x 2048 pair about twice as
// fast.
#define ZIG_LAYERS 128
#define ZIG_R 3.442619855899       // where the tail starts
#define ZIG_V 9.91256303526217e-3  // area of each layer

static double s_zig_x[ZIG_LAYERS + 1];  // layer edges, decreasing
static double s_zig_r[ZIG_LAYERS];      // s_zig_x[i + 1] / s_zig_x[i]
static pthread_once_t s_zig_once = PTHREAD_ONCE_INIT;

static void
s_zig_init (void)
{
    double f = exp (-0.5 * ZIG_R * ZIG_R);
    s_zig_x[0] = ZIG_V / f;  // the bottom layer, with the tail's area
    s_zig_x[1] = ZIG_R;
    s_zig_x[ZIG_LAYERS] = 0;
    for (int i = 2; i < ZIG_LAYERS; i++) {
        s_zig_x[i] = sqrt (-2 * log (ZIG_V / s_zig_x[i - 1] + f));
        f = exp (-0.5 * s_zig_x[i] * s_zig_x[i]);
    }
    for (int i = 0; i < ZIG_LAYERS; i++)
        s_zig_r[i] = s_zig_x[i + 1] / s_zig_x[i];
}

static double
s_rng_gauss (rng_t *rng)
{
    for (;;) {
        uint64_t bits = s_rng_next (rng);
        int i = (int) (bits & (ZIG_LAYERS - 1));
        double u = 2 * ((double) (bits >> 11) * (1.0 / 9007199254740992.0)) - 1;
        if (fabs (u) < s_zig_r[i])
            return u * s_zig_x[i];
        if (i == 0) {
            // The tail beyond R (Marsaglia's method).
            double x, y;
            do {
                x = log (s_rng_open (rng)) / ZIG_R;
                y = log (s_rng_open (rng));
            } while (-2 * y < x * x);
            return u < 0 ? x - ZIG_R : ZIG_R - x;
        }
        // The wedge of layer i: accept under the curve.
        double x = u * s_zig_x[i];
        double f0 = exp (-0.5 * (s_zig_x[i] * s_zig_x[i] - x * x));
        double f1 = exp (-0.5 * (s_zig_x[i + 1] * s_zig_x[i + 1] - x * x));
        if (f1 + s_rng_uniform (rng) * (f0 - f1) < 1.0)
            return x;
    }
}

void
piv_synth_init (piv_synth_t *synth)
{
    synth->width = 1024;
    synth->height = 1024;
    synth->density = 0.02;
    synth->diameter = 2.6;
    synth->noise = 0.02;
    synth->bits = 8;
    synth->seed = 1;
}

// An upper bound of |d| over [x0, x1] x [y0, y1]: the peak for the flows
// whose displacement is bounded, the value at the farthest corner for those
// growing with the distance from the centre.
static double
s_max_displacement (const piv_flow_t *flow, double x0, double y0, double x1, double y1)
{
    double dx = fmax (fabs (x0 - flow->xc), fabs (x1 - flow->xc));
    double dy = fmax (fabs (y0 - flow->yc), fabs (y1 - flow->yc));
    switch (flow->kind) {
    case PIV_FLOW_UNIFORM:
        return hypot (flow->p0, flow->p1);
    case PIV_FLOW_ROTATION:
        return fabs (flow->p0) * hypot (dx, dy);
    case PIV_FLOW_LAMB_OSEEN:
    case PIV_FLOW_SINE:
        return fabs (flow->p0);
    case PIV_FLOW_SHEAR:
        return fabs (flow->p0) * dy;
    }
    return 0;
}

// Per-axis pixel weights of one particle: w[i] is the integral of the
// Gaussian over pixel first + i, divided by that over the pixel it is
// centred on, so a particle centred on a pixel has exactly I0 there.
static inline void
s_weights (double pos, int first, int n, double scale, double norm, float *w)
{
    double prev = erf ((first - 0.5 - pos) * scale);
    for (int i = 0; i < n; i++) {
        double next = erf ((first + i + 0.5 - pos) * scale);
        w[i] = (float) ((next - prev) * norm);
        prev = next;
    }
}

// Adds one particle of peak intensity i0 at (px, py) to the image; radius is
// how many pixels either side of the centre pixel it reaches.
static void
s_render (float *data, int width, int height, double px, double py, double i0, int radius,
          double scale, double norm)
{
    // Far away (an absurd flow) is outside, and must not overflow an int.
    if (!(fabs (px) < 1e9 && fabs (py) < 1e9))
        return;
    int cx = (int) floor (px + 0.5), cy = (int) floor (py + 0.5);
    int c0 = cx - radius, c1 = cx + radius, r0 = cy - radius, r1 = cy + radius;
    if (c1 < 0 || r1 < 0 || c0 >= width || r0 >= height)
        return;
    if (c0 < 0)
        c0 = 0;
    if (r0 < 0)
        r0 = 0;
    if (c1 >= width)
        c1 = width - 1;
    if (r1 >= height)
        r1 = height - 1;
    float wx[64], wy[64];
    int nx = c1 - c0 + 1, ny = r1 - r0 + 1;
    s_weights (px, c0, nx, scale, norm, wx);
    s_weights (py, r0, ny, scale, norm * i0, wy);
    for (int j = 0; j < ny; j++) {
        float *row = data + (size_t) (r0 + j) * width + c0;
        float a = wy[j];
        for (int i = 0; i < nx; i++)
            row[i] += a * wx[i];
    }
}

// Adds noise, then rounds and clips as an integer camera would.
static void
s_finish (float *data, size_t n, double sigma, double full, rng_t *rng)
{
    for (size_t k = 0; k < n; k++) {
        double value = data[k];
        if (sigma > 0)
            value += sigma * s_rng_gauss (rng);
        value = floor (value + 0.5);
        data[k] = (float) (value < 0 ? 0 : value > full ? full : value);
    }
}

// Frames A and B are rendered and finished in two threads: one frame's work
// for each, sharing the particle list, touching separate images.
typedef struct {
    float *data;                  // the frame's pixels
    int width, height;            // px
    int frame;                    // 0: A, 1: B
    const particle_t *particles;  // to render, sorted by band
    long count;                   // how many; 0 after the last chunk
    int radius;                   // see s_render
    double scale, norm;           // see s_weights
    double sigma, full;           // noise std and full scale, for s_finish
    rng_t *noise;                 // the frame's noise stream
} frame_job_t;

static void *
s_frame_job (void *arg)
{
    frame_job_t *job = arg;
    if (job->count == 0)
        s_finish (job->data, (size_t) job->width * job->height, job->sigma, job->full,
                  job->noise);
    for (long k = 0; k < job->count; k++) {
        const particle_t *p = job->particles + k;
        double x = job->frame ? p->xb : p->xa, y = job->frame ? p->yb : p->ya;
        s_render (job->data, job->width, job->height, x, y, job->frame ? p->ib : p->ia,
                  job->radius, job->scale, job->norm);
    }
    return NULL;
}

// Runs both jobs, A in a second thread if one can be had.
static void
s_run_jobs (frame_job_t *jobs)
{
    pthread_t thread;
    int threaded = pthread_create (&thread, NULL, s_frame_job, &jobs[0]) == 0;
    if (!threaded)
        s_frame_job (&jobs[0]);
    s_frame_job (&jobs[1]);
    if (threaded)
        pthread_join (thread, NULL);
}

// The jobs of frames A and B (pixels da, db, noise streams noise_a,
// noise_b) for synth's size, diameter, noise and depth; no particles yet.
static void
s_jobs_init (frame_job_t jobs[2], const piv_synth_t *synth, float *da, float *db, rng_t *noise_a,
             rng_t *noise_b)
{
    double full = synth->bits == 8 ? 255.0 : 65535.0;
    // I(r) = I0 exp(-8 r^2 / D^2) = I0 exp(-r^2 / (2 sigma^2)) with sigma = D/4:
    // its integral along one axis over [a, b] is proportional to
    // erf(b / (sigma sqrt 2)) - erf(a / (sigma sqrt 2)).
    double scale = 1.0 / (synth->diameter / 4 * M_SQRT2);
    for (int f = 0; f < 2; f++)
        jobs[f] = (frame_job_t) {.data = f ? db : da,
                                 .width = synth->width,
                                 .height = synth->height,
                                 .frame = f,
                                 .radius = (int) ceil (1.5 * synth->diameter) + 1,
                                 .scale = scale,
                                 .norm = 1.0 / (2 * erf (0.5 * scale)),
                                 .sigma = synth->noise * full,
                                 .full = full,
                                 .noise = f ? noise_b : noise_a};
}

// Refuses what piv_synth_pair cannot render: 0, or -1 with the reason in err.
static int
s_check (const piv_synth_t *synth, const piv_flow_t *flow, char *err, size_t errlen)
{
    if (synth->width <= 0 || synth->height <= 0
        || (double) synth->width * synth->height > (double) PIV_MAX_PIXELS_DEFAULT) {
        snprintf (err, errlen, "bad synthetic image size '%dx%d': must be 1 to %zu pixels",
                  synth->width, synth->height, PIV_MAX_PIXELS_DEFAULT);
        return -1;
    }
    if (!(synth->density >= 0) || !isfinite (synth->density)) {
        snprintf (err, errlen, "bad particle density '%g': must be zero or positive",
                  synth->density);
        return -1;
    }
    // Up to 20 px: the per-axis weights fit in 64 entries.
    if (!(synth->diameter > 0 && synth->diameter <= 20)) {
        snprintf (err, errlen, "bad particle diameter '%g': must be above 0 and at most 20 px",
                  synth->diameter);
        return -1;
    }
    if (!(synth->noise >= 0) || !isfinite (synth->noise)) {
        snprintf (err, errlen, "bad noise level '%g': must be zero or positive", synth->noise);
        return -1;
    }
    if (synth->bits != 8 && synth->bits != 16) {
        snprintf (err, errlen, "bad bit depth '%d': must be 8 or 16", synth->bits);
        return -1;
    }
    if (!isfinite (flow->p0) || !isfinite (flow->p1) || !isfinite (flow->xc)
        || !isfinite (flow->yc)) {
        snprintf (err, errlen, "bad flow: parameters must be finite");
        return -1;
    }
    return 0;
}

// The margin around the image where particles are seeded too: half the
// largest displacement there (a particle moves d/2 either way from its
// mid-time position) plus its radius. For flows growing with distance it
// is found by iteration; it converges where the flow moves particles by
// less than the distance they cover, and is capped otherwise.
static double
s_margin (const piv_flow_t *flow, int width, int height, int radius)
{
    double cap = 4.0 * (width > height ? width : height) + radius + 1;
    double margin = radius + 1;
    for (int i = 0; i < 64; i++) {
        double d = s_max_displacement (flow, -0.5 - margin, -0.5 - margin, width - 0.5 + margin,
                                       height - 0.5 + margin);
        double next = ceil (d / 2 + radius + 1);
        if (!(next <= cap))
            next = cap;
        if (next <= margin)
            break;
        margin = next;
    }
    return margin;
}

// Where particles are seeded: the image and its margin, px.
typedef struct {
    double x0, y0;          // the corner of the seeded area
    double span_x, span_y;  // its size
    int nbands;             // bands of BAND rows over span_y
} s_area_t;

// Draws n particles from 'particles' (mid-time positions uniform over the
// area, moved by the flow either way for frames A and B; peaks of 0.4 to
// 0.8 of 'full') into sorted, in the order of their bands of rows (a
// counting sort through drawn and starts, nbands + 1 entries).
static void
s_draw (rng_t *particles, const piv_flow_t *flow, const s_area_t *area, double full, long n,
        particle_t *drawn, particle_t *sorted, long *starts)
{
    memset (starts, 0, (size_t) (area->nbands + 1) * sizeof *starts);
    for (long k = 0; k < n; k++) {
        particle_t *p = drawn + k;
        double qx = floor (s_rng_uniform (particles) * area->span_x / POSITION_QUANTUM);
        double qy = floor (s_rng_uniform (particles) * area->span_y / POSITION_QUANTUM);
        double mx = area->x0 + qx * POSITION_QUANTUM, my = area->y0 + qy * POSITION_QUANTUM;
        p->ia = p->ib = (0.5 + 0.5 * s_rng_uniform (particles)) * 0.8 * full;
        double u, v;
        piv_flow_eval (flow, mx, my, &u, &v);
        p->xa = mx - u / 2;
        p->ya = my - v / 2;
        p->xb = mx + u / 2;
        p->yb = my + v / 2;
        p->band = (int) ((my - area->y0) / BAND);
        starts[p->band + 1]++;
    }
    for (int i = 0; i < area->nbands; i++)
        starts[i + 1] += starts[i];
    for (long k = 0; k < n; k++)
        sorted[starts[drawn[k].band]++] = drawn[k];
}

int
piv_synth_pair (const piv_synth_t *synth, const piv_flow_t *flow, piv_image_t **a_p,
                piv_image_t **b_p, char *err, size_t errlen)
{
    *a_p = *b_p = NULL;
    if (s_check (synth, flow, err, errlen) != 0)
        return -1;
    pthread_once (&s_zig_once, s_zig_init);
    int width = synth->width, height = synth->height;
    double full = synth->bits == 8 ? 255.0 : 65535.0;
    int radius = (int) ceil (1.5 * synth->diameter) + 1;

    double margin = s_margin (flow, width, height, radius);
    s_area_t area = {.x0 = -0.5 - margin,
                     .y0 = -0.5 - margin,
                     .span_x = width + 2 * margin,
                     .span_y = height + 2 * margin};
    double want = synth->density * area.span_x * area.span_y;
    if (want > MAX_PARTICLES) {
        snprintf (err, errlen, "bad particle density '%g': %.0f particles are too many",
                  synth->density, want);
        return -1;
    }
    long count = lround (want);

    piv_image_t *a = piv_image_new (width, height);
    piv_image_t *b = piv_image_new (width, height);
    if (!a || !b) {
        snprintf (err, errlen, "cannot make a %dx%d image pair: out of memory", width, height);
        piv_image_destroy (&a);
        piv_image_destroy (&b);
        return -1;
    }
    float *da = piv_image_data (a), *db = piv_image_data (b);

    // Three independent streams, so that the noise level does not move the
    // particles and frames A and B get independent noise.
    uint64_t seeder = synth->seed;
    rng_t particles, noise_a, noise_b;
    s_rng_seed (&particles, &seeder);
    s_rng_seed (&noise_a, &seeder);
    s_rng_seed (&noise_b, &seeder);

    // Particles are drawn in chunks and rendered in the order of their rows
    // (a counting sort by band of rows), so that rendering walks the images
    // instead of jumping about them: several times faster on large images.
    long chunk = count < CHUNK ? count : CHUNK;
    area.nbands = (int) (area.span_y / BAND) + 1;
    particle_t *drawn = malloc ((size_t) (chunk > 0 ? chunk : 1) * sizeof *drawn);
    particle_t *sorted = malloc ((size_t) (chunk > 0 ? chunk : 1) * sizeof *sorted);
    long *starts = malloc ((size_t) (area.nbands + 1) * sizeof *starts);
    if (!drawn || !sorted || !starts) {
        snprintf (err, errlen, "cannot draw %ld particles: out of memory", count);
        goto fail;
    }
    frame_job_t jobs[2];
    s_jobs_init (jobs, synth, da, db, &noise_a, &noise_b);
    for (long done = 0; done < count; done += chunk) {
        long n = count - done < chunk ? count - done : chunk;
        s_draw (&particles, flow, &area, full, n, drawn, sorted, starts);
        for (int f = 0; f < 2; f++) {
            jobs[f].particles = sorted;
            jobs[f].count = n;
        }
        s_run_jobs (jobs);
    }
    free (drawn);
    free (sorted);
    free (starts);
    for (int f = 0; f < 2; f++)
        jobs[f].count = 0;
    s_run_jobs (jobs);
    *a_p = a;
    *b_p = b;
    return 0;

fail:
    free (drawn);
    free (sorted);
    free (starts);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    return -1;
}

void
synth_rng_seed (synth_rng_t *rng, uint64_t *seeder)
{
    s_rng_seed (rng, seeder);
}

double
synth_rng_uniform (synth_rng_t *rng)
{
    return s_rng_uniform (rng);
}

int
synth_render_pair (const piv_synth_t *synth, synth_particle_t *particles, long n,
                   uint64_t noise_seed, piv_image_t **a_p, piv_image_t **b_p, char *err,
                   size_t errlen)
{
    *a_p = *b_p = NULL;
    piv_flow_t still = {PIV_FLOW_UNIFORM, 0, 0, 0, 0};
    if (s_check (synth, &still, err, errlen) != 0)
        return -1;
    pthread_once (&s_zig_once, s_zig_init);
    int width = synth->width, height = synth->height;
    double full = synth->bits == 8 ? 255.0 : 65535.0;

    // Sorted by band of rows of frame A, as piv_synth_pair renders: the
    // rendering walks the images. Those above or below share the end bands.
    int nbands = height / BAND + 1;
    long *starts = calloc ((size_t) nbands + 1, sizeof *starts);
    particle_t *sorted = malloc ((size_t) (n > 0 ? n : 1) * sizeof *sorted);
    piv_image_t *a = piv_image_new (width, height), *b = piv_image_new (width, height);
    if (!starts || !sorted || !a || !b) {
        snprintf (err, errlen, "cannot render %ld particles in a %dx%d pair: out of memory", n,
                  width, height);
        goto fail;
    }
    for (long k = 0; k < n; k++) {
        double band = floor ((particles[k].ya + 0.5) / BAND);
        particles[k].band = band < 0 ? 0 : band >= nbands ? nbands - 1 : (int) band;
        particles[k].ia *= full;
        particles[k].ib *= full;
        starts[particles[k].band + 1]++;
    }
    for (int i = 0; i < nbands; i++)
        starts[i + 1] += starts[i];
    for (long k = 0; k < n; k++)
        sorted[starts[particles[k].band]++] = particles[k];
    memcpy (particles, sorted, (size_t) n * sizeof *particles);
    free (sorted);
    free (starts);

    uint64_t seeder = noise_seed;
    rng_t noise_a, noise_b;
    s_rng_seed (&noise_a, &seeder);
    s_rng_seed (&noise_b, &seeder);
    frame_job_t jobs[2];
    s_jobs_init (jobs, synth, piv_image_data (a), piv_image_data (b), &noise_a, &noise_b);
    for (int f = 0; f < 2; f++) {
        jobs[f].particles = particles;
        jobs[f].count = n;
    }
    if (n > 0)
        s_run_jobs (jobs);
    for (int f = 0; f < 2; f++)
        jobs[f].count = 0;
    s_run_jobs (jobs);
    *a_p = a;
    *b_p = b;
    return 0;

fail:
    free (sorted);
    free (starts);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    return -1;
}
