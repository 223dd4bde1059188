#include "io/s3_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/full_io.h"
#include "common/pool.h"
#include "common/tmpfile.h"
#include "io/http.h"
#include "io/remote.h"
#include "io/s3.h"
#include "io/s3_ops.h"
#include "io/segments.h"
#include "io/url.h"

/* Parts: S3 takes at most 10,000 of at least 5 MiB (but the last). 8 MiB
 * parts keep a commit's upload under way while it is encoded; 64 MiB
 * after the thousandth reach 640 GB for one commit. UPLOADS_MAX parts
 * upload at once: their buffers are the writer's memory. */
#define PART_SMALL ((uint64_t)8 << 20)
#define PART_LARGE ((uint64_t)64 << 20)
#define PARTS_SMALL 1000u
#define PARTS_MAX 10000u
#define UPLOADS_MAX 4u
/* The bytes compared to tell a segment found where ours was published
 * is ours: its end, a commit's trailer (checksummed, and naming its
 * catalog's hash). */
#define TAIL_CHECK 64

typedef struct s3_writer s3_writer;

typedef struct {
    s3_writer *w;
    unsigned part; /* from 1 */
    uint64_t off;  /* in the spool */
    uint64_t len;
} part_job;

struct s3_writer {
    tf_io io; /* first: the tf_io is the writer */
    tf_io *reader; /* what is published */
    tf_http *http; /* the reader's: one pool of connections, one bound of
                    * transfers at once, for reads and uploads */
    tf_s3_request req;
    char *prefix, *shown;
    _Atomic uint32_t gen; /* the generation written (gc's replace moves it
                           * while the uploaders may look at it) */
    bool unconditional;
    int spool;          /* the staged bytes, from `published` */
    /* The archive's end, where the staged bytes start, and the end of
     * those: the writer's to change, readers' (of a mount) to look at. */
    _Atomic uint64_t published, end;
    /* The segment at `published` being uploaded in parts. */
    char *key;
    char *upload_id;    /* NULL: none started */
    unsigned nparts;    /* handed to uploaders */
    uint64_t parted;    /* staged bytes handed to them */
    char (*etags)[TF_HTTP_ETAG_MAX];
    tf_pool *uploaders;
    pthread_mutex_t mu; /* of what follows, shared with the uploaders */
    pthread_cond_t landed;
    unsigned inflight;
    bool failed;
    tf_error err;
    /* The store's check (check_conditional), which an uploader makes
     * while the first commit is encoded; nothing is published before it
     * passed (parts may upload: they are seen by no one). */
    bool checking;
    int check_rc;
    tf_error check_err;
};

static s3_writer *writer_of(tf_io *io) { return (s3_writer *)io; }

static uint64_t part_size(unsigned part) { return part <= PARTS_SMALL ? PART_SMALL : PART_LARGE; }

static int gc_busy(s3_writer *w, tf_error *e)
{
    return tf_fail(e, EBUSY, "%s: trajpack gc is writing the archive anew (or was interrupted: run "
                   "it again); commits wait for it", w->shown);
}

/* ---- the store's guarantees ---- */

/* Whether the store honours If-None-Match: a conditional create of the
 * same key twice, the second refused. 0, or ENOTSUP when it ignores it
 * (unless the user takes one writer at a time on them). */
static int check_conditional(tf_http *h, const tf_s3_request *req, const char *prefix,
                             bool unconditional, const char *shown, tf_error *e)
{
    if (unconditional)
        return 0;
    char *key;
    if (asprintf(&key, "%swriter-check", prefix) < 0)
        return tf_fail(e, ENOMEM, "out of memory");
    int rc = tf_s3_put(h, req, key, "", 0, true, e);
    if (rc == 0) /* created now, or the condition ignored: again */
        rc = tf_s3_put(h, req, key, "", 0, true, e);
    free(key);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return tf_fail(e, ENOTSUP,
                       "%s: the store ignores If-None-Match (conditional creates), which keeps a "
                       "second writer from overwriting a commit; with one writer at a time, set "
                       "s3_unconditional=1",
                       shown);
    return 0;
}

/* The request of the s3:// URL and its segments' prefix. */
static int resolve(const char *url, const tf_remote_opts *o, tf_s3_request *req, char **prefix,
                   tf_error *e)
{
    if (!tf_s3_is_url(url))
        return tf_fail(e, EROFS, "an http(s):// archive is read-only (s3:// ones are written)");
    if (tf_s3_resolve(url, o->s3_endpoint, o->s3_region, req, e) < 0)
        return -1;
    if (!(*prefix = tf_segments_prefix(req->key)))
        return tf_fail(e, ENOMEM, "out of memory");
    return 0;
}

/* As resolve, with an HTTP handle of its own (a writer borrows its
 * reader's). */
static int open_http(const char *url, const tf_remote_opts *o, tf_s3_request *req, tf_http **h,
                     char **prefix, tf_error *e)
{
    if (resolve(url, o, req, prefix, e) < 0)
        return -1;
    tf_http_limits lim = { o->timeout_ms, o->min_speed, o->connect_timeout_ms, o->retries,
                           o->parallel };
    tf_http_auth auth = { req->sigv4, req->userpwd, req->token };
    return tf_http_new(req->url, &auth, &lim, h, e);
}

/* ---- uploading parts ---- */

static void note_failure(s3_writer *w, const tf_error *why)
{
    if (!w->failed) {
        w->failed = true;
        w->err = *why;
    }
}

static void upload_part(void *arg)
{
    part_job *j = arg;
    s3_writer *w = j->w;
    tf_error why = { 0 };
    uint8_t *buf = malloc(j->len ? j->len : 1);
    int rc = buf ? 0 : tf_fail(&why, ENOMEM, "out of memory for a part of %" PRIu64 " bytes", j->len);
    if (rc == 0 && tf_pread_full(w->spool, buf, j->len, (off_t)j->off) != (ssize_t)j->len)
        rc = tf_fail(&why, EIO, "spool: read: %s", strerror(errno));
    if (rc == 0)
        rc = tf_s3_upload_part(w->http, &w->req, w->key, w->upload_id, j->part, buf, j->len,
                               w->etags[j->part - 1], &why);
    free(buf);
    pthread_mutex_lock(&w->mu);
    if (rc < 0)
        note_failure(w, &why);
    w->inflight--;
    pthread_cond_broadcast(&w->landed);
    pthread_mutex_unlock(&w->mu);
    free(j);
}

/* Waits until at most `most` parts are in flight: 0, or -1 with the
 * first part's failure. */
static int wait_parts(s3_writer *w, unsigned most, tf_error *e)
{
    pthread_mutex_lock(&w->mu);
    while (w->inflight > most)
        pthread_cond_wait(&w->landed, &w->mu);
    int rc = w->failed ? -1 : 0;
    if (rc < 0 && e)
        *e = w->err;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static int start_uploaders(s3_writer *w, tf_error *e)
{
    if (!w->uploaders && !(w->uploaders = tf_pool_new(UPLOADS_MAX)))
        return tf_fail(e, EAGAIN, "cannot start the upload threads");
    return 0;
}

static int start_upload(s3_writer *w, tf_error *e)
{
    if (start_uploaders(w, e) < 0)
        return -1;
    if (!w->etags && !(w->etags = calloc(PARTS_MAX, sizeof *w->etags)))
        return tf_fail(e, ENOMEM, "out of memory");
    return tf_s3_upload_start(w->http, &w->req, w->key, &w->upload_id, e);
}

/* Hands the staged bytes from `parted` to an uploader as the next part
 * (len of them), once fewer than UPLOADS_MAX are in flight. */
static int submit_part(s3_writer *w, uint64_t len, tf_error *e)
{
    if (w->nparts == PARTS_MAX)
        return tf_fail(e, EFBIG, "%s: a commit of more than %u parts", w->shown, PARTS_MAX);
    if (!w->upload_id && start_upload(w, e) < 0)
        return -1;
    if (wait_parts(w, UPLOADS_MAX - 1, e) < 0)
        return -1;
    part_job *j = malloc(sizeof *j);
    if (!j)
        return tf_fail(e, ENOMEM, "out of memory");
    *j = (part_job){ w, ++w->nparts, w->parted, len };
    pthread_mutex_lock(&w->mu);
    w->inflight++;
    pthread_mutex_unlock(&w->mu);
    if (tf_pool_add(w->uploaders, upload_part, j, e) < 0) {
        pthread_mutex_lock(&w->mu);
        w->inflight--;
        pthread_mutex_unlock(&w->mu);
        free(j);
        return -1;
    }
    w->parted += len;
    return 0;
}

/* Hands the parts of the staged bytes that are full to uploaders. */
static int submit_full_parts(s3_writer *w, tf_error *e)
{
    while (w->end - w->published - w->parted >= part_size(w->nparts + 1))
        if (submit_part(w, part_size(w->nparts + 1), e) < 0)
            return -1;
    return 0;
}

/* Forgets the segment's upload, completed or aborted. */
static void forget_upload(s3_writer *w)
{
    free(w->upload_id);
    w->upload_id = NULL;
    w->nparts = 0;
    w->parted = 0;
}

/* Drops the upload under way (its parts wait for nothing: aborted). */
static void drop_upload(s3_writer *w)
{
    wait_parts(w, 0, NULL);
    if (w->upload_id)
        (void)tf_s3_upload_abort(w->http, &w->req, w->key, w->upload_id, NULL);
    forget_upload(w);
    w->failed = false;
}

/* ---- the tf_io operations ---- */

static int s3w_pread(tf_io *io, uint64_t off, void *buf, size_t len, tf_error *e)
{
    s3_writer *w = writer_of(io);
    if (off > w->end || len > w->end - off)
        return tf_fail(e, EIO, "%s: read of %zu bytes at %" PRIu64 " beyond its %" PRIu64 " bytes",
                       w->shown, len, off, w->end);
    size_t below = off < w->published ? (size_t)(w->published - off < len ? w->published - off : len) : 0;
    if (below && tf_io_pread(w->reader, off, buf, below, e) < 0)
        return -1;
    if (below < len &&
        tf_pread_full(w->spool, (uint8_t *)buf + below, len - below, (off_t)(off + below - w->published)) !=
            (ssize_t)(len - below))
        return tf_fail(e, EIO, "spool: read: %s", strerror(errno));
    return 0;
}

static void s3w_will_need(tf_io *io, uint64_t off, uint64_t len)
{
    s3_writer *w = writer_of(io);
    if (off < w->published)
        tf_io_will_need(w->reader, off, len < w->published - off ? len : w->published - off);
}

static bool s3w_forget(tf_io *io, uint64_t off, uint64_t len)
{
    return tf_io_forget(writer_of(io)->reader, off, len);
}

static int s3w_poll(tf_io *io, uint64_t *size, bool *changed, tf_error *e)
{
    s3_writer *w = writer_of(io);
    if (tf_io_poll(w->reader, size, changed, e) < 0)
        return -1;
    if (*size == w->published)
        *size = w->end;
    return 0;
}

static int s3w_stat(tf_io *io, struct stat *st, tf_error *e)
{
    s3_writer *w = writer_of(io);
    if (tf_io_stat(w->reader, st, e) < 0)
        return -1;
    st->st_size = (off_t)w->end;
    return 0;
}

/* Aborts the uploads of killed writers that can never complete: of a
 * segment inside the archive, or of an older generation. Best effort;
 * an uploader's task, off the commit's way. */
static void abort_dead_uploads(void *arg)
{
    s3_writer *w = arg;
    tf_s3_upload *u;
    size_t n;
    if (tf_s3_uploads_list(w->http, &w->req, w->prefix, &u, &n, NULL) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        uint32_t gen;
        uint64_t start;
        if (tf_segments_parse(w->prefix, u[i].key, &gen, &start) &&
            (gen < w->gen || (gen == w->gen && start < w->published)))
            (void)tf_s3_upload_abort(w->http, &w->req, u[i].key, u[i].upload_id, NULL);
    }
    tf_s3_uploads_free(u, n);
}

static void check_store(void *arg)
{
    s3_writer *w = arg;
    tf_error why = { 0 };
    int rc = check_conditional(w->http, &w->req, w->prefix, w->unconditional, w->shown, &why);
    pthread_mutex_lock(&w->mu);
    w->check_rc = rc;
    w->check_err = why;
    w->checking = false;
    pthread_cond_broadcast(&w->landed);
    pthread_mutex_unlock(&w->mu);
}

/* Waits for the store's check: 0 once it passed. */
static int store_checked(s3_writer *w, tf_error *e)
{
    pthread_mutex_lock(&w->mu);
    while (w->checking)
        pthread_cond_wait(&w->landed, &w->mu);
    int rc = w->check_rc;
    if (rc < 0)
        *e = w->check_err;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* The store's check and the aborts of dead uploads go to the uploaders,
 * off the way of the commit being encoded. */
static int s3w_lock(tf_io *io, tf_error *e)
{
    s3_writer *w = writer_of(io);
    if (start_uploaders(w, e) < 0)
        return -1;
    w->checking = true;
    if (tf_pool_add(w->uploaders, check_store, w, e) < 0) {
        w->checking = false;
        return -1;
    }
    return tf_pool_add(w->uploaders, abort_dead_uploads, w, e);
}

static int s3w_append(tf_io *io, const void *p, size_t len, uint64_t off, tf_error *e)
{
    s3_writer *w = writer_of(io);
    if (w->end == w->published && tf_segments_sealed(tf_remote_segments(w->reader)))
        return gc_busy(w, e); /* no commit could be published */
    if (off < w->end)
        return tf_fail(e, EINVAL, "%s: an append at %" PRIu64 ", before the end %" PRIu64, w->shown,
                       off, w->end);
    if (tf_pwrite_full(w->spool, p, len, (off_t)(off - w->published)) < 0)
        return tf_fail(e, errno, "spool: write: %s", strerror(errno));
    w->end = off + len;
    /* The parts that are full upload now, while the rest is encoded. */
    return submit_full_parts(w, e);
}

/* Nothing staged is durable before its publish, which makes it durable
 * whole: the blobs and the trailer that points to them go in one
 * object. */
static int s3w_sync(tf_io *io, tf_error *e)
{
    (void)io, (void)e;
    return 0;
}

/* Whether the segment at w->key, which a conditional create found
 * there, is the one staged: a request of ours that landed, whose
 * response was lost, retried. *seal: it is a seal (gc). */
static bool is_ours(s3_writer *w, uint64_t len, bool *seal)
{
    tf_s3_object o = { 0 };
    *seal = false;
    if (tf_s3_head(w->http, &w->req, w->key, &o, NULL) != 1)
        return false;
    *seal = o.size == 0;
    if (o.size != len)
        return false;
    size_t n = len < TAIL_CHECK ? (size_t)len : TAIL_CHECK;
    uint8_t theirs[TAIL_CHECK], ours[TAIL_CHECK];
    char *url = NULL;
    tf_http_identity id = { .size = o.size };
    memcpy(id.etag, o.etag, sizeof id.etag);
    tf_http_range r = { len - n, n, theirs };
    bool same = tf_s3_key_url(&w->req, w->key, &url, NULL) == 0 &&
                tf_http_fetch_url(w->http, url, &id, &r, 1, NULL) == 0 &&
                tf_pread_full(w->spool, ours, n, (off_t)(len - n)) == (ssize_t)n && memcmp(theirs, ours, n) == 0;
    free(url);
    return same;
}

/* The staged bytes as one object: one PUT, or the last part and the
 * upload's completion. 1: an object is there already. */
static int put_segment(s3_writer *w, uint64_t len, tf_error *e)
{
    if (!w->upload_id && len < part_size(1)) {
        uint8_t *buf = malloc(len);
        if (!buf)
            return tf_fail(e, ENOMEM, "out of memory");
        int rc = tf_pread_full(w->spool, buf, len, 0) == (ssize_t)len
                     ? tf_s3_put(w->http, &w->req, w->key, buf, len, !w->unconditional, e)
                     : tf_fail(e, EIO, "spool: read: %s", strerror(errno));
        free(buf);
        return rc;
    }
    if (len > w->parted && submit_part(w, len - w->parted, e) < 0)
        return -1;
    if (wait_parts(w, 0, e) < 0)
        return -1;
    return tf_s3_upload_complete(w->http, &w->req, w->key, w->upload_id,
                                 (const char(*)[TF_HTTP_ETAG_MAX])w->etags, w->nparts,
                                 !w->unconditional, e);
}

static int s3w_publish(tf_io *io, tf_error *e)
{
    s3_writer *w = writer_of(io);
    uint64_t len = w->end - w->published;
    if (len == 0)
        return 0;
    if (store_checked(w, e) < 0) {
        drop_upload(w);
        return -1;
    }
    /* Refused, or failed after its retries: a request of ours may have
     * landed all the same (a retry then finds the segment, or no longer
     * the upload it completed). */
    int rc = put_segment(w, len, e);
    bool seal;
    if (rc != 0 && is_ours(w, len, &seal))
        rc = 0;
    else if (rc == 1)
        rc = seal ? gc_busy(w, e)
                  : tf_fail(e, EBUSY, "%s: another writer published a commit first; this one was "
                            "not made (run it again)", w->shown);
    if (rc < 0) {
        drop_upload(w);
        return -1;
    }
    forget_upload(w); /* completed */
    /* The reader follows, before the bytes leave the spool: the next
     * commit reads this one. Should it fail, the commit is published all
     * the same; reads of it fail until a later poll catches up. */
    uint64_t size;
    bool changed;
    (void)tf_io_poll(w->reader, &size, &changed, NULL);
    tf_remote_keep(w->reader, w->published, len, w->spool);
    w->published = w->end;
    char *key = tf_segments_key(w->req.key, w->gen, w->published);
    free(w->key);
    w->key = key;
    if (!key)
        return tf_fail(e, ENOMEM, "out of memory");
    if (ftruncate(w->spool, 0) < 0)
        return tf_fail(e, errno, "spool: %s", strerror(errno));
    return 0;
}

/* ---- a new generation (trajpack gc) ---- */

static int s3w_seal(tf_io *io, tf_error *e)
{
    s3_writer *w = writer_of(io);
    if (w->end != w->published)
        return tf_fail(e, EINVAL, "%s: a seal after bytes not published", w->shown);
    if (store_checked(w, e) < 0)
        return -1;
    int rc = tf_s3_put(w->http, &w->req, w->key, "", 0, !w->unconditional, e);
    if (rc <= 0)
        return rc;
    tf_s3_object o = { 0 };
    if ((rc = tf_s3_head(w->http, &w->req, w->key, &o, e)) < 0)
        return -1;
    /* A seal there already: a gc that was interrupted, which this one
     * finishes. */
    return rc == 1 && o.size == 0
               ? 0
               : tf_fail(e, EBUSY, "%s: a commit came first; run gc again", w->shown);
}

/* Deletes the n keys: in one request, or where the store has no
 * DeleteObjects (*one_by_one, from then on), one request a key. */
static int delete_keys(s3_writer *w, const char *const *keys, size_t n, bool *one_by_one,
                       tf_error *e)
{
    if (!n)
        return 0;
    if (!*one_by_one) {
        int rc = tf_s3_delete_keys(w->http, &w->req, keys, n, e);
        if (rc <= 0)
            return rc;
        *one_by_one = true;
    }
    for (size_t i = 0; i < n; i++)
        if (tf_s3_delete(w->http, &w->req, keys[i], e) < 0)
            return -1;
    return 0;
}

/* Deletes the segments (and seals) of the generations before `gen`, a
 * page of the listing at a time. */
static int drop_generations(s3_writer *w, uint32_t gen, tf_error *e)
{
    char *after = NULL;
    const char *old[TF_S3_DELETE_MAX];
    bool one_by_one = false;
    int rc = 0;
    for (bool more = true; rc == 0 && more;) {
        tf_s3_listing l;
        if ((rc = tf_s3_list(w->http, &w->req, w->prefix, after, TF_S3_DELETE_MAX, &l, e)) < 0)
            break;
        size_t n = 0;
        for (size_t i = 0; i < l.n; i++) {
            uint32_t g;
            uint64_t start;
            if (tf_segments_parse(w->prefix, l.v[i].key, &g, &start) && g < gen)
                old[n++] = l.v[i].key;
        }
        rc = delete_keys(w, old, n, &one_by_one, e);
        more = l.truncated && l.n;
        free(after);
        after = more ? strdup(l.v[l.n - 1].key) : NULL;
        if (rc == 0 && more && !after)
            rc = tf_fail(e, ENOMEM, "out of memory");
        tf_s3_listing_free(&l);
    }
    free(after);
    return rc;
}

static int s3w_replace(tf_io *io, int fd, uint64_t size, tf_error *e)
{
    s3_writer *w = writer_of(io);
    if (store_checked(w, e) < 0)
        return -1;
    if (w->gen == UINT32_MAX)
        return tf_fail(e, EOVERFLOW, "%s: no generation after %" PRIu32, w->shown, w->gen);
    char *key = tf_segments_key(w->req.key, w->gen + 1, 0);
    if (!key)
        return tf_fail(e, ENOMEM, "out of memory");
    /* fd's bytes, staged as a commit at the start of the next
     * generation: uploaded in parts, published whole. */
    int spool = w->spool;
    uint64_t published = w->published, end = w->end;
    char *was = w->key;
    w->spool = fd;
    w->published = 0;
    w->end = size;
    w->key = key;
    int rc = submit_full_parts(w, e);
    if (rc == 0)
        rc = put_segment(w, size, e);
    bool seal;
    if (rc != 0 && is_ours(w, size, &seal))
        rc = 0;
    else if (rc == 1)
        rc = tf_fail(e, EBUSY, "%s: another gc wrote the next generation first", w->shown);
    if (rc < 0)
        drop_upload(w);
    else
        forget_upload(w); /* completed */
    w->spool = spool;
    w->published = published;
    w->end = end;
    w->key = was;
    free(key);
    if (rc < 0)
        return -1;
    /* Nothing reads the older generations now but readers that opened
     * them, whose reads of what they do not hold fail (EIO). */
    if (drop_generations(w, ++w->gen, e) < 0)
        return -1;
    abort_dead_uploads(w);
    return 0;
}

static int s3w_truncate(tf_io *io, uint64_t size, tf_error *e)
{
    s3_writer *w = writer_of(io);
    if (size < w->published)
        return tf_fail(e, EINVAL, "%s: its published commits cannot be cut", w->shown);
    if (size == w->end)
        return 0;
    drop_upload(w);
    if (ftruncate(w->spool, (off_t)(size - w->published)) < 0)
        return tf_fail(e, errno, "spool: %s", strerror(errno));
    w->end = size;
    /* What stays staged uploads again, in parts once a part is full. */
    return submit_full_parts(w, e);
}

static void s3w_cancel(tf_io *io)
{
    s3_writer *w = writer_of(io);
    tf_io_cancel(w->reader); /* and so the uploads */
}

static void free_writer(s3_writer *w)
{
    if (w->http)
        drop_upload(w);
    tf_pool_free(w->uploaders);
    tf_io_close(w->reader); /* and its HTTP handle */
    if (w->spool >= 0)
        close(w->spool);
    tf_s3_request_free(&w->req);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->landed);
    free(w->etags);
    free(w->key);
    free(w->prefix);
    free(w->shown);
    free(w);
}

static void s3w_close(tf_io *io)
{
    free_writer(writer_of(io));
}

static const tf_io_ops s3_writer_ops = {
    .remote = true,
    .ordered = true,
    .pread = s3w_pread,
    .will_need = s3w_will_need,
    .forget = s3w_forget,
    .poll = s3w_poll,
    .stat = s3w_stat,
    .lock = s3w_lock,
    .append = s3w_append,
    .sync = s3w_sync,
    .publish = s3w_publish,
    .truncate = s3w_truncate,
    .seal = s3w_seal,
    .replace = s3w_replace,
    .cancel = s3w_cancel,
    .close = s3w_close,
};

/* A file on local disk for what is staged, with no name: gone with the
 * writer, however it ends (tf_tmp_dir). */
static int open_spool(tf_error *e)
{
    const char *dir = tf_tmp_dir();
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = dirfd < 0 ? -errno : tf_tmpfile_create(dirfd, "trajfs-spool");
    if (dirfd >= 0)
        close(dirfd);
    return fd >= 0 ? fd : tf_fail(e, -fd, "cannot make a spool file in %s: %s", dir, strerror(-fd));
}

int tf_s3_writer_open(const char *name, const tf_remote_opts *o, tf_io **out, tf_error *e)
{
    tf_remote_opts defaults;
    tf_remote_opts_default(&defaults);
    if (!o)
        o = &defaults;
    char *url;
    if (tf_url_resolve(name, &url, e) < 0)
        return -1;
    s3_writer *w = calloc(1, sizeof *w);
    if (!w) {
        free(url);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    w->io.ops = &s3_writer_ops;
    w->spool = -1;
    w->unconditional = o->s3_unconditional;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->landed, NULL);
    int rc = (w->shown = tf_io_shown_name(url)) ? 0 : tf_fail(e, ENOMEM, "out of memory");
    if (rc == 0)
        rc = resolve(url, o, &w->req, &w->prefix, e);
    if (rc == 0 && (rc = tf_remote_open(name, o, &w->reader, e)) == 0)
        w->http = tf_remote_http(w->reader);
    tf_segments *segs = rc == 0 ? tf_remote_segments(w->reader) : NULL;
    if (rc == 0 && !segs)
        rc = tf_fail(e, EROFS, "%s is one object (uploaded whole), which cannot grow: trajfs writes "
                     "an archive in object storage as segments under KEY/ (trajpack push a local "
                     "copy to a new key)", w->shown);
    if (rc == 0)
        w->gen = tf_segments_generation(segs);
    struct stat st;
    if (rc == 0 && (rc = tf_io_stat(w->reader, &st, e)) == 0) {
        w->published = w->end = (uint64_t)st.st_size;
        rc = (w->key = tf_segments_key(w->req.key, w->gen, w->published)) ? 0
                                                                          : tf_fail(e, ENOMEM, "out of memory");
    }
    if (rc == 0 && (w->spool = open_spool(e)) < 0)
        rc = -1;
    free(url);
    if (rc < 0) {
        free_writer(w);
        return -1;
    }
    *out = &w->io;
    return 0;
}

int tf_s3_writer_create(const char *name, const tf_remote_opts *o, const void *bytes, size_t len,
                        tf_error *e)
{
    tf_remote_opts defaults;
    tf_remote_opts_default(&defaults);
    if (!o)
        o = &defaults;
    char *url, *prefix = NULL, *shown = NULL, *key = NULL;
    if (tf_url_resolve(name, &url, e) < 0)
        return -1;
    tf_s3_request req = { 0 };
    tf_http *h = NULL;
    tf_s3_listing l = { 0 };
    tf_s3_object obj = { 0 };
    int rc = (shown = tf_io_shown_name(url)) ? open_http(url, o, &req, &h, &prefix, e)
                                             : tf_fail(e, ENOMEM, "out of memory");
    /* Segments sort before every other key under the prefix (a lock's
     * writer-check): the first key tells. */
    uint32_t gen;
    uint64_t start;
    if (rc == 0 && (rc = tf_s3_list(h, &req, prefix, NULL, 1, &l, e)) == 0 && l.n &&
        tf_segments_parse(prefix, l.v[0].key, &gen, &start))
        rc = tf_fail(e, EEXIST, "%s: an archive is there already", shown);
    if (rc == 0 && (rc = tf_s3_head(h, &req, req.key, &obj, e)) == 1)
        rc = tf_fail(e, EEXIST, "%s: an object is there already", shown);
    if (rc == 0)
        rc = check_conditional(h, &req, prefix, o->s3_unconditional, shown, e);
    if (rc == 0 && !(key = tf_segments_key(req.key, 0, 0)))
        rc = tf_fail(e, ENOMEM, "out of memory");
    if (rc == 0 && (rc = tf_s3_put(h, &req, key, bytes, len, !o->s3_unconditional, e)) == 1)
        rc = tf_fail(e, EEXIST, "%s: another writer created the archive first", shown);
    tf_s3_listing_free(&l);
    tf_http_free(h);
    tf_s3_request_free(&req);
    free(key);
    free(prefix);
    free(shown);
    free(url);
    return rc;
}
