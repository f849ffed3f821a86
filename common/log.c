// log.c — leveled logging to stderr, the journal's stream or syslog; see
// log.h.

#include "common/log.h"
#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <time.h>

log_level_t log_threshold = LOG_LEVEL_NOTICE;
static const char *s_ident = "pivfarm";  // program name on every line
static int s_syslog;                     // 1: lines go to syslog
static int s_journal;                    // 1: stderr is the journal's stream (<N> prefixes)

static const char *const s_names[] = {"error", "warning", "notice", "info", "debug"};

#define S_LINE 2048  // bytes of a line's text, NUL included

// 1 if stderr is the stream systemd connected to the journal: the service
// manager sets JOURNAL_STREAM to its "device:inode" (systemd.exec(5)); a
// child whose stderr was redirected elsewhere inherits the variable, so the
// descriptor itself is compared.
static int
s_stderr_is_journal (void)
{
    const char *stream = getenv ("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char end;
    struct stat st;
    if (!stream || sscanf (stream, "%llu:%llu%c", &dev, &ino, &end) != 2 || fstat (2, &st) != 0)
        return 0;
    return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void
log_open (const char *ident, int to_syslog)
{
    s_ident = ident;
    s_syslog = to_syslog;
    s_journal = !to_syslog && s_stderr_is_journal ();
    if (to_syslog)
        openlog (ident, LOG_PID, LOG_DAEMON);
}

void
log_set_level (log_level_t level)
{
    log_threshold = level;
}

int
log_level_parse (const char *name, log_level_t *level)
{
    for (int i = 0; i < (int) (sizeof s_names / sizeof s_names[0]); i++)
        if (name && strcmp (name, s_names[i]) == 0) {
            *level = (log_level_t) i;
            return 0;
        }
    return -1;
}

void
log_write (log_level_t level, const char *fmt, ...)
{
    // One line of at most S_LINE bytes: a longer one (long names) loses its
    // middle, never its end, where the reason is (util_shorten).
    char line[S_LINE];
    va_list ap;
    va_start (ap, fmt);
    va_list again;
    va_copy (again, ap);
    int n = vsnprintf (line, sizeof line, fmt, ap);
    char *whole = NULL;
    if (n >= (int) sizeof line && vasprintf (&whole, fmt, again) >= 0)
        util_shorten (whole, line, sizeof line);
    free (whole);
    va_end (again);
    va_end (ap);
    if (s_syslog) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};
        syslog (prio[level], "%s", line);
    }
    else if (s_journal) {
        // The journal reads the priority from the prefix and keeps its own
        // time and the program's name (SYSLOG_IDENTIFIER): journalctl -p.
        // It takes each line of the stream as an entry: a text of several
        // lines (a name with a newline) gets the prefix on each.
        static const char *const prefix[] = {SD_ERR, SD_WARNING, SD_NOTICE, SD_INFO, SD_DEBUG};
        char entry[S_LINE * 2];
        size_t n = (size_t) snprintf (entry, sizeof entry, "%s%s: ", prefix[level], s_names[level]);
        for (const char *c = line; *c && n < sizeof entry - 8; c++) {
            entry[n++] = *c;
            if (*c == '\n')
                n += (size_t) snprintf (entry + n, sizeof entry - n, "%s", prefix[level]);
        }
        entry[n++] = '\n';
        // One fwrite per entry, as one fprintf a line below.
        fwrite (entry, 1, n, stderr);
    }
    else {
        char when[32];
        time_t now = time (NULL);
        struct tm tm;
        strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r (&now, &tm));
        // One fprintf per line so that lines of concurrent threads do not mix.
        fprintf (stderr, "%s %s %s: %s\n", when, s_ident, s_names[level], line);
    }
}
