#include "codec/prog_exec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog_leaf.h"
#include "codec/prog_ops.h"

/* Words per pull: small enough that a merge's children and its output
 * stay in L1/L2, large enough to amortize the calls. */
#define BLOCK 1024

typedef struct {
    const tf_prog *p;
    tf_prog_lit_reader *lit; /* per node; only literals' are used */
    uint64_t *buf[TF_PROG_MAX_NODES]; /* MERGE: children's blocks; REPEAT: the period */
    uint64_t done[TF_PROG_MAX_NODES]; /* words produced so far */
    uint64_t carry[TF_PROG_MAX_NODES]; /* SCAN: the last word */
    unsigned part[TF_PROG_MAX_NODES];  /* CONCAT: the child producing now */
} executor;

static void pull(executor *x, unsigned i, uint64_t *out, size_t count, const uint64_t *ctx);

static void pull_concat(executor *x, unsigned i, uint64_t *out, size_t count)
{
    const tf_prog_node *k = &x->p->node[i];
    while (count) {
        unsigned kid = k->kid0 + x->part[i];
        uint64_t left = x->p->node[kid].n - x->done[kid];
        size_t take = left < count ? (size_t)left : count;
        if (take == 0) /* never for a validated program; never a hang either */
            break;
        pull(x, kid, out, take, NULL);
        out += take;
        count -= take;
        if (x->done[kid] == x->p->node[kid].n && x->part[i] + 1u < k->n_kids)
            x->part[i]++;
    }
}

static void pull_repeat(executor *x, unsigned i, uint64_t *out, size_t count)
{
    const tf_prog_node *k = &x->p->node[i];
    const uint64_t m = k->param;
    const uint64_t *period = x->buf[i];
    if (x->done[i] == 0) /* the first pull materializes the period */
        for (uint64_t at = 0; at < m; at += BLOCK)
            pull(x, k->kid0, x->buf[i] + at, m - at < BLOCK ? (size_t)(m - at) : BLOCK, NULL);
    uint64_t at = x->done[i] % m;
    for (size_t j = 0; j < count; j++) {
        out[j] = period[at];
        at = at + 1 == m ? 0 : at + 1;
    }
}

static void pull_scan(executor *x, unsigned i, uint64_t *out, size_t count)
{
    const tf_prog_node *k = &x->p->node[i];
    size_t start = 0;
    if (x->done[i] == 0 && count) {
        out[0] = x->carry[i] = k->param;
        start = 1;
    }
    pull(x, k->kid0, out + start, count - start, NULL);
    tf_prog_scan_apply(k->kind, k->width, &x->carry[i], out + start, out + start, count - start);
}

static void pull_merge(executor *x, unsigned i, uint64_t *out, size_t count)
{
    const tf_prog_node *k = &x->p->node[i];
    unsigned shift = k->width;
    memset(out, 0, count * sizeof *out);
    for (unsigned c = 0; c < k->n_kids; c++) {
        const tf_prog_node *kid = &x->p->node[k->kid0 + c];
        uint64_t *field = x->buf[i] + (size_t)c * BLOCK;
        const uint64_t *ctx = NULL;
        if (kid->op == TF_PROG_LIT && x->lit[k->kid0 + c].ctx_sibling)
            ctx = x->buf[i] + (size_t)(x->lit[k->kid0 + c].ctx_sibling - 1) * BLOCK;
        pull(x, k->kid0 + c, field, count, ctx);
        shift -= kid->width;
        tf_prog_merge_field(field, shift, out, count);
    }
}

static void pull(executor *x, unsigned i, uint64_t *out, size_t count, const uint64_t *ctx)
{
    const tf_prog_node *k = &x->p->node[i];
    switch (k->op) {
    case TF_PROG_LIT: tf_prog_lit_read(&x->lit[i], out, count, ctx); break;
    case TF_PROG_CONST:
        for (size_t j = 0; j < count; j++)
            out[j] = k->param;
        break;
    case TF_PROG_CONCAT: pull_concat(x, i, out, count); break;
    case TF_PROG_REPEAT: pull_repeat(x, i, out, count); break;
    case TF_PROG_MAP:
        pull(x, k->kid0, out, count, NULL);
        tf_prog_map_apply(k->kind, k->param, k->width, out, count);
        break;
    case TF_PROG_SCAN: pull_scan(x, i, out, count); break;
    case TF_PROG_MERGE: pull_merge(x, i, out, count); break;
    }
    x->done[i] += count;
}

/* Opens every literal and allocates every buffer, before any output. */
static int prepare(executor *x, tf_error *e)
{
    const tf_prog *p = x->p;
    for (unsigned i = 0; i < p->n_nodes; i++) {
        const tf_prog_node *k = &p->node[i];
        if (k->op == TF_PROG_LIT) {
            tf_prog_siblings sib = { 0 };
            if (i != 0 && p->node[k->parent].op == TF_PROG_MERGE)
                for (; sib.count < k->pos; sib.count++)
                    sib.width[sib.count] = p->node[p->node[k->parent].kid0 + sib.count].width;
            if (tf_prog_lit_open(&x->lit[i], k->body, k->body_len, k->width, k->n, &sib, e) < 0)
                return -1;
        }
        size_t words = k->op == TF_PROG_MERGE ? (size_t)k->n_kids * BLOCK
                       : k->op == TF_PROG_REPEAT ? (size_t)k->param : 0;
        if (words && !(x->buf[i] = malloc(words * sizeof(uint64_t))))
            return tf_fail(e, ENOMEM, "prog: out of memory executing a program");
    }
    return 0;
}

int tf_prog_exec(const tf_prog *p, uint8_t *dst, tf_error *e)
{
    const tf_prog_node *root = &p->node[0];
    if (root->width % 8)
        return tf_fail(e, EINVAL, "prog: root words of %u bits", root->width);
    executor x = { .p = p };
    x.lit = calloc(p->n_nodes, sizeof *x.lit);
    uint64_t *block = malloc(BLOCK * sizeof *block);
    int rc = -1;
    if (!x.lit || !block) {
        tf_fail(e, ENOMEM, "prog: out of memory executing a program");
        goto done;
    }
    if (prepare(&x, e) < 0)
        goto done;
    const unsigned bytes = root->width / 8;
    for (uint64_t at = 0; at < root->n; at += BLOCK) {
        size_t count = root->n - at < BLOCK ? (size_t)(root->n - at) : BLOCK;
        pull(&x, 0, block, count, NULL);
        tf_prog_words_store(block, count, bytes, dst + at * bytes);
    }
    rc = 0;
    for (unsigned i = 0; i < p->n_nodes && rc == 0; i++)
        if (p->node[i].op == TF_PROG_LIT)
            rc = tf_prog_lit_finish(&x.lit[i], e);
done:
    for (unsigned i = 0; i < p->n_nodes; i++) {
        if (x.lit && p->node[i].op == TF_PROG_LIT)
            tf_prog_lit_close(&x.lit[i]);
        free(x.buf[i]);
    }
    free(x.lit);
    free(block);
    return rc;
}
