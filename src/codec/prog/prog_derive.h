/* Target-directed expansion (paper §2.3): a production applied to a hole
 * whose target words x are known decomposes x into the exact words each
 * child must produce, D(x) = (x1..xk) with G(x1..xk) = x, so that a
 * program assembled from exact children is exact by construction. Each
 * production considers a few parameters derived from x, and the search
 * proposes it only when its guard holds: Repeat only on exact copies,
 * Const only on constant words, Concat at the boundaries of long constant
 * runs, Map and Scan only when they make the words smaller or more
 * alike (a lagged Scan: at the lag that makes them sparsest, on words of
 * few values), Merge along float fields (the top mantissa bits apart
 * where the exponent tells much of them), byte or bit planes or the
 * measured per-bit profile. */
#ifndef TRAJFS_CODEC_PROG_PROG_DERIVE_H
#define TRAJFS_CODEC_PROG_PROG_DERIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/prog/prog_tree.h"

/* The productions of the grammar: what the prior counts and scores. */
typedef enum {
    TF_PROG_R_LIT,
    TF_PROG_R_CONST,
    TF_PROG_R_REPEAT,
    TF_PROG_R_CONCAT,
    TF_PROG_R_MAP_XOR,
    TF_PROG_R_MAP_ADD,
    TF_PROG_R_MAP_ZIGZAG,
    TF_PROG_R_MAP_GRAY,
    TF_PROG_R_MAP_BITREV,
    TF_PROG_R_MAP_ROTL,
    TF_PROG_R_SCAN_XOR,
    TF_PROG_R_SCAN_ADD,
    TF_PROG_R_SCAN_XOR_LAG, /* the scans in the order of their kinds */
    TF_PROG_R_SCAN_ADD_LAG,
    TF_PROG_R_MERGE_IEEE,       /* sign | exponent | mantissa */
    TF_PROG_R_MERGE_IEEE_BYTES, /* sign | exponent | mantissa bytes from the top */
    TF_PROG_R_MERGE_IEEE_ROT,   /* exponent | mantissa | sign: the layout after rotl 1 */
    TF_PROG_R_MERGE_IEEE_HIGH,  /* sign | exponent | the top mantissa bits | the rest */
    TF_PROG_R_MERGE_BYTES,
    TF_PROG_R_MERGE_BITS,
    TF_PROG_R_MERGE_HEAD,       /* the top byte | the rest */
    TF_PROG_R_MERGE_PROFILE,    /* runs of constant, skewed and uniform bits */
    TF_PROG_RULES,
    TF_PROG_R_NONE = 255        /* the parent of the root */
} tf_prog_rule;

/* The operator a rule builds. */
tf_prog_op tf_prog_rule_op(unsigned rule);

/* Relaxed admissibility (width, length and canonical form only, no
 * look at the words): whether rule may expand a hole of width[n] at this
 * depth under a parent built by parent_rule. */
bool tf_prog_rule_admissible(unsigned rule, unsigned width, uint64_t n, unsigned dtype,
                             unsigned parent_rule, unsigned depth);

typedef struct {
    unsigned width;
    uint64_t n;
    tf_prog_stream *target; /* NULL for a constant run (is_const) */
    bool is_const;
    uint64_t value;
} tf_prog_kid;

typedef struct {
    uint8_t op, kind;
    uint64_t param;
    unsigned n_kids;
    tf_prog_kid kid[TF_PROG_MAX_ARITY];
} tf_prog_expansion;

/* Decomposes the target x by `rule`. With guarded, only when the rule's
 * guard holds; without (instantiating a model), whenever it is exact.
 * shape, when not NULL, fixes what a model stores: the merge widths (its
 * kid[].width, n_kids) and the rotation (param). Returns 1 with the
 * expansion (its targets hold one reference each), 0 when the rule does
 * not apply, -1 when out of memory. *bytes counts the words allocated.
 * x caches what the guards find in its words. */
int tf_prog_derive(unsigned rule, tf_prog_stream *x, unsigned dtype, bool guarded,
                   const tf_prog_expansion *shape, tf_prog_expansion *out, size_t *bytes,
                   tf_error *e);

void tf_prog_expansion_release(tf_prog_expansion *x, size_t *bytes);

/* Builds expansion x at node i of t: its operator and parameters, and its
 * children (width, words and target, whose references it takes; constant
 * runs closed as CONST, the others left holes, their rule
 * TF_PROG_R_NONE). -1 when the children do not fit in a program, or a
 * repeat's period or a lagged scan's lag would take the words the
 * executor holds for them all past the root's length (prog_serialize.h). */
int tf_prog_expansion_build(tf_prog_expansion *x, tf_prog_tree *t, unsigned i);

/* The rule of a template node (merge layouts as TF_PROG_R_MERGE_PROFILE,
 * which takes its widths from the shape). */
unsigned tf_prog_rule_of_node(const tf_prog *p, unsigned i);

#endif
