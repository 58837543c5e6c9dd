#!/usr/bin/env bash
# no_leftovers.sh COMMAND...: runs COMMAND (make test's ctest, in the test
# build) and then fails if a process it started is still running: a test must
# leave nothing behind. Every process the tests start inherits
# NVSHARE_TEST_RUN from here; one that dropped its environment is still caught
# by its executable, a program of this build. Leftovers are named and killed.
set -u
token=$$.$(date +%s%N)
NVSHARE_TEST_RUN=$token "$@"
rc=$?
build=$(pwd -P)

leftovers() {
    local dir exe
    for dir in /proc/[0-9]*; do
        exe=$(readlink "$dir/exe" 2>/dev/null) || exe=
        if [[ $exe == "$build"/* ]] ||
            grep -qzx "NVSHARE_TEST_RUN=$token" "$dir/environ" 2>/dev/null; then
            echo "${dir#/proc/}"
        fi
    done
}

pids=($(leftovers))
# A test's cleanup may have signalled a process that is still exiting.
for _ in $(seq 100); do
    alive=()
    for pid in "${pids[@]}"; do [ -d "/proc/$pid" ] && alive+=("$pid"); done
    pids=("${alive[@]}")
    [ ${#pids[@]} -eq 0 ] && exit $rc
    sleep 0.02
done
echo "FAIL: ${#pids[@]} process(es) started by the tests outlived them (killed now):" >&2
ps -o pid=,user=,args= -p "$(IFS=,; echo "${pids[*]}")" >&2
kill -KILL "${pids[@]}" 2>/dev/null
exit 1
