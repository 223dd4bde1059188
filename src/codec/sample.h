/* The sample of a chunk that a codec's estimate looks at (codec.h): a
 * few runs of consecutive elements spread evenly over it (runs, so that
 * what depends on neighbours shows), the whole chunk when it is not much
 * larger. Estimates of all codecs see the same elements. */
#ifndef TRAJFS_CODEC_SAMPLE_H
#define TRAJFS_CODEC_SAMPLE_H

#include <stddef.h>

#define TF_SAMPLE_RUN ((size_t)1024)
#define TF_SAMPLE_RUNS ((size_t)16)
/* Elements of a sample at most: chunks of no more are sampled whole. */
#define TF_SAMPLE_MAX (TF_SAMPLE_RUN * TF_SAMPLE_RUNS)

/* How many runs a chunk of n elements has in its sample, and how long. */
static inline size_t tf_sample_runs(size_t n)
{
    return n <= TF_SAMPLE_MAX ? 1 : TF_SAMPLE_RUNS;
}

static inline size_t tf_sample_run_len(size_t n)
{
    return n <= TF_SAMPLE_MAX ? n : TF_SAMPLE_RUN;
}

/* The first element of run k: the first run at the chunk's start, the
 * last at its end. */
static inline size_t tf_sample_run_start(size_t n, size_t k)
{
    return n <= TF_SAMPLE_MAX ? 0 : k * (n - TF_SAMPLE_RUN) / (TF_SAMPLE_RUNS - 1);
}

static inline size_t tf_sample_len(size_t n)
{
    return tf_sample_runs(n) * tf_sample_run_len(n);
}

#endif
