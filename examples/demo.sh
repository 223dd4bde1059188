#!/bin/sh
# End-to-end demo on a fresh Debian 12 machine: installs what is missing,
# builds trajpack, packs the bundled example trajectory, lists it with
# compression ratios, extracts it and proves every file byte-identical.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

sh .ci/install-deps
[ -x ./configure ] || autoreconf -fi
[ -f Makefile ] || ./configure -q
make -j2 trajpack

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

echo "== pack examples/tiny-run (3 checkpoints + AdamW state, bf16/fp32)"
./trajpack create "$work/run.traj" examples/tiny-run
echo "== list"
./trajpack list -l "$work/run.traj"
echo "== verify"
./trajpack verify "$work/run.traj"
echo "== extract and compare"
mkdir "$work/out"
./trajpack extract "$work/run.traj" -C "$work/out"
diff -r examples/tiny-run "$work/out/tiny-run"
echo "byte-identical: $(find examples/tiny-run -type f | wc -l) files," \
     "$(du -sb examples/tiny-run | cut -f1) bytes in," \
     "$(stat -c %s "$work/run.traj") bytes archived"
