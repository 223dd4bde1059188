/* A program under construction together with the exact words each node
 * must produce (its target, paper §2.3): the search's states and the
 * instantiation of a model on a chunk are both such trees. From a tree
 * come its exact serialized size, its instance bytes (literal bodies
 * coded from their targets) and its template. */
#ifndef TRAJFS_CODEC_PROG_PROG_TREE_H
#define TRAJFS_CODEC_PROG_PROG_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/prog/prog_ast.h"
#include "codec/prog/prog_leaf.h"
#include "common/buf.h"
#include "common/error.h"

/* Words a node must produce. Shared (reference counted) by the search
 * states that copy the node; it caches what is computed from it. */
typedef struct {
    uint64_t *v;
    size_t n;
    unsigned width;
    unsigned refs;
    bool planned; /* plan is the best literal coding of v (with the context
                     sources of the node it was made for) */
    tf_prog_lit_plan plan;
    bool featured; /* features below are computed */
    uint8_t features[4];
    bool lag_looked; /* the lagged structure below is found (prog_derive.c) */
    bool lag_sparse; /* the lag's updates are much sparser than lag 1's */
    uint8_t lag_values; /* distinct words of the sample, when few */
    size_t lag;      /* 0: none */
    uint64_t lag_clear; /* the commonest of the first lag words */
} tf_prog_stream;

/* A new stream of n words (uninitialized), one reference; NULL when out
 * of memory. *bytes (when not NULL) grows by what it holds. */
tf_prog_stream *tf_prog_stream_new(size_t n, unsigned width, size_t *bytes);
void tf_prog_stream_ref(tf_prog_stream *s);
/* Drops a reference; *bytes shrinks when the stream is freed. */
void tf_prog_stream_unref(tf_prog_stream *s, size_t *bytes);

/* Bytes of a production's context kappa (prog_prior.h). */
#define TF_PROG_KAPPA_LEN 10

typedef struct {
    tf_prog prog;
    tf_prog_stream *target[TF_PROG_MAX_NODES]; /* NULL for a constant run of a concat */
    tf_prog_lit_plan plan[TF_PROG_MAX_NODES];  /* literals */
    /* The production that built each node (prog_derive.h; TF_PROG_R_NONE
     * when its parent's production did), and its context kappa when it
     * was a hole. */
    uint8_t rule[TF_PROG_MAX_NODES];
    uint8_t kappa[TF_PROG_MAX_NODES][TF_PROG_KAPPA_LEN];
} tf_prog_tree;

/* A copy sharing the targets (each gains a reference). */
void tf_prog_tree_copy(tf_prog_tree *dst, const tf_prog_tree *src);
void tf_prog_tree_release(tf_prog_tree *t, size_t *bytes);

/* Closes node i as a literal coded by its best plan (computed once per
 * target, with the earlier siblings of a merge as context sources). */
int tf_prog_tree_close_lit(tf_prog_tree *t, unsigned i, tf_error *e);

/* Exact bytes node i would take as a literal (its best plan), leaving
 * the node as it is. */
int tf_prog_tree_lit_size(tf_prog_tree *t, unsigned i, size_t *size, tf_error *e);

/* Exact bytes of the instance, each hole counted as hole_bytes. */
size_t tf_prog_tree_size(const tf_prog_tree *t, size_t hole_bytes);
/* Bytes of the subtree at node i (no holes). */
size_t tf_prog_tree_subtree_size(const tf_prog_tree *t, unsigned i);

/* Drops the nodes from index `keep` on (a subtree built last). */
void tf_prog_tree_truncate(tf_prog_tree *t, unsigned keep, size_t *bytes);

/* Codes every literal and appends the instance (no holes left). */
int tf_prog_tree_write(tf_prog_tree *t, tf_buf *out, tf_error *e);
/* Appends the template: the productions, without data-derived
 * parameters (a concat keeps its first non-constant part as the template
 * of all of them). */
int tf_prog_tree_write_template(const tf_prog_tree *t, tf_buf *out, tf_error *e);

#endif
