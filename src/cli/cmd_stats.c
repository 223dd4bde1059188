/* trajpack stats: how many bits each weight costs, by dtype, by codec and
 * by checkpoint, as text or JSON.
 *
 * Each blob's bytes are charged once, to the first use of it in commit
 * order (the rule of `list -l`, see tf_archive_blob_owners); later uses of the
 * same blob (a re-added checkpoint, a tied weight, an unchanged tensor)
 * count their weights at 0 bits. So the bits per weight of a row are the
 * stored bits charged to it divided by all the weights it covers.
 *
 * The bits of ulp chunks are broken down further, per dtype, as in the
 * paper (codec/ulp/ulp_stats.h): b, q1, q2, raw tail, tables (the model blobs
 * charged with them) and framing. That decodes every ulp chunk charged,
 * and its reference first. */
#include "cli/cli.h"

#include <stdlib.h>

#include "cli/stats.h"
#include "store/catalog_query.h"

static const char stats_usage[] =
    "Usage: trajpack stats [OPTIONS] ARCHIVE\n"
    "       trajpack stats --tensors [OPTIONS] ARCHIVE [FILE...]\n"
    "Show the bits per weight (stored bits / tensor elements) of ARCHIVE by\n"
    "dtype, by codec and by checkpoint (safetensors file; in natural order,\n"
    "step-20 before step-100), totals and the compression ratio. Stored\n"
    "bytes are charged to the first file that uses them; weights of data\n"
    "stored before cost 0 bits (row \"dedup\").\n"
    "The bits of ulp deltas are broken down by dtype into the bit length b,\n"
    "the refinement bits q1 and q2, the raw tail, tables and framing.\n"
    "\nOptions:\n"
    "      --tensors  instead, one tab-separated line per tensor of the\n"
    "                 safetensors files FILE... (and those below them; default:\n"
    "                 all): file, tensor name (quoted), dtype, bytes, stored\n"
    "                 bytes (its chunks and their models, shared or not), chunks\n"
    "                 per codec (e.g. prog:1,ulp:3), the program of its first\n"
    "                 prog chunk (e.g. merge_bf16(lit_huff, lit_rans|exp,\n"
    "                 lit_raw)) or \"-\", and its reference: the file and the\n"
    "                 tensor (quoted) that stored the blob its first delta\n"
    "                 chunk is a delta against; \"-\" and \"-\" when no chunk\n"
    "                 is a delta, \"?\" and \"-\" when no file holds that blob\n"
    "      --json     print one JSON object instead of tables\n"
    "  -h, --help     show this help\n";

enum { OPT_JSON = 256, OPT_TENSORS };

static const struct option stats_longopts[] = {
    { "json", no_argument, NULL, OPT_JSON },
    { "tensors", no_argument, NULL, OPT_TENSORS },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* The summary of the whole archive. */
static int print_stats(tf_archive *ar, const char *archive, bool json)
{
    stats st = { 0 };
    int status = CLI_EXIT_FAIL;
    size_t *order = tf_archive_natural_order(ar);
    if (!order) {
        cli_error("out of memory");
    } else if (stats_gather(ar, &st) == 0) {
        if (json)
            stats_print_json(ar, order, archive, &st);
        else
            stats_print_text(ar, order, archive, &st);
        status = st.ulp_undecoded.blobs ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    }
    for (size_t i = 0; st.notes && i < tf_archive_nentries(ar); i++)
        free(st.notes[i]);
    free(st.notes);
    free(st.by_entry);
    free(order);
    return status;
}

/* --tensors: the entries named (all when none is), one line per tensor. */
static int run_tensors(tf_archive *ar, const char *archive, char **args, size_t nargs, bool json)
{
    char **paths = cli_archive_paths(args, nargs);
    size_t n = tf_archive_nentries(ar);
    bool *selected = paths ? malloc((n ? n : 1) * sizeof *selected) : NULL;
    size_t *order = selected ? tf_archive_natural_order(ar) : NULL;
    int status = CLI_EXIT_FAIL;
    if (paths && !order)
        cli_error("out of memory");
    if (order) {
        size_t missing = cli_select_entries(ar, paths, nargs, selected);
        if (stats_print_tensors(ar, archive, order, selected, json) == 0 && !missing)
            status = CLI_EXIT_OK;
    }
    free(order);
    free(selected);
    cli_free_paths(paths, nargs);
    return status;
}

int cmd_stats(int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = stats_usage,
                          .shortopts = "h", .longopts = stats_longopts };
    bool json = false, tensors = false;
    int c;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        switch (c) {
        case OPT_JSON: json = true; break;
        case OPT_TENSORS: tensors = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind < 1)
        return cli_usage_error(cmd.verb, "expected an ARCHIVE");
    if (!tensors && argc - optind != 1)
        return cli_usage_error(cmd.verb, "FILE arguments are for --tensors");
    const char *archive = argv[optind];
    tf_archive *ar = cli_open_archive(archive, CLI_OPEN_WHOLE);
    if (!ar)
        return CLI_EXIT_FAIL;
    int status = tensors ? run_tensors(ar, archive, argv + optind + 1,
                                       (size_t)(argc - optind - 1), json)
                         : print_stats(ar, archive, json);
    tf_archive_close(ar);
    return status;
}
