// test_storage.c — the storage lifecycle (doc/storage.md) as an operator
// meets it: SHA-256 against FIPS 180-4, pivctl iobench on a RAM disk and a
// disk directory, a RAM disk provisioned, warned about and released, an
// experiment archived with every copy verified (then replayed from the
// archive), an interrupted archive resumed, a corrupted copy caught with
// nothing removed, and the free-space guard pausing and resuming dispatch.
// The real broker, watcher and agents run on ipc:// sockets; RAM disks are
// real tmpfs mounts, so those tests need root and say so when skipped.

#include "common/sha256.h"
#include "common/util.h"
#include "common/jdoc.h"
#include "tests/testutil.h"

#include <check.h>
#include <czmq.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define TMPFS_MAGIC_NUMBER 0x01021994

static tu_farm_t s_farm;
static char s_mounts[4][4096];  // RAM disks the test mounted: unmounted in teardown
static int s_nmounts;

static void
s_setup (void)
{
    // As root, each test runs in a mount namespace of its own, private to
    // it: the RAM disks it (or its broker) mounts vanish with its processes
    // even when a failed assertion skips the teardown, and the host never
    // sees them.
    if (geteuid () == 0)
        ck_assert (unshare (CLONE_NEWNS) == 0
                   && mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    tu_farm_init (&s_farm);
    s_nmounts = 0;
}

static void
s_teardown (void)
{
    // The processes first (one may hold a file open), then the mounts,
    // whatever the test left, then the directory.
    for (int i = 0; i < 4; i++)
        tu_stop (s_farm.others[i], SIGKILL, 5), s_farm.others[i] = 0;
    tu_stop (s_farm.watcher, SIGKILL, 5), s_farm.watcher = 0;
    for (int i = 0; i < 4; i++)
        tu_stop (s_farm.agents[i], SIGKILL, 5), s_farm.agents[i] = 0;
    tu_stop (s_farm.broker, SIGKILL, 5), s_farm.broker = 0;
    for (int i = 0; i < s_nmounts; i++)
        umount2 (s_mounts[i], MNT_DETACH);
    char data[4096];
    snprintf (data, sizeof data, "%s", tu_path (s_farm.dir, "data/run2"));
    umount2 (data, MNT_DETACH);  // a RAM disk the broker mounted
    tu_farm_release (&s_farm);
}

// 1 when the test may mount (root); otherwise prints why it is skipped.
static int
s_root (const char *test)
{
    if (geteuid () == 0)
        return 1;
    fprintf (stderr, "%s: skipped: mounting a RAM disk (tmpfs) needs root\n", test);
    return 0;
}

static void
s_mount_tmpfs (const char *path, const char *size)
{
    mkdir (path, 0755);
    char options[64];
    snprintf (options, sizeof options, "size=%s", size);
    ck_assert_msg (mount ("tmpfs", path, "tmpfs", 0, options) == 0, "cannot mount '%s'", path);
    snprintf (s_mounts[s_nmounts++], sizeof s_mounts[0], "%s", path);
}

static int
s_is_tmpfs (const char *path)
{
    struct statfs st;
    return statfs (path, &st) == 0 && st.f_type == TMPFS_MAGIC_NUMBER;
}

// pivctl -c conf ARGS... (NULL-terminated): its exit status, its output in out.
static int
s_pivctl (char *out, size_t len, const char *first, ...)
{
    char *argv[32] = {(char *) tu_bin ("pivctl"), "-c", s_farm.conf};
    int n = 3;
    va_list ap;
    va_start (ap, first);
    for (const char *a = first; a && n < 31; a = va_arg (ap, const char *))
        argv[n++] = (char *) a;
    va_end (ap);
    argv[n] = NULL;
    return tu_run (argv, out, len, 120);
}

// 'pivctl status --json', parsed (caller destroys).
static jdoc_t *
s_status (void)
{
    static char out[1 << 20];
    int rc = s_pivctl (out, sizeof out, "status", "--json", NULL);
    ck_assert_msg (rc == 0, "pivctl status: exit %d: %s", rc, out);
    char err[256];
    jdoc_t *doc = jdoc_parse (out, err, sizeof err);
    ck_assert_msg (doc != NULL, "status is not JSON: %s: %s", err, out);
    return doc;
}

// The first warning of 'kind' whose message holds 'text' (NULL: any), as
// status says within timeout_ms; its message, or NULL.
static char *
s_warning (const char *kind, const char *text, int timeout_ms)
{
    for (int waited = 0;; waited += 100) {
        jdoc_t *doc = s_status ();
        char *found = NULL;
        int n = jdoc_length (doc, "$.warnings");
        for (int i = 0; i < n && !found; i++) {
            const char *k = jdoc_string (doc, "$.warnings[%d].kind", i);
            const char *m = jdoc_string (doc, "$.warnings[%d].message", i);
            if (k && m && strcmp (k, kind) == 0 && (!text || strstr (m, text)))
                found = strdup (m);
        }
        jdoc_destroy (&doc);
        if (found || waited >= timeout_ms)
            return found;
        usleep (100000);
    }
}

static int64_t
s_pairs_done (const char *experiment)
{
    return tu_farm_sql (&s_farm,
                        "SELECT count(*) FROM pairs p JOIN experiments e ON e.id = p.experiment"
                        " WHERE e.name = '%s' AND p.state = 2",
                        experiment);
}

// Starts the broker, the watcher (once it watches) and one agent.
static void
s_start_farm (void)
{
    tu_farm_start_broker (&s_farm);
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    ck_assert_msg (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000),
                   "the watcher did not start");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent1.log", "--id", "a1");
}

// n pairs <prefix>_<i>_{a,b}.tif of 'bytes' bytes each (distinct content)
// straight into data/<experiment>.
static void
s_write_frames (const char *experiment, const char *prefix, int n, size_t bytes)
{
    char *data = malloc (bytes);
    ck_assert (data != NULL);
    for (int i = 1; i <= n; i++)
        for (int side = 0; side < 2; side++) {
            for (size_t k = 0; k < bytes; k++)
                data[k] = (char) (k * 31 + i * 7 + side);
            char name[512];
            snprintf (name, sizeof name, "data/%s/%s_%04d_%c.tif", experiment, prefix, i,
                      side ? 'b' : 'a');
            tu_spit (tu_path (s_farm.dir, name), data, bytes);
        }
    free (data);
}

static int
s_exists (const char *name)
{
    return access (tu_path (s_farm.dir, name), F_OK) == 0;
}

// Every file of 'experiment' is recorded at <arch>/<experiment>/<name> with
// the SHA-256 of what is there; returns how many.
static int
s_check_archived (const char *experiment, const char *arch)
{
    int n = (int) tu_farm_sql (&s_farm,
                               "SELECT count(*) FROM files f JOIN experiments e ON"
                               " e.id = f.experiment WHERE e.name = '%s'",
                               experiment);
    for (int i = 0; i < n; i++) {
        char *name = tu_farm_sql_text (&s_farm,
                                       "SELECT f.name FROM files f JOIN experiments e ON"
                                       " e.id = f.experiment WHERE e.name = '%s' ORDER BY f.id"
                                       " LIMIT 1 OFFSET %d",
                                       experiment, i);
        char *loc = tu_farm_sql_text (&s_farm,
                                      "SELECT location FROM files WHERE name = '%s'", name);
        char *sha = tu_farm_sql_text (&s_farm, "SELECT sha256 FROM files WHERE name = '%s'", name);
        char want[8192], hex[SHA256_HEX], err[512];
        snprintf (want, sizeof want, "%s/%s/%s", arch, experiment, name);
        ck_assert_msg (loc && strcmp (loc, want) == 0, "'%s' recorded at '%s'", name,
                       loc ? loc : "(nowhere)");
        ck_assert_msg (sha256_file (loc, 1 << 16, hex, err, sizeof err) == 0, "%s", err);
        ck_assert_msg (sha && strcmp (sha, hex) == 0, "'%s': %s recorded, %s there", loc,
                       sha ? sha : "-", hex);
        free (name), free (loc), free (sha);
    }
    return n;
}

// ---------------------------------------------------------------------------

START_TEST (sha256_matches_the_fips_180_4_vectors)
{
    static const struct {
        const char *text;
        int repeat;
        const char *digest;
    } vectors[] = {
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    for (size_t v = 0; v < sizeof vectors / sizeof vectors[0]; v++) {
        sha256_t h;
        char hex[SHA256_HEX];
        sha256_init (&h);
        for (int i = 0; i < vectors[v].repeat; i++)
            sha256_update (&h, vectors[v].text, strlen (vectors[v].text));
        sha256_final (&h, hex);
        ck_assert_str_eq (hex, vectors[v].digest);
    }
    // A file read in blocks of any size hashes the same.
    char data[100000];
    for (size_t k = 0; k < sizeof data; k++)
        data[k] = (char) (k * 7);
    tu_spit (tu_path (s_farm.dir, "f"), data, sizeof data);
    char a[SHA256_HEX], b[SHA256_HEX], whole[SHA256_HEX], err[256];
    sha256_t h;
    sha256_init (&h);
    sha256_update (&h, data, sizeof data);
    sha256_final (&h, whole);
    ck_assert (sha256_file (tu_path (s_farm.dir, "f"), 4096, a, err, sizeof err) == 0);
    ck_assert (sha256_file (tu_path (s_farm.dir, "f"), 1000, b, err, sizeof err) == 0);
    ck_assert_str_eq (a, whole);
    ck_assert_str_eq (b, whole);
    ck_assert (sha256_file (tu_path (s_farm.dir, "nothing"), 4096, a, err, sizeof err) == -1);
    ck_assert_msg (strstr (err, "nothing") != NULL, "%s", err);
}
END_TEST

START_TEST (sizes_rates_and_thresholds_read_as_documented)
{
    int64_t bytes;
    double percent, rate;
    ck_assert (util_parse_size ("20G", &bytes) == 0 && bytes == 20LL << 30);
    ck_assert (util_parse_size ("1.5M", &bytes) == 0 && bytes == 3 << 19);
    ck_assert (util_parse_size ("64KiB", &bytes) == 0 && bytes == 65536);
    ck_assert (util_parse_size ("4096", &bytes) == 0 && bytes == 4096);
    ck_assert (util_parse_size ("-1G", &bytes) == -1);
    ck_assert (util_parse_size ("12 parsecs", &bytes) == -1);
    ck_assert (util_parse_space ("10%", &bytes, &percent) == 0 && percent == 10 && bytes == -1);
    ck_assert (util_parse_space ("50G", &bytes, &percent) == 0 && percent == -1);
    ck_assert (util_parse_space ("120%", &bytes, &percent) == -1);
    ck_assert (util_parse_rate ("240Mbit", &rate) == 0 && fabs (rate - 30e6) < 1);
    ck_assert (util_parse_rate ("30MB/s", &rate) == 0 && fabs (rate - 30e6) < 1);
    ck_assert (util_parse_rate ("1Gbit", &rate) == 0 && fabs (rate - 125e6) < 1);
    ck_assert (util_parse_rate ("30 furlongs", &rate) == -1);
}
END_TEST

// pivctl iobench DIR --json: nine sane rows; the --need verdict.
static void
s_iobench (const char *dir)
{
    static char out[1 << 16];
    char *argv[] = {(char *) tu_bin ("pivctl"), "iobench", (char *) dir, "--total", "32M",
                    "--need", "240Mbit", "--json", NULL};
    int rc = tu_run (argv, out, sizeof out, 120);
    ck_assert_msg (rc == 0, "iobench %s: exit %d: %s", dir, rc, out);
    char err[256];
    jdoc_t *doc = jdoc_parse (out, err, sizeof err);
    ck_assert_msg (doc != NULL, "not JSON: %s", out);
    ck_assert_int_eq (jdoc_length (doc, "$.rows"), 9);
    for (int k = 0; k < 9; k++) {
        ck_assert_int_eq (jdoc_int (doc, -1, "$.rows[%d].io_size", k), (64 << 10) << k);
        double w = jdoc_number (doc, NAN, "$.rows[%d].write_mb_s", k);
        double r = jdoc_number (doc, NAN, "$.rows[%d].read_mb_s", k);
        ck_assert_msg (w > 1 && w < 1e6 && r > 1 && r < 1e6, "%s: %g / %g MB/s", dir, w, r);
    }
    int64_t best = jdoc_int (doc, -1, "$.best_io_size");
    ck_assert_msg (best >= 64 << 10 && best <= 16 << 20 && (best & (best - 1)) == 0, "%lld",
                   (long long) best);
    ck_assert_int_eq (jdoc_bool (doc, -1, "$.sustains"), 1);
    jdoc_destroy (&doc);
    // The table for people, and a stream no disk sustains.
    char *big[] = {(char *) tu_bin ("pivctl"), "iobench", (char *) dir, "--total", "16M",
                   "--need", "100000Gbit", NULL};
    ck_assert_int_eq (tu_run (big, out, sizeof out, 120), 1);
    ck_assert_msg (strstr (out, "IO SIZE") && strstr (out, "<- best") && strstr (out, ": NO"),
                   "%s", out);
    // Nothing is left behind.
    char probe[8192];
    snprintf (probe, sizeof probe, "%s/.pivfarm-iobench.%d", dir, 0);
    ck_assert (access (probe, F_OK) != 0);
}

START_TEST (iobench_measures_a_ram_disk_and_a_disk_directory_with_sane_figures)
{
    char disk[4096];
    snprintf (disk, sizeof disk, "%s", tu_path (s_farm.dir, "disk"));
    mkdir (disk, 0755);
    s_iobench (disk);
    if (!s_root ("iobench on a RAM disk"))
        return;
    char ram[4096];
    snprintf (ram, sizeof ram, "%s", tu_path (s_farm.dir, "ram"));
    s_mount_tmpfs (ram, "48m");
    s_iobench (ram);
}
END_TEST

START_TEST (provision_mounts_a_ram_disk_warns_and_release_archives_then_unmounts_it)
{
    if (!s_root ("provisioning a RAM disk"))
        return;
    tu_farm_conf (&s_farm, "noop", 1, "32", "storage\n    guard_ms = 200\n");
    s_start_farm ();
    // A subscriber to the state topic hears the warnings as they change.
    char endpoint[4200];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/publish", s_farm.dir);
    zsock_t *sub = zsock_new_sub (endpoint, "state");
    ck_assert (sub != NULL);
    zsock_set_rcvtimeo (sub, 5000);
    usleep (300000);

    char out[1 << 16];
    int rc = s_pivctl (out, sizeof out, "provision", "run2", "--size", "4M", "--hours", "0.5",
                       NULL);
    ck_assert_msg (rc == 0 && strstr (out, "provisioned run2: tmpfs of 4.0 MiB"), "%d: %s", rc,
                   out);
    ck_assert (s_is_tmpfs (tu_path (s_farm.dir, "data/run2")));
    // Twice is refused, naming what is there.
    rc = s_pivctl (out, sizeof out, "provision", "run2", "--size", "4M", "--hours", "1", NULL);
    ck_assert_msg (rc == 2 && strstr (out, "has an allocation already"), "%s", out);

    // Half an hour left: within the hour of expiry.
    char *w = s_warning ("expiry", "run2", 3000);
    ck_assert_msg (w && strstr (w, "expires in 30 min"), "%s", w ? w : "no expiry warning");
    free (w);
    int heard = 0;
    for (int i = 0; i < 20 && !heard; i++) {
        char *topic = NULL, *json = NULL;
        if (zstr_recvx (sub, &topic, &json, NULL) < 2)
            break;
        heard = json && strstr (json, "expires in");
        zstr_free (&topic), zstr_free (&json);
    }
    ck_assert_msg (heard, "the state topic did not carry the expiry warning");
    zsock_destroy (&sub);

    // The camera writes into the RAM disk; the farm processes it.
    s_write_frames ("run2", "r", 3, 1000);
    for (int i = 0; i < 100 && s_pairs_done ("run2") < 3; i++)
        usleep (100000);
    ck_assert_int_eq (s_pairs_done ("run2"), 3);
    // 80 % full: said.
    s_write_frames ("run2", "big", 1, 1700 * 1024);
    // Placeholders, not TIFFs: reported once settled (watcher/settle_ms).
    for (int i = 0; i < 100 && s_pairs_done ("run2") < 4; i++)
        usleep (100000);
    w = s_warning ("allocation", "run2", 3000);
    ck_assert_msg (w && strstr (w, "full"), "%s", w ? w : "no fill warning");
    free (w);
    rc = s_pivctl (out, sizeof out, "status", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "WARNING: the RAM disk of 'run2' is")
                       && strstr (out, "tmpfs of 4.0 MiB at"),
                   "%s", out);

    // Release: archived first, then unmounted and gone.
    char arch[4096];
    snprintf (arch, sizeof arch, "%s", tu_path (s_farm.dir, "archive"));
    rc = s_pivctl (out, sizeof out, "release", "run2", "--to", arch, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "its allocation is released"), "%d: %s", rc, out);
    ck_assert_int_eq (s_check_archived ("run2", arch), 8);
    ck_assert (!s_is_tmpfs (tu_path (s_farm.dir, "data/run2")));
    ck_assert (!s_exists ("data/run2"));
    char *state = tu_farm_sql_text (&s_farm, "SELECT state FROM allocations");
    ck_assert_str_eq (state, "released");
    free (state);
}
END_TEST

START_TEST (archive_verifies_every_copy_removes_the_originals_and_replay_reads_the_archive)
{
    tu_farm_conf (&s_farm, "piv", 2, "32", "");
    tu_farm_render (&s_farm, 6, "v");
    s_start_farm ();
    tu_farm_land (&s_farm, "v", 1, 6, 0);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 6, 60).done, 6);
    char arch[4096], out[1 << 16];
    snprintf (arch, sizeof arch, "%s", tu_path (s_farm.dir, "archive"));
    // Not under the watch root: the watcher would take copies for frames.
    int rc = s_pivctl (out, sizeof out, "archive", "exp1", "--to",
                       tu_path (s_farm.dir, "data/arch"), NULL);
    ck_assert_msg (rc == 2 && strstr (out, "lies under the watch root"), "%s", out);
    rc = s_pivctl (out, sizeof out, "archive", "exp1", "--to", arch, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "archived exp1 to") && strstr (out, "12 file(s) copied")
                       && strstr (out, "12 original(s) removed"),
                   "%d: %s", rc, out);
    ck_assert_int_eq (s_check_archived ("exp1", arch), 12);
    ck_assert (!s_exists ("data/exp1/v_0001_a.tif"));
    // The replay reads the frames where the archive put them.
    rc = s_pivctl (out, sizeof out, "replay", "exp1", "--speed", "max", NULL);
    ck_assert_msg (rc == 0, "replay from the archive: %d: %s", rc, out);
    ck_assert_int_eq (s_pairs_done ("exp1.replay1"), 6);
    ck_assert (s_exists ("results/exp1.replay1/v_0006.txt"));
}
END_TEST

// A farm whose archive is slow (2 MB/s) over 10 pairs of 512 KiB frames,
// the archive started and the broker killed once 'copies' are recorded.
static void
s_interrupted_archive (const char *arch, int copies)
{
    tu_farm_conf (&s_farm, "noop", 1, "32",
                  "storage\n    archive_mb_s = 2\n    io_size = 64K\n");
    s_start_farm ();
    s_write_frames ("exp1", "f", 10, 512 * 1024);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 10, 60).done, 10);
    char out[8192];
    int rc = s_pivctl (out, sizeof out, "archive", "exp1", "--to", arch, "--no-wait", NULL);
    ck_assert_msg (rc == 0, "%s", out);
    int64_t located = 0;
    for (int i = 0; i < 200 && located < copies; i++) {
        usleep (50000);
        located = tu_farm_sql (&s_farm, "SELECT count(*) FROM files WHERE location IS NOT NULL");
    }
    ck_assert_msg (located >= copies && located < 20, "%lld copies recorded", (long long) located);
    tu_stop (s_farm.broker, SIGKILL, 5);
    s_farm.broker = 0;
    // Nothing is removed before the whole archive is recorded.
    for (int i = 1; i <= 10; i++) {
        char name[64];
        snprintf (name, sizeof name, "data/exp1/f_%04d_b.tif", i);
        ck_assert_msg (s_exists (name), "'%s' is gone", name);
    }
}

START_TEST (an_interrupted_archive_resumes_where_it_was)
{
    char arch[4096], out[1 << 16];
    snprintf (arch, sizeof arch, "%s", tu_path (s_farm.dir, "archive"));
    s_interrupted_archive (arch, 4);
    tu_farm_start_broker (&s_farm);  // goes on by itself
    int rc = s_pivctl (out, sizeof out, "archive", "exp1", "--to", arch, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "20 original(s) removed"), "%d: %s", rc, out);
    ck_assert_int_eq (s_check_archived ("exp1", arch), 20);
    int64_t before = tu_farm_sql (&s_farm, "SELECT count(*) FROM events WHERE kind = 'archived'");
    ck_assert_int_eq (before, 20);  // each copy made and recorded once
    ck_assert (!s_exists ("data/exp1/f_0010_b.tif"));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "resuming the archive of 'exp1'", 0));
}
END_TEST

START_TEST (a_corrupted_copy_stops_the_archive_with_a_clear_error_and_removes_nothing)
{
    char arch[4096], out[1 << 16];
    snprintf (arch, sizeof arch, "%s", tu_path (s_farm.dir, "archive"));
    s_interrupted_archive (arch, 3);
    // Bit rot on the archive tier, in a copy already recorded.
    char *loc = tu_farm_sql_text (&s_farm, "SELECT location FROM files WHERE location IS NOT NULL"
                                           " ORDER BY id LIMIT 1");
    ck_assert (loc != NULL);
    size_t len;
    char *bytes = tu_slurp (loc, &len);
    ck_assert (bytes && len > 1000);
    bytes[1000] ^= 1;
    tu_spit (loc, bytes, len);
    free (bytes);
    tu_farm_start_broker (&s_farm);
    int rc = s_pivctl (out, sizeof out, "archive", "exp1", "--to", arch, NULL);
    ck_assert_msg (rc == 1 && strstr (out, "checksum mismatch") && strstr (out, loc)
                       && strstr (out, "nothing removed"),
                   "%d: %s", rc, out);
    for (int i = 1; i <= 10; i++) {
        char name[64];
        snprintf (name, sizeof name, "data/exp1/f_%04d_a.tif", i);
        ck_assert_msg (s_exists (name), "'%s' was removed", name);
    }
    char *w = s_warning ("archive", "checksum mismatch", 3000);
    ck_assert_msg (w != NULL, "no warning of the failed archive");
    free (w);
    free (loc);
}
END_TEST

// Five pairs g_0001 ... landed in exp1 while the guard holds dispatch
// back: none goes out, and status says why, with 'one' and 'other' in it.
static void
s_land_while_paused (const char *one, const char *other)
{
    s_write_frames ("exp1", "g", 5, 100);
    usleep (1500000);
    tu_counts_t c = tu_farm_counts (&s_farm);
    ck_assert_msg (c.done == 0 && c.pending == 5, "done %lld, pending %lld", (long long) c.done,
                   (long long) c.pending);
    jdoc_t *doc = s_status ();
    ck_assert_int_eq (jdoc_bool (doc, 0, "$.guard_paused"), 1);
    const char *why = jdoc_string (doc, "$.guard_why");
    ck_assert_msg (why && strstr (why, one) && strstr (why, other), "%s", why ? why : "none");
    jdoc_destroy (&doc);
}

START_TEST (the_free_space_guard_pauses_dispatch_on_a_full_results_volume_and_resumes)
{
    if (!s_root ("the free-space guard on a small RAM disk"))
        return;
    s_mount_tmpfs (tu_path (s_farm.dir, "results"), "4m");
    tu_farm_conf (&s_farm, "noop", 1, "32",
                  "storage\n    guard_ms = 100\n    warn_free = 3M\n    critical_free = 2M\n");
    char filler[4096];
    snprintf (filler, sizeof filler, "%s", tu_path (s_farm.dir, "results/filler"));
    char *block = calloc (1, 3 << 20);
    tu_spit (filler, block, 3 << 20);
    free (block);
    s_start_farm ();
    s_land_while_paused ("results", "results");
    char *w = s_warning ("space", "no new work is dispatched", 0);
    ck_assert_msg (w != NULL, "no critical space warning");
    free (w);
    char out[1 << 16];
    s_pivctl (out, sizeof out, "status", NULL);
    ck_assert_msg (strstr (out, "DISPATCH PAUSED by the free-space guard"), "%s", out);
    // The status page says it in a banner.
    setenv ("PIVFARM_CONF", s_farm.conf, 1);
    setenv ("REQUEST_METHOD", "GET", 1);
    setenv ("QUERY_STRING", "", 1);
    char *cgi[] = {(char *) tu_bin ("pivfarm.cgi"), NULL};
    ck_assert_int_eq (tu_run (cgi, out, sizeof out, 30), 0);
    ck_assert_msg (strstr (out, "banner bad storage-warning")
                       && strstr (out, "no new work is dispatched"),
                   "no banner on the status page");
    // Space returns: the farm goes on by itself; nothing was dropped.
    unlink (filler);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 5, 30).done, 5);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "space is back", 0));
}
END_TEST

// The guard sized by the growth it measures: a results volume with 30 of
// its 64 MiB free is far above critical_free (1M), but falling by some
// 16 MB/s it would be full within storage/headroom_s (60 s): dispatch
// pauses, and resumes once the growth is over and the space is back.
START_TEST (the_free_space_guard_pauses_dispatch_when_the_measured_growth_would_fill_the_volume)
{
    if (!s_root ("the free-space guard's headroom on a small RAM disk"))
        return;
    s_mount_tmpfs (tu_path (s_farm.dir, "results"), "64m");
    tu_farm_conf (&s_farm, "noop", 1, "32",
                  "storage\n    guard_ms = 100\n    warn_free = 2M\n    critical_free = 1M\n"
                  "    headroom_s = 60\n");
    s_start_farm ();
    usleep (1200000);  // the guard's samples of the volume before it grows
    char filler[4096];
    snprintf (filler, sizeof filler, "%s", tu_path (s_farm.dir, "results/filler"));
    FILE *f = fopen (filler, "w");
    ck_assert_msg (f != NULL, "cannot write '%s'", filler);
    char *block = calloc (1, 4 << 20);
    for (int i = 0; i < 8; i++) {  // 32 MiB in 2 s
        ck_assert (fwrite (block, 1, 4 << 20, f) == 4 << 20 && fflush (f) == 0);
        usleep (250000);
    }
    fclose (f);
    free (block);
    s_land_while_paused ("results", "storage/headroom_s");
    jdoc_t *doc = s_status ();
    ck_assert_str_eq (jdoc_string (doc, "$.volumes[1].role"), "results");
    double growth = jdoc_number (doc, 0, "$.volumes[1].growth_bytes_s");
    ck_assert_msg (growth > 1e6, "growth_bytes_s %g", growth);
    jdoc_destroy (&doc);
    char *w = s_warning ("space", "falling by", 0);
    ck_assert_msg (w != NULL && strstr (w, "no new work is dispatched"), "%s", w ? w : "none");
    free (w);
    // The growth over and the space back: the farm goes on by itself.
    unlink (filler);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 5, 30).done, 5);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "space is back", 0));
}
END_TEST

// Every entry of data/exp1 with its bytes, as one string, to compare
// before and after (byte for byte).
static char *
s_snapshot (const char *rel)
{
    char cmd[8192];
    snprintf (cmd, sizeof cmd, "cd '%s' && find . | sort && find . -type f | sort | xargs -r cat | sha256sum",
              tu_path (s_farm.dir, rel));
    FILE *p = popen (cmd, "r");
    ck_assert (p != NULL);
    static char buf[1 << 16];
    size_t n = fread (buf, 1, sizeof buf - 1, p);
    buf[n] = '\0';
    pclose (p);
    return strdup (buf);
}

START_TEST (archive_refuses_a_destination_that_leads_back_into_the_root_creating_and_removing_nothing)
{
    tu_farm_conf (&s_farm, "noop", 1, "32", "");
    s_start_farm ();
    s_write_frames ("exp1", "g", 3, 4096);
    ck_assert_int_eq (tu_farm_wait_done (&s_farm, 3, 30).done, 3);
    char *before = s_snapshot ("data"), out[1 << 16], link[4096];
    // <to>/exp1 is a link to the experiment's own directory: the copies
    // would replace their originals, which would then be removed.
    ck_assert (mkdir (tu_path (s_farm.dir, "archA"), 0755) == 0);
    snprintf (link, sizeof link, "%s", tu_path (s_farm.dir, "data/exp1"));
    ck_assert (symlink (link, tu_path (s_farm.dir, "archA/exp1")) == 0);
    // <to> is a link to the watch root.
    snprintf (link, sizeof link, "%s", tu_path (s_farm.dir, "data"));
    ck_assert (symlink (link, tu_path (s_farm.dir, "archB")) == 0);
    const char *cases[] = {"archA", "archB", "data/newarch", "data/exp1"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char to[4096];
        snprintf (to, sizeof to, "%s", tu_path (s_farm.dir, cases[i]));
        int rc = s_pivctl (out, sizeof out, "archive", "exp1", "--to", to, NULL);
        printf ("archive --to %s: %d: %s", cases[i], rc, out);
        ck_assert_msg (rc == 2 && strstr (out, "lies under the watch root")
                           && strstr (out, "nothing was created or removed"),
                       "%s: %d: %s", cases[i], rc, out);
        char *after = s_snapshot ("data");
        ck_assert_msg (strcmp (before, after) == 0, "%s: the watch root changed:\n%s\n---\n%s",
                       cases[i], before, after);
        free (after);
    }
    ck_assert (!s_exists ("data/newarch"));
    char *arch = s_snapshot ("archA");
    ck_assert_msg (strstr (arch, "./exp1\n") && !strstr (arch, "g_0001"), "%s", arch);
    free (arch);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files WHERE location IS NOT NULL"), 0);
    // A plain archive still works.
    char arch_ok[4096];
    snprintf (arch_ok, sizeof arch_ok, "%s", tu_path (s_farm.dir, "arch"));
    int rc = s_pivctl (out, sizeof out, "archive", "exp1", "--to", arch_ok, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "6 original(s) removed"), "%d: %s", rc, out);
    ck_assert_int_eq (s_check_archived ("exp1", arch_ok), 6);
    free (before);
}
END_TEST

START_TEST (provision_refuses_a_ram_disk_larger_than_half_the_memory_naming_both)
{
    tu_farm_start_broker (&s_farm);
    long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGE_SIZE);
    char size[64], out[1 << 16];
    snprintf (size, sizeof size, "%lld", (long long) pages * page / 100 * 60);  // 60 %
    int rc = s_pivctl (out, sizeof out, "provision", "run3", "--size", size, "--hours", "1", NULL);
    printf ("provision --size %s: %d: %s", size, rc, out);
    ck_assert_msg (rc == 2 && strstr (out, "more than half of this host's memory")
                       && strstr (out, "give at most"),
                   "%d: %s", rc, out);
    ck_assert (!s_exists ("data/run3"));
}
END_TEST

START_TEST (a_full_results_volume_defers_pairs_and_they_complete_once_there_is_room)
{
    // agent/min_free_mb far beyond any volume: the agent is short of
    // space for every pair. max_attempts = 1: a pair counted as failed
    // would be failed for good.
    tu_farm_conf (&s_farm, "piv", 1, "32", "    min_free_mb = 1048576\n");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    tu_farm_render (&s_farm, 2, "d");
    s_start_farm ();
    tu_farm_land (&s_farm, "d", 1, 2, 0);
    ck_assert_msg (tu_farm_log_has (&s_farm, "agent1.log", "is full", 10000),
                   "the agent did not say its results volume is full");
    ck_assert (tu_farm_log_has (&s_farm, "agent1.log", "taking no work", 0));
    usleep (1500000);
    tu_counts_t c = tu_farm_counts (&s_farm);
    ck_assert_msg (c.failed == 0 && c.done == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    ck_assert (!s_exists ("results/exp1/d_0001.txt"));
    // Room returns (the agent restarted with a threshold it meets).
    tu_stop (s_farm.agents[0], SIGTERM, 20);
    tu_farm_conf_replace (&s_farm, "    min_free_mb = 1048576\n", "    min_free_mb = 1\n");
    s_farm.agents[0] = tu_farm_start (&s_farm, "pivfarm-agent", "agent2.log", "--id", "a1");
    c = tu_farm_wait_done (&s_farm, 2, 60);
    ck_assert_msg (c.done == 2 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    ck_assert (s_exists ("results/exp1/d_0001.txt"));
}
END_TEST

START_TEST (an_agent_short_of_space_resumes_by_itself_when_room_returns)
{
    if (!s_root ("a full results RAM disk"))
        return;
    // A 4 MiB results volume, 3 MiB of it taken; min_free_mb = 2.
    s_mount_tmpfs (tu_path (s_farm.dir, "results"), "4m");
    tu_farm_conf (&s_farm, "piv", 1, "32", "    min_free_mb = 2\n");
    tu_farm_conf_replace (&s_farm, "    liveness = 3\n", "    liveness = 3\n    max_attempts = 1\n");
    char filler[4096];
    snprintf (filler, sizeof filler, "%s", tu_path (s_farm.dir, "results/filler"));
    char *block = calloc (1, 3 << 20);
    tu_spit (filler, block, 3 << 20);
    free (block);
    tu_farm_render (&s_farm, 2, "r");
    s_start_farm ();
    tu_farm_land (&s_farm, "r", 1, 2, 0);
    ck_assert_msg (tu_farm_log_has (&s_farm, "agent1.log", "is full", 10000),
                   "the agent did not say its results volume is full");
    tu_counts_t c = tu_farm_counts (&s_farm);
    ck_assert_msg (c.failed == 0 && c.done == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    // Room returns: the same agent takes work again (READY) and the
    // deferred pairs, requeued by the broker, are done.
    unlink (filler);
    c = tu_farm_wait_done (&s_farm, 2, 60);
    ck_assert_msg (c.done == 2 && c.failed == 0, "done %lld failed %lld", (long long) c.done,
                   (long long) c.failed);
    ck_assert (tu_farm_log_has (&s_farm, "agent1.log", "has room again", 0));
}
END_TEST

// Issue 14: a camera's temporary file recorded by a watcher whose patterns
// did not cover it, then renamed; another still there; the renamed frame
// deleted while the archive runs. The release skips them with notes, completes,
// and unmounts the RAM disk (before: the archive failed for ever on the
// vanished file and the RAM disk stayed, CRITICAL).
START_TEST (release_skips_vanished_and_temporary_files_with_notes_and_unmounts)
{
    if (!s_root ("releasing a RAM disk"))
        return;
    // 1 MB/s: the archive of the frames below takes about 2 s.
    tu_farm_conf (&s_farm, "noop", 1, "32",
                  "storage\n    guard_ms = 200\n    archive_mb_s = 1\n");
    tu_farm_start_broker (&s_farm);  // the default watcher/ignore
    // The watcher runs with the old default patterns: it reports the
    // camera's x_0001_a.tif.tmp-AB12CD.
    tu_farm_conf_replace (&s_farm, "    resend_ms = 100\n",
                          "    resend_ms = 100\n    ignore = .*,*.tmp,*.part,*~\n");
    s_farm.watcher = tu_farm_start (&s_farm, "pivfarm-watcher", "watcher.log", NULL, NULL);
    ck_assert (tu_farm_log_has (&s_farm, "watcher.log", "watching", 5000));
    char out[1 << 16];
    int rc = s_pivctl (out, sizeof out, "provision", "run2", "--size", "8M", "--hours", "1",
                       NULL);
    ck_assert_msg (rc == 0, "%d: %s", rc, out);
    s_write_frames ("run2", "r", 3, 300 * 1024);
    tu_spit (tu_path (s_farm.dir, "data/run2/x_0001_a.tif.tmp-AB12CD"), "half a frame", 12);
    tu_spit (tu_path (s_farm.dir, "data/run2/x_0002_a.tif.tmp-EF34GH"), "half a frame", 12);
    for (int i = 0; i < 100 && tu_farm_sql (&s_farm, "SELECT count(*) FROM files") < 8; i++)
        usleep (100000);
    ck_assert_int_eq (tu_farm_sql (&s_farm, "SELECT count(*) FROM files WHERE name LIKE "
                                            "'x_%%.tif.tmp-%%'"),
                      2);
    // The camera renames its first temporary file once written.
    ck_assert (rename (tu_path (s_farm.dir, "data/run2/x_0001_a.tif.tmp-AB12CD"),
                       tu_path (s_farm.dir, "data/run2/x_0001_a.tif"))
               == 0);
    for (int i = 0; i < 100 && tu_farm_sql (&s_farm, "SELECT count(*) FROM files") < 9; i++)
        usleep (100000);

    char arch[4096];
    snprintf (arch, sizeof arch, "%s", tu_path (s_farm.dir, "archive"));
    rc = s_pivctl (out, sizeof out, "release", "run2", "--to", arch, "--no-wait", NULL);
    ck_assert_msg (rc == 0, "%d: %s", rc, out);
    // The last file of the job (recorded last: the renamed frame) goes
    // while the first ones are copied.
    ck_assert (unlink (tu_path (s_farm.dir, "data/run2/x_0001_a.tif")) == 0);
    rc = s_pivctl (out, sizeof out, "release", "run2", "--to", arch, NULL);
    ck_assert_msg (rc == 0 && strstr (out, "its allocation is released"), "%d: %s", rc, out);
    ck_assert (!s_is_tmpfs (tu_path (s_farm.dir, "data/run2")));
    ck_assert (!s_exists ("data/run2"));
    char *state = tu_farm_sql_text (&s_farm, "SELECT state FROM allocations");
    ck_assert_str_eq (state, "released");
    free (state);
    // The real frames are archived and verified.
    ck_assert (s_exists ("archive/run2/r_0001_a.tif") && s_exists ("archive/run2/r_0003_b.tif"));
    ck_assert (!s_exists ("archive/run2/x_0001_a.tif"));
    ck_assert (!s_exists ("archive/run2/x_0002_a.tif.tmp-EF34GH"));
    // The notes say what was skipped, in status, the event log and the log.
    jdoc_t *doc = s_status ();
    const char *notes = NULL;
    int n = jdoc_length (doc, "$.experiments");
    for (int i = 0; i < n; i++)
        if (strcmp (jdoc_string (doc, "$.experiments[%d].experiment", i), "run2") == 0) {
            notes = jdoc_string (doc, "$.experiments[%d].archive.notes", i);
            ck_assert_msg (jdoc_int (doc, -1, "$.experiments[%d].archive.skipped", i) == 3, "%s",
                           jdoc_string (doc, "$.experiments[%d].archive.notes", i));
            ck_assert_str_eq (jdoc_string (doc, "$.experiments[%d].archive.state", i), "done");
        }
    ck_assert_msg (notes && strstr (notes, "'x_0001_a.tif.tmp-AB12CD' ignored (watcher/ignore)")
                       && strstr (notes, "'x_0002_a.tif.tmp-EF34GH' ignored")
                       && strstr (notes, "'x_0001_a.tif' vanished since it was recorded"),
                   "notes: %s", notes ? notes : "(none)");
    n = jdoc_length (doc, "$.warnings");
    for (int i = 0; i < n; i++)
        ck_assert_msg (strcmp (jdoc_string (doc, "$.warnings[%d].kind", i), "archive") != 0,
                       "%s", jdoc_string (doc, "$.warnings[%d].message", i));
    jdoc_destroy (&doc);
    rc = s_pivctl (out, sizeof out, "log", "run2", NULL);
    ck_assert_msg (rc == 0 && strstr (out, "skipped=3") && strstr (out, "x_0001_a.tif' vanished"), "%s",
                   out);
    ck_assert (tu_farm_log_has (&s_farm, "broker.log",
                                "skipped 'x_0002_a.tif.tmp-EF34GH': its name matches", 0));
    ck_assert (tu_farm_log_has (&s_farm, "broker.log", "x_0001_a.tif': vanished", 0));
}
END_TEST

static TCase *
s_tcase (Suite *suite, const char *name, int timeout)
{
    TCase *tc = tcase_create (name);
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, timeout);
    suite_add_tcase (suite, tc);
    return tc;
}

int
main (void)
{
    Suite *suite = suite_create ("storage");
    TCase *tc = s_tcase (suite, "pieces", 60);
    tcase_add_test (tc, sha256_matches_the_fips_180_4_vectors);
    tcase_add_test (tc, sizes_rates_and_thresholds_read_as_documented);
    tcase_add_test (tc, iobench_measures_a_ram_disk_and_a_disk_directory_with_sane_figures);
    tc = s_tcase (suite, "lifecycle", 120);
    tcase_add_test (tc, provision_mounts_a_ram_disk_warns_and_release_archives_then_unmounts_it);
    tcase_add_test (tc, archive_verifies_every_copy_removes_the_originals_and_replay_reads_the_archive);
    tcase_add_test (tc, an_interrupted_archive_resumes_where_it_was);
    tcase_add_test (tc, a_corrupted_copy_stops_the_archive_with_a_clear_error_and_removes_nothing);
    tcase_add_test (tc, the_free_space_guard_pauses_dispatch_on_a_full_results_volume_and_resumes);
    tcase_add_test (tc,
                    the_free_space_guard_pauses_dispatch_when_the_measured_growth_would_fill_the_volume);
    tc = s_tcase (suite, "confined", 120);
    tcase_add_test (tc, archive_refuses_a_destination_that_leads_back_into_the_root_creating_and_removing_nothing);
    tcase_add_test (tc, provision_refuses_a_ram_disk_larger_than_half_the_memory_naming_both);
    tcase_add_test (tc, a_full_results_volume_defers_pairs_and_they_complete_once_there_is_room);
    tcase_add_test (tc, an_agent_short_of_space_resumes_by_itself_when_room_returns);
    tcase_add_test (tc, release_skips_vanished_and_temporary_files_with_notes_and_unmounts);
    return tu_run_suite (suite);
}
