#!/usr/bin/env bash
# Fails if a commit since BASE has a subject longer than 72 characters
# (CONTRIBUTING.md says why). Run it before you push or merge a branch:
#
#   scripts/check-commit-subjects.sh BASE [HEAD]
#
# e.g. scripts/check-commit-subjects.sh origin/main. Merge commits are
# checked too: their subject is the first thing `git log --oneline` shows.
set -euo pipefail
max=72
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 BASE [HEAD]" >&2
    exit 2
fi
base=$1 head=${2:-HEAD}
git rev-parse --verify --quiet "$base^{commit}" >/dev/null ||
    { echo "check-commit-subjects: no such commit: $base" >&2; exit 2; }

bad=0 total=0
while IFS=$'\t' read -r hash subject; do
    total=$((total + 1))
    len=${#subject}
    if [ "$len" -gt "$max" ]; then
        printf '%s: subject is %d characters (at most %d): %s\n' \
            "$hash" "$len" "$max" "$subject"
        bad=$((bad + 1))
    fi
done < <(git log --format='%h%x09%s' "$base..$head")
if [ "$bad" -gt 0 ]; then
    echo "check-commit-subjects: $bad of $total commit(s) since $base have a subject over $max characters" >&2
    exit 1
fi
echo "check-commit-subjects: $total commit(s) since $base, every subject at most $max characters"
