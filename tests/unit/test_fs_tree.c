/* The tree of a mounted archive (fs/tree.h), built from a catalog:
 * lookups by inode and by name, children in name order, parents, link
 * counts and sizes, and the paths of new names with their errors. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "testlib.h"

#include "fs/tree.h"
#include "store/writer.h"

static char archive_path[TEST_PATH_MAX], src_path[TEST_PATH_MAX];
static tf_writer *w;
static fs_tree t;

static void add_text(const char *dest, const char *text)
{
    test_write_file(src_path, text, strlen(text));
    test_add(w, src_path, dest);
}

static void mkdir_at(const char *path)
{
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_mkdir(w, path, NULL, &e) == 0, "%s", e.msg);
}

/* /b.txt (5 bytes), /d/, /d/z.txt (2 bytes), /d/a.txt (3 bytes), /d/e/ */
static void setup(void)
{
    test_dir_make();
    test_path("a.traj", archive_path);
    test_path("src", src_path);
    w = test_open_writer(archive_path, true, 8, 1, 0);
    add_text("b.txt", "hello");
    mkdir_at("d");
    add_text("d/z.txt", "zz");
    add_text("d/a.txt", "aaa");
    mkdir_at("d/e");
    tf_error e = { 0 };
    ck_assert_msg(fs_tree_build(tf_writer_archive(w), &t, &e) == 0, "%s", e.msg);
}

static void teardown(void)
{
    fs_tree_free(&t);
    tf_writer_close(w);
    test_dir_remove();
}

START_TEST(names_inodes_and_parents)
{
    const fs_node *root = fs_tree_by_ino(&t, FS_ROOT_INO);
    ck_assert_ptr_nonnull(root);
    ck_assert(fs_node_is_dir(root));
    ck_assert_ptr_eq(fs_tree_parent(&t, root), root);
    const fs_node *d = fs_tree_child(&t, root, "d");
    ck_assert_ptr_nonnull(d);
    ck_assert(fs_node_is_dir(d));
    const fs_node *a = fs_tree_child(&t, d, "a.txt");
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(a->name, "a.txt");
    ck_assert_str_eq(a->ent->path, "d/a.txt");
    ck_assert_ptr_eq(fs_tree_by_ino(&t, a->ino), a);
    ck_assert_ptr_eq(fs_tree_parent(&t, a), d);
    ck_assert_ptr_null(fs_tree_child(&t, root, "a.txt"));
    ck_assert_ptr_null(fs_tree_by_ino(&t, 999999));
}
END_TEST

START_TEST(children_in_name_order_with_counts)
{
    const fs_node *root = fs_tree_by_ino(&t, FS_ROOT_INO);
    const fs_node *d = fs_tree_child(&t, root, "d");
    const char *want[] = { "a.txt", "e", "z.txt" };
    ck_assert_uint_eq(d->nchildren, 3);
    for (uint64_t k = 0; k < 3; k++)
        ck_assert_str_eq(fs_tree_nth_child(&t, d, k)->name, want[k]);
    ck_assert_ptr_null(fs_tree_nth_child(&t, d, 3));
    ck_assert_uint_eq(d->nsubdirs, 1);
    ck_assert_uint_eq(root->nsubdirs, 1);
    ck_assert_uint_eq(t.total_bytes, 5 + 2 + 3);
    ck_assert_uint_eq(t.nnodes, 6);
}
END_TEST

START_TEST(paths_of_new_names)
{
    const fs_node *root = fs_tree_by_ino(&t, FS_ROOT_INO);
    const fs_node *d = fs_tree_child(&t, root, "d");
    char path[TF_PATH_MAX + 1];
    ck_assert_int_eq(fs_tree_child_path(root, "new", path), 0);
    ck_assert_str_eq(path, "new");
    ck_assert_int_eq(fs_tree_child_path(d, "new", path), 0);
    ck_assert_str_eq(path, "d/new");
    char long_name[TF_NAME_MAX + 2];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    ck_assert_int_eq(fs_tree_child_path(root, long_name, path), ENAMETOOLONG);
}
END_TEST

START_TEST(resolving_names_in_directories)
{
    const fs_node *root = fs_tree_by_ino(&t, FS_ROOT_INO);
    const fs_node *d = fs_tree_child(&t, root, "d");
    const fs_node *a = fs_tree_child(&t, d, "a.txt");
    const fs_node *dir;
    char path[TF_PATH_MAX + 1];
    ck_assert_int_eq(fs_tree_resolve(&t, d->ino, "x", &dir, path), 0);
    ck_assert_ptr_eq(dir, d);
    ck_assert_str_eq(path, "d/x");
    ck_assert_int_eq(fs_tree_resolve(&t, a->ino, "x", &dir, path), ENOTDIR);
    ck_assert_int_eq(fs_tree_resolve(&t, 999999, "x", &dir, path), ENOENT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fs_tree");
    TCase *tc = tcase_create("tree");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, names_inodes_and_parents);
    tcase_add_test(tc, children_in_name_order_with_counts);
    tcase_add_test(tc, paths_of_new_names);
    tcase_add_test(tc, resolving_names_in_directories);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
