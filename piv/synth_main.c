// synth_main.c — pivfarm-synth: synthetic PIV image pairs of a known flow
// with the truth file beside them, and the scoring of a vector field
// against such a truth. Exit status: 0 done, 1 runtime failure, 2 bad usage.

#include "common/util.h"
#include "common/log.h"
#include "common/version.h"
#include "piv/flow.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_FLOW "uniform:3.3,-1.7"
#define MAX_SIDE 65536

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: pivfarm-synth [options]          write PREFIX_a.tif, PREFIX_b.tif, "
             "PREFIX.flow\n"
             "       pivfarm-synth --score FIELD.txt --truth PREFIX.flow [--size WxH] "
             "[--margin M]\n"
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
             "  -o, --output PREFIX   file name prefix, may include a directory (default synth)\n"
             "  -c, --count N         N pairs PREFIX_0001_a.tif ... with seeds S .. S+N-1\n"
             "      --score FIELD     score a vector file (x y u v [flags ...]) against --truth\n"
             "      --truth FILE      the truth file written beside the images\n"
             "      --margin M        score only vectors at least M px inside the image\n"
             "                        (default 0: all; the size defaults to the one the\n"
             "                        truth's centre implies)\n"
             "      --max-flag F      score vectors flagged at most F: 0 valid only,\n"
             "                        1 also replaced (default), 2 all\n"
             "  -v, --verbose         say what was written and how long it took\n"
             "  -h, --help, --version\n");
}

static int
s_long_arg (const char *opt, const char *arg, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long n = strtol (arg, &end, 10);
    if (errno || end == arg || *end || n < lo || n > hi) {
        log_error ("bad %s '%s': expected a whole number from %ld to %ld", opt, arg, lo, hi);
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
        log_error ("bad %s '%s': expected a number from %g to %g", opt, arg, lo, hi);
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
        log_error ("bad --size '%s': expected WIDTHxHEIGHT, each from 1 to %d", arg, MAX_SIDE);
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
        log_error ("bad --output '%s': too long", prefix);
        return -1;
    }
    return 0;
}

// Scores 'field_path' against 'truth_path'; the exit status.
static int
s_score (const char *field_path, const char *truth_path, int width, int height, double margin,
         int max_flag)
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
    piv_score_t score;
    int rc = piv_score (field, &truth, max_flag, margin, width, height, &score);
    piv_field_destroy (&field);
    if (rc != 0) {
        log_error ("cannot score '%s': no vector flagged at most %d lies %g px inside the "
                   "%dx%d image",
                   field_path, max_flag, margin, width, height);
        return 1;
    }
    printf ("vectors %d  rms %.4f px  (u %.4f, v %.4f)  bias (%+.4f, %+.4f) px  max %.4f px\n",
            score.count, score.rms, score.rms_u, score.rms_v, score.bias_u, score.bias_v,
            score.max_error);
    if (fflush (stdout) != 0) {
        log_error ("cannot write the score of '%s': %s", field_path, strerror (errno));
        return 1;
    }
    return 0;
}

int
main (int argc, char **argv)
{
    log_open ("pivfarm-synth", 0);
    piv_synth_t synth;
    piv_synth_init (&synth);
    const char *spec = DEFAULT_FLOW, *prefix = "synth";
    const char *score_path = NULL, *truth_path = NULL;
    int multipage = 0, size_given = 0, max_flag = PIV_FLAG_REPLACED;
    long count = 0, n;
    double margin = 0;
    char err[1024];

    enum { OPT_WIDTH = 256, OPT_HEIGHT, OPT_DIAMETER, OPT_SEED, OPT_SCORE, OPT_TRUTH,
           OPT_MARGIN, OPT_MAX_FLAG, OPT_VERSION };
    static const struct option options[] = {
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
        {"score", required_argument, NULL, OPT_SCORE},
        {"truth", required_argument, NULL, OPT_TRUTH},
        {"margin", required_argument, NULL, OPT_MARGIN},
        {"max-flag", required_argument, NULL, OPT_MAX_FLAG},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0}};
    // Leading ':' and opterr 0: bad options are reported here, in our words.
    opterr = 0;
    int opt;
    while ((opt = getopt_long (argc, argv, ":f:s:d:n:b:mo:c:vh", options, NULL)) != -1) {
        switch (opt) {
        case 'f':
            spec = optarg;
            break;
        case 's':
            if (s_size_arg (optarg, &synth.width, &synth.height))
                return 2;
            size_given = 1;
            break;
        case OPT_WIDTH:
        case OPT_HEIGHT:
            if (s_long_arg (opt == OPT_WIDTH ? "--width" : "--height", optarg, 1, MAX_SIDE, &n))
                return 2;
            *(opt == OPT_WIDTH ? &synth.width : &synth.height) = (int) n;
            size_given = 1;
            break;
        case 'd':
            if (s_double_arg ("--density", optarg, 0, 1, &synth.density))
                return 2;
            break;
        case OPT_DIAMETER:
            if (s_double_arg ("--diameter", optarg, 0.1, 20, &synth.diameter))
                return 2;
            break;
        case 'n':
            if (s_double_arg ("--noise", optarg, 0, 1, &synth.noise))
                return 2;
            break;
        case 'b':
            if (strcmp (optarg, "8") == 0 || strcmp (optarg, "16") == 0)
                synth.bits = atoi (optarg);
            else {
                log_error ("bad --bits '%s': expected 8 or 16", optarg);
                return 2;
            }
            break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            unsigned long long seed = strtoull (optarg, &end, 0);
            if (errno || end == optarg || *end || strchr (optarg, '-')) {
                log_error ("bad --seed '%s': expected a whole number from 0 to %llu", optarg,
                           (unsigned long long) UINT64_MAX);
                return 2;
            }
            synth.seed = (uint64_t) seed;
            break;
        }
        case 'm':
            multipage = 1;
            break;
        case 'o':
            if (!*optarg) {
                log_error ("bad --output '': expected a file name prefix");
                return 2;
            }
            prefix = optarg;
            break;
        case 'c':
            if (s_long_arg ("--count", optarg, 1, 9999, &count))
                return 2;
            break;
        case OPT_SCORE:
            score_path = optarg;
            break;
        case OPT_TRUTH:
            truth_path = optarg;
            break;
        case OPT_MARGIN:
            if (s_double_arg ("--margin", optarg, 0, MAX_SIDE, &margin))
                return 2;
            break;
        case OPT_MAX_FLAG:
            if (s_long_arg ("--max-flag", optarg, 0, 2, &n))
                return 2;
            max_flag = (int) n;
            break;
        case 'v':
            log_set_level (LOG_LEVEL_INFO);
            break;
        case 'h':
            s_usage (stdout);
            return 0;
        case OPT_VERSION:
            printf ("pivfarm-synth %s\n", PIVFARM_VERSION);
            return 0;
        case ':':
            log_error ("option '%s' needs a value", argv[optind - 1]);
            return 2;
        default:
            // optopt holds a bad short option; a bad long one is in argv.
            if (optopt)
                log_error ("unknown option '-%c' (see --help)", optopt);
            else
                log_error ("unknown option '%s' (see --help)", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        log_error ("unexpected argument '%s' (see --help)", argv[optind]);
        return 2;
    }
    if ((double) synth.width * synth.height > (double) PIV_MAX_PIXELS_DEFAULT) {
        log_error ("bad --size '%dx%d': more than %zu pixels", synth.width, synth.height,
                   PIV_MAX_PIXELS_DEFAULT);
        return 2;
    }
    if (score_path || truth_path) {
        if (!score_path || !truth_path) {
            log_error ("%s needs %s too", score_path ? "--score" : "--truth",
                       score_path ? "--truth" : "--score");
            return 2;
        }
        return s_score (score_path, truth_path, size_given ? synth.width : 0,
                        size_given ? synth.height : 0, margin, max_flag);
    }

    piv_flow_t flow;
    if (piv_flow_parse (&flow, spec, synth.width, synth.height, err, sizeof err)) {
        log_error ("%s", err);
        return 2;
    }
    char truth[4096], path_a[4096], path_b[4096];
    if (s_name (truth, sizeof truth, prefix, ".flow"))
        return 2;
    // The truth goes first: whoever picks up the images can score them.
    if (piv_flow_save (&flow, truth, err, sizeof err)) {
        log_error ("%s", err);
        return 1;
    }
    uint64_t seed = synth.seed;
    for (long i = 0; i < (count ? count : 1); i++) {
        char stem[24];
        if (count)
            snprintf (stem, sizeof stem, "_%04ld", i + 1);
        else
            stem[0] = '\0';
        char name_a[64], name_b[64];
        snprintf (name_a, sizeof name_a, "%s%s", stem, multipage ? ".tif" : "_a.tif");
        snprintf (name_b, sizeof name_b, "%s_b.tif", stem);
        if (s_name (path_a, sizeof path_a, prefix, name_a)
            || s_name (path_b, sizeof path_b, prefix, name_b))
            return 2;

        double t0 = util_now ();
        synth.seed = seed + (uint64_t) i;
        piv_image_t *frames[2] = {NULL, NULL};
        if (piv_synth_pair (&synth, &flow, &frames[0], &frames[1], err, sizeof err)) {
            log_error ("%s", err);
            return 1;
        }
        double t1 = util_now ();
        const piv_image_t *const *pages = (const piv_image_t *const *) frames;
        int rc;
        if (multipage)
            rc = piv_image_save (path_a, pages, 2, synth.bits, err, sizeof err);
        else if ((rc = piv_image_save (path_a, pages, 1, synth.bits, err, sizeof err)) == 0)
            rc = piv_image_save (path_b, pages + 1, 1, synth.bits, err, sizeof err);
        piv_image_destroy (&frames[0]);
        piv_image_destroy (&frames[1]);
        if (rc) {
            log_error ("%s", err);
            return 1;
        }
        log_info ("wrote '%s'%s%s%s (%dx%d, %d bits, seed %llu): synthesis %.1f ms, "
                  "writing %.1f ms",
                  path_a, multipage ? "" : " and '", multipage ? "" : path_b,
                  multipage ? "" : "'", synth.width, synth.height, synth.bits,
                  (unsigned long long) synth.seed, (t1 - t0) * 1e3, (util_now () - t1) * 1e3);
    }
    log_info ("wrote the truth '%s'", truth);
    return 0;
}
