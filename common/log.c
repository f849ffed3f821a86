// log.c — leveled logging to stderr or syslog; see log.h.

#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

log_level_t log_threshold = LOG_LEVEL_NOTICE;
static const char *s_ident = "pivfarm";  // program name on every line
static int s_syslog;                     // 1: lines go to syslog

static const char *const s_names[] = {"error", "warning", "notice", "info", "debug"};

void
log_open (const char *ident, int to_syslog)
{
    s_ident = ident;
    s_syslog = to_syslog;
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
    va_list ap;
    va_start (ap, fmt);
    if (s_syslog) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};
        vsyslog (prio[level], fmt, ap);
    }
    else {
        char when[32];
        time_t now = time (NULL);
        struct tm tm;
        strftime (when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r (&now, &tm));
        // One fprintf per line so that lines of concurrent threads do not mix.
        char line[2048];
        vsnprintf (line, sizeof line, fmt, ap);
        fprintf (stderr, "%s %s %s: %s\n", when, s_ident, s_names[level], line);
    }
    va_end (ap);
}
