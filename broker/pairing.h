// pairing.h — which files make a pair, by the rules of
// common/pairing_rule.h ('ab' with its suffixes and case configurable).
// Pure logic, no I/O: the broker offers each new file and records the
// pairs it gets back.

#ifndef BROKER_PAIRING_H
#define BROKER_PAIRING_H

#include "common/config.h"
#include "common/pairing_rule.h"
#include "common/util.h"

#include <stddef.h>
#include <stdint.h>

typedef struct _pairing_t pairing_t;

// From the [pairing] section; NULL with err for an unknown rule.
pairing_t *pairing_new (const config_t *cfg, char *err, size_t errlen);
void pairing_destroy (pairing_t **self_p);

// The frames of a pair the rule completed: name[0] A, name[1] B (NULL for
// a multipage file, id 0); stereo: name[2], name[3] camera 2's A and B
// (NULL, 0 for every other rule), name[0], name[1] camera 1's. ids are the
// ones the files were offered with (the broker's: their rows in the store).
typedef struct {
    const char *name[4];  // relative to the experiment directory
    int64_t id[4];        // as offered
} pairing_set_t;

// A pair the rule completed: stem names it within its experiment. The
// names are valid during the call only.
typedef int (pairing_emit_fn) (void *arg, const char *experiment, const char *stem,
                               const pairing_set_t *set);

// Offers a new file of 'experiment' (its name relative to the experiment
// directory; files pair only within one directory, but under the stereo
// rule, where a set is the same stem in each of the two camera folders). Calls emit for each
// pair it completes (none while a partner is missing; two for a sliding
// frame between two present ones) and returns how many, or -1 with err when
// the name does not fit the rule (naming the file and the rule), or -2 with
// err when emit returned a negative value (the pair could not be recorded). A file
// offered again while it waits emits nothing; filtering files already
// paired is the caller's (the broker offers only files new to its store,
// and after a restart relies on the store refusing a pair twice).
int pairing_offer (pairing_t *self, const char *experiment, const char *name, int64_t id,
                   pairing_emit_fn *emit, void *arg, char *err, size_t errlen);

// The rule 'experiment' pairs by: its own (pairing_set_rule), else the
// default (pairing/rule, or what pairing_set_rule made it).
const pairing_rule_info_t *pairing_rule_of (pairing_t *self, const char *experiment);
// Sets the rule of 'experiment' ('pivctl piv EXP pairing=RULE'), or with
// experiment NULL the default of those without their own; rule -1: back
// to the default (for the default: pairing/rule). The files of the
// experiments concerned that wait for a partner are forgotten: the caller
// offers them again under the new rule (the store holds them). 0, or -1
// with err and nothing changed: a rule out of range, or one that needs
// suffixes the configuration does not give.
int pairing_set_rule (pairing_t *self, const char *experiment, int rule, char *err,
                      size_t errlen);

// Sets the stereo rule's camera folders of 'experiment' ('pivctl piv EXP
// cameras=left,right'), or with experiment NULL the default (pairing/
// cameras); list NULL: back to the default. The files of the experiments
// concerned that wait are forgotten, as pairing_set_rule's. 0, or -1 with
// err and nothing changed: not two different plain folder names.
int pairing_set_cameras (pairing_t *self, const char *experiment, const char *list, char *err,
                         size_t errlen);
// The camera folders of 'experiment' as "cam1,cam2" (valid until they change).
const char *pairing_cameras (pairing_t *self, const char *experiment);

// Files of 'experiment' still waiting for a partner.
size_t pairing_waiting (pairing_t *self, const char *experiment);

// What became of the files of an experiment that are in no pair: those
// waiting for a partner and those the rule refused, counted, the first few
// of each named with why (status, the status page: nothing vanishes).
#define PAIRING_SHOWN 5  // files named of each kind, at most
typedef struct {
    char name[UTIL_SHOWN];  // the file, relative to its experiment (shortened)
    char why[320];          // "waits for 'B006_b.tif'", "does not fit the rule 'ab': ..."
} pairing_note_t;
typedef struct {
    size_t waiting;          // files in no pair that wait for a partner
    size_t refused;          // files the rule refused since the broker started
    int nwaiting, nrefused;  // entries used below
    pairing_note_t waiting_files[PAIRING_SHOWN];  // the oldest first
    pairing_note_t refused_files[PAIRING_SHOWN];  // the first refused first
} pairing_unpaired_t;

// Fills *out for 'experiment' (zeros for one the rules never saw). The
// count of waiting files walks them (sliding: those that met a neighbour
// are in a pair and not counted); called by status, not per file.
void pairing_unpaired (pairing_t *self, const char *experiment, pairing_unpaired_t *out);

// Counts 'name' of 'experiment' as refused for 'why' (the reason, without
// the name: "is not paired: its path ... over PATH_MAX"): the broker's
// own refusals of a file before the rule sees it. pairing_offer counts the
// names it refuses itself.
void pairing_refuse (pairing_t *self, const char *experiment, const char *name, const char *why);

// What a pair is under the rule of 'experiment', with its suffixes and
// first extension: "<stem>_a.tif + <stem>_b.tif", "frames 1-2, 3-4, ...
// (run_0001.tif)".
void pairing_expects (pairing_t *self, const char *experiment, char *buf, size_t size);

// The name of the rule of 'experiment': "ab".
const char *pairing_rule_name (pairing_t *self, const char *experiment);

// Forgets everything of 'experiment' (purged): its waiting files, its
// frames, its own rule and camera folders.
void pairing_forget (pairing_t *self, const char *experiment);

#endif
