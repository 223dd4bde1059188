/* A restricted pickle interpreter for the data.pkl of a torch.save file.
 *
 * A torch.save file (PyTorch >= 1.6) is a zip archive whose data.pkl
 * pickles the saved object; each storage in it is a persistent id
 * ('storage', torch.<Type>Storage, KEY, LOCATION, NUMEL) whose bytes are
 * the archive's data/KEY. This interpreter finds those storages, their
 * element types and the path of the first tensor that uses each, without
 * executing anything: globals are only recorded by name, and the only
 * calls (REDUCE) it accepts are collections.OrderedDict() and torch's
 * tensor rebuild functions (torch._utils._rebuild_tensor_v2,
 * _rebuild_tensor_v3, _rebuild_parameter, _rebuild_parameter_with_state),
 * whose effect it models.
 *
 * Opcodes accepted (what torch.save emits at protocols 1 to 5; protocol 0
 * writes persistent ids as text that torch.load cannot read back):
 *   PROTO FRAME STOP
 *   MARK POP POP_MARK BINPUT LONG_BINPUT MEMOIZE BINGET LONG_BINGET
 *   NONE NEWTRUE NEWFALSE INT LONG BININT BININT1 BININT2 LONG1 LONG4
 *   BINFLOAT BINUNICODE SHORT_BINUNICODE BINUNICODE8
 *   SHORT_BINBYTES BINBYTES BINBYTES8
 *   EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3 EMPTY_LIST APPEND APPENDS
 *   EMPTY_DICT SETITEM SETITEMS
 *   GLOBAL STACK_GLOBAL REDUCE BUILD BINPERSID
 * Anything else is an error naming the opcode and its offset.
 *
 * Paths: dict keys and list/tuple indices from the saved object down to
 * the value, joined by '.'. A str key is itself, an int key its decimal,
 * any other key the decimal index of its item in the dict. What BUILD
 * gives a dict (an OrderedDict's attributes, e.g. a state_dict's
 * _metadata) is walked at the dict's own path. The object is walked depth
 * first in item order; a storage takes the path of the first tensor (or
 * bare storage) met that uses it. Paths are not guaranteed unique: keys
 * that contain '.' can spell another item's path.
 *
 * Bounds: values on the stack, open marks and nesting, memo entries,
 * storage key and path length are bounded by the constants below, and
 * all the memory the interpreter holds (stack, memo, containers, sized
 * exactly or doubling as they grow, storages, paths) by
 * TF_PICKLE_BUDGET of the pickle's length; nesting is checked as
 * containers are filled. Time is linear in the length of the pickle but
 * for sorting the storages by key. */
#ifndef TRAJFS_FORMAT_PICKLE_H
#define TRAJFS_FORMAT_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define TF_PICKLE_MAX_STACK (1u << 20) /* values on the stack at once */
#define TF_PICKLE_MAX_DEPTH 512        /* marks open at once; containers nested in the object */
#define TF_PICKLE_MAX_MEMO (1u << 22)  /* memo entries */
#define TF_PICKLE_MAX_PATH 4096        /* bytes of one path */
#define TF_PICKLE_MAX_KEY 256          /* bytes of a storage key */
/* Bytes the interpreter may hold for a pickle of len bytes (beyond the
 * pickle): torch.save's pickles need a few times their size. */
#define TF_PICKLE_BUDGET(len) (((size_t)1 << 20) + 16 * (size_t)(len))

typedef struct {
    char *key;      /* the storage key: the NAME of ARCHIVE/data/NAME */
    uint8_t dtype;  /* tf_dtype (common/dtype.h) */
    uint64_t numel; /* elements of the storage (bytes / element size) */
    char *path;     /* identity: the path to the first tensor that uses the
                       storage, in the saved object, dict keys and list/tuple
                       indices joined by '.', e.g. "state.3.exp_avg",
                       "state_dict.model.transformer.h.0.attn.c_attn.weight",
                       "optimizer_states.0.state.12.exp_avg_sq" */
} tf_pickle_storage;

typedef struct {
    size_t n;
    tf_pickle_storage *v; /* in order of first appearance */
} tf_pickle_storages;

/* Interprets the data.pkl of a torch.save file without executing anything:
 * globals are only recorded by name (module + name), only the opcodes
 * torch.save emits are accepted, stack depth, memo size and the memory
 * used are bounded (by constants and by len). Returns 0 with every storage
 * the pickle names, or -1 with EINVAL and a message naming the opcode and
 * its offset (an opcode outside the subset, a forbidden global such as
 * os.system being *called* — recording names is fine, but REDUCE of a
 * global other than the rebuild functions and OrderedDict is an error —,
 * a storage persistent id that is malformed, a storage whose dtype the
 * pickle does not say, the same key with two dtypes or sizes, a storage
 * that is not part of the saved object, a truncated pickle, bytes after
 * STOP, limits exceeded, more memory than its budget or than there is).
 * On failure *out is empty. */
int tf_pickle_torch_storages(const uint8_t *p, size_t len, tf_pickle_storages *out, tf_error *e);
void tf_pickle_storages_free(tf_pickle_storages *s);

#endif
