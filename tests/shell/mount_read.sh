#!/bin/sh
# Reads through the mount of an archive with small chunks (2^10 elements,
# so many chunk borders): random preads of 1 byte to 4 MiB across header,
# tensor and chunk borders compared with the originals, with the kernel's
# page cache and without it (-o direct_io: every pread reaches trajfs as
# it is); fio random reads (read(2) and mmap); 8 readers of different
# checkpoints at once, each comparing bytes, on a cache too small to hold
# what they need. A file of 3000 one-element tensors has reads of more
# pieces than one reply of spans takes (they are copied instead).
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

command -v fio > /dev/null || fail "fio not found (apt-get install fio)"

src=$TEST_TMP/src
generate_run "$src/run"
mkdir -p "$src/misc/deep/er"
head -c 2500000 /dev/urandom > "$src/misc/deep/er/random.bin"
seq 1 100000 > "$src/misc/numbers.txt"
"$PYTHON" - "$src/misc/many.safetensors" << 'EOF'
import json, struct, sys
n = 3000
header = {"t%05d" % i: {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
          for i in range(n)}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    f.write(b"".join(struct.pack("<H", 0x3f80 + i) for i in range(n)))
EOF
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q --chunk-shift 10 "$archive" "$src/run" "$src/misc" || fail "create failed"
mnt=$TEST_TMP/mnt

check_random_reads() {
    _seed=$1
    list_files "$src" | while IFS= read -r _f; do
        "$PYTHON" "$top_srcdir/tests/tools/preadcheck.py" --chunk-shift 10 --count 150 \
            --max-len $((4 << 20)) --seed "$_seed" "$src/$_f" "$mnt/$_f" ||
            fail "random reads of $_f differ"
    done
}

# fio_reads ENGINE: 2 s of random reads of every file by 4 jobs.
fio_reads() {
    _files=$(list_files "$src" | sed "s|^|$mnt/|" | paste -sd:)
    fio --name=random-reads --readonly --rw=randread --ioengine="$1" --bsrange=512-1m \
        --numjobs=4 --time_based --runtime=2 --filename="$_files" --group_reporting \
        > "$TEST_TMP/fio.$1" 2>&1 || { cat "$TEST_TMP/fio.$1" >&2; fail "fio ($1) failed"; }
    grep -q 'err= 0' "$TEST_TMP/fio.$1" || { cat "$TEST_TMP/fio.$1" >&2; fail "fio ($1) saw errors"; }
}

start_mount "$archive" "$mnt" -o direct_io
check_random_reads 1
fio_reads psync
stop_mount "$mnt"

start_mount "$archive" "$mnt"
check_random_reads 2
fio_reads mmap
stop_mount "$mnt"

# 8 readers at once; a 64 KiB cache cannot hold their chains, so chunks
# are decoded, evicted and decoded again while others wait on them, and
# a catalog cache of 8 KiB (one set of pages) reads records again and
# again, from every reader at once.
start_mount "$archive" "$mnt" -o cache_size=64K,catalog_cache=8K
pids=""
for f in "$src"/run/step-*.safetensors; do
    cmp "$f" "$mnt/run/${f##*/}" > "$TEST_TMP/cmp.${f##*/}" 2>&1 &
    pids="$pids $!"
done
[ "$(echo $pids | wc -w)" = 8 ] || fail "expected 8 checkpoints, have $(echo $pids | wc -w)"
for p in $pids; do
    wait "$p" || { cat "$TEST_TMP"/cmp.* >&2; fail "a parallel reader saw other bytes"; }
done
stop_mount "$mnt"
exit 0
