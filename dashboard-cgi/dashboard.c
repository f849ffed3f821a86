// dashboard.c — pivfarm.cgi, the status page as a CGI program: validates
// the query (GET or HEAD; 'exp' and 'format' only), gathers the figures
// (gather.c) and writes the page (html.c) or its JSON (json_out.c).
// Read-only: it asks the broker for 'status' and opens the store read-only.
//
// Exit status: 0 whenever a response was written (error pages included).

#include "dashboard-cgi/dash.h"

#include <stdlib.h>
#include <string.h>

#ifndef DASHBOARD_CONF
#define DASHBOARD_CONF "/etc/pivfarm/pivfarm.conf"
#endif

#define S_QUERY_MAX 2048       // bytes of a query string
#define S_NAME_MAX 255         // bytes of an experiment name (a directory name)
#define S_BROKER_TIMEOUT_MS 500

typedef struct {
    char *exp;                 // experiment page (NULL: the overview)
    int json;                  // ?format=json
} s_query_t;

// Decodes %XX and '+' in place; -1 on a malformed escape or a NUL byte.
static int
s_url_decode (char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '+')
            *w++ = ' ';
        else if (*r == '%') {
            int hi, lo;
            char h[3] = {r[1], r[1] ? r[2] : 0, 0};
            if (!h[0] || !h[1] || sscanf (h, "%1x%1x", &hi, &lo) != 2 || !(hi | lo))
                return -1;
            *w++ = (char) (hi * 16 + lo);
            r += 2;
        }
        else
            *w++ = *r;
    }
    *w = '\0';
    return 0;
}

// An experiment name as the watcher makes them (a first-level directory
// name, or a replay's NAME.replayN): letters, digits, space and ._-+=@,:~
// (UTF-8 letters beyond ASCII too); never "." or "..", at most S_NAME_MAX.
static int
s_name_ok (const char *name)
{
    size_t n = strlen (name);
    if (n == 0 || n > S_NAME_MAX || strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
        return 0;
    for (const unsigned char *s = (const unsigned char *) name; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')
              || *s >= 0x80 || strchr (" ._-+=@,:~", *s)))
            return 0;
    // Bytes >= 0x80 must be valid UTF-8: the HTML escaper would replace
    // them, the store would not find the name; refuse now.
    for (const unsigned char *s = (const unsigned char *) name; *s;) {
        int len = *s < 0x80 ? 1 : (*s & 0xE0) == 0xC0 ? 2 : (*s & 0xF0) == 0xE0 ? 3
                              : (*s & 0xF8) == 0xF0   ? 4
                                                      : 0;
        if (len == 0 || (len == 2 && *s < 0xC2))
            return 0;
        for (int i = 1; i < len; i++)
            if ((s[i] & 0xC0) != 0x80)
                return 0;
        s += len;
    }
    return 1;
}

// Parses the query into q (strings point into 'query', which is decoded
// in place). 0, or -1 with why.
static int
s_parse_query (char *query, s_query_t *q, char *why, size_t size)
{
    int seen_exp = 0, seen_format = 0;
    if (strlen (query) > S_QUERY_MAX) {
        snprintf (why, size, "the query is longer than %d bytes", S_QUERY_MAX);
        return -1;
    }
    char *save = NULL;
    for (char *item = strtok_r (query, "&", &save); item; item = strtok_r (NULL, "&", &save)) {
        char *value = strchr (item, '=');
        if (value)
            *value++ = '\0';
        if (s_url_decode (item) != 0 || (value && s_url_decode (value) != 0)) {
            snprintf (why, size, "a malformed %%-escape in the query");
            return -1;
        }
        if (strcmp (item, "exp") == 0 && !seen_exp++) {
            if (!value || !s_name_ok (value)) {
                snprintf (why, size, "'exp' must be an experiment name: letters, digits, "
                                     "space and ._-+=@,:~, at most %d bytes",
                          S_NAME_MAX);
                return -1;
            }
            q->exp = value;
        }
        else if (strcmp (item, "format") == 0 && !seen_format++) {
            if (!value || (strcmp (value, "json") != 0 && strcmp (value, "html") != 0)) {
                snprintf (why, size, "'format' must be json or html");
                return -1;
            }
            q->json = strcmp (value, "json") == 0;
        }
        else if (strcmp (item, "exp") == 0 || strcmp (item, "format") == 0) {
            snprintf (why, size, "'%s' is given twice", item);
            return -1;
        }
        else {
            snprintf (why, size, "unknown parameter '%.64s%s' (known: exp, format)", item,
                      strlen (item) > 64 ? "..." : "");
            return -1;
        }
    }
    return 0;
}

// Writes the response: headers, then the body unless HEAD.
static void
s_respond (const char *status, int json, const char *body, size_t size, int head)
{
    printf ("Status: %s\r\n"
            "Content-Type: %s\r\n"
            "Content-Length: %zu\r\n"
            "Cache-Control: no-store\r\n"
            "X-Content-Type-Options: nosniff\r\n"
            "Referrer-Policy: no-referrer\r\n"
            "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'\r\n"
            "\r\n",
            status, json ? "application/json; charset=utf-8" : "text/html; charset=utf-8", size);
    if (!head)
        fwrite (body, 1, size, stdout);
    fflush (stdout);
}

static void
s_error (const char *status, int json, int head, const char *message)
{
    char *body = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&body, &size);
    if (!out)
        return;
    if (json) {
        fputs ("{\"status\":", out);
        dash_put_json (out, status);
        fputs (",\"error\":", out);
        dash_put_json (out, message);
        fputs ("}\n", out);
    }
    else
        dash_html_error (out, status, message);
    fclose (out);
    s_respond (status, json, body, size, head);
    free (body);
}

int
main (void)
{
    const char *method = getenv ("REQUEST_METHOD");
    int head = method && strcmp (method, "HEAD") == 0;
    if (method && strcmp (method, "GET") != 0 && !head) {
        s_error ("405 Method Not Allowed", 0, 0, "the status page is read-only: GET or HEAD");
        return 0;
    }
    const char *raw = getenv ("QUERY_STRING");
    char *query = strdup (raw ? raw : "");
    s_query_t q = {0};
    char why[512];
    if (!query || s_parse_query (query, &q, why, sizeof why) != 0) {
        s_error ("400 Bad Request", 0, head, query ? why : "no memory");
        free (query);
        return 0;
    }

    static dash_t dash;
    const char *conf = getenv ("PIVFARM_CONF");
    dash.conf_path = conf && *conf ? conf : DASHBOARD_CONF;
    char err[1024];
    if (config_load (&dash.cfg, dash.conf_path, err, sizeof err) != 0) {
        s_error ("500 Internal Server Error", q.json, head, err);
        free (query);
        return 0;
    }
    int rc = dash_gather (&dash, q.exp, S_BROKER_TIMEOUT_MS, err, sizeof err);
    if (rc < 0)
        s_error ("503 Service Unavailable", q.json, head, err);
    else if (rc > 0) {
        snprintf (why, sizeof why, "no experiment '%s'", q.exp);
        s_error ("404 Not Found", q.json, head, why);
    }
    else {
        char *body = NULL;
        size_t size = 0;
        FILE *out = open_memstream (&body, &size);
        if (out) {
            if (q.json)
                dash_json (&dash, out);
            else
                dash_html (&dash, out);
            fclose (out);
            s_respond ("200 OK", q.json, body, size, head);
            free (body);
        }
    }
    dash_release (&dash);
    free (query);
    return 0;
}
