// test_json.c — the JSON reader of store/json.h on documents like the
// broker's replies: nested objects and arrays, null against missing,
// numbers up to int64, escaped and UTF-8 strings, and text that is not
// JSON refused with a clear reason.

#include "common/util.h"
#include "store/json.h"
#include "tests/testutil.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *
s_parse (const char *text)
{
    char err[256] = "";
    json_t *doc = json_parse (text, err, sizeof err);
    ck_assert_msg (doc != NULL, "%s", err);
    return doc;
}

// What the broker, the feedback stream and pivctl write (util_json_string)
// reads back as it was, and is cut like snprintf when the room is short.
START_TEST (a_string_written_as_json_reads_back_as_it_was)
{
    const char *text = "run \"7\" \\ tab\there\nnew line \x01 \xc3\xa9t\xc3\xa9 <b>";
    char json[256], doc_text[300];
    size_t n = util_json_string (text, json, sizeof json);
    ck_assert_uint_eq (n, strlen (json));
    ck_assert_str_eq (json, "\"run \\\"7\\\" \\\\ tab\\u0009here\\u000anew line \\u0001 "
                            "\xc3\xa9t\xc3\xa9 <b>\"");
    snprintf (doc_text, sizeof doc_text, "{\"s\":%s}", json);
    char err[256];
    json_t *doc = json_parse (doc_text, err, sizeof err);
    ck_assert_msg (doc != NULL, "%s", err);
    ck_assert_str_eq (json_string (doc, "$.s"), text);
    json_destroy (&doc);
    // Short room: the length of the whole, a NUL-terminated prefix.
    char small[5];
    ck_assert_uint_eq (util_json_string (text, small, sizeof small), n);
    ck_assert_str_eq (small, "\"run");
    ck_assert_uint_eq (util_json_string (text, NULL, 0), n);
    ck_assert_uint_eq (util_json_string (NULL, json, sizeof json), 2);
    ck_assert_str_eq (json, "\"\"");
}
END_TEST

START_TEST (reads_nested_objects_and_arrays)
{
    json_t *doc = s_parse ("{\"uptime_s\": 12.5, \"experiments\": ["
                           " {\"experiment\": \"run7\", \"done\": 40, \"replay\": null},"
                           " {\"experiment\": \"run8\", \"done\": 3,"
                           "  \"replay\": {\"of\": \"run7\", \"finished\": true, \"sent\": 9}}],"
                           " \"agents\": [], \"roi\": [[1, 2], [3, 4, 5]]}");
    ck_assert_int_eq (json_type_at (doc, "$"), JSON_OBJECT);
    ck_assert_int_eq (json_type_at (doc, "$.experiments"), JSON_ARRAY);
    ck_assert_int_eq (json_length (doc, "$.experiments"), 2);
    ck_assert_int_eq (json_length (doc, "$.agents"), 0);
    ck_assert_int_eq (json_length (doc, "$.roi[1]"), 3);
    ck_assert_int_eq (json_length (doc, "$.uptime_s"), -1);
    ck_assert_int_eq (json_length (doc, "$.nothing"), -1);
    ck_assert_str_eq (json_string (doc, "$.experiments[%d].experiment", 1), "run8");
    ck_assert_int_eq (json_int (doc, -1, "$.experiments[%d].done", 0), 40);
    ck_assert_int_eq (json_type_at (doc, "$.experiments[1].replay"), JSON_OBJECT);
    ck_assert_str_eq (json_string (doc, "$.experiments[1].replay.of"), "run7");
    ck_assert_int_eq (json_bool (doc, 0, "$.experiments[1].replay.finished"), 1);
    ck_assert_int_eq (json_int (doc, 0, "$.roi[%d][%d]", 1, 2), 5);
    ck_assert_double_eq (json_number (doc, 0, "$.uptime_s"), 12.5);
    // Past the end of an array, or through a scalar: nothing there.
    ck_assert_int_eq (json_type_at (doc, "$.experiments[2]"), JSON_MISSING);
    ck_assert_int_eq (json_type_at (doc, "$.uptime_s.x"), JSON_MISSING);
    ck_assert_ptr_null (json_string (doc, "$.experiments[5].experiment"));
    json_destroy (&doc);
    ck_assert_ptr_null (doc);
    json_destroy (&doc); // a second destroy is harmless
}
END_TEST

START_TEST (tells_null_from_missing)
{
    json_t *doc = s_parse ("{\"latency_median_ms\": null, \"rate_limit\": 2.5, \"paused\": false}");
    ck_assert_int_eq (json_type_at (doc, "$.latency_median_ms"), JSON_NULL);
    ck_assert_int_eq (json_type_at (doc, "$.latency_p99_ms"), JSON_MISSING);
    // A key may be written quoted or bare: the same value.
    ck_assert_int_eq (json_type_at (doc, "$.\"latency_median_ms\""), JSON_NULL);
    ck_assert_double_eq (json_number (doc, 0, "$.\"rate_limit\""), 2.5);
    // Both give the default where a number is asked for.
    ck_assert_double_eq (json_number (doc, -7, "$.latency_median_ms"), -7);
    ck_assert_double_eq (json_number (doc, -7, "$.latency_p99_ms"), -7);
    ck_assert_int_eq (json_is_number (doc, "$.latency_median_ms"), 0);
    ck_assert_int_eq (json_is_number (doc, "$.rate_limit"), 1);
    // false is a value, not a missing one.
    ck_assert_int_eq (json_type_at (doc, "$.paused"), JSON_FALSE);
    ck_assert_int_eq (json_bool (doc, -1, "$.paused"), 0);
    ck_assert_int_eq (json_bool (doc, -1, "$.resumed"), -1);
    ck_assert_int_eq (json_bool (doc, -1, "$.latency_median_ms"), -1);
    // A number is not a string and a string is not a number.
    ck_assert_ptr_null (json_string (doc, "$.rate_limit"));
    json_destroy (&doc);
    doc = s_parse ("{\"s\": \"12\"}");
    ck_assert_double_eq (json_number (doc, -1, "$.s"), -1);
    ck_assert_int_eq (json_int (doc, -1, "$.s"), -1);
    json_destroy (&doc);
}
END_TEST

START_TEST (keeps_nanosecond_times_and_large_integers_exact)
{
    json_t *doc = s_parse ("{\"created_ns\": 1715000000123456789, \"max\": 9223372036854775807,"
                           " \"min\": -9223372036854775808, \"neg\": -42, \"exp\": 1.5e3,"
                           " \"frac\": -0.125, \"huge\": 1e300, \"zero\": 0}");
    ck_assert_int_eq (json_type_at (doc, "$.created_ns"), JSON_INTEGER);
    ck_assert (json_int (doc, 0, "$.created_ns") == INT64_C (1715000000123456789));
    ck_assert (json_int (doc, 0, "$.max") == INT64_MAX);
    ck_assert (json_int (doc, 0, "$.min") == INT64_MIN);
    ck_assert (json_int (doc, 0, "$.neg") == -42);
    ck_assert_int_eq (json_type_at (doc, "$.exp"), JSON_REAL);
    ck_assert (json_int (doc, 0, "$.exp") == 1500);
    ck_assert_double_eq (json_number (doc, 0, "$.frac"), -0.125);
    ck_assert (json_int (doc, 0, "$.frac") == 0);
    // A real beyond int64 clamps where an integer is asked for.
    ck_assert (json_int (doc, 0, "$.huge") == INT64_MAX);
    ck_assert_double_eq (json_number (doc, 0, "$.huge"), 1e300);
    ck_assert (json_int (doc, 5, "$.zero") == 0);
    json_destroy (&doc);
}
END_TEST

START_TEST (unescapes_strings_and_keeps_utf8)
{
    json_t *doc = s_parse ("{\"error\": \"cannot open \\\"a b.tif\\\": No such file\\n\","
                           " \"path\": \"C:\\\\data\\/x\", \"unit\": \"\\u00b5m/s\","
                           " \"greek\": \"ω = ∂v/∂x − ∂u/∂y\", \"empty\": \"\","
                           " \"a b\": \"spaced key\", \"emoji\": \"\\ud83d\\ude00\"}");
    ck_assert_str_eq (json_string (doc, "$.error"), "cannot open \"a b.tif\": No such file\n");
    ck_assert_str_eq (json_string (doc, "$.path"), "C:\\data/x");
    ck_assert_str_eq (json_string (doc, "$.unit"), "\xc2\xb5m/s");
    ck_assert_str_eq (json_string (doc, "$.greek"), "ω = ∂v/∂x − ∂u/∂y");
    ck_assert_str_eq (json_string (doc, "$.empty"), "");
    ck_assert_str_eq (json_string (doc, "$.\"a b\""), "spaced key");
    ck_assert_str_eq (json_string (doc, "$.emoji"), "\xf0\x9f\x98\x80");
    // Strings stay valid while the document lives, whatever is read after.
    const char *first = json_string (doc, "$.greek");
    for (int i = 0; i < 100; i++)
        json_string (doc, "$.error");
    ck_assert_str_eq (first, "ω = ∂v/∂x − ∂u/∂y");
    json_destroy (&doc);
}
END_TEST

START_TEST (gives_a_subtree_back_as_json_text)
{
    json_t *doc = s_parse ("{\"f\": {\"roi\": [0, 0, 64, 32], \"quantity\": \"mean_u\"},"
                           " \"s\": \"a\\\"b\", \"n\": null}");
    char *text = json_text (doc, "$.f.roi");
    ck_assert_str_eq (text, "[0,0,64,32]");
    free (text);
    text = json_text (doc, "$.s");
    ck_assert_str_eq (text, "\"a\\\"b\"");
    free (text);
    text = json_text (doc, "$.n");
    ck_assert_str_eq (text, "null");
    free (text);
    ck_assert_ptr_null (json_text (doc, "$.missing"));
    // The subtree parses back to the same values.
    text = json_text (doc, "$.f");
    json_t *sub = s_parse (text);
    free (text);
    ck_assert_str_eq (json_string (sub, "$.quantity"), "mean_u");
    ck_assert_int_eq (json_int (sub, 0, "$.roi[2]"), 64);
    json_destroy (&sub);
    json_destroy (&doc);
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
    json_t *doc = s_parse (text);
    free (text);
    ck_assert_int_eq (json_length (doc, "$.pairs"), 10000);
    int64_t sum = 0;
    for (int i = 0; i < 10000; i++) {
        sum += json_int (doc, 0, "$.pairs[%d].pair", i);
        char stem[16];
        snprintf (stem, sizeof stem, "s%05d", i);
        ck_assert_str_eq (json_string (doc, "$.pairs[%d].stem", i), stem);
    }
    ck_assert (sum == 10000LL * 10001 / 2);
    json_destroy (&doc);
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
        json_t *doc = json_parse (bad[i], err, sizeof err);
        ck_assert_msg (doc == NULL, "accepted '%s'", bad[i]);
        ck_assert_msg (strstr (err, "not valid JSON") != NULL, "'%s': %s", bad[i], err);
    }
    char err[256] = "";
    ck_assert_ptr_null (json_parse ("no experiment 'x'", err, sizeof err));
    ck_assert_str_eq (err, "not valid JSON (17 bytes, starting 'no experiment 'x'')");
    ck_assert_ptr_null (json_parse (NULL, err, sizeof err));
    // Scalars are documents too.
    json_t *doc = s_parse (" 42 ");
    ck_assert_int_eq (json_int (doc, 0, "$"), 42);
    json_destroy (&doc);
}
END_TEST

START_TEST (a_path_too_long_or_malformed_finds_nothing)
{
    json_t *doc = s_parse ("{\"a\": {\"b\": 1}}");
    ck_assert_int_eq (json_type_at (doc, "$.a.b"), JSON_INTEGER);
    ck_assert_int_eq (json_type_at (doc, "$.a .b"), JSON_MISSING);
    ck_assert_int_eq (json_type_at (doc, "a.b"), JSON_MISSING);
    ck_assert_int_eq (json_type_at (doc, "$.a.b%s", "[0]"), JSON_MISSING);
    char long_path[2000];
    memset (long_path, 'x', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    ck_assert_int_eq (json_type_at (doc, "$.%s", long_path), JSON_MISSING);
    ck_assert_int_eq (json_type_at (NULL, "$"), JSON_MISSING);
    json_destroy (&doc);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("json");
    TCase *read = tcase_create ("read");
    tcase_add_test (read, reads_nested_objects_and_arrays);
    tcase_add_test (read, a_string_written_as_json_reads_back_as_it_was);
    tcase_add_test (read, tells_null_from_missing);
    tcase_add_test (read, keeps_nanosecond_times_and_large_integers_exact);
    tcase_add_test (read, unescapes_strings_and_keeps_utf8);
    tcase_add_test (read, gives_a_subtree_back_as_json_text);
    tcase_add_test (read, reads_a_large_array_in_one_parse);
    tcase_add_test (read, refuses_text_that_is_not_json);
    tcase_add_test (read, a_path_too_long_or_malformed_finds_nothing);
    suite_add_tcase (suite, read);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
