// jdoc.c — JSON documents read with jansson (jdoc.h). jansson parses the
// text into a tree once; a lookup walks the path over it, a hash lookup
// per key and an index per element, so that reading every field of a reply
// of 10000 pairs costs one parse, not one per field.

#include "common/jdoc.h"

#include "common/jout.h"
#include "common/util.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JDOC_PATH_MAX 1024 // bytes of a path, NUL included

struct _jdoc_t {
    json_t *root; // the document
};

static void s_err (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

jdoc_t *
jdoc_parse (const char *text, char *err, size_t errlen)
{
    if (!text) {
        s_err (err, errlen, "no JSON text");
        return NULL;
    }
    size_t len = strlen (text), where;
    char *clean = NULL;
    jdoc_t *self = calloc (1, sizeof *self);
    if (!self || (util_utf8_invalid ((const unsigned char *) text, len, &where) &&
                  !(clean = util_utf8_sanitize (text)))) {
        s_err (err, errlen, "no memory for a JSON document of %zu bytes", len);
        free (self);
        return NULL;
    }
    // Any value is a document (" 42 "); a \u0000 is kept (and ends the
    // string as C reads it).
    json_error_t error;
    self->root = json_loads (clean ? clean : text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    free (clean);
    if (self->root)
        return self;
    if (json_error_code (&error) == json_error_out_of_memory)
        s_err (err, errlen, "no memory for a JSON document of %zu bytes", len);
    else
        s_err (err, errlen, "not valid JSON (%zu bytes%s%.40s%s)", len, len ? ", starting '" : "",
               text,
               len > 40 ? "...'"
               : len    ? "'"
                        : "");
    free (self);
    return NULL;
}

void
jdoc_destroy (jdoc_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    json_decref ((*self_p)->root);
    free (*self_p);
    *self_p = NULL;
}

// One step of a path at *in: ".\"key\"", ".key" (up to the next '.' or
// '[') or "[index]" (decimal digits), applied to value; *in moves past it.
// The value it leads to, or NULL (nothing there, or not a step).
static json_t *
s_step (json_t *value, const char **in)
{
    const char *s = *in;
    if (s[0] == '.' && s[1] == '"') {
        const char *end = strchr (s + 2, '"');
        if (!end)
            return NULL;
        *in = end + 1;
        return json_object_getn (value, s + 2, (size_t) (end - s - 2));
    }
    if (s[0] == '.') {
        size_t n = strcspn (s + 1, ".[");
        *in = s + 1 + n;
        return n ? json_object_getn (value, s + 1, n) : NULL;
    }
    if (s[0] == '[') {
        char *end;
        long long index = strtoll (s + 1, &end, 10);
        if (end == s + 1 || *end != ']' || index < 0 || s[1] == '+' || s[1] == ' ')
            return NULL;
        *in = end + 1;
        return json_array_get (value, (size_t) index);
    }
    return NULL;
}

// The value at the formatted path, or NULL.
static json_t *
s_find (jdoc_t *self, const char *fmt, va_list args)
{
    char path[JDOC_PATH_MAX];
    int len = vsnprintf (path, sizeof path, fmt, args);
    if (!self || len < 0 || (size_t) len >= sizeof path || path[0] != '$')
        return NULL;
    json_t *value = self->root;
    const char *in = path + 1;
    while (value && *in)
        value = s_step (value, &in);
    return value;
}

#define S_FIND(value)                                                                              \
    va_list args;                                                                                  \
    va_start (args, fmt);                                                                          \
    json_t *value = s_find (self, fmt, args);                                                      \
    va_end (args)

jdoc_type_t
jdoc_type_at (jdoc_t *self, const char *fmt, ...)
{
    S_FIND (value);
    if (!value)
        return JDOC_MISSING;
    switch (json_typeof (value)) {
    case JSON_NULL: return JDOC_NULL;
    case JSON_FALSE: return JDOC_FALSE;
    case JSON_TRUE: return JDOC_TRUE;
    case JSON_INTEGER: return JDOC_INTEGER;
    case JSON_REAL: return JDOC_REAL;
    case JSON_STRING: return JDOC_STRING;
    case JSON_ARRAY: return JDOC_ARRAY;
    case JSON_OBJECT: return JDOC_OBJECT;
    default: return JDOC_MISSING;
    }
}

int
jdoc_is_number (jdoc_t *self, const char *fmt, ...)
{
    S_FIND (value);
    return json_is_number (value);
}

double
jdoc_number (jdoc_t *self, double dflt, const char *fmt, ...)
{
    S_FIND (value);
    return json_is_number (value) ? json_number_value (value) : dflt;
}

int64_t
jdoc_int (jdoc_t *self, int64_t dflt, const char *fmt, ...)
{
    S_FIND (value);
    if (json_is_integer (value))
        return (int64_t) json_integer_value (value);
    if (!json_is_real (value))
        return dflt;
    double real = json_real_value (value); // finite: jansson refuses the rest
    if (real >= 9223372036854775807.0)
        return INT64_MAX;
    if (real <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t) real;
}

int
jdoc_bool (jdoc_t *self, int dflt, const char *fmt, ...)
{
    S_FIND (value);
    return json_is_true (value) ? 1 : json_is_false (value) ? 0 : dflt;
}

const char *
jdoc_string (jdoc_t *self, const char *fmt, ...)
{
    S_FIND (value);
    return json_string_value (value);
}

int
jdoc_length (jdoc_t *self, const char *fmt, ...)
{
    S_FIND (value);
    return json_is_array (value) ? (int) json_array_size (value) : -1;
}

char *
jdoc_text (jdoc_t *self, const char *fmt, ...)
{
    S_FIND (value);
    return jout_dump (value);
}
