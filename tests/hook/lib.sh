# shellcheck shell=bash
# tests/hook/lib.sh - for the fake-GPU tests that run several schedulers at
# once, one per scenario directory; sourced after SCHED (the scheduler
# binary) is set. Sets WORK, a fresh directory; at exit stops every
# scheduler it started and every process a script put in pids, and
# removes WORK.
#
#   start_scheduler_in DIR [VAR=VALUE...]  a scheduler on DIR's sockets,
#                                          logging to DIR/sched.log
#   await_schedulers DIR...                 each DIR's scheduler.sock, 10 s
#                                          at most (exits with FAIL if not)

UUID=GPU-fa4e0000-0000-0000-0000-000000000000
WORK=$(mktemp -d /tmp/nvshare-fake.XXXXXX)
scheds=() pids=()
trap 'kill "${pids[@]}" "${scheds[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT

start_scheduler_in() {
    local dir=$1; shift
    mkdir -p "$dir"
    env NVSHARE_SOCK_DIR="$dir" NVSHARE_GPUS=$UUID:16384 "$@" "$SCHED" \
        >"$dir/sched.log" 2>&1 &
    scheds+=($!)
}

await_schedulers() {
    local dir
    for dir in "$@"; do
        for _ in $(seq 500); do [ -S "$dir/scheduler.sock" ] && break; sleep 0.02; done
        [ -S "$dir/scheduler.sock" ] || { echo "FAIL: a scheduler did not start"; exit 1; }
    done
}
