/* s3://BUCKET/KEY: the HTTP request that reads the object. Endpoint,
 * region and credentials come from the usual AWS variables
 * (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION or
 * AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN); an endpoint or region given as an option wins.
 * Without keys the request is anonymous; with them it is signed with
 * SigV4 (libcurl signs each request). */
#ifndef TRAJFS_IO_S3_H
#define TRAJFS_IO_S3_H

#include <stdbool.h>

#include "common/error.h"

typedef struct {
    char *url;     /* path-style under an endpoint, else virtual-hosted AWS */
    char *base;    /* the bucket's URL, up to and including the '/' before a key */
    char *key;     /* the object's key, as given in s3://BUCKET/KEY */
    char *sigv4;   /* "aws:amz:REGION:s3", NULL when anonymous */
    char *userpwd; /* "KEY_ID:SECRET" */
    char *token;   /* NULL when none */
} tf_s3_request;

bool tf_s3_is_url(const char *s);
/* endpoint and region may be NULL (then the environment's). */
int tf_s3_resolve(const char *s3url, const char *endpoint, const char *region, tf_s3_request *out,
                  tf_error *e);
void tf_s3_request_free(tf_s3_request *r);
/* The URL of the object `key` (any key of the same bucket), percent-
 * encoded as SigV4 canonicalizes it: malloc'd. */
int tf_s3_key_url(const tf_s3_request *r, const char *key, char **url, tf_error *e);

#endif
