// fuzz_proto.c — proto_decode (common/proto.c) on arbitrary multipart
// messages, every command, BATCH and its records included. The input is the frames one after another,
// separated by the two bytes 0x1e 0x1e (fuzz/proto.dict names them). A
// message that decodes must encode again (the encoder refuses only what
// the decoder would) and decode to the same message; a RESULT's field
// goes through piv_field_decode too.

#include "common/proto.h"
#include "piv/field.h"
#include "fuzz/fuzz.h"

#include <math.h>
#include <string.h>

static zmsg_t *
s_frames (const uint8_t *data, size_t size)
{
    zmsg_t *zmsg = zmsg_new ();
    const uint8_t *p = data, *end = data + size;
    while (zmsg) {
        const uint8_t *sep = p;
        while (sep + 1 < end && !(sep[0] == 0x1e && sep[1] == 0x1e))
            sep++;
        if (sep + 1 >= end)
            sep = end;
        if (zmsg_addmem (zmsg, p, (size_t) (sep - p)))
            abort ();
        if (sep == end)
            break;
        p = sep + 2;
    }
    return zmsg;
}

static int
s_same_text (const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp (a, b) == 0);
}

static int s_same (const proto_msg_t *a, const proto_msg_t *b);

// A BATCH's messages, one by one.
static int
s_same_batch (const proto_msg_t *a, const proto_msg_t *b)
{
    if (a->command != PROTO_BATCH)
        return 1;
    for (uint32_t i = 0; i < a->count; i++)
        if (!s_same (&a->batch[i], &b->batch[i]))
            return 0;
    return 1;
}

static int
s_same (const proto_msg_t *a, const proto_msg_t *b)
{
    for (size_t i = 0; i < sizeof a->figures / sizeof a->figures[0]; i++)
        if (!(a->figures[i] == b->figures[i] || (isnan (a->figures[i]) && isnan (b->figures[i]))))
            return 0;
    return a->command == b->command && a->seq == b->seq && a->pair == b->pair
           && a->attempt == b->attempt && a->count == b->count && a->size == b->size
           && a->time_ns == b->time_ns && a->status == b->status
           && s_same_text (a->experiment, b->experiment) && s_same_text (a->name, b->name)
           && s_same_text (a->text, b->text) && s_same_text (a->path_a, b->path_a)
           && s_same_text (a->path_b, b->path_b) && s_same_text (a->path_c, b->path_c)
           && s_same_text (a->path_d, b->path_d) && s_same_text (a->cameras, b->cameras)
           && s_same_text (a->settings, b->settings)
           && s_same_text (a->output, b->output) && a->blob_size == b->blob_size
           && (!a->blob_size || memcmp (a->blob, b->blob, a->blob_size) == 0)
           && (!a->count || a->command != PROTO_ACK
               || memcmp (a->seqs, b->seqs, a->count * sizeof (uint64_t)) == 0)
           && s_same_batch (a, b);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    zmsg_t *zmsg = s_frames (data, size);
    proto_msg_t msg = {0}, again = {0};
    char err[512] = "";
    if (proto_decode (&zmsg, &msg, err, sizeof err) != 0) {
        FUZZ_ASSERT (!zmsg && err[0] && msg.command == 0);
        return 0;
    }
    FUZZ_ASSERT (!zmsg && strcmp (proto_command_name (msg.command), "?") != 0);
    zmsg_t *encoded = proto_encode (&msg);
    FUZZ_ASSERT (encoded);
    FUZZ_ASSERT (proto_decode (&encoded, &again, err, sizeof err) == 0);
    FUZZ_ASSERT (s_same (&msg, &again));
    if (msg.blob_size) {
        piv_field_t *field = piv_field_decode (msg.blob, msg.blob_size, err, sizeof err);
        piv_field_destroy (&field);
    }
    proto_msg_release (&msg);
    proto_msg_release (&again);
    return 0;
}
