// jout.c — pivfarm's JSON writing conventions over jansson (jout.h): one
// number rule, one UTF-8 rule, one dump that every writer's text goes
// through.

#include "common/jout.h"

#include "common/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

json_t *
jout_number (double x)
{
    if (!isfinite (x))
        return json_null ();
    // Below 2^53 every integer is exact in a double: it is written as one.
    if (fabs (x) < 9007199254740992.0 && x == trunc (x))
        return json_integer ((json_int_t) x);
    return json_real (x);
}

json_t *
jout_string (const char *text)
{
    if (!text)
        return json_null ();
    size_t len = strlen (text), where;
    if (!util_utf8_invalid ((const unsigned char *) text, len, &where))
        return json_stringn_nocheck (text, len);
    char *clean = util_utf8_sanitize (text);
    json_t *value = clean ? json_string_nocheck (clean) : NULL;
    free (clean);
    return value;
}

// jout_set (key) and jout_append (key NULL).
static int
s_insert (json_t **container_p, const char *key, json_t *value)
{
    if (!*container_p)
        json_decref (value);
    else if (value && (key ? json_object_set_new (*container_p, key, value)
                           : json_array_append_new (*container_p, value)) == 0)
        return 0;
    // A failed json_object_set_new or json_array_append_new has released
    // value itself.
    json_decref (*container_p);
    *container_p = NULL;
    return -1;
}

int
jout_set (json_t **object_p, const char *key, json_t *value)
{
    if (!key) {
        json_decref (value);
        value = NULL;
    }
    return s_insert (object_p, key, value);
}

int
jout_append (json_t **array_p, json_t *value)
{
    return s_insert (array_p, NULL, value);
}

// Where dumped text goes: a stream, a buffer that grows, or a fixed buffer
// that keeps what fits (the length still counts the whole).
typedef struct {
    FILE *file;  // the stream, or NULL: the buffer
    char *buf;   // the buffer
    size_t size; // its bytes
    size_t len;  // bytes of text so far
    int grow;    // 1: buf is ours, realloc'd as the text grows
    int failed;  // a write or an allocation failed
} s_sink_t;

static void
s_put (s_sink_t *sink, const char *bytes, size_t n)
{
    if (sink->file) {
        if (n && fwrite (bytes, 1, n, sink->file) != n)
            sink->failed = 1;
    }
    else if (sink->grow && sink->len + n + 1 > sink->size) {
        size_t size = sink->size ? sink->size : 256;
        while (size < sink->len + n + 1)
            size *= 2;
        char *buf = realloc (sink->buf, size);
        if (!buf) {
            sink->failed = 1;
            return;
        }
        sink->buf = buf;
        sink->size = size;
    }
    if (!sink->file && sink->len + 1 < sink->size) {
        size_t room = sink->size - 1 - sink->len;
        memcpy (sink->buf + sink->len, bytes, n < room ? n : room);
    }
    sink->len += n;
}

// jansson's output, with < > & and DEL escaped: they only ever appear inside
// strings (JSON's own syntax has none), where jansson writes them raw.
static int
s_escape (const char *chunk, size_t n, void *data)
{
    s_sink_t *sink = data;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) chunk[i];
        if (c == '<' || c == '>' || c == '&' || c == 0x7F) {
            char seq[8];
            snprintf (seq, sizeof seq, "\\u%04x", c);
            s_put (sink, chunk + start, i - start);
            s_put (sink, seq, 6);
            start = i + 1;
        }
    }
    s_put (sink, chunk + start, n - start);
    return sink->failed ? -1 : 0;
}

// Dumps value into sink, NUL-terminating a buffer. 0, or -1.
static int
s_dump (const json_t *value, s_sink_t *sink)
{
    if (!value || json_dump_callback (value, s_escape, sink, JOUT_FLAGS) != 0 || sink->failed)
        return -1;
    if (!sink->file && sink->size)
        sink->buf[sink->len < sink->size ? sink->len : sink->size - 1] = '\0';
    return 0;
}

char *
jout_dump (const json_t *value)
{
    s_sink_t sink = {.grow = 1};
    if (s_dump (value, &sink) != 0) {
        free (sink.buf);
        return NULL;
    }
    return sink.buf;
}

size_t
jout_dumpb (const json_t *value, char *buf, size_t size)
{
    s_sink_t sink = {.buf = buf, .size = size};
    if (s_dump (value, &sink) != 0) {
        if (size)
            buf[0] = '\0';
        return 0;
    }
    return sink.len;
}

int
jout_write (const json_t *value, FILE *out)
{
    s_sink_t sink = {.file = out};
    return s_dump (value, &sink);
}
