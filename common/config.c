// config.c — the one configuration file of every pivfarm program: ZPL read
// with czmq's zconfig, each key checked against its kind, range or choices,
// and relative paths anchored at the file's directory; see config.h.

#include "common/config.h"
#include "common/pairing_rule.h"
#include "common/util.h"

#include <czmq.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// zconfig cuts every line at 1024 characters without a word, so longer
// lines are refused before it sees them.
#define ZPL_LINE_MAX 1024
// Anything larger is not a configuration file (a wrong -c argument).
#define FILE_MAX (1024 * 1024)
// Values quoted in messages are shortened to this.
#define QUOTE_MAX 64

typedef enum {
    KIND_STRING,        // any text that fits its buffer
    KIND_LIST,          // a non-empty comma-separated list
    KIND_ENDPOINT,      // transport://address
    KIND_PATH,          // a path, anchored at the file's directory when relative
    KIND_INT,           // a decimal integer within [min, max]
    KIND_BOOL,          // 0 1 true false yes no
    KIND_CHOICE,        // one of choices
    KIND_STORE_FIELDS,  // all | none | every N
    KIND_PROCESSOR,     // piv | noop | exec:PROGRAM
    KIND_RULED,         // text checked by the rules of its section (config_rules)
    KIND_RULED_INT,     // an integer checked by the rules of its section
    KIND_IO_SIZE,       // a size from 64 KiB to 64 MiB (4M)
    KIND_SPACE,         // a size or a percentage (10%, 50G)
    KIND_OPT_PATH,      // a path or "" (nothing)
    KIND_DURATION,      // off, or a count of s, min, h or d (30d), kept in seconds
    KIND_OPEN           // any other key of its section that the section's rules take,
                        // kept as "key=value" words in one text (name "*")
} s_kind_t;

typedef struct {
    const char *section;         // section name
    const char *name;            // key name within the section
    s_kind_t kind;               // how the value is checked
    size_t offset;               // of the field in config_t
    size_t size;                 // of the field (strings: buffer size)
    long min, max;               // KIND_INT: the accepted range
    const char *(*choice) (int i);  // KIND_CHOICE: the i-th, NULL past the last
} s_key_t;

// A key's choices as an accessor, the shape of the tables' own
// (pairing_rule_choice): messages list them from it, so no list is kept twice.
#define CHOICES(fn, ...)                                                                       \
    static const char *fn (int i)                                                              \
    {                                                                                          \
        static const char *const list[] = {__VA_ARGS__, NULL};                                 \
        return list[i];                                                                        \
    }
CHOICES (s_durabilities, "normal", "full")
CHOICES (s_modes, "inotify", "poll")
CHOICES (s_result_formats, "txt", "field")
CHOICES (s_curves, "off", "on")
CHOICES (s_on_off, "on", "off")
CHOICES (s_levels, "error", "warning", "notice", "info", "debug")

#define FIELD(sec, key) offsetof (config_t, sec.key), sizeof (((config_t *) 0)->sec.key)
#define TEXT(sec, key, kind) {#sec, #key, kind, FIELD (sec, key), 0, 0, NULL}
#define INT(sec, key, lo, hi) {#sec, #key, KIND_INT, FIELD (sec, key), lo, hi, NULL}
#define CHOICE(sec, key, choice) {#sec, #key, KIND_CHOICE, FIELD (sec, key), 0, 0, choice}
#define OPEN(sec, key) {#sec, "*", KIND_OPEN, FIELD (sec, key), 0, 0, NULL}

// Every key of config.h; a key not in this table is refused.
static const s_key_t s_keys[] = {
    TEXT (broker, ingest, KIND_ENDPOINT),
    TEXT (broker, work, KIND_ENDPOINT),
    TEXT (broker, control, KIND_ENDPOINT),
    TEXT (broker, publish, KIND_ENDPOINT),
    TEXT (broker, store, KIND_PATH),
    CHOICE (broker, backup_before_migrate, s_on_off),
    CHOICE (broker, durability, s_durabilities),
    INT (broker, commit_ms, 0, 1000),
    INT (broker, heartbeat_ms, 10, 60000),
    INT (broker, liveness, 1, 100),
    INT (broker, max_attempts, 1, 100),
    TEXT (broker, store_fields, KIND_STORE_FIELDS),
    INT (broker, task_deadline_ms, 0, 86400000),
    INT (broker, deadline_floor_ms, 100, 86400000),
    TEXT (broker, forget_agents_after, KIND_DURATION),
    INT (broker, max_agents, 1, 1000000),
    INT (broker, stats_ms, 0, 600000),
    INT (broker, stats_uncertainty, 0, 1),
    INT (broker, stats_save_kb_s, 0, 1048576),
    INT (broker, stats_save_results, 1, 10000),
    TEXT (watcher, root, KIND_PATH),
    CHOICE (watcher, mode, s_modes),
    INT (watcher, poll_ms, 10, 60000),
    TEXT (watcher, ignore, KIND_STRING),
    INT (watcher, resend_ms, 10, 60000),
    INT (watcher, max_pending, 1, 10000000),
    INT (watcher, settle_ms, 0, 600000),
    TEXT (watcher, broker, KIND_ENDPOINT),
    CHOICE (pairing, rule, pairing_rule_choice),
    TEXT (pairing, a_suffix, KIND_STRING),
    TEXT (pairing, b_suffix, KIND_STRING),
    TEXT (pairing, ignore_case, KIND_BOOL),
    TEXT (pairing, extensions, KIND_LIST),
    INT (pairing, max_waiting, 1, 100000000),
    TEXT (pairing, cameras, KIND_LIST),
    TEXT (agent, broker, KIND_ENDPOINT),
    INT (agent, threads, 0, 1024),
    TEXT (agent, latency, KIND_BOOL),
    TEXT (agent, results, KIND_PATH),
    TEXT (agent, processor, KIND_PROCESSOR),
    TEXT (agent, path_from, KIND_STRING),
    TEXT (agent, path_to, KIND_STRING),
    INT (agent, min_free_mb, 0, 1048576),
    INT (agent, drain_s, 0, 86400),
    CHOICE (agent, result_format, s_result_formats),
    INT (agent, memory_mb, 0, 1 << 30),
    // The PIV core's settings: its rules (piv_settings_check_key), not these.
    TEXT (piv, passes, KIND_RULED),
    TEXT (piv, overlap, KIND_RULED_INT),
    TEXT (piv, iterations, KIND_RULED_INT),
    TEXT (piv, deform, KIND_RULED),
    TEXT (piv, mask, KIND_RULED),
    TEXT (piv, smooth, KIND_RULED),
    TEXT (piv, smooth_s, KIND_RULED),
    INT (piv, max_pixels, 1, 1 << 30),
    INT (piv, max_file_mb, 1, 1048576),
    INT (piv, max_ratio, 2, 1000000),
    // ... and every other key the PIV core parses (eps, threshold, ...).
    OPEN (piv, settings),
    // The calibration's: its rules (piv_calib_check_key).
    TEXT (calibration, scale, KIND_RULED),
    TEXT (calibration, dt, KIND_RULED),
    TEXT (calibration, origin, KIND_RULED),
    TEXT (calibration, y_axis, KIND_RULED),
    CHOICE (security, curve, s_curves),
    TEXT (security, broker_cert, KIND_PATH),
    TEXT (security, client_cert, KIND_PATH),
    TEXT (security, clients, KIND_PATH),
    TEXT (security, operators, KIND_PATH),
    TEXT (security, watcher_cert, KIND_OPT_PATH),
    TEXT (security, agent_cert, KIND_OPT_PATH),
    TEXT (security, page_cert, KIND_OPT_PATH),
    TEXT (security, pivctl_cert, KIND_OPT_PATH),
    TEXT (client, control, KIND_ENDPOINT),
    TEXT (client, publish, KIND_ENDPOINT),
    TEXT (storage, io_size, KIND_IO_SIZE),
    INT (storage, guard_ms, 100, 60000),
    TEXT (storage, warn_free, KIND_SPACE),
    TEXT (storage, critical_free, KIND_SPACE),
    INT (storage, headroom_s, 0, 7 * 86400),
    TEXT (storage, archive_dir, KIND_OPT_PATH),
    INT (storage, archive_idle_s, 1, 31 * 86400),
    INT (storage, archive_mb_s, 0, 100000),
    TEXT (storage, mount_helper, KIND_OPT_PATH),
    CHOICE (log, level, s_levels),
};
#define KEYS ((int) (sizeof s_keys / sizeof s_keys[0]))

static const char *const s_sections[] = {"broker", "watcher", "pairing", "agent", "piv",
                                         "calibration", "security", "client", "storage",
                                         "log"};
#define SECTIONS ((int) (sizeof s_sections / sizeof s_sections[0]))

// The rules registered by config_rules, by section (in s_sections order).
static config_rules_fn *s_section_rules[SECTIONS];

// The role config_role registered: its certificate key is <role>_cert.
static char s_role[16];

// Each endpoint a client connects to, and the broker's bind key it
// follows when not given.
static const struct {
    const char *section, *name;  // the client's key
    const char *bind;            // the broker's key
} s_connects[] = {
    {"watcher", "broker", "ingest"},
    {"agent", "broker", "work"},
    {"client", "control", "control"},
    {"client", "publish", "publish"},
};
#define CONNECTS ((int) (sizeof s_connects / sizeof s_connects[0]))

// What one load knows about the file, for messages and anchoring.
typedef struct {
    const char *path;    // the file as the caller named it
    char dir[PATH_MAX];  // its directory, absolute
    char *err;           // caller's error buffer, may be NULL
    size_t errlen;       // its size
} s_load_t;

static int
s_fail (s_load_t *load, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

// The message into the caller's buffer; one longer than it (long paths)
// loses its middle, never its end, where the reason is (util_shorten).
static int
s_fail (s_load_t *load, const char *fmt, ...)
{
    if (load->err && load->errlen) {
        va_list ap;
        va_start (ap, fmt);
        char *whole = NULL;
        if (vasprintf (&whole, fmt, ap) >= 0)
            util_shorten (whole, load->err, load->errlen);
        else
            snprintf (load->err, load->errlen, "no memory for the error of '%s'", load->path);
        free (whole);
        va_end (ap);
    }
    return -1;
}

// A value fit to quote in a message: shortened, the caller's buffer.
static const char *
s_quote (const char *value, char *buf, size_t size)
{
    if (strlen (value) < QUOTE_MAX)
        return value;
    snprintf (buf, size, "%.*s...", QUOTE_MAX - 4, value);
    return buf;
}

static char *
s_text (config_t *cfg, const s_key_t *key)
{
    return (char *) cfg + key->offset;
}

static int *
s_int (config_t *cfg, const s_key_t *key)
{
    return (int *) ((char *) cfg + key->offset);
}

static int
s_copy (s_load_t *load, config_t *cfg, const s_key_t *key, const char *value)
{
    if (strlen (value) >= key->size)
        return s_fail (load,
                       "value of '%s/%s' in '%s' is too long (%zu characters, at most %zu)",
                       key->section, key->name, load->path, strlen (value), key->size - 1);
    memcpy (s_text (cfg, key), value, strlen (value) + 1);
    return 0;
}

// A decimal integer, nothing before or after: 0, -1 if it is not one, -2
// if it does not fit a long.
static int
s_parse_long (const char *text, long *out)
{
    const char *p = text[0] == '-' ? text + 1 : text;
    if (!isdigit ((unsigned char) *p))
        return -1;
    while (isdigit ((unsigned char) *p))
        p++;
    if (*p)
        return -1;
    errno = 0;
    *out = strtol (text, NULL, 10);
    return errno == ERANGE ? -2 : 0;
}

#define DURATION_MAX_S (3650L * 86400)  // ten years: longer is a typo

// A duration: off or 0, or a whole count of s, min, h or d ("30d"); its
// seconds, or -1 if it is none of these or longer than DURATION_MAX_S.
static long
s_parse_duration (const char *text)
{
    static const struct {
        const char *unit;
        long seconds;
    } units[] = {{"s", 1}, {"min", 60}, {"h", 3600}, {"d", 86400}};
    if (strcmp (text, "off") == 0 || strcmp (text, "0") == 0)
        return 0;
    const char *p = text;
    while (isdigit ((unsigned char) *p) && p - text < 10)
        p++;
    if (p == text || isdigit ((unsigned char) *p))
        return -1;
    long n = strtol (text, NULL, 10);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp (p, units[i].unit) == 0)
            return n * units[i].seconds <= DURATION_MAX_S ? n * units[i].seconds : -1;
    return -1;
}

long
config_parse_duration (const char *text)
{
    return s_parse_duration (text);
}

static int
s_endpoint_ok (const char *value)
{
    const char *sep = strstr (value, "://");
    if (!sep || sep == value || !sep[3])
        return 0;
    for (const char *p = value; p < sep; p++)
        if (!isalnum ((unsigned char) *p) && *p != '+')
            return 0;
    for (const char *p = value; *p; p++)
        if (isspace ((unsigned char) *p))
            return 0;
    return 1;
}

// The rules registered for a section, NULL if none.
static config_rules_fn *
s_rules_of (const char *section)
{
    for (int i = 0; i < SECTIONS; i++)
        if (strcmp (section, s_sections[i]) == 0)
            return s_section_rules[i];
    return NULL;
}

// A value of a key whose rules belong to another library: checked by the
// rules registered for its section, stored as they give it back.
static int
s_set_ruled (s_load_t *load, config_t *cfg, const s_key_t *key, const char *value,
             const char *shown)
{
    config_rules_fn *rules = s_rules_of (key->section);
    char norm[PATH_MAX], why[256];
    if (!rules)
        return s_fail (load,
                       "value '%s' of '%s/%s' in '%s' cannot be checked: this program has no "
                       "rules for section '%s'",
                       shown, key->section, key->name, load->path, key->section);
    if (rules (key->name, value, norm, sizeof norm, why, sizeof why) != 0)
        return s_fail (load, "value '%s' of '%s/%s' in '%s' %s", shown, key->section, key->name,
                       load->path, why);
    long n;
    if (key->kind == KIND_RULED)
        return s_copy (load, cfg, key, norm);
    if (s_parse_long (norm, &n) != 0 || n < INT_MIN || n > INT_MAX)
        return s_fail (load, "value '%s' of '%s/%s' in '%s' is out of range", shown,
                       key->section, key->name, load->path);
    *s_int (cfg, key) = (int) n;
    return 0;
}

// The kinds of value that are numbers: checks value and stores it.
static int
s_set_number (s_load_t *load, config_t *cfg, const s_key_t *key, const char *value,
              const char *shown)
{
    const char *sec = key->section, *name = key->name, *file = load->path;

    switch (key->kind) {
    case KIND_INT: {
        long n;
        int rc = s_parse_long (value, &n);
        if (rc == -1)
            return s_fail (load,
                           "value '%s' of '%s/%s' in '%s' is not a number: expected an integer "
                           "from %ld to %ld",
                           shown, sec, name, file, key->min, key->max);
        if (rc == -2 || n < key->min || n > key->max)
            return s_fail (load,
                           "value '%s' of '%s/%s' in '%s' is out of range: expected an integer "
                           "from %ld to %ld",
                           shown, sec, name, file, key->min, key->max);
        *s_int (cfg, key) = (int) n;
        return 0;
    }

    case KIND_BOOL: {
        static const char *const truths[] = {"1", "true", "yes"};
        static const char *const lies[] = {"0", "false", "no"};
        for (int i = 0; i < 3; i++) {
            if (strcmp (value, truths[i]) == 0 || strcmp (value, lies[i]) == 0) {
                *s_int (cfg, key) = strcmp (value, truths[i]) == 0;
                return 0;
            }
        }
        return s_fail (load,
                       "value '%s' of '%s/%s' in '%s' is not a boolean: expected 0, 1, true, "
                       "false, yes or no",
                       shown, sec, name, file);
    }

    case KIND_STORE_FIELDS: {
        if (strcmp (value, "all") == 0 || strcmp (value, "none") == 0)
            return s_copy (load, cfg, key, value);
        long n;
        if (strncmp (value, "every", 5) == 0 && value[5] == ' ') {
            const char *digits = value + 5;
            while (*digits == ' ')
                digits++;
            if (s_parse_long (digits, &n) == 0 && n >= 1 && n <= INT_MAX) {
                snprintf (s_text (cfg, key), key->size, "every %ld", n);
                return 0;
            }
        }
        return s_fail (load,
                       "value '%s' of '%s/%s' in '%s' is not valid: expected all, none or "
                       "every N with N >= 1",
                       shown, sec, name, file);
    }

    case KIND_DURATION: {
        long seconds = s_parse_duration (value);
        if (seconds < 0)
            return s_fail (load,
                           "value '%s' of '%s/%s' in '%s' is not valid: expected off, or a whole "
                           "number of s, min, h or d such as 30d or 12h (at most 3650d)",
                           shown, sec, name, file);
        *s_int (cfg, key) = (int) seconds;
        return 0;
    }

    default:
        return -1;
    }
}

// Checks value against its key and stores it.
static int
s_set (s_load_t *load, config_t *cfg, const s_key_t *key, const char *value)
{
    char quoted[QUOTE_MAX + 1];
    const char *shown = s_quote (value, quoted, sizeof quoted);
    const char *sec = key->section, *name = key->name, *file = load->path;

    switch (key->kind) {
    case KIND_STRING:
        return s_copy (load, cfg, key, value);

    case KIND_OPEN:  // its words are s_set_open's (they need the key's name)
        return s_fail (load, "unknown key '%s/%s' in '%s'", sec, name, file);

    case KIND_LIST:
        if (strspn (value, ", ") == strlen (value))
            return s_fail (load,
                           "value of '%s/%s' in '%s' is empty: expected a comma-separated list "
                           "such as tif,tiff",
                           sec, name, file);
        return s_copy (load, cfg, key, value);

    case KIND_ENDPOINT:
        if (!s_endpoint_ok (value))
            return s_fail (load,
                           "value '%s' of '%s/%s' in '%s' is not an endpoint: expected "
                           "transport://address such as tcp://127.0.0.1:5551",
                           shown, sec, name, file);
        return s_copy (load, cfg, key, value);

    case KIND_PATH:
        if (!*value)
            return s_fail (load, "value of '%s/%s' in '%s' is empty: expected a path", sec, name,
                           file);
        // The rule of every path, below.
        // fall through
    case KIND_OPT_PATH:
        // The shell is not there to expand it; "<dir>/~/x" would surprise.
        if (value[0] == '~')
            return s_fail (load,
                           "value '%s' of '%s/%s' in '%s' starts with '~': write the path in "
                           "full, or relative to the file's directory",
                           shown, sec, name, file);
        return s_copy (load, cfg, key, value);

    case KIND_INT:
    case KIND_BOOL:
    case KIND_STORE_FIELDS:
    case KIND_DURATION:
        return s_set_number (load, cfg, key, value, shown);

    case KIND_CHOICE: {
        if (util_choice_index (key->choice, value) >= 0)
            return s_copy (load, cfg, key, value);
        char expected[256];
        util_join (key->choice, ", ", " or ", expected, sizeof expected);
        return s_fail (load, "value '%s' of '%s/%s' in '%s' is not one of its choices: expected %s",
                       shown, sec, name, file, expected);
    }

    case KIND_PROCESSOR:
        if (strcmp (value, "piv") == 0 || strcmp (value, "noop") == 0
            || (strncmp (value, "exec:", 5) == 0 && value[5]))
            return s_copy (load, cfg, key, value);
        return s_fail (load,
                       "value '%s' of '%s/%s' in '%s' is not one of its choices: expected piv, "
                       "noop or exec:PROGRAM",
                       shown, sec, name, file);

    case KIND_IO_SIZE: {
        int64_t bytes;
        if (util_parse_size (value, &bytes) == 0 && bytes >= (64 << 10) && bytes <= (64 << 20))
            return s_copy (load, cfg, key, value);
        return s_fail (load,
                       "value '%s' of '%s/%s' in '%s' is not valid: expected a size from 64K "
                       "to 64M, such as 4M",
                       shown, sec, name, file);
    }

    case KIND_SPACE: {
        int64_t bytes;
        double percent;
        if (util_parse_space (value, &bytes, &percent) == 0)
            return s_copy (load, cfg, key, value);
        return s_fail (load,
                       "value '%s' of '%s/%s' in '%s' is not valid: expected a size such as "
                       "50G or a percentage of the volume such as 10%%",
                       shown, sec, name, file);
    }

    case KIND_RULED:
    case KIND_RULED_INT:
        return s_set_ruled (load, cfg, key, value, shown);
    }
    return -1;
}

static const s_key_t *
s_key_find (const char *section, const char *name)
{
    const s_key_t *open = NULL;
    for (int i = 0; i < KEYS; i++)
        if (strcmp (s_keys[i].section, section) == 0 && strcmp (s_keys[i].name, name) == 0
            && s_keys[i].kind != KIND_OPEN)
            return &s_keys[i];
        else if (strcmp (s_keys[i].section, section) == 0 && s_keys[i].kind == KIND_OPEN)
            open = &s_keys[i];
    return open;
}

// Appends the segments of path to out (of length *used), dropping empty
// and "." segments so that "./x.db" under "/etc/pivfarm" is
// "/etc/pivfarm/x.db". ".." stays: the directory may be a symbolic link.
static int
s_append_segments (char *out, size_t size, size_t *used, const char *path)
{
    while (*path) {
        size_t len = strcspn (path, "/");
        if (len > 0 && !(len == 1 && path[0] == '.')) {
            if (*used + 1 + len >= size)
                return -1;
            out[(*used)++] = '/';
            memcpy (out + *used, path, len);
            *used += len;
            out[*used] = '\0';
        }
        path += len;
        while (*path == '/')
            path++;
    }
    return 0;
}

// "<dir>/<path>" without "." or empty segments; -1 if it does not fit.
static int
s_join (char *out, size_t size, const char *dir, const char *path)
{
    size_t used = 0;
    out[0] = '\0';
    if (s_append_segments (out, size, &used, dir) || s_append_segments (out, size, &used, path))
        return -1;
    if (used == 0)
        snprintf (out, size, "/");
    return 0;
}

// The absolute directory of the file; -1 with err.
static int
s_find_dir (s_load_t *load)
{
    char dir[PATH_MAX];
    const char *slash = strrchr (load->path, '/');
    size_t len = slash ? (size_t) (slash - load->path) : 0;
    if (len >= sizeof dir)
        return s_fail (load, "cannot read '%s': %s", load->path, strerror (ENAMETOOLONG));
    memcpy (dir, load->path, len);
    dir[len] = '\0';

    char cwd[PATH_MAX] = "";
    if (load->path[0] != '/' && !getcwd (cwd, sizeof cwd))
        return s_fail (load, "cannot find the directory of '%s': %s", load->path,
                       strerror (errno));
    if (s_join (load->dir, sizeof load->dir, cwd, dir))
        return s_fail (load, "cannot read '%s': %s", load->path, strerror (ENAMETOOLONG));
    return 0;
}

// Makes a relative path of the file absolute, under the file's directory.
static int
s_anchor (s_load_t *load, config_t *cfg, const s_key_t *key, const char *prefix)
{
    char *text = s_text (cfg, key);
    size_t skip = strlen (prefix);
    if (text[skip] == '/')
        return 0;
    char joined[PATH_MAX];
    size_t fixed = strlen (prefix);
    memcpy (joined, prefix, fixed + 1);
    if (s_join (joined + fixed, sizeof joined - fixed, load->dir, text + skip)
        || strlen (joined) >= key->size)
        return s_fail (load,
                       "value of '%s/%s' in '%s' is too long once made relative to '%s' (%zu "
                       "characters, at most %zu)",
                       key->section, key->name, load->path, load->dir,
                       fixed + strlen (load->dir) + 1 + strlen (text + skip), key->size - 1);
    memcpy (text, joined, strlen (joined) + 1);
    return 0;
}

// Reads the whole file into a malloc'd NUL-terminated buffer, its length
// into *len_p; NULL with err.
static char *
s_read (s_load_t *load, size_t *len_p)
{
    FILE *file = fopen (load->path, "rb");
    if (!file) {
        s_fail (load, "cannot read '%s': %s", load->path, strerror (errno));
        return NULL;
    }
    char *text = NULL;
    size_t used = 0, size = 0;
    int error = 0, too_large = 0;
    while (1) {
        if (size - used < 2) {
            if (size >= FILE_MAX) {
                too_large = 1;
                break;
            }
            size_t larger_size = size ? size * 2 : 4096;
            char *larger = realloc (text, larger_size);
            if (!larger) {
                error = ENOMEM;
                break;
            }
            text = larger;
            size = larger_size;
        }
        errno = 0;
        size_t n = fread (text + used, 1, size - 1 - used, file);
        used += n;
        if (n == 0) {
            if (ferror (file))
                error = errno ? errno : EIO;
            break;
        }
    }
    fclose (file);
    if (error || too_large) {
        if (too_large)
            s_fail (load, "cannot read '%s': larger than %d bytes, not a configuration file",
                    load->path, FILE_MAX);
        else
            s_fail (load, "cannot read '%s': %s", load->path, strerror (error));
        free (text);
        return NULL;
    }
    text[used] = '\0';
    *len_p = used;
    return text;
}

// What zconfig cannot be trusted with: a NUL (it stops reading there) and
// a line longer than it reads (it cuts it). 0, or -1 with err naming the
// line.
static int
s_check_lines (s_load_t *load, const char *text, size_t len)
{
    int lineno = 1;
    const char *line = text, *end = text + len;
    while (line < end) {
        const char *eol = memchr (line, '\n', (size_t) (end - line));
        size_t length = (size_t) ((eol ? eol : end) - line);
        if (memchr (line, '\0', length))
            return s_fail (load, "cannot parse '%s': line %d holds a NUL byte", load->path,
                           lineno);
        if (length > ZPL_LINE_MAX)
            return s_fail (load,
                           "cannot parse '%s': line %d is longer than %d characters (%zu)",
                           load->path, lineno, ZPL_LINE_MAX, length);
        if (!eol)
            break;
        line = eol + 1;
        lineno++;
    }
    return 0;
}

// zconfig reports a syntax error only by printing it to stdout (with
// zclock_log), "YY-MM-DD HH:MM:SS E (zconfig): (LINE) REASON", and returns
// NULL. Printing is not a library's to do and would corrupt the output of
// a program writing JSON there, so stdout is pointed at an in-memory file
// for the parse and the reason read back for the message. This touches fd 1
// of the process: it is meant for start-up, before other threads write to
// stdout.
static zconfig_t *
s_parse (const char *text, char *reason, size_t size)
{
    snprintf (reason, size, "%s", "");
    fflush (stdout);
    int saved = dup (STDOUT_FILENO);
    int capture = saved >= 0 ? memfd_create ("pivfarm-config", MFD_CLOEXEC) : -1;
    if (capture >= 0 && dup2 (capture, STDOUT_FILENO) < 0) {
        close (capture);
        capture = -1;
    }
    zconfig_t *root = zconfig_str_load (text);
    if (capture >= 0) {
        fflush (stdout);
        dup2 (saved, STDOUT_FILENO);
        char said[2 * ZPL_LINE_MAX];
        ssize_t n = pread (capture, said, sizeof said - 1, 0);
        said[n > 0 ? n : 0] = '\0';
        const char *tag = strstr (said, "(zconfig): (");
        if (tag) {
            snprintf (reason, size, "%s", tag + strlen ("(zconfig): ("));
            reason[strcspn (reason, "\n")] = '\0';
        }
        close (capture);
    }
    if (saved >= 0)
        close (saved);
    return root;
}

// The message of a syntax error: zconfig's reason, with a hint where its
// words mislead (a tab reads as "invalid syntax").
static int
s_parse_error (s_load_t *load, const char *text, const char *reason)
{
    int lineno;
    int skip = 0;
    if (sscanf (reason, "%d) %n", &lineno, &skip) != 1 || skip == 0)
        return s_fail (load, "cannot parse '%s': not valid ZPL", load->path);
    const char *line = text;
    for (int i = 1; i < lineno && strchr (line, '\n'); i++)
        line = strchr (line, '\n') + 1;
    size_t indent = strspn (line, " \t");
    if (memchr (line, '\t', indent))
        return s_fail (load,
                       "cannot parse '%s': line %d is indented with a tab (ZPL indents by "
                       "4 spaces)",
                       load->path, lineno);
    return s_fail (load, "cannot parse '%s': line %d is not valid ZPL (%s)", load->path, lineno,
                   reason + skip);
}

// The word of 'name' in an open key's text ("eps=0.2 threshold=3"): where
// it starts, or NULL.
static char *
s_open_word (char *text, const char *name)
{
    size_t n = strlen (name);
    for (char *p = text; p && *p; p = strchr (p, ' ') ? strchr (p, ' ') + 1 : NULL)
        if (strncmp (p, name, n) == 0 && p[n] == '=')
            return p;
    return NULL;
}

// A key of an open section ([piv]'s eps, threshold, ...): checked by the
// section's rules, then added to the key's text as "name=value" (in place
// of an earlier one when 'again' allows it, else refused as given twice).
static int
s_set_open (s_load_t *load, config_t *cfg, const s_key_t *key, const char *name,
            const char *value, int again)
{
    config_rules_fn *rules = s_rules_of (key->section);
    char quoted[QUOTE_MAX + 1], norm[PATH_MAX], why[600];
    const char *shown = s_quote (value, quoted, sizeof quoted);
    if (!rules)
        return s_fail (load, "unknown key '%s/%s' in '%s'", key->section, name, load->path);
    if (rules (name, value, norm, sizeof norm, why, sizeof why) != 0) {
        if (strncmp (why, "is not a setting", 16) == 0)
            return s_fail (load, "unknown key '%s/%s' in '%s': %s", key->section, name,
                           load->path, why + 3);
        return s_fail (load, "value '%s' of '%s/%s' in '%s' %s", shown, key->section, name,
                       load->path, why);
    }
    char *text = s_text (cfg, key), *old = s_open_word (text, name);
    if (old && !again)
        return s_fail (load, "key '%s/%s' is given twice in '%s'", key->section, name,
                       load->path);
    if (old) {
        // Its word out, the words after it moved up.
        char *next = strchr (old, ' ');
        if (next)
            memmove (old, next + 1, strlen (next + 1) + 1);
        else
            *(old > text ? old - 1 : old) = '\0';
    }
    size_t used = strlen (text);
    if (used + 1 + strlen (name) + 1 + strlen (norm) >= key->size)
        return s_fail (load, "the keys of section '%s' in '%s' are too long together (at most "
                             "%zu characters as key=value words)",
                       key->section, load->path, key->size - 1);
    snprintf (text + used, key->size - used, "%s%s=%s", used ? " " : "", name, norm);
    return 0;
}

// Walks sections and keys; given[] marks the keys the file sets.
static int
s_walk (s_load_t *load, config_t *cfg, zconfig_t *root, int *given)
{
    for (zconfig_t *section = zconfig_child (root); section; section = zconfig_next (section)) {
        const char *sname = zconfig_name (section);
        int known = 0;
        for (int i = 0; i < SECTIONS; i++)
            known |= strcmp (sname, s_sections[i]) == 0;
        if (!known)
            return s_fail (load,
                           "unknown section '%s' in '%s': expected broker, watcher, pairing, "
                           "agent, piv, calibration, security, client, storage or log",
                           sname, load->path);
        const char *svalue = zconfig_value (section);
        if (svalue && *svalue)
            return s_fail (load,
                           "section '%s' in '%s' has a value: its keys go on the lines below, "
                           "indented by 4 spaces",
                           sname, load->path);

        for (zconfig_t *item = zconfig_child (section); item; item = zconfig_next (item)) {
            const s_key_t *key = s_key_find (sname, zconfig_name (item));
            if (!key)
                return s_fail (load, "unknown key '%s/%s' in '%s'", sname, zconfig_name (item),
                               load->path);
            zconfig_t *below = zconfig_child (item);
            if (below)
                return s_fail (load, "unknown key '%s/%s/%s' in '%s'", sname,
                               zconfig_name (item), zconfig_name (below), load->path);
            const char *value = zconfig_value (item);
            if (key->kind == KIND_OPEN) {
                if (s_set_open (load, cfg, key, zconfig_name (item), value ? value : "", 0))
                    return -1;
                continue;
            }
            if (given[key - s_keys]++)
                return s_fail (load, "key '%s/%s' is given twice in '%s'", sname, key->name,
                               load->path);
            if (s_set (load, cfg, key, value ? value : ""))
                return -1;
        }
    }
    return 0;
}

// Anchors security/<role>_cert when given.
static int
s_anchor_cert (s_load_t *load, config_t *cfg, const char *role)
{
    char name[32];
    snprintf (name, sizeof name, "%s_cert", role);
    const s_key_t *key = s_key_find ("security", name);
    return *s_text (cfg, key) ? s_anchor (load, cfg, key, "") : 0;
}

// This program's certificate: its role's key when the file gives it, else
// client_cert (the one key of every program before roles had their own).
static void
s_choose_cert (config_t *cfg)
{
    char name[32];
    snprintf (name, sizeof name, "%s_cert", s_role);
    const s_key_t *key = *s_role ? s_key_find ("security", name) : NULL;
    const char *path = key && *s_text (cfg, key) ? s_text (cfg, key) : cfg->security.client_cert;
    snprintf (cfg->security.cert, sizeof cfg->security.cert, "%s", path);
    snprintf (cfg->security.cert_key, sizeof cfg->security.cert_key, "security/%s",
              key && *s_text (cfg, key) ? name : "client_cert");
    snprintf (cfg->security.role, sizeof cfg->security.role, "%s", s_role);
}

// Rules between keys, and what follows from the keys not given.
static int
s_complete (s_load_t *load, config_t *cfg, const int *given)
{
    // A client's endpoint not given is the broker's own (one host, or a
    // file for the broker alone); config_connect refuses a bind address.
    for (int i = 0; i < CONNECTS; i++) {
        const s_key_t *key = s_key_find (s_connects[i].section, s_connects[i].name);
        if (!given[key - s_keys])
            memcpy (s_text (cfg, key), s_text (cfg, s_key_find ("broker", s_connects[i].bind)),
                    key->size);
    }

    // The same check as pairing_new, here to name the file.
    const pairing_rule_info_t *rule = pairing_rule_find (cfg->pairing.rule);
    if (rule && rule->suffixes
        && (!*cfg->pairing.a_suffix || !*cfg->pairing.b_suffix
            || strcmp (cfg->pairing.a_suffix, cfg->pairing.b_suffix) == 0))
        return s_fail (load,
                       "values '%s' and '%s' of 'pairing/a_suffix' and 'pairing/b_suffix' in "
                       "'%s' are not valid: rule %s needs two different, non-empty suffixes",
                       cfg->pairing.a_suffix, cfg->pairing.b_suffix, load->path, rule->name);

    char folders[2][NAME_MAX + 1], why[512];
    if (pairing_rule_cameras (cfg->pairing.cameras, folders, why, sizeof why) != 0)
        return s_fail (load, "value of 'pairing/cameras' in '%s' is not valid: %s", load->path,
                       why);

    // A scale without the time between frames gives no velocity, and the
    // other way round.
    if (!*cfg->calibration.scale != !*cfg->calibration.dt)
        return s_fail (load,
                       "'calibration/scale' and 'calibration/dt' in '%s' go together: give both "
                       "or neither",
                       load->path);

    // Replacing a prefix by nothing, or nothing by a prefix, is a mapping
    // half written.
    if (!*cfg->agent.path_from != !*cfg->agent.path_to)
        return s_fail (load,
                       "'agent/path_from' and 'agent/path_to' in '%s' go together: give both "
                       "or neither",
                       load->path);

    if (s_anchor (load, cfg, s_key_find ("broker", "store"), "")
        || s_anchor (load, cfg, s_key_find ("watcher", "root"), "")
        || s_anchor (load, cfg, s_key_find ("agent", "results"), "")
        || s_anchor (load, cfg, s_key_find ("security", "broker_cert"), "")
        || s_anchor (load, cfg, s_key_find ("security", "client_cert"), "")
        || s_anchor (load, cfg, s_key_find ("security", "clients"), "")
        || s_anchor (load, cfg, s_key_find ("security", "operators"), "")
        || s_anchor_cert (load, cfg, "watcher") || s_anchor_cert (load, cfg, "agent")
        || s_anchor_cert (load, cfg, "page") || s_anchor_cert (load, cfg, "pivctl")
        || (*cfg->piv.mask && s_anchor (load, cfg, s_key_find ("piv", "mask"), "")))
        return -1;
    s_choose_cert (cfg);
    // A TASK's settings are split at spaces: the directory must have none.
    if (strchr (cfg->piv.mask, ' '))
        return s_fail (load, "value of 'piv/mask' in '%s' holds a space once made relative to "
                             "'%s': write the path in full, without spaces",
                       load->path, load->dir);
    // Free-space thresholds of one kind compare: the warning comes first.
    int64_t warn_b, crit_b;
    double warn_p, crit_p;
    util_parse_space (cfg->storage.warn_free, &warn_b, &warn_p);
    util_parse_space (cfg->storage.critical_free, &crit_b, &crit_p);
    if ((warn_p >= 0 && crit_p >= 0 && crit_p > warn_p)
        || (warn_b >= 0 && crit_b >= 0 && crit_b > warn_b))
        return s_fail (load,
                       "values '%s' and '%s' of 'storage/warn_free' and 'storage/critical_free' "
                       "in '%s' are not valid: the critical threshold is below the warning one",
                       cfg->storage.warn_free, cfg->storage.critical_free, load->path);
    if ((*cfg->storage.archive_dir
         && s_anchor (load, cfg, s_key_find ("storage", "archive_dir"), ""))
        || (strchr (cfg->storage.mount_helper, '/')
            && s_anchor (load, cfg, s_key_find ("storage", "mount_helper"), "")))
        return -1;
    // A program named with a '/' is a path; a bare name is looked up in PATH.
    if (strncmp (cfg->agent.processor, "exec:", 5) == 0 && strchr (cfg->agent.processor, '/')
        && s_anchor (load, cfg, s_key_find ("agent", "processor"), "exec:"))
        return -1;
    return 0;
}

void
config_role (const char *role)
{
    snprintf (s_role, sizeof s_role, "%s", role ? role : "");
}

const char *
config_connect (const config_t *cfg, const char *key, char *err, size_t errlen)
{
    for (int i = 0; i < CONNECTS; i++) {
        char name[64];
        snprintf (name, sizeof name, "%s/%s", s_connects[i].section, s_connects[i].name);
        if (strcmp (name, key) != 0)
            continue;
        const s_key_t *connect = s_key_find (s_connects[i].section, s_connects[i].name);
        const char *bind = s_text ((config_t *) cfg, s_key_find ("broker", s_connects[i].bind));
        const char *value = s_text ((config_t *) cfg, connect);
        const char *star = strstr (value, "://*");
        if (!star)
            return value;
        // The value with HOST in place of the '*', as the key to write.
        char wanted[CONFIG_STRING + 8];
        snprintf (wanted, sizeof wanted, "%.*s://HOST%s", (int) (star - value), value, star + 4);
        if (strcmp (value, bind) == 0)
            snprintf (err, errlen,
                      "broker/%s is a bind address (%s), not one to connect to; set %s = %s "
                      "(the broker's host name or address)",
                      s_connects[i].bind, bind, key, wanted);
        else
            snprintf (err, errlen,
                      "%s is a bind address (%s), not one to connect to; set %s = %s (the "
                      "broker's host name or address)",
                      key, value, key, wanted);
        return NULL;
    }
    snprintf (err, errlen, "'%s' is no key of an endpoint to connect to", key);
    return NULL;
}

void
config_rules (const char *section, config_rules_fn *rules)
{
    for (int i = 0; i < SECTIONS; i++)
        if (strcmp (section, s_sections[i]) == 0)
            s_section_rules[i] = rules;
}

void
config_init (config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    snprintf (cfg->broker.ingest, sizeof cfg->broker.ingest, "tcp://127.0.0.1:5550");
    snprintf (cfg->broker.work, sizeof cfg->broker.work, "tcp://127.0.0.1:5551");
    snprintf (cfg->broker.control, sizeof cfg->broker.control, "tcp://127.0.0.1:5552");
    snprintf (cfg->broker.publish, sizeof cfg->broker.publish, "tcp://127.0.0.1:5553");
    snprintf (cfg->broker.store, sizeof cfg->broker.store, "./pivfarm.db");
    snprintf (cfg->broker.durability, sizeof cfg->broker.durability, "full");
    snprintf (cfg->log.level, sizeof cfg->log.level, "notice");
    cfg->broker.commit_ms = 2;
    snprintf (cfg->broker.backup_before_migrate, sizeof cfg->broker.backup_before_migrate, "on");
    cfg->broker.heartbeat_ms = 1000;
    cfg->broker.liveness = 3;
    cfg->broker.max_attempts = 3;
    snprintf (cfg->broker.store_fields, sizeof cfg->broker.store_fields, "all");
    cfg->broker.task_deadline_ms = 0;
    cfg->broker.deadline_floor_ms = 30000;
    cfg->broker.forget_agents_after = 30 * 86400;
    cfg->broker.max_agents = 1000;
    cfg->broker.stats_ms = 1000;
    cfg->broker.stats_uncertainty = 1;
    cfg->broker.stats_save_kb_s = 1024;
    cfg->broker.stats_save_results = 1000;
    snprintf (cfg->calibration.y_axis, sizeof cfg->calibration.y_axis, "up");

    snprintf (cfg->watcher.root, sizeof cfg->watcher.root, "./data");
    snprintf (cfg->watcher.mode, sizeof cfg->watcher.mode, "inotify");
    cfg->watcher.poll_ms = 1000;
    // Temporary names of cameras (x.tif.tmp-AB12CD), Windows and CIFS (~$x,
    // Thumbs.db, desktop.ini, *.TMP), rsync (.x.tif.AbC123, hidden), browsers
    // and copiers (*.part, *.partial, *.crdownload, *.filepart): each is
    // renamed or deleted once written, and would be reported, paired with
    // nothing and archived after it vanished (doc/storage.md).
    snprintf (cfg->watcher.ignore, sizeof cfg->watcher.ignore,
              ".*,*~,~$*,*.tmp,*.TMP,*.tmp-*,*.part,*.partial,*.crdownload,*.filepart,"
              "Thumbs.db,desktop.ini");
    cfg->watcher.resend_ms = 500;
    cfg->watcher.max_pending = 10000;
    cfg->watcher.settle_ms = 500;

    snprintf (cfg->pairing.rule, sizeof cfg->pairing.rule, "%s",
              pairing_rule_get (PAIRING_AB)->name);
    snprintf (cfg->pairing.a_suffix, sizeof cfg->pairing.a_suffix, "_a");
    snprintf (cfg->pairing.b_suffix, sizeof cfg->pairing.b_suffix, "_b");
    cfg->pairing.ignore_case = 1;
    snprintf (cfg->pairing.extensions, sizeof cfg->pairing.extensions, "tif,tiff");
    cfg->pairing.max_waiting = 100000;
    snprintf (cfg->pairing.cameras, sizeof cfg->pairing.cameras, "cam1,cam2");

    snprintf (cfg->agent.broker, sizeof cfg->agent.broker, "%s", cfg->broker.work);
    snprintf (cfg->watcher.broker, sizeof cfg->watcher.broker, "%s", cfg->broker.ingest);
    snprintf (cfg->client.control, sizeof cfg->client.control, "%s", cfg->broker.control);
    snprintf (cfg->client.publish, sizeof cfg->client.publish, "%s", cfg->broker.publish);
    cfg->agent.threads = 0;
    cfg->agent.latency = 1;
    snprintf (cfg->agent.results, sizeof cfg->agent.results, "./results");
    snprintf (cfg->agent.processor, sizeof cfg->agent.processor, "piv");
    cfg->agent.min_free_mb = 64;
    cfg->agent.drain_s = 60;

    snprintf (cfg->piv.passes, sizeof cfg->piv.passes, "64,32,16");
    cfg->piv.overlap = 50;
    cfg->piv.iterations = 3;
    snprintf (cfg->piv.deform, sizeof cfg->piv.deform, "bspline5");
    snprintf (cfg->piv.smooth, sizeof cfg->piv.smooth, "final");
    snprintf (cfg->piv.smooth_s, sizeof cfg->piv.smooth_s, "0");
    cfg->piv.max_pixels = 64 * 1024 * 1024;
    cfg->piv.max_file_mb = 1024;
    cfg->piv.max_ratio = 250;  // PIV_MAX_RATIO_DEFAULT (piv/budget.h)

    snprintf (cfg->security.curve, sizeof cfg->security.curve, "off");
    snprintf (cfg->agent.result_format, sizeof cfg->agent.result_format, "txt");
    snprintf (cfg->security.broker_cert, sizeof cfg->security.broker_cert, "./certs/broker.cert");
    snprintf (cfg->security.client_cert, sizeof cfg->security.client_cert, "./certs/client.cert");
    snprintf (cfg->security.clients, sizeof cfg->security.clients, "./certs/clients");
    snprintf (cfg->security.operators, sizeof cfg->security.operators,
              "./certs/clients/operators");
    s_choose_cert (cfg);

    snprintf (cfg->storage.io_size, sizeof cfg->storage.io_size, "4M");
    cfg->storage.guard_ms = 1000;
    snprintf (cfg->storage.warn_free, sizeof cfg->storage.warn_free, "10%%");
    snprintf (cfg->storage.critical_free, sizeof cfg->storage.critical_free, "2%%");
    cfg->storage.headroom_s = 600;
    cfg->storage.archive_idle_s = 600;
}

int
config_set (config_t *cfg, const char *section, const char *name, const char *value,
            const char *origin, char *err, size_t errlen)
{
    s_load_t load = {.path = origin, .err = err, .errlen = errlen};
    const s_key_t *key = s_key_find (section, name);
    if (!key)
        return s_fail (&load, "unknown key '%s/%s' in '%s'", section, name, origin);
    if (key->kind == KIND_OPEN)
        return s_set_open (&load, cfg, key, name, value, 1);
    return s_set (&load, cfg, key, value);
}

int
config_load (config_t *cfg, const char *path, char *err, size_t errlen)
{
    config_init (cfg);
    if (err && errlen)
        err[0] = '\0';
    s_load_t load = {.path = path, .err = err, .errlen = errlen};
    int given[KEYS] = {0};
    char reason[ZPL_LINE_MAX];
    char *text = NULL;
    size_t len = 0;
    zconfig_t *root = NULL;
    int rc = -1;

    if (s_find_dir (&load) || !(text = s_read (&load, &len)) || s_check_lines (&load, text, len))
        goto done;
    root = s_parse (text, reason, sizeof reason);
    if (!root) {
        s_parse_error (&load, text, reason);
        goto done;
    }
    if (s_walk (&load, cfg, root, given) || s_complete (&load, cfg, given))
        goto done;
    rc = 0;

done:
    // A refused file leaves nothing of itself behind.
    if (rc)
        config_init (cfg);
    zconfig_destroy (&root);
    free (text);
    return rc;
}
