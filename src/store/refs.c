#include "store/refs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/idmap.h"
#include "store/natsort.h"

#define NONE UINT64_MAX

/* A tensor file the index has seen, by its key (record_key: moves keep
 * it, a record's tensors never change). */
typedef struct {
    uint64_t ino;
    const tf_entry *ent; /* as of the last sync; NULL: gone */
    char *path;          /* where `place` was parsed from */
    tf_ckpt_path place;
    uint64_t first_posting; /* tensor t's posting is first_posting + t */
} record;

/* One tensor of a record; postings of one identity are linked. */
typedef struct {
    uint64_t record, tensor, next;
} posting;

/* The postings of one identity in one run: those of files at a step in
 * the order of their steps (tf_natcmp; equal steps in the order added),
 * those of files without a step apart. The nearest earlier and later
 * checkpoints holding a tensor are then a binary search away, where a
 * walk over every posting of its identity costs a run of N checkpoints
 * O(N) a tensor, O(N^2) over the run. Postings of gone files stay (they
 * are skipped); a moved file's are moved. */
typedef struct {
    uint64_t *at_step, *stepless;
    size_t n_at_step, at_step_cap, n_stepless, stepless_cap;
} series;

struct tf_ref_index {
    record *records;
    size_t nrecords, records_cap;
    tf_idmap by_key;   /* record_key -> record */
    posting *postings;
    size_t npostings, postings_cap;
    tf_idmap by_ident; /* identity -> first posting */
    series *series;
    size_t nseries, series_cap;
    tf_idmap by_series; /* identity and run -> series */
};

/* The name without wrapper prefixes. */
static const char *unwrapped(const char *name)
{
    static const char *const prefixes[] = { "_orig_mod.", "module." };
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
            size_t n = strlen(prefixes[i]);
            if (strncmp(name, prefixes[i], n) == 0 && name[n]) {
                name += n;
                again = true;
            }
        }
    }
    return name;
}

/* Names are at most TF_TENSOR_NAME_MAX bytes (the catalog and the
 * formats refuse longer ones). */
static tf_blob_id identity(const char *name, uint8_t dtype, uint64_t nbytes)
{
    uint8_t key[TF_TENSOR_NAME_MAX + 9];
    const char *n = unwrapped(name);
    size_t len = strnlen(n, TF_TENSOR_NAME_MAX);
    memcpy(key, n, len);
    key[len] = dtype;
    tf_le64_put(key + len + 1, nbytes);
    return tf_blob_id_of(key, len + 9);
}

/* The key of an identity's series in the run whose key hashes to
 * run_hash. (Keys that collide share a series: lookups check the run.) */
static tf_blob_id series_key(const tf_blob_id *ident, uint64_t run_hash)
{
    uint8_t key[sizeof ident->b + 8];
    memcpy(key, ident->b, sizeof ident->b);
    tf_le64_put(key + sizeof ident->b, run_hash);
    return tf_blob_id_of(key, sizeof key);
}

static uint64_t run_hash(const char *run)
{
    return tf_hash64(run, strlen(run));
}

tf_ref_index *tf_ref_index_new(void)
{
    return calloc(1, sizeof(tf_ref_index));
}

void tf_ref_index_free(tf_ref_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->nrecords; i++) {
        free(ix->records[i].path);
        tf_ckpt_path_free(&ix->records[i].place);
    }
    for (size_t i = 0; i < ix->nseries; i++) {
        free(ix->series[i].at_step);
        free(ix->series[i].stepless);
    }
    free(ix->records);
    free(ix->postings);
    free(ix->series);
    tf_idmap_free(&ix->by_key);
    tf_idmap_free(&ix->by_ident);
    tf_idmap_free(&ix->by_series);
    free(ix);
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* A record's key: the file's inode number, and what says which tensors
 * it has. A file overwritten in a mount keeps its inode number with new
 * content, whose tensors need postings of their own. Its header bytes
 * say which tensors it has; they are stored in its first chunks, the same
 * slots only for the same bytes (or inline, in entries of release 1). */
static tf_blob_id record_key(const tf_entry *ent)
{
    uint64_t header = ent->verbatim_chunks < ent->nchunks ? ent->verbatim_chunks : ent->nchunks;
    uint64_t key[4] = {
        ent->ino, ent->ntensors, ent->names_len,
        ent->verbatim ? tf_hash64(ent->verbatim, ent->verbatim_len)
                      : tf_hash64(ent->chunks, header * sizeof *ent->chunks),
    };
    return tf_blob_id_of(key, sizeof key);
}

static const record *record_of(const tf_ref_index *ix, uint64_t p)
{
    return &ix->records[ix->postings[p].record];
}

static tf_blob_id posting_identity(const tf_ref_index *ix, uint64_t p)
{
    const posting *po = &ix->postings[p];
    const tf_entry *ent = ix->records[po->record].ent;
    const tf_tensor_span *ts = &ent->tensors[po->tensor];
    return identity(tf_tensor_name(ent, po->tensor), ts->dtype, ts->nbytes);
}

/* The series of an identity in a run; NULL when there is none and `make`
 * is false, or when out of memory. */
static series *series_of(tf_ref_index *ix, const tf_blob_id *ident, uint64_t run_hash, bool make)
{
    tf_blob_id key = series_key(ident, run_hash);
    uint64_t at;
    if (tf_idmap_get(&ix->by_series, &key, &at))
        return &ix->series[at];
    if (!make ||
        grow((void **)&ix->series, &ix->series_cap, ix->nseries + 1, sizeof *ix->series) < 0 ||
        tf_idmap_put(&ix->by_series, &key, ix->nseries) < 0)
        return NULL;
    ix->series[ix->nseries] = (series){ 0 };
    return &ix->series[ix->nseries++];
}

/* The first position in s->at_step whose step is after `step` (strictly,
 * or with `or_equal` at it too). */
static size_t step_bound(const tf_ref_index *ix, const series *s, const char *step, bool or_equal)
{
    size_t lo = 0, hi = s->n_at_step;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = tf_natcmp(record_of(ix, s->at_step[mid])->place.step, step);
        if (c < 0 || (c == 0 && !or_equal))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Puts posting p in its series: its record's run and step. */
static int series_insert(tf_ref_index *ix, uint64_t p, const tf_blob_id *ident)
{
    const tf_ckpt_path *place = &record_of(ix, p)->place;
    series *s = series_of(ix, ident, run_hash(place->run), true);
    if (!s)
        return -1;
    if (!place->step) {
        if (grow((void **)&s->stepless, &s->stepless_cap, s->n_stepless + 1,
                 sizeof *s->stepless) < 0)
            return -1;
        s->stepless[s->n_stepless++] = p;
        return 0;
    }
    if (grow((void **)&s->at_step, &s->at_step_cap, s->n_at_step + 1, sizeof *s->at_step) < 0)
        return -1;
    size_t at = step_bound(ix, s, place->step, false);
    memmove(s->at_step + at + 1, s->at_step + at, (s->n_at_step - at) * sizeof *s->at_step);
    s->at_step[at] = p;
    s->n_at_step++;
    return 0;
}

static void drop_from(uint64_t *list, size_t *n, uint64_t p)
{
    for (size_t i = 0; i < *n; i++)
        if (list[i] == p) {
            memmove(list + i, list + i + 1, (*n - i - 1) * sizeof *list);
            (*n)--;
            return;
        }
}

/* Takes posting p out of its series, before its record moves. */
static void series_remove(tf_ref_index *ix, uint64_t p, const tf_blob_id *ident)
{
    const tf_ckpt_path *place = &record_of(ix, p)->place;
    series *s = series_of(ix, ident, run_hash(place->run), false);
    if (s && place->step)
        drop_from(s->at_step, &s->n_at_step, p);
    else if (s)
        drop_from(s->stepless, &s->n_stepless, p);
}

static int add_postings(tf_ref_index *ix, uint64_t rec, const tf_entry *ent)
{
    if (grow((void **)&ix->postings, &ix->postings_cap, ix->npostings + ent->ntensors,
             sizeof *ix->postings) < 0)
        return -1;
    ix->records[rec].first_posting = ix->npostings;
    for (uint64_t t = 0; t < ent->ntensors; t++) {
        const tf_tensor_span *ts = &ent->tensors[t];
        tf_blob_id id = identity(tf_tensor_name(ent, t), ts->dtype, ts->nbytes);
        uint64_t head;
        size_t p = ix->npostings++;
        ix->postings[p] = (posting){ rec, t, NONE };
        if (tf_idmap_get(&ix->by_ident, &id, &head)) {
            /* Keep the head where the map points; link the new one second. */
            ix->postings[p].next = ix->postings[head].next;
            ix->postings[head].next = p;
        } else if (tf_idmap_put(&ix->by_ident, &id, p) < 0) {
            return -1;
        }
        if (series_insert(ix, p, &id) < 0)
            return -1;
    }
    return 0;
}

/* Places record rec at ent's path: parsed anew when it is new or moved,
 * its postings then (re)filed in the series of its new run and step. */
static int place_record(tf_ref_index *ix, uint64_t rec, const tf_entry *ent)
{
    record *r = &ix->records[rec];
    bool is_new = !r->path;
    if (!is_new && strcmp(r->path, ent->path) == 0)
        return 0;
    for (uint64_t t = 0; !is_new && t < ent->ntensors; t++) {
        tf_blob_id id = posting_identity(ix, r->first_posting + t);
        series_remove(ix, r->first_posting + t, &id);
    }
    free(r->path);
    tf_ckpt_path_free(&r->place);
    if (!(r->path = strdup(ent->path)) || tf_ckpt_path_parse(ent->path, &r->place) < 0)
        return -1;
    if (is_new)
        return add_postings(ix, rec, ent);
    for (uint64_t t = 0; t < ent->ntensors; t++) {
        tf_blob_id id = posting_identity(ix, r->first_posting + t);
        if (series_insert(ix, r->first_posting + t, &id) < 0)
            return -1;
    }
    return 0;
}

int tf_ref_index_sync(tf_ref_index *ix, const tf_archive *ar, tf_error *e)
{
    for (size_t i = 0; i < ix->nrecords; i++)
        ix->records[i].ent = NULL;
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (!tf_entry_is_tensor_file(ent))
            continue;
        tf_blob_id key = record_key(ent);
        uint64_t rec;
        if (!tf_idmap_get(&ix->by_key, &key, &rec)) {
            if (grow((void **)&ix->records, &ix->records_cap, ix->nrecords + 1, sizeof *ix->records) < 0)
                return tf_fail(e, ENOMEM, "out of memory");
            rec = ix->nrecords++;
            ix->records[rec] = (record){ .ino = ent->ino };
            if (tf_idmap_put(&ix->by_key, &key, rec) < 0)
                return tf_fail(e, ENOMEM, "out of memory");
        }
        ix->records[rec].ent = ent;
        if (place_record(ix, rec, ent) < 0)
            return tf_fail(e, ENOMEM, "out of memory");
    }
    return 0;
}

/* A candidate's rank: larger is better. */
typedef struct {
    int tier;          /* 3: earlier in the run, 2: later in the run, 1: elsewhere */
    const record *rec;
    bool same_role;
} rank;

static bool better(const rank *a, const rank *b)
{
    if (a->tier != b->tier)
        return a->tier > b->tier;
    if (a->tier == 3 || a->tier == 2) {
        int c = a->rec->place.step && b->rec->place.step
                    ? tf_natcmp(a->rec->place.step, b->rec->place.step) : 0;
        if (c)
            return a->tier == 3 ? c > 0 : c < 0; /* nearest step */
        if (a->same_role != b->same_role)
            return a->same_role;
    }
    return a->rec->ino > b->rec->ino; /* the latest added */
}

static bool same(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* The tier of a candidate, 0 when it cannot serve. */
static int tier_of(const record *r, const tf_ckpt_path *at)
{
    if (strcmp(r->place.run, at->run) != 0)
        return 1;
    if (!at->step || !r->place.step)
        return 3; /* a run without steps: its files are versions */
    int c = tf_natcmp(r->place.step, at->step);
    return c < 0 ? 3 : c > 0 ? 2 : 0;
}

/* Whether a posting is the tensor asked for (identities may collide). */
static bool matches(const tf_ref_index *ix, const posting *po, const char *want, uint8_t dtype,
                    uint64_t nbytes)
{
    const record *r = &ix->records[po->record];
    if (!r->ent)
        return false;
    const tf_tensor_span *ts = &r->ent->tensors[po->tensor];
    return ts->dtype == dtype && ts->nbytes == nbytes &&
           strcmp(unwrapped(tf_tensor_name(r->ent, po->tensor)), want) == 0;
}

/* What a search is for, and the best found so far. */
typedef struct {
    const tf_ref_index *ix;
    const tf_ckpt_path *at;
    const char *want;
    uint8_t dtype;
    uint64_t nbytes;
    tf_tensor_ref best;
    rank best_rank;
    bool later; /* a candidate of tier 2 was met */
} search;

/* Weighs posting p; returns its tier (0: it cannot serve). */
static int consider(search *q, uint64_t p)
{
    const posting *po = &q->ix->postings[p];
    const record *r = &q->ix->records[po->record];
    if (!matches(q->ix, po, q->want, q->dtype, q->nbytes))
        return 0;
    rank k = { tier_of(r, q->at), r, same(r->place.role, q->at->role) };
    q->later |= k.tier == 2;
    if (k.tier && (!q->best.ent || better(&k, &q->best_rank))) {
        q->best = (tf_tensor_ref){ r->ent, po->tensor, k.tier == 1, false };
        q->best_rank = k;
    }
    return k.tier;
}

/* Weighs the postings of s at the first step met from position i on,
 * walking by `dir` (+1 or -1), that has one of `tier` (postings that
 * cannot serve and other runs' are passed over); true when there was
 * one. */
static bool consider_nearest(search *q, const series *s, size_t i, int dir, int tier)
{
    const char *step = NULL;
    for (; i < s->n_at_step; i += (size_t)dir) {
        const record *r = record_of(q->ix, s->at_step[i]);
        if (step && tf_natcmp(r->place.step, step) != 0)
            break;
        if (!step && consider(q, s->at_step[i]) == tier)
            step = r->place.step;
        else if (step)
            consider(q, s->at_step[i]);
    }
    return step != NULL;
}

/* Preferences 1 and 2 for a file at a step, from the series of its run:
 * the nearest earlier step holding the tensor (and files of the run
 * without a step), else the nearest later one. False when the run holds
 * the tensor nowhere else. */
static bool find_in_run(search *q, const tf_blob_id *ident)
{
    const series *s = series_of((tf_ref_index *)q->ix, ident, run_hash(q->at->run), false);
    if (!s)
        return false;
    size_t below = step_bound(q->ix, s, q->at->step, true);
    size_t above = step_bound(q->ix, s, q->at->step, false);
    consider_nearest(q, s, below - 1, -1, 3);
    for (size_t i = 0; i < s->n_stepless; i++)
        consider(q, s->stepless[i]);
    /* Whether a later checkpoint holds it, and the nearest one. */
    consider_nearest(q, s, above, 1, 2);
    return q->best.ent != NULL;
}

tf_tensor_ref tf_ref_find(const tf_ref_index *ix, const tf_ckpt_path *at, const char *name,
                          uint8_t dtype, uint64_t nbytes)
{
    search q = { .ix = ix, .at = at, .want = unwrapped(name), .dtype = dtype, .nbytes = nbytes };
    tf_blob_id id = identity(name, dtype, nbytes);
    uint64_t first;
    if (!tf_idmap_get(&ix->by_ident, &id, &first))
        return q.best;
    /* Without a step (or where the run holds it nowhere), every posting
     * of the identity is weighed. */
    if (!at->step || !find_in_run(&q, &id))
        for (uint64_t p = first; p != NONE; p = ix->postings[p].next)
            consider(&q, p);
    q.best.newest = q.best_rank.tier == 3 && !q.later;
    return q.best;
}

/* Number of tensor files of the run of `at` at other steps than its
 * (with `later`: at later ones only). */
static uint64_t run_files(const tf_ref_index *ix, const tf_ckpt_path *at, bool later)
{
    uint64_t n = 0;
    for (size_t i = 0; at->step && i < ix->nrecords; i++) {
        const record *r = &ix->records[i];
        if (!r->ent || !r->place.step || strcmp(r->place.run, at->run) != 0)
            continue;
        int c = tf_natcmp(r->place.step, at->step);
        n += later ? c > 0 : c != 0;
    }
    return n;
}

uint64_t tf_ref_run_files(const tf_ref_index *ix, const tf_ckpt_path *at)
{
    return run_files(ix, at, false);
}

bool tf_ref_run_has_later(const tf_ref_index *ix, const tf_ckpt_path *at)
{
    return run_files(ix, at, true) > 0;
}
