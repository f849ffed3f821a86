// ask.c — one REQUEST on the broker's control socket and its REPLY; see
// ask.h.

#include "common/ask.h"

#include "common/proto.h"
#include "common/secure.h"
#include "common/util.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>

struct _ask_t {
    const config_t *cfg; // the configuration (client/control, security)
    zsock_t *sock;       // DEALER to client/control
    zpoller_t *poller;   // on sock
};

ask_t *
ask_new (const config_t *cfg, char *err, size_t errlen, int *bad_cert)
{
    ask_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "no memory");
        if (bad_cert)
            *bad_cert = 0;
        return NULL;
    }
    self->cfg = cfg;
    const char *endpoint = config_connect (cfg, "client/control", err, errlen);
    if (!endpoint) {
        if (bad_cert)
            *bad_cert = 1;
        goto fail;
    }
    self->sock =
        secure_connect (ZMQ_DEALER, cfg, endpoint, "the broker", 0, err, errlen, bad_cert);
    if (!self->sock)
        goto fail;
    self->poller = zpoller_new (self->sock, NULL);
    if (!self->poller) {
        snprintf (err, errlen, "cannot wait on the socket to the broker at '%s'",
                  endpoint);
        if (bad_cert)
            *bad_cert = 0;
        goto fail;
    }
    return self;
fail:
    ask_destroy (&self);
    return NULL;
}

void
ask_destroy (ask_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ask_t *self = *self_p;
    zpoller_destroy (&self->poller);
    zsock_destroy (&self->sock);
    free (self);
    *self_p = NULL;
}

// Decodes the message waiting on self's socket as a REPLY.
static ask_result_t
s_read_reply (ask_t *self, int *status_p, char **body_p, char *err, size_t errlen)
{
    const char *endpoint = self->cfg->client.control;
    zmsg_t *zmsg = zmsg_recv (self->sock);
    proto_msg_t reply = {0};
    char why[512];
    ask_result_t result = ASK_OK;
    if (proto_decode (&zmsg, &reply, why, sizeof why) != 0 || reply.command != PROTO_REPLY) {
        snprintf (err, errlen, "the broker at '%s' answered nonsense: %s", endpoint,
                  reply.command ? "not a REPLY" : why);
        result = ASK_NONSENSE;
    }
    else if (reply.status != 200) {
        *status_p = (int)reply.status;
        snprintf (err, errlen, "%s", reply.text ? reply.text : "");
        result = ASK_REFUSED;
    }
    else {
        *status_p = 200;
        *body_p = reply.text;
        reply.text = NULL;
    }
    proto_msg_release (&reply);
    return result;
}

ask_result_t
ask_request (ask_t *self, const char *line, int timeout_ms, volatile sig_atomic_t *stop,
             int *status_p, char **body_p, char *err, size_t errlen)
{
    const char *endpoint = self->cfg->client.control;
    *status_p = 0;
    *body_p = NULL;
    proto_msg_t request = {.command = PROTO_REQUEST, .text = (char *)line};
    char shown[UTIL_SHOWN];
    size_t len = strlen (line);
    if (len > PROTO_MAX_STRING) {
        *status_p = 400;
        snprintf (err, errlen, "the command '%s' is %zu bytes long, over the %d a request may "
                  "carry (PROTO_MAX_STRING)",
                  util_shorten (line, shown, sizeof shown), len, PROTO_MAX_STRING);
        return ASK_REFUSED;
    }
    if (proto_send (&request, NULL, self->sock) != 0) {
        snprintf (err, errlen, "cannot send '%s' to the broker at '%s'",
                  util_shorten (line, shown, sizeof shown), endpoint);
        return ASK_UNSENT;
    }
    // Waits in slices so that a signal is seen at once.
    int64_t deadline = zclock_mono () + timeout_ms;
    void *ready = NULL;
    while (!ready && !(stop && *stop) && zclock_mono () < deadline) {
        int64_t left = deadline - zclock_mono ();
        ready = zpoller_wait (self->poller, (int)(left < 100 ? left : 100));
    }
    if (stop && *stop)
        return ASK_INTERRUPTED;
    if (!ready) {
        snprintf (err, errlen, "the broker at '%s' did not answer within %d ms%s", endpoint,
                  timeout_ms, secure_hint (self->cfg));
        return ASK_SILENT;
    }
    return s_read_reply (self, status_p, body_p, err, errlen);
}

ask_result_t
ask_once (const config_t *cfg, const char *line, int timeout_ms, int *status_p, char **body_p,
          char *err, size_t errlen)
{
    *status_p = 0;
    *body_p = NULL;
    ask_t *ask = ask_new (cfg, err, errlen, NULL);
    if (!ask)
        return ASK_UNCONNECTED;
    ask_result_t result = ask_request (ask, line, timeout_ms, NULL, status_p, body_p, err, errlen);
    ask_destroy (&ask);
    return result;
}
