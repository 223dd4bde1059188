/* Encoding a file while it is written. A write handle whose spool starts
 * empty (a new file, or one opened with O_TRUNC) gets a stream job
 * (commit_jobs.h): the committer encodes the file's bytes from the spool
 * as they come, in order, so that its close waits for the tail only, not
 * for the encoding of all of it (cp waits for each close before it
 * writes the next file).
 *
 * The job gives up, appending nothing, and leaves the file to the commit
 * at its close, when the file is not written in order from its start,
 * does not end where its header says (only a format whose header gives
 * the file's size can be streamed: store/writer.h), or when another job
 * is queued while it waits for bytes: no change of the tree waits for a
 * file that is still being written (stream_state.h says what it waits
 * for). The commit itself is the close's: the file is committed as it
 * was when its flush (or fsync, or release) came, with the spool's
 * writes held until the commit is durable. */
#ifndef TRAJFS_FS_STREAM_H
#define TRAJFS_FS_STREAM_H

#include "common/error.h"
#include "fs/handles.h"
#include "fs/state.h"
#include "store/writer.h"

/* The stream job's work: encodes h's file as it is written and commits
 * it at path with attrs (mode and time as they are at its close); then
 * the handle is clean. 0, or -1 when it gave up or failed (the archive
 * as it was, the handle untouched). */
int fs_stream_commit(fs_state *fs, fs_handle *h, const char *path, const tf_entry_attrs *attrs,
                     tf_error *e);

#endif
