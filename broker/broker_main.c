// broker_main.c — pivfarm-broker: the job farm's broker.
// Exit status: 0 stopped by SIGINT/SIGTERM, 1 failed while running (the
// store), 2 bad usage or configuration, or cannot start.

#include "broker/broker.h"
#include "common/cli.h"
#include "common/daemon.h"
#include "common/log.h"
#include "piv/calib.h"
#include "piv/settings.h"

int
main (int argc, char **argv)
{
    config_rules ("piv", piv_settings_check_key);
    config_rules ("calibration", piv_calib_check_key);
    int hangup = daemon_hangup_fd ();
    config_t cfg;
    int rc = cli_daemon (argc, argv, "pivfarm-broker",
                         "Pairs the frames the watcher reports, hands the pairs to agents and "
                         "records their\nresults in the store.",
                         &cfg);
    if (rc >= 0)
        return rc;
    char err[4096];
    broker_t *broker = broker_new (&cfg, err, sizeof err);
    if (!broker) {
        log_error ("%s", err);
        return 2;
    }
    if (hangup >= 0 && broker_watch_hangup (broker, hangup) != 0)
        log_warning ("SIGHUP: cannot watch it (out of memory): reload needs a restart");
    // The store is open and every socket bound: 'systemctl start' returns.
    daemon_ready ("running");
    rc = broker_run (broker);
    daemon_stopping ();
    broker_destroy (&broker);
    log_notice ("stopped");
    return rc == 0 ? 0 : 1;
}
