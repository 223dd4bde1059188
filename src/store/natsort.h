/* Natural order of paths (step-900 before step-1000) and the series key
 * that decides which files belong to one trajectory. */
#ifndef TRAJFS_STORE_NATSORT_H
#define TRAJFS_STORE_NATSORT_H

#include <stddef.h>

/* strcmp-like; runs of digits compare by numeric value. */
int tf_natcmp(const char *a, const char *b);

/* Writes the path with every run of digits replaced by '#' into out (at
 * most outsz bytes, NUL-terminated). Files whose keys are equal are
 * checkpoints of one series: run/step-900/model.safetensors and
 * run/step-1000/model.safetensors, or step-25.optim.safetensors and
 * step-50.optim.safetensors (but not step-50.safetensors). */
void tf_series_key(const char *path, char *out, size_t outsz);

#endif
