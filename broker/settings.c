// settings.c — the settings the control commands record in the store
// (rate, policy, pause, feedback, calibration, mask, piv, pairing:
// doc/control.md) applied again at start-up, to the experiments the store
// knows.

#include "broker/settings.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>

static int
s_load_one (void *arg, int64_t experiment, const char *key, const char *value)
{
    const stages_t *self = arg;
    exp_t *exp = NULL;
    zhashx_t *experiments = ingest_experiments (self->ingest);
    for (exp_t *e = zhashx_first (experiments); e; e = zhashx_next (experiments))
        if (e->id == experiment)
            exp = e;
    if (experiment != 0 && !exp)
        return 0;  // an experiment the store no longer knows
    sched_t *sched = dispatch_sched (self->dispatch);
    if (strcmp (key, "rate") == 0)
        sched_set_rate (sched, experiment, strcmp (value, "max") == 0 ? 0 : atof (value));
    else if (strcmp (key, "paused") == 0)
        sched_set_paused (sched, experiment, strcmp (value, "1") == 0);
    else if (strcmp (key, "policy") == 0) {
        char **words = NULL, err[256];
        sched_policy_t policy;
        int n = cli_split (value, &words, err, sizeof err);
        if (n > 0 && sched_policy_parse (n, words, &policy, err, sizeof err) == 0)
            sched_set_policy (sched, experiment, policy);
        free (words);
    }
    else if (strcmp (key, "feedback") == 0) {
        char **words = NULL, err[256];
        feedback_settings_t fs;
        feedback_settings_init (&fs);
        int n = cli_split (value, &words, err, sizeof err);
        if (n >= 0 && feedback_settings_apply (&fs, n, words, err, sizeof err) == 0) {
            if (exp) {
                exp->feedback.settings = fs;
                exp->feedback.own = 1;
            }
            else
                *results_feedback (self->results) = fs;
        }
        else
            log_warning ("ignoring the recorded feedback settings '%s': %s", value, err);
        free (words);
    }
    else if (strcmp (key, "calibration") == 0) {
        char err[512];
        piv_calib_t c;
        if (piv_calib_parse (value, &c, err, sizeof err) == 0)
            stats_set_calib (self->stats, exp, &c);
        else
            log_warning ("ignoring the recorded calibration '%s': %s", value, err);
    }
    else if (strcmp (key, "cameras") == 0 && exp) {
        // The rig its stereo sets carry (calibrate --cameras), as recorded.
        char *copy = strdup (value);
        if (!copy)
            return -1;
        free (exp->piv.cameras);
        exp->piv.cameras = copy;
    }
    else if (strcmp (key, "calibration_from") == 0)
        stats_set_epoch (self->stats, exp, strtoll (value, NULL, 10));
    else if (strcmp (key, "mask") == 0 && exp && stats_set_mask (exp, value) != 0)
        return -1;
    else if (strcmp (key, "piv") == 0) {
        // After "mask" ((experiment, key) order): merged with it.
        char err[512];
        if (ingest_piv_set (self->ingest, exp, value, err, sizeof err) != 0)
            log_warning ("ignoring the recorded PIV settings '%s' of %s: %s", value,
                         exp ? exp->name : "every experiment", err);
    }
    else if (strcmp (key, "ensemble") == 0 && exp) {
        char err[512];
        if (ensemble_standing_set (exp, value, NULL, 0, err, sizeof err) != 0)
            log_warning ("ignoring the recorded standing ensemble '%s' of %s: %s", value,
                         exp->name, err);
    }
    else if (strcmp (key, "pairing_cameras") == 0 && exp) {
        char err[512];
        if (ingest_cameras_set (self->ingest, exp, value, 0, err, sizeof err) != 0)
            log_warning ("ignoring the recorded camera folders '%s' of %s: %s", value, exp->name,
                         err);
    }
    else if (strcmp (key, "pairing") == 0) {
        // Before the files waiting are offered again (broker.c): no re-offer here.
        char err[512];
        const pairing_rule_info_t *rule = pairing_rule_find (value);
        if (!rule || ingest_pairing_set (self->ingest, exp, rule->rule, 0, err, sizeof err) != 0)
            log_warning ("ignoring the recorded pairing rule '%s' of %s: %s", value,
                         exp ? exp->name : "every experiment",
                         rule ? err : "not a rule of this pivfarm");
    }
    return 0;
}

static int
s_load_experiment (void *arg, const store_experiment_t *e)
{
    const stages_t *self = arg;
    return ingest_experiment (self->ingest, e->name, util_time_ns ()) ? 0 : -1;
}

int
settings_load (const stages_t *stages)
{
    if (store_experiments (stages->store, s_load_experiment, (void *) stages) < 0
        || store_settings (stages->store, s_load_one, (void *) stages) < 0)
        return -1;
    return 0;
}

