/* Unnamed scratch files on disk: bytes that wait for their turn (a
 * mount's spool files, the files a repack re-encodes), never in memory,
 * whatever their size, and never left behind when the process dies. */
#ifndef TRAJFS_COMMON_TMPFILE_H
#define TRAJFS_COMMON_TMPFILE_H

/* A new, empty file in the directory dirfd, open for reading and
 * writing: unnamed (O_TMPFILE), or, on a file system without it, named
 * .NAME-PID-N and unlinked at once (a crash in between leaves it behind,
 * named for what it is). Its descriptor, or -errno. */
int tf_tmpfile_create(int dirfd, const char *name);

/* Where scratch files go when no directory is named: TMPDIR, else
 * /var/tmp (on disk, where /tmp may be memory). */
const char *tf_tmp_dir(void);

#endif
