#include "io/segments.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "io/s3_ops.h"

/* A listing page: S3's largest. */
#define LIST_PAGE 1000
/* "GGGGGGGG-SSSSSSSSSSSSSSSS" */
#define NAME_LEN 25

typedef struct {
    uint64_t start, len;
    char etag[TF_HTTP_ETAG_MAX];
    char *url; /* stays where it is while the map grows */
} segment;

struct tf_segments {
    tf_http *h;
    const tf_s3_request *req;
    char *prefix, *shown;
    uint32_t gen;               /* the generation read */
    pthread_mutex_t list_mu;    /* one listing at a time; taken before mu */
    pthread_mutex_t mu;         /* the map and the identities */
    segment *v;                 /* sorted by start, joined up */
    size_t n, cap;
    bool more;                  /* older segments than v[0] are still to list */
    bool sealed;                /* an empty object follows the newest segment */
    char *resume;               /* the key to list after for them */
    tf_http_identity adopted;
};

char *tf_segments_prefix(const char *archive_key)
{
    char *p;
    return asprintf(&p, "%s/", archive_key) < 0 ? NULL : p;
}

char *tf_segments_key(const char *archive_key, uint32_t gen, uint64_t start)
{
    char *k;
    return asprintf(&k, "%s/%08" PRIx32 "-%016" PRIx64, archive_key, ~gen, ~start) < 0 ? NULL : k;
}

static bool parse_hex(const char *s, size_t n, uint64_t *v)
{
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
        if (d == 16)
            return false;
        *v = *v << 4 | d;
    }
    return true;
}

bool tf_segments_parse(const char *prefix, const char *key, uint32_t *gen, uint64_t *start)
{
    size_t pl = strlen(prefix);
    uint64_t g, st;
    if (strncmp(key, prefix, pl) != 0 || strlen(key + pl) != NAME_LEN || key[pl + 8] != '-' ||
        !parse_hex(key + pl, 8, &g) || !parse_hex(key + pl + 9, 16, &st))
        return false;
    *gen = ~(uint32_t)g;
    *start = ~st;
    return true;
}

static bool parse_name(const tf_segments *s, const char *key, uint32_t *gen, uint64_t *start)
{
    return tf_segments_parse(s->prefix, key, gen, start);
}

/* A listed object as a segment (its URL made). */
static int to_segment(tf_segments *s, const tf_s3_object *o, uint64_t start, segment *out, tf_error *e)
{
    *out = (segment){ .start = start, .len = o->size };
    memcpy(out->etag, o->etag, sizeof out->etag);
    if (o->size == 0 || start + o->size < start)
        return tf_fail(e, EIO, "%s: segment %s has a bad size", s->shown, o->key);
    return tf_s3_key_url(s->req, o->key, &out->url, e);
}

static int grow(tf_segments *s, size_t more, tf_error *e)
{
    if (s->n + more <= s->cap)
        return 0;
    size_t cap = (s->n + more) * 2;
    segment *v = realloc(s->v, cap * sizeof *v);
    if (!v)
        return tf_fail(e, ENOMEM, "out of memory");
    s->v = v;
    s->cap = cap;
    return 0;
}

static void free_all(segment *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].url);
}

/* A listing page's segments of the generation read, the newest first. */
typedef struct {
    segment *v;
    size_t n;
    bool sealed; /* the page holds a seal */
    char *next;  /* the key to list after for the next page; NULL: no
                  * older segment of this generation is left to list */
} seg_page;

static void free_page(seg_page *p)
{
    free_all(p->v, p->n);
    free(p->v);
    free(p->next);
    *p = (seg_page){ 0 };
}

/* The generation of the listing's first segment: adopted (opening), or
 * it must be the one read. */
static int check_generation(tf_segments *s, const tf_s3_listing *l, bool adopt, tf_error *e)
{
    for (size_t i = 0; i < l->n; i++) {
        uint32_t gen;
        uint64_t start;
        if (!parse_name(s, l->v[i].key, &gen, &start))
            continue;
        if (adopt)
            s->gen = gen;
        else if (gen != s->gen)
            return tf_fail(e, EIO, "%s was written anew (a new generation, by trajpack gc): this "
                           "view keeps the archive it opened; open it again to see the new one",
                           s->shown);
        return 0;
    }
    return 0;
}

/* Lists the page after the key `after` (NULL: the first page, whose
 * newest segment's generation is adopted when `adopt`, else checked):
 * its segments of the generation read, the newest first, into *p. */
static int list_page(tf_segments *s, const char *after, bool adopt, seg_page *p, tf_error *e)
{
    *p = (seg_page){ 0 };
    tf_s3_listing l;
    if (tf_s3_list(s->h, s->req, s->prefix, after, LIST_PAGE, &l, e) < 0)
        return -1;
    int rc = after ? 0 : check_generation(s, &l, adopt, e);
    if (rc == 0 && !(p->v = calloc(l.n ? l.n : 1, sizeof *p->v)))
        rc = tf_fail(e, ENOMEM, "out of memory");
    bool ended = false; /* the page reached another generation */
    for (size_t i = 0; rc == 0 && i < l.n && !ended; i++) {
        uint32_t gen;
        uint64_t start;
        if (!parse_name(s, l.v[i].key, &gen, &start))
            continue;
        if (gen != s->gen)
            ended = true;
        else if (l.v[i].size == 0) /* a seal: read without it */
            p->sealed = true;
        else if ((rc = to_segment(s, &l.v[i], start, &p->v[p->n], e)) == 0)
            p->n++;
    }
    if (rc == 0 && l.truncated && !ended && l.n && !(p->next = strdup(l.v[l.n - 1].key)))
        rc = tf_fail(e, ENOMEM, "out of memory");
    tf_s3_listing_free(&l);
    if (rc < 0)
        free_page(p);
    return rc;
}

static int not_joined(tf_segments *s, uint64_t at, tf_error *e)
{
    return tf_fail(e, EIO, "%s: its segments do not join up at %" PRIu64 " (damaged archive)",
                   s->shown, at);
}

/* Whether v[0..n), the newest first, join up: each ends where the one
 * before it starts, the first at `end` (UINT64_MAX: anywhere). */
static int joined(tf_segments *s, const segment *v, size_t n, uint64_t end, tf_error *e)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t want = i ? v[i - 1].start : end;
        if (want != UINT64_MAX && v[i].start + v[i].len != want)
            return not_joined(s, want, e);
    }
    return 0;
}

/* Lists the segments older than v[0] until one holds off (under
 * list_mu, not mu). */
static int reach_down(tf_segments *s, uint64_t off, tf_error *e)
{
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool want = s->n && off < s->v[0].start && s->more;
        bool missing = s->n && off < s->v[0].start && !s->more;
        uint64_t first = s->n ? s->v[0].start : 0;
        pthread_mutex_unlock(&s->mu);
        if (missing)
            return tf_fail(e, EIO, "%s: no segment holds offset %" PRIu64 " (damaged archive)",
                           s->shown, off);
        if (!want)
            return 0;
        seg_page pg;
        if (list_page(s, s->resume, false, &pg, e) < 0)
            return -1;
        int rc = joined(s, pg.v, pg.n, first, e);
        pthread_mutex_lock(&s->mu);
        if (rc == 0)
            rc = grow(s, pg.n, e);
        if (rc == 0) {
            memmove(s->v + pg.n, s->v, s->n * sizeof *s->v);
            for (size_t i = 0; i < pg.n; i++)
                s->v[pg.n - 1 - i] = pg.v[i];
            s->n += pg.n;
            free(s->resume);
            s->resume = pg.next;
            s->more = pg.next && pg.n > 0;
            pg.n = 0;
            pg.next = NULL;
        }
        pthread_mutex_unlock(&s->mu);
        free_page(&pg);
        if (rc < 0)
            return -1;
    }
}

/* The segment that holds off, listing older ones when needed: its URL
 * (which stays) and identity. */
static int find(tf_segments *s, uint64_t off, const char **url, tf_http_identity *id, uint64_t *start,
                tf_error *e)
{
    pthread_mutex_lock(&s->list_mu);
    int rc = reach_down(s, off, e);
    pthread_mutex_unlock(&s->list_mu);
    if (rc < 0)
        return -1;
    pthread_mutex_lock(&s->mu);
    size_t lo = 0, hi = s->n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].start <= off)
            lo = mid;
        else
            hi = mid;
    }
    bool found = s->n && s->v[lo].start <= off && off - s->v[lo].start < s->v[lo].len;
    if (found) {
        *url = s->v[lo].url;
        *start = s->v[lo].start;
        *id = (tf_http_identity){ .size = s->v[lo].len };
        memcpy(id->etag, s->v[lo].etag, sizeof id->etag);
    }
    pthread_mutex_unlock(&s->mu);
    return found ? 0 : tf_fail(e, EIO, "%s: no segment holds offset %" PRIu64, s->shown, off);
}

int tf_segments_fetch_as(tf_segments *s, const tf_http_identity *id, tf_http_range *r, size_t n,
                         tf_error *e)
{
    /* A range across segments is a part of each; all parts of all
     * ranges are fetched at once. */
    tf_http_part *parts = NULL;
    size_t nparts = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (r[i].len == 0 || r[i].off > id->size || r[i].len > id->size - r[i].off)
            rc = tf_fail(e, EIO, "%s: range %" PRIu64 "+%" PRIu64 " lies outside the archive",
                         s->shown, r[i].off, r[i].len);
        for (uint64_t done = 0; rc == 0 && done < r[i].len;) {
            tf_http_part p = { 0 };
            uint64_t start = 0;
            if ((rc = find(s, r[i].off + done, &p.url, &p.id, &start, e)) < 0)
                break;
            uint64_t at = r[i].off + done - start;
            uint64_t len = p.id.size - at < r[i].len - done ? p.id.size - at : r[i].len - done;
            p.r = (tf_http_range){ at, len, r[i].buf + done };
            if (nparts == cap) {
                size_t more = cap ? cap * 2 : 4;
                tf_http_part *grown = realloc(parts, more * sizeof *grown);
                if (!grown) {
                    rc = tf_fail(e, ENOMEM, "out of memory");
                    break;
                }
                parts = grown;
                cap = more;
            }
            parts[nparts++] = p;
            done += len;
        }
    }
    if (rc == 0)
        rc = tf_http_fetch_parts(s->h, parts, nparts, e);
    free(parts);
    return rc;
}

/* Lists from the newest segment down to the newest known: adds those
 * newer, and says what the archive is now (*now; size 0 when it is not
 * the archive known, grown: replaced, rewritten or cut). Opening (none
 * known), lists one page, of the newest generation. Under list_mu. */
static int list_top(tf_segments *s, tf_http_identity *now, tf_error *e)
{
    pthread_mutex_lock(&s->mu);
    bool opening = s->n == 0;
    segment top = opening ? (segment){ 0 } : s->v[s->n - 1];
    pthread_mutex_unlock(&s->mu);
    segment *fresh = NULL; /* the newest first */
    size_t nfresh = 0;
    char *after = NULL;
    int rc = 0;
    bool done = false, gone = false, sealed = false;
    *now = (tf_http_identity){ 0 };
    while (rc == 0 && !done) {
        seg_page pg;
        if ((rc = list_page(s, after, opening, &pg, e)) < 0)
            break;
        sealed = sealed || pg.sealed;
        free(after);
        after = pg.next;
        pg.next = NULL;
        for (size_t i = 0; i < pg.n && !done; i++) {
            if (!opening && pg.v[i].start <= top.start) {
                done = true;
                /* The same object listed longer than before: a store
                 * that lists an object while it writes it (s3rver; not
                 * S3), seen then in part. Any other change is a
                 * rewrite. */
                bool same = pg.v[i].start == top.start && strcmp(pg.v[i].etag, top.etag) == 0;
                gone = !same || pg.v[i].len < top.len;
                top.len = pg.v[i].len;
                break;
            }
            segment *more = realloc(fresh, (nfresh + 1) * sizeof *fresh);
            if (!more) {
                rc = tf_fail(e, ENOMEM, "out of memory");
                break;
            }
            fresh = more;
            fresh[nfresh++] = pg.v[i];
            pg.v[i].url = NULL;
        }
        free_page(&pg);
        if (opening)
            done = true;
        else if (!done && !after)
            done = gone = true; /* the newest known is not there */
    }
    /* Each ends where the one newer starts; the oldest new one where the
     * newest known ends. */
    if (rc == 0 && !gone)
        rc = joined(s, fresh, nfresh, UINT64_MAX, e);
    if (rc == 0 && !gone && !opening && nfresh && fresh[nfresh - 1].start != top.start + top.len)
        rc = not_joined(s, top.start + top.len, e);
    if (rc == 0 && !gone) {
        pthread_mutex_lock(&s->mu);
        rc = grow(s, nfresh, e);
        if (rc == 0 && !opening)
            s->v[s->n - 1].len = top.len; /* the newest known: list_top alone adds after it */
        for (size_t i = 0; rc == 0 && i < nfresh; i++)
            s->v[s->n++] = fresh[nfresh - 1 - i];
        if (rc == 0) {
            nfresh = 0;
            s->sealed = sealed;
            if (opening) {
                s->more = after && s->n > 0;
                free(s->resume);
                s->resume = s->more ? after : NULL;
                if (s->more)
                    after = NULL;
            }
            if (s->n) {
                now->size = s->v[s->n - 1].start + s->v[s->n - 1].len;
                memcpy(now->etag, s->v[s->n - 1].etag, sizeof now->etag);
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    free(after);
    free_all(fresh, nfresh);
    free(fresh);
    return rc;
}

int tf_segments_open(tf_http *h, const tf_s3_request *req, tf_segments **out, tf_error *e)
{
    *out = NULL;
    tf_segments *s = calloc(1, sizeof *s);
    if (!s)
        return tf_fail(e, ENOMEM, "out of memory");
    s->h = h;
    s->req = req;
    pthread_mutex_init(&s->list_mu, NULL);
    pthread_mutex_init(&s->mu, NULL);
    if (!(s->prefix = tf_segments_prefix(req->key)) || !(s->shown = tf_io_shown_name(req->url))) {
        tf_segments_free(s);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    tf_http_identity now;
    pthread_mutex_lock(&s->list_mu);
    int rc = list_top(s, &now, e);
    pthread_mutex_unlock(&s->list_mu);
    if (rc < 0 || s->n == 0) {
        tf_segments_free(s);
        return rc;
    }
    if (s->v[0].start != 0 && !s->more) {
        rc = tf_fail(e, EIO, "%s: its first segment is missing (damaged archive)", s->shown);
        tf_segments_free(s);
        return rc;
    }
    s->adopted = now;
    *out = s;
    return 0;
}

uint32_t tf_segments_generation(tf_segments *s)
{
    return s->gen;
}

bool tf_segments_sealed(tf_segments *s)
{
    pthread_mutex_lock(&s->mu);
    bool sealed = s->sealed;
    pthread_mutex_unlock(&s->mu);
    return sealed;
}

void tf_segments_free(tf_segments *s)
{
    if (!s)
        return;
    free_all(s->v, s->n);
    free(s->v);
    free(s->resume);
    free(s->prefix);
    free(s->shown);
    pthread_mutex_destroy(&s->list_mu);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int tf_segments_probe(tf_segments *s, tf_http_identity *now, tf_error *e)
{
    pthread_mutex_lock(&s->list_mu);
    int rc = list_top(s, now, e);
    pthread_mutex_unlock(&s->list_mu);
    return rc;
}

void tf_segments_identity(tf_segments *s, tf_http_identity *id)
{
    pthread_mutex_lock(&s->mu);
    *id = s->adopted;
    pthread_mutex_unlock(&s->mu);
}

void tf_segments_adopt(tf_segments *s, const tf_http_identity *id)
{
    pthread_mutex_lock(&s->mu);
    s->adopted = *id;
    pthread_mutex_unlock(&s->mu);
}
