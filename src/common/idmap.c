#include "common/idmap.h"

#include <stdlib.h>
#include <string.h>

/* Slots hold value + 1 so that 0 marks an empty slot. */
static uint64_t slot_of(const tf_blob_id *id, uint64_t cap)
{
    uint64_t h;
    memcpy(&h, id->b, sizeof h);
    return h & (cap - 1);
}

static void insert(tf_blob_id *ids, uint64_t *values, uint64_t cap, const tf_blob_id *id, uint64_t v)
{
    uint64_t s = slot_of(id, cap);
    while (values[s])
        s = (s + 1) & (cap - 1);
    ids[s] = *id;
    values[s] = v + 1;
}

/* Moves the map into cap slots (a power of two, more than it holds). */
static int grow_to(tf_idmap *m, uint64_t cap)
{
    tf_blob_id *ids = malloc(cap * sizeof *ids);
    uint64_t *values = calloc(cap, sizeof *values);
    if (!ids || !values) {
        free(ids);
        free(values);
        return -1;
    }
    for (uint64_t s = 0; s < m->cap; s++)
        if (m->values[s])
            insert(ids, values, cap, &m->ids[s], m->values[s] - 1);
    free(m->ids);
    free(m->values);
    m->ids = ids;
    m->values = values;
    m->cap = cap;
    return 0;
}

int tf_idmap_reserve(tf_idmap *m, uint64_t n)
{
    if (n > UINT64_MAX / 4)
        return -1;
    uint64_t cap = m->cap ? m->cap : 256;
    while (n * 2 > cap)
        cap *= 2;
    return cap > m->cap ? grow_to(m, cap) : 0;
}

int tf_idmap_get(const tf_idmap *m, const tf_blob_id *id, uint64_t *value)
{
    if (!m->cap)
        return 0;
    for (uint64_t s = slot_of(id, m->cap); m->values[s]; s = (s + 1) & (m->cap - 1))
        if (tf_blob_id_eq(&m->ids[s], id)) {
            *value = m->values[s] - 1;
            return 1;
        }
    return 0;
}

int tf_idmap_put(tf_idmap *m, const tf_blob_id *id, uint64_t value)
{
    uint64_t old;
    if (tf_idmap_get(m, id, &old))
        return 0;
    if ((m->count + 1) * 2 > m->cap && grow_to(m, m->cap ? m->cap * 2 : 256) < 0)
        return -1;
    insert(m->ids, m->values, m->cap, id, value);
    m->count++;
    return 0;
}

void tf_idmap_free(tf_idmap *m)
{
    free(m->ids);
    free(m->values);
    *m = (tf_idmap){ 0 };
}
