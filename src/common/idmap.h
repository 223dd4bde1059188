/* Map from content id to a value: the pairs in the order put, indexed by
 * their ids (common/id_index.h). */
#ifndef TRAJFS_COMMON_IDMAP_H
#define TRAJFS_COMMON_IDMAP_H

#include <stdint.h>

#include "common/hash.h"
#include "common/id_index.h"

typedef struct {
    tf_blob_id id;
    uint64_t value;
} tf_idmap_pair;

typedef struct {
    tf_idmap_pair *pairs; /* index.count of them */
    uint64_t pairs_cap;
    tf_id_index index;
} tf_idmap;

/* 0, or -1 when out of memory. An existing id keeps its first value. */
int tf_idmap_put(tf_idmap *m, const tf_blob_id *id, uint64_t value);
/* Makes room for n ids in all, so that putting them allocates nothing
 * more (one allocation of the final size, instead of doubling and
 * rehashing). 0, or -1 when out of memory. */
int tf_idmap_reserve(tf_idmap *m, uint64_t n);
/* 1 and *value when found, else 0. */
int tf_idmap_get(const tf_idmap *m, const tf_blob_id *id, uint64_t *value);
void tf_idmap_free(tf_idmap *m);

#endif
