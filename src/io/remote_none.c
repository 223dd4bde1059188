/* A build without libcurl: remote archives are refused with the reason. */
#include <errno.h>
#include <stdlib.h>

#include "io/remote.h"
#include "io/url.h"

int tf_remote_open(const char *url, const tf_remote_opts *o, tf_io **out, tf_error *e)
{
    (void)o;
    *out = NULL;
    char *shown = tf_io_shown_name(url);
    tf_fail(e, ENOTSUP, "%.200s: this trajfs was built without remote archives "
                        "(install libcurl4-openssl-dev and run configure again)",
            shown ? shown : "a URL");
    free(shown);
    return -1;
}
