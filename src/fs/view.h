/* What request handlers, the committer and the follow thread do with
 * the mounted view of the archive (state.h): read a file version under
 * the view lock, apply a commit to the view, and tell the kernel that a
 * file changed. */
#ifndef TRAJFS_FS_VIEW_H
#define TRAJFS_FS_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "fs/state.h"

/* tf_reader_pread of a file version (a catalog entry, or a handle's
 * copy of one) under the view lock. In a following mount, a read that
 * fails on stored bytes is read again once the commits that came since
 * it began are applied (a payload it met may have been retired). */
ssize_t fs_read_entry(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                      uint8_t *out, tf_error *e);

/* tf_reader_pread_spans of a file version under the view lock: the
 * spans stay valid after it, while held (tf_reader_release_spans). */
ssize_t fs_view_entry(fs_state *fs, const tf_entry *ent, uint64_t off, size_t len,
                      tf_read_spans *v, tf_error *e);

/* Writes the first len bytes of a file version into the spool file fd,
 * from offset 0: opening a file for writing without O_TRUNC starts from
 * its content. Returns 0 or an errno value (a read error is logged). */
int fs_fill_spool(fs_state *fs, int fd, const tf_entry *ent, uint64_t len, tf_error *e);

/* "A commit was applied", the one way both the writer of a read-write
 * mount and the follow thread say it (tf_archive_hooks): before the
 * catalog changes, files the commit removes or replaces are kept for the
 * opens that race with it (fs_handles_retire) and the view lock is taken
 * exclusively; after, the tree is rebuilt and the lock released. A
 * following mount then tells the kernel which names and inodes changed:
 * a read-write mount's own changes reach it through the requests that
 * made them (and commit_jobs.c). fs->applied holds them. */
void fs_view_hooks_init(fs_state *fs);
void fs_view_hooks_free(fs_state *fs);

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
