/* The codec slot. A codec is a pure function of bytes: it turns one chunk
 * (and, for a delta codec, the reference chunk of the same length) into
 * encoded bytes and back. No I/O, no globals. Adding a codec means writing
 * its functions and adding one row to the table in codec.c; what the row
 * declares it needs decides which chunks the writer tries it on
 * (store/encode.h).
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
    TF_CODEC_COUNT
} tf_codec_id;

/* What a codec may know besides the chunk itself. */
typedef struct {
    unsigned dtype;       /* tf_dtype of the elements; TF_DT_NONE for opaque bytes */
    const uint8_t *ref;   /* delta codecs: the reference chunk, same length */
    size_t ref_len;
    const uint8_t *model; /* codecs with a fit step: the tensor's shared model */
    size_t model_len;
    const void *fit_opts; /* fit: the codec's own options (prog: tf_prog_fit_opts),
                             NULL for its defaults */
} tf_codec_ctx;

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
    /* Appends the encoding of src[0..len) to out. Returns -1 when the codec
     * does not apply to this input (wrong dtype, no reference) or fails. */
    int (*encode)(const uint8_t *src, size_t len, const tf_codec_ctx *ctx,
                  tf_buf *out, tf_error *e);
    /* Decodes exactly len bytes into dst. enc comes from an archive and is
     * untrusted: any inconsistency is an error, never an over-read. */
    int (*decode)(const uint8_t *enc, size_t enc_len, const tf_codec_ctx *ctx,
                  uint8_t *dst, size_t len, tf_error *e);
} tf_codec;

/* NULL for an unknown id. */
const tf_codec *tf_codec_get(unsigned id);
/* NULL for an unknown name. */
const tf_codec *tf_codec_by_name(const char *name);

#endif
