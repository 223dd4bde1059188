#!/bin/sh
# NFS with the Linux kernel's client: NFS-Ganesha exports the mount with
# the settings of examples/mount/ganesha.conf on 127.0.0.1, and a Linux
# guest in qemu (Debian's kernel, its nfs modules and busybox in a tiny
# initramfs built here; qemu's user network takes the guest's 10.0.2.2
# to this machine's 127.0.0.1, and the guest has no route elsewhere)
# mounts it with the client options trajfs(1) gives.
#
# - A file held open in the guest reads on, byte for byte, after trajfs
#   and Ganesha both restarted and the mount came back with another
#   device number (another mount took the old one), and names are looked
#   up again through the handles the client kept: no ESTALE.
# - A checkpoint that `trajpack add` appends to the followed archive is
#   found by name (a name the guest looked up before it existed) and in
#   the directory's listing within 5 s, and reads back.
#
# Skipped (77) where qemu, a static busybox or a Debian kernel with nfs
# modules is missing (sh .ci/install-deps installs them).
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/nfslib.sh"

skip() {
    echo "SKIP: $TEST_NAME: $*"
    exit 77
}

[ "$(uname -m)" = x86_64 ] || skip "the guest is an x86_64 Debian kernel, this machine is $(uname -m)"
QEMU=${QEMU:-qemu-system-x86_64}
command -v "$QEMU" > /dev/null || skip "$QEMU not found (apt-get install qemu-system-x86)"
"$QEMU" -version > /dev/null 2>&1 || skip "$QEMU does not run here"
busybox=$(command -v busybox || true)
[ -n "$busybox" ] && ldd "$busybox" 2>&1 | grep -q 'not a dynamic\|statically linked' ||
    skip "no static busybox for the guest (apt-get install busybox-static)"

# The guest's kernel: Debian's, installed (/boot, /lib/modules) or
# unpacked from its package (.ci/install-deps unpacks it into
# /opt/trajfs-test-tools/linux; TRAJFS_TEST_LINUX names another tree).
vmlinuz="" moddir=""
for root in ${TRAJFS_TEST_LINUX:-} /opt/trajfs-test-tools/linux ""; do
    for k in "$root"/boot/vmlinuz-*; do
        v=${k##*/vmlinuz-}
        if [ -r "$k" ] && ls "$root/lib/modules/$v/kernel/fs/nfs/nfsv4.ko"* > /dev/null 2>&1; then
            vmlinuz=$k moddir=$root/lib/modules/$v
            break 2
        fi
    done
done
[ -n "$vmlinuz" ] ||
    skip "no Linux kernel with nfs modules for the guest (sh .ci/install-deps unpacks Debian's into /opt/trajfs-test-tools/linux; or set TRAJFS_TEST_LINUX)"

# --- the initramfs: busybox, the modules of the NFS client and of the
# e1000 network card (each after the ones it depends on), and /init, a
# shell that runs the lines it reads from its second serial port.
guestdir=$TEST_TMP/guest
rootfs=$guestdir/rootfs
mkdir -p "$rootfs/bin" "$rootfs/modules" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/mnt" "$rootfs/tmp"
cp "$busybox" "$rootfs/bin/busybox"
module_file() { # module_file NAME: its file below $moddir
    _alt=$(echo "$1" | tr _ -)
    find "$moddir/kernel" \( -name "$1.ko*" -o -name "$_alt.ko*" \) | head -1
}
add_module() { # add_module NAME: NAME and what it depends on, in order
    grep -qx "$1" "$guestdir/modules" 2> /dev/null && return 0
    _f=$(module_file "$1")
    [ -n "$_f" ] || skip "module $1 missing below $moddir"
    case $_f in
    *.ko) cat "$_f" ;;
    *.ko.xz) xz -dc "$_f" ;;
    *.ko.zst) zstd -qdc "$_f" ;;
    *) skip "module $_f: unknown compression" ;;
    esac > "$rootfs/modules/$1.ko" || skip "cannot unpack $_f"
    for _d in $(tr '\0' '\n' < "$rootfs/modules/$1.ko" | sed -n 's/^depends=//p' | tr , ' '); do
        add_module "$_d"
    done
    echo "$1" >> "$guestdir/modules"
}
: > "$guestdir/modules"
add_module nfsv4
add_module e1000
cp "$guestdir/modules" "$rootfs/modules/order"
cat > "$rootfs/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec 0< /dev/null
for m in $(cat /modules/order); do
    insmod "/modules/$m.ko" || echo "@@insmod $m failed"
done
hostname trajfs-guest
ip link set lo up
ip link set eth0 up
# 10.0.2.0/24 only: qemu's 10.0.2.2 is the host's 127.0.0.1.
ip addr add 10.0.2.15/24 dev eth0
stty -F /dev/ttyS1 raw -echo
exec 3< /dev/ttyS1
echo "@@ready"
while read -r seq cmd <&3; do
    eval "$cmd"
    echo "@@done $seq $?"
done
INIT
chmod +x "$rootfs/init"
(cd "$rootfs" && find . | "$busybox" cpio -o -H newc > "$guestdir/initrd" 2> /dev/null) ||
    fail "cpio of the initramfs failed"

# --- the archive, the mount, the server
src=$TEST_TMP/src
generate_run "$src/run"
held=step-000010.safetensors      # held open across the restart
other=step-000005.safetensors     # looked up after the restart
by_name=step-000015.safetensors   # added while the guest looks it up
by_listing=step-000020.safetensors  # added while the guest lists run/
mv "$src/run/$by_name" "$src/run/$by_listing" "$TEST_TMP/"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src/run" || fail "create failed"
mnt=$TEST_TMP/mnt

# The example export, with this test's mount point, state directory,
# address and port (a port of our own: tests running side by side do not
# meet).
port=$((40000 + $$ % 20000))
example=$top_srcdir/examples/mount/ganesha.conf
awk -v mnt="$mnt" -v state="$GANESHA_DIR/state" -v port="$port" -v plugins="$GANESHA_PLUGINS" '
    /^[ \t]*Path[ \t]*=/ { sub(/=.*/, "= " mnt ";"); paths++ }
    /^[ \t]*RecoveryRoot[ \t]*=/ { sub(/=.*/, "= " state ";"); roots++ }
    { print }
    /^NFS_CORE_PARAM[ \t]*\{/ {
        print "    Bind_addr = 127.0.0.1;"; print "    NFS_Port = " port ";"
        print "    Enable_UDP = false;"; print "    Plugins_Dir = " plugins ";"; cores++
    }
    END { if (paths != 1 || roots != 1 || cores != 1) exit 1 }
' "$example" > "$GANESHA_DIR/ganesha.conf" || fail "$example: no Path, RecoveryRoot or NFS_CORE_PARAM to adapt"
pseudo=$(sed -n 's/^[ \t]*Pseudo[ \t]*=[ \t]*\([^; \t]*\).*/\1/p' "$example")
[ -n "$pseudo" ] || fail "$example has no Pseudo path"

# --- the guest
console=$guestdir/console
mkfifo "$guestdir/ctl.in" "$guestdir/ctl.out"
# Emulated (TCG), not KVM: in a virtual machine /dev/kvm can be there and
# still hang the guest (nested virtualization: no console in 300 s, where
# TCG runs the whole test in about 20 s).
"$QEMU" -nodefaults -display none -monitor none -no-reboot -accel tcg -m 256 -smp 1 \
    -kernel "$vmlinuz" -initrd "$guestdir/initrd" \
    -append "console=ttyS0 rdinit=/init panic=-1 quiet mitigations=off" \
    -serial "file:$console" -serial "pipe:$guestdir/ctl" \
    -netdev user,id=n0,ipv6=off -device e1000,netdev=n0,romfile= \
    > "$guestdir/qemu.log" 2>&1 &
QEMU_PID=$!
# The exit trap stops servers first: the guest goes before Ganesha.
SERVERS="$QEMU_PID $SERVERS"
# qemu opens the pipe read-write; so does this shell (a fifo opened so
# never blocks, whether qemu runs or not).
exec 3<> "$guestdir/ctl.in"

# guest_wait PATTERN SECONDS WHAT: waits until the guest's console shows
# PATTERN (a bound only so that a broken guest fails instead of hanging).
guest_wait() {
    _end=$(($(date +%s) + $2))
    until grep -q -- "$1" "$console" 2> /dev/null; do
        if ! kill -0 "$QEMU_PID" 2> /dev/null || [ "$(date +%s)" -gt "$_end" ]; then
            cat "$guestdir/qemu.log" >&2
            guest_fail "$3: the guest did not answer (its console above)"
        fi
        sleep 0.02
    done
}

# guest SECONDS COMMAND: runs COMMAND in the guest's shell (its output
# goes to the console), returns its exit status.
GUEST_SEQ=0
guest() {
    GUEST_SEQ=$((GUEST_SEQ + 1))
    printf '%s %s\n' "$GUEST_SEQ" "$2" >&3
    guest_wait "@@done $GUEST_SEQ " "$1" "$2"
    return "$(tr -d '\r' < "$console" | sed -n "s/.*@@done $GUEST_SEQ \([0-9]*\).*/\1/p" | head -1)"
}

# guest_fail MESSAGE: fails, showing the end of the guest's console.
guest_fail() {
    tr -d '\r' < "$console" | grep -v "^@@" | tail -n 40 >&2
    for _log in "$GANESHA_DIR"/log.*; do
        echo "== $_log" >&2
        tail -n 15 "$_log" >&2
    done
    fail "$@"
}

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

start_mount "$archive" "$mnt"
trajfs_pid=$DAEMON_PID
dev_before=$(stat -c %d "$mnt")
start_server 1

boot_start=$(now_ms)
# qemu itself failing (it says why on its standard error, before any
# guest runs) is a machine where the guest cannot run: skipped. A guest
# that boots and fails fails the test.
for _ in $(seq 600); do
    grep -q @@ready "$console" 2> /dev/null && break
    kill -0 "$QEMU_PID" 2> /dev/null || break
    sleep 0.05
done
if ! grep -q @@ready "$console" 2> /dev/null && ! kill -0 "$QEMU_PID" 2> /dev/null &&
    [ -s "$guestdir/qemu.log" ]; then
    skip "$QEMU cannot run the guest here: $(head -n 3 "$guestdir/qemu.log" | tr '\n' ' ')"
fi
guest_wait @@ready 300 "booting"
echo "the guest booted in $(($(now_ms) - boot_start)) ms"
if grep -q '@@insmod' "$console"; then
    cat "$console" >&2
    fail "the guest could not load its modules"
fi

# The client options that the example (and trajfs(1)) gives.
options=$(sed -n 's/^# *Clients: *mount -t nfs4 -o \([^ ]*\) .*/\1/p' "$example")
[ -n "$options" ] || fail "$example shows no client mount (# Clients: mount -t nfs4 -o OPTIONS ...)"
# busybox's mount passes the options to the kernel as they are: it does
# not try 4.2, then 4.1, as mount.nfs does (the kernel alone takes 4.0).
guest 120 "mount -t nfs4 -o $options,vers=4.2,port=$port,addr=10.0.2.2 10.0.2.2:$pseudo /mnt" ||
    guest_fail "the guest could not mount the export"

# --- a file held open across a restart of trajfs and Ganesha
guest 60 "exec 5< /mnt/run/$held && dd bs=65536 count=1 <&5 > /tmp/held 2> /dev/null" ||
    guest_fail "the guest could not open and read $held"

stop_server
DAEMON_PID=$trajfs_pid
stop_mount "$mnt"
# Another mount takes the device number that trajfs had, so that the
# restarted mount gets another: until the remount's number differs, it
# is unmounted again and a filler mount takes the number.
tries=0
while :; do
    start_mount "$archive" "$mnt"
    trajfs_pid=$DAEMON_PID
    dev_after=$(stat -c %d "$mnt")
    [ "$dev_after" != "$dev_before" ] && break
    tries=$((tries + 1))
    [ "$tries" -le 10 ] || fail "the remount got device number $dev_after again, 10 times"
    stop_mount "$mnt"
    start_mount "$archive" "$TEST_TMP/filler.$tries"
done
echo "device number of the mount: $dev_before, after the restart $dev_after"
start_server 2

# The held file's pages are dropped in the guest, so that its client
# reads the rest from the restarted server by the handle it kept.
restarted=$(now_ms)
guest 120 "echo 3 > /proc/sys/vm/drop_caches; dd bs=65536 <&5 >> /tmp/held && exec 5<&-" ||
    guest_fail "the held $held did not read on after the restart"
sum=$(sha256sum < "$src/run/$held" | cut -d' ' -f1)
guest 30 "[ \"\$(sha256sum < /tmp/held | cut -d' ' -f1)\" = $sum ]" ||
    guest_fail "the held $held read back different bytes across the restart"
guest 60 "[ \"\$(sha256sum < /mnt/run/$other | cut -d' ' -f1)\" = $(sha256sum < "$src/run/$other" | cut -d' ' -f1) ]" ||
    guest_fail "$other, looked up after the restart, did not read back"
guest 60 "ls /mnt/run | grep -qx $other" || guest_fail "the listing after the restart lacks $other"
echo "$held read on after the restart, $other looked up and read, in $(($(now_ms) - restarted)) ms"

# --- checkpoints added while the guest looks for them
# appears NAME HOW: the guest looks for NAME every 0.1 s, HOW: by its
# name (a name it looked up before it existed) or in the listing of
# run/ (without looking the name up); it says when it first did not
# find it, the add starts then, and the time from the end of the add to
# the guest's finding it must be at most 5 s. Then it reads back.
appears() {
    case $2 in
    name) _check="[ -e /mnt/run/$1 ]" ;;
    listing) _check="ls /mnt/run | grep -qx $1" ;;
    esac
    GUEST_SEQ=$((GUEST_SEQ + 1))
    printf '%s %s\n' "$GUEST_SEQ" "n=0; while ! $_check; do [ \$n = 0 ] && echo @@looking-$GUEST_SEQ.; n=\$((n + 1)); [ \$n -lt 600 ] || break; sleep 0.1; done; $_check && echo @@seen-$GUEST_SEQ." >&3
    guest_wait "@@looking-$GUEST_SEQ\.\|@@seen-$GUEST_SEQ\." 60 "looking for $1"
    if grep -q "@@seen-$GUEST_SEQ\." "$console"; then
        guest_fail "$1 was found ($2) before it was added"
    fi
    "$TRAJPACK" add -q --as "run/$1" "$archive" "$TEST_TMP/$1" || fail "add of $1 failed"
    _added=$(now_ms)
    guest_wait "@@seen-$GUEST_SEQ\." 65 "$1 ($2)"
    _ms=$(($(now_ms) - _added))
    guest_wait "@@done $GUEST_SEQ " 10 "the end of the look for $1"
    echo "$1, added to the archive, found in the guest ($2) after $_ms ms"
    [ "$_ms" -le 5000 ] || guest_fail "$1 was found ($2) only after $_ms ms (more than 5 s)"
    mv "$TEST_TMP/$1" "$src/run/$1"
    guest 60 "[ \"\$(sha256sum < /mnt/run/$1 | cut -d' ' -f1)\" = $(sha256sum < "$src/run/$1" | cut -d' ' -f1) ]" ||
        guest_fail "$1 did not read back in the guest"
}
appears "$by_name" name
appears "$by_listing" listing

guest 60 "umount /mnt" || guest_fail "the guest could not unmount the export"
printf '%s %s\n' end "poweroff -f" >&3
for _ in $(seq 200); do
    kill -0 "$QEMU_PID" 2> /dev/null || break
    sleep 0.05
done
stop_pid "$QEMU_PID"
wait "$QEMU_PID" || true
forget_server "$QEMU_PID"
stop_server
stop_mount "$mnt"
exit 0
