#include "store/give_back.h"

#include <errno.h>
#include <stdlib.h>

#include "format/container.h"
#include "store/liveness.h"

/* Sorts n ranges by offset and merges those that overlap or touch.
 * Returns how many are left. */
static size_t merge_ranges(tf_archive_range *r, size_t n)
{
    tf_archive_ranges_sort(r, n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && r[k - 1].off + r[k - 1].len >= r[i].off) {
            uint64_t end = r[i].off + r[i].len;
            if (end > r[k - 1].off + r[k - 1].len)
                r[k - 1].len = end - r[k - 1].off;
        } else {
            r[k++] = r[i];
        }
    }
    return k;
}

static int append_range(tf_archive_range **r, size_t *n, size_t *cap, tf_archive_range x,
                        tf_error *e)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        tf_archive_range *g = realloc(*r, c * sizeof *g);
        if (!g)
            return tf_fail(e, ENOMEM, "out of memory to give space back");
        *r = g;
        *cap = c;
    }
    (*r)[(*n)++] = x;
    return 0;
}

/* append_range for tf_archive_pages. */
typedef struct {
    tf_archive_range **r;
    size_t *n, *cap;
} range_list;

static int append_page(void *arg, uint64_t off, uint64_t len, tf_error *e)
{
    range_list *l = arg;
    return append_range(l->r, l->n, l->cap, (tf_archive_range){ off, len }, e);
}

/* The bytes of the archive that are read from now on, sorted and merged:
 * the superblock, every commit's catalog segment (or root) and trailer
 * (opening reads them all, or searches them), the pages the last
 * commit's catalog reaches (format version 2), and the payloads of the
 * slots live needs. */
static int read_ranges(tf_archive *ar, const uint8_t *live, tf_archive_range **out, size_t *n,
                       tf_error *e)
{
    const uint64_t *frames;
    uint64_t nframes;
    if (tf_container_frames(tf_archive_container(ar), &frames, &nframes, e) < 0)
        return -1;
    tf_archive_range *r = NULL;
    size_t cap = 0;
    *n = 0;
    int rc = append_range(&r, n, &cap, (tf_archive_range){ 0, TF_SUPERBLOCK_SIZE }, e);
    for (uint64_t k = 0; rc == 0 && k < nframes; k++)
        rc = append_range(&r, n, &cap,
                          (tf_archive_range){ frames[2 * k], frames[2 * k + 1] - frames[2 * k] },
                          e);
    if (rc == 0)
        rc = tf_archive_pages(ar, append_page, &(range_list){ &r, n, &cap }, e);
    for (uint64_t s = 0; rc == 0 && s < tf_archive_nblobs(ar); s++)
        if (live[s] & TF_LIVE_NEEDED) {
            tf_blob b;
            rc = tf_archive_blob(ar, s, &b, e);
            if (rc == 0)
                rc = append_range(&r, n, &cap, (tf_archive_range){ b.offset, b.enc_len }, e);
        }
    if (rc < 0) {
        free(r);
        return -1;
    }
    *n = merge_ranges(r, *n);
    *out = r;
    return 0;
}

/* Punches the n ranges of r, sorted and apart. */
static int punch(tf_archive *ar, const tf_archive_range *r, size_t n, tf_error *e)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        tf_error why;
        if (tf_container_punch(tf_archive_container(ar), r[i].off, r[i].len, &why) == 0)
            continue;
        if (rc == 0)
            *e = why;
        rc = -1;
        if (why.errnum == ENOTSUP)
            break;
    }
    return rc;
}

/* The gap between read ranges rd[0..n) around offset off: [lo, hi), or
 * an empty one where off lies inside a read range. */
static tf_archive_range gap_around(const tf_archive_range *rd, size_t n, uint64_t end,
                                   uint64_t off)
{
    size_t lo = 0, hi = n; /* first read range starting after off */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rd[mid].off <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t from = lo ? rd[lo - 1].off + rd[lo - 1].len : 0;
    uint64_t to = lo < n ? rd[lo].off : end;
    return from <= off && from < to ? (tf_archive_range){ from, to - from }
                                    : (tf_archive_range){ off, 0 };
}

int tf_give_back(tf_archive *ar, const uint8_t *live, tf_archive_range *r, size_t n,
                 tf_error *e)
{
    if (!n)
        return 0;
    if (live) {
        tf_archive_range *rd;
        size_t nrd;
        if (read_ranges(ar, live, &rd, &nrd, e) < 0)
            return -1;
        uint64_t end = tf_archive_container(ar)->end;
        for (size_t i = 0; i < n; i++) {
            tf_archive_range g = gap_around(rd, nrd, end, r[i].off);
            if (g.len)
                r[i] = g; /* else still read (a payload two slots share): kept */
            else
                r[i].len = 0;
        }
        free(rd);
    }
    return punch(ar, r, merge_ranges(r, n), e);
}

int tf_give_back_all(tf_archive *ar, const uint8_t *live, tf_error *e)
{
    tf_archive_range *rd;
    size_t nrd;
    if (read_ranges(ar, live, &rd, &nrd, e) < 0)
        return -1;
    uint64_t end = tf_archive_container(ar)->end;
    /* The gaps, in place of the read ranges: one after each. */
    size_t k = 0;
    for (size_t i = 0; i < nrd; i++) {
        uint64_t from = rd[i].off + rd[i].len, to = i + 1 < nrd ? rd[i + 1].off : end;
        if (from < to)
            rd[k++] = (tf_archive_range){ from, to - from };
    }
    int rc = punch(ar, rd, k, e);
    free(rd);
    return rc;
}
