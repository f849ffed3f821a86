// broker_main.c — pivfarm-broker: the job farm's broker.
// Exit status: 0 stopped by SIGINT/SIGTERM, 1 failed while running (the
// store), 2 bad usage or configuration, or cannot start.

#include "broker/broker.h"
#include "common/cli.h"
#include "common/daemon.h"
#include "common/log.h"
#include "piv/settings.h"

// SIGHUP: the configuration is read again and what may change is applied
// (daemon.h, broker_reload); a file that no longer loads changes nothing.
static void
s_hangup (broker_t *broker, void *arg)
{
    int fd = *(int *) arg;
    if (!daemon_hangup_take (fd))
        return;
    daemon_reloading ();
    config_t cfg;
    char err[1024];
    if (daemon_reload_config (&cfg, err, sizeof err) != 0)
        log_error ("reload: %s; nothing changed", err);
    else {
        daemon_apply_log_level (&cfg);
        broker_reload (broker, &cfg);
    }
    daemon_ready ("running");
}

int
main (int argc, char **argv)
{
    config_rules ("piv", piv_settings_check_key);
    int hangup = daemon_hangup_fd ();
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
    if (hangup >= 0 && broker_poll_fd (broker, hangup, s_hangup, &hangup) != 0)
        log_warning ("SIGHUP: cannot watch it (out of memory): reload needs a restart");
    // The store is open and every socket bound: 'systemctl start' returns.
    daemon_ready ("running");
    rc = broker_run (broker);
    daemon_stopping ();
    broker_destroy (&broker);
    log_notice ("stopped");
    return rc == 0 ? 0 : 1;
}
