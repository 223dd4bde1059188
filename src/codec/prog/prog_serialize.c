#include "codec/prog/prog_serialize.h"

#include <errno.h>

/* ---- writing ---- */

/* Parameters shared by both forms (MAP kind and rotation, SCAN kind,
 * MERGE widths). */
static int write_shape(const tf_prog *p, const tf_prog_node *k, tf_buf *out)
{
    int rc = 0;
    switch (k->op) {
    case TF_PROG_MAP:
        rc |= tf_buf_u8(out, k->kind);
        if (k->kind == TF_PROG_MAP_ROTL)
            rc |= tf_buf_u8(out, (uint8_t)k->param);
        break;
    case TF_PROG_SCAN: rc |= tf_buf_u8(out, k->kind); break;
    case TF_PROG_MERGE:
        rc |= tf_buf_u8(out, k->n_kids);
        for (unsigned c = 0; c < k->n_kids; c++)
            rc |= tf_buf_u8(out, p->node[k->kid0 + c].width);
        break;
    }
    return rc;
}

int tf_prog_write_node_header(const tf_prog *p, unsigned i, tf_buf *out)
{
    const tf_prog_node *k = &p->node[i];
    int rc = tf_buf_u8(out, k->op) | write_shape(p, k, out);
    switch (k->op) {
    case TF_PROG_LIT: rc |= tf_buf_varint(out, k->body_len); break;
    case TF_PROG_CONST:
    case TF_PROG_REPEAT: rc |= tf_buf_varint(out, k->param); break;
    case TF_PROG_CONCAT:
        rc |= tf_buf_varint(out, k->n_kids);
        for (unsigned c = 0; c + 1 < k->n_kids; c++)
            rc |= tf_buf_varint(out, p->node[k->kid0 + c].n);
        break;
    case TF_PROG_MAP:
        if (k->kind == TF_PROG_MAP_XOR || k->kind == TF_PROG_MAP_ADD)
            rc |= tf_buf_varint(out, k->param);
        break;
    case TF_PROG_SCAN: rc |= tf_buf_varint(out, k->param); break; /* v0, or the lag */
    }
    return rc;
}

static int write_instance(const tf_prog *p, unsigned i, tf_buf *out)
{
    const tf_prog_node *k = &p->node[i];
    int rc = tf_prog_write_node_header(p, i, out);
    if (k->op == TF_PROG_LIT)
        rc |= tf_buf_put(out, k->body, k->body_len);
    for (unsigned c = 0; c < k->n_kids && rc == 0; c++)
        rc |= write_instance(p, k->kid0 + c, out);
    return rc;
}

int tf_prog_write(const tf_prog *p, tf_buf *out, tf_error *e)
{
    return write_instance(p, 0, out) ? tf_fail(e, ENOMEM, "prog: out of memory for a program")
                                     : 0;
}

static int write_template(const tf_prog *p, unsigned i, tf_buf *out)
{
    const tf_prog_node *k = &p->node[i];
    int rc = tf_buf_u8(out, k->op) | write_shape(p, k, out);
    if (k->op == TF_PROG_LIT)
        rc |= tf_buf_u8(out, k->lit.coding) | tf_buf_u8(out, k->lit.ctx_sibling);
    for (unsigned c = 0; c < k->n_kids && rc == 0; c++)
        rc |= write_template(p, k->kid0 + c, out);
    return rc;
}

int tf_prog_template_write(const tf_prog *p, tf_buf *out, tf_error *e)
{
    return write_template(p, 0, out) ? tf_fail(e, ENOMEM, "prog: out of memory for a model")
                                     : 0;
}

/* ---- reading ---- */

typedef struct {
    tf_cursor *r;
    tf_prog *p;
    bool instance;         /* lengths and data parameters present */
    uint64_t period_words; /* what repeats' periods and lagged scans'
                              rings may still hold */
    tf_error *e;
} parser;

static int bad(parser *ps, const char *what)
{
    return tf_fail(ps->e, EIO, "prog: malformed %s: %s", ps->instance ? "program" : "model",
                   what);
}

/* Adds count children of node i, all of i's width and length unless the
 * caller sets them. */
static int add_kids(parser *ps, unsigned i, unsigned count)
{
    if (ps->p->node[i].depth + 1 >= TF_PROG_MAX_DEPTH)
        return bad(ps, "too deep");
    int first = tf_prog_add_kids(ps->p, i, count);
    if (first < 0)
        return bad(ps, "too many nodes");
    for (unsigned c = 0; c < count; c++) {
        ps->p->node[first + c].width = ps->p->node[i].width;
        ps->p->node[first + c].n = ps->p->node[i].n;
    }
    return first;
}

static int parse_word(parser *ps, const tf_prog_node *k, uint64_t *v)
{
    *v = tf_read_varint(ps->r);
    return ps->r->bad || *v > tf_prog_mask(k->width) ? bad(ps, "word out of range") : 0;
}

static int parse_node(parser *ps, unsigned i);

static int parse_kids(parser *ps, unsigned i)
{
    const tf_prog_node *k = &ps->p->node[i];
    for (unsigned c = 0; c < k->n_kids; c++)
        if (parse_node(ps, k->kid0 + c) < 0)
            return -1;
    return 0;
}

static int parse_lit(parser *ps, tf_prog_node *k, unsigned i)
{
    if (ps->instance) {
        uint64_t len = tf_read_varint(ps->r);
        k->body = ps->r->bad || len > tf_cursor_left(ps->r) ? NULL
                                                           : tf_read_bytes(ps->r, (size_t)len);
        if (!k->body)
            return bad(ps, "literal is truncated");
        k->body_len = (size_t)len;
        return 0;
    }
    k->lit.coding = tf_read_u8(ps->r);
    k->lit.ctx_sibling = tf_read_u8(ps->r);
    if (ps->r->bad || k->lit.coding >= TF_PROG_CODINGS ||
        (k->lit.ctx_sibling && !tf_prog_ctx_sibling_ok(ps->p, i, k->lit.ctx_sibling - 1u)))
        return bad(ps, "literal coding");
    return 0;
}

static int parse_concat(parser *ps, tf_prog_node *k, unsigned i)
{
    if (!ps->instance)
        return add_kids(ps, i, 1) < 0 ? -1 : 0;
    uint64_t count = tf_read_varint(ps->r);
    if (ps->r->bad || count < 2 || count > TF_PROG_MAX_ARITY || count > k->n)
        return bad(ps, "concat arity");
    int first = add_kids(ps, i, (unsigned)count);
    if (first < 0)
        return -1;
    uint64_t left = k->n;
    for (unsigned c = 0; c + 1 < count; c++) {
        uint64_t len = tf_read_varint(ps->r);
        /* every later part needs at least one word */
        if (ps->r->bad || len < 1 || len > left - (count - 1 - c))
            return bad(ps, "concat lengths");
        ps->p->node[first + c].n = len;
        left -= len;
    }
    ps->p->node[first + count - 1].n = left;
    return 0;
}

/* A repeat's period or a lagged scan's lag m, 1 <= m < n: the executor
 * holds m words in memory for each, so together they may not exceed the
 * chunk. */
static int parse_held_words(parser *ps, tf_prog_node *k, const char *what)
{
    k->param = tf_read_varint(ps->r);
    if (ps->r->bad || k->param < 1 || k->param >= k->n)
        return bad(ps, what);
    if (k->param > ps->period_words)
        return bad(ps, "repeat periods and scan lags exceed the chunk");
    ps->period_words -= k->param;
    return 0;
}

static int parse_repeat(parser *ps, tf_prog_node *k, unsigned i)
{
    int first = add_kids(ps, i, 1);
    if (first < 0 || !ps->instance)
        return first < 0 ? -1 : 0;
    if (parse_held_words(ps, k, "repeat period") < 0)
        return -1;
    ps->p->node[first].n = k->param;
    return 0;
}

static int parse_map(parser *ps, tf_prog_node *k, unsigned i)
{
    k->kind = tf_read_u8(ps->r);
    if (ps->r->bad || k->kind >= TF_PROG_MAP_KINDS || (ps->instance && k->n < 1))
        return bad(ps, "map kind");
    if (k->kind == TF_PROG_MAP_ROTL) {
        k->param = tf_read_u8(ps->r);
        if (ps->r->bad || k->param < 1 || k->param >= k->width)
            return bad(ps, "rotation");
    } else if (ps->instance && (k->kind == TF_PROG_MAP_XOR || k->kind == TF_PROG_MAP_ADD)) {
        if (parse_word(ps, k, &k->param) < 0)
            return -1;
    }
    return add_kids(ps, i, 1) < 0 ? -1 : 0;
}

static int parse_scan(parser *ps, tf_prog_node *k, unsigned i)
{
    k->kind = tf_read_u8(ps->r);
    if (ps->r->bad || k->kind >= TF_PROG_SCAN_KINDS || (ps->instance && k->n < 2))
        return bad(ps, "scan");
    const bool lagged = tf_prog_scan_lagged(k->kind);
    if (ps->instance && (lagged ? parse_held_words(ps, k, "scan lag")
                                : parse_word(ps, k, &k->param)) < 0)
        return -1;
    int first = add_kids(ps, i, 1);
    if (first < 0)
        return -1;
    /* a lagged scan's child has every word, the others' all but v0 */
    ps->p->node[first].n = ps->instance ? k->n - !lagged : 0;
    return 0;
}

static int parse_merge(parser *ps, tf_prog_node *k, unsigned i)
{
    unsigned count = tf_read_u8(ps->r);
    if (ps->r->bad || count < 2 || count > TF_PROG_MAX_ARITY || (ps->instance && k->n < 1))
        return bad(ps, "merge arity");
    int first = add_kids(ps, i, count);
    if (first < 0)
        return -1;
    unsigned sum = 0;
    for (unsigned c = 0; c < count; c++) {
        unsigned w = tf_read_u8(ps->r);
        ps->p->node[first + c].width = (uint8_t)w;
        sum += w;
        if (ps->r->bad || w < 1 || sum > k->width)
            return bad(ps, "merge widths");
    }
    return sum == k->width ? 0 : bad(ps, "merge widths do not sum to the word");
}

static int parse_node(parser *ps, unsigned i)
{
    tf_prog_node *k = &ps->p->node[i];
    k->op = tf_read_u8(ps->r);
    if (ps->r->bad)
        return bad(ps, "truncated");
    int rc;
    switch (k->op) {
    case TF_PROG_LIT: return parse_lit(ps, k, i);
    case TF_PROG_CONST:
        if (!ps->instance)
            return 0;
        if (k->n < 1)
            return bad(ps, "const of no words");
        return parse_word(ps, k, &k->param);
    case TF_PROG_CONCAT: rc = parse_concat(ps, k, i); break;
    case TF_PROG_REPEAT: rc = parse_repeat(ps, k, i); break;
    case TF_PROG_MAP: rc = parse_map(ps, k, i); break;
    case TF_PROG_SCAN: rc = parse_scan(ps, k, i); break;
    case TF_PROG_MERGE: rc = parse_merge(ps, k, i); break;
    default: return bad(ps, "unknown operator");
    }
    return rc < 0 ? -1 : parse_kids(ps, i);
}

static int parse_root(parser *ps, unsigned width, uint64_t n)
{
    if (width < 1 || width > TF_PROG_MAX_WIDTH)
        return tf_fail(ps->e, EINVAL, "prog: words of %u bits", width);
    ps->p->n_nodes = 0;
    tf_prog_add_kids(ps->p, 0, 1);
    ps->p->node[0].width = (uint8_t)width;
    ps->p->node[0].n = n;
    return parse_node(ps, 0);
}

int tf_prog_read(const uint8_t *enc, size_t enc_len, unsigned width, uint64_t n, tf_prog *p,
                 tf_error *e)
{
    tf_cursor r = tf_cursor_make(enc, enc_len);
    parser ps = { .r = &r, .p = p, .instance = true, .period_words = n, .e = e };
    if (parse_root(&ps, width, n) < 0)
        return -1;
    return tf_cursor_left(&r) ? bad(&ps, "trailing bytes") : 0;
}

int tf_prog_template_read(tf_cursor *r, unsigned width, tf_prog *p, tf_error *e)
{
    parser ps = { .r = r, .p = p, .instance = false, .e = e };
    return parse_root(&ps, width, 0);
}
