#include "codec/prog/prog_search.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_derive.h"

/* Open states completed with literals once the budget is spent: the
 * paper keeps the first one the queue orders; a few more make the result
 * depend less on which open state happens to come first. */
#define ROLLOUTS 8

/* What closing any hole costs at least: every program has an operator
 * tag and at least one byte more (a literal's coding or length, a
 * constant's value, an operator's parameter or child). */
#define HOLE_BYTES 2

typedef struct {
    tf_prog_tree tree;
    double g, h;                       /* prior cost so far, and to go */
    double hole_h[TF_PROG_MAX_NODES];  /* each open hole's share of h */
    unsigned holes;
    size_t lb;                         /* byte lower bound */
    uint64_t seq;                      /* creation order, for ties */
} state;

typedef struct {
    const tf_prog_search_opts *o;
    state **heap;
    size_t n, cap;
    uint64_t seq;
    size_t bytes; /* target words held */
    tf_prog_search_stats *stats;
} search;

static void drop(search *s, state *st)
{
    if (st) {
        tf_prog_tree_release(&st->tree, &s->bytes);
        free(st);
    }
}

/* ---- the queue ---- */

static bool before(const state *a, const state *b)
{
    double fa = a->g + a->h, fb = b->g + b->h;
    if (fa != fb)
        return fa < fb;
    if (a->lb != b->lb)
        return a->lb < b->lb;
    return a->seq < b->seq;
}

static int push(search *s, state *st, tf_error *e)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        state **grown = realloc(s->heap, cap * sizeof *grown);
        if (!grown) {
            drop(s, st);
            return tf_fail(e, ENOMEM, "prog: out of memory for the search queue");
        }
        s->heap = grown;
        s->cap = cap;
    }
    size_t i = s->n++;
    for (; i > 0 && before(st, s->heap[(i - 1) / 2]); i = (i - 1) / 2)
        s->heap[i] = s->heap[(i - 1) / 2];
    s->heap[i] = st;
    s->stats->states++;
    return 0;
}

static state *pop(search *s)
{
    if (s->n == 0)
        return NULL;
    state *top = s->heap[0], *last = s->heap[--s->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->n)
            break;
        if (c + 1 < s->n && before(s->heap[c + 1], s->heap[c]))
            c++;
        if (!before(s->heap[c], last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->n)
        s->heap[i] = last;
    return top;
}

/* ---- states ---- */

static state *clone(const state *st, search *s)
{
    state *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    *c = *st;
    tf_prog_tree_copy(&c->tree, &st->tree); /* takes references to the targets */
    c->seq = s->seq++;
    return c;
}

static unsigned parent_rule(const state *st, unsigned i)
{
    return i == 0 ? TF_PROG_R_NONE : st->tree.rule[st->tree.prog.node[i].parent];
}

static void admissible_rules(const search *s, const state *st, unsigned i, bool *adm)
{
    const tf_prog_node *k = &st->tree.prog.node[i];
    for (unsigned r = 0; r < TF_PROG_RULES; r++)
        adm[r] = tf_prog_rule_admissible(r, k->width, k->n, s->o->dtype, parent_rule(st, i),
                                         k->depth);
}

/* A new hole: its context, and its share of h (the cheapest admissible
 * production). */
static void open_hole(search *s, state *st, unsigned i)
{
    const tf_prog_node *k = &st->tree.prog.node[i];
    bool adm[TF_PROG_RULES];
    tf_prog_kappa(st->tree.kappa[i], st->tree.target[i], parent_rule(st, i), k->pos, k->depth,
                  s->o->dtype);
    admissible_rules(s, st, i, adm);
    double min = -1;
    for (unsigned r = 0; r < TF_PROG_RULES; r++) {
        if (!adm[r])
            continue;
        double w = tf_prog_prior_cost(s->o->prior, r, st->tree.kappa[i], adm);
        min = min < 0 || w < min ? w : min;
    }
    st->hole_h[i] = min;
    st->h += min;
    st->holes++;
}

static void fill_hole(state *st, unsigned i, unsigned rule)
{
    st->tree.rule[i] = (uint8_t)rule;
    st->h -= st->hole_h[i];
    st->hole_h[i] = 0;
    st->holes--;
}

/* Builds the expansion into hole i of st: operator, parameters and
 * children (constant runs closed, the others new holes), taking the
 * expansion's references. False when the children do not fit in a
 * program. */
static bool apply_expansion(search *s, state *st, unsigned i, unsigned rule,
                            tf_prog_expansion *x)
{
    tf_prog_tree *t = &st->tree;
    fill_hole(st, i, rule);
    if (tf_prog_expansion_build(x, t, i) < 0)
        return false;
    const tf_prog_node *k = &t->prog.node[i];
    for (unsigned j = k->kid0; j < k->kid0 + k->n_kids; j++)
        if (t->prog.node[j].op != TF_PROG_CONST)
            open_hole(s, st, j);
    return true;
}

static int leftmost_hole(const tf_prog *p, unsigned i)
{
    if (p->node[i].op == TF_PROG_HOLE)
        return (int)i;
    for (unsigned c = 0; c < p->node[i].n_kids; c++) {
        int h = leftmost_hole(p, p->node[i].kid0 + c);
        if (h >= 0)
            return h;
    }
    return -1;
}

/* One child state of st by rule at hole i, or NULL (*skip) when the rule
 * does not apply there. */
static state *child_state(search *s, const state *st, unsigned i, unsigned rule, bool *skip,
                          tf_error *e)
{
    *skip = false;
    tf_prog_expansion x;
    if (rule != TF_PROG_R_LIT) {
        int rc = tf_prog_derive(rule, st->tree.target[i], s->o->dtype, true, NULL, &x,
                                &s->bytes, e);
        if (rc <= 0) {
            *skip = rc == 0;
            return NULL;
        }
    }
    state *c = clone(st, s);
    if (!c) {
        if (rule != TF_PROG_R_LIT)
            tf_prog_expansion_release(&x, &s->bytes);
        tf_fail(e, ENOMEM, "prog: out of memory for a search state");
        return NULL;
    }
    if (rule == TF_PROG_R_LIT) {
        fill_hole(c, i, rule);
        if (tf_prog_tree_close_lit(&c->tree, i, e) < 0) {
            drop(s, c);
            return NULL;
        }
    } else {
        bool fits = apply_expansion(s, c, i, rule, &x);
        tf_prog_expansion_release(&x, &s->bytes);
        if (!fits) {
            drop(s, c);
            *skip = true;
            return NULL;
        }
    }
    return c;
}

static int expand(search *s, const state *st, size_t best_size, tf_error *e)
{
    unsigned i = (unsigned)leftmost_hole(&st->tree.prog, 0);
    bool adm[TF_PROG_RULES];
    admissible_rules(s, st, i, adm);
    for (unsigned r = 0; r < TF_PROG_RULES; r++) {
        if (!adm[r])
            continue;
        bool skip;
        state *c = child_state(s, st, i, r, &skip, e);
        if (!c) {
            if (skip)
                continue;
            return -1;
        }
        c->g = st->g + tf_prog_prior_cost(s->o->prior, r, st->tree.kappa[i], adm);
        c->lb = tf_prog_tree_size(&c->tree, HOLE_BYTES);
        if (c->lb >= best_size) {
            s->stats->pruned++;
            drop(s, c);
        } else if (push(s, c, e) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Closes every hole with a literal, or a constant where its words are one
 * value (the smaller terminal). */
static int complete_with_literals(search *s, state *st, tf_error *e)
{
    for (unsigned i = 0; i < st->tree.prog.n_nodes; i++) {
        if (st->tree.prog.node[i].op != TF_PROG_HOLE)
            continue;
        tf_prog_expansion x;
        int rc = tf_prog_derive(TF_PROG_R_CONST, st->tree.target[i], s->o->dtype, true, NULL, &x,
                                &s->bytes, e);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            apply_expansion(s, st, i, TF_PROG_R_CONST, &x); /* no children: always fits */
            continue;
        }
        fill_hole(st, i, TF_PROG_R_LIT);
        if (tf_prog_tree_close_lit(&st->tree, i, e) < 0)
            return -1;
    }
    st->lb = tf_prog_tree_size(&st->tree, HOLE_BYTES);
    return 0;
}

static state *root_state(search *s, const uint64_t *x, size_t n, unsigned width, tf_error *e)
{
    state *st = calloc(1, sizeof *st);
    tf_prog_stream *target = tf_prog_stream_new(n, width, &s->bytes);
    if (!st || !target) {
        free(st);
        tf_prog_stream_unref(target, &s->bytes);
        tf_fail(e, ENOMEM, "prog: out of memory starting a search");
        return NULL;
    }
    memcpy(target->v, x, n * sizeof *x);
    tf_prog_add_kids(&st->tree.prog, 0, 1);
    st->tree.prog.node[0].width = (uint8_t)width;
    st->tree.prog.node[0].n = n;
    st->tree.target[0] = target;
    st->tree.rule[0] = TF_PROG_R_NONE;
    st->seq = s->seq++;
    open_hole(s, st, 0);
    st->lb = HOLE_BYTES;
    return st;
}

/* Completes the kept open states with literals; the smallest complete
 * program wins. */
static int roll_out(search *s, state **cut, unsigned n_cut, state **best, size_t *best_size,
                    tf_error *e)
{
    int rc = 0;
    for (unsigned k = 0; k < n_cut; k++) {
        state *st = cut[k];
        cut[k] = NULL;
        if (rc == 0 && (rc = complete_with_literals(s, st, e)) == 0 && st->lb < *best_size) {
            drop(s, *best);
            *best = st;
            *best_size = st->lb;
            s->stats->rollout_won = true;
        } else {
            drop(s, st);
        }
    }
    return rc;
}

/* The main loop of Algorithm 1 from the root state; *best is the
 * incumbent, replaced by smaller complete programs. */
static int run(search *s, state **best, size_t *best_size, tf_error *e)
{
    state *cut[ROLLOUTS];
    unsigned n_cut = 0;
    int rc = 0;
    for (state *st; rc == 0 && (st = pop(s));) {
        if (st->lb >= *best_size) {
            s->stats->pruned++;
            drop(s, st);
        } else if (st->holes == 0) {
            drop(s, *best);
            *best = st;
            *best_size = st->lb;
        } else if (s->stats->expansions >= s->o->budget || s->bytes > s->o->max_memory) {
            if (n_cut < ROLLOUTS)
                cut[n_cut++] = st; /* the open states the queue orders first */
            else
                drop(s, st);
        } else {
            s->stats->expansions++;
            rc = expand(s, st, *best_size, e);
            drop(s, st);
        }
    }
    int rolled = roll_out(s, cut, n_cut, best, best_size, e);
    return rc < 0 ? rc : rolled;
}

int tf_prog_search(const uint64_t *x, size_t n, unsigned width, const tf_prog_search_opts *o,
                   tf_prog_tree *best, size_t *size, tf_prog_search_stats *stats,
                   tf_error *e)
{
    tf_prog_search_stats local = { 0 };
    search s = { .o = o, .stats = stats ? stats : &local };
    *s.stats = (tf_prog_search_stats){ 0 };
    state *root = root_state(&s, x, n, width, e), *incumbent = NULL;
    int rc = -1;
    if (!root)
        return -1;
    incumbent = clone(root, &s);
    if (!incumbent) {
        tf_fail(e, ENOMEM, "prog: out of memory starting a search");
        goto done;
    }
    if ((rc = complete_with_literals(&s, incumbent, e)) < 0)
        goto done;
    size_t best_size = incumbent->lb;
    if ((rc = push(&s, root, e)) < 0) {
        root = NULL; /* push dropped it */
        goto done;
    }
    root = NULL;
    if ((rc = run(&s, &incumbent, &best_size, e)) < 0)
        goto done;
    *best = incumbent->tree; /* the references move to the caller */
    incumbent->tree.prog.n_nodes = 0;
    *size = best_size;
done:
    drop(&s, root);
    drop(&s, incumbent);
    for (size_t i = 0; i < s.n; i++)
        drop(&s, s.heap[i]);
    free(s.heap);
    return rc;
}
