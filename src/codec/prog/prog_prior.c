#include "codec/prog/prog_prior.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codec/prog/prog_derive.h"

/* Additive smoothing of the counts. A calibration sees a few programs;
 * with beta 1 an unseen production costs barely more than a seen one
 * (on the bf16 checkpoint of prog_bench, one expansion with a single
 * rollout completed a map of a raw literal ahead of the merge the
 * calibration had chosen); 0.1 lets what the calibration saw stand out. */
#define BETA 0.1
/* Features look at most this many words; distinct values this many. */
#define FEATURE_SAMPLE 65536
#define DISTINCT_SAMPLE 4096

/* Context levels, most detailed first: how many leading kappa bytes each
 * keeps. */
static const unsigned level_len[] = { TF_PROG_KAPPA_LEN, 5, 2, 0 };
#define LEVELS (sizeof level_len / sizeof level_len[0])

typedef struct {
    uint8_t level;
    uint8_t key[TF_PROG_KAPPA_LEN];
    uint32_t count[TF_PROG_RULES];
    uint64_t total;
} context_counts;

/* A checkpoint's sample yields some hundreds of contexts at most: a
 * linear list is fast enough. */
struct tf_prog_prior {
    context_counts *ctx;
    size_t n, cap;
    uint64_t total;
};

static unsigned bit_length(uint64_t v)
{
    return v ? 64 - (unsigned)__builtin_clzll(v) : 0;
}

static uint8_t width_class(unsigned w)
{
    static const uint8_t exact[] = { [1] = 0, [8] = 2, [16] = 4, [32] = 6, [64] = 8 };
    if (w == 1 || w == 8 || w == 16 || w == 32 || w == 64)
        return exact[w];
    return w < 8 ? 1 : w < 16 ? 3 : w < 32 ? 5 : 7;
}

/* How many distinct words v[0, m) holds, counted up to `most` (then
 * most + 1): an open-addressing set, which holds at most
 * DISTINCT_SAMPLE / 8 + 1 words (half its slots), so a free slot is
 * always near. */
#define DISTINCT_BITS 10
#define DISTINCT_SLOTS (1u << DISTINCT_BITS)
_Static_assert(DISTINCT_SAMPLE / 8 + 1 < DISTINCT_SLOTS, "the set must have a free slot");
static size_t count_distinct(const uint64_t *v, size_t m, size_t most)
{
    uint64_t key[DISTINCT_SLOTS];
    bool used[DISTINCT_SLOTS] = { false };
    size_t distinct = 0;
    for (size_t i = 0; i < m && distinct <= most; i++) {
        size_t h = (size_t)((v[i] * 0x9e3779b97f4a7c15ull) >> (64 - DISTINCT_BITS));
        while (used[h] && key[h] != v[i])
            h = (h + 1) % DISTINCT_SLOTS;
        if (!used[h]) {
            used[h] = true;
            key[h] = v[i];
            distinct++;
        }
    }
    return distinct;
}

static uint8_t class_of(double v, double low, double high)
{
    return v < low ? 0 : v < high ? 1 : 2;
}

/* zero fraction, distinct ratio, repetition ratio, adjacent-difference
 * entropy: three classes each. */
static void compute_features(tf_prog_stream *s)
{
    size_t n = s->n < FEATURE_SAMPLE ? s->n : FEATURE_SAMPLE;
    size_t zeros = 0, repeats = 0;
    uint32_t diff_hist[256] = { 0 };
    for (size_t i = 0; i < n; i++)
        zeros += s->v[i] == 0;
    for (size_t i = 1; i < n; i++) {
        repeats += s->v[i] == s->v[i - 1];
        diff_hist[(s->v[i] - s->v[i - 1]) & 0xff]++;
    }
    double entropy = 0;
    for (unsigned b = 0; b < 256 && n > 1; b++)
        if (diff_hist[b])
            entropy -= diff_hist[b] * log2((double)diff_hist[b] / (double)(n - 1));
    entropy = n > 1 ? entropy / (double)(n - 1) : 0;
    /* the distinct words of the first DISTINCT_SAMPLE: up to 16, up to
     * an eighth of them, or more (where counting stops) */
    size_t m = n < DISTINCT_SAMPLE ? n : DISTINCT_SAMPLE;
    size_t most = m / 8 > 16 ? m / 8 : 16;
    size_t distinct = count_distinct(s->v, m, most);
    double share = n ? 1.0 / (double)n : 0;
    s->features[0] = class_of((double)zeros * share, 0.05, 0.5);
    s->features[1] = distinct <= 16 ? 0 : distinct * 8 <= m ? 1 : 2;
    s->features[2] = class_of((double)repeats * share, 0.05, 0.5);
    s->features[3] = class_of(entropy, 2, 6);
    s->featured = true;
}

void tf_prog_kappa(uint8_t *kappa, tf_prog_stream *target, unsigned parent_rule, unsigned pos,
                   unsigned depth, unsigned dtype)
{
    if (!target->featured)
        compute_features(target);
    unsigned size = bit_length(target->n) / 4;
    kappa[0] = width_class(target->width);
    kappa[1] = (uint8_t)parent_rule;
    kappa[2] = (uint8_t)(pos < 3 ? pos : 3);
    kappa[3] = (uint8_t)(depth < 4 ? depth : 4);
    kappa[4] = (uint8_t)dtype;
    kappa[5] = (uint8_t)(size < 7 ? size : 7);
    memcpy(kappa + 6, target->features, 4);
}

tf_prog_prior *tf_prog_prior_new(void)
{
    return calloc(1, sizeof(tf_prog_prior));
}

void tf_prog_prior_free(tf_prog_prior *p)
{
    if (p)
        free(p->ctx);
    free(p);
}

static context_counts *find(const tf_prog_prior *p, unsigned level, const uint8_t *kappa)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ctx[i].level == level && memcmp(p->ctx[i].key, kappa, level_len[level]) == 0)
            return &p->ctx[i];
    return NULL;
}

int tf_prog_prior_observe(tf_prog_prior *p, unsigned rule, const uint8_t *kappa)
{
    for (unsigned level = 0; level < LEVELS; level++) {
        context_counts *c = find(p, level, kappa);
        if (!c) {
            if (p->n == p->cap) {
                size_t cap = p->cap ? 2 * p->cap : 64;
                context_counts *grown = realloc(p->ctx, cap * sizeof *grown);
                if (!grown)
                    return -1;
                p->ctx = grown;
                p->cap = cap;
            }
            c = &p->ctx[p->n++];
            memset(c, 0, sizeof *c);
            c->level = (uint8_t)level;
            memcpy(c->key, kappa, level_len[level]);
        }
        c->count[rule]++;
        c->total++;
    }
    p->total++;
    return 0;
}

uint64_t tf_prog_prior_total(const tf_prog_prior *p)
{
    return p ? p->total : 0;
}

double tf_prog_prior_cost(const tf_prog_prior *p, unsigned rule, const uint8_t *kappa,
                          const bool *admissible)
{
    unsigned n_admissible = 0;
    for (unsigned r = 0; r < TF_PROG_RULES; r++)
        n_admissible += admissible[r];
    const context_counts *c = NULL;
    for (unsigned level = 0; p && level < LEVELS && !c; level++) {
        c = find(p, level, kappa);
        if (c) { /* back off further when this context saw none of these rules */
            uint64_t seen = 0;
            for (unsigned r = 0; r < TF_PROG_RULES; r++)
                seen += admissible[r] ? c->count[r] : 0;
            c = seen ? c : NULL;
        }
    }
    if (!c)
        return log2((double)n_admissible);
    double sum = 0;
    for (unsigned r = 0; r < TF_PROG_RULES; r++)
        sum += admissible[r] ? c->count[r] : 0;
    return -log2((c->count[rule] + BETA) / (sum + BETA * n_admissible));
}
