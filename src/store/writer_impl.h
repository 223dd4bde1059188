/* What the writer's files share (store/writer.c, writer_edit.c,
 * tensor_file.c). */
#ifndef TRAJFS_STORE_WRITER_IMPL_H
#define TRAJFS_STORE_WRITER_IMPL_H

#include <stdatomic.h>

#include "common/pool.h"
#include "format/tensor_format.h"
#include "store/commit.h"
#include "store/pipeline.h"
#include "store/reader.h"
#include "store/refs.h"
#include "store/source.h"
#include "store/writer.h"

struct tf_writer {
    tf_archive *ar;
    tf_write_opts opts;
    tf_reader_ctx *reader;
    tf_ref_index *refs;
    tf_add_report report; /* of the last file added */
    bool drop_references; /* tf_writer_keep_references(w, false) */
    size_t largest_seeds; /* bytes: the most one file gave the cache */
    bool give_back_warned; /* a failure to give space back was noted */
    tf_error give_back_pending; /* it, until a report carries it */
    atomic_bool give_back_owed; /* data only open versions read was kept
                                   (tf_writer_give_back_unread) */
    _Atomic uint64_t next_ino;
    tf_pool *encoders; /* tf_writer_encoders */
};

/* The threads that encode for the writer (NULL in *out with one thread):
 * one pool, started at the first call and kept until the writer closes,
 * not threads started for each file, which paid for their start and
 * their first allocations (a zstd context each) at every file. */
int tf_writer_encoders(tf_writer *w, tf_pool **out, tf_error *e);

void tf_writer_begin_commit(tf_writer *w, tf_commit *c);
/* Commits when the entries went in (rc 0), else drops what was appended.
 * A commit that removed or replaced files is followed by a rebase
 * (store/rebase.h). */
int tf_writer_end_commit(tf_writer *w, tf_commit *c, int rc, tf_error *e);
/* A failure to give space back is worth one warning a writer: kept
 * until the report of the add it happened in (or, at open, of the next
 * add) carries it. */
void tf_writer_note_give_back(tf_writer *w, const tf_error *why);
/* Moves a pending give-back failure into the report of the last add or
 * removal. */
void tf_writer_report_give_back(tf_writer *w);

/* Adds the tensor file src of format f as archive path dest. Its
 * tensors' references: the same tensors of the archive path parent when
 * given, else found by identity for the run of series_path. The chunks
 * to give the cache once committed go to seeds. */
int tf_writer_add_tensor_file(tf_writer *w, tf_commit *c, const tf_tensor_format *f,
                              const char *dest, const char *series_path, const char *parent,
                              const tf_entry_attrs *attrs, const tf_source *src,
                              tf_seeds *seeds, tf_error *e);

#endif
