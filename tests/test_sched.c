// test_sched.c — the dispatch queue: the order of each policy, sampling,
// rate limits on a simulated clock, pause, turns between experiments.

#include "broker/sched.h"
#include "tests/testutil.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MS 1000000LL
#define SECOND 1000000000LL
// A clock like the broker's (ns since the epoch), far from 0.
#define T0 (1700000000LL * SECOND)

// Tasks are the pair id itself (ids >= 1), so the task says which pair it is.
static int
s_add (sched_t *s, int64_t exp, int64_t pair, int fresh)
{
    return sched_add (s, exp, pair, (void *) (intptr_t) pair, fresh);
}

// The pair sched_next gives at 'now' (0: none), its experiment into *exp_p.
static int64_t
s_take (sched_t *s, int64_t now, int64_t *exp_p)
{
    int64_t exp = -1, pair = -1;
    void *task = sched_next (s, now, &exp, &pair);
    if (!task)
        return 0;
    ck_assert_int_eq ((intptr_t) task, pair);
    if (exp_p)
        *exp_p = exp;
    return pair;
}

// Takes everything that may go at 'now' and checks it is 'expected' (n pairs).
static void
s_expect (sched_t *s, int64_t now, const int64_t *expected, int n)
{
    for (int i = 0; i < n; i++) {
        int64_t got = s_take (s, now, NULL);
        ck_assert_msg (got == expected[i], "dispatch %d: pair %lld, expected %lld", i,
                       (long long) got, (long long) expected[i]);
    }
    ck_assert_msg (s_take (s, now, NULL) == 0, "a pair beyond the %d expected", n);
}

START_TEST (all_gives_the_oldest_pair_first)
{
    sched_t *s = sched_new ();
    for (int64_t p = 1; p <= 4; p++)
        ck_assert_int_eq (s_add (s, 1, p, 1), SCHED_QUEUED);
    ck_assert_int_eq (s_add (s, 1, 10, 1), SCHED_QUEUED);
    // a requeued old pair takes its place by id
    ck_assert_int_eq (s_take (s, T0, NULL), 1);
    ck_assert_int_eq (s_add (s, 1, 1, 0), SCHED_QUEUED);
    ck_assert_uint_eq (sched_size (s), 5);
    s_expect (s, T0, (int64_t[]) {1, 2, 3, 4, 10}, 5);
    ck_assert_uint_eq (sched_size (s), 0);
    sched_destroy (&s);
    ck_assert_ptr_null (s);
}
END_TEST

START_TEST (latest_gives_the_newest_pair_first_and_older_ones_when_nothing_newer_waits)
{
    sched_t *s = sched_new ();
    ck_assert_int_eq (sched_set_policy (s, 1, (sched_policy_t) {SCHED_LATEST, 0}), 0);
    for (int64_t p = 1; p <= 3; p++)
        s_add (s, 1, p, 1);
    ck_assert_int_eq (s_take (s, T0, NULL), 3);
    s_add (s, 1, 4, 1);
    s_add (s, 1, 5, 1);
    ck_assert_int_eq (s_take (s, T0, NULL), 5);
    ck_assert_int_eq (s_take (s, T0, NULL), 4);
    s_add (s, 1, 6, 1);
    s_expect (s, T0, (int64_t[]) {6, 2, 1}, 3);
    sched_destroy (&s);
}
END_TEST

START_TEST (sample_3_queues_one_fresh_pair_in_three_and_never_skips_requeued_ones)
{
    sched_t *s = sched_new ();
    sched_policy_t sample3 = {SCHED_SAMPLE, 3};
    ck_assert_int_eq (sched_set_policy (s, 1, sample3), 0);
    int queued[10] = {0};
    for (int64_t p = 1; p <= 9; p++) {
        queued[p] = s_add (s, 1, p, 1) == SCHED_QUEUED;
        if (p == 5) // a requeued pair in between: queued, and not counted
            ck_assert_int_eq (s_add (s, 1, 100, 0), SCHED_QUEUED);
    }
    for (int p = 1; p <= 9; p++)
        ck_assert_msg (queued[p] == (p == 1 || p == 4 || p == 7), "pair %d queued: %d", p,
                       queued[p]);
    ck_assert_uint_eq (sched_size_of (s, 1), 4);
    s_expect (s, T0, (int64_t[]) {1, 4, 7, 100}, 4);
    // pairs 10 and 11 would be skipped; setting the policy restarts the count
    ck_assert_int_eq (s_add (s, 1, 10, 1), SCHED_QUEUED);
    ck_assert_int_eq (s_add (s, 1, 11, 1), SCHED_SKIPPED);
    ck_assert_int_eq (sched_set_policy (s, 1, sample3), 0);
    ck_assert_int_eq (s_add (s, 1, 12, 1), SCHED_QUEUED);
    ck_assert_int_eq (s_add (s, 1, 13, 1), SCHED_SKIPPED);
    // a global sample applies to experiments without their own policy only
    ck_assert_int_eq (sched_set_policy (s, 0, (sched_policy_t) {SCHED_SAMPLE, 2}), 0);
    ck_assert_int_eq (s_add (s, 2, 1, 1), SCHED_QUEUED);
    ck_assert_int_eq (s_add (s, 2, 2, 1), SCHED_SKIPPED);
    ck_assert_int_eq (s_add (s, 1, 14, 1), SCHED_SKIPPED);
    // sample 1 queues every pair
    ck_assert_int_eq (sched_set_policy (s, 1, (sched_policy_t) {SCHED_SAMPLE, 1}), 0);
    for (int64_t p = 15; p <= 18; p++)
        ck_assert_int_eq (s_add (s, 1, p, 1), SCHED_QUEUED);
    sched_destroy (&s);
}
END_TEST

START_TEST (rate_5_sends_one_pair_every_200_ms)
{
    sched_t *s = sched_new ();
    ck_assert_int_eq (sched_set_rate (s, 0, 5), 0);
    for (int64_t p = 1; p <= 1000; p++)
        s_add (s, 1, p, 1);
    int64_t times[100];
    int n = 0;
    for (int64_t now = T0; now < T0 + 10 * SECOND; now += MS)
        while (s_take (s, now, NULL) != 0) {
            ck_assert_int_lt (n, 100);
            times[n++] = now;
        }
    ck_assert_msg (n >= 49 && n <= 51, "%d dispatches in 10 s", n);
    ck_assert_int_eq (times[0], T0);
    for (int i = 1; i < n; i++)
        ck_assert_msg (times[i] - times[i - 1] == 200 * MS, "dispatch %d %lld ms after the last",
                       i, (long long) ((times[i] - times[i - 1]) / MS));
    sched_destroy (&s);
}
END_TEST

// Dispatches of experiments 1 and 2 over 10 s of calls every ms.
static void
s_count_10_s (sched_t *s, int *n1, int *n2)
{
    *n1 = *n2 = 0;
    for (int64_t now = T0; now < T0 + 10 * SECOND; now += MS) {
        int64_t exp;
        while (s_take (s, now, &exp) != 0)
            (exp == 1 ? (*n1)++ : (*n2)++);
    }
}

START_TEST (the_stricter_of_the_global_and_the_experiment_rate_applies)
{
    for (int round = 0; round < 2; round++) {
        sched_t *s = sched_new ();
        sched_set_rate (s, 0, round ? 2 : 10);
        sched_set_rate (s, 1, round ? 10 : 2);
        for (int64_t p = 1; p <= 1000; p++)
            s_add (s, 1, p, 1);
        int n1, n2;
        s_count_10_s (s, &n1, &n2);
        ck_assert_msg (n1 >= 19 && n1 <= 21, "round %d: %d dispatches", round, n1);
        sched_destroy (&s);
    }
    // global 10, experiment 1 its own 2: 1 gets 2/s, 2 the rest of the 10
    sched_t *s = sched_new ();
    sched_set_rate (s, 0, 10);
    sched_set_rate (s, 1, 2);
    for (int64_t p = 1; p <= 1000; p++) {
        s_add (s, 1, p, 1);
        s_add (s, 2, p, 1);
    }
    ck_assert (sched_rate (s, 1) == 2 && sched_rate (s, 2) == 10);
    int n1, n2;
    s_count_10_s (s, &n1, &n2);
    ck_assert_msg (n1 >= 19 && n1 <= 21 && n1 + n2 >= 99 && n1 + n2 <= 101, "%d + %d", n1, n2);
    sched_destroy (&s);
}
END_TEST

START_TEST (next_time_says_when_a_rate_limit_lets_the_next_pair_go)
{
    sched_t *s = sched_new ();
    ck_assert_int_eq (sched_next_time (s, T0), -1);
    s_add (s, 1, 1, 1);
    s_add (s, 1, 2, 1);
    ck_assert_int_eq (sched_next_time (s, T0), T0);
    sched_set_rate (s, 0, 5);
    ck_assert_int_eq (s_take (s, T0, NULL), 1);
    ck_assert_int_eq (sched_next_time (s, T0 + MS), T0 + 200 * MS);
    ck_assert_int_eq (s_take (s, T0 + 199 * MS, NULL), 0);
    // the experiment's own, stricter limit counts from the same dispatch
    sched_set_rate (s, 1, 2);
    ck_assert_int_eq (sched_next_time (s, T0 + MS), T0 + 500 * MS);
    ck_assert_int_eq (s_take (s, T0 + 499 * MS, NULL), 0);
    ck_assert_int_eq (sched_next_time (s, T0 + 600 * MS), T0 + 600 * MS);
    // paused: nothing waits for a token
    sched_set_paused (s, 1, 1);
    ck_assert_int_eq (sched_next_time (s, T0 + MS), -1);
    sched_set_paused (s, 1, 0);
    sched_set_paused (s, 0, 1);
    ck_assert_int_eq (sched_next_time (s, T0 + MS), -1);
    sched_set_paused (s, 0, 0);
    ck_assert_int_eq (s_take (s, T0 + 500 * MS, NULL), 2);
    ck_assert_int_eq (sched_next_time (s, T0 + 500 * MS), -1);
    sched_destroy (&s);
}
END_TEST

START_TEST (experiments_take_turns)
{
    sched_t *s = sched_new ();
    for (int64_t p = 1; p <= 3; p++) {
        s_add (s, 2, 20 + p, 1);
        s_add (s, 1, 10 + p, 1);
    }
    s_add (s, 7, 71, 1);
    s_expect (s, T0, (int64_t[]) {11, 21, 71, 12, 22, 13, 23}, 7);
    // a rate-limited experiment does not hold the other back
    sched_set_rate (s, 1, 1);
    for (int64_t p = 4; p <= 6; p++) {
        s_add (s, 1, 10 + p, 1);
        s_add (s, 2, 20 + p, 1);
    }
    s_expect (s, T0 + MS, (int64_t[]) {24, 25, 26}, 3);
    s_expect (s, T0 + SECOND, (int64_t[]) {14}, 1);
    sched_destroy (&s);
}
END_TEST

START_TEST (pause_stops_dispatch_at_once_until_resumed)
{
    sched_t *s = sched_new ();
    sched_set_policy (s, 2, (sched_policy_t) {SCHED_LATEST, 0});
    for (int64_t p = 1; p <= 3; p++) {
        s_add (s, 1, 10 + p, 1);
        s_add (s, 2, 20 + p, 1);
    }
    ck_assert_int_eq (sched_set_paused (s, 0, 1), 0);
    ck_assert (sched_paused (s, 0) && sched_paused (s, 1) && sched_paused (s, 2));
    ck_assert_int_eq (s_take (s, T0, NULL), 0);
    sched_set_paused (s, 0, 0);
    ck_assert_int_eq (s_take (s, T0, NULL), 11);
    // the latest experiment paused: nothing of it goes, the other goes on
    sched_set_paused (s, 2, 1);
    ck_assert (!sched_paused (s, 0) && !sched_paused (s, 1) && sched_paused (s, 2));
    s_expect (s, T0, (int64_t[]) {12, 13}, 2);
    // global pause and resume leave the experiment's own flag
    sched_set_paused (s, 0, 1);
    sched_set_paused (s, 0, 0);
    ck_assert (sched_paused (s, 2));
    ck_assert_int_eq (s_take (s, T0, NULL), 0);
    sched_set_paused (s, 2, 0);
    s_expect (s, T0, (int64_t[]) {23, 22, 21}, 3);
    sched_destroy (&s);
}
END_TEST

START_TEST (an_experiment_that_inherits_follows_the_global_rate_and_policy)
{
    sched_t *s = sched_new ();
    char buf[32];
    sched_set_rate (s, 0, 4);
    sched_set_rate (s, 1, 1);
    sched_set_policy (s, 1, (sched_policy_t) {SCHED_LATEST, 0});
    sched_set_paused (s, 1, 1);
    ck_assert (sched_rate (s, 1) == 1 && sched_rate (s, 0) == 4 && sched_rate (s, 9) == 4);
    ck_assert_str_eq (sched_policy_format (sched_policy (s, 1), buf, sizeof buf), "latest");
    ck_assert_str_eq (sched_policy_format (sched_policy (s, 9), buf, sizeof buf), "all");
    sched_inherit (s, 1);
    ck_assert (sched_rate (s, 1) == 4);
    ck_assert_str_eq (sched_policy_format (sched_policy (s, 1), buf, sizeof buf), "all");
    ck_assert (sched_paused (s, 1)); // pause is kept
    sched_set_paused (s, 1, 0);
    for (int64_t p = 1; p <= 3; p++)
        s_add (s, 1, p, 1);
    // oldest first now, one every 250 ms
    ck_assert_int_eq (s_take (s, T0, NULL), 1);
    ck_assert_int_eq (s_take (s, T0 + 249 * MS, NULL), 0);
    ck_assert_int_eq (s_take (s, T0 + 250 * MS, NULL), 2);
    // it follows later global changes too
    sched_set_rate (s, 0, 0);
    sched_set_policy (s, 0, (sched_policy_t) {SCHED_SAMPLE, 2});
    ck_assert_int_eq (s_add (s, 1, 4, 1), SCHED_QUEUED);
    ck_assert_int_eq (s_add (s, 1, 5, 1), SCHED_SKIPPED);
    s_expect (s, T0 + 251 * MS, (int64_t[]) {3, 4}, 2);
    sched_destroy (&s);
}
END_TEST

START_TEST (a_task_put_back_goes_first_and_gets_its_token_back)
{
    sched_t *s = sched_new ();
    sched_set_rate (s, 0, 1);
    sched_set_rate (s, 1, 1);
    sched_set_policy (s, 2, (sched_policy_t) {SCHED_LATEST, 0});
    for (int64_t p = 1; p <= 3; p++) {
        s_add (s, 1, 10 + p, 1);
        s_add (s, 2, 20 + p, 1);
    }
    int64_t exp, pair;
    void *task = sched_next (s, T0, &exp, &pair);
    ck_assert (task && exp == 1 && pair == 11);
    ck_assert_int_eq (s_add (s, 1, 10, 0), SCHED_QUEUED); // older, but the put back goes first
    ck_assert_int_eq (sched_put_back (s, exp, pair, task), 0);
    ck_assert_uint_eq (sched_size_of (s, 1), 4);
    // refunded (both buckets), and experiment 1 keeps its turn
    ck_assert_int_eq (s_take (s, T0 + MS, NULL), 11);
    ck_assert_int_eq (s_take (s, T0 + 2 * MS, NULL), 0);
    sched_set_rate (s, 0, 0);
    sched_set_rate (s, 1, 0);
    s_expect (s, T0 + 2 * MS, (int64_t[]) {23, 10, 22, 12, 21, 13}, 6);
    // latest: a newer pair arrived meanwhile, the put back still goes first
    s_add (s, 2, 24, 1);
    task = sched_next (s, T0, &exp, &pair);
    ck_assert (exp == 2 && pair == 24);
    s_add (s, 2, 25, 1);
    sched_put_back (s, exp, pair, task);
    s_expect (s, T0, (int64_t[]) {24, 25}, 2);
    // two taken, put back in the reverse order: they go again as taken
    for (int64_t p = 1; p <= 3; p++)
        s_add (s, 3, p, 1);
    int64_t pair2;
    void *task1 = sched_next (s, T0, &exp, &pair), *task2 = sched_next (s, T0, &exp, &pair2);
    ck_assert_int_eq (sched_put_back (s, 3, pair2, task2), 0);
    ck_assert_int_eq (sched_put_back (s, 3, pair, task1), 0);
    ck_assert_int_eq (sched_put_back (s, 3, pair, task1), -1); // already queued
    s_expect (s, T0, (int64_t[]) {1, 2, 3}, 3);
    sched_destroy (&s);
}
END_TEST

START_TEST (a_removed_task_is_handed_back_and_never_dispatched)
{
    sched_t *s = sched_new ();
    for (int64_t p = 1; p <= 5; p++)
        s_add (s, 1, p, 1);
    ck_assert_ptr_eq (sched_remove (s, 1, 3), (void *) 3);
    ck_assert_ptr_null (sched_remove (s, 1, 3));
    ck_assert_ptr_null (sched_remove (s, 2, 1));
    ck_assert_uint_eq (sched_size (s), 4);
    int64_t exp, pair;
    void *task = sched_next (s, T0, &exp, &pair);
    sched_put_back (s, exp, pair, task);
    ck_assert_ptr_eq (sched_remove (s, 1, 1), (void *) 1); // a put back one too
    s_expect (s, T0, (int64_t[]) {2, 4, 5}, 3);
    ck_assert_uint_eq (sched_size_of (s, 1), 0);
    sched_destroy (&s);
}
END_TEST

START_TEST (a_pair_already_queued_or_a_bad_argument_is_refused)
{
    sched_t *s = sched_new ();
    ck_assert_int_eq (s_add (s, 1, 1, 1), SCHED_QUEUED);
    ck_assert_int_eq (s_add (s, 1, 1, 0), -1);
    ck_assert_int_eq (s_add (s, 0, 2, 1), -1);
    ck_assert_int_eq (sched_add (s, 1, 2, NULL, 1), -1);
    ck_assert_int_eq (sched_set_rate (s, 1, -1), -1);
    ck_assert_int_eq (sched_set_policy (s, 1, (sched_policy_t) {SCHED_SAMPLE, 0}), -1);
    ck_assert_uint_eq (sched_size (s), 1);
    ck_assert (sched_rate (s, 1) == 0);
    sched_destroy (&s);
}
END_TEST

static void
s_collect (void *task, void *arg)
{
    int64_t *sum = arg;
    *sum += (intptr_t) task;
}

START_TEST (clear_hands_back_every_task)
{
    sched_t *s = sched_new ();
    int64_t sum = 0;
    for (int64_t p = 1; p <= 100; p++)
        s_add (s, 1 + p % 3, p, 1);
    int64_t exp, pair;
    void *task = sched_next (s, T0, &exp, &pair);
    sched_put_back (s, exp, pair, task);
    sched_clear (s, s_collect, &sum);
    ck_assert_int_eq (sum, 5050);
    ck_assert_uint_eq (sched_size (s), 0);
    ck_assert_int_eq (s_take (s, T0, NULL), 0);
    ck_assert_int_eq (s_add (s, 1, 1, 1), SCHED_QUEUED);
    sched_destroy (&s);
    sched_destroy (&s);
}
END_TEST

START_TEST (a_queue_of_200000_pairs_keeps_its_order)
{
    enum { N = 200000 };
    sched_t *s = sched_new ();
    sched_set_policy (s, 2, (sched_policy_t) {SCHED_LATEST, 0});
    // experiment 1: requeued in a scrambled order (7919 is prime to N)
    for (int64_t i = 0; i < N; i++)
        ck_assert_int_eq (s_add (s, 1, 1 + (i * 7919) % N, 0), SCHED_QUEUED);
    // experiment 2: fresh, in order; every tenth removed
    for (int64_t p = 1; p <= N; p++)
        s_add (s, 2, p, 1);
    for (int64_t p = 10; p <= N; p += 10)
        ck_assert_ptr_eq (sched_remove (s, 2, p), (void *) (intptr_t) p);
    ck_assert_uint_eq (sched_size (s), N + N - N / 10);
    int64_t next1 = 1, next2 = N - 1;
    int64_t exp, pair;
    while (sched_next (s, T0, &exp, &pair)) {
        if (exp == 1) {
            ck_assert_int_eq (pair, next1);
            next1++;
        }
        else {
            ck_assert_int_eq (pair, next2);
            next2 -= next2 % 10 == 1 ? 2 : 1;
        }
    }
    ck_assert_int_eq (next1, N + 1);
    ck_assert_int_eq (next2, -1);
    ck_assert_uint_eq (sched_size (s), 0);
    sched_destroy (&s);
}
END_TEST

START_TEST (policies_parse_from_words_and_format_back)
{
    char err[128] = "", buf[32];
    sched_policy_t p;
    char *sample[] = {"sample", "3"}, *latest[] = {"latest"}, *all[] = {"all"};
    ck_assert_int_eq (sched_policy_parse (2, sample, &p, err, sizeof err), 0);
    ck_assert (p.kind == SCHED_SAMPLE && p.n == 3);
    ck_assert_str_eq (sched_policy_format (p, buf, sizeof buf), "sample 3");
    ck_assert_int_eq (sched_policy_parse (1, latest, &p, err, sizeof err), 0);
    ck_assert_str_eq (sched_policy_format (p, buf, sizeof buf), "latest");
    ck_assert_int_eq (sched_policy_parse (1, all, &p, err, sizeof err), 0);
    ck_assert_str_eq (sched_policy_format (p, buf, sizeof buf), "all");

    struct {
        int argc;
        char *argv[3];
        const char *word;
    } bad[] = {{1, {"newest"}, "'newest'"}, {2, {"sample", "0"}, "'0'"},
               {2, {"sample", "3x"}, "'3x'"}, {1, {"sample"}, "'sample'"},
               {2, {"all", "now"}, "'now'"},  {0, {NULL}, "policy"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_int_eq (sched_policy_parse (bad[i].argc, bad[i].argv, &p, err, sizeof err), -1);
        ck_assert_msg (strstr (err, bad[i].word) != NULL, "'%s' does not name %s", err,
                       bad[i].word);
    }
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("sched");
    TCase *tc = tcase_create ("queue");
    tcase_add_test (tc, all_gives_the_oldest_pair_first);
    tcase_add_test (tc, latest_gives_the_newest_pair_first_and_older_ones_when_nothing_newer_waits);
    tcase_add_test (tc, sample_3_queues_one_fresh_pair_in_three_and_never_skips_requeued_ones);
    tcase_add_test (tc, rate_5_sends_one_pair_every_200_ms);
    tcase_add_test (tc, the_stricter_of_the_global_and_the_experiment_rate_applies);
    tcase_add_test (tc, next_time_says_when_a_rate_limit_lets_the_next_pair_go);
    tcase_add_test (tc, experiments_take_turns);
    tcase_add_test (tc, pause_stops_dispatch_at_once_until_resumed);
    tcase_add_test (tc, an_experiment_that_inherits_follows_the_global_rate_and_policy);
    tcase_add_test (tc, a_task_put_back_goes_first_and_gets_its_token_back);
    tcase_add_test (tc, a_removed_task_is_handed_back_and_never_dispatched);
    tcase_add_test (tc, a_pair_already_queued_or_a_bad_argument_is_refused);
    tcase_add_test (tc, clear_hands_back_every_task);
    tcase_add_test (tc, a_queue_of_200000_pairs_keeps_its_order);
    tcase_add_test (tc, policies_parse_from_words_and_format_back);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
