/* The reference of a tensor being added: the same tensor (its identity:
 * its name with wrapper prefixes such as torch.compile's "_orig_mod." and
 * DistributedDataParallel's "module." removed, its dtype and its byte
 * size) in an earlier checkpoint of the same run, in whichever file of
 * that checkpoint it lies (store/ckpt_path.h says what a run and a
 * checkpoint are). In order of preference:
 *   1. the nearest of the run's earlier checkpoints holding it, among the
 *      8 before the file's step; at one step, the file of the same role
 *      first, then the latest added;
 *   2. the nearest of the run's 8 later checkpoints holding it
 *      (checkpoints added out of order);
 *   3. the latest added among the archive's 32 files added last (a run
 *      forked from another).
 * The index is kept per writer and brought up to date with the catalog
 * before each file: a pass over the entries' headers, whose paths give
 * each file's run and step. A file's nearest checkpoints are then a
 * binary search among its run's, and only the bodies of the files a
 * search weighs are read (once a writer), so an archive of thousands of
 * checkpoints costs a file the headers and its neighbours' bodies, not
 * every file's. */
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
    bool newest;         /* preference 1, and no later checkpoint of the
                            run holds the tensor: the file being added is
                            the newest for it, and `ent` the newest so far,
                            whose keyframes it re-encodes as deltas
                            (store/pipeline.h) */
} tf_tensor_ref;

tf_ref_index *tf_ref_index_new(void);
void tf_ref_index_free(tf_ref_index *ix);

/* Brings the index up to date with the archive's live entries; the
 * entries it returns are valid until the catalog changes. */
int tf_ref_index_sync(tf_ref_index *ix, const tf_archive *ar, tf_error *e);

/* The reference of a tensor of the file at `at` (parsed from its path),
 * in *out (its `ent` NULL when there is none); -1 when a body weighed
 * cannot be read. */
int tf_ref_find(tf_ref_index *ix, const tf_ckpt_path *at, const char *name, uint8_t dtype,
                uint64_t nbytes, tf_tensor_ref *out, tf_error *e);

/* Number of tensor files of the run of `at` in its other checkpoints (0
 * for a path without a step: its run has no checkpoints to count). */
uint64_t tf_ref_run_files(tf_ref_index *ix, const tf_ckpt_path *at);
/* Whether the run of `at` has a tensor file at a later step: then the
 * file at `at` is added out of order, not the newest of its series. */
bool tf_ref_run_has_later(tf_ref_index *ix, const tf_ckpt_path *at);

#endif
