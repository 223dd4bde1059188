/* A build without libcurl: remote archives are refused with the reason. */
#include <errno.h>

#include "io/remote.h"

int tf_remote_open(const char *url, tf_remote **out, tf_error *e)
{
    *out = NULL;
    return tf_fail(e, ENOTSUP, "%.200s: this trajfs was built without remote archives "
                               "(install libcurl4-openssl-dev and run configure again)", url);
}

/* Unreachable: no tf_remote is ever opened. */
void tf_remote_close(tf_remote *r) { (void)r; }
void tf_remote_cancel(tf_remote *r) { (void)r; }
uint64_t tf_remote_size(tf_remote *r) { (void)r; return 0; }
int tf_remote_refresh(tf_remote *r, uint64_t *size, bool *changed, tf_error *e)
{
    (void)r, (void)size, (void)changed;
    return tf_fail(e, ENOTSUP, "no remote archives in this build");
}
void tf_remote_anchor(tf_remote *r, uint64_t end, const uint8_t *bytes, size_t n)
{
    (void)r, (void)end, (void)bytes, (void)n;
}
int tf_remote_pread(tf_remote *r, uint64_t off, void *buf, size_t len, tf_error *e)
{
    (void)r, (void)off, (void)buf, (void)len;
    return tf_fail(e, ENOTSUP, "no remote archives in this build");
}
void tf_remote_will_need(tf_remote *r, uint64_t off, uint64_t len) { (void)r, (void)off, (void)len; }
void tf_remote_forget(tf_remote *r, uint64_t off, uint64_t len) { (void)r, (void)off, (void)len; }
