// cli.c — the shared parts of pivfarm's command lines; see cli.h.

#include "common/cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_MAX_WORDS 64

static const char *s_program = "pivfarm";  // names the program in usage errors

void
cli_set_program (const char *program)
{
    s_program = program;
}

int
cli_usage_error (const char *fmt, ...)
{
    char line[1024];
    va_list args;
    va_start (args, fmt);
    vsnprintf (line, sizeof line, fmt, args);
    va_end (args);
    // One fprintf: the line is not split among other output.
    fprintf (stderr, "%s: %s (see %s --help)\n", s_program, line, s_program);
    return CLI_EXIT_USAGE;
}

int
cli_bad_option (int opt, char **argv)
{
    // A bad short option is in optopt (its word may hold several); a bad
    // long one is the word itself.
    const char *word = argv[optind - 1];
    if (opt == ':')
        return cli_usage_error ("option '%s' needs a value", word);
    if (optopt && word[0] == '-' && word[1] != '-')
        return cli_usage_error ("unknown option '-%c'", optopt);
    return cli_usage_error ("unknown option '%s'", word);
}

static int
s_needs_quotes (const char *word)
{
    return *word == '\0' || strpbrk (word, " \"\\\t\n") != NULL;
}

char *
cli_join (int argc, char *const *argv)
{
    size_t size = 1;
    for (int i = 0; i < argc; i++)
        size += 2 * strlen (argv[i]) + 3;
    char *line = malloc (size), *p = line;
    if (!line)
        return NULL;
    for (int i = 0; i < argc; i++) {
        if (i)
            *p++ = ' ';
        if (!s_needs_quotes (argv[i])) {
            p = stpcpy (p, argv[i]);
            continue;
        }
        *p++ = '"';
        for (const char *c = argv[i]; *c; c++) {
            if (*c == '"' || *c == '\\')
                *p++ = '\\';
            *p++ = *c;
        }
        *p++ = '"';
    }
    *p = '\0';
    return line;
}

int
cli_split (const char *line, char ***argv_p, char *err, size_t errlen)
{
    *argv_p = NULL;
    // One block: the pointer array, then the words (never longer than the
    // line, plus one terminator each).
    size_t len = strlen (line);
    char **argv = malloc ((CLI_MAX_WORDS + 1) * sizeof (char *) + 2 * len + 2);
    if (!argv) {
        snprintf (err, errlen, "no memory for a line of %zu bytes", len);
        return -1;
    }
    char *out = (char *) (argv + CLI_MAX_WORDS + 1);
    int argc = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        if (argc == CLI_MAX_WORDS) {
            snprintf (err, errlen, "more than %d words", CLI_MAX_WORDS);
            free (argv);
            return -1;
        }
        argv[argc++] = out;
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                    p++;
                *out++ = *p;
            }
            if (*p != '"') {
                snprintf (err, errlen, "unterminated quote in word %d", argc);
                free (argv);
                return -1;
            }
            p++;
            if (*p && *p != ' ' && *p != '\t') {
                snprintf (err, errlen, "'%c' right after the closing quote of word %d", *p, argc);
                free (argv);
                return -1;
            }
        }
        else
            while (*p && *p != ' ' && *p != '\t')
                *out++ = *p++;
        *out++ = '\0';
    }
    argv[argc] = NULL;
    *argv_p = argv;
    return argc;
}
