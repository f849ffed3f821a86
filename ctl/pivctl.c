// pivctl.c — the operator's command line (doc/pivctl.md): asks the broker
// over its control socket (doc/control.md) and prints the answer as tables
// or JSON, follows the feedback stream, exports fields from the store, and
// replays an experiment and compares the replay with the original.
// Exit status (doc/conventions.md): 0 done, 1 the broker did not answer or
// refused what it could do another time (403, 404, 500), or the work failed
// (store, files), 2 bad usage or configuration: found here, or by the broker
// (a 400 answer).

#include "common/cli.h"
#include "common/config.h"
#include "common/iobench.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/secure.h"
#include "common/util.h"
#include "common/version.h"
#include "piv/field.h"
#include "piv/settings.h"
#include "store/json.h"
#include "store/store.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 3000             // default --timeout
#define REPLAY_WAIT_S 3600          // default replay --wait
#define REPLAY_POLL_MS 200          // status polls while a replay runs
#define COMPARE_BUDGET (256u << 20) // bytes of original fields held at once by the comparison
#define MAX_WORDS 64                // words of a command line (the broker's limit)
#ifndef PIVCTL_CONF
#define PIVCTL_CONF "/etc/pivfarm/pivfarm.conf" // without -c and $PIVFARM_CONF
#endif

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };
#define S_INTERRUPTED (-1) // a wait ended by SIGINT/SIGTERM

static volatile sig_atomic_t s_stop; // SIGINT or SIGTERM received

static void
s_on_signal (int signal)
{
    (void)signal;
    s_stop = 1;
}

// Every error of pivctl: one line on stderr, "pivctl: " first.
static void s_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void
s_error (const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    fputs ("pivctl: ", stderr);
    vfprintf (stderr, fmt, args);
    fputc ('\n', stderr);
    va_end (args);
}

static void
s_usage (FILE *out)
{
    fprintf (
        out,
        "usage: pivctl [-c FILE] [--json] [--timeout MS] COMMAND [ARGS]\n"
        "  -c, --config FILE      pivfarm configuration (broker/control, publish and store;\n"
        "                         default $PIVFARM_CONF, else %s)\n"
        "  -j, --json             print JSON instead of tables (may follow the command)\n"
        "      --timeout MS       wait at most MS ms for each answer of the broker (default %d)\n"
        "  -h, --help             this text;  -V, --version  the version\n"
        "\n"
        "the run:\n"
        "  status [--watch] [--count N]    experiments (pairs by state, rates, latency, policy)\n"
        "                                  and agents; --watch redraws every second with progress\n"
        "                                  and time to catch up, N times (default until Ctrl-C)\n"
        "    [-e EXP] [--page K] [--limit N]  one experiment; page K of all by name (200 a page);\n"
        "                                  past ~1000 experiments plain status shows the busiest\n"
        "  agents [--page K] [--limit N]   agents with their tasks and last heartbeat\n"
        "  experiments [-e EXP] [--page K] [--limit N]\n"
        "                                  experiments with their source and settings\n"
        "  pairs EXP [--state S] [--limit N] [--after ID]\n"
        "                                  pairs of EXP as a timeline (S: pending, dispatched,\n"
        "                                  done, failed, skipped; N up to 10000, default 1000)\n"
        "  log EXP [--after ID] [--limit N]\n"
        "                                  the event log of EXP\n"
        "steering (-e EXP for one experiment, otherwise the default of all):\n"
        "  rate N|max [-e EXP]             at most N pairs/s dispatched (0.01 to 1e6), or no "
        "limit\n"
        "  policy all|latest|sample N [-e EXP]\n"
        "                                  every pair oldest first, the newest first, or 1 in N\n"
        "  pause [-e EXP], resume [-e EXP] stop or resume dispatching (tasks out finish)\n"
        "  retry EXP                       failed pairs of EXP back to the queue\n"
        "  backfill EXP                    skipped pairs of EXP back to the queue\n"
        "  feedback show|on|off [-e EXP]   the feedback controller\n"
        "  feedback set KEY=VALUE... [-e EXP]\n"
        "                                  roi=x0,y0,x1,y1|all quantity=mean_u|mean_v|mean_speed|\n"
        "                                  vorticity|valid_fraction setpoint= kp= ki= out_min=\n"
        "                                  out_max=\n"
        "  tail EXP [--count N] [--new]    follow the feedback stream of EXP (Ctrl-C to stop);\n"
        "                                  an unknown EXP is refused unless --new (about to start)\n"
        "the record:\n"
        "  export EXP [--format txt|tecplot] -o DIR\n"
        "                                  the stored vector fields of EXP as DIR/<stem>.txt\n"
        "                                  (or .dat), read from the store\n"
        "  replay EXP [--as NAME] [--speed X|max] [--passes P] [--overlap O] [--iterations I]\n"
        "             [--deform D] [--feedback-only] [--wait S]\n"
        "                                  replay EXP at X times its pace, wait for it (at most\n"
        "                                  S s, default %d) and compare it with EXP\n"
        "storage (doc/storage.md):\n"
        "  provision EXP --size SIZE --hours H [--tmpfs|--dir PATH]\n"
        "                                  a RAM disk of SIZE (20G) as EXP's directory for H hours\n"
        "                                  (--dir: a directory provided otherwise, not mounted)\n"
        "  archive EXP [--to DIR] [--wait S] [--no-wait]\n"
        "                                  copy EXP's frames to DIR/EXP, verify each by SHA-256,\n"
        "                                  record where they are, then remove the originals\n"
        "  release EXP [--to DIR] [--wait S] [--no-wait]\n"
        "                                  archive, then unmount and remove EXP's allocation\n"
        "  iobench DIR [--total SIZE] [--need RATE]\n"
        "                                  sequential write/read MB/s of DIR for IO sizes 64K to\n"
        "                                  16M (SIZE in all, default 256M); RATE: 240Mbit, 30MB\n"
        "  warnings [list]                 the storage and clock warnings in force, numbered\n"
        "  warnings clear N|all            hide warning N (or all) while it lasts (operator)\n"
        "security (doc/security.md):\n"
        "  keygen NAME [-o DIR]            a CURVE key pair: DIR/NAME.cert (public) and\n"
        "                                  DIR/NAME.cert_secret (default DIR: ., made if\n"
        "                                  missing); no -c needed\n"
        "\n"
        "exit status: 0 done; 1 the broker did not answer or refused (no such experiment,\n"
        "not an operator, its store failed), or the work failed; 2 bad usage or\n"
        "configuration, found by pivctl or by the broker (doc/conventions.md)\n",
        PIVCTL_CONF, TIMEOUT_MS, REPLAY_WAIT_S);
}

// ---------------------------------------------------------------------------
// Command lines: each command's options, checked before anything is sent.

typedef struct {
    const char *name; // long name, without "--"
    char letter;      // short name, or 0
    int has_arg;      // takes a value
    int local;        // pivctl's own: not sent to the broker
} s_option_t;

typedef struct _s_ctl_t s_ctl_t;
typedef struct _s_args_t s_args_t;
typedef int (s_run_fn) (s_ctl_t *ctl, s_args_t *args);

typedef struct {
    const char *name;          // the command
    int min_words, max_words;  // positional arguments after it
    const char *usage;         // for errors
    const s_option_t *options; // accepted options, ending with {NULL}
    s_run_fn *run;             // what runs it
} s_command_t;

struct _s_args_t {
    const s_command_t *command; // the command
    char *words[MAX_WORDS];     // its positional arguments
    int nwords;                 // their count
    char *send[MAX_WORDS + 1];  // the line sent to the broker, as words
    int nsend;                  // their count
    const char *values[16];     // per option of command->options: its value, "" for a
                                // flag given, NULL not given
};

struct _s_ctl_t {
    config_t cfg;      // the configuration
    int json;          // --json
    int timeout_ms;    // --timeout
    zsock_t *sock;     // DEALER to broker/control, once connected
    zpoller_t *poller; // on sock
};

// The value of option 'name' of args' command, or NULL.
static const char *
s_value (const s_args_t *args, const char *name)
{
    for (int i = 0; args->command->options[i].name; i++)
        if (strcmp (args->command->options[i].name, name) == 0)
            return args->values[i];
    return NULL;
}

// Parses a positive integer option (1 .. max) given as 'text'. 0 or -1 (logged).
static int
s_parse_count (const char *option, const char *text, long max, long *out)
{
    char *end;
    errno = 0;
    long n = strtol (text, &end, 10);
    if (errno || end == text || *end || n < 1 || n > max) {
        if (max == LONG_MAX)
            s_error ("bad %s '%s': a whole number, 1 or more (see pivctl --help)", option, text);
        else
            s_error ("bad %s '%s': a whole number from 1 to %ld (see pivctl --help)", option,
                     text, max);
        return -1;
    }
    *out = n;
    return 0;
}

static int
s_parse_timeout (s_ctl_t *ctl, const char *text)
{
    long ms;
    if (s_parse_count ("--timeout", text, 600000, &ms) != 0)
        return -1;
    ctl->timeout_ms = (int)ms;
    return 0;
}

// Finds the option a word names ("--name", "--name=value", "-x", "-xVALUE").
// Returns its index in options, -1 unknown; *inline_value is the value
// written in the word itself, or NULL.
static int
s_option_of (const s_option_t *options, const char *word, const char **inline_value)
{
    *inline_value = NULL;
    for (int i = 0; options[i].name; i++) {
        if (word[1] == '-') {
            size_t len = strcspn (word + 2, "=");
            if (strlen (options[i].name) == len && strncmp (options[i].name, word + 2, len) == 0) {
                if (word[2 + len] == '=')
                    *inline_value = word + 3 + len;
                return i;
            }
        }
        else if (options[i].letter && word[1] == options[i].letter) {
            if (word[2])
                *inline_value = word + 2;
            return i;
        }
    }
    return -1;
}

// Splits the words after the command into options and positional words,
// and the line for the broker (the command, its positional words and the
// options that are not pivctl's own, as the user wrote them). --json and
// --timeout are taken anywhere. 0, or EXIT_USAGE (logged).
static int
s_parse_args (s_ctl_t *ctl, const s_command_t *command, int argc, char **argv, s_args_t *args)
{
    memset (args, 0, sizeof *args);
    args->command = command;
    args->send[args->nsend++] = (char *)command->name;
    int options_end = 0;
    for (int i = 0; i < argc; i++) {
        char *word = argv[i];
        if (options_end || word[0] != '-' || word[1] == '\0') {
            if (args->nwords == MAX_WORDS - 1 || args->nsend == MAX_WORDS) {
                s_error ("too many words for '%s' (at most %d)", command->name, MAX_WORDS - 1);
                return EXIT_USAGE;
            }
            args->words[args->nwords++] = word;
            args->send[args->nsend++] = word;
            continue;
        }
        if (strcmp (word, "--") == 0) {
            options_end = 1;
            args->send[args->nsend++] = word;
            continue;
        }
        if (strcmp (word, "--json") == 0 || strcmp (word, "-j") == 0) {
            ctl->json = 1;
            continue;
        }
        if (strncmp (word, "--timeout", 9) == 0 && (word[9] == '=' || word[9] == '\0')) {
            const char *value = word[9] == '=' ? word + 10 : i + 1 < argc ? argv[++i] : NULL;
            if (!value) {
                s_error ("option '--timeout' needs a value (see pivctl --help)");
                return EXIT_USAGE;
            }
            if (s_parse_timeout (ctl, value) != 0)
                return EXIT_USAGE;
            continue;
        }
        const char *value;
        int k = s_option_of (command->options, word, &value);
        if (k < 0) {
            s_error ("unknown option '%s' for '%s'; usage: pivctl %s", word, command->name,
                     command->usage);
            return EXIT_USAGE;
        }
        const s_option_t *option = &command->options[k];
        if (!option->local)
            args->send[args->nsend++] = word;
        if (option->has_arg && !value) {
            if (i + 1 == argc) {
                s_error ("option '%s' needs a value; usage: pivctl %s", word, command->usage);
                return EXIT_USAGE;
            }
            value = argv[++i];
            if (!option->local)
                args->send[args->nsend++] = (char *)value;
        }
        else if (!option->has_arg && value) {
            s_error ("option '--%s' takes no value; usage: pivctl %s", option->name,
                     command->usage);
            return EXIT_USAGE;
        }
        args->values[k] = value ? value : "";
        if (args->nsend >= MAX_WORDS - 1) {
            s_error ("too many words for '%s' (at most %d)", command->name, MAX_WORDS - 1);
            return EXIT_USAGE;
        }
    }
    if (args->nwords < command->min_words || args->nwords > command->max_words) {
        s_error ("%s arguments for '%s'; usage: pivctl %s",
                 args->nwords < command->min_words ? "missing" : "too many", command->name,
                 command->usage);
        return EXIT_USAGE;
    }
    args->send[args->nsend] = NULL;
    return 0;
}

// ---------------------------------------------------------------------------
// Asking the broker

// Sends 'line' and waits for the reply. 0 with the body (caller frees) for
// 200; EXIT_USAGE when the broker found the line wrong (400), EXIT_FAILED
// when it refused otherwise (its one line printed) or did not answer;
// S_INTERRUPTED on SIGINT/SIGTERM.
static int
s_ask (s_ctl_t *ctl, const char *line, char **body_p)
{
    const char *endpoint = ctl->cfg.broker.control;
    *body_p = NULL;
    if (!ctl->sock) {
        char err[1024];
        int bad_cert;
        ctl->sock = secure_connect (ZMQ_DEALER, &ctl->cfg, endpoint, "the broker", 0, err,
                                    sizeof err, &bad_cert);
        if (!ctl->sock) {
            s_error ("%s", err);
            return bad_cert ? EXIT_USAGE : EXIT_FAILED;
        }
        ctl->poller = zpoller_new (ctl->sock, NULL);
    }
    proto_msg_t request = {.command = PROTO_REQUEST, .text = (char *)line};
    if (proto_send (&request, NULL, ctl->sock) != 0) {
        s_error ("cannot send '%s' to the broker at '%s'", line, endpoint);
        return EXIT_FAILED;
    }
    // Waits in slices so that a signal is seen at once.
    int64_t deadline = zclock_mono () + ctl->timeout_ms;
    void *ready = NULL;
    while (!ready && !s_stop && zclock_mono () < deadline) {
        int64_t left = deadline - zclock_mono ();
        ready = zpoller_wait (ctl->poller, (int)(left < 100 ? left : 100));
    }
    if (s_stop)
        return S_INTERRUPTED;
    if (!ready) {
        s_error ("the broker at '%s' did not answer within %d ms%s", endpoint, ctl->timeout_ms,
                 secure_hint (&ctl->cfg));
        return EXIT_FAILED;
    }
    zmsg_t *zmsg = zmsg_recv (ctl->sock);
    proto_msg_t reply = {0};
    char why[512];
    if (proto_decode (&zmsg, &reply, why, sizeof why) != 0 || reply.command != PROTO_REPLY) {
        s_error ("the broker at '%s' answered nonsense: %s", endpoint,
                 reply.command ? "not a REPLY" : why);
        proto_msg_release (&reply);
        return EXIT_FAILED;
    }
    int status = (int)reply.status;
    if (status != 200) {
        // 400: bad usage, as if found here ('rate fast' as 'rate --bogus').
        s_error ("%s", reply.text);
        proto_msg_release (&reply);
        return status == 400 ? EXIT_USAGE : EXIT_FAILED;
    }
    *body_p = reply.text;
    reply.text = NULL;
    proto_msg_release (&reply);
    return 0;
}

// s_ask, then the body read as JSON into *doc_p. Same returns.
static int
s_ask_json (s_ctl_t *ctl, const char *line, char **body_p, json_t **doc_p)
{
    int rc = s_ask (ctl, line, body_p);
    *doc_p = NULL;
    if (rc != 0)
        return rc;
    char err[256];
    *doc_p = json_parse (*body_p, err, sizeof err);
    if (!*doc_p) {
        s_error ("the broker at '%s' answered '%s' with %s", ctl->cfg.broker.control, line, err);
        free (*body_p);
        *body_p = NULL;
        return EXIT_FAILED;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Printing: numbers that do not exist (JSON null) print as "-". The
// helpers return rotating static buffers, so that several fit in a printf.

static char *
s_buffer (void)
{
    static char buffers[32][64];
    static int next;
    next = (next + 1) % 32;
    return buffers[next];
}

// x with printf 'fmt', or "-" for NAN.
static const char *
s_num (double x, const char *fmt)
{
    char *buf = s_buffer ();
    if (isnan (x))
        return "-";
    snprintf (buf, 64, fmt, x);
    return buf;
}

// A duration in ms, readable: "85 ms", "2.3 s", "-".
static const char *
s_ms (double ms)
{
    if (isnan (ms))
        return "-";
    char *buf = s_buffer ();
    if (fabs (ms) < 10)
        snprintf (buf, 64, "%.1f ms", ms);
    else if (fabs (ms) < 10000)
        snprintf (buf, 64, "%.0f ms", ms);
    else
        snprintf (buf, 64, "%.1f s", ms / 1000);
    return buf;
}

// A longer duration in seconds: "45 s", "3 min 20 s", "2 h 05 min".
static const char *
s_duration (double s)
{
    char *buf = s_buffer ();
    if (isnan (s))
        return "-";
    long t = lround (s);
    if (t < 60)
        snprintf (buf, 64, "%ld s", t);
    else if (t < 3600)
        snprintf (buf, 64, "%ld min %02ld s", t / 60, t % 60);
    else
        snprintf (buf, 64, "%ld h %02ld min", t / 3600, t % 3600 / 60);
    return buf;
}

// Local time of day of a time in ns: "14:02:11.123"; "-" for 0 (not yet).
static const char *
s_clock (int64_t ns)
{
    if (ns <= 0)
        return "-";
    char *buf = s_buffer ();
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    localtime_r (&t, &tm);
    size_t len = strftime (buf, 64, "%H:%M:%S", &tm);
    snprintf (buf + len, 64 - len, ".%03d", (int)(ns / 1000000 % 1000));
    return buf;
}

// Local date of a time in ns: "2024-05-06".
static const char *
s_date (int64_t ns)
{
    char *buf = s_buffer ();
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    localtime_r (&t, &tm);
    strftime (buf, 64, "%Y-%m-%d", &tm);
    return buf;
}

// "experiment 'run7'" or "all experiments (the default)" for a reply's scope.
static const char *
s_scope (json_t *doc)
{
    const char *scope = json_string (doc, "$.scope");
    if (!scope || strcmp (scope, "*") == 0)
        return "all experiments (the default)";
    char *buf = s_buffer ();
    snprintf (buf, 64, "experiment '%.48s'", scope);
    return buf;
}

// A rate limit: "12.5 pairs/s" or "none" (null: max).
static const char *
s_limit (double rate)
{
    return isnan (rate) ? "max (none)" : s_num (rate, "%g pairs/s");
}

// Writes 'text' on stdout as a JSON string (util_json_string).
static void
s_put_json_string (const char *text)
{
    char small[512];
    size_t n = util_json_string (text, NULL, 0);
    char *json = n < sizeof small ? small : malloc (n + 1);
    if (!json) {
        fputs ("null", stdout);  // no memory: still valid JSON
        return;
    }
    util_json_string (text, json, n + 1);
    fputs (json, stdout);
    if (json != small)
        free (json);
}

// Writes x on stdout as a JSON number, null for NAN.
static void
s_put_json_number (double x)
{
    if (isfinite (x))
        printf ("%.9g", x);
    else
        printf ("null");
}

// The width a column of strings needs: the longest, within [min, max].
static int
s_width (json_t *doc, const char *array, const char *member, int min, int max)
{
    int width = min, n = json_length (doc, "%s", array);
    for (int i = 0; i < n; i++) {
        const char *s = json_string (doc, "%s[%d].%s", array, i, member);
        int len = s ? (int)strlen (s) : 0;
        if (len > width)
            width = len;
    }
    return width < max ? width : max;
}

// ---------------------------------------------------------------------------
// status, agents, experiments

// The figures of experiment i of doc's "experiments".
typedef struct {
    const char *name;
    double files, pending, dispatched, done, failed, skipped;
    double queue, arrivals, rate10, rate60, p50, p99, limit;
    const char *policy;
    int paused;
    int replay;            // 1 if a replay
    const char *replay_of; // what it replays
    double replay_speed, replay_sent, replay_total;
    int replay_finished, replay_feedback_only;
} s_exp_t;

static void
s_exp_read (json_t *doc, int i, s_exp_t *e)
{
    char p[64];
    snprintf (p, sizeof p, "$.experiments[%d]", i);
    e->name = json_string (doc, "%s.experiment", p);
    e->files = json_number (doc, NAN, "%s.files", p);
    e->pending = json_number (doc, NAN, "%s.pending", p);
    e->dispatched = json_number (doc, NAN, "%s.dispatched", p);
    e->done = json_number (doc, NAN, "%s.done", p);
    e->failed = json_number (doc, NAN, "%s.failed", p);
    e->skipped = json_number (doc, NAN, "%s.skipped", p);
    e->queue = json_number (doc, NAN, "%s.queue", p);
    e->arrivals = json_number (doc, NAN, "%s.arrivals_10s", p);
    e->rate10 = json_number (doc, NAN, "%s.rate_10s", p);
    e->rate60 = json_number (doc, NAN, "%s.rate_1m", p);
    e->p50 = json_number (doc, NAN, "%s.latency_median_ms", p);
    e->p99 = json_number (doc, NAN, "%s.latency_p99_ms", p);
    e->limit = json_number (doc, NAN, "%s.rate_limit", p);
    e->policy = json_string (doc, "%s.policy", p);
    e->paused = json_bool (doc, 0, "%s.paused", p);
    e->replay = json_type_at (doc, "%s.replay", p) == JSON_OBJECT;
    e->replay_of = json_string (doc, "%s.replay.of", p);
    e->replay_speed = json_number (doc, NAN, "%s.replay.speed", p);
    e->replay_sent = json_number (doc, NAN, "%s.replay.sent", p);
    e->replay_total = json_number (doc, NAN, "%s.replay.total", p);
    e->replay_finished = json_bool (doc, 0, "%s.replay.finished", p);
    e->replay_feedback_only = json_bool (doc, 0, "%s.replay.feedback_only", p);
}

// " (replay of 'run7' at 10x, 120/512 files sent)", or "" when not a replay.
static const char *
s_replay_note (const s_exp_t *e)
{
    static char buf[PROTO_MAX_STRING + 64]; // one per printf
    char speed[32] = "max";
    if (!e->replay)
        return "";
    if (!isnan (e->replay_speed))
        snprintf (speed, sizeof speed, "%gx", e->replay_speed);
    snprintf (buf, sizeof buf, " (replay of '%s' at %s, %.0f/%.0f %s sent)",
              e->replay_of ? e->replay_of : "?", speed, isnan (e->replay_sent) ? 0 : e->replay_sent,
              isnan (e->replay_total) ? 0 : e->replay_total,
              e->replay_feedback_only ? "messages" : "files");
    return buf;
}

// The experiments of doc: pairs by state, then the flow of each.
static void
s_print_experiments_of (json_t *doc)
{
    int n = json_length (doc, "$.experiments");
    if (n <= 0) {
        printf ("no experiments yet\n");
        return;
    }
    int w = s_width (doc, "$.experiments", "experiment", 10, 40);
    printf ("%-*s %8s %8s %10s %8s %8s %8s\n", w, "EXPERIMENT", "FILES", "PENDING", "DISPATCHED",
            "DONE", "FAILED", "SKIPPED");
    for (int i = 0; i < n; i++) {
        s_exp_t e;
        s_exp_read (doc, i, &e);
        printf ("%-*s %8s %8s %10s %8s %8s %8s\n", w, e.name ? e.name : "?",
                s_num (e.files, "%.0f"), s_num (e.pending, "%.0f"), s_num (e.dispatched, "%.0f"),
                s_num (e.done, "%.0f"), s_num (e.failed, "%.0f"), s_num (e.skipped, "%.0f"));
    }
    printf ("\n%-*s %6s %9s %9s %9s %9s %9s  %-10s %-12s %s\n", w, "EXPERIMENT", "QUEUE", "PAIRS/s",
            "1 min", "ARRIVE/s", "LAT p50", "p99", "POLICY", "RATE LIMIT", "STATE");
    for (int i = 0; i < n; i++) {
        s_exp_t e;
        s_exp_read (doc, i, &e);
        printf ("%-*s %6s %9s %9s %9s %9s %9s  %-10s %-12s %s%s\n", w, e.name ? e.name : "?",
                s_num (e.queue, "%.0f"), s_num (e.rate10, "%.1f"), s_num (e.rate60, "%.1f"),
                s_num (e.arrivals, "%.1f"), s_ms (e.p50), s_ms (e.p99), e.policy ? e.policy : "-",
                isnan (e.limit) ? "max" : s_num (e.limit, "%g/s"), e.paused ? "paused" : "running",
                s_replay_note (&e));
    }
}

static void
s_print_agents_of (json_t *doc)
{
    int n = json_length (doc, "$.agents");
    if (n <= 0) {
        printf ("no agents connected\n");
        return;
    }
    int w = s_width (doc, "$.agents", "id", 5, 40);
    int wh = s_width (doc, "$.agents", "host", 4, 32);
    printf ("%-*s %-*s %5s %6s %6s %8s  %s\n", w, "AGENT", wh, "HOST", "CORES", "CREDIT", "TASKS",
            "DONE", "LAST HEARTBEAT");
    for (int i = 0; i < n; i++) {
        const char *id = json_string (doc, "$.agents[%d].id", i);
        const char *host = json_string (doc, "$.agents[%d].host", i);
        double age = json_number (doc, NAN, "$.agents[%d].last_heartbeat_ms", i);
        printf ("%-*s %-*s %5s %6s %6s %8s  %s ago\n", w, id ? id : "?", wh, host ? host : "?",
                s_num (json_number (doc, NAN, "$.agents[%d].cores", i), "%.0f"),
                s_num (json_number (doc, NAN, "$.agents[%d].credit", i), "%.0f"),
                s_num (json_number (doc, NAN, "$.agents[%d].tasks", i), "%.0f"),
                s_num (json_number (doc, NAN, "$.agents[%d].done", i), "%.0f"),
                isnan (age) ? "-" : s_num (age / 1000, "%.1f s"));
    }
}

// Storage (doc/storage.md): warnings first, then allocations and archives.
static void
s_print_storage (json_t *doc)
{
    int n = json_length (doc, "$.warnings");
    for (int i = 0; i < n; i++) {
        const char *level = json_string (doc, "$.warnings[%d].level", i);
        const char *message = json_string (doc, "$.warnings[%d].message", i);
        printf ("%s: %s\n", level && strcmp (level, "critical") == 0 ? "CRITICAL" : "WARNING",
                message ? message : "?");
    }
    if (json_bool (doc, 0, "$.guard_paused"))
        printf ("DISPATCH PAUSED by the free-space guard: %s\n",
                json_string (doc, "$.guard_why") ? json_string (doc, "$.guard_why") : "?");
    int shown = 0, m = json_length (doc, "$.experiments");
    for (int i = 0; i < m; i++) {
        const char *name = json_string (doc, "$.experiments[%d].experiment", i);
        int alloc = json_type_at (doc, "$.experiments[%d].allocation", i) == JSON_OBJECT;
        int archive = json_type_at (doc, "$.experiments[%d].archive", i) == JSON_OBJECT;
        if (!alloc && !archive)
            continue;
        if (!shown++)
            printf ("storage:\n");
        printf ("  %s:", name ? name : "?");
        if (alloc) {
            char size[32], used[32];
            double expires = json_number (doc, NAN, "$.experiments[%d].allocation.expires_ns", i);
            double left = (expires - (double) util_time_ns ()) / 1e9;
            int64_t u = json_int (doc, -1, "$.experiments[%d].allocation.used_bytes", i);
            printf (" %s of %s at %s, %s used, %s %s%s",
                    json_string (doc, "$.experiments[%d].allocation.kind", i),
                    util_format_size (json_int (doc, 0, "$.experiments[%d].allocation.size_bytes", i),
                                      size, sizeof size),
                    json_string (doc, "$.experiments[%d].allocation.path", i),
                    u >= 0 ? util_format_size (u, used, sizeof used) : "-",
                    left >= 0 ? "expires in" : "expired", s_duration (fabs (left)),
                    left >= 0 ? "" : " ago");
            const char *state = json_string (doc, "$.experiments[%d].allocation.state", i);
            if (state && strcmp (state, "releasing") == 0)
                printf (", releasing");
        }
        if (archive) {
            const char *error = json_string (doc, "$.experiments[%d].archive.error", i);
            printf ("%s archive to %s %s, %s/%s file(s) verified, %s removed%s%s", alloc ? ";" : "",
                    json_string (doc, "$.experiments[%d].archive.to", i),
                    json_string (doc, "$.experiments[%d].archive.state", i),
                    s_num (json_number (doc, NAN, "$.experiments[%d].archive.copied", i)
                               + json_number (doc, NAN, "$.experiments[%d].archive.already", i),
                           "%.0f"),
                    s_num (json_number (doc, NAN, "$.experiments[%d].archive.files", i), "%.0f"),
                    s_num (json_number (doc, NAN, "$.experiments[%d].archive.removed", i), "%.0f"),
                    error ? ": " : "", error ? error : "");
        }
        printf ("\n");
    }
    if (n || shown || json_bool (doc, 0, "$.guard_paused"))
        printf ("\n");
}

// "showing 200 of 5000 experiments (...)" when the broker summarised a list.
static void
s_print_shown (json_t *doc, const char *list)
{
    int64_t total = json_int (doc, -1, "$.%s_total", list);
    int64_t shown = json_int (doc, -1, "$.%s_shown", list);
    if (total < 0 || shown < 0 || shown >= total)
        return;
    int64_t page = json_int (doc, 0, "$.page");
    if (page > 0)
        printf ("showing %lld of %lld %s: page %lld, by name (--page K for another)\n",
                (long long) shown, (long long) total, list, (long long) page);
    else
        printf ("showing %lld of %lld %s: the busiest (--page K for all, by name)\n",
                (long long) shown, (long long) total, list);
}

static void
s_print_status (json_t *doc)
{
    double uptime = json_number (doc, NAN, "$.uptime_s");
    const char *why = json_string (doc, "$.store_error");
    printf ("broker up %s, %s pair(s) queued, %s result(s) recorded since start%s%s\n",
            s_duration (uptime), s_num (json_number (doc, NAN, "$.queue"), "%.0f"),
            s_num (json_number (doc, NAN, "$.results"), "%.0f"),
            json_bool (doc, 1, "$.store_ok") ? "" : "  -- STORE CANNOT COMMIT: ",
            json_bool (doc, 1, "$.store_ok") || !why ? "" : why);
    printf ("rate: %s pairs/s over 10 s, %s pairs/s over 1 min\n",
            s_num (json_number (doc, NAN, "$.rate_10s"), "%.1f"),
            s_num (json_number (doc, NAN, "$.rate_1m"), "%.1f"));
    const char *policy = json_string (doc, "$.policy");
    printf ("default: policy %s, rate limit %s, %s\n\n", policy ? policy : "-",
            s_limit (json_number (doc, NAN, "$.rate_limit")),
            json_bool (doc, 0, "$.paused") ? "paused" : "running");
    s_print_storage (doc);
    s_print_experiments_of (doc);
    s_print_shown (doc, "experiments");
    printf ("\n");
    s_print_agents_of (doc);
    s_print_shown (doc, "agents");
}

static void
s_print_agents (json_t *doc, s_args_t *args)
{
    (void)args;
    s_print_agents_of (doc);
    s_print_shown (doc, "agents");
}

static void
s_print_experiments (json_t *doc, s_args_t *args)
{
    (void)args;
    s_print_experiments_of (doc);
    s_print_shown (doc, "experiments");
    int n = json_length (doc, "$.experiments");
    if (n <= 0)
        return;
    int w = s_width (doc, "$.experiments", "experiment", 10, 40);
    printf ("\n%-*s %-19s  %-*s %s\n", w, "EXPERIMENT", "CREATED", w, "SOURCE", "PIV SETTINGS");
    for (int i = 0; i < n; i++) {
        const char *name = json_string (doc, "$.experiments[%d].experiment", i);
        const char *source = json_string (doc, "$.experiments[%d].source", i);
        const char *settings = json_string (doc, "$.experiments[%d].settings", i);
        int64_t created = json_int (doc, 0, "$.experiments[%d].created_ns", i);
        char when[64] = "-";
        if (created > 0)
            snprintf (when, sizeof when, "%s %.8s", s_date (created), s_clock (created));
        printf ("%-*s %-19s  %-*s %s\n", w, name ? name : "?", when, w, source ? source : "-",
                settings && *settings ? settings : "(configured)");
    }
}

// ---------------------------------------------------------------------------
// status --watch

// "[##########----------]  50%"
static const char *
s_bar (double part, double whole, int width)
{
    static char buf[160];
    double f = whole > 0 ? part / whole : 1;
    if (f < 0)
        f = 0;
    if (f > 1)
        f = 1;
    int full = (int)floor (f * width);
    int len = 0;
    buf[len++] = '[';
    for (int i = 0; i < width; i++)
        buf[len++] = i < full ? '#' : '-';
    snprintf (buf + len, sizeof buf - (size_t)len, "] %3.0f%%", floor (f * 100));
    return buf;
}

// Time to catch up with the camera: backlog / (rate - arrivals).
static const char *
s_catch_up (const s_exp_t *e)
{
    double backlog = e->pending + e->dispatched;
    double net = e->rate10 - e->arrivals;
    if (isnan (backlog) || backlog <= 0)
        return "caught up";
    if (e->paused)
        return "paused";
    if (isnan (net))
        return "-";
    static char buf[64]; // one per printf
    double scale = fmax (e->rate10, e->arrivals);
    if (net > 0.02 * scale && net > 0) {
        snprintf (buf, sizeof buf, "catches up in %s", s_duration (backlog / net));
        return buf;
    }
    if (e->rate10 <= 0)
        return "stalled (nothing computed in 10 s)";
    if (net >= -0.02 * scale)
        return "keeping up";
    snprintf (buf, sizeof buf, "falling behind by %.1f pairs/s", -net);
    return buf;
}

static void
s_print_progress (json_t *doc)
{
    int n = json_length (doc, "$.experiments");
    if (n <= 0)
        return;
    int w = s_width (doc, "$.experiments", "experiment", 10, 40);
    printf ("\n%-*s %-37s %15s  %s\n", w, "EXPERIMENT", "PROGRESS (done, failed, skipped)", "PAIRS",
            "BACKLOG");
    for (int i = 0; i < n; i++) {
        s_exp_t e;
        s_exp_read (doc, i, &e);
        double finished = e.done + e.failed + e.skipped;
        double all = finished + e.pending + e.dispatched;
        char count[48];
        snprintf (count, sizeof count, "%s/%s", s_num (finished, "%.0f"), s_num (all, "%.0f"));
        printf ("%-*s %-37s %15s  %s\n", w, e.name ? e.name : "?", s_bar (finished, all, 30), count,
                s_catch_up (&e));
    }
}

// Sleeps ms, or less when a signal comes.
static void
s_nap (int ms)
{
    for (int slept = 0; slept < ms && !s_stop; slept += 50) {
        struct timespec t = {0, 50 * 1000000L};
        nanosleep (&t, NULL);
    }
}

static int
s_run_status (s_ctl_t *ctl, s_args_t *args)
{
    const char *text = s_value (args, "count");
    int watch = s_value (args, "watch") || text;
    long count = watch ? LONG_MAX : 1;
    if (text && (s_parse_count ("--count", text, LONG_MAX, &count) != 0))
        return EXIT_USAGE;
    int tty = isatty (STDOUT_FILENO);
    char *line = cli_join (args->nsend, args->send);  // status [-e EXP] [--page K] [--limit N]
    if (!line) {
        s_error ("no memory");
        return EXIT_FAILED;
    }
    for (long k = 0; k < count && !s_stop; k++) {
        if (k > 0)
            s_nap (1000);
        if (s_stop)
            break;
        char *body;
        json_t *doc;
        int rc = s_ask_json (ctl, line, &body, &doc);
        if (rc == S_INTERRUPTED)
            break;
        if (rc != 0) {
            free (line);
            return rc;
        }
        if (ctl->json)
            printf ("%s\n", body); // one snapshot per line
        else {
            if (watch && tty)
                printf ("\033[H\033[2J");
            else if (k > 0)
                printf ("\n");
            if (watch)
                printf ("pivctl status at %.8s (every second; Ctrl-C to stop)\n\n",
                        s_clock (util_time_ns ()));
            s_print_status (doc);
            if (watch)
                s_print_progress (doc);
        }
        fflush (stdout);
        json_destroy (&doc);
        free (body);
    }
    free (line);
    return EXIT_OK;
}

// ---------------------------------------------------------------------------
// pairs, log

static void
s_print_pairs (json_t *doc, s_args_t *args)
{
    (void)args;
    const char *name = json_string (doc, "$.experiment");
    int n = json_length (doc, "$.pairs");
    if (n <= 0) {
        printf ("%s: no pairs%s\n", name ? name : "?",
                s_value (args, "state") || s_value (args, "after") ? " of that kind" : " yet");
        return;
    }
    int64_t first = json_int (doc, 0, "$.pairs[0].created_ns");
    printf ("%s: %d pair(s), local times of %s\n", name ? name : "?", n,
            first > 0 ? s_date (first) : "-");
    int ws = s_width (doc, "$.pairs", "stem", 4, 40);
    int wa = s_width (doc, "$.pairs", "agent", 5, 28);
    printf ("%8s  %-*s %-10s %3s  %-*s  %-12s  %-12s  %-12s %9s\n", "PAIR", ws, "STEM", "STATE",
            "TRY", wa, "AGENT", "CREATED", "DISPATCHED", "FINISHED", "LATENCY");
    int64_t last = 0;
    for (int i = 0; i < n; i++) {
        char p[32];
        snprintf (p, sizeof p, "$.pairs[%d]", i);
        const char *agent = json_string (doc, "%s.agent", p);
        const char *error = json_string (doc, "%s.error", p);
        const char *state = json_string (doc, "%s.state", p);
        last = json_int (doc, 0, "%s.pair", p);
        printf ("%8" PRId64 "  %-*s %-10s %3s  %-*s  %-12s  %-12s  %-12s %9s\n", last, ws,
                json_string (doc, "%s.stem", p) ? json_string (doc, "%s.stem", p) : "?",
                state ? state : "?", s_num (json_number (doc, NAN, "%s.attempts", p), "%.0f"), wa,
                agent && *agent ? agent : "-", s_clock (json_int (doc, 0, "%s.created_ns", p)),
                s_clock (json_int (doc, 0, "%s.dispatched_ns", p)),
                s_clock (json_int (doc, 0, "%s.finished_ns", p)),
                s_ms (json_number (doc, NAN, "%s.latency_ms", p)));
        if (error && *error)
            printf ("%8s  error: %s\n", "", error);
    }
    if (json_bool (doc, 0, "$.truncated"))
        printf ("(more pairs follow: add --after %" PRId64 ")\n", last);
}

static void
s_print_log (json_t *doc, s_args_t *args)
{
    (void)args;
    const char *name = json_string (doc, "$.experiment");
    int n = json_length (doc, "$.events");
    if (n <= 0) {
        printf ("%s: no events%s\n", name ? name : "?",
                s_value (args, "after") ? " after that" : "");
        return;
    }
    printf ("%s: %d event(s), local times\n", name ? name : "?", n);
    int wk = s_width (doc, "$.events", "kind", 4, 12);
    char day[16] = "";
    int64_t last = 0;
    for (int i = 0; i < n; i++) {
        int64_t ts = json_int (doc, 0, "$.events[%d].ts_ns", i);
        if (ts > 0 && strcmp (s_date (ts), day) != 0) {
            snprintf (day, sizeof day, "%s", s_date (ts));
            printf ("-- %s\n", day);
        }
        last = json_int (doc, 0, "$.events[%d].id", i);
        int64_t pair = json_int (doc, 0, "$.events[%d].pair", i);
        const char *kind = json_string (doc, "$.events[%d].kind", i);
        const char *payload = json_string (doc, "$.events[%d].payload", i);
        char pair_text[32] = "";
        if (pair > 0)
            snprintf (pair_text, sizeof pair_text, "pair %" PRId64, pair);
        printf ("%-12s #%-7" PRId64 " %-*s %-12s %s\n", s_clock (ts), last, wk, kind ? kind : "?",
                pair_text, payload ? payload : "");
    }
    if (json_bool (doc, 0, "$.truncated"))
        printf ("(more events follow: add --after %" PRId64 ")\n", last);
}

// ---------------------------------------------------------------------------
// Steering: rate, policy, pause, resume, retry, backfill, feedback

static void
s_print_rate (json_t *doc, s_args_t *args)
{
    (void)args;
    printf ("rate limit of %s: %s\n", s_scope (doc),
            s_limit (json_number (doc, NAN, "$.rate_limit")));
}

static void
s_print_policy (json_t *doc, s_args_t *args)
{
    (void)args;
    const char *policy = json_string (doc, "$.policy");
    printf ("policy of %s: %s\n", s_scope (doc), policy ? policy : "-");
}

static void
s_print_paused (json_t *doc, s_args_t *args)
{
    (void)args;
    printf ("%s: %s\n", s_scope (doc),
            json_bool (doc, 0, "$.paused") ? "paused (no new dispatch; tasks out finish)"
                                           : "running");
}

static void
s_print_moved (json_t *doc, s_args_t *args)
{
    const char *name = json_string (doc, "$.experiment");
    int retry = strcmp (args->command->name, "retry") == 0;
    printf ("%s: %s %s pair(s) back to pending\n", name ? name : "?",
            s_num (json_number (doc, NAN, "$.moved"), "%.0f"), retry ? "failed" : "skipped");
}

static void
s_print_feedback (json_t *doc, s_args_t *args)
{
    (void)args;
    const char *f = "$.feedback";
    printf ("feedback of %s: %s\n", s_scope (doc),
            json_bool (doc, 0, "%s.enabled", f) ? "on" : "off");
    if (json_length (doc, "%s.roi", f) == 4)
        printf ("  roi        x %s .. %s, y %s .. %s px\n",
                s_num (json_number (doc, NAN, "%s.roi[0]", f), "%g"),
                s_num (json_number (doc, NAN, "%s.roi[2]", f), "%g"),
                s_num (json_number (doc, NAN, "%s.roi[1]", f), "%g"),
                s_num (json_number (doc, NAN, "%s.roi[3]", f), "%g"));
    else
        printf ("  roi        the whole field\n");
    const char *quantity = json_string (doc, "%s.quantity", f);
    printf ("  quantity   %s\n", quantity ? quantity : "-");
    printf ("  setpoint   %s\n", s_num (json_number (doc, NAN, "%s.setpoint", f), "%g"));
    printf ("  kp, ki     %s, %s\n", s_num (json_number (doc, NAN, "%s.kp", f), "%g"),
            s_num (json_number (doc, NAN, "%s.ki", f), "%g"));
    double lo = json_number (doc, NAN, "%s.out_min", f),
           hi = json_number (doc, NAN, "%s.out_max", f);
    printf ("  output     within [%s, %s]\n", isnan (lo) ? "-inf" : s_num (lo, "%g"),
            isnan (hi) ? "inf" : s_num (hi, "%g"));
    printf ("  last       output %s, integral %s\n",
            s_num (json_number (doc, NAN, "%s.output", f), "%g"),
            s_num (json_number (doc, NAN, "%s.integral", f), "%g"));
}

// ---------------------------------------------------------------------------
// Commands answered by the broker alone

typedef void (s_print_fn) (json_t *doc, s_args_t *args);

// Sends the command line; prints the reply as it is (--json) or with 'print'.
static int
s_run_printed (s_ctl_t *ctl, s_args_t *args, s_print_fn *print)
{
    char *line = cli_join (args->nsend, args->send);
    if (!line) {
        s_error ("no memory");
        return EXIT_FAILED;
    }
    char *body;
    json_t *doc = NULL;
    int rc = ctl->json ? s_ask (ctl, line, &body) : s_ask_json (ctl, line, &body, &doc);
    free (line);
    if (rc != 0)
        return rc == S_INTERRUPTED ? EXIT_FAILED : rc;
    if (ctl->json)
        printf ("%s\n", body);
    else
        print (doc, args);
    json_destroy (&doc);
    free (body);
    return EXIT_OK;
}

#define S_PRINTED(run, print)                                                                      \
    static int run (s_ctl_t *ctl, s_args_t *args)                                                  \
    {                                                                                              \
        return s_run_printed (ctl, args, print);                                                   \
    }
S_PRINTED (s_run_agents, s_print_agents)
S_PRINTED (s_run_experiments, s_print_experiments)
S_PRINTED (s_run_pairs, s_print_pairs)
S_PRINTED (s_run_log, s_print_log)
S_PRINTED (s_run_rate, s_print_rate)
S_PRINTED (s_run_policy, s_print_policy)
S_PRINTED (s_run_pause, s_print_paused)
S_PRINTED (s_run_moved, s_print_moved)
S_PRINTED (s_run_feedback, s_print_feedback)

// ---------------------------------------------------------------------------
// tail: the feedback stream

static void
s_print_feedback_message (json_t *doc, int header)
{
    const char *quantity = json_string (doc, "$.quantity");
    if (header)
        printf ("%-12s %8s  %-20s %9s %6s %9s %9s %9s %10s %6s  %-18s %s\n", "PUBLISHED", "PAIR",
                "STEM", "LATENCY", "N", "MEAN_U", "MEAN_V", "SPEED", "VORTICITY", "VALID", "VALUE",
                "OUTPUT");
    const char *stem = json_string (doc, "$.stem");
    double valid = json_number (doc, NAN, "$.valid_fraction");
    char value[64];
    snprintf (value, sizeof value, "%s=%s", quantity ? quantity : "?",
              s_num (json_number (doc, NAN, "$.value"), "%.4g"));
    printf ("%-12s %8s  %-20s %9s %6s %9s %9s %9s %10s %6s  %-18s %s\n",
            s_clock (json_int (doc, 0, "$.published_ns")),
            s_num (json_number (doc, NAN, "$.pair"), "%.0f"), stem ? stem : "?",
            s_ms (json_number (doc, NAN, "$.latency_ms")),
            s_num (json_number (doc, NAN, "$.n"), "%.0f"),
            s_num (json_number (doc, NAN, "$.mean_u"), "%.4f"),
            s_num (json_number (doc, NAN, "$.mean_v"), "%.4f"),
            s_num (json_number (doc, NAN, "$.mean_speed"), "%.4f"),
            s_num (json_number (doc, NAN, "$.vorticity"), "%.3g"), s_num (valid * 100, "%.1f%%"),
            value, s_num (json_number (doc, NAN, "$.output"), "%.6g"));
}

// 0 if 'name' is a plain experiment name (path_check_component); else says
// why, naming the command, and returns -1.
static int
s_check_name (const char *command, const char *name)
{
    char why[128];
    if (path_check_component (name, why, sizeof why) == 0)
        return 0;
    s_error ("%s: bad experiment '%.100s': %s", command, name, why);
    return -1;
}

static int
s_run_tail (s_ctl_t *ctl, s_args_t *args)
{
    long count = LONG_MAX;
    const char *text = s_value (args, "count");
    if (text && s_parse_count ("--count", text, LONG_MAX, &count) != 0)
        return EXIT_USAGE;
    if (s_check_name ("tail", args->words[0]) != 0)
        return EXIT_USAGE;
    // An experiment the broker does not know would be waited for in
    // silence: ask first ("no experiment 'x'", exit 1), unless --new says
    // it is one about to start.
    if (!s_value (args, "new")) {
        char *words[] = {"experiments", "-e", args->words[0]};
        char *line = cli_join (3, words), *body = NULL;
        int rc = line ? s_ask (ctl, line, &body) : EXIT_FAILED;
        free (line);
        free (body);
        if (rc != 0)
            return EXIT_FAILED;
    }
    const char *endpoint = ctl->cfg.broker.publish;
    char topic[PROTO_MAX_STRING];
    // "feedback.run7/": no other experiment's topic starts with it (names
    // hold no '/'), so ZeroMQ's prefix match delivers run7's alone.
    snprintf (topic, sizeof topic, "%s%s%s", PROTO_TOPIC_FEEDBACK, args->words[0],
              PROTO_TOPIC_END);
    char err[1024];
    int bad_cert;
    zsock_t *sub = secure_connect (ZMQ_SUB, &ctl->cfg, endpoint, "the broker's feedback stream",
                                   0, err, sizeof err, &bad_cert);
    if (!sub) {
        s_error ("%s", err);
        return bad_cert ? EXIT_USAGE : EXIT_FAILED;
    }
    zsock_set_subscribe (sub, topic);
    zpoller_t *poller = zpoller_new (sub, NULL);
    long seen = 0;
    while (seen < count && !s_stop) {
        if (!zpoller_wait (poller, 100))
            continue;
        zmsg_t *msg = zmsg_recv (sub);
        char *got = msg ? zmsg_popstr (msg) : NULL;
        char *json = msg ? zmsg_popstr (msg) : NULL;
        if (got && json && strcmp (got, topic) == 0) {
            if (ctl->json)
                printf ("%s\n", json);
            else {
                char err[256];
                json_t *doc = json_parse (json, err, sizeof err);
                if (doc)
                    s_print_feedback_message (doc, seen == 0);
                else
                    s_error ("a message on '%s' is not JSON: %s", topic, err);
                json_destroy (&doc);
            }
            fflush (stdout);
            seen++;
        }
        free (got);
        free (json);
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    zsock_destroy (&sub);
    return EXIT_OK;
}

// ---------------------------------------------------------------------------
// export: stored fields to files

// Makes 'path' and its missing parents. 0, or -1 with err naming the path.
static int
s_mkdirs (const char *path, char *err, size_t errlen)
{
    char buf[PATH_MAX];
    if (snprintf (buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        snprintf (err, errlen, "path too long: '%s'", path);
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        struct stat st;
        if (mkdir (buf, 0777) != 0 && errno != EEXIST) {
            snprintf (err, errlen, "cannot create '%s': %s", buf, strerror (errno));
            return -1;
        }
        if (stat (buf, &st) != 0) {
            snprintf (err, errlen, "cannot create '%s': %s", buf, strerror (errno));
            return -1;
        }
        if (!S_ISDIR (st.st_mode)) {
            snprintf (err, errlen, "cannot create '%s': a file of that name is in the way", buf);
            return -1;
        }
        *p = c;
        if (c == '\0')
            return 0;
    }
}

// Opens the store read-only and finds experiment 'name'. The store, or
// NULL (logged: the store cannot be opened, or no such experiment).
static store_t *
s_open_store (s_ctl_t *ctl, const char *name, int64_t *experiment)
{
    char err[1024];
    store_t *store = store_open_readonly (ctl->cfg.broker.store, err, sizeof err);
    if (!store) {
        s_error ("%s", err);
        return NULL;
    }
    store_experiment_t found;
    int rc = store_experiment_find (store, name, &found);
    if (rc != 1) {
        if (rc == 0)
            s_error ("no experiment '%s' in the store '%s'", name, ctl->cfg.broker.store);
        else
            s_error ("cannot read the store '%s': %s", ctl->cfg.broker.store, store_error (store));
        store_destroy (&store);
        return NULL;
    }
    *experiment = found.id;
    return store;
}

typedef struct {
    const char *name;    // the experiment
    const char *dir;     // where to
    piv_format_t format; // txt or tecplot
    long total;          // results expected (for the progress bar)
    long written;        // fields written
    long missing;        // results without a stored field
    long errors;         // fields that could not be written
    int tty;             // stderr is a terminal: draw a progress bar
} s_export_t;

// The number of done pairs of experiment 'name' (the results to export).
typedef struct {
    const char *name; // looked for
    long done;        // its done pairs
} s_done_t;

static int
s_done_of (void *arg, const store_counts_t *counts)
{
    s_done_t *d = arg;
    if (strcmp (counts->name, d->name) == 0)
        d->done = (long)counts->pairs[STORE_DONE];
    return 0;
}

// 1 if 'stem' would leave the export directory (absolute, or a ".." step).
static int
s_stem_escapes (const char *stem)
{
    if (stem[0] == '/' || stem[0] == '\0')
        return 1;
    for (const char *p = stem; p; p = strchr (p, '/')) {
        p += *p == '/';
        if (strncmp (p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0'))
            return 1;
    }
    return 0;
}

// Writes one field to 'path' with a header naming where it comes from. 0,
// or -1 with err naming the file.
static int
s_write_field (const piv_field_t *field, const char *path, piv_format_t format,
               const char *experiment, const store_result_info_t *r, char *err, size_t errlen)
{
    FILE *out = fopen (path, "w");
    if (!out) {
        snprintf (err, errlen, "cannot write '%s': %s", path, strerror (errno));
        return -1;
    }
    char header[1024];
    snprintf (header, sizeof header,
              "pivfarm export of experiment '%s', pair %" PRId64 " ('%s')\n"
              "computed by agent '%s', attempt %d, in %.1f ms; results file '%s'",
              experiment, r->pair, r->stem, r->agent ? r->agent : "", r->attempt,
              r->compute_ns / 1e6, r->path ? r->path : "");
    errno = 0;
    int bad = piv_field_write (field, out, format, header) != 0 || ferror (out);
    if (fclose (out) != 0 || bad) {
        snprintf (err, errlen, "cannot write '%s': %s", path,
                  errno ? strerror (errno) : "write error");
        return -1;
    }
    return 0;
}

static int
s_export_one (void *arg, const store_result_info_t *r)
{
    s_export_t *x = arg;
    if (!r->field || !r->field_size) {
        x->missing++;
        return 0;
    }
    if (s_stem_escapes (r->stem)) {
        s_error ("refusing to export pair %" PRId64 ": its stem '%s' leads out of '%s'", r->pair,
                 r->stem, x->dir);
        x->errors++;
        return 0;
    }
    char err[PATH_MAX + 512], path[PATH_MAX];
    piv_field_t *field = piv_field_decode (r->field, r->field_size, err, sizeof err);
    if (!field) {
        s_error ("the stored field of pair %" PRId64 " ('%s') is unreadable: %s", r->pair, r->stem,
                 err);
        x->errors++;
        return 0;
    }
    snprintf (path, sizeof path, "%s/%s.%s", x->dir, r->stem,
              x->format == PIV_FORMAT_TECPLOT ? "dat" : "txt");
    char *slash = strrchr (path, '/');
    *slash = '\0';
    int ok = 0;
    if (s_mkdirs (path, err, sizeof err) == 0) {
        *slash = '/';
        if (s_write_field (field, path, x->format, x->name, r, err, sizeof err) == 0)
            ok = 1;
    }
    piv_field_destroy (&field);
    if (!ok) {
        s_error ("%s", err);
        x->errors++;
        return 1; // the directory is not writable: the rest would fail alike
    }
    x->written++;
    if (x->tty) {
        long done = x->written + x->missing + x->errors;
        fprintf (stderr, "\rexporting %s %s %ld/%ld", x->name,
                 s_bar ((double)done, (double)(x->total > done ? x->total : done), 30), done,
                 x->total > done ? x->total : done);
    }
    return 0;
}

static int
s_run_export (s_ctl_t *ctl, s_args_t *args)
{
    s_export_t x = {.name = args->words[0], .dir = s_value (args, "output")};
    const char *format = s_value (args, "format");
    if (s_check_name ("export", x.name) != 0)
        return EXIT_USAGE;
    if (!x.dir || !*x.dir) {
        s_error ("export needs -o DIR; usage: pivctl %s", args->command->usage);
        return EXIT_USAGE;
    }
    if (!format || strcmp (format, "txt") == 0)
        x.format = PIV_FORMAT_TXT;
    else if (strcmp (format, "tecplot") == 0)
        x.format = PIV_FORMAT_TECPLOT;
    else {
        s_error ("bad --format '%s': txt or tecplot", format);
        return EXIT_USAGE;
    }
    int64_t experiment;
    store_t *store = s_open_store (ctl, x.name, &experiment);
    if (!store)
        return EXIT_FAILED;
    char err[PATH_MAX + 512];
    if (s_mkdirs (x.dir, err, sizeof err) != 0) {
        s_error ("%s", err);
        store_destroy (&store);
        return EXIT_FAILED;
    }
    if (access (x.dir, W_OK | X_OK) != 0) {
        s_error ("cannot write into '%s': %s", x.dir, strerror (errno));
        store_destroy (&store);
        return EXIT_FAILED;
    }
    s_done_t done = {x.name, 0};
    store_counts (store, s_done_of, &done);
    x.total = done.done;
    x.tty = isatty (STDERR_FILENO);
    int rc = store_results_of (store, experiment, s_export_one, &x);
    if (x.tty)
        fprintf (stderr, "\r\033[K");
    if (rc < 0)
        s_error ("cannot read the results of '%s' from '%s': %s", x.name, ctl->cfg.broker.store,
                 store_error (store));
    store_destroy (&store);
    if (ctl->json) {
        printf ("{\"experiment\":");
        s_put_json_string (x.name);
        printf (",\"dir\":");
        s_put_json_string (x.dir);
        printf (",\"written\":%ld,\"missing\":%ld,\"errors\":%ld}\n", x.written, x.missing,
                x.errors);
    }
    else
        printf ("exported %ld field(s) of %s to %s (%ld result(s) without a stored field%s)\n",
                x.written, x.name, x.dir, x.missing, x.errors ? ", errors above" : "");
    return rc < 0 || x.errors ? EXIT_FAILED : EXIT_OK;
}

// ---------------------------------------------------------------------------
// replay: run it, wait for it, compare it with the original

// "status -e NAME" into line (the name quoted as cli_split reads it): the
// status of that experiment alone, however many the broker has. 0, or -1
// (said) when it does not fit.
static int
s_status_of (const char *name, char *line, size_t size)
{
    char *words[] = {"status", "-e", (char *)name};
    char *joined = cli_join (3, words);
    int rc = joined && strlen (joined) < size ? 0 : -1;
    if (rc == 0)
        snprintf (line, size, "%s", joined);
    else
        s_error ("the name '%.100s' is too long to ask for", name);
    free (joined);
    return rc;
}

// Waits until experiment 'name' has sent its whole replay and (unless
// feedback_only) has no pair pending or dispatched; *out gets its last
// figures. EXIT_OK, or EXIT_FAILED (logged: the broker stopped answering,
// the wait ran out, Ctrl-C).
static int
s_replay_wait (s_ctl_t *ctl, const char *name, int feedback_only, long wait_s, s_exp_t *out)
{
    int tty = isatty (STDERR_FILENO);
    double start = util_now (), said = start;
    char line[PATH_MAX + 64];
    if (s_status_of (name, line, sizeof line) != 0)
        return EXIT_FAILED;
    for (;;) {
        char *body;
        json_t *doc;
        int rc = s_ask_json (ctl, line, &body, &doc);
        if (rc == S_INTERRUPTED)
            s_error ("interrupted: the replay '%s' goes on in the broker", name);
        if (rc != 0)
            return EXIT_FAILED;
        int n = json_length (doc, "$.experiments"), found = 0;
        for (int i = 0; i < n && !found; i++) {
            const char *e = json_string (doc, "$.experiments[%d].experiment", i);
            if (e && strcmp (e, name) == 0) {
                s_exp_read (doc, i, out);
                found = 1;
            }
        }
        int finished =
            found && out->replay_finished && (feedback_only || out->pending + out->dispatched == 0);
        double now = util_now ();
        if (found && (tty || now - said >= 10 || finished)) {
            fprintf (stderr, "%sreplaying as %s: %s/%s %s sent", tty ? "\r\033[K" : "", name,
                     s_num (out->replay_sent, "%.0f"), s_num (out->replay_total, "%.0f"),
                     feedback_only ? "feedback messages" : "files");
            if (!feedback_only)
                fprintf (stderr, ", %s done, %s failed, %s waiting", s_num (out->done, "%.0f"),
                         s_num (out->failed, "%.0f"),
                         s_num (out->pending + out->dispatched, "%.0f"));
            fprintf (stderr, "%s", tty && !finished ? "" : "\n");
            said = now;
        }
        json_destroy (&doc);
        free (body);
        if (finished)
            return EXIT_OK;
        if (now - start > wait_s) {
            s_error ("the replay '%s' did not finish within %ld s (see pivctl status)", name,
                     wait_s);
            return EXIT_FAILED;
        }
        s_nap (REPLAY_POLL_MS);
        if (s_stop) {
            s_error ("interrupted: the replay '%s' goes on in the broker", name);
            return EXIT_FAILED;
        }
    }
}

// A stem seen in the original, the replay or both.
typedef struct {
    int in_original, in_replay; // where it was seen
    unsigned char *field;       // the original's stored field, while its chunk is compared
    size_t field_size;          // its bytes
} s_stem_t;

typedef struct {
    zhashx_t *stems;       // stem -> s_stem_t
    int replay;            // listing the replay's pairs (else the original's)
    long index, skip;      // results of the original: seen so far, to skip (done before)
    size_t held;           // bytes of fields held
    long held_count;       // fields held
    int full;              // the chunk is full: list again from 'index'
    long compared;         // pairs whose fields were compared
    long grid_differs;     // of them, fields on different grids
    double max_difference; // max (|du|, |dv|) over them
    const char *error;     // the first unreadable field
} s_compare_t;

static void
s_stem_destroy (void **item)
{
    s_stem_t *stem = *item;
    if (stem)
        free (stem->field);
    free (stem);
    *item = NULL;
}

static int
s_note_pair (void *arg, const store_pair_info_t *p)
{
    s_compare_t *c = arg;
    s_stem_t *stem = zhashx_lookup (c->stems, p->stem);
    if (!stem) {
        stem = calloc (1, sizeof *stem);
        if (!stem)
            return 1;
        zhashx_insert (c->stems, p->stem, stem);
    }
    if (c->replay)
        stem->in_replay = 1;
    else
        stem->in_original = 1;
    return 0;
}

// Holds the fields of the original's results from 'skip' on, up to the budget.
static int
s_hold_field (void *arg, const store_result_info_t *r)
{
    s_compare_t *c = arg;
    if (c->index++ < c->skip)
        return 0;
    if (c->held_count > 0 && c->held + r->field_size > COMPARE_BUDGET) {
        c->index--;
        c->full = 1;
        return 1;
    }
    s_stem_t *stem = zhashx_lookup (c->stems, r->stem);
    if (!stem || !stem->in_replay || !r->field || !r->field_size)
        return 0;
    stem->field = malloc (r->field_size);
    if (!stem->field)
        return 1;
    memcpy (stem->field, r->field, r->field_size);
    stem->field_size = r->field_size;
    c->held += r->field_size;
    c->held_count++;
    return 0;
}

// Compares a result of the replay with the original's field held for it.
static int
s_compare_field (void *arg, const store_result_info_t *r)
{
    s_compare_t *c = arg;
    s_stem_t *stem = zhashx_lookup (c->stems, r->stem);
    if (!stem || !stem->field || !r->field || !r->field_size)
        return 0;
    char err[256];
    piv_field_t *a = piv_field_decode (stem->field, stem->field_size, err, sizeof err);
    piv_field_t *b = piv_field_decode (r->field, r->field_size, err, sizeof err);
    if (a && b && (a->nx != b->nx || a->ny != b->ny))
        c->grid_differs++;
    else if (a && b) {
        for (int k = 0; k < a->nx * a->ny; k++) {
            double d = fmax (fabs (a->u[k] - b->u[k]), fabs (a->v[k] - b->v[k]));
            if (d > c->max_difference) // NaN (both vectors invalid) compares false
                c->max_difference = d;
        }
    }
    else if (!c->error)
        c->error = "a stored field is unreadable";
    if (a && b)
        c->compared++;
    piv_field_destroy (&a);
    piv_field_destroy (&b);
    free (stem->field);
    stem->field = NULL;
    stem->field_size = 0;
    return 0;
}

// The arrival times of an experiment's files, in arrival order.
typedef struct {
    char **names;     // file names
    int64_t *seen_ns; // when the broker saw them
    size_t count, size;
} s_files_t;

static int
s_note_file (void *arg, int64_t file, const char *name, int64_t size, int64_t mtime_ns,
             int64_t seen_ns)
{
    (void)file, (void)size, (void)mtime_ns;
    s_files_t *f = arg;
    if (f->count == f->size) {
        size_t grown = f->size ? 2 * f->size : 1024;
        char **names = realloc (f->names, grown * sizeof (char *));
        if (names)
            f->names = names;
        int64_t *seen = names ? realloc (f->seen_ns, grown * sizeof (int64_t)) : NULL;
        if (!seen)
            return 1;
        f->seen_ns = seen;
        f->size = grown;
    }
    if (!(f->names[f->count] = strdup (name)))
        return 1;
    f->seen_ns[f->count++] = seen_ns;
    return 0;
}

static void
s_files_release (s_files_t *f)
{
    for (size_t i = 0; i < f->count; i++)
        free (f->names[i]);
    free (f->names);
    free (f->seen_ns);
    memset (f, 0, sizeof *f);
}

// The pacing of the replay against the original: files matched by name,
// intervals from the first matched file, expected (t_i - t_0) / speed.
typedef struct {
    long files;              // files matched
    double expected_s;       // expected duration of the replay (last matched file)
    double actual_s;         // its duration
    double error_percent;    // (actual - expected) / expected, NAN without a duration
    double max_deviation_ms; // largest |actual_i - expected_i|, NAN without files
} s_pacing_t;

static void
s_pacing (const s_files_t *original, const s_files_t *replay, double speed, s_pacing_t *p)
{
    memset (p, 0, sizeof *p);
    p->error_percent = p->max_deviation_ms = NAN;
    zhashx_t *seen = zhashx_new (); // name -> index in replay + 1
    for (size_t i = 0; seen && i < replay->count; i++)
        zhashx_insert (seen, replay->names[i], (void *)(uintptr_t)(i + 1));
    int64_t t0 = 0, r0 = 0;
    for (size_t i = 0; seen && i < original->count; i++) {
        uintptr_t k = (uintptr_t)zhashx_lookup (seen, original->names[i]);
        if (!k)
            continue;
        int64_t t = original->seen_ns[i], r = replay->seen_ns[k - 1];
        if (p->files++ == 0) {
            t0 = t;
            r0 = r;
            p->max_deviation_ms = 0;
        }
        double expected = isnan (speed) ? 0 : (t - t0) / 1e9 / speed;
        double actual = (r - r0) / 1e9;
        p->max_deviation_ms = fmax (p->max_deviation_ms, fabs (actual - expected) * 1e3);
        p->expected_s = expected;
        p->actual_s = actual;
    }
    if (p->expected_s > 0)
        p->error_percent = (p->actual_s - p->expected_s) / p->expected_s * 100;
    zhashx_destroy (&seen);
}

// Compares experiment 'name' (the replay) with 'of' in the store and
// prints the report. EXIT_OK, or EXIT_FAILED (logged).
static int
s_replay_compare (s_ctl_t *ctl, const char *of, const char *name, double speed)
{
    int64_t original, replay;
    store_t *store = s_open_store (ctl, name, &replay);
    if (!store)
        return EXIT_FAILED;
    store_experiment_t found;
    if (store_experiment_find (store, of, &found) != 1) {
        s_error ("no experiment '%s' in the store '%s'", of, ctl->cfg.broker.store);
        store_destroy (&store);
        return EXIT_FAILED;
    }
    original = found.id;
    s_compare_t c = {.stems = zhashx_new ()};
    zhashx_set_destructor (c.stems, s_stem_destroy);
    s_files_t fo = {0}, fr = {0};
    int rc = store_pairs_of (store, original, -1, 0, INT_MAX, s_note_pair, &c);
    c.replay = 1;
    if (rc >= 0)
        rc = store_pairs_of (store, replay, -1, 0, INT_MAX, s_note_pair, &c);
    // The fields: the original's held chunk by chunk, each compared with
    // one listing of the replay's.
    while (rc >= 0) {
        c.index = 0;
        c.held = 0;
        c.held_count = 0;
        c.full = 0;
        rc = store_results_of (store, original, s_hold_field, &c);
        if (rc >= 0 && c.held_count)
            rc = store_results_of (store, replay, s_compare_field, &c);
        if (!c.full)
            break;
        c.skip = c.index;
    }
    if (rc >= 0)
        rc = store_files_of (store, original, s_note_file, &fo);
    if (rc >= 0)
        rc = store_files_of (store, replay, s_note_file, &fr);
    if (rc < 0) {
        s_error ("cannot compare '%s' with '%s' in the store '%s': %s", name, of,
                 ctl->cfg.broker.store, store_error (store));
        goto done;
    }
    s_pacing_t pacing;
    s_pacing (&fo, &fr, speed, &pacing);
    long matched = 0, only_original = 0, only_replay = 0;
    for (s_stem_t *s = zhashx_first (c.stems); s; s = zhashx_next (c.stems)) {
        matched += s->in_original && s->in_replay;
        only_original += s->in_original && !s->in_replay;
        only_replay += s->in_replay && !s->in_original;
    }
    double difference = c.compared ? c.max_difference : NAN;
    if (ctl->json) {
        printf ("{\"experiment\":");
        s_put_json_string (of);
        printf (",\"as\":");
        s_put_json_string (name);
        printf (",\"pairs_matched\":%ld,\"pairs_missing\":%ld", matched,
                only_original + only_replay);
        for (int side = 0; side < 2; side++) {
            printf (",\"%s\":[", side ? "missing_in_original" : "missing_in_replay");
            int first = 1;
            for (s_stem_t *s = zhashx_first (c.stems); s; s = zhashx_next (c.stems))
                if (side ? s->in_replay && !s->in_original : s->in_original && !s->in_replay) {
                    printf ("%s", first ? "" : ",");
                    s_put_json_string (zhashx_cursor (c.stems));
                    first = 0;
                }
            printf ("]");
        }
        printf (",\"fields_compared\":%ld,\"fields_on_other_grids\":%ld", c.compared,
                c.grid_differs);
        printf (",\"max_vector_difference\":");
        s_put_json_number (difference);
        printf (",\"files_matched\":%ld,\"pacing_error_percent\":", pacing.files);
        s_put_json_number (pacing.error_percent);
        printf (",\"pacing_max_deviation_ms\":");
        s_put_json_number (pacing.max_deviation_ms);
        printf (",\"speed\":");
        s_put_json_number (speed);
        printf ("}\n");
    }
    else {
        printf ("replay of %s as %s at %s\n", of, name,
                isnan (speed) ? "full speed (max)" : s_num (speed, "%g x the original pace"));
        printf ("pairs:   %ld matched by stem; %ld only in %s, %ld only in %s\n", matched,
                only_original, of, only_replay, name);
        int shown = 0;
        for (s_stem_t *s = zhashx_first (c.stems); s && shown < 10; s = zhashx_next (c.stems))
            if (s->in_original != s->in_replay) {
                printf ("         missing in %s: %s\n", s->in_replay ? of : name,
                        (const char *)zhashx_cursor (c.stems));
                shown++;
            }
        printf ("vectors: largest difference max(|du|, |dv|) %s over %ld pair(s) with both "
                "fields stored%s\n",
                s_num (difference, "%.3g px"), c.compared,
                c.grid_differs ? " (some on different grids: not compared)" : "");
        printf ("pacing:  %ld file(s); the replay took %s against %s expected (%s); largest "
                "deviation %s\n",
                pacing.files, s_num (pacing.actual_s, "%.3f s"),
                s_num (pacing.expected_s, "%.3f s"), s_num (pacing.error_percent, "%+.2f %%"),
                s_ms (pacing.max_deviation_ms));
    }
    if (c.error)
        s_error ("%s (pair fields that could not be decoded were left out)", c.error);
done:
    s_files_release (&fo);
    s_files_release (&fr);
    zhashx_destroy (&c.stems);
    store_destroy (&store);
    return rc < 0 ? EXIT_FAILED : EXIT_OK;
}

// For the commands that start something and wait for its end (replay,
// archive, release): reads --wait into *wait_s, sends the command line and
// gives the answer. EXIT_OK, EXIT_USAGE or EXIT_FAILED (logged).
static int
s_start_waited (s_ctl_t *ctl, s_args_t *args, long *wait_s, char **body, json_t **doc)
{
    *wait_s = REPLAY_WAIT_S;
    const char *text = s_value (args, "wait");
    if (text && s_parse_count ("--wait", text, 31 * 86400, wait_s) != 0)
        return EXIT_USAGE;
    char *line = cli_join (args->nsend, args->send);
    if (!line) {
        s_error ("no memory");
        return EXIT_FAILED;
    }
    int rc = s_ask_json (ctl, line, body, doc);
    free (line);
    return rc == 0 ? EXIT_OK : rc == EXIT_USAGE ? EXIT_USAGE : EXIT_FAILED;
}

static int
s_run_replay (s_ctl_t *ctl, s_args_t *args)
{
    long wait_s;
    char *body;
    json_t *doc;
    int rc = s_start_waited (ctl, args, &wait_s, &body, &doc);
    if (rc != EXIT_OK)
        return rc;
    const char *as = json_string (doc, "$.as");
    char *name = strdup (as ? as : "");
    double speed = json_number (doc, NAN, "$.speed");
    int feedback_only = json_bool (doc, 0, "$.feedback_only");
    json_destroy (&doc);
    free (body);
    if (!name || !*name) {
        s_error ("the broker at '%s' did not name the replay", ctl->cfg.broker.control);
        free (name);
        return EXIT_FAILED;
    }
    s_exp_t last = {0};
    rc = s_replay_wait (ctl, name, feedback_only, wait_s, &last);
    if (rc == EXIT_OK && feedback_only) {
        if (ctl->json) {
            printf ("{\"experiment\":");
            s_put_json_string (args->words[0]);
            printf (",\"as\":");
            s_put_json_string (name);
            printf (",\"feedback_only\":true,\"republished\":%s,\"speed\":",
                    s_num (last.replay_sent, "%.0f"));
            s_put_json_number (speed);
            printf ("}\n");
        }
        else
            printf ("re-published %s feedback message(s) of %s on %s%s%s (marked replay)\n",
                    s_num (last.replay_sent, "%.0f"), args->words[0], PROTO_TOPIC_FEEDBACK, name,
                    PROTO_TOPIC_END);
    }
    else if (rc == EXIT_OK)
        rc = s_replay_compare (ctl, args->words[0], name, speed);
    free (name);
    return rc;
}

static int s_start_waited (s_ctl_t *ctl, s_args_t *args, long *wait_s, char **body,
                           json_t **doc);

// ---------------------------------------------------------------------------
// provision, archive, release, iobench (doc/storage.md)

static void
s_print_provision (json_t *doc, s_args_t *args)
{
    (void)args;
    char size[32];
    int64_t expires = json_int (doc, 0, "$.allocation.expires_ns");
    printf ("provisioned %s: %s of %s at %s, expires %s %.8s\n",
            json_string (doc, "$.experiment"), json_string (doc, "$.allocation.kind"),
            util_format_size (json_int (doc, 0, "$.allocation.size_bytes"), size, sizeof size),
            json_string (doc, "$.allocation.path"), s_date (expires), s_clock (expires));
}
S_PRINTED (s_run_provision, s_print_provision)

// Waits until the archive of 'name' has ended (and, for a release, its
// allocation is gone); prints how it ended. EXIT_OK or EXIT_FAILED.
static int
s_archive_wait (s_ctl_t *ctl, const char *name, int release, long wait_s)
{
    int64_t deadline = zclock_mono () + wait_s * 1000;
    char line[PATH_MAX + 64];
    if (s_status_of (name, line, sizeof line) != 0)
        return EXIT_FAILED;
    for (;;) {
        char *body;
        json_t *doc;
        int rc = s_ask_json (ctl, line, &body, &doc);
        if (rc != 0)
            return EXIT_FAILED;
        int n = json_length (doc, "$.experiments"), k = -1;
        for (int i = 0; i < n; i++) {
            const char *e = json_string (doc, "$.experiments[%d].experiment", i);
            if (e && strcmp (e, name) == 0)
                k = i;
        }
        const char *state = k >= 0 ? json_string (doc, "$.experiments[%d].archive.state", k) : NULL;
        int held = k >= 0 && json_type_at (doc, "$.experiments[%d].allocation", k) == JSON_OBJECT;
        int ended = state && (strcmp (state, "failed") == 0
                              || (strcmp (state, "done") == 0 && !(release && held)));
        if (ended || zclock_mono () > deadline || s_stop) {
            if (ctl->json && ended)
                printf ("%s\n", body);
            int ok = ended && strcmp (state, "done") == 0;
            const char *error = json_string (doc, "$.experiments[%d].archive.error", k);
            if (!ended)
                s_error ("the archive of '%s' has not ended within %ld s (state %s)", name,
                         wait_s, state ? state : "unknown");
            else if (!ok)
                s_error ("the archive of '%s' failed: %s", name, error ? error : "?");
            else if (!ctl->json)
                printf ("archived %s to %s: %s file(s) copied and verified, %s verified before, "
                        "%s original(s) removed%s\n",
                        name, json_string (doc, "$.experiments[%d].archive.to", k),
                        s_num (json_number (doc, NAN, "$.experiments[%d].archive.copied", k), "%.0f"),
                        s_num (json_number (doc, NAN, "$.experiments[%d].archive.already", k), "%.0f"),
                        s_num (json_number (doc, NAN, "$.experiments[%d].archive.removed", k), "%.0f"),
                        release ? "; its allocation is released" : "");
            json_destroy (&doc);
            free (body);
            return ok ? EXIT_OK : EXIT_FAILED;
        }
        json_destroy (&doc);
        free (body);
        s_nap (REPLAY_POLL_MS);
    }
}

static int
s_run_archive (s_ctl_t *ctl, s_args_t *args)
{
    long wait_s;
    char *body;
    json_t *doc;
    int rc = s_start_waited (ctl, args, &wait_s, &body, &doc);
    if (rc != EXIT_OK)
        return rc;
    json_destroy (&doc);
    free (body);
    if (s_value (args, "no-wait"))
        return EXIT_OK;
    return s_archive_wait (ctl, args->words[0], strcmp (args->command->name, "release") == 0,
                           wait_s);
}

static int
s_run_iobench (s_ctl_t *ctl, s_args_t *args)
{
    const char *dir = args->words[0];
    const char *total_text = s_value (args, "total"), *need_text = s_value (args, "need");
    int64_t total = 256 << 20;
    double need = 0;
    if (total_text && (util_parse_size (total_text, &total) != 0 || total < (1 << 20))) {
        s_error ("bad --total '%s': a size of 1M or more, such as 256M", total_text);
        return EXIT_USAGE;
    }
    if (need_text && util_parse_rate (need_text, &need) != 0) {
        s_error ("bad --need '%s': a rate such as 240Mbit, 30MB or 1Gbit (per second)",
                 need_text);
        return EXIT_USAGE;
    }
    iobench_row_t rows[IOBENCH_SIZES];
    int best;
    char err[4200];
    if (iobench_run (dir, total, rows, &best, err, sizeof err) != 0) {
        s_error ("%s", err);
        return EXIT_FAILED;
    }
    int sustains = need <= 0 || rows[best].write_mb_s * 1e6 >= need;
    char size[32];
    if (ctl->json) {
        printf ("{\"dir\":");
        s_put_json_string (dir);
        printf (",\"rows\":[");
        for (int k = 0; k < IOBENCH_SIZES; k++)
            printf ("%s{\"io_size\":%zu,\"bytes\":%lld,\"write_mb_s\":%.1f,\"read_mb_s\":%.1f}",
                    k ? "," : "", rows[k].io_size, (long long) rows[k].bytes, rows[k].write_mb_s,
                    rows[k].read_mb_s);
        printf ("],\"best_io_size\":%zu,\"need_mb_s\":", rows[best].io_size);
        s_put_json_number (need > 0 ? need / 1e6 : NAN);
        printf (",\"sustains\":%s}\n", need > 0 ? (sustains ? "true" : "false") : "null");
        return sustains ? EXIT_OK : EXIT_FAILED;
    }
    printf ("sequential IO in %s (%s per size, write + fsync, then read uncached)\n", dir,
            util_format_size (rows[0].bytes, size, sizeof size));
    printf ("%10s %12s %12s\n", "IO SIZE", "WRITE MB/s", "READ MB/s");
    for (int k = 0; k < IOBENCH_SIZES; k++)
        printf ("%10s %12.1f %12.1f%s\n", util_format_size ((int64_t)rows[k].io_size, size, sizeof size),
                rows[k].write_mb_s, rows[k].read_mb_s, k == best ? "  <- best" : "");
    char key[32];
    if (rows[best].io_size >= (1 << 20))
        snprintf (key, sizeof key, "%zuM", rows[best].io_size >> 20);
    else
        snprintf (key, sizeof key, "%zuK", rows[best].io_size >> 10);
    printf ("best IO size: %s (storage/io_size = %s)\n",
            util_format_size ((int64_t)rows[best].io_size, size, sizeof size), key);
    if (need > 0)
        printf ("%s sustains %s (%.1f MB/s): %s (writes %.1f MB/s at the best size)\n", dir,
                need_text, need / 1e6, sustains ? "yes" : "NO", rows[best].write_mb_s);
    return sustains ? EXIT_OK : EXIT_FAILED;
}

// ---------------------------------------------------------------------------
// keygen: a CURVE key pair (doc/security.md)

static int
s_run_keygen (s_ctl_t *ctl, s_args_t *args)
{
    (void)ctl;
    const char *name = args->words[0];
    const char *dir = s_value (args, "output");
    if (!dir)
        dir = ".";
    if (!*name || name[0] == '.' || strspn (name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                  "0123456789._-") != strlen (name)) {
        s_error ("bad name '%s': letters, digits, '.', '_' and '-', not starting with '.'", name);
        return EXIT_USAGE;
    }
    char public_path[PATH_MAX], secret_path[PATH_MAX + 8];
    if ((size_t)snprintf (public_path, sizeof public_path, "%s/%s.cert", dir, name)
        >= sizeof public_path) {
        s_error ("the path '%s/%s.cert' is too long", dir, name);
        return EXIT_USAGE;
    }
    snprintf (secret_path, sizeof secret_path, "%s_secret", public_path);
    // DIR is made if missing, as export makes its own.
    char err[PATH_MAX + 512];
    if (s_mkdirs (dir, err, sizeof err) != 0) {
        s_error ("%s", err);
        return EXIT_FAILED;
    }
    struct stat st;
    int found = stat (dir, &st) == 0;
    if (!found || !S_ISDIR (st.st_mode)) {
        s_error ("cannot write in '%s': %s", dir, found ? "not a directory" : strerror (errno));
        return EXIT_FAILED;
    }
    if (access (public_path, F_OK) == 0 || access (secret_path, F_OK) == 0) {
        s_error ("'%s' or its secret part exists already: remove them first, or choose "
                 "another name",
                 public_path);
        return EXIT_FAILED;
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        s_error ("cannot make a key pair: no entropy or no memory");
        return EXIT_FAILED;
    }
    zcert_set_meta (cert, "name", "%s", name);
    zcert_set_meta (cert, "created-by", "pivctl keygen");
    // The secret file is readable by its owner alone, from its first byte.
    mode_t mask = umask (077);
    int rc = zcert_save (cert, public_path);
    umask (mask);
    if (rc == 0)
        chmod (public_path, 0644);
    if (rc != 0) {
        s_error ("cannot write '%s': %s", public_path, strerror (errno));
        zcert_destroy (&cert);
        return EXIT_FAILED;
    }
    printf ("wrote %s (public key %s)\n"
            "  and %s (its secret key: it stays on the machine that uses it)\n"
            "the broker's pair: security/broker_cert = %s on the broker's machine, and a copy\n"
            "  of %s alone for every other program's security/broker_cert\n"
            "any other program's pair: security/client_cert = %s on its machine; copy\n"
            "  %s into the broker's security/clients directory to let it connect, and into\n"
            "  security/operators as well to let it change things\n",
            public_path, zcert_public_txt (cert), secret_path, public_path, public_path,
            public_path, public_path);
    zcert_destroy (&cert);
    return EXIT_OK;
}

// ---------------------------------------------------------------------------
// warnings (doc/storage.md)

// The warnings numbered as 'warnings clear N' takes them, the clocks
// measured, and what a clear did.
static void
s_print_warnings (json_t *doc, s_args_t *args)
{
    (void)args;
    int cleared = (int) json_int (doc, 0, "$.cleared");
    if (cleared > 0)
        printf ("cleared %d warning(s): hidden while they last\n", cleared);
    int n = json_length (doc, "$.warnings");
    for (int i = 0; i < n; i++) {
        const char *level = json_string (doc, "$.warnings[%d].level", i);
        const char *message = json_string (doc, "$.warnings[%d].message", i);
        printf ("%3d  %-8s  %s\n", i + 1,
                level && strcmp (level, "critical") == 0 ? "CRITICAL" : "WARNING",
                message ? message : "?");
    }
    if (n == 0)
        printf ("no warning in force\n");
    int hidden = (int) json_int (doc, 0, "$.warnings_cleared");
    if (hidden > 0)
        printf ("(%d cleared warning(s) still hold, not shown)\n", hidden);
    int m = json_length (doc, "$.clocks");
    for (int i = 0; i < m; i++) {
        const char *peer = json_string (doc, "$.clocks[%d].peer", i);
        printf ("%s %s: %s ms\n", i == 0 ? "clock skew:" : "           ", peer ? peer : "?",
                s_num (json_number (doc, NAN, "$.clocks[%d].clock_skew_ms", i), "%+.0f"));
    }
}

// warnings [list], warnings clear N|all.
static int
s_run_warnings (s_ctl_t *ctl, s_args_t *args)
{
    if (args->nwords >= 1 && strcmp (args->words[0], "clear") != 0
        && strcmp (args->words[0], "list") != 0) {
        s_error ("bad warnings command '%s'; usage: %s", args->words[0], args->command->usage);
        return EXIT_USAGE;
    }
    if (args->nwords >= 1 && strcmp (args->words[0], "clear") == 0 && args->nwords != 2) {
        s_error ("warnings clear needs N (as 'pivctl warnings' numbers them) or all; usage: %s",
                 args->command->usage);
        return EXIT_USAGE;
    }
    if (args->nwords == 0) {  // a read: any key may list, only operators clear
        args->send[args->nsend++] = (char *)"list";
        args->send[args->nsend] = NULL;
    }
    return s_run_printed (ctl, args, s_print_warnings);
}

// ---------------------------------------------------------------------------
// The commands

static const s_option_t s_none[] = {{NULL, 0, 0, 0}};
static const s_option_t s_scoped[] = {{"experiment", 'e', 1, 0}, {NULL, 0, 0, 0}};
static const s_option_t s_status_options[] = {
    {"watch", 'w', 0, 1}, {"count", 'n', 1, 1}, {"experiment", 'e', 1, 0},
    {"page", 0, 1, 0},    {"limit", 0, 1, 0},   {NULL, 0, 0, 0}};
static const s_option_t s_experiments_options[] = {
    {"experiment", 'e', 1, 0}, {"page", 0, 1, 0}, {"limit", 0, 1, 0}, {NULL, 0, 0, 0}};
static const s_option_t s_agents_options[] = {{"page", 0, 1, 0}, {"limit", 0, 1, 0}, {NULL, 0, 0, 0}};
static const s_option_t s_pairs_options[] = {
    {"state", 0, 1, 0}, {"limit", 0, 1, 0}, {"after", 0, 1, 0}, {NULL, 0, 0, 0}};
static const s_option_t s_log_options[] = {{"after", 0, 1, 0}, {"limit", 0, 1, 0}, {NULL, 0, 0, 0}};
static const s_option_t s_tail_options[] = {
    {"count", 'n', 1, 1}, {"new", 0, 0, 1}, {NULL, 0, 0, 0}};
static const s_option_t s_keygen_options[] = {{"output", 'o', 1, 1}, {NULL, 0, 0, 0}};
static const s_option_t s_export_options[] = {
    {"format", 'f', 1, 1}, {"output", 'o', 1, 1}, {NULL, 0, 0, 0}};
static const s_option_t s_provision_options[] = {
    {"size", 0, 1, 0}, {"hours", 0, 1, 0}, {"tmpfs", 0, 0, 0}, {"dir", 0, 1, 0}, {NULL, 0, 0, 0}};
static const s_option_t s_archive_options[] = {
    {"to", 0, 1, 0}, {"wait", 0, 1, 1}, {"no-wait", 0, 0, 1}, {NULL, 0, 0, 0}};
static const s_option_t s_iobench_options[] = {
    {"total", 0, 1, 1}, {"need", 0, 1, 1}, {NULL, 0, 0, 0}};
static const s_option_t s_replay_options[] = {
    {"as", 0, 1, 0},         {"speed", 0, 1, 0},  {"passes", 0, 1, 0},        {"overlap", 0, 1, 0},
    {"iterations", 0, 1, 0}, {"deform", 0, 1, 0}, {"feedback-only", 0, 0, 0}, {"wait", 0, 1, 1},
    {NULL, 0, 0, 0}};

static const s_command_t s_commands[] = {
    {"status", 0, 0, "status [--watch] [--count N] [-e EXP] [--page K] [--limit N]",
     s_status_options, s_run_status},
    {"agents", 0, 0, "agents [--page K] [--limit N]", s_agents_options, s_run_agents},
    {"experiments", 0, 0, "experiments [-e EXP] [--page K] [--limit N]", s_experiments_options,
     s_run_experiments},
    {"pairs", 1, 1, "pairs EXP [--state S] [--limit N] [--after ID]", s_pairs_options, s_run_pairs},
    {"log", 1, 1, "log EXP [--after ID] [--limit N]", s_log_options, s_run_log},
    {"rate", 1, 1, "rate N|max [-e EXP]", s_scoped, s_run_rate},
    {"policy", 1, 2, "policy all|latest|sample N [-e EXP]", s_scoped, s_run_policy},
    {"pause", 0, 0, "pause [-e EXP]", s_scoped, s_run_pause},
    {"resume", 0, 0, "resume [-e EXP]", s_scoped, s_run_pause},
    {"retry", 1, 1, "retry EXP", s_none, s_run_moved},
    {"backfill", 1, 1, "backfill EXP", s_none, s_run_moved},
    {"feedback", 1, MAX_WORDS - 1, "feedback show|on|off|set KEY=VALUE... [-e EXP]", s_scoped,
     s_run_feedback},
    {"tail", 1, 1, "tail EXP [--count N] [--new]", s_tail_options, s_run_tail},
    {"export", 1, 1, "export EXP [--format txt|tecplot] -o DIR", s_export_options, s_run_export},
    {"replay", 1, 1,
     "replay EXP [--as NAME] [--speed X|max] [--passes P] [--overlap O] [--iterations I] "
     "[--deform D] [--feedback-only] [--wait S]",
     s_replay_options, s_run_replay},
    {"keygen", 1, 1, "keygen NAME [-o DIR]", s_keygen_options, s_run_keygen},
    {"provision", 1, 1, "provision EXP --size SIZE --hours H [--tmpfs|--dir PATH]",
     s_provision_options, s_run_provision},
    {"archive", 1, 1, "archive EXP [--to DIR] [--wait S] [--no-wait]", s_archive_options,
     s_run_archive},
    {"release", 1, 1, "release EXP [--to DIR] [--wait S] [--no-wait]", s_archive_options,
     s_run_archive},
    {"iobench", 1, 1, "iobench DIR [--total SIZE] [--need RATE]", s_iobench_options,
     s_run_iobench},
    {"warnings", 0, 2, "warnings [list] | warnings clear N|all", s_none, s_run_warnings},
};

int
main (int argc, char **argv)
{
    config_rules ("piv", piv_settings_check_key);
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},  {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 'T'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0}};
    s_ctl_t ctl = {.timeout_ms = TIMEOUT_MS};
    const char *path = NULL;
    opterr = 0;
    int opt;
    // '+': the options of pivctl stop at the command; the command's own
    // follow it.
    while ((opt = getopt_long (argc, argv, "+:c:jhV", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'j':
            ctl.json = 1;
            break;
        case 'T':
            if (s_parse_timeout (&ctl, optarg) != 0)
                return EXIT_USAGE;
            break;
        case 'h':
            s_usage (stdout);
            return EXIT_OK;
        case 'V':
            printf ("pivctl %s\n", PIVFARM_VERSION);
            return EXIT_OK;
        case ':':
            s_error ("option '%s' needs a value (see pivctl --help)", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            s_error ("unknown option '%s' (see pivctl --help)", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind == argc) {
        s_error ("no command (see pivctl --help)");
        return EXIT_USAGE;
    }
    const s_command_t *command = NULL;
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        if (strcmp (s_commands[i].name, argv[optind]) == 0)
            command = &s_commands[i];
    if (!command) {
        s_error ("unknown command '%s' (see pivctl --help)", argv[optind]);
        return EXIT_USAGE;
    }
    s_args_t args;
    int rc = s_parse_args (&ctl, command, argc - optind - 1, argv + optind + 1, &args);
    if (rc != 0)
        return rc;
    // keygen needs no configuration: it makes what one will name.
    if (command->run == s_run_keygen)
        return s_run_keygen (&ctl, &args);
    // iobench measures a directory here, with or without a farm.
    if (command->run == s_run_iobench)
        return s_run_iobench (&ctl, &args);
    // Without -c: $PIVFARM_CONF, else the system's file; an error names
    // where the path came from.
    const char *from = "-c";
    if (!path) {
        const char *env = getenv ("PIVFARM_CONF");
        if (env && *env) {
            path = env;
            from = "$PIVFARM_CONF";
        }
        else {
            path = PIVCTL_CONF;
            from = "the default (no -c FILE, no $PIVFARM_CONF)";
        }
    }
    char err[1024];
    if (config_load (&ctl.cfg, path, err, sizeof err) != 0) {
        if (strcmp (from, "-c") == 0)
            s_error ("%s", err);
        else
            s_error ("%s; configuration from %s", err, from);
        return EXIT_USAGE;
    }
    // SIGINT and SIGTERM end waits cleanly (czmq's own handler is off).
    zsys_handler_set (NULL);
    struct sigaction sa = {.sa_handler = s_on_signal};
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    rc = command->run (&ctl, &args);
    zpoller_destroy (&ctl.poller);
    zsock_destroy (&ctl.sock);
    return rc;
}
