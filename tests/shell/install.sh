#!/bin/sh
# make install into a throwaway root (DESTDIR): trajpack, trajfs and the
# man pages, and mount.trajfs where mount(8) looks for helpers (/sbin,
# /sbin/fs.d or /sbin/fs), a link to the installed trajfs, whatever the
# prefix. make uninstall removes them all.
set -eu
. "$(dirname "$0")/lib.sh"

# make of the build tree, not a sub-make of the make check that runs this
# test (its flags would print directories and share its jobs).
build_make() {
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$top_builddir" "$@"
}
helperdir=$(sed -n 's/^mounthelperdir = //p' "$top_builddir/Makefile")
bindir=$(build_make -f Makefile -f - print-bindir <<'EOF'
print-bindir:
	@echo $(bindir)
EOF
)
if [ "$helperdir" = no ]; then
    echo "SKIP: $TEST_NAME: configured --without-mount-helper-dir"
    exit 77
fi
case $helperdir in
    /sbin | /sbin/fs.d | /sbin/fs) ;;
    *) fail "mount.trajfs goes to $helperdir, where mount(8) does not look" ;;
esac

root=$TEST_TMP/root
build_make install DESTDIR="$root" > "$TEST_TMP/install.log" 2>&1 ||
    { cat "$TEST_TMP/install.log" >&2; fail "make install failed"; }
for p in "$bindir/trajpack" "$bindir/trajfs"; do
    [ -x "$root$p" ] || fail "$p not installed"
done
[ "$(find "$root" -name 'trajfs.1' -o -name 'trajpack.1' -o -name 'trajfs.5' | wc -l)" -eq 3 ] ||
    fail "the three man pages are not installed"
link=$root$helperdir/mount.trajfs
[ -L "$link" ] || fail "no link $helperdir/mount.trajfs"
[ "$(readlink "$link")" = "$bindir/trajfs" ] ||
    fail "$helperdir/mount.trajfs points to $(readlink "$link"), not $bindir/trajfs"
# Run as mount.trajfs, the installed program takes mount(8)'s arguments.
ln -s "$root$bindir/trajfs" "$TEST_TMP/mount.trajfs"
"$TEST_TMP/mount.trajfs" -h > "$TEST_TMP/help" 2>&1 || true
grep -q "mount.trajfs" "$TEST_TMP/help" || fail "mount.trajfs -h does not describe mount.trajfs"

build_make uninstall DESTDIR="$root" > "$TEST_TMP/install.log" 2>&1 ||
    { cat "$TEST_TMP/install.log" >&2; fail "make uninstall failed"; }
left=$(find "$root" ! -type d)
[ -z "$left" ] || fail "make uninstall left $left"
