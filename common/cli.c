// cli.c — the shared parts of pivfarm's command lines; see cli.h.

#include "common/cli.h"
#include "common/log.h"

#include <getopt.h>
#include <stdio.h>

int
cli_bad_option (int opt, char **argv)
{
    if (opt == ':')
        log_error ("option '%s' needs a value (see --help)", argv[optind - 1]);
    else
        log_error ("unknown option '%s' (see --help)", argv[optind - 1]);
    return 2;
}
