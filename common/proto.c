// proto.c — the pivfarm wire codec: proto_msg_t to ZeroMQ multipart messages
// and back, refusing malformed input with one line that says what and where.
// See proto.h and doc/protocol.md.

#include "common/proto.h"

#include "common/path.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ACK carries its count and that many seq frames after version and command,
// so that the whole message stays within PROTO_MAX_FRAMES.

// The kinds of field a frame can hold.
typedef enum {
    S_U64,   // decimal ASCII, 0 .. 2^64-1
    S_U32,   // decimal ASCII, 0 .. 2^32-1
    S_I64,   // decimal ASCII with optional '-'
    S_F64,   // "%.17g", read back with strtod
    S_TEXT,  // UTF-8, no NUL, at most PROTO_MAX_STRING bytes
    S_BODY,  // the same, at most PROTO_MAX_BODY bytes (a REPLY's body)
    S_BLOB,  // bytes, at most PROTO_MAX_FIELD
} s_kind_t;

typedef struct {
    s_kind_t kind;     // how the frame is written
    size_t offset;     // where the value lives in proto_msg_t
    const char *name;  // its name in doc/protocol.md and in errors
} s_field_t;

#define S_AT(member) offsetof (proto_msg_t, member)
#define S_FIG(index) (offsetof (proto_msg_t, figures) + (index) * sizeof (double))

static const s_field_t s_file[] = {
    {S_U64, S_AT (seq), "seq"},
    {S_TEXT, S_AT (experiment), "experiment"},
    {S_TEXT, S_AT (name), "name"},
    {S_I64, S_AT (size), "size"},
    {S_I64, S_AT (time_ns), "mtime_ns"}};
static const s_field_t s_ack[] = {{S_U32, S_AT (count), "count"}};
static const s_field_t s_hello[] = {
    {S_TEXT, S_AT (name), "agent"},
    {S_TEXT, S_AT (text), "host"},
    {S_U32, S_AT (count), "cores"},
    {S_TEXT, S_AT (settings), "capabilities"}};
static const s_field_t s_ready[] = {{S_U32, S_AT (count), "credit"}};
static const s_field_t s_heartbeat[] = {{S_I64, S_AT (time_ns), "clock_ns"}};
static const s_field_t s_task[] = {
    {S_U64, S_AT (pair), "pair"},
    {S_U32, S_AT (attempt), "attempt"},
    {S_TEXT, S_AT (experiment), "experiment"},
    {S_TEXT, S_AT (path_a), "path_a"},
    {S_TEXT, S_AT (path_b), "path_b"},
    {S_TEXT, S_AT (settings), "settings"},
    {S_TEXT, S_AT (output), "output"},
    {S_TEXT, S_AT (path_c), "path_c"},
    {S_TEXT, S_AT (path_d), "path_d"},
    {S_TEXT, S_AT (cameras), "cameras"}};
static const s_field_t s_result[] = {
    {S_U64, S_AT (pair), "pair"},
    {S_U32, S_AT (attempt), "attempt"},
    {S_I64, S_AT (time_ns), "compute_ns"},
    {S_TEXT, S_AT (output), "output"},
    {S_F64, S_FIG (PROTO_FIG_MEAN_U), "mean_u"},
    {S_F64, S_FIG (PROTO_FIG_MEAN_V), "mean_v"},
    {S_F64, S_FIG (PROTO_FIG_MEAN_SPEED), "mean_speed"},
    {S_F64, S_FIG (PROTO_FIG_VALID_FRACTION), "valid_fraction"},
    {S_F64, S_FIG (PROTO_FIG_NX), "nx"},
    {S_F64, S_FIG (PROTO_FIG_NY), "ny"},
    {S_F64, S_FIG (PROTO_FIG_VORTICITY), "vorticity"},
    {S_BLOB, S_AT (blob), "field"}};
static const s_field_t s_failed[] = {
    {S_U64, S_AT (pair), "pair"},
    {S_U32, S_AT (attempt), "attempt"},
    {S_TEXT, S_AT (text), "error"}};
static const s_field_t s_recorded[] = {{S_U64, S_AT (pair), "pair"},
                                       {S_U32, S_AT (attempt), "attempt"}};
static const s_field_t s_ensemble[] = {
    {S_U64, S_AT (seq), "job"},
    {S_U32, S_AT (count), "pass"},
    {S_U64, S_AT (pair), "chunk"},
    {S_U32, S_AT (attempt), "attempt"},
    {S_TEXT, S_AT (experiment), "experiment"},
    {S_TEXT, S_AT (settings), "settings"},
    {S_U32, S_AT (window), "window"},
    {S_U32, S_AT (overlap), "overlap"},
    {S_BODY, S_AT (text), "frames"},
    {S_BLOB, S_AT (blob), "predictor"}};
static const s_field_t s_partial[] = {
    {S_U64, S_AT (seq), "job"},
    {S_U32, S_AT (count), "pass"},
    {S_U64, S_AT (pair), "chunk"},
    {S_U32, S_AT (attempt), "attempt"},
    {S_I64, S_AT (time_ns), "compute_ns"},
    {S_TEXT, S_AT (text), "error"},
    {S_BLOB, S_AT (blob), "partial"}};
static const s_field_t s_request[] = {{S_TEXT, S_AT (text), "line"}};
static const s_field_t s_reply[] = {{S_U32, S_AT (status), "status"},
                                    {S_BODY, S_AT (text), "body"}};
static const s_field_t s_batch[] = {{S_U32, S_AT (count), "count"}};

// RESULT sends figures[0 .. PROTO_FIG_RESERVED - 1], one frame each.
_Static_assert (PROTO_FIG_RESERVED == 7, "RESULT's frame list names every figure");
_Static_assert (PROTO_FIG_RESERVED <= sizeof ((proto_msg_t *) 0)->figures / sizeof (double),
                "figures[] holds every figure");

typedef struct s_command_s {
    char command;             // PROTO_* byte
    const char *name;         // "FILE", ...
    const s_field_t *fields;  // in frame order, from frame 2
    int nfields;              // how many
} s_command_t;

#define S_CMD(byte, name, fields) {byte, name, fields, (int) (sizeof fields / sizeof fields[0])}

static const s_command_t s_commands[] = {
    S_CMD (PROTO_FILE, "FILE", s_file),
    S_CMD (PROTO_ACK, "ACK", s_ack),
    S_CMD (PROTO_HELLO, "HELLO", s_hello),
    S_CMD (PROTO_READY, "READY", s_ready),
    S_CMD (PROTO_HEARTBEAT, "HEARTBEAT", s_heartbeat),
    S_CMD (PROTO_TASK, "TASK", s_task),
    S_CMD (PROTO_RESULT, "RESULT", s_result),
    S_CMD (PROTO_FAILED, "FAILED", s_failed),
    S_CMD (PROTO_DEFER, "DEFER", s_failed),
    S_CMD (PROTO_RECORDED, "RECORDED", s_recorded),
    {PROTO_DISCONNECT, "DISCONNECT", NULL, 0},
    S_CMD (PROTO_ENSEMBLE, "ENSEMBLE", s_ensemble),
    S_CMD (PROTO_PARTIAL, "PARTIAL", s_partial),
    S_CMD (PROTO_REQUEST, "REQUEST", s_request),
    S_CMD (PROTO_REPLY, "REPLY", s_reply),
    S_CMD (PROTO_BATCH, "BATCH", s_batch),
};

static const s_command_t *
s_command (char command)
{
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        if (s_commands[i].command == command)
            return &s_commands[i];
    return NULL;
}

const char *
proto_command_name (char command)
{
    const s_command_t *cmd = s_command (command);
    return cmd ? cmd->name : "?";
}

void
proto_msg_release (proto_msg_t *msg)
{
    if (!msg)
        return;
    free (msg->experiment);
    free (msg->name);
    free (msg->text);
    free (msg->path_a);
    free (msg->path_b);
    free (msg->path_c);
    free (msg->path_d);
    free (msg->cameras);
    free (msg->settings);
    free (msg->output);
    free (msg->seqs);
    free (msg->blob);
    if (msg->batch) {
        for (uint32_t i = 0; i < msg->count; i++)
            proto_msg_release (&msg->batch[i]);
        free (msg->batch);
    }
    memset (msg, 0, sizeof *msg);
}

// A text field is fit to send: within the limit and valid UTF-8 (a C string
// holds no NUL). NULL counts as empty.
static bool
s_text_ok (const char *text, size_t limit)
{
    if (!text)
        return true;
    size_t len = strlen (text), where;
    return len <= limit && !util_utf8_invalid ((const unsigned char *) text, len, &where);
}

// A message as its parts, before it becomes frames: numbers are written
// into the message's own buffers, text and blobs point into proto_msg_t.
typedef struct {
    const void *data[PROTO_MAX_FRAMES];
    size_t size[PROTO_MAX_FRAMES];
    int count;
    char numbers[PROTO_MAX_FRAMES][32];
} s_parts_t;

static int
s_add (s_parts_t *parts, const void *data, size_t size)
{
    if (parts->count == PROTO_MAX_FRAMES)
        return -1;
    parts->data[parts->count] = data;
    parts->size[parts->count++] = size;
    return 0;
}

// An integer in decimal, written without printf (the broker writes several
// a pair) into the message's own buffer for it.
static int
s_add_integer (s_parts_t *parts, uint64_t magnitude, bool negative)
{
    _Static_assert (sizeof parts->numbers[0] >= UTIL_DECIMAL_SIZE, "room for any integer");
    if (parts->count == PROTO_MAX_FRAMES)
        return -1;
    char *slot = parts->numbers[parts->count];
    const char *text = util_decimal (magnitude, negative, slot);
    return s_add (parts, text, (size_t) (slot + UTIL_DECIMAL_SIZE - 1 - text));
}

// A double as "%.17g", so that it comes back bit for bit.
static int
s_add_double (s_parts_t *parts, double value)
{
    if (parts->count == PROTO_MAX_FRAMES)
        return -1;
    char *buf = parts->numbers[parts->count];
    int len = snprintf (buf, sizeof parts->numbers[0], "%.17g", value);
    return s_add (parts, buf, (size_t) len);
}

static int
s_encode_field (s_parts_t *parts, const s_field_t *field, const proto_msg_t *msg)
{
    const char *base = (const char *) msg + field->offset;
    switch (field->kind) {
    case S_U64:
        return s_add_integer (parts, *(const uint64_t *) base, false);
    case S_U32:
        return s_add_integer (parts, *(const uint32_t *) base, false);
    case S_I64: {
        int64_t v = *(const int64_t *) base;
        return s_add_integer (parts, v < 0 ? 0 - (uint64_t) v : (uint64_t) v, v < 0);
    }
    case S_F64:
        return s_add_double (parts, *(const double *) base);
    case S_TEXT:
    case S_BODY: {
        const char *text = *(char *const *) base;
        if (!s_text_ok (text, field->kind == S_BODY ? PROTO_MAX_BODY : PROTO_MAX_STRING))
            return -1;
        return s_add (parts, text ? text : "", text ? strlen (text) : 0);
    }
    case S_BLOB:
        if (msg->blob_size > PROTO_MAX_FIELD || (msg->blob_size && !msg->blob))
            return -1;
        return s_add (parts, msg->blob ? (const void *) msg->blob : "", msg->blob_size);
    }
    return -1;
}

typedef struct s_command_s s_command_t;
static int s_check (const s_command_t *cmd, const proto_msg_t *msg, char *err, size_t errlen);

// The parts of msg; -1 where the encoder refuses it (proto_encode).
static int
s_encode (const proto_msg_t *msg, s_parts_t *parts)
{
    const s_command_t *cmd = msg ? s_command (msg->command) : NULL;
    if (!cmd || msg->command == PROTO_BATCH)
        return -1;
    if (msg->command == PROTO_ACK
        && (msg->count > PROTO_MAX_ACK || (msg->count > 0 && !msg->seqs)))
        return -1;
    parts->count = 0;
    if (s_add (parts, PROTO_VERSION, strlen (PROTO_VERSION)) || s_add (parts, &msg->command, 1))
        return -1;
    if (s_check (cmd, msg, NULL, 0))
        return -1;
    for (int i = 0; i < cmd->nfields; i++)
        if (s_encode_field (parts, &cmd->fields[i], msg))
            return -1;
    if (msg->command == PROTO_ACK)
        for (uint32_t i = 0; i < msg->count; i++)
            if (s_add_integer (parts, msg->seqs[i], false))
                return -1;
    return 0;
}

// ---------------------------------------------------------------------------
// BATCH: several messages in one. Each travels as one frame, a record: its
// command byte, then each field's bytes followed by a NUL (no text or
// number holds one), except a last field that is a blob, which runs to the
// end of the record. One frame per message instead of one per field is
// what makes a batch cheap.

static void s_error (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

struct proto_batch_t {
    unsigned char *buf;  // the records, one after another
    size_t len, cap;     // bytes used, allocated
    size_t *ends;        // where each record ends in buf
    size_t count, ends_cap;
};

// Commands that may travel in a BATCH.
static bool
s_batchable (char command)
{
    return command != PROTO_BATCH && command != PROTO_REQUEST && command != PROTO_REPLY;
}

static bool
s_blob_last (const s_command_t *cmd)
{
    return cmd->nfields > 0 && cmd->fields[cmd->nfields - 1].kind == S_BLOB;
}

proto_batch_t *
proto_batch_new (void)
{
    return calloc (1, sizeof (proto_batch_t));
}

void
proto_batch_destroy (proto_batch_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free ((*self_p)->buf);
    free ((*self_p)->ends);
    free (*self_p);
    *self_p = NULL;
}

size_t
proto_batch_size (const proto_batch_t *self)
{
    return self ? self->count : 0;
}

int
proto_batch_add (proto_batch_t *self, const proto_msg_t *msg)
{
    s_parts_t parts;
    if (!self || !msg || !s_batchable (msg->command) || self->count == PROTO_MAX_BATCH
        || s_encode (msg, &parts))
        return -1;
    const s_command_t *cmd = s_command (msg->command);
    size_t need = 1;
    for (int i = 2; i < parts.count; i++)
        need += parts.size[i] + 1;
    if (s_blob_last (cmd))
        need--;  // the blob has no NUL after it
    if (self->len + need > self->cap) {
        size_t cap = self->cap ? self->cap : 4096;
        while (cap < self->len + need)
            cap *= 2;
        unsigned char *buf = realloc (self->buf, cap);
        if (!buf)
            return -1;
        self->buf = buf, self->cap = cap;
    }
    if (self->count == self->ends_cap) {
        size_t cap = self->ends_cap ? self->ends_cap * 2 : 64;
        size_t *ends = realloc (self->ends, cap * sizeof *ends);
        if (!ends)
            return -1;
        self->ends = ends, self->ends_cap = cap;
    }
    unsigned char *out = self->buf + self->len;
    *out++ = (unsigned char) msg->command;
    for (int i = 2; i < parts.count; i++) {
        if (parts.size[i])
            memcpy (out, parts.data[i], parts.size[i]);
        out += parts.size[i];
        if (!(i == parts.count - 1 && s_blob_last (cmd)))
            *out++ = '\0';
    }
    self->len += need;
    self->ends[self->count++] = self->len;
    return 0;
}

// The frames a record stands for (version, command, fields) into parts;
// 0, or -1 with err.
static int
s_record_parts (const unsigned char *rec, size_t size, s_parts_t *parts, char *err,
                size_t errlen)
{
    parts->count = 0;
    s_add (parts, PROTO_VERSION, strlen (PROTO_VERSION));
    if (size == 0) {
        s_error (err, errlen, "an empty record");
        return -1;
    }
    s_add (parts, rec, 1);
    const s_command_t *cmd = s_command ((char) rec[0]);
    if (!cmd)
        return 0;  // s_decode names the unknown command
    if (!s_batchable (cmd->command)) {
        s_error (err, errlen, "a %s cannot travel in a BATCH", cmd->name);
        return -1;
    }
    int blob_at = s_blob_last (cmd) ? 2 + cmd->nfields - 1 : -1;
    size_t pos = 1;
    while (pos < size && parts->count != blob_at) {
        const unsigned char *nul = memchr (rec + pos, '\0', size - pos);
        if (!nul) {
            s_error (err, errlen, "frame %d is not ended by a NUL byte", parts->count);
            return -1;
        }
        if (s_add (parts, rec + pos, (size_t) (nul - (rec + pos)))) {
            s_error (err, errlen, "%s has over %d frames", cmd->name, PROTO_MAX_FRAMES);
            return -1;
        }
        pos = (size_t) (nul - rec) + 1;
    }
    if (parts->count == blob_at)
        s_add (parts, rec + pos, size - pos);
    return 0;
}

// Encodes a BATCH message's messages; NULL if any is refused.
static proto_batch_t *
s_batch_of (const proto_msg_t *msg)
{
    if (msg->count > PROTO_MAX_BATCH || (msg->count && !msg->batch))
        return NULL;
    proto_batch_t *batch = proto_batch_new ();
    for (uint32_t i = 0; batch && i < msg->count; i++)
        if (proto_batch_add (batch, &msg->batch[i]))
            proto_batch_destroy (&batch);
    return batch;
}

// The frames of a BATCH of what self holds (version, command, count, one
// record each) into data and size, which hold 3 + PROTO_MAX_BATCH; the
// count's text goes into 'count'. Returns how many frames.
static size_t
s_batch_frames (const proto_batch_t *self, const void **data, size_t *size,
                char count[UTIL_DECIMAL_SIZE])
{
    data[0] = PROTO_VERSION, size[0] = strlen (PROTO_VERSION);
    data[1] = "M", size[1] = 1;
    data[2] = util_decimal (self->count, 0, count);
    size[2] = strlen (data[2]);
    for (size_t i = 0, start = 0; i < self->count; start = self->ends[i++]) {
        data[3 + i] = self->buf + start;
        size[3 + i] = self->ends[i] - start;
    }
    return 3 + self->count;
}

zmsg_t *
proto_encode (const proto_msg_t *msg)
{
    if (msg && msg->command == PROTO_BATCH) {
        proto_batch_t *batch = s_batch_of (msg);
        if (!batch)
            return NULL;
        const void *data[3 + PROTO_MAX_BATCH];
        size_t size[3 + PROTO_MAX_BATCH];
        char count[UTIL_DECIMAL_SIZE];
        size_t frames = s_batch_frames (batch, data, size, count);
        zmsg_t *zmsg = zmsg_new ();
        for (size_t i = 0; zmsg && i < frames; i++)
            if (zmsg_addmem (zmsg, data[i], size[i]))
                zmsg_destroy (&zmsg);
        proto_batch_destroy (&batch);
        return zmsg;
    }
    s_parts_t parts;
    if (s_encode (msg, &parts))
        return NULL;
    zmsg_t *zmsg = zmsg_new ();
    for (int i = 0; zmsg && i < parts.count; i++)
        if (zmsg_addmem (zmsg, parts.data[i], parts.size[i]))
            zmsg_destroy (&zmsg);
    return zmsg;
}

// Writes size bytes of data into out as a quoted-safe string: printable
// ASCII as is, anything else as \xNN, cut after 40 bytes with "...".
static const char *
s_quote (const unsigned char *data, size_t size, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < size && i < 40 && o + 5 < outlen; i++) {
        unsigned c = data[i];
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
            out[o++] = (char) c;
        else
            o += (size_t) snprintf (out + o, outlen - o, "\\x%02x", c);
    }
    if (size > 40 && o + 4 < outlen)
        o += (size_t) snprintf (out + o, outlen - o, "...");
    out[o] = '\0';
    return out;
}

// "<prefix><formatted>" into err, if there is room for the prefix.
static void
s_verror (char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap)
{
    if (!err || errlen == 0)
        return;
    int len = snprintf (err, errlen, "%s", prefix);
    if (len < 0 || (size_t) len >= errlen)
        return;
    vsnprintf (err + len, errlen - (size_t) len, fmt, ap);
}

static void
s_error (char *err, size_t errlen, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void
s_error (char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    s_verror (err, errlen, "bad message: ", fmt, ap);
    va_end (ap);
}

// Reads an unsigned decimal: digits only, at least one, no overflow beyond
// max. 0, or -1 with 'why' set to "is empty", "is not a number" or "is out
// of range".
static int
s_parse_unsigned (const unsigned char *data, size_t size, uint64_t max, uint64_t *value,
                  const char **why)
{
    if (size == 0) {
        *why = "is empty";
        return -1;
    }
    uint64_t v = 0;
    bool overflow = false;
    for (size_t i = 0; i < size; i++) {
        if (data[i] < '0' || data[i] > '9') {
            *why = "is not a number";
            return -1;
        }
        unsigned d = data[i] - '0';
        if (v > (max - d) / 10)
            overflow = true;  // keep looking: junk later is the better reason
        else
            v = v * 10 + d;
    }
    if (overflow) {
        *why = "is out of range";
        return -1;
    }
    *value = v;
    return 0;
}

static int
s_parse_signed (const unsigned char *data, size_t size, int64_t *value, const char **why)
{
    bool negative = size > 0 && data[0] == '-';
    uint64_t magnitude;
    uint64_t max = negative ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;
    if (negative && size == 1) {
        *why = "is not a number";
        return -1;
    }
    if (s_parse_unsigned (data + negative, size - negative, max, &magnitude, why))
        return -1;
    if (negative)
        *value = magnitude == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) magnitude;
    else
        *value = (int64_t) magnitude;
    return 0;
}

// strtod over a NUL-terminated copy; the whole frame must be the number, with
// no leading space ("%.17g" never writes one). nan and inf are accepted: a
// figure over no valid vector is nan.
static int
s_parse_double (const unsigned char *data, size_t size, double *value, const char **why)
{
    char buf[64];
    if (size == 0) {
        *why = "is empty";
        return -1;
    }
    if (size >= sizeof buf || data[0] == ' ' || (data[0] >= '\t' && data[0] <= '\r')
        || memchr (data, '\0', size)) {
        *why = "is not a number";
        return -1;
    }
    memcpy (buf, data, size);
    buf[size] = '\0';
    char *end;
    errno = 0;
    double v = strtod (buf, &end);
    if (end != buf + size) {
        *why = "is not a number";
        return -1;
    }
    // ERANGE on underflow still returns the nearest value, which is what the
    // sender had; only overflow to infinity from a finite text is refused.
    if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL)) {
        *why = "is out of range";
        return -1;
    }
    *value = v;
    return 0;
}

// Copies a text frame into a new NUL-terminated string after checking it.
static char *
s_decode_text (const unsigned char *data, size_t size, size_t limit, int index, const char *name,
               char *err, size_t errlen)
{
    size_t where;
    if (size > limit) {
        s_error (err, errlen, "frame %d '%s' is %zu bytes, at most %zu", index, name, size,
                 limit);
        return NULL;
    }
    const unsigned char *nul = memchr (data, '\0', size);
    if (nul) {
        s_error (err, errlen, "frame %d '%s' holds a NUL byte at offset %zu", index, name,
                 (size_t) (nul - data));
        return NULL;
    }
    if (util_utf8_invalid (data, size, &where)) {
        s_error (err, errlen, "frame %d '%s' is not valid UTF-8 at offset %zu", index, name,
                 where);
        return NULL;
    }
    char *text = malloc (size + 1);
    if (!text) {
        s_error (err, errlen, "frame %d '%s': out of memory", index, name);
        return NULL;
    }
    if (size)
        memcpy (text, data, size);
    text[size] = '\0';
    return text;
}

static int
s_decode_field (const s_parts_t *parts, int index, const s_field_t *field, proto_msg_t *msg,
                char *err, size_t errlen)
{
    const unsigned char *data = parts->data[index];
    size_t size = parts->size[index];
    char *base = (char *) msg + field->offset;
    const char *why = NULL;
    uint64_t u;
    int rc = 0;
    switch (field->kind) {
    case S_U64:
        rc = s_parse_unsigned (data, size, UINT64_MAX, (uint64_t *) base, &why);
        break;
    case S_U32:
        rc = s_parse_unsigned (data, size, UINT32_MAX, &u, &why);
        if (rc == 0)
            *(uint32_t *) base = (uint32_t) u;
        break;
    case S_I64:
        rc = s_parse_signed (data, size, (int64_t *) base, &why);
        break;
    case S_F64:
        rc = s_parse_double (data, size, (double *) base, &why);
        break;
    case S_TEXT:
    case S_BODY:
        *(char **) base = s_decode_text (data, size,
                                         field->kind == S_BODY ? PROTO_MAX_BODY : PROTO_MAX_STRING,
                                         index, field->name, err, errlen);
        return *(char **) base ? 0 : -1;
    case S_BLOB:
        if (size > PROTO_MAX_FIELD) {
            s_error (err, errlen, "frame %d '%s' is %zu bytes, at most %u", index, field->name,
                     size, PROTO_MAX_FIELD);
            return -1;
        }
        if (size) {
            msg->blob = malloc (size);
            if (!msg->blob) {
                s_error (err, errlen, "frame %d '%s': out of memory", index, field->name);
                return -1;
            }
            memcpy (msg->blob, data, size);
        }
        msg->blob_size = size;
        return 0;
    }
    if (rc) {
        char quoted[256];
        if (size == 0)
            s_error (err, errlen, "frame %d '%s' %s", index, field->name, why);
        else
            s_error (err, errlen, "frame %d '%s' %s: '%s'", index, field->name, why,
                     s_quote (data, size, quoted, sizeof quoted));
    }
    return rc;
}

// ---------------------------------------------------------------------------
// What each field means, checked after it is read (and before it is sent):
// a name that will touch a file system is a plain relative path, a
// RESULT's figures are what a vector field can give and its field blob
// agrees with them. Only the blob's header is read, never its vectors.

#define S_FIGURE_MAX_GRID 65535  // nx, ny: whole numbers in 0 .. this

// The frame of the field called 'name' in cmd (2 for its first field).
static int
s_frame_of (const s_command_t *cmd, const char *name)
{
    for (int i = 0; i < cmd->nfields; i++)
        if (strcmp (cmd->fields[i].name, name) == 0)
            return 2 + i;
    return -1;
}

static int
s_check_name (const s_command_t *cmd, const char *field, const char *value, int component,
              char *err, size_t errlen)
{
    char why[64], quoted[256];
    const char *v = value ? value : "";
    if ((component ? path_check_component (v, why, sizeof why)
                   : path_check_relative (v, why, sizeof why))
        == 0)
        return 0;
    s_error (err, errlen, "frame %d '%s' is not a plain %s (%s): '%s'", s_frame_of (cmd, field),
             field, component ? "name" : "relative path", why,
             s_quote ((const unsigned char *) v, strlen (v), quoted, sizeof quoted));
    return -1;
}

// A little-endian uint32.
static uint32_t
s_get_u32 (const unsigned char *p)
{
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

// The field blob's header against its size and the figures nx, ny, byte
// by byte: the layout is piv_field_encode's (piv/field.h), which decodes
// the rest where a field is used (common/ does not link libpiv).
static int
s_check_blob (const s_command_t *cmd, const proto_msg_t *msg, char *err, size_t errlen)
{
    const unsigned char *p = msg->blob;
    int frame = s_frame_of (cmd, "field");
    char quoted[64];
    if (msg->blob_size == 0)
        return 0;
    if (!p || msg->blob_size < 32) {
        s_error (err, errlen, "frame %d 'field' is %zu bytes, shorter than its 32-byte header",
                 frame, msg->blob_size);
        return -1;
    }
    // "PVF3": a 3-component (stereo) field, 21 bytes a vector instead of 13;
    // "PVS1", "PVS3": either with each vector's sigma_u, sigma_v (8 more).
    int three = memcmp (p, "PVF3", 4) == 0 || memcmp (p, "PVS3", 4) == 0;
    int sigma = memcmp (p, "PVS1", 4) == 0 || memcmp (p, "PVS3", 4) == 0;
    if (!three && !sigma && memcmp (p, "PVF1", 4) != 0) {
        s_error (err, errlen,
                 "frame %d 'field' has magic '%s', expected 'PVF1', 'PVF3', 'PVS1' or 'PVS3'",
                 frame, s_quote (p, 4, quoted, sizeof quoted));
        return -1;
    }
    uint32_t nx = s_get_u32 (p + 4), ny = s_get_u32 (p + 8);
    if (nx == 0 || ny == 0 || nx > S_FIGURE_MAX_GRID || ny > S_FIGURE_MAX_GRID) {
        s_error (err, errlen, "frame %d 'field' has absurd dimensions %" PRIu32 " x %" PRIu32,
                 frame, nx, ny);
        return -1;
    }
    uint64_t expected = 32 + (uint64_t) nx * ny * ((three ? 21 : 13) + (sigma ? 8 : 0));
    if (expected != msg->blob_size) {
        s_error (err, errlen,
                 "frame %d 'field' is %zu bytes, but %" PRIu32 " x %" PRIu32 " vectors need %" PRIu64,
                 frame, msg->blob_size, nx, ny, expected);
        return -1;
    }
    if ((double) nx != msg->figures[PROTO_FIG_NX] || (double) ny != msg->figures[PROTO_FIG_NY]) {
        s_error (err, errlen, "frame %d 'field' is %" PRIu32 " x %" PRIu32 " vectors, but nx x ny say %.17g x %.17g",
                 frame, nx, ny, msg->figures[PROTO_FIG_NX], msg->figures[PROTO_FIG_NY]);
        return -1;
    }
    return 0;
}

// An ENSEMBLE's window and overlap are ones a pass can have, and its
// frames are pairs of non-empty lines, at most PROTO_MAX_CHUNK pairs (the
// agent checks each path as it checks a TASK's).
static int
s_check_ensemble (const s_command_t *cmd, const proto_msg_t *msg, char *err, size_t errlen)
{
    if (s_check_name (cmd, "experiment", msg->experiment, 1, err, errlen))
        return -1;
    if (msg->window < 4 || msg->window > 1024 || msg->overlap > 90) {
        s_error (err, errlen, "frames %d-%d 'window' %" PRIu32 " and 'overlap' %" PRIu32
                 ": not 4..1024 px and 0..90 %%",
                 s_frame_of (cmd, "window"), s_frame_of (cmd, "overlap"), msg->window,
                 msg->overlap);
        return -1;
    }
    size_t lines = 0;
    const char *p = msg->text ? msg->text : "";
    while (*p) {
        const char *end = strchr (p, '\n');
        if (!end || end == p) {
            lines = 0;
            break;
        }
        lines++;
        p = end + 1;
    }
    if (lines == 0 || lines % 2 || lines / 2 > PROTO_MAX_CHUNK) {
        s_error (err, errlen, "frame %d 'frames' is not 1..%d pairs of lines 'A\\nB\\n'",
                 s_frame_of (cmd, "frames"), PROTO_MAX_CHUNK);
        return -1;
    }
    return 0;
}

// 0 if what msg's fields hold makes sense for its command; -1 with err
// ("bad message: frame N 'field' ...") otherwise. err may be NULL (encoder).
static int
s_check (const s_command_t *cmd, const proto_msg_t *msg, char *err, size_t errlen)
{
    switch (msg->command) {
    case PROTO_FILE:
        return s_check_name (cmd, "experiment", msg->experiment, 1, err, errlen)
               || s_check_name (cmd, "name", msg->name, 0, err, errlen) ? -1 : 0;
    case PROTO_TASK: {
        if (s_check_name (cmd, "output", msg->output, 0, err, errlen))
            return -1;
        // A stereo set has its four frames (its rig, when the experiment
        // has none yet, is empty: the agent fails it, saying so); a pair
        // neither camera 2's frames nor a rig.
        int c = msg->path_c && *msg->path_c, d = msg->path_d && *msg->path_d,
            rig = msg->cameras && *msg->cameras;
        if (c != d || (rig && !c) || (c && !(msg->path_b && *msg->path_b))) {
            s_error (err, errlen, "frames %d-%d 'path_c', 'path_d' and 'cameras' do not make "
                     "a stereo set: it has frame 6 'path_b', 'path_c' and 'path_d', a pair "
                     "none of the three and no 'cameras'",
                     s_frame_of (cmd, "path_c"), s_frame_of (cmd, "cameras"));
            return -1;
        }
        return 0;
    }
    case PROTO_RESULT:
        break;
    case PROTO_ENSEMBLE:
        return s_check_ensemble (cmd, msg, err, errlen);
    case PROTO_PARTIAL: {
        // A partial or an error, never both nor neither.
        int has_error = msg->text && *msg->text;
        if (has_error == (msg->blob_size > 0)) {
            s_error (err, errlen, "frames %d-%d 'error' and 'partial': %s",
                     s_frame_of (cmd, "error"), s_frame_of (cmd, "partial"),
                     has_error ? "both given" : "neither given");
            return -1;
        }
        return 0;
    }
    default:
        return 0;
    }
    for (int f = 0; f < PROTO_FIG_RESERVED; f++) {
        double v = msg->figures[f];
        const char *name = cmd->fields[s_frame_of (cmd, "mean_u") - 2 + f].name;
        const char *why = NULL;
        if (!isfinite (v))
            why = "is not a finite number";
        else if ((f == PROTO_FIG_NX || f == PROTO_FIG_NY)
                 && (v < 0 || v > S_FIGURE_MAX_GRID || v != floor (v)))
            why = "is not a whole number in 0..65535";
        else if (f == PROTO_FIG_VALID_FRACTION && (v < 0 || v > 1))
            why = "is not in 0..1";
        if (why) {
            s_error (err, errlen, "frame %d '%s' %s: '%.17g'", s_frame_of (cmd, name), name, why,
                     v);
            return -1;
        }
    }
    return s_check_blob (cmd, msg, err, errlen);
}

// The body of proto_decode; leaves partial state in msg on failure.
static int
s_decode (const s_parts_t *parts, size_t frames, proto_msg_t *msg, char *err, size_t errlen)
{
    char quoted[256];
    if (frames == 0) {
        s_error (err, errlen, "empty message");
        return -1;
    }
    size_t vlen = strlen (PROTO_VERSION);
    if (parts->size[0] != vlen || memcmp (parts->data[0], PROTO_VERSION, vlen) != 0) {
        s_error (err, errlen, "protocol '%s', expected '%s'",
                 s_quote (parts->data[0], parts->size[0], quoted, sizeof quoted), PROTO_VERSION);
        return -1;
    }
    if (frames == 1) {
        s_error (err, errlen, "no command frame after the version");
        return -1;
    }
    if (parts->size[1] != 1) {
        s_error (err, errlen, "frame 1 (command) is %zu bytes, expected 1: '%s'", parts->size[1],
                 s_quote (parts->data[1], parts->size[1], quoted, sizeof quoted));
        return -1;
    }
    char command = *(const char *) parts->data[1];
    const s_command_t *cmd = s_command (command);
    if (!cmd) {
        s_error (err, errlen, "unknown command 0x%02x", (unsigned char) command);
        return -1;
    }
    size_t expected = 2 + (size_t) cmd->nfields;
    if (command == PROTO_ACK) {
        if (frames < expected) {
            s_error (err, errlen, "ACK needs at least %zu frames, got %zu", expected, frames);
            return -1;
        }
        if (frames > PROTO_MAX_FRAMES) {
            s_error (err, errlen, "ACK has %zu frames, at most %d", frames, PROTO_MAX_FRAMES);
            return -1;
        }
    }
    else if (frames != expected) {
        s_error (err, errlen, "%s needs %zu frames, got %zu", cmd->name, expected, frames);
        return -1;
    }
    msg->command = command;
    int index = 2;
    for (int i = 0; i < cmd->nfields; i++, index++)
        if (s_decode_field (parts, index, &cmd->fields[i], msg, err, errlen))
            return -1;
    if (s_check (cmd, msg, err, errlen))
        return -1;

    if (command == PROTO_ACK) {
        size_t seqs = frames - expected;
        if (msg->count != seqs) {
            s_error (err, errlen, "ACK count %" PRIu32 " but %zu seq frames follow", msg->count,
                     seqs);
            return -1;
        }
        if (seqs) {
            msg->seqs = calloc (seqs, sizeof (uint64_t));
            if (!msg->seqs) {
                s_error (err, errlen, "ACK: out of memory");
                return -1;
            }
        }
        static const s_field_t seq = {S_U64, S_AT (seq), "seq"};
        for (size_t i = 0; i < seqs; i++, index++) {
            proto_msg_t one = {0};
            if (s_decode_field (parts, index, &seq, &one, err, errlen))
                return -1;
            msg->seqs[i] = one.seq;
        }
    }
    return 0;
}

// Decodes a message of 'frames' frames, the first PROTO_MAX_FRAMES of which
// are in parts.
static int
s_decode_parts (const s_parts_t *parts, size_t frames, proto_msg_t *msg, char *err,
                size_t errlen)
{
    // s_decode refuses a message of more frames than its command has before
    // it reads past the first PROTO_MAX_FRAMES.
    memset (msg, 0, sizeof *msg);
    int rc = s_decode (parts, frames, msg, err, errlen);
    if (rc)
        proto_msg_release (msg);
    return rc;
}

// Decodes a BATCH of 'frames' frames (version, command, count, records),
// the first 'kept' of which are in data and size. Leaves partial state in
// msg on failure.
static int
s_decode_batch (const void *const *data, const size_t *size, size_t frames, size_t kept,
                proto_msg_t *msg, char *err, size_t errlen)
{
    s_parts_t head;
    head.count = 0;
    for (size_t i = 0; i < kept && i < 3; i++)
        s_add (&head, data[i], size[i]);
    if (s_decode (&head, frames < 3 ? frames : 3, msg, err, errlen))
        return -1;
    if (msg->count > PROTO_MAX_BATCH) {
        s_error (err, errlen, "BATCH count %" PRIu32 ", at most %d", msg->count,
                 PROTO_MAX_BATCH);
        return -1;
    }
    if (frames - 3 != msg->count || kept < frames) {
        s_error (err, errlen, "BATCH count %" PRIu32 " but %zu messages follow", msg->count,
                 frames - 3);
        return -1;
    }
    if (msg->count && !(msg->batch = calloc (msg->count, sizeof *msg->batch))) {
        s_error (err, errlen, "BATCH: out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < msg->count; i++) {
        char why[512] = "";
        s_parts_t parts;
        if (s_record_parts (data[3 + i], size[3 + i], &parts, why, sizeof why)
            || s_decode_parts (&parts, (size_t) parts.count, &msg->batch[i], why, sizeof why)) {
            // "bad message: BATCH message 3: FILE needs 7 frames, got 5"
            const char *prefix = "bad message: ";
            size_t skip = strncmp (why, prefix, strlen (prefix)) == 0 ? strlen (prefix) : 0;
            s_error (err, errlen, "BATCH message %" PRIu32 ": %s", i, why + skip);
            return -1;
        }
    }
    return 0;
}

// True if the frame (a message's second) says BATCH.
static bool
s_says_batch (const void *data, size_t size)
{
    return size == 1 && *(const char *) data == PROTO_BATCH;
}

// Decodes a whole message of 'frames' frames, the first 'kept' of which are
// in data and size: 0, or -1 with err and msg zeroed.
static int
s_decode_frames (const void *const *data, const size_t *size, size_t frames, size_t kept,
                 proto_msg_t *msg, char *err, size_t errlen)
{
    memset (msg, 0, sizeof *msg);
    if (kept >= 2 && s_says_batch (data[1], size[1])) {
        int rc = s_decode_batch (data, size, frames, kept, msg, err, errlen);
        if (rc)
            proto_msg_release (msg);
        return rc;
    }
    s_parts_t parts;
    parts.count = 0;
    for (size_t i = 0; i < kept && i < PROTO_MAX_FRAMES; i++)
        s_add (&parts, data[i], size[i]);
    return s_decode_parts (&parts, frames, msg, err, errlen);
}

int
proto_decode (zmsg_t **zmsg_p, proto_msg_t *msg, char *err, size_t errlen)
{
    zmsg_t *zmsg = zmsg_p ? *zmsg_p : NULL;
    if (zmsg_p)
        *zmsg_p = NULL;
    // Where the frames' bytes are: 16 KiB of stack at most, as proto_recv.
    const void *data[3 + PROTO_MAX_BATCH];
    size_t size[3 + PROTO_MAX_BATCH];
    size_t frames = zmsg ? zmsg_size (zmsg) : 0, kept = 0;
    for (zframe_t *f = zmsg ? zmsg_first (zmsg) : NULL; f && kept < 3 + PROTO_MAX_BATCH;
         f = zmsg_next (zmsg), kept++) {
        data[kept] = zframe_data (f);
        size[kept] = zframe_size (f);
    }
    int rc = s_decode_frames (data, size, frames, kept, msg, err, errlen);
    zmsg_destroy (&zmsg);
    return rc;
}

int
proto_recv (zsock_t *sock, zframe_t **identity_p, proto_msg_t *msg, char *err, size_t errlen)
{
    return proto_recv_from (sock, identity_p, NULL, 0, msg, err, errlen);
}

int
proto_recv_from (zsock_t *sock, zframe_t **identity_p, char *key, size_t keylen, proto_msg_t *msg,
                 char *err, size_t errlen)
{
    if (key && keylen)
        *key = '\0';
    // The frames land in zmq_msg_t on the stack: no zframe or zmsg to
    // allocate for each of them (this is the broker's hot path). A BATCH
    // gets room for all of its frames.
    void *handle = zsock_resolve (sock);
    zmq_msg_t stack[PROTO_MAX_FRAMES], extra, *frames = stack;
    size_t count = 0, kept = 0, room = PROTO_MAX_FRAMES;
    int more = 1, rc = 0;
    if (identity_p)
        *identity_p = NULL;
    memset (msg, 0, sizeof *msg);
    while (more) {
        if (kept == PROTO_MAX_FRAMES && frames == stack
            && s_says_batch (zmq_msg_data (&stack[1]), zmq_msg_size (&stack[1]))) {
            zmq_msg_t *heap = malloc ((3 + PROTO_MAX_BATCH) * sizeof *heap);
            if (heap) {
                for (size_t i = 0; i < kept; i++) {
                    zmq_msg_init (&heap[i]);
                    zmq_msg_move (&heap[i], &stack[i]);
                    zmq_msg_close (&stack[i]);
                }
                frames = heap;
                room = 3 + PROTO_MAX_BATCH;
            }
        }
        zmq_msg_t *frame = kept < room ? &frames[kept] : &extra;
        zmq_msg_init (frame);
        if (zmq_msg_recv (frame, handle, 0) < 0) {
            zmq_msg_close (frame);
            s_error (err, errlen, "interrupted");
            rc = -2;
            break;
        }
        more = zmq_msg_more (frame);
        if (count++ == 0 && identity_p) {
            *identity_p = zframe_new (zmq_msg_data (frame), zmq_msg_size (frame));
            zmq_msg_close (frame);
        }
        else if (frame == &extra)
            zmq_msg_close (frame);  // past the limit: only counted
        else {
            // The frames the peer sent carry the key ZAP gave its
            // connection (the identity the ROUTER adds may not).
            const char *user = kept == 0 && key && keylen ? zmq_msg_gets (frame, "User-Id") : NULL;
            if (user)
                snprintf (key, keylen, "%s", user);
            kept++;
        }
    }
    if (rc == 0) {
        // Where the frames' bytes are: 16 KiB of stack at most.
        const void *data[3 + PROTO_MAX_BATCH];
        size_t size[3 + PROTO_MAX_BATCH];
        for (size_t i = 0; i < kept; i++) {
            data[i] = zmq_msg_data (&frames[i]);
            size[i] = zmq_msg_size (&frames[i]);
        }
        rc = s_decode_frames (data, size, count - (identity_p ? 1 : 0), kept, msg, err, errlen);
    }
    for (size_t i = 0; i < kept; i++)
        zmq_msg_close (&frames[i]);
    if (frames != stack)
        free (frames);
    return rc;
}

// Sends n frames (a ROUTER's identity first, if given). Only the first
// frame can be refused for want of room (libzmq checks the high-water mark
// per message, not per frame), so the first goes without waiting and, once
// it is in, the rest follows: the peer never sees half a message. zmq_send
// copies each frame (small ones into the message itself, no allocation).
static int
s_send_frames (const void *const *data, const size_t *size, size_t n, zframe_t *identity,
               zsock_t *sock)
{
    void *handle = zsock_resolve (sock);
    int rc = 0;
    if (identity)
        rc = zmq_send (handle, zframe_data (identity), zframe_size (identity),
                       ZMQ_SNDMORE | ZMQ_DONTWAIT);
    for (size_t i = 0; rc >= 0 && i < n; i++) {
        int flags = (i + 1 < n ? ZMQ_SNDMORE : 0) | (!identity && i == 0 ? ZMQ_DONTWAIT : 0);
        while ((rc = zmq_send (handle, data[i], size[i], flags)) < 0 && (identity || i > 0)
               && errno == EINTR)
            ;
    }
    return rc >= 0 ? 0 : -1;
}

int
proto_batch_send (proto_batch_t *self, zframe_t *identity, zsock_t *sock)
{
    if (!self || self->count == 0)
        return 0;
    int rc;
    if (self->count == 1) {
        // One message goes as itself.
        s_parts_t parts;
        char err[8];
        rc = s_record_parts (self->buf, self->len, &parts, err, sizeof err);
        if (rc == 0)
            rc = s_send_frames (parts.data, parts.size, (size_t) parts.count, identity, sock);
    }
    else {
        const void *data[3 + PROTO_MAX_BATCH];
        size_t size[3 + PROTO_MAX_BATCH];
        char count[UTIL_DECIMAL_SIZE];
        rc = s_send_frames (data, size, s_batch_frames (self, data, size, count), identity, sock);
    }
    self->count = 0;
    self->len = 0;
    return rc;
}

int
proto_send (const proto_msg_t *msg, zframe_t *identity, zsock_t *sock)
{
    if (msg && msg->command == PROTO_BATCH) {
        // A BATCH as proto_encode makes it, whatever its count.
        proto_batch_t *batch = s_batch_of (msg);
        if (!batch)
            return -1;
        const void *data[3 + PROTO_MAX_BATCH];
        size_t size[3 + PROTO_MAX_BATCH];
        char count[UTIL_DECIMAL_SIZE];
        int rc =
            s_send_frames (data, size, s_batch_frames (batch, data, size, count), identity, sock);
        proto_batch_destroy (&batch);
        return rc;
    }
    s_parts_t parts;
    if (s_encode (msg, &parts))
        return -1;
    return s_send_frames (parts.data, parts.size, (size_t) parts.count, identity, sock);
}
