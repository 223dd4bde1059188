/* The directory tree of a mounted archive, by inode number: built once
 * from the catalog (never from tensor data) and read-only afterwards, so
 * every thread may use it without locks. Inode numbers are the archive's
 * own (root = 1): stable across remounts, as NFS file handles need.
 *
 * A read-write mount builds a new tree after each commit and publishes it
 * in place of the old one (see state.h, view.h). */
#ifndef TRAJFS_FS_TREE_H
#define TRAJFS_FS_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "store/archive.h"

#define FS_ROOT_INO 1

typedef struct {
    uint64_t ino;
    const tf_entry *ent;   /* NULL for the root, which has no entry */
    const char *name;      /* last path component; "" for the root */
    size_t parent;         /* node index; the root is its own parent */
    size_t first_child;    /* directories: children[first_child...] */
    size_t nchildren;      /* in name order */
    size_t nsubdirs;       /* for the link count */
} fs_node;

typedef struct {
    uint64_t ino;
    size_t node;
} fs_ino_slot;

typedef struct {
    fs_node *nodes;        /* nodes[0] is the root */
    size_t nnodes;
    size_t *children;      /* node indices, grouped by directory */
    fs_ino_slot *by_ino;   /* sorted by inode number */
    uint64_t total_bytes;  /* of all regular files */
} fs_tree;

/* Builds the tree of an archive's live entries; the archive must stay
 * open and unchanged while the tree is used. Rejects inode numbers that
 * are reserved or not unique. */
int fs_tree_build(const tf_archive *ar, fs_tree *t, tf_error *e);
void fs_tree_free(fs_tree *t);

/* The node with inode number ino, or NULL. */
const fs_node *fs_tree_by_ino(const fs_tree *t, uint64_t ino);
/* Child `name` of directory dir, or NULL. */
const fs_node *fs_tree_child(const fs_tree *t, const fs_node *dir, const char *name);
/* The k-th child of dir in name order, or NULL past the last. */
const fs_node *fs_tree_nth_child(const fs_tree *t, const fs_node *dir, uint64_t k);
const fs_node *fs_tree_parent(const fs_tree *t, const fs_node *n);

/* The archive path of entry `name` in directory dir (at most TF_PATH_MAX
 * bytes and a valid archive path: ENAMETOOLONG or EINVAL otherwise).
 * Returns 0 or an errno value. */
int fs_tree_child_path(const fs_node *dir, const char *name, char out[TF_PATH_MAX + 1]);
/* The directory of inode parent (*dir) and the archive path of its entry
 * name: 0, ENOENT, ENOTDIR, or fs_tree_child_path's error. */
int fs_tree_resolve(const fs_tree *t, uint64_t parent, const char *name, const fs_node **dir,
                    char path[TF_PATH_MAX + 1]);

static inline bool fs_node_is_dir(const fs_node *n)
{
    return !n->ent || n->ent->kind == TF_ENTRY_DIR;
}

#endif
