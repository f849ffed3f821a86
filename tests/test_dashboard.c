// test_dashboard.c — pivfarm.cgi, the status page: run as a web server runs
// it (QUERY_STRING, REQUEST_METHOD) against a store of known contents, every
// figure checked against that store; hostile queries and hostile strings in
// the store; and the whole chain: a farm processing pairs, lighttpd serving
// the page, headless Chromium loading it.

#include "common/proto.h"
#include "piv/derived.h"
#include "piv/field.h"
#include "piv/stats.h"
#include "common/jdoc.h"
#include "store/store.h"
#include "tests/testutil.h"

#include <arpa/inet.h>
#include <check.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S_OUT (4 << 20)  // bytes of a captured response or DOM

static tu_farm_t s_farm;    // the test's directory, configuration and processes
static const char *s_dir;   // s_farm.dir
static char *s_out;         // the last response

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
    s_dir = s_farm.dir;
    s_out = malloc (S_OUT);
}

static void
s_teardown (void)
{
    tu_farm_release (&s_farm);
    free (s_out);
}

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return ts.tv_sec * (int64_t) 1000000000 + ts.tv_nsec;
}

// Runs the CGI with 'query' (and 'method'); returns the body, the status
// code in *status. The headers must name a status and a content type.
static const char *
s_cgi_method (const char *method, const char *query, int *status)
{
    setenv ("PIVFARM_CONF", s_farm.conf, 1);
    setenv ("REQUEST_METHOD", method, 1);
    setenv ("QUERY_STRING", query, 1);
    char *argv[] = {(char *) tu_bin ("pivfarm.cgi"), NULL};
    int rc = tu_run (argv, s_out, S_OUT, 30);
    ck_assert_msg (rc == 0, "pivfarm.cgi exited with %d: %.500s", rc, s_out);
    ck_assert_msg (strncmp (s_out, "Status: ", 8) == 0, "no status: %.300s", s_out);
    *status = atoi (s_out + 8);
    char *body = strstr (s_out, "\r\n\r\n");
    ck_assert_msg (body != NULL, "no end of headers: %.300s", s_out);
    ck_assert (strstr (s_out, "Content-Type: ") != NULL);
    return body + 4;
}

static const char *
s_cgi (const char *query, int *status)
{
    return s_cgi_method ("GET", query, status);
}

static jdoc_t *
s_cgi_json (const char *query)
{
    int status;
    const char *body = s_cgi (query, &status);
    ck_assert_msg (status == 200, "status %d: %.300s", status, body);
    char err[256];
    jdoc_t *doc = jdoc_parse (body, err, sizeof err);
    ck_assert_msg (doc != NULL, "%s: %.300s", err, body);
    return doc;
}

static int
s_count (const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr (text, what); p; p = strstr (p + 1, what))
        n++;
    return n;
}

// ---------------------------------------------------------------------------
// A store of known contents

// A field of nx x ny vectors, u = scale i / 2, v = -scale j / 4, the first
// vector invalid.
static piv_field_t *
s_field (int nx, int ny, double scale)
{
    piv_field_t *f = piv_field_new (nx, ny);
    ck_assert (f != NULL);
    f->window = 32, f->step = 16, f->runs = 1;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            int n = j * nx + i;
            f->x[n] = 8 + 16 * i, f->y[n] = 8 + 16 * j;
            f->u[n] = (float) (scale * i / 2), f->v[n] = (float) (-scale * j / 4);
            f->peak_ratio[n] = 2;
            f->flags[n] = n == 0 ? PIV_FLAG_INVALID : PIV_FLAG_VALID;
        }
    return f;
}

typedef struct {
    store_t *store;
    int64_t exp;
    int n;  // pairs made
} s_maker_t;

static int64_t
s_pair (s_maker_t *m, const char *stem, int64_t t)
{
    char a[256], b[256];
    snprintf (a, sizeof a, "%s_a.tif", stem);
    snprintf (b, sizeof b, "%s_b.tif", stem);
    int is_new;
    int64_t fa = store_file_add (m->store, m->exp, a, 10, t, t, &is_new);
    int64_t fb = store_file_add (m->store, m->exp, b, 10, t, t, &is_new);
    int64_t pair = store_pair_add (m->store, m->exp, stem, fa, fb, t, &is_new);
    ck_assert (pair > 0);
    m->n++;
    return pair;
}

static void
s_done (s_maker_t *m, const char *stem, const char *agent, int nx, int ny, double scale,
        int64_t t, double latency_ms, double value)
{
    int64_t pair = s_pair (m, stem, t - 1000000);
    int attempt = store_pair_dispatch (m->store, pair, agent, t - 500000);
    ck_assert (attempt == 1);
    piv_field_t *f = s_field (nx, ny, scale);
    unsigned char *blob;
    size_t size;
    ck_assert (piv_field_encode (f, &blob, &size) == 0);
    store_result_t r = {.mean_u = 1, .mean_v = -1, .mean_speed = 1.4, .valid_fraction = 1,
                        .nx = nx, .ny = ny, .compute_ns = 1000, .path = "x.txt",
                        .field = blob, .field_size = size};
    int recorded;
    ck_assert (store_pair_result (m->store, pair, attempt, agent, &r, t, &recorded) == 0);
    ck_assert (recorded);
    free (blob);
    piv_field_destroy (&f);
    char json[1024];
    snprintf (json, sizeof json,
              "{\"experiment\":\"exp1\",\"pair\":%lld,\"stem\":\"%s\",\"closed_ns\":%lld,"
              "\"computed_ns\":%lld,\"latency_ms\":%g,\"quantity\":\"mean_speed\","
              "\"value\":%g,\"enabled\":true,\"setpoint\":2.5,\"output\":0.75}",
              (long long) pair, stem, (long long) (t - 1000000), (long long) t, latency_ms,
              value);
    ck_assert (store_event (m->store, "feedback", m->exp, pair, json, t) > 0);
}

// exp1: 3 pairs done (2 in the last 10 s, 1 at 30 s ago), 1 failed, 1
// pending, 1 skipped; big: one result of a 100 x 80 field.
static void
s_make_store (int64_t now)
{
    char err[512];
    store_t *store = store_new (tu_path (s_dir, "farm.db"), STORE_DURABILITY_NORMAL, err,
                                sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    s_maker_t m = {.store = store};
    m.exp = store_experiment (store, "exp1", now - 60 * (int64_t) 1000000000);
    ck_assert (store_agent_seen (store, "agent-1", "node7", 8, "piv", now - 50000000000) == 0);
    s_done (&m, "s_0001", "agent-1", 12, 9, 1, now - 30 * (int64_t) 1000000000, 10, 2.0);
    s_done (&m, "s_0002", "agent-1", 12, 9, 2, now - 5 * (int64_t) 1000000000, 30, 2.25);
    s_done (&m, "s_0003", "agent-1", 12, 9, 3, now - 3 * (int64_t) 1000000000, 20, 2.5);
    int64_t bad = s_pair (&m, "s_0004", now - 2000000000);
    int attempt = store_pair_dispatch (store, bad, "agent-1", now - 2000000000);
    int failed;
    ck_assert (store_pair_failure (store, bad, attempt, "agent-1",
                                   "'s_0004_a.tif' is not a TIFF file", 1,
                                   now - 1900000000, &failed) == 0);
    ck_assert (failed);
    s_pair (&m, "s_0005", now - 1000000000);
    int64_t skip = s_pair (&m, "s_0006", now - 1000000000);
    ck_assert (store_pair_skip (store, skip, now - 900000000) == 0);
    m.exp = store_experiment (store, "big", now);
    s_done (&m, "b_0001", "agent-1", 100, 80, 1, now - 1000000000, 5, 1);
    ck_assert_msg (store_commit (store, err, sizeof err) == 0, "%s", err);
    store_destroy (&store);
}

// ---------------------------------------------------------------------------

START_TEST (every_figure_of_the_page_matches_a_store_of_known_contents)
{
    s_make_store (s_now_ns ());
    jdoc_t *doc = s_cgi_json ("format=json");
    // The broker does not answer: said so, figures from the store.
    ck_assert (jdoc_bool (doc, -1, "$.broker.reachable") == 0);
    ck_assert (jdoc_string (doc, "$.broker.error") != NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.experiments"), 2);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[0].experiment"), "exp1");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].done"), 3);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].total"), 6);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].failed"), 1);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].pending"), 1);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].skipped"), 1);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].files"), 12);
    // Rates from the log: 2 results in 10 s, 3 in 1 min; latency of the
    // feedback messages 10, 30, 20 ms.
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiments[0].rate_10s") - 0.2) < 1e-9);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiments[0].rate_1m") - 0.05) < 1e-9);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiments[0].latency_median_ms") - 20) < 1e-9);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiments[0].latency_p99_ms") - 30) < 1e-9);
    ck_assert (jdoc_type_at (doc, "$.experiments[0].queue") == JDOC_NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[0].policy"), "all");
    // The agent, from the log; the failure with its reason.
    ck_assert_int_eq (jdoc_length (doc, "$.agents"), 1);
    ck_assert_str_eq (jdoc_string (doc, "$.agents[0].id"), "agent-1");
    ck_assert_str_eq (jdoc_string (doc, "$.agents[0].host"), "node7");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.agents[0].cores"), 8);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.agents[0].done"), 4);
    ck_assert_int_eq (jdoc_length (doc, "$.failures"), 1);
    ck_assert_str_eq (jdoc_string (doc, "$.failures[0].stem"), "s_0004");
    ck_assert_str_eq (jdoc_string (doc, "$.failures[0].error"),
                      "'s_0004_a.tif' is not a TIFF file");
    jdoc_destroy (&doc);

    // The experiment page: the latest field (s_0003, scale 3), the series,
    // the rate history.
    doc = s_cgi_json ("exp=exp1&format=json");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.field.stem"), "s_0003");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.field.nx"), 12);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.field.ny"), 9);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.field.stride"), 1);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.field.shown"), 12 * 9 - 1);
    ck_assert_int_eq (jdoc_length (doc, "$.experiment.field.vectors"), 12 * 9);
    // Vector (i 5, j 2): x 88, y 40, u 3 * 5 / 2, v -3 * 2 / 4.
    int k = 2 * 12 + 5;
    ck_assert (jdoc_number (doc, NAN, "$.experiment.field.vectors[%d][0]", k) == 88);
    ck_assert (jdoc_number (doc, NAN, "$.experiment.field.vectors[%d][1]", k) == 40);
    ck_assert (jdoc_number (doc, NAN, "$.experiment.field.vectors[%d][2]", k) == 7.5);
    ck_assert (jdoc_number (doc, NAN, "$.experiment.field.vectors[%d][3]", k) == -1.5);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.field.vectors[0][4]"), PIV_FLAG_INVALID);
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.feedback.quantity"), "mean_speed");
    ck_assert_int_eq (jdoc_length (doc, "$.experiment.feedback.points"), 3);
    ck_assert (jdoc_number (doc, NAN, "$.experiment.feedback.points[0].value") == 2.0);
    ck_assert (jdoc_number (doc, NAN, "$.experiment.feedback.points[2].value") == 2.5);
    ck_assert (jdoc_number (doc, NAN, "$.experiment.feedback.points[2].setpoint") == 2.5);
    int sum = 0, buckets = jdoc_length (doc, "$.experiment.rate_history.results");
    for (int i = 0; i < buckets; i++)
        sum += (int) jdoc_int (doc, 0, "$.experiment.rate_history.results[%d]", i);
    ck_assert_int_eq (sum, 3);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.rate_history.results[%d]", buckets - 1), 2);
    ck_assert_int_eq (jdoc_length (doc, "$.failures"), 1);
    jdoc_destroy (&doc);

    // The HTML says the same.
    int status;
    const char *html = s_cgi ("", &status);
    ck_assert_int_eq (status, 200);
    ck_assert (strstr (html, "<meta http-equiv=\"refresh\" content=\"2\">") != NULL);
    ck_assert (strstr (html, "id=\"broker-unreachable\"") != NULL);
    ck_assert (strstr (html, "<b>3</b> / 6 done") != NULL);
    ck_assert (strstr (html, "0.20<span class=\"mute\"> /s") != NULL);
    ck_assert (strstr (html, "20<small>ms</small>") != NULL);
    ck_assert (strstr (html, "30<small>ms</small>") != NULL);
    ck_assert (strstr (html, "node7") != NULL);
    ck_assert (strstr (html, "&#39;s_0004_a.tif&#39; is not a TIFF file") != NULL);
    html = s_cgi ("exp=exp1", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_int_eq (s_count (html, "<svg class=\"quiver\""), 1);
    ck_assert_int_eq (s_count (html, "class=\"arrow\""), 12 * 9 - 1);
    ck_assert_int_eq (s_count (html, "class=\"invalid\""), 1);
    ck_assert (strstr (html, "data-vectors=\"107\"") != NULL);
    ck_assert_int_eq (s_count (html, "class=\"bucket\""), 30);
    ck_assert (strstr (html, "id=\"feedback-series\"") != NULL);
    // A large grid is thinned: every 3rd vector of 100 x 80.
    html = s_cgi ("exp=big", &status);
    ck_assert_int_eq (status, 200);
    ck_assert (strstr (html, "data-stride=\"3\"") != NULL);
    ck_assert_int_eq (s_count (html, "class=\"arrow\"") + s_count (html, "class=\"invalid\""),
                      34 * 27);
    // HEAD: headers only.
    html = s_cgi_method ("HEAD", "", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_str_eq (html, "");
}
END_TEST

// "Broker unreachable" only when nothing answered; an answer with an error
// is shown as what it is, with its status and message. The error is the
// real broker's: it runs on a store of its own (the page's, farm.db, must
// stay readable for the page to be drawn at all), and that store loses its
// experiments table while the broker runs, so that its status cannot read
// the store.
START_TEST (a_broker_that_answers_an_error_is_not_called_unreachable)
{
    s_make_store (s_now_ns ());
    int status;
    const char *html = s_cgi ("", &status);
    ck_assert_int_eq (status, 200);
    ck_assert (strstr (html, "id=\"broker-unreachable\"") != NULL);
    ck_assert (strstr (html, "broker answered") == NULL);
    // The broker reads its configuration at its start only: the page's
    // store is put back in it once the broker runs.
    tu_farm_conf_replace (&s_farm, "store = ./farm.db", "store = ./broker.db");
    s_farm.broker = tu_farm_start (&s_farm, "pivfarm-broker", "broker.log", NULL, NULL);
    ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", "pair(s) pending", 20000),
                   "the broker did not start (see broker.log)");
    tu_farm_conf_replace (&s_farm, "store = ./broker.db", "store = ./farm.db");
    const char *broker_db = tu_path (s_dir, "broker.db");
    sqlite3 *db = NULL;
    ck_assert (sqlite3_open_v2 (broker_db, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    sqlite3_busy_timeout (db, 10000);  // the broker may be writing
    char *why = NULL;
    int rc = sqlite3_exec (db, "ALTER TABLE experiments RENAME TO experiments_gone", NULL, NULL,
                           &why);
    ck_assert_msg (rc == SQLITE_OK, "cannot damage '%s': %s", broker_db, why);
    sqlite3_close (db);
    char expected[4200], escaped[4200];
    snprintf (expected, sizeof expected,
              "cannot read the store: cannot count pairs in '%s': no such table: experiments",
              broker_db);
    snprintf (escaped, sizeof escaped,
              "The broker answered 500: cannot read the store: cannot count pairs in "
              "&#39;%s&#39;: no such table: experiments",
              broker_db);
    html = s_cgi ("", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_msg (strstr (html, "id=\"broker-error\"") && strstr (html, escaped)
                       && strstr (html, "broker error 500"),
                   "%.3000s", html);
    ck_assert_msg (strstr (html, "nreachable") == NULL, "%.3000s", html);
    jdoc_t *doc = s_cgi_json ("format=json");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.broker.answered"), 500);
    ck_assert_str_eq (jdoc_string (doc, "$.broker.error"), expected);
    jdoc_destroy (&doc);
    ck_assert_msg (tu_alive (s_farm.broker), "the broker died of its store (see broker.log)");
}
END_TEST

START_TEST (hostile_queries_are_refused_and_hostile_strings_escaped)
{
    int64_t now = s_now_ns ();
    s_make_store (now);
    char err[512];
    store_t *store = store_new (tu_path (s_dir, "farm.db"), STORE_DURABILITY_NORMAL, err,
                                sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    // An experiment, an agent and an error made of markup.
    const char *evil = "<script>alert(1)</script>\"'&";
    s_maker_t m = {.store = store, .exp = store_experiment (store, evil, now)};
    ck_assert (store_agent_seen (store, "<img src=x onerror=alert(2)>", "h\"><b>", 1, "",
                                 now) == 0);
    int64_t pair = s_pair (&m, "<svg onload=alert(3)>", now);
    int attempt = store_pair_dispatch (store, pair, "<img src=x onerror=alert(2)>", now);
    int failed;
    ck_assert (store_pair_failure (store, pair, attempt, "<img src=x onerror=alert(2)>",
                                   "</td><script>alert(4)</script>\xff\xfe", 1, now, &failed)
               == 0);
    ck_assert (store_commit (store, err, sizeof err) == 0);
    store_destroy (&store);

    struct {
        const char *query;
        int status;
    } cases[] = {
        {"exp=<script>alert(1)</script>", 400},      // a '/': no experiment's name
        {"exp=%3Cscript%3Ealert(1)%3C%2Fscript%3E", 400},
        // Names a directory may have, so the farm takes them: none here.
        {"exp=exp1%27%20OR%20%271%27%3D%271", 404},    // exp1' OR '1'='1
        {"exp=exp1;DROP%20TABLE%20pairs", 404},
        {"exp=exp1%22%3E%3Cb%3E", 404},
        {"exp=../etc", 400},
        {"exp=..", 400},
        {"exp=", 400},
        {"exp", 400},
        {"exp=a%00b", 400},
        {"exp=a%zz", 400},
        {"exp=a%C0%AF", 400},                        // overlong UTF-8
        {"exp=exp1&exp=exp1", 400},
        {"format=xml", 400},
        {"format=json&format=json", 400},
        {"<script>=1", 400},
        {"debug=1", 400},
        {"exp1%20OR%201%3D1", 400},
        {"exp=exp1%20OR%201%3D1", 404},              // a fine name, no such experiment
        {"exp=exp1", 200},
        {"exp=exp1&format=json", 200},
        {"&&exp=exp1&", 200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status;
        const char *body = s_cgi (cases[i].query, &status);
        ck_assert_msg (status == cases[i].status, "'%s': %d, not %d", cases[i].query, status,
                       cases[i].status);
        ck_assert_msg (!strstr (body, "<script") && !strstr (body, "<b>"), "'%s' echoed: %.300s",
                       cases[i].query, body);
    }
    // A value of 100 kB, and a name over 255 bytes.
    char *huge = malloc (100001);
    memset (huge, 'a', 100000);
    memcpy (huge, "exp=", 4);
    huge[100000] = '\0';
    int status;
    s_cgi (huge, &status);
    ck_assert_int_eq (status, 400);
    huge[4 + 256] = '\0';
    s_cgi (huge, &status);
    ck_assert_int_eq (status, 400);
    free (huge);
    s_cgi_method ("POST", "", &status);
    ck_assert_int_eq (status, 405);

    // The store's markup is shown as text, never as markup.
    const char *html = s_cgi ("", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_msg (!strstr (html, "<script") && !strstr (html, "<img") && !strstr (html, "<svg o")
                       && !strstr (html, "<b>\"") && !strstr (html, "</td><script"),
                   "markup from the store reached the page");
    ck_assert (strstr (html, "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;") != NULL);
    ck_assert (strstr (html, "&lt;/td&gt;&lt;script&gt;alert(4)&lt;/script&gt;\xEF\xBF\xBD") != NULL);
    // Its link is percent-encoded.
    ck_assert (strstr (html, "href=\"?exp=%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%27%26\"")
               != NULL);
    // The JSON gives the strings back exactly (invalid UTF-8 as U+FFFD).
    jdoc_t *doc = s_cgi_json ("format=json");
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[2].experiment"), evil);
    ck_assert_str_eq (jdoc_string (doc, "$.failures[0].error"),
                      "</td><script>alert(4)</script>\xEF\xBF\xBD\xEF\xBF\xBD");
    jdoc_destroy (&doc);
    const char *body = s_cgi ("format=json", &status);
    ck_assert (!strstr (body, "<script") && !strstr (body, "<img"));
}
END_TEST

// Issue 23: a script that asks for JSON reads JSON whatever went wrong
// (before, a bad query was answered with an HTML page); a scraper reads
// text; a browser HTML.
START_TEST (errors_come_back_in_the_format_asked_for)
{
    s_make_store (s_now_ns ());
    const struct {
        const char *method, *query;
        int status;
        const char *type;
    } cases[] = {
        {"GET", "format=json&exp=..", 400, "application/json; charset=utf-8"},
        {"GET", "exp=%zz&format=json", 400, "application/json; charset=utf-8"},
        {"GET", "format=json&format=json", 400, "application/json; charset=utf-8"},
        {"GET", "format=json&color=red", 400, "application/json; charset=utf-8"},
        {"GET", "exp=nosuch&format=json", 404, "application/json; charset=utf-8"},
        {"POST", "format=json", 405, "application/json; charset=utf-8"},
        {"GET", "format=prometheus&color=red", 400, "text/plain; version=0.0.4; charset=utf-8"},
        {"GET", "exp=..", 400, "text/html; charset=utf-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status;
        const char *body = s_cgi_method (cases[i].method, cases[i].query, &status);
        char type[128];
        snprintf (type, sizeof type, "\r\nContent-Type: %s\r\n", cases[i].type);
        ck_assert_msg (status == cases[i].status && strstr (s_out, type), "%s '%s': %.300s",
                       cases[i].method, cases[i].query, s_out);
        if (strstr (cases[i].type, "json")) {
            char err[256];
            jdoc_t *doc = jdoc_parse (body, err, sizeof err);
            ck_assert_msg (doc != NULL, "'%s': %s: %.300s", cases[i].query, err, body);
            ck_assert_int_eq (atoi (jdoc_string (doc, "$.status")), cases[i].status);
            ck_assert (strlen (jdoc_string (doc, "$.error")) > 10);
            jdoc_destroy (&doc);
        }
    }
}
END_TEST

START_TEST (a_missing_store_or_configuration_is_a_clear_error_page)
{
    int status;
    setenv ("PIVFARM_CONF", tu_path (s_dir, "none.conf"), 1);
    setenv ("REQUEST_METHOD", "GET", 1);
    setenv ("QUERY_STRING", "", 1);
    char *argv[] = {(char *) tu_bin ("pivfarm.cgi"), NULL};
    ck_assert_int_eq (tu_run (argv, s_out, S_OUT, 30), 0);
    ck_assert_msg (strncmp (s_out, "Status: 500", 11) == 0, "%.300s", s_out);
    // No store yet (no broker has run): the page, with its banner, not a 503.
    const char *body = s_cgi ("", &status);
    ck_assert_int_eq (status, 200);
    ck_assert (strstr (body, "No store yet") && strstr (body, "farm.db") != NULL);
    body = s_cgi ("format=json", &status);
    ck_assert_int_eq (status, 200);
    ck_assert (strstr (body, "\"warnings\":[{\"level\":\"warning\",\"message\":\"No store yet"));
}
END_TEST

// ---------------------------------------------------------------------------
// End to end: farm, lighttpd, Chromium

static const char *
s_which (const char *program)
{
    static char found[4][4096];
    static int next;
    const char *dirs[] = {"/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char *path = found[next];
        snprintf (path, sizeof found[0], "%s/%s", dirs[i], program);
        if (access (path, X_OK) == 0) {
            next = (next + 1) % 4;
            return path;
        }
    }
    return NULL;
}

// chromium and lighttpd, installed through deploy/deps.sh when missing;
// 0 with the reason when they are not there and cannot be.
static int
s_have_browser_and_server (char *why, size_t size)
{
    if (s_which ("chromium") && s_which ("lighttpd"))
        return 1;
    char deps[4096];
    snprintf (deps, sizeof deps, "%s/../deploy/deps.sh", tu_bin (""));
    char *argv[] = {"/bin/sh", deps, NULL};
    int rc = tu_run (argv, s_out, S_OUT, 900);
    if (s_which ("chromium") && s_which ("lighttpd"))
        return 1;
    snprintf (why, size, "chromium or lighttpd missing and %.200s could not install them (%d): %.300s",
              deps, rc, s_out);
    return 0;
}

static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ck_assert (fd >= 0 && bind (fd, (struct sockaddr *) &a, sizeof a) == 0);
    ck_assert (getsockname (fd, (struct sockaddr *) &a, &len) == 0);
    close (fd);
    return ntohs (a.sin_port);
}

static int
s_port_open (int port)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons ((uint16_t) port)};
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    int ok = connect (fd, (struct sockaddr *) &a, sizeof a) == 0;
    close (fd);
    return ok;
}

// Runs headless Chromium on url with 'mode' (--dump-dom or --screenshot=...)
// in a window of 'size' ("1400,1100").
static const char *
s_chromium_sized (const char *mode, const char *url, const char *size)
{
    char profile[4200];
    snprintf (profile, sizeof profile, "--user-data-dir=%s/chromium", s_dir);
    char window[64];
    snprintf (window, sizeof window, "--window-size=%s", size);
    char *argv[] = {(char *) s_which ("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", profile,
                    window, (char *) mode, (char *) url, NULL};
    int rc = tu_run (argv, s_out, S_OUT, 120);
    ck_assert_msg (rc == 0, "chromium %s %s: %d: %.500s", mode, url, rc, s_out);
    return s_out;
}

static const char *
s_chromium (const char *mode, const char *url)
{
    return s_chromium_sized (mode, url, "1400,1100");
}

// A screenshot of 'url' by the browser into the test's directory as
// 'name', which must be a PNG; also into 'keep' when it names a file (for a
// look at the page).
static void
s_screenshot (const char *url, const char *name, const char *keep)
{
    char shot[4200];
    snprintf (shot, sizeof shot, "--screenshot=%s/%s", s_dir, name);
    s_chromium (shot, url);
    size_t len = 0;
    char *png = tu_slurp (tu_path (s_dir, name), &len);
    ck_assert_msg (png && len > 1000 && memcmp (png, "\x89PNG", 4) == 0, "no PNG (%zu bytes)",
                   len);
    free (png);
    if (keep && *keep) {
        snprintf (shot, sizeof shot, "--screenshot=%s", keep);
        s_chromium (shot, url);
    }
}

// lighttpd through deploy/dashboard.sh, on a free port, as s_farm.others[0]:
// the port.
static int
s_serve (void)
{
    int port = s_free_port ();
    char port_text[16], script[4200];
    snprintf (port_text, sizeof port_text, "%d", port);
    snprintf (script, sizeof script, "%s/../deploy/dashboard.sh", tu_bin (""));
    char *server[] = {"/bin/sh", script, "-c", s_farm.conf, "-p", port_text, "-d",
                      (char *) tu_path (s_dir, "web"), NULL};
    // The script execs lighttpd: this pid is the server's.
    s_farm.others[0] = tu_spawn (server, tu_path (s_dir, "lighttpd.log"));
    for (int i = 0; i < 100 && !s_port_open (port); i++)
        usleep (50000);
    ck_assert_msg (s_port_open (port), "lighttpd did not start: %.500s",
                   tu_slurp (tu_path (s_dir, "lighttpd.log"), NULL));
    return port;
}

START_TEST (a_browser_shows_the_live_farm_served_by_lighttpd)
{
    char why[1024];
    if (!s_have_browser_and_server (why, sizeof why)) {
        printf ("test_dashboard: skipped the browser test: %s\n", why);
        return;
    }
    // The farm, as test_farm runs it, with a real PIV agent.
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "node-a");
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "node-b");
    tu_farm_render (&s_farm, 4, "p");
    tu_farm_land (&s_farm, "p", 1, 4, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 4, 120);
    ck_assert_msg (c.done == 4, "%lld pairs done (see broker.log)", (long long) c.done);
    // And an experiment named as a camera PC may name one (issue 23).
    ck_assert (mkdir (tu_path (s_dir, "data/run(7) a&b"), 0755) == 0);
    for (int side = 0; side < 2; side++) {
        size_t len;
        char *bytes = tu_slurp (tu_path (s_dir, side ? "src/p_0001_b.tif" : "src/p_0001_a.tif"), &len);
        ck_assert (bytes != NULL);
        tu_spit (tu_path (s_dir, side ? "data/run(7) a&b/p_b.tif" : "data/run(7) a&b/p_a.tif"),
                 bytes, len);
        free (bytes);
    }
    for (int i = 0; i < 600 && tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE state = 2") < 5;
         i++)
        usleep (100000);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE state = 2"), 5);

    int port = s_serve ();

    char url[256];
    snprintf (url, sizeof url, "http://127.0.0.1:%d/", port);
    const char *dom = s_chromium ("--dump-dom", url);
    ck_assert_msg (strstr (dom, "id=\"agents\"") && strstr (dom, "node-a")
                       && strstr (dom, "node-b"),
                   "no agents in the page: %.1000s", dom);
    ck_assert_int_eq (s_count (dom, "<span class=\"pill ok\">alive</span>"), 2);
    ck_assert (strstr (dom, "<b>4</b> / 4 done") != NULL);
    ck_assert (strstr (dom, "broker-unreachable") == NULL);
    // Its link, as the browser follows it, opens its page.
    ck_assert_msg (strstr (dom, "href=\"?exp=run%287%29%20a%26b\"") != NULL, "no link: %.1000s", dom);
    snprintf (url, sizeof url, "http://127.0.0.1:%d/?exp=run%%287%%29%%20a%%26b", port);
    dom = s_chromium ("--dump-dom", url);
    ck_assert_msg (strstr (dom, "<span class=\"crumb\">/ run(7) a&amp;b</span>")
                       && strstr (dom, "<svg class=\"quiver\""),
                   "not its page: %.1000s", dom);

    // The experiment's page: one arrow per vector shown, as many as the
    // latest field in the store has (thinned).
    snprintf (url, sizeof url, "http://127.0.0.1:%d/?exp=exp1", port);
    dom = s_chromium ("--dump-dom", url);
    ck_assert_msg (strstr (dom, "<svg class=\"quiver\"") != NULL, "no quiver: %.1000s", dom);
    const char *shown = strstr (dom, "data-vectors=\"");
    ck_assert (shown != NULL);
    int vectors = atoi (shown + strlen ("data-vectors=\""));
    ck_assert_int_gt (vectors, 100);
    ck_assert_int_eq (s_count (dom, "class=\"arrow\""), vectors);
    jdoc_t *doc = s_cgi_json ("exp=exp1&format=json");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.field.shown"), vectors);
    ck_assert (jdoc_bool (doc, 0, "$.broker.reachable") == 1);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].done"), 4);
    jdoc_destroy (&doc);

    // Kept for a look when PIVFARM_DASHBOARD_SHOT names a file.
    s_screenshot (url, "page.png", getenv ("PIVFARM_DASHBOARD_SHOT"));
    // Everyone stops cleanly.
    // lighttpd 1.4.69 exits 1 on SIGTERM now and then (1 in 40): that it
    // stops on SIGTERM (not killed after the wait: 128 + 9) is what counts.
    ck_assert_int_lt (tu_stop (s_farm.others[0], SIGTERM, 10), 128);
    ck_assert_int_eq (tu_stop (s_farm.watcher, SIGTERM, 10), 0);
    ck_assert_int_eq (tu_stop (s_farm.agents[0], SIGTERM, 10), 0);
    ck_assert_int_eq (tu_stop (s_farm.agents[1], SIGTERM, 10), 0);
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    memset (s_farm.agents, 0, sizeof s_farm.agents);
    s_farm.others[0] = s_farm.watcher = s_farm.broker = 0;
}
END_TEST

// ---------------------------------------------------------------------------
// Prometheus metrics (?format=prometheus, /metrics)

// Runs the CGI for the metrics; the body, its headers checked: 200 and the
// text exposition format's content type.
static const char *
s_metrics (void)
{
    int status;
    const char *body = s_cgi ("format=prometheus", &status);
    ck_assert_msg (status == 200, "status %d: %.300s", status, body);
    ck_assert_msg (strstr (s_out, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n")
                       != NULL,
                   "not the exposition format's type: %.300s", s_out);
    return body;
}

// promtool, installed through deploy/deps.sh (Debian's prometheus) when
// missing.
static const char *
s_promtool (void)
{
    if (s_which ("promtool"))
        return s_which ("promtool");
    char deps[4096];
    snprintf (deps, sizeof deps, "%s/../deploy/deps.sh", tu_bin (""));
    char *argv[] = {"/bin/sh", deps, NULL};
    int rc = tu_run (argv, s_out, S_OUT, 900);
    ck_assert_msg (s_which ("promtool") != NULL,
                   "promtool missing and %s could not install it (%d): %.300s (make deps)", deps,
                   rc, s_out);
    return s_which ("promtool");
}

// 'promtool check metrics' on 'text' must exit 0 and print nothing: no
// format error, no lint problem (names, units, HELP, _total on counters).
static void
s_promtool_clean (const char *text)
{
    const char *file = tu_path (s_dir, "metrics.txt");
    tu_spit (file, text, strlen (text));
    char cmd[8400];
    snprintf (cmd, sizeof cmd, "exec %s check metrics < '%s'", s_promtool (), file);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    char out[8192];
    int rc = tu_run (argv, out, sizeof out, 60);
    ck_assert_msg (rc == 0 && out[0] == '\0', "promtool check metrics: %d: %s\n%.2000s", rc, out,
                   text);
}

// The value of the sample whose line starts with 'series' ("name{labels}"
// exactly, or "name"); NAN when there is none.
static double
s_sample (const char *text, const char *series)
{
    size_t n = strlen (series);
    for (const char *line = text; line && *line;
         line = strchr (line, '\n'), line = line ? line + 1 : NULL)
        if (strncmp (line, series, n) == 0 && line[n] == ' ')
            return strtod (line + n + 1, NULL);
    return NAN;
}

// Every pair-state gauge of exp1 equals the store's count.
static void
s_pairs_match_store (const char *text)
{
    const char *states[] = {"pending", "dispatched", "done", "failed", "skipped"};
    for (int s = 0; s < 5; s++) {
        char series[256];
        snprintf (series, sizeof series, "pivfarm_pairs{experiment=\"exp1\",state=\"%s\"}",
                  states[s]);
        int64_t store = tu_farm_sql (&s_farm,
                                     "SELECT count(*) FROM pairs p JOIN experiments e ON "
                                     "e.id = p.experiment WHERE e.name = 'exp1' AND p.state = %d",
                                     s);
        ck_assert_msg (s_sample (text, series) == (double) store, "%s: %g, the store says %lld",
                       series, s_sample (text, series), (long long) store);
    }
}

// GET path from lighttpd on 127.0.0.1:port: the whole response (headers
// and body) into s_out.
static const char *
s_http_get (int port, const char *path)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons ((uint16_t) port)};
    a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    ck_assert (fd >= 0 && connect (fd, (struct sockaddr *) &a, sizeof a) == 0);
    char request[512];
    int len = snprintf (request, sizeof request,
                        "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    ck_assert (write (fd, request, (size_t) len) == len);
    size_t got = 0;
    ssize_t n;
    while (got < S_OUT - 1 && (n = read (fd, s_out + got, S_OUT - 1 - got)) > 0)
        got += (size_t) n;
    s_out[got] = '\0';
    close (fd);
    return s_out;
}

// The broker, the watcher and 'agents' agents node-a, node-b, ...; 'pairs'
// pairs p_0001 ... landed (placeholders for the noop processor if 'fake',
// else rendered) and done.
static void
s_live_farm (int agents, int pairs, int fake)
{
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    for (int i = 0; i < agents; i++) {
        char id[16], log[32];
        snprintf (id, sizeof id, "node-%c", 'a' + i);
        snprintf (log, sizeof log, "agent%d.log", i + 1);
        s_farm.agents[i] = tu_farm_start (&s_farm, "pivfarm-agent", log, "--id", id);
    }
    if (fake)
        tu_farm_fake (&s_farm, pairs, "p");
    else
        tu_farm_render (&s_farm, pairs, "p");
    tu_farm_land (&s_farm, "p", 1, pairs, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, pairs, 120);
    ck_assert_msg (c.done == pairs, "%lld pairs done (see broker.log)", (long long) c.done);
}

START_TEST (metrics_of_a_live_farm_pass_promtool_and_match_the_store)
{
    s_promtool ();
    s_live_farm (2, 4, 0);
    // Both agents have introduced themselves (the broker lists them).
    jdoc_t *doc = NULL;
    for (int i = 0; i < 100; i++) {
        jdoc_destroy (&doc);
        doc = s_cgi_json ("format=json");
        if (jdoc_length (doc, "$.agents") == 2 && jdoc_bool (doc, 0, "$.agents[1].alive") == 1)
            break;
        usleep (100000);
    }
    jdoc_destroy (&doc);

    char *text = strdup (s_metrics ());
    s_promtool_clean (text);
    ck_assert (strstr (text, "# HELP pivfarm_pairs ")
               && strstr (text, "# TYPE pivfarm_pairs gauge\n"));
    ck_assert (strstr (text, "# TYPE pivfarm_latency_seconds histogram\n") != NULL);
    ck_assert (s_sample (text, "pivfarm_broker_up") == 1);
    s_pairs_match_store (text);
    ck_assert (s_sample (text, "pivfarm_pairs{experiment=\"exp1\",state=\"done\"}") == 4);
    ck_assert (s_sample (text, "pivfarm_files{experiment=\"exp1\"}") == 8);
    ck_assert (s_sample (text, "pivfarm_queue_pairs{experiment=\"exp1\"}") == 0);
    ck_assert (s_sample (text, "pivfarm_results_total") == 4);
    // Agents: both alive, their tasks and results as the broker has them.
    ck_assert (s_sample (text, "pivfarm_agents_alive") == 2);
    int64_t store_agents = tu_farm_sql (&s_farm, "SELECT count(*) FROM agents");
    ck_assert_int_eq (store_agents, 2);
    char host[256];
    gethostname (host, sizeof host);
    double done = 0;
    for (int i = 0; i < 2; i++) {
        char series[512];
        snprintf (series, sizeof series, "pivfarm_agent_tasks{agent=\"node-%c\",host=\"%s\"}",
                  'a' + i, host);
        ck_assert_msg (s_sample (text, series) == 0, "%s in\n%s", series, text);
        snprintf (series, sizeof series,
                  "pivfarm_agent_results_total{agent=\"node-%c\",host=\"%s\"}", 'a' + i, host);
        done += s_sample (text, series);
    }
    ck_assert (done == 4);
    // The latency histogram: the 4 results, cumulative buckets ending at them.
    ck_assert (s_sample (text, "pivfarm_latency_seconds_count{experiment=\"exp1\"}") == 4);
    ck_assert (s_sample (text, "pivfarm_latency_seconds_bucket{experiment=\"exp1\",le=\"+Inf\"}")
               == 4);
    ck_assert (s_sample (text, "pivfarm_latency_seconds_bucket{experiment=\"exp1\",le=\"300\"}")
               == 4);
    ck_assert (s_sample (text, "pivfarm_latency_seconds_sum{experiment=\"exp1\"}") > 0);
    ck_assert (s_sample (text, "pivfarm_latency_p99_seconds{experiment=\"exp1\"}") > 0);
    // The store's size, the volumes' free space.
    struct stat st;
    ck_assert (stat (tu_path (s_dir, "farm.db"), &st) == 0);
    ck_assert (s_sample (text, "pivfarm_store_size_bytes") >= (double) st.st_size);
    ck_assert (strstr (text, "pivfarm_volume_free_bytes{volume=\"results\",path=\"") != NULL);
    ck_assert (strstr (text, "pivfarm_warnings{kind=\"space\",level=\"critical\"} 0\n") != NULL);
    free (text);

    // Through lighttpd: /metrics is the same.
    if (s_which ("lighttpd")) {
        int port = s_serve ();
        const char *response = s_http_get (port, "/metrics");
        ck_assert_msg (strncmp (response, "HTTP/1.0 200", 12) == 0, "%.500s", response);
        ck_assert (strstr (response, "\r\nContent-Type: text/plain; version=0.0.4") != NULL);
        const char *body = strstr (response, "\r\n\r\n");
        ck_assert (body != NULL);
        text = strdup (body + 4);
        s_promtool_clean (text);
        ck_assert (s_sample (text, "pivfarm_broker_up") == 1);
        ck_assert (s_sample (text, "pivfarm_agents_alive") == 2);
        s_pairs_match_store (text);
        free (text);
        // A view of one experiment has no metrics of its own.
        response = s_http_get (port, "/metrics?exp=exp1");
        ck_assert_msg (strncmp (response, "HTTP/1.0 400", 12) == 0, "%.500s", response);
        // Its exit status is not asserted: lighttpd 1.4.69 exits 1 on SIGTERM
        // now and then (1 in 40 with the configuration before /metrics too).
        tu_stop (s_farm.others[0], SIGTERM, 10);
        s_farm.others[0] = 0;
    }
    else
        printf ("test_dashboard: lighttpd missing, /metrics not fetched through it\n");

    // The broker stops: the store's figures still, pivfarm_broker_up 0, no
    // figure only the broker knows.
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    text = strdup (s_metrics ());
    s_promtool_clean (text);
    ck_assert (s_sample (text, "pivfarm_broker_up") == 0);
    s_pairs_match_store (text);
    ck_assert (strstr (text, "pivfarm_latency_seconds") == NULL);
    ck_assert (strstr (text, "pivfarm_agents_alive") == NULL);
    ck_assert (strstr (text, "pivfarm_results_total") == NULL);
    ck_assert (strstr (text, "pivfarm_volume_free_bytes{volume=\"store\"") != NULL);
    free (text);
}
END_TEST

// Issue 28: what an admin alerts on beyond the farm's figures: dispatch
// paused by the free-space guard (and for which volume), peers' clocks, the
// store locked by another process, the size of its write-ahead log.
START_TEST (metrics_say_what_the_guard_pauses_how_far_clocks_are_off_and_how_busy_the_store_is)
{
    s_promtool ();
    // Every volume is short of space when 100% must stay free.
    tu_farm_conf (&s_farm, "noop", 1, "32",
                  "storage\n    guard_ms = 200\n    warn_free = 100%\n    critical_free = 100%\n");
    tu_farm_start_broker (&s_farm);
    // An agent 5 s ahead, as its heartbeats say.
    zsock_t *agent = zsock_new (ZMQ_DEALER);
    ck_assert (agent && zsock_connect (agent, "ipc://%s/work", s_dir) == 0);
    proto_msg_t hello = {.command = PROTO_HELLO, .name = "skewed", .text = "node9", .count = 1,
                         .settings = "noop"};
    ck_assert_int_eq (proto_send (&hello, NULL, agent), 0);
    const char *skew_series = "pivfarm_clock_skew_seconds{peer=\"agent 'skewed' on node9\"}";
    char *text = NULL;
    for (int i = 0; i < 100; i++) {
        proto_msg_t beat = {.command = PROTO_HEARTBEAT, .time_ns = s_now_ns () + 5000000000LL};
        ck_assert_int_eq (proto_send (&beat, NULL, agent), 0);
        free (text);
        text = strdup (s_metrics ());
        if (s_sample (text, skew_series) > 4)
            break;
        usleep (100000);
    }
    s_promtool_clean (text);
    double skew = s_sample (text, skew_series);
    ck_assert_msg (skew > 4 && skew < 5.1, "%s: %g in\n%.2000s", skew_series, skew, text);
    // The guard pauses dispatch for the results and the store volumes,
    // never for the watch root (frames are only read there).
    char series[8192];
    snprintf (series, sizeof series, "pivfarm_guard_paused{volume=\"results\",path=\"%s\"}",
              tu_path (s_dir, "results"));
    ck_assert_msg (s_sample (text, series) == 1, "%s: %g in\n%.2000s", series, s_sample (text, series),
                   text);
    ck_assert_msg (strstr (text, "pivfarm_guard_paused{volume=\"store\",path=\"") != NULL
                       && strstr (text, "pivfarm_guard_paused{volume=\"watch root\"") == NULL,
                   "%.2000s", text);
    ck_assert (strstr (text, "# TYPE pivfarm_guard_paused gauge\n") != NULL);
    ck_assert (s_sample (text, "pivfarm_store_busy_total") == 0);
    free (text);
    // The WAL's size, as the file is before and after the page looks.
    struct stat st;
    double before = stat (tu_path (s_dir, "farm.db-wal"), &st) == 0 ? (double) st.st_size : 0;
    text = strdup (s_metrics ());
    double after = stat (tu_path (s_dir, "farm.db-wal"), &st) == 0 ? (double) st.st_size : 0;
    double wal = s_sample (text, "pivfarm_store_wal_bytes");
    ck_assert_msg (wal == before || wal == after, "pivfarm_store_wal_bytes %g, the file %g", wal,
                   after);
    free (text);
    zsock_destroy (&agent);

    // Another process holds the store's write lock while an operator
    // changes the rate: the broker finds it busy, refuses the change, and
    // counts it.
    sqlite3 *db = NULL;
    ck_assert_int_eq (sqlite3_open (tu_path (s_dir, "farm.db"), &db), SQLITE_OK);
    ck_assert_int_eq (sqlite3_exec (db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    char *argv[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "rate", "5", NULL};
    s_farm.others[0] = tu_spawn (argv, tu_path (s_dir, "pivctl.log"));
    int rc = tu_stop (s_farm.others[0], 0, 30);
    s_farm.others[0] = 0;
    sqlite3_exec (db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close (db);
    char *said = tu_slurp (tu_path (s_dir, "pivctl.log"), NULL);
    ck_assert_msg (rc != 0 && said && strstr (said, "is locked by another process"),
                   "pivctl rate 5 under a lock: %d: %s", rc, said ? said : "");
    free (said);
    text = strdup (s_metrics ());
    s_promtool_clean (text);
    ck_assert_msg (s_sample (text, "pivfarm_store_busy_total") >= 1, "%.2000s", text);
    free (text);

    // The broker stopped: nothing but the store's own figures.
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    text = strdup (s_metrics ());
    s_promtool_clean (text);
    ck_assert (strstr (text, "pivfarm_guard_paused") == NULL
               && strstr (text, "pivfarm_clock_skew_seconds") == NULL
               && strstr (text, "pivfarm_store_busy_total") == NULL);
    ck_assert (s_sample (text, "pivfarm_store_wal_bytes") >= 0);
    free (text);
}
END_TEST

// deploy/prometheus/<name> in the source tree.
static const char *
s_rules (const char *name)
{
    static char path[2][4096];
    static int next;
    char *slot = path[next++ % 2];
    snprintf (slot, 4096, "%s/../deploy/prometheus/%s", tu_bin (""), name);
    return slot;
}

// Runs 'promtool ARGS' (a shell line); its status, its output in 'out'.
static int
s_promtool_run (char *out, size_t len, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
static int
s_promtool_run (char *out, size_t len, const char *fmt, ...)
{
    char args[8192], cmd[9000];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (args, sizeof args, fmt, ap);
    va_end (ap);
    snprintf (cmd, sizeof cmd, "exec %s %s 2>&1", s_promtool (), args);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return tu_run (argv, out, len, 120);
}

// The families ("# TYPE name") of a page of metrics appended to 'names'
// (" name name ... ").
static void
s_families (const char *text, char *names, size_t size)
{
    for (const char *at = strstr (text, "# TYPE "); at; at = strstr (at + 1, "# TYPE ")) {
        const char *end = strchr (at + 7, ' ');
        if (end)
            snprintf (names + strlen (names), size - strlen (names), "%.*s ",
                      (int) (end - at - 7), at + 7);
    }
}

// A promtool unit test over the samples of 'text' (a page of metrics), as
// Prometheus would have scraped them for 10 min from instance "page" of
// job "pivfarm": at 5 min, PivfarmBrokerDown fires ('down') or not, and
// PivfarmNoAgent does not. Its path.
static const char *
s_rules_test_of (const char *text, int down, const char *name)
{
    static char buf[1 << 18];
    size_t n = (size_t) snprintf (buf, sizeof buf,
                                  "rule_files:\n  - '%s'\nevaluation_interval: 1m\ntests:\n"
                                  "  - interval: 1m\n    input_series:\n",
                                  s_rules ("pivfarm.rules.yml"));
    for (const char *line = text; *line;) {
        const char *eol = strchr (line, '\n');
        size_t len = eol ? (size_t) (eol - line) : strlen (line);
        const char *space = memrchr (line, ' ', len);
        if (*line != '#' && space) {
            // name{instance="page",job="pivfarm",labels...} with ' as '' (YAML).
            const char *brace = memchr (line, '{', (size_t) (space - line));
            size_t name_len = brace ? (size_t) (brace - line) : (size_t) (space - line);
            n += (size_t) snprintf (buf + n, sizeof buf - n, "      - series: '%.*s{instance=\"page\","
                                    "job=\"pivfarm\"%s", (int) name_len, line, brace ? "," : "}");
            for (const char *c = brace ? brace + 1 : space; c < space && n < sizeof buf - 8; c++) {
                if (*c == '\'')
                    buf[n++] = '\'';
                buf[n++] = *c;
            }
            n += (size_t) snprintf (buf + n, sizeof buf - n, "'\n        values: '%.*sx10'\n",
                                    (int) (len - (size_t) (space - line) - 1), space + 1);
        }
        line += len + (eol ? 1 : 0);
    }
    n += (size_t) snprintf (buf + n, sizeof buf - n,
                            "    alert_rule_test:\n"
                            "      - eval_time: 5m\n        alertname: PivfarmNoAgent\n"
                            "        exp_alerts: []\n"
                            "      - eval_time: 5m\n        alertname: PivfarmBrokerDown\n");
    if (down)
        n += (size_t) snprintf (buf + n, sizeof buf - n,
                                "        exp_alerts:\n"
                                "          - exp_labels: {severity: critical, instance: page, "
                                "job: pivfarm}\n"
                                "            exp_annotations:\n"
                                "              summary: 'pivfarm broker down (page)'\n"
                                "              description: 'The status page at page gets no "
                                "answer from the broker for 1 min: no pair is dispatched or "
                                "recorded. journalctl -u pivfarm-broker; systemctl status "
                                "pivfarm-broker.'\n");
    else
        n += (size_t) snprintf (buf + n, sizeof buf - n, "        exp_alerts: []\n");
    ck_assert (n < sizeof buf);
    const char *path = tu_path (s_dir, name);
    tu_spit (path, buf, n);
    return path;
}

START_TEST (the_alert_rules_pass_promtool_and_the_broker_down_alert_fires_on_a_stopped_broker_s_page)
{
    static char out[1 << 16];
    // The shipped rules and their unit tests.
    int rc = s_promtool_run (out, sizeof out, "check rules '%s'", s_rules ("pivfarm.rules.yml"));
    ck_assert_msg (rc == 0 && strstr (out, "SUCCESS"), "promtool check rules: %d: %s", rc, out);
    rc = s_promtool_run (out, sizeof out, "test rules '%s'", s_rules ("pivfarm.rules.test.yml"));
    ck_assert_msg (rc == 0 && strstr (out, "SUCCESS"), "promtool test rules: %d: %s", rc, out);

    // A live farm's page, the broker running, then stopped.
    tu_farm_conf (&s_farm, "noop", 1, "32", "");
    s_live_farm (1, 3, 1);
    char *up = NULL;
    for (int i = 0; i < 100; i++) {
        free (up);
        up = strdup (s_metrics ());
        if (strstr (up, "pivfarm_clock_skew_seconds{") && s_sample (up, "pivfarm_agents_alive") == 1)
            break;
        usleep (100000);
    }
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    char *down = strdup (s_metrics ());
    // Every metric the rules name is one the page serves.
    static char families[1 << 14];
    families[0] = ' ';
    families[1] = '\0';
    s_families (up, families, sizeof families);
    s_families (down, families, sizeof families);
    char *rules = tu_slurp (s_rules ("pivfarm.rules.yml"), NULL);
    ck_assert_ptr_nonnull (rules);
    for (const char *at = strstr (rules, "expr: "); at; at = strstr (at + 1, "expr: ")) {
        const char *eol = strchr (at, '\n');
        for (const char *m = strstr (at, "pivfarm_"); m && m < eol; m = strstr (m + 1, "pivfarm_")) {
            char name[128];
            size_t len = strspn (m, "abcdefghijklmnopqrstuvwxyz0123456789_");
            snprintf (name, sizeof name, " %.*s ", (int) len, m);
            char *suffix = strstr (name, "_bucket ");
            if (suffix)
                strcpy (suffix, " ");  // a histogram's series: its family
            ck_assert_msg (strstr (families, name) != NULL,
                           "the rules name%sbut the page serves no such family:%s", name,
                           families);
            m += len - 1;
        }
    }
    free (rules);
    // The alert fires on the stopped broker's page, not on the running one's.
    rc = s_promtool_run (out, sizeof out, "test rules '%s'", s_rules_test_of (down, 1, "down.yml"));
    ck_assert_msg (rc == 0, "promtool test rules, the broker stopped: %d: %.4000s", rc, out);
    rc = s_promtool_run (out, sizeof out, "test rules '%s'", s_rules_test_of (up, 0, "up.yml"));
    ck_assert_msg (rc == 0, "promtool test rules, the broker running: %d: %.4000s", rc, out);
    free (up);
    free (down);
}
END_TEST

START_TEST (metric_labels_are_escaped_and_the_store_alone_suffices)
{
    int64_t now = s_now_ns ();
    s_make_store (now);
    char err[512];
    store_t *store = store_new (tu_path (s_dir, "farm.db"), STORE_DURABILITY_NORMAL, err,
                                sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    // Names with what the exposition format must escape.
    s_maker_t m = {.store = store, .exp = store_experiment (store, "run \"7\" C:\\data\nx", now)};
    s_pair (&m, "q_0001", now);
    ck_assert (store_agent_seen (store, "agent \"\\", "host", 1, "", now) == 0);
    ck_assert (store_commit (store, err, sizeof err) == 0);
    store_destroy (&store);

    char *text = strdup (s_metrics ());
    s_promtool_clean (text);
    ck_assert (s_sample (text, "pivfarm_broker_up") == 0);
    ck_assert_msg (s_sample (text, "pivfarm_pairs{experiment=\"run \\\"7\\\" C:\\\\data\\nx\","
                                   "state=\"pending\"}")
                       == 1,
                   "%s", text);
    ck_assert (s_sample (text, "pivfarm_pairs{experiment=\"exp1\",state=\"done\"}") == 3);
    ck_assert (s_sample (text, "pivfarm_pairs{experiment=\"exp1\",state=\"failed\"}") == 1);
    ck_assert (s_sample (text, "pivfarm_pairs{experiment=\"exp1\",state=\"skipped\"}") == 1);
    ck_assert (s_sample (text, "pivfarm_pairs{experiment=\"exp1\",state=\"pending\"}") == 1);
    ck_assert (s_sample (text, "pivfarm_files{experiment=\"exp1\"}") == 12);
    // Rates and latency from the log (as the page): 2 results in 10 s; the
    // feedback latencies 10, 30, 20 ms.
    ck_assert (fabs (s_sample (text, "pivfarm_result_rate_per_second{experiment=\"exp1\","
                                     "window=\"10s\"}") - 0.2) < 1e-9);
    ck_assert (fabs (s_sample (text, "pivfarm_latency_median_seconds{experiment=\"exp1\"}")
                     - 0.02) < 1e-9);
    // No agent is known alive; the store alone has no histogram.
    ck_assert (strstr (text, "pivfarm_agent_tasks") == NULL);
    ck_assert (strstr (text, "_bucket") == NULL);
    free (text);

    // One experiment's metrics are refused; a store not made yet (no broker
    // has run) is a broker down, not an error; an unreadable store is a 503
    // in plain text.
    int status;
    s_cgi ("exp=exp1&format=prometheus", &status);
    ck_assert_int_eq (status, 400);
    tu_farm_conf_replace (&s_farm, "./farm.db", "./none/farm.db");
    const char *body = s_cgi ("format=prometheus", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_msg (strstr (body, "pivfarm_broker_up 0") != NULL, "%s", body);
    ck_assert (strstr (body, "pivfarm_pairs{") == NULL);
    tu_farm_conf_replace (&s_farm, "./none/farm.db", "./garbage.db");
    tu_spit (tu_path (s_farm.dir, "garbage.db"), "not a database, not at all, no.\n", 32);
    body = s_cgi ("format=prometheus", &status);
    ck_assert_int_eq (status, 503);
    ck_assert (strstr (s_out, "Content-Type: text/plain; version=0.0.4") != NULL);
    ck_assert_msg (strncmp (body, "503 Service Unavailable: ", 25) == 0
                       && strstr (body, "garbage.db"),
                   "%s", body);
}
END_TEST

// ---------------------------------------------------------------------------
// Measurements: the calibration in force, the run's statistics, vorticity

#define S_CALIB "scale=2.0000000000000002e-05m/px dt=0.002s origin=0,0 y_axis=up"

// A solid rotation on an nx x ny grid (step 16 px): u = -omega (y - yc),
// v = omega (x - xc) px/frame about the grid's centre (12 x 9: 96, 72);
// vorticity 2 omega 1/frame (image axes); the first vector invalid.
static piv_field_t *
s_rotation (int nx, int ny, double omega)
{
    piv_field_t *f = s_field (nx, ny, 0);
    double xc = 8 + 8 * (nx - 1), yc = 8 + 8 * (ny - 1);
    for (int n = 0; n < nx * ny; n++) {
        f->u[n] = (float) (-omega * (f->y[n] - yc));
        f->v[n] = (float) (omega * (f->x[n] - xc));
    }
    return f;
}

// One done pair of experiment m->exp whose result is 'field'; its pair id.
static int64_t
s_done_field (s_maker_t *m, const char *stem, const piv_field_t *field, int64_t t)
{
    int64_t pair = s_pair (m, stem, t - 1000000);
    int attempt = store_pair_dispatch (m->store, pair, "agent-1", t - 500000);
    unsigned char *blob;
    size_t size;
    ck_assert (piv_field_encode (field, &blob, &size) == 0);
    store_result_t r = {.valid_fraction = 1, .nx = field->nx, .ny = field->ny,
                        .compute_ns = 1000, .path = "x.txt", .field = blob, .field_size = size};
    int recorded;
    ck_assert (store_pair_result (m->store, pair, attempt, "agent-1", &r, t, &recorded) == 0);
    free (blob);
    return pair;
}

// Experiment 'name': three rotations (omega 0.01, 0.02, 0.03) done and
// counted in one saved statistics set under 'calibration' (NULL: none),
// which is also the experiment's own setting.
static void
s_rotation_run (store_t *store, const char *name, int nx, int ny, const char *calibration,
                int64_t now)
{
    s_maker_t m = {.store = store};
    m.exp = store_experiment (store, name, now - 60 * (int64_t) 1000000000);
    piv_stats_t *stats = NULL;
    int64_t pairs[3];
    for (int i = 0; i < 3; i++) {
        piv_field_t *f = s_rotation (nx, ny, 0.01 * (i + 1));
        float vorticity[nx * ny];
        ck_assert_int_gt (piv_field_derive (f, &(piv_derived_t){.vorticity = vorticity}), 0);
        if (!stats)
            stats = piv_stats_new (f);
        ck_assert (piv_stats_add (stats, f, vorticity) == 0);
        char stem[32];
        snprintf (stem, sizeof stem, "r_%04d", i + 1);
        pairs[i] = s_done_field (&m, stem, f, now - (3 - i) * (int64_t) 1000000000);
        piv_field_destroy (&f);
    }
    unsigned char *state;
    size_t size;
    ck_assert (piv_stats_encode (stats, &state, &size) == 0);
    store_stats_t st = {.experiment = m.exp, .set = "12x9 step 16 window 32",
                        .settings = "passes=32", .calibration = calibration ? calibration : "none",
                        .fields = 3, .first_pair = pairs[0], .last_pair = pairs[2],
                        .state = state, .state_size = size, .updated_ns = now};
    ck_assert (store_stats_save (store, &st, pairs, 3, now) == 0);
    if (calibration)
        ck_assert (store_setting_set (store, m.exp, "calibration", calibration, now) == 0);
    free (state);
    piv_stats_destroy (&stats);
}

// Rows of the colour map of SVG 'id' in 'html' whose cells stop short of
// 'right' (the plot's right edge, SVG units); -1 without cells.
static int
s_rows_short_of_the_edge (const char *html, const char *id, double right)
{
    char key[128];
    snprintf (key, sizeof key, "id=\"%s\"", id);
    const char *p = strstr (html, key), *end;
    p = p ? strstr (p, "<g class=\"cells\"") : NULL;
    end = p ? strstr (p, "</g>") : NULL;
    if (!end)
        return -1;
    double row_y = NAN, reach = 0;
    int rows = 0, short_rows = 0;
    for (p = strstr (p, "<rect "); p && p < end; p = strstr (p + 1, "<rect ")) {
        double x, y, w;
        ck_assert (sscanf (p, "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\"", &x, &y, &w) == 3);
        if (y != row_y) {
            short_rows += rows && reach < right - 0.5;
            rows++, row_y = y, reach = 0;
        }
        reach = fmax (reach, x + w);
    }
    return rows ? short_rows + (reach < right - 0.5) : -1;
}

START_TEST (the_experiment_page_states_the_units_of_its_calibration)
{
    int64_t now = s_now_ns ();
    char err[512];
    store_t *store = store_new (tu_path (s_dir, "farm.db"), STORE_DURABILITY_NORMAL, err,
                                sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    s_rotation_run (store, "cal", 12, 9, S_CALIB, now);
    s_rotation_run (store, "raw", 12, 9, NULL, now);
    s_rotation_run (store, "wide", 130, 9, NULL, now);
    ck_assert_msg (store_commit (store, err, sizeof err) == 0, "%s", err);
    store_destroy (&store);

    // Calibrated, 0.02 mm/px and 2 ms: 1 px/frame is 0.01 m/s, 1/frame is
    // 500 1/s; y up: y and v change sign, and so does the vorticity.
    jdoc_t *doc = s_cgi_json ("exp=cal&format=json");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.calibration.from"), "experiment");
    ck_assert (jdoc_bool (doc, 0, "$.experiment.calibration.calibrated") == 1);
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.units.velocity"), "m/s");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.units.vorticity"), "1/s");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.units.position"), "m");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.stats.fields"), 3);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.stats.stride"), 1);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.stats.valid_fraction")
                     - (12 * 9 - 1) / (12.0 * 9)) < 1e-9);
    // Point (i 5, j 2): x 88 px, y 40 px; mean omega 0.02: u = -0.02 (40 -
    // 72) = 0.64 px/frame, v = 0.02 (88 - 96) = -0.16 px/frame.
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.stats.x[5]") - 88 * 2e-5) < 1e-12);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.stats.y[2]") + 40 * 2e-5) < 1e-12);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.stats.u_mean[2][5]") - 0.0064) < 1e-7);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.stats.v_mean[2][5]") - 0.0016) < 1e-7);
    ck_assert (jdoc_type_at (doc, "$.experiment.stats.u_mean[0][0]") == JDOC_NULL);
    // The latest field (omega 0.03): vorticity -2 * 0.03 * 500 = -30 1/s
    // wherever the stencil sees no hole.
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.vorticity.unit"), "1/s");
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.vorticity.min") + 30) < 1e-3);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.vorticity.max") + 30) < 1e-3);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.vorticity.values[4][6]") + 30) < 1e-3);
    jdoc_destroy (&doc);
    int status;
    const char *html = s_cgi ("exp=cal", &status);
    ck_assert_int_eq (status, 200);
    ck_assert (strstr (html, "<svg class=\"map\" id=\"mean-field\" data-unit=\"m/s\"") != NULL);
    ck_assert (strstr (html, "<svg class=\"map\" id=\"vorticity\" data-unit=\"1/s\"") != NULL);
    ck_assert_int_eq (s_count (html, "class=\"legend\""), 2);
    ck_assert_int_eq (s_count (html, "class=\"tick-max\""), 3);  // with the latest field's
    ck_assert (strstr (html, "|V| (m/s)") != NULL);
    ck_assert (strstr (html, "\xCF\x89z (1/s)") != NULL);
    ck_assert_int_eq (s_count (html, "x (mm)"), 3);  // the latest field, mean field, vorticity
    ck_assert (strstr (html, "<td class=\"fields\">3</td>") != NULL);
    ck_assert (strstr (html, "<td class=\"valid\">99.1 %</td>") != NULL);
    ck_assert (strstr (html, "0.02 mm/px") != NULL);
    // One arrow per sampled point of the mean field (all but the first).
    ck_assert_int_eq (s_count (html, "class=\"mean-arrow\""), 12 * 9 - 1);

    // Not calibrated: px/frame, 1/frame, axes in px.
    doc = s_cgi_json ("exp=raw&format=json");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.calibration.from"), "none");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.units.velocity"), "px/frame");
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.stats.u_mean[2][5]") - 0.64) < 1e-5);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.vorticity.max") - 0.06) < 1e-6);
    jdoc_destroy (&doc);
    html = s_cgi ("exp=raw", &status);
    ck_assert (strstr (html, "id=\"mean-field\" data-unit=\"px/frame\"") != NULL);
    ck_assert (strstr (html, "id=\"vorticity\" data-unit=\"1/frame\"") != NULL);
    ck_assert_int_eq (s_count (html, "x (px)"), 3);
    ck_assert (strstr (html, "m/s") == NULL);
    ck_assert (strstr (html, "w-card") == NULL); // planar: no out-of-plane card
    ck_assert (strstr (html, "sigma-card") == NULL); // no uncertainty: no such card
    // A grid over 128 points a side: every 2nd point in the JSON; the colour
    // maps average blocks of 3 x 3 points, the last column of blocks one
    // point wide, and still cover every row to the right edge.
    doc = s_cgi_json ("exp=wide&format=json");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.stats.stride"), 2);
    ck_assert_int_eq (jdoc_length (doc, "$.experiment.stats.x"), 65);
    ck_assert_int_eq (jdoc_length (doc, "$.experiment.stats.u_mean[0]"), 65);
    ck_assert_int_eq (jdoc_length (doc, "$.experiment.vorticity.values[0]"), 65);
    jdoc_destroy (&doc);
    html = s_cgi ("exp=wide", &status);
    ck_assert_int_eq (s_rows_short_of_the_edge (html, "mean-field", 64 + 460), 0);

    // The configuration's [calibration] is every experiment's default.
    tu_farm_conf_replace (&s_farm, "piv\n    passes", "calibration\n    scale = 0.02 mm/px\n"
                                                      "    dt = 2 ms\npiv\n    passes");
    doc = s_cgi_json ("exp=raw&format=json");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.calibration.from"), "configuration");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.units.vorticity"), "1/s");
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.vorticity.max") + 30) < 1e-3);
    jdoc_destroy (&doc);
}
END_TEST

// The mean of the finite values of a JSON grid (rows of numbers or null)
// at 'path', and their count in *n.
static double
s_grid_mean (jdoc_t *doc, const char *path, int *n)
{
    double sum = 0;
    *n = 0;
    char row[256];
    int rows = jdoc_length (doc, path);
    for (int j = 0; j < rows; j++) {
        snprintf (row, sizeof row, "%s[%d]", path, j);
        for (int i = 0; i < jdoc_length (doc, row); i++)
            if (jdoc_is_number (doc, "%s[%d]", row, i)) {
                sum += jdoc_number (doc, NAN, "%s[%d]", row, i);
                (*n)++;
            }
    }
    return *n ? sum / *n : NAN;
}

// The broker, saving its statistics every 100 ms.
static void
s_start_broker_saving_stats (void)
{
    tu_farm_conf_replace (&s_farm, "    heartbeat_ms = 200\n",
                          "    heartbeat_ms = 200\n    stats_ms = 100\n");
    tu_farm_start_broker (&s_farm);
}

// The watcher, agent node-a, and n pairs of a solid rotation (0.01 rad a
// frame pair, 256 x 256 px) landed in exp1 as r_0001 ... r_N.
static void
s_land_rotations (int n)
{
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "node-a");
    char count[16];
    snprintf (count, sizeof count, "%d", n);
    char *render[] = {(char *) tu_bin ("pivfarm-synth"), "--size", "256x256", "--count", count,
                      "--flow", "rotation:0.01", "-o", (char *) tu_path (s_dir, "src/r"), NULL};
    ck_assert_msg (tu_run (render, s_out, S_OUT, 60) == 0, "%s", s_out);
    tu_farm_land (&s_farm, "r", 1, n, 0);
}

// The whole chain, calibrated before the first frame: a farm computes a
// solid rotation (omega 0.01 rad/frame, 0.02 mm/px, dt 2 ms: vorticity
// -10 1/s with y up), the broker keeps the statistics, and the page, its
// JSON, 'pivctl stats --json' and a browser all say the same, in SI units.
START_TEST (a_calibrated_run_agrees_with_pivctl_stats_and_shows_in_the_browser)
{
    char why[1024];
    int browser = s_have_browser_and_server (why, sizeof why);
    s_start_broker_saving_stats ();
    char *calibrate[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "calibrate", "exp1",
                         "--scale", "0.02mm/px", "--dt", "2ms", NULL};
    ck_assert_msg (tu_run (calibrate, s_out, S_OUT, 30) == 0, "%s", s_out);
    s_land_rotations (3);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 3, 120);
    ck_assert_msg (c.done == 3, "%lld pairs done (see broker.log)", (long long) c.done);

    // pivctl stats makes the broker save its statistics: then the page
    // reads the same set.
    char *stats[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "--json", "stats", "exp1",
                     NULL};
    ck_assert_msg (tu_run (stats, s_out, S_OUT, 30) == 0, "%s", s_out);
    char err[256];
    jdoc_t *ctl = jdoc_parse (s_out, err, sizeof err);
    ck_assert_msg (ctl != NULL, "%s: %.300s", err, s_out);
    int last = jdoc_length (ctl, "$.sets") - 1;
    ck_assert_int_ge (last, 0);
    ck_assert_int_eq (jdoc_int (ctl, -1, "$.sets[%d].fields", last), 3);
    jdoc_t *doc = s_cgi_json ("exp=exp1&format=json");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.units.velocity"), "m/s");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.stats.set"),
                      jdoc_string (ctl, "$.sets[%d].set", last));
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.stats.fields"), 3);
    ck_assert (jdoc_number (doc, NAN, "$.experiment.stats.valid_fraction")
               == jdoc_number (ctl, NAN, "$.sets[%d].valid_fraction", last));
    ck_assert (jdoc_type_at (doc, "$.experiment.stats.convergence")
               == jdoc_type_at (ctl, "$.sets[%d].convergence", last));
    ck_assert (jdoc_number (doc, -1, "$.experiment.stats.convergence")
               == jdoc_number (ctl, -1, "$.sets[%d].convergence", last));
    // How well the mean is known: 3 fields, not yet (null in both).
    ck_assert (jdoc_type_at (doc, "$.experiment.stats.mean_uncertainty")
               == jdoc_type_at (ctl, "$.sets[%d].mean_uncertainty", last));
    ck_assert (jdoc_number (doc, -1, "$.experiment.stats.mean_uncertainty")
               == jdoc_number (ctl, -1, "$.sets[%d].mean_uncertainty", last));
    // The latest field's vorticity against the exact -10 1/s, within 2 % (measured:
    // -9.993 over 841 points).
    int n;
    double w = s_grid_mean (doc, "$.experiment.vorticity.values", &n);
    ck_assert_int_gt (n, 100);
    ck_assert_msg (fabs (w + 10) < 0.2, "mean vorticity %g 1/s over %d points, not -10", w, n);
    jdoc_destroy (&doc);
    jdoc_destroy (&ctl);

    if (!browser) {
        printf ("test_dashboard: skipped the browser part: %s\n", why);
        return;
    }
    char url[256];
    snprintf (url, sizeof url, "http://127.0.0.1:%d/?exp=exp1", s_serve ());
    const char *dom = s_chromium ("--dump-dom", url);
    ck_assert_msg (strstr (dom, "id=\"mean-field\" data-unit=\"m/s\"") != NULL, "%.1000s", dom);
    ck_assert (strstr (dom, "id=\"vorticity\" data-unit=\"1/s\"") != NULL);
    // The latest field carries its uncertainty (uncertainty=auto: cs for
    // the farm's passes), drawn as a map in m/s too.
    ck_assert (strstr (dom, "id=\"sigma-field\" data-unit=\"m/s\"") != NULL);
    ck_assert_int_eq (s_count (dom, "class=\"tick-max\""), 4);  // with the latest field's
    ck_assert_int_eq (s_count (dom, "x (mm)"), 4);
    ck_assert (strstr (dom, "<td class=\"fields\">3</td>") != NULL);
    ck_assert_int_gt (s_count (dom, "class=\"mean-arrow\""), 100);
    s_screenshot (url, "measurements.png", NULL);
    ck_assert_int_lt (tu_stop (s_farm.others[0], SIGTERM, 10), 128);
    s_farm.others[0] = 0;
}
END_TEST

// A field of 12 x 9 vectors 16 px apart (windows of 32 px), (2, 1) px a
// frame, peak ratio 2; vector 30, (6, 2), INVALID (a hole).
static piv_field_t *
s_latest_grid (void)
{
    piv_field_t *f = piv_field_new (12, 9);
    ck_assert_ptr_nonnull (f);
    f->step = 16;
    f->window = 32;
    for (int k = 0; k < 12 * 9; k++) {
        f->x[k] = (float) (16 + 16 * (k % 12));
        f->y[k] = (float) (16 + 16 * (k / 12));
        f->u[k] = 2;
        f->v[k] = 1;
        f->peak_ratio[k] = 2;
    }
    f->flags[30] = PIV_FLAG_INVALID;
    return f;
}

// A real broker (noop agents' farm) with exp1 calibrated 0.02 mm/px over
// 2 ms, whose one pair's RESULT is 'f', sent by an agent 'agent' spoken
// for over the protocol, recorded.
static void
s_calibrated_latest (const piv_field_t *f, const char *agent)
{
    tu_farm_conf (&s_farm, "noop", 1, "32,16", "");
    s_start_broker_saving_stats ();
    char *calibrate[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "calibrate", "exp1",
                         "--scale", "0.02mm/px", "--dt", "2ms", NULL};
    ck_assert_msg (tu_run (calibrate, s_out, S_OUT, 30) == 0, "%s", s_out);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_fake (&s_farm, 1, "s");
    tu_farm_land (&s_farm, "s", 1, 1, 0);
    ck_assert_msg (tu_farm_agent_result (&s_farm, agent, f, 20000) > 0,
                   "no TASK or RECORDED (see broker.log)");
    tu_counts_t c = tu_farm_wait_done (&s_farm, 1, 60);
    ck_assert_int_eq (c.done, 1);
}

// The experiment page of exp1 in headless Chromium (served by lighttpd):
// its DOM (static), which has the card 'card' with the map 'map' in m/s and
// the legend text 'legend'; a screenshot 'shot' (kept where $keep_env
// says). NULL, saying why, when there is no browser to use.
static const char *
s_card_in_browser (const char *card, const char *map, const char *legend, const char *shot,
                   const char *keep_env)
{
    char why[1024], want[256];
    if (!s_have_browser_and_server (why, sizeof why)) {
        printf ("test_dashboard: skipped the browser part: %s\n", why);
        return NULL;
    }
    char url[256];
    snprintf (url, sizeof url, "http://127.0.0.1:%d/?exp=exp1", s_serve ());
    s_screenshot (url, shot, getenv (keep_env)); // first: s_chromium's output is one buffer
    const char *dom = s_chromium ("--dump-dom", url);
    snprintf (want, sizeof want, "id=\"%s\" data-unit=\"m/s\"", map);
    ck_assert_msg (strstr (dom, card) && strstr (dom, want), "%.1000s", dom);
    ck_assert (strstr (dom, legend) != NULL);
    ck_assert_int_lt (tu_stop (s_farm.others[0], SIGTERM, 10), 128);
    s_farm.others[0] = 0;
    return dom;
}

// A stereo experiment's page (issue 26): the latest field's out-of-plane
// velocity w as a colour map under its in-plane arrows, the colour bar in
// the calibration's unit; the JSON carries w, converted. The field comes
// as a stereo agent's RESULT (PVF3) into a real broker; a browser shows it.
START_TEST (a_stereo_field_shows_w_under_its_arrows_with_a_colour_bar_in_m_per_s)
{
    // 12 x 9 vectors, (2, 1) px a frame in plane, w from -0.5 to +0.5 px a
    // frame across x: -5 to +5 mm/s at 0.02 mm/px and 2 ms; one hole.
    piv_field_t *f = s_latest_grid ();
    ck_assert_int_eq (piv_field_add_w (f), 0);
    for (int k = 0; k < 12 * 9; k++) {
        f->w[k] = (float) ((k % 12 - 5.5) / 11);
        f->residual[k] = 0.1f;
    }
    s_calibrated_latest (f, "stereo-a");

    jdoc_t *doc = s_cgi_json ("exp=exp1&format=json");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.w.unit"), "m/s");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.w.nx"), 12);
    for (int k = 0; k < 12 * 9; k++) {
        if (k == 30) {
            ck_assert (jdoc_type_at (doc, "$.experiment.w.values[2][6]") == JDOC_NULL);
            continue;
        }
        double w = jdoc_number (doc, NAN, "$.experiment.w.values[%d][%d]", k / 12, k % 12);
        ck_assert_msg (fabs (w - f->w[k] * 0.01) < 1e-9, "w[%d] %.9g m/s, injected %.9g", k, w,
                       f->w[k] * 0.01);
    }
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.w.max") - 0.005) < 1e-9);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.w.min") + 0.005) < 1e-9);
    int plots = jdoc_length (doc, "$.experiment.convention.plots"), found = 0;
    for (int i = 0; i < plots; i++)
        if (strcmp (jdoc_string (doc, "$.experiment.convention.plots[%d].id", i), "w-field") == 0) {
            found = 1;
            ck_assert_str_eq (jdoc_string (doc, "$.experiment.convention.plots[%d].unit", i),
                              "m/s");
        }
    ck_assert (found);
    jdoc_destroy (&doc);
    int status;
    const char *html = s_cgi ("exp=exp1", &status);
    ck_assert_int_eq (status, 200);
    ck_assert (strstr (html, "id=\"w-field\" data-unit=\"m/s\"") != NULL);
    ck_assert_int_eq (s_count (html, "class=\"w-arrow\""), 12 * 9 - 1);
    const char *legend = strstr (strstr (html, "id=\"w-field\""), "class=\"legend\"");
    ck_assert (legend && strstr (legend, ">w (m/s)</text>"));
    const char *lo = strstr (legend, "class=\"tick-min\""), *hi = strstr (legend, "class=\"tick-max\"");
    ck_assert_msg (lo && hi && strstr (lo, "mm/s") && strstr (hi, "mm/s"), "%.600s", legend);
    piv_field_destroy (&f);
    const char *dom = s_card_in_browser ("id=\"w-card\"", "w-field", ">w (m/s)</text>",
                                         "stereo.png", "PIVFARM_STEREO_SHOT");
    if (dom)
        ck_assert_int_eq (s_count (dom, "class=\"w-arrow\""), 12 * 9 - 1);
}
END_TEST

// A field with each vector's uncertainty (issue 27): its magnitude |sigma|
// = sqrt (sigma_u^2 + sigma_v^2) as a colour map with its colour bar in
// m/s, the JSON's "sigma" converted (0.01 m/s a px at 0.02 mm/px, 2 ms),
// grey where there is none; shown in a browser. (A field without sigma has
// no such card: the planar and stereo tests above.)
START_TEST (a_field_with_uncertainty_shows_a_map_of_sigma_with_its_colour_bar)
{
    // sigma_u from 0.02 to 0.13 px across x, sigma_v 0.05 px: |sigma| 0.54
    // to 1.39 mm/s; the hole and vector 40 (valid, no estimate) without.
    piv_field_t *f = s_latest_grid ();
    ck_assert_int_eq (piv_field_add_sigma (f), 0);
    for (int k = 0; k < 12 * 9; k++) {
        f->sigma_u[k] = (float) (0.02 + 0.01 * (k % 12));
        f->sigma_v[k] = 0.05f;
    }
    f->sigma_u[30] = f->sigma_v[30] = f->sigma_u[40] = f->sigma_v[40] = NAN;
    s_calibrated_latest (f, "sigma-a");

    jdoc_t *doc = s_cgi_json ("exp=exp1&format=json");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.sigma.unit"), "m/s");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiment.sigma.nx"), 12);
    for (int k = 0; k < 12 * 9; k++) {
        if (k == 30 || k == 40) {
            ck_assert (jdoc_type_at (doc, "$.experiment.sigma.values[%d][%d]", k / 12, k % 12)
                       == JDOC_NULL);
            continue;
        }
        double got = jdoc_number (doc, NAN, "$.experiment.sigma.values[%d][%d]", k / 12, k % 12);
        double want = hypot (f->sigma_u[k], f->sigma_v[k]) * 0.01;
        ck_assert_msg (fabs (got - want) < 1e-9, "|sigma|[%d] %.9g m/s, injected %.9g", k, got,
                       want);
    }
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.sigma.min") - hypot (0.02, 0.05) * 0.01)
               < 1e-9);
    ck_assert (fabs (jdoc_number (doc, NAN, "$.experiment.sigma.max") - hypot (0.13, 0.05) * 0.01)
               < 1e-9);
    int plots = jdoc_length (doc, "$.experiment.convention.plots"), found = 0;
    for (int i = 0; i < plots; i++)
        found += strcmp (jdoc_string (doc, "$.experiment.convention.plots[%d].id", i),
                         "sigma-field")
                     == 0
                 && strcmp (jdoc_string (doc, "$.experiment.convention.plots[%d].unit", i),
                            "m/s")
                        == 0;
    ck_assert_int_eq (found, 1);
    ck_assert (jdoc_type_at (doc, "$.experiment.w") == JDOC_MISSING); // planar
    jdoc_destroy (&doc);
    int status;
    const char *html = s_cgi ("exp=exp1", &status);
    ck_assert_int_eq (status, 200);
    ck_assert (strstr (html, "id=\"sigma-card\"") != NULL);
    ck_assert (strstr (html, "id=\"sigma-field\" data-unit=\"m/s\"") != NULL);
    const char *legend = strstr (strstr (html, "id=\"sigma-field\""), "class=\"legend\"");
    ck_assert_msg (legend && strstr (legend, ">|\xCF\x83| (m/s)</text>"), "%.600s", legend);
    const char *lo = strstr (legend, "class=\"tick-min\"");
    const char *hi = strstr (legend, "class=\"tick-max\"");
    ck_assert_msg (lo && hi && strstr (lo, "mm/s") && strstr (hi, "mm/s"), "%.600s", legend);
    piv_field_destroy (&f);
    const char *dom = s_card_in_browser ("id=\"sigma-card\"", "sigma-field",
                                         ">|\xCF\x83| (m/s)</text>", "sigma.png",
                                         "PIVFARM_SIGMA_SHOT");
    if (dom)
        ck_assert (strstr (dom, "w-card") == NULL);
}
END_TEST

// pivctl with up to 8 arguments (NULL-terminated) on the test's farm: its
// exit status; its output in s_out.
static int
s_pivctl (const char *a1, ...)
{
    char *argv[12] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, (char *) a1};
    va_list args;
    va_start (args, a1);
    for (int i = 4; i < 11 && (argv[i] = va_arg (args, char *)); i++)
        ;
    va_end (args);
    argv[11] = NULL;
    return tu_run (argv, s_out, S_OUT, 30);
}

// The text of every <text class="tick"> of chart 'id' in 'html', joined by
// '|', into buf.
static const char *
s_ticks_of (const char *html, const char *id, char *buf, size_t size)
{
    char key[128];
    snprintf (key, sizeof key, "id=\"%s\"", id);
    const char *p = strstr (html, key), *end = p ? strstr (p, "</svg>") : NULL;
    buf[0] = '\0';
    for (p = p ? strstr (p, "class=\"tick\"") : NULL; p && p < end;
         p = strstr (p + 1, "class=\"tick\"")) {
        const char *from = strchr (p, '>') + 1, *to = strchr (from, '<');
        size_t used = strlen (buf);
        snprintf (buf + used, size - used, "%s%.*s", used ? "|" : "", (int) (to - from), from);
    }
    return buf;
}

// Every plot of the page's JSON 'doc' in one convention: positions in
// 'position' with y 'y_axis', speeds in 'velocity', rates in 'rate';
// returns how many plots it has.
static int
s_one_convention (jdoc_t *doc, const char *position, const char *y_axis, const char *velocity,
                  const char *rate)
{
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.convention.position_unit"), position);
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.convention.y_axis"), y_axis);
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.convention.velocity_unit"), velocity);
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.convention.rate_unit"), rate);
    int n = jdoc_length (doc, "$.experiment.convention.plots");
    for (int i = 0; i < n; i++) {
        const char *id = jdoc_string (doc, "$.experiment.convention.plots[%d].id", i);
        const char *unit = jdoc_string (doc, "$.experiment.convention.plots[%d].unit", i);
        if (jdoc_type_at (doc, "$.experiment.convention.plots[%d].position_unit", i)
            == JDOC_STRING) {
            ck_assert_str_eq (jdoc_string (doc, "$.experiment.convention.plots[%d].position_unit",
                                           i),
                              position);
            ck_assert_str_eq (jdoc_string (doc, "$.experiment.convention.plots[%d].y_axis", i),
                              y_axis);
        }
        ck_assert_msg (strcmp (unit, velocity) == 0 || strcmp (unit, rate) == 0
                           || strcmp (unit, "/s") == 0,
                       "plot %s in %s, not %s or %s", id, unit, velocity, rate);
    }
    return n;
}

// Issue 25, as a scientist meets it: a run recorded first, calibrated
// afterwards (0.02 mm/px, 500 us), feedback on mean_v (a rotation: about 0,
// the tiny figures whose ticks read 0.000010 / -0.000000), and files the
// rule refuses. Before the calibration every plot is in px with y down;
// after it every plot (the latest field too) is in mm with y up and m/s,
// ticks carry SI prefixes, the calibration reads as typed, and the files
// in no pair are named. Screenshots are kept when PIVFARM_PAGE_SHOTS names
// a directory (page-uncalibrated.png, page-calibrated.png, page-overview.png).
START_TEST (a_calibrated_page_shows_one_convention_and_the_files_in_no_pair)
{
    char why[1024];
    int browser = s_have_browser_and_server (why, sizeof why);
    s_start_broker_saving_stats ();
    ck_assert_msg (s_pivctl ("feedback", "set", "quantity=mean_v", "setpoint=0", "kp=0.5", "-e",
                             "exp1", NULL) == 0,
                   "%s", s_out);
    ck_assert_msg (s_pivctl ("feedback", "on", "-e", "exp1", NULL) == 0, "%s", s_out);
    s_land_rotations (4);
    size_t len;
    char *frame = tu_slurp (tu_path (s_dir, "src/r_0001_a.tif"), &len);
    ck_assert (frame != NULL);
    tu_spit (tu_path (s_dir, "data/exp1/B005_1.tif"), frame, len);
    tu_spit (tu_path (s_dir, "data/exp1/B005_2.tif"), frame, len);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 4, 120).done, 4);
    // An experiment of such files alone: no pair, and the page says why.
    ck_assert (mkdir (tu_path (s_dir, "data/b005"), 0755) == 0);
    tu_spit (tu_path (s_dir, "data/b005/B005_1.tif"), frame, len);
    tu_spit (tu_path (s_dir, "data/b005/B005_2.tif"), frame, len);
    free (frame);
    ck_assert_msg (s_pivctl ("--json", "stats", "exp1", NULL) == 0, "%s", s_out);
    jdoc_t *doc = NULL;
    for (int i = 0; i < 300; i++, usleep (100000)) {
        jdoc_destroy (&doc);
        doc = s_cgi_json ("exp=exp1&format=json");
        if (jdoc_int (doc, -1, "$.experiments[0].unpaired.refused") == 2
            && jdoc_length (doc, "$.experiment.feedback.points") == 4)
            break;
    }
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[0].unpaired.refused"), 2);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[0].unpaired.files[0].name"), "B005_1.tif");
    for (int i = 0; i < 300 && jdoc_int (doc, -1, "$.experiments[1].unpaired.refused") != 2;
         i++, usleep (100000)) {
        jdoc_destroy (&doc);
        doc = s_cgi_json ("exp=exp1&format=json");
    }
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[1].experiment"), "b005");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[1].files"), 2);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[1].unpaired.refused"), 2);
    int status;
    ck_assert (strstr (s_cgi ("", &status), "no pairs: 2 file(s) in none") != NULL);
    ck_assert_int_eq (jdoc_length (doc, "$.experiment.feedback.points"), 4);
    // Not calibrated: every plot in px, y down as in the image.
    // field, mean-field, vorticity, sigma-field (its uncertainty), feedback-series, rate-history
    ck_assert_int_eq (s_one_convention (doc, "px", "down", "px/frame", "1/frame"), 6);
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.feedback.unit"), "px/frame");
    jdoc_destroy (&doc);
    const char *html = s_cgi ("exp=exp1", &status);
    ck_assert_int_eq (status, 200);
    ck_assert_int_eq (s_count (html, "x (px)"), 4);  // latest, its sigma, mean, vorticity
    ck_assert (strstr (html, "data-unit=\"px/frame\" data-position-unit=\"px\" "
                             "data-y-axis=\"down\"") != NULL);
    ck_assert (strstr (html, "id=\"unpaired\"") && strstr (html, "B005_2.tif")
               && strstr (html, "does not fit pairing rule ab"));
    int port = browser ? s_serve () : 0;
    char url[256], shot[4200];
    const char *shots = getenv ("PIVFARM_PAGE_SHOTS");
    snprintf (url, sizeof url, "http://127.0.0.1:%d/?exp=exp1", port);
    if (browser && shots && *shots) {
        snprintf (shot, sizeof shot, "--screenshot=%s/page-uncalibrated.png", shots);
        s_chromium_sized (shot, url, "1400,2400");
    }

    // Calibrated after the run: the same figures, in one convention.
    ck_assert_msg (s_pivctl ("calibrate", "exp1", "--scale", "0.02 mm/px", "--dt", "500us", NULL)
                       == 0,
                   "%s", s_out);
    doc = s_cgi_json ("exp=exp1&format=json");
    ck_assert_int_eq (s_one_convention (doc, "mm", "up", "m/s", "1/s"), 6);
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.field.units.velocity"), "m/s");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.stats.units.velocity"), "m/s");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.feedback.unit"), "m/s");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.calibration.text"),
                      "scale=0.02mm/px dt=500us origin=0,0 y_axis=up");
    ck_assert_str_eq (jdoc_string (doc, "$.experiment.calibration.description"),
                      "0.02 mm/px, dt 500 \xC2\xB5s, origin (0, 0) px, y up");
    // A vector of the latest field in m/s from the origin, y up: its px
    // value times 0.02 mm/px / 500 us, v and y negated.
    ck_assert (jdoc_number (doc, 1, "$.experiment.field.vectors[0][1]") < 0);
    jdoc_destroy (&doc);
    html = s_cgi ("exp=exp1", &status);
    ck_assert_int_eq (s_count (html, "x (mm)"), 4);
    ck_assert_int_eq (s_count (html, "x (px)"), 0);
    ck_assert (strstr (html, "px/frame") == NULL);
    ck_assert (strstr (html, "data-unit=\"m/s\" data-position-unit=\"mm\" data-y-axis=\"up\"")
               != NULL);
    ck_assert (strstr (html, "0.02 mm/px, dt 500 \xC2\xB5s") != NULL);
    ck_assert (strstr (html, "e-05m/px") == NULL && strstr (html, "0.00050000000000000001") == NULL);
    // The feedback ticks: SI prefixes on m/s, no run of zeros.
    char ticks[512];
    s_ticks_of (html, "feedback-series", ticks, sizeof ticks);
    ck_assert_msg (strstr (ticks, "m/s") && !strstr (ticks, "0.0000") && !strstr (ticks, "-0|")
                       && !strstr (ticks, "e-"),
                   "feedback ticks '%s'", ticks);
    if (browser) {
        const char *dom = s_chromium ("--dump-dom", url);
        ck_assert_int_eq (s_count (dom, "x (mm)"), 4);
        ck_assert (strstr (dom, "data-position-unit=\"mm\"") != NULL);
        snprintf (url, sizeof url, "http://127.0.0.1:%d/", port);
        dom = s_chromium ("--dump-dom", url);
        ck_assert_msg (strstr (dom, "class=\"unpaired\"") && strstr (dom, "2 file(s) outside the rule"),
                       "%.2000s", dom);
        if (shots && *shots) {
            snprintf (shot, sizeof shot, "--screenshot=%s/page-overview.png", shots);
            s_chromium (shot, url);
        }
        snprintf (url, sizeof url, "http://127.0.0.1:%d/?exp=exp1", port);
        if (shots && *shots) {
            snprintf (shot, sizeof shot, "--screenshot=%s/page-calibrated.png", shots);
            s_chromium_sized (shot, url, "1400,2400");
        }
        ck_assert_int_lt (tu_stop (s_farm.others[0], SIGTERM, 10), 128);
        s_farm.others[0] = 0;
    }
    else
        printf ("test_dashboard: skipped the browser part: %s\n", why);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("dashboard");
    TCase *tc = tcase_create ("page");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 600);
    tcase_add_test (tc, every_figure_of_the_page_matches_a_store_of_known_contents);
    tcase_add_test (tc, hostile_queries_are_refused_and_hostile_strings_escaped);
    tcase_add_test (tc, a_missing_store_or_configuration_is_a_clear_error_page);
    tcase_add_test (tc, errors_come_back_in_the_format_asked_for);
    tcase_add_test (tc, a_broker_that_answers_an_error_is_not_called_unreachable);
    tcase_add_test (tc, a_browser_shows_the_live_farm_served_by_lighttpd);
    tcase_add_test (tc, metrics_of_a_live_farm_pass_promtool_and_match_the_store);
    tcase_add_test (tc, metric_labels_are_escaped_and_the_store_alone_suffices);
    tcase_add_test (tc, the_experiment_page_states_the_units_of_its_calibration);
    tcase_add_test (tc, a_calibrated_run_agrees_with_pivctl_stats_and_shows_in_the_browser);
    tcase_add_test (tc, a_stereo_field_shows_w_under_its_arrows_with_a_colour_bar_in_m_per_s);
    tcase_add_test (tc, a_field_with_uncertainty_shows_a_map_of_sigma_with_its_colour_bar);
    tcase_add_test (tc, a_calibrated_page_shows_one_convention_and_the_files_in_no_pair);
    suite_add_tcase (suite, tc);
    // What an admin alerts on (issue 28).
    tc = tcase_create ("monitoring");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, metrics_say_what_the_guard_pauses_how_far_clocks_are_off_and_how_busy_the_store_is);
    tcase_add_test (tc, the_alert_rules_pass_promtool_and_the_broker_down_alert_fires_on_a_stopped_broker_s_page);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
