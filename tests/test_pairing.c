// test_pairing.c — the pairing rules: which files of an experiment make a
// pair, whatever order they arrive in.

#include "broker/pairing.h"
#include "common/config.h"
#include "common/pairing_rule.h"
#include "common/util.h"
#include "tests/testutil.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The pairs emitted so far (the first 64 as "experiment|stem|a|b" lines).
static char s_pairs[64][256];
static int s_npairs;

// The id a test offers a file with: one that tells the files apart.
static int64_t
s_id (const char *name)
{
    uint64_t h = 14695981039346656037u;  // FNV-1a
    for (const char *c = name; *c; c++)
        h = (h ^ (unsigned char) *c) * 1099511628211u;
    return (int64_t) (h & INT64_MAX);
}

static int
s_collect (void *arg, const char *experiment, const char *stem, const pairing_set_t *set)
{
    (void) arg;
    // Each pair carries back the ids its files were offered with.
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq (set->id[k], set->name[k] ? s_id (set->name[k]) : 0);
    if (s_npairs < 64 && set->name[2])
        snprintf (s_pairs[s_npairs], 256, "%s|%s|%s|%s|%s|%s", experiment, stem, set->name[0],
                  set->name[1], set->name[2], set->name[3]);
    else if (s_npairs < 64)
        snprintf (s_pairs[s_npairs], 256, "%s|%s|%s|%s", experiment, stem, set->name[0],
                  set->name[1] ? set->name[1] : "-");
    s_npairs++;
    return 0;
}

static pairing_t *
s_rules (const char *rule)
{
    config_t cfg;
    config_init (&cfg);
    snprintf (cfg.pairing.rule, sizeof cfg.pairing.rule, "%s", rule);
    char err[256] = "";
    pairing_t *p = pairing_new (&cfg, err, sizeof err);
    ck_assert_msg (p != NULL, "%s", err);
    s_npairs = 0;
    return p;
}

// Offers 'name' and checks how many pairs it completed.
static void
s_offer (pairing_t *p, const char *experiment, const char *name, int expected)
{
    char err[256] = "";
    int got = pairing_offer (p, experiment, name, s_id (name), s_collect, NULL, err, sizeof err);
    ck_assert_msg (got == expected, "'%s': %d pairs, expected %d (%s)", name, got, expected, err);
}

static int
s_has (const char *line)
{
    for (int i = 0; i < s_npairs && i < 64; i++)
        if (strcmp (s_pairs[i], line) == 0)
            return 1;
    return 0;
}

START_TEST (ab_pairs_a_and_b_in_either_order)
{
    pairing_t *p = s_rules ("ab");
    s_offer (p, "run7", "x_0001_a.tif", 0);
    ck_assert_int_eq (pairing_waiting (p, "run7"), 1);
    s_offer (p, "run7", "x_0002_b.tif", 0);
    s_offer (p, "run7", "x_0001_b.tif", 1);
    s_offer (p, "run7", "x_0002_a.tif", 1);
    ck_assert (s_has ("run7|x_0001|x_0001_a.tif|x_0001_b.tif"));
    ck_assert (s_has ("run7|x_0002|x_0002_a.tif|x_0002_b.tif"));
    ck_assert_int_eq (pairing_waiting (p, "run7"), 0);
    pairing_destroy (&p);
    ck_assert (p == NULL);
}
END_TEST

START_TEST (ab_ignores_case_of_suffix_and_extension_by_default)
{
    pairing_t *p = s_rules ("ab");
    s_offer (p, "e", "Shot12_A.TIF", 0);
    s_offer (p, "e", "Shot12_b.tiff", 1);
    ck_assert (s_has ("e|Shot12|Shot12_A.TIF|Shot12_b.tiff"));
    pairing_destroy (&p);
}
END_TEST

START_TEST (ab_follows_configured_suffixes_and_case)
{
    config_t cfg;
    config_init (&cfg);
    snprintf (cfg.pairing.a_suffix, sizeof cfg.pairing.a_suffix, "-frameA");
    snprintf (cfg.pairing.b_suffix, sizeof cfg.pairing.b_suffix, "-frameB");
    cfg.pairing.ignore_case = 0;
    char err[256];
    pairing_t *p = pairing_new (&cfg, err, sizeof err);
    s_npairs = 0;
    s_offer (p, "e", "p1-frameA.tif", 0);
    s_offer (p, "e", "p1-frameb.tif", -1);  // case matters now
    s_offer (p, "e", "p1-frameB.tif", 1);
    ck_assert (s_has ("e|p1|p1-frameA.tif|p1-frameB.tif"));
    pairing_destroy (&p);
}
END_TEST

START_TEST (files_pair_only_within_one_experiment_and_directory)
{
    pairing_t *p = s_rules ("ab");
    s_offer (p, "one", "s_a.tif", 0);
    s_offer (p, "two", "s_b.tif", 0);
    s_offer (p, "one", "cam1/s_b.tif", 0);
    s_offer (p, "one", "cam1/s_a.tif", 1);
    ck_assert (s_has ("one|cam1/s|cam1/s_a.tif|cam1/s_b.tif"));
    ck_assert_int_eq (pairing_waiting (p, "one"), 1);
    ck_assert_int_eq (pairing_waiting (p, "two"), 1);
    ck_assert_int_eq (pairing_waiting (p, "three"), 0);
    pairing_destroy (&p);
}
END_TEST

START_TEST (a_file_offered_again_while_waiting_emits_nothing)
{
    pairing_t *p = s_rules ("ab");
    s_offer (p, "e", "s_a.tif", 0);
    s_offer (p, "e", "s_a.tif", 0);
    ck_assert_int_eq (pairing_waiting (p, "e"), 1);
    s_offer (p, "e", "s_b.tif", 1);
    ck_assert_int_eq (s_npairs, 1);
    pairing_destroy (&p);
}
END_TEST

START_TEST (names_that_do_not_fit_the_rule_are_refused_by_name)
{
    pairing_t *p = s_rules ("ab");
    char err[256] = "";
    ck_assert_int_eq (pairing_offer (p, "e", "notes.txt", 1, s_collect, NULL, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "'notes.txt'") && strstr (err, "extension"), "%s", err);
    ck_assert_int_eq (pairing_offer (p, "e", "shot.tif", 1, s_collect, NULL, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "'shot.tif'") && strstr (err, "rule ab"), "%s", err);
    ck_assert_int_eq (pairing_offer (p, "e", ".tif", 1, s_collect, NULL, err, sizeof err), -1);
    ck_assert_int_eq (pairing_offer (p, "e", "a\x1f_a.tif", 1, s_collect, NULL, err, sizeof err), -1);
    pairing_destroy (&p);
    p = s_rules ("sequence");
    ck_assert_int_eq (pairing_offer (p, "e", "shot_a.tif", 1, s_collect, NULL, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "frame number"), "%s", err);
    pairing_destroy (&p);
}
END_TEST

START_TEST (sequence_pairs_frames_one_two_then_three_four)
{
    pairing_t *p = s_rules ("sequence");
    s_offer (p, "e", "img0002.tif", 0);  // B before A
    s_offer (p, "e", "img0001.tif", 1);
    s_offer (p, "e", "img0003.tif", 0);
    s_offer (p, "e", "img0005.tif", 0);
    s_offer (p, "e", "img0004.tif", 1);
    ck_assert (s_has ("e|img0001|img0001.tif|img0002.tif"));
    ck_assert (s_has ("e|img0003|img0003.tif|img0004.tif"));
    ck_assert_int_eq (s_npairs, 2);
    ck_assert_int_eq (pairing_waiting (p, "e"), 1);  // frame 5 waits for 6
    pairing_destroy (&p);
}
END_TEST

START_TEST (sliding_pairs_every_frame_with_the_next_in_any_order)
{
    pairing_t *p = s_rules ("sliding");
    static const char *const order[] = {"f3.tif", "f1.tif", "f5.tif", "f2.tif", "f4.tif"};
    static const int made[] = {0, 0, 0, 2, 2};
    for (int i = 0; i < 5; i++)
        s_offer (p, "e", order[i], made[i]);
    ck_assert_int_eq (s_npairs, 4);
    ck_assert (s_has ("e|f1|f1.tif|f2.tif"));
    ck_assert (s_has ("e|f2|f2.tif|f3.tif"));
    ck_assert (s_has ("e|f3|f3.tif|f4.tif"));
    ck_assert (s_has ("e|f4|f4.tif|f5.tif"));
    // Only the ends of the run wait: memory does not grow with frames.
    ck_assert_int_eq (pairing_waiting (p, "e"), 2);
    for (int i = 6; i < 1000; i++) {
        char name[32];
        snprintf (name, sizeof name, "f%d.tif", i);
        s_offer (p, "e", name, 1);
    }
    ck_assert_int_eq (pairing_waiting (p, "e"), 2);
    pairing_destroy (&p);
}
END_TEST

// Nothing vanishes: the files in no pair are counted and the first few
// named with what each waits for, or why the rule refused it.
START_TEST (files_in_no_pair_are_counted_and_named_with_what_they_wait_for)
{
    pairing_unpaired_t u;
    char err[512], expects[256];
    pairing_t *p = s_rules ("sequence");
    s_offer (p, "e", "img0005.tif", 0);
    ck_assert_int_eq (pairing_offer (p, "e", "notes.txt", 9, s_collect, NULL, err, sizeof err), -1);
    pairing_unpaired (p, "e", &u);
    ck_assert (u.waiting == 1 && u.refused == 1 && u.nwaiting == 1 && u.nrefused == 1);
    ck_assert_str_eq (u.waiting_files[0].name, "img0005.tif");
    ck_assert_str_eq (u.waiting_files[0].why, "waits for 'img0006.tif'");
    ck_assert_str_eq (u.refused_files[0].name, "notes.txt");
    ck_assert_str_eq (u.refused_files[0].why, "is not a frame: its extension is not one of 'tif'");
    pairing_expects (p, "e", expects, sizeof expects);
    ck_assert_str_eq (expects, "frames 1-2, 3-4, ... (<prefix><frame number>.tif)");
    pairing_unpaired (p, "other", &u);
    ck_assert (u.waiting == 0 && u.refused == 0 && u.nwaiting == 0);
    pairing_destroy (&p);
    // Sliding: the ends of a run are in a pair; a lone frame is not.
    p = s_rules ("sliding");
    s_offer (p, "e", "f1.tif", 0);
    s_offer (p, "e", "f2.tif", 1);
    s_offer (p, "e", "f9.tif", 0);
    pairing_unpaired (p, "e", &u);
    ck_assert (u.waiting == 1 && u.nwaiting == 1 && u.refused == 0);
    ck_assert_str_eq (u.waiting_files[0].why, "waits for frame 8 or 10");
    pairing_destroy (&p);
    // Past PAIRING_SHOWN, counted but not named.
    p = s_rules ("ab");
    for (int i = 0; i < PAIRING_SHOWN + 3; i++) {
        char name[32];
        snprintf (name, sizeof name, "B%03d_1.tif", i);
        ck_assert_int_eq (pairing_offer (p, "e", name, i, s_collect, NULL, err, sizeof err), -1);
    }
    pairing_unpaired (p, "e", &u);
    ck_assert_int_eq (u.refused, PAIRING_SHOWN + 3);
    ck_assert_int_eq (u.nrefused, PAIRING_SHOWN);
    ck_assert_str_eq (u.refused_files[0].name, "B000_1.tif");
    pairing_destroy (&p);
}
END_TEST

START_TEST (multipage_makes_a_pair_of_every_file)
{
    pairing_t *p = s_rules ("multipage");
    s_offer (p, "e", "pair_17.tif", 1);
    ck_assert (s_has ("e|pair_17|pair_17.tif|-"));
    ck_assert_int_eq (pairing_waiting (p, "e"), 0);
    pairing_destroy (&p);
}
END_TEST

static int
s_refuse (void *arg, const char *experiment, const char *stem, const pairing_set_t *set)
{
    (void) arg, (void) experiment, (void) stem, (void) set;
    return -1;
}

START_TEST (a_pair_the_caller_cannot_record_is_reported_apart_from_a_bad_name)
{
    pairing_t *p = s_rules ("ab");
    char err[256] = "";
    ck_assert_int_eq (pairing_offer (p, "e", "s_a.tif", 1, s_refuse, NULL, err, sizeof err), 0);
    ck_assert_int_eq (pairing_offer (p, "e", "s_b.tif", 1, s_refuse, NULL, err, sizeof err), -2);
    ck_assert_msg (strstr (err, "cannot record") && strstr (err, "'s_b.tif'"), "%s", err);
    pairing_destroy (&p);
    p = s_rules ("multipage");
    ck_assert_int_eq (pairing_offer (p, "e", "m.tif", 1, s_refuse, NULL, err, sizeof err), -2);
    pairing_destroy (&p);
}
END_TEST

// Files that never meet their partner wait within a bound per experiment:
// past pairing/max_waiting the oldest is forgotten, with one warning that
// names it and the bound (not one a file), the others still pair.
START_TEST (waiting_files_are_bounded_per_experiment_oldest_forgotten_with_a_warning)
{
    config_t cfg;
    config_init (&cfg);
    cfg.pairing.max_waiting = 3;
    char err[256] = "", name[64];
    pairing_t *p = pairing_new (&cfg, err, sizeof err);
    ck_assert_msg (p != NULL, "%s", err);
    s_npairs = 0;
    // The warnings go to stderr: into a file for the test.
    char log[4096];
    snprintf (log, sizeof log, "%s/stderr.log", tu_tmpdir ());
    fflush (stderr);
    int saved = dup (2), fd = open (log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert (saved >= 0 && fd >= 0);
    dup2 (fd, 2);
    for (int i = 1; i <= 5; i++) {
        snprintf (name, sizeof name, "x_%04d_a.tif", i);
        s_offer (p, "run7", name, 0);
    }
    s_offer (p, "run8", "y_0001_a.tif", 0);
    // Many more: the count stays at the bound.
    for (int i = 6; i <= 20000; i++) {
        snprintf (name, sizeof name, "x_%04d_a.tif", i);
        s_offer (p, "run7", name, 0);
    }
    fflush (stderr);
    dup2 (saved, 2);
    close (saved), close (fd);
    ck_assert_int_eq (pairing_waiting (p, "run7"), 3);
    ck_assert_int_eq (pairing_waiting (p, "run8"), 1);
    // The oldest is gone: its B waits in its turn; the newest still pair.
    s_offer (p, "run7", "x_0001_b.tif", 0);
    ck_assert_int_eq (pairing_waiting (p, "run7"), 3);
    s_offer (p, "run7", "x_20000_b.tif", 1);
    ck_assert (s_has ("run7|x_20000|x_20000_a.tif|x_20000_b.tif"));
    s_offer (p, "run8", "y_0001_b.tif", 1);
    char *text = tu_slurp (log, NULL);
    ck_assert (text != NULL);
    printf ("%s", text);
    ck_assert_msg (strstr (text, "experiment 'run7'") && strstr (text, "pairing/max_waiting")
                       && strstr (text, "'x_0001_a.tif'"),
                   "%s", text);
    // Rate-limited: one line for thousands of forgotten files.
    int lines = 0;
    for (char *c = text; *c; c++)
        lines += *c == '\n';
    ck_assert_int_eq (lines, 1);
    free (text);
    pairing_destroy (&p);
    // Sequence and sliding frames are bounded the same way.
    cfg.pairing.max_waiting = 2;
    snprintf (cfg.pairing.rule, sizeof cfg.pairing.rule, "%s", "sliding");
    p = pairing_new (&cfg, err, sizeof err);
    ck_assert (p != NULL);
    s_npairs = 0;
    for (int i = 1; i <= 99; i += 2) {  // every other frame: none meets a neighbour
        snprintf (name, sizeof name, "f_%04d.tif", i);
        s_offer (p, "run9", name, 0);
    }
    ck_assert_int_eq (pairing_waiting (p, "run9"), 2);
    pairing_destroy (&p);
}
END_TEST

// The stem of the last pair emitted (whole, however long).
static char s_last_stem[8192];

static int
s_keep_stem (void *arg, const char *experiment, const char *stem, const pairing_set_t *set)
{
    (void) arg, (void) experiment, (void) set;
    snprintf (s_last_stem, sizeof s_last_stem, "%s", stem);
    s_npairs++;
    return 0;
}

// Issue 23: the pairing held stems of 1023 bytes and keys of 2047 (cut
// silently): a pair 8 directories of 255 bytes deep was never paired.
// Every name the codec takes pairs now, and long keys never run together.
START_TEST (stems_as_long_as_a_name_may_be_pair_and_never_run_together)
{
    static char deep[3801], a[4300], b[4300];
    memset (deep, 'd', 3800);
    for (int i = 255; i < 3800; i += 256)
        deep[i] = '/';
    const char *rules[] = {"ab", "sequence"};
    for (int r = 0; r < 2; r++) {
        pairing_t *p = s_rules (rules[r]);
        char err[512] = "";
        const char *fa = r ? "s_0001.tif" : "s_a.tif", *fb = r ? "s_0002.tif" : "s_b.tif";
        snprintf (a, sizeof a, "%s/%s", deep, fa);
        snprintf (b, sizeof b, "%s/%s", deep, fb);
        ck_assert_int_eq (pairing_offer (p, "e", a, 1, s_keep_stem, NULL, err, sizeof err), 0);
        // Another file with the same 3,800 bytes first is no partner.
        snprintf (b, sizeof b, "%s/%s", deep, r ? "t_0002.tif" : "t_b.tif");
        ck_assert_int_eq (pairing_offer (p, "e", b, 2, s_keep_stem, NULL, err, sizeof err), 0);
        snprintf (b, sizeof b, "%s/%s", deep, fb);
        ck_assert_msg (pairing_offer (p, "e", b, 3, s_keep_stem, NULL, err, sizeof err) == 1,
                       "%s: %s", rules[r], err);
        ck_assert_int_eq (strlen (s_last_stem), strlen (a) - strlen (r ? ".tif" : "_a.tif"));
        ck_assert (strncmp (s_last_stem, a, strlen (s_last_stem)) == 0);
        pairing_destroy (&p);
    }
    // Beyond what the codec takes, refused with the limit and the length.
    pairing_t *p = s_rules ("ab");
    static char over[5000];
    memset (over, 'o', 4100);
    strcpy (over + 4100, "_a.tif");
    char err[512] = "";
    ck_assert_int_eq (pairing_offer (p, "e", over, 1, s_keep_stem, NULL, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "...") && strstr (err, "' is 4106 bytes long, over the 4095 "
                                                      "PATH_MAX allows"),
                   "%s", err);
    pairing_destroy (&p);
}
END_TEST

START_TEST (an_unknown_rule_is_refused)
{
    config_t cfg;
    config_init (&cfg);
    snprintf (cfg.pairing.rule, sizeof cfg.pairing.rule, "pairs");
    char err[256] = "";
    ck_assert (pairing_new (&cfg, err, sizeof err) == NULL);
    ck_assert_msg (strstr (err, "'pairs'") != NULL, "%s", err);
    ck_assert_str_eq (err,
                      "bad pairing/rule 'pairs': expected ab, sequence, sliding, multipage or stereo");
    config_init (&cfg);
    snprintf (cfg.pairing.b_suffix, sizeof cfg.pairing.b_suffix, "%s", cfg.pairing.a_suffix);
    ck_assert (pairing_new (&cfg, err, sizeof err) == NULL);
    ck_assert_msg (strstr (err, "suffixes") != NULL, "%s", err);
}
END_TEST

// Every rule of the table (common/pairing_rule.h) is one pairing_new
// knows, found by its exact name.
START_TEST (every_rule_of_the_table_is_one_pairing_knows)
{
    const pairing_rule_info_t *rule;
    for (int i = 0; (rule = pairing_rule_get (i)); i++) {
        ck_assert_int_eq (rule->rule, i);
        ck_assert (pairing_rule_find (rule->name) == rule);
        pairing_t *p = s_rules (rule->name);
        pairing_destroy (&p);
    }
    ck_assert (pairing_rule_find ("AB") == NULL && pairing_rule_choice (-1) == NULL);
}
END_TEST

// "name (which files pair)" of rule i, NULL past the last (8 slots).
static const char *
s_rule_described (int i)
{
    static char text[8][128];
    const pairing_rule_info_t *rule = pairing_rule_get (i);
    if (!rule)
        return NULL;
    snprintf (text[i % 8], sizeof text[0], "%s (%s)", rule->name, rule->pairs);
    return text[i % 8];
}

// The docs that list the rules list the table's, no more, no fewer: a rule
// added to common/pairing_rule.h fails here until they say it too.
START_TEST (the_docs_list_the_rules_of_the_table)
{
    char rules[1024], expected[1100];
    util_join (s_rule_described, ", ", " or ", rules, sizeof rules);
    snprintf (expected, sizeof expected, ": %s.", rules);
    const char *docs[] = {"conf/pivfarm.conf", "doc/design.md", "README.md"};
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        char *text = tu_doc (docs[i]);
        ck_assert_msg (strstr (text, expected) != NULL, "%s does not list the rules as '%s'",
                       docs[i], expected);
        free (text);
    }
}
END_TEST


// Issue 26: the two cameras' pairs of one instant, cam1/<stem>_a, _b and
// cam2/<stem>_a, _b, make one set of four frames whatever order they come
// in; until the fourth is there the others wait, saying for what.
START_TEST (stereo_makes_one_set_of_four_frames_of_both_cameras)
{
    pairing_t *p = s_rules ("stereo");
    s_offer (p, "E", "cam2/s1_b.tif", 0);
    s_offer (p, "E", "cam1/s1_a.tif", 0);
    s_offer (p, "E", "cam2/s2_a.tif", 0);
    s_offer (p, "E", "cam1/s1_a.tif", 0);  // again while waiting: nothing
    s_offer (p, "E", "cam1/s1_B.TIF", 0);
    ck_assert_int_eq (pairing_waiting (p, "E"), 4);
    pairing_unpaired_t u;
    pairing_unpaired (p, "E", &u);
    ck_assert_int_eq ((int) u.waiting, 4);
    ck_assert_msg (strstr (u.waiting_files[0].why, "'cam2/s1_a.tif'") != NULL, "%s",
                   u.waiting_files[0].why);
    s_offer (p, "E", "cam2/s1_a.tif", 1);
    ck_assert (s_has ("E|s1|cam1/s1_a.tif|cam1/s1_B.TIF|cam2/s1_a.tif|cam2/s1_b.tif"));
    ck_assert_int_eq (pairing_waiting (p, "E"), 1);
    // Another experiment's frames of the same stem are another set.
    const char *other[] = {"cam1/s2_a.tif", "cam1/s2_b.tif", "cam2/s2_b.tif"};
    for (int i = 0; i < 3; i++)
        s_offer (p, "F", other[i], 0);
    ck_assert_int_eq (s_npairs, 1);
    pairing_destroy (&p);
}
END_TEST

START_TEST (stereo_refuses_files_outside_the_camera_folders_by_name)
{
    pairing_t *p = s_rules ("stereo");
    char err[256] = "";
    const char *bad[] = {"s1_a.tif", "cam3/s1_a.tif", "cam1/sub/s1_a.tif", "cam1/s1_c.tif",
                         "cam1/_a.tif"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq (pairing_offer (p, "E", bad[i], 1, s_collect, NULL, err, sizeof err), -1);
        ck_assert_msg (strstr (err, bad[i]) && strstr (err, "pairing rule stereo")
                           && strstr (err, "cam1/<stem>_a"),
                       "%s", err);
    }
    pairing_unpaired_t u;
    pairing_unpaired (p, "E", &u);
    ck_assert_int_eq ((int) u.refused, 5);
    ck_assert_int_eq (s_npairs, 0);
    pairing_destroy (&p);
}
END_TEST

// The camera folders: pairing/cameras, or an experiment's own; two
// different plain names, else refused with nothing changed.
START_TEST (stereo_camera_folders_are_configurable_per_experiment)
{
    config_t cfg;
    config_init (&cfg);
    snprintf (cfg.pairing.rule, sizeof cfg.pairing.rule, "stereo");
    snprintf (cfg.pairing.cameras, sizeof cfg.pairing.cameras, "left,right");
    char err[256] = "";
    pairing_t *p = pairing_new (&cfg, err, sizeof err);
    ck_assert_msg (p != NULL, "%s", err);
    s_npairs = 0;
    s_offer (p, "E", "left/t_a.tif", 0);
    s_offer (p, "E", "left/t_b.tif", 0);
    s_offer (p, "E", "right/t_a.tif", 0);
    s_offer (p, "E", "right/t_b.tif", 1);
    ck_assert (s_has ("E|t|left/t_a.tif|left/t_b.tif|right/t_a.tif|right/t_b.tif"));
    ck_assert_int_eq (pairing_set_cameras (p, "G", "c0,c1", err, sizeof err), 0);
    ck_assert_str_eq (pairing_cameras (p, "G"), "c0,c1");
    ck_assert_str_eq (pairing_cameras (p, "E"), "left,right");
    s_offer (p, "G", "left/t_a.tif", -1);
    s_offer (p, "G", "c1/t_a.tif", 0);
    const char *bad[] = {"c0", "c0,c0", "c0,..", "a,b,c", ",c1", "c0/x,c1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq (pairing_set_cameras (p, "G", bad[i], err, sizeof err), -1);
        ck_assert_msg (strstr (err, "camera folders") != NULL, "%s", err);
        ck_assert_str_eq (pairing_cameras (p, "G"), "c0,c1");
    }
    ck_assert_int_eq (pairing_set_cameras (p, "G", NULL, err, sizeof err), 0);
    ck_assert_str_eq (pairing_cameras (p, "G"), "left,right");
    pairing_destroy (&p);
    snprintf (cfg.pairing.cameras, sizeof cfg.pairing.cameras, "cam1");
    ck_assert (pairing_new (&cfg, err, sizeof err) == NULL);
    ck_assert_msg (strstr (err, "'cam1'") != NULL, "%s", err);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("pairing");
    TCase *tc = tcase_create ("rules");
    tcase_add_test (tc, ab_pairs_a_and_b_in_either_order);
    tcase_add_test (tc, ab_ignores_case_of_suffix_and_extension_by_default);
    tcase_add_test (tc, ab_follows_configured_suffixes_and_case);
    tcase_add_test (tc, files_pair_only_within_one_experiment_and_directory);
    tcase_add_test (tc, a_file_offered_again_while_waiting_emits_nothing);
    tcase_add_test (tc, names_that_do_not_fit_the_rule_are_refused_by_name);
    tcase_add_test (tc, sequence_pairs_frames_one_two_then_three_four);
    tcase_add_test (tc, sliding_pairs_every_frame_with_the_next_in_any_order);
    tcase_add_test (tc, multipage_makes_a_pair_of_every_file);
    tcase_add_test (tc, a_pair_the_caller_cannot_record_is_reported_apart_from_a_bad_name);
    tcase_add_test (tc, an_unknown_rule_is_refused);
    tcase_add_test (tc, every_rule_of_the_table_is_one_pairing_knows);
    tcase_add_test (tc, the_docs_list_the_rules_of_the_table);
    tcase_add_test (tc, files_in_no_pair_are_counted_and_named_with_what_they_wait_for);
    tcase_add_test (tc, stems_as_long_as_a_name_may_be_pair_and_never_run_together);
    tcase_add_test (tc, waiting_files_are_bounded_per_experiment_oldest_forgotten_with_a_warning);
    tcase_add_test (tc, stereo_makes_one_set_of_four_frames_of_both_cameras);
    tcase_add_test (tc, stereo_refuses_files_outside_the_camera_folders_by_name);
    tcase_add_test (tc, stereo_camera_folders_are_configurable_per_experiment);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
