// storage.h — the storage lifecycle stage (storage.c, archive.c;
// doc/storage.md): fast space provisioned per experiment, the archive and
// its thread, the free-space guard with its warnings and volumes. It talks
// back to the reactor only through storage_host_t.

#ifndef BROKER_STORAGE_H
#define BROKER_STORAGE_H

#include "broker/clocks.h"
#include "broker/model.h"
#include "broker/text.h"
#include "common/config.h"
#include "store/store.h"

#include <czmq.h>

typedef struct _storage_t storage_t;

// What the storage stage is given: shared state it reads (not owned) and
// what it asks of the reactor.
typedef struct {
    const config_t *cfg;      // the broker's configuration (a reload changes it in place)
    store_t *store;           // the durable state
    zloop_t *loop;            // the guard's timer and the archiver's pipe run here
    zsock_t *publish;         // the 'state' topic
    zhashx_t *experiments;    // name -> exp_t
    clocks_t *clocks;         // peers' clocks, reported by the guard
    void *arg;                // for the callbacks:
    int (*commit) (void *arg);  // commit now (0, or -1: the store failed)
    void (*dispatch) (void *arg);  // the guard let dispatch go on: dispatch now
    exp_t *(*experiment) (void *arg, const char *name, int64_t now);  // by name, made if new
} storage_host_t;

// Starts the archiver and the guard (its first round at once), loads the
// allocations and resumes the archives a stop interrupted. NULL with err.
storage_t *storage_new (const storage_host_t *host, char *err, size_t errlen);
void storage_destroy (storage_t **self_p);
// Frees an experiment's allocation and archive records (memory only).
void storage_exp_release (exp_t *exp);

// The commands. Each returns a reply status (200, 400, 404, 500) with err
// saying why when it is not 200; the caller commits.
int storage_provision (storage_t *self, const char *name, int64_t size_bytes, double hours,
                       const char *dir, char *err, size_t errlen);
int storage_archive (storage_t *self, exp_t *exp, const char *to, int release, char *err,
                     size_t errlen);
int storage_release (storage_t *self, exp_t *exp, const char *to, char *err, size_t errlen);
// Clears warning 'which' (1-based, as status lists them) or all ('which'
// 0): each is hidden while its condition lasts (shown again if it ends and
// comes back), recorded as the setting 'warnings_cleared' and a "warning"
// event. The count cleared, or -1 with err (no such warning, store error).
int storage_warnings_clear (storage_t *self, int which, char *err, size_t errlen);

// The path of frame 'name' of exp as an agent reads it: its archived copy
// when it has one, else under the watch root.
void storage_frame_path (storage_t *self, exp_t *exp, const char *name, char *out, size_t size);
// 1 while the free-space guard holds new work back.
int storage_paused (const storage_t *self);
// The warnings in force.
int storage_warnings (const storage_t *self);
// "warnings":[...],"warnings_cleared":N,"clocks":[...],"guard_paused":B,
// "guard_why":S: what status says of storage, and the 'state' topic.
void storage_put_state (storage_t *self, text_t *t);
// "volumes":[{"role":R,"path":P,"free_bytes":F,"total_bytes":T}...].
void storage_put_volumes (const storage_t *self, text_t *t);
// The 'state' topic's JSON (malloc'd, caller frees; NULL without memory).
char *storage_state_json (storage_t *self);

// mount.c: mounts a RAM disk of 'size' bytes at 'path' (through 'helper',
// storage/mount_helper, when it is not "": HELPER mount SIZE PATH), or
// unmounts it (HELPER umount PATH). 0, or -1 with err.
int storage_mount (const char *helper, const char *path, int64_t size, char *err, size_t errlen);
int storage_umount (const char *helper, const char *path, char *err, size_t errlen);
// Resolves 'path' (absolute) as far as it exists: the real path of its
// nearest existing ancestor (symbolic links followed), then the components
// that do not exist yet. 0, or -1 with why (a '..' among those, a link to
// nowhere, an unreadable directory).
int storage_resolve (const char *path, char *out, size_t outlen, char *why, size_t whylen);

// archive.c: makes the directories of 'path' up to its last '/'. 0 or -1
// (errno).
int broker_mkparents (const char *path);
// The thread of the archiver.
void broker_archiver (zsock_t *pipe, void *args);

#endif
