// replay.c — replay: started in the broker, waited for with status, then
// compared with the original (record.c) and reported.

#include "ctl/ctl.h"

#include "common/proto.h"
#include "common/util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Waits until experiment 'name' has sent its whole replay and (unless
// feedback_only) has no pair pending or dispatched; *out gets its last
// figures. EXIT_OK, or EXIT_FAILED (logged: the broker stopped answering,
// the wait ran out, Ctrl-C).
static int
s_replay_wait (ctl_t *ctl, const char *name, int feedback_only, long wait_s, ctl_exp_t *out)
{
    int tty = isatty (STDERR_FILENO);
    double start = util_now (), said = start;
    for (;;) {
        char *body;
        jdoc_t *doc;
        int rc = ctl_ask_status_of (ctl, name, &body, &doc);
        if (rc == CTL_INTERRUPTED)
            ctl_error ("interrupted: the replay '%s' goes on in the broker", name);
        if (rc != 0)
            return EXIT_FAILED;
        int k = ctl_exp_index (doc, name), found = k >= 0;
        if (found)
            ctl_exp_read (doc, k, out);
        int finished =
            found && out->replay_finished && (feedback_only || out->pending + out->dispatched == 0);
        double now = util_now ();
        if (found && (tty || now - said >= 10 || finished)) {
            fprintf (stderr, "%sreplaying as %s: %s/%s %s sent", tty ? "\r\033[K" : "", name,
                     ctl_num (out->replay_sent, "%.0f"), ctl_num (out->replay_total, "%.0f"),
                     feedback_only ? "feedback messages" : "files");
            if (!feedback_only)
                fprintf (stderr, ", %s done, %s failed, %s waiting", ctl_num (out->done, "%.0f"),
                         ctl_num (out->failed, "%.0f"),
                         ctl_num (out->pending + out->dispatched, "%.0f"));
            fprintf (stderr, "%s", tty && !finished ? "" : "\n");
            said = now;
        }
        jdoc_destroy (&doc);
        free (body);
        if (finished)
            return EXIT_OK;
        if (now - start > wait_s) {
            ctl_error ("the replay '%s' did not finish within %ld s (see pivctl status)", name,
                       wait_s);
            return EXIT_FAILED;
        }
        ctl_nap (REPLAY_POLL_MS);
        if (ctl_stop) {
            ctl_error ("interrupted: the replay '%s' goes on in the broker", name);
            return EXIT_FAILED;
        }
    }
}

int
ctl_run_replay (ctl_t *ctl, ctl_args_t *args)
{
    long wait_s;
    jdoc_t *doc;
    int rc = ctl_start_waited (ctl, args, &wait_s, &doc);
    if (rc != EXIT_OK)
        return rc;
    const char *as = jdoc_string (doc, "$.as");
    char *name = strdup (as ? as : "");
    double speed = jdoc_number (doc, NAN, "$.speed");
    int feedback_only = jdoc_bool (doc, 0, "$.feedback_only");
    jdoc_destroy (&doc);
    if (!name || !*name) {
        ctl_error ("the broker at '%s' did not name the replay", ctl->cfg.client.control);
        free (name);
        return EXIT_FAILED;
    }
    ctl_exp_t last = {0};
    rc = s_replay_wait (ctl, name, feedback_only, wait_s, &last);
    if (rc == EXIT_OK && feedback_only) {
        if (ctl->json)
            ctl_json_republished (args->words[0], name, last.replay_sent, speed);
        else
            printf ("re-published %s feedback message(s) of %s on %s%s%s (marked replay)\n",
                    ctl_num (last.replay_sent, "%.0f"), args->words[0], PROTO_TOPIC_FEEDBACK, name,
                    PROTO_TOPIC_END);
    }
    else if (rc == EXIT_OK)
        rc = ctl_compare (ctl, args->words[0], name, speed);
    free (name);
    return rc;
}

void
ctl_print_compare (const ctl_compare_t *c)
{
    printf ("replay of %s as %s at %s\n", c->of, c->as,
            isnan (c->speed) ? "full speed (max)" : ctl_num (c->speed, "%g x the original pace"));
    printf ("pairs:   %ld matched by stem; %ld only in %s, %ld only in %s\n", c->matched,
            c->only_original, c->of, c->only_replay, c->as);
    for (long i = 0; i < c->nmissing && i < 10; i++)
        printf ("         missing in %s: %s\n", c->missing[i].in_replay ? c->of : c->as,
                c->missing[i].stem);
    printf ("vectors: largest difference max(|du|, |dv|) %s over %ld pair(s) with both "
            "fields stored%s\n",
            ctl_num (c->max_difference, "%.3g px"), c->compared,
            c->grid_differs ? " (some on different grids: not compared)" : "");
    printf ("pacing:  %ld file(s); the replay took %s against %s expected (%s); largest "
            "deviation %s\n",
            c->files, ctl_num (c->actual_s, "%.3f s"), ctl_num (c->expected_s, "%.3f s"),
            ctl_num (c->error_percent, "%+.2f %%"), ctl_ms (c->max_deviation_ms));
}
