#!/bin/sh
# NFS: NFS-Ganesha (FSAL_VFS, which works on file handles) re-exports the
# mount read-only on 127.0.0.1; every file read back with libnfs's nfs-cp
# equals its original, again after the kernel dropped its inodes and
# dentries, and again after both the server and trajfs restarted. A
# checkpoint that `trajpack add` appends while the mount is exported
# shows in the server's listing within the mount's follow interval and
# reads back. libnfs looks every path up afresh and caches nothing: the
# handles a client keeps across a restart, and what a caching client
# sees of new checkpoints, are tested with the Linux kernel's client in
# nfs_kernel.sh. The file handle calls themselves are checked directly
# in mount.sh.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

. "$(dirname "$0")/nfslib.sh"
command -v nfs-cp > /dev/null || fail "nfs-cp not found (apt-get install libnfs-utils)"

src=$TEST_TMP/src
generate_run "$src/run"
# The last checkpoint comes later, while the mount is exported.
later=step-000020.safetensors
mv "$src/run/$later" "$TEST_TMP/$later"
mkdir -p "$src/misc/a/b"
seq 1 50000 > "$src/misc/a/b/numbers.txt"
printf 'hello\n' > "$src/misc/hello.txt"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src/run" "$src/misc" || fail "create failed"
mnt=$TEST_TMP/mnt

# A port of our own, so that tests running side by side do not meet.
port=$((20000 + $$ % 20000))
cat > "$GANESHA_DIR/ganesha.conf" <<CONF
NFS_CORE_PARAM {
    Protocols = 4;
    Bind_addr = 127.0.0.1;
    NFS_Port = $port;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    Plugins_Dir = $GANESHA_PLUGINS;
}
NFSv4 {
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = $GANESHA_DIR/state;
}
EXPORT {
    Export_Id = 1;
    Path = $mnt;
    Pseudo = /traj;
    Access_Type = RO;
    Squash = No_Root_Squash;
    Protocols = 4;
    Transports = TCP;
    SecType = sys;
    FSAL { Name = VFS; }
}
# Listings read through, not kept: Ganesha's cache of them would not see
# commits that the mount follows.
MDCACHE { Dir_Chunk = 0; }
LOG { Default_Log_Level = EVENT; }
CONF

# read_all ROUND: every file through NFS, compared with the original.
read_all() {
    list_files "$src" | while IFS= read -r _f; do
        _out=$TEST_TMP/nfs.$1/$_f
        mkdir -p "${_out%/*}"
        nfs-cp "nfs://127.0.0.1/traj/$_f?version=4&nfsport=$port" "$_out" > /dev/null ||
            fail "nfs-cp of $_f failed ($1)"
        cmp "$src/$_f" "$_out" || fail "$_f differs over NFS ($1)"
    done
}

start_mount "$archive" "$mnt"
start_server 1
read_all first

# A commit appended while exported (follow, on by default: 1 s).
nfs_list() {
    nfs-ls "nfs://127.0.0.1/traj/run?version=4&nfsport=$port" | awk '{ print $NF }'
}
if nfs_list | grep -qx "$later"; then
    fail "$later is listed before it was added"
fi
"$TRAJPACK" add -q --as "run/$later" "$archive" "$TEST_TMP/$later" || fail "add failed"
start=$(date +%s%N)
until nfs_list | grep -qx "$later"; do
    [ $(($(date +%s%N) - start)) -le 5000000000 ] || fail "$later not listed over NFS after 5 s"
    sleep 0.05
done
echo "a checkpoint added while exported was listed over NFS after $((($(date +%s%N) - start) / 1000000)) ms"
mv "$TEST_TMP/$later" "$src/run/$later"
read_all followed
echo 2 > /proc/sys/vm/drop_caches
read_all after-drop-caches
stop_server
stop_mount "$mnt"

start_mount "$archive" "$mnt"
start_server 2
read_all after-restart
stop_server
stop_mount "$mnt"
exit 0
