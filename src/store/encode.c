#include "store/encode.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "format/dtype.h"

/* ---- codec choice ---- */

static unsigned standalone_codec(unsigned dtype)
{
    const tf_dtype_info *info = tf_dtype_get(dtype);
    return tf_dtype_is_float(dtype) && info->size > 1 ? TF_CODEC_BYTEGROUP : TF_CODEC_ZSTD;
}

/* Encodes with codec id into a fresh buffer; a codec that does not apply
 * leaves *out empty and returns -1. */
static int try_codec(unsigned id, const tf_chunk_job *job, const tf_codec_ctx *ctx, tf_buf *out)
{
    out->len = 0;
    return tf_codec_get(id)->encode(job->src, job->len, ctx, out, NULL);
}

int tf_encode_chunk(tf_chunk_job *job, tf_error *e)
{
    tf_codec_ctx ctx = { .dtype = job->dtype };
    tf_buf best = { 0 }, cand = { 0 };
    unsigned best_id = TF_CODEC_RAW;
    size_t best_len = job->len;

    unsigned ids[3] = { standalone_codec(job->dtype), TF_CODEC_PROG, TF_CODEC_ULP };
    for (int k = 0; k < 3; k++) {
        if (ids[k] == TF_CODEC_PROG) {
            if (!job->program)
                continue;
            ctx.model = job->program;
            ctx.model_len = job->program_len;
        }
        if (ids[k] == TF_CODEC_ULP) {
            if (!job->ref || !job->model)
                continue;
            ctx.ref = job->ref;
            ctx.ref_len = job->len;
            ctx.model = job->model;
            ctx.model_len = job->model_len;
        }
        size_t extra = ids[k] == TF_CODEC_ULP ? job->model_share : 0;
        if (try_codec(ids[k], job, &ctx, &cand) == 0 && cand.len + extra < best_len) {
            tf_buf t = best;
            best = cand;
            cand = t;
            best_len = best.len + extra;
            best_id = ids[k];
        }
    }
    tf_buf_free(&cand);
    if (best_id == TF_CODEC_RAW) {
        best.len = 0;
        if (tf_buf_put(&best, job->src, job->len) < 0) {
            tf_buf_free(&best);
            return tf_fail(e, ENOMEM, "out of memory");
        }
    }
    job->codec = (uint8_t)best_id;
    job->out = best;
    return 0;
}

int tf_fit_program(const uint8_t *src, size_t len, unsigned dtype, const tf_prog_fit_opts *opts,
                   tf_buf *program)
{
    program->len = 0;
    return tf_prog_fit(src, len, dtype, opts, program, NULL);
}

int tf_fit_delta_model(const uint8_t *src, const uint8_t *ref, size_t len, unsigned dtype,
                       tf_buf *model)
{
    const tf_codec *ulp = tf_codec_get(TF_CODEC_ULP);
    tf_codec_ctx ctx = { .dtype = dtype, .ref = ref, .ref_len = len };
    model->len = 0;
    return ulp->fit(src, len, &ctx, model, NULL);
}

/* ---- ordered parallel execution ---- */

enum { JOB_WAITING, JOB_RUNNING, JOB_DONE, JOB_FAILED };

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    size_t n, window, next, sunk;
    bool stop;
    unsigned char *state;
    tf_error *errors; /* per job */
    int (*work)(void *, size_t, tf_error *);
    void *arg;
} pool;

static void *worker(void *p)
{
    pool *pl = p;
    pthread_mutex_lock(&pl->lock);
    for (;;) {
        while (!pl->stop && pl->next < pl->n && pl->next >= pl->sunk + pl->window)
            pthread_cond_wait(&pl->changed, &pl->lock);
        if (pl->stop || pl->next >= pl->n)
            break;
        size_t i = pl->next++;
        pl->state[i] = JOB_RUNNING;
        pthread_mutex_unlock(&pl->lock);
        int rc = pl->work(pl->arg, i, &pl->errors[i]);
        pthread_mutex_lock(&pl->lock);
        pl->state[i] = rc == 0 ? JOB_DONE : JOB_FAILED;
        pthread_cond_broadcast(&pl->changed);
    }
    pthread_mutex_unlock(&pl->lock);
    return NULL;
}

static int sink_in_order(pool *pl, int (*sink)(void *, size_t, tf_error *), tf_error *e)
{
    for (size_t i = 0; i < pl->n; i++) {
        pthread_mutex_lock(&pl->lock);
        while (pl->state[i] == JOB_WAITING || pl->state[i] == JOB_RUNNING)
            pthread_cond_wait(&pl->changed, &pl->lock);
        bool failed = pl->state[i] == JOB_FAILED;
        pthread_mutex_unlock(&pl->lock);
        if (failed) {
            *e = pl->errors[i];
            return -1;
        }
        if (sink && sink(pl->arg, i, e) < 0)
            return -1;
        pthread_mutex_lock(&pl->lock);
        pl->sunk = i + 1;
        pthread_cond_broadcast(&pl->changed);
        pthread_mutex_unlock(&pl->lock);
    }
    return 0;
}

int tf_run_ordered(size_t n, unsigned threads, size_t window,
                   int (*work)(void *arg, size_t i, tf_error *e),
                   int (*sink)(void *arg, size_t i, tf_error *e), void *arg, tf_error *e)
{
    if (n == 0)
        return 0;
    pool pl = { .n = n, .window = window ? window : 1, .work = work, .arg = arg };
    pl.state = calloc(n, 1);
    pl.errors = calloc(n, sizeof *pl.errors);
    pthread_t *tids = calloc(threads, sizeof *tids);
    if (!pl.state || !pl.errors || !tids) {
        free(pl.state);
        free(pl.errors);
        free(tids);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    pthread_mutex_init(&pl.lock, NULL);
    pthread_cond_init(&pl.changed, NULL);
    unsigned started = 0;
    while (started < threads && pthread_create(&tids[started], NULL, worker, &pl) == 0)
        started++;
    int rc = started ? sink_in_order(&pl, sink, e) : tf_fail(e, EAGAIN, "cannot start threads");
    pthread_mutex_lock(&pl.lock);
    pl.stop = true;
    pthread_cond_broadcast(&pl.changed);
    pthread_mutex_unlock(&pl.lock);
    for (unsigned t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    pthread_cond_destroy(&pl.changed);
    pthread_mutex_destroy(&pl.lock);
    free(pl.state);
    free(pl.errors);
    free(tids);
    return rc;
}
