/* The writer and the prog codec: structured tensors (a mask, position
 * ids, a constant, repeated rows) stored as programs in a few bytes, read
 * back bit-exact and described; keyframe chunks offered a program (but
 * not the newest checkpoint's, which a newer one re-encodes), and with
 * all_programs every chunk, while the search offers none to a chunk with
 * a reference. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "codec/codec.h"
#include "codec/prog/prog.h"
#include "common/dtype.h"
#include "format/container.h"
#include "store/reader.h"
#include "store/writer.h"

/* Chunks of 2^18 elements: each tensor here is one chunk. */
#define CHUNK_SHIFT 18

/* The archive at path, open for reading, and its file *ent of name. */
static tf_archive *open_entry(const char *path, const char *name, const tf_entry **ent)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, NULL, &ar, &e) == 0, "%s", e.msg);
    *ent = tf_archive_lookup(ar, name);
    ck_assert_ptr_nonnull(*ent);
    return ar;
}

/* Stored bytes of tensor t of an entry: its chunk blobs. */
static uint64_t stored_bytes(const tf_archive *ar, const tf_entry *ent, uint64_t t, unsigned *codec)
{
    const tf_tensor_span *ts = &ent->tensors[t];
    uint64_t end = t + 1 < ent->ntensors ? ent->tensors[t + 1].first_chunk : ent->nchunks;
    uint64_t bytes = 0;
    for (uint64_t c = ts->first_chunk; c < end; c++) {
        const tf_blob b_rec = test_blob(ar, ent->chunks[c]), *b = &b_rec;
        bytes += b->enc_len;
        *codec = b->codec;
    }
    return bytes;
}

/* The text of the program stored as the first chunk of tensor t. */
static void program_text(tf_archive *ar, const tf_entry *ent, uint64_t t, char *out, size_t outsz)
{
    const tf_blob b_rec = test_blob(ar, ent->chunks[ent->tensors[t].first_chunk]), *b = &b_rec;
    ck_assert_uint_eq(b->codec, TF_CODEC_PROG);
    uint8_t *enc = malloc(b->enc_len);
    ck_assert_ptr_nonnull(enc);
    tf_error e = { 0 };
    ck_assert_msg(tf_container_pread(tf_archive_container(ar), b->offset, enc, b->enc_len, &e) == 0,
                  "%s", e.msg);
    int n = tf_prog_describe_chunk(enc, b->enc_len, b->dtype, b->raw_len, out, outsz);
    ck_assert_int_ge(n, 1);
    ck_assert_int_lt(n, (int)outsz);
    /* A damaged chunk has no text. */
    ck_assert_int_eq(tf_prog_describe_chunk(enc, b->enc_len - 1, b->dtype, b->raw_len, out, outsz),
                     -1);
    ck_assert_int_eq(tf_prog_describe_chunk(enc, b->enc_len, b->dtype, b->raw_len + 1, out, outsz),
                     -1);
    ck_assert_int_eq(tf_prog_describe_chunk(enc, 0, b->dtype, b->raw_len, out, outsz), -1);
    free(enc);
}

/* The tensors of the entry read back equal t[]. */
static void check_tensors(tf_archive *ar, const tf_entry *ent, const test_tensor *t, size_t n)
{
    tf_reader_ctx *r = tf_reader_new(ar, 8 << 20);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(ent->ntensors, n);
    for (size_t i = 0; i < n; i++) {
        uint8_t *got = malloc(t[i].len);
        ck_assert_ptr_nonnull(got);
        tf_error e = { 0 };
        uint64_t off = ent->tensors[i].file_off;
        ck_assert_msg(tf_reader_pread(r, ent, off, t[i].len, got, &e) == (ssize_t)t[i].len,
                      "%s", e.msg);
        ck_assert_msg(memcmp(got, t[i].data, t[i].len) == 0, "%s differs", t[i].name);
        free(got);
    }
    tf_reader_free(r);
}

#define MASK 512
#define POS 4096
#define CONSTS 5000
#define ROW 16
#define ROWS 512

static float mask[MASK * MASK], consts[CONSTS], rows[ROWS * ROW];
static int64_t pos[POS];

START_TEST(test_structured_tensors_are_programs)
{
    for (int i = 0; i < MASK; i++) /* torch.tril(torch.ones(512, 512)) */
        for (int j = 0; j < MASK; j++)
            mask[i * MASK + j] = j <= i ? 1.0f : 0.0f;
    for (int i = 0; i < POS; i++) /* torch.arange(4096) */
        pos[i] = i;
    for (int i = 0; i < CONSTS; i++)
        consts[i] = 0.02f;
    rng_state = 7;
    for (int j = 0; j < ROW; j++)
        rows[j] = (float)(int64_t)(rng_next() % 2001 - 1000) / 997.0f;
    for (int i = 1; i < ROWS; i++)
        memcpy(rows + i * ROW, rows, sizeof(float) * ROW);
    const test_tensor t[] = {
        { "mask", "F32", "[512,512]", mask, sizeof mask },
        { "position_ids", "I64", "[1,4096]", pos, sizeof pos },
        { "scale", "F32", "[5000]", consts, sizeof consts },
        { "rows", "F32", "[512,16]", rows, sizeof rows },
    };
    /* The file is step 1 of a run whose step 2 (other tensors) is there
     * already: not the run's newest, whose tensors are keyframes of the
     * fast codec, but a file whose tensors get the codecs' choice. */
    static const float other[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
    const test_tensor later[] = { { "other", "F32", "[4]", other, sizeof other } };
    char src[TEST_PATH_MAX], archive[TEST_PATH_MAX];
    test_write_safetensors(test_path("step-2.safetensors", src), later, 1);
    /* choosing from samples (_i 0), and with the search */
    tf_write_opts o;
    tf_write_opts_default(&o);
    o.threads = 2;
    o.search = _i == 1;
    tf_writer *w = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_open(test_path("a.traj", archive), true, CHUNK_SHIFT, &o, &w, &e) == 0,
                  "%s", e.msg);
    test_add(w, src, "step-2.safetensors");
    test_write_safetensors(test_path("model.safetensors", src), t, ARRAY_LEN(t));
    test_add(w, src, "step-1.safetensors");
    tf_writer_close(w);

    const tf_entry *ent;
    tf_archive *ar = open_entry(archive, "step-1.safetensors", &ent);
    check_tensors(ar, ent, t, ARRAY_LEN(t));
    for (size_t i = 0; i < ARRAY_LEN(t); i++) {
        unsigned codec = 0;
        uint64_t bytes = stored_bytes(ar, ent, i, &codec);
        ck_assert_msg(bytes < 200, "%s: %llu bytes", t[i].name, (unsigned long long)bytes);
        ck_assert_msg(codec == TF_CODEC_PROG, "%s: codec %u", t[i].name, codec);
    }
    /* What the programs say: the mask's rows a row up from each other, a
     * constant, and a running sum of constant steps. */
    char text[256];
    program_text(ar, ent, 0, text, sizeof text);
    ck_assert_msg(strncmp(text, "scan_xorlag(", 12) == 0, "mask: %s", text);
    program_text(ar, ent, 2, text, sizeof text);
    ck_assert_str_eq(text, "const");
    program_text(ar, ent, 1, text, sizeof text);
    ck_assert_str_eq(text, "scan_add(const)");
    program_text(ar, ent, 3, text, sizeof text);
    ck_assert_msg(strncmp(text, "repeat(", 7) == 0, "rows: %s", text);
    tf_archive_close(ar);
}
END_TEST

/* Adds step-1.safetensors and step-2.safetensors through w, in the
 * order given (first[0] first), then closes it: each one float32 tensor
 * of CONSTS elements, `name`, that fill makes for the step into
 * consts[] (left holding the step added last). */
static void add_two_steps(tf_writer *w, const char *name, void (*fill)(int step, float *v),
                          const int order[2])
{
    char src[TEST_PATH_MAX];
    for (int k = 0; k < 2; k++) {
        int step = order[k];
        fill(step, consts);
        const test_tensor t[] = { { name, "F32", "[5000]", consts, sizeof consts } };
        char dest[64];
        snprintf(dest, sizeof dest, "step-%d.safetensors", step);
        test_write_safetensors(test_path(dest, src), t, 1);
        test_add(w, src, dest);
    }
    tf_writer_close(w);
}

static const int in_order[2] = { 1, 2 }, out_of_order[2] = { 2, 1 };

static void fill_scale(int step, float *v)
{
    for (int i = 0; i < CONSTS; i++)
        v[i] = 0.5f / (float)step;
}

/* The blob of the one chunk of ent's first tensor. */
static tf_blob only_chunk(tf_archive *ar, const tf_entry *ent)
{
    return test_blob(ar, ent->chunks[ent->tensors[0].first_chunk]);
}

START_TEST(test_keyframe_chunk_gets_a_program)
{
    /* Added after step 2 (out of order), step 1 references it forwards;
     * with max_chain 0 its chunk is a keyframe although step 2's is there
     * to delta against. A constant is smallest as a program. */
    char archive[TEST_PATH_MAX];
    test_path("a.traj", archive);
    add_two_steps(test_open_writer(archive, true, CHUNK_SHIFT, 2, 0), "scale", fill_scale,
                  out_of_order);
    const tf_entry *ent;
    tf_archive *ar = open_entry(archive, "step-1.safetensors", &ent);
    tf_blob b = only_chunk(ar, ent);
    ck_assert_uint_eq(b.codec, TF_CODEC_PROG);
    ck_assert_uint_eq(b.ref, 0);
    ck_assert_uint_lt(b.enc_len, 32);
    const test_tensor t[] = { { "scale", "F32", "[5000]", consts, sizeof consts } };
    check_tensors(ar, ent, t, 1);
    tf_archive_close(ar);

}
END_TEST

/* Weights of step 1 as noise, each later step a small update of it. */
static void fill_updated_noise(int step, float *v)
{
    uint32_t x = 2024;
    for (int i = 0; i < CONSTS; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        v[i] = (float)x / 4e9f - 0.5f + (float)step * 1e-4f;
    }
}

START_TEST(test_newest_is_a_keyframe_until_the_next)
{
    /* In order, step 2 is the newest: a keyframe of the fast codec, no
     * program search (a newer checkpoint will replace it). Step 1, the
     * newest when it came, was such a keyframe too; step 2's commit
     * re-encoded it as a delta against step 2 and redirected its slot. */
    char archive[TEST_PATH_MAX];
    test_path("b.traj", archive);
    add_two_steps(test_open_writer(archive, true, CHUNK_SHIFT, 2, TF_MAX_CHAIN_DEFAULT),
                  "weight", fill_updated_noise, in_order);
    const test_tensor t[] = { { "weight", "F32", "[5000]", consts, sizeof consts } };
    const tf_entry *ent;
    tf_archive *ar = open_entry(archive, "step-2.safetensors", &ent);
    tf_blob b = only_chunk(ar, ent);
    ck_assert_uint_eq(b.ref, 0);
    ck_assert_uint_eq(b.codec, tf_codec_newest_keyframe(TF_DT_F32));
    check_tensors(ar, ent, t, 1);
    tf_archive_close(ar);

    ar = open_entry(archive, "step-1.safetensors", &ent);
    b = only_chunk(ar, ent);
    ck_assert_uint_eq(b.codec, TF_CODEC_ULP);
    ck_assert_uint_ne(b.ref, 0);
    fill_updated_noise(1, consts);
    check_tensors(ar, ent, t, 1);
    tf_archive_close(ar);
}
END_TEST

/* Noise at step 2, a constant at step 1: added out of order, step 1's
 * delta against the noise loses. */
static void fill_constant_below_noise(int step, float *v)
{
    uint32_t x = 12345;
    for (int i = 0; i < CONSTS; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        v[i] = step == 2 ? (float)x / 4e9f - 0.5f : 0.25f;
    }
}

/* The codec and the stored bytes of step 1's tensor of
 * fill_constant_below_noise, added after step 2 and written with the
 * settings given (search, all_programs). */
static unsigned stored_codec(bool search, bool all_programs, uint64_t *bytes)
{
    char archive[TEST_PATH_MAX];
    test_path(all_programs ? "all.traj" : search ? "search.traj" : "default.traj", archive);
    tf_write_opts o;
    tf_write_opts_default(&o);
    o.threads = 2;
    o.search = search;
    o.all_programs = all_programs;
    tf_writer *w = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_open(archive, true, CHUNK_SHIFT, &o, &w, &e) == 0, "%s", e.msg);
    add_two_steps(w, "exp_avg", fill_constant_below_noise, out_of_order);
    const tf_entry *ent;
    tf_archive *ar = open_entry(archive, "step-1.safetensors", &ent);
    unsigned codec = 0;
    *bytes = stored_bytes(ar, ent, 0, &codec);
    const test_tensor t[] = { { "exp_avg", "F32", "[5000]", consts, sizeof consts } };
    check_tensors(ar, ent, t, 1);
    tf_archive_close(ar);
    return codec;
}

/* A tensor whose (forward) delta loses: the search gives it no program
 * (it has a reference), so the byte-grouped codec's bytes; all_programs,
 * a program's, which is smaller; choosing from samples, a program of its
 * fields, as small. */
START_TEST(test_all_programs)
{
    uint64_t searched, with_programs, by_default;
    ck_assert_uint_eq(stored_codec(true, false, &searched), TF_CODEC_BYTEGROUP);
    ck_assert_uint_eq(stored_codec(true, true, &with_programs), TF_CODEC_PROG);
    ck_assert_uint_lt(with_programs, searched);
    ck_assert_uint_eq(stored_codec(false, false, &by_default), TF_CODEC_PROG);
    ck_assert_uint_le(by_default, with_programs);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("writer_prog");
    TCase *tc = tcase_create("writer_prog");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, test_dir_make, test_dir_remove);
    tcase_add_loop_test(tc, test_structured_tensors_are_programs, 0, 2);
    tcase_add_test(tc, test_keyframe_chunk_gets_a_program);
    tcase_add_test(tc, test_newest_is_a_keyframe_until_the_next);
    tcase_add_test(tc, test_all_programs);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
