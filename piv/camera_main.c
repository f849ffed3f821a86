// camera_main.c — pivfarm-calib: a stereo rig's cameras from calibration
// points, each fitted with both models and the better kept by evidence;
// and (--self-calibrate) where a rig's light sheet really is, from its
// particle images.
// Exit status: 0 done, 1 a points file or the calibration file could not be
// read, fitted or written, 2 bad usage (doc/conventions.md).

#include "common/cli.h"
#include "common/log.h"
#include "common/version.h"
#include "piv/camera.h"
#include "piv/cameras.h"
#include "piv/dots.h"
#include "piv/image.h"
#include "piv/points.h"
#include "piv/selfcal.h"
#include "piv/stereo.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CAMERAS 16
#define MAX_FILES 256

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: pivfarm-calib [--camera N] --points FILE [--points FILE ...]\n"
             "                     [--camera M --points FILE ...] [-o CALIB]\n"
             "       pivfarm-calib --self-calibrate CALIB --pair A1 B1 A2 B2 [...] [-o OUT]\n"
             "                     (pivfarm-calib --self-calibrate --help: its options)\n"
             "  -c, --camera N        the points files that follow are camera N's (0 to 999;\n"
             "                        default 1)\n"
             "  -p, --points FILE     calibration points: lines 'X Y Z col row' (world mm,\n"
             "                        image px, pixel centres at integers; '#' comments) or\n"
             "                        the XML of UVMAT/fluidimage (<PointCoord>, <CoordUnit>);\n"
             "                        one file per target plane or all planes in one\n"
             "  -i, --image Z:FILE    a target image (TIFF) at the plane Z (mm): its dots found,\n"
             "                        indexed from the square and the triangle, and used as\n"
             "                        points (doc/stereo.md); needs --spacing\n"
             "  -s, --spacing MM      the target's lattice unit: from the origin dot to the\n"
             "                        square (case E: 7.5)\n"
             "  -m, --model MODEL     auto (default: the lower held-out RMS), soloff (19-term\n"
             "                        polynomial) or pinhole (DLT with radial distortion)\n"
             "  -o, --output CALIB    write the camera calibration file here\n"
             "      --size WxH        the frames' size (px): the file gets the stereo grid of\n"
             "                        two cameras with frames this size (the largest area both\n"
             "                        see on Z = 0, at the finer camera's resolution), as the\n"
             "                        farm needs it ('pivctl calibrate EXP --cameras CALIB')\n"
             "  -h, --help            this text\n"
             "  -V, --version         the version\n"
             "Prints for each camera and model the reprojection RMS and maximum (px) over\n"
             "the points, and over each Z plane predicted by a fit on the other planes.\n"
             "exit status: 0 done; 1 a file could not be read, fitted or written; 2 bad usage\n");
}

// One --points file or --image.
typedef struct {
    const char *path;   // the file
    int image;          // 1: a target image (--image), 0: points (--points)
    double z;           // an image's plane, mm
} s_source_t;

typedef struct {
    int id;                         // the camera's number
    s_source_t src[MAX_FILES];      // its points files and images, in the order given
    int n;
} s_camera_arg_t;

typedef struct {
    s_camera_arg_t cams[MAX_CAMERAS];   // in the order given
    int ncams;
    int automatic;                      // choose the model by evidence
    piv_camera_model_t model;           // else this one
    const char *output;                 // the calibration file, or NULL
    double spacing;                     // mm, the target's lattice unit (0: not given)
    int width, height;                  // --size: the frames' size for the stereo grid (0: none)
} s_opts_t;

static const struct option s_options[] = {
    {"camera", required_argument, NULL, 'c'},
    {"points", required_argument, NULL, 'p'},
    {"model", required_argument, NULL, 'm'},
    {"image", required_argument, NULL, 'i'},
    {"spacing", required_argument, NULL, 's'},
    {"output", required_argument, NULL, 'o'},
    {"size", required_argument, NULL, 'S'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

// The camera numbered id, added if new (NULL: too many).
static s_camera_arg_t *
s_camera (s_opts_t *o, int id)
{
    for (int i = 0; i < o->ncams; i++)
        if (o->cams[i].id == id)
            return &o->cams[i];
    if (o->ncams == MAX_CAMERAS)
        return NULL;
    s_camera_arg_t *c = &o->cams[o->ncams++];
    c->id = id;
    c->n = 0;
    return c;
}

// Adds a source to the current camera: -1 to go on, or the exit code.
static int
s_add_source (s_opts_t *o, int current, const char *path, int image, double z)
{
    s_camera_arg_t *c = s_camera (o, current);
    if (!c)
        return cli_usage_error ("too many cameras: at most %d", MAX_CAMERAS);
    if (c->n == MAX_FILES)
        return cli_usage_error ("too many --points and --image for camera %d: at most %d",
                                current, MAX_FILES);
    c->src[c->n++] = (s_source_t) {path, image, z};
    return -1;
}

// -1 to go on, or the exit code.
static int
s_parse_args (int argc, char **argv, s_opts_t *o)
{
    int opt, code, current = 1, pending = 0;  // pending: a --camera still without --points
    opterr = 0;  // our own messages (cli_usage_error)
    while ((opt = getopt_long (argc, argv, ":c:p:m:i:s:o:hV", s_options, NULL)) != -1) {
        switch (opt) {
        case 'c': {
            char *end;
            errno = 0;
            long n = strtol (optarg, &end, 10);
            if (errno || end == optarg || *end || n < 0 || n > 999)
                return cli_usage_error ("bad --camera '%s': expected a number from 0 to 999",
                                        optarg);
            if (pending)
                return cli_usage_error ("--camera %d has no --points or --image", current);
            current = (int) n;
            pending = 1;
            break;
        }
        case 'p':
            if ((code = s_add_source (o, current, optarg, 0, 0)) >= 0)
                return code;
            pending = 0;
            break;
        case 'i': {
            char *end;
            errno = 0;
            double z = strtod (optarg, &end);
            if (errno || end == optarg || *end != ':' || !end[1] || !isfinite (z))
                return cli_usage_error ("bad --image '%s': expected Z:FILE, the plane in mm then "
                                        "the TIFF file", optarg);
            if ((code = s_add_source (o, current, end + 1, 1, z)) >= 0)
                return code;
            pending = 0;
            break;
        }
        case 's': {
            char *end;
            errno = 0;
            o->spacing = strtod (optarg, &end);
            if (errno || end == optarg || *end || !(o->spacing > 0) || !isfinite (o->spacing))
                return cli_usage_error ("bad --spacing '%s': expected a length in mm > 0", optarg);
            break;
        }
        case 'm':
            if (strcmp (optarg, "auto") == 0)
                o->automatic = 1;
            else if (piv_camera_model_parse (optarg, &o->model) == 0)
                o->automatic = 0;
            else
                return cli_usage_error ("bad --model '%s': expected auto, soloff or pinhole",
                                        optarg);
            break;
        case 'o':
            o->output = optarg;
            break;
        case 'S': {
            char *end = NULL, *x = NULL;
            errno = 0;
            long w = strtol (optarg, &x, 10), h = *x == 'x' ? strtol (x + 1, &end, 10) : 0;
            if (errno || x == optarg || *x != 'x' || end == x + 1 || *end || w < 1 || h < 1
                || w > 65535 || h > 65535)
                return cli_usage_error ("bad --size '%s': expected WxH in px (2048x2048)", optarg);
            o->width = (int) w, o->height = (int) h;
            break;
        }
        case 'h':
            s_usage (stdout);
            return 0;
        case 'V':
            printf ("pivfarm-calib %s\n", PIVFARM_VERSION);
            return 0;
        default:
            return cli_bad_option (opt, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error ("unexpected argument '%s': points files come with --points",
                                argv[optind]);
    if (pending)
        return cli_usage_error ("--camera %d has no --points or --image", current);
    if (o->ncams == 0)
        return cli_usage_error ("no --points: expected at least one points file");
    if (o->width && o->ncams != 2)
        return cli_usage_error ("--size gives a stereo grid: expected two cameras, got %d",
                                o->ncams);
    for (int k = 0; k < o->ncams; k++)
        for (int f = 0; f < o->cams[k].n; f++)
            if (o->cams[k].src[f].image && !(o->spacing > 0))
                return cli_usage_error ("--image needs --spacing, the target's lattice unit");
    return -1;
}

static void
s_print_fit (const piv_camera_t *cam, const char *note)
{
    piv_camera_info_t i;
    piv_camera_info (cam, &i);
    printf ("  %-8s %9.4f %9.4f", piv_camera_model_name (i.model), i.rms, i.max);
    if (isfinite (i.heldout_rms))
        printf (" %13.4f %13.4f", i.heldout_rms, i.heldout_max);
    else
        printf (" %13s %13s", "-", "-");
    printf ("%s%s\n", note[0] ? "  " : "", note);
}

// Finds and indexes the dots of one target image at the plane z and adds
// them to pts as points (X = i S, Y = j S). 0, or -1 (logged).
static int
s_image_points (const s_opts_t *o, const char *path, double z, piv_points_t *pts)
{
    char err[1024];
    piv_dot_t *dots = NULL;
    size_t n = 0;
    int indexed = -1;
    piv_image_t *img = piv_image_load (path, 0, PIV_MAX_PIXELS_DEFAULT, err, sizeof err);
    if (img && piv_dots_find (img, &dots, &n, err, sizeof err) == 0)
        indexed = piv_dots_index (dots, n, err, sizeof err);
    piv_image_destroy (&img);
    if (indexed < 0) {
        log_error ("cannot use the target image '%s': %s", path, err);
        free (dots);
        return -1;
    }
    printf ("'%s' (Z %g mm): %zu blobs, %d dots indexed\n", path, z, n, indexed);
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        // The sites with i and j odd are the target's second level, at a
        // depth that is not known here: the first level's dots alone.
        if (dots[k].kind != PIV_DOT || dots[k].i == PIV_DOT_UNINDEXED || dots[k].i % 2 ||
            dots[k].j % 2)
            continue;
        piv_point_t pt = {dots[k].i * o->spacing, dots[k].j * o->spacing, z, dots[k].col,
                          dots[k].row, 0};
        if (piv_points_add (pts, &pt)) {
            log_error ("cannot use the target image '%s': out of memory", path);
            rc = -1;
        }
    }
    free (dots);
    return rc;
}

// Reads camera c's points, fits, prints its figures; the chosen camera, or
// NULL (logged).
static piv_camera_t *
s_calibrate (const s_opts_t *o, const s_camera_arg_t *c)
{
    char err[1024];
    piv_points_t pts;
    piv_points_init (&pts);
    for (int f = 0; f < c->n; f++) {
        const s_source_t *src = &c->src[f];
        int rc = src->image ? s_image_points (o, src->path, src->z, &pts)
                            : piv_points_read (&pts, src->path, err, sizeof err);
        if (rc) {
            if (!src->image)
                log_error ("%s", err);
            piv_points_release (&pts);
            return NULL;
        }
    }
    piv_camera_t *chosen = NULL, *other = NULL;
    if (o->automatic)
        chosen = piv_camera_choose (pts.p, pts.n, &other, err, sizeof err);
    else
        chosen = piv_camera_fit (o->model, pts.p, pts.n, err, sizeof err);
    if (!chosen) {
        log_error ("camera %d ('%s'%s): %s", c->id, c->src[0].path, c->n > 1 ? " ..." : "", err);
        piv_points_release (&pts);
        return NULL;
    }
    piv_camera_set_id (chosen, c->id);
    piv_camera_info_t i;
    piv_camera_info (chosen, &i);
    printf ("camera %d: %zu points on %d planes, X %g..%g Y %g..%g Z %g..%g mm\n", c->id, i.points,
            i.planes, i.bounds[0], i.bounds[1], i.bounds[2], i.bounds[3], i.bounds[4],
            i.bounds[5]);
    printf ("  %-8s %9s %9s %13s %13s\n", "model", "rms px", "max px", "held-out rms",
            "held-out max");
    s_print_fit (chosen, "chosen");
    if (other)
        s_print_fit (other, "");
    piv_camera_destroy (&other);
    piv_points_release (&pts);
    return chosen;
}

// Writes the rig's calibration file and says so. 0, or -1 (logged).
static int
s_write (const piv_cameras_t *rig, const char *path)
{
    char err[1024];
    if (piv_cameras_save (rig, path, err, sizeof err)) {
        log_error ("%s", err);
        return -1;
    }
    printf ("wrote '%s'\n", path);
    return 0;
}

// ------------------------------------------------- --self-calibrate

#define MAX_PAIRS 64

static void
s_selfcal_usage (FILE *out)
{
    fprintf (out,
             "usage: pivfarm-calib --self-calibrate CALIB --pair A1 B1 A2 B2 [--pair ...]\n"
             "                     [-o OUT] [--window PX] [--step PX] [--iterations N]\n"
             "Finds where the light sheet is in the calibration's world: each instant's\n"
             "frames of the two cameras (A1 with A2, B1 with B2) dewarped onto the sheet\n"
             "and correlated, summed over the pairs; each window's disparity triangulated\n"
             "by the cameras' lines of sight; a plane Z = z0 + dzdx X + dzdy Y fitted.\n"
             "Prints the disparity before and after (px of the dewarped grid) and the\n"
             "plane (doc/stereo.md).\n"
             "  --self-calibrate CALIB the rig's calibration file (two cameras: the first\n"
             "                        took A1 B1, the second A2 B2)\n"
             "  --pair A1 B1 A2 B2    a stereo pair's four frames (TIFF); up to %d\n"
             "  -o, --output OUT      write the calibration with its 'sheet' line here (the\n"
             "                        rest of CALIB unchanged)\n"
             "  --window PX           the disparity map's windows, dewarped px (default 64)\n"
             "  --step PX             between windows (default 32)\n"
             "  --iterations N        planes fitted at most (default 3): each fit moves the\n"
             "                        sheet and measures again, until the disparity stops\n"
             "                        falling\n"
             "exit status: 0 done; 1 a file could not be read or written, or no plane was\n"
             "found; 2 bad usage\n",
             MAX_PAIRS);
}

typedef struct {
    const char *calib;                  // --self-calibrate
    const char *pairs[MAX_PAIRS][4];    // --pair's frames
    int npairs;
    const char *output;                 // -o, or NULL
    piv_selfcal_settings_t settings;
} s_selfcal_opts_t;

// An integer option's value: 0, or -1 (a usage error printed).
static int
s_int_arg (const char *opt, const char *val, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = val ? strtol (val, &end, 10) : 0;
    if (!val || errno || end == val || *end || v < lo || v > hi) {
        cli_usage_error ("bad %s '%s': expected a number from %d to %d", opt, val ? val : "",
                         lo, hi);
        return -1;
    }
    *out = (int) v;
    return 0;
}

// Its own parser: --pair takes four values, which getopt cannot. -1 to go
// on, or the exit code.
static int
s_selfcal_args (int argc, char **argv, s_selfcal_opts_t *o)
{
    for (int i = 1; i < argc; i++)
        if (strcmp (argv[i], "-h") == 0 || strcmp (argv[i], "--help") == 0) {
            s_selfcal_usage (stdout);
            return 0;
        } else if (strcmp (argv[i], "-V") == 0 || strcmp (argv[i], "--version") == 0) {
            printf ("pivfarm-calib %s\n", PIVFARM_VERSION);
            return 0;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp (a, "--self-calibrate") == 0 && val) {
            o->calib = val;
            i++;
        } else if (strcmp (a, "--pair") == 0) {
            if (i + 4 >= argc)
                return cli_usage_error ("--pair expects four frames: A1 B1 A2 B2");
            if (o->npairs == MAX_PAIRS)
                return cli_usage_error ("too many --pair: at most %d", MAX_PAIRS);
            for (int f = 0; f < 4; f++)
                o->pairs[o->npairs][f] = argv[i + 1 + f];
            o->npairs++;
            i += 4;
        } else if ((strcmp (a, "-o") == 0 || strcmp (a, "--output") == 0) && val) {
            o->output = val;
            i++;
        } else if (strcmp (a, "--window") == 0) {
            if (s_int_arg (a, val, 8, 256, &o->settings.window))
                return CLI_EXIT_USAGE;
            if (o->settings.window % 2)
                return cli_usage_error ("bad --window '%s': expected an even number", val);
            i++;
        } else if (strcmp (a, "--step") == 0) {
            if (s_int_arg (a, val, 1, 256, &o->settings.step))
                return CLI_EXIT_USAGE;
            i++;
        } else if (strcmp (a, "--iterations") == 0) {
            if (s_int_arg (a, val, 1, PIV_SELFCAL_MAX_PASSES - 1, &o->settings.iterations))
                return CLI_EXIT_USAGE;
            i++;
        } else if (!val && a[0] == '-')
            return cli_usage_error ("option '%s' requires a value", a);
        else
            return cli_usage_error ("unexpected argument '%s' with --self-calibrate", a);
    }
    if (o->npairs == 0)
        return cli_usage_error ("--self-calibrate needs at least one --pair A1 B1 A2 B2");
    return -1;
}

static void
s_print_map (int k, const piv_selfcal_map_t *m, int best)
{
    printf ("  %3d %9.4f %10.6f %10.6f %7d %5d %8.4f %8.4f %8.4f %8.4f %8.4f%s\n", k,
            m->sheet.z0, m->sheet.dzdx, m->sheet.dzdy, m->windows, m->used, m->rms, m->median,
            m->mean_col, m->mean_row, m->max, best ? "  kept" : "");
}

// pivfarm-calib --self-calibrate: the exit code.
static int
s_selfcal_main (int argc, char **argv)
{
    static s_selfcal_opts_t o;
    piv_selfcal_settings_init (&o.settings);
    int code = s_selfcal_args (argc, argv, &o);
    if (code >= 0)
        return code;
    char err[1024];
    int rc = CLI_EXIT_FAILED, nframes = 2 * o.npairs;
    piv_image_t *frames[2 * 2 * MAX_PAIRS] = {NULL};
    piv_cameras_t *rig = piv_cameras_load (o.calib, err, sizeof err);
    if (!rig) {
        log_error ("%s", err);
        return rc;
    }
    // Instant 2 p is pair p's A frames (A1, A2), 2 p + 1 its B frames.
    for (int p = 0; p < o.npairs; p++)
        for (int f = 0; f < 4; f++) {
            int slot = 2 * (2 * p + f % 2) + f / 2;
            frames[slot] = piv_image_load (o.pairs[p][f], 0, PIV_MAX_PIXELS_DEFAULT, err,
                                           sizeof err);
            if (!frames[slot]) {
                log_error ("%s", err);
                goto done;
            }
        }
    piv_selfcal_report_t r;
    if (piv_selfcal_run (rig, &o.settings, (const piv_image_t *const *) frames, nframes, &r, err,
                         sizeof err)) {
        log_error ("'%s': %s", o.calib, err);
        goto done;
    }
    printf ("self-calibration of '%s': %d pairs (%d instants), grid %dx%d px of %.4f mm, "
            "windows %d px step %d\n",
            o.calib, o.npairs, nframes, r.grid.width, r.grid.height, r.grid.step,
            o.settings.window, o.settings.step);
    printf ("  map     z0 mm      dz/dx      dz/dy windows  used   rms px   median mean col "
            "mean row   max px\n");
    for (int k = 0; k < r.maps; k++)
        s_print_map (k, &r.map[k], k == r.best);
    const piv_selfcal_map_t *before = &r.map[0], *after = &r.map[r.best];
    printf ("before: disparity rms %.4f px median %.4f (mean %.4f, %.4f px; %d windows)\n",
            before->rms, before->median, before->mean_col, before->mean_row, before->used);
    printf ("after: disparity rms %.4f px median %.4f (mean %.4f, %.4f px; %d windows)\n",
            after->rms, after->median, after->mean_col, after->mean_row, after->used);
    printf ("sheet z0 %.4f mm dzdx %.6f dzdy %.6f (Z = z0 + dzdx X + dzdy Y; last fit %d windows, "
            "%.4f mm rms about it)\n",
            after->sheet.z0, after->sheet.dzdx, after->sheet.dzdy, r.fitted, r.fit_rms);
    if (o.output && s_write (rig, o.output))
        goto done;
    rc = CLI_EXIT_OK;
done:
    fflush (stdout);
    for (int f = 0; f < 2 * nframes; f++)
        piv_image_destroy (&frames[f]);
    piv_cameras_destroy (&rig);
    return rc;
}

int
main (int argc, char **argv)
{
    log_open ("pivfarm-calib", 0);
    cli_set_program ("pivfarm-calib");
    for (int i = 1; i < argc; i++)
        if (strcmp (argv[i], "--self-calibrate") == 0)
            return s_selfcal_main (argc, argv);
    static s_opts_t o = {.automatic = 1};
    int code = s_parse_args (argc, argv, &o);
    if (code >= 0)
        return code;
    char err[1024];
    int rc = CLI_EXIT_FAILED;
    piv_cameras_t *rig = piv_cameras_new ();
    if (!rig) {
        log_error ("out of memory");
        return rc;
    }
    for (int k = 0; k < o.ncams; k++) {
        piv_camera_t *cam = s_calibrate (&o, &o.cams[k]);
        if (!cam || piv_cameras_add (rig, &cam, err, sizeof err))
            goto done;
    }
    if (o.width) {
        piv_stereo_grid_t grid;
        if (piv_stereo_default_grid (piv_cameras_get (rig, 0), piv_cameras_get (rig, 1), o.width,
                                     o.height, &grid, err, sizeof err)
            || piv_cameras_set_grid (rig, &grid)) {
            log_error ("no stereo grid for %dx%d frames: %s", o.width, o.height,
                       *err ? err : "refused");
            goto done;
        }
        printf ("stereo grid for %dx%d frames: X %.3f..%.3f Y %.3f..%.3f mm, %.5f mm per px, "
                "%dx%d px\n",
                o.width, o.height, grid.x0, grid.x0 + (grid.width - 1) * grid.step,
                grid.y0 - (grid.height - 1) * grid.step, grid.y0, grid.step, grid.width,
                grid.height);
    }
    if (o.output && s_write (rig, o.output))
        goto done;
    rc = CLI_EXIT_OK;
done:
    fflush (stdout);
    piv_cameras_destroy (&rig);
    return rc;
}
