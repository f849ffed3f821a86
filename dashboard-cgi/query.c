// query.c — the status page's query string: 'exp' and 'format' only, each
// at most once, an experiment name as the watcher makes them; anything
// else is refused with the reason (a 400 page). See dash.h.

#include "dashboard-cgi/dash.h"

#include "common/util.h"

#include <stdio.h>
#include <string.h>

#define S_QUERY_MAX 2048  // bytes of a query string
#define S_NAME_MAX 255    // bytes of an experiment name (a directory name)

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
    // Bytes >= 0x80 must be valid UTF-8 as the escapers read it (util.h): they
    // would replace them, and the store would not find the name; refuse now.
    size_t where;
    return !util_utf8_invalid ((const unsigned char *) name, n, &where);
}

int
dash_query_parse (char *query, dash_query_t *q, char *why, size_t size)
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
            if (!value
                || (strcmp (value, "json") != 0 && strcmp (value, "html") != 0
                    && strcmp (value, "prometheus") != 0)) {
                snprintf (why, size, "'format' must be json, html or prometheus");
                return -1;
            }
            q->json = strcmp (value, "json") == 0;
            q->prometheus = strcmp (value, "prometheus") == 0;
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
    if (q->prometheus && q->exp) {
        // The metrics are the whole farm's, each experiment a label.
        snprintf (why, size, "format=prometheus takes no 'exp': every experiment is labelled");
        return -1;
    }
    return 0;
}
