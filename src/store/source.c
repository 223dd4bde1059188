#include "store/source.h"

#include <errno.h>
#include <string.h>

#include "common/full_io.h"

int tf_source_read(const tf_source *src, uint64_t off, void *out, size_t len, tf_error *e)
{
    if (off > src->size || len > src->size - off)
        return tf_fail(e, EINVAL, "%s: read past its end", src->name);
    if (src->growing && src->growing->await(src->growing->arg, off + len, e) < 0)
        return -1;
    ssize_t n = tf_pread_full(src->fd, out, len, off);
    if (n < 0)
        return tf_fail(e, errno, "%s: %s", src->name, strerror(errno));
    if ((size_t)n < len)
        return tf_fail(e, EIO, "%s: file shrank while reading", src->name);
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
