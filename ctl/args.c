// args.c — pivctl's command lines: the words after a command split into
// its options and positional words, checked before anything is sent.

#include "ctl/ctl.h"

#include "common/path.h"
#include "common/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
ctl_value (const ctl_args_t *args, const char *name)
{
    for (int i = 0; args->command->options[i].name; i++)
        if (strcmp (args->command->options[i].name, name) == 0)
            return args->values[i];
    return NULL;
}

int
ctl_parse_count (const char *option, const char *text, long max, long *out)
{
    char *end;
    errno = 0;
    long n = strtol (text, &end, 10);
    if (errno || end == text || *end || n < 1 || n > max) {
        if (max == LONG_MAX)
            ctl_error ("bad %s '%s': a whole number, 1 or more (see pivctl --help)", option, text);
        else
            ctl_error ("bad %s '%s': a whole number from 1 to %ld (see pivctl --help)", option,
                       text, max);
        return -1;
    }
    *out = n;
    return 0;
}

int
ctl_parse_timeout (ctl_t *ctl, const char *text)
{
    long ms;
    if (ctl_parse_count ("--timeout", text, 600000, &ms) != 0)
        return -1;
    ctl->timeout_ms = (int)ms;
    return 0;
}

// Finds the option a word names ("--name", "--name=value", "-x", "-xVALUE").
// Returns its index in options, -1 unknown; *inline_value is the value
// written in the word itself, or NULL.
static int
s_option_of (const ctl_option_t *options, const char *word, const char **inline_value)
{
    *inline_value = NULL;
    for (int i = 0; options[i].name; i++) {
        if (word[1] == '-') {
            size_t len = strcspn (word + 2, "=");
            if (strlen (options[i].name) == len && strncmp (options[i].name, word + 2, len) == 0) {
                if (word[2 + len] == '=')
                    *inline_value = word + 3 + len;
                return i;
            }
        }
        else if (options[i].letter && word[1] == options[i].letter) {
            if (word[2])
                *inline_value = word + 2;
            return i;
        }
    }
    return -1;
}

int
ctl_parse_args (ctl_t *ctl, const ctl_command_t *command, int argc, char **argv, ctl_args_t *args)
{
    memset (args, 0, sizeof *args);
    args->command = command;
    args->send[args->nsend++] = (char *)command->name;
    int options_end = 0;
    for (int i = 0; i < argc; i++) {
        char *word = argv[i];
        if (options_end || word[0] != '-' || word[1] == '\0') {
            if (args->nwords == MAX_WORDS - 1 || args->nsend == MAX_WORDS) {
                ctl_error ("too many words for '%s' (at most %d)", command->name, MAX_WORDS - 1);
                return EXIT_USAGE;
            }
            args->words[args->nwords++] = word;
            args->send[args->nsend++] = word;
            continue;
        }
        if (strcmp (word, "--") == 0) {
            options_end = 1;
            args->send[args->nsend++] = word;
            continue;
        }
        if (strcmp (word, "--json") == 0 || strcmp (word, "-j") == 0) {
            ctl->json = 1;
            continue;
        }
        if (strncmp (word, "--timeout", 9) == 0 && (word[9] == '=' || word[9] == '\0')) {
            const char *value = word[9] == '=' ? word + 10 : i + 1 < argc ? argv[++i] : NULL;
            if (!value) {
                ctl_error ("option '--timeout' needs a value (see pivctl --help)");
                return EXIT_USAGE;
            }
            if (ctl_parse_timeout (ctl, value) != 0)
                return EXIT_USAGE;
            continue;
        }
        const char *value;
        int k = s_option_of (command->options, word, &value);
        if (k < 0) {
            ctl_error ("unknown option '%s' for '%s'; usage: pivctl %s", word, command->name,
                       command->usage);
            return EXIT_USAGE;
        }
        const ctl_option_t *option = &command->options[k];
        if (!option->local)
            args->send[args->nsend++] = word;
        if (option->has_arg && !value) {
            if (i + 1 == argc) {
                ctl_error ("option '%s' needs a value; usage: pivctl %s", word, command->usage);
                return EXIT_USAGE;
            }
            value = argv[++i];
            if (!option->local)
                args->send[args->nsend++] = (char *)value;
        }
        else if (!option->has_arg && value) {
            ctl_error ("option '--%s' takes no value; usage: pivctl %s", option->name,
                       command->usage);
            return EXIT_USAGE;
        }
        args->values[k] = value ? value : "";
        if (args->nsend >= MAX_WORDS - 1) {
            ctl_error ("too many words for '%s' (at most %d)", command->name, MAX_WORDS - 1);
            return EXIT_USAGE;
        }
    }
    if (args->nwords < command->min_words || args->nwords > command->max_words) {
        ctl_error ("%s arguments for '%s'; usage: pivctl %s",
                   args->nwords < command->min_words ? "missing" : "too many", command->name,
                   command->usage);
        return EXIT_USAGE;
    }
    args->send[args->nsend] = NULL;
    return 0;
}

int
ctl_check_name (const char *command, const char *name)
{
    char why[PATH_WHY], shown[UTIL_SHOWN];
    if (path_check_component (name, why, sizeof why) == 0)
        return 0;
    ctl_error ("%s: bad experiment '%s': %s", command, util_shorten (name, shown, sizeof shown),
               why);
    return -1;
}
