#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tf_fail(tf_error *e, int errnum, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->errnum = errnum;
    }
    return -1;
}

void tf_error_prefix(tf_error *e, const char *fmt, ...)
{
    if (!e)
        return;
    char old[sizeof e->msg];
    memcpy(old, e->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n < sizeof e->msg ? (size_t)n : sizeof e->msg - 1;
    /* Keep as much of the old message as fits after "prefix: ". */
    if (used + 2 < sizeof e->msg) {
        memcpy(e->msg + used, ": ", 2);
        size_t room = sizeof e->msg - used - 3;
        size_t len = strnlen(old, room);
        memcpy(e->msg + used + 2, old, len);
        e->msg[used + 2 + len] = '\0';
    }
}
