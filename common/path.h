// path.h — names from the wire or the disk, checked before they touch the
// file system, and files opened so that nothing outside a root is reached.
// Every name a peer or an operator gives (a FILE's experiment and name, a
// TASK's output, provision/archive/replay names) goes through these.

#ifndef COMMON_PATH_H
#define COMMON_PATH_H

#include <stddef.h>
#include <sys/types.h>

// 0 if 'name' is a plain relative path: not empty, not absolute, no empty,
// "." or ".." component, no byte below 0x20 nor 0x7f, valid UTF-8, at most
// PATH_MAX - 1 bytes, no component over NAME_MAX bytes (what a file system
// can hold). -1 otherwise, with why saying what is wrong in a few words
// ("an empty component", "a '..' component", "an absolute path", "a
// control character (0x0a)", "4310 bytes, over the 4095 PATH_MAX allows",
// ...; at most PATH_WHY bytes): the caller names the file. This is the
// one rule of the farm for the names of files: every door that takes one
// (the watcher, the codec, the agent, pivctl) applies it.
int path_check_relative (const char *name, char *why, size_t whylen);

// The same for one component: a plain relative path with no '/' at all.
// The rule of an experiment's name (a directory's name: at most NAME_MAX
// bytes), at every door that takes one: the codec, control's commands,
// pivctl, the status page's ?exp=.
int path_check_component (const char *name, char *why, size_t whylen);

#define PATH_WHY 64 // bytes of the longest why of the two checks, NUL included

// Opens 'rel' (path_check_relative must accept it) beneath the directory
// 'root' so that neither a '..' nor a symbolic link (at any depth) can lead
// outside 'root': openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, or,
// where the kernel has no openat2, each directory component opened with
// O_NOFOLLOW. 'flags' are open(2)'s (O_CLOEXEC and O_NOFOLLOW are always
// added; O_CREAT takes 'mode'). Returns the descriptor, or -1 with errno
// (EXDEV or ELOOP for an escape, EINVAL for a name path_check_relative
// refuses).
int path_open_beneath (const char *root, const char *rel, int flags, mode_t mode);

// mkdir -p of the directories of 'rel' up to its last '/', beneath 'root'
// as path_open_beneath resolves them (mode 0775 less the umask, shared as
// path_share_with_group says). 0, or -1 with errno.
int path_mkdirs_beneath (const char *root, const char *rel);

// A directory 'name' (of dirfd, or AT_FDCWD) just made in a parent of mode
// 'parent_mode': when that parent is setgid and group-writable (a directory
// shared by a group, doc/deploy.md), the new one is too, whatever the
// umask of the program that made it: agents of other users of the group
// (a Slurm job's, the systemd units') write into directories of each
// other's. Otherwise nothing changes. 0, or -1 with errno.
int path_share_with_group (int dirfd, const char *name, mode_t parent_mode);

// If 'path' lies under 'dir' (both absolute, compared component by
// component, no resolution), *rel_p points into 'path' at what follows
// dir's last component (never starting with '/') and 1 is returned; 0
// otherwise.
int path_under (const char *path, const char *dir, const char **rel_p);

#endif
