/* The encode pipeline of one file: its spans (tensors, or a run of
 * opaque bytes) are cut into chunks, each chunk deduplicated by content
 * id or encoded with the smallest of the applicable codecs (a delta
 * against the span's reference, a program, the dtype's standalone codec,
 * raw), on the writer's threads, and stored in order into the commit. */
#ifndef TRAJFS_STORE_PIPELINE_H
#define TRAJFS_STORE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "format/catalog.h"
#include "store/commit.h"
#include "store/writer.h"

/* One tensor (or a run of opaque bytes, dtype TF_DT_NONE) to encode. The
 * caller sets the first six fields; the rest are the pipeline's. */
typedef struct {
    const uint8_t *src;
    uint64_t nbytes;
    unsigned dtype;
    const uint8_t *ref;        /* the reference tensor's bytes, or NULL */
    const uint64_t *ref_blobs; /* the reference tensor's chunk blobs */
    bool ref_far;              /* the reference is another run's: it may
                                  well lose, so a program competes too */
    tf_buf model;
    bool fitted;
    int64_t model_blob; /* -1 until stored */
    bool has_jobs;      /* some chunk is new content, to be encoded */
    bool wants_program; /* a program is a candidate for some of its chunks */
    tf_buf program;     /* program template */
    bool programmed;
} tf_span;

/* Encodes the spans, in order, into commit c, and sets ent->chunks and
 * ent->nchunks to their chunk blobs. */
int tf_encode_spans(tf_commit *c, const tf_write_opts *opts, tf_entry *ent, tf_span *spans,
                    size_t nspans, tf_error *e);

#endif
