// agent_main.c — pivfarm-agent: a worker agent of the job farm.
// Exit status: 0 stopped by SIGINT/SIGTERM after finishing its tasks,
// 1 failed while running, 2 bad usage (one line, cli_usage_error) or
// configuration, or cannot start (doc/conventions.md).

#include "agents/agent.h"
#include "agents/process.h"
#include "common/config.h"
#include "common/cli.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/secure.h"
#include "common/util.h"
#include "common/version.h"
#include "piv/calib.h"
#include "piv/settings.h"
#include "piv/image.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_usage (FILE *out)
{
    fprintf (out, "usage: pivfarm-agent (-c FILE | --broker ENDPOINT) [options]\n"
                  "  -c, --config FILE       pivfarm configuration (ZPL; installed as\n"
                  "                          /etc/pivfarm/pivfarm.conf)\n"
                  "  -b, --broker ENDPOINT   the broker's work socket (default: agent/broker)\n"
                  "  -t, --threads N         worker threads (default: agent/threads; 0: the CPUs it\n"
                  "                          may run on)\n"
                  "  -p, --processor P       piv | noop | exec:PROGRAM (default: agent/processor)\n"
                  "  -r, --results DIR       where result files go (default: agent/results)\n"
                  "      --drain-s S         stopping, finish held tasks for at most S s, then\n"
                  "                          hand them back (default: agent/drain_s)\n"
                  "  -i, --id NAME           this agent's name (default: the host name)\n"
                  "  -v, --verbose           log every task\n"
                  "      --check             check what the agent needs here (configuration,\n"
                  "                          processor, results directory, certificates) and\n"
                  "                          exit: 0 ready, 2 not (one line saying why)\n"
                  "      --syslog            log to syslog instead of stderr\n"
                  "  -h, --help              this text\n"
                  "  -V, --version           the version\n"
                  "exit status: 0 stopped by SIGINT or SIGTERM; 1 failed while running;\n"
                  "2 bad usage, a bad configuration, or cannot start (doc/conventions.md)\n");
}

// What the agent applies of a reload: the log level (daemon_reload applies
// it); the rest is read at start only and needs a restart, which the log says.
static int
s_reload (void *owner, const config_t *cfg)
{
    (void) owner, (void) cfg;
    log_notice ("reload: applied log/level; every other key is read at start only "
                "(systemctl restart pivfarm-agent@NAME to apply it)");
    return 0;
}

// SIGHUP, on a thread of its own (the agent's reactor is agent.c's).
static void *
s_hangup_thread (void *arg)
{
    int fd = (int) (intptr_t) arg;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (poll (&pfd, 1, -1) >= 0 || errno == EINTR)
        if (daemon_hangup_take (fd))
            daemon_reload (s_reload, NULL);
    return NULL;
}

// Watches SIGHUP (blocked in every thread: call before any starts).
static void
s_hangup_start (void)
{
    int fd = daemon_hangup_fd ();
    pthread_t thread;
    if (fd >= 0 && pthread_create (&thread, NULL, s_hangup_thread, (void *) (intptr_t) fd) == 0)
        pthread_detach (thread);
}

// --check: what agent_new needs of this host, without saying HELLO (a
// scheduler's job runs it on every node before the agents start): the
// processor (its results directory made and writable), and with CURVE on,
// the certificates. 0 ready (one line on stdout), 2 not (one error line).
static int
s_check (const config_t *cfg)
{
    char err[1024];
    process_t *proc = process_new (cfg, err, sizeof err);
    if (!proc) {
        log_error ("%s", err);
        return 2;
    }
    process_destroy (&proc);
    const char *endpoint = *cfg->agent.broker ? cfg->agent.broker : cfg->broker.work;
    zsock_t *sock = secure_connect (ZMQ_DEALER, cfg, endpoint, "the broker", 0, err, sizeof err,
                                    NULL);
    if (!sock) {
        log_error ("%s", err);
        return 2;
    }
    zsock_destroy (&sock);
    char *host = agent_hostname ();
    printf ("pivfarm-agent: ready on %s: processor %s, results %s, broker %s%s\n",
            host ? host : "this host", cfg->agent.processor, cfg->agent.results, endpoint,
            secure_on (cfg) ? " (CURVE certificates read)" : "");
    free (host);
    return 0;
}

int
main (int argc, char **argv)
{
    config_rules ("piv", piv_settings_check_key);
    config_rules ("calibration", piv_calib_check_key);
    config_role ("agent");
    s_hangup_start ();
    const char *path = NULL, *broker = NULL, *processor = NULL, *results = NULL, *id = NULL;
    long threads = -1, drain_s = -1;
    int verbose = 0, to_syslog = 0, check = 0;
    static const struct option options[] = {{"config", required_argument, NULL, 'c'},
                                             {"broker", required_argument, NULL, 'b'},
                                             {"threads", required_argument, NULL, 't'},
                                             {"processor", required_argument, NULL, 'p'},
                                             {"results", required_argument, NULL, 'r'},
                                             {"id", required_argument, NULL, 'i'},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"check", no_argument, NULL, 'C'},
                                             {"drain-s", required_argument, NULL, 'D'},
                                             {"syslog", no_argument, NULL, 'S'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    log_open ("pivfarm-agent", 0);
    cli_set_program ("pivfarm-agent");
    opterr = 0;
    int opt;
    char *end;
    while ((opt = getopt_long (argc, argv, ":c:b:t:p:r:i:vhV", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'b':
            broker = optarg;
            break;
        case 't':
            errno = 0;
            threads = strtol (optarg, &end, 10);
            if (errno || *end || end == optarg || threads < 0 || threads > 1024)
                return cli_usage_error ("bad --threads '%s': a number from 0 (one per core) "
                                        "to 1024",
                                        optarg);
            break;
        case 'p':
            processor = optarg;
            break;
        case 'r':
            results = optarg;
            break;
        case 'i':
            id = optarg;
            break;
        case 'v':
            verbose = 1;
            break;
        case 'S':
            to_syslog = 1;
            break;
        case 'C':
            check = 1;
            break;
        case 'D':
            errno = 0;
            drain_s = strtol (optarg, &end, 10);
            if (errno || *end || end == optarg || drain_s < 0 || drain_s > 86400)
                return cli_usage_error ("bad --drain-s '%s': seconds from 0 to 86400", optarg);
            break;
        case 'h':
            s_usage (stdout);
            return 0;
        case 'V':
            printf ("pivfarm-agent %s\n", PIVFARM_VERSION);
            return 0;
        default:
            return cli_bad_option (opt, argv);
        }
    }
    if (optind != argc)
        return cli_usage_error ("unexpected argument '%s'", argv[optind]);
    if (!path && !broker)
        return cli_usage_error ("expected -c FILE or --broker ENDPOINT");
    log_open ("pivfarm-agent", to_syslog);
    if (verbose)
        log_set_level (LOG_LEVEL_INFO);
    config_t cfg;
    char err[1024];
    config_init (&cfg);
    if (path && config_load (&cfg, path, err, sizeof err) != 0) {
        log_error ("%s", err);
        return 2;
    }
    daemon_remember (path, verbose, &cfg);
    if (broker)
        snprintf (cfg.agent.broker, sizeof cfg.agent.broker, "%s", broker);
    if (threads >= 0)
        cfg.agent.threads = (int) threads;
    if (drain_s >= 0)
        cfg.agent.drain_s = (int) drain_s;
    if (processor)
        snprintf (cfg.agent.processor, sizeof cfg.agent.processor, "%s", processor);
    if (results)
        snprintf (cfg.agent.results, sizeof cfg.agent.results, "%s", results);
    if (check)
        return s_check (&cfg);
    int64_t io_size;
    if (util_parse_size (cfg.storage.io_size, &io_size) == 0)
        piv_image_set_read_block ((size_t) io_size);  // what iobench found best
    agent_t *agent = agent_new (&cfg, id, err, sizeof err);
    if (!agent) {
        log_error ("%s", err);
        return 2;
    }
    // Connected to the broker, its results directory checked.
    daemon_ready ("running");
    int rc = agent_run (agent);
    daemon_stopping ();
    agent_destroy (&agent);
    return rc == 0 ? 0 : 1;
}
