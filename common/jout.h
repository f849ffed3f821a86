// jout.h — how pivfarm writes JSON: values are built with jansson
// (json_object, json_array, json_integer, json_true ...) and these helpers
// hold the conventions every writer shares, so that the broker, the
// feedback stream, pivctl and the status page write the same text:
// - numbers (jout_number): a finite double that holds an integer below 2^53
//   is written as an integer; any other finite one as a real with 9
//   significant digits (JOUT_FLAGS: every float, and so every vector of a
//   field, reads back exactly); NaN and infinities as null;
// - strings (jout_string): a NULL text is null; a byte that is not part
//   of valid UTF-8 becomes U+FFFD (util_utf8_sanitize), never an error;
// - text (jout_dump and its kin): compact, members in the order set, and
//   < > & and DEL escaped as \u003C ... so that the JSON stays inert if
//   pasted into a page.
// Failures are sticky: a constructor that ran out of memory gives NULL,
// jout_set and jout_append then destroy the container they were filling,
// and a NULL reaching a dump makes it fail; a writer checks once, at the end.

#ifndef COMMON_JOUT_H
#define COMMON_JOUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

// jansson's dump flags for the conventions above (jout_* dumps use them).
#define JOUT_FLAGS (JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION (9))

// x as a JSON value, as above: a new reference, NULL on no memory.
json_t *jout_number (double x);
// 'text' as a JSON string, as above (NULL: null): a new reference, NULL on
// no memory only.
json_t *jout_string (const char *text);

// Sets member 'key' of *object_p to 'value', taking the reference. If value
// is NULL, the set fails or *object_p is already NULL, *object_p is released
// and set to NULL (and value released): 0, or -1 then.
int jout_set (json_t **object_p, const char *key, json_t *value);
// Appends 'value' to the array *array_p, taking the reference; on failure
// as jout_set.
int jout_append (json_t **array_p, json_t *value);

// 'value' as JSON text: a new NUL-terminated string the caller frees; NULL
// if value is NULL or on no memory.
char *jout_dump (const json_t *value);
// The same into buf, as snprintf: at most size - 1 bytes and a NUL (buf may
// be NULL when size is 0); the length of the whole text, 0 (buf "") if value
// is NULL or on no memory.
size_t jout_dumpb (const json_t *value, char *buf, size_t size);
// The same to a stream. 0, or -1 if value is NULL or a write failed.
int jout_write (const json_t *value, FILE *out);

#endif
