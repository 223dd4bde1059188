#include "common/idmap.h"

#include <stdlib.h>

/* The pairs, in the order put, indexed by their ids. */

static const tf_blob_id *id_of_pair(const void *pairs, uint64_t pos)
{
    return &((const tf_idmap_pair *)pairs)[pos].id;
}

/* Room for n pairs in all. */
static int room_for(tf_idmap *m, uint64_t n)
{
    if (n <= m->pairs_cap)
        return 0;
    if (n > SIZE_MAX / 2 / sizeof *m->pairs)
        return -1;
    uint64_t cap = m->pairs_cap ? m->pairs_cap : 64;
    while (cap < n)
        cap *= 2;
    tf_idmap_pair *p = realloc(m->pairs, cap * sizeof *p);
    if (!p)
        return -1;
    m->pairs = p;
    m->pairs_cap = cap;
    return 0;
}

int tf_idmap_reserve(tf_idmap *m, uint64_t n)
{
    return room_for(m, n) < 0 ? -1 : tf_id_index_reserve(&m->index, n, id_of_pair, m->pairs);
}

int tf_idmap_get(const tf_idmap *m, const tf_blob_id *id, uint64_t *value)
{
    uint64_t pos;
    if (!tf_id_index_get(&m->index, id, id_of_pair, m->pairs, &pos))
        return 0;
    *value = m->pairs[pos].value;
    return 1;
}

int tf_idmap_put(tf_idmap *m, const tf_blob_id *id, uint64_t value)
{
    uint64_t pos = m->index.count;
    if (room_for(m, pos + 1) < 0)
        return -1;
    /* Kept when the id is new (the index counts it); else the next put
     * writes over it. */
    m->pairs[pos] = (tf_idmap_pair){ *id, value };
    return tf_id_index_put(&m->index, id, pos, id_of_pair, m->pairs);
}

void tf_idmap_free(tf_idmap *m)
{
    free(m->pairs);
    tf_id_index_free(&m->index);
    *m = (tf_idmap){ 0 };
}
