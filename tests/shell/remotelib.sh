# Sourced by the remote-archive tests after lib.sh and mountlib.sh: real
# servers on 127.0.0.1, started here and stopped by mountlib's cleanup
# (SERVERS) however the test ends. A test skips (77) only when a server
# cannot be had at all.

"$TRAJPACK" list http://127.0.0.1:1/x 2>&1 | grep -q "built without remote" && {
    echo "SKIP: $TEST_NAME: built without remote archives (libcurl)"
    exit 77
}

# all_same SRC DIR: every file below SRC reads back identical below DIR.
all_same() {
    (cd "$1" && find . -type f) | while IFS= read -r _f; do
        cmp "$1/$_f" "$2/$_f" || fail "$2/$_f differs from the original"
    done
}

# start_lighttpd DIR: serves DIR (byte ranges, ETags); sets HTTP_PORT.
# It runs in the foreground of a background job, so its PID is known.
start_lighttpd() {
    command -v lighttpd > /dev/null || {
        echo "SKIP: $TEST_NAME: lighttpd is missing (apt-get install lighttpd)"
        exit 77
    }
    for _try in 1 2 3 4 5; do
        HTTP_PORT=$(( 20000 + $(od -An -tu2 -N2 /dev/urandom | tr -d ' ') % 30000 ))
        cat > "$TEST_TMP/lighttpd.conf" <<CONF
server.document-root = "$1"
server.bind = "127.0.0.1"
server.port = $HTTP_PORT
server.errorlog = "$TEST_TMP/lighttpd.err"
CONF
        restart_lighttpd && return 0
    done
    fail "lighttpd did not start: $(cat "$TEST_TMP/lighttpd.err" 2>/dev/null)"
}

# restart_lighttpd: starts the server of start_lighttpd again, on the
# same port (after stop_pid "$LIGHTTPD_PID"). 0 once it answers.
restart_lighttpd() {
    lighttpd -D -f "$TEST_TMP/lighttpd.conf" &
    LIGHTTPD_PID=$!
    SERVERS="$SERVERS $LIGHTTPD_PID"
    for _ in $(seq 50); do
        kill -0 "$LIGHTTPD_PID" 2>/dev/null || break
        curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/" && return 0
        sleep 0.05
    done
    stop_pid "$LIGHTTPD_PID"
    return 1
}

# start_s3rver DIR: an S3-compatible server (s3rver, which
# .ci/install-deps installs from npm under S3RVER_PREFIX) keeping its
# objects under DIR, with the bucket test-bucket; sets port (the test
# skips when s3rver is not installed).
start_s3rver() {
    _s3rver=${S3RVER:-${S3RVER_PREFIX:-/opt/trajfs-test-tools}/node_modules/.bin/s3rver}
    command -v node > /dev/null && [ -x "$_s3rver" ] || {
        echo "SKIP: $TEST_NAME: s3rver not installed (sh .ci/install-deps --tests installs it from the npm registry)"
        exit 77
    }
    mkdir -p "$1"
    # A listing cut short (IsTruncated) gets a continuation token that
    # s3rver enciphers with a cipher OpenSSL 3 keeps among its legacy
    # ones: without them, such listings answer 500.
    NODE_OPTIONS=--openssl-legacy-provider node "$_s3rver" -d "$1" -a 127.0.0.1 -p 0 --configure-bucket test-bucket > "$TEST_TMP/s3rver.log" 2>&1 &
    SERVERS="$SERVERS $!"
    port=
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$TEST_TMP/s3rver.log")
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || fail "s3rver did not start: $(cat "$TEST_TMP/s3rver.log")"
}

# start_proxy UPSTREAM [PORT]: tests/tools/fault_proxy.py in front of
# UPSTREAM (on PORT: started again); sets PROXY_PORT, PROXY_PID and
# PROXY_MODE (the file whose content is its mode, "pass" to begin with).
start_proxy() {
    PROXY_MODE=$TEST_TMP/proxy.mode
    echo pass > "$PROXY_MODE"
    rm -f "$TEST_TMP/proxy.port"
    "$PYTHON" "$top_srcdir/tests/tools/fault_proxy.py" "$TEST_TMP/proxy.port" "$1" "$PROXY_MODE" ${2:+"$2"} &
    PROXY_PID=$!
    SERVERS="$SERVERS $PROXY_PID"
    for _ in $(seq 100); do
        [ -s "$TEST_TMP/proxy.port" ] && { PROXY_PORT=$(cat "$TEST_TMP/proxy.port"); return 0; }
        sleep 0.05
    done
    fail "the proxy did not start"
}

# expect_eio FILE: reading FILE fails with EIO (not wrong bytes, not a
# hang).
expect_eio() {
    "$PYTHON" -c '
import errno, sys
try:
    open(sys.argv[1], "rb").read()
except OSError as e:
    sys.exit(0 if e.errno == errno.EIO else "read failed with %s, not EIO" % e)
sys.exit("read succeeded")' "$1" || { cat "${PROXY_MODE:-/dev/null}.log" >&2; fail "$1: expected EIO"; }
}
