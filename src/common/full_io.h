/* Whole reads and writes on a file descriptor: the system calls again
 * after a signal (EINTR) and after a short count, until every byte is
 * moved or an error or the end of the file stops them. */
#ifndef TRAJFS_COMMON_FULL_IO_H
#define TRAJFS_COMMON_FULL_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads len bytes at off: the count read, fewer than len only at the end
 * of the file, or -1 with errno set. */
ssize_t tf_pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Writes the len bytes at off: 0, or -1 with errno set. */
int tf_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
/* Writes the len bytes at the file's position: 0, or -1 with errno set. */
int tf_write_full(int fd, const void *buf, size_t len);

#endif
