// secure.c — CURVE certificates of the security section applied to the
// farm's sockets; see secure.h and doc/security.md.

#include "common/secure.h"

#include "common/proto.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// zcert_secret_txt of a certificate loaded without its secret part.
#define NO_SECRET "0000000000000000000000000000000000000000"

// Who must be able to read a role's own secret key, said when it cannot:
// the usual cause is one file made for another program (the watcher's
// key, mode 0600, read by the web server or an operator).
static const struct {
    const char *role;    // config_role's name
    const char *whose;   // the key, in words
    const char *reader;  // who must read it, and how to give it
} s_roles[] = {
    {"watcher", "the watcher's key", "must be readable by the user the watcher runs as"},
    {"agent", "an agent's key",
     "must be readable by the user the agent runs as (pivfarm under systemd, the submitting "
     "user under Slurm)"},
    {"page", "the status page's key", "must be readable by the web server's user"},
    {"pivctl", "pivctl's key",
     "is not yours: give pivctl your own key pair with --cert FILE, $PIVFARM_CERT or "
     "~/.config/pivfarm/client.cert"},
};

// The message of a certificate that cannot be read, into err: the file, the
// key that named it, the cause, and what to do (for 'role', when the cause
// is a permission, who must read it).
static void
s_unreadable (const char *file, const char *key, const char *role, int secret, const char *why,
              int error, char *err, size_t errlen)
{
    const char *whose = NULL, *reader = NULL;
    for (size_t i = 0; role && i < sizeof s_roles / sizeof s_roles[0]; i++)
        if (strcmp (role, s_roles[i].role) == 0)
            whose = s_roles[i].whose, reader = s_roles[i].reader;
    // An operator's own key (--cert, $PIVFARM_CERT, ~/.config) is theirs.
    if (whose && strncmp (key, "security/", 9) != 0)
        whose = "your key", reader = "must be readable by you";
    if (whose && (error == EACCES || error == EPERM)) {
        struct passwd *pw = getpwuid (geteuid ());
        snprintf (err, errlen,
                  "cannot read the %s certificate '%s' (%s): %s; %s (%s) %s (this program runs "
                  "as %s, uid %d)",
                  secret ? "secret" : "public", file, key, why, whose, key, reader,
                  pw ? pw->pw_name : "?", (int) geteuid ());
    }
    else
        snprintf (err, errlen,
                  "cannot read the %s certificate '%s' (%s): %s; 'pivctl keygen NAME' makes one%s",
                  secret ? "secret" : "public", file, key, why,
                  role && strcmp (role, "pivctl") == 0 && strncmp (key, "security/", 9) == 0
                      ? " (an operator's own: --cert FILE, $PIVFARM_CERT or "
                        "~/.config/pivfarm/client.cert)"
                      : "");
}

// secure_cert_load for the certificate of 'role' (NULL: none).
static zcert_t *
s_cert_load (const char *path, const char *key, const char *role, int secret, char *err,
             size_t errlen)
{
    char secret_path[PATH_MAX + 8];
    snprintf (secret_path, sizeof secret_path, "%s_secret", path);
    const char *file = secret ? secret_path : path;
    struct stat st;
    const char *why = NULL;
    int error = 0;
    if (stat (file, &st) != 0 || access (file, R_OK) != 0)
        why = strerror (error = errno);
    else if (!S_ISREG (st.st_mode))
        why = "not a file";
    if (why) {
        s_unreadable (file, key, role, secret, why, error, err, errlen);
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
secure_on (const config_t *cfg)
{
    return strcmp (cfg->security.curve, "on") == 0;
}

zcert_t *
secure_cert_load (const char *path, const char *key, int secret, char *err, size_t errlen)
{
    return s_cert_load (path, key, NULL, secret, err, errlen);
}

int
secure_client (zsock_t *sock, const config_t *cfg, char *err, size_t errlen)
{
    if (!secure_on (cfg))
        return 0;
    zcert_t *mine = s_cert_load (cfg->security.cert, cfg->security.cert_key, cfg->security.role,
                                 1, err, errlen);
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
    static __thread char hint[PATH_MAX + 256];
    if (!secure_on (cfg))
        return "";
    snprintf (hint, sizeof hint,
              " (CURVE is on: is security/broker_cert the broker's public certificate, and this "
              "program's certificate, '%s' (%s), in the broker's clients directory?)",
              cfg->security.cert, cfg->security.cert_key);
    return hint;
}
