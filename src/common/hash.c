#include "common/hash.h"

#include <string.h>
#include <xxhash.h>

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
