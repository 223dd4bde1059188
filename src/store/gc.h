/* Garbage collection: rewriting an archive without the blobs no live
 * file needs any more (left behind by removed and replaced files). */
#ifndef TRAJFS_STORE_GC_H
#define TRAJFS_STORE_GC_H

#include <stdint.h>

#include "common/error.h"

typedef struct {
    uint64_t blobs_before, blobs_after;
    uint64_t bytes_before, bytes_after; /* archive file sizes */
    uint64_t commits_before;
} tf_gc_stats;

/* Rewrites the archive at path as one commit holding every live entry
 * (paths, inode numbers, modes, times unchanged) and the blobs they use,
 * directly or as delta references and models: payloads are copied as
 * they are, codecs and all, and the blobs renumbered in their old order.
 * Inode numbers are never reused afterwards either. The new archive is
 * written beside the old one, made durable and checked, then renamed over
 * it, all under the writer's lock: a crash at any point leaves either
 * archive whole, and readers that have the old one open keep reading it.
 * progress, when not NULL, is called with the payload bytes copied. */
int tf_gc(const char *path, void (*progress)(void *arg, uint64_t bytes), void *progress_arg,
          tf_gc_stats *stats, tf_error *e);

#endif
