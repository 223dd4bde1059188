#!/bin/sh
# File modes through a read-only mount shared with other users
# (-o allow_other,default_permissions, and -o allow_other alone, which
# implies default_permissions): the kernel checks each access against the
# modes stored in the archive and the owner of the archive file. Another
# user reads a 0644 file, cannot read a 0600 file nor enter a 0700
# directory (EACCES), and cannot change anything (EROFS); the owner
# (root) reads everything and cannot change anything either.
# Needs root (a second user, allow_other): skipped otherwise.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v setpriv > /dev/null; then
    echo "SKIP: $TEST_NAME: needs root and setpriv"
    exit 77
fi

# The other user: nobody, or one made for the test (removed on exit).
other=nobody
made_user=""
if ! id -u "$other" > /dev/null 2>&1; then
    other=trajfs-perm-test
    useradd --system --no-create-home --shell /usr/sbin/nologin "$other" ||
        fail "useradd $other failed"
    made_user=$other
fi
trap 'mount_cleanup; [ -z "$made_user" ] || userdel "$made_user"; rm -rf "$TEST_TMP"' EXIT
as_other() {
    setpriv --reuid="$(id -u "$other")" --regid="$(id -g "$other")" --clear-groups "$@"
}

# The mount point must be reachable for the other user.
chmod 0755 "$TEST_TMP"
src=$TEST_TMP/src
mkdir -p "$src/private"
printf 'for everyone\n' > "$src/public.txt"
printf 'for root only\n' > "$src/secret.txt"
printf 'inside a closed directory\n' > "$src/private/inner.txt"
chmod 0644 "$src/public.txt" "$src/private/inner.txt"
chmod 0600 "$src/secret.txt"
chmod 0700 "$src/private"
archive=$TEST_TMP/a.traj
"$TRAJPACK" create -q "$archive" "$src/public.txt" "$src/secret.txt" "$src/private" ||
    fail "create failed"
chmod 0644 "$archive"
cp "$archive" "$TEST_TMP/before.traj"

# expect_error MESSAGE COMMAND...: COMMAND fails saying MESSAGE.
expect_error() {
    _msg=$1
    shift
    if "$@" > "$TEST_TMP/out" 2> "$TEST_TMP/err"; then
        fail "$* succeeded, expected '$_msg'"
    fi
    grep -qF "$_msg" "$TEST_TMP/err" || fail "$*: expected '$_msg', got: $(cat "$TEST_TMP/err")"
}

# check_mount OPTIONS: mounts with -o OPTIONS, checks reading and writing
# as both users, and unmounts.
check_mount() {
    mnt=$TEST_TMP/mnt-$(printf %s "$1" | tr , -)
    start_mount "$archive" "$mnt" -o "$1"
    [ "$(stat -c '%U %a' "$mnt/secret.txt")" = "root 600" ] ||
        fail "$1: secret.txt: $(stat -c '%U %a' "$mnt/secret.txt"), expected root 600"

    # ---- reading: the modes decide ---------------------------------------------------

    [ "$(as_other cat "$mnt/public.txt")" = "for everyone" ] || fail "$1: $other cannot read public.txt"
    [ "$(as_other stat -c %a "$mnt/secret.txt")" = 600 ] || fail "$1: $other cannot stat secret.txt"
    expect_error "Permission denied" as_other cat "$mnt/secret.txt"
    expect_error "Permission denied" as_other ls "$mnt/private"
    expect_error "Permission denied" as_other cat "$mnt/private/inner.txt"
    [ "$(cat "$mnt/secret.txt")" = "for root only" ] || fail "$1: root cannot read secret.txt"
    [ "$(cat "$mnt/private/inner.txt")" = "inside a closed directory" ] ||
        fail "$1: root cannot read private/inner.txt"

    # ---- writing: a read-only mount, for everyone -------------------------------------

    for who in as_other env; do
        expect_error "Read-only file system" $who sh -c "echo x >> '$mnt/public.txt'"
        expect_error "Read-only file system" $who truncate -s 0 "$mnt/public.txt"
        expect_error "Read-only file system" $who touch "$mnt/new.txt"
        expect_error "Read-only file system" $who mkdir "$mnt/newdir"
        expect_error "Read-only file system" $who rm -f "$mnt/public.txt"
        expect_error "Read-only file system" $who mv "$mnt/public.txt" "$mnt/moved.txt"
        expect_error "Read-only file system" $who chmod 0666 "$mnt/public.txt"
        expect_error "Read-only file system" $who ln -s public.txt "$mnt/link"
    done
    expect_error "Read-only file system" cp "$src/public.txt" "$mnt/copy.txt"

    stop_mount "$mnt"
}

check_mount allow_other,default_permissions
# trajfs checks no permissions itself: allow_other must turn the kernel's on.
check_mount allow_other
cmp -s "$archive" "$TEST_TMP/before.traj" || fail "the archive changed"
exit 0
