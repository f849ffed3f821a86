// daemon.c — the command line every pivfarm daemon shares; see cli.h. Apart
// from cli.c so that programs without a configuration file (pivfarm-piv)
// do not link the configuration loader and czmq with it.

#include "common/cli.h"
#include "common/log.h"
#include "common/version.h"

#include <getopt.h>
#include <stdio.h>

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
                    "  -c, --config FILE   pivfarm configuration (ZPL; see conf/pivfarm.conf)\n"
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
    return -1;
}
