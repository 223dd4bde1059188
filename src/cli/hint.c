#include "cli/hint.h"

#include <stdbool.h>
#include <stdlib.h>

uint64_t *cli_blob_order(const tf_archive *ar, const size_t *files, size_t nfiles, size_t *n)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    bool *seen = calloc(nblobs ? nblobs : 1, sizeof *seen);
    uint64_t *order = malloc((nblobs ? nblobs : 1) * sizeof *order);
    *n = 0;
    for (size_t i = 0; seen && order && i < nfiles; i++) {
        const tf_entry *ent = tf_archive_entry(ar, files[i]);
        for (uint64_t c = 0; c < ent->nchunks; c++) {
            uint64_t b = ent->chunks[c];
            if (b < nblobs && !seen[b]) /* out of range: damage, reported by the read */
                seen[b] = true, order[(*n)++] = b;
        }
    }
    if (!seen) {
        free(order);
        order = NULL;
    }
    free(seen);
    return order;
}

void cli_hint_until(cli_hint *h, tf_reader_ctx *r, const tf_archive *ar, const uint64_t *blobs,
                    size_t n, uint64_t until)
{
    size_t from = h->next;
    for (; h->next < n && h->raw < until; h->next++) {
        tf_blob b;
        tf_error ignored; /* damage, reported by the read */
        if (tf_archive_blob(ar, blobs[h->next], &b, &ignored) == 0)
            h->raw += b.raw_len;
    }
    tf_reader_will_need(r, blobs + from, h->next - from);
}
