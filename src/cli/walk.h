/* The walk of the inputs of `trajpack create` and `add`: files and
 * directories on disk, and the archive paths they get. */
#ifndef TRAJFS_CLI_WALK_H
#define TRAJFS_CLI_WALK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    char *src;    /* path on disk */
    char *dest;   /* archive path */
    mode_t mode;   /* st_mode from lstat */
    uint64_t size; /* bytes of a regular file, 0 otherwise */
} cli_input;

typedef struct {
    cli_input *items;
    size_t count, cap;
    uint64_t total_bytes;
} cli_input_list;

/* Appends src as archive path dest, and, for a directory, its contents
 * recursively: each directory before its contents, names in natural order
 * (step-900 before step-1000). skip_dev/skip_ino name a file to leave out
 * (the archive itself). Returns 0, or -1 after printing an error. */
int cli_walk(const char *src, const char *dest, dev_t skip_dev, ino_t skip_ino,
             cli_input_list *list);
void cli_input_list_free(cli_input_list *list);

#endif
