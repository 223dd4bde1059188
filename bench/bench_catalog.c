/* bench_catalog: how long opening and listing a long trajectory takes.
 *
 * Builds a synthetic archive of CHECKPOINTS checkpoints of TENSORS tensors
 * each (catalog only), one commit per checkpoint, then times opening it
 * and walking every entry (what `trajpack list` does before printing),
 * best of 3.
 *
 * The catalog is realistic: each checkpoint is run/step-N/model.safetensors
 * with a real safetensors header (names, dtypes, shapes, data offsets) and
 * one blob per 2^20-element chunk of every tensor, with its own content id.
 * The tensor blobs' payloads are not: every chunk of one size points at a
 * single shared payload (a real bytegroup encoding of zeros of that size),
 * so the archive holds the catalog and almost nothing else. Their ids are
 * synthetic (unique per chunk, not the hash of the zeros), so `trajpack
 * verify` would complain, and so would a read of tensor bytes; open, list,
 * stat and the header bytes (the first chunk of every file, one real blob
 * that all checkpoints share, as equal headers do) read right.
 *
 * Usage: bench_catalog [--keep] DIR [CHECKPOINTS] [TENSORS]
 * The archive is written to DIR/bench_catalog.trajfs and removed at the
 * end, or, with --keep, left there (bench/bench_catalog.sh times the
 * commands a user runs on it). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/codec.h"
#include "common/clock.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/hash.h"
#include "format/catalog.h"
#include "format/container.h"
#include "common/dtype.h"
#include "format/tensor_format.h"
#include "store/archive.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define CHUNK_SHIFT TF_CHUNK_SHIFT_DEFAULT
#define STEP_EVERY 100 /* checkpoint k is run/step-(k+1)*100 */

/* One decoder layer of a small Llama-style model; tensor i of a
 * checkpoint is layer_tensors[i % 10] of layer i / 10. */
static const struct {
    const char *suffix;
    uint8_t dtype;
    uint64_t rows, cols; /* cols 0: a vector */
} layer_tensors[] = {
    { "self_attn.q_proj.weight", TF_DT_BF16, 2048, 2048 },
    { "self_attn.k_proj.weight", TF_DT_BF16, 256, 2048 },
    { "self_attn.v_proj.weight", TF_DT_BF16, 256, 2048 },
    { "self_attn.o_proj.weight", TF_DT_BF16, 2048, 2048 },
    { "mlp.gate_proj.weight", TF_DT_BF16, 5632, 2048 },
    { "mlp.up_proj.weight", TF_DT_BF16, 5632, 2048 },
    { "mlp.down_proj.weight", TF_DT_BF16, 2048, 5632 },
    { "input_layernorm.weight", TF_DT_F32, 2048, 0 },
    { "post_attention_layernorm.weight", TF_DT_F32, 2048, 0 },
    { "self_attn.rotary_emb.inv_freq", TF_DT_F32, 32, 0 },
};

static void die(const char *what, const tf_error *e)
{
    fprintf(stderr, "bench_catalog: %s: %s\n", what, e ? e->msg : strerror(errno));
    exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        die("out of memory", NULL);
    return p;
}

/* ---- the model: tensors, header, chunks ---------------------------------- */

/* A safetensors file as a tensor-file entry: the header (its length and
 * JSON) one verbatim piece, stored in the first chunk, then the tensors. */
typedef struct {
    size_t ntensors;
    tf_tensor_span *spans; /* dtype, nbytes and name */
    tf_piece *pieces;      /* ntensors + 1 */
    tf_buf names;
    uint64_t nchunks;      /* per checkpoint, the header's included */
    uint8_t *header;       /* verbatim JSON, padded to 8 bytes */
    size_t header_len;
    uint64_t data_len;
} model;

static uint64_t tensor_elems(size_t i)
{
    size_t k = i % ARRAY_LEN(layer_tensors);
    return layer_tensors[k].rows * (layer_tensors[k].cols ? layer_tensors[k].cols : 1);
}

static void put_str(tf_buf *b, const char *s)
{
    if (tf_buf_put(b, s, strlen(s)) < 0)
        die("out of memory", NULL);
}

static model make_model(size_t ntensors)
{
    model m = { .ntensors = ntensors, .nchunks = 1 };
    m.spans = xcalloc(ntensors, sizeof *m.spans);
    m.pieces = xcalloc(ntensors + 1, sizeof *m.pieces);
    tf_buf h = { 0 };
    put_str(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < ntensors; i++) {
        size_t k = i % ARRAY_LEN(layer_tensors);
        const tf_dtype_info *info = tf_dtype_get(layer_tensors[k].dtype);
        tf_tensor_span *ts = &m.spans[i];
        ts->dtype = layer_tensors[k].dtype;
        ts->nbytes = tensor_elems(i) * info->size;
        ts->name_off = m.names.len;
        m.pieces[i + 1] = (tf_piece){ .len = ts->nbytes, .tensor = i };
        char entry[256], shape[64], name[96];
        if (layer_tensors[k].cols)
            snprintf(shape, sizeof shape, "%" PRIu64 ",%" PRIu64, layer_tensors[k].rows,
                     layer_tensors[k].cols);
        else
            snprintf(shape, sizeof shape, "%" PRIu64, layer_tensors[k].rows);
        snprintf(name, sizeof name, "model.layers.%zu.%s", i / ARRAY_LEN(layer_tensors),
                 layer_tensors[k].suffix);
        snprintf(entry, sizeof entry,
                 ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],"
                 "\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                 name, info->name, shape, m.data_len, m.data_len + ts->nbytes);
        put_str(&h, entry);
        if (tf_buf_put(&m.names, name, strlen(name) + 1) < 0)
            die("out of memory", NULL);
        m.data_len += ts->nbytes;
        m.nchunks += tf_chunk_count(ts->nbytes, info->size, CHUNK_SHIFT);
    }
    put_str(&h, "}");
    while (h.len % 8)
        put_str(&h, " ");
    m.header = h.data;
    m.header_len = h.len;
    m.pieces[0] = (tf_piece){ .len = 8 + h.len, .tensor = TF_PIECE_VERBATIM };
    return m;
}

static void free_model(model *m)
{
    free(m->spans);
    free(m->pieces);
    tf_buf_free(&m->names);
    free(m->header);
}

/* ---- shared payloads: one real encoding per distinct chunk shape --------- */

typedef struct {
    uint8_t dtype, codec;
    uint64_t raw_len;
    uint64_t offset, enc_len, enc_hash;
} payload;

typedef struct {
    payload items[64];
    size_t n;
} payload_set;

/* Payload bytes appended so far (the rest of the archive is catalog). */
static uint64_t payload_bytes;

static const payload *payload_for(payload_set *ps, tf_container *c, uint8_t dtype, uint64_t raw_len)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->items[i].dtype == dtype && ps->items[i].raw_len == raw_len)
            return &ps->items[i];
    if (ps->n == ARRAY_LEN(ps->items))
        die("too many distinct chunk shapes", NULL);
    uint8_t *zeros = xcalloc(raw_len, 1);
    tf_buf enc = { 0 };
    tf_error e = { 0 };
    tf_codec_ctx ctx = { .dtype = dtype };
    uint8_t codec = dtype == TF_DT_NONE ? TF_CODEC_ZSTD : TF_CODEC_BYTEGROUP;
    if (tf_codec_get(codec)->encode(zeros, raw_len, &ctx, &enc, &e) < 0)
        die("encode payload", &e);
    payload *p = &ps->items[ps->n++];
    *p = (payload){ .dtype = dtype, .codec = codec, .raw_len = raw_len, .enc_len = enc.len,
                    .enc_hash = tf_hash64(enc.data, enc.len) };
    if (tf_container_append(c, enc.data, enc.len, &p->offset, &e) < 0)
        die("append payload", &e);
    payload_bytes += enc.len;
    tf_buf_free(&enc);
    free(zeros);
    return p;
}

/* ---- building the archive ------------------------------------------------ */

typedef struct {
    uint64_t archive_bytes, payload_bytes, blobs, commits;
    double seconds;
} build_stats;

/* The header blob: the file's first bytes (the header's length, then the
 * header), stored for real, so that reads of them check out. */
static tf_blob header_blob(const model *m, tf_container *c)
{
    uint64_t raw_len = 8 + m->header_len;
    uint8_t *raw = xcalloc(raw_len, 1);
    for (int i = 0; i < 8; i++)
        raw[i] = (uint8_t)(m->header_len >> (8 * i));
    memcpy(raw + 8, m->header, m->header_len);
    tf_buf enc = { 0 };
    tf_error e = { 0 };
    tf_codec_ctx ctx = { .dtype = TF_DT_NONE };
    if (tf_codec_get(TF_CODEC_ZSTD)->encode(raw, raw_len, &ctx, &enc, &e) < 0)
        die("encode header", &e);
    tf_blob b = { .id = tf_blob_id_of(raw, raw_len), .enc_len = enc.len, .raw_len = raw_len,
                  .enc_hash = tf_hash64(enc.data, enc.len), .codec = TF_CODEC_ZSTD,
                  .dtype = TF_DT_NONE };
    if (tf_container_append(c, enc.data, enc.len, &b.offset, &e) < 0)
        die("append header", &e);
    payload_bytes += enc.len;
    tf_buf_free(&enc);
    free(raw);
    return b;
}

/* The blobs of one checkpoint's tensor chunks, in chunk order. */
static void fill_blobs(const model *m, size_t ckpt, payload_set *ps, tf_container *c,
                       tf_blob *blobs)
{
    uint64_t b = 0;
    for (size_t t = 0; t < m->ntensors; t++) {
        const tf_tensor_span *ts = &m->spans[t];
        uint64_t chunk_bytes = (uint64_t)tf_dtype_get(ts->dtype)->size << CHUNK_SHIFT;
        for (uint64_t left = ts->nbytes, k = 0; left; k++, b++) {
            uint64_t raw_len = left < chunk_bytes ? left : chunk_bytes;
            const payload *p = payload_for(ps, c, ts->dtype, raw_len);
            uint64_t who[3] = { ckpt, t, k };
            blobs[b] = (tf_blob){ .id = tf_blob_id_of(who, sizeof who), .offset = p->offset,
                                  .enc_len = p->enc_len, .raw_len = raw_len,
                                  .enc_hash = p->enc_hash, .codec = TF_CODEC_BYTEGROUP,
                                  .dtype = ts->dtype };
            left -= raw_len;
        }
    }
}

/* The segment's own copy of s, which an apply takes. */
static tf_segment owned_copy(const tf_segment *s)
{
    tf_segment o = *s;
    tf_error e = { 0 };
    o.blobs = xcalloc(s->nblobs, sizeof *o.blobs);
    memcpy(o.blobs, s->blobs, s->nblobs * sizeof *o.blobs);
    o.entries = xcalloc(s->nentries, sizeof *o.entries);
    for (uint64_t i = 0; i < s->nentries; i++) {
        tf_entry *ent = &o.entries[i];
        uint64_t nchunks;
        if (tf_entry_clone(&s->entries[i], NULL, ent, &e) < 0)
            die("copy an entry", &e);
        /* where its pieces lie, as a decoded entry has it */
        if (ent->kind == TF_ENTRY_TENSORS && tf_entry_layout(ent, CHUNK_SHIFT, &nchunks, &e) < 0)
            die("lay out an entry", &e);
    }
    return o;
}

/* Builds the archive through the archive's own commit path, in format
 * version `version`, one commit a checkpoint. */
static build_stats build_archive(const char *path, size_t checkpoints, const model *m,
                                 unsigned version)
{
    build_stats st = { 0 };
    double t0 = tf_monotonic_seconds();
    tf_error e = { 0 };
    tf_archive *ar;
    if (tf_container_create(path, NULL, CHUNK_SHIFT, version, &e) < 0 ||
        tf_archive_open(path, &(tf_open_opts){ .writable = true }, &ar, &e) < 0)
        die("create", &e);
    tf_container *c = tf_archive_container(ar);
    payload_set ps = { .n = 0 };
    tf_blob *blobs = xcalloc(m->nchunks, sizeof *blobs);
    uint64_t *chunks = xcalloc(m->nchunks, sizeof *chunks);
    char dir[64], file[96];
    tf_entry entries[3];
    uint64_t ino = 2;
    for (size_t k = 0; k < checkpoints; k++) {
        /* The first commit adds the header blob (global index 0), which
         * every file's first chunk names; then each its tensor chunks. */
        uint64_t nblobs = 0;
        if (k == 0)
            blobs[nblobs++] = header_blob(m, c);
        fill_blobs(m, k, &ps, c, blobs + nblobs);
        chunks[0] = 0;
        for (uint64_t i = 1; i < m->nchunks; i++)
            chunks[i] = st.blobs + nblobs + i - 1;
        nblobs += m->nchunks - 1;
        snprintf(dir, sizeof dir, "run/step-%zu", (k + 1) * STEP_EVERY);
        snprintf(file, sizeof file, "%s/model.safetensors", dir);
        int64_t mtime = 1700000000 + (int64_t)k * 600;
        size_t n = 0;
        if (k == 0)
            entries[n++] = (tf_entry){ .kind = TF_ENTRY_DIR, .ino = ino++, .path = "run",
                                       .mode = 0755, .mtime_sec = mtime };
        entries[n++] = (tf_entry){ .kind = TF_ENTRY_DIR, .ino = ino++, .path = dir,
                                   .mode = 0755, .mtime_sec = mtime };
        entries[n++] = (tf_entry){ .kind = TF_ENTRY_TENSORS, .ino = ino++, .path = file,
                                   .mode = 0644, .mtime_sec = mtime, .mtime_nsec = 123456789,
                                   .size = 8 + m->header_len + m->data_len,
                                   .format = TF_FORMAT_SAFETENSORS,
                                   .npieces = m->ntensors + 1, .pieces = m->pieces,
                                   .ntensors = m->ntensors, .tensors = m->spans,
                                   .names = (char *)m->names.data, .names_len = m->names.len,
                                   .nchunks = m->nchunks, .chunks = chunks };
        tf_segment s = { .first_blob = st.blobs, .nblobs = nblobs, .blobs = blobs,
                         .nentries = n, .entries = entries };
        if (tf_archive_write(ar, &s, TF_COMMIT_DURABLE, NULL, &e) < 0)
            die("commit", &e);
        tf_segment owned = owned_copy(&s); /* with the bodies' pages the write set */
        if (tf_archive_apply(ar, &owned, &e) < 0)
            die("apply", &e);
        st.blobs += nblobs;
        st.commits++;
    }
    st.archive_bytes = c->end;
    st.payload_bytes = payload_bytes;
    tf_archive_close(ar);
    free(chunks);
    free(blobs);
    st.seconds = tf_monotonic_seconds() - t0;
    return st;
}

/* ---- open + list --------------------------------------------------------- */

typedef struct {
    double open_s, list_s;
    size_t entries;
    uint64_t listed_bytes; /* what the listing would print, so it is not optimized out */
} open_list_time;

static open_list_time open_and_list(const char *path)
{
    open_list_time r = { 0 };
    tf_error e = { 0 };
    tf_archive *ar;
    double t0 = tf_monotonic_seconds();
    if (tf_archive_open(path, &(tf_open_opts){ .lazy_bodies = true }, &ar, &e) < 0)
        die("open", &e);
    double t1 = tf_monotonic_seconds();
    char line[TF_PATH_MAX + 64];
    r.entries = tf_archive_nentries(ar);
    for (size_t i = 0; i < r.entries; i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        int n = snprintf(line, sizeof line, "%o %12" PRIu64 " %s%s", (unsigned)ent->mode,
                         ent->size, ent->path, ent->kind == TF_ENTRY_DIR ? "/" : "");
        r.listed_bytes += (uint64_t)(n > 0 ? n : 0);
    }
    double t2 = tf_monotonic_seconds();
    tf_archive_close(ar);
    r.open_s = t1 - t0;
    r.list_s = t2 - t1;
    return r;
}

static size_t parse_count(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v == 0 || v > 1000000) {
        fprintf(stderr, "bench_catalog: bad %s \"%s\"\n", what, s);
        exit(2);
    }
    return (size_t)v;
}

int main(int argc, char **argv)
{
    bool keep = false;
    unsigned version = TF_FORMAT_DEFAULT;
    for (; argc > 1 && argv[1][0] == '-'; argc--, argv++) {
        if (strcmp(argv[1], "--keep") == 0)
            keep = true;
        else if (strcmp(argv[1], "--format-version=1") == 0)
            version = TF_FORMAT_SEGMENTS;
        else if (strcmp(argv[1], "--format-version=2") != 0)
            break;
    }
    if (argc < 2 || argc > 4 || argv[1][0] == '-') {
        fprintf(stderr, "Usage: bench_catalog [--keep] [--format-version=N] DIR [CHECKPOINTS] "
                        "[TENSORS]\n"
                        "Times opening and listing a synthetic archive of CHECKPOINTS\n"
                        "(default 1000) checkpoints of TENSORS (default 300) tensors,\n"
                        "DIR/bench_catalog.trajfs, in format N (default 2); --keep leaves it\n"
                        "there.\n");
        return 2;
    }
    size_t checkpoints = argc > 2 ? parse_count(argv[2], "CHECKPOINTS") : 1000;
    size_t tensors = argc > 3 ? parse_count(argv[3], "TENSORS") : 300;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/bench_catalog.trajfs", argv[1]) >= sizeof path) {
        fprintf(stderr, "bench_catalog: directory name too long\n");
        return 2;
    }
    if (unlink(path) < 0 && errno != ENOENT)
        die(path, NULL);

    model m = make_model(tensors);
    printf("synthetic trajectory: %zu checkpoints x %zu tensors, %" PRIu64
           " chunks each, header %zu bytes, %.1f MiB of tensor data per checkpoint\n",
           checkpoints, tensors, m.nchunks, m.header_len, (double)m.data_len / (1 << 20));
    build_stats st = build_archive(path, checkpoints, &m, version);
    printf("built in %.2f s, format %u: %" PRIu64 " commits, %" PRIu64 " blobs\n", st.seconds,
           version, st.commits, st.blobs);
    printf("archive size     %12" PRIu64 " bytes (%.1f MiB)\n", st.archive_bytes,
           (double)st.archive_bytes / (1 << 20));
    uint64_t catalog = st.archive_bytes - st.payload_bytes;
    printf("catalog stored   %12" PRIu64 " bytes (%.1f MiB, %.1f bytes per blob; pages that\n"
           "                 later commits replaced included)\n",
           catalog, (double)catalog / (1 << 20), (double)catalog / (double)st.blobs);

    open_list_time best = { .open_s = 1e30 };
    for (int run = 0; run < 3; run++) {
        open_list_time r = open_and_list(path);
        if (r.open_s + r.list_s < best.open_s + best.list_s)
            best = r;
    }
    double total = best.open_s + best.list_s;
    printf("open + list (best of 3): %.3f s total (open %.3f s, list %.3f s) for %zu entries\n",
           total, best.open_s, best.list_s, best.entries);
    printf("per checkpoint: %.1f us\n", total / (double)checkpoints * 1e6);
    free_model(&m);
    if (!keep && unlink(path) < 0)
        die(path, NULL);
    return 0;
}
