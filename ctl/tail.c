// tail.c — tail: the feedback stream of one experiment, followed on the
// broker's publish socket.

#include "ctl/ctl.h"

#include "common/cli.h"
#include "common/feedback_quantity.h"
#include "common/proto.h"
#include "common/secure.h"

#include <czmq.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One line per message: a column per feedback quantity, as their table
// (common/feedback_quantity.h) heads and formats it; the stereo ones (w)
// when the first message, which heads the columns, has them (*stereo).
static void
s_print_feedback_message (jdoc_t *doc, int header, int *stereo)
{
    const feedback_quantity_info_t *q;
    const char *quantity = jdoc_string (doc, "$.quantity");
    if (header) {
        *stereo = jdoc_type_at (doc, "$.mean_w") != JDOC_MISSING;
        printf ("%-12s %8s  %-20s %9s %6s", "PUBLISHED", "PAIR", "STEM", "LATENCY", "N");
        for (int i = 0; (q = feedback_quantity_get (i)); i++)
            if (!q->stereo || *stereo)
                printf (" %*s", q->width, q->column);
        printf ("  %-18s %s\n", "VALUE", "OUTPUT");
    }
    const char *stem = jdoc_string (doc, "$.stem");
    char value[64];
    snprintf (value, sizeof value, "%s=%s", quantity ? quantity : "?",
              ctl_num (jdoc_number (doc, NAN, "$.value"), "%.4g"));
    printf ("%-12s %8s  %-20s %9s %6s", ctl_clock (jdoc_int (doc, 0, "$.published_ns")),
            ctl_num (jdoc_number (doc, NAN, "$.pair"), "%.0f"), stem ? stem : "?",
            ctl_ms (jdoc_number (doc, NAN, "$.latency_ms")),
            ctl_num (jdoc_number (doc, NAN, "$.n"), "%.0f"));
    for (int i = 0; (q = feedback_quantity_get (i)); i++)
        if (!q->stereo || *stereo)
            printf (" %*s", q->width,
                    ctl_num (jdoc_number (doc, NAN, "$.%s", q->name) * q->scale, q->format));
    printf ("  %-18s %s\n", value, ctl_num (jdoc_number (doc, NAN, "$.output"), "%.6g"));
}

int
ctl_run_tail (ctl_t *ctl, ctl_args_t *args)
{
    long count = LONG_MAX;
    const char *text = ctl_value (args, "count");
    if (text && ctl_parse_count ("--count", text, LONG_MAX, &count) != 0)
        return EXIT_USAGE;
    if (ctl_check_name ("tail", args->words[0]) != 0)
        return EXIT_USAGE;
    // An experiment the broker does not know would be waited for in
    // silence: ask first ("no experiment 'x'", exit 1), unless --new says
    // it is one about to start.
    if (!ctl_value (args, "new")) {
        char *words[] = {"experiments", "-e", args->words[0]};
        char *line = cli_join (3, words), *body = NULL;
        int rc = line ? ctl_ask (ctl, line, &body) : EXIT_FAILED;
        free (line);
        free (body);
        if (rc != 0)
            return EXIT_FAILED;
    }
    char err[1024];
    const char *endpoint = config_connect (&ctl->cfg, "client/publish", err, sizeof err);
    if (!endpoint) {
        ctl_error ("%s", err);
        return EXIT_USAGE;
    }
    char topic[PROTO_MAX_STRING];
    // "feedback.run7/": no other experiment's topic starts with it (names
    // hold no '/'), so ZeroMQ's prefix match delivers run7's alone.
    snprintf (topic, sizeof topic, "%s%s%s", PROTO_TOPIC_FEEDBACK, args->words[0], PROTO_TOPIC_END);
    int bad_cert;
    zsock_t *sub = secure_connect (ZMQ_SUB, &ctl->cfg, endpoint, "the broker's feedback stream", 0,
                                   err, sizeof err, &bad_cert);
    if (!sub) {
        ctl_error ("%s", err);
        return bad_cert ? EXIT_USAGE : EXIT_FAILED;
    }
    zsock_set_subscribe (sub, topic);
    zpoller_t *poller = zpoller_new (sub, NULL);
    long seen = 0;
    int stereo = 0; // the stream has w columns (its first message says)
    while (seen < count && !ctl_stop) {
        if (!zpoller_wait (poller, 100))
            continue;
        zmsg_t *msg = zmsg_recv (sub);
        char *got = msg ? zmsg_popstr (msg) : NULL;
        char *json = msg ? zmsg_popstr (msg) : NULL;
        if (got && json && strcmp (got, topic) == 0) {
            if (ctl->json)
                printf ("%s\n", json);
            else {
                char err[256];
                jdoc_t *doc = jdoc_parse (json, err, sizeof err);
                if (doc)
                    s_print_feedback_message (doc, seen == 0, &stereo);
                else
                    ctl_error ("a message on '%s' is not JSON: %s", topic, err);
                jdoc_destroy (&doc);
            }
            fflush (stdout);
            seen++;
        }
        free (got);
        free (json);
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    zsock_destroy (&sub);
    return EXIT_OK;
}
