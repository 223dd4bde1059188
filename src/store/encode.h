/* Choosing and running codecs for chunks, in parallel, with results
 * consumed in order so the archive's bytes do not depend on the number
 * of threads. */
#ifndef TRAJFS_STORE_ENCODE_H
#define TRAJFS_STORE_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "codec/prog/prog.h"
#include "common/buf.h"
#include "common/error.h"

/* One chunk to encode. The chosen codec is the one whose output is
 * smallest among: the delta codec (when ref and model are given, charged
 * its share of the model, which small tensors cannot amortize), the
 * program codec (when a program template is given; its chunks decode
 * without the template), the zstd-based codec for the dtype, and raw. */
typedef struct {
    const uint8_t *src;
    size_t len;
    unsigned dtype;
    const uint8_t *ref;   /* reference chunk of the same length, or NULL */
    const uint8_t *model; /* delta codec's model for the tensor, or NULL */
    size_t model_len;
    size_t model_share;   /* this chunk's share of the model's stored size */
    const uint8_t *program; /* program template for the tensor, or NULL */
    size_t program_len;
    /* results */
    uint8_t codec;
    tf_buf out;
} tf_chunk_job;

/* Runs work(arg, i) for i in [0, n) on `threads` threads; then, in index
 * order, sink(arg, i) on the calling thread as soon as job i is done.
 * Workers run at most `window` jobs ahead of the sink, which bounds the
 * memory held by finished jobs. Stops at the first failure (work or sink)
 * and returns -1 with its error; jobs not yet sunk are still finished. */
int tf_run_ordered(size_t n, unsigned threads, size_t window,
                   int (*work)(void *arg, size_t i, tf_error *e),
                   int (*sink)(void *arg, size_t i, tf_error *e), void *arg, tf_error *e);

/* Encodes one chunk job (a `work` function for tf_run_ordered over an
 * array of tf_chunk_job). */
int tf_encode_chunk(tf_chunk_job *job, tf_error *e);

/* Synthesizes the program template of a tensor (opts: the search budget
 * and the checkpoint's prior, may be NULL); returns 0 with it in
 * *program, or -1 when none applies. */
int tf_fit_program(const uint8_t *src, size_t len, unsigned dtype, const tf_prog_fit_opts *opts,
                   tf_buf *program);

/* Fits the delta codec's model on a whole tensor and its reference;
 * returns 0 with the model in *model, or -1 when the codec does not apply
 * (the tensor is then stored without deltas). */
int tf_fit_delta_model(const uint8_t *src, const uint8_t *ref, size_t len, unsigned dtype,
                       tf_buf *model);

#endif
