#include "store/shared_model.h"

#include <stdlib.h>
#include <string.h>

void tf_shared_model_fit(tf_shared_model *m, unsigned dtype, const uint8_t *const *src,
                         const uint8_t *const *ref, const size_t *len, size_t n)
{
    *m = (tf_shared_model){ 0 };
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += len[i];
    uint8_t *s = malloc(total ? total : 1), *r = malloc(total ? total : 1);
    tf_error ignored;
    if (s && r) {
        for (size_t i = 0, at = 0; i < n; at += len[i], i++) {
            memcpy(s + at, src[i], len[i]);
            memcpy(r + at, ref[i], len[i]);
        }
        m->made = tf_fit_model(TF_CODEC_ULP, s, r, total, dtype, NULL, &m->model) == 0 &&
                  tf_model_blob_make(&m->model, &m->blob, &ignored) == 0;
    }
    free(s);
    free(r);
    if (m->made) {
        tf_codec_ctx ctx = { .dtype = dtype, .model = m->model.data, .model_len = m->model.len };
        m->prepared = tf_codec_get(TF_CODEC_ULP)->prepare(&ctx);
    }
    m->given = (tf_chunk_model){ .data = m->model.data, .len = m->model.len,
                                 .share = n ? (m->blob.out.len + n - 1) / n : 0,
                                 .prepared = m->prepared };
}

void tf_shared_model_free(tf_shared_model *m)
{
    tf_buf_free(&m->model);
    tf_model_blob_free(&m->blob);
    if (m->prepared)
        tf_codec_get(TF_CODEC_ULP)->prepared_free(m->prepared);
    m->prepared = NULL;
}

bool tf_shared_model_used(const tf_shared_model *m, const tf_chunk_job *job)
{
    return m->made && job->codec == TF_CODEC_ULP && !job->model.len;
}
