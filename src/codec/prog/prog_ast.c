#include "codec/prog/prog_ast.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/dtype.h"

int tf_prog_add_kids(tf_prog *p, unsigned parent, unsigned count)
{
    if (count > TF_PROG_MAX_NODES - p->n_nodes)
        return -1;
    unsigned first = p->n_nodes;
    bool root = p->n_nodes == 0;
    for (unsigned i = 0; i < count; i++) {
        tf_prog_node *k = &p->node[first + i];
        *k = (tf_prog_node){ .op = TF_PROG_HOLE };
        if (!root) {
            k->parent = (uint8_t)parent;
            k->pos = (uint8_t)i;
            k->depth = (uint8_t)(p->node[parent].depth + 1);
        }
    }
    if (!root) {
        p->node[parent].kid0 = (uint8_t)first;
        p->node[parent].n_kids = (uint8_t)count;
    }
    p->n_nodes += count;
    return (int)first;
}

bool tf_prog_ctx_sibling_ok(const tf_prog *p, unsigned node, unsigned j)
{
    const tf_prog_node *k = &p->node[node];
    return node != 0 && p->node[k->parent].op == TF_PROG_MERGE && j < k->pos;
}

bool tf_prog_ieee_fields(unsigned dtype, unsigned *exp_bits, unsigned *man_bits)
{
    const tf_dtype_info *info = tf_dtype_get(dtype);
    if (!info || !tf_dtype_is_float(dtype))
        return false;
    *exp_bits = info->exp_bits;
    *man_bits = info->man_bits;
    return true;
}

/* ---- text form ---- */

typedef struct {
    char *out;
    size_t size, len; /* len counts what would have been written */
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(text *t, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n && (size_t)i < sizeof tmp - 1; i++, t->len++)
        if (t->len + 1 < t->size)
            t->out[t->len] = tmp[i];
}

typedef enum { LAYOUT_OTHER, LAYOUT_IEEE, LAYOUT_IEEE_ROT, LAYOUT_BYTES, LAYOUT_BITS } layout;

static layout merge_layout(const tf_prog *p, const tf_prog_node *m, unsigned dtype)
{
    const tf_prog_node *k = &p->node[m->kid0];
    unsigned e, f, n = m->n_kids;
    bool bytes = true, bits = true;
    for (unsigned i = 0; i < n; i++) {
        bytes &= k[i].width == 8;
        bits &= k[i].width == 1;
    }
    if (tf_prog_ieee_fields(dtype, &e, &f) && n == 3 && m->width == 1 + e + f) {
        if (k[0].width == 1 && k[1].width == e && k[2].width == f)
            return LAYOUT_IEEE;
        if (k[0].width == e && k[1].width == f && k[2].width == 1)
            return LAYOUT_IEEE_ROT;
    }
    return bytes ? LAYOUT_BYTES : bits ? LAYOUT_BITS : LAYOUT_OTHER;
}

static void put_dtype_name(text *t, unsigned dtype)
{
    const char *name = tf_dtype_get(dtype)->name;
    for (; *name; name++)
        put(t, "%c", tolower((unsigned char)*name));
}

static void put_merge_name(text *t, const tf_prog *p, const tf_prog_node *m, unsigned dtype)
{
    switch (merge_layout(p, m, dtype)) {
    case LAYOUT_IEEE: put(t, "merge_"); put_dtype_name(t, dtype); return;
    case LAYOUT_IEEE_ROT: put(t, "merge_"); put_dtype_name(t, dtype); put(t, "_rot"); return;
    case LAYOUT_BYTES: put(t, "merge_bytes"); return;
    case LAYOUT_BITS: put(t, "merge_bits"); return;
    case LAYOUT_OTHER: break;
    }
    put(t, "merge");
    for (unsigned i = 0; i < m->n_kids; i++)
        put(t, "_%u", p->node[m->kid0 + i].width);
}

static void put_sibling_name(text *t, const tf_prog *p, const tf_prog_node *m, unsigned j,
                             unsigned dtype)
{
    static const char *const ieee[] = { "sign", "exp", "man" };
    switch (merge_layout(p, m, dtype)) {
    case LAYOUT_IEEE: put(t, "%s", ieee[j]); return;
    case LAYOUT_IEEE_ROT: put(t, "%s", ieee[(j + 1) % 3]); return;
    default: put(t, "#%u", j); return;
    }
}

static void put_node(text *t, const tf_prog *p, unsigned i, unsigned dtype)
{
    static const char *const coding[] = { "raw", "pack", "huff", "rans", "huff4" };
    static const char *const map[] = { "xor", "add", "zigzag", "gray", "bitrev", "rotl" };
    static const char *const scan[] = { "xor", "add", "xorlag", "addlag" };
    const tf_prog_node *k = &p->node[i];
    switch (k->op) {
    case TF_PROG_LIT:
        put(t, "lit_%s", k->lit.coding < TF_PROG_CODINGS ? coding[k->lit.coding] : "?");
        if (k->lit.ctx_self)
            put(t, "|self");
        if (k->lit.ctx_sibling) {
            put(t, "|");
            put_sibling_name(t, p, &p->node[k->parent], k->lit.ctx_sibling - 1u, dtype);
        }
        return;
    case TF_PROG_CONST: put(t, "const"); return;
    case TF_PROG_HOLE: put(t, "?"); return;
    case TF_PROG_CONCAT: put(t, "concat"); break;
    case TF_PROG_REPEAT: put(t, "repeat"); break;
    case TF_PROG_MAP:
        put(t, "map_%s", k->kind < TF_PROG_MAP_KINDS ? map[k->kind] : "?");
        if (k->kind == TF_PROG_MAP_ROTL)
            put(t, "%u", (unsigned)k->param);
        break;
    case TF_PROG_SCAN: put(t, "scan_%s", k->kind < TF_PROG_SCAN_KINDS ? scan[k->kind] : "?"); break;
    case TF_PROG_MERGE: put_merge_name(t, p, k, dtype); break;
    }
    put(t, "(");
    for (unsigned c = 0; c < k->n_kids; c++) {
        if (c)
            put(t, ", ");
        put_node(t, p, k->kid0 + c, dtype);
    }
    put(t, ")");
}

size_t tf_prog_describe_tree(const tf_prog *p, unsigned dtype, char *out, size_t outsz)
{
    text t = { .out = out, .size = outsz };
    if (p->n_nodes)
        put_node(&t, p, 0, tf_dtype_get(dtype) ? dtype : 0);
    if (outsz)
        out[t.len < outsz ? t.len : outsz - 1] = '\0';
    return t.len;
}
