// feedback_quantity.h — the one list of feedback quantities (the figures
// the broker computes over a region of interest and the controller may
// follow, doc/control.md): their names, units and how pivctl tail shows
// them. The broker's feedback and result messages, pivctl and the status
// page read it; the docs that list them are checked against it
// (tests/test_feedback.c).

#ifndef COMMON_FEEDBACK_QUANTITY_H
#define COMMON_FEEDBACK_QUANTITY_H

// In the table's order, which is the order of every list of them.
typedef enum {
    FEEDBACK_MEAN_U,
    FEEDBACK_MEAN_V,
    FEEDBACK_MEAN_SPEED,
    FEEDBACK_VORTICITY,
    FEEDBACK_VALID_FRACTION,
    FEEDBACK_MEAN_W,     // a stereo field's (w): from here on, 'stereo' in the table
    FEEDBACK_MEAN_ABS_W
} feedback_quantity_t;

// Which member of a feedback message's "units" names a quantity's unit.
typedef enum {
    FEEDBACK_UNIT_NONE,      // a pure number (a fraction)
    FEEDBACK_UNIT_VELOCITY,  // units.velocity: px (per frame pair) or m/s
    FEEDBACK_UNIT_RATE       // units.rate: 1/frame or 1/s
} feedback_unit_t;

typedef struct {
    feedback_quantity_t quantity;  // its value
    const char *name;              // as quantity= takes it and the messages name it: "mean_u"
    feedback_unit_t unit;          // what its unit is
    int figure;                    // the PROTO_FIG_* of RESULT that carries the agent's
                                   // figure of it over the whole field (common/proto.h);
                                   // -1: RESULT carries none
    const char *column;            // pivctl tail's column heading
    int width;                     // and its width
    const char *format;            // printf format of its value in tail
    double scale;                  // tail shows value * scale (100: a percentage)
    int stereo;                    // 1: only a stereo field (with w) has it; messages of a
                                   // planar field leave it out, as before stereo
} feedback_quantity_info_t;

// The entry of quantity q; NULL for a value out of range.
const feedback_quantity_info_t *feedback_quantity_get (int q);

// The name of quantity i, NULL past the last: the shape util_join takes.
const char *feedback_quantity_choice (int i);

// The entry named 'name' (exact); NULL if none is.
const feedback_quantity_info_t *feedback_quantity_find (const char *name);

// The entry whose figure is RESULT's figures[figure]; NULL if none is
// (nx, ny: the grid, not a quantity).
const feedback_quantity_info_t *feedback_quantity_of_figure (int figure);

#endif
