/* Weight-like element values for the seed generator: deterministic
 * pseudo-random weights, a training step that moves them a little, and
 * their storage as elements of any dtype (floats rounded into the dtype's
 * IEEE layout, integers scaled). */
#ifndef TRAJFS_TESTS_FUZZ_SEED_VALUES_H
#define TRAJFS_TESTS_FUZZ_SEED_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* n weights, bell-shaped around 0 with a scale of 0.02 (malloc'd; exits
 * when out of memory). */
double *weights(size_t n);
/* Moves every weight a little (scale 0.0005), like a training step. */
void train_step(double *v, size_t n);
/* Stores v[0..n) as elements of dtype into dst; with specials, every
 * 23rd element is an infinity or NaN, a signed zero or a subnormal. */
void put_elements(uint8_t *dst, unsigned dtype, const double *v, size_t n, bool specials);

#endif
