#include "format/tensor_format.h"

#include <string.h>

#include "format/safetensors.h"
#include "format/torch_save.h"

static const tf_tensor_format *const formats[] = {
    &tf_safetensors_format,
    &tf_torch_save_format,
};

#define NFORMATS (sizeof formats / sizeof formats[0])

const tf_tensor_format *tf_tensor_format_get(unsigned id)
{
    for (size_t i = 0; i < NFORMATS; i++)
        if (formats[i]->id == id)
            return formats[i];
    return NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
    if (!suffix)
        return false;
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

const tf_tensor_format *tf_tensor_format_detect(const uint8_t *head, size_t head_len,
                                                uint64_t size, const char *name, bool *claimed)
{
    const tf_tensor_format *named = NULL;
    for (size_t i = 0; i < NFORMATS; i++) {
        if (ends_with(name, formats[i]->suffix) && !named)
            named = formats[i];
        if (formats[i]->recognise(head, head_len, size)) {
            *claimed = ends_with(name, formats[i]->suffix);
            return formats[i];
        }
    }
    *claimed = named != NULL;
    return named;
}

int tf_tensor_format_parse(const tf_tensor_format *f, const tf_file_source *src,
                           unsigned chunk_shift, tf_entry *ent, tf_error *e)
{
    uint64_t nchunks;
    if (f->parse(src, ent, e) < 0)
        return -1;
    ent->format = f->id;
    if (tf_entry_layout(ent, chunk_shift, &nchunks, e) < 0)
        return -1;
    ent->nchunks = nchunks;
    return 0;
}
