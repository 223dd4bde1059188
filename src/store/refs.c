#include "store/refs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/idmap.h"
#include "store/natsort.h"

#define NONE UINT64_MAX

/* A tensor file the index has seen, by inode number (moves keep it). */
typedef struct {
    uint64_t ino;
    const tf_entry *ent; /* as of the last sync; NULL: gone */
    char *path;          /* where `place` was parsed from */
    tf_ckpt_path place;
} record;

/* One tensor of a record; postings of one identity are linked. */
typedef struct {
    uint64_t record, tensor, next;
} posting;

struct tf_ref_index {
    record *records;
    size_t nrecords, records_cap;
    tf_idmap by_ino;   /* ino -> record */
    posting *postings;
    size_t npostings, postings_cap;
    tf_idmap by_ident; /* identity -> first posting */
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
    free(ix->records);
    free(ix->postings);
    tf_idmap_free(&ix->by_ino);
    tf_idmap_free(&ix->by_ident);
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

static tf_blob_id ino_key(uint64_t ino)
{
    tf_blob_id id = { 0 };
    tf_le64_put(id.b, tf_hash64(&ino, sizeof ino));
    tf_le64_put(id.b + 8, ino);
    return id;
}

static int add_postings(tf_ref_index *ix, uint64_t rec, const tf_entry *ent)
{
    if (grow((void **)&ix->postings, &ix->postings_cap, ix->npostings + ent->ntensors,
             sizeof *ix->postings) < 0)
        return -1;
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
    }
    return 0;
}

/* A record for ent, new or moved. */
static int place_record(record *r, const tf_entry *ent)
{
    if (r->path && strcmp(r->path, ent->path) == 0)
        return 0;
    free(r->path);
    tf_ckpt_path_free(&r->place);
    r->path = strdup(ent->path);
    return r->path && tf_ckpt_path_parse(ent->path, &r->place) == 0 ? 0 : -1;
}

int tf_ref_index_sync(tf_ref_index *ix, const tf_archive *ar, tf_error *e)
{
    for (size_t i = 0; i < ix->nrecords; i++)
        ix->records[i].ent = NULL;
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (!tf_entry_is_tensor_file(ent))
            continue;
        tf_blob_id key = ino_key(ent->ino);
        uint64_t rec;
        bool known = tf_idmap_get(&ix->by_ino, &key, &rec);
        if (!known) {
            if (grow((void **)&ix->records, &ix->records_cap, ix->nrecords + 1, sizeof *ix->records) < 0)
                return tf_fail(e, ENOMEM, "out of memory");
            rec = ix->nrecords++;
            ix->records[rec] = (record){ .ino = ent->ino };
            if (tf_idmap_put(&ix->by_ino, &key, rec) < 0 || add_postings(ix, rec, ent) < 0)
                return tf_fail(e, ENOMEM, "out of memory");
        }
        ix->records[rec].ent = ent;
        if (place_record(&ix->records[rec], ent) < 0)
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

tf_tensor_ref tf_ref_find(const tf_ref_index *ix, const tf_ckpt_path *at, const char *name,
                          uint8_t dtype, uint64_t nbytes)
{
    tf_tensor_ref best = { 0 };
    rank best_rank = { 0 };
    bool later = false;
    tf_blob_id id = identity(name, dtype, nbytes);
    uint64_t first;
    if (!tf_idmap_get(&ix->by_ident, &id, &first))
        return best;
    const char *want = unwrapped(name);
    for (uint64_t p = first; p != NONE; p = ix->postings[p].next) {
        const posting *po = &ix->postings[p];
        const record *r = &ix->records[po->record];
        if (!matches(ix, po, want, dtype, nbytes))
            continue;
        rank k = { tier_of(r, at), r, same(r->place.role, at->role) };
        later |= k.tier == 2;
        if (k.tier && (!best.ent || better(&k, &best_rank))) {
            best = (tf_tensor_ref){ r->ent, po->tensor, k.tier == 1, false };
            best_rank = k;
        }
    }
    best.newest = best_rank.tier == 3 && !later;
    return best;
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
