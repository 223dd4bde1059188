/* Format version 2: the archive's catalog read from its pages and
 * written to them (format/paged.h). A read-only view keeps the entries
 * and reads blob records when asked; a writer (or a full check) holds
 * every record in the blob table, as an open of version 1 does, and so
 * checks and applies commits with the same code; only where a commit's
 * catalog goes differs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpus.h"
#include "format/entry_pages.h"
#include "store/archive_impl.h"

int archive_paged_blob(const tf_archive *ar, uint64_t idx, tf_blob *b, tf_error *e)
{
    return tf_paged_blob(ar->paged, idx, b, NULL, e);
}

/* The counts of the last commit's root. */
static void take_root(tf_archive *ar)
{
    const tf_root *r = tf_paged_root(ar->paged);
    ar->commits = r->seq;
    ar->nblobs = r->nblobs;
    ar->next_ino = r->next_ino;
    ar->retired_bytes = r->retired_bytes;
}

/* Slot `slot` of the table from its record (tf_paged_scan's callback). */
static int keep_record(void *arg, uint64_t slot, const tf_blob *b, tf_blob_marks marks,
                       tf_error *e)
{
    tf_archive *ar = arg;
    ar->flags[slot] = marks.flags & TF_BLOB_REDIRECTED ? SLOT_REDIRECTED : 0;
    ar->above[slot] = 0;
    return tf_blob_table_set(&ar->blobs, slot, b, e);
}

int archive_paged_load_table(tf_archive *ar, tf_error *e)
{
    const uint64_t n = ar->nblobs;
    if (n && archive_resize_blobs(ar, n, e) < 0)
        return -1;
    if (tf_paged_scan(ar->paged, keep_record, ar, e) < 0)
        return -1;
    ar->table = true;
    /* A slot's users, not its record's flag, make it a model: a writer
     * must never redirect one. */
    for (uint64_t i = 0; i < n; i++) {
        uint64_t model = tf_blob_table_model(&ar->blobs, i);
        if (model)
            ar->flags[model - 1] |= SLOT_MODEL;
    }
    for (uint64_t i = 0; i < n; i++)
        if (archive_check_slot(ar, i, e) < 0)
            return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t ref = tf_blob_table_ref(&ar->blobs, i);
        if (ref)
            archive_raise_above(ar, ar->above, ref - 1, ar->above[i] + 1u);
    }
    /* A body not read yet is checked against its records by what reads
     * it (tf_archive_load_whole reads them all first). */
    for (size_t i = 0; i < ar->nentries; i++)
        if (!atomic_load_explicit(&ar->entries[i].body_pending, memory_order_acquire) &&
            archive_check_entry(ar, NULL, &ar->entries[i], e) < 0)
            return -1;
    return 0;
}

/* A writer gives back again what the last commit retired (its writer
 * may have died before). */
static int load_retired(tf_archive *ar, tf_error *e)
{
    uint64_t *pairs;
    size_t n;
    if (tf_paged_retired(ar->paged, &pairs, &n, e) < 0)
        return -1;
    free(ar->retired);
    ar->retired = malloc((n ? n : 1) * sizeof *ar->retired);
    if (!ar->retired) {
        free(pairs);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        ar->retired[i] = (tf_archive_range){ pairs[2 * i], pairs[2 * i + 1] };
    ar->nretired = ar->retired_cap = n;
    free(pairs);
    return 0;
}

int archive_need_table(tf_archive *ar, tf_error *e)
{
    return ar->table ? 0 : archive_paged_load_table(ar, e);
}

int tf_archive_use_reference(tf_archive *ar, const tf_entry *ent, tf_error *e)
{
    if (ar->table || !ar->view)
        return 0;
    int rc = writer_view_use(ar, ent, e);
    return rc > 0 ? archive_need_table(ar, e) : rc;
}

int tf_archive_load_whole(tf_archive *ar, tf_error *e)
{
    if (!ar->view)
        return 0;
    /* Bodies first: loading the table checks the entries it finds read;
     * one read after it is checked here. */
    for (size_t i = 0; i < ar->nentries; i++) {
        tf_entry *ent = &ar->entries[i];
        bool pending = atomic_load_explicit(&ent->body_pending, memory_order_acquire);
        if (pending && (tf_archive_entry_body(ar, ent, e) < 0 ||
                        (ar->table && archive_check_entry(ar, NULL, ent, e) < 0)))
            return -1;
    }
    return archive_need_table(ar, e);
}

int archive_paged_open(tf_archive *ar, bool check_all, bool lazy_bodies, size_t cache_bytes,
                       tf_error *e)
{
    tf_entry *ents;
    size_t n;
    /* The default, 16 MiB, holds 240,000 records: the leaves of a few
     * hundred checkpoints' chunks. */
    if (!cache_bytes)
        cache_bytes = TF_CATALOG_CACHE_DEFAULT;
    /* A writer of an archive that holds commits reads the records and
     * the bodies it needs from the pages (store/writer_view.h, and
     * tf_archive_entry_body), unless it asked for them all; one of an
     * empty archive (trajpack create) has the table for nothing, and
     * keeps it as it commits, which costs it less than a lookup in the
     * pages each record (on 1,000 small checkpoints: create took 1.12x
     * the time). */
    bool whole = check_all || (ar->c.writable && !ar->c.has_commit);
    bool lazy = ar->c.writable ? !whole : lazy_bodies && !check_all;
    if (tf_paged_open(&ar->c, cache_bytes, lazy, &ar->paged, &ents, &n, e) < 0)
        return -1;
    ar->entries = ents;
    ar->nentries = ar->entries_cap = n;
    take_root(ar);
    if (archive_check_tree(ar, e) < 0)
        return -1;
    if (whole && archive_paged_load_table(ar, e) < 0)
        return -1;
    if (!ar->c.writable)
        return 0;
    if (!whole && !(ar->view = writer_view_new(ar->c.end)))
        return tf_fail(e, ENOMEM, "out of memory");
    return load_retired(ar, e);
}

int tf_archive_entry_body(const tf_archive *ar, const tf_entry *ent, tf_error *e)
{
    if (!atomic_load_explicit(&ent->body_pending, memory_order_acquire))
        return 0;
    tf_archive *a = (tf_archive *)ar; /* the lock, and the entry's fields, change */
    tf_entry *target = (tf_entry *)ent;
    pthread_mutex_lock(&a->body_lock);
    int rc = 0;
    if (atomic_load_explicit(&ent->body_pending, memory_order_relaxed)) {
        rc = tf_paged_body(ar->paged, target, e);
        if (rc == 0)
            atomic_store_explicit(&target->body_pending, false, memory_order_release);
    }
    pthread_mutex_unlock(&a->body_lock);
    return rc;
}

int tf_archive_pages(tf_archive *ar,
                     int (*fn)(void *arg, uint64_t off, uint64_t len, tf_error *e), void *arg,
                     tf_error *e)
{
    if (!ar->paged)
        return 0;
    if (tf_paged_pages(ar->paged, fn, arg, e) < 0)
        return -1;
    for (size_t i = 0; i < ar->nentries; i++) {
        const tf_page_ref *b = &ar->entries[i].body;
        if (tf_entry_has_body(ar->entries[i].kind) && fn(arg, b->off, b->len, e) < 0)
            return -1;
    }
    return 0;
}

/* ---- a writer's commit ---- */

int archive_paged_prepare(tf_archive *ar, tf_segment *seg, tf_error *e)
{
    (void)ar;
    /* A writer appends its redirects' blobs last (store/commit.c), in
     * redirect order: they get no slot, so nothing else is renumbered. */
    seg->nserving = 0;
    if (!seg->nredirects)
        return 0;
    const uint64_t first = seg->first_blob + seg->nblobs - seg->nredirects;
    if (seg->nredirects > seg->nblobs)
        return tf_fail(e, EINVAL, "a segment of %llu blobs with %llu redirects",
                       (unsigned long long)seg->nblobs, (unsigned long long)seg->nredirects);
    bool *named = calloc(seg->nredirects, sizeof *named);
    if (!named)
        return tf_fail(e, ENOMEM, "out of memory");
    int rc = 0;
    for (uint64_t k = 0; rc == 0 && k < seg->nredirects; k++) {
        uint64_t b = seg->redirects[k].blob;
        if (b < first || b - first >= seg->nredirects || named[b - first])
            rc = tf_fail(e, EINVAL, "redirect of blob %llu: its blob is not one of the "
                         "segment's last, once", (unsigned long long)seg->redirects[k].slot);
        else
            named[b - first] = true;
    }
    free(named);
    if (rc == 0)
        seg->nserving = seg->nredirects;
    return rc;
}

/* Stages the segment's blobs: its own appended, those that serve
 * redirected slots written into the slots' records, and the flag of the
 * models they name. The payloads the redirects retire, as (offset,
 * length) pairs, into a malloc'd *retired. */
static int stage_blobs(tf_archive *ar, const tf_segment *seg, uint64_t **retired, tf_error *e)
{
    tf_paged *p = ar->paged;
    const uint64_t own = seg->nblobs - seg->nserving;
    *retired = malloc((seg->nredirects ? seg->nredirects : 1) * 2 * sizeof **retired);
    uint8_t *model = calloc(own ? own : 1, 1);
    tf_blob_marks *marks = malloc((seg->nredirects ? seg->nredirects : 1) * sizeof *marks);
    int rc = *retired && model && marks ? 0 : tf_fail(e, ENOMEM, "out of memory");
    /* The redirected slots' records as they are, before any is staged. */
    for (uint64_t k = 0; rc == 0 && k < seg->nredirects; k++) {
        const tf_redirect *r = &seg->redirects[k];
        tf_blob old;
        if ((rc = tf_archive_blob(ar, r->slot, &old, e)) < 0)
            break;
        (*retired)[2 * k] = old.offset;
        (*retired)[2 * k + 1] = old.enc_len;
        /* The chains that end at the slot now: a writer that holds no
         * table counts them from here on (store/writer_view.h). */
        unsigned above = archive_chain_count(ar, r->slot);
        marks[k] = (tf_blob_marks){ TF_BLOB_REDIRECTED, above < TF_BLOB_ABOVE_MANY - 1
                                                            ? (uint8_t)(above + 1)
                                                            : TF_BLOB_ABOVE_MANY };
    }
    for (uint64_t i = 0; rc == 0 && i < seg->nblobs; i++) {
        uint64_t m = seg->blobs[i].model;
        if (m && m - 1 >= seg->first_blob)
            model[m - 1 - seg->first_blob] = 1;
        else if (m)
            rc = tf_paged_stage_model(p, m - 1, e);
    }
    for (uint64_t i = 0; rc == 0 && i < own; i++)
        rc = tf_paged_stage_blob(p, seg->first_blob + i, &seg->blobs[i],
                                 (tf_blob_marks){ model[i] ? TF_BLOB_MODEL : 0, 0 }, e);
    for (uint64_t k = 0; rc == 0 && k < seg->nredirects; k++) {
        const tf_redirect *r = &seg->redirects[k];
        rc = tf_paged_stage_blob(p, r->slot, &seg->blobs[r->blob - seg->first_blob], marks[k], e);
    }
    free(model);
    free(marks);
    return rc;
}

int archive_paged_commit(tf_archive *ar, tf_segment *seg, tf_commit_mode mode,
                         bool *previous_synced, tf_error *e)
{
    uint64_t *retired = NULL;
    tf_archive after = { .entries = NULL };
    tf_buf root = { 0 };
    int rc = tf_paged_write_bodies(ar->paged, seg->entries, seg->nentries, e);
    if (rc == 0)
        rc = stage_blobs(ar, seg, &retired, e);
    if (rc == 0)
        rc = archive_scratch_after(ar, seg, &after, e);
    if (rc == 0) {
        tf_paged_change ch = { .before = ar->entries, .nbefore = ar->nentries,
                               .after = after.entries, .nafter = after.nentries,
                               .retired = retired, .nretired = seg->nredirects,
                               .next_ino = archive_next_ino_after(ar, seg),
                               .first_blob = seg->first_blob };
        rc = tf_paged_stage(ar->paged, &ch, &root, e);
        free(after.entries);
    }
    if (rc == 0) {
        rc = tf_container_commit(&ar->c, root.data, root.len,
                                 seg->first_blob + seg->nblobs - seg->nserving, mode,
                                 previous_synced, e);
        if (rc < 0)
            tf_paged_undo(ar->paged);
    } else {
        tf_paged_undo(ar->paged);
    }
    /* The payloads the redirects retire, for the apply of a writer
     * without the table: the pages now read as the commit left them. */
    free(ar->written_retired);
    ar->written_retired = rc == 0 ? retired : NULL;
    if (rc < 0)
        free(retired);
    tf_buf_free(&root);
    return rc;
}

void archive_paged_applied(tf_archive *ar, const tf_segment *seg)
{
    ar->nblobs -= seg->nserving; /* they serve their slots, named by no one */
    /* The pages the commit replaced go back with the payloads its
     * redirects retired (what does not fit stays until trajpack gc). */
    const uint64_t *pairs;
    size_t n;
    tf_paged_replaced(ar->paged, &pairs, &n);
    tf_archive_range *r = realloc(ar->retired, (ar->nretired + n + 1) * sizeof *r);
    if (r) {
        ar->retired = r;
        ar->retired_cap = ar->nretired + n + 1;
        for (size_t i = 0; i < n; i++)
            ar->retired[ar->nretired++] = (tf_archive_range){ pairs[2 * i], pairs[2 * i + 1] };
    }
    tf_paged_done(ar->paged);
}

/* ---- following another process's commits ---- */

/* Whether a and b are the same version of an entry: a file's body page
 * is its record, and pages never change. */
static bool same_version(const tf_entry *a, const tf_entry *b)
{
    if (a->kind != b->kind || a->ino != b->ino || a->mode != b->mode ||
        a->mtime_sec != b->mtime_sec || a->mtime_nsec != b->mtime_nsec || a->size != b->size)
        return false;
    if (a->kind == TF_ENTRY_SYMLINK)
        return strcmp(a->target, b->target) == 0;
    return a->body.off == b->body.off && a->body.len == b->body.len;
}

/* The changes from the entries of ar to ents, as a segment of entries
 * that borrows from both (new versions, and tombstones for the paths
 * gone), for the hooks. */
static int changes_of(const tf_archive *ar, const tf_entry *ents, size_t n, tf_segment *seg,
                      tf_error *e)
{
    *seg = (tf_segment){ .first_blob = ar->nblobs };
    seg->entries = malloc((n + ar->nentries + 1) * sizeof *seg->entries);
    if (!seg->entries)
        return tf_fail(e, ENOMEM, "out of memory");
    size_t i = 0, j = 0;
    while (i < ar->nentries || j < n) {
        const tf_entry *old = i < ar->nentries ? &ar->entries[i] : NULL;
        int c = !old ? 1 : j == n ? -1 : tf_path_cmp(old->path, ents[j].path);
        if (c < 0)
            seg->entries[seg->nentries++] = (tf_entry){ .kind = TF_ENTRY_TOMBSTONE,
                                                        .ino = old->ino, .path = old->path };
        else if (c > 0 || !same_version(old, &ents[j]))
            seg->entries[seg->nentries++] = ents[j];
        i += c <= 0;
        j += c >= 0;
    }
    return 0;
}

/* Whether the commits up to top follow the last one applied: each
 * trailer names the one before, back to it. Otherwise the archive was
 * rewritten, and blob slots the view has may now hold other bytes. */
static int check_follows(const tf_archive *ar, const tf_trailer *top, tf_error *e)
{
    const uint64_t from = ar->c.has_commit ? ar->c.last.seq : 0;
    uint64_t before = top->prev;
    if (top->seq > from + 1 &&
        tf_container_walk_trailers(&ar->c, top->prev, top->seq - 1, from, NULL, NULL, &before,
                                   e) < 0)
        return -1;
    if (top->seq <= from || (from && before != ar->c.end - TF_TRAILER_SIZE))
        return tf_fail(e, EIO, "commit %llu does not follow commit %llu: the archive was rewritten",
                       (unsigned long long)(top->seq <= from ? top->seq : from + 1),
                       (unsigned long long)from);
    return 0;
}

int archive_paged_refresh(tf_archive *ar, const tf_trailer *top, uint64_t at,
                          const tf_archive_hooks *hooks, bool *changed, tf_error *e)
{
    if (check_follows(ar, top, e) < 0)
        return -1;
    tf_entry *ents;
    size_t n;
    if (tf_paged_follow(ar->paged, top, ar->entries, ar->nentries, &ents, &n, e) < 0)
        return -1;
    tf_archive view = { .entries = ents, .nentries = n, .borrowed = true };
    tf_segment seg;
    if (archive_check_tree(&view, e) < 0 || changes_of(ar, ents, n, &seg, e) < 0) {
        tf_paged_undo(ar->paged);
        tf_entries_free(ents, n);
        return -1;
    }
    if (hooks)
        hooks->begin(hooks->arg, &seg);
    tf_paged_done(ar->paged);
    tf_entry *old = ar->entries;
    size_t nold = ar->nentries;
    ar->entries = ents;
    ar->nentries = ar->entries_cap = n;
    take_root(ar);
    ar->c.last = *top;
    ar->c.has_commit = true;
    ar->c.end = at + TF_TRAILER_SIZE;
    if (hooks)
        hooks->end(hooks->arg);
    *changed = true;
    free(seg.entries); /* borrowed */
    tf_entries_free(old, nold);
    return 0;
}
