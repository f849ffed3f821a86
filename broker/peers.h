// peers.h — who may do what (peers.c; doc/security.md, "Threat model"):
// with security/curve on, the authenticator (zauth) admitting the keys of
// security/clients, each key's role looked up in its directory, and the
// log of refused messages, rate-limited. With it off every key may do
// everything.

#ifndef BROKER_PEERS_H
#define BROKER_PEERS_H

#include "common/config.h"

#include <czmq.h>
#include <stdint.h>

typedef struct _peers_t peers_t;

// What a CURVE key may do: each role is a directory of public certificates
// under security/clients.
typedef enum {
    BROKER_ROLE_READER,    // anywhere under clients/: control's reads, publish
    BROKER_ROLE_WATCHER,   // clients/watchers/: ingest
    BROKER_ROLE_AGENT,     // clients/agents/: work
    BROKER_ROLE_OPERATOR,  // security/operators (clients/operators/): control's changes
} broker_role_t;

// Peers with CURVE off (every key allowed) until peers_secure. NULL
// without memory.
peers_t *peers_new (void);
void peers_destroy (peers_t **self_p);
// For security/curve on: the broker's certificate (the caller destroys
// it), and zauth admitting the clients of the clients directory on every
// socket of this process (zauth serves ZAP for the whole ZeroMQ context).
// NULL with err on failure.
zcert_t *peers_secure (peers_t *self, const config_t *cfg, char *err, size_t errlen);
// 1 with CURVE on (zauth running), else 0.
int peers_curve (const peers_t *self);

// 1 if 'key' (Z85) may act in 'role' now: always with curve off; with it
// on, the key's certificate must be in the role's directory and under
// security/clients at this moment (a removed file revokes the key within
// a second, on open connections too). NULL key: 0 with curve on.
int peers_allowed (peers_t *self, const char *key, broker_role_t role);
// Forgets the answers kept: each key's directories are read again at its
// next message (a reload).
void peers_recheck (peers_t *self);

// Logs a refused message of a peer, at most 20 lines a second (the rest
// counted and summed up in the next line logged): a flood of forged
// messages must not flood the log.
void peers_refused (peers_t *self, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// Logs a message of the CURVE key 'key' (Z85) refused on 'socket' at
// 'now': its first refusal there in full ('fmt', which should name the key
// and say what to do), the later ones only counted and summed up by
// peers_tick, at most once a minute per key and socket ("work: key K: N
// more message(s) refused in the last 60 s"). A key quiet for ten minutes
// is forgotten: its next refusal is logged in full again. At most 1024
// keys are followed at once (beyond them, as peers_refused); every line
// counts against peers_refused's 20 a second.
void peers_refused_key (peers_t *self, const char *socket, const char *key, int64_t now,
                        const char *fmt, ...) __attribute__ ((format (printf, 5, 6)));
// As peers_refused_key, for the HELLOs of an agent whose id is taken:
// followed by the id ("work: agent 'ID': N more message(s) refused ...").
void peers_refused_agent (peers_t *self, const char *id, int64_t now, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
// The summaries of refused keys due at 'now', and keys quiet for ten
// minutes forgotten. The broker calls it on its heartbeat.
void peers_tick (peers_t *self, int64_t now);

#endif
