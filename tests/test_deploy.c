// test_deploy.c — the deployment kit as an administrator uses it:
// pivfarm-deploy run for real with --dry-run (and against a stand-in ssh) on
// a hosts file in a temporary directory, the systemd units, the Slurm batch
// script (with a stand-in srun), and the synthetic camera of 'make demo'.
// Nothing here needs root or a network; a missing tool skips its assertion
// with a message.

#include "tests/testutil.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
    const char *etc = "install -d -m 0755 /etc/pivfarm && install -m 0644 pivfarm-deploy/farm.conf "
                      "/etc/pivfarm/pivfarm.conf";
    // Before anything is copied: the runtime packages, the user's UID:GID.
#define CHECKS(h)                                                                               \
    h ": " SSH " " h " 'missing=; for p in libczmq4 libzmq5 libsqlite3-0 libfftw3-single3 "     \
      "libtiff6 libsystemd0; do dpkg-query -W -f=\\${Status} $p 2>/dev/null | grep -q \"ok "     \
      "installed\" || missing=\"$missing $p\"; done; [ -z \"$missing\" ] || { echo \"missing "   \
      "packages:$missing; run: apt-get install$missing (or PIVFARM_APT=1)\"; exit 1; }'\n" h   \
      ": " SSH " " h " 'if id -u pivfarm >/dev/null 2>&1; then echo \"pivfarm uid=$(id -u "     \
      "pivfarm) gid=$(id -g pivfarm)\"; else echo \"pivfarm absent\"; fi'\n"
    snprintf (
        expected, sizeof expected,
        CHECKS ("nas1")
        "nas1: " SSH " nas1 'mkdir -p pivfarm-deploy'\n"
        "nas1: " SCP " " BIN "/pivfarm-broker " BIN "/pivfarm-watcher " BIN "/pivctl "
        "%s/pivfarm-broker.service %s/pivfarm-watcher.service %s nas1:pivfarm-deploy/\n"
        "nas1: " SSH " nas1 %s"
        "nas1: " SSH " nas1 'install -m 0755 pivfarm-deploy/pivfarm-broker "
        "pivfarm-deploy/pivfarm-watcher pivfarm-deploy/pivctl /usr/local/bin/ && %s && "
        "install -m 0644 pivfarm-deploy/pivfarm-broker.service pivfarm-deploy/pivfarm-watcher.service "
        "/etc/systemd/system/ && systemctl daemon-reload'\n"
        "nas1: " SSH " nas1 'systemctl enable pivfarm-broker.service pivfarm-watcher.service'\n"
        "nas1: " SSH " nas1 'rm -rf pivfarm-deploy'\n"
        CHECKS ("node1")
        "node1: " SSH " node1 'mkdir -p pivfarm-deploy'\n"
        "node1: " SCP " " BIN "/pivfarm-agent " BIN "/pivctl %s/pivfarm-agent@.service %s "
        "node1:pivfarm-deploy/\n"
        "node1: " SSH " node1 %s"
        "node1: " SSH " node1 'install -m 0755 pivfarm-deploy/pivfarm-agent pivfarm-deploy/pivctl "
        "/usr/local/bin/ && %s && install -m 0644 pivfarm-deploy/pivfarm-agent@.service "
        "/etc/systemd/system/ && systemctl daemon-reload'\n"
        "node1: " SSH " node1 'systemctl enable pivfarm-agent@pivfarm.service'\n"
        "node1: " SSH " node1 'rm -rf pivfarm-deploy'\n",
        units, units, conf, useradd, etc, units, conf, useradd, etc);
    // node2 (logged in as root@node2) gets what node1 gets.
    const char *node2 = strstr (s_out, "root@node2: ");
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
              "cd '%s/deploy/systemd' && for f in *.service; do "
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
    setenv ("PIVFARM_CONF", "/etc/pivfarm/lab farm.conf", 1);
    const char *script = s_p (s_top, "deploy/slurm/pivfarm-agents.sbatch");
    const char *argv[] = {script, "tcp://nas1:5551", NULL};
    int rc = s_run (argv);
    ck_assert_msg (rc == 0, "exit %d:\n%s", rc, s_out);
    const char *lines[] = {"srun --ntasks-per-node=1\n", "srun --cpus-per-task=8\n",
                           "agent [--broker]\nagent [tcp://nas1:5551]\n",
                           "agent [--threads]\nagent [8]\n", "-4711]\n",
                           "agent [-c]\nagent [/etc/pivfarm/lab farm.conf]\n"};
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

START_TEST (make_install_lays_out_programs_cgi_units_config_and_man_pages_under_destdir)
{
    if (access ("/usr/bin/help2man", X_OK) != 0) {
        fprintf (stderr, "test_deploy: skipped make install: help2man is absent (make deps)\n");
        return;
    }
    char cmd[16384];
    snprintf (cmd, sizeof cmd,
              "make --no-print-directory -s -C '%s' install PREFIX=/usr DESTDIR='%s/root' "
              ">'%s/install.log' 2>&1",
              s_top, s_dir, s_dir);
    int rc = system (cmd);
    char *log = tu_slurp (s_p (s_dir, "install.log"), NULL);
    ck_assert_msg (rc == 0, "make install failed:\n%s", log ? log : "");
    free (log);
    const char *files[] = {"usr/bin/pivfarm-broker", "usr/bin/pivfarm-watcher",
                           "usr/bin/pivfarm-agent", "usr/bin/pivctl",
                           "usr/libexec/pivfarm/pivfarm.cgi", "usr/libexec/pivfarm/pivfarm-mount",
                           "usr/lib/systemd/system/pivfarm-broker.service",
                           "usr/lib/systemd/system/pivfarm-watcher.service",
                           "usr/lib/systemd/system/pivfarm-agent@.service",
                           "usr/lib/systemd/system/pivfarm-tmpfs@.service",
                           "usr/lib/systemd/system-generators/pivfarm-generator",
                           "usr/share/polkit-1/rules.d/pivfarm.rules",
                           "usr/share/doc/pivfarm/pivfarm.conf.example",
                           "usr/share/man/man1/pivfarm-broker.1", "usr/share/man/man1/pivctl.1",
                           NULL};
    char root[4200];
    snprintf (root, sizeof root, "%s/root", s_dir);
    for (int i = 0; files[i]; i++)
        ck_assert_msg (access (s_p (root, files[i]), F_OK) == 0, "make install left out /%s",
                       files[i]);
    // The units run the programs where PREFIX put them, not /usr/local.
    char *unit = tu_slurp (s_p (root, "usr/lib/systemd/system/pivfarm-broker.service"), NULL);
    ck_assert_ptr_nonnull (unit);
    ck_assert_msg (strstr (unit, "ExecStart=/usr/bin/pivfarm-broker -c /etc/pivfarm/pivfarm.conf")
                       && strstr (unit, "Type=notify") && !strstr (unit, "/usr/local/"),
                   "%s", unit);
    free (unit);
    // The man page renders, with the options of --help.
    const char *man = s_p (root, "usr/share/man/man1/pivfarm-broker.1");
    const char *groff[] = {"/usr/bin/groff", "-man", "-Tutf8", "-P-cbou", man, NULL};
    ck_assert_int_eq (s_run (groff), 0);
    ck_assert_msg (strstr (s_out, "--config") && strstr (s_out, "NAME") && strstr (s_out, "dispatches"), "%s", s_out);
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
    TCase *install = s_tcase (suite, "install");
    tcase_set_timeout (install, 300);
    tcase_add_test (install, make_install_lays_out_programs_cgi_units_config_and_man_pages_under_destdir);
    tcase_add_test (install, the_generator_makes_units_wait_for_their_mounts_and_write_their_paths);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
