// pivctl.c — the operator's command line (doc/pivctl.md): asks the broker
// over its control socket (doc/control.md) and prints the answer as tables
// or JSON, follows the feedback stream, exports fields from the store, and
// replays an experiment and compares the replay with the original. This
// file holds the commands' table and main; ctl.h says which file runs what.
// Exit status (doc/conventions.md): 0 done, 1 the broker did not answer or
// refused what it could do another time (403, 404, 500), or the work failed
// (store, files), 2 bad usage or configuration: found here, or by the broker
// (a 400 answer).

#include "ctl/ctl.h"

#include "common/feedback_quantity.h"
#include "common/pairing_rule.h"
#include "common/util.h"
#include "common/version.h"
#include "piv/calib.h"
#include "piv/settings.h"

#include <czmq.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PIVCTL_CONF
#define PIVCTL_CONF "/etc/pivfarm/pivfarm.conf" // without -c and $PIVFARM_CONF
#endif

volatile sig_atomic_t ctl_stop; // SIGINT or SIGTERM received

static void
s_on_signal (int signal)
{
    (void)signal;
    ctl_stop = 1;
}

// SIGINT and SIGTERM end waits and exports cleanly (czmq's own handler is
// off): they set ctl_stop.
static void
s_handle_signals (void)
{
    zsys_handler_set (NULL);
    struct sigaction sa = {.sa_handler = s_on_signal};
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
}

// The help's lines are at most this wide.
#define S_HELP_WIDTH 90

// 'words' as lines indented by 'indent' columns, at most S_HELP_WIDTH wide,
// broken at a space or after a '|' (a word longer than a line stays whole).
static void
s_wrap (FILE *out, int indent, const char *words)
{
    size_t room = S_HELP_WIDTH - (size_t) indent;
    while (*words) {
        size_t len = strlen (words), cut = len, next = len;
        if (len > room) {
            cut = next = 0;
            for (size_t i = 1; i <= room; i++)
                if (words[i - 1] == '|')
                    cut = next = i;
                else if (words[i] == ' ')
                    cut = i, next = i + 1;
            if (cut == 0)
                cut = next = len;
        }
        fprintf (out, "%*s%.*s\n", indent, "", (int) cut, words);
        words += next;
    }
}

static void
s_usage (FILE *out)
{
    // The feedback keys, the quantities from their table.
    char quantities[256], keys[512], rules[128];
    snprintf (keys, sizeof keys,
              "roi=x0,y0,x1,y1[mm]|all quantity=%s setpoint= kp= ki= out_min= out_max=",
              util_join (feedback_quantity_choice, "|", "|", quantities, sizeof quantities));
    fprintf (
        out,
        "usage: pivctl [-c FILE] [--cert FILE] [--json] [--timeout MS] COMMAND [ARGS]\n"
        "  -c, --config FILE      pivfarm configuration (client/control, publish and store;\n"
        "                         default $PIVFARM_CONF, else %s)\n"
        "      --cert FILE        your CURVE certificate (its secret part in FILE_secret);\n"
        "                         default $PIVFARM_CERT, else ~/.config/pivfarm/client.cert\n"
        "                         when it exists, else security/pivctl_cert, else client_cert\n"
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
        "  feedback set KEY=VALUE... [-e EXP]\n",
        PIVCTL_CONF, TIMEOUT_MS);
    s_wrap (out, 34, keys);
    fprintf (
        out,
        "  tail EXP [--count N] [--new]    follow the feedback stream of EXP (Ctrl-C to stop);\n"
        "                                  an unknown EXP is refused unless --new (about to start)\n"
        "  calibrate EXP [--scale S] [--dt T] [--origin X,Y] [--y-axis up|down] [--clear]\n"
        "            [--cameras CALIB]     a stereo rig (pivfarm-calib --size) for EXP's sets\n"
        "                                  EXP's calibration (0.05mm/px or 20px/mm, 2ms; applies to\n"
        "                                  results recorded after it); without options: show it;\n"
        "                                  EXP '*': the default of every experiment\n"
        "  mask EXP FILE|--clear           a mask image for EXP's pairs (masked vectors: flag 2)\n"
        "  piv EXP [KEY=VALUE...] [--reset] EXP's PIV settings and pairing rule; without KEY:\n"
        "                                  show them. Every key of the [piv] section (passes,\n"
        "                                  overlap, iterations, deform, eps, threshold, ...) and\n"
        "                                  pairing=%s;\n"
        "                                  KEY=default or --reset (all): back to the default.\n"
        "                                  They apply to the pairs dispatched after; EXP '*':\n"
        "                                  the default of all\n"
        "the record:\n"
        "  export EXP [--format txt|tecplot|vtk|hdf5|mat] -o DIR|FILE [--units px|si] [--force]\n"
        "                                  the stored vector fields of EXP as DIR/<stem>.txt\n"
        "                                  (.dat, .vtk + DIR/stats.vtk), or one HDF5 FILE, read\n"
        "                                  from the store; si (m, m/s, 1/s) when calibrated\n"
        "  export EXP --ensemble [--format txt|tecplot|vtk|hdf5|mat] -o FILE [--units px|si]\n"
        "                                  EXP's latest ensemble field with its Reynolds\n"
        "                                  stresses uu, vv, uv (m^2/s^2 when calibrated)\n"
        "  stats EXP [--format txt|tecplot|vtk|hdf5] [-o FILE] [--force]\n"
        "                                  EXP's run statistics (mean, RMS, u'v', count per\n"
        "                                  point), converted with their calibration\n"
        "  (export, stats and keygen write no file that exists already, nor through a\n"
        "   symbolic link: exit 1, nothing written; --force replaces it, a link itself)\n"
        "  replay EXP [--as NAME] [--speed X|max] [--passes P] [--overlap O] [--iterations I]\n"
        "             [--deform D] [--set KEY=VALUE]... [--feedback-only] [--wait S]\n"
        "                                  replay EXP at X times its pace, wait for it (at most\n"
        "                                  S s, default %d) and compare it with EXP; it takes\n"
        "                                  EXP's PIV settings and pairing rule, these options\n"
        "                                  (--set: any key of 'piv') change them\n"
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
        "the store (operator; doc/storage.md):\n"
        "  backup FILE [--wait S] [--no-wait]\n"
        "                                  an online copy of the store into FILE (absolute, on\n"
        "                                  the broker's host, never over a file), verified\n"
        "  backup status                   the last backup: bytes, pages, seconds, or why not\n"
        "  purge EXP [--files]             remove EXP from the store (results, events, statistics,\n"
        "                                  pairs, files); refused while it runs; --files: its\n"
        "                                  frames on disk too\n"
        "  vacuum                          give the store's free pages back to the disk; the\n"
        "                                  broker waits for it (about 1 s a 100 MB)\n"
        "  forget-agents --older-than DURATION\n"
        "                                  remove the agents not seen for DURATION (7d, 12h, 30m)\n"
        "                                  from the store; a connected agent never\n"
        "security (doc/security.md):\n"
        "  keygen NAME [-o DIR] [--force] [--role ROLE]\n"
        "                                  a CURVE key pair: DIR/NAME.cert (public) and\n"
        "                                  DIR/NAME.cert_secret (default DIR: ., made if\n"
        "                                  missing); no -c needed. It prints where the pair\n"
        "                                  goes for ROLE: broker, watcher, agent, page,\n"
        "                                  operator or reader (default: NAME when it is one)\n"
        "\n"
        "exit status: 0 done; 1 the broker did not answer or refused (no such experiment,\n"
        "not an operator, its store failed), or the work failed; 2 bad usage or\n"
        "configuration, found by pivctl or by the broker (doc/conventions.md)\n",
        util_join (pairing_rule_choice, "|", "|", rules, sizeof rules), REPLAY_WAIT_S);
}

// ---------------------------------------------------------------------------
// The commands

static const ctl_option_t s_none[] = {{NULL, 0, 0, 0}};
static const ctl_option_t s_scoped[] = {{"experiment", 'e', 1, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_status_options[] = {{"watch", 'w', 0, 1},      {"count", 'n', 1, 1},
                                                {"experiment", 'e', 1, 0}, {"page", 0, 1, 0},
                                                {"limit", 0, 1, 0},        {NULL, 0, 0, 0}};
static const ctl_option_t s_experiments_options[] = {
    {"experiment", 'e', 1, 0}, {"page", 0, 1, 0}, {"limit", 0, 1, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_agents_options[] = {
    {"page", 0, 1, 0}, {"limit", 0, 1, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_pairs_options[] = {
    {"state", 0, 1, 0}, {"limit", 0, 1, 0}, {"after", 0, 1, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_log_options[] = {
    {"after", 0, 1, 0}, {"limit", 0, 1, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_tail_options[] = {
    {"count", 'n', 1, 1}, {"new", 0, 0, 1}, {NULL, 0, 0, 0}};
static const ctl_option_t s_keygen_options[] = {
    {"output", 'o', 1, 1}, {"force", 0, 0, 1}, {"role", 0, 1, 1}, {NULL, 0, 0, 0}};
static const ctl_option_t s_export_options[] = {{"format", 'f', 1, 1},
                                                {"output", 'o', 1, 1},
                                                {"units", 0, 1, 1},
                                                {"force", 0, 0, 1},
                                                {"ensemble", 0, 0, 1},
                                                {NULL, 0, 0, 0}};
static const ctl_option_t s_stats_options[] = {
    {"format", 'f', 1, 1}, {"output", 'o', 1, 1}, {"force", 0, 0, 1}, {NULL, 0, 0, 0}};
static const ctl_option_t s_calibrate_options[] = {
    {"scale", 0, 1, 1},  {"dt", 0, 1, 1},    {"origin", 0, 1, 1},
    {"y-axis", 0, 1, 1}, {"clear", 0, 0, 1}, {"from", 0, 1, 1}, {"cameras", 0, 1, 1},
    {NULL, 0, 0, 0}};
static const ctl_option_t s_mask_options[] = {{"clear", 0, 0, 1}, {NULL, 0, 0, 0}};
static const ctl_option_t s_piv_options[] = {{"reset", 0, 0, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_ensemble_options[] = {
    {"window", 0, 1, 1}, {"overlap", 0, 1, 1}, {"pairs", 0, 1, 1},   {"status", 0, 0, 1},
    {"auto", 0, 0, 1},   {"idle", 0, 1, 1},    {"no-auto", 0, 0, 1}, {NULL, 0, 0, 0}};
static const ctl_option_t s_provision_options[] = {
    {"size", 0, 1, 0}, {"hours", 0, 1, 0}, {"tmpfs", 0, 0, 0}, {"dir", 0, 1, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_archive_options[] = {
    {"to", 0, 1, 0}, {"wait", 0, 1, 1}, {"no-wait", 0, 0, 1}, {NULL, 0, 0, 0}};
static const ctl_option_t s_backup_options[] = {
    {"wait", 0, 1, 1}, {"no-wait", 0, 0, 1}, {NULL, 0, 0, 0}};
static const ctl_option_t s_purge_options[] = {{"files", 0, 0, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_forget_options[] = {{"older-than", 0, 1, 0}, {NULL, 0, 0, 0}};
static const ctl_option_t s_iobench_options[] = {
    {"total", 0, 1, 1}, {"need", 0, 1, 1}, {NULL, 0, 0, 0}};
static const ctl_option_t s_replay_options[] = {
    {"as", 0, 1, 0},         {"speed", 0, 1, 0},  {"passes", 0, 1, 0},        {"overlap", 0, 1, 0},
    {"iterations", 0, 1, 0}, {"deform", 0, 1, 0}, {"feedback-only", 0, 0, 0}, {"wait", 0, 1, 1},
    {"set", 0, 1, 0},        {NULL, 0, 0, 0}};

static const ctl_command_t s_commands[] = {
    {"status", 0, 0, "status [--watch] [--count N] [-e EXP] [--page K] [--limit N]",
     s_status_options, ctl_run_status},
    {"agents", 0, 0, "agents [--page K] [--limit N]", s_agents_options, ctl_run_agents},
    {"experiments", 0, 0, "experiments [-e EXP] [--page K] [--limit N]", s_experiments_options,
     ctl_run_experiments},
    {"pairs", 1, 1, "pairs EXP [--state S] [--limit N] [--after ID]", s_pairs_options,
     ctl_run_pairs},
    {"log", 1, 1, "log EXP [--after ID] [--limit N]", s_log_options, ctl_run_log},
    {"rate", 1, 1, "rate N|max [-e EXP]", s_scoped, ctl_run_rate},
    {"policy", 1, 2, "policy all|latest|sample N [-e EXP]", s_scoped, ctl_run_policy},
    {"pause", 0, 0, "pause [-e EXP]", s_scoped, ctl_run_pause},
    {"resume", 0, 0, "resume [-e EXP]", s_scoped, ctl_run_pause},
    {"retry", 1, 1, "retry EXP", s_none, ctl_run_moved},
    {"backfill", 1, 1, "backfill EXP", s_none, ctl_run_moved},
    {"feedback", 1, MAX_WORDS - 1, "feedback show|on|off|set KEY=VALUE... [-e EXP]", s_scoped,
     ctl_run_feedback},
    {"tail", 1, 1, "tail EXP [--count N] [--new]", s_tail_options, ctl_run_tail},
    {"calibrate", 1, 1,
     "calibrate EXP|'*' [--scale S] [--dt T] [--origin X,Y] [--y-axis up|down] [--clear] "
     "[--cameras CALIB] [--from now]",
     s_calibrate_options, ctl_run_calibrate},
    {"mask", 1, 2, "mask EXP FILE|--clear", s_mask_options, ctl_run_mask},
    {"piv", 1, MAX_WORDS - 2, "piv EXP|'*' [KEY=VALUE...] [KEY=default...] [--reset]",
     s_piv_options, ctl_run_piv},
    {"ensemble", 1, 1,
     "ensemble EXP [--window PX] [--overlap PERCENT] [--pairs A-B] | ensemble EXP --status | "
     "ensemble EXP --auto [--window PX] [--overlap PERCENT] [--idle S] | ensemble EXP --no-auto",
     s_ensemble_options, ctl_run_ensemble},
    {"export", 1, 1,
     "export EXP [--format txt|tecplot|vtk|hdf5|mat] -o DIR|FILE [--units px|si] [--force] | "
     "export EXP --ensemble [--format txt|tecplot|vtk|hdf5|mat] -o FILE [--units px|si] "
     "[--force]",
     s_export_options, ctl_run_export},
    {"stats", 1, 1, "stats EXP [--format txt|tecplot|vtk|hdf5] [-o FILE] [--force] [--json]",
     s_stats_options, ctl_run_stats},
    {"replay", 1, 1,
     "replay EXP [--as NAME] [--speed X|max] [--passes P] [--overlap O] [--iterations I] "
     "[--deform D] [--set KEY=VALUE]... [--feedback-only] [--wait S]",
     s_replay_options, ctl_run_replay},
    {"keygen", 1, 1, "keygen NAME [-o DIR] [--force] [--role ROLE]", s_keygen_options,
     ctl_run_keygen},
    {"provision", 1, 1, "provision EXP --size SIZE --hours H [--tmpfs|--dir PATH]",
     s_provision_options, ctl_run_provision},
    {"archive", 1, 1, "archive EXP [--to DIR] [--wait S] [--no-wait]", s_archive_options,
     ctl_run_archive},
    {"release", 1, 1, "release EXP [--to DIR] [--wait S] [--no-wait]", s_archive_options,
     ctl_run_archive},
    {"iobench", 1, 1, "iobench DIR [--total SIZE] [--need RATE]", s_iobench_options,
     ctl_run_iobench},
    {"warnings", 0, 2, "warnings [list] | warnings clear N|all", s_none, ctl_run_warnings},
    {"backup", 1, 1, "backup FILE [--wait S] [--no-wait] | backup status", s_backup_options,
     ctl_run_backup},
    {"purge", 1, 1, "purge EXP [--files]", s_purge_options, ctl_run_purge},
    {"vacuum", 0, 0, "vacuum", s_none, ctl_run_vacuum},
    {"forget-agents", 0, 0, "forget-agents --older-than DURATION", s_forget_options,
     ctl_run_forget_agents},
};

// Loads the configuration at 'path' (-c), else $PIVFARM_CONF, else the
// system's file. 0, or -1 (logged, naming where the path came from).
static int
s_load_config (config_t *cfg, const char *path)
{
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
    if (config_load (cfg, path, err, sizeof err) != 0) {
        if (strcmp (from, "-c") == 0)
            ctl_error ("%s", err);
        else
            ctl_error ("%s; configuration from %s", err, from);
        return -1;
    }
    return 0;
}

// This operator's certificate, before the configuration's keys: --cert
// FILE, else $PIVFARM_CERT, else $XDG_CONFIG_HOME/pivfarm/client.cert
// (~/.config/...) when it exists. One configuration serves every operator
// of a host, each with their own key (doc/security.md).
static void
s_choose_cert (config_t *cfg, const char *option)
{
    char path[PATH_MAX] = "";
    const char *from = NULL, *env = getenv ("PIVFARM_CERT");
    const char *xdg = getenv ("XDG_CONFIG_HOME"), *home = getenv ("HOME");
    if (option)
        snprintf (path, sizeof path, "%s", option), from = "--cert";
    else if (env && *env)
        snprintf (path, sizeof path, "%s", env), from = "$PIVFARM_CERT";
    else {
        if (xdg && *xdg)
            snprintf (path, sizeof path, "%s/pivfarm/client.cert", xdg);
        else if (home && *home)
            snprintf (path, sizeof path, "%s/.config/pivfarm/client.cert", home);
        if (*path && access (path, F_OK) == 0)
            from = xdg && *xdg ? "$XDG_CONFIG_HOME/pivfarm/client.cert"
                               : "~/.config/pivfarm/client.cert";
    }
    if (!from)
        return;
    snprintf (cfg->security.cert, sizeof cfg->security.cert, "%s", path);
    snprintf (cfg->security.cert_key, sizeof cfg->security.cert_key, "%s", from);
}

int
main (int argc, char **argv)
{
    config_rules ("piv", piv_settings_check_key);
    config_rules ("calibration", piv_calib_check_key);
    config_role ("pivctl");
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},  {"json", no_argument, NULL, 'j'},
        {"cert", required_argument, NULL, 'C'},
        {"timeout", required_argument, NULL, 'T'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0}};
    ctl_t ctl = {.timeout_ms = TIMEOUT_MS};
    const char *path = NULL, *cert = NULL;
    opterr = 0;
    int opt;
    // '+': the options of pivctl stop at the command; the command's own
    // follow it.
    while ((opt = getopt_long (argc, argv, "+:c:jhV", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'C':
            cert = optarg;
            break;
        case 'j':
            ctl.json = 1;
            break;
        case 'T':
            if (ctl_parse_timeout (&ctl, optarg) != 0)
                return EXIT_USAGE;
            break;
        case 'h':
            s_usage (stdout);
            return EXIT_OK;
        case 'V':
            printf ("pivctl %s\n", PIVFARM_VERSION);
            return EXIT_OK;
        case ':':
            ctl_error ("option '%s' needs a value (see pivctl --help)", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            ctl_error ("unknown option '%s' (see pivctl --help)", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind == argc) {
        ctl_error ("no command (see pivctl --help)");
        return EXIT_USAGE;
    }
    const ctl_command_t *command = NULL;
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        if (strcmp (s_commands[i].name, argv[optind]) == 0)
            command = &s_commands[i];
    if (!command) {
        ctl_error ("unknown command '%s' (see pivctl --help)", argv[optind]);
        return EXIT_USAGE;
    }
    ctl_args_t args;
    int rc = ctl_parse_args (&ctl, command, argc - optind - 1, argv + optind + 1, &args);
    if (rc != 0)
        return rc;
    // keygen needs no configuration: it makes what one will name.
    if (command->run == ctl_run_keygen) {
        s_handle_signals (); // a secret key's temporary is never left by Ctrl-C
        return ctl_run_keygen (&ctl, &args);
    }
    // iobench measures a directory here, with or without a farm.
    if (command->run == ctl_run_iobench)
        return ctl_run_iobench (&ctl, &args);
    if (s_load_config (&ctl.cfg, path) != 0)
        return EXIT_USAGE;
    s_choose_cert (&ctl.cfg, cert);
    s_handle_signals ();
    rc = command->run (&ctl, &args);
    ask_destroy (&ctl.ask);
    return rc;
}
