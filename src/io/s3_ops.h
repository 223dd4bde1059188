/* The S3 operations that an archive in a bucket needs, over
 * tf_http_send: list, put (conditional), delete, head, and multipart
 * uploads. Every key is given decoded; URLs and query strings are built
 * already in SigV4's canonical form (parameters sorted by name, values
 * percent-encoded but for unreserved characters), so that a signature
 * holds whatever libcurl does with the query. Every response is
 * untrusted: bounded in size, its XML checked (src/io/xml_text.h), and
 * what does not fit fails with EIO. */
#ifndef TRAJFS_IO_S3_OPS_H
#define TRAJFS_IO_S3_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "io/http.h"
#include "io/s3.h"

typedef struct {
    char *key; /* decoded (XML entities resolved) */
    uint64_t size;
    char etag[TF_HTTP_ETAG_MAX];
} tf_s3_object;

typedef struct {
    tf_s3_object *v;
    size_t n;
    bool truncated; /* more keys follow the last one */
} tf_s3_listing;

/* ListObjectsV2: the keys that begin with prefix and sort after
 * start_after (NULL: from the first), at most max (1 to 1000), in the
 * server's order. */
int tf_s3_list(tf_http *h, const tf_s3_request *r, const char *prefix, const char *start_after,
               unsigned max, tf_s3_listing *out, tf_error *e);
void tf_s3_listing_free(tf_s3_listing *l);
/* The page of tf_s3_list from its XML (len bytes): for the tests. */
int tf_s3_list_parse(const char *xml, size_t len, const char *prefix, unsigned max, tf_s3_listing *out,
                     tf_error *e);

/* PUT of the len bytes p at key. With if_none_match, sent with
 * "If-None-Match: *": 1 (nothing written by us) when the server answers
 * 412 Precondition Failed or 409 (ConditionalRequestConflict); 0 when
 * written. */
int tf_s3_put(tf_http *h, const tf_s3_request *r, const char *key, const void *p, size_t len,
              bool if_none_match, tf_error *e);
/* DELETE of key: 0 also when there was none (404, 204). */
int tf_s3_delete(tf_http *h, const tf_s3_request *r, const char *key, tf_error *e);
/* DeleteObjects of the n keys (1 to TF_S3_DELETE_MAX) in one request: 0
 * when every one is gone (or was not there), 1 when the store refused
 * the request (HTTP status not 200; some stores have no such call: delete
 * the keys one by one), -1 on error, and when a key could not be
 * deleted. */
#define TF_S3_DELETE_MAX 1000
int tf_s3_delete_keys(tf_http *h, const tf_s3_request *r, const char *const *keys, size_t n,
                      tf_error *e);
/* HEAD of key: 1 with its size and ETag when it exists (out->key left
 * NULL), 0 when not (404), -1 on error. */
int tf_s3_head(tf_http *h, const tf_s3_request *r, const char *key, tf_s3_object *out, tf_error *e);

/* Multipart upload. */
int tf_s3_upload_start(tf_http *h, const tf_s3_request *r, const char *key, char **upload_id,
                       tf_error *e);
/* Part `part` (1..10000) of len bytes; its ETag into etag. */
int tf_s3_upload_part(tf_http *h, const tf_s3_request *r, const char *key, const char *upload_id,
                      unsigned part, const void *p, size_t len, char etag[TF_HTTP_ETAG_MAX], tf_error *e);
/* CompleteMultipartUpload of parts 1..nparts with their ETags; with
 * if_none_match ("If-None-Match: *"): 1 when an object is there already
 * (412/409), 0 when completed. A 200 with an <Error> body is a failure
 * (EIO, with its Code), retried a few times when the Code is
 * InternalError or SlowDown. */
int tf_s3_upload_complete(tf_http *h, const tf_s3_request *r, const char *key, const char *upload_id,
                          const char (*etags)[TF_HTTP_ETAG_MAX], unsigned nparts, bool if_none_match,
                          tf_error *e);
/* AbortMultipartUpload: 0 also when it is gone (404 NoSuchUpload). */
int tf_s3_upload_abort(tf_http *h, const tf_s3_request *r, const char *key, const char *upload_id,
                       tf_error *e);

typedef struct {
    char *key;
    char *upload_id;
} tf_s3_upload;
/* ListMultipartUploads: the uploads in progress under prefix (all
 * pages). */
int tf_s3_uploads_list(tf_http *h, const tf_s3_request *r, const char *prefix, tf_s3_upload **out,
                       size_t *n, tf_error *e);
void tf_s3_uploads_free(tf_s3_upload *u, size_t n);

#endif
