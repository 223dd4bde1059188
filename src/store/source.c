#include "store/source.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int tf_source_read(const tf_source *src, uint64_t off, void *out, size_t len, tf_error *e)
{
    if (off > src->size || len > src->size - off)
        return tf_fail(e, EINVAL, "%s: read past its end", src->name);
    if (src->growing && src->growing->await(src->growing->arg, off + len, e) < 0)
        return -1;
    uint8_t *p = out;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(src->fd, p + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            return tf_fail(e, err, "%s: %s", src->name,
                           n < 0 ? strerror(err) : "file shrank while reading");
        }
        got += (size_t)n;
    }
    return 0;
}

static int read_source(void *arg, uint64_t off, void *out, size_t len, tf_error *e)
{
    return tf_source_read(arg, off, out, len, e);
}

tf_file_source tf_source_as_file(const tf_source *src)
{
    return (tf_file_source){ .name = src->name, .size = src->size, .read = read_source,
                             .arg = (void *)src };
}
