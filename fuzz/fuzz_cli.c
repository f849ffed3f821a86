// fuzz_cli.c — cli_split (common/cli.c), the reader of control lines
// (REQUEST's text). A line that splits must join and split again to the
// same words.

#include "common/cli.h"
#include "fuzz/fuzz.h"

#include <string.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *line = fuzz_string (data, size);
    char **argv = NULL, **again = NULL;
    char err[256] = "";
    int argc = cli_split (line, &argv, err, sizeof err);
    if (argc < 0) {
        FUZZ_ASSERT (!argv && err[0]);
        free (line);
        return 0;
    }
    FUZZ_ASSERT (argv && !argv[argc]);
    char *joined = cli_join (argc, argv);
    FUZZ_ASSERT (joined);
    FUZZ_ASSERT (cli_split (joined, &again, err, sizeof err) == argc);
    for (int i = 0; i < argc; i++)
        FUZZ_ASSERT (strcmp (argv[i], again[i]) == 0);
    free (again);
    free (joined);
    free (argv);
    free (line);
    return 0;
}
