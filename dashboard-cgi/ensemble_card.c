// ensemble_card.c — an experiment's ensemble correlation for its page
// (issue 27): the state of its latest job and the field of the latest one
// done, read from the store (read-only) as pivctl export reads it; maps.c
// draws it beside the mean of the instantaneous fields, json_out.c writes
// it.

#include "dashboard-cgi/dash.h"
#include "store/store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int
dash_ensemble_gather (dash_t *dash, store_t *store)
{
    dash_page_t *page = dash->page;
    store_ensemble_t last, done;
    int found = store_ensemble_latest (store, page->exp->id, 0, &last);
    if (found <= 0)
        return found;
    dash_ensemble_t *e = calloc (1, sizeof *e);
    if (!e) {
        store_ensemble_release (&last);
        return 0;  // the page goes without it
    }
    page->ensemble = e;
    e->job = last.id;
    snprintf (e->state, sizeof e->state, "%s", last.state);
    e->pass = last.pass + 1;
    e->passes = last.passes;
    e->pairs = last.pairs;
    e->speed_min = e->speed_max = NAN;
    store_ensemble_release (&last);
    if (store_ensemble_latest (store, page->exp->id, 1, &done) != 1)
        return 0;
    e->done_job = done.id;
    e->done_pairs = done.pairs;
    e->window = done.window;
    e->overlap = done.overlap;
    char err[256];
    e->field = piv_field_decode (done.field, done.field_size, err, sizeof err);
    store_ensemble_release (&done);
    size_t n = e->field ? (size_t) e->field->nx * (size_t) e->field->ny : 0;
    if (n && (e->speed = malloc (n * sizeof *e->speed)))
        for (size_t k = 0; k < n; k++) {
            double u, v;
            piv_calib_velocity (&page->calib, e->field->u[k], e->field->v[k], &u, &v);
            float s = e->field->flags[k] == PIV_FLAG_INVALID ? NAN : (float) hypot (u, v);
            e->speed[k] = s;
            if (isfinite (s)) {
                e->speed_min = isnan (e->speed_min) ? s : fmin (e->speed_min, s);
                e->speed_max = isnan (e->speed_max) ? s : fmax (e->speed_max, s);
            }
        }
    return 0;
}

void
dash_ensemble_release (dash_page_t *page)
{
    if (!page->ensemble)
        return;
    piv_field_destroy (&page->ensemble->field);
    free (page->ensemble->speed);
    free (page->ensemble);
    page->ensemble = NULL;
}
