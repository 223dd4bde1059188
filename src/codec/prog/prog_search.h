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
#ifndef TRAJFS_CODEC_PROG_PROG_SEARCH_H
#define TRAJFS_CODEC_PROG_PROG_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "codec/prog/prog_prior.h"
#include "codec/prog/prog_tree.h"
#include "common/error.h"

/* Target words the open states of one search may hold by default. The
 * paper allows 512 MiB; a writer runs one search per thread, inside a
 * mount too, so the bound is what a search may add to its memory. At
 * 32 MiB (bench/prog_bench, prior learned, budget 4) programs are as
 * small: corpus step 25 bf16 14110524 B (512 MiB: 14109071), OCR rec
 * f32 8980784 B (8987855), and `trajpack create -T 2` of step 25 peaks
 * at 151 MB of RSS instead of 557 MB with one thread. */
#define TF_PROG_SEARCH_MEMORY ((size_t)32 << 20)

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
