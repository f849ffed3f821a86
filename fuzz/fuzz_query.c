// fuzz_query.c — dash_query_parse (dashboard-cgi/query.c), the status
// page's reader of QUERY_STRING, the one input a web client controls. A
// query it takes names at most an experiment the farm would take
// (common/path.h) and a format; one it refuses says why. Every name it
// takes, written into a link as the page writes it, reads back the same.

#include "common/path.h"
#include "dashboard-cgi/dash.h"
#include "fuzz/fuzz.h"

#include <stdio.h>
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
        // The farm's rule: nothing that leaves a directory or breaks a line.
        FUZZ_ASSERT (path_check_component (q.exp, NULL, 0) == 0);
        FUZZ_ASSERT (!strpbrk (q.exp, "/\n\r\t"));
        // The page's link to it: nothing that ends an attribute or opens a
        // tag, and the same name when followed.
        char *link = NULL;
        size_t len = 0;
        FILE *out = open_memstream (&link, &len);
        FUZZ_ASSERT (out != NULL);
        fputs ("exp=", out);
        dash_put_query_value (out, q.exp);
        fclose (out);
        FUZZ_ASSERT (!strpbrk (link, "<>\"'& "));
        dash_query_t back = {0};
        FUZZ_ASSERT (dash_query_parse (link, &back, why, sizeof why) == 0);
        FUZZ_ASSERT (back.exp && strcmp (back.exp, q.exp) == 0);
        free (link);
    }
    free (query);
    return 0;
}
