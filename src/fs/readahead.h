/* The kernel's read-ahead window of a mount. A FUSE mount starts with
 * the kernel's default (128 KiB) and its daemon may only lower that at
 * INIT; the bdi's sysfs file can raise it. With a window of a few MiB the
 * kernel asks for the next chunks while an application reads sequentially,
 * and the worker threads decode them side by side. */
#ifndef TRAJFS_FS_READAHEAD_H
#define TRAJFS_FS_READAHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    pthread_t thread;
    bool started;
    char *mountpoint;
    size_t bytes;
} fs_readahead;

/* Sets the window of the mount at mountpoint (absolute) to bytes, from a
 * thread: the mount answers stat only once the session loop runs, and
 * the window may only be raised after INIT. Failure (not root, no sysfs)
 * is logged and otherwise harmless. bytes == 0 keeps the kernel's. */
void fs_readahead_start(fs_readahead *ra, const char *mountpoint, size_t bytes);
/* Waits for that thread; call once the session is unmounted. */
void fs_readahead_join(fs_readahead *ra);

#endif
