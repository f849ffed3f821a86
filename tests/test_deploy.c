// test_deploy.c — the deployment kit as an administrator uses it:
// pivfarm-deploy run for real with --dry-run (and against a stand-in ssh,
// some hosts of which are changed for real in namespaces of their own) on
// a hosts file in a temporary directory, the systemd units, the Slurm batch
// script (with a stand-in srun), and the synthetic camera of 'make demo'.
// Nothing here needs root or a network; a missing tool skips its assertion
// with a message.

#include "tests/testutil.h"

#include <arpa/inet.h>
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_TIMEOUT 60  // s, for any one run of a script or program
#define SSH "ssh -o BatchMode=yes -o ConnectTimeout=10"
#define SCP "scp -q -o BatchMode=yes -o ConnectTimeout=10"
#define BIN "/opt/pivfarm/bin"  // PIVFARM_BIN: only named, never run, by --dry-run

static char s_dir[4096];     // this test's temporary directory
static char s_top[4096];     // the top of the source tree (real path)
static char s_bin[4096];     // the built programs (real path)
static char s_out[1 << 16];  // stdout and stderr of the last run

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "%s", tu_tmpdir ());
    // Before PIVFARM_BIN changes below: tu_bin follows it.
    char *bin = realpath (tu_bin ("."), NULL), *top = realpath (tu_bin (".."), NULL);
    ck_assert_msg (bin && top, "cannot find the source tree from '%s'", tu_bin (".."));
    snprintf (s_bin, sizeof s_bin, "%s", bin);
    snprintf (s_top, sizeof s_top, "%s", top);
    free (bin);
    free (top);
    // Every test starts from the defaults of the scripts.
    unsetenv ("PIVFARM_SSH");
    unsetenv ("PIVFARM_SCP");
    unsetenv ("PIVFARM_SUDO");
    unsetenv ("PIVFARM_BROKER");
    unsetenv ("PIVFARM_CONF");
    unsetenv ("PIVFARM_AGENT");
    setenv ("PIVFARM_BIN", BIN, 1);
}

static void
s_teardown (void)
{
    tu_rmtree (s_dir);
}

// "<dir>/<name>" in one of 16 rotating slots.
static const char *
s_p (const char *dir, const char *name)
{
    static char slots[16][4096];
    static int next;
    char *buf = slots[next++ % 16];
    int n = snprintf (buf, 4096, "%s/%s", dir, name);
    ck_assert (n > 0 && n < 4096);
    return buf;
}

static void
s_write (const char *path, const char *text)
{
    tu_spit (path, text, strlen (text));
}

// Runs argv (NULL-terminated, argv[0] a path); output in s_out; the status.
static int
s_run (const char *const *argv)
{
    return tu_run ((char *const *) argv, s_out, sizeof s_out, RUN_TIMEOUT);
}

// Runs deploy/pivfarm-deploy HOSTS ACTION [--dry-run] --config CONF.
static int
s_deploy (const char *hosts, const char *action, int dry)
{
    const char *script = s_p (s_top, "deploy/pivfarm-deploy");
    const char *conf = s_p (s_dir, "farm.conf");
    const char *argv[] = {script, hosts, action, "--config", conf, dry ? "--dry-run" : NULL, NULL};
    return s_run (argv);
}

// Runs deploy/pivfarm-deploy HOSTS ACTION --config CONF OPTION (a real run).
static int
s_deploy_with (const char *hosts, const char *action, const char *option)
{
    const char *script = s_p (s_top, "deploy/pivfarm-deploy");
    const char *conf = s_p (s_dir, "farm.conf");
    const char *argv[] = {script, hosts, action, "--config", conf, option, NULL};
    return s_run (argv);
}

// The hosts file and configuration of most tests: a storage server with
// the broker and the watcher, two compute nodes with agents.
static const char *
s_farm (void)
{
    s_write (s_p (s_dir, "farm.conf"), "broker\n"
                                       "    work = tcp://*:5551\n"
                                       "    store = /var/lib/pivfarm/pivfarm.db\n"
                                       "agent\n"
                                       "    broker = tcp://nas1:5551\n"
                                       "    results = /data/results\n"
                                       "watcher\n"
                                       "    root = /data/piv\n");
    const char *hosts = s_p (s_dir, "hosts");
    s_write (hosts, "# the lab\n"
                    "nas1 broker watcher   # beside the storage\n"
                    "\n"
                    "node1\n"
                    "   root@node2 agent\n");
    return hosts;
}

// Fails unless 'got' is 'expected', showing where they part (Check's
// messages are short: whole outputs do not fit).
static void
s_assert_same (const char *got, const char *expected)
{
    size_t at = 0;
    while (got[at] && got[at] == expected[at])
        at++;
    size_t from = at > 120 ? at - 120 : 0;
    ck_assert_msg (got[at] == expected[at], "the output parts at byte %zu:\nexpected ...%.200s\ngot      ...%.200s",
                   at, expected + from, got + from);
}
#define ASSERT_OUT(expected) s_assert_same (s_out, (expected))

// ------------------------------------------------------------------ pivfarm-deploy

START_TEST (a_dry_run_install_prints_the_copies_and_unit_installs_of_every_host)
{
    const char *hosts = s_farm ();
    ck_assert_int_eq (s_deploy (hosts, "install", 1), 0);
    char units[4200], conf[4200], expected[1 << 16];
    snprintf (units, sizeof units, "%s/deploy/systemd", s_top);
    snprintf (conf, sizeof conf, "%s/farm.conf", s_dir);
    const char *useradd = "'id -u pivfarm >/dev/null 2>&1 || useradd --system --user-group "
                          "--no-create-home --home-dir /var/lib/pivfarm --shell "
                          "/usr/sbin/nologin pivfarm'\n";
    // The configuration only where the host has none (issue 28).
    const char *etc = "install -d -m 0755 /etc/pivfarm && { if [ ! -e /etc/pivfarm/pivfarm.conf ]; "
                      "then install -m 0644 pivfarm-deploy/farm.conf /etc/pivfarm/pivfarm.conf; "
                      "elif cmp -s pivfarm-deploy/farm.conf /etc/pivfarm/pivfarm.conf; then echo "
                      "\"kept /etc/pivfarm/pivfarm.conf (the same as the shipped one)\"; else install "
                      "-m 0644 pivfarm-deploy/farm.conf /etc/pivfarm/pivfarm.conf.new && echo \"kept "
                      "/etc/pivfarm/pivfarm.conf as this host has it; the shipped one differs, written "
                      "beside it: compare with diff -u /etc/pivfarm/pivfarm.conf "
                      "/etc/pivfarm/pivfarm.conf.new (--force-config replaces it)\"; fi; }";
    // Before anything is copied to any host: every host's runtime packages
    // and the user's UID:GID.
#define CHECKS(h)                                                                               \
    h ": " SSH " " h " 'missing=; for p in libczmq4 libzmq5 libsqlite3-0 libfftw3-single3 "     \
      "libtiff6 libsystemd0; do dpkg-query -W -f=\\${Status} $p 2>/dev/null | grep -q \"ok "     \
      "installed\" || missing=\"$missing $p\"; done; [ -z \"$missing\" ] || { echo \"missing "   \
      "packages:$missing; run: apt-get install$missing (or PIVFARM_APT=1)\"; exit 1; }'\n" h   \
      ": " SSH " " h " 'if id -u pivfarm >/dev/null 2>&1; then echo \"pivfarm uid=$(id -u "     \
      "pivfarm) gid=$(id -g pivfarm)\"; else echo \"pivfarm absent\"; fi'\n"
    snprintf (
        expected, sizeof expected,
        CHECKS ("nas1") CHECKS ("node1") CHECKS ("root@node2")
        "nas1: " SSH " nas1 'mkdir -p pivfarm-deploy'\n"
        "nas1: " SCP " " BIN "/pivfarm-broker " BIN "/pivfarm-watcher " BIN "/pivctl "
        "%s/pivfarm-broker.service %s/pivfarm-watcher.service %s/pivfarm-backup.service "
        "%s/pivfarm-backup.timer %s nas1:pivfarm-deploy/\n"
        "nas1: " SSH " nas1 %s"
        "nas1: " SSH " nas1 'install -m 0755 pivfarm-deploy/pivfarm-broker "
        "pivfarm-deploy/pivfarm-watcher pivfarm-deploy/pivctl /usr/local/bin/ && %s && "
        "install -m 0644 pivfarm-deploy/pivfarm-broker.service pivfarm-deploy/pivfarm-watcher.service "
        "pivfarm-deploy/pivfarm-backup.service pivfarm-deploy/pivfarm-backup.timer "
        "/etc/systemd/system/ && systemctl daemon-reload'\n"
        "nas1: " SSH " nas1 'systemctl enable pivfarm-broker.service pivfarm-watcher.service'\n"
        "nas1: " SSH " nas1 'rm -rf pivfarm-deploy'\n"
        "node1: " SSH " node1 'mkdir -p pivfarm-deploy'\n"
        "node1: " SCP " " BIN "/pivfarm-agent " BIN "/pivctl %s/pivfarm-agent@.service %s "
        "node1:pivfarm-deploy/\n"
        "node1: " SSH " node1 %s"
        "node1: " SSH " node1 'install -m 0755 pivfarm-deploy/pivfarm-agent pivfarm-deploy/pivctl "
        "/usr/local/bin/ && %s && install -m 0644 pivfarm-deploy/pivfarm-agent@.service "
        "/etc/systemd/system/ && systemctl daemon-reload'\n"
        "node1: " SSH " node1 'systemctl enable pivfarm-agent@pivfarm.service'\n"
        "node1: " SSH " node1 'rm -rf pivfarm-deploy'\n",
        units, units, units, units, conf, useradd, etc, units, conf, useradd, etc);
    // node2 (logged in as root@node2) gets what node1 gets.
    const char *node2 = strstr (s_out, "root@node2: " SSH " root@node2 'mkdir");
    ck_assert_msg (node2 != NULL, "root@node2 is missing:\n%s", s_out);
    char head[1 << 16];
    snprintf (head, sizeof head, "%.*s", (int) (node2 - s_out), s_out);
    s_assert_same (head, expected);
    ck_assert_msg (strstr (node2, "root@node2: " SSH " root@node2 'systemctl enable "
                                  "pivfarm-agent@pivfarm.service'\n")
                       && strstr (node2, " root@node2:pivfarm-deploy/\n"),
                   "%s", node2);
}
END_TEST

START_TEST (a_dry_run_upgrade_backs_up_stops_installs_programs_then_starts_broker_first)
{
    const char *hosts = s_farm ();
    ck_assert_int_eq (s_deploy (hosts, "upgrade", 1), 0);
    // The runtime packages and the user first, as for install; then the
    // steps, each on every host before the next. The backup is named by
    // the time of the run.
    const char *steps = strstr (s_out, "nas1: " SSH " nas1 '/usr/local/bin/pivctl");
    const char *at = steps ? strstr (steps, "/var/lib/pivfarm/backup-") : NULL;
    ck_assert_msg (at && strlen (at) > 40, "no backup step:\n%.3000s", s_out);
    char stamp[16];
    snprintf (stamp, sizeof stamp, "%.15s", at + strlen ("/var/lib/pivfarm/backup-"));
    ck_assert_msg (strstr (s_out, "nas1: " SSH " nas1 'missing=") < steps
                       && strstr (s_out, "root@node2: " SSH " root@node2 'if id -u pivfarm") < steps,
                   "the hosts are not checked first:\n%.3000s", s_out);
#define KEEP(progs)                                                                             \
    "'for p in " progs "; do [ ! -e /usr/local/bin/$p ] || cmp -s pivfarm-deploy/$p "        \
    "/usr/local/bin/$p || cp -p /usr/local/bin/$p /usr/local/bin/$p.prev || exit 1; done && " \
    "install -m 0755"
    char expected[1 << 14];
    snprintf (
        expected, sizeof expected,
        "nas1: " SSH " nas1 '/usr/local/bin/pivctl -c /etc/pivfarm/pivfarm.conf backup "
        "/var/lib/pivfarm/backup-%s.db'\n"
        "node1: " SSH " node1 'systemctl stop pivfarm-agent@pivfarm.service'\n"
        "root@node2: " SSH " root@node2 'systemctl stop pivfarm-agent@pivfarm.service'\n"
        "nas1: " SSH " nas1 'systemctl stop pivfarm-watcher.service'\n"
        "nas1: " SSH " nas1 'systemctl stop pivfarm-broker.service'\n"
        "nas1: " SSH " nas1 'mkdir -p pivfarm-deploy'\n"
        "nas1: " SCP " " BIN "/pivfarm-broker " BIN "/pivfarm-watcher " BIN "/pivctl "
        "nas1:pivfarm-deploy/\n"
        "nas1: " SSH " nas1 " KEEP ("pivfarm-broker pivfarm-watcher pivctl")
        " pivfarm-deploy/pivfarm-broker pivfarm-deploy/pivfarm-watcher pivfarm-deploy/pivctl "
        "/usr/local/bin/'\n"
        "nas1: " SSH " nas1 'rm -rf pivfarm-deploy'\n"
        "node1: " SSH " node1 'mkdir -p pivfarm-deploy'\n"
        "node1: " SCP " " BIN "/pivfarm-agent " BIN "/pivctl node1:pivfarm-deploy/\n"
        "node1: " SSH " node1 " KEEP ("pivfarm-agent pivctl")
        " pivfarm-deploy/pivfarm-agent pivfarm-deploy/pivctl /usr/local/bin/'\n"
        "node1: " SSH " node1 'rm -rf pivfarm-deploy'\n"
        "root@node2: " SSH " root@node2 'mkdir -p pivfarm-deploy'\n"
        "root@node2: " SCP " " BIN "/pivfarm-agent " BIN "/pivctl root@node2:pivfarm-deploy/\n"
        "root@node2: " SSH " root@node2 " KEEP ("pivfarm-agent pivctl")
        " pivfarm-deploy/pivfarm-agent pivfarm-deploy/pivctl /usr/local/bin/'\n"
        "root@node2: " SSH " root@node2 'rm -rf pivfarm-deploy'\n"
        "nas1: " SSH " nas1 'systemctl start pivfarm-broker.service'\n"
        "nas1: " SSH " nas1 'end=$(($(date +%%s) + 60)); until /usr/local/bin/pivctl -c "
        "/etc/pivfarm/pivfarm.conf status >/dev/null 2>&1; do [ $(date +%%s) -lt $end ] || { echo \"the broker does not answer "
        "pivctl status after 60 s: journalctl -u pivfarm-broker\"; exit 1; }; sleep 1; done; echo "
        "\"the broker answers\"'\n"
        "nas1: " SSH " nas1 'systemctl start pivfarm-watcher.service'\n"
        "node1: " SSH " node1 'systemctl start pivfarm-agent@pivfarm.service'\n"
        "root@node2: " SSH " root@node2 'systemctl start pivfarm-agent@pivfarm.service'\n",
        stamp);
#undef KEEP
    s_assert_same (steps, expected);
    // --force-config belongs to install: an upgrade leaves the configuration.
    const char *script = s_p (s_top, "deploy/pivfarm-deploy");
    const char *argv[] = {script, hosts, "upgrade", "--force-config", "--dry-run", NULL};
    ck_assert_int_eq (s_run (argv), 2);
    ck_assert_msg (strstr (s_out, "--force-config is an option of install"), "%.3000s", s_out);
}
END_TEST

START_TEST (a_dry_run_starts_brokers_first_and_stops_them_last)
{
    const char *hosts = s_farm ();
    ck_assert_int_eq (s_deploy (hosts, "start", 1), 0);
    ASSERT_OUT ("nas1: " SSH " nas1 'systemctl start pivfarm-broker.service'\n"
                "nas1: " SSH " nas1 'systemctl start pivfarm-watcher.service'\n"
                "node1: " SSH " node1 'systemctl start pivfarm-agent@pivfarm.service'\n"
                "root@node2: " SSH " root@node2 'systemctl start pivfarm-agent@pivfarm.service'\n");
    ck_assert_int_eq (s_deploy (hosts, "stop", 1), 0);
    ASSERT_OUT ("node1: " SSH " node1 'systemctl stop pivfarm-agent@pivfarm.service'\n"
                "root@node2: " SSH " root@node2 'systemctl stop pivfarm-agent@pivfarm.service'\n"
                "nas1: " SSH " nas1 'systemctl stop pivfarm-watcher.service'\n"
                "nas1: " SSH " nas1 'systemctl stop pivfarm-broker.service'\n");
}
END_TEST

START_TEST (a_dry_run_status_asks_every_host_and_the_broker_for_its_agents)
{
    const char *hosts = s_farm ();
    ck_assert_int_eq (s_deploy (hosts, "status", 1), 0);
    ASSERT_OUT (
        "nas1: " SSH " nas1 'systemctl is-active pivfarm-broker.service pivfarm-watcher.service'\n"
        "nas1: " SSH " nas1 '/usr/local/bin/pivctl -c /etc/pivfarm/pivfarm.conf agents'\n"
        "node1: " SSH " node1 'systemctl is-active pivfarm-agent@pivfarm.service'\n"
        "root@node2: " SSH " root@node2 'systemctl is-active pivfarm-agent@pivfarm.service'\n");
}
END_TEST

START_TEST (ssh_and_sudo_come_from_the_environment)
{
    const char *hosts = s_p (s_dir, "hosts");
    s_farm ();
    s_write (hosts, "node1\n");
    setenv ("PIVFARM_SSH", "ssh -p 2222 -i /k", 1);
    setenv ("PIVFARM_SUDO", "sudo", 1);
    ck_assert_int_eq (s_deploy (hosts, "start", 1), 0);
    ASSERT_OUT ("node1: ssh -p 2222 -i /k node1 'sudo systemctl start "
                "pivfarm-agent@pivfarm.service'\n");
}
END_TEST

START_TEST (each_host_is_reported_and_one_failed_host_fails_the_run)
{
    // A stand-in ssh: node1 is unreachable, every other host answers.
    const char *ssh = s_p (s_dir, "ssh");
    s_write (ssh, "#!/bin/sh\n"
                  "case $1 in node1) echo \"ssh: connect to host node1: No route to host\" >&2; "
                  "exit 255 ;; esac\n"
                  "echo \"active\"\n");
    chmod (ssh, 0755);
    setenv ("PIVFARM_SSH", ssh, 1);
    ck_assert_int_eq (s_deploy (s_farm (), "status", 0), 1);
    const char *lines[] = {"nas1: status ok (broker watcher)\n",
                           "node1: ssh: connect to host node1: No route to host\n",
                           "node1: status FAILED (agent)\n", "root@node2: status ok (agent)\n",
                           "pivfarm-deploy: status failed on: node1\n"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg (strstr (s_out, lines[i]), "no '%s' in:\n%s", lines[i], s_out);
}
END_TEST

START_TEST (bad_hosts_files_and_actions_are_refused_with_status_2)
{
    const char *hosts = s_farm ();
    ck_assert_int_eq (s_deploy (hosts, "restart", 1), 2);
    ck_assert_msg (strstr (s_out, "unknown action 'restart'"), "%s", s_out);
    s_write (hosts, "nas1 broker\nnode1 agnet\n");
    ck_assert_int_eq (s_deploy (hosts, "start", 1), 2);
    ck_assert_msg (strstr (s_out, ":2: unknown role 'agnet' of node1"), "%s", s_out);
    s_write (hosts, "# nobody\n\n");
    ck_assert_int_eq (s_deploy (hosts, "start", 1), 2);
    ck_assert_msg (strstr (s_out, "no host in"), "%s", s_out);
    ck_assert_int_eq (s_deploy (s_p (s_dir, "absent"), "start", 1), 2);
    ck_assert_msg (strstr (s_out, "cannot read the hosts file"), "%s", s_out);
}
END_TEST

START_TEST (install_warns_of_a_configuration_that_only_works_on_one_machine)
{
    const char *hosts = s_farm ();
    s_write (s_p (s_dir, "farm.conf"), "broker\n    work = tcp://127.0.0.1:5551\n"
                                       "    store = ./pivfarm.db\n");
    ck_assert_int_eq (s_deploy (hosts, "install", 1), 0);
    ck_assert_msg (strstr (s_out, "has relative paths") && strstr (s_out, "loopback work endpoint"),
                   "%s", s_out);
    // The watcher's endpoint on the broker's host may be loopback; the
    // agents' (agent/broker, before broker/work) may not.
    s_write (s_p (s_dir, "farm.conf"), "broker\n    work = tcp://*:5551\n"
                                       "watcher\n    broker = tcp://127.0.0.1:5550\n"
                                       "agent\n    broker = tcp://nas1:5551\n");
    ck_assert_int_eq (s_deploy (hosts, "install", 1), 0);
    ck_assert_msg (!strstr (s_out, "loopback work endpoint"), "%s", s_out);
    s_write (s_p (s_dir, "farm.conf"), "broker\n    work = tcp://*:5551\n"
                                       "agent\n    broker = \"tcp://127.0.0.1:5551\"\n");
    ck_assert_int_eq (s_deploy (hosts, "install", 1), 0);
    ck_assert_msg (strstr (s_out, "loopback work endpoint"), "%s", s_out);
}
END_TEST

// ------------------------------------------------------------------ systemd units

static const char *s_units[] = {"pivfarm-broker.service", "pivfarm-watcher.service",
                                "pivfarm-agent@.service"};

START_TEST (every_unit_is_hardened_restarts_on_failure_and_reads_etc_pivfarm)
{
    static const char *keys[] = {"\nUser=pivfarm\n",        "\nNoNewPrivileges=yes\n",
                                 "\nProtectSystem=strict\n", "\nProtectHome=yes\n",
                                 "\nPrivateTmp=yes\n",       "\nRestart=on-failure\n",
                                 "\nKillSignal=SIGTERM\n",   " -c /etc/pivfarm/"};
    for (size_t i = 0; i < sizeof s_units / sizeof s_units[0]; i++) {
        char *text = tu_slurp (s_p (s_p (s_top, "deploy/systemd"), s_units[i]), NULL);
        ck_assert_msg (text != NULL, "cannot read '%s'", s_units[i]);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            ck_assert_msg (strstr (text, keys[k]), "%s lacks '%s'", s_units[i], keys[k]);
        free (text);
    }
    // An agent may take up to a minute to finish its tasks after SIGTERM.
    char *agent = tu_slurp (s_p (s_top, "deploy/systemd/pivfarm-agent@.service"), NULL);
    ck_assert (agent != NULL);
    ck_assert_msg (strstr (agent, "ExecStart=/usr/local/bin/pivfarm-agent -c /etc/pivfarm/%i.conf")
                       && strstr (agent, "\nTimeoutStopSec=90\n"),
                   "%s", agent);
    free (agent);
    // The nightly backup: as hardened, as the user pivfarm, but not
    // restarted at once (its timer runs it again).
    char *backup = tu_slurp (s_p (s_top, "deploy/systemd/pivfarm-backup.service"), NULL);
    ck_assert (backup != NULL);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (strcmp (keys[k], "\nRestart=on-failure\n") != 0)
            ck_assert_msg (strstr (backup, keys[k]), "pivfarm-backup.service lacks '%s'", keys[k]);
    ck_assert (!strstr (backup, "\nRestart="));
    free (backup);
}
END_TEST

START_TEST (the_units_pass_systemd_analyze_verify)
{
    if (access ("/usr/bin/systemd-analyze", X_OK) != 0) {
        fprintf (stderr, "test_deploy: skipped systemd-analyze verify: /usr/bin/systemd-analyze "
                         "is absent (apt-get install systemd)\n");
        return;
    }
    // verify wants the programs to exist and a template to have an instance:
    // copies naming the built programs, the agent as instance 'pivfarm'.
    char cmd[20000];
    snprintf (cmd, sizeof cmd,
              "cd '%s/deploy/systemd' && for f in *.service *.timer; do "
              "sed -e 's|/usr/local/bin/|%s/|' -e 's|/usr/local/libexec/pivfarm/|%s/deploy/systemd/|' "
              "\"$f\" > '%s'/$(echo \"$f\" | sed 's/@\\./@pivfarm./'); "
              "done",
              s_top, s_bin, s_top, s_dir);
    ck_assert_int_eq (system (cmd), 0);
    const char *argv[] = {"/usr/bin/systemd-analyze",
                          "verify",
                          s_p (s_dir, "pivfarm-broker.service"),
                          s_p (s_dir, "pivfarm-watcher.service"),
                          s_p (s_dir, "pivfarm-agent@pivfarm.service"),
                          s_p (s_dir, "pivfarm-tmpfs@pivfarm.service"),
                          s_p (s_dir, "pivfarm-backup.service"),
                          s_p (s_dir, "pivfarm-backup.timer"),
                          NULL};
    int rc = s_run (argv);
    // verify exits 0 even for unknown keys: what it says counts too.
    ck_assert_msg (rc == 0 && s_out[0] == '\0', "systemd-analyze verify (exit %d):\n%s", rc, s_out);
}
END_TEST

// ------------------------------------------------------------------ Slurm

START_TEST (the_slurm_script_runs_one_agent_per_node_with_the_cpus_of_its_node)
{
    // A stand-in srun: prints its options, then runs the task as one node.
    const char *srun = s_p (s_dir, "srun");
    s_write (srun, "#!/bin/sh\n"
                   "while [ \"${1#--}\" != \"$1\" ]; do echo \"srun $1\"; shift; done\n"
                   "exec \"$@\"\n");
    const char *agent = s_p (s_dir, "agent");
    s_write (agent, "#!/bin/sh\nfor a; do echo \"agent [$a]\"; done\n");
    chmod (srun, 0755);
    chmod (agent, 0755);
    char path[8192];
    snprintf (path, sizeof path, "%s:%s", s_dir, getenv ("PATH") ? getenv ("PATH") : "/usr/bin:/bin");
    setenv ("PATH", path, 1);
    setenv ("SLURM_CPUS_ON_NODE", "8", 1);
    setenv ("SLURM_JOB_ID", "4711", 1);
    setenv ("PIVFARM_AGENT", agent, 1);
    const char *conf = s_p (s_dir, "lab farm.conf");  // the script reads it: it must exist
    s_write (conf, "agent\n    threads = 1\n");
    setenv ("PIVFARM_CONF", conf, 1);
    const char *script = s_p (s_top, "deploy/slurm/pivfarm-agents.sbatch");
    const char *argv[] = {script, "tcp://nas1:5551", NULL};
    int rc = s_run (argv);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    char conf_line[4200];
    snprintf (conf_line, sizeof conf_line, "agent [-c]\nagent [%s]\n", conf);
    // Each node checked first; then the agents, with every CPU the job has
    // on their node, a drain within KillWait (no Slurm here: 30 s, less 5),
    // and an id that stays from job to job.
    const char *lines[] = {"agent [--check]\nagent [--broker]\nagent [tcp://nas1:5551]\n",
                           "srun --ntasks-per-node=1\nsrun --whole\n",
                           "agent [--broker]\nagent [tcp://nas1:5551]\n",
                           "agent [--threads]\nagent [0]\n", "agent [--drain-s]\nagent [25]\n",
                           "-slurm]\n", conf_line};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg (strstr (s_out, lines[i]), "no '%s' in:\n%s", lines[i], s_out);
    // The endpoint may come from the environment; without one it refuses.
    const char *bare[] = {script, NULL};
    setenv ("PIVFARM_BROKER", "tcp://nas2:5551", 1);
    ck_assert_int_eq (s_run (bare), 0);
    ck_assert_msg (strstr (s_out, "agent [tcp://nas2:5551]"), "%s", s_out);
    unsetenv ("PIVFARM_BROKER");
    ck_assert_int_eq (s_run (bare), 2);
    ck_assert_msg (strstr (s_out, "no broker endpoint"), "%s", s_out);
    unsetenv ("SLURM_CPUS_ON_NODE");
    unsetenv ("SLURM_JOB_ID");
}
END_TEST

// ------------------------------------------------------------------ the demo's camera

START_TEST (the_camera_writes_numbered_pairs_into_place_at_its_rate_truth_first)
{
    const char *prefix = s_p (s_dir, "exp1/shot");
    char synth[4200];
    snprintf (synth, sizeof synth, "%s/pivfarm-synth", s_bin);
    const char *argv[] = {synth, "--camera", "--rate", "20", "--count", "6", "--size", "64x64",
                          "-o", prefix, NULL};
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    int rc = s_run (argv);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    // Pair i is due i/20 s after the first: the last one 0.25 s after it.
    double took = (double) (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg (took >= 0.25, "6 pairs at 20 pairs/s took only %.3f s", took);
    // Exactly the pairs and the truth: no hidden or temporary file left.
    DIR *dir = opendir (s_p (s_dir, "exp1"));
    ck_assert (dir != NULL);
    int files = 0;
    for (struct dirent *e; (e = readdir (dir)) != NULL;)
        if (strcmp (e->d_name, ".") != 0 && strcmp (e->d_name, "..") != 0) {
            files++;
            ck_assert_msg (e->d_name[0] != '.' && !strstr (e->d_name, "tmp"), "left '%s'",
                           e->d_name);
        }
    closedir (dir);
    ck_assert_int_eq (files, 6 * 2 + 1);
    ck_assert (access (s_p (s_dir, "exp1/shot.flow"), R_OK) == 0);
    ck_assert (access (s_p (s_dir, "exp1/shot_0006_b.tif"), R_OK) == 0);
    // --rate belongs to the camera.
    const char *bad[] = {synth, "--rate", "5", "-o", prefix, NULL};
    ck_assert_int_eq (s_run (bad), 2);
    ck_assert_msg (strstr (s_out, "--rate needs --camera"), "%s", s_out);
}
END_TEST

// Runs 'make install PREFIX=prefix DESTDIR=<s_dir>/<dest> extra' in the tree;
// its status, its output in s_out.
static int
s_make_install (const char *prefix, const char *dest, const char *extra)
{
    char cmd[16384];
    snprintf (cmd, sizeof cmd,
              "make --no-print-directory -s -C '%s' install PREFIX=%s DESTDIR='%s/%s' %s 2>&1",
              s_top, prefix, s_dir, dest, extra);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return tu_run ((char *const *) argv, s_out, sizeof s_out, 280);
}

// Fails unless 'dir' (an absolute path as installed) is one of 'read' (the
// directories systemd or polkit reads, NULL-terminated), and the file
// '<root><dir>/<name>' is there.
static void
s_assert_read_from (const char *root, const char *dir, const char *name, const char *const *read,
                    const char *reader)
{
    int found = 0;
    for (int i = 0; read[i] && !found; i++)
        found = strcmp (read[i], dir) == 0;
    ck_assert_msg (found, "%s reads nothing from %s (%s)", reader, dir, name);
    char path[8400];
    snprintf (path, sizeof path, "%s%s/%s", root, dir, name);
    ck_assert_msg (access (path, F_OK) == 0, "make install left out %s/%s", dir, name);
}

// What systemd and polkit read: the unit directories of 'systemd-analyze
// unit-paths' (systemd 252, Debian 12, less /run), the generator directories
// of systemd.generator(7) (/lib is /usr/lib on a merged /usr) and polkit(8)'s
// rules directories.
static const char *const s_unit_dirs[] = {"/etc/systemd/system", "/usr/local/lib/systemd/system",
                                          "/usr/lib/systemd/system", "/lib/systemd/system", NULL};
static const char *const s_generator_dirs[] = {
    "/etc/systemd/system-generators", "/usr/local/lib/systemd/system-generators",
    "/usr/lib/systemd/system-generators", "/lib/systemd/system-generators", NULL};
static const char *const s_polkit_dirs[] = {"/etc/polkit-1/rules.d", "/usr/share/polkit-1/rules.d",
                                            NULL};

START_TEST (make_install_puts_units_generator_and_polkit_rule_where_systemd_and_polkit_read_them)
{
    // This host's systemd agrees with the list above, where it is there.
    if (access ("/usr/bin/systemd-analyze", X_OK) == 0) {
        const char *argv[] = {"/usr/bin/systemd-analyze", "unit-paths", NULL};
        ck_assert_int_eq (s_run (argv), 0);
        for (int i = 0; i < 3; i++)
            ck_assert_msg (strstr (s_out, s_unit_dirs[i]), "systemd reads no units from %s:\n%s",
                           s_unit_dirs[i], s_out);
    }
    struct {
        const char *prefix, *dest, *unitdir, *gendir, *polkitdir;
    } layouts[] = {
        {"/usr/local", "local", "/usr/local/lib/systemd/system",
         "/usr/local/lib/systemd/system-generators", "/etc/polkit-1/rules.d"},
        {"/usr", "usr", "/usr/lib/systemd/system", "/usr/lib/systemd/system-generators",
         "/usr/share/polkit-1/rules.d"},
    };
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        const char *prefix = layouts[l].prefix;
        ck_assert_msg (s_make_install (prefix, layouts[l].dest, "") == 0,
                       "make install PREFIX=%s failed:\n%.2000s", prefix, s_out);
        char root[4200], dir[4400];
        snprintf (root, sizeof root, "%s/%s", s_dir, layouts[l].dest);
        const char *units[] = {"pivfarm-broker.service", "pivfarm-watcher.service",
                               "pivfarm-agent@.service", "pivfarm-tmpfs@.service",
                               "pivfarm-backup.service", "pivfarm-backup.timer", NULL};
        for (int i = 0; units[i]; i++)
            s_assert_read_from (root, layouts[l].unitdir, units[i], s_unit_dirs, "systemd");
        s_assert_read_from (root, layouts[l].gendir, "pivfarm-generator", s_generator_dirs,
                            "systemd");
        s_assert_read_from (root, layouts[l].polkitdir, "pivfarm.rules", s_polkit_dirs, "polkit");
        // systemctl finds the units in the tree by its own unit paths.
        if (access ("/bin/systemctl", X_OK) == 0) {
            const char *list[] = {"/bin/systemctl", "--root", root, "list-unit-files", "pivfarm*",
                                  "--no-legend", NULL};
            s_run (list);
            for (int i = 0; units[i]; i++)
                ck_assert_msg (strstr (s_out, units[i]),
                               "systemctl --root finds no %s of PREFIX=%s:\n%.2000s", units[i],
                               prefix, s_out);
        }
        // The units run the programs where PREFIX put them, and those are there.
        snprintf (dir, sizeof dir, "%s%s", root, layouts[l].unitdir);
        const char *execs[][2] = {{"pivfarm-broker.service", "bin/pivfarm-broker -c /etc/pivfarm/pivfarm.conf"},
                                  {"pivfarm-watcher.service", "bin/pivfarm-watcher -c /etc/pivfarm/pivfarm.conf"},
                                  {"pivfarm-agent@.service", "bin/pivfarm-agent -c /etc/pivfarm/%i.conf"},
                                  {"pivfarm-tmpfs@.service", "libexec/pivfarm/pivfarm-mount --as-root %I"}};
        for (int i = 0; i < 4; i++) {
            char *unit = tu_slurp (s_p (dir, execs[i][0]), NULL);
            ck_assert_ptr_nonnull (unit);
            char want[512], program[4800];
            snprintf (want, sizeof want, "ExecStart=%s/%s\n", prefix, execs[i][1]);
            ck_assert_msg (strstr (unit, want), "%s has no line '%s':\n%s", execs[i][0], want, unit);
            snprintf (program, sizeof program, "%s%s/%s", root, prefix, execs[i][1]);
            *strchr (program + strlen (root), ' ') = '\0';
            ck_assert_msg (access (program, X_OK) == 0, "%s runs %s, which make install left out",
                           execs[i][0], program + strlen (root));
            free (unit);
        }
        // The status page, the docs, the example configuration, the alert
        // rules, and the man pages where man looks (share/man/manN).
        const char *files[] = {"bin/pivctl", "libexec/pivfarm/pivfarm.cgi",
                               "share/doc/pivfarm/README.md", "share/doc/pivfarm/deploy.md",
                               "share/doc/pivfarm/storage.md", "share/doc/pivfarm/pivfarm.conf.example",
                               "share/doc/pivfarm/pivfarm.rules.yml",
                               "share/man/man8/pivfarm-broker.8", "share/man/man8/pivfarm-watcher.8",
                               "share/man/man8/pivfarm-agent.8", "share/man/man1/pivctl.1",
                               "share/man/man1/pivfarm-piv.1", "share/man/man1/pivfarm-synth.1",
                               "share/man/man1/pivfarm-calib.1", NULL};
        for (int i = 0; files[i]; i++) {
            snprintf (dir, sizeof dir, "%s%s/%s", root, prefix, files[i]);
            ck_assert_msg (access (dir, F_OK) == 0, "make install PREFIX=%s left out %s/%s", prefix,
                           prefix, files[i]);
        }
        snprintf (dir, sizeof dir, "%s%s/share/man", root, prefix);
        const char *man[] = {"/usr/bin/man", "-M", dir, "8", "pivfarm-broker", NULL};
        if (access (man[0], X_OK) == 0) {
            ck_assert_msg (s_run (man) == 0, "man -M %s 8 pivfarm-broker: %s", dir, s_out);
            ck_assert_msg (strstr (s_out, "SIGHUP"), "man 8 pivfarm-broker shows no SIGHUP:\n%.2000s", s_out);
            // ... and sends the reader to the docs where this install put them.
            char example[4300];
            snprintf (example, sizeof example, " %s/share/doc/pivfarm/pivfarm.conf.example", prefix);
            ck_assert_msg (strstr (s_out, example), "man 8 pivfarm-broker names no%s:\n%.2000s",
                           example, s_out);
        }
    }
    // Any other PREFIX: one line saying what to set, and nothing installed.
    ck_assert_int_ne (s_make_install ("/opt/pivfarm", "opt", ""), 0);
    ck_assert_msg (strstr (s_out, "make install: PREFIX=/opt/pivfarm: systemd reads no units in "
                                  "/opt/pivfarm/lib/systemd/system")
                       && strstr (s_out, "set UNITDIR=/etc/systemd/system GENDIR=/etc/systemd/system-generators")
                       && strstr (s_out, "nothing installed\n")
                       && strstr (s_out, "nothing installed\n") + 18 == strchr (s_out, '\n') + 1,
                   "%.2000s", s_out);
    ck_assert_int_eq (access (s_p (s_dir, "opt"), F_OK), -1);
    // ... which then works.
    ck_assert_msg (s_make_install ("/opt/pivfarm", "opt",
                                   "UNITDIR=/etc/systemd/system GENDIR=/etc/systemd/system-generators")
                       == 0,
                   "%.2000s", s_out);
    char *unit = tu_slurp (s_p (s_dir, "opt/etc/systemd/system/pivfarm-broker.service"), NULL);
    ck_assert_msg (unit && strstr (unit, "ExecStart=/opt/pivfarm/bin/pivfarm-broker "), "%s",
                   unit ? unit : "no unit");
    free (unit);
    ck_assert (access (s_p (s_dir, "opt/etc/polkit-1/rules.d/pivfarm.rules"), F_OK) == 0);
    // make uninstall takes back every file install put, and leaves the
    // host's own configuration.
    char cmd[16384];
    mkdir (s_p (s_dir, "usr/etc"), 0755);
    mkdir (s_p (s_dir, "usr/etc/pivfarm"), 0755);
    tu_spit (s_p (s_dir, "usr/etc/pivfarm/pivfarm.conf"), "# this host's\n", 14);
    snprintf (cmd, sizeof cmd,
              "make --no-print-directory -s -C '%s' uninstall PREFIX=/usr DESTDIR='%s/usr' 2>&1 && "
              "find '%s/usr' -type f",
              s_top, s_dir, s_dir);
    const char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    ck_assert_msg (tu_run ((char *const *) sh, s_out, sizeof s_out, 60) == 0, "%s", s_out);
    char kept[4300];
    snprintf (kept, sizeof kept, "%s/usr/etc/pivfarm/pivfarm.conf\n", s_dir);
    ck_assert_msg (strstr (s_out, "/etc/pivfarm, the store and the results are left")
                       && strstr (s_out, kept)
                       && strlen (strstr (s_out, kept)) == strlen (kept),
                   "make uninstall left more than the host's configuration:\n%.3000s", s_out);
}
END_TEST

// The long options ('--name') of a program's --help, each once, in 'opts'
// (NUL-separated, an empty string last).
static void
s_long_options (const char *help, char *opts, size_t len)
{
    size_t used = 0;
    for (const char *p = help; (p = strstr (p, "--")); p += 2) {
        if (p > help && (isalnum ((unsigned char) p[-1]) || p[-1] == '-'))
            continue;
        size_t n = 2;
        while (isalnum ((unsigned char) p[n]) || (p[n] == '-' && isalnum ((unsigned char) p[n + 1])))
            n++;
        if (n == 2)
            continue;
        int seen = 0;
        for (const char *o = opts; o < opts + used && !seen; o += strlen (o) + 1)
            seen = strlen (o) == n && strncmp (o, p, n) == 0;
        if (!seen && used + n + 2 < len) {
            memcpy (opts + used, p, n);
            opts[used + n] = '\0';
            used += n + 1;
        }
    }
    opts[used] = '\0';
}

START_TEST (every_man_page_has_each_long_option_of_its_help_and_renders_without_warnings)
{
    if (access ("/usr/bin/groff", X_OK) != 0) {
        fprintf (stderr, "test_deploy: skipped the man pages: groff is absent (apt-get install groff)\n");
        return;
    }
    // Each program of bin/ but the status page, and pivfarm-deploy; a second
    // --help where a mode has its own.
    struct {
        const char *program, *page, *help_arg;
    } pages[] = {
        {"bin/pivfarm-broker", "pivfarm-broker.8", NULL},
        {"bin/pivfarm-watcher", "pivfarm-watcher.8", NULL},
        {"bin/pivfarm-agent", "pivfarm-agent.8", NULL},
        {"bin/pivctl", "pivctl.1", NULL},
        {"bin/pivfarm-piv", "pivfarm-piv.1", NULL},
        {"bin/pivfarm-synth", "pivfarm-synth.1", NULL},
        {"bin/pivfarm-calib", "pivfarm-calib.1", NULL},
        {"bin/pivfarm-calib", "pivfarm-calib.1", "--self-calibrate"},
        {"deploy/pivfarm-deploy", "pivfarm-deploy.8", NULL},
    };
    int daemons = 3;
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        const char *page = s_p (s_top, s_p ("doc/man", pages[i].page));
        const char *program = s_p (s_top, pages[i].program);
        const char *help[] = {program, pages[i].help_arg ? pages[i].help_arg : "--help",
                              pages[i].help_arg ? "--help" : NULL, NULL};
        ck_assert_msg (s_run (help) == 0, "%s --help: %.2000s", program, s_out);
        static char opts[1 << 14];
        s_long_options (s_out, opts, sizeof opts);
        ck_assert_msg (*opts, "%s --help printed no long option", program);
        // The page as man shows it, on lines long enough never to break a word.
        const char *groff[] = {"/usr/bin/groff", "-man", "-Tutf8", "-rLL=2000n", "-P-cbou", page, NULL};
        ck_assert_msg (s_run (groff) == 0, "%s: %.2000s", page, s_out);
        for (const char *o = opts; *o; o += strlen (o) + 1)
            ck_assert_msg (strstr (s_out, o), "%s lacks %s, which %s --help prints", pages[i].page, o,
                           pages[i].program);
        ck_assert_msg (strstr (s_out, "NAME") && strstr (s_out, "SYNOPSIS") && strstr (s_out, "DESCRIPTION")
                           && strstr (s_out, "OPTIONS") && strstr (s_out, "EXIT STATUS")
                           && strstr (s_out, "SEE ALSO"),
                       "%s lacks a section:\n%.2000s", pages[i].page, s_out);
        ck_assert_msg (!strstr (s_out, "conf/pivfarm.conf") && !strstr (s_out, "/root/"),
                       "%s names a file of the source tree or of root:\n%.2000s", pages[i].page,
                       strstr (s_out, "conf/pivfarm.conf") ? strstr (s_out, "conf/pivfarm.conf") : strstr (s_out, "/root/"));
        if ((int) i < daemons || strcmp (pages[i].page, "pivctl.1") == 0)
            ck_assert_msg (strstr (s_out, "FILES") && strstr (s_out, "/etc/pivfarm/pivfarm.conf"),
                           "%s names no /etc/pivfarm/pivfarm.conf in FILES", pages[i].page);
        if ((int) i < daemons)
            ck_assert_msg (strstr (s_out, "SIGNALS") && strstr (s_out, "SIGHUP") && strstr (s_out, "SIGTERM"),
                           "%s has no SIGNALS", pages[i].page);
        // No warning from groff (all of them) nor from man.
        char cmd[9000];
        snprintf (cmd, sizeof cmd,
                  "groff -ww -z -man '%s' 2>&1; command -v man >/dev/null || exit 0; "
                  "man --warnings -l -Tutf8 '%s' 2>&1 >/dev/null",
                  page, page);
        const char *sh[] = {"/bin/sh", "-c", cmd, NULL};
        s_run (sh);
        ck_assert_msg (!*s_out, "%s: warnings:\n%.2000s", pages[i].page, s_out);
    }
}
END_TEST

START_TEST (the_generator_makes_units_wait_for_their_mounts_and_write_their_paths)
{
    const char *conf =
             "broker\n    store = /var/lib/pivfarm/pivfarm.db\nwatcher\n    root = /nas/piv\n"
             "agent\n    results = /nas/results\nstorage\n    archive_dir = \"/archive/piv\"\n";
    tu_spit (s_p (s_dir, "farm.conf"), conf, strlen (conf));
    const char *gen = s_p (s_top, "deploy/systemd/pivfarm-generator");
    const char *argv[] = {gen, s_p (s_dir, "out"), s_p (s_dir, "farm.conf"), NULL};
    ck_assert_msg (s_run (argv) == 0, "%s", s_out);
    char *broker = tu_slurp (s_p (s_dir, "out/pivfarm-broker.service.d/pivfarm-paths.conf"), NULL);
    char *watcher = tu_slurp (s_p (s_dir, "out/pivfarm-watcher.service.d/pivfarm-paths.conf"), NULL);
    char *agent = tu_slurp (s_p (s_dir, "out/pivfarm-agent@.service.d/pivfarm-paths.conf"), NULL);
    ck_assert_ptr_nonnull (broker);
    ck_assert_ptr_nonnull (watcher);
    ck_assert_ptr_nonnull (agent);
    ck_assert_msg (strstr (broker, "RequiresMountsFor=/var/lib/pivfarm /nas/piv /archive/piv\n")
                       && strstr (broker, "ReadWritePaths=/var/lib/pivfarm /nas/piv /archive/piv\n"),
                   "%s", broker);
    ck_assert_msg (strstr (watcher, "RequiresMountsFor=/nas/piv\n")
                       && !strstr (watcher, "ReadWritePaths"),
                   "%s", watcher);
    ck_assert_msg (strstr (agent, "RequiresMountsFor=/nas/results\n")
                       && strstr (agent, "ReadWritePaths=/nas/results\n"),
                   "%s", agent);
    free (broker);
    free (watcher);
    free (agent);
}
END_TEST

// ---------------------------------------------------------------------------
// sd_notify and SIGHUP (issue 14): a real NOTIFY_SOCKET, the real broker.

// A unix datagram socket bound at <dir>/notify, exported as NOTIFY_SOCKET
// for the programs the test starts. Its descriptor.
static int
s_notify_socket (const char *dir)
{
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge (fd, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf (addr.sun_path, sizeof addr.sun_path, "%s/notify", dir);
    ck_assert_msg (bind (fd, (struct sockaddr *) &addr, sizeof addr) == 0, "cannot bind %s",
                   addr.sun_path);
    setenv ("NOTIFY_SOCKET", addr.sun_path, 1);
    return fd;
}

// Waits up to timeout_ms for a datagram holding 'want' (each datagram seen
// is appended to 'seen', separated by '|'); 1 if it came.
static int
s_notified (int fd, const char *want, char *seen, size_t size, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 100) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll (&p, 1, 100) != 1)
            continue;
        char msg[1024];
        ssize_t n = recv (fd, msg, sizeof msg - 1, 0);
        if (n <= 0)
            continue;
        msg[n] = 0;
        snprintf (seen + strlen (seen), size - strlen (seen), "%s|", msg);
        if (strstr (msg, want))
            return 1;
    }
    return 0;
}

START_TEST (the_broker_says_ready_once_its_store_is_open_and_its_sockets_bound)
{
    setenv ("PIVFARM_BIN", s_bin, 1);
    tu_farm_t farm;
    tu_farm_init (&farm);
    tu_farm_conf (&farm, "noop", 1, "32", "");
    int fd = s_notify_socket (farm.dir);
    farm.broker = tu_farm_start (&farm, "pivfarm-broker", "broker.log", NULL, NULL);
    char seen[4096] = "";
    int ready = s_notified (fd, "READY=1", seen, sizeof seen, 20000);
    unsetenv ("NOTIFY_SOCKET");
    // At READY=1 the store exists and the control socket answers at once.
    int store = access (tu_path (farm.dir, "farm.db"), F_OK) == 0;
    char *argv[] = {(char *) tu_bin ("pivctl"), "-c", farm.conf, "status", NULL};
    char out[8192];
    int rc = tu_run (argv, out, sizeof out, RUN_TIMEOUT);
    int stopped = tu_stop (farm.broker, SIGTERM, 10);
    farm.broker = 0;
    int stopping = s_notified (fd, "STOPPING=1", seen, sizeof seen, 5000);
    close (fd);
    tu_farm_release (&farm);
    ck_assert_msg (ready, "no READY=1 from the broker; got '%s'", seen);
    ck_assert_msg (store, "READY=1 before the store was created");
    ck_assert_msg (rc == 0, "pivctl status right after READY=1 failed (%d): %s", rc, out);
    ck_assert_int_eq (stopped, 0);
    ck_assert_msg (stopping, "no STOPPING=1 on SIGTERM; got '%s'", seen);
}
END_TEST

START_TEST (sighup_reloads_the_log_level_and_policy_and_names_what_needs_a_restart)
{
    setenv ("PIVFARM_BIN", s_bin, 1);
    tu_farm_t farm;
    tu_farm_init (&farm);
    tu_farm_conf (&farm, "noop", 1, "32", "");
    int fd = s_notify_socket (farm.dir);
    tu_farm_start_broker (&farm);
    char seen[4096] = "";
    int ready = s_notified (fd, "READY=1", seen, sizeof seen, 20000);
    // A more talkative level, a policy default, and a key read at start only.
    tu_farm_conf_replace (&farm, "    liveness = 3\n",
                          "    liveness = 3\n    max_attempts = 7\n");
    tu_farm_conf_replace (&farm, "    heartbeat_ms = 200\n", "    heartbeat_ms = 300\n");
    FILE *f = fopen (farm.conf, "a");
    ck_assert_ptr_nonnull (f);
    fputs ("log\n    level = info\n", f);
    fclose (f);
    seen[0] = 0;
    kill (farm.broker, SIGHUP);
    int reloading = s_notified (fd, "RELOADING=1", seen, sizeof seen, 10000);
    int again = s_notified (fd, "READY=1", seen, sizeof seen, 10000);
    int applied = tu_farm_log_has (&farm, "broker.log",
                                   "reload: applied log/level, broker/max_attempts", 5000);
    int level = tu_farm_log_has (&farm, "broker.log", "reload: log level info (was notice)", 100);
    int restart = tu_farm_log_has (&farm, "broker.log",
                                   "reload: broker/heartbeat_ms changed: read at start only, takes "
                                   "effect after a restart",
                                   100);
    // Info lines now appear: each change by an operator is logged at info.
    char *argv[] = {(char *) tu_bin ("pivctl"), "-c", farm.conf, "rate", "max", NULL};
    char out[8192];
    tu_run (argv, out, sizeof out, RUN_TIMEOUT);
    int info = tu_farm_log_has (&farm, "broker.log", " info: control: ", 10000);
    int alive = tu_alive (farm.broker);
    unsetenv ("NOTIFY_SOCKET");
    close (fd);
    char *log = tu_slurp (tu_path (farm.dir, "broker.log"), NULL);
    char shown[4096];
    snprintf (shown, sizeof shown, "%s", log ? log : "(no log)");
    free (log);
    tu_farm_release (&farm);
    ck_assert_msg (ready, "no READY=1 at start; got '%s'", seen);
    ck_assert_msg (alive, "SIGHUP stopped the broker:\n%s", shown);
    ck_assert_msg (reloading && again, "expected RELOADING=1 then READY=1, got '%s'", seen);
    ck_assert_msg (applied && level, "the reload did not apply the level and policy:\n%s", shown);
    ck_assert_msg (restart, "the reload did not name heartbeat_ms as needing a restart:\n%s",
                   shown);
    ck_assert_msg (info, "no info line after the level became info:\n%s", shown);
    // doc/deploy.md (step 9) quotes these lines as the broker writes them.
    const char *quoted[] = {"reload: log level info (was notice)",
                            "reload: applied log/level, broker/max_attempts",
                            "reload: broker/heartbeat_ms changed: read at start only, takes effect "
                            "after a restart (systemctl restart pivfarm-broker)",
                            NULL};
    char *doc = tu_doc ("doc/deploy.md");
    for (int i = 0; quoted[i]; i++) {
        ck_assert_msg (strstr (shown, quoted[i]), "the broker did not log '%s':\n%s", quoted[i], shown);
        ck_assert_msg (strstr (doc, quoted[i]), "doc/deploy.md does not quote '%s'", quoted[i]);
    }
    free (doc);
}
END_TEST

// ------------------------------------------------------------------ the docs, run as written

// Process groups started by the docs tests: killed at exit, even after a
// failed assertion (Check's child exits through exit()).
static int s_groups[16];
static int s_ngroups;

static void
s_kill_groups (void)
{
    for (int i = 0; i < s_ngroups; i++)
        if (s_groups[i] > 0) {
            kill (-s_groups[i], SIGKILL);
            waitpid (s_groups[i], NULL, 0);
            s_groups[i] = 0;
        }
}

// Runs 'command' with sh in 'tree' in a process group of its own, output
// appended to 'log'; returns its pid (= its group).
static int
s_start_group (const char *tree, const char *command, const char *log)
{
    if (s_ngroups == 0)
        atexit (s_kill_groups);
    ck_assert (s_ngroups < 16);
    pid_t pid = fork ();
    ck_assert (pid >= 0);
    if (pid == 0) {
        setpgid (0, 0);
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        FILE *out = fopen (log, "a");
        if (!out || chdir (tree) != 0)
            _exit (127);
        dup2 (fileno (out), 1);
        dup2 (fileno (out), 2);
        execl ("/bin/sh", "sh", "-c", command, (char *) NULL);
        _exit (127);
    }
    setpgid (pid, pid);
    s_groups[s_ngroups++] = pid;
    return pid;
}

// Sends 'sig' to the group of pid and reaps pid (SIGKILL after 20 s).
// Returns pid's exit status, 128 + signal if killed.
static int
s_stop_group (int pid, int sig)
{
    kill (-pid, sig);
    int status = 0;
    for (int i = 0; i < 2000; i++) {
        if (waitpid (pid, &status, WNOHANG) == pid)
            goto reaped;
        usleep (10000);
    }
    kill (-pid, SIGKILL);
    waitpid (pid, &status, 0);
reaped:
    kill (-pid, SIGKILL);  // whatever it left in its group
    for (int i = 0; i < s_ngroups; i++)
        if (s_groups[i] == pid)
            s_groups[i] = 0;
    return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

// Runs 'command' with sh in 'tree' (bin/ on the PATH); output in s_out.
static int
s_sh (const char *tree, const char *command)
{
    char script[8192];
    snprintf (script, sizeof script, "cd '%s' && PATH=\"$PWD/bin:$PATH\" && %s", tree, command);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    return s_run (argv);
}

// A fresh tree in <s_dir>/tree: the files git tracks, as they are in the
// working tree (nothing a run left: no store, no results), the built bin/,
// and the configuration's four endpoints on ipc:// (no port of another run
// taken). Returns its path.
static const char *
s_fresh_tree (void)
{
    const char *tree = s_p (s_dir, "tree");
    char cmd[16384];
    snprintf (cmd, sizeof cmd,
              "set -e; mkdir -p '%s'; cd '%s'; "
              // A git checkout: its tracked files; a copy without .git (make
              // check-asan's tree): every file but what the build makes.
              "if [ \"$(git rev-parse --show-toplevel 2>/dev/null)\" = \"$(pwd -P)\" ]; "
              "then git ls-files -z; else "
              "find . \\( -path ./build -o -path ./bin -o -path './build-*' -o -path ./run \\) "
              "-prune -o -type f -print0; fi | "
              "tar --null --ignore-failed-read -T - -cf - | tar -C '%s' -xf -; "
              "cp -a '%s' '%s/bin'; cd '%s/conf'; "
              "sed -i -e 's|tcp://127.0.0.1:5550|ipc://%s/run/ingest|' "
              "-e 's|tcp://127.0.0.1:5551|ipc://%s/run/work|' "
              "-e 's|tcp://127.0.0.1:5552|ipc://%s/run/control|' "
              "-e 's|tcp://127.0.0.1:5553|ipc://%s/run/publish|' pivfarm.conf; "
              "mkdir -p '%s/run'; grep -q 'ipc://' pivfarm.conf",
              tree, s_top, tree, s_bin, tree, tree, tree, tree, tree, tree, tree);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int rc = s_run (argv);
    ck_assert_msg (rc == 0, "cannot make a fresh tree (the files of '%s'): %s", s_top, s_out);
    ck_assert_msg (access (s_p (tree, "conf/pivfarm.db"), F_OK) != 0, "the tree has a store");
    return tree;
}

// The lines of the first ``` block after the line 'heading' of 'doc'
// (malloc'd array of malloc'd lines, NULL-terminated).
static char **
s_block (const char *doc, const char *heading)
{
    char *text = tu_slurp (doc, NULL);
    ck_assert_msg (text != NULL, "cannot read '%s'", doc);
    char *at = strstr (text, heading);
    ck_assert_msg (at != NULL, "'%s' has no '%s'", doc, heading);
    char *start = strstr (at, "```\n");
    ck_assert (start != NULL);
    start += 4;
    char *end = strstr (start, "```");
    ck_assert (end != NULL);
    *end = '\0';
    char **lines = calloc (256, sizeof *lines);
    int n = 0;
    for (char *save, *l = strtok_r (start, "\n", &save); l && n < 255;
         l = strtok_r (NULL, "\n", &save))
        lines[n++] = strdup (l);
    free (text);
    return lines;
}

static void
s_free_lines (char **lines)
{
    for (int i = 0; lines[i]; i++)
        free (lines[i]);
    free (lines);
}

// The command of a README line: without its trailing '# comment' and
// blanks; *background set when it ends with '&' (removed).
static void
s_command_of (const char *line, char *cmd, size_t len, int *background)
{
    snprintf (cmd, len, "%s", line);
    char *hash = strstr (cmd, " #");
    if (hash)
        *hash = '\0';
    size_t n = strlen (cmd);
    while (n && cmd[n - 1] == ' ')
        cmd[--n] = '\0';
    *background = n && cmd[n - 1] == '&';
    if (*background) {
        cmd[--n] = '\0';
        while (n && cmd[n - 1] == ' ')
            cmd[--n] = '\0';
    }
}

// A line's form: every number is '#' ("3 min 20 s" is "# s"), blanks
// collapse. Into out.
static void
s_form (const char *line, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = line; *p && o + 2 < len;) {
        if ((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9' && o && out[o - 1] == '#')) {
            if (!o || out[o - 1] != '#')
                out[o++] = '#';
            p++;
        }
        else if (*p == ' ' || *p == '\t') {
            if (o && out[o - 1] != ' ')
                out[o++] = ' ';
            p++;
        }
        else
            out[o++] = *p++;
    }
    while (o && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
    char *m;
    while ((m = strstr (out, "# min # s")) || (m = strstr (out, "# h # min")))
        memmove (m + 3, m + 9, strlen (m + 9) + 1), m[2] = 's';
}

// 1 if some line of 'output' has the form of 'expected'.
static int
s_has_form (const char *output, const char *expected)
{
    char want[1024], got[1024];
    s_form (expected, want, sizeof want);
    char *copy = strdup (output);
    int found = 0;
    for (char *save, *l = strtok_r (copy, "\n\r", &save); l && !found;
         l = strtok_r (NULL, "\n\r", &save)) {
        s_form (l, got, sizeof got);
        found = strcmp (got, want) == 0;
    }
    free (copy);
    return found;
}

// A free TCP port on 127.0.0.1 (free when asked).
static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert (fd >= 0 && bind (fd, (struct sockaddr *) &a, sizeof a) == 0
               && getsockname (fd, (struct sockaddr *) &a, &len) == 0);
    close (fd);
    return ntohs (a.sin_port);
}

// GETs the page of the dashboard on 'port' (waiting up to 20 s for it to
// listen) into s_out as "STATUS\nBODY"; the HTTP status, 0 if none.
static int
s_get_page (int port)
{
    char cmd[512];
    snprintf (cmd, sizeof cmd,
              "for i in $(seq 100); do s=$(curl -s -o /tmp/.pivfarm-page.$$ -w '%%{http_code}' "
              "http://127.0.0.1:%d/) && [ \"$s\" != 000 ] && break; sleep 0.2; done; "
              "echo \"$s\"; cat /tmp/.pivfarm-page.$$; rm -f /tmp/.pivfarm-page.$$",
              port);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    s_run (argv);
    return atoi (s_out);
}

// 'make dashboard' as the README writes it, in 'tree', on 'port': -o
// programs, because the fresh tree's programs are the built ones (copied),
// not to be rebuilt from its sources.
static int
s_start_dashboard (const char *tree, int port)
{
    char cmd[256];
    snprintf (cmd, sizeof cmd, "PIVFARM_DASHBOARD_PORT=%d exec make -o programs dashboard", port);
    return s_start_group (tree, cmd, s_p (s_dir, "dashboard.log"));
}

START_TEST (the_dashboard_of_a_fresh_tree_shows_no_store_yet_rather_than_503)
{
    if (access ("/usr/bin/curl", X_OK) != 0 || system ("command -v lighttpd >/dev/null 2>&1 || test -x /usr/sbin/lighttpd") != 0) {
        printf ("skipped: no curl or no lighttpd\n");
        return;
    }
    const char *tree = s_fresh_tree ();
    int port = s_free_port ();
    int dash = s_start_dashboard (tree, port);
    int status = s_get_page (port);
    ck_assert_msg (status == 200, "the page answered %d: %.2000s", status, s_out);
    ck_assert_msg (strstr (s_out, "No store yet") && strstr (s_out, "broker-unreachable"),
                   "no banner: %.3000s", s_out);
    s_stop_group (dash, SIGTERM);
}
END_TEST

START_TEST (the_readme_and_pivctl_md_commands_run_as_written_on_a_fresh_tree)
{
    const char *tree = s_fresh_tree ();
    char cmd[4096];
    int background;

    // The quick tour, line by line.
    char **tour = s_block (s_p (tree, "README.md"), "## A quick tour");
    for (int i = 0; tour[i]; i++) {
        s_command_of (tour[i], cmd, sizeof cmd, &background);
        ck_assert_msg (!background, "%s", cmd);
        int rc = s_sh (tree, cmd);
        ck_assert_msg (rc == 0, "README: '%s' exited %d: %s", cmd, rc, s_out);
    }
    s_free_lines (tour);
    ck_assert (access (s_p (tree, "run/p.txt"), R_OK) == 0);

    // Running the farm: '&' lines in the background, 'make dashboard' too
    // (it serves until stopped), the rest in the foreground.
    int pids[8], npids = 0, port = s_free_port (), dash = 0;
    char **farm = s_block (s_p (tree, "README.md"), "## Running the farm");
    for (int i = 0; farm[i]; i++) {
        s_command_of (farm[i], cmd, sizeof cmd, &background);
        if (strcmp (cmd, "make dashboard") == 0) {
            dash = s_start_dashboard (tree, port);
            int status = s_get_page (port);
            ck_assert_msg (status == 200 && strstr (s_out, "broker up"),
                           "README: the page answered %d: %.2000s", status, s_out);
            continue;
        }
        if (background) {
            char exec_cmd[4200];
            snprintf (exec_cmd, sizeof exec_cmd, "exec %s", cmd);
            ck_assert (npids < 8);
            pids[npids++] = s_start_group (tree, exec_cmd, s_p (s_dir, "farm.log"));
            usleep (300000);
            continue;
        }
        int rc = s_sh (tree, cmd);
        char *log = tu_slurp (s_p (s_dir, "farm.log"), NULL);
        ck_assert_msg (rc == 0, "README: '%s' exited %d: %s\nthe farm's log:\n%s", cmd, rc, s_out,
                       log ? log : "");
        free (log);
    }
    s_free_lines (farm);
    ck_assert_msg (dash > 0, "the README no longer runs 'make dashboard'");
    // Every program started is still running (a watcher without its root
    // would have stopped).
    for (int i = 0; i < npids; i++) {
        char *log = tu_slurp (s_p (s_dir, "farm.log"), NULL);
        ck_assert_msg (waitpid (pids[i], NULL, WNOHANG) == 0,
                       "README: a program of the farm stopped:\n%s", log ? log : "");
        free (log);
    }

    // A camera writes exp1, as doc/pivctl.md's session assumes.
    int rc = s_sh (tree, "bin/pivfarm-synth --camera --rate 20 --count 9 --size 256x256 "
                         "-o conf/data/exp1/shot");
    ck_assert_msg (rc == 0, "%s", s_out);
    int done = 0;
    for (int i = 0; i < 600 && done < 9; i++) {
        s_sh (tree, "pivctl -c conf/pivfarm.conf --json pairs exp1 --state done");
        done = 0;
        for (char *p = s_out; (p = strstr (p, "\"state\":\"done\"")); p++)
            done++;
        if (done < 9)
            usleep (100000);
    }
    ck_assert_msg (done == 9, "exp1: %d pair(s) done: %s", done, s_out);

    // doc/pivctl.md's example session: every '$' line, its exit status
    // (what 'echo $?' says, else 0) and the form of its first output line.
    char **session = s_block (s_p (tree, "doc/pivctl.md"), "## An example session");
    int last_rc = 0, commands = 0;
    for (int i = 0; session[i]; i++) {
        if (strncmp (session[i], "$ ", 2) != 0)
            continue;
        commands++;
        const char *command = session[i] + 2;
        int j = i + 1, interrupted = 0;
        const char *first = NULL;
        for (; session[j] && strncmp (session[j], "$ ", 2) != 0; j++) {
            if (strcmp (session[j], "^C") == 0)
                interrupted = 1;
            else if (!first && strcmp (session[j], "...") != 0 && session[j][0])
                first = session[j];
        }
        if (strcmp (command, "echo $?") == 0) {
            ck_assert_msg (first && atoi (first) == last_rc, "pivctl.md: the exit status was %d, "
                           "the page says %s", last_rc, first ? first : "nothing");
            continue;
        }
        int expect_failure = session[j] && strcmp (session[j], "$ echo $?") == 0;
        if (interrupted) {
            // Ctrl-C ends it; a camera writes more meanwhile (tail shows them).
            const char *log = s_p (s_dir, "session.log");
            unlink (log);
            char exec_cmd[4200];
            snprintf (exec_cmd, sizeof exec_cmd, "PATH=\"$PWD/bin:$PATH\" exec %s", command);
            int pid = s_start_group (tree, exec_cmd, log);
            usleep (700000);
            s_sh (tree, "pivfarm-synth --camera --rate 10 --count 3 --size 256x256 "
                        "--seed 7 -o conf/data/exp1/late$(date +%s%N)");
            char *out = NULL;
            for (int k = 0; k < 300; k++) {
                free (out);
                out = tu_slurp (log, NULL);
                if (out && first && s_has_form (out, first))
                    break;
                usleep (100000);
            }
            last_rc = s_stop_group (pid, SIGINT);
            ck_assert_msg (last_rc == 0, "pivctl.md: '%s' exited %d at Ctrl-C: %s", command,
                           last_rc, out ? out : "");
            ck_assert_msg (!first || (out && s_has_form (out, first)),
                           "pivctl.md: '%s' printed no line like '%s':\n%s", command, first,
                           out ? out : "");
            free (out);
            continue;
        }
        last_rc = s_sh (tree, command);
        ck_assert_msg (expect_failure || last_rc == 0, "pivctl.md: '%s' exited %d: %s", command,
                       last_rc, s_out);
        ck_assert_msg (!first || s_has_form (s_out, first),
                       "pivctl.md: '%s' printed no line like '%s':\n%s", command, first, s_out);
    }
    s_free_lines (session);
    ck_assert_msg (commands >= 10, "pivctl.md's session has %d commands", commands);
    s_stop_group (dash, SIGTERM);
    for (int i = npids - 1; i >= 0; i--)
        s_stop_group (pids[i], SIGTERM);
}
END_TEST

// ------------------------------------------------------------------ pivfarm-deploy's checks

#define RUNTIME_PKGS "libczmq4 libzmq5 libsqlite3-0 libfftw3-single3 libtiff6 libsystemd0"

// Hosts with databases of their own: <s_dir>/host-<name>/passwd and group
// (the user pivfarm with 'uid' and 'gid', none when uid is 0, beside this
// machine's users) and dpkg/status (the runtime packages but those named in
// 'missing'), which the real 'id' and 'dpkg-query' read on that host.
static void
s_host (const char *name, int uid, int gid, const char *missing)
{
    char dir[4200], text[1 << 16];
    snprintf (dir, sizeof dir, "%s/host-%s", s_dir, name);
    ck_assert (mkdir (dir, 0755) == 0 && mkdir (s_p (dir, "dpkg"), 0755) == 0);
    const char *files[] = {"/etc/passwd", "/etc/group"};
    for (int i = 0; i < 2; i++) {
        char *all = tu_slurp (files[i], NULL);
        ck_assert (all != NULL);
        size_t used = 0;
        for (char *save = NULL, *line = strtok_r (all, "\n", &save); line;
             line = strtok_r (NULL, "\n", &save))
            if (strncmp (line, "pivfarm:", 8) != 0)
                used += (size_t) snprintf (text + used, sizeof text - used, "%s\n", line);
        ck_assert (used < sizeof text - 128);
        if (uid && i == 0)
            snprintf (text + used, sizeof text - used,
                      "pivfarm:x:%d:%d::/var/lib/pivfarm:/usr/sbin/nologin\n", uid, gid);
        else if (uid)
            snprintf (text + used, sizeof text - used, "pivfarm:x:%d:\n", gid);
        s_write (s_p (dir, i ? "group" : "passwd"), text);
        free (all);
    }
    char pkgs[] = RUNTIME_PKGS;
    size_t used = 0;
    for (char *save = NULL, *p = strtok_r (pkgs, " ", &save); p; p = strtok_r (NULL, " ", &save)) {
        char word[64];
        snprintf (word, sizeof word, " %s ", p);
        char list[256];
        snprintf (list, sizeof list, " %s ", missing);
        if (!strstr (list, word))
            used += (size_t) snprintf (text + used, sizeof text - used,
                                       "Package: %s\nStatus: install ok installed\n"
                                       "Priority: optional\nSection: libs\nMaintainer: pivfarm\n"
                                       "Architecture: amd64\nVersion: 1.0\nDescription: %s\n\n",
                                       p, p);
    }
    text[used] = '\0';
    s_write (s_p (dir, "dpkg/status"), text);
}

// "" when user and mount namespaces can be made here, else why not.
static const char *
s_namespaces (void)
{
    const char *probe[] = {"/usr/bin/unshare", "--map-root-user", "--mount", "/bin/true", NULL};
    if (access (probe[0], X_OK) != 0 || s_run (probe) != 0)
        return "no unshare, or no user and mount namespaces here";
    return "";
}

// A stand-in ssh and scp, real programs: ssh runs the queries of
// pivfarm-deploy's checks (the packages, the user pivfarm) here for real,
// as the named host would, in a private mount namespace where that host's
// passwd and group are /etc's and its package database is dpkg's; every
// other command, and every scp, would change a host: it is logged to
// <s_dir>/changes, not run. "" or why this cannot run here.
static const char *
s_standin_hosts (void)
{
    const char *why = s_namespaces ();
    if (*why)
        return why;
    char text[16384];
    snprintf (text, sizeof text,
              "#!/bin/sh\n"
              "host=${1#*@} cmd=$2 dir='%s'\n"
              "case $cmd in\n"
              "'missing=; for p in '* | 'if id -u pivfarm >/dev/null 2>&1; then '*)\n"
              "    exec /usr/bin/unshare --map-root-user --mount /bin/sh -c 'mount --bind \"$0/passwd\" "
              "/etc/passwd && mount --bind \"$0/group\" /etc/group && DPKG_ADMINDIR=\"$0/dpkg\" "
              "exec /bin/sh -c \"$1\"' \"$dir/host-$host\" \"$cmd\" ;;\n"
              "esac\n"
              "echo \"$host: $cmd\" >>\"$dir/changes\"\n",
              s_dir);
    s_write (s_p (s_dir, "ssh"), text);
    snprintf (text, sizeof text, "#!/bin/sh\necho \"scp $*\" >>'%s/changes'\n", s_dir);
    s_write (s_p (s_dir, "scp"), text);
    chmod (s_p (s_dir, "ssh"), 0755);
    chmod (s_p (s_dir, "scp"), 0755);
    setenv ("PIVFARM_SSH", s_p (s_dir, "ssh"), 1);
    setenv ("PIVFARM_SCP", s_p (s_dir, "scp"), 1);
    return "";
}

START_TEST (install_refuses_hosts_whose_user_pivfarm_has_other_ids_and_copies_nothing)
{
    const char *why = s_standin_hosts ();
    if (*why) {
        printf ("test_deploy: skipped the UID check: %s\n", why);
        return;
    }
    char hosts[4200];  // s_p's slots are reused below
    snprintf (hosts, sizeof hosts, "%s", s_farm ());
    s_host ("nas1", 990, 990, "");
    s_host ("node1", 990, 990, "");
    s_host ("node2", 991, 992, "");
    ck_assert_int_eq (s_deploy (hosts, "install", 0), 1);
    const char *lines[] = {"nas1: pivfarm uid=990 gid=990\n", "root@node2: pivfarm uid=991 gid=992\n",
                           "pivfarm-deploy: the user pivfarm has different UIDs or GIDs on these "
                           "hosts",
                           "\n  uid=990 gid=990 nas1\n  uid=990 gid=990 node1\n"
                           "  uid=991 gid=992 root@node2\n",
                           "pivfarm-deploy: install refused, nothing copied to any host: "
                           "(pivfarm-uid)\n"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg (strstr (s_out, lines[i]), "no '%s' in:\n%s", lines[i], s_out);
    ck_assert_msg (access (s_p (s_dir, "changes"), F_OK) != 0, "a host was changed:\n%s",
                   tu_slurp (s_p (s_dir, "changes"), NULL));

    // One number where the user exists, none on node2: it is made there with
    // that number.
    tu_rmtree (s_p (s_dir, "host-node2"));
    s_host ("node2", 0, 0, "");
    ck_assert_int_eq (s_deploy (hosts, "install", 0), 0);
    ck_assert_msg (strstr (s_out, "root@node2: pivfarm absent\n"), "%s", s_out);
    char *changes = tu_slurp (s_p (s_dir, "changes"), NULL);
    const char *made = "node2: id -u pivfarm >/dev/null 2>&1 || { getent group pivfarm >/dev/null "
                       "|| groupadd --system --gid 990 pivfarm; useradd --system --uid 990 --gid "
                       "pivfarm --no-create-home";
    ck_assert_msg (changes && strstr (changes, made), "no '%s' in:\n%s", made,
                   changes ? changes : "(nothing)");
    free (changes);
}
END_TEST

START_TEST (install_refuses_a_host_missing_runtime_packages_with_the_list_and_apt_get_line)
{
    const char *why = s_standin_hosts ();
    if (*why) {
        printf ("test_deploy: skipped the package check: %s\n", why);
        return;
    }
    char hosts[4200];
    snprintf (hosts, sizeof hosts, "%s", s_farm ());
    s_host ("nas1", 990, 990, "");
    s_host ("node1", 990, 990, "libtiff6 libczmq4");
    s_host ("node2", 990, 990, "");
    ck_assert_int_eq (s_deploy (hosts, "install", 0), 1);
    const char *lines[] = {"node1: missing packages: libczmq4 libtiff6; run: apt-get install "
                           "libczmq4 libtiff6 (or PIVFARM_APT=1)\n",
                           "node1: check FAILED\n",
                           "pivfarm-deploy: install refused, nothing copied to any host: node1\n"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg (strstr (s_out, lines[i]), "no '%s' in:\n%s", lines[i], s_out);
    ck_assert_msg (!strstr (s_out, "nas1: missing") && !strstr (s_out, "node2: missing"), "%s",
                   s_out);
    ck_assert_msg (access (s_p (s_dir, "changes"), F_OK) != 0, "a host was changed:\n%s",
                   tu_slurp (s_p (s_dir, "changes"), NULL));
}
END_TEST

// Stand-in hosts that are changed for real (issue 28): ssh runs every
// command as the named host would, in a private mount namespace whose /etc
// and /usr/local/bin are overlays written into <s_dir>/host-<name>/etc and
// bin (its passwd, group and dpkg database those of s_host), from its home
// <s_dir>/host-<name>/home, where scp copies for real. systemctl is a
// stand-in that answers 'cat' with nothing (the programs stay in
// /usr/local/bin), logs other commands as "HOST: systemctl ARGS" to
// <s_dir>/changes and fails
// when the host's file 'fail' has the line "systemctl ARGS". The programs
// copied are those of <s_dir>/old (and new): scripts saying which they are;
// old/pivctl and new/pivctl answer as a running broker would, and fail when
// the host's 'fail' has "pivctl ACTION". "" or why this cannot run here.
static const char *
s_standin_real_hosts (void)
{
    const char *why = s_namespaces ();
    if (*why)
        return why;
    const char *overlay[] = {"/usr/bin/unshare", "--map-root-user", "--mount", "/bin/sh", "-c",
                             "mkdir \"$0/u\" \"$0/w\" && mount -t overlay overlay -o "
                             "\"lowerdir=/etc,upperdir=$0/u,workdir=$0/w\" /etc && rm -rf \"$0/u\" \"$0/w\"",
                             s_dir, NULL};
    char text[16384];
    if (s_run (overlay) != 0)
        return "no overlay mounts in a user namespace here (Linux 5.11 or later)";
    snprintf (text, sizeof text,
              "#!/bin/sh\n"
              "host=${1#*@} cmd=$2 h='%s/host-'${1#*@}\n"
              "mkdir -p \"$h/etc\" \"$h/etc.work\" \"$h/bin\" \"$h/bin.work\" \"$h/home\" && cd \"$h/home\" || exit 255\n"
              "exec /usr/bin/unshare --map-root-user --mount /bin/sh -c '"
              "mount -t overlay overlay -o \"lowerdir=/etc,upperdir=$0/etc,workdir=$0/etc.work\" /etc && "
              "mount -t overlay overlay -o \"lowerdir=/usr/local/bin,upperdir=$0/bin,workdir=$0/bin.work\" "
              "/usr/local/bin && mount --bind \"$0/passwd\" /etc/passwd && mount --bind \"$0/group\" "
              "/etc/group && export HOST=\"$0\" DPKG_ADMINDIR=\"$0/dpkg\" PATH=\"$0/../standin:$PATH\" && "
              "exec /bin/sh -c \"$1\"' \"$h\" \"$cmd\"\n",
              s_dir);
    s_write (s_p (s_dir, "ssh"), text);
    snprintf (text, sizeof text,
              "#!/bin/sh\n"
              "for last; do :; done\n"
              "host=${last%%%%:*} to=${last#*:}\n"
              "while [ $# -gt 1 ]; do cp \"$1\" '%s/host-'\"${host#*@}/home/$to\" || exit 1; shift; done\n",
              s_dir);
    s_write (s_p (s_dir, "scp"), text);
    ck_assert_int_eq (mkdir (s_p (s_dir, "standin"), 0755), 0);
    s_write (s_p (s_dir, "standin/systemctl"),
             "#!/bin/sh\n"
             "[ \"$1\" != cat ] || exit 0  # a query: no unit here names a directory\n"
             "echo \"${HOST##*/host-}: systemctl $*\" >>\"$HOST/../changes\"\n"
             "if grep -qxF \"systemctl $*\" \"$HOST/fail\" 2>/dev/null; then\n"
             "    echo \"Job for $2 failed because the control process exited with error code.\" >&2\n"
             "    exit 1\n"
             "fi\n");
    const char *progs[] = {"pivfarm-broker", "pivfarm-watcher", "pivfarm-agent", "pivctl"};
    for (int v = 0; v < 2; v++) {
        const char *dir = s_p (s_dir, v ? "new" : "old");
        ck_assert_int_eq (mkdir (dir, 0755), 0);
        for (int i = 0; i < 4; i++) {
            snprintf (text, sizeof text,
                      "#!/bin/sh\n# %s %s\n"
                      "if grep -qxF \"pivctl $3\" \"$HOST/fail\" 2>/dev/null; then\n"
                      "    echo \"pivctl: cannot reach the broker at 'tcp://127.0.0.1:5552'\" >&2; exit 1\n"
                      "fi\n"
                      "case $3 in backup) echo \"backed up the store into $4\" ;; esac\n",
                      progs[i], v ? "new" : "old");
            s_write (s_p (dir, progs[i]), text);
            chmod (s_p (dir, progs[i]), 0755);
        }
    }
    chmod (s_p (s_dir, "ssh"), 0755);
    chmod (s_p (s_dir, "scp"), 0755);
    chmod (s_p (s_dir, "standin/systemctl"), 0755);
    setenv ("PIVFARM_SSH", s_p (s_dir, "ssh"), 1);
    setenv ("PIVFARM_SCP", s_p (s_dir, "scp"), 1);
    setenv ("PIVFARM_BIN", s_p (s_dir, "old"), 1);
    s_host ("nas1", 990, 990, "");
    s_host ("node1", 990, 990, "");
    s_host ("node2", 990, 990, "");
    return "";
}

// The farm of s_farm on stand-in hosts changed for real, its hosts file
// in 'hosts'; 0, saying why, when they cannot run here.
static int
s_real_farm (char *hosts, size_t size, const char *what)
{
    const char *why = s_standin_real_hosts ();
    if (*why)
        printf ("test_deploy: skipped %s on stand-in hosts: %s\n", what, why);
    snprintf (hosts, size, "%s", s_farm ());
    return *why == '\0';
}

// Fails unless each of the n 'lines' is in 'text'.
static void
s_assert_has (const char *text, const char *const *lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg (strstr (text, lines[i]), "no '%s' in:\n%.3000s", lines[i], text);
}
#define ASSERT_HAS(text, lines) s_assert_has ((text), (lines), sizeof (lines) / sizeof (lines)[0])

// The text of <s_dir>/host-HOST/PATH ("" when absent); freed by the caller.
static char *
s_on_host (const char *host, const char *path)
{
    char file[4200];
    snprintf (file, sizeof file, "%s/host-%s/%s", s_dir, host, path);
    char *text = tu_slurp (file, NULL);
    return text ? text : strdup ("");
}

// What the stand-in hosts logged to <s_dir>/changes ("" when nothing);
// freed by the caller.
static char *
s_changes (void)
{
    char *text = tu_slurp (s_p (s_dir, "changes"), NULL);
    return text ? text : strdup ("");
}

START_TEST (a_second_install_keeps_each_hosts_own_configuration_and_puts_the_new_one_beside)
{
    char hosts[4200];
    if (!s_real_farm (hosts, sizeof hosts, "the install"))
        return;
    char *shipped = tu_slurp (s_p (s_dir, "farm.conf"), NULL);
    ck_assert_int_eq (s_deploy (hosts, "install", 0), 0);
    char *conf = s_on_host ("node1", "etc/pivfarm/pivfarm.conf");
    char *agent = s_on_host ("node1", "bin/pivfarm-agent");
    ck_assert_msg (strcmp (conf, shipped) == 0 && strstr (agent, "pivfarm-agent old"),
                   "the first install did not install node1:\n%s", s_out);
    free (conf);
    free (agent);
    // The administrator of node1 edits its configuration; a second install,
    // of a configuration changed since, leaves it and says where the new
    // one is; nas1 kept the shipped one of the first install and is told the same.
    const char *own = "agent\n    broker = tcp://nas1:5551\n    threads = 4  # node1's own\n";
    s_write (s_p (s_dir, "host-node1/etc/pivfarm/pivfarm.conf"), own);
    ck_assert_int_eq (s_deploy (hosts, "install", 0), 0);
    conf = s_on_host ("node1", "etc/pivfarm/pivfarm.conf");
    char *beside = s_on_host ("node1", "etc/pivfarm/pivfarm.conf.new");
    ck_assert_msg (strcmp (conf, own) == 0, "node1's own configuration was replaced by:\n%s", conf);
    ck_assert_msg (strcmp (beside, shipped) == 0, "no shipped configuration beside node1's:\n%s",
                   s_out);
    free (conf);
    free (beside);
    const char *lines[] = {"node1: kept /etc/pivfarm/pivfarm.conf as this host has it; the shipped one "
                           "differs, written beside it: compare with diff -u "
                           "/etc/pivfarm/pivfarm.conf /etc/pivfarm/pivfarm.conf.new "
                           "(--force-config replaces it)\n",
                           "nas1: kept /etc/pivfarm/pivfarm.conf (the same as the shipped one)\n",
                           "node1: install ok (agent)\n"};
    ASSERT_HAS (s_out, lines);
    // --force-config replaces it, keeping the host's own beside it.
    ck_assert_int_eq (s_deploy_with (hosts, "install", "--force-config"), 0);
    conf = s_on_host ("node1", "etc/pivfarm/pivfarm.conf");
    ck_assert_msg (strcmp (conf, shipped) == 0, "--force-config left:\n%s", conf);
    free (conf);
    const char *said = strstr (s_out, "node1: replaced /etc/pivfarm/pivfarm.conf; the one it had is "
                                      "/etc/pivfarm/pivfarm.conf.");
    ck_assert_msg (said, "%s", s_out);
    char bak[64];
    ck_assert_int_eq (sscanf (said, "node1: replaced /etc/pivfarm/pivfarm.conf; the one it had is "
                                    "/etc/pivfarm/%63[^ \n]", bak), 1);
    char *kept = s_on_host ("node1", s_p ("etc/pivfarm", bak));
    ck_assert_msg (strcmp (kept, own) == 0 && strstr (bak, ".bak"), "'%s' holds:\n%s", bak, kept);
    free (kept);
    free (shipped);
}
END_TEST

START_TEST (an_upgrade_that_fails_at_a_step_stops_there_naming_the_host_and_how_to_roll_back)
{
    char hosts[4200];
    if (!s_real_farm (hosts, sizeof hosts, "the upgrade"))
        return;
    ck_assert_int_eq (s_deploy (hosts, "install", 0), 0);
    const char *own = "agent\n    broker = tcp://nas1:5551\n    threads = 4\n";
    s_write (s_p (s_dir, "host-node1/etc/pivfarm/pivfarm.conf"), own);
    setenv ("PIVFARM_BIN", s_p (s_dir, "new"), 1);
    // The backup fails: nothing is stopped.
    s_write (s_p (s_dir, "host-nas1/fail"), "pivctl backup\n");
    unlink (s_p (s_dir, "changes"));
    ck_assert_int_eq (s_deploy (hosts, "upgrade", 0), 1);
    char *changes = s_changes ();
    ck_assert_msg (strstr (s_out, "nas1: pivctl: cannot reach the broker")
                       && strstr (s_out, "pivfarm-deploy: upgrade stopped: the backup of the store "
                                         "failed on nas1\nnothing was stopped or changed")
                       && !strstr (changes, "systemctl"),
                   "%s\nchanges:\n%s", s_out, changes);
    free (changes);
    char *agent = s_on_host ("node1", "bin/pivfarm-agent");
    ck_assert_msg (strstr (agent, "pivfarm-agent old"), "node1's agent was replaced");
    free (agent);
    // The broker does not start again: the agents and watcher stay stopped,
    // the programs are the new ones with the old beside them.
    s_write (s_p (s_dir, "host-nas1/fail"), "systemctl start pivfarm-broker.service\n");
    ck_assert_int_eq (s_deploy (hosts, "upgrade", 0), 1);
    changes = s_changes ();
    const char *order[] = {"node1: systemctl stop pivfarm-agent@pivfarm.service\n",
                           "node2: systemctl stop pivfarm-agent@pivfarm.service\n",
                           "nas1: systemctl stop pivfarm-watcher.service\n",
                           "nas1: systemctl stop pivfarm-broker.service\n",
                           "nas1: systemctl start pivfarm-broker.service\n"};
    const char *from = changes;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *at = strstr (from, order[i]);
        ck_assert_msg (at, "no '%s' after the steps before it:\n%s", order[i], changes);
        from = at + strlen (order[i]);
    }
    ck_assert_msg (!strstr (changes, "start pivfarm-watcher") && !strstr (changes, "start pivfarm-agent"),
                   "started after the broker failed:\n%s", changes);
    free (changes);
    const char *said[] = {"nas1: backed up the store into /var/lib/pivfarm/backup-",
                          "pivfarm-deploy: upgrade stopped: starting the broker failed on nas1; done "
                          "before it:\n  - the store backed up into /var/lib/pivfarm/backup-",
                          "\n  - the agents, watchers and brokers stopped\n  - the new programs "
                          "installed (the previous ones kept as /usr/local/bin/<program>.prev) on "
                          "nas1 node1 root@node2\nto roll back: ",
                          "mv /usr/local/bin/$p.prev /usr/local/bin/$p;",
                          "restore it from /var/lib/pivfarm/backup-"};
    ASSERT_HAS (s_out, said);
    agent = s_on_host ("node2", "bin/pivfarm-agent");
    char *prev = s_on_host ("node2", "bin/pivfarm-agent.prev");
    char *conf = s_on_host ("node1", "etc/pivfarm/pivfarm.conf");
    ck_assert_msg (strstr (agent, "pivfarm-agent new") && strstr (prev, "pivfarm-agent old"),
                   "node2: the agent is '%s', the previous one '%s'", agent, prev);
    ck_assert_msg (strcmp (conf, own) == 0, "the upgrade changed node1's configuration:\n%s", conf);
    free (agent);
    free (prev);
    free (conf);
    // Mended and run again, it goes through, and the previous programs are
    // still the old ones.
    unlink (s_p (s_dir, "host-nas1/fail"));
    unlink (s_p (s_dir, "changes"));
    ck_assert_int_eq (s_deploy (hosts, "upgrade", 0), 0);
    prev = s_on_host ("node2", "bin/pivfarm-agent.prev");
    changes = s_changes ();
    ck_assert_msg (strstr (prev, "pivfarm-agent old"), "a second upgrade lost the previous agent");
    ck_assert_msg (strstr (changes, "nas1: systemctl start pivfarm-broker.service\n"
                                    "nas1: systemctl start pivfarm-watcher.service\n"
                                    "node1: systemctl start pivfarm-agent@pivfarm.service\n"
                                    "node2: systemctl start pivfarm-agent@pivfarm.service\n")
                       && strstr (s_out, "upgrade: done on every host"),
                   "%s\nchanges:\n%s", s_out, changes);
    free (prev);
    free (changes);
}
END_TEST

// The journal (issue 28): systemd sets JOURNAL_STREAM to the "device:inode"
// of the stream it gave a service as stderr; here that stream is the log
// file the test opens, so the broker's lines are what journald would read.
START_TEST (under_the_journal_each_line_carries_its_priority_and_no_time_of_its_own)
{
    setenv ("PIVFARM_BIN", s_bin, 1);
    tu_farm_t farm;
    tu_farm_init (&farm);
    tu_farm_conf (&farm, "noop", 1, "32", "");
    char broker_log[4096];
    snprintf (broker_log, sizeof broker_log, "%s", tu_path (farm.dir, "broker.log"));
    tu_spit (broker_log, "", 0);
    struct stat st;
    ck_assert_int_eq (stat (broker_log, &st), 0);
    char stream[64];
    snprintf (stream, sizeof stream, "%llu:%llu", (unsigned long long) st.st_dev,
              (unsigned long long) st.st_ino);
    setenv ("JOURNAL_STREAM", stream, 1);
    tu_farm_start_broker (&farm);
    // A key read at start only, changed and reloaded: a warning.
    tu_farm_conf_replace (&farm, "    heartbeat_ms = 200\n", "    heartbeat_ms = 300\n");
    kill (farm.broker, SIGHUP);
    int warned = tu_farm_log_has (&farm, "broker.log",
                                  "\n<4>warning: reload: broker/heartbeat_ms changed", 10000);
    // An agent whose stderr is not that stream (it inherited the variable,
    // as a child of a service does) keeps the lines of a terminal.
    farm.agents[0] = tu_farm_start (&farm, "pivfarm-agent", "agent.log", "--id", "a1");
    unsetenv ("JOURNAL_STREAM");
    int agent_logged = tu_farm_log_has (&farm, "agent.log", " pivfarm-agent notice: ", 10000);
    tu_stop (farm.agents[0], SIGTERM, 20);
    // An agent under the journal whose processor fails with two lines: the
    // journal takes each line as an entry, and both keep the priority.
    char script[4200], processor[4300], agent_log[4096];
    snprintf (script, sizeof script, "%s", tu_path (farm.dir, "fail.sh"));
    const char *fail = "#!/bin/sh\nprintf 'the lens is fogged\\nand the laser is off\\n' >&2\n"
                       "exit 1\n";
    tu_spit (script, fail, strlen (fail));
    chmod (script, 0755);
    snprintf (processor, sizeof processor, "exec:%s", script);
    snprintf (agent_log, sizeof agent_log, "%s", tu_path (farm.dir, "agent2.log"));
    tu_spit (agent_log, "", 0);
    ck_assert_int_eq (stat (agent_log, &st), 0);
    snprintf (stream, sizeof stream, "%llu:%llu", (unsigned long long) st.st_dev,
              (unsigned long long) st.st_ino);
    setenv ("JOURNAL_STREAM", stream, 1);
    char *argv[] = {(char *) tu_bin ("pivfarm-agent"), "-c", farm.conf, "--id", "a2",
                    "--processor", processor, NULL};
    farm.agents[0] = tu_spawn (argv, agent_log);
    unsetenv ("JOURNAL_STREAM");
    farm.watcher = tu_farm_start (&farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    tu_farm_fake (&farm, 1, "f");
    tu_farm_land (&farm, "f", 1, 1, 0);
    int both = tu_farm_log_has (&farm, "agent2.log", "exited with status 1: the lens is fogged\n"
                                "<4>and the laser is off\n", 20000)
               && tu_farm_log_has (&farm, "agent2.log", "\n<4>warning: '", 0);
    char *log = tu_slurp (broker_log, NULL), *agent = tu_slurp (tu_path (farm.dir, "agent.log"), NULL);
    char *agent2 = tu_slurp (agent_log, NULL);
    char shown[12288];
    snprintf (shown, sizeof shown, "broker.log:\n%.3000s\nagent.log:\n%.3000s\nagent2.log:\n%.3000s",
              log ? log : "(none)", agent ? agent : "(none)", agent2 ? agent2 : "(none)");
    free (agent2);
    // Every line of the broker's starts with a priority; the notices of its
    // start are <5>.
    int prefixed = log && *log == '<';
    for (const char *nl = log ? strchr (log, '\n') : NULL; nl && nl[1]; nl = strchr (nl + 1, '\n'))
        prefixed &= nl[1] == '<';
    int notice = log && strstr (log, "<5>notice: ");
    free (log);
    free (agent);
    tu_farm_release (&farm);
    ck_assert_msg (warned, "no '<4>warning:' line for the reload:\n%s", shown);
    ck_assert_msg (prefixed && notice, "a broker line without its priority:\n%s", shown);
    ck_assert_msg (agent_logged, "the agent's lines are not those of a terminal:\n%s", shown);
    ck_assert_msg (both, "a failure of two lines is not two entries at <4>:\n%s", shown);
}
END_TEST

// A test case of 'suite' whose tests each get a fresh temporary directory.
static TCase *
s_tcase (Suite *suite, const char *name)
{
    TCase *tc = tcase_create (name);
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    suite_add_tcase (suite, tc);
    return tc;
}

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("deploy");
    TCase *deploy = s_tcase (suite, "pivfarm-deploy");
    tcase_add_test (deploy, a_dry_run_install_prints_the_copies_and_unit_installs_of_every_host);
    tcase_add_test (deploy, a_dry_run_upgrade_backs_up_stops_installs_programs_then_starts_broker_first);
    tcase_add_test (deploy, a_dry_run_starts_brokers_first_and_stops_them_last);
    tcase_add_test (deploy, a_dry_run_status_asks_every_host_and_the_broker_for_its_agents);
    tcase_add_test (deploy, ssh_and_sudo_come_from_the_environment);
    tcase_add_test (deploy, each_host_is_reported_and_one_failed_host_fails_the_run);
    tcase_add_test (deploy, bad_hosts_files_and_actions_are_refused_with_status_2);
    tcase_add_test (deploy, install_warns_of_a_configuration_that_only_works_on_one_machine);
    TCase *units = s_tcase (suite, "systemd");
    tcase_add_test (units, every_unit_is_hardened_restarts_on_failure_and_reads_etc_pivfarm);
    tcase_add_test (units, the_units_pass_systemd_analyze_verify);
    tcase_add_test (s_tcase (suite, "slurm"),
                    the_slurm_script_runs_one_agent_per_node_with_the_cpus_of_its_node);
    tcase_add_test (s_tcase (suite, "camera"),
                    the_camera_writes_numbered_pairs_into_place_at_its_rate_truth_first);
    TCase *notify = s_tcase (suite, "notify");
    tcase_set_timeout (notify, 60);
    tcase_add_test (notify, the_broker_says_ready_once_its_store_is_open_and_its_sockets_bound);
    tcase_add_test (notify, sighup_reloads_the_log_level_and_policy_and_names_what_needs_a_restart);
    tcase_add_test (notify, under_the_journal_each_line_carries_its_priority_and_no_time_of_its_own);
    TCase *install = s_tcase (suite, "install");
    tcase_set_timeout (install, 300);
    tcase_add_test (install, make_install_puts_units_generator_and_polkit_rule_where_systemd_and_polkit_read_them);
    tcase_add_test (install, every_man_page_has_each_long_option_of_its_help_and_renders_without_warnings);
    tcase_add_test (install, the_generator_makes_units_wait_for_their_mounts_and_write_their_paths);
    TCase *docs = s_tcase (suite, "docs");
    tcase_set_timeout (docs, 300);
    tcase_add_test (docs, the_dashboard_of_a_fresh_tree_shows_no_store_yet_rather_than_503);
    tcase_add_test (docs, the_readme_and_pivctl_md_commands_run_as_written_on_a_fresh_tree);
    TCase *checks = s_tcase (suite, "deploy-checks");
    // Two installs over stand-in hosts each: seconds, more on a loaded machine
    // (Check's default of 4 s expired once while other suites ran).
    tcase_set_timeout (checks, 60);
    tcase_add_test (checks, install_refuses_hosts_whose_user_pivfarm_has_other_ids_and_copies_nothing);
    tcase_add_test (checks, install_refuses_a_host_missing_runtime_packages_with_the_list_and_apt_get_line);
    tcase_add_test (checks, a_second_install_keeps_each_hosts_own_configuration_and_puts_the_new_one_beside);
    tcase_add_test (checks, an_upgrade_that_fails_at_a_step_stops_there_naming_the_host_and_how_to_roll_back);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
