/* Encoding a file while it is written. A write handle whose spool starts
 * empty (a new file, or one opened with O_TRUNC) gets a stream job: the
 * committer encodes the file's bytes from the spool as they come, in
 * order, so that its close waits for the tail only, not for the encoding
 * of all of it (cp waits for each close before it writes the next file).
 *
 * The job gives up, appending nothing, and leaves the file to the commit
 * at its close, when the file is not written in order from its start,
 * does not end where its header says (only a format whose header gives
 * the file's size can be streamed: store/writer.h), or when another job
 * is queued while it waits for bytes: no change of the tree waits for a
 * file that is still being written. The commit itself is the close's:
 * the file is committed as it was when its flush (or fsync, or release)
 * came, with the spool's writes held until the commit is durable. */
#ifndef TRAJFS_FS_STREAM_H
#define TRAJFS_FS_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "fs/handles.h"
#include "store/writer.h"

struct fs_state;

/* Queues the stream job of the write handle fh (inode ino, serial
 * serial); the handle may be gone by the time it runs. */
void fs_stream_start(struct fs_state *fs, uint64_t fh, uint64_t ino, uint64_t serial);

/* A write of len bytes at off went to h's spool (h->io held), or the
 * spool was truncated to size. */
void fs_stream_note_write(struct fs_state *fs, fs_handle *h, uint64_t off, size_t len);
void fs_stream_note_truncate(struct fs_state *fs, fs_handle *h, uint64_t size);
/* h's stream is over (done, given up, or its file committed otherwise). */
void fs_stream_end(struct fs_state *fs, fs_handle *h);

/* The stream job's work: encodes h's file as it is written and commits
 * it at path with attrs (mode and time as they are at its close); then
 * the handle is clean. 0, or -1 when it gave up or failed (the archive
 * as it was, the handle untouched). */
int fs_stream_commit(struct fs_state *fs, fs_handle *h, uint64_t fh, const char *path,
                     const tf_entry_attrs *attrs, tf_error *e);

#endif
