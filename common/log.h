// log.h — the one logging facility of pivfarm: levels, checked before the
// arguments are formatted; to stderr (default) or syslog. Under systemd
// (stderr is the stream JOURNAL_STREAM names) each line carries its
// priority as an sd-daemon(3) "<N>" prefix and no time of its own.

#ifndef COMMON_LOG_H
#define COMMON_LOG_H

typedef enum { LOG_LEVEL_ERROR, LOG_LEVEL_WARNING, LOG_LEVEL_NOTICE, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG } log_level_t;

extern log_level_t log_threshold;

// Names the program in every line; to_syslog sends lines to syslog instead.
// Looks at JOURNAL_STREAM and stderr once, here.
void log_open (const char *ident, int to_syslog);
void log_set_level (log_level_t level);
// "error", "warning", "notice", "info", "debug" → 0, or -1 if unknown.
int log_level_parse (const char *name, log_level_t *level);
// A line whose text is over 2047 bytes keeps its start and its end (the
// reason), "..." in place of its middle.
void log_write (log_level_t level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#define log_at(level, ...)                                                                      \
    do {                                                                                        \
        if ((level) <= log_threshold)                                                           \
            log_write ((level), __VA_ARGS__);                                                   \
    } while (0)
#define log_error(...) log_at (LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warning(...) log_at (LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_notice(...) log_at (LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_info(...) log_at (LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_at (LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
