#include "store/catalog_query.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "format/tensor_format.h"
#include "store/natsort.h"

typedef struct {
    uint64_t ino;
    size_t idx;
} ino_order;

static int cmp_ino(const void *a, const void *b)
{
    uint64_t x = ((const ino_order *)a)->ino, y = ((const ino_order *)b)->ino;
    return x < y ? -1 : x > y;
}

/* The indices of the entries in commit order (ascending ino): a malloc'd
 * array of tf_archive_nentries() elements, or NULL when out of memory. */
static size_t *commit_order(const tf_archive *ar)
{
    size_t n = tf_archive_nentries(ar);
    ino_order *by_ino = malloc((n ? n : 1) * sizeof *by_ino);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (by_ino && order) {
        for (size_t i = 0; i < n; i++)
            by_ino[i] = (ino_order){ tf_archive_entry(ar, i)->ino, i };
        qsort(by_ino, n, sizeof *by_ino, cmp_ino);
        for (size_t k = 0; k < n; k++)
            order[k] = by_ino[k].idx;
    } else {
        free(order);
        order = NULL;
    }
    free(by_ino);
    return order;
}

/* Gives blob b (and its model) to owner when nobody has it yet. */
static int claim_blob(const tf_archive *ar, uint64_t *owners, uint64_t b, uint64_t owner,
                      tf_error *e)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    if (b >= nblobs || owners[b])
        return 0;
    owners[b] = owner;
    tf_blob blob;
    if (tf_archive_blob(ar, b, &blob, e) < 0)
        return -1;
    if (blob.model && blob.model - 1 < nblobs && !owners[blob.model - 1])
        owners[blob.model - 1] = owner;
    return 0;
}

/* A zeroed array of one `size`-byte element per blob, and the entries'
 * commit order in *order; NULL (and nothing) when out of memory. */
static void *per_blob(const tf_archive *ar, size_t size, size_t **order, tf_error *e)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    void *per = calloc(nblobs ? nblobs : 1, size);
    *order = commit_order(ar);
    if (!per || !*order) {
        free(per);
        free(*order);
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    return per;
}

uint64_t *tf_archive_blob_owners(const tf_archive *ar, tf_error *e)
{
    size_t *order;
    uint64_t *owners = per_blob(ar, sizeof *owners, &order, e);
    if (!owners)
        return NULL;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (!tf_entry_is_regular(ent))
            continue;
        for (uint64_t c = 0; rc == 0 && c < ent->nchunks; c++)
            rc = claim_blob(ar, owners, ent->chunks[c], order[k] + 1, e);
    }
    free(order);
    if (rc < 0) {
        free(owners);
        return NULL;
    }
    return owners;
}

tf_blob_user *tf_archive_blob_tensors(const tf_archive *ar, tf_error *e)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    size_t *order;
    tf_blob_user *users = per_blob(ar, sizeof *users, &order, e);
    if (!users)
        return NULL;
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (!tf_entry_is_tensor_file(ent))
            continue;
        for (uint64_t t = 0; t < ent->ntensors; t++) {
            uint64_t n = tf_tensor_nchunks(ar, ent, t);
            for (uint64_t j = 0; j < n; j++) {
                uint64_t b = ent->chunks[ent->tensors[t].first_chunk + j];
                if (b < nblobs && !users[b].entry)
                    users[b] = (tf_blob_user){ order[k] + 1, t };
            }
        }
    }
    free(order);
    return users;
}

/* Bytes of one element of the tensor; 1 for a dtype this build does not
 * know (the catalog decoder rejects those; stay safe). */
static unsigned element_size(const tf_tensor_span *ts)
{
    const tf_dtype_info *info = tf_dtype_get(ts->dtype);
    return info ? info->size : 1;
}

uint64_t tf_tensor_chunk_bytes(const tf_archive *ar, const tf_tensor_span *ts)
{
    return (uint64_t)element_size(ts) << tf_archive_chunk_shift(ar);
}

uint64_t tf_tensor_nchunks(const tf_archive *ar, const tf_entry *ent, uint64_t t)
{
    const tf_tensor_span *ts = &ent->tensors[t];
    uint64_t n = tf_chunk_count(ts->nbytes, element_size(ts), tf_archive_chunk_shift(ar));
    uint64_t left = ts->first_chunk < ent->nchunks ? ent->nchunks - ts->first_chunk : 0;
    return n < left ? n : left;
}

uint64_t tf_tensor_of_chunk(const tf_archive *ar, const tf_entry *ent, uint64_t c)
{
    /* The last tensor starting at or before c: tensors without chunks
     * (empty ones) share first_chunk with the tensor after them, which is
     * the one that owns the chunk. */
    uint64_t lo = 0, hi = ent->ntensors;
    if (!tf_entry_is_tensor_file(ent) || hi == 0 || ent->tensors[0].first_chunk > c)
        return ent->ntensors;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ent->tensors[mid].first_chunk <= c)
            lo = mid;
        else
            hi = mid;
    }
    return c - ent->tensors[lo].first_chunk < tf_tensor_nchunks(ar, ent, lo) ? lo
                                                                             : ent->ntensors;
}

typedef struct {
    char *key; /* the path with each '/' as '\1' */
    size_t idx;
} path_key;

static int cmp_path_key(const void *a, const void *b)
{
    return tf_natcmp(((const path_key *)a)->key, ((const path_key *)b)->key);
}

size_t *tf_archive_natural_order(const tf_archive *ar)
{
    /* Paths hold no control characters, so with '/' as '\1' (below every
     * byte a name may hold) tf_natcmp of whole paths orders them component
     * by component: a directory sorts just before its contents, and
     * "run-2/x" before "run-2-b" (a plain '/' would sort after '-'). */
    size_t n = tf_archive_nentries(ar), made = 0;
    path_key *keys = malloc((n ? n : 1) * sizeof *keys);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    for (; keys && order && made < n; made++) {
        char *key = strdup(tf_archive_entry(ar, made)->path);
        if (!key)
            break;
        for (char *p = strchr(key, '/'); p; p = strchr(p + 1, '/'))
            *p = '\1';
        keys[made] = (path_key){ key, made };
    }
    if (keys && order && made == n) {
        qsort(keys, n, sizeof *keys, cmp_path_key);
        for (size_t k = 0; k < n; k++)
            order[k] = keys[k].idx;
    } else {
        free(order);
        order = NULL;
    }
    for (size_t k = 0; keys && k < made; k++)
        free(keys[k].key);
    free(keys);
    return order;
}

const char *tf_format_name(unsigned id)
{
    const tf_tensor_format *f = tf_tensor_format_get(id);
    return f ? f->name : NULL;
}

const char *tf_codec_name(unsigned id)
{
    const tf_codec *c = tf_codec_get(id);
    return c ? c->name : "?";
}
