/* prog: the typed language of tensor programs (papers/brevis.txt, Fig. 3).
 *
 * A program P : b[n] produces n words of b bits (1 <= b <= 64):
 *
 *   lit             the words themselves, in a physical coding (prog_leaf.h)
 *   const(v)        n copies of v; n >= 1
 *   concat(P1..Pk)  Pi : b[ni], ni >= 1, k >= 2, n = sum ni
 *   repeat_m(P)     P : b[m], 1 <= m < n; word i is word i mod m of P (the
 *                   paper's repeat_k, extended to a cut last copy so that
 *                   a chunk that ends mid-row still repeats)
 *   map_u(P)        P : b[n], n >= 1; word i is u(P[i]) for a bijection u
 *                   of b-bit words (prog_ops.h)
 *   scan_q(v0, P)   P : b[n-1], n >= 2; word 0 is v0, word i is
 *                   q(word i-1, P[i-1]) (xor, or add mod 2^b)
 *   scan_q,m(P)     the lagged scans: P : b[n], 1 <= m < n; word i is P[i]
 *                   for i < m, q(word i-m, P[i]) after (a row-dependent
 *                   structure such as a causal mask, whose rows differ
 *                   from the row above in one word, becomes a P of a few
 *                   runs)
 *   merge(P1..Pk)   Pi : bi[n], n >= 1, k >= 2, b = sum bi; word i is the
 *                   concatenation of the Pi[i], P1 in the highest bits
 *
 * A tensor chunk of n elements of a dtype of w bytes is a program of type
 * (8w)[n] (TF_DT_NONE: opaque bytes, 8[len]).
 *
 * Programs live in a fixed array of nodes; the children of a node are
 * contiguous. The same structure holds a parsed instance (a chunk's
 * program, every length and parameter known), a template (the model: the
 * productions, no data-derived parameters) and a search state (whose
 * unexpanded holes are TF_PROG_HOLE). */
#ifndef TRAJFS_CODEC_PROG_PROG_AST_H
#define TRAJFS_CODEC_PROG_PROG_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Serialized tags: part of the format, never renumber. */
typedef enum {
    TF_PROG_LIT = 0,
    TF_PROG_CONST = 1,
    TF_PROG_CONCAT = 2,
    TF_PROG_REPEAT = 3,
    TF_PROG_MAP = 4,
    TF_PROG_SCAN = 5,
    TF_PROG_MERGE = 6,
    TF_PROG_OP_COUNT,
    TF_PROG_HOLE = 255 /* search only, never serialized */
} tf_prog_op;

typedef enum {
    TF_PROG_MAP_XOR = 0,    /* u(v) = v ^ c */
    TF_PROG_MAP_ADD = 1,    /* u(v) = v + c mod 2^b */
    TF_PROG_MAP_ZIGZAG = 2, /* u = ZigZag decoding: 0,1,2,3 -> 0,-1,1,-2 */
    TF_PROG_MAP_GRAY = 3,   /* u = Gray decoding (prefix xor of the bits) */
    TF_PROG_MAP_BITREV = 4, /* u reverses the b bits */
    TF_PROG_MAP_ROTL = 5,   /* u rotates left by r, 1 <= r < b */
    TF_PROG_MAP_KINDS
} tf_prog_map_kind;

typedef enum {
    TF_PROG_SCAN_XOR = 0,
    TF_PROG_SCAN_ADD = 1,
    TF_PROG_SCAN_XOR_LAG = 2, /* lag m in the node's param */
    TF_PROG_SCAN_ADD_LAG = 3,
    TF_PROG_SCAN_KINDS
} tf_prog_scan_kind;

static inline bool tf_prog_scan_lagged(unsigned kind)
{
    return kind == TF_PROG_SCAN_XOR_LAG || kind == TF_PROG_SCAN_ADD_LAG;
}

/* Whether a node of op and kind holds param words while it runs: a
 * repeat its period, a lagged scan the ring of its last lag words. */
static inline bool tf_prog_holds_words(unsigned op, unsigned kind)
{
    return op == TF_PROG_REPEAT || (op == TF_PROG_SCAN && tf_prog_scan_lagged(kind));
}

static inline bool tf_prog_scan_xor(unsigned kind)
{
    return kind == TF_PROG_SCAN_XOR || kind == TF_PROG_SCAN_XOR_LAG;
}

/* Physical codings of a literal leaf (prog_leaf.h). */
typedef enum {
    TF_PROG_CODE_RAW = 0,  /* b bits per word */
    TF_PROG_CODE_PACK = 1, /* w < b bits per word */
    TF_PROG_CODE_HUFF = 2, /* canonical Huffman over byte symbols */
    TF_PROG_CODE_RANS = 3, /* static rANS over byte symbols, optional contexts */
    TF_PROG_CODE_HUFF4 = 4, /* HUFF in four streams, decoded side by side */
    TF_PROG_CODINGS
} tf_prog_coding;

/* Limits a decoder enforces (and the search respects). */
#define TF_PROG_MAX_NODES 64
#define TF_PROG_MAX_DEPTH 8
#define TF_PROG_MAX_ARITY 64
#define TF_PROG_MAX_WIDTH 64

/* How a literal is (or, in a template, was last) coded. */
typedef struct {
    uint8_t coding;      /* tf_prog_coding */
    uint8_t ctx_sibling; /* 0: no context; else 1 + the index, among the
                            parent merge's children, of an earlier sibling
                            whose words give the rANS contexts */
    bool ctx_self;       /* the rANS contexts come from its own words */
} tf_prog_lit_hint;

typedef struct {
    uint8_t op;     /* tf_prog_op */
    uint8_t width;  /* b */
    uint8_t kind;   /* tf_prog_map_kind or tf_prog_scan_kind */
    uint8_t n_kids;
    uint8_t kid0;   /* index of the first child (children are contiguous) */
    uint8_t parent; /* index of the parent; the root's is 0 */
    uint8_t pos;    /* index among the parent's children */
    uint8_t depth;  /* the root is at depth 0 */
    uint64_t n;     /* words; 0 in a template */
    uint64_t param; /* const v, map c or r, scan v0 or lag m, repeat period m */
    tf_prog_lit_hint lit;
    /* Instance literal: its coded bytes (prog_leaf.h). */
    const uint8_t *body;
    size_t body_len;
} tf_prog_node;

typedef struct {
    tf_prog_node node[TF_PROG_MAX_NODES];
    unsigned n_nodes;
} tf_prog;

static inline uint64_t tf_prog_mask(unsigned width)
{
    return width >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << width) - 1;
}

/* Appends `count` nodes, children of `parent` (or the root when the
 * program is empty), and returns the index of the first, or -1 when the
 * program would exceed TF_PROG_MAX_NODES. The new nodes are zeroed but
 * for their links. */
int tf_prog_add_kids(tf_prog *p, unsigned parent, unsigned count);

/* Whether the node may take its contexts from sibling index j (an earlier
 * child of the same merge, narrow enough to index contexts). */
bool tf_prog_ctx_sibling_ok(const tf_prog *p, unsigned node, unsigned j);

/* The widths of an IEEE layout of a dtype: sign, exponent, mantissa;
 * false for other dtypes. */
bool tf_prog_ieee_fields(unsigned dtype, unsigned *exp_bits, unsigned *man_bits);

/* One-line text of a template or instance rooted at node 0, e.g.
 * "merge_bf16(lit_raw, lit_rans, lit_rans|exp)"; dtype names the IEEE
 * layouts. Truncated to outsz - 1 characters. Returns the length it
 * would have had. */
size_t tf_prog_describe_tree(const tf_prog *p, unsigned dtype, char *out, size_t outsz);

#endif
