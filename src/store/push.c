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

/* The copy, opened for writing; created, empty, with the local
 * archive's settings where there is none. */
static int open_copy(tf_pusher *p, const tf_container *local, tf_error *e)
{
    if (p->open)
        return 0;
    tf_open_opts o = { .writable = true, .remote = &p->remote };
    tf_error first;
    if (tf_container_open(&p->copy, p->url, &o, &first) < 0) {
        tf_error made;
        if (tf_container_create(p->url, &p->remote, local->chunk_shift, local->version, &made) < 0) {
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

/* The local commits that the copy lacks, the oldest first: those after
 * its last, which must end where the copy does. */
static int missing_commits(const tf_container *local, const tf_container *copy,
                           tf_commit_at **commits, size_t *n, tf_error *e)
{
    *commits = NULL;
    *n = 0;
    uint64_t top = local->has_commit ? local->last.seq : 0;
    uint64_t from = copy->has_commit ? copy->last.seq : 0;
    if (top <= from)
        return 0;
    uint64_t before;
    if (tf_container_collect_trailers(local, local->end - TF_TRAILER_SIZE, top, from, commits,
                                      &before, e) < 0)
        return -1;
    if ((from ? before + TF_TRAILER_SIZE : TF_SUPERBLOCK_SIZE) != copy->end) {
        free(*commits);
        *commits = NULL;
        return tf_fail(e, EIO, "%s: its commits do not meet the copy's end", local->name);
    }
    *n = (size_t)(top - from);
    return 0;
}

int tf_pusher_push(tf_pusher *p, const char *local_path, uint64_t *commits, uint64_t *bytes,
                   void (*progress)(void *arg, uint64_t bytes), void *arg, tf_error *e)
{
    *commits = *bytes = 0;
    tf_container local;
    if (tf_container_open(&local, local_path, NULL, e) < 0)
        return -1;
    tf_commit_at *missing = NULL;
    size_t n = 0;
    int rc = open_copy(p, &local, e) < 0 || check_prefix(&local, &p->copy, e) < 0 ||
                     missing_commits(&local, &p->copy, &missing, &n, e) < 0
                 ? -1
                 : 0;
    /* Whole commits, a segment once they make PUSH_SEGMENT bytes. */
    uint64_t from = p->copy.end;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint64_t end = missing[i].off + TF_TRAILER_SIZE;
        if (i + 1 < n && end - from < PUSH_SEGMENT)
            continue;
        rc = tf_container_copy_commits(&p->copy, &local, end, e);
        if (rc == 0) {
            if (progress)
                progress(arg, end - from);
            *bytes += end - from;
            *commits = i + 1;
            from = end;
        }
    }
    free(missing);
    tf_container_close(&local);
    return rc;
}
