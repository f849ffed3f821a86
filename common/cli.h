// cli.h — what the command lines of pivfarm's programs share: the options
// of the daemons (-c FILE, -v, --syslog, --help, --version) and the words
// for a bad option.

#ifndef COMMON_CLI_H
#define COMMON_CLI_H

#include "common/config.h"

// Logs the error for what getopt_long returned at a bad option (':' for a
// missing value, anything else for an unknown option) and returns 2, the
// exit status of bad usage. Call with opterr = 0 and a leading ':' in the
// short options.
int cli_bad_option (int opt, char **argv);

// The command line of a daemon: parses it, opens the log under 'program',
// loads the configuration into *cfg. Returns -1 to go on, or the exit
// status to end with: 0 after --help or --version, 2 for bad usage or a bad
// configuration (logged). 'usage' is printed by --help after the common
// options.
int cli_daemon (int argc, char **argv, const char *program, const char *what, config_t *cfg);

#endif
