/* tf_pickle_torch_storages: runs the pickle interpreter (pickle.c), then
 * groups the storages it found by key, each named by the path of the
 * first tensor in the saved object that uses it (pickle.h says how paths
 * are spelt). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "format/pickle_machine.h"

/* ---- storages by key ---- */

static int by_key_then_offset(const void *pa, const void *pb)
{
    const storage *a = *(const storage *const *)pa, *b = *(const storage *const *)pb;
    int c = memcmp(a->key, b->key, a->key_len < b->key_len ? a->key_len : b->key_len);
    if (c == 0 && a->key_len != b->key_len)
        c = a->key_len < b->key_len ? -1 : 1;
    return c ? c : (a->offset > b->offset) - (a->offset < b->offset);
}

/* Puts each storage into the group of its key; the group's first (in
 * pickle order) takes the dtype any of them has, and all must agree on
 * dtype and size. */
static int group_storages(machine *m)
{
    char key[SHOWN_MAX + 4];
    storage **sorted = malloc((m->nstorages ? m->nstorages : 1) * sizeof *sorted);
    if (!sorted)
        return tf_pickle_nomem(m);
    for (size_t i = 0; i < m->nstorages; i++)
        sorted[i] = &m->storages[i];
    qsort(sorted, m->nstorages, sizeof *sorted, by_key_then_offset);
    int rc = 0;
    for (size_t i = 0, first = 0; rc == 0 && i < m->nstorages; i++) {
        storage *s = sorted[i], *g = sorted[first];
        if (i > first && (s->key_len != g->key_len || memcmp(s->key, g->key, s->key_len) != 0))
            g = sorted[first = i];
        s->group = (size_t)(g - m->storages);
        if (s->nbytes != g->nbytes)
            rc = tf_pickle_fail(m, "storage '%s' has %" PRIu64 " bytes where named at offset %zu "
                                   "and %" PRIu64 " where named at offset %zu",
                                tf_pickle_storage_key(g, key), g->nbytes, g->offset, s->nbytes,
                                s->offset);
        else if (s->dtype != TF_DT_NONE && g->dtype != TF_DT_NONE && s->dtype != g->dtype)
            rc = tf_pickle_fail(m, "storage '%s' is %s where named at offset %zu and %s where "
                                   "named at offset %zu", tf_pickle_storage_key(g, key),
                                tf_dtype_get(g->dtype)->name, g->offset,
                                tf_dtype_get(s->dtype)->name, s->offset);
        else if (g->dtype == TF_DT_NONE)
            g->dtype = s->dtype;
    }
    free(sorted);
    return rc;
}

/* ---- paths ---- */

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

typedef struct {
    char buf[TF_PICKLE_MAX_PATH + 1];
    size_t len;     /* of the path, even where buf does not hold it */
    size_t parts;   /* components */
    size_t bad_len; /* SIZE_MAX, or len before the component that spoilt the path */
    const char *why;
} path;

/* Appends a component; returns the length to restore with path_pop. */
static size_t path_push(path *p, const void *s, size_t n)
{
    const size_t old = p->len, dot = p->parts > 0;
    p->parts++;
    p->len = old + dot + n;
    if (p->bad_len != SIZE_MAX)
        return old;
    /* The length first: a long key costs no more than a short one. */
    if (p->len > TF_PICKLE_MAX_PATH) {
        p->bad_len = old;
        p->why = "it is longer than " STRINGIFY(TF_PICKLE_MAX_PATH) " bytes";
    } else if (memchr(s, 0, n)) {
        p->bad_len = old;
        p->why = "a key on it contains NUL";
    } else {
        if (dot)
            p->buf[old] = '.';
        memcpy(p->buf + old + dot, s, n);
    }
    return old;
}

static void path_pop(path *p, size_t old)
{
    p->len = old;
    p->parts--;
    if (old <= p->bad_len)
        p->bad_len = SIZE_MAX;
}

/* Gives storage `index` the path p unless it has one. */
static int name_storage(machine *m, size_t index, const path *p)
{
    storage *s = &m->storages[m->storages[index].group];
    char key[SHOWN_MAX + 4];
    if (s->path)
        return 0;
    if (p->bad_len != SIZE_MAX)
        return tf_pickle_fail(m, "storage '%s' (named at offset %zu) has no path: %s",
                              tf_pickle_storage_key(s, key), s->offset, p->why);
    if (tf_pickle_charge(m, p->len + 1) < 0)
        return -1;
    if (!(s->path = malloc(p->len + 1)))
        return tf_pickle_nomem(m);
    memcpy(s->path, p->buf, p->len);
    s->path[p->len] = '\0';
    return 0;
}

/* Names the storages under v, depth first; a container shared or held
 * by itself is walked once. */
static int walk(machine *m, const value *v, path *p, unsigned depth)
{
    if (v->kind == V_STORAGE || v->kind == V_TENSOR)
        return name_storage(m, v->u.index, p);
    if (v->kind != V_TUPLE && v->kind != V_LIST && v->kind != V_DICT)
        return 0;
    container *c = v->u.c;
    if (c->visited)
        return 0;
    c->visited = true;
    if (depth == TF_PICKLE_MAX_DEPTH)
        return tf_pickle_fail(m, "the saved object nests more than %d containers deep",
                              TF_PICKLE_MAX_DEPTH);
    const size_t stride = v->kind == V_DICT ? 2 : 1;
    for (size_t i = 0; i < c->n; i += stride) {
        const value *key = stride == 2 ? &c->items[i] : NULL;
        char num[24];
        const void *s = num;
        size_t n;
        if (key && key->kind == V_STR) {
            s = key->u.s;
            n = key->len;
        } else if (key && key->kind == V_INT) {
            n = (size_t)snprintf(num, sizeof num, "%" PRId64, key->u.i);
        } else {
            n = (size_t)snprintf(num, sizeof num, "%zu", i / stride);
        }
        const size_t old = path_push(p, s, n);
        const int rc = walk(m, &c->items[i + stride - 1], p, depth + 1);
        path_pop(p, old);
        if (rc < 0)
            return -1;
    }
    return walk(m, &c->state, p, depth + 1);
}

/* ---- the result ---- */

static char *copy_string(const uint8_t *s, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = '\0';
    }
    return c;
}

/* Groups the storages by key, walks the saved object (the one value on
 * the stack) and hands over one storage per key: 0, or -1 with out
 * untouched. The paths handed over are no longer the machine's. */
static int finish(machine *m, tf_pickle_storages *out)
{
    char key[SHOWN_MAX + 4];
    if (m->nmarks)
        return tf_pickle_fail(m, "a MARK is still open");
    if (m->sp != 1)
        return tf_pickle_fail(m, "%zu values on the stack, not one", m->sp);
    if (group_storages(m) < 0)
        return -1;
    path *p = malloc(sizeof *p);
    if (!p)
        return tf_pickle_nomem(m);
    p->len = p->parts = 0;
    p->bad_len = SIZE_MAX;
    const int rc = walk(m, &m->stack[0], p, 0);
    free(p);
    if (rc < 0)
        return -1;
    tf_pickle_storages r = { 0 };
    if (m->nstorages && !(r.v = calloc(m->nstorages, sizeof *r.v)))
        return tf_pickle_nomem(m);
    for (size_t i = 0; i < m->nstorages; i++) {
        storage *s = &m->storages[i];
        tf_pickle_storage *o = &r.v[r.n];
        const char *why = NULL;
        if (s->group != i)
            continue;
        if (!s->path)
            why = "is not part of the saved object";
        else if (s->dtype == TF_DT_NONE)
            why = "has no dtype: it is an UntypedStorage that no _rebuild_tensor_v3 reads";
        else if (s->nbytes % tf_dtype_get(s->dtype)->size)
            why = "does not hold a whole number of elements";
        if (why) {
            tf_pickle_storages_free(&r);
            return tf_pickle_fail(m, "storage '%s' (named at offset %zu) %s",
                                  tf_pickle_storage_key(s, key), s->offset, why);
        }
        if (!(o->key = copy_string(s->key, s->key_len))) {
            tf_pickle_storages_free(&r);
            return tf_pickle_nomem(m);
        }
        o->dtype = (uint8_t)s->dtype;
        o->numel = s->nbytes / tf_dtype_get(s->dtype)->size;
        o->path = s->path;
        s->path = NULL;
        r.n++;
    }
    *out = r;
    return 0;
}

int tf_pickle_torch_storages(const uint8_t *p, size_t len, tf_pickle_storages *out, tf_error *e)
{
    *out = (tf_pickle_storages){ 0 };
    machine *m = calloc(1, sizeof *m);
    if (!m)
        return tf_fail(e, EINVAL, "pickle: out of memory to interpret it");
    *m = (machine){ .p = p, .len = len, .e = e };
    int rc = tf_pickle_run(m);
    if (rc == 0)
        rc = finish(m, out);
    tf_pickle_machine_free(m);
    return rc;
}

void tf_pickle_storages_free(tf_pickle_storages *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        free(s->v[i].path);
    }
    free(s->v);
    *s = (tf_pickle_storages){ 0 };
}
