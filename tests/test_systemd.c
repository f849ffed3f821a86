// test_systemd.c — the shipped units under a real systemd (issue 14): systemd
// boots as PID 1 of private namespaces (tests/systemd-ns.sh says exactly what
// is private) into a target of its own with dbus and polkit only; the farm
// installed by 'make install' runs as pivfarm-broker, pivfarm-watcher and
// pivfarm-agent@pivfarm, the broker as the user pivfarm; 'pivctl provision
// --tmpfs', 'archive' and 'release' go through storage/mount_helper =
// pivfarm-mount, systemd over D-Bus, the polkit rule and pivfarm-tmpfs@;
// pivfarm-agent@gpu, its output in a journald started for it, is named
// HOST-gpu and its lines carry their priorities (journalctl -p).
//
// Needs root, unshare, nsenter, overlayfs, a cgroup2 hierarchy, dbus-daemon
// and polkitd; without one the test says which and passes (skip).
// The host's /tmp, /var/tmp and /run keep a marker file each, and /etc/passwd,
// /etc/group and /etc/systemd/system are unchanged afterwards: the test
// checks both. A hard limit (the tcase's timeout) holds; the namespace's
// PID 1 dies with the test (PDEATHSIG of unshare, --kill-child) and is
// killed by its pid at exit.

#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char s_dir[4096];    // this test's directory (on the host)
static char s_top[4096];    // the top of the source tree
static char s_cgroup[4096]; // the cgroup2 subtree made for the namespace
static char s_out[1 << 16]; // output of the last command
static int s_unshare;       // the unshare process (our child)
static int s_pid1;          // the namespace's PID 1 (systemd), host pid

// "<dir>/<name>" in one of 16 rotating slots.
static const char *
s_p (const char *dir, const char *name)
{
    static char slots[16][4096];
    static int next;
    char *slot = slots[next++ % 16];
    int n = snprintf (slot, 4096, "%s/%s", dir, name);
    ck_assert (n > 0 && n < 4096);
    return slot;
}

// Runs 'sh -c CMD' on the host; its exit status, the output in s_out.
static int
s_host (const char *cmd, int timeout_s)
{
    char *argv[] = {"/bin/sh", "-c", (char *) cmd, NULL};
    return tu_run (argv, s_out, sizeof s_out, timeout_s);
}

// Runs 'sh -c CMD' in the namespace's root context (all of PID 1's
// namespaces: outside every unit's sandbox); status, output in s_out.
static int
s_in (int timeout_s, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static int
s_in (int timeout_s, const char *fmt, ...)
{
    char cmd[8192], pid[32];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (cmd, sizeof cmd, fmt, ap);
    va_end (ap);
    snprintf (pid, sizeof pid, "%d", s_pid1);
    char *argv[] = {"/usr/bin/nsenter", "-t", pid, "-m", "-u", "-i", "-n", "-p", "-C",
                    "/bin/sh", "-c", cmd, NULL};
    return tu_run (argv, s_out, sizeof s_out, timeout_s);
}

// Why systemd cannot boot here safely, or NULL.
static const char *
s_cannot_boot (void)
{
    if (geteuid () != 0)
        return "not root (mount and unshare need it)";
    const char *need[] = {"/lib/systemd/systemd", "/usr/bin/unshare", "/usr/bin/nsenter",
                          "/usr/bin/dbus-daemon", "/usr/lib/polkit-1/polkitd",
                          "/usr/bin/findmnt", NULL};
    static char why[4200];
    for (int i = 0; need[i]; i++)
        if (access (need[i], X_OK) != 0) {
            snprintf (why, sizeof why, "%s is absent", need[i]);
            return why;
        }
    const char *units[] = {"dbus.service", "dbus.socket", "polkit.service", NULL};
    for (int i = 0; units[i]; i++)
        if (access (s_p ("/lib/systemd/system", units[i]), R_OK) != 0) {
            snprintf (why, sizeof why, "/lib/systemd/system/%s is absent", units[i]);
            return why;
        }
    if (s_host ("grep -qw overlay /proc/filesystems", 10) != 0)
        return "no overlayfs in /proc/filesystems";
    // The cgroup2 mount and our cgroup in it: the namespace gets a subtree.
    if (s_host ("m=$(findmnt -n -o TARGET -t cgroup2 | head -n 1) && [ -n \"$m\" ] && "
                "c=$(sed -n 's/^0:://p' /proc/self/cgroup) && printf '%s%s' \"$m\" \"${c%/}\"",
                10)
            != 0
        || !*s_out)
        return "no cgroup2 hierarchy to give systemd a subtree of";
    // A failed run exits without its atexit (check's _exit): its namespace
    // died with it (PDEATHSIG), its empty subtree and markers are removed here.
    char parent[4096];
    snprintf (parent, sizeof parent, "%.4000s", s_out);
    char cmd[9000];
    snprintf (cmd, sizeof cmd,
              "for d in '%s'/pivfarm-systemd-test-*; do p=${d##*-}; [ -d \"$d\" ] || continue; "
              "kill -0 \"$p\" 2>/dev/null && continue; grep -q 'populated 0' \"$d/cgroup.events\" "
              "&& find \"$d\" -depth -type d -exec rmdir {} ';'; "
              "done; for f in /tmp/pivfarm-systemd-marker-* /var/tmp/pivfarm-systemd-marker-* "
              "/run/pivfarm-systemd-marker-*; do [ -f \"$f\" ] || continue; "
              "kill -0 \"${f##*-}\" 2>/dev/null || rm -f \"$f\"; done; true",
              parent);
    s_host (cmd, 20);
    int n = snprintf (s_cgroup, sizeof s_cgroup, "%s/pivfarm-systemd-test-%d", parent,
                      (int) getpid ());
    if (n < 0 || (size_t) n >= sizeof s_cgroup)
        return "the cgroup2 path is too long";
    if (s_host ("unshare --pid --fork --kill-child --mount --net --uts --ipc --cgroup "
                "--propagation private sh -c 'mount -t tmpfs probe /srv'",
                20)
        != 0) {
        snprintf (why, sizeof why, "cannot unshare namespaces and mount in them: %.4000s", s_out);
        return why;
    }
    return NULL;
}

// Kills the namespace's PID 1 (every process in it dies with it), reaps
// unshare and removes the cgroup subtree. Safe to call twice; registered
// with atexit, so that a failed assertion (exit) still runs it.
static void
s_shutdown (void)
{
    if (s_pid1 > 0)
        kill (s_pid1, SIGKILL);
    s_pid1 = 0;
    if (s_unshare > 0)
        tu_stop (s_unshare, SIGKILL, 10);
    s_unshare = 0;
    if (*s_cgroup) {
        char cmd[17000];
        // Whatever is left in the subtree is killed (cgroup.kill, Linux 5.14);
        // the kernel empties it as the processes go.
        snprintf (cmd, sizeof cmd,
                  "echo 1 >'%s/cgroup.kill' 2>/dev/null; for i in $(seq 100); do grep -q 'populated 0' '%s/cgroup.events' && break; "
                  "sleep 0.1; done; find '%s' -depth -type d -exec rmdir {} ';' 2>/dev/null; "
                  "[ ! -d '%s' ]",
                  s_cgroup, s_cgroup, s_cgroup, s_cgroup);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        char out[256];
        if (tu_run (argv, out, sizeof out, 20) != 0)
            fprintf (stderr, "test_systemd: cannot remove the cgroup '%s'\n", s_cgroup);
        *s_cgroup = 0;
    }
}

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "%s", tu_tmpdir ());
    char *top = realpath (tu_bin (".."), NULL);
    ck_assert_msg (top, "cannot find the source tree from '%s'", tu_bin (".."));
    snprintf (s_top, sizeof s_top, "%s", top);
    free (top);
    *s_cgroup = 0;
    s_unshare = s_pid1 = 0;
    atexit (s_shutdown);
}

static void
s_teardown (void)
{
    s_shutdown ();
    tu_rmtree (s_dir);
}

// A marker file in the host's DIR; its path.
static const char *
s_marker (const char *dir)
{
    static char paths[3][4096];
    static int next;
    char *path = paths[next++ % 3];
    snprintf (path, 4096, "%s/pivfarm-systemd-marker-%d", dir, (int) getpid ());
    tu_spit (path, "keep me\n", 8);
    return path;
}

// What the host's /etc must still hold afterwards.
static const char *s_etc_cmd = "cat /etc/passwd /etc/group; ls -la /etc/systemd/system; "
                               "ls -d /etc/pivfarm /var/lib/pivfarm 2>&1";

// The configuration of the farm in the namespace (/srv/pivfarm is the
// test's farm/ directory, bound there).
static const char *s_conf = "broker\n"
                            "    store = /var/lib/pivfarm/pivfarm.db\n"
                            "watcher\n"
                            "    root = /srv/pivfarm/data\n"
                            "    settle_ms = 200\n"
                            "agent\n"
                            "    threads = 1\n"
                            "    results = /srv/pivfarm/results\n"
                            "    processor = piv\n"
                            "storage\n"
                            "    archive_dir = /srv/pivfarm/archive\n"
                            "    mount_helper = /usr/libexec/pivfarm/pivfarm-mount\n";

// Prints the services' log (the broker's errors) when an assertion fails.
#define S_ASSERT(cond, ...)                                                                   \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            char *log_ = tu_slurp (s_p (s_dir, "services.log"), NULL);                        \
            fprintf (stderr, "test_systemd: services.log:\n%s\n", log_ ? log_ : "(none)");    \
            free (log_);                                                                      \
        }                                                                                     \
        ck_assert_msg (cond, __VA_ARGS__);                                                    \
    } while (0)

// ---------------------------------------------------------------------------
// provision, archive and release through the shipped units

START_TEST (provision_archive_release_work_under_the_shipped_units_and_systemd)
{
    const char *why = s_cannot_boot ();
    if (why) {
        printf ("test_systemd: skipped: systemd cannot boot safely here: %s\n", why);
        return;
    }
    // The host, before.
    const char *markers[] = {s_marker ("/tmp"), s_marker ("/var/tmp"), s_marker ("/run")};
    ck_assert (s_host (s_etc_cmd, 10) >= 0);
    char *etc_before = strdup (s_out);

    // make install PREFIX=/usr DESTDIR=<dir>/inst, the farm, its configuration.
    char cmd[8192];
    snprintf (cmd, sizeof cmd, "make -s -C '%s' install PREFIX=/usr DESTDIR='%s' 2>&1", s_top,
              s_p (s_dir, "inst"));
    ck_assert_msg (s_host (cmd, 280) == 0, "make install: %s", s_out);
    mkdir (s_p (s_dir, "farm"), 0755);
    mkdir (s_p (s_dir, "farm/data"), 0755);
    mkdir (s_p (s_dir, "farm/archive"), 0755);
    mkdir (s_p (s_dir, "farm/results"), 0755);
    tu_spit (s_p (s_dir, "pivfarm.conf"), s_conf, strlen (s_conf));

    // Boot: unshare in the cgroup subtree, systemd-ns.sh as PID 1.
    ck_assert_msg (mkdir (s_cgroup, 0755) == 0, "cannot make the cgroup '%s': %s", s_cgroup,
                   strerror (errno));
    char *argv[] = {"/bin/sh", "-c",
                    "echo $$ >\"$0/cgroup.procs\" && exec unshare --pid --fork "
                    "--kill-child=SIGKILL --mount --mount-proc --net --uts --ipc --cgroup "
                    "--propagation private /bin/sh \"$1\" \"$2\"",
                    s_cgroup, (char *) s_p (s_top, "tests/systemd-ns.sh"), s_dir, NULL};
    s_unshare = tu_spawn (argv, s_p (s_dir, "boot.log"));
    // unshare forks PID 1: its only child.
    for (int i = 0; i < 200 && s_pid1 <= 0; i++) {
        char path[128];
        snprintf (path, sizeof path, "/proc/%d/task/%d/children", s_unshare, s_unshare);
        FILE *f = fopen (path, "r");
        if (!f || fscanf (f, "%d", &s_pid1) != 1)
            s_pid1 = 0;
        if (f)
            fclose (f);
        if (s_pid1 <= 0)
            usleep (50000);
    }
    ck_assert_msg (s_pid1 > 0, "no PID 1 under unshare %d", s_unshare);
    // systemd-ns.sh execs systemd once the namespace is ready.
    int booted = 0;
    for (int i = 0; i < 300 && !booted; i++) {
        char path[64];
        snprintf (path, sizeof path, "/proc/%d/comm", s_pid1);
        char comm[32] = "";
        FILE *f = fopen (path, "r");
        booted = f && fgets (comm, sizeof comm, f) && strncmp (comm, "systemd", 7) == 0;
        if (f)
            fclose (f);
        if (!booted) {
            ck_assert_msg (tu_alive (s_unshare), "the namespace did not boot: %s",
                           tu_slurp (s_p (s_dir, "boot.log"), NULL));
            usleep (100000);
        }
    }
    ck_assert_msg (booted, "PID 1 never became systemd: %s", tu_slurp (s_p (s_dir, "boot.log"), NULL));
    s_in (120, "for i in $(seq 300); do [ -S /run/systemd/private ] && break; sleep 0.1; done; "
               "systemctl is-system-running --wait");
    ck_assert_msg (strstr (s_out, "running") && !strstr (s_out, "degraded"),
                   "systemd did not boot cleanly: %s", s_out);
    // Its target pulled dbus and polkit, and nothing of the host's.
    ck_assert_int_eq (s_in (20, "systemctl is-active dbus.service polkit.service"), 0);
    s_in (20, "systemctl list-units --type=service --state=active --no-legend --plain "
              "| awk '{print $1}' | sort | tr '\\n' ' '");
    ck_assert_str_eq (s_out, "dbus.service polkit.service ");
    // The generator's drop-in is in place.
    s_in (20, "systemctl cat pivfarm-broker.service");
    ck_assert_msg (strstr (s_out, "ReadWritePaths=/var/lib/pivfarm /srv/pivfarm/data "
                                  "/srv/pivfarm/archive"),
                   "no generated ReadWritePaths: %s", s_out);

    // The farm: systemctl start returns once each unit says READY=1.
    int rc = s_in (90, "systemctl start pivfarm-broker.service pivfarm-watcher.service "
                       "pivfarm-agent@pivfarm.service");
    S_ASSERT (rc == 0, "systemctl start: %s", s_out);
    s_in (20, "ps -o user= -p $(systemctl show -p MainPID --value pivfarm-broker.service)");
    ck_assert_msg (strncmp (s_out, "pivfarm", 7) == 0, "the broker runs as %s", s_out);

    // provision: a tmpfs at the experiment's directory, outside the broker's unit.
    rc = s_in (60, "pivctl -c /etc/pivfarm/pivfarm.conf provision exp1 --size 16M --hours 1 "
                   "--tmpfs");
    S_ASSERT (rc == 0 && strstr (s_out, "provisioned exp1: tmpfs"), "provision: %s", s_out);
    s_in (20, "findmnt -n -o FSTYPE,OPTIONS /srv/pivfarm/data/exp1");
    S_ASSERT (strncmp (s_out, "tmpfs ", 6) == 0 && strstr (s_out, "size=16384k"),
              "no tmpfs at /srv/pivfarm/data/exp1 in the root context: %s", s_out);
    // ... seen in the watcher's and the agent's own mount namespaces too,
    // and never on the host.
    const char *seers[] = {"pivfarm-watcher.service", "pivfarm-agent@pivfarm.service"};
    for (int i = 0; i < 2; i++) {
        s_in (20, "nsenter -t $(systemctl show -p MainPID --value %s) -m "
                  "findmnt -n -o FSTYPE /srv/pivfarm/data/exp1",
              seers[i]);
        ck_assert_msg (strncmp (s_out, "tmpfs", 5) == 0, "%s does not see the tmpfs: %s",
                       seers[i], s_out);
    }
    snprintf (cmd, sizeof cmd, "findmnt '%s'", s_p (s_dir, "farm/data/exp1"));
    ck_assert_msg (s_host (cmd, 10) != 0, "the tmpfs leaked to the host: %s", s_out);

    // The camera writes two pairs into the RAM disk; the agent computes them.
    const char *frames[][2] = {{"exp1_001_a_rgb.tiff", "f001_a.tif"},
                               {"exp1_001_b_rgb.tiff", "f001_b.tif"},
                               {"B005_1.tif", "f002_a.tif"},
                               {"B005_2.tif", "f002_b.tif"}};
    // The frames are staged in the farm's directory first: inside, /tmp is
    // a private tmpfs, and the tree (tests/data) may well lie under /tmp.
    mkdir (s_p (s_dir, "farm/src"), 0755);
    for (int i = 0; i < 4; i++) {
        size_t len;
        char *bytes = tu_slurp (tu_data (frames[i][0]), &len);
        ck_assert_msg (bytes != NULL, "cannot read %s", tu_data (frames[i][0]));
        char staged[64];
        snprintf (staged, sizeof staged, "farm/src/%s", frames[i][1]);
        tu_spit (s_p (s_dir, staged), bytes, len);
        free (bytes);
        rc = s_in (20, "cp /srv/pivfarm/src/%s /srv/pivfarm/data/exp1/.%s && mv "
                       "/srv/pivfarm/data/exp1/.%s /srv/pivfarm/data/exp1/%s",
                   frames[i][1], frames[i][1], frames[i][1], frames[i][1]);
        ck_assert_msg (rc == 0, "the camera: %s", s_out);
    }
    int done = 0;
    for (int i = 0; i < 1200 && !done; i++) {
        done = access (s_p (s_dir, "farm/results/exp1/f001.txt"), R_OK) == 0
            && access (s_p (s_dir, "farm/results/exp1/f002.txt"), R_OK) == 0;
        if (!done)
            usleep (100000);
    }
    S_ASSERT (done, "the pairs in the tmpfs were not processed");

    // Issue 28: agents named after their host and instance, and their log
    // lines' priorities in the journal. journald is masked in this boot (the
    // services write to services.log): one runs as a transient service, and
    // a drop-in sends the output of pivfarm-agent@gpu to it.
    s_in (10, "hostname");
    char host[256];
    snprintf (host, sizeof host, "%.*s", (int) strcspn (s_out, "\n"), s_out);
    rc = s_in (60, "mkdir -p /run/pivfarm-test/units/pivfarm-agent@gpu.service.d && "
                   "printf '[Service]\\nStandardOutput=journal\\nStandardError=journal\\n' "
                   ">/run/pivfarm-test/units/pivfarm-agent@gpu.service.d/zz-journal.conf && "
                   "cp -p /etc/pivfarm/pivfarm.conf /etc/pivfarm/gpu.conf && "
                   "systemd-run --unit=pivfarm-test-journald /lib/systemd/systemd-journald && "
                   "for i in $(seq 100); do [ -S /run/systemd/journal/stdout ] && break; "
                   "sleep 0.1; done && systemctl daemon-reload && "
                   "systemctl start pivfarm-agent@gpu.service");
    S_ASSERT (rc == 0, "journald and pivfarm-agent@gpu: %s", s_out);
    char gpu[300], *agents = NULL;
    snprintf (gpu, sizeof gpu, "%s-gpu ", host);
    for (int i = 0; i < 100; i++) {
        s_in (20, "pivctl -c /etc/pivfarm/pivfarm.conf agents | awk '{print $1}' | sort | "
                  "tr '\\n' ' '");
        free (agents);
        agents = strdup (s_out);
        if (strstr (agents, gpu))
            break;
        usleep (100000);
    }
    char both[600];
    snprintf (both, sizeof both, "AGENT %s %s-gpu ", host, host);
    S_ASSERT (strcmp (agents, both) == 0, "pivctl agents lists %s, not %s", agents, both);
    free (agents);
    // A reload that fails: an error line, and nothing else, at -p warning.
    rc = s_in (30, "printf 'agent\\n    no_such_key = 1\\n' >>/etc/pivfarm/gpu.conf && "
                   "systemctl reload pivfarm-agent@gpu.service && sleep 1 && "
                   "journalctl -q --no-pager -o cat -p warning -u pivfarm-agent@gpu.service");
    S_ASSERT (rc == 0 && strncmp (s_out, "error: reload: ", 15) == 0
                  && strstr (s_out, "no_such_key") && !strstr (s_out, "notice"),
              "journalctl -p warning: %d: %s", rc, s_out);
    // Its notices at -p notice, as the agent wrote them but for the time.
    char started[400];
    snprintf (started, sizeof started, "notice: agent '%s-gpu': ", host);
    s_in (30, "journalctl -q --no-pager -o cat -p notice -u pivfarm-agent@gpu.service");
    S_ASSERT (strncmp (s_out, started, strlen (started)) == 0 && !strstr (s_out, "pivfarm-agent"),
              "journalctl -p notice: %s", s_out);
    s_in (60, "systemctl stop pivfarm-agent@gpu.service pivfarm-test-journald.service");

    // archive: verified copies in the archive, the originals gone.
    rc = s_in (120, "pivctl -c /etc/pivfarm/pivfarm.conf archive exp1");
    S_ASSERT (rc == 0 && strstr (s_out, "4 file(s) copied and verified"), "archive: %s", s_out);
    for (int i = 0; i < 4; i++) {
        size_t a = 0, b = 0;
        char *src = tu_slurp (tu_data (frames[i][0]), &a);
        char name[64];
        snprintf (name, sizeof name, "farm/archive/exp1/%s", frames[i][1]);
        char *dst = tu_slurp (s_p (s_dir, name), &b);
        ck_assert_msg (src && dst && a == b && memcmp (src, dst, a) == 0,
                       "the archived %s differs from the camera's", frames[i][1]);
        free (src);
        free (dst);
    }
    // release: unmounted by pivfarm-tmpfs@umount:..., no error in the log.
    rc = s_in (120, "pivctl -c /etc/pivfarm/pivfarm.conf release exp1");
    S_ASSERT (rc == 0 && strstr (s_out, "its allocation is released"), "release: %s", s_out);
    S_ASSERT (s_in (20, "findmnt /srv/pivfarm/data/exp1") != 0,
              "still mounted after the release: %s", s_out);
    char *log = tu_slurp (s_p (s_dir, "services.log"), NULL);
    ck_assert_ptr_nonnull (log);
    ck_assert_msg (strstr (log, "released the tmpfs of 'exp1'") && !strstr (log, "Read-only file system")
                       && !strstr (log, "Operation not permitted")
                       && !strstr (log, "mount helper"),
                   "%s", log);
    free (log);

    // Issue 28: 'pivfarm-deploy HOSTS upgrade' on this host, installed by
    // 'make install PREFIX=/usr' as doc/deploy.md step 4 has it: the store
    // backed up online, the units stopped, the new programs put where the
    // units run them (/usr/bin, the previous ones beside them as .prev),
    // the broker started first, then the watcher and the agent; and the farm
    // computes a pair with them. ssh is nsenter into this namespace (from
    // <dir>/home, /srv/t/home inside), scp a copy into <dir>/home. The new
    // programs are this tree's, each with a line appended (an ELF runs the
    // same with bytes after its end), so that they differ from the old.
    const char *progs[] = {"pivfarm-broker", "pivfarm-watcher", "pivfarm-agent", "pivctl"};
    mkdir (s_p (s_dir, "new"), 0755);
    mkdir (s_p (s_dir, "home"), 0755);
    for (int i = 0; i < 4; i++) {
        snprintf (cmd, sizeof cmd, "cp '%s' '%s' && printf '\\n#pivfarm-upgraded\\n' >>'%s'",
                  tu_bin (progs[i]), s_p (s_p (s_dir, "new"), progs[i]),
                  s_p (s_p (s_dir, "new"), progs[i]));
        ck_assert_msg (s_host (cmd, 10) == 0, "%s", s_out);
    }
    snprintf (cmd, sizeof cmd,
              "#!/bin/sh\nexec /usr/bin/nsenter -t %d -m -u -i -n -p -C /bin/sh -c "
              "\"cd /srv/t/home && $2\"\n",
              s_pid1);
    tu_spit (s_p (s_dir, "ssh"), cmd, strlen (cmd));
    snprintf (cmd, sizeof cmd,
              "#!/bin/sh\nfor last; do :; done\n"
              "while [ $# -gt 1 ]; do cp \"$1\" '%s/home/'\"${last#*:}\" || exit 1; shift; done\n",
              s_dir);
    tu_spit (s_p (s_dir, "scp"), cmd, strlen (cmd));
    chmod (s_p (s_dir, "ssh"), 0755);
    chmod (s_p (s_dir, "scp"), 0755);
    tu_spit (s_p (s_dir, "hosts"), "nas1 broker watcher agent\n", 26);
    snprintf (cmd, sizeof cmd,
              "PIVFARM_SSH='%s' PIVFARM_SCP='%s' PIVFARM_BIN='%s' '%s/deploy/pivfarm-deploy' '%s' "
              "upgrade 2>&1",
              s_p (s_dir, "ssh"), s_p (s_dir, "scp"), s_p (s_dir, "new"), s_top,
              s_p (s_dir, "hosts"));
    rc = s_host (cmd, 240);
    S_ASSERT (rc == 0 && strstr (s_out, "upgrade: done on every host")
                  && strstr (s_out, "the previous ones kept as /usr/bin/<program>.prev"),
              "pivfarm-deploy upgrade: %d:\n%s", rc, s_out);
    char *said = strdup (s_out);
    for (int i = 0; i < 4; i++) {
        s_in (10, "tail -n 1 /usr/bin/%s; tail -n 1 /usr/bin/%s.prev | grep -c upgraded; "
                  "ls /usr/local/bin/%s 2>&1 >/dev/null | grep -c 'No such'",
              progs[i], progs[i], progs[i]);
        S_ASSERT (strcmp (s_out, "#pivfarm-upgraded\n0\n1\n") == 0,
                  "/usr/bin/%s is not the new one with the old beside it, or went elsewhere:\n%s\n"
                  "(pivfarm-deploy said:\n%s)",
                  progs[i], s_out, said);
    }
    free (said);
    // Running, the new programs, from the units; and the backup is there.
    rc = s_in (20, "systemctl is-active pivfarm-broker.service pivfarm-watcher.service "
                   "pivfarm-agent@pivfarm.service && for u in pivfarm-broker pivfarm-watcher "
                   "pivfarm-agent@pivfarm; do readlink /proc/$(systemctl show -p MainPID --value "
                   "$u.service)/exe; done && ls /var/lib/pivfarm | grep -c '^backup-.*\\.db$'");
    S_ASSERT (rc == 0
                  && strstr (s_out, "/usr/bin/pivfarm-broker\n/usr/bin/pivfarm-watcher\n"
                                    "/usr/bin/pivfarm-agent\n1\n"),
              "after the upgrade: %s", s_out);
    rc = s_in (20, "mkdir -p /srv/pivfarm/data/exp2 && chown pivfarm:pivfarm /srv/pivfarm/data/exp2 "
                   "&& for s in a b; do cp /srv/pivfarm/src/f001_$s.tif /srv/pivfarm/data/exp2/.u && "
                   "mv /srv/pivfarm/data/exp2/.u /srv/pivfarm/data/exp2/g001_$s.tif; done");
    S_ASSERT (rc == 0, "the camera after the upgrade: %s", s_out);
    done = 0;
    for (int i = 0; i < 1200 && !done; i++) {
        done = access (s_p (s_dir, "farm/results/exp2/g001.txt"), R_OK) == 0;
        if (!done)
            usleep (100000);
    }
    S_ASSERT (done, "no pair computed after the upgrade");

    // The nightly backup (pivfarm-backup.service, its timer enabled): a
    // verified copy of the store in /var/lib/pivfarm/backups, and only the
    // PIVFARM_BACKUP_KEEP newest kept (2 here, by a drop-in; three older
    // backups there before, and a file of the admin's, which stays).
    rc = s_in (60, "mkdir -p /var/lib/pivfarm/backups && cd /var/lib/pivfarm/backups && "
                   "for d in 20240101 20240102 20240103; do echo old >pivfarm-$d-030000.db; "
                   "touch -d $d pivfarm-$d-030000.db; done && echo mine >notes.txt && "
                   "chown -R pivfarm:pivfarm . && "
                   "mkdir -p /run/pivfarm-test/units/pivfarm-backup.service.d && "
                   "printf '[Service]\\nEnvironment=PIVFARM_BACKUP_KEEP=2\\n' "
                   ">/run/pivfarm-test/units/pivfarm-backup.service.d/keep.conf && "
                   "systemctl daemon-reload && systemctl enable --now pivfarm-backup.timer && "
                   "systemctl is-active pivfarm-backup.timer && "
                   "systemctl start pivfarm-backup.service");
    S_ASSERT (rc == 0, "pivfarm-backup: %d: %s", rc, s_out);
    rc = s_in (10, "ls /var/lib/pivfarm/backups");
    char *listing = strdup (s_out);
    char backup[256] = "";
    int files = 0, mine = 0, newest_old = 0;
    for (char *save, *line = strtok_r (s_out, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        files++;
        mine += strcmp (line, "notes.txt") == 0;
        newest_old += strcmp (line, "pivfarm-20240103-030000.db") == 0;
        if (strncmp (line, "pivfarm-20", 10) == 0 && strcmp (line, "pivfarm-20240103-030000.db") != 0)
            snprintf (backup, sizeof backup, "%s", line);
    }
    S_ASSERT (files == 4 - 1 && mine == 1 && newest_old == 1 && *backup,
              "after the backup, /var/lib/pivfarm/backups holds %d files (the new backup '%s', "
              "the newest old one %d, notes.txt %d):\n%s", files, backup, newest_old, mine, listing);
    free (listing);
    char copy[8400];
    snprintf (copy, sizeof copy, "%s/ovl/var/upper/lib/pivfarm/backups/%s", s_dir, backup);
    int64_t pairs = tu_sql (copy, "SELECT count(*) FROM pairs");
    S_ASSERT (pairs == 3, "the backup %s holds %lld pairs, not the store's 3", backup,
              (long long) pairs);

    // The host, after: its markers and its /etc as they were.
    s_shutdown ();
    for (int i = 0; i < 3; i++) {
        char *m = tu_slurp (markers[i], NULL);
        ck_assert_msg (m && strcmp (m, "keep me\n") == 0, "the host's %s is gone", markers[i]);
        free (m);
        unlink (markers[i]);
    }
    ck_assert (s_host (s_etc_cmd, 10) >= 0);
    ck_assert_str_eq (s_out, etc_before);
    free (etc_before);
    printf ("test_systemd: provision, archive and release ran under systemd with the broker as "
            "the user pivfarm (pivfarm-mount, D-Bus, polkit, pivfarm-tmpfs@); pivfarm-deploy "
            "upgrade replaced /usr/bin's programs and the farm went on\n");
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("systemd");
    TCase *tc = tcase_create ("units");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 600);
    tcase_add_test (tc, provision_archive_release_work_under_the_shipped_units_and_systemd);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
