// publish.c — the publish socket's messages (doc/protocol.md §6) and the
// fixed-size JSON they carry (publish.h).

#include "broker/publish.h"
#include "common/proto.h"
#include "common/util.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

void
publish_send (zsock_t *publish, const char *prefix, const char *experiment, const char *json,
              const void *blob, size_t blob_size)
{
    if (!publish)
        return;
    char topic[PATH_MAX];
    snprintf (topic, sizeof topic, "%s%s%s", prefix, experiment ? experiment : "",
              experiment ? PROTO_TOPIC_END : "");
    zmsg_t *msg = zmsg_new ();
    if (!msg)
        return;
    zmsg_addstr (msg, topic);
    zmsg_addstr (msg, json);
    if (blob)
        zmsg_addmem (msg, blob, blob_size);
    zmsg_send (&msg, publish);
    zmsg_destroy (&msg);
}

void
publish_json_put_string (char *buf, size_t size, size_t *len, const char *text)
{
    size_t room = *len < size ? size - *len : 0;
    *len += util_json_string (text, room ? buf + *len : NULL, room);
}

void
publish_json_put (char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    size_t room = *len < size ? size - *len : 0;
    int n = vsnprintf (room ? buf + *len : NULL, room, fmt, ap);
    va_end (ap);
    if (n > 0)
        *len += (size_t) n;
}

void
publish_json_put_number (char *buf, size_t size, size_t *len, double x)
{
    if (isfinite (x))
        publish_json_put (buf, size, len, "%.9g", x);
    else
        publish_json_put (buf, size, len, "null");
}

