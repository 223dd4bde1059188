#include <stdio.h>
#include <stdlib.h>

#include "common/dtype.h"
#include "format/catalog.h"
#include "format/torch_save.h"
#include "fuzz_targets.h"
#include "memory_source.h"

static void broken(const char *what)
{
    fprintf(stderr, "the torch.save format accepted a file that breaks its contract: %s\n", what);
    abort();
}

/* What the store relies on: the pieces tile the file, each tensor a whole
 * number of its elements, named. */
static void check_contract(const tf_entry *ent, size_t size)
{
    uint64_t at = 0;
    for (uint64_t i = 0; i < ent->npieces; i++) {
        const tf_piece *p = &ent->pieces[i];
        if (p->file_off != at || p->len > size - at)
            broken("pieces do not tile the file");
        if (p->tensor != TF_PIECE_VERBATIM) {
            const tf_tensor_span *t = &ent->tensors[p->tensor];
            if (t->nbytes != p->len || p->len % tf_dtype_get(t->dtype)->size)
                broken("a tensor piece is not its tensor");
        }
        at += p->len;
    }
    if (at != size)
        broken("pieces do not cover the file");
}

int tf_fuzz_torch_save(const uint8_t *data, size_t size, tf_error *e)
{
    tf_memory_file m = { data, size };
    tf_file_source src = { .name = "fuzz.pt", .size = size, .read = tf_memory_read, .arg = &m };
    tf_entry ent = { .kind = TF_ENTRY_TENSORS, .path = "fuzz.pt", .size = size };
    int rc = tf_tensor_format_parse(&tf_torch_save_format, &src, 12, &ent, e);
    if (rc == 0)
        check_contract(&ent, size);
    ent.path = NULL;
    tf_entry_free(&ent);
    return rc;
}
