/* Adding files to an archive: a regular file that a tensor-file format
 * recognises (format/tensor_format.h) is parsed into pieces, each tensor
 * given its reference (the same tensor of the nearest earlier checkpoint
 * of its run, store/refs.h) and cut into chunks; each chunk is
 * deduplicated by content id or encoded with the smallest of the
 * applicable codecs (store/pipeline.h), then the file is committed. One
 * commit per file: a crash loses at most the file being added. */
#ifndef TRAJFS_STORE_WRITER_H
#define TRAJFS_STORE_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "common/error.h"
#include "store/archive.h"
#include "store/source.h"
#include "store/write_opts.h"

/* What a caller that manages inodes itself (a mount) says about an entry
 * it adds. */
typedef struct {
    uint64_t ino;          /* from tf_writer_new_ino, and not live at another
                            * path; 0: the writer's choice (a new number, or
                            * the old one of a directory added again) */
    uint32_t mode;         /* permission bits */
    struct timespec mtime;
} tf_entry_attrs;

typedef struct tf_writer tf_writer;

/* Opens (or, with create, creates with chunk_shift, TF_CHUNK_SHIFT_MIN
 * to TF_CHUNK_SHIFT_MAX) an archive as its single writer. */
int tf_writer_open(const char *archive, bool create, unsigned chunk_shift,
                   const tf_write_opts *opts, tf_writer **out, tf_error *e);
/* Waits for the last commit written behind (opts.commit_behind) to be
 * durable, and gives back what it retired: 0, or -1 when writing or
 * syncing it failed (it is then not in the archive). */
int tf_writer_settle(tf_writer *w, tf_error *e);
/* Settles (a failure unreported: call tf_writer_settle first to see
 * it), then closes. */
void tf_writer_close(tf_writer *w);
tf_archive *tf_writer_archive(tf_writer *w);
/* Whether data that only open versions read (tf_write_opts.open_versions)
 * was kept when space was given back, and has not been given back
 * since: a mount asks when one of its files closes. */
bool tf_writer_give_back_owed(tf_writer *w);
/* Gives back every byte of the archive that neither live files nor open
 * versions read (store/give_back.h): what was kept for versions since
 * closed. On the writer's thread, between commits. */
int tf_writer_give_back_unread(tf_writer *w, tf_error *e);
/* The reader the writer reconstructs parents with (its cache bounded by
 * opts.cache_bytes), until tf_writer_close. Other threads may read the
 * archive through it too (a mount does: one cache, one bound). */
struct tf_reader_ctx *tf_writer_reader(tf_writer *w);

/* Adds the file, directory or symlink at src (not recursive) as archive
 * path dest, creating missing parent directories. A regular file is a
 * tensor file when a format recognises its content; one whose name
 * claims a format (*.safetensors) must be a valid file of it. parent,
 * when non-NULL, is the archive path of the tensor file whose same-named
 * tensors are the references; otherwise each tensor's is found by
 * identity in dest's run. Each call commits. */
int tf_writer_add(tf_writer *w, const char *src, const char *dest,
                  const char *parent, tf_error *e);

/* Whether the tensor chunks of the files added from now on go to the
 * reader's cache once committed (the references of the next
 * checkpoints, which then need no decoding): on by default; a caller
 * that knows no more tensor files follow turns it off, which saves
 * their memory and time. */
void tf_writer_keep_references(tf_writer *w, bool keep);

/* A new inode number, never handed out before and never reused: for
 * entries a caller adds with tf_entry_attrs. Any thread may call it. */
uint64_t tf_writer_new_ino(tf_writer *w);

/* Adds the regular file open as fd (all of it, from offset 0) as archive
 * path dest, and commits, as tf_writer_add does. The file is mapped, not
 * read into memory, and must not change until this returns. series_path
 * (dest when NULL) is the path whose run gives the references and whose
 * name the format rule looks at. */
int tf_writer_add_fd(tf_writer *w, int fd, const char *dest, const char *series_path,
                     const tf_entry_attrs *attrs, tf_error *e);

/* Adds a regular file that is still being written, as archive path dest
 * (its run gives the references), and commits, as tf_writer_add_fd does:
 * its chunks are encoded as its bytes come, so that once it is complete
 * only its tail is left. Only a file whose format tells its size from its
 * first bytes can be (a safetensors file); for others, and when the file
 * does not end as it began (settle), the add fails with ECANCELED and the
 * archive is as it was: the caller adds the file once it is complete. */
int tf_writer_add_growing(tf_writer *w, const tf_growing_file *g, const char *dest,
                          const tf_entry_attrs *attrs, tf_error *e);

/* What the last tf_writer_add, tf_writer_add_fd or tf_writer_add_growing
 * of a regular file found. */
typedef struct {
    bool tensor_file;
    uint64_t tensor_bytes;     /* bytes of its float tensors */
    uint64_t referenced_bytes; /* of those, in tensors that found a reference */
    uint64_t run_files;        /* tensor files of its run already stored */
    /* Why retired space was not given back (store/commit.h), the first
     * time for the writer; errnum 0 otherwise. */
    tf_error give_back;
} tf_add_report;

const tf_add_report *tf_writer_last_report(const tf_writer *w);
/* Whether a tensor file of a run that has checkpoints already found a
 * reference for less than half of its float bytes: its tensors match
 * nothing stored (renamed, or of another model), and it is stored
 * standalone. Worth a warning. */
bool tf_add_report_unmatched(const tf_add_report *r);
/* Whether the report is worth a warning: unmatched, or space that could
 * not be given back. */
bool tf_add_report_warns(const tf_add_report *r);
/* The warning for such a report, one line, into buf (n bytes). */
void tf_add_report_warning(const tf_add_report *r, char *buf, size_t n);

/* Edits of the tree, one commit each; the errors are rename(2)'s and
 * mkdir(2)'s (see store/commit.h). */
int tf_writer_mkdir(tf_writer *w, const char *path, const tf_entry_attrs *attrs, tf_error *e);
int tf_writer_symlink(tf_writer *w, const char *path, const char *target,
                      const tf_entry_attrs *attrs, tf_error *e);
/* Removes path and everything below it (a tombstone). */
int tf_writer_remove(tf_writer *w, const char *path, tf_error *e);
/* Removes the n archive paths (a trailing '/' allowed), each with
 * everything below it, in one commit: none when any of them is not a
 * valid path (EINVAL, ENAMETOOLONG) or names nothing (ENOENT), the
 * message naming it. A path given twice or below another one is removed
 * once. Like every commit that removes files, it gives back at once the
 * space no kept file reads, and the chunks that referenced the removed
 * files' are re-encoded in a second commit (store/rebase.h); its report
 * (tf_writer_last_report) carries a failure to give space back. n == 0:
 * no commit. */
int tf_writer_remove_paths(tf_writer *w, const char *const *paths, size_t n, tf_error *e);
int tf_writer_move(tf_writer *w, const char *from, const char *to, tf_error *e);
int tf_writer_set_attrs(tf_writer *w, const char *path, uint32_t mode, struct timespec mtime,
                        tf_error *e);

#endif
