#!/bin/sh
# Loading single checkpoints through fresh mounts (nothing decoded yet:
# what the prefetcher is for). An archive of 12 checkpoints with reverse
# references and --max-chain 3 (keyframes at the 4th, the 8th and the
# 12th, the newest; chains of at most 3 deltas; the default, 16, gives 11):
#   - no chain is longer than 3 deltas, and some are 3 long (with the
#     default: 11);
#   - every checkpoint read alone through a fresh mount is byte-identical,
#     with the prefetcher and without it (-o prefetch=0), and so is
#     `trajpack extract -O`;
#   - one tensor picked out of the last checkpoint with numpy (header,
#     then that tensor's bytes) equals the original's;
#   - all checkpoints read at once by concurrent readers of one fresh
#     mount, with a cache far too small for their chains (64 KiB: the
#     prefetcher's window is a quarter of it), then with the default
#     cache, are byte-identical;
#   - the daemons exit 0 at their unmount, and their messages show no
#     sanitizer report (in a build with --enable-sanitizers).
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"

N=12
src=$TEST_TMP/run
mkdir "$src"
"$PYTHON" "$WRITE_CHECKPOINTS" "$src" 1 "$N" 400000 || fail "write_checkpoints.py failed"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$TEST_TMP/default.traj" "$src" || fail "create failed"
depth=$(max_chain_depth "$TEST_TMP/default.traj")
[ "$depth" -eq 11 ] || fail "the default max_chain (16) made chains of at most $depth deltas"
"$TRAJPACK" create -q --max-chain 3 "$archive" "$src" || fail "create --max-chain 3 failed"
depth=$(max_chain_depth "$archive")
[ "$depth" -le 3 ] || fail "a chain of $depth deltas with --max-chain 3"
[ "$depth" -eq 3 ] || fail "no chain of 3 deltas in $N checkpoints (the longest: $depth)"

mnt=$TEST_TMP/mnt
# stop_checked: unmounts; the daemon's messages show no sanitizer report.
stop_checked() {
    stop_mount "$mnt"
    no_sanitizer_report "$mnt.log"
}
for i in $(seq 1 "$N"); do
    f=step-$i.safetensors
    for opts in "-o prefetch=32M" "-o prefetch=0"; do
        start_mount "$archive" "$mnt" $opts
        cmp "$src/$f" "$mnt/run/$f" || fail "run/$f through a fresh mount ($opts) differs"
        stop_checked
    done
    "$TRAJPACK" extract -q -O "$archive" "run/$f" | cmp - "$src/$f" ||
        fail "trajpack extract -O run/$f differs"
done

start_mount "$archive" "$mnt"
"$PYTHON" - "$mnt/run/step-$N.safetensors" "$src/step-$N.safetensors" <<'PY' ||
import json, os, struct, sys
import numpy as np


def tensor(path, name):
    fd = os.open(path, os.O_RDONLY)
    try:
        (n,) = struct.unpack("<Q", os.pread(fd, 8, 0))
        t = json.loads(os.pread(fd, n, 8))[name]
        b, e = t["data_offsets"]
        return np.frombuffer(os.pread(fd, e - b, 8 + n + b), dtype="<f4")
    finally:
        os.close(fd)


got, want = (tensor(p, "h.0.mlp.weight") for p in sys.argv[1:])
assert got.tobytes() == want.tobytes(), "h.0.mlp.weight differs"
PY
    fail "a tensor picked out of the last checkpoint (above)"
stop_checked

# concurrent_cold [trajfs options...]: every checkpoint at once.
concurrent_cold() {
    start_mount "$archive" "$mnt" "$@"
    pids=""
    for i in $(seq 1 "$N"); do
        cmp "$src/step-$i.safetensors" "$mnt/run/step-$i.safetensors" > "$TEST_TMP/cmp.$i" 2>&1 &
        pids="$pids $!"
    done
    bad=""
    for p in $pids; do
        wait "$p" || bad="$bad $p"
    done
    [ -z "$bad" ] || fail "concurrent cold readers ($*) saw other bytes: $(cat "$TEST_TMP"/cmp.*)"
    stop_checked
}
concurrent_cold -o cache_size=64K
concurrent_cold
echo "$TEST_NAME: $N checkpoints, chains of at most $depth deltas, all byte-identical"
