#include "store/prune.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "store/ckpt_path.h"
#include "store/liveness.h"
#include "store/natsort.h"

/* What a regular file's checkpoint component is: none, the file itself,
 * or a directory (its entry index). */
#define NO_STEP SIZE_MAX
#define SELF (SIZE_MAX - 1)

bool tf_prune_match(const char *pattern, const char *path)
{
    for (const char *s = path;;) {
        if (fnmatch(pattern, s, FNM_LEADING_DIR) == 0)
            return true;
        const char *slash = strchr(s, '/');
        if (!slash)
            return false;
        s = slash + 1;
    }
}

typedef struct {
    const tf_archive *ar;
    const tf_prune_rules *rules;
    tf_prune_plan *plan;
    size_t n;
    size_t *unit;         /* regular files: NO_STEP, SELF or a directory */
    tf_ckpt_path *parsed; /* of files whose unit is SELF, and of the
                             directories that are some file's unit */
    uint8_t *dir_state;   /* directories: 0, CANDIDATE, INVALID */
    bool *absorbs;        /* a candidate that is one checkpoint with all
                             below it */
    bool *emptied;        /* a checkpoint directory that lost files */
    uint64_t *own, *foreign; /* bytes, of candidates */
    size_t *owner;        /* regular files: the entry whose parse names
                             its checkpoint, NO_STEP when it has none */
    char path[TF_PATH_MAX + 1];
} work;

enum { CANDIDATE = 1, INVALID = 2 };

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* The entry at the first len bytes of path, or -1. */
static long find_prefix(work *w, const char *path, size_t len)
{
    if (len > TF_PATH_MAX)
        return -1;
    memcpy(w->path, path, len);
    w->path[len] = '\0';
    return tf_archive_find(w->ar, w->path);
}

/* Whether two checkpoint components carry the same step number. */
static bool same_number(const char *a, const char *b)
{
    const char *da, *db;
    size_t la, lb;
    if (!tf_ckpt_step_number(a, &da, &la) || !tf_ckpt_step_number(b, &db, &lb))
        return false;
    while (la > 1 && *da == '0')
        da++, la--;
    while (lb > 1 && *db == '0')
        db++, lb--;
    return la == lb && memcmp(da, db, la) == 0;
}

static bool multiple_of(const char *step, unsigned k)
{
    const char *d;
    size_t len;
    if (!tf_ckpt_step_number(step, &d, &len))
        return false;
    uint64_t r = 0;
    for (size_t i = 0; i < len; i++)
        r = (r * 10 + (uint64_t)(d[i] - '0')) % k;
    return r == 0;
}

/* Makes directory d a candidate: some file's checkpoint component. */
static int mark_candidate(work *w, size_t d, tf_error *e)
{
    if (w->dir_state[d])
        return 0;
    const tf_entry *ent = tf_archive_entry(w->ar, d);
    if (tf_ckpt_path_parse(ent->path, &w->parsed[d]) < 0)
        return tf_fail(e, ENOMEM, "out of memory");
    /* Its last component is the deepest holding a step number, as it is
     * in the path of the file below it. */
    bool ok = ent->kind == TF_ENTRY_DIR && w->parsed[d].step &&
              w->parsed[d].step_end == strlen(ent->path);
    w->dir_state[d] = ok ? CANDIDATE : INVALID;
    return 0;
}

/* Each regular file's checkpoint component; the bytes of each candidate
 * directory's own files. */
static int find_units(work *w, tf_error *e)
{
    for (size_t i = 0; i < w->n; i++) {
        const tf_entry *ent = tf_archive_entry(w->ar, i);
        w->unit[i] = NO_STEP;
        if (!tf_entry_is_regular(ent))
            continue;
        tf_ckpt_path p;
        if (tf_ckpt_path_parse(ent->path, &p) < 0)
            return tf_fail(e, ENOMEM, "out of memory");
        size_t end = p.step_end;
        if (p.step && end >= strlen(ent->path)) {
            w->parsed[i] = p;
            w->unit[i] = SELF;
            continue;
        }
        bool stepped = p.step != NULL;
        tf_ckpt_path_free(&p);
        long d = stepped ? find_prefix(w, ent->path, end) : -1;
        if (d < 0)
            continue;
        if (mark_candidate(w, (size_t)d, e) < 0)
            return -1;
        if (w->dir_state[d] != CANDIDATE)
            continue;
        w->unit[i] = (size_t)d;
        w->own[d] = add_sat(w->own[d], ent->size);
    }
    return 0;
}

/* Length of the path of file i's checkpoint component. */
static size_t unit_len(const work *w, size_t i)
{
    return strlen(tf_archive_entry(w->ar, w->unit[i] == SELF ? i : w->unit[i])->path);
}

static const char *unit_step(const work *w, size_t i)
{
    return w->parsed[w->unit[i] == SELF ? i : w->unit[i]].step;
}

/* The candidates strictly above file i's checkpoint component count its
 * bytes as below them, with another step number or with theirs. */
static void count_foreign(work *w)
{
    for (size_t i = 0; i < w->n; i++) {
        if (w->unit[i] == NO_STEP)
            continue;
        const tf_entry *ent = tf_archive_entry(w->ar, i);
        size_t ulen = unit_len(w, i);
        for (const char *s = strchr(ent->path, '/'); s && (size_t)(s - ent->path) < ulen;
             s = strchr(s + 1, '/')) {
            long a = find_prefix(w, ent->path, (size_t)(s - ent->path));
            if (a >= 0 && w->dir_state[a] == CANDIDATE &&
                !same_number(w->parsed[a].step, unit_step(w, i)))
                w->foreign[a] = add_sat(w->foreign[a], ent->size);
        }
    }
}

/* Each file's checkpoint: the shallowest candidate at or above its
 * checkpoint component that absorbs what is below it; else its own, when
 * the file is its checkpoint component; else none (a run's file). */
static void find_owners(work *w)
{
    for (size_t d = 0; d < w->n; d++)
        w->absorbs[d] = w->dir_state[d] == CANDIDATE && w->own[d] >= w->foreign[d];
    for (size_t i = 0; i < w->n; i++) {
        w->owner[i] = NO_STEP;
        if (w->unit[i] == NO_STEP)
            continue;
        const tf_entry *ent = tf_archive_entry(w->ar, i);
        size_t ulen = unit_len(w, i);
        for (const char *s = strchr(ent->path, '/'); s && (size_t)(s - ent->path) <= ulen;
             s = strchr(s + 1, '/')) {
            long a = find_prefix(w, ent->path, (size_t)(s - ent->path));
            if (a >= 0 && w->absorbs[a]) {
                w->owner[i] = (size_t)a;
                break;
            }
        }
        if (w->owner[i] == NO_STEP && w->unit[i] == SELF)
            w->owner[i] = i;
    }
}

/* ---- the rules, checkpoint by checkpoint ---- */

typedef struct {
    size_t entry, owner;
    const char *run, *step;
} ckfile;

static int cmp_ckfile(const void *a, const void *b)
{
    const ckfile *x = a, *y = b;
    int c = strcmp(x->run, y->run);
    if (!c)
        c = tf_natcmp(x->step, y->step);
    if (!c)
        c = strcmp(x->step, y->step);
    if (!c)
        c = x->entry < y->entry ? -1 : x->entry > y->entry;
    return c;
}

static bool same_checkpoint(const ckfile *a, const ckfile *b)
{
    return !strcmp(a->run, b->run) && !strcmp(a->step, b->step);
}

static bool matches_any(const char *const *patterns, size_t n, const char *path)
{
    for (size_t k = 0; k < n; k++)
        if (tf_prune_match(patterns[k], path))
            return true;
    return false;
}

/* Whether checkpoint f[0..n), the j'th of its run's count, is kept whole. */
static bool kept(work *w, const ckfile *f, size_t n, size_t j, size_t count)
{
    const tf_prune_rules *r = w->rules;
    bool keep = (r->keep_last && j + r->keep_last >= count) ||
                (r->keep_every && multiple_of(f[0].step, r->keep_every));
    /* Every pattern is tried on every file, to count what each matched. */
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < r->nkeep; k++)
            if (tf_prune_match(r->keep[k], tf_archive_entry(w->ar, f[i].entry)->path)) {
                w->plan->keep_matches[k]++;
                keep = true;
            }
    return keep;
}

/* Applies the rules to checkpoint f[0..n); returns how many of its files
 * go. */
static size_t prune_checkpoint(work *w, const ckfile *f, size_t n, size_t j, size_t count)
{
    if (kept(w, f, n, j, count))
        return 0;
    size_t gone = 0;
    for (size_t i = 0; i < n; i++) {
        const char *path = tf_archive_entry(w->ar, f[i].entry)->path;
        if (w->rules->ndrop && !matches_any(w->rules->drop, w->rules->ndrop, path))
            continue;
        w->plan->dropped[f[i].entry] = true;
        gone++;
    }
    if (gone && f[0].owner != f[0].entry)
        w->emptied[f[0].owner] = true;
    return gone;
}

/* The checkpoints of the run f[0..n), in order. */
static int prune_run(work *w, const ckfile *f, size_t n, tf_error *e)
{
    tf_prune_plan *plan = w->plan;
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += i == 0 || !same_checkpoint(&f[i - 1], &f[i]);
    bool emptied = true;
    for (size_t i = 0, j = 0; i < n; j++) {
        size_t k = i + 1;
        while (k < n && same_checkpoint(&f[i], &f[k]))
            k++;
        size_t gone = prune_checkpoint(w, f + i, k - i, j, count);
        plan->whole += gone == k - i;
        plan->partly += gone && gone < k - i;
        emptied &= gone == k - i;
        i = k;
    }
    plan->runs++;
    plan->checkpoints += count;
    if (emptied && plan->emptied_runs++ == 0 && !(plan->emptied_run = strdup(f[0].run)))
        return tf_fail(e, ENOMEM, "out of memory");
    return 0;
}

static int apply_rules(work *w, tf_error *e)
{
    size_t n = 0;
    for (size_t i = 0; i < w->n; i++)
        n += w->owner[i] != NO_STEP;
    ckfile *f = malloc((n ? n : 1) * sizeof *f);
    if (!f)
        return tf_fail(e, ENOMEM, "out of memory for %zu checkpoint files", n);
    n = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->owner[i] != NO_STEP)
            f[n++] = (ckfile){ .entry = i, .owner = w->owner[i],
                               .run = w->parsed[w->owner[i]].run,
                               .step = w->parsed[w->owner[i]].step };
    qsort(f, n, sizeof *f, cmp_ckfile);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n;) {
        size_t k = i + 1;
        while (k < n && !strcmp(f[i].run, f[k].run))
            k++;
        rc = prune_run(w, f + i, k - i, e);
        i = k;
    }
    free(f);
    return rc;
}

/* ---- directories left without files ---- */

/* Whether the subtree of directory x holds a dropped regular file and
 * no kept entry but directories. */
static bool left_empty(const work *w, size_t x)
{
    size_t len = tf_archive_subtree_len(w->ar, x);
    bool any = false;
    for (size_t i = x + 1; i < x + len; i++) {
        const tf_entry *ent = tf_archive_entry(w->ar, i);
        if (ent->kind == TF_ENTRY_DIR)
            continue;
        if (!w->plan->dropped[i])
            return false;
        any = true;
    }
    return any;
}

/* In each checkpoint directory that lost files, the directories left
 * without files go, with their subtrees. */
static void drop_empty_dirs(work *w)
{
    for (size_t d = 0; d < w->n; d++) {
        if (!w->emptied[d])
            continue;
        size_t end = d + tf_archive_subtree_len(w->ar, d);
        for (size_t x = d; x < end;) {
            size_t len = tf_archive_subtree_len(w->ar, x);
            if (tf_archive_entry(w->ar, x)->kind == TF_ENTRY_DIR && left_empty(w, x)) {
                for (size_t i = x; i < x + len; i++)
                    w->plan->dropped[i] = true;
                x += len;
            } else {
                x++;
            }
        }
    }
}

static void work_free(work *w)
{
    if (w->parsed)
        for (size_t i = 0; i < w->n; i++)
            tf_ckpt_path_free(&w->parsed[i]);
    free(w->parsed);
    free(w->unit);
    free(w->dir_state);
    free(w->absorbs);
    free(w->emptied);
    free(w->own);
    free(w->foreign);
    free(w->owner);
}

int tf_prune_plan_make(const tf_archive *ar, const tf_prune_rules *rules, tf_prune_plan *plan,
                       tf_error *e)
{
    *plan = (tf_prune_plan){ 0 };
    if (!rules->keep_last && !rules->keep_every && !rules->nkeep && !rules->ndrop)
        return tf_fail(e, EINVAL, "no rule says which checkpoints to keep or what to drop");
    size_t n = tf_archive_nentries(ar), m = n ? n : 1;
    work *w = calloc(1, sizeof *w);
    if (!w)
        return tf_fail(e, ENOMEM, "out of memory");
    *w = (work){ .ar = ar, .rules = rules, .plan = plan, .n = n,
                 .unit = malloc(m * sizeof *w->unit), .parsed = calloc(m, sizeof *w->parsed),
                 .dir_state = calloc(m, 1), .absorbs = calloc(m, sizeof *w->absorbs),
                 .emptied = calloc(m, sizeof *w->emptied), .own = calloc(m, sizeof *w->own),
                 .foreign = calloc(m, sizeof *w->foreign), .owner = malloc(m * sizeof *w->owner) };
    plan->nentries = n;
    plan->dropped = calloc(m, sizeof *plan->dropped);
    plan->keep_matches = calloc(rules->nkeep ? rules->nkeep : 1, sizeof *plan->keep_matches);
    int rc = 0;
    if (!w->unit || !w->parsed || !w->dir_state || !w->absorbs || !w->emptied || !w->own ||
        !w->foreign || !w->owner || !plan->dropped || !plan->keep_matches)
        rc = tf_fail(e, ENOMEM, "out of memory for the checkpoints of %zu entries", n);
    if (rc == 0)
        rc = find_units(w, e);
    if (rc == 0) {
        count_foreign(w);
        find_owners(w);
        rc = apply_rules(w, e);
    }
    if (rc == 0) {
        drop_empty_dirs(w);
        for (size_t i = 0; i < n; i++) {
            if (!plan->dropped[i])
                continue;
            const tf_entry *ent = tf_archive_entry(ar, i);
            plan->files += tf_entry_is_regular(ent);
            plan->dirs += ent->kind == TF_ENTRY_DIR;
        }
    }
    work_free(w);
    free(w);
    return rc;
}

void tf_prune_plan_free(tf_prune_plan *plan)
{
    free(plan->dropped);
    free(plan->keep_matches);
    free(plan->emptied_run);
    *plan = (tf_prune_plan){ 0 };
}

/* ---- what it frees ---- */

int tf_prune_frees_of(const tf_archive *ar, const bool *dropped, tf_prune_frees *out,
                      tf_error *e)
{
    *out = (tf_prune_frees){ 0 };
    uint64_t nblobs = tf_archive_nblobs(ar);
    uint8_t *now = tf_liveness(ar, NULL, e);
    uint8_t *after = now ? tf_liveness(ar, dropped, e) : NULL;
    uint8_t *later = after ? calloc(nblobs ? nblobs : 1, 1) : NULL;
    if (!later) {
        free(now);
        free(after);
        return now && after ? tf_fail(e, ENOMEM, "out of memory") : -1;
    }
    uint64_t before_bytes, after_bytes;
    int rc = tf_liveness_payload_bytes(ar, now, &before_bytes, e);
    if (rc == 0)
        rc = tf_liveness_payload_bytes(ar, after, &after_bytes, e);
    if (rc == 0)
        out->now = before_bytes > after_bytes ? before_bytes - after_bytes : 0;
    /* Chunks of removed files that kept chunks decode through, and the
     * payloads of the kept chunks that are deltas against them: the
     * rebase gives both back (store/rebase.h), and writes new ones. */
    for (uint64_t s = 0; s < nblobs; s++)
        if ((now[s] & TF_LIVE_CHUNK) && (after[s] & TF_LIVE_NEEDED) && !(after[s] & TF_LIVE_CHUNK))
            later[s] = TF_LIVE_NEEDED;
    for (uint64_t s = 0; rc == 0 && s < nblobs; s++) {
        if (!(after[s] & TF_LIVE_CHUNK))
            continue;
        tf_blob b;
        if ((rc = tf_archive_blob(ar, s, &b, e)) < 0)
            break;
        bool again;
        if (b.ref && b.ref <= nblobs && !(after[b.ref - 1] & TF_LIVE_CHUNK) &&
            tf_archive_may_redirect(ar, s, &again)) {
            out->rebase_chunks++;
            later[s] = TF_LIVE_NEEDED;
        }
    }
    if (rc == 0)
        rc = tf_liveness_payload_bytes(ar, later, &out->later, e);
    free(now);
    free(after);
    free(later);
    return rc;
}
