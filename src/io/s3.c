#include "io/s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

#define DEFAULT_REGION "us-east-1"

bool tf_s3_is_url(const char *s) { return strncmp(s, "s3://", 5) == 0; }

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* S3's bucket names: 3 to 63 of [a-z0-9.-]. */
static bool valid_bucket(const char *b, size_t n)
{
    if (n < 3 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '.' || b[i] == '-'))
            return false;
    return true;
}

/* The key percent-encoded as SigV4 canonicalizes it: unreserved
 * characters and '/' as they are, every other byte %XX. */
static int append_key(tf_buf *b, const char *key, tf_error *e)
{
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return tf_fail(e, EINVAL, "control character in the object key");
        char one[4];
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                     strchr("-._~/", *p);
        int n = plain ? snprintf(one, sizeof one, "%c", *p) : snprintf(one, sizeof one, "%%%02X", *p);
        if (tf_buf_put(b, one, (size_t)n) < 0)
            return tf_fail(e, ENOMEM, "out of memory");
    }
    return 0;
}

/* The bucket's URL, up to the key: path-style under an endpoint, else
 * virtual-hosted AWS. */
static int build_base(const char *bucket, size_t blen, const char *endpoint, const char *region,
                      char **out, tf_error *e)
{
    int n;
    if (endpoint) {
        size_t el = strlen(endpoint);
        while (el && endpoint[el - 1] == '/')
            el--;
        if (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8))
            return tf_fail(e, EINVAL, "endpoint %s: expected http:// or https://", endpoint);
        if (el > 512)
            return tf_fail(e, EINVAL, "endpoint or region too long");
        n = asprintf(out, "%.*s/%.*s/", (int)el, endpoint, (int)blen, bucket);
    } else if (strlen(region) > 64) {
        return tf_fail(e, EINVAL, "endpoint or region too long");
    } else if (memchr(bucket, '.', blen)) {
        /* A dotted bucket does not match the wildcard certificate. */
        n = asprintf(out, "https://s3.%s.amazonaws.com/%.*s/", region, (int)blen, bucket);
    } else {
        n = asprintf(out, "https://%.*s.s3.%s.amazonaws.com/", (int)blen, bucket, region);
    }
    if (n < 0) {
        *out = NULL;
        return tf_fail(e, ENOMEM, "out of memory");
    }
    return 0;
}

static int key_url(const char *base, const char *key, char **out, tf_error *e)
{
    tf_buf b = { 0 };
    int rc = tf_buf_put(&b, base, strlen(base)) < 0 ? tf_fail(e, ENOMEM, "out of memory")
                                                    : append_key(&b, key, e);
    if (rc == 0 && tf_buf_put(&b, "", 1) < 0)
        rc = tf_fail(e, ENOMEM, "out of memory");
    if (rc < 0) {
        tf_buf_free(&b);
        return -1;
    }
    *out = (char *)b.data;
    return 0;
}

int tf_s3_key_url(const tf_s3_request *r, const char *key, char **url, tf_error *e)
{
    *url = NULL;
    if (!*key)
        return tf_fail(e, EINVAL, "%s: an empty object key", r->base);
    if (key_url(r->base, key, url, e) < 0) {
        tf_error_prefix(e, "%s%s", r->base, key);
        return -1;
    }
    return 0;
}

int tf_s3_resolve(const char *s3url, const char *endpoint, const char *region, tf_s3_request *out,
                  tf_error *e)
{
    *out = (tf_s3_request){ 0 };
    const char *bucket = s3url + 5, *slash = strchr(bucket, '/');
    if (!slash || !slash[1] || !valid_bucket(bucket, (size_t)(slash - bucket)))
        return tf_fail(e, EINVAL, "%s: expected s3://BUCKET/KEY (bucket: 3 to 63 of a-z 0-9 . -)", s3url);
    if (!endpoint)
        endpoint = env("AWS_ENDPOINT_URL_S3") ? env("AWS_ENDPOINT_URL_S3") : env("AWS_ENDPOINT_URL");
    if (!region)
        region = env("AWS_REGION") ? env("AWS_REGION") : env("AWS_DEFAULT_REGION");
    if (!region)
        region = DEFAULT_REGION;
    for (const char *p = region; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return tf_fail(e, EINVAL, "region \"%s\": expected a-z, 0-9 and -", region);
    if (build_base(bucket, (size_t)(slash - bucket), endpoint, region, &out->base, e) < 0 ||
        key_url(out->base, slash + 1, &out->url, e) < 0) {
        tf_s3_request_free(out);
        tf_error_prefix(e, "%s", s3url);
        return -1;
    }
    if (!(out->key = strdup(slash + 1))) {
        tf_s3_request_free(out);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    const char *id = env("AWS_ACCESS_KEY_ID"), *secret = env("AWS_SECRET_ACCESS_KEY");
    if (!id != !secret) {
        tf_s3_request_free(out);
        return tf_fail(e, EINVAL, "%s: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together", s3url);
    }
    if (id && (asprintf(&out->sigv4, "aws:amz:%s:s3", region) < 0 ||
               asprintf(&out->userpwd, "%s:%s", id, secret) < 0 ||
               (env("AWS_SESSION_TOKEN") && !(out->token = strdup(env("AWS_SESSION_TOKEN")))))) {
        tf_s3_request_free(out);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    return 0;
}

void tf_s3_request_free(tf_s3_request *r)
{
    free(r->url);
    free(r->base);
    free(r->key);
    free(r->sigv4);
    free(r->userpwd);
    free(r->token);
    *r = (tf_s3_request){ 0 };
}
