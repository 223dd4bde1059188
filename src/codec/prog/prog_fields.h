/* The programs of nearly every float tensor, made fast: merge(P1..Pk)
 * of the elements' bit fields (sign, exponent, mantissa), each Pi a
 * literal or a constant. A fields model says where to cut the elements
 * and which codings each field tries; encoding a chunk with it takes one
 * pass for every field's constancy and packed width (the OR and AND of
 * the elements), one more for each field whose codings need its
 * histogram, chooses each literal's coding by its cost (prog_leaf.h,
 * tf_prog_lit_cost) and writes the program straight from the chunk's
 * bytes: the program format of prog_serialize.h, what instantiating the
 * template merge(lit, ...) would make (prog_apply.h), without the words
 * and trees that instantiation builds. A chunk all of whose fields are
 * constant is the program const.
 *
 * The model is the encoder's alone (prog's chunks decode without it):
 *   u8 version (2) | u8 dtype | u8 k | k x (u8 width | u8 tf_prog_field_try)
 * the fields' widths from the highest field down, summing to the element's
 * bits. */
#ifndef TRAJFS_CODEC_PROG_PROG_FIELDS_H
#define TRAJFS_CODEC_PROG_PROG_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/prog/prog_ast.h"
#include "common/buf.h"
#include "common/error.h"

#define TF_PROG_FIELDS_VERSION 2

/* The codings a field tries besides a constant, RAW and PACK (which need
 * no histogram). */
typedef enum {
    TF_PROG_FIELD_FIXED = 0, /* RAW or PACK only */
    TF_PROG_FIELD_HUFF = 1,  /* and HUFF, HUFF4: a field of at most 8 bits */
    TF_PROG_FIELD_SELF = 2,  /* and rANS under its own value a turn of
                                streams earlier (prog_leaf.h) */
    TF_PROG_FIELD_TRIES
} tf_prog_field_try;

typedef struct {
    unsigned dtype;
    unsigned n;                        /* 2..TF_PROG_MAX_ARITY */
    uint8_t width[TF_PROG_MAX_ARITY];  /* the highest field first */
    uint8_t tries[TF_PROG_MAX_ARITY];  /* tf_prog_field_try */
} tf_prog_fields;

/* The fields of a float dtype's elements, and what each tries, chosen
 * from the sample (codec/sample.h) of the n elements at src: sign,
 * exponent and mantissa, a mantissa's trailing zero bits a field of
 * their own; the exponent tries Huffman codes, and rANS under its value
 * a turn earlier where the sample says neighbouring exponents predict it
 * well enough to pay for the slower decoding; a field of at most 8 bits
 * tries Huffman codes where its sample is not close to uniform. false
 * for a dtype without IEEE fields. */
bool tf_prog_fields_choose(const uint8_t *src, size_t n, unsigned dtype, tf_prog_fields *f);

/* Bytes that encoding the n elements at src with f is estimated to
 * take, from their sample: the order-0 entropy of each field that tries
 * an entropy coding (the conditional one for rANS when lower), the width
 * of each other field, nothing for a field constant in the sample. */
size_t tf_prog_fields_estimate(const uint8_t *src, size_t n, const tf_prog_fields *f);

int tf_prog_fields_write_model(const tf_prog_fields *f, tf_buf *out, tf_error *e);
/* Reads a model (its version byte first) for elements of dtype. */
int tf_prog_fields_read_model(const uint8_t *model, size_t len, unsigned dtype,
                              tf_prog_fields *f, tf_error *e);

/* Appends the program of the n elements at src (n >= 1), fields f. */
int tf_prog_fields_encode(const uint8_t *src, size_t n, const tf_prog_fields *f, tf_buf *out,
                          tf_error *e);

#endif
