// model.c — the shared records' small helpers (model.h): tasks, the
// per-second rings, the PIV settings a task carries.

#include "broker/model.h"
#include "piv/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

task_t *
broker_task_new (int64_t pair, exp_t *exp, const char *stem, const char *name_a,
                 const char *name_b)
{
    task_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pair = pair;
    self->exp = exp;
    self->stem = strdup (stem);
    self->name_a = strdup (name_a);
    self->name_b = name_b ? strdup (name_b) : NULL;
    if (!self->stem || !self->name_a || (name_b && !self->name_b))
        broker_task_destroy (&self);
    return self;
}

int
broker_task_set_more (task_t *self, const char *name_c, const char *name_d)
{
    char *c = strdup (name_c), *d = strdup (name_d);
    if (!c || !d) {
        free (c), free (d);
        return -1;
    }
    free (self->name_c), free (self->name_d);
    self->name_c = c, self->name_d = d;
    return 0;
}

void
broker_task_destroy (task_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    task_t *self = *self_p;
    free (self->stem);
    free (self->name_a);
    free (self->name_b);
    free (self->name_c);
    free (self->name_d);
    free (self->settings);
    free (self);
    *self_p = NULL;
}

// Counts 'n' in the second of 'now', clearing the seconds skipped since
// the ring's last count.
void
broker_count (rate_ring_t *ring, int64_t now, int n)
{
    int64_t this_second = now / 1000000000;
    if (this_second != ring->second) {
        int64_t gap = this_second - ring->second;
        for (int64_t s = 1; s <= gap && s <= 60; s++)
            ring->count[(ring->second + s) % 60] = 0;
        ring->second = this_second;
    }
    ring->count[this_second % 60] += n;
}

// Counts per second over the last 'seconds' complete seconds.
double
broker_rate (rate_ring_t *ring, int64_t now, int seconds)
{
    broker_count (ring, now, 0);
    int64_t sum = 0;
    for (int s = 1; s <= seconds; s++)
        sum += ring->count[(ring->second - s + 60) % 60];
    return (double) sum / seconds;
}

void
broker_settings_format (const config_t *cfg, char *out, size_t size)
{
    // The text agents read with piv_settings_parse; config_load checked
    // each value by piv_settings_check_key. The section's other keys
    // (piv.settings) come after the named ones, the mask last.
    char text[1024], err[512];
    piv_settings_t s;
    snprintf (text, sizeof text, "passes=%s overlap=%d iterations=%d deform=%s smooth=%s smooth_s=%s%s%s",
              cfg->piv.passes, cfg->piv.overlap, cfg->piv.iterations, cfg->piv.deform,
              cfg->piv.smooth, cfg->piv.smooth_s, *cfg->piv.settings ? " " : "",
              cfg->piv.settings);
    if (piv_settings_parse (text, &s, err, sizeof err) != 0)
        piv_settings_init (&s);
    snprintf (s.mask_path, sizeof s.mask_path, "%s", cfg->piv.mask);
    piv_settings_format (&s, out, size);
}
