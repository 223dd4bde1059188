#include "format/container.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "common/hash.h"
#include "common/zstd_frame.h"
#include "io/url.h"

static const uint8_t SUPER_MAGIC[8] = { 0x89, 'T', 'R', 'A', 'J', 'F', 'S', '\n' };
static const uint8_t TRAILER_MAGIC[8] = { 0x89, 'T', 'R', 'J', 'E', 'N', 'D', '\n' };
/* A catalog segment may not claim to inflate more than this many times
 * its stored size (real catalogs compress 3-10x). */
#define CATALOG_MAX_RATIO 256
#define CATALOG_LEVEL 3
/* How far back to look for the last valid trailer, in bytes per read. */
#define SCAN_BLOCK (1u << 20)
/* A trailer is read with the hint that this much before it, where its
 * catalog segment lies (a few KiB on the benchmark trajectory), will be
 * read next: from a remote archive, one request a commit on opening. */
#define TRAILER_WINDOW ((uint64_t)16 << 10)

int tf_container_pread(const tf_container *c, uint64_t off, void *buf, size_t len, tf_error *e)
{
    if (c->behind && tf_behind_read(c->behind, off, buf, len))
        return 0; /* a commit's bytes, being written behind */
    return tf_io_pread(c->io, off, buf, len, e);
}

int tf_container_pread_checked(const tf_container *c, uint64_t off, void *buf, size_t len,
                               uint64_t hash, tf_error *e)
{
    if (tf_container_pread(c, off, buf, len, e) < 0)
        return -1;
    if (tf_hash64(buf, len) == hash)
        return 0;
    if (!tf_io_forget(c->io, off, len))
        return 1;
    if (tf_container_pread(c, off, buf, len, e) < 0)
        return -1;
    return tf_hash64(buf, len) == hash ? 0 : 1;
}

void tf_container_will_need(const tf_container *c, uint64_t off, uint64_t len)
{
    tf_io_will_need(c->io, off, len);
}

static void encode_superblock(uint8_t sb[TF_SUPERBLOCK_SIZE], unsigned chunk_shift,
                              unsigned version)
{
    memset(sb, 0, TF_SUPERBLOCK_SIZE);
    memcpy(sb, SUPER_MAGIC, 8);
    tf_le32_put(sb + 8, version);
    tf_le32_put(sb + 12, chunk_shift);
    tf_le64_put(sb + 24, tf_hash64(sb, 24));
}

int tf_container_create(const char *path, const tf_remote_opts *remote, unsigned chunk_shift,
                        unsigned version, tf_error *e)
{
    if (chunk_shift < TF_CHUNK_SHIFT_MIN || chunk_shift > TF_CHUNK_SHIFT_MAX)
        return tf_fail(e, EINVAL, "chunk shift %u is outside [%d, %d]", chunk_shift,
                       TF_CHUNK_SHIFT_MIN, TF_CHUNK_SHIFT_MAX);
    if (version < TF_FORMAT_SEGMENTS || version > TF_FORMAT_PAGES)
        return tf_fail(e, EINVAL, "format version %u is not %d or %d", version,
                       TF_FORMAT_SEGMENTS, TF_FORMAT_PAGES);
    uint8_t sb[TF_SUPERBLOCK_SIZE];
    encode_superblock(sb, chunk_shift, version);
    return tf_io_create(path, remote, sb, sizeof sb, e);
}

static int read_superblock(tf_container *c, const char *path, tf_error *e)
{
    uint8_t sb[TF_SUPERBLOCK_SIZE];
    if (c->file_size < TF_SUPERBLOCK_SIZE || tf_container_pread(c, 0, sb, sizeof sb, NULL) < 0 ||
        memcmp(sb, SUPER_MAGIC, 8) != 0)
        return tf_fail(e, EINVAL, "%s: not a trajfs archive", path);
    if (tf_le64_get(sb + 24) != tf_hash64(sb, 24))
        return tf_fail(e, EIO, "%s: superblock checksum mismatch", path);
    uint32_t version = tf_le32_get(sb + 8);
    if (version < TF_FORMAT_SEGMENTS || version > TF_FORMAT_PAGES)
        return tf_fail(e, EINVAL, "%s: archive format version %u, this trajfs reads %d and %d",
                       path, version, TF_FORMAT_SEGMENTS, TF_FORMAT_PAGES);
    c->version = version;
    c->chunk_shift = tf_le32_get(sb + 12);
    if (c->chunk_shift < TF_CHUNK_SHIFT_MIN || c->chunk_shift > TF_CHUNK_SHIFT_MAX)
        return tf_fail(e, EIO, "%s: bad chunk shift %u", path, c->chunk_shift);
    return 0;
}

static bool decode_trailer(const uint8_t p[TF_TRAILER_SIZE], uint64_t at, tf_trailer *t)
{
    if (memcmp(p, TRAILER_MAGIC, 8) != 0 || tf_le64_get(p + 56) != tf_hash64(p, 56))
        return false;
    t->seq = tf_le64_get(p + 8);
    t->catalog_off = tf_le64_get(p + 16);
    t->catalog_len = tf_le64_get(p + 24);
    t->catalog_hash = tf_le64_get(p + 32);
    t->prev = tf_le64_get(p + 40);
    t->nblobs = tf_le64_get(p + 48);
    /* The segment sits right before its trailer; the previous trailer
     * before the segment. */
    return t->seq >= 1 && t->catalog_off >= TF_SUPERBLOCK_SIZE &&
           t->catalog_off <= at && t->catalog_len == at - t->catalog_off &&
           (t->seq == 1 ? t->prev == 0
                        : t->prev >= TF_SUPERBLOCK_SIZE && t->prev <= t->catalog_off &&
                              t->catalog_off - t->prev >= TF_TRAILER_SIZE);
}

static void encode_trailer(uint8_t p[TF_TRAILER_SIZE], const tf_trailer *t)
{
    memcpy(p, TRAILER_MAGIC, 8);
    tf_le64_put(p + 8, t->seq);
    tf_le64_put(p + 16, t->catalog_off);
    tf_le64_put(p + 24, t->catalog_len);
    tf_le64_put(p + 32, t->catalog_hash);
    tf_le64_put(p + 40, t->prev);
    tf_le64_put(p + 48, t->nblobs);
    tf_le64_put(p + 56, tf_hash64(p, 56));
}

int tf_container_read_trailer(const tf_container *c, uint64_t off, tf_trailer *t, tf_error *e)
{
    uint8_t p[TF_TRAILER_SIZE];
    if (off < TF_SUPERBLOCK_SIZE || off > c->file_size || c->file_size - off < TF_TRAILER_SIZE)
        return tf_fail(e, EIO, "no trailer at %llu", (unsigned long long)off);
    uint64_t from = off - TF_SUPERBLOCK_SIZE > TRAILER_WINDOW ? off - TRAILER_WINDOW : TF_SUPERBLOCK_SIZE;
    tf_container_will_need(c, from, off + TF_TRAILER_SIZE - from);
    if (tf_container_pread(c, off, p, sizeof p, e) < 0)
        return -1;
    if (!decode_trailer(p, off, t))
        return tf_fail(e, EIO, "invalid trailer at %llu", (unsigned long long)off);
    return 0;
}

int tf_container_walk_trailers(const tf_container *c, uint64_t off, uint64_t top, uint64_t from,
                               tf_trailer_visit visit, void *arg, uint64_t *before, tf_error *e)
{
    for (uint64_t k = top; k > from; k--) {
        tf_trailer t;
        /* A read that failed says why (a server's error is not damage). */
        if (tf_container_read_trailer(c, off, &t, e) < 0) {
            tf_error_prefix(e, "commit %llu", (unsigned long long)k);
            return -1;
        }
        if (t.seq != k)
            return tf_fail(e, EIO, "commit %llu: trailer chain broken at %llu", (unsigned long long)k,
                           (unsigned long long)off);
        if (visit && visit(arg, off, &t, e) < 0)
            return -1;
        off = t.prev;
    }
    *before = off;
    return 0;
}

/* The commits of a collecting walk, by number from `from` + 1. */
typedef struct {
    tf_commit_at *commits;
    uint64_t from;
} commit_list;

static int note_commit(void *arg, uint64_t off, const tf_trailer *t, tf_error *e)
{
    (void)e;
    commit_list *l = arg;
    l->commits[t->seq - l->from - 1] = (tf_commit_at){ off, *t };
    return 0;
}

int tf_container_collect_trailers(const tf_container *c, uint64_t off, uint64_t top,
                                  uint64_t from, tf_commit_at **out, uint64_t *before,
                                  tf_error *e)
{
    uint64_t n = top - from;
    if (top <= from || n > (off + TF_TRAILER_SIZE) / TF_TRAILER_SIZE)
        return tf_fail(e, EIO, "trailer at %llu claims commit %llu after commit %llu",
                       (unsigned long long)off, (unsigned long long)top,
                       (unsigned long long)from);
    commit_list l = { malloc(n * sizeof *l.commits), from };
    if (!l.commits)
        return tf_fail(e, ENOMEM, "out of memory");
    if (tf_container_walk_trailers(c, off, top, from, note_commit, &l, before, e) < 0) {
        free(l.commits);
        return -1;
    }
    *out = l.commits;
    return 0;
}

/* A commit's frame into the table of frames arg. */
static int note_frame(void *arg, uint64_t off, const tf_trailer *t, tf_error *e)
{
    (void)e;
    uint64_t *frames = arg;
    frames[2 * (t->seq - 1)] = t->catalog_off;
    frames[2 * (t->seq - 1) + 1] = off + TF_TRAILER_SIZE;
    return 0;
}

/* The frames of the commits after the first `known` down from the
 * trailer at off (commit top) into c->frames[2 * known ...]: where they
 * meet, *met tells whether the frames known end where commit `known`'s
 * trailer does (otherwise the commits were rewritten, or rolled back
 * and made anew). */
static int read_frames(tf_container *c, uint64_t known, uint64_t top, uint64_t off, bool *met,
                       tf_error *e)
{
    uint64_t before = 0;
    if (tf_container_walk_trailers(c, off, top, known, note_frame, c->frames, &before, e) < 0)
        return -1;
    *met = !known || c->frames[2 * (known - 1) + 1] == before + TF_TRAILER_SIZE;
    return 0;
}

int tf_container_frames(tf_container *c, const uint64_t **frames, uint64_t *n, tf_error *e)
{
    uint64_t top = c->has_commit ? c->last.seq : 0;
    if (top > c->frames_cap) {
        if (top > c->end / TF_TRAILER_SIZE)
            return tf_fail(e, EIO, "trailer at %llu claims commit %llu",
                           (unsigned long long)(c->end - TF_TRAILER_SIZE), (unsigned long long)top);
        uint64_t cap = top > 2 * c->frames_cap ? top : 2 * c->frames_cap;
        uint64_t *more = cap <= SIZE_MAX / (2 * sizeof *more)
                             ? realloc(c->frames, (size_t)cap * 2 * sizeof *more)
                             : NULL;
        if (!more)
            return tf_fail(e, ENOMEM, "out of memory for the commits' frames");
        c->frames = more;
        c->frames_cap = cap;
    }
    uint64_t known = c->nframes < top ? c->nframes : top;
    uint64_t at = c->end - TF_TRAILER_SIZE;
    bool met;
    c->nframes = 0; /* until they are all read */
    if (top && read_frames(c, known, top, at, &met, e) < 0)
        return -1;
    if (top && !met && read_frames(c, 0, top, at, &met, e) < 0)
        return -1;
    c->nframes = top;
    *frames = c->frames;
    *n = top;
    return 0;
}

/* A trailer is accepted only if its segment checksum matches too, so a
 * stray copy of the magic inside blob data cannot be mistaken for one. */
static bool valid_commit_at(const tf_container *c, uint64_t off, tf_trailer *t)
{
    if (tf_container_read_trailer(c, off, t, NULL) < 0)
        return false;
    tf_buf seg = { 0 };
    uint8_t *p = tf_buf_reserve(&seg, t->catalog_len);
    bool ok = p && tf_container_pread_checked(c, t->catalog_off, p, t->catalog_len, t->catalog_hash,
                                              NULL) == 0;
    tf_buf_free(&seg);
    return ok;
}

/* The newest valid commit whose trailer starts at or after `from`:
 * normally the trailer at the very end; after a torn write, scan
 * backwards for the newest trailer whose checksums hold. */
static bool find_commit_from(const tf_container *c, uint64_t from, tf_trailer *t, uint64_t *at)
{
    uint64_t size = c->file_size;
    if (size >= from + TF_TRAILER_SIZE && valid_commit_at(c, size - TF_TRAILER_SIZE, t)) {
        *at = size - TF_TRAILER_SIZE;
        return true;
    }
    if (!tf_io_tears(c->io))
        return false; /* no torn tail to skip: published whole */
    uint8_t *block = malloc(SCAN_BLOCK + 8);
    if (!block)
        return false;
    bool found = false;
    uint64_t hi = size; /* bytes below hi are still to be searched */
    while (!found && hi > from) {
        uint64_t lo = hi - from > SCAN_BLOCK ? hi - SCAN_BLOCK : from;
        size_t n = (size_t)(hi - lo);
        size_t extra = size - hi < 7 ? (size_t)(size - hi) : 7; /* magic across blocks */
        if (tf_container_pread(c, lo, block, n + extra, NULL) < 0)
            break;
        for (size_t i = n; i-- > 0 && !found;) {
            if (block[i] == TRAILER_MAGIC[0] && i + 8 <= n + extra &&
                memcmp(block + i, TRAILER_MAGIC, 8) == 0 && valid_commit_at(c, lo + i, t)) {
                *at = lo + i;
                found = true;
            }
        }
        hi = lo;
    }
    free(block);
    return found;
}

static void find_last_commit(tf_container *c)
{
    uint64_t at;
    c->has_commit = find_commit_from(c, TF_SUPERBLOCK_SIZE, &c->last, &at);
    c->end = c->has_commit ? at + TF_TRAILER_SIZE : TF_SUPERBLOCK_SIZE;
    c->durable_end = c->end;
}

int tf_container_poll(tf_container *c, tf_trailer *t, uint64_t *at, bool *found, tf_error *e)
{
    *found = false;
    uint64_t size;
    bool changed; /* other bytes may be there (a torn tail replaced by a
                   * commit as long) though the size is the same */
    if (tf_io_poll(c->io, &size, &changed, e) < 0)
        return -1;
    if (size < c->end)
        return tf_fail(e, EIO, "the archive was cut to %llu bytes, inside its commit %llu",
                       (unsigned long long)size, (unsigned long long)c->last.seq);
    if (size == c->searched && !changed)
        return 0;
    /* Shorter than searched: a writer cut a torn tail off, and what
     * follows the last commit is all new. A trailer that ended within
     * the bytes searched before was no valid one then. */
    uint64_t from = size > c->searched ? c->searched : c->end;
    from = from - c->end > TF_TRAILER_SIZE - 1 ? from - (TF_TRAILER_SIZE - 1) : c->end;
    c->file_size = c->searched = size;
    *found = find_commit_from(c, from, t, at);
    if (*found) {
        uint8_t p[TF_TRAILER_SIZE];
        encode_trailer(p, t);
        tf_io_anchor(c->io, *at + TF_TRAILER_SIZE, p, sizeof p);
    }
    return 0;
}

/* The archive that path names, opened, its size known; with o->writable
 * locked. */
static int open_io(tf_container *c, const char *path, const tf_open_opts *o, tf_error *e)
{
    if (tf_io_open(path, o, &c->io, e) < 0)
        return -1;
    struct stat st;
    if ((c->writable && tf_io_lock(c->io, e) < 0) || tf_io_stat(c->io, &st, e) < 0)
        return -1;
    c->file_size = (uint64_t)st.st_size;
    return 0;
}

/* A torn tail is cut off (a writer appends after the last commit); on
 * storage that does not tear, bytes after the last commit are damage. */
static int settle_tail(tf_container *c, const char *path, tf_error *e)
{
    if (!tf_io_tears(c->io) && !c->has_commit && c->file_size > TF_SUPERBLOCK_SIZE)
        return tf_fail(e, EIO, "%s: no valid commit at its end (damaged or still being written)", path);
    if (c->writable && c->end < c->file_size) {
        if (tf_io_truncate(c->io, c->end, e) < 0) {
            tf_error_prefix(e, "cannot cut the torn tail");
            return -1;
        }
        c->file_size = c->end;
    }
    return 0;
}

int tf_container_open(tf_container *c, const char *path, const tf_open_opts *o, tf_error *e)
{
    *c = (tf_container){ .writable = o && o->writable };
    if (!(c->name = tf_io_shown_name(path))) /* messages never show a URL's secrets */
        return tf_fail(e, ENOMEM, "out of memory");
    int rc = open_io(c, path, o, e) < 0 || read_superblock(c, c->name, e) < 0 ? -1 : 0;
    if (rc == 0) {
        find_last_commit(c);
        rc = settle_tail(c, c->name, e);
    }
    if (rc < 0)
        tf_container_close(c);
    else
        c->searched = c->file_size;
    return rc;
}

void tf_container_close(tf_container *c)
{
    tf_behind_free(c->behind); /* waits: a writer settled it before */
    c->behind = NULL;
    tf_buf_free(&c->pending); /* uncommitted */
    ZSTD_freeCCtx(c->cctx);
    c->cctx = NULL;
    tf_io_close(c->io);
    c->io = NULL;
    free(c->name);
    c->name = NULL;
    free(c->frames);
    c->frames = NULL;
    c->nframes = c->frames_cap = 0;
}

int tf_container_read_catalog(const tf_container *c, const tf_trailer *t, tf_buf *out, tf_error *e)
{
    uint8_t *stored = malloc(t->catalog_len ? t->catalog_len : 1);
    if (!stored)
        return tf_fail(e, ENOMEM, "catalog of %llu bytes: out of memory",
                       (unsigned long long)t->catalog_len);
    int rc = tf_container_pread_checked(c, t->catalog_off, stored, t->catalog_len, t->catalog_hash, e);
    if (rc != 0) {
        if (rc > 0)
            tf_fail(e, EIO, "catalog of commit %llu: checksum mismatch", (unsigned long long)t->seq);
        rc = -1;
        goto done;
    }
    rc = -1;
    unsigned long long n = ZSTD_getFrameContentSize(stored, t->catalog_len);
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN ||
        n > (unsigned long long)t->catalog_len * CATALOG_MAX_RATIO + 4096) {
        tf_fail(e, EIO, "catalog of commit %llu: bad frame", (unsigned long long)t->seq);
        goto done;
    }
    out->len = 0;
    uint8_t *dst = tf_buf_reserve(out, n);
    if (!dst) {
        tf_fail(e, ENOMEM, "catalog: out of memory");
        goto done;
    }
    /* With the thread's context: ZSTD_decompress sets one up for each
     * call, and zstd asks the processor its features (CPUID, twice)
     * whenever it does, in a virtual machine a trap to the host each. */
    if (tf_zstd_decompress(stored, t->catalog_len, dst, n, e) < 0) {
        tf_error_prefix(e, "catalog of commit %llu", (unsigned long long)t->seq);
        goto done;
    }
    tf_buf_commit(out, n);
    rc = 0;
done:
    free(stored);
    return rc;
}

/* Appends smaller than this are gathered into one write (c->pending):
 * a checkpoint of small chunks appends hundreds of payloads of a few
 * hundred bytes each, and a system call each cost more than coding them. */
#define PENDING_MAX ((size_t)1 << 20)

/* Writes the appends gathered. */
static int flush_pending(tf_container *c, tf_error *e)
{
    if (!c->pending.len)
        return 0;
    int rc = tf_io_append(c->io, c->pending.data, c->pending.len, c->pending_off, e);
    c->pending.len = 0;
    return rc;
}

/* Writes at `at` (file_size or past it: the skipped bytes stay a hole
 * where they fill blocks, and read as zeros). */
static int append_at(tf_container *c, uint64_t at, const void *p, size_t len, uint64_t *off,
                     tf_error *e)
{
    bool follows = at == c->pending_off + c->pending.len;
    if (c->pending.len && (!follows || c->pending.len + len > PENDING_MAX) &&
        flush_pending(c, e) < 0)
        return -1;
    if (len >= PENDING_MAX) {
        if (tf_io_append(c->io, p, len, at, e) < 0)
            return -1;
    } else {
        if (!c->pending.len)
            c->pending_off = at;
        uint8_t *dst = tf_buf_reserve(&c->pending, len);
        if (!dst)
            return tf_fail(e, ENOMEM, "%s: out of memory for an append", c->name);
        memcpy(dst, p, len);
        tf_buf_commit(&c->pending, len);
    }
    *off = at;
    c->file_size = at + len;
    return 0;
}

int tf_container_append(tf_container *c, const void *p, size_t len, uint64_t *off, tf_error *e)
{
    c->retirable_run = false;
    return append_at(c, c->file_size, p, len, off, e);
}

int tf_container_append_retirable(tf_container *c, const void *p, size_t len, uint64_t *off,
                                  tf_error *e)
{
    uint64_t at = c->file_size;
    if (!c->retirable_run)
        at = (at + TF_PUNCH_BLOCK - 1) / TF_PUNCH_BLOCK * TF_PUNCH_BLOCK;
    if (append_at(c, at, p, len, off, e) < 0)
        return -1;
    c->retirable_run = true;
    return 0;
}

static void cut_to_end(tf_container *c)
{
    c->pending.len = 0;
    /* Unconditionally: a failed append may have written part of its bytes
     * (a disk filling up mid-write) without counting them in file_size. */
    if (tf_io_truncate(c->io, c->end, NULL) == 0)
        c->file_size = c->end;
    c->retirable_run = false;
}

/* Waits for the commit written behind, if any: *synced tells whether it
 * was there and is durable. Its failure breaks the container: the
 * archive is cut back to what its last durable commit left. */
static int settle_behind(tf_container *c, bool *synced, tf_error *e)
{
    *synced = false;
    if (!c->broken.errnum && c->behind) {
        tf_error why = { 0 };
        if (tf_behind_wait(c->behind, synced, &why) < 0) {
            c->broken = why;
            c->end = c->durable_end;
            cut_to_end(c);
        } else if (*synced) {
            c->durable_end = c->end;
            c->trailer_unsynced = false;
        }
    }
    if (c->broken.errnum) {
        *synced = false;
        if (e)
            *e = c->broken;
        return -1;
    }
    return 0;
}

void tf_container_rollback(tf_container *c)
{
    bool synced;
    settle_behind(c, &synced, NULL);
    cut_to_end(c);
}

/* Bytes copied at a time by tf_container_copy_commits. */
#define COPY_BLOCK ((size_t)4 << 20)

int tf_container_copy_commits(tf_container *c, const tf_container *from, uint64_t end, tf_error *e)
{
    tf_trailer t;
    if (c->pending.len || c->file_size != c->end || end <= c->end || end > from->end ||
        !valid_commit_at(from, end - TF_TRAILER_SIZE, &t))
        return tf_fail(e, EINVAL, "%s: no commit of %s ends at %llu", c->name, from->name,
                       (unsigned long long)end);
    uint8_t *buf = malloc(COPY_BLOCK);
    int rc = buf ? 0 : tf_fail(e, ENOMEM, "out of memory");
    for (uint64_t off = c->end; rc == 0 && off < end;) {
        size_t n = end - off < COPY_BLOCK ? (size_t)(end - off) : COPY_BLOCK;
        rc = tf_container_pread(from, off, buf, n, e) < 0 || tf_io_append(c->io, buf, n, off, e) < 0 ? -1 : 0;
        off += n;
    }
    free(buf);
    if (rc == 0)
        rc = tf_io_publish(c->io, e);
    if (rc < 0) {
        (void)tf_io_truncate(c->io, c->end, NULL);
        return -1;
    }
    c->last = t;
    c->has_commit = true;
    c->end = c->durable_end = c->file_size = c->searched = end;
    return 0;
}

int tf_container_seal(tf_container *c, tf_error *e)
{
    return tf_io_seal(c->io, e);
}

int tf_container_replace(tf_container *c, int fd, uint64_t size, tf_error *e)
{
    return tf_io_replace(c->io, fd, size, e);
}

int tf_container_punch(tf_container *c, uint64_t off, uint64_t len, tf_error *e)
{
    if (off < TF_SUPERBLOCK_SIZE || off > c->end || len > c->end - off)
        return tf_fail(e, EINVAL, "%s: no committed bytes at %llu+%llu to give back", c->name,
                       (unsigned long long)off, (unsigned long long)len);
    uint64_t from = (off + TF_PUNCH_BLOCK - 1) / TF_PUNCH_BLOCK * TF_PUNCH_BLOCK;
    uint64_t to = (off + len) / TF_PUNCH_BLOCK * TF_PUNCH_BLOCK;
    return from < to ? tf_io_punch(c->io, from, to - from, e) : 0;
}

int tf_container_sync(tf_container *c, bool *synced, tf_error *e)
{
    /* A commit written behind is durable once its job's syncs succeed,
     * or never: after a failed fsync the kernel reports the lost writes
     * once, and the next one succeeds whether they reached the disk or
     * not. So its failure breaks the container (settle_behind), and what
     * it retired stays in use (until trajpack gc). */
    if (settle_behind(c, synced, e) < 0)
        return -1;
    if (*synced && !c->pending.len && c->file_size == c->end)
        return 0; /* nothing appended since the job's sync */
    if (flush_pending(c, e) < 0 || tf_io_sync(c->io, e) < 0) {
        *synced = false;
        return -1;
    }
    return 0;
}

/* The commit's tail: its segment compressed, then its trailer, into
 * *stored; the trailer in *t. */
static int make_tail(tf_container *c, const uint8_t *segment, size_t len, uint64_t nblobs,
                     tf_buf *stored, tf_trailer *t, tf_error *e)
{
    uint8_t *dst = tf_buf_reserve(stored, ZSTD_compressBound(len) + TF_TRAILER_SIZE);
    if (!dst)
        return tf_fail(e, ENOMEM, "commit: out of memory");
    if (!c->cctx && !(c->cctx = ZSTD_createCCtx()))
        return tf_fail(e, ENOMEM, "commit: out of memory");
    size_t n =
        ZSTD_compressCCtx(c->cctx, dst, ZSTD_compressBound(len), segment, len, CATALOG_LEVEL);
    if (ZSTD_isError(n))
        return tf_fail(e, EIO, "commit: %s", ZSTD_getErrorName(n));
    *t = (tf_trailer){
        .seq = c->has_commit ? c->last.seq + 1 : 1,
        .catalog_off = c->file_size,
        .catalog_len = n,
        .catalog_hash = tf_hash64(dst, n),
        .prev = c->has_commit ? c->end - TF_TRAILER_SIZE : 0,
        .nblobs = nblobs,
    };
    encode_trailer(dst + n, t);
    tf_buf_commit(stored, n + TF_TRAILER_SIZE);
    return 0;
}

/* The commit written behind: the blobs pending and its tail go to the
 * container's thread (the first commit behind starts it). */
static int commit_behind(tf_container *c, tf_buf *stored, tf_error *e)
{
    if (!c->behind && !(c->behind = tf_behind_new(c->io)))
        return tf_fail(e, ENOMEM, "commit: cannot start the thread that writes commits");
    uint64_t tail_off = c->file_size;
    size_t tail_len = stored->len;
    tf_behind_submit(c->behind, &c->pending, c->pending_off, stored, tail_off);
    c->file_size = tail_off + tail_len;
    return 0;
}

/* The commit made durable here: its tail appended after the blobs
 * pending, the lot written, and published. */
static int commit_durable(tf_container *c, const tf_buf *stored, tf_error *e)
{
    uint64_t off;
    if (tf_container_append(c, stored->data, stored->len, &off, e) < 0 ||
        flush_pending(c, e) < 0)
        return -1;
    if (tf_io_publish(c->io, e) < 0) {
        tf_error_prefix(e, "commit");
        return -1;
    }
    return 0;
}

int tf_container_commit(tf_container *c, const uint8_t *segment, size_t len, uint64_t nblobs,
                        tf_commit_mode mode, bool *previous_synced, tf_error *e)
{
    bool ignored;
    if (!previous_synced)
        previous_synced = &ignored;
    *previous_synced = false;
    /* The next commit's appends would come before this one's trailer. */
    if (mode == TF_COMMIT_BEHIND && tf_io_ordered(c->io))
        mode = TF_COMMIT_DURABLE;
    tf_buf stored = { 0 };
    tf_trailer t;
    /* Blobs must be durable before a trailer can point to them, and the
     * trailer before we report success (or the caller reports it, after
     * waiting for a commit written behind). */
    int rc = make_tail(c, segment, len, nblobs, &stored, &t, e);
    if (rc == 0 && settle_behind(c, previous_synced, e) < 0) {
        tf_error_prefix(e, "commit: the commit before it");
        rc = -1;
    }
    if (rc == 0 && mode == TF_COMMIT_DURABLE && tf_container_sync(c, &ignored, e) < 0) {
        tf_error_prefix(e, "commit");
        rc = -1;
    }
    if (rc == 0)
        rc = mode == TF_COMMIT_BEHIND ? commit_behind(c, &stored, e)
                                      : commit_durable(c, &stored, e);
    tf_buf_free(&stored);
    if (rc < 0) {
        tf_container_rollback(c);
        return -1;
    }
    c->last = t;
    c->has_commit = true;
    c->end = c->file_size;
    c->trailer_unsynced = mode == TF_COMMIT_BEHIND;
    if (!c->trailer_unsynced)
        c->durable_end = c->end;
    return 0;
}
