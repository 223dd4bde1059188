/* The byte planes of the keyframe codec (keyframe.h): elements of w = 2
 * or 4 bytes, little-endian, rotated left by one bit (the sign to the
 * lowest bit), cut by significance: plane 0 holds the top byte of every
 * rotated element, plane w - 1 the lowest. With AVX2 where the CPU has
 * it (common/simd.h); the same bytes either way. */
#ifndef TRAJFS_CODEC_KEYFRAME_PLANES_H
#define TRAJFS_CODEC_KEYFRAME_PLANES_H

#include <stddef.h>
#include <stdint.h>

/* The n elements at src to plane[0][0..n) .. plane[w - 1][0..n). */
void tf_keyframe_split(const uint8_t *src, size_t n, unsigned w, uint8_t *const *plane);
/* The inverse: n elements to dst from the planes. */
void tf_keyframe_join(const uint8_t *const *plane, size_t n, unsigned w, uint8_t *dst);
/* The least and the greatest of the n >= 1 bytes at p. */
void tf_keyframe_range(const uint8_t *p, size_t n, uint8_t *lo, uint8_t *hi);

#endif
