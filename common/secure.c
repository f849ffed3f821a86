// secure.c — CURVE certificates of the security section applied to the
// farm's sockets; see secure.h and doc/security.md.

#include "common/secure.h"

#include "common/proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// zcert_secret_txt of a certificate loaded without its secret part.
#define NO_SECRET "0000000000000000000000000000000000000000"

int
secure_on (const config_t *cfg)
{
    return strcmp (cfg->security.curve, "on") == 0;
}

zcert_t *
secure_cert_load (const char *path, const char *key, int secret, char *err, size_t errlen)
{
    char secret_path[PATH_MAX + 8];
    snprintf (secret_path, sizeof secret_path, "%s_secret", path);
    const char *file = secret ? secret_path : path;
    struct stat st;
    const char *why = NULL;
    if (stat (file, &st) != 0 || access (file, R_OK) != 0)
        why = strerror (errno);
    else if (!S_ISREG (st.st_mode))
        why = "not a file";
    if (why) {
        snprintf (err, errlen,
                  "cannot read the %s certificate '%s' (%s): %s; 'pivctl keygen NAME' makes "
                  "one",
                  secret ? "secret" : "public", file, key, why);
        return NULL;
    }
    // zcert_load reads path_secret when it is there, else path.
    zcert_t *cert = zcert_load (path);
    if (!cert || (secret && strcmp (zcert_secret_txt (cert), NO_SECRET) == 0)) {
        snprintf (err, errlen, "'%s' (%s) is not a CURVE certificate made by 'pivctl keygen'", file,
                  key);
        zcert_destroy (&cert);
    }
    return cert;
}

int
secure_client (zsock_t *sock, const config_t *cfg, char *err, size_t errlen)
{
    if (!secure_on (cfg))
        return 0;
    zcert_t *mine =
        secure_cert_load (cfg->security.client_cert, "security/client_cert", 1, err, errlen);
    zcert_t *broker =
        mine ? secure_cert_load (cfg->security.broker_cert, "security/broker_cert", 0, err, errlen)
             : NULL;
    if (broker) {
        zcert_apply (mine, sock);
        zsock_set_curve_serverkey (sock, zcert_public_txt (broker));
    }
    zcert_destroy (&mine);
    int rc = broker ? 0 : -1;
    zcert_destroy (&broker);
    return rc;
}

zsock_t *
secure_connect (int type, const config_t *cfg, const char *endpoint, const char *what,
                int linger_ms, char *err, size_t errlen, int *bad_cert)
{
    if (bad_cert)
        *bad_cert = 0;
    zsock_t *sock = zsock_new (type);
    if (!sock) {
        snprintf (err, errlen, "cannot make a socket to %s at '%s'", what, endpoint);
        return NULL;
    }
    zsock_set_maxmsgsize (sock, PROTO_MAX_MESSAGE);
    zsock_set_linger (sock, linger_ms);
    if (secure_client (sock, cfg, err, errlen) != 0) {
        if (bad_cert)
            *bad_cert = 1;
        zsock_destroy (&sock);
        return NULL;
    }
    if (zsock_connect (sock, "%s", endpoint) != 0) {
        snprintf (err, errlen, "cannot connect to %s at '%s'", what, endpoint);
        zsock_destroy (&sock);
    }
    return sock;
}

void
secure_server (zsock_t *sock, zcert_t *cert)
{
    zcert_apply (cert, sock);
    zsock_set_curve_server (sock, 1);
}

const char *
secure_peer_key (zframe_t *frame)
{
    const char *key = frame ? zframe_meta (frame, "User-Id") : NULL;
    return key && *key ? key : NULL;
}

const char *
secure_hint (const config_t *cfg)
{
    return secure_on (cfg) ? " (CURVE is on: is security/broker_cert the broker's public "
                             "certificate, and this program's security/client_cert in the "
                             "broker's clients directory?)"
                           : "";
}
