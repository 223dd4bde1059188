#include "format/blob_tree.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LEAF_BYTES (TF_BLOB_LEAF_RECORDS * TF_BLOB_RECORD_SIZE)
#define NODE_BYTES (TF_BLOB_FANOUT * TF_PAGE_REF_SIZE)
/* log2 of the fanout: a node's children are the next 7 bits of the leaf
 * index. */
#define FANOUT_BITS 7
_Static_assert(1u << FANOUT_BITS == TF_BLOB_FANOUT, "fanout is a power of two");
_Static_assert(TF_PAGE_HEADER_SIZE + LEAF_BYTES <= TF_PAGE_MAX, "a leaf fits a page");

/* A cached page: decoded, keyed by its offset (pages are immutable). */
typedef struct {
    uint64_t off; /* 0: empty (no page lies at offset 0, the superblock's) */
    uint64_t used; /* when last looked up: the least recent of a set goes */
    tf_page page;
} cached;

/* The cache is set-associative: a page may sit in any of the WAYS slots
 * of the set its offset hashes to (a direct-mapped cache thrashed on
 * the pages that collide: a third of them at half its capacity). */
#define WAYS 4

/* A leaf with staged changes: its records as they will be written. */
typedef struct {
    uint64_t idx;
    uint32_t count;
    uint8_t rec[LEAF_BYTES];
} staged_leaf;

struct tf_blob_tree {
    tf_page_source src;
    tf_page_ref root;
    uint64_t n;        /* records at root */
    unsigned height;   /* of the tree at root */
    pthread_mutex_t lock; /* guards the cache */
    cached *cache;     /* nsets * WAYS */
    size_t nsets;
    uint64_t clock;    /* lookups so far */
    staged_leaf **staged; /* by idx, ascending */
    size_t nstaged, staged_cap;
    uint64_t staged_n; /* records once the staged changes are written */
};

static void new_root(tf_blob_tree *t, const tf_page_ref *root, uint64_t n, unsigned height)
{
    t->root = n ? *root : (tf_page_ref){ 0 };
    t->n = n;
    t->height = height;
}

/* ---- records ---- */

static void record_put(uint8_t *p, const tf_blob *b, tf_blob_marks marks)
{
    memcpy(p, b->id.b, 16);
    tf_le64_put(p + 16, b->offset);
    tf_le64_put(p + 24, b->enc_len);
    tf_le64_put(p + 32, b->raw_len);
    tf_le64_put(p + 40, b->enc_hash);
    tf_le64_put(p + 48, b->ref);
    tf_le64_put(p + 56, b->model);
    p[64] = b->codec;
    p[65] = b->dtype;
    p[66] = marks.flags;
    p[67] = marks.flags & TF_BLOB_REDIRECTED ? marks.above : 0;
}

static int record_get(const uint8_t *p, uint64_t slot, tf_blob *b, tf_blob_marks *marks,
                      tf_error *e)
{
    if (p[66] & ~TF_BLOB_FLAGS_KNOWN || (p[67] && !(p[66] & TF_BLOB_REDIRECTED)))
        return tf_fail(e, EIO, "blob %llu: record has unknown flags", (unsigned long long)slot);
    memcpy(b->id.b, p, 16);
    b->offset = tf_le64_get(p + 16);
    b->enc_len = tf_le64_get(p + 24);
    b->raw_len = tf_le64_get(p + 32);
    b->enc_hash = tf_le64_get(p + 40);
    b->ref = tf_le64_get(p + 48);
    b->model = tf_le64_get(p + 56);
    b->codec = p[64];
    b->dtype = p[65];
    if (marks)
        *marks = (tf_blob_marks){ p[66], p[67] };
    return 0;
}

/* A leaf is stored field by field (every record's id, then every
 * offset, ...): values alike lie side by side, which zstd compresses
 * better than whole records one after another. The cache holds leaves
 * record by record. The fields' sizes, in record order: */
static const uint8_t field_size[] = { 16, 8, 8, 8, 8, 8, 8, 1, 1, 1, 1 };

/* Copies one field of n records between rows and its column; sz is a
 * constant where it is inlined, so each copy is a move. */
static inline void copy_field(uint8_t *rows, uint8_t *column, uint32_t n, size_t sz,
                              bool to_fields)
{
    for (uint32_t r = 0; r < n; r++, rows += TF_BLOB_RECORD_SIZE, column += sz)
        if (to_fields)
            memcpy(column, rows, sz);
        else
            memcpy(rows, column, sz);
}

/* Converts n records between record order (rows) and field order. */
static void transpose(const uint8_t *from, uint8_t *to, uint32_t n, bool to_fields)
{
    uint8_t *rows = (uint8_t *)(to_fields ? from : to), *cols = (uint8_t *)(to_fields ? to : from);
    size_t in_record = 0;
    for (size_t f = 0; f < sizeof field_size; f++) {
        switch (field_size[f]) {
        case 16: copy_field(rows + in_record, cols, n, 16, to_fields); break;
        case 8: copy_field(rows + in_record, cols, n, 8, to_fields); break;
        default: copy_field(rows + in_record, cols, n, 1, to_fields); break;
        }
        in_record += field_size[f];
        cols += (size_t)n * field_size[f];
    }
}

/* ---- shape ---- */

static uint64_t leaves_of(uint64_t n)
{
    return n / TF_BLOB_LEAF_RECORDS + (n % TF_BLOB_LEAF_RECORDS != 0);
}

/* Nodes at level k of a tree of n records (level 0: leaves). */
static uint64_t nodes_at(unsigned k, uint64_t n)
{
    uint64_t m = leaves_of(n);
    for (unsigned i = 0; i < k; i++)
        m = (m >> FANOUT_BITS) + ((m & (TF_BLOB_FANOUT - 1)) != 0);
    return m;
}

unsigned tf_blob_tree_height(uint64_t n)
{
    unsigned h = 0;
    while (nodes_at(h, n) > 1)
        h++;
    return h;
}

/* Records of leaf j, or children of node p at level k >= 1. */
static uint32_t count_at(unsigned k, uint64_t p, uint64_t n)
{
    uint64_t below = k ? nodes_at(k - 1, n) : n;
    uint64_t per = k ? TF_BLOB_FANOUT : TF_BLOB_LEAF_RECORDS;
    uint64_t left = below - p * per;
    return (uint32_t)(left < per ? left : per);
}

/* ---- the cache ---- */

tf_blob_tree *tf_blob_tree_new(const tf_page_source *src, const tf_page_ref *root,
                               uint64_t nblobs, size_t cache_bytes)
{
    tf_blob_tree *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->nsets = cache_bytes / (TF_PAGE_HEADER_SIZE + LEAF_BYTES) / WAYS;
    t->nsets = t->nsets ? t->nsets : 1;
    t->cache = calloc(t->nsets * WAYS, sizeof *t->cache);
    if (!t->cache) {
        free(t);
        return NULL;
    }
    t->src = *src;
    new_root(t, root, nblobs, tf_blob_tree_height(nblobs));
    t->staged_n = nblobs;
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

void tf_blob_tree_discard(tf_blob_tree *t)
{
    for (size_t i = 0; i < t->nstaged; i++)
        free(t->staged[i]);
    t->nstaged = 0;
    t->staged_n = t->n;
}

void tf_blob_tree_reroot(tf_blob_tree *t, const tf_page_ref *root, uint64_t nblobs)
{
    tf_blob_tree_discard(t);
    new_root(t, root, nblobs, tf_blob_tree_height(nblobs));
    t->staged_n = nblobs;
}

void tf_blob_tree_free(tf_blob_tree *t)
{
    if (!t)
        return;
    tf_blob_tree_discard(t);
    free(t->staged);
    for (size_t i = 0; i < t->nsets * WAYS; i++)
        tf_page_free(&t->cache[i].page);
    free(t->cache);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

uint64_t tf_blob_tree_count(const tf_blob_tree *t)
{
    return t->staged_n;
}

/* The slot holding the page at off, or, when none does (*hit false),
 * the one to replace: empty, or the least recently used. */
static cached *cache_slot(tf_blob_tree *t, uint64_t off, bool *hit)
{
    cached *set = &t->cache[(size_t)((off * 0x9e3779b97f4a7c15u) >> 20) % t->nsets * WAYS];
    cached *victim = set;
    for (unsigned w = 0; w < WAYS; w++) {
        if (set[w].off == off) {
            *hit = true;
            set[w].used = ++t->clock;
            return &set[w];
        }
        if (set[w].used < victim->used)
            victim = &set[w];
    }
    *hit = false;
    return victim;
}

/* Whether page pg may stand at level k, position p: a page reached by
 * two paths must fit both. */
static int check_shape(const tf_page *pg, const tf_page_ref *ref, unsigned k, uint64_t p,
                       uint64_t n, tf_error *e)
{
    uint32_t want = count_at(k, p, n);
    size_t size = k ? TF_PAGE_REF_SIZE : TF_BLOB_RECORD_SIZE;
    if (pg->level != k || pg->count != want || pg->len != (size_t)want * size)
        return tf_fail(e, EIO, "blob table: page at %llu holds %u entries in %zu bytes, "
                       "expected %u", (unsigned long long)ref->off, pg->count, pg->len, want);
    return 0;
}

/* Copies `len` bytes at `at` of the page ref names (level k, position p
 * of the tree at root) into out, reading the page on a miss. */
static int copy_from(tf_blob_tree *t, const tf_page_ref *ref, unsigned k, uint64_t p,
                     size_t at, void *out, size_t len, tf_error *e)
{
    const tf_page_kind kind = k ? TF_PAGE_BLOB_NODE : TF_PAGE_BLOB_LEAF;
    pthread_mutex_lock(&t->lock);
    bool hit;
    cached *c = cache_slot(t, ref->off, &hit);
    hit = hit && c->page.kind == kind;
    int rc = hit ? check_shape(&c->page, ref, k, p, t->n, e) : 0;
    if (hit && rc == 0)
        memcpy(out, c->page.data + at, len);
    pthread_mutex_unlock(&t->lock);
    if (hit)
        return rc;
    /* Read without the lock: other threads' hits go on meanwhile. */
    tf_page pg;
    if (tf_page_read(&t->src, ref, kind, k, &pg, e) < 0)
        return -1;
    if (check_shape(&pg, ref, k, p, t->n, e) < 0) {
        tf_page_free(&pg);
        return -1;
    }
    if (!k) {
        uint8_t *rows = malloc(pg.len ? pg.len : 1);
        if (!rows) {
            tf_page_free(&pg);
            return tf_fail(e, ENOMEM, "blob table: out of memory");
        }
        transpose(pg.data, rows, pg.count, false);
        free(pg.data);
        pg.data = rows;
    }
    memcpy(out, pg.data + at, len);
    pthread_mutex_lock(&t->lock);
    c = cache_slot(t, ref->off, &hit);
    tf_page_free(&c->page);
    c->off = ref->off;
    c->used = ++t->clock;
    c->page = pg;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

/* The reference of node (k, p) in the tree at root (k <= height). */
static int node_ref(tf_blob_tree *t, unsigned k, uint64_t p, tf_page_ref *out, tf_error *e)
{
    tf_page_ref ref = t->root;
    for (unsigned lvl = t->height; lvl > k; lvl--) {
        unsigned shift = FANOUT_BITS * (lvl - 1 - k);
        uint64_t child = (p >> shift) & (TF_BLOB_FANOUT - 1);
        uint8_t raw[TF_PAGE_REF_SIZE];
        if (copy_from(t, &ref, lvl, p >> (shift + FANOUT_BITS), child * TF_PAGE_REF_SIZE, raw,
                      sizeof raw, e) < 0)
            return -1;
        ref = tf_page_ref_get(raw);
    }
    *out = ref;
    return 0;
}

/* The page of level k, position p at ref when the cache holds it, of the
 * shape it must have (under the lock). */
static const tf_page *cached_page(tf_blob_tree *t, const tf_page_ref *ref, unsigned k, uint64_t p)
{
    bool hit;
    cached *c = cache_slot(t, ref->off, &hit);
    tf_error ignored; /* the slow path reports it */
    if (!hit || c->page.kind != (k ? TF_PAGE_BLOB_NODE : TF_PAGE_BLOB_LEAF) ||
        check_shape(&c->page, ref, k, p, t->n, &ignored) < 0)
        return NULL;
    return &c->page;
}

/* Record slot, encoded, into rec when the cache holds its path from the
 * root: one lock for the walk, where a lookup that misses takes one a
 * level. */
static bool cached_record(tf_blob_tree *t, uint64_t slot, uint8_t *rec)
{
    uint64_t leaf = slot / TF_BLOB_LEAF_RECORDS;
    tf_page_ref ref = t->root;
    pthread_mutex_lock(&t->lock);
    const tf_page *pg = NULL;
    for (unsigned lvl = t->height; lvl > 0; lvl--) {
        unsigned shift = FANOUT_BITS * (lvl - 1);
        if (!(pg = cached_page(t, &ref, lvl, leaf >> (shift + FANOUT_BITS))))
            break;
        ref = tf_page_ref_get(pg->data + ((leaf >> shift) & (TF_BLOB_FANOUT - 1)) *
                                             TF_PAGE_REF_SIZE);
    }
    bool hit = (pg || !t->height) && (pg = cached_page(t, &ref, 0, leaf));
    if (hit)
        memcpy(rec, pg->data + (size_t)(slot % TF_BLOB_LEAF_RECORDS) * TF_BLOB_RECORD_SIZE,
               TF_BLOB_RECORD_SIZE);
    pthread_mutex_unlock(&t->lock);
    return hit;
}

/* Record slot of the tree at root, encoded, into rec. */
static int stored_record(tf_blob_tree *t, uint64_t slot, uint8_t *rec, tf_error *e)
{
    if (cached_record(t, slot, rec))
        return 0;
    uint64_t leaf = slot / TF_BLOB_LEAF_RECORDS;
    tf_page_ref ref;
    if (node_ref(t, 0, leaf, &ref, e) < 0)
        return -1;
    return copy_from(t, &ref, 0, leaf, (size_t)(slot % TF_BLOB_LEAF_RECORDS) * TF_BLOB_RECORD_SIZE,
                     rec, TF_BLOB_RECORD_SIZE, e);
}

/* Calls visit with each page under node (k, p), whose reference is ref,
 * the node first, its children in order; pages stored before offset
 * `since` (0: none), and so those under them, are passed over. */
static int walk_under(tf_blob_tree *t, const tf_page_ref *ref, unsigned k, uint64_t p,
                      uint64_t since,
                      int (*visit)(void *ctx, const tf_page_ref *ref, unsigned k, uint64_t p,
                                   tf_error *e),
                      void *ctx, tf_error *e)
{
    if (ref->off < since)
        return 0;
    if (visit(ctx, ref, k, p, e) < 0)
        return -1;
    if (!k)
        return 0;
    uint32_t n = count_at(k, p, t->n);
    uint8_t refs[NODE_BYTES];
    if (copy_from(t, ref, k, p, 0, refs, (size_t)n * TF_PAGE_REF_SIZE, e) < 0)
        return -1;
    for (uint32_t c = 0; c < n; c++) {
        tf_page_ref child = tf_page_ref_get(refs + (size_t)c * TF_PAGE_REF_SIZE);
        if (walk_under(t, &child, k - 1, (p << FANOUT_BITS) + c, since, visit, ctx, e) < 0)
            return -1;
    }
    return 0;
}

typedef struct {
    tf_blob_tree *t;
    int (*pages)(void *arg, uint64_t off, uint64_t len, tf_error *e);
    tf_blob_record_fn records;
    void *arg;
    bool cached; /* leaves read through the cache */
} walk_ctx;

static int visit_page(void *ctx, const tf_page_ref *ref, unsigned k, uint64_t p, tf_error *e)
{
    (void)k;
    (void)p;
    const walk_ctx *w = ctx;
    return w->pages(w->arg, ref->off, ref->len, e);
}

int tf_blob_tree_pages(tf_blob_tree *t,
                       int (*fn)(void *arg, uint64_t off, uint64_t len, tf_error *e), void *arg,
                       tf_error *e)
{
    walk_ctx w = { .t = t, .pages = fn, .arg = arg };
    return t->n ? walk_under(t, &t->root, t->height, 0, 0, visit_page, &w, e) : 0;
}

/* Calls the records' callback with each record of leaf p, read through
 * the cache or past it (w->cached). */
static int visit_records(void *ctx, const tf_page_ref *ref, unsigned k, uint64_t p, tf_error *e)
{
    const walk_ctx *w = ctx;
    if (k)
        return 0;
    uint8_t rows[LEAF_BYTES];
    uint32_t count = count_at(0, p, w->t->n);
    int rc;
    if (w->cached) {
        rc = copy_from(w->t, ref, 0, p, 0, rows, (size_t)count * TF_BLOB_RECORD_SIZE, e);
    } else {
        tf_page pg;
        if (tf_page_read(&w->t->src, ref, TF_PAGE_BLOB_LEAF, 0, &pg, e) < 0)
            return -1;
        rc = check_shape(&pg, ref, 0, p, w->t->n, e);
        if (rc == 0)
            transpose(pg.data, rows, pg.count, false);
        tf_page_free(&pg);
    }
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        uint64_t slot = p * TF_BLOB_LEAF_RECORDS + i;
        tf_blob b;
        tf_blob_marks marks;
        rc = record_get(rows + (size_t)i * TF_BLOB_RECORD_SIZE, slot, &b, &marks, e);
        if (rc == 0)
            rc = w->records(w->arg, slot, &b, marks, e);
    }
    return rc;
}

int tf_blob_tree_scan(tf_blob_tree *t, tf_blob_record_fn fn, void *arg, tf_error *e)
{
    return tf_blob_tree_scan_since(t, 0, fn, arg, e);
}

int tf_blob_tree_scan_since(tf_blob_tree *t, uint64_t since, tf_blob_record_fn fn, void *arg,
                            tf_error *e)
{
    /* A scan of the whole tree passes the cache by; one since an offset
     * reads a few leaves, which lookups then want. */
    walk_ctx w = { .t = t, .records = fn, .arg = arg, .cached = since > 0 };
    return t->n ? walk_under(t, &t->root, t->height, 0, since, visit_records, &w, e) : 0;
}

/* ---- staged changes ---- */

/* The staged leaf j, or where it would go (*pos). */
static staged_leaf *find_staged(const tf_blob_tree *t, uint64_t j, size_t *pos)
{
    size_t lo = 0, hi = t->nstaged;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->staged[mid]->idx < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    *pos = lo;
    return lo < t->nstaged && t->staged[lo]->idx == j ? t->staged[lo] : NULL;
}

int tf_blob_tree_get(tf_blob_tree *t, uint64_t slot, tf_blob *b, tf_blob_marks *marks,
                     tf_error *e)
{
    if (slot >= t->staged_n)
        return tf_fail(e, EIO, "blob %llu: not in the catalog (%llu blobs)",
                       (unsigned long long)slot, (unsigned long long)t->staged_n);
    size_t pos;
    const staged_leaf *s = t->nstaged ? find_staged(t, slot / TF_BLOB_LEAF_RECORDS, &pos) : NULL;
    if (s)
        return record_get(s->rec + (slot % TF_BLOB_LEAF_RECORDS) * TF_BLOB_RECORD_SIZE, slot, b,
                          marks, e);
    uint8_t rec[TF_BLOB_RECORD_SIZE];
    if (stored_record(t, slot, rec, e) < 0)
        return -1;
    return record_get(rec, slot, b, marks, e);
}

/* Stages leaf j, with its stored records when it has some. */
static staged_leaf *stage_leaf(tf_blob_tree *t, uint64_t j, tf_error *e)
{
    size_t pos;
    staged_leaf *s = find_staged(t, j, &pos);
    if (s)
        return s;
    if (t->nstaged == t->staged_cap) {
        size_t cap = t->staged_cap ? 2 * t->staged_cap : 16;
        staged_leaf **a = realloc(t->staged, cap * sizeof *a);
        if (!a)
            goto oom;
        t->staged = a;
        t->staged_cap = cap;
    }
    s = malloc(sizeof *s);
    if (!s)
        goto oom;
    s->idx = j;
    s->count = j < leaves_of(t->n) ? count_at(0, j, t->n) : 0;
    if (s->count) {
        tf_page_ref ref;
        if (node_ref(t, 0, j, &ref, e) < 0 ||
            copy_from(t, &ref, 0, j, 0, s->rec, (size_t)s->count * TF_BLOB_RECORD_SIZE, e) < 0) {
            free(s);
            return NULL;
        }
    }
    memmove(t->staged + pos + 1, t->staged + pos, (t->nstaged - pos) * sizeof *t->staged);
    t->staged[pos] = s;
    t->nstaged++;
    return s;
oom:
    tf_fail(e, ENOMEM, "blob table: out of memory");
    return NULL;
}

int tf_blob_tree_set(tf_blob_tree *t, uint64_t slot, const tf_blob *b, tf_blob_marks marks,
                     tf_error *e)
{
    if (slot > t->staged_n || (marks.flags & ~TF_BLOB_FLAGS_KNOWN))
        return tf_fail(e, EINVAL, "blob %llu: cannot be set (%llu blobs)",
                       (unsigned long long)slot, (unsigned long long)t->staged_n);
    staged_leaf *s = stage_leaf(t, slot / TF_BLOB_LEAF_RECORDS, e);
    if (!s)
        return -1;
    unsigned i = (unsigned)(slot % TF_BLOB_LEAF_RECORDS);
    record_put(s->rec + (size_t)i * TF_BLOB_RECORD_SIZE, b, marks);
    if (slot == t->staged_n) {
        s->count = i + 1;
        t->staged_n++;
    }
    return 0;
}

/* ---- writing ---- */

/* A page written at some level: its position there and its reference. */
typedef struct {
    uint64_t idx;
    tf_page_ref ref;
} written;

/* Tells the sink that node (k, p) of the tree at root, if it has one,
 * is replaced. */
static int replace(tf_blob_tree *t, const tf_page_sink *sink, unsigned k, uint64_t p,
                   tf_error *e)
{
    if (!sink->replaced || k > t->height || p >= nodes_at(k, t->n))
        return 0;
    tf_page_ref old;
    return node_ref(t, k, p, &old, e) < 0 ? -1 : sink->replaced(sink->ctx, &old, e);
}

/* Writes the staged leaves, in order, into out. */
static int write_leaves(tf_blob_tree *t, const tf_page_sink *sink, written *out, tf_error *e)
{
    for (size_t i = 0; i < t->nstaged; i++) {
        const staged_leaf *s = t->staged[i];
        if (replace(t, sink, 0, s->idx, e) < 0)
            return -1;
        out[i].idx = s->idx;
        uint8_t fields[LEAF_BYTES];
        transpose(s->rec, fields, s->count, true);
        if (tf_page_write(sink, TF_PAGE_BLOB_LEAF, 0, s->count, fields,
                          (size_t)s->count * TF_BLOB_RECORD_SIZE, &out[i].ref, e) < 0)
            return -1;
    }
    return 0;
}

/* The children that node (k, p) of the new tree keeps from the tree at
 * root, into refs (set[i] tells which). */
static int kept_children(tf_blob_tree *t, unsigned k, uint64_t p, uint8_t *refs, bool *set,
                         tf_error *e)
{
    if (k <= t->height && p < nodes_at(k, t->n)) {
        tf_page_ref ref;
        uint32_t have = count_at(k, p, t->n);
        if (node_ref(t, k, p, &ref, e) < 0 ||
            copy_from(t, &ref, k, p, 0, refs, (size_t)have * TF_PAGE_REF_SIZE, e) < 0)
            return -1;
        memset(set, 1, have);
    } else if (k == t->height + 1 && p == 0 && t->n) {
        /* The tree grew a level: its old root is the first child. */
        tf_page_ref_put(refs, &t->root);
        set[0] = true;
    }
    return 0;
}

/* Writes the nodes of level k above the pages `below` (written at level
 * k - 1, in order), into `below` itself; *n becomes their number. */
static int write_level(tf_blob_tree *t, const tf_page_sink *sink, unsigned k, written *below,
                       size_t *n, tf_error *e)
{
    size_t out = 0;
    for (size_t i = 0; i < *n;) {
        uint64_t p = below[i].idx >> FANOUT_BITS;
        uint8_t refs[NODE_BYTES];
        bool set[TF_BLOB_FANOUT] = { false };
        if (kept_children(t, k, p, refs, set, e) < 0)
            return -1;
        for (; i < *n && below[i].idx >> FANOUT_BITS == p; i++) {
            unsigned c = (unsigned)(below[i].idx & (TF_BLOB_FANOUT - 1));
            tf_page_ref_put(refs + (size_t)c * TF_PAGE_REF_SIZE, &below[i].ref);
            set[c] = true;
        }
        uint32_t count = count_at(k, p, t->staged_n);
        for (uint32_t c = 0; c < count; c++)
            if (!set[c])
                return tf_fail(e, EIO, "blob table: node %llu of level %u lacks child %u",
                               (unsigned long long)p, k, c);
        below[out].idx = p;
        if (replace(t, sink, k, p, e) < 0)
            return -1;
        if (tf_page_write(sink, TF_PAGE_BLOB_NODE, k, count, refs,
                          (size_t)count * TF_PAGE_REF_SIZE, &below[out].ref, e) < 0)
            return -1;
        out++;
    }
    *n = out;
    return 0;
}

int tf_blob_tree_write(tf_blob_tree *t, const tf_page_sink *sink, tf_page_ref *root,
                       tf_error *e)
{
    if (!t->nstaged) {
        *root = t->root;
        return 0;
    }
    written *w = malloc(t->nstaged * sizeof *w);
    int rc = w ? write_leaves(t, sink, w, e) : tf_fail(e, ENOMEM, "blob table: out of memory");
    size_t n = t->nstaged;
    const unsigned height = tf_blob_tree_height(t->staged_n);
    for (unsigned k = 1; rc == 0 && k <= height; k++)
        rc = write_level(t, sink, k, w, &n, e);
    if (rc == 0) {
        *root = w[0].ref;
        new_root(t, root, t->staged_n, height);
    }
    free(w);
    tf_blob_tree_discard(t);
    return rc;
}
