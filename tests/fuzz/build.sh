#!/bin/sh
# Builds the libFuzzer targets and their seed corpora (what `make fuzz`
# runs):
#
#   build.sh SRCDIR BUILDDIR
#
# SRCDIR is the source tree, BUILDDIR a configured build of it (for
# config.h). Everything goes to BUILDDIR/build-fuzz: the targets
# fuzz_TARGET for each TARGET of `targets` (tests/fuzz/fuzz_TARGET.c,
# listed in build-fuzz/targets for run.sh) and seeds/TARGET/, made by
# make_seeds from small valid inputs (and the release-1 archive of
# tests/fixtures, the torch.save pickles of tests/fuzz/pickle_samples.c).
# The library is compiled afresh from Makefile.am's libtrajfs_a_SOURCES
# with clang, coverage and AddressSanitizer + UndefinedBehaviorSanitizer.
#
# Environment: CLANG (clang), FUZZ_CFLAGS (extra flags, e.g. the
# configured -I for zstd), FUZZ_LIBS (-lzstd -lxxhash -lm), PYTHON
# (python3, for tests/tools/make_safetensors.py), TORCH_PYTHON
# (/usr/bin/python3, Debian's, with torch: the torch.save seeds).
set -eu

targets="archive commits catalog safetensors codec pickle torch_save"

[ $# -eq 2 ] || { echo "usage: $0 SRCDIR BUILDDIR" >&2; exit 2; }
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
out=$build/build-fuzz
CLANG=${CLANG:-clang}
FUZZ_CFLAGS=${FUZZ_CFLAGS:-}
FUZZ_LIBS=${FUZZ_LIBS:--lzstd -lxxhash -lm}
PYTHON=${PYTHON:-python3}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
[ -f "$build/config.h" ] || { echo "$0: $build/config.h missing: configure first" >&2; exit 1; }
command -v "$CLANG" > /dev/null || { echo "$0: $CLANG not found (apt-get install clang libclang-rt-dev)" >&2; exit 1; }

# The library's C files, as Makefile.am lists them.
sources=$(sed -n '/^libtrajfs_a_SOURCES *=/,/[^\\]$/p' "$src/Makefile.am" |
    tr -s ' \t\\' '\n\n\n' | grep '\.c$')
# The targets' code goes into the library too: targets share helpers.
# They read no remote archive: the library without libcurl.
sources="$(printf '%s\n' $sources | sort -u) src/io/remote_none.c tests/fuzz/codec_input.c
    tests/common/memory_source.c
    $(for t in $targets; do echo "tests/fuzz/fuzz_$t.c"; done)"

cflags="-std=c11 -g -O1 -fno-omit-frame-pointer -pthread
    -fsanitize=address,undefined -fno-sanitize-recover=all
    -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
    -I$src/src -I$src/tests/fuzz -I$src/tests/common -include $build/config.h $FUZZ_CFLAGS"

# ---- the library, instrumented for coverage, one compiler per CPU ----
mkdir -p "$out/obj"
rm -f "$out"/obj/*.o "$out/libtrajfs-fuzz.a"
jobs=$(nproc 2> /dev/null || echo 2)
running=0
objects=
for f in $sources; do
    o=$out/obj/$(printf '%s' "$f" | tr / _ | sed 's/\.c$/.o/')
    objects="$objects $o"
    # shellcheck disable=SC2086
    $CLANG $cflags -fsanitize=fuzzer-no-link -c "$src/$f" -o "$o" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait
        running=0
    fi
done
wait
for o in $objects; do
    [ -f "$o" ] || { echo "$0: compiling $o failed" >&2; exit 1; }
done
# shellcheck disable=SC2086
ar rcs "$out/libtrajfs-fuzz.a" $objects

# ---- the targets and the seed generator ----
for t in $targets; do
    # shellcheck disable=SC2086
    $CLANG $cflags -fsanitize=fuzzer -DFUZZ_TARGET=tf_fuzz_$t "$src/tests/fuzz/fuzz_main.c" \
        "$out/libtrajfs-fuzz.a" $FUZZ_LIBS -o "$out/fuzz_$t"
done
# shellcheck disable=SC2086
$CLANG $cflags -fsanitize=fuzzer-no-link "$src/tests/fuzz/make_seeds.c" \
    "$src/tests/fuzz/seed_values.c" "$src/tests/fuzz/pickle_samples.c" "$out/libtrajfs-fuzz.a" \
    $FUZZ_LIBS -o "$out/make_seeds"

# ---- seed corpora ----
rm -rf "$out/seeds" "$out/st"
mkdir -p "$out/seeds"
"$PYTHON" "$src/tests/tools/make_safetensors.py" good "$out/st/good"
"$PYTHON" "$src/tests/tools/make_safetensors.py" bad "$out/st/bad"
"$out/make_seeds" "$out/seeds" "$out/st/good" "$out/st/bad" "$src/tests/fixtures/release1.trajfs"
"$TORCH_PYTHON" "$src/tests/fuzz/make_torch_seeds.py" "$out/seeds/torch_save"
rm -rf "$out/seeds/work"
echo "$targets" > "$out/targets"
for t in $targets; do
    echo "fuzz_$t: $(ls "$out/seeds/$t" | wc -l) seeds, $(cat "$out/seeds/$t"/* | wc -c) bytes"
done
echo "built in $out; run: sh $src/tests/fuzz/run.sh [SECONDS] $out"
