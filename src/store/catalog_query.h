/* Questions about an archive's catalog that its listing and statistics
 * ask: which entry a blob is charged to, which tensor stored it, the
 * chunks of a tensor, the entries in natural order, the names of formats
 * and codecs. */
#ifndef TRAJFS_STORE_CATALOG_QUERY_H
#define TRAJFS_STORE_CATALOG_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h" /* tf_codec_id: what a tf_blob's codec is */
#include "format/catalog.h"
#include "store/archive.h"

/* Which entry each blob's stored bytes are charged to: the first live
 * entry in commit order (ascending ino) whose chunks use it, or whose
 * chunks use a blob that has it as model. owner[b] is that entry's index
 * in archive order plus one, or 0 when no live entry uses blob b (e.g. a
 * reference left behind by a replaced file). Returns a malloc'd array of
 * tf_archive_nblobs() elements, or NULL with the reason. */
uint64_t *tf_archive_blob_owners(const tf_archive *ar, tf_error *e);

/* Which tensor first stored each blob: the first live entry in commit
 * order (ascending ino) whose tensor uses it as a chunk. entry is that
 * entry's index in archive order plus one, 0 when no tensor of a live
 * entry has blob b as a chunk. */
typedef struct {
    uint64_t entry;
    uint64_t tensor;
} tf_blob_user;

/* tf_blob_user of each blob: a malloc'd array of tf_archive_nblobs()
 * elements, or NULL with the reason. */
tf_blob_user *tf_archive_blob_tensors(const tf_archive *ar, tf_error *e);

/* Bytes in each chunk of a tensor but its last. */
uint64_t tf_tensor_chunk_bytes(const tf_archive *ar, const tf_tensor_span *ts);

/* The number of chunks of tensor t of a tensor file, from its bytes and
 * dtype (at most the chunks the entry has from its first_chunk on). */
uint64_t tf_tensor_nchunks(const tf_archive *ar, const tf_entry *ent, uint64_t t);

/* The tensor of a tensor file that chunk c belongs to, or ent->ntensors
 * when it is in none (verbatim bytes; any chunk of an opaque file). */
uint64_t tf_tensor_of_chunk(const tf_archive *ar, const tf_entry *ent, uint64_t c);

/* The indices (archive order) of all entries in natural order of their
 * paths, component by component: checkpoint-20 before checkpoint-100,
 * each directory followed by its contents. A malloc'd array of
 * tf_archive_nentries() elements, or NULL when out of memory. */
size_t *tf_archive_natural_order(const tf_archive *ar);

/* The name of tensor-file format id (a tf_entry's format), e.g.
 * "safetensors", or NULL for an id this release does not know. */
const char *tf_format_name(unsigned id);

/* The name of codec id (a tf_blob's codec), e.g. "ulp", or "?" for an id
 * this release does not know. */
const char *tf_codec_name(unsigned id);

#endif
