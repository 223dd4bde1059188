/* Error reporting: every fallible function takes a tf_error and returns -1
 * after writing a one-line, human-readable message into it. */
#ifndef TRAJFS_COMMON_ERROR_H
#define TRAJFS_COMMON_ERROR_H

#include <stddef.h>

typedef struct {
    char msg[512];
    int  errnum; /* errno-style category (EIO, EINVAL, ENOSPC, ...) or 0 */
} tf_error;

/* Formats the message into e (when e is non-NULL) and returns -1. */
int tf_fail(tf_error *e, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to the message already in e, keeping errnum. */
void tf_error_prefix(tf_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
