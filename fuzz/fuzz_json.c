// fuzz_json.c — jdoc_parse and the accessors (common/jdoc.c), the reader of
// the broker's replies. The input's first line is a path to look up, the
// rest the document.

#include "fuzz/fuzz.h"
#include "common/jdoc.h"

#include <string.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *text = fuzz_string (data, size);
    char *doc_text = strchr (text, '\n');
    const char *path = "$";
    if (doc_text) {
        *doc_text++ = '\0';
        path = text;
    }
    else
        doc_text = text;
    char err[256] = "";
    jdoc_t *doc = jdoc_parse (doc_text, err, sizeof err);
    if (!doc) {
        FUZZ_ASSERT (err[0]);
        free (text);
        return 0;
    }
    FUZZ_ASSERT (jdoc_type_at (doc, "$") != JDOC_MISSING);
    jdoc_type_t type = jdoc_type_at (doc, "%s", path);
    (void) jdoc_number (doc, 0, "%s", path);
    (void) jdoc_int (doc, 0, "%s", path);
    (void) jdoc_bool (doc, 0, "%s", path);
    int length = jdoc_length (doc, "%s", path);
    FUZZ_ASSERT ((type == JDOC_ARRAY) == (length >= 0));
    const char *s = jdoc_string (doc, "%s", path);
    FUZZ_ASSERT ((type == JDOC_STRING) == (s != NULL));
    char *value = jdoc_text (doc, "%s", path);
    FUZZ_ASSERT ((type == JDOC_MISSING) == (value == NULL));
    if (value && length > 0)
        (void) jdoc_type_at (doc, "%s[%d]", path, length - 1);
    free (value);
    jdoc_destroy (&doc);
    free (text);
    return 0;
}
