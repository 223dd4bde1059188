#include "fs/mount_helper.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const MOUNT_ONLY[] = {
    "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group",
    "nofail", "_netdev",
};

bool fs_is_mount_helper(const char *argv0)
{
    const char *base = strrchr(argv0, '/');
    return strcmp(base ? base + 1 : argv0, FS_MOUNT_HELPER_NAME) == 0;
}

static bool mount_only(const char *opt)
{
    if (strncmp(opt, "x-", 2) == 0 || strncmp(opt, "comment=", 8) == 0)
        return true;
    for (size_t i = 0; i < sizeof MOUNT_ONLY / sizeof *MOUNT_ONLY; i++)
        if (strcmp(opt, MOUNT_ONLY[i]) == 0)
            return true;
    return false;
}

/* Appends the options of a comma-separated list that trajfs reads. */
static int keep_options(const char *list, char **kept)
{
    char *copy = strdup(list);
    if (!copy)
        return -1;
    int rc = 0;
    char *save = NULL;
    for (char *opt = strtok_r(copy, ",", &save); opt && rc == 0; opt = strtok_r(NULL, ",", &save))
        if (!mount_only(opt))
            rc = fuse_opt_add_opt(kept, opt);
    free(copy);
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: %s ARCHIVE DIR [-sfnv] [-o OPTIONS]\n"
                    "(run by mount(8); see trajfs(1))\n", FS_MOUNT_HELPER_NAME);
    return -1;
}

int fs_mount_helper_args(int argc, char **argv, struct fuse_args *args)
{
    char *kept = NULL;
    bool fake = false;
    int c, rc = 0;
    optind = 1;
    while (rc == 0 && (c = getopt(argc, argv, "sfnvho:t:N:")) != -1) {
        switch (c) {
        case 's': /* sloppy, */
        case 'n': /* no mtab, */
        case 'v': /* verbose, */
        case 't': /* the type: nothing to do */
            break;
        case 'f':
            fake = true;
            break;
        case 'o':
            if (keep_options(optarg, &kept) < 0) {
                fprintf(stderr, "%s: out of memory\n", FS_MOUNT_HELPER_NAME);
                rc = -1;
            }
            break;
        case 'N':
            fprintf(stderr, "%s: -N (mount namespaces) is not supported\n", FS_MOUNT_HELPER_NAME);
            rc = -1;
            break;
        default:
            rc = usage();
        }
    }
    if (rc == 0 && argc - optind != 2)
        rc = usage();
    if (rc == 0 && fake)
        rc = 1;
    if (rc == 0 && (fuse_opt_add_arg(args, argv[0]) < 0 ||
                    fuse_opt_add_arg(args, argv[optind]) < 0 ||
                    fuse_opt_add_arg(args, argv[optind + 1]) < 0 ||
                    (kept && (fuse_opt_add_arg(args, "-o") < 0 || fuse_opt_add_arg(args, kept) < 0)))) {
        fprintf(stderr, "%s: out of memory\n", FS_MOUNT_HELPER_NAME);
        rc = -1;
    }
    free(kept);
    return rc;
}
