#include "common/simd.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* What the CPU has, capped by TRAJFS_SIMD. */
static tf_simd_level detect_simd(void)
{
    const char *cap = getenv("TRAJFS_SIMD");
    if (cap && (!strcmp(cap, "none") || !strcmp(cap, "0")))
        return TF_SIMD_NONE;
#ifdef TF_X86_SIMD
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("popcnt") ||
        !__builtin_cpu_supports("bmi2"))
        return TF_SIMD_NONE;
    if (cap && !strcmp(cap, "avx2"))
        return TF_SIMD_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vbmi"))
        return TF_SIMD_AVX512;
    return TF_SIMD_AVX2;
#else
    return TF_SIMD_NONE;
#endif
}

/* Read once: every chunk asks, and the environment's lookup costs as
 * much as decoding a small tensor. Threads that race to it store the
 * same value. */
static _Atomic int simd_detected = -1;
static _Atomic int simd_cap = TF_SIMD_AVX512;

tf_simd_level tf_simd_level_get(void)
{
    int level = atomic_load_explicit(&simd_detected, memory_order_relaxed);
    if (level < 0) {
        level = (int)detect_simd();
        atomic_store_explicit(&simd_detected, level, memory_order_relaxed);
    }
    int cap = atomic_load_explicit(&simd_cap, memory_order_relaxed);
    return (tf_simd_level)(level < cap ? level : cap);
}

void tf_simd_level_cap(tf_simd_level cap)
{
    atomic_store_explicit(&simd_cap, (int)cap, memory_order_relaxed);
}
