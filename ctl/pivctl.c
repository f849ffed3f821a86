// pivctl.c — the operator's command line: asks the broker over its control
// socket and prints the answer. This first version knows 'status'.
// Exit status: 0 answered, 1 the broker refused or did not answer, 2 bad
// usage or configuration.

#include "common/config.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/version.h"

#include <czmq.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 3000

static void
s_usage (FILE *out)
{
    fprintf (out, "usage: pivctl -c FILE [--json] [--timeout MS] status\n"
                  "  -c, --config FILE   pivfarm configuration (broker/control is asked)\n"
                  "  -j, --json          print the broker's answer as JSON\n"
                  "      --timeout MS    give up after MS milliseconds (default %d)\n"
                  "commands:\n"
                  "  status              experiments with pairs by state, agents, queue\n",
             TIMEOUT_MS);
}

// Sends 'command' and waits for the reply; returns its body (caller frees)
// and status, or NULL with err.
static char *
s_ask (const char *endpoint, const char *command, int timeout_ms, uint32_t *status, char *err,
       size_t errlen)
{
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    if (!sock) {
        snprintf (err, errlen, "cannot make a socket");
        return NULL;
    }
    zsock_set_linger (sock, 0);
    zsock_set_maxmsgsize (sock, PROTO_MAX_MESSAGE);
    if (zsock_connect (sock, "%s", endpoint) != 0) {
        snprintf (err, errlen, "cannot connect to the broker at '%s'", endpoint);
        zsock_destroy (&sock);
        return NULL;
    }
    proto_msg_t req = {.command = PROTO_REQUEST, .text = (char *) command};
    char *body = NULL;
    if (proto_send (&req, NULL, sock) != 0) {
        snprintf (err, errlen, "cannot send to the broker at '%s'", endpoint);
        zsock_destroy (&sock);
        return NULL;
    }
    zpoller_t *poller = zpoller_new (sock, NULL);
    if (poller && zpoller_wait (poller, timeout_ms) == sock) {
        zmsg_t *zmsg = zmsg_recv (sock);
        proto_msg_t reply = {0};
        char why[512];
        if (proto_decode (&zmsg, &reply, why, sizeof why) != 0 || reply.command != PROTO_REPLY)
            snprintf (err, errlen, "the broker at '%s' answered nonsense: %s", endpoint,
                      reply.command ? "not a REPLY" : why);
        else {
            *status = reply.status;
            body = reply.text;
            reply.text = NULL;
        }
        proto_msg_release (&reply);
    }
    else
        snprintf (err, errlen, "the broker at '%s' did not answer within %d ms", endpoint,
                  timeout_ms);
    zpoller_destroy (&poller);
    zsock_destroy (&sock);
    return body;
}

// Prints the status JSON as tables. The JSON is the broker's own (flat
// objects of numbers and plain strings), read with sscanf field by field.
static void
s_print_status (const char *json)
{
    double uptime = 0, rate10 = 0, rate60 = 0;
    long queue = 0, results = 0;
    const char *p;
    if ((p = strstr (json, "\"rate_10s\":")))
        sscanf (p, "\"rate_10s\":%lf", &rate10);
    if ((p = strstr (json, "\"rate_1m\":")))
        sscanf (p, "\"rate_1m\":%lf", &rate60);
    if ((p = strstr (json, "\"uptime_s\":")))
        sscanf (p, "\"uptime_s\":%lf", &uptime);
    if ((p = strstr (json, "\"queue\":")))
        sscanf (p, "\"queue\":%ld", &queue);
    if ((p = strstr (json, "\"results\":")))
        sscanf (p, "\"results\":%ld", &results);
    printf ("broker up %.0f s, %ld pair(s) queued, %ld result(s) recorded since start%s\n"
            "rate: %.1f pairs/s over 10 s, %.1f pairs/s over 1 min\n",
            uptime, queue, results,
            strstr (json, "\"store_ok\":false") ? "  — STORE CANNOT COMMIT" : "", rate10, rate60);
    printf ("\n%-24s %8s %8s %10s %8s %8s %8s\n", "experiment", "files", "pending", "dispatched",
            "done", "failed", "skipped");
    for (p = strstr (json, "{\"experiment\":\""); p; p = strstr (p + 1, "{\"experiment\":\"")) {
        char name[256] = "";
        long f = 0, pe = 0, di = 0, dn = 0, fa = 0, sk = 0;
        sscanf (p, "{\"experiment\":\"%255[^\"]\",\"files\":%ld,\"pending\":%ld,\"dispatched\":%ld,"
                   "\"done\":%ld,\"failed\":%ld,\"skipped\":%ld",
                name, &f, &pe, &di, &dn, &fa, &sk);
        printf ("%-24s %8ld %8ld %10ld %8ld %8ld %8ld\n", name, f, pe, di, dn, fa, sk);
    }
    printf ("\n%-28s %-16s %5s %6s %6s %8s %14s\n", "agent", "host", "cores", "credit", "tasks",
            "done", "last heartbeat");
    for (p = strstr (json, "{\"id\":\""); p; p = strstr (p + 1, "{\"id\":\"")) {
        char id[256] = "", host[256] = "";
        long cores = 0, credit = 0, tasks = 0, done = 0, beat = 0;
        sscanf (p, "{\"id\":\"%255[^\"]\",\"host\":\"%255[^\"]\",\"cores\":%ld,\"credit\":%ld,"
                   "\"tasks\":%ld,\"done\":%ld,\"last_heartbeat_ms\":%ld",
                id, host, &cores, &credit, &tasks, &done, &beat);
        printf ("%-28s %-16s %5ld %6ld %6ld %8ld %11.1f s\n", id, host, cores, credit, tasks, done,
                beat / 1000.0);
    }
}

int
main (int argc, char **argv)
{
    const char *path = NULL;
    int json = 0;
    long timeout = TIMEOUT_MS;
    static const struct option options[] = {{"config", required_argument, NULL, 'c'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"timeout", required_argument, NULL, 'T'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    log_open ("pivctl", 0);
    opterr = 0;
    int opt;
    char *end;
    while ((opt = getopt_long (argc, argv, ":c:jh", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 'T':
            timeout = strtol (optarg, &end, 10);
            if (*end || end == optarg || timeout < 1 || timeout > 600000) {
                log_error ("bad --timeout '%s': milliseconds from 1 to 600000", optarg);
                return 2;
            }
            break;
        case 'h':
            s_usage (stdout);
            return 0;
        case 'V':
            printf ("pivctl %s\n", PIVFARM_VERSION);
            return 0;
        default:
            return cli_bad_option (opt, argv);
        }
    }
    if (!path || optind != argc - 1) {
        log_error ("expected -c FILE and one command (see --help)");
        return 2;
    }
    const char *command = argv[optind];
    if (strcmp (command, "status") != 0) {
        log_error ("unknown command '%s' (known: status)", command);
        return 2;
    }
    config_t cfg;
    char err[1024];
    if (config_load (&cfg, path, err, sizeof err) != 0) {
        log_error ("%s", err);
        return 2;
    }
    uint32_t status = 0;
    char *body = s_ask (cfg.broker.control, command, (int) timeout, &status, err, sizeof err);
    if (!body) {
        log_error ("%s", err);
        return 1;
    }
    if (status != 200) {
        log_error ("the broker refused '%s': %s", command, body);
        free (body);
        return 1;
    }
    if (json)
        printf ("%s\n", body);
    else
        s_print_status (body);
    free (body);
    return 0;
}
