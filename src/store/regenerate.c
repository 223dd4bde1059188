#include "store/regenerate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/full_io.h"
#include "common/tmpfile.h"
#include "format/container.h"

#define COPY_BLOCK ((size_t)8 << 20)

/* The files of a copy left by a gc that was killed: its directory
 * (this user's, no one else's to write) and the regular files in it. */
static void remove_left_copy(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    DIR *d = fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)
                 ? NULL
                 : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *f;
    while ((f = readdir(d)))
        if (fstatat(fd, f->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            unlinkat(fd, f->d_name, 0);
    closedir(d);
    unlinkat(parent, name, AT_REMOVEDIR);
}

/* Removes the copies in tmp of the gcs that were killed: directories
 * trajfs-gc-PID-XXXXXX whose process is gone. */
static void remove_left_copies(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (!d)
        return;
    struct dirent *f;
    while ((f = readdir(d))) {
        char *end;
        long pid = strncmp(f->d_name, "trajfs-gc-", 10) == 0 ? strtol(f->d_name + 10, &end, 10) : 0;
        if (pid > 0 && *end == '-' && strlen(end) == 7 && pid != getpid() && kill((pid_t)pid, 0) < 0 &&
            errno == ESRCH)
            remove_left_copy(dirfd(d), f->d_name);
    }
    closedir(d);
}

/* A directory of its own for the local copy (TMPDIR, else /var/tmp),
 * named by the process: a later gc removes it should this one be
 * killed. */
static char *work_dir(tf_error *e)
{
    const char *tmp = tf_tmp_dir();
    remove_left_copies(tmp);
    char *dir;
    if (asprintf(&dir, "%s/trajfs-gc-%ld-XXXXXX", tmp, (long)getpid()) < 0) {
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    if (!mkdtemp(dir)) {
        tf_fail(e, errno, "cannot make a directory for gc's copy: %s", strerror(errno));
        free(dir);
        return NULL;
    }
    return dir;
}

/* The archive's bytes, copied into the new file path. */
static int download(const tf_container *c, const char *path,
                    void (*progress)(void *arg, uint64_t bytes), void *arg, tf_error *e)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return tf_fail(e, errno, "%s: %s", path, strerror(errno));
    uint8_t *buf = malloc(COPY_BLOCK);
    int rc = buf ? 0 : tf_fail(e, ENOMEM, "out of memory");
    for (uint64_t off = 0; rc == 0 && off < c->end;) {
        size_t n = c->end - off < COPY_BLOCK ? (size_t)(c->end - off) : COPY_BLOCK;
        rc = tf_container_pread(c, off, buf, n, e);
        if (rc == 0 && tf_pwrite_full(fd, buf, n, (off_t)off) < 0)
            rc = tf_fail(e, errno, "%s: %s", path, strerror(errno));
        off += n;
        if (rc == 0 && progress)
            progress(arg, n);
    }
    free(buf);
    close(fd);
    return rc;
}

int tf_regenerate(const char *url, const tf_remote_opts *remote,
                  void (*progress)(void *arg, uint64_t bytes), void *progress_arg, tf_gc_stats *stats,
                  tf_error *e)
{
    *stats = (tf_gc_stats){ 0 };
    tf_container c;
    if (tf_container_open(&c, url, &(tf_open_opts){ .writable = true, .remote = remote }, e) < 0)
        return -1;
    char *dir = NULL, *path = NULL;
    int rc = tf_container_seal(&c, e);
    if (rc == 0 && !(dir = work_dir(e)))
        rc = -1;
    if (rc == 0 && asprintf(&path, "%s/archive", dir) < 0)
        rc = tf_fail(e, ENOMEM, "out of memory"), path = NULL;
    if (rc == 0)
        rc = download(&c, path, progress, progress_arg, e);
    if (rc == 0)
        rc = tf_gc(path, progress, progress_arg, stats, e);
    int fd = rc == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    if (rc == 0 && (fd < 0 || fstat(fd, &st) < 0))
        rc = tf_fail(e, errno, "%s: %s", path, strerror(errno));
    if (rc == 0)
        rc = tf_container_replace(&c, fd, (uint64_t)st.st_size, e);
    if (fd >= 0)
        close(fd);
    if (path)
        unlink(path);
    if (dir)
        rmdir(dir);
    free(path);
    free(dir);
    tf_container_close(&c);
    return rc;
}
