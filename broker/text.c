// text.c — a JSON text growing as it is written (text.h).

#include "broker/text.h"
#include "common/jout.h"

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

// value's text (jout_dumpb), releasing it: small ones on the stack.
static void
s_put_json (text_t *t, json_t *value)
{
    char small[512];
    size_t n = value ? jout_dumpb (value, small, sizeof small) : 0;
    char *json = n < sizeof small ? small : malloc (n + 1);
    if (n == 0 || !json) {
        t->failed = 1;
        json_decref (value);
        return;
    }
    if (json != small)
        jout_dumpb (value, json, n + 1);
    json_decref (value);
    text_put (t, "%s", json);
    if (json != small)
        free (json);
}

void
text_put_string (text_t *t, const char *text)
{
    s_put_json (t, jout_string (text ? text : ""));
}

void
text_put_number (text_t *t, double x)
{
    s_put_json (t, jout_number (x));
}

void
text_put_rounded (text_t *t, int first, const char *key, double x, int decimals)
{
    double scale = pow (10, decimals);
    text_put (t, "%s\"%s\":", first ? "" : ",", key);
    text_put_number (t, round (x * scale) / scale);
}
