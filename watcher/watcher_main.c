// watcher_main.c — pivfarm-watcher: reports complete frame files to the broker.
// Exit status: 0 stopped by SIGINT/SIGTERM, 2 bad usage or configuration,
// or cannot start (the root, inotify).

#include "common/cli.h"
#include "common/log.h"
#include "watcher/watcher.h"

#include <errno.h>
#include <sys/stat.h>

int
main (int argc, char **argv)
{
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
    rc = watcher_run (watcher);
    watcher_destroy (&watcher);
    return rc;
}
