// stats.h — the run statistics stage (stats.c; doc/units.md): per
// experiment, running statistics (piv/stats.h) of every result the store
// recorded, in sets keyed by grid, PIV settings and calibration; saved to
// the store as checkpoints that mark the results they count, so that a
// result is counted exactly once across crashes; the calibration in force
// per experiment (its own, the global default of 'calibrate *', or the
// configuration's [calibration]) and its mask.

#ifndef BROKER_STATS_H
#define BROKER_STATS_H

#include "broker/model.h"
#include "broker/text.h"
#include "common/config.h"
#include "piv/calib.h"
#include "piv/field.h"
#include "store/store.h"

#include <czmq.h>

typedef struct _stats_t stats_t;

// What the stage is given (not owned).
typedef struct {
    store_t *store;          // checkpoints and the results to count again
    zhashx_t *experiments;   // ingest's: name -> exp_t
    const config_t *cfg;     // [calibration], the configured default
} stats_host_t;

// The stage, with the configured calibration; NULL with err (no memory, a
// [calibration] section piv_calib_parse refuses).
stats_t *stats_new (const stats_host_t *host, char *err, size_t errlen);
void stats_destroy (stats_t **self_p);

// Start-up, once the experiments are in memory: every saved set loaded
// (store_stats_of), every experiment queued for the rebuild of the results
// no checkpoint counts (stats_rebuild_step). 0, or -1 (store, bad state:
// logged).
int stats_load (stats_t *self);
// One bounded slice of the rebuild (at most a few hundred results of one
// experiment, then a checkpoint of it in the open group): 1 while more
// remains, 0 once every experiment is rebuilt, -1 on a store error.
int stats_rebuild_step (stats_t *self);
// A result was recorded that stats_add did not see: every experiment is
// rebuilt (its results not counted: few, through the store's index).
void stats_recount (stats_t *self);
// 1 while some experiment waits for its rebuild (the reactor then runs
// stats_rebuild_step).
int stats_rebuild_wanted (const stats_t *self);
// 1 while 'exp' waits for (or is in) its rebuild.
int stats_rebuilding (const stats_t *self, const exp_t *exp);

// A result's field as the statistics and the feedback take it: the blob
// (RESULT's or the store's) decoded, and *vorticity its piv_field_derive
// (malloc'd, caller frees; NULL without memory: counted without it). NULL
// with err for bytes that are not a field (*vorticity NULL).
piv_field_t *stats_field (const void *blob, size_t size, float **vorticity, char *err,
                          size_t errlen);

// A result the store recorded for 'pair' of 'exp' (once: never for a
// duplicate): 'field' decoded (NULL: it carried none, counted missing),
// 'vorticity' its piv_field_derive (may be NULL).
void stats_add (stats_t *self, exp_t *exp, int64_t pair, const piv_field_t *field,
                const float *vorticity);
// Saves the sets of 'exp' (NULL: every experiment) changed since their
// last checkpoint, and marks the results they count, in the store's open
// write group (the caller's commit makes it durable). 0 or -1.
int stats_checkpoint (stats_t *self, exp_t *exp, int64_t now);
// The timer's checkpoint (broker/stats_ms): saves, as stats_checkpoint,
// the experiments whose save is due at 'now': the bytes of their changed
// sets within broker/stats_save_kb_s since their last save, or
// broker/stats_save_results results unsaved, or at once where the store
// does not keep every field. 0 or -1.
int stats_save_due (stats_t *self, int64_t now);
// After a failed commit: what memory counted may be gone from the store;
// every set is forgotten and loaded again (stats_load).
void stats_resync (stats_t *self);

// The calibration in force for 'exp' (NULL: the global one) and where it
// comes from: "experiment", "global" (calibrate *), "config" or "none".
const piv_calib_t *stats_calib (const stats_t *self, const exp_t *exp, const char **source);
// Sets (c) or clears (NULL) the calibration of 'exp', or the global
// default when exp is NULL. It follows the measurement (doc/units.md): the
// sets of the epoch in force take it, those counted before and after alike.
void stats_set_calib (stats_t *self, exp_t *exp, const piv_calib_t *c);
// Begins a new calibration epoch of 'exp' (NULL: of every experiment) at
// ts_ns (calibrate --from now): results counted from then on go to new
// sets, and a later calibration leaves the earlier sets as they are.
void stats_set_epoch (stats_t *self, exp_t *exp, int64_t ts_ns);
// Sets (path) or clears (NULL) the mask of 'exp': the PIV settings its
// TASKs carry become its base settings plus " mask=PATH". 0 or -1 (no
// memory).
int stats_set_mask (exp_t *exp, const char *path);

// [{set, settings, calibration, units, fields, valid_fraction, convergence,
// convergence_from, first_pair, last_pair}, ...]: the sets of 'exp'.
void stats_put_sets (const stats_t *self, const exp_t *exp, text_t *t);
// ,"calibration":{"text","describe","source","calibrated"} of 'exp' (NULL:
// the global default).
void stats_put_calibration (const stats_t *self, const exp_t *exp, text_t *t);
// Results of 'exp' counted missing (no field) since start.
int64_t stats_missing (const stats_t *self, const exp_t *exp);
// The image size the grid of the latest set of 'exp' implies (its last
// window's far edge; at least the image's): 1 with it, 0 when no result
// is counted yet.
int stats_image_extent (const stats_t *self, const exp_t *exp, int *width, int *height);
// What the fields of 'exp' are, by its latest set: 1 stereo (with w), 0
// planar, -1 none counted yet.
int stats_has_w (const stats_t *self, const exp_t *exp);
// ,"calibration":{...},"stats":{...}: what status shows of 'exp' (the
// calibration's text, description and source; the latest set's summary).
void stats_put_status (const stats_t *self, const exp_t *exp, text_t *t);

// Forgets the statistics of 'exp' (purged from the store) in memory.
void stats_forget (stats_t *self, const exp_t *exp);

#endif
