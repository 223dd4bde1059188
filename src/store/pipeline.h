/* The encode pipeline of one file: its spans (tensors, or a run of
 * opaque bytes) are cut into chunks; on the writer's threads each chunk
 * is read from the file, deduplicated by content id or encoded with the
 * smallest of the applicable codecs (a delta against the span's
 * reference chunk, a program, the dtype's standalone codec, raw; chosen
 * from estimates on samples, or, with opts->search, by trying them all),
 * and stored in order into the commit. A chunk of the newest file of a
 * series is a keyframe of the newest keyframe codec, and its reference
 * chunk (the newest so far), where it is a keyframe, gets a delta
 * against it.
 *
 * Chunks are read and worked on in groups: a chunk of 64 KiB or more
 * alone, smaller ones with their neighbours up to 64 KiB (pipeline.c).
 * Memory does not grow with the file: the groups in flight are at most
 * TF_PIPELINE_WINDOW per thread, fewer where they would take more than
 * the writer's cache bound (pipeline.c, pipeline_window), each chunk
 * holding its bytes, its reference chunk and its encoding while it is
 * worked on; and the chunks kept for the cache once committed (tf_seeds)
 * are bounded too. */
#ifndef TRAJFS_STORE_PIPELINE_H
#define TRAJFS_STORE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/pool.h"
#include "format/catalog.h"
#include "store/commit.h"
#include "store/reader.h"
#include "store/source.h"
#include "store/writer.h"

/* Groups of chunks in flight per encoder thread: enough to keep every
 * thread busy while the writer stores finished ones in order (two a
 * thread made `trajpack create` of the benchmark trajectory 12% slower
 * on 2 threads). */
#define TF_PIPELINE_WINDOW 4

/* One tensor (or a run of opaque bytes, dtype TF_DT_NONE) to encode. The
 * caller sets the fields up to ref_far; the rest are the pipeline's. */
typedef struct {
    uint64_t nbytes;
    unsigned dtype;
    uint64_t file_off;         /* where the bytes lie in the file, */
    const tf_entry *verbatim;  /* or, when set, they are this entry's
                                  verbatim bytes (its verbatim pieces) */
    const uint64_t *ref_blobs; /* the reference tensor's chunk blobs, or NULL */
    const uint64_t *prev_blobs; /* with newest: the chunk blobs of the
                                   reference's own reference (the
                                   checkpoint before it), or NULL */
    bool ref_far;              /* the reference is another run's: it may
                                  well lose, so a program competes too */
    bool newest;               /* this file is the newest of the
                                  tensor's series: its chunks are
                                  keyframes of the newest keyframe codec
                                  (the newest loads without a chain; no
                                  search: the next checkpoint retires
                                  them). With a reference (the newest so
                                  far), the reference's keyframe chunks
                                  are re-encoded as deltas, forward
                                  against prev_blobs or reverse against
                                  them, and redirected, in the same
                                  commit, while the chain bound allows
                                  (pipeline.c, supersede_ref) */
    /* With opts->search: */
    bool has_jobs;     /* some chunk is new content, to be encoded */
    bool wants_search; /* the codecs with a search fit it (codec/codec.h) */
    tf_buf model[TF_CODEC_COUNT]; /* by codec id: the model a search found, */
    bool has_model[TF_CODEC_COUNT]; /* when it found one */
} tf_span;

/* Chunks just encoded that the writer gives its reader's cache once they
 * are committed (the next checkpoint's references): those of float
 * tensors, in order, up to budget bytes. */
typedef struct {
    struct tf_seed {
        uint64_t blob;
        uint8_t *data; /* malloc'd */
    } *items;
    size_t n, cap, bytes, budget;
} tf_seeds;

/* Hands the seeds over to r's cache (their blobs committed). */
void tf_seeds_plant(tf_seeds *s, tf_reader_ctx *r);
void tf_seeds_free(tf_seeds *s);

/* Encodes the spans of the file src, in order, into commit c, on the
 * threads of pool (NULL: the calling thread), and sets ent->chunks and
 * ent->nchunks to their chunk blobs. References are read through reader;
 * the chunks to seed go to seeds (may be NULL). */
int tf_encode_spans(tf_commit *c, const tf_write_opts *opts, tf_pool *pool, const tf_source *src,
                    tf_reader_ctx *reader, tf_seeds *seeds, tf_entry *ent, tf_span *spans,
                    size_t nspans, tf_error *e);

#endif
