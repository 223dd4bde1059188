/* Rebasing: when files are removed, the chunks of the files that stay
 * may still be deltas against chunks only the removed files had (a
 * checkpoint between two kept ones), which then stay stored for them
 * alone. A rebase re-encodes each such chunk against the nearest chunk
 * down its reference chain that a live file has (where none has, the
 * chunks that lost one keyframe share a new one), as the writer encodes
 * an earlier checkpoint against a later one (a ULP delta, or a keyframe
 * where that is no larger, so that the result is what the kept files
 * added afresh would store), and
 * redirects its slot to the new encoding (trajfs(5), version 3
 * segments): files keep their blob slots, so open files and following
 * mounts read on, and the chains in between are needed by no one, their
 * space given back once the commit is durable. Chains only get shorter,
 * so the writer's chain bound holds. */
#ifndef TRAJFS_STORE_REBASE_H
#define TRAJFS_STORE_REBASE_H

#include <stdint.h>

#include "common/error.h"
#include "store/writer.h"

typedef struct {
    uint64_t chunks;       /* chunks re-encoded */
    uint64_t bytes_before; /* their payloads before */
    uint64_t bytes_after;  /* and after, with the models stored for them */
} tf_rebase_stats;

/* Re-encodes, in one commit, every chunk of a live file whose reference
 * is no live file's chunk; nothing to do: no commit. st may be NULL. */
int tf_writer_rebase(tf_writer *w, tf_rebase_stats *st, tf_error *e);

#endif
