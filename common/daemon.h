// daemon.h — what the three daemons (broker, watcher, agent) share with the
// service manager: readiness, reload and stop notifications (sd_notify, to
// $NOTIFY_SOCKET: nothing happens without one), and SIGHUP as a file
// descriptor their reactor polls. Only the daemons link libsystemd: the
// other programs never reach these functions (cli_daemon is in the same
// object, which they do not link).

#ifndef COMMON_DAEMON_H
#define COMMON_DAEMON_H

#include "common/config.h"

#include <stddef.h>

// The instance of the template unit '<program>@<instance>.service' that
// systemd runs this process as (sd_pid_get_unit), into 'buf'; 0, or -1
// (not run as an instance of that template: 'buf' is empty).
int daemon_unit_instance (const char *program, char *buf, size_t size);

// Blocks SIGHUP in the calling thread and every thread it starts later (call
// it first in main, before anything starts a thread) and returns a
// non-blocking signalfd that becomes readable when SIGHUP arrives; -1 with
// errno if it cannot be made (SIGHUP then stays at its default).
int daemon_hangup_fd (void);

// Drains the signalfd: 1 if at least one SIGHUP was pending, else 0.
int daemon_hangup_take (int fd);

// Tells the service manager: READY=1 (the sockets are bound, the store or
// root is open: 'systemctl start' returns), RELOADING=1 (with
// MONOTONIC_USEC, as Type=notify-reload wants), STOPPING=1, or a STATUS=
// line. Each does nothing without $NOTIFY_SOCKET.
void daemon_ready (const char *status);
void daemon_reloading (void);
void daemon_stopping (void);

// Loads the configuration file cli_daemon loaded at start again into *cfg,
// with the same -v as then (the log level is log/level, at least info with
// -v). 0, or -1 with err naming the file and key (*cfg is untouched).
int daemon_reload_config (config_t *cfg, char *err, size_t errlen);

// For a daemon that parses its own command line (the agent): the file
// daemon_reload_config loads again (NULL or "": none) and whether -v was
// given, and applies cfg's log level (quietly). cli_daemon does this itself.
void daemon_remember (const char *path, int verbose, const config_t *cfg);

// Applies the configuration's log level (log/level; at least info when the
// daemon was started with -v), and says so when it changes.
void daemon_apply_log_level (const config_t *cfg);

// What a reactor applies of a configuration read again (broker_reload,
// watcher_reload): 0, or -1 (it says why in the log).
typedef int (daemon_reload_fn) (void *owner, const config_t *cfg);

// One reload: RELOADING=1, the configuration read again
// (daemon_reload_config), its log level applied and reload (owner, cfg)
// called, READY=1; a file that no longer loads changes nothing (logged).
void daemon_reload (daemon_reload_fn *reload, void *owner);

// Watches the SIGHUP signalfd 'fd' (daemon_hangup_fd) in 'loop' (a zloop_t):
// on each SIGHUP the configuration is read again (daemon_reload_config),
// its log level applied and reload (owner, cfg) called, between RELOADING=1
// and READY=1; a file that no longer loads changes nothing (logged). Returns
// the watch, which the caller frees (free) once the loop is destroyed; NULL
// with nothing watched on no memory.
void *daemon_watch_hangup (void *loop, int fd, daemon_reload_fn *reload, void *owner);

#endif
