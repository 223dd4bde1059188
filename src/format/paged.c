#include "format/paged.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format/entry_pages.h"

/* A leaf of entries: its page and its first path. */
typedef tf_entry_child leaf;

struct tf_paged {
    tf_container *c;
    bool lazy;            /* entries' bodies read when asked (tf_paged_body) */
    tf_page_source src;
    tf_page_sink sink;
    tf_root root;         /* the last commit's; seq 0: none */
    tf_blob_tree *blobs;
    leaf *leaves;         /* the last commit's, in path order */
    size_t nleaves;
    /* A commit staged (tf_paged_stage) and not yet done or undone. */
    tf_root staged_root;
    leaf *staged_leaves;
    size_t nstaged_leaves;
    uint64_t *replaced; /* (offset, length) of the pages it replaces */
    size_t nreplaced, replaced_cap;
};

/* ---- the container as a page source and sink ---- */

static int read_pages(void *ctx, uint64_t off, void *buf, size_t len, uint64_t hash,
                      tf_error *e)
{
    return tf_container_pread_checked(ctx, off, buf, len, hash, e);
}

static uint64_t pages_size(void *ctx)
{
    const tf_container *c = ctx;
    return c->end > c->file_size ? c->end : c->file_size;
}

static int append_pages(void *ctx, const uint8_t *p, size_t len, uint64_t *off, tf_error *e)
{
    return tf_container_append(((tf_paged *)ctx)->c, p, len, off, e);
}

static int note_replaced(void *ctx, const tf_page_ref *old, tf_error *e)
{
    tf_paged *p = ctx;
    if (p->nreplaced == p->replaced_cap) {
        size_t cap = p->replaced_cap ? 2 * p->replaced_cap : 64;
        uint64_t *a = realloc(p->replaced, 2 * cap * sizeof *a);
        if (!a)
            return tf_fail(e, ENOMEM, "out of memory");
        p->replaced = a;
        p->replaced_cap = cap;
    }
    p->replaced[2 * p->nreplaced] = old->off;
    p->replaced[2 * p->nreplaced + 1] = old->len;
    p->nreplaced++;
    return 0;
}

static int note_replaced_range(void *ctx, uint64_t off, uint64_t len, tf_error *e)
{
    return note_replaced(ctx, &(tf_page_ref){ .off = off, .len = (uint32_t)len }, e);
}

static void leaves_free(leaf *l, size_t n)
{
    tf_entry_children_free(l, n);
}

/* ---- reading the entries ---- */

/* The index of the first of the n entries of `after` (in path order) at
 * or past path (n: none). */
static size_t first_at(const tf_entry *after, size_t n, const char *path)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tf_path_cmp(after[mid].path, path) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct {
    tf_paged *p;
    uint64_t nblobs; /* of the commit read: its bodies name blobs below */
    const tf_entry *have; /* the last commit's (following) */
    size_t nhave;
    tf_entry *ents;
    size_t n, cap;
} entry_list;

/* Appends ent (taken; freed on failure), after the last in path order. */
static int push_entry(entry_list *l, tf_entry *ent, tf_error *e)
{
    if (l->n && tf_path_cmp(l->ents[l->n - 1].path, ent->path) >= 0) {
        tf_fail(e, EIO, "entries: \"%s\" out of order across leaves", ent->path);
        tf_entry_free(ent);
        return -1;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        tf_entry *a = realloc(l->ents, cap * sizeof *a);
        if (!a) {
            tf_entry_free(ent);
            return tf_fail(e, ENOMEM, "entries: out of memory");
        }
        l->ents = a;
        l->cap = cap;
    }
    l->ents[l->n++] = *ent;
    return 0;
}

static int keep_header(void *arg, tf_entry *ent, const tf_page_ref *body, tf_error *e)
{
    entry_list *l = arg;
    if (push_entry(l, ent, e) < 0)
        return -1;
    tf_entry *kept = &l->ents[l->n - 1];
    if (!tf_entry_has_body(kept->kind))
        return 0;
    if (l->p->lazy) {
        kept->body = *body;
        atomic_init(&kept->body_pending, true);
        return 0;
    }
    return tf_entry_body_read(&l->p->src, body, l->nblobs, l->p->c->chunk_shift, kept, e);
}

/* Reads the leaf lf, whose first path must be lf->first (NULL: the root
 * leaf, which nothing names; it is set). */
static int read_leaf(entry_list *l, leaf *lf, tf_error *e)
{
    tf_page pg;
    if (tf_page_read(&l->p->src, &lf->ref, TF_PAGE_ENTRY_LEAF, 0, &pg, e) < 0)
        return -1;
    size_t before = l->n;
    int rc = pg.count ? tf_entry_leaf_parse(&pg, keep_header, l, e)
                      : tf_fail(e, EIO, "entries: an empty leaf");
    tf_page_free(&pg);
    if (rc < 0)
        return -1;
    if (!lf->first)
        return (lf->first = strdup(l->ents[before].path)) ? 0
               : tf_fail(e, ENOMEM, "entries: out of memory");
    if (strcmp(l->ents[before].path, lf->first) != 0)
        return tf_fail(e, EIO, "entries: a leaf does not start where its node says");
    return 0;
}

/* The leaf of `leaves` whose range holds path: the last that starts at
 * or before it (the first holds everything before its start too). */
static size_t leaf_of(const leaf *leaves, size_t n, const char *path)
{
    size_t lo = 1, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tf_path_cmp(leaves[mid].first, path) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* The leaf of the last commit that leaf lf of the one read is, the
 * same page under the same first path (NULL: none). */
static const leaf *kept_leaf(const tf_paged *p, const leaf *lf)
{
    if (!lf->first || !p->nleaves)
        return NULL;
    const leaf *old = &p->leaves[leaf_of(p->leaves, p->nleaves, lf->first)];
    return old->first && strcmp(old->first, lf->first) == 0 && old->ref.off == lf->ref.off &&
                   old->ref.len == lf->ref.len && old->ref.hash == lf->ref.hash
               ? old
               : NULL;
}

/* Copies the entries of leaf `old` of the last commit from l->have. */
static int copy_leaf(entry_list *l, const leaf *old, tf_error *e)
{
    const tf_paged *p = l->p;
    size_t k = (size_t)(old - p->leaves);
    size_t from = k ? first_at(l->have, l->nhave, old->first) : 0;
    size_t to = k + 1 < p->nleaves ? first_at(l->have, l->nhave, p->leaves[k + 1].first)
                                   : l->nhave;
    if (from >= to || strcmp(l->have[from].path, old->first) != 0)
        return tf_fail(e, EIO, "entries: a leaf kept does not hold what it held");
    for (size_t i = from; i < to; i++) {
        tf_entry copy;
        if (tf_entry_clone(&l->have[i], NULL, &copy, e) < 0 || push_entry(l, &copy, e) < 0)
            return -1;
    }
    return 0;
}

/* Collects the leaves under the node at ref, of the given level, whose
 * first path must be `first` (NULL: the root, which names none). */
static int collect_leaves(tf_paged *p, const tf_page_ref *ref, unsigned level,
                          const char *first, leaf **out, size_t *n, size_t *cap, tf_error *e)
{
    tf_page pg;
    if (tf_page_read(&p->src, ref, TF_PAGE_ENTRY_NODE, level, &pg, e) < 0)
        return -1;
    tf_entry_child *kids;
    size_t nkids;
    int rc = tf_entry_node_parse(&pg, &kids, &nkids, e);
    tf_page_free(&pg);
    if (rc < 0)
        return -1;
    if (first && strcmp(kids[0].first, first) != 0)
        rc = tf_fail(e, EIO, "entries: a node does not start where its parent says");
    for (size_t i = 0; rc == 0 && i < nkids; i++) {
        if (level > 1) {
            rc = collect_leaves(p, &kids[i].ref, level - 1, kids[i].first, out, n, cap, e);
            continue;
        }
        if (*n == *cap) {
            size_t more = *cap ? 2 * *cap : 16;
            leaf *a = realloc(*out, more * sizeof *a);
            if (!a) {
                rc = tf_fail(e, ENOMEM, "entries: out of memory");
                break;
            }
            *out = a;
            *cap = more;
        }
        (*out)[(*n)++] = kids[i];
        kids[i].first = NULL; /* moved */
    }
    tf_entry_children_free(kids, nkids);
    return rc;
}

/* The leaves of root r, and then their entries. */
static int read_entries(tf_paged *p, const tf_root *r, leaf **leaves, size_t *nleaves,
                        entry_list *l, tf_error *e)
{
    *leaves = NULL;
    *nleaves = 0;
    if (!r->nentries)
        return 0;
    size_t cap = 0;
    int rc = 0;
    if (r->entries_height) {
        rc = collect_leaves(p, &r->entries, r->entries_height, NULL, leaves, nleaves, &cap, e);
    } else if ((*leaves = calloc(1, sizeof **leaves))) {
        (*leaves)[0].ref = r->entries;
        *nleaves = 1;
    } else {
        rc = tf_fail(e, ENOMEM, "entries: out of memory");
    }
    /* Hinted together, a remote archive's leaves come in a request for
     * each run of them close in the file (stage_leaves keeps few). A
     * follower reads only the leaves the commits it follows wrote. */
    for (size_t i = 0; rc == 0 && i < *nleaves; i++)
        if (!l->have || !kept_leaf(p, &(*leaves)[i]))
            tf_container_will_need(p->c, (*leaves)[i].ref.off, (*leaves)[i].ref.len);
    for (size_t i = 0; rc == 0 && i < *nleaves; i++) {
        const leaf *old = l->have ? kept_leaf(p, &(*leaves)[i]) : NULL;
        rc = old ? copy_leaf(l, old, e) : read_leaf(l, &(*leaves)[i], e);
    }
    if (rc == 0 && l->n != r->nentries)
        rc = tf_fail(e, EIO, "entries: %zu found where the root says %llu", l->n,
                     (unsigned long long)r->nentries);
    if (rc < 0) {
        leaves_free(*leaves, *nleaves);
        *leaves = NULL;
        *nleaves = 0;
    }
    return rc;
}

/* Reads the commit whose trailer is t, staged: its root, its leaves;
 * its entries into *entries. */
static int load(tf_paged *p, const tf_trailer *t, const tf_entry *have, size_t nhave,
                tf_entry **entries, size_t *n, tf_error *e)
{
    tf_root r;
    tf_page_ref ref = { .off = t->catalog_off, .len = (uint32_t)t->catalog_len,
                        .hash = t->catalog_hash };
    if (t->catalog_len > UINT32_MAX)
        return tf_fail(e, EIO, "commit %llu: root of %llu bytes", (unsigned long long)t->seq,
                       (unsigned long long)t->catalog_len);
    if (tf_root_read(&p->src, &ref, &r, e) < 0)
        return -1;
    if (r.seq != t->seq || r.nblobs != t->nblobs)
        return tf_fail(e, EIO, "commit %llu: its root is of commit %llu", (unsigned long long)t->seq,
                       (unsigned long long)r.seq);
    if (r.nblobs < p->root.nblobs || r.next_ino < p->root.next_ino)
        return tf_fail(e, EIO, "commit %llu: fewer blobs or inode numbers than commit %llu",
                       (unsigned long long)t->seq, (unsigned long long)p->root.seq);
    entry_list l = { .p = p, .nblobs = r.nblobs, .have = have, .nhave = nhave };
    leaf *leaves;
    size_t nleaves;
    int rc = read_entries(p, &r, &leaves, &nleaves, &l, e);
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        if (l.ents[i].ino >= r.next_ino)
            rc = tf_fail(e, EIO, "entries: inode %llu is not below the next, %llu",
                         (unsigned long long)l.ents[i].ino, (unsigned long long)r.next_ino);
    if (rc < 0) {
        tf_entries_free(l.ents, l.n);
        leaves_free(leaves, nleaves);
        return -1;
    }
    leaves_free(p->staged_leaves, p->nstaged_leaves);
    p->staged_root = r;
    p->staged_leaves = leaves;
    p->nstaged_leaves = nleaves;
    *entries = l.ents;
    *n = l.n;
    return 0;
}

int tf_paged_open(tf_container *c, size_t cache_bytes, bool lazy, tf_paged **out,
                  tf_entry **entries, size_t *n, tf_error *e)
{
    tf_paged *p = calloc(1, sizeof *p);
    if (!p)
        return tf_fail(e, ENOMEM, "out of memory");
    p->c = c;
    p->lazy = lazy;
    p->src = (tf_page_source){ read_pages, pages_size, c };
    p->sink = (tf_page_sink){ append_pages, note_replaced, p };
    p->root.next_ino = 2;
    if (!(p->blobs = tf_blob_tree_new(&p->src, NULL, 0, cache_bytes))) {
        free(p);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    *entries = NULL;
    *n = 0;
    if (c->has_commit) {
        if (load(p, &c->last, NULL, 0, entries, n, e) < 0) {
            tf_paged_free(p);
            return -1;
        }
        tf_paged_done(p);
    }
    *out = p;
    return 0;
}

int tf_paged_body(tf_paged *p, tf_entry *ent, tf_error *e)
{
    return tf_entry_body_read(&p->src, &ent->body, p->root.nblobs, p->c->chunk_shift, ent, e);
}

int tf_paged_follow(tf_paged *p, const tf_trailer *t, const tf_entry *have, size_t nhave,
                    tf_entry **entries, size_t *n, tf_error *e)
{
    if (t->seq <= p->root.seq)
        return tf_fail(e, EIO, "commit %llu does not follow commit %llu",
                       (unsigned long long)t->seq, (unsigned long long)p->root.seq);
    return load(p, t, have, nhave, entries, n, e);
}

void tf_paged_free(tf_paged *p)
{
    if (!p)
        return;
    tf_blob_tree_free(p->blobs);
    leaves_free(p->leaves, p->nleaves);
    leaves_free(p->staged_leaves, p->nstaged_leaves);
    free(p->replaced);
    free(p);
}

const tf_root *tf_paged_root(const tf_paged *p)
{
    return &p->root;
}

/* The rules a record of the last commit keeps by itself. */
static int check_record(const tf_paged *p, uint64_t idx, const tf_blob *b, tf_error *e)
{
    if (tf_blob_check(b, idx, p->c->chunk_shift, p->c->end, e) < 0)
        return -1;
    if (b->ref > p->root.nblobs || b->model > p->root.nblobs || b->ref == idx + 1)
        return tf_fail(e, EIO, "blob %llu names a blob that is not in the catalog",
                       (unsigned long long)idx);
    return 0;
}

int tf_paged_blob(tf_paged *p, uint64_t idx, tf_blob *b, tf_blob_marks *marks, tf_error *e)
{
    if (tf_blob_tree_get(p->blobs, idx, b, marks, e) < 0)
        return -1;
    return check_record(p, idx, b, e);
}

typedef struct {
    const tf_paged *p;
    tf_blob_record_fn fn;
    void *arg;
} scan_ctx;

static int scan_checked(void *arg, uint64_t slot, const tf_blob *b, tf_blob_marks marks,
                        tf_error *e)
{
    const scan_ctx *s = arg;
    return check_record(s->p, slot, b, e) < 0 ? -1 : s->fn(s->arg, slot, b, marks, e);
}

int tf_paged_scan(tf_paged *p, tf_blob_record_fn fn, void *arg, tf_error *e)
{
    return tf_paged_scan_since(p, 0, fn, arg, e);
}

int tf_paged_scan_since(tf_paged *p, uint64_t since, tf_blob_record_fn fn, void *arg,
                        tf_error *e)
{
    return tf_blob_tree_scan_since(p->blobs, since, scan_checked, &(scan_ctx){ p, fn, arg }, e);
}

int tf_paged_retired(tf_paged *p, uint64_t **pairs, size_t *n, tf_error *e)
{
    *pairs = NULL;
    *n = 0;
    if (!p->root.retired.len)
        return 0;
    tf_page pg;
    if (tf_page_read(&p->src, &p->root.retired, TF_PAGE_RETIRED, 0, &pg, e) < 0)
        return -1;
    if (pg.len != (size_t)pg.count * 16 || !pg.count) {
        tf_page_free(&pg);
        return tf_fail(e, EIO, "retired list of %u ranges in %zu bytes", pg.count, pg.len);
    }
    uint64_t *a = malloc(pg.len);
    if (!a) {
        tf_page_free(&pg);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < 2 * (size_t)pg.count; i++)
        a[i] = tf_le64_get(pg.data + 8 * i);
    tf_page_free(&pg);
    for (size_t i = 0; i < pg.count; i++)
        if (a[2 * i] < TF_SUPERBLOCK_SIZE || a[2 * i] > p->c->end ||
            a[2 * i + 1] > p->c->end - a[2 * i]) {
            free(a);
            return tf_fail(e, EIO, "retired list: a range outside the archive");
        }
    *pairs = a;
    *n = pg.count;
    return 0;
}

/* The entry nodes under the node at ref, of the given level. */
static int node_pages(tf_paged *p, const tf_page_ref *ref, unsigned level,
                      int (*fn)(void *arg, uint64_t off, uint64_t len, tf_error *e), void *arg,
                      tf_error *e)
{
    if (fn(arg, ref->off, ref->len, e) < 0)
        return -1;
    if (level < 2)
        return 0;
    tf_page pg;
    if (tf_page_read(&p->src, ref, TF_PAGE_ENTRY_NODE, level, &pg, e) < 0)
        return -1;
    tf_entry_child *kids = NULL;
    size_t n = 0;
    int rc = tf_entry_node_parse(&pg, &kids, &n, e);
    tf_page_free(&pg);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = node_pages(p, &kids[i].ref, level - 1, fn, arg, e);
    tf_entry_children_free(kids, n);
    return rc;
}

int tf_paged_pages(tf_paged *p, int (*fn)(void *arg, uint64_t off, uint64_t len, tf_error *e),
                   void *arg, tf_error *e)
{
    const tf_root *r = &p->root;
    if (tf_blob_tree_pages(p->blobs, fn, arg, e) < 0)
        return -1;
    if (r->entries_height && node_pages(p, &r->entries, r->entries_height, fn, arg, e) < 0)
        return -1;
    for (size_t i = 0; i < p->nleaves; i++)
        if (fn(arg, p->leaves[i].ref.off, p->leaves[i].ref.len, e) < 0)
            return -1;
    return r->retired.len ? fn(arg, r->retired.off, r->retired.len, e) : 0;
}

/* ---- a writer's commit ---- */

int tf_paged_write_bodies(tf_paged *p, tf_entry *ents, size_t n, tf_error *e)
{
    for (size_t i = 0; i < n; i++)
        if (tf_entry_has_body(ents[i].kind) &&
            tf_entry_body_write(&p->sink, &ents[i], &ents[i].body, e) < 0)
            return -1;
    return 0;
}

int tf_paged_stage_blob(tf_paged *p, uint64_t slot, const tf_blob *b, tf_blob_marks marks,
                        tf_error *e)
{
    return tf_blob_tree_set(p->blobs, slot, b, marks, e);
}

int tf_paged_stage_model(tf_paged *p, uint64_t slot, tf_error *e)
{
    tf_blob b;
    tf_blob_marks marks;
    if (tf_blob_tree_get(p->blobs, slot, &b, &marks, e) < 0)
        return -1;
    if (marks.flags & TF_BLOB_MODEL)
        return 0;
    marks.flags |= TF_BLOB_MODEL;
    return tf_blob_tree_set(p->blobs, slot, &b, marks, e);
}

/* Marks in dirty (per leaf) the leaves whose entries the change alters:
 * a walk of the entries before and after in path order. */
static int mark_dirty(tf_paged *p, const tf_paged_change *ch, bool *dirty, tf_error *e)
{
    size_t i = 0, j = 0;
    while (i < ch->nbefore || j < ch->nafter) {
        int c = i == ch->nbefore ? 1
                : j == ch->nafter ? -1
                                  : tf_path_cmp(ch->before[i].path, ch->after[j].path);
        const char *path = c <= 0 ? ch->before[i].path : ch->after[j].path;
        bool changed = c != 0 || ch->before[i].path != ch->after[j].path;
        if (changed)
            dirty[leaf_of(p->leaves, p->nleaves, path)] = true;
        if (changed && c <= 0 && tf_entry_has_body(ch->before[i].kind) &&
            note_replaced(p, &ch->before[i].body, e) < 0)
            return -1;
        i += c <= 0;
        j += c >= 0;
    }
    return 0;
}

/* Appends a leaf (or node) descriptor. */
static int push_leaf(leaf **a, size_t *n, size_t *cap, const tf_page_ref *ref,
                     const char *first, tf_error *e)
{
    if (*n == *cap) {
        size_t more = *cap ? 2 * *cap : 16;
        leaf *b = realloc(*a, more * sizeof *b);
        if (!b)
            return tf_fail(e, ENOMEM, "entries: out of memory");
        *a = b;
        *cap = more;
    }
    char *copy = strdup(first);
    if (!copy)
        return tf_fail(e, ENOMEM, "entries: out of memory");
    (*a)[(*n)++] = (leaf){ .ref = *ref, .first = copy };
    return 0;
}

/* Appends the headers of entries [from, to) of `after` to buf, each
 * sharing the path of the one before it from `from` on. */
static int put_headers(tf_buf *buf, const tf_entry *after, size_t from, size_t to, tf_error *e)
{
    for (size_t i = from; i < to; i++)
        if (tf_entry_header_put(buf, &after[i], i > from ? after[i - 1].path : NULL,
                                &after[i].body, e) < 0)
            return -1;
    return 0;
}

/* Writes entries [from, to) of `after` as leaves of equal size, each of
 * at most about TF_ENTRY_PAGE_TARGET bytes, appended to out. (Filling
 * each leaf to the target would leave the last of a split run with a
 * few entries: splits after inserts made leaves of 2 headers.) */
static int write_leaves(tf_paged *p, const tf_entry *after, size_t from, size_t to, leaf **out,
                        size_t *n, size_t *cap, tf_error *e)
{
    tf_buf buf = { 0 };
    int rc = put_headers(&buf, after, from, to, e);
    size_t pages = buf.len / TF_ENTRY_PAGE_TARGET + 1, each = buf.len / pages + 1;
    for (size_t i = from; rc == 0 && i < to;) {
        size_t start = i;
        buf.len = 0;
        while (rc == 0 && i < to && buf.len < each) {
            rc = tf_entry_header_put(&buf, &after[i], i > start ? after[i - 1].path : NULL,
                                     &after[i].body, e);
            i++;
        }
        tf_page_ref ref;
        if (rc == 0)
            rc = tf_page_write(&p->sink, TF_PAGE_ENTRY_LEAF, 0, (uint32_t)(i - start), buf.data,
                               buf.len, &ref, e);
        if (rc == 0)
            rc = push_leaf(out, n, cap, &ref, after[start].path, e);
    }
    tf_buf_free(&buf);
    return rc;
}

/* The bytes the headers of entries [from, to) of `after` take in a leaf
 * (an estimate past a page's worth: counted up to there). */
static size_t run_bytes(const tf_entry *after, size_t from, size_t to)
{
    size_t bytes = 0;
    for (size_t i = from; i < to && bytes < TF_ENTRY_PAGE_TARGET; i++)
        bytes += 32 + strlen(after[i].path); /* the fields, the path unshared */
    return bytes;
}

/* An open reads every leaf; a remote one fetches them in a request for
 * each run of leaves close in the file (io/remote.c merges the ranges
 * it is told of that lie at most 64 KiB apart). A commit writes its
 * leaves together, so a run of leaves an append leaves clean is
 * usually what an earlier commit wrote; a leaf filled by appends to a
 * series stays a run of its own. Where more than ENTRY_RUNS_MAX runs of
 * clean leaves would stay, those of all but the ENTRY_RUNS_KEPT largest
 * are written again with the commit's own: an open takes a bounded
 * number of requests whatever the commits, and as the runs kept are the
 * largest, a leaf is written again each time the run it joined is
 * outgrown, a few times in an archive's life. */
#define ENTRY_RUNS_MAX 5
#define ENTRY_RUNS_KEPT 2
#define ENTRY_RUN_GAP ((uint64_t)64 << 10)

typedef struct {
    uint64_t off, len;
    size_t leaf;
    size_t run; /* set by few_runs */
} placed;

static int cmp_placed(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

typedef struct {
    uint64_t bytes;
    size_t id;
} run_size;

static int cmp_run_larger(const void *a, const void *b)
{
    const run_size *x = a, *y = b;
    return x->bytes > y->bytes ? -1 : x->bytes < y->bytes;
}

/* Marks dirty the clean leaves of all but the largest runs, where more
 * than ENTRY_RUNS_MAX runs of them would stay. */
static int few_runs(const tf_paged *p, bool *dirty, tf_error *e)
{
    placed *at = malloc((p->nleaves ? p->nleaves : 1) * sizeof *at);
    run_size *runs = malloc((p->nleaves ? p->nleaves : 1) * sizeof *runs);
    if (!at || !runs) {
        free(at);
        free(runs);
        return tf_fail(e, ENOMEM, "entries: out of memory");
    }
    size_t n = 0, nruns = 0;
    for (size_t k = 0; k < p->nleaves; k++)
        if (!dirty[k])
            at[n++] = (placed){ p->leaves[k].ref.off, p->leaves[k].ref.len, k, 0 };
    qsort(at, n, sizeof *at, cmp_placed);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || at[i].off > at[i - 1].off + at[i - 1].len + ENTRY_RUN_GAP) {
            runs[nruns] = (run_size){ 0, nruns };
            nruns++;
        }
        at[i].run = nruns - 1;
        runs[nruns - 1].bytes += at[i].len;
    }
    if (nruns > ENTRY_RUNS_MAX) {
        qsort(runs, nruns, sizeof *runs, cmp_run_larger);
        bool *kept = calloc(nruns, sizeof *kept);
        if (!kept) {
            free(at);
            free(runs);
            return tf_fail(e, ENOMEM, "entries: out of memory");
        }
        for (size_t r = 0; r < ENTRY_RUNS_KEPT; r++)
            kept[runs[r].id] = true;
        for (size_t i = 0; i < n; i++)
            if (!kept[at[i].run])
                dirty[at[i].leaf] = true;
        free(kept);
    }
    free(at);
    free(runs);
    return 0;
}

/* The leaves after the change: the clean ones kept, each run of dirty
 * ones written again from the entries after in its range. */
static int stage_leaves(tf_paged *p, const tf_paged_change *ch, leaf **out, size_t *n,
                        tf_error *e)
{
    size_t cap = 0, nold = p->nleaves ? p->nleaves : 1;
    bool *dirty = calloc(nold, sizeof *dirty);
    if (!dirty)
        return tf_fail(e, ENOMEM, "entries: out of memory");
    int rc = 0;
    if (p->nleaves) {
        rc = mark_dirty(p, ch, dirty, e);
        if (rc == 0)
            rc = few_runs(p, dirty, e);
    } else
        dirty[0] = true; /* no leaf yet: one range holds everything */
    for (size_t k = 0; rc == 0 && k < nold;) {
        if (!dirty[k]) {
            rc = push_leaf(out, n, &cap, &p->leaves[k].ref, p->leaves[k].first, e);
            k++;
            continue;
        }
        size_t end = k;
        while (end < nold && dirty[end])
            end++;
        size_t from = k ? first_at(ch->after, ch->nafter, p->leaves[k].first) : 0;
        size_t to = end < p->nleaves ? first_at(ch->after, ch->nafter, p->leaves[end].first)
                                     : ch->nafter;
        /* A run of less than half a leaf takes in the leaf after it: no
         * leaf stays small for long. */
        while (rc == 0 && end < p->nleaves && run_bytes(ch->after, from, to) < TF_ENTRY_PAGE_TARGET / 2) {
            end++;
            to = end < p->nleaves ? first_at(ch->after, ch->nafter, p->leaves[end].first)
                                  : ch->nafter;
        }
        for (size_t i = k; rc == 0 && i < end && i < p->nleaves; i++)
            rc = note_replaced(p, &p->leaves[i].ref, e);
        if (rc == 0)
            rc = write_leaves(p, ch->after, from, to, out, n, &cap, e);
        k = end;
    }
    free(dirty);
    return rc;
}

/* Writes the nodes above the children (at `level` - 1), a level at a
 * time, until one page is left: *top names it, *height its level. */
static int stage_nodes(tf_paged *p, leaf *kids, size_t nkids, tf_page_ref *top, uint8_t *height,
                       tf_error *e)
{
    leaf *level_kids = kids;
    size_t n = nkids;
    unsigned level = 0;
    tf_buf buf = { 0 };
    int rc = 0;
    while (rc == 0 && n > 1) {
        leaf *up = NULL;
        size_t nup = 0, cap = 0;
        level++;
        for (size_t i = 0; rc == 0 && i < n;) {
            size_t start = i;
            buf.len = 0;
            while (rc == 0 && i < n && buf.len < TF_ENTRY_PAGE_TARGET)
                rc = tf_entry_node_put(&buf, &level_kids[i++], e);
            tf_page_ref ref;
            if (rc == 0)
                rc = tf_page_write(&p->sink, TF_PAGE_ENTRY_NODE, level, (uint32_t)(i - start),
                                   buf.data, buf.len, &ref, e);
            if (rc == 0)
                rc = push_leaf(&up, &nup, &cap, &ref, level_kids[start].first, e);
        }
        if (level_kids != kids)
            leaves_free(level_kids, n);
        level_kids = up;
        n = nup;
        if (level > UINT8_MAX)
            rc = tf_fail(e, EIO, "entries: tree too tall");
    }
    if (rc == 0) {
        *top = n ? level_kids[0].ref : (tf_page_ref){ 0 };
        *height = (uint8_t)level;
    }
    if (level_kids != kids)
        leaves_free(level_kids, n);
    tf_buf_free(&buf);
    return rc;
}

/* Writes the retired list, if any: the payloads the commit's redirects
 * retired and the pages it replaced, which a writer gives back once it
 * is durable (again, if it died before). */
static int stage_retired(tf_paged *p, const tf_paged_change *ch, tf_page_ref *ref, tf_error *e)
{
    *ref = (tf_page_ref){ 0 };
    size_t n = ch->nretired + p->nreplaced;
    if (!n)
        return 0;
    if (n > UINT32_MAX)
        return tf_fail(e, EFBIG, "a commit that retires %zu ranges", n);
    uint8_t *raw = malloc(n * 16);
    if (!raw)
        return tf_fail(e, ENOMEM, "out of memory");
    for (size_t i = 0; i < 2 * ch->nretired; i++)
        tf_le64_put(raw + 8 * i, ch->retired[i]);
    for (size_t i = 0; i < 2 * p->nreplaced; i++)
        tf_le64_put(raw + 16 * ch->nretired + 8 * i, p->replaced[i]);
    int rc = tf_page_write(&p->sink, TF_PAGE_RETIRED, 0, (uint32_t)n, raw, n * 16, ref, e);
    free(raw);
    return rc;
}

int tf_paged_stage(tf_paged *p, const tf_paged_change *ch, tf_buf *root_out, tf_error *e)
{
    tf_root r = p->root;
    p->nreplaced = 0;
    r.seq++;
    r.nblobs = tf_blob_tree_count(p->blobs);
    r.next_ino = ch->next_ino;
    r.nentries = ch->nafter;
    memmove(r.window, r.window + 1, (TF_ROOT_WINDOW - 1) * sizeof *r.window);
    r.window[TF_ROOT_WINDOW - 1] = ch->first_blob;
    for (size_t i = 0; i < ch->nretired; i++)
        r.retired_bytes += ch->retired[2 * i + 1];
    leaf *leaves = NULL;
    size_t nleaves = 0;
    int rc = tf_blob_tree_write(p->blobs, &p->sink, &r.blobs, e);
    if (rc == 0)
        rc = stage_leaves(p, ch, &leaves, &nleaves, e);
    /* Every node is written again (below), and the retired list. */
    if (rc == 0 && p->root.entries_height)
        rc = node_pages(p, &p->root.entries, p->root.entries_height, note_replaced_range, p, e);
    if (rc == 0 && p->root.retired.len)
        rc = note_replaced(p, &p->root.retired, e);
    if (rc == 0)
        rc = stage_nodes(p, leaves, nleaves, &r.entries, &r.entries_height, e);
    if (rc == 0)
        rc = stage_retired(p, ch, &r.retired, e);
    if (rc == 0)
        rc = tf_root_encode(&r, root_out, e);
    if (rc < 0) {
        leaves_free(leaves, nleaves);
        tf_blob_tree_discard(p->blobs);
        tf_blob_tree_reroot(p->blobs, &p->root.blobs, p->root.nblobs);
        return -1;
    }
    p->staged_root = r;
    p->staged_leaves = leaves;
    p->nstaged_leaves = nleaves;
    return 0;
}

void tf_paged_replaced(const tf_paged *p, const uint64_t **pairs, size_t *n)
{
    *pairs = p->replaced;
    *n = p->nreplaced;
}

void tf_paged_done(tf_paged *p)
{
    p->root = p->staged_root;
    tf_blob_tree_reroot(p->blobs, &p->root.blobs, p->root.nblobs);
    leaves_free(p->leaves, p->nleaves);
    p->leaves = p->staged_leaves;
    p->nleaves = p->nstaged_leaves;
    p->staged_leaves = NULL;
    p->nstaged_leaves = 0;
}

void tf_paged_undo(tf_paged *p)
{
    leaves_free(p->staged_leaves, p->nstaged_leaves);
    p->staged_leaves = NULL;
    p->nstaged_leaves = 0;
    tf_blob_tree_discard(p->blobs);
    tf_blob_tree_reroot(p->blobs, &p->root.blobs, p->root.nblobs);
}
