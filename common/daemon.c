// daemon.c — the command line every pivfarm daemon shares (see cli.h), and
// what the daemons tell the service manager (see daemon.h). Apart from
// cli.c so that programs without a configuration file (pivfarm-piv) do not
// link the configuration loader and czmq with it, nor libsystemd.

#include "common/daemon.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/util.h"
#include "common/version.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>
#include <time.h>
#include <unistd.h>

// What cli_daemon loaded, for daemon_reload_config.
static char s_config_path[PATH_MAX];
static int s_verbose;

static void s_log_level (const config_t *cfg, int quiet);

int
cli_daemon (int argc, char **argv, const char *program, const char *what, config_t *cfg)
{
    const char *path = NULL;
    int verbose = 0, to_syslog = 0, opt;
    static const struct option options[] = {{"config", required_argument, NULL, 'c'},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"syslog", no_argument, NULL, 'S'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    log_open (program, 0);
    cli_set_program (program);
    opterr = 0;
    while ((opt = getopt_long (argc, argv, ":c:vhV", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'v':
            verbose = 1;
            break;
        case 'S':
            to_syslog = 1;
            break;
        case 'h':
            printf ("usage: %s -c FILE [-v] [--syslog]\n"
                    "%s\n"
                    "  -c, --config FILE   pivfarm configuration (ZPL; installed as\n"
                    "                      /etc/pivfarm/pivfarm.conf)\n"
                    "  -v, --verbose       log more (every file, pair, agent)\n"
                    "      --syslog        log to syslog instead of stderr\n"
                    "  -h, --help          this text\n"
                    "  -V, --version       the version\n"
                    "exit status: 0 stopped by SIGINT or SIGTERM; 1 failed while running;\n"
                    "2 bad usage, a bad configuration, or cannot start (doc/conventions.md)\n",
                    program, what);
            return 0;
        case 'V':
            printf ("%s %s\n", program, PIVFARM_VERSION);
            return 0;
        default:
            return cli_bad_option (opt, argv);
        }
    }
    if (optind != argc)
        return cli_usage_error ("unexpected argument '%s'", argv[optind]);
    if (!path)
        return cli_usage_error ("no configuration: give -c FILE");
    log_open (program, to_syslog);
    if (verbose)
        log_set_level (LOG_LEVEL_INFO);
    char err[1024];
    if (config_load (cfg, path, err, sizeof err) != 0) {
        log_error ("%s", err);
        return 2;
    }
    daemon_remember (path, verbose, cfg);
    return -1;
}

void
daemon_remember (const char *path, int verbose, const config_t *cfg)
{
    snprintf (s_config_path, sizeof s_config_path, "%s", path ? path : "");
    s_verbose = verbose;
    s_log_level (cfg, 1);
}

int
daemon_unit_instance (const char *program, char *buf, size_t size)
{
    *buf = 0;
    char *unit = NULL;
    if (sd_pid_get_unit (0, &unit) < 0 || !unit)
        return -1;
    // 'pivfarm-agent@gpu.service': what lies between the '@' and the suffix.
    size_t len = strlen (program), all = strlen (unit);
    const char *suffix = ".service";
    int ok = all > len + 1 + strlen (suffix) && strncmp (unit, program, len) == 0
             && unit[len] == '@' && strcmp (unit + all - strlen (suffix), suffix) == 0;
    if (ok)
        snprintf (buf, size, "%.*s", (int) (all - len - 1 - strlen (suffix)), unit + len + 1);
    free (unit);
    return ok ? 0 : -1;
}

int
daemon_hangup_fd (void)
{
    sigset_t set;
    sigemptyset (&set);
    sigaddset (&set, SIGHUP);
    if (pthread_sigmask (SIG_BLOCK, &set, NULL) != 0)
        return -1;
    int fd = signalfd (-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) {
        int saved = errno;
        pthread_sigmask (SIG_UNBLOCK, &set, NULL);
        errno = saved;
    }
    return fd;
}

int
daemon_hangup_take (int fd)
{
    struct signalfd_siginfo info;
    int got = 0;
    while (read (fd, &info, sizeof info) == (ssize_t) sizeof info)
        got |= info.ssi_signo == SIGHUP;
    return got;
}

void
daemon_ready (const char *status)
{
    if (status && *status)
        sd_notifyf (0, "READY=1\nSTATUS=%s", status);
    else
        sd_notify (0, "READY=1");
}

void
daemon_reloading (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    sd_notifyf (0, "RELOADING=1\nMONOTONIC_USEC=%llu",
                (unsigned long long) ts.tv_sec * 1000000ULL + (unsigned long long) ts.tv_nsec / 1000);
}

void
daemon_stopping (void)
{
    sd_notify (0, "STOPPING=1");
}

int
daemon_reload_config (config_t *cfg, char *err, size_t errlen)
{
    if (!*s_config_path) {
        snprintf (err, errlen, "no configuration file to reload (started without -c)");
        return -1;
    }
    config_t fresh;
    if (config_load (&fresh, s_config_path, err, errlen) != 0)
        return -1;
    *cfg = fresh;
    return 0;
}

// The level of log/level, at least info with -v; said when it changes
// unless quiet.
static void
s_log_level (const config_t *cfg, int quiet)
{
    log_level_t level = LOG_LEVEL_NOTICE;
    if (log_level_parse (cfg->log.level, &level) != 0)
        level = LOG_LEVEL_NOTICE;  // config_load accepts no other value
    if (s_verbose && level < LOG_LEVEL_INFO)
        level = LOG_LEVEL_INFO;
    if (level == log_threshold)
        return;
    log_level_t before = log_threshold;
    log_set_level (level);
    if (!quiet) {
        static const char *const names[] = {"error", "warning", "notice", "info", "debug"};
        // Said at notice whatever the levels, so that a reload is on record.
        log_write (LOG_LEVEL_NOTICE, "reload: log level %s (was %s)", names[level], names[before]);
    }
}

void
daemon_apply_log_level (const config_t *cfg)
{
    s_log_level (cfg, 0);
}

void
daemon_reload (daemon_reload_fn *reload, void *owner)
{
    daemon_reloading ();
    config_t cfg;
    char err[1024];
    if (daemon_reload_config (&cfg, err, sizeof err) != 0)
        log_error ("reload: %s; nothing changed", err);
    else {
        daemon_apply_log_level (&cfg);
        reload (owner, &cfg);
    }
    daemon_ready ("running");
}

// The SIGHUP watch of one reactor.
typedef struct {
    int fd;                    // the signalfd
    daemon_reload_fn *reload;  // what the reactor applies
    void *owner;               // the reactor
} s_hangup_watch_t;

static int
s_on_hangup (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void) loop, (void) item;
    s_hangup_watch_t *w = arg;
    if (daemon_hangup_take (w->fd))
        daemon_reload (w->reload, w->owner);
    return 0;
}

void *
daemon_watch_hangup (void *loop, int fd, daemon_reload_fn *reload, void *owner)
{
    s_hangup_watch_t *w = calloc (1, sizeof *w);
    if (!w)
        return NULL;
    *w = (s_hangup_watch_t) {fd, reload, owner};
    zmq_pollitem_t item = {.fd = fd, .events = ZMQ_POLLIN};
    if (zloop_poller ((zloop_t *) loop, &item, s_on_hangup, w) != 0) {
        free (w);
        return NULL;
    }
    return w;
}
