// fuzz_json.c — json_parse and the accessors (store/json.c), the reader of
// the broker's replies. The input's first line is a path to look up, the
// rest the document.

#include "fuzz/fuzz.h"
#include "store/json.h"

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
    json_t *doc = json_parse (doc_text, err, sizeof err);
    if (!doc) {
        FUZZ_ASSERT (err[0]);
        free (text);
        return 0;
    }
    FUZZ_ASSERT (json_type_at (doc, "$") != JSON_MISSING);
    json_type_t type = json_type_at (doc, "%s", path);
    (void) json_number (doc, 0, "%s", path);
    (void) json_int (doc, 0, "%s", path);
    (void) json_bool (doc, 0, "%s", path);
    int length = json_length (doc, "%s", path);
    FUZZ_ASSERT ((type == JSON_ARRAY) == (length >= 0));
    const char *s = json_string (doc, "%s", path);
    FUZZ_ASSERT ((type == JSON_STRING) == (s != NULL));
    char *value = json_text (doc, "%s", path);
    FUZZ_ASSERT ((type == JSON_MISSING) == (value == NULL));
    if (value && length > 0)
        (void) json_type_at (doc, "%s[%d]", path, length - 1);
    free (value);
    json_destroy (&doc);
    free (text);
    return 0;
}
