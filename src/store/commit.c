#include "store/commit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/dtype.h"
#include "common/hash.h"
#include "store/encode.h"
#include "store/give_back.h"
#include "store/liveness.h"

void tf_commit_begin(tf_commit *c, tf_archive *ar, const tf_write_opts *opts,
                     _Atomic uint64_t *next_ino)
{
    *c = (tf_commit){ .ar = ar, .opts = opts, .next_ino = next_ino,
                      .seg = { .first_blob = tf_archive_nblobs(ar) } };
}

static void commit_free(tf_commit *c)
{
    free(c->redirected);
    c->redirected = NULL;
    tf_buf_free(&c->held);
    free(c->held_blobs);
    c->held_blobs = NULL;
    c->nheld = c->held_cap = 0;
    free(c->serving);
    c->serving = NULL;
    c->serving_cap = 0;
    tf_segment_free(&c->seg);
    tf_idmap_free(&c->pending);
}

void tf_commit_abort(tf_commit *c)
{
    tf_container_rollback(tf_archive_container(c->ar));
    commit_free(c);
}

/* Inode numbers past the catalog's bound would make the archive
 * unreadable: refuse the commit instead (after 2^62 files). */
static int check_inos(const tf_commit *c, tf_error *e)
{
    for (uint64_t i = 0; i < c->seg.nentries; i++)
        if (c->seg.entries[i].ino > TF_INO_MAX)
            return tf_fail(e, EOVERFLOW, "the archive has used up its inode numbers");
    return 0;
}

bool tf_commit_changes_names(const tf_archive *ar, const tf_entry *ent)
{
    if (ent->kind == TF_ENTRY_TOMBSTONE)
        return true;
    const tf_entry *old = tf_archive_lookup(ar, ent->path);
    return !old || old->ino != ent->ino;
}

/* Whether the commit has an entry at path, or removes a directory above
 * it. */
static bool commit_covers(const tf_commit *c, const char *path)
{
    for (uint64_t i = 0; i < c->seg.nentries; i++) {
        const tf_entry *ent = &c->seg.entries[i];
        size_t n = strlen(ent->path);
        if (strcmp(ent->path, path) == 0 ||
            (ent->kind == TF_ENTRY_TOMBSTONE && strncmp(path, ent->path, n) == 0 && path[n] == '/'))
            return true;
    }
    return false;
}

/* tf_write_opts.dir_times: the directories whose names the commit
 * changes get its time (the root has no entry: its times are the
 * archive's). */
static int touch_directories(tf_commit *c, tf_error *e)
{
    struct timespec now;
    tf_time_of_day(&now);
    uint64_t n = c->seg.nentries; /* those touched are appended */
    for (uint64_t i = 0; i < n; i++) {
        char dir[TF_PATH_MAX + 1];
        const char *path = c->seg.entries[i].path;
        const char *slash = strrchr(path, '/');
        if (!slash || !tf_commit_changes_names(c->ar, &c->seg.entries[i]))
            continue;
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        const tf_entry *d = tf_archive_lookup(c->ar, dir);
        if (d && d->kind == TF_ENTRY_DIR && !commit_covers(c, dir) &&
            tf_commit_set_attrs(c, dir, d->mode, now, e) < 0)
            return -1;
    }
    return 0;
}

int tf_commit_give_back(tf_archive *ar, const uint8_t *live, const tf_archive_range *dead,
                        size_t ndead, tf_error *e)
{
    size_t nretired;
    const tf_archive_range *retired = tf_archive_retired(ar, &nretired);
    if (!nretired && !ndead)
        return 0;
    tf_archive_range *r = malloc((nretired + ndead) * sizeof *r);
    if (!r)
        return tf_fail(e, ENOMEM, "out of memory to give back retired space");
    if (nretired)
        memcpy(r, retired, nretired * sizeof *r);
    if (ndead)
        memcpy(r + nretired, dead, ndead * sizeof *r);
    int rc = tf_give_back(ar, live, r, nretired + ndead, e);
    free(r);
    return rc;
}

int tf_commit_give_back_last(tf_archive *ar, tf_error *e)
{
    return tf_commit_give_back(ar, NULL, NULL, 0, e);
}

static int cmp_redirect(const void *a, const void *b)
{
    uint64_t x = ((const tf_redirect *)a)->slot, y = ((const tf_redirect *)b)->slot;
    return x < y ? -1 : x > y;
}

static int write_held(tf_commit *c, tf_error *e); /* with the blobs, below */

typedef struct {
    const tf_archive *ar;
    uint8_t *live;
    int more; /* 1, 0, or -1 from the first version that failed */
    tf_error *e;
} keep_ctx;

static void keep_version(void *arg, const tf_entry *ent)
{
    keep_ctx *k = arg;
    if (k->more >= 0) {
        int more = tf_liveness_keep(k->ar, k->live, ent, k->e);
        k->more = more < 0 ? -1 : k->more | more;
    }
}

int tf_commit_keep_open_versions(const tf_archive *ar, const tf_write_opts *opts, uint8_t *live,
                                 tf_error *e)
{
    keep_ctx k = { ar, live, 0, e };
    if (opts->open_versions)
        opts->open_versions(opts->open_versions_arg, keep_version, &k);
    return k.more;
}

/* The previous commit, written behind (tf_write_opts.commit_behind), is
 * durable now that this one waited for it: what that commit retired goes
 * back now, as it would have after its own trailer's sync. The archive
 * is still as that commit left it. */
static void give_back_previous(tf_commit *c)
{
    tf_error why = { 0 };
    if (tf_commit_give_back_last(c->ar, &why) < 0 && !c->give_back.errnum)
        c->give_back = why;
}

/* Gives back what the commit just applied left unread: the payloads its
 * redirects retired, and those of the slots that live files needed before (`before`, of nbefore slots; NULL
 * when the commit dropped no file) and need no more, but what open
 * versions read (c->kept_open when that kept any). A failure is only
 * noted, in c->give_back: the space stays in use until trajpack gc. */
static void give_back_after(tf_commit *c, const uint8_t *before, uint64_t nbefore)
{
    tf_archive_range *dead = NULL;
    size_t ndead = 0;
    uint8_t *now = before ? tf_liveness(c->ar, NULL, &c->give_back) : NULL;
    int kept = now ? tf_commit_keep_open_versions(c->ar, c->opts, now, &c->give_back) : 0;
    if (kept < 0) { /* what open versions read is not known: give back no file's data */
        free(now);
        now = NULL;
    }
    c->kept_open = kept > 0;
    if (now)
        tf_liveness_died(c->ar, before, nbefore, now, &dead, &ndead, &c->give_back);
    tf_error why = { 0 };
    if (tf_commit_give_back(c->ar, now, dead, ndead, &why) < 0 &&
        !c->give_back.errnum)
        c->give_back = why;
    free(now);
    free(dead);
}

/* Appends the redirects' blobs to the segment, after its others, and
 * names them in their redirects. */
static int serve_last(tf_commit *c, tf_error *e)
{
    tf_segment *seg = &c->seg;
    if (!seg->nredirects)
        return 0;
    uint64_t n = seg->nblobs + seg->nredirects;
    if (n > c->blobs_cap) {
        tf_blob *b = realloc(seg->blobs, n * sizeof *b);
        if (!b)
            return tf_fail(e, ENOMEM, "out of memory");
        seg->blobs = b;
        c->blobs_cap = n;
    }
    for (uint64_t k = 0; k < seg->nredirects; k++) {
        seg->blobs[seg->nblobs + k] = c->serving[seg->redirects[k].blob];
        seg->redirects[k].blob = seg->first_blob + seg->nblobs + k;
    }
    seg->nblobs = n;
    return 0;
}

int tf_commit_finish(tf_commit *c, tf_error *e)
{
    c->give_back = (tf_error){ 0 };
    c->dropped = c->kept_open = false;
    uint8_t *before = NULL;
    uint64_t nbefore = tf_archive_nblobs(c->ar);
    int rc = write_held(c, e);
    if (rc == 0)
        rc = serve_last(c, e);
    /* The catalog lists redirects by slot. */
    if (c->seg.nredirects)
        qsort(c->seg.redirects, c->seg.nredirects, sizeof *c->seg.redirects, cmp_redirect);
    if (rc == 0 && c->opts->dir_times)
        rc = touch_directories(c, e);
    if (rc == 0)
        rc = check_inos(c, e);
    if (rc == 0)
        rc = tf_archive_prepare(c->ar, &c->seg, e);
    /* Once its trailer is written a commit is part of the archive: what
     * an open would refuse must be refused here, before. */
    if (rc == 0)
        rc = tf_archive_check_segment(c->ar, &c->seg, e);
    if (rc == 0 && (c->seg.nentries || c->seg.nblobs)) {
        c->dropped = tf_archive_segment_drops(c->ar, &c->seg);
        if (c->dropped)
            before = tf_liveness(c->ar, NULL, &c->give_back);
        /* A commit that drops files gives their space back at once. */
        bool behind = c->opts->commit_behind && !c->dropped, previous_synced = false;
        rc = tf_archive_write(c->ar, &c->seg, behind ? TF_COMMIT_BEHIND : TF_COMMIT_DURABLE,
                              &previous_synced, e);
        if (previous_synced)
            give_back_previous(c);
        if (rc == 0) {
            const tf_archive_hooks *hooks = c->opts->applied;
            if (hooks)
                hooks->begin(hooks->arg, &c->seg);
            rc = tf_archive_apply(c->ar, &c->seg, e); /* takes the segment */
            if (hooks)
                hooks->end(hooks->arg);
            /* Durable: no committed state reads what it retired. Written
             * behind: given back once the next commit, or settling, has
             * waited for it. */
            if (!behind)
                give_back_after(c, rc == 0 ? before : NULL, nbefore);
        }
    }
    if (rc < 0)
        tf_container_rollback(tf_archive_container(c->ar)); /* no-op once committed */
    free(before);
    commit_free(c);
    return rc;
}

/* ---- entries ---- */

/* A zeroed entry appended to the segment (counted at once, so that a
 * failure after this frees whatever was filled in). */
static tf_entry *append_entry(tf_commit *c, tf_error *e)
{
    if (c->seg.nentries == c->entries_cap) {
        uint64_t cap = c->entries_cap ? c->entries_cap * 2 : 8;
        tf_entry *n = realloc(c->seg.entries, cap * sizeof *n);
        if (!n) {
            tf_fail(e, ENOMEM, "out of memory");
            return NULL;
        }
        c->seg.entries = n;
        c->entries_cap = cap;
    }
    tf_entry *ent = &c->seg.entries[c->seg.nentries++];
    *ent = (tf_entry){ 0 };
    return ent;
}

tf_entry *tf_commit_entry(tf_commit *c, const char *path, uint8_t kind,
                          const tf_entry_attrs *attrs, tf_error *e)
{
    tf_entry *ent = append_entry(c, e);
    if (!ent)
        return NULL;
    ent->kind = kind;
    if (!(ent->path = strdup(path))) {
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    struct timespec mtime;
    if (attrs) {
        ent->mode = attrs->mode & 07777;
        mtime = attrs->mtime;
        ent->ino = attrs->ino;
    } else {
        ent->mode = 0755;
        tf_time_of_day(&mtime);
    }
    if (!ent->ino) {
        /* A directory added again keeps its inode (NFS handles stay
         * valid); new content gets a new one, never reused. */
        const tf_entry *old = tf_archive_lookup(c->ar, path);
        ent->ino = old && old->kind == TF_ENTRY_DIR && kind == TF_ENTRY_DIR
                   ? old->ino : atomic_fetch_add(c->next_ino, 1);
    }
    ent->mtime_sec = mtime.tv_sec;
    ent->mtime_nsec = (uint32_t)mtime.tv_nsec;
    return ent;
}

int tf_commit_parents(tf_commit *c, const char *path, tf_error *e)
{
    char buf[TF_PATH_MAX + 1];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = strchr(buf, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        const tf_entry *have = tf_archive_lookup(c->ar, buf);
        if (have && have->kind != TF_ENTRY_DIR)
            return tf_fail(e, ENOTDIR, "%s: \"%s\" is not a directory in the archive", path, buf);
        if (!have && !tf_commit_entry(c, buf, TF_ENTRY_DIR, NULL, e))
            return -1;
        *s = '/';
    }
    return 0;
}

/* ---- blobs ---- */

int64_t tf_commit_find_blob(const tf_commit *c, const tf_blob_id *id)
{
    uint64_t idx;
    if (tf_idmap_get(&c->pending, id, &idx))
        return (int64_t)idx;
    return tf_archive_find_blob(c->ar, id);
}

/* Makes room in the array *p of *cap items of `size` bytes, n of them
 * used, for one more. */
static int room_for_one(void **p, uint64_t *cap, uint64_t n, size_t size, tf_error *e)
{
    if (n < *cap)
        return 0;
    uint64_t more = *cap ? *cap * 2 : 64;
    void *q = realloc(*p, more * size);
    if (!q)
        return tf_fail(e, ENOMEM, "out of memory");
    *p = q;
    *cap = more;
    return 0;
}

/* A held record that is a redirect's (in serving, not seg.blobs). */
#define HELD_SERVING (UINT64_C(1) << 63)

/* The record `held` names (see tf_commit.held_blobs). */
static tf_blob *held_record(tf_commit *c, uint64_t held)
{
    return held & HELD_SERVING ? &c->serving[held & ~HELD_SERVING] : &c->seg.blobs[held];
}

/* Holds back the payload of the blob being appended, whose record is
 * `held` (see tf_commit.held_blobs), written by write_held. */
static int hold(tf_commit *c, const tf_buf *payload, uint64_t held, tf_error *e)
{
    if (room_for_one((void **)&c->held_blobs, &c->held_cap, c->nheld, sizeof *c->held_blobs,
                     e) < 0)
        return -1;
    if (tf_buf_put(&c->held, payload->data, payload->len) < 0)
        return tf_fail(e, ENOMEM, "out of memory");
    c->held_blobs[c->nheld++] = held;
    return 0;
}

/* Writes the payloads held back, with those that stay: after the run of
 * retirable ones they were held back from. */
static int write_held(tf_commit *c, tf_error *e)
{
    if (!c->nheld)
        return 0;
    uint64_t off;
    if (tf_container_append(tf_archive_container(c->ar), c->held.data, c->held.len, &off, e) < 0)
        return -1;
    for (uint64_t i = 0; i < c->nheld; i++) {
        tf_blob *b = held_record(c, c->held_blobs[i]);
        b->offset = off;
        off += b->enc_len;
    }
    c->nheld = 0;
    c->held.len = 0;
    return 0;
}

/* Appends a blob's payload and records it: in the segment (its index is
 * returned), or, for a redirect's blob (serving), in c->serving (the
 * index there is returned). A small payload that stays (a keyframe too
 * small to give back, whose delta was no smaller; a model) coming while
 * a run of retirable ones is open is held back (write_held), so that it
 * does not share the run's blocks; one that the next commit is likely
 * to retire (retire_soon) goes in the run whatever its size, to be given
 * back with its neighbours. */
static int64_t append_blob(tf_commit *c, const tf_blob *desc, const tf_buf *payload,
                           bool retire_soon, bool serving, tf_error *e)
{
    uint64_t *n = serving ? &c->seg.nredirects : &c->seg.nblobs;
    if (room_for_one(serving ? (void **)&c->serving : (void **)&c->seg.blobs,
                     serving ? &c->serving_cap : &c->blobs_cap, *n, sizeof(tf_blob), e) < 0)
        return -1;
    tf_blob *b = serving ? &c->serving[*n] : &c->seg.blobs[*n];
    *b = *desc;
    b->enc_len = payload->len;
    b->enc_hash = tf_hash64(payload->data, payload->len);
    tf_container *ct = tf_archive_container(c->ar);
    int rc;
    if (retire_soon || tf_blob_in_retirable_run(b))
        rc = tf_container_append_retirable(ct, payload->data, payload->len, &b->offset, e);
    else if (ct->retirable_run && payload->len < TF_GIVE_BACK_MIN &&
             c->held.len + payload->len <= tf_write_opts_held_bytes(c->opts) / 8)
        rc = hold(c, payload, *n | (serving ? HELD_SERVING : 0), e);
    else if ((rc = write_held(c, e)) == 0)
        rc = tf_container_append(ct, payload->data, payload->len, &b->offset, e);
    if (rc < 0)
        return -1;
    return serving ? (int64_t)*n : (int64_t)(c->seg.first_blob + c->seg.nblobs++);
}

/* Appends a blob (append_blob) that later ones may name by its id. */
static int64_t store_blob(tf_commit *c, const tf_blob *desc, const tf_buf *payload,
                          bool retire_soon, tf_error *e)
{
    int64_t idx = append_blob(c, desc, payload, retire_soon, false, e);
    if (idx >= 0 && tf_idmap_put(&c->pending, &desc->id, (uint64_t)idx) < 0)
        return tf_fail(e, ENOMEM, "out of memory");
    return idx;
}

int64_t tf_commit_store_blob(tf_commit *c, const tf_blob_id *id, const tf_buf *payload,
                             uint64_t raw_len, uint8_t codec, uint8_t dtype, uint64_t ref,
                             uint64_t model, tf_error *e)
{
    tf_blob desc = { .id = *id, .raw_len = raw_len, .codec = codec, .dtype = dtype,
                     .ref = ref, .model = model };
    return store_blob(c, &desc, payload, false, e);
}

int64_t tf_commit_store_keyframe(tf_commit *c, const tf_blob_id *id, const tf_buf *payload,
                                 uint64_t raw_len, uint8_t codec, uint8_t dtype,
                                 bool retire_soon, tf_error *e)
{
    tf_blob desc = { .id = *id, .raw_len = raw_len, .codec = codec, .dtype = dtype };
    return store_blob(c, &desc, payload, retire_soon && dtype != TF_DT_NONE, e);
}

/* 1 when blob idx (stored, or appended by this commit) decodes alone,
 * 0 when not, -1 with the reason when its record cannot be read. */
static int blob_stands_alone(const tf_commit *c, uint64_t idx, tf_error *e)
{
    const tf_segment *seg = &c->seg;
    tf_blob b;
    if (idx >= seg->first_blob)
        b = seg->blobs[idx - seg->first_blob];
    else if (tf_archive_blob(c->ar, idx, &b, e) < 0)
        return -1;
    return !b.ref && !b.model;
}

int tf_model_blob_make(const tf_buf *model, tf_model_blob *m, tf_error *e)
{
    tf_chunk_job job = { .src = model->data, .len = model->len, .dtype = TF_DT_NONE };
    if (tf_encode_chunk(&job, e) < 0)
        return -1;
    tf_buf_free(&job.model); /* opaque bytes' codecs have none */
    *m = (tf_model_blob){ .id = tf_blob_id_of(model->data, model->len), .raw_len = model->len,
                          .codec = job.codec, .out = job.out };
    return 0;
}

int tf_model_blob_copy(const tf_model_blob *src, tf_model_blob *dst, tf_error *e)
{
    *dst = (tf_model_blob){ .id = src->id, .raw_len = src->raw_len, .codec = src->codec };
    if (tf_buf_put(&dst->out, src->out.data, src->out.len) < 0)
        return tf_fail(e, ENOMEM, "out of memory for a model");
    return 0;
}

void tf_model_blob_free(tf_model_blob *m)
{
    tf_buf_free(&m->out);
    *m = (tf_model_blob){ 0 };
}

/* Stores m unless the same bytes, decoding alone, are stored already:
 * by this commit, or (archive_wide) by any. */
static int64_t store_model_blob(tf_commit *c, const tf_model_blob *m, bool archive_wide,
                                tf_error *e)
{
    uint64_t idx;
    int64_t have = tf_idmap_get(&c->pending, &m->id, &idx) ? (int64_t)idx
                   : archive_wide                          ? tf_archive_find_blob(c->ar, &m->id)
                                                           : -1;
    /* Same bytes stored as a delta cannot serve as a model, which must
     * decode alone. */
    int alone = have >= 0 ? blob_stands_alone(c, (uint64_t)have, e) : 0;
    if (alone != 0)
        return alone > 0 ? have : -1;
    return tf_commit_store_blob(c, &m->id, &m->out, m->raw_len, m->codec, TF_DT_NONE, 0, 0, e);
}

int64_t tf_commit_store_model_blob(tf_commit *c, const tf_model_blob *m, tf_error *e)
{
    return store_model_blob(c, m, true, e);
}

int64_t tf_commit_store_rebased_model(tf_commit *c, const tf_model_blob *m, tf_error *e)
{
    return store_model_blob(c, m, false, e);
}

/* Marks slot as redirected by this commit: 1 when it was already, 0
 * when it is now, -1 without memory (a bit per slot of the archive). */
static int mark_redirected(tf_commit *c, uint64_t slot, tf_error *e)
{
    if (!c->redirected &&
        !(c->redirected = calloc(c->seg.first_blob / 64 + 1, sizeof *c->redirected)))
        return tf_fail(e, ENOMEM, "out of memory");
    uint64_t bit = UINT64_C(1) << (slot % 64);
    if (c->redirected[slot / 64] & bit)
        return 1;
    c->redirected[slot / 64] |= bit;
    return 0;
}

int tf_commit_redirect(tf_commit *c, uint64_t slot, const tf_buf *payload, uint8_t codec,
                       uint64_t ref, uint64_t model, tf_error *e)
{
    if (slot >= c->seg.first_blob)
        return tf_fail(e, EINVAL, "blob %llu is not stored yet", (unsigned long long)slot);
    bool again;
    if (!tf_archive_may_redirect(c->ar, slot, &again))
        return tf_fail(e, EINVAL, "blob %llu is a model or serves another: it cannot be "
                       "redirected", (unsigned long long)slot);
    tf_blob old;
    if (tf_archive_blob(c->ar, slot, &old, e) < 0)
        return -1;
    int was = mark_redirected(c, slot, e);
    if (was != 0)
        return was > 0 ? 0 : -1;
    c->seg.redirects_again |= again;
    if (room_for_one((void **)&c->seg.redirects, &c->redirects_cap, c->seg.nredirects,
                     sizeof *c->seg.redirects, e) < 0)
        return -1;
    /* Not in `pending`: the content's users keep naming the slot. */
    tf_blob desc = { .id = old.id, .raw_len = old.raw_len, .codec = codec,
                     .dtype = old.dtype, .ref = ref, .model = model };
    int64_t k = append_blob(c, &desc, payload, false, true, e);
    if (k < 0)
        return -1;
    /* Its blob's index is known once the segment's others are all in
     * (serve_last). */
    c->seg.redirects[c->seg.nredirects++] = (tf_redirect){ slot, (uint64_t)k };
    return 0;
}

/* ---- edits of the tree ---- */

static int check_new_path(const tf_commit *c, const char *path, tf_error *e)
{
    if (tf_path_check(path, strlen(path), e) < 0)
        return -1;
    if (tf_archive_lookup(c->ar, path))
        return tf_fail(e, EEXIST, "%s: exists", path);
    return 0;
}

int tf_commit_mkdir(tf_commit *c, const char *path, const tf_entry_attrs *attrs, tf_error *e)
{
    if (check_new_path(c, path, e) < 0 || tf_commit_parents(c, path, e) < 0)
        return -1;
    return tf_commit_entry(c, path, TF_ENTRY_DIR, attrs, e) ? 0 : -1;
}

int tf_commit_symlink(tf_commit *c, const char *path, const char *target,
                      const tf_entry_attrs *attrs, tf_error *e)
{
    size_t n = strlen(target);
    if (n == 0 || n > TF_PATH_MAX)
        return tf_fail(e, n ? ENAMETOOLONG : ENOENT, "%s: link target of %zu bytes", path, n);
    if (check_new_path(c, path, e) < 0 || tf_commit_parents(c, path, e) < 0)
        return -1;
    tf_entry *ent = tf_commit_entry(c, path, TF_ENTRY_SYMLINK, attrs, e);
    if (!ent)
        return -1;
    ent->size = n;
    if (!(ent->target = strdup(target)))
        return tf_fail(e, ENOMEM, "out of memory");
    return 0;
}

/* The live entry at path, or NULL after an ENOENT. */
static const tf_entry *existing(const tf_commit *c, const char *path, long *at, tf_error *e)
{
    *at = tf_archive_find(c->ar, path);
    if (*at < 0) {
        tf_fail(e, ENOENT, "%s: no such file or directory in the archive", path);
        return NULL;
    }
    return tf_archive_entry(c->ar, (size_t)*at);
}

static int add_tombstone(tf_commit *c, const tf_entry *gone, tf_error *e)
{
    tf_entry_attrs a = { .ino = gone->ino };
    tf_time_of_day(&a.mtime);
    return tf_commit_entry(c, gone->path, TF_ENTRY_TOMBSTONE, &a, e) ? 0 : -1;
}

int tf_commit_remove(tf_commit *c, const char *path, tf_error *e)
{
    long at;
    const tf_entry *gone = existing(c, path, &at, e);
    return gone ? add_tombstone(c, gone, e) : -1;
}

/* A copy of the archive's entry old into the commit, at path (NULL: the
 * same). Its body is read first: the commit writes the copy's body as
 * its own, and the old page goes with the old entry. */
static int clone_entry(tf_commit *c, const tf_entry *old, const char *path, tf_entry *ent,
                       tf_error *e)
{
    if (tf_archive_entry_body(c->ar, old, e) < 0)
        return -1;
    return tf_entry_clone(old, path, ent, e);
}

/* rename(2)'s rules for replacing `dst` with `src`. */
static int check_replace(const tf_commit *c, const tf_entry *src, const char *to, tf_error *e)
{
    long at = tf_archive_find(c->ar, to);
    if (at < 0)
        return 0;
    const tf_entry *dst = tf_archive_entry(c->ar, (size_t)at);
    bool src_dir = src->kind == TF_ENTRY_DIR, dst_dir = dst->kind == TF_ENTRY_DIR;
    if (src_dir && !dst_dir)
        return tf_fail(e, ENOTDIR, "%s: not a directory", to);
    if (!src_dir && dst_dir)
        return tf_fail(e, EISDIR, "%s: is a directory", to);
    if (dst_dir && tf_archive_subtree_len(c->ar, (size_t)at) > 1)
        return tf_fail(e, ENOTEMPTY, "%s: directory not empty", to);
    return 0;
}

int tf_commit_move(tf_commit *c, const char *from, const char *to, tf_error *e)
{
    long at;
    const tf_entry *src = existing(c, from, &at, e);
    if (!src || tf_path_check(to, strlen(to), e) < 0)
        return -1;
    if (strcmp(from, to) == 0)
        return 0;
    size_t flen = strlen(from);
    if (strncmp(to, from, flen) == 0 && to[flen] == '/')
        return tf_fail(e, EINVAL, "cannot move %s into itself", from);
    if (check_replace(c, src, to, e) < 0 || tf_commit_parents(c, to, e) < 0 ||
        add_tombstone(c, src, e) < 0)
        return -1;
    /* The subtree follows its root in archive order; the tombstone comes
     * first so that the moved entries are the only ones with their inodes
     * once applied. */
    size_t n = tf_archive_subtree_len(c->ar, (size_t)at);
    char path[TF_PATH_MAX + 1];
    for (size_t k = 0; k < n; k++) {
        const tf_entry *old = tf_archive_entry(c->ar, (size_t)at + k);
        int len = snprintf(path, sizeof path, "%s%s", to, old->path + flen);
        if (len < 0 || (size_t)len > TF_PATH_MAX)
            return tf_fail(e, ENAMETOOLONG, "%s%s: path too long", to, old->path + flen);
        if (tf_path_check(path, (size_t)len, e) < 0)
            return -1;
        tf_entry *ent = append_entry(c, e);
        if (!ent || clone_entry(c, old, path, ent, e) < 0)
            return -1;
    }
    return 0;
}

int tf_commit_set_attrs(tf_commit *c, const char *path, uint32_t mode, struct timespec mtime,
                        tf_error *e)
{
    long at;
    const tf_entry *old = existing(c, path, &at, e);
    tf_entry *ent = old ? append_entry(c, e) : NULL;
    if (!ent || clone_entry(c, old, NULL, ent, e) < 0)
        return -1;
    ent->mode = mode & 07777;
    ent->mtime_sec = mtime.tv_sec;
    ent->mtime_nsec = (uint32_t)mtime.tv_nsec;
    return 0;
}
