/* An index from content id to the position of a record in a table the
 * caller keeps (the archive's blob table), which holds the ids: a slot is
 * 8 bytes, the position and 24 bits of the id, where a map that keeps the
 * ids (common/idmap.h) takes 24 a slot. A match of those bits is then
 * confirmed against the table's id. Open addressing; ids are uniformly
 * distributed hashes, so their first bytes index directly. */
#ifndef TRAJFS_COMMON_ID_INDEX_H
#define TRAJFS_COMMON_ID_INDEX_H

#include <stdint.h>

#include "common/hash.h"

/* Positions below this fit a slot. */
#define TF_ID_INDEX_MAX (((uint64_t)1 << 40) - 1)

typedef struct {
    uint64_t *slots;
    uint64_t cap, count; /* cap is 0 or a power of two */
} tf_id_index;

/* The id of the record at pos of the caller's table. */
typedef const tf_blob_id *tf_id_of(const void *table, uint64_t pos);

/* Makes room for n ids in all, so that putting them allocates nothing
 * more. 0, or -1 when out of memory. */
int tf_id_index_reserve(tf_id_index *x, uint64_t n, tf_id_of *id_of, const void *table);
/* Indexes the record at pos (< TF_ID_INDEX_MAX), whose id is *id; an id
 * indexed already keeps its first position. 0, or -1 when out of memory
 * or pos is too large. */
int tf_id_index_put(tf_id_index *x, const tf_blob_id *id, uint64_t pos, tf_id_of *id_of,
                    const void *table);
/* 1 and the position of the record with this id in *pos, else 0. */
int tf_id_index_get(const tf_id_index *x, const tf_blob_id *id, tf_id_of *id_of,
                    const void *table, uint64_t *pos);
void tf_id_index_free(tf_id_index *x);

#endif
