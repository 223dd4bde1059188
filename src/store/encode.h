/* Choosing a codec for a chunk: every codec that applies competes, the
 * smallest output wins. */
#ifndef TRAJFS_STORE_ENCODE_H
#define TRAJFS_STORE_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "common/buf.h"
#include "common/error.h"

/* A codec's model of the tensor a chunk belongs to (tf_fit_model). */
typedef struct {
    const uint8_t *data; /* NULL: the codec was not fitted to the tensor */
    size_t len;
    size_t share; /* the chunk's part of the model's size, charged to the
                     codec's output when the model is stored (needs_model):
                     small tensors cannot amortize a model */
    const void *prepared; /* the codec's prepare of data, or NULL */
} tf_chunk_model;

/* One chunk to encode. Every codec of the table competes that the job
 * gives what the codec declares it needs (codec/codec.h): a reference for
 * a delta codec; for a codec with a fit step, the tensor's model, or,
 * where fit_chunk says so, a model fitted on the chunk itself (with
 * fit_opts); a codec that needs neither competes where it is standalone
 * for the chunk's dtype (raw for every one). The smallest output wins,
 * counting what it is charged for a stored model (a tensor model's
 * share, a chunk's own model whole); at equal cost, one that decodes
 * alone.
 *
 * With `estimate`, a chunk larger than its sample (codec/sample.h) is
 * encoded only by the codecs whose estimates (codec.h) come within
 * 1/TF_ESTIMATE_SLACK of the least one, and by those that cannot tell:
 * the estimates are about a percent off at most, so what they leave out
 * would not have won, or not by much. */
typedef struct {
    const uint8_t *src;
    size_t len;
    unsigned dtype;
    const uint8_t *ref;                    /* reference chunk of the same length, or NULL */
    tf_chunk_model models[TF_CODEC_COUNT]; /* by codec id */
    bool fit_chunk[TF_CODEC_COUNT];        /* fit on the chunk where no model is given */
    const void *fit_opts[TF_CODEC_COUNT];  /* ... with these options (NULL: defaults) */
    bool estimate;
    /* results */
    uint8_t codec;
    tf_buf out;
    tf_buf model; /* the model the codec fitted on the chunk and needs to
                     decode it, to be stored with it; empty otherwise */
} tf_chunk_job;

/* Estimates this far apart (a part of the least) count as close. The
 * codecs' estimates of the benchmark's chunks are within 1% of their
 * sizes, and the sizes of the chunks' first and second best codecs 1.3
 * to 6% apart: 1/16 had both encoded for most of them. */
#define TF_ESTIMATE_SLACK 64

/* Encodes one chunk job, replacing the results of an earlier encode of
 * it. Jobs share nothing: any number may run at once. */
int tf_encode_chunk(tf_chunk_job *job, tf_error *e);

/* Encodes one chunk job with the codec `codec` alone (given the job's
 * reference, for a delta codec; a codec that needs a model uses the one
 * in job->models, or fits one on the chunk, into job->model): 0, or -1
 * when it does not apply. */
int tf_encode_chunk_as(tf_chunk_job *job, unsigned codec, tf_error *e);

/* tf_encode_chunk_as of two jobs, rc[j] job j's result (errors are not
 * reported beyond that): side by side where the codec has encode_pair
 * and the jobs give it the same model (codec/codec.h), else one after
 * the other. The same bytes either way. */
void tf_encode_chunk_pair_as(tf_chunk_job *const jobs[2], unsigned codec, int rc[2]);

/* Encodes one chunk job as the newest checkpoint's keyframe: with
 * tf_codec_newest_keyframe (codec/codec.h), or raw where that is no
 * smaller. */
int tf_encode_newest_keyframe(tf_chunk_job *job, tf_error *e);

/* Fits codec's model on a whole tensor (and its reference, for a delta
 * codec; else NULL) with the codec's options (NULL: its defaults);
 * returns 0 with the model in *model, or -1 when the codec has no fit
 * step or does not apply (the tensor's chunks then do without it). */
int tf_fit_model(unsigned codec, const uint8_t *src, const uint8_t *ref, size_t len,
                 unsigned dtype, const void *opts, tf_buf *model);

#endif
