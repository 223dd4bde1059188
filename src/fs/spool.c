#include "fs/spool.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/full_io.h"
#include "common/tmpfile.h"

int fs_spool_create(int dirfd)
{
    return tf_tmpfile_create(dirfd, "trajfs-spool");
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
