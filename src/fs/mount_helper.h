/* mount.trajfs: mount(8) runs /sbin/mount.trajfs for `mount -t trajfs`
 * and /etc/fstab entries of type trajfs, with its own argument
 * convention: mount.trajfs SPEC DIR [-sfnv] [-N NS] [-o OPTS] [-t TYPE]. */
#ifndef TRAJFS_FS_MOUNT_HELPER_H
#define TRAJFS_FS_MOUNT_HELPER_H

#include <stdbool.h>

#include <fuse3/fuse_opt.h>

#define FS_MOUNT_HELPER_NAME "mount.trajfs"

/* Whether the program was started under the mount helper's name. */
bool fs_is_mount_helper(const char *argv0);

/* Rewrites a mount helper command line into trajfs's own in args:
 * trajfs SPEC DIR -o OPTS, without the options that only mount(8) reads
 * (noauto, user, nofail, _netdev, x-*, ...). Returns 0; 1 when there is
 * nothing to do (-f: a fake mount); -1 after a message. */
int fs_mount_helper_args(int argc, char **argv, struct fuse_args *args);

#endif
