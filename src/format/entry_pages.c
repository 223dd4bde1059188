#include "format/entry_pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tf_path_cmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca == cb) {
            if (!ca)
                return 0;
            continue;
        }
        if (!ca || !cb)
            return ca ? 1 : -1;
        ca = ca == '/' ? 1 : ca;
        cb = cb == '/' ? 1 : cb;
        return ca < cb ? -1 : 1;
    }
}

static uint64_t zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag64(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static size_t shared_prefix(const char *a, const char *b)
{
    size_t n = 0;
    while (a[n] && a[n] == b[n])
        n++;
    return n;
}

/* A header: kind, inode, the length shared with the previous path and
 * the rest of the path, mode, mtime, size; then a symlink's target, or
 * a file's body reference. */
int tf_entry_header_put(tf_buf *out, const tf_entry *ent, const char *prev,
                        const tf_page_ref *body, tf_error *e)
{
    size_t shared = prev ? shared_prefix(prev, ent->path) : 0, len = strlen(ent->path);
    int rc = tf_buf_u8(out, ent->kind) | tf_buf_varint(out, ent->ino) |
             tf_buf_varint(out, shared) | tf_buf_varint(out, len - shared) |
             tf_buf_put(out, ent->path + shared, len - shared) | tf_buf_varint(out, ent->mode) |
             tf_buf_varint(out, zigzag64(ent->mtime_sec)) | tf_buf_varint(out, ent->mtime_nsec) |
             tf_buf_varint(out, ent->size);
    if (ent->kind == TF_ENTRY_SYMLINK)
        rc |= tf_buf_put(out, ent->target, ent->size);
    if (tf_entry_has_body(ent->kind)) {
        uint8_t *p = tf_buf_reserve(out, TF_PAGE_REF_SIZE);
        if (p) {
            tf_page_ref_put(p, body);
            tf_buf_commit(out, TF_PAGE_REF_SIZE);
        }
        rc |= p ? 0 : -1;
    }
    return rc ? tf_fail(e, ENOMEM, "entries: out of memory") : 0;
}

static int short_page(const tf_cursor *r, tf_error *e)
{
    return tf_fail(e, EIO, "entries: page truncated at byte %zu", r->pos);
}

/* Reads a path of `keep` bytes of prev (NULL: none) and a suffix (its
 * varint length, its bytes) into a new string, checked as a catalog
 * path. */
static int read_path(tf_cursor *r, const char *prev, uint64_t keep, char **out, tf_error *e)
{
    uint64_t more = tf_read_varint(r);
    if (r->bad)
        return short_page(r, e);
    size_t have = prev ? strlen(prev) : 0;
    if (keep > have || more > TF_PATH_MAX || keep + more > TF_PATH_MAX || keep + more == 0)
        return tf_fail(e, EIO, "entries: path of %llu + %llu bytes", (unsigned long long)keep,
                       (unsigned long long)more);
    const uint8_t *suffix = tf_read_bytes(r, more);
    if (!suffix)
        return short_page(r, e);
    char *path = malloc(keep + more + 1);
    if (!path)
        return tf_fail(e, ENOMEM, "entries: out of memory");
    if (keep) /* prev may be NULL then */
        memcpy(path, prev, keep);
    memcpy(path + keep, suffix, more);
    path[keep + more] = '\0';
    if (strlen(path) != keep + more || tf_path_check(path, keep + more, e) < 0) {
        free(path);
        /* The reason, not the path: it may hold control characters. */
        return tf_fail(e, EIO, "entries: invalid path");
    }
    *out = path;
    return 0;
}

/* The fields after the path; *body set for a file. */
static int read_header_rest(tf_cursor *r, tf_entry *ent, tf_page_ref *body, tf_error *e)
{
    uint64_t mode = tf_read_varint(r);
    ent->mtime_sec = unzigzag64(tf_read_varint(r));
    uint64_t nsec = tf_read_varint(r);
    ent->size = tf_read_varint(r);
    if (r->bad)
        return short_page(r, e);
    if (mode > 07777 || nsec >= 1000000000u || ent->ino < 2 || ent->ino > TF_INO_MAX)
        return tf_fail(e, EIO, "entries: \"%s\" has a bad mode, mtime or inode", ent->path);
    ent->mode = (uint32_t)mode;
    ent->mtime_nsec = (uint32_t)nsec;
    switch (ent->kind) {
    case TF_ENTRY_DIR:
        return ent->size ? tf_fail(e, EIO, "entries: directory \"%s\" has a size", ent->path) : 0;
    case TF_ENTRY_SYMLINK: {
        const uint8_t *t = ent->size <= TF_PATH_MAX ? tf_read_bytes(r, ent->size) : NULL;
        if (!t || memchr(t, 0, ent->size) || !ent->size)
            return tf_fail(e, EIO, "entries: \"%s\" has a bad link target", ent->path);
        if (!(ent->target = malloc(ent->size + 1)))
            return tf_fail(e, ENOMEM, "entries: out of memory");
        memcpy(ent->target, t, ent->size);
        ent->target[ent->size] = '\0';
        return 0;
    }
    case TF_ENTRY_FILE:
    case TF_ENTRY_TENSORS: {
        const uint8_t *p = tf_read_bytes(r, TF_PAGE_REF_SIZE);
        if (!p)
            return short_page(r, e);
        *body = tf_page_ref_get(p);
        return 0;
    }
    default:
        return tf_fail(e, EIO, "entries: \"%s\" has kind %u", ent->path, ent->kind);
    }
}

int tf_entry_leaf_parse(const tf_page *pg, tf_entry_header_fn fn, void *arg, tf_error *e)
{
    tf_cursor r = tf_cursor_make(pg->data, pg->len);
    char *prev = NULL;
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < pg->count; i++) {
        tf_entry ent = { .kind = tf_read_u8(&r), .ino = tf_read_varint(&r) };
        tf_page_ref body = { 0 };
        uint64_t keep = tf_read_varint(&r);
        rc = r.bad ? short_page(&r, e) : read_path(&r, prev, keep, &ent.path, e);
        if (rc == 0 && prev && tf_path_cmp(prev, ent.path) >= 0)
            rc = tf_fail(e, EIO, "entries: \"%s\" out of order", ent.path);
        if (rc == 0)
            rc = read_header_rest(&r, &ent, &body, e);
        free(prev);
        prev = rc == 0 ? strdup(ent.path) : NULL;
        if (rc == 0 && !prev)
            rc = tf_fail(e, ENOMEM, "entries: out of memory");
        if (rc == 0)
            rc = fn(arg, &ent, &body, e);
        else
            tf_entry_free(&ent);
    }
    free(prev);
    if (rc == 0 && tf_cursor_left(&r))
        rc = tf_fail(e, EIO, "entries: %zu bytes after the last header", tf_cursor_left(&r));
    return rc;
}

int tf_entry_node_put(tf_buf *out, const tf_entry_child *child, tf_error *e)
{
    size_t len = strlen(child->first);
    uint8_t *p = tf_buf_reserve(out, TF_PAGE_REF_SIZE);
    if (p) {
        tf_page_ref_put(p, &child->ref);
        tf_buf_commit(out, TF_PAGE_REF_SIZE);
    }
    if (!p || (tf_buf_varint(out, len) | tf_buf_put(out, child->first, len)))
        return tf_fail(e, ENOMEM, "entries: out of memory");
    return 0;
}

void tf_entry_children_free(tf_entry_child *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++)
        free(c[i].first);
    free(c);
}

int tf_entry_node_parse(const tf_page *pg, tf_entry_child **out, size_t *n, tf_error *e)
{
    /* A child takes 21 bytes or more: the count is bounded by the page. */
    if (!pg->count || pg->count > pg->len / (TF_PAGE_REF_SIZE + 1))
        return tf_fail(e, EIO, "entries: node of %u children in %zu bytes", pg->count, pg->len);
    tf_entry_child *c = calloc(pg->count, sizeof *c);
    if (!c)
        return tf_fail(e, ENOMEM, "entries: out of memory");
    tf_cursor r = tf_cursor_make(pg->data, pg->len);
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < pg->count; i++) {
        const uint8_t *p = tf_read_bytes(&r, TF_PAGE_REF_SIZE);
        if (!p) {
            rc = short_page(&r, e);
            break;
        }
        c[i].ref = tf_page_ref_get(p);
        rc = read_path(&r, NULL, 0, &c[i].first, e);
        if (rc == 0 && i && tf_path_cmp(c[i - 1].first, c[i].first) >= 0)
            rc = tf_fail(e, EIO, "entries: node children out of order");
    }
    if (rc == 0 && tf_cursor_left(&r))
        rc = tf_fail(e, EIO, "entries: %zu bytes after the last child", tf_cursor_left(&r));
    if (rc < 0) {
        tf_entry_children_free(c, pg->count);
        return -1;
    }
    *out = c;
    *n = pg->count;
    return 0;
}

int tf_entry_body_write(const tf_page_sink *sink, const tf_entry *ent, tf_page_ref *ref,
                        tf_error *e)
{
    tf_buf raw = { 0 };
    int rc = tf_entry_encode(ent, &raw, e);
    if (rc == 0)
        rc = tf_page_write(sink, TF_PAGE_BODY, 0, 1, raw.data, raw.len, ref, e);
    tf_buf_free(&raw);
    return rc;
}

/* Whether the body repeats the header. */
static bool same_header(const tf_entry *h, const tf_entry *b)
{
    return h->kind == b->kind && h->ino == b->ino && strcmp(h->path, b->path) == 0 &&
           h->mode == b->mode && h->mtime_sec == b->mtime_sec &&
           h->mtime_nsec == b->mtime_nsec && h->size == b->size;
}

/* Moves the body's fields of b into ent (whose are empty). */
static void take_body(tf_entry *ent, tf_entry *b)
{
    ent->format = b->format;
    ent->npieces = b->npieces;
    ent->pieces = b->pieces;
    ent->ntensors = b->ntensors;
    ent->tensors = b->tensors;
    ent->names = b->names;
    ent->names_len = b->names_len;
    ent->verbatim_len = b->verbatim_len;
    ent->verbatim_chunks = b->verbatim_chunks;
    ent->verbatim = b->verbatim;
    ent->nchunks = b->nchunks;
    ent->chunks = b->chunks;
    b->pieces = NULL;
    b->tensors = NULL;
    b->names = NULL;
    b->verbatim = NULL;
    b->chunks = NULL;
    tf_entry_free(b);
}

int tf_entry_body_read(const tf_page_source *src, const tf_page_ref *ref, uint64_t nblobs,
                       unsigned chunk_shift, tf_entry *ent, tf_error *e)
{
    tf_page pg;
    if (tf_page_read(src, ref, TF_PAGE_BODY, 0, &pg, e) < 0)
        return -1;
    tf_entry body;
    int rc = pg.count == 1 ? tf_entry_decode(pg.data, pg.len, nblobs, chunk_shift, &body, e)
                           : tf_fail(e, EIO, "entries: body page of %u records", pg.count);
    tf_page_free(&pg);
    if (rc < 0) {
        tf_error_prefix(e, "\"%s\"", ent->path);
        return -1;
    }
    if (!same_header(ent, &body)) {
        tf_entry_free(&body);
        return tf_fail(e, EIO, "entries: the body of \"%s\" differs from its header", ent->path);
    }
    take_body(ent, &body);
    ent->body = *ref;
    return 0;
}
