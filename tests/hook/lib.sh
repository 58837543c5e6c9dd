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

# swap_events TRACE NAME: the fake driver's trace of one process
# (FAKE_CUDA_TRACE_DIR) as events "<ns> <what> NAME", CLOCK_MONOTONIC, for
# `sort -n`: unit (a kernel or memset starts), out (a swap-out ends: a run
# of copies to the host, after which its memory is released), in_start /
# in_end (a swap-in, a run of copies back, starts / ends; its memory was
# made before), gone (its last kernel or memset ends).
swap_events() {
    sort -k2,2n "$1" | awk -v c="$2" '
        function flush() {
            if (run == "copy_dtoh") print run_end, "out", c
            if (run == "copy_htod") print run_end, "in_end", c
            run = ""
        }
        $1 == "copy_dtoh" || $1 == "copy_htod" {
            if ($1 != run) {
                flush(); run = $1; run_end = 0
                if (run == "copy_htod") print $2, "in_start", c
            }
            if ($3 > run_end) run_end = $3
            next
        }
        /^prefetch/ { next }
        { flush(); print $2, "unit", c; if ($3 > last) last = $3 }
        END { flush(); print last, "gone", c }'
}

# never_both_resident A B: reads swap_events of processes A and B, sorted;
# fails on a kernel of one while the other's memory is on the GPU or while
# its own is out, and on a swap-in that starts before the other left.
never_both_resident() {
    awk -v a="$1" -v b="$2" '
        function other(c) { return c == a ? b : a }
        $2 == "unit" { if (out[$3]) { print "kernel of " $3 " at " $1 " while swapped out"; bad++ }
                       if (on[other($3)]) { print "kernel of " $3 " at " $1 " while " other($3) " is resident"; bad++ }
                       on[$3] = 1 }
        $2 == "out" || $2 == "gone" { on[$3] = 0; out[$3] = ($2 == "out") }
        $2 == "in_start" { if (on[other($3)]) { print "swap-in of " $3 " at " $1 " before " other($3) " left"; bad++ } }
        $2 == "in_end" { out[$3] = 0; on[$3] = 1 }
        END { exit bad > 0 }'
}
