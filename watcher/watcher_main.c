// watcher_main.c — pivfarm-watcher: reports complete frame files to the broker.
// Exit status: 0 stopped by SIGINT/SIGTERM, 2 bad usage or configuration,
// or cannot start (the root, inotify).

#include "common/cli.h"
#include "common/daemon.h"
#include "common/log.h"
#include "piv/calib.h"
#include "piv/settings.h"
#include "watcher/watcher.h"

#include <errno.h>
#include <sys/stat.h>

int
main (int argc, char **argv)
{
    config_rules ("piv", piv_settings_check_key);
    config_rules ("calibration", piv_calib_check_key);
    config_role ("watcher");
    int hangup = daemon_hangup_fd ();
    config_t cfg;
    int rc = cli_daemon (argc, argv, "pivfarm-watcher",
                         "Reports every complete file under watcher/root to the broker until it "
                         "is acknowledged.",
                         &cfg);
    if (rc >= 0)
        return rc;
    char err[1024];
    watcher_t *watcher = watcher_new (&cfg, err, sizeof err);
    if (!watcher) {
        // A missing root is never made here: an NFS mount not there yet
        // must not become an empty local directory that hides the camera's
        // files. Say what to do instead.
        struct stat st;
        if (stat (cfg.watcher.root, &st) != 0 && errno == ENOENT)
            log_error ("%s: create it (mkdir -p '%s') or mount the storage there, then start "
                       "the watcher again",
                       err, cfg.watcher.root);
        else
            log_error ("%s", err);
        return 2;
    }
    if (hangup >= 0 && watcher_watch_hangup (watcher, hangup) != 0)
        log_warning ("SIGHUP: cannot watch it (out of memory): reload needs a restart");
    // The root is watched and the ingest socket connected; the first scan
    // runs in watcher_run.
    daemon_ready ("running");
    rc = watcher_run (watcher);
    daemon_stopping ();
    watcher_destroy (&watcher);
    return rc;
}
