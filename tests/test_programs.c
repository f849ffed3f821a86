// test_programs.c — pivfarm-piv and pivfarm-synth driven as a user drives
// them: the real programs run on files in a temporary directory, and are
// judged by their exit status, their messages and the files they write.

#include "common/version.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <tiffio.h>

#define RUN_TIMEOUT 60  // s, for any one run of a program
#define MAX_ARGS 40     // arguments of one run, program included

static char s_dir[4096];     // this test's temporary directory
static char s_out[1 << 20];  // stdout and stderr of the last program run

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "%s", tu_tmpdir ());
}

static void
s_teardown (void)
{
    tu_rmtree (s_dir);
}

// "<test dir>/<name>" (tu_file's own slots).
static const char *
s_p (const char *name)
{
    return tu_file (s_dir, name);
}

// A real camera image of the shared data, in a slot of its own.
static const char *
s_data (const char *name)
{
    static char slots[8][4096];
    static int next;
    char *buf = slots[next++ % 8];
    int n = snprintf (buf, 4096, "%s", tu_data (name));
    ck_assert (n > 0 && n < 4096);
    return buf;
}

// Runs bin/<program> with args[0 .. nargs-1]; output in s_out; the exit status.
static int
s_runv (const char *program, const char *const *args, int nargs)
{
    char bin[4096];
    snprintf (bin, sizeof bin, "%s", tu_bin (program));
    char *argv[MAX_ARGS + 1];
    ck_assert (nargs < MAX_ARGS);
    argv[0] = bin;
    for (int i = 0; i < nargs; i++)
        argv[i + 1] = (char *) args[i];
    argv[nargs + 1] = NULL;
    return tu_run (argv, s_out, sizeof s_out, RUN_TIMEOUT);
}

// The same with the arguments as a NULL-terminated list.
static int
s_run (const char *program, ...)
{
    const char *args[MAX_ARGS];
    int n = 0;
    va_list ap;
    va_start (ap, program);
    for (const char *arg; (arg = va_arg (ap, const char *)) != NULL;) {
        ck_assert (n < MAX_ARGS - 1);
        args[n++] = arg;
    }
    va_end (ap);
    return s_runv (program, args, n);
}

#define PIV(...) s_run ("pivfarm-piv", __VA_ARGS__, (const char *) NULL)
#define SYNTH(...) s_run ("pivfarm-synth", __VA_ARGS__, (const char *) NULL)

// Runs and fails the test, showing what the program said, unless it exits 0.
#define PIV_OK(...)                                                                        \
    do {                                                                                   \
        int rc_ = PIV (__VA_ARGS__);                                                       \
        ck_assert_msg (rc_ == 0, "pivfarm-piv exited %d:\n%s", rc_, s_out);                \
    } while (0)
#define SYNTH_OK(...)                                                                      \
    do {                                                                                   \
        int rc_ = SYNTH (__VA_ARGS__);                                                     \
        ck_assert_msg (rc_ == 0, "pivfarm-synth exited %d:\n%s", rc_, s_out);              \
    } while (0)

// Fails unless the last run said 'needle'.
#define ASSERT_SAID(needle)                                                                \
    ck_assert_msg (strstr (s_out, (needle)) != NULL, "the message does not say \"%s\":\n%s", \
                   (needle), s_out)

// Fails unless the run exited with 'status' and said 'needle'.
#define ASSERT_REFUSED(rc, status, needle)                                                 \
    do {                                                                                   \
        int r_ = (rc);                                                                     \
        ck_assert_msg (r_ == (status), "exit %d, expected %d:\n%s", r_, (status), s_out);  \
        ASSERT_SAID (needle);                                                              \
    } while (0)

static char *
s_slurp (const char *path)
{
    char *text = tu_slurp (path, NULL);
    ck_assert_msg (text != NULL, "cannot read '%s'", path);
    return text;
}

static int
s_exists (const char *path)
{
    FILE *f = fopen (path, "rb");
    if (f)
        fclose (f);
    return f != NULL;
}

// A vector file as pivfarm-piv writes it.
typedef struct {
    int count;          // vector rows
    double *x, *y;      // window centre, px
    double *u, *v;      // displacement, px
    int *flags;         // 0 valid, 1 replaced, 2 invalid
    int nx, ny;         // grid from the header's "grid NXxNY" line (0 if none)
    int zone_i, zone_j; // Tecplot "ZONE I=, J=" (0 if none)
    int has_variables;  // a Tecplot VARIABLES line was seen
} s_field_t;

// Parses 'text'; every row that is not a comment (nor, in Tecplot, a
// TITLE, VARIABLES or ZONE line) must have exactly six numbers.
static void
s_field_parse (const char *text, s_field_t *f)
{
    memset (f, 0, sizeof *f);
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == '\n';
    f->x = calloc (cap, sizeof (double));
    f->y = calloc (cap, sizeof (double));
    f->u = calloc (cap, sizeof (double));
    f->v = calloc (cap, sizeof (double));
    f->flags = calloc (cap, sizeof (int));
    ck_assert (f->x && f->y && f->u && f->v && f->flags);
    int lineno = 0;
    for (const char *line = text; *line;) {
        const char *eol = strchr (line, '\n');
        size_t len = eol ? (size_t) (eol - line) : strlen (line);
        char buf[1024];
        ck_assert_msg (len < sizeof buf, "line %d is too long", lineno + 1);
        memcpy (buf, line, len);
        buf[len] = '\0';
        line += len + (eol != NULL);
        lineno++;
        if (buf[0] == '#') {
            sscanf (buf, "# grid %dx%d", &f->nx, &f->ny);
            continue;
        }
        if (strncmp (buf, "TITLE", 5) == 0)
            continue;
        if (strncmp (buf, "VARIABLES", 9) == 0) {
            f->has_variables = 1;
            continue;
        }
        if (strncmp (buf, "ZONE", 4) == 0) {
            ck_assert_msg (sscanf (buf, "ZONE I=%d, J=%d", &f->zone_i, &f->zone_j) == 2,
                           "line %d is not 'ZONE I=nx, J=ny': %s", lineno, buf);
            continue;
        }
        double col[7];
        int ncol = 0;
        char *p = buf, *end;
        for (;;) {
            double x = strtod (p, &end);
            if (end == p)
                break;
            if (ncol < 7)
                col[ncol] = x;
            ncol++;
            p = end;
        }
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        // 8 with each vector's uncertainty (sigma_u sigma_v: the default).
        ck_assert_msg ((ncol == 6 || ncol == 8) && *p == '\0',
                       "line %d is not 'x y u v flags peak_ratio [sigma_u sigma_v]': \"%s\"",
                       lineno, buf);
        int k = f->count++;
        f->x[k] = col[0];
        f->y[k] = col[1];
        f->u[k] = col[2];
        f->v[k] = col[3];
        f->flags[k] = (int) col[4];
        ck_assert_msg (col[4] == 0 || col[4] == 1 || col[4] == 2, "line %d: flag %g", lineno,
                       col[4]);
    }
}

static void
s_field_load (const char *path, s_field_t *f)
{
    char *text = s_slurp (path);
    s_field_parse (text, f);
    free (text);
}

static void
s_field_release (s_field_t *f)
{
    free (f->x);
    free (f->y);
    free (f->u);
    free (f->v);
    free (f->flags);
}

// Number of vectors with this flag.
static int
s_count_flag (const s_field_t *f, int flag)
{
    int n = 0;
    for (int k = 0; k < f->count; k++)
        n += f->flags[k] == flag;
    return n;
}

// The rest of the header line "# <key> ..." in a static buffer, or NULL.
static const char *
s_header (const char *text, const char *key)
{
    static char value[4096];
    char pattern[256];
    snprintf (pattern, sizeof pattern, "# %s ", key);
    size_t plen = strlen (pattern);
    for (const char *line = text; *line == '#';) {
        const char *eol = strchr (line, '\n');
        size_t len = eol ? (size_t) (eol - line) : strlen (line);
        if (len >= plen && strncmp (line, pattern, plen) == 0) {
            len -= plen;
            if (len >= sizeof value)
                len = sizeof value - 1;
            memcpy (value, line + plen, len);
            value[len] = '\0';
            return value;
        }
        if (!eol)
            break;
        line = eol + 1;
    }
    return NULL;
}

// The lines of 'text' that do not begin with '#', in a malloc'd string.
static char *
s_without_comments (const char *text)
{
    char *out = malloc (strlen (text) + 1), *o = out;
    ck_assert (out != NULL);
    for (const char *line = text; *line;) {
        const char *eol = strchr (line, '\n');
        size_t len = eol ? (size_t) (eol - line) + 1 : strlen (line);
        if (*line != '#') {
            memcpy (o, line, len);
            o += len;
        }
        line += len;
    }
    *o = '\0';
    return out;
}

// Writes an 8-bit grey TIFF of width x height: 0 in the columns below
// zero_cols, 255 from there on.
static void
s_write_mask (const char *path, int width, int height, int zero_cols)
{
    TIFF *tif = TIFFOpen (path, "w");
    ck_assert_msg (tif != NULL, "cannot write '%s'", path);
    TIFFSetField (tif, TIFFTAG_IMAGEWIDTH, (uint32_t) width);
    TIFFSetField (tif, TIFFTAG_IMAGELENGTH, (uint32_t) height);
    TIFFSetField (tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField (tif, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField (tif, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_UINT);
    TIFFSetField (tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField (tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField (tif, TIFFTAG_ROWSPERSTRIP, (uint32_t) height);
    unsigned char *row = malloc ((size_t) width);
    ck_assert (row != NULL);
    for (int c = 0; c < width; c++)
        row[c] = c < zero_cols ? 0 : 255;
    for (int r = 0; r < height; r++)
        ck_assert (TIFFWriteScanline (tif, row, (uint32_t) r, 0) == 1);
    TIFFClose (tif);
    free (row);
}

// Width, height and page count of a TIFF; fails the test if it is not one.
static void
s_tiff_shape (const char *path, int *width, int *height, int *pages)
{
    TIFF *tif = TIFFOpen (path, "r");
    ck_assert_msg (tif != NULL, "'%s' is not a readable TIFF", path);
    uint32_t w = 0, h = 0;
    TIFFGetField (tif, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField (tif, TIFFTAG_IMAGELENGTH, &h);
    *width = (int) w;
    *height = (int) h;
    *pages = TIFFNumberOfDirectories (tif);
    TIFFClose (tif);
}

// Writes a 256x256 pair DIR/<prefix>_a.tif, _b.tif and <prefix>.flow.
static void
s_small_pair (const char *prefix)
{
    SYNTH_OK ("-o", s_p (prefix), "--size", "256x256");
}

// ---------------------------------------------------------------- pivfarm-synth

START_TEST (synth_writes_a_pair_and_its_truth_file)
{
    SYNTH_OK ("-o", s_p ("p"), "--size", "256x256");
    ck_assert_msg (s_out[0] == '\0', "synth is not silent without -v:\n%s", s_out);
    int w, h, pages;
    s_tiff_shape (s_p ("p_a.tif"), &w, &h, &pages);
    ck_assert (w == 256 && h == 256 && pages == 1);
    s_tiff_shape (s_p ("p_b.tif"), &w, &h, &pages);
    ck_assert (w == 256 && h == 256 && pages == 1);
    size_t la, lb;
    char *a = tu_slurp (s_p ("p_a.tif"), &la), *b = tu_slurp (s_p ("p_b.tif"), &lb);
    ck_assert (a && b);
    ck_assert_msg (la != lb || memcmp (a, b, la) != 0, "frames A and B are identical");
    free (a);
    free (b);
    // The truth names the flow, here the default one, centred on the image.
    char *truth = s_slurp (s_p ("p.flow"));
    ck_assert_msg (strstr (truth, "uniform") && strstr (truth, "127.5"), "truth:\n%s", truth);
    free (truth);
    ck_assert (!s_exists (s_p ("p.tif")));
}
END_TEST

START_TEST (synth_writes_count_pairs_with_distinct_content)
{
    SYNTH_OK ("-o", s_p ("p"), "--size", "256x256", "--count", "3");
    const char *names[3] = {"p_0001_a.tif", "p_0002_a.tif", "p_0003_a.tif"};
    char *frames[3];
    size_t lens[3];
    for (int i = 0; i < 3; i++) {
        char name_b[32];
        snprintf (name_b, sizeof name_b, "p_%04d_b.tif", i + 1);
        ck_assert_msg (s_exists (s_p (name_b)), "'%s' is missing", name_b);
        frames[i] = tu_slurp (s_p (names[i]), &lens[i]);
        ck_assert_msg (frames[i] != NULL, "'%s' is missing", names[i]);
    }
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            ck_assert_msg (lens[i] != lens[j] || memcmp (frames[i], frames[j], lens[i]) != 0,
                           "'%s' and '%s' are the same image", names[i], names[j]);
    for (int i = 0; i < 3; i++)
        free (frames[i]);
    ck_assert (s_exists (s_p ("p.flow")));
    ck_assert (!s_exists (s_p ("p_0004_a.tif")) && !s_exists (s_p ("p_a.tif")));
}
END_TEST

START_TEST (synth_rejects_bad_options_with_status_2)
{
    static const struct {
        const char *option, *value, *named;
    } cases[] = {
        {"--flow", "whirl:1", "'whirl:1'"},     {"--flow", "uniform:1", "'uniform:1'"},
        {"--bits", "12", "--bits '12'"},        {"--size", "0x5", "--size '0x5'"},
        {"--size", "256", "--size '256'"},      {"--size", "256x", "--size '256x'"},
        {"--size", "axb", "--size 'axb'"},      {"--count", "0", "--count '0'"},
        {"--bogus", NULL, "'--bogus'"},         {"--flow", NULL, "'--flow'"},
    };
    const char *prefix = s_p ("p"), *truth = s_p ("p.flow"), *a = s_p ("p_a.tif");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *value = cases[i].value;
        int rc = value ? SYNTH ("-o", prefix, cases[i].option, value)
                       : SYNTH ("-o", prefix, cases[i].option);
        ASSERT_REFUSED (rc, 2, cases[i].named);
        ck_assert_msg (!s_exists (truth) && !s_exists (a), "%s %s wrote files", cases[i].option,
                       value ? value : "");
    }
    ASSERT_REFUSED (SYNTH ("-o", prefix, "stray"), 2, "'stray'");
}
END_TEST

START_TEST (synth_help_and_version_exit_0)
{
    ck_assert_int_eq (SYNTH ("--help"), 0);
    ck_assert_msg (strncmp (s_out, "usage: pivfarm-synth", 20) == 0, "%s", s_out);
    ck_assert_int_eq (SYNTH ("--version"), 0);
    ck_assert_str_eq (s_out, "pivfarm-synth " PIVFARM_VERSION "\n");
}
END_TEST

// ------------------------------------------------------------------ pivfarm-piv

// The vector file 'out' agrees with the truth 'flow' by the synthesiser's
// own measure (pivfarm-synth --score): RMS error below max px.
static void
s_assert_score (const char *out, const char *flow, double max)
{
    SYNTH_OK ("--score", out, "--truth", flow);
    const char *rms = strstr (s_out, "rms ");
    double x = INFINITY;
    ck_assert_msg (rms && sscanf (rms, "rms %lf", &x) == 1, "no rms in: %s", s_out);
    ck_assert_msg (x < max, "rms %.4f px against the truth", x);
}

START_TEST (piv_measures_a_synthetic_uniform_shift_from_the_command_line)
{
    const char *a = s_p ("p_a.tif"), *b = s_p ("p_b.tif"), *out = s_p ("out.txt");
    SYNTH_OK ("-o", s_p ("p"), "--size", "512x512", "--flow", "uniform:2.6,-1.3");
    PIV_OK ("--passes", "64,32", "--overlap", "75", "-o", out, a, b);

    s_field_t f;
    s_field_load (out, &f);
    ck_assert_int_gt (f.count, 0);
    ck_assert_int_eq (f.count, f.nx * f.ny);
    int valid = 0;
    double su = 0, sv = 0;
    for (int k = 0; k < f.count; k++)
        if (f.flags[k] == 0) {
            valid++;
            su += f.u[k];
            sv += f.v[k];
        }
    ck_assert_msg (valid >= 0.95 * f.count, "only %d of %d vectors valid", valid, f.count);
    double mu = su / valid, mv = sv / valid;
    ck_assert_msg (fabs (mu - 2.6) < 0.05 && fabs (mv + 1.3) < 0.05,
                   "mean (%.4f, %.4f) px, truth (2.6, -1.3)", mu, mv);
    s_field_release (&f);

    // The header says what was measured and how.
    char *text = s_slurp (out);
    const char *value = s_header (text, "frame_a");
    ck_assert_msg (value && strcmp (value, a) == 0, "frame_a: %s", value ? value : "(none)");
    value = s_header (text, "frame_b");
    ck_assert_msg (value && strcmp (value, b) == 0, "frame_b: %s", value ? value : "(none)");
    value = s_header (text, "passes");
    ck_assert_msg (value && strncmp (value, "64,32 overlap 75%", 17) == 0, "passes: %s",
                   value ? value : "(none)");
    free (text);

    // And it agrees with the truth by the synthesiser's own measure.
    s_assert_score (out, s_p ("p.flow"), 0.1);
}
END_TEST

// -w 24 (issue 25: any even window size, not only powers of two): the
// shift is measured as with 32 px windows, on the grid of 24 px windows.
START_TEST (piv_measures_a_shift_with_24_px_windows)
{
    const char *a = s_p ("p_a.tif"), *b = s_p ("p_b.tif"), *out = s_p ("out.txt");
    SYNTH_OK ("-o", s_p ("p"), "--size", "512x512", "--flow", "uniform:2.6,-1.3");
    PIV_OK ("-w", "24", "-o", out, a, b);
    char *text = s_slurp (out);
    const char *value = s_header (text, "grid");
    ck_assert_msg (value && strstr (value, "window 24 step 12"), "grid: %s",
                   value ? value : "(none)");
    free (text);
    s_assert_score (out, s_p ("p.flow"), 0.1);
    ASSERT_REFUSED (PIV ("-w", "25", "-o", out, a, b), 2, "--window '25'");
}
END_TEST

// The FFTW wisdom file: written by the first run, left alone by runs that
// plan nothing new, rewritten (with more in it) by a run with a new window
// size. Runs used to measure a new size's plans again every time once a
// wisdom file existed.
static ino_t
s_inode (const char *path)
{
    struct stat st;
    ck_assert_msg (stat (path, &st) == 0, "no '%s'", path);
    return st.st_ino;
}

START_TEST (piv_keeps_new_plans_in_its_wisdom_file)
{
    const char *a = s_p ("p_a.tif"), *b = s_p ("p_b.tif"), *out = s_p ("out.txt");
    const char *wisdom = s_p ("cache/wisdom");
    SYNTH_OK ("-o", s_p ("p"), "--size", "128x128");
    PIV_OK ("--wisdom", wisdom, "-w", "16", "-i", "1", "-o", out, a, b);
    ino_t first = s_inode (wisdom);
    size_t len1 = 0;
    free (tu_slurp (wisdom, &len1));
    PIV_OK ("--wisdom", wisdom, "-w", "16", "-i", "1", "-o", out, a, b);
    ck_assert_msg (s_inode (wisdom) == first, "a run that planned nothing new rewrote the file");
    PIV_OK ("--wisdom", wisdom, "-w", "8", "-i", "1", "-o", out, a, b);
    size_t len2 = 0;
    free (tu_slurp (wisdom, &len2));
    ck_assert_msg (s_inode (wisdom) != first && len2 > len1,
                   "the 8 px plans were not added (%zu bytes, then %zu)", len1, len2);
    ino_t second = s_inode (wisdom);
    PIV_OK ("--wisdom", wisdom, "-w", "8", "-i", "1", "-o", out, a, b);
    ck_assert (s_inode (wisdom) == second);
}
END_TEST

START_TEST (piv_writes_tecplot_with_the_grid_dimensions)
{
    s_small_pair ("p");
    PIV_OK ("--format", "tecplot", "-o", s_p ("out.dat"), s_p ("p_a.tif"), s_p ("p_b.tif"));
    s_field_t f;
    s_field_load (s_p ("out.dat"), &f);
    ck_assert_msg (f.has_variables, "no VARIABLES line");
    ck_assert_msg (f.zone_i > 0 && f.zone_j > 0, "no ZONE I=, J= line");
    ck_assert_msg (f.zone_i * f.zone_j == f.count, "ZONE I=%d, J=%d but %d data lines",
                   f.zone_i, f.zone_j, f.count);
    // 256 px, 32 px windows, 50 % overlap: 15 windows each way, x varying fastest.
    ck_assert_int_eq (f.zone_i, 15);
    ck_assert_int_eq (f.zone_j, 15);
    ck_assert (f.x[1] > f.x[0] && f.y[1] == f.y[0]);
    s_field_release (&f);
}
END_TEST

START_TEST (piv_reads_both_frames_from_one_multipage_file)
{
    SYNTH_OK ("-o", s_p ("m"), "--size", "256x256", "--seed", "7", "--multipage");
    SYNTH_OK ("-o", s_p ("s"), "--size", "256x256", "--seed", "7");
    int w, h, pages;
    s_tiff_shape (s_p ("m.tif"), &w, &h, &pages);
    ck_assert_int_eq (pages, 2);
    ck_assert (!s_exists (s_p ("m_a.tif")) && !s_exists (s_p ("m_b.tif")));

    PIV_OK ("-o", s_p ("one.txt"), s_p ("m.tif"));
    PIV_OK ("-o", s_p ("two.txt"), s_p ("s_a.tif"), s_p ("s_b.tif"));
    char *one = s_slurp (s_p ("one.txt")), *two = s_slurp (s_p ("two.txt"));
    const char *value = s_header (one, "frame_b");
    ck_assert_msg (value && strcmp (value, s_p ("m.tif")) == 0, "frame_b: %s",
                   value ? value : "(none)");
    char *rows_one = s_without_comments (one), *rows_two = s_without_comments (two);
    ck_assert_msg (strlen (rows_one) > 0, "no vectors");
    ck_assert_msg (strcmp (rows_one, rows_two) == 0,
                   "the two-page file and the two files give different vectors");
    free (rows_one);
    free (rows_two);
    free (one);
    free (two);
}
END_TEST

START_TEST (piv_refuses_a_single_page_file_as_a_pair)
{
    s_small_pair ("p");
    ASSERT_REFUSED (PIV (s_p ("p_a.tif")), 1, s_p ("p_a.tif"));
    ck_assert_msg (strstr (s_out, "page"), "the message does not say a page is missing:\n%s",
                   s_out);
}
END_TEST

START_TEST (piv_writes_to_standard_output_without_dash_o)
{
    s_small_pair ("p");
    PIV_OK ("-o", s_p ("out.txt"), s_p ("p_a.tif"), s_p ("p_b.tif"));
    char *file = s_slurp (s_p ("out.txt"));
    PIV_OK (s_p ("p_a.tif"), s_p ("p_b.tif"));
    // s_out has stderr too: a clean run says nothing there.
    ck_assert_msg (strcmp (s_out, file) == 0, "standard output differs from the -o file:\n%s",
                   s_out);
    free (file);
}
END_TEST

START_TEST (piv_refuses_a_missing_file_naming_it)
{
    s_small_pair ("p");
    ASSERT_REFUSED (PIV ("-o", s_p ("out.txt"), s_p ("nosuch.tif"), s_p ("p_b.tif")), 1,
                    s_p ("nosuch.tif"));
    ck_assert_msg (strstr (s_out, "No such file"), "no system reason:\n%s", s_out);
    ck_assert_msg (!s_exists (s_p ("out.txt")), "a failed run left an output file");
    ASSERT_REFUSED (PIV (s_p ("p_a.tif"), s_p ("nosuch_b.tif")), 1, s_p ("nosuch_b.tif"));
    ck_assert_msg (strstr (s_out, "No such file"), "no system reason:\n%s", s_out);
}
END_TEST

START_TEST (piv_refuses_frames_of_different_sizes_naming_both)
{
    SYNTH_OK ("-o", s_p ("big"), "--size", "512x512");
    s_small_pair ("small");
    ASSERT_REFUSED (PIV (s_p ("big_a.tif"), s_p ("small_b.tif")), 1, s_p ("big_a.tif"));
    ASSERT_SAID (s_p ("small_b.tif"));
    ASSERT_SAID ("512x512");
    ASSERT_SAID ("256x256");
}
END_TEST

START_TEST (piv_refuses_a_file_that_is_not_a_tiff)
{
    s_small_pair ("p");
    static const char text[] = "x y u v\n1 2 3 4\n";
    tu_spit (s_p ("notes.tif"), text, sizeof text - 1);
    ASSERT_REFUSED (PIV (s_p ("notes.tif"), s_p ("p_b.tif")), 1, s_p ("notes.tif"));
    ck_assert_msg (strstr (s_out, "not a TIFF"), "the message does not say why:\n%s", s_out);
    tu_spit (s_p ("empty.tif"), "", 0);
    ASSERT_REFUSED (PIV (s_p ("p_a.tif"), s_p ("empty.tif")), 1, s_p ("empty.tif"));
}
END_TEST

START_TEST (piv_refuses_a_truncated_tiff_naming_it)
{
    s_small_pair ("p");
    size_t len;
    char *data = tu_slurp (s_p ("p_a.tif"), &len);
    ck_assert (data != NULL);
    // Cut in the pixel data, then before the directory.
    tu_spit (s_p ("cut.tif"), data, len / 2);
    ASSERT_REFUSED (PIV (s_p ("cut.tif"), s_p ("p_b.tif")), 1, s_p ("cut.tif"));
    tu_spit (s_p ("cut.tif"), data, 100);
    ASSERT_REFUSED (PIV (s_p ("cut.tif"), s_p ("p_b.tif")), 1, s_p ("cut.tif"));
    free (data);
}
END_TEST

START_TEST (piv_rejects_bad_options_with_status_2)
{
    s_small_pair ("p");
    const char *a = s_p ("p_a.tif"), *b = s_p ("p_b.tif");
    static const struct {
        const char *option, *value, *named;
    } cases[] = {
        {"--passes", "64,33", "'64,33'"},     {"--passes", "16,32", "'16,32'"},
        {"--window", "13", "--window '13'"},  {"--overlap", "95", "--overlap '95'"},
        {"--format", "xml", "--format 'xml'"}, {"--deform", "cubic", "'cubic'"},
        {"--threads", "0", "--threads '0'"},  {"--eps", "-1", "--eps '-1'"},
        {"--max-pixels", "0", "--max-pixels '0'"},
        {"--bogus", NULL, "'--bogus'"},
    };
    const char *out = s_p ("out.txt");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *value = cases[i].value;
        int rc = value ? PIV ("-o", out, cases[i].option, value, a, b)
                       : PIV ("-o", out, cases[i].option, a, b);
        ASSERT_REFUSED (rc, 2, cases[i].named);
        ck_assert_msg (!s_exists (out), "%s %s wrote an output file", cases[i].option,
                       value ? value : "");
    }
    ASSERT_REFUSED (PIV (a, b, a), 2, "got 3 files");
    ASSERT_REFUSED (PIV ("--passes", "32"), 2, "got 0 files");
    ASSERT_REFUSED (PIV (a, b, "--overlap"), 2, "'--overlap'");
}
END_TEST

START_TEST (piv_help_and_version_exit_0)
{
    ck_assert_int_eq (PIV ("--help"), 0);
    ck_assert_msg (strncmp (s_out, "usage: pivfarm-piv", 18) == 0, "%s", s_out);
    ck_assert_int_eq (PIV ("-h"), 0);
    ck_assert_msg (strncmp (s_out, "usage: pivfarm-piv", 18) == 0, "%s", s_out);
    ck_assert_int_eq (PIV ("--version"), 0);
    ck_assert_str_eq (s_out, "pivfarm-piv " PIVFARM_VERSION "\n");
}
END_TEST

START_TEST (piv_runs_on_each_real_camera_pair)
{
    static const struct {
        const char *a, *b;
        int width, height;
    } pairs[] = {
        {"B005_1.tif", "B005_2.tif", 512, 512},
        {"2image_00.tif", "2image_01.tif", 1008, 1012},
        {"exp1_001_a_rgb.tiff", "exp1_001_b_rgb.tiff", 511, 369},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        PIV_OK ("--passes", "64,32,16", "-o", s_p ("out.txt"), s_data (pairs[i].a),
                s_data (pairs[i].b));
        char *text = s_slurp (s_p ("out.txt"));
        char size[64];
        snprintf (size, sizeof size, "%dx%d", pairs[i].width, pairs[i].height);
        const char *value = s_header (text, "image");
        ck_assert_msg (value && strcmp (value, size) == 0, "%s: image %s, expected %s",
                       pairs[i].a, value ? value : "(none)", size);
        s_field_t f;
        s_field_parse (text, &f);
        ck_assert_msg (f.count > 0 && f.count == f.nx * f.ny, "%s: %d vectors on a %dx%d grid",
                       pairs[i].a, f.count, f.nx, f.ny);
        s_field_release (&f);
        free (text);
    }
}
END_TEST

START_TEST (piv_respects_max_pixels)
{
    s_small_pair ("p");
    const char *a = s_p ("p_a.tif"), *b = s_p ("p_b.tif");
    ASSERT_REFUSED (PIV ("--max-pixels", "1000", a, b), 1, "1000");
    ck_assert_msg (strstr (s_out, a), "the message does not name the file:\n%s", s_out);
    // The limit is inclusive: 256 x 256 is 65536 pixels.
    PIV_OK ("--max-pixels", "65536", "-o", s_p ("out.txt"), a, b);
    ASSERT_REFUSED (PIV ("--max-pixels", "65535", a, b), 1, "65535");
}
END_TEST

START_TEST (piv_refuses_a_pair_over_max_memory_and_a_decompression_bomb)
{
    s_small_pair ("p");
    const char *a = s_p ("p_a.tif"), *b = s_p ("p_b.tif");
    // 256 x 256 with the default settings needs some 2 MiB.
    ASSERT_REFUSED (PIV ("--max-memory", "1M", a, b), 1, "256x256 8-bit frame would need ");
    ASSERT_SAID ("over the limit of 1.0 MiB (--max-memory)");
    PIV_OK ("--max-memory", "16M", "-o", s_p ("out.txt"), a, b);
    PIV_OK ("--max-memory", "0", "-o", s_p ("out.txt"), a, b);
    // 2000 x 2000 zeros deflated: refused from its header, whatever memory.
    tu_tiff_zeros (s_p ("z_a.tif"), 2000, 2000, 8, COMPRESSION_ADOBE_DEFLATE, 2000);
    tu_tiff_zeros (s_p ("z_b.tif"), 2000, 2000, 8, COMPRESSION_ADOBE_DEFLATE, 2000);
    ASSERT_REFUSED (PIV (s_p ("z_a.tif"), s_p ("z_b.tif")), 1, "refused as a decompression bomb");
    ASSERT_SAID ("declares 2000x2000 8-bit");
    ASSERT_SAID ("at most 250:1");
    // A higher --max-ratio lets it through to the memory limit.
    ASSERT_REFUSED (PIV ("--max-ratio", "100000", "--max-memory", "8M", s_p ("z_a.tif"),
                         s_p ("z_b.tif")),
                    1, "over the limit of 8.0 MiB (--max-memory)");
    ASSERT_REFUSED (PIV ("--max-memory", "lots", a, b), 2, "bad --max-memory 'lots'");
    ASSERT_REFUSED (PIV ("--max-ratio", "1", a, b), 2, "bad --max-ratio '1'");
}
END_TEST

START_TEST (piv_uses_a_mask)
{
    s_small_pair ("p");
    s_write_mask (s_p ("mask.tif"), 256, 256, 128);
    PIV_OK ("--passes", "64,32", "--mask", s_p ("mask.tif"), "-o", s_p ("out.txt"),
            s_p ("p_a.tif"), s_p ("p_b.tif"));
    s_field_t f;
    s_field_load (s_p ("out.txt"), &f);
    ck_assert_int_gt (f.count, 0);
    int masked = 0, open = 0, open_valid = 0;
    for (int k = 0; k < f.count; k++) {
        // Centres at x = 127.5 lie on the edge between the halves: no claim.
        if (f.x[k] < 127.5) {
            masked++;
            ck_assert_msg (f.flags[k] == 2, "vector at (%g, %g) in the masked half has flag %d",
                           f.x[k], f.y[k], f.flags[k]);
        }
        else if (f.x[k] > 128) {
            open++;
            open_valid += f.flags[k] == 0;
        }
    }
    ck_assert_int_gt (masked, 0);
    ck_assert_int_gt (open, 0);
    ck_assert_msg (open_valid >= 0.9 * open, "only %d of %d vectors valid in the open half",
                   open_valid, open);
    s_field_release (&f);
}
END_TEST

START_TEST (piv_refuses_a_mask_of_another_size)
{
    s_small_pair ("p");
    s_write_mask (s_p ("mask.tif"), 128, 128, 64);
    ASSERT_REFUSED (PIV ("--mask", s_p ("mask.tif"), s_p ("p_a.tif"), s_p ("p_b.tif")), 1,
                    "mask");
    ck_assert_msg (strstr (s_out, "128x128") && strstr (s_out, "256x256"),
                   "the message does not give both sizes:\n%s", s_out);
    ASSERT_REFUSED (PIV ("--mask", s_p ("nosuch.tif"), s_p ("p_a.tif"), s_p ("p_b.tif")), 1,
                    s_p ("nosuch.tif"));
}
END_TEST

START_TEST (piv_subtracts_a_background)
{
    s_small_pair ("p");
    const char *a = s_p ("p_a.tif"), *b = s_p ("p_b.tif");
    char list[8200];
    snprintf (list, sizeof list, "%s,%s", a, b);
    PIV_OK ("--background", list, "-o", s_p ("min.txt"), a, b);
    s_field_t f;
    s_field_load (s_p ("min.txt"), &f);
    ck_assert_int_gt (f.count, 0);
    ck_assert_msg (s_count_flag (&f, 0) >= 0.9 * f.count, "only %d of %d vectors valid",
                   s_count_flag (&f, 0), f.count);
    s_field_release (&f);

    // A black background takes nothing away: the vectors are those without one.
    s_write_mask (s_p ("black.tif"), 256, 256, 256);
    PIV_OK ("--background", s_p ("black.tif"), "-o", s_p ("black.txt"), a, b);
    PIV_OK ("-o", s_p ("none.txt"), a, b);
    char *with = s_slurp (s_p ("black.txt")), *without = s_slurp (s_p ("none.txt"));
    // The header says which background was taken (issue 25); the rest is the same.
    char *line = strstr (with, "# background min of ");
    ck_assert_msg (line && strstr (line, "black.tif\n"), "no background in the header:\n%s",
                   with);
    char *next = strchr (line, '\n') + 1;
    memmove (line, next, strlen (next) + 1);
    ck_assert_msg (strcmp (with, without) == 0, "a black background changed the vectors");
    free (with);
    free (without);

    ASSERT_REFUSED (PIV ("--background", s_p ("nosuch.tif"), a, b), 1, s_p ("nosuch.tif"));
    snprintf (list, sizeof list, "%s,%s", a, s_p ("gone.tif"));
    ASSERT_REFUSED (PIV ("--background", list, a, b), 1, s_p ("gone.tif"));
}
END_TEST

START_TEST (piv_refuses_a_background_of_another_size_naming_it)
{
    s_small_pair ("p");
    SYNTH_OK ("-o", s_p ("big"), "--size", "512x512");
    const char *a = s_p ("p_a.tif"), *b = s_p ("p_b.tif");
    ASSERT_REFUSED (PIV ("--background", s_p ("big_a.tif"), a, b), 1, s_p ("big_a.tif"));
    char list[8200];
    snprintf (list, sizeof list, "%s,%s", a, s_p ("big_b.tif"));
    ASSERT_REFUSED (PIV ("--background", list, a, b), 1, s_p ("big_b.tif"));
}
END_TEST

START_TEST (piv_reports_an_output_it_cannot_write)
{
    s_small_pair ("p");
    ASSERT_REFUSED (PIV ("-o", s_p ("nodir/out.txt"), s_p ("p_a.tif"), s_p ("p_b.tif")), 1,
                    s_p ("nodir/out.txt"));
}
END_TEST

// ------------------------------------------------------------------ every program's convention

// Runs bin/<program> args... through sh with one stream kept: 'which' 1
// for stdout alone, 2 for stderr alone (into s_out). The exit status.
static int
s_run_stream (int which, const char *program, const char *const *args)
{
    char bin[4096];
    snprintf (bin, sizeof bin, "%s", tu_bin (program));
    char *argv[MAX_ARGS + 5];
    int n = 0;
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = which == 1 ? "\"$0\" \"$@\" 2>/dev/null" : "\"$0\" \"$@\" 2>&1 >/dev/null";
    argv[n++] = bin;
    for (int i = 0; args[i]; i++) {
        ck_assert (n < MAX_ARGS);
        argv[n++] = (char *) args[i];
    }
    argv[n] = NULL;
    return tu_run (argv, s_out, sizeof s_out, RUN_TIMEOUT);
}

// Asserts the usage error of doc/conventions.md: exit 2, nothing on stdout,
// one line "PROGRAM: ... (see PROGRAM --help)" on stderr naming 'named',
// not a log line.
static void
s_assert_usage_error (const char *program, const char *const *args, const char *named)
{
    int rc = s_run_stream (1, program, args);
    ck_assert_msg (rc == 2, "%s %s: exit %d, expected 2", program, args[0], rc);
    ck_assert_msg (s_out[0] == '\0', "%s %s printed on stdout: %s", program, args[0], s_out);
    s_run_stream (2, program, args);
    char start[128], hint[128];
    snprintf (start, sizeof start, "%s: ", program);
    snprintf (hint, sizeof hint, "(see %s --help)\n", program);
    size_t len = strlen (s_out);
    // pivctl's hint may be the command's own usage instead.
    int hinted = (len > strlen (hint) && strcmp (s_out + len - strlen (hint), hint) == 0)
                 || (strcmp (program, "pivctl") == 0 && strstr (s_out, "; usage: pivctl "));
    ck_assert_msg (strncmp (s_out, start, strlen (start)) == 0 && strstr (s_out, named)
                       && strchr (s_out, '\n') == s_out + len - 1 && hinted,
                   "%s %s: expected one line '%s... %s... %s', got: %s", program, args[0], start,
                   named, hint, s_out);
}

START_TEST (every_program_follows_one_command_line_convention)
{
    // The CGI reads options only outside a web server.
    unsetenv ("GATEWAY_INTERFACE");
    static const struct {
        const char *program;
        const char *bad_value[4];  // a bad value of an option or argument
        const char *named;         // ... named in its message
        const char *missing[4];    // a missing argument or value
        const char *missing_named;
    } programs[] = {
        {"pivfarm-broker", {"-c", "x", "stray"}, "'stray'", {NULL}, "-c FILE"},
        {"pivfarm-watcher", {"-c", "x", "stray"}, "'stray'", {"-c"}, "'-c' needs a value"},
        {"pivfarm-agent", {"--threads", "abc"}, "--threads 'abc'", {"--id"}, "'--id' needs a value"},
        {"pivfarm-piv", {"--window", "7", "a.tif", "b.tif"}, "--window '7'", {"-w", "8"}, "got 0 files"},
        {"pivfarm-synth", {"--bits", "12"}, "--bits '12'", {"--score", "f.txt"}, "--score needs --truth"},
        {"pivfarm-calib", {"--camera", "abc", "--points", "p.txt"}, "--camera 'abc'", {"--points"}, "'--points' needs a value"},
        {"pivctl", {"--timeout", "abc", "status"}, "--timeout 'abc'", {"rate"}, "usage: pivctl rate"},
        {"pivfarm.cgi", {"stray"}, "'stray'", {"--help", "more"}, "'--help'"},
    };
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        const char *p = programs[i].program;
        for (int k = 0; k < 2; k++) {
            const char *help[] = {k ? "-h" : "--help", NULL};
            int rc = s_run_stream (1, p, help);
            char usage[128];
            snprintf (usage, sizeof usage, "usage: %s", p);
            ck_assert_msg (rc == 0 && strncmp (s_out, usage, strlen (usage)) == 0
                               && strstr (s_out, "exit status"),
                           "%s %s: exit %d, stdout: %s", p, help[0], rc, s_out);
            const char *version[] = {k ? "-V" : "--version", NULL};
            rc = s_run_stream (1, p, version);
            char expected[128];
            snprintf (expected, sizeof expected, "%s %s\n", p, PIVFARM_VERSION);
            ck_assert_msg (rc == 0 && strcmp (s_out, expected) == 0, "%s %s: exit %d, stdout: %s",
                           p, version[0], rc, s_out);
        }
        const char *bogus[] = {"--bogus", NULL};
        s_assert_usage_error (p, bogus, "unknown option '--bogus'");
        const char *bogus_short[] = {"-Z", NULL};
        s_assert_usage_error (p, bogus_short, "'-Z'");
        s_assert_usage_error (p, programs[i].bad_value, programs[i].named);
        if (programs[i].missing[0] || strcmp (p, "pivfarm-broker") == 0)
            s_assert_usage_error (p, programs[i].missing, programs[i].missing_named);
    }
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("programs");
    TCase *tc = tcase_create ("programs");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 4 * RUN_TIMEOUT);
    tcase_add_test (tc, synth_writes_a_pair_and_its_truth_file);
    tcase_add_test (tc, synth_writes_count_pairs_with_distinct_content);
    tcase_add_test (tc, synth_rejects_bad_options_with_status_2);
    tcase_add_test (tc, synth_help_and_version_exit_0);
    tcase_add_test (tc, piv_measures_a_synthetic_uniform_shift_from_the_command_line);
    tcase_add_test (tc, piv_measures_a_shift_with_24_px_windows);
    tcase_add_test (tc, piv_keeps_new_plans_in_its_wisdom_file);
    tcase_add_test (tc, piv_writes_tecplot_with_the_grid_dimensions);
    tcase_add_test (tc, piv_reads_both_frames_from_one_multipage_file);
    tcase_add_test (tc, piv_refuses_a_single_page_file_as_a_pair);
    tcase_add_test (tc, piv_writes_to_standard_output_without_dash_o);
    tcase_add_test (tc, piv_refuses_a_missing_file_naming_it);
    tcase_add_test (tc, piv_refuses_frames_of_different_sizes_naming_both);
    tcase_add_test (tc, piv_refuses_a_file_that_is_not_a_tiff);
    tcase_add_test (tc, piv_refuses_a_truncated_tiff_naming_it);
    tcase_add_test (tc, piv_rejects_bad_options_with_status_2);
    tcase_add_test (tc, piv_help_and_version_exit_0);
    tcase_add_test (tc, piv_runs_on_each_real_camera_pair);
    tcase_add_test (tc, piv_respects_max_pixels);
    tcase_add_test (tc, piv_refuses_a_pair_over_max_memory_and_a_decompression_bomb);
    tcase_add_test (tc, piv_uses_a_mask);
    tcase_add_test (tc, piv_refuses_a_mask_of_another_size);
    tcase_add_test (tc, piv_subtracts_a_background);
    tcase_add_test (tc, piv_refuses_a_background_of_another_size_naming_it);
    tcase_add_test (tc, piv_reports_an_output_it_cannot_write);
    tcase_add_test (tc, every_program_follows_one_command_line_convention);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    // Every test's directory, and the FFTW wisdom the programs save, go under
    // one root removed at the end: a failed test (its forked child exits at
    // once, skipping the teardown) leaves nothing behind, and the user's own
    // wisdom file is neither read nor written.
    const char *base = getenv ("TMPDIR");
    char root[4096];
    snprintf (root, sizeof root, "%s/pivfarm-programs-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp (root)) {
        perror ("test_programs: mkdtemp");
        return EXIT_FAILURE;
    }
    setenv ("TMPDIR", root, 1);
    setenv ("PIVFARM_WISDOM", tu_path (root, "fftw-wisdom"), 1);

    int rc = tu_run_suite (s_suite ());
    tu_rmtree (root);
    return rc;
}
