/* Bounded A* synthesis of one program (paper §2.3, Algorithm 1).
 *
 * A state is a partial program whose holes carry the exact words they must
 * produce. States are popped by g + h, where g sums the prior costs
 * (-log2 q) of the productions applied and h is, for every open hole, the
 * cheapest admissible production under the relaxed grammar (width, length
 * and canonical form only), so h never overestimates; ties go to the
 * smaller byte lower bound, then to the earlier state. The byte lower
 * bound counts the exact bytes of everything decided (operators,
 * parameters, literals coded by their best plan) plus a minimum for each
 * open hole; a state whose bound reaches the best complete program is
 * dropped. The leftmost hole of a popped state is expanded by every
 * production whose target-directed decomposition applies. A complete
 * state is ranked by its exact serialized size. The incumbent starts as
 * the literal of the whole target. After `budget` expansions, the first
 * open states popped (a few, where the paper keeps one) are kept and, when
 * the queue is spent, completed with literals (the rollout) and ranked
 * too. */
#ifndef TRAJFS_CODEC_PROG_SEARCH_H
#define TRAJFS_CODEC_PROG_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "codec/prog_prior.h"
#include "codec/prog_tree.h"
#include "common/error.h"

/* Target words the open states of one search may hold by default (the
 * paper's 512 MiB for open decompositions). */
#define TF_PROG_SEARCH_MEMORY ((size_t)512 << 20)

typedef struct {
    unsigned budget;             /* expansions */
    const tf_prog_prior *prior;  /* NULL: uniform production costs */
    unsigned dtype;              /* names the float layouts Merge may use */
    size_t max_memory;           /* bytes of target words open states may hold */
} tf_prog_search_opts;

typedef struct {
    unsigned expansions, states, pruned;
    bool rollout_won;
} tf_prog_search_stats;

/* Synthesizes a program for x[0..n) (width bits each). *best gets the
 * smallest exact program found (complete, with its targets) and *size its
 * exact size. */
int tf_prog_search(const uint64_t *x, size_t n, unsigned width, const tf_prog_search_opts *o,
                   tf_prog_tree *best, size_t *size, tf_prog_search_stats *stats,
                   tf_error *e);

#endif
