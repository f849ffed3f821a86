// test_config.c — the configuration file: defaults, the example file, each
// section overridden, paths anchored at the file's directory, and every
// kind of refusal naming the key and the file.

#include "common/config.h"
#include "common/secure.h"
#include "common/util.h"
#include "piv/calib.h"
#include "piv/settings.h"
#include "tests/testutil.h"

#include <check.h>
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[PATH_MAX];        // this test's temporary directory
static char s_file[PATH_MAX + 16];  // its x.conf
static char s_err[1024];            // the last config_load message

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "%s", tu_tmpdir ());
    snprintf (s_file, sizeof s_file, "%s/x.conf", s_dir);
    s_err[0] = '\0';
}

static void
s_teardown (void)
{
    tu_rmtree (s_dir);
}

// Where the example file is: $PIVFARM_CONF_DIR, else conf/ of the current
// directory (tests run from the repository root).
static const char *
s_conf_dir (void)
{
    const char *dir = getenv ("PIVFARM_CONF_DIR");
    return dir && *dir ? dir : "conf";
}

// Writes text to x.conf and loads it.
static int
s_load (config_t *cfg, const char *text)
{
    tu_spit (s_file, text, strlen (text));
    return config_load (cfg, s_file, s_err, sizeof s_err);
}

// Loads text, which must load; fails the test with the message otherwise.
static void
s_loads (config_t *cfg, const char *text)
{
    ck_assert_msg (s_load (cfg, text) == 0, "refused: %s", s_err);
}

// Loads text, which must be refused with exactly the message expected,
// where %s stands for the file's path; and leave the defaults.
static void
s_refused (const char *text, const char *expected_fmt)
{
    config_t cfg, defaults;
    config_init (&defaults);
    ck_assert_msg (s_load (&cfg, text) == -1, "accepted: %s", text);
    char expected[2048];
    snprintf (expected, sizeof expected, expected_fmt, s_file);
    ck_assert_str_eq (s_err, expected);
    ck_assert_msg (memcmp (&cfg, &defaults, sizeof cfg) == 0,
                   "a refused file left values behind");
}

// Each of the n values of 'section/key' (quoted in the file) must be
// refused with "value 'V' of 'section/key' in '<file>' <why>".
static void
s_refused_values (const char *section, const char *key, const char *const *values, size_t n,
                  const char *why)
{
    for (size_t i = 0; i < n; i++) {
        char text[256], expected[1024];
        snprintf (text, sizeof text, "%s\n    %s = \"%s\"\n", section, key, values[i]);
        snprintf (expected, sizeof expected, "value '%s' of '%s/%s' in '%%s' %s", values[i],
                  section, key, why);
        s_refused (text, expected);
    }
}

// Asserts that path is <dir>/<name> once both are resolved: dir exists,
// name need not.
static void
s_assert_in_dir (const char *path, const char *dir, const char *name)
{
    ck_assert_msg (path[0] == '/', "'%s' is not absolute", path);
    size_t len = strlen (path), nlen = strlen (name);
    ck_assert_msg (len > nlen + 1 && strcmp (path + len - nlen, name) == 0
                       && path[len - nlen - 1] == '/',
                   "'%s' does not end in '/%s'", path, name);
    char parent[PATH_MAX];
    snprintf (parent, sizeof parent, "%.*s", (int) (len - nlen - 1), path);
    char real_parent[PATH_MAX], real_dir[PATH_MAX];
    ck_assert_msg (realpath (parent, real_parent) != NULL, "'%s': %s", parent, strerror (errno));
    ck_assert_msg (realpath (dir, real_dir) != NULL, "'%s': %s", dir, strerror (errno));
    ck_assert_str_eq (real_parent, real_dir);
}

// Asserts that path is <dir>/<rel>, dir made absolute; neither need exist
// but dir.
static void
s_assert_under (const char *path, const char *dir, const char *rel)
{
    char real_dir[PATH_MAX], expected[2 * PATH_MAX];
    ck_assert_msg (realpath (dir, real_dir) != NULL, "'%s': %s", dir, strerror (errno));
    snprintf (expected, sizeof expected, "%s/%s", real_dir, rel);
    ck_assert_str_eq (path, expected);
}

// Every field but the three paths.
static void
s_assert_same_but_paths (const config_t *a, const config_t *b)
{
    ck_assert_str_eq (a->broker.ingest, b->broker.ingest);
    ck_assert_str_eq (a->broker.work, b->broker.work);
    ck_assert_str_eq (a->broker.control, b->broker.control);
    ck_assert_str_eq (a->broker.publish, b->broker.publish);
    ck_assert_str_eq (a->broker.durability, b->broker.durability);
    ck_assert_int_eq (a->broker.commit_ms, b->broker.commit_ms);
    ck_assert_int_eq (a->broker.heartbeat_ms, b->broker.heartbeat_ms);
    ck_assert_int_eq (a->broker.liveness, b->broker.liveness);
    ck_assert_int_eq (a->broker.max_attempts, b->broker.max_attempts);
    ck_assert_str_eq (a->broker.store_fields, b->broker.store_fields);
    ck_assert_str_eq (a->watcher.mode, b->watcher.mode);
    ck_assert_int_eq (a->watcher.poll_ms, b->watcher.poll_ms);
    ck_assert_str_eq (a->watcher.ignore, b->watcher.ignore);
    ck_assert_int_eq (a->watcher.resend_ms, b->watcher.resend_ms);
    ck_assert_int_eq (a->watcher.max_pending, b->watcher.max_pending);
    ck_assert_str_eq (a->pairing.rule, b->pairing.rule);
    ck_assert_str_eq (a->pairing.a_suffix, b->pairing.a_suffix);
    ck_assert_str_eq (a->pairing.b_suffix, b->pairing.b_suffix);
    ck_assert_int_eq (a->pairing.ignore_case, b->pairing.ignore_case);
    ck_assert_str_eq (a->pairing.extensions, b->pairing.extensions);
    ck_assert_str_eq (a->agent.broker, b->agent.broker);
    ck_assert_int_eq (a->agent.threads, b->agent.threads);
    ck_assert_str_eq (a->agent.processor, b->agent.processor);
    ck_assert_str_eq (a->agent.path_from, b->agent.path_from);
    ck_assert_str_eq (a->agent.path_to, b->agent.path_to);
    ck_assert_str_eq (a->piv.passes, b->piv.passes);
    ck_assert_int_eq (a->piv.overlap, b->piv.overlap);
    ck_assert_int_eq (a->piv.iterations, b->piv.iterations);
    ck_assert_str_eq (a->piv.deform, b->piv.deform);
    ck_assert_int_eq (a->piv.max_pixels, b->piv.max_pixels);
    ck_assert_int_eq (a->piv.max_ratio, b->piv.max_ratio);
    ck_assert_int_eq (a->agent.memory_mb, b->agent.memory_mb);
    ck_assert_str_eq (a->security.curve, b->security.curve);
}

// The integer keys and their ranges, as the issue and config.h give them.
static const struct {
    const char *section, *name;
    size_t offset;
    int min, max;
} s_ints[] = {
    {"broker", "commit_ms", offsetof (config_t, broker.commit_ms), 0, 1000},
    {"broker", "heartbeat_ms", offsetof (config_t, broker.heartbeat_ms), 10, 60000},
    {"broker", "liveness", offsetof (config_t, broker.liveness), 1, 100},
    {"broker", "max_attempts", offsetof (config_t, broker.max_attempts), 1, 100},
    {"broker", "deadline_floor_ms", offsetof (config_t, broker.deadline_floor_ms), 100,
     86400000},
    {"watcher", "poll_ms", offsetof (config_t, watcher.poll_ms), 10, 60000},
    {"watcher", "resend_ms", offsetof (config_t, watcher.resend_ms), 10, 60000},
    {"watcher", "max_pending", offsetof (config_t, watcher.max_pending), 1, 10000000},
    {"agent", "threads", offsetof (config_t, agent.threads), 0, 1024},
    {"agent", "memory_mb", offsetof (config_t, agent.memory_mb), 0, 1 << 30},
    {"piv", "overlap", offsetof (config_t, piv.overlap), 0, 87},
    {"piv", "iterations", offsetof (config_t, piv.iterations), 1, 10},
    {"piv", "max_pixels", offsetof (config_t, piv.max_pixels), 1, 1 << 30},
    {"piv", "max_ratio", offsetof (config_t, piv.max_ratio), 2, 1000000},
};
#define INTS ((int) (sizeof s_ints / sizeof s_ints[0]))

START_TEST (without_a_file_every_key_has_the_default_of_the_header)
{
    config_t cfg;
    memset (&cfg, 0x55, sizeof cfg);
    config_init (&cfg);
    ck_assert_str_eq (cfg.broker.ingest, "tcp://127.0.0.1:5550");
    ck_assert_str_eq (cfg.broker.work, "tcp://127.0.0.1:5551");
    ck_assert_str_eq (cfg.broker.control, "tcp://127.0.0.1:5552");
    ck_assert_str_eq (cfg.broker.publish, "tcp://127.0.0.1:5553");
    ck_assert_str_eq (cfg.broker.store, "./pivfarm.db");
    ck_assert_str_eq (cfg.broker.durability, "full");
    ck_assert_int_eq (cfg.broker.commit_ms, 2);
    ck_assert_int_eq (cfg.broker.heartbeat_ms, 1000);
    ck_assert_int_eq (cfg.broker.liveness, 3);
    ck_assert_int_eq (cfg.broker.max_attempts, 3);
    ck_assert_str_eq (cfg.broker.store_fields, "all");
    ck_assert_int_eq (cfg.broker.deadline_floor_ms, 30000);
    ck_assert_int_eq (cfg.broker.forget_agents_after, 30 * 86400);
    ck_assert_str_eq (cfg.watcher.root, "./data");
    ck_assert_str_eq (cfg.watcher.mode, "inotify");
    ck_assert_int_eq (cfg.watcher.poll_ms, 1000);
    ck_assert_str_eq (cfg.watcher.ignore, ".*,*~,~$*,*.tmp,*.TMP,*.tmp-*,*.part,*.partial,*.crdownload,"
                                          "*.filepart,Thumbs.db,desktop.ini");
    ck_assert_int_eq (cfg.watcher.resend_ms, 500);
    ck_assert_int_eq (cfg.watcher.max_pending, 10000);
    ck_assert_str_eq (cfg.pairing.rule, "ab");
    ck_assert_str_eq (cfg.pairing.a_suffix, "_a");
    ck_assert_str_eq (cfg.pairing.b_suffix, "_b");
    ck_assert_int_eq (cfg.pairing.ignore_case, 1);
    ck_assert_str_eq (cfg.pairing.extensions, "tif,tiff");
    ck_assert_str_eq (cfg.agent.broker, "tcp://127.0.0.1:5551");
    ck_assert_int_eq (cfg.agent.threads, 0);
    ck_assert_str_eq (cfg.agent.results, "./results");
    ck_assert_str_eq (cfg.agent.processor, "piv");
    ck_assert_str_eq (cfg.agent.path_from, "");
    ck_assert_str_eq (cfg.agent.path_to, "");
    ck_assert_str_eq (cfg.piv.passes, "64,32,16");
    ck_assert_int_eq (cfg.piv.overlap, 50);
    ck_assert_int_eq (cfg.piv.iterations, 3);
    ck_assert_str_eq (cfg.piv.deform, "bspline5");
    ck_assert_int_eq (cfg.piv.max_pixels, 64 * 1024 * 1024);
    ck_assert_int_eq (cfg.agent.memory_mb, 0);
    ck_assert_int_eq (cfg.piv.max_ratio, 250);
    ck_assert_str_eq (cfg.security.curve, "off");
    ck_assert_str_eq (cfg.security.broker_cert, "./certs/broker.cert");
    ck_assert_str_eq (cfg.security.client_cert, "./certs/client.cert");
    ck_assert_str_eq (cfg.security.clients, "./certs/clients");
    ck_assert_str_eq (cfg.security.operators, "./certs/clients/operators");
}
END_TEST

START_TEST (the_example_file_loads_as_the_defaults_with_paths_under_its_directory)
{
    char path[PATH_MAX];
    snprintf (path, sizeof path, "%s/pivfarm.conf", s_conf_dir ());
    config_t cfg, defaults;
    config_init (&defaults);
    ck_assert_msg (config_load (&cfg, path, s_err, sizeof s_err) == 0, "%s", s_err);
    s_assert_same_but_paths (&cfg, &defaults);
    s_assert_in_dir (cfg.broker.store, s_conf_dir (), "pivfarm.db");
    s_assert_in_dir (cfg.watcher.root, s_conf_dir (), "data");
    s_assert_in_dir (cfg.agent.results, s_conf_dir (), "results");
    s_assert_under (cfg.security.broker_cert, s_conf_dir (), "certs/broker.cert");
    s_assert_under (cfg.security.client_cert, s_conf_dir (), "certs/client.cert");
    s_assert_under (cfg.security.clients, s_conf_dir (), "certs/clients");
    s_assert_under (cfg.security.operators, s_conf_dir (), "certs/clients/operators");
}
END_TEST

START_TEST (the_example_file_shows_every_key_with_a_comment_above_it)
{
    char path[PATH_MAX];
    snprintf (path, sizeof path, "%s/pivfarm.conf", s_conf_dir ());
    char *text = tu_slurp (path, NULL);
    ck_assert_msg (text != NULL, "cannot read '%s'", path);
    static const char *const keys[] = {
        "broker/ingest",     "broker/work",         "broker/control",     "broker/publish",
        "broker/store",      "broker/backup_before_migrate", "broker/durability",   "broker/commit_ms",   "broker/heartbeat_ms",
        "broker/liveness",   "broker/max_attempts", "broker/store_fields",
        "broker/deadline_floor_ms", "broker/forget_agents_after", "watcher/root",
        "watcher/mode",      "watcher/poll_ms",     "watcher/ignore",     "watcher/resend_ms",
        "watcher/max_pending", "pairing/rule",      "pairing/a_suffix",   "pairing/b_suffix",
        "pairing/ignore_case", "pairing/extensions", "agent/threads",     "agent/results",
        "agent/processor",   "agent/path_from",     "agent/path_to",      "piv/passes",
        "piv/overlap",       "piv/iterations",      "piv/deform",         "piv/max_pixels",
        "piv/smooth",        "piv/smooth_s",        "piv/max_ratio",      "agent/memory_mb",
        "security/curve",    "security/broker_cert", "security/client_cert", "security/clients",
        "security/operators"};
    zconfig_t *root = zconfig_str_load (text);
    ck_assert (root != NULL);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        zconfig_t *item = zconfig_locate (root, keys[i]);
        ck_assert_msg (item != NULL, "'%s' is not in '%s'", keys[i], path);
        // The line of the key follows a comment line.
        const char *name = strchr (keys[i], '/') + 1;
        char line[128];
        snprintf (line, sizeof line, "\n    %s = ", name);
        const char *at = strstr (text, line);
        ck_assert_msg (at != NULL, "'%s' is not on a line of its own", keys[i]);
        const char *before = at - 1;
        while (before > text && *before != '\n')
            before--;
        ck_assert_msg (strncmp (before, "\n    #", 6) == 0, "'%s' has no comment above it",
                       keys[i]);
    }
    // agent/broker follows broker/work when left out, so it is shown in a
    // comment only.
    ck_assert (zconfig_locate (root, "agent/broker") == NULL);
    ck_assert (strstr (text, "\n    # broker = tcp://127.0.0.1:5551\n") != NULL);
    // The keys and values of issue 3, as written there.
    static const char *const sample[][2] = {
        {"broker/ingest", "tcp://127.0.0.1:5550"}, {"broker/work", "tcp://127.0.0.1:5551"},
        {"broker/control", "tcp://127.0.0.1:5552"}, {"broker/publish", "tcp://127.0.0.1:5553"},
        {"broker/store", "./pivfarm.db"},           {"watcher/root", "./data"},
        {"watcher/mode", "inotify"},                {"pairing/rule", "ab"},
        {"agent/threads", "0"},                     {"agent/results", "./results"},
        {"piv/passes", "64,32,16"},                 {"piv/overlap", "50"}};
    for (size_t i = 0; i < sizeof sample / sizeof sample[0]; i++)
        ck_assert_str_eq (zconfig_get (root, sample[i][0], "(none)"), sample[i][1]);
    zconfig_destroy (&root);
    free (text);
}
END_TEST

START_TEST (an_empty_file_gives_the_defaults)
{
    config_t cfg, defaults;
    config_init (&defaults);
    s_loads (&cfg, "");
    s_assert_same_but_paths (&cfg, &defaults);
    s_loads (&cfg, "# only a comment\n\n");
    s_assert_same_but_paths (&cfg, &defaults);
    // The default paths too are relative to the file's directory.
    s_assert_in_dir (cfg.broker.store, s_dir, "pivfarm.db");
    s_assert_in_dir (cfg.watcher.root, s_dir, "data");
    s_assert_in_dir (cfg.agent.results, s_dir, "results");
}
END_TEST

START_TEST (a_file_overrides_the_keys_of_every_section)
{
    config_t cfg;
    s_loads (&cfg, "broker\n"
                   "    ingest = tcp://10.0.0.1:6000\n"
                   "    work = tcp://*:6001\n"
                   "    control = ipc:///run/pivfarm/control\n"
                   "    publish = \"tcp://10.0.0.1:6003\"\n"
                   "    store = /var/lib/pivfarm/farm.db\n"
                   "    durability = normal\n"
                   "    commit_ms = 0\n"
                   "    heartbeat_ms = 250\n"
                   "    liveness = 5\n"
                   "    max_attempts = 7\n"
                   "    store_fields = every 10\n"
                   "watcher\n"
                   "    root = /srv/export\n"
                   "    mode = poll\n"
                   "    poll_ms = 2000\n"
                   "    ignore = '*.bak,#*#'   # quoted: it holds '#'\n"
                   "    resend_ms = 100\n"
                   "    max_pending = 500\n"
                   "pairing\n"
                   "    rule = sliding\n"
                   "    a_suffix = -A\n"
                   "    b_suffix = -B\n"
                   "    ignore_case = no\n"
                   "    extensions = tif,png\n"
                   "agent\n"
                   "    broker = tcp://farm-head:6001\n"
                   "    threads = 12\n"
                   "    results = /srv/results\n"
                   "    processor = noop\n"
                   "    path_from = /srv/export\n"
                   "    path_to = /mnt/export\n"
                   "piv\n"
                   "    passes = 32, 16\n"
                   "    overlap = 75\n"
                   "    iterations = 5\n"
                   "    deform = omoms\n"
                   "    max_pixels = 1048576\n"
                   "security\n"
                   "    curve = on\n"
                   "    broker_cert = /etc/pivfarm/broker.cert\n"
                   "    client_cert = keys/node07.cert\n"
                   "    clients = /etc/pivfarm/clients\n"
                   "    operators = /etc/pivfarm/operators\n");
    ck_assert_str_eq (cfg.broker.ingest, "tcp://10.0.0.1:6000");
    ck_assert_str_eq (cfg.broker.work, "tcp://*:6001");
    ck_assert_str_eq (cfg.broker.control, "ipc:///run/pivfarm/control");
    ck_assert_str_eq (cfg.broker.publish, "tcp://10.0.0.1:6003");
    ck_assert_str_eq (cfg.broker.store, "/var/lib/pivfarm/farm.db");
    ck_assert_str_eq (cfg.broker.durability, "normal");
    ck_assert_int_eq (cfg.broker.commit_ms, 0);
    ck_assert_int_eq (cfg.broker.heartbeat_ms, 250);
    ck_assert_int_eq (cfg.broker.liveness, 5);
    ck_assert_int_eq (cfg.broker.max_attempts, 7);
    ck_assert_str_eq (cfg.broker.store_fields, "every 10");
    ck_assert_str_eq (cfg.watcher.root, "/srv/export");
    ck_assert_str_eq (cfg.watcher.mode, "poll");
    ck_assert_int_eq (cfg.watcher.poll_ms, 2000);
    ck_assert_str_eq (cfg.watcher.ignore, "*.bak,#*#");
    ck_assert_int_eq (cfg.watcher.resend_ms, 100);
    ck_assert_int_eq (cfg.watcher.max_pending, 500);
    ck_assert_str_eq (cfg.pairing.rule, "sliding");
    ck_assert_str_eq (cfg.pairing.a_suffix, "-A");
    ck_assert_str_eq (cfg.pairing.b_suffix, "-B");
    ck_assert_int_eq (cfg.pairing.ignore_case, 0);
    ck_assert_str_eq (cfg.pairing.extensions, "tif,png");
    ck_assert_str_eq (cfg.agent.broker, "tcp://farm-head:6001");
    ck_assert_int_eq (cfg.agent.threads, 12);
    ck_assert_str_eq (cfg.agent.results, "/srv/results");
    ck_assert_str_eq (cfg.agent.processor, "noop");
    ck_assert_str_eq (cfg.agent.path_from, "/srv/export");
    ck_assert_str_eq (cfg.agent.path_to, "/mnt/export");
    ck_assert_str_eq (cfg.piv.passes, "32,16");
    ck_assert_int_eq (cfg.piv.overlap, 75);
    ck_assert_int_eq (cfg.piv.iterations, 5);
    ck_assert_str_eq (cfg.piv.deform, "omoms");
    ck_assert_int_eq (cfg.piv.max_pixels, 1048576);
    ck_assert_str_eq (cfg.security.curve, "on");
    ck_assert_str_eq (cfg.security.broker_cert, "/etc/pivfarm/broker.cert");
    s_assert_under (cfg.security.client_cert, s_dir, "keys/node07.cert");
    ck_assert_str_eq (cfg.security.clients, "/etc/pivfarm/clients");
    ck_assert_str_eq (cfg.security.operators, "/etc/pivfarm/operators");
}
END_TEST

START_TEST (a_file_with_one_key_keeps_the_defaults_of_the_others)
{
    config_t cfg, expected;
    config_init (&expected);
    expected.broker.liveness = 9;
    s_loads (&cfg, "broker\n    liveness = 9\n");
    s_assert_same_but_paths (&cfg, &expected);
}
END_TEST

START_TEST (relative_paths_are_under_the_directory_of_the_file_and_absolute_ones_stay)
{
    config_t cfg;
    s_loads (&cfg, "broker\n    store = ./x.db\n"
                   "watcher\n    root = frames/./run1//\n"
                   "agent\n    results = /tmp/elsewhere/results\n");
    char expected[PATH_MAX + 16];
    snprintf (expected, sizeof expected, "%s/x.db", s_dir);
    ck_assert_str_eq (cfg.broker.store, expected);
    snprintf (expected, sizeof expected, "%s/frames/run1", s_dir);
    ck_assert_str_eq (cfg.watcher.root, expected);
    ck_assert_str_eq (cfg.agent.results, "/tmp/elsewhere/results");

    // '..' stays as written: the directory may be a symbolic link.
    s_loads (&cfg, "broker\n    store = ../y.db\n");
    snprintf (expected, sizeof expected, "%s/../y.db", s_dir);
    ck_assert_str_eq (cfg.broker.store, expected);

    // Endpoints are not paths.
    s_loads (&cfg, "broker\n    control = ipc://./control.ipc\n");
    ck_assert_str_eq (cfg.broker.control, "ipc://./control.ipc");
}
END_TEST

START_TEST (a_file_named_without_a_directory_puts_its_paths_in_the_current_one)
{
    char cwd[PATH_MAX];
    ck_assert (getcwd (cwd, sizeof cwd) != NULL);
    const char *text = "broker\n    store = x.db\n";
    tu_spit (s_file, text, strlen (text));
    ck_assert (chdir (s_dir) == 0);
    config_t cfg;
    int rc = config_load (&cfg, "x.conf", s_err, sizeof s_err);
    ck_assert (chdir (cwd) == 0);
    ck_assert_msg (rc == 0, "%s", s_err);
    s_assert_in_dir (cfg.broker.store, s_dir, "x.db");
}
END_TEST

START_TEST (an_exec_program_with_a_slash_is_under_the_directory_of_the_file)
{
    config_t cfg;
    char expected[PATH_MAX + 32];
    s_loads (&cfg, "agent\n    processor = exec:./bin/my-piv\n");
    snprintf (expected, sizeof expected, "exec:%s/bin/my-piv", s_dir);
    ck_assert_str_eq (cfg.agent.processor, expected);
    // A bare name is for PATH to find, an absolute path stays.
    s_loads (&cfg, "agent\n    processor = exec:my-piv\n");
    ck_assert_str_eq (cfg.agent.processor, "exec:my-piv");
    s_loads (&cfg, "agent\n    processor = exec:/usr/local/bin/my-piv\n");
    ck_assert_str_eq (cfg.agent.processor, "exec:/usr/local/bin/my-piv");
}
END_TEST

START_TEST (the_agent_connects_to_the_work_endpoint_of_the_broker_unless_told_otherwise)
{
    config_t cfg;
    s_loads (&cfg, "broker\n    work = tcp://10.1.2.3:7001\n");
    ck_assert_str_eq (cfg.agent.broker, "tcp://10.1.2.3:7001");
    // Wherever the sections come in the file.
    s_loads (&cfg, "agent\n    threads = 2\nbroker\n    work = tcp://10.1.2.3:7002\n");
    ck_assert_str_eq (cfg.agent.broker, "tcp://10.1.2.3:7002");
    s_loads (&cfg, "broker\n    work = tcp://*:7001\nagent\n    broker = tcp://head:7001\n");
    ck_assert_str_eq (cfg.broker.work, "tcp://*:7001");
    ck_assert_str_eq (cfg.agent.broker, "tcp://head:7001");
}
END_TEST

// The watcher, pivctl and the page connect where the broker binds unless
// told otherwise; a bind address ('*') is no place to connect to, and the
// message says which key to set.
START_TEST (each_client_connects_to_the_broker_s_endpoint_unless_told_otherwise)
{
    config_t cfg;
    char err[512];
    s_loads (&cfg, "broker\n    ingest = tcp://10.1.2.3:7000\n    control = tcp://10.1.2.3:7002\n");
    ck_assert_str_eq (config_connect (&cfg, "watcher/broker", err, sizeof err),
                      "tcp://10.1.2.3:7000");
    ck_assert_str_eq (config_connect (&cfg, "client/control", err, sizeof err),
                      "tcp://10.1.2.3:7002");
    ck_assert_str_eq (config_connect (&cfg, "client/publish", err, sizeof err),
                      "tcp://127.0.0.1:5553");
    s_loads (&cfg, "broker\n    ingest = tcp://*:7000\n    publish = tcp://*:7003\n"
                   "watcher\n    broker = tcp://head:7000\n");
    ck_assert_str_eq (config_connect (&cfg, "watcher/broker", err, sizeof err), "tcp://head:7000");
    ck_assert (config_connect (&cfg, "client/publish", err, sizeof err) == NULL);
    ck_assert_str_eq (err, "broker/publish is a bind address (tcp://*:7003), not one to connect "
                           "to; set client/publish = tcp://HOST:7003 (the broker's host name or "
                           "address)");
    s_loads (&cfg, "agent\n    broker = tcp://*:7001\n");
    ck_assert (config_connect (&cfg, "agent/broker", err, sizeof err) == NULL);
    ck_assert_str_eq (err, "agent/broker is a bind address (tcp://*:7001), not one to connect "
                           "to; set agent/broker = tcp://HOST:7001 (the broker's host name or "
                           "address)");
}
END_TEST

// Each program's certificate: its role's key when given, else client_cert.
START_TEST (each_program_takes_the_certificate_of_its_role_before_client_cert)
{
    config_t cfg;
    const char *text = "security\n    client_cert = ./shared.cert\n    page_cert = ./page.cert\n";
    config_role ("page");
    s_loads (&cfg, text);
    s_assert_in_dir (cfg.security.cert, s_dir, "page.cert");
    ck_assert_str_eq (cfg.security.cert_key, "security/page_cert");
    config_role ("watcher");
    s_loads (&cfg, text);
    s_assert_in_dir (cfg.security.cert, s_dir, "shared.cert");
    ck_assert_str_eq (cfg.security.cert_key, "security/client_cert");
    config_role (NULL);
    s_loads (&cfg, text);
    ck_assert_str_eq (cfg.security.cert_key, "security/client_cert");
}
END_TEST

START_TEST (integers_are_accepted_at_both_ends_of_their_range_and_refused_beyond)
{
    for (int i = 0; i < INTS; i++) {
        char text[256], expected[512];
        config_t cfg;
        int ends[2] = {s_ints[i].min, s_ints[i].max};
        for (int e = 0; e < 2; e++) {
            snprintf (text, sizeof text, "%s\n    %s = %d\n", s_ints[i].section, s_ints[i].name,
                      ends[e]);
            s_loads (&cfg, text);
            ck_assert_int_eq (*(int *) ((char *) &cfg + s_ints[i].offset), ends[e]);
        }
        int beyond[2] = {s_ints[i].min - 1, s_ints[i].max + 1};
        for (int e = 0; e < 2; e++) {
            snprintf (text, sizeof text, "%s\n    %s = %d\n", s_ints[i].section, s_ints[i].name,
                      beyond[e]);
            snprintf (expected, sizeof expected,
                      "value '%d' of '%s/%s' in '%%s' is out of range: expected an integer "
                      "from %d to %d",
                      beyond[e], s_ints[i].section, s_ints[i].name, s_ints[i].min,
                      s_ints[i].max);
            s_refused (text, expected);
        }
    }
    s_refused ("broker\n    liveness = 99999999999999999999999\n",
               "value '99999999999999999999999' of 'broker/liveness' in '%s' is out of range: "
               "expected an integer from 1 to 100");
}
END_TEST

START_TEST (a_value_that_is_not_a_number_is_refused)
{
    s_refused ("broker\n    liveness = three\n",
               "value 'three' of 'broker/liveness' in '%s' is not a number: expected an integer "
               "from 1 to 100");
    // Quoted, so that the spaces reach the parser of integers.
    static const char *const bad[] = {"", "3x", "3.0", "0x10", "+3", " 3", "3 4", "-", "1e2"};
    s_refused_values ("piv", "overlap", bad, sizeof bad / sizeof bad[0],
                      "is not a number: expected an integer from 0 to 87");
}
END_TEST

START_TEST (a_value_outside_its_choices_is_refused_naming_them)
{
    s_refused ("broker\n    durability = fast\n",
               "value 'fast' of 'broker/durability' in '%s' is not one of its choices: expected "
               "normal or full");
    s_refused ("watcher\n    mode = fanotify\n",
               "value 'fanotify' of 'watcher/mode' in '%s' is not one of its choices: expected "
               "inotify or poll");
    s_refused ("pairing\n    cameras = cam1,cam1\n",
               "value of 'pairing/cameras' in '%s' is not valid: bad camera folders 'cam1,cam1': "
               "expected two different folder names, camera 1's first (cam1,cam2)");
    s_refused ("pairing\n    rule = AB\n",
               "value 'AB' of 'pairing/rule' in '%s' is not one of its choices: expected ab, "
               "sequence, sliding, multipage or stereo");
    s_refused ("piv\n    deform = cubic\n",
               "value 'cubic' of 'piv/deform' in '%s' is not one of its choices: expected "
               "offset, bilinear, bicubic, bspline, bspline5 or omoms");
    s_refused ("agent\n    processor = exec:\n",
               "value 'exec:' of 'agent/processor' in '%s' is not one of its choices: expected "
               "piv, noop or exec:PROGRAM");
    s_refused ("security\n    curve = yes\n",
               "value 'yes' of 'security/curve' in '%s' is not one of its choices: expected "
               "off or on");
    s_refused ("agent\n    processor = openpiv\n",
               "value 'openpiv' of 'agent/processor' in '%s' is not one of its choices: "
               "expected piv, noop or exec:PROGRAM");
    config_t cfg;
    static const char *const rules[] = {"ab", "sequence", "sliding", "multipage"};
    for (int i = 0; i < 4; i++) {
        char text[64];
        snprintf (text, sizeof text, "pairing\n    rule = %s\n", rules[i]);
        s_loads (&cfg, text);
        ck_assert_str_eq (cfg.pairing.rule, rules[i]);
    }
}
END_TEST

START_TEST (booleans_are_0_1_true_false_yes_or_no)
{
    static const char *const words[] = {"0", "1", "false", "true", "no", "yes"};
    for (int i = 0; i < 6; i++) {
        char text[64];
        snprintf (text, sizeof text, "pairing\n    ignore_case = %s\n", words[i]);
        config_t cfg;
        s_loads (&cfg, text);
        ck_assert_int_eq (cfg.pairing.ignore_case, i % 2);
    }
    s_refused ("pairing\n    ignore_case = maybe\n",
               "value 'maybe' of 'pairing/ignore_case' in '%s' is not a boolean: expected 0, 1, "
               "true, false, yes or no");
    s_refused ("pairing\n    ignore_case = 2\n",
               "value '2' of 'pairing/ignore_case' in '%s' is not a boolean: expected 0, 1, "
               "true, false, yes or no");
}
END_TEST

START_TEST (store_fields_is_all_none_or_every_n_with_n_at_least_1)
{
    config_t cfg;
    s_loads (&cfg, "broker\n    store_fields = none\n");
    ck_assert_str_eq (cfg.broker.store_fields, "none");
    s_loads (&cfg, "broker\n    store_fields = every 1\n");
    ck_assert_str_eq (cfg.broker.store_fields, "every 1");
    s_loads (&cfg, "broker\n    store_fields = every   250\n");
    ck_assert_str_eq (cfg.broker.store_fields, "every 250");
    static const char *const bad[] = {"every 0", "every", "every -2", "every x", "every10",
                                      "some", "every 5 days", "every 99999999999"};
    s_refused_values ("broker", "store_fields", bad, sizeof bad / sizeof bad[0],
                      "is not valid: expected all, none or every N with N >= 1");
}
END_TEST

START_TEST (forget_agents_after_is_off_or_a_whole_number_of_s_min_h_or_d)
{
    config_t cfg;
    static const struct {
        const char *text;
        int seconds;
    } good[] = {{"30d", 30 * 86400}, {"12h", 43200}, {"90min", 5400}, {"2s", 2},
                {"0", 0},          {"off", 0},     {"3650d", 3650 * 86400}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char text[128];
        snprintf (text, sizeof text, "broker\n    forget_agents_after = %s\n", good[i].text);
        s_loads (&cfg, text);
        ck_assert_int_eq (cfg.broker.forget_agents_after, good[i].seconds);
    }
    static const char *const bad[] = {"30",   "30 d", "3651d", "-1d",  "1.5d", "d",
                                      "30m",  "30D",  "on",    "99999999999s", "1d2h"};
    s_refused_values ("broker", "forget_agents_after", bad, sizeof bad / sizeof bad[0],
                      "is not valid: expected off, or a whole number of s, min, h or d such as "
                      "30d or 12h (at most 3650d)");
}
END_TEST

START_TEST (passes_are_window_sizes_the_piv_core_accepts)
{
    config_t cfg;
    s_loads (&cfg, "piv\n    passes = 128,64,32,32,16\n");
    ck_assert_str_eq (cfg.piv.passes, "128,64,32,32,16");
    s_loads (&cfg, "piv\n    passes = 8\n");
    ck_assert_str_eq (cfg.piv.passes, "8");
    static const char *const bad[] = {"", "64,33", "16,32", "4", "512", "64,,32", "64,32,",
                                      "256,256,256,256,256,256,256,256,256", "sixty-four"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128], expected[512];
        snprintf (text, sizeof text, "piv\n    passes = \"%s\"\n", bad[i]);
        snprintf (expected, sizeof expected,
                  "value '%s' of 'piv/passes' in '%%s' is not valid: expected one to eight "
                  "window sizes from large to small, each even from 8 to 256, such as 64,32,16 "
                  "or 48,24",
                  bad[i]);
        s_refused (text, expected);
    }
}
END_TEST

START_TEST (endpoints_must_name_a_transport_and_an_address)
{
    static const char *const bad[] = {"127.0.0.1:5551", "tcp://", "://x", "tcp:/x:1",
                                      "tcp://host :1", "@tcp://*:5551"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128], expected[512];
        snprintf (text, sizeof text, "agent\n    broker = \"%s\"\n", bad[i]);
        snprintf (expected, sizeof expected,
                  "value '%s' of 'agent/broker' in '%%s' is not an endpoint: expected "
                  "transport://address such as tcp://127.0.0.1:5551",
                  bad[i]);
        s_refused (text, expected);
    }
}
END_TEST

START_TEST (an_unknown_key_is_refused_naming_it_and_the_file)
{
    s_refused ("broker\n    ingst = tcp://127.0.0.1:5550\n", "unknown key 'broker/ingst' in '%s'");
    // A key of another section is unknown in this one.
    s_refused ("watcher\n    store = x.db\n", "unknown key 'watcher/store' in '%s'");
    // Keys have no keys below them.
    s_refused ("broker\n    store = x.db\n        mode = wal\n",
               "unknown key 'broker/store/mode' in '%s'");
}
END_TEST

START_TEST (storage_sizes_and_thresholds_are_checked_and_relative_dirs_anchored)
{
    config_t cfg;
    ck_assert_msg (s_load (&cfg, "storage\n    io_size = 1M\n    warn_free = 50G\n"
                                 "    critical_free = 5G\n    archive_dir = arch\n") == 0,
                   "%s", s_err);
    ck_assert_str_eq (cfg.storage.io_size, "1M");
    ck_assert_msg (cfg.storage.archive_dir[0] == '/' && strstr (cfg.storage.archive_dir, "/arch"),
                   "%s", cfg.storage.archive_dir);
    s_refused ("storage\n    io_size = 128M\n",
               "value '128M' of 'storage/io_size' in '%s' is not valid: expected a size from 64K "
               "to 64M, such as 4M");
    s_refused ("storage\n    warn_free = lots\n",
               "value 'lots' of 'storage/warn_free' in '%s' is not valid: expected a size such "
               "as 50G or a percentage of the volume such as 10%%");
    s_refused ("storage\n    warn_free = 5%\n    critical_free = 8%\n",
               "values '5%%' and '8%%' of 'storage/warn_free' and 'storage/critical_free' in '%s' "
               "are not valid: the critical threshold is below the warning one");
}
END_TEST

START_TEST (an_unknown_section_is_refused_naming_it_and_the_file)
{
    s_refused ("brokers\n    ingest = tcp://127.0.0.1:5550\n",
               "unknown section 'brokers' in '%s': expected broker, watcher, pairing, agent, "
               "piv, calibration, security, client, storage or log");
    // A key outside any section.
    s_refused ("liveness = 3\n",
               "unknown section 'liveness' in '%s': expected broker, watcher, pairing, agent, "
               "piv, calibration, security, client, storage or log");
    s_refused ("broker = tcp://127.0.0.1:5550\n",
               "section 'broker' in '%s' has a value: its keys go on the lines below, indented "
               "by 4 spaces");
}
END_TEST

START_TEST (with_curve_on_a_missing_certificate_is_named_with_its_key)
{
    config_t cfg;
    char err[8192], expected[8192];
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    ck_assert (sock != NULL);
    // Off, no certificate is needed.
    s_loads (&cfg, "");
    ck_assert_int_eq (secure_client (sock, &cfg, err, sizeof err), 0);

    s_loads (&cfg, "security\n    curve = on\n    client_cert = ./keys/me.cert\n");
    ck_assert_int_eq (secure_client (sock, &cfg, err, sizeof err), -1);
    snprintf (expected, sizeof expected,
              "cannot read the secret certificate '%s/keys/me.cert_secret' "
              "(security/client_cert): No such file or directory; 'pivctl keygen NAME' makes one",
              s_dir);
    ck_assert_str_eq (err, expected);

    // This program's pair is there, not the broker's certificate.
    mkdir (tu_path (s_dir, "keys"), 0755);
    zcert_t *mine = zcert_new ();
    ck_assert_int_eq (zcert_save (mine, tu_path (s_dir, "keys/me.cert")), 0);
    zcert_destroy (&mine);
    ck_assert_int_eq (secure_client (sock, &cfg, err, sizeof err), -1);
    snprintf (expected, sizeof expected,
              "cannot read the public certificate '%s/certs/broker.cert' "
              "(security/broker_cert): No such file or directory; 'pivctl keygen NAME' makes one",
              s_dir);
    ck_assert_str_eq (err, expected);

    // A file that is no certificate.
    mkdir (tu_path (s_dir, "certs"), 0755);
    tu_spit (tu_path (s_dir, "certs/broker.cert"), "hello\n", 6);
    ck_assert_int_eq (secure_client (sock, &cfg, err, sizeof err), -1);
    snprintf (expected, sizeof expected,
              "'%s/certs/broker.cert' (security/broker_cert) is not a CURVE certificate made by "
              "'pivctl keygen'",
              s_dir);
    ck_assert_str_eq (err, expected);

    // Both there: the socket is a CURVE client.
    zcert_t *broker = zcert_new ();
    ck_assert_int_eq (zcert_save_public (broker, tu_path (s_dir, "certs/broker.cert")), 0);
    ck_assert_msg (secure_client (sock, &cfg, err, sizeof err) == 0, "%s", err);
    char *key = zsock_curve_serverkey (sock);
    ck_assert_str_eq (key, zcert_public_txt (broker));
    zstr_free (&key);
    zcert_destroy (&broker);
    zsock_destroy (&sock);
}
END_TEST

START_TEST (a_key_given_twice_is_refused)
{
    s_refused ("broker\n    liveness = 3\n    liveness = 4\n",
               "key 'broker/liveness' is given twice in '%s'");
    // A section may come twice; its keys still once.
    config_t cfg;
    s_loads (&cfg,
             "broker\n    liveness = 4\nwatcher\n    mode = poll\nbroker\n    commit_ms = 5\n");
    ck_assert_int_eq (cfg.broker.liveness, 4);
    ck_assert_int_eq (cfg.broker.commit_ms, 5);
    s_refused ("broker\n    liveness = 3\nbroker\n    liveness = 4\n",
               "key 'broker/liveness' is given twice in '%s'");
}
END_TEST

START_TEST (a_string_too_long_for_its_key_is_refused)
{
    char text[1100], value[300];
    memset (value, 'x', 256);
    value[256] = '\0';
    snprintf (text, sizeof text, "watcher\n    ignore = %s\n", value);
    s_refused (text, "value of 'watcher/ignore' in '%s' is too long (256 characters, at most 255)");
    value[255] = '\0';
    config_t cfg;
    snprintf (text, sizeof text, "watcher\n    ignore = %s\n", value);
    s_loads (&cfg, text);
    ck_assert_str_eq (cfg.watcher.ignore, value);

    s_refused ("pairing\n    a_suffix = _frame_a_of_the_pair_of_images_taken\n",
               "value of 'pairing/a_suffix' in '%s' is too long (36 characters, at most 31)");
}
END_TEST

START_TEST (a_relative_path_too_long_once_under_the_directory_is_refused)
{
    // A directory deep enough that a 1000-character relative path under it
    // passes PATH_MAX.
    char deep[PATH_MAX];
    snprintf (deep, sizeof deep, "%s", s_dir);
    char name[201];
    memset (name, 'd', 200);
    name[200] = '\0';
    while (strlen (deep) < PATH_MAX - 900) {
        size_t len = strlen (deep);
        snprintf (deep + len, sizeof deep - len, "/%s", name);
        ck_assert_msg (mkdir (deep, 0700) == 0, "mkdir: %s", strerror (errno));
    }
    char path[PATH_MAX + 16];
    snprintf (path, sizeof path, "%s/x.conf", deep);
    char text[1100], value[1001];
    memset (value, 'r', 1000);
    value[1000] = '\0';
    snprintf (text, sizeof text, "agent\n    results = %s\n", value);
    tu_spit (path, text, strlen (text));
    config_t cfg;
    ck_assert_int_eq (config_load (&cfg, path, s_err, sizeof s_err), -1);
    // Longer than the caller's buffer: its middle goes, never its end.
    char expected[2 * PATH_MAX + 256], shown[sizeof s_err];
    snprintf (expected, sizeof expected,
              "value of 'agent/results' in '%s' is too long once made relative to '%s' (%zu "
              "characters, at most %d)",
              path, deep, strlen (deep) + 1 + 1000, PATH_MAX - 1);
    ck_assert_str_eq (s_err, util_shorten (expected, shown, sizeof shown));
}
END_TEST

START_TEST (a_missing_file_is_refused_with_the_reason_of_the_system)
{
    config_t cfg;
    char path[PATH_MAX + 16], expected[PATH_MAX + 128];
    snprintf (path, sizeof path, "%s/none.conf", s_dir);
    ck_assert_int_eq (config_load (&cfg, path, s_err, sizeof s_err), -1);
    snprintf (expected, sizeof expected, "cannot read '%s': No such file or directory", path);
    ck_assert_str_eq (s_err, expected);
    // A directory is not a file either.
    ck_assert_int_eq (config_load (&cfg, s_dir, s_err, sizeof s_err), -1);
    snprintf (expected, sizeof expected, "cannot read '%s': Is a directory", s_dir);
    ck_assert_str_eq (s_err, expected);
}
END_TEST

// Loads text with fd 1 pointed at a file; returns what reached it (static).
static const char *
s_load_watching_stdout (const char *text, int *rc)
{
    static char said[1024];
    char out[PATH_MAX + 16];
    snprintf (out, sizeof out, "%s/stdout", s_dir);
    fflush (stdout);
    int saved = dup (1);
    int fd = open (out, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ck_assert (saved >= 0 && fd >= 0);
    dup2 (fd, 1);
    close (fd);
    config_t cfg;
    *rc = s_load (&cfg, text);
    fflush (stdout);
    dup2 (saved, 1);
    close (saved);
    char *got = tu_slurp (out, NULL);
    snprintf (said, sizeof said, "%s", got ? got : "?");
    free (got);
    return said;
}

START_TEST (unparseable_content_is_refused_with_its_line_and_nothing_on_stdout)
{
    int rc;
    const char *said = s_load_watching_stdout ("broker\n   store = x.db\n", &rc);
    ck_assert_int_eq (rc, -1);
    ck_assert_str_eq (said, "");
    char expected[PATH_MAX + 128];
    snprintf (expected, sizeof expected,
              "cannot parse '%s': line 2 is not valid ZPL (indent 4 spaces at once)", s_file);
    ck_assert_str_eq (s_err, expected);

    s_refused ("broker\n    store = \"x.db\n",
               "cannot parse '%s': line 2 is not valid ZPL (missing \")");
    s_refused ("piv\n        overlap = 50\n",
               "cannot parse '%s': line 2 is not valid ZPL (indentation error)");
    s_refused ("# fine\nbroker\n    store = 'x.db' trailing\n",
               "cannot parse '%s': line 3 is not valid ZPL (invalid syntax 'trailing')");
    s_refused ("broker\n\tstore = x.db\n",
               "cannot parse '%s': line 2 is indented with a tab (ZPL indents by 4 spaces)");
}
END_TEST

START_TEST (content_zconfig_would_cut_is_refused_rather_than_misread)
{
    char text[2200];
    char value[1100];
    memset (value, 'x', 1020);
    value[1020] = '\0';
    snprintf (text, sizeof text, "watcher\n    ignore = %s\n", value);
    s_refused (text, "cannot parse '%s': line 2 is longer than 1024 characters (1033)");
    static const char nul[] = "broker\n    store = x.db\0\n    liveness = 7\n";
    tu_spit (s_file, nul, sizeof nul - 1);
    config_t cfg;
    ck_assert_int_eq (config_load (&cfg, s_file, s_err, sizeof s_err), -1);
    char expected[PATH_MAX + 128];
    snprintf (expected, sizeof expected, "cannot parse '%s': line 2 holds a NUL byte", s_file);
    ck_assert_str_eq (s_err, expected);
}
END_TEST

START_TEST (half_a_path_mapping_or_two_equal_suffixes_are_refused)
{
    s_refused ("agent\n    path_from = /srv/export\n",
               "'agent/path_from' and 'agent/path_to' in '%s' go together: give both or neither");
    s_refused ("pairing\n    b_suffix = _a\n",
               "values '_a' and '_a' of 'pairing/a_suffix' and 'pairing/b_suffix' in '%s' are "
               "not valid: rule ab needs two different, non-empty suffixes");
    // Other rules do not use the suffixes.
    config_t cfg;
    s_loads (&cfg, "pairing\n    rule = sequence\n    b_suffix = _a\n");
}
END_TEST

// One key set as the file would set it (a replay's PIV options): the
// same checks, and the message names the key, the value and its origin.
START_TEST (one_key_is_set_with_the_checks_of_the_file)
{
    config_t cfg;
    config_init (&cfg);
    char err[512] = "";
    ck_assert_int_eq (config_set (&cfg, "piv", "overlap", "25", "the test", err, sizeof err), 0);
    ck_assert_int_eq (cfg.piv.overlap, 25);
    ck_assert_int_eq (config_set (&cfg, "piv", "passes", "32, 16", "the test", err, sizeof err),
                      0);
    ck_assert_str_eq (cfg.piv.passes, "32,16");
    ck_assert_int_eq (config_set (&cfg, "piv", "overlap", "90", "the test", err, sizeof err), -1);
    ck_assert_msg (strstr (err, "'90'") && strstr (err, "piv/overlap") && strstr (err, "the test"),
                   "%s", err);
    ck_assert_int_eq (cfg.piv.overlap, 25);
    ck_assert_int_eq (config_set (&cfg, "piv", "deform", "cubic", "the test", err, sizeof err),
                      -1);
    ck_assert_msg (strstr (err, "'cubic'") && strstr (err, "bspline5"), "%s", err);
    ck_assert_int_eq (config_set (&cfg, "piv", "colour", "red", "the test", err, sizeof err), -1);
    ck_assert_msg (strstr (err, "unknown key 'piv/colour'"), "%s", err);
}
END_TEST

START_TEST (paths_must_not_be_empty_nor_start_with_a_tilde)
{
    s_refused ("broker\n    store = \"\"\n",
               "value of 'broker/store' in '%s' is empty: expected a path");
    s_refused ("agent\n    results = ~/results\n",
               "value '~/results' of 'agent/results' in '%s' starts with '~': write the path in "
               "full, or relative to the file's directory");
    s_refused ("pairing\n    extensions = \" , \"\n",
               "value of 'pairing/extensions' in '%s' is empty: expected a comma-separated list "
               "such as tif,tiff");
}
END_TEST

// The [piv] keys are checked by the PIV core's rules, which every program
// registers before it reads its file: each refuses a bad one at start with
// config_load's message and exit status 2, the status page with a 500.
START_TEST (every_program_refuses_a_bad_piv_key_at_start_with_the_same_message)
{
    static const char *const bad[][2] = {
        {"overlap = 90", "value '90' of 'piv/overlap' in '%s' is out of range: expected an "
                         "integer from 0 to 87"},
        {"passes = \"64, 47\"",
         "value '64, 47' of 'piv/passes' in '%s' is not valid: expected one to eight window "
         "sizes from large to small, each even from 8 to 256, such as 64,32,16 or 48,24"},
        {"deform = cubic", "value 'cubic' of 'piv/deform' in '%s' is not one of its choices: "
                           "expected offset, bilinear, bicubic, bspline, bspline5 or omoms"},
        {"smooth = gentle", "value 'gentle' of 'piv/smooth' in '%s' is not one of its choices: "
                            "expected final, predictor, both or off"},
        {"smooth_s = -1", "value '-1' of 'piv/smooth_s' in '%s' is not a smoothing parameter: "
                          "expected a number from 0 (chosen by generalized cross-validation) to "
                          "1e6, such as 0.1"}};
    static const char *const programs[] = {"pivfarm-broker", "pivfarm-watcher", "pivfarm-agent",
                                           "pivctl"};
    static char out[16384];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128], expected[1024];
        snprintf (text, sizeof text, "piv\n    %s\n", bad[i][0]);
        snprintf (expected, sizeof expected, bad[i][1], s_file);
        s_refused (text, bad[i][1]);
        for (size_t p = 0; p < sizeof programs / sizeof programs[0]; p++) {
            char *argv[] = {(char *) tu_bin (programs[p]), "-c", s_file, "status", NULL};
            if (p < 3)
                argv[3] = NULL;
            int rc = tu_run (argv, out, sizeof out, 30);
            ck_assert_msg (rc == 2 && strstr (out, expected), "%s: exit %d: %.2000s",
                           programs[p], rc, out);
        }
        setenv ("GATEWAY_INTERFACE", "CGI/1.1", 1);
        setenv ("REQUEST_METHOD", "GET", 1);
        setenv ("QUERY_STRING", "format=json", 1);
        setenv ("PIVFARM_CONF", s_file, 1);
        char *argv[] = {(char *) tu_bin ("pivfarm.cgi"), NULL};
        int rc = tu_run (argv, out, sizeof out, 30);
        ck_assert_msg (rc == 0 && strncmp (out, "Status: 500", 11) == 0 && strstr (out, expected),
                       "pivfarm.cgi: exit %d: %.2000s", rc, out);
    }
}
END_TEST

START_TEST (the_calibration_section_is_checked_and_kept_canonical)
{
    config_t cfg;
    s_loads (&cfg, "calibration\n    scale = 0.02 mm/px\n    dt = 2 ms\n    y_axis = down\n"
                   "broker\n    stats_ms = 250\n");
    ck_assert_str_eq (cfg.calibration.scale, "2.0000000000000002e-05 m/px");
    ck_assert_str_eq (cfg.calibration.dt, "0.002 s");
    ck_assert_str_eq (cfg.calibration.y_axis, "down");
    ck_assert_str_eq (cfg.calibration.origin, "");
    ck_assert_int_eq (cfg.broker.stats_ms, 250);
    config_init (&cfg);
    ck_assert_int_eq (cfg.broker.stats_ms, 1000);
    ck_assert_str_eq (cfg.calibration.y_axis, "up");
    s_refused ("calibration\n    scale = 0.02 mm/px\n",
               "'calibration/scale' and 'calibration/dt' in '%s' go together: give both or "
               "neither");
    ck_assert_int_eq (s_load (&cfg, "calibration\n    scale = -1 mm/px\n    dt = 1 ms\n"), -1);
    ck_assert_msg (strstr (s_err, "'calibration/scale'") && strstr (s_err, "length per pixel"),
                   "%s", s_err);
    ck_assert_int_eq (s_load (&cfg, "calibration\n    scale = 1 mm/px\n    dt = abc\n"), -1);
    ck_assert_msg (strstr (s_err, "'calibration/dt'"), "%s", s_err);
    ck_assert_int_eq (s_load (&cfg, "broker\n    stats_ms = 600001\n"), -1);
    ck_assert_msg (strstr (s_err, "'broker/stats_ms'"), "%s", s_err);
}
END_TEST

// How often the statistics are saved (issue 28): a budget in KiB/s and a
// most of results unsaved, each checked.
START_TEST (the_statistics_save_budget_and_its_bound_are_checked)
{
    config_t cfg;
    config_init (&cfg);
    ck_assert_int_eq (cfg.broker.stats_save_kb_s, 1024);
    ck_assert_int_eq (cfg.broker.stats_save_results, 1000);
    s_loads (&cfg, "broker\n    stats_save_kb_s = 0\n    stats_save_results = 50\n");
    ck_assert_int_eq (cfg.broker.stats_save_kb_s, 0);
    ck_assert_int_eq (cfg.broker.stats_save_results, 50);
    ck_assert_int_eq (s_load (&cfg, "broker\n    stats_save_results = 0\n"), -1);
    ck_assert_msg (strstr (s_err, "'broker/stats_save_results'"), "%s", s_err);
    ck_assert_int_eq (s_load (&cfg, "broker\n    stats_save_kb_s = -1\n"), -1);
    ck_assert_msg (strstr (s_err, "'broker/stats_save_kb_s'"), "%s", s_err);
}
END_TEST

// The free-space guard's headroom (issue 28): seconds of the measured
// growth, 10 minutes by default, 0 turning it off.
START_TEST (the_guard_headroom_is_seconds_and_checked)
{
    config_t cfg;
    config_init (&cfg);
    ck_assert_int_eq (cfg.storage.headroom_s, 600);
    s_loads (&cfg, "storage\n    headroom_s = 0\n");
    ck_assert_int_eq (cfg.storage.headroom_s, 0);
    ck_assert_int_eq (s_load (&cfg, "storage\n    headroom_s = 604801\n"), -1);
    ck_assert_msg (strstr (s_err, "'storage/headroom_s'"), "%s", s_err);
}
END_TEST

// agent/result_format (issue 18): txt by default, field accepted, nothing else.
START_TEST (the_result_format_is_txt_or_field)
{
    config_t cfg;
    config_init (&cfg);
    ck_assert_str_eq (cfg.agent.result_format, "txt");
    ck_assert_int_eq (s_load (&cfg, "agent\n    result_format = field\n"), 0);
    ck_assert_str_eq (cfg.agent.result_format, "field");
    s_refused ("agent\n    result_format = hdf5\n",
               "value 'hdf5' of 'agent/result_format' in '%s' is not one of its choices: "
               "expected txt or field");
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("config");
    TCase *load = tcase_create ("load");
    tcase_add_checked_fixture (load, s_setup, s_teardown);
    tcase_add_test (load, without_a_file_every_key_has_the_default_of_the_header);
    tcase_add_test (load, the_example_file_loads_as_the_defaults_with_paths_under_its_directory);
    tcase_add_test (load, the_example_file_shows_every_key_with_a_comment_above_it);
    tcase_add_test (load, an_empty_file_gives_the_defaults);
    tcase_add_test (load, a_file_overrides_the_keys_of_every_section);
    tcase_add_test (load, a_file_with_one_key_keeps_the_defaults_of_the_others);
    tcase_add_test (load,
                    the_agent_connects_to_the_work_endpoint_of_the_broker_unless_told_otherwise);
    tcase_add_test (load, each_client_connects_to_the_broker_s_endpoint_unless_told_otherwise);
    tcase_add_test (load, each_program_takes_the_certificate_of_its_role_before_client_cert);
    suite_add_tcase (suite, load);

    TCase *paths = tcase_create ("paths");
    tcase_add_checked_fixture (paths, s_setup, s_teardown);
    tcase_add_test (paths,
                    relative_paths_are_under_the_directory_of_the_file_and_absolute_ones_stay);
    tcase_add_test (paths, a_file_named_without_a_directory_puts_its_paths_in_the_current_one);
    tcase_add_test (paths, an_exec_program_with_a_slash_is_under_the_directory_of_the_file);
    tcase_add_test (paths, a_relative_path_too_long_once_under_the_directory_is_refused);
    tcase_add_test (paths, paths_must_not_be_empty_nor_start_with_a_tilde);
    suite_add_tcase (suite, paths);

    TCase *refusals = tcase_create ("refusals");
    tcase_add_checked_fixture (refusals, s_setup, s_teardown);
    tcase_add_test (refusals, an_unknown_key_is_refused_naming_it_and_the_file);
    tcase_add_test (refusals, an_unknown_section_is_refused_naming_it_and_the_file);
    tcase_add_test (refusals, storage_sizes_and_thresholds_are_checked_and_relative_dirs_anchored);
    tcase_add_test (refusals, a_key_given_twice_is_refused);
    tcase_add_test (refusals, with_curve_on_a_missing_certificate_is_named_with_its_key);
    tcase_add_test (refusals, a_value_that_is_not_a_number_is_refused);
    tcase_add_test (refusals, integers_are_accepted_at_both_ends_of_their_range_and_refused_beyond);
    tcase_add_test (refusals, a_value_outside_its_choices_is_refused_naming_them);
    tcase_add_test (refusals, booleans_are_0_1_true_false_yes_or_no);
    tcase_add_test (refusals, store_fields_is_all_none_or_every_n_with_n_at_least_1);
    tcase_add_test (refusals, forget_agents_after_is_off_or_a_whole_number_of_s_min_h_or_d);
    tcase_add_test (refusals, passes_are_window_sizes_the_piv_core_accepts);
    tcase_add_test (refusals, endpoints_must_name_a_transport_and_an_address);
    tcase_add_test (refusals, a_string_too_long_for_its_key_is_refused);
    tcase_add_test (refusals, half_a_path_mapping_or_two_equal_suffixes_are_refused);
    tcase_add_test (refusals, a_missing_file_is_refused_with_the_reason_of_the_system);
    tcase_add_test (refusals, unparseable_content_is_refused_with_its_line_and_nothing_on_stdout);
    tcase_add_test (refusals, content_zconfig_would_cut_is_refused_rather_than_misread);
    tcase_add_test (refusals, one_key_is_set_with_the_checks_of_the_file);
    tcase_add_test (refusals, every_program_refuses_a_bad_piv_key_at_start_with_the_same_message);
    tcase_add_test (refusals, the_calibration_section_is_checked_and_kept_canonical);
    tcase_add_test (refusals, the_statistics_save_budget_and_its_bound_are_checked);
    tcase_add_test (refusals, the_guard_headroom_is_seconds_and_checked);
    tcase_add_test (refusals, the_result_format_is_txt_or_field);
    suite_add_tcase (suite, refusals);
    return suite;
}

int
main (void)
{
    // The [piv] keys are checked by the PIV core's rules, as in every program.
    config_rules ("piv", piv_settings_check_key);
    config_rules ("calibration", piv_calib_check_key);
    return tu_run_suite (s_suite ());
}
