// test_cluster.c — pivfarm across machines, for real: a one-node Slurm
// (munged, slurmctld and slurmd started by the test, no systemd) launching
// the agents with deploy/slurm/pivfarm-agents.sbatch, and hosts made of
// network namespaces joined by veth pairs, one of whose links is cut while
// pairs are in flight; on those hosts, a year of a farm set up as
// doc/deploy.md says (CURVE, identities, backup, purge, vacuum, upgrade,
// the broker-down alert). Each test needs root and its tools (CI installs them,
// see deploy/deps.sh); without them it says why on stdout and passes.
//
// Cleaning up: whatever a test starts dies with it (PDEATHSIG) or is
// stopped by its teardown; what neither reaches (slurmstepd and the agents
// under Slurm, munged once it changed user, namespaces) is swept after the
// suite by the runner process: every process carrying this run's marker in
// its environment or holding a file open under this run's directory, then
// the namespaces named after this run.

#include "common/jdoc.h"
#include "store/store.h"
#include "tests/testutil.h"

#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#define MARKER "PIVFARM_CLUSTER_TEST" // environment variable naming this run's directory
#define SCRIPT "deploy/slurm/pivfarm-agents.sbatch"
#define USER "pivtest" // the unprivileged user who submits the agents' jobs

static char s_base[4096];  // this run's directory (made by the runner, swept after)
static int s_run_pid;      // the runner's pid: names the namespaces and links
static tu_farm_t s_farm;   // the farm of the running test
static char s_out[1 << 16]; // output of the last s_cmd

// ---------------------------------------------------------------------------
// Small helpers

static int64_t
s_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The path of program 'name' in PATH or the sbin directories (static
// rotating storage), NULL if there is none.
static const char *
s_which (const char *name)
{
    static char slots[4][4096];
    static int next;
    char *buf = slots[next++ % 4];
    const char *path = getenv ("PATH");
    char dirs[8192];
    snprintf (dirs, sizeof dirs, "%s:/usr/sbin:/sbin:/usr/bin:/bin", path ? path : "");
    for (char *save = NULL, *d = strtok_r (dirs, ":", &save); d; d = strtok_r (NULL, ":", &save)) {
        snprintf (buf, 4096, "%s/%s", d, name);
        if (access (buf, X_OK) == 0)
            return buf;
    }
    return NULL;
}

// Why this test cannot run here ("" when it can): not root, or one of the
// programs (NULL-terminated) is missing.
static const char *
s_cannot_run (const char *first, ...)
{
    static char why[1024];
    why[0] = '\0';
    if (geteuid () != 0) {
        snprintf (why, sizeof why, "needs root (it starts daemons and network namespaces)");
        return why;
    }
    va_list ap;
    va_start (ap, first);
    for (const char *p = first; p; p = va_arg (ap, const char *))
        if (!s_which (p)) {
            size_t used = strlen (why);
            snprintf (why + used, sizeof why - used, "%s%s", used ? ", " : "not installed: ", p);
        }
    va_end (ap);
    return why;
}

static void
s_skip (const char *test, const char *why)
{
    printf ("test_cluster: skipped %s: %s\n", test, why);
    fflush (stdout);
}

// Runs the program 'prog' (looked up with s_which) with 'arg' (if not
// NULL) and the arguments of 'ap' (NULL-terminated); output in s_out, its
// exit status returned.
static int
s_cmd_v (const char *prog, const char *arg, va_list ap)
{
    char *argv[64];
    const char *path = s_which (prog);
    argv[0] = (char *) (path ? path : prog);
    int n = 1;
    for (const char *a = arg; a && n < 63; a = va_arg (ap, const char *))
        argv[n++] = (char *) a;
    argv[n] = NULL;
    return tu_run (argv, s_out, sizeof s_out, 60);
}

static int
s_cmd (const char *prog, ...)
{
    va_list ap;
    va_start (ap, prog);
    int rc = s_cmd_v (prog, va_arg (ap, const char *), ap);
    va_end (ap);
    return rc;
}

// 'ip' with the arguments (NULL-terminated), which must succeed.
static void
s_ip (const char *first, ...)
{
    va_list ap;
    va_start (ap, first);
    int rc = s_cmd_v ("ip", first, ap);
    va_end (ap);
    ck_assert_msg (rc == 0, "ip %s ...: exit %d: %s", first, rc, s_out);
}

// A TCP port of 127.0.0.1 nobody listens on right now.
static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    ck_assert (fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    ck_assert (bind (fd, (struct sockaddr *) &sa, sizeof sa) == 0);
    ck_assert (getsockname (fd, (struct sockaddr *) &sa, &len) == 0);
    close (fd);
    return ntohs (sa.sin_port);
}

static void
s_write (const char *path, const char *text)
{
    tu_spit (path, text, strlen (text));
}

// The contents of a /proc file (NUL-terminated, its length in *len_p if
// not NULL; caller frees), NULL if it cannot be read. tu_slurp does not
// serve: these files have no size to seek to.
static char *
s_proc_read (const char *path, size_t *len_p)
{
    FILE *f = fopen (path, "rb");
    if (!f)
        return NULL;
    size_t used = 0, size = 4096;
    char *buf = malloc (size + 1);
    for (size_t n; buf && (n = fread (buf + used, 1, size - used, f)) > 0;) {
        used += n;
        if (used == size) {
            char *more = realloc (buf, 2 * size + 1);
            if (!more)
                free (buf);
            buf = more;
            size *= 2;
        }
    }
    fclose (f);
    if (buf) {
        buf[used] = '\0';
        if (len_p)
            *len_p = used;
    }
    return buf;
}

// The farm's configuration (tu_farm_conf) with the broker's work socket on
// 'work' instead of ipc://, as agents on other hosts need.
static void
s_conf (const char *work, const char *processor, int threads, const char *passes)
{
    tu_farm_conf (&s_farm, processor, threads, passes, "");
    char *text = tu_slurp (s_farm.conf, NULL), line[4200];
    snprintf (line, sizeof line, "    work = ipc://%s/work\n", s_farm.dir);
    char *at = text ? strstr (text, line) : NULL;
    ck_assert_msg (at != NULL, "no '%s' in %s", line, s_farm.conf);
    FILE *f = fopen (s_farm.conf, "w");
    ck_assert (f != NULL);
    fprintf (f, "%.*s    work = %s\n%s", (int) (at - text), text, work, at + strlen (line));
    ck_assert (fclose (f) == 0);
    free (text);
}

// 'pivctl --json agents' of the farm, parsed (caller destroys).
static jdoc_t *
s_agents (void)
{
    char *argv[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "agents", "--json", NULL};
    int rc = tu_run (argv, s_out, sizeof s_out, 30);
    ck_assert_msg (rc == 0, "pivctl agents: exit %d: %s", rc, s_out);
    char err[256];
    jdoc_t *doc = jdoc_parse (s_out, err, sizeof err);
    ck_assert_msg (doc != NULL, "pivctl agents: not JSON (%s): %s", err, s_out);
    return doc;
}

// The index of agent 'id' in 'pivctl agents' (its done count and the
// tasks it holds in *done_p, *tasks_p if not NULL), -1 when the broker does
// not list it.
static int
s_agent_index (const char *id, int64_t *done_p, int64_t *tasks_p)
{
    jdoc_t *doc = s_agents ();
    int found = -1, n = jdoc_length (doc, "$.agents");
    for (int i = 0; i < n && found < 0; i++) {
        const char *name = jdoc_string (doc, "$.agents[%d].id", i);
        if (name && strcmp (name, id) == 0) {
            found = i;
            if (done_p)
                *done_p = jdoc_int (doc, -1, "$.agents[%d].done", i);
            if (tasks_p)
                *tasks_p = jdoc_int (doc, -1, "$.agents[%d].tasks", i);
        }
    }
    jdoc_destroy (&doc);
    return found;
}

// Waits (at most timeout_ms) until the broker lists agent 'id' (listed 1)
// or no longer does (listed 0); returns how long it took, -1 on timeout.
static int64_t
s_wait_listed (const char *id, int listed, int timeout_ms)
{
    int64_t t0 = s_ms ();
    while (s_ms () - t0 < timeout_ms) {
        if ((s_agent_index (id, NULL, NULL) >= 0) == listed)
            return s_ms () - t0;
        usleep (50000);
    }
    return -1;
}

// ---------------------------------------------------------------------------
// The store, read-only, as the witness

#define PAIRS_MAX 64
typedef struct {
    int n;
    int64_t pair[PAIRS_MAX];
    char agent[PAIRS_MAX][64];
    int64_t dispatched_ns[PAIRS_MAX];
} s_pairs_t;

static int
s_add (s_pairs_t *out, int64_t pair, const char *agent, int64_t dispatched_ns)
{
    if (out->n < PAIRS_MAX) {
        out->pair[out->n] = pair;
        snprintf (out->agent[out->n], sizeof out->agent[0], "%s", agent);
        out->dispatched_ns[out->n++] = dispatched_ns;
    }
    return 0;
}

static int
s_pair_cb (void *arg, const store_pair_info_t *p)
{
    return s_add (arg, p->pair, p->agent, p->dispatched_ns);
}

static int
s_result_cb (void *arg, const store_result_info_t *r)
{
    return s_add (arg, r->pair, r->agent, r->dispatched_ns);
}

static int
s_requeue_cb (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
              int64_t pair, const char *payload)
{
    (void) id, (void) kind, (void) experiment;
    const char *agent = strstr (payload, " agent="), *end;
    if (!agent)
        return 0;
    agent += strlen (" agent=");
    end = strstr (agent, " reason=");
    char name[64];
    snprintf (name, sizeof name, "%.*s", end ? (int) (end - agent) : 63, agent);
    return s_add (arg, pair, name, ts_ns);
}

// What the store says of exp1: what (S_PAIRS) the pairs in 'state', with
// the agent each was given to; (S_RESULTS) its results, with the agent that
// gave each; (S_REQUEUES) its requeues, with the agent that lost the pair.
enum { S_PAIRS, S_RESULTS, S_REQUEUES };
static s_pairs_t
s_read (int what, int state)
{
    s_pairs_t out = {0};
    char err[512];
    store_t *store = store_open_readonly (tu_path (s_farm.dir, "farm.db"), err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    store_experiment_t exp;
    if (store_experiment_find (store, "exp1", &exp) == 1) {
        int rc = what == S_RESULTS ? store_results_of (store, exp.id, s_result_cb, &out)
                 : what == S_REQUEUES
                     ? store_events_of_kind (store, exp.id, "requeue", s_requeue_cb, &out)
                     : store_pairs_of (store, exp.id, state, 0, 0, s_pair_cb, &out);
        ck_assert_msg (rc >= 0, "%s", store_error (store));
    }
    store_destroy (&store);
    return out;
}

// How many of 'set' were given to (or recorded from) 'agent' after since_ns.
static int
s_count_of (const s_pairs_t *set, const char *agent, int64_t since_ns)
{
    int n = 0;
    for (int i = 0; i < set->n; i++)
        n += strcmp (set->agent[i], agent) == 0 && set->dispatched_ns[i] > since_ns;
    return n;
}

// The agent whose result 'pair' is in 'results', "" if none.
static const char *
s_result_agent (const s_pairs_t *results, int64_t pair)
{
    for (int i = 0; i < results->n; i++)
        if (results->pair[i] == pair)
            return results->agent[i];
    return "";
}

// ---------------------------------------------------------------------------
// Fixtures

// The runner (before any test is forked): this run's directory, where every
// test's farm goes (TMPDIR), readable by munge; the marker every process
// started from here inherits.
static char s_tmpdir[4096]; // TMPDIR before the runner's setup ("" unset)

static void
s_run_setup (void)
{
    s_run_pid = (int) getpid ();
    snprintf (s_tmpdir, sizeof s_tmpdir, "%s", getenv ("TMPDIR") ? getenv ("TMPDIR") : "");
    snprintf (s_base, sizeof s_base, "%s", tu_tmpdir ());
    chmod (s_base, 0755);
    setenv ("TMPDIR", s_base, 1);
    setenv (MARKER, s_base, 1);
}

// 1 if process 'pid' carries this run's marker or holds a file open under
// this run's directory.
static int
s_ours (const char *pid)
{
    char path[64], marker[4200];
    snprintf (marker, sizeof marker, "%s=%s", MARKER, s_base);
    snprintf (path, sizeof path, "/proc/%s/environ", pid);
    size_t len = 0;
    char *env = s_proc_read (path, &len);
    int ours = 0;
    for (size_t i = 0; env && i < len && !ours; i += strlen (env + i) + 1)
        ours = strcmp (env + i, marker) == 0;
    free (env);
    snprintf (path, sizeof path, "/proc/%s/fd", pid);
    DIR *fds = ours ? NULL : opendir (path);
    size_t base_len = strlen (s_base);
    for (struct dirent *e; fds && !ours && (e = readdir (fds));) {
        char link[600], target[4096];
        snprintf (link, sizeof link, "%s/%s", path, e->d_name);
        ssize_t n = readlink (link, target, sizeof target - 1);
        if (n > (ssize_t) base_len) {
            target[n] = '\0';
            ours = strncmp (target, s_base, base_len) == 0 && target[base_len] == '/';
        }
    }
    if (fds)
        closedir (fds);
    return ours;
}

// Removes /etc/netns/<ns> (s_name_nas1), and /etc/netns if that leaves it
// empty.
static void
s_unname (const char *ns)
{
    char dir[300];
    snprintf (dir, sizeof dir, "/etc/netns/%s", ns);
    unlink (tu_path (dir, "hosts"));
    rmdir (dir);
    rmdir ("/etc/netns");
}

// The runner, after every test: kills what the tests left running (by the
// marker and the directory of this run only), removes the namespaces named
// after this run and the directory.
static void
s_run_teardown (void)
{
    for (int round = 0; round < 3; round++) {
        DIR *proc = opendir ("/proc");
        int killed = 0;
        for (struct dirent *e; proc && (e = readdir (proc));) {
            int pid = atoi (e->d_name);
            if (pid > 0 && pid != s_run_pid && s_ours (e->d_name))
                killed += kill (pid, SIGKILL) == 0;
        }
        if (proc)
            closedir (proc);
        if (!killed)
            break;
        usleep (200000);
    }
    // The user a test made (and nothing of it runs any more).
    if (access (tu_path (s_base, "made-user"), F_OK) == 0 && s_cmd ("userdel", "-f", USER, NULL) != 0)
        fprintf (stderr, "test_cluster: cannot remove the user '%s': %s\n", USER, s_out);
    for (const char *h = "abc"; *h; h++) {
        char ns[64], path[128];
        snprintf (ns, sizeof ns, "pivfarm-%d-%c", s_run_pid, *h);
        snprintf (path, sizeof path, "/run/netns/%s", ns);
        if (access (path, F_OK) == 0 && s_cmd ("ip", "netns", "del", ns, NULL) != 0)
            fprintf (stderr, "test_cluster: cannot remove network namespace '%s': %s\n", ns,
                     s_out);
        s_unname (ns);
    }
    tu_rmtree (s_base);
    // As it was, for the next test case's runner setup.
    if (*s_tmpdir)
        setenv ("TMPDIR", s_tmpdir, 1);
    else
        unsetenv ("TMPDIR");
    unsetenv (MARKER);
}

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
    chmod (s_farm.dir, 0755);  // munged (user munge) reaches its directory below
}

// ---------------------------------------------------------------------------
// A one-node Slurm

typedef struct {
    char dir[1000];    // <farm>/slurm
    char conf[1024];   // its slurm.conf
    char host[256];    // the node: this host's short name
    int cpus;          // the node's CPUs
    int munged, slurmctld, slurmd;  // pids, 0 when not running
    char job[32];      // the job of the agents ("" none)
} s_slurm_t;

static s_slurm_t s_slurm;

// Starts munged as user munge with a new key, slurmctld and slurmd on
// 127.0.0.1 in <farm>/slurm, and waits until the node is idle.
static void
s_slurm_start (void)
{
    s_slurm_t *s = &s_slurm;
    ck_assert (strlen (s_farm.dir) < 900);
    snprintf (s->dir, sizeof s->dir, "%.900s/slurm", s_farm.dir);
    snprintf (s->conf, sizeof s->conf, "%.990s/slurm.conf", s->dir);
    const char *munge_dir = tu_path (s->dir, "munge");
    ck_assert (mkdir (s->dir, 0755) == 0 && mkdir (munge_dir, 0755) == 0);
    ck_assert (mkdir (tu_path (s->dir, "state"), 0755) == 0);
    ck_assert (mkdir (tu_path (s->dir, "spool"), 0755) == 0);
    // munged insists on its own key (0600, its user's) and directory.
    struct passwd *munge = getpwnam ("munge");
    ck_assert_msg (munge != NULL, "no user 'munge' (the munge package makes it)");
    unsigned char key[1024];
    ck_assert (getrandom (key, sizeof key, 0) == (ssize_t) sizeof key);
    const char *key_path = tu_path (munge_dir, "munge.key");
    tu_spit (key_path, key, sizeof key);
    ck_assert (chmod (key_path, 0600) == 0);
    ck_assert (chown (key_path, munge->pw_uid, munge->pw_gid) == 0);
    ck_assert (chown (munge_dir, munge->pw_uid, munge->pw_gid) == 0);
    char socket_opt[4200], key_opt[4200], pid_opt[4200], seed_opt[4200], log_opt[4200];
    snprintf (socket_opt, sizeof socket_opt, "--socket=%s/munge.sock", munge_dir);
    snprintf (key_opt, sizeof key_opt, "--key-file=%s", key_path);
    snprintf (pid_opt, sizeof pid_opt, "--pid-file=%s/munged.pid", munge_dir);
    snprintf (seed_opt, sizeof seed_opt, "--seed-file=%s/munged.seed", munge_dir);
    snprintf (log_opt, sizeof log_opt, "--log-file=%s/munged.log", munge_dir);
    char *munged[] = {(char *) s_which ("setpriv"), "--reuid=munge", "--regid=munge",
                      "--init-groups", (char *) s_which ("munged"), "--foreground", key_opt,
                      socket_opt, pid_opt, seed_opt, log_opt, NULL};
    s->munged = tu_spawn (munged, tu_path (s->dir, "munged.out"));
    const char *sock = tu_path (munge_dir, "munge.sock");
    for (int i = 0; i < 100 && access (sock, F_OK) != 0 && tu_alive (s->munged); i++)
        usleep (50000);
    char *log = tu_slurp (tu_path (s->dir, "munged.out"), NULL);
    ck_assert_msg (access (sock, F_OK) == 0, "munged did not start: %s", log ? log : "");
    free (log);

    // The node: this host by its short name at 127.0.0.1, its real CPUs,
    // 90% of its memory; nothing that needs cgroups.
    gethostname (s->host, sizeof s->host);
    s->host[sizeof s->host - 1] = '\0';
    s->host[strcspn (s->host, ".")] = '\0';
    s->cpus = (int) sysconf (_SC_NPROCESSORS_ONLN);
    struct sysinfo si;
    ck_assert (sysinfo (&si) == 0);
    long mem_mb = (long) ((double) si.totalram * si.mem_unit / 1048576 * 0.9);
    char text[16384];
    snprintf (text, sizeof text,
              "ClusterName=pivfarmtest\n"
              "SlurmctldHost=%s(127.0.0.1)\n"
              "SlurmctldPort=%d\n"
              "SlurmdPort=%d\n"
              "SlurmUser=root\n"
              "SlurmdUser=root\n"
              "AuthType=auth/munge\n"
              "AuthInfo=socket=%s\n"
              "CredType=cred/munge\n"
              "StateSaveLocation=%s/state\n"
              "SlurmdSpoolDir=%s/spool\n"
              "SlurmctldPidFile=%s/slurmctld.pid\n"
              "SlurmdPidFile=%s/slurmd.pid\n"
              "SlurmctldLogFile=%s/slurmctld.log\n"
              "SlurmdLogFile=%s/slurmd.log\n"
              "ProctrackType=proctrack/linuxproc\n"
              "TaskPlugin=task/none\n"
              "SelectType=select/cons_tres\n"
              "SelectTypeParameters=CR_Core_Memory\n"
              "DefMemPerCPU=512\n"
              "MailProg=/bin/true\n"
              "MpiDefault=none\n"
              "ReturnToService=2\n"
              "KillWait=10\n"
              "JobAcctGatherType=jobacct_gather/none\n"
              "AccountingStorageType=accounting_storage/none\n"
              "NodeName=%s NodeAddr=127.0.0.1 CPUs=%d RealMemory=%ld State=UNKNOWN\n"
              // A limit below the 8 h the script once asked for, which left
              // its jobs pending for good on such a partition.
              "PartitionName=test Nodes=%s Default=YES MaxTime=60 State=UP\n",
              s->host, s_free_port (), s_free_port (), sock, s->dir, s->dir, s->dir, s->dir,
              s->dir, s->dir, s->host, s->cpus, mem_mb, s->host);
    s_write (s->conf, text);
    setenv ("SLURM_CONF", s->conf, 1);  // for sbatch, squeue, scancel and the job's srun
    char *ctld[] = {(char *) s_which ("slurmctld"), "-D", "-i", "-f", s->conf, NULL};
    s->slurmctld = tu_spawn (ctld, tu_path (s->dir, "slurmctld.out"));
    char *d[] = {(char *) s_which ("slurmd"), "-D", "-f", s->conf, NULL};
    s->slurmd = tu_spawn (d, tu_path (s->dir, "slurmd.out"));
    int idle = 0;
    for (int i = 0; i < 150 && !idle; i++) {
        idle = s_cmd ("sinfo", "-h", "-N", "-o", "%t", NULL) == 0 && strncmp (s_out, "idle", 4) == 0;
        if (!idle)
            usleep (200000);
    }
    ck_assert_msg (idle, "the Slurm node is not idle (%s); see %s/slurmctld.log, slurmd.log", s_out,
                   s->dir);
}

// Waits until the job is no longer in squeue (1) or timeout_s passed (0).
static int
s_slurm_wait_gone (int timeout_s)
{
    s_slurm_t *s = &s_slurm;
    if (!*s->job)
        return 1;
    for (int i = 0; i < timeout_s * 5; i++) {
        if (s_cmd ("squeue", "-h", "-j", s->job, NULL) != 0 || !*s_out) {
            s->job[0] = '\0';
            return 1;
        }
        usleep (200000);
    }
    return 0;
}

// Cancels the job, waits until Slurm has ended it (1) or not (0).
static int
s_slurm_cancel (int timeout_s)
{
    if (!*s_slurm.job)
        return 1;
    s_cmd ("scancel", s_slurm.job, NULL);
    return s_slurm_wait_gone (timeout_s);
}

// Stops what s_slurm_start started, by pid: the job first.
static void
s_slurm_stop (void)
{
    s_slurm_t *s = &s_slurm;
    if (s->slurmctld && s->slurmd)
        s_slurm_cancel (20);
    tu_stop (s->slurmd, SIGTERM, 10);
    tu_stop (s->slurmctld, SIGTERM, 10);
    tu_stop (s->munged, SIGTERM, 10);
    memset (s, 0, sizeof *s);
    unsetenv ("SLURM_CONF");
}

// The batch script of the deployment kit (absolute path).
static const char *
s_script (void)
{
    static char path[4096];
    char *top = realpath (tu_bin (".."), NULL);
    ck_assert (top != NULL);
    snprintf (path, sizeof path, "%s/%s", top, SCRIPT);
    free (top);
    return path;
}

// Renders n pairs <prefix>_0001 ... of 1024 x 1024 in the farm's src/.
static void
s_render (int n, const char *prefix)
{
    char count[16], out[4200];
    snprintf (count, sizeof count, "%d", n);
    snprintf (out, sizeof out, "%s/src/%s", s_farm.dir, prefix);
    char *argv[] = {(char *) tu_bin ("pivfarm-synth"), "--size", "1024x1024", "--count", count,
                    "-o", out, NULL};
    ck_assert_msg (tu_run (argv, s_out, sizeof s_out, 60) == 0, "%s", s_out);
}

// ---------------------------------------------------------------------------
// The submitting user: unprivileged, with a directory of its own

static uid_t s_uid;          // USER's uid and gid
static gid_t s_gid;
static char s_user_dir[4200]; // <farm>/user, USER's
static char s_user_conf[4300]; // its configuration there
static char s_stray[4200];    // a file of USER's found outside s_user_dir

// USER (made with useradd, no home, if absent: the runner removes it after
// the suite); its uid and gid in s_uid, s_gid.
static void
s_user (void)
{
    struct passwd *pw = getpwnam (USER);
    if (!pw) {
        int rc = s_cmd ("useradd", "-M", "-r", "-s", "/usr/sbin/nologin", USER, NULL);
        ck_assert_msg (rc == 0, "useradd %s: exit %d: %s", USER, rc, s_out);
        s_write (tu_path (s_base, "made-user"), USER "\n");
        pw = getpwnam (USER);
        ck_assert_msg (pw != NULL, "useradd made no user '%s'", USER);
    }
    s_uid = pw->pw_uid;
    s_gid = pw->pw_gid;
}

// <farm>/user, owned by USER, and in it USER's own copy of the farm's
// configuration (mode 0600, USER's; the watch root made absolute) with
// agent/results 'results' (relative to the file: ./results is
// <farm>/user/results).
static void
s_user_setup (const char *results)
{
    snprintf (s_user_dir, sizeof s_user_dir, "%s/user", s_farm.dir);
    snprintf (s_user_conf, sizeof s_user_conf, "%s/pivfarm.conf", s_user_dir);
    ck_assert (mkdir (s_user_dir, 0755) == 0 || access (s_user_dir, F_OK) == 0);
    ck_assert (chown (s_user_dir, s_uid, s_gid) == 0);
    char *text = tu_slurp (s_farm.conf, NULL);
    ck_assert (text != NULL);
    const char *root = "    root = ./data\n", *res = "    results = ./results\n";
    char *at_root = strstr (text, root), *at_res = strstr (text, res);
    ck_assert_msg (at_root && at_res && at_root < at_res, "unexpected %s", s_farm.conf);
    FILE *f = fopen (s_user_conf, "w");
    ck_assert (f != NULL);
    fprintf (f, "%.*s    root = %s/data\n%.*s    results = %s\n%s", (int) (at_root - text), text,
             s_farm.dir, (int) (at_res - at_root - strlen (root)), at_root + strlen (root),
             results, at_res + strlen (res));
    ck_assert (fclose (f) == 0);
    free (text);
    ck_assert (chown (s_user_conf, s_uid, s_gid) == 0 && chmod (s_user_conf, 0600) == 0);
}

// Submits the batch script as USER (runuser: 'sbatch --uid' is root's
// only) with PIVFARM_CONF 'conf', from and into s_user_dir (TMPDIR too; the
// job's output
// is <user dir>/agents-<job>.out: its path in 'output'); the job in
// s_slurm.job.
static void
s_submit (const char *conf, const char *work, char *output, size_t size)
{
    setenv ("PIVFARM_CONF", conf, 1);
    char opt[4300];
    snprintf (opt, sizeof opt, "--output=%s/agents-%%j.out", s_user_dir);
    char tmp[4300];  // the run's TMPDIR is root's: slurmstepd would say so in the output
    snprintf (tmp, sizeof tmp, "TMPDIR=%s", s_user_dir);
    int rc = s_cmd ("runuser", "-u", USER, "--", s_which ("env"), tmp, s_which ("sbatch"),
                    "--parsable", "--nodes=1", opt, "--chdir", s_user_dir, s_script (), work, NULL);
    ck_assert_msg (rc == 0, "sbatch as %s: exit %d: %s", USER, rc, s_out);
    snprintf (s_slurm.job, sizeof s_slurm.job, "%.*s", (int) strcspn (s_out, ";\n"), s_out);
    snprintf (output, size, "%s/agents-%s.out", s_user_dir, s_slurm.job);
}

// Up to 'max' pids of this run's processes named 'comm' that job 'job'
// started (SLURM_JOB_ID in their environment); their count.
static int
s_job_procs (const char *job, const char *comm, int *pids, int max)
{
    char want_job[64], want_marker[4200];
    snprintf (want_job, sizeof want_job, "SLURM_JOB_ID=%s", job);
    snprintf (want_marker, sizeof want_marker, "%s=%s", MARKER, s_base);
    int n = 0;
    DIR *proc = opendir ("/proc");
    for (struct dirent *e; proc && n < max && (e = readdir (proc));) {
        int pid = atoi (e->d_name);
        char path[64];
        snprintf (path, sizeof path, "/proc/%d/comm", pid);
        char *name = pid > 0 ? s_proc_read (path, NULL) : NULL;
        int match = name && strncmp (name, comm, strlen (comm)) == 0 && name[strlen (comm)] == '\n';
        free (name);
        size_t len = 0;
        snprintf (path, sizeof path, "/proc/%d/environ", pid);
        char *env = match ? s_proc_read (path, &len) : NULL;
        int job_seen = 0, marker_seen = 0;
        for (size_t i = 0; env && i < len; i += strlen (env + i) + 1) {
            job_seen |= strcmp (env + i, want_job) == 0;
            marker_seen |= strcmp (env + i, want_marker) == 0;
        }
        free (env);
        if (job_seen && marker_seen)
            pids[n++] = pid;
    }
    if (proc)
        closedir (proc);
    return n;
}

// The "Uid:" and "Gid:" lines of /proc/<pid>/status (real, effective, saved
// and file-system ids) into 'ids'.
static void
s_ids_of (int pid, char *ids, size_t size)
{
    char path[64];
    snprintf (path, sizeof path, "/proc/%d/status", pid);
    char *status = s_proc_read (path, NULL);
    ck_assert_msg (status != NULL, "process %d is gone", pid);
    const char *uid = strstr (status, "\nUid:"), *gid = strstr (status, "\nGid:");
    ck_assert (uid && gid);
    snprintf (ids, size, "%.*s %.*s", (int) strcspn (uid + 1, "\n"), uid + 1,
              (int) strcspn (gid + 1, "\n"), gid + 1);
    free (status);
}

// 1 if 'path' is 'dir' or beneath it.
static int
s_beneath (const char *path, const char *dir)
{
    size_t len = strlen (dir);
    return strncmp (path, dir, len) == 0 && (path[len] == '/' || !path[len]);
}

// nftw: the first entry of USER's outside s_user_dir into s_stray. Slurm's
// own directory is not USER's doing: slurmd (root) gives the job's copy of
// the batch script in its spool to the job's user.
static int
s_stray_cb (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) flag, (void) ftw;
    int inside = s_beneath (path, s_user_dir) || s_beneath (path, s_slurm.dir);
    if (!inside && st->st_uid == s_uid && !*s_stray)
        snprintf (s_stray, sizeof s_stray, "%s", path);
    return 0;
}

// A file or directory of USER's in the farm outside its own directory
// ("" when there is none).
static const char *
s_user_stray (void)
{
    s_stray[0] = '\0';
    nftw (s_farm.dir, s_stray_cb, 16, FTW_PHYS);
    return s_stray;
}

// The result files of exp1 the store records (their paths).
typedef struct {
    int n;
    char path[PAIRS_MAX][1024];
} s_paths_t;

static int
s_path_cb (void *arg, const store_result_info_t *r)
{
    s_paths_t *out = arg;
    if (out->n < PAIRS_MAX)
        snprintf (out->path[out->n++], sizeof out->path[0], "%s", r->path ? r->path : "");
    return 0;
}

static s_paths_t
s_result_paths (void)
{
    s_paths_t out = {0};
    char err[512];
    store_t *store = store_open_readonly (tu_path (s_farm.dir, "farm.db"), err, sizeof err);
    ck_assert_msg (store != NULL, "%s", err);
    store_experiment_t exp;
    ck_assert (store_experiment_find (store, "exp1", &exp) == 1);
    ck_assert_msg (store_results_of (store, exp.id, s_path_cb, &out) >= 0, "%s",
                   store_error (store));
    store_destroy (&store);
    return out;
}

START_TEST (slurm_runs_the_agents_and_scancel_leaves_no_task_dispatched)
{
    const char *why = s_cannot_run ("munged", "setpriv", "slurmctld", "slurmd", "sbatch", "srun",
                                    "squeue", "sinfo", "scancel", "runuser", "useradd", NULL);
    if (*why) {
        s_skip ("the Slurm test", why);
        return;
    }
    if (access (s_script (), R_OK) != 0) {
        s_skip ("the Slurm test", "no " SCRIPT " in this tree");
        return;
    }
    s_user ();
    s_render (16, "s");
    int64_t t0 = s_ms ();
    s_slurm_start ();
    int64_t t_slurm = s_ms ();
    // Agents connect over TCP, as from another node; PIV slow enough (1024 x
    // 1024, 8 px windows) that a cancel finds tasks in flight.
    char work[64];
    snprintf (work, sizeof work, "tcp://127.0.0.1:%d", s_free_port ());
    s_conf (work, "piv", 1, "32,16,8");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);

    // Submitted by USER, unprivileged, with its own configuration and
    // results directory (the broker's store and configuration stay root's).
    s_user_setup ("./results");
    char *agent = realpath (tu_bin ("pivfarm-agent"), NULL);
    ck_assert (agent != NULL);
    setenv ("PIVFARM_AGENT", agent, 1);
    free (agent);
    char output[4400];
    s_submit (s_user_conf, work, output, sizeof output);
    char id[512];
    snprintf (id, sizeof id, "%s-slurm", s_slurm.host);
    int64_t waited = s_wait_listed (id, 1, 30000);
    char *job_out = tu_slurp (output, NULL);
    ck_assert_msg (waited >= 0, "agent '%s' never joined; job output: %s", id,
                   job_out ? job_out : "(none)");
    free (job_out);
    // The job runs under the partition's limit (the script sets none).
    ck_assert_msg (s_cmd ("scontrol", "show", "job", "-o", s_slurm.job, NULL) == 0
                       && strstr (s_out, " TimeLimit=01:00:00 "),
                   "job %s: %s", s_slurm.job, s_out);
    // pivctl agents shows it, with a worker per CPU Slurm gave it.
    char *argv[] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf, "agents", NULL};
    ck_assert_int_eq (tu_run (argv, s_out, sizeof s_out, 30), 0);
    ck_assert_msg (strstr (s_out, id) && strstr (s_out, s_slurm.host), "%s", s_out);
    jdoc_t *doc = s_agents ();
    ck_assert_int_eq (jdoc_length (doc, "$.agents"), 1);
    ck_assert_int_eq (jdoc_int (doc, -1, "$.agents[0].cores"), s_slurm.cpus);
    jdoc_destroy (&doc);
    int64_t t_joined = s_ms ();
    // The agent the job started runs as USER: real, effective, saved and
    // file-system ids.
    int pids[8];
    int nagents = s_job_procs (s_slurm.job, "pivfarm-agent", pids, 8);
    ck_assert_msg (nagents == 1, "%d pivfarm-agent process(es) of job %s", nagents, s_slurm.job);
    char ids[256], want[256];
    s_ids_of (pids[0], ids, sizeof ids);
    snprintf (want, sizeof want, "Uid:\t%d\t%d\t%d\t%d Gid:\t%d\t%d\t%d\t%d", (int) s_uid,
              (int) s_uid, (int) s_uid, (int) s_uid, (int) s_gid, (int) s_gid, (int) s_gid,
              (int) s_gid);
    ck_assert_msg (strcmp (ids, want) == 0, "agent %d of job %s: '%s', expected %s's '%s'",
                   pids[0], s_slurm.job, ids, USER, want);

    // A first batch, all through the Slurm agent.
    tu_farm_land (&s_farm, "s", 1, 6, 0);
    tu_counts_t c = tu_farm_wait_done (&s_farm, 6, 60);
    ck_assert_msg (c.done == 6 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    s_pairs_t results = s_read (S_RESULTS, 0);
    ck_assert_int_eq (results.n, 6);
    ck_assert_int_eq (s_count_of (&results, id, 0), 6);
    int64_t t_batch = s_ms ();
    // Its result files are USER's, in USER's results directory; nothing of
    // USER's is anywhere else in the farm, and the farm's own agent/results
    // (root's configuration) was never made.
    s_paths_t paths = s_result_paths ();
    ck_assert_int_eq (paths.n, 6);
    char results_dir[4400];
    snprintf (results_dir, sizeof results_dir, "%s/results/", s_user_dir);
    for (int i = 0; i < paths.n; i++) {
        struct stat st;
        ck_assert_msg (strncmp (paths.path[i], results_dir, strlen (results_dir)) == 0,
                       "result '%s' is not under %s", paths.path[i], results_dir);
        ck_assert_msg (lstat (paths.path[i], &st) == 0 && S_ISREG (st.st_mode), "no result '%s'",
                       paths.path[i]);
        ck_assert_msg (st.st_uid == s_uid, "result '%s' is owned by uid %d, not %s's %d",
                       paths.path[i], (int) st.st_uid, USER, (int) s_uid);
    }
    ck_assert_msg (!*s_user_stray (), "'%s' is %s's, outside %s", s_stray, USER, s_user_dir);
    ck_assert_msg (access (tu_path (s_farm.dir, "results"), F_OK) != 0,
                   "the farm's own results directory was made");

    // Requeued (a preemption does the same): the agent stops, handing back
    // what it holds, and the job comes back as itself, its agent under the
    // same id.
    int64_t t_requeue = s_ms ();
    ck_assert_msg (s_cmd ("scontrol", "requeue", s_slurm.job, NULL) == 0, "scontrol requeue %s: %s",
                   s_slurm.job, s_out);
    ck_assert_msg (s_wait_listed (id, 0, 30000) >= 0, "agent '%s' still listed after the requeue",
                   id);
    // Slurm holds a requeued job back (its BeginTime some 2 min on); an
    // administrator in a hurry, as here, lets it start now, once the job is
    // back in the queue and its node idle again. Slurm may also start it at
    // once by itself while the first run's processes still end: it then
    // fails at launch (FAILED, RunTime 00:00:00, ExitCode 1:0, its script
    // never run), and the administrator requeues it again once the node is
    // idle (doc/deploy.md, "Requeue and preemption").
    int requeues = 1;
    waited = -1;
    for (int i = 0; i < 60 && waited < 0; i++) {
        s_cmd ("scontrol", "show", "job", "-o", s_slurm.job, NULL);
        int held = strstr (s_out, "JobState=PENDING") && strstr (s_out, "Reason=BeginTime");
        int failed_at_launch = strstr (s_out, "JobState=FAILED") && strstr (s_out, "RunTime=00:00:00")
                               && strstr (s_out, "ExitCode=1:0");
        int idle = (held || failed_at_launch)
                   && s_cmd ("sinfo", "-h", "-n", s_slurm.host, "-o", "%T", NULL) == 0
                   && strncmp (s_out, "idle", 4) == 0;
        if (held && idle)
            s_cmd ("scontrol", "update", "JobId", s_slurm.job, "StartTime=now", NULL);
        else if (failed_at_launch && idle && requeues < 4) {
            ck_assert_msg (s_cmd ("scontrol", "requeue", s_slurm.job, NULL) == 0,
                           "scontrol requeue %s after a failed launch: %s", s_slurm.job, s_out);
            requeues++;
        }
        waited = s_wait_listed (id, 1, 2000);
    }
    job_out = tu_slurp (output, NULL);
    char node_state[1024] = "";
    if (waited < 0) {
        s_cmd ("sinfo", "-h", "-N", "-n", s_slurm.host, "-o", "%T %E", NULL);
        snprintf (node_state, sizeof node_state, "%.1000s", s_out);
        s_cmd ("scontrol", "show", "job", "-o", s_slurm.job, NULL);
    }
    ck_assert_msg (waited >= 0,
                   "agent '%s' never came back after %d requeue(s); job output: %s; node: %s; %s",
                   id, requeues, job_out ? job_out : "(none)", node_state, s_out);
    char restart[32];
    snprintf (restart, sizeof restart, "(restart %d)", requeues);
    ck_assert_msg (job_out && strstr (job_out, restart), "no '%s' in: %s", restart,
                   job_out ? job_out : "(none)");
    free (job_out);
    int64_t t_back = s_ms ();

    // A second batch, cancelled while the agent holds tasks: it finishes
    // those, takes no more, and the broker is left with nothing dispatched.
    tu_farm_land (&s_farm, "s", 7, 16, 0);
    c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 600 && (c.done < 7 || c.dispatched < 1); i++, c = tu_farm_counts (&s_farm))
        usleep (10000);
    s_pairs_t held = s_read (S_PAIRS, STORE_DISPATCHED);
    ck_assert_msg (held.n >= 1 && c.done < 16, "done %lld dispatched %d", (long long) c.done,
                   held.n);
    int64_t t_cancel = s_ms ();
    ck_assert_msg (s_slurm_cancel (30), "job %s still in squeue 30 s after scancel", s_slurm.job);
    int64_t t_gone = s_ms ();
    ck_assert_msg (s_wait_listed (id, 0, 5000) >= 0, "agent '%s' still listed after its job ended",
                   id);
    // The pairs it did not take wait, pending, for the next agent.
    c = tu_farm_counts (&s_farm);
    ck_assert_msg (c.dispatched == 0 && c.failed == 0 && c.pending > 0 && c.done + c.pending == 16,
                   "after scancel: done %lld pending %lld dispatched %lld failed %lld",
                   (long long) c.done, (long long) c.pending, (long long) c.dispatched,
                   (long long) c.failed);
    results = s_read (S_RESULTS, 0);
    for (int i = 0; i < held.n; i++)
        ck_assert_msg (strcmp (s_result_agent (&results, held.pair[i]), id) == 0,
                       "pair %lld, in flight at scancel, has no result from '%s'",
                       (long long) held.pair[i], id);
    job_out = tu_slurp (output, NULL);
    ck_assert_msg (job_out && strstr (job_out, "stopped:")
                       && !strstr (job_out, "pivfarm-agent warning"),
                   "the agent did not stop cleanly: %s", job_out ? job_out : "(no output)");
    free (job_out);
    printf ("test_cluster: Slurm up in %lld ms, agent joined in %lld ms, 6 pairs in %lld ms; "
            "requeued and back in %lld ms; "
            "scancel with %d task(s) in flight: job gone in %lld ms, %lld done, %lld pending\n",
            (long long) (t_slurm - t0), (long long) (t_joined - t_slurm),
            (long long) (t_batch - t_joined), (long long) (t_back - t_requeue), held.n,
            (long long) (t_gone - t_cancel), (long long) c.done, (long long) c.pending);
}
END_TEST

// Submits the batch script as USER with configuration 'conf' and expects
// it refused: the job ends with exit status 2 and its output is one line,
// which contains 'expected'.
static void
s_expect_refused (const char *conf, const char *expected)
{
    char output[4400], job[32];
    s_submit (conf, "tcp://127.0.0.1:9", output, sizeof output);
    snprintf (job, sizeof job, "%s", s_slurm.job);
    ck_assert_msg (s_slurm_wait_gone (30), "job %s still in squeue after 30 s", job);
    int rc = s_cmd ("scontrol", "show", "job", "-o", job, NULL);
    ck_assert_msg (rc == 0 && strstr (s_out, " ExitCode=2:0"), "job %s: %s", job, s_out);
    char *said = tu_slurp (output, NULL);
    ck_assert_msg (said && strstr (said, expected) && strchr (said, '\n') == said + strlen (said) - 1,
                   "job %s said '%s', expected one line with '%s'", job, said ? said : "(nothing)",
                   expected);
    free (said);
}

START_TEST (slurm_refuses_a_configuration_results_directory_or_key_its_user_cannot_use)
{
    const char *why = s_cannot_run ("munged", "setpriv", "slurmctld", "slurmd", "sbatch", "squeue",
                                    "sinfo", "scontrol", "runuser", "useradd", NULL);
    if (*why) {
        s_skip ("the Slurm refusal test", why);
        return;
    }
    if (access (s_script (), R_OK) != 0) {
        s_skip ("the Slurm refusal test", "no " SCRIPT " in this tree");
        return;
    }
    s_user ();
    s_slurm_start ();
    setenv ("PIVFARM_AGENT", "/bin/false", 1);  // never reached
    char expected[16384], user[64];
    snprintf (user, sizeof user, "%s (uid %d)", USER, (int) s_uid);
    // The broker's configuration, root's and 0600: USER cannot read it.
    s_user_setup ("./results");
    ck_assert (chmod (s_farm.conf, 0600) == 0);
    snprintf (expected, sizeof expected,
              "pivfarm-agents: cannot read the configuration '%s' as %s: give PIVFARM_CONF a copy "
              "this user can read (doc/deploy.md)\n",
              s_farm.conf, user);
    s_expect_refused (s_farm.conf, expected);
    // USER's own configuration, its results in the farm's directory, root's.
    char results[4200];
    snprintf (results, sizeof results, "%s/results", s_farm.dir);
    s_user_setup (results);
    snprintf (expected, sizeof expected,
              "pivfarm-agents: the results directory '%s' (agent/results of '%s') is not "
              "writable by %s: give PIVFARM_CONF a configuration whose agent/results this user "
              "can write (doc/deploy.md)\n",
              results, s_user_conf, user);
    s_expect_refused (s_user_conf, expected);
    // CURVE on, the agent's secret key root's (0600): the agent's own check
    // on the node refuses the job before any agent starts.
    s_user_setup ("./results");
    char keys[4300];
    snprintf (keys, sizeof keys, "%s/keys", s_farm.dir);
    ck_assert (mkdir (keys, 0755) == 0);
    for (int k = 0; k < 2; k++) {
        char *gen[] = {(char *) tu_bin ("pivctl"), "keygen", k ? "node1" : "broker", "-o", keys,
                       NULL};
        ck_assert_msg (tu_run (gen, s_out, sizeof s_out, 30) == 0, "keygen: %s", s_out);
    }
    FILE *f = fopen (s_user_conf, "a");
    ck_assert (f != NULL);
    fprintf (f, "security\n    curve = on\n    client_cert = %s/node1.cert\n"
                "    broker_cert = %s/broker.cert\n", keys, keys);
    ck_assert (fclose (f) == 0);
    char *agent = realpath (tu_bin ("pivfarm-agent"), NULL);
    ck_assert (agent != NULL);
    setenv ("PIVFARM_AGENT", agent, 1);
    free (agent);
    snprintf (expected, sizeof expected,
              "pivfarm-agents: cannot read the secret certificate '%s/node1.cert_secret'", keys);
    s_expect_refused (s_user_conf, expected);
    // Neither job wrote anything but its output.
    ck_assert_msg (access (results, F_OK) != 0, "'%s' was made", results);
    ck_assert_msg (!*s_user_stray (), "'%s' is %s's, outside %s", s_stray, USER, s_user_dir);
}
END_TEST

// ---------------------------------------------------------------------------
// Hosts as network namespaces: the broker (and the watcher) on host a,
// agents on hosts b and c, each linked to a by a veth pair of its own
// subnet: a 10.210.1.1 - b 10.210.1.2, a 10.210.2.1 - c 10.210.2.2.

static char s_ns[3][64];  // the namespaces of hosts a, b, c
static char s_link[3][16]; // the agents' ends of the links (b, c; [0] unused)

// Makes the three hosts; "" or why they cannot be made.
static const char *
s_hosts_make (void)
{
    static char why[1024];
    for (int h = 0; h < 3; h++) {
        snprintf (s_ns[h], sizeof s_ns[h], "pivfarm-%d-%c", s_run_pid, 'a' + h);
        snprintf (s_link[h], sizeof s_link[h], "pf%d%c", s_run_pid, 'a' + h);
    }
    if (s_cmd ("ip", "netns", "add", s_ns[0], NULL) != 0) {
        snprintf (why, sizeof why, "cannot make a network namespace: ip netns add: %.900s", s_out);
        s_ns[0][0] = '\0';
        return why;
    }
    for (int h = 1; h < 3; h++)
        s_ip ("netns", "add", s_ns[h], NULL);
    for (int h = 0; h < 3; h++)
        s_ip ("-n", s_ns[h], "link", "set", "lo", "up", NULL);
    for (int h = 1; h < 3; h++) {
        // Made right inside the namespaces: nothing appears on this host.
        char a_end[16], a_addr[32], addr[32];
        snprintf (a_end, sizeof a_end, "pf%da%c", s_run_pid, 'a' + h);
        snprintf (a_addr, sizeof a_addr, "10.210.%d.1/24", h);
        snprintf (addr, sizeof addr, "10.210.%d.2/24", h);
        int rc = s_cmd ("ip", "link", "add", a_end, "netns", s_ns[0], "type", "veth", "peer",
                        "name", s_link[h], "netns", s_ns[h], NULL);
        ck_assert_msg (rc == 0, "ip link add %s type veth: %s", a_end, s_out);
        s_ip ("-n", s_ns[0], "addr", "add", a_addr, "dev", a_end, NULL);
        s_ip ("-n", s_ns[h], "addr", "add", addr, "dev", s_link[h], NULL);
        s_ip ("-n", s_ns[0], "link", "set", a_end, "up", NULL);
        s_ip ("-n", s_ns[h], "link", "set", s_link[h], "up", NULL);
    }
    return "";
}

// Removes the namespaces (their links go with them).
static void
s_hosts_remove (void)
{
    for (int h = 0; h < 3; h++)
        if (*s_ns[h]) {
            s_cmd ("ip", "netns", "del", s_ns[h], NULL);
            s_unname (s_ns[h]);
        }
    memset (s_ns, 0, sizeof s_ns);
}

// Gives host h the name 'nas1' for host a's address on its link: 'ip
// netns exec' mounts /etc/netns/<namespace>/hosts over /etc/hosts, so the
// configurations name the broker's host as doc/deploy.md does.
static void
s_name_nas1 (int h)
{
    char dir[300], text[128];
    mkdir ("/etc/netns", 0755);
    snprintf (dir, sizeof dir, "/etc/netns/%s", s_ns[h]);
    ck_assert_msg (mkdir (dir, 0755) == 0, "cannot make '%s'", dir);
    snprintf (text, sizeof text, "127.0.0.1 localhost\n10.210.%d.1 nas1\n", h ? h : 1);
    s_write (tu_path (dir, "hosts"), text);
    chmod (tu_path (dir, "hosts"), 0644);
}

// Whatever the test started, in order: the Slurm job and daemons, the
// farm (its processes hold the namespaces), the namespaces.
static void
s_teardown (void)
{
    s_slurm_stop ();
    tu_farm_release (&s_farm);
    s_hosts_remove ();
}

// Starts bin/<program> -c conf and the arguments (NULL-terminated) on host
// h, its output into <farm>/<log>; returns its pid.
// argv (of 'max' slots) for bin/<program> -c conf and the arguments of
// 'ap' (NULL-terminated) on host h.
static void
s_argv_on (char **argv, int max, int h, const char *program, va_list ap)
{
    char *head[] = {(char *) s_which ("ip"), "netns", "exec", s_ns[h], (char *) tu_bin (program),
                    "-c", s_farm.conf};
    int n = 0;
    for (; n < 7; n++)
        argv[n] = head[n];
    for (const char *a = va_arg (ap, const char *); a && n < max - 1; a = va_arg (ap, const char *))
        argv[n++] = (char *) a;
    argv[n] = NULL;
}

static int
s_start_on (int h, const char *program, const char *log, ...)
{
    char *argv[32];
    va_list ap;
    va_start (ap, log);
    s_argv_on (argv, 32, h, program, ap);
    va_end (ap);
    return tu_spawn (argv, tu_path (s_farm.dir, log));
}

// n stand-in pairs <prefix>_<first..last>_{a,b}.tif in src/ (the exec
// processor does not read them).
static void
s_stand_ins (const char *prefix, int first, int last)
{
    for (int i = first; i <= last; i++)
        for (int side = 0; side < 2; side++) {
            char name[256];
            snprintf (name, sizeof name, "src/%s_%04d_%c.tif", prefix, i, side ? 'b' : 'a');
            s_write (tu_path (s_farm.dir, name), "frame\n");
        }
}

START_TEST (an_agent_cut_off_the_network_loses_its_tasks_to_the_other_and_rejoins)
{
    const char *why = s_cannot_run ("ip", NULL);
    if (!*why)
        why = s_hosts_make ();
    if (*why) {
        s_skip ("the network namespace test", why);
        return;
    }
    // Every task takes 0.4 s on the agent's host, so that tasks are in flight.
    const char *script = tu_path (s_farm.dir, "slow.sh");
    s_write (script, "#!/bin/sh\n/bin/sleep 0.4\necho \"x y u v flags\" > \"$3\"\n");
    chmod (script, 0755);
    char processor[4200];
    snprintf (processor, sizeof processor, "exec:%s", script);
    s_conf ("tcp://*:5551", processor, 2, "32,16");
    s_stand_ins ("n", 1, 28);

    s_farm.broker = s_start_on (0, "pivfarm-broker", "broker.log", NULL);
    for (int i = 0; i < 100 && access (tu_path (s_farm.dir, "farm.db"), F_OK) != 0; i++)
        usleep (50000);
    ck_assert_msg (tu_alive (s_farm.broker), "the broker did not start (see broker.log)");
    s_farm.watcher = s_start_on (0, "pivfarm-watcher", "watcher.log", NULL);
    s_farm.agents[0] = s_start_on (1, "pivfarm-agent", "agent-b.log", "--broker",
                                   "tcp://10.210.1.1:5551", "--id", "host-b", NULL);
    s_farm.agents[1] = s_start_on (2, "pivfarm-agent", "agent-c.log", "--broker",
                                   "tcp://10.210.2.1:5551", "--id", "host-c", NULL);
    ck_assert_msg (s_wait_listed ("host-b", 1, 10000) >= 0, "host-b never joined");
    ck_assert_msg (s_wait_listed ("host-c", 1, 10000) >= 0, "host-c never joined");

    // Pairs flow to both; host b's link goes down while it holds tasks (as
    // the broker sees it: the store may lag behind).
    tu_farm_land (&s_farm, "n", 1, 16, 0);
    int64_t b_done = 0, b_tasks = 0;
    for (int i = 0; i < 500 && !(b_done >= 1 && b_tasks >= 1); i++)
        if (s_agent_index ("host-b", &b_done, &b_tasks) < 0 || !(b_done >= 1 && b_tasks >= 1))
            usleep (10000);
    ck_assert_msg (b_done >= 1 && b_tasks >= 1, "host-b never held a task after a result");
    int64_t t_cut = s_ms ();
    s_ip ("-n", s_ns[1], "link", "set", s_link[1], "down", NULL);
    int64_t dead_ms = s_wait_listed ("host-b", 0, 10000);
    ck_assert_msg (dead_ms >= 0, "the broker still lists host-b 10 s after its link went down");

    // Host c finishes everything, the tasks taken from host b included;
    // nothing is recorded twice.
    tu_counts_t c = tu_farm_wait_done (&s_farm, 16, 60);
    ck_assert_msg (c.done == 16 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    int64_t t_done = s_ms ();
    s_pairs_t results = s_read (S_RESULTS, 0), lost = s_read (S_REQUEUES, 0);
    ck_assert_int_eq (results.n, 16);
    int moved = s_count_of (&lost, "host-b", 0);
    ck_assert_msg (moved >= 1, "no task of host-b was requeued (%d requeue(s))", lost.n);
    for (int i = 0; i < lost.n; i++)
        ck_assert_msg (strcmp (s_result_agent (&results, lost.pair[i]), "host-c") == 0,
                       "pair %lld, taken from the cut host-b, was recorded from '%s'",
                       (long long) lost.pair[i], s_result_agent (&results, lost.pair[i]));

    // The link back: host b rejoins and takes work again.
    int64_t up_ns = s_now_ns ();
    s_ip ("-n", s_ns[1], "link", "set", s_link[1], "up", NULL);
    int64_t rejoin_ms = s_wait_listed ("host-b", 1, 40000);
    ck_assert_msg (rejoin_ms >= 0, "host-b did not rejoin within 40 s of its link coming back");
    tu_farm_land (&s_farm, "n", 17, 28, 0);
    c = tu_farm_wait_done (&s_farm, 28, 60);
    ck_assert_msg (c.done == 28 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    results = s_read (S_RESULTS, 0);
    ck_assert_int_eq (results.n, 28);
    int b_after = s_count_of (&results, "host-b", up_ns);
    b_done = -1;
    ck_assert (s_agent_index ("host-b", &b_done, NULL) >= 0);
    ck_assert_msg (b_after >= 1 && b_done >= 1,
                   "host-b recorded %d result(s) after it rejoined (pivctl agents: done %lld)",
                   b_after, (long long) b_done);
    printf ("test_cluster: link cut with %d task(s) on host-b: presumed dead after %lld ms, "
            "host-c done at %lld ms; link up: host-b back in %lld ms, %d of 12 new pairs\n",
            moved, (long long) dead_ms, (long long) (t_done - t_cut), (long long) rejoin_ms,
            b_after);
}
END_TEST

// ---------------------------------------------------------------------------
// A year of the farm (issue 28), as an admin following doc/deploy.md meets
// it: host a is nas1 (broker, watcher, status page, the operators' pivctl),
// hosts b and c are nodes, each with its own configuration file and keys.

// The directory of host h's own files (<farm>/host-a, ...), made on first use.
static const char *
s_host_dir (int h)
{
    static char dir[3][3000];
    snprintf (dir[h], sizeof dir[h], "%.2900s/host-%c", s_farm.dir, 'a' + h);
    mkdir (dir[h], 0755);
    return dir[h];
}

// 'pivctl keygen NAME -o DIR', which must succeed.
static void
s_keygen_into (const char *name, const char *dir)
{
    char *argv[] = {(char *) tu_bin ("pivctl"), "keygen", (char *) name, "-o", (char *) dir, NULL};
    int rc = tu_run (argv, s_out, sizeof s_out, 30);
    ck_assert_msg (rc == 0, "pivctl keygen %s -o %s: exit %d: %s", name, dir, rc, s_out);
}

// Copies the file 'from' to 'to' with 'mode'.
static void
s_install (const char *from, const char *to, mode_t mode)
{
    tu_copy (from, to);
    ck_assert (chmod (to, mode) == 0);
}

// pivctl on host a (its configuration, s_farm.conf) as the user whose home
// is <farm>/<user> (their ~/.config/pivfarm/client.cert), with the words
// (NULL-terminated): its exit status, its output in s_out.
static int
s_pivctl_on_a (const char *user, ...)
{
    char *argv[40];
    va_list ap;
    va_start (ap, user);
    s_argv_on (argv, 40, 0, "pivctl", ap);
    va_end (ap);
    char home[4200];
    snprintf (home, sizeof home, "%s/%s", s_farm.dir, user);
    setenv ("HOME", home, 1);
    int rc = tu_run (argv, s_out, sizeof s_out, 60);
    unsetenv ("HOME");
    return rc;
}

// An operator's or a reader's own key pair in their ~/.config/pivfarm/
// (doc/security.md), its public part authorised in the broker's 'clients'.
static void
s_person (const char *user, const char *clients)
{
    char dir[4200], from[4300], to[4300];
    snprintf (dir, sizeof dir, "%s/%s", s_farm.dir, user);
    mkdir (dir, 0755);
    mkdir (tu_path (dir, ".config"), 0700);
    snprintf (dir, sizeof dir, "%s/%s/.config/pivfarm", s_farm.dir, user);
    mkdir (dir, 0700);
    const char *keys = tu_path (s_farm.dir, "keys");
    s_keygen_into (user, keys);
    snprintf (from, sizeof from, "%s/%s.cert", keys, user);
    s_install (from, tu_path (dir, "client.cert"), 0644);
    snprintf (to, sizeof to, "%s/%s.cert", clients, user);
    s_install (from, to, 0644);
    snprintf (from, sizeof from, "%s/%s.cert_secret", keys, user);
    s_install (from, tu_path (dir, "client.cert_secret"), 0600);
}

// Starts an agent on node h with its host's own configuration and 'id'.
static int
s_node_agent (int h, const char *id)
{
    char conf[4300], log[32], keep[4096];
    snprintf (conf, sizeof conf, "%s/pivfarm.conf", s_host_dir (h));
    snprintf (log, sizeof log, "agent-%c.log", 'a' + h);
    snprintf (keep, sizeof keep, "%s", s_farm.conf);
    snprintf (s_farm.conf, sizeof s_farm.conf, "%.4000s", conf);
    int pid = s_start_on (h, "pivfarm-agent", log, "--id", id, NULL);
    snprintf (s_farm.conf, sizeof s_farm.conf, "%s", keep);
    return pid;
}

// The frames first .. last of src/ written into data/<exp>/ (frame B last).
static void
s_land_exp (const char *exp, int first, int last)
{
    mkdir (tu_path (s_farm.dir, tu_path ("data", exp)), 0755);
    for (int i = first; i <= last; i++)
        for (int side = 0; side < 2; side++) {
            char from[4200], to[4200], part[4300];
            snprintf (from, sizeof from, "%s/src/y_%04d_%c.tif", s_farm.dir, i, side ? 'b' : 'a');
            snprintf (to, sizeof to, "%s/data/%s/y_%04d_%c.tif", s_farm.dir, exp, i,
                      side ? 'b' : 'a');
            snprintf (part, sizeof part, "%s/data/%s/.y_%04d_%c.tif.part", s_farm.dir, exp, i,
                      side ? 'b' : 'a');
            s_install (from, part, 0644);
            ck_assert (rename (part, to) == 0);
        }
}

// The pairs of 'exp' in 'state' (2 done) as the store has them.
static int64_t
s_pairs_of (const char *exp, int state)
{
    return tu_farm_sql (&s_farm,
                        "SELECT count(*) FROM pairs p JOIN experiments e ON e.id = p.experiment"
                        " WHERE e.name = '%s' AND p.state = %d",
                        exp, state);
}

// Waits until 'n' pairs of 'exp' are done (at most timeout_s): the count.
static int64_t
s_wait_exp (const char *exp, int64_t n, int timeout_s)
{
    int64_t done = s_pairs_of (exp, 2);
    for (int i = 0; i < timeout_s * 10 && done < n; i++) {
        usleep (100000);
        done = s_pairs_of (exp, 2);
    }
    return done;
}

// The status page's answer to 'query', run on host a as the web server's
// user (nobody: root reads every file) with host a's configuration; its
// body (in s_out).
static const char *
s_page (const char *query)
{
    setenv ("PIVFARM_CONF", s_farm.conf, 1);
    setenv ("REQUEST_METHOD", "GET", 1);
    setenv ("QUERY_STRING", query, 1);
    char *argv[] = {(char *) s_which ("ip"), "netns", "exec", s_ns[0], "/usr/bin/setpriv",
                    "--reuid=65534", "--regid=65534", "--clear-groups",
                    (char *) tu_bin ("pivfarm.cgi"), NULL};
    int rc = tu_run (argv, s_out, sizeof s_out, 30);
    unsetenv ("QUERY_STRING");
    unsetenv ("REQUEST_METHOD");
    unsetenv ("PIVFARM_CONF");
    ck_assert_msg (rc == 0, "pivfarm.cgi: exit %d: %.500s", rc, s_out);
    const char *body = strstr (s_out, "\r\n\r\n");
    ck_assert_msg (body != NULL, "no end of headers: %.500s", s_out);
    return body + 4;
}

// The shipped alert rules, deploy/prometheus/pivfarm.rules.yml.
static const char *
s_rules_file (void)
{
    static char path[4200];
    snprintf (path, sizeof path, "%s/../deploy/prometheus/pivfarm.rules.yml", tu_bin (""));
    return path;
}

// pivfarm_broker_up of the status page's metrics on nas1, which must be
// there.
static int
s_broker_up (void)
{
    const char *body = s_page ("format=prometheus");
    const char *at = strstr (body, "\npivfarm_broker_up ");
    ck_assert_msg (at != NULL, "no pivfarm_broker_up in the page's metrics: %.3000s", body);
    return atoi (at + strlen ("\npivfarm_broker_up "));
}

// A promtool unit test of the shipped rules (its path): the page of nas1
// serving pivfarm_broker_up 'up' for 10 min; PivfarmBrokerDown expected at
// 5 min when it is 0, no alert when 1.
static const char *
s_broker_down_test (int up)
{
    static char path[4200];
    snprintf (path, sizeof path, "%s/broker-%d.test.yml", s_farm.dir, up);
    char text[8192];
    int n = snprintf (text, sizeof text,
                      "rule_files:\n  - '%s'\n"
                      "evaluation_interval: 1m\n"
                      "tests:\n"
                      "  - interval: 1m\n"
                      "    input_series:\n"
                      "      - series: 'pivfarm_broker_up{instance=\"nas1\",job=\"pivfarm\"}'\n"
                      "        values: '%dx10'\n"
                      "    alert_rule_test:\n"
                      "      - eval_time: 5m\n"
                      "        alertname: PivfarmBrokerDown\n",
                      s_rules_file (), up);
    if (up)
        n += snprintf (text + n, sizeof text - (size_t) n, "        exp_alerts: []\n");
    else
        n += snprintf (text + n, sizeof text - (size_t) n,
                       "        exp_alerts:\n"
                       "          - exp_labels: {severity: critical, instance: nas1, job: pivfarm}\n"
                       "            exp_annotations:\n"
                       "              summary: 'pivfarm broker down (nas1)'\n"
                       "              description: 'The status page at nas1 gets no answer from the"
                       " broker for 1 min: no pair is dispatched or recorded. journalctl -u"
                       " pivfarm-broker; systemctl status pivfarm-broker.'\n");
    ck_assert ((size_t) n < sizeof text);
    s_write (path, text);
    return path;
}

START_TEST (a_year_of_the_farm_set_up_from_deploy_md_with_curve_on_three_hosts)
{
    const char *why = s_cannot_run ("ip", "setpriv", NULL);
    if (!*why)
        why = s_hosts_make ();
    if (*why) {
        s_skip ("the year of the farm", why);
        return;
    }
    unsetenv ("PIVFARM_CERT");
    unsetenv ("XDG_CONFIG_HOME");
    const char *d = s_farm.dir;
    // Step 11: the store's directory is the broker's, 0750, its group
    // (pivfarm) the web server's user's too (nobody's group here), and
    // what the broker writes there is 0640 (its unit's UMask=0027): the
    // page reads the store and may write nothing beside it.
    ck_assert (chown (d, 0, 65534) == 0 && chmod (d, 02750) == 0);
    umask (027);
    for (int h = 0; h < 3; h++)
        s_name_nas1 (h);
    // Step 5 of doc/deploy.md: keys (doc/security.md). nas1's certs: the
    // broker's pair, the watcher's and the page's; the clients directory.
    char certs[3100], clients[3200], sub[3300], from[3400], to[3400];
    snprintf (certs, sizeof certs, "%s/certs", s_host_dir (0));
    mkdir (certs, 0755);
    snprintf (clients, sizeof clients, "%s/clients", certs);
    mkdir (clients, 0755);
    static const char *const roles[] = {"agents", "watchers", "operators"};
    for (int i = 0; i < 3; i++) {
        snprintf (sub, sizeof sub, "%s/%s", clients, roles[i]);
        mkdir (sub, 0755);
    }
    mkdir (tu_path (d, "keys"), 0700);
    s_keygen_into ("broker", certs);
    s_keygen_into ("watcher", certs);
    s_keygen_into ("page", certs);
    snprintf (from, sizeof from, "%s/watcher.cert", certs);
    snprintf (to, sizeof to, "%s/watchers/watcher.cert", clients);
    s_install (from, to, 0644);
    snprintf (from, sizeof from, "%s/page.cert", certs);
    snprintf (to, sizeof to, "%s/page.cert", clients);  // the page: a reader
    s_install (from, to, 0644);
    // page.cert_secret: the web server's user's alone (nobody here).
    snprintf (from, sizeof from, "%s/page.cert_secret", certs);
    ck_assert (chown (from, 65534, 65534) == 0 && chmod (from, 0600) == 0);
    // The nodes' own: the agent's pair and a copy of the broker's public key.
    s_keygen_into ("agent", tu_path (d, "keys"));
    snprintf (from, sizeof from, "%s/keys/agent.cert", d);
    snprintf (to, sizeof to, "%s/agents/agent.cert", clients);
    s_install (from, to, 0644);
    for (int h = 1; h < 3; h++) {
        char node[3100];
        snprintf (node, sizeof node, "%s/certs", s_host_dir (h));
        mkdir (node, 0755);
        snprintf (from, sizeof from, "%s/broker.cert", certs);
        s_install (from, tu_path (node, "broker.cert"), 0644);
        snprintf (from, sizeof from, "%s/keys/agent.cert", d);
        s_install (from, tu_path (node, "agent.cert"), 0644);
        snprintf (from, sizeof from, "%s/keys/agent.cert_secret", d);
        s_install (from, tu_path (node, "agent.cert_secret"), 0600);
    }
    // alice an operator, bob a reader, each with their own pair.
    snprintf (sub, sizeof sub, "%s/operators", clients);
    s_person ("alice", sub);
    s_person ("bob", clients);

    // "The configuration of a cluster": nas1's file, absolute paths, the
    // broker binding every interface and the watcher connecting to nas1
    // (the name of host a on each host, s_name_nas1); the control socket on
    // loopback, the default.
    char text[1 << 15];
    snprintf (text, sizeof text,
              "broker\n"
              "    ingest = tcp://*:5550\n"
              "    work = tcp://*:5551\n"
              "    store = %s/farm.db\n"
              "watcher\n"
              "    root = %s/data\n"
              "    broker = tcp://nas1:5550\n"
              "    resend_ms = 100\n"
              "agent\n"
              "    broker = tcp://nas1:5551\n"
              "    results = %s/results\n"
              "security\n"
              "    curve = on\n"
              "    broker_cert = %s/broker.cert\n"
              "    watcher_cert = %s/watcher.cert\n"
              "    page_cert = %s/page.cert\n"
              "    clients = %s\n"
              "    operators = %s/operators\n",
              d, d, d, certs, certs, certs, clients, clients);
    s_write (s_farm.conf, text);
    // Each node's own file: its broker address, its agent key.
    for (int h = 1; h < 3; h++) {
        snprintf (text, sizeof text,
                  "watcher\n"
                  "    root = %s/data\n"
                  "agent\n"
                  "    broker = tcp://nas1:5551\n"
                  "    results = %s/results\n"
                  "    processor = piv\n"
                  "    threads = 1\n"
                  "piv\n"
                  "    passes = 32,16\n"
                  "    iterations = 1\n"
                  "security\n"
                  "    curve = on\n"
                  "    broker_cert = %s/certs/broker.cert\n"
                  "    agent_cert = %s/certs/agent.cert\n",
                  d, d, s_host_dir (h), s_host_dir (h));
        s_write (tu_path (s_host_dir (h), "pivfarm.conf"), text);
    }
    tu_farm_render (&s_farm, 10, "y");

    // Step 7: the broker and the watcher on nas1, an agent on each node.
    s_farm.broker = s_start_on (0, "pivfarm-broker", "broker.log", NULL);
    for (int i = 0; i < 100 && access (tu_path (d, "farm.db"), F_OK) != 0; i++)
        usleep (50000);
    ck_assert_msg (tu_alive (s_farm.broker), "the broker did not start (see broker.log)");
    struct stat st;
    ck_assert (stat (tu_path (d, "farm.db"), &st) == 0);
    ck_assert_msg ((st.st_mode & 07777) == 0640 && st.st_gid == 65534, "the store: mode %o, gid %d",
                   (unsigned) (st.st_mode & 07777), (int) st.st_gid);
    s_farm.watcher = s_start_on (0, "pivfarm-watcher", "watcher.log", NULL);
    s_farm.agents[0] = s_node_agent (1, "node-b");
    s_farm.agents[1] = s_node_agent (2, "node-c");
    int listed = 0;
    for (int i = 0; i < 100 && listed < 2; i++) {
        int rc = s_pivctl_on_a ("bob", "agents", "--json", NULL);
        ck_assert_msg (rc == 0, "bob's pivctl agents: exit %d: %s", rc, s_out);
        char err[256];
        jdoc_t *doc = jdoc_parse (s_out, err, sizeof err);
        ck_assert_msg (doc != NULL, "pivctl agents: not JSON (%s): %s", err, s_out);
        listed = jdoc_length (doc, "$.agents");
        // Each says its host, though nas1's name alone resolves there.
        for (int k = 0; k < listed; k++) {
            const char *host = jdoc_string (doc, "$.agents[%d].host", k);
            ck_assert_msg (host && *host, "an agent without its host: %s", s_out);
        }
        jdoc_destroy (&doc);
        if (listed < 2)
            usleep (100000);
    }
    if (listed != 2) {
        char *b = tu_slurp (tu_path (d, "agent-b.log"), NULL);
        char *c = tu_slurp (tu_path (d, "agent-c.log"), NULL);
        ck_abort_msg ("%d agent(s) joined of node-b and node-c: %s\nagent-b.log: %.1500s\n"
                      "agent-c.log: %.1500s", listed, s_out, b ? b : "", c ? c : "");
    }

    // Pairs flow to both nodes.
    tu_farm_land (&s_farm, "y", 1, 6, 0);
    s_land_exp ("exp2", 1, 2);
    ck_assert_int_eq (s_wait_exp ("exp1", 6, 60), 6);
    ck_assert_int_eq (s_wait_exp ("exp2", 2, 60), 2);
    s_pairs_t results = s_read (S_RESULTS, 0);
    ck_assert_int_eq (results.n, 6);  // exp1's
    ck_assert_msg (s_count_of (&results, "node-b", 0) >= 1 && s_count_of (&results, "node-c", 0) >= 1,
                   "results of node-b %d, of node-c %d", s_count_of (&results, "node-b", 0),
                   s_count_of (&results, "node-c", 0));

    // The operators: alice changes things, bob reads and is refused (403).
    int rc = s_pivctl_on_a ("alice", "pause", NULL);
    ck_assert_msg (rc == 0, "alice's pause: exit %d: %s", rc, s_out);
    rc = s_pivctl_on_a ("bob", "status", NULL);
    ck_assert_msg (rc == 0, "bob's status: exit %d: %s", rc, s_out);
    rc = s_pivctl_on_a ("bob", "resume", NULL);
    ck_assert_msg (rc == 1 && strcmp (s_out, "pivctl: refused: 'resume' changes the farm and your "
                                             "key is not an operator's\n") == 0,
                   "bob's resume: exit %d: %s", rc, s_out);
    ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", "control: refused 'resume' to key ", 0),
                   "the broker did not log its 403 to bob's resume");
    rc = s_pivctl_on_a ("alice", "resume", NULL);
    ck_assert_msg (rc == 0, "alice's resume: exit %d: %s", rc, s_out);
    // The page, as the web server's user with its own key, sees the farm.
    char err[256];
    jdoc_t *page = jdoc_parse (s_page ("format=json"), err, sizeof err);
    ck_assert_msg (page != NULL, "the page's JSON (%s): %.1000s", err, s_out);
    ck_assert_msg (jdoc_bool (page, 0, "$.broker.reachable") == 1, "the page: %.2000s", s_out);
    jdoc_destroy (&page);
    // doc/storage.md: the store backed up online by an operator (a
    // reader's backup refused), the old experiment purged with its frames,
    // the room given back by a vacuum.
    char copy[3100];
    snprintf (copy, sizeof copy, "%s/backup-1.db", s_host_dir (0));
    rc = s_pivctl_on_a ("bob", "backup", copy, NULL);
    ck_assert_msg (rc == 1 && strstr (s_out, "refused") && access (copy, F_OK) != 0,
                   "bob's backup: exit %d: %s", rc, s_out);
    rc = s_pivctl_on_a ("alice", "backup", copy, NULL);
    ck_assert_msg (rc == 0 && strstr (s_out, "integrity ok"), "alice's backup: exit %d: %s", rc,
                   s_out);
    ck_assert_int_eq (tu_sql (copy, "SELECT count(*) FROM pairs WHERE state = 2"), 8);
    rc = s_pivctl_on_a ("bob", "purge", "exp2", NULL);
    ck_assert_msg (rc == 1 && strstr (s_out, "refused"), "bob's purge: exit %d: %s", rc, s_out);
    rc = s_pivctl_on_a ("alice", "purge", "exp2", "--files", NULL);
    ck_assert_msg (rc == 0 && strstr (s_out, "purged exp2: 2 pairs, 2 results, 4 files")
                       && strstr (s_out, "frames: 4 removed"),
                   "alice's purge: exit %d: %s", rc, s_out);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments WHERE name = 'exp2'"),
                      0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results"), 6);
    ck_assert_int_eq (tu_entries (tu_path (d, "data/exp2")), 0);
    rc = s_pivctl_on_a ("alice", "vacuum", "--json", NULL);
    ck_assert_msg (rc == 0, "alice's vacuum: exit %d: %s", rc, s_out);
    jdoc_t *vacuum = jdoc_parse (s_out, err, sizeof err);
    ck_assert_msg (vacuum != NULL, "vacuum: not JSON (%s): %s", err, s_out);
    int64_t before = jdoc_int (vacuum, 0, "$.vacuum.bytes_before");
    int64_t after = jdoc_int (vacuum, 0, "$.vacuum.bytes_after");
    jdoc_destroy (&vacuum);
    ck_assert (stat (tu_path (d, "farm.db"), &st) == 0);
    ck_assert_msg (after > 0 && after < before && st.st_size == after,
                   "vacuum: %lld -> %lld bytes, the file %lld", (long long) before,
                   (long long) after, (long long) st.st_size);
    ck_assert_int_eq (tu_sql (tu_path (d, "farm.db"), "SELECT count(*) FROM pairs WHERE state = 2"),
                      6);
    // Each host's file has the same heartbeat (the default): no agent was
    // taken for dead, idle for longer than the broker's liveness (3 s) too.
    usleep (3500000);
    ck_assert_msg (tu_farm_log_count (&s_farm, "broker.log", "presumed dead") == 0,
                   "an agent was presumed dead (see broker.log)");

    // deploy.md "Upgrades", by hand: the backup, the agents stopped, then
    // the watcher and the broker; the new programs find a store of the
    // previous schema (made so here), which the broker migrates after its
    // own backup; then the watcher and the agents again.
    snprintf (copy, sizeof copy, "%s/backup-20261203-041500.db", s_host_dir (0));
    rc = s_pivctl_on_a ("alice", "backup", copy, NULL);
    ck_assert_msg (rc == 0 && strstr (s_out, "integrity ok"), "the upgrade's backup: exit %d: %s",
                   rc, s_out);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq (tu_stop (s_farm.agents[k], SIGTERM, 10), 0);
        s_farm.agents[k] = 0;
    }
    ck_assert_int_eq (tu_stop (s_farm.watcher, SIGTERM, 10), 0);
    s_farm.watcher = 0;
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    int previous = tu_store_to_previous (tu_path (d, "farm.db"));
    s_farm.broker = s_start_on (0, "pivfarm-broker", "broker.log", NULL);
    rc = 1;
    for (int i = 0; i < 600 && rc != 0 && tu_alive (s_farm.broker); i++)
        if ((rc = s_pivctl_on_a ("bob", "status", NULL)) != 0)
            usleep (100000);
    ck_assert_msg (rc == 0, "the upgraded broker does not answer 'pivctl status' (see broker.log): %s",
                   s_out);
    char bak[3200], said[3300];
    snprintf (bak, sizeof bak, "%s/farm.db.v%d.bak", d, previous);
    snprintf (said, sizeof said, "has schema version %d: copied into '%s' before its migration",
              previous, bak);
    ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", said, 0), "no '%s' in broker.log", said);
    ck_assert_int_eq (tu_sql (bak, "SELECT value FROM meta WHERE key = 'schema_version'"), previous);
    ck_assert_int_eq (tu_sql (bak, "SELECT count(*) FROM pairs WHERE state = 2"), 6);
    ck_assert_int_eq (tu_sql (tu_path (d, "farm.db"),
                              "SELECT value FROM meta WHERE key = 'schema_version'"),
                      STORE_SCHEMA_VERSION);
    s_farm.watcher = s_start_on (0, "pivfarm-watcher", "watcher.log", NULL);
    s_farm.agents[0] = s_node_agent (1, "node-b");
    s_farm.agents[1] = s_node_agent (2, "node-c");
    tu_farm_land (&s_farm, "y", 7, 10, 0);
    ck_assert_int_eq (s_wait_exp ("exp1", 10, 60), 10);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM results"), 10);
    // doc/dashboard.md "Monitoring": the shipped rules pass promtool; the
    // broker stopped, the page's metrics (as Prometheus scrapes them from
    // nas1) fire PivfarmBrokerDown, and those of the running one do not.
    rc = s_cmd ("promtool", "check", "rules", s_rules_file (), NULL);
    ck_assert_msg (rc == 0 && strstr (s_out, "SUCCESS"), "promtool check rules: %d: %s", rc, s_out);
    char shipped[3100];
    snprintf (shipped, sizeof shipped, "%s/../deploy/prometheus/pivfarm.rules.test.yml",
              tu_bin (""));
    rc = s_cmd ("promtool", "test", "rules", shipped, NULL);
    ck_assert_msg (rc == 0 && strstr (s_out, "SUCCESS"), "promtool test rules: %d: %s", rc, s_out);
    int up = s_broker_up ();
    ck_assert_int_eq (up, 1);
    rc = s_cmd ("promtool", "test", "rules", s_broker_down_test (up), NULL);
    ck_assert_msg (rc == 0, "promtool test rules, the broker running: %d: %s", rc, s_out);
    ck_assert_int_eq (tu_stop (s_farm.broker, SIGTERM, 10), 0);
    s_farm.broker = 0;
    int down = s_broker_up ();
    ck_assert_int_eq (down, 0);
    rc = s_cmd ("promtool", "test", "rules", s_broker_down_test (down), NULL);
    ck_assert_msg (rc == 0, "promtool test rules, the broker stopped: %d: %s", rc, s_out);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("cluster");
    TCase *tc = tcase_create ("cluster");
    tcase_add_unchecked_fixture (tc, s_run_setup, s_run_teardown);
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 150);
    tcase_add_test (tc, slurm_runs_the_agents_and_scancel_leaves_no_task_dispatched);
    tcase_add_test (tc, an_agent_cut_off_the_network_loses_its_tasks_to_the_other_and_rejoins);
    tcase_add_test (tc, slurm_refuses_a_configuration_results_directory_or_key_its_user_cannot_use);
    suite_add_tcase (suite, tc);
    // Run alone with CK_RUN_CASE=year.
    TCase *year = tcase_create ("year");
    tcase_add_unchecked_fixture (year, s_run_setup, s_run_teardown);
    tcase_add_checked_fixture (year, s_setup, s_teardown);
    tcase_set_timeout (year, 150);
    tcase_add_test (year, a_year_of_the_farm_set_up_from_deploy_md_with_curve_on_three_hosts);
    suite_add_tcase (suite, year);
    return tu_run_suite (suite);
}
