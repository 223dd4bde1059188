#include "store/rewrite.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/container.h"

int tf_rewrite_open(tf_rewrite *rw, const char *path, const char *verb, const char *tmp_suffix,
                    tf_error *e)
{
    *rw = (tf_rewrite){ .tmp_suffix = tmp_suffix };
    if (tf_io_is_url(path))
        return tf_fail(e, EROFS, "%s rewrites the archive's file: a remote archive has none here "
                       "(%s a local copy of it)", verb, verb);
    if (!(rw->real = realpath(path, NULL)))
        return tf_fail(e, errno, "%s: %s", path, strerror(errno));
    tf_open_opts writable = { .writable = true, .check_all = true }; /* read whole */
    if (tf_archive_open(rw->real, &writable, &rw->old, e) < 0) {
        tf_rewrite_close(rw);
        return -1;
    }
    return 0;
}

void tf_rewrite_close(tf_rewrite *rw)
{
    tf_archive_close(rw->old);
    free(rw->real);
    *rw = (tf_rewrite){ 0 };
}

/* The old file's owner and permissions, given to the new file tmp: a
 * rewrite must not hand the archive to whoever ran it, nor show its
 * bytes to others while it is being written. */
static int copy_owner(const tf_archive *old, const char *tmp, tf_error *e)
{
    struct stat st;
    if (tf_archive_stat(old, &st, e) < 0)
        return -1;
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int rc = 0;
    if (fd < 0)
        rc = tf_fail(e, errno, "%s: %s", tmp, strerror(errno));
    else if ((st.st_uid != geteuid() || st.st_gid != getegid()) && fchown(fd, st.st_uid, st.st_gid) < 0)
        rc = tf_fail(e, errno, "cannot give the rewritten archive its owner: %s", strerror(errno));
    else if (fchmod(fd, st.st_mode & 07777) < 0)
        rc = tf_fail(e, errno, "cannot give the rewritten archive its mode: %s", strerror(errno));
    else if (fsync(fd) < 0)
        rc = tf_fail(e, errno, "cannot sync %s: %s", tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The new archive reads back with what it should hold. */
static int check_written(const char *tmp, const tf_rewrite_steps *steps, tf_error *e)
{
    tf_archive *ar;
    if (tf_archive_open(tmp, NULL, &ar, e) < 0)
        return -1;
    int rc = steps->check(steps->arg, ar, e);
    tf_archive_close(ar);
    if (rc < 0)
        tf_error_prefix(e, "%s: the rewritten archive does not read back whole", tmp);
    return rc;
}

/* The rename must be durable too. */
static int sync_dir_of(const char *path, tf_error *e)
{
    char *copy = strdup(path);
    if (!copy)
        return tf_fail(e, ENOMEM, "out of memory");
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0
             ? 0 : tf_fail(e, errno, "cannot sync the directory of %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(copy);
    return rc;
}

int tf_rewrite_replace(tf_rewrite *rw, unsigned shift, const tf_rewrite_steps *steps,
                       struct stat *after, tf_error *e)
{
    char *tmp;
    if (asprintf(&tmp, "%s%s", rw->real, rw->tmp_suffix) < 0)
        return tf_fail(e, ENOMEM, "out of memory");
    unlink(tmp); /* left by a rewrite that died: nobody else writes it under our lock */
    int rc = tf_container_create(tmp, NULL, shift, TF_FORMAT_DEFAULT, e);
    if (rc == 0)
        rc = copy_owner(rw->old, tmp, e);
    if (rc == 0)
        rc = steps->write(steps->arg, tmp, e);
    if (rc == 0)
        rc = check_written(tmp, steps, e);
    if (rc == 0 && rename(tmp, rw->real) < 0)
        rc = tf_fail(e, errno, "cannot rename %s to %s: %s", tmp, rw->real, strerror(errno));
    if (rc == 0)
        rc = sync_dir_of(rw->real, e);
    else
        unlink(tmp);
    if (rc == 0 && stat(rw->real, after) < 0)
        *after = (struct stat){ 0 }; /* replaced already: a figure missing is no failure */
    free(tmp);
    return rc;
}

int tf_rewrite_ino_keeper(const tf_archive *old, tf_entry *out, tf_error *e)
{
    uint64_t max_ino = 1;
    for (size_t i = 0; i < tf_archive_nentries(old); i++) {
        uint64_t ino = tf_archive_entry(old, i)->ino;
        max_ino = ino > max_ino ? ino : max_ino;
    }
    uint64_t next_ino = tf_archive_next_ino(old);
    if (next_ino <= max_ino + 1)
        return 0;
    *out = (tf_entry){ .kind = TF_ENTRY_TOMBSTONE, .ino = next_ino - 1,
                       .path = strdup("inode-counter") };
    return out->path ? 1 : tf_fail(e, ENOMEM, "out of memory");
}

static bool same_entry(const tf_entry *a, const tf_entry *b)
{
    return a->kind == b->kind && a->ino == b->ino && a->mode == b->mode &&
           a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
           a->size == b->size && strcmp(a->path, b->path) == 0 &&
           (a->target == NULL) == (b->target == NULL) &&
           (!a->target || strcmp(a->target, b->target) == 0);
}

int tf_rewrite_check_entries(const tf_archive *old, const tf_archive *written, tf_error *e)
{
    size_t n = tf_archive_nentries(old);
    if (tf_archive_nentries(written) != n)
        return tf_fail(e, EIO, "%zu entries, not %zu", tf_archive_nentries(written), n);
    if (tf_archive_next_ino(written) != tf_archive_next_ino(old))
        return tf_fail(e, EIO, "its inode counter is %llu, not %llu",
                       (unsigned long long)tf_archive_next_ino(written),
                       (unsigned long long)tf_archive_next_ino(old));
    /* Both are sorted by path. */
    for (size_t i = 0; i < n; i++)
        if (!same_entry(tf_archive_entry(old, i), tf_archive_entry(written, i)))
            return tf_fail(e, EIO, "%s: another entry", tf_archive_entry(old, i)->path);
    return 0;
}
