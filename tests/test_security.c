// test_security.c — CURVE on the farm (doc/security.md): the real broker,
// watcher, agents and pivctl on ipc:// sockets in a temporary directory,
// each with the key pair 'pivctl keygen' made for it; who may connect, who
// may change things, and what a client with the wrong broker key hears;
// then the limits a watcher and an agent keep (max_pending, max_pixels).

#include "broker/peers.h"
#include "common/jdoc.h"
#include "common/proto.h"
#include "tests/testutil.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static tu_farm_t s_farm; // the farm of the running test

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
    // pivctl takes an operator's own key before the configuration's: none
    // here but what a test puts there.
    setenv ("HOME", s_farm.dir, 1);
    unsetenv ("XDG_CONFIG_HOME");
    unsetenv ("PIVFARM_CERT");
}

static void
s_teardown (void)
{
    tu_farm_release (&s_farm);
}

// 'pivctl keygen name -o dir' (under the farm), which must succeed.
static void
s_keygen (const char *name, const char *dir)
{
    char out[4096], path[4096];
    snprintf (path, sizeof path, "%s/%s", s_farm.dir, dir);
    mkdir (path, 0755);
    char *argv[] = {(char *)tu_bin ("pivctl"), "keygen", (char *)name, "-o", path, NULL};
    ck_assert_msg (tu_run (argv, out, sizeof out, 30) == 0, "keygen %s: %s", name, out);
}

// Copies the public certificate keys/<name>.cert into 'dir' of the farm.
static void
s_authorise (const char *name, const char *dir)
{
    char from[4096], to[4096];
    snprintf (from, sizeof from, "%s/keys/%s.cert", s_farm.dir, name);
    snprintf (to, sizeof to, "%s/%s/%s.cert", s_farm.dir, dir, name);
    tu_copy (from, to);
}

// The keys of a farm: the broker's pair in certs/, the clients' pairs in
// keys/; agent (clients/agents/) may work, watcher (clients/watchers/) may
// feed files, reader (clients/) may only read, operator (clients/operators/)
// may change things, intruder is known to nobody.
static void
s_make_keys (void)
{
    s_keygen ("broker", "certs");
    mkdir (tu_path (s_farm.dir, "certs/clients"), 0755);
    mkdir (tu_path (s_farm.dir, "certs/clients/operators"), 0755);
    mkdir (tu_path (s_farm.dir, "certs/clients/agents"), 0755);
    mkdir (tu_path (s_farm.dir, "certs/clients/watchers"), 0755);
    static const char *const names[] = {"agent",    "watcher",  "reader",
                                        "operator", "intruder", "other"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        s_keygen (names[i], "keys");
    s_authorise ("agent", "certs/clients/agents");
    s_authorise ("watcher", "certs/clients/watchers");
    s_authorise ("reader", "certs/clients");
    s_authorise ("operator", "certs/clients/operators");
}

// Writes <role>.conf: the farm's configuration with curve on, 'key' as
// this program's certificate and 'broker' as the broker's (NULL: the
// default, certs/broker.cert); s_farm.conf names it afterwards.
static void
s_conf (const char *role, const char *key, const char *broker)
{
    char extra[1024], conf[4096];
    snprintf (extra, sizeof extra,
              "security\n"
              "    curve = on\n"
              "    client_cert = ./keys/%s.cert\n"
              "%s%s%s",
              key, broker ? "    broker_cert = ./keys/" : "", broker ? broker : "",
              broker ? ".cert\n" : "");
    tu_farm_conf (&s_farm, "piv", 1, "32,16", extra);
    snprintf (conf, sizeof conf, "%s/%s.conf", s_farm.dir, role);
    ck_assert (rename (s_farm.conf, conf) == 0);
    snprintf (s_farm.conf, sizeof s_farm.conf, "%s", conf);
}

// Uses <role>.conf for the programs started from now on.
static void
s_use (const char *role)
{
    snprintf (s_farm.conf, sizeof s_farm.conf, "%s/%s.conf", s_farm.dir, role);
}

// 'pivctl -c conf --timeout 2000 args...' as the user whose HOME is 'home'
// (NULL: the farm's directory): its exit status, its output in out.
static int
s_pivctl_v (char *out, size_t len, const char *conf, const char *home, va_list ap)
{
    char *argv[32] = {(char *)tu_bin ("pivctl"), "-c", (char *)conf, "--timeout", "2000"};
    int n = 5;
    for (const char *word; n < 31 && (word = va_arg (ap, const char *));)
        argv[n++] = (char *)word;
    argv[n] = NULL;
    setenv ("HOME", home ? home : s_farm.dir, 1);
    int rc = tu_run (argv, out, len, 60);
    setenv ("HOME", s_farm.dir, 1);
    return rc;
}

// Runs 'pivctl -c <role>.conf --timeout 2000 args...' (NULL-terminated):
// its exit status, its output in out.
static int
s_pivctl (char *out, size_t len, const char *role, ...)
{
    char conf[4096];
    snprintf (conf, sizeof conf, "%s/%s.conf", s_farm.dir, role);
    va_list ap;
    va_start (ap, role);
    int rc = s_pivctl_v (out, len, conf, NULL, ap);
    va_end (ap);
    return rc;
}

// The number of agents 'pivctl agents --json' lists, asked with the reader's key.
static int
s_agents (void)
{
    char out[65536], err[256];
    int rc = s_pivctl (out, sizeof out, "reader", "agents", "--json", NULL);
    ck_assert_msg (rc == 0, "pivctl agents: exit %d: %s", rc, out);
    jdoc_t *doc = jdoc_parse (out, err, sizeof err);
    ck_assert_msg (doc != NULL, "pivctl agents: not JSON (%s): %s", err, out);
    int n = jdoc_length (doc, "$.agents");
    jdoc_destroy (&doc);
    return n;
}

// The counts of exp1 once the count at 'member' (offsetof in tu_counts_t)
// reaches n, or after timeout_s.
static tu_counts_t
s_wait_count (size_t member, int64_t n, int timeout_s)
{
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < timeout_s * 10 && *(int64_t *)((char *)&c + member) < n; i++) {
        usleep (100000);
        c = tu_farm_counts (&s_farm);
    }
    return c;
}

// The broker, the watcher and agent 'a1' with s_farm.conf.
static void
s_start_farm (void)
{
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent.log", "--id", "a1");
}

// The broker and the watcher with their keys, the watcher ready.
static void
s_start_secure_farm (void)
{
    s_make_keys ();
    s_conf ("broker", "reader", NULL); // the broker uses no client key
    s_conf ("watcher", "watcher", NULL);
    s_conf ("agent", "agent", NULL);
    s_conf ("intruder", "intruder", NULL);
    s_conf ("reader", "reader", NULL);
    s_conf ("operator", "operator", NULL);
    s_conf ("lost", "reader", "other");
    s_use ("broker");
    tu_farm_start_broker (&s_farm);
    s_use ("watcher");
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
}

START_TEST (with_curve_the_farm_processes_pairs_and_an_unknown_agent_gets_nothing)
{
    s_start_secure_farm ();
    s_use ("intruder");
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "intruder.log", "--id", "intruder");
    tu_farm_render (&s_farm, 3, "run");
    tu_farm_land (&s_farm, "run", 1, 3, 0);
    // The watcher's events are committed: the pairs wait, no agent has them.
    tu_counts_t c = s_wait_count (offsetof (tu_counts_t, pending), 3, 10);
    ck_assert_int_eq (c.pending, 3);
    usleep (1000000); // a few heartbeats of the intruder, which the broker never hears
    c = tu_farm_counts (&s_farm);
    ck_assert_int_eq (c.dispatched, 0);
    ck_assert_int_eq (c.done, 0);
    ck_assert_int_eq (s_agents (), 0);
    ck_assert (tu_alive (s_farm.agents[1]));

    s_use ("agent");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent.log", "--id", "a1");
    c = tu_farm_wait_done (&s_farm, 3, 60);
    ck_assert_int_eq (c.done, 3);
    ck_assert_int_eq (s_agents (), 1);
    ck_assert_msg (access (tu_path (s_farm.dir, "results/exp1/run_0003.txt"), F_OK) == 0,
                   "no result file");
    // The intruder says why it hears nothing.
    char *log = NULL;
    for (int i = 0; i < 50 && !(log && strstr (log, "CURVE is on")); i++) {
        free (log);
        usleep (100000);
        log = tu_slurp (tu_path (s_farm.dir, "intruder.log"), NULL);
    }
    ck_assert_msg (log && strstr (log, "is silent") && strstr (log, "CURVE is on"),
                   "the intruder's log: %s", log ? log : "");
    free (log);
}
END_TEST

START_TEST (a_reader_key_reads_but_only_an_operator_key_changes_things)
{
    s_start_secure_farm ();
    char out[65536];
    int rc = s_pivctl (out, sizeof out, "reader", "status", NULL);
    ck_assert_msg (rc == 0, "status: exit %d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "reader", "feedback", "show", NULL);
    ck_assert_msg (rc == 0, "feedback show: exit %d: %s", rc, out);

    rc = s_pivctl (out, sizeof out, "reader", "rate", "5", NULL);
    ck_assert_msg (rc == 1, "rate 5 as a reader: exit %d: %s", rc, out);
    ck_assert_str_eq (out, "pivctl: refused: 'rate' changes the farm and your key is not an "
                           "operator's\n");
    rc = s_pivctl (out, sizeof out, "reader", "feedback", "on", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "refused: 'feedback'"), "feedback on: %d: %s", rc, out);
    // The store's lifecycle (doc/storage.md): an operator's; 'backup status' reads.
    const char *copy = tu_file (s_farm.dir, "copy.db");
    rc = s_pivctl (out, sizeof out, "reader", "backup", copy, NULL);
    ck_assert_msg (rc == 1 && strstr (out, "refused: 'backup'") && access (copy, F_OK) != 0,
                   "backup: %d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "reader", "purge", "exp1", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "refused: 'purge'"), "purge: %d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "reader", "vacuum", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "refused: 'vacuum'"), "vacuum: %d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "reader", "forget-agents", "--older-than", "7d", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "refused: 'forget-agents'"), "forget: %d: %s", rc, out);
    rc = s_pivctl (out, sizeof out, "reader", "backup", "status", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "no backup since the broker started"), "%d: %s", rc, out);

    rc = s_pivctl (out, sizeof out, "operator", "--json", "rate", "5", NULL);
    ck_assert_msg (rc == 0, "rate 5 as an operator: exit %d: %s", rc, out);
    ck_assert_msg (strstr (out, "\"rate_limit\":5"), "rate 5: %s", out);
    rc = s_pivctl (out, sizeof out, "reader", "--json", "status", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "\"rate_limit\":5"), "status after rate 5: %s", out);
}
END_TEST

// Sends 'msg' on a new DEALER to the broker's 'socket' with the key pair
// keys/<key>.cert (CURVE), then waits a little for an answer: 1 if one came.
static int
s_send_as (const char *key, const char *socket, const proto_msg_t *msg, int wait_ms)
{
    char cert[4096], err[512];
    snprintf (cert, sizeof cert, "%s/keys/%s.cert", s_farm.dir, key);
    zcert_t *mine = zcert_load (cert);
    snprintf (cert, sizeof cert, "%s/certs/broker.cert", s_farm.dir);
    zcert_t *broker = zcert_load (cert);
    ck_assert (mine && broker);
    zsock_t *s = zsock_new (ZMQ_DEALER);
    zcert_apply (mine, s);
    zsock_set_curve_serverkey (s, zcert_public_txt (broker));
    zsock_set_linger (s, 2000);
    zsock_set_rcvtimeo (s, wait_ms);
    ck_assert (zsock_connect (s, "ipc://%s/%s", s_farm.dir, socket) == 0);
    ck_assert (proto_send (msg, NULL, s) == 0);
    proto_msg_t reply;
    int got = proto_recv (s, NULL, &reply, err, sizeof err) == 0;
    proto_msg_release (&reply);
    zsock_destroy (&s);
    zcert_destroy (&mine);
    zcert_destroy (&broker);
    return got;
}

START_TEST (each_key_may_use_only_the_socket_of_its_role)
{
    s_start_secure_farm ();
    // The reader's key (directly in clients/) delivers no FILE ...
    proto_msg_t file = {.command = PROTO_FILE, .seq = 1, .experiment = "exp1",
                        .name = "forged_0001_a.tif", .size = 10, .time_ns = 1};
    ck_assert_int_eq (s_send_as ("reader", "ingest", &file, 1000), 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "is not a watcher's (clients/watchers/)",
                                5000));
    // ... and no RESULT, nor does it say HELLO as an agent.
    proto_msg_t hello = {.command = PROTO_HELLO, .name = "forger", .text = "h", .count = 1};
    s_send_as ("reader", "work", &hello, 500);
    proto_msg_t result = {.command = PROTO_RESULT, .pair = 1, .attempt = 1, .output = "x"};
    ck_assert_int_eq (s_send_as ("reader", "work", &result, 1000), 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "not an agent's key (clients/agents/)",
                                5000));
    // The watcher's key takes no work; the agent's feeds no files.
    ck_assert_int_eq (s_send_as ("watcher", "work", &hello, 1000), 0);
    file.name = "forged_0002_a.tif";
    ck_assert_int_eq (s_send_as ("agent", "ingest", &file, 1000), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files"), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM agents"), 0);
    // The agent's key changes no settings.
    s_conf ("agentctl", "agent", NULL);
    char out[65536];
    int rc = s_pivctl (out, sizeof out, "agentctl", "rate", "5", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "refused: 'rate'"), "rate as an agent: %d: %s", rc,
                   out);
    // The right keys still work.
    s_use ("agent");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent.log", "--id", "a1");
    tu_farm_render (&s_farm, 1, "run");
    tu_farm_land (&s_farm, "run", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
}
END_TEST

START_TEST (a_revoked_key_is_refused_on_its_open_connection)
{
    s_start_secure_farm ();
    s_use ("agent");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent.log", "--id", "a1");
    tu_farm_render (&s_farm, 2, "run");
    tu_farm_land (&s_farm, "run", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    // Its certificate removed: the agent's connection stays open (ZeroMQ
    // cannot close one peer of a ROUTER), but nothing it sends is taken
    // and it gets no more work.
    ck_assert (unlink (tu_path (s_farm.dir, "certs/clients/agents/agent.cert")) == 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "has a key no longer admitted", 10000));
    tu_farm_land (&s_farm, "run", 2, 2, 0);
    tu_counts_t c = s_wait_count (offsetof (tu_counts_t, pending), 1, 10);
    ck_assert_int_eq (c.pending, 1);
    usleep (1500000);  // heartbeats of the revoked agent, refused
    c = tu_farm_counts (&s_farm);
    ck_assert_int_eq (c.done, 1);
    ck_assert_int_eq (c.dispatched, 0);
    ck_assert (tu_alive (s_farm.agents[0]));
    // Back in its directory, the key works again (the agent reconnects).
    s_authorise ("agent", "certs/clients/agents");
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 2, 60).done, 2);
}
END_TEST

// The Z85 public key of keys/<name>.cert, in key (41 bytes).
static void
s_public_key (const char *name, char *key)
{
    char path[4096];
    snprintf (path, sizeof path, "%s/keys/%s.cert", s_farm.dir, name);
    zcert_t *cert = zcert_load (path);
    ck_assert_msg (cert != NULL, "cannot read '%s'", path);
    snprintf (key, 41, "%s", zcert_public_txt (cert));
    zcert_destroy (&cert);
}

// Lines of <dir>/<log> holding 'text'.
static int
s_log_lines (const char *log, const char *text)
{
    char *all = tu_slurp (tu_path (s_farm.dir, log), NULL);
    int n = 0;
    for (char *line = all ? strtok (all, "\n") : NULL; line; line = strtok (NULL, "\n"))
        n += strstr (line, text) != NULL;
    free (all);
    return n;
}

START_TEST (a_revoked_agent_key_that_keeps_trying_is_logged_once_and_the_farm_goes_on)
{
    s_start_secure_farm ();
    // A second agent key, 'other', whose agent heartbeats on its open
    // connection for 10 s before it gives up on the broker.
    s_authorise ("other", "certs/clients/agents");
    s_conf ("revoked", "other", NULL);
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 50\n");
    s_farm.agents[1] = tu_farm_start (&s_farm, "pivfarm-agent", "revoked.log", "--id", "a2");
    s_use ("agent");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "agent 'a2' on", 10000));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "agent 'a1' on", 10000));
    char key[41];
    s_public_key ("other", key);
    ck_assert (unlink (tu_path (s_farm.dir, "certs/clients/agents/other.cert")) == 0);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "has a key no longer admitted", 10000));
    // Pairs meanwhile: the good agent does them all.
    tu_farm_render (&s_farm, 3, "run");
    tu_farm_land (&s_farm, "run", 1, 3, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 3, 60).done, 3);
    usleep (4000000);  // 20 heartbeats of the revoked agent, each refused
    ck_assert (tu_alive (s_farm.agents[1]));
    ck_assert (tu_alive (s_farm.broker));
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results WHERE agent = 'a1'"), 3);
    // Once, naming the key and what to do; a summary at most once a minute.
    int lines = s_log_lines ("broker.log", key);
    ck_assert_msg (lines == 1, "%d lines name key %s", lines, key);
    char said[512];
    snprintf (said, sizeof said, "from key %s refused: not an agent's key (clients/agents/)",
              key);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", said, 0));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "put its certificate there if it should work, else stop the "
                                "agent that uses it",
                                0));
}
END_TEST

// Runs fn with the log (stderr) going to a file; returns what it wrote
// (the caller frees it).
static char *
s_logged (void (*fn) (peers_t *), peers_t *peers)
{
    const char *path = tu_path (s_farm.dir, "captured.log");
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644), saved = dup (2);
    ck_assert (fd >= 0 && saved >= 0);
    dup2 (fd, 2);
    fn (peers);
    dup2 (saved, 2);
    close (saved);
    close (fd);
    char *text = tu_slurp (path, NULL);
    ck_assert (text != NULL);
    return text;
}

#define S_T0 (1000 * 1000000000LL)
#define S_SECOND 1000000000LL

// A message of 'key' refused on work, 'seconds' after S_T0.
static void
s_refuse (peers_t *peers, const char *key, double seconds)
{
    peers_refused_key (peers, "work", key, S_T0 + (int64_t) (seconds * S_SECOND),
                       "work: from key %s refused", key);
}

static void
s_first_minute (peers_t *peers)
{
    for (int i = 0; i <= 240; i++)
        s_refuse (peers, "KEY1", i / 4.0);
    peers_tick (peers, S_T0 + 59 * S_SECOND);
}

static void
s_minute_over (peers_t *peers)
{
    peers_tick (peers, S_T0 + 60 * S_SECOND);
    peers_tick (peers, S_T0 + 61 * S_SECOND);  // nothing new
    // The same key on another socket, and another key, are their own.
    peers_refused_key (peers, "ingest", "KEY1", S_T0 + 61 * S_SECOND,
                       "ingest: from key %s refused", "KEY1");
    s_refuse (peers, "KEY2", 62);
    s_refuse (peers, "KEY1", 70);
    peers_tick (peers, S_T0 + 100 * S_SECOND);  // KEY1's next line is due at 120 s
}

static void
s_later (peers_t *peers)
{
    peers_tick (peers, S_T0 + 120 * S_SECOND);
    // Quiet for ten minutes: forgotten, and said in full when it is back.
    peers_tick (peers, S_T0 + 731 * S_SECOND);
    s_refuse (peers, "KEY1", 732);
}

START_TEST (a_refused_key_is_logged_once_then_summed_up_at_most_once_a_minute)
{
    peers_t *peers = peers_new ();
    ck_assert (peers != NULL);
    char *text = s_logged (s_first_minute, peers);
    ck_assert_msg (strstr (text, "work: from key KEY1 refused\n") && !strstr (text, "more"), "%s",
                   text);
    ck_assert_msg (strchr (text, '\n') == text + strlen (text) - 1, "%s", text);
    free (text);
    text = s_logged (s_minute_over, peers);
    ck_assert_msg (strstr (text, "work: key KEY1: 240 more message(s) refused in the last 60 s\n")
                       && strstr (text, "ingest: from key KEY1 refused\n")
                       && strstr (text, "work: from key KEY2 refused\n"),
                   "%s", text);
    ck_assert_msg (!strstr (strstr (text, "KEY2"), "KEY1"), "%s", text);
    free (text);
    text = s_logged (s_later, peers);
    ck_assert_msg (strstr (text, "work: key KEY1: 1 more message(s) refused in the last 60 s\n")
                       && strstr (text, "work: from key KEY1 refused\n")
                       && !strstr (text, "KEY2"),
                   "%s", text);
    free (text);
    peers_destroy (&peers);
}
END_TEST

START_TEST (a_client_with_the_wrong_broker_key_times_out_saying_why)
{
    s_start_secure_farm ();
    char out[4096];
    int rc = s_pivctl (out, sizeof out, "lost", "status", NULL);
    ck_assert_msg (rc == 1, "exit %d: %s", rc, out);
    ck_assert_msg (strstr (out, "did not answer within 2000 ms") &&
                       strstr (out, "CURVE is on: is security/broker_cert the broker's public "
                                    "certificate"),
                   "%s", out);
    // The key nobody authorised is not let in either.
    rc = s_pivctl (out, sizeof out, "intruder", "status", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "did not answer"), "exit %d: %s", rc, out);
}
END_TEST

START_TEST (a_missing_certificate_is_named_at_start)
{
    s_make_keys ();
    char out[4096];
    // pivctl: its own key is missing.
    s_conf ("nokey", "nobody", NULL);
    int rc = s_pivctl (out, sizeof out, "nokey", "status", NULL);
    ck_assert_msg (rc == 2, "exit %d: %s", rc, out);
    ck_assert_msg (strstr (out, "keys/nobody.cert_secret' (security/client_cert)")
                       && strstr (out, "(an operator's own: --cert FILE, $PIVFARM_CERT or "
                                       "~/.config/pivfarm/client.cert)"),
                   "%s", out);
    // The broker: its secret certificate is missing.
    ck_assert (remove (tu_path (s_farm.dir, "certs/broker.cert_secret")) == 0);
    s_conf ("broker", "reader", NULL);
    char *argv[] = {(char *)tu_bin ("pivfarm-broker"), "-c", s_farm.conf, NULL};
    rc = tu_run (argv, out, sizeof out, 30);
    ck_assert_msg (rc != 0, "the broker started: %s", out);
    ck_assert_msg (strstr (out, "certs/broker.cert_secret' (security/broker_cert)"), "%s", out);
}
END_TEST

START_TEST (keygen_writes_a_public_and_a_private_file_and_overwrites_nothing)
{
    s_keygen ("n1", "keys");
    struct stat st;
    ck_assert (stat (tu_path (s_farm.dir, "keys/n1.cert"), &st) == 0);
    ck_assert_int_eq (st.st_mode & 0777, 0644);
    ck_assert (stat (tu_path (s_farm.dir, "keys/n1.cert_secret"), &st) == 0);
    ck_assert_int_eq (st.st_mode & 0777, 0600);
    char *pub = tu_slurp (tu_path (s_farm.dir, "keys/n1.cert"), NULL);
    ck_assert (pub && strstr (pub, "public-key") && !strstr (pub, "secret-key"));
    free (pub);
    char out[4096], dir[4096];
    snprintf (dir, sizeof dir, "%s/keys", s_farm.dir);
    char *argv[] = {(char *)tu_bin ("pivctl"), "keygen", "n1", "-o", dir, NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 1);
    ck_assert_msg (strstr (out, "n1.cert': it exists (a regular file); nothing written"), "%s",
                   out);
    char *bad[] = {(char *)tu_bin ("pivctl"), "keygen", "../x", "-o", dir, NULL};
    ck_assert_int_eq (tu_run (bad, out, sizeof out, 30), 2);
}
END_TEST

// keygen prints where the pair goes for the role asked (or named), and
// only that: the broker's pair is not told to be a client's.
START_TEST (keygen_says_where_the_pair_goes_for_its_role_alone)
{
    char out[4096], dir[4096];
    snprintf (dir, sizeof dir, "%s/keys", s_farm.dir);
    char *page[] = {(char *)tu_bin ("pivctl"), "keygen", "www", "--role", "page", "-o", dir, NULL};
    ck_assert_int_eq (tu_run (page, out, sizeof out, 30), 0);
    ck_assert_msg (strstr (out, "security/page_cert = ") && strstr (out, "web server's user")
                       && !strstr (out, "broker_cert") && !strstr (out, "client_cert"),
                   "%s", out);
    char *broker[] = {(char *)tu_bin ("pivctl"), "keygen", "broker", "-o", dir, NULL};
    ck_assert_int_eq (tu_run (broker, out, sizeof out, 30), 0);
    ck_assert_msg (strstr (out, "security/broker_cert = ") && !strstr (out, "client_cert")
                       && !strstr (out, "clients"),
                   "%s", out);
    char *bad[] = {(char *)tu_bin ("pivctl"), "keygen", "k", "--role", "boss", "-o", dir, NULL};
    ck_assert_int_eq (tu_run (bad, out, sizeof out, 30), 2);
    ck_assert_msg (strstr (out, "bad --role 'boss'"), "%s", out);
    ck_assert (access (tu_path (s_farm.dir, "keys/k.cert"), F_OK) != 0);
}
END_TEST

// tests/badinput/README.md, "Files pivctl writes": a link planted at either
// file of the pair (to a victim outside, or to a name not there yet) is
// refused, the victim unchanged (nothing made where the link points),
// neither file written, no temporary left; a file there alike; --force
// replaces the link itself, never the victim.
START_TEST (keygen_never_writes_through_a_link_nor_over_a_file)
{
    static const char victim_bytes[] = "the victim's own bytes\n";
    char victim[4096], dir[4096], out[4096];
    snprintf (victim, sizeof victim, "%s/victim", s_farm.dir);
    snprintf (dir, sizeof dir, "%s/keys", s_farm.dir);
    ck_assert_int_eq (mkdir (dir, 0755), 0);
    char *argv[] = {(char *)tu_bin ("pivctl"), "keygen", "n1", "-o", dir, NULL, NULL};
    static const char *const names[] = {"n1.cert", "n1.cert_secret"};
    for (int i = 0; i < 2; i++) {
        char planted[4200];
        snprintf (planted, sizeof planted, "%s/%s", dir, names[i]);
        tu_spit (victim, victim_bytes, strlen (victim_bytes));
        ck_assert_int_eq (symlink (victim, planted), 0);
        argv[5] = NULL;
        ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 1);
        ck_assert_msg (strstr (out, planted) && strstr (out, "it exists (a symbolic link)")
                           && strstr (out, "nothing written") && strstr (out, "--force"),
                       "%s", out);
        char *bytes = tu_slurp (victim, NULL);
        ck_assert_msg (bytes && strcmp (bytes, victim_bytes) == 0, "the victim changed: %s",
                       bytes ? bytes : "(gone)");
        free (bytes);
        ck_assert_int_eq (tu_entries (dir), 1);

        // A link to a file not there yet would make it wherever it points.
        char nowhere[4200];
        snprintf (nowhere, sizeof nowhere, "%s/made-through-a-link", s_farm.dir);
        ck_assert_int_eq (unlink (planted), 0);
        ck_assert_int_eq (symlink (nowhere, planted), 0);
        ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 1);
        ck_assert_msg (strstr (out, "it exists (a symbolic link)"), "%s", out);
        ck_assert_msg (access (nowhere, F_OK) != 0, "'%s' was made through the link", nowhere);
        ck_assert_int_eq (tu_entries (dir), 1);

        ck_assert_int_eq (unlink (planted), 0);
        tu_spit (planted, "mine\n", 5);
        ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 1);
        ck_assert_msg (strstr (out, "it exists (a regular file)"), "%s", out);
        bytes = tu_slurp (planted, NULL);
        ck_assert_msg (bytes && strcmp (bytes, "mine\n") == 0, "%s", bytes ? bytes : "(gone)");
        free (bytes);
        ck_assert_int_eq (tu_entries (dir), 1);

        ck_assert_int_eq (unlink (planted), 0);
        ck_assert_int_eq (symlink (victim, planted), 0);
        argv[5] = "--force";
        ck_assert_msg (tu_run (argv, out, sizeof out, 30) == 0, "%s", out);
        bytes = tu_slurp (victim, NULL);
        ck_assert_msg (bytes && strcmp (bytes, victim_bytes) == 0, "the victim changed: %s",
                       bytes ? bytes : "(gone)");
        free (bytes);
        struct stat st;
        char path[4200];
        for (int k = 0; k < 2; k++) {
            snprintf (path, sizeof path, "%s/%s", dir, names[k]);
            ck_assert_msg (lstat (path, &st) == 0 && S_ISREG (st.st_mode), "'%s'", path);
            ck_assert_int_eq (st.st_mode & 0777, k ? 0600 : 0644);
            bytes = tu_slurp (path, NULL);
            ck_assert_msg (bytes && strstr (bytes, "public-key")
                               && !strstr (bytes, "secret-key") == !k,
                           "%s: %s", path, bytes ? bytes : "(none)");
            free (bytes);
            ck_assert_int_eq (unlink (path), 0);
        }
        ck_assert_int_eq (tu_entries (dir), 0);
    }
}
END_TEST

START_TEST (with_curve_off_no_key_is_needed_and_anyone_may_change_things)
{
    s_start_farm ();
    tu_farm_render (&s_farm, 2, "run");
    tu_farm_land (&s_farm, "run", 1, 2, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 2, 60);
    ck_assert_int_eq (c.done, 2);
    char out[4096];
    char *argv[] = {(char *)tu_bin ("pivctl"), "-c", s_farm.conf, "rate", "5", NULL};
    int rc = tu_run (argv, out, sizeof out, 30);
    ck_assert_msg (rc == 0, "rate 5: exit %d: %s", rc, out);
}
END_TEST

// ---------------------------------------------------------------------------
// Limits

START_TEST (a_watcher_at_max_pending_keeps_the_files_beyond_and_sends_them_later)
{
    tu_farm_conf (&s_farm, "noop", 1, "32,16", "watcher\n    max_pending = 2\n");
    // No broker yet: two events go out and wait for their ACK, the other
    // files wait in the watcher.
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_render (&s_farm, 5, "run");
    tu_farm_land (&s_farm, "run", 1, 5, 0);
    char *log = NULL;
    for (int i = 0; i < 100 && !(log && strstr (log, "wait until the broker catches up")); i++) {
        free (log);
        usleep (50000);
        log = tu_slurp (tu_path (s_farm.dir, "watcher.log"), NULL);
    }
    ck_assert_msg (log && strstr (log, "2 events unacknowledged (watcher/max_pending)"),
                   "the watcher's log: %s", log ? log : "");
    free (log);
    tu_farm_start_broker (&s_farm);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent.log", "--id", "a1");
    tu_counts_t c = tu_farm_wait_done (&s_farm, 5, 60);
    ck_assert_int_eq (c.files, 10);
    ck_assert_int_eq (c.done, 5);
}
END_TEST

START_TEST (an_image_over_max_pixels_fails_its_pair_naming_the_file_and_its_size)
{
    tu_farm_conf (&s_farm, "piv", 1, "32,16", "piv\n    max_pixels = 65535\n");
    s_start_farm ();
    tu_farm_render (&s_farm, 1, "big"); // 256 x 256 = 65536 pixels
    tu_farm_land (&s_farm, "big", 1, 1, 0);
    tu_counts_t c = s_wait_count (offsetof (tu_counts_t, failed), 1, 30);
    ck_assert_int_eq (c.failed, 1);
    char out[65536];
    char *argv[] = {(char *)tu_bin ("pivctl"), "-c", s_farm.conf, "pairs", "exp1", NULL};
    ck_assert_int_eq (tu_run (argv, out, sizeof out, 30), 0);
    ck_assert_msg (strstr (out, "big_0001_a.tif") && strstr (out, "256x256") &&
                       strstr (out, "65535"),
                   "%s", out);
}
END_TEST


// Copies the key pair keys/<name>.cert (and _secret) to 'dir' as <as>.cert.
static void
s_copy_pair (const char *name, const char *dir, const char *as)
{
    for (int secret = 0; secret < 2; secret++) {
        char from[8192], to[8192];
        snprintf (from, sizeof from, "%s/keys/%s.cert%s", s_farm.dir, name, secret ? "_secret" : "");
        snprintf (to, sizeof to, "%s/%s.cert%s", dir, as, secret ? "_secret" : "");
        tu_copy (from, to);
    }
}

// Runs 'pivctl -c pivfarm.conf --timeout 2000 args...' (NULL-terminated) as
// the operator whose HOME is 'home' (NULL: the farm's directory): its exit
// status, its output in out.
static int
s_pivctl_as (char *out, size_t len, const char *home, ...)
{
    va_list ap;
    va_start (ap, home);
    int rc = s_pivctl_v (out, len, s_farm.conf, home, ap);
    va_end (ap);
    return rc;
}

// The status page's JSON, run as the web server runs it, by a user who is
// not root (root reads every file): 'nobody' (uid 65534) when the test runs
// as root, else the test's own user; PIVFARM_CONF the farm's file.
static jdoc_t *
s_page_json (char *out, size_t len)
{
    setenv ("PIVFARM_CONF", s_farm.conf, 1);
    setenv ("REQUEST_METHOD", "GET", 1);
    setenv ("QUERY_STRING", "format=json", 1);
    char *as_nobody[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                         (char *)tu_bin ("pivfarm.cgi"), NULL};
    char *as_self[] = {(char *)tu_bin ("pivfarm.cgi"), NULL};
    int rc = tu_run (geteuid () == 0 ? as_nobody : as_self, out, len, 30);
    unsetenv ("QUERY_STRING");
    unsetenv ("REQUEST_METHOD");
    ck_assert_msg (rc == 0, "pivfarm.cgi: exit %d: %.500s", rc, out);
    const char *body = strstr (out, "\r\n\r\n");
    ck_assert_msg (body != NULL, "no end of headers: %.500s", out);
    char why[256];
    jdoc_t *doc = jdoc_parse (body + 4, why, sizeof why);
    ck_assert_msg (doc != NULL, "the page's JSON (%s): %.500s", why, body + 4);
    return doc;
}

// The broker's host as doc/security.md lays it out: one configuration
// file for the watcher, the agents, the status page and every operator,
// each program with its key by role, each operator with their own; the
// shared client_cert is a key the broker does not know (whoever falls
// back to it is not let in).
START_TEST (one_configuration_serves_each_program_and_operator_with_its_own_key)
{
    s_make_keys ();
    s_keygen ("page", "keys");
    s_authorise ("page", "certs/clients");
    tu_farm_conf (&s_farm, "piv", 1, "32,16",
                  "security\n"
                  "    curve = on\n"
                  "    client_cert = ./keys/intruder.cert\n"
                  "    watcher_cert = ./keys/watcher.cert\n"
                  "    agent_cert = ./keys/agent.cert\n"
                  "    page_cert = ./keys/page.cert\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent.log", "--id", "a1");
    // The watcher's FILE events are accepted, the agent's results too.
    tu_farm_render (&s_farm, 2, "run");
    tu_farm_land (&s_farm, "run", 1, 2, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 2, 60);
    ck_assert_int_eq (c.done, 2);

    // Alice's own key, in ~/.config/pivfarm/, is an operator's.
    char alice[4096], out[65536];
    snprintf (alice, sizeof alice, "%s/alice/.config/pivfarm", s_farm.dir);
    ck_assert (mkdir (tu_path (s_farm.dir, "alice"), 0755) == 0);
    ck_assert (mkdir (tu_path (s_farm.dir, "alice/.config"), 0755) == 0);
    ck_assert (mkdir (alice, 0755) == 0);
    s_copy_pair ("operator", alice, "client");
    int rc = s_pivctl_as (out, sizeof out, tu_path (s_farm.dir, "alice"), "pause", NULL);
    ck_assert_msg (rc == 0, "alice's pause: exit %d: %s", rc, out);
    // Bob's, in $PIVFARM_CERT, is a reader's: he reads, and may not pause.
    setenv ("PIVFARM_CERT", tu_path (s_farm.dir, "keys/reader.cert"), 1);
    rc = s_pivctl_as (out, sizeof out, NULL, "status", NULL);
    ck_assert_msg (rc == 0, "bob's status: exit %d: %s", rc, out);
    rc = s_pivctl_as (out, sizeof out, NULL, "pause", NULL);
    ck_assert_msg (rc == 1, "bob's pause: exit %d: %s", rc, out);
    ck_assert_str_eq (out, "pivctl: refused: 'pause' changes the farm and your key is not an "
                           "operator's\n");
    // --cert comes before $PIVFARM_CERT, $PIVFARM_CERT before ~/.config.
    char cert[4096];
    snprintf (cert, sizeof cert, "%s/keys/operator.cert", s_farm.dir);
    rc = s_pivctl_as (out, sizeof out, NULL, "--cert", cert, "resume", NULL);
    ck_assert_msg (rc == 0, "bob's resume with --cert: exit %d: %s", rc, out);
    rc = s_pivctl_as (out, sizeof out, tu_path (s_farm.dir, "alice"), "pause", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "refused"), "$PIVFARM_CERT first: %d: %s", rc, out);
    unsetenv ("PIVFARM_CERT");
    // $XDG_CONFIG_HOME, when set, is where pivfarm/client.cert is looked for.
    setenv ("XDG_CONFIG_HOME", tu_path (s_farm.dir, "alice/.config"), 1);
    rc = s_pivctl_as (out, sizeof out, NULL, "resume", NULL);
    ck_assert_msg (rc == 0, "resume with $XDG_CONFIG_HOME: exit %d: %s", rc, out);
    unsetenv ("XDG_CONFIG_HOME");
    // Without a key of their own, pivctl falls back to client_cert, and
    // says which key it took.
    rc = s_pivctl_as (out, sizeof out, NULL, "status", NULL);
    ck_assert_msg (rc == 1 && strstr (out, "keys/intruder.cert' (security/client_cert)"),
                   "no key of one's own: exit %d: %s", rc, out);

    // The page reads status with its own key, as the web server's user.
    chmod (s_farm.dir, 0755);
    // (and reach the control socket: an ipc:// file here, a TCP port there)
    static const char *const readable[] = {"pivfarm.conf", "farm.db", "farm.db-wal",
                                           "farm.db-shm", "keys/page.cert_secret", "control"};
    for (size_t i = 0; i < sizeof readable / sizeof readable[0]; i++)
        chmod (tu_path (s_farm.dir, readable[i]), 0666);
    jdoc_t *page = s_page_json (out, sizeof out);
    ck_assert_msg (jdoc_bool (page, 0, "$.broker.reachable") == 1, "the page: %.2000s", out);
    jdoc_destroy (&page);
    // A key it cannot read is named, with who must read it.
    // (root's own 0600 file, as another program's key would be; the test's
    // own user's file is made unreadable to it)
    chmod (tu_path (s_farm.dir, "keys/page.cert_secret"), geteuid () == 0 ? 0600 : 0);
    page = s_page_json (out, sizeof out);
    ck_assert_msg (jdoc_bool (page, 1, "$.broker.reachable") == 0, "the page: %.2000s", out);
    const char *error = jdoc_string (page, "$.broker.error");
    ck_assert_msg (error && strstr (error, "keys/page.cert_secret' (security/page_cert): Permission denied; "
                                  "the status page's key (security/page_cert) must be readable "
                                  "by the web server's user (this program runs as "),
                   "%s", error ? error : out);
    jdoc_destroy (&page);
}
END_TEST


// A watcher whose key the broker does not know hears nothing (CURVE's
// handshake fails without a word): it says so, with the key it uses, and
// keeps resending.
START_TEST (a_watcher_with_a_key_the_broker_does_not_know_says_the_broker_is_silent)
{
    s_make_keys ();
    s_conf ("broker", "reader", NULL);
    s_conf ("intruder", "intruder", NULL);
    s_use ("broker");
    tu_farm_start_broker (&s_farm);
    s_use ("intruder");
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_render (&s_farm, 1, "run");
    tu_farm_land (&s_farm, "run", 1, 1, 0);
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", "is silent: ",
                                    15000),
                   "no word of the silence in watcher.log");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log",
                                "keys/intruder.cert' (security/client_cert), in the broker's "
                                "clients directory?)",
                                1000));
    ck_assert (tu_alive (s_farm.watcher));
    tu_counts_t c = tu_farm_counts (&s_farm);
    ck_assert_int_le (c.files, 0);
}
END_TEST

// Four free TCP ports of loopback, in port[0..3].
static void
s_free_ports (int port[4])
{
    zsock_t *s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = zsock_new (ZMQ_ROUTER);
        port[i] = zsock_bind (s[i], "tcp://127.0.0.1:*");
        ck_assert (port[i] > 0);
    }
    for (int i = 0; i < 4; i++)
        zsock_destroy (&s[i]);
}

// The broker binding every interface (tcp://*:PORT, as doc/deploy.md's
// cluster does), its clients on its host: each connecting program needs
// an address to connect to, and says which key to set without one.
START_TEST (a_broker_bound_to_every_interface_is_reached_through_the_connect_keys)
{
    s_make_keys ();
    int port[4];
    s_free_ports (port);
    char conf[4096], connect[512], text[4096];
    snprintf (conf, sizeof conf,
              "broker\n"
              "    ingest = tcp://*:%d\n"
              "    work = tcp://*:%d\n"
              "    control = tcp://*:%d\n"
              "    publish = tcp://*:%d\n"
              "    store = ./farm.db\n"
              "watcher\n"
              "    root = ./data\n"
              "    resend_ms = 100\n"
              "%%s"
              "security\n"
              "    curve = on\n"
              "    client_cert = ./keys/operator.cert\n"
              "    watcher_cert = ./keys/watcher.cert\n",
              port[0], port[1], port[2], port[3]);
    snprintf (text, sizeof text, conf, "");
    tu_spit (s_farm.conf, text, strlen (text));
    tu_farm_start_broker (&s_farm);
    // Without a connect key: the watcher stops at start, pivctl refuses.
    char *watcher[] = {(char *)tu_bin ("pivfarm-watcher"), "-c", s_farm.conf, NULL};
    char out[8192], expected[512];
    int rc = tu_run (watcher, out, sizeof out, 30);
    snprintf (expected, sizeof expected,
              "broker/ingest is a bind address (tcp://*:%d), not one to connect to; set "
              "watcher/broker = tcp://HOST:%d",
              port[0], port[0]);
    ck_assert_msg (rc == 2 && strstr (out, expected), "the watcher: exit %d: %s", rc, out);
    rc = s_pivctl_as (out, sizeof out, NULL, "status", NULL);
    snprintf (expected, sizeof expected,
              "broker/control is a bind address (tcp://*:%d), not one to connect to; set "
              "client/control = tcp://HOST:%d",
              port[2], port[2]);
    ck_assert_msg (rc == 2 && strstr (out, expected), "pivctl: exit %d: %s", rc, out);
    // With them, the watcher's events are recorded and pivctl steers.
    snprintf (connect, sizeof connect,
              "    broker = tcp://127.0.0.1:%d\n"
              "client\n"
              "    control = tcp://127.0.0.1:%d\n",
              port[0], port[2]);
    snprintf (text, sizeof text, conf, connect);
    tu_spit (s_farm.conf, text, strlen (text));
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_render (&s_farm, 2, "run");
    tu_farm_land (&s_farm, "run", 1, 2, 0);
    tu_counts_t c = s_wait_count (offsetof (tu_counts_t, pending), 2, 10);
    ck_assert_int_eq (c.pending, 2);
    rc = s_pivctl_as (out, sizeof out, NULL, "pause", NULL);
    ck_assert_msg (rc == 0, "pivctl pause: exit %d: %s", rc, out);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("security");
    TCase *farm = tcase_create ("farm");
    tcase_set_timeout (farm, 180);
    tcase_add_checked_fixture (farm, s_setup, s_teardown);
    tcase_add_test (farm, with_curve_the_farm_processes_pairs_and_an_unknown_agent_gets_nothing);
    tcase_add_test (farm, a_reader_key_reads_but_only_an_operator_key_changes_things);
    tcase_add_test (farm, a_client_with_the_wrong_broker_key_times_out_saying_why);
    tcase_add_test (farm, a_missing_certificate_is_named_at_start);
    tcase_add_test (farm, keygen_writes_a_public_and_a_private_file_and_overwrites_nothing);
    tcase_add_test (farm, keygen_never_writes_through_a_link_nor_over_a_file);
    tcase_add_test (farm, keygen_says_where_the_pair_goes_for_its_role_alone);
    tcase_add_test (farm, with_curve_off_no_key_is_needed_and_anyone_may_change_things);
    tcase_add_test (farm, each_key_may_use_only_the_socket_of_its_role);
    tcase_add_test (farm, a_revoked_key_is_refused_on_its_open_connection);
    tcase_add_test (farm,
                    a_revoked_agent_key_that_keeps_trying_is_logged_once_and_the_farm_goes_on);
    tcase_add_test (farm, a_refused_key_is_logged_once_then_summed_up_at_most_once_a_minute);
    suite_add_tcase (suite, farm);
    TCase *identities = tcase_create ("identities");
    tcase_set_timeout (identities, 180);
    tcase_add_checked_fixture (identities, s_setup, s_teardown);
    tcase_add_test (identities, one_configuration_serves_each_program_and_operator_with_its_own_key);
    tcase_add_test (identities,
                    a_broker_bound_to_every_interface_is_reached_through_the_connect_keys);
    tcase_add_test (identities,
                    a_watcher_with_a_key_the_broker_does_not_know_says_the_broker_is_silent);
    suite_add_tcase (suite, identities);
    TCase *limits = tcase_create ("limits");
    tcase_set_timeout (limits, 180);
    tcase_add_checked_fixture (limits, s_setup, s_teardown);
    tcase_add_test (limits, a_watcher_at_max_pending_keeps_the_files_beyond_and_sends_them_later);
    tcase_add_test (limits, an_image_over_max_pixels_fails_its_pair_naming_the_file_and_its_size);
    suite_add_tcase (suite, limits);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
