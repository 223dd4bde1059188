/* Edits of the tree: one commit each. */
#include "store/writer_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tf_writer_mkdir(tf_writer *w, const char *path, const tf_entry_attrs *attrs, tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_mkdir(&c, path, attrs, e), e);
}

int tf_writer_symlink(tf_writer *w, const char *path, const char *target,
                      const tf_entry_attrs *attrs, tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_symlink(&c, path, target, attrs, e), e);
}

int tf_writer_remove(tf_writer *w, const char *path, tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_remove(&c, path, e), e);
}

int tf_writer_move(tf_writer *w, const char *from, const char *to, tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_move(&c, from, to, e), e);
}

int tf_writer_set_attrs(tf_writer *w, const char *path, uint32_t mode, struct timespec mtime,
                        tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_set_attrs(&c, path, mode, mtime, e), e);
}

/* The index of the entry at archive path `path` (a trailing '/'
 * allowed), or -1 with a message naming it. */
static long find_removed(const tf_archive *ar, const char *path, tf_error *e)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    if (tf_path_check(path, len, e) < 0) {
        if (len && !memmem(e->msg, strlen(e->msg), path, len))
            tf_error_prefix(e, "%.*s", (int)len, path);
        return -1;
    }
    char *p = strndup(path, len);
    if (!p)
        return tf_fail(e, ENOMEM, "out of memory");
    long at = tf_archive_find(ar, p);
    if (at < 0)
        tf_fail(e, ENOENT, "%s: no such file or directory in the archive", p);
    free(p);
    return at;
}

static int cmp_index(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

int tf_writer_remove_paths(tf_writer *w, const char *const *paths, size_t n, tf_error *e)
{
    w->report = (tf_add_report){ 0 };
    if (n == 0)
        return 0;
    size_t *at = malloc(n * sizeof *at);
    if (!at)
        return tf_fail(e, ENOMEM, "out of memory for %zu paths", n);
    /* Every path is checked before the commit begins: all go, or none. */
    for (size_t i = 0; i < n; i++) {
        long k = find_removed(w->ar, paths[i], e);
        if (k < 0) {
            free(at);
            return -1;
        }
        at[i] = (size_t)k;
    }
    /* A directory's subtree follows it in archive order: one tombstone
     * for it takes the paths below it given too. */
    qsort(at, n, sizeof *at, cmp_index);
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    int rc = 0;
    for (size_t i = 0, covered = 0; rc == 0 && i < n; i++) {
        if (i > 0 && at[i] < covered)
            continue;
        rc = tf_commit_remove(&c, tf_archive_entry(w->ar, at[i])->path, e);
        covered = at[i] + tf_archive_subtree_len(w->ar, at[i]);
    }
    free(at);
    rc = tf_writer_end_commit(w, &c, rc, e);
    tf_writer_report_give_back(w);
    return rc;
}
