// test_settings.c — settings per experiment (issue 25, doc/control.md
// 'piv'): PIV settings and pairing rules set with the real pivctl on a real
// farm (broker, watcher, agent on ipc:// sockets in a temporary directory),
// seen where a scientist sees them: the grid of the results, the header of
// the result files, the settings each result records in the store, and the
// pairs a rule makes. Plus the configuration's [piv] section, which takes
// exactly the keys the engine parses.

#include "common/config.h"
#include "common/jdoc.h"
#include "piv/settings.h"
#include "tests/testutil.h"

#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static tu_farm_t s_farm;

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
}

static void
s_teardown (void)
{
    tu_farm_release (&s_farm);
}

static void
s_start_watcher_and_agent (void)
{
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
}

// 'pivctl ... --json', which must succeed: its answer (caller destroys).
static jdoc_t *
s_ask (const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    jdoc_t *doc = tu_farm_ask_v (&s_farm, first, ap);
    va_end (ap);
    return doc;
}

// pivctl with the arguments: its exit status, its output in out.
static int
s_pivctl (char *out, size_t len, const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    int rc = tu_farm_pivctl_v (&s_farm, out, len, first, ap);
    va_end (ap);
    return rc;
}

// 1 if the exported file <dir>/<name> holds 'text' (0 if not, or none).
static int
s_file_has (const char *dir, const char *name, const char *text)
{
    char path[8400];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    char *data = tu_slurp (path, NULL);
    int has = data && strstr (data, text);
    free (data);
    return has;
}

// Refused as bad usage (exit 2) with one line naming 'named'.
static void
s_refused (const char *named, const char *first, ...)
{
    char out[8192];
    va_list ap;
    va_start (ap, first);
    int rc = tu_farm_pivctl_v (&s_farm, out, sizeof out, first, ap);
    va_end (ap);
    ck_assert_msg (rc == 2, "pivctl %s: exit %d, expected 2: %s", first, rc, out);
    ck_assert_msg (strncmp (out, "pivctl: ", 8) == 0 && strstr (out, named), "%s", out);
}

// The settings of experiment 'name' in force, as 'pivctl piv NAME' shows
// them (malloc'd).
static char *
s_in_force (const char *name)
{
    jdoc_t *doc = s_ask ("piv", name, NULL);
    const char *settings = jdoc_string (doc, "$.settings");
    ck_assert (settings);
    char *copy = strdup (settings);
    jdoc_destroy (&doc);
    return copy;
}

// The pairs of src/<prefix>_<i>_{a,b}.tif, first .. last, into data/<exp>/
// as <stem>_<2i-1>.tif and <stem>_<2i>.tif: frames numbered in sequence,
// as a camera that knows nothing of A and B names them.
static void
s_land_sequence (const char *exp, const char *prefix, const char *stem, int first, int last)
{
    char dir[4096];
    snprintf (dir, sizeof dir, "%s/data/%s", s_farm.dir, exp);
    mkdir (dir, 0755);
    for (int i = first; i <= last; i++)
        for (int side = 0; side < 2; side++) {
            char from[4096], tmp[4200], to[4200];
            snprintf (from, sizeof from, "%s/src/%s_%04d_%c.tif", s_farm.dir, prefix, i,
                      side ? 'b' : 'a');
            snprintf (to, sizeof to, "%s/%s_%04d.tif", dir, stem, 2 * i - 1 + side);
            snprintf (tmp, sizeof tmp, "%s/.%s_%04d.part", dir, stem, 2 * i - 1 + side);
            tu_copy (from, tmp);
            ck_assert (rename (tmp, to) == 0);
        }
}

// Waits until 'done' pairs of experiment 'exp' are done; returns how many.
static int64_t
s_wait_done (const char *exp, int64_t done, int timeout_s)
{
    int64_t n = -1;
    for (int i = 0; i < timeout_s * 10 && n < done; i++) {
        n = tu_farm_sql (&s_farm,
                         "SELECT count(*) FROM pairs p JOIN experiments e ON e.id = p.experiment"
                         " WHERE e.name = '%s' AND p.state = 2",
                         exp);
        if (n < done)
            usleep (100000);
    }
    return n;
}

// The number of distinct grids (nx x ny) among the results of 'exp' whose
// recorded settings hold 'like' (an SQL LIKE pattern), and *nx the largest nx.
static int64_t
s_grids (const char *exp, const char *like, int64_t *nx)
{
    *nx = tu_farm_sql (&s_farm,
                       "SELECT max (r.nx) FROM results r JOIN pairs p ON p.id = r.pair"
                       " JOIN experiments e ON e.id = p.experiment"
                       " WHERE e.name = '%s' AND r.settings LIKE '%s'",
                       exp, like);
    return tu_farm_sql (&s_farm,
                        "SELECT count (DISTINCT r.nx || 'x' || r.ny) FROM results r"
                        " JOIN pairs p ON p.id = r.pair JOIN experiments e"
                        " ON e.id = p.experiment WHERE e.name = '%s' AND r.settings LIKE '%s'",
                        exp, like);
}

// Results of 'exp' whose recorded settings are not LIKE 'like'.
static int64_t
s_results_not (const char *exp, const char *like)
{
    return tu_farm_sql (&s_farm,
                        "SELECT count (*) FROM results r JOIN pairs p ON p.id = r.pair"
                        " JOIN experiments e ON e.id = p.experiment"
                        " WHERE e.name = '%s' AND (r.settings IS NULL OR r.settings NOT LIKE '%s')",
                        exp, like);
}

// ---------------------------------------------------------------------------
// The farm

// Two experiments at once, each with its own settings and pairing rule
// (set before their first frame: the command makes them), their results on
// their own grids; a change mid-run applies to the pairs dispatched after
// it, each result recording what it was made with; a bad key or value is
// refused naming it, nothing changed; a restart of the broker keeps them.
START_TEST (two_experiments_run_at_once_with_their_own_settings_and_pairing_rules)
{
    tu_farm_render (&s_farm, 6, "v");
    tu_farm_start_broker (&s_farm);
    jdoc_t *doc = s_ask ("piv", "exp1", "passes=32", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.own"), "passes=32");
    ck_assert_int_eq (jdoc_bool (doc, 0, "$.created"), 1);
    ck_assert_msg (strncmp (jdoc_string (doc, "$.settings"), "passes=32 overlap=50 ", 21) == 0,
                   "%s", jdoc_string (doc, "$.settings"));
    jdoc_destroy (&doc);
    doc = s_ask ("piv", "exp2", "passes=16", "eps=0.2", "pairing=sequence", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.pairing.rule"), "sequence");
    ck_assert_int_eq (jdoc_bool (doc, 0, "$.pairing.own"), 1);
    ck_assert_msg (strstr (jdoc_string (doc, "$.settings"), "passes=16 ") &&
                       strstr (jdoc_string (doc, "$.settings"), " eps=0.2"),
                   "%s", jdoc_string (doc, "$.settings"));
    jdoc_destroy (&doc);

    doc = s_ask ("status", "-e", "exp2", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.experiments[0].pairing"), "sequence");
    jdoc_destroy (&doc);

    // Refused, naming the key and why; nothing changed.
    char *before = s_in_force ("exp1");
    s_refused ("colour", "piv", "exp1", "colour=red", NULL);
    s_refused ("threshold", "piv", "exp1", "passes=16", "threshold=-1", NULL);
    s_refused ("pairing", "piv", "exp1", "pairing=zigzag", NULL);
    s_refused ("mask", "piv", "exp1", "mask=/tmp/m.tif", NULL);
    char *after = s_in_force ("exp1");
    ck_assert_str_eq (before, after);
    free (before);
    free (after);

    s_start_watcher_and_agent ();
    tu_farm_land (&s_farm, "v", 1, 3, 0);
    s_land_sequence ("exp2", "v", "seq", 1, 3);
    ck_assert_int_eq (s_wait_done ("exp1", 3, 60), 3);
    ck_assert_int_eq (s_wait_done ("exp2", 3, 60), 3);
    int64_t nx1, nx2;
    ck_assert_int_eq (s_grids ("exp1", "passes=32 %", &nx1), 1);
    ck_assert_int_eq (s_grids ("exp2", "passes=16 %eps=0.2%", &nx2), 1);
    ck_assert_msg (nx2 > nx1, "16 px windows give a finer grid: %lld against %lld", (long long)nx2,
                   (long long)nx1);
    ck_assert_int_eq (s_results_not ("exp1", "passes=32 %"), 0);
    // The agent's result file says the same.
    char *head = tu_slurp (tu_path (s_farm.dir, "results/exp2/seq_0001.txt"), NULL);
    ck_assert_msg (head && strstr (head, "settings passes=16 ") && strstr (head, "eps=0.2"), "%s",
                   head ? head : "(no result file)");
    free (head);

    // A change mid-run: the pairs dispatched after it are made with it.
    doc = s_ask ("piv", "exp1", "overlap=0", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.own"), "passes=32 overlap=0");
    jdoc_destroy (&doc);
    tu_farm_land (&s_farm, "v", 4, 5, 0);
    ck_assert_int_eq (s_wait_done ("exp1", 5, 60), 5);
    int64_t nx_later;
    ck_assert_int_eq (s_grids ("exp1", "passes=32 overlap=0 %", &nx_later), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count (*) FROM results"
                                            " WHERE settings LIKE 'passes=32 overlap=0 %%'"),
                      2);
    printf ("grids of 256 x 256 frames: passes=32 nx %lld, passes=16 nx %lld, passes=32 "
            "overlap=0 nx %lld; settings kept a result: %lld bytes on average\n",
            (long long)nx1, (long long)nx2, (long long)nx_later,
            (long long)tu_farm_sql (&s_farm, "SELECT avg (length (settings)) FROM results"));
    ck_assert_msg (nx_later < nx1, "no overlap, fewer windows: %lld against %lld",
                   (long long)nx_later, (long long)nx1);
    // The history: each change a "setting" event of the experiment.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count (*) FROM events e JOIN experiments x"
                                            " ON x.id = e.experiment WHERE x.name = 'exp1'"
                                            " AND e.kind = 'setting' AND e.payload LIKE 'piv=%%'"),
                      2);

    // The export says, field by field, what each was made with.
    char dir[4200], out[8192];
    snprintf (dir, sizeof dir, "%s", tu_path (s_farm.dir, "export1"));
    ck_assert_msg (s_pivctl (out, sizeof out, "export", "exp1", "-o", dir, NULL) == 0, "%s", out);
    ck_assert (s_file_has (dir, "v_0001.txt", "piv settings: passes=32 overlap=50 "));
    ck_assert (s_file_has (dir, "v_0005.txt", "piv settings: passes=32 overlap=0 "));

    // A restart keeps them: the next pairs of each are made as before it.
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    tu_farm_start_broker (&s_farm);
    doc = s_ask ("piv", "exp2", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.own"), "passes=16 eps=0.2");
    ck_assert_str_eq (jdoc_string (doc, "$.pairing.rule"), "sequence");
    jdoc_destroy (&doc);
    s_land_sequence ("exp2", "v", "seq", 4, 5);
    tu_farm_land (&s_farm, "v", 6, 6, 0);
    ck_assert_int_eq (s_wait_done ("exp2", 5, 60), 5);
    ck_assert_int_eq (s_wait_done ("exp1", 6, 60), 6);
    ck_assert_int_eq (s_results_not ("exp2", "passes=16 %eps=0.2%"), 0);
    ck_assert_int_eq (s_grids ("exp2", "%", &nx2), 1);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count (*) FROM results"
                                            " WHERE settings LIKE 'passes=32 overlap=0 %%'"),
                      3);

    // Back to the default, key by key or all at once; the default of all.
    doc = s_ask ("piv", "exp1", "overlap=default", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.own"), "passes=32");
    jdoc_destroy (&doc);
    doc = s_ask ("piv", "*", "overlap=25", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.own"), "overlap=25");
    jdoc_destroy (&doc);
    after = s_in_force ("exp1");
    ck_assert_msg (strncmp (after, "passes=32 overlap=25 ", 21) == 0, "%s", after);
    free (after);
    doc = s_ask ("piv", "exp2", "--reset", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.own"), "");
    ck_assert_str_eq (jdoc_string (doc, "$.pairing.rule"), "ab");
    ck_assert_msg (strncmp (jdoc_string (doc, "$.settings"), "passes=32,16 overlap=25 ", 24) == 0,
                   "%s", jdoc_string (doc, "$.settings"));
    jdoc_destroy (&doc);
}
END_TEST

// Frames a rule refuses (B005_1.tif, B005_2.tif under ab) pair once their
// experiment is given the rule that fits them, and a replay pairs and
// computes as its source: its settings and rule, or --set's.
START_TEST (frames_a_rule_refused_pair_under_the_rule_set_later_and_replays_keep_it)
{
    tu_farm_render (&s_farm, 2, "w");
    tu_farm_start_broker (&s_farm);
    s_start_watcher_and_agent ();
    s_land_sequence ("exp3", "w", "B005", 1, 2);
    for (int i = 0; i < 100 && tu_farm_sql (&s_farm, "SELECT count (*) FROM files") < 4; i++)
        usleep (100000);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count (*) FROM files"), 4);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count (*) FROM pairs"), 0);
    jdoc_t *doc = s_ask ("piv", "exp3", "pairing=sequence", "passes=16", NULL);
    jdoc_destroy (&doc);
    ck_assert_int_eq (s_wait_done ("exp3", 2, 60), 2);
    ck_assert_int_eq (s_results_not ("exp3", "passes=16 %"), 0);

    // The replay: the source's rule and settings; --set changes one.
    doc = s_ask ("replay", "exp3", "--as", "again", "--speed", "max", "--set", "eps=0.3", NULL);
    jdoc_destroy (&doc);
    ck_assert_int_eq (s_wait_done ("again", 2, 60), 2);
    ck_assert_int_eq (s_results_not ("again", "passes=16 %eps=0.3%"), 0);
    doc = s_ask ("piv", "again", NULL);
    ck_assert_str_eq (jdoc_string (doc, "$.pairing.rule"), "sequence");
    ck_assert_msg (jdoc_string (doc, "$.base") && strstr (jdoc_string (doc, "$.base"), "eps=0.3"),
                   "%s", jdoc_string (doc, "$.base"));
    jdoc_destroy (&doc);
    s_refused ("bad --set", "replay", "exp3", "--set", "colour=red", NULL);
}
END_TEST

// A pair out with an agent when its experiment's settings change finishes
// with those it was sent with, and its result records them; the next pair
// is sent with the new ones. The agent runs a program that waits for a gate
// file: the pair is out, for sure, when the settings change.
START_TEST (a_pair_out_at_a_change_keeps_the_settings_it_was_sent_with)
{
    char gate[4200], script[8192], conf[4200];
    snprintf (gate, sizeof gate, "%s", tu_path (s_farm.dir, "gate"));
    snprintf (script, sizeof script,
              "#!/bin/sh\nwhile [ ! -e '%s' ]; do sleep 0.05; done\necho made > \"$3\"\n", gate);
    snprintf (conf, sizeof conf, "%s", tu_path (s_farm.dir, "wait.sh"));
    tu_spit (conf, script, strlen (script));
    ck_assert (chmod (conf, 0755) == 0);
    char processor[4400];
    snprintf (processor, sizeof processor, "exec:%s", conf);
    tu_farm_conf (&s_farm, processor, 1, "32,16", "");
    tu_farm_fake (&s_farm, 2, "g");
    tu_farm_start_broker (&s_farm);
    s_start_watcher_and_agent ();
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    for (int i = 0; i < 100 && tu_farm_counts (&s_farm).dispatched < 1; i++)
        usleep (100000);
    ck_assert_int_eq (tu_farm_counts (&s_farm).dispatched, 1);
    jdoc_t *doc = s_ask ("piv", "exp1", "eps=0.3", NULL);
    jdoc_destroy (&doc);
    tu_spit (gate, "", 0);
    ck_assert_int_eq (s_wait_done ("exp1", 1, 60), 1);
    tu_farm_land (&s_farm, "g", 2, 2, 0);
    ck_assert_int_eq (s_wait_done ("exp1", 2, 60), 2);
    char *first = tu_farm_sql_text (&s_farm, "SELECT r.settings FROM results r JOIN pairs p"
                                             " ON p.id = r.pair WHERE p.stem = 'g_0001'");
    char *second = tu_farm_sql_text (&s_farm, "SELECT r.settings FROM results r JOIN pairs p"
                                              " ON p.id = r.pair WHERE p.stem = 'g_0002'");
    ck_assert_msg (first && strncmp (first, "passes=32,16 ", 13) == 0 && !strstr (first, "eps="),
                   "%s", first ? first : "(none)");
    ck_assert_msg (second && strstr (second, " eps=0.3"), "%s", second ? second : "(none)");
    free (first);
    free (second);
}
END_TEST

// ---------------------------------------------------------------------------
// The configuration's [piv] section

// Loads 'text' as a configuration: 0 or -1 with err.
static int
s_load (const char *text, config_t *cfg, char *err, size_t errlen)
{
    const char *path = tu_path (s_farm.dir, "piv.conf");
    tu_spit (path, text, strlen (text));
    return config_load (cfg, path, err, errlen);
}

// Every key the engine parses is a key of [piv] (piv/threshold was
// refused), checked by the engine's rules: a bad value or an unknown key

// Preprocessing and the background are an experiment's settings like any
// other: set with 'pivctl piv', carried by its tasks, applied by the agent
// and said in each result file's header.
START_TEST (an_experiments_preprocessing_and_background_reach_its_agent_and_results)
{
    tu_farm_render (&s_farm, 4, "v");
    tu_farm_start_broker (&s_farm);
    s_refused ("background", "piv", "exp1", "background=median:3", NULL);
    jdoc_t *doc = s_ask ("piv", "exp1", "background=min:3", "cap=2", "lcn=16", NULL);
    ck_assert_msg (strstr (jdoc_string (doc, "$.settings"), "background=min:3")
                       && strstr (jdoc_string (doc, "$.settings"), "cap=2")
                       && strstr (jdoc_string (doc, "$.settings"), "lcn=16"),
                   "%s", jdoc_string (doc, "$.settings"));
    jdoc_destroy (&doc);
    s_start_watcher_and_agent ();
    tu_farm_land (&s_farm, "v", 1, 4, 0);
    ck_assert_int_eq (s_wait_done ("exp1", 4, 60), 4);
    char *head = tu_slurp (tu_path (s_farm.dir, "results/exp1/v_0004.txt"), NULL);
    ck_assert_msg (head && strstr (head, "background min:3 of experiment 'exp1' over ")
                       && strstr (head, "cap=2") && strstr (head, "lcn=16"),
                   "%s", head ? head : "(no result file)");
    free (head);
    ck_assert_int_eq (s_results_not ("exp1", "%background=min:3%"), 0);
}
END_TEST

// refused naming it; the settings tasks carry hold them.
START_TEST (the_piv_section_takes_exactly_the_keys_the_engine_parses)
{
    config_rules ("piv", piv_settings_check_key);
    config_t cfg;
    char err[1024];
    ck_assert_msg (s_load ("piv\n    threshold = 3\n    eps = 0.15\n    median = plain\n"
                           "    passes = 32, 16\n",
                           &cfg, err, sizeof err) == 0,
                   "%s", err);
    ck_assert_str_eq (cfg.piv.settings, "threshold=3 eps=0.15 median=plain");
    ck_assert_str_eq (cfg.piv.passes, "32,16");
    piv_settings_t s;
    char text[1024];
    snprintf (text, sizeof text, "passes=%s %s", cfg.piv.passes, cfg.piv.settings);
    ck_assert_msg (piv_settings_parse (text, &s, err, sizeof err) == 0, "%s", err);
    ck_assert (s.median_threshold == 3 && s.median_eps == 0.15 && !s.median_curved);

    ck_assert_int_eq (s_load ("piv\n    threshold = -1\n", &cfg, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "'piv/threshold'") && strstr (err, "threshold -1"), "%s", err);
    ck_assert_int_eq (s_load ("piv\n    colour = red\n", &cfg, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "unknown key 'piv/colour'"), "%s", err);
    ck_assert_int_eq (s_load ("piv\n    eps = 0.1\n    eps = 0.2\n", &cfg, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "'piv/eps' is given twice"), "%s", err);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("settings");
    TCase *farm = tcase_create ("farm");
    tcase_add_checked_fixture (farm, s_setup, s_teardown);
    tcase_set_timeout (farm, 300);
    tcase_add_test (farm, two_experiments_run_at_once_with_their_own_settings_and_pairing_rules);
    tcase_add_test (farm, frames_a_rule_refused_pair_under_the_rule_set_later_and_replays_keep_it);
    tcase_add_test (farm, a_pair_out_at_a_change_keeps_the_settings_it_was_sent_with);
    tcase_add_test (farm, an_experiments_preprocessing_and_background_reach_its_agent_and_results);
    suite_add_tcase (suite, farm);
    TCase *config = tcase_create ("config");
    tcase_add_checked_fixture (config, s_setup, s_teardown);
    tcase_add_test (config, the_piv_section_takes_exactly_the_keys_the_engine_parses);
    suite_add_tcase (suite, config);
    return tu_run_suite (suite);
}
