# shellcheck shell=bash disable=SC2034 # variables for the tests that source it
# tests/gpu/lib.sh - shared preamble of the GPU tests; sourced, not run.
#
#   source "$(dirname "$0")/lib.sh"
#   gpu_work_dir                  # WORK: a temporary directory, removed at exit
#   gpu_build TARGET...           # configure $BUILD (tests off) and build TARGETs
#   sched_start LOG [VAR=VALUE...]  # a scheduler in $NVSHARE_SOCK_DIR, both
#                                 # sockets up (exits with its log if not)
#   sched_stop
#
# Sets ROOT (the repository), BUILD (${BUILD:-$ROOT/build-gpu}), LIB
# (libnvshare.so), SCHED_BIN and CTL_BIN. Sourcing sets no shell options:
# each test keeps its own (set -uo pipefail, or -euo).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
LIB=$BUILD/src/hook/libnvshare.so
SCHED_BIN=$BUILD/src/scheduler/nvshare-scheduler
CTL_BIN=$BUILD/src/ctl/nvsharectl
# A test's settings must not outlive it in /var/lib/nvshare (the machine is
# shared by the next run): schedulers started here keep no state file.
export NVSHARE_STATE_FILE=

gpu_work_dir() {
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
}

gpu_build() {
    cmake -S "$ROOT" -B "$BUILD" -DNVSHARE_BUILD_TESTS=OFF >/dev/null || exit 1
    cmake --build "$BUILD" -j --target "$@" >/dev/null || exit 1
}

SCHED=
sched_start() {
    local log=$1; shift
    rm -rf "$NVSHARE_SOCK_DIR"
    env NVSHARE_DEBUG=1 "$@" "$SCHED_BIN" >"$log" 2>&1 &
    SCHED=$!
    for _ in $(seq 200); do
        [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && [ -S "$NVSHARE_SOCK_DIR/control.sock" ] && return 0
        kill -0 "$SCHED" 2>/dev/null || break
        sleep 0.05
    done
    echo "the scheduler did not start:"; tail -n 20 "$log"; exit 1
}

sched_stop() {
    [ -n "$SCHED" ] || return 0
    kill "$SCHED" 2>/dev/null || true
    wait "$SCHED" 2>/dev/null || true
    SCHED=
}
