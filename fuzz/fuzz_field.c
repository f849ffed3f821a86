// fuzz_field.c — piv_field_decode (piv/field.c), the vector field as
// bytes (RESULT's blob, the store's field column). A field that decodes
// must encode back to the same bytes, but for the first position (x0, y0),
// which comes back as the same number: -0 may return as 0, a NaN as
// another NaN.

#include "piv/field.h"
#include "fuzz/fuzz.h"

#include <math.h>
#include <string.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char err[512] = "";
    piv_field_t *field = piv_field_decode (data, size, err, sizeof err);
    if (!field) {
        FUZZ_ASSERT (err[0]);
        return 0;
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    FUZZ_ASSERT (piv_field_encode (field, &buf, &len) == 0);
    FUZZ_ASSERT (len == size && memcmp (buf, data, 24) == 0
                 && memcmp (buf + 32, data + 32, size - 32) == 0);
    for (int at = 24; at < 32; at += 4) {
        float was, is;
        memcpy (&was, data + at, 4);
        memcpy (&is, buf + at, 4);
        FUZZ_ASSERT (was == is || (isnan (was) && isnan (is)));
    }
    free (buf);
    piv_field_destroy (&field);
    return 0;
}
