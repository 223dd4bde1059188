/* Learning a checkpoint's production prior (prog.h): calibration
 * searches on a deterministic sample of its tensors, stratified by dtype
 * and size, counting the productions of the programs they find. */
#include <errno.h>
#include <stdlib.h>

#include "codec/prog/prog.h"
#include "codec/prog/prog_derive.h"
#include "codec/prog/prog_ops.h"
#include "codec/prog/prog_search.h"
#include "common/dtype.h"

/* Quantiles of size picked within a dtype, round after round. */
static const unsigned quantile_pct[] = { 100, 50, 75, 25 };

typedef struct {
    size_t index;
    unsigned dtype;
    size_t len;
} entry;

static int by_dtype_then_size(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->dtype != y->dtype)
        return x->dtype < y->dtype ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Indices of at most TF_PROG_CALIBRATION_TENSORS tensors: round r takes,
 * from each dtype in turn, the tensor at quantile_pct[r] of its sizes. */
static size_t pick_sample(const tf_prog_tensor *tensors, size_t n, size_t *pick, bool *oom)
{
    entry *all = malloc((n ? n : 1) * sizeof *all);
    *oom = !all;
    if (!all)
        return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const tf_dtype_info *info = tf_dtype_get(tensors[i].dtype);
        if (info && tensors[i].len >= info->size && tensors[i].len % info->size == 0)
            all[m++] = (entry){ i, tensors[i].dtype, tensors[i].len };
    }
    qsort(all, m, sizeof *all, by_dtype_then_size);
    size_t picked = 0;
    for (size_t r = 0; r < sizeof quantile_pct / sizeof quantile_pct[0]; r++) {
        for (size_t g = 0; g < m && picked < TF_PROG_CALIBRATION_TENSORS;) {
            size_t end = g;
            while (end < m && all[end].dtype == all[g].dtype)
                end++;
            size_t at = g + (end - g - 1) * quantile_pct[r] / 100, i = all[at].index;
            bool seen = false;
            for (size_t k = 0; k < picked; k++)
                seen |= pick[k] == i;
            if (!seen)
                pick[picked++] = i;
            g = end;
        }
    }
    free(all);
    return picked;
}

static int calibrate(const tf_prog_tensor *t, tf_prog_prior *prior, tf_error *e)
{
    unsigned bytes = tf_dtype_get(t->dtype)->size;
    size_t n = t->len / bytes;
    if (n > TF_PROG_SAMPLE_WORDS)
        n = TF_PROG_SAMPLE_WORDS;
    uint64_t *v = malloc(n * sizeof *v);
    if (!v)
        return tf_fail(e, ENOMEM, "prog: out of memory for %zu words", n);
    tf_prog_words_load(t->data, n, bytes, v);
    tf_prog_search_opts so = { .budget = TF_PROG_CALIBRATION_BUDGET,
                               .dtype = t->dtype,
                               .max_memory = TF_PROG_SEARCH_MEMORY };
    tf_prog_tree best;
    size_t size;
    int rc = tf_prog_search(v, n, 8 * bytes, &so, &best, &size, NULL, e);
    free(v);
    if (rc < 0)
        return -1;
    for (unsigned i = 0; i < best.prog.n_nodes && rc == 0; i++)
        if (best.rule[i] != TF_PROG_R_NONE &&
            tf_prog_prior_observe(prior, best.rule[i], best.kappa[i]) < 0)
            rc = tf_fail(e, ENOMEM, "prog: out of memory for the prior");
    tf_prog_tree_release(&best, NULL);
    return rc;
}

int tf_prog_prior_pick(const tf_prog_tensor *tensors, size_t n, size_t *pick)
{
    bool oom;
    size_t picked = pick_sample(tensors, n, pick, &oom);
    return oom ? -1 : (int)picked;
}

int tf_prog_prior_learn(const tf_prog_tensor *tensors, size_t n, tf_prog_prior **out,
                        tf_error *e)
{
    *out = NULL;
    size_t pick[TF_PROG_CALIBRATION_TENSORS];
    bool oom;
    size_t picked = pick_sample(tensors, n, pick, &oom);
    tf_prog_prior *prior = oom ? NULL : tf_prog_prior_new();
    if (!prior)
        return tf_fail(e, ENOMEM, "prog: out of memory for the prior");
    for (size_t k = 0; k < picked; k++)
        if (calibrate(&tensors[pick[k]], prior, e) < 0) {
            tf_prog_prior_free(prior);
            return -1;
        }
    if (tf_prog_prior_total(prior))
        *out = prior;
    else
        tf_prog_prior_free(prior);
    return 0;
}
