#include "common/full_io.h"

#include <errno.h>
#include <unistd.h>

ssize_t tf_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Writes at *off, or at the file's position when off is NULL. A write
 * that takes no bytes would be asked again for ever: an error (EIO), as
 * from a device that takes nothing more. */
static int write_whole(int fd, const void *buf, size_t len, const uint64_t *off)
{
    size_t done = 0;
    while (done < len) {
        const char *p = (const char *)buf + done;
        ssize_t n = off ? pwrite(fd, p, len - done, (off_t)(*off + done)) : write(fd, p, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

int tf_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
    return write_whole(fd, buf, len, &off);
}

int tf_write_full(int fd, const void *buf, size_t len)
{
    return write_whole(fd, buf, len, NULL);
}
