# Sourced by the read-write mount tests (tests/shell/mount_rw*.sh) after
# lib.sh and mountlib.sh.

WRITE_CHECKPOINTS=$top_srcdir/tests/tools/write_checkpoints.py

"$PYTHON" -c 'import numpy' 2> /dev/null ||
    fail "$PYTHON cannot import numpy (apt-get install python3-numpy)"

# The longest chain of deltas that a read of a file of ARCHIVE decodes,
# down to a self-contained blob (trajpack stats; references follow
# redirects, so they may name later blobs).
max_chain_depth() {
    "$TRAJPACK" stats --json "$1" | sed -n 's/.*"chains": {.*"longest": \([0-9]*\).*/\1/p'
}

# Inode number and path of everything below DIR, sorted by path.
inode_list() {
    (cd "$1" && find . -printf '%i %p\n' | LC_ALL=C sort -k 2)
}

# assert_mounted_rw DIR: a fuse.trajfs mount without the ro flag.
assert_mounted_rw() {
    awk -v d="$1" '$5 == d && $6 ~ /(^|,)rw(,|$)/ { f = 1 } END { exit !f }' /proc/self/mountinfo ||
        fail "$1 is not mounted read-write: $(grep " $1 " /proc/self/mountinfo)"
}
