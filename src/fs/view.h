/* What request handlers, the committer and the follow thread do with
 * the mounted view of the archive (fs.h): read a file version under the
 * view lock, rebuild the tree after a commit, and tell the kernel that a
 * file changed. */
#ifndef TRAJFS_FS_VIEW_H
#define TRAJFS_FS_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "fs/fs.h"

/* tf_reader_pread of a file version (a catalog entry, or a handle's
 * copy of one) under the view lock. */
ssize_t fs_read_entry(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                      uint8_t *out, tf_error *e);

/* tf_reader_pread_spans of a file version under the view lock: the
 * spans stay valid after it, while held (tf_reader_release_spans). */
ssize_t fs_view_entry(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                      tf_read_spans *v, tf_error *e);

/* Rebuilds the tree once a commit was applied to the catalog it points
 * into (with the view lock held exclusively). */
void fs_view_rebuild(fs_state *fs);

/* Tells the kernel to forget the attributes and cached pages of ino
 * (its content changed in a commit). Only from the committer or follow
 * thread, with no lock held: the kernel may need requests served to do
 * it. */
void fs_invalidate_inode(fs_state *fs, uint64_t ino);
/* The same for the name `name` in directory parent (a file added,
 * replaced or removed there), which the kernel may know as absent or as
 * another inode. */
void fs_invalidate_entry(fs_state *fs, uint64_t parent, const char *name);

#endif
