#include "codec/prog/prog_exec.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_leaf.h"
#include "codec/prog/prog_ops.h"
#include "common/simd.h"

/* Words per pull: small enough that a merge's children and its output
 * stay in L1/L2, large enough to amortize the calls. */
#define BLOCK 1024

/* What the general executor keeps of a node. */
typedef struct {
    uint64_t *buf;  /* MERGE: children's blocks; REPEAT: the period;
                       lagged SCAN: the last lag words */
    uint64_t done;  /* words produced so far */
    uint64_t carry; /* SCAN: the last word */
    unsigned part;  /* CONCAT: the child producing now */
} node_state;

typedef struct {
    const tf_prog *p;
    tf_prog_lit_reader *lit; /* per node; only literals' are used */
    unsigned opened;         /* lit[i] was opened (or tried) for i < opened */
    node_state st[TF_PROG_MAX_NODES]; /* per node; only the program's are cleared */
} executor;

static void pull(executor *x, unsigned i, uint64_t *out, size_t count, const uint64_t *ctx);

static void pull_concat(executor *x, unsigned i, uint64_t *out, size_t count)
{
    const tf_prog_node *k = &x->p->node[i];
    while (count) {
        unsigned kid = k->kid0 + x->st[i].part;
        uint64_t left = x->p->node[kid].n - x->st[kid].done;
        size_t take = left < count ? (size_t)left : count;
        if (take == 0) /* never for a validated program; never a hang either */
            break;
        pull(x, kid, out, take, NULL);
        out += take;
        count -= take;
        if (x->st[kid].done == x->p->node[kid].n && x->st[i].part + 1u < k->n_kids)
            x->st[i].part++;
    }
}

static void pull_repeat(executor *x, unsigned i, uint64_t *out, size_t count)
{
    const tf_prog_node *k = &x->p->node[i];
    const uint64_t m = k->param;
    const uint64_t *period = x->st[i].buf;
    if (x->st[i].done == 0) /* the first pull materializes the period */
        for (uint64_t at = 0; at < m; at += BLOCK)
            pull(x, k->kid0, x->st[i].buf + at, m - at < BLOCK ? (size_t)(m - at) : BLOCK, NULL);
    uint64_t at = x->st[i].done % m;
    for (size_t j = 0; j < count; j++) {
        out[j] = period[at];
        at = at + 1 == m ? 0 : at + 1;
    }
}

static void pull_scan(executor *x, unsigned i, uint64_t *out, size_t count)
{
    const tf_prog_node *k = &x->p->node[i];
    if (tf_prog_scan_lagged(k->kind)) { /* buf: the last m words, a ring */
        uint64_t at = x->st[i].done % k->param;
        pull(x, k->kid0, out, count, NULL);
        tf_prog_scan_lag_apply(k->kind, k->width, x->st[i].buf, k->param, &at, out, out, count);
        return;
    }
    size_t start = 0;
    if (x->st[i].done == 0 && count) {
        out[0] = x->st[i].carry = k->param;
        start = 1;
    }
    pull(x, k->kid0, out + start, count - start, NULL);
    tf_prog_scan_apply(k->kind, k->width, &x->st[i].carry, out + start, out + start, count - start);
}

static void pull_merge(executor *x, unsigned i, uint64_t *out, size_t count)
{
    const tf_prog_node *k = &x->p->node[i];
    unsigned shift = k->width;
    memset(out, 0, count * sizeof *out);
    for (unsigned c = 0; c < k->n_kids; c++) {
        const tf_prog_node *kid = &x->p->node[k->kid0 + c];
        uint64_t *field = x->st[i].buf + (size_t)c * BLOCK;
        const uint64_t *ctx = NULL;
        if (kid->op == TF_PROG_LIT && x->lit[k->kid0 + c].ctx_sibling)
            ctx = x->st[i].buf + (size_t)(x->lit[k->kid0 + c].ctx_sibling - 1) * BLOCK;
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
    x->st[i].done += count;
}

/* Opens every literal, before any output. */
static int open_literals(executor *x, tf_error *e)
{
    const tf_prog *p = x->p;
    for (unsigned i = 0; i < p->n_nodes; i++) {
        x->opened = i + 1; /* a failed open leaves its reader to close */
        if (p->node[i].op == TF_PROG_LIT && tf_prog_lit_open_node(&x->lit[i], p, i, e) < 0)
            return -1;
    }
    return 0;
}

/* Allocates the general executor's buffers, before any output. */
static int alloc_buffers(executor *x, tf_error *e)
{
    const tf_prog *p = x->p;
    for (unsigned i = 0; i < p->n_nodes; i++) {
        const tf_prog_node *k = &p->node[i];
        const bool ring = k->op == TF_PROG_SCAN && tf_prog_scan_lagged(k->kind);
        size_t words = k->op == TF_PROG_MERGE ? (size_t)k->n_kids * BLOCK
                       : tf_prog_holds_words(k->op, k->kind) ? (size_t)k->param : 0;
        if (!words)
            continue;
        /* a lagged scan's ring starts as zeros: q(0, P[i]) = P[i] are its
         * first m words */
        x->st[i].buf = ring ? calloc(words, sizeof(uint64_t)) : malloc(words * sizeof(uint64_t));
        if (!x->st[i].buf)
            return tf_fail(e, ENOMEM, "prog: out of memory executing a program");
    }
    return 0;
}

/* ---- the common shape, fast ----
 * A merge of literals and constants into words of at most 32 bits (the
 * IEEE fields or byte planes of almost every float tensor), at the root
 * or under a chain of maps, runs on 32-bit fields: each literal decodes a
 * block straight into its field, and the words are assembled (mapped)
 * and stored in one pass. The same bytes as the general executor, which
 * the tests check. */

/* Whether the program has that shape; *m: the merge's node. */
static bool flat_merge(const executor *x, unsigned *m)
{
    const tf_prog *p = x->p;
    *m = 0;
    while (p->node[*m].op == TF_PROG_MAP)
        *m = p->node[*m].kid0;
    const tf_prog_node *merge = &p->node[*m];
    if (merge->op != TF_PROG_MERGE || merge->width > 32)
        return false;
    for (unsigned c = 0; c < merge->n_kids; c++) {
        const tf_prog_node *kid = &p->node[merge->kid0 + c];
        if (kid->op == TF_PROG_LIT ? !tf_prog_lit_narrow(&x->lit[merge->kid0 + c])
                                   : kid->op != TF_PROG_CONST)
            return false;
    }
    return true;
}

/* Groups of this many words run with a constant trip count, which the
 * compiler vectorizes at -O2 (it does not, a loop of any count). */
#define GROUP 16

/* Stores count words of `bytes` (1, 2 or 4) bytes little-endian. */
static void store32(const uint32_t *restrict word, size_t count, unsigned bytes,
                    uint8_t *restrict dst)
{
    size_t i = 0;
#define STORE_GROUPS(b)                                   \
    for (; i + GROUP <= count; i += GROUP)                \
        for (unsigned k = 0; k < GROUP; k++)              \
            tf_le_put(dst + (b) * (i + k), word[i + k], b)
    switch (bytes) { /* constant widths, for the compiler */
    case 1: STORE_GROUPS(1); break;
    case 2: STORE_GROUPS(2); break;
    case 4: STORE_GROUPS(4); break;
    }
#undef STORE_GROUPS
    for (; i < count; i++)
        tf_le_put(dst + bytes * i, word[i], bytes);
}

/* A block's fields: field c in slot c of `stride` 32-bit words (the
 * block's length, whole groups), as 32-bit words, or as bytes (its
 * first stride bytes) where byte[c]. */
typedef struct {
    uint32_t *slot;
    size_t stride;
    unsigned n_kids, shift[TF_PROG_MAX_ARITY];
    bool byte[TF_PROG_MAX_ARITY];
} fields;

static uint32_t *field_words(const fields *f, unsigned c)
{
    return f->slot + (size_t)c * f->stride;
}

static const uint8_t *field_bytes(const fields *f, unsigned c)
{
    return (const uint8_t *)field_words(f, c);
}

/* word[j] = the OR of field c's f_c[j] << shift[c], over whole groups:
 * fields and words are a stride long, a multiple of GROUP, and what lies
 * past count is never stored. */
static void merge32(const fields *fs, uint32_t *restrict word, size_t count)
{
    for (size_t i = 0; i < count; i += GROUP)
        for (unsigned k = 0; k < GROUP; k++)
            word[i + k] = 0;
    for (unsigned c = 0; c < fs->n_kids; c++) {
        const unsigned shift = fs->shift[c];
        if (fs->byte[c]) {
            const uint8_t *restrict f = field_bytes(fs, c);
            for (size_t i = 0; i < count; i += GROUP)
                for (unsigned k = 0; k < GROUP; k++)
                    word[i + k] |= (uint32_t)f[i + k] << shift;
        } else {
            const uint32_t *restrict f = field_words(fs, c);
            for (size_t i = 0; i < count; i += GROUP)
                for (unsigned k = 0; k < GROUP; k++)
                    word[i + k] |= f[i + k] << shift;
        }
    }
}

#ifdef TF_X86_SIMD
/* The fields of a block split by kind, each with its shift count. */
typedef struct {
    const uint8_t *byte[TF_PROG_MAX_ARITY];
    const uint32_t *word[TF_PROG_MAX_ARITY];
    __m128i byte_shift[TF_PROG_MAX_ARITY], word_shift[TF_PROG_MAX_ARITY];
} avx2_fields;

/* The words of 8 positions from nb byte fields and nw word fields. */
TF_AVX2_INLINE __m256i avx2_word8(const avx2_fields *f, unsigned nb, unsigned nw, size_t i)
{
    __m256i w = _mm256_setzero_si256();
    for (unsigned c = 0; c < nb; c++) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(f->byte[c] + i)));
        w = _mm256_or_si256(w, _mm256_sll_epi32(v, f->byte_shift[c]));
    }
    for (unsigned c = 0; c < nw; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(f->word[c] + i));
        w = _mm256_or_si256(w, _mm256_sll_epi32(v, f->word_shift[c]));
    }
    return w;
}

/* merge32 and store32 in one pass, for words of 2 or 4 bytes; returns
 * how many words it stored (whole groups of 16). Inlined for the usual
 * numbers of fields of each kind, whose loops the compiler unrolls. */
TF_AVX2_INLINE size_t avx2_assemble_n(const avx2_fields *f, unsigned nb, unsigned nw, size_t count,
                                      unsigned bytes, uint8_t *dst)
{
    size_t i = 0;
    for (; i + 16 <= count && bytes == 4; i += 16) {
        _mm256_storeu_si256((__m256i *)(dst + 4 * i), avx2_word8(f, nb, nw, i));
        _mm256_storeu_si256((__m256i *)(dst + 4 * i + 32), avx2_word8(f, nb, nw, i + 8));
    }
    for (; i + 16 <= count && bytes == 2; i += 16) {
        __m256i lo = avx2_word8(f, nb, nw, i), hi = avx2_word8(f, nb, nw, i + 8);
        /* words of 16 bits: packing saturates nothing */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
        _mm256_storeu_si256((__m256i *)(dst + 2 * i), packed);
    }
    return i;
}

TF_AVX2_FUNCTION size_t avx2_assemble(const fields *fs, size_t count, unsigned bytes,
                                      uint8_t *dst)
{
    avx2_fields f;
    unsigned nb = 0, nw = 0;
    for (unsigned c = 0; c < fs->n_kids; c++) {
        __m128i shift = _mm_cvtsi32_si128((int)fs->shift[c]);
        if (fs->byte[c]) {
            f.byte[nb] = field_bytes(fs, c);
            f.byte_shift[nb++] = shift;
        } else {
            f.word[nw] = field_words(fs, c);
            f.word_shift[nw++] = shift;
        }
    }
#define ASSEMBLE_CASE(b, w) \
    if (nb == (b) && nw == (w)) \
        return avx2_assemble_n(&f, b, w, count, bytes, dst);
    ASSEMBLE_CASE(3, 0) /* bf16, f16: sign, exponent, mantissa */
    ASSEMBLE_CASE(2, 1) /* f32: sign, exponent; mantissa */
    ASSEMBLE_CASE(3, 1)
    ASSEMBLE_CASE(2, 0)
    ASSEMBLE_CASE(1, 1)
#undef ASSEMBLE_CASE
    return avx2_assemble_n(&f, nb, nw, count, bytes, dst);
}
#endif

/* The words of the fields, stored as `bytes` bytes each. */
static void assemble(const fields *field, uint32_t *word, size_t count, unsigned bytes,
                     uint8_t *dst, tf_simd_level simd)
{
    size_t done = 0;
#ifdef TF_X86_SIMD
    if (simd >= TF_SIMD_AVX2 && bytes >= 2)
        done = avx2_assemble(field, count, bytes, dst);
#else
    (void)simd;
#endif
    if (done == count)
        return;
    merge32(field, word, count);
    store32(word + done, count - done, bytes, dst + done * bytes);
}

/* The maps above the merge m, innermost first, on the block's words. */
static void apply_maps(const tf_prog *p, unsigned m, const uint32_t *word, uint64_t *wide,
                       size_t count)
{
    for (size_t j = 0; j < count; j++)
        wide[j] = word[j];
    for (unsigned i = m; i != 0;) {
        i = p->node[i].parent;
        const tf_prog_node *k = &p->node[i];
        tf_prog_map_apply(k->kind, k->param, k->width, wide, count);
    }
}

/* wide: a block's words for the maps. */
static int run_flat(executor *x, unsigned m, uint8_t *dst, uint64_t *wide, tf_error *e)
{
    const tf_prog_node *merge = &x->p->node[m];
    const unsigned bytes = merge->width / 8, n_kids = merge->n_kids;
    const tf_simd_level simd = tf_simd_level_get();
    /* slots: the kids' fields of the block, the words, and a source's
     * words widened for a rANS literal's contexts (not cleared: what lies
     * past a block's count is computed on, never stored) */
    const size_t block = merge->n < BLOCK ? (size_t)merge->n : BLOCK;
    fields fs = { .n_kids = n_kids, .stride = (block + GROUP - 1) / GROUP * GROUP };
    fs.slot = malloc(((size_t)n_kids + 2) * fs.stride * sizeof *fs.slot);
    if (!fs.slot)
        return tf_fail(e, ENOMEM, "prog: out of memory executing a program");
    uint32_t *word = field_words(&fs, n_kids), *ctx = field_words(&fs, n_kids + 1);
    unsigned left = merge->width;
    for (unsigned c = 0; c < n_kids; c++) {
        unsigned i = merge->kid0 + c;
        fs.shift[c] = left -= x->p->node[i].width;
        fs.byte[c] = x->p->node[i].op == TF_PROG_LIT && tf_prog_lit_bytes(&x->lit[i]);
    }
    for (uint64_t at = 0; at < merge->n; at += BLOCK) {
        size_t count = merge->n - at < BLOCK ? (size_t)(merge->n - at) : BLOCK;
        for (unsigned c = 0; c < n_kids; c++) {
            unsigned i = merge->kid0 + c;
            const tf_prog_node *kid = &x->p->node[i];
            uint32_t *f = field_words(&fs, c);
            if (kid->op == TF_PROG_CONST) {
                for (size_t j = 0; j < count; j++)
                    f[j] = (uint32_t)kid->param;
                continue;
            }
            const unsigned src = x->lit[i].ctx_sibling;
            const uint32_t *source = NULL;
            if (src && fs.byte[src - 1]) {
                for (size_t j = 0; j < count; j++)
                    ctx[j] = field_bytes(&fs, src - 1)[j];
                source = ctx;
            } else if (src) {
                source = field_words(&fs, src - 1);
            }
            if (fs.byte[c])
                tf_prog_lit_read8(&x->lit[i], (uint8_t *)f, count, source);
            else
                tf_prog_lit_read32(&x->lit[i], f, count, source);
        }
        if (m == 0) {
            assemble(&fs, word, count, bytes, dst + at * bytes, simd);
        } else {
            merge32(&fs, word, count);
            apply_maps(x->p, m, word, wide, count);
            tf_prog_words_store(wide, count, bytes, dst + at * bytes);
        }
    }
    free(fs.slot);
    return 0;
}

static int exec(const tf_prog *p, uint8_t *dst, bool fast, tf_error *e)
{
    const tf_prog_node *root = &p->node[0];
    if (root->width % 8)
        return tf_fail(e, EINVAL, "prog: root words of %u bits", root->width);
    executor x; /* not cleared whole: a chunk's decoding starts as fast as it can */
    x.p = p;
    x.opened = 0;
    memset(x.st, 0, p->n_nodes * sizeof x.st[0]);
    uint64_t *block = NULL; /* a block of the root's words, but for a bare merge */
    int rc = -1;
    unsigned m = 0;
    x.lit = malloc(p->n_nodes * sizeof *x.lit); /* each literal's set up as it opens */
    if (!x.lit) {
        tf_fail(e, ENOMEM, "prog: out of memory executing a program");
        goto done;
    }
    if (open_literals(&x, e) < 0)
        goto done;
    const bool flat = fast && flat_merge(&x, &m);
    if (!flat || m != 0) {
        block = malloc((root->n < BLOCK ? (size_t)root->n + 1 : BLOCK) * sizeof *block);
        if (!block) {
            tf_fail(e, ENOMEM, "prog: out of memory executing a program");
            goto done;
        }
    }
    if (!flat && alloc_buffers(&x, e) < 0)
        goto done;
    const unsigned bytes = root->width / 8;
    if (flat) {
        if (run_flat(&x, m, dst, block, e) < 0)
            goto done;
    } else {
        for (uint64_t at = 0; at < root->n; at += BLOCK) {
            size_t count = root->n - at < BLOCK ? (size_t)(root->n - at) : BLOCK;
            pull(&x, 0, block, count, NULL);
            tf_prog_words_store(block, count, bytes, dst + at * bytes);
        }
    }
    rc = 0;
    for (unsigned i = 0; i < p->n_nodes && rc == 0; i++)
        if (p->node[i].op == TF_PROG_LIT)
            rc = tf_prog_lit_finish(&x.lit[i], e);
done:
    for (unsigned i = 0; i < p->n_nodes; i++) {
        if (i < x.opened && p->node[i].op == TF_PROG_LIT)
            tf_prog_lit_close(&x.lit[i]);
        free(x.st[i].buf);
    }
    free(x.lit);
    free(block);
    return rc;
}

int tf_prog_exec(const tf_prog *p, uint8_t *dst, tf_error *e)
{
    return exec(p, dst, true, e);
}

int tf_prog_exec_general(const tf_prog *p, uint8_t *dst, tf_error *e)
{
    return exec(p, dst, false, e);
}
