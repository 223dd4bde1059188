#!/bin/sh
# What each descriptor of a writable mount sees (trajfs(1), CONSISTENCY):
# after a truncation through one of two write descriptors, fstat, lseek
# and O_APPEND writes follow it, also across close and reopen; a reader
# never sees another descriptor's writes before they are committed, and
# keeps its version after; directories take the time of a change of
# their names, truncate(2) that of the new size; and a mount refused for
# an unknown option leaves no archive behind.
set -eu
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mountlib.sh"
. "$(dirname "$0")/mount_rwlib.sh"

archive=$TEST_TMP/a.traj
mnt=$TEST_TMP/mnt

# ---- an unknown option: refused before the archive is created ----
mkdir "$mnt"
if "$TRAJFS" "$archive" "$mnt" -f -o rw,no_such_option 2> "$TEST_TMP/bad.log"; then
    fail "a mount with an unknown option succeeded"
fi
[ ! -e "$archive" ] || fail "a mount refused for an unknown option left $archive behind"

start_mount "$archive" "$mnt" -o rw

# ---- sizes after truncation, and O_APPEND ----
"$PYTHON" - "$mnt" <<'PY' || fail "sizes after truncation: see above"
import os, random, sys
p = sys.argv[1] + "/sizes"
with open(p, "wb") as f:
    f.write(b"abc")
a = os.open(p, os.O_RDWR | os.O_APPEND)
b = os.open(p, os.O_RDWR)  # another writer, changed before a's truncation
os.ftruncate(a, 5000)
assert os.fstat(a).st_size == 5000, "fstat after ftruncate: %d" % os.fstat(a).st_size
assert os.lseek(a, 0, os.SEEK_END) == 5000, "lseek(SEEK_END) after ftruncate"
os.write(a, b"x")
os.close(b)
os.close(a)
data = open(p, "rb").read()
assert data == b"abc" + bytes(4997) + b"x", "committed: %d bytes, x at %d" % (len(data), data.find(b"x"))

# Close, reopen, truncate, append: the size each step leaves.
random.seed(1)
model = bytearray()
with open(p, "wb"):
    pass
for i in range(60):
    fd = os.open(p, os.O_RDWR | os.O_APPEND)
    size = len(model) + random.randrange(1, 3000)
    os.ftruncate(fd, size)
    model.extend(bytes(size - len(model)))
    assert os.fstat(fd).st_size == size, "step %d: fstat %d, not %d" % (i, os.fstat(fd).st_size, size)
    os.write(fd, b"%d;" % i)
    model.extend(b"%d;" % i)
    os.close(fd)
assert open(p, "rb").read() == model, "the committed file differs from its writes"
PY

# ---- readers see committed versions only ----
"$PYTHON" - "$mnt" <<'PY' || fail "what readers see: see above"
import os, sys
p = sys.argv[1] + "/versions"
old, new, mid = b"old!" * 2048, b"NEW!" * 2048, b"MID!" * 2048  # whole pages
with open(p, "wb") as f:
    f.write(old)
w = os.open(p, os.O_RDWR)
os.pwrite(w, new, 0)
r = os.open(p, os.O_RDONLY)
assert os.pread(r, len(old), 0) == old, "a reader saw writes not committed"
os.close(w)  # commits
assert os.pread(r, len(old), 0) == old, "a reader lost its version at a commit"
os.close(r)
r = os.open(p, os.O_RDONLY)
assert os.pread(r, len(new), 0) == new, "a reader opened after the commit sees another version"
# A reader open first, then a writer.
w = os.open(p, os.O_RDWR)
os.pwrite(w, mid, 0)
assert os.pread(r, len(new), 0) == new, "a reader open before a writer saw its writes"
os.close(w)
assert os.pread(r, len(new), 0) == new, "a reader open before a writer lost its version"
os.close(r)
assert open(p, "rb").read() == mid, "the writer's version was not committed"
PY

# ---- times ----
"$PYTHON" - "$mnt" <<'PY' || fail "times: see above"
import os, sys
m = sys.argv[1]
os.mkdir(m + "/d")
os.mkdir(m + "/e")
def times(path):
    st = os.stat(path)
    return st.st_mtime_ns, st.st_ctime_ns
def changes(what, action, *paths):
    before = [times(p) for p in paths]
    action()
    for p, (mt, ct) in zip(paths, before):
        nmt, nct = times(p)
        assert nmt > mt and nct > ct, "%s: %s kept its times" % (what, p)
changes("create", lambda: open(m + "/d/f", "wb").write(b"1"), m + "/d")
changes("create in the root", lambda: open(m + "/g", "wb").write(b"1"), m)
changes("rename", lambda: os.rename(m + "/d/f", m + "/e/f"), m + "/d", m + "/e")
changes("remove", lambda: os.unlink(m + "/e/f"), m + "/e")
changes("mkdir", lambda: os.mkdir(m + "/d/sub"), m + "/d")
changes("rmdir", lambda: os.rmdir(m + "/d/sub"), m + "/d")
changes("truncate(2)", lambda: os.truncate(m + "/g", 100), m + "/g")
PY

stop_mount "$mnt"
exit 0
