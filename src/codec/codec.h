/* The codec slot. A codec is a pure function of bytes: it turns one chunk
 * (and, for a delta codec, the reference chunk of the same length) into
 * encoded bytes and back. No I/O, no globals. Adding a codec means writing
 * its functions and adding one row to the table in codec.c; what the row
 * declares it needs, and how its model is fitted, decides which chunks the
 * writer tries it on (store/encode.h, store/pipeline.c).
 *
 * Codec ids are stored in the archive: never renumber. */
#ifndef TRAJFS_CODEC_CODEC_H
#define TRAJFS_CODEC_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

typedef enum {
    TF_CODEC_RAW = 0,       /* bytes as they are */
    TF_CODEC_ZSTD = 1,      /* one zstd frame */
    TF_CODEC_BYTEGROUP = 2, /* float bytes grouped by significance, then zstd */
    TF_CODEC_ULP = 3,       /* ULPack delta against a reference chunk */
    TF_CODEC_PROG = 4,      /* Brevis-style program of reversible operators */
    TF_CODEC_KEYFRAME = 5,  /* float byte planes, each constant, raw or in Huffman codes */
    TF_CODEC_COUNT
} tf_codec_id;

/* What a codec may know besides the chunk itself. */
typedef struct {
    unsigned dtype;       /* tf_dtype of the elements; TF_DT_NONE for opaque bytes */
    const uint8_t *ref;   /* delta codecs: the reference chunk, same length */
    size_t ref_len;
    const uint8_t *model; /* codecs with a fit step: the tensor's shared model */
    size_t model_len;
    const void *prepared; /* encode: what the codec's prepare made of this
                             model, or NULL */
    const void *fit_opts; /* fit: the codec's own options (a codec with a
                             search: tf_search_opts), NULL for its defaults */
} tf_codec_ctx;

/* A tensor of a file as a search sees it: its first elements (data may
 * be NULL where only dtype and len matter). */
typedef struct {
    const uint8_t *data;
    size_t len;
    unsigned dtype;
} tf_codec_tensor;

/* The options of a fit that searches (ctx->fit_opts of a codec with a
 * search, below). */
typedef struct {
    unsigned budget;   /* expansions per tensor; 0: the codec's default */
    const void *prior; /* learned by the codec's search->learn; NULL: none */
    /* Decide from the tensor's sample (codec/sample.h) whether to search
     * at all: what the writer fits each chunk with when not searching. */
    bool sampled;
} tf_search_opts;

/* A codec whose fit is a search (prog): with the writer's option
 * `search`, the writer fits each tensor it chooses (store/pipeline.c),
 * on its first head_elems elements, with a prior learned from a sample
 * of the file's tensors, and fits no chunk of its own. */
typedef struct {
    size_t head_elems;
    unsigned sample_max; /* tensors a prior learns from, at most */
    /* The sample, by dtype and len alone: its indices into
     * pick[sample_max]; returns how many, or -1 when out of memory. */
    int (*pick)(const tf_codec_tensor *tensors, size_t n, size_t *pick);
    /* Learns a prior from the sample's heads (the others' data may be
     * NULL); *prior NULL when nothing was learned. */
    int (*learn)(const tf_codec_tensor *tensors, size_t n, void **prior, tf_error *e);
    void (*prior_free)(void *prior);
} tf_codec_search;

typedef struct {
    uint8_t id;
    const char *name;
    bool delta;       /* needs ctx->ref */
    bool needs_model; /* decode needs ctx->model: the model fit made is stored,
                         and the chunks refer to it (without, it only guides
                         encode) */
    /* Optional, for a codec that needs neither a reference nor a model:
     * whether it competes for every chunk of dtype. */
    bool (*standalone_for)(unsigned dtype);
    /* Optional. Called once per tensor with the whole tensor (and the whole
     * reference tensor in ctx->ref, the options in ctx->fit_opts), appends
     * a model (e.g. probability tables, a program template) that every
     * chunk of the tensor shares: encode gets it in ctx->model, and so does
     * decode when the codec needs_model, the model then being stored as its
     * own blob. */
    int (*fit)(const uint8_t *src, size_t len, const tf_codec_ctx *ctx,
               tf_buf *model, tf_error *e);
    /* Optional, for a codec with a fit step: whether the writer, having
     * no model of the tensor for it, fits it on each chunk of dtype
     * (with a search, a sampled one: tf_search_opts.sampled). */
    bool (*fits_chunks_of)(unsigned dtype);
    /* Optional: the codec's fit is a search (ctx->fit_opts: a
     * tf_search_opts). */
    const tf_codec_search *search;
    /* Optional, for a codec that needs its model: fits the model on this
     * chunk alone and encodes the chunk with it, appending the model (what
     * fit of the chunk appends) to model and the encoding (what encode
     * with that model appends) to out, in less time than the two. */
    int (*fit_encode)(const uint8_t *src, size_t len, const tf_codec_ctx *ctx,
                      tf_buf *model, tf_buf *out, tf_error *e);
    /* Optional: the bytes encoding the chunk is expected to take (and its
     * model, for a codec that needs one and has none in ctx: fitted on
     * the chunk), estimated from the chunk's sample (codec/sample.h) in a
     * small fraction of the time encoding takes; SIZE_MAX when it cannot
     * tell or does not apply. The writer encodes a large chunk only with
     * the codecs whose estimates come near the best one
     * (store/encode.h). */
    size_t (*estimate)(const uint8_t *src, size_t len, const tf_codec_ctx *ctx);
    /* Optional, for a codec that needs its model: what encode makes of
     * ctx->model before it codes a chunk (tables read, an encoder built),
     * made once for the chunks that share the model and given to encode
     * in ctx->prepared; NULL where the model is bad or memory lacks. A
     * small chunk's encoding otherwise spends a good part of its time
     * on it. */
    void *(*prepare)(const tf_codec_ctx *ctx);
    void (*prepared_free)(void *prepared);
    /* Appends the encoding of src[0..len) to out. Returns -1 when the codec
     * does not apply to this input (wrong dtype, no reference) or fails. */
    int (*encode)(const uint8_t *src, size_t len, const tf_codec_ctx *ctx,
                  tf_buf *out, tf_error *e);
    /* Optional: encode of two chunks whose contexts give the same model
     * (and prepared model), side by side, each appended to its out (two
     * distinct buffers) as encode appends it; faster where coding one
     * chunk is one serial chain (a small ULP chunk's). On failure neither
     * out is changed. */
    int (*encode_pair)(const uint8_t *const src[2], const size_t len[2],
                       const tf_codec_ctx *const ctx[2], tf_buf *const out[2], tf_error *e);
    /* Decodes exactly len bytes into dst. enc comes from an archive and is
     * untrusted: any inconsistency is an error, never an over-read. */
    int (*decode)(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx,
                  uint8_t *dst, size_t len, tf_error *e);
} tf_codec;

/* NULL for an unknown id. */
const tf_codec *tf_codec_get(unsigned id);
/* NULL for an unknown name. */
const tf_codec *tf_codec_by_name(const char *name);
/* The codec the writer stores a run's newest checkpoint with, chunk by
 * chunk, each self-contained: written on every commit and read by every
 * cold load of that checkpoint, it must be fast both ways and compact
 * (codec/keyframe.h). keyframe for the floats it handles (F16, BF16,
 * F32); for other dtypes the fast existing codec that suits them. */
tf_codec_id tf_codec_newest_keyframe(uint8_t dtype);

#endif
