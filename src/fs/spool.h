/* Spool files: where the bytes written to a file wait for its commit. On
 * disk, never in memory, whatever the file's size: each is an unnamed file
 * (O_TMPFILE) in the spool directory, so nothing is left behind when the
 * daemon dies. */
#ifndef TRAJFS_FS_SPOOL_H
#define TRAJFS_FS_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* Opens the spool directory (kept open: later spool files are created
 * relative to it, wherever a mount may come to lie) and checks that a
 * spool file can be made there. Returns its descriptor, or -1. */
int fs_spool_open_dir(const char *dir, tf_error *e);

/* A new, empty spool file in the directory; its descriptor, or -errno. */
int fs_spool_create(int dirfd);

/* pwrite and pread of whole ranges; 0, or -errno. A read past the end of
 * the file gives fewer bytes (*got). */
int fs_spool_write(int fd, const void *p, size_t len, uint64_t off);
int fs_spool_read(int fd, void *p, size_t len, uint64_t off, size_t *got);

#endif
