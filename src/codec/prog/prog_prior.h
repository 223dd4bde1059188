/* The production prior (paper §2.3): q(r | kappa), learned by counting the
 * productions of the smallest programs found for a small sample of a
 * checkpoint's tensors, with additive smoothing, and backing off from
 * detailed contexts to coarser ones when a context was not seen. It only
 * orders the search (a production costs -log2 q bits); it is never
 * stored, and every admissible production keeps a nonzero probability.
 *
 * The context kappa of a hole: its width, the production of its parent,
 * its position among the parent's children, its depth, the dtype, and
 * classes of its target words: size, zero fraction, distinct-value ratio,
 * repetition ratio and entropy of adjacent differences. */
#ifndef TRAJFS_CODEC_PROG_PROG_PRIOR_H
#define TRAJFS_CODEC_PROG_PROG_PRIOR_H

#include <stdbool.h>
#include <stdint.h>

#include "codec/prog/prog_tree.h"
#include "common/error.h"

typedef struct tf_prog_prior tf_prog_prior;

/* The context of a hole whose target is `target` (features cached in
 * the stream). */
void tf_prog_kappa(uint8_t *kappa, tf_prog_stream *target, unsigned parent_rule, unsigned pos,
                   unsigned depth, unsigned dtype);

tf_prog_prior *tf_prog_prior_new(void);
void tf_prog_prior_free(tf_prog_prior *p);
/* Counts one use of rule under kappa. -1 when out of memory. */
int tf_prog_prior_observe(tf_prog_prior *p, unsigned rule, const uint8_t *kappa);
/* -log2 q(rule | kappa) among the rules flagged admissible; uniform when
 * p is NULL. */
double tf_prog_prior_cost(const tf_prog_prior *p, unsigned rule, const uint8_t *kappa,
                          const bool *admissible);
/* Productions counted so far. */
uint64_t tf_prog_prior_total(const tf_prog_prior *p);

#endif
