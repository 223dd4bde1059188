/* Checks of a stored file against its own bytes, for `trajpack verify`
 * and `trajpack stats`: its bytes parsed again by its format. */
#include "store/entry_check.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/dtype.h"
#include "format/tensor_format.h"

typedef struct {
    tf_reader_ctx *r;
    const tf_entry *ent;
} entry_source;

static int read_entry(void *arg, uint64_t off, void *out, size_t len, tf_error *e)
{
    const entry_source *s = arg;
    ssize_t n = tf_reader_pread(s->r, s->ent, off, len, out, e);
    if (n < 0)
        return -1;
    return (size_t)n == len ? 0 : tf_fail(e, EIO, "%s: short read at %llu", s->ent->path,
                                          (unsigned long long)off);
}

/* The first difference between two layouts of one file, or 0. */
static int compare_layouts(const tf_entry *stored, const tf_entry *parsed, tf_error *e)
{
    if (parsed->npieces != stored->npieces || parsed->ntensors != stored->ntensors)
        return tf_fail(e, EIO, "%s: the file's bytes describe %llu pieces and %llu tensors, the "
                       "catalog %llu and %llu", stored->path, (unsigned long long)parsed->npieces,
                       (unsigned long long)parsed->ntensors, (unsigned long long)stored->npieces,
                       (unsigned long long)stored->ntensors);
    for (uint64_t i = 0; i < stored->npieces; i++) {
        const tf_piece *a = &stored->pieces[i], *b = &parsed->pieces[i];
        if (a->len != b->len || a->tensor != b->tensor)
            return tf_fail(e, EIO, "%s: piece %llu differs from what the file's bytes say",
                           stored->path, (unsigned long long)i);
    }
    for (uint64_t t = 0; t < stored->ntensors; t++)
        if (stored->tensors[t].dtype != parsed->tensors[t].dtype ||
            strcmp(tf_tensor_name(stored, t), tf_tensor_name(parsed, t)) != 0)
            return tf_fail(e, EIO, "%s: tensor %llu: the file's bytes say %s \"%s\", the catalog "
                           "%s \"%s\"", stored->path, (unsigned long long)t,
                           tf_dtype_get(parsed->tensors[t].dtype)->name, tf_tensor_name(parsed, t),
                           tf_dtype_get(stored->tensors[t].dtype)->name, tf_tensor_name(stored, t));
    return 0;
}

int tf_reader_check_layout(tf_reader_ctx *r, const tf_entry *ent, tf_error *e)
{
    const tf_tensor_format *f = tf_entry_is_tensor_file(ent) ? tf_tensor_format_get(ent->format) : NULL;
    if (!f)
        return 0;
    entry_source s = { r, ent };
    tf_file_source src = { .name = ent->path, .size = ent->size, .read = read_entry, .arg = &s };
    tf_entry parsed = { .kind = TF_ENTRY_TENSORS, .path = ent->path, .size = ent->size };
    int rc = tf_tensor_format_parse(f, &src, tf_archive_chunk_shift(tf_reader_archive(r)), &parsed, e);
    if (rc < 0)
        tf_error_prefix(e, "%s does not parse as %s", ent->path, f->name);
    else
        rc = compare_layouts(ent, &parsed, e);
    parsed.path = NULL; /* ent's */
    tf_entry_free(&parsed);
    return rc;
}

int tf_reader_why_opaque(tf_reader_ctx *r, const tf_entry *ent, tf_error *why)
{
    uint8_t head[TF_FORMAT_HEAD_BYTES];
    size_t n = ent->size < sizeof head ? (size_t)ent->size : sizeof head;
    bool claimed;
    if (ent->kind != TF_ENTRY_FILE || tf_reader_pread(r, ent, 0, n, head, why) != (ssize_t)n)
        return 0;
    const tf_tensor_format *f = tf_tensor_format_detect(head, n, ent->size, ent->path, &claimed);
    if (!f)
        return 0;
    entry_source s = { r, ent };
    tf_file_source src = { .name = ent->path, .size = ent->size, .read = read_entry, .arg = &s };
    tf_entry parsed = { .kind = TF_ENTRY_TENSORS, .path = ent->path, .size = ent->size };
    if (tf_tensor_format_parse(f, &src, tf_archive_chunk_shift(tf_reader_archive(r)), &parsed, why) == 0)
        tf_fail(why, 0, "%s: a valid %s file, stored as opaque bytes by an earlier release",
                ent->path, f->name);
    parsed.path = NULL; /* ent's */
    tf_entry_free(&parsed);
    return 1;
}
