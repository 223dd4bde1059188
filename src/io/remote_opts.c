#include "io/remote_opts.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/size_arg.h"

#define CACHE_MAX_DEFAULT ((uint64_t)4 << 30)
#define TIMEOUT_MS_DEFAULT 30000
/* Slower than this over the timeout's window, a link is as good as
 * stalled. */
#define MIN_SPEED_DEFAULT 1024
#define CONNECT_TIMEOUT_MS_DEFAULT 10000
#define RETRIES_DEFAULT 4
#define RETRIES_MAX 100
/* Enough transfers at once to cover a chain and the prefetcher's
 * chunks on a far link; HTTP/1.1 servers allow about as many
 * connections per client. */
#define PARALLEL_DEFAULT 16
#define PARALLEL_MAX 256
#define SECONDS_MAX 3600

void tf_remote_opts_default(tf_remote_opts *o)
{
    *o = (tf_remote_opts){
        .cache_max = CACHE_MAX_DEFAULT,
        .timeout_ms = TIMEOUT_MS_DEFAULT,
        .min_speed = MIN_SPEED_DEFAULT,
        .connect_timeout_ms = CONNECT_TIMEOUT_MS_DEFAULT,
        .retries = RETRIES_DEFAULT,
        .parallel = PARALLEL_DEFAULT,
    };
}

/* Seconds, with up to three decimals, into milliseconds (> 0). */
static bool parse_seconds(const char *v, unsigned *ms)
{
    char *end;
    errno = 0;
    double s = strtod(v, &end);
    if (errno || end == v || *end || !(s >= 0.001 && s <= SECONDS_MAX))
        return false;
    *ms = (unsigned)(s * 1000 + 0.5);
    return true;
}

static bool parse_count(const char *v, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || end == v || *end || *v == '-' || n < lo || n > hi)
        return false;
    *out = (unsigned)n;
    return true;
}

static int set_string(char **dst, const char *v, tf_error *e)
{
    char *copy = strdup(v);
    if (!copy)
        return tf_fail(e, ENOMEM, "out of memory");
    free(*dst);
    *dst = copy;
    return 0;
}

int tf_remote_opts_set(tf_remote_opts *o, const char *name, const char *value, tf_error *e)
{
    static const char *const names[] = { "cache_dir", "cache_max", "timeout", "connect_timeout",
                                         "retries", "parallel", "s3_endpoint", "s3_region",
                                         "min_speed", "s3_unconditional" };
    size_t which = 0;
    while (which < sizeof names / sizeof *names && strcmp(name, names[which]))
        which++;
    if (which == sizeof names / sizeof *names)
        return tf_fail(e, ENOENT, "not a remote setting");
    if (!value || !*value)
        return tf_fail(e, EINVAL, "needs a value (%s=...)", name);
    size_t size;
    bool ok;
    switch (which) {
    case 0: return set_string(&o->cache_dir, value, e);
    case 1:
        ok = tf_parse_size(value, &size) == 0 && size > 0;
        o->cache_max = ok ? size : o->cache_max;
        return ok ? 0 : tf_fail(e, EINVAL, "expected bytes, optionally with K, M, G or T");
    case 2: ok = parse_seconds(value, &o->timeout_ms); break;
    case 3: ok = parse_seconds(value, &o->connect_timeout_ms); break;
    case 4: ok = parse_count(value, 0, RETRIES_MAX, &o->retries); break;
    case 5: ok = parse_count(value, 1, PARALLEL_MAX, &o->parallel); break;
    case 6: return set_string(&o->s3_endpoint, value, e);
    case 7: return set_string(&o->s3_region, value, e);
    case 9:
        if (strcmp(value, "0") && strcmp(value, "1"))
            return tf_fail(e, EINVAL, "expected 0 or 1");
        o->s3_unconditional = value[0] == '1';
        return 0;
    default:
        ok = tf_parse_size(value, &size) == 0 && size > 0 && size <= UINT_MAX;
        o->min_speed = ok ? (unsigned)size : o->min_speed;
        return ok ? 0 : tf_fail(e, EINVAL, "expected bytes a second, optionally with K or M");
    }
    if (!ok)
        return which <= 3 ? tf_fail(e, EINVAL, "expected seconds between 0.001 and %d", SECONDS_MAX)
                          : tf_fail(e, EINVAL, "expected a number from %d to %d", which == 4 ? 0 : 1,
                                    which == 4 ? RETRIES_MAX : PARALLEL_MAX);
    return 0;
}

int tf_remote_opts_parse(tf_remote_opts *o, const char *list, tf_error *e)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return tf_fail(e, ENOMEM, "out of memory");
    int rc = 0;
    for (char *item = strtok_r(copy, ",", &save); rc == 0 && item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq)
            *eq = '\0';
        if (tf_remote_opts_set(o, item, eq ? eq + 1 : NULL, e) < 0) {
            tf_error_prefix(e, "%s", item);
            rc = -1;
        }
    }
    free(copy);
    return rc;
}

void tf_remote_opts_free(tf_remote_opts *o)
{
    free(o->cache_dir);
    free(o->s3_endpoint);
    free(o->s3_region);
    *o = (tf_remote_opts){ 0 };
}
