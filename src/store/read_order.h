/* The order in which a command that reads many files (verify, extract)
 * reads them: references before the deltas against them.
 *
 * A chunk is reconstructed by decoding its chain from a self-contained
 * blob up; the result is cached, so a file read after the file holding
 * its references costs one decode step a chunk, and one read before it
 * costs the whole chain, again for every file on it. Archive order is
 * the right order for chains that point back in time and the worst for
 * the reverse references of a series' newest checkpoints (each older
 * checkpoint a delta against the next), where reading oldest first
 * decodes up to a whole chain bound per chunk and, from a remote
 * archive, jumps between the commits that hold the chain's steps. */
#ifndef TRAJFS_STORE_READ_ORDER_H
#define TRAJFS_STORE_READ_ORDER_H

#include <stddef.h>

#include "store/archive.h"

/* The indices of ar's regular files, sorted by the mean number of delta
 * steps between their bytes and a self-contained blob (weighted by the
 * bytes of each chunk), ties in archive order. A malloc'd array of
 * *n elements, or NULL when out of memory. */
size_t *tf_read_order(const tf_archive *ar, size_t *n);

#endif
