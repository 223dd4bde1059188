/* The reference of a tensor being added: the same tensor (its identity:
 * its name with wrapper prefixes such as torch.compile's "_orig_mod." and
 * DistributedDataParallel's "module." removed, its dtype and its byte
 * size) in an earlier checkpoint of the same run, in whichever file of
 * that checkpoint it lies (store/ckpt_path.h says what a run and a
 * checkpoint are). In order of preference:
 *   1. one of the run's earlier checkpoints holding it: the nearest, or
 *      one a power of two further back (tf_ref_skip); at one step, the
 *      file of the same role first, then the latest added;
 *   2. the run's nearest later checkpoint (checkpoints added out of order);
 *   3. the latest added anywhere else (a run forked from another).
 * The index is kept per writer and brought up to date with the catalog
 * before each file: a pass over the entries, hashing only the tensors of
 * entries it has not seen, so a file costs O(entries) plus its own
 * tensors, not a scan of every tensor. */
#ifndef TRAJFS_STORE_REFS_H
#define TRAJFS_STORE_REFS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "store/archive.h"
#include "store/ckpt_path.h"

typedef struct tf_ref_index tf_ref_index;

typedef struct {
    const tf_entry *ent; /* NULL: no reference */
    uint64_t tensor;
    bool other_run;      /* found in another run (preference 3) */
} tf_tensor_ref;

tf_ref_index *tf_ref_index_new(void);
void tf_ref_index_free(tf_ref_index *ix);

/* Brings the index up to date with the archive's live entries; the
 * entries it returns are valid until the catalog changes. */
int tf_ref_index_sync(tf_ref_index *ix, const tf_archive *ar, tf_error *e);

/* The reference of a tensor of the file at `at` (parsed from its path).
 * Among the run's earlier checkpoints it is the tf_ref_skip'th nearest,
 * so that chains stay within max_chain deltas (store/pipeline.c makes a
 * chunk whose reference is max_chain deep a keyframe). */
tf_tensor_ref tf_ref_find(const tf_ref_index *ix, const tf_ckpt_path *at, const char *name,
                          uint8_t dtype, uint64_t nbytes, unsigned max_chain);

/* Skip references. A tensor held by `earlier_ckpts` earlier checkpoints
 * of its run has position p = earlier_ckpts mod 2^max_chain in its
 * keyframe interval; it references the checkpoint 2^k positions back,
 * 2^k being the lowest set bit of p: position 1 references 0, 2 -> 0,
 * 3 -> 2, 4 -> 0, 5 -> 4, 6 -> 4, 7 -> 6, 8 -> 0 ... The chain of position
 * p has one delta per set bit of p, at most max_chain; position 0
 * references the nearest checkpoint, whose chain is max_chain long, so it
 * becomes a keyframe. Half the references reach one checkpoint back, a
 * quarter two, an eighth four...: a linear chain as long (every
 * reference one back) would need a keyframe every max_chain + 1
 * checkpoints instead of every 2^max_chain. Returns how many
 * checkpoints back the reference is (1 = the nearest). */
uint64_t tf_ref_skip(uint64_t earlier_ckpts, unsigned max_chain);

/* Number of tensor files of the run of `at` in its other checkpoints (0
 * for a path without a step: its run has no checkpoints to count). */
uint64_t tf_ref_run_files(const tf_ref_index *ix, const tf_ckpt_path *at);

#endif
