// config.h — the one configuration file of every pivfarm program, in ZPL
// (read with czmq's zconfig). conf/pivfarm.conf documents every key with
// its default. Relative paths are relative to the configuration file's
// directory. Unknown keys are refused, naming the key and the file.

#ifndef COMMON_CONFIG_H
#define COMMON_CONFIG_H

#include <limits.h>
#include <stddef.h>

#define CONFIG_STRING 256

typedef struct {
    struct {
        char ingest[CONFIG_STRING];   // tcp://127.0.0.1:5550
        char work[CONFIG_STRING];     // tcp://127.0.0.1:5551
        char control[CONFIG_STRING];  // tcp://127.0.0.1:5552
        char publish[CONFIG_STRING];  // tcp://127.0.0.1:5553
        char store[PATH_MAX];         // ./pivfarm.db
        char backup_before_migrate[8]; // on | off (on): <store>.v<A>.bak before a migration
        char durability[16];          // normal | full (full)
        int commit_ms;                // group commit interval (2)
        int heartbeat_ms;             // heartbeat interval (1000)
        int liveness;                 // missed heartbeats before an agent is dead (3)
        int max_attempts;             // attempts before a pair is failed (3)
        char store_fields[32];        // all | none | every N (all)
        int task_deadline_ms;         // a task out longer is requeued elsewhere (0: automatic,
                                      // 10x the median compute of the agent, else of the
                                      // experiment, at least deadline_floor_ms)
        int deadline_floor_ms;        // the automatic deadline's least (30000)
        int forget_agents_after;      // seconds an agent's row is kept unseen (30 d; 0: ever)
        int max_agents;               // agent records kept at once (1000)
        int stats_ms;                 // run statistics checkpoint interval (1000; 0: only at
                                      // a clean stop and on 'stats')
        int stats_uncertainty;        // 1: the statistics keep their uncertainty (n_eff ...;
                                      // 4x the state); 0: not (1)
        int stats_save_kb_s;          // KiB/s a changed set's saves may write, at most (1024;
                                      // 0: saved at every stats_ms)
        int stats_save_results;       // results a set waits with unsaved, at most (1000)
    } broker;
    struct {
        char root[PATH_MAX];          // ./data
        char mode[16];                // inotify | poll (inotify)
        int poll_ms;                  // scan interval in poll mode (1000)
        char ignore[CONFIG_STRING];   // comma-separated fnmatch patterns (.*,*.tmp,*.part,*~)
        int resend_ms;                // first resend of an unacknowledged event (500)
        int max_pending;              // events sent but unacknowledged, at most (10000)
        int settle_ms;                // a file unchanged this long is complete (500)
        char broker[CONFIG_STRING];   // ingest endpoint to connect to; when not given, broker/
                                      // ingest's value (set it when the broker binds tcp://*:...
                                      // or runs on another host)
    } watcher;
    struct {
        char rule[16];                // a name of common/pairing_rule.h (ab)
        char a_suffix[32];            // _a
        char b_suffix[32];            // _b
        int ignore_case;              // 1
        char extensions[CONFIG_STRING];  // tif,tiff
        int max_waiting;              // files waiting for their partner, per experiment (100000)
        char cameras[CONFIG_STRING];  // stereo: the two camera folders, camera 1's first (cam1,cam2)
    } pairing;
    struct {
        char broker[CONFIG_STRING];   // work endpoint to connect to; when not given, broker/work's
                                      // value (set it when the broker binds tcp://*:... or runs
                                      // on another host)
        int threads;                  // 0: one per core
        int latency;                  // 1: a pair alone runs on the idle workers' threads too
        char results[PATH_MAX];       // ./results
        char processor[PATH_MAX];     // piv | noop | exec:PROGRAM (piv)
        char path_from[PATH_MAX];     // broker's path prefix to replace ("")
        char path_to[PATH_MAX];       // ... by this one on the agent ("")
        int min_free_mb;              // free MiB needed on the results volume to write (64)
        int drain_s;                  // stopping: at most this long to finish held tasks (60)
        char result_format[8];        // txt | field: the result file's format (txt)
        int memory_mb;                // MiB the agent's workers may take for pairs, all
                                      // threads together (0: 3/4 of its cgroup's memory.max,
                                      // else of the host's MemTotal)
    } agent;
    struct {
        char passes[64];              // 64,32,16 (stored without spaces)
        int overlap;                  // 50 (0..87)
        int iterations;               // 3 (1..10): most runs of the final window size
        char deform[16];              // bspline5 | bspline | omoms | bicubic | bilinear | offset
        char smooth[16];              // final | predictor | both | off (piv/smooth.h)
        char smooth_s[32];            // 0: the smoother's s chosen by GCV (> 0: fixed)
        int max_pixels;               // largest image an agent loads, in pixels (67108864)
        int max_file_mb;              // largest frame file an agent reads, in MiB (1024)
        int max_ratio;                // decoded bytes a stored byte a compressed frame may
                                      // declare (250; piv/budget.h)
        char mask[256];               // mask image of every experiment ("": none), absolute
                                      // once loaded; PIV_MASK_PATH_MAX of piv/settings.h
        char settings[512];           // every other key of the section, the PIV core's
                                      // (eps, threshold, cbc, ...: its rules take or refuse
                                      // each), as "key=value" words in the file's order ("")
    } piv;
    struct {
        // The default calibration of every experiment (piv/calib.h), each
        // kept in the canonical form piv_calib_check_key gives; "" when not
        // given. scale and dt go together or not at all.
        char scale[64];               // "" (not calibrated) | 0.05 mm/px | 20 px/mm ...
        char dt[64];                  // "" | 1 ms | 500 us | 0.002 s ...
        char origin[80];              // "" (0,0) | X,Y in image pixels
        char y_axis[8];               // up | down (up)
    } calibration;
    struct {
        char curve[8];                // off | on (off)
        char broker_cert[PATH_MAX];   // ./certs/broker.cert: the broker's public certificate;
                                      // its secret part is the same path + "_secret"
        char client_cert[PATH_MAX];   // ./certs/client.cert: this program's certificate (its
                                      // secret part beside it, + "_secret")
        char clients[PATH_MAX];       // ./certs/clients: public certificates allowed to connect
        char operators[PATH_MAX];     // ./certs/clients/operators: ... and to change things
        char watcher_cert[PATH_MAX];  // "": the watcher's own certificate (else client_cert)
        char agent_cert[PATH_MAX];    // "": the agents' (else client_cert)
        char page_cert[PATH_MAX];     // "": the status page's (else client_cert)
        char pivctl_cert[PATH_MAX];   // "": pivctl's, after its own (else client_cert)
        // Not keys: what config_load chose for this program's role
        // (config_role), which pivctl may override (--cert ...).
        char cert[PATH_MAX];          // this program's certificate: its role's key, when given,
                                      // else client_cert
        char cert_key[64];            // what chose it, for messages ("security/page_cert")
        char role[16];                // the role config_role named ("": none)
    } security;
    struct {
        char control[CONFIG_STRING];  // control endpoint pivctl and the status page connect to;
                                      // when not given, broker/control's value
        char publish[CONFIG_STRING];  // publish endpoint pivctl tail subscribes to; when not
                                      // given, broker/publish's value
    } client;
    struct {
        char io_size[32];             // 4M: IO size of the archiver and of agents' reads
        int guard_ms;                 // free-space check interval (1000)
        char warn_free[32];           // 10%: below, a warning (a size or a percentage)
        char critical_free[32];       // 2%: below, no new work that writes there
        int headroom_s;               // ... nor while the last minute's growth would use up
                                      // the space above it within this, s (600; 0: off)
        char archive_dir[PATH_MAX];   // "": automatic archive off; else where it goes
        int archive_idle_s;           // idle time before the automatic archive (600)
        int archive_mb_s;             // archive bandwidth, MB/s (0: no limit)
        char mount_helper[PATH_MAX];  // "": the broker mounts when root; else this program
    } storage;
    struct {
        char level[16];               // error | warning | notice | info | debug (notice);
                                      // the daemons re-read it on SIGHUP (systemctl reload)
    } log;
} config_t;

// Fills every key with its default (the values in the comments above).
void config_init (config_t *cfg);

// config_init, then the keys of the ZPL file 'path'. Relative paths (also
// the defaults', and exec:PROGRAM's when PROGRAM holds a '/') become
// absolute under the file's directory. Returns 0, or -1 with err, cfg back
// at the defaults: the file cannot be read or parsed, a key is unknown or
// given twice, a line is over 1024 characters, a value is not of its kind
// ("broker/liveness = three"), out of range or not one of its choices.
// Each message names the file and the key. zconfig prints parse errors on
// stdout: config_load catches them by pointing fd 1 elsewhere for the
// moment of parsing, so call it at start-up, before threads that print.
int config_load (config_t *cfg, const char *path, char *err, size_t errlen);

// The rules of a section's keys that another library owns: the [piv]
// keys passes, overlap, iterations and deform are the PIV core's settings,
// checked by piv_settings_check_key (piv/settings.h), which common/ does not
// link. A program registers them once, before config_load or config_set:
//     config_rules ("piv", piv_settings_check_key);
//     config_rules ("calibration", piv_calib_check_key);
// rules (name, value, norm, normlen, why, whylen) returns 0 with the value
// to keep in norm, or -1 with why ("is out of range: expected ..."), which
// the message completes as "value 'V' of 'piv/NAME' in 'FILE' <why>".
// Without rules for its section, such a key is refused (a program that
// forgot to register them refuses every file that sets one, at once).
typedef int (config_rules_fn) (const char *name, const char *value, char *norm, size_t normlen,
                               char *why, size_t whylen);
void config_rules (const char *section, config_rules_fn *rules);

// Names the role of this program, whose certificate is security/<role>_cert
// when the file gives it, else security/client_cert: "watcher", "agent",
// "page" or "pivctl" (NULL: none, client_cert). Once, before config_load,
// like config_rules; config_load then fills security/cert, cert_key and
// role with the choice.
void config_role (const char *role);

// The endpoint a client connects to, by its key ("watcher/broker",
// "agent/broker", "client/control", "client/publish"): the key's value,
// which is the broker's bind key's (broker/ingest, ...) when not given.
// NULL with err when it is a bind address (a '*': tcp://*:5550), naming
// both keys and the key to set, or when 'key' is none of these.
const char *config_connect (const config_t *cfg, const char *key, char *err, size_t errlen);

// Sets one key as the file would, with the same checks: 0, or -1 with err
// naming the key, the value and 'origin' (what gave it, in place of a file
// name). For keys whose value is not a path (paths are anchored at load).
int config_set (config_t *cfg, const char *section, const char *name, const char *value,
                const char *origin, char *err, size_t errlen);

// A duration as the configuration writes them: off or 0, or a whole count
// of s, min, h or d ("30d", "12h"), at most ten years. Its seconds, or -1.
long config_parse_duration (const char *text);

#endif
