#!/usr/bin/env bash
# Lint: the C sources' format (clang-format, with .clang-format) and
# cppcheck's analysis of src/. .ci/run calls it; run it before you push.
#
#   scripts/lint.sh         check: prints each finding, fails if there is one
#   scripts/lint.sh --fix   reformat the files in place, then run cppcheck
#
# The format is clang-format 14's (Debian 12): another version may format
# some lines differently. scripts/install-deps.sh test installs both tools.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
--fix) fix=1 ;;
"") ;;
*) echo "usage: $0 [--fix]" >&2; exit 2 ;;
esac
for tool in clang-format cppcheck; do
    command -v "$tool" >/dev/null ||
        { echo "lint: $tool not found (scripts/install-deps.sh test installs it)" >&2; exit 1; }
done

# The tracked C files (outside git: every one but the build trees').
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- 'src/*.[ch]' 'tests/*.[ch]' 'bench/*.[ch]')
else
    mapfile -t files < <(find src tests bench -name '*.[ch]' | sort)
fi

status=0
if [ "$fix" = 1 ]; then
    clang-format -i "${files[@]}"
    echo "lint: formatted ${#files[@]} files"
else
    # one line per file: how many places differ (clang-format --dry-run
    # "$file" shows them)
    unformatted=$(clang-format --dry-run "${files[@]}" 2>&1 |
        sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: code should be clang-formatted.*/\1/p' |
        uniq -c)
    if [ -n "$unformatted" ]; then
        echo "$unformatted" | awk '{ print "lint: " $2 ": " $1 " place(s) not formatted" }' >&2
        echo "lint: $(echo "$unformatted" | wc -l) file(s) not formatted as .clang-format says; scripts/lint.sh --fix formats them" >&2
        status=1
    fi
fi

# Findings of severity warning, style, performance and portability fail the
# run. A false positive is suppressed where it is, with its reason:
#   /* cppcheck-suppress <id> ; why it is wrong */
# Suppressed everywhere, each for a reason:
#   variableScope: the tree declares locals at the top of a block, by choice;
#   unreadVariable in the gRPC services: protobuf-c messages, whose fields
#     the generated pack functions read (cppcheck does not see them).
includes=()
while IFS= read -r dir; do includes+=(-I "$dir"); done < <(find src -type d | sort)
if ! cppcheck --quiet --error-exitcode=1 --std=c11 --inline-suppr \
    --enable=warning,style,performance,portability \
    --library=scripts/cppcheck.cfg \
    --suppress=missingIncludeSystem \
    --suppress=variableScope \
    --suppress=unreadVariable:src/device-plugin/service.c \
    --suppress=unreadVariable:src/dra-driver/service.c \
    "${includes[@]}" src; then
    echo "lint: cppcheck found the problems above" >&2
    status=1
fi
[ "$status" = 0 ] && echo "lint: ${#files[@]} files formatted; cppcheck clean"
exit "$status"
