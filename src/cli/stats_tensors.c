/* trajpack stats --tensors: how each tensor is stored, what its deltas
 * point to, its program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/stats.h"
#include "store/blob_stats.h"
#include "store/catalog_query.h"

/* Program texts longer than this are cut (a program has at most
 * TF_PROG_MAX_NODES nodes, each a short name). */
#define PROGRAM_TEXT_LEN 4096

/* What the per-tensor lines need of the archive. */
typedef struct {
    tf_archive *ar;
    tf_blob_user *users; /* which tensor stored each blob */
    tf_buf payload;      /* a prog chunk's stored bytes */
} tensors_ctx;

/* How one tensor is stored. */
typedef struct {
    uint64_t stored;              /* bytes of its chunk blobs and their models */
    uint64_t chunks[CODEC_SLOTS]; /* chunks per codec */
    uint64_t first_prog;          /* blob + 1 of its first prog chunk, or 0 */
    uint64_t first_ref;           /* the ref (blob + 1) of its first delta chunk, or 0 */
    uint64_t first_ref_at;        /* that chunk's number in the tensor */
} tensor_cost;

/* The cost of tensor t of ent; false (after a message) when a blob's
 * record cannot be read. */
static bool cost_tensor(const tf_archive *ar, const tf_entry *ent, uint64_t t, tensor_cost *tc)
{
    const tf_tensor_span *ts = &ent->tensors[t];
    uint64_t n = tf_tensor_nchunks(ar, ent, t);
    uint64_t model = 0; /* the chunks of a tensor share one model: count it once */
    *tc = (tensor_cost){ 0 };
    for (uint64_t k = 0; k < n; k++) {
        uint64_t b = ent->chunks[ts->first_chunk + k];
        tf_blob blob, shared;
        tf_error e;
        if (tf_archive_blob(ar, b, &blob, &e) < 0 ||
            (blob.model && blob.model != model &&
             tf_archive_blob(ar, blob.model - 1, &shared, &e) < 0)) {
            cli_error("%s: %s: %s", ent->path, tf_tensor_name(ent, t), e.msg);
            return false;
        }
        tc->stored += blob.enc_len;
        if (blob.model && blob.model != model) {
            model = blob.model;
            tc->stored += shared.enc_len;
        }
        tc->chunks[blob.codec < TF_CODEC_COUNT ? blob.codec : TF_CODEC_COUNT]++;
        if (blob.codec == TF_CODEC_PROG && !tc->first_prog)
            tc->first_prog = b + 1;
        if (blob.ref && !tc->first_ref) {
            tc->first_ref = blob.ref;
            tc->first_ref_at = k;
        }
    }
    return true;
}

/* What a tensor's deltas point to. */
typedef struct {
    uint64_t blob;        /* the reference blob + 1 of its first delta chunk; 0: none */
    const tf_entry *ent;  /* the file whose tensor stored that blob first; NULL: none now */
    const char *tensor;   /* that tensor's name ("?" when it cannot be read) */
} tensor_ref;

/* Whether chunk k of tensor t of ent is blob b. */
static bool has_chunk(const tf_archive *ar, const tf_entry *ent, uint64_t t, uint64_t k,
                      uint64_t b)
{
    return t < ent->ntensors && k < tf_tensor_nchunks(ar, ent, t) &&
           ent->chunks[ent->tensors[t].first_chunk + k] == b;
}

/* The reference of tensor t with cost tc. A blob that several tensors of
 * the file that stored it share (tied weights) is named by the tensor in
 * the same place as t when that one holds it, so that a checkpoint's
 * tensors read as deltas against the same tensors of an earlier one. */
static tensor_ref find_reference(tensors_ctx *cx, uint64_t t, const tensor_cost *tc)
{
    tensor_ref ref = { .blob = tc->first_ref };
    if (!tc->first_ref)
        return ref;
    uint64_t b = tc->first_ref - 1;
    if (b >= tf_archive_nblobs(cx->ar) || !cx->users[b].entry)
        return ref;
    ref.ent = tf_archive_entry(cx->ar, cx->users[b].entry - 1);
    uint64_t rt = has_chunk(cx->ar, ref.ent, t, tc->first_ref_at, b) ? t : cx->users[b].tensor;
    ref.tensor = tf_tensor_name(ref.ent, rt);
    return ref;
}

/* The text of the program of the tensor's first prog chunk, or "-"; false
 * (after a message) when that chunk cannot be read or parsed. */
static bool describe_program(tensors_ctx *cx, const tf_entry *ent, const char *tensor,
                             const tensor_cost *tc, char *out, size_t outsz)
{
    snprintf(out, outsz, "-");
    if (!tc->first_prog)
        return true;
    uint64_t b = tc->first_prog - 1;
    tf_error e;
    if (tf_blob_program_text(cx->ar, b, &cx->payload, out, outsz, &e) == 0)
        return true;
    cli_error("%s: %s: blob %llu: %s", ent->path, tensor, (unsigned long long)b, e.msg);
    snprintf(out, outsz, "?");
    return false;
}

/* The reference of a tensor: two tab-separated columns, file and tensor,
 * or a JSON object (null when no chunk is a delta). */
static void print_reference(const tensor_ref *ref, bool json)
{
    if (!json) {
        if (!ref->blob)
            fputs("\t-\t-", stdout);
        else if (!ref->ent)
            fputs("\t?\t-", stdout);
        else {
            printf("\t%s\t", ref->ent->path);
            cli_put_quoted(stdout, ref->tensor);
        }
        return;
    }
    fputs(", \"reference\": ", stdout);
    if (!ref->blob) {
        fputs("null", stdout);
        return;
    }
    printf("{\"blob\": %llu, \"file\": ", (unsigned long long)(ref->blob - 1));
    if (ref->ent) {
        cli_put_quoted(stdout, ref->ent->path);
        fputs(", \"tensor\": ", stdout);
        cli_put_quoted(stdout, ref->tensor);
    } else {
        fputs("null, \"tensor\": null", stdout);
    }
    putchar('}');
}

/* One tensor: a tab-separated line, or a JSON object after *first. */
static void print_tensor(const tf_entry *ent, const char *tensor, const tf_tensor_span *ts,
                         const tensor_cost *tc, const char *program, const tensor_ref *ref,
                         bool json, bool *first)
{
    if (json) {
        printf("%s\n    {\"file\": ", *first ? "" : ",");
        cli_put_quoted(stdout, ent->path);
        fputs(", \"tensor\": ", stdout);
        cli_put_quoted(stdout, tensor);
        printf(", \"dtype\": \"%s\", \"bytes\": %llu, \"stored_bytes\": %llu, \"chunks\": {",
               stats_dtype_name(ts->dtype), (unsigned long long)ts->nbytes,
               (unsigned long long)tc->stored);
    } else {
        printf("%s\t", ent->path);
        cli_put_quoted(stdout, tensor);
        printf("\t%s\t%llu\t%llu\t", stats_dtype_name(ts->dtype), (unsigned long long)ts->nbytes,
               (unsigned long long)tc->stored);
    }
    bool none = true;
    for (unsigned k = 0; k < CODEC_SLOTS; k++) {
        if (!tc->chunks[k])
            continue;
        printf(json ? "%s\"%s\": %llu" : "%s%s:%llu", none ? "" : json ? ", " : ",",
               tf_codec_name(k), (unsigned long long)tc->chunks[k]);
        none = false;
    }
    if (json) {
        fputs("}, \"program\": ", stdout);
        if (strcmp(program, "-") == 0)
            fputs("null", stdout);
        else
            cli_put_quoted(stdout, program);
        print_reference(ref, json);
        putchar('}');
    } else {
        printf("%s\t%s", none ? "-" : "", program);
        print_reference(ref, json);
        putchar('\n');
    }
    *first = false;
}

/* The per-tensor view of the selected entries; 0, or -1 when a program
 * or a blob's record could not be read (the others are still printed). */
int stats_print_tensors(tf_archive *ar, const char *archive, const size_t *order,
                        const bool *selected, bool json)
{
    tf_error e;
    tensors_ctx cx = { .ar = ar, .users = tf_archive_blob_tensors(ar, &e) };
    if (!cx.users) {
        cli_error("%s", e.msg);
        return -1;
    }
    if (json) {
        fputs("{\n  \"archive\": ", stdout);
        cli_put_quoted(stdout, archive);
        fputs(",\n  \"tensors\": [", stdout);
    }
    int rc = 0;
    bool first = true;
    char program[PROGRAM_TEXT_LEN];
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (!selected[order[k]] || !tf_entry_is_tensor_file(ent))
            continue;
        for (uint64_t t = 0; t < ent->ntensors; t++) {
            const char *name = tf_tensor_name(ent, t);
            tensor_cost tc;
            if (!cost_tensor(ar, ent, t, &tc) ||
                !describe_program(&cx, ent, name, &tc, program, sizeof program))
                rc = -1;
            tensor_ref ref = find_reference(&cx, t, &tc);
            print_tensor(ent, name, &ent->tensors[t], &tc, program, &ref, json,
                         &first);
        }
    }
    if (json)
        fputs("\n  ]\n}\n", stdout);
    free(cx.users);
    tf_buf_free(&cx.payload);
    return rc;
}
