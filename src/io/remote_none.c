/* A build without libcurl: remote archives are refused with the reason. */
#include <errno.h>

#include "io/remote.h"

int tf_remote_open(const char *url, const tf_remote_opts *o, tf_io **out, tf_error *e)
{
    (void)o;
    *out = NULL;
    return tf_fail(e, ENOTSUP, "%.200s: this trajfs was built without remote archives "
                               "(install libcurl4-openssl-dev and run configure again)", url);
}
