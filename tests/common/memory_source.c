#include "memory_source.h"

#include <errno.h>
#include <string.h>

int tf_memory_read(void *arg, uint64_t off, void *out, size_t len, tf_error *e)
{
    const tf_memory_file *m = arg;
    if (off > m->size || len > m->size - off)
        return tf_fail(e, EINVAL, "read past the end of the file");
    memcpy(out, m->data + off, len);
    return 0;
}
