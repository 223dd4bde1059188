# Sourced by the NFS tests after mountlib.sh: NFS-Ganesha (its VFS FSAL)
# serving $GANESHA_DIR/ganesha.conf, which the test writes, on 127.0.0.1.
# Its messages go to $GANESHA_DIR/log.N, N the start's name.

command -v ganesha.nfsd > /dev/null ||
    fail "ganesha.nfsd not found (apt-get install nfs-ganesha nfs-ganesha-vfs)"
GANESHA_VFS=$(find /usr/lib /usr/lib64 -name 'libfsalvfs.so*' 2> /dev/null | head -1)
[ -n "$GANESHA_VFS" ] || fail "Ganesha's VFS FSAL not found (apt-get install nfs-ganesha-vfs)"
# The directory of Ganesha's plugins (Plugins_Dir).
GANESHA_PLUGINS=${GANESHA_VFS%/*}
[ "$(id -u)" = 0 ] || fail "the NFS server needs root (open_by_handle_at)"
GANESHA_DIR=$TEST_TMP/ganesha
mkdir -p "$GANESHA_DIR"

# start_server N: starts Ganesha (SERVER_PID) and waits until it serves;
# the port is the test's $port.
start_server() {
    _log=$GANESHA_DIR/log.$1
    ganesha.nfsd -F -f "$GANESHA_DIR/ganesha.conf" -L "$_log" \
        -p "$GANESHA_DIR/pid" -N NIV_EVENT &
    SERVER_PID=$!
    SERVERS="$SERVERS $SERVER_PID"
    for _ in $(seq 100); do
        grep -q 'NFS SERVER INITIALIZED' "$_log" 2> /dev/null && return 0
        kill -0 "$SERVER_PID" 2> /dev/null || break
        sleep 0.1
    done
    cat "$_log" >&2
    fail "NFS-Ganesha did not start on 127.0.0.1:$port"
}

stop_server() {
    stop_pid "$SERVER_PID"
    wait "$SERVER_PID" || true
    forget_server "$SERVER_PID"
}
