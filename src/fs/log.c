#include "fs/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <fuse3/fuse_log.h>

#include "common/hash.h"

/* Distinct error messages remembered for fs_log_error_once; past this
 * many, further errors are logged every time (never silently dropped). */
#define SEEN_MAX 1024

static bool to_syslog;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[SEEN_MAX];
static size_t nseen;

static void vlog(int prio, const char *fmt, va_list ap)
{
    if (to_syslog) {
        vsyslog(prio, fmt, ap);
        return;
    }
    fputs("trajfs: ", stderr);
    vfprintf(stderr, fmt, ap);
    size_t n = strlen(fmt);
    if (!n || fmt[n - 1] != '\n')
        fputc('\n', stderr);
}

static void from_libfuse(enum fuse_log_level level, const char *fmt, va_list ap)
{
    /* libfuse's levels are syslog's, in the same order. */
    vlog(LOG_EMERG + (int)level, fmt, ap);
}

void fs_log_use_syslog(void)
{
    openlog("trajfs", LOG_PID, LOG_DAEMON);
    to_syslog = true;
    fuse_set_log_func(from_libfuse);
}

void fs_log(int prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(prio, fmt, ap);
    va_end(ap);
}

bool fs_log_error_once(const char *msg)
{
    uint64_t h = tf_hash64(msg, strlen(msg));
    pthread_mutex_lock(&seen_lock);
    bool fresh = true;
    for (size_t i = 0; i < nseen && fresh; i++)
        fresh = seen[i] != h;
    if (fresh && nseen < SEEN_MAX)
        seen[nseen++] = h;
    pthread_mutex_unlock(&seen_lock);
    if (fresh)
        fs_log(LOG_ERR, "%s", msg);
    return fresh;
}
