#include "common/malloc_tune.h"

#include <malloc.h>

void tf_malloc_reuse(void)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
}
