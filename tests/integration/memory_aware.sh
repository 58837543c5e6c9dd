#!/usr/bin/env bash
# Memory-aware scheduling end to end: the real daemon and simulated clients
# (sim_workload) on a GPU of 16 GiB.
#  - 4 + 4 + 4 GiB co-run in concurrent mode: each runs most of the time.
#  - 12 + 12 GiB with oversubscription alternate with explicit swaps: never
#    at once; the waiter is told why (WAIT_FOR_MEM); a client swaps in only
#    after the other swapped out, and runs nothing between its swap-out and
#    its swap-in. The same when a client's first swap-in finds no room
#    and leaves its memory out: it gives the lock back and runs only
#    after a later grant brought the memory back. A client that cannot
#    fit even alone is refused.
#  - auto mode: two light clients co-run once measured; two heavy ones never
#    do.
source "$(dirname "$0")/lib.sh"

GPU=GPU-mem-0
export NVSHARE_CONTEXT_OVERHEAD=256Mi

# run_sims SECONDS N [env...]: N workloads until now + SECONDS, traces and
# reports in $WORK/trace.i and $WORK/w.i.
run_sims() {
    local seconds=$1 n=$2; shift 2
    local until=$(( $(now_ns) + seconds * 1000000000 )) pids=()
    rm -f "$WORK"/trace.* "$WORK"/w.* "$WORK"/err.*
    for i in $(seq 1 "$n"); do
        env "$@" "$WORKLOAD_BIN" "$GPU" "$until" 1000 "$WORK/trace.$i" \
            >"$WORK/w.$i" 2>"$WORK/err.$i" &
        pids+=($!)
    done
    wait "${pids[@]}" || { cat "$WORK"/err.*; fail "a workload failed"; }
}

held() { field held_ms "$WORK/w.$1"; }

# overlaps FILE_A FILE_B: prints how many units of A and B overlap in time.
overlaps() {
    { grep "^$GPU" "$1" | sed 's/^[^ ]*/a/'; grep "^$GPU" "$2" | sed 's/^[^ ]*/b/'; } |
        sort -k2,2n | awk '
        { if (last_end[other[$1]] > $2) n++; if ($3 > last_end[$1]) last_end[$1] = $3 }
        BEGIN { other["a"] = "b"; other["b"] = "a" }
        END { print n + 0 }'
}

# --- co-location: 3 x 4 GiB on 16 GiB --------------------------------------
start_scheduler NVSHARE_GPUS=$GPU:16384 NVSHARE_SCHEDULING_MODE=concurrent
run_sims 3 3 SIM_MEMORY_MB=4096 NVSHARE_ENABLE_OVERSUB=1
for i in 1 2 3; do
    echo "  co-run: client $i held $(held $i) ms of 3000"
    check "$(held $i) > 2000" "co-run: client $i held only $(held $i) ms of 3 s"
done
[ "$(log_count 'waits for memory')" -eq 0 ] || fail "co-run: a client waited for memory"
pass "4 + 4 + 4 GiB co-run on 16 GiB"
stop_scheduler

# --- alternation: 12 + 12 GiB on 16 GiB ------------------------------------
start_scheduler NVSHARE_GPUS=$GPU:16384 NVSHARE_SCHEDULING_MODE=concurrent \
    NVSHARE_SWITCH_TIME_MODE=fixed NVSHARE_SWITCH_TIME_FIXED=700ms
run_sims 4 2 SIM_MEMORY_MB=12288 NVSHARE_ENABLE_OVERSUB=1 SIM_SWAP_MS=50
n=$(overlaps "$WORK/trace.1" "$WORK/trace.2")
[ "$n" -eq 0 ] || fail "alternation: $n units ran at once although 12 + 12 GiB do not fit"
log_has_at_least 'waits for memory' 1 || fail "alternation: no WAIT_FOR_MEM"
grep -q "waiting for GPU memory" "$WORK"/err.* || fail "alternation: the waiter did not log why"
outs=$(cat "$WORK"/trace.* | grep -c '^swap_out') ins=$(cat "$WORK"/trace.* | grep -c '^swap_in')
echo "  alternation: held $(held 1) / $(held 2) ms, $outs swap-outs, $ins swap-ins"
[ "$outs" -ge 2 ] && [ "$ins" -ge 1 ] || fail "alternation: expected swaps, saw $outs out, $ins in"
check "$(held 1) > 800 && $(held 2) > 800" "alternation: a client starved"
# Order of events: a client swaps in only once the other has swapped out
# (or exited), and runs nothing between its own swap-out and swap-in (a
# swap-in that left the memory out does not end it).
events_in_order() {
    { for i in 1 2; do
          awk -v c="$i" '$1 == "swap_in_short" { next }
                         $1 == "swap_out" { print $3, "out", c; next }
                         $1 == "swap_in" { print $2, "in_start", c; print $3, "in_end", c; next }
                         { print $2, "unit", c; if ($3 > last) last = $3 }
                         END { print last, "gone", c }' "$WORK/trace.$i"
      done; } | sort -k1,1n | awk '
        function other(c) { return c == 1 ? 2 : 1 }
        $2 == "unit" { if (out[$3]) { print "unit of " $3 " at " $1 " while swapped out"; bad++ }
                       if (on[other($3)]) { print "unit of " $3 " at " $1 " while " other($3) " resident"; bad++ }
                       on[$3] = 1 }
        $2 == "out" || $2 == "gone" { on[$3] = 0; out[$3] = ($2 == "out") }
        $2 == "in_start" { if (on[other($3)]) { print "swap-in of " $3 " before " other($3) " left"; bad++ } }
        $2 == "in_end" { out[$3] = 0; on[$3] = 1 }
        END { exit bad > 0 }'
}
events_in_order || fail "alternation: events out of order"
pass "12 + 12 GiB alternate with explicit swaps, in order"

# A swap-in that leaves the memory out (no room for it): the lock goes
# back at once and nothing runs; a later grant brings the memory back.
run_sims 4 2 SIM_MEMORY_MB=12288 NVSHARE_ENABLE_OVERSUB=1 SIM_SWAP_MS=50 SIM_SWAP_IN_SHORT=1
shorts=$(cat "$WORK"/trace.* | grep -c '^swap_in_short')
ins=$(cat "$WORK"/trace.* | grep -c '^swap_in ')
echo "  short swap-ins: $shorts, then $ins full; held $(held 1) / $(held 2) ms"
[ "$shorts" -ge 1 ] && [ "$ins" -ge 1 ] || fail "short swap-in: expected one short and one full swap-in"
events_in_order || fail "short swap-in: a client ran with its memory out"
check "$(held 1) > 800 && $(held 2) > 800" "short swap-in: a client starved"
pass "a swap-in that leaves memory out gives the lock back; a later grant brings it"

# Memory that could never be resident at once is refused, not thrashed.
until=$(( $(now_ns) + 1000000000 ))
if SIM_MEMORY_MB=15000 NVSHARE_ENABLE_OVERSUB=1 "$WORKLOAD_BIN" "$GPU" "$until" \
        >/dev/null 2>"$WORK/big.err"; then
    fail "a 15000 MiB oversubscribed client was admitted on a 14.4 GiB limit"
fi
log_has_at_least "even alone" 1 || fail "no log line for the client that cannot fit alone"
pass "a client that cannot fit even alone gets an error"
stop_scheduler

# --- auto: light pairs co-run, heavy pairs take turns ----------------------
start_scheduler NVSHARE_GPUS=$GPU:16384 NVSHARE_SCHEDULING_MODE=auto NVSHARE_TQ=500ms
run_sims 3 2 SIM_BUSY_PERMILLE=200
total=$(awk "BEGIN { print $(held 1) + $(held 2) }")
echo "  auto, light pair: held $(held 1) + $(held 2) = $total ms of 3000"
check "$total > 4000" "auto: two light clients did not co-run ($total ms of 2 x 3 s)"
run_sims 4 2 SIM_BUSY_PERMILLE=950
# Until their first load reports (1 s of warm-up, then 0.5 s of measure)
# they may share as a trial; after the first 2 s, never.
first=$(( $(cut -d' ' -f2 "$WORK"/trace.* | sort -n | sed -n 1p) + 2000000000 ))
for i in 1 2; do   # string comparison: 19-digit times exceed awk's doubles
    awk -v t="$first" 'length($2) > length(t) || $2 "" >= t ""' "$WORK/trace.$i" >"$WORK/late.$i"
done
n=$(overlaps "$WORK/late.1" "$WORK/late.2")
echo "  auto, heavy pair: held $(held 1) / $(held 2) ms, $n overlapping units after 2 s"
[ "$n" -eq 0 ] || fail "auto: two heavy clients ran at once ($n units)"
check "$(held 1) > 800 && $(held 2) > 800" "auto: a heavy client starved"
pass "auto mode co-runs light clients and time-slices heavy ones"
