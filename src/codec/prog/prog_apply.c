#include "codec/prog/prog_apply.h"

#include <errno.h>
#include <string.h>

#include "codec/prog/prog_derive.h"

typedef struct {
    const tf_prog *tmpl;
    tf_prog_tree *t;
    unsigned dtype;
    tf_error *e;
} applier;

/* What the template fixes for a production: merge widths, rotation. */
static void template_shape(const tf_prog *tmpl, unsigned ti, tf_prog_expansion *shape)
{
    const tf_prog_node *k = &tmpl->node[ti];
    *shape = (tf_prog_expansion){ .param = k->param };
    if (k->op == TF_PROG_MERGE)
        for (unsigned c = 0; c < k->n_kids; c++)
            shape->kid[shape->n_kids++].width = tmpl->node[k->kid0 + c].width;
}

static int instantiate(applier *a, unsigned ti, unsigned i);

/* Node i built by the expansion; children instantiated from the template
 * children (all parts of a concat from its one child). Returns 0, or 1
 * when the children do not fit in a program. */
static int build(applier *a, unsigned ti, unsigned i, tf_prog_expansion *x)
{
    const tf_prog_node *tk = &a->tmpl->node[ti];
    tf_prog_tree *t = a->t;
    if (tf_prog_expansion_build(x, t, i) < 0)
        return 1;
    const unsigned first = t->prog.node[i].kid0;
    for (unsigned c = 0; c < x->n_kids; c++) {
        unsigned j = first + c;
        if (t->prog.node[j].op == TF_PROG_CONST)
            continue;
        unsigned tkid = tk->kid0 + (tk->op == TF_PROG_CONCAT ? 0 : c);
        if (instantiate(a, tkid, j) < 0)
            return -1;
    }
    return 0;
}

static int instantiate(applier *a, unsigned ti, unsigned i)
{
    tf_prog_tree *t = a->t;
    unsigned rule = tf_prog_rule_of_node(a->tmpl, ti);
    if (rule == TF_PROG_R_LIT)
        return tf_prog_tree_close_lit(t, i, a->e);
    tf_prog_expansion shape, x;
    template_shape(a->tmpl, ti, &shape);
    int rc = tf_prog_derive(rule, t->target[i], a->dtype, false, &shape, &x, NULL, a->e);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return tf_prog_tree_close_lit(t, i, a->e);
    unsigned kids_from = t->prog.n_nodes;
    rc = build(a, ti, i, &x);
    tf_prog_expansion_release(&x, NULL);
    if (rc < 0)
        return -1;
    size_t as_built = rc == 0 ? tf_prog_tree_subtree_size(t, i) : SIZE_MAX, as_lit;
    if (tf_prog_tree_lit_size(t, i, &as_lit, a->e) < 0)
        return -1;
    if (as_lit > as_built)
        return 0;
    tf_prog_tree_truncate(t, kids_from, NULL);
    t->prog.node[i].n_kids = 0;
    return tf_prog_tree_close_lit(t, i, a->e);
}

int tf_prog_apply(const tf_prog *tmpl, const uint64_t *x, size_t n, unsigned width,
                  unsigned dtype, tf_prog_tree *out, tf_error *e)
{
    memset(out, 0, sizeof *out);
    tf_prog_add_kids(&out->prog, 0, 1);
    tf_prog_stream *root = tf_prog_stream_new(n, width, NULL);
    if (!root)
        return tf_fail(e, ENOMEM, "prog: out of memory for %zu words", n);
    memcpy(root->v, x, n * sizeof *x);
    out->prog.node[0].width = (uint8_t)width;
    out->prog.node[0].n = n;
    out->target[0] = root;
    applier a = { .tmpl = tmpl, .t = out, .dtype = dtype, .e = e };
    if (instantiate(&a, 0, 0) < 0) {
        tf_prog_tree_release(out, NULL);
        return -1;
    }
    return 0;
}
