/* trajfs's own command-line options; libfuse parses the rest. */
#ifndef TRAJFS_FS_OPTIONS_H
#define TRAJFS_FS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include <fuse3/fuse_opt.h>

#include "store/archive.h"
#include "store/write_opts.h"

typedef struct {
    char *archive;        /* the first argument that is not an option */
    char *cache_size_arg; /* -o cache_size=SIZE as given, or NULL */
    size_t cache_size;    /* bytes of reconstructed chunks kept */
    char *catalog_cache_arg; /* -o catalog_cache=SIZE as given, or NULL */
    size_t catalog_cache; /* bytes of decoded catalog pages kept (format 2) */
    char *readahead_arg;  /* -o readahead=SIZE as given, or NULL */
    size_t readahead;     /* bytes of the kernel's read-ahead window */
    char *prefetch_arg;   /* -o prefetch=SIZE as given, or NULL */
    size_t prefetch;      /* bytes of a file read in order decoded ahead */
    unsigned threads;     /* -o threads=N: request threads (and, with rw,
                           * encoder threads); 0: libfuse's default */
    int direct_io;        /* -o direct_io: no kernel page cache */
    bool rw;              /* -o rw: a writable mount */
    char *spool_dir;      /* -o spool_dir=DIR (rw), or NULL: the archive's */
    char *follow_arg;     /* -o follow=SECONDS as given, or NULL */
    double follow;        /* seconds between looks for commits others
                           * appended; 0: none (always with rw) */
    tf_write_opts write;  /* (rw) the writer's settings: -o threads=N,
                           * max_chain=N... (store/write_opts.h) */
    tf_remote_opts remote; /* a remote archive's: -o cache_dir=DIR,
                            * timeout=S... (io/remote_opts.h), given
                            * to tf_archive_open */
} fs_options;

/* Takes trajfs's options and the archive out of args, leaving libfuse's
 * options and the mount point. Returns 0, or -1 after a message. */
int fs_options_parse(struct fuse_args *args, fs_options *o);
void fs_options_free(fs_options *o);

/* Prints the options of fs_options_parse for --help. */
void fs_options_help(void);

/* Default cache_size: an eighth of physical memory, between 64 MiB and
 * 4 GiB. */
size_t fs_default_cache_size(void);

#endif
