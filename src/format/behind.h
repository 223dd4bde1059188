/* A commit written behind: a thread of the container's writes one
 * commit's bytes and makes them durable while the writer goes on to its
 * next file. The bytes are a commit's blobs and then its catalog and
 * trailer, each run at its offset; they are written, synced, and only
 * then the trailer's run is written and synced, so that no trailer
 * reaches the disk before what it points to (format/container.h). One
 * commit at a time: the next submit, and every other write or sync of
 * the archive, waits for it first. Until it is written, reads of its
 * bytes are served from the job's buffers. */
#ifndef TRAJFS_FORMAT_BEHIND_H
#define TRAJFS_FORMAT_BEHIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "io/io.h"

typedef struct tf_behind tf_behind;

/* NULL when the thread cannot be started or memory lacks. */
tf_behind *tf_behind_new(tf_io *io);
/* Waits for the job in flight, then ends the thread. */
void tf_behind_free(tf_behind *b);

/* Hands the job its bytes (the buffers are taken, left empty): blobs at
 * blobs_off (may be empty), then tail at tail_off. The caller has waited
 * for the job before (tf_behind_wait). */
void tf_behind_submit(tf_behind *b, tf_buf *blobs, uint64_t blobs_off, tf_buf *tail,
                      uint64_t tail_off);
/* Waits for the job in flight, if any: 0 when there was none or it is
 * durable; -1 with its error when a write or sync failed. *waited tells
 * whether there was one. */
int tf_behind_wait(tf_behind *b, bool *waited, tf_error *e);
/* Copies [off, off + len) into buf when those bytes lie wholly within the
 * job's, not yet known written: true then. Safe from any thread while a
 * job is in flight and its submitter does not wait on it. */
bool tf_behind_read(tf_behind *b, uint64_t off, void *buf, size_t len);

#endif
