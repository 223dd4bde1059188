#include "fs/spool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/full_io.h"

int fs_spool_create(int dirfd)
{
    int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
        return fd >= 0 ? fd : -errno;
    /* A file system without O_TMPFILE: a named file, unlinked at once
     * (a crash in between leaves it behind, named for what it is). */
    char name[64];
    static _Atomic unsigned counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(name, sizeof name, ".trajfs-spool-%ld-%u", (long)getpid(), counter++);
        fd = openat(dirfd, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
            unlinkat(dirfd, name, 0);
            return fd;
        }
        if (errno != EEXIST)
            break;
    }
    return -errno;
}

int fs_spool_open_dir(const char *dir, tf_error *e)
{
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return tf_fail(e, errno, "spool directory %s: %s", dir, strerror(errno));
    int fd = fs_spool_create(dirfd);
    if (fd < 0) {
        close(dirfd);
        return tf_fail(e, -fd, "cannot make spool files in %s: %s", dir, strerror(-fd));
    }
    close(fd);
    return dirfd;
}

int fs_spool_write(int fd, const void *p, size_t len, uint64_t off)
{
    return tf_pwrite_full(fd, p, len, off) < 0 ? -errno : 0;
}

int fs_spool_read(int fd, void *p, size_t len, uint64_t off, size_t *got)
{
    ssize_t n = tf_pread_full(fd, p, len, off);
    *got = n > 0 ? (size_t)n : 0;
    return n < 0 ? -errno : 0;
}
