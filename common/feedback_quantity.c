// feedback_quantity.c — the table of feedback quantities; see
// feedback_quantity.h.

#include "common/feedback_quantity.h"
#include "common/proto.h"
#include "common/util.h"

static const feedback_quantity_info_t s_quantities[] = {
    [FEEDBACK_MEAN_U] = {FEEDBACK_MEAN_U, "mean_u", FEEDBACK_UNIT_VELOCITY, PROTO_FIG_MEAN_U,
                         "MEAN_U", 9, "%.4f", 1},
    [FEEDBACK_MEAN_V] = {FEEDBACK_MEAN_V, "mean_v", FEEDBACK_UNIT_VELOCITY, PROTO_FIG_MEAN_V,
                         "MEAN_V", 9, "%.4f", 1},
    [FEEDBACK_MEAN_SPEED] = {FEEDBACK_MEAN_SPEED, "mean_speed", FEEDBACK_UNIT_VELOCITY,
                             PROTO_FIG_MEAN_SPEED, "SPEED", 9, "%.4f", 1},
    [FEEDBACK_VORTICITY] = {FEEDBACK_VORTICITY, "vorticity", FEEDBACK_UNIT_RATE,
                            PROTO_FIG_VORTICITY, "VORTICITY", 10, "%.3g", 1},
    [FEEDBACK_VALID_FRACTION] = {FEEDBACK_VALID_FRACTION, "valid_fraction", FEEDBACK_UNIT_NONE,
                                 PROTO_FIG_VALID_FRACTION, "VALID", 6, "%.1f%%", 100},
    // The out-of-plane velocity w (along +z) of a stereo field: RESULT
    // carries no figure of it, the broker computes it from the field.
    [FEEDBACK_MEAN_W] = {FEEDBACK_MEAN_W, "mean_w", FEEDBACK_UNIT_VELOCITY, -1, "MEAN_W", 9,
                         "%.4f", 1, 1},
    [FEEDBACK_MEAN_ABS_W] = {FEEDBACK_MEAN_ABS_W, "mean_abs_w", FEEDBACK_UNIT_VELOCITY, -1,
                             "MEAN_ABS_W", 10, "%.4f", 1, 1},
};
#define NQUANTITIES ((int) (sizeof s_quantities / sizeof s_quantities[0]))
_Static_assert (NQUANTITIES == FEEDBACK_MEAN_ABS_W + 1, "one entry per feedback_quantity_t");

const feedback_quantity_info_t *
feedback_quantity_get (int q)
{
    return q >= 0 && q < NQUANTITIES ? &s_quantities[q] : NULL;
}

const char *
feedback_quantity_choice (int i)
{
    return i >= 0 && i < NQUANTITIES ? s_quantities[i].name : NULL;
}

const feedback_quantity_info_t *
feedback_quantity_find (const char *name)
{
    return feedback_quantity_get (util_choice_index (feedback_quantity_choice, name));
}

const feedback_quantity_info_t *
feedback_quantity_of_figure (int figure)
{
    for (int i = 0; i < NQUANTITIES; i++)
        if (s_quantities[i].figure == figure)
            return &s_quantities[i];
    return NULL;
}
