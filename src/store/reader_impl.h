/* What the reader's files share (store/reader.c, reader_chain.c,
 * reader_range.c). */
#ifndef TRAJFS_STORE_READER_IMPL_H
#define TRAJFS_STORE_READER_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/spare_bufs.h"
#include "common/slots.h"
#include "store/cache.h"
#include "store/reader.h"

struct tf_reader_ctx {
    tf_archive *ar;
    tf_cache *cache;
    tf_spare_bufs payloads; /* encoded bytes: one per decode */
    tf_spare_bufs steps;    /* a chain's steps between: two per decode */
    /* Blobs lately decoded as a step of a chain and not kept, by slot
     * (key + 1; 0: none): a step met again is kept in the cache
     * (reader_chain.c). A hint: races only change what is kept. */
    _Atomic uint64_t *steps_seen;
    /* Chains decoded at once, at most one per CPU: the kernel sends a
     * file read in order as a dozen requests at a time, and a dozen
     * decodes on two CPUs took a fifth more CPU time than two, in the
     * fresh buffers each one faults in and in switching between them.
     * Small blobs decoded alone (models) take none (reader_chain.c). */
    tf_slots decodes;
    _Atomic uint64_t decoded, decoded_bytes, hits;
};

/* Returns blob idx reconstructed, held in the cache; threads asking for
 * it at once decode it once (store/reader.c). */
tf_cache_item *tf_reader_obtain(tf_reader_ctx *r, uint64_t idx, tf_error *e);

/* Slots of steps_seen: 2^16 (512 KiB). */
#define TF_STEPS_SEEN_BITS 16

/* Decodes blob idx into out (its raw_len bytes), its reference chain
 * first (store/reader_chain.c). */
int tf_reader_decode_chain(tf_reader_ctx *r, uint64_t idx, uint8_t *out, tf_error *e);

#endif
