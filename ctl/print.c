// print.c — how pivctl prints: errors on stderr, and the numbers, times
// and bars of its tables.

#include "ctl/ctl.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void
ctl_error (const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    fputs ("pivctl: ", stderr);
    vfprintf (stderr, fmt, args);
    fputc ('\n', stderr);
    va_end (args);
}

static char *
s_buffer (void)
{
    static char buffers[32][64];
    static int next;
    next = (next + 1) % 32;
    return buffers[next];
}

const char *
ctl_num (double x, const char *fmt)
{
    char *buf = s_buffer ();
    if (isnan (x))
        return "-";
    snprintf (buf, 64, fmt, x);
    return buf;
}

const char *
ctl_ms (double ms)
{
    if (isnan (ms))
        return "-";
    char *buf = s_buffer ();
    if (fabs (ms) < 10)
        snprintf (buf, 64, "%.1f ms", ms);
    else if (fabs (ms) < 10000)
        snprintf (buf, 64, "%.0f ms", ms);
    else
        snprintf (buf, 64, "%.1f s", ms / 1000);
    return buf;
}

const char *
ctl_duration (double s)
{
    char *buf = s_buffer ();
    if (isnan (s))
        return "-";
    long t = lround (s);
    if (t < 60)
        snprintf (buf, 64, "%ld s", t);
    else if (t < 3600)
        snprintf (buf, 64, "%ld min %02ld s", t / 60, t % 60);
    else
        snprintf (buf, 64, "%ld h %02ld min", t / 3600, t % 3600 / 60);
    return buf;
}

const char *
ctl_clock (int64_t ns)
{
    if (ns <= 0)
        return "-";
    char *buf = s_buffer ();
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    localtime_r (&t, &tm);
    size_t len = strftime (buf, 64, "%H:%M:%S", &tm);
    snprintf (buf + len, 64 - len, ".%03d", (int)(ns / 1000000 % 1000));
    return buf;
}

const char *
ctl_date (int64_t ns)
{
    char *buf = s_buffer ();
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    localtime_r (&t, &tm);
    strftime (buf, 64, "%Y-%m-%d", &tm);
    return buf;
}

const char *
ctl_scope (jdoc_t *doc)
{
    const char *scope = jdoc_string (doc, "$.scope");
    if (!scope || strcmp (scope, "*") == 0)
        return "all experiments (the default)";
    static char buf[NAME_MAX + 16]; // the whole name: the farm's are at most NAME_MAX
    snprintf (buf, sizeof buf, "experiment '%s'", scope);
    return buf;
}

const char *
ctl_limit (double rate)
{
    return isnan (rate) ? "max (none)" : ctl_num (rate, "%g pairs/s");
}

int
ctl_width (jdoc_t *doc, const char *array, const char *member, int min, int max)
{
    int width = min, n = jdoc_length (doc, "%s", array);
    for (int i = 0; i < n; i++) {
        const char *s = jdoc_string (doc, "%s[%d].%s", array, i, member);
        int len = s ? (int)strlen (s) : 0;
        if (len > width)
            width = len;
    }
    return width < max ? width : max;
}

const char *
ctl_bar (double part, double whole, int width)
{
    static char buf[160];
    double f = whole > 0 ? part / whole : 1;
    if (f < 0)
        f = 0;
    if (f > 1)
        f = 1;
    int full = (int)floor (f * width);
    int len = 0;
    buf[len++] = '[';
    for (int i = 0; i < width; i++)
        buf[len++] = i < full ? '#' : '-';
    snprintf (buf + len, sizeof buf - (size_t)len, "] %3.0f%%", floor (f * 100));
    return buf;
}
