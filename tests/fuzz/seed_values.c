#include "seed_values.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/dtype.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static double normal(void)
{
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += (double)(rnd() >> 11) / 9007199254740992.0;
    return s - 2.0;
}

/* v rounded down to a float of exp_bits/man_bits (IEEE layout): tiny
 * values flush to zero, huge ones clamp to the largest finite value. */
static uint64_t float_bits(double v, unsigned exp_bits, unsigned man_bits)
{
    uint64_t sign = v < 0, top = ((uint64_t)1 << exp_bits) - 1, bits;
    int ex;
    double m = frexp(fabs(v), &ex); /* |v| = 2m * 2^(ex-1), 2m in [1, 2) */
    int64_t e = (int64_t)ex - 1 + (int64_t)(top >> 1);
    if (v == 0 || e <= 0)
        bits = 0;
    else if ((uint64_t)e >= top)
        bits = (top - 1) << man_bits | (((uint64_t)1 << man_bits) - 1);
    else
        bits = (uint64_t)e << man_bits | (uint64_t)ldexp(2 * m - 1, (int)man_bits);
    return sign << (exp_bits + man_bits) | bits;
}

/* An infinity or NaN, a signed zero or a subnormal, by k. */
static uint64_t special_bits(unsigned k, unsigned exp_bits, unsigned man_bits)
{
    uint64_t man = rnd() & (((uint64_t)1 << man_bits) - 1);
    uint64_t sign = (uint64_t)(k & 1) << (exp_bits + man_bits);
    switch (k % 3) {
    case 0: return sign | (((uint64_t)1 << exp_bits) - 1) << man_bits | man;
    case 1: return sign;
    default: return sign | (man ? man : 1);
    }
}

/* Stores values v[0..n) as elements of dtype into dst; with specials,
 * some elements are special bit patterns (the same ones for the same
 * seed position). */
void put_elements(uint8_t *dst, unsigned dtype, const double *v, size_t n, bool specials)
{
    const tf_dtype_info *dt = tf_dtype_get(dtype);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits;
        if (!dt->exp_bits)
            bits = (uint64_t)(int64_t)(v[i] * 1000);
        else if (specials && i % 23 == 7)
            bits = special_bits((unsigned)(i / 23), dt->exp_bits, dt->man_bits);
        else
            bits = float_bits(v[i], dt->exp_bits, dt->man_bits);
        for (unsigned b = 0; b < dt->size; b++)
            dst[i * dt->size + b] = (uint8_t)(bits >> (8 * b));
    }
}

double *weights(size_t n)
{
    double *v = malloc(n * sizeof *v);
    if (!v) {
        fprintf(stderr, "make_seeds: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        v[i] = 0.02 * normal();
    return v;
}

void train_step(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] += 0.0005 * normal();
}
