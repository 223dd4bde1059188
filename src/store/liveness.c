#include "store/liveness.h"

#include <errno.h>
#include <stdlib.h>

/* Marks slot s needed, and down its chain what decoding it reads: a
 * blob has one reference and one model, and a model stands alone (an
 * open checks both), so this is a walk, not a search; it stops at a slot
 * marked before, whose chain is marked already. */
static int need_chain(const tf_archive *ar, uint8_t *live, uint64_t s, tf_error *e)
{
    for (unsigned steps = 0; steps <= TF_CHAIN_MAX && !(live[s] & TF_LIVE_NEEDED); steps++) {
        tf_blob b;
        if (tf_archive_blob(ar, s, &b, e) < 0)
            return -1;
        live[s] |= TF_LIVE_NEEDED;
        if (b.model)
            live[b.model - 1] |= TF_LIVE_NEEDED;
        if (!b.ref)
            return 0;
        s = b.ref - 1;
    }
    return 0;
}

uint8_t *tf_liveness(const tf_archive *ar, const bool *dropped, tf_error *e)
{
    /* Every file's every chain: a writer that reads records as it needs
     * them reads them all now (its view grows; it stays the same
     * archive). */
    if (tf_archive_load_whole((tf_archive *)ar, e) < 0)
        return NULL;
    uint64_t n = tf_archive_nblobs(ar);
    uint8_t *live = calloc(n ? n : 1, 1);
    if (!live) {
        tf_fail(e, ENOMEM, "out of memory for the liveness of %llu blobs", (unsigned long long)n);
        return NULL;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < tf_archive_nentries(ar); i++) {
        if (dropped && dropped[i])
            continue;
        const tf_entry *ent = tf_archive_entry(ar, i);
        for (uint64_t c = 0; rc == 0 && c < ent->nchunks; c++) {
            live[ent->chunks[c]] |= TF_LIVE_CHUNK;
            rc = need_chain(ar, live, ent->chunks[c], e);
        }
    }
    if (rc < 0) {
        free(live);
        return NULL;
    }
    return live;
}

int tf_liveness_keep(const tf_archive *ar, uint8_t *live, const tf_entry *ent, tf_error *e)
{
    int more = 0;
    uint64_t n = tf_archive_nblobs(ar);
    for (uint64_t c = 0; c < ent->nchunks; c++)
        if (ent->chunks[c] < n && !(live[ent->chunks[c]] & TF_LIVE_NEEDED)) {
            if (need_chain(ar, live, ent->chunks[c], e) < 0)
                return -1;
            more = 1;
        }
    return more;
}

/* The payloads of the slots s < na for which pick(a[s], b[s]) holds (b
 * NULL: 0), sorted by offset; NULL (ENOMEM) or an array of *n. */
static tf_archive_range *payloads(const tf_archive *ar, const uint8_t *a, uint64_t na,
                                  const uint8_t *b, bool (*pick)(uint8_t, uint8_t), size_t *n,
                                  tf_error *e)
{
    uint64_t nblobs = tf_archive_nblobs(ar) < na ? tf_archive_nblobs(ar) : na, k = 0;
    for (uint64_t s = 0; s < nblobs; s++)
        k += pick(a[s], b ? b[s] : 0);
    tf_archive_range *r = malloc((k ? k : 1) * sizeof *r);
    if (!r) {
        tf_fail(e, ENOMEM, "out of memory for %llu payloads", (unsigned long long)k);
        return NULL;
    }
    k = 0;
    for (uint64_t s = 0; s < nblobs; s++)
        if (pick(a[s], b ? b[s] : 0)) {
            tf_blob blob;
            if (tf_archive_blob(ar, s, &blob, e) < 0) {
                free(r);
                return NULL;
            }
            r[k++] = (tf_archive_range){ blob.offset, blob.enc_len };
        }
    tf_archive_ranges_sort(r, k);
    *n = k;
    return r;
}

static bool is_needed(uint8_t a, uint8_t b)
{
    (void)b;
    return a & TF_LIVE_NEEDED;
}

static bool needed_then_not(uint8_t before, uint8_t now)
{
    return (before & TF_LIVE_NEEDED) && !(now & TF_LIVE_NEEDED);
}

int tf_liveness_payload_bytes(const tf_archive *ar, const uint8_t *live, uint64_t *bytes,
                              tf_error *e)
{
    size_t n;
    tf_archive_range *r = payloads(ar, live, UINT64_MAX, NULL, is_needed, &n, e);
    if (!r)
        return -1;
    *bytes = 0;
    /* A payload serves two slots (a redirect's blob and its slot, where
     * something names both): counted once. */
    for (size_t i = 0; i < n; i++)
        if (!i || r[i].off != r[i - 1].off)
            *bytes += r[i].len;
    free(r);
    return 0;
}

/* Whether a payload at off serves one of the slots needed in live. */
static bool still_served(const tf_archive_range *needed, size_t n, uint64_t off)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (needed[mid].off == off)
            return true;
        if (needed[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

int tf_liveness_died(const tf_archive *ar, const uint8_t *before, uint64_t nbefore,
                     const uint8_t *now, tf_archive_range **out, size_t *n, tf_error *e)
{
    *out = NULL;
    *n = 0;
    size_t ndied, nneeded;
    tf_archive_range *died = payloads(ar, before, nbefore, now, needed_then_not, &ndied, e);
    if (!died)
        return -1;
    if (!ndied) {
        free(died);
        return 0;
    }
    tf_archive_range *needed = payloads(ar, now, UINT64_MAX, NULL, is_needed, &nneeded, e);
    if (!needed) {
        free(died);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < ndied; i++)
        if (!still_served(needed, nneeded, died[i].off) && (!k || died[k - 1].off != died[i].off))
            died[k++] = died[i];
    free(needed);
    *out = died;
    *n = k;
    return 0;
}
