// test_json.c — the JSON reader of common/jdoc.h on documents like the
// broker's replies: nested objects and arrays, null against missing,
// numbers up to int64, escaped and UTF-8 strings, and text that is not
// JSON refused with a clear reason.

#include "common/jdoc.h"
#include "common/jout.h"
#include "common/util.h"
#include "tests/testutil.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jdoc_t *
s_parse (const char *text)
{
    char err[256] = "";
    jdoc_t *doc = jdoc_parse (text, err, sizeof err);
    ck_assert_msg (doc != NULL, "%s", err);
    return doc;
}

START_TEST (reads_nested_objects_and_arrays)
{
    jdoc_t *doc = s_parse ("{\"uptime_s\": 12.5, \"experiments\": ["
                           " {\"experiment\": \"run7\", \"done\": 40, \"replay\": null},"
                           " {\"experiment\": \"run8\", \"done\": 3,"
                           "  \"replay\": {\"of\": \"run7\", \"finished\": true, \"sent\": 9}}],"
                           " \"agents\": [], \"roi\": [[1, 2], [3, 4, 5]]}");
    ck_assert_int_eq (jdoc_type_at (doc, "$"), JDOC_OBJECT);
    ck_assert_int_eq (jdoc_type_at (doc, "$.experiments"), JDOC_ARRAY);
    ck_assert_int_eq (jdoc_length (doc, "$.experiments"), 2);
    ck_assert_int_eq (jdoc_length (doc, "$.agents"), 0);
    ck_assert_int_eq (jdoc_length (doc, "$.roi[1]"), 3);
    ck_assert_int_eq (jdoc_length (doc, "$.uptime_s"), -1);
    ck_assert_int_eq (jdoc_length (doc, "$.nothing"), -1);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[%d].experiment", 1), "run8");
    ck_assert_int_eq (jdoc_int (doc, -1, "$.experiments[%d].done", 0), 40);
    ck_assert_int_eq (jdoc_type_at (doc, "$.experiments[1].replay"), JDOC_OBJECT);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[1].replay.of"), "run7");
    ck_assert_int_eq (jdoc_bool (doc, 0, "$.experiments[1].replay.finished"), 1);
    ck_assert_int_eq (jdoc_int (doc, 0, "$.roi[%d][%d]", 1, 2), 5);
    ck_assert_double_eq (jdoc_number (doc, 0, "$.uptime_s"), 12.5);
    // Past the end of an array, or through a scalar: nothing there.
    ck_assert_int_eq (jdoc_type_at (doc, "$.experiments[2]"), JDOC_MISSING);
    ck_assert_int_eq (jdoc_type_at (doc, "$.uptime_s.x"), JDOC_MISSING);
    ck_assert_ptr_null (jdoc_string (doc, "$.experiments[5].experiment"));
    jdoc_destroy (&doc);
    ck_assert_ptr_null (doc);
    jdoc_destroy (&doc); // a second destroy is harmless
}
END_TEST

START_TEST (tells_null_from_missing)
{
    jdoc_t *doc = s_parse ("{\"latency_median_ms\": null, \"rate_limit\": 2.5, \"paused\": false}");
    ck_assert_int_eq (jdoc_type_at (doc, "$.latency_median_ms"), JDOC_NULL);
    ck_assert_int_eq (jdoc_type_at (doc, "$.latency_p99_ms"), JDOC_MISSING);
    // A key may be written quoted or bare: the same value.
    ck_assert_int_eq (jdoc_type_at (doc, "$.\"latency_median_ms\""), JDOC_NULL);
    ck_assert_double_eq (jdoc_number (doc, 0, "$.\"rate_limit\""), 2.5);
    // Both give the default where a number is asked for.
    ck_assert_double_eq (jdoc_number (doc, -7, "$.latency_median_ms"), -7);
    ck_assert_double_eq (jdoc_number (doc, -7, "$.latency_p99_ms"), -7);
    ck_assert_int_eq (jdoc_is_number (doc, "$.latency_median_ms"), 0);
    ck_assert_int_eq (jdoc_is_number (doc, "$.rate_limit"), 1);
    // false is a value, not a missing one.
    ck_assert_int_eq (jdoc_type_at (doc, "$.paused"), JDOC_FALSE);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.paused"), 0);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.resumed"), -1);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.latency_median_ms"), -1);
    // A number is not a string and a string is not a number.
    ck_assert_ptr_null (jdoc_string (doc, "$.rate_limit"));
    jdoc_destroy (&doc);
    doc = s_parse ("{\"s\": \"12\"}");
    ck_assert_double_eq (jdoc_number (doc, -1, "$.s"), -1);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.s"), -1);
    jdoc_destroy (&doc);
}
END_TEST

START_TEST (keeps_nanosecond_times_and_large_integers_exact)
{
    jdoc_t *doc = s_parse ("{\"created_ns\": 1715000000123456789, \"max\": 9223372036854775807,"
                           " \"min\": -9223372036854775808, \"neg\": -42, \"exp\": 1.5e3,"
                           " \"frac\": -0.125, \"huge\": 1e300, \"zero\": 0}");
    ck_assert_int_eq (jdoc_type_at (doc, "$.created_ns"), JDOC_INTEGER);
    ck_assert (jdoc_int (doc, 0, "$.created_ns") == INT64_C (1715000000123456789));
    ck_assert (jdoc_int (doc, 0, "$.max") == INT64_MAX);
    ck_assert (jdoc_int (doc, 0, "$.min") == INT64_MIN);
    ck_assert (jdoc_int (doc, 0, "$.neg") == -42);
    ck_assert_int_eq (jdoc_type_at (doc, "$.exp"), JDOC_REAL);
    ck_assert (jdoc_int (doc, 0, "$.exp") == 1500);
    ck_assert_double_eq (jdoc_number (doc, 0, "$.frac"), -0.125);
    ck_assert (jdoc_int (doc, 0, "$.frac") == 0);
    // A real beyond int64 clamps where an integer is asked for.
    ck_assert (jdoc_int (doc, 0, "$.huge") == INT64_MAX);
    ck_assert_double_eq (jdoc_number (doc, 0, "$.huge"), 1e300);
    ck_assert (jdoc_int (doc, 5, "$.zero") == 0);
    jdoc_destroy (&doc);
}
END_TEST

START_TEST (unescapes_strings_and_keeps_utf8)
{
    jdoc_t *doc = s_parse ("{\"error\": \"cannot open \\\"a b.tif\\\": No such file\\n\","
                           " \"path\": \"C:\\\\data\\/x\", \"unit\": \"\\u00b5m/s\","
                           " \"greek\": \"ω = ∂v/∂x − ∂u/∂y\", \"empty\": \"\","
                           " \"a b\": \"spaced key\", \"emoji\": \"\\ud83d\\ude00\"}");
    ck_assert_str_eq (jdoc_string (doc, "$.error"), "cannot open \"a b.tif\": No such file\n");
    ck_assert_str_eq (jdoc_string (doc, "$.path"), "C:\\data/x");
    ck_assert_str_eq (jdoc_string (doc, "$.unit"), "\xc2\xb5m/s");
    ck_assert_str_eq (jdoc_string (doc, "$.greek"), "ω = ∂v/∂x − ∂u/∂y");
    ck_assert_str_eq (jdoc_string (doc, "$.empty"), "");
    ck_assert_str_eq (jdoc_string (doc, "$.\"a b\""), "spaced key");
    ck_assert_str_eq (jdoc_string (doc, "$.emoji"), "\xf0\x9f\x98\x80");
    // Strings stay valid while the document lives, whatever is read after.
    const char *first = jdoc_string (doc, "$.greek");
    for (int i = 0; i < 100; i++)
        jdoc_string (doc, "$.error");
    ck_assert_str_eq (first, "ω = ∂v/∂x − ∂u/∂y");
    jdoc_destroy (&doc);
}
END_TEST

START_TEST (gives_a_subtree_back_as_json_text)
{
    jdoc_t *doc = s_parse ("{\"f\": {\"roi\": [0, 0, 64, 32], \"quantity\": \"mean_u\"},"
                           " \"s\": \"a\\\"b\", \"n\": null}");
    char *text = jdoc_text (doc, "$.f.roi");
    ck_assert_str_eq (text, "[0,0,64,32]");
    free (text);
    text = jdoc_text (doc, "$.s");
    ck_assert_str_eq (text, "\"a\\\"b\"");
    free (text);
    text = jdoc_text (doc, "$.n");
    ck_assert_str_eq (text, "null");
    free (text);
    ck_assert_ptr_null (jdoc_text (doc, "$.missing"));
    // The subtree parses back to the same values.
    text = jdoc_text (doc, "$.f");
    jdoc_t *sub = s_parse (text);
    free (text);
    ck_assert_str_eq (jdoc_string (sub, "$.quantity"), "mean_u");
    ck_assert_int_eq (jdoc_int (sub, 0, "$.roi[2]"), 64);
    jdoc_destroy (&sub);
    jdoc_destroy (&doc);
}
END_TEST

START_TEST (reads_a_large_array_in_one_parse)
{
    // 10000 pairs, as a 'pairs --limit 10000' reply: every field is read.
    size_t size = 10000 * 64 + 64, len = 0;
    char *text = malloc (size);
    len += (size_t)snprintf (text + len, size - len, "{\"pairs\":[");
    for (int i = 0; i < 10000; i++)
        len += (size_t)snprintf (text + len, size - len, "%s{\"pair\":%d,\"stem\":\"s%05d\"}",
                                 i ? "," : "", i + 1, i);
    snprintf (text + len, size - len, "]}");
    jdoc_t *doc = s_parse (text);
    free (text);
    ck_assert_int_eq (jdoc_length (doc, "$.pairs"), 10000);
    int64_t sum = 0;
    for (int i = 0; i < 10000; i++) {
        sum += jdoc_int (doc, 0, "$.pairs[%d].pair", i);
        char stem[16];
        snprintf (stem, sizeof stem, "s%05d", i);
        ck_assert_str_eq (jdoc_string (doc, "$.pairs[%d].stem", i), stem);
    }
    ck_assert (sum == 10000LL * 10001 / 2);
    jdoc_destroy (&doc);
}
END_TEST

START_TEST (refuses_text_that_is_not_json)
{
    const char *bad[] = {"",
                         "{",
                         "{\"a\": 1,}",
                         "{'a': 1}",
                         "{\"a\": 1} trailing",
                         "[1, 2",
                         "no experiment 'x'",
                         "{\"a\": NaN}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        jdoc_t *doc = jdoc_parse (bad[i], err, sizeof err);
        ck_assert_msg (doc == NULL, "accepted '%s'", bad[i]);
        ck_assert_msg (strstr (err, "not valid JSON") != NULL, "'%s': %s", bad[i], err);
    }
    char err[256] = "";
    ck_assert_ptr_null (jdoc_parse ("no experiment 'x'", err, sizeof err));
    ck_assert_str_eq (err, "not valid JSON (17 bytes, starting 'no experiment 'x'')");
    ck_assert_ptr_null (jdoc_parse (NULL, err, sizeof err));
    // Scalars are documents too.
    jdoc_t *doc = s_parse (" 42 ");
    ck_assert_int_eq (jdoc_int (doc, 0, "$"), 42);
    jdoc_destroy (&doc);
}
END_TEST

START_TEST (a_path_too_long_or_malformed_finds_nothing)
{
    jdoc_t *doc = s_parse ("{\"a\": {\"b\": 1}}");
    ck_assert_int_eq (jdoc_type_at (doc, "$.a.b"), JDOC_INTEGER);
    ck_assert_int_eq (jdoc_type_at (doc, "$.a .b"), JDOC_MISSING);
    ck_assert_int_eq (jdoc_type_at (doc, "a.b"), JDOC_MISSING);
    ck_assert_int_eq (jdoc_type_at (doc, "$.a.b%s", "[0]"), JDOC_MISSING);
    char long_path[2000];
    memset (long_path, 'x', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    ck_assert_int_eq (jdoc_type_at (doc, "$.%s", long_path), JDOC_MISSING);
    ck_assert_int_eq (jdoc_type_at (NULL, "$"), JDOC_MISSING);
    jdoc_destroy (&doc);
}
END_TEST

// What jout writes, as text: a new string checked against 'expected'.
static void
s_assert_dump (json_t *value, const char *expected)
{
    char *text = jout_dump (value);
    ck_assert_ptr_nonnull (text);
    ck_assert_str_eq (text, expected);
    free (text);
    json_decref (value);
}

// One number rule for every writer: integers as integers, reals with 9
// significant digits (a float reads back exactly), NaN and infinities null.
START_TEST (jout_writes_every_number_one_way)
{
    s_assert_dump (jout_number (40.0), "40");
    s_assert_dump (jout_number (-0.0), "0");
    s_assert_dump (jout_number (12.5), "12.5");
    s_assert_dump (jout_number (0.1), "0.1");
    s_assert_dump (jout_number (1.0 / 3), "0.333333333");
    s_assert_dump (jout_number (1715000000123456789.0), "1.715e18");
    s_assert_dump (jout_number (9007199254740991.0), "9007199254740991");
    s_assert_dump (jout_number (2.5e-7), "2.5e-7");
    s_assert_dump (jout_number (NAN), "null");
    s_assert_dump (jout_number (INFINITY), "null");
    s_assert_dump (jout_number (-INFINITY), "null");
    // Every float survives the text: the page's vector fields.
    const float floats[] = {0.1f, 3.29651246f, -1.17549435e-38f, 3.40282347e38f, 7.0000005f};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        char *text = NULL;
        json_t *value = jout_number (floats[i]);
        ck_assert_ptr_nonnull (text = jout_dump (value));
        ck_assert_msg ((float) strtod (text, NULL) == floats[i], "%.9g written as %s",
                       (double) floats[i], text);
        free (text);
        json_decref (value);
    }
}
END_TEST

// One UTF-8 rule: each byte that is not part of valid UTF-8 is written as
// U+FFFD, never refused; < > & and DEL are escaped so that the text stays
// inert in a page; NULL is null.
START_TEST (jout_writes_any_bytes_as_a_valid_json_string)
{
    s_assert_dump (jout_string ("run \"7\" \\ tab\there\nnew \x01 \xc3\xa9t\xc3\xa9 <b>&\x7f"),
                   "\"run \\\"7\\\" \\\\ tab\\there\\nnew \\u0001 \xc3\xa9t\xc3\xa9 "
                   "\\u003cb\\u003e\\u0026\\u007f\"");
    // A stray byte, an overlong '/', a surrogate, beyond U+10FFFF, a cut sequence.
    const char *bad = "a\xff" "b\xc0\xaf" "c\xed\xa0\x80" "d\xf4\x90\x80\x80" "e\xe2\x82";
    const char *fffd = "\xef\xbf\xbd";
    char expected[128];
    snprintf (expected, sizeof expected, "a%sb%s%sc%s%s%sd%s%s%s%se%s%s", fffd, fffd, fffd, fffd,
              fffd, fffd, fffd, fffd, fffd, fffd, fffd, fffd);
    char *clean = util_utf8_sanitize (bad);
    ck_assert_str_eq (clean, expected);
    free (clean);
    json_t *o = json_object ();
    ck_assert_int_eq (jout_set (&o, "s", jout_string (bad)), 0);
    ck_assert_int_eq (jout_set (&o, "none", jout_string (NULL)), 0);
    char *text = jout_dump (o);
    json_decref (o);
    char err[256];
    jdoc_t *doc = jdoc_parse (text, err, sizeof err);
    ck_assert_msg (doc != NULL, "%s: %s", err, text);
    ck_assert_str_eq (jdoc_string (doc, "$.s"), expected);
    ck_assert_int_eq (jdoc_type_at (doc, "$.none"), JDOC_NULL);
    jdoc_destroy (&doc);
    free (text);
}
END_TEST

// A failed constructor (NULL) empties the container it was meant for, so
// that the writer finds out once, at the dump; dumps into a short buffer
// are cut like snprintf.
START_TEST (jout_failures_reach_the_dump_and_short_buffers_are_cut)
{
    json_t *o = json_object (), *a = json_array ();
    ck_assert_int_eq (jout_append (&a, json_integer (1)), 0);
    ck_assert_int_eq (jout_set (&o, "list", a), 0);
    ck_assert_int_eq (jout_set (&o, "lost", NULL), -1);
    ck_assert_ptr_null (o);
    ck_assert_int_eq (jout_set (&o, "after", json_true ()), -1);
    ck_assert_ptr_null (jout_dump (o));
    a = NULL;
    ck_assert_int_eq (jout_append (&a, json_integer (2)), -1);
    char buf[8] = "x";
    ck_assert_uint_eq (jout_dumpb (NULL, buf, sizeof buf), 0);
    ck_assert_str_eq (buf, "");
    ck_assert_int_eq (jout_write (NULL, stdout), -1);

    o = json_object ();
    jout_set (&o, "stem", jout_string ("a<b"));
    jout_set (&o, "n", json_integer (42));
    const char *whole = "{\"stem\":\"a\\u003cb\",\"n\":42}";
    ck_assert_uint_eq (jout_dumpb (o, buf, sizeof buf), strlen (whole));
    ck_assert_str_eq (buf, "{\"stem\"");
    ck_assert_uint_eq (jout_dumpb (o, NULL, 0), strlen (whole));
    char room[64];
    ck_assert_uint_eq (jout_dumpb (o, room, sizeof room), strlen (whole));
    ck_assert_str_eq (room, whole);
    json_decref (o);
}
END_TEST

// The reader takes what an older writer passed through as it was: bytes
// that are not UTF-8 read as U+FFFD instead of refusing the document.
START_TEST (jdoc_reads_invalid_utf8_as_replacement_characters)
{
    jdoc_t *doc = s_parse ("{\"error\": \"cannot open 'x\xff.tif'\", \"n\": 3}");
    ck_assert_str_eq (jdoc_string (doc, "$.error"), "cannot open 'x\xef\xbf\xbd.tif'");
    ck_assert_int_eq (jdoc_int (doc, 0, "$.n"), 3);
    jdoc_destroy (&doc);
    // Keys reached quoted or bare, with a '.' only quoted, a quote only bare.
    doc = s_parse ("{\"a.b\": 1, \"c\\\"d\": 2, \"\": 3, \"x\": [[7]]}");
    ck_assert_int_eq (jdoc_int (doc, 0, "$.\"a.b\""), 1);
    ck_assert_int_eq (jdoc_type_at (doc, "$.a.b"), JDOC_MISSING);
    ck_assert_int_eq (jdoc_int (doc, 0, "$.c\"d"), 2);
    ck_assert_int_eq (jdoc_int (doc, 0, "$.\"\""), 3);
    ck_assert_int_eq (jdoc_int (doc, 0, "$.x[0][0]"), 7);
    ck_assert_int_eq (jdoc_type_at (doc, "$.x[-1]"), JDOC_MISSING);
    ck_assert_int_eq (jdoc_type_at (doc, "$.x[+0]"), JDOC_MISSING);
    ck_assert_int_eq (jdoc_type_at (doc, "$.x[#-1]"), JDOC_MISSING);
    ck_assert_int_eq (jdoc_type_at (doc, "$.x[0]x"), JDOC_MISSING);
    jdoc_destroy (&doc);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("json");
    TCase *read = tcase_create ("read");
    tcase_add_test (read, reads_nested_objects_and_arrays);
    tcase_add_test (read, tells_null_from_missing);
    tcase_add_test (read, keeps_nanosecond_times_and_large_integers_exact);
    tcase_add_test (read, unescapes_strings_and_keeps_utf8);
    tcase_add_test (read, gives_a_subtree_back_as_json_text);
    tcase_add_test (read, reads_a_large_array_in_one_parse);
    tcase_add_test (read, refuses_text_that_is_not_json);
    tcase_add_test (read, a_path_too_long_or_malformed_finds_nothing);
    tcase_add_test (read, jout_writes_every_number_one_way);
    tcase_add_test (read, jout_writes_any_bytes_as_a_valid_json_string);
    tcase_add_test (read, jout_failures_reach_the_dump_and_short_buffers_are_cut);
    tcase_add_test (read, jdoc_reads_invalid_utf8_as_replacement_characters);
    suite_add_tcase (suite, read);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
