/* raw: the chunk's bytes as they are (what a blob falls back to when no
 * codec makes it smaller). */
#ifndef TRAJFS_CODEC_RAW_H
#define TRAJFS_CODEC_RAW_H

#include "codec/codec.h"

extern const tf_codec tf_codec_raw;

#endif
