/* Memory for the cache's large blocks, in transparent huge pages.
 *
 * A block mapped on its own gets a huge page only for each whole, aligned
 * 2 MiB it spans: none for most tensors of a small model (a chunk of a
 * 768 x 768 bf16 matrix is 1.1 MiB), and then every 4 KiB page costs a
 * fault at its first write. In the 2-vCPU virtual machine of the
 * benchmarks those first writes took half the daemon's CPU in a cold read
 * of the newest checkpoint, MADV_POPULATE_WRITE or not: the host backs
 * each page only when the guest first writes it.
 *
 * So blocks of up to a huge page are carved, one after the other, out of
 * regions of one huge page each, aligned and advised for huge pages; a
 * larger block is a region of its own, aligned likewise. A region is
 * free again when its last block is given back: it is then kept for the
 * next blocks (a few are), its pages already faulted in, or unmapped.
 *
 * What the pool counts is what it maps for blocks in use: whole regions,
 * even where a block in use keeps its freed neighbours' bytes. The cache
 * bounds that, so the process's memory follows the cache's bound. The
 * pool has its own lock; callers may hold theirs when giving back, and
 * reading its count takes no lock. */
#ifndef TRAJFS_STORE_BLOCK_POOL_H
#define TRAJFS_STORE_BLOCK_POOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct tf_block_pool tf_block_pool;
typedef struct tf_block_region tf_block_region;

tf_block_pool *tf_block_pool_new(void);
/* Unmaps every region: no block may be used after. */
void tf_block_pool_free(tf_block_pool *p);

/* A block of len (> 0) bytes, page aligned, its pages faulted in where the
 * kernel can do it in one call; *region is what it is given back to.
 * NULL when out of memory. */
uint8_t *tf_block_pool_take(tf_block_pool *p, size_t len, tf_block_region **region);
/* Gives back a block taken from region. */
void tf_block_pool_give(tf_block_pool *p, tf_block_region *region);

/* Bytes mapped for blocks not given back (free regions kept for reuse
 * are not counted). */
size_t tf_block_pool_bytes(tf_block_pool *p);

#endif
