// test_proto.c — the wire codec: every command survives a round trip and a
// real ZeroMQ exchange, malformed messages are refused with a line that says
// what and where, random input never crashes it, and vector fields encode
// bit-exact.

#include "common/feedback_quantity.h"
#include "common/proto.h"
#include "piv/field.h"
#include "tests/testutil.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Every command, in the order of proto.h.
static const char s_commands[] = {PROTO_FILE,     PROTO_ACK,      PROTO_HELLO,    PROTO_READY,
                                  PROTO_HEARTBEAT, PROTO_TASK,    PROTO_RESULT,   PROTO_FAILED,
                                  PROTO_RECORDED, PROTO_DISCONNECT, PROTO_REQUEST, PROTO_REPLY,
                                  PROTO_ENSEMBLE, PROTO_PARTIAL};
#define S_NCOMMANDS ((int) sizeof s_commands)

// The frames each command takes (doc/protocol.md); ACK with s_fill's 3 seqs.
static int
s_frames_of (char command)
{
    switch (command) {
    case PROTO_FILE: return 7;
    case PROTO_ACK: return 3 + 3;
    case PROTO_HELLO: return 6;
    case PROTO_READY: return 3;
    case PROTO_HEARTBEAT: return 3;
    case PROTO_TASK: return 12;
    case PROTO_RESULT: return 14;
    case PROTO_FAILED: return 5;
    case PROTO_RECORDED: return 4;
    case PROTO_DISCONNECT: return 2;
    case PROTO_REQUEST: return 3;
    case PROTO_REPLY: return 4;
    case PROTO_ENSEMBLE: return 12;
    case PROTO_PARTIAL: return 9;
    }
    return -1;
}

static char *
s_strdup (const char *s)
{
    char *copy = strdup (s);
    ck_assert_ptr_nonnull (copy);
    return copy;
}

// A RESULT's field blob of nx x ny vectors: the PVF1 header, then bytes
// of every value (NULs and high bytes included); its figures say nx, ny.
static void
s_field_blob (proto_msg_t *msg, uint32_t nx, uint32_t ny)
{
    free (msg->blob);
    msg->blob_size = 32 + (size_t) nx * ny * 13;
    msg->blob = malloc (msg->blob_size);
    ck_assert_ptr_nonnull (msg->blob);
    for (size_t i = 0; i < msg->blob_size; i++)
        msg->blob[i] = (unsigned char) (i * 31 + (i >> 12));
    memcpy (msg->blob, "PVF1", 4);
    for (int b = 0; b < 4; b++) {
        msg->blob[4 + b] = (unsigned char) (nx >> (8 * b));
        msg->blob[8 + b] = (unsigned char) (ny >> (8 * b));
    }
    msg->figures[PROTO_FIG_NX] = nx;
    msg->figures[PROTO_FIG_NY] = ny;
}

// A message with every field of its command set to something recognisable.
static void
s_fill (proto_msg_t *msg, char command)
{
    memset (msg, 0, sizeof *msg);
    msg->command = command;
    switch (command) {
    case PROTO_FILE:
        msg->seq = 42;
        msg->experiment = s_strdup ("run7");
        msg->name = s_strdup ("cam1/img_0001_a.tif");
        msg->size = 8388608;
        msg->time_ns = 1700000000123456789;
        break;
    case PROTO_ACK:
        msg->count = 3;
        msg->seqs = malloc (3 * sizeof (uint64_t));
        ck_assert_ptr_nonnull (msg->seqs);
        msg->seqs[0] = 1, msg->seqs[1] = 42, msg->seqs[2] = UINT64_MAX;
        break;
    case PROTO_HELLO:
        msg->name = s_strdup ("agent-7f3a");
        msg->text = s_strdup ("node12.lab");
        msg->count = 32;
        msg->settings = s_strdup ("piv noop exec");
        break;
    case PROTO_READY:
        msg->count = 8;
        break;
    case PROTO_HEARTBEAT:
        msg->time_ns = 1700000000987654321;
        break;
    case PROTO_TASK:
        msg->pair = 123456789012;
        msg->attempt = 2;
        msg->experiment = s_strdup ("run7");
        msg->path_a = s_strdup ("/data/run7/img_0001_a.tif");
        msg->path_b = s_strdup ("/data/run7/img_0001_b.tif");
        msg->settings = s_strdup ("passes=64,32,16 overlap=50");
        msg->output = s_strdup ("run7/img_0001.txt");  // relative to the results root
        msg->path_c = s_strdup ("/data/run7/cam2/img_0001_a.tif");  // a stereo set
        msg->path_d = s_strdup ("/data/run7/cam2/img_0001_b.tif");
        msg->cameras = s_strdup ("pivfarm-cameras 1\nunits mm\n");
        break;
    case PROTO_RESULT: {
        msg->pair = 123456789012;
        msg->attempt = 1;
        msg->time_ns = 45000000;
        msg->output = s_strdup ("/results/run7/img_0001.txt");
        const double figures[] = {0.25, -1.5, 1.52, 0.987, 127, 63, 1e-4};
        memcpy (msg->figures, figures, sizeof figures);
        s_field_blob (msg, 127, 63);
        break;
    }
    case PROTO_FAILED:
        msg->pair = 77;
        msg->attempt = 3;
        msg->text = s_strdup ("cannot open 'run7/a.tif': No such file or directory");
        break;
    case PROTO_RECORDED:
        msg->pair = 77;
        msg->attempt = 3;
        break;
    case PROTO_DISCONNECT:
        break;
    case PROTO_REQUEST:
        msg->text = s_strdup ("status --json");
        break;
    case PROTO_REPLY:
        msg->status = 200;
        msg->text = s_strdup ("{\"ok\": true}\n");
        break;
    case PROTO_ENSEMBLE:
        msg->seq = 7;  // the job
        msg->count = 2;  // its pass
        msg->pair = 11;  // the chunk
        msg->attempt = 1;
        msg->experiment = s_strdup ("run7");
        msg->settings = s_strdup ("passes=64,32,16 overlap=50");
        msg->window = 8;
        msg->overlap = 50;
        msg->text = s_strdup ("/data/run7/img_0001_a.tif\n/data/run7/img_0001_b.tif\n"
                              "/data/run7/img_0002_a.tif\n/data/run7/img_0002_b.tif\n");
        s_field_blob (msg, 31, 31);  // the predictor
        msg->figures[PROTO_FIG_NX] = msg->figures[PROTO_FIG_NY] = 0;
        break;
    case PROTO_PARTIAL:
        msg->seq = 7;
        msg->count = 2;
        msg->pair = 11;
        msg->attempt = 1;
        msg->time_ns = 250000000;
        msg->text = s_strdup ("");  // no error: a partial
        s_field_blob (msg, 3, 3);  // bytes: the broker decodes them (piv_ensemble_decode)
        msg->figures[PROTO_FIG_NX] = msg->figures[PROTO_FIG_NY] = 0;
        break;
    }
}

static void
s_assert_same_text (const char *a, const char *b, const char *what)
{
    ck_assert_msg ((a == NULL) == (b == NULL), "%s: one is NULL", what);
    if (a)
        ck_assert_msg (strcmp (a, b) == 0, "%s: '%s' != '%s'", what, a, b);
}

// Every member equal; doubles bit for bit.
static void
s_assert_same (const proto_msg_t *a, const proto_msg_t *b)
{
    ck_assert_int_eq (a->command, b->command);
    ck_assert_uint_eq (a->seq, b->seq);
    ck_assert_uint_eq (a->pair, b->pair);
    ck_assert_uint_eq (a->attempt, b->attempt);
    ck_assert_uint_eq (a->count, b->count);
    ck_assert_uint_eq (a->window, b->window);
    ck_assert_uint_eq (a->overlap, b->overlap);
    ck_assert_int_eq (a->size, b->size);
    ck_assert_int_eq (a->time_ns, b->time_ns);
    ck_assert_uint_eq (a->status, b->status);
    s_assert_same_text (a->experiment, b->experiment, "experiment");
    s_assert_same_text (a->name, b->name, "name");
    s_assert_same_text (a->text, b->text, "text");
    s_assert_same_text (a->path_a, b->path_a, "path_a");
    s_assert_same_text (a->path_b, b->path_b, "path_b");
    s_assert_same_text (a->path_c, b->path_c, "path_c");
    s_assert_same_text (a->path_d, b->path_d, "path_d");
    s_assert_same_text (a->cameras, b->cameras, "cameras");
    s_assert_same_text (a->settings, b->settings, "settings");
    s_assert_same_text (a->output, b->output, "output");
    ck_assert_msg ((a->seqs == NULL) == (b->seqs == NULL), "seqs: one is NULL");
    if (a->seqs)
        ck_assert (memcmp (a->seqs, b->seqs, a->count * sizeof (uint64_t)) == 0);
    ck_assert (memcmp (a->figures, b->figures, sizeof a->figures) == 0);
    ck_assert_uint_eq (a->blob_size, b->blob_size);
    ck_assert_msg ((a->blob == NULL) == (b->blob == NULL), "blob: one is NULL");
    if (a->blob)
        ck_assert (memcmp (a->blob, b->blob, a->blob_size) == 0);
}

static int
s_is_zeroed (const proto_msg_t *msg)
{
    static const proto_msg_t zero;
    return memcmp (msg, &zero, sizeof zero) == 0;
}

// Encodes, decodes and checks the copy is the same.
static void
s_assert_round_trip (const proto_msg_t *msg)
{
    zmsg_t *zmsg = proto_encode (msg);
    ck_assert_ptr_nonnull (zmsg);
    proto_msg_t copy;
    char err[256] = "";
    ck_assert_msg (proto_decode (&zmsg, &copy, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_null (zmsg);
    s_assert_same (msg, &copy);
    proto_msg_release (&copy);
}

// A valid encoded message of the command.
static zmsg_t *
s_encoded (char command)
{
    proto_msg_t msg;
    s_fill (&msg, command);
    zmsg_t *zmsg = proto_encode (&msg);
    ck_assert_ptr_nonnull (zmsg);
    proto_msg_release (&msg);
    return zmsg;
}

static zframe_t *
s_frame_at (zmsg_t *zmsg, int index)
{
    zframe_t *frame = zmsg_first (zmsg);
    for (int i = 0; i < index && frame; i++)
        frame = zmsg_next (zmsg);
    ck_assert_ptr_nonnull (frame);
    return frame;
}

static void
s_set_frame (zmsg_t *zmsg, int index, const void *data, size_t size)
{
    zframe_reset (s_frame_at (zmsg, index), data, size);
}

static void
s_set_frame_str (zmsg_t *zmsg, int index, const char *text)
{
    s_set_frame (zmsg, index, text, strlen (text));
}

static void
s_drop_frame (zmsg_t *zmsg, int index)
{
    zframe_t *frame = s_frame_at (zmsg, index);
    zmsg_remove (zmsg, frame);
    zframe_destroy (&frame);
}

// A message of the given frames, of the given sizes (records hold NULs),
// or with sizes NULL of the given texts.
static zmsg_t *
s_zmsg_sized (int n, const char *const frames[], const size_t sizes[])
{
    zmsg_t *zmsg = zmsg_new ();
    for (int i = 0; i < n; i++)
        zmsg_addmem (zmsg, frames[i], sizes ? sizes[i] : strlen (frames[i]));
    return zmsg;
}

static zmsg_t *
s_zmsg (int n, const char *const frames[])
{
    return s_zmsg_sized (n, frames, NULL);
}

// Decoding refuses *zmsg_p with exactly 'expected', consumes it and leaves
// the message empty.
static void
s_assert_refused (zmsg_t **zmsg_p, const char *expected)
{
    proto_msg_t msg;
    memset (&msg, 0xa5, sizeof msg);  // decode must not trust what was there
    char err[512] = "";
    ck_assert_int_eq (proto_decode (zmsg_p, &msg, err, sizeof err), -1);
    ck_assert_ptr_null (*zmsg_p);
    ck_assert_str_eq (err, expected);
    ck_assert (s_is_zeroed (&msg));
}

static void
s_assert_frame_refused (char command, int index, const void *data, size_t size,
                        const char *expected)
{
    zmsg_t *zmsg = s_encoded (command);
    s_set_frame (zmsg, index, data, size);
    s_assert_refused (&zmsg, expected);
}

static void
s_assert_frame_accepted (char command, int index, const char *text, proto_msg_t *msg)
{
    zmsg_t *zmsg = s_encoded (command);
    s_set_frame_str (zmsg, index, text);
    char err[512] = "";
    ck_assert_msg (proto_decode (&zmsg, msg, err, sizeof err) == 0, "'%s': %s", text, err);
}

START_TEST (round_trips_every_command_with_all_its_fields)
{
    for (int i = 0; i < S_NCOMMANDS; i++) {
        proto_msg_t msg;
        s_fill (&msg, s_commands[i]);
        s_assert_round_trip (&msg);
        proto_msg_release (&msg);
    }
}
END_TEST

START_TEST (round_trips_the_extremes_of_every_number_type)
{
    proto_msg_t msg;
    s_fill (&msg, PROTO_FILE);
    msg.seq = UINT64_MAX;
    msg.size = INT64_MIN;
    msg.time_ns = INT64_MAX;
    s_assert_round_trip (&msg);
    msg.seq = 0, msg.size = 0, msg.time_ns = -1;
    s_assert_round_trip (&msg);
    proto_msg_release (&msg);

    s_fill (&msg, PROTO_TASK);
    msg.pair = UINT64_MAX;
    msg.attempt = UINT32_MAX;
    s_assert_round_trip (&msg);
    proto_msg_release (&msg);

    // Doubles through "%.17g" come back bit for bit, signs of zero included,
    // in every figure that may hold any finite value.
    const double values[] = {0.0,     -0.0,     0.1,      M_PI,     -1.0 / 3,
                             DBL_MAX, -DBL_MAX, DBL_MIN,  4.9e-324, -4.9e-324};
    const int any[] = {PROTO_FIG_MEAN_U, PROTO_FIG_MEAN_V, PROTO_FIG_MEAN_SPEED,
                       PROTO_FIG_VORTICITY};
    int nvalues = (int) (sizeof values / sizeof values[0]);
    for (int start = 0; start < nvalues; start += 4) {
        s_fill (&msg, PROTO_RESULT);
        for (int f = 0; f < 4; f++)
            msg.figures[any[f]] = values[(start + f) % nvalues];
        msg.figures[PROTO_FIG_VALID_FRACTION] = start % 2 ? 1.0 : 0.0;
        s_assert_round_trip (&msg);
        proto_msg_release (&msg);
    }
}
END_TEST

START_TEST (round_trips_multibyte_text_and_text_of_exactly_the_limit)
{
    proto_msg_t msg;
    s_fill (&msg, PROTO_FILE);
    free (msg.name);
    // 2-, 3- and 4-byte characters, quotes, spaces: all legal in a file name.
    msg.name = s_strdup ("Str\xc3\xb6mung/\xe6\xb5\x81\xe5\x8a\xa8 \xf0\x9f\x8c\x8a'a\"b'.tif");
    s_assert_round_trip (&msg);
    proto_msg_release (&msg);
    s_fill (&msg, PROTO_FAILED);
    free (msg.text);
    msg.text = malloc (PROTO_MAX_STRING + 1);
    memset (msg.text, 'n', PROTO_MAX_STRING);
    msg.text[PROTO_MAX_STRING] = '\0';
    s_assert_round_trip (&msg);
    proto_msg_release (&msg);
}
END_TEST

START_TEST (lays_out_each_command_as_the_protocol_document_says)
{
    for (int i = 0; i < S_NCOMMANDS; i++) {
        zmsg_t *zmsg = s_encoded (s_commands[i]);
        ck_assert_int_eq ((int) zmsg_size (zmsg), s_frames_of (s_commands[i]));
        ck_assert (zframe_streq (s_frame_at (zmsg, 0), PROTO_VERSION));
        ck_assert_uint_eq (zframe_size (s_frame_at (zmsg, 1)), 1);
        ck_assert_int_eq (zframe_data (s_frame_at (zmsg, 1))[0], s_commands[i]);
        zmsg_destroy (&zmsg);
    }
    zmsg_t *zmsg = s_encoded (PROTO_FILE);
    const char *file[] = {"PIVF02", "F", "42", "run7", "cam1/img_0001_a.tif", "8388608",
                          "1700000000123456789"};
    for (int f = 0; f < 7; f++)
        ck_assert_msg (zframe_streq (s_frame_at (zmsg, f), file[f]), "FILE frame %d", f);
    zmsg_destroy (&zmsg);

    zmsg = s_encoded (PROTO_ACK);
    const char *ack[] = {"PIVF02", "A", "3", "1", "42", "18446744073709551615"};
    for (int f = 0; f < 6; f++)
        ck_assert_msg (zframe_streq (s_frame_at (zmsg, f), ack[f]), "ACK frame %d", f);
    zmsg_destroy (&zmsg);

    zmsg = s_encoded (PROTO_RESULT);
    ck_assert (zframe_streq (s_frame_at (zmsg, 4), "45000000"));
    ck_assert (zframe_streq (s_frame_at (zmsg, 6), "0.25"));
    ck_assert (zframe_streq (s_frame_at (zmsg, 10), "127"));
    ck_assert_uint_eq (zframe_size (s_frame_at (zmsg, 13)), 32 + 127 * 63 * 13);
    zmsg_destroy (&zmsg);
}
END_TEST

// Issue 26: a stereo set's TASK carries camera 2's frames and the rig's
// calibration text; frames C and D come together, with B, and a rig only
// with them.
START_TEST (a_stereo_task_carries_four_frames_and_its_rig_and_half_a_set_is_refused)
{
    proto_msg_t msg = {.command = PROTO_TASK, .pair = 9, .attempt = 1, .experiment = "E",
                       .path_a = "/d/E/cam1/s_a.tif", .path_b = "/d/E/cam1/s_b.tif",
                       .path_c = "/d/E/cam2/s_a.tif", .path_d = "/d/E/cam2/s_b.tif",
                       .cameras = "pivfarm-cameras 1\nunits mm\n", .output = "E/s.txt"};
    zmsg_t *zmsg = proto_encode (&msg);
    ck_assert_ptr_nonnull (zmsg);
    ck_assert_int_eq ((int) zmsg_size (zmsg), 12);
    proto_msg_t copy;
    char err[256] = "";
    ck_assert_msg (proto_decode (&zmsg, &copy, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq (copy.path_c, msg.path_c);
    ck_assert_str_eq (copy.path_d, msg.path_d);
    ck_assert_str_eq (copy.cameras, msg.cameras);
    proto_msg_release (&copy);
    msg.cameras = NULL;  // not calibrated yet: the agent says so
    zmsg = proto_encode (&msg);
    ck_assert_ptr_nonnull (zmsg);
    zmsg_destroy (&zmsg);
    proto_msg_t half = msg;
    half.path_d = NULL;
    ck_assert_ptr_null (proto_encode (&half));
    half = msg;
    half.path_c = half.path_d = NULL;
    half.cameras = "pivfarm-cameras 1\n";
    ck_assert_ptr_null (proto_encode (&half));
    half = msg;
    half.path_b = NULL;
    ck_assert_ptr_null (proto_encode (&half));
}
END_TEST

START_TEST (sends_absent_text_as_an_empty_frame_and_an_absent_blob_as_an_empty_one)
{
    proto_msg_t msg = {.command = PROTO_TASK, .pair = 5, .attempt = 1, .output = "e/a.txt"};
    zmsg_t *zmsg = proto_encode (&msg);
    ck_assert_ptr_nonnull (zmsg);
    proto_msg_t copy;
    char err[256];
    ck_assert_int_eq (proto_decode (&zmsg, &copy, err, sizeof err), 0);
    ck_assert_str_eq (copy.experiment, "");
    ck_assert_str_eq (copy.path_b, "");
    ck_assert_str_eq (copy.output, "e/a.txt");
    proto_msg_release (&copy);

    proto_msg_t result = {.command = PROTO_RESULT, .pair = 5};
    zmsg = proto_encode (&result);
    ck_assert_ptr_nonnull (zmsg);
    ck_assert_int_eq (proto_decode (&zmsg, &copy, err, sizeof err), 0);
    ck_assert_ptr_null (copy.blob);
    ck_assert_uint_eq (copy.blob_size, 0);
    ck_assert_str_eq (copy.output, "");
    proto_msg_release (&copy);
}
END_TEST

START_TEST (refuses_to_encode_what_a_peer_would_refuse)
{
    zsock_t *pub = zsock_new (ZMQ_PUB);  // a PUB never blocks: only encoding can fail
    ck_assert_ptr_nonnull (pub);
    proto_msg_t msg = {.command = 'Z'};
    ck_assert_ptr_null (proto_encode (&msg));
    ck_assert_int_eq (proto_send (&msg, NULL, pub), -1);
    ck_assert_ptr_null (proto_encode (NULL));

    char *long_text = malloc (PROTO_MAX_STRING + 2);
    memset (long_text, 'x', PROTO_MAX_STRING + 1);
    long_text[PROTO_MAX_STRING + 1] = '\0';
    msg = (proto_msg_t){.command = PROTO_REQUEST, .text = long_text};
    ck_assert_ptr_null (proto_encode (&msg));
    ck_assert_int_eq (proto_send (&msg, NULL, pub), -1);
    free (long_text);

    msg = (proto_msg_t){.command = PROTO_FILE, .name = (char *) "bad\xff.tif"};
    ck_assert_ptr_null (proto_encode (&msg));

    uint64_t seqs[PROTO_MAX_FRAMES] = {0};
    msg = (proto_msg_t){.command = PROTO_ACK, .count = PROTO_MAX_FRAMES - 2, .seqs = seqs};
    ck_assert_ptr_null (proto_encode (&msg));
    msg.count = PROTO_MAX_FRAMES - 3;  // the most one ACK holds
    zmsg_t *zmsg = proto_encode (&msg);
    ck_assert_ptr_nonnull (zmsg);
    ck_assert_int_eq ((int) zmsg_size (zmsg), PROTO_MAX_FRAMES);
    zmsg_destroy (&zmsg);
    msg = (proto_msg_t){.command = PROTO_ACK, .count = 2, .seqs = NULL};
    ck_assert_ptr_null (proto_encode (&msg));

    // Only the size is looked at before refusing; calloc keeps this quick.
    unsigned char *blob = calloc (1, (size_t) PROTO_MAX_FIELD + 1);
    ck_assert_ptr_nonnull (blob);
    msg = (proto_msg_t){.command = PROTO_RESULT, .blob = blob, .blob_size = PROTO_MAX_FIELD + 1};
    ck_assert_ptr_null (proto_encode (&msg));
    free (blob);
    msg = (proto_msg_t){.command = PROTO_RESULT, .blob = NULL, .blob_size = 10};
    ck_assert_ptr_null (proto_encode (&msg));
    zsock_destroy (&pub);
}
END_TEST

START_TEST (an_ensemble_chunk_and_its_partial_are_refused_unless_they_make_sense)
{
    char err[512];
    struct {
        char command;
        const char *text;
        uint32_t window, overlap;
        int blob;
        const char *why;
    } cases[] = {
        {PROTO_ENSEMBLE, "/a\n/b\n", 3, 50, 0, "'window' 3 and 'overlap' 50"},
        {PROTO_ENSEMBLE, "/a\n/b\n", 8, 91, 0, "'window' 8 and 'overlap' 91"},
        {PROTO_ENSEMBLE, "/a\n/b\n/c\n", 8, 50, 0, "'frames' is not 1..64 pairs"},
        {PROTO_ENSEMBLE, "/a\n\n", 8, 50, 0, "'frames' is not 1..64 pairs"},
        {PROTO_ENSEMBLE, "/a\n/b", 8, 50, 0, "'frames' is not 1..64 pairs"},
        {PROTO_ENSEMBLE, "", 8, 50, 0, "'frames' is not 1..64 pairs"},
        {PROTO_PARTIAL, "", 0, 0, 0, "'error' and 'partial': neither given"},
        {PROTO_PARTIAL, "cannot open '/a'", 0, 0, 1, "'error' and 'partial': both given"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proto_msg_t msg = {.command = cases[i].command,
                           .experiment = "run7",
                           .text = (char *) cases[i].text,
                           .window = cases[i].window,
                           .overlap = cases[i].overlap};
        unsigned char bytes[4] = {1, 2, 3, 4};
        if (cases[i].blob) {
            msg.blob = bytes;
            msg.blob_size = sizeof bytes;
        }
        // Neither encoded ...
        ck_assert_msg (proto_encode (&msg) == NULL, "case %zu encoded", i);
        // ... nor decoded when a peer sends it anyway (frames built by hand).
            zmsg_t *zmsg = zmsg_new ();
        zmsg_addstr (zmsg, PROTO_VERSION);
        zmsg_addmem (zmsg, &cases[i].command, 1);
        char w[16], o[16];
        snprintf (w, sizeof w, "%u", cases[i].window);
        snprintf (o, sizeof o, "%u", cases[i].overlap);
        if (cases[i].command == PROTO_ENSEMBLE) {
            const char *frames[] = {"1", "0", "0", "1", "run7", "", w, o, cases[i].text};
            for (size_t f = 0; f < 9; f++)
                zmsg_addstr (zmsg, frames[f]);
            zmsg_addmem (zmsg, NULL, 0);
        }
        else {
            const char *frames[] = {"1", "0", "0", "1", "5", cases[i].text};
            for (size_t f = 0; f < 6; f++)
                zmsg_addstr (zmsg, frames[f]);
            zmsg_addmem (zmsg, cases[i].blob ? bytes : NULL, cases[i].blob ? sizeof bytes : 0);
        }
        proto_msg_t out = {0};
        ck_assert_int_eq (proto_decode (&zmsg, &out, err, sizeof err), -1);
        ck_assert_msg (strstr (err, cases[i].why), "case %zu: %s", i, err);
        ck_assert (s_is_zeroed (&out));
    }
}
END_TEST

START_TEST (names_every_command_and_calls_an_unknown_byte_a_question_mark)
{
    const char *names[] = {"FILE",  "ACK",    "HELLO",    "READY",      "HEARTBEAT", "TASK",
                           "RESULT", "FAILED", "RECORDED", "DISCONNECT", "REQUEST",   "REPLY",
                           "ENSEMBLE", "PARTIAL"};
    for (int i = 0; i < S_NCOMMANDS; i++)
        ck_assert_str_eq (proto_command_name (s_commands[i]), names[i]);
    ck_assert_str_eq (proto_command_name ('Z'), "?");
    ck_assert_str_eq (proto_command_name ('\0'), "?");
}
END_TEST

START_TEST (release_frees_everything_and_leaves_an_empty_message)
{
    for (int i = 0; i < S_NCOMMANDS; i++) {
        proto_msg_t msg;
        s_fill (&msg, s_commands[i]);
        proto_msg_release (&msg);
        ck_assert (s_is_zeroed (&msg));
        proto_msg_release (&msg);
    }
    proto_msg_release (NULL);
}
END_TEST

// Receives one message within 5 s; fails the test otherwise.
static zmsg_t *
s_recv (zsock_t *sock)
{
    zsock_set_rcvtimeo (sock, 5000);
    zmsg_t *zmsg = zmsg_recv (sock);
    ck_assert_msg (zmsg != NULL, "nothing received in 5 s");
    return zmsg;
}

static void
s_decode_ok (zmsg_t **zmsg_p, proto_msg_t *msg)
{
    char err[256] = "";
    ck_assert_msg (proto_decode (zmsg_p, msg, err, sizeof err) == 0, "%s", err);
}

START_TEST (a_dealer_reaches_the_router_and_each_reply_reaches_the_right_dealer)
{
    zsock_t *router = zsock_new_router ("tcp://127.0.0.1:*");
    ck_assert_ptr_nonnull (router);
    const char *endpoint = zsock_endpoint (router);
    zsock_t *agent_a = zsock_new_dealer (endpoint);
    zsock_t *agent_b = zsock_new_dealer (endpoint);
    ck_assert (agent_a && agent_b);

    proto_msg_t hello;
    s_fill (&hello, PROTO_HELLO);
    free (hello.name);
    hello.name = s_strdup ("agent-a");
    ck_assert_int_eq (proto_send (&hello, NULL, agent_a), 0);
    free (hello.name);
    hello.name = s_strdup ("agent-b");
    ck_assert_int_eq (proto_send (&hello, NULL, agent_b), 0);

    // The broker's side: identity first, then the protocol.
    zframe_t *identity_a = NULL, *identity_b = NULL;
    for (int i = 0; i < 2; i++) {
        zmsg_t *zmsg = s_recv (router);
        zframe_t *identity = zmsg_pop (zmsg);
        proto_msg_t msg;
        s_decode_ok (&zmsg, &msg);
        ck_assert_int_eq (msg.command, PROTO_HELLO);
        ck_assert_str_eq (msg.text, "node12.lab");
        ck_assert_uint_eq (msg.count, 32);
        if (strcmp (msg.name, "agent-a") == 0)
            identity_a = identity;
        else if (strcmp (msg.name, "agent-b") == 0)
            identity_b = identity;
        else
            ck_abort_msg ("unexpected agent '%s'", msg.name);
        proto_msg_release (&msg);
    }
    ck_assert (identity_a && identity_b);
    proto_msg_release (&hello);

    // Reply to b first, then a: each gets its own task.
    proto_msg_t task;
    s_fill (&task, PROTO_TASK);
    task.pair = 2;
    ck_assert_int_eq (proto_send (&task, identity_b, router), 0);
    task.pair = 1;
    ck_assert_int_eq (proto_send (&task, identity_a, router), 0);
    proto_msg_t got;
    zmsg_t *zmsg = s_recv (agent_a);
    s_decode_ok (&zmsg, &got);
    s_assert_same (&task, &got);
    proto_msg_release (&got);
    zmsg = s_recv (agent_b);
    s_decode_ok (&zmsg, &got);
    ck_assert_int_eq (got.command, PROTO_TASK);
    ck_assert_uint_eq (got.pair, 2);
    proto_msg_release (&got);
    proto_msg_release (&task);

    // The identity is not consumed: the broker keeps it for the next message.
    proto_msg_t heartbeat = {.command = PROTO_HEARTBEAT, .time_ns = 123};
    ck_assert_int_eq (proto_send (&heartbeat, identity_a, router), 0);
    ck_assert_int_eq (proto_send (&heartbeat, identity_a, router), 0);
    for (int i = 0; i < 2; i++) {
        zmsg = s_recv (agent_a);
        s_decode_ok (&zmsg, &got);
        ck_assert_int_eq (got.command, PROTO_HEARTBEAT);
        ck_assert_int_eq (got.time_ns, 123);
        proto_msg_release (&got);
    }
    // Nothing strayed to b.
    zsock_set_rcvtimeo (agent_b, 100);
    zmsg = zmsg_recv (agent_b);
    ck_assert_ptr_null (zmsg);

    // A RESULT with a large blob arrives whole.
    proto_msg_t result;
    s_fill (&result, PROTO_RESULT);
    s_field_blob (&result, 512, 630);  // 4 MB
    ck_assert_int_eq (proto_send (&result, NULL, agent_b), 0);
    zmsg = s_recv (router);
    zframe_t *identity = zmsg_pop (zmsg);
    ck_assert (zframe_eq (identity, identity_b));
    zframe_destroy (&identity);
    s_decode_ok (&zmsg, &got);
    s_assert_same (&result, &got);
    proto_msg_release (&got);
    proto_msg_release (&result);

    zframe_destroy (&identity_a);
    zframe_destroy (&identity_b);
    zsock_destroy (&agent_a);
    zsock_destroy (&agent_b);
    zsock_destroy (&router);
}
END_TEST

START_TEST (a_send_that_would_block_fails_at_once_and_sends_nothing)
{
    proto_msg_t msg = {.command = PROTO_READY, .count = 4};
    // A DEALER with no peer has nowhere to queue the message.
    zsock_t *lonely = zsock_new (ZMQ_DEALER);
    ck_assert_ptr_nonnull (lonely);
    ck_assert_int_eq (proto_send (&msg, NULL, lonely), -1);
    zsock_destroy (&lonely);

    // A ROUTER told to insist on known peers refuses an unknown identity,
    // and the next message to a known peer still arrives whole.
    zsock_t *router = zsock_new_router ("inproc://proto-mandatory");
    zsock_t *dealer = zsock_new_dealer ("inproc://proto-mandatory");
    ck_assert (router && dealer);
    zsock_set_router_mandatory (router, 1);
    zframe_t *nobody = zframe_new ("nobody", 6);
    ck_assert_int_eq (proto_send (&msg, nobody, router), -1);
    zframe_destroy (&nobody);

    ck_assert_int_eq (proto_send (&msg, NULL, dealer), 0);
    zmsg_t *zmsg = s_recv (router);
    zframe_t *identity = zmsg_pop (zmsg);
    zmsg_destroy (&zmsg);
    proto_msg_t reply = {.command = PROTO_HEARTBEAT, .time_ns = 9};
    ck_assert_int_eq (proto_send (&reply, identity, router), 0);
    zmsg = s_recv (dealer);
    proto_msg_t got;
    s_decode_ok (&zmsg, &got);
    ck_assert_int_eq (got.command, PROTO_HEARTBEAT);
    ck_assert_int_eq (got.time_ns, 9);
    proto_msg_release (&got);
    zframe_destroy (&identity);
    zsock_destroy (&dealer);
    zsock_destroy (&router);
}
END_TEST

START_TEST (refuses_another_protocol_version)
{
    zmsg_t *zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame_str (zmsg, 0, "PIVF99");
    s_assert_refused (&zmsg, "bad message: protocol 'PIVF99', expected 'PIVF02'");

    zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame_str (zmsg, 0, "PIVF02 ");
    s_assert_refused (&zmsg, "bad message: protocol 'PIVF02 ', expected 'PIVF02'");

    // Bytes that are not text are shown escaped, and long ones cut short.
    zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame (zmsg, 0, "\x01\xff'\n", 4);
    s_assert_refused (&zmsg, "bad message: protocol '\\x01\\xff\\x27\\x0a', expected 'PIVF02'");
    zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame_str (zmsg, 0, "GET / HTTP/1.1\r\nHost: broker.lab:5551\r\nUser-Agent: curl\r\n");
    s_assert_refused (&zmsg, "bad message: protocol 'GET / HTTP/1.1\\x0d\\x0aHost: "
                             "broker.lab:5551\\x0d\\x0aU...', expected 'PIVF02'");
    zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame (zmsg, 0, "", 0);
    s_assert_refused (&zmsg, "bad message: protocol '', expected 'PIVF02'");
}
END_TEST

START_TEST (refuses_an_unknown_command)
{
    zmsg_t *zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame_str (zmsg, 1, "Z");
    s_assert_refused (&zmsg, "bad message: unknown command 0x5a");
    zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame (zmsg, 1, "\0", 1);
    s_assert_refused (&zmsg, "bad message: unknown command 0x00");
    zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame_str (zmsg, 1, "BB");
    s_assert_refused (&zmsg, "bad message: frame 1 (command) is 2 bytes, expected 1: 'BB'");
    zmsg = s_encoded (PROTO_HEARTBEAT);
    s_set_frame (zmsg, 1, "", 0);
    s_assert_refused (&zmsg, "bad message: frame 1 (command) is 0 bytes, expected 1: ''");
}
END_TEST

START_TEST (refuses_a_message_with_a_missing_frame)
{
    zmsg_t *zmsg = s_encoded (PROTO_FILE);
    s_drop_frame (zmsg, 6);
    s_drop_frame (zmsg, 3);
    s_assert_refused (&zmsg, "bad message: FILE needs 7 frames, got 5");

    char expected[128];
    for (int i = 0; i < S_NCOMMANDS; i++) {
        char command = s_commands[i];
        if (command == PROTO_ACK || command == PROTO_DISCONNECT)
            continue;
        int frames = s_frames_of (command);
        zmsg = s_encoded (command);
        s_drop_frame (zmsg, frames - 1);
        snprintf (expected, sizeof expected, "bad message: %s needs %d frames, got %d",
                  proto_command_name (command), frames, frames - 1);
        s_assert_refused (&zmsg, expected);
    }
    const char *ack[] = {PROTO_VERSION, "A"};
    zmsg = s_zmsg (2, ack);
    s_assert_refused (&zmsg, "bad message: ACK needs at least 3 frames, got 2");
    zmsg = s_encoded (PROTO_ACK);
    s_drop_frame (zmsg, 5);
    s_assert_refused (&zmsg, "bad message: ACK count 3 but 2 seq frames follow");
}
END_TEST

START_TEST (refuses_a_message_with_an_extra_frame)
{
    char expected[128];
    for (int i = 0; i < S_NCOMMANDS; i++) {
        char command = s_commands[i];
        if (command == PROTO_ACK)
            continue;
        int frames = s_frames_of (command);
        zmsg_t *zmsg = s_encoded (command);
        zmsg_addstr (zmsg, "");
        snprintf (expected, sizeof expected, "bad message: %s needs %d frames, got %d",
                  proto_command_name (command), frames, frames + 1);
        s_assert_refused (&zmsg, expected);
    }
    zmsg_t *zmsg = s_encoded (PROTO_ACK);
    zmsg_addstr (zmsg, "7");
    s_assert_refused (&zmsg, "bad message: ACK count 3 but 4 seq frames follow");

    // However the count is set, an ACK stops at PROTO_MAX_FRAMES.
    const char *ack[PROTO_MAX_FRAMES + 1] = {PROTO_VERSION, "A", "30"};
    for (int f = 3; f < PROTO_MAX_FRAMES + 1; f++)
        ack[f] = "1";
    zmsg = s_zmsg (PROTO_MAX_FRAMES + 1, ack);
    s_assert_refused (&zmsg, "bad message: ACK has 33 frames, at most 32");
}
END_TEST

START_TEST (refuses_a_number_field_that_is_not_a_number)
{
    s_assert_frame_refused (PROTO_FILE, 2, "x1", 2,
                            "bad message: frame 2 'seq' is not a number: 'x1'");
    s_assert_frame_refused (PROTO_FILE, 2, "", 0, "bad message: frame 2 'seq' is empty");
    const char *junk[] = {" 1", "1 ", "+1", "-1", "0x10", "1e3", "1.0", "1\n", "\xd9\xa1", "--"};
    char expected[256];
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        zmsg_t *zmsg = s_encoded (PROTO_TASK);
        s_set_frame_str (zmsg, 2, junk[i]);
        proto_msg_t msg;
        char err[256] = "";
        ck_assert_msg (proto_decode (&zmsg, &msg, err, sizeof err) == -1, "'%s' taken", junk[i]);
        ck_assert_msg (strncmp (err, "bad message: frame 2 'pair' is not a number: '", 46) == 0,
                       "%s", err);
    }
    s_assert_frame_refused (PROTO_FILE, 5, "-", 1,
                            "bad message: frame 5 'size' is not a number: '-'");
    s_assert_frame_refused (PROTO_FILE, 6, "1-", 2,
                            "bad message: frame 6 'mtime_ns' is not a number: '1-'");
    s_assert_frame_refused (PROTO_RESULT, 6, "1.5x", 4,
                            "bad message: frame 6 'mean_u' is not a number: '1.5x'");
    s_assert_frame_refused (PROTO_RESULT, 12, " 1", 2,
                            "bad message: frame 12 'vorticity' is not a number: ' 1'");
    s_assert_frame_refused (PROTO_RESULT, 7, "1\0", 2,
                            "bad message: frame 7 'mean_v' is not a number: '1\\x00'");
    s_assert_frame_refused (PROTO_REPLY, 2, "OK", 2,
                            "bad message: frame 2 'status' is not a number: 'OK'");
    s_assert_frame_refused (PROTO_ACK, 4, "4x", 2,
                            "bad message: frame 4 'seq' is not a number: '4x'");
    // Every number frame of every command is checked.
    for (int i = 0; i < S_NCOMMANDS; i++) {
        char command = s_commands[i];
        zmsg_t *probe = s_encoded (command);
        int frames = (int) zmsg_size (probe);
        for (int f = 2; f < frames; f++) {
            zframe_t *frame = s_frame_at (probe, f);
            if (zframe_size (frame) == 0 || zframe_data (frame)[0] < '0'
                || zframe_data (frame)[0] > '9' || zframe_size (frame) > 40)
                continue;  // text or blob
            zmsg_t *zmsg = s_encoded (command);
            s_set_frame_str (zmsg, f, "7q");
            proto_msg_t msg;
            char err[256] = "";
            ck_assert_int_eq (proto_decode (&zmsg, &msg, err, sizeof err), -1);
            snprintf (expected, sizeof expected, "bad message: frame %d '", f);
            ck_assert_msg (strncmp (err, expected, strlen (expected)) == 0
                               && strstr (err, "' is not a number: '7q'"),
                           "%s: %s", proto_command_name (command), err);
        }
        zmsg_destroy (&probe);
    }
}
END_TEST

// RESULT's figure frames are named as the feedback quantities they carry
// (common/feedback_quantity.h), so the broker's result message, which
// names them from the table, says what the wire says.
START_TEST (result_figures_are_named_as_the_quantities_of_the_table)
{
    const feedback_quantity_info_t *q;
    int carried = 0;
    for (int i = 0; (q = feedback_quantity_get (i)); i++) {
        if (q->figure < 0)
            continue;
        char expected[256];
        int frame = 6 + q->figure;  // figures[0 ..] travel in frames 6 ..
        snprintf (expected, sizeof expected, "bad message: frame %d '%s' is not a number: 'x'",
                  frame, q->name);
        s_assert_frame_refused (PROTO_RESULT, frame, "x", 1, expected);
        carried++;
    }
    ck_assert_int_eq (carried, PROTO_FIG_RESERVED - 2);  // all but nx and ny
}
END_TEST

START_TEST (refuses_numbers_beyond_their_type_and_takes_those_at_the_edge)
{
    s_assert_frame_refused (
        PROTO_FILE, 2, "18446744073709551616", 20,
        "bad message: frame 2 'seq' is out of range: '18446744073709551616'");
    s_assert_frame_refused (
        PROTO_FILE, 2, "99999999999999999999999", 23,
        "bad message: frame 2 'seq' is out of range: '99999999999999999999999'");
    s_assert_frame_refused (PROTO_READY, 2, "4294967296", 10,
                            "bad message: frame 2 'credit' is out of range: '4294967296'");
    s_assert_frame_refused (
        PROTO_FILE, 5, "9223372036854775808", 19,
        "bad message: frame 5 'size' is out of range: '9223372036854775808'");
    s_assert_frame_refused (
        PROTO_HEARTBEAT, 2, "-9223372036854775809", 20,
        "bad message: frame 2 'clock_ns' is out of range: '-9223372036854775809'");
    s_assert_frame_refused (PROTO_RESULT, 8, "1e999", 5,
                            "bad message: frame 8 'mean_speed' is out of range: '1e999'");
    // Junk after an overflow is called junk.
    s_assert_frame_refused (
        PROTO_FILE, 2, "184467440737095516160x", 22,
        "bad message: frame 2 'seq' is not a number: '184467440737095516160x'");

    proto_msg_t msg;
    s_assert_frame_accepted (PROTO_FILE, 2, "18446744073709551615", &msg);
    ck_assert (msg.seq == UINT64_MAX);
    proto_msg_release (&msg);
    s_assert_frame_accepted (PROTO_FILE, 2, "007", &msg);
    ck_assert_uint_eq (msg.seq, 7);
    proto_msg_release (&msg);
    s_assert_frame_accepted (PROTO_READY, 2, "4294967295", &msg);
    ck_assert_uint_eq (msg.count, UINT32_MAX);
    proto_msg_release (&msg);
    s_assert_frame_accepted (PROTO_HEARTBEAT, 2, "-9223372036854775808", &msg);
    ck_assert (msg.time_ns == INT64_MIN);
    proto_msg_release (&msg);
    s_assert_frame_accepted (PROTO_HEARTBEAT, 2, "9223372036854775807", &msg);
    ck_assert (msg.time_ns == INT64_MAX);
    proto_msg_release (&msg);
    s_assert_frame_accepted (PROTO_RESULT, 6, "1e-320", &msg);  // subnormal, not an error
    ck_assert (msg.figures[PROTO_FIG_MEAN_U] > 0);
    proto_msg_release (&msg);
}
END_TEST

START_TEST (refuses_text_that_is_not_valid_utf8)
{
    static const struct {
        const char *bytes;
        size_t offset;
    } bad[] = {
        {"ab\x80", 2},              // a continuation byte alone
        {"\xc0\x80", 0},            // overlong NUL
        {"a\xc1\xbf", 1},           // overlong ASCII
        {"\xe0\x80\xaf", 0},        // overlong 3-byte
        {"\xf0\x80\x80\xaf", 0},    // overlong 4-byte
        {"x\xed\xa0\x80", 1},       // a UTF-16 surrogate
        {"\xf4\x90\x80\x80", 0},    // beyond U+10FFFF
        {"\xf5\x80\x80\x80", 0},    // never a lead byte
        {"ok\xff", 2},              // never in UTF-8
        {"\xe2\x82", 0},            // cut short at the end
        {"\xc3" "A", 0},            // lead byte without its continuation
        {"\xc3\xa9\xe2\x82" "A", 2} // good, then cut short
    };
    char expected[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf (expected, sizeof expected,
                  "bad message: frame 3 'experiment' is not valid UTF-8 at offset %zu",
                  bad[i].offset);
        s_assert_frame_refused (PROTO_FILE, 3, bad[i].bytes, strlen (bad[i].bytes), expected);
    }
    s_assert_frame_refused (PROTO_HELLO, 3, "\xfe", 1,
                            "bad message: frame 3 'host' is not valid UTF-8 at offset 0");
    s_assert_frame_refused (PROTO_REQUEST, 2, "st\xe9tus", 6,
                            "bad message: frame 2 'line' is not valid UTF-8 at offset 2");
    // The largest code point and the ones around the surrogates are fine.
    proto_msg_t msg;
    s_assert_frame_accepted (PROTO_FILE, 3, "\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80", &msg);
    proto_msg_release (&msg);
}
END_TEST

START_TEST (refuses_text_with_an_embedded_nul)
{
    s_assert_frame_refused (PROTO_FILE, 4, "ab\0cd.tif", 9,
                            "bad message: frame 4 'name' holds a NUL byte at offset 2");
    s_assert_frame_refused (PROTO_TASK, 8, "out\0", 4,
                            "bad message: frame 8 'output' holds a NUL byte at offset 3");
    s_assert_frame_refused (PROTO_FAILED, 4, "\0", 1,
                            "bad message: frame 4 'error' holds a NUL byte at offset 0");
}
END_TEST

START_TEST (refuses_text_longer_than_the_limit)
{
    char *text = malloc (PROTO_MAX_BODY + 1);
    memset (text, 'a', PROTO_MAX_BODY + 1);
    s_assert_frame_refused (PROTO_FILE, 4, text, PROTO_MAX_STRING + 1,
                            "bad message: frame 4 'name' is 4097 bytes, at most 4096");
    // A reply's body (the status as JSON) may be longer: up to PROTO_MAX_BODY.
    proto_msg_t msg = {0};
    char *long_body = strndup (text, PROTO_MAX_STRING + 1);
    s_assert_frame_accepted (PROTO_REPLY, 3, long_body, &msg);
    ck_assert_uint_eq (strlen (msg.text), PROTO_MAX_STRING + 1);
    proto_msg_release (&msg);
    free (long_body);
    s_assert_frame_refused (PROTO_REPLY, 3, text, PROTO_MAX_BODY + 1,
                            "bad message: frame 3 'body' is 1048577 bytes, at most 1048576");
    free (text);
}
END_TEST

// Names a peer gives that will touch a file system: the experiment is one
// plain name, the file and a TASK's output plain relative paths. Refused
// by the decoder (and the encoder), naming the frame and why.
START_TEST (refuses_a_file_or_task_whose_names_leave_their_root)
{
    static const struct {
        char command;
        int frame;
        const char *value;
        const char *expected;
    } bad[] = {
        {PROTO_FILE, 4, "../etc/passwd",
         "bad message: frame 4 'name' is not a plain relative path (a '..' component): "
         "'../etc/passwd'"},
        {PROTO_FILE, 4, "cam1/./a.tif",
         "bad message: frame 4 'name' is not a plain relative path (a '.' component): "
         "'cam1/./a.tif'"},
        {PROTO_FILE, 4, "/etc/passwd",
         "bad message: frame 4 'name' is not a plain relative path (an absolute path): "
         "'/etc/passwd'"},
        {PROTO_FILE, 4, "cam1//a.tif",
         "bad message: frame 4 'name' is not a plain relative path (an empty component): "
         "'cam1//a.tif'"},
        {PROTO_FILE, 4, "a\nb.tif",
         "bad message: frame 4 'name' is not a plain relative path (a control character "
         "(0x0a)): 'a\\x0ab.tif'"},
        {PROTO_FILE, 4, "", "bad message: frame 4 'name' is not a plain relative path (an empty "
                            "name): ''"},
        {PROTO_FILE, 3, "..", "bad message: frame 3 'experiment' is not a plain name (a '..' "
                              "component): '..'"},
        {PROTO_FILE, 3, "run7/cam1", "bad message: frame 3 'experiment' is not a plain name (a "
                                     "'/' in a single name): 'run7/cam1'"},
        {PROTO_FILE, 3, ".", "bad message: frame 3 'experiment' is not a plain name (a '.' "
                             "component): '.'"},
        {PROTO_TASK, 8, "../../home/x/.bashrc",
         "bad message: frame 8 'output' is not a plain relative path (a '..' component): "
         "'../../home/x/.bashrc'"},
        {PROTO_TASK, 8, "/tmp/x.txt", "bad message: frame 8 'output' is not a plain relative "
                                      "path (an absolute path): '/tmp/x.txt'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s_assert_frame_refused (bad[i].command, bad[i].frame, bad[i].value, strlen (bad[i].value),
                                bad[i].expected);
        // The encoder refuses what the decoder would.
        proto_msg_t msg;
        s_fill (&msg, bad[i].command);
        char **field = bad[i].frame == 3 ? &msg.experiment
                       : bad[i].frame == 4 ? &msg.name
                                           : &msg.output;
        free (*field);
        *field = s_strdup (bad[i].value);
        ck_assert_msg (proto_encode (&msg) == NULL, "encoded '%s'", bad[i].value);
        proto_msg_release (&msg);
    }
    // A NUL inside a name is refused as in any text.
    s_assert_frame_refused (PROTO_FILE, 4, "a\0/../b", 7,
                            "bad message: frame 4 'name' holds a NUL byte at offset 1");
}
END_TEST

// A RESULT's figures are what a vector field can give, and its field's
// header agrees with its size and with nx, ny: nothing absurd is stored.
START_TEST (refuses_a_result_with_absurd_figures_or_a_field_that_does_not_add_up)
{
    s_assert_frame_refused (PROTO_RESULT, 10, "1e300", 5,
                            "bad message: frame 10 'nx' is not a whole number in 0..65535: "
                            "'1.0000000000000001e+300'");
    s_assert_frame_refused (PROTO_RESULT, 11, "63.5", 4,
                            "bad message: frame 11 'ny' is not a whole number in 0..65535: "
                            "'63.5'");
    s_assert_frame_refused (PROTO_RESULT, 11, "-1", 2,
                            "bad message: frame 11 'ny' is not a whole number in 0..65535: '-1'");
    s_assert_frame_refused (PROTO_RESULT, 6, "nan", 3,
                            "bad message: frame 6 'mean_u' is not a finite number: 'nan'");
    s_assert_frame_refused (PROTO_RESULT, 12, "-inf", 4,
                            "bad message: frame 12 'vorticity' is not a finite number: '-inf'");
    s_assert_frame_refused (PROTO_RESULT, 9, "1.5", 3,
                            "bad message: frame 9 'valid_fraction' is not in 0..1: '1.5'");
    s_assert_frame_refused (PROTO_RESULT, 13, "garbage!", 8,
                            "bad message: frame 13 'field' is 8 bytes, shorter than its 32-byte "
                            "header");
    unsigned char blob[64] = "XXXX";
    s_assert_frame_refused (PROTO_RESULT, 13, blob, sizeof blob,
                            "bad message: frame 13 'field' has magic 'XXXX', expected 'PVF1', 'PVF3', 'PVS1' or 'PVS3'");
    // A header claiming more vectors than the bytes hold (and an
    // overflowing product): refused from the header alone.
    memcpy (blob, "PVF1\xff\xff\xff\xff\xff\xff\xff\xff", 12);
    s_assert_frame_refused (PROTO_RESULT, 13, blob, sizeof blob,
                            "bad message: frame 13 'field' has absurd dimensions 4294967295 x "
                            "4294967295");
    memcpy (blob, "PVF1\x10\0\0\0\x10\0\0\0", 12);
    s_assert_frame_refused (PROTO_RESULT, 13, blob, sizeof blob,
                            "bad message: frame 13 'field' is 64 bytes, but 16 x 16 vectors "
                            "need 3360");
    // A consistent field, but of another size than the figures say.
    proto_msg_t msg;
    s_fill (&msg, PROTO_RESULT);
    s_field_blob (&msg, 4, 2);
    msg.figures[PROTO_FIG_NX] = 127;
    zmsg_t *zmsg = proto_encode (&msg);
    ck_assert_ptr_null (zmsg);
    msg.figures[PROTO_FIG_NX] = 4;
    zmsg = proto_encode (&msg);
    ck_assert_ptr_nonnull (zmsg);
    s_set_frame_str (zmsg, 10, "5");
    s_assert_refused (&zmsg, "bad message: frame 13 'field' is 4 x 2 vectors, but nx x ny say "
                             "5 x 2");
    // No field at all (store_fields none, an exec processor): figures alone.
    free (msg.blob);
    msg.blob = NULL, msg.blob_size = 0;
    msg.figures[PROTO_FIG_NX] = msg.figures[PROTO_FIG_NY] = 0;
    s_assert_round_trip (&msg);
    proto_msg_release (&msg);
}
END_TEST

START_TEST (refuses_a_field_blob_over_its_limit_and_takes_one_at_it)
{
    // zframe_new (NULL, size) allocates without copying: quick even at 64 MiB.
    zmsg_t *zmsg = s_encoded (PROTO_RESULT);
    zframe_t *blob = s_frame_at (zmsg, 13);
    zmsg_remove (zmsg, blob);
    zframe_destroy (&blob);
    blob = zframe_new (NULL, (size_t) PROTO_MAX_FIELD + 1);
    ck_assert_ptr_nonnull (blob);
    zmsg_append (zmsg, &blob);
    s_assert_refused (&zmsg, "bad message: frame 13 'field' is 67108865 bytes, at most 67108864");

    zmsg = s_encoded (PROTO_RESULT);
    blob = s_frame_at (zmsg, 13);
    zmsg_remove (zmsg, blob);
    zframe_destroy (&blob);
    zmsg_destroy (&zmsg);
    // The largest field within the limit: 2271 x 2273 vectors, 67105811 bytes.
    proto_msg_t msg;
    s_fill (&msg, PROTO_RESULT);
    s_field_blob (&msg, 2271, 2273);
    ck_assert_uint_le (msg.blob_size, PROTO_MAX_FIELD);
    s_assert_round_trip (&msg);
    proto_msg_release (&msg);
}
END_TEST

START_TEST (refuses_an_empty_message_a_lone_version_and_no_message_at_all)
{
    zmsg_t *zmsg = zmsg_new ();
    s_assert_refused (&zmsg, "bad message: empty message");
    zmsg = NULL;
    s_assert_refused (&zmsg, "bad message: empty message");
    const char *version[] = {PROTO_VERSION};
    zmsg = s_zmsg (1, version);
    s_assert_refused (&zmsg, "bad message: no command frame after the version");
    const char *other[] = {"hello"};
    zmsg = s_zmsg (1, other);
    s_assert_refused (&zmsg, "bad message: protocol 'hello', expected 'PIVF02'");

    // The error buffer may be short or absent: the line is cut, nothing overflows.
    proto_msg_t msg;
    char err[16];
    memset (err, 'z', sizeof err);
    zmsg = s_zmsg (1, version);
    ck_assert_int_eq (proto_decode (&zmsg, &msg, err, 8), -1);
    ck_assert_str_eq (err, "bad mes");
    ck_assert_int_eq (err[8], 'z');
    zmsg = s_zmsg (1, version);
    ck_assert_int_eq (proto_decode (&zmsg, &msg, NULL, 0), -1);
    ck_assert_ptr_null (zmsg);
}
END_TEST

// A fixed-seed generator, the same on every platform.
static uint64_t s_rng = 0x9e3779b97f4a7c15u;

static uint32_t
s_random (void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t) (s_rng >> 11);
}

// A frame likely to get past the early checks: digits, a sign, text or noise.
static void
s_add_random_frame (zmsg_t *zmsg)
{
    unsigned char buf[48];
    size_t size = s_random () % 26;
    int kind = (int) (s_random () % 5);
    for (size_t i = 0; i < size; i++) {
        if (kind == 0)
            buf[i] = (unsigned char) ('0' + s_random () % 10);
        else if (kind == 1)
            buf[i] = (unsigned char) (i == 0 && s_random () % 2 ? '-' : '0' + s_random () % 10);
        else if (kind == 2)
            buf[i] = (unsigned char) (0x20 + s_random () % 0x5f);
        else if (kind == 3)
            buf[i] = (unsigned char) (0x80 + s_random () % 0x80);
        else
            buf[i] = (unsigned char) s_random ();
    }
    zmsg_addmem (zmsg, buf, size);
}

static zmsg_t *
s_random_message (void)
{
    zmsg_t *zmsg = NULL;
    int mode = (int) (s_random () % 3);
    if (mode == 0) {
        // Noise: any number of frames of any bytes.
        zmsg = zmsg_new ();
        int frames = (int) (s_random () % 40);
        for (int f = 0; f < frames; f++) {
            unsigned char buf[32];
            size_t size = s_random () % sizeof buf;
            for (size_t i = 0; i < size; i++)
                buf[i] = (unsigned char) s_random ();
            zmsg_addmem (zmsg, buf, size);
        }
    }
    else if (mode == 1) {
        // The right version, a command (usually known), then plausible frames.
        zmsg = zmsg_new ();
        zmsg_addstr (zmsg, PROTO_VERSION);
        char command = s_random () % 8 ? s_commands[s_random () % S_NCOMMANDS]
                                       : (char) s_random ();
        zmsg_addmem (zmsg, &command, 1);
        int frames = (int) (s_random () % 16);
        for (int f = 0; f < frames; f++)
            s_add_random_frame (zmsg);
    }
    else {
        // A valid message, damaged once.
        zmsg = s_encoded (s_commands[s_random () % S_NCOMMANDS]);
        int index = (int) (s_random () % zmsg_size (zmsg));
        zframe_t *frame = s_frame_at (zmsg, index);
        switch (s_random () % 5) {
        case 0:
            if (zframe_size (frame))
                zframe_data (frame)[s_random () % zframe_size (frame)] ^=
                    (unsigned char) (1 + s_random () % 255);
            break;
        case 1: {
            // zframe_reset frees the old data first: cut a copy.
            zframe_t *copy = zframe_dup (frame);
            zframe_reset (frame, zframe_data (copy), zframe_size (copy) / 2);
            zframe_destroy (&copy);
            break;
        }
        case 2:
            s_drop_frame (zmsg, index);
            break;
        case 3:
            zmsg_append (zmsg, &(zframe_t *){zframe_dup (frame)});
            break;
        default:
            s_add_random_frame (zmsg);
        }
    }
    return zmsg;
}

START_TEST (survives_ten_thousand_random_messages_refusing_or_decoding_each)
{
    int accepted = 0, refused = 0;
    for (int i = 0; i < 10000; i++) {
        zmsg_t *zmsg = s_random_message ();
        proto_msg_t msg;
        char err[512] = "";
        int rc = proto_decode (&zmsg, &msg, err, sizeof err);
        ck_assert_ptr_null (zmsg);
        if (rc == 0) {
            // Whatever is accepted is sent again unchanged.
            accepted++;
            s_assert_round_trip (&msg);
            proto_msg_release (&msg);
        }
        else {
            refused++;
            ck_assert_int_eq (rc, -1);
            ck_assert_msg (strncmp (err, "bad message: ", 13) == 0, "'%s'", err);
            ck_assert_msg (strchr (err, '\n') == NULL, "'%s' is not one line", err);
            ck_assert (s_is_zeroed (&msg));
        }
    }
    // The generator reaches past the first checks, both ways.
    ck_assert_int_gt (accepted, 100);
    ck_assert_int_gt (refused, 5000);
}
END_TEST

// A field as the engine lays it out: a regular grid, centres at half pixels.
static piv_field_t *
s_field (int nx, int ny, int window, int step)
{
    piv_field_t *field = piv_field_new (nx, ny);
    ck_assert_ptr_nonnull (field);
    field->window = window;
    field->step = step;
    field->runs = 2;
    int mx = 3, my = 5;
    for (int j = 0, k = 0; j < ny; j++)
        for (int i = 0; i < nx; i++, k++) {
            field->x[k] = mx + i * step + (window - 1) * 0.5f;
            field->y[k] = my + j * step + (window - 1) * 0.5f;
            field->u[k] = (float) (s_random () % 20001) / 1000.0f - 10.0f;
            field->v[k] = -(float) (s_random () % 7919) / 977.0f;
            field->peak_ratio[k] = 1.0f + (float) (s_random () % 1000) / 100.0f;
            field->flags[k] = (uint8_t) (k % 3);
        }
    return field;
}

static void
s_assert_same_field (const piv_field_t *a, const piv_field_t *b)
{
    ck_assert_int_eq (a->nx, b->nx);
    ck_assert_int_eq (a->ny, b->ny);
    ck_assert_int_eq (a->window, b->window);
    ck_assert_int_eq (a->step, b->step);
    ck_assert_int_eq (a->runs, b->runs);
    size_t n = (size_t) a->nx * a->ny;
    ck_assert (memcmp (a->x, b->x, n * sizeof (float)) == 0);
    ck_assert (memcmp (a->y, b->y, n * sizeof (float)) == 0);
    ck_assert (memcmp (a->u, b->u, n * sizeof (float)) == 0);
    ck_assert (memcmp (a->v, b->v, n * sizeof (float)) == 0);
    ck_assert (memcmp (a->peak_ratio, b->peak_ratio, n * sizeof (float)) == 0);
    ck_assert (memcmp (a->flags, b->flags, n) == 0);
}

// proto_recv reads straight off a socket: the identity a ROUTER adds comes
// back apart, a refused message is consumed whole (even past the frame
// limit), and the message after it decodes as if nothing had happened.
START_TEST (proto_recv_takes_one_message_off_a_router_refused_or_not)
{
    zsock_t *router = zsock_new_router ("inproc://proto-recv");
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    ck_assert (router && dealer);
    zsock_set_identity (dealer, "peer-1");
    ck_assert_int_eq (zsock_connect (dealer, "inproc://proto-recv"), 0);
    proto_msg_t file = {.command = PROTO_FILE, .seq = 7, .experiment = "run7",
                        .name = "shot 1_a.tif", .size = 123, .time_ns = -5};
    ck_assert_int_eq (proto_send (&file, NULL, dealer), 0);
    // 40 frames of junk, over the 32-frame limit.
    for (int i = 0; i < 40; i++)
        zstr_sendm (dealer, "junk");
    zstr_send (dealer, "end");
    ck_assert_int_eq (proto_send (&file, NULL, dealer), 0);

    zframe_t *identity = NULL;
    proto_msg_t msg;
    char err[256];
    ck_assert_int_eq (proto_recv (router, &identity, &msg, err, sizeof err), 0);
    ck_assert (identity && zframe_streq (identity, "peer-1"));
    ck_assert_int_eq (msg.command, PROTO_FILE);
    ck_assert_int_eq (msg.seq, 7);
    ck_assert_str_eq (msg.experiment, "run7");
    ck_assert_str_eq (msg.name, "shot 1_a.tif");
    ck_assert_int_eq (msg.size, 123);
    ck_assert_int_eq (msg.time_ns, -5);
    proto_msg_release (&msg);
    zframe_destroy (&identity);

    ck_assert_int_eq (proto_recv (router, &identity, &msg, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "protocol 'junk'"), "%s", err);
    ck_assert (identity && zframe_streq (identity, "peer-1"));
    ck_assert_int_eq (msg.command, 0);
    zframe_destroy (&identity);

    ck_assert_int_eq (proto_recv (router, &identity, &msg, err, sizeof err), 0);
    ck_assert_int_eq (msg.seq, 7);
    ck_assert_str_eq (msg.name, "shot 1_a.tif");
    proto_msg_release (&msg);
    zframe_destroy (&identity);
    ck_assert (!(zsock_events (router) & ZMQ_POLLIN));
    zsock_destroy (&dealer);
    zsock_destroy (&router);
}
END_TEST

// ---------------------------------------------------------------------------
// BATCH (doc/protocol.md §4.13)

// Commands that may travel in a BATCH: all but REQUEST and REPLY.
static const char s_batchable[] = {PROTO_FILE,      PROTO_ACK,    PROTO_HELLO,
                                   PROTO_READY,     PROTO_HEARTBEAT, PROTO_TASK,
                                   PROTO_RESULT,    PROTO_FAILED, PROTO_RECORDED,
                                   PROTO_DISCONNECT};
#define S_NBATCHABLE ((int) sizeof s_batchable)

// A BATCH message holding one filled message of each batchable command.
static void
s_fill_batch (proto_msg_t *batch)
{
    memset (batch, 0, sizeof *batch);
    batch->command = PROTO_BATCH;
    batch->count = S_NBATCHABLE;
    batch->batch = calloc (S_NBATCHABLE, sizeof *batch->batch);
    ck_assert_ptr_nonnull (batch->batch);
    for (int i = 0; i < S_NBATCHABLE; i++)
        s_fill (&batch->batch[i], s_batchable[i]);
}

START_TEST (a_batch_of_every_batchable_command_round_trips_one_frame_each)
{
    proto_msg_t batch;
    s_fill_batch (&batch);
    zmsg_t *zmsg = proto_encode (&batch);
    ck_assert_ptr_nonnull (zmsg);
    ck_assert_int_eq ((int) zmsg_size (zmsg), 3 + S_NBATCHABLE);
    ck_assert (zframe_streq (s_frame_at (zmsg, 0), PROTO_VERSION));
    ck_assert (zframe_streq (s_frame_at (zmsg, 1), "M"));
    char count[8];
    snprintf (count, sizeof count, "%d", S_NBATCHABLE);
    ck_assert (zframe_streq (s_frame_at (zmsg, 2), count));
    proto_msg_t copy;
    s_decode_ok (&zmsg, &copy);
    ck_assert_int_eq (copy.command, PROTO_BATCH);
    ck_assert_uint_eq (proto_count (&copy), S_NBATCHABLE);
    for (int i = 0; i < S_NBATCHABLE; i++)
        s_assert_same (proto_at (&batch, (size_t) i), proto_at (&copy, (size_t) i));
    proto_msg_release (&copy);
    ck_assert (s_is_zeroed (&copy));
    proto_msg_release (&batch);

    // A message alone counts as one: itself.
    proto_msg_t ready = {.command = PROTO_READY, .count = 3};
    ck_assert_uint_eq (proto_count (&ready), 1);
    ck_assert_ptr_eq (proto_at (&ready, 0), &ready);
}
END_TEST

START_TEST (lays_out_batch_records_as_the_protocol_document_says)
{
    proto_msg_t batch;
    s_fill_batch (&batch);
    zmsg_t *zmsg = proto_encode (&batch);
    ck_assert_ptr_nonnull (zmsg);
    // FILE: each field followed by a NUL.
    static const char file[] = "F42\0run7\0cam1/img_0001_a.tif\0008388608\0001700000000123456789";
    zframe_t *f = s_frame_at (zmsg, 3);
    ck_assert_uint_eq (zframe_size (f), sizeof file);  // the last NUL is the array's own
    ck_assert (memcmp (zframe_data (f), file, sizeof file) == 0);
    // RESULT: the blob is the rest of the record, no NUL after it.
    for (int i = 0; i < S_NBATCHABLE; i++) {
        if (s_batchable[i] != PROTO_RESULT)
            continue;
        f = s_frame_at (zmsg, 3 + i);
        const proto_msg_t *r = &batch.batch[i];
        ck_assert_int_eq (zframe_data (f)[0], 'D');
        ck_assert (memcmp (zframe_data (f) + zframe_size (f) - r->blob_size, r->blob,
                           r->blob_size) == 0);
    }
    // DISCONNECT has no fields: its command byte alone.
    f = s_frame_at (zmsg, 3 + S_NBATCHABLE - 1);
    ck_assert_uint_eq (zframe_size (f), 1);
    ck_assert_int_eq (zframe_data (f)[0], 'Q');
    zmsg_destroy (&zmsg);
    proto_msg_release (&batch);
}
END_TEST

START_TEST (refuses_a_malformed_batch_naming_the_message_at_fault)
{
    static const struct {
        const char *why;
        int n;
        const char *frames[4];
        size_t sizes[4];
        const char *expected;
    } cases[] = {
        {"count and messages disagree", 4, {"PIVF02", "M", "3", "R8"}, {6, 1, 1, 3},
         "bad message: BATCH count 3 but 1 messages follow"},
        {"count over the limit", 4, {"PIVF02", "M", "1025", "R8"}, {6, 1, 4, 3},
         "bad message: BATCH count 1025, at most 1024"},
        {"no count", 2, {"PIVF02", "M"}, {6, 1}, "bad message: BATCH needs 3 frames, got 2"},
        {"a batch in a batch", 4, {"PIVF02", "M", "1", "M1"}, {6, 1, 1, 3},
         "bad message: BATCH message 0: a BATCH cannot travel in a BATCH"},
        {"a request in a batch", 4, {"PIVF02", "M", "1", "Cstatus"}, {6, 1, 1, 8},
         "bad message: BATCH message 0: a REQUEST cannot travel in a BATCH"},
        {"a field not ended", 4, {"PIVF02", "M", "1", "R8"}, {6, 1, 1, 2},
         "bad message: BATCH message 0: frame 2 is not ended by a NUL byte"},
        {"a missing field", 4, {"PIVF02", "M", "1", "K77"}, {6, 1, 1, 4},
         "bad message: BATCH message 0: RECORDED needs 4 frames, got 3"},
        {"a bad number", 4, {"PIVF02", "M", "1", "R-1"}, {6, 1, 1, 4},
         "bad message: BATCH message 0: frame 2 'credit' is not a number: '-1'"},
        {"an unknown command", 4, {"PIVF02", "M", "1", "Z"}, {6, 1, 1, 1},
         "bad message: BATCH message 0: unknown command 0x5a"},
        {"an empty record", 4, {"PIVF02", "M", "1", ""}, {6, 1, 1, 0},
         "bad message: BATCH message 0: an empty record"},
        {"bad text", 4, {"PIVF02", "M", "1", "X1\0001\0\xff\0"}, {6, 1, 1, 7},
         "bad message: BATCH message 0: frame 4 'error' is not valid UTF-8 at offset 0"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        zmsg_t *zmsg = s_zmsg_sized (cases[c].n, cases[c].frames, cases[c].sizes);
        proto_msg_t msg;
        memset (&msg, 0xa5, sizeof msg);
        char err[512] = "";
        ck_assert_msg (proto_decode (&zmsg, &msg, err, sizeof err) == -1, "%s", cases[c].why);
        ck_assert_msg (strcmp (err, cases[c].expected) == 0, "%s: '%s'", cases[c].why, err);
        ck_assert_msg (s_is_zeroed (&msg), "%s: message left", cases[c].why);
    }
    // The second message is at fault, the first was fine: all refused.
    proto_msg_t batch;
    s_fill_batch (&batch);
    zmsg_t *zmsg = proto_encode (&batch);
    s_set_frame (zmsg, 4, "A2\0" "1\0", 5);
    s_assert_refused (&zmsg, "bad message: BATCH message 1: ACK count 2 but 1 seq frames follow");
    proto_msg_release (&batch);
}
END_TEST

START_TEST (a_batch_gathers_messages_for_one_send_and_one_alone_goes_as_itself)
{
    zsock_t *router = zsock_new_router ("inproc://proto-batch");
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    ck_assert (router && dealer);
    zsock_set_identity (dealer, "watcher-1");
    ck_assert_int_eq (zsock_connect (dealer, "inproc://proto-batch"), 0);
    proto_batch_t *batch = proto_batch_new ();
    ck_assert_ptr_nonnull (batch);

    // Refused: what never travels in a BATCH, and what the encoder refuses.
    proto_msg_t request = {.command = PROTO_REQUEST, .text = "status"};
    proto_msg_t reply = {.command = PROTO_REPLY, .status = 200, .text = "{}"};
    proto_msg_t nested = {.command = PROTO_BATCH};
    proto_msg_t bad = {.command = PROTO_FILE, .experiment = "run7", .name = "\xff.tif"};
    ck_assert_int_eq (proto_batch_add (batch, &request), -1);
    ck_assert_int_eq (proto_batch_add (batch, &reply), -1);
    ck_assert_int_eq (proto_batch_add (batch, &nested), -1);
    ck_assert_int_eq (proto_batch_add (batch, &bad), -1);
    ck_assert_uint_eq (proto_batch_size (batch), 0);
    ck_assert_int_eq (proto_batch_send (batch, NULL, dealer), 0);  // nothing to send

    // One message goes as itself; the buffer it was encoded from may change.
    char name[32] = "shot_0001_a.tif";
    proto_msg_t file = {.command = PROTO_FILE, .seq = 1, .experiment = "run7", .name = name,
                        .size = 10, .time_ns = 5};
    ck_assert_int_eq (proto_batch_add (batch, &file), 0);
    strcpy (name, "changed");
    ck_assert_int_eq (proto_batch_send (batch, NULL, dealer), 0);
    ck_assert_uint_eq (proto_batch_size (batch), 0);
    zmsg_t *zmsg = s_recv (router);
    zframe_destroy (&(zframe_t *) {zmsg_pop (zmsg)});
    ck_assert_int_eq ((int) zmsg_size (zmsg), 7);
    proto_msg_t got;
    s_decode_ok (&zmsg, &got);
    ck_assert_int_eq (got.command, PROTO_FILE);
    ck_assert_str_eq (got.name, "shot_0001_a.tif");
    proto_msg_release (&got);

    // 100 go as one BATCH of 103 frames, taken off the socket by proto_recv.
    for (int i = 0; i < 100; i++) {
        snprintf (name, sizeof name, "shot_%04d_%c.tif", i / 2, i % 2 ? 'b' : 'a');
        file.seq = (uint64_t) i + 1;
        ck_assert_int_eq (proto_batch_add (batch, &file), 0);
    }
    ck_assert_uint_eq (proto_batch_size (batch), 100);
    ck_assert_int_eq (proto_batch_send (batch, NULL, dealer), 0);
    zframe_t *identity = NULL;
    char err[256] = "";
    ck_assert_msg (proto_recv (router, &identity, &got, err, sizeof err) == 0, "%s", err);
    ck_assert (identity && zframe_streq (identity, "watcher-1"));
    zframe_destroy (&identity);
    ck_assert_int_eq (got.command, PROTO_BATCH);
    ck_assert_uint_eq (proto_count (&got), 100);
    for (size_t i = 0; i < 100; i++) {
        proto_msg_t *one = proto_at (&got, i);
        char want[32];
        snprintf (want, sizeof want, "shot_%04zu_%c.tif", i / 2, i % 2 ? 'b' : 'a');
        ck_assert_int_eq (one->command, PROTO_FILE);
        ck_assert_uint_eq (one->seq, i + 1);
        ck_assert_str_eq (one->name, want);
    }
    proto_msg_release (&got);

    // A full batch takes no more; sent, it takes again.
    for (int i = 0; i < PROTO_MAX_BATCH; i++)
        ck_assert_int_eq (proto_batch_add (batch, &file), 0);
    ck_assert_int_eq (proto_batch_add (batch, &file), -1);
    ck_assert_int_eq (proto_batch_send (batch, NULL, dealer), 0);
    ck_assert_int_eq (proto_batch_add (batch, &file), 0);
    ck_assert_msg (proto_recv (router, &identity, &got, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq (proto_count (&got), PROTO_MAX_BATCH);
    proto_msg_release (&got);
    zframe_destroy (&identity);

    // A BATCH message sent with proto_send arrives the same.
    proto_msg_t all;
    s_fill_batch (&all);
    ck_assert_int_eq (proto_send (&all, NULL, dealer), 0);
    ck_assert_msg (proto_recv (router, &identity, &got, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq (proto_count (&got), S_NBATCHABLE);
    for (int i = 0; i < S_NBATCHABLE; i++)
        s_assert_same (proto_at (&all, (size_t) i), proto_at (&got, (size_t) i));
    proto_msg_release (&got);
    proto_msg_release (&all);
    zframe_destroy (&identity);

    proto_batch_destroy (&batch);
    ck_assert_ptr_null (batch);
    zsock_destroy (&dealer);
    zsock_destroy (&router);
}
END_TEST

START_TEST (a_batch_no_peer_can_take_is_refused_whole_and_leaves_the_batch_empty)
{
    // A ROUTER told to refuse unknown peers: nothing of the batch goes.
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    ck_assert_ptr_nonnull (router);
    zsock_set_router_mandatory (router, 1);
    proto_batch_t *batch = proto_batch_new ();
    proto_msg_t ok = {.command = PROTO_RECORDED, .pair = 1, .attempt = 1};
    ck_assert_int_eq (proto_batch_add (batch, &ok), 0);
    ck_assert_int_eq (proto_batch_add (batch, &ok), 0);
    zframe_t *nobody = zframe_new ("nobody", 6);
    ck_assert_int_eq (proto_batch_send (batch, nobody, router), -1);
    ck_assert_uint_eq (proto_batch_size (batch), 0);
    zframe_destroy (&nobody);
    proto_batch_destroy (&batch);
    zsock_destroy (&router);
}
END_TEST

START_TEST (a_field_round_trips_bit_exact)
{
    piv_field_t *field = s_field (127, 63, 32, 16);
    // Values a replaced or invalid vector may carry.
    field->u[0] = NAN;
    field->v[0] = -0.0f;
    field->u[1] = INFINITY;
    field->v[1] = -INFINITY;
    field->u[2] = FLT_MIN / 8;  // subnormal
    field->peak_ratio[3] = FLT_MAX;
    unsigned char *buf = NULL;
    size_t size = 0;
    ck_assert_int_eq (piv_field_encode (field, &buf, &size), 0);
    ck_assert_uint_eq (size, 32 + 127 * 63 * 13);
    char err[256] = "";
    piv_field_t *copy = piv_field_decode (buf, size, err, sizeof err);
    ck_assert_msg (copy != NULL, "%s", err);
    s_assert_same_field (field, copy);
    piv_field_destroy (&copy);

    // Through a RESULT, over the wire format, and back.
    proto_msg_t result;
    s_fill (&result, PROTO_RESULT);
    free (result.blob);
    result.blob = buf;
    result.blob_size = size;
    zmsg_t *zmsg = proto_encode (&result);
    proto_msg_t got;
    s_decode_ok (&zmsg, &got);
    copy = piv_field_decode (got.blob, got.blob_size, err, sizeof err);
    ck_assert_msg (copy != NULL, "%s", err);
    s_assert_same_field (field, copy);
    piv_field_destroy (&copy);
    proto_msg_release (&got);
    proto_msg_release (&result);
    piv_field_destroy (&field);

    // A single vector, and a single row.
    for (int shape = 0; shape < 2; shape++) {
        field = shape ? s_field (40, 1, 16, 8) : s_field (1, 1, 64, 32);
        ck_assert_int_eq (piv_field_encode (field, &buf, &size), 0);
        copy = piv_field_decode (buf, size, err, sizeof err);
        ck_assert_msg (copy != NULL, "%s", err);
        s_assert_same_field (field, copy);
        piv_field_destroy (&copy);
        piv_field_destroy (&field);
        free (buf);
    }
}
END_TEST

// A stereo field (w and residual) keeps its third component through the
// encoding and a RESULT; a PVF3 blob of a planar field's size is refused.
START_TEST (a_stereo_field_round_trips_with_its_w)
{
    piv_field_t *field = s_field (31, 17, 32, 16);
    ck_assert_int_eq (piv_field_add_w (field), 0);
    size_t n = 31 * 17;
    for (size_t k = 0; k < n; k++) {
        field->w[k] = (float) k * 0.01f - 2.5f;
        field->residual[k] = (float) (k % 7) * 0.125f;
    }
    field->residual[5] = NAN;  // a camera that did not see the vector
    unsigned char *buf = NULL;
    size_t size = 0;
    ck_assert_int_eq (piv_field_encode (field, &buf, &size), 0);
    ck_assert_uint_eq (size, 32 + n * 21);
    ck_assert (memcmp (buf, "PVF3", 4) == 0);
    proto_msg_t result;
    s_fill (&result, PROTO_RESULT);
    free (result.blob);
    result.blob = buf;
    result.blob_size = size;
    result.figures[PROTO_FIG_NX] = 31;
    result.figures[PROTO_FIG_NY] = 17;
    zmsg_t *zmsg = proto_encode (&result);
    ck_assert (zmsg);
    proto_msg_t got;
    s_decode_ok (&zmsg, &got);
    char err[256] = "";
    piv_field_t *copy = piv_field_decode (got.blob, got.blob_size, err, sizeof err);
    ck_assert_msg (copy != NULL, "%s", err);
    s_assert_same_field (field, copy);
    ck_assert (copy->w && copy->residual);
    ck_assert (memcmp (copy->w, field->w, n * sizeof (float)) == 0);
    ck_assert (memcmp (copy->residual, field->residual, n * sizeof (float)) == 0);
    piv_field_t *dup = piv_field_dup (copy);
    ck_assert (dup && dup->w && memcmp (dup->w, field->w, n * sizeof (float)) == 0);
    piv_field_destroy (&dup);
    piv_field_destroy (&copy);
    proto_msg_release (&got);

    // The stereo magic on a planar field's bytes does not add up.
    piv_field_t *planar = s_field (31, 17, 32, 16);
    unsigned char *pbuf;
    size_t psize;
    ck_assert_int_eq (piv_field_encode (planar, &pbuf, &psize), 0);
    memcpy (pbuf, "PVF3", 4);
    ck_assert (piv_field_decode (pbuf, psize, err, sizeof err) == NULL);
    ck_assert_msg (strstr (err, "bad field:") && strstr (err, "need"), "%s", err);
    free (result.blob);
    result.blob = pbuf;
    result.blob_size = psize;
    ck_assert (proto_encode (&result) == NULL);
    proto_msg_release (&result);
    piv_field_destroy (&planar);
    piv_field_destroy (&field);
}
END_TEST

START_TEST (a_field_is_encoded_little_endian_in_the_documented_layout)
{
    piv_field_t *field = piv_field_new (2, 1);
    field->window = 32;
    field->step = 258;
    field->runs = 3;
    field->x[0] = 15.5f, field->x[1] = 273.5f;
    field->y[0] = 1.0f, field->y[1] = 1.0f;
    field->u[0] = 1.0f, field->u[1] = -2.0f;
    field->v[0] = 0.5f, field->v[1] = 0.0f;
    field->peak_ratio[0] = 2.0f, field->peak_ratio[1] = 1000.0f;
    field->flags[0] = PIV_FLAG_VALID, field->flags[1] = PIV_FLAG_INVALID;
    unsigned char *buf;
    size_t size;
    ck_assert_int_eq (piv_field_encode (field, &buf, &size), 0);
    static const unsigned char expected[] = {
        'P',  'V',  'F',  '1',                       // magic
        2,    0,    0,    0,    1, 0, 0, 0,          // nx, ny
        32,   0,    0,    0,    2, 1, 0, 0,          // window, step
        3,    0,    0,    0,                         // runs
        0x00, 0x00, 0x78, 0x41,                      // x0 15.5f
        0x00, 0x00, 0x80, 0x3f,                      // y0 1.0f
        0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,  // u: 1, -2
        0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x00, 0x00,  // v: 0.5, 0
        0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x7a, 0x44,  // peak_ratio: 2, 1000
        0,    2};                                    // flags
    ck_assert_uint_eq (size, sizeof expected);
    ck_assert (memcmp (buf, expected, size) == 0);
    free (buf);
    piv_field_destroy (&field);
}
END_TEST

START_TEST (a_truncated_or_lengthened_field_is_refused_at_every_length)
{
    piv_field_t *field = s_field (5, 4, 16, 8);
    unsigned char *buf;
    size_t size;
    ck_assert_int_eq (piv_field_encode (field, &buf, &size), 0);
    char err[256], expected[256];
    for (size_t cut = 0; cut < size; cut++) {
        // A copy of exactly 'cut' bytes, so that valgrind sees any overread.
        unsigned char *part = malloc (cut ? cut : 1);
        memcpy (part, buf, cut);
        ck_assert_ptr_null (piv_field_decode (part, cut, err, sizeof err));
        if (cut < 32)
            snprintf (expected, sizeof expected,
                      "bad field: %zu bytes, shorter than its 32-byte header", cut);
        else
            snprintf (expected, sizeof expected,
                      "bad field: %zu bytes, but 5 x 4 vectors need 292", cut);
        ck_assert_str_eq (err, expected);
        free (part);
    }
    unsigned char *longer = malloc (size + 1);
    memcpy (longer, buf, size);
    longer[size] = 0;
    ck_assert_ptr_null (piv_field_decode (longer, size + 1, err, sizeof err));
    ck_assert_str_eq (err, "bad field: 293 bytes, but 5 x 4 vectors need 292");
    free (longer);
    ck_assert_ptr_null (piv_field_decode (NULL, 0, err, sizeof err));
    free (buf);
    piv_field_destroy (&field);
}
END_TEST

static void
s_put32 (unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char) (v >> (8 * i));
}

START_TEST (a_corrupted_field_is_refused_with_the_reason)
{
    piv_field_t *field = s_field (5, 4, 16, 8);
    unsigned char *buf;
    size_t size;
    ck_assert_int_eq (piv_field_encode (field, &buf, &size), 0);
    char err[256];

    buf[3] = '2';
    ck_assert_ptr_null (piv_field_decode (buf, size, err, sizeof err));
    ck_assert_str_eq (err, "bad field: magic 'PVF2', expected 'PVF1', 'PVF3', 'PVS1' or 'PVS3'");
    buf[3] = '1';

    buf[32 + 20 * 12 + 7] = 3;  // flags of vector 7
    ck_assert_ptr_null (piv_field_decode (buf, size, err, sizeof err));
    ck_assert_str_eq (err, "bad field: vector 7 has flags 3");
    buf[32 + 20 * 12 + 7] = 1;

    s_put32 (buf + 4, 0);
    ck_assert_ptr_null (piv_field_decode (buf, size, err, sizeof err));
    ck_assert_str_eq (err, "bad field: absurd dimensions 0 x 4");
    s_put32 (buf + 4, UINT32_MAX);
    s_put32 (buf + 8, UINT32_MAX);
    ck_assert_ptr_null (piv_field_decode (buf, size, err, sizeof err));
    ck_assert_str_eq (err, "bad field: absurd dimensions 4294967295 x 4294967295");
    // Dimensions that do not match the size.
    s_put32 (buf + 4, 6);
    s_put32 (buf + 8, 5);
    ck_assert_ptr_null (piv_field_decode (buf, size, err, sizeof err));
    ck_assert_str_eq (err, "bad field: 292 bytes, but 6 x 5 vectors need 422");
    s_put32 (buf + 4, 5);
    s_put32 (buf + 8, 4);
    s_put32 (buf + 16, 0x80000000u);
    ck_assert_ptr_null (piv_field_decode (buf, size, err, sizeof err));
    ck_assert_str_eq (err, "bad field: window 16, step 2147483648 or runs 2 out of range");
    free (buf);
    piv_field_destroy (&field);

    // More vectors in a row than piv_field_new takes, with the size to match.
    size = 32 + ((size_t) (1 << 20) + 1) * 13;
    buf = calloc (1, size);
    memcpy (buf, "PVF1", 4);
    s_put32 (buf + 4, (1u << 20) + 1);
    s_put32 (buf + 8, 1);
    ck_assert_ptr_null (piv_field_decode (buf, size, err, sizeof err));
    ck_assert_str_eq (err, "bad field: 1048577 x 1 vectors refused (too many, or no memory)");
    free (buf);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("proto");
    TCase *tc = tcase_create ("proto");
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, round_trips_every_command_with_all_its_fields);
    tcase_add_test (tc, round_trips_the_extremes_of_every_number_type);
    tcase_add_test (tc, round_trips_multibyte_text_and_text_of_exactly_the_limit);
    tcase_add_test (tc, lays_out_each_command_as_the_protocol_document_says);
    tcase_add_test (tc, sends_absent_text_as_an_empty_frame_and_an_absent_blob_as_an_empty_one);
    tcase_add_test (tc, a_stereo_task_carries_four_frames_and_its_rig_and_half_a_set_is_refused);
    tcase_add_test (tc, refuses_to_encode_what_a_peer_would_refuse);
    tcase_add_test (tc, an_ensemble_chunk_and_its_partial_are_refused_unless_they_make_sense);
    tcase_add_test (tc, names_every_command_and_calls_an_unknown_byte_a_question_mark);
    tcase_add_test (tc, release_frees_everything_and_leaves_an_empty_message);
    tcase_add_test (tc, a_dealer_reaches_the_router_and_each_reply_reaches_the_right_dealer);
    tcase_add_test (tc, a_send_that_would_block_fails_at_once_and_sends_nothing);
    tcase_add_test (tc, refuses_another_protocol_version);
    tcase_add_test (tc, refuses_an_unknown_command);
    tcase_add_test (tc, refuses_a_message_with_a_missing_frame);
    tcase_add_test (tc, refuses_a_message_with_an_extra_frame);
    tcase_add_test (tc, refuses_a_number_field_that_is_not_a_number);
    tcase_add_test (tc, result_figures_are_named_as_the_quantities_of_the_table);
    tcase_add_test (tc, refuses_numbers_beyond_their_type_and_takes_those_at_the_edge);
    tcase_add_test (tc, refuses_text_that_is_not_valid_utf8);
    tcase_add_test (tc, refuses_text_with_an_embedded_nul);
    tcase_add_test (tc, refuses_text_longer_than_the_limit);
    tcase_add_test (tc, refuses_a_field_blob_over_its_limit_and_takes_one_at_it);
    tcase_add_test (tc, refuses_a_file_or_task_whose_names_leave_their_root);
    tcase_add_test (tc, refuses_a_result_with_absurd_figures_or_a_field_that_does_not_add_up);
    tcase_add_test (tc, refuses_an_empty_message_a_lone_version_and_no_message_at_all);
    tcase_add_test (tc, survives_ten_thousand_random_messages_refusing_or_decoding_each);
    tcase_add_test (tc, proto_recv_takes_one_message_off_a_router_refused_or_not);
    tcase_add_test (tc, a_batch_of_every_batchable_command_round_trips_one_frame_each);
    tcase_add_test (tc, lays_out_batch_records_as_the_protocol_document_says);
    tcase_add_test (tc, refuses_a_malformed_batch_naming_the_message_at_fault);
    tcase_add_test (tc, a_batch_gathers_messages_for_one_send_and_one_alone_goes_as_itself);
    tcase_add_test (tc, a_batch_no_peer_can_take_is_refused_whole_and_leaves_the_batch_empty);
    tcase_add_test (tc, a_field_round_trips_bit_exact);
    tcase_add_test (tc, a_stereo_field_round_trips_with_its_w);
    tcase_add_test (tc, a_field_is_encoded_little_endian_in_the_documented_layout);
    tcase_add_test (tc, a_truncated_or_lengthened_field_is_refused_at_every_length);
    tcase_add_test (tc, a_corrupted_field_is_refused_with_the_reason);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return tu_run_suite (s_suite ());
}
