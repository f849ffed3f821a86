// publish.h — what the broker's stages send on the publish socket
// (doc/protocol.md §6): a topic, a JSON text written into a fixed buffer
// (a message too long for it is not sent), and an optional blob.

#ifndef BROKER_PUBLISH_H
#define BROKER_PUBLISH_H

#include <czmq.h>
#include <stddef.h>

// Sends 'json' on "<prefix><experiment>/" (experiment NULL: on 'prefix'
// alone), with 'blob' as a third frame when it is not NULL. ZeroMQ drops
// a message no subscriber asked for before it leaves the broker. Nothing
// when publish is NULL.
void publish_send (zsock_t *publish, const char *prefix, const char *experiment,
                   const char *json, const void *blob, size_t blob_size);

// Appends printf text to buf (size bytes) at *len; *len counts on past
// size, so that len >= size says the text did not fit.
void publish_json_put (char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
// Appends 'text' as a JSON string (util_json_string).
void publish_json_put_string (char *buf, size_t size, size_t *len, const char *text);
// Appends a number, null when not finite.
void publish_json_put_number (char *buf, size_t size, size_t *len, double x);

#endif
