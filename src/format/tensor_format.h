/* Formats of tensor files. A format recognises a file by its first bytes
 * and parses it into the pieces of a catalog entry (format/catalog.h):
 * verbatim byte runs and tensor spans, with each tensor's identity (its
 * name). Everything above format/ works on pieces, never on a format's
 * bytes. Adding a format is one file and one row of the table in
 * tensor_format.c. */
#ifndef TRAJFS_FORMAT_TENSOR_FORMAT_H
#define TRAJFS_FORMAT_TENSOR_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "format/catalog.h"

/* Format ids (stored in catalog entries: never renumber). */
enum { TF_FORMAT_SAFETENSORS = 1, TF_FORMAT_TORCH_SAVE = 2 };

/* The bytes of a file being parsed. */
typedef struct {
    const char *name; /* for messages */
    uint64_t size;
    /* Reads exactly len bytes at off into out; 0, or -1 with the reason. */
    int (*read)(void *arg, uint64_t off, void *out, size_t len, tf_error *e);
    void *arg;
} tf_file_source;

/* Bytes of a file's start that recognising a format looks at. */
#define TF_FORMAT_HEAD_BYTES 16

typedef struct {
    uint8_t id;
    const char *name;   /* "safetensors" */
    const char *suffix; /* a file name ending in it claims the format
                           (NULL: none does) */
    /* Whether a file of size bytes starting with head (the first
     * TF_FORMAT_HEAD_BYTES bytes, fewer in a shorter file) looks like
     * this format. */
    bool (*recognise)(const uint8_t *head, size_t head_len, uint64_t size);
    /* Parses src into ent's tensor-file fields (format, pieces, tensors,
     * names); ent->path and ent->size are set. 0, or -1 with the reason:
     * EINVAL when the file is not a valid file of the format. */
    int (*parse)(const tf_file_source *src, tf_entry *ent, tf_error *e);
    /* The size a file of this format must have, from its first bytes
     * (read through src, whose size is only a bound): so that a file
     * still being written can be encoded before its end is there. 0, or
     * -1 when they do not tell it. NULL: the format's start never does. */
    int (*implied_size)(const tf_file_source *src, uint64_t *size, tf_error *e);
} tf_tensor_format;

/* The format with this id, or NULL. */
const tf_tensor_format *tf_tensor_format_get(unsigned id);

/* The format a file is of: the first whose recognise accepts its head,
 * else the one whose suffix its name ends in (to be parsed for the
 * error message), else NULL. *claimed says whether its name claims the
 * format found. */
const tf_tensor_format *tf_tensor_format_detect(const uint8_t *head, size_t head_len,
                                                uint64_t size, const char *name, bool *claimed);

/* Parses src with format f into ent and fills in the derived fields for
 * chunk_shift (tf_entry_layout). */
int tf_tensor_format_parse(const tf_tensor_format *f, const tf_file_source *src,
                           unsigned chunk_shift, tf_entry *ent, tf_error *e);

#endif
