/* The settings of remote archives: the same names as trajfs's -o options
 * and in the TRAJFS_REMOTE_OPTIONS variable (NAME=VALUE,...), which
 * trajpack reads. */
#ifndef TRAJFS_IO_REMOTE_OPTS_H
#define TRAJFS_IO_REMOTE_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct {
    char *cache_dir;             /* cache_dir=DIR: disk cache, NULL for none */
    uint64_t cache_max;          /* cache_max=SIZE: its bound (all objects) */
    unsigned timeout_ms;         /* timeout=SECONDS: a transfer stalled, or slower
                                    than min_speed, that long fails */
    unsigned min_speed;          /* min_speed=BYTES: a second, over timeout */
    unsigned connect_timeout_ms; /* connect_timeout=SECONDS */
    unsigned retries;            /* retries=N: attempts after the first */
    unsigned parallel;           /* parallel=N: transfers at once */
    char *s3_endpoint;           /* s3_endpoint=URL (else AWS_ENDPOINT_URL) */
    char *s3_region;             /* s3_region=NAME (else AWS_REGION) */
    bool s3_unconditional;       /* s3_unconditional=1: write to a store that
                                    ignores If-None-Match, one writer at a time
                                    being the user's to ensure (io/s3_writer.h) */
} tf_remote_opts;

void tf_remote_opts_default(tf_remote_opts *o);
/* Sets NAME to VALUE: ENOENT when NAME is not a remote setting, EINVAL
 * for a bad value, each with a message. */
int tf_remote_opts_set(tf_remote_opts *o, const char *name, const char *value, tf_error *e);
/* Applies "NAME=VALUE,NAME=VALUE". */
int tf_remote_opts_parse(tf_remote_opts *o, const char *list, tf_error *e);
void tf_remote_opts_free(tf_remote_opts *o);

#endif
