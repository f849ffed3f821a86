// request.c — pivctl's questions to the broker's control socket (through
// common/ask.h): a line sent, its reply turned into an exit status or a
// table, and the waits of the commands that start something.

#include "ctl/ctl.h"

#include "common/cli.h"
#include "common/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int
ctl_ask (ctl_t *ctl, const char *line, char **body_p)
{
    char err[PROTO_MAX_STRING + 1024];
    *body_p = NULL;
    if (!ctl->ask) {
        int bad_cert;
        ctl->ask = ask_new (&ctl->cfg, err, sizeof err, &bad_cert);
        if (!ctl->ask) {
            ctl_error ("%s", err);
            return bad_cert ? EXIT_USAGE : EXIT_FAILED;
        }
    }
    int status;
    ask_result_t rc =
        ask_request (ctl->ask, line, ctl->timeout_ms, &ctl_stop, &status, body_p, err, sizeof err);
    if (rc == ASK_INTERRUPTED)
        return CTL_INTERRUPTED;
    if (rc != ASK_OK) {
        ctl_error ("%s", err);
        // 400: bad usage, as if found here ('rate fast' as 'rate --bogus').
        return rc == ASK_REFUSED && status == 400 ? EXIT_USAGE : EXIT_FAILED;
    }
    return 0;
}

int
ctl_ask_json (ctl_t *ctl, const char *line, char **body_p, jdoc_t **doc_p)
{
    int rc = ctl_ask (ctl, line, body_p);
    *doc_p = NULL;
    if (rc != 0)
        return rc;
    char err[256];
    *doc_p = jdoc_parse (*body_p, err, sizeof err);
    if (!*doc_p) {
        ctl_error ("the broker at '%s' answered '%s' with %s", ctl->cfg.client.control, line, err);
        free (*body_p);
        *body_p = NULL;
        return EXIT_FAILED;
    }
    return 0;
}

void
ctl_nap (int ms)
{
    for (int slept = 0; slept < ms && !ctl_stop; slept += 50) {
        struct timespec t = {0, 50 * 1000000L};
        nanosleep (&t, NULL);
    }
}

int
ctl_run_printed (ctl_t *ctl, ctl_args_t *args, ctl_print_fn *print)
{
    char *line = cli_join (args->nsend, args->send);
    if (!line) {
        ctl_error ("no memory");
        return EXIT_FAILED;
    }
    char *body;
    jdoc_t *doc = NULL;
    int rc = ctl->json ? ctl_ask (ctl, line, &body) : ctl_ask_json (ctl, line, &body, &doc);
    free (line);
    if (rc != 0)
        return rc == CTL_INTERRUPTED ? EXIT_FAILED : rc;
    if (ctl->json)
        printf ("%s\n", body);
    else
        print (doc, args);
    jdoc_destroy (&doc);
    free (body);
    return EXIT_OK;
}

int
ctl_ask_status_of (ctl_t *ctl, const char *name, char **body_p, jdoc_t **doc_p)
{
    char *words[] = {"status", "-e", (char *)name};
    char *line = cli_join (3, words);
    int rc = EXIT_FAILED;
    *body_p = NULL;
    *doc_p = NULL;
    if (line)
        rc = ctl_ask_json (ctl, line, body_p, doc_p);  // a line too long: ask_request says so
    else
        ctl_error ("no memory to ask for '%s'", name);
    free (line);
    return rc;
}

int
ctl_start_waited (ctl_t *ctl, ctl_args_t *args, long *wait_s, jdoc_t **doc_p)
{
    jdoc_t *doc = NULL;
    char *body = NULL;
    *wait_s = REPLAY_WAIT_S;
    const char *text = ctl_value (args, "wait");
    if (text && ctl_parse_count ("--wait", text, 31 * 86400, wait_s) != 0)
        return EXIT_USAGE;
    char *line = cli_join (args->nsend, args->send);
    if (!line) {
        ctl_error ("no memory");
        return EXIT_FAILED;
    }
    int rc = ctl_ask_json (ctl, line, &body, &doc);
    free (line);
    free (body);
    if (doc_p)
        *doc_p = doc;
    else
        jdoc_destroy (&doc);
    return rc == 0 ? EXIT_OK : rc == EXIT_USAGE ? EXIT_USAGE : EXIT_FAILED;
}
