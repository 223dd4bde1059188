#include "io/remote.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/full_io.h"
#include "common/hash.h"
#include "common/pool.h"
#include "io/http.h"
#include "io/range_cache.h"
#include "io/s3.h"
#include "io/segments.h"
#include "io/url.h"

/* Opening fetches this much of the start (the superblock; the size and
 * identity come with it), then this much of the end: the last trailer
 * and its catalog segment (a few KiB a commit on the benchmark
 * trajectory). */
#define HEAD_WANT ((uint64_t)4 << 10)
#define TAIL_WANT ((uint64_t)64 << 10)
/* Ranges this close are fetched as one (the gap's bytes are wasted):
 * consecutive chunks of a tensor sit side by side in their commit, or
 * across the payloads that their commit or a later one retired and gave
 * back (a checkpoint's deltas lie after its keyframes, which the next
 * checkpoint retires), and across small blobs of other files. */
#define MERGE_GAP ((uint64_t)64 << 10)
/* A batch of hints fetched as one range spans at most this many bytes
 * (a hint longer than that goes alone), and holds at most BATCH_MAX
 * hints: small enough that a read waits for little more than its own
 * bytes, and that a long run of hints goes side by side, in the
 * fetchers' requests at once. */
#define BATCH_BYTES ((uint64_t)1 << 20)
#define BATCH_MAX 256
/* What a read that must fetch brings at least, from its start (see
 * read_ahead): a local file's default read-ahead. */
#define READ_AHEAD_BYTES ((uint64_t)128 << 10)
/* A fetcher starts on the pending hints once none came for this long:
 * hints come in bursts (a chain, the prefetcher's next chunks), and a
 * burst fetched as it comes would go one range a request. A read of a
 * pending hint does not wait for it (it fetches the hint's batch). */
#define QUIET_NS 30000L
/* Fetched ranges not yet read are kept up to this many bytes (the
 * oldest dropped first: read later, they are fetched again). */
#define STAGED_MAX ((uint64_t)256 << 20)
#define PENDING_MAX 4096

typedef struct {
    uint64_t off, len;
} span;

typedef struct {
    uint64_t off, len;
    uint8_t *data;
    uint64_t age;
    bool uncached; /* not in the disk cache: the ranges read of it go there */
    uint64_t ahead_off; /* where its read-ahead starts (not in the disk cache either) */
    uint64_t left; /* bytes not read yet (of those wanted): none left, it is done with */
} piece;

typedef struct tf_remote tf_remote;

struct tf_remote {
    tf_io io; /* first: the tf_io is the tf_remote */
    char *name; /* for messages: the URL without its query (a presigned
                 * URL's signature stays out of logs) */
    tf_http *http;
    tf_s3_request s3; /* an s3:// URL's request, else all NULL */
    tf_segments *segments; /* an archive written in segments, else NULL (one object) */
    tf_range_cache *cache;
    pthread_mutex_t follow_mu; /* one look at what the object is now at a time */
    pthread_mutex_t mu;
    uint64_t size;
    uint64_t generation; /* identities adopted */
    uint64_t polled;     /* the generation the last poll told of */
    /* The end of the newest commit known and the bytes before it (its
     * trailer): what the object holds there as long as it only grows. */
    uint64_t anchor_end;
    uint8_t anchor[TF_RANGE_ANCHOR_MAX];
    size_t anchor_len;
    pthread_cond_t landed; /* a fetch finished */
    pthread_cond_t hinted; /* a hint is pending, or stopping (CLOCK_MONOTONIC) */
    struct timespec last_hint;
    bool stopping;
    tf_pool *fetchers; /* one fetcher() per thread */
    piece *staged;
    size_t nstaged, cap_staged;
    uint64_t staged_bytes, clock;
    span *pending, *inflight;
    size_t npending, ninflight, cap_inflight;
    bool print_counters;
};

static tf_remote *remote_of(tf_io *io) { return (tf_remote *)io; }

static bool contains(uint64_t off, uint64_t len, uint64_t o, uint64_t l)
{
    return o >= off && l <= len && o - off <= len - l;
}

/* ---- the bytes: one object, or an archive's segments ---- */

static int src_probe(tf_remote *r, tf_http_identity *now, tf_error *e)
{
    return r->segments ? tf_segments_probe(r->segments, now, e) : tf_http_probe(r->http, now, e);
}

static void src_identity(tf_remote *r, tf_http_identity *id)
{
    if (r->segments)
        tf_segments_identity(r->segments, id);
    else
        tf_http_identity_get(r->http, id);
}

static void src_adopt(tf_remote *r, const tf_http_identity *id)
{
    if (r->segments)
        tf_segments_adopt(r->segments, id);
    else
        tf_http_adopt(r->http, id);
}

static int src_fetch_as(tf_remote *r, const tf_http_identity *id, tf_http_range *range, tf_error *e)
{
    return r->segments ? tf_segments_fetch_as(r->segments, id, range, 1, e)
                       : tf_http_fetch_as(r->http, id, range, 1, e);
}

static int src_fetch(tf_remote *r, tf_http_range *range, tf_error *e)
{
    tf_http_identity id;
    src_identity(r, &id);
    return src_fetch_as(r, &id, range, e);
}

/* ---- staged pieces, pending hints, fetches in flight (under mu) ---- */

static void unstage(tf_remote *r, size_t i)
{
    r->staged_bytes -= r->staged[i].len;
    free(r->staged[i].data);
    r->staged[i] = r->staged[--r->nstaged];
}

/* Keeps p (taking its data), dropping the oldest beyond STAGED_MAX. */
static void stage(tf_remote *r, piece p)
{
    if (r->nstaged == r->cap_staged) {
        size_t cap = r->cap_staged ? r->cap_staged * 2 : 64;
        piece *more = realloc(r->staged, cap * sizeof *more);
        if (!more) {
            free(p.data);
            return;
        }
        r->staged = more;
        r->cap_staged = cap;
    }
    p.age = r->clock++;
    r->staged[r->nstaged++] = p;
    r->staged_bytes += p.len;
    while (r->staged_bytes > STAGED_MAX && r->nstaged > 1) {
        size_t oldest = 0;
        for (size_t i = 1; i < r->nstaged; i++)
            if (r->staged[i].age < r->staged[oldest].age)
                oldest = i;
        unstage(r, oldest);
    }
}

/* Copies [off, off + len) from a staged piece that holds it (*uncached:
 * one not in the disk cache); a piece whose bytes were all read is done
 * with (a blob is read once: the reader caches what it decodes). */
static bool take_staged(tf_remote *r, uint64_t off, uint64_t len, void *buf, bool *uncached)
{
    for (size_t i = 0; i < r->nstaged; i++) {
        piece *p = &r->staged[i];
        if (contains(p->off, p->len, off, len)) {
            memcpy(buf, p->data + (off - p->off), len);
            *uncached = p->uncached || off + len > p->ahead_off;
            p->left -= len < p->left ? len : p->left;
            if (!p->left)
                unstage(r, i);
            else
                p->age = r->clock++;
            return true;
        }
    }
    return false;
}

static bool covered(const span *s, size_t n, uint64_t off, uint64_t len)
{
    for (size_t i = 0; i < n; i++)
        if (contains(s[i].off, s[i].len, off, len))
            return true;
    return false;
}

/* The staged piece that holds [off, off + len), or NULL. */
static const piece *staged_at(const tf_remote *r, uint64_t off, uint64_t len)
{
    for (size_t i = 0; i < r->nstaged; i++)
        if (contains(r->staged[i].off, r->staged[i].len, off, len))
            return &r->staged[i];
    return NULL;
}

static bool is_staged(const tf_remote *r, uint64_t off, uint64_t len)
{
    return staged_at(r, off, len) != NULL;
}

/* Whether [off, off + len) lies below the anchor (under mu): bytes that
 * every version of the object grown from this one keeps, the only ones
 * the disk cache holds. */
static bool below_anchor(const tf_remote *r, uint64_t off, uint64_t len)
{
    return off <= r->anchor_end && len <= r->anchor_end - off;
}

static bool anchored(tf_remote *r, uint64_t off, uint64_t len)
{
    pthread_mutex_lock(&r->mu);
    bool below = below_anchor(r, off, len);
    pthread_mutex_unlock(&r->mu);
    return below;
}

static void remote_will_need(tf_io *io, uint64_t off, uint64_t len)
{
    tf_remote *r = remote_of(io);
    /* What the disk cache has (of a commit checked) is read from there
     * when asked for, not fetched ahead: the disk is told instead. */
    if (r->cache && anchored(r, off, len) && tf_range_cache_will_need(r->cache, off, len))
        return;
    pthread_mutex_lock(&r->mu);
    const piece *p = NULL;
    uint8_t *copy = NULL;
    if (len && off <= r->size && len <= r->size - off && r->npending < PENDING_MAX &&
        !covered(r->pending, r->npending, off, len) && !covered(r->inflight, r->ninflight, off, len)) {
        p = staged_at(r, off, len);
        if (!p) {
            r->pending[r->npending++] = (span){ off, len };
            clock_gettime(CLOCK_MONOTONIC, &r->last_hint);
            pthread_cond_signal(&r->hinted);
        }
        /* Hinted ranges are what the disk cache is asked for: one inside
         * the object's ends (fetched at open, uncached) goes there now,
         * so that a later open, whose ends lie elsewhere, finds it. */
        else if (p->uncached && r->cache && below_anchor(r, off, len) && (copy = malloc(len)))
            memcpy(copy, p->data + (off - p->off), len);
    }
    pthread_mutex_unlock(&r->mu);
    if (copy)
        tf_range_cache_put(r->cache, off, len, copy);
    free(copy);
}

static int mark_inflight(tf_remote *r, const span *s, size_t n)
{
    if (r->ninflight + n > r->cap_inflight) {
        size_t cap = (r->ninflight + n) * 2;
        span *more = realloc(r->inflight, cap * sizeof *more);
        if (!more)
            return -1;
        r->inflight = more;
        r->cap_inflight = cap;
    }
    memcpy(r->inflight + r->ninflight, s, n * sizeof *s);
    r->ninflight += n;
    return 0;
}

static void unmark_inflight(tf_remote *r, const span *s, size_t n)
{
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < r->ninflight; i++)
            if (r->inflight[i].off == s[k].off && r->inflight[i].len == s[k].len) {
                r->inflight[i] = r->inflight[--r->ninflight];
                break;
            }
}

static void drop_pending(tf_remote *r, size_t i)
{
    memmove(r->pending + i, r->pending + i + 1, (r->npending - i - 1) * sizeof *r->pending);
    r->npending--;
}

/* A batch: `seed` and the pending hints that touch it or each other (at
 * most MERGE_GAP apart), within BATCH_BYTES of each other, taken from
 * the pending ones; hints already staged or in flight are dropped.
 * Fetched as one range. */
static size_t gather(tf_remote *r, span seed, span *batch)
{
    size_t n = 0;
    batch[n++] = seed;
    uint64_t lo = seed.off, hi = seed.off + seed.len;
    for (bool grew = true; grew && n < BATCH_MAX;) {
        grew = false;
        for (size_t i = 0; i < r->npending && n < BATCH_MAX;) {
            span h = r->pending[i];
            uint64_t nlo = h.off < lo ? h.off : lo;
            uint64_t nhi = h.off + h.len > hi ? h.off + h.len : hi;
            if (h.off > hi + MERGE_GAP || h.off + h.len + MERGE_GAP < lo || nhi - nlo > BATCH_BYTES) {
                i++;
                continue;
            }
            drop_pending(r, i);
            if (covered(batch, n, h.off, h.len) || covered(r->inflight, r->ninflight, h.off, h.len) ||
                is_staged(r, h.off, h.len))
                continue;
            batch[n++] = h;
            lo = nlo, hi = nhi;
            grew = true;
        }
    }
    return n;
}

static int follow_object(tf_remote *r, tf_error *e);

/* Fetches [p->off, p->off + p->len) into p->data; an object that grew
 * (another size or ETag) is followed and asked again, one rewritten
 * fails. */
static int fetch_piece(tf_remote *r, piece *p, tf_error *e)
{
    tf_http_range range = { p->off, p->len, p->data };
    int rc = src_fetch(r, &range, e);
    if (rc == TF_HTTP_CHANGED)
        rc = follow_object(r, e) < 0 || src_fetch(r, &range, e) < 0 ? -1 : 0;
    return rc;
}

/* Has the batch's spans: those the disk cache holds from it, the others
 * fetched as one range (the gaps between them wasted) and put in the
 * disk cache, with `ahead` (len 0: none) after them when there are.
 * With buf, copies [off, off + len), which a span holds, into it;
 * stages the rest. */
static int fetch_batch(tf_remote *r, const span *s, size_t n, span ahead, uint64_t off, size_t len,
                       void *buf, tf_error *e)
{
    piece *got = calloc(n + 1, sizeof *got); /* the cached spans, then the fetched range */
    bool *cached = calloc(n, sizeof *cached);
    size_t ngot = 0;
    int rc = got && cached ? 0 : tf_fail(e, ENOMEM, "out of memory");
    uint64_t lo = UINT64_MAX, hi = 0, missing = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint8_t *data = r->cache && anchored(r, s[i].off, s[i].len) ? malloc(s[i].len) : NULL;
        if ((cached[i] = data && tf_range_cache_get(r->cache, s[i].off, s[i].len, data))) {
            got[ngot++] = (piece){ .off = s[i].off, .len = s[i].len, .data = data, .left = s[i].len,
                                   .ahead_off = s[i].off + s[i].len };
            continue;
        }
        free(data);
        lo = s[i].off < lo ? s[i].off : lo;
        hi = s[i].off + s[i].len > hi ? s[i].off + s[i].len : hi;
        missing += s[i].len;
    }
    if (rc == 0 && missing) {
        uint64_t ahead_off = hi;
        if (ahead.len && ahead.off == hi) {
            hi += ahead.len;
            missing += ahead.len;
        }
        piece *p = &got[ngot++];
        *p = (piece){ .off = lo, .len = hi - lo, .left = missing, .ahead_off = ahead_off };
        rc = (p->data = malloc(hi - lo)) ? fetch_piece(r, p, e)
                                         : tf_fail(e, ENOMEM, "out of memory for %" PRIu64 " bytes", hi - lo);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            if (cached[i])
                continue;
            if (r->cache && anchored(r, s[i].off, s[i].len))
                tf_range_cache_put(r->cache, s[i].off, s[i].len, p->data + (s[i].off - lo));
            else
                p->uncached = true; /* beyond the anchor: a commit not yet checked */
        }
    }
    for (size_t i = 0; rc == 0 && buf && i < ngot; i++)
        if (contains(got[i].off, got[i].len, off, len)) {
            memcpy(buf, got[i].data + (off - got[i].off), len);
            got[i].left -= len < got[i].left ? len : got[i].left;
            break;
        }
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < ngot; i++) {
        if (rc == 0 && got[i].left)
            stage(r, got[i]);
        else
            free(got[i].data);
    }
    pthread_mutex_unlock(&r->mu);
    free(got), free(cached);
    return rc;
}

/* Marks the batch in flight (so that a read of one of its spans waits
 * instead of fetching it again), fetches it without mu, then wakes the
 * waiters; with buf, for the read [off, off + len). Called with mu
 * held, returns with it held. */
static int fetch_in_flight(tf_remote *r, span *batch, size_t n, span ahead, uint64_t off,
                           size_t len, void *buf, tf_error *e)
{
    batch[n] = ahead; /* in flight too, while it is */
    size_t marks = n + (ahead.len > 0);
    bool marked = mark_inflight(r, batch, marks) == 0;
    pthread_mutex_unlock(&r->mu);
    int rc = fetch_batch(r, batch, n, ahead, off, len, buf, e);
    pthread_mutex_lock(&r->mu);
    if (marked)
        unmark_inflight(r, batch, marks);
    pthread_cond_broadcast(&r->landed);
    return rc;
}

/* Whether the hints pending came in a burst that is over: none came
 * for QUIET_NS; else *until is when it would be (under mu). */
static bool burst_over(const tf_remote *r, struct timespec *until)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    *until = r->last_hint;
    until->tv_nsec += QUIET_NS;
    if (until->tv_nsec >= 1000000000L)
        until->tv_sec++, until->tv_nsec -= 1000000000L;
    return now.tv_sec > until->tv_sec || (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec);
}

/* A fetcher: fetches the pending hints, the oldest first, in batches,
 * so that they are on their way when hinted and each read waits only
 * for the batch that holds it. A failed batch is dropped: the read of
 * it fetches it again, and tells the error. */
static void fetcher(void *arg)
{
    tf_remote *r = arg;
    span batch[BATCH_MAX + 1];
    pthread_mutex_lock(&r->mu);
    for (;;) {
        struct timespec until;
        while (!r->stopping && (!r->npending || !burst_over(r, &until))) {
            if (r->npending)
                pthread_cond_timedwait(&r->hinted, &r->mu, &until);
            else
                pthread_cond_wait(&r->hinted, &r->mu);
        }
        if (r->stopping)
            break;
        span seed = r->pending[0];
        drop_pending(r, 0);
        if (covered(r->inflight, r->ninflight, seed.off, seed.len) || is_staged(r, seed.off, seed.len))
            continue;
        size_t n = gather(r, seed, batch);
        (void)fetch_in_flight(r, batch, n, (span){ 0, 0 }, 0, 0, NULL, NULL);
    }
    pthread_mutex_unlock(&r->mu);
}

/* A read that must fetch waits for a round trip; the bytes after its
 * batch, up to READ_AHEAD_BYTES from its start, come with it when it
 * fetches, as a local file's read-ahead brings them: they hold the
 * blobs written next to its own, the next small tensors of its
 * checkpoint, which its reader asks for next, one round trip each,
 * before hints for them come. Returns them (len 0: none; under mu). */
static span read_ahead(const tf_remote *r, const span *batch, size_t n)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = batch[i].off < lo ? batch[i].off : lo;
        hi = batch[i].off + batch[i].len > hi ? batch[i].off + batch[i].len : hi;
    }
    if (hi - lo >= READ_AHEAD_BYTES || hi >= r->size)
        return (span){ 0, 0 };
    uint64_t want = READ_AHEAD_BYTES - (hi - lo);
    return (span){ hi, want < r->size - hi ? want : r->size - hi };
}

static int remote_pread(tf_io *io, uint64_t off, void *buf, size_t len, tf_error *e)
{
    tf_remote *r = remote_of(io);
    if (len == 0)
        return 0;
    pthread_mutex_lock(&r->mu);
    if (off > r->size || len > r->size - off) {
        uint64_t size = r->size;
        pthread_mutex_unlock(&r->mu);
        return tf_fail(e, EIO, "%s: read of %zu bytes at %" PRIu64 " beyond its %" PRIu64 " bytes",
                       r->name, len, off, size);
    }
    for (bool tried_disk = false;;) {
        bool uncached;
        if (take_staged(r, off, len, buf, &uncached)) {
            pthread_mutex_unlock(&r->mu);
            if (uncached && r->cache && anchored(r, off, len))
                tf_range_cache_put(r->cache, off, len, buf);
            return 0;
        }
        if (covered(r->inflight, r->ninflight, off, len)) {
            pthread_cond_wait(&r->landed, &r->mu); /* a fetch under way holds it */
            continue;
        }
        /* Neither staged nor on its way: read here from the disk cache
         * when it has it (a hint of it was dropped: remote_will_need). */
        if (tried_disk || !r->cache || !below_anchor(r, off, len))
            break;
        tried_disk = true;
        pthread_mutex_unlock(&r->mu);
        bool got = tf_range_cache_get(r->cache, off, len, buf);
        pthread_mutex_lock(&r->mu);
        if (got) {
            pthread_mutex_unlock(&r->mu);
            return 0;
        }
    }
    /* Not on its way: fetched now, in the batch of the hint that holds
     * it when there is one (not waiting for a fetcher to come to it). */
    span seed = { off, len };
    for (size_t i = 0; i < r->npending; i++)
        if (contains(r->pending[i].off, r->pending[i].len, off, len)) {
            seed = r->pending[i];
            drop_pending(r, i);
            break;
        }
    /* A hint longer than the read tells what comes next (a trailer's
     * catalog): nothing to guess. */
    bool guess = seed.off == off && seed.len == len;
    span batch[BATCH_MAX + 1];
    size_t n = gather(r, seed, batch);
    span ahead = guess ? read_ahead(r, batch, n) : (span){ 0, 0 };
    int rc = fetch_in_flight(r, batch, n, ahead, off, len, buf, e);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static bool remote_forget(tf_io *io, uint64_t off, uint64_t len)
{
    tf_remote *r = remote_of(io);
    pthread_mutex_lock(&r->mu);
    for (size_t i = r->nstaged; i-- > 0;)
        if (r->staged[i].off < off + len && off < r->staged[i].off + r->staged[i].len)
            unstage(r, i);
    pthread_mutex_unlock(&r->mu);
    if (r->cache)
        tf_range_cache_drop(r->cache, off, len);
    return true;
}

/* ---- following an object that grows ---- */

/* Fetches [off, off + len) of the object `id` from the server, past
 * every copy kept. */
static int fetch_now(tf_remote *r, const tf_http_identity *id, uint64_t off, uint8_t *buf,
                     uint64_t len, tf_error *e)
{
    tf_http_range range = { off, len, buf };
    return src_fetch_as(r, id, &range, e) < 0 ? -1 : 0;
}

/* Whether the object `now` holds the anchor's bytes where they were:
 * is what it was, with bytes appended. */
static int check_extends(tf_remote *r, const tf_http_identity *now, tf_error *e)
{
    pthread_mutex_lock(&r->mu);
    uint64_t end = r->anchor_end;
    size_t n = r->anchor_len;
    uint8_t want[TF_RANGE_ANCHOR_MAX], got[TF_RANGE_ANCHOR_MAX];
    memcpy(want, r->anchor, n);
    pthread_mutex_unlock(&r->mu);
    if (now->size < end)
        return tf_fail(e, EIO, "%s: the object was cut to %" PRIu64 " bytes, inside its commit "
                       "ending at %" PRIu64 ": refused", r->name, now->size, end);
    /* Segments are never rewritten, and the listing that told `now`
     * found the newest one known unchanged (io/segments.c): bytes were
     * appended, no fetch needed to tell. */
    if (r->segments)
        return 0;
    if (n && fetch_now(r, now, end - n, got, n, e) < 0)
        return -1;
    if (memcmp(got, want, n) != 0)
        return tf_fail(e, EIO, "%s: the object was rewritten (its commit ending at %" PRIu64
                       " is not there any more): refused", r->name, end);
    return 0;
}

/* Asks the server what the object is now; adopts its new size and ETag
 * when it only grew, so that reads go on (the bytes kept, all below the
 * anchor, stay right); fails when it was rewritten, adopting nothing. */
static int follow_object(tf_remote *r, tf_error *e)
{
    pthread_mutex_lock(&r->follow_mu);
    tf_http_identity now, was;
    int rc = src_probe(r, &now, e);
    src_identity(r, &was);
    if (rc == 0 && (now.size != was.size || strcmp(now.etag, was.etag) != 0)) {
        rc = check_extends(r, &now, e);
        if (rc == 0) {
            src_adopt(r, &now);
            pthread_mutex_lock(&r->mu);
            r->size = now.size;
            r->generation++;
            pthread_mutex_unlock(&r->mu);
        }
    }
    pthread_mutex_unlock(&r->follow_mu);
    return rc;
}

static int remote_poll(tf_io *io, uint64_t *size, bool *changed, tf_error *e)
{
    tf_remote *r = remote_of(io);
    if (follow_object(r, e) < 0)
        return -1;
    pthread_mutex_lock(&r->mu);
    *size = r->size;
    *changed = r->generation != r->polled;
    r->polled = r->generation;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static void remote_anchor(tf_io *io, uint64_t end, const uint8_t *bytes, size_t n)
{
    tf_remote *r = remote_of(io);
    if (n > TF_RANGE_ANCHOR_MAX || n > end)
        return;
    pthread_mutex_lock(&r->mu);
    bool newer = end > r->anchor_end && end <= r->size;
    if (newer) {
        r->anchor_end = end;
        memcpy(r->anchor, bytes, n);
        r->anchor_len = n;
    }
    pthread_mutex_unlock(&r->mu);
    if (newer && r->cache)
        tf_range_cache_anchor_put(r->cache, end, bytes, n);
}

void tf_remote_keep(tf_io *io, uint64_t off, uint64_t len, int fd)
{
    tf_remote *r = remote_of(io);
    uint8_t tail[TF_RANGE_ANCHOR_MAX];
    size_t n = len < sizeof tail ? (size_t)len : sizeof tail;
    if (!r->cache || tf_pread_full(fd, tail, n, len - n) != (ssize_t)n)
        return;
    remote_anchor(io, off + len, tail, n);
    if (anchored(r, off, len))
        tf_range_cache_put_file(r->cache, off, len, fd);
}

/* ---- open, close ---- */

static int open_http(tf_remote *r, const char *url, const tf_remote_opts *o, tf_error *e)
{
    tf_http_limits lim = { o->timeout_ms, o->min_speed, o->connect_timeout_ms, o->retries,
                           o->parallel };
    if (!tf_s3_is_url(url))
        return tf_http_new(url, &(tf_http_auth){ 0 }, &lim, &r->http, e);
    if (tf_s3_resolve(url, o->s3_endpoint, o->s3_region, &r->s3, e) < 0)
        return -1;
    tf_http_auth auth = { r->s3.sigv4, r->s3.userpwd, r->s3.token };
    /* One listing tells whether trajfs wrote the archive there in
     * segments (io/segments.h), or it is one object. */
    return tf_http_new(r->s3.url, &auth, &lim, &r->http, e) < 0 ||
                   tf_segments_open(r->http, &r->s3, &r->segments, e) < 0
               ? -1
               : 0;
}

/* Whether the object holds the n bytes given at [end - n, end): from
 * the staged tail when it has them, else fetched (one request). */
static bool holds(tf_remote *r, const piece *tail, uint64_t end, const uint8_t *bytes, size_t n)
{
    if (end > r->size || n > end)
        return false;
    if (contains(tail->off, tail->len, end - n, n))
        return memcmp(tail->data + (end - n - tail->off), bytes, n) == 0;
    uint8_t got[TF_RANGE_ANCHOR_MAX];
    tf_http_identity id;
    src_identity(r, &id);
    return fetch_now(r, &id, end - n, got, n, NULL) == 0 && memcmp(got, bytes, n) == 0;
}

/* Opens the disk cache of the object, named by its URL, and makes its
 * entries those of the object as it is now: kept when the object holds
 * the cache's anchor (it only grew since), all dropped otherwise
 * (replaced, rewritten, or no anchor to tell); the anchor is then the
 * object's end, its last commit. */
static int open_cache(tf_remote *r, const tf_remote_opts *o, const piece *tail, tf_error *e)
{
    char name[33];
    tf_blob_id id = tf_blob_id_of(r->name, strlen(r->name));
    tf_blob_id_hex(&id, name);
    if (tf_range_cache_open(o->cache_dir, name, o->cache_max, &r->cache, e) < 0)
        return -1;
    uint64_t end;
    uint8_t bytes[TF_RANGE_ANCHOR_MAX];
    size_t n;
    if (!tf_range_cache_anchor_get(r->cache, &end, bytes, &n) || !holds(r, tail, end, bytes, n))
        tf_range_cache_drop(r->cache, 0, UINT64_MAX);
    else if (end < r->size) /* what lies past it was of no commit then */
        tf_range_cache_drop(r->cache, end, UINT64_MAX - end);
    tf_range_cache_anchor_put(r->cache, r->anchor_end, r->anchor, r->anchor_len);
    return 0;
}

/* The object's first and last bytes, staged (the last last), always
 * from the server: they tell what the object is now. */
static int fetch_ends(tf_remote *r, tf_error *e)
{
    tf_buf head = { 0 };
    tf_http_identity id = { 0 };
    uint64_t hn; /* the head's bytes */
    /* One object: its first bytes tell its size, then its last come.
     * Segments: the listing told the size (a superblock's at least),
     * both come at once. */
    if (r->segments) {
        tf_segments_identity(r->segments, &id);
        r->size = id.size;
        hn = r->size < HEAD_WANT ? r->size : HEAD_WANT;
        if (!tf_buf_reserve(&head, hn))
            return tf_fail(e, ENOMEM, "out of memory");
    } else if (tf_http_first(r->http, HEAD_WANT, &head, &r->size, e) == 0) {
        hn = head.len;
    } else {
        tf_buf_free(&head);
        return -1;
    }
    uint64_t tn = r->size - hn < TAIL_WANT ? r->size - hn : TAIL_WANT;
    piece tail = { .off = r->size - tn, .len = tn, .data = tn ? malloc(tn) : NULL, .uncached = true,
                   .left = tn, .ahead_off = r->size };
    tf_http_range ranges[2] = { { 0, hn, head.data }, { tail.off, tn, tail.data } };
    int rc = tn && !tail.data ? tf_fail(e, ENOMEM, "out of memory") : 0;
    if (rc == 0 && r->segments && hn)
        rc = tf_segments_fetch_as(r->segments, &id, ranges, tn ? 2 : 1, e);
    else if (rc == 0 && tn)
        rc = src_fetch(r, &ranges[1], e);
    if (rc < 0) {
        free(tail.data);
        tf_buf_free(&head);
        return -1;
    }
    if (r->segments)
        tf_buf_commit(&head, hn);
    pthread_mutex_lock(&r->mu);
    stage(r, (piece){ .len = head.len, .data = head.data, .uncached = true, .left = head.len,
                      .ahead_off = head.len });
    if (tn)
        stage(r, tail); /* the last last */
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* As many fetchers as transfers at once: each has one at a time. */
static int start_fetchers(tf_remote *r, unsigned n, tf_error *e)
{
    if (n && !(r->fetchers = tf_pool_new(n)))
        return tf_fail(e, EAGAIN, "cannot start the fetcher threads");
    for (unsigned i = 0; i < n; i++)
        if (tf_pool_add(r->fetchers, fetcher, r, e) < 0)
            return -1;
    return 0;
}

static void stop_fetchers(tf_remote *r)
{
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_cond_broadcast(&r->hinted);
    pthread_mutex_unlock(&r->mu);
    tf_pool_free(r->fetchers);
}

static void free_remote(tf_remote *r);
static const tf_io_ops remote_ops;

int tf_remote_open(const char *name, const tf_remote_opts *o, tf_io **out, tf_error *e)
{
    char *url;
    if (tf_url_resolve(name, &url, e) < 0)
        return -1;
    tf_remote *r = calloc(1, sizeof *r);
    if (!r) {
        free(url);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    r->io.ops = &remote_ops;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->follow_mu, NULL);
    pthread_cond_init(&r->landed, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&r->hinted, &monotonic);
    pthread_condattr_destroy(&monotonic);
    r->print_counters = getenv("TRAJFS_REMOTE_STATS") != NULL;
    r->pending = malloc(PENDING_MAX * sizeof *r->pending);
    /* The URL for messages and for the cache's name of the object:
     * without user, password and query, which for a presigned URL is a
     * credential that changes. */
    if (!(r->name = tf_io_shown_name(url)) || !r->pending) {
        free(url);
        free_remote(r);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    int rc = open_http(r, url, o, e) < 0 || fetch_ends(r, e) < 0 ? -1 : 0;
    free(url);
    if (rc == 0) { /* the end as opened: its last commit, which the caller checks */
        const piece *tail = &r->staged[r->nstaged - 1];
        r->anchor_end = r->size;
        r->anchor_len = tail->len < TF_RANGE_ANCHOR_MAX ? (size_t)tail->len : TF_RANGE_ANCHOR_MAX;
        memcpy(r->anchor, tail->data + tail->len - r->anchor_len, r->anchor_len);
        if (o->cache_dir)
            rc = open_cache(r, o, tail, e);
    }
    if (rc == 0)
        rc = start_fetchers(r, o->parallel, e);
    if (rc < 0) {
        free_remote(r);
        return -1;
    }
    *out = &r->io;
    return 0;
}

tf_segments *tf_remote_segments(tf_io *io)
{
    return remote_of(io)->segments;
}

tf_http *tf_remote_http(tf_io *io)
{
    return remote_of(io)->http;
}

static void remote_cancel(tf_io *io)
{
    tf_remote *r = remote_of(io);
    if (r->http)
        tf_http_cancel(r->http);
}

static void free_remote(tf_remote *r)
{
    remote_cancel(&r->io);
    stop_fetchers(r);
    if (r->print_counters && r->http) {
        uint64_t requests, bytes;
        tf_http_counters(r->http, &requests, &bytes);
        fprintf(stderr, "trajfs: %s: %" PRIu64 " requests, %" PRIu64 " bytes fetched\n", r->name,
                requests, bytes);
    }
    while (r->nstaged)
        unstage(r, r->nstaged - 1);
    free(r->staged);
    free(r->pending);
    free(r->inflight);
    tf_range_cache_close(r->cache);
    tf_segments_free(r->segments);
    tf_http_free(r->http);
    tf_s3_request_free(&r->s3);
    pthread_cond_destroy(&r->landed);
    pthread_cond_destroy(&r->hinted);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->follow_mu);
    free(r->name);
    free(r);
}

static void remote_close(tf_io *io)
{
    free_remote(remote_of(io));
}

/* No owner, mode or time of its own here: the reading user's, readable,
 * dated now. */
static int remote_stat(tf_io *io, struct stat *st, tf_error *e)
{
    (void)e;
    tf_remote *r = remote_of(io);
    *st = (struct stat){ .st_mode = S_IFREG | 0444, .st_nlink = 1, .st_uid = getuid(),
                         .st_gid = getgid() };
    pthread_mutex_lock(&r->mu);
    st->st_size = (off_t)r->size;
    pthread_mutex_unlock(&r->mu);
    clock_gettime(CLOCK_REALTIME, &st->st_mtim);
    return 0;
}

static const tf_io_ops remote_ops = {
    .remote = true,
    .pread = remote_pread,
    .will_need = remote_will_need,
    .forget = remote_forget,
    .poll = remote_poll,
    .anchor = remote_anchor,
    .stat = remote_stat,
    .cancel = remote_cancel,
    .close = remote_close,
};
