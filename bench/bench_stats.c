// bench_stats.c — what the uncertainty of the run statistics costs (issue
// 27): the saved state's size and the time to count one field and to encode
// the state, with the uncertainty kept and without it, on the grids of a
// 1024^2 and a 2048^2 image at step 8. Prints figures; never fails on time.

#include "piv/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define FIELDS 40 // counted per figure
#define REPS 5    // figures per case: best and median shown

static double
s_now (void)
{
    struct timespec t;
    clock_gettime (CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// A field of n x n points at step 8, every vector valid, varying with 'i'.
static void
s_fill (piv_field_t *f, float *w, int n, int i)
{
    for (int k = 0; k < n * n; k++) {
        f->x[k] = (float) (8 + 8 * (k % n));
        f->y[k] = (float) (8 + 8 * (k / n));
        f->u[k] = (float) (3 + 0.1 * sin (k + 0.7 * i));
        f->v[k] = (float) (-1 + 0.1 * cos (k + 0.3 * i));
        f->flags[k] = PIV_FLAG_VALID;
        f->peak_ratio[k] = 2;
        w[k] = (float) (0.01 * sin (0.1 * k + i));
    }
}

// One grid: both cases, a line each.
static int
s_grid (int n)
{
    piv_field_t *f = piv_field_new (n, n);
    float *w = malloc ((size_t) n * n * sizeof *w);
    if (!f || !w) {
        free (w);
        piv_field_destroy (&f);
        return -1;
    }
    f->step = 8;
    f->window = 16;
    s_fill (f, w, n, 0);
    double add_ms[2][REPS], encode_ms[2][REPS];
    size_t size[2] = {0, 0};
    for (int on = 0; on < 2; on++) {
        piv_stats_t *st = piv_stats_new (f);
        if (!st || piv_stats_set_uncertainty (st, on) != 0) {
            piv_stats_destroy (&st);
            free (w);
            piv_field_destroy (&f);
            return -1;
        }
        for (int r = 0; r < REPS; r++) {
            double t = s_now ();
            for (int i = 0; i < FIELDS; i++) {
                f->u[i % (n * n)] += 0.001f; // not the same field twice
                piv_stats_add (st, f, w);
            }
            add_ms[on][r] = (s_now () - t) * 1e3 / FIELDS;
            unsigned char *buf = NULL;
            t = s_now ();
            if (piv_stats_encode (st, &buf, &size[on]) != 0)
                size[on] = 0;
            encode_ms[on][r] = (s_now () - t) * 1e3;
            free (buf);
        }
        qsort (add_ms[on], REPS, sizeof (double), s_cmp);
        qsort (encode_ms[on], REPS, sizeof (double), s_cmp);
        piv_stats_destroy (&st);
    }
    for (int on = 0; on < 2; on++)
        printf ("%4dx%-4d %-22s state %7.2f MB  count a field %6.3f ms (median %6.3f)  "
                "encode %7.2f ms (median %7.2f)\n",
                n, n, on ? "with the uncertainty" : "without (version 2)", size[on] / 1e6,
                add_ms[on][0], add_ms[on][REPS / 2], encode_ms[on][0], encode_ms[on][REPS / 2]);
    printf ("%4dx%-4d ratio with / without: state x%.2f, count x%.2f (best times)\n", n, n,
            (double) size[1] / (double) size[0], add_ms[1][0] / add_ms[0][0]);
    free (w);
    piv_field_destroy (&f);
    return 0;
}

int
main (void)
{
    printf ("\nthe run statistics' uncertainty: state and time (issue 27; %d fields a figure, "
            "best of %d)\n",
            FIELDS, REPS);
    printf ("grid points (image at step 8: 128^2 = 1024^2 px, 256^2 = 2048^2 px)\n");
    if (s_grid (128) != 0 || s_grid (256) != 0) {
        fprintf (stderr, "bench_stats: out of memory\n");
        return 1;
    }
    return 0;
}
