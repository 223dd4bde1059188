#include "fs/tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fs_tree_free(fs_tree *t)
{
    free(t->nodes);
    free(t->children);
    free(t->by_ino);
    *t = (fs_tree){ 0 };
}

/* Whether path lies below the directory at dir. */
static bool is_below(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Finds each entry's parent. Entries come in path order with a
 * directory's whole subtree right after it, so the directories along the
 * current path form a stack. */
static int link_parents(const tf_archive *ar, fs_tree *t, tf_error *e)
{
    size_t stack[TF_DEPTH_MAX + 1] = { 0 }, depth = 0;
    for (size_t i = 1; i < t->nnodes; i++) {
        const tf_entry *ent = tf_archive_entry(ar, i - 1);
        while (depth > 0 && !is_below(ent->path, t->nodes[stack[depth]].ent->path))
            depth--;
        size_t parent = stack[depth];
        const char *name = ent->path;
        if (parent)
            name += strlen(t->nodes[parent].ent->path) + 1;
        if (strchr(name, '/'))
            return tf_fail(e, EIO, "catalog: \"%s\" has no parent directory", ent->path);
        t->nodes[i] = (fs_node){ .ino = ent->ino, .ent = ent, .name = name, .parent = parent };
        t->nodes[parent].nchildren++;
        if (tf_entry_is_regular(ent))
            t->total_bytes += ent->size;
        if (ent->kind == TF_ENTRY_DIR) {
            t->nodes[parent].nsubdirs++;
            if (depth == TF_DEPTH_MAX)
                return tf_fail(e, EIO, "catalog: \"%s\" is nested too deep", ent->path);
            stack[++depth] = i;
        }
    }
    return 0;
}

/* Lists each directory's children in entry order, which is name order:
 * siblings share their parent's prefix and names hold no '/'. */
static void group_children(fs_tree *t)
{
    size_t next = 0;
    for (size_t i = 0; i < t->nnodes; i++) {
        t->nodes[i].first_child = next;
        next += t->nodes[i].nchildren;
        t->nodes[i].nchildren = 0;
    }
    for (size_t i = 1; i < t->nnodes; i++) {
        fs_node *p = &t->nodes[t->nodes[i].parent];
        t->children[p->first_child + p->nchildren++] = i;
    }
}

static int cmp_ino(const void *a, const void *b)
{
    uint64_t x = ((const fs_ino_slot *)a)->ino, y = ((const fs_ino_slot *)b)->ino;
    return (x > y) - (x < y);
}

static int index_inodes(fs_tree *t, tf_error *e)
{
    for (size_t i = 0; i < t->nnodes; i++)
        t->by_ino[i] = (fs_ino_slot){ .ino = t->nodes[i].ino, .node = i };
    qsort(t->by_ino, t->nnodes, sizeof *t->by_ino, cmp_ino);
    for (size_t i = 0; i < t->nnodes; i++) {
        const fs_ino_slot *slot = &t->by_ino[i];
        if (slot->node == 0)
            continue; /* the root, inode 1 */
        const char *path = t->nodes[slot->node].ent->path;
        if (slot->ino <= FS_ROOT_INO)
            return tf_fail(e, EIO, "catalog: \"%s\" has reserved inode number %llu", path,
                           (unsigned long long)slot->ino);
        if (i > 0 && slot->ino == t->by_ino[i - 1].ino)
            return tf_fail(e, EIO, "catalog: inode number %llu is used twice (\"%s\")",
                           (unsigned long long)slot->ino, path);
    }
    return 0;
}

int fs_tree_build(const tf_archive *ar, fs_tree *t, tf_error *e)
{
    size_t n = tf_archive_nentries(ar) + 1;
    *t = (fs_tree){
        .nodes = calloc(n, sizeof *t->nodes),
        .nnodes = n,
        .children = calloc(n, sizeof *t->children),
        .by_ino = calloc(n, sizeof *t->by_ino),
    };
    if (!t->nodes || !t->children || !t->by_ino) {
        fs_tree_free(t);
        return tf_fail(e, ENOMEM, "inode table: out of memory");
    }
    t->nodes[0] = (fs_node){ .ino = FS_ROOT_INO, .name = "" };
    if (link_parents(ar, t, e) < 0 || index_inodes(t, e) < 0) {
        fs_tree_free(t);
        return -1;
    }
    group_children(t);
    return 0;
}

const fs_node *fs_tree_by_ino(const fs_tree *t, uint64_t ino)
{
    size_t lo = 0, hi = t->nnodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->by_ino[mid].ino == ino)
            return &t->nodes[t->by_ino[mid].node];
        if (t->by_ino[mid].ino < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const fs_node *fs_tree_child(const fs_tree *t, const fs_node *dir, const char *name)
{
    const size_t *kids = t->children + dir->first_child;
    size_t lo = 0, hi = dir->nchildren;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->nodes[kids[mid]].name, name);
        if (c == 0)
            return &t->nodes[kids[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const fs_node *fs_tree_nth_child(const fs_tree *t, const fs_node *dir, uint64_t k)
{
    return k < dir->nchildren ? &t->nodes[t->children[dir->first_child + k]] : NULL;
}

const fs_node *fs_tree_parent(const fs_tree *t, const fs_node *n)
{
    return &t->nodes[n->parent];
}

int fs_tree_child_path(const fs_node *dir, const char *name, char out[TF_PATH_MAX + 1])
{
    const char *base = dir->ent ? dir->ent->path : "";
    int n = snprintf(out, TF_PATH_MAX + 1, "%s%s%s", base, *base ? "/" : "", name);
    if (n < 0 || n > TF_PATH_MAX || strlen(name) > TF_NAME_MAX)
        return ENAMETOOLONG;
    tf_error e;
    return tf_path_check(out, (size_t)n, &e) < 0 ? e.errnum : 0;
}

int fs_tree_resolve(const fs_tree *t, uint64_t parent, const char *name, const fs_node **dir,
                    char path[TF_PATH_MAX + 1])
{
    *dir = fs_tree_by_ino(t, parent);
    if (!*dir)
        return ENOENT;
    if (!fs_node_is_dir(*dir))
        return ENOTDIR;
    return fs_tree_child_path(*dir, name, path);
}
