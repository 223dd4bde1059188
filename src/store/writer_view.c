#include "store/writer_view.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/idmap.h"
#include "format/entry_pages.h"
#include "format/paged.h"
#include "store/archive_impl.h"

/* A slot's chain count. */
typedef struct {
    uint64_t slot;
    unsigned above;
} count;

typedef struct {
    count *at;
    size_t n, cap;
} counts;

struct writer_view {
    pthread_mutex_t lock; /* the lookups' build (by the first encoder that
                             asks) and the counts */
    atomic_bool built;
    tf_idmap ids;   /* content id -> slot */
    counts asked;   /* the references' keyframes, by slot */
    const tf_entry **used; /* the references since the last commit */
    size_t nused, used_cap;
    uint64_t opened_at; /* the archive's end at the open: files past it
                           are this writer's, their blobs looked up */
};

writer_view *writer_view_new(uint64_t end)
{
    writer_view *v = calloc(1, sizeof *v);
    if (v && pthread_mutex_init(&v->lock, NULL) != 0) {
        free(v);
        return NULL;
    }
    if (v)
        v->opened_at = end;
    return v;
}

void writer_view_free(writer_view *v)
{
    if (!v)
        return;
    tf_idmap_free(&v->ids);
    free(v->asked.at);
    free(v->used);
    pthread_mutex_destroy(&v->lock);
    free(v);
}

/* ---- content ids ---- */

static int put_id(writer_view *v, const tf_blob_id *id, uint64_t slot, tf_error *e)
{
    return tf_idmap_put(&v->ids, id, slot) < 0 ? tf_fail(e, ENOMEM, "out of memory") : 0;
}

static int put_entry(const tf_archive *ar, writer_view *v, const tf_entry *ent, tf_error *e)
{
    if (tf_archive_entry_body(ar, ent, e) < 0)
        return -1;
    uint64_t model = 0; /* the last put: a tensor's chunks share theirs */
    for (uint64_t c = 0; c < ent->nchunks; c++) {
        tf_blob b, m;
        if (tf_archive_blob(ar, ent->chunks[c], &b, e) < 0 ||
            put_id(v, &b.id, ent->chunks[c], e) < 0)
            return -1;
        if (!b.model || b.model == model)
            continue;
        model = b.model;
        if (tf_archive_blob(ar, model - 1, &m, e) < 0 || put_id(v, &m.id, model - 1, e) < 0)
            return -1;
    }
    return 0;
}

/* Where the last TF_VIEW_COMMITS commits begin: after the trailer of the
 * commit before them (0 when there is none). */
static int window_start(const tf_archive *ar, uint64_t *start, tf_error *e)
{
    const tf_container *c = &ar->c;
    *start = 0;
    if (!c->has_commit || c->last.seq <= TF_VIEW_COMMITS)
        return 0;
    uint64_t before;
    if (tf_container_walk_trailers(c, c->end - TF_TRAILER_SIZE, c->last.seq,
                                   c->last.seq - TF_VIEW_COMMITS, NULL, NULL, &before, e) < 0)
        return -1;
    *start = before + TF_TRAILER_SIZE;
    return 0;
}

/* The lookups' first content: the live files whose bodies the window's
 * commits wrote (under the lock). */
static int build(const tf_archive *ar, writer_view *v, tf_error *e)
{
    if (atomic_load_explicit(&v->built, memory_order_relaxed))
        return 0;
    uint64_t start;
    if (window_start(ar, &start, e) < 0)
        return -1;
    for (size_t i = 0; i < ar->nentries; i++) {
        const tf_entry *ent = &ar->entries[i];
        if (tf_entry_has_body(ent->kind) && ent->body.off >= start &&
            put_entry(ar, v, ent, e) < 0)
            return -1;
    }
    atomic_store_explicit(&v->built, true, memory_order_release);
    return 0;
}

int64_t writer_view_find(const tf_archive *ar, const tf_blob_id *id)
{
    writer_view *v = ar->view;
    if (!atomic_load_explicit(&v->built, memory_order_acquire)) {
        tf_error ignored; /* not found: the content is stored again */
        pthread_mutex_lock(&v->lock);
        int rc = build(ar, v, &ignored);
        pthread_mutex_unlock(&v->lock);
        if (rc < 0)
            return -1;
    }
    uint64_t slot;
    return tf_idmap_get(&v->ids, id, &slot) ? (int64_t)slot : -1;
}

/* ---- chain counts ---- */

static int push(counts *c, uint64_t slot, unsigned above, tf_error *e)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        count *a = realloc(c->at, cap * sizeof *a);
        if (!a)
            return tf_fail(e, ENOMEM, "out of memory");
        c->at = a;
        c->cap = cap;
    }
    c->at[c->n++] = (count){ slot, above };
    return 0;
}

static int cmp_count(const void *a, const void *b)
{
    const count *x = a, *y = b;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->above < y->above ? 1 : x->above > y->above ? -1 : 0; /* the largest first */
}

/* Sorts c by slot, each slot once with its largest count. */
static void reduce(counts *c)
{
    if (c->n > 1)
        qsort(c->at, c->n, sizeof *c->at, cmp_count);
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (!k || c->at[k - 1].slot != c->at[i].slot)
            c->at[k++] = c->at[i];
    c->n = k;
}

static const count *find_count(const counts *c, uint64_t slot)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->at[mid].slot < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->n && c->at[lo].slot == slot ? &c->at[lo] : NULL;
}

/* What the walks met of a slot: its reference and the largest count
 * pushed for it. Direct-mapped: a slot that lost its place is read and
 * walked again. */
#define WALK_MEMO 4096
typedef struct {
    uint64_t slot1; /* slot + 1; 0: empty */
    uint64_t ref;
    unsigned best;
} walk_memo;

typedef struct {
    const tf_archive *ar;
    counts found;
    bool unknown; /* a redirect that kept no count */
    walk_memo *memo; /* WALK_MEMO of them */
} walk;

/* Record x of slot xs was written since the scan's offset: each slot its
 * chain passes, k steps down, ends a chain of k deltas above which lie
 * those that ended at x when a redirect wrote it (none above a slot's
 * own record written since: those are walked from themselves). */
static int walk_from(void *arg, uint64_t xs, const tf_blob *x, tf_blob_marks marks, tf_error *e)
{
    walk *w = arg;
    (void)xs;
    unsigned base = 0;
    if (marks.flags & TF_BLOB_REDIRECTED) {
        if (!marks.above) {
            w->unknown = true;
            return 0;
        }
        base = marks.above == TF_BLOB_ABOVE_MANY ? TF_CHAIN_MAX : marks.above - 1u;
    }
    uint64_t ref = x->ref;
    for (unsigned k = 1; ref && k <= TF_CHAIN_MAX; k++) {
        uint64_t y = ref - 1;
        walk_memo *m = &w->memo[(y * 0x9e3779b97f4a7c15u) >> 52];
        /* A walk that passed y with as large a count pushed as large
         * ones below it. */
        if (m->slot1 == y + 1 && m->best >= base + k)
            return 0;
        if (m->slot1 != y + 1) {
            tf_blob b;
            if (tf_archive_blob(w->ar, y, &b, e) < 0)
                return -1;
            *m = (walk_memo){ y + 1, b.ref, 0 };
        }
        m->best = base + k;
        if (push(&w->found, y, base + k, e) < 0)
            return -1;
        ref = m->ref;
    }
    return 0;
}

/* The keyframes of ent that its own commit made, whose chains a
 * superseding commit may grow: slots are numbered as they are made, so
 * its chunks deduplicated against older content lie far below its
 * newest (their counts are not computed: not superseded). */
static bool own_keyframe(const tf_entry *ent, uint64_t newest, uint64_t slot, const tf_blob *b,
                         tf_blob_marks marks)
{
    return !b->ref && !(marks.flags & TF_BLOB_REDIRECTED) && newest - slot <= 2 * ent->nchunks;
}

/* Computes the counts of ent's own keyframes into v->asked: 1 where it
 * met a redirect that kept none. */
static int count_keyframes(tf_archive *ar, writer_view *v, const tf_entry *ent, tf_error *e)
{
    uint64_t newest = 0, since = UINT64_MAX;
    for (uint64_t c = 0; c < ent->nchunks; c++)
        newest = ent->chunks[c] > newest ? ent->chunks[c] : newest;
    bool *own = calloc(ent->nchunks ? ent->nchunks : 1, sizeof *own);
    walk w = { .ar = ar };
    int rc = own ? 0 : tf_fail(e, ENOMEM, "out of memory");
    for (uint64_t c = 0; rc == 0 && c < ent->nchunks; c++) {
        tf_blob b;
        tf_blob_marks marks;
        if ((rc = tf_paged_blob(ar->paged, ent->chunks[c], &b, &marks, e)) < 0)
            break;
        own[c] = own_keyframe(ent, newest, ent->chunks[c], &b, marks);
        if (own[c] && b.offset < since)
            since = b.offset;
    }
    /* Counted already (carried from the commit that made them)? */
    bool all = true;
    for (uint64_t c = 0; rc == 0 && all && c < ent->nchunks; c++)
        all = !own[c] || find_count(&v->asked, ent->chunks[c]);
    /* Every record that names such a slot was written after the slot's
     * payload. */
    if (rc == 0 && !all && since != UINT64_MAX) {
        w.memo = calloc(WALK_MEMO, sizeof *w.memo);
        rc = w.memo ? tf_paged_scan_since(ar->paged, since, walk_from, &w, e)
                    : tf_fail(e, ENOMEM, "out of memory");
    }
    if (rc == 0 && w.unknown)
        rc = 1;
    reduce(&w.found);
    /* The counts asked before stay sorted ahead of those added. */
    const size_t nbefore = v->asked.n;
    for (uint64_t c = 0; rc == 0 && c < ent->nchunks; c++) {
        if (!own[c] || find_count(&(counts){ v->asked.at, nbefore, 0 }, ent->chunks[c]))
            continue;
        const count *f = find_count(&w.found, ent->chunks[c]);
        rc = push(&v->asked, ent->chunks[c], f ? f->above : 0, e);
    }
    reduce(&v->asked);
    free(w.found.at);
    free(w.memo);
    free(own);
    return rc;
}

/* Whether ent was used since the last commit; if not, it is now. */
static int used_before(writer_view *v, const tf_entry *ent, bool *before, tf_error *e)
{
    for (size_t i = 0; i < v->nused; i++)
        if (v->used[i] == ent)
            return *before = true, 0;
    *before = false;
    if (v->nused == v->used_cap) {
        size_t cap = v->used_cap ? 2 * v->used_cap : 8;
        const tf_entry **a = realloc(v->used, cap * sizeof *a);
        if (!a)
            return tf_fail(e, ENOMEM, "out of memory");
        v->used = a;
        v->used_cap = cap;
    }
    v->used[v->nused++] = ent;
    return 0;
}

int writer_view_use(tf_archive *ar, const tf_entry *ent, tf_error *e)
{
    writer_view *v = ar->view;
    bool before = false;
    pthread_mutex_lock(&v->lock);
    int rc = used_before(v, ent, &before, e);
    if (rc == 0 && !before)
        rc = build(ar, v, e);
    if (rc == 0 && !before && ent->body.off < v->opened_at)
        rc = put_entry(ar, v, ent, e);
    if (rc == 0 && !before)
        rc = count_keyframes(ar, v, ent, e);
    pthread_mutex_unlock(&v->lock);
    return rc;
}

unsigned writer_view_above(const tf_archive *ar, uint64_t slot)
{
    writer_view *v = ar->view;
    pthread_mutex_lock(&v->lock);
    const count *c = find_count(&v->asked, slot);
    unsigned above = c ? c->above : TF_CHAIN_MAX + 1u;
    pthread_mutex_unlock(&v->lock);
    return above;
}

/* The counts of the keyframes seg made, from those of the slots its
 * redirects made reverse deltas against them (a writer adding a run's
 * next checkpoint asks for these next, and reads nothing to know
 * them): 0, and 1 plus the count of each slot so redirected. Where a
 * count is not known, or another blob of seg is a delta against one of
 * its own, none is kept: the next use counts by the pages. */
static int carry_counts(writer_view *v, const tf_segment *seg, tf_error *e)
{
    const uint64_t own = seg->nblobs - seg->nserving, end = seg->first_blob + own;
    counts carried = { 0 };
    int rc = 0;
    bool known = true;
    for (uint64_t i = 0; rc == 0 && known && i < own; i++) {
        const tf_blob *b = &seg->blobs[i];
        if (b->ref && b->ref - 1 >= seg->first_blob)
            known = false;
        else if (!b->ref)
            rc = push(&carried, seg->first_blob + i, 0, e);
    }
    for (uint64_t k = 0; rc == 0 && known && k < seg->nredirects; k++) {
        const tf_redirect *r = &seg->redirects[k];
        uint64_t ref = seg->blobs[r->blob - seg->first_blob].ref;
        if (!ref || ref - 1 < seg->first_blob || ref - 1 >= end)
            continue; /* not against a keyframe of seg */
        const count *c = find_count(&v->asked, r->slot);
        if (!c || c->above >= TF_CHAIN_MAX)
            known = false;
        else
            rc = push(&carried, ref - 1, c->above + 1, e);
    }
    free(v->asked.at);
    v->asked = (counts){ 0 };
    if (rc == 0 && known) {
        reduce(&carried);
        v->asked = carried;
    } else {
        free(carried.at);
    }
    return rc;
}

int writer_view_applied(tf_archive *ar, const tf_segment *seg, tf_error *e)
{
    writer_view *v = ar->view;
    pthread_mutex_lock(&v->lock);
    v->nused = 0;
    int rc = carry_counts(v, seg, e);
    /* Before the lookups' build, the window's files bring them. */
    for (uint64_t i = 0; rc == 0 && atomic_load_explicit(&v->built, memory_order_relaxed) &&
                         i < seg->nblobs - seg->nserving;
         i++)
        rc = put_id(v, &seg->blobs[i].id, seg->first_blob + i, e);
    pthread_mutex_unlock(&v->lock);
    return rc;
}
