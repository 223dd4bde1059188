/* Sizes for people to read, shared by the verbs' output and the progress
 * bar (which must not depend on the rest of cli.h). */
#ifndef TRAJFS_CLI_SIZE_H
#define TRAJFS_CLI_SIZE_H

#include <stdint.h>

/* Human-readable size with SI units: "512 B", "39.5 kB", "21.7 MB". */
#define CLI_SIZE_LEN 16
void cli_format_size(uint64_t bytes, char out[CLI_SIZE_LEN]);

#endif
