// farm_cycle.c — section 1 of bench_farm, the broker's durable full cycle:
// the bench is the watcher and the store's event log says when every pair
// is done; then the store alone and SQLite's floor under it.

#include "bench/farm.h"
#include "bench/floor.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/util.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// Sections 1 and 2: the bench is the watcher. A DEALER on the ingest socket
// sends FILE events (p0000000_a.tif, p0000000_b.tif, ...) as fast as the
// broker acknowledges them, at most WINDOW unacknowledged, resending
// nothing; the store's event log says when every pair is done.

static double
s_agents_cpu (const bf_farm_t *farm)
{
    double sum = 0;
    for (int i = 0; i < farm->nagents; i++)
        if (farm->agents[i])
            sum += bf_cpu (farm->agents[i]);
    return sum;
}

// One cycle's FILE events: how many, and where they stand.
typedef struct {
    const char *experiment;  // the experiment they are sent in
    int64_t t0_ns;           // their time: the cycle's start
    int64_t files;           // to send: two a pair
    int64_t sent;            // sent so far
    int64_t acked;           // acknowledged
    int64_t lost;            // given up after a stall
    int64_t ack_msgs;        // ACK messages that acknowledged them
    double last_ack;         // when the last ACK came (the start before one)
    double last_progress;    // ... or the last result was recorded
} s_flow_t;

// Whether the window admits one more FILE event.
static int
s_room (const s_flow_t *f)
{
    return f->sent < f->files && f->sent - f->acked - f->lost < WINDOW;
}

// A DEALER connected to the farm's ingest socket, as the watcher's; NULL
// (logged) if it cannot be made.
static zsock_t *
s_ingest_open (const bf_farm_t *farm)
{
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    if (!dealer) {
        log_error ("cannot make a DEALER socket");
        return NULL;
    }
    // The window bounds what is in flight; the pipes must not.
    zsock_set_sndhwm (dealer, 0);
    zsock_set_rcvhwm (dealer, 0);
    zsock_set_rcvtimeo (dealer, 0);
    zsock_set_linger (dealer, 0);
    zsock_set_maxmsgsize (dealer, PROTO_MAX_MESSAGE);
    if (zsock_connect (dealer, "%s", farm->ingest) != 0) {
        log_error ("cannot connect to '%s'", farm->ingest);
        zsock_destroy (&dealer);
        return NULL;
    }
    return dealer;
}

// Sends while the window allows, FILE_BATCH events a message as the
// watcher sends what one wake-up found. A batch that cannot be sent is
// sent again on the next call.
static void
s_send_files (zsock_t *dealer, proto_batch_t *batch, s_flow_t *f)
{
    while (s_room (f)) {
        int64_t first = f->sent;
        while (s_room (f) && proto_batch_size (batch) < FILE_BATCH) {
            char name[32];
            snprintf (name, sizeof name, "p%07lld_%c.tif", (long long) (f->sent / 2),
                      f->sent % 2 ? 'b' : 'a');
            proto_msg_t msg = {.command = PROTO_FILE,
                               .seq = (uint64_t) f->sent + 1,
                               .experiment = (char *) f->experiment,
                               .name = name,
                               .size = 4194974,
                               .time_ns = f->t0_ns};
            if (proto_batch_add (batch, &msg) != 0)
                break;
            f->sent++;
        }
        if (proto_batch_send (batch, NULL, dealer) != 0) {
            f->sent = first;
            break;
        }
    }
}

// Waits up to wait_ms for ACKs, then counts every one that came. 0, or -1
// (logged) if the socket cannot be polled.
static int
s_take_acks (const bf_farm_t *farm, zsock_t *dealer, long wait_ms, s_flow_t *f)
{
    char err[ERRLEN];
    zmq_pollitem_t item = {zsock_resolve (dealer), 0, ZMQ_POLLIN, 0};
    if (zmq_poll (&item, 1, wait_ms < 0 ? 0 : wait_ms) < 0 && errno != EINTR) {
        log_error ("cannot poll the ingest socket: %s", zmq_strerror (zmq_errno ()));
        return -1;
    }
    zmsg_t *zmsg;
    while ((zmsg = zmsg_recv (dealer))) {
        proto_msg_t ack = {0};
        if (proto_decode (&zmsg, &ack, err, sizeof err) != 0)
            log_warning ("from the broker at '%s': %s", farm->ingest, err);
        else if (ack.command != PROTO_ACK)
            log_warning ("from the broker at '%s': unexpected %s", farm->ingest,
                         proto_command_name (ack.command));
        else {
            f->acked += ack.count;
            f->ack_msgs++;
            f->last_ack = f->last_progress = util_now ();
        }
        proto_msg_release (&ack);
    }
    return 0;
}

// Sends the FILE events of npairs and follows the event log until the run
// ends (see s_cycle). 0, or -1 (logged) if it stopped first.
static int
s_cycle_run (bf_farm_t *farm, zsock_t *dealer, proto_batch_t *batch, int npairs, int want_done,
             s_flow_t *f, bf_tail_t *tail, bf_cycle_t *out)
{
    double t0 = f->last_ack, next_poll = t0 + POLL_S;
    for (;;) {
        if (bf_stopped ())
            return -1;
        s_send_files (dealer, batch, f);
        // Wait for ACKs, at most until the next look at the store.
        double now = util_now ();
        long wait_ms = s_room (f) ? 0 : (long) ((next_poll - now) * 1000) + 1;
        if (s_take_acks (farm, dealer, wait_ms, f) != 0)
            return -1;
        now = util_now ();
        if (f->acked >= f->files && out->ingest_s == 0)
            out->ingest_s = f->last_ack - t0;
        if (f->sent - f->acked - f->lost > 0 && now - f->last_ack > STALL_S) {
            // ACKs the broker dropped or never sent: count them, send on.
            log_warning ("%lld FILE events unacknowledged after %.0f s: counted as lost",
                         (long long) (f->sent - f->acked - f->lost), STALL_S);
            f->lost = f->sent - f->acked;
            f->last_ack = now;
        }
        if (now >= next_poll) {
            next_poll = now + POLL_S;
            int64_t before = tail->results;
            if (bf_tail (farm, tail) != 0)
                return -1;
            if (tail->results > before)
                f->last_progress = now;
            if (!bf_farm_alive (farm))
                return -1;
        }
        if (want_done ? tail->results >= npairs
                            && (f->acked + f->lost >= f->files || now - f->last_ack > 1)
                      : f->acked + f->lost >= f->files)
            return 0;
        if (now - f->last_progress > GIVE_UP_S) {
            log_error ("no progress for %.0f s: %lld of %lld events acknowledged, %lld of %d "
                       "pairs done; see '%s'",
                       GIVE_UP_S, (long long) f->acked, (long long) f->files,
                       (long long) tail->results, npairs, farm->dir);
            return -1;
        }
    }
}

// Runs npairs through the farm's broker in 'experiment'. With want_done 0
// (no agents) it ends when every event is acknowledged.
static int
s_cycle (bf_farm_t *farm, const char *experiment, int npairs, int want_done, bf_cycle_t *out)
{
    memset (out, 0, sizeof *out);
    zsock_t *dealer = s_ingest_open (farm);
    if (!dealer)
        return -1;
    proto_batch_t *batch = proto_batch_new ();
    if (!batch) {
        zsock_destroy (&dealer);
        return -1;
    }
    static int windows[MAX_WINDOWS];
    memset (windows, 0, sizeof windows);
    double cpu_broker = bf_cpu (farm->broker), cpu_agents = s_agents_cpu (farm),
           cpu_self = bf_cpu_self (), cpu_main = bf_cpu_thread (farm->broker, farm->broker),
           cpu_host = bf_cpu_host ();
    double t0 = util_now ();
    s_flow_t f = {.experiment = experiment,
                  .t0_ns = util_time_ns (),
                  .files = 2 * (int64_t) npairs,
                  .last_ack = t0,
                  .last_progress = t0};
    bf_tail_t tail = {.experiment = experiment, .base_ns = f.t0_ns, .windows = windows};
    int rc = s_cycle_run (farm, dealer, batch, npairs, want_done, &f, &tail, out);
    proto_batch_destroy (&batch);
    zsock_destroy (&dealer);
    if (rc != 0)
        return -1;
    out->broker_cpu_s = bf_cpu (farm->broker) - cpu_broker;
    out->broker_main_cpu_s = bf_cpu_thread (farm->broker, farm->broker) - cpu_main;
    out->agents_cpu_s = s_agents_cpu (farm) - cpu_agents;
    out->self_cpu_s = bf_cpu_self () - cpu_self;
    out->host_cpu_s = bf_cpu_host () - cpu_host;
    if (want_done) {
        out->cycle_s = (tail.last_result_ns - f.t0_ns) / 1e9;
        int whole = (int) ((tail.last_result_ns - f.t0_ns) / 1000000000);
        for (int w = 0; w < whole && w < MAX_WINDOWS; w++)
            out->window_rates[out->nwindows++] = windows[w];
    }
    if (out->ingest_s == 0)
        out->ingest_s = f.last_ack - t0;
    out->acked = f.acked;
    out->ack_msgs = f.ack_msgs;
    out->lost = f.lost + (f.files - f.acked - f.lost);
    bf_memory (farm->broker, &out->hwm_kb, &out->rss_kb);
    return 0;
}

// With history_db, the farm runs on that store (moved in and back out) and
// *events says where its event log ends: the tail starts there and leaves
// it where this run ended, so that the next run does not read this one's.
int
bf_farm_cycle (const char *parent, const char *name, const bf_config_t *config,
              const char *experiment, int npairs, const char *history_db, int64_t *events,
              bf_cycle_t *out, double *start_s)
{
    bf_farm_t farm;
    int rc = -1;
    if (bf_farm_init (&farm, parent, name, "noop", config->threads) != 0)
        return -1;
    if (history_db && bf_move_db (history_db, farm.db) != 0)
        return -1;
    if (bf_farm_broker (&farm, history_db ? *events : 0) != 0)
        goto done;
    if (start_s)
        *start_s = farm.start_s;
    for (int i = 0; i < config->agents; i++)
        if (bf_farm_agent (&farm, "noop", config->threads) != 0)
            goto done;
    if (config->agents && bf_farm_wait_agents (&farm, config->agents) != 0)
        goto done;
    rc = s_cycle (&farm, experiment, npairs, config->agents > 0, out);
    if (events)
        *events = farm.last_event;
done:
    bf_farm_stop (&farm);
    if (history_db && rc == 0 && bf_move_db (farm.db, history_db) != 0)
        rc = -1;
    if (rc == 0)
        bf_rmtree (farm.dir);
    return rc;
}

// A noop agent takes as many tasks at once as it has threads. 8 is a
// compute node; 64 stands for the hundreds of workers a cluster that
// needs this rate has (25,000 pairs/s of 100 ms fields is 2,500 cores),
// so that the broker, not the round trip to a few agents, is measured.
const bf_config_t bf_configs[] = {
    {1, 8, "1 agent x 8 threads"},
    {2, 8, "2 agents x 8 threads"},
    {2, 64, "2 agents x 64 threads"},
    {4, 64, "4 agents x 64 threads"},
    {0, 8, "ingest alone, no agents"},
};
#define S_NCONFIGS ((int) (sizeof bf_configs / sizeof bf_configs[0]))

// What section 1 keeps of its best configuration, for its summary.
typedef struct {
    double rate;          // pairs/s (median of runs)
    int config;           // which
    double cpu, broker;   // CPU us per pair: all three programs, the broker's,
    double main;          // ... its reactor (main) thread's
    double others;        // CPU us per pair of other processes on the machine meanwhile
    double ratio;         // each run over the store alone run just after it, median
    double seqs_per_ack;  // FILE events per ACK (of the last configuration)
} s_best_t;

// The store's ceiling just after a run of the cycle (the machine's speed
// drifts within minutes): the same store calls for as many pairs, in this
// process. Pairs/s, or -1.
static double
s_ceiling_now (const bf_run_t *run)
{
    char db[PATH_MAX + 32];
    snprintf (db, sizeof db, "%s/alone.db", run->root);
    double rate = bf_write_pairs (db, "alone", run->cycle_pairs, 0, run->commit_ms / 1000.0,
                                  NULL, NULL, NULL, NULL);
    bf_remove_db (db);
    return rate;
}

// Section 1, one configuration: its runs and its line. 0, or -1.
static int
s_cycle_config (const bf_run_t *run, int c, s_best_t *best)
{
    double rate[MAX_REPS], ingest[MAX_REPS], ratio[MAX_REPS], cpu[3] = {0, 0, 0}, main_cpu = 0,
           others = 0;
    static double windows[MAX_REPS * MAX_WINDOWS];
    int nwindows = 0, reps = run->reps;
    long hwm = 0, rss = 0, lost = 0;
    int64_t acked = 0, ack_msgs = 0;
    for (int r = 0; r < reps; r++) {
        bf_cycle_t cy;
        char name[32];
        snprintf (name, sizeof name, "cycle%d-%d", c, r);
        if (bf_farm_cycle (run->root, name, &bf_configs[c], "bench", run->cycle_pairs, NULL, NULL,
                          &cy, NULL)
            != 0)
            return -1;
        rate[r] = bf_configs[c].agents ? run->cycle_pairs / cy.cycle_s : 0;
        double ceiling = bf_configs[c].agents ? s_ceiling_now (run) : 1;
        if (ceiling < 0)
            return -1;
        ratio[r] = rate[r] / ceiling;
        ingest[r] = cy.acked / cy.ingest_s;
        for (int w = 0; w < cy.nwindows; w++)
            windows[nwindows++] = cy.window_rates[w];
        cpu[0] += cy.broker_cpu_s, cpu[1] += cy.agents_cpu_s, cpu[2] += cy.self_cpu_s;
        main_cpu += cy.broker_main_cpu_s;
        others += cy.host_cpu_s - cy.broker_cpu_s - cy.agents_cpu_s - cy.self_cpu_s;
        hwm = cy.hwm_kb > hwm ? cy.hwm_kb : hwm;
        rss = cy.rss_kb > rss ? cy.rss_kb : rss;
        lost += cy.lost;
        acked += cy.acked, ack_msgs += cy.ack_msgs;
    }
    double per = 1e6 / ((double) run->cycle_pairs * reps);
    bf_stat_t sr = bf_stat (rate, reps, 1), si = bf_stat (ingest, reps, 1),
              sq = bf_stat (ratio, reps, 1);
    printf ("  %-26s", bf_configs[c].label);
    if (!bf_configs[c].agents)
        printf (" %9s %11s %7s", "", "", "");
    else if (nwindows >= 3 * reps) {
        // Seconds of a shorter run are mostly its ingest or its tail.
        bf_stat_t sw = bf_stat (windows, nwindows, 1);
        printf (" %9.0f %11.0f %7.0f", sr.median, sw.median, sw.best);
    }
    else
        printf (" %9.0f %11s %7s", sr.median, "-", "-");
    printf (" %9.0f %7.0f %7.0f %6.0f %6.1f %6.1f\n", si.median, cpu[0] * per, cpu[1] * per,
            cpu[2] * per, bf_mib (hwm), bf_mib (rss));
    if (lost)
        printf ("  %-26s %ld FILE events never acknowledged (ACKs lost)\n", "", lost);
    fflush (stdout);
    if (bf_configs[c].agents && sr.median > best->rate) {
        best->rate = sr.median, best->config = c;
        best->cpu = (cpu[0] + cpu[1] + cpu[2]) * per, best->broker = cpu[0] * per;
        best->main = main_cpu * per, best->others = others > 0 ? others * per : 0;
        best->ratio = sq.median;
    }
    best->seqs_per_ack = ack_msgs ? (double) acked / ack_msgs : 0;
    return 0;
}

// Runs of the store alone, the median of which is the ceiling.
#define S_ALONE_REPS 3

// The store's share: the broker's store calls for as many pairs as a run of
// the cycle, in this process, committing every commit_ms and marking the
// results counted every STATS_S like the broker; median of S_ALONE_REPS
// runs (*rate pairs/s, *cpu_us this thread's CPU per pair). 0, or -1.
static int
s_store_alone (const bf_run_t *run, const char *alone_db, double *rate, double *cpu_us)
{
    double calls[S_ALONE_REPS][S_CALLS], rates[S_ALONE_REPS], cpus[S_ALONE_REPS], event_s = 0;
    for (int r = 0; r < S_ALONE_REPS; r++) {
        rates[r] = bf_write_pairs (alone_db, "alone", run->cycle_pairs, 0,
                                   run->commit_ms / 1000.0, NULL, calls[r],
                                   r == 0 ? &event_s : NULL, &cpus[r]);
        bf_remove_db (alone_db);
        if (rates[r] < 0)
            return -1;
    }
    // The run of the median rate, whole.
    int m = 0;
    for (int r = 0; r < S_ALONE_REPS; r++) {
        int below = 0;
        for (int q = 0; q < S_ALONE_REPS; q++)
            below += rates[q] < rates[r];
        if (below == S_ALONE_REPS / 2)
            m = r;
    }
    *rate = rates[m], *cpu_us = cpus[m];
    printf ("  the store alone: the broker's store calls for %d pairs, made in this process,\n"
            "  commit every %d ms, results marked counted every %.0f s, no messages\n"
            "  (median of %d runs):\n",
            run->cycle_pairs, run->commit_ms, STATS_S, S_ALONE_REPS);
    double total = 0;
    for (int c = 0; c < S_CALLS; c++) {
        printf ("  %-44s %9.1f  us per pair\n", bf_call_names[c], calls[m][c] * 1e6);
        total += calls[m][c];
    }
    printf ("  %-44s %9.1f  us per pair = %.0f pairs/s: the store's ceiling\n", "all", total * 1e6,
            *rate);
    printf ("  %-44s %9.1f  us per pair of CPU (the rest: waiting for fdatasync)\n",
            "... of which on CPU", *cpu_us);
    printf ("  %-44s %9.1f  us per row, %.0f %% of the above at 5 per pair\n",
            "an event row alone (store_event)", event_s * 1e6, 500 * event_s / total);
    return 0;
}

// The goal: the broker's best full cycle against the store's
// ceiling measured just after it, and where the broker's time goes.
static void
s_ratio_print (const s_best_t *best, double ceiling, double ceiling_cpu_us)
{
    double wall = 1e6 / best->rate;
    printf ("  %-44s %9.2f  (goal >= 0.80): each run of the best configuration over\n"
            "  the store alone run just after it, median; %.0f of %.0f pairs/s (%.2f) against\n"
            "  the median ceiling above\n",
            "broker full cycle / store ceiling", best->ratio, best->rate, ceiling,
            best->rate / ceiling);
    printf ("  the broker's %.1f us a pair: its reactor thread on CPU %.1f (the store's calls\n"
            "  alone: %.1f), off CPU %.1f (fdatasync, waiting for messages or for a CPU);\n"
            "  ZeroMQ's I/O thread on CPU %.1f besides; processes outside the farm kept\n"
            "  %.2f of the %ld CPUs busy meanwhile (%.0f us of CPU a pair)\n",
            wall, best->main, ceiling_cpu_us, wall - best->main, best->broker - best->main,
            best->others / wall, sysconf (_SC_NPROCESSORS_ONLN), best->others);
}

// The floor: SQLite alone, the rows a pair must leave and nothing else
// (bench/floor.c), then with each of the store's guarantees. Best of
// three, the variants taken in turn: this machine's speed drifts within
// minutes. 0, or -1.
static int
s_store_floor (const bf_run_t *run, const char *alone_db)
{
    static const struct {
        int flags;
        const char *label;
    } floors[] = {
        {0, "the rows alone, no event rows"},
        {FLOOR_EVENTS, "+ 5 event rows: the floor"},
        {FLOOR_EVENTS | FLOOR_FK, "floor + foreign keys"},
        {FLOOR_EVENTS | FLOOR_STARTUP, "floor + start-up indexes"},
        {FLOOR_EVENTS | FLOOR_READS, "floor + state reads"},
        {FLOOR_EVENTS | FLOOR_STATS, "floor + statistics' uncounted row"},
        {FLOOR_EVENTS | FLOOR_FK | FLOOR_STARTUP | FLOOR_READS | FLOOR_STATS,
         "floor + all four (the store's shape)"},
    };
    enum { NFLOORS = sizeof floors / sizeof floors[0] };
    double floor_cpu[NFLOORS], floor_wall[NFLOORS];
    for (int f = 0; f < NFLOORS; f++)
        floor_cpu[f] = floor_wall[f] = 1e9;
    for (int rep = 0; rep < 3; rep++)
        for (int f = 0; f < NFLOORS; f++) {
            double c, w;
            if (floor_measure (alone_db, run->history_run, floors[f].flags, &c, &w) != 0) {
                log_error ("cannot measure the floor in '%s'", alone_db);
                return -1;
            }
            if (c < floor_cpu[f])
                floor_cpu[f] = c, floor_wall[f] = w;
        }
    printf ("  SQLite alone writing the rows a pair must leave (2 files, the pair, an attempt\n"
            "  opened and closed, a result) in the leanest schema, commit every 2 ms, FULL,\n"
            "  then with what the store guarantees beyond them (bench/floor.c):\n");
    for (int f = 0; f < NFLOORS; f++)
        printf ("  %-44s %9.1f  us CPU per pair = %.0f pairs/s on a whole CPU\n", floors[f].label,
                floor_cpu[f], 1e6 / floor_wall[f]);
    printf ("  at 25000 pairs/s the broker's one thread has 40 us a pair for its store\n"
            "  calls and its messages together (SQLite admits one writer)\n");
    return 0;
}

// 1. The broker's durable full cycle, then the store alone and its floor.
// 0, or -1.
int
bf_section_cycle (const bf_run_t *run)
{
    printf ("\n1. Broker durable full cycle: FILE x2 -> pair -> TASK -> noop -> RESULT recorded\n"
            "   durability = full, commit_ms = %s, fresh store, %d pairs, at most %d FILE\n"
            "   events unacknowledged, nothing resent; this process is the watcher. Time: first\n"
            "   FILE sent to last result recorded (the broker's clock in the event log)\n",
            run->commit_text, run->cycle_pairs, WINDOW);
    printf ("  %-26s %-29s %9s %-22s %-13s\n", "", "---------- pairs/s ----------", "files/s",
            "---- CPU us/pair -----", "- broker MiB-");
    printf ("  %-26s %9s %11s %7s %9s %7s %7s %6s %6s %6s\n", "", "whole run", "1 s: median",
            "best", "acked", "broker", "agents", "bench", "HWM", "RSS");
    s_best_t best = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int c = 0; c < S_NCONFIGS; c++)
        if (s_cycle_config (run, c, &best) != 0)
            return -1;
    printf ("  %-26s %9.0f  pairs/s (%s)   target >= 25000\n", "best configuration", best.rate,
            bf_configs[best.config].label);
    long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
    printf ("  at that rate the broker keeps %.0f %% of one CPU busy, the three programs %.0f %%\n"
            "  of the %ld CPUs (%.0f us of CPU per pair in all)\n",
            best.broker * best.rate / 1e4, best.cpu * best.rate / 1e4 / ncpu, ncpu, best.cpu);
    printf ("  for comparison: beanstalkd with binlog 6-16 k jobs/s, gearmand + SQLite 0.6 k"
            " jobs/s\n"
            "  whole run: pairs / run time (median of runs); 1 s: pairs recorded in each whole\n"
            "  second of a run (runs of 3 s or more); files/s: FILE events acknowledged per\n"
            "  second, first sent to last ACK; CPU: user + system over the run (bench: this\n"
            "  process, the watcher's part, FILEs in BATCHes of %d);\n"
            "  each ACK acknowledged %.2f FILE events on average (the protocol allows %d)\n",
            FILE_BATCH, best.seqs_per_ack, PROTO_MAX_ACK);
    char alone_db[PATH_MAX + 32];
    snprintf (alone_db, sizeof alone_db, "%s/alone.db", run->root);
    double ceiling, ceiling_cpu;
    if (s_store_alone (run, alone_db, &ceiling, &ceiling_cpu) != 0)
        return -1;
    s_ratio_print (&best, ceiling, ceiling_cpu);
    if (s_store_floor (run, alone_db) != 0)
        return -1;
    fflush (stdout);
    return 0;
}
