#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "format/safetensors.h"
#include "fuzz_targets.h"

static void broken(const char *what, const char *name)
{
    fprintf(stderr, "tf_st_parse accepted a header that breaks its contract: %s \"%s\"\n", what,
            name);
    abort();
}

/* What the store relies on: tensors in data order tile the data section
 * exactly, each holding its shape's bytes, and every name finds itself. */
static void check_contract(const tf_st_header *h, uint64_t data_len)
{
    uint64_t pos = 0;
    for (size_t i = 0; i < h->ntensors; i++) {
        const tf_st_tensor *t = &h->tensors[i];
        const tf_dtype_info *dt = tf_dtype_get(t->dtype);
        uint64_t nelem = 1;
        for (uint32_t d = 0; d < t->ndim; d++)
            if (__builtin_mul_overflow(nelem, t->shape[d], &nelem))
                broken("shape overflows", t->name);
        if (!dt || t->dtype == TF_DT_NONE || nelem != t->nelem)
            broken("bad dtype or element count", t->name);
        if (t->begin != pos || t->end < t->begin || (t->end - t->begin) / dt->size != nelem ||
            (t->end - t->begin) % dt->size)
            broken("offsets do not tile the data", t->name);
        if (tf_st_find(h, t->name) == NULL || strcmp(tf_st_find(h, t->name)->name, t->name) != 0)
            broken("name not found", t->name);
        pos = t->end;
    }
    if (pos != data_len || h->data_len != data_len)
        broken("data section not covered", "");
}

int tf_fuzz_safetensors(const uint8_t *data, size_t size, tf_error *e)
{
    if (size < 8)
        return tf_fail(e, EINVAL, "not a safetensors input");
    uint64_t json_len = size - 8, data_len = tf_le64_get(data);
    if (data_len > UINT64_MAX - 8 - json_len)
        data_len = UINT64_MAX - 8 - json_len;
    tf_st_header h;
    if (tf_st_parse(data + 8, json_len, 8 + json_len + data_len, "fuzz.safetensors", &h, e) < 0)
        return -1;
    check_contract(&h, data_len);
    tf_st_free(&h);
    return 0;
}
