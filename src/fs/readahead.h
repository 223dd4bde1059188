/* The kernel's read-ahead window of a mount. A FUSE mount starts with
 * the kernel's default (128 KiB) and its daemon may only lower that at
 * INIT; the bdi's sysfs file can raise it. With a window of a few MiB the
 * kernel asks for the next chunks while an application reads sequentially,
 * and the worker threads decode them side by side.
 *
 * The window is raised at the first lookup: the kernel sends none before
 * INIT is done (which would lower it again), and a file takes the window
 * of the moment it is opened, after a lookup. The mount's device comes
 * from /proc/self/mountinfo, not from stat of the mount point: a stat
 * holds the mount while it runs, and an umount at that moment would fail
 * with EBUSY. */
#ifndef TRAJFS_FS_READAHEAD_H
#define TRAJFS_FS_READAHEAD_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct {
    char path[64];        /* the bdi's read_ahead_kb file */
    size_t bytes;
    _Atomic int pending;  /* the window is still to be set */
} fs_readahead;

/* Once the archive is mounted at mountpoint (absolute): finds the mount's
 * bdi, to set its window to bytes later (0: keep the kernel's). A mount
 * not found is logged and otherwise harmless. */
void fs_readahead_prepare(fs_readahead *ra, const char *mountpoint, size_t bytes);
/* From the lookup handler: the first call sets the window, the others
 * return at once. Failure (not root, no sysfs) is logged and otherwise
 * harmless. */
void fs_readahead_apply(fs_readahead *ra);

#endif
