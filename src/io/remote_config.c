/* What every build has of remote archives: recognizing their URLs, and
 * the process's settings for them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/remote.h"
#include "io/remote_config.h"

static tf_remote_opts settings;
static bool configured;

bool tf_remote_is_url(const char *path)
{
    return strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0 ||
           strncmp(path, "s3://", 5) == 0;
}

static int copy_string(char **dst, const char *src, tf_error *e)
{
    *dst = NULL;
    if (src && !(*dst = strdup(src)))
        return tf_fail(e, ENOMEM, "out of memory");
    return 0;
}

int tf_remote_configure(const tf_remote_opts *o, tf_error *e)
{
    tf_remote_opts copy = *o;
    if (copy_string(&copy.cache_dir, o->cache_dir, e) < 0 ||
        copy_string(&copy.s3_endpoint, o->s3_endpoint, e) < 0 ||
        copy_string(&copy.s3_region, o->s3_region, e) < 0) {
        tf_remote_opts_free(&copy);
        return -1;
    }
    tf_remote_opts_free(&settings);
    settings = copy;
    configured = true;
    return 0;
}

int tf_remote_settings(const tf_remote_opts **out, tf_error *e)
{
    if (!configured) {
        tf_remote_opts o;
        tf_remote_opts_default(&o);
        const char *list = getenv("TRAJFS_REMOTE_OPTIONS");
        if (list && tf_remote_opts_parse(&o, list, e) < 0) {
            tf_remote_opts_free(&o);
            tf_error_prefix(e, "TRAJFS_REMOTE_OPTIONS");
            return -1;
        }
        settings = o;
        configured = true;
    }
    *out = &settings;
    return 0;
}
