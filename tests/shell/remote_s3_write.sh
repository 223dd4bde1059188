#!/bin/sh
# Writing an archive to an S3-compatible server (s3rver on 127.0.0.1,
# behind the test proxy, which checks every request's SigV4 signature and
# honours If-None-Match: *, which s3rver ignores):
# - trajpack create, add and rm on s3://BUCKET/KEY write the same bytes,
#   commit for commit, as on a local archive (the segments under KEY/,
#   joined, are the local file), and a second process's mount that
#   follows shows each commit (how soon is printed);
# - a commit larger than a part uploads in parts;
# - uploads that fail (503), are reset, or whose response is lost are
#   retried and the commit lands once;
# - of two writers racing for the same tail, one commits and the other
#   fails cleanly, then succeeds when run again;
# - a writer killed (kill -9) before, during or after its upload leaves
#   an archive that opens and verifies, holding every commit it
#   acknowledged; the next writers abort its multipart upload;
# - with cache_dir, a writer keeps the segments it publishes there: the
#   next add reads its reference from the disk;
# - trajpack push uploads what the copy lacks, resumes after a kill,
#   follows a growing archive, and refuses a copy that is not its start;
# - prune and gc: gc writes the archive anew as its next generation and
#   deletes the old one; killed, it leaves the old one readable and
#   refusing commits, and runs again to the end, removing the killed
#   one's copy; it deletes the old objects in one request (one by one
#   where the store has no DeleteObjects), and a key the store could not
#   delete fails it, named, until a gc run again deletes it;
# - a writable mount's close() returns once the commit is in the bucket,
#   and the Python package writes there too; a mount started as a daemon
#   (no -f) commits a file of three parts, and one that fails says why;
# - an archive of more segments than a listing page reads right;
# - a store that ignores If-None-Match is refused unless the user says
#   one writer at a time is theirs to ensure.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/remotelib.sh"

FOLLOW=1
# Spools and gc's copies (a killed gc leaves its copy) go below TEST_TMP.
export TMPDIR=$TEST_TMP/tmp
mkdir -p "$TMPDIR"
src=$TEST_TMP/src
generate_tiny_trajectory "$src"
head -c 20000000 /dev/urandom > "$TEST_TMP/big.bin" # three parts of 8 MiB

s3=$TEST_TMP/s3
start_s3rver "$s3"
direct=http://127.0.0.1:$port
start_proxy "$direct"
echo "sigv4 S3RVER" > "$PROXY_MODE"
export AWS_ENDPOINT_URL=http://127.0.0.1:$PROXY_PORT AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER

# joined KEY OUT: the segments of the archive at s3://test-bucket/KEY as
# s3rver keeps them, in archive order (their names are inverted
# offsets), one after the other.
joined() {
    ls "$s3/test-bucket/$1/" | sed -n 's/^\([0-9a-f]\{8\}-[0-9a-f]\{16\}\)\._S3rver_object$/\1/p' |
        sort -r | while read -r _seg; do cat "$s3/test-bucket/$1/$_seg._S3rver_object"; done > "$2"
}

# same_bytes KEY LOCAL: the archive at KEY holds LOCAL's bytes, but where
# LOCAL reads zeros: the space a commit retired, which the local writer
# gave back (punched holes), and which a segment holds as written.
same_bytes() {
    joined "$1" "$TEST_TMP/joined"
    [ "$(file_size "$TEST_TMP/joined")" = "$(file_size "$2")" ] ||
        fail "the archive at $1 holds $(file_size "$TEST_TMP/joined") bytes, $2 $(file_size "$2")"
    cmp -l "$TEST_TMP/joined" "$2" | awk '$3 != 0 { bad++ } END { exit bad > 0 }' ||
        fail "the archive at $1 is not the bytes of $2"
}

# both VERB ARGS...: runs `trajpack VERB -q ARCHIVE ARGS` on the local
# archive and on the remote one (remote second).
key="runs/run 1.traj"
url="s3://test-bucket/$key"
local=$TEST_TMP/local.traj
both() {
    _verb=$1
    shift
    "$TRAJPACK" "$_verb" -q "$local" "$@" || fail "$_verb $* on the local archive failed"
    "$TRAJPACK" "$_verb" -q "$url" "$@" || fail "$_verb $* on $url failed"
}

# ---- a store that ignores If-None-Match ----
AWS_ENDPOINT_URL=$direct "$TRAJPACK" create -q s3://test-bucket/direct.traj "$src/config.json" \
    2> "$TEST_TMP/err" && fail "a store that ignores If-None-Match was written to"
grep -q "ignores If-None-Match" "$TEST_TMP/err" || fail "unclear refusal: $(cat "$TEST_TMP/err")"
[ ! -e "$s3/test-bucket/direct.traj/ffffffff-ffffffffffffffff._S3rver_object" ] ||
    fail "the refused create left a segment"
AWS_ENDPOINT_URL=$direct TRAJFS_REMOTE_OPTIONS=s3_unconditional=1 \
    "$TRAJPACK" create -q s3://test-bucket/direct.traj "$src/config.json" ||
    fail "create with s3_unconditional=1 failed"
AWS_ENDPOINT_URL=$direct "$TRAJPACK" verify s3://test-bucket/direct.traj > /dev/null ||
    fail "the archive written with s3_unconditional=1 does not verify"
# A writer checks the store while it encodes its first commit, and
# publishes nothing before the check passed.
ls "$s3/test-bucket/direct.traj" | grep -v "^writer-check" > "$TEST_TMP/before"
AWS_ENDPOINT_URL=$direct "$TRAJPACK" add -q s3://test-bucket/direct.traj "$src/bf16/step-000002.safetensors" \
    2> "$TEST_TMP/err" && fail "an add to a store that ignores If-None-Match was made"
grep -q "ignores If-None-Match" "$TEST_TMP/err" || fail "unclear refusal: $(cat "$TEST_TMP/err")"
ls "$s3/test-bucket/direct.traj" | grep -v "^writer-check" | cmp -s - "$TEST_TMP/before" ||
    fail "the refused add left an object: $(ls "$s3/test-bucket/direct.traj")"

# ---- create, add, rm: the bytes of a local archive; a mount follows ----
both create "$src/config.json" "$src/bf16/step-000002.safetensors"
same_bytes "$key" "$local"
"$TRAJPACK" create -q "$url" "$src/config.json" 2> "$TEST_TMP/err" && fail "create over an archive"
grep -q "already" "$TEST_TMP/err" || fail "unclear refusal: $(cat "$TEST_TMP/err")"
start_mount "$url" "$TEST_TMP/m" -o follow=$FOLLOW
cmp "$TEST_TMP/m/step-000002.safetensors" "$src/bf16/step-000002.safetensors" ||
    fail "the mount reads the first checkpoint wrong"
both add "$src/bf16/step-000004.safetensors"
same_bytes "$key" "$local"
ms=$(wait_for "the added checkpoint" test -e "$TEST_TMP/m/step-000004.safetensors")
echo "a commit to $url was seen by a following mount after $ms ms (follow=$FOLLOW)"
cmp "$TEST_TMP/m/step-000004.safetensors" "$src/bf16/step-000004.safetensors" ||
    fail "the mount reads the added checkpoint wrong"
both add "$TEST_TMP/big.bin"
same_bytes "$key" "$local"
# Several big files in one add: each file's commit is published before
# the next file's bytes are staged.
head -c 12000000 /dev/urandom > "$TEST_TMP/m1.bin"
head -c 12000000 /dev/urandom > "$TEST_TMP/m2.bin"
both add "$TEST_TMP/m1.bin" "$TEST_TMP/m2.bin"
same_bytes "$key" "$local"
grep -q "POST .*uploads" "$PROXY_MODE.log" || fail "the big commit did not upload in parts"
grep -q "PUT .*partNumber=3&" "$PROXY_MODE.log" || fail "the big commit did not upload three parts"
both rm step-000002.safetensors
"$TRAJPACK" list --blobs "$local" > "$TEST_TMP/list.local"
"$TRAJPACK" list --blobs "$url" > "$TEST_TMP/list.remote"
cmp "$TEST_TMP/list.local" "$TEST_TMP/list.remote" || fail "rm: the catalogs differ"
wait_for "the removal" test ! -e "$TEST_TMP/m/step-000002.safetensors" > /dev/null
cmp "$TEST_TMP/m/big.bin" "$TEST_TMP/big.bin" || fail "the mount reads the big file wrong"
"$TRAJPACK" verify "$url" > /dev/null || fail "verify $url failed"

# ---- a writer's segments kept in the disk cache ----
# With cache_dir, each segment a writer publishes goes there whole: the
# next add reads its reference checkpoint from the disk, fetching no
# more than the open's ends, and so does an extract naming the cache;
# a damaged segment there is fetched again, never served.
mid=$TEST_TMP/mid
generate_trajectory "$mid" --layers 2 --width 128 --heads 2 --ctx 16 --batch 2 --steps 4 \
    --interval 2 --max-chars 20000 --dtype bf16
wcache=$TEST_TMP/wcache
# fetched CACHE KEY VERB ARGS...: `trajpack VERB -q s3://test-bucket/KEY
# ARGS` (with cache_dir=CACHE, but for CACHE -), its output in
# $TEST_TMP/out; prints the bytes the server sent it.
fetched() {
    _opts="cache_dir=$1" _key=$2 _verb=$3
    [ "$1" != - ] || _opts=""
    shift 3
    TRAJFS_REMOTE_STATS=1 TRAJFS_REMOTE_OPTIONS=$_opts "$TRAJPACK" "$_verb" -q \
        "s3://test-bucket/$_key" "$@" > "$TEST_TMP/out" 2> "$TEST_TMP/stats" ||
        fail "$_verb on $_key failed: $(cat "$TEST_TMP/stats")"
    sed -n 's/.*: [0-9]* requests, \([0-9]*\) bytes fetched/\1/p' "$TEST_TMP/stats" | tail -1
}
fetched - cache0.traj create "$mid/config.json" "$mid/step-000002.safetensors" > /dev/null
fetched "$wcache" cache1.traj create "$mid/config.json" "$mid/step-000002.safetensors" > /dev/null
without=$(fetched - cache0.traj add "$mid/step-000004.safetensors")
with=$(fetched "$wcache" cache1.traj add "$mid/step-000004.safetensors")
echo "the add of a checkpoint fetched $without bytes, $with with the writer's cache"
[ $((with * 5)) -lt "$without" ] || fail "the add read its reference from the server, not the cache"
ls "$wcache"/*/ | grep -q '^[0-9a-f]\{16\}=[0-9a-f]\{16\}$' || fail "no segment in the cache"
with=$(fetched "$wcache" cache1.traj extract -O step-000004.safetensors)
cmp "$TEST_TMP/out" "$mid/step-000004.safetensors" || fail "extract through the cache reads wrong"
[ $((with * 5)) -lt "$(file_size "$mid/step-000004.safetensors")" ] ||
    fail "extract through the cache fetched $with bytes"
for seg in "$wcache"/*/*=*; do
    printf 'X' | dd of="$seg" bs=1 seek=1000 conv=notrunc 2> /dev/null
done
fetched "$wcache" cache1.traj extract -O step-000004.safetensors > /dev/null
cmp "$TEST_TMP/out" "$mid/step-000004.safetensors" || fail "a damaged segment in the cache was served"
TRAJFS_REMOTE_OPTIONS=cache_dir=$wcache "$TRAJPACK" verify "s3://test-bucket/cache1.traj" > /dev/null ||
    fail "verify through the cache failed"
joined cache0.traj "$TEST_TMP/j0"
joined cache1.traj "$TEST_TMP/j1"
cmp "$TEST_TMP/j0" "$TEST_TMP/j1" || fail "a writer with a cache wrote other bytes"

# ---- faults during uploads: retried, each commit lands once ----
n=0
for fault in "upfail 503 2" "upfail 500 1" "upreset 1" "uplost 1 ffffffff-" "upreset 1 partNumber=2" \
    "uplost 1 ?uploadId="; do
    n=$((n + 1))
    echo "$fault" > "$PROXY_MODE"
    case $fault in
    *part* | *uploadId*) head -c 20000000 /dev/urandom > "$TEST_TMP/f$n" ;; # new chunks: all uploaded
    *) cp "$src/fp32/step-000002.safetensors" "$TEST_TMP/f$n" ;;
    esac
    both add "$TEST_TMP/f$n"
    same_bytes "$key" "$local"
done
echo "sigv4 S3RVER" > "$PROXY_MODE"
grep -q "^upfail 503 2 - PUT" "$PROXY_MODE.log" || fail "no upload met the 503s"
grep -q "^upreset 1 partNumber=2 - PUT .*partNumber=2&" "$PROXY_MODE.log" || fail "no part was reset"
grep -q "^uplost 1 ?uploadId= - POST .*?uploadId=" "$PROXY_MODE.log" || fail "no completion was lost"
"$TRAJPACK" verify "$url" > /dev/null || fail "verify after the faults failed"

# ---- two writers racing for the same tail ----
# Each upload held a second: both read the same tail before either
# publishes. One commits; the other fails, names the cause, and changes
# nothing; run again, it commits.
echo "upslow 1" > "$PROXY_MODE"
"$TRAJPACK" add -q --as race-a "$url" "$src/fp32/step-000004.safetensors" 2> "$TEST_TMP/race1" &
one=$!
"$TRAJPACK" add -q --as race-b "$url" "$src/fp32/step-000006.safetensors" 2> "$TEST_TMP/race2" &
two=$!
rc1=0 rc2=0
wait $one || rc1=$?
wait $two || rc2=$?
echo "sigv4 S3RVER" > "$PROXY_MODE"
[ $((rc1 == 0)) -ne $((rc2 == 0)) ] ||
    fail "racing writers: exits $rc1 and $rc2 (one should fail): $(cat "$TEST_TMP/race1" "$TEST_TMP/race2")"
cat "$TEST_TMP/race1" "$TEST_TMP/race2" | grep -q "another writer published a commit first" ||
    fail "the writer that lost the race does not say why: $(cat "$TEST_TMP/race1" "$TEST_TMP/race2")"
if [ $rc1 -ne 0 ]; then lost=race-a step=000004; else lost=race-b step=000006; fi
"$TRAJPACK" list "$url" | grep -q "^$lost$" && fail "the losing writer's file is in the archive"
"$TRAJPACK" add -q --as $lost "$url" "$src/fp32/step-$step.safetensors" || fail "the losing writer's retry failed"
"$TRAJPACK" verify "$url" > /dev/null || fail "verify after the race failed"
wait_for "race-a in the mount" cmp -s "$TEST_TMP/m/race-a" "$src/fp32/step-000004.safetensors" > /dev/null
wait_for "race-b in the mount" cmp -s "$TEST_TMP/m/race-b" "$src/fp32/step-000006.safetensors" > /dev/null

# ---- kill -9 of a writer before, during and after its upload ----
# Uploads held 0.3 s each: the kill lands at the point the log shows.
echo "upslow 0.3" > "$PROXY_MODE"
k=0
for point in "writer-check" "partNumber=1&" "partNumber=3&" "POST .*?uploadId=" "done"; do
    k=$((k + 1))
    head -c 20000000 /dev/urandom > "$TEST_TMP/k$k.bin"
    cat "$PROXY_MODE.log" >> "$TEST_TMP/kills.log"
    : > "$PROXY_MODE.log"
    "$TRAJPACK" add -q "$url" "$TEST_TMP/k$k.bin" 2> /dev/null &
    writer=$!
    acked=0
    if [ "$point" = done ]; then
        wait $writer || fail "the add to be killed after it ended failed"
        acked=1
    else
        wait_for "the writer reaching $point" grep -q "$point" "$PROXY_MODE.log" > /dev/null
        kill -9 $writer 2> /dev/null || true
        wait $writer 2> /dev/null && acked=1
    fi
    "$TRAJPACK" verify "$url" > /dev/null || fail "killed at $point: the archive does not verify"
    if "$TRAJPACK" list "$url" | grep -q "^k$k.bin"; then
        cmp "$TEST_TMP/m/k$k.bin" "$TEST_TMP/k$k.bin" 2> /dev/null ||
            wait_for "k$k.bin in the mount" cmp -s "$TEST_TMP/m/k$k.bin" "$TEST_TMP/k$k.bin" > /dev/null
    else
        [ $acked -eq 0 ] || fail "killed at $point: an acknowledged commit is missing"
        "$TRAJPACK" add -q "$url" "$TEST_TMP/k$k.bin" || fail "killed at $point: the retry failed"
    fi
done
echo "sigv4 S3RVER" > "$PROXY_MODE"
"$TRAJPACK" verify "$url" > /dev/null || fail "verify after the kills failed"
# Writers killed during their uploads leave them under way (s3rver
# neither lists nor aborts them: the proxy does, as S3 does, one a
# page). A writer's open aborts those of a segment the archive holds
# already (not the one at its end, which another writer may be
# uploading): two writers killed in a row, then two adds; none is left.
cat "$PROXY_MODE.log" >> "$TEST_TMP/kills.log"
grep -q "DELETE /test-bucket/runs/run%201.traj/[0-9a-f-]*?uploadId=" "$TEST_TMP/kills.log" ||
    fail "no upload of a killed writer was aborted"
[ ! -s "$PROXY_MODE.uploads" ] || fail "uploads left under way: $(cat "$PROXY_MODE.uploads")"
echo "upslow 0.3" > "$PROXY_MODE"
for k in 1 2; do
    head -c 20000000 /dev/urandom > "$TEST_TMP/dead.bin"
    : > "$PROXY_MODE.log"
    "$TRAJPACK" add -q "$url" "$TEST_TMP/dead.bin" 2> /dev/null &
    writer=$!
    wait_for "the writer uploading" grep -q "partNumber=1&" "$PROXY_MODE.log" > /dev/null
    kill -9 $writer 2> /dev/null || true
    wait $writer 2> /dev/null || true
done
echo "sigv4 S3RVER" > "$PROXY_MODE"
[ "$(wc -l < "$PROXY_MODE.uploads")" -eq 2 ] || fail "not two uploads under way: $(cat "$PROXY_MODE.uploads")"
"$TRAJPACK" add -q --as dead-1 "$url" "$src/config.json" || fail "add after the killed writers failed"
[ "$(wc -l < "$PROXY_MODE.uploads")" -eq 2 ] || fail "an upload at the archive's end was aborted"
: > "$PROXY_MODE.log"
"$TRAJPACK" add -q --as dead-2 "$url" "$src/config.json" || fail "the second add failed"
grep -q "GET /test-bucket/?key-marker=.*uploads" "$PROXY_MODE.log" || fail "the listing of uploads did not page"
[ "$(grep -c "DELETE .*?uploadId=" "$PROXY_MODE.log")" -eq 2 ] || fail "not two aborts"
[ ! -s "$PROXY_MODE.uploads" ] || fail "uploads left under way: $(cat "$PROXY_MODE.uploads")"
"$TRAJPACK" verify "$url" > /dev/null || fail "verify after the aborts failed"
stop_mount "$TEST_TMP/m"

# ---- push ----
pushed="s3://test-bucket/pushed.traj"
"$TRAJPACK" push "$local" "$pushed" > "$TEST_TMP/out" || fail "push failed"
grep -q "pushed [0-9]* commits" "$TEST_TMP/out" || fail "push said: $(cat "$TEST_TMP/out")"
same_bytes pushed.traj "$local"
"$TRAJPACK" push "$local" "$pushed" | grep -q "up to date" || fail "a second push did something"
"$TRAJPACK" add -q "$local" "$src/fp32/step-000004.safetensors"
# Killed during its upload, then run again: it goes on.
echo "upslow 1" > "$PROXY_MODE"
"$TRAJPACK" push -q "$local" "$pushed" &
pusher=$!
wait_for "the push uploading" grep -q "PUT /test-bucket/pushed.traj/ffffffff-" "$PROXY_MODE.log" > /dev/null
kill -9 $pusher 2> /dev/null || true
wait $pusher 2> /dev/null || true
echo "sigv4 S3RVER" > "$PROXY_MODE"
"$TRAJPACK" verify "$pushed" > /dev/null || fail "the copy does not verify after a killed push"
"$TRAJPACK" push -q "$local" "$pushed" || fail "push after a killed push failed"
same_bytes pushed.traj "$local"
# Following: a commit made locally reaches a mount of the copy.
"$TRAJPACK" push -q --follow=0.2 "$local" "$pushed" &
follower=$!
start_mount "$pushed" "$TEST_TMP/p" -o follow=$FOLLOW
"$TRAJPACK" add -q "$local" "$src/fp32/step-000006.safetensors"
ms=$(wait_for "the pushed commit in a mount of the copy" test -e "$TEST_TMP/p/step-000006.safetensors")
echo "a local commit reached a mount of the pushed copy after $ms ms (push --follow=0.2, follow=$FOLLOW)"
cmp "$TEST_TMP/p/step-000006.safetensors" "$src/fp32/step-000006.safetensors" ||
    fail "the mount of the copy reads the pushed checkpoint wrong"
kill -TERM $follower
wait $follower || fail "push --follow did not end cleanly on SIGTERM"
stop_mount "$TEST_TMP/p"
same_bytes pushed.traj "$local"
# A copy that is not the start of the archive.
"$TRAJPACK" create -q "$TEST_TMP/other.traj" "$src/config.json"
"$TRAJPACK" push "$TEST_TMP/other.traj" "$pushed" 2> "$TEST_TMP/err" && fail "push to another archive's copy"
grep -q "not a copy of the start" "$TEST_TMP/err" || fail "unclear refusal: $(cat "$TEST_TMP/err")"
same_bytes pushed.traj "$local"

# ---- prune and gc: a new generation ----
# prune removes in a commit; gc writes the archive anew as generation 1
# (one object) and deletes generation 0. A mount that follows says the
# archive was written anew; a new one reads the same files.
gcurl="s3://test-bucket/gc.traj"
for s in 2 4 6; do
    "$TRAJPACK" add -q --as "step-00000$s.safetensors" "$gcurl" "$src/fp32/step-00000$s.safetensors" 2> /dev/null ||
        "$TRAJPACK" create -q "$gcurl" "$src/fp32/step-00000$s.safetensors" || fail "writing gc.traj failed"
done
"$TRAJPACK" prune -q --keep-last 1 "$gcurl" || fail "prune $gcurl failed"
"$TRAJPACK" list "$gcurl" > "$TEST_TMP/list.before"
grep -q "^step-000002" "$TEST_TMP/list.before" && fail "prune left step 2"
start_mount "$gcurl" "$TEST_TMP/g" -o follow=$FOLLOW
gc_pid=$DAEMON_PID
ls "$s3/test-bucket/gc.traj" | grep -q "^ffffffff-" || fail "no generation 0 before gc"
# Killed while it uploads the new generation: the old one stays sealed,
# readable, refusing commits with the reason; gc run again finishes.
echo "upslow 1" > "$PROXY_MODE"
: > "$PROXY_MODE.log"
"$TRAJPACK" gc -q "$gcurl" &
gcer=$!
wait_for "gc uploading" grep -q "PUT /test-bucket/gc.traj/fffffffe-" "$PROXY_MODE.log" > /dev/null
kill -9 $gcer 2> /dev/null || true
wait $gcer 2> /dev/null || true
echo "sigv4 S3RVER" > "$PROXY_MODE"
ls "$TMPDIR" | grep -q "^trajfs-gc-$gcer-" || fail "the killed gc left no copy in TMPDIR: $(ls "$TMPDIR")"
if ls "$s3/test-bucket/gc.traj" | grep -q "^fffffffe-"; then
    echo "gc killed during its upload: its new generation was in place (the request had reached the server)"
else
    echo "gc killed during its upload: the sealed generation 0 stays"
    "$TRAJPACK" list "$gcurl" | cmp -s - "$TEST_TMP/list.before" || fail "a killed gc changed the files"
    "$TRAJPACK" add -q "$gcurl" "$src/config.json" 2> "$TEST_TMP/err" && fail "a commit to a sealed generation"
    grep -q "trajpack gc is writing the archive anew" "$TEST_TMP/err" || fail "unclear refusal: $(cat "$TEST_TMP/err")"
fi
# This gc's store has no DeleteObjects (answered 501, as some have not):
# it deletes the old objects one by one.
echo "upfail 501 1 ?delete" > "$PROXY_MODE"
: > "$PROXY_MODE.log"
"$TRAJPACK" gc "$gcurl" > "$TEST_TMP/out" || fail "gc $gcurl failed"
echo "sigv4 S3RVER" > "$PROXY_MODE"
grep -q "^gc: " "$TEST_TMP/out" || fail "gc said: $(cat "$TEST_TMP/out")"
grep -q " POST /test-bucket/?delete" "$PROXY_MODE.log" || fail "gc sent no DeleteObjects"
grep -q " DELETE /test-bucket/gc.traj/ffffffff-" "$PROXY_MODE.log" ||
    fail "refused DeleteObjects, gc deleted no object by itself"
! ls "$TMPDIR" | grep -q "^trajfs-gc-" || fail "gc left copies in TMPDIR: $(ls "$TMPDIR")"
ls "$s3/test-bucket/gc.traj" | grep -q "^ffffffff-" && fail "gc left objects of generation 0"
ls "$s3/test-bucket/gc.traj" | grep -q "^fffffffe-ffffffffffffffff\._S3rver_object$" ||
    fail "gc wrote no generation 1: $(ls "$s3/test-bucket/gc.traj")"
"$TRAJPACK" list "$gcurl" | cmp - "$TEST_TMP/list.before" || fail "gc changed the files"
"$TRAJPACK" verify "$gcurl" > /dev/null || fail "the new generation does not verify"
wait_for "the following mount saying the archive was written anew" grep -q "written anew" "$TEST_TMP/g.log" > /dev/null
DAEMON_PID=$gc_pid
stop_mount "$TEST_TMP/g"
"$TRAJPACK" add -q "$gcurl" "$src/config.json" || fail "add after gc failed"
# Generation 1 is two segments now; gc deletes both in one request.
: > "$PROXY_MODE.log"
"$TRAJPACK" gc -q "$gcurl" || fail "the second gc of $gcurl failed"
[ "$(grep -c " POST /test-bucket/?delete" "$PROXY_MODE.log")" = 1 ] ||
    fail "the second gc sent other than one DeleteObjects: $(grep -c " POST /test-bucket/?delete" "$PROXY_MODE.log")"
! grep -q " DELETE /test-bucket/gc.traj/" "$PROXY_MODE.log" || fail "the second gc deleted objects one by one"
[ "$(ls "$s3/test-bucket/gc.traj" | grep -c "^fffffffe-")" = 0 ] || fail "the second gc left generation 1"
[ "$(ls "$s3/test-bucket/gc.traj" | grep -c "^fffffffd-")" -gt 0 ] || fail "the second gc wrote no generation 2"
# A store that answers DeleteObjects with a key it could not delete:
# gc fails, naming the key and the reason; the new generation is in
# place, and the next gc deletes the old ones.
echo "delfail" > "$PROXY_MODE"
"$TRAJPACK" gc -q "$gcurl" 2> "$TEST_TMP/err" && fail "gc succeeded though a key was not deleted"
echo "sigv4 S3RVER" > "$PROXY_MODE"
grep -q "gc.traj/fffffffd-.* was not deleted (AccessDenied)" "$TEST_TMP/err" ||
    fail "unclear failure of a delete: $(cat "$TEST_TMP/err")"
"$TRAJPACK" list "$gcurl" | grep -q "^config.json" || fail "a gc whose delete failed lost a file"
"$TRAJPACK" gc -q "$gcurl" || fail "gc after a failed delete failed"
[ "$(ls "$s3/test-bucket/gc.traj" | grep -c "^ffffff\(fd\|fc\)-")" = 0 ] ||
    fail "gc left older generations: $(ls "$s3/test-bucket/gc.traj")"
[ "$(ls "$s3/test-bucket/gc.traj" | grep -c "^fffffffb-")" -gt 0 ] || fail "no generation 4"
start_mount "$gcurl" "$TEST_TMP/g"
cmp "$TEST_TMP/g/step-000006.safetensors" "$src/fp32/step-000006.safetensors" || fail "after gc, step 6 reads wrong"
cmp "$TEST_TMP/g/config.json" "$src/config.json" || fail "the commit after gc reads wrong"
stop_mount "$TEST_TMP/g"

# ---- a writable mount started as a daemon (no -f) ----
# The process forks before it opens the archive, so that the threads the
# open starts (a reader's fetchers, a writer's uploaders) are the
# daemon's: a fork after them left a file of three parts to uploaders
# that were gone, and its copy never ended. A setup that fails exits 1
# and says why.
dmn="s3://test-bucket/daemon.traj"
mkdir -p "$TEST_TMP/d"
MOUNTED="$MOUNTED $TEST_TMP/d"
"$TRAJFS" "$dmn" "$TEST_TMP/d" -o rw 2> "$TEST_TMP/d.err" || fail "trajfs as a daemon: $(cat "$TEST_TMP/d.err")"
is_mounted "$TEST_TMP/d" || fail "trajfs returned before its mount was up"
daemon_pid=$(pgrep -f -- "trajfs $dmn $TEST_TMP/d")
DAEMONS="$DAEMONS $daemon_pid"
timeout 60 cp "$TEST_TMP/big.bin" "$TEST_TMP/d/" || fail "a copy of three parts into the daemon's mount did not end"
"$TRAJPACK" extract -q -O "$dmn" big.bin | cmp - "$TEST_TMP/big.bin" || fail "the daemon's commit reads wrong"
fusermount3 -u "$TEST_TMP/d"
wait_gone "trajfs $dmn $TEST_TMP/d"
"$TRAJFS" "s3://test-bucket/missing.traj" "$TEST_TMP/d" 2> "$TEST_TMP/d.err" && fail "a daemon mounted a missing archive"
grep -q "missing.traj" "$TEST_TMP/d.err" || fail "a failed daemon said: $(cat "$TEST_TMP/d.err")"
is_mounted "$TEST_TMP/d" && fail "a failed daemon left a mount"

# ---- a writable mount of an archive in the bucket ----
# close() returns once the commit is in the bucket: another process
# lists the file at once, and a mount that follows reads it.
rw="s3://test-bucket/mounted.traj"
start_mount "$rw" "$TEST_TMP/w" -o rw
writer_pid=$DAEMON_PID
start_mount "$rw" "$TEST_TMP/r" -o follow=$FOLLOW
cp "$src/bf16/step-000002.safetensors" "$TEST_TMP/w/"
"$TRAJPACK" list "$rw" | grep -q "^step-000002.safetensors$" || fail "a file closed in the rw mount is not in the bucket"
cp "$src/bf16/step-000004.safetensors" "$TEST_TMP/w/"
ms=$(wait_for "a commit of the rw mount in the following one" cmp -s "$TEST_TMP/r/step-000004.safetensors" \
    "$src/bf16/step-000004.safetensors")
echo "a file closed in a rw mount of $rw was read by a following mount after $ms ms (follow=$FOLLOW)"
stop_mount "$TEST_TMP/r"
DAEMON_PID=$writer_pid
stop_mount "$TEST_TMP/w"
# With cache_dir, the mount's writer keeps its segments there too.
start_mount "$rw" "$TEST_TMP/w" -o rw -o cache_dir="$TEST_TMP/mcache"
cp "$mid/step-000004.safetensors" "$TEST_TMP/w/mid-4.safetensors"
stop_mount "$TEST_TMP/w"
# (What else the read fetches, older commits' catalog pages with what
# comes after them, depends on how the reads batch: half is the bound.)
without=$(fetched - mounted.traj extract -O mid-4.safetensors)
with=$(fetched "$TEST_TMP/mcache" mounted.traj extract -O mid-4.safetensors)
cmp "$TEST_TMP/out" "$mid/step-000004.safetensors" || fail "the rw mount's file reads wrong through its cache"
[ $((with * 2)) -lt "$without" ] ||
    fail "the rw mount's writer kept nothing in its cache_dir ($with bytes fetched, $without without it)"
echo "an extract of the rw mount's file fetched $without bytes, $with with the mount's cache_dir"
"$TRAJPACK" verify "$rw" > /dev/null || fail "the archive the rw mount wrote does not verify"

# ---- Python, without a mount ----
if ls "$top_srcdir"/python/trajfs/_trajfs*.so > /dev/null 2>&1; then
    PYTHONPATH=$top_srcdir/python "$PYTHON" - "s3://test-bucket/py.traj" "$src/bf16" <<'PY' ||
import sys
import trajfs
url, src = sys.argv[1:]
with trajfs.create(url) as ar:
    ar.add("step-000002.safetensors", src + "/step-000002.safetensors")
with trajfs.open(url) as ar:
    ar.add("step-000004.safetensors", src + "/step-000004.safetensors")
with trajfs.open(url) as ar:
    for name in ("step-000002.safetensors", "step-000004.safetensors"):
        with open(src + "/" + name, "rb") as f:
            assert ar.read_bytes(name) == f.read(), name
PY
        fail "Python writing to s3://test-bucket/py.traj failed"
    "$TRAJPACK" verify s3://test-bucket/py.traj > /dev/null || fail "the archive Python wrote does not verify"
fi

# ---- an archive of many segments ----
# The local archive cut into 1,100 segments, put straight into s3rver: an
# open lists the newest 1,000 (one request), and a read of the oldest
# bytes lists the rest.
"$PYTHON" - "$local" "$port" <<'PY' || fail "could not put the segments"
import http.client, sys
data = open(sys.argv[1], "rb").read()
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[2]))
n = 1100
cuts = [len(data) * i // n for i in range(n + 1)]
for a, b in zip(cuts, cuts[1:]):
    key = "/test-bucket/many.traj/%08x-%016x" % (0xFFFFFFFF, ~a & 0xFFFFFFFFFFFFFFFF)
    conn.request("PUT", key, body=data[a:b])
    r = conn.getresponse()
    r.read()
    assert r.status == 200, r.status
PY
many=s3://test-bucket/many.traj
: > "$PROXY_MODE.log"
"$TRAJPACK" list --blobs "$many" > "$TEST_TMP/list.many" || fail "list of 1,100 segments failed"
"$TRAJPACK" list --blobs "$local" | cmp - "$TEST_TMP/list.many" || fail "1,100 segments list other files"
echo "an open of 1,100 segments and a listing: $(grep -c "list-type=2" "$PROXY_MODE.log") listing requests"
"$TRAJPACK" verify "$many" > /dev/null || fail "1,100 segments do not verify"
start_mount "$many" "$TEST_TMP/many"
cmp "$TEST_TMP/many/step-000006.safetensors" "$src/fp32/step-000006.safetensors" ||
    fail "a mount of 1,100 segments reads wrong"
stop_mount "$TEST_TMP/many"

no_sanitizer_report "$TEST_TMP"/*.log
echo "PASS: $TEST_NAME"
