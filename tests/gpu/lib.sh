# shellcheck shell=bash disable=SC2034 # variables for the tests that source it
# tests/gpu/lib.sh - shared preamble of the GPU tests; sourced, not run.
#
#   source "$(dirname "$0")/lib.sh"
#   gpu_work_dir                  # WORK: a temporary directory, removed at exit
#   gpu_build TARGET...           # configure $BUILD (tests off) and build TARGETs
#
# Sets ROOT (the repository), BUILD (${BUILD:-$ROOT/build-gpu}), LIB
# (libnvshare.so), SCHED_BIN and CTL_BIN. Sourcing sets no shell options:
# each test keeps its own (set -uo pipefail, or -euo).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
LIB=$BUILD/src/hook/libnvshare.so
SCHED_BIN=$BUILD/src/scheduler/nvshare-scheduler
CTL_BIN=$BUILD/src/ctl/nvsharectl

gpu_work_dir() {
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
}

gpu_build() {
    cmake -S "$ROOT" -B "$BUILD" -DNVSHARE_BUILD_TESTS=OFF >/dev/null || exit 1
    cmake --build "$BUILD" -j --target "$@" >/dev/null || exit 1
}
