/* The in-memory table of an open archive's blob records, one per slot,
 * redirects applied (store/archive.c keeps it).
 *
 * A record takes 52 bytes here where a tf_blob takes 72: lengths,
 * reference and model in 32 bits, and 4-byte alignment (x86 and arm64
 * load 8 bytes from any address). That holds for every record of an
 * archive that a writer makes (a blob reconstructs at most 2^27 bytes,
 * trajfs(5), and an archive of 2^32 blobs would have a catalog of over
 * 100 GB); a record that does not fit is kept whole beside the table,
 * so that any archive still opens. On a long run of small chunks the
 * table was 80% of an open's memory. */
#ifndef TRAJFS_STORE_BLOB_TABLE_H
#define TRAJFS_STORE_BLOB_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "format/catalog.h"

typedef struct __attribute__((packed, aligned(4))) {
    tf_blob_id id;
    uint64_t offset;
    uint64_t enc_hash;
    uint32_t enc_len, raw_len;
    uint32_t ref, model; /* blob index + 1, or 0 */
    uint8_t codec, dtype;
    bool wide; /* its lengths, reference or model do not fit: the whole
                  record is in `wide` (its id and dtype are here too) */
} tf_blob_slot;

typedef struct {
    uint64_t idx;
    tf_blob blob;
} tf_wide_blob;

typedef struct {
    tf_blob_slot *slots;
    uint64_t cap;
    tf_wide_blob *wide; /* by idx, ascending */
    uint64_t nwide, wide_cap;
} tf_blob_table;

/* Room for cap records (cap >= those there); 0, or -1 (ENOMEM). */
int tf_blob_table_reserve(tf_blob_table *t, uint64_t cap, tf_error *e);
/* Sets record idx (< cap); 0, or -1 (ENOMEM, for a wide one). */
int tf_blob_table_set(tf_blob_table *t, uint64_t idx, const tf_blob *b, tf_error *e);
void tf_blob_table_free(tf_blob_table *t);

/* The wide record of idx, which is one. */
const tf_blob *tf_blob_table_wide(const tf_blob_table *t, uint64_t idx);

/* Record idx, whole. */
static inline tf_blob tf_blob_table_get(const tf_blob_table *t, uint64_t idx)
{
    const tf_blob_slot *s = &t->slots[idx];
    if (s->wide)
        return *tf_blob_table_wide(t, idx);
    return (tf_blob){ .id = s->id, .offset = s->offset, .enc_len = s->enc_len,
                      .raw_len = s->raw_len, .enc_hash = s->enc_hash, .codec = s->codec,
                      .dtype = s->dtype, .ref = s->ref, .model = s->model };
}

/* Fields of record idx, for the walks that read one or two. */
static inline uint64_t tf_blob_table_ref(const tf_blob_table *t, uint64_t idx)
{
    const tf_blob_slot *s = &t->slots[idx];
    return s->wide ? tf_blob_table_wide(t, idx)->ref : s->ref;
}

static inline uint64_t tf_blob_table_model(const tf_blob_table *t, uint64_t idx)
{
    const tf_blob_slot *s = &t->slots[idx];
    return s->wide ? tf_blob_table_wide(t, idx)->model : s->model;
}

static inline uint64_t tf_blob_table_raw_len(const tf_blob_table *t, uint64_t idx)
{
    const tf_blob_slot *s = &t->slots[idx];
    return s->wide ? tf_blob_table_wide(t, idx)->raw_len : s->raw_len;
}

static inline unsigned tf_blob_table_dtype(const tf_blob_table *t, uint64_t idx)
{
    return t->slots[idx].dtype;
}

static inline const tf_blob_id *tf_blob_table_id(const tf_blob_table *t, uint64_t idx)
{
    return &t->slots[idx].id;
}

#endif
