// query.c — the status page's query string: 'exp' and 'format' only, each
// at most once, percent-decoded as a browser encodes a form
// (application/x-www-form-urlencoded: RFC 3986's %XX, and '+' for a
// space); 'exp' any name the farm takes for an experiment (common/path.h).
// Anything else is refused with the reason (a 400 page). See dash.h.

#include "dashboard-cgi/dash.h"

#include "common/path.h"
#include "common/util.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

// Bytes of a query string: room for 'exp' with the longest name the farm
// takes, every byte of it percent-encoded, and the longest format.
#define S_QUERY_MAX 2048
_Static_assert (sizeof "exp=" + 3 * NAME_MAX + sizeof "&format=prometheus" <= S_QUERY_MAX,
                "an experiment's name, encoded, fits in a query");

static int
s_hex (char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

// Decodes %XX and '+' in place; -1 on a malformed escape or a NUL byte.
static int
s_url_decode (char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '+')
            *w++ = ' ';
        else if (*r == '%') {
            int hi = s_hex (r[1]), lo = hi < 0 ? -1 : s_hex (r[2]);
            if (lo < 0 || (hi | lo) == 0)
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

// Reads one item (decoded in place) into q. 0, or -1 with why.
static int
s_item (char *item, dash_query_t *q, int *seen_exp, int *seen_format, char *why, size_t size)
{
    char *value = strchr (item, '=');
    if (value)
        *value++ = '\0';
    if (s_url_decode (item) != 0 || (value && s_url_decode (value) != 0)) {
        snprintf (why, size, "a malformed %%-escape in the query");
        return -1;
    }
    if (strcmp (item, "exp") == 0 && !(*seen_exp)++) {
        char bad[PATH_WHY];
        if (!value || path_check_component (value, bad, sizeof bad) != 0) {
            // The name is not echoed: the reason says what is wrong with it.
            snprintf (why, size, "'exp' is not an experiment's name: %s",
                      value ? bad : "it has no value");
            return -1;
        }
        q->exp = value;
    }
    else if (strcmp (item, "format") == 0 && !(*seen_format)++) {
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
        char shown[80];
        snprintf (why, size, "unknown parameter '%s' (known: exp, format)",
                  util_shorten (item, shown, sizeof shown));
        return -1;
    }
    return 0;
}

int
dash_query_parse (char *query, dash_query_t *q, char *why, size_t size)
{
    int seen_exp = 0, seen_format = 0, failed = 0;
    size_t len = strlen (query);
    if (len > S_QUERY_MAX) {
        snprintf (why, size, "the query is %zu bytes long, over the %d the page reads", len,
                  S_QUERY_MAX);
        return -1;
    }
    // After a bad item the others are still read, so that a request for
    // JSON gets its error as JSON; the first reason is kept.
    char *save = NULL, other[256];
    for (char *item = strtok_r (query, "&", &save); item; item = strtok_r (NULL, "&", &save))
        if (s_item (item, q, &seen_exp, &seen_format, failed ? other : why,
                    failed ? sizeof other : size)
            != 0)
            failed = 1;
    if (!failed && q->prometheus && q->exp) {
        // The metrics are the whole farm's, each experiment a label.
        snprintf (why, size, "format=prometheus takes no 'exp': every experiment is labelled");
        return -1;
    }
    return failed ? -1 : 0;
}
