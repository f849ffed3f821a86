// ingest.h — the ingest stage (ingest.c): files to pairs. It records each
// file event (a watcher's FILE, a replayed one), tells new files from new
// versions of recorded ones, offers new ones to the pairing rules, records
// the pairs they make, and keeps the experiments in memory. The tasks of
// new pairs go to the reactor's 'fresh' list, queued once committed.

#ifndef BROKER_INGEST_H
#define BROKER_INGEST_H

#include "broker/clocks.h"
#include "broker/model.h"
#include "broker/pairing.h"
#include "common/pairing_rule.h"
#include "common/config.h"
#include "common/proto.h"
#include "store/store.h"

#include <czmq.h>

typedef struct _ingest_t ingest_t;

// What the ingest stage is given (not owned).
typedef struct {
    const config_t *cfg;   // the pairing rules; the broker's configuration
    store_t *store;        // files, pairs and experiments are recorded here
    zlistx_t *fresh;       // the reactor's: task_t of the open transaction
    const char *settings;  // the PIV settings of an experiment without its own
} ingest_host_t;

// The stage, with no experiment in memory yet. NULL with err (no memory,
// a pairing rule the configuration cannot have).
ingest_t *ingest_new (const ingest_host_t *host, char *err, size_t errlen);
void ingest_destroy (ingest_t **self_p);

// The experiments in memory: name -> exp_t, owned by the stage.
zhashx_t *ingest_experiments (ingest_t *self);
// The experiment 'name', from memory or the store (created if new); NULL on
// a store error.
exp_t *ingest_experiment (ingest_t *self, const char *name, int64_t now);
// Gives 'exp' (made by a command, without files: store_experiment_adopt)
// the source and PIV settings of a replay: they become its base, its own
// keys ('pivctl piv') and mask stay over them. 0, or -1 with err (settings
// refused, store error, files of its own, no memory: unchanged in memory).
int ingest_adopt (ingest_t *self, exp_t *exp, const char *source, const char *settings,
                  int64_t now, char *err, size_t errlen);

// A file event, from a watcher or a replay: records the file, offers it to
// the pairing rules. closed_ns is when its writer closed it (for latency).
// 0, or -1 if it could not be recorded (not to be acknowledged).
int ingest_file (ingest_t *self, exp_t *exp, const char *name, int64_t size, int64_t mtime_ns,
                 int64_t closed_ns);
// A watcher's FILE: its mtime sampled as the clock of the experiment's
// files' writer into 'clocks', then recorded as ingest_file does. 0 when it
// is to be acknowledged (after the commit), -1 if not (the watcher resends
// it).
int ingest_file_event (ingest_t *self, clocks_t *clocks, const proto_msg_t *msg);

// A store_pair_fn (arg: the ingest stage) for pairs the store brought back
// to PENDING (a retry, a backfill, a changed file): each goes to 'fresh',
// never sampled out. 0, or -1 (no memory, or no experiment).
// A task of a pair the store lists (its frames C and D read from the
// store for a stereo set); NULL on no memory or a read error.
task_t *ingest_task_of (store_t *store, exp_t *exp, int64_t pair, const char *stem,
                        const char *name_a, const char *name_b);
int ingest_queue_again (void *arg, int64_t pair, const char *experiment, const char *stem,
                        const char *name_a, const char *name_b, int attempts);
// Offers the recorded files still waiting for a partner to the pairing
// rules again (start-up; the pairs they make are in the store already:
// the caller purges 'fresh'). 0, or -1 on a store error.
int ingest_reoffer (ingest_t *self);

// The files of 'exp' in no pair (pairing_unpaired), what a pair is under
// the rule (pairing_expects, into expects) and the rule's name (static).
void ingest_unpaired (ingest_t *self, const exp_t *exp, pairing_unpaired_t *out, char *expects,
                      size_t size, const char **rule);
// After a failed commit: the experiments' ids looked up again, the pairing
// rules started again from the files the store holds. The caller purges
// 'fresh'.
void ingest_resync (ingest_t *self);

// The PIV settings of experiments ('pivctl piv', doc/control.md). Each
// experiment's text (exp->piv.settings) is its layers merged: the default
// (the configuration's [piv], then the keys of 'piv *'), or its base if it
// has one (a replay's: its source's), then its own keys, then its mask.

// The default as tasks carry it: the configuration's with the keys of
// 'piv *'.
const char *ingest_piv_default (ingest_t *self);
// The own keys of 'exp' (NULL: of 'piv *'), "key=value ...", "" for none.
const char *ingest_piv_own (ingest_t *self, const exp_t *exp);
// The settings 'exp' would have with 'own' as its own keys (NULL: a new
// experiment's), into out; changes nothing. 0, or -1 with err as
// ingest_piv_set.
int ingest_piv_merge (ingest_t *self, const exp_t *exp, const char *own, char *out, size_t size,
                      char *err, size_t errlen);
// Sets the own keys of 'exp' (NULL: the default's) to 'own' ("" or NULL:
// none) and merges the settings anew (for the default: of every
// experiment in memory that follows it). 0, or -1 with err ("bad settings:
// threshold -1 (more than 0)", an unknown key, a text over 511 bytes) and
// nothing changed. Recording them is the caller's.
int ingest_piv_set (ingest_t *self, exp_t *exp, const char *own, char *err, size_t errlen);

// The pairing rule of 'exp' (NULL: the default's).
const pairing_rule_info_t *ingest_pairing_rule (ingest_t *self, const exp_t *exp);
// Its own rule (pairing_rule_t), or -1 when it follows the default (for
// NULL: the configuration's pairing/rule).
int ingest_pairing_own (ingest_t *self, const exp_t *exp);
// Sets the rule of 'exp' (NULL: the default) to 'rule' (-1: back to the
// default, or for NULL to pairing/rule). With 'reoffer' its files not yet
// paired (waiting for a partner, or refused by the old rule) are offered
// to the new rule, their pairs going to 'fresh' as new ones do. 0, or -1
// with err (a rule that needs suffixes the configuration lacks; a store
// error).
int ingest_pairing_set (ingest_t *self, exp_t *exp, int rule, int reoffer, char *err,
                        size_t errlen);
// The stereo rule's camera folders of 'exp' (NULL: the default), "cam1,cam2"
// (list NULL: back to the default), with 'reoffer' as ingest_pairing_set's.
// 0, or -1 with err (not two different folder names).
int ingest_cameras_set (ingest_t *self, exp_t *exp, const char *list, int reoffer, char *err,
                        size_t errlen);
const char *ingest_cameras (ingest_t *self, const exp_t *exp);

// Forgets 'exp' (purged from the store): its waiting files, its pairing
// rule, and the experiment itself (freed: the caller drops every pointer
// to it first). Nothing of it may be queued, dispatched or archiving.
void ingest_forget (ingest_t *self, exp_t *exp);

#endif
