#!/bin/sh
# An archive in an S3-compatible server (s3rver, from npm) on 127.0.0.1:
# s3://BUCKET/KEY with AWS_ENDPOINT_URL and keys lists, verifies and
# mounts byte-identical. The requests are signed with SigV4: a proxy in
# front checks each signature with the secret (s3rver itself checks the
# key id only) and refuses a request signed with a wrong secret, which
# then fails with a clear message. Without keys the request is anonymous.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/remotelib.sh"

src=$TEST_TMP/src
generate_tiny_trajectory "$src"
"$TRAJPACK" create -q "$TEST_TMP/run.traj" "$src" || fail "create failed"

start_s3rver "$TEST_TMP/s3"
curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$TEST_TMP/run.traj" \
    "http://127.0.0.1:$port/test-bucket/runs/run%201.traj" > /dev/null || fail "upload failed"

start_proxy "http://127.0.0.1:$port"
echo "sigv4 S3RVER" > "$PROXY_MODE"
export AWS_ENDPOINT_URL=http://127.0.0.1:$PROXY_PORT AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
url="s3://test-bucket/runs/run 1.traj"
"$TRAJPACK" list "$TEST_TMP/run.traj" > "$TEST_TMP/list.local"
"$TRAJPACK" list "$url" > "$TEST_TMP/list.remote" || fail "list $url failed"
cmp "$TEST_TMP/list.local" "$TEST_TMP/list.remote" || fail "list differs"
"$TRAJPACK" verify "$url" | grep -q ": OK$" || fail "verify $url failed"
start_mount "$url" "$TEST_TMP/m"
all_same "$src" "$TEST_TMP/m/src"
fusermount3 -u "$TEST_TMP/m"
grep -q "^sigv4 S3RVER bytes=" "$PROXY_MODE.log" || fail "no signed request reached the proxy"

# The Python package (when built) reads the same files without a mount;
# a wrong secret is an OSError that says why and does not show it.
if ls "$top_srcdir"/python/trajfs/_trajfs*.so > /dev/null 2>&1; then
    PYTHONPATH=$top_srcdir/python "$PYTHON" - "$url" "$src" <<'PY' || fail "Python read $url wrong"
import os, sys
import trajfs
url, src = sys.argv[1:]
read = 0
with trajfs.open(url) as ar:
    for d, _, files in os.walk(src):
        for f in files:
            disk = os.path.join(d, f)
            with open(disk, "rb") as fh:
                assert ar.read_bytes("src/" + os.path.relpath(disk, src)) == fh.read(), disk
            read += 1
assert read > 3, read
os.environ["AWS_SECRET_ACCESS_KEY"] = "not-the-secret-1234"
try:
    trajfs.open(url)
    sys.exit("a wrong secret was accepted")
except OSError as e:
    assert "SignatureDoesNotMatch" in str(e) and "not-the-secret-1234" not in str(e), str(e)
PY
fi

AWS_SECRET_ACCESS_KEY=wrong "$TRAJPACK" list "$url" > /dev/null 2> "$TEST_TMP/err" &&
    fail "a wrong secret was accepted"
grep -q "403 (SignatureDoesNotMatch)" "$TEST_TMP/err" || fail "unclear refusal: $(cat "$TEST_TMP/err")"
AWS_ACCESS_KEY_ID=nobody "$TRAJPACK" list "$url" > /dev/null 2> "$TEST_TMP/err" &&
    fail "an unknown key id was accepted"
AWS_ACCESS_KEY_ID= "$TRAJPACK" list "$url" 2> "$TEST_TMP/err" && fail "half the keys accepted"
grep -q "go together" "$TEST_TMP/err" || fail "unclear message: $(cat "$TEST_TMP/err")"

# Anonymous: straight to s3rver (the bucket is public there).
echo pass > "$PROXY_MODE"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "$TRAJPACK" list "$url" > "$TEST_TMP/list.anon" ||
    fail "anonymous list failed"
cmp "$TEST_TMP/list.local" "$TEST_TMP/list.anon" || fail "anonymous list differs"
"$TRAJPACK" list s3://Bad_Bucket/x 2> "$TEST_TMP/err" && fail "a bad bucket name accepted"
echo "PASS: $TEST_NAME"
