// dashboard.c — pivfarm.cgi, the status page as a CGI program: validates
// the query (GET or HEAD; 'exp' and 'format' only), gathers the figures
// (gather.c) and writes the page (html.c), its JSON (json_out.c) or its
// Prometheus metrics (prometheus.c).
// Read-only: it asks the broker for 'status' and opens the store read-only.
//
// Exit status: 0 whenever a response was written (error pages included).
// Run from a shell (no GATEWAY_INTERFACE) with arguments, it follows the
// convention of every program (doc/conventions.md): --help, --version, and
// exit 2 for anything else.

#include "common/cli.h"
#include "common/version.h"
#include "dashboard-cgi/dash.h"
#include "piv/calib.h"
#include "piv/settings.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef DASHBOARD_CONF
#define DASHBOARD_CONF "/etc/pivfarm/pivfarm.conf"
#endif

#define S_BROKER_TIMEOUT_MS 500

// The response's body formats.
enum { S_HTML, S_JSON, S_PROMETHEUS };

// Writes the response: headers, then the body unless HEAD.
static void
s_respond (const char *status, int format, const char *body, size_t size, int head)
{
    static const char *const types[] = {
        [S_HTML] = "text/html; charset=utf-8",
        [S_JSON] = "application/json; charset=utf-8",
        // The text exposition format, as a scraper asks for it.
        [S_PROMETHEUS] = "text/plain; version=0.0.4; charset=utf-8"};
    printf ("Status: %s\r\n"
            "Content-Type: %s\r\n"
            "Content-Length: %zu\r\n"
            "Cache-Control: no-store\r\n"
            "X-Content-Type-Options: nosniff\r\n"
            "Referrer-Policy: no-referrer\r\n"
            "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'\r\n"
            "\r\n",
            status, types[format], size);
    if (!head)
        fwrite (body, 1, size, stdout);
    fflush (stdout);
}

static void
s_error (const char *status, int format, int head, const char *message)
{
    char *body = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&body, &size);
    if (!out)
        return;
    if (format == S_PROMETHEUS)
        fprintf (out, "%s: %s\n", status, message);  // a scraper records it as the failure
    else if (format == S_JSON)
        dash_json_error (out, status, message);
    else
        dash_html_error (out, status, message);
    fclose (out);
    s_respond (status, format, body, size, head);
    free (body);
}

// From a shell: --help, --version or a usage error; the exit status.
static int
s_command_line (int argc, char **argv)
{
    cli_set_program ("pivfarm.cgi");
    const char *arg = argv[1];
    if (argc == 2 && (strcmp (arg, "-h") == 0 || strcmp (arg, "--help") == 0)) {
        printf ("usage: pivfarm.cgi             (run by a web server, as CGI)\n"
                "The status page of pivfarm: GET or HEAD, query 'exp=NAME' for one experiment,\n"
                "'format=json' for its data. Reads the configuration named by $PIVFARM_CONF\n"
                "(default %s), asks the broker for 'status' and reads\n"
                "the store read-only. doc/dashboard.md says how to serve it.\n"
                "  -h, --help      this text\n"
                "  -V, --version   the version\n"
                "exit status: 0 a response was written (error pages included); 2 bad usage\n",
                DASHBOARD_CONF);
        return CLI_EXIT_OK;
    }
    if (argc == 2 && (strcmp (arg, "-V") == 0 || strcmp (arg, "--version") == 0)) {
        printf ("pivfarm.cgi %s\n", PIVFARM_VERSION);
        return CLI_EXIT_OK;
    }
    if (arg[0] == '-')
        return cli_usage_error ("unknown option '%s'", arg);
    return cli_usage_error ("unexpected argument '%s': a web server runs it with none", arg);
}

// Before the first broker has run, there is no store: the page says so
// with its banner, and shows the broker as it answers (unreachable, most
// likely), rather than failing with a 503. 1 if that is the case.
static int
s_no_store_yet (dash_t *dash)
{
    struct stat st;
    if (stat (dash->cfg.broker.store, &st) == 0 || errno != ENOENT)
        return 0;
    if (strcmp (dash->store_state, "lost") == 0)
        return 1;  // not "yet": the broker's banner says what became of it
    snprintf (dash->warnings[0].level, sizeof dash->warnings[0].level, "warning");
    snprintf (dash->warnings[0].message, sizeof dash->warnings[0].message,
              "No store yet: '%.400s' does not exist. The broker makes it when it first "
              "starts (pivfarm-broker -c %.100s).",
              dash->cfg.broker.store, dash->conf_path);
    dash->nwarnings = 1;
    return 1;
}

int
main (int argc, char **argv)
{
    config_rules ("piv", piv_settings_check_key);
    config_rules ("calibration", piv_calib_check_key);
    config_role ("page");
    // A server may pass a query without '=' as arguments (CGI's ISINDEX
    // form): arguments are read as options only outside a server.
    const char *gateway = getenv ("GATEWAY_INTERFACE");
    if (argc > 1 && !(gateway && *gateway))
        return s_command_line (argc, argv);
    const char *method = getenv ("REQUEST_METHOD");
    int head = method && strcmp (method, "HEAD") == 0;
    const char *raw = getenv ("QUERY_STRING");
    char *query = strdup (raw ? raw : "");
    dash_query_t q = {0};
    char why[512];
    // Every error goes back in the format asked for, a bad query's too
    // (the parser still says which format it named): a script asking for
    // JSON reads JSON, whatever went wrong.
    int bad = !query || dash_query_parse (query, &q, why, sizeof why) != 0;
    int format = q.prometheus ? S_PROMETHEUS : q.json ? S_JSON : S_HTML;
    if (method && strcmp (method, "GET") != 0 && !head) {
        s_error ("405 Method Not Allowed", format, 0, "the status page is read-only: GET or HEAD");
        free (query);
        return 0;
    }
    if (bad) {
        s_error ("400 Bad Request", format, head, query ? why : "no memory");
        free (query);
        return 0;
    }

    static dash_t dash;
    const char *conf = getenv ("PIVFARM_CONF");
    dash.conf_path = conf && *conf ? conf : DASHBOARD_CONF;
    char err[1024];
    if (config_load (&dash.cfg, dash.conf_path, err, sizeof err) != 0) {
        s_error ("500 Internal Server Error", format, head, err);
        free (query);
        return 0;
    }
    int rc = dash_gather (&dash, q.exp, S_BROKER_TIMEOUT_MS, err, sizeof err);
    if (rc < 0 && s_no_store_yet (&dash))
        rc = q.exp ? 1 : 0;  // no experiment exists yet
    if (rc < 0 && strcmp (dash.store_state, "lost") == 0) {
        // The broker knows why (its store's files were taken away): say that first.
        char lost[sizeof dash.store_error + sizeof err + 64];
        snprintf (lost, sizeof lost, "the broker's store was taken away: %s (this page cannot "
                  "read it: %s)", dash.store_error, err);
        s_error ("503 Service Unavailable", format, head, lost);
    }
    else if (rc < 0)
        s_error ("503 Service Unavailable", format, head, err);
    else if (rc > 0) {
        snprintf (why, sizeof why, "no experiment '%s'", q.exp);
        s_error ("404 Not Found", format, head, why);
    }
    else {
        char *body = NULL;
        size_t size = 0;
        FILE *out = open_memstream (&body, &size);
        if (out) {
            if (format == S_PROMETHEUS)
                dash_prometheus (&dash, out);
            else if (format == S_JSON)
                dash_json (&dash, out);
            else
                dash_html (&dash, out);
            fclose (out);
            s_respond ("200 OK", format, body, size, head);
            free (body);
        }
    }
    dash_release (&dash);
    free (query);
    return 0;
}
