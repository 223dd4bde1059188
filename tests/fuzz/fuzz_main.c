/* libFuzzer's entry: build.sh compiles this once per target with
 * -DFUZZ_TARGET=tf_fuzz_NAME. With TF_FUZZ_VERBOSE set in the
 * environment, each refused input's message is printed (useful when
 * replaying one input by hand: ./fuzz_archive crash-...). */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("TF_FUZZ_VERBOSE") != NULL;
    tf_error e = { 0 };
    if (FUZZ_TARGET(data, size, &e) < 0 && verbose)
        fprintf(stderr, "refused: %s\n", e.msg);
    return 0;
}
