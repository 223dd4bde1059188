#include "store/ckpt_path.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "format/catalog.h"

static bool has_prefix(const char *s, size_t n, const char *prefix)
{
    size_t m = strlen(prefix);
    return n >= m && memcmp(s, prefix, m) == 0;
}

static bool has_suffix(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* Narrows [*s, *s + *n) to a component without its temporary-name
 * markers: tmp-NAME or tmp_NAME (the transformers Trainer), NAME.tmp and
 * NAME.part (savers that rename when done), .NAME.XXXXXX (rsync). */
static void strip_temporary(const char **s, size_t *n)
{
    const char *p = *s;
    size_t len = *n;
    if (len > 8 && p[0] == '.' && p[len - 7] == '.') {
        bool random = true;
        for (size_t i = len - 6; i < len; i++)
            random &= isalnum((unsigned char)p[i]) != 0;
        if (random) {
            p++;
            len -= 8;
        }
    }
    if (len > 4 && (has_prefix(p, len, "tmp-") || has_prefix(p, len, "tmp_"))) {
        p += 4;
        len -= 4;
    }
    if (len > 4 && has_suffix(p, len, ".tmp"))
        len -= 4;
    else if (len > 5 && has_suffix(p, len, ".part"))
        len -= 5;
    *s = p;
    *n = len;
}

static size_t digits_at(const char *s, size_t n, size_t i)
{
    size_t j = i;
    while (j < n && isdigit((unsigned char)s[j]))
        j++;
    return j - i;
}

/* Whether the digit run [i, i + len) of s is a shard number: the 00001
 * or the 00003 of 00001-of-00003. */
static bool shard_number(const char *s, size_t n, size_t i, size_t len)
{
    if (i + len + 4 < n && memcmp(s + i + len, "-of-", 4) == 0 && digits_at(s, n, i + len + 4))
        return true;
    return i >= 5 && memcmp(s + i - 4, "-of-", 4) == 0 && isdigit((unsigned char)s[i - 5]);
}

/* Whether it follows a word that makes it no step: a rank (rank_00,
 * rank0) or a dtype (fp16, bf16, fp32, int8, float16). */
static bool rank_or_dtype(const char *s, size_t i)
{
    static const char *const words[] = { "rank_", "rank", "fp", "bf", "int", "float" };
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
        size_t n = strlen(words[k]);
        if (i >= n && strncasecmp(s + i - n, words[k], n) == 0)
            return true;
    }
    return false;
}

/* Appends s to out with its digit runs replaced by '#': every run, or
 * (shards_only) only shard numbers, so that the shards of a checkpoint
 * have one role and its ranks one each. */
static int put_normalised(tf_buf *out, const char *s, size_t n, bool shards_only)
{
    for (size_t i = 0; i < n;) {
        size_t len = digits_at(s, n, i);
        if (!len) {
            if (tf_buf_u8(out, (uint8_t)s[i++]) < 0)
                return -1;
            continue;
        }
        bool replace = !shards_only || shard_number(s, n, i, len);
        if (replace ? tf_buf_u8(out, '#') : tf_buf_put(out, s + i, len))
            return -1;
        i += len;
    }
    return 0;
}

static bool holds_step(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t len = digits_at(s, n, i);
        if (len && !shard_number(s, n, i, len) && !rank_or_dtype(s, i))
            return true;
        i += len ? len : 1;
    }
    return false;
}

typedef struct {
    const char *s;
    size_t n;
} component;

static char *take(tf_buf *b)
{
    if (tf_buf_u8(b, 0) < 0) {
        tf_buf_free(b);
        return NULL;
    }
    return (char *)b->data;
}

int tf_ckpt_path_parse(const char *path, tf_ckpt_path *out)
{
    component c[TF_DEPTH_MAX + 1];
    size_t end[TF_DEPTH_MAX + 1]; /* of each component as written */
    size_t nc = 0;
    for (const char *p = path; nc <= TF_DEPTH_MAX;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        c[nc] = (component){ p, n };
        end[nc] = (size_t)(p - path) + n;
        strip_temporary(&c[nc].s, &c[nc].n);
        nc++;
        if (!slash)
            break;
        p = slash + 1;
    }
    size_t k = nc; /* the checkpoint component, nc when none */
    for (size_t i = nc; i-- > 0;)
        if (holds_step(c[i].s, c[i].n)) {
            k = i;
            break;
        }
    size_t dirs = k < nc ? k : nc - 1; /* components of the run's directory */
    tf_buf run = { 0 }, role = { 0 }, step = { 0 };
    int rc = 0;
    for (size_t i = 0; i < dirs; i++)
        rc |= tf_buf_put(&run, c[i].s, c[i].n) | tf_buf_u8(&run, '/');
    if (k < nc)
        rc |= put_normalised(&run, c[k].s, c[k].n, false) | tf_buf_put(&step, c[k].s, c[k].n);
    for (size_t i = k < nc ? k + 1 : dirs; i < nc; i++)
        rc |= (role.len ? tf_buf_u8(&role, '/') : 0) | put_normalised(&role, c[i].s, c[i].n, true);
    *out = (tf_ckpt_path){ 0 };
    if (rc == 0) {
        out->run = take(&run);
        out->role = take(&role);
        out->step = k < nc ? take(&step) : NULL;
        out->step_end = k < nc ? end[k] : 0;
    }
    if (rc || !out->run || !out->role || (k < nc && !out->step)) {
        tf_buf_free(&run);
        tf_buf_free(&role);
        tf_buf_free(&step);
        *out = (tf_ckpt_path){ 0 };
        return -1;
    }
    return 0;
}

bool tf_ckpt_step_number(const char *step, const char **digits, size_t *len)
{
    size_t n = strlen(step);
    bool found = false;
    for (size_t i = 0; i < n;) {
        size_t run = digits_at(step, n, i);
        if (run && !shard_number(step, n, i, run) && !rank_or_dtype(step, i)) {
            *digits = step + i;
            *len = run;
            found = true;
        }
        i += run ? run : 1;
    }
    return found;
}

void tf_ckpt_path_free(tf_ckpt_path *p)
{
    free(p->run);
    free(p->step);
    free(p->role);
    *p = (tf_ckpt_path){ 0 };
}
