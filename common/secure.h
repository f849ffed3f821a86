// secure.h — CURVE on the farm's sockets (doc/security.md): the
// certificates of the configuration's security section loaded and applied
// to a socket, and the key of the client a message came from.

#ifndef COMMON_SECURE_H
#define COMMON_SECURE_H

#include "common/config.h"

#include <czmq.h>
#include <stddef.h>

// 1 if security/curve is on.
int secure_on (const config_t *cfg);

// The certificate at 'path', which the configuration names with 'key'
// ("security/client_cert"). With 'secret' its secret part must be there too,
// in path + "_secret" (czmq's convention: zcert_save and 'pivctl keygen'
// write both files). NULL with err naming the file, the key and the cause.
zcert_t *secure_cert_load (const char *path, const char *key, int secret, char *err, size_t errlen);

// Makes sock a CURVE client of the broker when security/curve is on: this
// program's certificate (security/cert, which config_load chose by role:
// security/<role>_cert, else client_cert; security/cert_key names what
// chose it) and the broker's public key (security/broker_cert). Call before
// connecting. 0, also when curve is off; -1 with err when a certificate
// cannot be loaded, naming the file and its key, and for a permission, who
// must be able to read it.
int secure_client (zsock_t *sock, const config_t *cfg, char *err, size_t errlen);

// A client socket of 'type' (ZMQ_DEALER, ZMQ_SUB) connected to the
// broker's 'endpoint', which err calls 'what' ("the broker"): messages over
// PROTO_MAX_MESSAGE refused, 'linger_ms' to deliver what is queued at
// close, a CURVE client when security/curve is on. NULL with err; then
// *bad_cert (if not NULL) says whether a certificate was at fault (the
// configuration's) rather than the socket or the endpoint.
zsock_t *secure_connect (int type, const config_t *cfg, const char *endpoint, const char *what,
                         int linger_ms, char *err, size_t errlen, int *bad_cert);

// Makes sock a CURVE server with the broker's certificate. Call before
// binding.
void secure_server (zsock_t *sock, zcert_t *cert);

// The Z85 public key of the client that sent the message holding frame, as
// the ZAP handler (czmq's zauth) authenticated it; NULL when the socket is
// not a CURVE server. The string belongs to the frame.
const char *secure_peer_key (zframe_t *frame);

// What to add to "... did not answer" when curve is on: the two keys that
// make a CURVE handshake fail without a word, this program's certificate
// named with what chose it; "" when curve is off. The text stays until the
// thread's next call.
const char *secure_hint (const config_t *cfg);

#endif
