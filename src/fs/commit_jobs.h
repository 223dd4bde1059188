/* Committing written files: the committer's jobs (committer.h) for a
 * write handle (handles.h). Each commits the handle's spool at the path
 * the handle names; when that path holds a regular file, the new content
 * takes over that file's inode number, as an overwrite in place would,
 * so the kernel's names stay right; the kernel is told to drop the old
 * content's pages. */
#ifndef TRAJFS_FS_COMMIT_JOBS_H
#define TRAJFS_FS_COMMIT_JOBS_H

#include <stdint.h>

#include "fs/fuse_api.h"
#include "fs/state.h"

/* flush (each close(2)) or fsync of write handle fh of inode ino:
 * commits its changes, then replies (ENOMEM at once when out of
 * memory). */
void fs_queue_commit(fs_state *fs, fuse_req_t req, uint64_t ino, uint64_t fh);
/* The last close of write handle h, taken out of the table: commits
 * what was not (errors are logged), then frees the handle; no reply. */
void fs_queue_release(fs_state *fs, fs_handle *h);
/* Encodes the file of write handle fh (inode ino, serial serial) as it
 * is written (stream.h); the handle may be gone by the time it runs. */
void fs_queue_stream(fs_state *fs, uint64_t ino, uint64_t fh, uint64_t serial);

#endif
