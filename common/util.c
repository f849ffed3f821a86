// util.c — small helpers every pivfarm program shares; see util.h.

#include "common/util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

double
util_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int64_t
util_time_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// A non-negative number followed by 'unit' (the rest of the text, spaces
// before it skipped). 0 or -1.
static int
s_number_unit (const char *text, double *x, const char **unit)
{
    char *end;
    if (!text || !isdigit ((unsigned char) *text))
        return -1;
    *x = strtod (text, &end);
    if (end == text || !isfinite (*x) || *x < 0)
        return -1;
    while (*end == ' ')
        end++;
    *unit = end;
    return 0;
}

int
util_parse_size (const char *text, int64_t *bytes)
{
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1},          {"B", 1},          {"K", 1024.0},    {"KiB", 1024.0},
                 {"M", 1048576.0}, {"MiB", 1048576.0}, {"G", 1073741824.0}, {"GiB", 1073741824.0},
                 {"T", 1099511627776.0}, {"TiB", 1099511627776.0}};
    double x;
    const char *unit;
    if (s_number_unit (text, &x, &unit))
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp (unit, units[i].unit) == 0 && x * units[i].scale < 9.2e18) {
            *bytes = (int64_t) llround (x * units[i].scale);
            return 0;
        }
    return -1;
}

int
util_parse_space (const char *text, int64_t *bytes, double *percent)
{
    double x;
    const char *unit;
    *bytes = -1, *percent = -1;
    if (s_number_unit (text, &x, &unit) == 0 && strcmp (unit, "%") == 0) {
        if (x > 100)
            return -1;
        *percent = x;
        return 0;
    }
    return util_parse_size (text, bytes);
}

int
util_parse_rate (const char *text, double *bytes_per_s)
{
    static const struct {
        const char *unit;
        double scale;  // bytes
    } units[] = {{"bit", 1 / 8.0}, {"Kbit", 1e3 / 8}, {"Mbit", 1e6 / 8}, {"Gbit", 1e9 / 8},
                 {"B", 1},         {"KB", 1e3},       {"MB", 1e6},       {"GB", 1e9},
                 {"KiB", 1024.0},  {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
    double x;
    const char *unit;
    if (s_number_unit (text, &x, &unit))
        return -1;
    char word[16];
    size_t len = strcspn (unit, "/");
    if (len >= sizeof word || (unit[len] && strcmp (unit + len, "/s") != 0))
        return -1;
    memcpy (word, unit, len);
    word[len] = '\0';
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp (word, units[i].unit) == 0) {  // case matters: Mbit is not MB
            *bytes_per_s = x * units[i].scale;
            return 0;
        }
    return -1;
}

const char *
util_decimal (uint64_t magnitude, int negative, char buf[UTIL_DECIMAL_SIZE])
{
    char *d = buf + UTIL_DECIMAL_SIZE;
    *--d = '\0';
    do
        *--d = (char) ('0' + magnitude % 10);
    while ((magnitude /= 10) > 0);
    if (negative)
        *--d = '-';
    return d;
}

const char *
util_decimal_int64 (int64_t value, char buf[UTIL_DECIMAL_SIZE])
{
    return util_decimal (value < 0 ? 0 - (uint64_t) value : (uint64_t) value, value < 0, buf);
}

// The first number in file 'path' (0: none, or no limit: v2's "max", v1's
// page-rounded 2^63).
static uint64_t
s_read_limit (const char *path)
{
    FILE *f = fopen (path, "re");
    unsigned long long v = 0;
    if (f && fscanf (f, "%llu", &v) != 1)
        v = 0;
    if (f)
        fclose (f);
    return v >= (1ULL << 62) ? 0 : (uint64_t) v;
}

// The smallest limit in file 'name' of the cgroup 'dir'/'path' and its
// ancestors up to 'dir' (0: none set).
static uint64_t
s_cgroup_limit (const char *dir, const char *path, const char *name)
{
    char at[4096], file[4200];
    snprintf (at, sizeof at, "%s%s", dir, strcmp (path, "/") == 0 ? "" : path);
    uint64_t least = 0;
    for (;;) {
        snprintf (file, sizeof file, "%s/%s", at, name);
        uint64_t v = s_read_limit (file);
        if (v && (!least || v < least))
            least = v;
        char *slash = strrchr (at, '/');
        if (strlen (at) <= strlen (dir) || !slash)
            break;
        *slash = '\0';
    }
    return least;
}

int
util_memory_limit (uint64_t *bytes, char *source, size_t size)
{
    // Which cgroup: "0::/path" (v2) or "N:...memory...:/path" (v1).
    char line[4096], v2[4096] = "", v1[4096] = "";
    FILE *f = fopen ("/proc/self/cgroup", "re");
    while (f && fgets (line, sizeof line, f)) {
        line[strcspn (line, "\n")] = '\0';
        char *controllers = strchr (line, ':'), *path;
        if (!controllers || !(path = strchr (controllers + 1, ':')))
            continue;
        *path++ = '\0';
        controllers++;
        if (!*controllers)
            snprintf (v2, sizeof v2, "%s", path);
        else if (strstr (controllers, "memory"))
            snprintf (v1, sizeof v1, "%s", path);
    }
    if (f)
        fclose (f);
    uint64_t cgroup = 0, total = 0;
    const char *which = "cgroup memory.max";
    if (*v2)
        cgroup = s_cgroup_limit ("/sys/fs/cgroup", v2, "memory.max");
    if (!cgroup && *v1) {
        cgroup = s_cgroup_limit ("/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes");
        which = "cgroup memory.limit_in_bytes";
    }
    unsigned long long kb;
    f = fopen ("/proc/meminfo", "re");
    while (f && fgets (line, sizeof line, f))
        if (sscanf (line, "MemTotal: %llu kB", &kb) == 1) {
            total = (uint64_t) kb * 1024;
            break;
        }
    if (f)
        fclose (f);
    if (cgroup && (!total || cgroup < total)) {
        *bytes = cgroup;
        snprintf (source, size, "%s", which);
        return 0;
    }
    if (!total)
        return -1;
    *bytes = total;
    snprintf (source, size, "MemTotal");
    return 0;
}

const char *
util_format_size (int64_t bytes, char *buf, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double x = (double) bytes;
    int u = 0;
    while (fabs (x) >= 1024 && u < 5)
        x /= 1024, u++;
    if (u == 0)
        snprintf (buf, size, "%lld B", (long long) bytes);
    else
        snprintf (buf, size, x >= 100 ? "%.0f %s" : "%.1f %s", x, units[u]);
    return buf;
}

int
util_utf8_length (const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    size_t k;
    for (k = 1; k < len && (s[k] & 0xc0) == 0x80; k++)
        cp = (cp << 6) | (s[k] & 0x3f);
    if (k < len || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return (int) len;
}

// Where the first byte that is not part of valid UTF-8 sits (overlong forms,
// surrogates and code points beyond U+10FFFF are invalid); false if none.
bool
util_utf8_invalid (const unsigned char *s, size_t n, size_t *where)
{
    size_t i = 0;
    int len;
    while (i < n && (len = util_utf8_length (s + i, n - i)) > 0)
        i += (size_t) len;
    *where = i;
    return i < n;
}

char *
util_utf8_sanitize (const char *text)
{
    const unsigned char *s = (const unsigned char *) (text ? text : "");
    size_t n = strlen ((const char *) s), len = 0;
    // Each invalid byte grows into three: the worst case is all of them.
    char *out = malloc (3 * n + 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        int k = util_utf8_length (s + i, n - i);
        const void *from = k > 0 ? (const void *) (s + i) : "\xEF\xBF\xBD";
        size_t size = k > 0 ? (size_t) k : 3;
        memcpy (out + len, from, size);
        len += size;
        i += k > 0 ? (size_t) k : 1;
    }
    out[len] = '\0';
    return out;
}

const char *
util_shorten (const char *text, char *buf, size_t size)
{
    size_t n = strlen (text);
    if (n < size || size < 8) {
        snprintf (buf, size, "%s", text);
        return buf;
    }
    // A third for the start, the rest for the end; neither splits a
    // character (a continuation byte is 10xxxxxx).
    size_t head = (size - 4) / 3, tail = size - 4 - head;
    while (head > 0 && ((unsigned char) text[head] & 0xc0) == 0x80)
        head--;
    const char *end = text + n - tail;
    while (*end && ((unsigned char) *end & 0xc0) == 0x80)
        end++;
    snprintf (buf, size, "%.*s...%s", (int) head, text, end);
    return buf;
}

const char *
util_join (const char *(*item) (int i), const char *sep, const char *last, char *buf, size_t size)
{
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    for (int i = 0; item (i) && len < size; i++) {
        const char *glue = i == 0 ? "" : item (i + 1) ? sep : last;
        int n = snprintf (buf + len, size - len, "%s%s", glue, item (i));
        if (n < 0)
            break;
        len += (size_t) n;
    }
    return buf;
}

int
util_choice_index (const char *(*item) (int i), const char *name)
{
    for (int i = 0; item (i); i++)
        if (strcmp (item (i), name) == 0)
            return i;
    return -1;
}

char *
util_drop_comments (char *text)
{
    char *out = text;
    for (const char *line = text, *next; *line; line = next) {
        next = strchr (line, '\n');
        next = next ? next + 1 : line + strlen (line);
        if (*line != '#') {
            memmove (out, line, (size_t) (next - line));
            out += next - line;
        }
    }
    *out = '\0';
    return text;
}
