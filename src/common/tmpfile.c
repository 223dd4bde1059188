#include "common/tmpfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int tf_tmpfile_create(int dirfd, const char *name)
{
    int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
        return fd >= 0 ? fd : -errno;
    char path[256];
    static _Atomic unsigned counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(path, sizeof path, ".%s-%ld-%u", name, (long)getpid(), counter++);
        fd = openat(dirfd, path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
            unlinkat(dirfd, path, 0);
            return fd;
        }
        if (errno != EEXIST)
            break;
    }
    return -errno;
}

const char *tf_tmp_dir(void)
{
    const char *dir = getenv("TMPDIR");
    return dir && *dir ? dir : "/var/tmp";
}
