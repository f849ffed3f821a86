// test_path.c — common/path: names checked before they touch the file
// system, and files opened beneath a root so that neither '..' nor a
// symbolic link (at any depth) leads out, on a real directory tree.

#include "common/path.h"
#include "tests/testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *s_dir;   // this test's temporary directory
static char s_root[PATH_MAX];  // <dir>/root
static char s_out[PATH_MAX];   // <dir>/outside, with secret.txt

static void
s_setup (void)
{
    s_dir = strdup (tu_tmpdir ());
    snprintf (s_root, sizeof s_root, "%s/root", s_dir);
    snprintf (s_out, sizeof s_out, "%s/outside", s_dir);
    ck_assert (mkdir (s_root, 0755) == 0 && mkdir (s_out, 0755) == 0);
    tu_spit (tu_path (s_out, "secret.txt"), "secret", 6);
    ck_assert (mkdir (tu_path (s_root, "exp"), 0755) == 0);
    tu_spit (tu_path (s_root, "exp/a.tif"), "frame", 5);
}

static void
s_teardown (void)
{
    tu_rmtree (s_dir);
    free (s_dir);
    s_dir = NULL;
}

START_TEST (plain_relative_names_pass_and_the_others_say_why)
{
    char why[128];
    const char *good[] = {"a", "exp/a.tif", "a/b/c", "..a", "a..", ".hidden", "\xc3\xa9t\xc3\xa9"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg (path_check_relative (good[i], why, sizeof why) == 0, "'%s': %s", good[i],
                       why);
    const struct {
        const char *name, *why;
    } bad[] = {
        {"", "an empty name"},           {"/etc/passwd", "an absolute path"},
        {"../x", "a '..' component"},    {"a/../../x", "a '..' component"},
        {"a/..", "a '..' component"},    {"./a", "a '.' component"},
        {"a//b", "an empty component"},  {"a/", "an empty component"},
        {"a\nb", "a control character (0x0a)"}, {"a\x7f", "a control character (0x7f)"},
        {"bad\xff", "bytes that are not UTF-8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        ck_assert_msg (path_check_relative (bad[i].name, why, sizeof why) == -1, "'%s' passed",
                       bad[i].name);
        ck_assert_msg (strcmp (why, bad[i].why) == 0, "'%s': '%s', not '%s'", bad[i].name, why,
                       bad[i].why);
    }
    static char long_name[PATH_MAX + 10];
    memset (long_name, 'a', sizeof long_name - 1);
    ck_assert (path_check_relative (long_name, why, sizeof why) == -1);
    ck_assert_str_eq (why, "4105 bytes, over the 4095 PATH_MAX allows");
    // A component no file system holds, and the longest one that it does.
    static char deep[16 * 257];
    for (int i = 0; i < 15; i++) {
        memset (deep + i * 256, 'd', 255);
        deep[i * 256 + 255] = '/';
    }
    deep[15 * 256 - 1] = '\0';  // 15 components of 255 bytes, 3839 in all
    ck_assert_msg (path_check_relative (deep, why, sizeof why) == 0, "%s", why);
    deep[14 * 256 + 255] = 'e';  // the last one, a byte longer
    deep[14 * 256 + 256] = '\0';
    ck_assert (path_check_relative (deep, why, sizeof why) == -1);
    ck_assert_str_eq (why, "a component of 256 bytes, over the 255 NAME_MAX allows");
    ck_assert (path_check_component (deep + 14 * 256, why, sizeof why) == -1);
    ck_assert_str_eq (why, "256 bytes, over the 255 NAME_MAX allows");
    ck_assert (path_check_component ("exp1", why, sizeof why) == 0);
    ck_assert (path_check_component ("exp1/x", why, sizeof why) == -1);
    ck_assert_str_eq (why, "a '/' in a single name");
    ck_assert (path_check_component ("..", why, sizeof why) == -1);
}
END_TEST

START_TEST (opens_beneath_the_root_and_never_outside)
{
    int fd = path_open_beneath (s_root, "exp/a.tif", O_RDONLY, 0);
    ck_assert (fd >= 0);
    char buf[8] = "";
    ck_assert_int_eq (read (fd, buf, sizeof buf), 5);
    ck_assert (memcmp (buf, "frame", 5) == 0);
    close (fd);
    // '..' is refused by name, before any open.
    errno = 0;
    ck_assert_int_eq (path_open_beneath (s_root, "../outside/secret.txt", O_RDONLY, 0), -1);
    ck_assert_int_eq (errno, EINVAL);
    // A link as the last component, in or out of the root.
    char target[PATH_MAX + 16];
    snprintf (target, sizeof target, "%s/secret.txt", s_out);
    ck_assert (symlink (target, tu_path (s_root, "exp/out.tif")) == 0);
    ck_assert (symlink ("a.tif", tu_path (s_root, "exp/in.tif")) == 0);
    errno = 0;
    ck_assert_int_eq (path_open_beneath (s_root, "exp/out.tif", O_RDONLY, 0), -1);
    ck_assert_msg (errno == ELOOP || errno == EXDEV, "errno %d", errno);
    ck_assert_int_eq (path_open_beneath (s_root, "exp/in.tif", O_RDONLY, 0), -1);
    // A directory link leading out, absolute or relative.
    ck_assert (symlink (s_out, tu_path (s_root, "abs")) == 0);
    ck_assert (symlink ("../outside", tu_path (s_root, "rel")) == 0);
    errno = 0;
    ck_assert_int_eq (path_open_beneath (s_root, "abs/secret.txt", O_RDONLY, 0), -1);
    ck_assert_msg (errno == ELOOP || errno == EXDEV, "errno %d", errno);
    errno = 0;
    ck_assert_int_eq (path_open_beneath (s_root, "rel/secret.txt", O_RDONLY, 0), -1);
    ck_assert_msg (errno == ELOOP || errno == EXDEV, "errno %d", errno);
    // Nothing created through a link either.
    ck_assert_int_eq (path_open_beneath (s_root, "abs/new.txt", O_WRONLY | O_CREAT, 0644), -1);
    ck_assert (access (tu_path (s_out, "new.txt"), F_OK) != 0);
    // A FIFO opens without blocking when asked (the caller checks its type).
    ck_assert (mkfifo (tu_path (s_root, "exp/fifo.tif"), 0644) == 0);
    fd = path_open_beneath (s_root, "exp/fifo.tif", O_RDONLY | O_NONBLOCK, 0);
    ck_assert (fd >= 0);
    struct stat st;
    ck_assert (fstat (fd, &st) == 0 && S_ISFIFO (st.st_mode));
    close (fd);
}
END_TEST

START_TEST (makes_directories_beneath_the_root_and_not_through_a_link)
{
    ck_assert (path_mkdirs_beneath (s_root, "new/deep/er/file.txt") == 0);
    struct stat st;
    ck_assert (stat (tu_path (s_root, "new/deep/er"), &st) == 0 && S_ISDIR (st.st_mode));
    ck_assert (access (tu_path (s_root, "new/deep/er/file.txt"), F_OK) != 0);
    int fd = path_open_beneath (s_root, "new/deep/er/file.txt", O_WRONLY | O_CREAT | O_EXCL, 0644);
    ck_assert (fd >= 0);
    close (fd);
    // Again: it exists already, fine.
    ck_assert (path_mkdirs_beneath (s_root, "new/deep/er/file.txt") == 0);
    // A plain name has no directory to make.
    ck_assert (path_mkdirs_beneath (s_root, "plain.txt") == 0);
    // Through a link out of the root: refused, nothing made outside.
    ck_assert (symlink (s_out, tu_path (s_root, "link")) == 0);
    ck_assert (path_mkdirs_beneath (s_root, "link/sub/file.txt") == -1);
    ck_assert (access (tu_path (s_out, "sub"), F_OK) != 0);
    errno = 0;
    ck_assert (path_mkdirs_beneath (s_root, "../outside/sub/x") == -1);
    ck_assert_int_eq (errno, EINVAL);
}
END_TEST

START_TEST (directories_made_in_a_group_shared_directory_are_shared_whatever_the_umask)
{
    // A results directory shared by a group (install -d -m 2775 -g piv):
    // what one user's agent makes in it, with a umask of 022 or 077, other
    // users of the group can write into.
    mode_t old = umask (077);
    ck_assert (mkdir (tu_path (s_root, "shared"), 0700) == 0);
    ck_assert (chmod (tu_path (s_root, "shared"), 02775) == 0);
    ck_assert (path_mkdirs_beneath (s_root, "shared/exp1/sub/file.txt") == 0);
    struct stat st;
    ck_assert (stat (tu_path (s_root, "shared/exp1"), &st) == 0);
    ck_assert_msg ((st.st_mode & 07777) == 02770, "shared/exp1: mode %04o", st.st_mode & 07777);
    ck_assert (stat (tu_path (s_root, "shared/exp1/sub"), &st) == 0);
    ck_assert_msg ((st.st_mode & 07777) == 02770, "shared/exp1/sub: mode %04o",
                   st.st_mode & 07777);
    // Anywhere else the umask decides, as for any program.
    ck_assert (path_mkdirs_beneath (s_root, "private/exp1/file.txt") == 0);
    ck_assert (stat (tu_path (s_root, "private/exp1"), &st) == 0);
    ck_assert_msg ((st.st_mode & 07777) == 0700, "private/exp1: mode %04o", st.st_mode & 07777);
    umask (old);
}
END_TEST

START_TEST (under_compares_components_without_resolving)
{
    const char *rel = NULL;
    ck_assert (path_under ("/data/exp1/a.tif", "/data", &rel) == 1);
    ck_assert_str_eq (rel, "exp1/a.tif");
    ck_assert (path_under ("/data/exp1/a.tif", "/data/", &rel) == 1);
    ck_assert_str_eq (rel, "exp1/a.tif");
    ck_assert (path_under ("/data", "/data", &rel) == 1);
    ck_assert_str_eq (rel, "");
    ck_assert (path_under ("/database/x", "/data", &rel) == 0);
    ck_assert (path_under ("/dat", "/data", &rel) == 0);
    ck_assert (path_under ("/x/y", "/", &rel) == 1);
    ck_assert_str_eq (rel, "x/y");
    ck_assert (path_under ("/data//exp1", "/data", &rel) == 1);
    ck_assert_str_eq (rel, "exp1");
    // No resolution: '..' is left for path_check_relative to refuse.
    ck_assert (path_under ("/data/../etc/passwd", "/data", &rel) == 1);
    ck_assert_str_eq (rel, "../etc/passwd");
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("path");
    TCase *tc = tcase_create ("path");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, plain_relative_names_pass_and_the_others_say_why);
    tcase_add_test (tc, opens_beneath_the_root_and_never_outside);
    tcase_add_test (tc, makes_directories_beneath_the_root_and_not_through_a_link);
    tcase_add_test (tc, directories_made_in_a_group_shared_directory_are_shared_whatever_the_umask);
    tcase_add_test (tc, under_compares_components_without_resolving);
    suite_add_tcase (suite, tc);
    return tu_run_suite (suite);
}
