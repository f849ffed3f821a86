// cli.h — what the command lines of pivfarm's programs share: the options
// of the daemons (-c FILE, -v, --syslog, --help, --version), the words for
// a bad option, and the one convention of every program (doc/conventions.md):
// -h/--help on stdout, exit 0; -V/--version, exit 0; a usage error is one
// line "PROGRAM: what (see PROGRAM --help)" on stderr, never a log line,
// exit 2; a failure at work exits 1.

#ifndef COMMON_CLI_H
#define COMMON_CLI_H

#include "common/config.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAILED = 1, CLI_EXIT_USAGE = 2 };

// Names the program in the messages of cli_usage_error (default "pivfarm").
void cli_set_program (const char *program);
// A usage error: prints "PROGRAM: <message> (see PROGRAM --help)" as one
// line on stderr (not through the log: no time, no level) and returns
// CLI_EXIT_USAGE, the exit status of bad usage.
int cli_usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

// The usage error for what getopt_long returned at a bad option (':' for a
// missing value, anything else for an unknown option): says which option
// and returns CLI_EXIT_USAGE. Call with opterr = 0 and a leading ':' in the
// short options.
int cli_bad_option (int opt, char **argv);

// The command line of a daemon: parses it, opens the log under 'program',
// loads the configuration into *cfg. Returns -1 to go on, or the exit
// status to end with: 0 after --help or --version, 2 for bad usage (one
// line, cli_usage_error) or a bad configuration (logged). 'what' is printed
// by --help after the usage line.
int cli_daemon (int argc, char **argv, const char *program, const char *what, config_t *cfg);

// A control line (doc/control.md): words separated by spaces; a word with a
// space, a double quote or a backslash, or an empty one, is in double
// quotes with \" and \\ escaped.
// Joins argv[0 .. argc-1] into a new line (caller frees); NULL, no memory.
char *cli_join (int argc, char *const *argv);
// Splits 'line' into a NULL-terminated array of words (one allocation: the
// caller frees *argv_p alone); returns the count, or -1 with err for an
// unterminated quote, a stray character after a closing quote, or too many
// words (more than 64).
int cli_split (const char *line, char ***argv_p, char *err, size_t errlen);

#endif
