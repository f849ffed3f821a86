// publish.c — the publish socket's messages (doc/protocol.md §6) and the
// JSON they carry (publish.h).

#include "broker/publish.h"
#include "common/proto.h"
#include "common/jout.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int
publish_json (zsock_t *publish, const char *prefix, const char *experiment, json_t *value,
              size_t budget, const void *blob, size_t blob_size)
{
    char *json = jout_dump (value);
    json_decref (value);
    int fits = json && strlen (json) < budget;
    if (fits)
        publish_send (publish, prefix, experiment, json, blob, blob_size);
    free (json);
    return fits ? 0 : -1;
}
