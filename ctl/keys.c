// keys.c — keygen: a CURVE key pair (doc/security.md).

#include "ctl/ctl.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

// One part of the pair written by 'save' (zcert_save_public or
// zcert_save_secret) to its temporary, of 'mode' once in place. 0, or -1
// with err naming the file.
static int
s_save (ctl_out_t *out, const char *path, mode_t mode, int force, zcert_t *cert,
        int (*save) (zcert_t *, const char *), char *err, size_t errlen)
{
    if (ctl_out_init (out, NULL, path, mode, force, err, errlen) != 0)
        return -1;
    const char *open_as = ctl_out_name (out, err, errlen);
    if (!open_as)
        return -1;
    if (save (cert, open_as) != 0) {
        snprintf (err, errlen, "cannot write '%s': %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

int
ctl_run_keygen (ctl_t *ctl, ctl_args_t *args)
{
    (void)ctl;
    const char *name = args->words[0];
    const char *dir = ctl_value (args, "output");
    if (!dir)
        dir = ".";
    if (!*name || name[0] == '.' ||
        strspn (name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789._-") != strlen (name)) {
        ctl_error ("bad name '%s': letters, digits, '.', '_' and '-', not starting with '.'", name);
        return EXIT_USAGE;
    }
    char public_path[PATH_MAX], secret_path[PATH_MAX + 8];
    if ((size_t)snprintf (public_path, sizeof public_path, "%s/%s.cert", dir, name) >=
        sizeof public_path) {
        ctl_error ("the path '%s/%s.cert' is too long", dir, name);
        return EXIT_USAGE;
    }
    snprintf (secret_path, sizeof secret_path, "%s_secret", public_path);
    // DIR is made if missing, as export makes its own.
    char err[PATH_MAX + 512];
    if (ctl_mkdirs (dir, err, sizeof err) != 0) {
        ctl_error ("%s", err);
        return EXIT_FAILED;
    }
    struct stat st;
    int found = stat (dir, &st) == 0;
    if (!found || !S_ISDIR (st.st_mode)) {
        ctl_error ("cannot write in '%s': %s", dir, found ? "not a directory" : strerror (errno));
        return EXIT_FAILED;
    }
    // Both checked before either is written: a file or a link at either
    // name is refused (unless --force) and nothing is written.
    int force = ctl_value (args, "force") != NULL;
    const char *paths[] = {public_path, secret_path};
    for (int i = 0; i < 2; i++) {
        int rc = ctl_out_check (NULL, paths[i], force, err, sizeof err);
        if (rc != 0) {
            ctl_error ("%s; nothing written%s", err,
                       rc == 1 ? " (--force replaces it, or choose another name)" : "");
            return EXIT_FAILED;
        }
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        ctl_error ("cannot make a key pair: no entropy or no memory");
        return EXIT_FAILED;
    }
    zcert_set_meta (cert, "name", "%s", name);
    zcert_set_meta (cert, "created-by", "pivctl keygen");
    // The public part first, as zcert_save does (the secret one adds the
    // secret key to the text); the secret file put in place first (the
    // public one alone would be a key without its pair); if the public one
    // cannot follow, the secret one is removed again.
    ctl_out_t secret = {0}, public = {0};
    int rc = s_save (&public, public_path, 0644, force, cert, zcert_save_public, err, sizeof err);
    if (rc == 0)
        rc = s_save (&secret, secret_path, 0600, force, cert, zcert_save_secret, err, sizeof err);
    if (rc == 0)
        rc = ctl_out_commit (&secret, err, sizeof err);
    if (rc == 0 && (rc = ctl_out_commit (&public, err, sizeof err)) != 0)
        ctl_out_retract (&secret);
    ctl_out_release (&public);
    ctl_out_release (&secret);
    if (rc) {
        ctl_error ("%s; no key pair written", err);
        zcert_destroy (&cert);
        return EXIT_FAILED;
    }
    printf ("wrote %s (public key %s)\n"
            "  and %s (its secret key: it stays on the machine that uses it)\n"
            "the broker's pair: security/broker_cert = %s on the broker's machine, and a copy\n"
            "  of %s alone for every other program's security/broker_cert\n"
            "any other program's pair: security/client_cert = %s on its machine; copy\n"
            "  %s into the broker's security/clients directory to let it connect, and into\n"
            "  security/operators as well to let it change things\n",
            public_path, zcert_public_txt (cert), secret_path, public_path, public_path,
            public_path, public_path);
    zcert_destroy (&cert);
    return EXIT_OK;
}
