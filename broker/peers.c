// peers.c — who may do what (peers.h; doc/security.md, "Threat model"):
// the certificates' directories, zauth, each key's roles (a cached answer
// a second old at most), and refused messages logged within a bound.

#include "broker/peers.h"
#include "common/log.h"
#include "common/secure.h"
#include "common/util.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KEY_RECHECK_NS 1000000000LL  // a key's rights are looked up again after a second
#define KEY_CACHE_MAX 4096           // answers kept at once
#define REFUSED_PER_SECOND 20        // refusal lines logged a second, at most
#define REFUSED_KEYS_MAX 1024        // keys whose refusals are counted at once
#define REFUSED_SUMMARY_NS (60 * 1000000000LL)   // a key's summary at most this often
#define REFUSED_FORGET_NS (600 * 1000000000LL)   // a key quiet this long is forgotten

struct _peers_t {
    zactor_t *auth;               // zauth: CURVE clients allowed to connect (curve on), or NULL
    zcertstore_t *operators;      // keys allowed to change things (curve on), or NULL
    zcertstore_t *keys_clients;   // every admitted key (curve on), or NULL
    zcertstore_t *keys_watchers;  // keys that may use ingest (curve on), or NULL
    zcertstore_t *keys_agents;    // keys that may use work (curve on), or NULL
    zhashx_t *key_cache;          // "<role>:<key>" -> s_key_seen_t, each answer kept a second
    int64_t quiet_second;         // refusals logged in this second ...
    int quiet_logged;             // ... this many ...
    int64_t quiet_dropped;        // ... and not logged since the last line that was
    zhashx_t *refusals;           // "socket: key K" -> s_refusal_t: keys refused lately, or NULL
};

// A key whose messages are refused (peers_refused_key).
typedef struct {
    int64_t logged_ns;  // its last line (in full, or a summary)
    int64_t last_ns;    // its last refusal
    int64_t count;      // refusals since that line, not logged
} s_refusal_t;

typedef struct {
    int64_t until;  // the answer holds until then
    int ok;         // the answer
} s_key_seen_t;

static void
s_free_item (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

peers_t *
peers_new (void)
{
    return calloc (1, sizeof (peers_t));
}

void
peers_destroy (peers_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    peers_t *self = *self_p;
    zactor_destroy (&self->auth);
    zcertstore_destroy (&self->operators);
    zcertstore_destroy (&self->keys_clients);
    zcertstore_destroy (&self->keys_watchers);
    zcertstore_destroy (&self->keys_agents);
    zhashx_destroy (&self->key_cache);
    zhashx_destroy (&self->refusals);
    free (self);
    *self_p = NULL;
}

int
peers_curve (const peers_t *self)
{
    return self->auth != NULL;
}

void
peers_recheck (peers_t *self)
{
    if (self->key_cache)
        zhashx_purge (self->key_cache);
}

// Logs a line of refusal within REFUSED_PER_SECOND lines a second.
static void
s_refused_line (peers_t *self, const char *line)
{
    int64_t second = util_time_ns () / 1000000000;
    if (second != self->quiet_second) {
        self->quiet_second = second;
        self->quiet_logged = 0;
    }
    if (self->quiet_logged >= REFUSED_PER_SECOND) {
        self->quiet_dropped++;
        return;
    }
    self->quiet_logged++;
    if (self->quiet_dropped)
        log_warning ("%s (and %lld refusal(s) not logged before it)", line,
                     (long long) self->quiet_dropped);
    else
        log_warning ("%s", line);
    self->quiet_dropped = 0;
}

static void
s_refused_v (peers_t *self, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf (line, sizeof line, fmt, ap);
    s_refused_line (self, line);
}

void
peers_refused (peers_t *self, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    s_refused_v (self, fmt, ap);
    va_end (ap);
}

// A refusal followed by its 'slot' (as its summary names it): see
// peers_refused_key.
static void
s_refused_followed (peers_t *self, const char *slot, int64_t now, const char *fmt, va_list ap)
{
    if (!self->refusals && (self->refusals = zhashx_new ()))
        zhashx_set_destructor (self->refusals, s_free_item);
    s_refusal_t *seen = self->refusals ? zhashx_lookup (self->refusals, slot) : NULL;
    if (seen) {
        seen->count++;
        seen->last_ns = now;
        return;
    }
    // A key not followed yet (or no room to follow it: logged as any
    // refusal, within the lines a second).
    if (self->refusals && zhashx_size (self->refusals) < REFUSED_KEYS_MAX
        && (seen = calloc (1, sizeof *seen))) {
        seen->logged_ns = seen->last_ns = now;
        zhashx_insert (self->refusals, slot, seen);
    }
    s_refused_v (self, fmt, ap);
}

void
peers_refused_key (peers_t *self, const char *socket, const char *key, int64_t now,
                   const char *fmt, ...)
{
    char slot[128];  // as its summary names it
    snprintf (slot, sizeof slot, "%s: key %s", socket, key);
    va_list ap;
    va_start (ap, fmt);
    s_refused_followed (self, slot, now, fmt, ap);
    va_end (ap);
}

void
peers_refused_agent (peers_t *self, const char *id, int64_t now, const char *fmt, ...)
{
    char slot[128];
    snprintf (slot, sizeof slot, "work: agent '%.100s'", id);
    va_list ap;
    va_start (ap, fmt);
    s_refused_followed (self, slot, now, fmt, ap);
    va_end (ap);
}

void
peers_tick (peers_t *self, int64_t now)
{
    if (!self->refusals || zhashx_size (self->refusals) == 0)
        return;
    zlistx_t *quiet = zlistx_new ();
    for (s_refusal_t *seen = zhashx_first (self->refusals); seen;
         seen = zhashx_next (self->refusals)) {
        const char *slot = zhashx_cursor (self->refusals);
        if (seen->count > 0 && now - seen->logged_ns >= REFUSED_SUMMARY_NS) {
            char line[256];
            snprintf (line, sizeof line, "%s: %lld more message(s) refused in the last %lld s",
                      slot, (long long) seen->count,
                      (long long) ((now - seen->logged_ns + 500000000) / 1000000000));
            s_refused_line (self, line);
            seen->count = 0;
            seen->logged_ns = now;
        }
        else if (seen->count == 0 && now - seen->last_ns >= REFUSED_FORGET_NS && quiet)
            zlistx_add_end (quiet, (void *) slot);
    }
    // Deleted once the walk is over (a delete would end it).
    for (const char *slot = quiet ? zlistx_first (quiet) : NULL; slot; slot = zlistx_next (quiet))
        zhashx_delete (self->refusals, slot);
    zlistx_destroy (&quiet);
}

int
peers_allowed (peers_t *self, const char *key, broker_role_t role)
{
    if (!self->auth)
        return 1;
    if (!key || !*key)
        return 0;
    char slot[64];
    snprintf (slot, sizeof slot, "%d:%s", (int) role, key);
    int64_t now = util_time_ns ();
    s_key_seen_t *seen = zhashx_lookup (self->key_cache, slot);
    if (seen && now < seen->until)
        return seen->ok;
    // zcertstore_lookup re-reads its directory when it changed: a file
    // removed takes the key's rights away, a file added gives them.
    zcertstore_t *store = role == BROKER_ROLE_WATCHER  ? self->keys_watchers
                          : role == BROKER_ROLE_AGENT  ? self->keys_agents
                          : role == BROKER_ROLE_OPERATOR ? self->operators
                                                         : NULL;
    int ok = zcertstore_lookup (self->keys_clients, key) != NULL
             && (!store || zcertstore_lookup (store, key) != NULL);
    if (!seen) {
        if (zhashx_size (self->key_cache) >= KEY_CACHE_MAX)
            zhashx_purge (self->key_cache);
        if (!(seen = calloc (1, sizeof *seen)))
            return ok;
        zhashx_insert (self->key_cache, slot, seen);
    }
    seen->until = now + KEY_RECHECK_NS;
    seen->ok = ok;
    return ok;
}

// A directory of certificates the configuration names with 'key'; 0, or -1
// with err.
static int
s_cert_dir (const char *path, const char *key, char *err, size_t errlen)
{
    struct stat st;
    int found = stat (path, &st) == 0;
    if (found && S_ISDIR (st.st_mode))
        return 0;
    snprintf (err, errlen, "cannot read the directory of certificates '%s' (%s): %s", path, key,
              found ? "not a directory" : strerror (errno));
    return -1;
}

zcert_t *
peers_secure (peers_t *self, const config_t *cfg, char *err, size_t errlen)
{
    zcert_t *cert =
        secure_cert_load (cfg->security.broker_cert, "security/broker_cert", 1, err, errlen);
    if (!cert || s_cert_dir (cfg->security.clients, "security/clients", err, errlen)
        || s_cert_dir (cfg->security.operators, "security/operators", err, errlen))
        goto fail;
    self->auth = zactor_new (zauth, NULL);
    self->operators = zcertstore_new (cfg->security.operators);
    // The roles, beside zauth's own store: each message's key is looked up
    // in them (peers_allowed). The directories may be absent: no key
    // has that role until one is made.
    char dir[PATH_MAX + 16];
    self->keys_clients = zcertstore_new ((char *) cfg->security.clients);
    snprintf (dir, sizeof dir, "%s/watchers", cfg->security.clients);
    self->keys_watchers = zcertstore_new (dir);
    snprintf (dir, sizeof dir, "%s/agents", cfg->security.clients);
    self->keys_agents = zcertstore_new (dir);
    self->key_cache = zhashx_new ();
    if (self->key_cache)
        zhashx_set_destructor (self->key_cache, s_free_item);
    if (!self->auth || !self->operators || !self->keys_clients || !self->keys_watchers
        || !self->keys_agents || !self->key_cache) {
        snprintf (err, errlen, "cannot start the authenticator: out of memory");
        goto fail;
    }
    zstr_sendx (self->auth, "CURVE", cfg->security.clients, NULL);
    zsock_wait (self->auth);
    return cert;
fail:
    zcert_destroy (&cert);
    return NULL;
}
