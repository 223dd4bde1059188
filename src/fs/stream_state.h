/* What the stream job of a write handle (stream.h) knows of the file
 * while it is written, with a lock of its own: the request threads note
 * writes, truncations and closes; the stream job waits for the bytes it
 * needs, or for the close.
 *
 * The job stops waiting when the file is closed (a flush, fsync or
 * release came: the file is complete as it is), when bytes it may have
 * read are written again, or when it is asked to give way (other jobs
 * wait for the committer, or the committer stops). */
#ifndef TRAJFS_FS_STREAM_STATE_H
#define TRAJFS_FS_STREAM_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool streaming;    /* the stream job may still encode the file */
    bool broken;       /* bytes it may have read were written again */
    bool closed;       /* a flush, fsync or release came */
    bool give_way;     /* others wait for the committer */
    uint64_t in_order; /* the file's first bytes, written in order */
} fs_stream_state;

/* streaming: whether a stream job will encode the file (its spool starts
 * empty). */
void fs_stream_state_init(fs_stream_state *s, bool streaming);
void fs_stream_state_destroy(fs_stream_state *s);

/* From the request threads: len bytes written at off; the file
 * truncated to size; a flush, fsync or release of the handle. */
void fs_stream_state_wrote(fs_stream_state *s, uint64_t off, size_t len);
void fs_stream_state_truncated(fs_stream_state *s, uint64_t size);
void fs_stream_state_close(fs_stream_state *s);
/* From the committer (fs_committer_on_waiting): stop waiting. */
void fs_stream_state_give_way(void *s);
/* The stream is over: later writes are not noted. */
void fs_stream_state_end(fs_stream_state *s);

/* For the stream job. Waits until the file's first end bytes were
 * written in order: true; false when it must give up instead. */
bool fs_stream_state_await_bytes(fs_stream_state *s, uint64_t end);
/* Waits for the file's close: true when it came with the file's first
 * size bytes, and no more, written in order; false when the stream must
 * give up. */
bool fs_stream_state_await_close(fs_stream_state *s, uint64_t size);
/* Whether the file is exactly its first size bytes, written in order
 * (asked once writes are held: the answer then stays). */
bool fs_stream_state_whole(fs_stream_state *s, uint64_t size);

#endif
