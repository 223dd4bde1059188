/* Hostile archives: catalogs that no writer produces, committed as real
 * archives (tf_segment_encode + tf_container_commit), must make
 * tf_archive_open fail with a message naming the archive and the problem,
 * or, where only reading shows it, make the read fail cleanly. Names with
 * "..", absolute paths, NUL and control characters, over-long and deeply
 * nested names, huge declared sizes, chunk counts and chunk sizes that do
 * not match the tensors, verbatim chunks of the wrong size, stored
 * headers whose shapes or names do not match the catalog's pieces (found
 * by verify), two entries with one inode number, reference cycles,
 * model chains and reference chains longer than the loader's bound.
 * test_catalog.c checks the segment decoder alone; these go through the
 * whole open. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#include "codec/codec.h"
#include "common/dtype.h"
#include "common/hash.h"
#include "format/catalog.h"
#include "format/container.h"
#include "format/tensor_format.h"
#include "store/archive.h"
#include "store/entry_check.h"
#include "store/reader.h"

#define SHIFT 8                        /* 256 elements per chunk */
#define TENSOR_BYTES 512               /* one BF16 chunk */
#define PAYLOAD_AT TF_SUPERBLOCK_SIZE  /* the first appended byte */

static char archive_path[TEST_PATH_MAX];

static void make_dir(void)
{
    test_dir_make();
    test_path("a.traj", archive_path);
}

/* ---- a small valid catalog to break ---- */

/* Blob payloads: a 10-byte text file, one BF16 chunk, and the verbatim
 * stream of the tensor file (its header's length and the header), raw. */
#define VERBATIM_AT (10 + TENSOR_BYTES)
static uint8_t payload[VERBATIM_AT + 8 + 256];
static size_t payload_len;

/* One commit's catalog: the entries point into `chunks`, `pieces`,
 * `tensor` and `names`, which the mutations may change. */
typedef struct {
    tf_blob blobs[4];
    tf_entry entries[4];
    tf_segment seg;
    uint64_t file_chunks[2], model_chunks[3];
    tf_piece pieces[3];
    tf_tensor_span tensor;
    char names[8];
    /* A path with this marker gets a NUL in its place once encoded
     * (tf_segment_encode takes C strings). */
    const char *nul_marker;
} plan;

enum { E_DIR, E_FILE, E_MODEL };

static tf_blob raw_blob(uint64_t offset, uint64_t len, uint8_t dtype)
{
    return (tf_blob){ .id = tf_blob_id_of(payload + offset - PAYLOAD_AT, len), .offset = offset,
                      .enc_len = len, .raw_len = len,
                      .enc_hash = tf_hash64(payload + offset - PAYLOAD_AT, len),
                      .codec = TF_CODEC_RAW, .dtype = dtype };
}

/* Makes header the tensor file's header: its verbatim blob, piece and size. */
static void set_header(plan *p, const char *header)
{
    size_t hlen = strlen(header);
    ck_assert_uint_le(8 + hlen, sizeof payload - VERBATIM_AT);
    tf_le64_put(payload + VERBATIM_AT, hlen);
    memcpy(payload + VERBATIM_AT + 8, header, hlen);
    payload_len = VERBATIM_AT + 8 + hlen;
    p->blobs[2] = raw_blob(PAYLOAD_AT + VERBATIM_AT, 8 + hlen, TF_DT_NONE);
    p->pieces[0].len = 8 + hlen;
    p->entries[E_MODEL].size = 8 + hlen + p->pieces[1].len;
}

static void make_plan(plan *p)
{
    for (size_t i = 0; i < VERBATIM_AT; i++)
        payload[i] = (uint8_t)(i * 7 + 3);
    *p = (plan){ 0 };
    p->blobs[0] = raw_blob(PAYLOAD_AT, 10, TF_DT_NONE);
    p->blobs[1] = raw_blob(PAYLOAD_AT + 10, TENSOR_BYTES, TF_DT_BF16);
    p->file_chunks[0] = 0;
    p->model_chunks[0] = 2; /* the verbatim stream */
    p->model_chunks[1] = 1;
    p->pieces[0] = (tf_piece){ .tensor = TF_PIECE_VERBATIM };
    p->pieces[1] = (tf_piece){ .len = TENSOR_BYTES, .tensor = 0 };
    p->tensor = (tf_tensor_span){ .dtype = TF_DT_BF16, .nbytes = TENSOR_BYTES };
    strcpy(p->names, "w");
    p->entries[E_DIR] = (tf_entry){ .kind = TF_ENTRY_DIR, .ino = 2, .path = "run", .mode = 0755 };
    p->entries[E_FILE] = (tf_entry){ .kind = TF_ENTRY_FILE, .ino = 3, .path = "run/a.txt",
                                     .mode = 0644, .size = 10, .nchunks = 1,
                                     .chunks = p->file_chunks };
    p->entries[E_MODEL] = (tf_entry){ .kind = TF_ENTRY_TENSORS, .ino = 4,
                                      .path = "run/m.safetensors", .mode = 0644,
                                      .format = TF_FORMAT_SAFETENSORS,
                                      .npieces = 2, .pieces = p->pieces,
                                      .ntensors = 1, .tensors = &p->tensor,
                                      .names = p->names, .names_len = 2,
                                      .nchunks = 2, .chunks = p->model_chunks };
    char header[128];
    snprintf(header, sizeof header,
             "{\"w\":{\"dtype\":\"BF16\",\"shape\":[256],\"data_offsets\":[0,%d]}}", TENSOR_BYTES);
    set_header(p, header);
    p->seg = (tf_segment){ .nblobs = 3, .blobs = p->blobs, .nentries = 3, .entries = p->entries };
}

static void encode(const plan *p, const tf_segment *seg, tf_buf *out)
{
    out->len = 0;
    ck_assert_int_eq(tf_segment_encode(seg, out, NULL), 0);
    if (!p || !p->nul_marker)
        return;
    size_t n = strlen(p->nul_marker);
    for (size_t i = 0; i + n <= out->len; i++)
        if (memcmp(out->data + i, p->nul_marker, n) == 0)
            out->data[i] = '\0';
}

/* Writes an archive of the payload and one commit per segment. */
static void write_archive(const plan *p, const tf_segment *const *segs, size_t nsegs)
{
    tf_error e = { 0 };
    unlink(archive_path);
    ck_assert_msg(tf_container_create(archive_path, NULL, SHIFT, TF_FORMAT_SEGMENTS, &e) == 0, "%s", e.msg);
    tf_container c;
    tf_open_opts writable = { .writable = true };
    ck_assert_msg(tf_container_open(&c, archive_path, &writable, &e) == 0, "%s", e.msg);
    uint64_t off, nblobs = 0;
    ck_assert_int_eq(tf_container_append(&c, payload, payload_len, &off, &e), 0);
    ck_assert_uint_eq(off, PAYLOAD_AT);
    tf_buf seg = { 0 };
    for (size_t k = 0; k < nsegs; k++) {
        encode(p, segs[k], &seg);
        nblobs += segs[k]->nblobs;
        ck_assert_msg(tf_container_commit(&c, seg.data, seg.len, nblobs, TF_COMMIT_DURABLE, NULL,
                                          &e) == 0,
                      "%s", e.msg);
    }
    tf_buf_free(&seg);
    tf_container_close(&c);
}

static void write_plan(const plan *p)
{
    const tf_segment *segs[] = { &p->seg };
    write_archive(p, segs, 1);
}

/* Opening fails, and the message names the archive and says `want`. */
static void expect_open_fails(const char *want)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    int rc = tf_archive_open(archive_path, NULL, &ar, &e);
    if (rc == 0)
        tf_archive_close(ar);
    ck_assert_msg(rc == -1, "opened an archive that should say \"%s\"", want);
    ck_assert_msg(strncmp(e.msg, archive_path, strlen(archive_path)) == 0,
                  "the message does not name the archive: %s", e.msg);
    ck_assert_msg(strstr(e.msg, want) != NULL, "expected \"%s\" in: %s", want, e.msg);
    ck_assert_int_ne(e.errnum, 0);
    for (const char *c = e.msg; *c; c++)
        ck_assert_msg((unsigned char)*c >= 0x20 && *c != 0x7f,
                      "the message holds control character 0x%02x: %s", *c, e.msg);
}

static tf_archive *open_ok(void)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(archive_path, NULL, &ar, &e) == 0, "%s", e.msg);
    return ar;
}

/* ---- the valid plan opens and reads back ---- */

START_TEST(valid_plan_opens)
{
    plan p;
    make_plan(&p);
    write_plan(&p);
    tf_archive *ar = open_ok();
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    ck_assert_ptr_nonnull(r);
    uint8_t buf[TENSOR_BYTES];
    tf_error e = { 0 };
    ck_assert_int_eq(tf_reader_pread(r, tf_archive_lookup(ar, "run/a.txt"), 0, 10, buf, &e), 10);
    ck_assert_mem_eq(buf, payload, 10);
    const tf_entry *m = tf_archive_lookup(ar, "run/m.safetensors");
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(tf_reader_pread(r, m, m->size - TENSOR_BYTES, TENSOR_BYTES, buf, &e),
                     TENSOR_BYTES);
    ck_assert_mem_eq(buf, payload + 10, TENSOR_BYTES);
    /* The verbatim stream, from its chunk. */
    uint64_t vlen = m->size - TENSOR_BYTES;
    ck_assert_int_eq(tf_reader_pread(r, m, 0, (size_t)vlen, buf, &e), (ssize_t)vlen);
    ck_assert_mem_eq(buf, payload + VERBATIM_AT, (size_t)vlen);
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

/* ---- names, sizes, shapes, links: each refused at open ---- */

static char long_name[8192];

/* n components of comp_len bytes. */
static char *long_path(size_t n, size_t comp_len)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            long_name[k++] = '/';
        memset(long_name + k, 'a' + (int)(i % 26), comp_len);
        k += comp_len;
    }
    long_name[k] = '\0';
    return long_name;
}

static void name_dotdot(plan *p) { p->entries[E_FILE].path = "run/../a.txt"; }
static void name_dot(plan *p) { p->entries[E_FILE].path = "run/./a.txt"; }
static void name_only_dotdot(plan *p) { p->entries[E_DIR].path = ".."; }
static void name_absolute(plan *p) { p->entries[E_FILE].path = "/etc/passwd"; }
static void name_nul(plan *p) { p->entries[E_FILE].path = "run/a@NUL@"; p->nul_marker = "@NUL@"; }
static void name_newline(plan *p) { p->entries[E_FILE].path = "run/a\nb"; }
static void name_escape(plan *p) { p->entries[E_FILE].path = "run/\x1b[2J"; }
static void name_delete(plan *p) { p->entries[E_FILE].path = "run/a\x7f"; }
static void name_empty_component(plan *p) { p->entries[E_FILE].path = "run//a.txt"; }
static void name_component_256(plan *p) { p->entries[E_DIR].path = long_path(1, 256); }
static void name_path_4113(plan *p) { p->entries[E_DIR].path = long_path(17, 241); }
static void name_depth_65(plan *p) { p->entries[E_DIR].path = long_path(65, 1); }
static void name_without_parent(plan *p) { p->entries[E_FILE].path = "nodir/a.txt"; }
static void name_under_a_file(plan *p) { p->entries[E_MODEL].path = "run/a.txt/m"; }
static void link_target_nul(plan *p)
{
    p->entries[E_FILE] = (tf_entry){ .kind = TF_ENTRY_SYMLINK, .ino = 3, .path = "run/l",
                                     .mode = 0777, .target = "x@NUL@y", .size = 7 };
    p->nul_marker = "@NUL@";
}
static void link_target_4113(plan *p)
{
    p->entries[E_FILE] = (tf_entry){ .kind = TF_ENTRY_SYMLINK, .ino = 3, .path = "run/l",
                                     .mode = 0777, .target = long_path(17, 241) };
    p->entries[E_FILE].size = strlen(p->entries[E_FILE].target);
}

static void ino_root(plan *p) { p->entries[E_FILE].ino = 1; }
static void ino_past_max(plan *p) { p->entries[E_FILE].ino = TF_INO_MAX + 1; }
static void ino_wrapping(plan *p) { p->entries[E_MODEL].ino = UINT64_MAX; }
static void ino_twice(plan *p) { p->entries[E_MODEL].ino = 3; }
static void ino_of_the_dir(plan *p) { p->entries[E_FILE].ino = 2; }
static void file_size_huge(plan *p) { p->entries[E_FILE].size = (uint64_t)1 << 62; }
static void file_size_max(plan *p) { p->entries[E_FILE].size = UINT64_MAX; }
static void file_chunks_too_many(plan *p)
{
    p->entries[E_FILE].nchunks = 2;
    p->file_chunks[1] = 0;
}
static void file_chunks_none(plan *p) { p->entries[E_FILE].nchunks = 0; }
static void file_chunk_too_short(plan *p) { p->entries[E_FILE].size = 9; }
static void file_chunk_of_tensor(plan *p) { p->file_chunks[0] = 1, p->entries[E_FILE].size = 256; }
static void file_chunk_missing(plan *p) { p->file_chunks[0] = 3; }
/* The tensor's piece (and so its size) is len bytes. */
static void tensor_len(plan *p, uint64_t len)
{
    p->entries[E_MODEL].size += len - p->pieces[1].len;
    p->pieces[1].len = len;
}
static void tensor_bytes_huge(plan *p) { tensor_len(p, (uint64_t)1 << 50); } /* 2^41 chunks */
static void tensor_bytes_wrap(plan *p)
{
    /* A third piece of 2^63 - 1 bytes after a tensor of 2^63 - 2: the file
     * size wraps. */
    tensor_len(p, INT64_MAX - 1);
    p->pieces[2] = (tf_piece){ .len = INT64_MAX, .tensor = TF_PIECE_VERBATIM };
    p->entries[E_MODEL].npieces = 3;
}
static void tensor_two_chunks(plan *p) { tensor_len(p, 2 * TENSOR_BYTES); } /* 2 chunks, 1 stored */
/* 1 chunk of 256 bytes, the blob has 512 */
static void tensor_half_chunk(plan *p) { tensor_len(p, TENSOR_BYTES / 2); }
static void tensor_odd_bytes(plan *p) { tensor_len(p, TENSOR_BYTES - 1); }
static void tensor_file_size_huge(plan *p) { p->entries[E_MODEL].size = UINT64_MAX; }
static void tensor_name_too_long(plan *p)
{
    static char name[TF_TENSOR_NAME_MAX + 2];
    memset(name, 'n', TF_TENSOR_NAME_MAX + 1);
    p->entries[E_MODEL].names = name;
    p->entries[E_MODEL].names_len = sizeof name;
}
static void verbatim_chunk_of_file(plan *p) { p->model_chunks[0] = 0; }
static void verbatim_chunk_of_tensor(plan *p) { p->model_chunks[0] = 1; }
static void tensor_chunk_of_verbatim(plan *p) { p->model_chunks[1] = 2; }
static void verbatim_chunk_missing(plan *p) { p->model_chunks[0] = 3; }
static void verbatim_needs_two_chunks(plan *p)
{
    /* 8 + 300 verbatim bytes: 2 chunks of 256, and one tensor chunk. */
    p->pieces[0].len = 8 + 300;
    p->entries[E_MODEL].size = 8 + 300 + TENSOR_BYTES;
}
static void verbatim_held_twice(plan *p)
{
    /* Inline and in chunks: the inline stream counts; the extra chunk
     * id is left over. */
    static uint8_t stream[8 + 256];
    memcpy(stream, payload + VERBATIM_AT, (size_t)p->pieces[0].len);
    p->entries[E_MODEL].verbatim = stream;
    p->entries[E_MODEL].verbatim_len = p->pieces[0].len;
}
static void blob_raw_huge(plan *p) { p->blobs[1].raw_len = (uint64_t)1 << 40; }
static void blob_enc_huge(plan *p) { p->blobs[1].enc_len = (uint64_t)1 << 40; }
static void blob_offset_huge(plan *p) { p->blobs[1].offset = UINT64_MAX - 4; }
static void blob_unknown_codec(plan *p) { p->blobs[1].codec = 200; }
static void blob_raw_with_ref(plan *p) { p->blobs[1].ref = 1; }
static void blob_delta_without_ref(plan *p) { p->blobs[1].codec = TF_CODEC_ULP; }
static void blob_model_on_raw(plan *p) { p->blobs[1].model = 1; }

/* Cycles: a blob may only name an earlier blob as reference or model. */
static void ref_self(plan *p) { p->blobs[1].ref = 2, p->blobs[1].codec = TF_CODEC_ULP; }
static void ref_forward(plan *p) { p->blobs[0].ref = 2, p->blobs[0].codec = TF_CODEC_ULP; }
static void ref_far(plan *p) { p->blobs[1].ref = UINT64_MAX, p->blobs[1].codec = TF_CODEC_ULP; }
static void model_self(plan *p) { p->blobs[1].model = 2, p->blobs[1].codec = TF_CODEC_ULP; }
static void model_forward(plan *p) { p->blobs[0].model = 2, p->blobs[0].codec = TF_CODEC_ULP; }
static void ref_other_size(plan *p)
{
    p->blobs[1].ref = 1; /* the 10-byte file blob */
    p->blobs[1].codec = TF_CODEC_ULP;
}

static const struct {
    const char *name;
    void (*mutate)(plan *p);
    const char *want;
} cases[] = {
    { "name with ..", name_dotdot, "invalid path" },
    { "name with .", name_dot, "invalid path" },
    { "name ..", name_only_dotdot, "invalid path" },
    { "absolute name", name_absolute, "invalid path" },
    { "name with a NUL", name_nul, "invalid path: it holds a NUL" },
    { "name with a newline", name_newline, "control character 0x0a" },
    { "name with an escape sequence", name_escape, "control character 0x1b" },
    { "name with DEL", name_delete, "control character 0x7f" },
    { "name with an empty component", name_empty_component, "invalid path" },
    { "component of 256 bytes", name_component_256, "longer than 255" },
    { "path of 4113 bytes", name_path_4113, "path of 4113 bytes" },
    { "path 65 deep", name_depth_65, "nested deeper than 64" },
    { "no parent directory", name_without_parent, "\"nodir/a.txt\" has no parent directory" },
    { "parent is a file", name_under_a_file, "has no parent directory" },
    { "link target with a NUL", link_target_nul, "link target holds a NUL" },
    { "link target of 4113 bytes", link_target_4113, "bad link target" },
    { "the root's inode number", ino_root, "\"run/a.txt\" has a bad mode, mtime or inode" },
    { "inode number 2^62 + 1", ino_past_max, "\"run/a.txt\" has a bad mode, mtime or inode" },
    /* The next inode number would wrap to 0, which the next add would use. */
    { "inode number 2^64 - 1", ino_wrapping, "bad mode, mtime or inode" },
    { "two files, one inode number", ino_twice,
      "inode number 3 is used twice, by \"run/a.txt\" and \"run/m.safetensors\"" },
    { "a file with its directory's inode number", ino_of_the_dir,
      "inode number 2 is used twice, by \"run\" and \"run/a.txt\"" },
    { "file of 2^62 bytes", file_size_huge, "has 1 chunks for 4611686018427387904 bytes" },
    { "file of 2^64-1 bytes", file_size_max, "has 1 chunks for" },
    { "file with a chunk too many", file_chunks_too_many, "has 2 chunks for 10 bytes" },
    { "file without its chunk", file_chunks_none, "has 0 chunks for 10 bytes" },
    { "file chunk longer than the file", file_chunk_too_short, "chunk 0 has 10 bytes, expected 9" },
    { "file chunk of a tensor", file_chunk_of_tensor, "chunk 0 has 512 bytes, expected 256" },
    { "file chunk not stored", file_chunk_missing, "names blob 3 of 3" },
    { "tensor of 2^50 bytes", tensor_bytes_huge, "segment too short" },
    { "tensor size wrapping", tensor_bytes_wrap, "longer than a file can be" },
    { "tensor needing 2 chunks, 1 stored", tensor_two_chunks, "needs 3 chunks, segment too short" },
    { "tensor smaller than its chunk", tensor_half_chunk, "chunk 1 has 512 bytes, expected 256" },
    { "tensor of a partial element", tensor_odd_bytes, "bad dtype or size" },
    { "tensor file of 2^64-1 bytes", tensor_file_size_huge, "for a file of 18446744073709551615 bytes" },
    { "tensor name of 4097 bytes", tensor_name_too_long, "tensor name of 4097 bytes" },
    { "verbatim chunk of the text file", verbatim_chunk_of_file, "chunk 0 has 10 bytes, expected" },
    { "verbatim chunk of the tensor", verbatim_chunk_of_tensor, "chunk 0 has 512 bytes, expected" },
    { "tensor chunk of the verbatim stream", tensor_chunk_of_verbatim, "chunk 1 has" },
    { "verbatim chunk not stored", verbatim_chunk_missing, "names blob 3 of 3" },
    { "verbatim stream needing 2 chunks", verbatim_needs_two_chunks, "needs 3 chunks" },
    { "verbatim stream inline and in chunks", verbatim_held_twice, "unexpected bytes" },
    { "blob of 2^40 bytes", blob_raw_huge, "more than a chunk" },
    { "blob payload of 2^40 bytes", blob_enc_huge, "lies outside the archive" },
    { "blob at 2^64-5", blob_offset_huge, "lies outside the archive" },
    { "blob of an unknown codec", blob_unknown_codec, "unknown codec 200" },
    { "raw blob with a reference", blob_raw_with_ref, "codec raw takes no a reference" },
    { "delta blob without reference", blob_delta_without_ref, "codec ulp needs a reference" },
    { "raw blob with a model", blob_model_on_raw, "codec raw takes no model" },
    { "reference to itself", ref_self, "blob 1 has reference 1 that is not an earlier blob" },
    { "reference forward", ref_forward, "blob 0 has reference 1 that is not an earlier blob" },
    { "reference 2^64-2", ref_far, "not an earlier blob" },
    { "model itself", model_self, "blob 1 has model 1 that is not an earlier blob" },
    { "model forward", model_forward, "blob 0 has model 1 that is not an earlier blob" },
    { "reference of another size", ref_other_size, "differs in size or dtype" },
};

START_TEST(hostile_catalog_is_refused)
{
    plan p;
    make_plan(&p);
    cases[_i].mutate(&p);
    write_plan(&p);
    expect_open_fails(cases[_i].want);
}
END_TEST

/* ---- headers unlike their tensors: opening takes them, verify does not ---- */

static const struct {
    const char *header, *name, *want;
} header_cases[] = {
    { "{\"w\":{\"dtype\":\"BF16\",\"shape\":[10],\"data_offsets\":[0,20]}}", "w",
      "does not parse as safetensors" },
    { "{\"w\":{\"dtype\":\"F16\",\"shape\":[256],\"data_offsets\":[0,512]}}", "w",
      "tensor 0: the file's bytes say F16 \"w\", the catalog BF16 \"w\"" },
    { "{\"v\":{\"dtype\":\"BF16\",\"shape\":[128],\"data_offsets\":[0,256]},"
      "\"w\":{\"dtype\":\"BF16\",\"shape\":[128],\"data_offsets\":[256,512]}}", "w",
      "the file's bytes describe 3 pieces and 2 tensors, the catalog 2 and 1" },
    { "{\"w\":{\"dtype\":\"BF16\",\"shape\":[256],\"data_offsets\":[0,512]}}", "v",
      "tensor 0: the file's bytes say BF16 \"w\", the catalog BF16 \"v\"" },
    { "{\"w\":{\"dtype\":\"BF16\",\"shape\":[256],\"data_offsets\":[0,512]}}", "w", NULL },
};

/* The stored layout checked against the file's bytes, with the verbatim
 * stream in a chunk (inline false) or, as release 1 stored it, inline. */
static void check_layout_case(size_t k, bool inline_stream)
{
    plan p;
    make_plan(&p);
    set_header(&p, header_cases[k].header);
    strcpy(p.names, header_cases[k].name);
    tf_entry *m = &p.entries[E_MODEL];
    uint8_t stream[8 + 256];
    if (inline_stream) {
        memcpy(stream, payload + VERBATIM_AT, (size_t)p.pieces[0].len);
        m->verbatim = stream;
        m->verbatim_len = p.pieces[0].len;
        m->chunks = p.model_chunks + 1;
        m->nchunks = 1;
    }
    write_plan(&p);
    tf_archive *ar = open_ok();
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    ck_assert_ptr_nonnull(r);
    const tf_entry *ent = tf_archive_lookup(ar, "run/m.safetensors");
    ck_assert_int_eq(ent->verbatim != NULL, inline_stream);
    tf_error e = { 0 };
    int rc = tf_reader_check_layout(r, ent, &e);
    if (!header_cases[k].want) {
        ck_assert_msg(rc == 0, "%s", e.msg);
    } else {
        ck_assert_int_eq(rc, -1);
        ck_assert_msg(strstr(e.msg, header_cases[k].want) && strstr(e.msg, "run/m.safetensors"),
                      "expected \"%s\" in: %s", header_cases[k].want, e.msg);
    }
    /* Whatever the header says, the file reads back as stored. */
    uint8_t buf[8 + 256 + TENSOR_BYTES];
    ck_assert_int_eq(tf_reader_pread(r, ent, 0, sizeof buf, buf, &e), (ssize_t)ent->size);
    ck_assert_mem_eq(buf, payload + VERBATIM_AT, (size_t)p.pieces[0].len);
    ck_assert_mem_eq(buf + p.pieces[0].len, payload + 10, TENSOR_BYTES);
    ck_assert_int_eq(tf_reader_check_layout(r, tf_archive_lookup(ar, "run/a.txt"), &e), 0);
    tf_reader_free(r);
    tf_archive_close(ar);
}

START_TEST(header_unlike_tensors_fails_verify)
{
    check_layout_case((size_t)_i, false);
}
END_TEST

START_TEST(inline_header_unlike_tensors_fails_verify)
{
    check_layout_case((size_t)_i, true);
}
END_TEST

/* ---- across commits ---- */

/* Blob numbers are global: a blob of a second commit that refers to the
 * blob after it is refused like any forward reference (a cycle through
 * an earlier commit cannot be written: its blobs come first). */
START_TEST(second_commit_cannot_reach_forward)
{
    plan p;
    make_plan(&p);
    tf_blob b[2] = { p.blobs[1], p.blobs[1] };
    b[0].codec = TF_CODEC_ULP;
    b[0].ref = 5; /* global blob 4: the next one */
    tf_segment second = { .first_blob = 3, .nblobs = 2, .blobs = b };
    const tf_segment *segs[] = { &p.seg, &second };
    write_archive(&p, segs, 2);
    expect_open_fails("blob 3 has reference 4 that is not an earlier blob");
}
END_TEST

/* A commit that replaces a directory by a file removes what was below
 * it: the tree stays a tree. */
START_TEST(dir_replaced_by_file_drops_subtree)
{
    plan p;
    make_plan(&p);
    tf_entry file = p.entries[E_FILE];
    file.path = "run";
    file.ino = 5;
    tf_segment second = { .first_blob = 3, .nentries = 1, .entries = &file };
    const tf_segment *segs[] = { &p.seg, &second };
    write_archive(&p, segs, 2);
    tf_archive *ar = open_ok();
    ck_assert_uint_eq(tf_archive_nentries(ar), 1);
    ck_assert_int_eq(tf_archive_lookup(ar, "run")->kind, TF_ENTRY_FILE);
    ck_assert_ptr_null(tf_archive_lookup(ar, "run/a.txt"));
    tf_archive_close(ar);
}
END_TEST

/* Inode numbers are checked on the entries live after the last commit: a
 * second commit's run/b.txt may take the number of run/a.txt if it
 * removes run/a.txt (a move does), not the number of an entry still there. */
static void add_b_txt(uint64_t ino, bool remove_a_txt)
{
    plan p;
    make_plan(&p);
    tf_entry second[2] = {
        { .kind = TF_ENTRY_TOMBSTONE, .ino = 3, .path = "run/a.txt" },
        p.entries[E_FILE],
    };
    second[1].path = "run/b.txt";
    second[1].ino = ino;
    tf_segment seg = { .first_blob = 3, .nentries = 2, .entries = second };
    if (!remove_a_txt) {
        seg.nentries = 1;
        seg.entries = &second[1];
    }
    const tf_segment *segs[] = { &p.seg, &seg };
    write_archive(&p, segs, 2);
}

START_TEST(later_commit_cannot_reuse_a_live_inode)
{
    add_b_txt(4, false);
    expect_open_fails("inode number 4 is used twice, by \"run/b.txt\" and \"run/m.safetensors\"");
}
END_TEST

START_TEST(moved_entry_keeps_its_inode)
{
    add_b_txt(3, true);
    tf_archive *ar = open_ok();
    ck_assert_ptr_null(tf_archive_lookup(ar, "run/a.txt"));
    ck_assert_uint_eq(tf_archive_lookup(ar, "run/b.txt")->ino, 3);
    tf_archive_close(ar);
}
END_TEST

/* ---- a long history ---- */

/* The plan, then empty commits up to `commits`, commit `bad` (if not 0)
 * holding a blob of an unknown codec; the stored catalog of commit
 * `damaged` (if not 0) then has a byte flipped. An open reads catalogs
 * ahead of the commit it applies: what it reports must still be the
 * first commit in order that fails, as each were read once the one
 * before is applied. */
static void write_history(uint64_t commits, uint64_t bad, uint64_t damaged)
{
    plan p;
    make_plan(&p);
    tf_blob unknown = p.blobs[1];
    unknown.codec = 200;
    tf_segment empty = { 0 }, odd = { .nblobs = 1, .blobs = &unknown };
    const tf_segment **segs = calloc(commits, sizeof *segs);
    ck_assert_ptr_nonnull(segs);
    segs[0] = &p.seg;
    for (uint64_t k = 1; k < commits; k++)
        segs[k] = k + 1 == bad ? &odd : &empty;
    write_archive(&p, segs, commits);
    free(segs);
    if (!damaged)
        return;
    tf_container c;
    tf_error e = { 0 };
    ck_assert_msg(tf_container_open(&c, archive_path, NULL, &e) == 0, "%s", e.msg);
    tf_trailer t = c.last;
    while (t.seq != damaged)
        ck_assert_msg(tf_container_read_trailer(&c, t.prev, &t, &e) == 0, "%s", e.msg);
    tf_container_close(&c);
    FILE *f = fopen(archive_path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, (long)t.catalog_off, SEEK_SET), 0);
    int byte = fgetc(f);
    ck_assert_int_ne(byte, EOF);
    ck_assert_int_eq(fseek(f, (long)t.catalog_off, SEEK_SET), 0);
    ck_assert_int_ne(fputc(byte ^ 0xff, f), EOF);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(long_history_opens)
{
    write_history(40, 0, 0);
    tf_archive *ar = open_ok();
    ck_assert_uint_eq(tf_archive_commits(ar), 40);
    ck_assert_ptr_nonnull(tf_archive_lookup(ar, "run/m.safetensors"));
    tf_archive_close(ar);
}
END_TEST

START_TEST(damaged_catalog_in_a_long_history_is_named)
{
    write_history(40, 0, 30);
    expect_open_fails("catalog of commit 30: checksum mismatch");
}
END_TEST

START_TEST(first_failing_commit_is_reported)
{
    write_history(40, 29, 30);
    expect_open_fails("blob 3: unknown codec 200");
    write_history(40, 30, 29);
    expect_open_fails("catalog of commit 29: checksum mismatch");
}
END_TEST

/* ---- reference chains ---- */

/* Blob 0 holds the BF16 chunk raw; blobs 1..n are ulp deltas, each on
 * the previous one (their payloads empty: opening reads none). */
static void write_chain(uint64_t n)
{
    plan p;
    make_plan(&p);
    tf_blob *b = calloc(n + 1, sizeof *b);
    ck_assert_ptr_nonnull(b);
    b[0] = p.blobs[1];
    for (uint64_t i = 1; i <= n; i++) {
        b[i] = b[0];
        b[i].codec = TF_CODEC_ULP;
        b[i].enc_len = 0;
        b[i].ref = i; /* blob i - 1 */
    }
    tf_segment seg = { .nblobs = n + 1, .blobs = b };
    const tf_segment *segs[] = { &seg };
    write_archive(NULL, segs, 1);
    free(b);
}

START_TEST(chain_at_the_bound_opens)
{
    write_chain(TF_CHAIN_MAX);
    tf_archive *ar = open_ok();
    ck_assert_uint_eq(tf_archive_chain_depth(ar, TF_CHAIN_MAX), TF_CHAIN_MAX);
    tf_archive_close(ar);
}
END_TEST

START_TEST(chain_past_the_bound_is_refused)
{
    write_chain(TF_CHAIN_MAX + 1);
    expect_open_fails("reference chain longer than 4096");
}
END_TEST

/* Models are one level deep: a blob whose model has a model of its own,
 * and so on, would make reading recurse once per blob. Blob 1 is a raw
 * BF16 chunk, blob 2 a raw model; blob i > 2 is a ulp delta on blob 1
 * whose model is blob i - 1. Opening must refuse it, or reading the last
 * blob must fail cleanly: not overflow the stack. */
START_TEST(model_chain_is_refused)
{
    enum { N = 200000 };
    plan p;
    make_plan(&p);
    tf_blob *b = calloc(N, sizeof *b);
    ck_assert_ptr_nonnull(b);
    b[0] = p.blobs[0];
    b[1] = p.blobs[1];
    for (uint64_t i = 2; i < N; i++) {
        b[i] = b[1];
        b[i].codec = TF_CODEC_ULP;
        b[i].ref = 2;     /* blob 1 */
        b[i].model = i;   /* blob i - 1 */
        b[i].enc_len = 0;
        b[i].id.b[0] = (uint8_t)i; /* distinct ids */
        b[i].id.b[1] = (uint8_t)(i >> 8);
        b[i].id.b[2] = (uint8_t)(i >> 16);
    }
    tf_segment seg = { .nblobs = N, .blobs = b };
    const tf_segment *segs[] = { &seg };
    write_archive(NULL, segs, 1);
    free(b);
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    if (tf_archive_open(archive_path, NULL, &ar, &e) < 0) {
        ck_assert_msg(strstr(e.msg, "model") != NULL, "refused, but not for its model: %s", e.msg);
        return;
    }
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    uint8_t buf[TENSOR_BYTES];
    ck_assert_int_eq(tf_reader_blob(r, N - 1, buf, &e), -1);
    ck_assert_str_ne(e.msg, "");
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

static Suite *hostile_suite(void)
{
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("archive");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, make_dir, test_dir_remove);
    tcase_add_test(tc, valid_plan_opens);
    tcase_add_loop_test(tc, hostile_catalog_is_refused, 0, ARRAY_LEN(cases));
    tcase_add_loop_test(tc, header_unlike_tensors_fails_verify, 0, ARRAY_LEN(header_cases));
    tcase_add_loop_test(tc, inline_header_unlike_tensors_fails_verify, 0, ARRAY_LEN(header_cases));
    tcase_add_test(tc, second_commit_cannot_reach_forward);
    tcase_add_test(tc, dir_replaced_by_file_drops_subtree);
    tcase_add_test(tc, later_commit_cannot_reuse_a_live_inode);
    tcase_add_test(tc, moved_entry_keeps_its_inode);
    tcase_add_test(tc, long_history_opens);
    tcase_add_test(tc, damaged_catalog_in_a_long_history_is_named);
    tcase_add_test(tc, first_failing_commit_is_reported);
    tcase_add_test(tc, chain_at_the_bound_opens);
    tcase_add_test(tc, chain_past_the_bound_is_refused);
    tcase_add_test(tc, model_chain_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(hostile_suite());
}
