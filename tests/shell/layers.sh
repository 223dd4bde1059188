#!/bin/sh
# The layers of src/ (README.md, Architecture): a file includes headers of
# its own layer, of the layer directly below it, and of common/, the
# foundation everything uses:
#
#     fs/, cli/, python/  ->  store/, common/   (python/: the extension)
#     store/     ->  format/, codec/, common/
#     format/    ->  io/, common/          codec/  ->  common/ (beside format/)
#     io/        ->  common/
#
# Reads every #include "..." under $top_srcdir/src and of the Python
# extension (python/trajfs/_trajfs.c) and fails naming each
# one that climbs or skips a layer (or crosses to the one beside it), and
# each one that is part of a circle (a header that, through the headers it
# includes, includes itself). Needs no build.
set -eu
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$top_srcdir/src"

tmp=$(mktemp "${TMPDIR:-/tmp}/trajfs-layers.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{ find . -name '*.[ch]'; echo ../python/trajfs/_trajfs.c; } | awk '
BEGIN {
    rank["common"] = 0; may["common"] = "common"
    rank["io"] = 1;     may["io"] = "io common"
    rank["format"] = 2; may["format"] = "format io common"
    rank["codec"] = 2;  may["codec"] = "codec common"
    rank["store"] = 3;  may["store"] = "store format codec common"
    rank["fs"] = 4;     may["fs"] = "fs store common"
    rank["cli"] = 4;    may["cli"] = "cli store common"
    rank["python"] = 4; may["python"] = "python store common"
}
function layer(path) { sub(/\/.*/, "", path); return path }
function allowed(from, to,   n, i, l) {
    n = split(may[from], l, " ")
    for (i = 1; i <= n; i++)
        if (l[i] == to)
            return 1
    return 0
}
function list(from,   s) {
    s = may[from]
    gsub(/ /, "/, ", s)
    return s "/"
}
{ # a file name: its includes
    nfiles++
    file = $0
    sub(/^\.\//, "", file)
    sub(/^\.\.\//, "", file) # the extension: python/...
    for (lineno = 1; (getline text < $0) > 0; lineno++)
        if (text ~ /^[ \t]*#[ \t]*include[ \t]*"/)
            include(file, lineno, text)
    close($0)
}
function include(file, lineno, target,   dir, where, from, to) {
    sub(/^[^"]*"/, "", target)
    sub(/".*/, "", target)
    if (target !~ /\//) { # beside the including file
        dir = file
        sub(/[^\/]*$/, "", dir)
        target = dir target
    }
    where = (file ~ /^python\// ? "" : "src/") file ":" lineno ": \"" target "\""
    from = layer(file)
    to = layer(target)
    if (!(from in rank))
        print where ": " from "/ is not a layer (tests/shell/layers.sh names them)"
    else if (!(to in rank))
        print where ": " to "/ is not a layer (tests/shell/layers.sh names them)"
    else if (!allowed(from, to))
        print where ": " (rank[to] < rank[from] ? "skips a layer" : \
            rank[to] > rank[from] ? "climbs a layer" : "crosses to the layer beside it") \
            ": " from "/ includes " list(from)
    nedge++
    edge_from[nedge] = file
    edge_to[nedge] = target
    edge_where[nedge] = where
    out[file, ++nout[file]] = target
    node[file] = node[target] = 1
}
# Tarjan: comp[v] names the strongly connected set of files v is in.
function visit(v,   i, w) {
    order[v] = low[v] = ++norder
    stack[++sp] = v
    onstack[v] = 1
    for (i = 1; i <= nout[v]; i++) {
        w = out[v, i]
        if (!(w in order)) {
            visit(w)
            if (low[w] < low[v])
                low[v] = low[w]
        } else if (onstack[w] && order[w] < low[v])
            low[v] = order[w]
    }
    if (low[v] == order[v]) {
        do {
            w = stack[sp--]
            onstack[w] = 0
            comp[w] = v
            size[v]++
        } while (w != v)
    }
}
END {
    if (!nfiles)
        exit 1
    for (v in node)
        if (!(v in order))
            visit(v)
    for (v in node) # members, in order, for the message
        if (size[comp[v]] > 1) {
            n = split(members[comp[v]], m, " ")
            s = ""
            for (i = 1; i <= n && m[i] < v; i++)
                s = s m[i] " "
            s = s v
            for (; i <= n; i++)
                s = s " " m[i]
            members[comp[v]] = s
        }
    for (i = 1; i <= nedge; i++) {
        c = comp[edge_from[i]]
        if (size[c] > 1 && comp[edge_to[i]] == c)
            print edge_where[i] ": in an include circle: " members[c]
    }
}' > "$tmp" || { echo "FAIL: layers: no sources read under $PWD" >&2; exit 1; }

[ -s "$tmp" ] || exit 0
sort -t: -k1,1 -k2,2n "$tmp" >&2
echo "FAIL: layers: $(wc -l < "$tmp") includes break the layers (README.md, Architecture)" >&2
exit 1
