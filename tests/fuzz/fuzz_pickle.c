#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "format/pickle.h"
#include "fuzz_targets.h"

static void broken(const char *what, const char *key)
{
    fprintf(stderr, "tf_pickle_torch_storages accepted a pickle that breaks its contract: %s \"%s\"\n",
            what, key);
    abort();
}

/* What the torch.save format relies on: every storage has a key of its
 * own, an element type the archive stores, a size in bytes that fits, and
 * a path no longer than the bound. */
static void check_contract(const tf_pickle_storages *s)
{
    for (size_t i = 0; i < s->n; i++) {
        const tf_pickle_storage *st = &s->v[i];
        if (!st->key || !st->path)
            broken("a storage without key or path", "");
        const tf_dtype_info *dt = tf_dtype_get(st->dtype);
        if (!dt || st->dtype == TF_DT_NONE || st->numel > UINT64_MAX / dt->size)
            broken("bad dtype or element count", st->key);
        if (strlen(st->path) > TF_PICKLE_MAX_PATH)
            broken("path too long", st->key);
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->v[j].key, st->key) == 0)
                broken("key listed twice", st->key);
    }
}

int tf_fuzz_pickle(const uint8_t *data, size_t size, tf_error *e)
{
    tf_pickle_storages s;
    if (tf_pickle_torch_storages(data, size, &s, e) < 0) {
        if (s.n || s.v || (e->errnum != EINVAL && e->errnum != ENOMEM))
            broken("a refusal that is not clean", e->msg);
        return -1;
    }
    check_contract(&s);
    tf_pickle_storages_free(&s);
    return 0;
}
