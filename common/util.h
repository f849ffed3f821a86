// util.h — small helpers every pivfarm program shares.

#ifndef COMMON_UTIL_H
#define COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Seconds on the monotonic clock: for durations, never for dates.
double util_now (void);

// Nanoseconds since the epoch (the wall clock): for times stored and
// compared across processes, as the event log's.
int64_t util_time_ns (void);

// A size: a number with an optional binary suffix K, M, G or T (also KiB,
// MiB ..., and B), "20G", "1.5T", "65536". 0 with *bytes, -1 if it is not
// one or is negative.
int util_parse_size (const char *text, int64_t *bytes);
// A free-space threshold: a size, or a percentage of the volume ("10%").
// 0 with *bytes (-1 for a percentage) and *percent (-1 for a size), or -1.
int util_parse_space (const char *text, int64_t *bytes, double *percent);
// A data rate: a number and a unit, bit, Kbit, Mbit, Gbit (decimal, per
// second) or B, KB, MB, GB (decimal bytes) or KiB, MiB, GiB (binary bytes);
// "/s" may follow. 0 with *bytes_per_s, or -1.
int util_parse_rate (const char *text, double *bytes_per_s);
// "20.0 GiB", "512 KiB", "100 B" into buf; returns buf.
const char *util_format_size (int64_t bytes, char *buf, size_t size);

// The memory this process may use, for budgets (issue 23): the smallest
// limit set on its cgroup or an ancestor (v2 memory.max, else v1
// memory.limit_in_bytes), if below the host's MemTotal, else MemTotal.
// 0 with *bytes and 'source' naming where it came from ("cgroup
// memory.max", "MemTotal"), -1 if nothing could be read.
int util_memory_limit (uint64_t *bytes, char *source, size_t size);

// An integer in decimal without printf (the broker's hot path writes
// several a pair): magnitude, with a '-' before it when negative, at the
// end of buf, NUL-terminated. Returns where the text starts in buf.
#define UTIL_DECIMAL_SIZE 22  // "-" + 20 digits + NUL
const char *util_decimal (uint64_t magnitude, int negative, char buf[UTIL_DECIMAL_SIZE]);
// The same for a signed value.
const char *util_decimal_int64 (int64_t value, char buf[UTIL_DECIMAL_SIZE]);

// The length of the valid UTF-8 sequence at s (1 to 4; s holds n bytes),
// or 0 if the bytes there are not one: overlong forms, surrogates, code
// points beyond U+10FFFF and a sequence cut short by n are not; n 0 gives 0.
// The one UTF-8 rule of pivfarm: every check and sanitizer below uses it.
int util_utf8_length (const unsigned char *s, size_t n);

// Where the first byte of s[0 .. n) that is not part of valid UTF-8 sits
// (overlong forms, surrogates and code points beyond U+10FFFF are invalid),
// in *where; false if none (then *where is n).
bool util_utf8_invalid (const unsigned char *s, size_t n, size_t *where);

// 'text' (NULL: "") with each byte that is not part of valid UTF-8 replaced
// by U+FFFD (EF BF BD), so that what pivfarm writes is always valid UTF-8:
// a new string the caller frees, NULL on no memory.
char *util_utf8_sanitize (const char *text);

// 'text' to be shown in a log line or a message, in buf: itself when it
// has fewer than 'size' bytes, else its start and its end around "...",
// cut between UTF-8 characters, size - 1 bytes in all, so that a long
// name never pushes what follows it (the reason) out of the line: the end
// of a path names the file, its start the experiment. Returns buf.
#define UTIL_SHOWN 161  // the size of a name shown in a log line: 160 bytes
const char *util_shorten (const char *text, char *buf, size_t size);

// Takes the lines that begin with '#' out of 'text', in place (a
// calibration file's comments, before it travels as a control line or in a
// TASK, which carry at most PROTO_MAX_STRING bytes). Returns text.
char *util_drop_comments (char *text);

// The items item(0), item(1), ... up to the first NULL, in buf, joined by
// 'sep' but the last two by 'last': ", " and " or " give "ab, sequence or
// sliding" (the choices of a list in a message or a help text). Returns buf,
// cut at size - 1 bytes if it does not fit.
const char *util_join (const char *(*item) (int i), const char *sep, const char *last, char *buf,
                       size_t size);

// The first i whose item(i) is 'name' (exact), looking up to the first
// NULL; -1 if none is.
int util_choice_index (const char *(*item) (int i), const char *name);

#endif
