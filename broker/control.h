// control.h — the control stage (control.c; doc/control.md): the command
// table of the control socket, each command's arguments and names checked,
// operators' rights, and each command handed to the stage that owns its
// state. It asks the reactor only for a commit (control_host_t).

#ifndef BROKER_CONTROL_H
#define BROKER_CONTROL_H

#include "broker/peers.h"
#include "broker/stages.h"

#include <czmq.h>

typedef struct _control_t control_t;

// What the control stage is given (not owned).
typedef struct {
    stages_t stages;          // the stages it works on (status reads them too)
    zloop_t *loop;            // replays' timers run here
    zsock_t *publish;         // replayed feedback messages go out here
    const char *settings;     // the PIV settings of an experiment without its own
    peers_t *peers;           // readers' and operators' keys
    void *arg;                // for commit:
    int (*commit) (void *arg);  // commits now: 0, or -1 (the store failed)
} control_host_t;

// NULL without memory.
control_t *control_new (const control_host_t *host);
void control_destroy (control_t **self_p);
// One REQUEST of the control socket, read from 'reader' and answered on it.
void control_on_request (control_t *self, zsock_t *reader);

#endif
