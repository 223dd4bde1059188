#include "store/blob_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tf_blob_table_reserve(tf_blob_table *t, uint64_t cap, tf_error *e)
{
    if (cap > SIZE_MAX / sizeof *t->slots)
        return tf_fail(e, ENOMEM, "blob table: out of memory");
    tf_blob_slot *s = realloc(t->slots, cap * sizeof *s);
    if (!s)
        return tf_fail(e, ENOMEM, "blob table: out of memory");
    t->slots = s;
    t->cap = cap;
    return 0;
}

/* Where the wide record of idx is, or would go, in t->wide. */
static uint64_t wide_at(const tf_blob_table *t, uint64_t idx)
{
    uint64_t lo = 0, hi = t->nwide;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (t->wide[mid].idx < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const tf_blob *tf_blob_table_wide(const tf_blob_table *t, uint64_t idx)
{
    return &t->wide[wide_at(t, idx)].blob;
}

/* Keeps b whole as the wide record of idx. */
static int put_wide(tf_blob_table *t, uint64_t idx, const tf_blob *b, tf_error *e)
{
    uint64_t at = wide_at(t, idx);
    if (at < t->nwide && t->wide[at].idx == idx) {
        t->wide[at].blob = *b;
        return 0;
    }
    if (t->nwide == t->wide_cap) {
        uint64_t cap = t->wide_cap ? 2 * t->wide_cap : 16;
        tf_wide_blob *w = cap <= SIZE_MAX / sizeof *w ? realloc(t->wide, cap * sizeof *w) : NULL;
        if (!w)
            return tf_fail(e, ENOMEM, "blob table: out of memory");
        t->wide = w;
        t->wide_cap = cap;
    }
    memmove(&t->wide[at + 1], &t->wide[at], (t->nwide - at) * sizeof *t->wide);
    t->wide[at] = (tf_wide_blob){ idx, *b };
    t->nwide++;
    return 0;
}

/* Drops the wide record of idx, if it has one. */
static void drop_wide(tf_blob_table *t, uint64_t idx)
{
    uint64_t at = wide_at(t, idx);
    if (at == t->nwide || t->wide[at].idx != idx)
        return;
    memmove(&t->wide[at], &t->wide[at + 1], (t->nwide - at - 1) * sizeof *t->wide);
    t->nwide--;
}

int tf_blob_table_set(tf_blob_table *t, uint64_t idx, const tf_blob *b, tf_error *e)
{
    const bool fits = b->enc_len <= UINT32_MAX && b->raw_len <= UINT32_MAX &&
                      b->ref <= UINT32_MAX && b->model <= UINT32_MAX;
    if (!fits && put_wide(t, idx, b, e) < 0)
        return -1;
    if (fits && t->nwide) /* (the slot may be new: its old fields are not read) */
        drop_wide(t, idx);
    t->slots[idx] = (tf_blob_slot){
        .id = b->id, .offset = b->offset, .enc_hash = b->enc_hash,
        .enc_len = fits ? (uint32_t)b->enc_len : 0, .raw_len = fits ? (uint32_t)b->raw_len : 0,
        .ref = fits ? (uint32_t)b->ref : 0, .model = fits ? (uint32_t)b->model : 0,
        .codec = b->codec, .dtype = b->dtype, .wide = !fits,
    };
    return 0;
}

void tf_blob_table_free(tf_blob_table *t)
{
    free(t->slots);
    free(t->wide);
    *t = (tf_blob_table){ 0 };
}
