// keys.c — keygen: a CURVE key pair (doc/security.md).

#include "ctl/ctl.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

// Where a pair goes, by the role it is made for (doc/security.md, "One host,
// many identities"): the key of the configuration that names it, and the
// directory of the broker's clients its public part is copied into. Each
// line is printed with the public file's path for %1$s.
static const struct {
    const char *role;  // --role ROLE
    const char *where; // the steps, a printf format of one %1$s
} s_roles[] = {
    {"broker", "the broker's pair: security/broker_cert = %1$s on the broker's machine, its\n"
               "  secret readable by the broker's user alone; a copy of %1$s alone for every\n"
               "  other program's security/broker_cert\n"},
    {"watcher", "the watcher's pair: security/watcher_cert = %1$s on its machine, the secret\n"
                "  readable by the watcher's user; copy %1$s into the broker's\n"
                "  security/clients directory, under watchers/\n"},
    {"agent", "an agent's pair: security/agent_cert = %1$s on its machine, the secret\n"
              "  readable by the agent's user (pivfarm, or the Slurm job's submitting user);\n"
              "  copy %1$s into the broker's security/clients directory, under agents/\n"},
    {"page", "the status page's pair: security/page_cert = %1$s, the secret readable by\n"
             "  the web server's user; copy %1$s into the broker's security/clients\n"
             "  directory itself (a reader: the page only asks for status)\n"},
    {"operator", "an operator's pair: as ~/.config/pivfarm/client.cert (and its _secret) of\n"
                 "  the operator, or named by $PIVFARM_CERT or --cert; copy %1$s into the\n"
                 "  broker's security/operators directory (clients/operators/)\n"},
    {"reader", "a reader's pair: as ~/.config/pivfarm/client.cert (and its _secret) of its\n"
               "  user, or named by $PIVFARM_CERT or --cert; copy %1$s into the broker's\n"
               "  security/clients directory itself (it may read, not change things)\n"},
};
#define ROLES (sizeof s_roles / sizeof s_roles[0])

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
    // The role asked, else the name's when it is one (broker, watcher, ...).
    const char *asked = ctl_value (args, "role");
    int role = -1;
    for (size_t i = 0; i < ROLES; i++)
        if (strcmp (asked ? asked : name, s_roles[i].role) == 0)
            role = (int)i;
    if (asked && role < 0) {
        ctl_error ("bad --role '%s': broker, watcher, agent, page, operator or reader", asked);
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
            "  and %s (its secret key: it stays on the machine that uses it)\n",
            public_path, zcert_public_txt (cert), secret_path);
    if (role >= 0)
        printf (s_roles[role].where, public_path);
    else
        printf ("a program's pair: security/<program>_cert (watcher_cert, agent_cert,\n"
                "  page_cert, pivctl_cert) or security/client_cert = %s on its machine; copy\n"
                "  %s into the broker's security/clients directory (the subdirectory of its\n"
                "  role: doc/security.md); --role ROLE says which\n",
                public_path, public_path);
    zcert_destroy (&cert);
    return EXIT_OK;
}
