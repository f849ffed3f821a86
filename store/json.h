// json.h — a small reader of JSON documents (the broker's replies, the
// feedback stream) built on SQLite's JSON functions, so that pivfarm parses
// JSON with a library rather than by hand. It lives in store/ because only
// store/ includes sqlite3.h. Read-only: a document is parsed once, then
// values are looked up by path.

#ifndef STORE_JSON_H
#define STORE_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct _json_t json_t;

// What a path leads to. JSON_MISSING: nothing there (an absent key, an
// index past the end, or a path through a value that is not a container);
// JSON_NULL: an explicit null.
typedef enum {
    JSON_MISSING = 0,
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_INTEGER, // a number without fraction or exponent that fits in int64
    JSON_REAL,    // any other number
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
} json_type_t;

// Paths are SQLite's JSON paths: "$" the document, "$.key", "$.a.b[2].c",
// and a key that is not a plain identifier in double quotes ("$.\"a b\"";
// a key holding a double quote cannot be reached). "$.a_b" and "$.\"a_b\""
// are the same path. Every accessor takes the path as a printf format and
// its arguments:
//     json_string (doc, "$.experiments[%d].experiment", i)
// A path that is malformed, or longer than 1023 bytes, finds nothing
// (JSON_MISSING); so does SQLite's "[#-1]" form, which is not supported.

// Parses 'text' (NUL-terminated) into a new document: the text is read
// entirely, once. NULL with err if the text is not valid JSON (err gives
// its length and start), or on no memory or an SQLite failure.
json_t *json_parse (const char *text, char *err, size_t errlen);
// Frees the document and every string it handed out. Accepts NULL; sets
// *self_p to NULL.
void json_destroy (json_t **self_p);

// The type of the value at the path.
json_type_t json_type_at (json_t *self, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
// 1 if the path leads to a number (JSON_INTEGER or JSON_REAL).
int json_is_number (json_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// The number at the path, or dflt if the value is missing, null or not a
// number. An integer beyond 2^53 loses precision as a double.
double json_number (json_t *self, double dflt, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// The integer at the path (a JSON_REAL truncated toward zero, clamped to
// the int64 range), or dflt if the value is missing, null or not a number.
int64_t json_int (json_t *self, int64_t dflt, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// 1 for true, 0 for false, dflt for anything else.
int json_bool (json_t *self, int dflt, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// The string at the path, unescaped (UTF-8; a \u0000 ends it), or NULL if
// the value is not a string. Owned by the document: valid until
// json_destroy.
const char *json_string (json_t *self, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
// The number of elements of the array at the path, or -1 if the value is
// not an array.
int json_length (json_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// The value at the path as compact JSON text (strings quoted and escaped),
// a new string the caller frees; NULL if the path leads nowhere or on no
// memory.
char *json_text (json_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#endif
