/* Instantiating a model on a chunk: the template's productions are
 * applied to the chunk's own words top-down, each re-deriving its
 * parameters and its children's targets from them (a constant's value,
 * a period, run boundaries, a map's constant, a scan's first word). Where
 * a production does not apply to these words (a "constant" that is not),
 * or where a literal of the same words is no larger, the node becomes a
 * literal instead: literal completion, decided by exact size. Every
 * literal then picks its physical coding for this chunk. */
#ifndef TRAJFS_CODEC_PROG_PROG_APPLY_H
#define TRAJFS_CODEC_PROG_PROG_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "codec/prog/prog_tree.h"

/* tmpl: a template of root width `width` (prog_serialize.h). */
int tf_prog_apply(const tf_prog *tmpl, const uint64_t *x, size_t n, unsigned width,
                  unsigned dtype, tf_prog_tree *out, tf_error *e);

#endif
