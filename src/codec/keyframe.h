/* keyframe: a float chunk stored alone, fast both ways: the codec of a
 * run's newest checkpoint (tf_codec_newest_keyframe), written on every
 * commit and read by every cold load of it.
 *
 * Each element (F16, BF16, F32) is rotated left by one bit, the sign to
 * the lowest bit, so that the top byte is the whole exponent (BF16, F32;
 * F16: the exponent and three mantissa bits). The rotated elements are
 * cut in byte planes, the top byte of every element first (as bytegroup
 * cuts them), and each plane is stored as one byte when constant, else
 * as a literal of prog's (prog_leaf.h) of 8-bit words: in four streams
 * of Huffman codes (HUFF4, prog's fastest to decode) where that is
 * smaller, raw otherwise. Huffman codes are tried for the exponent plane
 * unless its sample (codec/sample.h) looks random, for another plane
 * only where its sample is far from uniform (a constant sign, a mantissa
 * of few bits); they are fitted on the sample's counts, every value
 * between the plane's least and greatest given a code. No dictionary,
 * no match search, no model, no count of the whole plane: a pass to
 * split the planes, one for a coded plane's range, one to code it;
 * decoding is the literals' and a pass that joins the planes.
 *
 * Payload, w = element size, n = len / w:
 *   per plane, the lowest first: p = w - 1 .. 0 (byte w - 1 - p of the
 *   rotated element, little-endian), so that the raw planes ahead of the
 *   exponent's are split straight into their place:
 *     u8 0 const   | u8 value
 *     u8 1 literal | varint body length | the body: a prog literal body
 *                    (prog_leaf.h) of n words of 8 bits
 *   then the len mod w bytes that make no whole element, raw.
 * Nothing follows. man/trajfs.5 has the details. */
#ifndef TRAJFS_CODEC_KEYFRAME_H
#define TRAJFS_CODEC_KEYFRAME_H

#include <stdbool.h>

#include "codec/codec.h"

extern const tf_codec tf_codec_keyframe;

/* The dtypes the codec applies to. */
bool tf_keyframe_dtype(unsigned dtype);

#endif
