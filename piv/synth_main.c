// synth_main.c — pivfarm-synth: synthetic PIV image pairs of a known flow
// with the truth file beside them, and the scoring of a vector field
// against such a truth. Exit status: 0 done, 1 runtime failure, 2 bad usage
// (one line, cli_usage_error; doc/conventions.md).

#include "common/cli.h"
#include "common/util.h"
#include "common/log.h"
#include "common/version.h"
#include "piv/calib.h"
#include "piv/flow.h"
#include "piv/synth_stereo.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_FLOW "uniform:3.3,-1.7"
#define DEFAULT_STEREO_FLOW "uniform:0.3,-0.2,0.1"
#define MAX_SIDE 65536
#define STR(x) #x
#define XSTR(x) STR (x)
#define DEFAULT_RATE 5     // camera pairs per second
#define CAMERA_DISTINCT 4  // distinct pairs a camera renders, then writes in turn

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: pivfarm-synth [options]          write PREFIX_a.tif, PREFIX_b.tif, "
             "PREFIX.flow\n"
             "       pivfarm-synth --camera [--rate R] [--count N] -o DIR/PREFIX [options]\n"
             "       pivfarm-synth --score FIELD.txt --truth PREFIX.flow [--size WxH] "
             "[--margin M]\n"
             "       pivfarm-synth --stereo [stereo options] -o DIR/STEM [options]\n"
             "  -f, --flow SPEC       uniform:U,V | rotation:OMEGA | lamb-oseen:VMAX,RCORE |\n"
             "                        shear:RATE | sine:AMPLITUDE,WAVELENGTH (px, rad per\n"
             "                        frame; centred on the image; default " DEFAULT_FLOW ")\n"
             "  -s, --size WxH        image size, px (default 1024x1024)\n"
             "      --width W, --height H\n"
             "  -d, --density D       particles per pixel (default 0.02)\n"
             "      --diameter D      particle image diameter at e^-2, px (default 2.6)\n"
             "  -n, --noise N         noise std, fraction of full scale (default 0.02)\n"
             "  -b, --bits 8|16       sample depth (default 8)\n"
             "      --seed S          random seed; same seed, same images (default 1)\n"
             "  -m, --multipage       one two-page PREFIX.tif instead of _a and _b files\n"
             "  -o, --output PREFIX   file name prefix, may include a directory, made if\n"
             "                        missing (not its parents; default synth)\n"
             "  -c, --count N         N pairs PREFIX_0001_a.tif ... with seeds S .. S+N-1\n"
             "      --camera          write the pairs as a camera PC does: one pair every 1/R s,\n"
             "                        each file first under a hidden name, then renamed into\n"
             "                        place; the truth PREFIX.flow first;\n"
             "                        " XSTR (CAMERA_DISTINCT) " distinct pairs (seeds S ...) written in turn\n"
             "      --rate R          camera pairs per second (default " XSTR (DEFAULT_RATE) ")\n"
             "      --score FIELD     score a vector file (x y u v [flags ...]) against --truth;\n"
             "                        against a --stereo STEM.truth, a 3-C field (x y u v w\n"
             "                        flags ..., mm) against its flow on the sheet's plane\n"
             "      --truth FILE      the truth file written beside the images\n"
             "      --margin M        score only vectors at least M px inside the image\n"
             "                        (default 0: all; the size defaults to the one the\n"
             "                        truth's centre implies); a stereo truth: M mm inside\n"
             "                        the field's extent (default a tenth of its smaller side)\n"
             "      --max-flag F      score vectors flagged at most F: 0 valid only,\n"
             "                        1 also replaced (default), 2 all\n"
             "      --calibration C   the scored file is in the units of calibration C\n"
             "                        ('scale=0.02mm/px dt=2ms [origin=X,Y] [y_axis=up|down]',\n"
             "                        as pivctl stats and export write it): the error in m/s\n"
             "stereo (a light sheet seen by two cameras; world X, Y, Z in mm, Z across the\n"
             "sheet, Y up): writes DIR/cam1/STEM_a.tif, DIR/cam1/STEM_b.tif, DIR/cam2/...,\n"
             "the rig's calibration DIR/STEM.cal, the truth DIR/STEM.truth and the target\n"
             "points DIR/STEM_cam1.points, DIR/STEM_cam2.points ('X Y Z col row');\n"
             "with -c N, N pairs DIR/cam1/STEM_0001_a.tif ... (seeds S ...)\n"
             "      --stereo          render a stereo pair; -f then takes a 3-D flow (mm per\n"
             "                        frame): uniform:U,V,W | vortex:VMAX,RCORE,WAXIS (about\n"
             "                        the Z axis, axial WAXIS exp(-r^2/RCORE^2)) |\n"
             "                        wgrad:U,V,W,DWDZ (w = W + DWDZ Z); default\n"
             "                        " DEFAULT_STEREO_FLOW "; -d counts the particles camera\n"
             "                        1 sees within the sheet's e^-2 width per pixel\n"
             "      --angle DEG       camera 1 at +DEG about Y, camera 2 at -DEG (default 35)\n"
             "      --distance MM     each camera's centre from the world origin (default 500)\n"
             "      --focal MM        focal length (default 50)\n"
             "      --pitch MM        pixel pitch (default 0.01)\n"
             "      --distortion K1   radial distortion k1 (default 0)\n"
             "      --thickness MM    light sheet e^-2 full width, Gaussian in Z (default 1)\n"
             "      --sheet-z MM      the sheet's centre, off the calibration's Z = 0 (default\n"
             "                        0): a misplaced sheet, for self-calibration\n"
             "      --grid MM         the truth's grid step (default: 16 px of camera 1)\n"
             "      --targets         also the target's images, DIR/STEM_targets/camC_zZ.tif\n"
             "                        (Z = -3 .. 3 mm), and its lattice unit for\n"
             "                        pivfarm-calib --spacing in DIR/STEM_targets/spacing\n"
             "  -v, --verbose         say what was written and how long it took\n"
             "  -h, --help            this text\n"
             "  -V, --version         the version\n"
             "exit status: 0 done; 1 failed (a file cannot be read or written); 2 bad usage\n");
}

static int
s_long_arg (const char *opt, const char *arg, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long n = strtol (arg, &end, 10);
    if (errno || end == arg || *end || n < lo || n > hi) {
        cli_usage_error ("bad %s '%s': expected a whole number from %ld to %ld", opt, arg, lo, hi);
        return -1;
    }
    *out = n;
    return 0;
}

static int
s_double_arg (const char *opt, const char *arg, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod (arg, &end);
    if (errno || end == arg || *end || !(x >= lo && x <= hi)) {
        cli_usage_error ("bad %s '%s': expected a number from %g to %g", opt, arg, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

// Parses 'WxH'. 0 or -1 (logged).
static int
s_size_arg (const char *arg, int *width, int *height)
{
    char *end;
    errno = 0;
    long w = strtol (arg, &end, 10), h = 0;
    if (!errno && end != arg && (*end == 'x' || *end == 'X')) {
        const char *rest = end + 1;
        h = strtol (rest, &end, 10);
        if (errno || end == rest || *end)
            h = 0;
    }
    if (w < 1 || w > MAX_SIDE || h < 1 || h > MAX_SIDE) {
        cli_usage_error ("bad --size '%s': expected WIDTHxHEIGHT, each from 1 to %d", arg,
                         MAX_SIDE);
        return -1;
    }
    *width = (int) w;
    *height = (int) h;
    return 0;
}

// "<prefix><suffix>" into buf; -1 (logged) if it does not fit.
static int
s_name (char *buf, size_t len, const char *prefix, const char *suffix)
{
    if ((size_t) snprintf (buf, len, "%s%s", prefix, suffix) >= len) {
        cli_usage_error ("bad --output '%s': too long", prefix);
        return -1;
    }
    return 0;
}

// The paths of pair 'number' of 'prefix' (PREFIX_0001_a.tif and
// PREFIX_0001_b.tif; number 0: PREFIX_a.tif ...), or of its one file in
// path_a when multipage. 0 or -1 (logged) if they do not fit.
static int
s_pair_paths (const char *prefix, long number, int multipage, char *path_a, char *path_b,
              size_t len)
{
    char stem[24], name_a[64], name_b[64];
    if (number)
        snprintf (stem, sizeof stem, "_%04ld", number);
    else
        stem[0] = '\0';
    snprintf (name_a, sizeof name_a, "%s%s", stem, multipage ? ".tif" : "_a.tif");
    snprintf (name_b, sizeof name_b, "%s_b.tif", stem);
    return s_name (path_a, len, prefix, name_a) || s_name (path_b, len, prefix, name_b) ? -1 : 0;
}

// Saves 'npages' frames as 'path'. 'hidden': first as '.<name>' beside it,
// then renamed into place, as a camera PC does: the watcher ignores hidden
// files, so it sees each frame file appear whole. 0 or -1 (logged).
static int
s_save (const char *path, const piv_image_t *const *pages, int npages, int bits, int hidden)
{
    char err[1024], tmp[4096 + 2];
    const char *slash = strrchr (path, '/');
    int dirlen = slash ? (int) (slash - path) + 1 : 0;
    snprintf (tmp, sizeof tmp, "%.*s.%s", dirlen, path, path + dirlen);
    if (piv_image_save (hidden ? tmp : path, pages, npages, bits, err, sizeof err)) {
        log_error ("%s", err);
        return -1;
    }
    if (hidden && rename (tmp, path) != 0) {
        log_error ("cannot rename '%s' to '%s': %s", tmp, path, strerror (errno));
        unlink (tmp);
        return -1;
    }
    return 0;
}

// Saves a pair: both frames as pages of path_a when multipage, else frame A
// as path_a and frame B as path_b. 0 or -1 (logged).
static int
s_save_pair (piv_image_t *const frames[2], int bits, int multipage, const char *path_a,
             const char *path_b, int hidden)
{
    const piv_image_t *const *pages = (const piv_image_t *const *) frames;
    if (multipage)
        return s_save (path_a, pages, 2, bits, hidden);
    return s_save (path_a, pages, 1, bits, hidden) || s_save (path_b, pages + 1, 1, bits, hidden)
               ? -1
               : 0;
}

// Makes the directory of 'prefix' unless it exists (not its parents): a
// camera PC makes the experiment's directory under the watch root, and
// '-o run/p' works in a fresh tree.
// 0 or -1 (logged).
static int
s_make_dir_of (const char *prefix)
{
    const char *slash = strrchr (prefix, '/');
    if (!slash || slash == prefix)
        return 0;
    char dir[4096];
    snprintf (dir, sizeof dir, "%.*s", (int) (slash - prefix), prefix);
    if (mkdir (dir, 0755) != 0 && errno != EEXIST) {
        log_error ("cannot make the directory '%s': %s", dir, strerror (errno));
        return -1;
    }
    return 0;
}

static volatile sig_atomic_t s_stopping;  // set by SIGINT or SIGTERM in camera mode

static void
s_on_signal (int sig)
{
    (void) sig;
    s_stopping = 1;
}

// Camera mode: writes 'count' pairs of 'flow' as PREFIX_0001_a.tif ... at
// 'rate' pairs/s, pair i due i / rate s after the first (a late pair does
// not shift the ones after it). Rendering a pair takes longer than writing
// it, so CAMERA_DISTINCT pairs (seeds S, S+1, ...) are rendered first and
// written in turn. SIGINT or SIGTERM stops it after the pair being written.
// The exit status: 0 done or stopped, 1 a pair could not be rendered or
// written.
static int
s_camera (const piv_synth_t *synth, const piv_flow_t *flow, const char *prefix, long count,
          double rate, int multipage)
{
    piv_image_t *frames[CAMERA_DISTINCT][2] = {{NULL}};
    int distinct = count < CAMERA_DISTINCT ? (int) count : CAMERA_DISTINCT, rc = 0;
    char err[1024], path_a[4096], path_b[4096];
    for (int k = 0; k < distinct && rc == 0; k++) {
        piv_synth_t one = *synth;
        one.seed = synth->seed + (uint64_t) k;
        if (piv_synth_pair (&one, flow, &frames[k][0], &frames[k][1], err, sizeof err)) {
            log_error ("%s", err);
            rc = 1;
        }
    }
    struct sigaction sa = {.sa_handler = s_on_signal};
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    long written = 0, late = 0;
    double start = util_now ();
    for (long i = 0; rc == 0 && i < count && !s_stopping; i++) {
        double due = start + (double) i / rate, wait;
        while ((wait = due - util_now ()) > 0 && !s_stopping) {
            struct timespec ts = {(time_t) wait, (long) ((wait - floor (wait)) * 1e9)};
            nanosleep (&ts, NULL);
        }
        if (s_stopping)
            break;
        if (-wait > 1 / rate)
            late++;
        if (s_pair_paths (prefix, i + 1, multipage, path_a, path_b, sizeof path_a)
            || s_save_pair (frames[i % distinct], synth->bits, multipage, path_a, path_b, 1))
            rc = 1;
        else {
            written++;
            log_info ("wrote '%s'%s%s%s at %.3f s", path_a, multipage ? "" : " and '",
                      multipage ? "" : path_b, multipage ? "" : "'", util_now () - start);
        }
    }
    double took = util_now () - start;
    if (s_stopping)
        log_notice ("stopped after %ld of %ld pair(s)", written, count);
    if (late)
        log_warning ("%ld of %ld pair(s) written more than 1/%g s late: the disk or the CPU "
                     "cannot keep up with %g pairs/s",
                     late, written, rate, rate);
    log_info ("camera: %ld pair(s) of %dx%d in %.1f s (%.2f pairs/s)", written, synth->width,
              synth->height, took, written > 1 && took > 0 ? (written - 1) / took : 0.0);
    for (int k = 0; k < distinct; k++) {
        piv_image_destroy (&frames[k][0]);
        piv_image_destroy (&frames[k][1]);
    }
    return rc;
}

// Converts a field written in the units of calibration 'c' (m, m/s) back
// to image units (px, px/frame): each conversion is affine along its axis.
static void
s_uncalibrate (piv_field_t *field, const piv_calib_t *c)
{
    double ox, oy, x1, y1, uu, uv, vu, vv;
    piv_calib_position (c, 0, 0, &ox, &oy);
    piv_calib_position (c, 1, 1, &x1, &y1);
    piv_calib_velocity (c, 1, 0, &uu, &uv);
    piv_calib_velocity (c, 0, 1, &vu, &vv);
    for (long k = 0; k < (long) field->nx * field->ny; k++) {
        field->x[k] = (float) ((field->x[k] - ox) / (x1 - ox));
        field->y[k] = (float) ((field->y[k] - oy) / (y1 - oy));
        field->u[k] = (float) (field->u[k] / uu);
        field->v[k] = (float) (field->v[k] / vv);
    }
}

// Scores 'field_path' against 'truth_path' (the field in the units of
// 'calib' when it is set); the exit status.
static int
s_score (const char *field_path, const char *truth_path, int width, int height, double margin,
         int max_flag, const piv_calib_t *calib)
{
    char err[1024];
    piv_flow_t truth;
    if (piv_flow_load (&truth, truth_path, err, sizeof err)) {
        log_error ("%s", err);
        return 1;
    }
    if (width == 0) {
        // pivfarm-synth centres every flow on the image: invert that.
        double w = round (2 * truth.xc + 1), h = round (2 * truth.yc + 1);
        width = w >= 1 && w <= MAX_SIDE ? (int) w : 1024;
        height = h >= 1 && h <= MAX_SIDE ? (int) h : 1024;
    }
    piv_field_t *field = piv_field_read_txt (field_path, err, sizeof err);
    if (!field) {
        log_error ("%s", err);
        return 1;
    }
    if (calib->set)
        s_uncalibrate (field, calib);
    piv_score_t score;
    int rc = piv_score (field, &truth, max_flag, margin, width, height, &score);
    piv_field_destroy (&field);
    if (rc != 0) {
        log_error ("cannot score '%s': no vector flagged at most %d lies %g px inside the "
                   "%dx%d image",
                   field_path, max_flag, margin, width, height);
        return 1;
    }
    if (calib->set) {
        // Errors are lengths per frame pair: scale / dt makes them m/s; a
        // bias in v changes sign with the y axis.
        double k = calib->scale / calib->dt, kv = calib->y_up ? -k : k;
        printf ("vectors %d  rms %.4g m/s  (u %.4g, v %.4g)  bias (%+.4g, %+.4g) m/s  max %.4g "
                "m/s  (rms %.4f px)\n",
                score.count, score.rms * k, score.rms_u * k, score.rms_v * k, score.bias_u * k,
                score.bias_v * kv, score.max_error * k, score.rms);
    }
    else
        printf ("vectors %d  rms %.4f px  (u %.4f, v %.4f)  bias (%+.4f, %+.4f) px  max %.4f "
                "px\n",
                score.count, score.rms, score.rms_u, score.rms_v, score.bias_u, score.bias_v,
                score.max_error);
    if (fflush (stdout) != 0) {
        log_error ("cannot write the score of '%s': %s", field_path, strerror (errno));
        return 1;
    }
    return 0;
}

// Camera 1's px per mm at the origin of the sheet's plane, along Y (not
// foreshortened by the angle). 0, or -1 with err.
static int
s_px_per_mm (const piv_stereo_synth_t *rig, double *ppm, char *err, size_t errlen)
{
    double d[2][3];
    piv_camera_t *cam = piv_synth_camera_new (rig, 1, err, errlen);
    int bad = !cam || piv_camera_derivatives (cam, 0, 0, rig->sheet_z, d);
    piv_camera_destroy (&cam);
    *ppm = bad ? 0 : fabs (d[1][1]);
    return bad ? -1 : 0;
}

// Scores a 3-component field ('x y u v w flags ...', mm and mm per frame)
// against a stereo truth: the flow of its header evaluated exactly at each
// vector's (x, y) on the sheet's plane. Vectors flagged at most 'max_flag'
// and at least 'margin' mm inside the field's extent (0: a tenth of its
// smaller side) count. The exit status.
static int
s_score3 (const char *field_path, const char *truth_path, double margin, int max_flag)
{
    char err[1024];
    piv_stereo_synth_t rig;
    piv_flow3_t flow;
    double ppm;
    if (piv_stereo_truth_load (&rig, &flow, truth_path, err, sizeof err)
        || s_px_per_mm (&rig, &ppm, err, sizeof err)) {
        log_error ("%s", err);
        return 1;
    }
    FILE *in = fopen (field_path, "r");
    if (!in) {
        log_error ("cannot read '%s': %s", field_path, strerror (errno));
        return 1;
    }
    // Two passes: the extent, then the errors inside it.
    double box[4] = {INFINITY, -INFINITY, INFINITY, -INFINITY};
    double sum[3] = {0}, sq[3] = {0}, worst = 0;
    long count = 0, rows = 0;
    char line[1024];
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (margin == 0)
                margin = fmin (box[1] - box[0], box[3] - box[2]) / 10;
            rewind (in);
        }
        while (fgets (line, sizeof line, in)) {
            double x, y, m[3];
            int flag;
            if (line[0] == '#' || line[0] == '\n')
                continue;
            if (sscanf (line, "%lf %lf %lf %lf %lf %d", &x, &y, &m[0], &m[1], &m[2], &flag) != 6) {
                log_error ("bad field '%s': '%.40s' is not 'x y u v w flags ...'", field_path, line);
                fclose (in);
                return 1;
            }
            if (pass == 0) {
                box[0] = fmin (box[0], x), box[1] = fmax (box[1], x);
                box[2] = fmin (box[2], y), box[3] = fmax (box[3], y);
                rows++;
                continue;
            }
            if (flag > max_flag || !isfinite (m[0] + m[1] + m[2]) || x < box[0] + margin
                || x > box[1] - margin || y < box[2] + margin || y > box[3] - margin)
                continue;
            double t[3], e2 = 0;
            piv_flow3_eval (&flow, x, y, rig.sheet_z, &t[0], &t[1], &t[2]);
            for (int c = 0; c < 3; c++) {
                double e = m[c] - t[c];
                sum[c] += e, sq[c] += e * e, e2 += e * e;
            }
            worst = fmax (worst, sqrt (e2));
            count++;
        }
    }
    fclose (in);
    if (count == 0) {
        log_error ("cannot score '%s': no vector of its %ld flagged at most %d lies %g mm inside "
                   "its extent",
                   field_path, rows, max_flag, margin);
        return 1;
    }
    double rms[3];
    for (int c = 0; c < 3; c++)
        rms[c] = sqrt (sq[c] / (double) count);
    // In-plane: the RMS of one in-plane component (u and v pooled), the
    // figure w's error compares with.
    double plane = sqrt ((sq[0] + sq[1]) / (2.0 * (double) count));
    printf ("vectors %ld of %ld (margin %.3g mm)  rms u %.4f v %.4f w %.4f in-plane %.4f mm  "
            "(px: u %.4f v %.4f w %.4f in-plane %.4f at %.3f px/mm)  w/in-plane %.3f  "
            "bias (%+.4f, %+.4f, %+.4f) mm  max %.4f mm\n",
            count, rows, margin, rms[0], rms[1], rms[2], plane, rms[0] * ppm, rms[1] * ppm,
            rms[2] * ppm, plane * ppm, ppm, plane > 0 ? rms[2] / plane : 0.0,
            sum[0] / (double) count, sum[1] / (double) count, sum[2] / (double) count, worst);
    if (fflush (stdout) != 0) {
        log_error ("cannot write the score of '%s': %s", field_path, strerror (errno));
        return 1;
    }
    return 0;
}

// Whether 'path' is a pivfarm-synth --stereo truth (its first line says so).
static int
s_is_stereo_truth (const char *path)
{
    char line[64] = "";
    FILE *in = fopen (path, "r");
    if (!in)
        return 0;
    int yes = fgets (line, sizeof line, in) && strncmp (line, "# pivfarm-synth --stereo", 24) == 0;
    fclose (in);
    return yes;
}

// What the command line asks for.
typedef struct {
    piv_synth_t synth;       // the images: size, particles, noise, bits, seed
    const char *spec;        // -f: the flow
    int spec_given;          // -f given
    const char *prefix;      // -o: where the files go
    const char *score_path;  // --score: the field scored (NULL: none)
    const char *truth_path;  // --truth: its truth
    int multipage;           // -m: one two-page file a pair
    int size_given;          // --size, --width or --height given
    int max_flag;            // --max-flag: the worst flag scored
    int camera;              // --camera
    int rate_given;          // --rate given
    long count;              // -c: pairs (0: one, unnumbered)
    double margin;           // --margin
    double rate;             // --rate: camera pairs per second
    piv_calib_t calib;       // --calibration: the scored file's units
    int stereo;              // --stereo
    const char *stereo_opt;  // a stereo option given (NULL: none), for its message
    piv_stereo_synth_t rig;  // --stereo's cameras and sheet (its images from synth)
    double grid;             // --grid: the truth's step, mm (0: the default)
    int targets;             // --targets
} s_opts_t;

enum {
    OPT_WIDTH = 256,
    OPT_HEIGHT,
    OPT_DIAMETER,
    OPT_SEED,
    OPT_SCORE,
    OPT_TRUTH,
    OPT_MARGIN,
    OPT_MAX_FLAG,
    OPT_CAMERA,
    OPT_RATE,
    OPT_CALIBRATION,
    OPT_STEREO,
    OPT_ANGLE,
    OPT_DISTANCE,
    OPT_FOCAL,
    OPT_PITCH,
    OPT_DISTORTION,
    OPT_THICKNESS,
    OPT_SHEET_Z,
    OPT_GRID,
    OPT_TARGETS,
    OPT_VERSION
};

static const struct option s_options[] = {
    {"flow", required_argument, NULL, 'f'},
    {"size", required_argument, NULL, 's'},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"height", required_argument, NULL, OPT_HEIGHT},
    {"density", required_argument, NULL, 'd'},
    {"diameter", required_argument, NULL, OPT_DIAMETER},
    {"noise", required_argument, NULL, 'n'},
    {"bits", required_argument, NULL, 'b'},
    {"seed", required_argument, NULL, OPT_SEED},
    {"multipage", no_argument, NULL, 'm'},
    {"output", required_argument, NULL, 'o'},
    {"count", required_argument, NULL, 'c'},
    {"camera", no_argument, NULL, OPT_CAMERA},
    {"rate", required_argument, NULL, OPT_RATE},
    {"score", required_argument, NULL, OPT_SCORE},
    {"truth", required_argument, NULL, OPT_TRUTH},
    {"margin", required_argument, NULL, OPT_MARGIN},
    {"max-flag", required_argument, NULL, OPT_MAX_FLAG},
    {"calibration", required_argument, NULL, OPT_CALIBRATION},
    {"stereo", no_argument, NULL, OPT_STEREO},
    {"angle", required_argument, NULL, OPT_ANGLE},
    {"distance", required_argument, NULL, OPT_DISTANCE},
    {"focal", required_argument, NULL, OPT_FOCAL},
    {"pitch", required_argument, NULL, OPT_PITCH},
    {"distortion", required_argument, NULL, OPT_DISTORTION},
    {"thickness", required_argument, NULL, OPT_THICKNESS},
    {"sheet-z", required_argument, NULL, OPT_SHEET_Z},
    {"grid", required_argument, NULL, OPT_GRID},
    {"targets", no_argument, NULL, OPT_TARGETS},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0}};

// Takes --seed's argument into *seed. 0, or the exit code.
static int
s_seed_arg (const char *arg, uint64_t *seed)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull (arg, &end, 0);
    if (errno || end == arg || *end || strchr (arg, '-'))
        return cli_usage_error ("bad --seed '%s': expected a whole number from 0 to %llu", arg,
                                (unsigned long long) UINT64_MAX);
    *seed = (uint64_t) n;
    return 0;
}

// Takes the stereo option 'opt' (its argument in optarg) into o: -1 to go
// on, or the exit code. Each value's bounds here are the loose ones; the
// rig as a whole is checked by piv_stereo_synth_check.
static int
s_stereo_option (int opt, s_opts_t *o)
{
    static const struct {
        int opt;            // its code
        const char *name;   // as given
        double lo, hi;      // accepted values
    } table[] = {
        {OPT_ANGLE, "--angle", 0, 80},         {OPT_DISTANCE, "--distance", 1e-3, 1e6},
        {OPT_FOCAL, "--focal", 1e-3, 1e6},     {OPT_PITCH, "--pitch", 1e-6, 1},
        {OPT_DISTORTION, "--distortion", -10, 10}, {OPT_THICKNESS, "--thickness", 1e-6, 1e4},
        {OPT_SHEET_Z, "--sheet-z", -1e4, 1e4}, {OPT_GRID, "--grid", 1e-6, 1e6},
    };
    piv_stereo_synth_t *rig = &o->rig;
    double *fields[] = {&rig->angle, &rig->distance, &rig->focal, &rig->pitch,
                        &rig->k1,    &rig->thickness, &rig->sheet_z, &o->grid};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].opt == opt) {
            o->stereo_opt = table[i].name;
            return s_double_arg (table[i].name, optarg, table[i].lo, table[i].hi, fields[i])
                       ? 2
                       : -1;
        }
    return 2;
}

// Takes option 'opt' (its argument in optarg) into o. -1 to go on, or the
// exit code (after --help, --version or a bad option, said on stderr).
static int
s_option (int opt, char **argv, s_opts_t *o)
{
    piv_synth_t *synth = &o->synth;
    long n;
    switch (opt) {
    case 'f':
        o->spec = optarg;
        o->spec_given = 1;
        break;
    case 's':
        if (s_size_arg (optarg, &synth->width, &synth->height))
            return 2;
        o->size_given = 1;
        break;
    case OPT_WIDTH:
    case OPT_HEIGHT:
        if (s_long_arg (opt == OPT_WIDTH ? "--width" : "--height", optarg, 1, MAX_SIDE, &n))
            return 2;
        *(opt == OPT_WIDTH ? &synth->width : &synth->height) = (int) n;
        o->size_given = 1;
        break;
    case 'd':
        if (s_double_arg ("--density", optarg, 0, 1, &synth->density))
            return 2;
        break;
    case OPT_DIAMETER:
        if (s_double_arg ("--diameter", optarg, 0.1, 20, &synth->diameter))
            return 2;
        break;
    case 'n':
        if (s_double_arg ("--noise", optarg, 0, 1, &synth->noise))
            return 2;
        break;
    case 'b':
        if (strcmp (optarg, "8") == 0 || strcmp (optarg, "16") == 0)
            synth->bits = atoi (optarg);
        else
            return cli_usage_error ("bad --bits '%s': expected 8 or 16", optarg);
        break;
    case OPT_SEED:
        if (s_seed_arg (optarg, &synth->seed))
            return 2;
        break;
    case 'm':
        o->multipage = 1;
        break;
    case 'o':
        if (!*optarg)
            return cli_usage_error ("bad --output '': expected a file name prefix");
        o->prefix = optarg;
        break;
    case 'c':
        if (s_long_arg ("--count", optarg, 1, 9999, &o->count))
            return 2;
        break;
    case OPT_CAMERA:
        o->camera = 1;
        break;
    case OPT_RATE:
        if (s_double_arg ("--rate", optarg, 0.01, 10000, &o->rate))
            return 2;
        o->rate_given = 1;
        break;
    case OPT_SCORE:
        o->score_path = optarg;
        break;
    case OPT_TRUTH:
        o->truth_path = optarg;
        break;
    case OPT_MARGIN:
        if (s_double_arg ("--margin", optarg, 0, MAX_SIDE, &o->margin))
            return 2;
        break;
    case OPT_MAX_FLAG:
        if (s_long_arg ("--max-flag", optarg, 0, 2, &n))
            return 2;
        o->max_flag = (int) n;
        break;
    case OPT_CALIBRATION: {
        char why[512];
        if (piv_calib_parse (optarg, &o->calib, why, sizeof why) != 0)
            return cli_usage_error ("bad --calibration: %s", why);
        break;
    }
    case OPT_STEREO:
        o->stereo = 1;
        break;
    case OPT_TARGETS:
        o->targets = 1;
        o->stereo_opt = "--targets";
        break;
    case OPT_ANGLE:
    case OPT_DISTANCE:
    case OPT_FOCAL:
    case OPT_PITCH:
    case OPT_DISTORTION:
    case OPT_THICKNESS:
    case OPT_SHEET_Z:
    case OPT_GRID:
        return s_stereo_option (opt, o);
    case 'v':
        log_set_level (LOG_LEVEL_INFO);
        break;
    case 'h':
        s_usage (stdout);
        return 0;
    case 'V':
    case OPT_VERSION:
        printf ("pivfarm-synth %s\n", PIVFARM_VERSION);
        return 0;
    default:
        return cli_bad_option (opt, argv);
    }
    return -1;
}

// Reads the command line into o and checks the options together. -1 to
// go on, or the exit code.
static int
s_parse_args (int argc, char **argv, s_opts_t *o)
{
    // Leading ':' and opterr 0: bad options are reported here, in our words.
    opterr = 0;
    int opt, code;
    while ((opt = getopt_long (argc, argv, ":f:s:d:n:b:mo:c:vhV", s_options, NULL)) != -1)
        if ((code = s_option (opt, argv, o)) >= 0)
            return code;
    if (optind < argc)
        return cli_usage_error ("unexpected argument '%s'", argv[optind]);
    if ((double) o->synth.width * o->synth.height > (double) PIV_MAX_PIXELS_DEFAULT)
        return cli_usage_error ("bad --size '%dx%d': more than %zu pixels", o->synth.width,
                                o->synth.height, PIV_MAX_PIXELS_DEFAULT);
    if (o->stereo_opt && !o->stereo)
        return cli_usage_error ("%s needs --stereo", o->stereo_opt);
    if (o->stereo && (o->multipage || o->camera || o->rate_given || o->score_path
                      || o->truth_path || o->calib.set))
        return cli_usage_error ("--stereo and %s exclude each other",
                                o->multipage    ? "--multipage"
                                : o->camera     ? "--camera"
                                : o->rate_given ? "--rate"
                                : o->calib.set  ? "--calibration"
                                : o->score_path ? "--score"
                                                : "--truth");
    if (o->calib.set && !o->score_path)
        return cli_usage_error ("--calibration needs --score");
    if (o->rate_given && !o->camera)
        return cli_usage_error ("--rate needs --camera");
    if (o->camera && (o->score_path || o->truth_path))
        return cli_usage_error ("--camera and %s exclude each other",
                                o->score_path ? "--score" : "--truth");
    if ((o->score_path || o->truth_path) && (!o->score_path || !o->truth_path))
        return cli_usage_error ("%s needs %s too", o->score_path ? "--score" : "--truth",
                                o->score_path ? "--truth" : "--score");
    return -1;
}

// Renders and writes the pairs (count of them, numbered from 1; one,
// unnumbered, with count 0), seeds seed, seed + 1, ... The exit code.
static int
s_write_pairs (const s_opts_t *o, const piv_flow_t *flow)
{
    piv_synth_t synth = o->synth;
    long count = o->count;
    char err[1024], path_a[4096], path_b[4096];
    uint64_t seed = synth.seed;
    for (long i = 0; i < (count ? count : 1); i++) {
        if (s_pair_paths (o->prefix, count ? i + 1 : 0, o->multipage, path_a, path_b,
                          sizeof path_a))
            return 2;
        double t0 = util_now ();
        synth.seed = seed + (uint64_t) i;
        piv_image_t *frames[2] = {NULL, NULL};
        if (piv_synth_pair (&synth, flow, &frames[0], &frames[1], err, sizeof err)) {
            log_error ("%s", err);
            return 1;
        }
        double t1 = util_now ();
        int rc = s_save_pair (frames, synth.bits, o->multipage, path_a, path_b, 0);
        piv_image_destroy (&frames[0]);
        piv_image_destroy (&frames[1]);
        if (rc)
            return 1;
        log_info ("wrote '%s'%s%s%s (%dx%d, %d bits, seed %llu): synthesis %.1f ms, "
                  "writing %.1f ms",
                  path_a, o->multipage ? "" : " and '", o->multipage ? "" : path_b,
                  o->multipage ? "" : "'", synth.width, synth.height, synth.bits,
                  (unsigned long long) synth.seed, (t1 - t0) * 1e3, (util_now () - t1) * 1e3);
    }
    return 0;
}

// Writes camera 'id''s target points as 'X Y Z col row' lines (the
// plain points file pivfarm-calib reads). 0 or -1 (logged).
static int
s_save_points (const piv_stereo_synth_t *rig, int id, const char *path)
{
    char err[1024];
    size_t n;
    piv_point_t *pts = piv_stereo_synth_points (rig, id, &n, err, sizeof err);
    if (!pts) {
        log_error ("%s", err);
        return -1;
    }
    FILE *out = fopen (path, "w");
    int rc = out ? 0 : -1;
    if (out) {
        fprintf (out, "# pivfarm-synth --stereo: camera %d's target points, exact\n"
                      "# X Y Z (mm) col row (px)\n", id);
        for (size_t i = 0; i < n; i++)
            fprintf (out, "%.17g %.17g %.17g %.17g %.17g\n", pts[i].x, pts[i].y, pts[i].z,
                     pts[i].col, pts[i].row);
        rc = ferror (out) | (fclose (out) != 0) ? -1 : 0;
    }
    if (rc)
        log_error ("cannot write '%s': %s", path, strerror (errno));
    free (pts);
    return rc;
}

// Makes 'dir' unless it exists. 0 or -1 (logged).
static int
s_make_dir (const char *dir)
{
    if (mkdir (dir, 0755) != 0 && errno != EEXIST) {
        log_error ("cannot make the directory '%s': %s", dir, strerror (errno));
        return -1;
    }
    return 0;
}

// A path of at most PATH_LEN bytes into buf, printf-style. 0, or -1
// (logged) when it does not fit.
#define PATH_LEN 4096
static int __attribute__ ((format (printf, 2, 3)))
s_pathf (char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int n = vsnprintf (buf, PATH_LEN, fmt, ap);
    va_end (ap);
    if (n < 0 || n >= PATH_LEN) {
        log_error ("cannot name a file: '%.64s...' is too long", buf);
        return -1;
    }
    return 0;
}

// Writes the target's images of both cameras on the planes Z = -3 .. 3
// into DIR/STEM_targets/ with the lattice unit in its file 'spacing'. 0 or
// -1 (logged).
static int
s_save_targets (const piv_stereo_synth_t *rig, const char *dir, const char *stem)
{
    char err[1024], sub[PATH_LEN], path[PATH_LEN];
    double unit = piv_stereo_synth_target_unit (rig);
    if (s_pathf (sub, "%s/%s_targets", dir, stem) || s_make_dir (sub)
        || s_pathf (path, "%s/spacing", sub))
        return -1;
    FILE *out = fopen (path, "w");
    if (!out || fprintf (out, "%.17g\n", unit) < 0 || fclose (out) != 0) {
        log_error ("cannot write '%s': %s", path, strerror (errno));
        return -1;
    }
    for (int id = 1; id <= 2; id++)
        for (int z = -3; z <= 3; z++) {
            piv_image_t *img = piv_stereo_synth_target (rig, id, z, unit, err, sizeof err);
            if (!img) {
                log_error ("%s", err);
                return -1;
            }
            const piv_image_t *pages[] = {img};
            int rc = s_pathf (path, "%s/cam%d_z%d.tif", sub, id, z) || s_save (path, pages, 1, 16, 0);
            piv_image_destroy (&img);
            if (rc)
                return -1;
        }
    log_info ("wrote the target's images in '%s' (lattice unit %g mm)", sub, unit);
    return 0;
}

// --stereo: the calibration, the points and the truth, then each pair's
// four frames (DIR/cam1/STEM_a.tif ...). The exit code.
static int
s_stereo (s_opts_t *o)
{
    char err[1024], path[PATH_LEN], path_b[PATH_LEN];
    piv_stereo_synth_t rig = o->rig;
    rig.image = o->synth;
    piv_flow3_t flow;
    if (piv_flow3_parse (&flow, o->spec_given ? o->spec : DEFAULT_STEREO_FLOW, err,
                         sizeof err)
        || piv_stereo_synth_check (&rig, err, sizeof err))
        return cli_usage_error ("%s", err);
    const char *slash = strrchr (o->prefix, '/');
    const char *stem = slash ? slash + 1 : o->prefix;
    char dir[PATH_LEN];
    // DIR/STEM, /STEM (the root) or STEM (here).
    snprintf (dir, sizeof dir, "%.*s", slash ? (int) (slash - o->prefix) + (slash == o->prefix) : 1,
              slash ? o->prefix : ".");
    if (!*stem || strlen (o->prefix) > 3000)
        return cli_usage_error ("bad --output '%s': expected DIR/STEM", o->prefix);
    if (slash && slash != o->prefix && s_make_dir (dir))
        return 1;
    if (s_pathf (path, "%s/cam1", dir) || s_pathf (path_b, "%s/cam2", dir) || s_make_dir (path)
        || s_make_dir (path_b))
        return 1;

    double t0 = util_now ();
    piv_cameras_t *cal = piv_stereo_synth_rig (&rig, err, sizeof err);
    if (!cal || s_pathf (path, "%s/%s.cal", dir, stem) || piv_cameras_save (cal, path, err, sizeof err)) {
        log_error ("%s", err);
        piv_cameras_destroy (&cal);
        return 1;
    }
    piv_cameras_destroy (&cal);
    for (int id = 1; id <= 2; id++) {
        if (s_pathf (path, "%s/%s_cam%d.points", dir, stem, id) || s_save_points (&rig, id, path))
            return 1;
    }
    double grid = o->grid;
    if (grid == 0) {
        // 16 px of camera 1 at the sheet's centre, along Y (unforeshortened).
        double ppm;
        if (s_px_per_mm (&rig, &ppm, err, sizeof err)) {
            log_error ("cannot place the truth's grid: %s", err);
            return 1;
        }
        // Four significant digits: a step one can type.
        double g = 16 / ppm, unit = pow (10, floor (log10 (g)) - 3);
        grid = round (g / unit) * unit;
    }
    if (s_pathf (path, "%s/%s.truth", dir, stem))
        return 1;
    if (piv_stereo_truth_save (&rig, &flow, grid, path, err, sizeof err)) {
        log_error ("%s", err);
        return 1;
    }
    log_info ("wrote the calibration, the points and the truth in '%s' (%.1f ms)", dir,
              (util_now () - t0) * 1e3);
    if (o->targets && s_save_targets (&rig, dir, stem))
        return 1;
    long count = o->count;
    for (long i = 0; i < (count ? count : 1); i++) {
        t0 = util_now ();
        rig.image.seed = o->synth.seed + (uint64_t) i;
        piv_image_t *frames[2][2];
        if (piv_stereo_synth_render (&rig, &flow, frames, err, sizeof err)) {
            log_error ("%s", err);
            return 1;
        }
        double t1 = util_now ();
        int rc = 0;
        for (int c = 0; c < 2 && rc == 0; c++) {
            char prefix[PATH_LEN];
            rc = count ? s_pathf (prefix, "%s/cam%d/%s_%04ld", dir, c + 1, stem, i + 1)
                       : s_pathf (prefix, "%s/cam%d/%s", dir, c + 1, stem);
            rc = rc || s_pair_paths (prefix, 0, 0, path, path_b, sizeof path)
                 || s_save_pair (frames[c], rig.image.bits, 0, path, path_b, 0);
        }
        for (int c = 0; c < 2; c++) {
            piv_image_destroy (&frames[c][0]);
            piv_image_destroy (&frames[c][1]);
        }
        if (rc)
            return 1;
        log_info ("wrote stereo pair %ld of '%s' (%dx%d, seed %llu): synthesis %.1f ms, "
                  "writing %.1f ms",
                  i + 1, o->prefix, rig.image.width, rig.image.height,
                  (unsigned long long) rig.image.seed, (t1 - t0) * 1e3,
                  (util_now () - t1) * 1e3);
    }
    return 0;
}

int
main (int argc, char **argv)
{
    log_open ("pivfarm-synth", 0);
    cli_set_program ("pivfarm-synth");
    static s_opts_t o = {.spec = DEFAULT_FLOW,
                         .prefix = "synth",
                         .max_flag = PIV_FLAG_REPLACED,
                         .rate = DEFAULT_RATE};
    piv_synth_init (&o.synth);
    piv_calib_init (&o.calib);
    piv_stereo_synth_init (&o.rig);
    char err[1024];
    int code = s_parse_args (argc, argv, &o);
    if (code >= 0)
        return code;
    if (o.score_path && s_is_stereo_truth (o.truth_path)) {
        // The stereo truth and field are in mm: there is no image to size
        // nor a calibration to undo.
        if (o.calib.set || o.size_given)
            return cli_usage_error ("%s does not apply to the stereo truth '%s' (mm)",
                                    o.calib.set ? "--calibration" : "--size", o.truth_path);
        return s_score3 (o.score_path, o.truth_path, o.margin, o.max_flag);
    }
    if (o.score_path)
        return s_score (o.score_path, o.truth_path, o.size_given ? o.synth.width : 0,
                        o.size_given ? o.synth.height : 0, o.margin, o.max_flag, &o.calib);

    if (o.stereo)
        return s_stereo (&o);

    piv_flow_t flow;
    if (piv_flow_parse (&flow, o.spec, o.synth.width, o.synth.height, err, sizeof err))
        return cli_usage_error ("%s", err);
    char truth[4096];
    if (s_name (truth, sizeof truth, o.prefix, ".flow"))
        return 2;
    if (s_make_dir_of (o.prefix))
        return 1;
    // The truth goes first: whoever picks up the images can score them.
    if (piv_flow_save (&flow, truth, err, sizeof err)) {
        log_error ("%s", err);
        return 1;
    }
    if (o.camera)
        return s_camera (&o.synth, &flow, o.prefix, o.count ? o.count : 1, o.rate, o.multipage);
    code = s_write_pairs (&o, &flow);
    if (code == 0)
        log_info ("wrote the truth '%s'", truth);
    return code;
}
