/* Strict safetensors header parser.
 *
 * A safetensors file is an 8-byte little-endian length N, N bytes of JSON
 * (optionally padded with whitespace), then the data section. The JSON is an
 * object mapping tensor names to {"dtype", "shape", "data_offsets"} plus an
 * optional "__metadata__" object of strings. Offsets are relative to the
 * start of the data section, and the tensors must tile it exactly: no
 * overlap, no gap, no trailing bytes. Anything else is rejected with a
 * message naming the file and the offending key. */
#ifndef TRAJFS_FORMAT_SAFETENSORS_H
#define TRAJFS_FORMAT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/dtype.h"
#include "format/tensor_format.h"

typedef struct {
    char *name;          /* decoded UTF-8, NUL-terminated; NUL inside a name is rejected */
    tf_dtype dtype;
    uint32_t ndim;
    uint64_t *shape;     /* ndim entries (NULL when ndim == 0: a 0-d scalar has 1 element) */
    uint64_t nelem;      /* product of shape */
    uint64_t begin, end; /* data_offsets, relative to the start of the data section */
} tf_st_tensor;

typedef struct {
    uint64_t header_len;   /* N, the JSON length read from the 8-byte prefix */
    uint64_t data_len;     /* file size - 8 - N */
    size_t ntensors;
    tf_st_tensor *tensors; /* in data order: sorted by (begin, end), ties (zero-length tensors) keep header order */
    size_t nmeta;
    char **meta_keys, **meta_values; /* __metadata__, in document order */
} tf_st_header;

#define TF_ST_MAX_HEADER (100u << 20) /* 100 MB */

/* Parses the JSON header bytes (the N bytes after the 8-byte prefix) of a file whose
 * total size is file_size. fname only appears in error messages.
 * On failure *h is left empty (tf_st_free on it is a no-op). */
int tf_st_parse(const uint8_t *json, size_t json_len, uint64_t file_size,
                const char *fname, tf_st_header *h, tf_error *e);
/* Reads the 8-byte little-endian length and the header from fd (pread from offset 0),
 * checks the length bound against TF_ST_MAX_HEADER and file_size, and parses it.
 * On success *json_out is a malloc'd copy of the verbatim header bytes (the caller frees). */
int tf_st_read(int fd, uint64_t file_size, const char *fname, uint8_t **json_out,
               tf_st_header *h, tf_error *e);
/* The same, reading the file through src. */
int tf_st_read_source(const tf_file_source *src, uint8_t **json_out, tf_st_header *h, tf_error *e);
void tf_st_free(tf_st_header *h);

/* safetensors as a tensor-file format: the header one verbatim piece,
 * each tensor a piece, its name its identity. */
extern const tf_tensor_format tf_safetensors_format;
/* Linear search by name. NULL if absent. */
const tf_st_tensor *tf_st_find(const tf_st_header *h, const char *name);
/* Byte offset of a tensor's data within the file: 8 + header_len + begin. */
static inline uint64_t tf_st_data_offset(const tf_st_header *h, const tf_st_tensor *t)
{
    return 8 + h->header_len + t->begin;
}

#endif
