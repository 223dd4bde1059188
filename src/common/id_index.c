#include "common/id_index.h"

#include <stdlib.h>
#include <string.h>

/* A slot: 0 when empty, else the tag in the top 24 bits and pos + 1 in
 * the 40 below. The tag is taken from other bytes of the id than the
 * slot's position, so that ids probed together rarely share it. */
#define POS_BITS 40
#define POS_MASK ((((uint64_t)1) << POS_BITS) - 1)

static uint64_t home_of(const tf_blob_id *id, uint64_t cap)
{
    uint64_t h;
    memcpy(&h, id->b, sizeof h);
    return h & (cap - 1);
}

static uint64_t tag_of(const tf_blob_id *id)
{
    return (uint64_t)id->b[8] | (uint64_t)id->b[9] << 8 | (uint64_t)id->b[10] << 16;
}

static void insert(uint64_t *slots, uint64_t cap, const tf_blob_id *id, uint64_t slot)
{
    uint64_t s = home_of(id, cap);
    while (slots[s])
        s = (s + 1) & (cap - 1);
    slots[s] = slot;
}

/* Moves the index into cap slots (a power of two, more than it holds). */
static int grow_to(tf_id_index *x, uint64_t cap, tf_id_of *id_of, const void *table)
{
    uint64_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (uint64_t s = 0; s < x->cap; s++)
        if (x->slots[s])
            insert(slots, cap, id_of(table, (x->slots[s] & POS_MASK) - 1), x->slots[s]);
    free(x->slots);
    x->slots = slots;
    x->cap = cap;
    return 0;
}

int tf_id_index_reserve(tf_id_index *x, uint64_t n, tf_id_of *id_of, const void *table)
{
    if (n > UINT64_MAX / 4)
        return -1;
    uint64_t cap = x->cap ? x->cap : 256;
    while (n * 2 > cap)
        cap *= 2;
    return cap > x->cap ? grow_to(x, cap, id_of, table) : 0;
}

/* Walks the probe sequence of id once: 1 with *slot the slot that holds
 * it, or 0 with *slot the empty one it would go to (a look-up and then
 * an insert walked it twice, where building a writer's index puts every
 * live slot, most of them new ids). x has slots. */
static int find(const tf_id_index *x, const tf_blob_id *id, tf_id_of *id_of, const void *table,
                uint64_t *slot)
{
    const uint64_t tag = tag_of(id) << POS_BITS;
    uint64_t s = home_of(id, x->cap);
    for (; x->slots[s]; s = (s + 1) & (x->cap - 1))
        if ((x->slots[s] & ~POS_MASK) == tag &&
            tf_blob_id_eq(id_of(table, (x->slots[s] & POS_MASK) - 1), id))
            break;
    *slot = s;
    return x->slots[s] != 0;
}

int tf_id_index_get(const tf_id_index *x, const tf_blob_id *id, tf_id_of *id_of,
                    const void *table, uint64_t *pos)
{
    uint64_t s;
    if (!x->cap || !find(x, id, id_of, table, &s))
        return 0;
    *pos = (x->slots[s] & POS_MASK) - 1;
    return 1;
}

int tf_id_index_put(tf_id_index *x, const tf_blob_id *id, uint64_t pos, tf_id_of *id_of,
                    const void *table)
{
    if (pos >= TF_ID_INDEX_MAX)
        return -1;
    if ((x->count + 1) * 2 > x->cap && grow_to(x, x->cap ? x->cap * 2 : 256, id_of, table) < 0)
        return -1;
    uint64_t s;
    if (find(x, id, id_of, table, &s))
        return 0; /* indexed already: it keeps its first position */
    x->slots[s] = tag_of(id) << POS_BITS | (pos + 1);
    x->count++;
    return 0;
}

void tf_id_index_free(tf_id_index *x)
{
    free(x->slots);
    *x = (tf_id_index){ 0 };
}
