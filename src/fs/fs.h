/* Opening and closing a mounted archive (state.h). */
#ifndef TRAJFS_FS_FS_H
#define TRAJFS_FS_FS_H

#include "common/error.h"
#include "fs/options.h"
#include "fs/state.h"

/* Opens the archive of the options: read-only, or with -o rw as its
 * writer (creating it when it does not exist). */
int fs_state_open(fs_state *fs, const fs_options *o, tf_error *e);
/* The session is up (and the daemon forked, if it does: threads started
 * before would stay in the parent): starts the committer or follow thread
 * and the prefetch threads; caches may be invalidated from now on. */
int fs_state_serving(fs_state *fs, struct fuse_session *se, tf_error *e);
/* The session loop ended: runs the changes still queued (the kernel is
 * no longer told about them); a remote archive's fetches under way end
 * (tf_archive_cancel_fetches). */
void fs_state_quiesce(fs_state *fs);
void fs_state_close(fs_state *fs);

#endif
