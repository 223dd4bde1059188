#include "io/http.h"

#include "io/curl_lib.h"
#include "io/io.h"
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Backoff before retry k (from 0): BACKOFF_BASE_MS << k, at most
 * BACKOFF_MAX_MS, plus up to half as much again at random so that the
 * readers of a mount do not retry in step. */
#define BACKOFF_BASE_MS 100
#define BACKOFF_MAX_MS 2000
/* Of an error response, this much body is kept for the message (an S3
 * error's <Code>). */
#define ERROR_BODY_MAX 1024

struct tf_http {
    char *url;
    char *shown; /* url for messages */
    atomic_bool cancelled;
    tf_http_auth auth; /* owned copies */
    char *token_header;
    tf_http_limits lim;
    pthread_mutex_t id_lock; /* of id: a followed object's changes */
    tf_http_identity id;
    CURLSH *share;                  /* connections and DNS, across threads */
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
    sem_t slots;                    /* lim.parallel transfers at most */
    atomic_uint_fast64_t requests, bytes;
};

/* One range GET and what its response said. */
typedef struct {
    CURL *easy;
    struct curl_slist *headers;
    char range[64];
    uint8_t *dst;
    uint64_t cap, got;
    bool overflow;
    CURLcode result;
    long status;
    bool has_range;
    uint64_t first, last, total; /* Content-Range */
    char etag[TF_HTTP_ETAG_MAX];
    char error_body[ERROR_BODY_MAX + 1];
    size_t error_len;
    char curl_error[CURL_ERROR_SIZE];
} transfer;

static void share_lock(CURL *c, curl_lock_data d, curl_lock_access a, void *p)
{
    (void)c, (void)a;
    tf_http *h = p;
    pthread_mutex_lock(&h->share_locks[d]);
}

static void share_unlock(CURL *c, curl_lock_data d, void *p)
{
    (void)c;
    tf_http *h = p;
    pthread_mutex_unlock(&h->share_locks[d]);
}

static char *dup_or_null(const char *s, bool *fail)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *fail = true;
    return d;
}

int tf_http_new(const char *url, const tf_http_auth *auth, const tf_http_limits *lim,
                tf_http **out, tf_error *e)
{
    if (tf_curl_load(e) < 0)
        return -1;
    tf_http *h = calloc(1, sizeof *h);
    if (!h)
        return tf_fail(e, ENOMEM, "out of memory");
    bool fail = false;
    h->url = dup_or_null(url, &fail);
    if (!(h->shown = tf_io_shown_name(url)))
        fail = true;
    h->auth.sigv4 = dup_or_null(auth->sigv4, &fail);
    h->auth.userpwd = dup_or_null(auth->userpwd, &fail);
    if (auth->token && !fail && asprintf(&h->token_header, "x-amz-security-token: %s", auth->token) < 0)
        h->token_header = NULL, fail = true;
    h->lim = *lim;
    if (h->lim.parallel == 0)
        h->lim.parallel = 1;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&h->share_locks[i], NULL);
    pthread_mutex_init(&h->id_lock, NULL);
    sem_init(&h->slots, 0, h->lim.parallel);
    h->share = fail ? NULL : tf_curl.share_init();
    if (!h->share) {
        tf_http_free(h);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    tf_curl.share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
    tf_curl.share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    tf_curl.share_setopt(h->share, CURLSHOPT_USERDATA, h);
    tf_curl.share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    tf_curl.share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    *out = h;
    return 0;
}

void tf_http_free(tf_http *h)
{
    if (!h)
        return;
    if (h->share)
        tf_curl.share_cleanup(h->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&h->share_locks[i]);
    pthread_mutex_destroy(&h->id_lock);
    sem_destroy(&h->slots);
    free(h->url);
    free(h->shown);
    free((char *)h->auth.sigv4);
    free((char *)h->auth.userpwd);
    free(h->token_header);
    free(h);
}

void tf_http_identity_get(tf_http *h, tf_http_identity *id)
{
    pthread_mutex_lock(&h->id_lock);
    *id = h->id;
    pthread_mutex_unlock(&h->id_lock);
}

void tf_http_adopt(tf_http *h, const tf_http_identity *id)
{
    pthread_mutex_lock(&h->id_lock);
    h->id = *id;
    pthread_mutex_unlock(&h->id_lock);
}

void tf_http_cancel(tf_http *h)
{
    atomic_store(&h->cancelled, true);
}

void tf_http_counters(const tf_http *h, uint64_t *requests, uint64_t *bytes)
{
    *requests = atomic_load(&((tf_http *)h)->requests);
    *bytes = atomic_load(&((tf_http *)h)->bytes);
}

/* ---- one transfer ---- */

static bool header_is(const char *line, size_t n, const char *name, const char **value)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    *value = line + k + 1;
    return true;
}

/* A header's value [v, end), less its leading blanks, into out; left as
 * it was when it does not fit. */
static void header_value(const char *v, const char *end, char *out, size_t cap)
{
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    size_t k = (size_t)(end - v);
    if (k < cap) {
        memcpy(out, v, k);
        out[k] = '\0';
    }
}

/* "bytes FIRST-LAST/TOTAL" */
static bool parse_content_range(const char *v, size_t n, transfer *t)
{
    char s[128];
    if (n >= sizeof s)
        return false;
    memcpy(s, v, n);
    s[n] = '\0';
    unsigned long long a, b, c;
    int used = 0;
    if (sscanf(s, " bytes %20llu-%20llu/%20llu%n", &a, &b, &c, &used) != 3 || a > b || b >= c)
        return false;
    t->first = a, t->last = b, t->total = c;
    return true;
}

static size_t on_header(char *p, size_t size, size_t nitems, void *data)
{
    transfer *t = data;
    size_t n = size * nitems, len = n;
    while (len && (p[len - 1] == '\r' || p[len - 1] == '\n'))
        len--;
    const char *v;
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue, say): forget the last. */
        t->has_range = false;
        t->etag[0] = '\0';
    } else if (header_is(p, len, "content-range", &v)) {
        t->has_range = parse_content_range(v, len - (size_t)(v - p), t);
    } else if (header_is(p, len, "etag", &v)) {
        header_value(v, p + len, t->etag, sizeof t->etag);
    }
    return n;
}

static size_t on_body(char *p, size_t size, size_t nitems, void *data)
{
    transfer *t = data;
    size_t n = size * nitems;
    long status = 0;
    tf_curl.easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206) {
        size_t k = ERROR_BODY_MAX - t->error_len < n ? ERROR_BODY_MAX - t->error_len : n;
        memcpy(t->error_body + t->error_len, p, k);
        t->error_len += k;
        t->error_body[t->error_len] = '\0';
        return n;
    }
    if (n > t->cap - t->got) {
        t->overflow = true;
        return 0; /* aborts the transfer */
    }
    memcpy(t->dst + t->got, p, n);
    t->got += n;
    return n;
}

/* libcurl's progress callback: non-zero aborts the transfer. */
static int on_progress(void *data, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return atomic_load(&((tf_http *)data)->cancelled);
}

/* The options every request shares: the connection, its limits, the
 * cancel check, the user agent and the signing. */
static void easy_common(tf_http *h, CURL *c, const char *url, char *curl_error)
{
    tf_curl.easy_setopt(c, CURLOPT_URL, url);
    tf_curl.easy_setopt(c, CURLOPT_SHARE, h->share);
    tf_curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    tf_curl.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    tf_curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)h->lim.connect_timeout_ms);
    /* A transfer slower than min_speed over the whole window fails: a
     * server that drips a few bytes a second holds a read as long as
     * one that sends nothing. */
    tf_curl.easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, (long)h->lim.min_speed);
    tf_curl.easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)((h->lim.stall_timeout_ms + 999) / 1000));
    tf_curl.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    tf_curl.easy_setopt(c, CURLOPT_XFERINFODATA, h);
    tf_curl.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    tf_curl.easy_setopt(c, CURLOPT_ERRORBUFFER, curl_error);
    tf_curl.easy_setopt(c, CURLOPT_USERAGENT, "trajfs/" PACKAGE_VERSION);
    if (h->auth.sigv4) {
        tf_curl.easy_setopt(c, CURLOPT_AWS_SIGV4, h->auth.sigv4);
        tf_curl.easy_setopt(c, CURLOPT_USERPWD, h->auth.userpwd);
    }
}

/* Appends line to *list: false when out of memory (*list is kept). */
static bool header_add(struct curl_slist **list, const char *line)
{
    struct curl_slist *more = tf_curl.slist_append(*list, line);
    if (!more)
        return false;
    *list = more;
    return true;
}

/* The signing headers: S3 wants the payload's hash among the signed
 * headers (the empty payload's, or UNSIGNED-PAYLOAD for a body, which
 * spares hashing it), and the session token. */
static bool auth_headers(tf_http *h, struct curl_slist **list, bool has_body)
{
    if (!h->auth.sigv4)
        return true;
    if (!header_add(list, has_body ? "x-amz-content-sha256: UNSIGNED-PAYLOAD"
                                   : "x-amz-content-sha256: "
                                     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
        return false;
    return !h->token_header || header_add(list, h->token_header);
}

static int transfer_setup(tf_http *h, const char *url, transfer *t)
{
    t->easy = tf_curl.easy_init();
    if (!t->easy)
        return -1;
    CURL *c = t->easy;
    easy_common(h, c, url, t->curl_error);
    tf_curl.easy_setopt(c, CURLOPT_RANGE, t->range);
    tf_curl.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    tf_curl.easy_setopt(c, CURLOPT_HEADERDATA, t);
    tf_curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    tf_curl.easy_setopt(c, CURLOPT_WRITEDATA, t);
    tf_curl.easy_setopt(c, CURLOPT_PRIVATE, t);
    if (!auth_headers(h, &t->headers, false))
        return -1;
    if (t->headers)
        tf_curl.easy_setopt(c, CURLOPT_HTTPHEADER, t->headers);
    return 0;
}

/* Frees a request's handle and headers (of a transfer or an exchange). */
static void easy_release(CURL **easy, struct curl_slist **headers)
{
    if (*easy)
        tf_curl.easy_cleanup(*easy);
    tf_curl.slist_free_all(*headers);
    *easy = NULL;
    *headers = NULL;
}

/* Runs the n transfers, as many at once as free slots allow (at least
 * one: waiting for the first slot, taking more only when free, so that
 * two callers cannot each hold some and wait for the other's). */
static void run_all(tf_http *h, transfer *t, size_t n)
{
    while (sem_wait(&h->slots) < 0)
        ;
    size_t slots = 1;
    while (slots < n && sem_trywait(&h->slots) == 0)
        slots++;
    CURLM *m = tf_curl.multi_init();
    size_t next = 0, active = 0;
    /* The connections are shared: kept open for every transfer that may
     * run at once (by default a multi handle of a few transfers closes
     * those beyond four each, and the next request connects anew). */
    if (m)
        tf_curl.multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)h->lim.parallel);
    if (!m) {
        for (size_t i = 0; i < n; i++)
            t[i].result = CURLE_OUT_OF_MEMORY;
        next = n;
    }
    for (; next < n && active < slots; next++, active++)
        tf_curl.multi_add_handle(m, t[next].easy);
    while (active) {
        int running;
        tf_curl.multi_perform(m, &running);
        CURLMsg *msg;
        int queued;
        while ((msg = tf_curl.multi_info_read(m, &queued))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            transfer *done;
            tf_curl.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&done);
            done->result = msg->data.result;
            tf_curl.easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &done->status);
            tf_curl.multi_remove_handle(m, msg->easy_handle);
            active--;
            if (next < n) {
                tf_curl.multi_add_handle(m, t[next++].easy);
                active++;
            }
        }
        if (active)
            tf_curl.multi_poll(m, NULL, 0, 100, NULL);
    }
    if (m)
        tf_curl.multi_cleanup(m);
    for (size_t i = 0; i < slots; i++)
        sem_post(&h->slots);
}

typedef enum { DONE, RETRY, FATAL, CHANGED } verdict;

/* Statuses that pass: a timeout, throttling, a server's fault (not one
 * that says the server lacks what was asked: 501, 505). */
static bool status_passes(long status)
{
    return status == 408 || status == 429 ||
           (status >= 500 && status <= 599 && status != 501 && status != 505);
}

static bool curl_error_passes(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
        return true;
    default:
        return false;
    }
}

/* The <Code> of an S3 error body (a string), or "". */
static void s3_error_code(const char *body, char *out, size_t cap)
{
    out[0] = '\0';
    const char *a = strstr(body, "<Code>");
    const char *b = a ? strstr(a, "</Code>") : NULL;
    if (b && (size_t)(b - a - 6) < cap - 3)
        snprintf(out, cap, " (%.*s)", (int)(b - a - 6), a + 6);
}

/* Judges a finished transfer for the range [off, off + len) of the
 * object `want` (NULL: any, the first request). */
static verdict judge(const tf_http_identity *want, const transfer *t, uint64_t off, uint64_t len,
                     char *why, size_t cap)
{
    if (t->overflow) {
        snprintf(why, cap, "the server sent more bytes than asked for (does it serve byte ranges?)");
        return FATAL;
    }
    if (t->result != CURLE_OK) {
        snprintf(why, cap, "%s", t->curl_error[0] ? t->curl_error : tf_curl.easy_strerror(t->result));
        return curl_error_passes(t->result) ? RETRY : FATAL;
    }
    if (status_passes(t->status)) {
        snprintf(why, cap, "HTTP status %ld", t->status);
        return RETRY;
    }
    if (t->status != 206) {
        char code[96];
        s3_error_code(t->error_body, code, sizeof code);
        if (t->status == 200)
            snprintf(why, cap, "the server answered a range request with the whole object");
        else
            snprintf(why, cap, "HTTP status %ld%s", t->status, code);
        return FATAL;
    }
    if (want && ((t->has_range && t->total != want->size) ||
                 (want->etag[0] && t->etag[0] && strcmp(want->etag, t->etag)))) {
        snprintf(why, cap, "the object changed since it was opened (size or ETag differ)");
        return CHANGED;
    }
    if (!t->has_range || t->first != off || (len && t->last - t->first + 1 != len) ||
        t->got != t->last - t->first + 1) {
        snprintf(why, cap, "response of %" PRIu64 " bytes does not match the range asked for", t->got);
        return RETRY;
    }
    return DONE;
}

/* A server may answer a first range longer than the object with the
 * whole object (200): the same as a 206 of all of it. */
static void whole_as_first(transfer *t)
{
    if (t->result == CURLE_OK && !t->overflow && t->status == 200 && t->got > 0) {
        t->status = 206;
        t->has_range = true;
        t->first = 0, t->last = t->got - 1, t->total = t->got;
    }
}

static void backoff(unsigned attempt)
{
    unsigned ms = attempt < 8 ? BACKOFF_BASE_MS << attempt : BACKOFF_MAX_MS;
    if (ms > BACKOFF_MAX_MS)
        ms = BACKOFF_MAX_MS;
    ms += (unsigned)rand() % (ms / 2 + 1);
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0)
        ;
}

/* A range to fetch: [off, off + len) of the object `want` at url (shown
 * as `shown` in messages) into dst (cap bytes); len 0 is the first
 * request, for the first cap bytes or fewer if the object is smaller
 * (want NULL). */
typedef struct {
    const char *url, *shown;
    const tf_http_identity *want;
    uint64_t off, len, cap;
    uint8_t *dst;
} wanted;

/* Runs the n transfers of w, retrying those whose fault passes; the
 * response of a first request goes to t[i]. */
static int fetch_ranges(tf_http *h, transfer *t, const wanted *w, size_t n, tf_error *e)
{
    bool *done = calloc(n, sizeof *done);
    size_t *todo = malloc(n * sizeof *todo);
    transfer *batch = calloc(n, sizeof *batch);
    if (!done || !todo || !batch) {
        free(done), free(todo), free(batch);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    int rc = 0;
    bool changed = false;
    char why[256] = "";
    const char *why_shown = w[0].shown; /* whose fault `why` is */
    for (unsigned attempt = 0;; attempt++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!done[i])
                todo[k++] = i;
        if (k == 0)
            break;
        if (atomic_load(&h->cancelled)) {
            rc = tf_fail(e, ECANCELED, "%s: cancelled: the archive is being closed", w[todo[0]].shown);
            break;
        }
        if (attempt > 0) {
            if (attempt > h->lim.retries) {
                rc = tf_fail(e, EIO, "%s: %s (gave up after %u attempts)", why_shown, why, attempt);
                break;
            }
            backoff(attempt - 1);
        }
        bool oom = false;
        for (size_t j = 0; j < k; j++) {
            const wanted *q = &w[todo[j]];
            transfer *x = &batch[j];
            *x = (transfer){ .dst = q->dst, .cap = q->cap };
            if (q->len)
                snprintf(x->range, sizeof x->range, "%" PRIu64 "-%" PRIu64, q->off, q->off + q->len - 1);
            else
                snprintf(x->range, sizeof x->range, "0-%" PRIu64, q->cap - 1);
            if (transfer_setup(h, q->url, x) < 0)
                oom = true;
        }
        if (!oom)
            run_all(h, batch, k);
        bool fatal = oom;
        if (oom)
            snprintf(why, sizeof why, "out of memory");
        for (size_t j = 0; j < k; j++) {
            const wanted *q = &w[todo[j]];
            transfer *x = &batch[j];
            if (!oom) {
                atomic_fetch_add(&h->requests, 1);
                atomic_fetch_add(&h->bytes, x->got);
                if (q->len == 0)
                    whole_as_first(x);
                char one[256];
                verdict v = judge(q->want, x, q->off, q->len, one, sizeof one);
                if (v == DONE)
                    done[todo[j]] = true;
                else if (!fatal) {
                    memcpy(why, one, sizeof why);
                    why_shown = q->shown;
                    fatal = v == FATAL || v == CHANGED;
                    changed = v == CHANGED;
                }
                if (q->len == 0 && v == DONE)
                    t[todo[j]] = *x; /* the first response, for its caller */
            }
            easy_release(&x->easy, &x->headers);
        }
        if (fatal && !atomic_load(&h->cancelled)) { /* else said at the top */
            tf_fail(e, EIO, "%s: %s", why_shown, why);
            rc = changed ? TF_HTTP_CHANGED : -1;
            break;
        }
    }
    free(done), free(todo), free(batch);
    return rc;
}

/* The first `want` bytes (fewer when the object is smaller), of any
 * identity: what the object is now. */
static int first_bytes(tf_http *h, uint64_t want, uint8_t *p, uint64_t *got, tf_http_identity *id,
                       tf_error *e)
{
    transfer t = { 0 };
    wanted w = { .url = h->url, .shown = h->shown, .cap = want, .dst = p };
    if (fetch_ranges(h, &t, &w, 1, e) < 0)
        return -1;
    id->size = t.total;
    memcpy(id->etag, t.etag, sizeof id->etag);
    *got = t.got;
    return 0;
}

int tf_http_first(tf_http *h, uint64_t want, tf_buf *out, uint64_t *size, tf_error *e)
{
    out->len = 0;
    uint8_t *p = tf_buf_reserve(out, want);
    if (!p)
        return tf_fail(e, ENOMEM, "out of memory");
    tf_http_identity id;
    uint64_t got;
    if (first_bytes(h, want, p, &got, &id, e) < 0)
        return -1;
    tf_http_adopt(h, &id);
    *size = id.size;
    tf_buf_commit(out, got);
    return 0;
}

int tf_http_probe(tf_http *h, tf_http_identity *id, tf_error *e)
{
    uint8_t byte;
    uint64_t got;
    return first_bytes(h, 1, &byte, &got, id, e);
}

/* Whether the range lies inside the object `id`, else a message. */
static int inside(const char *shown, const tf_http_identity *id, const tf_http_range *r, tf_error *e)
{
    if (r->len == 0 || r->off > id->size || r->len > id->size - r->off)
        return tf_fail(e, EIO, "%s: range %" PRIu64 "+%" PRIu64 " lies outside the object", shown,
                       r->off, r->len);
    return 0;
}

static int fetch_as(tf_http *h, const char *url, const char *shown, const tf_http_identity *id,
                    tf_http_range *r, size_t n, tf_error *e)
{
    wanted *w = malloc(n * sizeof *w);
    int rc = w ? 0 : tf_fail(e, ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = inside(shown, id, &r[i], e);
        w[i] = (wanted){ url, shown, id, r[i].off, r[i].len, r[i].len, r[i].buf };
    }
    if (rc == 0)
        rc = fetch_ranges(h, NULL, w, n, e);
    free(w);
    return rc;
}

int tf_http_fetch_as(tf_http *h, const tf_http_identity *id, tf_http_range *r, size_t n, tf_error *e)
{
    return fetch_as(h, h->url, h->shown, id, r, n, e);
}

int tf_http_fetch_url(tf_http *h, const char *url, const tf_http_identity *id, tf_http_range *r,
                      size_t n, tf_error *e)
{
    char *shown = tf_io_shown_name(url);
    if (!shown)
        return tf_fail(e, ENOMEM, "out of memory");
    int rc = fetch_as(h, url, shown, id, r, n, e);
    free(shown);
    return rc;
}

int tf_http_fetch_parts(tf_http *h, const tf_http_part *p, size_t n, tf_error *e)
{
    wanted *w = calloc(n ? n : 1, sizeof *w);
    char **shown = calloc(n ? n : 1, sizeof *shown);
    int rc = w && shown ? 0 : tf_fail(e, ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!(shown[i] = tf_io_shown_name(p[i].url)))
            rc = tf_fail(e, ENOMEM, "out of memory");
        else if ((rc = inside(shown[i], &p[i].id, &p[i].r, e)) == 0)
            w[i] = (wanted){ p[i].url, shown[i], &p[i].id, p[i].r.off, p[i].r.len, p[i].r.len, p[i].r.buf };
    }
    if (rc == 0 && n)
        rc = fetch_ranges(h, NULL, w, n, e);
    for (size_t i = 0; shown && i < n; i++)
        free(shown[i]);
    free(shown);
    free(w);
    return rc;
}

int tf_http_fetch(tf_http *h, tf_http_range *r, size_t n, tf_error *e)
{
    tf_http_identity id;
    tf_http_identity_get(h, &id);
    return tf_http_fetch_as(h, &id, r, n, e);
}

/* ---- one request of any method ---- */

/* One attempt of tf_http_send and what its response said. */
typedef struct {
    tf_http *h;
    const tf_http_request *q;
    CURL *easy;
    struct curl_slist *headers;
    size_t sent;        /* of the body: where the next read begins */
    tf_buf *body;       /* the response body kept */
    bool overflow;      /* longer than q->response_max */
    bool oom;
    long status;
    char etag[TF_HTTP_ETAG_MAX];
    char error_body[ERROR_BODY_MAX + 1]; /* of a status that is retried */
    size_t error_len;
    uint64_t received;
    char curl_error[CURL_ERROR_SIZE];
} exchange;

static size_t on_send_header(char *p, size_t size, size_t nitems, void *data)
{
    exchange *x = data;
    size_t n = size * nitems, len = n;
    while (len && (p[len - 1] == '\r' || p[len - 1] == '\n'))
        len--;
    const char *v;
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0)
        x->etag[0] = '\0'; /* a new response (after a 100 Continue) */
    else if (header_is(p, len, "etag", &v))
        header_value(v, p + len, x->etag, sizeof x->etag);
    return n;
}

static size_t on_send_body(char *p, size_t size, size_t nitems, void *data)
{
    exchange *x = data;
    size_t n = size * nitems;
    long status = 0;
    tf_curl.easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    x->received += n;
    if (status_passes(status)) { /* retried: kept only for the message */
        size_t k = ERROR_BODY_MAX - x->error_len < n ? ERROR_BODY_MAX - x->error_len : n;
        memcpy(x->error_body + x->error_len, p, k);
        x->error_len += k;
        x->error_body[x->error_len] = '\0';
        return n;
    }
    if (n > x->q->response_max - x->body->len) {
        x->overflow = true;
        return 0; /* aborts the transfer */
    }
    if (tf_buf_put(x->body, p, n) < 0) {
        x->oom = true;
        return 0;
    }
    return n;
}

/* The request body, from memory; read again from the start when libcurl
 * rewinds (a reused connection that turned out closed). */
static size_t on_send_read(char *p, size_t size, size_t nitems, void *data)
{
    exchange *x = data;
    size_t n = size * nitems, left = x->q->body_len - x->sent;
    if (n > left)
        n = left;
    if (n)
        memcpy(p, (const uint8_t *)x->q->body + x->sent, n);
    x->sent += n;
    return n;
}

static int on_send_seek(void *data, curl_off_t offset, int origin)
{
    exchange *x = data;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->q->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    x->sent = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

static bool method_is(const tf_http_request *q, const char *m) { return strcmp(q->method, m) == 0; }

static int exchange_setup(tf_http *h, const char *url, exchange *x)
{
    const tf_http_request *q = x->q;
    if (!(x->easy = tf_curl.easy_init()))
        return -1;
    CURL *c = x->easy;
    easy_common(h, c, url, x->curl_error);
    tf_curl.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_send_header);
    tf_curl.easy_setopt(c, CURLOPT_HEADERDATA, x);
    tf_curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_send_body);
    tf_curl.easy_setopt(c, CURLOPT_WRITEDATA, x);
    bool upload = method_is(q, "PUT") || method_is(q, "POST");
    if (upload) {
        /* An upload of the body from memory (an empty one when none), for
         * POST too: POSTFIELDS would add a form Content-Type. */
        tf_curl.easy_setopt(c, CURLOPT_UPLOAD, 1L);
        tf_curl.easy_setopt(c, CURLOPT_READFUNCTION, on_send_read);
        tf_curl.easy_setopt(c, CURLOPT_READDATA, x);
        tf_curl.easy_setopt(c, CURLOPT_SEEKFUNCTION, on_send_seek);
        tf_curl.easy_setopt(c, CURLOPT_SEEKDATA, x);
        tf_curl.easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
        if (!method_is(q, "PUT"))
            tf_curl.easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
        /* No "Expect: 100-continue": it waits a second for servers that
         * never answer it, and a refusal costs no more than the body. */
        if (!header_add(&x->headers, "Expect:"))
            return -1;
    } else if (method_is(q, "HEAD")) {
        tf_curl.easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (!method_is(q, "GET")) {
        tf_curl.easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
    }
    if (!auth_headers(h, &x->headers, upload && q->body_len > 0))
        return -1;
    for (const char *const *l = q->headers; l && *l; l++)
        if (!header_add(&x->headers, *l))
            return -1;
    if (x->headers)
        tf_curl.easy_setopt(c, CURLOPT_HTTPHEADER, x->headers);
    return 0;
}

/* Judges a finished attempt: DONE (any status the caller judges), RETRY
 * or FATAL, with why. */
static verdict judge_exchange(const exchange *x, CURLcode rc, char *why, size_t cap)
{
    if (x->overflow) {
        snprintf(why, cap, "HTTP status %ld: a response body longer than %zu bytes", x->status,
                 x->q->response_max);
        return FATAL;
    }
    if (rc != CURLE_OK) {
        snprintf(why, cap, "%s", x->curl_error[0] ? x->curl_error : tf_curl.easy_strerror(rc));
        return curl_error_passes(rc) ? RETRY : FATAL;
    }
    if (status_passes(x->status)) {
        char code[96];
        s3_error_code(x->error_body, code, sizeof code);
        snprintf(why, cap, "HTTP status %ld%s", x->status, code);
        return RETRY;
    }
    return DONE;
}

void tf_http_response_free(tf_http_response *r)
{
    tf_buf_free(&r->body);
    r->body = (tf_buf){ 0 };
}

int tf_http_send(tf_http *h, const tf_http_request *q, tf_http_response *out, tf_error *e)
{
    *out = (tf_http_response){ .length = -1 };
    const char *url = q->url ? q->url : h->url;
    char *own_shown = q->url ? tf_io_shown_name(q->url) : NULL;
    if (q->url && !own_shown)
        return tf_fail(e, ENOMEM, "out of memory");
    const char *shown = own_shown ? own_shown : h->shown;
    int rc = 0;
    char why[256] = "";
    for (unsigned attempt = 0;; attempt++) {
        if (atomic_load(&h->cancelled)) {
            rc = tf_fail(e, ECANCELED, "%s: cancelled: the archive is being closed", shown);
            break;
        }
        if (attempt > 0) {
            if (attempt > h->lim.retries) {
                rc = tf_fail(e, EIO, "%s: %s: %s (gave up after %u attempts)", shown, q->method, why,
                             attempt);
                break;
            }
            backoff(attempt - 1);
        }
        out->body.len = 0; /* a retry keeps only its own response */
        exchange x = { .h = h, .q = q, .body = &out->body };
        CURLcode res = CURLE_OUT_OF_MEMORY;
        if (exchange_setup(h, url, &x) == 0) {
            while (sem_wait(&h->slots) < 0)
                ;
            res = tf_curl.easy_perform(x.easy);
            sem_post(&h->slots);
            tf_curl.easy_getinfo(x.easy, CURLINFO_RESPONSE_CODE, &x.status);
            curl_off_t length = -1;
            if (tf_curl.easy_getinfo(x.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) != CURLE_OK)
                length = -1;
            out->length = length;
            atomic_fetch_add(&h->requests, 1);
            atomic_fetch_add(&h->bytes, x.received);
        } else {
            x.oom = true;
        }
        easy_release(&x.easy, &x.headers);
        if (x.oom) {
            rc = tf_fail(e, ENOMEM, "%s: %s: out of memory", shown, q->method);
            break;
        }
        if (atomic_load(&h->cancelled))
            continue; /* said at the top */
        verdict v = judge_exchange(&x, res, why, sizeof why);
        if (v == DONE) {
            out->status = x.status;
            memcpy(out->etag, x.etag, sizeof out->etag);
            break;
        }
        if (v == FATAL) {
            rc = tf_fail(e, EIO, "%s: %s: %s", shown, q->method, why);
            break;
        }
    }
    free(own_shown);
    if (rc < 0)
        tf_http_response_free(out);
    return rc;
}
