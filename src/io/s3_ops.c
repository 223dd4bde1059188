#include "io/s3_ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/md5.h"
#include "io/io.h"
#include "io/xml_text.h"

/* Response bodies kept: a ListObjectsV2 page of 1000 keys fits in the
 * first; every other answer (an upload id, an error) in the second. */
#define LIST_RESPONSE_MAX (2u << 20)
#define SMALL_RESPONSE_MAX (64u << 10)
/* S3 keys are at most 1024 bytes; other servers may allow a little more. */
#define KEY_MAX 4096
#define UPLOAD_ID_MAX 1024
#define PARTS_MAX 10000
/* Of ListMultipartUploads, all pages together: a bound on memory. */
#define UPLOADS_MAX 100000
/* A CompleteMultipartUpload answered 200 with InternalError or SlowDown
 * in its body is sent again this many times at most. */
#define COMPLETE_RETRIES 4
#define COMPLETE_BACKOFF_MS 200

/* A query parameter; a NULL value leaves it out. */
typedef struct {
    const char *name;
    const char *value;
} param;

/* Appends s percent-encoded as SigV4's canonical query wants: unreserved
 * characters as they are, every other byte (even '/') as %XX. */
static int put_encoded(tf_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                     *p == '-' || *p == '.' || *p == '_' || *p == '~';
        char esc[3] = { '%', hex[*p >> 4], hex[*p & 15] };
        if (plain ? tf_buf_u8(b, *p) < 0 : tf_buf_put(b, esc, 3) < 0)
            return -1;
    }
    return 0;
}

/* Appends s with XML's five special characters escaped. */
static int put_escaped(tf_buf *b, const char *s)
{
    for (; *s; s++) {
        const char *esc = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;"
                        : *s == '"' ? "&quot;" : *s == '\'' ? "&apos;" : NULL;
        if (esc ? tf_buf_put(b, esc, strlen(esc)) < 0 : tf_buf_u8(b, (uint8_t)*s) < 0)
            return -1;
    }
    return 0;
}

/* url?name=value&... of the n parameters, given sorted by name (the
 * canonical order, so that the query signs as it is sent). */
static int with_query(const char *url, const param *q, size_t n, char **out, tf_error *e)
{
    tf_buf b = { 0 };
    int rc = tf_buf_put(&b, url, strlen(url));
    char sep = '?';
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!q[i].value)
            continue;
        rc = tf_buf_u8(&b, (uint8_t)sep) < 0 || tf_buf_put(&b, q[i].name, strlen(q[i].name)) < 0 ||
                     tf_buf_u8(&b, '=') < 0 || put_encoded(&b, q[i].value) < 0
                 ? -1
                 : 0;
        sep = '&';
    }
    if (rc == 0)
        rc = tf_buf_u8(&b, 0);
    if (rc < 0) {
        tf_buf_free(&b);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    *out = (char *)b.data;
    return 0;
}

/* The object's URL, with the query q (n parameters, sorted). */
static int object_url(const tf_s3_request *r, const char *key, const param *q, size_t n, char **out,
                      tf_error *e)
{
    char *url;
    if (tf_s3_key_url(r, key, &url, e) < 0)
        return -1;
    int rc = with_query(url, q, n, out, e);
    free(url);
    return rc;
}

/* Prepends "URL: METHOD" (the URL shown) to the message in e. */
static int fail_at(const char *url, const char *method, tf_error *e)
{
    char *shown = tf_io_shown_name(url);
    tf_error_prefix(e, "%s: %s", shown ? shown : "S3", method);
    free(shown);
    return -1;
}

/* Fails (EIO) with the message, prefixed with "URL: METHOD". */
static int fail_with(const char *url, const char *method, tf_error *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_with(const char *url, const char *method, tf_error *e, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->errnum = EIO;
    }
    return fail_at(url, method, e);
}

/* The S3 <Code> of an error body, or "" (when it has none, or is not
 * XML). */
static void error_code(const tf_http_response *resp, char *code, size_t cap)
{
    code[0] = '\0';
    tf_xml_span doc = { (const char *)resp->body.data, resp->body.len };
    if (doc.len && tf_xml_check(doc.p, doc.len, NULL) == 0 && tf_xml_first(doc, "Code", code, cap, NULL) < 0)
        code[0] = '\0';
}

/* Fails (EIO) with the response's status and S3 <Code>. */
static int status_fail(const char *url, const char *method, const tf_http_response *resp, tf_error *e)
{
    char code[128];
    error_code(resp, code, sizeof code);
    tf_fail(e, EIO, "HTTP status %ld%s%s%s", resp->status, code[0] ? " (" : "", code, code[0] ? ")" : "");
    return fail_at(url, method, e);
}

static int request(tf_http *h, const char *method, const char *url, const char *const *headers,
                   const void *body, size_t len, size_t response_max, tf_http_response *resp, tf_error *e)
{
    tf_http_request q = { .method = method, .url = url, .headers = headers, .body = body,
                          .body_len = len, .response_max = response_max };
    return tf_http_send(h, &q, resp, e);
}

/* A decimal count of bytes: digits only, and it fits. */
static bool parse_u64(const char *s, uint64_t *v)
{
    if (!*s)
        return false;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return false;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return true;
}

/* "true" or "false", of the first element `name` of s, which must be
 * there. */
static int parse_flag(tf_xml_span s, const char *name, bool *flag, tf_error *e)
{
    char v[8];
    int found = tf_xml_first(s, name, v, sizeof v, e);
    if (found < 0)
        return -1;
    if (found == 0 || (strcmp(v, "true") && strcmp(v, "false")))
        return tf_fail(e, EIO, "a listing without <%s>true or false</%s>", name, name);
    *flag = strcmp(v, "true") == 0;
    return 0;
}

/* The text of the element `name` in s, which must be there, non-empty:
 * malloc'd. */
static int required_text(tf_xml_span s, const char *name, size_t max, char **out, tf_error *e)
{
    size_t pos = 0;
    tf_xml_span inner;
    int found = tf_xml_find(s, &pos, name, &inner, e);
    if (found < 0)
        return -1;
    if (found == 0 || inner.len == 0)
        return tf_fail(e, EIO, "an entry without <%s>", name);
    return tf_xml_text_dup(inner, max, out, e);
}

/* The document's root element `root`, the document checked first. */
static int document(const tf_buf *body, const char *root, tf_xml_span *inner, tf_error *e)
{
    tf_xml_span doc = { (const char *)body->data, body->len };
    size_t pos = 0;
    if (tf_xml_check(doc.p, doc.len, e) < 0)
        return -1;
    int found = tf_xml_find(doc, &pos, root, inner, e);
    if (found == 0)
        return tf_fail(e, EIO, "the response is not a <%s>", root);
    return found < 0 ? -1 : 0;
}

static int parse_object(tf_xml_span c, const char *prefix, tf_s3_object *o, tf_error *e)
{
    char size[32];
    if (required_text(c, "Key", KEY_MAX, &o->key, e) < 0)
        return -1;
    if (prefix && strncmp(o->key, prefix, strlen(prefix)))
        return tf_fail(e, EIO, "a key outside the prefix asked for");
    int found = tf_xml_first(c, "Size", size, sizeof size, e);
    if (found < 0)
        return -1;
    if (found == 0 || !parse_u64(size, &o->size))
        return tf_fail(e, EIO, "a key without a size (a count of bytes that fits 64 bits)");
    return tf_xml_first(c, "ETag", o->etag, sizeof o->etag, e) < 0 ? -1 : 0;
}

int tf_s3_list_parse(const char *xml, size_t len, const char *prefix, unsigned max, tf_s3_listing *out,
                     tf_error *e)
{
    *out = (tf_s3_listing){ 0 };
    tf_xml_span root, c;
    if (document(&(tf_buf){ .data = (uint8_t *)xml, .len = len }, "ListBucketResult", &root, e) < 0 ||
        parse_flag(root, "IsTruncated", &out->truncated, e) < 0)
        return -1;
    size_t pos = 0, cap = 0;
    int found;
    while ((found = tf_xml_find(root, &pos, "Contents", &c, e)) == 1) {
        if (out->n == max) {
            tf_s3_listing_free(out);
            return tf_fail(e, EIO, "a listing of more than the %u keys asked for", max);
        }
        if (out->n == cap) {
            size_t more = cap ? 2 * cap : 16;
            tf_s3_object *v = realloc(out->v, more * sizeof *v);
            if (!v) {
                tf_s3_listing_free(out);
                return tf_fail(e, ENOMEM, "out of memory");
            }
            out->v = v, cap = more;
        }
        tf_s3_object *o = &out->v[out->n++];
        *o = (tf_s3_object){ 0 };
        if (parse_object(c, prefix, o, e) < 0) {
            tf_s3_listing_free(out);
            return -1;
        }
    }
    if (found < 0)
        tf_s3_listing_free(out);
    return found < 0 ? -1 : 0;
}

void tf_s3_listing_free(tf_s3_listing *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].key);
    free(l->v);
    *l = (tf_s3_listing){ 0 };
}

int tf_s3_list(tf_http *h, const tf_s3_request *r, const char *prefix, const char *start_after,
               unsigned max, tf_s3_listing *out, tf_error *e)
{
    *out = (tf_s3_listing){ 0 };
    if (max < 1 || max > 1000)
        return tf_fail(e, EINVAL, "%s: a listing of %u keys (1 to 1000)", r->base, max);
    char count[16];
    snprintf(count, sizeof count, "%u", max);
    const param q[] = { { "list-type", "2" },
                        { "max-keys", count },
                        { "prefix", prefix && *prefix ? prefix : NULL },
                        { "start-after", start_after && *start_after ? start_after : NULL } };
    char *url;
    if (with_query(r->base, q, sizeof q / sizeof q[0], &url, e) < 0)
        return -1;
    tf_http_response resp;
    int rc = request(h, "GET", url, NULL, NULL, 0, LIST_RESPONSE_MAX, &resp, e);
    if (rc == 0 && resp.status != 200)
        rc = status_fail(url, "GET", &resp, e);
    else if (rc == 0 &&
             tf_s3_list_parse((const char *)resp.body.data, resp.body.len, prefix, max, out, e) < 0)
        rc = fail_at(url, "GET", e);
    tf_http_response_free(&resp);
    free(url);
    return rc;
}

int tf_s3_put(tf_http *h, const tf_s3_request *r, const char *key, const void *p, size_t len,
              bool if_none_match, tf_error *e)
{
    static const char *const condition[] = { "If-None-Match: *", NULL };
    char *url;
    if (tf_s3_key_url(r, key, &url, e) < 0)
        return -1;
    tf_http_response resp;
    int rc = request(h, "PUT", url, if_none_match ? condition : NULL, p, len, SMALL_RESPONSE_MAX, &resp, e);
    if (rc == 0 && if_none_match && (resp.status == 412 || resp.status == 409))
        rc = 1;
    else if (rc == 0 && resp.status != 200)
        rc = status_fail(url, "PUT", &resp, e);
    tf_http_response_free(&resp);
    free(url);
    return rc;
}

/* DELETE of url (taken): 0 also when there was nothing (404). */
static int delete_url(tf_http *h, char *url, tf_error *e)
{
    tf_http_response resp;
    int rc = request(h, "DELETE", url, NULL, NULL, 0, SMALL_RESPONSE_MAX, &resp, e);
    if (rc == 0 && resp.status != 200 && resp.status != 204 && resp.status != 404)
        rc = status_fail(url, "DELETE", &resp, e);
    tf_http_response_free(&resp);
    free(url);
    return rc;
}

int tf_s3_delete(tf_http *h, const tf_s3_request *r, const char *key, tf_error *e)
{
    char *url;
    return tf_s3_key_url(r, key, &url, e) < 0 ? -1 : delete_url(h, url, e);
}

/* The n bytes at p in base64 (RFC 4648, padded) into out, NUL-ended:
 * 4 * ((n + 2) / 3) + 1 bytes. */
static void base64(const uint8_t *p, size_t n, char *out)
{
    static const char digit[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3, out += 4) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[0] = digit[v >> 18];
        out[1] = digit[v >> 12 & 63];
        out[2] = i + 1 < n ? digit[v >> 6 & 63] : '=';
        out[3] = i + 2 < n ? digit[v & 63] : '=';
    }
    *out = '\0';
}

/* A DeleteObjects request of the n keys, quiet: its answer lists only
 * the keys that could not be deleted. */
static int delete_body(const char *const *keys, size_t n, tf_buf *b, tf_error *e)
{
    static const char head[] = "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>";
    int rc = tf_buf_put(b, head, sizeof head - 1);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = tf_buf_put(b, "<Object><Key>", 13) < 0 || put_escaped(b, keys[i]) < 0 ||
                     tf_buf_put(b, "</Key></Object>", 15) < 0
                 ? -1
                 : 0;
    if (rc == 0)
        rc = tf_buf_put(b, "</Delete>", 9);
    return rc < 0 ? tf_fail(e, ENOMEM, "out of memory") : 0;
}

/* Of a DeleteObjects answered 200: -1 with the first key that it could
 * not delete, and why, if any. */
static int delete_outcome(const tf_http_response *resp, tf_error *e)
{
    tf_xml_span root, err;
    size_t pos = 0;
    if (document(&resp->body, "DeleteResult", &root, e) < 0)
        return -1;
    int found = tf_xml_find(root, &pos, "Error", &err, e);
    if (found <= 0)
        return found;
    char key[256], code[128];
    if (tf_xml_first(err, "Key", key, sizeof key, e) < 0 || tf_xml_first(err, "Code", code, sizeof code, e) < 0)
        return -1;
    return tf_fail(e, EIO, "%s was not deleted (%s)", key[0] ? key : "a key", code[0] ? code : "no code");
}

int tf_s3_delete_keys(tf_http *h, const tf_s3_request *r, const char *const *keys, size_t n,
                      tf_error *e)
{
    if (n < 1 || n > TF_S3_DELETE_MAX)
        return tf_fail(e, EINVAL, "%s: a delete of %zu keys (1 to %d)", r->base, n, TF_S3_DELETE_MAX);
    const param q[] = { { "delete", "" } };
    tf_buf body = { 0 };
    char *url = NULL;
    if (delete_body(keys, n, &body, e) < 0 || with_query(r->base, q, 1, &url, e) < 0) {
        tf_buf_free(&body);
        return -1;
    }
    /* S3 wants the body's MD5 (or another checksum) on this request. */
    uint8_t md5[16];
    tf_md5(body.data, body.len, md5);
    char header[64] = "Content-MD5: ";
    base64(md5, sizeof md5, header + strlen(header));
    const char *const headers[] = { header, "Content-Type: application/xml", NULL };
    tf_http_response resp;
    int rc = request(h, "POST", url, headers, body.data, body.len, LIST_RESPONSE_MAX, &resp, e);
    if (rc == 0 && resp.status != 200)
        rc = 1;
    else if (rc == 0 && delete_outcome(&resp, e) < 0)
        rc = fail_at(url, "POST", e);
    tf_http_response_free(&resp);
    tf_buf_free(&body);
    free(url);
    return rc;
}

int tf_s3_head(tf_http *h, const tf_s3_request *r, const char *key, tf_s3_object *out, tf_error *e)
{
    *out = (tf_s3_object){ 0 };
    char *url;
    if (tf_s3_key_url(r, key, &url, e) < 0)
        return -1;
    tf_http_response resp;
    int rc = request(h, "HEAD", url, NULL, NULL, 0, SMALL_RESPONSE_MAX, &resp, e);
    if (rc == 0 && resp.status == 200) {
        if (resp.length < 0)
            rc = fail_with(url, "HEAD", e, "a response without Content-Length");
        else
            rc = 1, out->size = (uint64_t)resp.length;
        memcpy(out->etag, resp.etag, sizeof out->etag);
    } else if (rc == 0 && resp.status != 404) {
        rc = status_fail(url, "HEAD", &resp, e);
    }
    tf_http_response_free(&resp);
    free(url);
    return rc;
}

/* ---- multipart uploads ---- */

int tf_s3_upload_start(tf_http *h, const tf_s3_request *r, const char *key, char **upload_id,
                       tf_error *e)
{
    *upload_id = NULL;
    const param q[] = { { "uploads", "" } };
    char *url;
    if (object_url(r, key, q, 1, &url, e) < 0)
        return -1;
    tf_http_response resp;
    tf_xml_span root;
    int rc = request(h, "POST", url, NULL, NULL, 0, SMALL_RESPONSE_MAX, &resp, e);
    if (rc == 0 && resp.status != 200)
        rc = status_fail(url, "POST", &resp, e);
    else if (rc == 0 && (document(&resp.body, "InitiateMultipartUploadResult", &root, e) < 0 ||
                         required_text(root, "UploadId", UPLOAD_ID_MAX, upload_id, e) < 0))
        rc = fail_at(url, "POST", e);
    tf_http_response_free(&resp);
    free(url);
    return rc;
}

static int check_part(const tf_s3_request *r, unsigned part, tf_error *e)
{
    if (part < 1 || part > PARTS_MAX)
        return tf_fail(e, EINVAL, "%s: part %u of an upload (1 to %d)", r->base, part, PARTS_MAX);
    return 0;
}

int tf_s3_upload_part(tf_http *h, const tf_s3_request *r, const char *key, const char *upload_id,
                      unsigned part, const void *p, size_t len, char etag[TF_HTTP_ETAG_MAX], tf_error *e)
{
    etag[0] = '\0';
    if (check_part(r, part, e) < 0)
        return -1;
    char number[16];
    snprintf(number, sizeof number, "%u", part);
    const param q[] = { { "partNumber", number }, { "uploadId", upload_id } };
    char *url;
    if (object_url(r, key, q, 2, &url, e) < 0)
        return -1;
    tf_http_response resp;
    int rc = request(h, "PUT", url, NULL, p, len, SMALL_RESPONSE_MAX, &resp, e);
    if (rc == 0 && resp.status != 200)
        rc = status_fail(url, "PUT", &resp, e);
    else if (rc == 0 && !resp.etag[0])
        rc = fail_with(url, "PUT", e, "part %u: a response without an ETag", part);
    else if (rc == 0)
        memcpy(etag, resp.etag, TF_HTTP_ETAG_MAX);
    tf_http_response_free(&resp);
    free(url);
    return rc;
}

static int complete_body(const char (*etags)[TF_HTTP_ETAG_MAX], unsigned nparts, tf_buf *b, tf_error *e)
{
    static const char head[] = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
    static const char tail[] = "</CompleteMultipartUpload>";
    int rc = tf_buf_put(b, head, sizeof head - 1);
    for (unsigned i = 0; rc == 0 && i < nparts; i++) {
        char number[64];
        int n = snprintf(number, sizeof number, "<Part><PartNumber>%u</PartNumber><ETag>", i + 1);
        if (memchr(etags[i], '\0', TF_HTTP_ETAG_MAX) == NULL || !etags[i][0])
            return tf_fail(e, EINVAL, "part %u: no ETag", i + 1);
        rc = tf_buf_put(b, number, (size_t)n) < 0 || put_escaped(b, etags[i]) < 0 ||
                     tf_buf_put(b, "</ETag></Part>", 14) < 0
                 ? -1
                 : 0;
    }
    if (rc == 0)
        rc = tf_buf_put(b, tail, sizeof tail - 1);
    return rc < 0 ? tf_fail(e, ENOMEM, "out of memory") : 0;
}

static void sleep_ms(unsigned ms)
{
    ms += (unsigned)rand() % (ms / 2 + 1);
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0)
        ;
}

/* Of a CompleteMultipartUpload answered 200: 0 when it completed, 1
 * when its <Error> asks for a retry (code in code), -1 otherwise. S3
 * answers 200 at once and sends the outcome later, in the body. */
static int complete_outcome(const tf_http_response *resp, char *code, size_t cap, tf_error *e)
{
    tf_xml_span root;
    size_t pos = 0;
    tf_xml_span doc = { (const char *)resp->body.data, resp->body.len };
    if (tf_xml_check(doc.p, doc.len, e) < 0)
        return -1;
    int error = tf_xml_find(doc, &pos, "Error", &root, e);
    if (error < 0)
        return -1;
    if (error == 0)
        return document(&resp->body, "CompleteMultipartUploadResult", &root, e);
    if (tf_xml_first(root, "Code", code, cap, e) < 0)
        return -1;
    if (strcmp(code, "InternalError") == 0 || strcmp(code, "SlowDown") == 0)
        return 1;
    return tf_fail(e, EIO, "HTTP status 200 with an error (%s)", code[0] ? code : "no code");
}

int tf_s3_upload_complete(tf_http *h, const tf_s3_request *r, const char *key, const char *upload_id,
                          const char (*etags)[TF_HTTP_ETAG_MAX], unsigned nparts, bool if_none_match,
                          tf_error *e)
{
    static const char *const condition[] = { "If-None-Match: *", NULL };
    if (nparts < 1 || nparts > PARTS_MAX)
        return tf_fail(e, EINVAL, "%s: an upload of %u parts (1 to %d)", r->base, nparts, PARTS_MAX);
    const param q[] = { { "uploadId", upload_id } };
    tf_buf body = { 0 };
    char *url;
    if (complete_body(etags, nparts, &body, e) < 0 || object_url(r, key, q, 1, &url, e) < 0) {
        tf_buf_free(&body);
        return -1;
    }
    int rc;
    for (unsigned attempt = 0;; attempt++) {
        tf_http_response resp;
        char code[128] = "";
        rc = request(h, "POST", url, if_none_match ? condition : NULL, body.data, body.len,
                     SMALL_RESPONSE_MAX, &resp, e);
        if (rc < 0)
            break;
        if (if_none_match && (resp.status == 412 || resp.status == 409))
            rc = 1;
        else if (resp.status != 200)
            rc = status_fail(url, "POST", &resp, e);
        else if ((rc = complete_outcome(&resp, code, sizeof code, e)) < 0)
            fail_at(url, "POST", e);
        tf_http_response_free(&resp);
        if (rc != 1 || resp.status != 200) /* done, or an object there already */
            break;
        if (attempt == COMPLETE_RETRIES) {
            rc = fail_with(url, "POST", e, "HTTP status 200 with an error (%s) (gave up after %u attempts)",
                           code, attempt + 1);
            break;
        }
        sleep_ms(COMPLETE_BACKOFF_MS << attempt);
    }
    tf_buf_free(&body);
    free(url);
    return rc;
}

int tf_s3_upload_abort(tf_http *h, const tf_s3_request *r, const char *key, const char *upload_id,
                       tf_error *e)
{
    const param q[] = { { "uploadId", upload_id } };
    char *url;
    return object_url(r, key, q, 1, &url, e) < 0 ? -1 : delete_url(h, url, e);
}

void tf_s3_uploads_free(tf_s3_upload *u, size_t n)
{
    for (size_t i = 0; u && i < n; i++) {
        free(u[i].key);
        free(u[i].upload_id);
    }
    free(u);
}

/* One page of ListMultipartUploads, its uploads appended to *v. */
typedef struct {
    tf_s3_upload *v;
    size_t n, cap;
    bool truncated;
    char *next_key, *next_id;
} uploads_page;

static int parse_uploads(const tf_buf *body, const char *prefix, uploads_page *pg, tf_error *e)
{
    tf_xml_span root, u;
    if (document(body, "ListMultipartUploadsResult", &root, e) < 0 ||
        parse_flag(root, "IsTruncated", &pg->truncated, e) < 0)
        return -1;
    size_t pos = 0;
    int found;
    while ((found = tf_xml_find(root, &pos, "Upload", &u, e)) == 1) {
        if (pg->n == UPLOADS_MAX)
            return tf_fail(e, EIO, "more than %d uploads in progress", UPLOADS_MAX);
        if (pg->n == pg->cap) {
            size_t more = pg->cap ? 2 * pg->cap : 16;
            tf_s3_upload *v = realloc(pg->v, more * sizeof *v);
            if (!v)
                return tf_fail(e, ENOMEM, "out of memory");
            pg->v = v, pg->cap = more;
        }
        tf_s3_upload *one = &pg->v[pg->n++];
        *one = (tf_s3_upload){ 0 };
        if (required_text(u, "Key", KEY_MAX, &one->key, e) < 0 ||
            required_text(u, "UploadId", UPLOAD_ID_MAX, &one->upload_id, e) < 0)
            return -1;
        if (prefix && strncmp(one->key, prefix, strlen(prefix)))
            return tf_fail(e, EIO, "an upload outside the prefix asked for");
    }
    if (found < 0)
        return -1;
    free(pg->next_key), free(pg->next_id);
    pg->next_key = pg->next_id = NULL;
    if (!pg->truncated)
        return 0;
    char *key = NULL, *id = NULL;
    int rc = required_text(root, "NextKeyMarker", KEY_MAX, &key, e);
    size_t p2 = 0;
    tf_xml_span inner;
    /* The upload id marker may be empty; the key marker may not. */
    if (rc == 0 && (found = tf_xml_find(root, &p2, "NextUploadIdMarker", &inner, e)) < 0)
        rc = -1;
    if (rc == 0 && found == 1)
        rc = tf_xml_text_dup(inner, UPLOAD_ID_MAX, &id, e);
    pg->next_key = key, pg->next_id = id;
    return rc;
}

int tf_s3_uploads_list(tf_http *h, const tf_s3_request *r, const char *prefix, tf_s3_upload **out,
                       size_t *n, tf_error *e)
{
    *out = NULL, *n = 0;
    uploads_page pg = { 0 };
    char *last_key = NULL, *last_id = NULL;
    int rc = 0;
    do {
        const param q[] = { { "key-marker", pg.next_key },
                            { "prefix", prefix && *prefix ? prefix : NULL },
                            { "upload-id-marker", pg.next_key ? (pg.next_id ? pg.next_id : "") : NULL },
                            { "uploads", "" } };
        char *url;
        if (with_query(r->base, q, sizeof q / sizeof q[0], &url, e) < 0) {
            rc = -1;
            break;
        }
        tf_http_response resp;
        rc = request(h, "GET", url, NULL, NULL, 0, LIST_RESPONSE_MAX, &resp, e);
        free(last_key), free(last_id);
        last_key = pg.next_key, last_id = pg.next_id;
        pg.next_key = pg.next_id = NULL;
        if (rc == 0 && resp.status != 200)
            rc = status_fail(url, "GET", &resp, e);
        else if (rc == 0 && parse_uploads(&resp.body, prefix, &pg, e) < 0)
            rc = fail_at(url, "GET", e);
        /* A server whose markers do not move would page forever. */
        if (rc == 0 && pg.truncated && last_key && strcmp(last_key, pg.next_key) == 0 &&
            strcmp(last_id ? last_id : "", pg.next_id ? pg.next_id : "") == 0)
            rc = fail_with(url, "GET", e, "the listing does not advance");
        tf_http_response_free(&resp);
        free(url);
    } while (rc == 0 && pg.truncated);
    free(last_key), free(last_id);
    free(pg.next_key), free(pg.next_id);
    if (rc < 0) {
        tf_s3_uploads_free(pg.v, pg.n);
        return -1;
    }
    *out = pg.v, *n = pg.n;
    return 0;
}
