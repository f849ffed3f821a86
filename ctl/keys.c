// keys.c — keygen: a CURVE key pair (doc/security.md).

#include "ctl/ctl.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (access (public_path, F_OK) == 0 || access (secret_path, F_OK) == 0) {
        ctl_error ("'%s' or its secret part exists already: remove them first, or choose "
                   "another name",
                   public_path);
        return EXIT_FAILED;
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        ctl_error ("cannot make a key pair: no entropy or no memory");
        return EXIT_FAILED;
    }
    zcert_set_meta (cert, "name", "%s", name);
    zcert_set_meta (cert, "created-by", "pivctl keygen");
    // The secret file is readable by its owner alone, from its first byte.
    mode_t mask = umask (077);
    int rc = zcert_save (cert, public_path);
    umask (mask);
    if (rc == 0)
        chmod (public_path, 0644);
    if (rc != 0) {
        ctl_error ("cannot write '%s': %s", public_path, strerror (errno));
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
