/* prog: Brevis-style program synthesis (papers/brevis.txt) as a codec.
 *
 * A chunk is stored as a typed program of reversible operators whose
 * execution rebuilds its bits exactly (prog_ast.h): its words are the
 * elements' bit patterns (8 x element size bits; opaque bytes are 8-bit
 * words), so signed zeros, subnormals, infinities and NaN payloads need
 * nothing special.
 *
 * fit() synthesizes a program for the tensor by bounded A* search
 * (prog_search.h; ctx->fit_opts: a tf_prog_fit_opts, or NULL) on its
 * first TF_PROG_SAMPLE_WORDS elements and stores the productions chosen,
 * the template, as the model:
 *   u8 version (1) | u8 dtype | template (prog_serialize.h)
 * encode() instantiates the template on the chunk's own words
 * (prog_apply.h) and stores the complete program:
 *   u8 version (1) | instance (prog_serialize.h)
 * so a chunk is self-contained: decode() validates the program against
 * the chunk's length and dtype, opens every literal, then executes. It
 * does not need the model. Without a model, encode() searches the chunk
 * itself. A model may instead be a fields model (prog_fields.h), made by
 * a sampled fit: encode() then writes the merge of the chunk's fields
 * straight from its bytes, and estimate() tells its size from the
 * chunk's sample.
 *
 * Everything is deterministic: no threads, no clocks, the search bounded
 * by a count of expansions. */
#ifndef TRAJFS_CODEC_PROG_PROG_H
#define TRAJFS_CODEC_PROG_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "codec/prog/prog_prior.h"

extern const tf_codec tf_codec_prog;

/* Expansions per tensor when no budget is given: with a learned prior,
 * and with uniform production costs, which need more to find the same
 * programs. Measured with bench/prog_bench on the corpus's first bf16
 * checkpoint and the float32 OCR recognizer (bytes of prog output, and
 * seconds of fit + encode on a loaded 2-core machine):
 *   prior    budget 1: 14118092 / 8987066 (2.3 / 2.2 s)
 *            budget 4: 14106553 / 8986899 (3.2 / 2.5 s)
 *            budget 16: 14106113 / 8986929 (5.3 / 3.8 s)
 *   uniform  budget 8: 14118092 / 9019006 (4.7 / 1.8 s)
 *            budget 32: 14107068 / 8996628 (9.8 / 4.5 s)
 *            budget 64: 14106463 / 8990520 (16.0 / 8.5 s)
 * With the prior, a few expansions find what uniform costs need dozens
 * for; past that, programs improve by hundredths of a percent. */
#define TF_PROG_DEFAULT_BUDGET 4
#define TF_PROG_UNIFORM_BUDGET 32
/* Elements of a tensor the search examines: its first ones. */
#define TF_PROG_SAMPLE_WORDS ((size_t)1 << 18)

/* The options of prog's fit, the search options of codec.h:
 *   budget   0: TF_PROG_DEFAULT_BUDGET, or TF_PROG_UNIFORM_BUDGET
 *            without a prior;
 *   prior    a tf_prog_prior; NULL: uniform production costs;
 *   sampled  decides from the tensor's sample (codec/sample.h) instead:
 *            its fields (prog_fields.h) as the model of a float tensor,
 *            and the search only where the sample shows structure that
 *            fields cannot use (runs, steps, few distinct values) worth
 *            more than TF_PROG_SEARCH_GAIN bytes and an eighth of the
 *            fields' estimate; otherwise no model (the tensor gets no
 *            program). */
typedef tf_search_opts tf_prog_fit_opts;

#define TF_PROG_SEARCH_GAIN 4096

/* fit() with the options given directly; opts may be NULL. */
int tf_prog_fit(const uint8_t *src, size_t len, unsigned dtype, const tf_prog_fit_opts *opts,
                tf_buf *model, tf_error *e);

/* The one-line text form of a model, e.g.
 * "map_rotl1(merge_bytes(lit_rans, lit_raw))"; -1 when the model is
 * invalid, else the length of the full text (out gets at most outsz - 1
 * characters and a NUL). */
int tf_prog_describe(const uint8_t *model, size_t len, char *out, size_t outsz);

/* A tensor of a checkpoint, for learning a prior. */
typedef tf_codec_tensor tf_prog_tensor;

/* Learns the production prior of a checkpoint from a deterministic sample
 * of its tensors (at most TF_PROG_CALIBRATION_TENSORS, spread over dtypes
 * and sizes): each is searched with uniform costs and
 * TF_PROG_CALIBRATION_BUDGET expansions, and the productions of the
 * programs found are counted. *out is NULL when nothing was learned.
 * Of a tensor's data, only those of the sample are read, and of those
 * only the first TF_PROG_SAMPLE_WORDS elements: the others' data may be
 * NULL. */
#define TF_PROG_CALIBRATION_TENSORS 4
#define TF_PROG_CALIBRATION_BUDGET 64
int tf_prog_prior_learn(const tf_prog_tensor *tensors, size_t n, tf_prog_prior **out,
                        tf_error *e);
/* The sample tf_prog_prior_learn takes (by dtype and len alone): the
 * indices into pick[TF_PROG_CALIBRATION_TENSORS]; returns how many, or
 * -1 when out of memory. */
int tf_prog_prior_pick(const tf_prog_tensor *tensors, size_t n, size_t *pick);

/* The one-line text form of a stored chunk (u8 version | instance) of
 * raw_len bytes of dtype, like tf_prog_describe's, each literal named by
 * the coding its body uses; -1 when the chunk is invalid, else the length
 * of the full text (out gets at most outsz - 1 characters and a NUL). */
int tf_prog_describe_chunk(const uint8_t *enc, size_t len, unsigned dtype, size_t raw_len,
                           char *out, size_t outsz);

#endif
