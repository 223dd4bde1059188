/* Where a file sits in a training run, read from its path: which run,
 * which checkpoint of it (the step), and which file of the checkpoint
 * (its role). Trainers write, for example,
 *     step-000400.safetensors      run key "step-#.safetensors",
 *                                  step "step-000400.safetensors", role ""
 *     out/checkpoint-400/model-00001-of-00003.safetensors
 *                                  run key "out/checkpoint-#", step
 *                                  "checkpoint-400", role
 *                                  "model-#-of-#.safetensors"
 *     run2/global_step400/mp_rank_00_model_states.pt
 *                                  run key "run2/global_step#", role
 *                                  "mp_rank_00_model_states.pt"
 *     tmp-checkpoint-400/model.safetensors
 *                                  as checkpoint-400/model.safetensors
 * The checkpoint component is the deepest one holding a number once
 * temporary-name markers (a tmp- prefix, a .tmp or .part suffix, rsync's
 * .NAME.XXXXXX) are removed and shard (00001-of-00003), rank (rank_00)
 * and dtype (fp16, bf16) numbers are not counted. Files with equal run keys are checkpoints of
 * one run; the run key holds the checkpoint component with its numbers
 * replaced, so step-N.safetensors and step-N.optim.safetensors are two
 * runs, and so are run1/step-N and run2/step-N. */
#ifndef TRAJFS_STORE_CKPT_PATH_H
#define TRAJFS_STORE_CKPT_PATH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *run;  /* run key */
    char *step; /* the checkpoint component, temporary markers removed,
                   compared with tf_natcmp; NULL when the path has none */
    char *role; /* the path below the checkpoint component (the file name
                   when it has none), shard numbers replaced (ranks kept:
                   each rank's file is its own role) */
    size_t step_end; /* bytes of the path up to the end of the checkpoint
                        component as written (the whole path when it is
                        the last component); 0 when there is none */
} tf_ckpt_path;

/* 0, or -1 when out of memory. */
int tf_ckpt_path_parse(const char *path, tf_ckpt_path *out);
void tf_ckpt_path_free(tf_ckpt_path *p);

/* The step number of a checkpoint component (tf_ckpt_path.step): its
 * last run of digits that is neither a shard, a rank nor a dtype number
 * (checkpoint-1000: "1000"; step-000400.safetensors: "000400"), at
 * *digits, *len of them. False when it has none. */
bool tf_ckpt_step_number(const char *step, const char **digits, size_t *len);

#endif
