#!/bin/sh
# A remote archive's secrets and a hostile network or cache directory:
# - no message shows a URL's user, password or query (a presigned URL's
#   signature); a URL can be given as url-env:NAME or url-file:PATH, out
#   of the command line that ps shows;
# - a server that drips bytes is timed out (min_speed over timeout); an
#   unmount does not wait for a fetch under way (a read's ends within its
#   timeout, the follow thread's at once); an HTTP error while the archive
#   is opened is reported as that error, not as damage;
# - the disk cache removes only its own entries: never a file beside
#   them, nor one behind a link; it refuses a directory that is not its
#   user's alone.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/remotelib.sh"

# An archive of six commits of 32 KiB each, incompressible. Opening it
# takes two requests (the superblock, then the tail: the last trailer and
# the catalog it names); a server that fails the second fails the open.
src=$TEST_TMP/src
mkdir -p "$src" "$TEST_TMP/www"
archive=$TEST_TMP/www/run.traj
for i in 1 2 3 4 5 6; do
    head -c 32768 /dev/urandom > "$src/f$i.bin"
    [ "$i" = 1 ] && how=create || how=add
    "$TRAJPACK" "$how" -q "$archive" "$src/f$i.bin" || fail "$how $i failed"
done
start_lighttpd "$TEST_TMP/www"
start_proxy "http://127.0.0.1:$HTTP_PORT"
url=http://127.0.0.1:$HTTP_PORT/run.traj
purl=http://127.0.0.1:$PROXY_PORT/run.traj
"$TRAJPACK" list "$archive" > "$TEST_TMP/list.local"

# ---- secrets stay out of messages, of ps and of /proc/mounts ----
secret="X-Amz-Credential=KEYID&X-Amz-Signature=SIGSECRET"
# no_secret FILE...: none of them shows the password or the signature.
no_secret() {
    ! grep -l "PWSECRET\|SIGSECRET\|KEYID" "$@" || fail "a secret is shown: $(cat "$@")"
}
"$TRAJPACK" list "http://user:PWSECRET@127.0.0.1:$HTTP_PORT/none.traj?$secret" \
    > /dev/null 2> "$TEST_TMP/err" && fail "a missing URL listed"
grep -q "http://127.0.0.1:$HTTP_PORT/none.traj: .*404" "$TEST_TMP/err" ||
    fail "the 404 is not told: $(cat "$TEST_TMP/err")"
no_secret "$TEST_TMP/err"
echo "status 503 1" > "$PROXY_MODE"
mkdir "$TEST_TMP/m1"
timeout 60 "$TRAJFS" "http://user:PWSECRET@127.0.0.1:$PROXY_PORT/run.traj?$secret" "$TEST_TMP/m1" \
    -f -o retries=0 2> "$TEST_TMP/m1.log" && fail "a mount through a server answering 503 succeeded"
grep -q "503" "$TEST_TMP/m1.log" || fail "the mount's 503 is not told: $(cat "$TEST_TMP/m1.log")"
no_secret "$TEST_TMP/m1.log"
echo pass > "$PROXY_MODE"

export TRAJFS_TEST_URL="$url?$secret"
"$TRAJPACK" list url-env:TRAJFS_TEST_URL > "$TEST_TMP/list.env" || fail "list url-env: failed"
cmp "$TEST_TMP/list.local" "$TEST_TMP/list.env" || fail "list url-env: differs"
printf '%s\n' "$url?$secret" > "$TEST_TMP/url"
chmod 600 "$TEST_TMP/url"
"$TRAJPACK" list "url-file:$TEST_TMP/url" > "$TEST_TMP/list.file" || fail "list url-file: failed"
cmp "$TEST_TMP/list.local" "$TEST_TMP/list.file" || fail "list url-file: differs"
start_mount url-env:TRAJFS_TEST_URL "$TEST_TMP/m1"
cmp "$src/f1.bin" "$TEST_TMP/m1/f1.bin" || fail "the url-env: mount reads otherwise"
tr '\0' ' ' < "/proc/$DAEMON_PID/cmdline" > "$TEST_TMP/cmdline"
no_secret "$TEST_TMP/cmdline" /proc/self/mountinfo
stop_mount "$TEST_TMP/m1"
unset TRAJFS_TEST_URL
"$TRAJPACK" list url-env:TRAJFS_TEST_URL 2> "$TEST_TMP/err" && fail "an unset variable listed"
grep -q "url-env:TRAJFS_TEST_URL: the variable is not set" "$TEST_TMP/err" ||
    fail "unexpected message: $(cat "$TEST_TMP/err")"
echo "not a URL PWSECRET" > "$TEST_TMP/url"
"$TRAJPACK" list "url-file:$TEST_TMP/url" 2> "$TEST_TMP/err" && fail "a bad URL file listed"
grep -q "not an http://, https:// or s3:// URL" "$TEST_TMP/err" ||
    fail "unexpected message: $(cat "$TEST_TMP/err")"
no_secret "$TEST_TMP/err"

# ---- an HTTP error while opening is that error ----
for code in 503 302; do
    echo "status $code 1" > "$PROXY_MODE"
    TRAJFS_REMOTE_OPTIONS=retries=1 "$TRAJPACK" list "$purl" > /dev/null 2> "$TEST_TMP/err" &&
        fail "list through a server answering $code succeeded"
    grep -q "HTTP status $code" "$TEST_TMP/err" || fail "$code is not told: $(cat "$TEST_TMP/err")"
    ! grep -q "chain broken" "$TEST_TMP/err" || fail "$code told as damage: $(cat "$TEST_TMP/err")"
done
echo pass > "$PROXY_MODE"

# ---- a server that drips 2 bytes a second ----
start_mount "$purl" "$TEST_TMP/m1" -o timeout=2,retries=0,min_speed=1K
echo "drip 2" > "$PROXY_MODE"
timeout 60 "$PYTHON" -c '
import errno, sys
try:
    open(sys.argv[1], "rb").read()
except OSError as e:
    sys.exit(0 if e.errno == errno.EIO else "read failed with %s, not EIO" % e)
sys.exit("read succeeded")' "$TEST_TMP/m1/f2.bin" || fail "a dripping read did not fail with EIO (status $?)"
# A read under way when the mount goes: the daemon exits within the
# timeout, not when the drip ends.
drips() { grep -c "^drip 2 bytes=" "$PROXY_MODE.log"; }
before=$(drips)
more_drips() { [ "$(drips)" -gt "$before" ]; }
cat "$TEST_TMP/m1/f3.bin" > /dev/null 2>&1 &
reader=$!
FOLLOW=0 wait_for "the read of f3 at the proxy" more_drips > /dev/null
fusermount3 -uz "$TEST_TMP/m1" || fail "fusermount3 -uz failed"
wait_daemon "$DAEMON_PID" || true
wait "$reader" && fail "the dripped read succeeded"
# A look of the follow thread under way when the mount goes, at a server
# that holds its answer far longer than the test: the unmount ends it.
echo pass > "$PROXY_MODE"
start_mount "$purl" "$TEST_TMP/m2" -o follow=0.1,timeout=600
echo "delay 600" > "$PROXY_MODE"
FOLLOW=0 wait_for "a look at the proxy" grep -q "^delay 600" "$PROXY_MODE.log" > /dev/null
stop_mount "$TEST_TMP/m2"
echo pass > "$PROXY_MODE"

# ---- the cache removes only its entries, in a directory of its user ----
cache=$TEST_TMP/cache
mkdir -p "$cache/precious" "$TEST_TMP/thesis" "$cache/0123456789abcdef0123456789abcdef"
echo notes > "$cache/precious/notes.txt"
echo stale > "$cache/precious/.tmp-1-1"
echo chapter > "$TEST_TMP/thesis/chapter1.tex"
echo other > "$cache/0123456789abcdef0123456789abcdef/notes"
ln -s "$TEST_TMP/thesis" "$cache/link"
ln -s "$TEST_TMP/thesis" "$cache/fedcba9876543210fedcba9876543210"
touch -h -d 2000-01-01 "$cache/precious/notes.txt" "$cache/precious/.tmp-1-1" \
    "$TEST_TMP/thesis/chapter1.tex" "$cache/0123456789abcdef0123456789abcdef/notes"
chmod 700 "$cache"
mkdir "$TEST_TMP/out"
TRAJFS_REMOTE_OPTIONS="cache_dir=$cache,cache_max=64K" "$TRAJPACK" extract -q "$url" \
    -C "$TEST_TMP/out" || fail "extract with a cache failed"
for f in "$src"/*; do
    cmp "$f" "$TEST_TMP/out/${f##*/}" || fail "${f##*/} extracts otherwise"
done
for f in precious/notes.txt precious/.tmp-1-1 0123456789abcdef0123456789abcdef/notes \
    link/chapter1.tex; do
    [ -e "$cache/$f" ] || fail "the cache removed $f, not its own"
done
# 192 KiB fetched, 64 KiB kept: the cache evicted entries of its own.
kept=$(find "$cache" -name '????????????????-????????????????' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
[ "$kept" -gt 0 ] && [ "$kept" -le 65536 ] || fail "the cache holds $kept bytes of entries"

# refused MESSAGE: a list with cache_dir=$dir fails, saying MESSAGE.
refused() {
    TRAJFS_REMOTE_OPTIONS="cache_dir=$dir" "$TRAJPACK" list "$url" > /dev/null 2> "$TEST_TMP/err" &&
        fail "cache_dir=$dir was used"
    grep -q "$1" "$TEST_TMP/err" || fail "unexpected message: $(cat "$TEST_TMP/err")"
}
dir=$TEST_TMP/shared
mkdir -m 1777 "$dir"
refused "may be written by others (mode 1777): refused"
dir=$TEST_TMP/linked
ln -s "$cache" "$dir"
refused "not a directory (a link?): refused"
if [ "$(id -u)" = 0 ]; then
    dir=$TEST_TMP/theirs
    mkdir -m 700 "$dir"
    chown 65534 "$dir"
    refused "belongs to uid 65534, not to this user"
fi
exit 0
