// control_cmd.h — what the files of the control stage share (control.c:
// the command table, options, names and rights; control_units.c: the
// commands of calibrations, statistics and masks): the stage's struct, a
// command being answered, and the helpers of control.c. Not for use
// outside them.

#ifndef BROKER_CONTROL_CMD_H
#define BROKER_CONTROL_CMD_H

#include "broker/control.h"
#include "broker/text.h"

#include <stdint.h>

// The store's lifecycle: the backup under way and the last one's end
// (control_lifecycle.c).
typedef struct _lifecycle_t lifecycle_t;

struct _control_t {
    stages_t stages;          // what status reads
    const config_t *cfg;      // the stages, by their short names:
    store_t *store;
    ingest_t *ingest;
    dispatch_t *dispatch;
    results_t *results;
    storage_t *storage;
    zloop_t *loop;            // replays' timers
    zsock_t *publish;         // replayed feedback messages
    const char *settings;     // default PIV settings
    peers_t *peers;           // who may read, who may change
    void *arg;                // the reactor's commit, with its argument
    int (*commit) (void *arg);
    lifecycle_t *lifecycle;   // backups (control_lifecycle.c)
};

// ---------------------------------------------------------------------------
// A command: its words, its options, its answer

typedef struct {
    control_t *self;
    int argc;            // words after the options are taken out
    char **argv;
    const char *experiment;  // -e EXP
    const char *state;       // --state S
    long limit;              // --limit N
    long page;               // --page K (status, experiments, agents), 0: none
    long long after;         // --after ID
    const char *as;          // --as NAME
    const char *speed;       // --speed X|max
    const char *passes, *overlap, *iterations, *deform;
    int feedback_only;       // --feedback-only
    int reset;               // --reset (piv)
    const char *set[16];     // --set KEY=VALUE (replay), in order
    int nset;                // how many
    const char *size, *hours, *dir, *to;  // provision --size --hours --dir, archive --to
    int tmpfs;               // provision --tmpfs
    int files;               // purge --files
    const char *older_than;  // forget-agents --older-than DURATION
    unsigned given;          // options seen, a bit each (CMD_OPT_*)
    const char *peer;        // the client's CURVE public key (Z85), or NULL
    uint32_t status;         // the reply
    text_t body;
    int created;             // the command created the experiment it sets
} control_cmd_t;

enum {
    CMD_OPT_EXP = 1 << 0,
    CMD_OPT_STATE = 1 << 1,
    CMD_OPT_LIMIT = 1 << 2,
    CMD_OPT_AFTER = 1 << 3,
    CMD_OPT_AS = 1 << 4,
    CMD_OPT_SPEED = 1 << 5,
    CMD_OPT_PIV = 1 << 6,
    CMD_OPT_FEEDBACK_ONLY = 1 << 7,
    CMD_OPT_SIZE = 1 << 8,
    CMD_OPT_HOURS = 1 << 9,
    CMD_OPT_TMPFS = 1 << 10,
    CMD_OPT_DIR = 1 << 11,
    CMD_OPT_TO = 1 << 12,
    CMD_OPT_PAGE = 1 << 13,
    CMD_OPT_RESET = 1 << 14,
    CMD_OPT_SET = 1 << 15,
    CMD_OPT_FILES = 1 << 16,
    CMD_OPT_OLDER_THAN = 1 << 17,
};

// Sets the reply to an error line (status 'status'); returns -1.
int cmd_refuse (control_cmd_t *cmd, uint32_t status, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
// Refuses options the command does not take, and a word count out of
// range: 0, or -1 (refused).
int cmd_expect (control_cmd_t *cmd, unsigned options, int min_words, int max_words,
                const char *usage);
// The experiment named, or NULL with a 404 (or a 500: the store).
exp_t *cmd_find_experiment (control_cmd_t *cmd, const char *name);
// The experiment a setting is for, created when unknown (an "experiment"
// event saying the operator's command made it; cmd->created set): the
// settings of a run can be made before its first frame. NULL, refused,
// on a store error.
exp_t *cmd_setting_experiment (control_cmd_t *cmd, const char *name);
// Commits a change before it is answered: 0, or -1 (a 500).
int cmd_commit (control_cmd_t *cmd);
// {"scope":NAME|"*" (and ,"created":true when the command made it).
void cmd_put_scope (control_cmd_t *cmd, exp_t *exp);
// Refuses (400, logged) a name that is no plain experiment name; 'what'
// says how the command line names it. 0 or -1.
int cmd_refuse_name (control_cmd_t *cmd, const char *what, const char *name);

// Refuses (400, logged) a path given for the broker's host ('what' names
// it: "--to", "FILE") that is not absolute or holds a control
// character. 0 or -1.
int cmd_refuse_path (control_cmd_t *cmd, const char *what, const char *path);

// control_lifecycle.c: backup, purge, vacuum, forget-agents (doc/storage.md).
lifecycle_t *lifecycle_new (zloop_t *loop, store_t *store);
void lifecycle_destroy (lifecycle_t **self_p);
int control_backup (control_cmd_t *cmd);
int control_purge (control_cmd_t *cmd);
int control_vacuum (control_cmd_t *cmd);
int control_forget_agents (control_cmd_t *cmd);

// control_units.c: calibrate, stats, mask (doc/control.md).
int control_calibrate (control_cmd_t *cmd);
int control_stats (control_cmd_t *cmd);
int control_mask (control_cmd_t *cmd);

// control_ensemble.c: ensemble (doc/control.md).
int control_ensemble (control_cmd_t *cmd);

// control_piv.c: piv (doc/control.md).
int control_piv (control_cmd_t *cmd);
// The settings of a replay of 'of' into out: its settings as they are,
// with the command's --passes, --overlap, --iterations, --deform and
// --set KEY=VALUE; *rule the pairing rule it takes (the source's own, or
// --set pairing=RULE), -1 to follow the default. 0, or -1 (refused).
int control_replay_settings (control_cmd_t *cmd, const exp_t *of, char *out, size_t size,
                             int *rule);

#endif
