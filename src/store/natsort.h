/* Natural order of paths: step-900 before step-1000. */
#ifndef TRAJFS_STORE_NATSORT_H
#define TRAJFS_STORE_NATSORT_H

#include <stddef.h>

/* strcmp-like; runs of digits compare by numeric value. */
int tf_natcmp(const char *a, const char *b);

#endif
