#!/bin/sh
# The file exerciser (tests/tools/file_exerciser.c) on a writable mount:
# random reads, writes, truncations, mapped reads and writes, O_APPEND
# writes and reopens of a file, each checked against a model; the file is
# checked again after its last commit and after a remount. One run with
# mappings, one without.
#
# Short by default; TRAJFS_EXERCISER_OPS=N asks for N operations per run
# (CI: 100000), TRAJFS_EXERCISER_SEED=S for a seed (by default each run
# picks one and prints it: rerun a failure with it).
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

EXERCISER=$TOOLS/file_exerciser
[ -x "$EXERCISER" ] || fail "$EXERCISER not built"
ops=${TRAJFS_EXERCISER_OPS:-1500}
seed_opt=${TRAJFS_EXERCISER_SEED:+-s $TRAJFS_EXERCISER_SEED}

archive=$TEST_TMP/a.traj
mnt=$TEST_TMP/mnt

start_mount "$archive" "$mnt" -o rw
# shellcheck disable=SC2086 # seed_opt is two words or none
"$EXERCISER" -n "$ops" $seed_opt "$mnt/mapped" "$TEST_TMP/mapped.model" ||
    fail "the exerciser failed with mappings (its seed is above)"
# shellcheck disable=SC2086
"$EXERCISER" -n "$ops" $seed_opt -M "$mnt/plain" "$TEST_TMP/plain.model" ||
    fail "the exerciser failed without mappings (its seed is above)"
stop_mount "$mnt"

start_mount "$archive" "$mnt" -o rw
for f in mapped plain; do
    cmp "$TEST_TMP/$f.model" "$mnt/$f" || fail "$f differs from its model after a remount"
done
stop_mount "$mnt"
exit 0
