/* Catalog segments (encode/decode, validation of everything a hostile
 * archive could say), path rules, and the archive container: superblock,
 * commits, torn-tail recovery and the single-writer lock. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#include "common/dtype.h"
#include "common/hash.h"
#include "format/catalog.h"
#include "format/container.h"
#include "format/tensor_format.h"

static const tf_open_opts for_writing = { .writable = true };

/* ======================================================================== */
/* A sample segment with every entry kind                                   */
/* ======================================================================== */

#define FIRST_BLOB 10  /* blobs 0..9 came with earlier segments */
#define SAMPLE_BLOBS 5
#define TOTAL_BLOBS (FIRST_BLOB + SAMPLE_BLOBS)
#define SHIFT 8        /* 256 elements per chunk, so small tensors span chunks */
#define FILE_END 100000

enum { E_RUN, E_STEP, E_CONFIG, E_EMPTY, E_MODEL, E_INLINE, E_LINK, E_GONE, SAMPLE_ENTRIES };

/* The pieces of the sample tensor file E_MODEL, in file order: a header,
 * a tensor, a verbatim run between tensors, four tensors, a trailer. */
enum { MODEL_PIECES = 8, MODEL_TENSORS = 5, MODEL_CHUNKS = 2 + 5 };
#define V TF_PIECE_VERBATIM
static const uint64_t model_piece_tensor[MODEL_PIECES] = { V, 0, V, 1, 2, 3, 4, V };
#undef V
/* The names, back to back: an empty name and UTF-8 are names too. */
static const char model_names[] = "w\0\0ids\0u8.empty\0h\xc3\xa9";
static const uint64_t model_name_off[MODEL_TENSORS] = { 0, 2, 3, 7, 16 };

typedef struct {
    tf_blob blobs[SAMPLE_BLOBS];
    tf_piece pieces[MODEL_PIECES];
    tf_tensor_span tensors[MODEL_TENSORS];
    char names[sizeof model_names + TF_TENSOR_NAME_MAX + 2];
    tf_piece inline_pieces[3];
    tf_tensor_span inline_tensor;
    uint8_t inline_verbatim[8 + 64 + 3];
    uint64_t file_chunks[4];
    uint64_t model_chunks[MODEL_CHUNKS];
    uint64_t inline_chunks[1];
    char header[64];
    char target[TF_PATH_MAX + 2];
    tf_entry entries[SAMPLE_ENTRIES];
    tf_segment seg;
} sample;

static tf_blob sample_blob(uint64_t global, uint8_t codec, uint8_t dtype, uint64_t raw_len,
                           uint64_t ref, uint64_t model)
{
    return (tf_blob){ .id = tf_blob_id_of(&global, sizeof global),
                      .offset = 32 + 100 * global,
                      .enc_len = 90,
                      .raw_len = raw_len,
                      .enc_hash = 0xfeedface00000000ull + global,
                      .codec = codec,
                      .dtype = dtype,
                      .ref = ref,
                      .model = model };
}

/* Recomputes a tensor file's size, its tensors' sizes and the offsets
 * the decoder derives, the way trajfs(5) defines them (not through
 * tf_entry_layout, which the round trip checks). */
static void settle_tensor_file(tf_entry *m)
{
    uint64_t off = 0, stream = 0;
    for (uint64_t i = 0; i < m->npieces; i++) {
        tf_piece *p = &m->pieces[i];
        p->file_off = off;
        p->verbatim_off = 0;
        if (p->tensor == TF_PIECE_VERBATIM) {
            p->verbatim_off = stream;
            stream += p->len;
        } else if (p->tensor < m->ntensors) {
            m->tensors[p->tensor].nbytes = p->len;
            m->tensors[p->tensor].file_off = off;
        }
        off += p->len;
    }
    m->size = off;
    m->verbatim_len = stream;
    m->verbatim_chunks = m->verbatim ? 0 : tf_chunk_count(stream, 1, SHIFT);
    uint64_t chunks = m->verbatim_chunks;
    for (uint64_t t = 0; t < m->ntensors; t++) {
        tf_tensor_span *ts = &m->tensors[t];
        ts->first_chunk = chunks;
        const tf_dtype_info *info = tf_dtype_get(ts->dtype);
        if (info && info->size)
            chunks += tf_chunk_count(ts->nbytes, info->size, SHIFT);
    }
}

static void settle_tensor_files(sample *s)
{
    settle_tensor_file(&s->entries[E_MODEL]);
    settle_tensor_file(&s->entries[E_INLINE]);
}

static void make_sample(sample *s)
{
    memset(s, 0, sizeof *s);
    s->blobs[0] = sample_blob(FIRST_BLOB + 0, 1, TF_DT_NONE, 256, 0, 0);
    s->blobs[1] = sample_blob(FIRST_BLOB + 1, 3, TF_DT_F32, 1024, 0 + 1, 0);
    s->blobs[2] = sample_blob(FIRST_BLOB + 2, 3, TF_DT_F32, 1024, FIRST_BLOB + 1 + 1, FIRST_BLOB + 0 + 1);
    s->blobs[3] = sample_blob(FIRST_BLOB + 3, 0, TF_DT_BF16, 0, 0, FIRST_BLOB + 2 + 1);
    /* The largest blob a chunk may claim, ending exactly at the file end. */
    s->blobs[4] = sample_blob(FIRST_BLOB + 4, 2, TF_DT_F64, 1u << 24, 0, 0);
    s->blobs[4].offset = FILE_END - 1;
    s->blobs[4].enc_len = 1;
    strcpy(s->header, "{\"w\":{\"dtype\":\"F32\",\"shape\":[522]}}    ");
    strcpy(s->target, "step-1");

    /* E_MODEL: F32 of 2 full chunks and a bit, zero-length BF16, one I64,
     * zero U8, one F16: 3 + 0 + 1 + 0 + 1 chunks after the 2 chunks of
     * its 8 + 39 + 300 + 5 verbatim bytes. */
    static const struct { uint8_t dtype; uint64_t nbytes; } tensors[MODEL_TENSORS] = {
        { TF_DT_F32, 4 * (2 * 256 + 10) }, { TF_DT_BF16, 0 }, { TF_DT_I64, 8 },
        { TF_DT_U8, 0 }, { TF_DT_F16, 2 },
    };
    const uint64_t verbatim_len[] = { 8 + strlen(s->header), 300, 5 };
    for (size_t i = 0, v = 0; i < MODEL_PIECES; i++) {
        uint64_t t = model_piece_tensor[i];
        s->pieces[i] = (tf_piece){ .tensor = t,
                                   .len = t == TF_PIECE_VERBATIM ? verbatim_len[v++] : tensors[t].nbytes };
    }
    for (size_t t = 0; t < MODEL_TENSORS; t++)
        s->tensors[t] = (tf_tensor_span){ .dtype = tensors[t].dtype, .name_off = model_name_off[t] };
    memcpy(s->names, model_names, sizeof model_names);
    static const uint64_t model_chunks[MODEL_CHUNKS] = { 13, 10, 11, 12, 0, 9, 14 };
    memcpy(s->model_chunks, model_chunks, sizeof model_chunks);
    static const uint64_t file_chunks[] = { 10, 3 };
    memcpy(s->file_chunks, file_chunks, sizeof file_chunks);

    /* E_INLINE: the form of entries read from release 1: its verbatim
     * stream (a header and 3 bytes after the one F32 element) inline. */
    size_t hlen = strlen(s->header);
    tf_le64_put(s->inline_verbatim, hlen);
    memcpy(s->inline_verbatim + 8, s->header, hlen);
    memcpy(s->inline_verbatim + 8 + hlen, "end", 3);
    s->inline_pieces[0] = (tf_piece){ .len = 8 + hlen, .tensor = TF_PIECE_VERBATIM };
    s->inline_pieces[1] = (tf_piece){ .len = 4, .tensor = 0 };
    s->inline_pieces[2] = (tf_piece){ .len = 3, .tensor = TF_PIECE_VERBATIM };
    s->inline_tensor = (tf_tensor_span){ .dtype = TF_DT_F32, .name_off = 0 };
    s->inline_chunks[0] = 12;

    tf_entry *e = s->entries;
    e[E_RUN] = (tf_entry){ .kind = TF_ENTRY_DIR, .ino = 2, .path = "run", .mode = 0755,
                           .mtime_sec = -1, .mtime_nsec = 999999999 };
    e[E_STEP] = (tf_entry){ .kind = TF_ENTRY_DIR, .ino = TF_INO_MAX, .path = "run/step-1",
                            .mode = 07777, .mtime_sec = INT64_MIN };
    e[E_CONFIG] = (tf_entry){ .kind = TF_ENTRY_FILE, .ino = 4, .path = "run/config.json",
                              .mode = 0644, .mtime_sec = INT64_MAX, .size = 300, .nchunks = 2,
                              .chunks = s->file_chunks };
    e[E_EMPTY] = (tf_entry){ .kind = TF_ENTRY_FILE, .ino = 5, .path = "run/empty", .mode = 0 };
    e[E_MODEL] = (tf_entry){ .kind = TF_ENTRY_TENSORS, .ino = 6,
                             .path = "run/step-1/model.safetensors", .mode = 0444,
                             .mtime_sec = 1700000000, .mtime_nsec = 1,
                             .format = TF_FORMAT_SAFETENSORS,
                             .npieces = MODEL_PIECES, .pieces = s->pieces,
                             .ntensors = MODEL_TENSORS, .tensors = s->tensors,
                             .names = s->names, .names_len = sizeof model_names,
                             .nchunks = MODEL_CHUNKS, .chunks = s->model_chunks };
    e[E_INLINE] = (tf_entry){ .kind = TF_ENTRY_TENSORS, .ino = 9, .path = "run/v1.safetensors",
                              .mode = 0600, .format = TF_FORMAT_SAFETENSORS,
                              .npieces = 3, .pieces = s->inline_pieces,
                              .ntensors = 1, .tensors = &s->inline_tensor,
                              .names = s->names, .names_len = 2,
                              .verbatim = s->inline_verbatim,
                              .nchunks = 1, .chunks = s->inline_chunks };
    e[E_LINK] = (tf_entry){ .kind = TF_ENTRY_SYMLINK, .ino = 7, .path = "run/latest",
                            .mode = 0777, .size = strlen(s->target), .target = s->target };
    e[E_GONE] = (tf_entry){ .kind = TF_ENTRY_TOMBSTONE, .ino = 8, .path = "run/old \xc3\xa9t\xc3\xa9" };
    settle_tensor_files(s);
    s->seg = (tf_segment){ .first_blob = FIRST_BLOB, .nblobs = SAMPLE_BLOBS, .blobs = s->blobs,
                           .nentries = SAMPLE_ENTRIES, .entries = s->entries };
}

static void encode_sample(const sample *s, tf_buf *out)
{
    tf_error e = { 0 };
    out->len = 0;
    ck_assert_msg(tf_segment_encode(&s->seg, out, &e) == 0, "encode: %s", e.msg);
}

/* Decodes from an exactly sized copy (so ASan sees any over-read). */
static int decode_exact(const uint8_t *p, size_t len, tf_segment *out, tf_error *e)
{
    uint8_t *copy = exact_copy(p, len);
    e->msg[0] = '\0';
    int rc = tf_segment_decode(copy, len, FIRST_BLOB, SHIFT, FILE_END, out, e);
    free(copy);
    if (rc < 0)
        ck_assert_msg(e->msg[0] != '\0', "decode failed without a message");
    return rc;
}

static void assert_blobs_equal(const tf_blob *a, const tf_blob *b, uint64_t i)
{
    ck_assert_msg(tf_blob_id_eq(&a->id, &b->id), "blob %llu: id", (unsigned long long)i);
    ck_assert_uint_eq(a->offset, b->offset);
    ck_assert_uint_eq(a->enc_len, b->enc_len);
    ck_assert_uint_eq(a->raw_len, b->raw_len);
    ck_assert_uint_eq(a->enc_hash, b->enc_hash);
    ck_assert_uint_eq(a->codec, b->codec);
    ck_assert_uint_eq(a->dtype, b->dtype);
    ck_assert_uint_eq(a->ref, b->ref);
    ck_assert_uint_eq(a->model, b->model);
}

static void assert_entries_equal(const tf_entry *a, const tf_entry *b)
{
    ck_assert_str_eq(a->path, b->path);
    ck_assert_uint_eq(a->kind, b->kind);
    ck_assert_uint_eq(a->ino, b->ino);
    ck_assert_uint_eq(a->mode, b->mode);
    ck_assert_int_eq(a->mtime_sec, b->mtime_sec);
    ck_assert_uint_eq(a->mtime_nsec, b->mtime_nsec);
    if (a->kind == TF_ENTRY_DIR || a->kind == TF_ENTRY_TOMBSTONE)
        return;
    ck_assert_uint_eq(a->size, b->size);
    if (a->kind == TF_ENTRY_SYMLINK) {
        ck_assert_str_eq(a->target, b->target);
        return;
    }
    ck_assert_uint_eq(a->nchunks, b->nchunks);
    for (uint64_t c = 0; c < a->nchunks; c++)
        ck_assert_uint_eq(a->chunks[c], b->chunks[c]);
    if (a->kind != TF_ENTRY_TENSORS)
        return;
    ck_assert_uint_eq(a->format, b->format);
    ck_assert_uint_eq(a->npieces, b->npieces);
    for (uint64_t i = 0; i < a->npieces; i++) {
        ck_assert_uint_eq(a->pieces[i].len, b->pieces[i].len);
        ck_assert_uint_eq(a->pieces[i].tensor, b->pieces[i].tensor);
        ck_assert_uint_eq(a->pieces[i].file_off, b->pieces[i].file_off);
        ck_assert_uint_eq(a->pieces[i].verbatim_off, b->pieces[i].verbatim_off);
    }
    ck_assert_uint_eq(a->ntensors, b->ntensors);
    for (uint64_t t = 0; t < a->ntensors; t++) {
        ck_assert_uint_eq(a->tensors[t].dtype, b->tensors[t].dtype);
        ck_assert_uint_eq(a->tensors[t].nbytes, b->tensors[t].nbytes);
        ck_assert_str_eq(tf_tensor_name(a, t), tf_tensor_name(b, t));
        ck_assert_uint_eq(a->tensors[t].file_off, b->tensors[t].file_off);
        ck_assert_uint_eq(a->tensors[t].first_chunk, b->tensors[t].first_chunk);
    }
    ck_assert_uint_eq(a->verbatim_len, b->verbatim_len);
    ck_assert_uint_eq(a->verbatim_chunks, b->verbatim_chunks);
    ck_assert_int_eq(a->verbatim != NULL, b->verbatim != NULL);
    if (a->verbatim)
        ck_assert_mem_eq(a->verbatim, b->verbatim, a->verbatim_len);
}

static void assert_segments_equal(const tf_segment *a, const tf_segment *b)
{
    ck_assert_uint_eq(a->first_blob, b->first_blob);
    ck_assert_uint_eq(a->nblobs, b->nblobs);
    for (uint64_t i = 0; i < a->nblobs; i++)
        assert_blobs_equal(&a->blobs[i], &b->blobs[i], i);
    ck_assert_uint_eq(a->nentries, b->nentries);
    for (uint64_t i = 0; i < a->nentries; i++)
        assert_entries_equal(&a->entries[i], &b->entries[i]);
}

START_TEST(segment_round_trip)
{
    sample s;
    make_sample(&s);
    tf_buf enc = { 0 };
    encode_sample(&s, &enc);
    tf_segment dec;
    tf_error e;
    ck_assert_msg(decode_exact(enc.data, enc.len, &dec, &e) == 0, "decode: %s", e.msg);
    assert_segments_equal(&s.seg, &dec);
    /* Encoding what was decoded gives the same bytes. */
    tf_buf again = { 0 };
    ck_assert_int_eq(tf_segment_encode(&dec, &again, &e), 0);
    ck_assert_uint_eq(again.len, enc.len);
    ck_assert_mem_eq(again.data, enc.data, enc.len);
    tf_segment_free(&dec);
    ck_assert_ptr_null(dec.entries);
    tf_buf_free(&again);
    tf_buf_free(&enc);
}
END_TEST

START_TEST(segment_empty_round_trip)
{
    tf_segment empty = { .first_blob = 7 }, dec;
    tf_buf enc = { 0 };
    tf_error e;
    ck_assert_int_eq(tf_segment_encode(&empty, &enc, &e), 0);
    uint8_t *copy = exact_copy(enc.data, enc.len);
    ck_assert_int_eq(tf_segment_decode(copy, enc.len, 7, SHIFT, FILE_END, &dec, &e), 0);
    ck_assert_uint_eq(dec.first_blob, 7);
    ck_assert_uint_eq(dec.nblobs, 0);
    ck_assert_uint_eq(dec.nentries, 0);
    tf_segment_free(&dec);
    free(copy);
    tf_buf_free(&enc);
}
END_TEST

START_TEST(chunk_count_rounds_up)
{
    static const struct { uint64_t nbytes; unsigned elem, shift; uint64_t chunks; } cases[] = {
        { 0, 4, 8, 0 }, { 1, 1, 8, 1 }, { 256, 1, 8, 1 }, { 257, 1, 8, 2 },
        { 1024, 4, 8, 1 }, { 1028, 4, 8, 2 }, { (uint64_t)2 << 20, 2, 20, 1 },
        { ((uint64_t)2 << 20) + 2, 2, 20, 2 }, { UINT64_MAX, 1, 24, (UINT64_MAX >> 24) + 1 },
    };
    for (size_t k = 0; k < ARRAY_LEN(cases); k++)
        ck_assert_uint_eq(tf_chunk_count(cases[k].nbytes, cases[k].elem, cases[k].shift),
                          cases[k].chunks);
}
END_TEST

/* ---- rejection of inconsistent segments ---------------------------------- */

typedef struct {
    const char *why;
    void (*mutate)(sample *s);
    const char *message; /* expected in the error; NULL: any error */
} bad_segment_case;

static void ref_is_itself(sample *s) { s->blobs[2].ref = FIRST_BLOB + 2 + 1; }
static void ref_is_later(sample *s) { s->blobs[0].ref = FIRST_BLOB + 4 + 1; }
static void ref_is_huge(sample *s) { s->blobs[4].ref = UINT64_MAX; }
static void model_is_itself(sample *s) { s->blobs[1].model = FIRST_BLOB + 1 + 1; }
static void model_is_later(sample *s) { s->blobs[3].model = FIRST_BLOB + 4 + 1; }
static void blob_in_superblock(sample *s) { s->blobs[0].offset = 31; }
static void blob_past_end(sample *s) { s->blobs[4].enc_len = 2; }
static void blob_starts_past_end(sample *s) { s->blobs[1].offset = FILE_END + 1, s->blobs[1].enc_len = 0; }
static void blob_length_wraps(sample *s) { s->blobs[1].enc_len = UINT64_MAX - 10; }
static void blob_too_large(sample *s) { s->blobs[4].raw_len = (1u << 24) + 1; }
static void blob_unknown_dtype(sample *s) { s->blobs[2].dtype = TF_DT_COUNT; }

static void file_extra_chunk(sample *s)
{
    s->file_chunks[2] = 10;
    s->entries[E_CONFIG].nchunks = 3;
}
static void file_missing_chunk(sample *s) { s->entries[E_CONFIG].nchunks = 1; }
static void empty_file_with_chunk(sample *s)
{
    s->entries[E_EMPTY].nchunks = 1;
    s->entries[E_EMPTY].chunks = s->file_chunks;
}
static void file_names_missing_blob(sample *s) { s->file_chunks[1] = TOTAL_BLOBS; }
static void tensor_names_missing_blob(sample *s) { s->model_chunks[4] = UINT64_MAX; }

static void tensor_partial_f32(sample *s)
{
    s->pieces[1].len -= 1;
    settle_tensor_files(s);
}
static void tensor_partial_f64(sample *s)
{
    s->tensors[2].dtype = TF_DT_F64; /* 8 bytes would be fine; make it 12 */
    s->pieces[4].len = 12;
    settle_tensor_files(s);
}
static void tensor_dtype_none(sample *s) { s->tensors[1].dtype = TF_DT_NONE; }
static void tensor_dtype_unknown(sample *s) { s->tensors[1].dtype = 200; }
static void tensor_needs_more_chunks(sample *s)
{
    s->pieces[1].len += 1024; /* one more chunk than the entry lists */
    settle_tensor_files(s);
}
static void verbatim_needs_more_chunks(sample *s)
{
    s->pieces[2].len += 256; /* the verbatim stream takes 3 chunks, not 2 */
    settle_tensor_files(s);
}
static void inline_verbatim_short(sample *s)
{
    /* The pieces say one byte more than the inline stream holds. */
    s->inline_pieces[2].len += 1;
    s->entries[E_INLINE].size += 1;
}
/* Three verbatim pieces of 2^63 - 1 bytes: their sum wraps. */
static void verbatim_pieces_wrap(sample *s)
{
    s->pieces[0].len = s->pieces[2].len = s->pieces[7].len = INT64_MAX;
}
/* The same, the sum wrapping at a tensor piece. */
static void tensor_piece_wraps(sample *s)
{
    s->pieces[0].len = s->pieces[2].len = INT64_MAX;
    s->pieces[3].len = (uint64_t)1 << 62;
}
static void tensor_file_size_plus_one(sample *s) { s->entries[E_MODEL].size += 1; }
static void tensor_file_size_minus_one(sample *s) { s->entries[E_MODEL].size -= 1; }
static void tensor_file_size_without_prefix(sample *s) { s->entries[E_MODEL].size -= 8; }
static void inline_size_plus_one(sample *s) { s->entries[E_INLINE].size += 1; }
/* The last name of E_MODEL, n bytes long. */
static void last_name_of(sample *s, size_t n)
{
    uint64_t at = model_name_off[MODEL_TENSORS - 1];
    memset(s->names + at, 'n', n);
    s->names[at + n] = '\0';
    s->entries[E_MODEL].names_len = at + n + 1;
}
static void name_too_long(sample *s) { last_name_of(s, TF_TENSOR_NAME_MAX + 1); }
static void tensor_file_chunk_missing_blob(sample *s) { s->model_chunks[0] = TOTAL_BLOBS; }
static void inline_chunk_missing_blob(sample *s) { s->inline_chunks[0] = TOTAL_BLOBS; }

static void mode_with_type_bits(sample *s) { s->entries[E_CONFIG].mode = 0100644; }
static void mode_huge(sample *s) { s->entries[E_RUN].mode = UINT32_MAX; }
static void nsec_one_second(sample *s) { s->entries[E_STEP].mtime_nsec = 1000000000u; }
static void ino_zero(sample *s) { s->entries[E_LINK].ino = 0; }
static void tombstone_ino_zero(sample *s) { s->entries[E_GONE].ino = 0; }
static void kind_zero(sample *s) { s->entries[E_GONE].kind = 0; }
static void kind_unknown(sample *s) { s->entries[E_GONE].kind = TF_ENTRY_TENSORS + 1; }
/* Kind 3 is read (release 1), never written: what follows the head of
 * a tombstone is no body of it. */
static void kind_release1_without_body(sample *s) { s->entries[E_GONE].kind = TF_ENTRY_SAFETENSORS; }
static void path_dotdot(sample *s) { s->entries[E_CONFIG].path = "run/../config.json"; }
static void path_absolute(sample *s) { s->entries[E_RUN].path = "/run"; }
static void path_empty(sample *s) { s->entries[E_RUN].path = ""; }
static void path_control(sample *s) { s->entries[E_LINK].path = "run/lat\x1b" "est"; }
static void link_target_nul(sample *s) { s->entries[E_LINK].size = strlen(s->target) + 1; }
static void link_target_too_long(sample *s)
{
    memset(s->target, 'x', TF_PATH_MAX + 1);
    s->target[TF_PATH_MAX + 1] = '\0';
    s->entries[E_LINK].size = TF_PATH_MAX + 1;
}

static const bad_segment_case bad_segments[] = {
    { "reference to itself", ref_is_itself, "not an earlier blob" },
    { "reference to a later blob", ref_is_later, "not an earlier blob" },
    { "reference far beyond", ref_is_huge, "not an earlier blob" },
    { "model is itself", model_is_itself, "not an earlier blob" },
    { "model is a later blob", model_is_later, "not an earlier blob" },
    { "blob inside the superblock", blob_in_superblock, "outside the archive" },
    { "blob running past the file end", blob_past_end, "outside the archive" },
    { "blob starting past the file end", blob_starts_past_end, "outside the archive" },
    { "blob length wrapping around", blob_length_wraps, "outside the archive" },
    { "blob larger than a chunk", blob_too_large, "more than a chunk" },
    { "blob of unknown dtype", blob_unknown_dtype, "unknown dtype" },
    { "file with a chunk too many", file_extra_chunk, "3 chunks for 300 bytes" },
    { "file with a chunk missing", file_missing_chunk, "1 chunks for 300 bytes" },
    { "empty file with a chunk", empty_file_with_chunk, "1 chunks for 0 bytes" },
    { "file chunk naming no blob", file_names_missing_blob, "names blob 15 of 15" },
    { "tensor chunk naming no blob", tensor_names_missing_blob, "names blob" },
    { "F32 tensor of 2087 bytes", tensor_partial_f32, "bad dtype or size" },
    { "F64 tensor of 12 bytes", tensor_partial_f64, "bad dtype or size" },
    { "tensor of dtype none", tensor_dtype_none, "bad dtype or size" },
    { "tensor of unknown dtype", tensor_dtype_unknown, "bad dtype or size" },
    { "tensor needing a chunk not listed", tensor_needs_more_chunks, NULL },
    { "verbatim stream needing a chunk not listed", verbatim_needs_more_chunks, NULL },
    { "inline verbatim stream one byte short", inline_verbatim_short, NULL },
    { "verbatim pieces wrapping around", verbatim_pieces_wrap, "longer than a file can be" },
    { "tensor piece wrapping around", tensor_piece_wraps, "longer than a file can be" },
    { "tensor file size one too many", tensor_file_size_plus_one, "for a file of" },
    { "tensor file size one short", tensor_file_size_minus_one, "for a file of" },
    { "tensor file size without the length prefix", tensor_file_size_without_prefix, "for a file of" },
    { "inline tensor file size one too many", inline_size_plus_one, "for a file of" },
    { "tensor name of 4097 bytes", name_too_long, "tensor name of 4097 bytes" },
    { "tensor file chunk naming no blob", tensor_file_chunk_missing_blob, "names blob 15 of 15" },
    { "inline tensor file chunk naming no blob", inline_chunk_missing_blob, "names blob 15 of 15" },
    { "mode with file type bits", mode_with_type_bits, "bad mode" },
    { "mode of 32 bits", mode_huge, "bad mode" },
    { "a whole second of nanoseconds", nsec_one_second, "bad mode, mtime or inode" },
    { "inode 0", ino_zero, "bad mode, mtime or inode" },
    { "tombstone with inode 0", tombstone_ino_zero, "bad mode, mtime or inode" },
    { "kind 0", kind_zero, "unknown kind 0" },
    { "kind past the last", kind_unknown, "unknown kind 7" },
    { "kind 3 without its body", kind_release1_without_body, NULL },
    { "path with ..", path_dotdot, "invalid path" },
    { "absolute path", path_absolute, "invalid path" },
    { "empty path", path_empty, "invalid path" },
    { "path with a control character", path_control, "invalid path" },
    { "link target holding a NUL", link_target_nul, "holds a NUL" },
    { "link target longer than PATH_MAX", link_target_too_long, "bad link target" },
};

START_TEST(decode_rejects_inconsistent_segment)
{
    const bad_segment_case *c = &bad_segments[_i];
    sample s;
    make_sample(&s);
    c->mutate(&s);
    tf_buf enc = { 0 };
    encode_sample(&s, &enc);
    tf_segment dec;
    tf_error e;
    ck_assert_msg(decode_exact(enc.data, enc.len, &dec, &e) == -1, "accepted a segment with %s",
                  c->why);
    ck_assert_msg(!c->message || strstr(e.msg, c->message), "%s: message \"%s\" lacks \"%s\"",
                  c->why, e.msg, c->message);
    ck_assert_int_eq(e.errnum, EIO);
    ck_assert_ptr_null(dec.blobs); /* freed and cleared on failure */
    ck_assert_ptr_null(dec.entries);
    tf_buf_free(&enc);
}
END_TEST

/* The boundaries just inside the limits are accepted. */
static void blob_ref_to_previous(sample *s) { s->blobs[4].ref = FIRST_BLOB + 3 + 1; }
static void link_target_path_max(sample *s)
{
    memset(s->target, 'x', TF_PATH_MAX);
    s->target[TF_PATH_MAX] = '\0';
    s->entries[E_LINK].size = TF_PATH_MAX;
}
static void last_nanosecond(sample *s) { s->entries[E_EMPTY].mtime_nsec = 999999999; }
static void name_of_name_max(sample *s) { last_name_of(s, TF_TENSOR_NAME_MAX); }
/* A format this release does not know is kept (and read by its pieces). */
static void unknown_format(sample *s) { s->entries[E_MODEL].format = 200; }
/* A tensor file of no tensors, and an empty one. */
static void no_tensors(sample *s)
{
    tf_entry *m = &s->entries[E_MODEL];
    m->npieces = 1;
    m->pieces[0].tensor = TF_PIECE_VERBATIM;
    m->ntensors = 0;
    m->names_len = 0;
    m->nchunks = 1;
    settle_tensor_files(s);
}
static void empty_tensor_file(sample *s)
{
    tf_entry *m = &s->entries[E_MODEL];
    m->npieces = m->ntensors = m->names_len = m->nchunks = 0;
    settle_tensor_files(s);
}

/* An inline verbatim stream of no bytes: a file that is one tensor. */
static void inline_stream_empty(sample *s)
{
    tf_entry *m = &s->entries[E_INLINE];
    m->npieces = 1;
    m->pieces[0] = (tf_piece){ .len = 4, .tensor = 0 };
    settle_tensor_files(s);
}

static void (*const good_mutations[])(sample *s) = {
    blob_ref_to_previous, link_target_path_max, last_nanosecond,
    name_of_name_max, unknown_format, no_tensors, empty_tensor_file, inline_stream_empty,
};

START_TEST(decode_accepts_boundaries)
{
    sample s;
    make_sample(&s);
    good_mutations[_i](&s);
    tf_buf enc = { 0 };
    encode_sample(&s, &enc);
    tf_segment dec;
    tf_error e;
    ck_assert_msg(decode_exact(enc.data, enc.len, &dec, &e) == 0, "decode: %s", e.msg);
    assert_segments_equal(&s.seg, &dec);
    tf_segment_free(&dec);
    tf_buf_free(&enc);
}
END_TEST

/* Every proper prefix of a valid segment fails with a message (and
 * without reading past it: decode_exact). */
static void expect_every_prefix_fails(const uint8_t *p, size_t len)
{
    for (size_t cut = 0; cut < len; cut++) {
        tf_segment dec;
        tf_error e;
        ck_assert_msg(decode_exact(p, cut, &dec, &e) == -1,
                      "accepted the segment cut to %zu of %zu bytes", cut, len);
    }
}

START_TEST(decode_rejects_every_truncation)
{
    sample s;
    make_sample(&s);
    tf_buf enc = { 0 };
    encode_sample(&s, &enc);
    expect_every_prefix_fails(enc.data, enc.len);
    tf_buf_free(&enc);
}
END_TEST

/* ---- hand-made segments: counts the bytes cannot pay for ----------------- */

static void put_varints(tf_buf *b, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(tf_buf_varint(b, v[i]), 0);
}

#define VARINTS(b, ...)                                                                          \
    put_varints((b), (const uint64_t[]){ __VA_ARGS__ },                                          \
                sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))

/* Version 1, no blobs, one entry of this kind at path, mode 0644. */
static void put_entry_head(tf_buf *b, uint8_t kind, const char *path, size_t plen)
{
    VARINTS(b, 1, 0, 1);
    ck_assert_int_eq(tf_buf_u8(b, kind), 0);
    VARINTS(b, 2, plen);
    ck_assert_int_eq(tf_buf_put(b, path, plen), 0);
    VARINTS(b, 0644, 0, 0);
}

static void huge_blob_count(tf_buf *b) { VARINTS(b, 1, (uint64_t)1 << 62); }
static void blob_count_one_too_many(tf_buf *b)
{
    VARINTS(b, 1, 2);
    for (int i = 0; i < 40; i++) /* 40 bytes cannot hold 2 blobs of 31+ */
        tf_buf_u8(b, 0);
}
static void huge_entry_count(tf_buf *b) { VARINTS(b, 1, 0, UINT64_MAX); }
static void huge_tensor_count(tf_buf *b)
{
    put_entry_head(b, TF_ENTRY_SAFETENSORS, "a", 1);
    VARINTS(b, 8, 0, (uint64_t)1 << 60);
}
static void huge_file_chunk_count(tf_buf *b)
{
    put_entry_head(b, TF_ENTRY_FILE, "a", 1);
    VARINTS(b, (uint64_t)1 << 62, (uint64_t)1 << (62 - SHIFT), 0, 0, 0);
}
static void huge_tensor_chunk_count(tf_buf *b)
{
    put_entry_head(b, TF_ENTRY_SAFETENSORS, "a", 1);
    VARINTS(b, 8 + ((uint64_t)1 << 62), 0, 1);
    tf_buf_u8(b, TF_DT_U8);
    VARINTS(b, (uint64_t)1 << 62, 0, 0);
}
static void huge_header(tf_buf *b)
{
    put_entry_head(b, TF_ENTRY_SAFETENSORS, "a", 1);
    VARINTS(b, 8 + ((uint64_t)1 << 40), (uint64_t)1 << 40, 0);
}
/* A tensor file entry "a" of size bytes, format 1, the flags given and
 * npieces pieces to follow. */
static void put_tensor_file_head(tf_buf *b, uint64_t size, uint8_t flags, uint64_t npieces)
{
    put_entry_head(b, TF_ENTRY_TENSORS, "a", 1);
    VARINTS(b, size);
    ck_assert_int_eq(tf_buf_u8(b, TF_FORMAT_SAFETENSORS) | tf_buf_u8(b, flags), 0);
    VARINTS(b, npieces);
}
/* A tensor piece of len bytes of dtype named name (n bytes). */
static void put_tensor_piece(tf_buf *b, uint64_t len, uint8_t dtype, const char *name, size_t n)
{
    VARINTS(b, len << 1 | 1);
    ck_assert_int_eq(tf_buf_u8(b, dtype), 0);
    VARINTS(b, n);
    ck_assert_int_eq(tf_buf_put(b, name, n), 0);
}
static void tensor_name_with_nul(tf_buf *b)
{
    put_tensor_file_head(b, 1, 0, 1);
    put_tensor_piece(b, 1, TF_DT_U8, "a\0b", 3);
    VARINTS(b, 0);
}
static void tensor_file_flags(tf_buf *b, uint8_t flags)
{
    put_tensor_file_head(b, 1, flags, 1);
    put_tensor_piece(b, 1, TF_DT_U8, "a", 1);
    VARINTS(b, 0);
}
static void tensor_file_flag_two(tf_buf *b) { tensor_file_flags(b, 2); }
static void tensor_file_flag_high(tf_buf *b) { tensor_file_flags(b, 0x81); }
static void huge_piece_count(tf_buf *b) { put_tensor_file_head(b, 0, 0, (uint64_t)1 << 60); }
static void huge_tensor_name(tf_buf *b)
{
    put_tensor_file_head(b, 1, 0, 1);
    VARINTS(b, 1 << 1 | 1);
    tf_buf_u8(b, TF_DT_U8);
    VARINTS(b, (uint64_t)1 << 40, 'a');
}
static void tensor_name_not_present(tf_buf *b)
{
    put_tensor_file_head(b, 1, 0, 1);
    VARINTS(b, 1 << 1 | 1);
    tf_buf_u8(b, TF_DT_U8);
    VARINTS(b, 100, 'a', 'b');
}
static void huge_inline_verbatim(tf_buf *b)
{
    put_tensor_file_head(b, (uint64_t)1 << 40, 1, 1);
    VARINTS(b, (uint64_t)1 << 41, 'x', 'y');
}
static void huge_verbatim_chunk_count(tf_buf *b)
{
    put_tensor_file_head(b, (uint64_t)1 << 62, 0, 1);
    VARINTS(b, (uint64_t)1 << 63, 0, 0);
}
/* One U8 tensor of 2 * 256 bytes: 2 chunks; `chunks` of them follow. */
static void tensor_file_with_chunks(tf_buf *b, int chunks)
{
    put_tensor_file_head(b, 512, 0, 1);
    put_tensor_piece(b, 512, TF_DT_U8, "t", 1);
    for (int i = 0; i < chunks; i++)
        VARINTS(b, 0);
}
static void tensor_file_chunk_short(tf_buf *b) { tensor_file_with_chunks(b, 1); }
static void tensor_file_chunk_extra(tf_buf *b) { tensor_file_with_chunks(b, 3); }
static void tensor_file_dtype_none(tf_buf *b)
{
    put_tensor_file_head(b, 1, 0, 1);
    put_tensor_piece(b, 1, TF_DT_NONE, "a", 1);
    VARINTS(b, 0);
}
static void huge_path(tf_buf *b)
{
    VARINTS(b, 1, 0, 1);
    tf_buf_u8(b, TF_ENTRY_DIR);
    VARINTS(b, 2, (uint64_t)1 << 40, 0);
}
static void path_max_not_present(tf_buf *b)
{
    VARINTS(b, 1, 0, 1);
    tf_buf_u8(b, TF_ENTRY_DIR);
    VARINTS(b, 2, TF_PATH_MAX, 'a', 'b');
}
static void huge_link_target(tf_buf *b)
{
    put_entry_head(b, TF_ENTRY_SYMLINK, "a", 1);
    VARINTS(b, (uint64_t)1 << 40, 'x');
}
static void path_with_nul(tf_buf *b) { put_entry_head(b, TF_ENTRY_DIR, "a\0b", 3); }
static void version_four(tf_buf *b) { VARINTS(b, 4, 0, 0); }
/* Versions 2 and 3: redirects after the entries (none here: no blobs). */
static void redirects_none(tf_buf *b) { VARINTS(b, 2, 0, 0, 0); }
static void redirects_again_none(tf_buf *b) { VARINTS(b, 3, 0, 0, 0); }
static void redirect_of_a_later_slot(tf_buf *b) { VARINTS(b, 2, 0, 0, 1, FIRST_BLOB, 0); }
static void redirect_out_of_the_segment(tf_buf *b) { VARINTS(b, 2, 0, 0, 1, 0, FIRST_BLOB); }
static void redirect_list_truncated(tf_buf *b) { VARINTS(b, 2, 0, 0, 2, 0); }
static void version_zero(tf_buf *b) { VARINTS(b, 0, 0, 0); }
static void trailing_byte(tf_buf *b) { VARINTS(b, 1, 0, 0, 0); }
static void nothing(tf_buf *b) { (void)b; }
static void overlong_count(tf_buf *b)
{
    VARINTS(b, 1);
    for (int i = 0; i < 10; i++)
        tf_buf_u8(b, 0x80);
    VARINTS(b, 0, 0);
}

static const struct {
    const char *why;
    void (*build)(tf_buf *b);
    const char *message;
} crafted_segments[] = {
    { "2^62 blobs", huge_blob_count, "blobs cannot fit" },
    { "2 blobs in 40 bytes", blob_count_one_too_many, "2 blobs cannot fit in 40 bytes" },
    { "2^64-1 entries", huge_entry_count, "entries cannot fit" },
    { "2^60 tensors", huge_tensor_count, "tensors cannot fit" },
    { "a file of 2^54 chunks", huge_file_chunk_count, "segment too short" },
    { "a tensor of 2^54 chunks", huge_tensor_chunk_count, "segment too short" },
    { "a 1 TiB header", huge_header, "truncated" },
    { "a tensor name holding a NUL", tensor_name_with_nul, "tensor name holding a NUL" },
    { "tensor file flags 0x02", tensor_file_flag_two, "unknown flags 0x02" },
    { "tensor file flags 0x81", tensor_file_flag_high, "unknown flags 0x81" },
    { "2^60 pieces", huge_piece_count, "pieces cannot fit" },
    { "a 1 TiB tensor name", huge_tensor_name, "tensor name of 1099511627776 bytes" },
    { "a tensor name that is not there", tensor_name_not_present, "truncated" },
    { "a 2 TiB inline verbatim stream", huge_inline_verbatim, "truncated" },
    { "a verbatim stream of 2^54 chunks", huge_verbatim_chunk_count, "segment too short" },
    { "a tensor file one chunk short", tensor_file_chunk_short, "needs 2 chunks, segment too short" },
    { "a tensor file with a chunk too many", tensor_file_chunk_extra, "1 unexpected bytes" },
    { "a tensor of dtype none", tensor_file_dtype_none, "bad dtype or size" },
    { "a 1 TiB path", huge_path, "path of" },
    { "a 4096-byte path that is not there", path_max_not_present, "truncated" },
    { "a 1 TiB link target", huge_link_target, "bad link target" },
    { "a path holding a NUL", path_with_nul, "invalid path" },
    { "version 4", version_four, "version 4" },
    { "version 2 without redirects", redirects_none, "without redirects" },
    { "version 3 without redirects", redirects_again_none, "without redirects" },
    { "a redirect of a slot not earlier", redirect_of_a_later_slot, "not an earlier commit's" },
    { "a redirect to a blob of no segment", redirect_out_of_the_segment, "not of its segment" },
    { "a redirect list cut short", redirect_list_truncated, "cannot fit" },
    { "version 0", version_zero, "version 0" },
    { "a byte after the entries", trailing_byte, "1 unexpected bytes" },
    { "no bytes", nothing, "truncated at byte 0" },
    { "an 11-byte count", overlong_count, "truncated" },
};

START_TEST(decode_rejects_crafted_segment)
{
    tf_buf b = { 0 };
    crafted_segments[_i].build(&b);
    tf_segment dec;
    tf_error e;
    ck_assert_msg(decode_exact(b.data, b.len, &dec, &e) == -1, "accepted %s",
                  crafted_segments[_i].why);
    ck_assert_msg(strstr(e.msg, crafted_segments[_i].message), "%s: message \"%s\" lacks \"%s\"",
                  crafted_segments[_i].why, e.msg, crafted_segments[_i].message);
    tf_buf_free(&b);
}
END_TEST

/* ---- tensor-file layouts (what a format's parser hands the catalog) ---- */

/* A layout of three pieces: verbatim, tensor 0 (U8 "a"), tensor 1 (U8 "b"). */
typedef struct {
    tf_piece pieces[3];
    tf_tensor_span tensors[2];
    char names[4];
    tf_entry ent;
} layout;

static void make_layout(layout *l)
{
    *l = (layout){ .pieces = { { .len = 10, .tensor = TF_PIECE_VERBATIM }, { .len = 300, .tensor = 0 },
                               { .len = 2, .tensor = 1 } },
                   .tensors = { { .dtype = TF_DT_U8, .name_off = 0 }, { .dtype = TF_DT_U8, .name_off = 2 } },
                   .names = "a\0b" };
    l->tensors[0].nbytes = 300;
    l->tensors[1].nbytes = 2;
    l->ent = (tf_entry){ .kind = TF_ENTRY_TENSORS, .path = "f", .size = 312, .npieces = 3,
                         .pieces = l->pieces, .ntensors = 2, .tensors = l->tensors,
                         .names = l->names, .names_len = sizeof l->names };
}

START_TEST(layout_derives_offsets)
{
    layout l;
    make_layout(&l);
    uint64_t nchunks = 0;
    tf_error e = { 0 };
    ck_assert_msg(tf_entry_layout(&l.ent, SHIFT, &nchunks, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(nchunks, 1 + 2 + 1); /* 10 verbatim bytes, 300 and 2 U8 */
    ck_assert_uint_eq(l.ent.verbatim_len, 10);
    ck_assert_uint_eq(l.ent.verbatim_chunks, 1);
    ck_assert_uint_eq(l.pieces[2].file_off, 310);
    ck_assert_uint_eq(l.tensors[0].file_off, 10);
    ck_assert_uint_eq(l.tensors[1].file_off, 310);
    ck_assert_uint_eq(l.tensors[0].first_chunk, 1);
    ck_assert_uint_eq(l.tensors[1].first_chunk, 3);
    /* Held inline, the verbatim stream takes no chunk. */
    uint8_t inline_bytes[10] = { 0 };
    l.ent.verbatim = inline_bytes;
    ck_assert_int_eq(tf_entry_layout(&l.ent, SHIFT, &nchunks, &e), 0);
    ck_assert_uint_eq(nchunks, 3);
    ck_assert_uint_eq(l.ent.verbatim_chunks, 0);
    ck_assert_uint_eq(l.tensors[0].first_chunk, 0);
}
END_TEST

static void layout_out_of_order(layout *l) { l->pieces[1].tensor = 1, l->pieces[2].tensor = 0; }
static void layout_tensor_twice(layout *l) { l->pieces[2].tensor = 0; }
static void layout_tensor_past_last(layout *l) { l->pieces[2].tensor = 2; }
static void layout_tensor_unplaced(layout *l) { l->pieces[2].tensor = TF_PIECE_VERBATIM; }
static void layout_size_differs(layout *l) { l->tensors[1].nbytes = 4; }
static void layout_partial_element(layout *l)
{
    l->tensors[0].dtype = TF_DT_F32;
    l->pieces[1].len = l->tensors[0].nbytes = 302;
}
static void layout_dtype_none(layout *l) { l->tensors[0].dtype = TF_DT_NONE; }
static void layout_dtype_unknown(layout *l) { l->tensors[1].dtype = TF_DT_COUNT; }
static void layout_file_longer(layout *l) { l->ent.size += 1; }
static void layout_wraps(layout *l) { l->pieces[0].len = UINT64_MAX - 100; }
static void layout_name_outside(layout *l) { l->tensors[1].name_off = 4; }
static void layout_names_unterminated(layout *l) { l->names[3] = 'c'; }

static const struct {
    const char *why;
    void (*mutate)(layout *l);
    const char *message;
} bad_layouts[] = {
    { "tensors out of order", layout_out_of_order, "piece 1 names tensor 1 out of order" },
    { "a tensor placed twice", layout_tensor_twice, "piece 2 names tensor 0 out of order" },
    { "a piece naming no tensor", layout_tensor_past_last, "piece 2 names tensor 2 out of order" },
    { "a tensor no piece places", layout_tensor_unplaced, "and 1 tensors for a file of 312 bytes and 2 tensors" },
    { "a tensor of another size than its piece", layout_size_differs, "tensor 1 has a bad dtype or size" },
    { "a partial F32 element", layout_partial_element, "tensor 0 has a bad dtype or size" },
    { "dtype none", layout_dtype_none, "tensor 0 has a bad dtype or size" },
    { "an unknown dtype", layout_dtype_unknown, "tensor 1 has a bad dtype or size" },
    { "pieces shorter than the file", layout_file_longer, "pieces of 312 bytes" },
    { "pieces wrapping around", layout_wraps, "longer than a file can be" },
    { "a name outside the names", layout_name_outside, "tensor 1 has no name" },
    { "names not terminated", layout_names_unterminated, "not terminated" },
};

START_TEST(layout_rejects_inconsistent_pieces)
{
    layout l;
    make_layout(&l);
    bad_layouts[_i].mutate(&l);
    uint64_t nchunks = 0;
    tf_error e = { 0 };
    ck_assert_msg(tf_entry_layout(&l.ent, SHIFT, &nchunks, &e) == -1, "accepted %s",
                  bad_layouts[_i].why);
    ck_assert_msg(strstr(e.msg, bad_layouts[_i].message) && strstr(e.msg, "\"f\""),
                  "%s: message \"%s\" lacks \"%s\"", bad_layouts[_i].why, e.msg,
                  bad_layouts[_i].message);
}
END_TEST

/* ---- entries of release 1 (kind 3: a safetensors header and tensors) ---- */

#define V1_PATH "run/step-1.safetensors"
/* The header lists "b" first; its data come second. */
#define V1_HEADER "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[1200,1204]}," \
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[300],\"data_offsets\":[0,1200]}}  "

/* A segment of one kind-3 entry as release 1 wrote it: size, header
 * length, header, tensor count, (dtype, bytes) per tensor in data order,
 * then the chunks: 2 of 256 F32 elements for "a", 1 for "b". */
static void put_v1_entry(tf_buf *b, const char *header)
{
    size_t hlen = strlen(header);
    put_entry_head(b, TF_ENTRY_SAFETENSORS, V1_PATH, strlen(V1_PATH));
    VARINTS(b, 8 + hlen + 1200 + 4, hlen);
    ck_assert_int_eq(tf_buf_put(b, header, hlen), 0);
    VARINTS(b, 2);
    ck_assert_int_eq(tf_buf_u8(b, TF_DT_F32), 0);
    VARINTS(b, 1200);
    ck_assert_int_eq(tf_buf_u8(b, TF_DT_BF16), 0);
    VARINTS(b, 4, 7, 8, 9);
}

static const tf_entry *decode_one(const tf_buf *b, tf_segment *dec)
{
    tf_error e;
    ck_assert_msg(decode_exact(b->data, b->len, dec, &e) == 0, "decode: %s", e.msg);
    ck_assert_uint_eq(dec->nentries, 1);
    return &dec->entries[0];
}

START_TEST(release1_entry_reads_as_tensor_file)
{
    tf_buf b = { 0 };
    put_v1_entry(&b, V1_HEADER);
    tf_segment dec;
    const tf_entry *ent = decode_one(&b, &dec);
    const size_t hlen = strlen(V1_HEADER);
    ck_assert_uint_eq(ent->kind, TF_ENTRY_TENSORS);
    ck_assert_uint_eq(ent->format, TF_FORMAT_SAFETENSORS);
    ck_assert_str_eq(ent->path, V1_PATH);
    ck_assert_uint_eq(ent->size, 8 + hlen + 1204);
    /* The verbatim stream, inline: the 8-byte little-endian length and the header. */
    ck_assert_ptr_nonnull(ent->verbatim);
    ck_assert_uint_eq(ent->verbatim_len, 8 + hlen);
    ck_assert_uint_eq(ent->verbatim_chunks, 0);
    uint8_t prefix[8];
    tf_le64_put(prefix, hlen);
    ck_assert_mem_eq(ent->verbatim, prefix, 8);
    ck_assert_mem_eq(ent->verbatim + 8, V1_HEADER, hlen);
    /* One verbatim piece, then the tensors in data order, named from the header. */
    ck_assert_uint_eq(ent->npieces, 3);
    ck_assert_uint_eq(ent->pieces[0].tensor, TF_PIECE_VERBATIM);
    ck_assert_uint_eq(ent->pieces[0].len, 8 + hlen);
    ck_assert_uint_eq(ent->pieces[1].tensor, 0);
    ck_assert_uint_eq(ent->pieces[1].len, 1200);
    ck_assert_uint_eq(ent->pieces[1].file_off, 8 + hlen);
    ck_assert_uint_eq(ent->pieces[2].tensor, 1);
    ck_assert_uint_eq(ent->pieces[2].file_off, 8 + hlen + 1200);
    ck_assert_uint_eq(ent->ntensors, 2);
    ck_assert_str_eq(tf_tensor_name(ent, 0), "a");
    ck_assert_str_eq(tf_tensor_name(ent, 1), "b");
    ck_assert_uint_eq(ent->tensors[0].dtype, TF_DT_F32);
    ck_assert_uint_eq(ent->tensors[1].dtype, TF_DT_BF16);
    ck_assert_uint_eq(ent->tensors[1].nbytes, 4);
    ck_assert_uint_eq(ent->tensors[0].first_chunk, 0);
    ck_assert_uint_eq(ent->tensors[1].first_chunk, 2);
    ck_assert_uint_eq(ent->nchunks, 3);
    ck_assert_uint_eq(ent->chunks[0], 7);
    ck_assert_uint_eq(ent->chunks[2], 9);
    /* Written again, it is a tensor file holding its stream inline, and
     * reads back the same. */
    tf_buf again = { 0 };
    tf_error e;
    ck_assert_int_eq(tf_segment_encode(&dec, &again, &e), 0);
    ck_assert_uint_eq(again.data[3], TF_ENTRY_TENSORS); /* after version, blobs, entries */
    tf_segment dec2;
    ck_assert_msg(decode_exact(again.data, again.len, &dec2, &e) == 0, "%s", e.msg);
    assert_segments_equal(&dec, &dec2);
    tf_segment_free(&dec2);
    tf_segment_free(&dec);
    tf_buf_free(&again);
    tf_buf_free(&b);
}
END_TEST

/* A stored header that does not describe the stored tensors still opens
 * (verify reports it); the tensors have empty names. */
static const struct {
    const char *why, *header;
} v1_unnamed[] = {
    { "a header that is no JSON", "not json at all" },
    { "an empty header", "" },
    { "a header of one tensor", "{\"a\":{\"dtype\":\"F32\",\"shape\":[301],\"data_offsets\":[0,1204]}}" },
    { "a header of tensors that do not tile the data",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[300],\"data_offsets\":[0,1200]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[1200,1202]}}" },
};

START_TEST(release1_unparsable_header_gives_empty_names)
{
    tf_buf b = { 0 };
    put_v1_entry(&b, v1_unnamed[_i].header);
    tf_segment dec;
    const tf_entry *ent = decode_one(&b, &dec);
    ck_assert_uint_eq(ent->ntensors, 2);
    for (uint64_t t = 0; t < ent->ntensors; t++)
        ck_assert_msg(strcmp(tf_tensor_name(ent, t), "") == 0, "%s: tensor %llu is named \"%s\"",
                      v1_unnamed[_i].why, (unsigned long long)t, tf_tensor_name(ent, t));
    ck_assert_mem_eq(ent->verbatim + 8, v1_unnamed[_i].header, strlen(v1_unnamed[_i].header));
    tf_segment_free(&dec);
    tf_buf_free(&b);
}
END_TEST

START_TEST(release1_entry_every_truncation_fails)
{
    tf_buf b = { 0 };
    put_v1_entry(&b, V1_HEADER);
    expect_every_prefix_fails(b.data, b.len);
    tf_buf_free(&b);
}
END_TEST

static void v1_dtype(tf_buf *b, uint8_t dtype)
{
    put_entry_head(b, TF_ENTRY_SAFETENSORS, "a", 1);
    VARINTS(b, 8 + 4, 0, 1);
    tf_buf_u8(b, dtype);
    VARINTS(b, 4, 0);
}
static void v1_dtype_none(tf_buf *b) { v1_dtype(b, TF_DT_NONE); }
static void v1_dtype_unknown(tf_buf *b) { v1_dtype(b, 99); }
static void v1_partial_element(tf_buf *b)
{
    put_entry_head(b, TF_ENTRY_SAFETENSORS, "a", 1);
    VARINTS(b, 8 + 6, 0, 1);
    tf_buf_u8(b, TF_DT_F32);
    VARINTS(b, 6, 0);
}
static void v1_size_short(tf_buf *b)
{
    put_entry_head(b, TF_ENTRY_SAFETENSORS, "a", 1);
    VARINTS(b, 4, 0, 1); /* no room for the length prefix */
    tf_buf_u8(b, TF_DT_U8);
    VARINTS(b, 4, 0);
}
static void v1_tensors_wrap(tf_buf *b)
{
    put_entry_head(b, TF_ENTRY_SAFETENSORS, "a", 1);
    VARINTS(b, 8, 0, 2);
    tf_buf_u8(b, TF_DT_U8);
    VARINTS(b, UINT64_MAX - 4);
    tf_buf_u8(b, TF_DT_U8);
    VARINTS(b, 100, 0);
}

static const struct {
    const char *why;
    void (*build)(tf_buf *b);
    const char *message;
} bad_v1[] = {
    { "a release-1 tensor of dtype none", v1_dtype_none, "bad dtype or size" },
    { "a release-1 tensor of unknown dtype", v1_dtype_unknown, "bad dtype or size" },
    { "a release-1 F32 tensor of 6 bytes", v1_partial_element, "bad dtype or size" },
    { "a release-1 file too short for its parts", v1_size_short, "for a file of 4 bytes" },
    { "release-1 tensor sizes wrapping around", v1_tensors_wrap, "longer than a file can be" },
};

START_TEST(release1_inconsistent_entry_is_refused)
{
    tf_buf b = { 0 };
    bad_v1[_i].build(&b);
    tf_segment dec;
    tf_error e;
    ck_assert_msg(decode_exact(b.data, b.len, &dec, &e) == -1, "accepted %s", bad_v1[_i].why);
    ck_assert_msg(strstr(e.msg, bad_v1[_i].message), "%s: message \"%s\" lacks \"%s\"",
                  bad_v1[_i].why, e.msg, bad_v1[_i].message);
    ck_assert_int_eq(e.errnum, EIO);
    ck_assert_ptr_null(dec.entries);
    tf_buf_free(&b);
}
END_TEST

/* ---- random mutations ---------------------------------------------------- */

/* One to four random edits: overwrite a byte, flip a bit, or cut. */
static size_t mutate_bytes(uint8_t *p, size_t len)
{
    int edits = 1 + (int)(rng_next() % 4);
    for (int k = 0; k < edits && len; k++) {
        size_t at = (size_t)(rng_next() % len);
        switch (rng_next() % 3) {
        case 0: p[at] = (uint8_t)rng_next(); break;
        case 1: p[at] ^= (uint8_t)(1u << (rng_next() % 8)); break;
        default: len = at + (len - at) / 2; break;
        }
    }
    return len;
}

START_TEST(decode_survives_random_mutations)
{
    sample s;
    make_sample(&s);
    tf_buf enc = { 0 };
    encode_sample(&s, &enc);
    uint8_t *work = malloc(enc.len);
    ck_assert_ptr_nonnull(work);
    rng_state = 20240601;
    unsigned accepted = 0;
    for (int trial = 0; trial < 5000; trial++) {
        memcpy(work, enc.data, enc.len);
        size_t len = mutate_bytes(work, enc.len);
        tf_segment dec;
        tf_error e;
        if (decode_exact(work, len, &dec, &e) < 0)
            continue;
        /* Whatever was accepted must be self-consistent: it re-encodes
         * and decodes again. */
        accepted++;
        tf_buf again = { 0 };
        ck_assert_int_eq(tf_segment_encode(&dec, &again, &e), 0);
        tf_segment dec2;
        ck_assert_msg(decode_exact(again.data, again.len, &dec2, &e) == 0,
                      "trial %d: accepted segment does not re-decode: %s", trial, e.msg);
        assert_segments_equal(&dec, &dec2);
        tf_segment_free(&dec2);
        tf_segment_free(&dec);
        tf_buf_free(&again);
    }
    /* Some edits (an id byte, a hash byte) are harmless; most are not. */
    ck_assert_uint_gt(accepted, 0);
    ck_assert_uint_lt(accepted, 5000);
    free(work);
    tf_buf_free(&enc);
}
END_TEST

/* ======================================================================== */
/* Paths                                                                    */
/* ======================================================================== */

static const struct {
    const char *path;
    size_t len; /* 0: strlen */
    int errnum; /* 0: accepted */
} path_cases[] = {
    { "a", 0, 0 },
    { "run/step-100/model.safetensors", 0, 0 },
    { ".hidden/..dots/a..b/...", 0, 0 },
    { "caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac", 0, 0 }, /* UTF-8 is fine */
    { "with space/and~tilde", 0, 0 },
    { "ab", 1, 0 },                        /* only len bytes count */
    { "", 0, EINVAL },
    { "/abs", 0, EINVAL },
    { "/", 0, EINVAL },
    { "a//b", 0, EINVAL },
    { "a/", 0, EINVAL },
    { "a/./b", 0, EINVAL },
    { "a/../b", 0, EINVAL },
    { "..", 0, EINVAL },
    { ".", 0, EINVAL },
    { "./a", 0, EINVAL },
    { "a/..", 0, EINVAL },
    { "a\nb", 0, EINVAL },
    { "a\x01", 0, EINVAL },
    { "\x1f", 0, EINVAL },
    { "a\x7f" "b", 0, EINVAL },
    { "a\0b", 3, EINVAL },
};

START_TEST(path_check_cases)
{
    const char *path = path_cases[_i].path;
    size_t len = path_cases[_i].len ? path_cases[_i].len : strlen(path);
    tf_error e = { 0 };
    int rc = tf_path_check(path, len, &e);
    if (path_cases[_i].errnum == 0) {
        ck_assert_msg(rc == 0, "rejected \"%.*s\": %s", (int)len, path, e.msg);
    } else {
        ck_assert_msg(rc == -1, "accepted \"%.*s\"", (int)len, path);
        ck_assert_int_eq(e.errnum, path_cases[_i].errnum);
        ck_assert_str_ne(e.msg, "");
    }
}
END_TEST

/* A path of total_len bytes made of components of comp_len bytes (the
 * last one shorter to fit). */
static char *make_path(size_t total_len, size_t comp_len)
{
    char *p = malloc(total_len + 1);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < total_len; i++)
        p[i] = (i + 1) % (comp_len + 1) == 0 ? '/' : 'a' + (char)(i % 26);
    p[total_len] = '\0';
    ck_assert_msg(total_len == 0 || p[total_len - 1] != '/', "path ends in '/'");
    return p;
}

static const struct {
    size_t total_len, comp_len;
    int errnum;
} long_path_cases[] = {
    { 255, 255, 0 },                           /* longest component */
    { 256, 256, ENAMETOOLONG },                /* one byte more */
    { 4096, 200, 0 },                          /* longest path */
    { 4097, 200, ENAMETOOLONG },               /* one byte more */
    { 64 * 2 - 1, 1, 0 },                      /* "a/b/..." 64 deep */
    { 65 * 2 - 1, 1, EINVAL },                 /* 65 deep */
    { 1000000, 200, ENAMETOOLONG },
};

START_TEST(path_check_limits)
{
    char *path = make_path(long_path_cases[_i].total_len, long_path_cases[_i].comp_len);
    tf_error e = { 0 };
    int rc = tf_path_check(path, long_path_cases[_i].total_len, &e);
    if (long_path_cases[_i].errnum == 0) {
        ck_assert_msg(rc == 0, "rejected a path of %zu bytes: %s", long_path_cases[_i].total_len,
                      e.msg);
    } else {
        ck_assert_msg(rc == -1, "accepted a path of %zu bytes in components of %zu",
                      long_path_cases[_i].total_len, long_path_cases[_i].comp_len);
        ck_assert_int_eq(e.errnum, long_path_cases[_i].errnum);
    }
    free(path);
}
END_TEST

/* ======================================================================== */
/* Container                                                                */
/* ======================================================================== */

/* Opens read-only and checks where the last valid commit is. */
static void expect_commit(const char *path, uint64_t seq, uint64_t end)
{
    tf_container c;
    tf_error e = { 0 };
    ck_assert_msg(tf_container_open(&c, path, NULL, &e) == 0, "open: %s", e.msg);
    ck_assert_msg(c.has_commit == (seq > 0), "has_commit %d, expected seq %llu", c.has_commit,
                  (unsigned long long)seq);
    if (seq)
        ck_assert_uint_eq(c.last.seq, seq);
    ck_assert_uint_eq(c.end, end);
    ck_assert_uint_eq(c.file_size, test_file_size(path));
    tf_container_close(&c);
}

START_TEST(create_and_open_empty)
{
    char path[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    tf_error e = { 0 };
    ck_assert_msg(tf_container_create(path, NULL, TF_CHUNK_SHIFT_DEFAULT, TF_FORMAT_SEGMENTS, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(test_file_size(path), TF_SUPERBLOCK_SIZE);
    tf_container c;
    ck_assert_int_eq(tf_container_open(&c, path, NULL, &e), 0);
    ck_assert(!c.has_commit);
    ck_assert_uint_eq(c.end, TF_SUPERBLOCK_SIZE);
    ck_assert_uint_eq(c.chunk_shift, TF_CHUNK_SHIFT_DEFAULT);
    ck_assert(!c.writable);
    tf_container_close(&c);
    ck_assert_ptr_null(c.io);
}
END_TEST

START_TEST(create_refuses_an_existing_path)
{
    char path[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    tf_error e = { 0 };
    ck_assert_int_eq(tf_container_create(path, NULL, 12, TF_FORMAT_SEGMENTS, &e), 0);
    ck_assert_int_eq(tf_container_create(path, NULL, 12, TF_FORMAT_SEGMENTS, &e), -1);
    ck_assert_int_eq(e.errnum, EEXIST);
    ck_assert_ptr_nonnull(strstr(e.msg, path));
    expect_commit(path, 0, TF_SUPERBLOCK_SIZE); /* the first one is intact */
}
END_TEST

START_TEST(create_checks_the_chunk_shift)
{
    static const struct { unsigned shift; int ok; } shifts[] = {
        { 0, 0 }, { TF_CHUNK_SHIFT_MIN - 1, 0 }, { TF_CHUNK_SHIFT_MIN, 1 },
        { TF_CHUNK_SHIFT_MAX, 1 }, { TF_CHUNK_SHIFT_MAX + 1, 0 }, { ~0u, 0 },
    };
    for (size_t k = 0; k < ARRAY_LEN(shifts); k++) {
        char name[32], path[TEST_PATH_MAX];
        snprintf(name, sizeof name, "shift-%zu", k);
        test_path(name, path);
        tf_error e = { 0 };
        int rc = tf_container_create(path, NULL, shifts[k].shift, TF_FORMAT_SEGMENTS, &e);
        if (shifts[k].ok) {
            ck_assert_msg(rc == 0, "shift %u: %s", shifts[k].shift, e.msg);
            tf_container c;
            ck_assert_int_eq(tf_container_open(&c, path, NULL, &e), 0);
            ck_assert_uint_eq(c.chunk_shift, shifts[k].shift);
            tf_container_close(&c);
        } else {
            ck_assert_msg(rc == -1, "accepted chunk shift %u", shifts[k].shift);
            ck_assert_int_eq(e.errnum, EINVAL);
            ck_assert_ptr_nonnull(strstr(e.msg, "chunk shift"));
            ck_assert_int_eq(access(path, F_OK), -1); /* nothing created */
        }
    }
}
END_TEST

START_TEST(open_rejects_what_is_not_an_archive)
{
    static const struct { const char *name; const char *contents; size_t len; } files[] = {
        { "empty", "", 0 },
        { "text", "just some text, long enough to hold a superblock\n", 50 },
        { "short", "\x89TRAJFS\n", 8 },
    };
    for (size_t k = 0; k < ARRAY_LEN(files); k++) {
        char path[TEST_PATH_MAX];
        test_path(files[k].name, path);
        test_write_file(path, files[k].contents, files[k].len);
        tf_container c;
        tf_error e = { 0 };
        ck_assert_msg(tf_container_open(&c, path, NULL, &e) == -1, "opened %s", files[k].name);
        ck_assert_ptr_nonnull(strstr(e.msg, "not a trajfs archive"));
        ck_assert_ptr_nonnull(strstr(e.msg, path));
    }
    tf_container c;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_container_open(&c, test_dir, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "not a regular file"));
    char path[TEST_PATH_MAX];
    ck_assert_int_eq(tf_container_open(&c, test_path("missing", path), NULL, &e), -1);
    ck_assert_int_eq(e.errnum, ENOENT);
    ck_assert_ptr_nonnull(strstr(e.msg, "missing"));
}
END_TEST

/* Superblock edits: at offset, a 32-bit value; rehash to keep the checksum
 * valid (so the field itself is what is rejected). */
static const struct {
    size_t offset;
    uint32_t value;
    int rehash;
    const char *message;
} superblock_cases[] = {
    { 16, 1, 0, "superblock checksum mismatch" },   /* reserved bytes */
    { 12, 12, 0, "superblock checksum mismatch" },  /* chunk shift */
    { 24, 0, 0, "superblock checksum mismatch" },   /* the checksum itself */
    { 8, 3, 1, "format version 3" },
    { 8, 0, 1, "format version 0" },
    { 12, 7, 1, "bad chunk shift 7" },
    { 12, 25, 1, "bad chunk shift 25" },
    { 0, 0x4a415254, 1, "not a trajfs archive" },   /* magic */
};

START_TEST(open_rejects_a_bad_superblock)
{
    char path[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    ck_assert_int_eq(tf_container_create(path, NULL, 20, TF_FORMAT_SEGMENTS, NULL), 0);
    size_t len;
    uint8_t *sb = test_read_whole_file(path, &len);
    ck_assert_uint_eq(len, TF_SUPERBLOCK_SIZE);
    tf_le32_put(sb + superblock_cases[_i].offset, superblock_cases[_i].value);
    if (superblock_cases[_i].rehash)
        tf_le64_put(sb + 24, tf_hash64(sb, 24));
    test_write_file(path, sb, len);
    tf_container c;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_container_open(&c, path, NULL, &e), -1);
    ck_assert_msg(strstr(e.msg, superblock_cases[_i].message), "message \"%s\" lacks \"%s\"",
                  e.msg, superblock_cases[_i].message);
    free(sb);
}
END_TEST

/* ---- commits ------------------------------------------------------------- */

#define COMMITS 3

/* The catalog bytes of commit k (a real segment: one directory). */
static void history_segment(int k, tf_buf *out)
{
    char name[16];
    snprintf(name, sizeof name, "dir-%d", k);
    tf_entry dir = { .kind = TF_ENTRY_DIR, .ino = 2 + (uint64_t)k, .path = name, .mode = 0755 };
    tf_segment seg = { .nentries = 1, .entries = &dir };
    out->len = 0;
    ck_assert_int_eq(tf_segment_encode(&seg, out, NULL), 0);
}

/* Creates an archive of COMMITS commits made as mode says, each
 * appending some blob bytes first, which read back at once; ends[k] is
 * the end of commit k (ends[0]: the superblock). */
static void build_history_as(const char *path, uint64_t ends[COMMITS + 1], tf_commit_mode mode)
{
    tf_error e = { 0 };
    ck_assert_int_eq(tf_container_create(path, NULL, 16, TF_FORMAT_SEGMENTS, &e), 0);
    tf_container c;
    ck_assert_msg(tf_container_open(&c, path, &for_writing, &e) == 0, "%s", e.msg);
    ck_assert(c.writable);
    ends[0] = c.end;
    tf_buf seg = { 0 };
    for (int k = 1; k <= COMMITS; k++) {
        uint8_t blob[64];
        memset(blob, 'A' + k, sizeof blob);
        uint64_t off;
        ck_assert_int_eq(tf_container_append(&c, blob, 10 + 17 * (size_t)k, &off, &e), 0);
        ck_assert_uint_eq(off, ends[k - 1]);
        ck_assert_uint_eq(c.end, ends[k - 1]); /* appended, not committed */
        history_segment(k, &seg);
        bool synced;
        ck_assert_msg(tf_container_commit(&c, seg.data, seg.len, (uint64_t)k * 10, mode, &synced,
                                          &e) == 0,
                      "%s", e.msg);
        /* written behind: the commit before is durable once this one
         * has waited for it */
        ck_assert(synced == (mode == TF_COMMIT_BEHIND && k > 1));
        ck_assert(c.trailer_unsynced == (mode == TF_COMMIT_BEHIND));
        ck_assert_uint_eq(c.last.seq, (uint64_t)k);
        ck_assert_uint_eq(c.end, c.file_size);
        ck_assert_uint_gt(c.end, off + 10 + 17 * (size_t)k + TF_TRAILER_SIZE);
        /* (behind: from the job's bytes, until the next commit waits) */
        uint8_t back[64] = { 0 };
        ck_assert_int_eq(tf_container_pread(&c, off, back, 10 + 17 * (size_t)k, &e), 0);
        ck_assert(memcmp(back, blob, 10 + 17 * (size_t)k) == 0);
        tf_trailer t;
        ck_assert_msg(tf_container_read_trailer(&c, c.end - TF_TRAILER_SIZE, &t, &e) == 0, "%s",
                      e.msg);
        ck_assert_uint_eq(t.seq, (uint64_t)k);
        ends[k] = c.end;
    }
    bool synced;
    ck_assert_msg(tf_container_sync(&c, &synced, &e) == 0, "%s", e.msg);
    ck_assert(synced == (mode == TF_COMMIT_BEHIND));
    ck_assert(!c.trailer_unsynced);
    tf_buf_free(&seg);
    tf_container_close(&c);
}

static void build_history(const char *path, uint64_t ends[COMMITS + 1])
{
    build_history_as(path, ends, TF_COMMIT_DURABLE);
}

/* Commits written behind leave the bytes that commits synced at once
 * leave, and reopen the same. */
START_TEST(commits_written_behind_are_the_same)
{
    char durable[TEST_PATH_MAX], behind[TEST_PATH_MAX];
    test_path("durable.trajfs", durable);
    test_path("behind.trajfs", behind);
    uint64_t ends[COMMITS + 1], ends_behind[COMMITS + 1];
    build_history_as(durable, ends, TF_COMMIT_DURABLE);
    build_history_as(behind, ends_behind, TF_COMMIT_BEHIND);
    ck_assert(memcmp(ends, ends_behind, sizeof ends) == 0);
    expect_commit(behind, COMMITS, ends[COMMITS]);
    size_t len_a, len_b;
    uint8_t *a = test_read_whole_file(durable, &len_a), *b = test_read_whole_file(behind, &len_b);
    ck_assert_uint_eq(len_a, len_b);
    ck_assert(memcmp(a, b, len_a) == 0);
    free(a);
    free(b);
}
END_TEST

START_TEST(commits_survive_reopen)
{
    char path[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    uint64_t ends[COMMITS + 1];
    build_history(path, ends);
    expect_commit(path, COMMITS, ends[COMMITS]);

    /* Walk the trailers back and read every catalog. */
    tf_container c;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_container_open(&c, path, NULL, &e), 0);
    ck_assert_uint_eq(c.last.nblobs, COMMITS * 10);
    uint64_t off = c.end - TF_TRAILER_SIZE;
    tf_buf got = { 0 }, want = { 0 };
    for (int k = COMMITS; k >= 1; k--) {
        tf_trailer t;
        ck_assert_msg(tf_container_read_trailer(&c, off, &t, &e) == 0, "%s", e.msg);
        ck_assert_uint_eq(t.seq, (uint64_t)k);
        ck_assert_uint_eq(t.nblobs, (uint64_t)k * 10);
        ck_assert_uint_eq(off + TF_TRAILER_SIZE, ends[k]);
        ck_assert_int_eq(tf_container_read_catalog(&c, &t, &got, &e), 0);
        history_segment(k, &want);
        ck_assert_uint_eq(got.len, want.len);
        ck_assert_mem_eq(got.data, want.data, want.len);
        off = t.prev;
    }
    ck_assert_uint_eq(off, 0);
    /* Not a trailer: inside the superblock, in blob bytes, past the end. */
    tf_trailer t;
    ck_assert_int_eq(tf_container_read_trailer(&c, 0, &t, &e), -1);
    ck_assert_int_eq(tf_container_read_trailer(&c, ends[0], &t, &e), -1);
    ck_assert_int_eq(tf_container_read_trailer(&c, c.end - TF_TRAILER_SIZE + 1, &t, &e), -1);
    ck_assert_int_eq(tf_container_read_trailer(&c, UINT64_MAX, &t, &e), -1);
    tf_buf_free(&got);
    tf_buf_free(&want);
    tf_container_close(&c);
}
END_TEST

/* An archive of COMMITS commits at path (ends as build_history's),
 * opened for writing in *c. */
static void open_history_for_writing(char path[TEST_PATH_MAX], uint64_t *ends, tf_container *c)
{
    test_path("a.trajfs", path);
    build_history(path, ends);
    tf_error e = { 0 };
    ck_assert_msg(tf_container_open(c, path, &for_writing, &e) == 0, "%s", e.msg);
}

START_TEST(rollback_drops_uncommitted_bytes)
{
    char path[TEST_PATH_MAX];
    uint64_t ends[COMMITS + 1];
    tf_container c;
    open_history_for_writing(path, ends, &c);
    tf_error e = { 0 };
    /* Small appends are gathered before they are written, big ones
     * written at once: the rollback drops both. */
    uint64_t off;
    ck_assert_int_eq(tf_container_append(&c, "spare bytes", 11, &off, &e), 0);
    ck_assert_uint_eq(off, ends[COMMITS]);
    size_t big_len = (size_t)2 << 20;
    uint8_t *big = calloc(1, big_len);
    ck_assert_ptr_nonnull(big);
    ck_assert_int_eq(tf_container_append(&c, big, big_len, &off, &e), 0);
    free(big);
    ck_assert_uint_eq(off, ends[COMMITS] + 11);
    ck_assert_uint_eq(test_file_size(path), ends[COMMITS] + 11 + big_len);
    tf_container_rollback(&c);
    ck_assert_uint_eq(c.file_size, ends[COMMITS]);
    ck_assert_uint_eq(test_file_size(path), ends[COMMITS]);
    tf_container_close(&c);
    expect_commit(path, COMMITS, ends[COMMITS]);
}
END_TEST

/* Checks the frames a container reports against the commit ends. */
static void expect_frames(tf_container *c, const uint64_t *ends, uint64_t n)
{
    const uint64_t *f;
    uint64_t got;
    tf_error e = { 0 };
    ck_assert_msg(tf_container_frames(c, &f, &got, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(got, n);
    for (uint64_t k = 0; k < n; k++) {
        ck_assert_uint_eq(f[2 * k + 1], ends[k + 1]);
        /* the catalog follows the commit's blobs and precedes its trailer */
        ck_assert_uint_gt(f[2 * k], ends[k]);
        ck_assert_uint_lt(f[2 * k], ends[k + 1] - TF_TRAILER_SIZE);
    }
}

/* A writer's frames: every commit's at the first call, then those of its
 * new commits; frames that no longer meet the chain are all read anew. */
START_TEST(frames_follow_the_commits)
{
    char path[TEST_PATH_MAX];
    uint64_t ends[COMMITS + 3];
    tf_container c;
    open_history_for_writing(path, ends, &c);
    tf_error e = { 0 };
    expect_frames(&c, ends, COMMITS);
    tf_buf seg = { 0 };
    for (int k = COMMITS + 1; k <= COMMITS + 2; k++) {
        uint64_t off;
        ck_assert_int_eq(tf_container_append(&c, "blob", 4, &off, &e), 0);
        history_segment(k, &seg);
        ck_assert_msg(tf_container_commit(&c, seg.data, seg.len, (uint64_t)k * 10,
                                          TF_COMMIT_DURABLE, NULL, &e) == 0,
                      "%s", e.msg);
        ends[k] = c.end;
        if (k == COMMITS + 2)
            c.frames[2 * COMMITS + 1]--; /* as if commit COMMITS + 1 were made anew */
        expect_frames(&c, ends, (uint64_t)k);
    }
    tf_buf_free(&seg);
    tf_container_close(&c);
    ck_assert_int_eq(tf_container_open(&c, path, NULL, &e), 0);
    expect_frames(&c, ends, COMMITS + 2);
    tf_container_close(&c);
}
END_TEST

START_TEST(every_torn_tail_falls_back_to_the_previous_commit)
{
    char path[TEST_PATH_MAX], cut[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    test_path("cut.trajfs", cut);
    uint64_t ends[COMMITS + 1];
    build_history(path, ends);
    size_t len;
    uint8_t *bytes = test_read_whole_file(path, &len);
    ck_assert_uint_eq(len, ends[COMMITS]);
    /* A cut anywhere inside commit k leaves commit k - 1; a cut right at
     * a commit's end leaves that commit. */
    for (int k = 1; k <= COMMITS; k++)
        for (uint64_t at = ends[k - 1]; at < ends[k]; at++) {
            test_write_file(cut, bytes, (size_t)at);
            expect_commit(cut, (uint64_t)k - 1, ends[k - 1]);
        }
    /* A cut inside the superblock is no archive at all. */
    test_write_file(cut, bytes, TF_SUPERBLOCK_SIZE - 1);
    tf_container c;
    ck_assert_int_eq(tf_container_open(&c, cut, NULL, NULL), -1);
    free(bytes);
}
END_TEST

START_TEST(garbage_after_the_last_commit_is_ignored)
{
    char path[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    uint64_t ends[COMMITS + 1];
    build_history(path, ends);
    size_t len;
    uint8_t *bytes = test_read_whole_file(path, &len);
    /* Random bytes, then a verbatim copy of the last commit's catalog and
     * trailer: a trailer out of place does not count. */
    size_t copy = 200, junk = 3000;
    uint8_t *bad = malloc(len + junk + copy);
    ck_assert_ptr_nonnull(bad);
    memcpy(bad, bytes, len);
    rng_state = 99;
    for (size_t i = 0; i < junk; i++)
        bad[len + i] = (uint8_t)rng_next();
    memcpy(bad + len + junk, bytes + len - copy, copy);
    test_write_file(path, bad, len + junk + copy);
    expect_commit(path, COMMITS, ends[COMMITS]);
    free(bad);
    free(bytes);
}
END_TEST

START_TEST(writable_open_cuts_the_torn_tail)
{
    char path[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    uint64_t ends[COMMITS + 1];
    build_history(path, ends);
    /* Cut into the last commit: a crash while it was written. */
    ck_assert_int_eq(truncate(path, (off_t)ends[COMMITS] - 5), 0);
    tf_container c;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_container_open(&c, path, NULL, &e), 0);
    ck_assert_uint_eq(c.end, ends[COMMITS - 1]);
    ck_assert_uint_eq(c.file_size, ends[COMMITS] - 5); /* read-only: left alone */
    tf_container_close(&c);
    ck_assert_uint_eq(test_file_size(path), ends[COMMITS] - 5);

    ck_assert_int_eq(tf_container_open(&c, path, &for_writing, &e), 0);
    ck_assert_uint_eq(c.end, ends[COMMITS - 1]);
    ck_assert_uint_eq(c.file_size, ends[COMMITS - 1]);
    ck_assert_uint_eq(test_file_size(path), ends[COMMITS - 1]);
    /* The next commit follows the last good one and links to it. */
    tf_buf seg = { 0 };
    history_segment(9, &seg);
    ck_assert_int_eq(tf_container_commit(&c, seg.data, seg.len, 99, TF_COMMIT_DURABLE, NULL, &e),
                     0);
    ck_assert_uint_eq(c.last.seq, COMMITS);
    ck_assert_uint_eq(c.last.prev, ends[COMMITS - 1] - TF_TRAILER_SIZE);
    ck_assert_uint_eq(c.last.catalog_off, ends[COMMITS - 1]);
    uint64_t end = c.end;
    tf_container_close(&c);
    expect_commit(path, COMMITS, end);
    tf_buf_free(&seg);
}
END_TEST

START_TEST(second_writer_is_refused)
{
    char path[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    ck_assert_int_eq(tf_container_create(path, NULL, 20, TF_FORMAT_SEGMENTS, NULL), 0);
    tf_container first, second, reader;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_container_open(&first, path, &for_writing, &e), 0);
    ck_assert_int_eq(tf_container_open(&second, path, &for_writing, &e), -1);
    ck_assert_int_eq(e.errnum, EBUSY);
    ck_assert_ptr_nonnull(strstr(e.msg, "another writer"));
    ck_assert_ptr_nonnull(strstr(e.msg, path));
    /* Readers take no lock. */
    ck_assert_int_eq(tf_container_open(&reader, path, NULL, &e), 0);
    tf_container_close(&reader);
    tf_container_close(&first);
    ck_assert_msg(tf_container_open(&second, path, &for_writing, &e) == 0, "after close: %s", e.msg);
    tf_container_close(&second);
}
END_TEST

/* A trailer whose checksum is right but whose catalog lies after it: the
 * offsets must not wrap around to look consistent. */
START_TEST(trailer_pointing_past_itself_is_invalid)
{
    char path[TEST_PATH_MAX];
    test_path("a.trajfs", path);
    uint64_t ends[COMMITS + 1];
    build_history(path, ends);
    uint64_t at = ends[COMMITS];
    static const uint64_t catalog_lens[] = { UINT64_MAX, (uint64_t)1 << 36, 100 };
    for (size_t k = 0; k < ARRAY_LEN(catalog_lens); k++) {
        ck_assert_int_eq(truncate(path, (off_t)at), 0);
        uint64_t len = catalog_lens[k] > at ? catalog_lens[k] : at + 1;
        tf_trailer fake = { .seq = COMMITS + 1, .catalog_off = at - len /* wraps */,
                            .catalog_len = len, .prev = at - TF_TRAILER_SIZE };
        uint8_t p[TF_TRAILER_SIZE];
        memcpy(p, "\x89TRJEND\n", 8);
        tf_le64_put(p + 8, fake.seq);
        tf_le64_put(p + 16, fake.catalog_off);
        tf_le64_put(p + 24, fake.catalog_len);
        tf_le64_put(p + 32, fake.catalog_hash);
        tf_le64_put(p + 40, fake.prev);
        tf_le64_put(p + 48, fake.nblobs);
        tf_le64_put(p + 56, tf_hash64(p, 56));
        test_append_file(path, p, sizeof p);
        expect_commit(path, COMMITS, at);
        tf_container c;
        tf_trailer t;
        tf_error e = { 0 };
        ck_assert_int_eq(tf_container_open(&c, path, NULL, &e), 0);
        ck_assert_msg(tf_container_read_trailer(&c, at, &t, &e) == -1,
                      "accepted a trailer at %llu whose catalog starts at %llu",
                      (unsigned long long)at, (unsigned long long)fake.catalog_off);
        tf_container_close(&c);
    }
}
END_TEST

/* ======================================================================== */

static Suite *catalog_suite(void)
{
    Suite *s = suite_create("catalog");
    TCase *seg = tcase_create("segment");
    tcase_set_timeout(seg, 120);
    tcase_add_test(seg, segment_round_trip);
    tcase_add_test(seg, segment_empty_round_trip);
    tcase_add_test(seg, chunk_count_rounds_up);
    tcase_add_loop_test(seg, decode_rejects_inconsistent_segment, 0, ARRAY_LEN(bad_segments));
    tcase_add_loop_test(seg, decode_accepts_boundaries, 0, ARRAY_LEN(good_mutations));
    tcase_add_test(seg, decode_rejects_every_truncation);
    tcase_add_loop_test(seg, decode_rejects_crafted_segment, 0, ARRAY_LEN(crafted_segments));
    tcase_add_test(seg, layout_derives_offsets);
    tcase_add_loop_test(seg, layout_rejects_inconsistent_pieces, 0, ARRAY_LEN(bad_layouts));
    tcase_add_test(seg, release1_entry_reads_as_tensor_file);
    tcase_add_loop_test(seg, release1_unparsable_header_gives_empty_names, 0, ARRAY_LEN(v1_unnamed));
    tcase_add_test(seg, release1_entry_every_truncation_fails);
    tcase_add_loop_test(seg, release1_inconsistent_entry_is_refused, 0, ARRAY_LEN(bad_v1));
    tcase_add_test(seg, decode_survives_random_mutations);
    suite_add_tcase(s, seg);

    TCase *paths = tcase_create("paths");
    tcase_add_loop_test(paths, path_check_cases, 0, ARRAY_LEN(path_cases));
    tcase_add_loop_test(paths, path_check_limits, 0, ARRAY_LEN(long_path_cases));
    suite_add_tcase(s, paths);

    TCase *cont = tcase_create("container");
    tcase_set_timeout(cont, 120);
    tcase_add_checked_fixture(cont, test_dir_make, test_dir_remove);
    tcase_add_test(cont, create_and_open_empty);
    tcase_add_test(cont, create_refuses_an_existing_path);
    tcase_add_test(cont, create_checks_the_chunk_shift);
    tcase_add_test(cont, open_rejects_what_is_not_an_archive);
    tcase_add_loop_test(cont, open_rejects_a_bad_superblock, 0, ARRAY_LEN(superblock_cases));
    tcase_add_test(cont, commits_survive_reopen);
    tcase_add_test(cont, commits_written_behind_are_the_same);
    tcase_add_test(cont, rollback_drops_uncommitted_bytes);
    tcase_add_test(cont, frames_follow_the_commits);
    tcase_add_test(cont, every_torn_tail_falls_back_to_the_previous_commit);
    tcase_add_test(cont, garbage_after_the_last_commit_is_ignored);
    tcase_add_test(cont, writable_open_cuts_the_torn_tail);
    tcase_add_test(cont, second_writer_is_refused);
    tcase_add_test(cont, trailer_pointing_past_itself_is_invalid);
    suite_add_tcase(s, cont);
    return s;
}

int main(void)
{
    return run_suite(catalog_suite());
}
