#include "cli/hint.h"

void cli_hint_until(cli_hint *h, tf_reader_ctx *r, const tf_archive *ar, const uint64_t *blobs,
                    size_t n, uint64_t until)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    for (; h->next < n && h->raw < until; h->next++) {
        uint64_t b = blobs[h->next];
        if (b >= nblobs)
            continue; /* damage, reported by the read */
        tf_reader_will_need(r, b);
        h->raw += tf_archive_blob(ar, b)->raw_len;
    }
}
