#include "store/read_order.h"

#include <stdlib.h>

typedef struct {
    size_t entry;
    double depth; /* mean delta steps per reconstructed byte */
} ranked;

static int by_depth(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return (x->entry > y->entry) - (x->entry < y->entry);
}

static double mean_depth(const tf_archive *ar, const tf_entry *ent)
{
    double steps = 0, bytes = 0;
    for (uint64_t c = 0; c < ent->nchunks; c++) {
        tf_blob b;
        tf_error ignored;
        if (tf_archive_blob(ar, ent->chunks[c], &b, &ignored) < 0)
            continue; /* damage, which the read reports */
        double raw = (double)b.raw_len;
        steps += raw * tf_archive_chain_depth(ar, ent->chunks[c]);
        bytes += raw;
    }
    return bytes > 0 ? steps / bytes : 0;
}

size_t *tf_read_order(const tf_archive *ar, size_t *n)
{
    size_t nentries = tf_archive_nentries(ar);
    ranked *rank = malloc((nentries ? nentries : 1) * sizeof *rank);
    size_t *order = malloc((nentries ? nentries : 1) * sizeof *order);
    *n = 0;
    if (!rank || !order) {
        free(rank);
        free(order);
        return NULL;
    }
    for (size_t i = 0; i < nentries; i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (tf_entry_is_regular(ent))
            rank[(*n)++] = (ranked){ i, mean_depth(ar, ent) };
    }
    qsort(rank, *n, sizeof *rank, by_depth);
    for (size_t i = 0; i < *n; i++)
        order[i] = rank[i].entry;
    free(rank);
    return order;
}
