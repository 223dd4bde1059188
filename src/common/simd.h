/* Which SIMD code the codecs may run. Every level must give the same
 * bytes: the SIMD loops are only faster, and tests cap the level to cover
 * each one. */
#ifndef TRAJFS_COMMON_SIMD_H
#define TRAJFS_COMMON_SIMD_H

/* TF_X86_SIMD: the compiler can build x86 SIMD functions (each marked
 * with its target attribute), run only where tf_simd_level_get says the
 * CPU has them. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TF_X86_SIMD 1
/* An AVX2 helper, inlined into its AVX2 callers; an AVX2 function, called
 * only where tf_simd_level_get() >= TF_SIMD_AVX2. */
#define TF_AVX2_INLINE static inline __attribute__((always_inline, target("avx2,popcnt")))
#define TF_AVX2_FUNCTION __attribute__((target("avx2,popcnt"))) static
#endif

/* What the CPU has, capped by the environment (read at the first call)
 * and by tf_simd_level_cap. TRAJFS_SIMD=none keeps the codecs on their
 * portable scalar loops, TRAJFS_SIMD=avx2 off anything newer. AVX2
 * includes POPCNT and BMI2; AVX512 is AVX-512 F, VL, BW, DQ and VBMI
 * (Ice Lake, Zen 4 and later). */
typedef enum { TF_SIMD_NONE, TF_SIMD_AVX2, TF_SIMD_AVX512 } tf_simd_level;
tf_simd_level tf_simd_level_get(void);
/* Caps the level from now on, in every thread; TF_SIMD_AVX512 lifts the
 * cap. */
void tf_simd_level_cap(tf_simd_level cap);

#endif
