/* The catalog: what a commit adds to the archive. Each commit appends one
 * catalog segment (new blobs, new or replaced entries, tombstones); the
 * archive's catalog is all segments applied in commit order.
 *
 * Serialization (before zstd): varints everywhere except fixed-width ids and
 * hashes; see trajfs(5). Decoding validates every count and length against
 * the bytes present, so a hostile segment cannot make us allocate more than
 * it pays for. */
#ifndef TRAJFS_FORMAT_CATALOG_H
#define TRAJFS_FORMAT_CATALOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/hash.h"
#include "format/page.h"

#define TF_PATH_MAX 4096 /* bytes in a path, like Linux PATH_MAX */
#define TF_NAME_MAX 255  /* bytes in one path component */
#define TF_DEPTH_MAX 64  /* components in a path */
/* Inode numbers of entries: 1 is the root directory, entries have 2 to
 * TF_INO_MAX, so that the next number (the largest + 1) never wraps. */
#define TF_INO_MAX ((uint64_t)1 << 62)

/* Entry kinds (stored values: never renumber). */
typedef enum {
    TF_ENTRY_DIR = 1,
    TF_ENTRY_FILE = 2,        /* opaque bytes in zstd chunks */
    TF_ENTRY_SAFETENSORS = 3, /* written by release 1 only: read as a
                                 TF_ENTRY_TENSORS entry (catalog_v1.c) */
    TF_ENTRY_SYMLINK = 4,
    TF_ENTRY_TOMBSTONE = 5,   /* the path was removed */
    TF_ENTRY_TENSORS = 6,     /* a tensor file: verbatim pieces and tensor spans */
} tf_entry_kind;

/* One stored blob. `ref` and `model` are global blob indices plus one
 * (0 = none); they always name an earlier blob, so chains cannot cycle. */
typedef struct {
    tf_blob_id id;     /* XXH3-128 of the raw_len bytes it reconstructs */
    uint64_t offset;   /* of the payload in the archive file */
    uint64_t enc_len;  /* payload bytes */
    uint64_t raw_len;  /* reconstructed bytes */
    uint64_t enc_hash; /* XXH3-64 of the payload */
    uint8_t codec;     /* tf_codec_id */
    uint8_t dtype;     /* tf_dtype of the elements */
    uint64_t ref;      /* delta reference blob + 1, or 0 */
    uint64_t model;    /* shared model blob + 1, or 0 */
} tf_blob;

/* Longest tensor name (identity) a catalog holds, in bytes. */
#define TF_TENSOR_NAME_MAX 4096

/* A tensor of a tensor file: its bytes are a run of chunk blobs of
 * 2^chunk_shift elements each. */
typedef struct {
    uint8_t dtype;        /* tf_dtype, not TF_DT_NONE */
    uint64_t nbytes;      /* data bytes; chunks = ceil(nbytes / chunk bytes) */
    uint64_t name_off;    /* its identity, a NUL-terminated string in the
                             entry's names (tf_tensor_name) */
    uint64_t file_off;    /* of its bytes in the file (not serialized) */
    uint64_t first_chunk; /* index into the entry's chunk list (not serialized) */
} tf_tensor_span;

/* The pieces of a tensor file, in file order, tile it: verbatim runs
 * (headers, pickles, zip records: the file's other bytes) and tensors. */
#define TF_PIECE_VERBATIM UINT64_MAX
typedef struct {
    uint64_t len;
    uint64_t tensor;       /* index into tensors, or TF_PIECE_VERBATIM */
    uint64_t file_off;     /* (not serialized) */
    uint64_t verbatim_off; /* verbatim: offset in the entry's verbatim
                              bytes, the concatenation of its verbatim
                              pieces (not serialized) */
} tf_piece;

typedef struct {
    uint8_t kind;      /* tf_entry_kind */
    uint64_t ino;      /* stable inode number, never reused */
    char *path;        /* relative, '/'-separated, validated */
    uint32_t mode;     /* permission bits (st_mode & 07777); the type is `kind` */
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint64_t size;     /* file size in bytes (symlink: target length) */
    /* TF_ENTRY_TENSORS. The verbatim bytes are stored in the first
     * verbatim_chunks chunks (bytes, 2^chunk_shift per chunk), or, for
     * entries of release 1, inline in `verbatim`. */
    uint8_t format;    /* tf_tensor_format id: what parsed it */
    uint64_t npieces;
    tf_piece *pieces;
    uint64_t ntensors;
    tf_tensor_span *tensors; /* in file order */
    char *names;       /* the tensors' names, NUL-terminated, back to back */
    uint64_t names_len;
    uint64_t verbatim_len;    /* bytes of the verbatim pieces */
    uint64_t verbatim_chunks; /* (not serialized) */
    uint8_t *verbatim;        /* inline verbatim bytes, or NULL */
    /* TF_ENTRY_FILE and TF_ENTRY_TENSORS: chunk blobs, global indices. */
    uint64_t nchunks;
    uint64_t *chunks;
    char *target;      /* TF_ENTRY_SYMLINK */
    tf_page_ref body;  /* format version 2: the page of its record (files;
                          not in segments) */
    /* Format version 2, a view that reads bodies when asked
     * (tf_archive_entry_body): the fields above after `size` are not
     * read yet. Set once, before the entry is shared; cleared, its
     * fields filled, under the archive's lock. */
    _Atomic bool body_pending;
} tf_entry;

/* A redirect: from this commit on, the blob slot `slot` (an earlier
 * commit's blob, by global index) is served by `blob`, a blob of this
 * segment with the same id, length and dtype, whose payload replaces the
 * slot's. Whatever names the slot (entries' chunks, other blobs' `ref`)
 * follows it, so a keyframe can be re-encoded as a delta against another
 * blob without touching its users (a superseded newest, trajfs(5)). */
typedef struct {
    uint64_t slot;
    uint64_t blob;
} tf_redirect;

typedef struct {
    uint64_t first_blob; /* global index of blobs[0] */
    uint64_t nblobs;
    tf_blob *blobs;
    uint64_t nentries;
    tf_entry *entries;
    uint64_t nredirects; /* a segment with any is of version 2 */
    tf_redirect *redirects;
    bool redirects_again; /* version 3: a redirect may name a slot that an
                             earlier commit redirected */
    uint64_t nserving;    /* format version 2: the last nserving blobs
                             serve redirected slots only, and get no slot
                             of their own once applied */
} tf_segment;

/* Whether a and b hold the same chunks: their body pages are one (a
 * page is never written twice), or, read, their chunk lists match. */
bool tf_entry_same_chunks(const tf_entry *a, const tf_entry *b);

/* Whether the entry is a regular file (opaque bytes or a tensor file). */
static inline bool tf_entry_is_regular(const tf_entry *ent)
{
    return ent->kind == TF_ENTRY_FILE || ent->kind == TF_ENTRY_TENSORS;
}

/* Whether the entry is a tensor file: it has tensor spans. */
static inline bool tf_entry_is_tensor_file(const tf_entry *ent)
{
    return ent->kind == TF_ENTRY_TENSORS;
}

/* The identity of tensor t of a tensor file. */
static inline const char *tf_tensor_name(const tf_entry *ent, uint64_t t)
{
    return ent->names + ent->tensors[t].name_off;
}

/* Number of chunks of a tensor of nbytes bytes of elements of elem_size
 * bytes, with 2^chunk_shift elements per chunk. */
uint64_t tf_chunk_count(uint64_t nbytes, unsigned elem_size, unsigned chunk_shift);

/* Checks an archive path: relative, no empty, "." or ".." component, no
 * NUL or control characters, component and total lengths and depth
 * bounded. Returns 0 or -1 with the reason. */
int tf_path_check(const char *path, size_t len, tf_error *e);

/* Fills in a tensor file's derived fields (pieces' and tensors' offsets,
 * first chunks, verbatim_len and verbatim_chunks) from its pieces, and
 * checks them: the pieces tile size bytes, tensor pieces name the tensors
 * in order, each a whole number of elements of a known dtype, each name
 * inside names. Returns the number of chunks the entry must have through
 * *nchunks; 0, or -1 with the reason. */
int tf_entry_layout(tf_entry *ent, unsigned chunk_shift, uint64_t *nchunks, tf_error *e);

/* Serializes a segment (uncompressed). */
int tf_segment_encode(const tf_segment *s, tf_buf *out, tf_error *e);
/* Parses and validates a segment: entry shapes (chunk counts match tensor
 * sizes for chunk_shift, tensor bytes sum to the data size), blob ranges
 * inside [0, file_end), references to earlier blobs only, redirects from
 * an earlier commit's slot (each once) to a blob of this segment. What
 * needs the archive (a redirect's blob matching its slot, chains through
 * redirects) store/archive.c checks. */
int tf_segment_decode(const uint8_t *p, size_t len, uint64_t first_blob,
                      unsigned chunk_shift, uint64_t file_end, tf_segment *s,
                      tf_error *e);
void tf_segment_free(tf_segment *s);
/* The rules a blob record keeps by itself, whatever its commit: its
 * payload inside the archive's first file_end bytes, a reconstructed
 * length of at most a chunk's (or 16 MiB), a known dtype. */
int tf_blob_check(const tf_blob *b, uint64_t self, unsigned chunk_shift, uint64_t file_end,
                  tf_error *e);
/* One entry record, as a segment holds it (format version 2 keeps a
 * file's whole record in its body page). Decoding takes exactly len
 * bytes; its chunks must name blobs below nblobs. */
int tf_entry_encode(const tf_entry *ent, tf_buf *out, tf_error *e);
int tf_entry_decode(const uint8_t *p, size_t len, uint64_t nblobs, unsigned chunk_shift,
                    tf_entry *ent, tf_error *e);
/* A deep copy of src into dst, at path instead of src's when path is
 * not NULL; a body src has pending stays pending in the copy. */
int tf_entry_clone(const tf_entry *src, const char *path, tf_entry *dst, tf_error *e);
void tf_entry_free(tf_entry *ent);
/* Frees n entries and the array that holds them. */
void tf_entries_free(tf_entry *ents, size_t n);

#endif
