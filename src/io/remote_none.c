/* A build without libcurl: remote archives are refused with the reason. */
#include <errno.h>
#include <stdlib.h>

#include "io/remote.h"
#include "io/s3_writer.h"
#include "io/url.h"

static int refuse(const char *url, tf_error *e)
{
    char *shown = tf_io_shown_name(url);
    tf_fail(e, ENOTSUP, "%.200s: this trajfs was built without remote archives "
                        "(install libcurl4-openssl-dev and run configure again)",
            shown ? shown : "a URL");
    free(shown);
    return -1;
}

int tf_remote_open(const char *url, const tf_remote_opts *o, tf_io **out, tf_error *e)
{
    (void)o;
    *out = NULL;
    return refuse(url, e);
}

struct tf_segments *tf_remote_segments(tf_io *io)
{
    (void)io;
    return NULL;
}

int tf_s3_writer_open(const char *url, const tf_remote_opts *o, tf_io **out, tf_error *e)
{
    (void)o;
    *out = NULL;
    return refuse(url, e);
}

int tf_s3_writer_create(const char *url, const tf_remote_opts *o, const void *bytes, size_t len,
                        tf_error *e)
{
    (void)o, (void)bytes, (void)len;
    return refuse(url, e);
}
