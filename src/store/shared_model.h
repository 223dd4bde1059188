/* One ULP model that the deltas of several chunks of a tensor share:
 * fitted on all of them, stored once, each chunk charged its share. A
 * small chunk's own model costs about as much as its delta (2^10
 * elements: the model's tables took 4 of 7 bits a weight), so the
 * writer's small chunks of a tensor coded together share one, and so do
 * a rebase's. */
#ifndef TRAJFS_STORE_SHARED_MODEL_H
#define TRAJFS_STORE_SHARED_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "store/commit.h"
#include "store/encode.h"

/* Chunks sharing one model: at most this many bytes of them, so that a
 * model fits the chunks it codes, and what is fitted on stays small. */
#define TF_SHARED_MODEL_BYTES ((size_t)64 << 10)

typedef struct {
    tf_buf model;
    tf_model_blob blob;   /* to store, once */
    tf_chunk_model given; /* for tf_chunk_job.models[TF_CODEC_ULP] */
    void *prepared;       /* the codec's prepare of model, for given */
    bool made;
} tf_shared_model;

/* Fits m on the deltas of the n chunks src[i] against ref[i], of len[i]
 * bytes each, of dtype; m->made is false where ULP does not apply or
 * memory lacks (each chunk then fits its own). */
void tf_shared_model_fit(tf_shared_model *m, unsigned dtype, const uint8_t *const *src,
                         const uint8_t *const *ref, const size_t *len, size_t n);
void tf_shared_model_free(tf_shared_model *m);

/* Whether chunk job, encoded with m given, uses it (and not a model of
 * its own). */
bool tf_shared_model_used(const tf_shared_model *m, const tf_chunk_job *job);

#endif
