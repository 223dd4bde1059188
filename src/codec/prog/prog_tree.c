#include "codec/prog/prog_tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_serialize.h"

tf_prog_stream *tf_prog_stream_new(size_t n, unsigned width, size_t *bytes)
{
    tf_prog_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->v = malloc((n ? n : 1) * sizeof *s->v);
    if (!s->v) {
        free(s);
        return NULL;
    }
    s->n = n;
    s->width = width;
    s->refs = 1;
    if (bytes)
        *bytes += n * sizeof *s->v;
    return s;
}

void tf_prog_stream_ref(tf_prog_stream *s)
{
    if (s)
        s->refs++;
}

void tf_prog_stream_unref(tf_prog_stream *s, size_t *bytes)
{
    if (!s || --s->refs)
        return;
    if (bytes)
        *bytes -= s->n * sizeof *s->v;
    free(s->v);
    free(s);
}

void tf_prog_tree_copy(tf_prog_tree *dst, const tf_prog_tree *src)
{
    memcpy(dst, src, sizeof *dst);
    for (unsigned i = 0; i < src->prog.n_nodes; i++)
        tf_prog_stream_ref(dst->target[i]);
}

void tf_prog_tree_release(tf_prog_tree *t, size_t *bytes)
{
    for (unsigned i = 0; i < t->prog.n_nodes; i++) {
        tf_prog_stream_unref(t->target[i], bytes);
        t->target[i] = NULL;
    }
    t->prog.n_nodes = 0;
}

/* Context sources of node i: the targets of its earlier siblings in a
 * merge. Returns how many. */
static unsigned sources_of(const tf_prog_tree *t, unsigned i, tf_prog_ctx_source *src)
{
    const tf_prog_node *k = &t->prog.node[i];
    if (i == 0 || t->prog.node[k->parent].op != TF_PROG_MERGE)
        return 0;
    unsigned first = t->prog.node[k->parent].kid0;
    for (unsigned j = 0; j < k->pos; j++) {
        const tf_prog_stream *s = t->target[first + j];
        src[j] = (tf_prog_ctx_source){ .v = s ? s->v : NULL, .width = s ? s->width : 0 };
    }
    return k->pos;
}

int tf_prog_tree_close_lit(tf_prog_tree *t, unsigned i, tf_error *e)
{
    tf_prog_stream *s = t->target[i];
    if (!s->planned) {
        tf_prog_ctx_source src[TF_PROG_MAX_ARITY];
        unsigned n_src = sources_of(t, i, src);
        if (tf_prog_lit_plan_best(s->v, s->n, s->width, src, n_src, &s->plan, e) < 0)
            return -1;
        s->planned = true;
    }
    tf_prog_node *k = &t->prog.node[i];
    k->op = TF_PROG_LIT;
    k->lit = (tf_prog_lit_hint){ .coding = s->plan.coding, .ctx_sibling = s->plan.ctx_sibling,
                                 .ctx_self = s->plan.ctx_self };
    k->body_len = s->plan.size;
    t->plan[i] = s->plan;
    return 0;
}

static size_t node_size(const tf_prog_tree *t, unsigned i, tf_buf *scratch)
{
    const tf_prog_node *k = &t->prog.node[i];
    scratch->len = 0;
    if (tf_prog_write_node_header(&t->prog, i, scratch) < 0)
        return SIZE_MAX / 4; /* out of memory: too big to win */
    return scratch->len + (k->op == TF_PROG_LIT ? k->body_len : 0);
}

int tf_prog_tree_lit_size(tf_prog_tree *t, unsigned i, size_t *size, tf_error *e)
{
    tf_prog_node saved = t->prog.node[i];
    tf_prog_lit_plan saved_plan = t->plan[i];
    if (tf_prog_tree_close_lit(t, i, e) < 0)
        return -1;
    tf_buf scratch = { 0 };
    *size = node_size(t, i, &scratch);
    tf_buf_free(&scratch);
    t->prog.node[i] = saved;
    t->plan[i] = saved_plan;
    return 0;
}

size_t tf_prog_tree_size(const tf_prog_tree *t, size_t hole_bytes)
{
    tf_buf scratch = { 0 };
    size_t size = 0;
    for (unsigned i = 0; i < t->prog.n_nodes; i++)
        size += t->prog.node[i].op == TF_PROG_HOLE ? hole_bytes : node_size(t, i, &scratch);
    tf_buf_free(&scratch);
    return size;
}

static size_t subtree_size(const tf_prog_tree *t, unsigned i, tf_buf *scratch)
{
    const tf_prog_node *k = &t->prog.node[i];
    size_t size = node_size(t, i, scratch);
    for (unsigned c = 0; c < k->n_kids; c++)
        size += subtree_size(t, k->kid0 + c, scratch);
    return size;
}

size_t tf_prog_tree_subtree_size(const tf_prog_tree *t, unsigned i)
{
    tf_buf scratch = { 0 };
    size_t size = subtree_size(t, i, &scratch);
    tf_buf_free(&scratch);
    return size;
}

void tf_prog_tree_truncate(tf_prog_tree *t, unsigned keep, size_t *bytes)
{
    for (unsigned i = keep; i < t->prog.n_nodes; i++) {
        tf_prog_stream_unref(t->target[i], bytes);
        t->target[i] = NULL;
    }
    if (keep < t->prog.n_nodes)
        t->prog.n_nodes = keep;
}

int tf_prog_tree_write(tf_prog_tree *t, tf_buf *out, tf_error *e)
{
    tf_buf bodies = { 0 };
    size_t start[TF_PROG_MAX_NODES];
    int rc = 0;
    for (unsigned i = 0; i < t->prog.n_nodes && rc == 0; i++) {
        tf_prog_node *k = &t->prog.node[i];
        if (k->op == TF_PROG_HOLE) {
            rc = tf_fail(e, EINVAL, "prog: writing a program with a hole");
        } else if (k->op == TF_PROG_LIT) {
            tf_prog_ctx_source src[TF_PROG_MAX_ARITY];
            const tf_prog_stream *s = t->target[i];
            start[i] = bodies.len;
            sources_of(t, i, src);
            rc = tf_prog_lit_write(s->v, s->n, s->width, src, &t->plan[i], &bodies, e);
            k->body_len = bodies.len - start[i];
        }
    }
    for (unsigned i = 0; i < t->prog.n_nodes && rc == 0; i++)
        if (t->prog.node[i].op == TF_PROG_LIT)
            t->prog.node[i].body = bodies.data + start[i];
    if (rc == 0)
        rc = tf_prog_write(&t->prog, out, e);
    for (unsigned i = 0; i < t->prog.n_nodes; i++)
        t->prog.node[i].body = NULL;
    tf_buf_free(&bodies);
    return rc;
}

/* Copies node i of the tree into the template program as node j (already
 * linked), its children after it. */
static int copy_template(const tf_prog_tree *t, unsigned i, tf_prog *tp, unsigned j)
{
    const tf_prog_node *k = &t->prog.node[i];
    tf_prog_node *d = &tp->node[j];
    d->op = k->op;
    d->width = k->width;
    d->kind = k->kind;
    d->lit = k->lit;
    d->param = k->op == TF_PROG_MAP && k->kind == TF_PROG_MAP_ROTL ? k->param : 0;
    if (k->op == TF_PROG_CONCAT) {
        unsigned part = k->kid0;
        while (part < k->kid0 + k->n_kids && t->prog.node[part].op == TF_PROG_CONST)
            part++;
        int kid = tf_prog_add_kids(tp, j, 1);
        if (kid < 0)
            return -1;
        if (part == k->kid0 + k->n_kids) { /* only constant runs: literals elsewhere */
            tp->node[kid].op = TF_PROG_LIT;
            tp->node[kid].width = k->width;
            return 0;
        }
        return copy_template(t, part, tp, (unsigned)kid);
    }
    if (k->n_kids == 0)
        return 0;
    int first = tf_prog_add_kids(tp, j, k->n_kids);
    if (first < 0)
        return -1;
    for (unsigned c = 0; c < k->n_kids; c++)
        if (copy_template(t, k->kid0 + c, tp, (unsigned)first + c) < 0)
            return -1;
    return 0;
}

int tf_prog_tree_write_template(const tf_prog_tree *t, tf_buf *out, tf_error *e)
{
    tf_prog *tp = calloc(1, sizeof *tp);
    if (!tp)
        return tf_fail(e, ENOMEM, "prog: out of memory for a model");
    tf_prog_add_kids(tp, 0, 1);
    int rc = copy_template(t, 0, tp, 0) < 0
                 ? tf_fail(e, EINVAL, "prog: template has too many nodes")
                 : tf_prog_template_write(tp, out, e);
    free(tp);
    return rc;
}
