/* Edits of the tree: one commit each. */
#include "store/writer_impl.h"

int tf_writer_mkdir(tf_writer *w, const char *path, const tf_entry_attrs *attrs, tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_mkdir(&c, path, attrs, e), e);
}

int tf_writer_symlink(tf_writer *w, const char *path, const char *target,
                      const tf_entry_attrs *attrs, tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_symlink(&c, path, target, attrs, e), e);
}

int tf_writer_remove(tf_writer *w, const char *path, tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_remove(&c, path, e), e);
}

int tf_writer_move(tf_writer *w, const char *from, const char *to, tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_move(&c, from, to, e), e);
}

int tf_writer_set_attrs(tf_writer *w, const char *path, uint32_t mode, struct timespec mtime,
                        tf_error *e)
{
    tf_commit c;
    tf_writer_begin_commit(w, &c);
    return tf_writer_end_commit(w, &c, tf_commit_set_attrs(&c, path, mode, mtime, e), e);
}
