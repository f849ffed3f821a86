// text.c — a JSON text growing as it is written (text.h).

#include "broker/text.h"
#include "common/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void
text_put (text_t *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start (ap, fmt);
        size_t room = t->cap - t->len;
        int n = t->data ? vsnprintf (t->data + t->len, room, fmt, ap) : -1;
        va_end (ap);
        if (n >= 0 && (size_t) n < room) {
            t->len += (size_t) n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (n >= 0 && cap - t->len <= (size_t) n)
            cap *= 2;
        char *data = realloc (t->data, cap);
        if (!data) {
            t->failed = 1;
            return;
        }
        t->data = data;
        t->cap = cap;
    }
}

// A JSON string (util_json_string).
void
text_put_string (text_t *t, const char *text)
{
    char small[512];
    size_t n = util_json_string (text, NULL, 0);
    char *json = n < sizeof small ? small : malloc (n + 1);
    if (!json) {
        t->failed = 1;
        return;
    }
    util_json_string (text, json, n + 1);
    text_put (t, "%s", json);
    if (json != small)
        free (json);
}

// A number, or null when it is not finite.
void
text_put_number (text_t *t, double x)
{
    if (isfinite (x))
        text_put (t, "%.6g", x);
    else
        text_put (t, "null");
}
