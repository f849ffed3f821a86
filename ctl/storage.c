// storage.c — storage (doc/storage.md): provision, archive, release,
// iobench and warnings; the store's backup.

#include "ctl/ctl.h"

#include "common/cli.h"
#include "common/util.h"

#include <czmq.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void
s_print_provision (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    char size[32];
    int64_t expires = jdoc_int (doc, 0, "$.allocation.expires_ns");
    printf ("provisioned %s: %s of %s at %s, expires %s %.8s\n", jdoc_string (doc, "$.experiment"),
            jdoc_string (doc, "$.allocation.kind"),
            util_format_size (jdoc_int (doc, 0, "$.allocation.size_bytes"), size, sizeof size),
            jdoc_string (doc, "$.allocation.path"), ctl_date (expires), ctl_clock (expires));
}
CTL_PRINTED (ctl_run_provision, s_print_provision)

// Waits until the archive of 'name' has ended (and, for a release, its
// allocation is gone); prints how it ended. EXIT_OK or EXIT_FAILED.
static int
s_archive_wait (ctl_t *ctl, const char *name, int release, long wait_s)
{
    int64_t deadline = zclock_mono () + wait_s * 1000;
    for (;;) {
        char *body;
        jdoc_t *doc;
        int rc = ctl_ask_status_of (ctl, name, &body, &doc);
        if (rc != 0)
            return EXIT_FAILED;
        int k = ctl_exp_index (doc, name);
        const char *state = k >= 0 ? jdoc_string (doc, "$.experiments[%d].archive.state", k) : NULL;
        int held = k >= 0 && jdoc_type_at (doc, "$.experiments[%d].allocation", k) == JDOC_OBJECT;
        int ended = state && (strcmp (state, "failed") == 0 ||
                              (strcmp (state, "done") == 0 && !(release && held)));
        if (ended || zclock_mono () > deadline || ctl_stop) {
            if (ctl->json && ended)
                printf ("%s\n", body);
            int ok = ended && strcmp (state, "done") == 0;
            const char *error = jdoc_string (doc, "$.experiments[%d].archive.error", k);
            if (!ended)
                ctl_error ("the archive of '%s' has not ended within %ld s (state %s)", name,
                           wait_s, state ? state : "unknown");
            else if (!ok)
                ctl_error ("the archive of '%s' failed: %s", name, error ? error : "?");
            else if (!ctl->json)
                printf (
                    "archived %s to %s: %s file(s) copied and verified, %s verified before, "
                    "%s original(s) removed%s\n",
                    name, jdoc_string (doc, "$.experiments[%d].archive.to", k),
                    ctl_num (jdoc_number (doc, NAN, "$.experiments[%d].archive.copied", k), "%.0f"),
                    ctl_num (jdoc_number (doc, NAN, "$.experiments[%d].archive.already", k),
                             "%.0f"),
                    ctl_num (jdoc_number (doc, NAN, "$.experiments[%d].archive.removed", k),
                             "%.0f"),
                    release ? "; its allocation is released" : "");
            jdoc_destroy (&doc);
            free (body);
            return ok ? EXIT_OK : EXIT_FAILED;
        }
        jdoc_destroy (&doc);
        free (body);
        ctl_nap (REPLAY_POLL_MS);
    }
}

int
ctl_run_archive (ctl_t *ctl, ctl_args_t *args)
{
    long wait_s;
    int rc = ctl_start_waited (ctl, args, &wait_s, NULL);
    if (rc != EXIT_OK)
        return rc;
    if (ctl_value (args, "no-wait"))
        return EXIT_OK;
    return s_archive_wait (ctl, args->words[0], strcmp (args->command->name, "release") == 0,
                           wait_s);
}

int
ctl_run_iobench (ctl_t *ctl, ctl_args_t *args)
{
    const char *dir = args->words[0];
    const char *total_text = ctl_value (args, "total"), *need_text = ctl_value (args, "need");
    int64_t total = 256 << 20;
    double need = 0;
    if (total_text && (util_parse_size (total_text, &total) != 0 || total < (1 << 20))) {
        ctl_error ("bad --total '%s': a size of 1M or more, such as 256M", total_text);
        return EXIT_USAGE;
    }
    if (need_text && util_parse_rate (need_text, &need) != 0) {
        ctl_error ("bad --need '%s': a rate such as 240Mbit, 30MB or 1Gbit (per second)",
                   need_text);
        return EXIT_USAGE;
    }
    iobench_row_t rows[IOBENCH_SIZES];
    int best;
    char err[4200];
    if (iobench_run (dir, total, rows, &best, err, sizeof err) != 0) {
        ctl_error ("%s", err);
        return EXIT_FAILED;
    }
    int sustains = need <= 0 || rows[best].write_mb_s * 1e6 >= need;
    char size[32];
    if (ctl->json) {
        ctl_json_iobench (dir, rows, best, need, sustains);
        return sustains ? EXIT_OK : EXIT_FAILED;
    }
    printf ("sequential IO in %s (%s per size, write + fsync, then read uncached)\n", dir,
            util_format_size (rows[0].bytes, size, sizeof size));
    printf ("%10s %12s %12s\n", "IO SIZE", "WRITE MB/s", "READ MB/s");
    for (int k = 0; k < IOBENCH_SIZES; k++)
        printf ("%10s %12.1f %12.1f%s\n",
                util_format_size ((int64_t)rows[k].io_size, size, sizeof size), rows[k].write_mb_s,
                rows[k].read_mb_s, k == best ? "  <- best" : "");
    char key[32];
    if (rows[best].io_size >= (1 << 20))
        snprintf (key, sizeof key, "%zuM", rows[best].io_size >> 20);
    else
        snprintf (key, sizeof key, "%zuK", rows[best].io_size >> 10);
    printf ("best IO size: %s (storage/io_size = %s)\n",
            util_format_size ((int64_t)rows[best].io_size, size, sizeof size), key);
    if (need > 0)
        printf ("%s sustains %s (%.1f MB/s): %s (writes %.1f MB/s at the best size)\n", dir,
                need_text, need / 1e6, sustains ? "yes" : "NO", rows[best].write_mb_s);
    return sustains ? EXIT_OK : EXIT_FAILED;
}

// The warnings numbered as 'warnings clear N' takes them, the clocks
// measured, and what a clear did.
static void
s_print_warnings (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    int cleared = (int)jdoc_int (doc, 0, "$.cleared");
    if (cleared > 0)
        printf ("cleared %d warning(s): hidden while they last\n", cleared);
    int n = jdoc_length (doc, "$.warnings");
    for (int i = 0; i < n; i++) {
        const char *message = jdoc_string (doc, "$.warnings[%d].message", i);
        printf ("%3d  %-8s  %s\n", i + 1, ctl_warning_level (doc, i), message ? message : "?");
    }
    if (n == 0)
        printf ("no warning in force\n");
    int hidden = (int)jdoc_int (doc, 0, "$.warnings_cleared");
    if (hidden > 0)
        printf ("(%d cleared warning(s) still hold, not shown)\n", hidden);
    int m = jdoc_length (doc, "$.clocks");
    for (int i = 0; i < m; i++) {
        const char *peer = jdoc_string (doc, "$.clocks[%d].peer", i);
        printf ("%s %s: %s ms\n", i == 0 ? "clock skew:" : "           ", peer ? peer : "?",
                ctl_num (jdoc_number (doc, NAN, "$.clocks[%d].clock_skew_ms", i), "%+.0f"));
    }
}

int
ctl_run_warnings (ctl_t *ctl, ctl_args_t *args)
{
    if (args->nwords >= 1 && strcmp (args->words[0], "clear") != 0 &&
        strcmp (args->words[0], "list") != 0) {
        ctl_error ("bad warnings command '%s'; usage: %s", args->words[0], args->command->usage);
        return EXIT_USAGE;
    }
    if (args->nwords >= 1 && strcmp (args->words[0], "clear") == 0 && args->nwords != 2) {
        ctl_error ("warnings clear needs N (as 'pivctl warnings' numbers them) or all; usage: %s",
                   args->command->usage);
        return EXIT_USAGE;
    }
    if (args->nwords == 0) { // a read: any key may list, only operators clear
        args->send[args->nsend++] = (char *)"list";
        args->send[args->nsend] = NULL;
    }
    return ctl_run_printed (ctl, args, s_print_warnings);
}

// ---------------------------------------------------------------------------
// The store's lifecycle (doc/storage.md): backup

// Prints how the backup into 'file' ended, as 'backup status' says it.
// EXIT_OK once it is there and verified, else EXIT_FAILED.
static int
s_backup_ended (ctl_t *ctl, jdoc_t *doc, const char *body, const char *file)
{
    const char *state = jdoc_string (doc, "$.backup.state");
    if (strcmp (state ? state : "", "done") != 0) {
        const char *error = jdoc_string (doc, "$.backup.error");
        ctl_error ("%s", error ? error : "the backup failed");
        return EXIT_FAILED;
    }
    if (ctl->json) {
        printf ("%s\n", body);
        return EXIT_OK;
    }
    char size[32];
    int64_t bytes = jdoc_int (doc, 0, "$.backup.bytes");
    printf ("backed up the store into %s: %" PRId64 " bytes (%s), %" PRId64
            " pages in %s s; integrity ok, schema %" PRId64 "\n",
            file, bytes, util_format_size (bytes, size, sizeof size),
            jdoc_int (doc, 0, "$.backup.pages"),
            ctl_num (jdoc_number (doc, NAN, "$.backup.seconds"), "%.2f"),
            jdoc_int (doc, 0, "$.backup.schema"));
    return EXIT_OK;
}

// 'backup status': the last backup since the broker started.
static void
s_print_backup (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    const char *state = jdoc_string (doc, "$.backup.state");
    const char *file = jdoc_string (doc, "$.backup.file");
    if (!state || strcmp (state, "none") == 0)
        printf ("no backup since the broker started\n");
    else if (strcmp (state, "done") == 0)
        printf ("backup into %s: done, %" PRId64 " bytes, %" PRId64 " pages in %s s; integrity ok\n",
                file ? file : "?", jdoc_int (doc, 0, "$.backup.bytes"),
                jdoc_int (doc, 0, "$.backup.pages"),
                ctl_num (jdoc_number (doc, NAN, "$.backup.seconds"), "%.2f"));
    else if (strcmp (state, "failed") == 0)
        printf ("backup into %s: failed: %s\n", file ? file : "?",
                jdoc_string (doc, "$.backup.error") ? jdoc_string (doc, "$.backup.error") : "?");
    else
        printf ("backup into %s: %s\n", file ? file : "?", state);
}

int
ctl_run_backup (ctl_t *ctl, ctl_args_t *args)
{
    const char *file = args->words[0];
    if (strcmp (file, "status") == 0)
        return ctl_run_printed (ctl, args, s_print_backup);
    long wait_s;
    int rc = ctl_start_waited (ctl, args, &wait_s, NULL);
    if (rc != EXIT_OK || ctl_value (args, "no-wait"))
        return rc;
    int64_t deadline = zclock_mono () + wait_s * 1000;
    for (;;) {
        char *body;
        jdoc_t *doc;
        char *words[] = {"backup", "status"};
        char *line = cli_join (2, words);
        rc = line ? ctl_ask_json (ctl, line, &body, &doc) : EXIT_FAILED;
        free (line);
        if (rc != 0)
            return EXIT_FAILED;
        const char *state = jdoc_string (doc, "$.backup.state");
        const char *of = jdoc_string (doc, "$.backup.file");
        int ours = of && strcmp (of, file) == 0;
        if (!ours || !state || strcmp (state, "running") != 0) {
            rc = ours ? s_backup_ended (ctl, doc, body, file) : EXIT_FAILED;
            if (!ours)
                ctl_error ("the broker no longer reports the backup into '%s' (restarted?)",
                           file);
        }
        else if (zclock_mono () > deadline || ctl_stop) {
            ctl_error ("the backup into '%s' has not ended within %ld s: it goes on in the "
                       "broker ('pivctl backup status')",
                       file, wait_s);
            rc = EXIT_FAILED;
        }
        else
            rc = -1;
        jdoc_destroy (&doc);
        free (body);
        if (rc >= 0)
            return rc;
        ctl_nap (REPLAY_POLL_MS);
    }
}

// ---------------------------------------------------------------------------
// purge

static void
s_print_purge (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    printf ("purged %s: %" PRId64 " pairs, %" PRId64 " results, %" PRId64 " files, %" PRId64
            " events, %" PRId64 " statistics sets, %" PRId64 " ensemble jobs\n",
            jdoc_string (doc, "$.experiment"), jdoc_int (doc, 0, "$.purged.pairs"),
            jdoc_int (doc, 0, "$.purged.results"), jdoc_int (doc, 0, "$.purged.files"),
            jdoc_int (doc, 0, "$.purged.events"), jdoc_int (doc, 0, "$.purged.stats"),
            jdoc_int (doc, 0, "$.purged.ensemble_jobs"));
    if (jdoc_type_at (doc, "$.frames") != JDOC_OBJECT)
        printf ("its frames are left on disk (--files removes them)\n");
    else if (jdoc_bool (doc, 0, "$.frames.replay"))
        printf ("no frame removed: a replay's frames are its source's\n");
    else
        printf ("frames: %" PRId64 " removed, %" PRId64 " gone already, %" PRId64
                " kept (not below the watch root or storage/archive_dir, or not a plain file: "
                "see the broker's log)\n",
                jdoc_int (doc, 0, "$.frames.removed"), jdoc_int (doc, 0, "$.frames.gone"),
                jdoc_int (doc, 0, "$.frames.kept"));
}
CTL_PRINTED (ctl_run_purge, s_print_purge)

// ---------------------------------------------------------------------------
// vacuum

static void
s_print_vacuum (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    char before[32], after[32], free_bytes[32];
    printf ("vacuumed the store: %s (%s of it free) -> %s in %s s\n",
            util_format_size (jdoc_int (doc, 0, "$.vacuum.bytes_before"), before, sizeof before),
            util_format_size (jdoc_int (doc, 0, "$.vacuum.free_before"), free_bytes,
                              sizeof free_bytes),
            util_format_size (jdoc_int (doc, 0, "$.vacuum.bytes_after"), after, sizeof after),
            ctl_num (jdoc_number (doc, NAN, "$.vacuum.seconds"), "%.2f"));
}

int
ctl_run_vacuum (ctl_t *ctl, ctl_args_t *args)
{
    // The broker answers once the VACUUM is over: minutes for a large
    // store, unless --timeout says otherwise.
    if (ctl->timeout_ms == TIMEOUT_MS)
        ctl->timeout_ms = VACUUM_TIMEOUT_MS;
    return ctl_run_printed (ctl, args, s_print_vacuum);
}

// ---------------------------------------------------------------------------
// forget-agents

static void
s_print_forgotten (jdoc_t *doc, ctl_args_t *args)
{
    (void)args;
    int64_t n = jdoc_int (doc, 0, "$.forgotten");
    const char *names = jdoc_string (doc, "$.agents");
    if (n == 0)
        printf ("no agent unseen for %s (connected agents are never forgotten)\n",
                ctl_value (args, "older-than"));
    else
        printf ("forgot %" PRId64 " agent(s) not seen for %s: %s\n", n,
                ctl_value (args, "older-than"), names ? names : "");
}
CTL_PRINTED (ctl_run_forget_agents, s_print_forgotten)
