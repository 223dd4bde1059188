#include "store/push.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "format/container.h"

/* Commits are grouped into segments of at least this many bytes (the
 * last may be smaller): few requests for many small commits, and a push
 * that dies loses at most this much of its upload. */
#define PUSH_SEGMENT ((uint64_t)64 << 20)
/* Bytes copied at a time. */
#define COPY_BLOCK ((size_t)4 << 20)

struct tf_pusher {
    char *url;
    tf_remote_opts remote;
    tf_container copy;
    bool open;
};

int tf_pusher_open(const char *url, const tf_remote_opts *remote, tf_pusher **out, tf_error *e)
{
    tf_pusher *p = calloc(1, sizeof *p);
    if (!p || !(p->url = strdup(url))) {
        free(p);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    p->remote = *remote;
    *out = p;
    return 0;
}

void tf_pusher_close(tf_pusher *p)
{
    if (!p)
        return;
    if (p->open)
        tf_container_close(&p->copy);
    free(p->url);
    free(p);
}

/* The copy, opened for writing; created with the local archive's
 * superblock where there is none. */
static int open_copy(tf_pusher *p, const tf_container *local, tf_error *e)
{
    if (p->open)
        return 0;
    tf_open_opts o = { .writable = true, .remote = &p->remote };
    tf_error first;
    if (tf_container_open(&p->copy, p->url, &o, &first) < 0) {
        uint8_t sb[TF_SUPERBLOCK_SIZE];
        if (tf_container_pread(local, 0, sb, sizeof sb, e) < 0)
            return -1;
        tf_error made;
        if (tf_io_create(p->url, &p->remote, sb, sizeof sb, &made) < 0) {
            *e = made.errnum == EEXIST ? first : made; /* there, but unreadable: why */
            return -1;
        }
        if (tf_container_open(&p->copy, p->url, &o, e) < 0)
            return -1;
    }
    p->open = true;
    return 0;
}

/* Whether the local archive holds what the copy holds, where it holds
 * it: the same superblock and the copy's last trailer. */
static int check_prefix(const tf_container *local, const tf_container *copy, tf_error *e)
{
    uint8_t a[TF_TRAILER_SIZE], b[TF_TRAILER_SIZE];
    uint64_t end = copy->end;
    bool same = end <= local->end && tf_container_pread(local, 0, a, TF_SUPERBLOCK_SIZE, e) == 0 &&
                tf_container_pread(copy, 0, b, TF_SUPERBLOCK_SIZE, e) == 0 &&
                memcmp(a, b, TF_SUPERBLOCK_SIZE) == 0;
    if (same && copy->has_commit)
        same = tf_container_pread(local, end - TF_TRAILER_SIZE, a, sizeof a, e) == 0 &&
               tf_container_pread(copy, end - TF_TRAILER_SIZE, b, sizeof b, e) == 0 &&
               memcmp(a, b, sizeof a) == 0;
    if (!same)
        return tf_fail(e, EINVAL, "%s is not a copy of the start of %s (another writer's commits, "
                       "or the local archive was rewritten by gc): push to a new key",
                       copy->name, local->name);
    return 0;
}

/* The ends of the local commits after `from`, the oldest first. */
static int commit_ends(const tf_container *local, uint64_t from, uint64_t **ends, size_t *n,
                       tf_error *e)
{
    *ends = NULL;
    *n = 0;
    size_t cap = 0;
    for (uint64_t end = local->has_commit ? local->end : 0; end > from;) {
        tf_trailer t;
        if (tf_container_read_trailer(local, end - TF_TRAILER_SIZE, &t, e) < 0)
            return -1;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            uint64_t *more = realloc(*ends, cap * sizeof *more);
            if (!more)
                return tf_fail(e, ENOMEM, "out of memory");
            *ends = more;
        }
        (*ends)[(*n)++] = end;
        end = t.seq == 1 ? TF_SUPERBLOCK_SIZE : t.prev + TF_TRAILER_SIZE;
        if (end < from)
            return tf_fail(e, EIO, "%s: its commits do not meet the copy's end", local->name);
    }
    for (size_t i = 0; i < *n / 2; i++) {
        uint64_t x = (*ends)[i];
        (*ends)[i] = (*ends)[*n - 1 - i];
        (*ends)[*n - 1 - i] = x;
    }
    return 0;
}

static int copy_bytes(const tf_container *local, tf_io *to, uint64_t from, uint64_t end, uint8_t *buf,
                      tf_error *e)
{
    for (uint64_t off = from; off < end;) {
        size_t n = end - off < COPY_BLOCK ? (size_t)(end - off) : COPY_BLOCK;
        if (tf_container_pread(local, off, buf, n, e) < 0 || tf_io_append(to, buf, n, off, e) < 0)
            return -1;
        off += n;
    }
    return 0;
}

int tf_pusher_push(tf_pusher *p, const char *local_path, uint64_t *commits, uint64_t *bytes,
                   void (*progress)(void *arg, uint64_t bytes), void *arg, tf_error *e)
{
    *commits = *bytes = 0;
    tf_container local;
    if (tf_container_open(&local, local_path, NULL, e) < 0)
        return -1;
    uint64_t *ends = NULL;
    size_t n = 0;
    uint8_t *buf = NULL;
    int rc = open_copy(p, &local, e) < 0 || check_prefix(&local, &p->copy, e) < 0 ||
                     commit_ends(&local, p->copy.end, &ends, &n, e) < 0
                 ? -1
                 : 0;
    if (rc == 0 && n && !(buf = malloc(COPY_BLOCK)))
        rc = tf_fail(e, ENOMEM, "out of memory");
    uint64_t from = p->copy.end;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = copy_bytes(&local, p->copy.io, i ? ends[i - 1] : from, ends[i], buf, e);
        bool last = i + 1 == n;
        if (rc == 0 && (last || ends[i] - p->copy.end >= PUSH_SEGMENT)) {
            rc = tf_io_publish(p->copy.io, e);
            if (rc == 0) {
                if (progress)
                    progress(arg, ends[i] - p->copy.end);
                *bytes += ends[i] - p->copy.end;
                p->copy.end = p->copy.durable_end = p->copy.file_size = ends[i];
                p->copy.has_commit = true;
                *commits = i + 1;
            }
        }
    }
    if (rc < 0 && p->open) /* what was staged and not published */
        (void)tf_io_truncate(p->copy.io, p->copy.end, NULL);
    free(buf);
    free(ends);
    tf_container_close(&local);
    return rc;
}
