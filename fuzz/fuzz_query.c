// fuzz_query.c — dash_query_parse (dashboard-cgi/query.c), the status
// page's reader of QUERY_STRING, the one input a web client controls. A
// query it takes names at most an experiment of safe characters and a
// format; one it refuses says why.

#include "dashboard-cgi/dash.h"
#include "fuzz/fuzz.h"

#include <string.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *query = fuzz_string (data, size);
    dash_query_t q = {0};
    char why[256] = "";
    if (dash_query_parse (query, &q, why, sizeof why) != 0)
        FUZZ_ASSERT (why[0]);
    else if (q.exp) {
        // Nothing that could end an HTML attribute, open a tag or a path.
        size_t n = strlen (q.exp);
        FUZZ_ASSERT (n > 0 && n <= 255);
        FUZZ_ASSERT (!strpbrk (q.exp, "<>\"'&/\\%?#;\n\r\t"));
        FUZZ_ASSERT (strcmp (q.exp, ".") != 0 && strcmp (q.exp, "..") != 0);
    }
    free (query);
    return 0;
}
