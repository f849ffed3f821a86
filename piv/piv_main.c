// piv_main.c — pivfarm-piv: one TIFF pair in, one vector field out.
// Exit status: 0 done, 1 the pair could not be processed, 2 bad usage (one
// line, cli_usage_error; doc/conventions.md).

#include "common/util.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/version.h"
#include "piv/piv.h"

#include <errno.h>
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
             "  -w, --window N        final window size, px (default 32; ignored with --passes)\n"
             "  -p, --passes LIST     window sizes large to small, e.g. 64,32,16\n"
             "  -O, --overlap PCT     window overlap, percent (default 50)\n"
             "  -i, --iterations N    most runs of the final window size (default 3)\n"
             "  -c, --converge PX     ... fewer once a run corrects less than PX RMS (default\n"
             "                        0.1; 0 always runs N times)\n"
             "  -d, --deform KIND     offset|bilinear|bicubic|bspline|bspline5|omoms (default bspline5)\n"
             "      --full-deform     deform in every pass after the first (default: integer\n"
             "                        window offset until the final window size)\n"
             "      --no-smooth       use the previous pass as predictor without 3x3 smoothing\n"
             "      --asymmetric      deform frame B only (default: both, about mid-time)\n"
             "      --eps E           median test epsilon, px (default 0.1)\n"
             "      --threshold T     median test threshold (default 2)\n"
             "  -t, --threads N       threads on this pair (default 1)\n"
             "  -m, --mask FILE       TIFF mask: zero pixels are outside the flow\n"
             "  -b, --background LIST comma-separated frames whose minimum is subtracted\n"
             "      --max-pixels N    refuse larger images (default 67108864)\n"
             "      --wisdom FILE     FFTW wisdom file (default %s)\n"
             "  -f, --format FMT      txt|tecplot (default txt)\n"
             "  -o, --output FILE     write here instead of standard output\n"
             "  -v, --verbose         say what is done and how long it took\n"
             "  -h, --help            this text\n"
             "  -V, --version         the version\n"
             "exit status: 0 done; 1 the pair could not be processed; 2 bad usage\n",
             piv_wisdom_default_path ());
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

int
main (int argc, char **argv)
{
    log_open ("pivfarm-piv", 0);
    cli_set_program ("pivfarm-piv");
    piv_settings_t settings;
    piv_settings_init (&settings);
    const char *output = NULL, *mask_path = NULL, *background = NULL, *passes = NULL;
    const char *wisdom = piv_wisdom_default_path ();
    piv_format_t format = PIV_FORMAT_TXT;
    size_t max_pixels = PIV_MAX_PIXELS_DEFAULT;
    long window = 32, n;
    char err[1024];

    static const struct option options[] = {
        {"window", required_argument, NULL, 'w'},
        {"passes", required_argument, NULL, 'p'},
        {"overlap", required_argument, NULL, 'O'},
        {"iterations", required_argument, NULL, 'i'},
        {"converge", required_argument, NULL, 'c'},
        {"deform", required_argument, NULL, 'd'},
        {"asymmetric", no_argument, NULL, 'A'},
        {"full-deform", no_argument, NULL, 'F'},
        {"no-smooth", no_argument, NULL, 'S'},
        {"eps", required_argument, NULL, 'E'},
        {"threshold", required_argument, NULL, 'T'},
        {"threads", required_argument, NULL, 't'},
        {"mask", required_argument, NULL, 'm'},
        {"background", required_argument, NULL, 'b'},
        {"max-pixels", required_argument, NULL, 'M'},
        {"wisdom", required_argument, NULL, 'W'},
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    int opt;
    opterr = 0;  // our own messages (cli_usage_error)
    while ((opt = getopt_long (argc, argv, ":w:p:O:i:c:d:t:m:b:f:o:vhV", options, NULL)) != -1) {
        switch (opt) {
        case 'w':
            if (s_int_arg ("--window", optarg, 8, 256, &window))
                return 2;
            break;
        case 'p':
            passes = optarg;
            break;
        case 'O':
            if (s_int_arg ("--overlap", optarg, 0, 87, &n))
                return 2;
            settings.overlap = (int) n;
            break;
        case 'i':
            if (s_int_arg ("--iterations", optarg, 1, 10, &n))
                return 2;
            settings.final_iterations = (int) n;
            break;
        case 'c':
            if (s_double_arg ("--converge", optarg, &settings.converge))
                return 2;
            break;
        case 'd':
            if (piv_deform_parse (optarg, &settings.deform, err, sizeof err))
                return cli_usage_error ("%s", err);
            break;
        case 'A':
            settings.symmetric = 0;
            break;
        case 'E':
            if (s_double_arg ("--eps", optarg, &settings.median_eps))
                return 2;
            break;
        case 'T':
            if (s_double_arg ("--threshold", optarg, &settings.median_threshold))
                return 2;
            break;
        case 't':
            if (s_int_arg ("--threads", optarg, 1, PIV_MAX_THREADS, &n))
                return 2;
            settings.threads = (int) n;
            break;
        case 'm':
            mask_path = optarg;
            break;
        case 'b':
            background = optarg;
            break;
        case 'M':
            if (s_int_arg ("--max-pixels", optarg, 1, 1L << 40, &n))
                return 2;
            max_pixels = (size_t) n;
            break;
        case 'W':
            wisdom = optarg;
            break;
        case 'f':
            if (strcmp (optarg, "txt") == 0)
                format = PIV_FORMAT_TXT;
            else if (strcmp (optarg, "tecplot") == 0)
                format = PIV_FORMAT_TECPLOT;
            else
                return cli_usage_error ("bad --format '%s': expected txt or tecplot", optarg);
            break;
        case 'o':
            output = optarg;
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
            settings.deform_every_pass = 1;
            break;
        case 'S':
            settings.smooth_predictor = 0;
            break;
        default:
            return cli_bad_option (opt, argv);
        }
    }
    int nfiles = argc - optind;
    if (nfiles < 1 || nfiles > 2)
        return cli_usage_error ("expected two frames A.tif B.tif, or one two-page PAIR.tif "
                                "(got %d files)",
                                nfiles);
    if (passes) {
        if (piv_settings_set_passes (&settings, passes, err, sizeof err))
            return cli_usage_error ("%s", err);
    }
    else {
        char one[16];
        snprintf (one, sizeof one, "%ld", window);
        if (piv_settings_set_passes (&settings, one, err, sizeof err))
            return cli_usage_error ("bad --window '%ld': a power of two from 8 to 256", window);
    }
    const char *path_a = argv[optind], *path_b = nfiles == 2 ? argv[optind + 1] : NULL;

    double t0 = util_now ();
    int wisdom_loaded = piv_wisdom_load (wisdom) == 0;
    piv_image_t *a = NULL, *b = NULL, *mask = NULL, *bg = NULL;
    piv_t *piv = NULL;
    piv_field_t *field = NULL;
    int rc = 1;
    if (piv_image_load_pair (path_a, path_b, max_pixels, &a, &b, err, sizeof err))
        goto fail;
    double t_load = util_now ();
    int width = piv_image_width (a), height = piv_image_height (a);
    if (mask_path) {
        if (!(mask = piv_image_load (mask_path, 0, max_pixels, err, sizeof err)))
            goto fail;
        if (piv_image_width (mask) != width || piv_image_height (mask) != height) {
            snprintf (err, sizeof err, "mask '%s' is %dx%d, the frames are %dx%d", mask_path,
                      piv_image_width (mask), piv_image_height (mask), width, height);
            goto fail;
        }
        settings.mask = mask;
    }
    if (background) {
        if (!(bg = s_background (background, max_pixels, width, height, err, sizeof err))
            || piv_image_subtract (a, bg, err, sizeof err)
            || piv_image_subtract (b, bg, err, sizeof err))
            goto fail;
    }
    if (!(piv = piv_new (&settings, err, sizeof err)))
        goto fail;
    double t_plan = util_now ();
    if (!(field = piv_process (piv, a, b, err, sizeof err))) {
        // Name the pair: the engine's message says what, not which files.
        log_error ("cannot process '%s'%s%s%s: %s", path_a, path_b ? " and '" : "",
                   path_b ? path_b : "", path_b ? "'" : "", err);
        err[0] = '\0';
        goto fail;
    }
    double t_done = util_now ();
    if (!wisdom_loaded && piv_wisdom_save (wisdom) != 0)
        log_info ("cannot save FFTW wisdom to '%s'", wisdom);

    piv_field_stats_t st;
    piv_field_stats (field, PIV_FLAG_VALID, &st);
    long total = (long) field->nx * field->ny;
    long replaced = 0, invalid = 0;
    for (long k = 0; k < total; k++) {
        replaced += field->flags[k] == PIV_FLAG_REPLACED;
        invalid += field->flags[k] == PIV_FLAG_INVALID;
    }
    char list[128] = "";
    for (int i = 0; i < settings.npasses; i++)
        snprintf (list + strlen (list), sizeof list - strlen (list), "%s%d", i ? "," : "",
                  settings.passes[i]);
    char header[4096];
    snprintf (header, sizeof header,
              "pivfarm-piv %s\n"
              "frame_a %s\n"
              "frame_b %s\n"
              "image %dx%d\n"
              "passes %s overlap %d%% iterations %d (ran %d) converge %g deform %s%s%s%s\n"
              "validation normalized-median eps %g threshold %g\n"
              "grid %dx%d window %d step %d\n"
              "vectors %ld valid %ld replaced %ld invalid %ld\n"
              "mean_u %.4f mean_v %.4f (px, over valid vectors)\n"
              "x = column, y = row of the window centre (px, pixel centres at integers, "
              "y downward); u, v = displacement A to B (px); flags 0 valid, 1 replaced, "
              "2 invalid",
              PIVFARM_VERSION, path_a, path_b ? path_b : path_a, piv_image_width (a),
              piv_image_height (a), list, settings.overlap, settings.final_iterations,
              field->runs, settings.converge, piv_deform_name (settings.deform), settings.symmetric ? " symmetric" : "",
              settings.deform_every_pass ? " deform-every-pass" : "",
              settings.smooth_predictor ? " smoothed-predictor" : "",
              settings.median_eps, settings.median_threshold, field->nx, field->ny,
              field->window, field->step, total, total - replaced - invalid, replaced, invalid,
              st.mean_u, st.mean_v);
    FILE *out = output ? fopen (output, "w") : stdout;
    if (!out) {
        snprintf (err, sizeof err, "cannot write '%s': %s", output, strerror (errno));
        goto fail;
    }
    int werr = piv_field_write (field, out, format, header);
    if ((output ? fclose (out) : fflush (out)) != 0 || werr) {
        snprintf (err, sizeof err, "cannot write '%s': %s", output ? output : "standard output",
                  strerror (errno));
        goto fail;
    }
    log_info ("%s: %ld vectors (%ld replaced, %ld invalid); load %.1f ms, plans %.1f ms, "
              "PIV %.1f ms",
              path_a, total, replaced, invalid, (t_load - t0) * 1e3, (t_plan - t_load) * 1e3,
              (t_done - t_plan) * 1e3);
    rc = 0;
fail:
    if (rc && err[0])
        log_error ("%s", err);
    piv_field_destroy (&field);
    piv_destroy (&piv);
    piv_image_destroy (&a);
    piv_image_destroy (&b);
    piv_image_destroy (&mask);
    piv_image_destroy (&bg);
    return rc;
}
