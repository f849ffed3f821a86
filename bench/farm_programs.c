// farm_programs.c — a farm of bench_farm: a directory with a configuration
// file, a store and the real programs running on it (broker, agents,
// watcher); and its event log, followed through a read-only store.

#include "bench/farm.h"
#include "common/log.h"
#include "common/util.h"
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

// A farm: a directory with a configuration file, a store and the programs
// running on it.

const char *bf_bin_dir = "./bin";
int bf_commit_ms;  // broker/commit_ms written into the configuration (0: its default)
int bf_latency = -1;  // agent/latency written into it (-1: not written, the default)

void
bf_bin (char *buf, size_t len, const char *program)
{
    snprintf (buf, len, "%s/%s", bf_bin_dir, program);
}

// A fresh farm directory under 'parent' with data/ and a configuration:
// ipc:// endpoints in the directory, durability full, the agents' processor
// and threads, and the PIV settings of section 3 (passes 32, 50 %, 1 run).
int
bf_farm_init (bf_farm_t *farm, const char *parent, const char *name, const char *processor,
             int threads)
{
    memset (farm, 0, sizeof *farm);
    snprintf (farm->dir, sizeof farm->dir, "%s/%s", parent, name);
    snprintf (farm->conf, sizeof farm->conf, "%s/pivfarm.conf", farm->dir);
    snprintf (farm->db, sizeof farm->db, "%s/farm.db", farm->dir);
    snprintf (farm->ingest, sizeof farm->ingest, "ipc://%s/ingest", farm->dir);
    // An ipc:// endpoint is a Unix socket path: 107 bytes at most.
    if (strlen (farm->dir) + 16 >= sizeof ((struct sockaddr_un *) 0)->sun_path) {
        log_error ("temporary directory '%s' is too long for ipc:// endpoints: set TMPDIR "
                   "to a shorter one",
                   farm->dir);
        return -1;
    }
    char data[PATH_MAX + 32];
    snprintf (data, sizeof data, "%s/data", farm->dir);
    if (bf_mkdir (farm->dir) || bf_mkdir (data))
        return -1;
    char text[8192], commit[64] = "", latency[64] = "";
    if (bf_commit_ms > 0)
        snprintf (commit, sizeof commit, "    commit_ms = %d\n", bf_commit_ms);
    if (bf_latency >= 0)
        snprintf (latency, sizeof latency, "    latency = %d\n", bf_latency);
    snprintf (text, sizeof text,
              "# bench_farm: one farm on ipc:// sockets in this directory\n"
              "broker\n"
              "    ingest = ipc://%s/ingest\n"
              "    work = ipc://%s/work\n"
              "    control = ipc://%s/control\n"
              "    publish = ipc://%s/publish\n"
              "    store = ./farm.db\n"
              "    durability = full\n"
              "%s"
              "watcher\n"
              "    root = ./data\n"
              "agent\n"
              "    threads = %d\n"
              "%s"
              "    results = ./results\n"
              "    processor = %s\n"
              "piv\n"
              "    passes = %s\n"
              "    overlap = 50\n"
              "    iterations = 1\n",
              farm->dir, farm->dir, farm->dir, farm->dir, commit, threads, latency, processor,
              PIV_PASSES);
    return bf_write_file (farm->conf, text, strlen (text));
}

void
bf_farm_log (const bf_farm_t *farm, char *buf, size_t len, const char *name)
{
    snprintf (buf, len, "%s/%s.log", farm->dir, name);
}

// Stops everything of the farm (SIGTERM, then SIGKILL) and closes its reader.
void
bf_farm_stop (bf_farm_t *farm)
{
    store_destroy (&farm->reader);
    if (farm->watcher)
        bf_stop (farm->watcher, SIGTERM, 5);
    for (int i = 0; i < farm->nagents; i++)
        if (farm->agents[i])
            bf_stop (farm->agents[i], SIGKILL, 5);
    if (farm->broker)
        bf_stop (farm->broker, SIGTERM, 30);
    farm->watcher = farm->broker = 0;
    memset (farm->agents, 0, sizeof farm->agents);
    farm->nagents = 0;
}

// Starts the broker and waits until it has bound its last socket (after
// opening the store and reloading what it holds); then opens the store
// read-only and skips the events already in it ('after').
int
bf_farm_broker (bf_farm_t *farm, int64_t after)
{
    char prog[PATH_MAX], log[PATH_MAX + 64], sock[PATH_MAX + 32];
    bf_bin (prog, sizeof prog, "pivfarm-broker");
    bf_farm_log (farm, log, sizeof log, "broker");
    snprintf (sock, sizeof sock, "%s/publish", farm->dir);
    char *argv[] = {prog, "-c", farm->conf, NULL};
    double t0 = util_now ();
    if ((farm->broker = bf_spawn (argv, log)) < 0)
        return -1;
    while (access (sock, F_OK) != 0) {
        if (bf_stopped ())
            return -1;
        if (!bf_alive (farm->broker)) {
            farm->broker = 0;
            log_error ("the broker stopped during start-up: see '%s'", log);
            return -1;
        }
        if (util_now () - t0 > START_S) {
            log_error ("the broker did not start within %.0f s: see '%s'", START_S, log);
            return -1;
        }
        usleep (2000);
    }
    farm->start_s = util_now () - t0;
    char err[ERRLEN];
    if (!(farm->reader = store_open_readonly (farm->db, err, sizeof err))) {
        log_error ("%s", err);
        return -1;
    }
    farm->last_event = after;
    return 0;
}

int
bf_farm_agent (bf_farm_t *farm, const char *processor, int threads)
{
    if (farm->nagents >= MAX_AGENTS)
        return -1;
    char prog[PATH_MAX], log[PATH_MAX + 64], name[32], id[300], nthreads[16];
    bf_bin (prog, sizeof prog, "pivfarm-agent");
    snprintf (name, sizeof name, "agent%d", farm->nagents + 1);
    bf_farm_log (farm, log, sizeof log, name);
    // Named after the farm too: a store that saw agent1 in an earlier run
    // logs no new "agent" event for it, and that event is how
    // bf_farm_wait_agents knows an agent is there.
    const char *farm_name = strrchr (farm->dir, '/');
    snprintf (id, sizeof id, "%.200s-%s", farm_name ? farm_name + 1 : farm->dir, name);
    snprintf (nthreads, sizeof nthreads, "%d", threads);
    char *argv[] = {prog, "-c", farm->conf, "--id", id, "--threads", nthreads, "--processor",
                    (char *) processor, NULL};
    pid_t pid = bf_spawn (argv, log);
    if (pid < 0)
        return -1;
    farm->agents[farm->nagents++] = pid;
    return 0;
}

int
bf_farm_watcher (bf_farm_t *farm)
{
    char prog[PATH_MAX], log[PATH_MAX + 64];
    bf_bin (prog, sizeof prog, "pivfarm-watcher");
    bf_farm_log (farm, log, sizeof log, "watcher");
    char *argv[] = {prog, "-c", farm->conf, NULL};
    return (farm->watcher = bf_spawn (argv, log)) < 0 ? -1 : 0;
}

// Whether every program of the farm still runs; names the one that stopped.
int
bf_farm_alive (bf_farm_t *farm)
{
    if (farm->broker && !bf_alive (farm->broker)) {
        farm->broker = 0;
        log_error ("the broker stopped: see '%s/broker.log'", farm->dir);
        return 0;
    }
    for (int i = 0; i < farm->nagents; i++)
        if (farm->agents[i] && !bf_alive (farm->agents[i])) {
            farm->agents[i] = 0;
            log_error ("agent%d stopped: see '%s/agent%d.log'", i + 1, farm->dir, i + 1);
            return 0;
        }
    if (farm->watcher && !bf_alive (farm->watcher)) {
        farm->watcher = 0;
        log_error ("the watcher stopped: see '%s/watcher.log'", farm->dir);
        return 0;
    }
    return 1;
}

// ---------------------------------------------------------------------------
// Following the event log: what the store has committed is what counts.

static int
s_tail_event (void *arg, int64_t id, int64_t ts_ns, const char *kind, int64_t experiment,
              int64_t pair, const char *payload)
{
    (void) pair;
    bf_tail_t *tail = arg;
    tail->last = id;
    if (strcmp (kind, "result") == 0) {
        if (experiment == tail->exp_id && tail->exp_id) {
            tail->results++;
            if (ts_ns > tail->last_result_ns)
                tail->last_result_ns = ts_ns;
            int64_t w = (ts_ns - tail->base_ns) / 1000000000;
            if (tail->windows && w >= 0 && w < MAX_WINDOWS)
                tail->windows[w]++;
        }
    }
    else if (strcmp (kind, "experiment") == 0) {
        if (tail->experiment && strncmp (payload, "name=", 5) == 0
            && strcmp (payload + 5, tail->experiment) == 0)
            tail->exp_id = experiment;
    }
    else if (strcmp (kind, "agent") == 0)
        tail->agents++;
    return 0;
}

// Reads the events committed since the last call. -1 on error.
int
bf_tail (bf_farm_t *farm, bf_tail_t *tail)
{
    tail->last = farm->last_event;
    if (store_events (farm->reader, 0, farm->last_event, s_tail_event, tail) < 0) {
        log_error ("cannot read the events of '%s': %s", farm->db, store_error (farm->reader));
        return -1;
    }
    farm->last_event = tail->last;
    return 0;
}

// Waits until n agents have said HELLO (their "agent" events committed).
int
bf_farm_wait_agents (bf_farm_t *farm, int n)
{
    bf_tail_t tail = {0};
    double t0 = util_now ();
    while (tail.agents < n) {
        if (bf_stopped () || bf_tail (farm, &tail) != 0 || !bf_farm_alive (farm))
            return -1;
        if (util_now () - t0 > 30) {
            log_error ("only %lld of %d agents said hello within 30 s: see '%s'",
                       (long long) tail.agents, n, farm->dir);
            return -1;
        }
        usleep (5000);
    }
    return 0;
}

