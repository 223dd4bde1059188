#include "store/file_map.h"

#include "common/dtype.h"

uint64_t tf_piece_at(const tf_entry *ent, uint64_t off)
{
    uint64_t lo = 0, hi = ent->npieces;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ent->pieces[mid].file_off <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

bool tf_piece_chunks(const tf_entry *ent, uint64_t p, unsigned chunk_shift, tf_chunk_run *out)
{
    if (ent->kind == TF_ENTRY_FILE) {
        *out = (tf_chunk_run){ ent->chunks, (uint64_t)1 << chunk_shift, 0, ent->size };
        return true;
    }
    const tf_piece *pc = &ent->pieces[p];
    if (pc->tensor == TF_PIECE_VERBATIM) {
        *out = (tf_chunk_run){ ent->chunks, (uint64_t)1 << chunk_shift, pc->verbatim_off,
                               ent->verbatim_len };
        return !ent->verbatim;
    }
    const tf_tensor_span *ts = &ent->tensors[pc->tensor];
    *out = (tf_chunk_run){ ent->chunks + ts->first_chunk,
                           (uint64_t)tf_dtype_get(ts->dtype)->size << chunk_shift, 0, ts->nbytes };
    return true;
}
