#!/bin/sh
# call_graph.sh - fails when the files of a program call each other in a
# circle.
#
#   call_graph.sh [--through FILE] [--known "FILE..."] OBJECT...
#
# A file calls another when its object references, undefined, a symbol the
# other's object defines (as nm reads them). The graph is printed, then
# every file that reaches itself. Without --through any circle fails; with
# it, only a circle through FILE (e.g. main.c) does. With --known, a circle
# of the files listed alone is printed as known and passes; one through any
# other file fails.
through=
known=
while :; do
    case "$1" in
    --through) through=$2; shift 2 ;;
    --known) known=$2; shift 2 ;;
    *) break ;;
    esac
done
# CMake hands a list of objects over as one argument, joined by ';'.
set -f
old_ifs=$IFS
IFS=';'
set -- $*
IFS=$old_ifs
set +f
[ $# -gt 0 ] || { echo "usage: call_graph.sh [--through FILE] [--known \"FILE...\"] OBJECT..." >&2; exit 2; }

for obj in "$@"; do
    [ -r "$obj" ] || { echo "call_graph.sh: cannot read $obj" >&2; exit 2; }
done
for obj in "$@"; do
    file=$(basename "$obj" .o)
    "${NM:-nm}" -P "$obj" | awk -v f="$file" '$2 == "U" { print "U", f, $1; next }
                                       $2 ~ /^[A-TV-Z]$/ { print "D", f, $1 }'
done | awk -v through="$through" -v known="$known" '
$1 == "D" { owner[$3] = $2; next }
{ want[++n] = $2 " " $3 }
END {
    for (i = 1; i <= n; i++) {
        split(want[i], w, " ")
        to = owner[w[2]]
        if (to == "" || to == w[1])
            continue
        if (!((w[1], to) in edge)) {
            edge[w[1], to] = w[2]
            out[w[1]] = out[w[1]] " " to
            nodes[w[1]]; nodes[to]
        } else {
            edge[w[1], to] = edge[w[1], to] ", " w[2]
        }
    }
    for (e in edge) {
        split(e, ab, SUBSEP)
        printf "%s -> %s: %s\n", ab[1], ab[2], edge[e] | "sort"
    }
    close("sort")
    split(known, k, " ")
    for (i in k)
        is_known[k[i]]
    bad = 0
    for (start in nodes) {
        if (through != "" && start != through)
            continue
        path = circle(start)
        if (path == "")
            continue
        # A known file on a circle with an unknown one fails from the
        # unknown one.
        if (start in is_known) {
            print "known circle: " path
        } else {
            print "circle: " path
            bad = 1
        }
    }
    if (!bad)
        print "no circle" (through != "" ? " through " through : "")
    exit bad
}
# A path from start back to itself, or "": breadth first, so the shortest.
function circle(start,    queue, head, tail, seen, from, node, k, next_, i) {
    head = 1; tail = 0
    split("", seen); split("", from)
    k = split(out[start], next_, " ")
    for (i = 1; i <= k; i++)
        if (!(next_[i] in seen)) {
            seen[next_[i]]; from[next_[i]] = start; queue[++tail] = next_[i]
        }
    while (head <= tail) {
        node = queue[head++]
        if (node == start)
            return trace(start, from)
        k = split(out[node], next_, " ")
        for (i = 1; i <= k; i++)
            if (!(next_[i] in seen)) {
                seen[next_[i]]; from[next_[i]] = node; queue[++tail] = next_[i]
            }
    }
    return ""
}
function trace(start, from,    path, node) {
    path = start
    node = from[start]
    while (node != start) {
        path = node " -> " path
        node = from[node]
    }
    return start " -> " path
}'
