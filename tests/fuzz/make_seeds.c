/* Seed corpora for the fuzz targets, from small valid inputs:
 *
 *   make_seeds OUT [DIR | ARCHIVE]...
 *
 * OUT/archive   tiny.traj: a three-step trajectory of hand-made
 *               safetensors (BF16, F16, F32, F64, F8, I64 tensors; ulp
 *               deltas), text files, a symlink, a removed file, stored
 *               with 2^8-element chunks (a few KB); good.traj: every
 *               *.safetensors of the DIRs that is valid and small; each
 *               ARCHIVE as it is (an archive of release 1, whose
 *               catalog has entries of the old kind)
 * OUT/catalog   every commit's catalog segment of those archives
 * OUT/commits   the commits of each archive (blob bytes and segments)
 * OUT/safetensors  the headers of the trajectory's files and of every
 *               *.safetensors of the DIRs (valid or not)
 * OUT/codec     for every codec and dtype it applies to: random
 *               weight-like elements (with infinities, NaNs, signed zeros,
 *               subnormals) encoded by the real encoder, with the fitted
 *               model and a nearby reference for ulp
 * OUT/pickle    the data.pkl records of pickle_samples.h (real torch.save
 *               files of protocols 1, 2 and 4)
 *
 * OUT/work is scratch space (build.sh removes it). Everything is
 * deterministic (fixed seed). Each encoded chunk is decoded
 * back before it is written: a seed that does not round-trip is an error. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec_input.h"
#include "pickle_samples.h"
#include "seed_values.h"
#include "common/dtype.h"
#include "format/container.h"
#include "store/writer.h"

#define CHUNK_SHIFT 8
#define GOOD_MAX_BYTES (16u << 10)
#define STEPS 3

static const char *out_dir;
static unsigned written;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, msg);
    exit(1);
}

static void write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        die(path, strerror(errno));
}

static void write_seed(const char *target, const char *name, const void *p, size_t n)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", out_dir, target);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        die(dir, strerror(errno));
    write_file(dir, name, p, n);
    written++;
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *p = f && fstat(fileno(f), &st) == 0 ? malloc((size_t)st.st_size + 1) : NULL;
    if (!p || fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        die(path, "cannot read");
    fclose(f);
    *n = (size_t)st.st_size;
    return p;
}

/* ---- codec seeds ---- */

static void check_round_trip(const tf_fuzz_codec_input *in, const uint8_t *src)
{
    uint8_t *back = malloc(in->len ? in->len : 1);
    tf_error e = { 0 };
    if (!back || in->codec->decode(in->payload, in->payload_len, &in->ctx, back, in->len, &e) < 0 ||
        memcmp(back, src, in->len) != 0)
        die(in->codec->name, e.msg[0] ? e.msg : "a seed does not decode to its source");
    free(back);
}

/* Encodes src (ref: its previous version, for a delta codec) and writes
 * the seed, when the codec applies. */
static void encode_seed(const tf_codec *codec, unsigned dtype, const uint8_t *src,
                        const uint8_t *ref, size_t len, const char *name)
{
    tf_buf model = { 0 }, enc = { 0 }, seed = { 0 };
    tf_fuzz_codec_input in = { .codec = codec, .ctx = { .dtype = dtype }, .len = len };
    if (codec->delta) {
        in.ctx.ref = ref;
        in.ctx.ref_len = len;
    }
    /* A codec refuses what it does not apply to (a dtype, no reference). */
    bool applies = !codec->fit || codec->fit(src, len, &in.ctx, &model, NULL) == 0;
    in.ctx.model = model.data;
    in.ctx.model_len = model.len;
    if (applies && codec->encode(src, len, &in.ctx, &enc, NULL) == 0) {
        in.payload = enc.data;
        in.payload_len = enc.len;
        check_round_trip(&in, src);
        if (tf_fuzz_codec_pack(&in, &seed) < 0)
            die(codec->name, "seed too large");
        write_seed("codec", name, seed.data, seed.len);
    }
    tf_buf_free(&model);
    tf_buf_free(&enc);
    tf_buf_free(&seed);
}

static void codec_seed(const tf_codec *codec, unsigned dtype, size_t n)
{
    const tf_dtype_info *dt = tf_dtype_get(dtype);
    size_t len = n * dt->size;
    double *v = weights(n);
    uint8_t *ref = malloc(len), *src = malloc(len);
    if (!ref || !src)
        die("codec seed", "out of memory");
    put_elements(ref, dtype, v, n, true);
    train_step(v, n);
    put_elements(src, dtype, v, n, true);
    char name[64];
    snprintf(name, sizeof name, "%s-%s-%zu", codec->name, dt->name, n);
    encode_seed(codec, dtype, src, ref, len, name);
    free(ref);
    free(src);
    free(v);
}

/* Causal masks, rows x rows, element (r, c) `on` where c <= r and `off`
 * above: what lagged scans are for. */
static void mask_seed(const tf_codec *codec, unsigned dtype, unsigned rows, uint64_t on,
                      uint64_t off)
{
    const size_t size = tf_dtype_get(dtype)->size, len = (size_t)rows * rows * size;
    uint8_t *src = malloc(len);
    if (!src)
        die("mask seed", "out of memory");
    for (size_t i = 0; i < (size_t)rows * rows; i++)
        for (size_t k = 0; k < size; k++)
            src[i * size + k] = (uint8_t)((i % rows <= i / rows ? on : off) >> (8 * k));
    char name[64];
    snprintf(name, sizeof name, "%s-mask-%s-%u", codec->name, tf_dtype_get(dtype)->name, rows);
    encode_seed(codec, dtype, src, src, len, name);
    free(src);
}

static void codec_seeds(void)
{
    const tf_codec *codecs[TF_FUZZ_CODECS_MAX];
    size_t ncodecs = tf_fuzz_codecs(codecs);
    for (size_t c = 0; c < ncodecs; c++)
        for (unsigned dtype = 0; dtype < TF_DT_COUNT; dtype++) {
            codec_seed(codecs[c], dtype, 97);
            /* Chunks of 2048 elements and more code 16 rANS lanes (ulp). */
            if (tf_dtype_get(dtype)->size <= 2)
                codec_seed(codecs[c], dtype, 2053);
            /* From 2^15 elements, two streams (ulp). */
            if (dtype == TF_DT_BF16)
                codec_seed(codecs[c], dtype, 32773);
        }
    for (size_t c = 0; c < ncodecs; c++) {
        mask_seed(codecs[c], TF_DT_U8, 45, 1, 0);
        mask_seed(codecs[c], TF_DT_F32, 37, 0, 0xff800000); /* 0 / -inf */
    }
}

/* ---- safetensors files and header seeds ---- */

static const struct {
    const char *name;
    unsigned dtype, ndim;
    uint64_t shape[2];
} tensors[] = {
    { "emb.weight", TF_DT_BF16, 2, { 24, 16 } },
    { "layer.w", TF_DT_F32, 1, { 300 } },
    { "layer.b", TF_DT_F16, 1, { 64 } },
    { "q8", TF_DT_F8_E4M3, 2, { 8, 40 } },
    { "scale", TF_DT_F64, 1, { 3 } },
    { "step_ids", TF_DT_I64, 1, { 5 } },
};
#define NTENSORS (sizeof tensors / sizeof tensors[0])

static size_t nelem_of(size_t t)
{
    return tensors[t].ndim == 2 ? tensors[t].shape[0] * tensors[t].shape[1] : tensors[t].shape[0];
}

/* A safetensors file of the tensors with values v[t], padded like the
 * reference writer. */
static void write_checkpoint(const char *path, double *const v[NTENSORS], int step)
{
    tf_buf json = { 0 }, data = { 0 };
    char s[256];
    snprintf(s, sizeof s, "{\"__metadata__\":{\"step\":\"%d\"}", step);
    int rc = tf_buf_put(&json, s, strlen(s));
    for (size_t t = 0; t < NTENSORS; t++) {
        size_t n = nelem_of(t), len = n * tf_dtype_get(tensors[t].dtype)->size;
        uint8_t *p = tf_buf_reserve(&data, len);
        if (!p)
            die(path, "out of memory");
        put_elements(p, tensors[t].dtype, v[t], n, false);
        tf_buf_commit(&data, len);
        int k = snprintf(s, sizeof s, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu", tensors[t].name,
                         tf_dtype_get(tensors[t].dtype)->name, (unsigned long long)tensors[t].shape[0]);
        if (tensors[t].ndim == 2)
            k += snprintf(s + k, sizeof s - (size_t)k, ",%llu", (unsigned long long)tensors[t].shape[1]);
        snprintf(s + k, sizeof s - (size_t)k, "],\"data_offsets\":[%zu,%zu]}", data.len - len, data.len);
        rc |= tf_buf_put(&json, s, strlen(s));
    }
    rc |= tf_buf_u8(&json, '}');
    while (json.len % 8)
        rc |= tf_buf_u8(&json, ' ');
    FILE *f = fopen(path, "wb");
    uint8_t prefix[8];
    tf_le64_put(prefix, json.len);
    if (rc || !f || fwrite(prefix, 1, 8, f) != 8 || fwrite(json.data, 1, json.len, f) != json.len ||
        fwrite(data.data, 1, data.len, f) != data.len || fclose(f) != 0)
        die(path, "cannot write");
    tf_buf_free(&json);
    tf_buf_free(&data);
}

/* The header seed of a safetensors file: u64 data length | header. */
static void header_seed(const char *path, const char *name)
{
    size_t n;
    uint8_t *p = read_file(path, &n);
    if (n >= 8) {
        uint64_t declared = tf_le64_get(p);
        size_t json_len = declared < n - 8 ? (size_t)declared : n - 8;
        tf_le64_put(p, n - 8 - json_len); /* the prefix becomes the data length */
        write_seed("safetensors", name, p, 8 + json_len);
    }
    free(p);
}

/* ---- archives and catalog seeds ---- */

static tf_writer *open_writer(const char *path)
{
    tf_write_opts opts;
    tf_write_opts_default(&opts);
    opts.threads = 1;
    tf_writer *w;
    tf_error e = { 0 };
    unlink(path);
    if (tf_writer_open(path, true, CHUNK_SHIFT, &opts, &w, &e) < 0)
        die(path, e.msg);
    return w;
}

static void add(tf_writer *w, const char *src, const char *dest)
{
    tf_error e = { 0 };
    if (tf_writer_add(w, src, dest, NULL, &e) < 0)
        die(src, e.msg);
}

static void text_file(const char *path, size_t n)
{
    char *p = malloc(n);
    if (!p)
        die(path, "out of memory");
    for (size_t i = 0; i < n; i++)
        p[i] = i % 61 == 60 ? '\n' : "{\"vocab\": 32, \"lr\": 3e-4, "[i % 27];
    write_file(".", path, p, n);
    free(p);
}

/* A three-step trajectory and the usual companions, in dir. */
static void tiny_archive(const char *dir, const char *archive)
{
    char path[4096], dest[64];
    if (chdir(dir) < 0 || mkdir("run", 0755) < 0 || symlink("step-3.safetensors", "latest") < 0)
        die(dir, strerror(errno));
    text_file("config.json", 200);
    text_file("notes.txt", 600); /* three chunks */
    tf_writer *w = open_writer(archive);
    add(w, "config.json", "config.json");
    add(w, "run", "run");
    double *v[NTENSORS];
    for (size_t t = 0; t < NTENSORS; t++)
        v[t] = weights(nelem_of(t));
    for (int step = 1; step <= STEPS; step++) {
        snprintf(path, sizeof path, "step-%d.safetensors", step);
        write_checkpoint(path, v, step);
        header_seed(path, path);
        snprintf(dest, sizeof dest, "run/%s", path);
        add(w, path, dest);
        for (size_t t = 0; t < NTENSORS; t++)
            train_step(v[t], nelem_of(t));
    }
    add(w, "latest", "run/latest");
    add(w, "notes.txt", "notes.txt");
    add(w, "config.json", "scratch.json");
    tf_error e = { 0 };
    if (tf_writer_remove(w, "scratch.json", &e) < 0)
        die("remove", e.msg);
    /* A middle step removed: the commit of its tombstone, then a rebase
     * of step 1 against step 3 (a segment of version 3, step 1's slots
     * redirected a second time). */
    if (tf_writer_remove(w, "run/step-2.safetensors", &e) < 0)
        die("remove", e.msg);
    tf_writer_close(w);
    for (size_t t = 0; t < NTENSORS; t++)
        free(v[t]);
}

/* Every *.safetensors of dir becomes a header seed; the valid small ones
 * go into the archive w as well. */
static void add_directory(tf_writer *w, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        die(dir, strerror(errno));
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len < 12 || strcmp(de->d_name + len - 12, ".safetensors") != 0)
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        header_seed(path, de->d_name);
        tf_error e = { 0 };
        if (stat(path, &st) == 0 && st.st_size <= GOOD_MAX_BYTES)
            (void)tf_writer_add(w, path, de->d_name, NULL, &e); /* invalid ones fail */
    }
    closedir(d);
}

/* The trailers of an archive, oldest first; *n of them. */
static tf_trailer *trailers(const tf_container *c, const char *archive, uint64_t *n)
{
    *n = c->has_commit ? c->last.seq : 0;
    tf_trailer *t = calloc(*n ? *n : 1, sizeof *t);
    tf_error e = { 0 };
    uint64_t off = c->has_commit ? c->end - TF_TRAILER_SIZE : 0;
    for (uint64_t k = *n; t && k-- > 0; off = t[k].prev)
        if (tf_container_read_trailer(c, off, &t[k], &e) < 0)
            die(archive, e.msg);
    if (!t)
        die(archive, "out of memory");
    return t;
}

static void put_u32_bytes(tf_buf *b, const void *p, size_t n)
{
    if (n > UINT32_MAX || tf_buf_u32(b, (uint32_t)n) < 0 || tf_buf_put(b, p, n) < 0)
        die("seed", "out of memory");
}

/* Every commit's catalog (u8 chunk shift - 8 | u16 first blob | segment)
 * for fuzz_catalog, and all commits as fuzz_commits reads them (u8 chunk
 * shift - 8, then per commit: u32 n | the n bytes of blobs before its
 * catalog | u32 m | its segment). */
static void commit_seeds(const char *archive, const char *name)
{
    tf_container c;
    tf_error e = { 0 };
    if (tf_container_open(&c, archive, NULL, &e) < 0)
        die(archive, e.msg);
    uint64_t n, start = TF_SUPERBLOCK_SIZE, first_blob = 0;
    tf_trailer *t = trailers(&c, archive, &n);
    uint8_t shift = (uint8_t)(c.chunk_shift - TF_CHUNK_SHIFT_MIN);
    tf_buf seg = { 0 }, blobs = { 0 }, one = { 0 }, all = { 0 };
    if (tf_buf_u8(&all, shift) < 0)
        die(archive, "out of memory");
    for (uint64_t k = 0; k < n; k++) {
        size_t len = (size_t)(t[k].catalog_off - start);
        blobs.len = 0;
        uint8_t *p = tf_buf_reserve(&blobs, len);
        if (!p || tf_container_pread(&c, start, p, len, &e) < 0 ||
            tf_container_read_catalog(&c, &t[k], &seg, &e) < 0)
            die(archive, e.msg);
        put_u32_bytes(&all, p, len);
        put_u32_bytes(&all, seg.data, seg.len);
        uint8_t head[3] = { shift, (uint8_t)first_blob, (uint8_t)(first_blob >> 8) };
        one.len = 0;
        if (first_blob > UINT16_MAX || tf_buf_put(&one, head, 3) < 0 ||
            tf_buf_put(&one, seg.data, seg.len) < 0)
            die(archive, "catalog seed");
        char sname[64];
        snprintf(sname, sizeof sname, "%s-%llu", name, (unsigned long long)t[k].seq);
        write_seed("catalog", sname, one.data, one.len);
        start = t[k].catalog_off + t[k].catalog_len + TF_TRAILER_SIZE;
        first_blob = t[k].nblobs;
    }
    write_seed("commits", name, all.data, all.len);
    tf_buf_free(&seg);
    tf_buf_free(&blobs);
    tf_buf_free(&one);
    tf_buf_free(&all);
    free(t);
    tf_container_close(&c);
}

static void archive_seed(const char *archive, const char *name)
{
    size_t n;
    uint8_t *p = read_file(archive, &n);
    write_seed("archive", name, p, n);
    free(p);
    commit_seeds(archive, name);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: make_seeds OUT [DIR...]\n");
        return 2;
    }
    char *cwd = getcwd(NULL, 0), work[4096], archive[4200];
    out_dir = realpath(argv[1], NULL);
    if (!cwd || !out_dir)
        die(argv[1], strerror(errno));
    codec_seeds();
    for (size_t i = 0; i < N_PICKLE_SAMPLES; i++)
        write_seed("pickle", pickle_samples[i].name, pickle_samples[i].data, pickle_samples[i].len);

    snprintf(work, sizeof work, "%s/work", out_dir);
    snprintf(archive, sizeof archive, "%s/good.traj", work);
    if (mkdir(work, 0755) < 0)
        die(work, strerror(errno));
    tf_writer *w = open_writer(archive);
    for (int i = 2; i < argc; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", argv[i][0] == '/' ? "" : cwd, argv[i]);
        if (stat(path, &st) < 0)
            die(path, strerror(errno));
        if (S_ISDIR(st.st_mode))
            add_directory(w, path);
        else
            archive_seed(path, strrchr(path, '/') + 1);
    }
    tf_writer_close(w);
    archive_seed(archive, "good.traj");
    snprintf(archive, sizeof archive, "%s/tiny.traj", work);
    tiny_archive(work, archive);
    archive_seed(archive, "tiny.traj");
    printf("make_seeds: %u seeds in %s\n", written, out_dir);
    free(cwd);
    free((char *)out_dir);
    return 0;
}
