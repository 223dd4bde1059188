# Sourced by the read-write mount tests (tests/shell/mount_rw*.sh) after
# lib.sh and mountlib.sh.

WRITE_CHECKPOINTS=$top_srcdir/tests/tools/write_checkpoints.py

"$PYTHON" -c 'import numpy' 2> /dev/null ||
    fail "$PYTHON cannot import numpy (apt-get install python3-numpy)"

# The longest chain of deltas from any blob of ARCHIVE down to a
# self-contained one (refs always name earlier blobs).
max_chain_depth() {
    "$TRAJPACK" list --blobs "$1" | awk -F'\t' '
        NR > 1 { ref[$1] = $6; if ($1 + 0 > last) last = $1 + 0 }
        END {
            m = 0
            for (i = 0; i <= last; i++) {
                if (!(i in ref)) continue
                d[i] = ref[i] == "-" ? 0 : d[ref[i]] + 1
                if (d[i] > m) m = d[i]
            }
            print m
        }'
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
