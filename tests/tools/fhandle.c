/* fhandle: file handles as NFS servers use them (name_to_handle_at,
 * open_by_handle_at), for the mount tests.
 *
 *   fhandle save PATH HANDLE_FILE   writes PATH's handle to HANDLE_FILE
 *   fhandle cat DIR HANDLE_FILE     opens the handle on the file system
 *                                   mounted at DIR, copies it to stdout
 *   fhandle ino DIR HANDLE_FILE     opens the handle (a directory too) and
 *                                   prints its inode number
 *
 * A handle taken before `echo 2 > /proc/sys/vm/drop_caches` or before an
 * unmount and remount must still open (needs CAP_DAC_READ_SEARCH). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char *what, const char *arg)
{
    fprintf(stderr, "fhandle: %s %s: %s\n", what, arg, strerror(errno));
    return 1;
}

static int save(const char *path, const char *out)
{
    struct file_handle *fh = malloc(sizeof *fh + MAX_HANDLE_SZ);
    if (!fh)
        return fail("out of memory for", path);
    fh->handle_bytes = MAX_HANDLE_SZ;
    int mount_id;
    if (name_to_handle_at(AT_FDCWD, path, fh, &mount_id, 0) < 0)
        return fail("name_to_handle_at", path);
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(fh, sizeof *fh + fh->handle_bytes, 1, f) != 1 || fclose(f) != 0)
        return fail("writing", out);
    free(fh);
    return 0;
}

/* Opens the handle saved in `in` on the file system mounted at dir. */
static int open_handle(const char *dir, const char *in)
{
    struct file_handle *fh = malloc(sizeof *fh + MAX_HANDLE_SZ);
    FILE *f = fopen(in, "rb");
    if (!fh || !f || fread(fh, sizeof *fh, 1, f) != 1 || fh->handle_bytes > MAX_HANDLE_SZ ||
        fread(fh->f_handle, 1, fh->handle_bytes, f) != fh->handle_bytes) {
        fail("reading", in);
        exit(1);
    }
    fclose(f);
    int mount_fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (mount_fd < 0) {
        fail("open", dir);
        exit(1);
    }
    int fd = open_by_handle_at(mount_fd, fh, O_RDONLY);
    if (fd < 0) {
        fail("open_by_handle_at on", dir);
        exit(1);
    }
    close(mount_fd);
    free(fh);
    return fd;
}

static int cat(const char *dir, const char *in)
{
    int fd = open_handle(dir, in);
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
            return fail("writing", "stdout");
    if (n < 0)
        return fail("read through handle from", in);
    close(fd);
    return fflush(stdout) == 0 ? 0 : fail("writing", "stdout");
}

static int ino(const char *dir, const char *in)
{
    int fd = open_handle(dir, in);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return fail("fstat through handle from", in);
    printf("%llu\n", (unsigned long long)st.st_ino);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "save") == 0)
        return save(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "cat") == 0)
        return cat(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "ino") == 0)
        return ino(argv[2], argv[3]);
    fprintf(stderr, "usage: fhandle save PATH HANDLE_FILE | fhandle cat|ino DIR HANDLE_FILE\n");
    return 2;
}
