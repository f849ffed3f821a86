// piv_cost.c — section 9 of bench_piv: what a 2048^2 pair costs around the
// correlation. Loading against read() of the same bytes, with each lever
// (fresh buffers touched page by page, fresh buffers mapped populated, a
// loader that keeps its buffers from pair to pair); the one-shot
// pivfarm-piv process against the FFT floor; an agent's processor
// (process_task: open, load, PIV, result file, RESULT's blob) on a stream of
// pairs against the engine's piv_process on the same pair; and the cores the
// seed rig's stream needs at that cost. Medians, all in one run: the
// machine's speed swings by tens of percent within an hour.

#include "bench/piv_cost.h"
#include "agents/process.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "piv/piv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define COST_FILES 4             // distinct pair files in the agent's stream
#define COST_MAX_REPS 1000
#define SEED_RIG_PAIRS_S 30.0    // 2 cameras x 15 pairs/s
#define ERRLEN 1024

typedef struct {
    char dir[PATH_MAX - 128];               // the temporary directory
    char a[COST_FILES][PATH_MAX + 32];      // frame A files
    char b[COST_FILES][PATH_MAX + 32];      // frame B files
    char results[PATH_MAX - 64];            // the agent's results directory
    piv_image_t *ia, *ib;                   // the pair as the files hold it
    double single_s;                        // section 3's best single pass, s
    int reps;                               // runs per figure
} s_cost_t;

static double
s_median (const double *t, int n)
{
    double s[COST_MAX_REPS];
    memcpy (s, t, (size_t) n * sizeof *t);
    for (int i = 1; i < n; i++)  // insertion sort: n is small
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double x = s[j];
            s[j] = s[j - 1];
            s[j - 1] = x;
        }
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

// The whole file with PIV_READ_BLOCK reads into buf; bytes, or -1.
static long
s_read (const char *path, char *buf)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    long total = 0;
    ssize_t n;
    while ((n = read (fd, buf, PIV_READ_BLOCK)) > 0 || (n < 0 && errno == EINTR))
        total += n > 0 ? n : 0;
    close (fd);
    return n < 0 ? -1 : total;
}

// piv_image_load_pair as a new process pays it: in a child, whose malloc
// maps every large buffer afresh (a fixed threshold: glibc's sliding one
// would serve a long-lived process's second pair from memory already
// touched), with big buffers mapped populated or not. Its time, s, or -1.
static double
s_fresh_load (const char *pa, const char *pb, int populate)
{
    int fds[2];
    if (pipe (fds) != 0)
        return -1;
    pid_t pid = fork ();
    if (pid == 0) {
        char err[ERRLEN];
        piv_image_t *la = NULL, *lb = NULL;
        mallopt (M_MMAP_THRESHOLD, 128 * 1024);
        piv_image_set_populate (populate);
        double t0 = util_now ();
        int rc = piv_image_load_pair (pa, pb, 0, &la, &lb, err, sizeof err);
        double t = rc == 0 ? util_now () - t0 : -1;
        _exit (write (fds[1], &t, sizeof t) == sizeof t ? 0 : 1);
    }
    close (fds[1]);
    double t = -1;
    if (pid < 0 || read (fds[0], &t, sizeof t) != sizeof t)
        t = -1;
    close (fds[0]);
    if (pid > 0)
        waitpid (pid, NULL, 0);
    return t;
}

// Loading against read() of both files: first piv_image_load_pair in a new
// process with its buffers touched page by page, then populated, in turns;
// then, once no child shares this process's pages (after a fork every page
// written is copied or faulted again: reads timed then would pay for it),
// read() and a loader's steady state in turns. 0, or -1 (logged).
static int
s_load (s_cost_t *c)
{
    char err[ERRLEN] = "";
    double tr[COST_MAX_REPS], tp[COST_MAX_REPS], tf[COST_MAX_REPS], ts[COST_MAX_REPS];
    char *buf = malloc (PIV_READ_BLOCK);
    piv_loader_t *loader = piv_loader_new ();
    piv_image_t *la = NULL, *lb = NULL;
    const char *pa = c->a[0], *pb = c->b[0];
    int rc = -1;
    if (!buf || !loader) {
        log_error ("cannot allocate the load benchmark's buffers: out of memory");
        goto done;
    }
    for (int r = -1; r < 2 * c->reps; r++) {  // r = -1: warm-up, not counted
        int steady = r >= c->reps, i = steady ? r - c->reps : r;
        double t0 = util_now ();
        long bytes = steady ? s_read (pa, buf) + s_read (pb, buf) : 0;
        double t1 = util_now (), touched = 0, mapped = 0, kept = 0;
        if (!steady) {
            touched = s_fresh_load (pa, pb, 0);
            mapped = s_fresh_load (pa, pb, 1);
        }
        else {
            int fa = open (pa, O_RDONLY | O_CLOEXEC), fb = open (pb, O_RDONLY | O_CLOEXEC);
            double t2 = util_now ();
            if (piv_loader_pair_fd (loader, fa, pa, fb, pb, 0, 0, &la, &lb, err, sizeof err) != 0)
                kept = -1;
            else
                kept = util_now () - t2;
            close (fa);
            close (fb);
        }
        if (bytes < 0 || touched < 0 || mapped < 0 || kept < 0) {
            log_error ("cannot load '%s' and '%s': %s", pa, pb, *err ? err : "in a child");
            goto done;
        }
        if (r >= 0 && !steady)
            tp[i] = touched, tf[i] = mapped;
        else if (steady)
            tr[i] = t1 - t0, ts[i] = kept;
    }
    double read_s = s_median (tr, c->reps);
    double tp_s = s_median (tp, c->reps), tf_s = s_median (tf, c->reps);
    double ts_s = s_median (ts, c->reps);
    printf ("  two 8-bit TIFFs of 2048x2048, 8.0 MiB in all, page cache warm (median ms)\n");
    printf ("  %-44s %8.2f  ms\n", "read() of both files, 4 MiB reads", read_s * 1e3);
    printf ("  %-44s %8.2f  ms  %5.1fx read()\n", "load, new process, touched page by page",
            tp_s * 1e3, tp_s / read_s);
    printf ("  %-44s %8.2f  ms  %5.1fx read()\n", "load, new process, buffers populated",
            tf_s * 1e3, tf_s / read_s);
    printf ("  %-44s %8.2f  ms  %5.1fx read()\n", "load, a loader's buffers kept (steady)",
            ts_s * 1e3, ts_s / read_s);
    printf ("  %-44s %8.2f  x   goal <= 3x\n", "steady-state load / read()", ts_s / read_s);
    rc = 0;
done:
    piv_loader_destroy (&loader);
    free (buf);
    return rc;
}

// Where pivfarm-piv is: $PIVFARM_BIN, else bin/ two levels above this
// program (build/bench/bench_piv).
static void
s_cli_path (char *buf, size_t size)
{
    const char *bin = getenv ("PIVFARM_BIN");
    if (bin && *bin) {
        snprintf (buf, size, "%s/pivfarm-piv", bin);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr (self, '/');
        if (slash)
            *slash = '\0';
    }
    snprintf (buf, size, "%s/bin/pivfarm-piv", *self ? self : ".");
}

// One run of pivfarm-piv, single pass 32 px, on pair 0: its wall time, s,
// or -1 (logged).
static double
s_cli_once (const char *prog, const s_cost_t *c, const char *out)
{
    double t0 = util_now ();
    pid_t pid = fork ();
    if (pid == 0) {
        int null = open ("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2 (null, 2);
        execl (prog, prog, "-w", "32", "-i", "1", "-o", out, c->a[0], c->b[0], (char *) NULL);
        _exit (127);
    }
    int status = 0;
    if (pid < 0 || waitpid (pid, &status, 0) != pid || !WIFEXITED (status)
        || WEXITSTATUS (status) != 0) {
        log_error ("'%s' failed on '%s' (status %d): build it with 'make programs'", prog,
                   c->a[0], WIFEXITED (status) ? WEXITSTATUS (status) : -1);
        return -1;
    }
    return util_now () - t0;
}

// The engine for one run of the single pass 32 px (the one-shot's
// settings); NULL (logged) if it cannot be made.
static piv_t *
s_single_engine (void)
{
    char err[ERRLEN];
    piv_settings_t s;
    piv_settings_init (&s);
    s.final_iterations = 1, s.converge = 0;
    piv_t *engine = NULL;
    if (piv_settings_set_passes (&s, "32", err, sizeof err) != 0
        || !(engine = piv_new (&s, err, sizeof err)))
        log_error ("cannot make a single-pass engine: %s", err);
    return engine;
}

// The one-shot pivfarm-piv's whole single pass (start, load, plans from
// wisdom, PIV, txt output, exit), each run followed by the engine alone in
// this process on the same pair: the machine's speed drifts between
// sections, so the ratio to the floor goes through the engine's, measured
// beside the floor (section 3: engine_floor). 0, or -1.
static int
s_cli (const s_cost_t *c, double engine_floor)
{
    char prog[PATH_MAX + 32], out[PATH_MAX + 32], err[ERRLEN];
    s_cli_path (prog, sizeof prog);
    snprintf (out, sizeof out, "%s/cli.txt", c->dir);
    double t[COST_MAX_REPS], te[COST_MAX_REPS];
    piv_t *engine = s_single_engine ();
    int rc = -1;
    for (int r = -1; engine && r < c->reps; r++) {  // r = -1: warm-up (wisdom, page cache)
        double tc = s_cli_once (prog, c, out), t0 = util_now ();
        piv_field_t *field = piv_process (engine, c->ia, c->ib, err, sizeof err);
        double t1 = util_now ();
        if (tc < 0 || !field) {
            log_error ("single pass on '%s': %s", c->a[0], field ? "pivfarm-piv failed" : err);
            piv_field_destroy (&field);
            goto done;
        }
        piv_field_destroy (&field);
        if (r >= 0)
            t[r] = tc, te[r] = t1 - t0;
    }
    if (!engine)
        goto done;
    double cli = s_median (t, c->reps), alone = s_median (te, c->reps);
    printf ("  %-44s %8.2f  ms  (pivfarm-piv -w 32 -i 1 -o F.txt A B)\n",
            "one-shot process, whole single pass", cli * 1e3);
    printf ("  %-44s %8.2f  ms  (in turns with it)\n", "the engine alone, same pair",
            alone * 1e3);
    printf ("  %-44s %8.2f  x\n", "one-shot / engine alone", cli / alone);
    printf ("  %-44s %8.2f  x   goal <= 2x   (x engine / floor %.2f of 2.-3.)\n",
            "one-shot / FFT floor (2 r2c + c2r)", cli / alone * engine_floor, engine_floor);
    rc = 0;
done:
    piv_destroy (&engine);
    return rc;
}

// An agent's processor on a stream of the pairs (cycling through the
// files), each run followed by the engine alone on the same pair with the
// same settings. passes "32": one run of it; else the default settings.
// Medians in *agent_s, *engine_s. 0, or -1 (logged).
static int
s_agent_run (const s_cost_t *c, const char *passes, const char *format, double *agent_s,
             double *engine_s)
{
    char err[ERRLEN], text[512];
    config_t cfg;
    config_init (&cfg);
    snprintf (cfg.agent.results, sizeof cfg.agent.results, "%s", c->results);
    snprintf (cfg.agent.result_format, sizeof cfg.agent.result_format, "%s", format);
    cfg.agent.min_free_mb = 0;
    piv_settings_t s;
    piv_settings_init (&s);
    if (strcmp (passes, "32") == 0)
        s.final_iterations = 1, s.converge = 0;
    process_t *proc = NULL;
    piv_t *engine = NULL;
    int rc = -1;
    if (piv_settings_set_passes (&s, passes, err, sizeof err) != 0
        || piv_settings_format (&s, text, sizeof text) < 0 || !(proc = process_new (&cfg, err, sizeof err))
        || !(engine = piv_new (&s, err, sizeof err))) {
        log_error ("cannot make the agent's processor for '%s': %s", passes, err);
        goto done;
    }
    double ta[COST_MAX_REPS], te[COST_MAX_REPS];
    for (int r = -1; r < c->reps; r++) {  // r = -1: warm-up (plans, buffers)
        int k = (r + COST_FILES) % COST_FILES;
        char output[64];
        snprintf (output, sizeof output, "run/%04d.txt", k);
        proto_msg_t task = {.command = PROTO_TASK, .pair = (uint64_t) k + 1, .attempt = 1,
                            .path_a = (char *) c->a[k], .path_b = (char *) c->b[k],
                            .settings = text, .output = output},
                    result;
        double t0 = util_now ();
        int prc = process_task (proc, &task, &result, err, sizeof err);
        double t1 = util_now ();
        proto_msg_release (&result);
        piv_field_t *field = piv_process (engine, c->ia, c->ib, err, sizeof err);
        double t2 = util_now ();
        if (prc != 0 || !field) {
            log_error ("agent's processor on '%s': %s", c->a[k], err);
            piv_field_destroy (&field);
            goto done;
        }
        piv_field_destroy (&field);
        if (r >= 0)
            ta[r] = t1 - t0, te[r] = t2 - t1;
    }
    *agent_s = s_median (ta, c->reps);
    *engine_s = s_median (te, c->reps);
    rc = 0;
done:
    piv_destroy (&engine);
    process_destroy (&proc);
    return rc;
}

// The agent's figures: single pass (txt, field) and multipass (txt), the
// ratio to the engine, and the seed rig's cores. 0, or -1.
static int
s_agent (const s_cost_t *c)
{
    static const struct {
        const char *passes, *format, *label;
    } runs[] = {
        {"32", "txt", "single pass 32 px, txt result"},
        {"32", "field", "single pass 32 px, field result (.pvf)"},
        {"64,32,16", "txt", "multipass 64,32,16, txt result"},
        {"64,32,16", "field", "multipass 64,32,16, field result (.pvf)"},
    };
    double agent[4], engine[4];
    printf ("  agent's processor on a stream of %d pair files, 1 thread (median ms)\n",
            COST_FILES);
    printf ("  %-44s %8s %8s %7s\n", "", "agent", "engine", "ratio");
    for (int i = 0; i < 4; i++) {
        if (s_agent_run (c, runs[i].passes, runs[i].format, &agent[i], &engine[i]) != 0)
            return -1;
        printf ("  %-44s %8.2f %8.2f %6.2fx  goal <= 1.25x\n", runs[i].label, agent[i] * 1e3,
                engine[i] * 1e3, agent[i] / engine[i]);
    }
    // Other work on the machine stretches medians: the best single pass of
    // section 3 times the agent's ratio says what the machine itself needs.
    double quiet = c->single_s * agent[0] / engine[0];
    printf ("  %-44s %8.2f  cores  goal <= 2.5 (2 cameras x 15 pairs/s, single pass,\n"
            "  %-44s %8s         txt result: 30 x the agent's %.1f ms)\n",
            "cores for the seed rig", SEED_RIG_PAIRS_S * agent[0], "", "", agent[0] * 1e3);
    printf ("  %-44s %8.2f  cores  goal <= 2.5 (30 x %.1f ms: section 3's best x %.2f)\n",
            "... at the best single pass of this run", SEED_RIG_PAIRS_S * quiet, quiet * 1e3,
            agent[0] / engine[0]);
    return 0;
}

// Writes the pair a, b COST_FILES times under a temporary directory, and
// reads it back for the engine.
static int
s_setup (s_cost_t *c, const piv_image_t *a, const piv_image_t *b)
{
    char err[ERRLEN];
    const char *tmp = getenv ("TMPDIR");
    snprintf (c->dir, sizeof c->dir, "%s/pivfarm-cost-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp (c->dir)) {
        log_error ("cannot make a temporary directory '%s': %s", c->dir, strerror (errno));
        return -1;
    }
    snprintf (c->results, sizeof c->results, "%s/results", c->dir);
    for (int k = 0; k < COST_FILES; k++) {
        snprintf (c->a[k], sizeof c->a[k], "%s/p%d_a.tif", c->dir, k);
        snprintf (c->b[k], sizeof c->b[k], "%s/p%d_b.tif", c->dir, k);
        if (piv_image_save (c->a[k], &a, 1, 8, err, sizeof err) != 0
            || piv_image_save (c->b[k], &b, 1, 8, err, sizeof err) != 0) {
            log_error ("%s", err);
            return -1;
        }
    }
    if (piv_image_load_pair (c->a[0], c->b[0], 0, &c->ia, &c->ib, err, sizeof err) != 0) {
        log_error ("%s", err);
        return -1;
    }
    return 0;
}

// Removes what s_setup and the runs made.
static void
s_cleanup (s_cost_t *c)
{
    char path[PATH_MAX + 64];
    piv_image_destroy (&c->ia);
    piv_image_destroy (&c->ib);
    for (int k = 0; k < COST_FILES; k++) {
        unlink (c->a[k]);
        unlink (c->b[k]);
        static const char *const ext[] = {"txt", "pvf"};
        for (int e = 0; e < 2; e++) {
            snprintf (path, sizeof path, "%s/run/%04d.%s", c->results, k, ext[e]);
            unlink (path);
        }
    }
    snprintf (path, sizeof path, "%s/cli.txt", c->dir);
    unlink (path);
    snprintf (path, sizeof path, "%s/run", c->results);
    rmdir (path);
    rmdir (c->results);
    if (*c->dir && rmdir (c->dir) != 0)
        log_warning ("cannot remove '%s': %s", c->dir, strerror (errno));
}

int
cost_section (const piv_image_t *a, const piv_image_t *b, double floor_s, double single_s,
              int reps)
{
    s_cost_t *c = calloc (1, sizeof *c);
    if (!c) {
        log_error ("cannot run the cost section: out of memory");
        return -1;
    }
    c->single_s = single_s;
    c->reps = reps < 3 ? 3 : reps > COST_MAX_REPS ? COST_MAX_REPS : reps;
    printf ("\n9. Per-pair cost around the correlation, 2048x2048 (median of %d)\n", c->reps);
    int rc = s_setup (c, a, b);
    if (rc == 0)
        rc = s_load (c);
    if (rc == 0)
        rc = s_cli (c, single_s / floor_s);
    if (rc == 0)
        rc = s_agent (c);
    s_cleanup (c);
    free (c);
    return rc;
}
