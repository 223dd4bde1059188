#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

uint8_t *bench_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        data = size >= 0 ? malloc((size_t)size + 1) : NULL;
        if (data && (fseek(f, 0, SEEK_SET) != 0 ||
                     fread(data, 1, (size_t)size, f) != (size_t)size)) {
            free(data);
            data = NULL;
        }
        *len = size >= 0 ? (size_t)size : 0;
    }
    fclose(f);
    return data;
}

uint8_t *bench_read_safetensors(const char *path, size_t *len, tf_st_header *h)
{
    uint8_t *file = bench_read_file(path, len);
    tf_error e = { 0 };
    if (!file || *len < 8) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(file);
        return NULL;
    }
    uint64_t json_len = tf_le64_get(file);
    if (json_len > *len - 8 || tf_st_parse(file + 8, json_len, *len, path, h, &e) < 0) {
        fprintf(stderr, "%s: %s\n", path, e.msg[0] ? e.msg : "bad header");
        free(file);
        return NULL;
    }
    return file;
}

double bench_thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
