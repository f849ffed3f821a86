// test_badinput.c — hostile input at every door of a real farm: TIFFs that
// are damaged or that pivfarm cannot read, names under the watch root that
// break naive code, malformed messages on every socket (the broker's, and
// the agent's and watcher's through a fake broker), control lines the
// broker must refuse, query strings for the status page. Each case gets a
// clear error and the daemons run on, losing nothing else. The cases are
// listed in tests/badinput/README.md; the files are made here.

#include "common/jdoc.h"
#include "common/proto.h"
#include "common/util.h"
#include "tests/testutil.h"

#include <check.h>
#include <ctype.h>
#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <tiffio.h>
#include <unistd.h>

static tu_farm_t s_farm;  // the farm of the running test

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
}

static void
s_teardown (void)
{
    tu_farm_release (&s_farm);
}

// A file under data/ (rel: "exp1/x.tif"), written whole.
static void
s_put (const char *rel, const void *bytes, size_t len)
{
    char path[8192];
    snprintf (path, sizeof path, "%s/data/%s", s_farm.dir, rel);
    tu_spit (path, bytes, len);
}

// Copies the rendered pair src/g_0001 into data/<exp>/<stem>_{a,b}.tif.
static void
s_copy_good (const char *exp, const char *stem)
{
    for (int side = 0; side < 2; side++) {
        size_t len;
        char *bytes = tu_slurp (tu_path (s_farm.dir, side ? "src/g_0001_b.tif" : "src/g_0001_a.tif"),
                                &len);
        ck_assert (bytes != NULL);
        char rel[4096];
        snprintf (rel, sizeof rel, "%s/%s_%c.tif", exp, stem, side ? 'b' : 'a');
        s_put (rel, bytes, len);
        free (bytes);
    }
}

// ---------------------------------------------------------------------------
// TIFFs

// A little-endian baseline TIFF made byte by byte, so that any field can
// lie: one strip of 'data' bytes (pattern filled) after the directory.
typedef struct {
    uint32_t width, height;
    uint16_t bits, compression, sample_format;
    uint32_t data;          // bytes of image data written
    uint32_t strip_offset;  // 0: where the data is
    uint32_t ifd_offset;    // 0: 8, where the directory is
    int loop;               // the directory names itself as the next one
} s_tiff_t;

static size_t
s_tiff (const s_tiff_t *t, unsigned char **out)
{
    enum { ENTRIES = 10, START = 8 + 2 + ENTRIES * 12 + 4 };
    size_t len = START + t->data;
    unsigned char *b = calloc (1, len);
    ck_assert (b != NULL);
#define PUT16(at, v) (b[(at)] = (unsigned char) (v), b[(at) + 1] = (unsigned char) ((v) >> 8))
#define PUT32(at, v) (PUT16 ((at), (v) & 0xffff), PUT16 ((at) + 2, (v) >> 16))
    memcpy (b, "II", 2);
    PUT16 (2, 42);
    PUT32 (4, t->ifd_offset ? t->ifd_offset : 8);
    uint32_t entries[ENTRIES][2] = {
        {256, t->width}, {257, t->height}, {258, t->bits}, {259, t->compression}, {262, 1},
        {273, t->strip_offset ? t->strip_offset : START}, {277, 1}, {278, t->height},
        {279, t->data}, {339, t->sample_format ? t->sample_format : 1},
    };
    PUT16 (8, ENTRIES);
    for (int i = 0; i < ENTRIES; i++) {
        size_t at = 8 + 2 + (size_t) i * 12;
        int tag = (int) entries[i][0], is_long = tag == 256 || tag == 257 || tag == 273
                                                 || tag == 278 || tag == 279;
        PUT16 (at, tag);
        PUT16 (at + 2, is_long ? 4 : 3);
        PUT32 (at + 4, 1);
        if (is_long)
            PUT32 (at + 8, entries[i][1]);
        else
            PUT16 (at + 8, entries[i][1]);
    }
    PUT32 (8 + 2 + ENTRIES * 12, t->loop ? 8 : 0);
    for (size_t i = START; i < len; i++)
        b[i] = (unsigned char) (i * 37);
#undef PUT16
#undef PUT32
    *out = b;
    return len;
}

// Writes data/exp1/<stem>_<side>.tif from t.
static void
s_put_tiff (const char *stem, char side, const s_tiff_t *t)
{
    unsigned char *b;
    size_t len = s_tiff (t, &b);
    char rel[256];
    snprintf (rel, sizeof rel, "exp1/%s_%c.tif", stem, side);
    s_put (rel, b, len);
    free (b);
}

// A bad pair: its stem, and what its error must say.
typedef struct {
    const char *stem;
    const char *reason;
} s_case_t;

static const s_case_t s_tiff_cases[] = {
    {"truncated_0001", "truncated_0001_a.tif': truncated"},
    {"empty_0001", "empty_0001_a.tif' is not a TIFF file: it is empty"},
    {"header_0001", "header_0001_a.tif': truncated"},
    {"magic_0001", "not a TIFF"},
    {"huge_0001", "exceeds the limit"},
    {"compression_0001", "Compression scheme 65000"},
    {"float_0001", "16-bit IEEE float"},
    {"onebit_0001", "1-bit"},
    {"bits24_0001", "24-bit"},
    {"zero_0001", "zero size"},
    {"strip_0001", "strip_0001_a.tif': truncated or corrupt"},
    {"ifd_0001", "ifd_0001_a.tif': truncated or corrupt"},
    {"loop_0001", NULL},  // read once, not followed: processed
    {"sizes_0001", "frames differ in size"},
    {"tiny_0001", "smaller than the 32 px window"},
    {"perm_0001", "perm_0001_a.tif': Permission denied"},
    {"gone_0001", "gone_0001_b.tif': No such file"},
};

// Starts an agent that cannot read what root cannot be kept from: when
// the test runs as root, the agent runs as 'nobody' (setpriv).
static int
s_start_unprivileged_agent (void)
{
    if (geteuid () != 0)
        return tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    chmod (s_farm.dir, 0755);
    chmod (tu_path (s_farm.dir, "work"), 0777);
    mkdir (tu_path (s_farm.dir, "results"), 0777);
    chmod (tu_path (s_farm.dir, "results"), 0777);
    char *argv[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    (char *) tu_bin ("pivfarm-agent"), "-c", s_farm.conf, "--id", "a1", NULL};
    return tu_spawn (argv, tu_path (s_farm.dir, "agent1.log"));
}

START_TEST (bad_tiffs_fail_with_their_reason_and_good_pairs_complete)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_copy_good ("exp1", "good_0001");
    // Truncated: a real frame cut in half.
    size_t len;
    char *real = tu_slurp (tu_path (s_farm.dir, "src/g_0001_a.tif"), &len);
    ck_assert (real != NULL);
    s_put ("exp1/truncated_0001_a.tif", real, len / 2);
    s_put ("exp1/truncated_0001_b.tif", real, len);
    s_put ("exp1/empty_0001_a.tif", "", 0);
    s_put ("exp1/header_0001_a.tif", "II*\0\x08\0\0\0", 8);
    s_put ("exp1/magic_0001_a.tif", "GIF89a\x01\0\x01\0\0\0\0;", 14);
    s_tiff_t ok = {.width = 64, .height = 64, .bits = 8, .compression = 1, .data = 64 * 64};
    s_tiff_t t = ok;
    t.width = t.height = 1000000;  // declares a terabyte, holds 4 KiB
    s_put_tiff ("huge_0001", 'a', &t);
    t = ok, t.compression = 65000;  // no codec has this number
    s_put_tiff ("compression_0001", 'a', &t);
    t = ok, t.bits = 16, t.sample_format = 3, t.data = 64 * 64 * 2;  // half floats
    s_put_tiff ("float_0001", 'a', &t);
    t = ok, t.bits = 1, t.data = 64 * 64 / 8;
    s_put_tiff ("onebit_0001", 'a', &t);
    t = ok, t.bits = 24, t.data = 64 * 64 * 3;  // 12-bit (packed) loads since issue 17
    s_put_tiff ("bits24_0001", 'a', &t);
    t = ok, t.width = 0;
    s_put_tiff ("zero_0001", 'a', &t);
    t = ok, t.strip_offset = 1 << 30;  // the data is beyond the end
    s_put_tiff ("strip_0001", 'a', &t);
    t = ok, t.ifd_offset = 1 << 30;  // the directory is beyond the end
    s_put_tiff ("ifd_0001", 'a', &t);
    t = ok, t.loop = 1;  // a directory chained to itself
    s_put_tiff ("loop_0001", 'a', &t);
    s_put_tiff ("loop_0001", 'b', &t);
    s_put_tiff ("sizes_0001", 'a', &ok);
    t = ok, t.width = t.height = 128, t.data = 128 * 128;
    s_put_tiff ("sizes_0001", 'b', &t);
    t = ok, t.width = t.height = 8, t.data = 64;  // smaller than one window
    s_put_tiff ("tiny_0001", 'a', &t);
    s_put_tiff ("tiny_0001", 'b', &t);
    s_put ("exp1/perm_0001_a.tif", real, len);
    s_put ("exp1/gone_0001_a.tif", real, len);
    s_put ("exp1/gone_0001_b.tif", real, len);
    // The B frames not written above: good ones.
    for (size_t i = 0; i < sizeof s_tiff_cases / sizeof s_tiff_cases[0]; i++) {
        char rel[256];
        snprintf (rel, sizeof rel, "%s/data/exp1/%s_b.tif", s_farm.dir, s_tiff_cases[i].stem);
        if (access (rel, F_OK) != 0)
            tu_spit (rel, real, len);
    }
    free (real);
    int n = (int) (sizeof s_tiff_cases / sizeof s_tiff_cases[0]) + 1;
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 100 && c.pending < n; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_int_eq (c.pending, n);
    // Between its event and its processing: one frame deleted, one made
    // unreadable.
    ck_assert (unlink (tu_path (s_farm.dir, "data/exp1/gone_0001_b.tif")) == 0);
    ck_assert (chmod (tu_path (s_farm.dir, "data/exp1/perm_0001_a.tif"), 0) == 0);
    s_farm.agents[0] = s_start_unprivileged_agent ();
    for (int i = 0; i < 600 && c.done + c.failed < n; i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    ck_assert_msg (c.done == 2 && c.failed == n - 2, "done %lld failed %lld pending %lld",
                   (long long) c.done, (long long) c.failed, (long long) c.pending);
    for (size_t i = 0; i < sizeof s_tiff_cases / sizeof s_tiff_cases[0]; i++) {
        const s_case_t *k = &s_tiff_cases[i];
        if (!k->reason) {
            ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE stem = '%s'"
                                                    " AND state = 2", k->stem),
                              1);
            continue;
        }
        char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs WHERE stem = '%s'"
                                                 " AND state = 3", k->stem);
        printf ("tiff %-18s failed: %s\n", k->stem, error ? error : "(not failed)");
        ck_assert_msg (error && strstr (error, k->reason), "%s: %s", k->stem,
                       error ? error : "not failed");
        free (error);
    }
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE stem = 'good_0001'"
                                            " AND state = 2"),
                      1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.watcher) && tu_alive (s_farm.agents[0]));
}
END_TEST

// ---------------------------------------------------------------------------
// The watch root

// Pairs of experiment 'exp' (any name: given to SQL as hex) in state 'state'.
static int64_t
s_pairs_in (const char *exp, int state)
{
    char hex[1024] = "";
    for (size_t i = 0; exp[i] && i < 500; i++)
        snprintf (hex + 2 * i, 3, "%02X", (unsigned char) exp[i]);
    return tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs p JOIN experiments e ON"
                                 " p.experiment = e.id WHERE hex(e.name) = '%s' AND p.state = %d",
                        hex, state);
}

static int64_t
s_wait_done (const char *exp, int64_t n)
{
    int64_t done = 0;
    for (int i = 0; i < 300 && (done = s_pairs_in (exp, 2)) < n; i++)
        usleep (100000);
    return done;
}

// The rendered pair src/g_0001, the broker, the watcher (watching) and
// agent a1.
static void
s_start_farm (void)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
}

START_TEST (hostile_names_and_a_changing_watch_root_never_stop_the_watcher)
{
    s_start_farm ();
    // Symlink loops: the root in itself, a directory in itself, a link to
    // itself. Symlinks are not followed.
    ck_assert (symlink (".", tu_path (s_farm.dir, "data/loop")) == 0);
    ck_assert (symlink (".", tu_path (s_farm.dir, "data/exp1/loop")) == 0);
    ck_assert (symlink ("self_0001_a.tif", tu_path (s_farm.dir, "data/exp1/self_0001_a.tif")) == 0);
    // Names that break naive code are names all the same.
    const char *names[] = {"with space", "quote\"d", "apo'strophe", "-dash",
                           "back\\slash", "$(touch pwned)", "\xc3\xa9t\xc3\xa9"};
    int n = (int) (sizeof names / sizeof names[0]);
    for (int i = 0; i < n; i++) {
        char stem[256];
        snprintf (stem, sizeof stem, "%s_0001", names[i]);
        s_copy_good ("exp1", stem);
    }
    // A name that is not UTF-8 cannot travel: refused by name. Nor can a
    // name with a control character (issue 13: the codec refuses it).
    s_copy_good ("exp1", "bad\xff");
    s_copy_good ("exp1", "new\nline_0001");
    s_copy_good ("exp1", "tab\tbed_0001");
    ck_assert_int_eq (s_wait_done ("exp1", n), n);
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", "UTF-8", 5000),
                   "the watcher did not say why it left a name out");
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", "a control character (0x0a)", 5000),
                   "the watcher did not say why it left the newline's name out");
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", "a control character (0x09)", 5000),
                   "the watcher did not say why it left the tab's name out");
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files"), 2 * n);
    ck_assert (access (tu_path (s_farm.dir, "data/pwned"), F_OK) != 0);
    ck_assert (access ("pwned", F_OK) != 0);
    // A directory removed while watched, then another one made.
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp2"), 0755) == 0);
    usleep (200000);
    s_copy_good ("exp2", "x_0001");
    ck_assert_int_eq (s_wait_done ("exp2", 1), 1);
    char cmd[4200];
    snprintf (cmd, sizeof cmd, "rm -rf '%s/data/exp2'", s_farm.dir);
    ck_assert (system (cmd) == 0);
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp3"), 0755) == 0);
    usleep (200000);
    s_copy_good ("exp3", "y_0001");
    ck_assert_int_eq (s_wait_done ("exp3", 1), 1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.watcher) && tu_alive (s_farm.agents[0]));
}
END_TEST

// ---------------------------------------------------------------------------
// Names the farm takes (issue 23): every door opens for them

// Experiment names a camera PC may well give, each a directory name the
// farm takes: the page, pivctl and exports must take them too.
static const char *const s_odd_names[] = {
    "run(7)", "a&b", "with space", "100%", "h#1", "q?x", "p+q",
    "\xc3\xa9t\xc3\xa9 \xe2\x86\x92 2", "it's \"q\" <b>",
};
#define S_ODD_NAMES ((int) (sizeof s_odd_names / sizeof s_odd_names[0]))

// 'name' percent-encoded as RFC 3986 asks of a query value (every byte
// but letters, digits and -._~), written here independently of the page.
static const char *
s_url_encoded (const char *name)
{
    static char out[1024];
    size_t n = 0;
    for (const unsigned char *s = (const unsigned char *) name; *s && n + 4 < sizeof out; s++)
        n += (size_t) snprintf (out + n, sizeof out - n, strchr ("-._~", *s) || isalnum (*s)
                                                            ? "%c" : "%%%02X", *s);
    return out;
}

// 'name' as HTML text: & < > " ' as entities.
static const char *
s_html_text (const char *name)
{
    static char out[2048];
    size_t n = 0;
    for (const char *s = name; *s && n + 8 < sizeof out; s++) {
        const char *e = *s == '&'    ? "&amp;"
                        : *s == '<'  ? "&lt;"
                        : *s == '>'  ? "&gt;"
                        : *s == '"'  ? "&quot;"
                        : *s == '\'' ? "&#39;"
                                     : NULL;
        n += e ? (size_t) snprintf (out + n, sizeof out - n, "%s", e) : (out[n] = *s, 1);
    }
    out[n] = '\0';
    return out;
}

// Runs pivfarm.cgi as a web server does for 'query' (GET); the whole
// response (headers and body) in out. The status code.
static int
s_cgi (const char *query, char *out, size_t size)
{
    setenv ("PIVFARM_CONF", s_farm.conf, 1);
    setenv ("REQUEST_METHOD", "GET", 1);
    setenv ("QUERY_STRING", query, 1);
    char *argv[] = {(char *) tu_bin ("pivfarm.cgi"), NULL};
    ck_assert_int_eq (tu_run (argv, out, size, 30), 0);
    ck_assert_msg (strncmp (out, "Status: ", 8) == 0, "'%s': %.300s", query, out);
    return atoi (out + 8);
}

// The body of a response s_cgi captured.
static const char *
s_body (const char *out)
{
    const char *body = strstr (out, "\r\n\r\n");
    ck_assert (body != NULL);
    return body + 4;
}

START_TEST (names_the_farm_takes_open_on_the_page_in_pivctl_and_in_exports)
{
    s_start_farm ();
    for (int i = 0; i < S_ODD_NAMES; i++) {
        char dir[4200];
        snprintf (dir, sizeof dir, "%s/data/%s", s_farm.dir, s_odd_names[i]);
        ck_assert (mkdir (dir, 0755) == 0);
        s_copy_good (s_odd_names[i], "s_0001");
    }
    for (int i = 0; i < S_ODD_NAMES; i++)
        ck_assert_msg (s_wait_done (s_odd_names[i], 1) == 1, "'%s' was not done", s_odd_names[i]);
    size_t size = 4 << 20;
    char *out = malloc (size);
    ck_assert (out != NULL);

    // Every link of the overview, followed as a web server passes it on
    // (the query as the browser sends it), opens its experiment's page.
    ck_assert_int_eq (s_cgi ("", out, size), 200);
    char *overview = strdup (s_body (out));
    int reached[S_ODD_NAMES] = {0};
    for (const char *h = strstr (overview, "href=\"?exp="); h; h = strstr (h + 1, "href=\"?exp=")) {
        char query[2048];
        size_t n = 0;
        for (const char *p = h + strlen ("href=\"?"); *p && *p != '"' && n + 1 < sizeof query; p++)
            if (strncmp (p, "&amp;", 5) == 0)
                query[n++] = '&', p += 4;
            else
                query[n++] = *p;
        query[n] = '\0';
        int status = s_cgi (query, out, size);
        ck_assert_msg (status == 200, "the overview's link '?%s' answers %d", query, status);
        for (int i = 0; i < S_ODD_NAMES; i++) {
            char crumb[2200];
            snprintf (crumb, sizeof crumb, "<span class=\"crumb\">/ %s</span>",
                      s_html_text (s_odd_names[i]));
            reached[i] += strstr (s_body (out), crumb) != NULL;
        }
    }
    free (overview);
    for (int i = 0; i < S_ODD_NAMES; i++)
        ck_assert_msg (reached[i] == 1, "'%s': reached by %d link(s) of the overview",
                       s_odd_names[i], reached[i]);
    // Each page as JSON, naming its experiment; a space written as a form
    // writes it ('+') opens its page too.
    for (int i = 0; i < S_ODD_NAMES; i++) {
        char query[1100];
        snprintf (query, sizeof query, "exp=%s&format=json", s_url_encoded (s_odd_names[i]));
        ck_assert_msg (s_cgi (query, out, size) == 200, "'%s': %.300s", query, out);
        ck_assert (strstr (out, "\r\nContent-Type: application/json; charset=utf-8\r\n") != NULL);
        char err[256];
        jdoc_t *doc = jdoc_parse (s_body (out), err, sizeof err);
        ck_assert_msg (doc != NULL, "'%s': %s", query, err);
        ck_assert_str_eq (jdoc_string (doc, "$.experiment.name"), s_odd_names[i]);
        jdoc_destroy (&doc);
    }
    ck_assert_int_eq (s_cgi ("exp=with+space", out, size), 200);
    // A bad query that asks for JSON gets its error as JSON.
    ck_assert_int_eq (s_cgi ("format=json&exp=a%2Fb", out, size), 400);
    ck_assert (strstr (out, "\r\nContent-Type: application/json; charset=utf-8\r\n") != NULL);
    char err[256];
    jdoc_t *doc = jdoc_parse (s_body (out), err, sizeof err);
    ck_assert_msg (doc != NULL, "%s: %.300s", err, out);
    ck_assert_str_eq (jdoc_string (doc, "$.status"), "400 Bad Request");
    ck_assert_str_eq (jdoc_string (doc, "$.error"),
                      "'exp' is not an experiment's name: a '/' in a single name");
    jdoc_destroy (&doc);

    // The metrics label each, escaped as the exposition format asks (\ and ").
    ck_assert_int_eq (s_cgi ("format=prometheus", out, size), 200);
    for (int i = 0; i < S_ODD_NAMES; i++) {
        char series[1024];
        size_t n = (size_t) snprintf (series, sizeof series, "\npivfarm_pairs{experiment=\"");
        for (const char *c = s_odd_names[i]; *c && n + 8 < sizeof series; c++) {
            if (*c == '"' || *c == '\\')
                series[n++] = '\\';
            series[n++] = *c;
        }
        snprintf (series + n, sizeof series - n, "\",state=\"done\"} 1\n");
        ck_assert_msg (strstr (s_body (out), series), "no %s", series);
    }

    // pivctl: status, pairs and an export of each, the name given as a
    // shell gives a quoted word.
    for (int i = 0; i < S_ODD_NAMES; i++) {
        const char *name = s_odd_names[i];
        char dir[4200], file[4300];
        snprintf (dir, sizeof dir, "%s/export %d", s_farm.dir, i);
        char *status[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "status", "-e",
                          (char *) name, NULL};
        ck_assert_msg (tu_run (status, out, size, 30) == 0 && strstr (out, name), "status -e '%s': %s",
                       name, out);
        char *pairs[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "pairs", (char *) name, NULL};
        ck_assert_msg (tu_run (pairs, out, size, 30) == 0 && strstr (out, " done "),
                       "pairs '%s': %s", name, out);
        char *export[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "export", (char *) name,
                          "-o", dir, NULL};
        ck_assert_msg (tu_run (export, out, size, 30) == 0, "export '%s': %s", name, out);
        snprintf (file, sizeof file, "%s/s_0001.txt", dir);
        ck_assert_msg (access (file, F_OK) == 0, "export '%s' wrote no '%s': %s", name, file, out);
    }
    // A command line longer than a request may carry: said with its length
    // and the limit (it was "cannot send '<the whole line>'"), exit 2.
    char passes[5001];
    memset (passes, '1', 5000);
    passes[5000] = '\0';
    char *replay[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "replay", "run(7)",
                      "--passes", passes, NULL};
    ck_assert_int_eq (tu_run (replay, out, size, 30), 2);
    ck_assert_msg (strstr (out, "111' is 502") // the line, its words quoted as needed
                       && strstr (out, " bytes long, over the 4096 a request may carry "
                                       "(PROTO_MAX_STRING)")
                       && strlen (out) < 400,
                   "%s", out);
    free (out);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.watcher) && tu_alive (s_farm.agents[0]));
}
END_TEST

static void s_send_raw (const char *endpoint, int nframes, const char *const *frames,
                        const long *lens);

// The directories of a name 'levels' deep, each name 'width' bytes
// ("d1xxx.../d2xxx..."), into buf.
static const char *
s_deep_dirs (int levels, int width, char *buf, size_t size)
{
    size_t n = 0;
    for (int i = 1; i <= levels && n + (size_t) width + 2 < size; i++) {
        if (i > 1)
            buf[n++] = '/';
        size_t start = n;
        n += (size_t) snprintf (buf + n, size - n, "d%d", i);
        while (n - start < (size_t) width)
            buf[n++] = 'x';
    }
    buf[n] = '\0';
    return buf;
}

// Issue 23: a pair 8 directories of 255 bytes deep was recorded but never
// paired (the pairing held stems of 1023 bytes; its warning was cut off
// before it said why). It is a path like any other: processed.
START_TEST (a_pair_eight_directories_of_255_bytes_deep_is_done_and_exported)
{
    s_start_farm ();
    char dirs[4096], rel[4200], path[8800];
    s_deep_dirs (8, 255, dirs, sizeof dirs);
    ck_assert_int_eq (strlen (dirs), 8 * 256 - 1);
    snprintf (rel, sizeof rel, "exp1/%s", dirs);
    for (char *slash = strchr (rel + 5, '/');; slash = strchr (slash + 1, '/')) {
        if (slash)
            *slash = '\0';
        snprintf (path, sizeof path, "%s/data/%s", s_farm.dir, rel);
        ck_assert_msg (mkdir (path, 0755) == 0, "mkdir: %s", strerror (errno));
        if (!slash)
            break;
        *slash = '/';
    }
    s_copy_good (rel, "deep_0001");
    ck_assert_msg (s_wait_done ("exp1", 1) == 1, "the deep pair was not done (see broker.log)");
    char stem[4200];
    snprintf (stem, sizeof stem, "%s/deep_0001", dirs);
    char *recorded = tu_farm_sql_text (&s_farm, "SELECT stem FROM pairs");
    ck_assert (recorded != NULL);
    ck_assert_str_eq (recorded, stem);
    free (recorded);
    // Its result where the agent writes, its export where pivctl does.
    snprintf (path, sizeof path, "%s/results/exp1/%s.txt", s_farm.dir, stem);
    ck_assert_msg (access (path, F_OK) == 0, "no result file");
    char out[4096], dir[4200];
    snprintf (dir, sizeof dir, "%s/export", s_farm.dir);
    char *export[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "export", "exp1", "-o", dir,
                      NULL};
    ck_assert_msg (tu_run (export, out, sizeof out, 30) == 0, "%s", out);
    snprintf (path, sizeof path, "%s/%s.txt", dir, stem);
    ck_assert_msg (access (path, F_OK) == 0, "no exported file: %s", out);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.watcher) && tu_alive (s_farm.agents[0]));
}
END_TEST

// The line of <farm>/<log> that holds 'text' (malloc'd), NULL if none.
static char *
s_log_line (const char *log, const char *text)
{
    char *all = tu_slurp (tu_path (s_farm.dir, log), NULL);
    char *at = all ? strstr (all, text) : NULL, *line = NULL;
    if (at) {
        char *start = at;
        while (start > all && start[-1] != '\n')
            start--;
        line = strndup (start, strcspn (start, "\n"));
    }
    free (all);
    return line;
}

// Issue 23: what no program can open by its path (over PATH_MAX) is left
// out at the first door that sees it, with one whole line naming the file,
// the limit and the length; a name no file system holds (a component over
// NAME_MAX) is refused by the codec, saying which.
START_TEST (a_path_over_path_max_is_refused_at_the_first_door_with_one_whole_line)
{
    s_start_farm ();
    // 15 directories of 255 bytes and a name of 250 beneath exp1: made
    // aside, each step relative to its parent (the kernel takes no path
    // that long whole), then moved in at once.
    char dirs[4096], file[256] = "", name[4200];
    s_deep_dirs (15, 255, dirs, sizeof dirs);
    memset (file, 'f', 244);
    ck_assert (mkdir (tu_path (s_farm.dir, "stage"), 0755) == 0);
    int fd = open (tu_path (s_farm.dir, "stage"), O_RDONLY | O_DIRECTORY);
    char copy[4096];
    snprintf (copy, sizeof copy, "%s", dirs);
    for (char *save, *d = strtok_r (copy, "/", &save); d; d = strtok_r (NULL, "/", &save)) {
        ck_assert (mkdirat (fd, d, 0755) == 0);
        int next = openat (fd, d, O_RDONLY | O_DIRECTORY);
        ck_assert (next >= 0);
        close (fd);
        fd = next;
    }
    for (int side = 0; side < 2; side++) {
        size_t len;
        char *bytes = tu_slurp (tu_path (s_farm.dir, side ? "src/g_0001_b.tif" : "src/g_0001_a.tif"),
                                &len);
        snprintf (file + 244, sizeof file - 244, "_%c.tif", side ? 'b' : 'a');
        int w = openat (fd, file, O_WRONLY | O_CREAT | O_EXCL, 0644);
        ck_assert (w >= 0 && bytes && write (w, bytes, len) == (ssize_t) len);
        close (w);
        free (bytes);
    }
    close (fd);
    snprintf (copy, sizeof copy, "%.*s", (int) strcspn (dirs, "/"), dirs);
    char from[4200], to[4200];
    snprintf (from, sizeof from, "%s/stage/%s", s_farm.dir, copy);
    snprintf (to, sizeof to, "%s/data/exp1/%s", s_farm.dir, copy);
    ck_assert (rename (from, to) == 0);
    size_t length = strlen (s_farm.dir) + strlen ("/data/exp1/") + strlen (dirs) + 1 + strlen (file);
    char said[256];
    snprintf (said, sizeof said,
              "_b.tif' is %zu bytes long, over the 4095 PATH_MAX allows: not watched nor reported",
              length);
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", said, 5000), "no '%s' (watcher.log)",
                   said);
    // One line, whole: the time, the program, the path's start and end, the
    // reason; once, though the file's events and the scan of its directory
    // all find it.
    char *line = s_log_line ("watcher.log", said), start[4200];
    char *all = tu_slurp (tu_path (s_farm.dir, "watcher.log"), NULL);
    ck_assert (strstr (all, said) && !strstr (strstr (all, said) + 1, said));
    free (all);
    snprintf (start, sizeof start, "pivfarm-watcher warning: '%s/data/exp1/d1xxx", s_farm.dir);
    ck_assert_msg (strlen (line) < 400 && strstr (line, start) && strstr (line, "...")
                       && strcmp (line + strlen (line) - strlen (said), said) == 0,
                   "%s", line);
    free (line);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files"), 0);

    // A watcher whose root is shorter than the broker's (or one that lies)
    // sends a name the codec takes, 4090 bytes: too long under the broker's
    // root for any agent to open. Recorded, not paired, and said so.
    snprintf (name, sizeof name, "%s/%s", dirs, file);
    ck_assert_int_eq (strlen (name), 4090);
    const char *frames[] = {"PIVF02", "F", "77", "exp1", name, "65694", "1"};
    char ingest[4200];
    snprintf (ingest, sizeof ingest, "ipc://%s/ingest", s_farm.dir);
    s_send_raw (ingest, 7, frames, NULL);
    snprintf (said, sizeof said,
              "_b.tif' is not paired: its path under the watch root would be %zu bytes long, "
              "over the 4095 PATH_MAX allows",
              strlen (s_farm.dir) + strlen ("/data/exp1/") + strlen (name));
    ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", said, 5000), "no '%s' (broker.log)",
                   said);
    line = s_log_line ("broker.log", said);
    ck_assert_msg (strlen (line) < 600 && strstr (line, "experiment 'exp1': 'd1xxx"), "%s", line);
    free (line);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'unpaired' "
                                            "AND payload LIKE '%%PATH_MAX allows%%'"),
                      1);
    // A name no file system holds: the codec says which limit.
    static char wide[300];
    memset (wide, 'w', 256);
    strcpy (wide + 256, "_a.tif");
    const char *wframes[] = {"PIVF02", "F", "78", "exp1", wide, "65694", "1"};
    s_send_raw (ingest, 7, wframes, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "frame 4 'name' is not a plain relative path (262 bytes, over the "
                                "255 NAME_MAX allows)",
                                5000));
    // The farm runs on: a good pair lands and is done.
    s_copy_good ("exp1", "good_0001");
    ck_assert_int_eq (s_wait_done ("exp1", 1), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs"), 1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.watcher) && tu_alive (s_farm.agents[0]));
}
END_TEST

// ---------------------------------------------------------------------------
// Sockets

// Sends frames (lens[i] bytes each, or strlen when -1) on a new DEALER
// connected to 'endpoint'.
static void
s_send_raw (const char *endpoint, int nframes, const char *const *frames, const long *lens)
{
    zsock_t *s = zsock_new (ZMQ_DEALER);
    ck_assert (s != NULL);
    zsock_set_sndtimeo (s, 5000);
    zsock_set_linger (s, 2000);
    ck_assert (zsock_connect (s, "%s", endpoint) == 0);
    zmsg_t *m = zmsg_new ();
    for (int i = 0; i < nframes; i++)
        zmsg_addmem (m, frames[i], lens && lens[i] >= 0 ? (size_t) lens[i] : strlen (frames[i]));
    ck_assert (zmsg_send (&m, s) == 0);
    zsock_destroy (&s);
}

// A malformed message and what the receiver must say about it.
typedef struct {
    const char *what;
    int nframes;
    const char *frames[9];
    const char *said;
} s_bad_msg_t;

static const s_bad_msg_t s_bad_msgs[] = {
    {"wrong version", 3, {"PIVF99", "B", "1"}, "protocol 'PIVF99', expected 'PIVF02'"},
    {"no command", 1, {"PIVF02"}, "no command frame"},
    {"long command", 3, {"PIVF02", "BB", "1"}, "is 2 bytes, expected 1"},
    {"unknown command", 2, {"PIVF02", "Z"}, "unknown command 0x5a"},
    {"missing frames", 5, {"PIVF02", "F", "1", "exp1", "x.tif"}, "FILE needs 7 frames, got 5"},
    {"extra frames", 8, {"PIVF02", "F", "1", "exp1", "x.tif", "1", "1", "more"},
     "FILE needs 7 frames, got 8"},
    {"bad number", 3, {"PIVF02", "R", "-1"}, "'credit' is not a number"},
    {"random bytes", 2, {"\x93\x07\xff\x00garbage", "\x01\x02"}, "bad message: protocol"},
};

// The text frame over PROTO_MAX_STRING and the message over
// PROTO_MAX_MESSAGE, on one socket.
static void
s_send_oversized (const char *endpoint, char command, const char *said_log, const char *log)
{
    static char big[PROTO_MAX_STRING + 100];
    memset (big, 'x', sizeof big - 1);
    const char *frames[] = {"PIVF02", command == 'C' ? "C" : "H", big, "host", "1", "noop"};
    s_send_raw (endpoint, command == 'C' ? 3 : 6, frames, NULL);
    if (said_log)
        ck_assert_msg (tu_farm_log_has (&s_farm, log, said_log, 5000), "no '%s' in %s", said_log,
                       log);
    // Beyond ZMQ_MAXMSGSIZE: libzmq drops the connection before the message
    // exists in the receiver's memory.
    size_t huge = (size_t) PROTO_MAX_MESSAGE + 4096;
    char *blob = malloc (huge);
    ck_assert (blob != NULL);
    memset (blob, 'y', huge);
    const char *hframes[] = {"PIVF02", "D", blob};
    long lens[] = {-1, -1, (long) huge};
    s_send_raw (endpoint, 3, hframes, lens);
    free (blob);
}

START_TEST (malformed_messages_on_every_broker_socket_are_dropped_and_the_farm_runs_on)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    const char *sockets[] = {"ingest", "work", "control"};
    char endpoint[4200];
    for (int s = 0; s < 3; s++) {
        snprintf (endpoint, sizeof endpoint, "ipc://%s/%s", s_farm.dir, sockets[s]);
        for (size_t i = 0; i < sizeof s_bad_msgs / sizeof s_bad_msgs[0]; i++) {
            const s_bad_msg_t *b = &s_bad_msgs[i];
            if (s == 2) {
                // The control socket answers, 400 and the reason.
                zsock_t *c = zsock_new (ZMQ_DEALER);
                zsock_set_rcvtimeo (c, 5000);
                ck_assert (zsock_connect (c, "%s", endpoint) == 0);
                zmsg_t *m = zmsg_new ();
                for (int f = 0; f < b->nframes; f++)
                    zmsg_addstr (m, b->frames[f]);
                zmsg_send (&m, c);
                proto_msg_t reply;
                char err[512];
                ck_assert_msg (proto_recv (c, NULL, &reply, err, sizeof err) == 0, "%s: %s",
                               b->what, err);
                ck_assert_msg (reply.status == 400 && strstr (reply.text, "bad request"),
                               "control, %s: %u %s", b->what, reply.status, reply.text);
                proto_msg_release (&reply);
                zsock_destroy (&c);
                continue;
            }
            s_send_raw (endpoint, b->nframes, b->frames, NULL);
            ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", b->said, 5000), "%s, %s",
                           sockets[s], b->what);
        }
        s_send_oversized (endpoint, s == 2 ? 'C' : 'H', s == 2 ? NULL : "is 4195 bytes, at most 4096",
                          "broker.log");
        ck_assert (tu_alive (s_farm.broker));
    }
    // A message for the wrong socket: an ACK to the broker's work socket.
    snprintf (endpoint, sizeof endpoint, "ipc://%s/work", s_farm.dir);
    const char *ack[] = {"PIVF02", "A", "0"};
    s_send_raw (endpoint, 3, ack, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "unexpected ACK", 5000));
    // Nothing else lost: the farm works as before.
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

// A fake broker: a ROUTER bound where the real one would be.
static zsock_t *
s_fake_broker (const char *name)
{
    zsock_t *r = zsock_new (ZMQ_ROUTER);
    ck_assert (r != NULL);
    zsock_set_rcvtimeo (r, 10000);
    ck_assert (zsock_bind (r, "ipc://%s/%s", s_farm.dir, name) == 0);
    return r;
}

// Waits for the first message of a peer, then sends it every malformed
// message and checks it says so in its log.
static void
s_feed_peer (zsock_t *r, const char *log)
{
    zmsg_t *first = zmsg_recv (r);
    ck_assert_msg (first != NULL, "nothing from the peer logging to %s", log);
    zframe_t *peer = zmsg_pop (first);
    zmsg_destroy (&first);
    for (size_t i = 0; i < sizeof s_bad_msgs / sizeof s_bad_msgs[0]; i++) {
        const s_bad_msg_t *b = &s_bad_msgs[i];
        zmsg_t *m = zmsg_new ();
        zmsg_add (m, zframe_dup (peer));
        for (int f = 0; f < b->nframes; f++)
            zmsg_addstr (m, b->frames[f]);
        ck_assert (zmsg_send (&m, r) == 0);
        ck_assert_msg (tu_farm_log_has (&s_farm, log, b->said, 5000), "%s, %s", log, b->what);
    }
    zframe_destroy (&peer);
}

START_TEST (an_agent_and_a_watcher_fed_malformed_messages_drop_them_and_run_on)
{
    zsock_t *work = s_fake_broker ("work");
    zsock_t *ingest = s_fake_broker ("ingest");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    s_feed_peer (work, "agent1.log");
    ck_assert (tu_alive (s_farm.agents[0]));
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_put ("exp1/w_0001_a.tif", "x", 1);
    s_feed_peer (ingest, "watcher.log");
    ck_assert (tu_alive (s_farm.watcher));
    zsock_destroy (&work);
    zsock_destroy (&ingest);
    // And the real broker after them: everything pending goes through.
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
}
END_TEST

// ---------------------------------------------------------------------------
// Control lines

// A control line, its status and what its answer must name.
static const struct {
    const char *line;
    unsigned status;
    const char *named;
} s_lines[] = {
    {"reboot", 400, "unknown command 'reboot'"},
    {"", 400, "empty command"},
    {"pause \"unterminated", 400, "bad command line"},
    {"status --bogus", 400, "unknown option '--bogus'"},
    {"status extra words", 400, "usage"},
    {"rate -5", 400, "-5"},
    {"rate 1e7", 400, "bad rate"},
    {"rate nan", 400, "bad rate"},
    {"rate abc", 400, "bad rate"},
    {"rate", 400, "usage"},
    {"policy sample 0", 400, "sample"},
    {"policy sometimes", 400, "sometimes"},
    {"pairs exp1 --limit 0", 400, "bad --limit"},
    {"pairs exp1 --limit 99999999999", 400, "bad --limit"},
    {"pairs exp1 --state molten", 400, "molten"},
    {"pairs nosuch", 404, "no experiment 'nosuch'"},
    {"log exp1 --after -1", 400, "bad --after"},
    // A setting makes an unknown experiment (issue 16); a read does not.
    {"feedback show -e nosuch", 404, "no experiment 'nosuch'"},
    {"calibrate nosuch", 404, "no experiment 'nosuch'"},
    {"calibrate nosuch scale=-1mm/px dt=1ms", 400, "scale"},
    {"mask nosuch relative.tif", 400, "absolute"},
    {"stats nosuch", 404, "no experiment 'nosuch'"},
    {"feedback set kp=abc", 400, "kp"},
    {"feedback set roi=1,2,3", 400, "roi"},
    {"feedback set color=red", 400, "color"},
    {"feedback sideways", 400, "usage: feedback"},
    {"replay exp1 --speed 0", 400, "bad --speed"},
    {"replay exp1 --as a/b", 400, "bad --as"},
    {"replay exp1 --overlap 99", 400, "bad --overlap"},
    {"retry", 400, "usage"},
};

START_TEST (bad_control_lines_are_refused_naming_what_is_wrong)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    zsock_t *c = zsock_new (ZMQ_DEALER);
    zsock_set_rcvtimeo (c, 5000);
    ck_assert (zsock_connect (c, "ipc://%s/control", s_farm.dir) == 0);
    for (size_t i = 0; i < sizeof s_lines / sizeof s_lines[0]; i++) {
        proto_msg_t req = {.command = PROTO_REQUEST, .text = (char *) s_lines[i].line}, reply;
        ck_assert (proto_send (&req, NULL, c) == 0);
        char err[512];
        ck_assert_msg (proto_recv (c, NULL, &reply, err, sizeof err) == 0, "'%s': %s",
                       s_lines[i].line, err);
        printf ("control %-32s %u %s\n", s_lines[i].line, reply.status, reply.text);
        ck_assert_msg (reply.status == s_lines[i].status && strstr (reply.text, s_lines[i].named),
                       "'%s': %u %s", s_lines[i].line, reply.status, reply.text);
        ck_assert (strchr (reply.text, '\n') == NULL);
        proto_msg_release (&reply);
    }
    zsock_destroy (&c);
    // Nothing changed: no setting recorded, the farm as it was.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM settings"), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments"), 1);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

// ---------------------------------------------------------------------------
// The status page

START_TEST (hostile_query_strings_get_a_clean_refusal_from_the_status_page)
{
    tu_farm_start_broker (&s_farm);
    static char longq[5000];
    memcpy (longq, "exp=", 4);
    memset (longq + 4, 'a', sizeof longq - 5);
    const struct {
        const char *query;
        const char *status;
    } cases[] = {
        {"exp=%3Cscript%3Ealert(1)%3C/script%3E", "400"},
        {"exp=<script>alert(1)</script>", "400"},
        {"exp=../../../../etc/passwd", "400"},
        {"exp=%2e%2e%2f%2e%2e%2fetc", "400"},
        {"exp=%zz", "400"},
        {"exp=%", "400"},
        {"exp=a%00b", "400"},
        {"exp=%ff%fe", "400"},
        {"format=xml", "400"},
        {"color=red", "400"},
        {"exp=x'%22;DROP TABLE pairs;--", "404"},  // a name a directory may have
        {"format=json&exp=%3Cb%3E", "404"},
        {"exp=a&exp=b", "400"},
        {"exp=nosuch", "404"},
        {longq, "400"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[65536];
        s_cgi (cases[i].query, out, sizeof out);
        char first[160];
        snprintf (first, sizeof first, "%.*s", (int) strcspn (out, "\r\n"), out);
        printf ("cgi %.40s -> %s\n", cases[i].query, first);
        ck_assert_msg (strncmp (out, "Status: ", 8) == 0 && strncmp (out + 8, cases[i].status, 3) == 0,
                       "'%s': %s", cases[i].query, first);
        ck_assert_msg (!strstr (out, "<script>") && !strstr (out, "<b>"), "'%s' echoed: %s",
                       cases[i].query, out);
    }
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM meta"), 2);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

// ---------------------------------------------------------------------------
// Peers that lie (issue 13): names that leave the root, results nobody
// asked for, credit nobody has.

// A fake agent's DEALER on the broker's work socket, HELLO said with
// 'cores'.
static zsock_t *
s_fake_agent (const char *id, uint32_t cores)
{
    zsock_t *s = zsock_new (ZMQ_DEALER);
    ck_assert (s != NULL);
    zsock_set_linger (s, 0);
    zsock_set_rcvtimeo (s, 10000);
    ck_assert (zsock_connect (s, "ipc://%s/work", s_farm.dir) == 0);
    proto_msg_t hello = {.command = PROTO_HELLO, .name = (char *) id, .text = "fakehost",
                         .count = cores, .settings = "noop"};
    ck_assert (proto_send (&hello, NULL, s) == 0);
    return s;
}

// The next message of 'command' on s (others skipped), within 10 s.
static void
s_expect (zsock_t *s, char command, proto_msg_t *msg)
{
    char err[512];
    for (int i = 0; i < 100; i++) {
        ck_assert_msg (proto_recv (s, NULL, msg, err, sizeof err) == 0, "no %s: %s",
                       proto_command_name (command), err);
        if (msg->command == command)
            return;
        proto_msg_release (msg);
    }
    ck_abort_msg ("no %s", proto_command_name (command));
}

START_TEST (file_names_that_leave_the_watch_root_are_refused_and_never_recorded)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/ingest", s_farm.dir);
    static const struct {
        const char *experiment, *name, *said;
    } bad[] = {
        {"exp1", "../../etc/passwd", "'name' is not a plain relative path (a '..' component)"},
        {"exp1", "./g_0001_a.tif", "'name' is not a plain relative path (a '.' component)"},
        {"exp1", "/etc/shadow", "'name' is not a plain relative path (an absolute path)"},
        {"exp1", "cam1//g_0001_a.tif", "'name' is not a plain relative path (an empty component)"},
        {"exp1", "g_0001\n_a.tif", "(a control character (0x0a))"},
        {"exp1", "g_0001\x1b[2J_a.tif", "(a control character (0x1b))"},
        {"..", "g_0001_a.tif", "'experiment' is not a plain name (a '..' component)"},
        {".", "g_0001_a.tif", "'experiment' is not a plain name (a '.' component)"},
        {"/tmp", "g_0001_a.tif", "'experiment' is not a plain name (an absolute path)"},
        {"a/b", "g_0001_a.tif", "'experiment' is not a plain name (a '/' in a single name)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *frames[] = {"PIVF02", "F", "7", bad[i].experiment, bad[i].name, "10", "1"};
        s_send_raw (endpoint, 7, frames, NULL);
        ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", bad[i].said, 5000), "no '%s'",
                       bad[i].said);
    }
    // A NUL inside a name cannot even be read as text.
    const char *nul[] = {"PIVF02", "F", "8", "exp1", "a\0/../../x", "10", "1"};
    const long lens[] = {-1, -1, -1, -1, 10, -1, -1};
    usleep (1100000);  // refusals are logged 20 a second: this one in a second of its own
    s_send_raw (endpoint, 7, nul, lens);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "'name' holds a NUL byte", 5000));
    // Nothing recorded, no experiment made of a hostile name.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files"), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments"), 0);
    // The farm runs on: a good pair completes.
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.watcher));
}
END_TEST

START_TEST (forged_results_are_refused_and_never_stored)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    zsock_t *holder = s_fake_agent ("holder", 1);
    zsock_t *other = s_fake_agent ("other", 1);
    proto_msg_t ready = {.command = PROTO_READY, .count = 1};
    ck_assert (proto_send (&ready, NULL, holder) == 0);
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    proto_msg_t task;
    s_expect (holder, PROTO_TASK, &task);
    uint64_t pair = task.pair;
    uint32_t attempt = task.attempt;
    proto_msg_release (&task);

    // Another agent's attempt: not stored, answered RECORDED.
    proto_msg_t forged = {.command = PROTO_RESULT, .pair = pair, .attempt = attempt,
                          .output = "forged.txt"};
    ck_assert (proto_send (&forged, NULL, other) == 0);
    proto_msg_t got;
    s_expect (other, PROTO_RECORDED, &got);
    proto_msg_release (&got);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "from agent 'other' ignored: the pair is "
                                                       "out with agent 'holder'", 5000));
    // A pair never dispatched.
    forged.pair = pair + 1000;
    ck_assert (proto_send (&forged, NULL, other) == 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "no such attempt was dispatched", 5000));
    // A FAILED for the holder's pair from another agent.
    proto_msg_t failed = {.command = PROTO_FAILED, .pair = pair, .attempt = attempt,
                          .text = "forged failure"};
    ck_assert (proto_send (&failed, NULL, other) == 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "FAILED of pair", 5000));
    // A connection that said no HELLO.
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/work", s_farm.dir);
    char p[32], a[32];
    snprintf (p, sizeof p, "%llu", (unsigned long long) pair);
    snprintf (a, sizeof a, "%u", attempt);
    const char *nohello[] = {"PIVF02", "D", p, a, "1", "x.txt", "0", "0", "0", "1", "0", "0", "0",
                             ""};
    s_send_raw (endpoint, 14, nohello, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "no HELLO on this connection", 5000));
    // The holder itself, with a garbage field or absurd figures: the codec refuses them.
    zmsg_t *m = zmsg_new ();
    const char *garbage[] = {"PIVF02", "D", p, a, "1", "x.txt", "0", "0", "0", "1", "4", "4", "0",
                             "garbage garbage garbage garbage garbage"};
    for (int f = 0; f < 14; f++)
        zmsg_addstr (m, garbage[f]);
    ck_assert (zmsg_send (&m, holder) == 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "'field' has magic 'garb'", 5000));
    m = zmsg_new ();
    const char *huge[] = {"PIVF02", "D", p, a, "1", "x.txt", "0", "0", "0", "1", "1e300", "4",
                          "0", ""};
    for (int f = 0; f < 14; f++)
        zmsg_addstr (m, huge[f]);
    ck_assert (zmsg_send (&m, holder) == 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "'nx' is not a whole number", 5000));
    // None of it stored; the pair still out with its holder ...
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results"), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE state = 1"), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM attempts WHERE outcome IS NOT "
                                            "NULL"),
                      0);
    // ... whose own honest answer is taken.
    forged.pair = pair;
    forged.output = "g_0001.txt";
    ck_assert (proto_send (&forged, NULL, holder) == 0);
    s_expect (holder, PROTO_RECORDED, &got);
    proto_msg_release (&got);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results WHERE agent = 'holder'"),
                      1);
    zsock_destroy (&holder);
    zsock_destroy (&other);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

START_TEST (a_fake_agent_claiming_endless_credit_leaves_the_tasks_to_the_real_one)
{
    tu_farm_render (&s_farm, 4, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    zsock_t *fake = s_fake_agent ("greedy", 1);
    proto_msg_t ready = {.command = PROTO_READY, .count = UINT32_MAX};
    ck_assert (proto_send (&ready, NULL, fake) == 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "agent 'greedy' on fakehost asks for", 5000));
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "real");
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "agent 'real'", 5000));
    tu_farm_land (&s_farm, "g", 1, 4, 0);
    // The fake holds one task (its one core) and answers nothing; the real
    // agent does the rest (and the fake's, once it is presumed dead).
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 4, 60).done, 4);
    ck_assert_int_le (tu_farm_sql (&s_farm, "SELECT count(*) FROM attempts WHERE agent = 'greedy'"),
                      1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results WHERE agent = 'real'"), 4);
    zsock_destroy (&fake);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

START_TEST (a_second_broker_on_the_same_store_refuses_to_start_and_changes_nothing)
{
    tu_farm_slow (&s_farm, 2, 2, 2, "a1");
    // The same configuration (same store), other sockets.
    char db[4200], wal[4300];
    snprintf (db, sizeof db, "%s/farm.db", s_farm.dir);
    snprintf (wal, sizeof wal, "%s/farm.db-wal", s_farm.dir);
    size_t db_len, wal_len, len;
    char *db_before = tu_slurp (db, &db_len), *wal_before = tu_slurp (wal, &wal_len);
    ck_assert (db_before != NULL);
    char conf2[4200];
    snprintf (conf2, sizeof conf2, "%s/second.conf", s_farm.dir);
    size_t clen;
    char *text = tu_slurp (s_farm.conf, &clen);
    ck_assert (text != NULL);
    tu_spit (conf2, text, clen);
    free (text);
    char *argv[] = {(char *) tu_bin ("pivfarm-broker"), "-c", conf2, NULL};
    char out[8192];
    int rc = tu_run (argv, out, sizeof out, 30);
    ck_assert_msg (rc != 0, "a second broker started: %s", out);
    ck_assert_msg (strstr (out, "another broker (pid ") && strstr (out, "farm.db.lock"),
                   "the second broker said: %s", out);
    char *db_after = tu_slurp (db, &len);
    ck_assert (db_after && len == db_len && memcmp (db_before, db_after, len) == 0);
    char *wal_after = tu_slurp (wal, &len);
    ck_assert ((wal_before == NULL) == (wal_after == NULL));
    ck_assert (!wal_before || (len == wal_len && memcmp (wal_before, wal_after, len) == 0));
    free (db_before), free (db_after), free (wal_before), free (wal_after);
    // The running broker's pairs are still out and complete.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'requeue'"), 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 60).done, 2);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

// ---------------------------------------------------------------------------
// Names an operator gives (issue 13)

#define S_X16 "xxxxxxxxxxxxxxxx"
#define S_X256 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16 S_X16

// Every experiment name of every command (-e EXP, --as NAME, the EXP of
// pairs, log, retry, backfill, replay, provision, archive, release) and
// every directory (--to, --dir) is checked before the command runs:
// refused with a 400 naming the argument and why, logged, nothing recorded.
static const struct {
    const char *line;
    const char *named;
} s_bad_names[] = {
    {"replay exp1 --as ..", "replay: bad --as '..': a '..' component"},
    {"replay exp1 --as .", "replay: bad --as '.': a '.' component"},
    {"replay exp1 --as \"\"", "replay: bad --as '': an empty name"},
    {"replay exp1 --as /tmp/x", "replay: bad --as '/tmp/x': an absolute path"},
    {"replay exp1 --as \"a\x01" "b\"", "replay: bad --as 'a\\x01b': a control character (0x01)"},
    {"replay .. --as fine", "replay: bad experiment '..'"},
    {"provision .. --size 1G --hours 1", "provision: bad experiment '..': a '..' component"},
    {"provision /etc --size 1G --hours 1", "provision: bad experiment '/etc': an absolute path"},
    {"provision new --size 1G --hours 1 --dir rel/dir", "provision: bad --dir 'rel/dir': not an absolute path"},
    {"archive ../x --to /tmp/a", "archive: bad experiment '../x'"},
    {"archive exp1 --to rel/dir", "archive: bad --to 'rel/dir': not an absolute path"},
    {"release exp1 --to .", "release: bad --to '.': not an absolute path"},
    {"release a/b", "release: bad experiment 'a/b': a '/' in a single name"},
    {"pairs ..", "pairs: bad experiment '..'"},
    {"log .", "log: bad experiment '.'"},
    {"retry ..", "retry: bad experiment '..'"},
    {"backfill exp1/..", "backfill: bad experiment 'exp1/..'"},
    {"rate 5 -e ..", "rate: bad -e '..'"},
    {"policy latest -e ../exp1", "policy: bad -e '../exp1'"},
    {"pause -e .", "pause: bad -e '.'"},
    {"resume -e \"\"", "resume: bad -e '': an empty name"},
    {"feedback on -e ..", "feedback: bad -e '..'"},
    {"status -e ..", "status: bad -e '..'"},
    {"experiments -e a/b", "experiments: bad -e 'a/b'"},
    // Issue 23: one rule, NAME_MAX included, for every name (no limit of
    // 200 bytes of its own for --as or provision), and a reason for each.
    {"replay exp1 --as " S_X256, "replay: bad --as 'xxx"},
    {"replay exp1 --as " S_X256, "...': 256 bytes, over the 255 NAME_MAX allows"},
    {"provision " S_X256 " --size 1G --hours 1", "256 bytes, over the 255 NAME_MAX allows"},
    {"provision .hidden --size 1G --hours 1", "'.hidden': a hidden name, which the watcher"},
};

START_TEST (bad_names_in_every_command_are_refused_and_nothing_is_recorded)
{
    tu_farm_fake (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    for (int i = 0; i < 200 && tu_farm_counts (&s_farm).files < 2; i++)
        usleep (50000);
    ck_assert_int_eq (tu_farm_counts (&s_farm).files, 2);
    int64_t events = tu_farm_sql (&s_farm, "SELECT count(*) FROM events");
    zsock_t *c = zsock_new (ZMQ_DEALER);
    zsock_set_rcvtimeo (c, 5000);
    ck_assert (zsock_connect (c, "ipc://%s/control", s_farm.dir) == 0);
    for (size_t i = 0; i < sizeof s_bad_names / sizeof s_bad_names[0]; i++) {
        proto_msg_t req = {.command = PROTO_REQUEST, .text = (char *) s_bad_names[i].line}, reply;
        ck_assert (proto_send (&req, NULL, c) == 0);
        char err[512];
        ck_assert_msg (proto_recv (c, NULL, &reply, err, sizeof err) == 0, "'%s': %s",
                       s_bad_names[i].line, err);
        printf ("control %-40s %u %s\n", s_bad_names[i].line, reply.status, reply.text);
        ck_assert_msg (reply.status == 400 && strstr (reply.text, s_bad_names[i].named),
                       "'%s': %u %s", s_bad_names[i].line, reply.status, reply.text);
        proto_msg_release (&reply);
    }
    zsock_destroy (&c);
    // Nothing recorded: exp1 alone, no setting, no event; each refusal logged.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments"), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM settings"), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM events"), events);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "control: refused 'replay': bad --as '..': a '..' component", 5000));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "control: refused 'archive': bad --to 'rel/dir'", 5000));
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

START_TEST (tiff_headers_that_lie_about_their_length_never_stop_the_watcher)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", "-v", NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    // Classic TIFF, IFD at 8 with 2 entries (StripOffsets, StripByteCounts)
    // and its next-IFD offset; each case lies in one field.
    static const unsigned char classic[38] = {
        'I', 'I', 42, 0, 8, 0, 0, 0, 2, 0,
        0x11, 1, 4, 0, 1, 0, 0, 0, 8, 0, 0, 0,  // 273 LONG 1: offset 8
        0x17, 1, 4, 0, 1, 0, 0, 0, 4, 0, 0, 0,  // 279 LONG 1: 4 bytes
        0, 0, 0, 0};
    unsigned char loop[38], many[38], entries[38];
    memcpy (loop, classic, 38), memcpy (many, classic, 38), memcpy (entries, classic, 38);
    loop[34] = 8;                                       // the next IFD is itself
    memset (many + 14, 0xff, 4), memset (many + 26, 0xff, 4);  // 4 billion strips
    entries[8] = entries[9] = 0xff;                     // 65535 entries
    // BigTIFF whose strip offset + byte count overflows 64 bits.
    unsigned char big[16 + 8 + 40 + 8] = {'I', 'I', 43, 0, 8, 0, 0, 0, 16};
    big[16] = 2;
    unsigned char *e = big + 24;
    e[0] = 0x11, e[1] = 1, e[2] = 16, e[4] = 1;
    memset (e + 12, 0xff, 8);
    e += 20;
    e[0] = 0x17, e[1] = 1, e[2] = 16, e[4] = 1, e[12] = 0xff, e[13] = 0xff;
    s_put ("exp1/lieloop_0001_a.tif", loop, sizeof loop);
    s_put ("exp1/liemany_0001_a.tif", many, sizeof many);
    s_put ("exp1/lieentries_0001_a.tif", entries, sizeof entries);
    s_put ("exp1/liebig_0001_a.tif", big, sizeof big);
    s_copy_good ("exp1", "good_0001");
    ck_assert_int_eq (s_wait_done ("exp1", 1), 1);
    // The header cannot tell: each goes after settle_ms like any other file.
    const char *names[] = {"lieloop", "liemany", "lieentries", "liebig"};
    for (int i = 0; i < 4; i++) {
        char line[128];
        snprintf (line, sizeof line, "file exp1/%s_0001_a.tif (", names[i]);
        ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", line, 10000), "no '%s'", line);
    }
    ck_assert (tu_alive (s_farm.watcher) && tu_alive (s_farm.broker));
}
END_TEST

// ---------------------------------------------------------------------------
// Frames and results that are not what they seem (issue 13, helper "paths")

// Replaces data/exp1/<name> (already paired) by what 'how' makes of it.
static const char *
s_frame (const char *name)
{
    static char path[4096];
    snprintf (path, sizeof path, "%s/data/exp1/%s", s_farm.dir, name);
    return path;
}

// Waits until 'n' pairs are pending, then stops the watcher, so that what
// is done to the frames afterwards reaches only the agent.
static void
s_pending_then_no_watcher (int n)
{
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 200 && c.pending < n; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_int_eq (c.pending, n);
    tu_stop (s_farm.watcher, SIGTERM, 10);
    s_farm.watcher = 0;
}

static const s_case_t s_frame_cases[] = {
    {"fifo_0001", "fifo_0001_a.tif': not a regular file (a FIFO)"},
    {"device_0001", "device_0001_a.tif': not a regular file (a character device)"},
    {"link_0001", "link_0001_a.tif': a symbolic link, or it leads outside the watch root"},
    {"sparse_0001", "sparse_0001_a.tif': sparse file"},
    {"big_0001", "big_0001_a.tif': file of"},
};

START_TEST (frames_that_are_not_plain_files_in_the_root_fail_and_the_agent_lives_on)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    tu_farm_conf_replace (&s_farm, "    iterations = 1\n", "    iterations = 1\n    max_file_mb = 1\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    int n = (int) (sizeof s_frame_cases / sizeof s_frame_cases[0]);
    for (int i = 0; i < n; i++)
        s_copy_good ("exp1", s_frame_cases[i].stem);
    s_pending_then_no_watcher (n);
    // Each A frame becomes something else once paired. Every one of them
    // reads as a good frame to a loader that follows links, reads FIFOs
    // (blocking for ever) and reads whatever size.
    size_t len;
    char *real = tu_slurp (tu_path (s_farm.dir, "src/g_0001_a.tif"), &len);
    ck_assert (real != NULL);
    ck_assert (unlink (s_frame ("fifo_0001_a.tif")) == 0);
    ck_assert (mkfifo (s_frame ("fifo_0001_a.tif"), 0644) == 0);
    ck_assert (unlink (s_frame ("device_0001_a.tif")) == 0);
    int device = geteuid () == 0 && mknod (s_frame ("device_0001_a.tif"), S_IFCHR | 0644,
                                           makedev (1, 3)) == 0;  // /dev/null's
    if (!device)
        ck_assert (symlink ("/dev/null", s_frame ("device_0001_a.tif")) == 0);
    // A link out of the root, to a good frame.
    ck_assert (unlink (s_frame ("link_0001_a.tif")) == 0);
    ck_assert (symlink (tu_path (s_farm.dir, "src/g_0001_a.tif"), s_frame ("link_0001_a.tif")) == 0);
    // A good frame with 32 MiB of holes after it (libtiff reads it fine).
    ck_assert (truncate (s_frame ("sparse_0001_a.tif"), 32 << 20) == 0);
    // A good frame and 2 MiB of real bytes: over piv/max_file_mb = 1.
    char *padded = calloc (1, (2 << 20) + len);
    ck_assert (padded != NULL);
    memcpy (padded, real, len);
    memset (padded + len, 0x5a, 2 << 20);
    tu_spit (s_frame ("big_0001_a.tif"), padded, (2 << 20) + len);
    free (padded);
    free (real);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 300 && c.failed < n; i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    ck_assert_msg (c.failed == n && c.done == 0, "done %lld failed %lld pending %lld out %lld",
                   (long long) c.done, (long long) c.failed, (long long) c.pending,
                   (long long) c.dispatched);
    for (int i = 0; i < n; i++) {
        const s_case_t *k = &s_frame_cases[i];
        char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs WHERE stem = '%s'"
                                                 " AND state = 3", k->stem);
        printf ("frame %-12s failed: %s\n", k->stem, error ? error : "(not failed)");
        const char *want = k->reason;
        if (!device && strncmp (k->stem, "device", 6) == 0)
            want = "a symbolic link";
        ck_assert_msg (error && strstr (error, want), "%s: %s", k->stem, error ? error : "not failed");
        free (error);
    }
    // The agent lives on and its worker is free: a good pair after them is done.
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_copy_good ("exp1", "after_0001");
    ck_assert_int_eq (s_wait_done ("exp1", 1), 1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.agents[0]));
}
END_TEST

START_TEST (a_results_directory_link_out_of_the_results_fails_the_pair_and_writes_nothing_there)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    // results/exp1 is a link to a directory outside the results.
    char outside[4096];
    snprintf (outside, sizeof outside, "%s", tu_path (s_farm.dir, "outside"));
    ck_assert (mkdir (outside, 0755) == 0);
    ck_assert (mkdir (tu_path (s_farm.dir, "results"), 0755) == 0 || errno == EEXIST);
    ck_assert (symlink (outside, tu_path (s_farm.dir, "results/exp1")) == 0);
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    s_copy_good ("exp1", "out_0001");
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 300 && c.failed < 1; i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs WHERE stem = 'out_0001'"
                                             " AND state = 3");
    printf ("results link: %s\n", error ? error : "(not failed)");
    ck_assert_msg (error && strstr (error, "out_0001.txt': a symbolic link"), "%s",
                   error ? error : "not failed");
    free (error);
    ck_assert (access (tu_path (s_farm.dir, "outside/out_0001.txt"), F_OK) != 0);
    // Another experiment's results are written as ever.
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp2"), 0755) == 0);
    usleep (200000);
    s_copy_good ("exp2", "in_0001");
    ck_assert_int_eq (s_wait_done ("exp2", 1), 1);
    ck_assert (access (tu_path (s_farm.dir, "results/exp2/in_0001.txt"), F_OK) == 0);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.agents[0]));
}
END_TEST

// ---------------------------------------------------------------------------
// Memory (issue 23)

// Moves src/<name> into data/exp1/<name> at once (a rename: the watcher
// never sees it half written).
static void
s_land_src (const char *name)
{
    char from[4096], to[4096];
    snprintf (from, sizeof from, "%s/src/%s", s_farm.dir, name);
    snprintf (to, sizeof to, "%s/data/exp1/%s", s_farm.dir, name);
    ck_assert_msg (rename (from, to) == 0, "cannot move '%s': %s", from, strerror (errno));
}

// Writes the real pair 'a', 'b' of tests/data, rewritten with 'compression',
// as src/<stem>_{a,b}.tif and lands it.
static void
s_land_real (const char *stem, const char *a, const char *b, int compression)
{
    for (int side = 0; side < 2; side++) {
        char name[256];
        snprintf (name, sizeof name, "%s_%c.tif", stem, side ? 'b' : 'a');
        tu_tiff_recompress (tu_data (side ? b : a), tu_path (tu_path (s_farm.dir, "src"), name),
                            compression);
        s_land_src (name);
    }
}

// The error of the failed pair 'stem' (malloc'd), waiting for it up to 120 s.
static char *
s_failed_error (const char *stem)
{
    for (int i = 0; i < 1200; i++) {
        char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs WHERE stem = '%s'"
                                                 " AND state = 3", stem);
        if (error || tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE stem = '%s'"
                                           " AND state = 2", stem) > 0)
            return error;
        usleep (100000);
    }
    return NULL;
}

START_TEST (a_deflate_bomb_fails_naming_its_sizes_and_the_agent_stays_small)
{
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    // Whatever the agent may use, it says where its budget came from.
    ck_assert (tu_farm_log_has (&s_farm, "agent1.log", "memory budget", 5000));
    ck_assert (tu_farm_log_has (&s_farm, "agent1.log", "(3/4 of ", 100));
    // Real pairs, compressed as cameras and converters write them.
    s_land_real ("deflate_0001", "B005_1.tif", "B005_2.tif", COMPRESSION_ADOBE_DEFLATE);
    s_land_real ("lzw_0001", "exp1_001_a_rgb.tiff", "exp1_001_b_rgb.tiff", COMPRESSION_LZW);
    s_land_real ("packbits_0001", "2image_00.tif", "2image_01.tif", COMPRESSION_PACKBITS);
    ck_assert_int_eq (s_wait_done ("exp1", 3), 3);
    // 8000 x 8000 zeros, 63 KiB deflated: a loader that believes its header
    // takes 64 MB a frame, and the engine 24 bytes a pixel more.
    const char *src = tu_path (s_farm.dir, "src");
    tu_tiff_zeros (tu_path (src, "bomb_0001_a.tif"), 8000, 8000, 8, COMPRESSION_ADOBE_DEFLATE, 2000);
    tu_tiff_zeros (tu_path (src, "bomb_0001_b.tif"), 8000, 8000, 8, COMPRESSION_ADOBE_DEFLATE, 2000);
    struct stat st;
    ck_assert (stat (tu_path (src, "bomb_0001_a.tif"), &st) == 0 && st.st_size < 100000);
    double t0 = util_now ();
    s_land_src ("bomb_0001_a.tif");
    s_land_src ("bomb_0001_b.tif");
    char *error = s_failed_error ("bomb_0001");
    double took = util_now () - t0;
    long peak = tu_peak_rss_kb (s_farm.agents[0]);
    printf ("bomb of %lld bytes: %s after %.2f s (%s); agent's peak RSS %ld KiB\n",
            (long long) st.st_size, error ? "failed" : "done", took, error ? error : "", peak);
    ck_assert_msg (error && strstr (error, "bomb_0001_a.tif': declares 8000x8000 8-bit")
                       && strstr (error, "Deflate") && strstr (error, "at most 250:1")
                       && strstr (error, "refused as a decompression bomb"),
                   "%s", error ? error : "not failed");
    free (error);
    // The agent never held the frames: its peak is what it had before.
    ck_assert_msg (peak > 0 && peak < 300 * 1024, "agent's peak RSS %ld KiB", peak);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.agents[0]));
}
END_TEST

START_TEST (a_pair_over_the_agent_memory_budget_fails_naming_the_budget)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_conf (&s_farm, "piv", 1, "32,16", "    memory_mb = 4\n");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    ck_assert (tu_farm_log_has (&s_farm, "agent1.log",
                                "memory budget 4.0 MiB a thread (agent/memory_mb 4, 1 thread)", 5000));
    // 512 x 512 needs some 7 MiB with these settings (doc/piv.md, "Memory").
    s_land_real ("big_0001", "B005_1.tif", "B005_2.tif", COMPRESSION_ADOBE_DEFLATE);
    char *error = s_failed_error ("big_0001");
    printf ("over the budget: %s\n", error ? error : "(not failed)");
    ck_assert_msg (error && strstr (error, "big_0001_a.tif': 512x512 8-bit frame would need ")
                       && strstr (error, "over this agent's budget of 4.0 MiB a thread "
                                         "(agent/memory_mb 4, 1 thread)"),
                   "%s", error ? error : "not failed");
    free (error);
    // 256 x 256 frames fit: the agent goes on.
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.agents[0]));
}
END_TEST

int
main (void)
{
    setvbuf (stdout, NULL, _IOLBF, 0);  // the figures survive a failed test
    Suite *suite = suite_create ("badinput");
    TCase *tc = tcase_create ("badinput");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 240);
    tcase_add_test (tc, bad_tiffs_fail_with_their_reason_and_good_pairs_complete);
    tcase_add_test (tc, hostile_names_and_a_changing_watch_root_never_stop_the_watcher);
    tcase_add_test (tc, names_the_farm_takes_open_on_the_page_in_pivctl_and_in_exports);
    tcase_add_test (tc, a_pair_eight_directories_of_255_bytes_deep_is_done_and_exported);
    tcase_add_test (tc, a_path_over_path_max_is_refused_at_the_first_door_with_one_whole_line);
    tcase_add_test (tc, malformed_messages_on_every_broker_socket_are_dropped_and_the_farm_runs_on);
    tcase_add_test (tc, an_agent_and_a_watcher_fed_malformed_messages_drop_them_and_run_on);
    tcase_add_test (tc, bad_control_lines_are_refused_naming_what_is_wrong);
    tcase_add_test (tc, hostile_query_strings_get_a_clean_refusal_from_the_status_page);
    tcase_add_test (tc, file_names_that_leave_the_watch_root_are_refused_and_never_recorded);
    tcase_add_test (tc, forged_results_are_refused_and_never_stored);
    tcase_add_test (tc, a_fake_agent_claiming_endless_credit_leaves_the_tasks_to_the_real_one);
    tcase_add_test (tc, a_second_broker_on_the_same_store_refuses_to_start_and_changes_nothing);
    tcase_add_test (tc, tiff_headers_that_lie_about_their_length_never_stop_the_watcher);
    tcase_add_test (tc, bad_names_in_every_command_are_refused_and_nothing_is_recorded);
    tcase_add_test (tc, frames_that_are_not_plain_files_in_the_root_fail_and_the_agent_lives_on);
    tcase_add_test (tc, a_results_directory_link_out_of_the_results_fails_the_pair_and_writes_nothing_there);
    tcase_add_test (tc, a_deflate_bomb_fails_naming_its_sizes_and_the_agent_stays_small);
    tcase_add_test (tc, a_pair_over_the_agent_memory_budget_fails_naming_the_budget);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
