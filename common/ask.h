// ask.h — one round trip on the broker's control socket (doc/control.md):
// a REQUEST sent, its REPLY awaited and decoded, for pivctl and the status
// page. What to do with the answer (print it, exit with a code, show it on
// the page) stays with the caller.

#ifndef COMMON_ASK_H
#define COMMON_ASK_H

#include "common/config.h"

#include <signal.h>
#include <stddef.h>

typedef struct _ask_t ask_t;

// How a round trip ended.
typedef enum {
    ASK_OK = 0,      // a REPLY with status 200: its body is the caller's
    ASK_REFUSED,     // a REPLY with another status: err holds its one line (a line
                     // over PROTO_MAX_STRING bytes is refused here with 400, as the
                     // broker's codec would)
    ASK_SILENT,      // no REPLY within the timeout: err says so (with secure_hint)
    ASK_NONSENSE,    // something that is not a REPLY came back: err says what
    ASK_UNSENT,      // the REQUEST could not be sent: err names the line and the broker
    ASK_INTERRUPTED, // *stop became non-zero while waiting: err is untouched
    ASK_UNCONNECTED  // ask_once: no socket (ask_new failed): err from secure_connect
} ask_result_t;

// A DEALER connected to the broker's control socket (client/control, which
// is broker/control unless given; secure_connect: CURVE when security/curve
// is on). cfg must outlive the object. NULL with err; then *bad_cert (if
// not NULL) says whether the configuration was at fault: a certificate, or
// a bind address to connect to (config_connect).
ask_t *ask_new (const config_t *cfg, char *err, size_t errlen, int *bad_cert);

// Closes the connection. Accepts NULL; sets *self_p to NULL.
void ask_destroy (ask_t **self_p);

// Sends 'line' as a REQUEST and waits at most timeout_ms for the REPLY,
// in slices of 100 ms so that *stop (if 'stop' is not NULL), set by a
// signal handler, ends the wait at once. *status_p gets the REPLY's status
// (0 when none came); *body_p its body on ASK_OK (caller frees), else NULL.
// Returns an ask_result_t; err is filled for every result but ASK_OK and
// ASK_INTERRUPTED.
ask_result_t ask_request (ask_t *self, const char *line, int timeout_ms,
                          volatile sig_atomic_t *stop, int *status_p, char **body_p, char *err,
                          size_t errlen);

// ask_new, ask_request (no stop flag) and ask_destroy: one question on a
// connection of its own. A failed connection is ASK_UNCONNECTED with err
// from ask_new (secure_connect's words).
ask_result_t ask_once (const config_t *cfg, const char *line, int timeout_ms, int *status_p,
                       char **body_p, char *err, size_t errlen);

#endif
