// control_lifecycle.c — the store's lifecycle over the control socket
// (doc/storage.md, "Backup, purge, vacuum, forgetting agents"): backup, on
// a thread of its own (a zactor with its own connection to the store, so
// the reactor serves on while gigabytes are copied and checked), and its
// state as 'backup status' reads it.
//
// Pipe protocol (string frames):
//   broker -> backup   $TERM (ends a copy under way: nothing is kept)
//   backup -> broker   DONE FILE BYTES PAGES SECONDS
//                      FAILED FILE MESSAGE

#include "broker/control_cmd.h"
#include "common/log.h"
#include "common/util.h"

#include <czmq.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _lifecycle_t {
    zloop_t *loop;            // the backup's pipe is read here
    store_t *store;           // for the events
    zactor_t *backup;         // the copy under way, or NULL
    char state[16];           // of the last backup: "", running, done or failed
    char file[PATH_MAX];      // its file
    char error[1024];         // why it failed
    int64_t bytes, pages;     // done: the copy's size and pages
    double seconds;           // and how long it took (copy and check)
    int64_t started_ns;       // when it began
};

// What the backup thread is given (freed by it).
typedef struct {
    char *store;  // the store's path
    char *file;   // the backup's
} s_job_t;

// The stop flag of store_backup_file: a $TERM on the pipe.
static int
s_stopped (void *arg)
{
    zsock_t *pipe = arg;
    if (!(zsock_events (pipe) & ZMQ_POLLIN))
        return 0;
    char *command = zstr_recv (pipe);
    zstr_free (&command);
    return 1;  // $TERM, or anything: the broker wants it over
}

static void
s_backup_actor (zsock_t *pipe, void *args)
{
    s_job_t *job = args;
    zsock_signal (pipe, 0);
    store_backup_info_t info;
    char err[PATH_MAX * 2 + 512];
    int terminated = 0;
    if (store_backup_file (job->store, job->file, 0, s_stopped, pipe, &info, err, sizeof err) == 0) {
        char bytes[32], pages[32], seconds[32];
        snprintf (bytes, sizeof bytes, "%" PRId64, info.bytes);
        snprintf (pages, sizeof pages, "%" PRId64, info.pages);
        snprintf (seconds, sizeof seconds, "%.3f", info.seconds);
        zstr_sendx (pipe, "DONE", job->file, bytes, pages, seconds, NULL);
    }
    else {
        terminated = strstr (err, "was stopped") != NULL;
        zstr_sendx (pipe, "FAILED", job->file, err, NULL);
    }
    free (job->store);
    free (job->file);
    free (job);
    while (!terminated) {
        char *command = zstr_recv (pipe);
        terminated = !command || strcmp (command, "$TERM") == 0;
        zstr_free (&command);
    }
}

lifecycle_t *
lifecycle_new (zloop_t *loop, store_t *store)
{
    lifecycle_t *self = calloc (1, sizeof *self);
    if (self)
        *self = (lifecycle_t) {.loop = loop, .store = store};
    return self;
}

static void
s_end_backup (lifecycle_t *self)
{
    if (!self->backup)
        return;
    zloop_reader_end (self->loop, zactor_sock (self->backup));
    zactor_destroy (&self->backup);
}

void
lifecycle_destroy (lifecycle_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_end_backup (*self_p);
    free (*self_p);
    *self_p = NULL;
}

// The backup thread's answer: the copy is there and verified, or it failed
// (nothing left behind). Logged, and an event.
static int
s_on_backup (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    lifecycle_t *self = arg;
    char *what = NULL, *file = NULL, *a = NULL, *b = NULL, *c = NULL;
    if (zstr_recvx (reader, &what, &file, &a, &b, &c, NULL) < 3 || !what || !file) {
        zstr_free (&what), zstr_free (&file), zstr_free (&a), zstr_free (&b), zstr_free (&c);
        return 0;
    }
    int64_t now = util_time_ns ();
    if (strcmp (what, "DONE") == 0 && b && c) {
        snprintf (self->state, sizeof self->state, "done");
        self->bytes = strtoll (a, NULL, 10);
        self->pages = strtoll (b, NULL, 10);
        self->seconds = strtod (c, NULL);
        log_notice ("backup: the store is copied into '%s': %" PRId64 " bytes, %" PRId64
                    " pages in %.2f s, integrity ok",
                    file, self->bytes, self->pages, self->seconds);
        char payload[PATH_MAX + 128];
        snprintf (payload, sizeof payload, "file=%s bytes=%" PRId64 " pages=%" PRId64 " seconds=%.3f",
                  file, self->bytes, self->pages, self->seconds);
        if (store_event (self->store, "backup", 0, 0, payload, now) < 0)
            log_warning ("backup: cannot record the backup into '%s' in the log: %s", file,
                         store_error (self->store));
    }
    else {
        snprintf (self->state, sizeof self->state, "failed");
        snprintf (self->error, sizeof self->error, "%s", a ? a : "?");
        log_warning ("backup: %s", self->error);
    }
    zstr_free (&what), zstr_free (&file), zstr_free (&a), zstr_free (&b), zstr_free (&c);
    s_end_backup (self);
    return 0;
}

// The last backup as 'backup' and 'backup status' answer it.
static void
s_put_backup (control_cmd_t *cmd, lifecycle_t *self)
{
    text_put (&cmd->body, "{\"backup\":{\"state\":");
    text_put_string (&cmd->body, *self->state ? self->state : "none");
    if (*self->state) {
        text_put (&cmd->body, ",\"file\":");
        text_put_string (&cmd->body, self->file);
        text_put (&cmd->body, ",\"started_ns\":%" PRId64, self->started_ns);
    }
    if (strcmp (self->state, "done") == 0)
        text_put (&cmd->body,
                  ",\"bytes\":%" PRId64 ",\"pages\":%" PRId64 ",\"seconds\":%.3f,"
                  "\"integrity\":\"ok\",\"schema\":%d",
                  self->bytes, self->pages, self->seconds, STORE_SCHEMA_VERSION);
    if (strcmp (self->state, "failed") == 0) {
        text_put (&cmd->body, ",\"error\":");
        text_put_string (&cmd->body, self->error);
    }
    text_put (&cmd->body, "}}");
}

int
control_backup (control_cmd_t *cmd)
{
    const char *usage = "backup FILE | backup status";
    if (cmd_expect (cmd, 0, 2, 2, usage))
        return -1;
    lifecycle_t *self = cmd->self->lifecycle;
    if (strcmp (cmd->argv[1], "status") == 0) {
        s_put_backup (cmd, self);
        return 0;
    }
    const char *file = cmd->argv[1];
    if (cmd_refuse_path (cmd, "FILE", file))
        return -1;
    if (self->backup)
        return cmd_refuse (cmd, 409,
                           "backup: a backup into '%s' is under way: wait for it ('pivctl backup "
                           "status')",
                           self->file);
    // What is acknowledged so far goes into the copy.
    if (cmd_commit (cmd))
        return -1;
    char store[PATH_MAX];
    if (!realpath (cmd->self->cfg->broker.store, store))
        snprintf (store, sizeof store, "%s", cmd->self->cfg->broker.store);
    s_job_t *job = calloc (1, sizeof *job);
    if (job && (!(job->store = strdup (store)) || !(job->file = strdup (file)))) {
        free (job->store);
        free (job);
        job = NULL;
    }
    if (job)
        self->backup = zactor_new (s_backup_actor, job);
    if (!self->backup) {
        if (job)
            free (job->store), free (job->file), free (job);
        return cmd_refuse (cmd, 500, "backup: cannot start the backup thread for '%s'", file);
    }
    zloop_reader (self->loop, zactor_sock (self->backup), s_on_backup, self);
    snprintf (self->state, sizeof self->state, "running");
    snprintf (self->file, sizeof self->file, "%s", file);
    self->error[0] = '\0';
    self->bytes = self->pages = 0;
    self->seconds = 0;
    self->started_ns = util_time_ns ();
    log_notice ("backup: copying the store '%s' into '%s'", store, file);
    s_put_backup (cmd, self);
    return 0;
}
