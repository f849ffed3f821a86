// proto.h — the pivfarm wire protocol: every constant in one place, and the
// codec that turns ZeroMQ multipart messages into proto_msg_t and back. The
// protocol is written down in prose in doc/protocol.md; this header and that
// document change together. Only common/ knows the wire format.

#ifndef COMMON_PROTO_H
#define COMMON_PROTO_H

#include <czmq.h>
#include <stddef.h>
#include <stdint.h>

// First frame of every message: the protocol name and version. A peer
// speaking another version is refused with a clear error.
#define PROTO_VERSION "PIVF02"

// Second frame: one byte, the command.
// ingest socket (watcher DEALER -> broker ROUTER, and back)
#define PROTO_FILE 'F'       // watcher: a file is complete
#define PROTO_ACK 'A'        // broker: these events are committed
// work socket (agent DEALER <-> broker ROUTER)
#define PROTO_HELLO 'H'      // agent: who I am
#define PROTO_READY 'R'      // agent: I can take this many more tasks
#define PROTO_HEARTBEAT 'B'  // both: I am alive
#define PROTO_TASK 'T'       // broker: process this pair
#define PROTO_RESULT 'D'     // agent: the pair is done, here is its field
#define PROTO_FAILED 'X'     // agent: the pair could not be processed
#define PROTO_RECORDED 'K'   // broker: that result or failure is committed
#define PROTO_DEFER 'Y'      // agent: cannot do this pair now for a reason of its own (its
                             // results disk is full): requeue it, not counted as an attempt
#define PROTO_DISCONNECT 'Q' // both: I am going away
#define PROTO_ENSEMBLE 'E'   // broker: add these pairs' correlation planes into one partial
                             // sum of an ensemble job's pass (doc/protocol.md §4.14)
#define PROTO_PARTIAL 'G'    // agent: the partial sum of that chunk, or why there is none
// control socket (pivctl, status page DEALER/REQ -> broker ROUTER)
#define PROTO_REQUEST 'C'    // client: a command and its arguments
#define PROTO_REPLY 'P'      // broker: status code and body
// any socket: several of the messages above in one (not REQUEST, REPLY or
// BATCH itself), each handled as if it had come alone
#define PROTO_BATCH 'M'

// Limits: the decoder refuses anything larger (and the sockets are set to
// refuse messages beyond PROTO_MAX_MESSAGE bytes).
#define PROTO_MAX_FRAMES 32
#define PROTO_MAX_STRING 4096           // bytes in one text field
#define PROTO_MAX_BODY (1 << 20)        // bytes in a REPLY's body (status as JSON)
#define PROTO_MAX_ACK (PROTO_MAX_FRAMES - 3)  // sequence numbers in one ACK
#define PROTO_MAX_FIELD (64u << 20)     // bytes of a binary field (vector field)
#define PROTO_MAX_MESSAGE (80 << 20)    // ZMQ_MAXMSGSIZE on every socket
#define PROTO_MAX_BATCH 1024            // messages in one BATCH
#define PROTO_MAX_CHUNK 64              // pairs in one ENSEMBLE

// Publish topics (PUB :5553, doc/protocol.md §6): "feedback.<exp>/",
// "result.<exp>/", "failed.<exp>/", "field.<exp>/" (the prefix, the
// experiment, PROTO_TOPIC_END: as names hold no '/', "feedback.run8/" is
// never a prefix of another experiment's topic), "agents" and "state".
#define PROTO_TOPIC_FEEDBACK "feedback."
#define PROTO_TOPIC_RESULT "result."
#define PROTO_TOPIC_FAILED "failed."
#define PROTO_TOPIC_FIELD "field."
#define PROTO_TOPIC_END "/"
#define PROTO_TOPIC_AGENTS "agents"
#define PROTO_TOPIC_STATE "state"

// A decoded message. Which fields are meaningful depends on the command
// (doc/protocol.md lists them); the others are zero or NULL. Strings are
// NUL-terminated and owned by the message; so is 'blob'.
typedef struct proto_msg_s {
    char command;         // PROTO_* command byte
    uint64_t seq;         // FILE, ACK: the watcher's event sequence number; ENSEMBLE,
                          // PARTIAL: the ensemble job
    uint64_t pair;        // TASK, RESULT, FAILED, DEFER, RECORDED: pair id; ENSEMBLE,
                          // PARTIAL: the chunk (0-based, within the pass)
    uint32_t attempt;     // TASK, RESULT, FAILED, DEFER, RECORDED, ENSEMBLE, PARTIAL: attempt
    uint32_t count;       // READY: credit; HELLO: cores; ACK: number of seqs; BATCH: messages;
                          // ENSEMBLE, PARTIAL: the pass (0-based)
    uint32_t window;      // ENSEMBLE: the pass's windows, px
    uint32_t overlap;     // ENSEMBLE: their overlap, percent
    int64_t size;         // FILE: bytes
    int64_t time_ns;      // FILE: mtime; RESULT: compute ns; HEARTBEAT: sender's clock
    char *experiment;     // FILE, TASK, ENSEMBLE
    char *name;           // FILE: path relative to the experiment; HELLO: agent id
    char *text;           // HELLO: host; FAILED, DEFER, PARTIAL: error; REQUEST: command line;
                          // REPLY: body; ENSEMBLE: the frames, "A\nB\n" a pair (broker's paths)
    char *path_a;         // TASK: frame A (broker's path)
    char *path_b;         // TASK: frame B, or empty for a multipage file
    char *path_c;         // TASK: a stereo set's camera 2 frame A, else empty
    char *path_d;         // TASK: a stereo set's camera 2 frame B, else empty
    char *cameras;        // TASK: a stereo set's rig calibration (piv/cameras.h text), else empty
    char *settings;       // TASK, ENSEMBLE: PIV settings ("passes=64,32,16 overlap=50 ...");
                          // HELLO: capabilities
    char *output;         // TASK: where to write the txt result (broker's path); RESULT: written path
    uint64_t *seqs;       // ACK: 'count' sequence numbers
    double figures[8];    // RESULT: PROTO_FIG_* summary figures
    uint32_t status;      // REPLY: 200 ok, 400 bad request, 403 refused, 500 error
    unsigned char *blob;  // RESULT: the vector field, as piv_field_encode writes it (piv/field.h);
                          // ENSEMBLE: the predictor (a field, or empty in the first pass);
                          // PARTIAL: the sums, as piv_ensemble_encode writes them
    size_t blob_size;     // its size in bytes
    struct proto_msg_s *batch;  // BATCH: its 'count' messages, decoded as if each came alone
} proto_msg_t;

// RESULT summary figures, in figures[].
enum {
    PROTO_FIG_MEAN_U,          // px
    PROTO_FIG_MEAN_V,          // px
    PROTO_FIG_MEAN_SPEED,      // px
    PROTO_FIG_VALID_FRACTION,  // 0..1
    PROTO_FIG_NX,              // grid columns
    PROTO_FIG_NY,              // grid rows
    PROTO_FIG_VORTICITY,       // mean vorticity, 1/frame (px/px)
    PROTO_FIG_RESERVED
};

// Frees what the message owns and zeroes it (a zeroed message is empty).
void proto_msg_release (proto_msg_t *msg);

// Encodes msg into a new zmsg (version frame, command frame, fields). NULL
// if the command is unknown or a field is over its limit (the encoder
// refuses whatever the decoder would: a peer never gets what it rejects).
// NULL text goes as an empty frame.
zmsg_t *proto_encode (const proto_msg_t *msg);

// Decodes and consumes *zmsg_p (a ROUTER's caller pops the identity
// first). Returns 0, or -1 with a one-line reason in err (wrong version,
// unknown command, missing or extra frames, a number that is not one, a
// string too long or not valid UTF-8 where text is expected, a blob over
// its limit), msg then zeroed. Text fields come back allocated, "" for
// empty. msg must be zeroed or released before.
int proto_decode (zmsg_t **zmsg_p, proto_msg_t *msg, char *err, size_t errlen);

// Sends msg on sock (a ROUTER prefixes a copy of 'identity', which the
// caller keeps; NULL for DEALER/PUB). Never blocks: returns 0, or -1 when
// encoding is refused or the socket cannot take the message now.
int proto_send (const proto_msg_t *msg, zframe_t *identity, zsock_t *sock);

// Receives one message from sock and decodes it, without a zmsg: for a
// ROUTER pass identity_p, which gets a new frame with the sender's identity
// (the caller destroys it; set even when the message is refused). Returns
// 0; -1 with err for a message the decoder refuses (consumed whole, msg
// zeroed); -2 when interrupted (nothing decoded). A message of more than
// PROTO_MAX_FRAMES frames is refused without keeping the extra frames.
int proto_recv (zsock_t *sock, zframe_t **identity_p, proto_msg_t *msg, char *err, size_t errlen);

// proto_recv, and the CURVE public key (Z85, 40 characters) that ZAP
// authenticated for the sender's connection into key ("" when the socket
// is no CURVE server, or for a message refused before its first frame).
int proto_recv_from (zsock_t *sock, zframe_t **identity_p, char *key, size_t keylen,
                     proto_msg_t *msg, char *err, size_t errlen);

// The messages 'msg' stands for: a BATCH's, or msg itself. A receiver
// handles proto_at (msg, 0 .. proto_count (msg) - 1) in turn.
static inline size_t
proto_count (const proto_msg_t *msg)
{
    return msg->command == PROTO_BATCH ? msg->count : 1;
}

static inline proto_msg_t *
proto_at (proto_msg_t *msg, size_t i)
{
    return msg->command == PROTO_BATCH ? &msg->batch[i] : msg;
}

// Messages to one peer, gathered to go as one BATCH (doc/protocol.md §4.13):
// each is encoded when added, so what it points to may change at once.
typedef struct proto_batch_t proto_batch_t;

proto_batch_t *proto_batch_new (void);
void proto_batch_destroy (proto_batch_t **self_p);
// Adds msg; 0, or -1 when the encoder refuses it (as proto_encode would;
// BATCH, REQUEST and REPLY never go in a batch) or there is no memory.
int proto_batch_add (proto_batch_t *self, const proto_msg_t *msg);
// The messages gathered.
size_t proto_batch_size (const proto_batch_t *self);
// Sends what was gathered as proto_send would (one message alone goes as
// itself, more as a BATCH) and empties the batch either way. 0 (also when
// empty), or -1 when the socket could not take it: none of it went.
int proto_batch_send (proto_batch_t *self, zframe_t *identity, zsock_t *sock);

// The name of a command byte ("FILE", "ACK", ...), "?" if unknown.
const char *proto_command_name (char command);

#endif
