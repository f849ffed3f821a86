// broker_main.c — pivfarm-broker: the job farm's broker.
// Exit status: 0 stopped by SIGINT/SIGTERM, 1 failed while running (the
// store), 2 bad usage or configuration, or cannot start.

#include "broker/broker.h"
#include "common/cli.h"
#include "common/log.h"

int
main (int argc, char **argv)
{
    config_t cfg;
    int rc = cli_daemon (argc, argv, "pivfarm-broker",
                         "Pairs the frames the watcher reports, hands the pairs to agents and "
                         "records their\nresults in the store.",
                         &cfg);
    if (rc >= 0)
        return rc;
    char err[1024];
    broker_t *broker = broker_new (&cfg, err, sizeof err);
    if (!broker) {
        log_error ("%s", err);
        return 2;
    }
    rc = broker_run (broker);
    broker_destroy (&broker);
    log_notice ("stopped");
    return rc == 0 ? 0 : 1;
}
