/* The choice of a codec per chunk (store/encode.h): every codec of the
 * table competes that the job gives what it declares it needs, the
 * smallest output wins counting its share of a stored model, a tie goes
 * to the codec that decodes alone; and models fitted through the table. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/codec.h"
#include "codec/prog/prog.h"
#include "common/dtype.h"
#include "store/encode.h"

enum { N = 4096, LEN = 4 * N };

/* A tensor and what the writer would fit to it: float32 elements 0, 1,
 * 2, ... (a short program; bytegroup does much worse), a reference equal
 * to it (a delta shorter still), the prog and ulp models. */
typedef struct {
    uint8_t src[LEN], ref[LEN];
    tf_buf prog, ulp;
} tensor;

static tensor *counting_tensor(void)
{
    tensor *t = calloc(1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < N; i++) {
        float f = (float)i;
        memcpy(t->src + 4 * i, &f, 4);
    }
    memcpy(t->ref, t->src, LEN);
    ck_assert_int_eq(tf_fit_model(TF_CODEC_PROG, t->src, NULL, LEN, TF_DT_F32, NULL, &t->prog), 0);
    ck_assert_int_eq(tf_fit_model(TF_CODEC_ULP, t->src, t->ref, LEN, TF_DT_F32, NULL, &t->ulp), 0);
    return t;
}

static void tensor_free(tensor *t)
{
    tf_buf_free(&t->prog);
    tf_buf_free(&t->ulp);
    free(t);
}

static tf_chunk_model model_of(const tf_buf *model, size_t share)
{
    return (tf_chunk_model){ .data = model->data, .len = model->len, .share = share };
}

/* The size of codec id's encoding of the tensor with what it needs. */
static size_t size_by(unsigned id, const tensor *t)
{
    const tf_buf *model = id == TF_CODEC_PROG ? &t->prog : id == TF_CODEC_ULP ? &t->ulp : NULL;
    tf_codec_ctx ctx = { .dtype = TF_DT_F32, .ref = t->ref, .ref_len = LEN,
                         .model = model ? model->data : NULL, .model_len = model ? model->len : 0 };
    tf_buf out = { 0 };
    tf_error e;
    ck_assert_int_eq(tf_codec_get(id)->encode(t->src, LEN, &ctx, &out, &e), 0);
    size_t n = out.len;
    tf_buf_free(&out);
    return n;
}

/* Encodes the job and checks that its output decodes, with the
 * reference and the model of the codec chosen, to the chunk; returns
 * the codec. */
static unsigned choose(tf_chunk_job *job)
{
    tf_error e;
    ck_assert_msg(tf_encode_chunk(job, &e) == 0, "%s", e.msg);
    const tf_codec *c = tf_codec_get(job->codec);
    ck_assert_ptr_nonnull(c);
    const tf_chunk_model *m = &job->models[job->codec];
    tf_codec_ctx ctx = { .dtype = job->dtype, .ref = job->ref, .ref_len = job->ref ? job->len : 0,
                         .model = m->data, .model_len = m->len };
    uint8_t *dst = malloc(job->len ? job->len : 1);
    ck_assert_ptr_nonnull(dst);
    ck_assert_msg(c->decode(job->out.data, job->out.len, &ctx, dst, job->len, &e) == 0,
                  "%s: %s", c->name, e.msg);
    ck_assert(memcmp(dst, job->src, job->len) == 0);
    free(dst);
    tf_buf_free(&job->out);
    return job->codec;
}

/* ---- standalone codecs --------------------------------------------------- */

START_TEST(chunk_alone_gets_its_dtype_codec)
{
    static const char text[] = "{\"lr\": 0.001, \"betas\": [0.9, 0.999], \"lr\": 0.001, "
                               "\"betas\": [0.9, 0.999], \"lr\": 0.001}";
    tf_chunk_job job = { .src = (const uint8_t *)text, .len = sizeof text, .dtype = TF_DT_NONE };
    ck_assert_uint_eq(choose(&job), TF_CODEC_ZSTD);

    uint8_t noise[1000];
    rng_state = 3;
    fill_random(noise, sizeof noise);
    job = (tf_chunk_job){ .src = noise, .len = sizeof noise, .dtype = TF_DT_NONE };
    ck_assert_uint_eq(choose(&job), TF_CODEC_RAW);
    job = (tf_chunk_job){ .src = noise, .len = 0, .dtype = TF_DT_BF16 };
    ck_assert_uint_eq(choose(&job), TF_CODEC_RAW);

    tensor *t = counting_tensor();
    job = (tf_chunk_job){ .src = t->src, .len = LEN, .dtype = TF_DT_F32 };
    ck_assert_uint_eq(choose(&job), TF_CODEC_BYTEGROUP);
    tensor_free(t);
}
END_TEST

/* ---- codecs that need a model or a reference ----------------------------- */

START_TEST(fitted_codecs_compete_with_what_they_need)
{
    tensor *t = counting_tensor();
    ck_assert_uint_lt(size_by(TF_CODEC_ULP, t), size_by(TF_CODEC_PROG, t));
    ck_assert_uint_lt(size_by(TF_CODEC_PROG, t), size_by(TF_CODEC_BYTEGROUP, t));
    tf_chunk_job job = { .src = t->src, .len = LEN, .dtype = TF_DT_F32 };
    job.models[TF_CODEC_PROG] = model_of(&t->prog, 0);
    ck_assert_uint_eq(choose(&job), TF_CODEC_PROG);
    /* a delta codec's model is no use without a reference */
    job.models[TF_CODEC_ULP] = model_of(&t->ulp, 0);
    ck_assert_uint_eq(choose(&job), TF_CODEC_PROG);
    job.ref = t->ref;
    ck_assert_uint_eq(choose(&job), TF_CODEC_ULP);
    /* nor a reference without the model */
    job.models[TF_CODEC_ULP] = (tf_chunk_model){ 0 };
    ck_assert_uint_eq(choose(&job), TF_CODEC_PROG);
    job.models[TF_CODEC_PROG] = (tf_chunk_model){ 0 };
    ck_assert_uint_eq(choose(&job), TF_CODEC_BYTEGROUP);
    tensor_free(t);
}
END_TEST

/* ulp stores its model and is charged its share; prog does not and is
 * not. At equal cost the codec whose chunk decodes alone wins. */
START_TEST(stored_models_are_charged_and_ties_go_to_decoding_alone)
{
    tensor *t = counting_tensor();
    size_t ulp = size_by(TF_CODEC_ULP, t), prog = size_by(TF_CODEC_PROG, t),
           bytegroup = size_by(TF_CODEC_BYTEGROUP, t);
    tf_chunk_job job = { .src = t->src, .len = LEN, .dtype = TF_DT_F32, .ref = t->ref };
    job.models[TF_CODEC_PROG] = model_of(&t->prog, (size_t)1 << 20);
    job.models[TF_CODEC_ULP] = model_of(&t->ulp, prog - ulp - 1);
    ck_assert_uint_eq(choose(&job), TF_CODEC_ULP);
    job.models[TF_CODEC_ULP].share = prog - ulp;
    ck_assert_uint_eq(choose(&job), TF_CODEC_PROG);

    job.models[TF_CODEC_PROG] = (tf_chunk_model){ 0 };
    job.models[TF_CODEC_ULP].share = bytegroup - ulp - 1;
    ck_assert_uint_eq(choose(&job), TF_CODEC_ULP);
    job.models[TF_CODEC_ULP].share = bytegroup - ulp;
    ck_assert_uint_eq(choose(&job), TF_CODEC_BYTEGROUP);
    tensor_free(t);
}
END_TEST

/* ---- fitting through the table ------------------------------------------- */

START_TEST(fit_model_goes_through_the_table)
{
    tensor *t = counting_tensor();
    tf_buf model = { 0 }, direct = { 0 };
    tf_error e;
    /* with prog's options */
    tf_prog_fit_opts one = { .budget = 1 };
    ck_assert_int_eq(tf_fit_model(TF_CODEC_PROG, t->src, NULL, LEN, TF_DT_F32, &one, &model), 0);
    ck_assert_int_eq(tf_prog_fit(t->src, LEN, TF_DT_F32, &one, &direct, &e), 0);
    ck_assert(model.len == direct.len && memcmp(model.data, direct.data, model.len) == 0);
    ck_assert(model.len != t->prog.len || memcmp(model.data, t->prog.data, model.len) != 0);
    /* ulp's model against the reference */
    ck_assert_int_eq(tf_fit_model(TF_CODEC_ULP, t->src, t->ref, LEN, TF_DT_F32, NULL, &model), 0);
    ck_assert(model.len == t->ulp.len && memcmp(model.data, t->ulp.data, model.len) == 0);
    /* no fit step, no such codec, a delta codec without its reference */
    ck_assert_int_eq(tf_fit_model(TF_CODEC_ZSTD, t->src, NULL, LEN, TF_DT_F32, NULL, &model), -1);
    ck_assert_int_eq(tf_fit_model(TF_CODEC_COUNT, t->src, NULL, LEN, TF_DT_F32, NULL, &model), -1);
    ck_assert_int_eq(tf_fit_model(TF_CODEC_ULP, t->src, NULL, LEN, TF_DT_F32, NULL, &model), -1);
    tf_buf_free(&model);
    tf_buf_free(&direct);
    tensor_free(t);
}
END_TEST

/* Two chunk jobs encoded as a pair get what each gets alone: side by
 * side with a shared, prepared ULP model; one after the other with a
 * model fitted on each chunk (then also the model). */
START_TEST(pair_as_is_each_as)
{
    tensor *t = counting_tensor();
    for (size_t i = 0; i < N; i++) { /* a delta with something to code */
        float f = (float)i * 1.0001f;
        memcpy(t->ref + 4 * i, &f, 4);
    }
    tf_buf model = { 0 };
    ck_assert_int_eq(tf_fit_model(TF_CODEC_ULP, t->src, t->ref, LEN, TF_DT_F32, NULL, &model), 0);
    tf_codec_ctx whole = { .dtype = TF_DT_F32, .model = model.data, .model_len = model.len };
    void *prepared = tf_codec_get(TF_CODEC_ULP)->prepare(&whole);
    ck_assert_ptr_nonnull(prepared);
    const size_t part = LEN / 4; /* 1024 elements: one lane each */
    for (int shared = 0; shared < 2; shared++) {
        tf_chunk_job alone[2], pair[2];
        for (unsigned j = 0; j < 2; j++) {
            alone[j] = (tf_chunk_job){ .src = t->src + j * part, .len = part, .dtype = TF_DT_F32,
                                       .ref = t->ref + j * part };
            if (shared)
                alone[j].models[TF_CODEC_ULP] = (tf_chunk_model){
                    .data = model.data, .len = model.len, .prepared = prepared
                };
            pair[j] = alone[j];
            ck_assert_int_eq(tf_encode_chunk_as(&alone[j], TF_CODEC_ULP, NULL), 0);
        }
        tf_chunk_job *const jobs[2] = { &pair[0], &pair[1] };
        int rc[2];
        tf_encode_chunk_pair_as(jobs, TF_CODEC_ULP, rc);
        for (unsigned j = 0; j < 2; j++) {
            ck_assert_int_eq(rc[j], 0);
            ck_assert_uint_eq(pair[j].codec, TF_CODEC_ULP);
            ck_assert(pair[j].out.len == alone[j].out.len && pair[j].out.len &&
                      memcmp(pair[j].out.data, alone[j].out.data, pair[j].out.len) == 0);
            ck_assert(pair[j].model.len == alone[j].model.len &&
                      (!pair[j].model.len ||
                       memcmp(pair[j].model.data, alone[j].model.data, pair[j].model.len) == 0));
            ck_assert_uint_eq(pair[j].model.len > 0, !shared);
            tf_buf_free(&alone[j].out);
            tf_buf_free(&alone[j].model);
            tf_buf_free(&pair[j].out);
            tf_buf_free(&pair[j].model);
        }
    }
    tf_codec_get(TF_CODEC_ULP)->prepared_free(prepared);
    tf_buf_free(&model);
    tensor_free(t);
}
END_TEST

static Suite *encode_suite(void)
{
    Suite *s = suite_create("encode");
    TCase *tc = tcase_create("choice");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, chunk_alone_gets_its_dtype_codec);
    tcase_add_test(tc, fitted_codecs_compete_with_what_they_need);
    tcase_add_test(tc, stored_models_are_charged_and_ties_go_to_decoding_alone);
    tcase_add_test(tc, fit_model_goes_through_the_table);
    tcase_add_test(tc, pair_as_is_each_as);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(encode_suite());
}
