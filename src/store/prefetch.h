/* Reconstructing a file's chunks ahead of its reader, on every core.
 *
 * A cold read of one checkpoint decodes, for every chunk, the chunk and
 * its reference chain, one step after the other; a reader asking for a
 * few MiB at a time keeps a core or two busy and waits for one dependent
 * read of the archive at each step. The prefetcher's threads reconstruct
 * the chunks a reader is about to ask for into the reader's cache, where
 * the reads then find them (or wait for the decode under way: the cache
 * decodes a blob once however many threads want it):
 *   - a read that starts in a tensor means the rest of the tensor is
 *     coming (a loader reads whole tensors), so its chunks are queued;
 *   - a read that continues where the reads of the same open file were
 *     (not the first read of a tensor) means the file is read in order,
 *     so the chunks of the next `window` bytes are queued too.
 * A read that starts in a header queues nothing (the kernel reads ahead
 * of a header into the tensors after it), so opening a checkpoint to
 * pick one tensor costs no decode of the others. Work is done in the
 * order it was queued; when the queue is full, the oldest is dropped. */
#ifndef TRAJFS_STORE_PREFETCH_H
#define TRAJFS_STORE_PREFETCH_H

#include <stdint.h>

#include "format/catalog.h"
#include "store/archive.h"
#include "store/reader.h"

typedef struct tf_prefetch tf_prefetch;

/* Run around each reconstruction on a prefetch thread, when not NULL: a
 * mount holds its view of the archive (fs/fs.h) so that no commit
 * changes the blob table meanwhile. */
typedef struct {
    void (*hold)(void *arg);
    void (*release)(void *arg);
    void *arg;
} tf_prefetch_guard;

/* A prefetcher filling the cache of r (a reader of ar) with `threads`
 * threads, queueing up to window bytes ahead of a reader in order. NULL
 * when out of memory or threads cannot start. */
tf_prefetch *tf_prefetch_new(const tf_archive *ar, tf_reader_ctx *r, unsigned threads,
                             uint64_t window, const tf_prefetch_guard *guard);
/* Stops the threads (after the reconstructions under way; queued work is
 * dropped). Before the reader is freed. NULL: nothing. */
void tf_prefetch_free(tf_prefetch *p);

/* What has been queued for one open file: bytes [lo, hi). All zero for a
 * file just opened. */
typedef struct {
    uint64_t lo, hi;
} tf_prefetch_cursor;

/* Before a read of [off, off+len) of ent (a regular file) is served:
 * queues what that read says comes next, and returns at once. ent and its
 * blobs need to stay valid only during the call. */
void tf_prefetch_read(tf_prefetch *p, const tf_entry *ent, tf_prefetch_cursor *cur, uint64_t off,
                      uint64_t len);

/* Waits until everything queued is reconstructed (for tests). */
void tf_prefetch_wait(tf_prefetch *p);

#endif
