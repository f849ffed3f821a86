// steer.c — steering: rate, policy, pause, resume, retry, backfill and
// feedback, each a line sent to the broker and its answer printed.

#include "ctl/ctl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void
s_print_rate (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    printf ("rate limit of %s: %s\n", ctl_scope (doc),
            ctl_limit (jdoc_number (doc, NAN, "$.rate_limit")));
}

static void
s_print_policy (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    const char *policy = jdoc_string (doc, "$.policy");
    printf ("policy of %s: %s\n", ctl_scope (doc), policy ? policy : "-");
}

static void
s_print_paused (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    printf ("%s: %s\n", ctl_scope (doc),
            jdoc_bool (doc, 0, "$.paused") ? "paused (no new dispatch; tasks out finish)"
                                           : "running");
}

static void
s_print_moved (jdoc_t *doc, ctl_args_t *args)
{
    const char *name = jdoc_string (doc, "$.experiment");
    int retry = strcmp (args->command->name, "retry") == 0;
    printf ("%s: %s %s pair(s) back to pending\n", name ? name : "?",
            ctl_num (jdoc_number (doc, NAN, "$.moved"), "%.0f"), retry ? "failed" : "skipped");
}

static void
s_print_feedback (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    const char *f = "$.feedback";
    printf ("feedback of %s: %s\n", ctl_scope (doc),
            jdoc_bool (doc, 0, "%s.enabled", f) ? "on" : "off");
    if (jdoc_length (doc, "%s.roi", f) == 4)
        printf ("  roi        x %s .. %s, y %s .. %s px\n",
                ctl_num (jdoc_number (doc, NAN, "%s.roi[0]", f), "%g"),
                ctl_num (jdoc_number (doc, NAN, "%s.roi[2]", f), "%g"),
                ctl_num (jdoc_number (doc, NAN, "%s.roi[1]", f), "%g"),
                ctl_num (jdoc_number (doc, NAN, "%s.roi[3]", f), "%g"));
    else
        printf ("  roi        the whole field\n");
    const char *quantity = jdoc_string (doc, "%s.quantity", f);
    printf ("  quantity   %s\n", quantity ? quantity : "-");
    printf ("  setpoint   %s\n", ctl_num (jdoc_number (doc, NAN, "%s.setpoint", f), "%g"));
    printf ("  kp, ki     %s, %s\n", ctl_num (jdoc_number (doc, NAN, "%s.kp", f), "%g"),
            ctl_num (jdoc_number (doc, NAN, "%s.ki", f), "%g"));
    double lo = jdoc_number (doc, NAN, "%s.out_min", f),
           hi = jdoc_number (doc, NAN, "%s.out_max", f);
    printf ("  output     within [%s, %s]\n", isnan (lo) ? "-inf" : ctl_num (lo, "%g"),
            isnan (hi) ? "inf" : ctl_num (hi, "%g"));
    printf ("  last       output %s, integral %s\n",
            ctl_num (jdoc_number (doc, NAN, "%s.output", f), "%g"),
            ctl_num (jdoc_number (doc, NAN, "%s.integral", f), "%g"));
}

CTL_PRINTED (ctl_run_rate, s_print_rate)
CTL_PRINTED (ctl_run_policy, s_print_policy)
CTL_PRINTED (ctl_run_pause, s_print_paused)
CTL_PRINTED (ctl_run_moved, s_print_moved)
CTL_PRINTED (ctl_run_feedback, s_print_feedback)
