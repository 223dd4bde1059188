/* Changes of a read-write mount's tree, as jobs for the committer
 * thread (committer.h): new directories and symbolic links, removals,
 * renames, and new attributes (mode, time, size) of committed entries.
 * A job makes one change (one commit, or none when a check fails),
 * replies to its request and frees itself. Its checks against the tree
 * need no lock: only the committer changes it. */
#ifndef TRAJFS_FS_TREE_JOBS_H
#define TRAJFS_FS_TREE_JOBS_H

#include <stdint.h>
#include <sys/stat.h>

#include "fs/fuse_api.h"
#include "fs/state.h"

typedef enum {
    FS_TREE_MKDIR,
    FS_TREE_SYMLINK,
    FS_TREE_UNLINK,
    FS_TREE_RMDIR,
    FS_TREE_RENAME,
} fs_tree_change;

/* The change on name in directory parent (RENAME: to new_name in
 * new_parent, with rename(2)'s flags; SYMLINK: pointing to target;
 * MKDIR: with permission bits mode). Replies ENOMEM at once when out of
 * memory. */
void fs_queue_tree_change(fs_state *fs, fuse_req_t req, fs_tree_change kind, uint64_t parent,
                          const char *name, uint64_t new_parent, const char *new_name,
                          const char *target, mode_t mode, unsigned flags);
/* setattr of committed inode ino (the to_set fields of attr, with the
 * mtime resolved); replies with its attributes. */
void fs_queue_setattr(fs_state *fs, fuse_req_t req, uint64_t ino, const struct stat *attr,
                      int to_set);

#endif
