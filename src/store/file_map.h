/* Where the bytes of a file entry lie: which piece holds an offset, and
 * the run of chunk blobs holding a piece's bytes. The reader copies
 * bytes out of these chunks; the prefetcher reconstructs them ahead. */
#ifndef TRAJFS_STORE_FILE_MAP_H
#define TRAJFS_STORE_FILE_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "format/catalog.h"

/* Index of the piece of a tensor file that holds byte `off` (the last of
 * those starting there, when empty pieces precede it). */
uint64_t tf_piece_at(const tf_entry *ent, uint64_t off);

/* Bytes of a piece (or of an opaque file) as a run of chunk blobs:
 * byte x of the piece is byte (start + x) % chunk_bytes of blob
 * chunks[(start + x) / chunk_bytes]. */
typedef struct {
    const uint64_t *chunks;
    uint64_t chunk_bytes;
    uint64_t start;
    uint64_t stream_len; /* bytes of the stream the chunks hold: chunk k
                            holds min(chunk_bytes, stream_len - k *
                            chunk_bytes) of them */
} tf_chunk_run;

/* The chunk run of piece p of a tensor file (p = 0 of an opaque file,
 * TF_ENTRY_FILE: all of it); false when its bytes are inline in the
 * catalog entry (release-1 headers), at ent->verbatim + verbatim_off. */
bool tf_piece_chunks(const tf_entry *ent, uint64_t p, unsigned chunk_shift, tf_chunk_run *out);

#endif
