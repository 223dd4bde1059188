/* A mounted archive: what every request handler needs. */
#ifndef TRAJFS_FS_FS_H
#define TRAJFS_FS_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/error.h"
#include "fs/options.h"
#include "fs/readbuf.h"
#include "fs/tree.h"
#include "store/archive.h"
#include "store/reader.h"

typedef struct {
    tf_archive *ar;
    fs_tree tree;
    tf_reader_ctx *reader;  /* one for all threads; its cache is shared */
    fs_readbuf readbuf;
    struct stat archive_st; /* owner of every file; times of the root */
    uint64_t total_bytes;   /* of all files, for statfs */
    bool direct_io;         /* bypass the kernel's page cache */
} fs_state;

/* Opens the archive of the options read-only for mounting. */
int fs_state_open(fs_state *fs, const fs_options *o, tf_error *e);
void fs_state_close(fs_state *fs);

#endif
