#include "fs/handles.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "fs/spool.h"
#include "store/archive.h"

void fs_handles_init(fs_handles *t)
{
    *t = (fs_handles){ 0 };
    pthread_mutex_init(&t->lock, NULL);
}

size_t fs_handles_destroy(fs_handles *t)
{
    size_t lost = 0;
    for (size_t i = 0; i < t->nslots; i++) {
        fs_handle *h = t->slots[i];
        if (h && h->writable && h->dirty && !h->unlinked && !h->failed)
            lost++;
        fs_handle_free(h);
    }
    for (size_t i = 0; i < FS_RETIRED_MAX; i++)
        if (t->retired[i].ino)
            tf_entry_free(&t->retired[i].ent);
    free(t->slots);
    pthread_mutex_destroy(&t->lock);
    *t = (fs_handles){ 0 };
    return lost;
}

fs_handle *fs_handle_new_read(uint64_t ino, const tf_entry *ent, bool copy)
{
    fs_handle *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ino = ino;
    h->spool = -1;
    h->ent = ent;
    if (copy) {
        if (tf_entry_clone(ent, NULL, &h->copy, NULL) < 0) {
            free(h);
            return NULL;
        }
        h->ent = &h->copy;
    }
    return h;
}

fs_handle *fs_handle_new_write(const fs_write_attrs *attrs, const char *name, int spool,
                               bool dirty)
{
    fs_handle *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    static _Atomic uint64_t serials;
    h->serial = ++serials;
    h->ino = attrs->ino;
    h->writable = true;
    fs_stream_state_init(&h->stream, dirty);
    h->spool = spool;
    h->attrs = *attrs;
    snprintf(h->name, sizeof h->name, "%s", name);
    h->dirty = dirty;
    pthread_mutex_init(&h->io, NULL);
    return h;
}

void fs_handle_free(fs_handle *h)
{
    if (!h)
        return;
    if (h->writable) {
        close(h->spool);
        fs_stream_state_destroy(&h->stream);
        pthread_mutex_destroy(&h->io);
    }
    tf_entry_free(&h->copy);
    free(h);
}

/* Whether two read handles read the same version of their file. */
static bool same_version(const tf_entry *a, const tf_entry *b)
{
    return a->size == b->size && a->mtime_sec == b->mtime_sec &&
           a->mtime_nsec == b->mtime_nsec && tf_entry_same_chunks(a, b);
}

/* Whether o, another handle of h's inode that uses the page cache, holds
 * a view of the file that h does not share (under the table's lock). */
static bool other_view(const fs_handle *h, const fs_handle *o)
{
    if (o->writable)
        return o->dirty || !o->flushed;
    return h->writable || !same_version(h->ent, o->ent);
}

/* fs_handles_add's rule, under the table's lock. */
static bool must_bypass_cache(const fs_handles *t, const fs_handle *h)
{
    for (size_t i = 0; i < t->nslots; i++) {
        const fs_handle *o = t->slots[i];
        if (o && o->ino == h->ino && !o->bypass_cache && other_view(h, o))
            return true;
    }
    return false;
}

uint64_t fs_handles_add(fs_handles *t, fs_handle *h)
{
    pthread_mutex_lock(&t->lock);
    h->bypass_cache = must_bypass_cache(t, h);
    size_t i = 0;
    while (i < t->nslots && t->slots[i])
        i++;
    if (i == t->nslots) {
        size_t n = t->nslots ? t->nslots * 2 : 16;
        fs_handle **s = realloc(t->slots, n * sizeof *s);
        if (!s) {
            pthread_mutex_unlock(&t->lock);
            return 0;
        }
        memset(s + t->nslots, 0, (n - t->nslots) * sizeof *s);
        t->slots = s;
        t->nslots = n;
    }
    t->slots[i] = h;
    h->changed = ++t->clock;
    pthread_mutex_unlock(&t->lock);
    return i + 1;
}

static fs_handle *slot(const fs_handles *t, uint64_t fh)
{
    return fh >= 1 && fh <= t->nslots ? t->slots[fh - 1] : NULL;
}

fs_handle *fs_handles_get(fs_handles *t, uint64_t fh, uint64_t ino)
{
    pthread_mutex_lock(&t->lock);
    fs_handle *h = slot(t, fh);
    if (h && h->ino != ino)
        h = NULL;
    pthread_mutex_unlock(&t->lock);
    return h;
}

fs_handle *fs_handles_take(fs_handles *t, uint64_t fh)
{
    pthread_mutex_lock(&t->lock);
    fs_handle *h = slot(t, fh);
    if (h)
        t->slots[fh - 1] = NULL;
    pthread_mutex_unlock(&t->lock);
    return h;
}

void fs_handles_each_version(fs_handles *t, void (*fn)(void *arg, const tf_entry *ent), void *arg)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->nslots; i++)
        if (t->slots[i] && !t->slots[i]->writable && t->slots[i]->ent)
            fn(arg, t->slots[i]->ent);
    pthread_mutex_unlock(&t->lock);
}

/* ---- write handles ---- */

/* After a write or truncation of h's spool to at least/exactly size
 * bytes (grow: size is a lower bound): marks h changed. */
static void note_change(fs_handles *t, fs_handle *h, uint64_t size, bool grow)
{
    pthread_mutex_lock(&t->lock);
    if (!grow || size > h->attrs.size)
        h->attrs.size = size;
    tf_time_of_day(&h->attrs.mtime);
    h->dirty = true;
    h->failed = false;
    h->flushed = false;
    h->changed = ++t->clock;
    pthread_mutex_unlock(&t->lock);
}

int fs_handle_write(fs_handles *t, fs_handle *h, const void *buf, size_t len, uint64_t off)
{
    pthread_mutex_lock(&h->io);
    int err = -fs_spool_write(h->spool, buf, len, off);
    if (!err) {
        note_change(t, h, off + len, true);
        fs_stream_state_wrote(&h->stream, off, len);
    }
    pthread_mutex_unlock(&h->io);
    return err;
}

int fs_handle_truncate(fs_handles *t, fs_handle *h, uint64_t size)
{
    pthread_mutex_lock(&h->io);
    int err = ftruncate(h->spool, (off_t)size) < 0 ? errno : 0;
    if (!err) {
        note_change(t, h, size, false);
        fs_stream_state_truncated(&h->stream, size);
    }
    pthread_mutex_unlock(&h->io);
    return err;
}

int fs_handle_read(fs_handle *h, void *buf, size_t len, uint64_t off, size_t *got)
{
    pthread_mutex_lock(&h->io);
    int err = -fs_spool_read(h->spool, buf, len, off, got);
    pthread_mutex_unlock(&h->io);
    return err;
}

void fs_handle_hold(fs_handle *h)
{
    pthread_mutex_lock(&h->io);
}

void fs_handle_unhold(fs_handle *h)
{
    pthread_mutex_unlock(&h->io);
}

/* Calls fn on every write handle of inode ino, under the table's lock. */
static void each_handle_of(fs_handles *t, uint64_t ino,
                           void (*fn)(fs_handles *, fs_handle *, const void *), const void *arg)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->nslots; i++) {
        fs_handle *h = t->slots[i];
        if (h && h->writable && h->ino == ino)
            fn(t, h, arg);
    }
    pthread_mutex_unlock(&t->lock);
}

bool fs_handles_attrs(fs_handles *t, uint64_t ino, fs_write_attrs *out)
{
    pthread_mutex_lock(&t->lock);
    const fs_handle *best = NULL;
    for (size_t i = 0; i < t->nslots; i++) {
        const fs_handle *h = t->slots[i];
        if (h && h->writable && h->ino == ino && (!best || h->changed > best->changed))
            best = h;
    }
    if (best)
        *out = best->attrs;
    pthread_mutex_unlock(&t->lock);
    return best != NULL;
}

/* The newest retired version of ino, or NULL; under the table's lock. */
static const tf_entry *retired_version(const fs_handles *t, uint64_t ino)
{
    for (size_t k = 1; k <= FS_RETIRED_MAX; k++) {
        const fs_retired *r = &t->retired[(t->next_retired + FS_RETIRED_MAX - k) % FS_RETIRED_MAX];
        if (r->ino == ino)
            return &r->ent;
    }
    return NULL;
}

bool fs_handles_read_attrs(fs_handles *t, uint64_t ino, fs_write_attrs *out)
{
    pthread_mutex_lock(&t->lock); /* no handle in the table is freed meanwhile */
    const tf_entry *found = NULL;
    for (size_t i = 0; i < t->nslots && !found; i++) {
        const fs_handle *h = t->slots[i];
        if (h && !h->writable && h->ino == ino)
            found = h->ent;
    }
    if (!found)
        found = retired_version(t, ino);
    if (found)
        *out = (fs_write_attrs){
            .ino = ino, .size = found->size, .mode = found->mode,
            .mtime = { .tv_sec = found->mtime_sec, .tv_nsec = found->mtime_nsec },
        };
    pthread_mutex_unlock(&t->lock);
    return found != NULL;
}

void fs_handles_retire(fs_handles *t, uint64_t ino, const tf_entry *ent)
{
    tf_entry copy;
    if (!tf_entry_is_regular(ent) ||
        tf_entry_clone(ent, NULL, &copy, NULL) < 0)
        return;
    pthread_mutex_lock(&t->lock);
    fs_retired *r = &t->retired[t->next_retired];
    if (r->ino)
        tf_entry_free(&r->ent);
    *r = (fs_retired){ .ino = ino, .ent = copy };
    t->next_retired = (t->next_retired + 1) % FS_RETIRED_MAX;
    pthread_mutex_unlock(&t->lock);
}

fs_handle *fs_handles_open_retired(fs_handles *t, uint64_t ino)
{
    pthread_mutex_lock(&t->lock);
    const tf_entry *ent = retired_version(t, ino);
    fs_handle *h = ent ? fs_handle_new_read(ino, ent, true) : NULL;
    pthread_mutex_unlock(&t->lock);
    return h;
}

typedef struct {
    const uint32_t *mode;
    const struct timespec *mtime;
} new_attrs;

/* (Not a change that makes h the writer's view: every handle of the
 * inode takes it. Bumping h->changed here made one handle of an inode
 * that another had just truncated answer for it, with its old size.) */
static void set_attrs(fs_handles *t, fs_handle *h, const void *arg)
{
    (void)t;
    const new_attrs *a = arg;
    if (a->mode)
        h->attrs.mode = *a->mode & 07777;
    if (a->mtime)
        h->attrs.mtime = *a->mtime;
}

void fs_handles_set_attrs(fs_handles *t, uint64_t ino, const uint32_t *mode,
                          const struct timespec *mtime)
{
    new_attrs a = { mode, mtime };
    each_handle_of(t, ino, set_attrs, &a);
}

void fs_handles_note_flush(fs_handles *t, fs_handle *h)
{
    pthread_mutex_lock(&t->lock);
    h->flushed = true;
    pthread_mutex_unlock(&t->lock);
}

bool fs_handles_pending_commit(fs_handles *t, fs_handle *h, bool unreported,
                               fs_write_attrs *attrs, char name[TF_NAME_MAX + 1])
{
    pthread_mutex_lock(&t->lock);
    bool todo = h->dirty && !h->unlinked && !(unreported && h->failed);
    *attrs = h->attrs;
    memcpy(name, h->name, sizeof h->name);
    pthread_mutex_unlock(&t->lock);
    return todo;
}

void fs_handles_committed(fs_handles *t, fs_handle *h, bool ok)
{
    pthread_mutex_lock(&t->lock);
    h->dirty = !ok;
    h->failed = !ok;
    pthread_mutex_unlock(&t->lock);
}

typedef struct {
    uint64_t parent;
    const char *name;
} place;

static void move_to(fs_handles *t, fs_handle *h, const void *arg)
{
    (void)t;
    const place *p = arg;
    h->attrs.parent = p->parent;
    snprintf(h->name, sizeof h->name, "%s", p->name);
}

void fs_handles_move_ino(fs_handles *t, uint64_t ino, uint64_t parent, const char *name)
{
    place to = { parent, name };
    each_handle_of(t, ino, move_to, &to);
}

static void unlink_one(fs_handles *t, fs_handle *h, const void *arg)
{
    (void)t;
    (void)arg;
    h->unlinked = true;
}

void fs_handles_unlink_ino(fs_handles *t, uint64_t ino)
{
    each_handle_of(t, ino, unlink_one, NULL);
}
