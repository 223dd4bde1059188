#include "common/hash.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/full_io.h"

/* On x86-64 the library's XXH3 entry points use SSE2 whatever the CPU;
 * its dispatching ones use AVX2 or AVX-512 where the CPU has them (about
 * 4x as fast on long inputs), with the same results. The header renames
 * the calls below to them. */
#if defined(HAVE_XXH_X86DISPATCH_H) && defined(HAVE_XXH3_64BITS_DISPATCH)
#include <xxh_x86dispatch.h>
#endif

tf_blob_id tf_blob_id_of(const void *data, size_t len)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
    tf_blob_id id;
    memcpy(id.b, c.digest, sizeof id.b);
    return id;
}

uint64_t tf_hash64(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}

bool tf_hash64_file(int fd, uint64_t off, uint64_t len, int copy_to, uint64_t *out)
{
    enum { PIECE = 1 << 20 };
    XXH3_state_t *st = XXH3_createState();
    uint8_t *buf = malloc(len < PIECE ? (len ? len : 1) : PIECE);
    bool ok = st && buf && XXH3_64bits_reset(st) == XXH_OK;
    for (uint64_t done = 0; ok && done < len;) {
        size_t n = len - done < PIECE ? (size_t)(len - done) : PIECE;
        ok = tf_pread_full(fd, buf, n, off + done) == (ssize_t)n && XXH3_64bits_update(st, buf, n) == XXH_OK &&
             (copy_to < 0 || tf_write_full(copy_to, buf, n) == 0);
        done += n;
    }
    if (ok)
        *out = XXH3_64bits_digest(st);
    free(buf);
    XXH3_freeState(st);
    return ok;
}

bool tf_blob_id_eq(const tf_blob_id *a, const tf_blob_id *b)
{
    return memcmp(a->b, b->b, sizeof a->b) == 0;
}

void tf_blob_id_hex(const tf_blob_id *id, char out[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[id->b[i] >> 4];
        out[2 * i + 1] = digits[id->b[i] & 15];
    }
    out[32] = '\0';
}
