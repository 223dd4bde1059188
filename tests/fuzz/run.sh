#!/bin/sh
# Runs every fuzz target for a bounded time, starting from its seeds:
#
#   run.sh [SECONDS [FUZZDIR]]
#
# SECONDS per target (default 60); FUZZDIR is where `make fuzz` built
# (default: build-fuzz). New inputs found are kept in FUZZDIR/corpus/TARGET,
# so runs build on each other; tests/fuzz/regressions/TARGET (inputs that
# once crashed) is replayed too. Prints executions per target. Exits 1 when
# a target crashed, leaked, hung (10 s on one input) or went over 2 GB:
# the input is in FUZZDIR/crashes/ and the end of the report is printed.
set -eu

secs=${1:-60}
dir=${2:-build-fuzz}
here=$(cd "$(dirname "$0")" && pwd)
status=0
printf '%-18s %12s %10s %8s  %s\n' target executions 'per s' corpus result
[ -f "$dir/targets" ] || { echo "run.sh: $dir/targets missing (make fuzz)" >&2; exit 1; }
for t in $(cat "$dir/targets"); do
    bin=$dir/fuzz_$t
    mkdir -p "$dir/corpus/$t" "$dir/crashes"
    regressions=
    [ -d "$here/regressions/$t" ] && regressions=$here/regressions/$t
    log=$dir/fuzz_$t.log
    rc=0
    # shellcheck disable=SC2086
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/crashes/$t-" "$dir/corpus/$t" "$dir/seeds/$t" $regressions \
        > "$log" 2>&1 || rc=$?
    # The last status line: "#EXECS <event> cov: ... corp: N/SIZE ..."
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    execs=$(printf '%s\n' "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
    corpus=$(printf '%s\n' "$last" | sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p')
    result=ok
    if [ "$rc" -ne 0 ]; then
        result="FAILED (exit $rc, log $log)"
        status=1
    fi
    printf '%-18s %12s %10s %8s  %s\n' "fuzz_$t" "${execs:-?}" \
        "$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" "${corpus:-?}" "$result"
    [ "$rc" -eq 0 ] || tail -n 40 "$log" >&2
done
exit "$status"
