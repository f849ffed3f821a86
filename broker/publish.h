// publish.h — what the broker's stages send on the publish socket
// (doc/protocol.md §6): a topic, a JSON text (common/jout.h) within a
// budget (a message too long for it is not sent), and an optional blob.

#ifndef BROKER_PUBLISH_H
#define BROKER_PUBLISH_H

#include <czmq.h>
#include <jansson.h>
#include <stddef.h>

// Sends 'json' on "<prefix><experiment>/" (experiment NULL: on 'prefix'
// alone), with 'blob' as a third frame when it is not NULL. ZeroMQ drops
// a message no subscriber asked for before it leaves the broker. Nothing
// when publish is NULL.
void publish_send (zsock_t *publish, const char *prefix, const char *experiment,
                   const char *json, const void *blob, size_t blob_size);

// Sends 'value' (taking the reference) as publish_send does, its text
// written by jout_dump, when that text is shorter than 'budget' bytes;
// nothing when it is longer or value is NULL (no memory). 0 if sent (or
// publish is NULL), -1 if not.
int publish_json (zsock_t *publish, const char *prefix, const char *experiment, json_t *value,
                  size_t budget, const void *blob, size_t blob_size);

// The publish socket is an XPUB: subscribers' subscriptions reach the
// broker, which then builds a message only when somebody asked for its
// topic (a result's JSON costs the broker's one thread more than the rest
// of the result). Reads the subscription messages waiting on 'publish'
// (the reactor calls it when the socket is readable, and before each batch
// of results).
void publish_subscriptions (zsock_t *publish);
// 1 when a subscriber of 'publish' subscribed to a prefix of the topic
// "<prefix><experiment>/" (experiment NULL: 'prefix' alone), as far as the
// subscriptions read so far say (asking the socket for new ones each time
// cost two system calls a result); always 1 on a socket that is not an
// XPUB; 0 when publish is NULL.
int publish_wanted (zsock_t *publish, const char *prefix, const char *experiment);
// Forgets the subscriptions of 'publish' (before it is destroyed).
void publish_forget (zsock_t *publish);

#endif
