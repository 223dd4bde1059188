#include "store/refs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/idmap.h"
#include "store/natsort.h"

/* How far a search reads: the files of this many checkpoints on each
 * side of the file's step, and this many of the files added last (those
 * of a run without steps, and anywhere else). Each file read is a body
 * read from the catalog, once a writer. */
#define NEAR_STEPS 8
#define LATEST_FILES 32

/* A live tensor file, by inode number. Its tensors are indexed when a
 * search first weighs it (its body read then), under a generation of
 * their own: content that changes (a file overwritten in a mount keeps
 * its inode number) is indexed again under a new one. */
typedef struct {
    const tf_entry *ent; /* as of the last sync; NULL: gone */
    uint64_t seen;       /* the sync that last saw it */
    uint64_t stamp;      /* of the content indexed (content_stamp), while gen */
    uint64_t gen;        /* its tensors' generation; 0: not indexed */
    char *path;          /* where `place` was parsed from; NULL: unplaced */
    tf_ckpt_path place;
    uint64_t run;        /* index into runs, while placed */
} record;

/* The live files of one run: those at a step in the order of their
 * steps (tf_natcmp; equal steps by inode number, the order added), those
 * without one by inode number. The nearest checkpoints of a file are
 * then a binary search away. */
typedef struct {
    uint64_t *at_step, *stepless;
    size_t n_at_step, at_step_cap, n_stepless, stepless_cap;
} run_files;

struct tf_ref_index {
    const tf_archive *ar; /* of the last sync */
    uint64_t syncs, gens;
    record *records;
    size_t nrecords, records_cap;
    tf_idmap by_ino;      /* inode number -> record */
    run_files *runs;
    size_t nruns, runs_cap;
    tf_idmap by_run;      /* run key -> run */
    tf_idmap by_tensor;   /* identity, record and generation -> tensor */
    uint64_t latest[LATEST_FILES]; /* live records, latest added first */
    size_t nlatest;
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

/* The key of a tensor of identity `ident` in record rec, indexed under
 * generation gen. */
static tf_blob_id tensor_key(const tf_blob_id *ident, uint64_t rec, uint64_t gen)
{
    uint8_t key[sizeof ident->b + 16];
    memcpy(key, ident->b, sizeof ident->b);
    tf_le64_put(key + sizeof ident->b, rec);
    tf_le64_put(key + sizeof ident->b + 8, gen);
    return tf_blob_id_of(key, sizeof key);
}

static tf_blob_id ino_key(uint64_t ino)
{
    uint8_t key[8];
    tf_le64_put(key, ino);
    return tf_blob_id_of(key, sizeof key);
}

/* What says which tensors a file has, from its header where the catalog
 * keeps its body in a page of its own (format version 2: a new body is
 * a new page), else from its body (held by every open of version 1):
 * its header bytes, stored in its first chunks (the same slots only for
 * the same bytes) or inline. */
static uint64_t content_stamp(const tf_entry *ent)
{
    if (ent->body.len) {
        uint64_t key[3] = { ent->body.off, ent->body.len, ent->body.hash };
        return tf_hash64(key, sizeof key);
    }
    uint64_t header = ent->verbatim_chunks < ent->nchunks ? ent->verbatim_chunks : ent->nchunks;
    uint64_t key[3] = {
        ent->ntensors, ent->names_len,
        ent->verbatim ? tf_hash64(ent->verbatim, ent->verbatim_len)
                      : tf_hash64(ent->chunks, header * sizeof *ent->chunks),
    };
    return tf_hash64(key, sizeof key);
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
    for (size_t i = 0; i < ix->nruns; i++) {
        free(ix->runs[i].at_step);
        free(ix->runs[i].stepless);
    }
    free(ix->records);
    free(ix->runs);
    tf_idmap_free(&ix->by_ino);
    tf_idmap_free(&ix->by_run);
    tf_idmap_free(&ix->by_tensor);
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

/* The files of a run; NULL when there are none and `make` is false, or
 * when out of memory. (Run keys whose ids collide share one: searches
 * check the run.) */
static run_files *run_of(tf_ref_index *ix, const char *run, bool make)
{
    tf_blob_id key = tf_blob_id_of(run, strlen(run));
    uint64_t at;
    if (tf_idmap_get(&ix->by_run, &key, &at))
        return &ix->runs[at];
    if (!make || grow((void **)&ix->runs, &ix->runs_cap, ix->nruns + 1, sizeof *ix->runs) < 0 ||
        tf_idmap_put(&ix->by_run, &key, ix->nruns) < 0)
        return NULL;
    ix->runs[ix->nruns] = (run_files){ 0 };
    return &ix->runs[ix->nruns++];
}

/* Whether record a sorts before record b in a run's list. */
static bool before(const tf_ref_index *ix, uint64_t a, uint64_t b, bool by_step)
{
    const record *ra = &ix->records[a], *rb = &ix->records[b];
    int c = by_step ? tf_natcmp(ra->place.step, rb->place.step) : 0;
    return c ? c < 0 : ra->ent->ino < rb->ent->ino;
}

/* The first position in s->at_step whose step is after `step` (strictly,
 * or with `or_equal` at it too). */
static size_t step_bound(const tf_ref_index *ix, const run_files *s, const char *step,
                         bool or_equal)
{
    size_t lo = 0, hi = s->n_at_step;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = tf_natcmp(ix->records[s->at_step[mid]].place.step, step);
        if (c < 0 || (c == 0 && !or_equal))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Inserts rec into the sorted list, or takes it out. */
static int list_insert(const tf_ref_index *ix, uint64_t **list, size_t *n, size_t *cap,
                       uint64_t rec, bool by_step)
{
    if (grow((void **)list, cap, *n + 1, sizeof **list) < 0)
        return -1;
    size_t lo = 0, hi = *n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (before(ix, (*list)[mid], rec, by_step))
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(*list + lo + 1, *list + lo, (*n - lo) * sizeof **list);
    (*list)[lo] = rec;
    (*n)++;
    return 0;
}

static void list_drop(uint64_t *list, size_t *n, uint64_t rec)
{
    for (size_t i = 0; i < *n; i++)
        if (list[i] == rec) {
            memmove(list + i, list + i + 1, (*n - i - 1) * sizeof *list);
            (*n)--;
            return;
        }
}

/* Takes record rec out of its run (before it moves or goes). */
static void unplace(tf_ref_index *ix, uint64_t rec)
{
    record *r = &ix->records[rec];
    run_files *s = &ix->runs[r->run];
    if (r->place.step)
        list_drop(s->at_step, &s->n_at_step, rec);
    else
        list_drop(s->stepless, &s->n_stepless, rec);
    free(r->path);
    r->path = NULL;
    tf_ckpt_path_free(&r->place);
}

/* Files record rec in the run of its path. */
static int place(tf_ref_index *ix, uint64_t rec, const char *path)
{
    record *r = &ix->records[rec];
    char *copy = strdup(path);
    if (!copy || tf_ckpt_path_parse(path, &r->place) < 0) {
        free(copy);
        return -1;
    }
    run_files *s = run_of(ix, r->place.run, true);
    int rc = !s ? -1
             : r->place.step
                 ? list_insert(ix, &s->at_step, &s->n_at_step, &s->at_step_cap, rec, true)
                 : list_insert(ix, &s->stepless, &s->n_stepless, &s->stepless_cap, rec, false);
    if (rc < 0) { /* left unplaced */
        free(copy);
        tf_ckpt_path_free(&r->place);
        return -1;
    }
    r->path = copy;
    r->run = (uint64_t)(s - ix->runs);
    return 0;
}

/* The record of a live tensor file, made when new. */
static int record_of(tf_ref_index *ix, const tf_entry *ent, uint64_t *rec)
{
    tf_blob_id key = ino_key(ent->ino);
    if (tf_idmap_get(&ix->by_ino, &key, rec))
        return 0;
    if (grow((void **)&ix->records, &ix->records_cap, ix->nrecords + 1, sizeof *ix->records) < 0 ||
        tf_idmap_put(&ix->by_ino, &key, ix->nrecords) < 0)
        return -1;
    *rec = ix->nrecords++;
    ix->records[*rec] = (record){ 0 };
    return 0;
}

/* Keeps rec among the LATEST_FILES latest added. */
static void note_latest(tf_ref_index *ix, uint64_t rec)
{
    uint64_t ino = ix->records[rec].ent->ino;
    size_t at = ix->nlatest;
    while (at > 0 && ix->records[ix->latest[at - 1]].ent->ino < ino)
        at--;
    if (at == LATEST_FILES)
        return;
    size_t n = ix->nlatest < LATEST_FILES ? ix->nlatest : LATEST_FILES - 1;
    memmove(ix->latest + at + 1, ix->latest + at, (n - at) * sizeof *ix->latest);
    ix->latest[at] = rec;
    ix->nlatest = n + 1;
}

int tf_ref_index_sync(tf_ref_index *ix, const tf_archive *ar, tf_error *e)
{
    ix->ar = ar;
    ix->syncs++;
    ix->nlatest = 0;
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (!tf_entry_is_tensor_file(ent))
            continue;
        uint64_t rec;
        if (record_of(ix, ent, &rec) < 0)
            return tf_fail(e, ENOMEM, "out of memory");
        record *r = &ix->records[rec];
        r->ent = ent;
        r->seen = ix->syncs;
        if (r->gen && content_stamp(ent) != r->stamp)
            r->gen = 0;
        if (r->path && strcmp(r->path, ent->path) != 0)
            unplace(ix, rec);
        if (!r->path && place(ix, rec, ent->path) < 0)
            return tf_fail(e, ENOMEM, "out of memory");
        note_latest(ix, rec);
    }
    for (size_t i = 0; i < ix->nrecords; i++) {
        record *r = &ix->records[i];
        if (r->seen == ix->syncs)
            continue;
        if (r->path)
            unplace(ix, i);
        r->ent = NULL;
        r->gen = 0;
    }
    return 0;
}

/* Indexes the tensors of record rec by identity, its body read first. */
static int index_tensors(tf_ref_index *ix, uint64_t rec, tf_error *e)
{
    record *r = &ix->records[rec];
    if (r->gen)
        return 0;
    if (tf_archive_entry_body(ix->ar, r->ent, e) < 0)
        return -1;
    r->stamp = content_stamp(r->ent);
    uint64_t gen = ++ix->gens;
    for (uint64_t t = 0; t < r->ent->ntensors; t++) {
        const tf_tensor_span *ts = &r->ent->tensors[t];
        tf_blob_id id = identity(tf_tensor_name(r->ent, t), ts->dtype, ts->nbytes);
        tf_blob_id key = tensor_key(&id, rec, gen);
        if (tf_idmap_put(&ix->by_tensor, &key, t) < 0)
            return tf_fail(e, ENOMEM, "out of memory");
    }
    r->gen = gen;
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
    return a->rec->ent->ino > b->rec->ent->ino; /* the latest added */
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

/* What a search is for, and the best found so far. */
typedef struct {
    tf_ref_index *ix;
    const tf_ckpt_path *at;
    const char *want;
    tf_blob_id ident;
    uint8_t dtype;
    uint64_t nbytes;
    tf_tensor_ref best;
    rank best_rank;
    bool later; /* a later checkpoint of the run may hold the tensor */
    tf_error *e;
} search;

/* Weighs record rec; its tier (0: it cannot serve, or does not hold the
 * tensor), or -1 on an error. */
static int consider(search *q, uint64_t rec)
{
    if (index_tensors(q->ix, rec, q->e) < 0)
        return -1;
    const record *r = &q->ix->records[rec];
    tf_blob_id key = tensor_key(&q->ident, rec, r->gen);
    uint64_t t;
    if (!tf_idmap_get(&q->ix->by_tensor, &key, &t))
        return 0;
    /* Identities may collide. */
    const tf_tensor_span *ts = &r->ent->tensors[t];
    if (ts->dtype != q->dtype || ts->nbytes != q->nbytes ||
        strcmp(unwrapped(tf_tensor_name(r->ent, t)), q->want) != 0)
        return 0;
    rank k = { tier_of(r, q->at), r, same(r->place.role, q->at->role) };
    if (k.tier && (!q->best.ent || better(&k, &q->best_rank))) {
        q->best = (tf_tensor_ref){ r->ent, t, k.tier == 1, false };
        q->best_rank = k;
    }
    return k.tier;
}

/* Weighs the files of s->at_step from position i on, walking by `dir`
 * (+1 or -1) a step at a time, up to NEAR_STEPS steps, until a step
 * holds the tensor with tier `tier`: 1 when one did, 0 when none did, -1
 * on an error. *more is set when steps were left unread. */
static int walk_steps(search *q, const run_files *s, size_t i, int dir, int tier, bool *more)
{
    const char *step = NULL;
    int steps = 0, found = 0;
    *more = false;
    for (; i < s->n_at_step; i += (size_t)dir) {
        const record *r = &q->ix->records[s->at_step[i]];
        if (!step || tf_natcmp(r->place.step, step) != 0) {
            if (found || steps == NEAR_STEPS) {
                *more = !found;
                break;
            }
            step = r->place.step;
            steps++;
        }
        int k = consider(q, s->at_step[i]);
        if (k < 0)
            return -1;
        found |= k == tier;
    }
    return found;
}

/* Weighs the last `n` records of list (sorted by inode number). */
static int consider_latest(search *q, const uint64_t *list, size_t n)
{
    for (size_t i = n > LATEST_FILES ? n - LATEST_FILES : 0; i < n; i++)
        if (consider(q, list[i]) < 0)
            return -1;
    return 0;
}

/* Preferences 1 and 2 for a file at a step, from the files of its run:
 * the nearest earlier step holding the tensor (and files of the run
 * without a step), else the nearest later one. */
static int find_in_run(search *q, const run_files *s)
{
    size_t below = step_bound(q->ix, s, q->at->step, true);
    size_t above = step_bound(q->ix, s, q->at->step, false);
    bool more;
    if (walk_steps(q, s, below - 1, -1, 3, &more) < 0 ||
        consider_latest(q, s->stepless, s->n_stepless) < 0)
        return -1;
    /* Whether a later checkpoint holds it, and the nearest one; unread
     * checkpoints may. */
    int later = walk_steps(q, s, above, 1, 2, &more);
    if (later < 0)
        return -1;
    q->later = later || more;
    return 0;
}

int tf_ref_find(tf_ref_index *ix, const tf_ckpt_path *at, const char *name, uint8_t dtype,
                uint64_t nbytes, tf_tensor_ref *out, tf_error *e)
{
    search q = { .ix = ix, .at = at, .want = unwrapped(name), .dtype = dtype, .nbytes = nbytes,
                 .ident = identity(name, dtype, nbytes), .e = e };
    const run_files *s = run_of(ix, at->run, false);
    int rc = 0;
    if (s && at->step)
        rc = find_in_run(&q, s);
    else if (s)
        rc = consider_latest(&q, s->stepless, s->n_stepless);
    /* Where the run holds it nowhere near, the files added last. */
    for (size_t i = 0; rc == 0 && !q.best.ent && i < ix->nlatest; i++)
        rc = consider(&q, ix->latest[i]) < 0 ? -1 : 0;
    if (rc < 0)
        return -1;
    q.best.newest = q.best_rank.tier == 3 && !q.later;
    *out = q.best;
    return 0;
}

/* Number of tensor files of the run of `at` at other steps than its
 * (with `later`: at later ones only). */
static uint64_t run_files_count(tf_ref_index *ix, const tf_ckpt_path *at, bool later)
{
    const run_files *s = at->step ? run_of(ix, at->run, false) : NULL;
    if (!s)
        return 0;
    size_t below = step_bound(ix, s, at->step, true), above = step_bound(ix, s, at->step, false);
    return s->n_at_step - above + (later ? 0 : below);
}

uint64_t tf_ref_run_files(tf_ref_index *ix, const tf_ckpt_path *at)
{
    return run_files_count(ix, at, false);
}

bool tf_ref_run_has_later(tf_ref_index *ix, const tf_ckpt_path *at)
{
    return run_files_count(ix, at, true) > 0;
}
