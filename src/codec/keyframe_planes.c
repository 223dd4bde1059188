#include "codec/keyframe_planes.h"

#include "common/buf.h"
#include "common/simd.h"

/* ---- portable loops, inlined with a constant w ---- */

static inline __attribute__((always_inline)) uint32_t rotl1(uint32_t u, unsigned w)
{
    const uint32_t top = 8 * w - 1, mask = UINT32_MAX >> (32 - 8 * w);
    return (u << 1 | u >> top) & mask;
}

static inline __attribute__((always_inline)) uint32_t rotr1(uint32_t r, unsigned w)
{
    const uint32_t top = 8 * w - 1, mask = UINT32_MAX >> (32 - 8 * w);
    return (r >> 1 | r << top) & mask;
}

static inline __attribute__((always_inline)) void split_w(const uint8_t *src, size_t from,
                                                           size_t n, unsigned w,
                                                           uint8_t *const *plane)
{
    for (size_t i = from; i < n; i++) {
        uint32_t r = rotl1((uint32_t)tf_le_get(src + w * i, w), w);
        for (unsigned p = 0; p < w; p++)
            plane[p][i] = (uint8_t)(r >> (8 * (w - 1 - p)));
    }
}

static inline __attribute__((always_inline)) void join_w(const uint8_t *const *plane,
                                                          size_t from, size_t n, unsigned w,
                                                          uint8_t *dst)
{
    for (size_t i = from; i < n; i++) {
        uint32_t r = 0;
        for (unsigned p = 0; p < w; p++)
            r |= (uint32_t)plane[p][i] << (8 * (w - 1 - p));
        tf_le_put(dst + w * i, rotr1(r, w), w);
    }
}

/* ---- AVX2: 32 elements a step; returns how many elements it did ----
 * Packing and unpacking bytes work within each 128-bit half: inputs and
 * outputs are permuted by 64-bit quarters (0xD8: quarters 0, 2, 1, 3) so
 * that elements come out in order. */
#ifdef TF_X86_SIMD
TF_AVX2_FUNCTION size_t split2_avx2(const uint8_t *src, size_t n, uint8_t *const *plane)
{
    const __m256i low = _mm256_set1_epi16(0xff);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + 2 * i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(src + 2 * i + 32));
        a = _mm256_or_si256(_mm256_slli_epi16(a, 1), _mm256_srli_epi16(a, 15));
        b = _mm256_or_si256(_mm256_slli_epi16(b, 1), _mm256_srli_epi16(b, 15));
        __m256i hi = _mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
        __m256i lo = _mm256_packus_epi16(_mm256_and_si256(a, low), _mm256_and_si256(b, low));
        _mm256_storeu_si256((__m256i *)(plane[0] + i), _mm256_permute4x64_epi64(hi, 0xD8));
        _mm256_storeu_si256((__m256i *)(plane[1] + i), _mm256_permute4x64_epi64(lo, 0xD8));
    }
    return i;
}

TF_AVX2_FUNCTION size_t join2_avx2(const uint8_t *const *plane, size_t n, uint8_t *dst)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i hi = _mm256_loadu_si256((const __m256i *)(plane[0] + i));
        __m256i lo = _mm256_loadu_si256((const __m256i *)(plane[1] + i));
        hi = _mm256_permute4x64_epi64(hi, 0xD8);
        lo = _mm256_permute4x64_epi64(lo, 0xD8);
        __m256i a = _mm256_unpacklo_epi8(lo, hi), b = _mm256_unpackhi_epi8(lo, hi);
        a = _mm256_or_si256(_mm256_srli_epi16(a, 1), _mm256_slli_epi16(a, 15));
        b = _mm256_or_si256(_mm256_srli_epi16(b, 1), _mm256_slli_epi16(b, 15));
        _mm256_storeu_si256((__m256i *)(dst + 2 * i), a);
        _mm256_storeu_si256((__m256i *)(dst + 2 * i + 32), b);
    }
    return i;
}

TF_AVX2_FUNCTION size_t split4_avx2(const uint8_t *src, size_t n, uint8_t *const *plane)
{
    /* each half: byte k of its four elements together, k = 0..3 */
    const __m256i bytes = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                           0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            __m256i u = _mm256_loadu_si256((const __m256i *)(src + 4 * i + 32 * k));
            u = _mm256_or_si256(_mm256_slli_epi32(u, 1), _mm256_srli_epi32(u, 31));
            v[k] = _mm256_shuffle_epi8(u, bytes);
        }
        /* dword k of a half of v[j]: byte k of 4 elements; gather byte k
         * of all 32, then put the halves' quarters in element order */
        __m256i lo01 = _mm256_unpacklo_epi32(v[0], v[1]), hi01 = _mm256_unpackhi_epi32(v[0], v[1]);
        __m256i lo23 = _mm256_unpacklo_epi32(v[2], v[3]), hi23 = _mm256_unpackhi_epi32(v[2], v[3]);
        __m256i b0 = _mm256_unpacklo_epi64(lo01, lo23), b1 = _mm256_unpackhi_epi64(lo01, lo23);
        __m256i b2 = _mm256_unpacklo_epi64(hi01, hi23), b3 = _mm256_unpackhi_epi64(hi01, hi23);
        _mm256_storeu_si256((__m256i *)(plane[3] + i), _mm256_permutevar8x32_epi32(b0, order));
        _mm256_storeu_si256((__m256i *)(plane[2] + i), _mm256_permutevar8x32_epi32(b1, order));
        _mm256_storeu_si256((__m256i *)(plane[1] + i), _mm256_permutevar8x32_epi32(b2, order));
        _mm256_storeu_si256((__m256i *)(plane[0] + i), _mm256_permutevar8x32_epi32(b3, order));
    }
    return i;
}

TF_AVX2_FUNCTION size_t join4_avx2(const uint8_t *const *plane, size_t n, uint8_t *dst)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i q[4];
        for (int p = 0; p < 4; p++)
            q[p] = _mm256_permute4x64_epi64(
                _mm256_loadu_si256((const __m256i *)(plane[p] + i)), 0xD8);
        /* 16-bit halves of the rotated elements: bytes 0, 1 and 2, 3 */
        __m256i low[2] = { _mm256_unpacklo_epi8(q[3], q[2]), _mm256_unpackhi_epi8(q[3], q[2]) };
        __m256i high[2] = { _mm256_unpacklo_epi8(q[1], q[0]), _mm256_unpackhi_epi8(q[1], q[0]) };
        for (int h = 0; h < 2; h++) { /* elements 16h .. 16h + 15 */
            __m256i a = _mm256_unpacklo_epi16(low[h], high[h]);
            __m256i b = _mm256_unpackhi_epi16(low[h], high[h]);
            __m256i first = _mm256_permute2x128_si256(a, b, 0x20);
            __m256i second = _mm256_permute2x128_si256(a, b, 0x31);
            first = _mm256_or_si256(_mm256_srli_epi32(first, 1), _mm256_slli_epi32(first, 31));
            second = _mm256_or_si256(_mm256_srli_epi32(second, 1), _mm256_slli_epi32(second, 31));
            _mm256_storeu_si256((__m256i *)(dst + 4 * i + 64 * h), first);
            _mm256_storeu_si256((__m256i *)(dst + 4 * i + 64 * h + 32), second);
        }
    }
    return i;
}

TF_AVX2_FUNCTION size_t range_avx2(const uint8_t *p, size_t n, uint8_t *lo, uint8_t *hi)
{
    if (n < 32)
        return 0;
    __m256i least = _mm256_loadu_si256((const __m256i *)p), most = least;
    size_t i = 32;
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
        least = _mm256_min_epu8(least, v);
        most = _mm256_max_epu8(most, v);
    }
    uint8_t l[32], m[32];
    _mm256_storeu_si256((__m256i *)l, least);
    _mm256_storeu_si256((__m256i *)m, most);
    for (int k = 0; k < 32; k++) {
        *lo = l[k] < *lo ? l[k] : *lo;
        *hi = m[k] > *hi ? m[k] : *hi;
    }
    return i;
}
#endif

/* The elements an AVX2 loop did, where the CPU has AVX2. */
#ifdef TF_X86_SIMD
#define AVX2_DONE(call) (tf_simd_level_get() >= TF_SIMD_AVX2 ? (call) : 0)
#else
#define AVX2_DONE(call) 0
#endif

void tf_keyframe_split(const uint8_t *src, size_t n, unsigned w, uint8_t *const *plane)
{
    if (w == 2)
        split_w(src, AVX2_DONE(split2_avx2(src, n, plane)), n, 2, plane);
    else
        split_w(src, AVX2_DONE(split4_avx2(src, n, plane)), n, 4, plane);
}

void tf_keyframe_join(const uint8_t *const *plane, size_t n, unsigned w, uint8_t *dst)
{
    if (w == 2)
        join_w(plane, AVX2_DONE(join2_avx2(plane, n, dst)), n, 2, dst);
    else
        join_w(plane, AVX2_DONE(join4_avx2(plane, n, dst)), n, 4, dst);
}

void tf_keyframe_range(const uint8_t *p, size_t n, uint8_t *lo, uint8_t *hi)
{
    *lo = *hi = p[0];
    for (size_t i = AVX2_DONE(range_avx2(p, n, lo, hi)); i < n; i++) {
        *lo = p[i] < *lo ? p[i] : *lo;
        *hi = p[i] > *hi ? p[i] : *hi;
    }
}
