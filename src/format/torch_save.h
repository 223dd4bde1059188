/* torch.save's zip files as a tensor-file format (torch_save.c). */
#ifndef TRAJFS_FORMAT_TORCH_SAVE_H
#define TRAJFS_FORMAT_TORCH_SAVE_H

#include "format/tensor_format.h"

extern const tf_tensor_format tf_torch_save_format;

#endif
