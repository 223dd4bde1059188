#include "store/source.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int map_all(tf_source *src, tf_error *e)
{
    if (src->size > SIZE_MAX)
        return tf_fail(e, EFBIG, "%s: too large to map", src->name);
    void *p = mmap(NULL, (size_t)src->size, PROT_READ, MAP_SHARED, src->fd, 0);
    if (p == MAP_FAILED)
        return tf_fail(e, errno, "%s: cannot map: %s", src->name, strerror(errno));
    src->data = p;
    return 0;
}

static int read_all(tf_source *src, tf_error *e)
{
    uint64_t size = src->size;
    uint8_t *data = size <= SIZE_MAX ? malloc(size ? (size_t)size : 1) : NULL;
    if (!data)
        return tf_fail(e, ENOMEM, "%s: out of memory for %llu bytes", src->name,
                       (unsigned long long)size);
    uint64_t got = 0;
    while (got < size) {
        ssize_t n = pread(src->fd, data + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            free(data);
            return tf_fail(e, err, "%s: %s", src->name,
                           n < 0 ? strerror(err) : "file shrank while reading");
        }
        got += (uint64_t)n;
    }
    src->data = data;
    return 0;
}

int tf_source_load(tf_source *src, tf_error *e)
{
    static uint8_t empty[1];
    if (src->size == 0) {
        src->data = empty;
        src->map = false;
        return 0;
    }
    return src->map ? map_all(src, e) : read_all(src, e);
}

void tf_source_unload(tf_source *src)
{
    if (src->data && src->size) {
        if (src->map)
            munmap(src->data, (size_t)src->size);
        else
            free(src->data);
    }
    src->data = NULL;
}
