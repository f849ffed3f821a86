// text.h — a JSON text growing as it is written: the replies of the
// control socket, the status and the 'state' topic (control.c, status.c,
// storage.c). Caller-allocated: zero it to start, free its data after.

#ifndef BROKER_TEXT_H
#define BROKER_TEXT_H

#include <stddef.h>

typedef struct {
    char *data;  // the text (malloc'd, NUL-terminated once anything is put), or NULL
    size_t len, cap;
    int failed;  // no memory: the text is incomplete
} text_t;

// Appends printf text; on no memory sets t->failed and appends nothing.
void text_put (text_t *t, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

// Appends 'text' as a JSON string (jout_string; NULL: "").
void text_put_string (text_t *t, const char *text);

// Appends a number as jout_number writes it (not finite: null).
void text_put_number (text_t *t, double x);

// Appends ",\"KEY\":" (no comma when 'key' starts the text: first) and x
// rounded to 'decimals' places, as text_put_number writes it.
void text_put_rounded (text_t *t, int first, const char *key, double x, int decimals);

#endif
