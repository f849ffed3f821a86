// json.c — JSON documents read through SQLite's JSON functions on a private
// in-memory connection. json_parse walks the document once with json_tree
// into a table of (path, type, value) sorted by path; lookups are then a
// binary search, so that reading every field of a reply of 10000 pairs
// costs one parse, not one per field (json_extract parses the whole text
// at every call). Paths are kept in a canonical form of our own, because
// SQLite versions differ in which keys json_tree's fullkey quotes.

#include "store/json.h"

#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_PATH_MAX 1024  // bytes of a path, NUL included
#define JSON_DEPTH_MAX 2000 // nesting, SQLite's own limit

typedef struct {
    size_t key;       // offset of its path in 'chars'
    json_type_t type; // its type
    int64_t integer;  // JSON_INTEGER, JSON_TRUE (1), JSON_FALSE (0)
    double real;      // JSON_INTEGER and JSON_REAL, as a double
    size_t string;    // JSON_STRING: offset of the unescaped text in 'chars'
    int length;       // JSON_ARRAY: elements
} s_node_t;

struct _json_t {
    sqlite3 *db;        // in-memory connection, for json_text
    sqlite3_stmt *text; // SELECT json_quote (json_extract (?1, ?2))
    char *source;       // a copy of the parsed text
    s_node_t *nodes;    // every value of the document, sorted by path
    size_t count;       // entries in nodes
    char *chars;        // paths and strings, NUL-terminated, one after the other
    size_t chars_used;  // bytes used in chars
    size_t chars_size;  // bytes allocated
};

static void s_err (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

// Appends 'text' (len bytes) to chars; its offset, or (size_t) -1 on no memory.
static size_t
s_store (json_t *self, const char *text, size_t len)
{
    if (self->chars_used + len + 1 > self->chars_size) {
        size_t size = self->chars_size ? self->chars_size : 4096;
        while (size < self->chars_used + len + 1)
            size *= 2;
        char *chars = realloc (self->chars, size);
        if (!chars)
            return (size_t)-1;
        self->chars = chars;
        self->chars_size = size;
    }
    size_t offset = self->chars_used;
    memcpy (self->chars + offset, text, len);
    self->chars[offset + len] = '\0';
    self->chars_used += len + 1;
    return offset;
}

static json_type_t
s_type_of (const char *name, int atom_type)
{
    static const struct {
        const char *name; // json_tree's type column
        json_type_t type; // ours
    } types[] = {{"null", JSON_NULL},   {"true", JSON_TRUE},      {"false", JSON_FALSE},
                 {"text", JSON_STRING}, {"array", JSON_ARRAY},    {"object", JSON_OBJECT},
                 {"real", JSON_REAL},   {"integer", JSON_INTEGER}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp (name, types[i].name) == 0) {
            // An integer beyond int64 comes back from SQLite as a real.
            if (types[i].type == JSON_INTEGER && atom_type != SQLITE_INTEGER)
                return JSON_REAL;
            return types[i].type;
        }
    return JSON_MISSING;
}

// 1 if 'key' (len bytes) is written bare in a path: [A-Za-z_][A-Za-z0-9_]*.
static int
s_bare (const char *key, size_t len)
{
    if (!len || (key[0] >= '0' && key[0] <= '9'))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((key[i] >= 'a' && key[i] <= 'z') || (key[i] >= 'A' && key[i] <= 'Z') ||
              (key[i] >= '0' && key[i] <= '9') || key[i] == '_'))
            return 0;
    return 1;
}

// Appends one step to a path being built: ".key", ".\"key\"" or "[index]".
// 0, or -1 when the path would not fit.
static int
s_step (char *path, size_t size, size_t *len, const char *key, size_t keylen, long long index)
{
    int n;
    if (!key)
        n = snprintf (path + *len, size - *len, "[%lld]", index);
    else if (s_bare (key, keylen))
        n = snprintf (path + *len, size - *len, ".%.*s", (int)keylen, key);
    else
        n = snprintf (path + *len, size - *len, ".\"%.*s\"", (int)keylen, key);
    if (n < 0 || (size_t)n >= size - *len)
        return -1;
    *len += (size_t)n;
    return 0;
}

// Rewrites a caller's path into the canonical form of the nodes (SQLite
// versions differ in which keys json_tree quotes, so the reader quotes by
// its own rule). 0, or -1 for a path that is not one.
static int
s_canonical (const char *in, char *out, size_t size)
{
    size_t len = 0;
    if (*in++ != '$' || size < 2)
        return -1;
    out[len++] = '$';
    out[len] = '\0';
    while (*in) {
        if (in[0] == '.' && in[1] == '"') {
            const char *end = strchr (in + 2, '"');
            if (!end || s_step (out, size, &len, in + 2, (size_t)(end - in - 2), 0) != 0)
                return -1;
            in = end + 1;
        }
        else if (in[0] == '.') {
            size_t n = strcspn (in + 1, ".[");
            if (!n || s_step (out, size, &len, in + 1, n, 0) != 0)
                return -1;
            in += 1 + n;
        }
        else if (in[0] == '[') {
            char *end;
            long long index = strtoll (in + 1, &end, 10);
            if (end == in + 1 || *end != ']' || index < 0 || in[1] == '+' || in[1] == ' ' ||
                s_step (out, size, &len, NULL, 0, index) != 0)
                return -1;
            in = end + 1;
        }
        else
            return -1;
    }
    return 0;
}

// The ancestors of the row being loaded: json_tree walks the document
// depth first, parents before their children.
typedef struct {
    int64_t id; // json_tree's id
    size_t key; // its path, offset in chars
} s_parent_t;

// Loads one row of the json_tree walk (id, parent, key, type, atom, array
// length). 0, or -1 on no memory or a path too deep.
static int
s_load_row (json_t *self, sqlite3_stmt *stmt, s_parent_t *stack, int *depth)
{
    if (self->count % 1024 == 0) {
        s_node_t *nodes = realloc (self->nodes, (self->count + 1024) * sizeof (s_node_t));
        if (!nodes)
            return -1;
        self->nodes = nodes;
    }
    char path[JSON_PATH_MAX] = "$";
    size_t len = 1;
    if (sqlite3_column_type (stmt, 1) != SQLITE_NULL) {
        int64_t parent = sqlite3_column_int64 (stmt, 1);
        while (*depth > 0 && stack[*depth - 1].id != parent)
            (*depth)--;
        if (*depth == 0)
            return -1;
        const char *base = self->chars + stack[*depth - 1].key;
        len = strlen (base);
        memcpy (path, base, len + 1);
        const char *key = (const char *)sqlite3_column_text (stmt, 2);
        int is_index = sqlite3_column_type (stmt, 2) == SQLITE_INTEGER;
        if (s_step (path, sizeof path, &len,
                    is_index ? NULL
                    : key    ? key
                             : "",
                    key ? strlen (key) : 0, sqlite3_column_int64 (stmt, 2)) != 0)
            return -1;
    }
    const char *type = (const char *)sqlite3_column_text (stmt, 3);
    s_node_t *node = &self->nodes[self->count];
    memset (node, 0, sizeof *node);
    node->type = s_type_of (type ? type : "", sqlite3_column_type (stmt, 4));
    node->key = s_store (self, path, len);
    if (node->key == (size_t)-1)
        return -1;
    switch (node->type) {
    case JSON_TRUE:
    case JSON_FALSE:
    case JSON_INTEGER:
        node->integer = sqlite3_column_int64 (stmt, 4);
        node->real = (double)node->integer;
        break;
    case JSON_REAL:
        node->real = sqlite3_column_double (stmt, 4);
        break;
    case JSON_STRING: {
        const char *text = (const char *)sqlite3_column_text (stmt, 4);
        node->string = s_store (self, text ? text : "", text ? strlen (text) : 0);
        if (node->string == (size_t)-1)
            return -1;
        break;
    }
    case JSON_ARRAY:
        node->length = sqlite3_column_int (stmt, 5);
        break;
    default:
        break;
    }
    if (node->type == JSON_ARRAY || node->type == JSON_OBJECT) {
        if (*depth == JSON_DEPTH_MAX)
            return -1;
        stack[(*depth)++] = (s_parent_t){sqlite3_column_int64 (stmt, 0), node->key};
    }
    self->count++;
    return 0;
}

static int
s_by_path (const void *a, const void *b, void *chars)
{
    return strcmp ((const char *)chars + ((const s_node_t *)a)->key,
                   (const char *)chars + ((const s_node_t *)b)->key);
}

// Walks the document into nodes, sorted by path. 0, or -1 with err.
static int
s_load (json_t *self, char *err, size_t errlen)
{
    static const char *sql = "SELECT id, parent, key, type, atom,"
                             " CASE type WHEN 'array' THEN json_array_length (value) END"
                             " FROM json_tree (?1)";
    s_parent_t stack[JSON_DEPTH_MAX];
    int depth = 0;
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db, sql, -1, &stmt, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text (stmt, 1, self->source, -1, SQLITE_STATIC);
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        rc = sqlite3_step (stmt);
        if (rc == SQLITE_ROW && s_load_row (self, stmt, stack, &depth) != 0) {
            sqlite3_finalize (stmt);
            s_err (err, errlen,
                   "cannot hold a JSON document of %zu bytes (no memory, or nested deeper than "
                   "%d or paths longer than %d)",
                   strlen (self->source), JSON_DEPTH_MAX, JSON_PATH_MAX);
            return -1;
        }
    }
    if (rc != SQLITE_DONE)
        s_err (err, errlen, "cannot read the JSON document: %s", sqlite3_errmsg (self->db));
    sqlite3_finalize (stmt);
    if (rc != SQLITE_DONE)
        return -1;
    qsort_r (self->nodes, self->count, sizeof (s_node_t), s_by_path, self->chars);
    return 0;
}

// 1 valid, 0 not, -1 with err on an SQLite failure.
static int
s_valid (json_t *self, char *err, size_t errlen)
{
    sqlite3_stmt *stmt = NULL;
    int valid = -1;
    if (sqlite3_prepare_v2 (self->db, "SELECT json_valid (?1)", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_bind_text (stmt, 1, self->source, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step (stmt) == SQLITE_ROW)
        valid = sqlite3_column_int (stmt, 0) != 0;
    else
        s_err (err, errlen, "cannot check the JSON document: %s", sqlite3_errmsg (self->db));
    sqlite3_finalize (stmt);
    return valid;
}

json_t *
json_parse (const char *text, char *err, size_t errlen)
{
    if (!text) {
        s_err (err, errlen, "no JSON text");
        return NULL;
    }
    json_t *self = calloc (1, sizeof *self);
    if (!self || !(self->source = strdup (text))) {
        s_err (err, errlen, "no memory for a JSON document of %zu bytes", strlen (text));
        goto fail;
    }
    if (sqlite3_open_v2 (":memory:", &self->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                         NULL) != SQLITE_OK) {
        s_err (err, errlen, "cannot open an in-memory SQLite database: %s",
               self->db ? sqlite3_errmsg (self->db) : "no memory");
        goto fail;
    }
    int valid = s_valid (self, err, errlen);
    if (valid == 0) {
        size_t len = strlen (text);
        s_err (err, errlen, "not valid JSON (%zu bytes%s%.40s%s)", len, len ? ", starting '" : "",
               text,
               len > 40 ? "...'"
               : len    ? "'"
                        : "");
    }
    if (valid != 1 || s_load (self, err, errlen) != 0)
        goto fail;
    return self;
fail:
    json_destroy (&self);
    return NULL;
}

void
json_destroy (json_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    json_t *self = *self_p;
    sqlite3_finalize (self->text);
    sqlite3_close (self->db);
    free (self->source);
    free (self->nodes);
    free (self->chars);
    free (self);
    *self_p = NULL;
}

static int
s_compare (const void *key, const void *node)
{
    const char *const *context = key; // [0] the path, [1] chars
    return strcmp (context[0], context[1] + ((const s_node_t *)node)->key);
}

// The node at the formatted path, or NULL.
static const s_node_t *
s_find (json_t *self, const char *fmt, va_list args)
{
    char given[JSON_PATH_MAX], path[JSON_PATH_MAX];
    int len = vsnprintf (given, sizeof given, fmt, args);
    if (!self || len < 0 || (size_t)len >= sizeof given ||
        s_canonical (given, path, sizeof path) != 0)
        return NULL;
    const char *context[2] = {path, self->chars};
    return bsearch (context, self->nodes, self->count, sizeof (s_node_t), s_compare);
}

#define S_FIND(node)                                                                               \
    va_list args;                                                                                  \
    va_start (args, fmt);                                                                          \
    const s_node_t *node = s_find (self, fmt, args);                                               \
    va_end (args)

json_type_t
json_type_at (json_t *self, const char *fmt, ...)
{
    S_FIND (node);
    return node ? node->type : JSON_MISSING;
}

int
json_is_number (json_t *self, const char *fmt, ...)
{
    S_FIND (node);
    return node && (node->type == JSON_INTEGER || node->type == JSON_REAL);
}

double
json_number (json_t *self, double dflt, const char *fmt, ...)
{
    S_FIND (node);
    return node && (node->type == JSON_INTEGER || node->type == JSON_REAL) ? node->real : dflt;
}

int64_t
json_int (json_t *self, int64_t dflt, const char *fmt, ...)
{
    S_FIND (node);
    if (!node)
        return dflt;
    if (node->type == JSON_INTEGER)
        return node->integer;
    if (node->type != JSON_REAL || node->real != node->real)
        return dflt;
    if (node->real >= 9223372036854775807.0)
        return INT64_MAX;
    if (node->real <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)node->real;
}

int
json_bool (json_t *self, int dflt, const char *fmt, ...)
{
    S_FIND (node);
    return !node ? dflt : node->type == JSON_TRUE ? 1 : node->type == JSON_FALSE ? 0 : dflt;
}

const char *
json_string (json_t *self, const char *fmt, ...)
{
    S_FIND (node);
    return node && node->type == JSON_STRING ? self->chars + node->string : NULL;
}

int
json_length (json_t *self, const char *fmt, ...)
{
    S_FIND (node);
    return node && node->type == JSON_ARRAY ? node->length : -1;
}

char *
json_text (json_t *self, const char *fmt, ...)
{
    S_FIND (node);
    if (!node)
        return NULL;
    if (!self->text && sqlite3_prepare_v2 (self->db, "SELECT json_quote (json_extract (?1, ?2))",
                                           -1, &self->text, NULL) != SQLITE_OK)
        return NULL;
    char *text = NULL;
    if (sqlite3_bind_text (self->text, 1, self->source, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_bind_text (self->text, 2, self->chars + node->key, -1, SQLITE_STATIC) ==
            SQLITE_OK &&
        sqlite3_step (self->text) == SQLITE_ROW) {
        const char *value = (const char *)sqlite3_column_text (self->text, 0);
        text = value ? strdup (value) : NULL;
    }
    sqlite3_reset (self->text);
    sqlite3_clear_bindings (self->text);
    return text;
}
