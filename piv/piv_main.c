// piv_main.c — pivfarm-piv: one TIFF pair in, one vector field out.
// Exit status: 0 done, 1 the pair could not be processed, 2 bad usage (one
// line, cli_usage_error; doc/conventions.md).

#include "common/util.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/version.h"
#include "piv/budget.h"
#include "piv/ensemble.h"
#include "piv/piv.h"
#include "piv/stereo.h"

#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: pivfarm-piv [options] A.tif B.tif\n"
             "       pivfarm-piv [options] PAIR.tif        (frames A and B as pages 1 and 2)\n"
             "       pivfarm-piv [options] --cameras CALIB A1.tif B1.tif A2.tif B2.tif\n"
             "       pivfarm-piv [options] --ensemble A1.tif B1.tif A2.tif B2.tif ...\n"
             "                             (stereo: each camera's pair, the calibration's order)\n"
             "  -w, --window N        final window size, px, even from 8 to 256 (default 32;\n"
             "                        ignored with --passes)\n"
             "  -p, --passes LIST     window sizes large to small, e.g. 64,32,16\n"
             "  -O, --overlap PCT     window overlap, percent (default 50)\n"
             "  -i, --iterations N    most runs of the final window size (default 3)\n"
             "  -c, --converge PX     ... fewer once a run corrects less than PX RMS (default\n"
             "                        0.1; 0 always runs N times)\n"
             "  -d, --deform KIND     offset|bilinear|bicubic|bspline|bspline5|omoms (default bspline5)\n"
             "      --full-deform     deform in every pass after the first (default: integer\n"
             "                        window offset until the final window size)\n"
             "      --no-smooth       use the previous pass as predictor without 3x3 smoothing\n"
             "      --smooth MODE     DCT-PLS smoothing: off|predictor|final|both (default final)\n"
             "      --smooth-s S      its parameter s (default 0: chosen per field by GCV)\n"
             "      --asymmetric      deform frame B only (default: both, about mid-time)\n"
             "      --eps E           median test epsilon, px (default 0.1)\n"
             "      --threshold T     median test threshold (default 2)\n"
             "      --plain-median    the median test without its second look on curved flows\n"
             "      --contrast C      regions of windows with less contrast than C times the\n"
             "                        median window's have no signal: invalid (default 0.2; 0 off)\n"
             "      --cbc S           a window of an ambiguous peak lower than S times its 4\n"
             "                        neighbours' takes the peak of their summed correlations\n"
             "                        where it moves the vector > 1 px (default 0.5; 0 off)\n"
             "      --subpixel KIND   sub-pixel peak fit: gauss3 (3-point Gaussian per axis) or\n"
             "                        gauss2d (2-D Gaussian over 3x3) (default gauss3)\n"
             "      --uncertainty M   each vector's uncertainty, columns sigma_u sigma_v (px):\n"
             "                        cs (correlation statistics), mc (moment of correlation),\n"
             "                        off, or auto (the default: cs unless a single run)\n"
             "      --prefilter S     Gaussian low-pass of sigma S px of both frames first: for\n"
             "                        particle images under 2 px (default 0, none)\n"
             "      --cap N           intensity capping: pixels above the frame's median + N\n"
             "                        standard deviations set to that level (default 0, off)\n"
             "      --highpass S      subtract the frame's Gaussian low-pass of sigma S px\n"
             "                        (default 0, off)\n"
             "      --lcn N           local contrast normalisation over tiles of N px: each\n"
             "                        pixel less its tile's mean, over its std (default 0, off)\n"
             "  -t, --threads N       threads on this pair (default 1)\n"
             "  -m, --mask FILE       TIFF mask: zero pixels are outside the flow\n"
             "  -b, --background LIST comma-separated frames whose minimum is subtracted\n"
             "      --max-pixels N    refuse larger images (default 67108864)\n"
             "      --max-memory SIZE refuse a pair that would take more memory, e.g. 2G (0: no\n"
             "                        limit; default 3/4 of the memory this process may use)\n"
             "      --max-ratio N     refuse a compressed frame declaring over N times its\n"
             "                        file's size in pixels (default %d)\n"
             "      --wisdom FILE     FFTW wisdom file (default %s)\n"
             "      --cameras CALIB   stereo PIV (2D3C) with the calibration of two cameras\n"
             "                        (pivfarm-calib): both pairs dewarped onto one world grid\n"
             "                        on the light sheet (the calibration's 'sheet', else\n"
             "                        Z = 0), 'x y u v w flags residual' written (mm, mm per\n"
             "                        frame; txt only; no --mask, --background)\n"
             "      --dt S            with --cameras: u, v, w in m/s, S seconds from A to B\n"
             "      --max-residual PX with --cameras: vectors whose 4 equations miss by more\n"
             "                        are invalid (default %g; 0: no bound)\n"
             "      --ensemble        ensemble correlation over all the pairs given (frames A\n"
             "                        and B of each in turn): each window's correlation planes\n"
             "                        summed over the pairs, passes from 32 px down to --window\n"
             "                        (default 8 here), 'x y u v flags peak_ratio uu vv uv'\n"
             "                        written: the mean displacement and the Reynolds stresses\n"
             "                        (px, px^2; txt only; no --passes, --background)\n"
             "      --calibration TEXT with --ensemble: \"scale=0.05mm/px dt=1ms [origin=X,Y]\n"
             "                        [y_axis=up|down]\": x, y in m, u, v in m/s, stresses m^2/s^2\n"
             "  -f, --format FMT      txt|tecplot (default txt)\n"
             "  -o, --output FILE     write here instead of standard output\n"
             "  -v, --verbose         say what is done and how long it took\n"
             "  -h, --help            this text\n"
             "  -V, --version         the version\n"
             "exit status: 0 done; 1 the pair could not be processed; 2 bad usage\n",
             PIV_MAX_RATIO_DEFAULT, piv_wisdom_default_path (), PIV_STEREO_MAX_RESIDUAL);
}

static int
s_int_arg (const char *opt, const char *arg, long lo, long hi, long *out)
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
s_double_arg (const char *opt, const char *arg, double *out)
{
    char *end;
    errno = 0;
    double x = strtod (arg, &end);
    if (errno || end == arg || *end || !(x >= 0)) {
        cli_usage_error ("bad %s '%s': expected a non-negative number", opt, arg);
        return -1;
    }
    *out = x;
    return 0;
}

// Loads the comma-separated frames of 'list' and returns their minimum;
// every frame must have the size of the pair (width x height). Errors name
// the background file at fault.
static piv_image_t *
s_background (const char *list, size_t max_pixels, int width, int height, char *err,
              size_t errlen)
{
    char *copy = strdup (list);
    piv_image_t *frames[256];
    int n = 0;
    piv_image_t *bg = NULL;
    for (char *save, *tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        if (n == 256) {
            snprintf (err, errlen, "bad --background: more than 256 frames");
            goto done;
        }
        if (!(frames[n] = piv_image_load (tok, 0, max_pixels, err, errlen)))
            goto done;
        if (piv_image_width (frames[n]) != width || piv_image_height (frames[n]) != height) {
            snprintf (err, errlen, "background '%s' is %dx%d, the frames are %dx%d", tok,
                      piv_image_width (frames[n]), piv_image_height (frames[n]), width, height);
            n++;
            goto done;
        }
        n++;
    }
    if (n == 0)
        snprintf (err, errlen, "bad --background '%s': no file named", list);
    else
        bg = piv_image_min ((const piv_image_t *const *) frames, n, err, errlen);
done:
    for (int i = 0; i < n; i++)
        piv_image_destroy (&frames[i]);
    free (copy);
    return bg;
}

// What the command line asks for.
typedef struct {
    piv_settings_t settings;   // the engine's, from the options
    const char *output;        // -o: the file written (NULL: standard output)
    const char *mask_path;     // -m: the mask (NULL: none)
    const char *background;    // -b: the background frames' list (NULL: none)
    const char *passes;        // -p: the window sizes (NULL: --window alone)
    const char *wisdom;        // the FFTW wisdom file
    piv_format_t format;       // -f: the field's format
    size_t max_pixels;         // --max-pixels
    int64_t max_memory;        // --max-memory, bytes (0: no limit; -1: the default)
    long max_ratio;            // --max-ratio
    long window;               // -w: the final window size without --passes
    const char *path_a;        // frame A, or the two-page file
    const char *path_b;        // frame B (NULL: pages 1 and 2 of path_a)
    const char *cameras;       // --cameras: the calibration (NULL: planar)
    const char *stereo[4];     // with --cameras: A1 B1 A2 B2
    double dt;                 // --dt, s (0: none, mm per frame)
    double max_residual;       // --max-residual, px
    int ensemble;              // --ensemble: the pairs' ensemble correlation
    int window_set;            // -w given
    char *const *files;        // the frames named (A B A B ... with --ensemble)
    int nfiles;                // how many
    piv_calib_t calib;         // --calibration (not set: px)
} s_opts_t;

static const struct option s_options[] = {
    {"window", required_argument, NULL, 'w'},
    {"passes", required_argument, NULL, 'p'},
    {"overlap", required_argument, NULL, 'O'},
    {"iterations", required_argument, NULL, 'i'},
    {"converge", required_argument, NULL, 'c'},
    {"deform", required_argument, NULL, 'd'},
    {"asymmetric", no_argument, NULL, 'A'},
    {"full-deform", no_argument, NULL, 'F'},
    {"no-smooth", no_argument, NULL, 'S'},
    {"smooth", required_argument, NULL, 'K'},
    {"smooth-s", required_argument, NULL, 'k'},
    {"eps", required_argument, NULL, 'E'},
    {"threshold", required_argument, NULL, 'T'},
    {"plain-median", no_argument, NULL, 'P'},
    {"contrast", required_argument, NULL, 'G'},
    {"cbc", required_argument, NULL, 'C'},
    {"subpixel", required_argument, NULL, 'Q'},
    {"uncertainty", required_argument, NULL, 'U'},
    {"prefilter", required_argument, NULL, 'L'},
    {"cap", required_argument, NULL, 'N'},
    {"highpass", required_argument, NULL, 'H'},
    {"lcn", required_argument, NULL, 'Z'},
    {"threads", required_argument, NULL, 't'},
    {"mask", required_argument, NULL, 'm'},
    {"background", required_argument, NULL, 'b'},
    {"max-pixels", required_argument, NULL, 'M'},
    {"max-memory", required_argument, NULL, 'X'},
    {"max-ratio", required_argument, NULL, 'R'},
    {"wisdom", required_argument, NULL, 'W'},
    {"cameras", required_argument, NULL, 'y'},
    {"dt", required_argument, NULL, 'D'},
    {"max-residual", required_argument, NULL, 'r'},
    {"ensemble", no_argument, NULL, 'e'},
    {"calibration", required_argument, NULL, 'u'},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0}};

// Takes option 'opt' (its argument in optarg) into o. -1 to go on, or the
// exit code (after --help, --version or a bad option, said on stderr).
static int
s_option (int opt, char **argv, s_opts_t *o)
{
    piv_settings_t *settings = &o->settings;
    char err[1024];
    long n;
    switch (opt) {
    case 'w':
        if (s_int_arg ("--window", optarg, 4, 256, &o->window))
            return 2;
        o->window_set = 1;
        break;
    case 'p':
        o->passes = optarg;
        break;
    case 'O':
        if (s_int_arg ("--overlap", optarg, 0, 87, &n))
            return 2;
        settings->overlap = (int) n;
        break;
    case 'i':
        if (s_int_arg ("--iterations", optarg, 1, 10, &n))
            return 2;
        settings->final_iterations = (int) n;
        break;
    case 'c':
        if (s_double_arg ("--converge", optarg, &settings->converge))
            return 2;
        break;
    case 'd':
        if (piv_deform_parse (optarg, &settings->deform, err, sizeof err))
            return cli_usage_error ("%s", err);
        break;
    case 'A':
        settings->symmetric = 0;
        break;
    case 'E':
        if (s_double_arg ("--eps", optarg, &settings->median_eps))
            return 2;
        break;
    case 'T':
        if (s_double_arg ("--threshold", optarg, &settings->median_threshold))
            return 2;
        break;
    case 'P':
        settings->median_curved = 0;
        break;
    case 'G':
        if (s_double_arg ("--contrast", optarg, &settings->contrast))
            return 2;
        break;
    case 'C':
        if (s_double_arg ("--cbc", optarg, &settings->cbc))
            return 2;
        break;
    case 'Q':
        if (piv_subpixel_parse (optarg, &settings->subpixel, err, sizeof err))
            return cli_usage_error ("%s", err);
        break;
    case 'U':
        if (piv_uncertainty_parse (optarg, &settings->uncertainty, err, sizeof err))
            return cli_usage_error ("%s", err);
        break;
    case 'L':
        if (s_double_arg ("--prefilter", optarg, &settings->prefilter))
            return 2;
        break;
    case 'N':
        if (s_double_arg ("--cap", optarg, &settings->cap))
            return 2;
        break;
    case 'H':
        if (s_double_arg ("--highpass", optarg, &settings->highpass))
            return 2;
        break;
    case 'Z':
        if (s_int_arg ("--lcn", optarg, 0, PIV_LCN_MAX, &n))
            return 2;
        settings->lcn = (int) n;
        break;
    case 't':
        if (s_int_arg ("--threads", optarg, 1, PIV_MAX_THREADS, &n))
            return 2;
        settings->threads = (int) n;
        break;
    case 'm':
        o->mask_path = optarg;
        break;
    case 'b':
        o->background = optarg;
        break;
    case 'M':
        if (s_int_arg ("--max-pixels", optarg, 1, 1L << 40, &n))
            return 2;
        o->max_pixels = (size_t) n;
        break;
    case 'X':
        if (util_parse_size (optarg, &o->max_memory) != 0)
            return cli_usage_error ("bad --max-memory '%s': expected a size such as 2G or "
                                    "512M, or 0 for no limit",
                                    optarg);
        break;
    case 'R':
        if (s_int_arg ("--max-ratio", optarg, 2, 1000000, &o->max_ratio))
            return 2;
        break;
    case 'W':
        o->wisdom = optarg;
        break;
    case 'y':
        o->cameras = optarg;
        break;
    case 'D':
        if (s_double_arg ("--dt", optarg, &o->dt))
            return 2;
        if (!(o->dt > 0))
            return cli_usage_error ("bad --dt '%s': expected seconds, more than 0", optarg);
        break;
    case 'r':
        if (s_double_arg ("--max-residual", optarg, &o->max_residual))
            return 2;
        break;
    case 'e':
        o->ensemble = 1;
        break;
    case 'u':
        if (piv_calib_parse (optarg, &o->calib, err, sizeof err) != 0)
            return cli_usage_error ("bad --calibration: %s", err);
        if (!o->calib.set)
            return cli_usage_error ("bad --calibration '%s': expected scale and dt, such as "
                                    "\"scale=0.05mm/px dt=1ms\"", optarg);
        break;
    case 'f':
        if (strcmp (optarg, "txt") == 0)
            o->format = PIV_FORMAT_TXT;
        else if (strcmp (optarg, "tecplot") == 0)
            o->format = PIV_FORMAT_TECPLOT;
        else
            return cli_usage_error ("bad --format '%s': expected txt or tecplot", optarg);
        break;
    case 'o':
        o->output = optarg;
        break;
    case 'v':
        log_set_level (LOG_LEVEL_INFO);
        break;
    case 'h':
        s_usage (stdout);
        return 0;
    case 'V':
        printf ("pivfarm-piv %s\n", PIVFARM_VERSION);
        return 0;
    case 'F':
        settings->deform_every_pass = 1;
        break;
    case 'S':
        settings->smooth_predictor = 0;
        break;
    case 'K':
        if (piv_smooth_parse (optarg, &settings->smooth, err, sizeof err))
            return cli_usage_error ("%s", err);
        break;
    case 'k':
        if (s_double_arg ("--smooth-s", optarg, &settings->smooth_s))
            return 2;
        break;
    default:
        return cli_bad_option (opt, argv);
    }
    return -1;
}

// Reads the command line into o: the options, the window sizes, the
// frames. -1 to go on, or the exit code.
static int
s_parse_args (int argc, char **argv, s_opts_t *o)
{
    char err[1024];
    int opt, code;
    opterr = 0;  // our own messages (cli_usage_error)
    while ((opt = getopt_long (argc, argv, ":w:p:O:i:c:d:t:m:b:f:o:vhV", s_options, NULL)) != -1)
        if ((code = s_option (opt, argv, o)) >= 0)
            return code;
    int nfiles = argc - optind;
    o->files = argv + optind;
    o->nfiles = nfiles;
    if (o->calib.set && !o->ensemble)
        return cli_usage_error ("--calibration goes with --ensemble");
    if (o->ensemble) {
        if (o->cameras || o->passes || o->background || o->format != PIV_FORMAT_TXT)
            return cli_usage_error ("--ensemble: --cameras, --passes, --background and "
                                    "--format are not for it (its passes run from 32 px to "
                                    "--window, txt)");
        if (nfiles < 2 || nfiles % 2 != 0)
            return cli_usage_error ("--ensemble expects frames in pairs A1.tif B1.tif A2.tif "
                                    "B2.tif ... (got %d file%s)",
                                    nfiles, nfiles == 1 ? "" : "s");
        if (!o->window_set)
            o->window = 8;
        if (o->window % 2 != 0)
            return cli_usage_error ("bad --window '%ld': an even window size from 4 to %d",
                                    o->window, PIV_MAX_WINDOW);
        return -1;
    }
    if (o->cameras) {
        if (nfiles != 4)
            return cli_usage_error ("--cameras expects four frames A1.tif B1.tif A2.tif B2.tif "
                                    "(got %d files)",
                                    nfiles);
        if (o->mask_path || o->background)
            return cli_usage_error ("--cameras: --mask and --background are not supported yet");
        if (o->format != PIV_FORMAT_TXT)
            return cli_usage_error ("--cameras writes txt only");
        for (int i = 0; i < 4; i++)
            o->stereo[i] = argv[optind + i];
    }
    else if (o->dt > 0)
        return cli_usage_error ("--dt goes with --cameras");
    else if (nfiles < 1 || nfiles > 2)
        return cli_usage_error ("expected two frames A.tif B.tif, or one two-page PAIR.tif "
                                "(got %d files)",
                                nfiles);
    if (o->passes) {
        if (piv_settings_set_passes (&o->settings, o->passes, err, sizeof err))
            return cli_usage_error ("%s", err);
    }
    else {
        char one[16];
        snprintf (one, sizeof one, "%ld", o->window);
        if (o->window < 8 || piv_settings_set_passes (&o->settings, one, err, sizeof err))
            return cli_usage_error ("bad --window '%ld': an even window size from 8 to %d (4 "
                                    "with --ensemble)",
                                    o->window, PIV_MAX_WINDOW);
    }
    o->path_a = argv[optind];
    o->path_b = nfiles == 2 ? argv[optind + 1] : NULL;
    return -1;
}

static int
s_cmp_float (const void *a, const void *b)
{
    float x = *(const float *) a, y = *(const float *) b;
    return (x > y) - (x < y);
}

// The header of a stereo field: what was run on what, the grid, and what
// came out.
static void
s_stereo_header (const s_opts_t *o, const piv_stereo_t *st, const piv_field3_t *f, int width,
                 int height, char *header, size_t len)
{
    const piv_stereo_grid_t *g = piv_stereo_grid (st);
    const piv_settings_t *settings = &o->settings;
    long n = (long) f->nx * f->ny, count[3] = {0, 0, 0}, used = 0;
    double mean[3] = {0, 0, 0};
    float *res = malloc ((size_t) n * sizeof *res);
    for (long k = 0; k < n; k++) {
        count[f->flags[k] <= 2 ? f->flags[k] : 2]++;
        if (f->flags[k] == PIV_FLAG_VALID) {
            mean[0] += f->u[k];
            mean[1] += f->v[k];
            mean[2] += f->w[k];
            if (res)
                res[used] = f->residual[k];
            used++;
        }
    }
    double median = NAN;
    if (res && used > 0) {
        qsort (res, (size_t) used, sizeof *res, s_cmp_float);
        median = used % 2 ? res[used / 2] : 0.5 * (res[used / 2 - 1] + res[used / 2]);
    }
    free (res);
    for (int c = 0; c < 3; c++)
        mean[c] = count[0] ? mean[c] / count[0] : NAN;
    char list[128] = "";
    for (int i = 0; i < settings->npasses; i++)
        snprintf (list + strlen (list), sizeof list - strlen (list), "%s%d", i ? "," : "",
                  settings->passes[i]);
    const piv_field_t *p = piv_stereo_planar (st, 0);
    // The light sheet's plane (the calibration's sheet line), as before it
    // was read where it has none.
    piv_sheet_t sh;
    piv_stereo_sheet (st, &sh);
    char plane[128] = "Z = 0";
    if (sh.z0 != 0 || sh.dzdx != 0 || sh.dzdy != 0)
        snprintf (plane, sizeof plane, "the sheet Z = %.6g %+.6g X %+.6g Y", sh.z0, sh.dzdx,
                  sh.dzdy);
    snprintf (header, len,
              "pivfarm-piv %s stereo\n"
              "cameras %s\n"
              "camera_1 %s %s\n"
              "camera_2 %s %s\n"
              "image %dx%d\n"
              "world grid X %.3f..%.3f Y %.3f..%.3f mm on %s, %.5f mm per px, %dx%d px\n"
              "passes %s overlap %d%% iterations %d converge %g deform %s%s subpixel %s\n"
              "validation normalized-median eps %g threshold %g contrast %g cbc %g smooth %s; "
              "residual bound %g px\n"
              "grid %dx%d window %d step %d (dewarped px)\n"
              "vectors %ld valid %ld replaced %ld invalid %ld\n"
              "mean_u %.6g mean_v %.6g mean_w %.6g (mm per frame, over valid vectors); "
              "residual median %.4f px\n"
              "x, y = world position (mm, the calibration's frame, Y up); u, v, w = displacement "
              "A to B along X, Y, Z; flags 0 valid, 1 replaced, 2 invalid; residual = misfit of "
              "the 4 equations in image px",
              PIVFARM_VERSION, o->cameras, o->stereo[0], o->stereo[1], o->stereo[2],
              o->stereo[3], width, height, g->x0, g->x0 + (g->width - 1) * g->step,
              g->y0 - (g->height - 1) * g->step, g->y0, plane, g->step, g->width, g->height, list,
              settings->overlap, settings->final_iterations, settings->converge,
              piv_deform_name (settings->deform), settings->symmetric ? " symmetric" : "",
              piv_subpixel_name (settings->subpixel), settings->median_eps,
              settings->median_threshold, settings->contrast, settings->cbc,
              piv_smooth_name (settings->smooth), o->max_residual, f->nx, f->ny,
              p ? p->window : 0, p ? p->step : 0, n, count[0], count[1], count[2], mean[0],
              mean[1], mean[2], median);
}

// pivfarm-piv --cameras: the two cameras' pairs in, the 3-component field
// out. The exit code.
static int
s_stereo_main (s_opts_t *o)
{
    char err[1024] = "";
    piv_cameras_t *rig = NULL;
    piv_image_t *fr[4] = {NULL, NULL, NULL, NULL};
    piv_stereo_t *st = NULL;
    piv_field3_t *f = NULL;
    int rc = 1;
    double t0 = util_now ();
    if (!(rig = piv_cameras_load (o->cameras, err, sizeof err)))
        goto fail;
    if (piv_cameras_count (rig) != 2) {
        snprintf (err, sizeof err, "calibration '%s' has %zu camera%s: stereo needs two",
                  o->cameras, piv_cameras_count (rig), piv_cameras_count (rig) == 1 ? "" : "s");
        goto fail;
    }
    for (int c = 0; c < 2; c++)
        if (piv_image_load_pair (o->stereo[2 * c], o->stereo[2 * c + 1], o->max_pixels,
                                 &fr[2 * c], &fr[2 * c + 1], err, sizeof err))
            goto fail;
    int width = piv_image_width (fr[0]), height = piv_image_height (fr[0]);
    if (piv_image_width (fr[2]) != width || piv_image_height (fr[2]) != height) {
        snprintf (err, sizeof err, "'%s' is %dx%d, '%s' is %dx%d: both cameras' frames must "
                  "have one size", o->stereo[0], width, height, o->stereo[2],
                  piv_image_width (fr[2]), piv_image_height (fr[2]));
        goto fail;
    }
    double t_load = util_now ();
    if (!(st = piv_stereo_new (rig, &o->settings, width, height, NULL, err, sizeof err)))
        goto fail;
    piv_stereo_set_max_residual (st, o->max_residual);
    double t_plan = util_now ();
    if (!(f = piv_stereo_process (st, fr[0], fr[1], fr[2], fr[3], err, sizeof err))) {
        // Name the frames: the engine's message says what, not which files.
        log_error ("cannot process '%s' '%s' '%s' '%s': %s", o->stereo[0], o->stereo[1],
                   o->stereo[2], o->stereo[3], err);
        err[0] = '\0';
        goto fail;
    }
    double t_done = util_now ();
    if (piv_wisdom_save_new (o->wisdom) < 0)
        log_info ("cannot save FFTW wisdom to '%s'", o->wisdom);
    static char header[8192];
    s_stereo_header (o, st, f, width, height, header, sizeof header);
    FILE *out = o->output ? fopen (o->output, "w") : stdout;
    if (!out) {
        snprintf (err, sizeof err, "cannot write '%s': %s", o->output, strerror (errno));
        goto fail;
    }
    int werr = piv_field3_write (f, out, o->dt, header);
    if ((o->output ? fclose (out) : fflush (out)) != 0 || werr) {
        snprintf (err, sizeof err, "cannot write '%s': %s",
                  o->output ? o->output : "standard output", strerror (errno));
        goto fail;
    }
    log_info ("%s: stereo %dx%d vectors; load %.1f ms, grid and plans %.1f ms, dewarp and PIV "
              "%.1f ms",
              o->stereo[0], f->nx, f->ny, (t_load - t0) * 1e3, (t_plan - t_load) * 1e3,
              (t_done - t_plan) * 1e3);
    rc = 0;
fail:
    if (rc && err[0])
        log_error ("%s", err);
    piv_field3_destroy (&f);
    piv_stereo_destroy (&st);
    for (int i = 0; i < 4; i++)
        piv_image_destroy (&fr[i]);
    piv_cameras_destroy (&rig);
    return rc;
}

// The images of one run, all NULL until loaded.
typedef struct {
    piv_loader_t *loader;  // the pair's, held to the budget
    piv_image_t *a, *b;    // the pair (the loader's)
    piv_image_t *mask;     // -m
    piv_image_t *bg;       // -b: the minimum of the background frames
} s_images_t;

// The budget of the pair: --max-memory, else 3/4 of what this process may
// use (util_memory_limit), as the agent's with one thread; --max-ratio.
static void
s_budget (const s_opts_t *o, piv_budget_t *budget)
{
    char size[32], whole[32], source[64];
    uint64_t limit;
    *budget = (piv_budget_t) {.max_ratio = (int) o->max_ratio, .settings = &o->settings};
    if (o->max_memory >= 0) {
        budget->memory = (uint64_t) o->max_memory;
        snprintf (budget->memory_of, sizeof budget->memory_of, "the limit of %s (--max-memory)",
                  piv_budget_size (budget->memory, size, sizeof size));
    }
    else if (util_memory_limit (&limit, source, sizeof source) == 0) {
        budget->memory = limit / 4 * 3;
        snprintf (budget->memory_of, sizeof budget->memory_of,
                  "the limit of %s (3/4 of %s %s; --max-memory)",
                  piv_budget_size (budget->memory, size, sizeof size), source,
                  piv_budget_size (limit, whole, sizeof whole));
    }
}

// Loads the mask (set in o->settings, so that the budget counts it), the
// pair (*t_load: when it was in) and the background, subtracted from both
// frames. 0, or -1 with the reason in err.
static int
s_load (s_opts_t *o, s_images_t *im, double *t_load, char *err, size_t errlen)
{
    if (o->mask_path) {
        if (!(im->mask = piv_image_load (o->mask_path, 0, o->max_pixels, err, errlen)))
            return -1;
        o->settings.mask = im->mask;
    }
    piv_budget_t budget;
    s_budget (o, &budget);
    if (!(im->loader = piv_loader_new ())) {
        snprintf (err, errlen, "cannot load '%s': out of memory", o->path_a);
        return -1;
    }
    piv_loader_set_budget (im->loader, &budget);
    if (piv_loader_pair (im->loader, o->path_a, o->path_b, o->max_pixels, &im->a, &im->b, err,
                         errlen))
        return -1;
    *t_load = util_now ();
    int width = piv_image_width (im->a), height = piv_image_height (im->a);
    if (im->mask
        && (piv_image_width (im->mask) != width || piv_image_height (im->mask) != height)) {
        snprintf (err, errlen, "mask '%s' is %dx%d, the frames are %dx%d", o->mask_path,
                  piv_image_width (im->mask), piv_image_height (im->mask), width, height);
        return -1;
    }
    if (o->background) {
        if (!(im->bg = s_background (o->background, o->max_pixels, width, height, err, errlen))
            || piv_image_subtract (im->a, im->bg, err, errlen)
            || piv_image_subtract (im->b, im->bg, err, errlen))
            return -1;
    }
    return 0;
}

// Writes the field with its header (what was run on what, and what came
// out) where -o says; *total, *replaced, *invalid: its vectors by flag.
// 0, or -1 with the reason in err.
static int
s_write (const s_opts_t *o, const piv_image_t *a, const piv_field_t *field, long *total,
         long *replaced, long *invalid, char *err, size_t errlen)
{
    const piv_settings_t *settings = &o->settings;
    const char *path_a = o->path_a, *path_b = o->path_b, *output = o->output;
    piv_field_stats_t st;
    piv_field_stats (field, PIV_FLAG_VALID, &st);
    *total = (long) field->nx * field->ny;
    *replaced = *invalid = 0;
    for (long k = 0; k < *total; k++) {
        *replaced += field->flags[k] == PIV_FLAG_REPLACED;
        *invalid += field->flags[k] == PIV_FLAG_INVALID;
    }
    char list[128] = "";
    for (int i = 0; i < settings->npasses; i++)
        snprintf (list + strlen (list), sizeof list - strlen (list), "%s%d", i ? "," : "",
                  settings->passes[i]);
    char header[4096];
    snprintf (header, sizeof header,
              "pivfarm-piv %s\n"
              "frame_a %s\n"
              "frame_b %s\n"
              "image %dx%d\n"
              "passes %s overlap %d%% iterations %d (ran %d) converge %g deform %s%s%s%s "
              "subpixel %s prefilter %g cap %g highpass %g lcn %d\n"
              "%s%s%s"
              "validation normalized-median%s eps %g threshold %g contrast %g cbc %g smooth %s s %g\n"
              "grid %dx%d window %d step %d\n"
              "vectors %ld valid %ld replaced %ld invalid %ld\n"
              "mean_u %.4f mean_v %.4f (px, over valid vectors)\n"
              "x = column, y = row of the window centre (px, pixel centres at integers, "
              "y downward); u, v = displacement A to B (px); flags 0 valid, 1 replaced, "
              "2 invalid%s%s%s",
              PIVFARM_VERSION, path_a, path_b ? path_b : path_a, piv_image_width (a),
              piv_image_height (a), list, settings->overlap, settings->final_iterations,
              field->runs, settings->converge, piv_deform_name (settings->deform),
              settings->symmetric ? " symmetric" : "",
              settings->deform_every_pass ? " deform-every-pass" : "",
              settings->smooth_predictor ? " smoothed-predictor" : "",
              piv_subpixel_name (settings->subpixel), settings->prefilter, settings->cap,
              settings->highpass, settings->lcn, o->background ? "background min of " : "",
              o->background ? o->background : "", o->background ? "\n" : "",
              settings->median_curved ? " curved" : "", settings->median_eps,
              settings->median_threshold, settings->contrast, settings->cbc,
              piv_smooth_name (settings->smooth),
              settings->smooth_s,
              field->nx, field->ny,
              field->window, field->step, *total, *total - *replaced - *invalid, *replaced,
              *invalid, st.mean_u, st.mean_v, field->sigma_u ? "; sigma_u, sigma_v = standard uncertainty (px, " : "",
              field->sigma_u ? piv_uncertainty_name (piv_uncertainty_method (settings)) : "",
              field->sigma_u ? ", of the field before smoothing)" : "");
    FILE *out = output ? fopen (output, "w") : stdout;
    if (!out) {
        snprintf (err, errlen, "cannot write '%s': %s", output, strerror (errno));
        return -1;
    }
    int werr = piv_field_write (field, out, o->format, header);
    if ((output ? fclose (out) : fflush (out)) != 0 || werr) {
        snprintf (err, errlen, "cannot write '%s': %s", output ? output : "standard output",
                  strerror (errno));
        return -1;
    }
    return 0;
}

// -v: the peak-locking figure of the field (piv_field_peak_locking): the
// share of the valid vectors' fractional displacements in each 0.1 px bin
// and Christensen's index.
static void
s_log_peak_locking (const char *path, const piv_field_t *field)
{
    piv_lock_t lock;
    if (piv_field_peak_locking (field, &lock) == 0)
        return;
    char hist[PIV_LOCK_BINS * 8] = "";
    size_t len = 0;
    for (int b = 0; b < PIV_LOCK_BINS; b++)
        len += snprintf (hist + len, sizeof hist - len, " %.1f",
                         100.0 * lock.bins[b] / lock.count);
    log_info ("%s: peak locking %.2f (Christensen 2004, 0 none .. 4); fractional "
              "displacements of valid vectors by 0.1 px from 0, %%:%s", path, lock.index, hist);
}

// --ensemble's pairs: pair i is files 2 i, 2 i + 1, each of the first
// pair's size, loaded as piv_image_load_pair loads them.
static int
s_ensemble_pair (void *arg, long i, piv_image_t **a, piv_image_t **b, char *err, size_t errlen)
{
    const s_opts_t *o = arg;
    return piv_image_load_pair (o->files[2 * i], o->files[2 * i + 1], o->max_pixels, a, b, err,
                                errlen);
}

// pivfarm-piv --ensemble: the pairs' ensemble correlation (piv/ensemble.h)
// written as piv_ensemble_write writes it. The exit status.
static int
s_ensemble_main (s_opts_t *o)
{
    char err[1024] = "";
    double t0 = util_now ();
    piv_image_t *a = NULL, *b = NULL, *mask = NULL;
    piv_field_t *field = NULL;
    float *stress = NULL;
    int rc = 1;
    long npairs = o->nfiles / 2;
    if (o->mask_path) {
        if (!(mask = piv_image_load (o->mask_path, 0, o->max_pixels, err, sizeof err)))
            goto done;
        o->settings.mask = mask;
    }
    // The first pair gives the frames' size (the pass refuses others,
    // naming both sizes).
    if (s_ensemble_pair (o, 0, &a, &b, err, sizeof err) != 0)
        goto done;
    int width = piv_image_width (a), height = piv_image_height (a);
    if (o->calib.set && piv_calib_check_image (&o->calib, width, height, err, sizeof err) != 0)
        goto done;
    field = piv_ensemble_run (&o->settings, (int) o->window, o->settings.overlap, width, height,
                              npairs, s_ensemble_pair, o, &stress, err, sizeof err);
    if (!field)
        goto done;
    long total = (long) field->nx * field->ny, invalid = 0;
    for (long k = 0; k < total; k++)
        invalid += field->flags[k] == PIV_FLAG_INVALID;
    int windows[PIV_MAX_PASSES], passes = piv_ensemble_passes ((int) o->window, windows,
                                                               PIV_MAX_PASSES);
    char list[128] = "", calib[256] = "not calibrated";
    for (int i = 0; i < passes; i++)
        snprintf (list + strlen (list), sizeof list - strlen (list), "%s%d", i ? "," : "",
                  windows[i]);
    if (o->calib.set)
        piv_calib_describe (&o->calib, calib, sizeof calib);
    int si = o->calib.set;
    char header[4096];
    snprintf (header, sizeof header,
              "pivfarm-piv %s ensemble correlation\n"
              "pairs %ld, first '%s' and '%s', last '%s' and '%s'\n"
              "image %dx%d\n"
              "passes %s overlap %d%% deform %s%s subpixel %s\n"
              "grid %dx%d window %d step %d\n"
              "vectors %ld valid %ld invalid %ld (invalid: no peak, or failed the median test; "
              "not replaced)\n"
              "calibration %s\n"
              "x, y = window centre (%s); u, v = mean displacement (%s); uu, vv, uv = "
              "Reynolds stresses u'u', v'v', u'v' (%s), nan where the peak's width was not "
              "measured",
              PIVFARM_VERSION, npairs, o->files[0], o->files[1], o->files[o->nfiles - 2],
              o->files[o->nfiles - 1], width, height, list, o->settings.overlap,
              piv_deform_name (o->settings.deform), o->settings.symmetric ? " symmetric" : "",
              piv_subpixel_name (o->settings.subpixel), field->nx, field->ny, field->window,
              field->step, total, total - invalid, invalid, calib,
              si ? "m" : "px, column and row, y downward", si ? "m/s" : "px from A to B",
              si ? "m^2/s^2" : "px^2");
    FILE *out = o->output ? fopen (o->output, "w") : stdout;
    if (!out) {
        snprintf (err, sizeof err, "cannot write '%s': %s", o->output, strerror (errno));
        goto done;
    }
    int werr = piv_ensemble_write (field, stress, &o->calib, out, header);
    if ((o->output ? fclose (out) : fflush (out)) != 0 || werr) {
        snprintf (err, sizeof err, "cannot write '%s': %s",
                  o->output ? o->output : "standard output", strerror (errno));
        goto done;
    }
    log_info ("ensemble of %ld pairs: %ld vectors (%ld invalid) in %.1f s", npairs, total,
              invalid, util_now () - t0);
    rc = 0;
done:
    if (rc)
        log_error ("%s", err);
    free (stress);
    piv_field_destroy (&field);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    piv_image_destroy (&mask);
    return rc;
}

int
main (int argc, char **argv)
{
    log_open ("pivfarm-piv", 0);
    cli_set_program ("pivfarm-piv");
    static s_opts_t o = {.format = PIV_FORMAT_TXT,
                         .max_pixels = PIV_MAX_PIXELS_DEFAULT,
                         .max_memory = -1,
                         .max_ratio = PIV_MAX_RATIO_DEFAULT,
                         .window = 32,
                         .max_residual = PIV_STEREO_MAX_RESIDUAL};
    piv_settings_init (&o.settings);
    piv_calib_init (&o.calib);
    o.wisdom = piv_wisdom_default_path ();
    int code = s_parse_args (argc, argv, &o);
    if (code >= 0)
        return code;
    if (o.cameras) {
        piv_wisdom_load (o.wisdom);
        return s_stereo_main (&o);
    }
    if (o.ensemble)
        return s_ensemble_main (&o);
    const char *path_a = o.path_a, *path_b = o.path_b;
    char err[1024];

    double t0 = util_now (), t_load = 0;
    piv_wisdom_load (o.wisdom);
    s_images_t im = {NULL, NULL, NULL, NULL, NULL};
    piv_t *piv = NULL;
    piv_field_t *field = NULL;
    int rc = 1;
    if (s_load (&o, &im, &t_load, err, sizeof err) != 0)
        goto fail;
    if (!(piv = piv_new (&o.settings, err, sizeof err)))
        goto fail;
    double t_plan = util_now ();
    if (!(field = piv_process (piv, im.a, im.b, err, sizeof err))) {
        // Name the pair: the engine's message says what, not which files.
        log_error ("cannot process '%s'%s%s%s: %s", path_a, path_b ? " and '" : "",
                   path_b ? path_b : "", path_b ? "'" : "", err);
        err[0] = '\0';
        goto fail;
    }
    double t_done = util_now ();
    if (piv_wisdom_save_new (o.wisdom) < 0)
        log_info ("cannot save FFTW wisdom to '%s'", o.wisdom);

    long total, replaced, invalid;
    double t_write = util_now ();
    if (s_write (&o, im.a, field, &total, &replaced, &invalid, err, sizeof err) != 0)
        goto fail;
    log_info ("%s: %ld vectors (%ld replaced, %ld invalid); load %.1f ms, plans %.1f ms, "
              "PIV %.1f ms, output %.1f ms",
              path_a, total, replaced, invalid, (t_load - t0) * 1e3, (t_plan - t_load) * 1e3,
              (t_done - t_plan) * 1e3, (util_now () - t_write) * 1e3);
    s_log_peak_locking (path_a, field);
    rc = 0;
fail:
    if (rc && err[0])
        log_error ("%s", err);
    piv_field_destroy (&field);
    piv_destroy (&piv);
    piv_loader_destroy (&im.loader);  // and the pair with it
    piv_image_destroy (&im.mask);
    piv_image_destroy (&im.bg);
    return rc;
}
