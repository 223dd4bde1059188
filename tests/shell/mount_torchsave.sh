#!/bin/sh
# torch.save files (tests/tools/make_torch_files.py) through a read-only
# mount: the layouts of the transformers Trainer, Lightning, DeepSpeed and
# plain state dicts, odd but valid files and hostile ones read back
# byte-identical, and torch.load of each valid file in the mount gives
# what it gives from the original (tests/tools/torch_same.py: equal
# tensors, dtypes, shapes, strides, storage offsets, and tied weights
# still one storage). The archive is packed by trajpack create and, for
# the layouts, by trajpack add one file at a time. Sizes: torchsave.sh.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/layoutlib.sh"

generate_tiny_trajectory "$TEST_TMP/run"
make_torch_layouts "$TEST_TMP" "$TEST_TMP/run"
# The valid files lie in $TEST_TMP/torch, one directory a kind; the
# hostile ones apart: they must never reach torch.load (one calls
# os.system).
"$PYTHON" "$MAKE_TORCH_FILES" odd "$TEST_TMP/torch/odd" || fail "make_torch_files.py odd failed"
"$PYTHON" "$MAKE_TORCH_FILES" hostile "$TEST_TMP/hostile" || fail "make_torch_files.py hostile failed"

# reads_back ARCHIVE TREE...: a read-only mount of ARCHIVE holds each
# TREE (by its base name) byte for byte.
reads_back() {
    _archive=$1
    shift
    start_mount "$_archive" "$TEST_TMP/mnt"
    for _tree in "$@"; do
        diff -r "$_tree" "$TEST_TMP/mnt/$(basename "$_tree")" > "$TEST_TMP/diff" ||
            { cat "$TEST_TMP/diff" >&2; fail "$_archive: the mount differs from $_tree"; }
    done
}

# loads_same DIR [NAME]: torch.load gives the same from DIR's torch
# files as from their copies in the mount (below NAME).
loads_same() {
    "$PYTHON" "$TORCH_SAME" "$1" "$TEST_TMP/mnt${2:+/$2}" ||
        fail "torch.load of ${2:-the files} through the mount differs"
}

"$TRAJPACK" create -q "$TEST_TMP/all.traj" "$TEST_TMP/torch"/* "$TEST_TMP/hostile" ||
    fail "trajpack create failed"
reads_back "$TEST_TMP/all.traj" "$TEST_TMP/torch"/* "$TEST_TMP/hostile"
loads_same "$TEST_TMP/torch"
stop_mount "$TEST_TMP/mnt"

for layout in $TORCH_LAYOUTS; do
    tree=$TEST_TMP/torch/$layout
    pack_files_one_at_a_time "$TEST_TMP/$layout.add.traj" "$tree"
    reads_back "$TEST_TMP/$layout.add.traj" "$tree"
    loads_same "$tree" "$layout"
    stop_mount "$TEST_TMP/mnt"
done
exit 0
