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

// Subscriptions of every XPUB publish socket: "<socket>|<hex of prefix>".
// XPUB (not verbose) says 1 on the first subscription to a prefix and 0
// when its last subscriber leaves, so a set is enough.
static zhashx_t *s_subs;
// Beyond this many prefixes (a peer sending subscriptions without end) the
// set stops growing and every topic counts as wanted.
#define SUBS_MAX 10000
static int s_subs_full;

static void
s_key (zsock_t *publish, const unsigned char *prefix, size_t len, char *key, size_t size)
{
    int n = snprintf (key, size, "%p|", (void *) publish);
    for (size_t i = 0; i < len && (size_t) n + 3 < size; i++)
        n += snprintf (key + n, size - (size_t) n, "%02x", prefix[i]);
}

void
publish_subscriptions (zsock_t *publish)
{
    if (!publish || zsock_type (publish) != ZMQ_XPUB)
        return;
    while (zsock_events (publish) & ZMQ_POLLIN) {
        zframe_t *frame = zframe_recv (publish);
        if (!frame)
            break;
        const unsigned char *data = zframe_data (frame);
        size_t size = zframe_size (frame);
        if (size >= 1 && data[0] <= 1 && size - 1 < PATH_MAX) {
            char key[2 * PATH_MAX + 32];
            s_key (publish, data + 1, size - 1, key, sizeof key);
            if (!s_subs)
                s_subs = zhashx_new ();
            if (s_subs && data[0] == 1 && zhashx_size (s_subs) >= SUBS_MAX)
                s_subs_full = 1;
            else if (s_subs && data[0] == 1)
                zhashx_update (s_subs, key, (void *) 1);
            else if (s_subs)
                zhashx_delete (s_subs, key);
        }
        zframe_destroy (&frame);
    }
}

int
publish_wanted (zsock_t *publish, const char *prefix, const char *experiment)
{
    if (!publish)
        return 0;
    if (zsock_type (publish) != ZMQ_XPUB)
        return 1;
    if (s_subs_full)
        return 1;
    if (!s_subs)
        return 0;
    char topic[PATH_MAX], head[32];
    int tlen = snprintf (topic, sizeof topic, "%s%s%s", prefix, experiment ? experiment : "",
                         experiment ? PROTO_TOPIC_END : "");
    size_t hlen = (size_t) snprintf (head, sizeof head, "%p|", (void *) publish);
    for (void *v = zhashx_first (s_subs); v; v = zhashx_next (s_subs)) {
        const char *key = zhashx_cursor (s_subs);
        if (strncmp (key, head, hlen) != 0)
            continue;
        const char *hex = key + hlen;
        size_t n = strlen (hex) / 2;
        if (n > (size_t) tlen)
            continue;
        size_t i = 0;
        for (; i < n; i++) {
            unsigned byte;
            if (sscanf (hex + 2 * i, "%2x", &byte) != 1 || (char) byte != topic[i])
                break;
        }
        if (i == n)
            return 1;
    }
    return 0;
}

void
publish_forget (zsock_t *publish)
{
    if (!s_subs || !publish)
        return;
    char head[32];
    size_t hlen = (size_t) snprintf (head, sizeof head, "%p|", (void *) publish);
    zlistx_t *gone = zlistx_new ();
    if (!gone)
        return;
    zlistx_set_destructor (gone, (zlistx_destructor_fn *) zstr_free);
    for (void *v = zhashx_first (s_subs); v; v = zhashx_next (s_subs))
        if (strncmp (zhashx_cursor (s_subs), head, hlen) == 0)
            zlistx_add_end (gone, strdup (zhashx_cursor (s_subs)));
    for (char *key = zlistx_first (gone); key; key = zlistx_next (gone))
        zhashx_delete (s_subs, key);
    zlistx_destroy (&gone);
    if (zhashx_size (s_subs) == 0)
        zhashx_destroy (&s_subs);
}
