/* File attributes and entry replies: from the catalog for committed
 * entries, from the write handle for a file being written. */
#ifndef TRAJFS_FS_ATTR_H
#define TRAJFS_FS_ATTR_H

#include <sys/stat.h>

#include "fs/state.h"

/* How long the kernel may keep names and attributes of committed
 * entries. A read-only archive never changes: a day. In a read-write
 * mount the changes made through it reach the kernel's caches
 * explicitly; the second is a bound on what a missed case could leave. */
double fs_cache_timeout(const fs_state *fs);

void fs_attr_of_node(const fs_state *fs, const fs_node *n, struct stat *st);
void fs_entry_of_node(const fs_state *fs, const fs_node *n, struct fuse_entry_param *ep);
/* A file being written (its attributes change with every write: the
 * kernel must not cache them). */
void fs_attr_of_writing(const fs_state *fs, const fs_write_attrs *a, struct stat *st);
void fs_entry_of_writing(const fs_state *fs, const fs_write_attrs *a, struct fuse_entry_param *ep);

/* The attributes of inode ino as its writer sees them (its most recent
 * write handle) or as committed; returns 0 or ENOENT. *timeout: how long
 * the kernel may keep them. Takes the view lock. */
int fs_attr_of_ino(fs_state *fs, uint64_t ino, struct stat *st, double *timeout);

#endif
