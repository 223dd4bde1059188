/* Byte ranges of one object behind an HTTP(S) URL, with libcurl: exact
 * range GETs, run side by side through a bounded number of parallel
 * transfers, with bounded retries and backoff for the faults that pass
 * (timeouts, resets, 5xx, throttling). Every response is untrusted: its
 * status, Content-Range, length and ETag must be what was asked for, or
 * the range fails (EIO) and nothing of it is used. Messages show the URL
 * without user, password, query and fragment (tf_io_shown_name). */
#ifndef TRAJFS_IO_HTTP_H
#define TRAJFS_IO_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

#define TF_HTTP_ETAG_MAX 128

typedef struct tf_http tf_http;

typedef struct {
    unsigned stall_timeout_ms;   /* a transfer slower than min_speed over this long fails */
    unsigned min_speed;          /* bytes/s */
    unsigned connect_timeout_ms;
    unsigned retries;            /* attempts after the first */
    unsigned parallel;           /* transfers at once, all callers together */
} tf_http_limits;

/* Request signing (AWS SigV4, by libcurl); all NULL: anonymous. */
typedef struct {
    const char *sigv4;   /* "aws:amz:REGION:s3" */
    const char *userpwd; /* "KEY_ID:SECRET" */
    const char *token;   /* session token, or NULL */
} tf_http_auth;

typedef struct {
    uint64_t off;
    uint64_t len; /* > 0 */
    uint8_t *buf; /* len bytes */
} tf_http_range;

/* What an object is: its size and ETag ("" when it has none). */
typedef struct {
    uint64_t size;
    char etag[TF_HTTP_ETAG_MAX];
} tf_http_identity;

int tf_http_new(const char *url, const tf_http_auth *auth, const tf_http_limits *lim,
                tf_http **out, tf_error *e);
void tf_http_free(tf_http *h);

/* The first request: the first `want` bytes of the object (all of it
 * when smaller) into out; learns the object's identity, which every
 * later range must then match (until tf_http_adopt). (Not a suffix
 * range: not every S3-compatible server serves those right.) */
int tf_http_first(tf_http *h, uint64_t want, tf_buf *out, uint64_t *size, tf_error *e);
/* One request for the object's first byte: what it is now, whatever it
 * was. */
int tf_http_probe(tf_http *h, tf_http_identity *id, tf_error *e);
/* The identity ranges must match, and a new one (an object that grew,
 * checked by the caller). */
void tf_http_identity_get(tf_http *h, tf_http_identity *id);
void tf_http_adopt(tf_http *h, const tf_http_identity *id);

/* tf_http_fetch returns this when a response came from an object of
 * another size or ETag than the one expected (no retry: its bytes are
 * not used). */
#define TF_HTTP_CHANGED (-2)

/* Fetches each of the n ranges exactly (all within the size). 0 when all
 * arrived; -1 (EIO) when one still failed after the retries, or at once
 * for a fault that a retry cannot mend (4xx); TF_HTTP_CHANGED. */
int tf_http_fetch(tf_http *h, tf_http_range *r, size_t n, tf_error *e);
/* tf_http_fetch of the object `id`, not of the one adopted. */
int tf_http_fetch_as(tf_http *h, const tf_http_identity *id, tf_http_range *r, size_t n,
                     tf_error *e);

/* tf_http_fetch_as, of the object at url (not the handle's own URL)
 * whose identity is id. */
int tf_http_fetch_url(tf_http *h, const char *url, const tf_http_identity *id, tf_http_range *r,
                      size_t n, tf_error *e);

/* A range of the object at url whose identity is id. */
typedef struct {
    const char *url;
    tf_http_identity id;
    tf_http_range r;
} tf_http_part;
/* tf_http_fetch_url of ranges of several objects, all at once (within
 * the handle's bound of transfers): one round trip where one object at
 * a time would take one each. */
int tf_http_fetch_parts(tf_http *h, const tf_http_part *p, size_t n, tf_error *e);

/* One request of any method, for the S3 operations (src/io/s3_ops.h). */
typedef struct {
    const char *method;         /* "GET", "HEAD", "PUT", "POST", "DELETE" */
    const char *url;            /* the whole URL; NULL: the handle's own */
    const char *const *headers; /* extra request headers "Name: value", NULL-terminated; NULL: none */
    const void *body;           /* body_len bytes (PUT, POST); NULL: none (an empty body for PUT/POST) */
    size_t body_len;
    size_t response_max;        /* the most response body kept, whatever the status; a longer body fails (EIO) */
} tf_http_request;

typedef struct {
    long status;                 /* the final HTTP status */
    char etag[TF_HTTP_ETAG_MAX]; /* its ETag header, "" when none */
    int64_t length;              /* its Content-Length header, -1 when none (a HEAD's object size) */
    tf_buf body;                 /* at most response_max bytes; the caller frees it (tf_http_response_free) */
} tf_http_response;

/* Sends the request; retries, with the handle's limits and backoff (as
 * reads do), what passes: transport faults, 408, 429, 5xx. Returns 0
 * with the response of any other status (the caller judges 200, 204,
 * 404, 412...); -1 with EIO after the retries (the message names the
 * shown URL, the method and the last fault, with the S3 <Code> when
 * the body has one), ECANCELED when the handle was cancelled. Signed as
 * reads are; a request with a body sends "x-amz-content-sha256:
 * UNSIGNED-PAYLOAD", one without the empty payload's hash. Counted in
 * tf_http_counters. Holds one of the handle's parallel slots while it
 * runs, so that uploads and reads together stay within the parallel
 * bound. Thread-safe. */
int tf_http_send(tf_http *h, const tf_http_request *q, tf_http_response *out, tf_error *e);
void tf_http_response_free(tf_http_response *r);

/* Ends every transfer under way, and fails every later one, at once
 * (ECANCELED): the object is being closed. */
void tf_http_cancel(tf_http *h);

/* Requests sent (retries included) and body bytes received so far. */
void tf_http_counters(const tf_http *h, uint64_t *requests, uint64_t *bytes);

#endif
