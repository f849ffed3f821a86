// jdoc.h — reading JSON documents (the broker's replies, the feedback
// stream) with jansson: a document is parsed once, then values are looked
// up by path. Read-only. (jansson owns the name json_t: this is jdoc_t.)

#ifndef COMMON_JDOC_H
#define COMMON_JDOC_H

#include <stddef.h>
#include <stdint.h>

typedef struct _jdoc_t jdoc_t;

// What a path leads to. JDOC_MISSING: nothing there (an absent key, an
// index past the end, or a path through a value that is not a container);
// JDOC_NULL: an explicit null.
typedef enum {
    JDOC_MISSING = 0,
    JDOC_NULL,
    JDOC_FALSE,
    JDOC_TRUE,
    JDOC_INTEGER, // a number without fraction or exponent (it fits in int64)
    JDOC_REAL,    // any other number
    JDOC_STRING,
    JDOC_ARRAY,
    JDOC_OBJECT
} jdoc_type_t;

// Paths: "$" the document, "$.key", "$.a.b[2].c", and a key that is not a
// plain identifier in double quotes ("$.\"a b\""; a key holding a double
// quote is reached only unquoted, "$.a\"b", and one holding '.' or '['
// only quoted). "$.a_b" and "$.\"a_b\"" are the same path. Every accessor
// takes the path as a printf format and its arguments:
//     jdoc_string (doc, "$.experiments[%d].experiment", i)
// A path that is malformed, or longer than 1023 bytes, finds nothing
// (JDOC_MISSING); so does SQLite's "[#-1]" form, which is not supported.

// Parses 'text' (NUL-terminated) into a new document: the text is read
// entirely, once. A byte that is not part of valid UTF-8 is read as U+FFFD
// (util_utf8_sanitize), as pivfarm's writers write it. NULL with err if the
// text is not valid JSON (err gives its length and start: an integer beyond
// int64 or a real beyond a double, or nesting deeper than 2048, is not
// either), or on no memory.
jdoc_t *jdoc_parse (const char *text, char *err, size_t errlen);
// Frees the document and every string it handed out. Accepts NULL; sets
// *self_p to NULL.
void jdoc_destroy (jdoc_t **self_p);

// The type of the value at the path.
jdoc_type_t jdoc_type_at (jdoc_t *self, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
// 1 if the path leads to a number (JDOC_INTEGER or JDOC_REAL).
int jdoc_is_number (jdoc_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// The number at the path, or dflt if the value is missing, null or not a
// number. An integer beyond 2^53 loses precision as a double.
double jdoc_number (jdoc_t *self, double dflt, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// The integer at the path (a JDOC_REAL truncated toward zero, clamped to
// the int64 range), or dflt if the value is missing, null or not a number.
int64_t jdoc_int (jdoc_t *self, int64_t dflt, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// 1 for true, 0 for false, dflt for anything else.
int jdoc_bool (jdoc_t *self, int dflt, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// The string at the path, unescaped (UTF-8; a \u0000 ends it), or NULL if
// the value is not a string. Owned by the document: valid until
// jdoc_destroy.
const char *jdoc_string (jdoc_t *self, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
// The number of elements of the array at the path, or -1 if the value is
// not an array.
int jdoc_length (jdoc_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// The value at the path as JSON text, written as pivfarm writes JSON
// (jout_dump: compact, reals with 9 significant digits), a new string the
// caller frees; NULL if the path leads nowhere or on no memory.
char *jdoc_text (jdoc_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#endif
