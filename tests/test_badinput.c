// test_badinput.c — hostile input at every door of a real farm: TIFFs that
// are damaged or that pivfarm cannot read, names under the watch root that
// break naive code, malformed messages on every socket (the broker's, and
// the agent's and watcher's through a fake broker), control lines the
// broker must refuse, query strings for the status page. Each case gets a
// clear error and the daemons run on, losing nothing else. The cases are
// listed in tests/badinput/README.md; the files are made here.

#include "common/proto.h"
#include "tests/testutil.h"

#include <check.h>
#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static tu_farm_t s_farm;  // the farm of the running test

static void
s_setup (void)
{
    tu_farm_init (&s_farm);
}

static void
s_teardown (void)
{
    tu_farm_release (&s_farm);
}

// A file under data/ (rel: "exp1/x.tif"), written whole.
static void
s_put (const char *rel, const void *bytes, size_t len)
{
    char path[4096];
    snprintf (path, sizeof path, "%s/data/%s", s_farm.dir, rel);
    tu_spit (path, bytes, len);
}

// Copies the rendered pair src/g_0001 into data/<exp>/<stem>_{a,b}.tif.
static void
s_copy_good (const char *exp, const char *stem)
{
    for (int side = 0; side < 2; side++) {
        size_t len;
        char *bytes = tu_slurp (tu_path (s_farm.dir, side ? "src/g_0001_b.tif" : "src/g_0001_a.tif"),
                                &len);
        ck_assert (bytes != NULL);
        char rel[1024];
        snprintf (rel, sizeof rel, "%s/%s_%c.tif", exp, stem, side ? 'b' : 'a');
        s_put (rel, bytes, len);
        free (bytes);
    }
}

// ---------------------------------------------------------------------------
// TIFFs

// A little-endian baseline TIFF made byte by byte, so that any field can
// lie: one strip of 'data' bytes (pattern filled) after the directory.
typedef struct {
    uint32_t width, height;
    uint16_t bits, compression, sample_format;
    uint32_t data;          // bytes of image data written
    uint32_t strip_offset;  // 0: where the data is
    uint32_t ifd_offset;    // 0: 8, where the directory is
    int loop;               // the directory names itself as the next one
} s_tiff_t;

static size_t
s_tiff (const s_tiff_t *t, unsigned char **out)
{
    enum { ENTRIES = 10, START = 8 + 2 + ENTRIES * 12 + 4 };
    size_t len = START + t->data;
    unsigned char *b = calloc (1, len);
    ck_assert (b != NULL);
#define PUT16(at, v) (b[(at)] = (unsigned char) (v), b[(at) + 1] = (unsigned char) ((v) >> 8))
#define PUT32(at, v) (PUT16 ((at), (v) & 0xffff), PUT16 ((at) + 2, (v) >> 16))
    memcpy (b, "II", 2);
    PUT16 (2, 42);
    PUT32 (4, t->ifd_offset ? t->ifd_offset : 8);
    uint32_t entries[ENTRIES][2] = {
        {256, t->width}, {257, t->height}, {258, t->bits}, {259, t->compression}, {262, 1},
        {273, t->strip_offset ? t->strip_offset : START}, {277, 1}, {278, t->height},
        {279, t->data}, {339, t->sample_format ? t->sample_format : 1},
    };
    PUT16 (8, ENTRIES);
    for (int i = 0; i < ENTRIES; i++) {
        size_t at = 8 + 2 + (size_t) i * 12;
        int tag = (int) entries[i][0], is_long = tag == 256 || tag == 257 || tag == 273
                                                 || tag == 278 || tag == 279;
        PUT16 (at, tag);
        PUT16 (at + 2, is_long ? 4 : 3);
        PUT32 (at + 4, 1);
        if (is_long)
            PUT32 (at + 8, entries[i][1]);
        else
            PUT16 (at + 8, entries[i][1]);
    }
    PUT32 (8 + 2 + ENTRIES * 12, t->loop ? 8 : 0);
    for (size_t i = START; i < len; i++)
        b[i] = (unsigned char) (i * 37);
#undef PUT16
#undef PUT32
    *out = b;
    return len;
}

// Writes data/exp1/<stem>_<side>.tif from t.
static void
s_put_tiff (const char *stem, char side, const s_tiff_t *t)
{
    unsigned char *b;
    size_t len = s_tiff (t, &b);
    char rel[256];
    snprintf (rel, sizeof rel, "exp1/%s_%c.tif", stem, side);
    s_put (rel, b, len);
    free (b);
}

// A bad pair: its stem, and what its error must say.
typedef struct {
    const char *stem;
    const char *reason;
} s_case_t;

static const s_case_t s_tiff_cases[] = {
    {"truncated_0001", "truncated_0001_a.tif': truncated"},
    {"empty_0001", "empty_0001_a.tif' is not a TIFF file: it is empty"},
    {"header_0001", "header_0001_a.tif': truncated"},
    {"magic_0001", "not a TIFF"},
    {"huge_0001", "exceeds the limit"},
    {"compression_0001", "Compression scheme 65000"},
    {"float_0001", "32-bit IEEE float"},
    {"onebit_0001", "1-bit"},
    {"twelvebit_0001", "12-bit"},
    {"zero_0001", "zero size"},
    {"strip_0001", "strip_0001_a.tif': truncated or corrupt"},
    {"ifd_0001", "ifd_0001_a.tif': truncated or corrupt"},
    {"loop_0001", NULL},  // read once, not followed: processed
    {"sizes_0001", "frames differ in size"},
    {"tiny_0001", "smaller than the 32 px window"},
    {"perm_0001", "perm_0001_a.tif': Permission denied"},
    {"gone_0001", "gone_0001_b.tif': No such file"},
};

// Starts an agent that cannot read what root cannot be kept from: when
// the test runs as root, the agent runs as 'nobody' (setpriv).
static int
s_start_unprivileged_agent (void)
{
    if (geteuid () != 0)
        return tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    chmod (s_farm.dir, 0755);
    chmod (tu_path (s_farm.dir, "work"), 0777);
    mkdir (tu_path (s_farm.dir, "results"), 0777);
    chmod (tu_path (s_farm.dir, "results"), 0777);
    char *argv[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    (char *) tu_bin ("pivfarm-agent"), "-c", s_farm.conf, "--id", "a1", NULL};
    return tu_spawn (argv, tu_path (s_farm.dir, "agent1.log"));
}

START_TEST (bad_tiffs_fail_with_their_reason_and_good_pairs_complete)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_copy_good ("exp1", "good_0001");
    // Truncated: a real frame cut in half.
    size_t len;
    char *real = tu_slurp (tu_path (s_farm.dir, "src/g_0001_a.tif"), &len);
    ck_assert (real != NULL);
    s_put ("exp1/truncated_0001_a.tif", real, len / 2);
    s_put ("exp1/truncated_0001_b.tif", real, len);
    s_put ("exp1/empty_0001_a.tif", "", 0);
    s_put ("exp1/header_0001_a.tif", "II*\0\x08\0\0\0", 8);
    s_put ("exp1/magic_0001_a.tif", "GIF89a\x01\0\x01\0\0\0\0;", 14);
    s_tiff_t ok = {.width = 64, .height = 64, .bits = 8, .compression = 1, .data = 64 * 64};
    s_tiff_t t = ok;
    t.width = t.height = 1000000;  // declares a terabyte, holds 4 KiB
    s_put_tiff ("huge_0001", 'a', &t);
    t = ok, t.compression = 65000;  // no codec has this number
    s_put_tiff ("compression_0001", 'a', &t);
    t = ok, t.bits = 32, t.sample_format = 3, t.data = 64 * 64 * 4;
    s_put_tiff ("float_0001", 'a', &t);
    t = ok, t.bits = 1, t.data = 64 * 64 / 8;
    s_put_tiff ("onebit_0001", 'a', &t);
    t = ok, t.bits = 12, t.data = 64 * 64 * 3 / 2;
    s_put_tiff ("twelvebit_0001", 'a', &t);
    t = ok, t.width = 0;
    s_put_tiff ("zero_0001", 'a', &t);
    t = ok, t.strip_offset = 1 << 30;  // the data is beyond the end
    s_put_tiff ("strip_0001", 'a', &t);
    t = ok, t.ifd_offset = 1 << 30;  // the directory is beyond the end
    s_put_tiff ("ifd_0001", 'a', &t);
    t = ok, t.loop = 1;  // a directory chained to itself
    s_put_tiff ("loop_0001", 'a', &t);
    s_put_tiff ("loop_0001", 'b', &t);
    s_put_tiff ("sizes_0001", 'a', &ok);
    t = ok, t.width = t.height = 128, t.data = 128 * 128;
    s_put_tiff ("sizes_0001", 'b', &t);
    t = ok, t.width = t.height = 8, t.data = 64;  // smaller than one window
    s_put_tiff ("tiny_0001", 'a', &t);
    s_put_tiff ("tiny_0001", 'b', &t);
    s_put ("exp1/perm_0001_a.tif", real, len);
    s_put ("exp1/gone_0001_a.tif", real, len);
    s_put ("exp1/gone_0001_b.tif", real, len);
    // The B frames not written above: good ones.
    for (size_t i = 0; i < sizeof s_tiff_cases / sizeof s_tiff_cases[0]; i++) {
        char rel[256];
        snprintf (rel, sizeof rel, "%s/data/exp1/%s_b.tif", s_farm.dir, s_tiff_cases[i].stem);
        if (access (rel, F_OK) != 0)
            tu_spit (rel, real, len);
    }
    free (real);
    int n = (int) (sizeof s_tiff_cases / sizeof s_tiff_cases[0]) + 1;
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 100 && c.pending < n; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_int_eq (c.pending, n);
    // Between its event and its processing: one frame deleted, one made
    // unreadable.
    ck_assert (unlink (tu_path (s_farm.dir, "data/exp1/gone_0001_b.tif")) == 0);
    ck_assert (chmod (tu_path (s_farm.dir, "data/exp1/perm_0001_a.tif"), 0) == 0);
    s_farm.agents[0] = s_start_unprivileged_agent ();
    for (int i = 0; i < 600 && c.done + c.failed < n; i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    ck_assert_msg (c.done == 2 && c.failed == n - 2, "done %lld failed %lld pending %lld",
                   (long long) c.done, (long long) c.failed, (long long) c.pending);
    for (size_t i = 0; i < sizeof s_tiff_cases / sizeof s_tiff_cases[0]; i++) {
        const s_case_t *k = &s_tiff_cases[i];
        if (!k->reason) {
            ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE stem = '%s'"
                                                    " AND state = 2", k->stem),
                              1);
            continue;
        }
        char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs WHERE stem = '%s'"
                                                 " AND state = 3", k->stem);
        printf ("tiff %-18s failed: %s\n", k->stem, error ? error : "(not failed)");
        ck_assert_msg (error && strstr (error, k->reason), "%s: %s", k->stem,
                       error ? error : "not failed");
        free (error);
    }
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs WHERE stem = 'good_0001'"
                                            " AND state = 2"),
                      1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.watcher) && tu_alive (s_farm.agents[0]));
}
END_TEST

// ---------------------------------------------------------------------------
// The watch root

// Pairs of experiment 'exp' in state 'state'.
static int64_t
s_pairs_in (const char *exp, int state)
{
    return tu_farm_sql (&s_farm, "SELECT count(*) FROM pairs p JOIN experiments e ON"
                                 " p.experiment = e.id WHERE e.name = '%s' AND p.state = %d",
                        exp, state);
}

static int64_t
s_wait_done (const char *exp, int64_t n)
{
    int64_t done = 0;
    for (int i = 0; i < 300 && (done = s_pairs_in (exp, 2)) < n; i++)
        usleep (100000);
    return done;
}

START_TEST (hostile_names_and_a_changing_watch_root_never_stop_the_watcher)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    // Symlink loops: the root in itself, a directory in itself, a link to
    // itself. Symlinks are not followed.
    ck_assert (symlink (".", tu_path (s_farm.dir, "data/loop")) == 0);
    ck_assert (symlink (".", tu_path (s_farm.dir, "data/exp1/loop")) == 0);
    ck_assert (symlink ("self_0001_a.tif", tu_path (s_farm.dir, "data/exp1/self_0001_a.tif")) == 0);
    // Names that break naive code are names all the same.
    const char *names[] = {"with space", "quote\"d", "apo'strophe", "new\nline", "-dash",
                           "back\\slash", "$(touch pwned)", "tab\tbed", "\xc3\xa9t\xc3\xa9"};
    int n = (int) (sizeof names / sizeof names[0]);
    for (int i = 0; i < n; i++) {
        char stem[256];
        snprintf (stem, sizeof stem, "%s_0001", names[i]);
        s_copy_good ("exp1", stem);
    }
    // A name that is not UTF-8 cannot travel: refused by name.
    s_copy_good ("exp1", "bad\xff");
    ck_assert_int_eq (s_wait_done ("exp1", n), n);
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", "UTF-8", 5000),
                   "the watcher did not say why it left a name out");
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files"), 2 * n);
    ck_assert (access (tu_path (s_farm.dir, "data/pwned"), F_OK) != 0);
    ck_assert (access ("pwned", F_OK) != 0);
    // A directory removed while watched, then another one made.
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp2"), 0755) == 0);
    usleep (200000);
    s_copy_good ("exp2", "x_0001");
    ck_assert_int_eq (s_wait_done ("exp2", 1), 1);
    char cmd[4200];
    snprintf (cmd, sizeof cmd, "rm -rf '%s/data/exp2'", s_farm.dir);
    ck_assert (system (cmd) == 0);
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp3"), 0755) == 0);
    usleep (200000);
    s_copy_good ("exp3", "y_0001");
    ck_assert_int_eq (s_wait_done ("exp3", 1), 1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.watcher) && tu_alive (s_farm.agents[0]));
}
END_TEST

// ---------------------------------------------------------------------------
// Sockets

// Sends frames (lens[i] bytes each, or strlen when -1) on a new DEALER
// connected to 'endpoint'.
static void
s_send_raw (const char *endpoint, int nframes, const char *const *frames, const long *lens)
{
    zsock_t *s = zsock_new (ZMQ_DEALER);
    ck_assert (s != NULL);
    zsock_set_sndtimeo (s, 5000);
    zsock_set_linger (s, 2000);
    ck_assert (zsock_connect (s, "%s", endpoint) == 0);
    zmsg_t *m = zmsg_new ();
    for (int i = 0; i < nframes; i++)
        zmsg_addmem (m, frames[i], lens && lens[i] >= 0 ? (size_t) lens[i] : strlen (frames[i]));
    ck_assert (zmsg_send (&m, s) == 0);
    zsock_destroy (&s);
}

// A malformed message and what the receiver must say about it.
typedef struct {
    const char *what;
    int nframes;
    const char *frames[9];
    const char *said;
} s_bad_msg_t;

static const s_bad_msg_t s_bad_msgs[] = {
    {"wrong version", 3, {"PIVF99", "B", "1"}, "protocol 'PIVF99', expected 'PIVF02'"},
    {"no command", 1, {"PIVF02"}, "no command frame"},
    {"long command", 3, {"PIVF02", "BB", "1"}, "is 2 bytes, expected 1"},
    {"unknown command", 2, {"PIVF02", "Z"}, "unknown command 0x5a"},
    {"missing frames", 5, {"PIVF02", "F", "1", "exp1", "x.tif"}, "FILE needs 7 frames, got 5"},
    {"extra frames", 8, {"PIVF02", "F", "1", "exp1", "x.tif", "1", "1", "more"},
     "FILE needs 7 frames, got 8"},
    {"bad number", 3, {"PIVF02", "R", "-1"}, "'credit' is not a number"},
    {"random bytes", 2, {"\x93\x07\xff\x00garbage", "\x01\x02"}, "bad message: protocol"},
};

// The text frame over PROTO_MAX_STRING and the message over
// PROTO_MAX_MESSAGE, on one socket.
static void
s_send_oversized (const char *endpoint, char command, const char *said_log, const char *log)
{
    static char big[PROTO_MAX_STRING + 100];
    memset (big, 'x', sizeof big - 1);
    const char *frames[] = {"PIVF02", command == 'C' ? "C" : "H", big, "host", "1", "noop"};
    s_send_raw (endpoint, command == 'C' ? 3 : 6, frames, NULL);
    if (said_log)
        ck_assert_msg (tu_farm_log_has (&s_farm, log, said_log, 5000), "no '%s' in %s", said_log,
                       log);
    // Beyond ZMQ_MAXMSGSIZE: libzmq drops the connection before the message
    // exists in the receiver's memory.
    size_t huge = (size_t) PROTO_MAX_MESSAGE + 4096;
    char *blob = malloc (huge);
    ck_assert (blob != NULL);
    memset (blob, 'y', huge);
    const char *hframes[] = {"PIVF02", "D", blob};
    long lens[] = {-1, -1, (long) huge};
    s_send_raw (endpoint, 3, hframes, lens);
    free (blob);
}

START_TEST (malformed_messages_on_every_broker_socket_are_dropped_and_the_farm_runs_on)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    const char *sockets[] = {"ingest", "work", "control"};
    char endpoint[4200];
    for (int s = 0; s < 3; s++) {
        snprintf (endpoint, sizeof endpoint, "ipc://%s/%s", s_farm.dir, sockets[s]);
        for (size_t i = 0; i < sizeof s_bad_msgs / sizeof s_bad_msgs[0]; i++) {
            const s_bad_msg_t *b = &s_bad_msgs[i];
            if (s == 2) {
                // The control socket answers, 400 and the reason.
                zsock_t *c = zsock_new (ZMQ_DEALER);
                zsock_set_rcvtimeo (c, 5000);
                ck_assert (zsock_connect (c, "%s", endpoint) == 0);
                zmsg_t *m = zmsg_new ();
                for (int f = 0; f < b->nframes; f++)
                    zmsg_addstr (m, b->frames[f]);
                zmsg_send (&m, c);
                proto_msg_t reply;
                char err[512];
                ck_assert_msg (proto_recv (c, NULL, &reply, err, sizeof err) == 0, "%s: %s",
                               b->what, err);
                ck_assert_msg (reply.status == 400 && strstr (reply.text, "bad request"),
                               "control, %s: %u %s", b->what, reply.status, reply.text);
                proto_msg_release (&reply);
                zsock_destroy (&c);
                continue;
            }
            s_send_raw (endpoint, b->nframes, b->frames, NULL);
            ck_assert_msg (tu_farm_log_has (&s_farm, "broker.log", b->said, 5000), "%s, %s",
                           sockets[s], b->what);
        }
        s_send_oversized (endpoint, s == 2 ? 'C' : 'H', s == 2 ? NULL : "is 4195 bytes, at most 4096",
                          "broker.log");
        ck_assert (tu_alive (s_farm.broker));
    }
    // A message for the wrong socket: an ACK to the broker's work socket.
    snprintf (endpoint, sizeof endpoint, "ipc://%s/work", s_farm.dir);
    const char *ack[] = {"PIVF02", "A", "0"};
    s_send_raw (endpoint, 3, ack, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "unexpected ACK", 5000));
    // Nothing else lost: the farm works as before.
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

// A fake broker: a ROUTER bound where the real one would be.
static zsock_t *
s_fake_broker (const char *name)
{
    zsock_t *r = zsock_new (ZMQ_ROUTER);
    ck_assert (r != NULL);
    zsock_set_rcvtimeo (r, 10000);
    ck_assert (zsock_bind (r, "ipc://%s/%s", s_farm.dir, name) == 0);
    return r;
}

// Waits for the first message of a peer, then sends it every malformed
// message and checks it says so in its log.
static void
s_feed_peer (zsock_t *r, const char *log)
{
    zmsg_t *first = zmsg_recv (r);
    ck_assert_msg (first != NULL, "nothing from the peer logging to %s", log);
    zframe_t *peer = zmsg_pop (first);
    zmsg_destroy (&first);
    for (size_t i = 0; i < sizeof s_bad_msgs / sizeof s_bad_msgs[0]; i++) {
        const s_bad_msg_t *b = &s_bad_msgs[i];
        zmsg_t *m = zmsg_new ();
        zmsg_add (m, zframe_dup (peer));
        for (int f = 0; f < b->nframes; f++)
            zmsg_addstr (m, b->frames[f]);
        ck_assert (zmsg_send (&m, r) == 0);
        ck_assert_msg (tu_farm_log_has (&s_farm, log, b->said, 5000), "%s, %s", log, b->what);
    }
    zframe_destroy (&peer);
}

START_TEST (an_agent_and_a_watcher_fed_malformed_messages_drop_them_and_run_on)
{
    zsock_t *work = s_fake_broker ("work");
    zsock_t *ingest = s_fake_broker ("ingest");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    s_feed_peer (work, "agent1.log");
    ck_assert (tu_alive (s_farm.agents[0]));
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_put ("exp1/w_0001_a.tif", "x", 1);
    s_feed_peer (ingest, "watcher.log");
    ck_assert (tu_alive (s_farm.watcher));
    zsock_destroy (&work);
    zsock_destroy (&ingest);
    // And the real broker after them: everything pending goes through.
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
}
END_TEST

// ---------------------------------------------------------------------------
// Control lines

// A control line, its status and what its answer must name.
static const struct {
    const char *line;
    unsigned status;
    const char *named;
} s_lines[] = {
    {"reboot", 400, "unknown command 'reboot'"},
    {"", 400, "empty command"},
    {"pause \"unterminated", 400, "bad command line"},
    {"status --bogus", 400, "unknown option '--bogus'"},
    {"status extra words", 400, "usage"},
    {"rate -5", 400, "-5"},
    {"rate 1e7", 400, "bad rate"},
    {"rate nan", 400, "bad rate"},
    {"rate abc", 400, "bad rate"},
    {"rate", 400, "usage"},
    {"policy sample 0", 400, "sample"},
    {"policy sometimes", 400, "sometimes"},
    {"pairs exp1 --limit 0", 400, "bad --limit"},
    {"pairs exp1 --limit 99999999999", 400, "bad --limit"},
    {"pairs exp1 --state molten", 400, "molten"},
    {"pairs nosuch", 404, "no experiment 'nosuch'"},
    {"log exp1 --after -1", 400, "bad --after"},
    {"rate 5 -e nosuch", 404, "no experiment 'nosuch'"},
    {"feedback set kp=abc", 400, "kp"},
    {"feedback set roi=1,2,3", 400, "roi"},
    {"feedback set color=red", 400, "color"},
    {"feedback sideways", 400, "usage: feedback"},
    {"replay exp1 --speed 0", 400, "bad --speed"},
    {"replay exp1 --as a/b", 400, "bad --as"},
    {"replay exp1 --overlap 99", 400, "bad --overlap"},
    {"retry", 400, "usage"},
};

START_TEST (bad_control_lines_are_refused_naming_what_is_wrong)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_farm_land (&s_farm, "g", 1, 1, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 1, 60).done, 1);
    zsock_t *c = zsock_new (ZMQ_DEALER);
    zsock_set_rcvtimeo (c, 5000);
    ck_assert (zsock_connect (c, "ipc://%s/control", s_farm.dir) == 0);
    for (size_t i = 0; i < sizeof s_lines / sizeof s_lines[0]; i++) {
        proto_msg_t req = {.command = PROTO_REQUEST, .text = (char *) s_lines[i].line}, reply;
        ck_assert (proto_send (&req, NULL, c) == 0);
        char err[512];
        ck_assert_msg (proto_recv (c, NULL, &reply, err, sizeof err) == 0, "'%s': %s",
                       s_lines[i].line, err);
        printf ("control %-32s %u %s\n", s_lines[i].line, reply.status, reply.text);
        ck_assert_msg (reply.status == s_lines[i].status && strstr (reply.text, s_lines[i].named),
                       "'%s': %u %s", s_lines[i].line, reply.status, reply.text);
        ck_assert (strchr (reply.text, '\n') == NULL);
        proto_msg_release (&reply);
    }
    zsock_destroy (&c);
    // Nothing changed: no setting recorded, the farm as it was.
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM settings"), 0);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM experiments"), 1);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

// ---------------------------------------------------------------------------
// The status page

START_TEST (hostile_query_strings_get_a_clean_refusal_from_the_status_page)
{
    tu_farm_start_broker (&s_farm);
    setenv ("PIVFARM_CONF", s_farm.conf, 1);
    setenv ("REQUEST_METHOD", "GET", 1);
    static char longq[5000];
    memcpy (longq, "exp=", 4);
    memset (longq + 4, 'a', sizeof longq - 5);
    const struct {
        const char *query;
        const char *status;
    } cases[] = {
        {"exp=%3Cscript%3Ealert(1)%3C/script%3E", "400"},
        {"exp=<script>alert(1)</script>", "400"},
        {"exp=../../../../etc/passwd", "400"},
        {"exp=%2e%2e%2f%2e%2e%2fetc", "400"},
        {"exp=%zz", "400"},
        {"exp=%", "400"},
        {"exp=a%00b", "400"},
        {"exp=%ff%fe", "400"},
        {"format=xml", "400"},
        {"color=red", "400"},
        {"exp=x'%22;DROP TABLE pairs;--", "400"},
        {"format=json&exp=%3Cb%3E", "400"},
        {"exp=a&exp=b", "400"},
        {"exp=nosuch", "404"},
        {longq, "400"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv ("QUERY_STRING", cases[i].query, 1);
        char out[65536];
        char *argv[] = {(char *) tu_bin ("pivfarm.cgi"), NULL};
        ck_assert_int_eq (tu_run (argv, out, sizeof out, 10), 0);
        char first[160];
        snprintf (first, sizeof first, "%.*s", (int) strcspn (out, "\r\n"), out);
        printf ("cgi %.40s -> %s\n", cases[i].query, first);
        ck_assert_msg (strncmp (out, "Status: ", 8) == 0 && strncmp (out + 8, cases[i].status, 3) == 0,
                       "'%s': %s", cases[i].query, first);
        ck_assert_msg (!strstr (out, "<script>") && !strstr (out, "<b>"), "'%s' echoed: %s",
                       cases[i].query, out);
    }
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM meta"), 2);
    ck_assert (tu_alive (s_farm.broker));
}
END_TEST

// ---------------------------------------------------------------------------
// Frames and results that are not what they seem (issue 13, helper "paths")

// Replaces data/exp1/<name> (already paired) by what 'how' makes of it.
static const char *
s_frame (const char *name)
{
    static char path[4096];
    snprintf (path, sizeof path, "%s/data/exp1/%s", s_farm.dir, name);
    return path;
}

// Waits until 'n' pairs are pending, then stops the watcher, so that what
// is done to the frames afterwards reaches only the agent.
static void
s_pending_then_no_watcher (int n)
{
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 200 && c.pending < n; i++, c = tu_farm_counts (&s_farm))
        usleep (50000);
    ck_assert_int_eq (c.pending, n);
    tu_stop (s_farm.watcher, SIGTERM, 10);
    s_farm.watcher = 0;
}

static const s_case_t s_frame_cases[] = {
    {"fifo_0001", "fifo_0001_a.tif': not a regular file (a FIFO)"},
    {"device_0001", "device_0001_a.tif': not a regular file (a character device)"},
    {"link_0001", "link_0001_a.tif': a symbolic link, or it leads outside the watch root"},
    {"sparse_0001", "sparse_0001_a.tif': sparse file"},
    {"big_0001", "big_0001_a.tif': file of"},
};

START_TEST (frames_that_are_not_plain_files_in_the_root_fail_and_the_agent_lives_on)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    tu_farm_conf_replace (&s_farm, "    iterations = 1\n", "    iterations = 1\n    max_file_mb = 1\n");
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    int n = (int) (sizeof s_frame_cases / sizeof s_frame_cases[0]);
    for (int i = 0; i < n; i++)
        s_copy_good ("exp1", s_frame_cases[i].stem);
    s_pending_then_no_watcher (n);
    // Each A frame becomes something else once paired. Every one of them
    // reads as a good frame to a loader that follows links, reads FIFOs
    // (blocking for ever) and reads whatever size.
    size_t len;
    char *real = tu_slurp (tu_path (s_farm.dir, "src/g_0001_a.tif"), &len);
    ck_assert (real != NULL);
    ck_assert (unlink (s_frame ("fifo_0001_a.tif")) == 0);
    ck_assert (mkfifo (s_frame ("fifo_0001_a.tif"), 0644) == 0);
    ck_assert (unlink (s_frame ("device_0001_a.tif")) == 0);
    int device = geteuid () == 0 && mknod (s_frame ("device_0001_a.tif"), S_IFCHR | 0644,
                                           makedev (1, 3)) == 0;  // /dev/null's
    if (!device)
        ck_assert (symlink ("/dev/null", s_frame ("device_0001_a.tif")) == 0);
    // A link out of the root, to a good frame.
    ck_assert (unlink (s_frame ("link_0001_a.tif")) == 0);
    ck_assert (symlink (tu_path (s_farm.dir, "src/g_0001_a.tif"), s_frame ("link_0001_a.tif")) == 0);
    // A good frame with 32 MiB of holes after it (libtiff reads it fine).
    ck_assert (truncate (s_frame ("sparse_0001_a.tif"), 32 << 20) == 0);
    // A good frame and 2 MiB of real bytes: over piv/max_file_mb = 1.
    char *padded = calloc (1, (2 << 20) + len);
    ck_assert (padded != NULL);
    memcpy (padded, real, len);
    memset (padded + len, 0x5a, 2 << 20);
    tu_spit (s_frame ("big_0001_a.tif"), padded, (2 << 20) + len);
    free (padded);
    free (real);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 300 && c.failed < n; i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    ck_assert_msg (c.failed == n && c.done == 0, "done %lld failed %lld pending %lld out %lld",
                   (long long) c.done, (long long) c.failed, (long long) c.pending,
                   (long long) c.dispatched);
    for (int i = 0; i < n; i++) {
        const s_case_t *k = &s_frame_cases[i];
        char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs WHERE stem = '%s'"
                                                 " AND state = 3", k->stem);
        printf ("frame %-12s failed: %s\n", k->stem, error ? error : "(not failed)");
        const char *want = k->reason;
        if (!device && strncmp (k->stem, "device", 6) == 0)
            want = "a symbolic link";
        ck_assert_msg (error && strstr (error, want), "%s: %s", k->stem, error ? error : "not failed");
        free (error);
    }
    // The agent lives on and its worker is free: a good pair after them is done.
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_copy_good ("exp1", "after_0001");
    ck_assert_int_eq (s_wait_done ("exp1", 1), 1);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.agents[0]));
}
END_TEST

START_TEST (a_results_directory_link_out_of_the_results_fails_the_pair_and_writes_nothing_there)
{
    tu_farm_render (&s_farm, 1, "g");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    // results/exp1 is a link to a directory outside the results.
    char outside[4096];
    snprintf (outside, sizeof outside, "%s", tu_path (s_farm.dir, "outside"));
    ck_assert (mkdir (outside, 0755) == 0);
    ck_assert (mkdir (tu_path (s_farm.dir, "results"), 0755) == 0 || errno == EEXIST);
    ck_assert (symlink (outside, tu_path (s_farm.dir, "results/exp1")) == 0);
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    s_copy_good ("exp1", "out_0001");
    tu_counts_t c = tu_farm_counts (&s_farm);
    for (int i = 0; i < 300 && c.failed < 1; i++, c = tu_farm_counts (&s_farm))
        usleep (100000);
    char *error = tu_farm_sql_text (&s_farm, "SELECT error FROM pairs WHERE stem = 'out_0001'"
                                             " AND state = 3");
    printf ("results link: %s\n", error ? error : "(not failed)");
    ck_assert_msg (error && strstr (error, "out_0001.txt': a symbolic link"), "%s",
                   error ? error : "not failed");
    free (error);
    ck_assert (access (tu_path (s_farm.dir, "outside/out_0001.txt"), F_OK) != 0);
    // Another experiment's results are written as ever.
    ck_assert (mkdir (tu_path (s_farm.dir, "data/exp2"), 0755) == 0);
    usleep (200000);
    s_copy_good ("exp2", "in_0001");
    ck_assert_int_eq (s_wait_done ("exp2", 1), 1);
    ck_assert (access (tu_path (s_farm.dir, "results/exp2/in_0001.txt"), F_OK) == 0);
    ck_assert (tu_alive (s_farm.broker) && tu_alive (s_farm.agents[0]));
}
END_TEST

int
main (void)
{
    setvbuf (stdout, NULL, _IOLBF, 0);  // the figures survive a failed test
    Suite *suite = suite_create ("badinput");
    TCase *tc = tcase_create ("badinput");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 240);
    tcase_add_test (tc, bad_tiffs_fail_with_their_reason_and_good_pairs_complete);
    tcase_add_test (tc, hostile_names_and_a_changing_watch_root_never_stop_the_watcher);
    tcase_add_test (tc, malformed_messages_on_every_broker_socket_are_dropped_and_the_farm_runs_on);
    tcase_add_test (tc, an_agent_and_a_watcher_fed_malformed_messages_drop_them_and_run_on);
    tcase_add_test (tc, bad_control_lines_are_refused_naming_what_is_wrong);
    tcase_add_test (tc, hostile_query_strings_get_a_clean_refusal_from_the_status_page);
    tcase_add_test (tc, frames_that_are_not_plain_files_in_the_root_fail_and_the_agent_lives_on);
    tcase_add_test (tc, a_results_directory_link_out_of_the_results_fails_the_pair_and_writes_nothing_there);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
