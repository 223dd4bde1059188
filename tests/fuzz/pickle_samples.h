/* Real data.pkl records of torch.save files: what the unit tests of
 * format/pickle.h check exactly, and the seeds of the pickle fuzz target.
 * pickle_samples.c says how they were made. */
#ifndef TRAJFS_TESTS_FUZZ_PICKLE_SAMPLES_H
#define TRAJFS_TESTS_FUZZ_PICKLE_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    const uint8_t *data;
    size_t len;
} pickle_sample;

/* adamw, tied, proto4, bf16, lightning, proto1: in this order. */
#define N_PICKLE_SAMPLES 6
extern const pickle_sample pickle_samples[N_PICKLE_SAMPLES];

#endif
